"""Part B, syscall surface (checks 27-31): the seccomp policy, seen from
inside, against tests/isolation/seccomp-policy.txt and the host."""
import re
import secrets

import pytest

import isolation_lib as lib

POLICY = lib.HERE / "seccomp-policy.txt"
SECCOMP_C = lib.REPO / "src" / "runtime" / "seccomp.c"
SWEEP_HI = 470


def read_policy():
    """({name: action} of the unconditional rules, {name: action} of the
    argument-dependent ones) from seccomp-policy.txt."""
    always, cond = {}, {}
    for line in POLICY.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 2)
        (cond if len(parts) == 3 else always)[parts[0]] = parts[1]
    return always, cond


def source_policy():
    """The same two maps, read out of src/runtime/seccomp.c."""
    src = SECCOMP_C.read_text()
    m = re.search(r"deny_eperm\[\]\s*=\s*\{(.*?)\};", src, re.S)
    assert m, "deny_eperm[] not found in seccomp.c"
    always = {n: "EPERM" for n in re.findall(r'"(\w+)"', m.group(1))}
    cond = {}
    for act, name, nargs in re.findall(
            r"SCMP_ACT_ERRNO\((\w+)\),\s*SCMP_SYS\((\w+)\),\s*(\d+)", src):
        (always if nargs == "0" else cond)[name] = act
    # the per-family socket rule takes its errno from a variable
    for name, act in cond.items():
        assert re.fullmatch(r"E[A-Z]+", act), (name, act)
    return always, cond


def test_27a_policy_file_matches_source():
    f_always, f_cond = read_policy()
    s_always, s_cond = source_policy()
    assert f_always == s_always, (
        "seccomp-policy.txt and src/runtime/seccomp.c disagree:\n"
        f"  only in the file:   {sorted(set(f_always.items()) - set(s_always.items()))}\n"
        f"  only in seccomp.c:  {sorted(set(s_always.items()) - set(f_always.items()))}")
    assert f_cond == s_cond, (f_cond, s_cond)


def _blocked(report):
    """{nr: errno} of the calls a seccomp filter refused in a sweep."""
    assert report["SWEEP_CHILD"] == "EXIT:0", report
    out = {}
    for k, v in report.items():
        if k.startswith("SYS_") and v.startswith("BLOCKED:"):
            out[int(k[4:])] = v.split(":", 1)[1]
    return out


def expected_blocked(names):
    """Policy names that this machine can enforce: present on x86_64 (the
    daemon refuses by number what its libseccomp cannot name). Returns
    ({name: action}, skipped)."""
    always, _ = read_policy()
    on_arch = set(names.values())
    exp, skipped = {}, {}
    for name, act in always.items():
        if name not in on_arch:
            skipped[name] = "no such syscall on x86_64"
        else:
            exp[name] = act
    return exp, skipped


@pytest.fixture(scope="module")
def sweeps(daemon, probe_bin):
    """The sweep inside a sandbox and on the host, once for the module."""
    sb = lib.Sandbox(daemon, "iso-sweep-" + secrets.token_hex(4), probe_bin)
    try:
        inside = sb.probe("sweep", 0, SWEEP_HI)
    finally:
        sb.delete()
        lib.assert_sandbox_gone(daemon, sb)
    host = lib.run_host_probe(probe_bin, "sweep", 0, SWEEP_HI)
    return inside, host


def test_27_syscall_sweep_matches_policy(sweeps):
    inside, host = sweeps
    names = lib.syscall_names()
    # blocked by policy: refused in the sandbox, not on the host
    host_blocked = _blocked(host)
    assert not host_blocked, f"the host itself refuses {host_blocked}: cannot compare"
    blocked = {names.get(nr, f"nr{nr}"): err for nr, err in _blocked(inside).items()
               if nr not in host_blocked}
    exp, _ = expected_blocked(names)
    assert blocked == exp, (
        "blocked set differs from seccomp-policy.txt:\n"
        f"  blocked, not in the policy: {sorted(set(blocked.items()) - set(exp.items()))}\n"
        f"  in the policy, not blocked: {sorted(set(exp.items()) - set(blocked.items()))}")
    assert int(inside["SWEEP_BLOCKED"]) == len(exp)


def test_27b_every_policy_name_is_enforced(sweeps):
    inside, _ = sweeps
    names = lib.syscall_names()
    exp, skipped = expected_blocked(names)
    unresolved = {n for n, why in skipped.items() if "libseccomp" in why}
    blocked = {names.get(nr) for nr in _blocked(inside)}
    assert not unresolved - blocked, f"in the policy, not enforced: {sorted(unresolved - blocked)}"


SPOT = ["KEYCTL", "ADD_KEY", "REQUEST_KEY", "BPF", "PERF_EVENT_OPEN", "USERFAULTFD",
        "IO_URING_SETUP", "IO_URING_ENTER", "IO_URING_REGISTER", "KEXEC_LOAD",
        "KEXEC_FILE_LOAD", "INIT_MODULE", "FINIT_MODULE", "DELETE_MODULE", "ACCT",
        "SWAPON", "SWAPOFF", "REBOOT", "SYSLOG", "IOPL", "IOPERM", "QUOTACTL",
        "SETTIMEOFDAY", "CLOCK_SETTIME", "FANOTIFY_INIT", "VHANGUP"]


def test_28_spot_checks(sandbox):
    r = sandbox().probe("spot")
    bad = {k: r[k] for k in SPOT if r.get(k) not in ("EPERM", "ENOSYS")}
    assert not bad, f"not refused: {bad}"
    for fam in ("VSOCK", "ALG", "KEY"):
        assert r[f"SOCKET_{fam}"] in ("EAFNOSUPPORT", "EPERM"), (fam, r)
    assert r["SOCKET_UNIX"] == "OK" and r["SOCKET_INET"] == "OK", "controls"


def test_28b_socket_family_rule_ignores_high_bits(sandbox, probe_bin):
    host = lib.run_host_probe(probe_bin, "spot")
    if host.get("SOCKET_VSOCK") != "OK":
        pytest.skip(f"no AF_VSOCK in this kernel ({host.get('SOCKET_VSOCK')})")
    r = sandbox().probe("spot")
    for fam in ("VSOCK", "ALG", "KEY"):
        assert r[f"SOCKET_{fam}_HIGHBITS"] in ("EAFNOSUPPORT", "EPERM"), (fam, r)


def test_29_legacy_architectures_killed(sandbox, probe_bin, tmp_path):
    host = lib.run_host_probe(probe_bin, "i386", tmp_path / "i386")
    if host.get("INT80_GETPID") != "EXIT:0" or host.get("ELF32_EXEC") != "EXIT:42":
        pytest.skip(f"this kernel runs no i386 code itself (IA32 emulation off): {host!r}")
    r = sandbox().probe("i386")
    assert r["INT80_GETPID"] == "SIGNAL:SIGSYS", r
    assert r["INT80_SOCKETCALL"] == "SIGNAL:SIGSYS", r
    assert r["ELF32_EXEC"] == "SIGNAL:SIGSYS" and r["ELF32_OUTPUT"] == "", r
    assert host["ELF32_OUTPUT"] == "i386", host
    # x32 (syscall numbers with bit 30): killed too, or absent from the kernel
    assert r["X32_GETPID"] in ("SIGNAL:SIGSYS", "EXIT:1"), r


def test_30_personality_and_aslr(sandbox):
    r = sandbox().probe("personality")
    assert r["RANDOMIZE_VA_SPACE"] == "2", r
    assert r["PERS_ADDR_NO_RANDOMIZE"] == "EPERM", r
    assert r["PERS_READ_IMPLIES_EXEC"] == "EPERM", r
    assert r["PERS_ADDR_NO_RANDOMIZE_HIGHBITS"] == "EPERM", r
    assert r["PERS_LINUX"] == "OK", "control: PER_LINUX is allowed"
    assert r["ASLR_DEFAULT"] == "on", r


def test_30b_personality_bit31_cannot_disable_aslr(sandbox):
    r = sandbox().probe("personality")
    assert r["PERS_ADDR_NO_RANDOMIZE_BIT31"] in ("EPERM", "EINVAL"), r
    # refused, so the probe's children never re-exec with it ("UNKNOWN");
    # had it passed, the stacks must still differ
    assert r["ASLR_AFTER_BIT31"] in ("on", "UNKNOWN"), r


def test_31_locks_on_shared_inodes_do_not_cross(sandbox, probe_bin):
    a, b = sandbox(), sandbox()
    a.install_probe()
    for path in ("/usr/bin/env", "/etc/passwd"):  # host /usr; the shared image
        a.background(f"{lib.PROBE_PATH} lock-hold {path} 30")
        held = lib.wait_until(
            lambda: a.probe("lock-test", path).get("FLOCK_EX_NB") == "EAGAIN", 5)
        assert held, f"control: A's own lock on {path} not seen inside A"
        ra = a.probe("lock-test", path)
        assert ra["GETLK_WR"] == "CONFLICT" and ra["OFD_GETLK_WR"] == "CONFLICT", ra
        rb = b.probe("lock-test", path)
        assert rb["FLOCK_EX_NB"] == "OK", f"A's flock on {path} reached B: {rb}"
        assert rb["GETLK_WR"] == "UNLCK", rb
        assert rb["OFD_GETLK_WR"] == "UNLCK", rb
    host = lib.run_host_probe(probe_bin, "lock-test", "/usr/bin/env")
    assert host["FLOCK_EX_NB"] == "OK" and host["GETLK_WR"] == "UNLCK", host
