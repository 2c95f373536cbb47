"""Part B, /proc, /sys and /dev (checks 21-26)."""
import os
import secrets
import shutil

import pytest

import isolation_lib as lib


def test_21_proc_sys_read_only(sandbox):
    sb = sandbox()
    core_before = open("/proc/sys/kernel/core_pattern").read()
    r = sb.probe("corepattern")
    # refused twice over: the files belong to host root (nobody inside),
    # and the mount is read-only
    assert r["OPEN_CORE_PATTERN_W"] in ("EROFS", "EACCES"), r
    ro = {}
    for line in sb.sh("cat /proc/self/mountinfo").splitlines():
        f = line.split()
        ro[f[4]] = "ro" in f[5].split(",")
    for mp in ("/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs"):
        if os.path.exists(mp):
            assert ro.get(mp), f"{mp} not a read-only mount inside: {ro}"
    w = sb.probe("write", "/proc/sys/kernel/core_pattern", "/proc/sys/kernel/sysrq",
                 "/proc/sys/net/ipv4/ip_forward", "/proc/sys/kernel/modprobe",
                 "/proc/sysrq-trigger")
    for k, v in w.items():
        if k.startswith("WRITE:/proc/sys/"):
            ok = ("EROFS", "EACCES") if os.path.exists(k[6:]) else ("ENOENT",)
            assert v in ok, (k, w)
    if os.path.exists("/proc/sysrq-trigger"):
        assert w["WRITE:/proc/sysrq-trigger"] in ("EROFS", "EACCES"), w
    else:  # CONFIG_MAGIC_SYSRQ off: nothing to write to, inside or out
        assert w["WRITE:/proc/sysrq-trigger"] == "ENOENT", w
    res = sb.run("echo '|/bin/sh' > /proc/sys/kernel/core_pattern; echo rc=$?")
    assert "rc=1" in res["stdout"], res
    assert open("/proc/sys/kernel/core_pattern").read() == core_before


MASKED = ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug",
          "/proc/timer_stats", "/proc/latency_stats", "/proc/kallsyms",
          "/proc/kpagecount", "/proc/kpageflags", "/proc/kpagecgroup"]


def test_22_masked_proc_files(sandbox):
    sb = sandbox()
    r = sb.probe("read", *MASKED, "/sys/firmware")
    for p in MASKED:
        v = r[f"READ:{p}"]
        if not os.path.exists(p):
            assert v == "ENOENT", (p, r)  # not in this kernel either
            continue
        assert v in ("0", "EACCES", "EPERM"), f"{p} readable inside: {v}"
        if v == "0":
            assert r[f"STAT:{p}"] == "chr:1:3", f"{p} not masked by /dev/null: {r}"
    assert r["READ:/sys/firmware"] == "ENOENT", r
    for d in ("/proc/acpi", "/proc/scsi", "/proc/asound", "/proc/driver"):
        res = sb.run(f"ls -A {d} 2>/dev/null | wc -l")
        assert res["stdout"].strip() == "0", (d, res)
    # the masks matter: the host's timer_list is not empty
    with open("/proc/timer_list", "rb") as f:
        assert f.read(64)


# init's files that hold its state: ptrace-gated by procfs, refused to the
# sandbox (another user namespace, no capabilities, init not dumpable)
INIT_PRIVATE = ["environ", "auxv", "maps", "smaps", "mem", "pagemap", "io", "syscall",
                "stack", "personality", "timers", "fd/0", "fd/1", "root/etc/hostname",
                "cwd/etc/hostname", "ns/user", "ns/mnt", "exe"]


def test_23_hidepid(sandbox):
    """By design, not hidepid (docs/security.md A.24, check 23): every
    process of a sandbox runs as its root (no command can change uid), so
    hidepid could only ever hide init, the one process of another uid, and
    check 7 wants pid 1 to be our init. What must stay hidden of init, its
    state, is refused; what is left is what any process may read of
    another (its status, stat, limits, cgroup)."""
    sb = sandbox()
    r = sb.probe("pidns")
    pids = r["PIDS"].split(",")
    assert "1" in pids and r["PID1_COMM"] == "sandboxd-init", r
    r = sb.probe("read", *[f"/proc/1/{f}" for f in INIT_PRIVATE])
    for f in INIT_PRIVATE:
        assert r[f"READ:/proc/1/{f}"] in ("EACCES", "EPERM"), (f, r)
    # init is the spawner too (host uid 0 in the sandbox's user namespace,
    # with the sandbox's leaf fds and the daemon's socket): the one process
    # of sandboxd's in the sandbox while no file operation runs
    found = sb.sh("grep -lxE 'sandboxd-(init|spawn)' /proc/[0-9]*/comm").split()
    assert found == ["/proc/1/comm"], found
    # the sandbox's own processes stay readable to it (the control)
    r = sb.probe("read", "/proc/self/environ", "/proc/self/maps")
    assert r["READ:/proc/self/maps"] not in ("EACCES", "EPERM"), r


ALLOWED_DEV = {"null": "c:1:3", "zero": "c:1:5", "full": "c:1:7", "random": "c:1:8",
               "urandom": "c:1:9", "tty": "c:5:0"}
ALLOWED_DEV_OTHER = {"pts", "shm", "ptmx", "fd", "stdin", "stdout", "stderr", "core"}


def test_24_minimal_dev(sandbox):
    sb = sandbox()
    r = sb.probe("dev")
    names = set(r["DEV"].split(","))
    assert names <= set(ALLOWED_DEV) | ALLOWED_DEV_OTHER, names - set(ALLOWED_DEV) - ALLOWED_DEV_OTHER
    nodes = {k.split(":", 1)[1]: v for k, v in r.items() if k.startswith("NODE:")}
    assert nodes == ALLOWED_DEV, nodes
    assert r["BLOCK_DEVICES"] == "0", r
    assert r["MKNOD_CHR_MEM"] == "EPERM", r
    assert r["MKNOD_BLK_SDA"] == "EPERM", r
    assert r["MKNOD_CHR_NULL"] == "EPERM", r
    assert r["MKNOD_IN_DEV"] in ("EROFS", "EPERM"), r
    assert r["MKNOD_FIFO"] == "OK", "control: a fifo is no device"
    for k, v in r.items():
        if k.startswith("OPEN:/dev/"):
            assert v == "ENOENT", (k, v)
    if shutil.which("fdisk", path="/usr/sbin:/usr/bin:/sbin:/bin"):
        res = sb.run("fdisk -l 2>/dev/null")
        assert res["stdout"].strip() == "", res


# The device rules of a sandbox's v1 devices cgroup: its /dev nodes, ptmx
# and the ptys of its devpts.
DEVICE_RULES = {"c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 1:8 rwm", "c 1:9 rwm",
                "c 5:0 rwm", "c 5:2 rwm", "c 136:* rwm"}


def test_24b_device_cgroup_backstop(sandbox, daemon):
    """Where the host has a v1 devices hierarchy, a sandbox's processes
    live in a devices cgroup of the sandbox's own, beneath the daemon's,
    that allows only the nodes its /dev has: a second line behind "no
    CAP_MKNOD" and the nodev mounts."""
    own = lib.cgroup_dirs_of(daemon.pid).get("devices")
    if own is None:
        pytest.skip("no cgroup v1 devices hierarchy here (on v2: see docs/security.md)")
    sb = sandbox()
    sb.background("sleep 60")
    procs = sb.host_pids()
    mgr = os.path.join(own, "sandboxd-%08x" % lib.fnv1a(daemon.state_dir))
    box = os.path.join(mgr, f"s{sb.slot}")
    # init (the spawner) too: commands keep their devices cgroup
    for pid in procs + [sb.init_pid()]:
        cg = lib.cgroup_dirs_of(pid)["devices"]
        assert cg == box or cg.startswith(box + "/"), \
            f"pid {pid} in devices cgroup {cg}, not under {box}"
        with open(os.path.join(cg, "devices.list")) as f:
            rules = set(f.read().split("\n")) - {""}
        assert "a *:* rwm" not in rules, f"{cg}: every device allowed"
        assert rules == DEVICE_RULES, rules
    # the nodes the sandbox has still work
    out = sb.sh("head -c 3 /dev/zero | wc -c; head -c 3 /dev/urandom | wc -c; "
                "echo x > /dev/null && echo null-ok; "
                "(echo x > /dev/full) 2>&1 | grep -c 'No space'")
    assert out.split() == ["3", "3", "null-ok", "1"], out


def test_25_dev_shm_private(sandbox):
    a, b = sandbox(), sandbox()
    token = secrets.token_hex(8)
    a.sh(f"echo {token} > /dev/shm/iso-{token}")
    assert a.sh(f"cat /dev/shm/iso-{token}").strip() == token
    assert b.run(f"test -e /dev/shm/iso-{token}")["exitCode"] == 1
    assert b.sh("ls -A /dev/shm").strip() == ""
    assert not os.path.exists(f"/dev/shm/iso-{token}")


def test_26_tiocsti_refused(sandbox, probe_bin):
    r = sandbox().probe("tty")
    assert r["OPENPT"] == "OK" and r["OPEN_PTS"] == "OK", r
    assert r["TIOCGWINSZ"] == "OK", "control: ordinary tty ioctls work"
    for k in ("TIOCSTI", "TIOCSTI_HIGHBITS", "TIOCSTI_ALLHIGH", "TIOCLINUX"):
        assert r[k] == "EPERM", (k, r)
    assert r["TIOCSTI_STDIN"] == "EPERM", r
    # no controlling terminal of ours
    assert r["OPEN_DEV_TTY"] == "ENXIO" and r["TTY_NR"] == "0", r
    # the same calls succeed on the host (a pty of our own as the
    # controlling tty): the refusal inside is the policy, not the kernel
    host = lib.run_host_probe(probe_bin, "tty")
    if host.get("TIOCSTI") != "OK":
        pytest.skip(f"TIOCSTI refused by this kernel itself ({host.get('TIOCSTI')}, "
                    "dev.tty.legacy_tiocsti=0?): the policy cannot be told apart")
    assert host["TIOCSTI_HIGHBITS"] == "OK", host
