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

    def __init__(self, flags=(), prefix=()):
        self.flags = [str(f) for f in flags]
        self.prefix = list(prefix)  # a launcher that execs the daemon
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
        cmd = [*self.prefix, SBX_BIN, "--listen", f"127.0.0.1:{self.port}",
               "--state-dir", self.state_dir, *self.flags]
        with open(self.log_path, "ab") as log:
            log.write(f"=== e2e: starting {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log)
        self._expected_exit = False
        deadline = time.monotonic() + 30
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
                pytest.fail(f"sandboxd did not answer /health within 30 s:\n"
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

    def stop(self, timeout=60):
        """SIGTERM; the daemon must exit cleanly with status 0 (within a
        bound that a loaded machine and a sanitized build stay inside: fifty
        sandboxes with networks took over 15 s under ASan at load 35)."""
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


# --- the /v1 API ------------------------------------------------------------------
# (added for tests/e2e/test_v1_*.py; the Duet helpers above are unchanged)
import base64  # noqa: E402
import json  # noqa: E402
import threading  # noqa: E402
from collections import namedtuple  # noqa: E402

JSON_ACCEPT = {"Accept": "application/json"}


def assert_error(r, status, code):
    """r is a /v1 error answer: that status, JSON {"error": msg, "code": code}."""
    what = f"{r.request.method} {r.request.path_url}: {r.status_code} {r.text[:1000]}"
    assert r.status_code == status, what
    assert r.headers.get("Content-Type", "").startswith("application/json"), what
    doc = r.json()
    assert doc.get("code") == code, what
    assert isinstance(doc.get("error"), str) and doc["error"], what
    return doc


def assert_raw_error(status, headers, body, want_status, code):
    """As assert_error, for Daemon.raw()'s (status, headers, body)."""
    what = f"{status} {body[:1000]!r}"
    assert status == want_status, what
    doc = json.loads(body)
    assert doc.get("code") == code and doc.get("error"), what
    return doc


class V1:
    """A /v1 client for one daemon, optionally holding a bearer token."""

    def __init__(self, daemon, token=None):
        self.d = daemon
        self.token = token

    def headers(self, extra=None, session=None):
        h = {}
        if self.token is not None:
            h["Authorization"] = f"Bearer {self.token}"
        if session:
            h["Session-Id"] = session
        h.update(extra or {})
        return h

    def request(self, method, path, headers=None, session=None, timeout=60, **kw):
        return requests.request(method, self.d.url + path,
                                headers=self.headers(headers, session),
                                timeout=timeout, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def put(self, path, **kw):
        return self.request("PUT", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    # --- sandboxes ---
    def create(self, sid=None, **body):
        if sid is not None:
            body["id"] = sid
        r = self.post("/v1/sandbox", json=body)
        assert r.status_code == 201, f"create {body}: {r.status_code} {r.text}"
        return r.json()

    def info(self, sid):
        r = self.get(f"/v1/sandbox/{sid}")
        assert r.status_code == 200, f"info {sid}: {r.status_code} {r.text}"
        return r.json()

    def running(self, sid):
        r = self.get(f"/v1/sandbox/{sid}/running")
        assert r.status_code == 200, r.text
        return r.json()["running"]

    # --- exec ---
    def exec_json(self, sid, session=None, timeout=60, **body):
        """POST exec with Accept: application/json; returns the response."""
        return self.post(f"/v1/sandbox/{sid}/exec", json=body, headers=JSON_ACCEPT,
                         session=session, timeout=timeout)

    def run(self, sid, command=None, session=None, timeout=60, **body):
        """Runs (JSON mode), asserts a 200, returns the result object."""
        if command is not None:
            body["command"] = command
        r = self.exec_json(sid, session=session, timeout=timeout, **body)
        assert r.status_code == 200, f"exec {body}: {r.status_code} {r.text[:2000]}"
        return r.json()

    def sh(self, sid, command, session=None, timeout=60):
        """Runs a shell command that must succeed; returns its stdout."""
        res = self.run(sid, command, session=session, timeout=timeout)
        assert res["exitCode"] == 0, f"{command!r}: {res}"
        return res["stdout"]

    def exec_sse(self, sid, body, session=None, headers=None, timeout=60):
        """POST exec as SSE and reads the stream to its end: (response, events)."""
        r = self.post(f"/v1/sandbox/{sid}/exec", json=body, session=session,
                      headers=headers, stream=True, timeout=timeout)
        with r:
            if r.status_code != 200:
                r.content  # noqa: B018 (read it for the message)
                return r, []
            return r, list(sse_events(r))

    def host_uid(self, sid):
        """The host uid that root in the sandbox maps to (from its uid_map)."""
        fields = self.sh(sid, "cat /proc/self/uid_map").split()
        assert len(fields) == 3 and fields[0] == "0", fields
        assert int(fields[2]) == UID_RANGE, fields
        return int(fields[1])

    # --- processes ---
    def start_process(self, sid, session=None, **body):
        r = self.post(f"/v1/sandbox/{sid}/process", json=body, session=session)
        assert r.status_code == 201, f"process {body}: {r.status_code} {r.text}"
        return r.json()

    def process(self, sid, pid):
        r = self.get(f"/v1/sandbox/{sid}/process/{pid}")
        assert r.status_code == 200, r.text
        return r.json()


# One server-sent event: `event` (None for a comment line), `id`, `data` (text),
# `comment` (the text of a `:` line) and `t` (time.monotonic() when it arrived).
SSEEvent = namedtuple("SSEEvent", "event id data comment t")


def sse_events(resp, chunk_size=None):
    """Parses a streamed requests response as SSE, yielding each event (and
    each comment line) as soon as its bytes have arrived."""
    buf = b""
    fields = {}
    for chunk in resp.iter_content(chunk_size=chunk_size):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            line = line.rstrip(b"\r").decode("utf-8", "replace")
            now = time.monotonic()
            if line == "":
                if fields:
                    yield SSEEvent(fields.get("event", "message"), fields.get("id"),
                                   "\n".join(fields.get("data", [])), None, now)
                fields = {}
            elif line.startswith(":"):
                yield SSEEvent(None, None, None, line[1:].strip(), now)
            else:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "data":
                    fields.setdefault("data", []).append(value)
                else:
                    fields[name] = value


def sse_output(events, name="stdout"):
    """The decoded bytes of all `name` events."""
    return b"".join(base64.b64decode(e.data) for e in events if e.event == name)


def sse_final(events):
    """The exit (or error) event's JSON, asserting it is the last event."""
    real = [e for e in events if e.event is not None]
    assert real, "no events"
    assert real[-1].event in ("exit", "error"), [e.event for e in real]
    assert sum(e.event in ("exit", "error") for e in real) == 1, [e.event for e in real]
    return real[-1].event, json.loads(real[-1].data)


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class RssSampler:
    """Samples a process's VmRSS in a thread while the block runs:
    `with RssSampler(pid) as s: ...; s.max_kib`."""

    def __init__(self, pid, interval=0.02):
        self.pid = pid
        self.interval = interval
        self.samples = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.samples.append(vm_rss_kib(self.pid))
            except (FileNotFoundError, ProcessLookupError):
                return
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def max_kib(self):
        return max(self.samples, default=0)


def stream_lines(events, stream="stdout"):
    """Events (kind, data, time) of a cell, however its output happened to
    be cut: the kinds with repeats folded, the complete lines of stream,
    the time the client had each line whole, and what was left unended."""
    kinds = [k for i, (k, _, _) in enumerate(events) if i == 0 or events[i - 1][0] != k]
    lines, times, cur = [], [], ""
    for kind, data, t in events:
        if kind == stream:
            cur += data["text"]
            while "\n" in cur:
                line, cur = cur.split("\n", 1)
                lines.append(line + "\n")
                times.append(t)
    return kinds, lines, times, cur
