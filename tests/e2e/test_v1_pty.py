"""GET /v1/sandbox/{id}/pty: a shared terminal over WebSocket (spec v1.md,
"Terminal"). The client is tests/e2e/wsclient.py (stdlib). Shell prompts and
echoes are matched on markers that only the command's output can contain
(computed by the shell: "$((6*7))" prints 42, never the typed text)."""
import os
import re
import socket
import tempfile
import time

import pytest

from helpers import V1, Daemon, assert_error, wait_until
from wsclient import Closed, HandshakeError, Term, WS


def url(d, sid, query=""):
    return f"ws://127.0.0.1:{d.port}/v1/sandbox/{sid}/pty" + (f"?{query}" if query else "")


def open_term(d, sid, query="", **kw):
    t = Term(url(d, sid, query), **kw)
    t.wait_msg("ready")
    return t


def plain(out):
    """The output as text without terminal escapes and carriage returns."""
    text = re.sub(r"\x1b(\[[0-9;?>=]*[A-Za-z]|[()][0-9A-B]|[=>])", "",
                  out.decode(errors="replace"))
    return text.replace("\r", "")


def wait_prompt_after(t, marker):
    """Waits for the shell's prompt after marker (a full-screen program
    that ends flushes what was typed before it ended)."""
    t.wait_for(marker)
    t.wait_for(lambda x: x.out.rfind(b"@sandbox:") > x.out.rfind(marker))


def shell_pid(t, tag):
    """The shell's own pid, printed behind a tag made by the shell."""
    pat = re.compile(rb"%s-2-(\d+)-pid" % tag.encode())
    t.type(f"echo {tag}-$((1+1))-$$-pid\r")
    t.wait_for(lambda x: pat.search(x.out))
    return int(pat.search(t.out).group(1))


def test_tty_and_window_size(daemon, sid):
    t = open_term(daemon, sid, "cols=100&rows=30")
    try:
        t.run("tty; stty size; echo done-$((6*7))", b"done-42")
        assert re.search(r"\n/dev/pts/\d+\n30 100\n", plain(t.out)), t.out[-500:]
        t.ws.resize(132, 43)
        t.run("stty size; echo again-$((6*7))", b"again-42")
        assert "\n43 132\nagain-42" in plain(t.out), t.out[-500:]
    finally:
        t.close()


def test_shell_is_confined_like_any_command(daemon, sid):
    t = open_term(daemon, sid)
    try:
        t.run("id -u; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status;"
              " hostname; echo end-$((6*7))", b"end-42")
        out = plain(t.out)
        assert re.search(r"\n0\nCapEff:\s+0000000000000000\nNoNewPrivs:\s+1\n"
                         r"Seccomp:\s+2\nsandbox\nend-42", out), out[-600:]
    finally:
        t.close()


def test_session_cwd_and_environment(daemon, sid):
    v1 = V1(daemon)
    r = v1.post(f"/v1/sandbox/{sid}/session", json={"cwd": "/workspace/sub",
                                                    "env": {"GREETING": "hi-there"}})
    assert r.status_code == 201, r.text
    sess = r.json()["id"]
    v1.run(sid, "mkdir -p /workspace/sub")
    t = open_term(daemon, sid, f"session={sess}")
    try:
        t.run("pwd; echo \"$GREETING\"; echo $TERM; echo end-$((6*7))", b"end-42")
        assert "\n/workspace/sub\nhi-there\nxterm-256color\nend-42" in plain(t.out), t.out[-500:]
    finally:
        t.close()
    # the default session's terminal is another one, in /workspace
    t = open_term(daemon, sid)
    try:
        t.run("pwd; echo \"[$GREETING]\"; echo end-$((6*7))", b"end-42")
        assert "\n/workspace\n[]\nend-42" in plain(t.out), t.out[-500:]
    finally:
        t.close()
    r = V1(daemon).get(f"/v1/sandbox/{sid}/pty", params={"session": "sess_nope"},
                       headers={"Upgrade": "websocket", "Connection": "Upgrade",
                                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                                "Sec-WebSocket-Version": "13"})
    assert_error(r, 404, "session_not_found")


def test_vim_and_top_run(daemon, sid):
    t = open_term(daemon, sid, "cols=100&rows=30")
    try:
        t.type("top -d 0.5\r")
        t.wait_for(b"load average")
        t.type("q")
        wait_prompt_after(t, b"load average")
        t.run("echo top-done-$((6*7))", b"top-done-42")
        t.type("vim -u NONE /workspace/from-vim.txt\r")
        t.wait_for(b"from-vim.txt")
        t.type("iwritten in vim\x1b:wq\r")
        wait_prompt_after(t, b"written")
        t.run("cat /workspace/from-vim.txt; echo vim-done-$((6*7))", b"vim-done-42")
        assert "\nwritten in vim\nvim-done-42" in plain(t.out)
    finally:
        t.close()
    assert V1(daemon).run(sid, "cat /workspace/from-vim.txt")["stdout"] == "written in vim\n"


def test_two_clients_share_the_screen_and_a_late_one_gets_the_replay(daemon, sid):
    a = open_term(daemon, sid)
    b = open_term(daemon, sid)
    try:
        a.run("echo from-a-$((6*7))", b"from-a-42")
        b.wait_for(b"from-a-42")       # b sees what a typed and its output
        assert b"echo from-a-" in b.out
        b.run("echo from-b-$((7*7))", b"from-b-49")
        a.wait_for(b"from-b-49")
        c = open_term(daemon, sid)     # joins late: the replay has both
        try:
            c.wait_for(b"from-b-49")
            assert b"from-a-42" in c.out
            c.run("echo from-c-$((8*8))", b"from-c-64")
            a.wait_for(b"from-c-64")
            b.wait_for(b"from-c-64")
        finally:
            c.close()
    finally:
        a.close()
        b.close()


def test_shell_survives_all_clients_leaving(daemon, sid):
    v1 = V1(daemon)
    t = open_term(daemon, sid)
    pid = shell_pid(t, "first")
    # a job of this shell that writes a file once told to, after we left
    t.run("(while [ ! -e /workspace/go ]; do sleep 0.1; done; "
          "echo later > /workspace/late.txt) & echo bg-$((6*7))", b"bg-42")
    t.run("export MARK=kept; echo mark-$((6*7))", b"mark-42")
    t.close()
    time.sleep(0.5)
    v1.run(sid, "touch /workspace/go")
    assert wait_until(lambda: v1.run(sid, "cat /workspace/late.txt 2>/dev/null")["stdout"]
                      == "later\n", timeout=30)
    t = open_term(daemon, sid)
    try:
        t.wait_for(b"mark-42")         # the replay of before
        assert shell_pid(t, "second") == pid
        t.run("echo \"[$MARK]\"-$((6*7))", b"[kept]-42")
    finally:
        t.close()


def test_shell_ends_after_sleep_after_without_clients(make_daemon, sid):
    d = make_daemon("--sleep-after", "2s")
    t = open_term(d, sid)
    t.run("export MARK=old; echo set-$((6*7))", b"set-42")
    t.close()
    v1 = V1(d)
    assert wait_until(lambda: not v1.running(sid), timeout=60)
    t = open_term(d, sid)
    try:
        t.run("echo \"[${MARK:-none}]\"-$((6*7))", b"-42")
        assert b"[none]-42" in t.out
    finally:
        t.close()


def test_exit_is_reported_and_closes(daemon, sid):
    t = open_term(daemon, sid)
    t.type("exit 3\r")
    t.wait_msg("exit")
    assert next(m for m in t.msgs if m["type"] == "exit")["code"] == 3
    with pytest.raises(Closed) as e:
        while True:
            t.pump()
    assert e.value.code == 1000
    # the next client starts a new shell
    t = open_term(daemon, sid)
    try:
        t.run("echo fresh-$((6*7))", b"fresh-42")
    finally:
        t.close()


def test_a_client_that_does_not_read_is_dropped_and_the_others_go_on(daemon, sid):
    fast = open_term(daemon, sid, keep=4096)
    slow = open_term(daemon, sid, rcvbuf=4096)
    try:
        # far more output than the socket buffers and the daemon's bound
        fast.type("yes abcdefghijklmnopqrstuvwxyz0123456789 | head -c 24000000;"
                  " echo; echo end-$((6*7))\r")
        fast.wait_for(b"end-42", timeout=180)
        assert fast.total > 24000000
        # the slow one finds, after what it was sent, a close saying why
        with pytest.raises(Closed) as e:
            slow.wait_for(lambda x: False, timeout=120)
        assert e.value.code == 4008, e.value
        assert "too slow" in e.value.reason
        fast.run("echo still-here-$((6*7))", b"still-here-42")
    finally:
        fast.close()
        slow.close()


def test_plain_get_is_400(v1, sid):
    r = v1.get(f"/v1/sandbox/{sid}/pty")
    assert_error(r, 400, "websocket_required")


def test_bad_parameters_are_400(daemon, sid):
    for q in ["cols=0", "rows=5000", "cols=abc", "shell=bash%20-c%20x"]:
        with pytest.raises(HandshakeError) as e:
            WS(url(daemon, sid, q))
        assert e.value.status == 400, (q, e.value.body)
        assert e.value.json()["code"] == "invalid_request"


def test_foreign_origin_is_refused(daemon, sid):
    with pytest.raises(HandshakeError) as e:
        WS(url(daemon, sid), headers={"Origin": "http://evil.example"})
    assert e.value.status == 403
    assert e.value.json()["code"] == "origin_not_allowed"
    with pytest.raises(HandshakeError) as e:
        WS(url(daemon, sid), headers={"Origin": f"http://127.0.0.1:{daemon.port + 1}"})
    assert e.value.status == 403
    # the daemon's own origin (its console) is welcome
    t = Term(url(daemon, sid), headers={"Origin": f"http://127.0.0.1:{daemon.port}"})
    try:
        t.wait_msg("ready")
    finally:
        t.close()


TOKEN = "pty-token-0123456789abcdef"
OTHER = "pty-other-token-fedcba9876"


@pytest.fixture(scope="module")
def with_tokens():
    fd, path = tempfile.mkstemp(prefix="sbx-e2e-tokens-", dir="/tmp")
    with os.fdopen(fd, "w") as f:
        f.write(f"{TOKEN} alpha\n{OTHER} beta\n")
    try:
        d = Daemon(["--tokens", path])
        try:
            yield d
        finally:
            d.close()
    finally:
        os.unlink(path)


def test_token_or_ticket_is_required(with_tokens, sid):
    d = with_tokens
    for headers in [None, {"Authorization": "Bearer wrong"}]:
        with pytest.raises(HandshakeError) as e:
            WS(url(d, sid), headers=headers)
        assert e.value.status == 401, e.value.body
    t = Term(url(d, sid), headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        t.wait_msg("ready")
        t.run("echo tok-$((6*7))", b"tok-42")
    finally:
        t.close()
    # a ticket: once, for its sandbox and tenant only
    r = V1(d, TOKEN).post(f"/v1/sandbox/{sid}/pty/ticket")
    assert r.status_code == 201, r.text
    ticket = r.json()["ticket"]
    assert r.json()["ttlSeconds"] == 60
    t = Term(url(d, sid, f"ticket={ticket}"))
    try:
        t.wait_msg("ready")
        t.wait_for(b"tok-42")          # alpha's terminal: its replay
    finally:
        t.close()
    with pytest.raises(HandshakeError) as e:
        WS(url(d, sid, f"ticket={ticket}"))
    assert e.value.status == 401
    other = V1(d, TOKEN).post(f"/v1/sandbox/{sid}-x/pty/ticket").json()["ticket"]
    with pytest.raises(HandshakeError) as e:
        WS(url(d, sid, f"ticket={other}"))
    assert e.value.status == 401
    # beta's ticket for the same id opens beta's own sandbox, not alpha's
    beta = V1(d, OTHER).post(f"/v1/sandbox/{sid}/pty/ticket").json()["ticket"]
    t = Term(url(d, sid, f"ticket={beta}"))
    try:
        t.wait_msg("ready")
        t.run("echo beta-$((7*7))", b"beta-49")
        assert b"tok-42" not in t.out
    finally:
        t.close()
    r = V1(d).post(f"/v1/sandbox/{sid}/pty/ticket")
    assert r.status_code == 401


def test_ptys_come_from_the_sandboxs_own_devpts(make_daemon, sid):
    d = make_daemon("--max-ptys", "1")
    a = open_term(d, sid)
    try:
        a.run("ls /dev/pts; echo ls-$((6*7))", b"ls-42")
        assert "\n0  ptmx\nls-42" in plain(a.out), a.out[-300:]
        # the sandbox's one pty is taken: another session's terminal is refused
        r = V1(d).post(f"/v1/sandbox/{sid}/session", json={})
        assert r.status_code == 201, r.text
        with pytest.raises(HandshakeError) as e:
            WS(url(d, sid, f"session={r.json()['id']}"))
        assert e.value.status == 429, e.value.body
        assert e.value.json()["code"] == "limit"
        assert "pty" in e.value.json()["error"]
    finally:
        a.close()


def test_daemon_stops_cleanly_with_terminals_open(make_daemon, sid):
    d = make_daemon()
    a = open_term(d, sid)
    b = open_term(d, sid)
    a.run("echo open-$((6*7))", b"open-42")
    d.close()  # SIGTERM: must exit 0 with both clients still attached
    with pytest.raises(Closed):
        while True:
            b.pump()
    a.close()
    b.close()


def test_deleting_the_sandbox_ends_its_terminal(daemon, sid):
    t = open_term(daemon, sid)
    t.run("echo up-$((6*7))", b"up-42")
    r = V1(daemon).delete(f"/v1/sandbox/{sid}")
    assert r.status_code == 204, r.text
    t.wait_msg("exit")
    assert next(m for m in t.msgs if m["type"] == "exit")["code"] == -1
    err = next(m for m in t.msgs if m["type"] == "error")
    assert "stopped" in err["message"], err
    with pytest.raises(Closed) as e:
        while True:
            t.pump()
    assert e.value.code == 1000
    t.close()


def test_a_shell_that_cannot_run_says_why(daemon, sid):
    t = open_term(daemon, sid, "shell=/no/such/shell")
    t.wait_msg("exit")
    assert next(m for m in t.msgs if m["type"] == "exit")["code"] == -1
    err = next(m for m in t.msgs if m["type"] == "error")
    assert "/no/such/shell" in err["message"], err
    t.close()
    # the next client of that session gets the default shell again
    t = open_term(daemon, sid)
    try:
        t.run("echo ok-$((6*7))", b"ok-42")
    finally:
        t.close()
