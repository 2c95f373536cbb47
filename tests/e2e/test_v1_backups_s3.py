"""/v1 backups in S3-compatible object storage: a real S3-protocol server
(s3rver, from tests/s3's committed lock, installed by scripts/run-tests) on
loopback, path-style. Round trips (1 GiB, multipart), credentials from a
shared-credentials file and from the environment, wrong credentials, the
server going down in the middle, and two daemons sharing one prefix."""
import hashlib
import json
import os
import re
import signal
import subprocess
import tempfile
import time

import pytest
import requests

from helpers import REPO, V1, Daemon, assert_error, free_port, sse_events, wait_until

S3RVER = REPO / "tests" / "s3" / "node_modules" / ".bin" / "s3rver"
KEY, SECRET = "S3RVER", "S3RVER"  # s3rver's built-in account


class S3Server:
    """An s3rver process with its own data dir, port and log."""

    def __init__(self, bucket="backups"):
        if not S3RVER.exists():
            pytest.fail(f"{S3RVER} missing: scripts/run-tests installs it "
                        "(cd tests/s3 && npm ci)")
        self.dir = tempfile.mkdtemp(prefix="sbx-s3-", dir="/tmp")
        self.bucket = bucket
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(self.dir, "s3rver.log")
        self.proc = None
        self.start()

    def start(self):
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [str(S3RVER), "-d", os.path.join(self.dir, "data"), "-a", "127.0.0.1",
                 "-p", str(self.port), "--configure-bucket", self.bucket],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)

        def up():
            try:
                return requests.get(self.url, timeout=1).status_code == 200
            except requests.RequestException:
                return False
        assert wait_until(up, 30), f"s3rver did not start:\n{self.log()}"

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def log(self):
        with open(self.log_path, "rb") as f:
            return re.sub(rb"\x1b\[[0-9;]*m", b"", f.read()).decode("utf-8", "replace")

    def keys(self, prefix=""):
        """Every object key in the bucket (anonymous listing: s3rver
        allows it)."""
        r = requests.get(f"{self.url}/{self.bucket}?list-type=2&prefix={prefix}", timeout=10)
        assert r.status_code == 200, r.text
        return re.findall(r"<Key>([^<]*)</Key>", r.text)

    def close(self):
        self.stop()
        subprocess.run(["rm", "-rf", self.dir])


@pytest.fixture(scope="module")
def s3():
    s = S3Server()
    yield s
    s.close()


@pytest.fixture(scope="module")
def creds_file():
    fd, path = tempfile.mkstemp(prefix="sbx-e2e-aws-", dir="/tmp")
    with os.fdopen(fd, "w") as f:
        f.write(f"# as the AWS CLI writes it\n[other]\naws_access_key_id = NOPE\n"
                f"aws_secret_access_key = NOPE\n\n[default]\naws_access_key_id = {KEY}\n"
                f"aws_secret_access_key = {SECRET}\n")
    yield path
    os.unlink(path)


def s3_flags(s3, prefix, creds):
    return ["--backup-s3", f"s3://{s3.bucket}/{prefix}", "--s3-endpoint", s3.url,
            "--s3-addressing", "path", "--s3-credentials-file", creds]


@pytest.fixture(scope="module")
def d3(s3, creds_file):
    d = Daemon(s3_flags(s3, "e2e/main", creds_file))
    yield d
    d.close()


def backup(v1, sid, timeout=600, **body):
    r = v1.post(f"/v1/sandbox/{sid}/backup", json=body, timeout=timeout)
    assert r.status_code == 201, f"backup {sid}: {r.status_code} {r.text}"
    return r.json()


def restore(v1, sid, bid, timeout=600, **body):
    r = v1.post(f"/v1/sandbox/{sid}/restore", json={"backup": bid, **body}, timeout=timeout)
    assert r.status_code == 200, f"restore {sid}: {r.status_code} {r.text}"
    return r.json()


def test_s3_round_trip_small(d3, s3, new_sid):
    v1 = V1(d3)
    a, b = new_sid(), new_sid()
    v1.sh(a, "mkdir -p /workspace/src /workspace/tmp && echo hi > /workspace/src/a && "
             "echo t > /workspace/tmp/x && ln -s a /workspace/src/l")
    bk = backup(v1, a, excludes=["tmp"], ttlSeconds=3600)
    assert bk["store"] == "s3" and bk["sizeBytes"] > 0
    keys = s3.keys("e2e/main/")
    assert [k for k in keys if k.endswith(bk["id"] + ".tar.zst")], keys
    assert [k for k in keys if k.endswith(bk["id"] + ".json")], keys
    assert bk in v1.get("/v1/backup").json()["backups"]
    assert v1.get(f"/v1/backup/{bk['id']}").json() == bk
    r = v1.get(f"/v1/backup/{bk['id']}/archive")
    assert r.status_code == 200 and hashlib.sha256(r.content).hexdigest() == bk["sha256"]
    restore(v1, b, bk["id"])
    assert v1.sh(b, "cat /workspace/src/a; readlink /workspace/src/l; ls /workspace") == \
        "hi\na\nsrc\n"
    assert v1.delete(f"/v1/backup/{bk['id']}").status_code == 204
    assert not [k for k in s3.keys("e2e/main/") if bk["id"] in k]
    assert_error(v1.get(f"/v1/backup/{bk['id']}"), 404, "backup_not_found")


def test_s3_one_gib_round_trip_multipart(d3, s3, new_sid):
    """1 GiB of incompressible data: the archive goes up in parts, comes
    back whole, and the files' checksums are the same."""
    v1 = V1(d3)
    a, b = new_sid(), new_sid()
    want = v1.sh(a, "mkdir /workspace/g && cd /workspace/g && "
                    "head -c 1073741824 /dev/urandom > big && echo small > small && "
                    "sha256sum big small", timeout=600)
    log_before = s3.log().count("Stored part")
    bk = backup(v1, a, dir="/workspace/g", timeout=1200)
    assert bk["sizeBytes"] > 1 << 30
    parts = s3.log().count("Stored part") - log_before
    assert parts >= (1 << 30) // (8 << 20), f"multipart not used: {parts} parts"
    restore(v1, b, bk["id"], dir="/workspace/g", timeout=1200)
    assert v1.sh(b, "cd /workspace/g && sha256sum big small", timeout=600) == want
    v1.delete(f"/v1/backup/{bk['id']}")
    v1.sh(a, "rm -rf /workspace/g")
    v1.sh(b, "rm -rf /workspace/g")


def test_s3_wrong_credentials_clear_error(s3, make_daemon, new_sid, tmp_path):
    bad = tmp_path / "creds"
    secret = "not-the-secret-0123456789"
    bad.write_text(f"[default]\naws_access_key_id = WRONGKEY\naws_secret_access_key = {secret}\n")
    d = make_daemon(*s3_flags(s3, "e2e/wrong", str(bad)))
    v1 = V1(d)
    sid = new_sid()
    v1.sh(sid, "echo x > /workspace/x")
    r = v1.post(f"/v1/sandbox/{sid}/backup", json={})
    doc = assert_error(r, 502, "backup_store_denied")
    assert "InvalidAccessKeyId" in doc["error"], doc
    assert secret not in r.text
    assert_error(v1.get("/v1/backup"), 502, "backup_store_denied")
    assert secret not in d.log_text()
    assert not [k for k in s3.keys("e2e/wrong/")]


def test_s3_credentials_from_environment(s3, new_sid, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    d = Daemon(["--backup-s3", f"s3://{s3.bucket}/e2e/env", "--s3-endpoint", s3.url])
    try:
        v1 = V1(d)
        sid = new_sid()
        v1.sh(sid, "echo env > /workspace/e")
        bk = backup(v1, sid)
        assert [k for k in s3.keys("e2e/env/") if bk["id"] in k]
    finally:
        d.close()


def test_s3_missing_credentials_refuse_to_start(s3, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = str(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    p = subprocess.run([os.environ.get("SBX_BIN", str(REPO / "build" / "sandboxd")),
                        "--listen", f"127.0.0.1:{free_port()}", "--state-dir", str(state),
                        "--backup-s3", f"s3://{s3.bucket}/x", "--s3-endpoint", s3.url],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "no S3 credentials" in p.stderr, p.stderr


def test_s3_server_down_mid_upload(make_daemon, creds_file, new_sid):
    """The store goes away in the middle of a backup: the answer is a clean
    error, and once it is back no backup of it is listed."""
    s = S3Server()
    try:
        d = make_daemon(*s3_flags(s, "e2e/down", creds_file))
        v1 = V1(d)
        sid = new_sid()
        v1.sh(sid, "mkdir /workspace/big && head -c 300000000 /dev/urandom > /workspace/big/a",
              timeout=300)
        r = v1.post(f"/v1/sandbox/{sid}/backup", json={"dir": "/workspace/big"},
                    headers={"Accept": "text/event-stream"}, stream=True, timeout=300)
        events = []
        for e in sse_events(r):
            if not e.event:
                continue
            events.append(e)
            if e.event == "progress" and json.loads(e.data)["bytes"] > 0 and s.proc:
                s.stop()  # in the middle
                s.proc = None
            if e.event in ("done", "error"):
                break
        assert events[-1].event == "error", [x.event for x in events]
        err = json.loads(events[-1].data)
        assert err["code"] == "backup_store_unavailable", err
        # its archiver is gone, the sandbox is fine
        assert v1.sh(sid, "echo ok") == "ok\n"
        s.start()
        assert v1.get("/v1/backup").json()["backups"] == []
        assert not [k for k in s.keys("e2e/down/") if k.endswith(".json")]
    finally:
        s.close()


def test_two_daemons_share_one_prefix(s3, creds_file, make_daemon, new_sid):
    """A sandbox moves between machines: backed up on one daemon, listed and
    restored on another that shares nothing with it but the store."""
    one = make_daemon(*s3_flags(s3, "e2e/shared", creds_file))
    two = make_daemon(*s3_flags(s3, "e2e/shared", creds_file))
    v1, v2 = V1(one), V1(two)
    sid = new_sid()
    want = v1.sh(sid, "mkdir -p /workspace/app && cd /workspace/app && "
                      "head -c 20000000 /dev/urandom > data && echo v1 > ver && sha256sum *")
    bk = backup(v1, sid, dir="/workspace/app")
    seen = v2.get("/v1/backup").json()["backups"]
    assert [x["id"] for x in seen] == [bk["id"]]
    assert seen[0] == bk
    restore(v2, sid, bk["id"])  # the same id, on the other machine
    assert v2.sh(sid, "cd /workspace/app && sha256sum *") == want
    # deleted on the second, gone for the first too
    assert v2.delete(f"/v1/backup/{bk['id']}").status_code == 204
    assert v1.get("/v1/backup").json()["backups"] == []
    assert_error(v1.post(f"/v1/sandbox/{sid}/restore", json={"backup": bk["id"]}), 404,
                 "backup_not_found")
