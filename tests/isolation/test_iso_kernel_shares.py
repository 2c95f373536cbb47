"""Kernel pools shared by the whole host (issue 10, items 2 and 3): what one
sandbox takes of a per-user or global pool must leave the host and the
other sandboxes their share.

- Per-user counts (inotify instances and watches, mqueue bytes, pending
  signals) are charged to the owner of the user namespace a process lives
  in: each sandbox's namespace is owned by its own host uid, not by root.
- devpts: each sandbox's instance has a max= of its own, so it cannot
  drain the kernel's pty pool (kernel.pty.max)."""
import ctypes
import fcntl
import os
import struct

import isolation_lib as lib

_libc = ctypes.CDLL(None, use_errno=True)


def _held(sb, path, timeout=20):
    """The report a holding probe wrote to path inside sb (KEY=VALUE)."""
    def read():
        res = sb.run(f"cat {path} 2>/dev/null")
        return lib.parse_kv(res["stdout"]) if "ERRNO=" in res["stdout"] else None
    rep = lib.wait_until(read, timeout)
    assert rep, f"the holding probe wrote nothing to {path}"
    return rep


def _host_inotify():
    fd = _libc.inotify_init1(0)
    if fd < 0:
        return os.strerror(ctypes.get_errno())
    os.close(fd)
    return "OK"


NS_GET_OWNER_UID = 0xB704  # _IO(0xb7, 0x4)


def _userns_owner(pid):
    fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    try:
        buf = fcntl.ioctl(fd, NS_GET_OWNER_UID, b"\0" * 4)
    finally:
        os.close(fd)
    return struct.unpack("I", buf)[0]


def test_inotify_instances_are_the_sandboxs_own(sandbox):
    limit = int(open("/proc/sys/fs/inotify/max_user_instances").read())
    a, b = sandbox(), sandbox()
    a.install_probe()
    b.install_probe()
    # a takes every instance it can and holds them
    a.background(f"{lib.PROBE_PATH} inotifyfill {limit + 64} /workspace/ino.out")
    rep = _held(a, "/workspace/ino.out")
    # (this sandbox's: a daemon of another build on this host may use the
    # same uids, which is what item 13 is about)
    pidns = os.readlink(f"/proc/{a.d.init_pids(a.name)[-1]}/ns/pid")

    def ours(pid):
        try:
            return os.readlink(f"/proc/{pid}/ns/pid") == pidns
        except OSError:
            return False
    holder = lib.wait_until(lambda: [p for p in lib.host_procs_in_uid_range(a.uid_base)
                                     if p[1] == os.path.basename(lib.PROBE_PATH)
                                     and ours(p[0])], 5)
    assert holder, "the holding probe is not running"
    # the namespace the probe lives in is owned by the sandbox's own uid
    assert _userns_owner(holder[0][0]) == a.uid_base
    assert rep["ERRNO"] == "EMFILE", rep
    # the whole per-user share, counted for a alone (not with host root's)
    assert int(rep["OPENED"]) == limit, rep
    # host root (systemd, udev...) and the other sandbox still get theirs
    assert _host_inotify() == "OK", "host root cannot create an inotify instance"
    r = b.probe("inotifyfill", "8")
    assert r["OPENED"] == "8", r


def test_ptys_of_one_sandbox_leave_the_pool_to_others(sandbox):
    """devpts max= per sandbox: the kernel's pool of ptys for non-initial
    devpts instances (kernel.pty.max less kernel.pty.reserve) is shared by
    every sandbox; one of them must not take it all."""
    pool = int(open("/proc/sys/kernel/pty/max").read()) - \
        int(open("/proc/sys/kernel/pty/reserve").read())
    a, b = sandbox(), sandbox()
    a.install_probe()
    b.install_probe()
    a.background(f"{lib.PROBE_PATH} ptyfill {pool + 64} /workspace/pty.out")
    rep = _held(a, "/workspace/pty.out")
    assert rep["ERRNO"] == "ENOSPC", rep
    opened = int(rep["OPENED"])
    assert 0 < opened < pool // 8, f"one sandbox took {opened} of {pool} ptys"
    # the other sandbox and the host still get theirs
    r = b.probe("ptyfill", "4")
    assert r["OPENED"] == "4", r
    m, s = os.openpty()
    os.close(m)
    os.close(s)
