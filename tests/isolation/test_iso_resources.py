"""Part B, resources (checks 35-43), against the suite's daemon limits:
--memory 256M --pids 64 --exec-timeout 3s --cpus 1. Each check must leave
the host, the daemon and other sandboxes healthy; every probe here has a
hard cap of its own in case a limit is missing."""
import os
import threading
import time

import pytest

import isolation_lib as lib

PIDS_MAX = 64
MEMORY = 256 << 20


def _timed_out(resp):
    return resp.status_code == 500 and resp.json().get("error") == \
        "sandbox execution failed: timeout"


def _no_procs_left(sb, timeout=3):
    left = lib.wait_until(lambda: not lib.host_procs_in_uid_range(sb.uid_base), timeout)
    assert left, f"processes left after the kill: {lib.host_procs_in_uid_range(sb.uid_base)}"


def _in_background(fn):
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # reported by the caller
            box["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, box


def test_35_fork_bomb(sandbox, daemon):
    sb, other = sandbox(), sandbox()
    sb.install_probe()
    other.run("true")
    pids = sb.cgroup("pids")
    assert lib.read_int(os.path.join(pids, "pids.max")) == PIDS_MAX
    t0 = time.monotonic()
    t, box = _in_background(lambda: sb.exec(f"{lib.PROBE_PATH} forkbomb /workspace/fb.out"))
    peak, worst, other_ok = 0, 0.0, 0
    while t.is_alive():
        s = time.monotonic()
        assert daemon.health().status_code == 200
        worst = max(worst, time.monotonic() - s)
        peak = max(peak, lib.read_int(os.path.join(pids, "pids.current"), 0))
        if other.run("true")["exitCode"] == 0:
            other_ok += 1
        time.sleep(0.05)
    t.join()
    assert "error" not in box, box
    resp = box["value"]
    assert _timed_out(resp), resp.text
    assert time.monotonic() - t0 < lib.EXEC_TIMEOUT_S + 3
    assert worst < 1.0, f"daemon slow to answer during the bomb: {worst:.2f}s"
    assert other_ok >= 3, "another sandbox could not run commands during the bomb"
    assert 0 < peak <= PIDS_MAX, peak
    out = lib.parse_kv(sb.sh("cat /workspace/fb.out"))
    assert out["FORK_ERRNO"] == "EAGAIN", out
    assert int(out["FORKS"]) < PIDS_MAX and out["CAP_REACHED"] == "no", out
    # the tree is gone and the sandbox usable again
    assert lib.wait_until(lambda: lib.read_int(os.path.join(pids, "pids.current"), 99) <= 3, 3)
    assert sb.run("true")["exitCode"] == 0


def _slow_exec_daemon(make_daemon):
    """The suite's limits, but 30 s per command: touching 256 MiB until the
    OOM kill takes 2-3 s on this loaded VM, too close to the suite's 3 s."""
    flags = list(lib.DAEMON_FLAGS)
    flags[flags.index("--exec-timeout") + 1] = "30s"
    return make_daemon(flags)


def _command_memcg(sb):
    """The host memory cgroup dir of a command of sb, and the cgroup in it
    or above it (below the daemon's) that carries the commands' limit."""
    sb.background("sleep 60")
    cg = lib.cgroup_dirs_of(sb.host_pids()[0])["memory"]
    box = sb.cgroup("memory")
    # the sandbox's own memory cgroup (one per sandbox), or one below it
    assert cg == box or cg.startswith(box + "/"), (cg, box)
    d = cg
    while d != box and lib.read_int(os.path.join(d, "memory.limit_in_bytes")) != MEMORY:
        d = os.path.dirname(d)
    return cg, d


def test_36_memory_bomb(sandbox, make_daemon):
    sb = sandbox(_slow_exec_daemon(make_daemon))
    lib.require_cgroup_v1(sb.d)
    sb.install_probe()
    mem = sb.cgroup("memory")
    cmd_cg, limited = _command_memcg(sb)
    assert lib.memory_limit_over(cmd_cg, mem) == MEMORY
    avail_before = lib.mem_available_kb()
    res = sb.run(f"{lib.PROBE_PATH} memhog 2048")
    assert res["exitCode"] == 137, f"not killed: {res}"
    assert "CAP_REACHED" not in res["stdout"], res
    assert lib.oom_kills_under(mem) >= 1, "no OOM kill counted in the sandbox's cgroup"
    # killed inside its cgroup: it never held more than its limit, gave it
    # back, and the host as a whole lost no more than that; init lives on
    peak = lib.read_int(os.path.join(limited, "memory.max_usage_in_bytes"))
    assert peak <= MEMORY, peak
    assert lib.wait_until(
        lambda: lib.read_int(os.path.join(limited, "memory.usage_in_bytes")) < MEMORY // 2, 5)
    # What this catches: memory the bomb (2 GB asked for) left taken
    # outside its cgroup's accounting. MemAvailable is the whole
    # machine's, and other work moves it by hundreds of MB (a test suite
    # beside this one once took 390 MB meanwhile): a wide margin, and a
    # dip of theirs may pass.
    floor = avail_before - (MEMORY >> 10) - 512 * 1024
    assert lib.wait_until(lambda: lib.mem_available_kb() > floor, 10), \
        f"host MemAvailable {avail_before} kB -> {lib.mem_available_kb()} kB"
    assert sb.run("echo alive")["stdout"] == "alive\n"
    memsw = os.path.join(limited, "memory.memsw.limit_in_bytes")
    if os.path.exists(memsw):
        assert lib.read_int(memsw) == MEMORY, "swap could extend the memory limit"
    else:
        with open("/proc/meminfo") as f:
            swap = [l for l in f if l.startswith("SwapTotal:")][0].split()[1]
        assert swap == "0", "swap without swap accounting: the limit is not a limit"


def test_36b_init_is_never_the_oom_victim(sandbox, make_daemon):
    """Init sits outside the memory limit of the commands (by structure, not
    by an oom_score_adj that root may not be allowed to set), so an OOM in
    the sandbox can only pick a command; the sandbox lives on. (Where the
    v1 memory hierarchy is flat, init's memory cgroup is the daemon's
    dir of all sandboxes, beside the sandbox's own.)"""
    sb = sandbox(_slow_exec_daemon(make_daemon))
    lib.require_cgroup_v1(sb.d)
    sb.install_probe()
    init = sb.d.init_pids(sb.name)[-1]
    mem = sb.cgroup("memory")
    top = os.path.dirname(mem)  # the daemon's sandboxd-<hash>
    init_cg = lib.cgroup_dirs_of(init)["memory"]
    assert init_cg == top or init_cg.startswith(top + "/"), (init_cg, top)
    cmd_cg, _ = _command_memcg(sb)
    # not in the commands' memory cgroup, nor below it
    assert init_cg != cmd_cg and not init_cg.startswith(cmd_cg + "/"), \
        (init_cg, cmd_cg)
    # nothing between init's cgroup and the daemon's limits it: only the
    # daemon's totals over all sandboxes, on top, apply
    totals = lib.read_int(os.path.join(top, "memory.limit_in_bytes"))
    assert lib.memory_limit_over(init_cg, top) == totals > MEMORY, \
        f"init in {init_cg}, under a memory limit of the sandbox"
    assert lib.memory_limit_over(cmd_cg, mem) == MEMORY
    res = sb.run(f"{lib.PROBE_PATH} memhog 2048")
    assert res["exitCode"] == 137, res
    assert lib.is_init_of(init, sb.d.pid), "the sandbox's init died"
    assert sb.run("echo alive")["stdout"] == "alive\n"
    assert sb.d.init_pids(sb.name)[-1] == init, "the sandbox was restarted"


def test_36c_commands_stay_oom_killable(sandbox):
    """A command's OOM score is positive (the kernel picks sandbox commands
    before host services at the default 0), and no command can lower it
    below 0, let alone to -1000 (immune)."""
    sb = sandbox()
    res = sb.run("cat /proc/self/oom_score_adj; "
                 "(echo -1000 > /proc/self/oom_score_adj) 2>/dev/null; echo rc=$?; "
                 "(echo -1 > /proc/self/oom_score_adj) 2>/dev/null; echo rc=$?; "
                 "sh -c 'cat /proc/self/oom_score_adj'")
    lines = res["stdout"].split()
    assert len(lines) == 4, res
    adj = int(lines[0])
    assert 0 < adj <= 1000, f"a command's oom_score_adj is {adj}"
    assert lines[1] == "rc=1" and lines[2] == "rc=1", f"a command lowered its OOM score: {res}"
    assert int(lines[3]) == adj, res
    # the host sees the same for a process left running
    sb.background("sleep 60")
    for pid in sb.host_pids():
        with open(f"/proc/{pid}/oom_score_adj") as f:
            assert int(f.read()) == adj, pid


def test_37_dev_shm_size_limited(sandbox):
    r = sandbox().probe("diskfill", "/dev/shm/fill", 512)
    assert r["ERRNO"] == "ENOSPC", r
    assert int(r["WRITTEN_MB"]) <= 64, r


@pytest.mark.xfail(not lib.daemon_supports("--disk"), strict=True,
                   reason="gap: no disk quota on the sandbox's overlay upper "
                   "(/workspace, /tmp, /); see docs/security.md (check 37)")
def test_37b_disk_quota(sandbox):
    sb = sandbox()
    cap = 2 * lib.DISK_LIMIT_MB  # over the limit the suite asks for (--disk)
    problems = []
    for path in ("/workspace/fill", "/tmp/fill"):
        r = sb.probe("diskfill", path, cap)
        sb.sh("sync -f /workspace")
        if r["ERRNO"] not in ("ENOSPC", "EDQUOT"):
            problems.append(f"{path}: {r['WRITTEN_MB']} MiB written, no quota")
        elif int(r["WRITTEN_MB"]) > lib.DISK_LIMIT_MB:
            problems.append(f"{path}: stopped only after {r['WRITTEN_MB']} MiB")
    assert not problems, problems


def test_37c_inode_limits(sandbox):
    sb = sandbox()
    problems = []
    if sb.d.store_fstype() != "btrfs":
        # plain directories (--store-size 0) have no limits at all, by choice
        pytest.skip("no disk store: inode limits come with the btrfs store")
    opts = sb.sh("grep ' /dev/shm ' /proc/self/mounts").split()[3]
    if "nr_inodes=" not in opts:
        problems.append(f"/dev/shm without nr_inodes: {opts}")
    assert not problems, problems


def test_38_fd_exhaustion(sandbox):
    r = sandbox().probe("fdfill", 200000)
    assert r["ERRNO"] == "EMFILE", r
    soft = int(r["NOFILE_SOFT"])
    assert soft - 8 <= int(r["OPENED"]) < soft, r
    assert r["RAISE_HARD"] == "EPERM", r


def test_38b_rlimits_set_by_sandboxd(sandbox, daemon):
    r = sandbox().probe("fdfill", 2048)
    with open(f"/proc/{daemon.pid}/limits") as f:
        own = [l for l in f if l.startswith("Max open files")][0].split()[4]
    assert r["NOFILE_HARD"] != own, f"NOFILE inherited from the daemon ({own}): {r}"
    assert r["RLIMIT_FSIZE_HARD"] != "unlimited", r


def test_39_cpu_spin_throttled(sandbox):
    sb = sandbox()
    lib.require_cgroup_v1(sb.d)
    sb.install_probe()
    cpu = sb.cgroup("cpu")
    assert lib.read_int(os.path.join(cpu, "cpu.cfs_quota_us")) == 100000
    # the kernel's default period, which the daemon does not write
    assert lib.read_int(os.path.join(cpu, "cpu.cfs_period_us")) == 100000
    r = sb.probe("cpuspin", 1500, 2)
    used, wall = int(r["CPU_MS"]), int(r["WALL_MS"])
    assert used >= 0.3 * wall, f"did not spin: {r}"
    assert used <= 1.3 * wall, f"2 spinners got {used} ms CPU in {wall} ms: not throttled to 1 CPU"
    with open(os.path.join(cpu, "cpu.stat")) as f:
        st = dict(l.split() for l in f)
    # Spinners that got a whole CPU's worth must have met the quota; on a
    # busy host they may get less than that and never reach it at all.
    if used >= wall:
        assert int(st["nr_throttled"]) > 0, (r, st)
    # spinning on: killed at the time limit (wall clock: sandboxd has no
    # separate CPU-time limit, and a spinner uses at most its quota)
    t0 = time.monotonic()
    resp = sb.exec(f"{lib.PROBE_PATH} cpuspin 100 2 forever")
    assert _timed_out(resp), resp.text
    assert time.monotonic() - t0 < lib.EXEC_TIMEOUT_S + 2
    _no_procs_left(sb)


def test_40_wall_clock_limit(sandbox):
    sb = sandbox()
    t0 = time.monotonic()
    resp = sb.exec("sleep 1000")
    took = time.monotonic() - t0
    assert _timed_out(resp), resp.text
    assert lib.EXEC_TIMEOUT_S - 0.2 <= took < lib.EXEC_TIMEOUT_S + 2, took
    _no_procs_left(sb)
    assert sb.run("true")["exitCode"] == 0


def test_41_stopped_processes_killed(sandbox):
    sb = sandbox()
    sb.install_probe()
    resp = sb.exec(f"{lib.PROBE_PATH} stopself")
    assert _timed_out(resp), resp.text
    _no_procs_left(sb)


def _host_pid_of(sb, timeout=5):
    procs = lib.wait_until(lambda: lib.host_procs_in_uid_range(sb.uid_base), timeout)
    assert procs, "no process of the sandbox on the host"
    return procs


def test_42_double_fork_escape(sandbox, daemon):
    a, b = sandbox(), sandbox()
    # daemonised out of the command, then the sandbox is destroyed
    r = a.probe("escaper", "/workspace/esc.pid", 300)
    assert int(r["ESCAPER_PID"]) > 1, r
    procs = _host_pid_of(a)
    assert len(procs) == 1, procs
    with open(f"/proc/{procs[0][0]}/cgroup") as f:
        cg = f.read()
    assert f"/s{a.slot}/c" in cg, f"escaper outside its command cgroup: {cg}"
    a.delete()
    lib.assert_sandbox_gone(daemon, a)
    # daemonised out of a command that then times out: killed with it
    b.install_probe()
    resp = b.exec(f"{lib.PROBE_PATH} escaper /workspace/esc.pid 300; sleep 100")
    assert _timed_out(resp), resp.text
    _no_procs_left(b)


def test_43_seccomp_kill_reported(sandbox):
    res = sandbox().probe("sigsys", expect_done=False).result
    assert res["exitCode"] == 128 + 31, res  # SIGSYS
    assert "BEFORE=1" in res["stdout"] and "SURVIVED" not in res["stdout"], res


def test_43b_daemon_names_the_seccomp_kill(sandbox):
    """The probe runs as a child of the command's shell (the session's
    EXIT trap keeps bash from exec'ing it), so init's status of the command
    says only 159: the daemon names the kill from the kernel's exit report
    of the probe itself, before it answers."""
    sb = sandbox()
    res = sb.probe("sigsys", expect_done=False).result
    # what the daemon itself says: the result's fields (not the command's
    # own output) and its log, minus the room's name
    said = " ".join(str(v) for k, v in res.items()
                    if k not in ("command", "sessionId", "stdout", "stderr"))
    said += " ".join(l.replace(f"sandbox={sb.name}", "") for l in sb.d.log_text().splitlines()
                     if f"sandbox={sb.name} " in l)
    assert "SIGSYS" in said or "seccomp" in said.lower(), (res, sb.d.log_tail(5))
