"""Part B, syscall surface (checks 27-31): the seccomp policy, seen from
inside, against tests/isolation/seccomp-policy.txt and the host."""
import ctypes
import errno
import re
import secrets
import shutil

import pytest

import isolation_lib as lib

POLICY = lib.HERE / "seccomp-policy.txt"
SECCOMP_C = lib.REPO / "src" / "runtime" / "seccomp.c"
# past the last allocated number (469 on 6.18): unknown numbers are swept too
SWEEP_HI = 560


def read_policy_rules():
    """read_policy(), and {name: action} of the argument rules that refuse
    zero arguments too (their condition is "arg0 != ...")."""
    direct, always, cond, zero = {}, {}, set(), {}
    for line in POLICY.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 2)
        if parts[0] in ("default", "badarch"):
            direct[parts[0]] = parts[1]
        elif len(parts) == 3:
            cond.add((parts[0], parts[1]))
            if parts[2].startswith("arg0 != "):
                zero[parts[0]] = parts[1]
        else:
            assert parts[0] not in always, f"{parts[0]} twice in {POLICY}"
            always[parts[0]] = parts[1]
    return direct, always, cond, zero


def read_policy():
    """(directives {"default": ..., "badarch": ...}, {name: action} of the
    unconditional rules, {(name, action)} of the argument rules) from
    seccomp-policy.txt."""
    return read_policy_rules()[:3]


def source_policy():
    """The same, read out of src/runtime/seccomp.c: allowed[] and
    deny_eperm[], the default of the by-number filter, the argument
    rules."""
    src = SECCOMP_C.read_text()
    always = {}
    for arr, act in (("allowed", "ALLOW"), ("deny_eperm", "EPERM")):
        m = re.search(arr + r"\[\]\s*=\s*\{(.*?)\};", src, re.S)
        assert m, f"{arr}[] not found in seccomp.c"
        for n in re.findall(r'"(\w+)"', m.group(1)):
            assert n not in always, f"{n} in two lists of seccomp.c"
            always[n] = act
    m = re.search(r"v\[nr\] = SECCOMP_RET_ERRNO \| (\w+);", src)
    assert m, "the by-number filter's default not found in seccomp.c"
    direct = {"default": m.group(1)}
    if re.search(r"SCMP_FLTATR_ACT_BADARCH,\s*SCMP_ACT_KILL_PROCESS", src):
        direct["badarch"] = "KILL_PROCESS"
    cond = set()
    for act, name, nargs in re.findall(
            r"SCMP_ACT_ERRNO\((\w+)\),\s*SCMP_SYS\((\w+)\),\s*(\d+)", src):
        assert nargs != "0", f"an unconditional rule outside the lists: {name}"
        cond.add((name, act))
    return direct, always, cond


def test_27a_policy_file_matches_source():
    f_direct, f_always, f_cond = read_policy()
    s_direct, s_always, s_cond = source_policy()
    assert f_direct == s_direct, (f_direct, s_direct)
    assert f_always == s_always, (
        "seccomp-policy.txt and src/runtime/seccomp.c disagree:\n"
        f"  only in the file:   {sorted(set(f_always.items()) - set(s_always.items()))}\n"
        f"  only in seccomp.c:  {sorted(set(s_always.items()) - set(f_always.items()))}")
    assert f_cond == s_cond, (f_cond, s_cond)


def _verdicts(report):
    """{nr: "ALLOWED" or errno name} of a sweep."""
    assert report["SWEEP_CHILD"] == "EXIT:0", report
    out = {}
    for k, v in report.items():
        if k.startswith("SYS_") and v != "SKIPPED":
            out[int(k[4:])] = "ALLOWED" if v == "ALLOWED" else v.split(":", 1)[1]
    return out


def expected_verdicts(names, lo=0, hi=SWEEP_HI):
    """{nr: "ALLOWED" or errno} the policy file gives every number of the
    sweep: its rule for the names it has (x86_64 names, from the kernel
    headers; an argument rule that refuses zero arguments wins), its
    default for every other number, named or not."""
    direct, always, _, zero = read_policy_rules()
    exp = {}
    for nr in range(lo, hi + 1):
        if nr in (335, 336):  # uretprobe, uprobe: not filtered (probe.c)
            continue
        act = zero.get(names.get(nr)) or always.get(names.get(nr), direct["default"])
        exp[nr] = "ALLOWED" if act == "ALLOW" else act
    return exp


@pytest.fixture(scope="module")
def sweeps(daemon, probe_bin):
    """The sweep inside a sandbox and on the host, once for the module."""
    sb = lib.Sandbox(daemon, "iso-sweep-" + secrets.token_hex(4), probe_bin)
    try:
        inside = sb.probe("sweep", 0, SWEEP_HI)
    finally:
        sb.delete()
        lib.assert_sandbox_gone(daemon, sb)
    host = lib.run_host_probe(probe_bin, "sweep", 0, SWEEP_HI)
    return inside, host


def test_27_syscall_sweep_matches_policy(sweeps):
    inside, host = sweeps
    names = lib.syscall_names()
    # the host refuses nothing by seccomp: every verdict inside is the policy's
    host_blocked = {nr: v for nr, v in _verdicts(host).items() if v != "ALLOWED"}
    assert not host_blocked, f"the host itself refuses {host_blocked}: cannot compare"
    got = _verdicts(inside)
    exp = expected_verdicts(names)
    diff = {f"{nr} {names.get(nr, '?')}": (got.get(nr), want)
            for nr, want in exp.items() if got.get(nr) != want}
    assert not diff, ("sweep differs from seccomp-policy.txt ({nr name: (seen, policy)}): "
                      f"{diff}")
    assert int(inside["SWEEP_BLOCKED"]) == sum(v != "ALLOWED" for v in exp.values())


def test_27b_new_and_unknown_calls_refused(sweeps):
    """Calls newer than the policy, or than the libseccomp it is built with,
    and numbers nobody has allocated yet: ENOSYS, so that programs fall
    back; the named ones newer than libseccomp get the file's verdict."""
    inside, _ = sweeps
    got = _verdicts(inside)
    for nr, name in ((457, "statmount"), (458, "listmount"), (468, "file_getattr"),
                     (206, "io_setup"), (209, "io_submit"), (435, "clone3"),
                     (470, None), (512, None), (SWEEP_HI, None)):
        assert got[nr] == "ENOSYS", (nr, name, got[nr])
    # open_tree_attr (467) reshapes mounts: EPERM, as open_tree
    assert got[467] == "EPERM", got[467]
    _, always, _ = read_policy()
    names = lib.syscall_names()
    for nr, name in names.items():
        if name in always and lib.libseccomp_resolves(name) is False:
            want = "ALLOWED" if always[name] == "ALLOW" else always[name]
            assert got.get(nr) == want, (nr, name, got.get(nr), want)


SPOT = ["KEYCTL", "ADD_KEY", "REQUEST_KEY", "BPF", "PERF_EVENT_OPEN", "USERFAULTFD",
        "IO_URING_SETUP", "IO_URING_ENTER", "IO_URING_REGISTER", "KEXEC_LOAD",
        "KEXEC_FILE_LOAD", "INIT_MODULE", "FINIT_MODULE", "DELETE_MODULE", "ACCT",
        "SWAPON", "SWAPOFF", "REBOOT", "SYSLOG", "IOPL", "IOPERM", "QUOTACTL",
        "SETTIMEOFDAY", "CLOCK_SETTIME", "FANOTIFY_INIT", "VHANGUP"]


def test_28_spot_checks(sandbox):
    r = sandbox().probe("spot")
    bad = {k: r[k] for k in SPOT if r.get(k) not in ("EPERM", "ENOSYS")}
    assert not bad, f"not refused: {bad}"
    for fam in ("VSOCK", "ALG", "KEY"):
        assert r[f"SOCKET_{fam}"] in ("EAFNOSUPPORT", "EPERM"), (fam, r)
    assert r["SOCKET_UNIX"] == "OK" and r["SOCKET_INET"] == "OK", "controls"


def test_28b_socket_family_rule_ignores_high_bits(sandbox, probe_bin):
    host = lib.run_host_probe(probe_bin, "spot")
    if host.get("SOCKET_VSOCK") != "OK":
        pytest.skip(f"no AF_VSOCK in this kernel ({host.get('SOCKET_VSOCK')})")
    r = sandbox().probe("spot")
    for fam in ("VSOCK", "ALG", "KEY"):
        assert r[f"SOCKET_{fam}_HIGHBITS"] in ("EAFNOSUPPORT", "EPERM"), (fam, r)


def test_29_legacy_architectures_killed(sandbox, probe_bin, tmp_path):
    host = lib.run_host_probe(probe_bin, "i386", tmp_path / "i386")
    if host.get("INT80_GETPID") != "EXIT:0" or host.get("ELF32_EXEC") != "EXIT:42":
        pytest.skip(f"this kernel runs no i386 code itself (IA32 emulation off): {host!r}")
    r = sandbox().probe("i386")
    assert r["INT80_GETPID"] == "SIGNAL:SIGSYS", r
    assert r["INT80_SOCKETCALL"] == "SIGNAL:SIGSYS", r
    assert r["ELF32_EXEC"] == "SIGNAL:SIGSYS" and r["ELF32_OUTPUT"] == "", r
    assert host["ELF32_OUTPUT"] == "i386", host
    # x32 (syscall numbers with bit 30): killed too, or absent from the kernel
    assert r["X32_GETPID"] in ("SIGNAL:SIGSYS", "EXIT:1"), r


def test_30_personality_and_aslr(sandbox):
    r = sandbox().probe("personality")
    assert r["RANDOMIZE_VA_SPACE"] == "2", r
    assert r["PERS_ADDR_NO_RANDOMIZE"] == "EPERM", r
    assert r["PERS_READ_IMPLIES_EXEC"] == "EPERM", r
    assert r["PERS_ADDR_NO_RANDOMIZE_HIGHBITS"] == "EPERM", r
    assert r["PERS_LINUX"] == "OK", "control: PER_LINUX is allowed"
    assert r["ASLR_DEFAULT"] == "on", r


def test_30b_personality_bit31_cannot_disable_aslr(sandbox):
    r = sandbox().probe("personality")
    assert r["PERS_ADDR_NO_RANDOMIZE_BIT31"] in ("EPERM", "EINVAL"), r
    # refused, so the probe's children never re-exec with it ("UNKNOWN");
    # had it passed, the stacks must still differ
    assert r["ASLR_AFTER_BIT31"] in ("on", "UNKNOWN"), r


def test_31_locks_on_shared_inodes_do_not_cross(sandbox, probe_bin):
    a, b = sandbox(), sandbox()
    a.install_probe()
    for path in ("/usr/bin/env", "/etc/passwd"):  # host /usr; the shared image
        a.background(f"{lib.PROBE_PATH} lock-hold {path} 30")
        held = lib.wait_until(
            lambda: a.probe("lock-test", path).get("FLOCK_EX_NB") == "EAGAIN", 5)
        assert held, f"control: A's own lock on {path} not seen inside A"
        ra = a.probe("lock-test", path)
        assert ra["GETLK_WR"] == "CONFLICT" and ra["OFD_GETLK_WR"] == "CONFLICT", ra
        rb = b.probe("lock-test", path)
        assert rb["FLOCK_EX_NB"] == "OK", f"A's flock on {path} reached B: {rb}"
        assert rb["GETLK_WR"] == "UNLCK", rb
        assert rb["OFD_GETLK_WR"] == "UNLCK", rb
    host = lib.run_host_probe(probe_bin, "lock-test", "/usr/bin/env")
    assert host["FLOCK_EX_NB"] == "OK" and host["GETLK_WR"] == "UNLCK", host


def test_28c_no_device_events(sandbox, probe_bin):
    """A NETLINK_KOBJECT_UEVENT socket would receive the host's device
    events (issue 10 item 4): it cannot be made, whatever the high bits."""
    host = lib.run_host_probe(probe_bin, "uevent")
    if host.get("UEVENT_RAW") != "OK":
        pytest.skip(f"no uevent netlink on this host: {host!r}")
    r = sandbox().probe("uevent")
    for k in ("UEVENT_RAW", "UEVENT_DGRAM", "UEVENT_HIGHBITS"):
        assert r[k] == "EPROTONOSUPPORT", (k, r)
        assert f"{k}_BIND" not in r, r
    assert r["ROUTE"] == "OK", "control: NETLINK_ROUTE (ip(8)) still works"


def _host_io_setup():
    """io_setup(1) from this (host) process, the context destroyed again:
    "OK" or the errno name."""
    libc = ctypes.CDLL(None, use_errno=True)
    ctx = ctypes.c_ulong(0)
    if libc.syscall(206, 1, ctypes.byref(ctx)) != 0:  # io_setup
        return errno.errorcode.get(ctypes.get_errno(), "?")
    libc.syscall(207, ctx)  # io_destroy
    return "OK"


def test_28d_aio_pool_not_drained(sandbox):
    """Kernel AIO contexts come from the host-wide fs.aio-max-nr pool
    (issue 10 item 3): a sandbox that takes all it can leaves the host and a
    second sandbox their AIO -- refused in sandboxes with ENOSYS."""
    if _host_io_setup() != "OK":
        pytest.skip(f"the host itself cannot io_setup: {_host_io_setup()}")
    a, b = sandbox(), sandbox()
    a.install_probe()
    out = "/workspace/aio.out"
    a.background(f"{lib.PROBE_PATH} aio-hog 120", out=out)
    rep = lib.wait_until(
        lambda: (lambda t: t if "AIO_ERR=" in t else None)(a.sh(f"cat {out} || true")), 20)
    assert rep, "the AIO hog never reported"
    # while the hog holds whatever it got: the host still has AIO
    assert _host_io_setup() == "OK", f"a sandbox drained the host's AIO: {rep}"
    assert "AIO_CONTEXTS=0\n" in rep and "AIO_ERR=ENOSYS" in rep, rep
    r = b.probe("aio-hog", 0)
    assert r["AIO_CONTEXTS"] == "0" and r["AIO_ERR"] == "ENOSYS", r


# What a sandbox is for: a general-purpose userland under the allowlist.
# Each part runs only if the host (whose /usr the sandbox sees) has the tool.
SOFTWARE = r"""
set -e; cd /workspace; have() { command -v "$1" >/dev/null; }
echo start; ls -la / >/dev/null; cp -a /etc /tmp/etc; sort --parallel=2 /etc/passwd >/dev/null
tar czf /tmp/etc.tgz -C /tmp etc; have xz && xz -T2 -k /tmp/etc.tgz; rm -rf /tmp/etc*
echo coreutils-ok
if have python3; then python3 -c "
import asyncio, multiprocessing, os, socket, sqlite3, subprocess, tempfile, threading
t = threading.Thread(target=lambda: None); t.start(); t.join()
assert subprocess.run(['true']).returncode == 0
with multiprocessing.Pool(2) as p: assert p.map(abs, [-1, -2]) == [1, 2]
async def f(): await asyncio.sleep(0); return 5
assert asyncio.run(f()) == 5
sqlite3.connect(':memory:').execute('select 1')
s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); s.close()
print('python-ok')"; fi
if have node; then node -e "
const cp = require('child_process'), fs = require('fs'), {Worker} = require('worker_threads');
cp.execSync('true'); fs.writeFileSync('/tmp/n', 'y'); fs.readFileSync('/tmp/n');
new Worker('process.exit(0)', {eval: true}).on('exit', c => {
  require('http').createServer().listen(0, function () { this.close(); console.log('node-ok'); });
});"; fi
if have git; then rm -rf g; git init -q g; cd g; git config user.email a@b; git config user.name a
  echo x > f; git add f; git commit -qm m; git gc -q; git log --oneline >/dev/null; cd ..; echo git-ok; fi
if have gcc; then printf '#include <pthread.h>\n#include <stdio.h>\nstatic void *f(void *a) { return a; }\nint main(void) { pthread_t t; pthread_create(&t, 0, f, 0); pthread_join(t, 0); puts("gcc-ok"); return 0; }\n' > h.c
  gcc -O2 -pthread h.c -o h; ./h; fi
if have dpkg-deb; then rm -rf pkg; mkdir -p pkg/DEBIAN pkg/usr/local/share/sbxt
  printf 'Package: sbx-test\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n' > pkg/DEBIAN/control
  echo hi > pkg/usr/local/share/sbxt/f; dpkg-deb --build pkg sbx.deb >/dev/null
  db=/tmp/dpkgdb; mkdir -p $db/info $db/updates $db/triggers; touch $db/status $db/available
  dpkg --admindir=$db -i sbx.deb >/dev/null; dpkg --admindir=$db -r sbx-test >/dev/null 2>&1; echo dpkg-ok; fi
if have apt-get; then apt-get --version >/dev/null; apt-cache policy >/dev/null; echo apt-ok; fi
echo end
"""


def test_27c_common_software_runs(sandbox, make_daemon):
    """The allowlist is the surface of a general-purpose Linux userland:
    shell, coreutils, python3 (threads, processes, asyncio, sockets), node
    (workers, child processes, a server), git, gcc and a pthread binary,
    dpkg installing and removing a package, apt. (A daemon of its own: the
    suite's limits are made for the resource checks.)"""
    d = make_daemon(["--max-body", "16M", "--exec-timeout", "300s"])
    res = sandbox(d).run(SOFTWARE, timeout=330)
    assert res["exitCode"] == 0, res
    out = res["stdout"]
    assert "coreutils-ok" in out and "end" in out, res
    for tool, mark in (("python3", "python-ok"), ("node", "node-ok"), ("git", "git-ok"),
                       ("gcc", "gcc-ok"), ("dpkg-deb", "dpkg-ok"), ("apt-get", "apt-ok")):
        if shutil.which(tool, path="/usr/bin:/bin:/usr/local/bin"):
            assert mark in out, (tool, res)
