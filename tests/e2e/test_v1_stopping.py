"""A sandbox's stop does not hold the daemon: while a sandbox stops (its pid
namespace going down) every other request is served, and whatever needs it
stopped (a command, a stop request, a delete, a restart) waits for the stop
to end and then sees it stopped.

A stop is held open here by freezing one of the sandbox's processes from
outside (cgroup v1 freezer): a frozen task does not die of SIGKILL until it
is thawed, so the sandbox's init cannot finish exiting, and the sandbox stays
stopping for as long as the test wants."""
import os
import socket
import threading

import pytest

from helpers import (V1, assert_error, host_pids_with_uid_range, wait_no_pids,
                     wait_until)

FREEZER = "/sys/fs/cgroup/freezer"


def freezer_of(pid):
    """The freezer cgroup directory of a host pid."""
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if "freezer" in ctrls.split(","):
                return FREEZER + path
    return None


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


class Frozen:
    """A `sleep` in the sandbox, frozen: the sandbox's stop cannot end until
    thaw()."""

    def __init__(self, v1, sid):
        self.base = v1.host_uid(sid)
        v1.sh(sid, "sleep 100000 > /dev/null 2>&1 &")
        pids = wait_until(lambda: [p for p in host_pids_with_uid_range(self.base)
                                   if comm(p) == "sleep"], 30)
        assert pids, "the sleep did not start"
        self.dir = freezer_of(pids[0])
        assert self.dir and self.dir != FREEZER, self.dir
        self._write("FROZEN")
        assert wait_until(lambda: self._state() == "FROZEN", 30), self._state()

    def _write(self, state):
        with open(os.path.join(self.dir, "freezer.state"), "w") as f:
            f.write(state)

    def _state(self):
        try:
            with open(os.path.join(self.dir, "freezer.state")) as f:
                return f.read().strip()
        except FileNotFoundError:
            return "gone"

    def thaw(self):
        if self._state() != "gone":
            self._write("THAWED")


@pytest.fixture
def frozen():
    made = []

    def make(v1, sid):
        f = Frozen(v1, sid)
        made.append(f)
        return f

    yield make
    for f in made:  # never leave a sandbox that cannot die
        f.thaw()


class Pending:
    """A request sent on its own connection; its answer read later."""

    def __init__(self, v1, method, path, body=None, session=None):
        self.result = None
        self.error = None

        def go():
            try:
                kw = {"json": body} if body is not None else {}
                if "exec" in path:
                    kw["headers"] = {"Accept": "application/json"}
                self.result = v1.request(method, path, session=session,
                                         timeout=120, **kw)
            except Exception as e:  # noqa: BLE001 (reported by answer())
                self.error = e

        self.t = threading.Thread(target=go, daemon=True)
        self.t.start()

    def answered(self, wait=0.0):
        self.t.join(wait)
        return not self.t.is_alive()

    def answer(self):
        self.t.join(120)
        assert not self.t.is_alive(), "no answer"
        assert self.error is None, self.error
        return self.result


def stopping(v1, sid):
    """Whether the daemon has taken the stop: the sandbox runs no more."""
    return v1.running(sid) is False


def test_a_stopping_sandbox_holds_no_one_else(v1, new_sid, frozen):
    a, b = new_sid(), new_sid()
    v1.create(a)
    v1.create(b)
    fr = frozen(v1, a)
    stop = Pending(v1, "POST", f"/v1/sandbox/{a}/stop")
    assert wait_until(lambda: stopping(v1, a), 30)
    # the daemon serves everyone else while a's namespace cannot go
    assert v1.sh(b, "echo other") == "other\n"
    assert v1.info(b)["state"] == "running"
    assert v1.get("/v1/sandbox").status_code == 200
    # a's stop answers only once it is stopped
    assert not stop.answered(0.5)
    fr.thaw()
    r = stop.answer()
    assert r.status_code == 200 and r.json()["stopped"] is True, r.text
    assert v1.info(a)["state"] == "stopped"
    assert not wait_no_pids(fr.base, timeout=30)


def test_exec_on_a_stopping_sandbox_waits_and_starts_it_afresh(v1, sid, frozen):
    v1.create(sid)
    v1.put(f"/v1/sandbox/{sid}/file/kept.txt", data=b"kept\n")
    fr = frozen(v1, sid)
    stop = Pending(v1, "POST", f"/v1/sandbox/{sid}/stop")
    assert wait_until(lambda: stopping(v1, sid), 30)
    ex = Pending(v1, "POST", f"/v1/sandbox/{sid}/exec",
                 {"command": "cat /workspace/kept.txt; pgrep -c sleep || true"})
    ex2 = Pending(v1, "POST", f"/v1/sandbox/{sid}/exec", {"command": "echo second"})
    assert not ex.answered(0.5) and not ex2.answered(0)
    fr.thaw()
    assert stop.answer().status_code == 200
    r = ex.answer()
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["exitCode"] == 0, res
    # its files stayed; it runs afresh: the old start's sleep is gone
    assert res["stdout"] == "kept\n0\n", res
    r = ex2.answer()
    assert r.status_code == 200 and r.json()["stdout"] == "second\n", r.text
    assert v1.running(sid) is True


def test_delete_of_a_stopping_sandbox_frees_its_id_at_once(v1, sid, frozen):
    v1.create(sid, labels={"old": "yes"})
    v1.put(f"/v1/sandbox/{sid}/file/gone.txt", data=b"bye")
    fr = frozen(v1, sid)
    r = v1.delete(f"/v1/sandbox/{sid}")
    assert r.status_code == 204, r.text
    assert_error(v1.get(f"/v1/sandbox/{sid}"), 404, "sandbox_not_found")
    # the same ID again: a new, empty sandbox that runs at once
    info = v1.create(sid)
    assert info["labels"] == {}
    assert v1.sh(sid, "echo new") == "new\n"
    assert_error(v1.get(f"/v1/sandbox/{sid}/file/gone.txt"), 404, "file_not_found")
    assert v1.host_uid(sid) != fr.base
    fr.thaw()
    # the old one's processes go once it can die; the new one lives on
    assert not wait_no_pids(fr.base, timeout=30)
    assert v1.sh(sid, "echo still") == "still\n"


def test_delete_then_recreate_and_run(v1, sid):
    v1.create(sid)
    v1.sh(sid, "for i in $(seq 50); do sleep 100000 > /dev/null 2>&1 & done; echo > /workspace/old")
    base = v1.host_uid(sid)
    assert v1.delete(f"/v1/sandbox/{sid}").status_code == 204
    v1.create(sid)
    assert v1.sh(sid, "ls /workspace; echo ran") == "ran\n"
    assert not wait_no_pids(base, timeout=30)


def test_stop_then_exec_at_once(v1, sid):
    v1.create(sid)
    v1.sh(sid, "for i in $(seq 50); do sleep 100000 > /dev/null 2>&1 & done")
    stop = Pending(v1, "POST", f"/v1/sandbox/{sid}/stop")
    assert wait_until(lambda: stopping(v1, sid), 30)
    assert v1.sh(sid, "pgrep -c sleep || true") == "0\n"
    assert stop.answer().status_code == 200


def test_restart_while_another_request_runs(v1, sid):
    v1.create(sid)
    r = v1.post(f"/v1/sandbox/{sid}/session", json={})
    assert r.status_code in (200, 201), r.text
    other = r.json()["id"]
    long = Pending(v1, "POST", f"/v1/sandbox/{sid}/exec", {"command": "sleep 100000"},
                   session=other)
    assert wait_until(lambda: "sleep 100000" in v1.sh(sid, "ps -eo args"), 30)
    r = v1.post(f"/v1/sandbox/{sid}/stop")
    assert r.status_code == 200, r.text
    assert v1.info(sid)["state"] == "stopped"
    r = long.answer()  # ended by the stop, as before
    assert r.status_code != 200 or r.json()["exitCode"] != 0, r.text
    assert v1.sh(sid, "echo again") == "again\n"
    assert "sleep 100000" not in v1.sh(sid, "ps -eo args")


def test_many_stopped_at_once_then_all_restarted(v1, new_sid):
    ids = [new_sid() for _ in range(8)]
    for s in ids:
        v1.create(s)
        v1.sh(s, f"echo {s} > /workspace/me; sleep 100000 > /dev/null 2>&1 &")
    stops = [Pending(v1, "POST", f"/v1/sandbox/{s}/stop") for s in ids]
    for p in stops:
        r = p.answer()
        assert r.status_code == 200, r.text
    for s in ids:
        assert v1.info(s)["state"] == "stopped"
    execs = [Pending(v1, "POST", f"/v1/sandbox/{s}/exec",
                     {"command": "cat /workspace/me; pgrep -c sleep || true"}) for s in ids]
    for s, p in zip(ids, execs):
        r = p.answer()
        assert r.status_code == 200, r.text
        assert r.json()["stdout"] == f"{s}\n0\n", r.text


def test_max_sandboxes_evicts_without_waiting(make_daemon, new_sid):
    d = make_daemon("--max-sandboxes", "2")
    c = V1(d)
    ids = [new_sid() for _ in range(5)]
    for s in ids:
        c.create(s)
        assert c.sh(s, f"echo {s}") == f"{s}\n"
    running = [s for s in ids if c.running(s)]
    assert len(running) <= 2, running
    for s in ids:
        assert c.sh(s, "echo back") == "back\n"
