"""Operator ceilings and quotas (shared/spec/v1.md; issue 10 item 6): a limit
above a ceiling is 400 limit_exceeds_ceiling naming the ceiling, never
clamped; a tenant's maxSandboxes / maxRunning and the daemon's
--max-sandboxes are 429 quota_exceeded naming the quota, after the least
recently used idle sandbox was stopped where that makes room; a refused
request leaves nothing behind."""
import os
import subprocess
import tempfile

import pytest

from helpers import SBX_BIN, V1, assert_error, free_port, remove_tree, wait_until

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-fedcba9876543210xx"


def sandbox_dirs(d):
    """The sandboxes' directories (the store's own, e.g. .snapshots, aside)."""
    return sorted(n for n in os.listdir(os.path.join(d.state_dir, "sandboxes"))
                  if not n.startswith("."))


def nothing_left(d, v1, sid, dirs_before):
    """No trace of sid: not in the API, not in the list, no new files."""
    assert_error(v1.get(f"/v1/sandbox/{sid}"), 404, "sandbox_not_found")
    ids = [s["id"] for s in v1.get("/v1/sandbox").json()["sandboxes"]]
    assert sid not in ids, ids
    assert sandbox_dirs(d) == dirs_before


# --- ceilings ---------------------------------------------------------------------

CEILINGS = ["--max-memory", "512M", "--max-pids", "100", "--max-cpus", "1",
            "--max-disk", "1G"]


@pytest.mark.parametrize("limits,flag", [
    ({"memoryMB": 513}, "--max-memory"),
    ({"pids": 101}, "--max-pids"),
    ({"cpus": 1.5}, "--max-cpus"),
    ({"diskMB": 1025}, "--max-disk"),
    ({"memoryMB": 256, "pids": 64, "cpus": 2}, "--max-cpus"),
])
def test_a_limit_above_a_ceiling_is_400_naming_it(make_daemon, sid, limits, flag):
    d = make_daemon(*CEILINGS)
    v1 = V1(d)
    r = v1.post("/v1/sandbox", json={"id": sid, "limits": limits})
    doc = assert_error(r, 400, "limit_exceeds_ceiling")
    assert flag in doc["error"], doc
    nothing_left(d, v1, sid, [])


def test_limits_at_the_ceilings_are_taken_as_asked(make_daemon, sid):
    d = make_daemon(*CEILINGS)
    v1 = V1(d)
    info = v1.create(sid, limits={"memoryMB": 512, "pids": 100, "cpus": 1, "diskMB": 1024})
    assert info["limits"]["memoryMB"] == 512 and info["limits"]["pids"] == 100
    assert info["limits"]["cpus"] == 1
    # a default above a ceiling that was given follows the ceiling
    other = v1.create(sid + "-d")
    assert other["limits"]["memoryMB"] == 512 and other["limits"]["pids"] <= 100


@pytest.mark.parametrize("limits,flag", [
    ({"memoryMB": 1 << 24}, "--max-memory"),      # 16 TiB
    ({"pids": 4194304}, "--max-pids"),
    ({"cpus": 1024}, "--max-cpus"),
    ({"diskMB": 1 << 40}, "--max-disk"),
])
def test_default_ceilings_come_from_the_machine(v1, sid, limits, flag):
    doc = assert_error(v1.post("/v1/sandbox", json={"id": sid, "limits": limits}),
                       400, "limit_exceeds_ceiling")
    assert flag in doc["error"], doc
    assert_error(v1.get(f"/v1/sandbox/{sid}"), 404, "sandbox_not_found")


def test_a_default_above_a_given_ceiling_refuses_to_start():
    base = tempfile.mkdtemp(prefix="sbx-e2e-", dir="/tmp")
    try:
        os.mkdir(os.path.join(base, "state"), 0o700)
        p = subprocess.run([SBX_BIN, "--listen", f"127.0.0.1:{free_port()}",
                            "--state-dir", os.path.join(base, "state"),
                            "--store-size", "0", "--memory", "2G",
                            "--max-memory", "1G"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0
        assert "--memory" in p.stderr and "--max-memory" in p.stderr, p.stderr
    finally:
        remove_tree(base)


def test_help_states_the_ceilings_and_their_defaults():
    out = subprocess.run([SBX_BIN, "--help"], capture_output=True, text=True).stdout
    for flag in ("--max-sandboxes", "--max-memory", "--max-pids", "--max-cpus",
                 "--max-disk", "--total-memory", "--total-pids", "maxSandboxes",
                 "maxRunning"):
        assert flag in out, flag
    assert "physical RAM" in out and "pid_max" in out


# --- tenant quotas ---------------------------------------------------------------


@pytest.fixture
def quota_daemon(make_daemon):
    fd, path = tempfile.mkstemp(prefix="sbx-e2e-tokens-", dir="/tmp")
    with os.fdopen(fd, "w") as f:
        f.write(f"{ALICE} alice maxSandboxes=2 maxRunning=1\n{BOB} bob\n")
    try:
        d = make_daemon("--tokens", path)
        yield d, V1(d, ALICE), V1(d, BOB)
    finally:
        os.unlink(path)


def test_tenant_max_sandboxes_is_429_naming_the_quota(quota_daemon, new_sid):
    d, alice, bob = quota_daemon
    a1, a2, a3 = new_sid(), new_sid(), new_sid()
    alice.create(a1)
    alice.create(a2)
    alice.sh(a1, "true")
    before = sandbox_dirs(d)
    doc = assert_error(alice.post("/v1/sandbox", json={"id": a3}), 429, "quota_exceeded")
    assert "maxSandboxes" in doc["error"], doc
    # naming a new sandbox (which would create it) is refused the same way
    doc = assert_error(alice.exec_json(a3, command="true"), 429, "quota_exceeded")
    assert "maxSandboxes" in doc["error"], doc
    nothing_left(d, alice, a3, before)
    # another tenant is not counted
    for _ in range(3):
        bob.create(new_sid())
    # room again once one is deleted
    assert alice.delete(f"/v1/sandbox/{a1}").status_code == 204
    alice.create(a3)


def test_tenant_max_running_stops_its_idle_one_or_is_429(quota_daemon, new_sid):
    d, alice, bob = quota_daemon
    a1, a2 = new_sid(), new_sid()
    alice.create(a1)
    alice.create(a2)
    alice.sh(a1, "echo one > /workspace/f")
    # a1 is idle: running a2 stops it (files kept)
    assert alice.sh(a2, "echo two") == "two\n"
    assert alice.running(a2) and not alice.running(a1)
    # back to a1: a2 is stopped for it, and a1 finds its file
    assert alice.sh(a1, "cat /workspace/f") == "one\n"
    assert not alice.running(a2)
    # a1 busy with a process: a2 cannot start
    alice.start_process(a1, command="sleep 1000", processId="sleeper")
    doc = assert_error(alice.exec_json(a2, command="true"), 429, "quota_exceeded")
    assert "maxRunning" in doc["error"], doc
    r = alice.put(f"/v1/sandbox/{a2}/file/x", data=b"x")
    doc = assert_error(r, 429, "quota_exceeded")
    assert not alice.running(a2) and alice.running(a1)
    # bob is not bound by alice's quota
    b = new_sid()
    assert bob.sh(b, "echo bob") == "bob\n"
    alice.delete(f"/v1/sandbox/{a1}/process/sleeper")
    assert wait_until(lambda: alice.process(a1, "sleeper")["status"] != "running", 15)
    assert alice.sh(a2, "echo two") == "two\n"


# --- --max-sandboxes ---------------------------------------------------------------


def test_max_sandboxes_stops_the_least_recently_used_idle_one(make_daemon, new_sid):
    d = make_daemon("--max-sandboxes", "2")
    v1 = V1(d)
    s1, s2, s3, s4 = new_sid(), new_sid(), new_sid(), new_sid()
    v1.sh(s1, "echo kept > /workspace/f")
    v1.sh(s2, "true")
    v1.sh(s3, "true")  # s1 is the least recently used idle one
    assert not v1.running(s1) and v1.running(s2) and v1.running(s3)
    # s1 starts again on the next request, with its files
    assert v1.sh(s1, "cat /workspace/f") == "kept\n"
    assert not v1.running(s2)
    assert "stopped to make room" in d.log_text()
    # none idle: both running ones busy with a process
    v1.start_process(s1, command="sleep 1000", processId="p")
    v1.start_process(s3, command="sleep 1000", processId="p")
    before = sandbox_dirs(d)
    doc = assert_error(v1.exec_json(s4, command="true"), 429, "quota_exceeded")
    assert "--max-sandboxes" in doc["error"], doc
    nothing_left(d, v1, s4, before)
    doc = assert_error(v1.exec_json(s2, command="true"), 429, "quota_exceeded")
    assert "--max-sandboxes" in doc["error"], doc
    # SSE exec and file requests are refused before any answer began
    r = v1.post(f"/v1/sandbox/{s2}/exec", json={"command": "true"})
    assert_error(r, 429, "quota_exceeded")
    assert_error(v1.get(f"/v1/sandbox/{s2}/file/"), 429, "quota_exceeded")
    assert v1.running(s1) and v1.running(s3) and not v1.running(s2)
    # Duet rooms count too
    r = d.exec("quota-room", "true")
    assert r.status_code == 429 and r.json()["code"] == "quota_exceeded", r.text
    v1.delete(f"/v1/sandbox/{s3}/process/p")
    assert wait_until(lambda: v1.process(s3, "p")["status"] != "running", 15)
    assert v1.sh(s2, "echo back") == "back\n"
    assert not v1.running(s3) and v1.running(s1)


def test_keep_alive_sandboxes_are_never_stopped_for_room(make_daemon, new_sid):
    d = make_daemon("--max-sandboxes", "1")
    v1 = V1(d)
    k, o = new_sid(), new_sid()
    v1.create(k, keepAlive=True)
    v1.sh(k, "true")
    doc = assert_error(v1.exec_json(o, command="true"), 429, "quota_exceeded")
    assert "--max-sandboxes" in doc["error"]
    assert v1.running(k)


def test_idle_interpreter_contexts_do_not_hold_a_slot(make_daemon, new_sid):
    """A sandbox whose only work is an idle interpreter context is idle: it
    is stopped for room (its contexts start afresh on their next cell)."""
    d = make_daemon("--max-sandboxes", "1")
    v1 = V1(d)
    s1, s2 = new_sid(), new_sid()
    r = v1.post(f"/v1/sandbox/{s1}/contexts", json={"language": "python"})
    assert r.status_code == 201, r.text
    assert v1.sh(s2, "echo two") == "two\n"
    assert not v1.running(s1) and v1.running(s2)
