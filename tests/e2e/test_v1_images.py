"""Images: sandboxes from OCI images (shared/spec/v1.md, "Images").

The fixtures build their images here (tests/e2e/oci.py): a busybox image
from the host's busybox-static, a multi-layer image whose upper layer
deletes and replaces files, and hostile archives. Each test checks what a
client sees (status codes, bodies, command output) and, for the hostile
ones, that nothing was written outside the daemon's image store."""
import gzip
import io
import os
import socket
import subprocess
import tarfile
import tempfile
import uuid

import pytest

import oci
from helpers import Daemon, V1, assert_error, wait_until
from wsclient import Term


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return str(tmp_path_factory.mktemp("images"))


@pytest.fixture(scope="module")
def busybox(work):
    """An OCI layout of a busybox image: two layers (busybox, then /srv)."""
    path = os.path.join(work, "busybox")
    top = oci.layer([dict(name="srv", kind="dir"),
                     dict(name="srv/hello.txt", data=b"hello from the image\n")])
    oci.oci_layout(path, [oci.busybox_layer(), top],
                   oci.config(env=["PATH=/usr/bin:/bin", "GREETING=hi there"],
                              workdir="/srv", cmd=["sh"]))
    return path


def imp(v1, name, source):
    return v1.post("/v1/image", json={"name": name, "source": source})


def ok_import(v1, name, source):
    r = imp(v1, name, source)
    assert r.status_code == 201, r.text
    return r.json()


def run(v1, sid, command=None, **body):
    if command is not None:
        body["command"] = command
    r = v1.exec_json(sid, **body)
    assert r.status_code == 200, r.text
    return r.json()


def store(daemon, *parts):
    return os.path.join(daemon.state_dir, "images", *parts)


def layer_dirs(daemon):
    return sorted(n for n in os.listdir(store(daemon, "layers"))
                  if len(n) == 64)


@pytest.fixture(scope="module")
def bb(daemon, busybox):
    """The busybox image, imported once into the module's daemon."""
    return ok_import(V1(daemon), "busybox", f"oci-layout:{busybox}")


def test_import_reports_digest_config_and_size(v1, bb):
    assert bb["name"] == "busybox"
    assert bb["digest"].startswith("sha256:") and len(bb["digest"]) == 71
    assert bb["layers"] == 2
    assert bb["sizeBytes"] >= os.path.getsize(oci.BUSYBOX)
    assert bb["config"]["env"] == ["PATH=/usr/bin:/bin", "GREETING=hi there"]
    assert bb["config"]["workingDir"] == "/srv"
    assert bb["config"]["cmd"] == ["sh"]
    assert bb["config"]["entrypoint"] is None
    assert bb["shell"] == "/bin/sh"
    assert "bash" in bb["note"]
    listed = v1.get("/v1/image").json()["images"]
    assert [i["digest"] for i in listed if i["name"] == "busybox"] == [bb["digest"]]
    info = v1.get("/v1/image/busybox").json()
    assert info["digest"] == bb["digest"] and info["sandboxes"] == 0
    assert v1.get(f"/v1/image/{bb['digest']}").json()["digest"] == bb["digest"]


def test_busybox_sandbox_runs_argv_and_sh(v1, sid, bb):
    info = v1.create(sid, image="busybox")
    assert info["image"] == {"name": "busybox", "digest": bb["digest"]}
    assert "bash" in info["note"]
    res = run(v1, sid, argv=["busybox", "echo", "argv works"])
    assert (res["exitCode"], res["stdout"]) == (0, "argv works\n")
    res = run(v1, sid, 'echo "$GREETING"; pwd; cat hello.txt; id -u')
    assert res["exitCode"] == 0, res
    assert res["stdout"] == "hi there\n/srv\nhello from the image\n0\n"
    # the daemon's /etc files in any image; the image's own passwd
    res = run(v1, sid, "cat /etc/hosts /etc/resolv.conf; hostname; whoami")
    assert "localhost" in res["stdout"] and "nameserver" in res["stdout"]
    assert res["stdout"].endswith("sandbox\nroot\n"), res
    # no host system: no /usr/bin/python3, no bash
    res = run(v1, sid, "ls /usr/bin | wc -l; test -e /bin/bash || echo nobash")
    assert res["stdout"] == "0\nnobash\n", res
    assert v1.get("/v1/image/busybox").json()["sandboxes"] == 1


def test_sh_sessions_do_not_carry_state(v1, sid, bb):
    v1.create(sid, image="busybox")
    run(v1, sid, "cd /tmp; export X=1")
    res = run(v1, sid, 'pwd; echo "x=$X"')
    assert res["stdout"] == "/srv\nx=\n", res


def test_files_survive_idle_stop_and_restart(make_daemon, busybox, new_sid):
    d = make_daemon("--sleep-after", "1s")
    v1 = V1(d)
    ok_import(v1, "bb", f"oci-layout:{busybox}")
    sid = new_sid()
    v1.create(sid, image="bb")
    run(v1, sid, "echo kept > /workspace/f; echo etc > /etc/mine; rm /srv/hello.txt")
    assert wait_until(lambda: not v1.running(sid), 30), "never idled out"
    res = run(v1, sid, "cat /workspace/f /etc/mine; ls /srv | wc -l")
    assert res["stdout"] == "kept\netc\n0\n", res
    d.restart()
    res = run(v1, sid, "cat /workspace/f /etc/mine; echo $GREETING")
    assert res["stdout"] == "kept\netc\nhi there\n", res
    assert [i["name"] for i in v1.get("/v1/image").json()["images"]] == ["bb"]


def test_a_restart_reads_each_sandboxs_image_when_needed(make_daemon, busybox,
                                                        work, new_sid):
    """A restart reads no sandbox's files; the image GC after it waits until
    every sandbox's image is known: an image whose name moved on, used only
    by stopped sandboxes nobody has asked for since, stays, and each gets
    its image's env and cwd (the default session of an image without bash
    is not saved: test_sh_sessions_do_not_carry_state)."""
    d = make_daemon()
    v1 = V1(d)
    old = ok_import(v1, "bb-moving", f"oci-layout:{busybox}")
    a, b = new_sid(), new_sid()
    v1.create(a, image="bb-moving")
    v1.create(b, image="bb-moving")
    run(v1, a, "echo mine > /workspace/f")
    # the name moves on: the old image has none, a and b use it
    path = os.path.join(work, "bb-moved")
    oci.oci_layout(path, [oci.busybox_layer(),
                          oci.layer([dict(name="mark", data=b"new\n")])],
                   oci.config(env=["PATH=/usr/bin:/bin"]))
    new = ok_import(v1, "bb-moving", f"oci-layout:{path}")
    assert new["digest"] != old["digest"]
    gcs = d.log_text().count("event=images-gc-after-load")
    d.restart()
    assert wait_until(lambda: d.log_text().count("event=images-gc-after-load")
                      > gcs, 60), d.log_tail()
    assert os.path.exists(store(d, "meta", old["digest"][7:] + ".json"))
    listed = {s["id"]: s for s in v1.get("/v1/sandbox").json()["sandboxes"]}
    assert listed[b]["image"]["digest"] == old["digest"], listed[b]
    assert listed[b]["state"] == "stopped"
    res = run(v1, a, 'pwd; cat /workspace/f; echo "$GREETING"')
    assert res["stdout"] == "/srv\nmine\nhi there\n", res
    res = run(v1, b, 'pwd; echo "$GREETING"; test -e /mark || echo old')
    assert res["stdout"] == "/srv\nhi there\nold\n", res


def test_fork_keeps_the_image(v1, new_sid, bb):
    a, b = new_sid(), new_sid()
    v1.create(a, image="busybox")
    run(v1, a, "echo forked > /workspace/f")
    r = v1.post(f"/v1/sandbox/{a}/fork", json={"id": b})
    assert r.status_code == 201, r.text
    res = run(v1, b, "cat /workspace/f; echo $GREETING; test -e /bin/bash || echo nobash")
    assert res["stdout"] == "forked\nhi there\nnobash\n", res
    assert v1.info(b)["image"]["digest"] == bb["digest"]
    assert v1.get("/v1/image/busybox").json()["sandboxes"] >= 2


def test_image_user_runs_commands_builtins_stay_root(v1, sid, work):
    path = os.path.join(work, "user")
    oci.oci_layout(path, [oci.busybox_layer()],
                   oci.config(user="app", workdir="/home/app"))
    img = ok_import(v1, "bb-user", f"oci-layout:{path}")
    assert (img["config"]["user"], img["config"]["uid"],
            img["config"]["gid"]) == ("app", 1000, 1000)
    v1.create(sid, image="bb-user")
    res = run(v1, sid, "id -u; id -g; whoami; pwd; touch mine && echo wrote")
    assert res["stdout"] == "1000\n1000\napp\n/home/app\nwrote\n", res
    # file operations are the daemon's own (root in the sandbox)
    r = v1.put(f"/v1/sandbox/{sid}/file/x.txt", data=b"abc")
    assert r.status_code in (200, 201, 204), r.text
    assert run(v1, sid, "cat /workspace/x.txt")["stdout"] == "abc"


def test_terminal_runs_the_images_shell_as_its_user(daemon, v1, sid, work):
    # busybox has no bash: the terminal's shell is the image's sh
    path = os.path.join(work, "user-term")
    oci.oci_layout(path, [oci.busybox_layer()],
                   oci.config(user="app", workdir="/home/app"))
    ok_import(v1, "bb-term", f"oci-layout:{path}")
    v1.create(sid, image="bb-term")
    t = Term(f"ws://127.0.0.1:{daemon.port}/v1/sandbox/{sid}/pty")
    try:
        t.wait_msg("ready")
        # the marker is printed by the shell, never in what was typed
        t.run('echo "u=$(id -u):$(id -g) $((6*7))"', b"u=1000:1000 42")
    finally:
        t.close()


def test_cloudflare_face_runs_the_images_shell(v1, sid, bb):
    """The container protocol's sessionless commands, background processes
    and command listing run the image's sh when it has no bash."""
    v1.create(sid, image="busybox")
    base = f"/v1/sandbox/{sid}/api"
    r = v1.post(f"{base}/execute", json={"command": "echo $((6*7)) fresh",
                                         "sessionId": "__DISABLE_SESSION__"})
    assert r.status_code == 200, r.text
    assert r.json()["stdout"] == "42 fresh\n" and r.json()["exitCode"] == 0
    r = v1.post(f"{base}/process/start",
                json={"command": "echo $((7*6)) > /workspace/bg.txt"})
    assert r.status_code == 200, r.text
    assert wait_until(lambda: v1.get(f"/v1/sandbox/{sid}/file/bg.txt").content == b"42\n",
                      120)
    r = v1.get(f"{base}/commands")
    assert r.status_code == 200, r.text
    assert "busybox" in r.json()["availableCommands"], r.text[:300]


def test_a_snapshot_keeps_its_image(daemon, v1, new_sid, work):
    # an image of its own (no other name may keep it)
    path = os.path.join(work, "snap-image")
    oci.oci_layout(path, [oci.busybox_layer(),
                          oci.layer([dict(name="mark", data=b"snap-image\n")])],
                   oci.config(env=["PATH=/usr/bin:/bin", "GREETING=hi there"]))
    img = ok_import(v1, "bb-snap", f"oci-layout:{path}")
    meta = store(daemon, "meta", img["digest"][7:] + ".json")
    a, b = new_sid(), new_sid()
    v1.create(a, image="bb-snap")
    run(v1, a, "echo saved > /workspace/f")
    r = v1.post(f"/v1/sandbox/{a}/snapshot", json={})
    assert r.status_code == 201, r.text
    snap = r.json()["id"]
    assert v1.delete(f"/v1/sandbox/{a}").status_code in (200, 204)
    # the name goes; the image stays while a snapshot needs it, also
    # after a restart (the snapshot's files say which image)
    assert v1.delete("/v1/image/bb-snap").status_code == 204
    daemon.restart()
    assert os.path.exists(meta)
    r = v1.post("/v1/sandbox", json={"id": b, "fromSnapshot": snap})
    assert r.status_code == 201, r.text
    res = run(v1, b, "cat /workspace/f /mark; echo $GREETING")
    assert res["stdout"] == "saved\nsnap-image\nhi there\n", res
    # the last user gone, so is the image
    assert v1.delete(f"/v1/sandbox/{b}").status_code in (200, 204)
    assert v1.delete(f"/v1/snapshot/{snap}").status_code in (200, 204)
    assert wait_until(lambda: not os.path.exists(meta), 30), "image kept"


def test_unknown_user_fails_the_import(v1, work):
    path = os.path.join(work, "nouser")
    oci.oci_layout(path, [oci.busybox_layer(user=False)], oci.config(user="ghost"))
    doc = assert_error(imp(v1, "nouser", f"oci-layout:{path}"), 400, "invalid_image")
    assert "ghost" in doc["error"]


def test_whiteouts_and_opaque_dirs(v1, sid, work):
    base = oci.layer([
        dict(name="data", kind="dir"),
        dict(name="data/gone", data=b"old\n"),
        dict(name="data/replaced", data=b"old\n"),
        dict(name="data/kept", data=b"kept\n"),
        dict(name="opq", kind="dir"),
        dict(name="opq/old1", data=b"1"),
        dict(name="opq/old2", data=b"2"),
        dict(name="data/hard", data=b"linked\n"),
        dict(name="data/hard2", kind="hardlink", target="data/hard"),
        dict(name="data/dev", kind="chr", target=(1, 3)),
    ])
    upper = oci.layer([
        dict(name="data", kind="dir"),
        dict(name="data/.wh.gone"),
        dict(name="data/replaced", data=b"new\n"),
        dict(name="opq", kind="dir"),
        dict(name="opq/.wh..wh..opq"),
        dict(name="opq/fresh", data=b"f"),
    ])
    path = os.path.join(work, "layers")
    oci.oci_layout(path, [oci.busybox_layer(), base, upper], oci.config())
    assert ok_import(v1, "multi", f"oci-layout:{path}")["layers"] == 3
    v1.create(sid, image="multi")
    res = run(v1, sid, "ls /data; cat /data/replaced; ls /opq; "
                       "stat -c %h /data/hard; cat /data/hard2")
    assert res["stdout"] == "hard\nhard2\nkept\nreplaced\nnew\nfresh\n2\nlinked\n", res


def test_layers_are_shared_and_unpacked_once(v1, daemon, busybox, bb):
    before = layer_dirs(daemon)
    again = ok_import(v1, "busybox-again", f"oci-layout:{busybox}")
    assert again["digest"] == bb["digest"]
    assert layer_dirs(daemon) == before
    names = v1.get("/v1/image/busybox").json()["names"]
    assert sorted(names) == ["busybox", "busybox-again"]


def test_docker_and_oci_archives_and_upload(v1, sid, work, daemon):
    layers = [oci.busybox_layer(),
              oci.layer([dict(name="etc/from", data=b"archive\n")])]
    dk = os.path.join(work, "img-docker.tar")
    digest = oci.docker_archive(dk, layers, oci.config(env=["K=docker"]),
                                tag="demo:1")
    got = ok_import(v1, "from-docker", f"docker-archive:{dk}:demo:1")
    assert got["digest"] == digest
    assert got["config"]["env"] == ["K=docker"]
    lay = os.path.join(work, "img-oci")
    oci.oci_layout(lay, layers, oci.config(env=["K=oci"]), tag="v2")
    oa = os.path.join(work, "img-oci.tar")
    oci.tar_dir(lay, oa)
    assert ok_import(v1, "from-oci-archive", f"oci-archive:{oa}:v2")[
        "config"]["env"] == ["K=oci"]
    with open(dk, "rb") as f:
        r = v1.put("/v1/image/uploaded", data=f)
    assert r.status_code == 201, r.text
    assert r.json()["digest"] == digest and r.json()["name"] == "uploaded"
    v1.create(sid, image="uploaded")
    assert run(v1, sid, "cat /etc/from; echo $K")["stdout"] == "archive\ndocker\n"
    assert os.listdir(store(daemon, "tmp")) == []


def test_dir_source(v1, sid, work, daemon):
    """dir:/path: a root filesystem directory (debootstrap's) as one layer;
    the same tree again is the same image."""
    root = os.path.join(work, "rootfs-dir")
    os.makedirs(root)
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(oci.busybox_layer()))) as t:
        t.extractall(root)
    os.mkfifo(os.path.join(root, "tmp", "fifo"))
    img = ok_import(v1, "from-dir", f"dir:{root}")
    assert img["layers"] == 1 and img["shell"] == "/bin/sh"
    assert ok_import(v1, "from-dir-2", f"dir:{root}")["digest"] == img["digest"]
    v1.create(sid, image="from-dir")
    res = run(v1, sid, "id -u app; stat -c %U /home/app; test -p /tmp/fifo && echo fifo")
    assert res["stdout"] == "1000\napp\nfifo\n", res
    assert_error(imp(v1, "x", f"dir:{root}/bin/busybox"), 400, "invalid_request")


def test_upload_cut_short_leaves_nothing(v1, daemon, work):
    """A client gone mid-upload: the import stops, its child and files go,
    no fd stays open, and the name is not made."""
    fds = daemon.fd_count()
    data = oci.busybox_layer(user=False)
    s = socket.create_connection(("127.0.0.1", daemon.port))
    s.sendall(b"PUT /v1/image/cut HTTP/1.1\r\nHost: x\r\n"
              b"Content-Length: %d\r\n\r\n" % (len(data) * 10) + data)
    s.close()
    assert wait_until(lambda: daemon.fd_count() <= fds, 10), "the daemon leaks fds"
    assert wait_until(lambda: os.listdir(store(daemon, "tmp")) == [], 10)
    assert_error(v1.get("/v1/image/cut"), 404, "image_not_found")
    assert v1.get("/v1/image").status_code == 200


def test_bad_requests(v1, sid, work, busybox):
    assert_error(v1.post("/v1/sandbox", json={"id": sid, "image": "nope"}),
                 404, "image_not_found")
    assert_error(v1.post("/v1/sandbox", json={"id": sid, "image": 3}),
                 400, "invalid_request")
    assert_error(imp(v1, "x", "http://example.com/img"), 400, "invalid_request")
    assert_error(imp(v1, "x", f"oci-layout:{work}/missing"), 400, "invalid_request")
    assert_error(imp(v1, "../x", f"oci-layout:{busybox}"), 400, "invalid_request")
    assert_error(imp(v1, "x", f"oci-layout:{busybox}:notatag"), 400, "invalid_image")
    assert_error(v1.get("/v1/image/nope"), 404, "image_not_found")
    assert_error(v1.delete("/v1/image/nope"), 404, "image_not_found")
    notimg = os.path.join(work, "notimg.tar")
    with open(notimg, "wb") as f:
        f.write(b"this is not a tar archive at all" * 100)
    assert_error(imp(v1, "x", f"oci-archive:{notimg}"), 400, "invalid_image")


def test_blob_not_matching_its_digest_is_refused(v1, work):
    path = os.path.join(work, "corrupt")
    oci.oci_layout(path, [oci.busybox_layer()], oci.config())
    blobs = os.path.join(path, "blobs", "sha256")
    big = max(os.listdir(blobs), key=lambda n: os.path.getsize(os.path.join(blobs, n)))
    with open(os.path.join(blobs, big), "r+b") as f:
        f.seek(100)
        f.write(b"tampered")
    doc = assert_error(imp(v1, "corrupt", f"oci-layout:{path}"), 400, "invalid_image")
    assert "digest" in doc["error"]


def test_delete_counts_references(v1, new_sid, work, daemon):
    path = os.path.join(work, "todelete")
    oci.oci_layout(path, [oci.layer([dict(name="bin", kind="dir"),
                                      dict(name="only-here", data=b"x")])],
                   oci.config())
    before = set(layer_dirs(daemon))
    img = ok_import(v1, "todelete", f"oci-layout:{path}")
    mine = set(layer_dirs(daemon)) - before
    assert len(mine) == 1
    a, b = new_sid(), new_sid()
    v1.create(a, image="todelete")
    v1.create(b, image=img["digest"])
    assert v1.get("/v1/image/todelete").json()["sandboxes"] == 2
    doc = assert_error(v1.delete("/v1/image/todelete"), 409, "image_in_use")
    assert "2 sandboxes" in doc["error"]
    assert v1.delete(f"/v1/sandbox/{a}").status_code == 204
    assert_error(v1.delete("/v1/image/todelete"), 409, "image_in_use")
    assert v1.delete(f"/v1/sandbox/{b}").status_code == 204
    assert v1.delete("/v1/image/todelete").status_code == 204
    assert_error(v1.get("/v1/image/todelete"), 404, "image_not_found")
    assert not mine & set(layer_dirs(daemon))
    assert not os.path.exists(store(daemon, "meta", img["digest"][7:] + ".json"))


def test_only_the_operator_imports(make_daemon, busybox):
    fd, path = tempfile.mkstemp(prefix="sbx-e2e-tokens-", dir="/tmp")
    with os.fdopen(fd, "w") as f:
        f.write("tenant-token-0123456789 alice\n"
                "operator-token-0123456789 ops operator\n")
    try:
        d = make_daemon("--tokens", path)
        alice, ops = V1(d, "tenant-token-0123456789"), V1(d, "operator-token-0123456789")
        assert_error(imp(alice, "bb", f"oci-layout:{busybox}"), 403, "forbidden")
        assert_error(alice.put("/v1/image/bb", data=b"x"), 403, "forbidden")
        ok_import(ops, "bb", f"oci-layout:{busybox}")
        assert_error(alice.delete("/v1/image/bb"), 403, "forbidden")
        assert [i["name"] for i in alice.get("/v1/image").json()["images"]] == ["bb"]
        alice.create("mine", image="bb")
        assert run(alice, "mine", "echo $GREETING")["stdout"] == "hi there\n"
    finally:
        os.unlink(path)


# ---- hostile archives ---------------------------------------------------

def _sparse_tar(work, canary):
    """A GNU tar holding a 1 TB sparse file (a few KB on disk)."""
    src = os.path.join(work, "sparse-src")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, "huge"), "wb") as f:
        f.truncate(1 << 40)
    out = os.path.join(work, "sparse.tar")
    subprocess.run(["tar", "-S", "--format=gnu", "-C", src, "-cf", out, "huge"],
                   check=True)
    with open(out, "rb") as f:
        return f.read()


def hostile_layers(work, canary):
    """name -> layer bytes; each would write at canary (an absolute host path
    outside the store) if the daemon followed it."""
    rel = os.path.relpath(canary, "/")
    dotdots = "../" * 12 + rel
    cdir = os.path.dirname(canary)
    return {
        "dotdot": oci.layer([dict(name=dotdots, data=b"pwned")]),
        "absolute": oci.layer([dict(name=canary, data=b"pwned")]),
        "symlink-parent": oci.layer([
            dict(name="esc", kind="symlink", target=cdir),
            dict(name="esc/" + os.path.basename(canary), data=b"pwned")]),
        "symlink-parent-relative": oci.layer([
            dict(name="esc", kind="symlink", target="../" * 12 + cdir.lstrip("/")),
            dict(name="esc/" + os.path.basename(canary), data=b"pwned")]),
        "hardlink-outside": oci.layer([
            dict(name="h", kind="hardlink", target="../" * 12 + "etc/hostname")]),
        "whiteout-dotdot": oci.layer([dict(name="a/.wh..."),]),
        "sparse-1tb": _sparse_tar(work, canary),
    }


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink-parent",
                                  "symlink-parent-relative", "hardlink-outside",
                                  "whiteout-dotdot", "sparse-1tb"])
def test_hostile_layer_is_refused_and_writes_nothing_outside(v1, daemon, work, kind):
    canary_dir = tempfile.mkdtemp(prefix="sbx-e2e-canary-", dir="/tmp")
    canary = os.path.join(canary_dir, "pwned")
    try:
        lay = hostile_layers(work, canary)[kind]
        path = os.path.join(work, "hostile-" + kind)
        oci.oci_layout(path, [lay], oci.config())
        before = layer_dirs(daemon)
        fds = daemon.fd_count()
        r = imp(v1, "hostile-" + kind, f"oci-layout:{path}")
        if kind == "sparse-1tb":
            assert_error(r, 413, "image_too_large")
        else:
            assert_error(r, 400, "invalid_image")
        assert not os.path.exists(canary)
        assert os.listdir(canary_dir) == []
        assert layer_dirs(daemon) == before
        assert [n for n in os.listdir(store(daemon, "layers")) if ".tmp-" in n] == []
        assert_error(v1.get(f"/v1/image/hostile-{kind}"), 404, "image_not_found")
        assert wait_until(lambda: daemon.fd_count() <= fds, 5), "the daemon leaks fds"
    finally:
        subprocess.run(["rm", "-rf", canary_dir])


def test_hostile_outer_archive_is_refused(v1, daemon, work):
    canary_dir = tempfile.mkdtemp(prefix="sbx-e2e-canary-", dir="/tmp")
    try:
        bad = os.path.join(work, "outer.tar")
        with open(bad, "wb") as f:
            f.write(oci.layer([dict(name="index.json", data=b"{}"),
                               dict(name="../" * 12 + canary_dir.lstrip("/") + "/x",
                                    data=b"pwned")], compress=False))
        assert_error(imp(v1, "outer", f"oci-archive:{bad}"), 400, "invalid_image")
        fds = daemon.fd_count()
        with open(bad, "rb") as f:
            assert_error(v1.put("/v1/image/outer", data=f), 400, "invalid_image")
        assert wait_until(lambda: daemon.fd_count() <= fds, 5), "the daemon leaks fds"
        assert os.listdir(canary_dir) == []
    finally:
        subprocess.run(["rm", "-rf", canary_dir])
