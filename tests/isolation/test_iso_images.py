"""Part B for sandboxes made from an OCI image (issue 18): a subset of the
suite run again in a busybox image (built from the host's busybox-static)
and in a Debian image (mmdebstrap, cached; skipped, saying why, when it
cannot be made here), both from tests/e2e/oci.py, whose root overlay stacks
the image's layers where the host's /usr is otherwise. The probe is static,
so it runs in any image.

Each check is the suite's own test function, given sandboxes of the image
(made and driven through /v1) instead of Duet rooms."""
import os
import re
import sys

import pytest
import requests

import isolation_lib as lib
import test_iso_filesystem as fs
import test_iso_identity as ident

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import oci  # noqa: E402



class ImageSandbox(lib.Sandbox):
    """A /v1 sandbox of the image, with the Duet-room sandbox's interface."""

    def __init__(self, daemon, name, probe_bin, image):
        super().__init__(daemon, name, probe_bin)
        self.name = name  # /v1 sandboxes are logged by their id
        r = requests.post(f"{daemon.url}/v1/sandbox",
                          json={"id": name, "image": image}, timeout=30)
        assert r.status_code == 201, r.text

    def exec(self, cmd, timeout=30):
        return requests.post(f"{self.d.url}/v1/sandbox/{self.room}/exec",
                             json={"command": cmd}, timeout=timeout,
                             headers={"Accept": "application/json",
                                      "Connection": "close"})

    def run(self, cmd, timeout=30):
        r = self.exec(cmd, timeout=timeout)
        assert r.status_code == 200, f"exec {cmd[:200]!r}: {r.status_code} {r.text[:2000]}"
        return r.json()

    def install_probe(self):
        if self.has_probe:
            return
        with open(self.probe_bin, "rb") as f:
            r = requests.put(f"{self.d.url}/v1/sandbox/{self.room}/file/.probe",
                             data=f, timeout=60)
        assert r.status_code in (200, 201, 204), r.text
        self.sh(f"mkdir -p {os.path.dirname(lib.PROBE_PATH)} && "
                f"cp /workspace/.probe {lib.PROBE_PATH} && "
                f"chmod 755 {lib.PROBE_PATH} && rm /workspace/.probe")
        self.has_probe = True

    def delete(self):
        r = requests.delete(f"{self.d.url}/v1/sandbox/{self.room}", timeout=30)
        assert r.status_code == 204, f"DELETE {self.room}: {r.status_code} {r.text}"
        self.deleted = True


@pytest.fixture(scope="module", params=["busybox", "debian"])
def image(request, daemon, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("iso-image") / "layout")
    if request.param == "busybox":
        oci.oci_layout(path, [oci.busybox_layer()], oci.config())
    else:
        path, why = oci.debian_layout(path, workdir=None)
        if not path:
            pytest.skip(f"no Debian image: {why}")
    name = f"iso-{request.param}"
    r = requests.post(f"{daemon.url}/v1/image",
                      json={"name": name, "source": f"oci-layout:{path}"},
                      timeout=600)
    assert r.status_code == 201, r.text
    return name


@pytest.fixture
def img_sandbox(request, daemon, probe_bin, image, _postconditions):
    n = [0]

    def make(d=None):
        d = d or daemon
        if d not in _postconditions.fd_before:
            _postconditions.fd_before[d] = d.fd_count()
        n[0] += 1
        stem = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower())[:50]
        sb = ImageSandbox(d, f"{stem}-{n[0]}", probe_bin, image)
        _postconditions.sandboxes.append(sb)
        return sb

    return make


def test_img_01_uid_map_nonzero_and_unique(img_sandbox):
    ident.test_01_uid_map_nonzero_and_unique(img_sandbox)


def test_img_02_no_capabilities(img_sandbox):
    ident.test_02_no_capabilities(img_sandbox)


def test_img_03_no_new_privs_and_seccomp(img_sandbox):
    ident.test_03_no_new_privs_and_seccomp(img_sandbox)


def test_img_16_old_root_unreachable(img_sandbox):
    # an image sandbox has one overlay at "/": no /usr mount of its own
    fs.test_16_old_root_unreachable(img_sandbox)


def test_img_18_fds_and_cwd_inside(img_sandbox):
    fs.test_18_fds_and_cwd_inside(img_sandbox)


def test_img_mountinfo_names_nothing_of_the_host(img_sandbox, daemon):
    fs.test_mountinfo_names_nothing_of_the_host(img_sandbox, daemon)


def test_img_writes_stay_in_the_sandbox_layer(img_sandbox, daemon):
    """The image's layers are shared: what one sandbox changes in them
    (even deletes) is its own, and never reaches the store."""
    a, b = img_sandbox(), img_sandbox()
    lines = b.sh("cat /etc/passwd | wc -l")
    a.sh("echo mine > /bin/added; rm /bin/cat; echo x >> /etc/passwd")
    assert b.sh("test -e /bin/added || echo absent; cat /etc/passwd | wc -l") == \
        f"absent\n{lines}"
    layers = os.path.join(daemon.state_dir, "images", "layers")
    for hexdir in os.listdir(layers):
        p = os.path.join(layers, hexdir)
        if os.path.isdir(p):
            assert not os.path.exists(os.path.join(p, "bin", "added"))
            assert os.path.lexists(os.path.join(p, "bin", "cat"))


def test_img_mount_flags(img_sandbox):
    sb = img_sandbox()
    mounts = {mp: opts for mp, opts, _, _ in fs.mountinfo(sb)}
    assert {"nosuid", "nodev"} <= mounts["/"], mounts["/"]
    assert "/usr" not in mounts, "the host's /usr is mounted in an image sandbox"
    assert {"nosuid", "noexec", "ro"} <= mounts["/dev"], mounts["/dev"]
