"""/mcp with bearer tokens: 401 without one, and a session belongs to the
tenant that made it (another tenant's token cannot use its id, and its
sandbox is that tenant's). The protocol itself is tested with the official
SDK in tests/mcp."""
import json
import os
import tempfile

import pytest
import requests

from helpers import V1, Daemon

ALPHA = "alpha-token-mcp-0123456789"
BETA = "beta-token-mcp-9876543210"
ACCEPT = "application/json, text/event-stream"


@pytest.fixture(scope="module")
def tenants():
    fd, path = tempfile.mkstemp(prefix="sbx-e2e-tokens-", dir="/tmp")
    with os.fdopen(fd, "w") as f:
        f.write(f"{ALPHA} alpha\n{BETA} beta\n")
    try:
        d = Daemon(["--tokens", path])
        try:
            yield d
        finally:
            d.close()
    finally:
        os.unlink(path)


def rpc(d, body, token=None, sid=None):
    h = {"Content-Type": "application/json", "Accept": ACCEPT}
    if token:
        h["Authorization"] = f"Bearer {token}"
    if sid:
        h["Mcp-Session-Id"] = sid
    return requests.post(f"{d.url}/mcp", json=body, headers=h, timeout=60)


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}}


def sse_messages(r):
    return [json.loads(l[6:]) for l in r.text.splitlines() if l.startswith("data: ")]


def test_mcp_needs_a_token(tenants):
    assert rpc(tenants, INIT).status_code == 401
    assert rpc(tenants, INIT, token="wrong").status_code == 401


def test_session_belongs_to_its_tenant(tenants):
    r = rpc(tenants, INIT, token=ALPHA)
    assert r.status_code == 200
    sid = r.headers["Mcp-Session-Id"]
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "run_command", "arguments": {"command": "echo alpha"}}}
    assert rpc(tenants, call, token=BETA, sid=sid).status_code == 404
    r = rpc(tenants, call, token=ALPHA, sid=sid)
    assert r.status_code == 200
    (msg,) = sse_messages(r)
    assert msg["result"]["structuredContent"]["stdout"] == "alpha\n"
    alpha = [s["id"] for s in V1(tenants, ALPHA).get("/v1/sandbox").json()["sandboxes"]]
    beta = [s["id"] for s in V1(tenants, BETA).get("/v1/sandbox").json()["sandboxes"]]
    assert any(i.startswith("mcp-") for i in alpha)
    assert not any(i.startswith("mcp-") for i in beta)
    h = {"Authorization": f"Bearer {BETA}", "Mcp-Session-Id": sid}
    assert requests.delete(f"{tenants.url}/mcp", headers=h).status_code == 404
    h["Authorization"] = f"Bearer {ALPHA}"
    assert requests.delete(f"{tenants.url}/mcp", headers=h).status_code == 204
    alpha = [s["id"] for s in V1(tenants, ALPHA).get("/v1/sandbox").json()["sandboxes"]]
    assert not any(i.startswith("mcp-") for i in alpha)


def test_a_page_from_elsewhere_is_refused_without_tokens(daemon):
    h = {"Content-Type": "application/json", "Accept": ACCEPT,
         "Origin": "http://evil.example"}
    r = requests.post(f"{daemon.url}/mcp", json=INIT, headers=h, timeout=30)
    assert r.status_code == 403
    h["Origin"] = "http://localhost:5173"
    assert requests.post(f"{daemon.url}/mcp", json=INIT, headers=h, timeout=30).status_code == 200
