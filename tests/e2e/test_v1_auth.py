"""Bearer tokens and tenants: 401 without a valid token, sandbox IDs scoped
per tenant, and the refusal to listen beyond loopback without tokens."""
import os
import socket
import subprocess
import tempfile

import pytest
import requests

from helpers import SBX_BIN, V1, Daemon, assert_error, free_port, remove_tree

ALPHA = "alpha-token-0123456789abcdef"
BETA = "beta-token-fedcba9876543210"


@pytest.fixture(scope="module")
def tenants():
    """A daemon with two tenants; yields (daemon, alpha client, beta client)."""
    fd, path = tempfile.mkstemp(prefix="sbx-e2e-tokens-", dir="/tmp")
    with os.fdopen(fd, "w") as f:
        f.write(f"# two tenants\n{ALPHA} alpha\n\n{BETA} beta\n")
    try:
        d = Daemon(["--tokens", path])
        try:
            yield d, V1(d, ALPHA), V1(d, BETA)
        finally:
            d.close()
    finally:
        os.unlink(path)


ROUTES = [
    ("GET", "/v1/sandbox", None),
    ("POST", "/v1/sandbox", {"id": "demo"}),
    ("GET", "/v1/sandbox/demo", None),
    ("DELETE", "/v1/sandbox/demo", None),
    ("GET", "/v1/sandbox/demo/running", None),
    ("POST", "/v1/sandbox/demo/stop", None),
    ("POST", "/v1/sandbox/demo/exec", {"command": "touch /workspace/pwned"}),
    ("GET", "/v1/sandbox/demo/file/secret.txt", None),
    ("PUT", "/v1/sandbox/demo/file/pwned", b"x"),
    ("DELETE", "/v1/sandbox/demo/file/secret.txt", None),
    ("POST", "/v1/sandbox/demo/persist", None),
    ("POST", "/v1/sandbox/demo/session", {}),
    ("POST", "/v1/sandbox/demo/process", {"command": "true"}),
    ("GET", "/v1/sandbox/demo/process", None),
    ("GET", "/v1/sandbox/demo/process/p/logs", None),
    ("GET", "/v1/no-such-endpoint", None),
    ("POST", "/api/rooms/demo/sandbox/exec", {"cmd": "touch /workspace/pwned"}),
]

BAD_AUTH = [
    None,
    f"Bearer {ALPHA}x",
    f"Bearer {ALPHA[:-1]}",
    "Bearer wrong-token-0123456789",
    f"bearer {ALPHA}",
    f"Basic {ALPHA}",
    ALPHA,
    "Bearer ",
]


@pytest.mark.parametrize("auth", BAD_AUTH, ids=range(len(BAD_AUTH)))
def test_missing_or_wrong_token_is_401(tenants, auth):
    d, alpha, _ = tenants
    alpha.put("/v1/sandbox/demo/file/secret.txt", data=b"alpha's")
    headers = {"Authorization": auth} if auth is not None else {}
    for method, path, body in ROUTES:
        kw = {"data": body} if isinstance(body, bytes) else {"json": body}
        r = requests.request(method, d.url + path, headers=headers, timeout=30, **kw)
        assert r.status_code == 401, f"{method} {path} with {auth!r}: {r.status_code} {r.text}"
        if path.startswith("/v1/"):
            assert_error(r, 401, "unauthorized")
    # nothing happened on alpha's side
    assert alpha.get("/v1/sandbox/demo/file/secret.txt").content == b"alpha's"
    assert_error(alpha.get("/v1/sandbox/demo/file/pwned"), 404, "file_not_found")
    assert "pwned" not in alpha.sh("demo", "ls /workspace")


def test_public_endpoints_need_no_token(tenants):
    d, _, _ = tenants
    r = requests.get(d.url + "/health", timeout=10)
    assert r.status_code == 200 and r.text.strip() == "ok"
    r = requests.get(d.url + "/v1/openapi.json", timeout=10)
    assert r.status_code == 200 and r.json()["openapi"].startswith("3.")


def test_same_sandbox_id_in_two_tenants(tenants, sid):
    d, alpha, beta = tenants
    a = alpha.create(sid, labels={"owner": "alpha"})
    b = beta.create(sid, labels={"owner": "beta"})  # no 409: another namespace
    assert a["id"] == b["id"] == sid
    assert alpha.put(f"/v1/sandbox/{sid}/file/mine.txt", data=b"alpha only").status_code == 201
    alpha.start_process(sid, processId="alpha-proc", command="sleep 100000")

    assert_error(beta.get(f"/v1/sandbox/{sid}/file/mine.txt"), 404, "file_not_found")
    assert beta.sh(sid, "ls -A /workspace; ps -e -o comm | grep -c '^sleep$' || true") \
        == "0\n"
    assert alpha.sh(sid, "ps -e -o comm | grep -c '^sleep$'") == "1\n"
    assert_error(beta.get(f"/v1/sandbox/{sid}/process/alpha-proc"), 404, "process_not_found")
    assert beta.get(f"/v1/sandbox/{sid}/process").json()["processes"] == []
    assert beta.info(sid)["labels"] == {"owner": "beta"}
    assert alpha.info(sid)["labels"] == {"owner": "alpha"}
    assert alpha.host_uid(sid) != beta.host_uid(sid)

    # lists hold only the caller's sandboxes
    only_b = beta.create()["id"]
    a_ids = [s["id"] for s in alpha.get("/v1/sandbox").json()["sandboxes"]]
    b_ids = [s["id"] for s in beta.get("/v1/sandbox").json()["sandboxes"]]
    assert sid in a_ids and sid in b_ids
    assert only_b in b_ids and only_b not in a_ids
    assert_error(alpha.get(f"/v1/sandbox/{only_b}"), 404, "sandbox_not_found")
    assert alpha.running(only_b) is False

    # beta deleting and stopping its own leaves alpha's untouched
    assert beta.post(f"/v1/sandbox/{sid}/stop").status_code == 200
    assert beta.delete(f"/v1/sandbox/{sid}").status_code == 204
    assert alpha.running(sid) is True
    assert alpha.process(sid, "alpha-proc")["status"] == "running"
    assert alpha.get(f"/v1/sandbox/{sid}/file/mine.txt").content == b"alpha only"
    assert_error(beta.get(f"/v1/sandbox/{sid}"), 404, "sandbox_not_found")
    alpha.delete(f"/v1/sandbox/{sid}")
    beta.delete(f"/v1/sandbox/{only_b}")


def run_daemon_expecting_refusal(args, timeout=120):
    """Runs sandboxd with args; asserts it exits non-zero without ever
    listening. Returns (exit status, stderr). The bound is generous: a
    loaded machine may take long to get to the refusal; only a daemon that
    never refuses waits it out."""
    base = tempfile.mkdtemp(prefix="sbx-e2e-", dir="/tmp")
    state = os.path.join(base, "state")
    os.mkdir(state, 0o700)
    port = free_port()
    args = [a.replace("PORT", str(port)) for a in args]
    proc = subprocess.Popen([SBX_BIN, "--state-dir", state, *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"sandboxd {args} kept running instead of refusing")
        with socket.socket() as s:
            s.settimeout(1)
            assert s.connect_ex(("127.0.0.1", port)) != 0, "something listens on the port"
        assert proc.returncode != 0, (proc.returncode, err)
        return proc.returncode, err.decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        remove_tree(base)


@pytest.mark.parametrize("addr", ["0.0.0.0:PORT", "[::]:PORT"])
def test_refuses_to_listen_beyond_loopback_without_tokens(addr):
    rc, err = run_daemon_expecting_refusal(["--listen", addr])
    assert "--tokens" in err, err


def test_refuses_a_bad_tokens_file(tmp_path):
    short = tmp_path / "short"
    short.write_text("tooshort alpha\n")
    rc, err = run_daemon_expecting_refusal(["--listen", "127.0.0.1:PORT",
                                            "--tokens", str(short)])
    assert str(short) in err, err
    bad_tenant = tmp_path / "tenant"
    bad_tenant.write_text("long-enough-token-0123 Alpha!\n")
    rc, err = run_daemon_expecting_refusal(["--listen", "127.0.0.1:PORT",
                                            "--tokens", str(bad_tenant)])
    assert str(bad_tenant) in err, err
