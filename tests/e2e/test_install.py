"""The Debian package (`make deb`), as an administrator would meet it: built,
installed into this machine with dpkg, started as its unit says, used with
the installed sbx and libsbx, and removed with nothing left behind.

Where systemd runs, the package's postinst starts the unit itself and the
test checks it with systemctl (on the unit's own address, so only when
127.0.0.1:8080 is free). Elsewhere (a container without systemd, as here)
the unit's ExecStart runs as systemd would run it, plus a test port and a
temporary state dir on its command line, which win over the installed
configuration file. The test never touches a sandboxd installed before it
(it skips), and purges the package whatever happens."""
import os
import shlex
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

import helpers

REPO = helpers.REPO
BUILD = Path(helpers.SBX_BIN).parent
UNIT = Path("/lib/systemd/system/sandboxd.service")
HELPER_STATE = [Path("/etc/systemd/system/multi-user.target.wants/sandboxd.service"),
                Path("/etc/systemd/system/sandboxd.service"),
                Path("/var/lib/systemd/deb-systemd-helper-enabled/sandboxd.service.dsh-also"),
                Path("/var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/sandboxd.service"),
                Path("/var/lib/systemd/deb-systemd-helper-masked/sandboxd.service")]


def dpkg(*args, check=True):
    """dpkg, waiting for its lock while another apt/dpkg holds it."""
    deadline = time.monotonic() + 300
    while True:
        r = subprocess.run(["dpkg", *args], capture_output=True, text=True, timeout=300)
        locked = "lock" in r.stderr and ("locked" in r.stderr or "held" in r.stderr)
        if not locked or time.monotonic() > deadline:
            break
        time.sleep(2)
    if check:
        assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r


def installed():
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "sandboxd"],
                       capture_output=True, text=True)
    return r.returncode == 0 and "installed" in r.stdout and "not-installed" not in r.stdout


def port_free(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def systemd_runs():
    return Path("/run/systemd/system").is_dir()


@pytest.fixture(scope="module")
def deb():
    if os.geteuid() != 0:
        pytest.skip("installing a package needs root")
    if subprocess.run(["dpkg-query", "-W", "sandboxd"], capture_output=True).returncode == 0:
        pytest.skip("a sandboxd package is on this machine already: not touching it")
    for p in ["/usr/sbin/sandboxd", "/usr/bin/sbx", str(UNIT), "/etc/sandboxd"]:
        if os.path.lexists(p):
            pytest.skip(f"{p} exists already: not touching it")
    if systemd_runs() and not port_free(8080):
        pytest.skip("systemd would start the unit on 127.0.0.1:8080, which is taken")
    r = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "deb", f"BUILD={BUILD}"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    debs = sorted(BUILD.glob("sandboxd_*.deb"), key=lambda p: p.stat().st_mtime)
    assert debs, "make deb wrote no package"
    yield debs[-1]


def test_package_installs_starts_serves_and_purges(deb, tmp_path, new_sid):
    var_lib_existed = os.path.lexists("/var/lib/sandboxd")
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True,
                             text=True, check=True).stdout
    files = [line.split()[5][1:] for line in listing.splitlines()
             if line.startswith("-") or line.startswith("l")]
    assert "/usr/sbin/sandboxd" in files and "/usr/bin/sbx" in files
    assert "/lib/systemd/system/sandboxd.service" in files
    assert "/etc/sandboxd/sandboxd.conf" in files
    assert "/usr/share/man/man8/sandboxd.8.gz" in files
    assert "/usr/share/man/man1/sbx.1.gz" in files
    assert any(f.endswith("/libsbx.so.0") for f in files)
    assert any(f.endswith("/pkgconfig/libsbx.pc") for f in files)

    daemon = None
    saved_bin = helpers.SBX_BIN
    try:
        dpkg("-i", str(deb))
        assert installed()
        unit = UNIT.read_text()
        for line in ["Delegate=yes", "LimitNOFILE=1048576", "StateDirectory=sandboxd",
                     "ExecStart=/usr/sbin/sandboxd --config /etc/sandboxd/sandboxd.conf"]:
            assert line in unit.splitlines(), line
        # the man pages render
        for page in ["/usr/share/man/man8/sandboxd.8.gz", "/usr/share/man/man1/sbx.1.gz"]:
            r = subprocess.run(["man", "-l", page], capture_output=True, text=True,
                               env={**os.environ, "MANPAGER": "cat", "MANWIDTH": "80"})
            assert r.returncode == 0 and "SYNOPSIS" in r.stdout, r.stderr

        sid = new_sid()
        if systemd_runs():
            r = subprocess.run(["systemctl", "is-active", "sandboxd"], capture_output=True, text=True)
            assert r.stdout.strip() == "active", r
            url = "http://127.0.0.1:8080"
            assert helpers.wait_until(lambda: not port_free(8080), 30)
        else:
            exec_start = next(line.split("=", 1)[1] for line in unit.splitlines()
                              if line.startswith("ExecStart="))
            argv = shlex.split(exec_start)
            helpers.SBX_BIN = argv[0]
            daemon = helpers.Daemon(argv[1:])  # + --listen PORT --state-dir TMP
            url = daemon.url

        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SBX_URL": url}
        r = subprocess.run(["/usr/bin/sbx", "exec", sid, "--", "sh", "-c", "echo hi from $(id -un)"],
                           capture_output=True, text=True, env=env, timeout=120,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0 and r.stdout == "hi from root\n", r

        # libsbx as a user of the package builds against it: header, .so, .pc
        prog = tmp_path / "list.c"
        prog.write_text(
            '#include <libsbx.h>\n#include <stdio.h>\n#include <string.h>\n'
            'int main(int argc, char **argv) {\n'
            '  struct sbx_error err; struct sbx_sandbox *l; size_t n;\n'
            '  struct sbx_client *c = sbx_client_new(argv[1], NULL, &err);\n'
            '  if (!c || sbx_sandbox_list(c, &l, &n, &err)) { printf("%s\\n", err.code); return 1; }\n'
            '  for (size_t i = 0; i < n; i++) printf("%s\\n", l[i].id);\n'
            '  struct sbx_sandbox *s;\n'
            '  if (sbx_sandbox_info(c, "no-such-sandbox", &s, &err) == 0) return 2;\n'
            '  printf("%d %s\\n", err.status, err.code);\n'
            '  sbx_sandbox_list_free(l, n); sbx_client_free(c); return 0; }\n')
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libsbx"], capture_output=True,
                               text=True, check=True).stdout.split()
        if os.environ.get("SBX_SANITIZED"):  # make test-asan packs a sanitized libsbx
            flags.append("-fsanitize=address,undefined")
        subprocess.run(["cc", "-o", str(tmp_path / "list"), str(prog), *flags], check=True)
        r = subprocess.run([str(tmp_path / "list"), url], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r
        assert sid in r.stdout.split("\n") and "404 sandbox_not_found" in r.stdout
        ldd = subprocess.run(["ldd", str(tmp_path / "list")], capture_output=True, text=True).stdout
        assert "libsbx.so.0" in ldd

        if daemon:
            daemon.close()  # SIGTERM: must exit 0, its state dir removed
            daemon = None
    finally:
        helpers.SBX_BIN = saved_bin
        if daemon:
            daemon.close(check=False)
        if installed() or subprocess.run(["dpkg-query", "-W", "sandboxd"],
                                         capture_output=True).returncode == 0:
            purge = dpkg("--purge", "sandboxd", check=False)
        else:
            purge = None
        if not var_lib_existed and os.path.isdir("/var/lib/sandboxd"):
            os.rmdir("/var/lib/sandboxd")  # systemd's StateDirectory, empty after our test

    assert purge is not None and purge.returncode == 0, purge
    assert subprocess.run(["dpkg-query", "-W", "sandboxd"], capture_output=True).returncode != 0
    left = [f for f in files if os.path.lexists(f)]
    assert left == [], left
    assert not os.path.lexists("/etc/sandboxd")
    stale = [str(p) for p in HELPER_STATE if os.path.lexists(p)]
    assert stale == [], stale
    if systemd_runs():
        assert port_free(8080)
