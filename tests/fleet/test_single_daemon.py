"""Without --etcd a daemon is a single daemon, as before the fleet: no
Sandboxd-Node header, /health 200, POST /v1/admin/drain refused (409
not_a_fleet, 403 for a tenant that is not the operator), sandboxes served
whatever their ID. Needs neither etcd nor HAProxy."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from helpers import SBX_BIN, V1, Daemon, assert_error  # noqa: E402


@pytest.fixture
def tokens():
    fd, path = tempfile.mkstemp(prefix="sbx-fleet-tokens-", dir="/tmp")
    with os.fdopen(fd, "w") as f:
        f.write("tenant-token-0123456789 alice\noperator-token-0123456789 ops operator\n")
    yield path
    os.unlink(path)


def test_without_etcd_nothing_changes(tokens):
    d = Daemon(["--tokens", tokens])
    try:
        alice, ops = V1(d, "tenant-token-0123456789"), V1(d, "operator-token-0123456789")
        r = requests.get(d.url + "/health", timeout=10)
        assert r.status_code == 200 and "Sandboxd-Node" not in r.headers
        assert_error(alice.post("/v1/admin/drain"), 403, "forbidden")
        assert_error(ops.post("/v1/admin/drain"), 409, "not_a_fleet")
        alice.create("single-one")
        r = alice.exec_json("single-one", command="echo hi")
        assert r.status_code == 200 and r.json()["stdout"] == "hi\n"
        assert "Sandboxd-Node" not in r.headers
        assert requests.get(d.url + "/health", timeout=10).status_code == 200
    finally:
        d.close()


def test_fleet_flags_are_checked():
    """--etcd needs --advertise-url: the daemon refuses to start."""
    p = subprocess.run([SBX_BIN, "--etcd", "http://127.0.0.1:1", "--state-dir", "/nonexistent"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "--advertise-url" in p.stderr, p.stderr
