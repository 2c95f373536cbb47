"""Part B, known-escape regression tests (checks 44-48): each escape must
fail, and the host must show no trace of the attempt."""
import glob
import hashlib
import os
import time

import pytest

import isolation_lib as lib


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        return repr(e)


def test_44_cgroup_release_agent(sandbox):
    agents = {p: _read(p) for p in glob.glob("/sys/fs/cgroup/*/release_agent")}
    r = sandbox().probe("release-agent")
    for k in ("MOUNT_CGROUP_V1", "MOUNT_CGROUP_V1_RDMA", "MOUNT_CGROUP2",
              "UNSHARE_USER_NS_CGROUP"):
        assert r[k] == "EPERM", (k, r)
    for k, v in r.items():
        if k.startswith("WRITE:"):
            assert v == "ENOENT", (k, r)  # no /sys at all
    assert {p: _read(p) for p in agents} == agents


def test_45_core_pattern_pipe(sandbox):
    sb = sandbox()
    core_before = _read("/proc/sys/kernel/core_pattern")
    r = sb.probe("corepattern")
    assert r["OPEN_CORE_PATTERN_W"] in ("EROFS", "EACCES"), r
    assert r["RLIMIT_CORE_SOFT"] == "0" and r["RLIMIT_CORE_HARD"] == "0", r
    assert r["RAISE_RLIMIT_CORE"] == "EPERM", r
    assert r["CRASH"] == "SIGNAL:SIGABRT" and r["CORE_DUMPED"] == "no", r
    assert _read("/proc/sys/kernel/core_pattern") == core_before
    upper = os.path.join(sb.upper(), "workspace")
    assert not glob.glob(os.path.join(upper, "core*")), os.listdir(upper)


def _sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _exe_trick(sb):
    """CVE-2019-5736 from inside: make the daemon exec a script whose
    interpreter is /proc/self/exe (the daemon's own binary, for the process
    that execs it), while a watcher in the sandbox tries to open that binary
    and write to it. Returns the watcher's report."""
    sb.install_probe()
    out = "/workspace/exewatch.out"
    # LD_DEBUG slows the dynamic loader of the interpreter down: a wider
    # window for the watcher
    sb.sh("cp -a /usr/bin/bash /usr/bin/bash.sbx-orig && "
          "printf '#!/proc/self/exe\\n' > /usr/bin/bash.sbx-evil && "
          "chmod 755 /usr/bin/bash.sbx-evil && "
          f"(setsid {lib.PROBE_PATH} exewatch {out} /usr/bin/bash /usr/bin/bash.sbx-orig 6 "
          "</dev/null >/dev/null 2>&1 63>&- &) && "
          "export LD_DEBUG=all && mv /usr/bin/bash.sbx-evil /usr/bin/bash")
    deadline = time.monotonic() + 8
    tried = 0
    while time.monotonic() < deadline:
        res = sb.run("unset LD_DEBUG; true")  # /bin/bash is the trap until restored
        tried += 1
        if res["exitCode"] == 0:
            break  # the watcher put bash back
        time.sleep(0.02)
    assert tried > 1, "the daemon did not exec the planted interpreter"
    assert sb.run("unset LD_DEBUG; true")["exitCode"] == 0, "bash not restored"
    rep = lib.parse_kv(sb.sh(f"cat {out}"))
    assert rep.get("RESTORED") == "OK", rep
    return rep


def test_46_daemon_binary_not_writable_from_inside(sandbox, daemon):
    sb = sandbox()
    binary = os.path.realpath(daemon.binary)
    digest = _sha256(binary)
    r = sb.probe("procexe", binary)
    for k in ("READLINK_EXE_1", "OPEN_EXE_1", "OPEN_MEM_1", "READ_ENVIRON_1"):
        assert r[k] == "EACCES", (k, r)  # init is not dumpable
    assert r[f"OPEN_W:{binary}"] == "ENOENT", r
    rep = _exe_trick(sb)
    assert rep.get("INTERPRETER_SEEN") == "yes", f"the trick was not observed: {rep}"
    refused = ("EACCES", "ETXTBSY", "EPERM", "EROFS")
    if rep.get("HOST_EXE_OPENED") == "yes":
        for k in ("HOST_EXE_OPEN_W_LIVE", "HOST_EXE_OPEN_W_AFTER_EXIT"):
            assert rep[k] in refused, (k, rep)
    if rep.get("EXE_IS_MEMFD") == "yes" and rep.get("HOST_EXE_OPEN_W_LIVE") == "OK":
        assert rep["HOST_EXE_WRITE_LIVE"] in refused, f"unsealed binary copy: {rep}"
    assert _sha256(binary) == digest, "the daemon binary changed"


def test_46b_no_host_binary_reachable_from_inside(sandbox):
    rep = _exe_trick(sandbox())
    if rep.get("INTERPRETER_SEEN") != "yes":
        pytest.skip(f"the interpreter ran too briefly to be observed: {rep}")
    assert rep.get("HOST_EXE_OPENED") == "no", rep


def test_47_cwd_and_leaked_fd_escape(sandbox):
    sb = sandbox()
    sb.install_probe()
    # A command may leave any cwd for the next one (the session keeps it):
    # point it at each fd number the spawning process could hold. The next
    # command must start inside the root, wherever that path leads.
    for n in list(range(0, 100)) + [255, 1023]:
        # no EXIT trap: this record is the session state the daemon keeps
        inject = (f"trap - EXIT; printf 'SBXSTATE\\0%s\\0PATH=%s\\0' "
                  f"/proc/self/fd/{n} \"$PATH\" >&63")
        sb.sh(inject)
        r = sb.probe("fds")
        assert r["CWD_UNDER_ROOT"] == "yes", (n, r)
        assert r["CWD"].startswith("/") and not r["CWD"].startswith(sb.d.base), (n, r)
        assert r["CWD"] in ("/workspace", "/") or r["CWD"].startswith(("/workspace", "/proc/")), (n, r)
        assert set(r["FDS"].split(",")) <= {"0", "1", "2", "63"}, (n, r)
    o = sb.probe("oldroot")
    assert o["DOTDOT_IS_ROOT"] == "yes", o


def test_48_ptrace_and_process_vm_into_other_sandbox(sandbox):
    a, b = sandbox(), sandbox()
    b.background("sleep 60")
    procs = lib.wait_until(lambda: lib.host_procs_in_uid_range(b.uid_base), 5)
    assert procs, "no target in sandbox B"
    host_pid = procs[0][0]
    ns_pid = b.sh("pgrep -x sleep").split()[0]
    r = a.probe("pvw", host_pid, ns_pid, 1)
    assert r["PVW_SELF"] == "EPERM" and r["PVR_SELF"] == "EPERM", r  # policy
    for pid in (host_pid, ns_pid, 1):
        for call in ("PVW", "PVR", "PTRACE", "KCMP"):
            assert r[f"{call}_{pid}"] == "EPERM", (call, pid, r)
    with open(f"/proc/{host_pid}/status") as f:
        assert "TracerPid:\t0" in f.read()
