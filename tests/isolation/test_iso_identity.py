"""Part B, identity and privilege (checks 1-6): who code in a sandbox is,
and that it cannot become anyone else or leave its namespaces."""
import os
import shutil

import isolation_lib as lib

ZERO_CAPS = "0000000000000000"


def test_01_uid_map_nonzero_and_unique(sandbox):
    a, b = sandbox(), sandbox()
    reports = {sb: sb.probe("ids") for sb in (a, b)}
    for sb, r in reports.items():
        assert r["UID"] == r["EUID"] == r["GID"] == "0", r
        for key in ("UID_MAP", "GID_MAP"):
            inside, outside, count = map(int, r[key].split(":"))
            assert r[f"{key}_LINES"] == "1", r
            assert inside == 0 and count == lib.UID_RANGE, r
            assert outside != 0, f"{key} maps to host root: {r}"
            assert outside == sb.uid_base, (key, outside, sb.uid_base)
        assert r["SETGROUPS"] == "deny", r
        assert r["SETUID_1000"] == "EPERM", r
    ua, ub = a.uid_base, b.uid_base
    assert abs(ua - ub) >= lib.UID_RANGE, f"uid ranges overlap: {ua} {ub}"
    # seen from the host, the sandbox's root really is that uid
    a.background("sleep 60")
    procs = lib.wait_until(lambda: lib.host_procs_in_uid_range(ua), 5)
    assert procs, "no host process in the sandbox's uid range"
    for pid, name, ids in procs:
        assert set(ids) == {ua}, (pid, name, ids)


def test_02_no_capabilities(sandbox):
    r = sandbox().probe("ids")
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert r[cap] == ZERO_CAPS, f"{cap}={r[cap]}"
    sb = int(r["SECUREBITS"], 16)
    # NOROOT, NO_SETUID_FIXUP and their locks, KEEP_CAPS_LOCKED (A.14)
    want = 0x1 | 0x2 | 0x4 | 0x8 | 0x20
    assert sb & want == want, f"securebits {sb:#x} lack {want & ~sb:#x}"


def test_03_no_new_privs_and_seccomp(sandbox):
    r = sandbox().probe("ids")
    assert r["NoNewPrivs"] == "1", r
    assert r["Seccomp"] == "2", r
    assert int(r["Seccomp_filters"]) >= 1, r


def test_04_setuid_binary_gains_nothing(sandbox):
    sb = sandbox()
    sb.install_probe()
    # a setuid-root binary made inside: still no capabilities after exec
    sb.sh(f"cp {lib.PROBE_PATH} /workspace/suid-root && chmod 4755 /workspace/suid-root")
    r = sb.probe("exec", "/workspace/suid-root")
    assert r["EXEC_STATUS"] == "EXIT:0", r
    assert r["CapEff"] == ZERO_CAPS and r["CapPrm"] == ZERO_CAPS, r
    assert r["EUID"] == "0" and r["NoNewPrivs"] == "1", r
    # a binary setuid to the sandbox's uid 1000, planted from the host in
    # the sandbox's upper layer: running it must not change our euid
    sb.sh("touch /workspace/.keep")  # /workspace now lives in the upper dir
    planted = os.path.join(sb.upper(), "workspace", "suid-1000")
    shutil.copyfile(sb.probe_bin, planted)
    os.chown(planted, sb.uid_base + 1000, sb.uid_base + 1000)
    os.chmod(planted, 0o4755)
    assert sb.sh("stat -c %u:%a /workspace/suid-1000").strip() == "1000:4755"
    r = sb.probe("exec", "/workspace/suid-1000")
    assert r["EXEC_STATUS"] == "EXIT:0", r
    assert r["EUID"] == "0" and r["SUID"] == "0", f"setuid bit honoured: {r}"
    assert r["CapEff"] == ZERO_CAPS, r


def test_05_no_nested_namespaces(sandbox):
    sb = sandbox()
    r = sb.probe("userns")
    for ns in ("USER", "NS", "NET", "PID", "IPC", "UTS", "CGROUP", "TIME"):
        assert r[f"UNSHARE_{ns}"] == "EPERM", (ns, r)
        assert r[f"CLONE_{ns}"] == "EPERM", (ns, r)
    assert r["CLONE_USER_NS"] == "EPERM", r
    # clone3 must look unimplemented, so that libc falls back to clone(2)
    assert r["CLONE3_USER"] == "ENOSYS", r
    assert r["CLONE3_PLAIN"] == "ENOSYS", r
    assert r["CLONE_PLAIN"] == "OK", "plain fork must work (control)"
    # and what a user would type
    res = sb.run("unshare -U true; echo rc=$?; unshare -r -m true; echo rc=$?")
    assert res["stdout"].split() == ["rc=1", "rc=1"], res


def test_06_setns_fails(sandbox):
    r = sandbox().probe("setns")
    tried = {k: v for k, v in r.items() if k.startswith("SETNS:")}
    # at least our own namespaces could be opened and tried
    assert int(r["SETNS_TRIED"]) >= 7, r
    bad = {k: v for k, v in tried.items() if v != "EPERM"}
    assert not bad, f"setns not refused: {bad}"
    # init's namespaces cannot even be opened (init is not dumpable)
    for k, v in r.items():
        if k.startswith("OPEN:/proc/1/ns/"):
            assert v == "EACCES", (k, v)
