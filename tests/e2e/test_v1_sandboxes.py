"""/v1 sandboxes: create, list, info, running, stop, delete; their input
validation; limits, env, sleepAfter and keepAlive as a user sees them."""
import re
import time

import pytest

from helpers import (Daemon, V1, assert_error, describe_pids, host_pids_with_uid_range,
                     wait_no_pids, wait_until)

ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
INFO_KEYS = {"id", "state", "createdAt", "lastActiveAt", "limits", "sleepAfterMs",
             "keepAlive", "labels"}


def core_limits(info):
    return {k: info["limits"].get(k) for k in ("memoryMB", "pids", "cpus")}


@pytest.fixture(scope="module")
def sleepy():
    """A daemon whose sandboxes idle out after 1 s."""
    d = Daemon(["--sleep-after", "1s"])
    yield d
    d.close()


def test_create_returns_201_with_info(v1, sid):
    r = v1.post("/v1/sandbox", json={
        "id": sid, "sleepAfter": "10m", "keepAlive": True,
        "limits": {"memoryMB": 256, "pids": 64, "cpus": 0.5, "diskMB": 512},
        "labels": {"team": "e2e", "n": 1}})
    assert r.status_code == 201, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    info = r.json()
    assert INFO_KEYS <= set(info), info
    assert info["id"] == sid
    assert info["state"] in ("running", "stopped")
    assert ISO_MS.match(info["createdAt"]) and ISO_MS.match(info["lastActiveAt"]), info
    assert core_limits(info) == {"memoryMB": 256, "pids": 64, "cpus": 0.5}
    assert info["limits"].get("diskMB", 512) == 512, info["limits"]
    assert info["sleepAfterMs"] == 600000
    assert info["keepAlive"] is True
    assert info["labels"] == {"team": "e2e", "n": 1}


def test_create_defaults(v1, sid):
    info = v1.create(sid)
    assert info["keepAlive"] is False
    assert info["labels"] == {}
    assert info["sleepAfterMs"] == 600000  # the daemon's --sleep-after default
    assert core_limits(info) == {"memoryMB": 1024, "pids": 512, "cpus": 1.0}


def test_sleep_after_in_seconds(v1, sid):
    assert v1.create(sid, sleepAfter=90)["sleepAfterMs"] == 90000


def test_create_without_id_generates_one(v1):
    a = v1.create()
    b = v1.create()
    try:
        for info in (a, b):
            assert re.fullmatch(r"sbx-[0-9a-f]+", info["id"]), info
        assert a["id"] != b["id"]
        assert v1.info(a["id"])["id"] == a["id"]
    finally:
        for info in (a, b):
            v1.delete(f"/v1/sandbox/{info['id']}")


def test_create_existing_is_409(v1, sid):
    v1.create(sid)
    assert_error(v1.post("/v1/sandbox", json={"id": sid}), 409, "sandbox_exists")
    # a sandbox made implicitly (by a request naming it) exists too
    v1.sh(sid, "true")
    assert_error(v1.post("/v1/sandbox", json={"id": sid}), 409, "sandbox_exists")


@pytest.mark.parametrize("body", [
    {"id": 5},
    {"id": "Upper"},
    {"id": "under_score"},
    {"id": "x" * 64},
    {"id": ""},
    {"sleepAfter": "soon"},
    {"sleepAfter": -1},
    {"sleepAfter": True},
    {"keepAlive": "yes"},
    {"keepAlive": 1},
    {"limits": "big"},
    {"limits": {"memoryMB": "64"}},
    {"limits": {"memoryMB": 8}},
    {"limits": {"memoryMB": 64.5}},
    {"limits": {"pids": 2}},
    {"limits": {"cpus": 0}},
    {"limits": {"cpus": "1"}},
    {"limits": {"diskMB": 0}},
    {"env": ["A=1"]},
    {"env": {"A": 1}},
    {"env": {"A=B": "1"}},
    {"labels": ["x"]},
])
def test_create_wrong_types_are_400(v1, sid, body):
    body = dict(body)
    body.setdefault("id", sid)
    assert_error(v1.post("/v1/sandbox", json=body), 400, "invalid_request")
    if isinstance(body["id"], str) and re.fullmatch(r"[a-z0-9-]{1,63}", body["id"]):
        assert_error(v1.get(f"/v1/sandbox/{sid}"), 404, "sandbox_not_found")


def test_create_ignores_unknown_fields(v1, sid):
    info = v1.create(sid, color="blue", nested={"a": [1, 2]}, limits={"pids": 64, "gpus": 8})
    assert info["id"] == sid
    assert info["limits"]["pids"] == 64
    assert "color" not in info and "gpus" not in info["limits"]


def test_list_has_the_created_sandboxes(v1, new_sid):
    a, b = new_sid(), new_sid()
    v1.create(a, labels={"k": "a"})
    v1.create(b)
    r = v1.get("/v1/sandbox")
    assert r.status_code == 200, r.text
    found = {s["id"]: s for s in r.json()["sandboxes"]}
    assert a in found and b in found, found.keys()
    assert found[a]["labels"] == {"k": "a"}
    assert INFO_KEYS <= set(found[a])
    v1.delete(f"/v1/sandbox/{a}")
    ids = [s["id"] for s in v1.get("/v1/sandbox").json()["sandboxes"]]
    assert a not in ids and b in ids


def test_info_has_usage(v1, sid):
    v1.create(sid)
    # the store counts bytes when it commits (every few seconds, or at a
    # sync, which a sandbox may ask for)
    v1.sh(sid, "head -c 3000000 /dev/urandom > /workspace/blob; sync -f /workspace/blob; "
          "sleep 100 > /dev/null 2>&1 &")
    info = v1.info(sid)
    assert info["state"] == "running"
    usage = info["usage"]
    assert set(usage) >= {"memoryBytes", "cpuMs", "diskBytes", "pids", "oomKills"}, usage
    assert all(isinstance(v, int) for v in usage.values()), usage
    assert usage["memoryBytes"] > 0
    assert usage["diskBytes"] >= 3000000, usage
    assert usage["pids"] >= 2, usage  # init + the sleep
    assert usage["oomKills"] == 0


def test_info_of_unknown_sandbox_is_404_and_creates_nothing(v1, sid):
    assert_error(v1.get(f"/v1/sandbox/{sid}"), 404, "sandbox_not_found")
    assert_error(v1.get(f"/v1/sandbox/{sid}"), 404, "sandbox_not_found")
    assert sid not in [s["id"] for s in v1.get("/v1/sandbox").json()["sandboxes"]]


@pytest.mark.parametrize("bad", ["Upper", "under_score", "dot.ted", "x" * 64])
@pytest.mark.parametrize("method,suffix", [
    ("GET", ""), ("DELETE", ""), ("GET", "/running"), ("POST", "/stop"),
    ("POST", "/exec"), ("GET", "/file/a.txt"), ("PUT", "/file/a.txt"),
    ("POST", "/persist"), ("POST", "/session"), ("GET", "/process"),
])
def test_bad_sandbox_id_is_400(v1, bad, method, suffix):
    kw = {}
    if suffix == "/exec":
        kw["json"] = {"command": "true"}
    if method == "PUT":
        kw["data"] = b"x"
    assert_error(v1.request(method, f"/v1/sandbox/{bad}{suffix}", **kw), 400,
                 "invalid_request")


def test_running_reports_and_does_not_create(v1, sid):
    r = v1.get(f"/v1/sandbox/{sid}/running")
    assert r.status_code == 200 and r.json() == {"running": False}, r.text
    assert_error(v1.get(f"/v1/sandbox/{sid}"), 404, "sandbox_not_found")
    v1.sh(sid, "true")  # exec creates and starts it
    assert v1.running(sid) is True


def test_stop_ends_processes_and_keeps_files(v1, sid):
    v1.create(sid)
    base = v1.host_uid(sid)
    v1.put(f"/v1/sandbox/{sid}/file/keep.txt", data=b"kept\n")
    v1.start_process(sid, command="sleep 100000", processId="sleeper")
    v1.sh(sid, "sleep 100000 > /dev/null 2>&1 &")
    # init, the process and the background sleep (each may still be on
    # its way from fork to exec on a loaded machine)
    assert wait_until(lambda: len(host_pids_with_uid_range(base)) >= 3, 30), \
        describe_pids(host_pids_with_uid_range(base))
    r = v1.post(f"/v1/sandbox/{sid}/stop")
    assert r.status_code == 200, r.text
    assert v1.running(sid) is False
    assert v1.info(sid)["state"] == "stopped"
    left = wait_no_pids(base, timeout=5)
    assert not left, "processes survived stop:\n" + describe_pids(left)
    r = v1.get(f"/v1/sandbox/{sid}/process/sleeper")
    assert r.status_code == 404 or r.json()["status"] != "running", r.text
    r = v1.get(f"/v1/sandbox/{sid}/file/keep.txt")
    assert r.status_code == 200 and r.content == b"kept\n", r.text
    assert "sleep" not in v1.sh(sid, "ps -e -o comm")


def test_delete_is_204_idempotent_and_removes_files(v1, sid):
    v1.create(sid, labels={"x": "y"})
    assert v1.put(f"/v1/sandbox/{sid}/file/gone.txt", data=b"bye").status_code == 201
    base = v1.host_uid(sid)
    v1.sh(sid, "sleep 100000 > /dev/null 2>&1 &")
    r = v1.delete(f"/v1/sandbox/{sid}")
    assert r.status_code == 204 and r.content == b"", r.text
    assert not wait_no_pids(base, timeout=5)
    assert_error(v1.get(f"/v1/sandbox/{sid}"), 404, "sandbox_not_found")
    assert v1.delete(f"/v1/sandbox/{sid}").status_code == 204
    assert v1.delete(f"/v1/sandbox/{sid}").status_code == 204
    # named again, it is a new, empty sandbox
    assert_error(v1.get(f"/v1/sandbox/{sid}/file/gone.txt"), 404, "file_not_found")
    assert v1.info(sid)["labels"] == {}


def test_delete_of_unknown_sandbox_is_204(v1, sid):
    assert v1.delete(f"/v1/sandbox/{sid}").status_code == 204


def memory_hog(limit_mb, step_mb=16):
    """Touches memory in steps up to limit_mb, then exits 0 (so an unenforced
    limit shows up as a success, not as a dead host)."""
    return ["python3", "-c", "a=[]\nfor i in range(%d): a.append(b'x' * (%d << 20))\n"
            "print(len(a) * %d)" % (limit_mb // step_mb, step_mb, step_mb)]


def test_memory_limit_is_enforced(v1, sid):
    v1.create(sid, limits={"memoryMB": 64})
    res = v1.run(sid, argv=memory_hog(1024), timeout=60)
    assert res["exitCode"] == 137, res
    assert res["signal"] == "KILL", res
    assert v1.info(sid)["usage"]["oomKills"] >= 1
    # the sandbox is still usable, and a small command fits
    res = v1.run(sid, argv=memory_hog(32))
    assert res["exitCode"] == 0 and res["stdout"] == "32\n", res


def test_pids_limit_is_enforced(v1, sid):
    v1.create(sid, limits={"pids": 16})
    probe = ("import os, time\nn = 0\ntry:\n    for i in range(64):\n"
             "        pid = os.fork()\n        if pid == 0:\n"
             "            os.closerange(0, 3)\n            time.sleep(2)\n"
             "            os._exit(0)\n        n += 1\n"
             "except OSError as e:\n    print(e)\nprint(n)\n")
    res = v1.run(sid, argv=["python3", "-c", probe], timeout=60)
    lines = res["stdout"].splitlines()
    assert "Resource temporarily unavailable" in res["stdout"], res
    assert int(lines[-1]) < 16, res
    assert v1.info(sid)["limits"]["pids"] == 16


def test_disk_limit_is_enforced(v1, sid):
    v1.create(sid, limits={"diskMB": 16})
    res = v1.run(sid, "head -c 40000000 /dev/zero > /workspace/big; echo rc=$?")
    assert res["stdout"] == "rc=1\n", res
    assert "Disk quota exceeded" in res["stderr"] or "No space left" in res["stderr"], res
    v1.sh(sid, "rm /workspace/big")
    r = v1.put(f"/v1/sandbox/{sid}/file/up.bin", data=b"z" * 40_000_000)
    assert_error(r, 413, "too_large")
    # the failed upload left nothing, and there is room again
    assert v1.sh(sid, "ls -A /workspace") == ""
    assert v1.put(f"/v1/sandbox/{sid}/file/small", data=b"z" * 1_000_000).status_code == 201


def test_cpu_limit_is_reported(v1, sid):
    assert v1.create(sid, limits={"cpus": 0.25})["limits"]["cpus"] == 0.25
    assert v1.info(sid)["limits"]["cpus"] == 0.25


def test_env_at_creation_is_visible_to_every_command(v1, sid):
    v1.create(sid, env={"GREETING": "hello there", "EMPTY": ""})
    assert v1.sh(sid, 'echo "$GREETING|${EMPTY-unset}"') == "hello there|\n"
    res = v1.run(sid, argv=["printenv", "GREETING"])
    assert res["stdout"] == "hello there\n", res
    sess = v1.post(f"/v1/sandbox/{sid}/session", json={}).json()["id"]
    assert v1.sh(sid, 'echo "$GREETING"', session=sess) == "hello there\n"
    proc = v1.start_process(sid, argv=["printenv", "GREETING"])
    assert wait_until(lambda: v1.process(sid, proc["id"])["status"] != "running", 10)
    logs = v1.get(f"/v1/sandbox/{sid}/process/{proc['id']}/logs").json()
    assert logs["stdout"] == "hello there\n", logs


def test_sleep_after_stops_an_idle_sandbox_and_keeps_files(v1, sid):
    assert v1.create(sid, sleepAfter=1)["sleepAfterMs"] == 1000
    v1.sh(sid, "echo data > /workspace/f")
    assert v1.running(sid) is True
    t0 = time.monotonic()
    assert wait_until(lambda: not v1.running(sid), 6), "did not idle out"
    assert time.monotonic() - t0 >= 0.5
    assert v1.info(sid)["state"] == "stopped"
    assert v1.get(f"/v1/sandbox/{sid}/file/f").content == b"data\n"


def test_keep_alive_never_idles_out(sleepy, new_sid):
    api = V1(sleepy)
    kept, idle = new_sid(), new_sid()
    api.create(kept, keepAlive=True)
    api.create(idle)
    api.sh(kept, "true")
    api.sh(idle, "true")
    assert wait_until(lambda: not api.running(idle), 5), "the plain sandbox did not idle out"
    time.sleep(1.5)
    assert api.running(kept) is True
    assert api.info(kept)["state"] == "running"
