"""sbx, the command line (src/cli over libsbx, src/client), driven as a user
would: the real binary against a real daemon, asserting what it prints, its
exit status, and the files and processes it leaves."""
import hashlib
import json
import os
import pty
import re
import select
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import requests
import helpers

SBX_CLI = os.environ.get("SBX_CLI") or str(Path(helpers.SBX_BIN).parent / "sbx")
COMPLETION = helpers.REPO / "dist" / "completion" / "sbx.bash"
COMMANDS = ["create", "ls", "info", "stop", "rm", "exec", "sh", "cp", "ps",
            "logs", "kill", "run-code", "snapshot", "fork", "restore", "backup"]


@pytest.fixture(scope="module")
def home():
    """A HOME without a ~/.config/sbx/config of the machine's user."""
    with tempfile.TemporaryDirectory(prefix="sbx-home-") as h:
        yield h


def run(url, *args, home="/nonexistent", input=None, env=None, timeout=120):
    if not os.access(SBX_CLI, os.X_OK):
        pytest.fail(f"sbx not found at {SBX_CLI} (make all, or set SBX_CLI)")
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home}
    if url is not None:
        e["SBX_URL"] = url
    e.update(env or {})
    return subprocess.run([SBX_CLI, *map(str, args)], input=input,
                          stdin=None if input is not None else subprocess.DEVNULL,
                          capture_output=True, env=e, timeout=timeout)


@pytest.fixture
def sbx(daemon, home):
    return lambda *a, **kw: run(daemon.url, *a, home=home, **kw)


def ok(r):
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    return r


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --- sandboxes ------------------------------------------------------------------

def test_create_ls_info_stop_rm(sbx, sid):
    assert ok(sbx("create", sid, "--memory", 256, "--cpus", "0.5")).stdout == f"{sid}\n".encode()
    ls = ok(sbx("ls")).stdout.decode()
    assert re.search(rf"^{sid}\s+stopped\s", ls, re.M), ls
    assert sid in ok(sbx("ls", "-q")).stdout.decode().split()
    listed = json.loads(ok(sbx("ls", "--json")).stdout)
    mine = [s for s in listed["sandboxes"] if s["id"] == sid]
    assert mine and mine[0]["limits"]["memoryMB"] == 256
    info = json.loads(ok(sbx("info", sid, "--json")).stdout)
    assert info["id"] == sid and info["limits"]["cpus"] == 0.5
    assert "memory 256M, cpus 0.5" in ok(sbx("info", sid)).stdout.decode()

    ok(sbx("exec", sid, "--", "true"))
    assert json.loads(ok(sbx("info", sid, "--json")).stdout)["state"] == "running"
    ok(sbx("stop", sid))
    assert json.loads(ok(sbx("info", sid, "--json")).stdout)["state"] == "stopped"
    ok(sbx("rm", sid))
    gone = sbx("info", sid)
    assert gone.returncode == 1
    assert b"sandbox_not_found" in gone.stderr and b"HTTP 404" in gone.stderr
    ok(sbx("rm", sid))  # idempotent, as the API


def test_create_without_id_makes_one(sbx, v1):
    made = ok(sbx("create")).stdout.decode().strip()
    assert re.fullmatch(r"[a-z0-9-]{1,63}", made), made
    try:
        assert v1.get(f"/v1/sandbox/{made}").status_code == 200
    finally:
        v1.delete(f"/v1/sandbox/{made}")


def test_create_taken_id_fails_with_the_servers_message(sbx, sid):
    ok(sbx("create", sid))
    again = sbx("create", sid)
    assert again.returncode == 1
    assert b"sandbox_exists" in again.stderr and b"409" in again.stderr
    bad = sbx("create", "Not_Valid")
    assert bad.returncode == 1 and b"invalid_request" in bad.stderr


# --- exec -----------------------------------------------------------------------

def test_exec_separates_streams_and_propagates_the_exit_code(sbx, sid):
    r = sbx("exec", sid, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert r.returncode == 7
    assert r.stdout == b"out\n" and r.stderr == b"err\n"
    assert sbx("exec", sid, "--", "false").returncode == 1
    # the command's own flags are never taken for sbx's
    assert ok(sbx("exec", sid, "--", "ls", "--help")).stdout


def test_exec_streams_output_while_the_command_runs(sbx, daemon, home, sid, tmp_path):
    ok(sbx("create", sid))
    p = subprocess.Popen(
        [SBX_CLI, "exec", sid, "-c",
         "echo first; while [ ! -e /workspace/go ]; do sleep 0.05; done; echo second"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={"PATH": os.environ["PATH"], "HOME": home, "SBX_URL": daemon.url})
    try:
        # the command cannot end before "go" exists, so this line came live
        assert p.stdout.readline() == b"first\n"
        assert p.poll() is None
        (tmp_path / "go").write_bytes(b"")
        ok(sbx("cp", tmp_path / "go", f"{sid}:go"))
        out, err = p.communicate(timeout=60)
        assert out == b"second\n" and p.returncode == 0, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_exec_reads_stdin_from_a_pipe(sbx, sid):
    data = bytes(range(256)) * 100
    r = ok(sbx("exec", sid, "--", "sha256sum", input=data))
    assert r.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()
    assert ok(sbx("exec", "-n", sid, "--", "cat", input=b"ignored")).stdout == b""


def test_exec_shell_command_keeps_the_session(sbx, sid):
    ok(sbx("exec", sid, "-c", "cd /tmp && export GREETING=hi"))
    assert ok(sbx("exec", sid, "-c", 'pwd; echo "$GREETING"')).stdout == b"/tmp\nhi\n"
    r = ok(sbx("exec", "-w", "/workspace", "-e", "X=1", sid, "--", "sh", "-c", 'pwd; echo "$X"'))
    assert r.stdout == b"/workspace\n1\n"


def test_exec_timeout_and_refusals(sbx, sid):
    r = sbx("exec", "-t", 1, sid, "--", "sleep", "30")
    assert r.returncode == 124 and b"timed out" in r.stderr
    r = sbx("exec", "-w", "/etc", sid, "--", "true")
    assert r.returncode == 1 and b"path_outside_workspace" in r.stderr
    assert sbx("exec", sid).returncode == 2  # no command: usage
    r = sbx("exec", sid, "--", "no-such-command")
    assert r.returncode == 127 and b"exec_failed" in r.stderr


def test_exec_reads_a_terminal_only_when_asked(daemon, home, sid):
    def on_tty(*args, typed=b""):
        pid, fd = pty.fork()
        if pid == 0:
            os.environ.update({"SBX_URL": daemon.url, "HOME": home})
            os.execv(SBX_CLI, [SBX_CLI, "exec", *args])
        if typed:
            os.write(fd, typed)
        out = b""
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        _, status = os.waitpid(pid, 0)
        os.close(fd)
        return os.waitstatus_to_exitcode(status), out
    # without -i a terminal's stdin is not read: cat sees none and ends
    assert on_tty(sid, "--", "cat") == (0, b"")
    code, out = on_tty("-i", sid, "--", "wc", "-c", typed=b"abc\n\x04")
    assert code == 0 and out.split()[-1] == b"4", out


# --- cp -------------------------------------------------------------------------

def max_rss_kib(argv, env):
    """Runs argv under a fresh Python whose only child it is: (returncode,
    the child's peak RSS in KiB)."""
    probe = ("import resource, subprocess, sys\n"
             "r = subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL)\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
             "sys.exit(r.returncode)\n")
    r = subprocess.run([sys.executable, "-c", probe, *map(str, argv)], env=env,
                       capture_output=True, timeout=900)
    return r.returncode, int(r.stdout.split()[-1]) if r.stdout.split() else -1, r.stderr


def test_cp_large_file_round_trips(daemon, home, sbx, sid, tmp_path):
    """256 MiB by default to keep the suite's time down; the issue asks
    1 GiB (SBX_TEST_CP_MIB=1024): the path is the same streamed one at any
    size, and sbx's memory stays flat whatever the size."""
    mib = int(os.environ.get("SBX_TEST_CP_MIB", "256"))
    src, back = tmp_path / "big.bin", tmp_path / "back.bin"
    block = os.urandom(1 << 20)
    with open(src, "wb") as f:
        for i in range(mib):
            f.write(block[i % 4096:] + block[:i % 4096])
    env = {"PATH": os.environ["PATH"], "HOME": home, "SBX_URL": daemon.url}
    rc, rss, err = max_rss_kib([SBX_CLI, "cp", src, f"{sid}:data/"], env)
    assert rc == 0 and err == b"", err  # not a terminal: no progress bar
    assert 0 < rss < 64 << 10, f"sbx cp in peaked at {rss} KiB for {mib} MiB"
    sums = ok(sbx("exec", sid, "--", "sha256sum", "data/big.bin")).stdout.split()
    assert sums[0].decode() == sha256(src)
    rc, rss, err = max_rss_kib([SBX_CLI, "cp", f"{sid}:/workspace/data/big.bin", back], env)
    assert rc == 0, err
    assert 0 < rss < 64 << 10, f"sbx cp out peaked at {rss} KiB for {mib} MiB"
    assert back.stat().st_size == mib << 20
    assert sha256(back) == sha256(src)


def test_cp_directory_both_ways(sbx, sid, tmp_path):
    tree = tmp_path / "proj"
    (tree / "src" / "deep").mkdir(parents=True)
    (tree / "empty").mkdir()
    (tree / "README").write_text("hello\n")
    (tree / "src" / "main.py").write_text("print(1)\n")
    (tree / "src" / "deep" / "blob").write_bytes(os.urandom(100000))
    (tree / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (tree / "run.sh").chmod(0o755)
    ok(sbx("create", sid))
    ok(sbx("exec", sid, "--", "mkdir", "dest"))
    ok(sbx("cp", tree, f"{sid}:dest"))  # into an existing directory
    listing = ok(sbx("exec", sid, "-c", "(cd dest/proj && find . | sort)")).stdout.decode().split()
    assert listing == [".", "./README", "./empty", "./run.sh", "./src", "./src/deep",
                       "./src/deep/blob", "./src/main.py"]
    assert ok(sbx("exec", sid, "-c", "dest/proj/run.sh")).stdout == b"ran\n"

    out = tmp_path / "out"
    ok(sbx("cp", f"{sid}:dest/proj", out))
    for rel in ["README", "src/main.py", "src/deep/blob", "run.sh"]:
        assert (out / rel).read_bytes() == (tree / rel).read_bytes(), rel
    assert (out / "empty").is_dir()
    assert os.access(out / "run.sh", os.X_OK)
    assert not os.access(out / "README", os.X_OK)


def test_cp_file_into_a_directory_and_to_stdout(sbx, sid, tmp_path):
    f = tmp_path / "note.txt"
    f.write_text("a note\n")
    ok(sbx("exec", sid, "--", "mkdir", "-p", "docs"))
    ok(sbx("cp", f, f"{sid}:docs"))
    assert ok(sbx("cp", f"{sid}:docs/note.txt", "-")).stdout == b"a note\n"
    ok(sbx("cp", f, f"{sid}:renamed.txt"))
    assert ok(sbx("exec", sid, "--", "cat", "renamed.txt")).stdout == b"a note\n"
    d = tmp_path / "d"
    d.mkdir()
    ok(sbx("cp", f"{sid}:renamed.txt", d))
    assert (d / "renamed.txt").read_text() == "a note\n"


def test_cp_errors(sbx, sid, tmp_path):
    ok(sbx("create", sid))
    dst = tmp_path / "never"
    r = sbx("cp", f"{sid}:missing.txt", dst)
    assert r.returncode == 1 and b"file_not_found" in r.stderr
    assert not dst.exists()
    r = sbx("cp", tmp_path / "no-such-file", f"{sid}:x")
    assert r.returncode == 1 and b"No such file" in r.stderr
    r = sbx("cp", f"{sid}:../etc/passwd", tmp_path / "p")
    assert r.returncode == 1 and b"403" in r.stderr
    # an upload the daemon refuses before its body is in: its answer, not
    # a broken connection
    big = tmp_path / "big"
    big.write_bytes(b"\0" * (20 << 20))
    r = sbx("cp", big, f"{sid}:../x/")
    assert r.returncode == 1 and b"path_outside_workspace" in r.stderr, r.stderr
    assert sbx("cp", "a", "b").returncode == 2


def test_cp_draws_a_progress_bar_on_a_terminal(daemon, home, sid, tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(3 << 20))
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update({"SBX_URL": daemon.url, "HOME": home})
        os.execv(SBX_CLI, [SBX_CLI, "cp", str(src), f"{sid}:f.bin"])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, out
    assert b"f.bin" in out and b"100%" in out and b"3.0 MiB" in out, out


# --- processes ------------------------------------------------------------------

def test_ps_logs_kill(sbx, v1, sid):
    r = v1.post(f"/v1/sandbox/{sid}/process",
                json={"command": "echo one; echo two >&2; exit 3", "processId": "job"})
    assert r.status_code == 201, r.text
    # logs -f follows to the end and exits with the process's code
    f = sbx("logs", "-f", sid, "job")
    assert f.returncode == 3 and f.stdout == b"one\n" and f.stderr == b"two\n"
    logs = ok(sbx("logs", sid, "job"))
    assert logs.stdout == b"one\n" and logs.stderr == b"two\n"
    ps = ok(sbx("ps", sid)).stdout.decode()
    assert re.search(r"^job\s+\d+\s+(completed|failed)\s+3\s", ps, re.M), ps

    assert v1.post(f"/v1/sandbox/{sid}/process",
                   json={"argv": ["sleep", "1000"], "processId": "sleeper"}).status_code == 201
    listed = json.loads(ok(sbx("ps", sid, "--json")).stdout)["processes"]
    assert {p["id"]: p["status"] for p in listed}["sleeper"] == "running"
    ok(sbx("kill", sid, "sleeper"))
    ended = helpers.wait_until(
        lambda: v1.get(f"/v1/sandbox/{sid}/process/sleeper").json()["status"] != "running", 30)
    assert ended
    assert v1.get(f"/v1/sandbox/{sid}/process/sleeper").json()["status"] == "killed"
    r = sbx("kill", sid, "nope")
    assert r.returncode == 1 and b"process_not_found" in r.stderr
    r = sbx("logs", sid, "nope")
    assert r.returncode == 1 and b"process_not_found" in r.stderr


# --- run-code -------------------------------------------------------------------

def test_run_code_python(sbx, sid, tmp_path):
    good = tmp_path / "good.py"
    good.write_text("import sys\nprint('hello')\nprint('warn', file=sys.stderr)\n6 * 7\n")
    r = ok(sbx("run-code", sid, "--lang", "python", good))
    assert r.stdout == b"hello\n42\n" and r.stderr == b"warn\n"
    bad = tmp_path / "bad.py"
    bad.write_text("1 / 0\n")
    r = sbx("run-code", sid, bad)
    assert r.returncode == 1 and b"ZeroDivisionError" in r.stderr
    assert ok(sbx("run-code", sid, "-", input=b"print(2 + 2)\n")).stdout == b"4\n"


def test_run_code_leaves_no_context(sbx, v1, sid, tmp_path):
    f = tmp_path / "a.py"
    f.write_text("x = 1\n")
    ok(sbx("run-code", sid, f))
    assert v1.get(f"/v1/sandbox/{sid}/contexts").json()["contexts"] == []


# --- snapshots, fork, restore, backups -----------------------------------------

def test_snapshot_fork_restore_backup(sbx, v1, new_sid):
    if v1.get("/v1/snapshot").status_code == 404:
        pytest.skip("this daemon has no snapshots or backups (404 for /v1/snapshot): "
                    "the commands are tested once they are merged with them")
    a, b, c = new_sid(), new_sid(), new_sid()
    ok(sbx("exec", a, "-c", "echo one > f.txt"))
    snap = ok(sbx("snapshot", "create", "--name", "first", a)).stdout.decode().strip()
    assert snap.startswith("snap_")
    assert re.search(rf"^{snap}\s+{a}\s+first\s", ok(sbx("snapshot", "ls")).stdout.decode(), re.M)
    listed = json.loads(ok(sbx("snapshot", "ls", "--sandbox", a, "--json")).stdout)
    assert [s["id"] for s in listed["snapshots"]] == [snap]
    assert json.loads(ok(sbx("snapshot", "info", "--json", snap)).stdout)["sandboxId"] == a

    ok(sbx("exec", a, "-c", "echo two > f.txt"))
    assert ok(sbx("fork", a, b)).stdout == f"{b}\n".encode()
    assert ok(sbx("exec", b, "--", "cat", "f.txt")).stdout == b"two\n"
    ok(sbx("restore", a, snap))
    assert ok(sbx("exec", a, "--", "cat", "f.txt")).stdout == b"one\n"
    ok(sbx("create", "--from-snapshot", snap, c))
    assert ok(sbx("exec", c, "--", "cat", "f.txt")).stdout == b"one\n"

    bkp = ok(sbx("backup", "create", "--exclude", "*.log", a)).stdout.decode().strip()
    assert bkp.startswith("bkp_")
    assert bkp in ok(sbx("backup", "ls")).stdout.decode()
    ok(sbx("exec", b, "-c", "echo changed > f.txt"))
    ok(sbx("restore", b, bkp))  # into another sandbox
    assert ok(sbx("exec", b, "--", "cat", "f.txt")).stdout == b"one\n"

    ok(sbx("snapshot", "rm", snap))
    r = sbx("snapshot", "info", snap)
    assert r.returncode == 1 and b"snapshot_not_found" in r.stderr
    ok(sbx("backup", "rm", bkp))
    r = sbx("backup", "info", bkp)
    assert r.returncode == 1 and b"backup_not_found" in r.stderr
    assert sbx("restore", a, "nope").returncode == 2


# --- configuration, help, errors ------------------------------------------------

def test_config_file_and_token(make_daemon, tmp_path, sid):
    tokens = tmp_path / "tokens"
    tokens.write_text("cli-test-token-0123456789 alice\n")
    d = make_daemon("--tokens", tokens)
    home = tmp_path / "home"
    (home / ".config" / "sbx").mkdir(parents=True)
    r = run(d.url, "ls", home=str(home))
    assert r.returncode == 1 and b"unauthorized" in r.stderr and b"401" in r.stderr
    ok(run(d.url, "create", sid, home=str(home), env={"SBX_TOKEN": "cli-test-token-0123456789"}))
    (home / ".config" / "sbx" / "config").write_text(
        f"# sbx settings\nurl = {d.url}\ntoken = \"cli-test-token-0123456789\"\n")
    assert sid in ok(run(None, "ls", "-q", home=str(home))).stdout.decode().split()
    # the environment wins over the file, a flag over both
    r = run("http://127.0.0.1:1", "ls", home=str(home))
    assert r.returncode == 1 and b"cannot reach sandboxd" in r.stderr
    ok(run("http://127.0.0.1:1", "--url", d.url, "ls", home=str(home)))


@pytest.mark.parametrize("cmd", COMMANDS)
def test_help_on_every_command(cmd):
    # an unreachable daemon: --help asks it nothing
    r = run("http://127.0.0.1:1", cmd, "--help")
    assert r.returncode == 0 and r.stdout.startswith(f"Usage: sbx {cmd}".encode()), r


def test_usage_errors_and_an_unreachable_daemon():
    r = run("http://127.0.0.1:1", "frobnicate")
    assert r.returncode == 2 and b"unknown command" in r.stderr
    assert run(None, "--help").stdout.startswith(b"Usage: sbx")
    r = run("http://127.0.0.1:1", "ls")
    assert r.returncode == 1 and b"cannot reach sandboxd" in r.stderr
    r = run("ftp://x", "ls")
    assert r.returncode == 1 and b"http://" in r.stderr


def test_bash_completion(daemon, home, sid):
    ok(run(daemon.url, "create", sid, home=home))
    def complete_at(words):
        # words: what is typed, the last being the word under the cursor
        s = (f"source {COMPLETION}; COMP_WORDS=(sbx " +
             " ".join(f"'{w}'" for w in words) + f"); COMP_CWORD={len(words)}; "
             "_sbx; printf '%s\\n' \"${COMPREPLY[@]}\"")
        r = subprocess.run(["bash", "-c", s], capture_output=True, timeout=30,
                           env={"PATH": f"{Path(SBX_CLI).parent}:{os.environ['PATH']}",
                                "SBX_URL": daemon.url, "HOME": home})
        assert r.returncode == 0, r.stderr
        return r.stdout.decode().split()

    assert "exec" in complete_at(["ex"]) and "ls" not in complete_at(["ex"])
    assert sid in complete_at(["exec", sid[:5]])
    assert "--json" in complete_at(["ls", "--j"])


# --- sh (the PTY WebSocket) -------------------------------------------------------

def drive_sh(url, home, sid):
    """Runs `sbx sh` in a local pseudo-terminal as a user would: types a
    command, sees its output, resizes the window, exits with a status.
    Returns what the terminal showed."""
    import fcntl
    import struct
    import termios
    import time
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update({"SBX_URL": url, "HOME": home})
        os.execv(SBX_CLI, [SBX_CLI, "sh", sid])
    seen = b""

    def expect(pattern, timeout=60):
        nonlocal seen
        deadline = time.monotonic() + timeout
        while not re.search(pattern, seen):
            left = deadline - time.monotonic()
            assert left > 0, f"{pattern!r} never appeared in {seen[-2000:]!r}"
            r, _, _ = select.select([fd], [], [], left)
            if r:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""
                assert chunk, f"the terminal closed before {pattern!r}: {seen[-2000:]!r}"
                seen += chunk
    try:
        os.write(fd, b"echo hi-$((6*7))\r")
        expect(rb"hi-42")
        # a new window size reaches the sandbox's terminal (SIGWINCH)
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
        os.kill(pid, 28)  # SIGWINCH, as the terminal emulator would
        os.write(fd, b"stty size; echo size-done\r")
        expect(rb"33 111\s+size-done")
        # the local terminal is raw: ^C goes to the sandbox, not to sbx
        os.write(fd, b"echo armed; sleep 100\r")
        expect(rb"[\r\n]armed\r\n")
        os.write(fd, b"\x03")
        os.write(fd, b"echo after-$((1+1))\r")
        expect(rb"after-2")  # the sleep was interrupted
        os.write(fd, b"exit 7\r")
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        _, status = os.waitpid(pid, 0)
        pid = 0
        assert os.waitstatus_to_exitcode(status) == 7, seen[-2000:]
        return seen
    finally:
        if pid:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)


def test_sh_interactive_terminal(daemon, home, v1, sid):
    v1.post("/v1/sandbox", json={"id": sid})
    probe = requests.get(f"{daemon.url}/v1/sandbox/{sid}/pty")
    if probe.status_code == 404 and probe.json().get("code") == "not_found":
        pytest.skip("this daemon has no /v1/sandbox/{id}/pty route yet (404); "
                    "sbx sh is tested once it lands")
    drive_sh(daemon.url, home, sid)


def test_sh_without_a_terminal_route_says_so(daemon, home, sid):
    r = run(daemon.url, "sh", sid, home=home, input=b"exit 3\n")
    if r.returncode == 3:
        pytest.skip("the daemon serves terminals: covered by the interactive test")
    assert r.returncode == 1 and b"404" in r.stderr


def test_image_import_ls_info_create_rm(sbx, new_sid, tmp_path):
    import oci
    path = str(tmp_path / "bb")
    oci.oci_layout(path, [oci.busybox_layer()],
                   oci.config(env=["PATH=/usr/bin:/bin"], cmd=["sh"]))
    out = ok(sbx("image", "import", "bb-cli", f"oci-layout:{path}")).stdout.decode()
    assert re.match(r"^bb-cli sha256:[0-9a-f]{64}$", out.strip()), out
    assert re.search(r"^bb-cli\s+sha256:", ok(sbx("image", "ls")).stdout.decode(), re.M)
    info = json.loads(ok(sbx("image", "info", "--json", "bb-cli")).stdout)
    assert info["name"] == "bb-cli" and info["sandboxes"] == 0
    sid = new_sid()
    ok(sbx("create", "--image", "bb-cli", sid))
    r = ok(sbx("exec", sid, "--", "busybox", "echo", "in the image"))
    assert r.stdout == b"in the image\n"
    r = sbx("image", "rm", "bb-cli")  # in use
    assert r.returncode != 0 and b"image_in_use" in r.stderr, r
    ok(sbx("rm", sid))
    ok(sbx("image", "rm", "bb-cli"))
    r = sbx("image", "info", "bb-cli")
    assert r.returncode != 0 and b"image_not_found" in r.stderr, r
    assert sbx("image", "frob").returncode == 2
