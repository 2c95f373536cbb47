"""Part B, filesystem (checks 13-20): what a sandbox can write, mount,
reach and read of the host's filesystem."""
import os
import re
import secrets
import stat

import pytest

import isolation_lib as lib


def mountinfo(sb):
    """[(mountpoint, mount options, fs type, super options)] inside sb."""
    out = []
    for line in sb.sh("cat /proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        f, r = left.split(), right.split()
        out.append((f[4], set(f[5].split(",")), r[0], set(r[2].split(","))))
    return out


def test_13_writes_outside_the_sandbox_layer_fail(sandbox):
    a, b = sandbox(), sandbox()
    token = secrets.token_hex(6)
    r = a.probe("write", "/dev/probe-x", "/dev/shm/w", "/proc/sys/kernel/hostname",
                "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger", "/sys/probe-x",
                "/proc/1/comm", "/workspace/w", "/tmp/w", f"/etc/w-{token}",
                f"/usr/w-{token}", "/root/w")
    assert r["WRITE:/dev/probe-x"] == "EROFS", r
    # /proc/sys is a read-only bind; files its owner could write say EROFS,
    # the others EACCES first
    assert r["WRITE:/proc/sys/kernel/hostname"] in ("EROFS", "EACCES"), r
    assert r["WRITE:/proc/sys/vm/drop_caches"] in ("EROFS", "EACCES"), r
    # absent on kernels without CONFIG_MAGIC_SYSRQ; masked otherwise
    assert r["WRITE:/proc/sysrq-trigger"] in ("ENOENT", "EROFS", "EACCES"), r
    assert r["WRITE:/sys/probe-x"] == "ENOENT", r
    assert r["WRITE:/proc/1/comm"] == "EACCES", r
    for p in ("/workspace/w", "/tmp/w", "/dev/shm/w"):
        assert r[f"WRITE:{p}"] == "OK", (p, r)
    # By design (DESIGN.md "Filesystem") the whole root is the sandbox's own
    # copy-on-write overlay, so that apt-get works: writes to /etc and /usr
    # succeed, but land in this sandbox's upper layers only.
    assert r[f"WRITE:/etc/w-{token}"] == "OK" and r[f"WRITE:/usr/w-{token}"] == "OK", r
    sdir = os.path.join(a.d.state_dir, "sandboxes", f"s{a.slot}")
    assert os.path.exists(os.path.join(sdir, "root", "upper", "etc", f"w-{token}"))
    assert os.path.exists(os.path.join(sdir, "usr", "upper", f"w-{token}"))
    assert not os.path.exists(f"/etc/w-{token}") and not os.path.exists(f"/usr/w-{token}")
    assert b.run(f"test -e /etc/w-{token} || test -e /usr/w-{token}")["exitCode"] == 1
    # and the read-only mounts stay read-only
    m = a.probe("mountcalls")
    assert m["MOUNT_REMOUNT_RW_ROOT"] == "EPERM", m
    assert m["MOUNT_REMOUNT_RW_DEV"] == "EPERM", m
    assert m["MOUNT_REMOUNT_RW_PROC_SYS"] == "EPERM", m
    res = a.run("mount -o remount,rw /proc/sys; echo rc=$?")
    assert "rc=0" not in res["stdout"], res


MOUNT_CALLS = ["MOUNT_TMPFS", "MOUNT_PROC", "MOUNT_BIND", "MOUNT_MAKE_SHARED",
               "UMOUNT2_PROC_KEYS", "UMOUNT2_PROC_SYS", "UMOUNT2_DEV", "PIVOT_ROOT",
               "CHROOT", "FSOPEN", "FSCONFIG", "FSMOUNT", "FSPICK", "OPEN_TREE",
               "OPEN_TREE_CLONE", "MOVE_MOUNT", "MOUNT_SETATTR", "OPEN_TREE_ATTR_CLONE"]


def test_14_mount_family_fails(sandbox):
    sb = sandbox()
    before = mountinfo(sb)
    r = sb.probe("mountcalls")
    bad = {k: r[k] for k in MOUNT_CALLS if r.get(k) != "EPERM"}
    assert not bad, f"not refused with EPERM: {bad}\n{r!r}"
    assert mountinfo(sb) == before


def test_15_mount_flags(sandbox):
    sb = sandbox()
    mounts = {mp: (opts, fstype) for mp, opts, fstype, _ in mountinfo(sb)}
    for mp in ("/", "/usr", "/dev/shm", "/proc"):
        assert {"nosuid", "nodev"} <= mounts[mp][0], (mp, mounts[mp])
    # /dev and /dev/pts hold the device nodes, so they cannot be nodev
    assert {"nosuid", "noexec", "ro"} <= mounts["/dev"][0], mounts["/dev"]
    assert {"nosuid", "noexec"} <= mounts["/dev/pts"][0], mounts["/dev/pts"]
    assert {"ro", "nosuid", "nodev", "noexec"} <= mounts["/proc/sys"][0], mounts["/proc/sys"]
    for mp in ("/dev/shm", "/proc", "/dev/pts"):
        assert "noexec" in mounts[mp][0], (mp, mounts[mp])
    # /tmp and /workspace are directories of the root overlay (nosuid,nodev)
    for p in ("/tmp", "/workspace"):
        assert p not in mounts, f"{p} is a mount of its own now: update this test"
    # noexec really holds
    sb.install_probe()
    res = sb.run(f"cp {lib.PROBE_PATH} /dev/shm/p && /dev/shm/p ids; echo rc=$?")
    assert "rc=126" in res["stdout"], res


ALLOWED_MOUNTS = {"/", "/usr", "/dev", "/dev/pts", "/dev/shm", "/proc"}


def test_16_old_root_unreachable(sandbox):
    sb = sandbox()
    r = sb.probe("oldroot")
    for k, v in r.items():
        if k.startswith("EXISTS:"):
            assert v == "no", (k, r)
    assert r["DOTDOT_IS_ROOT"] == "yes" and r["DOTDOT_DEEP_IS_ROOT"] == "yes", r
    assert r["CWD_AFTER_CHDIR_UP"] == "/" and r["CWD_AFTER_CHDIR_UP_IS_ROOT"] == "yes", r
    assert r["PROC_SELF_ROOT"] == "/" and r["PROC_SELF_ROOT_IS_ROOT"] == "yes", r
    # init is not dumpable: its root is not even readable
    assert r["PROC1_ROOT"] == "EACCES" and r["PROC1_ROOT_OPENDIR"] == "EACCES", r
    assert r["PROC1_CWD"] == "EACCES", r
    # only the sandbox's own mounts, no host mount at all
    for mp, opts, fstype, _ in mountinfo(sb):
        assert mp in ALLOWED_MOUNTS or mp.startswith("/proc/"), f"unexpected mount {mp}"


def test_17_host_files_unreadable(sandbox, daemon, tmp_path):
    sb = sandbox()
    token = secrets.token_hex(8)
    canary = tmp_path / "canary"
    canary.write_text(token)
    for p in ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh",
              "/etc/machine-id", "/root/.bash_history", str(canary),
              daemon.state_dir, daemon.base):
        res = sb.run(f"test -e {p}")
        assert res["exitCode"] == 1, f"{p} visible inside"
    # /etc is generated: nothing of the host's /etc that is not on the
    # allowlist (src/runtime/image.c) and world-readable
    inside = set(sb.sh("ls -A /etc").split())
    for name in inside:
        host = os.path.join("/etc", name)
        if os.path.exists(host) and not os.path.islink(host):
            assert os.stat(host).st_mode & stat.S_IROTH, f"/etc/{name} is private on the host"
    r = sb.probe("read", "/proc/1/root/etc/shadow", "/proc/1/environ", "/proc/kmsg")
    assert r["READ:/proc/1/root/etc/shadow"] == "EACCES", r
    assert r["READ:/proc/1/environ"] == "EACCES", r
    assert r["READ:/proc/kmsg"] in ("EPERM", "EACCES"), r


def test_17b_root_only_host_files_under_usr_stay_private(make_daemon, sandbox):
    """/usr is the host's, idmapped so that host root's files are the
    sandbox root's: what "others" may not read on the host must not be
    readable inside (a 0600 file, a 0640 file of group root, a 0700
    directory), while the rest of /usr stays as it is. The daemon lists
    them when it starts (src/runtime/usrmask.c): the canaries go first."""
    d = "/usr/local/share"
    if not os.path.isdir(d):
        pytest.skip(f"{d} missing on this host")
    token = secrets.token_hex(8)
    made = []

    def plant(name, mode, uid=0, gid=0, is_dir=False):
        path = os.path.join(d, f".sbx-iso-{name}-{token}")
        if is_dir:
            os.mkdir(path, 0o700)
            with open(os.path.join(path, "inner"), "w") as f:
                f.write(token)
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, token.encode())
            os.close(fd)
        os.chown(path, uid, gid)
        os.chmod(path, mode)
        made.append(path)
        return path

    try:
        secret = plant("secret", 0o600)
        group = plant("group", 0o640, uid=1, gid=0)
        sdir = plant("dir", 0o700, is_dir=True)
        public = plant("public", 0o644)
        sb = sandbox(make_daemon())
        for path in (secret, group, os.path.join(sdir, "inner")):
            res = sb.run(f"cat {path}")
            assert token not in res["stdout"] and res["exitCode"] != 0, (
                f"{path}, private to others on the host, is readable in the sandbox")
        assert sb.sh(f"cat {public}") == token
        names = sb.sh(f"ls -A {d}").split()
        assert os.path.basename(public) in names
        assert not {os.path.basename(p) for p in (secret, group, sdir)} & set(names), names
        # the directory above them is still the host's, root's, and works
        st = os.stat(d)
        assert sb.sh(f"stat -c '%u %g %a' {d}").split() == ["0", "0", f"{st.st_mode & 0o7777:o}"]
        sb.sh(f"touch {d}/made-inside && rm {secret} 2>/dev/null; test ! -e {secret}")
        assert not os.path.exists(os.path.join(d, "made-inside"))
        assert open(secret).read() == token
    finally:
        for path in made:
            if os.path.isdir(path):
                os.unlink(os.path.join(path, "inner"))
                os.rmdir(path)
            else:
                os.unlink(path)


def test_mountinfo_names_nothing_of_the_host(sandbox, daemon):
    """Issue 10 item 14: the sandbox's mount table shows its own mounts with
    options that name neither the host's state dir (overlay layers) nor the
    sandbox's host uids (tmpfs and devpts uid=/gid=)."""
    sb = sandbox()
    for table in ("/proc/self/mountinfo", "/proc/self/mounts", "/proc/1/mountinfo"):
        text = sb.sh(f"cat {table}")
        for host_path in (daemon.state_dir, daemon.base, "/sandboxes/", "/run/mnt"):
            assert host_path not in text, f"{table} names {host_path}:\n{text}"
        ids = {int(n) for n in re.findall(r"\d+", text)}
        near = sorted(n for n in ids if sb.uid_base <= n < sb.uid_base + lib.UID_RANGE)
        assert not near, f"{table} shows host uids of the sandbox's range {near}:\n{text}"
    # what it still says: the overlays with their own layers, devpts' max
    opts = sb.sh("grep ' / / ' /proc/self/mountinfo")
    assert "lowerdir=" in opts and "upperdir=" in opts, opts
    assert re.search(r"max=\d+", sb.sh("grep ' /dev/pts ' /proc/self/mountinfo"))


def test_18_fds_and_cwd_inside(sandbox):
    r = sandbox().probe("fds")
    assert r["CWD"] == "/workspace" and r["GETCWD"] == "/workspace", r
    assert r["CWD_UNDER_ROOT"] == "yes", r
    fds = r["FDS"].split(",")
    # 0-2, and 63: the session state pipe the daemon hands every command
    assert set(fds) <= {"0", "1", "2", "63"}, r
    assert r["FD_0"] == "/dev/null", r
    for fd in set(fds) - {"0"}:
        assert re.fullmatch(r"pipe:\[\d+\]", r[f"FD_{fd}"]), (fd, r)


def _wait_stopped(d, name, n, timeout=10):
    return lib.wait_until(
        lambda: d.log_text().count(f"sandbox={name} event=stopped") >= n, timeout)


def test_19_symlink_plants_do_not_redirect_mounts(sandbox, make_daemon):
    d = make_daemon([*lib.DAEMON_FLAGS, "--sleep-after", "1s"])
    sb = sandbox(d)
    core_before = open("/proc/sys/kernel/core_pattern").read()
    canary = os.path.join(d.base, "canary")
    with open(canary, "w") as f:
        f.write("keep")
    # what the sandbox itself can plant
    sb.sh("ln -s / /workspace/x; ln -s /proc/sys/kernel/core_pattern /workspace/core;"
          f"ln -s {canary} /workspace/canary; ln -s {d.state_dir} /workspace/state")
    # the mountpoints themselves cannot be replaced by links
    res = sb.run("for t in /dev/null /dev /proc /usr /dev/shm; do"
                 " mv $t $t.old 2>/dev/null; echo mv=$?;"
                 " ln -sfT /proc/sys/kernel/core_pattern $t 2>/dev/null; echo ln=$?; done")
    assert "=0" not in res["stdout"], res
    assert _wait_stopped(d, sb.name, 1), "the sandbox never went idle"
    # and what a hostile image layer could hold: the daemon must mount its
    # /dev and /proc where they belong, whatever the upper layer says
    up = sb.upper()
    os.makedirs(os.path.join(up, "dev"), exist_ok=True)
    os.symlink("/proc/sys/kernel/core_pattern", os.path.join(up, "dev", "null"))
    os.makedirs(os.path.join(up, "proc"), exist_ok=True)
    os.symlink("/etc/shadow", os.path.join(up, "proc", "keys"))
    sb.install_probe()
    r = sb.probe("read", "/proc/keys", "/proc/timer_list", "/dev/null")
    assert r["STAT:/proc/keys"] == "chr:1:3", r
    assert r["STAT:/proc/timer_list"] == "chr:1:3", r
    assert r["STAT:/dev/null"] == "chr:1:3", r
    w = sb.probe("write", "/workspace/core", "/dev/null")
    assert w["WRITE:/workspace/core"] in ("EROFS", "EACCES"), w
    assert w["WRITE:/dev/null"] == "OK", w
    assert sb.sh("readlink /workspace/x").strip() == "/"
    assert open("/proc/sys/kernel/core_pattern").read() == core_before
    sb.delete()
    lib.assert_sandbox_gone(d, sb)
    # removing the sandbox's files followed none of its links
    assert open(canary).read() == "keep"
    assert os.path.isdir(d.state_dir) and os.path.exists("/etc/hostname")


def test_20_open_by_handle_at_fails(sandbox):
    r = sandbox().probe("handle")
    assert r["OPEN_BY_HANDLE_AT"] == "EPERM", r
    assert r["OPEN_BY_HANDLE_AT_USR"] == "EPERM", r
    assert r["NAME_TO_HANDLE_AT"] == "EPERM", r
