"""Parallel requests across rooms and within one room, and no fd leak."""
import time
from concurrent.futures import ThreadPoolExecutor


def test_parallel_execs_in_different_rooms(daemon, new_room):
    rooms = [new_room() for _ in range(10)]

    def go(room):
        return daemon.exec(room, f"sleep 0.2; echo {room}; cat /proc/self/uid_map")

    with ThreadPoolExecutor(10) as pool:
        responses = list(pool.map(go, rooms))
    bases = set()
    for room, r in zip(rooms, responses):
        assert r.status_code == 200, r.text
        res = r.json()["result"]
        lines = res["stdout"].splitlines()
        assert lines[0] == room, res
        bases.add(lines[1].split()[1])
    assert len(bases) == 10, f"rooms share a host uid range: {bases}"


def test_parallel_execs_in_one_room_are_serialized(daemon, room):
    def go(i):
        return daemon.exec(room, f"echo start {i} >> /workspace/log; sleep 0.3; "
                                 f"echo end {i} >> /workspace/log; echo {i}")

    t0 = time.monotonic()
    with ThreadPoolExecutor(5) as pool:
        responses = list(pool.map(go, range(5)))
    elapsed = time.monotonic() - t0
    for i, r in enumerate(responses):
        assert r.status_code == 200, r.text
        assert r.json()["result"]["stdout"] == f"{i}\n"
    log = daemon.run(room, "cat /workspace/log")["stdout"].splitlines()
    assert len(log) == 10, log
    for start, end in zip(log[::2], log[1::2]):
        assert start.split()[0] == "start" and end == "end " + start.split()[1], \
            f"commands in one room overlapped: {log}"
    assert elapsed >= 1.4, elapsed


def test_daemon_fds_do_not_leak(daemon, new_room):
    rooms = [new_room() for _ in range(2)]
    for room in rooms:  # warm up: the rooms' sandboxes exist before counting
        daemon.run(room, "true")
    time.sleep(0.2)
    before = daemon.fd_count()
    for i in range(50):
        room = rooms[i % 2]
        if i % 10 == 7:
            assert daemon.exec(room, "nosuchcmd_e2e").status_code == 500
        elif i % 10 == 8:
            assert daemon.exec(room, "").status_code == 400
        elif i % 10 == 9:
            assert daemon.exec(room, "exit 4").json()["result"]["exitCode"] == 4
        else:
            assert daemon.run(room, f"echo {i}; echo e >&2")["stdout"] == f"{i}\n"
    time.sleep(0.2)
    after = daemon.fd_count()
    assert after <= before + 5, f"daemon fds grew from {before} to {after}"
