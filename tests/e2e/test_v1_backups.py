"""/v1 backups in the local store (shared/spec/v1.md "Backups"): a
directory archived (tar + zstd) inside the sandbox and streamed to the
store, restored into the same or another sandbox, excludes, TTL, sha256 and
size, progress as SSE, and what a cancelled request, a damaged or hostile
archive and a killed daemon leave behind."""
import hashlib
import io
import json
import os
import random
import re
import subprocess
import tarfile
import tempfile
import threading
import time

import pytest
import requests

from helpers import V1, Daemon, assert_error, sse_events, wait_until

BKP_ID = re.compile(r"^bkp_[0-9a-f]{12}$")
ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

TREE = r"""
set -e
mkdir -p /workspace/proj/src/deep/er /workspace/proj/node_modules/pkg /workspace/proj/empty
printf 'print("hi")\n' > /workspace/proj/src/main.py
printf 'x' > /workspace/proj/src/deep/er/leaf.txt
echo secret > /workspace/proj/.env
echo junk > /workspace/proj/node_modules/pkg/index.js
echo log > /workspace/proj/run.log
echo keep > /workspace/proj/src/keep.log.txt
head -c 3000000 /dev/urandom > /workspace/proj/blob.bin
chmod 750 /workspace/proj/src/main.py
ln -s main.py /workspace/proj/src/link
ln -s /etc/passwd /workspace/proj/passwd-link
ln /workspace/proj/src/deep/er/leaf.txt /workspace/proj/hard
mkfifo /workspace/proj/fifo
cd /workspace/proj && find . -print | LC_ALL=C sort | grep -v -e node_modules -e '\.log$' > /tmp/want-list
sha256sum blob.bin src/main.py | sed 's/ .*//' > /tmp/want-sums
"""

LIST = "cd {d} && find . -print | LC_ALL=C sort"
SUMS = "cd {d} && sha256sum blob.bin src/main.py | sed 's/ .*//'"
ATTRS = ("cd {d} && stat -c '%a %F' src/main.py fifo empty && readlink src/link passwd-link"
         " && stat -c %h hard src/deep/er/leaf.txt")


def backup(v1, sid, timeout=120, **body):
    r = v1.post(f"/v1/sandbox/{sid}/backup", json=body, timeout=timeout)
    assert r.status_code == 201, f"backup {sid}: {r.status_code} {r.text}"
    return r.json()


def restore(v1, sid, bid, timeout=120, **body):
    r = v1.post(f"/v1/sandbox/{sid}/restore", json={"backup": bid, **body},
                timeout=timeout)
    assert r.status_code == 200, f"restore {sid}: {r.status_code} {r.text}"
    return r.json()


def store_files(d):
    root = os.path.join(d.state_dir, "backups")
    out = []
    for base, _, files in os.walk(root):
        out += [os.path.relpath(os.path.join(base, f), root) for f in files]
    return sorted(out)


def test_backup_archive_list_info_delete(v1, sid):
    v1.sh(sid, TREE)
    want = v1.sh(sid, "cat /tmp/want-list")
    b = backup(v1, sid, dir="/workspace/proj", excludes=["node_modules", "*.log"],
               ttlSeconds=3600)
    assert BKP_ID.match(b["id"]), b
    assert b["sandboxId"] == sid and b["dir"] == "/workspace/proj"
    assert b["excludes"] == ["node_modules", "*.log"]
    assert re.match(r"^[0-9a-f]{64}$", b["sha256"]) and b["sizeBytes"] > 3000000
    assert ISO_MS.match(b["createdAt"]) and ISO_MS.match(b["expiresAt"])
    assert b["store"] == "local"

    assert b in v1.get("/v1/backup").json()["backups"]
    r = v1.get(f"/v1/backup/{b['id']}")
    assert r.status_code == 200 and r.json() == b, r.text

    # the archive, streamed: its bytes are what the answer said
    r = v1.get(f"/v1/backup/{b['id']}/archive")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "application/zstd"
    assert int(r.headers["Content-Length"]) == b["sizeBytes"] == len(r.content)
    assert hashlib.sha256(r.content).hexdigest() == b["sha256"]
    # a tar compressed with zstd, of the directory's contents, excludes left out
    tar = subprocess.run(["zstd", "-dc"], input=r.content, capture_output=True, check=True)
    names = sorted("./" + m.name.rstrip("/")
                   for m in tarfile.open(fileobj=io.BytesIO(tar.stdout)).getmembers())
    assert ["."] + names == want.split(), (names, want)

    assert v1.delete(f"/v1/backup/{b['id']}").status_code == 204
    assert_error(v1.get(f"/v1/backup/{b['id']}"), 404, "backup_not_found")
    assert_error(v1.get(f"/v1/backup/{b['id']}/archive"), 404, "backup_not_found")
    assert_error(v1.delete(f"/v1/backup/{b['id']}"), 404, "backup_not_found")
    assert b["id"] not in [x["id"] for x in v1.get("/v1/backup").json()["backups"]]


def test_restore_same_other_sandbox_and_dir(v1, new_sid):
    a, b = new_sid(), new_sid()
    v1.sh(a, TREE)
    want_list, want_sums = v1.sh(a, "cat /tmp/want-list"), v1.sh(a, "cat /tmp/want-sums")
    bk = backup(v1, a, dir="/workspace/proj", excludes=["node_modules", "*.log"])
    assert bk["expiresAt"] is None
    # the same sandbox: the directory becomes the backup's again
    v1.sh(a, "cd /workspace/proj && rm -rf src && echo new > added && echo changed > blob.bin")
    r = restore(v1, a, bk["id"])
    assert r["id"] == a and r["restoredFrom"] == bk["id"]
    assert v1.sh(a, LIST.format(d="/workspace/proj")) == want_list
    assert v1.sh(a, SUMS.format(d="/workspace/proj")) == want_sums
    attrs = v1.sh(a, ATTRS.format(d="/workspace/proj"))
    assert attrs == "750 regular file\n644 fifo\n755 directory\nmain.py\n/etc/passwd\n2\n2\n", attrs
    assert v1.sh(a, "ls -a / | grep -c sbx-restore || true") == "0\n"
    # another sandbox of the tenant, the backup's own dir
    restore(v1, b, bk["id"])
    assert v1.sh(b, LIST.format(d="/workspace/proj")) == want_list
    assert v1.sh(b, SUMS.format(d="/workspace/proj")) == want_sums
    # and elsewhere, outside /workspace, parents made
    restore(v1, b, bk["id"], dir="/home/dev/copy")
    assert v1.sh(b, LIST.format(d="/home/dev/copy")) == want_list
    # /workspace itself (a directory the image has) is replaced too
    bw = backup(v1, b, dir="/workspace")
    v1.sh(b, "rm -rf /workspace/proj; echo stray > /workspace/stray")
    restore(v1, b, bw["id"])
    assert v1.sh(b, "ls /workspace") == "proj\n"
    assert v1.sh(b, LIST.format(d="/workspace/proj")) == want_list


def test_backup_outside_workspace_and_unreadable_files(v1, sid):
    v1.sh(sid, "mkdir -p /home/u/conf && echo a > /home/u/conf/a && echo b > /home/u/b "
               "&& chmod 000 /home/u/b")
    bk = backup(v1, sid, dir="/home/u")
    v1.sh(sid, "rm -rf /home/u")
    restore(v1, sid, bk["id"])
    # root without capabilities could not read b: left out, the rest is there
    assert v1.sh(sid, "cat /home/u/conf/a; ls /home/u") == "a\nconf\n"


def test_backup_input_errors(v1, sid):
    v1.create(sid)
    for body in ({"dir": "workspace"}, {"dir": "/"}, {"dir": "/proc"}, {"dir": "/dev/shm"},
                 {"dir": "/../etc/.."}, {"dir": 5}, {"excludes": "x"}, {"excludes": [""]},
                 {"excludes": [3]}, {"excludes": ["x"] * 65}, {"excludes": ["y" * 257]},
                 {"ttlSeconds": 0}, {"ttlSeconds": -5}, {"ttlSeconds": "1h"},
                 {"ttlSeconds": 1.5}):
        assert_error(v1.post(f"/v1/sandbox/{sid}/backup", json=body), 400, "invalid_request")
    assert_error(v1.post(f"/v1/sandbox/{sid}/backup", json={"dir": "/workspace/nope"}),
                 404, "file_not_found")
    assert_error(v1.post("/v1/sandbox/never-made-here/backup", json={}), 404,
                 "sandbox_not_found")
    for bid in ("bkp_000000000000", "nope", "bkp_../../x"):
        assert_error(v1.post(f"/v1/sandbox/{sid}/restore", json={"backup": bid}), 404,
                     "backup_not_found")
    assert_error(v1.post(f"/v1/sandbox/{sid}/restore", json={"backup": 1}), 400,
                 "invalid_request")
    assert_error(v1.post(f"/v1/sandbox/{sid}/restore",
                         json={"backup": "bkp_000000000000", "dir": "rel"}), 400,
                 "invalid_request")
    assert_error(v1.get("/v1/backup/bkp_000000000000"), 404, "backup_not_found")
    assert_error(v1.get("/v1/backup/bkp_000000000000/archive"), 404, "backup_not_found")


def test_ttl_expiry_410_and_reaped(v1, sid):
    v1.sh(sid, "echo x > /workspace/x")
    keep = backup(v1, sid)
    # the daemon's reaper (every minute) may take an expired backup before
    # the test asks: then it is gone already, and another one is tried
    for _ in range(3):
        bk = backup(v1, sid, ttlSeconds=1)
        time.sleep(1.5)
        r = v1.get(f"/v1/backup/{bk['id']}")
        if r.status_code != 404:
            break
        assert_error(r, 404, "backup_not_found")
    assert_error(r, 410, "backup_expired")
    assert_error(v1.post(f"/v1/sandbox/{sid}/restore", json={"backup": bk["id"]}), 404,
                 "backup_not_found")  # reaped by the first answer
    assert_error(v1.get(f"/v1/backup/{bk['id']}"), 404, "backup_not_found")
    ids = [x["id"] for x in v1.get("/v1/backup").json()["backups"]]
    assert bk["id"] not in ids and keep["id"] in ids
    assert not [f for f in store_files(v1.d) if bk["id"] in f]


def test_expired_backups_are_listed_no_more(v1, sid):
    v1.sh(sid, "echo x > /workspace/x")
    bk = backup(v1, sid, ttlSeconds=1)
    time.sleep(1.5)
    assert bk["id"] not in [x["id"] for x in v1.get("/v1/backup").json()["backups"]]
    assert not [f for f in store_files(v1.d) if bk["id"] in f]


def test_progress_as_sse(v1, sid):
    v1.sh(sid, "mkdir /workspace/p && head -c 12000000 /dev/urandom > /workspace/p/a")
    r = v1.post(f"/v1/sandbox/{sid}/backup", json={"dir": "/workspace/p"},
                headers={"Accept": "text/event-stream"}, stream=True, timeout=120)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    events = [e for e in sse_events(r) if e.event]
    assert events[-1].event == "done", events
    info = json.loads(events[-1].data)
    assert BKP_ID.match(info["id"]) and info["sizeBytes"] > 12000000
    prog = [json.loads(e.data) for e in events if e.event == "progress"]
    assert prog and all(p["totalBytes"] == 12000000 for p in prog), prog
    assert all(0 <= p["bytes"] <= p["totalBytes"] for p in prog), prog
    assert prog[-1]["bytes"] == 12000000, prog
    assert [p["bytes"] for p in prog] == sorted(p["bytes"] for p in prog)

    r = v1.post(f"/v1/sandbox/{sid}/restore", json={"backup": info["id"], "dir": "/tmp/p2"},
                headers={"Accept": "text/event-stream"}, stream=True, timeout=120)
    events = [e for e in sse_events(r) if e.event]
    assert events[-1].event == "done", events
    done = json.loads(events[-1].data)
    assert done["restoredFrom"] == info["id"] and done["backup"]["id"] == info["id"]
    prog = [json.loads(e.data) for e in events if e.event == "progress"]
    assert prog[-1] == {"bytes": info["sizeBytes"], "totalBytes": info["sizeBytes"]}, prog
    assert v1.sh(sid, "cmp /workspace/p/a /tmp/p2/a && echo same") == "same\n"

    # errors come as an error event
    r = v1.post(f"/v1/sandbox/{sid}/restore", json={"backup": "bkp_000000000000"},
                headers={"Accept": "text/event-stream"}, stream=True, timeout=60)
    events = [e for e in sse_events(r) if e.event]
    assert [e.event for e in events] == ["error"], events
    assert json.loads(events[0].data)["code"] == "backup_not_found"


def test_cancelled_backup_leaves_nothing(v1, sid):
    """The client goes away in the middle: no backup is listed, no part of
    its archive stays in the store."""
    v1.sh(sid, "mkdir /workspace/big && head -c 400000000 /dev/urandom > /workspace/big/a",
          timeout=300)
    before = v1.get("/v1/backup").json()["backups"]
    r = v1.post(f"/v1/sandbox/{sid}/backup", json={"dir": "/workspace/big"},
                headers={"Accept": "text/event-stream"}, stream=True, timeout=120)
    seen = None
    for e in sse_events(r):
        if e.event == "progress":
            p = json.loads(e.data)
            if 0 < p["bytes"] < p["totalBytes"]:
                seen = p
                break
        if e.event in ("done", "error"):
            break
    r.close()
    assert seen, "the backup ended before the client could leave in the middle"
    # the daemon notices, kills the archiver and drops what it wrote
    assert wait_until(lambda: not [f for f in store_files(v1.d) if f.endswith(".part")], 30), \
        store_files(v1.d)
    assert v1.get("/v1/backup").json()["backups"] == before
    assert not [f for f in store_files(v1.d)
                if f.split("/")[-1].split(".")[0] not in {b["id"] for b in before}]


def test_damaged_archive_is_refused_and_dir_untouched(v1, sid):
    v1.sh(sid, "mkdir /workspace/d && echo v1 > /workspace/d/f && "
               "head -c 200000 /dev/urandom > /workspace/d/r")
    bk = backup(v1, sid, dir="/workspace/d")
    v1.sh(sid, "echo v2 > /workspace/d/f")
    path = os.path.join(v1.d.state_dir, "backups",
                        next(f for f in store_files(v1.d) if f.endswith(bk["id"] + ".tar.zst")))
    with open(path, "r+b") as f:
        f.seek(bk["sizeBytes"] // 2)
        byte = f.read(1)
        f.seek(bk["sizeBytes"] // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert_error(v1.post(f"/v1/sandbox/{sid}/restore", json={"backup": bk["id"]}), 502,
                 "backup_corrupt")
    assert v1.sh(sid, "cat /workspace/d/f; ls -a /workspace | grep -c sbx || true") == "v2\n0\n"


def _hostile_archive():
    """A tar whose members try to leave the directory they are unpacked in."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        def add(name, data=b"x", **kw):
            ti = tarfile.TarInfo(name)
            for k, v in kw.items():
                setattr(ti, k, v)
            ti.size = len(data) if ti.type == tarfile.REGTYPE else 0
            t.addfile(ti, io.BytesIO(data) if ti.type == tarfile.REGTYPE else None)
        add("ok.txt", b"fine")
        add("lnk", type=tarfile.SYMTYPE, linkname="/tmp")
        add("lnk/escaped-via-link", b"bad")
        add("../escaped-dotdot", b"bad")
        add("/tmp/escaped-absolute", b"bad")
        add("dev", type=tarfile.CHRTYPE, devmajor=1, devminor=3)
    return subprocess.run(["zstd", "-q", "-c"], input=buf.getvalue(), capture_output=True,
                          check=True).stdout


def test_hostile_archive_cannot_leave_the_directory(v1, sid):
    """An archive is hostile input: a store another party can write may hold
    anything. Planted with matching metadata, it still writes nothing outside
    the directory it is restored into."""
    v1.sh(sid, "mkdir /workspace/t && echo keep > /workspace/t/keep")
    good = backup(v1, sid, dir="/workspace/t")
    data = _hostile_archive()
    bid = "bkp_0123456789ab"
    meta_rel = next(f for f in store_files(v1.d) if f.endswith(good["id"] + ".json"))
    tenant_dir = os.path.join(v1.d.state_dir, "backups", os.path.dirname(meta_rel))
    with open(os.path.join(tenant_dir, good["id"] + ".json")) as f:
        meta = json.load(f)
    meta.update(id=bid, sha256=hashlib.sha256(data).hexdigest(), sizeBytes=len(data))
    with open(os.path.join(tenant_dir, bid + ".tar.zst"), "wb") as f:
        f.write(data)
    with open(os.path.join(tenant_dir, bid + ".json"), "w") as f:
        json.dump(meta, f)
    r = v1.post(f"/v1/sandbox/{sid}/restore", json={"backup": bid})
    assert r.status_code in (200, 502), r.text
    out = v1.sh(sid, "ls /tmp /workspace; cat /workspace/t/keep 2>/dev/null; "
                     "ls -a /workspace/t")
    assert "escaped" not in out, out
    if r.status_code == 502:  # refused: the directory is as it was
        assert r.json()["code"] == "backup_corrupt"
        assert "keep\n" in out and "sbx-restore" not in out, out
    else:  # or the harmless members only
        assert "dev" not in v1.sh(sid, "ls /workspace/t")


def own_uid_base():
    """A uid base of this test's own: after a SIGKILL, a daemon of another
    test run on this host (same default base) may take the dead one's
    ranges before the restart, which the restart then refuses."""
    return str(0x90000000 + random.randrange(0, 0x4000) * 65536)


def test_daemon_killed_during_a_backup(make_daemon, new_sid):
    d = make_daemon("--uid-base", own_uid_base())
    v1 = V1(d)
    sid = new_sid()
    v1.sh(sid, "mkdir /workspace/big && head -c 300000000 /dev/urandom > /workspace/big/a",
          timeout=300)
    answers = []

    def run():
        try:
            answers.append(v1.post(f"/v1/sandbox/{sid}/backup", json={"dir": "/workspace/big"},
                                   timeout=120))
        except requests.RequestException as e:
            answers.append(e)

    t = threading.Thread(target=run)
    t.start()
    assert wait_until(lambda: [f for f in store_files(d) if f.endswith(".part")], 60), \
        "the backup did not start writing"
    d.kill()
    t.join(60)
    d.start()
    assert v1.get("/v1/backup").json()["backups"] == []
    assert store_files(d) == []
    # the sandbox and its files are fine, and it backs up again
    assert v1.sh(sid, "ls -l /workspace/big/a | cut -d' ' -f5") == "300000000\n"
    bk = backup(v1, sid, dir="/workspace/big", timeout=300)
    assert bk["sizeBytes"] > 300000000


def test_backups_are_tenant_scoped(make_daemon, new_sid):
    fd, path = tempfile.mkstemp(prefix="sbx-e2e-tokens-", dir="/tmp")
    with os.fdopen(fd, "w") as f:
        f.write("alpha-token-0123456789abcdef alpha\nbeta-token-fedcba9876543210 beta\n")
    try:
        d = make_daemon("--tokens", path)
    finally:
        os.unlink(path)
    alpha = V1(d, "alpha-token-0123456789abcdef")
    beta = V1(d, "beta-token-fedcba9876543210")
    a = new_sid()
    alpha.sh(a, "echo secret > /workspace/s")
    bk = backup(alpha, a)
    assert beta.get("/v1/backup").json()["backups"] == []
    assert_error(beta.get(f"/v1/backup/{bk['id']}"), 404, "backup_not_found")
    assert_error(beta.get(f"/v1/backup/{bk['id']}/archive"), 404, "backup_not_found")
    assert_error(beta.delete(f"/v1/backup/{bk['id']}"), 404, "backup_not_found")
    assert_error(beta.post(f"/v1/sandbox/{new_sid()}/restore", json={"backup": bk["id"]}),
                 404, "backup_not_found")
    assert alpha.get(f"/v1/backup/{bk['id']}").status_code == 200
    assert_error(V1(d).get("/v1/backup"), 401, "unauthorized")


def test_backup_dir_flag(make_daemon, new_sid, tmp_path):
    where = str(tmp_path / "elsewhere")
    d = make_daemon("--backup-dir", where)
    v1 = V1(d)
    sid = new_sid()
    v1.sh(sid, "echo x > /workspace/x")
    bk = backup(v1, sid)
    assert any(f.endswith(bk["id"] + ".tar.zst") for _, _, fs in os.walk(where) for f in fs)
    # a second daemon on the same directory sees it
    d2 = make_daemon("--backup-dir", where)
    assert bk["id"] in [x["id"] for x in V1(d2).get("/v1/backup").json()["backups"]]
