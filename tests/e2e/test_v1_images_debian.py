"""A Debian image (issue 18): a minbase root filesystem made by mmdebstrap
from the Debian mirror (once, then cached: tests/e2e/oci.py), imported as
an OCI layout; a sandbox from it runs bash with sessions, dpkg knows its
packages, nothing of the host's /usr shows, and its files stay across an
idle stop and a daemon restart. Skipped, saying why, only when the image
cannot be made here (no mmdebstrap, the mirror unreachable)."""
import os

import pytest

import oci
from helpers import V1, wait_until


@pytest.fixture(scope="module")
def debian(tmp_path_factory):
    path, why = oci.debian_layout(str(tmp_path_factory.mktemp("debian") / "layout"))
    if not path:
        pytest.skip(f"no Debian image: {why}")
    return path


def run(v1, sid, command):
    r = v1.exec_json(sid, command=command, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_debian_image_sandbox(make_daemon, debian, new_sid):
    d = make_daemon("--sleep-after", "2s")
    v1 = V1(d)
    r = v1.post("/v1/image", json={"name": "debian:bookworm",
                                   "source": f"oci-layout:{debian}"}, timeout=600)
    assert r.status_code == 201, r.text
    img = r.json()
    assert img["shell"] == "/bin/bash" and "note" not in img, img
    assert img["sizeBytes"] > 50 << 20, img
    sid = new_sid()
    v1.create(sid, image="debian:bookworm")
    res = run(v1, sid, ". /etc/os-release; echo $ID $VERSION_CODENAME; whoami; pwd; "
                       "dpkg -s bash | grep '^Status'; "
                       "test -e /usr/bin/gcc || echo no-host-usr")
    assert res["exitCode"] == 0, res
    assert res["stdout"] == ("debian bookworm\nroot\n/root\n"
                             "Status: install ok installed\nno-host-usr\n"), res
    # bash sessions carry cwd and exported variables
    run(v1, sid, "cd /var/tmp && export DEB_X=42")
    assert run(v1, sid, 'pwd; echo "$DEB_X"')["stdout"] == "/var/tmp\n42\n"
    # the daemon's /etc/hosts over the image's; its own passwd
    res = run(v1, sid, "grep -c sandbox /etc/hosts; getent passwd _apt | cut -d: -f1")
    assert res["stdout"] == "1\n_apt\n", res
    run(v1, sid, "echo kept > /root/f && apt-mark hold bash >/dev/null && echo ok")
    assert wait_until(lambda: not v1.running(sid), 30), "never idled out"
    assert run(v1, sid, "cat /root/f; apt-mark showhold")["stdout"] == "kept\nbash\n"
    d.restart()
    assert run(v1, sid, 'cat /root/f; pwd; echo "$DEB_X"')["stdout"] == "kept\n/var/tmp\n42\n"
