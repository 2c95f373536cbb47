"""What code inside a room can see and do: identity, privileges, pid and
network namespaces, host files, other rooms, and `rm -rf /`. Network tests
target loopback only."""
import json
import os
import subprocess
import secrets
import socket

import pytest

from helpers import room_host_uid


def status_fields(daemon, room):
    out = daemon.run(room, "cat /proc/self/status")["stdout"]
    return dict(line.split(":", 1) for line in out.splitlines() if ":" in line)


def test_init_is_ours_and_host_processes_invisible(daemon, room):
    res = daemon.run(room, "od -An -c /proc/1/cmdline | tr -d ' \\n'")
    # exactly the name and its NUL: no padding, nothing of the daemon's argv
    assert res["stdout"] == "sandboxd-init\\0", res
    res = daemon.run(room, "ls /proc | grep -c '^[0-9]'")
    assert int(res["stdout"]) <= 10, res
    # the test runner itself (a host process) is not visible
    res = daemon.run(room, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '")
    assert "pytest" not in res["stdout"] and "python3 -m" not in res["stdout"]


def test_no_capabilities_no_new_privs_seccomp(daemon, room):
    st = status_fields(daemon, room)
    assert st["CapEff"].strip() == "0000000000000000", st["CapEff"]
    assert st["NoNewPrivs"].strip() == "1"
    assert st["Seccomp"].strip() == "2"


def test_uid_map_unprivileged_and_distinct_per_room(daemon, new_room):
    a, b = new_room(), new_room()
    ua, ub = room_host_uid(daemon, a), room_host_uid(daemon, b)
    assert ua != 0 and ub != 0
    assert abs(ua - ub) >= 65536, (ua, ub)


def test_cannot_nest_user_namespaces(daemon, room):
    assert daemon.run(room, "command -v unshare")["exitCode"] == 0, "unshare missing inside"
    res = daemon.run(room, "unshare -U true")
    assert res["exitCode"] != 0, res


def test_cannot_mount(daemon, room):
    res = daemon.run(room, "mkdir -p /mnt; mount -t tmpfs x /mnt")
    assert res["exitCode"] != 0, res
    res = daemon.run(room, "d=$(mktemp -d) && mount -t tmpfs x \"$d\"; echo rc=$?; "
                           "grep -c \" $d \" /proc/self/mountinfo")
    lines = res["stdout"].split()
    assert lines[0] != "rc=0" and lines[-1] == "0", res


def test_only_loopback_interface_and_no_routes(daemon, room):
    dev = daemon.run(room, "cat /proc/net/dev")["stdout"].splitlines()[2:]
    assert [l.split(":")[0].strip() for l in dev] == ["lo"], dev
    route = daemon.run(room, "cat /proc/net/route")["stdout"].splitlines()[1:]
    assert route == [], route


def test_host_loopback_listener_unreachable(daemon, room):
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        srv.setblocking(False)
        port = srv.getsockname()[1]
        for p in (port, daemon.port):
            res = daemon.run(room, f"timeout 5 bash -c 'echo > /dev/tcp/127.0.0.1/{p}'",
                             timeout=20)
            assert res["exitCode"] != 0, f"port {p} reachable from the sandbox: {res}"
        with pytest.raises(BlockingIOError):
            srv.accept()


def test_host_secrets_and_files_invisible(daemon, room, tmp_path):
    assert daemon.run(room, "test -e /etc/shadow")["exitCode"] == 1
    marker = f"/root/.sbx-e2e-marker-{secrets.token_hex(4)}"
    canary = tmp_path / "host-canary"
    canary.write_text("host\n")
    try:
        with open(marker, "w") as f:
            f.write("host secret\n")
        for path in (marker, str(canary), daemon.state_dir, daemon.log_path):
            res = daemon.run(room, f"cat '{path}' || ls '{path}'")
            assert res["exitCode"] != 0, f"{path} visible inside: {res}"
        res = daemon.run(room, "ls -a /root")
        assert os.path.basename(marker) not in res["stdout"]
    finally:
        os.unlink(marker)


def test_writes_to_usr_stay_inside(daemon, room):
    name = f"/usr/sbx-e2e-probe-{secrets.token_hex(4)}"
    try:
        daemon.exec(room, f"echo pwned > {name}; echo pwned > /usr/bin/sbx-e2e-probe")
        assert not os.path.exists(name)
        assert not os.path.exists("/usr/bin/sbx-e2e-probe")
    finally:
        for p in (name, "/usr/bin/sbx-e2e-probe"):
            if os.path.exists(p):
                os.unlink(p)


def test_rooms_do_not_see_each_other(daemon, new_room):
    a, b = new_room(), new_room()
    daemon.run(a, "echo only-a > /workspace/a.txt && echo t > /tmp/a-tmp")
    daemon.run(a, "sleep 1000 >/dev/null 2>&1 &")
    res = daemon.run(b, "cat /workspace/a.txt /tmp/a-tmp")
    assert res["exitCode"] != 0 and "only-a" not in res["stdout"], res
    assert "sleep" not in daemon.run(b, "cat /proc/[0-9]*/comm")["stdout"]
    assert daemon.delete(a).status_code == 200


def assert_json_answer(r):
    """A 200 with a result, or a 500 saying why the sandbox could not run it."""
    what = f"{r.status_code} {r.text[:500]}"
    assert r.headers.get("Content-Type", "").startswith("application/json"), what
    doc = json.loads(r.content)
    assert (r.status_code == 200 and "result" in doc) or \
        (r.status_code == 500 and doc.get("error", "").startswith("sandbox execution failed: ")), what


def test_rm_rf_root_harms_only_that_room(make_daemon, new_room, tmp_path):
    d = make_daemon("--exec-timeout", "40s")
    victim, bystander = new_room(), new_room()
    canary = tmp_path / "canary.txt"
    canary.write_text("host canary\n")
    # the host may install packages meanwhile: check that nothing vanished
    usr_bin = set(os.listdir("/usr/bin"))
    d.run(bystander, "echo bystander > /workspace/b.txt")
    d.run(victim, "echo v > /workspace/v.txt")

    # one rm, given everything but /usr first: deleting the read-only /usr
    # layer takes longest, so a timeout cuts short only that part
    r = d.exec(victim, "rm -rf --no-preserve-root $(ls -A / | grep -vx usr | sed 's|^|/|') / "
                       "2>/dev/null; echo done", timeout=120)
    assert_json_answer(r)

    assert canary.read_text() == "host canary\n"
    # what vanished meanwhile was removed by the host's package manager
    # (another test installs and purges a package): no package owns it now
    # (merged /usr: dpkg may know it as /bin/NAME); a sandbox that could
    # delete there would have deleted hundreds: twenty tell
    vanished = sorted(usr_bin - set(os.listdir("/usr/bin")))
    def owned(name):
        return any(subprocess.run(["dpkg", "-S", f"{d}/{name}"],
                                  capture_output=True).returncode == 0
                   for d in ("/usr/bin", "/bin"))
    still_owned = [f for f in vanished[:20] if owned(f)]
    assert not still_owned, f"gone from the host's /usr/bin: {vanished[:20]}"
    assert os.path.exists("/usr/bin/bash") and os.path.exists("/etc/passwd")
    assert d.run(bystander, "cat /workspace/b.txt")["stdout"] == "bystander\n"

    assert_json_answer(d.exec(victim, "echo hi"))

    r = d.delete(victim)
    assert r.status_code == 200, r.text
    res = d.run(victim, "echo back; ls /workspace")
    assert res["stdout"] == "back\n", res
