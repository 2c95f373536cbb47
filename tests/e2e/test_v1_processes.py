"""/v1 background processes: start, list, get (by id or pid), logs, SSE
stream with byte cursors, stdin, kill (the whole tree, TERM then KILL),
and their effect on idling out."""
import base64
import re
import threading
import time

import pytest

from helpers import (V1, assert_error, describe_pids, host_pids_with_uid_range,
                     sse_events, sse_final, wait_no_pids, wait_until)

ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def proc_url(sid, pid="", suffix=""):
    return f"/v1/sandbox/{sid}/process" + (f"/{pid}" if pid != "" else "") + suffix


def wait_ended(v1, sid, pid, timeout=10):
    info = wait_until(lambda: (lambda p: p if p["status"] != "running" else None)(
        v1.process(sid, pid)), timeout)
    assert info, f"process {pid} still running after {timeout} s"
    return info


def logs(v1, sid, pid):
    r = v1.get(proc_url(sid, pid, "/logs"))
    assert r.status_code == 200, r.text
    return r.json()


def test_start_get_and_list(v1, sid):
    r = v1.post(proc_url(sid), json={"command": "sleep 100000", "processId": "sleeper"})
    assert r.status_code == 201, r.text
    p = r.json()
    assert set(p) >= {"id", "pid", "command", "status", "startTime"}, p
    assert p["id"] == "sleeper" and p["status"] == "running"
    assert p["command"] == "sleep 100000"
    assert isinstance(p["pid"], int) and p["pid"] > 1
    assert ISO_MS.match(p["startTime"]), p
    assert "endTime" not in p and "exitCode" not in p
    assert v1.process(sid, "sleeper") == p
    assert v1.process(sid, p["pid"]) == p  # by pid too
    listed = v1.get(proc_url(sid)).json()["processes"]
    assert [x for x in listed if x["id"] == "sleeper"] == [p], listed
    # it is really running in the sandbox, with that pid
    assert "sleep 100000" in v1.sh(sid, f"cat /proc/{p['pid']}/cmdline | tr '\\0' ' '; "
                                        f"ps -e -o args")
    v1.delete(proc_url(sid, "sleeper"))


def test_generated_id_and_argv_display(v1, sid):
    p = v1.start_process(sid, argv=["sleep", "100000"])
    assert re.fullmatch(r"proc_[0-9a-f]{12}", p["id"]), p
    assert p["command"] == "sleep 100000"
    v1.delete(proc_url(sid, p["id"]))


def test_completed_and_failed(v1, sid):
    ok = v1.start_process(sid, command="echo fine", processId="ok")
    bad = v1.start_process(sid, command="echo no >&2; exit 3", processId="bad")
    ok, bad = wait_ended(v1, sid, "ok"), wait_ended(v1, sid, "bad")
    assert ok["status"] == "completed" and ok["exitCode"] == 0, ok
    assert bad["status"] == "failed" and bad["exitCode"] == 3, bad
    for p in (ok, bad):
        assert ISO_MS.match(p["endTime"]) and p["endTime"] >= p["startTime"], p
    # ended ones are still listed and their logs kept
    ids = {x["id"]: x["status"] for x in v1.get(proc_url(sid)).json()["processes"]}
    assert ids.get("ok") == "completed" and ids.get("bad") == "failed", ids
    assert logs(v1, sid, "bad")["stderr"] == "no\n"


def test_timeout_of_a_process(v1, sid):
    v1.start_process(sid, command="sleep 100", processId="t", timeoutMs=400)
    p = wait_ended(v1, sid, "t", timeout=5)
    assert p["status"] == "failed" and p["exitCode"] == 124, p


def test_process_exists_while_it_runs(v1, sid):
    v1.start_process(sid, command="sleep 100000", processId="dup")
    assert_error(v1.post(proc_url(sid), json={"command": "true", "processId": "dup"}),
                 409, "process_exists")
    v1.delete(proc_url(sid, "dup"))
    wait_ended(v1, sid, "dup")
    # an ended one's name can be used again
    p = v1.start_process(sid, command="echo again", processId="dup")
    assert p["status"] in ("running", "completed")
    wait_ended(v1, sid, "dup")
    assert logs(v1, sid, "dup")["stdout"] == "again\n"


@pytest.mark.parametrize("body", [
    {},
    {"command": "true", "argv": ["true"]},
    {"command": 5},
    {"argv": "true"},
    {"command": "true", "processId": ""},
    {"command": "true", "processId": "has space"},
    {"command": "true", "processId": "slash/y"},
    {"command": "true", "processId": 12},
    {"command": "true", "processId": "x" * 129},
    {"command": "true", "timeoutMs": "1"},
    {"command": "true", "env": {"A": 1}},
])
def test_bad_process_bodies_are_400(v1, sid, body):
    assert_error(v1.post(proc_url(sid), json=body), 400, "invalid_request")


def test_process_ignores_unknown_fields(v1, sid):
    p = v1.start_process(sid, command="true", processId="unk", restart="always")
    assert p["id"] == "unk"


def test_process_cwd_env_and_session(v1, sid):
    v1.sh(sid, "mkdir -p /workspace/pd/sub")
    sess = v1.post(f"/v1/sandbox/{sid}/session",
                   json={"cwd": "/workspace/pd", "env": {"SV": "s"}}).json()["id"]
    v1.start_process(sid, session=sess, command='pwd; echo "$SV $PV"', processId="ce",
                     cwd="sub", env={"PV": "p"})
    wait_ended(v1, sid, "ce")
    assert logs(v1, sid, "ce")["stdout"] == "/workspace/pd/sub\ns p\n"
    assert_error(v1.post(proc_url(sid), json={"command": "true"}, session="sess_nope"),
                 404, "session_not_found")
    assert_error(v1.post(proc_url(sid), json={"command": "true", "cwd": "/etc"}),
                 403, "path_outside_workspace")


def test_unknown_process_is_404(v1, sid):
    v1.sh(sid, "true")
    for method, suffix in [("GET", ""), ("DELETE", ""), ("GET", "/logs"),
                           ("GET", "/stream"), ("POST", "/stdin")]:
        for pid in ("nope", "99999"):
            r = v1.request(method, proc_url(sid, pid, suffix), data=b"x")
            assert_error(r, 404, "process_not_found")


def test_logs(v1, sid):
    v1.start_process(sid, command="printf 'out1\\n'; printf 'err1\\n' >&2; printf 'out2\\n'",
                     processId="lg")
    wait_ended(v1, sid, "lg")
    doc = logs(v1, sid, "lg")
    assert doc == {"stdout": "out1\nout2\n", "stderr": "err1\n", "truncated": False,
                   "cursorStart": 0, "cursorEnd": 15}, doc


LINES = "for i in $(seq 1000 1999); do echo line-$i; done"


@pytest.mark.parametrize("command", [
    LINES,  # a thousand writes
    # one write of all 10,000 bytes: the daemon gets them in one read
    f"{LINES} > /tmp/l; dd if=/tmp/l bs=10000 count=1 status=none",
], ids=["many-writes", "one-write"])
def test_logs_are_capped_oldest_first(make_daemon, sid, command):
    """--max-output caps each process's log exactly, however the output
    arrived: the last 4096 bytes are kept, the rest is dropped and said so."""
    api = V1(make_daemon("--max-output", "4K"))
    api.start_process(sid, command=command, processId="big")
    wait_ended(api, sid, "big")
    doc = logs(api, sid, "big")
    full = "".join(f"line-{i}\n" for i in range(1000, 2000))
    total = len(full)
    assert doc["truncated"] is True and doc["cursorEnd"] == total, \
        {k: v for k, v in doc.items() if k != "stdout"}
    assert doc["cursorStart"] == total - 4096
    assert doc["stdout"] == full[-4096:]
    # a stream from 0 says what it dropped, then replays what is kept
    with api.get(proc_url(sid, "big", "/stream?cursor=0"), stream=True, timeout=10) as r:
        events = list(sse_events(r))
    assert any(e.comment and "dropped" in e.comment for e in events), events[:3]
    out = b"".join(base64.b64decode(e.data) for e in events if e.event == "stdout")
    assert out.decode() == doc["stdout"]


def test_logs_of_all_processes_are_capped_per_sandbox(make_daemon, sid):
    """--max-process-logs bounds what a sandbox's processes keep together:
    the oldest ended process loses its output first, the newest keeps its
    own (--max-output) whole."""
    api = V1(make_daemon("--max-output", "64K", "--max-process-logs", "128K"))
    for n in range(4):
        api.start_process(sid, processId=f"p{n}",
                          command=f"head -c 100000 /dev/zero | tr '\\0' '{n}'")
        wait_ended(api, sid, f"p{n}")
    docs = [logs(api, sid, f"p{n}") for n in range(4)]
    kept = [len(d["stdout"]) for d in docs]
    assert sum(kept) <= 128 * 1024, kept
    assert kept[3] == kept[2] == 65536, kept
    assert kept[0] == kept[1] == 0, kept
    for n, d in enumerate(docs):
        assert d["truncated"] is True and d["cursorEnd"] == 100000, (n, d["cursorStart"])
        assert d["cursorStart"] == 100000 - kept[n]
        assert d["stdout"] == str(n) * kept[n]


def stream(v1, sid, pid, query="", headers=None, timeout=30):
    r = v1.get(proc_url(sid, pid, "/stream" + query), stream=True, headers=headers,
               timeout=timeout)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/event-stream")
    with r:
        return list(sse_events(r))


def chunks(events):
    return [(e.event, e.id, base64.b64decode(e.data)) for e in events
            if e.event in ("stdout", "stderr")]


def test_stream_replays_then_follows_live_then_exits(v1, sid):
    v1.start_process(sid, processId="st",
                     command="printf abc; sleep 0.6; printf def >&2; sleep 0.6; printf ghi")
    t0 = time.monotonic()
    events = stream(v1, sid, "st")
    assert chunks(events) == [("stdout", "3", b"abc"), ("stderr", "6", b"def"),
                              ("stdout", "9", b"ghi")], events
    live = [e.t - t0 for e in events if e.event in ("stdout", "stderr")]
    assert live[2] - live[0] >= 0.9, live  # delivered as written, not at the end
    assert sse_final(events) == ("exit", {"exit_code": 0, "status": "completed"})
    # after the end: a replay from a cursor, mid-chunk
    events = stream(v1, sid, "st", "?cursor=4")
    assert chunks(events) == [("stderr", "6", b"ef"), ("stdout", "9", b"ghi")], events
    assert sse_final(events)[1]["status"] == "completed"
    # Last-Event-ID resumes the same way
    events = stream(v1, sid, "st", headers={"Last-Event-ID": "6"})
    assert chunks(events) == [("stdout", "9", b"ghi")], events
    events = stream(v1, sid, "st", "?cursor=9")
    assert chunks(events) == [] and sse_final(events)[0] == "exit"


def test_stream_of_a_failed_process(v1, sid):
    v1.start_process(sid, processId="sf", command="echo x; exit 7")
    events = stream(v1, sid, "sf")
    assert sse_final(events) == ("exit", {"exit_code": 7, "status": "failed"})


@pytest.mark.parametrize("cursor", ["abc", "-1", "", "1x"])
def test_stream_bad_cursor_is_400(v1, sid, cursor):
    v1.start_process(sid, processId="bc", command="true")
    assert_error(v1.get(proc_url(sid, "bc", f"/stream?cursor={cursor}")), 400,
                 "invalid_request")


def test_stdin(v1, sid):
    v1.start_process(sid, processId="in",
                     command='while read -r l; do echo "got $l"; [ "$l" = bye ] && exit 0; done')
    for line in (b"hello\n", b"w\xc3\xb6rld\n"):
        r = v1.post(proc_url(sid, "in", "/stdin"), data=line)
        assert r.status_code == 200 and r.json() == {"written": True}, r.text
    assert wait_until(lambda: logs(v1, sid, "in")["stdout"] == "got hello\ngot wörld\n", 5), \
        logs(v1, sid, "in")
    assert v1.process(sid, "in")["status"] == "running"
    assert v1.post(proc_url(sid, "in", "/stdin"), data=b"bye\n").status_code == 200
    assert wait_ended(v1, sid, "in")["status"] == "completed"
    assert_error(v1.post(proc_url(sid, "in", "/stdin"), data=b"late\n"), 409, "process_ended")


def test_stdin_large_write(v1, sid):
    blob = b"z" * (600 << 10)  # more than a pipe holds: the answer waits for it
    v1.start_process(sid, processId="wc", command=f"head -c {len(blob)} | wc -c")
    r = v1.post(proc_url(sid, "wc", "/stdin"), data=blob, timeout=30)
    assert r.status_code == 200 and r.json() == {"written": True}, r.text
    assert wait_ended(v1, sid, "wc")["status"] == "completed"
    assert logs(v1, sid, "wc")["stdout"].strip() == str(len(blob))


def test_stdin_write_while_one_waits_is_busy_then_ended(v1, sid):
    """A process that never reads: a big write waits for room in the pipe;
    a second write meanwhile is 409 busy; when the process is killed, the
    waiting write is answered 409 process_ended."""
    v1.start_process(sid, processId="deaf", command="sleep 100000")
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", v1.post(
        proc_url(sid, "deaf", "/stdin"), data=b"y" * (1 << 20), timeout=30)))
    t.start()
    try:
        time.sleep(0.5)
        assert t.is_alive(), f"a 1 MiB write to a process that never reads ended: {box}"
        assert_error(v1.post(proc_url(sid, "deaf", "/stdin"), data=b"more"), 409, "busy")
    finally:
        v1.delete(proc_url(sid, "deaf"))
        t.join(15)
    assert_error(box["r"], 409, "process_ended")


def test_long_server_with_children_across_requests_then_killed(v1, sid):
    v1.create(sid)
    base = v1.host_uid(sid)
    before = set(host_pids_with_uid_range(base))
    v1.start_process(sid, processId="web", command=(
        "python3 -u -m http.server 8000 --bind 127.0.0.1 --directory /workspace & "
        "sleep 100789 & wait"))
    v1.put(f"/v1/sandbox/{sid}/file/index.html", data=b"<h1>served</h1>")
    fetch = ("python3 -c 'import time, urllib.request\n"
             "for i in range(50):\n"
             "    try:\n"
             "        print(urllib.request.urlopen(\"http://127.0.0.1:8000/index.html\").read().decode())\n"
             "        break\n"
             "    except OSError:\n"
             "        time.sleep(0.1)'")
    for _ in range(3):  # several requests, each a separate API call
        assert v1.sh(sid, fetch) == "<h1>served</h1>\n"
    listed = {p["id"]: p for p in v1.get(proc_url(sid)).json()["processes"]}
    assert listed["web"]["status"] == "running"
    assert v1.process(sid, listed["web"]["pid"])["id"] == "web"
    # its log, streamed: the three requests are in it
    r = v1.get(proc_url(sid, "web", "/stream?cursor=0"), stream=True, timeout=30)
    text = b""
    with r:
        for e in sse_events(r):
            if e.event in ("stdout", "stderr"):
                text += base64.b64decode(e.data)
            if text.count(b'"GET /index.html HTTP/1.1" 200') >= 3:
                break
    assert text.count(b'"GET /index.html HTTP/1.1" 200') == 3, text
    ps = v1.sh(sid, "ps -e -o args")
    assert "http.server" in ps and "sleep 100789" in ps, ps
    assert len(host_pids_with_uid_range(base)) >= len(before) + 3

    r = v1.delete(proc_url(sid, "web"))
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "killing" and r.json()["id"] == "web"
    p = wait_ended(v1, sid, "web", timeout=8)
    assert p["status"] == "killed", p
    ps = v1.sh(sid, "ps -e -o args")
    assert "http.server" not in ps and "sleep 100789" not in ps, ps
    left = wait_no_pids(base, timeout=5, ignore=before)
    assert not left, "the process tree outlived its kill:\n" + describe_pids(left)
    # the port is free again
    assert "refused" in v1.sh(sid, "python3 -c 'import urllib.request\ntry:\n"
                                   "    urllib.request.urlopen(\"http://127.0.0.1:8000/\")\n"
                                   "except OSError as e: print(\"refused\", e)'")
    # killing it again: 200, still killed
    r = v1.delete(proc_url(sid, "web"))
    assert r.status_code == 200 and r.json()["status"] == "killed", r.text


def test_kill_escalates_to_sigkill(v1, sid):
    v1.create(sid)
    base = v1.host_uid(sid)
    before = set(host_pids_with_uid_range(base))
    v1.start_process(sid, processId="stubborn",
                     command="trap '' TERM; sleep 100999 & sleep 100998; wait")
    assert wait_until(lambda: "sleep 100998" in v1.sh(sid, "ps -e -o args"), 5)
    t0 = time.monotonic()
    r = v1.delete(proc_url(sid, "stubborn"))
    assert r.status_code == 200 and r.json()["status"] == "killing", r.text
    time.sleep(2)
    assert v1.process(sid, "stubborn")["status"] == "running"  # TERM is ignored
    p = wait_ended(v1, sid, "stubborn", timeout=10)
    elapsed = time.monotonic() - t0
    assert p["status"] == "killed", p
    assert 4.5 <= elapsed < 10, elapsed
    assert "sleep 10099" not in v1.sh(sid, "ps -e -o args")
    left = wait_no_pids(base, timeout=5, ignore=before)
    assert not left, describe_pids(left)


def test_a_running_process_keeps_the_sandbox_awake(make_daemon, new_sid):
    api = V1(make_daemon("--sleep-after", "1s"))
    busy, idle = new_sid(), new_sid()
    api.start_process(busy, processId="bg", command="sleep 100000")
    api.sh(idle, "true")
    t0 = time.monotonic()
    assert wait_until(lambda: not api.running(idle), 5), "the idle sandbox did not stop"
    time.sleep(max(0.0, 3 - (time.monotonic() - t0)))
    assert api.running(busy) is True, "a sandbox with a running process idled out"
    assert api.process(busy, "bg")["status"] == "running"
    api.delete(proc_url(busy, "bg"))
    assert wait_until(lambda: not api.running(busy), 5), \
        "the sandbox stayed up after its process ended"
