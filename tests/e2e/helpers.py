"""Helpers for the end-to-end tests: a handle on one real sandboxd process,
raw HTTP for paths that requests would normalise, and host-side process scans.

The tests talk to the daemon exactly as a client would (HTTP on loopback) and
check the host the way an operator would (/proc, files on disk).
"""
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]
SBX_BIN = os.environ.get("SBX_BIN") or str(REPO / "build" / "sandboxd")
TMP_ROOT = "/tmp"
UID_RANGE = 65536

# Daemons started and not yet closed; conftest prints their log tails when a
# test fails.
LIVE = []


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred, timeout, interval=0.05):
    """Polls pred() until it returns something truthy; returns that value,
    or the last falsy value once timeout seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def _mounts_under(path):
    """Host mount points at or below path (deepest first)."""
    found = []
    prefix = path.rstrip("/") + "/"
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mnt = line.split()[4].replace("\\040", " ")
            if mnt == path or mnt.startswith(prefix):
                found.append(mnt)
    return sorted(found, key=len, reverse=True)


def remove_tree(path):
    """Removes a test's temp dir, but never across a mount point: a mount left
    in the host namespace under a state dir could be a view of host files."""
    for mnt in _mounts_under(path):
        subprocess.run(["umount", "-l", mnt], stderr=subprocess.DEVNULL)
    left = _mounts_under(path)
    if left:
        raise AssertionError(
            f"mounts left on the host under {path} after the daemon exited "
            f"(not removing it): {left}")
    shutil.rmtree(path, ignore_errors=True)


class Daemon:
    """One sandboxd process with its own port, state dir and log file."""

    def __init__(self, flags=()):
        self.flags = [str(f) for f in flags]
        self.base = tempfile.mkdtemp(prefix="sbx-e2e-", dir=TMP_ROOT)
        self.state_dir = os.path.join(self.base, "state")
        os.mkdir(self.state_dir, 0o700)
        self.log_path = os.path.join(self.base, "sandboxd.log")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None
        self._expected_exit = False
        LIVE.append(self)
        try:
            self.start()
        except BaseException:
            self.close(check=False)
            raise

    # --- process control -------------------------------------------------
    def start(self):
        if not os.access(SBX_BIN, os.X_OK):
            pytest.fail(f"sandboxd binary not found at {SBX_BIN} "
                        "(build it with make, or set SBX_BIN)")
        cmd = [SBX_BIN, "--listen", f"127.0.0.1:{self.port}",
               "--state-dir", self.state_dir, *self.flags]
        with open(self.log_path, "ab") as log:
            log.write(f"=== e2e: starting {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log)
        self._expected_exit = False
        deadline = time.monotonic() + 10
        while True:
            rc = self.proc.poll()
            if rc is not None:
                self._expected_exit = True
                pytest.fail(f"sandboxd exited ({describe_status(rc)}) during "
                            f"startup:\n{self.log_tail()}")
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"sandboxd did not answer /health within 10 s:\n"
                            f"{self.log_tail()}")
            time.sleep(0.05)

    @property
    def pid(self):
        return self.proc.pid

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL, as a crash or an OOM kill of the daemon would."""
        self._expected_exit = True
        if self.running():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout=15):
        """SIGTERM; the daemon must exit cleanly with status 0."""
        self.check_alive()
        self._expected_exit = True
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"sandboxd did not exit within {timeout} s of "
                                 f"SIGTERM:\n{self.log_tail()}")
        assert rc == 0, (f"sandboxd exited with {describe_status(rc)} on "
                         f"SIGTERM:\n{self.log_tail()}")

    def restart(self):
        """Starts the daemon again on the same port and state dir."""
        if self.running():
            self.stop()
        self.start()

    def check_alive(self):
        """Fails if the daemon exited without the test asking it to."""
        if self.proc is not None and not self._expected_exit:
            rc = self.proc.poll()
            if rc is not None:
                self._expected_exit = True
                what = "CRASHED" if rc < 0 else "exited unexpectedly"
                raise AssertionError(
                    f"sandboxd {what} ({describe_status(rc)}):\n"
                    f"{self.log_tail(60)}")

    def close(self, check=True):
        """Teardown: SIGTERM (asserting a clean exit), then remove the temp dir."""
        try:
            if check:
                self.check_alive()
                if self.running():
                    self.stop()
        finally:
            if self.running():
                self._expected_exit = True
                self.proc.kill()
                self.proc.wait()
            if self in LIVE:
                LIVE.remove(self)
            remove_tree(self.base)

    # --- logs ------------------------------------------------------------
    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, n=40):
        return "\n".join(self.log_text().splitlines()[-n:])

    def fd_count(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    # --- API -------------------------------------------------------------
    def exec(self, room, cmd, timeout=30):
        return requests.post(f"{self.url}/api/rooms/{room}/sandbox/exec",
                             json={"cmd": cmd}, timeout=timeout)

    def delete(self, room, timeout=30):
        return requests.delete(f"{self.url}/api/rooms/{room}", timeout=timeout)

    def run(self, room, cmd, timeout=30):
        """Execs and asserts a 200; returns the `result` object."""
        r = self.exec(room, cmd, timeout=timeout)
        assert r.status_code == 200, f"exec {cmd!r}: {r.status_code} {r.text[:2000]}"
        return r.json()["result"]

    def raw(self, method, path, body=b"", headers=None, timeout=30):
        """One request with the path sent byte for byte (no dot-segment or
        percent normalisation). Returns (status, headers, body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            hdrs = {"Content-Type": "application/json"} if body else {}
            hdrs.update(headers or {})
            conn.request(method, path, body=body or None, headers=hdrs)
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        finally:
            conn.close()


def describe_status(rc):
    if rc is None:
        return "still running"
    if rc < 0:
        return f"killed by signal {signal.Signals(-rc).name}"
    return f"exit status {rc}"


# --- host-side views of a room ------------------------------------------------

def room_host_uid(daemon, room):
    """The host uid that root inside the room's sandbox maps to."""
    res = daemon.run(room, "cat /proc/self/uid_map")
    fields = res["stdout"].split()
    assert len(fields) == 3 and fields[0] == "0", f"uid_map: {res['stdout']!r}"
    assert int(fields[2]) == UID_RANGE, f"uid_map: {res['stdout']!r}"
    return int(fields[1])


def host_pids_with_uid_range(base, count=UID_RANGE):
    """Host pids whose real uid lies in [base, base+count)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        uid = int(line.split()[1])
                        if base <= uid < base + count:
                            pids.append(int(entry))
                        break
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return sorted(pids)


def describe_pids(pids):
    """'pid state comm cmdline' lines, for assertion messages."""
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            state = stat[stat.rindex(")") + 2]
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            out.append(f"{pid} {state} {comm} {cmdline[:100]}")
        except (FileNotFoundError, ProcessLookupError):
            out.append(f"{pid} (gone)")
    return "\n".join(out)


def host_comms(pids):
    names = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as f:
                names.append(f.read().strip())
        except (FileNotFoundError, ProcessLookupError):
            pass
    return names


def wait_no_pids(base, timeout=5, ignore=()):
    """Waits until no host process in the range is left (besides `ignore`);
    returns the pids still there at the end (empty when all are gone)."""
    def left():
        return [p for p in host_pids_with_uid_range(base) if p not in ignore]
    wait_until(lambda: not left(), timeout)
    return left()


def room_name_re(room):
    """Matches a log line's `sandbox=sandbox-<room>` field exactly."""
    return re.compile(r"sandbox=\"?sandbox-" + re.escape(room) + r"(?![A-Za-z0-9._-])")
