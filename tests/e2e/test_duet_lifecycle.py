"""DELETE /api/rooms/{id}, idle stop and transparent restart, files and the
session surviving daemon restarts, and processes dying with the daemon."""
import os
import re
import threading
import time

import pytest
import requests

from helpers import (describe_pids, host_comms, host_pids_with_uid_range,
                     room_host_uid, room_name_re, wait_no_pids, wait_until)


def start_background_sleep(daemon, room):
    """Starts a detached `sleep` in the room; returns the room's host uid base
    after checking the sleep shows up on the host."""
    base = room_host_uid(daemon, room)
    res = daemon.run(room, "sleep 1000 >/dev/null 2>&1 &", timeout=10)
    assert res["exitCode"] == 0, res
    assert wait_until(lambda: "sleep" in host_comms(host_pids_with_uid_range(base)), 3), \
        "background sleep not seen on the host:\n" + describe_pids(host_pids_with_uid_range(base))
    return base


def test_delete_destroys_files_processes_and_session(daemon, room):
    daemon.run(room, "echo data > /workspace/f.txt && mkdir -p /root/x && cd /tmp && export V=1")
    base = start_background_sleep(daemon, room)

    r = daemon.delete(room)
    assert r.status_code == 200, r.text
    assert r.json() == {"cleaned": True, "roomId": room}

    left = wait_no_pids(base, timeout=5)
    assert not left, "processes survived DELETE:\n" + describe_pids(left)

    # the next exec works, in a fresh sandbox
    res = daemon.run(room, "pwd; echo \"V=${V:-unset}\"; ls -A /workspace; test -e /root/x || echo no-x")
    assert res["stdout"] == "/workspace\nV=unset\nno-x\n", res
    assert daemon.run(room, "cat /workspace/f.txt")["exitCode"] != 0


def test_delete_never_existing_room_is_200(daemon, room):
    r = daemon.delete(room)
    assert r.status_code == 200, r.text
    assert r.json() == {"cleaned": True, "roomId": room}


def test_delete_twice_is_idempotent(daemon, room):
    daemon.run(room, "touch a")
    for _ in range(2):
        r = daemon.delete(room)
        assert r.status_code == 200, r.text
        assert r.json() == {"cleaned": True, "roomId": room}


def test_delete_leaves_other_rooms_alone(daemon, new_room):
    a, b = new_room(), new_room()
    daemon.run(a, "echo A > keep.txt")
    daemon.run(b, "echo B > keep.txt && cd /tmp")
    assert daemon.delete(a).status_code == 200
    res = daemon.run(b, "pwd; cat /workspace/keep.txt")
    assert res["stdout"] == "/tmp\nB\n"


def test_idle_stop_then_transparent_restart(make_daemon, room):
    d = make_daemon("--sleep-after", "1s")
    d.run(room, "echo persisted > /workspace/idle.txt")
    base = room_host_uid(d, room)
    pat = room_name_re(room)

    def stopped_for_idle():
        return any(pat.search(l) and "stopped" in l and "idle" in l
                   for l in d.log_text().splitlines())

    assert wait_until(stopped_for_idle, 10, interval=0.2), \
        "no idle stop logged within 10 s:\n" + d.log_tail()
    left = wait_no_pids(base, timeout=3)
    assert not left, "processes left after idle stop:\n" + describe_pids(left)

    res = d.run(room, "cat /workspace/idle.txt")
    assert res["stdout"] == "persisted\n"


def test_no_idle_stop_while_a_command_runs(make_daemon, room):
    d = make_daemon("--sleep-after", "1s")
    res = d.run(room, "sleep 2.5; echo finished", timeout=30)
    assert (res["exitCode"], res["stdout"]) == (0, "finished\n"), res


def test_files_survive_sigkill_and_processes_die_with_daemon(make_daemon, room):
    d = make_daemon()
    d.run(room, "echo survived > /workspace/kill.txt && mkdir -p /home/u && echo h > /home/u/f")
    base = start_background_sleep(d, room)

    d.kill()
    left = wait_no_pids(base, timeout=5)
    assert not left, "sandbox processes outlived a SIGKILLed daemon:\n" + describe_pids(left)

    d.restart()
    res = d.run(room, "cat /workspace/kill.txt /home/u/f")
    assert res["stdout"] == "survived\nh\n", res


def test_session_survives_sigkill_of_the_daemon(make_daemon, room):
    d = make_daemon()
    d.run(room, "cd /tmp; export A=1")
    d.kill()
    d.restart()
    res = d.run(room, "pwd; echo $A")
    assert res["stdout"] == "/tmp\n1\n", res
    # and it goes on from there
    d.run(room, "cd /; unset A")
    d.restart()  # SIGTERM this time
    assert d.run(room, 'pwd; echo "${A-unset}"')["stdout"] == "/\nunset\n"
    # what a room exports rests in the registry: the daemon's alone (the
    # state dir itself is 0711)
    for name in os.listdir(d.state_dir):
        if name.startswith("registry.db"):
            mode = os.stat(os.path.join(d.state_dir, name)).st_mode & 0o777
            assert mode == 0o600, (name, oct(mode))


def test_a_deleted_room_leaves_no_session_behind(make_daemon, room):
    d = make_daemon()
    d.run(room, "cd /tmp; export A=1")
    assert d.delete(room).status_code == 200
    assert d.run(room, "pwd")["stdout"] == "/workspace\n"  # a new sandbox
    d.kill()
    d.restart()
    res = d.run(room, 'pwd; echo "${A-unset}"')
    assert res["stdout"] == "/workspace\nunset\n", res


def test_sigterm_exits_0_stops_sandboxes_keeps_files(make_daemon, room):
    d = make_daemon()
    d.run(room, "echo kept > /workspace/term.txt")
    base = start_background_sleep(d, room)

    t0 = time.monotonic()
    d.stop()  # asserts exit status 0
    assert time.monotonic() - t0 < 10
    left = wait_no_pids(base, timeout=3)
    assert not left, "sandbox processes outlived SIGTERM:\n" + describe_pids(left)

    d.restart()
    assert d.run(room, "cat /workspace/term.txt")["stdout"] == "kept\n"


def own_cgroup_dirs():
    """The test's (and so a daemon child's) cgroup in every v1 hierarchy
    and the unified one, as host paths."""
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, post = line.split(" - ")
            fstype, _, sopts = post.split()[:3]
            if fstype in ("cgroup", "cgroup2"):
                mounts.append((fstype, set(sopts.split(",")), pre.split()[3],
                               pre.split()[4]))
    out = []
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            for fstype, opts, root, mp in mounts:
                if (not ctrls and fstype == "cgroup2") or \
                        (ctrls and fstype == "cgroup" and set(ctrls.split(",")) <= opts):
                    rel = os.path.relpath(path, root) if path.startswith(root) else path
                    out.append(os.path.normpath(os.path.join(mp, rel.lstrip("/"))))
    return out


def daemon_cgroup_name(state_dir):
    h = 2166136261
    for c in os.path.realpath(state_dir).encode():
        h = ((h ^ c) * 16777619) & 0xffffffff
    return "sandboxd-%08x" % h


def test_sigterm_stops_many_sandboxes_at_once_and_keeps_everything(make_daemon, new_room):
    d = make_daemon()
    rooms = [new_room() for _ in range(6)]
    bases = []
    for i, r in enumerate(rooms):
        res = d.run(r, f"mkdir -p /tmp/s{i} && cd /tmp/s{i} && export R={i} && "
                       f"echo file{i} > /workspace/f.txt")
        assert res["exitCode"] == 0, res
        bases.append(start_background_sleep(d, r))
    cgname = daemon_cgroup_name(d.state_dir)
    dirs = [os.path.join(c, cgname) for c in own_cgroup_dirs()]
    assert any(os.path.isdir(x) for x in dirs), dirs
    # a command still running when SIGTERM comes is answered, not dropped
    answer = {}

    def long_exec():
        try:
            r = d.exec(rooms[0], "sleep 600", timeout=60)
            answer["status"], answer["body"] = r.status_code, r.text
        except requests.RequestException as e:
            answer["error"] = repr(e)
    t = threading.Thread(target=long_exec)
    t.start()
    assert wait_until(lambda: host_comms(host_pids_with_uid_range(bases[0]))
                      .count("sleep") >= 2, 10), "the long command never started"

    d.stop()  # exit status 0
    t.join(30)
    assert not t.is_alive()
    assert answer.get("status") == 500, answer
    assert "shutting down" in answer.get("body", ""), answer
    for b in bases:
        left = wait_no_pids(b, timeout=3)
        assert not left, "sandbox processes outlived SIGTERM:\n" + describe_pids(left)
    # no cgroup of the daemon's is left behind
    assert not [x for x in dirs if os.path.exists(x)], dirs
    assert "event=all-stopped sandboxes=6 " in d.log_text(), d.log_tail(40)

    d.restart()
    # registered, not started: a sandbox starts on its first request
    assert "event=loaded sandboxes=6 " in d.log_text(), d.log_tail(40)
    for b in bases:
        assert not host_pids_with_uid_range(b), describe_pids(host_pids_with_uid_range(b))
    for i, r in enumerate(rooms):
        res = d.run(r, 'pwd; echo "$R"; cat /workspace/f.txt')
        assert res["stdout"] == f"/tmp/s{i}\n{i}\nfile{i}\n", (r, res)


def children_named(ppid, name):
    """Pids of ppid's children whose comm is name."""
    out = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        if comm == name and int(st[st.rindex(")") + 2:].split()[1]) == ppid:
            out.append(int(p))
    return out


def test_init_killed_from_the_host_is_noticed_and_the_room_starts_again(make_daemon, room):
    d = make_daemon()
    d.run(room, "cd /tmp; export K=1; echo k > /workspace/k.txt")
    base = start_background_sleep(d, room)
    # the daemon's one child named sandboxd-init (the zygote makes it the
    # daemon's child, not its own)
    inits = children_named(d.pid, "sandboxd-init")
    assert len(inits) == 1, inits
    os.kill(inits[0], 9)
    # the daemon sees its end of init's socket close, and stops the room
    assert wait_until(lambda: "event=init-exited" in d.log_text(), 10), d.log_tail(20)
    left = wait_no_pids(base, timeout=5)
    assert not left, describe_pids(left)
    res = d.run(room, 'pwd; echo "$K"; cat /workspace/k.txt')
    assert res["stdout"] == "/tmp\n1\nk\n", res


def test_zygote_killed_from_the_host_is_replaced_and_rooms_still_start(make_daemon, new_room):
    d = make_daemon()
    first = new_room()
    assert d.run(first, "echo a")["stdout"] == "a\n"
    zygotes = children_named(d.pid, "sandboxd-zygote")
    assert len(zygotes) == 1, zygotes
    os.kill(zygotes[0], 9)

    def dead():  # a zombie: the daemon reaps it on its next start
        try:
            with open(f"/proc/{zygotes[0]}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except FileNotFoundError:
            return True
    assert wait_until(dead, 10)
    # the next start finds it gone, reaps it and makes another
    second = new_room()
    res = d.run(second, "echo b; cat /proc/1/cmdline | tr '\\0' ' '")
    assert res["stdout"] == "b\nsandboxd-init ", res
    assert not os.path.exists(f"/proc/{zygotes[0]}"), "the killed zygote was not reaped"
    again = children_named(d.pid, "sandboxd-zygote")
    assert len(again) == 1 and again != zygotes, again
    # the room that ran before is untouched
    assert d.run(first, "echo c")["stdout"] == "c\n"
    # and the zygote goes with the daemon
    d.stop()
    assert wait_until(lambda: not os.path.exists(f"/proc/{again[0]}"), 10)


# cgroup v1 renames a directory, so there the next room's cgroups and its
# init are made ahead (runtime_make_ahead); v2 renames none
CGROUP_V1 = os.path.isdir("/sys/fs/cgroup/pids") and not os.path.exists(
    "/sys/fs/cgroup/cgroup.controllers")


def cgroup_of(pid, controller="pids"):
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if controller in ctrls.split(","):
                return path
    return None


def the_init_made_ahead(d):
    """The one init waiting for the next room (after a start), its pid."""
    ahead = wait_until(lambda: children_named(d.pid, "sandboxd-ahead"), 10)
    assert len(ahead) == 1, ahead
    return ahead[0]


@pytest.mark.skipif(not CGROUP_V1, reason="inits are made ahead on cgroup v1 only")
def test_the_next_rooms_init_waits_ahead_and_the_next_room_is_it(make_daemon, new_room):
    d = make_daemon()
    first, second = new_room(), new_room()
    assert d.run(first, "echo a")["stdout"] == "a\n"
    p = the_init_made_ahead(d)
    assert cgroup_of(p).endswith("/ahead/init"), cgroup_of(p)
    # the second room runs in the user namespace that process holds (fd 4
    # until it starts: the one init enters), and it is the room's init now
    ns = os.readlink(f"/proc/{p}/fd/4")
    assert ns.startswith("user:["), ns
    res = d.run(second, "readlink /proc/self/ns/user")
    assert res["stdout"].strip() == ns, res
    assert p in children_named(d.pid, "sandboxd-init")
    assert re.search(r"/s\d+/init$", cgroup_of(p)), cgroup_of(p)
    # another waits for the third, in a new set named ahead
    nxt = wait_until(lambda: children_named(d.pid, "sandboxd-ahead"), 10)
    assert len(nxt) == 1 and nxt[0] != p, nxt
    parent = "/sys/fs/cgroup/pids" + cgroup_of(nxt[0]).rsplit("/", 2)[0]
    assert os.path.isdir(parent + "/ahead")
    # the daemon's stop kills and reaps it, and removes its cgroups
    d.stop()
    assert not os.path.exists(f"/proc/{nxt[0]}")
    assert not os.path.exists(parent + "/ahead")


@pytest.mark.skipif(not CGROUP_V1, reason="inits are made ahead on cgroup v1 only")
def test_an_init_made_ahead_for_another_room_is_killed_and_reaped(make_daemon, room):
    d = make_daemon("--sleep-after", "1s")
    d.run(room, "echo persisted > /workspace/a.txt")
    p = the_init_made_ahead(d)
    pat = room_name_re(room)
    assert wait_until(lambda: any(pat.search(l) and "stopped" in l and "idle" in l
                                  for l in d.log_text().splitlines()), 10, interval=0.2), \
        d.log_tail()
    # the room starts again with its own uid range, not the next new
    # room's that the waiting init was made for
    res = d.run(room, "cat /workspace/a.txt")
    assert res["stdout"] == "persisted\n", res
    assert wait_until(lambda: not os.path.exists(f"/proc/{p}"), 5), \
        f"the init made ahead ({p}) is still there (not reaped?)"


@pytest.mark.skipif(not CGROUP_V1, reason="inits are made ahead on cgroup v1 only")
def test_an_init_made_ahead_killed_from_the_host_is_replaced(make_daemon, new_room):
    d = make_daemon()
    first, second = new_room(), new_room()
    assert d.run(first, "echo a")["stdout"] == "a\n"
    p = the_init_made_ahead(d)
    os.kill(p, 9)

    def dead():  # a zombie (the kill takes effect when it next runs)
        with open(f"/proc/{p}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"

    assert wait_until(dead, 10), f"{p} did not die of SIGKILL"
    # the next room finds it gone, reaps it and has an init made at once
    res = d.run(second, "cat /proc/1/comm")
    assert res["stdout"] == "sandboxd-init\n", res
    assert not os.path.exists(f"/proc/{p}"), "the killed one was not reaped"
    assert d.run(first, "echo again")["stdout"] == "again\n"
