"""Part B, namespaces and visibility (checks 7-12): what a sandbox can see
of the host and of other sandboxes."""
import os
import secrets
import socket

import isolation_lib as lib


def test_07_pid_namespace(sandbox, daemon):
    sb = sandbox()
    sb.install_probe()
    host_pids = [daemon.pid, os.getpid(), os.getppid()]
    r = sb.probe("pidns", *host_pids)
    pids = [int(p) for p in r["PIDS"].split(",")]
    assert 1 in pids, r
    assert int(r["NPIDS"]) <= 6, f"more processes than the sandbox has: {r}"
    assert r["PID1_COMM"] == "sandboxd-init", r
    assert r["NSPID"] == r["SELF"], f"more than one pid-ns level visible: {r}"
    for hp in host_pids:
        if hp not in pids:
            assert r[f"KILL0_{hp}"] == "ESRCH", (hp, r)
    # from the host: init lives in another pid namespace than ours
    init = daemon.init_pids(sb.name)[-1]
    assert os.readlink(f"/proc/{init}/ns/pid") != os.readlink("/proc/self/ns/pid")
    with open(f"/proc/{init}/status") as f:
        nspid = [l for l in f if l.startswith("NSpid:")][0].split()[1:]
    assert nspid == [str(init), "1"], nspid


def test_07b_kill_all_inside_spares_init_and_spawner(sandbox):
    """`kill -9 -1` inside signals every process the caller may signal: all
    of the sandbox's own, not init, which is also the spawner that makes
    its commands (host uid 0, src/runtime/spawner.c). The sandbox goes on
    with the same init; it is not restarted behind the client's back."""
    sb = sandbox()
    sb.background("sleep 60")
    before = sb.d.init_pids(sb.name)
    assert before, "no init started"
    res = sb.run("kill -9 -1; echo after")
    assert res["stdout"] == "after\n", res
    assert sb.run("echo alive")["stdout"] == "alive\n"
    assert sb.d.init_pids(sb.name) == before, "the sandbox was restarted"
    assert lib.is_init_of(before[-1], sb.d.pid), "the sandbox's init died"
    r = sb.probe("pidns")
    assert "sleep" not in sb.sh("ps -e -o comm"), "kill -1 left the sleep"
    assert r["PID1_COMM"] == "sandboxd-init", r


def test_08_ptrace_impossible(sandbox):
    a, b = sandbox(), sandbox()
    b.background("sleep 60")
    victims = lib.wait_until(lambda: lib.host_procs_in_uid_range(b.uid_base), 5)
    assert victims, "no process in sandbox B to aim at"
    host_pid = victims[0][0]
    r = a.probe("ptrace", host_pid, os.getpid())
    assert r["PTRACE_ATTACH_CHILD"] == "EPERM", r  # policy: no ptrace at all
    assert r["PTRACE_SEIZE_CHILD"] == "EPERM", r
    assert r["PTRACE_TRACEME"] == "EPERM", r
    assert r["PTRACE_ATTACH_INIT"] == "EPERM", r
    assert r[f"PTRACE_ATTACH_{host_pid}"] == "EPERM", r
    assert r[f"PTRACE_ATTACH_{os.getpid()}"] == "EPERM", r
    # the victim is untouched (not traced, not stopped)
    with open(f"/proc/{host_pid}/status") as f:
        st = dict(l.split(":", 1) for l in f if ":" in l)
    assert st["TracerPid"].strip() == "0", st["TracerPid"]
    assert st["State"].split()[0] == "S", st["State"]


def test_09_uts_namespace(sandbox):
    host_name = socket.gethostname()
    r = sandbox().probe("uts")
    assert r["HOSTNAME"] == "sandbox" and r["HOSTNAME"] != host_name, r
    assert r["SETHOSTNAME"] == "EPERM", r
    assert r["SETDOMAINNAME"] == "EPERM", r
    assert socket.gethostname() == host_name


def test_10_ipc_namespace(sandbox):
    a, b = sandbox(), sandbox()
    key = "0x5bd%d" % (os.getpid() % 1000)
    fresh = b.probe("ipc-lookup", key)
    for kind in ("SHM", "MSG", "SEM"):
        assert fresh[f"SYSVIPC_{kind}"] == "0", f"ipcs not empty in a new sandbox: {fresh}"
    made = a.probe("ipc-create", key)
    for call in ("SHMGET_CREATE", "MSGGET_CREATE", "SEMGET_CREATE"):
        assert made[call] == "OK", made
    seen_a = a.probe("ipc-lookup", key)
    assert seen_a["SHMGET_LOOKUP"] == "OK", f"control failed: {seen_a}"
    seen_b = b.probe("ipc-lookup", key)
    for call in ("SHMGET_LOOKUP", "MSGGET_LOOKUP", "SEMGET_LOOKUP"):
        assert seen_b[call] == "ENOENT", seen_b
    assert seen_b["SYSVIPC_SHM"] == "0", seen_b
    # nor on the host
    with open("/proc/sysvipc/shm") as f:
        keys = [int(l.split()[0]) for l in f.readlines()[1:]]
    assert int(key, 16) not in keys


def test_11_cgroup_namespace(sandbox):
    r = sandbox().probe("cgroupns")
    lines = [v for k, v in r.items() if k.startswith("CGROUP_") and k != "CGROUP_LINES"]
    assert lines, r
    for line in lines:
        assert line.rsplit(":", 1)[1] == "/", f"cgroup path visible: {line}"
    assert r["STAT_SYS"] == "ENOENT", r
    assert r["STAT_SYS_FS_CGROUP"] == "ENOENT", r


def test_12_abstract_socket_per_sandbox(sandbox):
    a, b = sandbox(), sandbox()
    name = "sbx-iso-" + secrets.token_hex(4)
    a.install_probe()
    a.background(f"{lib.PROBE_PATH} abstract-listen {name} 30")
    ok = lib.wait_until(lambda: a.probe("abstract-connect", name).get("CONNECT") == "OK", 5)
    assert ok, "control: a connect inside A failed"
    assert a.probe("abstract-connect", name)["REPLY"] == "pong"
    r = b.probe("abstract-connect", name)
    assert r["CONNECT"] == "ECONNREFUSED", f"B reached A's @{name}: {r}"
    # nor from the host's network namespace, nor the other way round
    s = socket.socket(socket.AF_UNIX)
    try:
        assert s.connect_ex("\0" + name) != 0, "host reached the sandbox's socket"
    finally:
        s.close()
    host_name = "sbx-iso-host-" + secrets.token_hex(4)
    with socket.socket(socket.AF_UNIX) as srv:
        srv.bind("\0" + host_name)
        srv.listen(1)
        r = a.probe("abstract-connect", host_name)
        assert r["CONNECT"] == "ECONNREFUSED", f"sandbox reached the host's @{host_name}: {r}"
