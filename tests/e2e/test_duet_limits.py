"""Exec timeout, memory and pids limits: the runaway command is stopped, its
whole process tree is gone from the host, and the daemon and other rooms
keep answering.

The bombs are guarded so that a daemon without limits fails the test instead
of taking the host down: the memory bomb stops by itself at a few GB, and the
fork bomb only runs after a bounded probe showed the pids limit works."""
import threading
import time

import pytest

from helpers import (Daemon, describe_pids, host_comms, host_pids_with_uid_range,
                     room_host_uid, wait_no_pids, wait_until)

TIMEOUT_BODY = {"error": "sandbox execution failed: timeout"}


def memory_hog(limit_mb, step_mb=50):
    """A python3 one-liner that touches memory in steps until limit_mb, then
    exits 0 (so an unenforced limit shows up as success, not as a dead host)."""
    return ("python3 -c 'a=[]\nfor i in range(%d): a.append(b\"x\" * (%d << 20))\n"
            "print(len(a) * %d)'" % (limit_mb // step_mb, step_mb, step_mb))


def fork_probe(n):
    """Forks up to n children that close their output and sleep 3 s; prints
    how many forks succeeded."""
    return ("python3 -c 'import os, time\nn = 0\nfor i in range(%d):\n"
            "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
            "    if pid == 0:\n        os.closerange(0, 3)\n        time.sleep(3)\n"
            "        os._exit(0)\n    n += 1\nprint(n)'" % n)


@pytest.fixture(scope="module")
def timeout_daemon():
    d = Daemon(["--exec-timeout", "2s"])
    yield d
    d.close()


def run_in_thread(fn):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", fn()), daemon=True)
    t.start()
    return t, box


def test_timeout_is_500_and_kills_the_command(timeout_daemon, room):
    d = timeout_daemon
    base = room_host_uid(d, room)
    before = set(host_pids_with_uid_range(base))
    t0 = time.monotonic()
    r = d.exec(room, "sleep 30; echo never")
    elapsed = time.monotonic() - t0
    assert r.status_code == 500, r.text
    assert r.json() == TIMEOUT_BODY
    # it ran until its timeout (2 s), and not its whole 30 s
    assert 1.5 <= elapsed < 25, elapsed
    left = wait_no_pids(base, timeout=10, ignore=before)
    assert not left, "command survived its timeout:\n" + describe_pids(left)
    assert d.run(room, "echo ok")["stdout"] == "ok\n"


def test_background_child_holding_stdout_times_out(timeout_daemon, room):
    d = timeout_daemon
    base = room_host_uid(d, room)
    before = set(host_pids_with_uid_range(base))
    r = d.exec(room, "sleep 100000 &")
    assert r.status_code == 500, r.text
    assert r.json() == TIMEOUT_BODY
    left = wait_no_pids(base, timeout=3, ignore=before)
    assert not left, "background child survived the timeout:\n" + describe_pids(left)


def test_detached_background_child_returns_at_once_and_survives(timeout_daemon, room):
    d = timeout_daemon
    base = room_host_uid(d, room)
    t0 = time.monotonic()
    res = d.run(room, "sleep 100000 > /dev/null 2>&1 &")
    assert time.monotonic() - t0 < 1.5
    assert res["exitCode"] == 0
    time.sleep(0.5)
    assert "sleep" in host_comms(host_pids_with_uid_range(base)), \
        describe_pids(host_pids_with_uid_range(base))
    assert d.delete(room).status_code == 200
    assert not wait_no_pids(base, timeout=5)


def test_memory_bomb_is_killed_daemon_stays_up(make_daemon, new_room):
    d = make_daemon("--memory", "256M")
    bomb, other = new_room(), new_room()
    d.run(other, "true")
    t, box = run_in_thread(lambda: d.exec(bomb, memory_hog(2000), timeout=60))
    time.sleep(0.3)
    assert d.run(other, "echo alive")["stdout"] == "alive\n"
    t.join(70)
    r = box["r"]
    assert r.status_code == 200, r.text
    res = r.json()["result"]
    assert res["exitCode"] != 0, f"2 GB allocated under --memory 256M: {res}"
    assert d.run(bomb, "echo ok")["stdout"] == "ok\n"
    assert d.run(other, "echo alive")["stdout"] == "alive\n"


def test_default_memory_limit_is_1g(daemon, room):
    res = daemon.run(room, memory_hog(600), timeout=60)
    assert (res["exitCode"], res["stdout"]) == (0, "600\n"), res
    res = daemon.run(room, memory_hog(3000), timeout=60)
    assert res["exitCode"] != 0, f"3 GB allocated under the default 1 GiB limit: {res}"


def test_default_pids_limit_is_512(daemon, room):
    res = daemon.run(room, fork_probe(700), timeout=60)
    assert 400 <= int(res["stdout"]) < 512, res
    assert daemon.delete(room).status_code == 200


def test_fork_bomb_is_contained(make_daemon, new_room):
    # an exec timeout that a loaded machine's "echo alive" beside a fork
    # bomb stays well within; the bomb itself runs until it
    d = make_daemon("--exec-timeout", "10s", "--pids", "64")
    bomb, other = new_room(), new_room()
    # guard: the limit must hold before a real fork bomb is let loose
    res = d.run(bomb, fork_probe(100), timeout=60)
    assert int(res["stdout"]) < 64, f"--pids 64 not enforced, fork bomb skipped: {res}"
    assert d.delete(bomb).status_code == 200

    base = room_host_uid(d, bomb)
    before = set(host_pids_with_uid_range(base))
    d.run(other, "true")
    t, box = run_in_thread(lambda: d.exec(bomb, ":(){ :|:& };:", timeout=50))
    time.sleep(0.5)
    assert d.run(other, "echo alive", timeout=30)["stdout"] == "alive\n"
    t.join(60)
    r = box["r"]
    assert r.status_code == 500, r.text
    assert r.json() == TIMEOUT_BODY
    left = wait_no_pids(base, timeout=15, ignore=before)
    assert not left, f"{len(left)} fork bomb processes left:\n" + describe_pids(left[:20])
    assert d.run(other, "echo alive")["stdout"] == "alive\n"
    assert d.run(bomb, "echo ok")["stdout"] == "ok\n"
