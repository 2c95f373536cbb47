"""A stand-in Internet for the network tests (no machine here reaches the
real one): a network namespace holding 203.0.113.10 and 198.51.100.10
(documentation ranges, which sandboxd counts as public), HTTP on :80, HTTPS
on :443 with a certificate from a test CA, and a DNS server on
203.0.113.53 naming them; the host reaches it over a veth (203.0.113.1)
and a route. Everything is removed by close(), also after a failure.
"""
import fcntl
import os
import shutil
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

WEB = "203.0.113.10"     # web.test, also.test
OTHER = "198.51.100.10"  # other.test
DNS = "203.0.113.53"
HOST = "203.0.113.1"     # the host's end: a host address, never reachable
NAMES = {"web.test": WEB, "also.test": WEB, "other.test": OTHER,
         "private.test": "10.1.2.3", "metadata.test": "169.254.169.254"}


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


# The addresses are the host's to give once: two test runs on one host (two
# worktrees, say) take turns, holding this lock while their Internet exists.
LOCK = "/run/sandboxd-fakenet.lock"
LOCK_WAIT_S = 900


class FakeInternet:
    def __init__(self):
        tag = f"{os.getpid() % 100000}"
        self.ns = f"sbxinet{tag}"
        self.hostif = f"sbxinh{tag}"
        self.dir = None
        self.proc = None
        self.lock = open(LOCK, "w")
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    self.lock.close()
                    raise RuntimeError(f"another test run held {LOCK} for "
                                       f"{LOCK_WAIT_S} s")
                time.sleep(1)
        self.dir = tempfile.mkdtemp(prefix="sbx-fakenet-")
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    def _certs(self):
        d = self.dir
        self.ca = os.path.join(d, "ca.pem")
        key, csr, crt = (os.path.join(d, n) for n in ("srv.key", "srv.csr", "srv.pem"))
        cakey = os.path.join(d, "ca.key")
        sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
           "-subj", "/CN=sandboxd test CA", "-keyout", cakey, "-out", self.ca)
        sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=web.test",
           "-keyout", key, "-out", csr)
        ext = os.path.join(d, "ext.cnf")
        with open(ext, "w") as f:
            f.write("subjectAltName=DNS:web.test,DNS:also.test,DNS:other.test,"
                    f"IP:{WEB},IP:{OTHER}\n")
        sh("openssl", "x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", cakey,
           "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", crt)
        return crt, key

    def _make(self):
        crt, key = self._certs()
        sh("ip", "netns", "add", self.ns)
        sh("ip", "link", "add", self.hostif, "type", "veth", "peer", "name", "inet0",
           "netns", self.ns)
        sh("ip", "addr", "add", f"{HOST}/24", "dev", self.hostif)
        sh("ip", "link", "set", self.hostif, "up")
        ns = ("ip", "netns", "exec", self.ns)
        sh(*ns, "ip", "link", "set", "lo", "up")
        for a in (f"{WEB}/24", f"{DNS}/24", f"{OTHER}/24"):
            sh(*ns, "ip", "addr", "add", a, "dev", "inet0")
        sh(*ns, "ip", "link", "set", "inet0", "up")
        sh(*ns, "ip", "route", "add", "default", "via", HOST)
        sh("ip", "route", "add", "198.51.100.0/24", "via", WEB, "dev", self.hostif)
        # copy the CA for sandboxes: their /tmp is theirs, the test writes it in
        with open(self.ca) as f:
            self.ca_pem = f.read()
        self.proc = subprocess.Popen(
            [*ns, "/usr/bin/python3", os.path.join(HERE, "fakenet_server.py"),
             crt, key, DNS, *(f"{k}={v}" for k, v in NAMES.items())],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"fakenet server: {line} {self.proc.stderr.read()}")

    def close(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        sh("ip", "route", "del", "198.51.100.0/24", "dev", self.hostif, check=False)
        sh("ip", "link", "del", self.hostif, check=False)
        sh("ip", "netns", "del", self.ns, check=False)
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        if self.lock:
            self.lock.close()  # and with it the lock
            self.lock = None
