"""/v1 exec: SSE (the default) and JSON answers, argv and shell commands,
stdin, env, cwd, timeouts, output caps, signals, sessions, and what a
streaming client sees and causes (timing, keepalives, disconnects)."""
import base64
import hashlib
import json
import platform
import sys
import threading
import time

import pytest

import helpers
from helpers import (JSON_ACCEPT, V1, assert_error, describe_pids, host_pids_with_uid_range,
                     sse_events, sse_final, sse_output, wait_no_pids)

JSON_KEYS = {"exitCode", "stdout", "stderr", "timedOut", "truncated", "durationMs", "signal"}


def test_sse_is_the_default(v1, sid):
    r, events = v1.exec_sse(sid, {"command": "echo out; echo err >&2; exit 3"})
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/event-stream"), r.headers
    assert sse_output(events, "stdout") == b"out\n"
    assert sse_output(events, "stderr") == b"err\n"
    for e in events:
        if e.event in ("stdout", "stderr"):
            base64.b64decode(e.data, validate=True)
    kind, data = sse_final(events)
    assert kind == "exit"
    assert data == {"exit_code": 3, "timed_out": False, "truncated": False, "signal": None}


def test_sse_when_asked_for(v1, sid):
    r, events = v1.exec_sse(sid, {"argv": ["printf", "a\\nb"]},
                            headers={"Accept": "text/event-stream"})
    assert r.headers["Content-Type"].startswith("text/event-stream")
    assert sse_output(events) == b"a\nb"
    assert sse_final(events) == ("exit", {"exit_code": 0, "timed_out": False,
                                          "truncated": False, "signal": None})


def test_json_answer(v1, sid):
    r = v1.exec_json(sid, command="echo out; echo err >&2; exit 5")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    res = r.json()
    assert set(res) >= JSON_KEYS, res
    assert res["exitCode"] == 5
    assert res["stdout"] == "out\n" and res["stderr"] == "err\n"
    assert res["timedOut"] is False
    assert res["truncated"] == {"stdout": False, "stderr": False}
    assert isinstance(res["durationMs"], int) and res["durationMs"] >= 0
    assert res["signal"] is None


def test_argv_runs_without_a_shell(v1, sid):
    res = v1.run(sid, argv=["echo", "$HOME", "a  b", ";", "|", "`id`"])
    assert res["stdout"] == "$HOME a  b ; | `id`\n", res


# Starts the daemon with signals ignored and blocked, as a careless
# launcher might: SIGINT (a shell's background job), SIGPIPE, SIGTERM,
# glibc's two internal signals (32 and 33, which glibc's own signal() and
# sigaction() refuse to touch), two real-time ones; SIGUSR1 and 34
# blocked. Raw syscalls, for the same reason. The test's teardown stops
# the daemon with SIGTERM and asserts a clean exit (a blocked signal is
# never discarded as ignored: the daemon's signalfd sees it).
IGNORE_THEN_EXEC = r"""
import ctypes, os, platform, sys
nr = {"x86_64": (13, 14), "aarch64": (134, 135)}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
class KSigaction(ctypes.Structure):
    _fields_ = [("handler", ctypes.c_void_p), ("flags", ctypes.c_ulong),
                ("restorer", ctypes.c_void_p), ("mask", ctypes.c_uint64)]
ign = KSigaction(1, 0, None, 0)  # SIG_IGN
for sig in (2, 13, 15, 32, 33, 34, 64):
    assert libc.syscall(nr[0], sig, ctypes.byref(ign), None, 8) == 0
block = ctypes.c_uint64((1 << (10 - 1)) | (1 << (34 - 1)))
assert libc.syscall(nr[1], 0, ctypes.byref(block), None, 8) == 0  # SIG_BLOCK
os.execv(sys.argv[1], sys.argv[1:])
"""


def test_commands_start_with_clean_signal_state(new_sid):
    # nothing blocked, ignored or caught in a command (cat catches nothing
    # of its own), whatever the daemon was started with; init (pid 1)
    # blocks SIGCHLD alone, for its signalfd, and neither ignores nor
    # catches anything
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("raw signal syscalls for x86_64 and aarch64 only")
    d = helpers.Daemon(prefix=[sys.executable, "-c", IGNORE_THEN_EXEC])
    try:
        v1, sid = V1(d), new_sid()
        for _ in range(2):  # a fresh sandbox's first command, then a later one
            res = v1.run(sid, argv=["cat", "/proc/self/status", "/proc/1/status"])
            assert res["exitCode"] == 0, res
            got = [line for line in res["stdout"].splitlines()
                   if line.startswith(("Name:", "SigBlk:", "SigIgn:", "SigCgt:"))]
            zero = "0000000000000000"
            assert [" ".join(x.split()) for x in got] == [
                "Name: cat", f"SigBlk: {zero}", f"SigIgn: {zero}", f"SigCgt: {zero}",
                "Name: sandboxd-init", f"SigBlk: {1 << 16:016x}", f"SigIgn: {zero}",
                f"SigCgt: {zero}"], res["stdout"]
    finally:
        d.close()


def test_argv_searches_path_in_the_commands_env(v1, sid):
    v1.sh(sid, "mkdir -p /workspace/bin && printf '#!/bin/sh\\necho tool:$1\\n' "
               "> /workspace/bin/mytool && chmod +x /workspace/bin/mytool")
    res = v1.run(sid, argv=["mytool", "x"], env={"PATH": "/workspace/bin:/usr/bin:/bin"})
    assert res["stdout"] == "tool:x\n", res
    r = v1.exec_json(sid, argv=["mytool", "x"])
    assert_error(r, 500, "exec_failed")


def test_command_that_cannot_run_is_exec_failed(v1, sid):
    doc = assert_error(v1.exec_json(sid, argv=["/no/such/program"]), 500, "exec_failed")
    assert "/no/such/program" in doc["error"]
    r, events = v1.exec_sse(sid, {"argv": ["/no/such/program"]})
    assert r.status_code == 200
    kind, data = sse_final(events)
    assert kind == "error", events
    assert data["code"] == "exec_failed" and data["error"], data


@pytest.mark.parametrize("body", [
    {},
    {"argv": ["true"], "command": "true"},
    {"argv": []},
    {"argv": "true"},
    {"argv": [1]},
    {"argv": [""]},
    {"command": ""},
    {"command": 5},
    {"command": ["true"]},
    {"command": "cat", "stdin": 5},
    {"command": "cat", "stdinBase64": "not base64!"},
    {"command": "cat", "stdin": "a", "stdinBase64": "YQ=="},
    {"command": "true", "env": ["A=1"]},
    {"command": "true", "env": {"A": 1}},
    {"command": "true", "cwd": 5},
    {"command": "true", "timeoutMs": "100"},
    {"command": "true", "timeoutMs": 0},
    {"command": "true", "timeoutMs": -5},
    {"command": "true", "maxOutputBytes": 0},
    {"command": "true", "maxOutputBytes": "10"},
])
def test_bad_exec_bodies_are_400(v1, sid, body):
    assert_error(v1.exec_json(sid, **body), 400, "invalid_request")
    r = v1.post(f"/v1/sandbox/{sid}/exec", json=body)  # the SSE default too
    assert_error(r, 400, "invalid_request")


def test_invalid_json_is_400(v1, sid):
    r = v1.post(f"/v1/sandbox/{sid}/exec", data=b'{"command": "echo hi"',
                headers={**JSON_ACCEPT, "Content-Type": "application/json"})
    assert_error(r, 400, "invalid_request")
    r = v1.post(f"/v1/sandbox/{sid}/exec", data=b'["echo"]',
                headers={**JSON_ACCEPT, "Content-Type": "application/json"})
    assert_error(r, 400, "invalid_request")


def test_unknown_fields_are_ignored(v1, sid):
    res = v1.run(sid, "echo ok", shell="zsh", priority=3, extra={"a": None})
    assert res["stdout"] == "ok\n", res


def test_stdin_text_and_base64(v1, sid):
    res = v1.run(sid, argv=["cat"], stdin="line 1\nline 2\n")
    assert res["stdout"] == "line 1\nline 2\n", res
    blob = bytes(range(256)) * 300
    res = v1.run(sid, argv=["sha256sum"], stdinBase64=base64.b64encode(blob).decode())
    assert res["stdout"].split()[0] == hashlib.sha256(blob).hexdigest(), res
    # without stdin a command reading it sees EOF at once
    res = v1.run(sid, argv=["wc", "-c"], timeoutMs=5000)
    assert res["stdout"].strip() == "0" and not res["timedOut"], res


def test_env_of_an_exec(v1, sid):
    res = v1.run(sid, 'echo "$A-$B"', env={"A": "1", "B": "two words"})
    assert res["stdout"] == "1-two words\n", res
    res = v1.run(sid, argv=["printenv", "A"], env={"A": "argv"})
    assert res["stdout"] == "argv\n", res


def test_exec_env_applies_to_that_command_only(v1, sid):
    v1.create(sid, env={"G": "base"})
    assert v1.run(sid, 'echo "$G $ONLY"', env={"G": "override", "ONLY": "once"})["stdout"] \
        == "override once\n"
    res = v1.run(sid, 'echo "$G ${ONLY-unset}"')
    assert res["stdout"] == "base unset\n", \
        f"an exec's env leaked into later commands of the session: {res}"


def test_cwd_relative_absolute_and_outside(v1, sid):
    v1.sh(sid, "mkdir -p /workspace/a/b")
    assert v1.run(sid, "pwd", cwd="a/b")["stdout"] == "/workspace/a/b\n"
    assert v1.run(sid, "pwd", cwd="/workspace/a")["stdout"] == "/workspace/a\n"
    assert v1.run(sid, "pwd", cwd="/workspace")["stdout"] == "/workspace\n"
    assert v1.run(sid, "pwd")["stdout"] == "/workspace\n"  # cwd is per command
    for bad in ("/tmp", "/", "..", "a/../../etc", "/workspace/../etc"):
        assert_error(v1.exec_json(sid, command="pwd", cwd=bad), 403,
                     "path_outside_workspace")
    # relative to the session's cwd
    sess = v1.post(f"/v1/sandbox/{sid}/session", json={"cwd": "/workspace/a"}).json()["id"]
    assert v1.run(sid, "pwd", cwd="b", session=sess)["stdout"] == "/workspace/a/b\n"


def test_timeout_kills_the_whole_tree(v1, sid):
    v1.sh(sid, "true")
    t0 = time.monotonic()
    res = v1.run(sid, "echo before; sleep 30 & sleep 31 & (sleep 32; echo never) ; wait",
                 timeoutMs=700)
    elapsed = time.monotonic() - t0
    assert res["exitCode"] == 124 and res["timedOut"] is True, res
    assert res["stdout"] == "before\n", res
    assert elapsed < 5, elapsed
    ps = v1.sh(sid, "ps -e -o args")
    assert "sleep 3" not in ps, ps


def test_timeout_in_sse(v1, sid):
    r, events = v1.exec_sse(sid, {"command": "sleep 30", "timeoutMs": 300})
    assert sse_final(events) == ("exit", {"exit_code": 124, "timed_out": True,
                                          "truncated": False, "signal": None})


def test_max_output_bytes_json(v1, sid):
    res = v1.run(sid, "head -c 5000 /dev/zero | tr '\\0' a; echo short >&2",
                 maxOutputBytes=100)
    assert res["stdout"] == "a" * 100, res
    assert res["stderr"] == "short\n"
    assert res["truncated"] == {"stdout": True, "stderr": False}, res
    assert res["exitCode"] == 0


def test_max_output_bytes_sse(v1, sid):
    r, events = v1.exec_sse(sid, {"command": "head -c 300000 /dev/zero | tr '\\0' b; "
                                             "echo e >&2", "maxOutputBytes": 1000})
    assert sse_output(events) == b"b" * 1000
    assert sse_output(events, "stderr") == b"e\n"
    kind, data = sse_final(events)
    assert (kind, data["exit_code"], data["truncated"]) == ("exit", 0, True), data


def test_killed_by_a_signal(v1, sid):
    res = v1.run(sid, "kill -9 $$")
    assert res["exitCode"] == 137 and res["signal"] == "KILL", res
    r, events = v1.exec_sse(sid, {"argv": ["sh", "-c", "kill -TERM $$"]})
    assert sse_final(events) == ("exit", {"exit_code": 143, "timed_out": False,
                                          "truncated": False, "signal": "TERM"})


def test_unknown_session_is_404(v1, sid):
    assert_error(v1.exec_json(sid, command="true", session="sess_000000000000"), 404,
                 "session_not_found")
    assert_error(v1.post(f"/v1/sandbox/{sid}/exec", json={"command": "true"},
                         session="nope"), 404, "session_not_found")


def test_session_create(v1, sid):
    v1.sh(sid, "mkdir -p /workspace/sub")
    r = v1.post(f"/v1/sandbox/{sid}/session", json={"cwd": "/workspace/sub",
                                                    "env": {"S": "v"}})
    assert r.status_code == 201, r.text
    s = r.json()
    assert s["id"].startswith("sess_") and s["cwd"] == "/workspace/sub", s
    assert v1.sh(sid, 'pwd; echo "$S"', session=s["id"]) == "/workspace/sub\nv\n"
    r = v1.post(f"/v1/sandbox/{sid}/session")  # no body at all
    assert r.status_code == 201 and r.json()["cwd"] == "/workspace", r.text
    other = r.json()["id"]
    assert other != s["id"]
    assert v1.sh(sid, 'pwd; echo "${S-unset}"', session=other) == "/workspace\nunset\n"


@pytest.mark.parametrize("body,status,code", [
    ({"cwd": "/etc"}, 403, "path_outside_workspace"),
    ({"cwd": "/workspace/../tmp"}, 403, "path_outside_workspace"),
    ({"cwd": 7}, 400, "invalid_request"),
    ({"env": {"A": 1}}, 400, "invalid_request"),
    ({"env": "A=1"}, 400, "invalid_request"),
])
def test_session_create_bad_input(v1, sid, body, status, code):
    assert_error(v1.post(f"/v1/sandbox/{sid}/session", json=body), status, code)


def test_sessions_keep_their_own_cwd_and_env(v1, sid):
    a = v1.post(f"/v1/sandbox/{sid}/session", json={}).json()["id"]
    b = v1.post(f"/v1/sandbox/{sid}/session", json={}).json()["id"]
    v1.sh(sid, "cd /tmp; export X=1", session=a)
    v1.sh(sid, "mkdir -p /workspace/bdir; cd bdir; export X=b", session=b)
    assert v1.sh(sid, 'pwd; echo "X=$X"', session=a) == "/tmp\nX=1\n"
    assert v1.sh(sid, 'pwd; echo "X=$X"', session=b) == "/workspace/bdir\nX=b\n"
    assert v1.sh(sid, 'pwd; echo "X=${X-unset}"') == "/workspace\nX=unset\n"
    # argv commands run in the session's cwd and env too
    res = v1.run(sid, argv=["sh", "-c", 'pwd; echo "X=$X"'], session=a)
    assert res["stdout"] == "/tmp\nX=1\n", res


def test_session_delete(v1, sid):
    s = v1.post(f"/v1/sandbox/{sid}/session", json={}).json()["id"]
    r = v1.delete(f"/v1/sandbox/{sid}/session/{s}")
    assert r.status_code == 204 and r.content == b""
    assert_error(v1.delete(f"/v1/sandbox/{sid}/session/{s}"), 404, "session_not_found")
    assert_error(v1.exec_json(sid, command="true", session=s), 404, "session_not_found")
    assert_error(v1.delete(f"/v1/sandbox/{sid}/session/sess_nope"), 404, "session_not_found")


def test_sessions_survive_a_daemon_restart(make_daemon, new_sid):
    d = make_daemon()
    api = V1(d)
    sid = new_sid()
    api.create(sid)
    a = api.post(f"/v1/sandbox/{sid}/session", json={"env": {"S": "v"}}).json()["id"]
    b = api.post(f"/v1/sandbox/{sid}/session", json={}).json()["id"]
    gone = api.post(f"/v1/sandbox/{sid}/session", json={}).json()["id"]
    api.sh(sid, "cd /tmp; export X=1", session=a)
    api.sh(sid, "mkdir -p /workspace/d; cd d; export Y=2")  # the default session
    assert api.delete(f"/v1/sandbox/{sid}/session/{gone}").status_code == 204

    d.kill()  # as a crash: nothing is written on the way out
    d.restart()
    assert api.sh(sid, 'pwd; echo "$S $X"', session=a) == "/tmp\nv 1\n"
    assert api.sh(sid, 'pwd; echo "${S-unset} ${X-unset}"', session=b) == \
        "/workspace\nunset unset\n"
    assert api.sh(sid, 'pwd; echo "$Y ${X-unset}"') == "/workspace/d\n2 unset\n"
    assert_error(api.exec_json(sid, command="true", session=gone), 404, "session_not_found")

    # a sandbox made again under the name has none of the old one's sessions
    assert api.delete(f"/v1/sandbox/{sid}").status_code == 204
    api.create(sid)
    d.kill()
    d.restart()
    assert_error(api.exec_json(sid, command="true", session=a), 404, "session_not_found")
    assert api.sh(sid, 'pwd; echo "${Y-unset}"') == "/workspace\nunset\n"


def test_session_delete_in_unknown_sandbox_is_404(v1, sid):
    assert_error(v1.delete(f"/v1/sandbox/{sid}/session/sess_x"), 404, "sandbox_not_found")


def test_deleting_a_busy_session_is_409(v1, sid):
    s = v1.post(f"/v1/sandbox/{sid}/session", json={}).json()["id"]
    box = {}
    t = threading.Thread(target=lambda: box.setdefault(
        "r", v1.exec_json(sid, command="sleep 1.5; echo done", session=s)))
    t.start()
    try:
        time.sleep(0.5)
        assert_error(v1.delete(f"/v1/sandbox/{sid}/session/{s}"), 409, "session_busy")
    finally:
        t.join()
    assert box["r"].json()["stdout"] == "done\n"
    assert v1.delete(f"/v1/sandbox/{sid}/session/{s}").status_code == 204


def timed_parallel(fns):
    out = [None] * len(fns)

    def one(i):
        out[i] = fns[i]()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(fns))]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - t0, out


def test_commands_of_one_session_run_one_after_another(v1, sid):
    v1.sh(sid, "true")
    cmd = "echo start $(date +%s.%N); sleep 1; echo end $(date +%s.%N)"
    elapsed, res = timed_parallel([lambda: v1.run(sid, cmd)] * 2)
    assert elapsed >= 1.9, elapsed
    spans = sorted([float(x) for x in (r["stdout"].split()[1], r["stdout"].split()[3])]
                   for r in res)
    assert spans[0][1] <= spans[1][0], f"overlapping commands: {spans}"


def test_different_sessions_run_in_parallel(v1, sid):
    v1.sh(sid, "true")
    s1 = v1.post(f"/v1/sandbox/{sid}/session", json={}).json()["id"]
    s2 = v1.post(f"/v1/sandbox/{sid}/session", json={}).json()["id"]
    elapsed, res = timed_parallel([lambda: v1.run(sid, "sleep 1; echo a", session=s1),
                                   lambda: v1.run(sid, "sleep 1; echo b", session=s2),
                                   lambda: v1.run(sid, "sleep 1; echo c")])
    assert [r["stdout"] for r in res] == ["a\n", "b\n", "c\n"]
    assert elapsed < 2.6, elapsed  # one after another would take 3 s


def test_sse_delivers_output_as_it_is_written(v1, sid):
    v1.sh(sid, "true")
    r = v1.post(f"/v1/sandbox/{sid}/exec", stream=True,
                json={"command": "echo first; sleep 1; echo second"})
    seen = []
    with r:
        for e in sse_events(r):
            if e.event in ("stdout", "exit"):
                seen.append((e.event, base64.b64decode(e.data) if e.event == "stdout"
                             else json.loads(e.data), e.t))
    assert [s[1] for s in seen[:2]] == [b"first\n", b"second\n"], seen
    assert seen[-1][1]["exit_code"] == 0
    t_first, t_second = seen[0][2], seen[1][2]
    # the first line was in the client's hands while the command still slept
    assert t_second - t_first >= 0.7, (t_first, t_second)


def test_sse_keepalive_comments_during_silence(v1, sid):
    v1.sh(sid, "true")
    r = v1.post(f"/v1/sandbox/{sid}/exec", stream=True,
                json={"command": "sleep 16.5; echo done"}, timeout=60)
    t0 = time.monotonic()
    events = []
    with r:
        events = list(sse_events(r))
    kinds = [e.event or ":" + e.comment for e in events]
    assert ":keepalive" in kinds, kinds
    ka = next(e for e in events if e.comment == "keepalive")
    assert 13 <= ka.t - t0 <= 16.4, ka.t - t0
    assert kinds.index(":keepalive") < kinds.index("stdout"), kinds
    assert sse_output(events) == b"done\n"


def disconnect_after_first_line(v1, sid, command):
    """Starts an SSE exec, reads its first stdout event, then drops the
    connection; returns the time of the drop."""
    r = v1.post(f"/v1/sandbox/{sid}/exec", stream=True, json={"command": command})
    # (the parser is kept referenced: a generator collected mid-stream makes
    # urllib3 close the connection early)
    events = sse_events(r)
    first = next(events)
    while first.event is None:
        first = next(events)
    assert first.event == "stdout" and base64.b64decode(first.data).startswith(b"started"), first
    sess = v1.post(f"/v1/sandbox/{sid}/session", json={}).json()["id"]
    assert "sleep 100123" in v1.sh(sid, "ps -e -o args", session=sess), \
        "the command ended while its SSE client was still connected"
    r.close()
    events.close()
    return time.monotonic()


def test_sse_client_disconnect_kills_the_command(v1, sid):
    v1.sh(sid, "true")
    base = v1.host_uid(sid)
    before = set(host_pids_with_uid_range(base))
    disconnect_after_first_line(
        v1, sid, "echo started; sleep 100123 & while :; do echo tick; sleep 0.2; done")
    left = wait_no_pids(base, timeout=5, ignore=before)
    assert not left, "the command outlived its SSE client:\n" + describe_pids(left)
    assert "sleep 10012" not in v1.sh(sid, "ps -e -o args")


def test_sse_client_disconnect_kills_a_silent_command(v1, sid):
    """The client closes its connection cleanly while the command prints
    nothing: the daemon must notice the closed connection, not only a
    failed write (keepalives come every 15 s)."""
    v1.sh(sid, "true")
    base = v1.host_uid(sid)
    before = set(host_pids_with_uid_range(base))
    disconnect_after_first_line(v1, sid, "echo started; sleep 100123")
    left = wait_no_pids(base, timeout=5, ignore=before)
    assert not left, "the command outlived its SSE client by 5 s:\n" + describe_pids(left)
