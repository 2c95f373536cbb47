"""Fixtures for the fleet tests (run as root with /usr/bin/python3 -m pytest
tests/fleet; SBX_BIN names the daemon binary): a single-member etcd, an
S3-protocol server (s3rver, tests/s3's lock), three sandboxd nodes with their
own state dirs, ports and uid ranges, and HAProxy with the shipped
configuration (contrib/haproxy/sandboxd.cfg, written for these nodes by
contrib/haproxy/fleet-config), all on 127.0.0.1, all stopped by PID at the
end. Skipped (with the reason) only when etcd or haproxy is not installed
(scripts/install-deps installs both)."""
import base64
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import helpers  # noqa: E402
from helpers import REPO, Daemon, free_port, wait_until  # noqa: E402

S3RVER = REPO / "tests" / "s3" / "node_modules" / ".bin" / "s3rver"
FLEET_CONFIG = REPO / "contrib" / "haproxy" / "fleet-config"
ETCD = shutil.which("etcd")
HAPROXY = shutil.which("haproxy") or (os.path.exists("/usr/sbin/haproxy") and "/usr/sbin/haproxy")
TTL_S = 6           # --etcd-ttl: a dead node's sandboxes move after this (a node
                    # whose loop stalls that long on this loaded machine gives its lease up)
CHECKPOINT_S = 2    # --checkpoint-every


class Proc:
    """A helper server process, with its own temp dir and log, killed by PID."""

    def __init__(self, name):
        self.dir = tempfile.mkdtemp(prefix=f"sbx-fleet-{name}-", dir="/tmp")
        self.log_path = os.path.join(self.dir, f"{name}.log")
        self.proc = None

    def spawn(self, cmd):
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return re.sub(rb"\x1b\[[0-9;]*m", b"", f.read()).decode("utf-8", "replace")[-4000:]
        except FileNotFoundError:
            return ""

    def close(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


class Etcd(Proc):
    def __init__(self):
        super().__init__("etcd")
        self.port, peer = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.spawn([ETCD, "--name", "fleet-test", "--data-dir", os.path.join(self.dir, "data"),
                    "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                    "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                    "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                    "--initial-cluster", f"fleet-test=http://127.0.0.1:{peer}"])

        def up():
            try:
                return requests.get(self.url + "/health", timeout=1).status_code == 200
            except requests.RequestException:
                return False
        if not wait_until(up, 60):
            log = self.log()
            self.close()
            pytest.fail(f"etcd did not start:\n{log}")

    def get_prefix(self, prefix):
        """{key: value} of the keys under prefix (values decoded)."""
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        r = requests.post(self.url + "/v3/kv/range", timeout=10, json={
            "key": base64.b64encode(prefix.encode()).decode(),
            "range_end": base64.b64encode(end.encode()).decode()})
        assert r.status_code == 200, r.text
        return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv["value"]).decode()
                for kv in r.json().get("kvs", [])}


class S3(Proc):
    def __init__(self):
        super().__init__("s3rver")
        if not S3RVER.exists():
            pytest.fail(f"{S3RVER} missing: scripts/run-tests installs it "
                        "(cd tests/s3 && npm ci)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        os.makedirs(os.path.join(self.dir, "data"))
        self.creds = os.path.join(self.dir, "credentials")
        with open(self.creds, "w") as f:
            f.write("[default]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n")
        self.spawn([str(S3RVER), "-d", os.path.join(self.dir, "data"), "-a", "127.0.0.1",
                    "-p", str(self.port), "--configure-bucket", "fleet"])

        def up():
            try:
                return requests.get(self.url, timeout=1).status_code == 200
            except requests.RequestException:
                return False
        if not wait_until(up, 60):
            log = self.log()
            self.close()
            pytest.fail(f"s3rver did not start:\n{log}")


class Node(Daemon):
    """A sandboxd of the fleet: its own port, state dir and uid range."""

    def __init__(self, name, etcd, s3, uid_base):
        self.name = name
        self.extra = ["--etcd", etcd.url, "--etcd-ttl", f"{TTL_S}s",
                      "--checkpoint-every", f"{CHECKPOINT_S}s", "--node-name", name,
                      "--uid-base", str(uid_base),
                      "--backup-s3", "s3://fleet/ckpt", "--s3-endpoint", s3.url,
                      "--s3-addressing", "path", "--s3-credentials-file", s3.creds]
        super().__init__(self.extra)

    def start(self):
        # the port is chosen by Daemon before start: advertise it
        self.flags = self.extra + ["--advertise-url", self.url]
        super().start()


class HAProxy(Proc):
    def __init__(self, nodes):
        super().__init__("haproxy")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cfg = subprocess.run([str(FLEET_CONFIG), "--bind", f"127.0.0.1:{self.port}",
                              *[f"127.0.0.1:{n.port}" for n in nodes]],
                             check=True, capture_output=True, text=True).stdout
        self.cfg = os.path.join(self.dir, "haproxy.cfg")
        with open(self.cfg, "w") as f:
            f.write(cfg)
        check = subprocess.run([HAPROXY, "-c", "-f", self.cfg], capture_output=True, text=True)
        assert check.returncode == 0, f"haproxy -c:\n{check.stdout}{check.stderr}"
        self.spawn([HAPROXY, "-db", "-f", self.cfg])

        def up():
            try:
                return requests.get(self.url + "/health", timeout=1).status_code == 200
            except requests.RequestException:
                return False
        if not wait_until(up, 30):
            log = self.log()
            self.close()
            pytest.fail(f"haproxy did not start:\n{log}")


class Fleet:
    def __init__(self):
        self.etcd = self.s3 = self.haproxy = None
        self.nodes = []
        self.ttl_s, self.checkpoint_s = TTL_S, CHECKPOINT_S

    def by_name(self, name):
        return next(n for n in self.nodes if n.name == name)

    def owner(self, sid):
        """The node name etcd says holds sid, or None."""
        v = self.etcd.get_prefix(f"sbx/own/{sid}").get(f"sbx/own/{sid}")
        return json.loads(v)["node"] if v else None

    def close(self):
        problems = []
        for n in self.nodes:
            try:
                n.close(check=n.running())
            except (Exception, pytest.fail.Exception) as e:
                problems.append(str(e))
        for p in (self.haproxy, self.s3, self.etcd):
            if p:
                p.close()
        return problems


def warm_up(node):
    """A node's first sandbox start scans /usr for what sandboxes must not
    read, which holds its event loop for seconds on a loaded machine: longer
    than the tests' lease TTL, so the node (rightly) gives its lease up.
    Done once here, before the cases, with a sandbox of its own."""
    sid = f"warmup-{node.name}"
    r = requests.post(node.url + "/v1/sandbox", json={"id": sid}, timeout=120)
    assert r.status_code == 201, r.text

    def ran():
        r = requests.post(f"{node.url}/v1/sandbox/{sid}/exec", json={"command": "true"},
                          headers={"Accept": "application/json"}, timeout=120)
        return r.status_code == 200
    assert wait_until(ran, 120, interval=0.5), f"{node.name}: no command ran"
    assert requests.delete(f"{node.url}/v1/sandbox/{sid}", timeout=120).status_code == 204


@pytest.fixture(scope="module")
def fleet():
    missing = [b for b, path in (("etcd", ETCD), ("haproxy", HAPROXY)) if not path]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not installed (scripts/install-deps "
                    "installs haproxy and etcd-server)")
    f = Fleet()
    try:
        f.etcd = Etcd()
        f.s3 = S3()
        base = 0xA0000000 + random.randrange(0, 0x18) * 0x01000000
        for i in range(3):
            f.nodes.append(Node(f"node{i + 1}", f.etcd, f.s3, base + i * 0x00800000))
        f.haproxy = HAProxy(f.nodes)
        for n in f.nodes:
            warm_up(n)
    except BaseException:
        f.close()
        raise
    yield f
    problems = f.close()
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for d in list(helpers.LIVE):
            rep.sections.append((f"sandboxd log tail ({d.url}, pid {d.proc.pid if d.proc else '-'})",
                                 d.log_tail(40)))
