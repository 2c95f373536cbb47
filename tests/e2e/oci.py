"""Builders of OCI images for the image tests: layers as tar archives,
OCI image layouts, OCI archives and `docker save` archives, written by hand
(the format is small: a few JSON files and blobs named by their sha256).

The busybox image is assembled from the host's Debian `busybox-static`
(/bin/busybox, a static binary) and its applets as symlinks."""
import gzip
import hashlib
import io
import json
import os
import subprocess
import tarfile

BUSYBOX = "/bin/busybox"
APPLETS = ["sh", "ls", "cat", "echo", "id", "whoami", "pwd", "env", "touch",
           "mkdir", "rm", "sleep", "true", "false", "grep", "head", "wc",
           "stat", "printf", "test", "hostname", "readlink", "mount", "ps",
           "uname", "chmod", "ln", "cp", "mv", "dd", "find", "sort", "setsid",
           "base64", "gunzip", "cut", "tr"]


def _add(t, name, kind="file", data=b"", mode=None, uid=0, gid=0,
         target=None):
    ti = tarfile.TarInfo(name)
    ti.uid, ti.gid = uid, gid
    ti.mtime = 1700000000
    if kind == "file":
        ti.type = tarfile.REGTYPE
        ti.size = len(data)
        ti.mode = 0o644 if mode is None else mode
        t.addfile(ti, io.BytesIO(data))
        return
    if kind == "dir":
        ti.type = tarfile.DIRTYPE
        ti.mode = 0o755 if mode is None else mode
    elif kind == "symlink":
        ti.type = tarfile.SYMTYPE
        ti.linkname = target
        ti.mode = 0o777
    elif kind == "hardlink":
        ti.type = tarfile.LNKTYPE
        ti.linkname = target
        ti.mode = 0o644 if mode is None else mode
    elif kind == "chr":
        ti.type = tarfile.CHRTYPE
        ti.devmajor, ti.devminor = target
        ti.mode = 0o666
    t.addfile(ti)


def layer(entries, compress=True):
    """entries: tuples (name, kind, data/target, mode) or dicts for _add.
    Returns the layer's bytes (gzip unless compress is False)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            _add(t, **e)
    data = raw.getvalue()
    return gzip.compress(data, mtime=0) if compress else data


def busybox_layer(user=True):
    with open(BUSYBOX, "rb") as f:
        bb = f.read()
    ents = [dict(name=d, kind="dir") for d in
            ("bin", "etc", "root", "tmp", "home", "usr", "usr/bin", "var")]
    ents[3]["mode"] = 0o1777
    ents.append(dict(name="bin/busybox", data=bb, mode=0o755))
    for a in APPLETS:
        ents.append(dict(name=f"bin/{a}", kind="symlink", target="busybox"))
    passwd = "root:x:0:0:root:/root:/bin/sh\n"
    group = "root:x:0:\n"
    if user:
        passwd += "app:x:1000:1000:app:/home/app:/bin/sh\n"
        group += "app:x:1000:\n"
        ents.append(dict(name="home/app", kind="dir", uid=1000, gid=1000))
    ents.append(dict(name="etc/passwd", data=passwd.encode()))
    ents.append(dict(name="etc/group", data=group.encode()))
    return layer(ents)


def config(env=None, workdir=None, user=None, cmd=None, entrypoint=None):
    c = {"Env": env or ["PATH=/usr/local/bin:/usr/bin:/bin"]}
    if workdir:
        c["WorkingDir"] = workdir
    if user:
        c["User"] = user
    if cmd:
        c["Cmd"] = cmd
    if entrypoint:
        c["Entrypoint"] = entrypoint
    return c


def _sha(b):
    return hashlib.sha256(b).hexdigest()


def _config_blob(layers, cfg):
    diff_ids = []
    for l in layers:
        raw = gzip.decompress(l) if l[:2] == b"\x1f\x8b" else l
        diff_ids.append("sha256:" + _sha(raw))
    return json.dumps({"architecture": "amd64", "os": "linux",
                       "config": cfg,
                       "rootfs": {"type": "layers", "diff_ids": diff_ids}}
                      ).encode()


def oci_layout(path, layers, cfg, tag="latest", extra_tags=()):
    """Writes an OCI image layout at path (a new directory)."""
    os.makedirs(os.path.join(path, "blobs", "sha256"), exist_ok=True)

    def blob(b):
        h = _sha(b)
        with open(os.path.join(path, "blobs", "sha256", h), "wb") as f:
            f.write(b)
        return "sha256:" + h

    cb = _config_blob(layers, cfg)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": blob(cb), "size": len(cb)},
        "layers": [{"mediaType":
                    "application/vnd.oci.image.layer.v1.tar+gzip"
                    if l[:2] == b"\x1f\x8b" else
                    "application/vnd.oci.image.layer.v1.tar",
                    "digest": blob(l), "size": len(l)} for l in layers],
    }
    mb = json.dumps(manifest).encode()
    md = blob(mb)
    index = {"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json",
         "digest": md, "size": len(mb),
         "annotations": {"org.opencontainers.image.ref.name": t}}
        for t in (tag, *extra_tags)]}
    with open(os.path.join(path, "index.json"), "w") as f:
        json.dump(index, f)
    with open(os.path.join(path, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    return md


def tar_dir(src, dst):
    """An archive of src's contents (what an OCI archive is)."""
    subprocess.run(["tar", "-C", src, "-cf", dst, "."], check=True)


def docker_archive(path, layers, cfg, tag="img:latest"):
    """Writes a `docker save` archive (the classic layout: <id>/layer.tar,
    <config>.json, manifest.json) at path."""
    with tarfile.open(path, "w") as t:
        def put(name, b):
            ti = tarfile.TarInfo(name)
            ti.size = len(b)
            ti.mtime = 1700000000
            t.addfile(ti, io.BytesIO(b))
        names = []
        for l in layers:
            raw = gzip.decompress(l) if l[:2] == b"\x1f\x8b" else l
            d = _sha(raw)
            ti = tarfile.TarInfo(d)
            ti.type = tarfile.DIRTYPE
            ti.mode = 0o755
            t.addfile(ti)
            put(f"{d}/layer.tar", raw)
            names.append(f"{d}/layer.tar")
        cb = _config_blob(layers, cfg)
        cname = _sha(cb) + ".json"
        put(cname, cb)
        put("manifest.json", json.dumps(
            [{"Config": cname, "RepoTags": [tag], "Layers": names}]).encode())
    return "sha256:" + _sha(_config_blob(layers, cfg))


# ---- a Debian image (mmdebstrap from the Debian mirror), cached ------------

DEBIAN_CACHE = os.environ.get("SBX_IMAGE_CACHE", "/var/cache/sandboxd-tests")
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"


def debian_rootfs_tar():
    """The path of a Debian minbase root filesystem as a tar, made once by
    mmdebstrap and kept in DEBIAN_CACHE for later test sessions (it takes
    minutes). Returns (path, None), or (None, why) when it cannot be made
    here (no mmdebstrap, the mirror unreachable)."""
    import shutil
    import urllib.request
    path = os.path.join(DEBIAN_CACHE, f"debian-{DEBIAN_SUITE}-minbase.tar")
    if os.path.exists(path):
        return path, None
    if not shutil.which("mmdebstrap"):
        return None, "mmdebstrap is not installed (scripts/install-deps)"
    try:
        urllib.request.urlopen(f"{DEBIAN_MIRROR}/dists/{DEBIAN_SUITE}/Release",
                               timeout=15).read(64)
    except OSError as e:
        return None, f"the Debian mirror {DEBIAN_MIRROR} is unreachable: {e}"
    os.makedirs(DEBIAN_CACHE, exist_ok=True)
    tmp = path + f".tmp-{os.getpid()}"
    try:
        subprocess.run(["mmdebstrap", "--variant=minbase", "--mode=root",
                        "--format=tar", DEBIAN_SUITE, tmp, DEBIAN_MIRROR],
                       check=True, timeout=1800, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    except (subprocess.SubprocessError, OSError) as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        err = getattr(e, "stderr", b"") or b""
        return None, f"mmdebstrap failed: {e} {err[-500:].decode(errors='replace')}"
    os.rename(tmp, path)
    return path, None


def debian_layout(path, env=None, workdir="/root"):
    """An OCI layout of the cached Debian root filesystem (one uncompressed
    layer); (None, why) when it cannot be made."""
    tar, why = debian_rootfs_tar()
    if not tar:
        return None, why
    with open(tar, "rb") as f:
        lay = f.read()
    oci_layout(path, [lay], config(env=env or [
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG=C.UTF-8"], workdir=workdir, cmd=["bash"]))
    return path, None
