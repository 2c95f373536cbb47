"""/v1 files under /workspace: raw bytes both ways (streamed, 1 GiB within a
small daemon RSS), listings, deletes, persist/hydrate tars, paths and
symlinks that try to leave /workspace, interrupted and concurrent uploads."""
import base64
import fcntl
import hashlib
import http.client
import io
import os
import socket
import tarfile
import threading
import time

import pytest
import requests

from helpers import (V1, RssSampler, assert_error, assert_raw_error, vm_rss_kib,
                     wait_until)

# ASan's shadow memory and quarantine grow a sanitized daemon's RSS with
# every byte it moves: the bound is for the real build (make test-asan sets
# SBX_SANITIZED), where it is the acceptance criterion.
RSS_LIMIT_KIB = (1024 if os.environ.get("SBX_SANITIZED") else 64) * 1024
LOOP_SET_DIRECT_IO = 0x4C08  # linux/loop.h


def file_url(sid, path):
    return f"/v1/sandbox/{sid}/file/{path}"


def listing(v1, sid, path):
    r = v1.get(file_url(sid, path))
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    return {e["name"]: e for e in r.json()["entries"]}


# --- reading and writing ----------------------------------------------------------

def test_put_creates_then_replaces_and_get_returns_the_bytes(v1, sid):
    blob = bytes(range(256)) * 1000 + b"\0\r\n\xff"
    r = v1.put(file_url(sid, "data.bin"), data=blob)
    assert r.status_code == 201 and r.content == b"", r.text
    r = v1.get(file_url(sid, "data.bin"))
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/octet-stream"
    assert r.headers["Content-Length"] == str(len(blob))
    assert r.content == blob
    r = v1.put(file_url(sid, "data.bin"), data=b"second")
    assert r.status_code == 204 and r.content == b"", r.text
    assert v1.get(file_url(sid, "data.bin")).content == b"second"
    # the sandbox sees the same file
    assert v1.sh(sid, "cat /workspace/data.bin") == "second"


def test_empty_file(v1, sid):
    assert v1.put(file_url(sid, "empty"), data=b"").status_code == 201
    r = v1.get(file_url(sid, "empty"))
    assert r.status_code == 200 and r.content == b""
    assert r.headers["Content-Length"] == "0"


def test_put_creates_parent_directories(v1, sid):
    assert v1.put(file_url(sid, "a/b/c/deep.txt"), data=b"deep").status_code == 201
    assert v1.sh(sid, "cat /workspace/a/b/c/deep.txt; stat -c %F /workspace/a/b") \
        == "deepdirectory\n"


def test_put_keeps_the_mode_of_a_replaced_file(v1, sid):
    v1.put(file_url(sid, "run.sh"), data=b"#!/bin/sh\necho one\n")
    v1.sh(sid, "chmod 750 /workspace/run.sh")
    assert v1.put(file_url(sid, "run.sh"), data=b"#!/bin/sh\necho two\n").status_code == 204
    assert v1.sh(sid, "stat -c %a /workspace/run.sh; /workspace/run.sh") == "750\ntwo\n"


def test_get_reads_files_written_in_the_sandbox(v1, sid):
    v1.sh(sid, "printf 'from exec' > /workspace/x.txt")
    assert v1.get(file_url(sid, "x.txt")).content == b"from exec"
    # an absolute path inside /workspace names the same file
    status, _, body = v1.d.raw("GET", file_url(sid, "/workspace/x.txt"))
    assert (status, body) == (200, b"from exec")


def test_missing_file_is_404(v1, sid):
    assert_error(v1.get(file_url(sid, "nope.txt")), 404, "file_not_found")
    assert_error(v1.get(file_url(sid, "no/such/dir/f")), 404, "file_not_found")
    v1.put(file_url(sid, "plain"), data=b"x")
    assert_error(v1.get(file_url(sid, "plain/below")), 404, "file_not_found")


def test_directory_listing(v1, sid):
    v1.put(file_url(sid, "dir/f.txt"), data=b"12345")
    v1.sh(sid, "cd /workspace/dir && mkdir sub && ln -s f.txt link && mkfifo pipe "
               "&& chmod 600 f.txt")
    entries = listing(v1, sid, "dir")
    assert set(entries) == {"f.txt", "sub", "link", "pipe"}, entries
    assert {n: e["type"] for n, e in entries.items()} == {
        "f.txt": "file", "sub": "directory", "link": "symlink", "pipe": "other"}
    f = entries["f.txt"]
    assert set(f) == {"name", "type", "size", "mode", "mtime"}, f
    assert f["size"] == 5 and f["mode"] == 0o600, f
    assert f["mtime"].endswith("Z") and f["mtime"][:2] == "20", f
    assert entries["sub"]["mode"] == 0o755
    assert entries["link"]["size"] == len("f.txt")
    # the link itself resolves inside /workspace: it reads as its target
    assert v1.get(file_url(sid, "dir/link")).content == b"12345"


def test_get_of_a_fifo_answers_at_once(v1, sid):
    """A FIFO is neither a file nor a directory: reading it must not wait
    for a writer that never comes."""
    v1.sh(sid, "mkfifo /workspace/fifo")
    t0 = time.monotonic()
    try:
        r = v1.get(file_url(sid, "fifo"), timeout=5)
    except requests.exceptions.ReadTimeout:
        pytest.fail(f"GET of a FIFO got no answer within {time.monotonic() - t0:.1f} s")
    assert_error(r, 400, "invalid_request")


def test_put_without_content_length_is_411(v1, sid):
    """A chunked upload is refused. The daemon may answer as soon as the
    headers are in (and close), or after the body: both are read."""
    path = file_url(sid, "chunked.txt")
    conn = http.client.HTTPConnection("127.0.0.1", v1.d.port, timeout=2)
    try:
        conn.putrequest("PUT", path)
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        try:
            resp = conn.getresponse()
        except (TimeoutError, socket.timeout):  # it waits for the body: send it
            conn.sock.settimeout(10)
            conn.send(b"8\r\nchunked \r\n4\r\nbody\r\n0\r\n\r\n")
            resp = conn.getresponse()
        status, body = resp.status, resp.read()
    finally:
        conn.close()
    assert_raw_error(status, None, body, 411, "invalid_request")
    assert_error(v1.get(file_url(sid, "chunked.txt")), 404, "file_not_found")


def test_put_onto_a_directory_or_workspace_is_400(v1, sid):
    v1.sh(sid, "mkdir -p /workspace/adir")
    assert_error(v1.put(file_url(sid, "adir"), data=b"x"), 400, "invalid_request")
    assert_raw_error(*v1.d.raw("PUT", file_url(sid, "."), body=b"x"), 400, "invalid_request")


def test_delete(v1, sid):
    v1.put(file_url(sid, "del.txt"), data=b"x")
    r = v1.delete(file_url(sid, "del.txt"))
    assert r.status_code == 204 and r.content == b""
    assert_error(v1.get(file_url(sid, "del.txt")), 404, "file_not_found")
    assert_error(v1.delete(file_url(sid, "del.txt")), 404, "file_not_found")


def test_delete_directories(v1, sid):
    v1.put(file_url(sid, "tree/a/b.txt"), data=b"x")
    v1.sh(sid, "mkdir /workspace/emptydir")
    assert v1.delete(file_url(sid, "emptydir")).status_code == 204
    assert_error(v1.delete(file_url(sid, "tree")), 409, "conflict")
    assert v1.get(file_url(sid, "tree/a/b.txt")).content == b"x"
    assert v1.delete(file_url(sid, "tree") + "?recursive=1").status_code == 204
    assert_error(v1.get(file_url(sid, "tree")), 404, "file_not_found")
    assert v1.sh(sid, "ls -A /workspace") == ""


def test_delete_of_a_symlink_removes_the_link_only(v1, sid):
    v1.put(file_url(sid, "target.txt"), data=b"t")
    v1.sh(sid, "ln -s target.txt /workspace/l; ln -s / /workspace/rootlink")
    assert v1.delete(file_url(sid, "l")).status_code == 204
    assert v1.delete(file_url(sid, "rootlink")).status_code == 204
    assert v1.sh(sid, "ls -A /workspace") == "target.txt\n"
    assert v1.sh(sid, "test -x /bin/sh && test -d /etc && echo intact") == "intact\n"


def test_workspace_itself_cannot_be_deleted(v1, sid):
    v1.put(file_url(sid, "stay.txt"), data=b"x")
    for path in (".", "./", "a/.."):
        assert_raw_error(*v1.d.raw("DELETE", file_url(sid, path) + "?recursive=1"),
                         403, "path_outside_workspace")
    assert v1.get(file_url(sid, "stay.txt")).content == b"x"


# --- paths that leave /workspace ------------------------------------------------------

@pytest.mark.parametrize("path", [
    "..", "../etc/passwd", "a/../../etc/passwd", "%2e%2e/etc/passwd",
    "a/%2E%2E/%2e%2e/etc/passwd", "/etc/passwd", "/workspace/../etc/passwd",
])
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_dot_dot_and_absolute_paths_are_403(v1, sid, path, method):
    v1.sh(sid, "true")
    st, h, body = v1.d.raw(method, file_url(sid, path), body=b"pwn" if method == "PUT" else b"")
    assert_raw_error(st, h, body, 403, "path_outside_workspace")
    assert v1.sh(sid, "cat /etc/passwd") != "pwn"


@pytest.fixture
def shadow():
    """The host's /etc/shadow: content hash and stat, to check it is untouched."""
    def snap():
        st = os.stat("/etc/shadow")
        with open("/etc/shadow", "rb") as f:
            return hashlib.sha256(f.read()).hexdigest(), st.st_mtime_ns, st.st_ino, st.st_size
    before = snap()
    yield
    assert snap() == before, "the host's /etc/shadow changed"


def test_symlink_to_root(v1, sid, shadow):
    v1.sh(sid, "ln -s / /workspace/root")
    for path in ("root", "root/etc/passwd", "root/etc/shadow", "root/proc/self/environ"):
        assert_error(v1.get(file_url(sid, path)), 403, "path_outside_workspace")
    for path in ("root/tmp/planted", "root/etc/shadow", "root/newdir/planted"):
        assert_error(v1.put(file_url(sid, path), data=b"planted"), 403,
                     "path_outside_workspace")
        assert_error(v1.delete(file_url(sid, path)), 403, "path_outside_workspace")
    assert v1.sh(sid, "ls -A /tmp; ls -d /newdir /etc/shadow 2>&1; true") == (
        "ls: cannot access '/newdir': No such file or directory\n"
        "ls: cannot access '/etc/shadow': No such file or directory\n")
    assert not os.path.exists("/tmp/planted") and not os.path.exists("/newdir")
    assert v1.sh(sid, "readlink /workspace/root") == "/\n"


def test_symlink_to_etc_shadow(v1, sid, shadow):
    v1.sh(sid, "ln -s /etc/shadow /workspace/sh")
    assert_error(v1.get(file_url(sid, "sh")), 403, "path_outside_workspace")
    r = v1.put(file_url(sid, "sh"), data=b"root::0:0:::::\n")
    # whatever the answer, nothing outside /workspace was written
    assert v1.sh(sid, "ls /etc/shadow 2>&1; true") == \
        "ls: cannot access '/etc/shadow': No such file or directory\n"
    assert_error(r, 403, "path_outside_workspace")
    assert v1.sh(sid, "readlink /workspace/sh") == "/etc/shadow\n"


def test_symlinked_directory_outside(v1, sid, shadow):
    v1.sh(sid, "ln -s /etc /workspace/etc; ln -s ../../../tmp /workspace/up; "
               "mkdir /workspace/d; ln -s ../../usr/bin /workspace/d/bin")
    for path in ("etc/passwd", "etc", "up", "d/bin/bash"):
        assert_error(v1.get(file_url(sid, path)), 403, "path_outside_workspace")
    for path in ("etc/planted", "up/planted", "d/bin/planted", "etc/x/y/planted"):
        assert_error(v1.put(file_url(sid, path), data=b"planted"), 403,
                     "path_outside_workspace")
    out = v1.sh(sid, "ls -d /etc/planted /tmp/planted /usr/bin/planted /etc/x 2>&1 | wc -l")
    assert out.strip() == "4", out  # none of them exists
    assert not os.path.exists("/etc/planted") and not os.path.exists("/tmp/planted")
    assert not os.path.exists("/usr/bin/planted")


def test_symlinks_inside_workspace_work(v1, sid):
    v1.put(file_url(sid, "real/file.txt"), data=b"inside")
    v1.sh(sid, "ln -s real /workspace/alias; ln -s /workspace/real/file.txt /workspace/abs")
    assert v1.get(file_url(sid, "alias/file.txt")).content == b"inside"
    assert v1.put(file_url(sid, "alias/new.txt"), data=b"via link").status_code == 201
    assert v1.sh(sid, "cat /workspace/real/new.txt") == "via link"
    # an absolute link is followed inside the sandbox's root, and leaves /workspace
    # on the way: refused rather than guessed
    r = v1.get(file_url(sid, "abs"))
    assert r.status_code in (200, 403), r.text
    if r.status_code == 200:
        assert r.content == b"inside"


RENAMER = b"""import os
os.chdir("/workspace")
open("x", "w").close()
print("renaming", flush=True)
while True:
    os.rename("x", "y")
    os.rename("y", "x")
"""


def test_links_with_dot_dot_resolve_while_another_sandbox_renames(v1, new_sid):
    """Paths are resolved beneath /workspace by openat2, which fails with
    EAGAIN when any rename on the host races its ".." steps: the daemon must
    retry, so that one sandbox renaming files in a loop cannot make another
    sandbox's file requests fail."""
    busy, victim = new_sid(), new_sid()
    v1.put(file_url(busy, "renamer.py"), data=RENAMER)
    proc = v1.start_process(busy, argv=["python3", "/workspace/renamer.py"])
    v1.put(file_url(victim, "real/f.txt"), data=b"inside")
    v1.sh(victim, "mkdir -p /workspace/d && ln -s ../real /workspace/d/up")
    try:
        assert wait_until(lambda: "renaming" in v1.get(
            f"/v1/sandbox/{busy}/process/{proc['id']}/logs").json()["stdout"], 10)
        answers = {}
        for _ in range(200):
            r = v1.get(file_url(victim, "d/up/f.txt"))
            key = (r.status_code, r.content[:120])
            answers[key] = answers.get(key, 0) + 1
    finally:
        v1.delete(f"/v1/sandbox/{busy}/process/{proc['id']}")
    assert answers == {(200, b"inside"): 200}, answers


FLIPPER = r"""
import os, sys
os.chdir("/workspace")
safe = sys.argv[1]
n = 0
print("flipping", flush=True)
while True:
    for target in ("/", "/etc/passwd", None, "safe.txt"):
        if target is None:
            with open(".flip.tmp", "w") as f:
                f.write(safe)
        else:
            os.symlink(target, ".flip.tmp")
        os.replace(".flip.tmp", "flip")
    n += 1
    if n % 100 == 0:
        print(n, flush=True)
"""


def test_symlink_swapped_during_requests(v1, sid, shadow):
    """`flip` turns, atomically and in a tight loop, into a regular file, a
    link to /, a link to /etc/passwd and a link to a file inside: every GET
    sees the safe content or a 403, never anything else."""
    safe = "SAFE-CONTENT-" + os.urandom(4).hex()
    v1.put(file_url(sid, "safe.txt"), data=safe.encode())
    v1.put(file_url(sid, "flipper.py"), data=FLIPPER.encode())
    proc = v1.start_process(sid, argv=["python3", "/workspace/flipper.py", safe])
    logs = lambda: v1.get(f"/v1/sandbox/{sid}/process/{proc['id']}/logs").json()["stdout"]
    assert wait_until(lambda: "\n100\n" in logs(), 15), logs()
    answers = {}
    bad = []
    try:
        for _ in range(200):
            r = v1.get(file_url(sid, "flip"))
            if r.status_code == 200 and r.content == safe.encode():
                answers["content"] = answers.get("content", 0) + 1
            elif r.status_code == 403 and r.json().get("code") == "path_outside_workspace":
                answers["403"] = answers.get("403", 0) + 1
            else:
                bad.append((r.status_code, r.content[:200]))
    finally:
        v1.delete(f"/v1/sandbox/{sid}/process/{proc['id']}")
    assert not bad, f"answers other than the safe content or 403: {bad[:5]} ({answers})"
    assert answers.get("content") and answers.get("403"), \
        f"the race was not exercised: {answers}"


# --- persist and hydrate --------------------------------------------------------------

def make_tar(members):
    """members: name -> bytes (a file) or ("dir",) or ("link", target)."""
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w") as t:
        for name, what in members.items():
            ti = tarfile.TarInfo(name)
            ti.mtime = 1_700_000_000
            data = b""
            if isinstance(what, bytes):
                data = what
                ti.size = len(data)
                ti.mode = 0o644
            elif what[0] == "dir":
                ti.type = tarfile.DIRTYPE
                ti.mode = 0o755
            else:
                ti.type = tarfile.SYMTYPE
                ti.linkname = what[1]
            t.addfile(ti, io.BytesIO(data))
    return bio.getvalue()


def tar_members(blob):
    with tarfile.open(fileobj=io.BytesIO(blob)) as t:
        out = {}
        for m in t.getmembers():
            name = m.name[2:] if m.name.startswith("./") else m.name
            out[name.rstrip("/")] = t.extractfile(m).read() if m.isfile() else m.type
        return out


def test_persist_is_a_tar_of_the_workspace(v1, sid):
    v1.put(file_url(sid, "keep.txt"), data=b"keep")
    v1.put(file_url(sid, "src/main.c"), data=b"int main;")
    v1.put(file_url(sid, "a/x"), data=b"a")
    v1.put(file_url(sid, "b"), data=b"b")
    v1.sh(sid, "ln -s keep.txt /workspace/kl")
    r = v1.post(f"/v1/sandbox/{sid}/persist")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "application/x-tar"
    m = tar_members(r.content)
    assert m["keep.txt"] == b"keep" and m["src/main.c"] == b"int main;", m
    assert m["a/x"] == b"a" and m["b"] == b"b" and m["kl"] == tarfile.SYMTYPE, m
    r = v1.post(f"/v1/sandbox/{sid}/persist?excludes=a,b")
    assert r.status_code == 200, r.text
    m = tar_members(r.content)
    assert {"keep.txt", "src/main.c", "kl"} <= set(m), m
    assert not {"a", "a/x", "b"} & set(m), m


def test_hydrate_unpacks_into_the_workspace(v1, new_sid):
    src, dst = new_sid(), new_sid()
    blob = make_tar({"proj": ("dir",), "proj/readme.md": b"# hi\n",
                     "proj/bin/tool": b"\x7fELF\0\1", "proj/link": ("link", "readme.md")})
    r = v1.post(f"/v1/sandbox/{dst}/hydrate", data=blob,
                headers={"Content-Type": "application/x-tar"})
    assert r.status_code == 200, r.text
    assert r.json() == {"ok": True}
    assert v1.get(file_url(dst, "proj/readme.md")).content == b"# hi\n"
    assert v1.get(file_url(dst, "proj/bin/tool")).content == b"\x7fELF\0\1"
    assert v1.get(file_url(dst, "proj/link")).content == b"# hi\n"
    assert v1.sh(dst, "stat -c %U /workspace/proj/readme.md") == "root\n"
    # persist from one sandbox, hydrate into another: the same files
    v1.put(file_url(src, "one/two.txt"), data=b"2")
    tar = v1.post(f"/v1/sandbox/{src}/persist").content
    assert v1.post(f"/v1/sandbox/{dst}/hydrate", data=tar).status_code == 200
    assert v1.get(file_url(dst, "one/two.txt")).content == b"2"


def test_hydrate_of_garbage_is_400(v1, sid):
    assert_error(v1.post(f"/v1/sandbox/{sid}/hydrate", data=b"this is not a tar" * 100),
                 400, "invalid_request")


def test_hydrate_stays_inside_the_workspace(v1, sid):
    blob = make_tar({"ok.txt": b"ok", "../escape.txt": b"bad", "/abs.txt": b"abs",
                     "lnk": ("link", "/tmp"), "lnk/evil": b"evil"})
    v1.post(f"/v1/sandbox/{sid}/hydrate", data=blob)
    assert v1.get(file_url(sid, "ok.txt")).content == b"ok"
    out = v1.sh(sid, "ls -d /escape.txt /abs.txt /tmp/evil 2>&1 | wc -l")
    assert out.strip() == "3", v1.sh(sid, "ls -la / /tmp")
    assert not os.path.exists("/tmp/evil") and not os.path.exists("/escape.txt")


FAKE_TAR = "#!/bin/sh\necho ran \"$@\" >> /tmp/fake-tar-ran\nexit 0\n"


def test_persist_and_hydrate_never_run_the_sandboxes_tar(v1, sid):
    """The sandbox can replace any binary it has (its /usr is an overlay it
    writes): persist and hydrate run the daemon's own tar code instead."""
    v1.put(file_url(sid, "keep.txt"), data=b"keep")
    script = base64.b64encode(FAKE_TAR.encode()).decode()
    v1.sh(sid, f"echo {script} | base64 -d > /tmp/t && chmod 755 /tmp/t && "
               "cp /tmp/t /usr/bin/tar && mkdir -p /usr/local/bin && "
               "cp /tmp/t /usr/local/bin/tar && tar x; cat /tmp/fake-tar-ran && "
               "rm /tmp/fake-tar-ran")
    r = v1.post(f"/v1/sandbox/{sid}/persist")
    assert r.status_code == 200, r.text
    assert tar_members(r.content)["keep.txt"] == b"keep"
    blob = make_tar({"in.txt": b"in"})
    r = v1.post(f"/v1/sandbox/{sid}/hydrate", data=blob)
    assert r.status_code == 200, r.text
    assert v1.get(file_url(sid, "in.txt")).content == b"in"
    res = v1.run(sid, "cat /tmp/fake-tar-ran")
    assert res["exitCode"] != 0, f"the sandbox's tar ran: {res['stdout']}"


def test_persist_keeps_long_names_links_and_modes(v1, sid):
    deep = "/".join(["a-rather-long-directory-name"] * 6)
    v1.sh(sid, f"cd /workspace && mkdir -p {deep} empty && echo x > {deep}/file.txt && "
               f"ln {deep}/file.txt hard && ln -s {deep}/file.txt soft && "
               "head -c 3000000 /dev/urandom > big && chmod 750 big && mkfifo pipe")
    r = v1.post(f"/v1/sandbox/{sid}/persist")
    assert r.status_code == 200, r.text
    big = v1.get(file_url(sid, "big")).content
    with tarfile.open(fileobj=io.BytesIO(r.content)) as t:
        m = {x.name[2:] if x.name.startswith("./") else x.name: x for x in t.getmembers()}
        assert m[f"{deep}/file.txt"].isfile()
        assert t.extractfile(m[f"{deep}/file.txt"]).read() == b"x\n"
        assert m["hard"].islnk() or t.extractfile(m["hard"]).read() == b"x\n"
        assert m["soft"].issym() and m["soft"].linkname == f"{deep}/file.txt"
        assert t.extractfile(m["big"]).read() == big
        assert m["big"].mode & 0o777 == 0o750
        assert m["empty"].isdir() and m["pipe"].isfifo()
    # and back, into another sandbox, through hydrate
    other = sid + "-b"
    assert v1.post(f"/v1/sandbox/{other}/hydrate", data=r.content).status_code == 200
    assert v1.get(file_url(other, f"{deep}/file.txt")).content == b"x\n"
    assert v1.get(file_url(other, "big")).content == big
    out = v1.sh(other, "cd /workspace && stat -c '%a %h' big hard && readlink soft "
                       "&& test -p pipe && test -d empty && echo ok")
    assert out.split("\n")[:2] == ["750 1", "644 2"], out
    assert out.rstrip().endswith("ok"), out


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
def test_hydrate_reads_the_usual_formats(v1, sid, fmt):
    name = "n" * 90 + "/" + ("m" * 90 if fmt != tarfile.USTAR_FORMAT else "m")
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w", format=fmt) as t:
        ti = tarfile.TarInfo(name)
        ti.size = 5
        ti.mode = 0o600
        t.addfile(ti, io.BytesIO(b"hello"))
    r = v1.post(f"/v1/sandbox/{sid}/hydrate", data=bio.getvalue())
    assert r.status_code == 200, r.text
    assert v1.get(file_url(sid, name)).content == b"hello"
    assert v1.sh(sid, f"stat -c %a /workspace/{name}") == "600\n"


def test_hydrate_of_a_compressed_archive_says_so(v1, sid):
    import gzip
    doc = assert_error(v1.post(f"/v1/sandbox/{sid}/hydrate",
                               data=gzip.compress(make_tar({"a": b"a"}))),
                       400, "invalid_request")
    assert "gzip" in doc["error"], doc


def test_hydrate_replaces_links_instead_of_writing_through_them(v1, sid):
    v1.sh(sid, "echo precious > /tmp/precious && ln -s /tmp/precious /workspace/f")
    r = v1.post(f"/v1/sandbox/{sid}/hydrate", data=make_tar({"f": b"new"}))
    assert r.status_code == 200, r.text
    assert v1.sh(sid, "cat /tmp/precious /workspace/f; test -L /workspace/f || echo") \
        == "precious\nnew\n"


# --- interrupted, concurrent and huge uploads ---------------------------------------------

def test_interrupted_upload_leaves_nothing(v1, sid):
    """Clients that send the headers and half the body, then vanish (at once,
    or after a pause): no file, no temp file, no upload left running."""
    v1.put(file_url(sid, "up/marker"), data=b"m")
    names = []
    attempts = [(20, 0)] * 8 + [(64 << 10, 0)] * 4 + [(8 << 20, 0), (8 << 20, 0.3)] * 2
    for i, (body_len, pause) in enumerate(attempts):
        name = f"partial-{i}.bin"
        names.append(name)
        s = socket.create_connection(("127.0.0.1", v1.d.port))
        s.sendall((f"PUT {file_url(sid, 'up/' + name)} HTTP/1.1\r\nHost: x\r\n"
                   f"Content-Length: {body_len}\r\n\r\n").encode())
        s.sendall(b"p" * (body_len // 2))
        time.sleep(pause)
        s.close()
        time.sleep(0.05)

    def clean():
        return set(listing(v1, sid, "up")) == {"marker"}
    assert wait_until(clean, 5), f"left behind: {sorted(listing(v1, sid, 'up'))}"
    assert v1.sh(sid, "ls -A /workspace/up") == "marker\n"
    ps = v1.sh(sid, "ps -e -o comm | grep -c sandboxd-init")
    assert ps == "1\n", "uploads still running: " + v1.sh(sid, "ps -e -o pid,args")
    for name in names:
        assert_error(v1.get(file_url(sid, "up/" + name)), 404, "file_not_found")
    # the name is free for a full upload
    assert v1.put(file_url(sid, "up/partial-0.bin"), data=b"whole").status_code == 201
    assert v1.get(file_url(sid, "up/partial-0.bin")).content == b"whole"


def test_upload_shorter_than_its_content_length_leaves_nothing(v1, sid):
    v1.put(file_url(sid, "short/marker"), data=b"m")
    s = socket.create_connection(("127.0.0.1", v1.d.port))
    s.sendall((f"PUT {file_url(sid, 'short/f')} HTTP/1.1\r\nHost: x\r\n"
               f"Content-Length: 1000\r\n\r\n").encode() + b"x" * 10)
    s.shutdown(socket.SHUT_WR)  # the body ends early, the client still listens
    s.settimeout(3)
    try:
        s.recv(4096)
    except OSError:
        pass
    s.close()
    assert wait_until(lambda: set(listing(v1, sid, "short")) == {"marker"}, 5), \
        listing(v1, sid, "short")


def test_concurrent_writers_leave_exactly_one_version(v1, sid):
    v1.put(file_url(sid, "race/marker"), data=b"m")
    size = 2 << 20
    bodies = [bytes([65 + i]) * size for i in range(10)]
    answers = [None] * 10

    def put(i):
        answers[i] = requests.put(v1.d.url + file_url(sid, "race/shared.bin"),
                                  data=bodies[i], timeout=60).status_code
    threads = [threading.Thread(target=put, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(answers) <= {201, 204} and 201 in answers, answers
    final = v1.get(file_url(sid, "race/shared.bin")).content
    assert len(final) == size and final in bodies, \
        f"a mix of uploads: {len(final)} bytes, starts {final[:4]!r}, {len(set(final))} byte values"
    assert set(listing(v1, sid, "race")) == {"marker", "shared.bin"}


CHUNK = 1 << 20
GIB = 1 << 30


def gib_chunks():
    """1 GiB, deterministic, 1 MiB at a time (never whole in memory)."""
    pattern = hashlib.sha256(b"sandboxd").digest() * (CHUNK // 32)
    for i in range(GIB // CHUNK):
        yield i.to_bytes(8, "big") + pattern[8:]


def test_one_gib_round_trip_in_bounded_memory(v1, sid):
    v1.sh(sid, "true")
    path = file_url(sid, "big/one-gib.bin")
    sent = hashlib.sha256()
    got = hashlib.sha256()
    base_rss = vm_rss_kib(v1.d.pid)
    with RssSampler(v1.d.pid) as rss:
        conn = http.client.HTTPConnection("127.0.0.1", v1.d.port, timeout=120)
        try:
            conn.putrequest("PUT", path)
            conn.putheader("Content-Length", str(GIB))
            conn.putheader("Content-Type", "application/octet-stream")
            conn.endheaders()
            for chunk in gib_chunks():
                sent.update(chunk)
                conn.send(chunk)
            resp = conn.getresponse()
            put_status, put_body = resp.status, resp.read()
        finally:
            conn.close()
        assert put_status == 201, put_body
        r = v1.get(path, stream=True, timeout=120)
        n = 0
        with r:
            assert r.status_code == 200
            assert r.headers["Content-Length"] == str(GIB)
            for chunk in r.iter_content(CHUNK):
                got.update(chunk)
                n += len(chunk)
    assert n == GIB
    assert got.hexdigest() == sent.hexdigest()
    assert len(rss.samples) > 20
    assert rss.max_kib < RSS_LIMIT_KIB, \
        f"daemon RSS reached {rss.max_kib} KiB (from {base_rss} KiB) moving 1 GiB"
    size = v1.sh(sid, "stat -c %s /workspace/big/one-gib.bin; rm /workspace/big/one-gib.bin")
    assert size == f"{GIB}\n"


def store_loop_dev(state):
    """The loop device (loopN) under the daemon's btrfs store; skips the
    test where the store is plain directories, or where store.img's file
    system refuses O_DIRECT (the device then stays buffered)."""
    mnt = os.path.join(state, "sandboxes")
    dev = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, post = line.split(" - ", 1)
            if pre.split()[4] == mnt and post.split()[0] == "btrfs":
                dev = os.path.basename(post.split()[1])  # /dev/loopN
    if dev is None:
        pytest.skip("the store is plain directories here")
    try:
        os.close(os.open(os.path.join(state, "store.img"), os.O_RDONLY | os.O_DIRECT))
    except OSError as e:
        pytest.skip(f"store.img's file system refuses O_DIRECT: {e}")
    return dev


def loop_dio(dev):
    with open(f"/sys/block/{dev}/loop/dio") as f:
        return f.read().strip()


def test_the_store_caches_file_data_once(v1, sid):
    """The btrfs store's loop device does direct I/O on store.img
    (docs/operations.md, "The disk store"): a file written in a sandbox is
    not cached a second time as pages of the image, and a written file
    reads back whole."""
    assert loop_dio(store_loop_dev(v1.d.state_dir)) == "1"
    blob = os.urandom(3 << 20) + b"tail"
    assert v1.put(file_url(sid, "dio.bin"), data=blob).status_code == 201
    v1.sh(sid, "sync")
    assert v1.get(file_url(sid, "dio.bin")).content == blob


def test_a_store_left_mounted_by_a_killed_daemon_gets_direct_io(make_daemon, sid):
    """A daemon that was killed leaves the store mounted and the next one
    takes the mount as it is; a loop device set up buffered (by an older
    daemon) does direct I/O from then on, and the files are still there."""
    d = make_daemon()
    v1 = V1(d)
    assert v1.put(file_url(sid, "kept.txt"), data=b"kept\n").status_code == 201
    dev = store_loop_dev(d.state_dir)
    d.kill()
    with open(f"/dev/{dev}", "rb") as f:
        fcntl.ioctl(f.fileno(), LOOP_SET_DIRECT_IO, 0)
    assert loop_dio(dev) == "0"
    d.restart()
    assert store_loop_dev(d.state_dir) == dev  # the same mount, taken over
    assert loop_dio(dev) == "1"
    assert V1(d).get(file_url(sid, "kept.txt")).content == b"kept\n"


# --- the fast path: big files pulled from the builtin's pipe into the server's buffer ---

SPLICE_MIN = 256 << 10  # where an earlier version spliced into the socket instead


def test_64_mib_round_trip_is_exact(v1, sid):
    """A big GET, pulled from the builtin's pipe into the server's buffer:
    every byte, in order, on a connection that stays open, at every size
    around the threshold where an earlier version spliced it into the
    socket and closed the connection."""
    blob = b"".join(hashlib.sha256(i.to_bytes(4, "big")).digest() * 32
                    for i in range((64 << 20) // 1024))
    assert len(blob) == 64 << 20
    r = v1.put(file_url(sid, "fast/big.bin"), data=blob)
    assert r.status_code == 201, r.text
    r = v1.get(file_url(sid, "fast/big.bin"))
    assert r.status_code == 200
    assert r.headers["Content-Length"] == str(len(blob))
    assert r.headers.get("Connection", "").lower() != "close"
    assert hashlib.sha256(r.content).hexdigest() == hashlib.sha256(blob).hexdigest()
    # just below and at the threshold, and a small file on a kept connection
    for size in (SPLICE_MIN - 1, SPLICE_MIN, 1000):
        part = blob[:size]
        assert v1.put(file_url(sid, f"fast/p{size}"), data=part).status_code == 201
        r = v1.get(file_url(sid, f"fast/p{size}"))
        assert r.status_code == 200 and r.content == part, size
        assert r.headers.get("Connection", "").lower() != "close", size
    # HEAD: the headers only, and nothing left running
    conn = http.client.HTTPConnection("127.0.0.1", v1.d.port, timeout=30)
    try:
        conn.request("HEAD", file_url(sid, "fast/big.bin"))
        resp = conn.getresponse()
        assert resp.status == 200 and resp.read() == b""
        assert resp.getheader("Content-Length") == str(len(blob))
    finally:
        conn.close()
    assert wait_until(lambda: v1.sh(sid, "ps -e -o comm | grep -c sandboxd-init") == "1\n", 10), \
        v1.sh(sid, "ps -e -o pid,args")


def test_a_reader_that_stops_holds_the_builtin_not_the_daemon(v1, sid):
    """A client that takes a few bytes of a 64 MiB GET and then stops
    reading: the daemon buffers nothing of it (the bytes wait in the pipe
    and the socket), stays responsive, and once the client leaves, the
    builtin is gone and no fd is left behind."""
    v1.sh(sid, "head -c 64M /dev/urandom > /workspace/stall.bin")
    v1.get(file_url(sid, "nothing-here"))  # warm the daemon's allocations
    fds = v1.d.fd_count()
    base_rss = vm_rss_kib(v1.d.pid)
    s = socket.create_connection(("127.0.0.1", v1.d.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
    s.sendall(f"GET {file_url(sid, 'stall.bin')} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    head = s.recv(65536)
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    with RssSampler(v1.d.pid) as rss:
        time.sleep(1.5)  # the client reads nothing meanwhile
        # the daemon still answers others
        assert v1.sh(sid, "echo alive") == "alive\n"
        r = v1.get(file_url(sid, "small.txt"))
        assert r.status_code == 404
    assert rss.max_kib < base_rss + 16 * 1024, \
        f"daemon RSS grew from {base_rss} to {rss.max_kib} KiB for a stalled reader"
    s.close()
    assert wait_until(lambda: v1.sh(sid, "ps -e -o comm | grep -c sandboxd-init") == "1\n", 10), \
        v1.sh(sid, "ps -e -o pid,args")
    assert wait_until(lambda: v1.d.fd_count() <= fds, 10), \
        f"fds: {fds} before, {v1.d.fd_count()} after"
    # the file is whole and readable again
    r = v1.get(file_url(sid, "stall.bin"))
    assert r.status_code == 200 and len(r.content) == 64 << 20


def test_a_put_cut_off_mid_body_after_a_big_start_leaves_nothing(v1, sid):
    """64 MiB announced, 20 MiB sent, then the client is gone: no file and
    no temp file; the next whole upload of the name works."""
    v1.put(file_url(sid, "cut/marker"), data=b"m")
    s = socket.create_connection(("127.0.0.1", v1.d.port))
    s.sendall((f"PUT {file_url(sid, 'cut/big.bin')} HTTP/1.1\r\nHost: x\r\n"
               f"Content-Length: {64 << 20}\r\n\r\n").encode())
    chunk = b"q" * (1 << 20)
    for _ in range(20):
        s.sendall(chunk)
    s.close()
    assert wait_until(lambda: set(listing(v1, sid, "cut")) == {"marker"}, 10), \
        listing(v1, sid, "cut")
    assert v1.sh(sid, "ls -A /workspace/cut") == "marker\n"
    assert v1.put(file_url(sid, "cut/big.bin"), data=chunk).status_code == 201
    assert v1.get(file_url(sid, "cut/big.bin")).content == chunk
