"""Host side of the isolation suite: one real sandboxd process per handle,
the probe pushed into sandboxes, and the host checks that follow every test
(shared/spec/isolation.md part B; check 49 is `assert_sandbox_gone`).

Everything here looks at the host the way an operator would: /proc, the
cgroup filesystems, the mount table, the daemon's files. The daemon is only
ever spoken to over HTTP on loopback, as a client would.
"""
import base64
import ctypes
import ctypes.util
import gzip
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import requests

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SBX_BIN = os.environ.get("SBX_BIN") or str(REPO / "build" / "sandboxd")
UID_RANGE = 65536

# One small set of limits for the whole suite (the resource checks need
# them, and nothing else minds): part B 35-43.
DAEMON_FLAGS = ["--max-body", "16M", "--memory", "256M", "--pids", "64",
                "--exec-timeout", "3s", "--cpus", "1"]
DISK_LIMIT_MB = 128


def daemon_supports(flag):
    try:
        r = subprocess.run([SBX_BIN, "--help"], capture_output=True, text=True, timeout=10)
    except OSError:
        return False
    return flag in r.stdout


# A disk limit per sandbox, where this daemon has one (check 37).
if daemon_supports("--disk"):
    DAEMON_FLAGS += ["--disk", f"{DISK_LIMIT_MB}M"]
EXEC_TIMEOUT_S = 3.0

# Where the probe lives inside a sandbox.
PROBE_PATH = "/opt/sbx-probe"
# bash -c gets the command as one argv string: MAX_ARG_STRLEN is 128 KiB.
CHUNK = 96 * 1024


def wait_until(pred, timeout, interval=0.05):
    """Polls pred() until it returns something truthy; returns that value,
    or the last falsy value once timeout seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_kv(text):
    """KEY=VALUE lines -> dict (the last value of a repeated key wins)."""
    out = {}
    for line in text.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out


def fnv1a(s):
    h = 2166136261
    for b in s.encode():
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


# --- the probe ------------------------------------------------------------------

def compile_probe(outdir):
    """cc -static -O2 tests/isolation/probe.c; returns the binary's path."""
    out = os.path.join(outdir, "probe")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.fail("no C compiler (cc) to build the isolation probe")
    r = subprocess.run([cc, "-static", "-O2", "-Wall", "-o", out,
                        str(HERE / "probe.c")], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"building the probe failed:\n{r.stderr}")
    return out


def run_host_probe(probe, *args, user=None, timeout=60):
    """Runs the probe on the host, outside any sandbox (the baseline).
    user: run it as this uid/gid instead of root (no capabilities)."""
    pre = None
    if user is not None:
        def pre():
            os.setgroups([])
            os.setresgid(user, user, user)
            os.setresuid(user, user, user)
    # a session of its own: no controlling terminal of ours to touch
    r = subprocess.run([probe, *map(str, args)], capture_output=True,
                       text=True, timeout=timeout, preexec_fn=pre, cwd="/",
                       stdin=subprocess.DEVNULL, start_new_session=True)
    return Report(r.stdout, {"exitCode": r.returncode, "stdout": r.stdout,
                             "stderr": r.stderr})


class Report(dict):
    """The probe's KEY=VALUE lines, plus the exec result they came in."""

    def __init__(self, text, result):
        super().__init__(parse_kv(text))
        self.text = text
        self.result = result

    def __repr__(self):
        return (f"<probe report exit={self.result.get('exitCode')} "
                f"stdout={self.text[-3000:]!r} "
                f"stderr={str(self.result.get('stderr', ''))[-1500:]!r}>")


# --- host views ---------------------------------------------------------------------

def host_procs_in_uid_range(base, n=UID_RANGE):
    """[(pid, comm, uids)] of host processes with any uid or gid in
    [base, base+n)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                st = f.read()
        except OSError:
            continue
        ids = []
        for line in st.splitlines():
            if line.startswith(("Uid:", "Gid:")):
                ids += [int(x) for x in line.split()[1:]]
        if any(base <= i < base + n for i in ids):
            name = re.search(r"^Name:\s*(.*)$", st, re.M)
            found.append((int(d), name.group(1) if name else "?", ids))
    return found


def _pidns(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def procs_in_pidns_of(init_pid):
    """Host pids of the processes in init_pid's pid namespace but init
    (other daemons on this host may use the same uid ranges: see
    docs/security.md A.9, so a uid alone does not name a sandbox)."""
    ns = _pidns(init_pid)
    if ns is None:
        return []
    return [int(d) for d in os.listdir("/proc")
            if d.isdigit() and int(d) != init_pid and _pidns(d) == ns]


def host_mounts_mentioning(text):
    with open("/proc/self/mountinfo") as f:
        return [l.strip() for l in f if text in l]


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
    except OSError:
        return False
    return st.rsplit(")", 1)[1].split()[0] != "Z"


def is_init_of(pid, daemon_pid):
    """Is pid (still) a sandbox init of that daemon? (pids get reused)"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
    except OSError:
        return False
    comm = st[st.index("(") + 1:st.rindex(")")]
    fields = st.rsplit(")", 1)[1].split()
    return comm == "sandboxd-init" and fields[0] != "Z" and int(fields[1]) == daemon_pid


def _cgroup_mounts():
    """{controller: (mount root, mountpoint)} for the v1 hierarchies."""
    out = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if not rfields or rfields[0] != "cgroup":
                continue
            for opt in rfields[2].split(","):
                out.setdefault(opt, (fields[3], fields[4]))
    return out


V1_CONTROLLERS = ("freezer", "memory", "pids", "cpu", "cpuacct", "devices")


def cgroup_dirs_of(pid, controllers=V1_CONTROLLERS):
    """{controller: host directory} of pid's v1 cgroups (the path in
    /proc/<pid>/cgroup, minus the mount's root, joined to its mountpoint)."""
    mounts = _cgroup_mounts()
    out = {}
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            for c in ctrls.split(","):
                if c not in controllers or c not in mounts:
                    continue
                root, mp = mounts[c]
                rel = path[len(root):] if root != "/" and path.startswith(root) else path
                out[c] = mp + (rel if rel != "/" else "")
    return out


def daemon_cgroup_dirs(daemon_pid, state_dir):
    """{controller: <own cgroup>/sandboxd-<hash of state dir>} on the host,
    found the way the daemon finds its own (cgroup.c): the v1 hierarchies
    it uses, or {"unified": ...} when it runs on cgroup v2."""
    name = "sandboxd-%08x" % fnv1a(state_dir)
    out, unified = {}, None
    with open(f"/proc/{daemon_pid}/cgroup") as f:
        for line in f:
            hid, ctrls, path = line.rstrip("\n").split(":", 2)
            if hid == "0" and not ctrls:
                unified = path
    for c, own in cgroup_dirs_of(daemon_pid).items():
        d = os.path.join(own, name)
        if os.path.isdir(d):
            out[c] = d
    if not out and unified is not None:
        # v2: the daemon moved itself into <own>/daemon
        own = unified[:-len("/daemon")] if unified.endswith("/daemon") else unified
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if right.split()[0] == "cgroup2":
                    d = os.path.join(left.split()[4] + own.rstrip("/"), name)
                    if os.path.isdir(d):
                        out["unified"] = d
    return out


def cgroup_v1(daemon):
    return "unified" not in daemon.cgroup_roots


def require_cgroup_v1(daemon):
    if not cgroup_v1(daemon):
        pytest.skip("reads cgroup v1 files; this daemon runs on cgroup v2")


def read_int(path, default=None):
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def memory_limit_over(path, top):
    """The smallest v1 memory.limit_in_bytes from cgroup dir path up to and
    including top: the limit that applies to a task in path, below top."""
    best = None
    d = path
    while True:
        v = read_int(os.path.join(d, "memory.limit_in_bytes"))
        if v is not None and (best is None or v < best):
            best = v
        if d == top or len(d) <= len(top):
            return best
        d = os.path.dirname(d)


def oom_kills_under(path):
    """Sum of memory.oom_control's oom_kill over a v1 memory cgroup tree."""
    total = 0
    for dirpath, _, files in os.walk(path):
        if "memory.oom_control" in files:
            try:
                with open(os.path.join(dirpath, "memory.oom_control")) as f:
                    for line in f:
                        if line.startswith("oom_kill "):
                            total += int(line.split()[1])
            except OSError:
                pass
    return total


def host_has_cap(cap):
    """Does this process (root, like the daemons it starts) hold cap?"""
    with open("/proc/self/status") as f:
        eff = [l for l in f if l.startswith("CapEff:")][0].split()[1]
    return bool(int(eff, 16) >> cap & 1)


CAP_SYS_RESOURCE = 24


def mem_available_kb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0


# --- syscall names (x86_64) -------------------------------------------------------

# Newer than Debian 12's kernel headers (linux-libc-dev 6.1).
_SYSCALLS_NEW = {
    335: "uretprobe", 336: "uprobe", 451: "cachestat", 452: "fchmodat2",
    453: "map_shadow_stack", 454: "futex_wake", 455: "futex_wait",
    456: "futex_requeue", 457: "statmount", 458: "listmount",
    459: "lsm_get_self_attr", 460: "lsm_set_self_attr",
    461: "lsm_list_modules", 462: "mseal", 463: "setxattrat",
    464: "getxattrat", 465: "listxattrat", 466: "removexattrat",
    467: "open_tree_attr", 468: "file_getattr", 469: "file_setattr",
}


def syscall_names():
    """{number: name} for x86_64, from the installed kernel headers plus
    the calls added since."""
    names = dict(_SYSCALLS_NEW)
    for hdr in ("/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
                "/usr/include/asm/unistd_64.h"):
        try:
            with open(hdr) as f:
                for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)", f.read()):
                    names[int(m.group(2))] = m.group(1)
            break
        except OSError:
            continue
    return names


def libseccomp_resolves(name):
    """Does the installed libseccomp know this syscall name on x86_64?
    (seccomp.c skips the names it cannot resolve.)"""
    lib = ctypes.util.find_library("seccomp")
    if not lib:
        return None
    f = ctypes.CDLL(lib).seccomp_syscall_resolve_name
    f.argtypes = [ctypes.c_char_p]
    f.restype = ctypes.c_int
    return f(name.encode()) >= 0


# --- the daemon -------------------------------------------------------------------

LIVE = []  # daemons started and not yet closed (log tails on failure)

# sandboxd reserves uid ranges host-wide (two daemons with one --uid-base
# get disjoint ranges). The suite's daemons still get bases of their own,
# away from the default that `make run` and the e2e suite use (and from
# daemons of builds that predate the reservation), so that the host-side
# uid scans see only the sandbox under test.
_daemons_started = itertools.count()


def _next_uid_base():
    """0xC0000000, 0xC1000000, ... 0xCF000000: 256 slots apart."""
    return 0xC0000000 + (next(_daemons_started) % 16) * 0x01000000


class Daemon:
    """One sandboxd with its own port, state dir and log file."""

    def __init__(self, flags=DAEMON_FLAGS, nofile=None, default_uid_base=False):
        """default_uid_base: no --uid-base of the suite's own (the
        daemon's default, or the one in flags)."""
        self.flags = [str(f) for f in flags]
        if "--uid-base" not in self.flags and not default_uid_base:
            self.flags += ["--uid-base", str(_next_uid_base())]
        self.nofile = nofile
        self.base = tempfile.mkdtemp(prefix="sbx-iso-", dir="/tmp")
        os.chmod(self.base, 0o755)
        self.state_dir = os.path.realpath(os.path.join(self.base, "state"))
        os.mkdir(self.state_dir, 0o700)
        self.log_path = os.path.join(self.base, "sandboxd.log")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None
        self.binary = SBX_BIN
        LIVE.append(self)
        try:
            self.start()
        except BaseException:
            self.close(check=False)
            raise

    def start(self):
        if not os.access(self.binary, os.X_OK):
            pytest.fail(f"sandboxd not found at {self.binary} (make, or set SBX_BIN)")
        cmd = [self.binary, "--listen", f"127.0.0.1:{self.port}",
               "--state-dir", self.state_dir, *self.flags]
        pre = None
        if self.nofile:
            import resource

            def pre():
                resource.setrlimit(resource.RLIMIT_NOFILE, self.nofile)
        with open(self.log_path, "ab") as log:
            log.write(f"=== isolation: {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, preexec_fn=pre)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"sandboxd exited during startup:\n{self.log_tail()}")
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"sandboxd did not answer /health:\n{self.log_tail()}")
            time.sleep(0.05)
        self.cgroup_roots = daemon_cgroup_dirs(self.proc.pid, self.state_dir)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self):
        if not self.alive():
            raise AssertionError(f"sandboxd died (status {self.proc.returncode}):\n"
                                 f"{self.log_tail(60)}")

    def stop(self, timeout=15):
        self.check_alive()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"sandboxd ignored SIGTERM:\n{self.log_tail()}")
        assert rc == 0, f"sandboxd exited {rc} on SIGTERM:\n{self.log_tail()}"

    def restart(self):
        self.stop()
        self.start()

    def close(self, check=True):
        try:
            if check and self.proc is not None:
                self.stop()
        finally:
            if self.alive():
                self.proc.kill()
                self.proc.wait()
            if self in LIVE:
                LIVE.remove(self)
            left = host_mounts_mentioning(self.base)
            # never leave them (nor remove files across them), but a daemon
            # stopped cleanly must have unmounted everything itself
            for m in sorted((l.split()[4] for l in left), key=len, reverse=True):
                subprocess.run(["umount", "-l", m], stderr=subprocess.DEVNULL)
            if not host_mounts_mentioning(self.base):
                shutil.rmtree(self.base, ignore_errors=True)
            cg_left = self._remove_cgroups()
            if left and check:
                raise AssertionError(f"host mounts left under {self.base}: {left}")
            if cg_left and check:
                raise AssertionError(f"sandbox cgroups left by the stopped daemon: {cg_left}")

    def _remove_cgroups(self):
        """The daemon keeps <own>/sandboxd-<hash> when it exits (to reuse it
        with the same state dir); a test's state dir is never reused, so
        remove them (empty cgroups only: rmdir refuses anything else).
        Returns the sandbox cgroups (s<slot>) that were still there."""
        left = []
        for root in getattr(self, "cgroup_roots", {}).values():
            for dirpath, dirs, _ in os.walk(root, topdown=False):
                if os.path.dirname(dirpath) == root and \
                        os.path.basename(dirpath).startswith("s"):
                    left.append(dirpath)
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass
        return left

    # --- logs and host-side facts ---------------------------------------------
    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, n=40):
        return "\n".join(self.log_text().splitlines()[-n:])

    def stray_mounts(self):
        """Host mounts that mention the state dir, but for the daemon's own
        sandbox store (a filesystem mounted on <state>/sandboxes for disk
        quotas, there as long as the daemon runs)."""
        store = os.path.join(self.state_dir, "sandboxes")
        return [m for m in host_mounts_mentioning(self.state_dir)
                if m.split()[4] != store]

    def store_fstype(self):
        """Filesystem type of <state>/sandboxes (the sandboxes' upper layers)."""
        store = os.path.join(self.state_dir, "sandboxes")
        best = ("", "")
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                mp = left.split()[4]
                if (store == mp or store.startswith(mp.rstrip("/") + "/")) and \
                        len(mp) >= len(best[0]):
                    best = (mp, right.split()[0])
        return best[1]

    def fd_count(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def sandbox_ids(self, name):
        """(slot, host uid base) from the daemon's "created" log line."""
        m = None
        for m in re.finditer(rf"sandbox={re.escape(name)} event=created "
                             rf"slot=(\d+) uid=(\d+)", self.log_text()):
            pass
        if not m:
            return None
        return int(m.group(1)), int(m.group(2))

    def init_pids(self, name):
        return [int(p) for p in re.findall(
            rf"sandbox={re.escape(name)} event=started pid=(\d+)", self.log_text())]

    def sandbox_cgroup(self, slot, controller):
        root = self.cgroup_roots.get(controller) or self.cgroup_roots.get("unified")
        return os.path.join(root, f"s{slot}") if root else None

    # --- API ------------------------------------------------------------------
    def exec(self, room, cmd, timeout=30):
        return requests.post(f"{self.url}/api/rooms/{room}/sandbox/exec",
                             json={"cmd": cmd}, timeout=timeout,
                             headers={"Connection": "close"})

    def delete(self, room, timeout=30):
        return requests.delete(f"{self.url}/api/rooms/{room}", timeout=timeout,
                               headers={"Connection": "close"})

    def health(self, timeout=5):
        return requests.get(self.url + "/health", timeout=timeout,
                            headers={"Connection": "close"})


class Sandbox:
    """One room of a daemon, with the probe installed on first use."""

    def __init__(self, daemon, room, probe_bin):
        self.d = daemon
        self.room = room
        self.name = f"sandbox-{room}"
        self.probe_bin = probe_bin
        self.has_probe = False
        self.deleted = False

    def exec(self, cmd, timeout=30):
        return self.d.exec(self.room, cmd, timeout=timeout)

    def run(self, cmd, timeout=30):
        """Execs and requires a 200; returns the result object."""
        r = self.exec(cmd, timeout=timeout)
        assert r.status_code == 200, f"exec {cmd[:200]!r}: {r.status_code} {r.text[:2000]}"
        return r.json()["result"]

    def sh(self, cmd, timeout=30):
        """Execs and requires exit status 0; returns stdout."""
        res = self.run(cmd, timeout=timeout)
        assert res["exitCode"] == 0, f"{cmd[:200]!r}: {res}"
        return res["stdout"]

    def background(self, cmd, out="/dev/null"):
        """Starts cmd in the sandbox in a session of its own, detached from
        the exec's pipes (and from fd 63, the session state pipe), so that
        the exec returns at once and cmd lives on."""
        self.run(f"setsid {cmd} </dev/null >{out} 2>&1 63>&- &")

    def install_probe(self):
        if self.has_probe:
            return
        with open(self.probe_bin, "rb") as f:
            data = base64.b64encode(gzip.compress(f.read(), 6)).decode()
        tmp = PROBE_PATH + ".b64"
        self.sh(f"rm -f {tmp}")
        for i in range(0, len(data), CHUNK):
            self.sh(f"printf %s '{data[i:i + CHUNK]}' >> {tmp}")
        self.sh(f"base64 -d {tmp} | gunzip > {PROBE_PATH} && chmod 755 {PROBE_PATH} "
                f"&& rm {tmp}")
        self.has_probe = True

    def probe(self, *args, timeout=30, expect_done=True):
        """Runs PROBE ARGS inside; returns its Report. The exec must answer
        200; with expect_done, the probe must also have finished normally."""
        self.install_probe()
        cmd = " ".join([PROBE_PATH, *[shell_quote(str(a)) for a in args]])
        res = self.run(cmd, timeout=timeout)
        rep = Report(res["stdout"], res)
        if expect_done:
            assert rep.get("DONE") == "0", f"probe {args} did not finish: {rep!r}"
        return rep

    @property
    def ids(self):
        ids = self.d.sandbox_ids(self.name)
        assert ids, f"no 'created' log line for {self.name}:\n{self.d.log_tail()}"
        return ids

    @property
    def slot(self):
        return self.ids[0]

    @property
    def uid_base(self):
        return self.ids[1]

    def cgroup(self, controller):
        return self.d.sandbox_cgroup(self.slot, controller)

    def init_pid(self):
        return self.d.init_pids(self.name)[-1]

    def host_pids(self, timeout=5):
        """Host pids of the sandbox's processes but init, which is also
        the spawner of its commands (waits for one)."""
        init = self.init_pid()
        pids = wait_until(lambda: procs_in_pidns_of(init), timeout)
        assert pids, "no process of the sandbox on the host"
        return pids

    def upper(self):
        return os.path.join(self.d.state_dir, "sandboxes", f"s{self.slot}", "root", "upper")

    def delete(self):
        r = self.d.delete(self.room)
        assert r.status_code == 200, f"DELETE {self.room}: {r.status_code} {r.text}"
        self.deleted = True


def shell_quote(s):
    if re.fullmatch(r"[A-Za-z0-9_./:@%+=,-]+", s):
        return s
    return "'" + s.replace("'", "'\\''") + "'"


# --- check 49: what must hold on the host once a sandbox is gone ------------------

def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


def assert_sandbox_gone(daemon, sb, timeout=10):
    """After DELETE: no process of the sandbox's uid range and no init left,
    its cgroups removed in every hierarchy, no mount of the state dir in the
    host's mount table (but the daemon's store), its files gone. Waits up to
    timeout for each (teardown is asynchronous in places) and says, with
    pytest -s, when it had to wait long."""
    ids = daemon.sandbox_ids(sb.name)
    if ids is None:
        return  # never created (the test failed before its first exec)
    slot, base = ids
    problems = []
    t0 = time.monotonic()
    first = host_procs_in_uid_range(base)
    if not wait_until(lambda: not host_procs_in_uid_range(base), timeout):
        problems.append(f"host processes in uid range {base}+{UID_RANGE}: "
                        f"{host_procs_in_uid_range(base)}")
    for pid in daemon.init_pids(sb.name):
        if not wait_until(lambda: not is_init_of(pid, daemon.pid), timeout):
            problems.append(f"sandbox init pid {pid} still alive")
    for root in daemon.cgroup_roots.values():
        d = os.path.join(root, f"s{slot}")
        if not wait_until(lambda: not os.path.exists(d), timeout):
            problems.append(f"cgroup left: {d} (procs: "
                            f"{_listdir(d) and open(os.path.join(d, 'cgroup.procs')).read().split()})")
    mounts = daemon.stray_mounts()
    if mounts:
        problems.append(f"host mounts mention the state dir: {mounts}")
    # a running sandbox's files go once its stop has ended (the kernel
    # tears its namespaces down after DELETE answers)
    sdir = os.path.join(daemon.state_dir, "sandboxes", f"s{slot}")
    if not wait_until(lambda: not os.path.exists(sdir), timeout):
        problems.append(f"sandbox files left: {sdir}")
    trash = os.path.join(daemon.state_dir, "trash")
    if not wait_until(lambda: not any(n.startswith(f"s{slot}.") for n in _listdir(trash)),
                      timeout):
        problems.append(f"sandbox files left in the trash: {_listdir(trash)}")
    took = time.monotonic() - t0
    if took > 1:
        print(f"[iso] {sb.name}: post-conditions took {took:.1f}s "
              f"(processes at first: {first[:3]})")
    assert not problems, "after DELETE:\n  " + "\n  ".join(problems)
