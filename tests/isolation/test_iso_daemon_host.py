"""The daemon on its host (issue 10, items 13 and 15): what it claims about
itself holds, seen from the host's /proc, and two daemons on one host never
share a uid range."""
import os
import subprocess
import threading
import time

import isolation_lib as lib

O_CLOEXEC = 0o2000000


def _fd_flags(pid):
    """{fd: (flags, target)} of every fd >= 3 of pid."""
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        if int(fd) < 3:
            continue
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                flags = [l for l in f if l.startswith("flags:")][0].split()[1]
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except (OSError, IndexError):
            continue  # closed meanwhile
        out[int(fd)] = (int(flags, 8), target)
    return out


def test_every_daemon_fd_is_close_on_exec(sandbox, daemon):
    """docs/security.md: every fd the daemon holds is O_CLOEXEC, so that
    nothing it execs (or that execs in a process it forked) inherits one."""
    sb = sandbox()
    sb.background("sleep 60")
    sb.sh("echo data > /workspace/f && cat /workspace/f")
    # a command in flight: its pipes and cgroup fds are held meanwhile
    box = {}
    t = threading.Thread(target=lambda: box.update(r=sb.exec("sleep 2; echo done")))
    t.start()
    time.sleep(0.5)
    seen = _fd_flags(daemon.pid)
    t.join()
    assert box["r"].status_code == 200, box["r"].text
    assert len(seen) >= 4, seen  # listening socket, epoll, signalfd, registry...
    leaky = {fd: v for fd, v in seen.items() if not v[0] & O_CLOEXEC}
    assert not leaky, f"daemon fds without O_CLOEXEC: {leaky}"


def test_sealed_reexec_not_skipped_by_the_environment():
    """SANDBOXD_SEALED in the starting environment must not skip the
    sealed re-exec (isolation.md A.8): the daemon decides from its own
    /proc/self/exe, which the environment cannot forge."""
    old = os.environ.get("SANDBOXD_SEALED")
    os.environ["SANDBOXD_SEALED"] = "1"
    try:
        d = lib.Daemon()
    finally:
        if old is None:
            del os.environ["SANDBOXD_SEALED"]
        else:
            os.environ["SANDBOXD_SEALED"] = old
    try:
        exe = os.readlink(f"/proc/{d.pid}/exe")
        assert exe.startswith("/memfd:sandboxd"), f"daemon runs from {exe}"
        assert "event=unsealed" not in d.log_text()
    finally:
        d.close()


# Calls that make a new fd, and what marks it close-on-exec in their
# arguments (dup2 is left out: it places an fd where an exec must find it).
_FD_CALLS = r"\b(open|openat|openat2|socket|socketpair|pipe2?|accept4?|dup|dup3|" \
            r"epoll_create1?|eventfd|timerfd_create|signalfd|memfd_create|" \
            r"inotify_init1?|fopen|sys_open_tree|fsopen|fsmount|pidfd_open)\s*\("
_CLOEXEC_MARKS = ("CLOEXEC", '"re"', '"we"', '"ae"', '"r+e"', '"w+e"')


def _call_args(text, start):
    """The text of a call's argument list, from its opening parenthesis."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return text[start:]


def test_every_fd_the_source_makes_is_close_on_exec():
    """The same claim, from the source (a transient fd, e.g. a dup() that
    lives for one function, cannot be caught in /proc): every call in src/
    that makes an fd asks for O_CLOEXEC (SOCK_, EFD_, TFD_, SFD_, MFD_,
    EPOLL_, IN_, OPEN_TREE_, F_DUPFD_CLOEXEC, fopen "e")."""
    import re
    bad = []
    for path in sorted((lib.REPO / "src").rglob("*.c")):
        text = path.read_text()
        # drop comments, keep line numbers
        text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), text,
                      flags=re.S)
        for m in re.finditer(_FD_CALLS, text):
            before = text[max(0, m.start() - 20):m.start()]
            if re.search(r"(static|int|void)\s+$", before) and "{" in text[m.end():m.end() + 200].split(";")[0]:
                continue  # a definition (sys_open_tree), not a call
            args = _call_args(text, m.end() - 1)
            if not any(k in args for k in _CLOEXEC_MARKS):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{path.relative_to(lib.REPO)}:{line}: {m.group(1)}{args[:80]}")
    assert not bad, "fds made without close-on-exec:\n" + "\n".join(bad)


# --- uid ranges (item 13) ---------------------------------------------------------

NSPAWN_RANGE = (524288, 1879048191)      # systemd-nspawn, nsresourced
FOREIGN_RANGE = (0x7FFE0000, 0x7FFEFFFF)  # systemd's "foreign" image owner


def _overlaps(base, lo_hi):
    return base <= lo_hi[1] and base + lib.UID_RANGE - 1 >= lo_hi[0]


def test_two_daemons_with_one_uid_base_get_disjoint_ranges(make_daemon, sandbox):
    base = 0xD0000000  # none of the suite's other daemons use it
    flags = [*lib.DAEMON_FLAGS, "--uid-base", str(base)]
    a, b = make_daemon(flags), make_daemon(flags)
    sa, sb_, sa2 = sandbox(a), sandbox(b), sandbox(a)
    for s in (sa, sb_, sa2):
        s.run("true")
    bases = sorted(s.uid_base for s in (sa, sb_, sa2))
    assert bases[0] >= base, bases
    assert bases[1] - bases[0] >= lib.UID_RANGE and bases[2] - bases[1] >= lib.UID_RANGE, \
        f"uid ranges shared between two daemons: {bases}"
    # what the kernel says: each sandbox's processes run in its own range
    for s in (sa, sb_):
        assert s.probe("ids")["UID_MAP"] == f"0:{s.uid_base}:65536"


def test_default_uid_base_is_outside_other_tools_ranges(make_daemon, sandbox):
    d = make_daemon(default_uid_base=True)
    s = sandbox(d)
    s.run("true")
    assert not _overlaps(s.uid_base, NSPAWN_RANGE), s.uid_base
    assert not _overlaps(s.uid_base, FOREIGN_RANGE), s.uid_base
    # the first ranges stay below 2^31, which some tools read as signed
    assert s.uid_base + lib.UID_RANGE <= 2 ** 31, s.uid_base


def test_state_dir_keeps_its_uid_base(make_daemon, sandbox):
    """A sandbox's files are owned by its range: restarting the daemon with
    another --uid-base must not give it other uids (it is refused), and
    without the flag the state dir's base is used, not the default."""
    d = make_daemon([*lib.DAEMON_FLAGS, "--uid-base", str(0xD1000000)])
    s = sandbox(d)
    s.sh("echo kept > /workspace/f")
    # a range of that base (which one: the state dir's own search order)
    before = s.probe("ids")["UID_MAP"]
    first = int(before.split(":")[1])
    assert first >= 0xD1000000 and (first - 0xD1000000) % 65536 == 0, before
    d.stop()
    other = [f for f in d.flags]
    i = other.index("--uid-base")
    other[i + 1] = str(0xD2000000)
    p = subprocess.Popen([d.binary, "--listen", f"127.0.0.1:{lib.free_port()}",
                          "--state-dir", d.state_dir, *other], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.terminate()
        p.communicate()
        raise AssertionError("daemon started with another uid base over old files")
    assert p.returncode != 0 and "uid base" in err and str(0xD1000000) in err, err
    # no flag: the state dir's own base, read from its files when it has no
    # record (a state dir of an older sandboxd, whose default base was 1<<30)
    os.unlink(os.path.join(d.state_dir, "uid-base"))
    del other[i:i + 2]
    d.flags = other
    d.start()
    assert s.sh("cat /workspace/f && touch /workspace/g && stat -c %u /workspace/g").split() \
        == ["kept", "0"]
    assert s.probe("ids")["UID_MAP"] == before
