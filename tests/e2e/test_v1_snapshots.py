"""/v1 snapshots, fork and restore (shared/spec/v1.md "Snapshots and fork"):
what a user sees of them on the btrfs store (the default here) and on the
plain-directory store, the isolation between a fork and its origin, and what
a daemon killed in the middle of a snapshot leaves."""
import os
import random
import re
import tempfile
import threading
import time

import pytest
import requests

from helpers import V1, Daemon, assert_error, wait_until

ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
SNAP_ID = re.compile(r"^snap_[0-9a-f]{12}$")

# An apt-installed-style change: a binary, a library, docs and a dpkg
# record under /usr and /var, and a host file removed (a whiteout).
INSTALL = """
set -e
mkdir -p /usr/local/bin /usr/lib/e2e-pkg /usr/share/doc/e2e-pkg /var/lib/dpkg/info
printf '#!/bin/sh\\necho e2e-tool v1\\n' > /usr/local/bin/e2e-tool
chmod 755 /usr/local/bin/e2e-tool
head -c 300000 /dev/urandom > /usr/lib/e2e-pkg/libe2e.so
echo 'e2e-pkg 1.0' > /usr/share/doc/e2e-pkg/copyright
echo /usr/local/bin/e2e-tool > /var/lib/dpkg/info/e2e-pkg.list
rm -f /usr/share/doc/bash/README* /usr/share/doc/bash/copyright
echo v1 > /workspace/state
sha256sum /usr/lib/e2e-pkg/libe2e.so | cut -d' ' -f1
"""

CHECK = """
e2e-tool 2>&1
cat /usr/share/doc/e2e-pkg/copyright 2>&1
cat /var/lib/dpkg/info/e2e-pkg.list 2>&1
ls /usr/share/doc/bash/copyright 2>&1 | sed 's/.*No such.*/gone/'
cat /workspace/state 2>&1
sha256sum /usr/lib/e2e-pkg/libe2e.so 2>&1 | cut -d' ' -f1
"""


def snapshot(v1, sid, **body):
    r = v1.post(f"/v1/sandbox/{sid}/snapshot", json=body)
    assert r.status_code == 201, f"snapshot {sid}: {r.status_code} {r.text}"
    return r.json()


def fork(v1, sid, new=None):
    r = v1.post(f"/v1/sandbox/{sid}/fork", json={"id": new} if new else {})
    assert r.status_code == 201, f"fork {sid}: {r.status_code} {r.text}"
    return r.json()


def restore(v1, sid, snap):
    r = v1.post(f"/v1/sandbox/{sid}/restore", json={"snapshot": snap})
    assert r.status_code == 200, f"restore {sid}: {r.status_code} {r.text}"
    return r.json()


def snapshots(v1, **params):
    r = v1.get("/v1/snapshot", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_snapshot_answer_list_info_delete(v1, sid):
    v1.sh(sid, "echo hello > /workspace/a")
    snap = snapshot(v1, sid, name="before the change")
    assert SNAP_ID.match(snap["id"]), snap
    assert snap["sandboxId"] == sid
    assert snap["name"] == "before the change"
    assert ISO_MS.match(snap["createdAt"])
    assert isinstance(snap["sizeBytes"], int) and snap["sizeBytes"] > 0
    assert snap["copyOnWrite"] is True and snap["method"] == "snapshot", snap
    unnamed = snapshot(v1, sid)
    assert unnamed["name"] is None and unnamed["id"] != snap["id"]

    listed = snapshots(v1)
    ids = [s["id"] for s in listed["snapshots"]]
    assert snap["id"] in ids and unnamed["id"] in ids
    assert ids.index(snap["id"]) < ids.index(unnamed["id"]), "oldest first"
    assert listed["tenantUsage"]["diskBytes"] > 0, listed
    mine = snapshots(v1, sandbox=sid)["snapshots"]
    assert {s["id"] for s in mine} == {snap["id"], unnamed["id"]}

    r = v1.get(f"/v1/snapshot/{snap['id']}")
    assert r.status_code == 200 and r.json() == snap, r.text
    r = v1.delete(f"/v1/snapshot/{unnamed['id']}")
    assert r.status_code == 204, r.text
    assert_error(v1.get(f"/v1/snapshot/{unnamed['id']}"), 404, "snapshot_not_found")
    assert_error(v1.delete(f"/v1/snapshot/{unnamed['id']}"), 404, "snapshot_not_found")
    assert unnamed["id"] not in [s["id"] for s in snapshots(v1)["snapshots"]]


def test_snapshot_input_errors(v1, sid):
    assert_error(v1.post("/v1/sandbox/nope-never-made/snapshot", json={}), 404,
                 "sandbox_not_found")
    assert_error(v1.post("/v1/sandbox/Bad_Id/snapshot", json={}), 400, "invalid_request")
    v1.create(sid)
    for name in ("", "x" * 129, 5, ["a"]):
        assert_error(v1.post(f"/v1/sandbox/{sid}/snapshot", json={"name": name}), 400,
                     "invalid_request")
    assert_error(v1.post(f"/v1/sandbox/{sid}/snapshot", data=b"{", headers={
        "Content-Type": "application/json"}), 400, "invalid_request")
    assert_error(v1.get("/v1/snapshot/snap_000000000000"), 404, "snapshot_not_found")
    for body in ({}, {"snapshot": 1}, {"snapshot": "a", "backup": "b"}):
        assert_error(v1.post(f"/v1/sandbox/{sid}/restore", json=body), 400,
                     "invalid_request")
    assert_error(v1.post(f"/v1/sandbox/{sid}/restore",
                         json={"snapshot": "snap_000000000000"}), 404, "snapshot_not_found")
    assert_error(v1.post("/v1/sandbox", json={"fromSnapshot": "snap_000000000000"}),
                 404, "snapshot_not_found")
    assert_error(v1.post("/v1/sandbox", json={"fromSnapshot": 7}), 400, "invalid_request")
    assert_error(v1.post(f"/v1/sandbox/{sid}/fork", json={"id": "Not Valid"}), 400,
                 "invalid_request")
    assert_error(v1.post(f"/v1/sandbox/{sid}/fork", json={"id": sid}), 409,
                 "sandbox_exists")
    assert_error(v1.post("/v1/sandbox/nope-never-made/fork", json={}), 404,
                 "sandbox_not_found")


def test_whole_filesystem_fork_and_restore(v1, new_sid):
    """The snapshot holds every path the sandbox changed (not only
    /workspace); a fork and its origin never see each other's changes; a
    restore brings the snapshot's files back."""
    a = new_sid()
    digest = v1.sh(a, INSTALL).strip()
    want = f"e2e-tool v1\ne2e-pkg 1.0\n/usr/local/bin/e2e-tool\ngone\nv1\n{digest}\n"
    assert v1.sh(a, CHECK) == want
    snap = snapshot(v1, a, name="installed")

    # change the origin after the snapshot
    v1.sh(a, "echo v2 > /workspace/state; rm /usr/local/bin/e2e-tool; "
             "mkdir /usr/local/e2e; echo extra > /usr/local/e2e/only-in-origin")
    b = fork(v1, a, new_sid())
    assert b["forkedFrom"] == a
    assert b["state"] in ("running", "stopped")
    bid = b["id"]
    # the fork starts as the origin is now
    assert v1.sh(bid, "cat /workspace/state; ls /usr/local/e2e/; "
                      "ls /usr/local/bin/e2e-tool 2>&1 | grep -c 'No such'") == \
        "v2\nonly-in-origin\n1\n"
    # and the two diverge both ways
    v1.sh(bid, "echo fork > /workspace/state; echo b > /usr/local/e2e/only-in-fork")
    v1.sh(a, "echo origin > /workspace/state; echo a > /workspace/only-in-origin")
    assert v1.sh(a, "cat /workspace/state; ls /usr/local/e2e /workspace") == \
        "origin\n/usr/local/e2e:\nonly-in-origin\n\n/workspace:\nonly-in-origin\nstate\n"
    assert v1.sh(bid, "cat /workspace/state; ls /usr/local/e2e /workspace") == \
        "fork\n/usr/local/e2e:\nonly-in-fork\nonly-in-origin\n\n/workspace:\nstate\n"
    # each is its own user: different host uids, files still their root's
    assert v1.host_uid(a) != v1.host_uid(bid)
    assert v1.sh(bid, "stat -c %u:%g /workspace/state /usr/local/e2e/only-in-origin") == \
        "0:0\n0:0\n"
    assert v1.sh(bid, "touch /workspace/new && stat -c %u:%g /workspace/new") == "0:0\n"
    v1.sh(bid, "rm /workspace/new")

    # restore the origin in place: the installed state is back
    restored = restore(v1, a, snap["id"])
    assert restored["id"] == a and restored["restoredFrom"] == snap["id"]
    assert v1.sh(a, CHECK) == want
    assert v1.sh(a, "ls /workspace") == "state\n"
    # the fork did not change
    assert v1.sh(bid, "cat /workspace/state") == "fork\n"

    # a new sandbox from the snapshot, in the same create call
    c = new_sid()
    r = v1.post("/v1/sandbox", json={"id": c, "fromSnapshot": snap["id"],
                                     "labels": {"from": "snap"}})
    assert r.status_code == 201, r.text
    assert r.json()["id"] == c and r.json()["labels"] == {"from": "snap"}
    assert v1.sh(c, CHECK) == want
    # and a restore of another sandbox's snapshot into the fork
    restore(v1, bid, snap["id"])
    assert v1.sh(bid, CHECK) == want
    v1.sh(bid, "echo mine > /workspace/state")
    assert v1.sh(c, "cat /workspace/state") == "v1\n"


def test_restore_ends_processes(v1, sid):
    v1.sh(sid, "echo 1 > /workspace/n")
    snap = snapshot(v1, sid)
    p = v1.start_process(sid, command="sleep 1000")
    v1.sh(sid, "echo 2 > /workspace/n")
    restore(v1, sid, snap["id"])
    assert v1.process(sid, p["id"])["status"] != "running"
    assert "sleep 1000" not in v1.sh(sid, "ps -eo args")
    assert v1.sh(sid, "cat /workspace/n") == "1\n"


def test_processes_go_on_after_a_snapshot(v1, sid):
    """The freeze lasts for the snapshot only: a running process keeps
    running, and a fork of a running sandbox leaves it running too."""
    p = v1.start_process(sid, command="i=0; while :; do i=$((i+1)); echo $i > /workspace/tick; "
                                      "sleep 0.05; done")
    wait_until(lambda: v1.run(sid, "cat /workspace/tick")["exitCode"] == 0, 10)
    snapshot(v1, sid)
    fork(v1, sid)
    before = int(v1.sh(sid, "cat /workspace/tick"))
    assert wait_until(lambda: int(v1.sh(sid, "cat /workspace/tick")) > before, 20), \
        "the process did not go on after the snapshot"
    assert v1.process(sid, p["id"])["status"] == "running"


def test_snapshots_outlive_their_sandbox_unless_asked(v1, new_sid):
    a, b = new_sid(), new_sid()
    v1.sh(a, "echo keep > /workspace/k")
    kept = snapshot(v1, a)
    v1.sh(b, "echo gone > /workspace/k")
    dropped = snapshot(v1, b)
    assert v1.delete(f"/v1/sandbox/{a}").status_code == 204
    assert v1.delete(f"/v1/sandbox/{b}?snapshots=true").status_code == 204
    assert v1.get(f"/v1/snapshot/{kept['id']}").status_code == 200
    assert_error(v1.get(f"/v1/snapshot/{dropped['id']}"), 404, "snapshot_not_found")
    # the kept one still makes sandboxes, even one named as its origin was
    r = v1.post("/v1/sandbox", json={"id": a, "fromSnapshot": kept["id"]})
    assert r.status_code == 201, r.text
    assert v1.sh(a, "cat /workspace/k") == "keep\n"


def test_snapshots_are_tenant_scoped(make_daemon, new_sid):
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
    snap = snapshot(alpha, a)
    assert snapshots(beta)["snapshots"] == []
    assert_error(beta.get(f"/v1/snapshot/{snap['id']}"), 404, "snapshot_not_found")
    assert_error(beta.delete(f"/v1/snapshot/{snap['id']}"), 404, "snapshot_not_found")
    assert_error(beta.post("/v1/sandbox", json={"fromSnapshot": snap["id"]}), 404,
                 "snapshot_not_found")
    assert_error(beta.post(f"/v1/sandbox/{new_sid()}/restore",
                           json={"snapshot": snap["id"]}), 404, "snapshot_not_found")
    assert alpha.get(f"/v1/snapshot/{snap['id']}").status_code == 200
    assert_error(V1(d).get("/v1/snapshot"), 401, "unauthorized")


def test_snapshots_count_against_the_tenant_disk(make_daemon, new_sid):
    """With --tenant-disk, what a snapshot keeps alive counts: the same
    rewrite that fits without a snapshot fails once one holds the old data."""
    d = make_daemon("--tenant-disk", "320M", "--disk", "1G")
    v1 = V1(d)
    write = "dd if=/dev/urandom of=/workspace/{} bs=1M count=200 status=none && sync"
    a = new_sid()
    v1.sh(a, write.format("one"))
    # no snapshot: replacing the file fits
    v1.sh(a, "rm /workspace/one && sync && " + write.format("two"))
    snapshot(v1, a)
    usage = snapshots(v1)["tenantUsage"]
    assert usage["limitBytes"] == 320 << 20 and usage["diskBytes"] >= 200 << 20, usage
    res = v1.run(a, "rm /workspace/two && sync && " + write.format("three"))
    assert res["exitCode"] != 0, res
    assert "quota" in res["stderr"].lower() or "space" in res["stderr"].lower(), res


def test_plain_store_copies_and_says_so(make_daemon, new_sid):
    d = make_daemon("--store-size", "0")
    v1 = V1(d)
    a = new_sid()
    digest = v1.sh(a, INSTALL + "ln /workspace/state /workspace/hard\n"
                                "ln -s state /workspace/soft\nmkfifo /workspace/fifo\n").strip()
    snap = snapshot(v1, a)
    assert snap["copyOnWrite"] is False and snap["method"] == "copy", snap
    assert "copy" in snap["note"]
    v1.sh(a, "echo changed > /workspace/state")
    b = fork(v1, a)
    assert "copied" in b["note"]
    assert v1.sh(b["id"], "cat /workspace/state") == "changed\n"
    restore(v1, a, snap["id"])
    out = v1.sh(a, CHECK + "stat -c '%h %F' /workspace/state /workspace/hard /workspace/fifo\n"
                           "readlink /workspace/soft\n")
    assert out == (f"e2e-tool v1\ne2e-pkg 1.0\n/usr/local/bin/e2e-tool\ngone\nv1\n{digest}\n"
                   "2 regular file\n2 regular file\n1 fifo\nstate\n"), out
    assert v1.sh(b["id"], "cat /workspace/state") == "changed\n"


def _store_names(d):
    root = os.path.join(d.state_dir, "sandboxes")
    names = os.listdir(os.path.join(root, ".snapshots"))
    return names + [n for n in os.listdir(root) if n.startswith(".tmp-")]


@pytest.mark.parametrize("store", ["btrfs", "plain"])
def test_daemon_killed_during_a_snapshot(make_daemon, new_sid, store):
    """SIGKILL while snapshots are being taken: after a restart the sandbox's
    files are intact, every listed snapshot is whole, and nothing half made
    is left on the store."""
    # a uid base of its own: after the SIGKILL, a daemon of another test
    # run on this host (same default base) may take the dead one's ranges
    # before the restart, which the restart then refuses
    base = str(0x90000000 + random.randrange(0, 0x4000) * 65536)
    d = make_daemon("--uid-base", base,
                    *(["--store-size", "0"] if store == "plain" else []))
    v1 = V1(d)
    a = new_sid()
    # enough unwritten data (btrfs flushes it first) or files (the plain
    # store copies them) that a snapshot takes a while
    v1.sh(a, "mkdir /workspace/many && cd /workspace/many && "
             "for i in $(seq 1 3000); do echo $i > f$i; done && "
             "dd if=/dev/urandom of=/workspace/big bs=1M count=150 status=none && "
             "sha256sum /workspace/big > /workspace/big.sum", timeout=120)
    answers = []

    def take():
        try:
            answers.append(v1.post(f"/v1/sandbox/{a}/snapshot", json={}, timeout=60))
        except requests.RequestException as e:
            answers.append(e)

    t = threading.Thread(target=take)
    t.start()
    time.sleep(0.3)
    d.kill()
    t.join(60)
    d.start()
    for s in snapshots(v1)["snapshots"]:
        c = v1.post("/v1/sandbox", json={"fromSnapshot": s["id"]})
        assert c.status_code == 201, c.text
        cid = c.json()["id"]
        assert v1.sh(cid, "ls /workspace/many | wc -l; cd /workspace && sha256sum -c big.sum",
                     timeout=120) == "3000\n/workspace/big: OK\n"
    assert not [n for n in _store_names(d) if n.startswith(".tmp-")], _store_names(d)
    listed = {s["id"] for s in snapshots(v1)["snapshots"]}
    on_store = {n for n in os.listdir(os.path.join(d.state_dir, "sandboxes", ".snapshots"))}
    assert on_store == listed
    assert v1.sh(a, "ls /workspace/many | wc -l; cd /workspace && sha256sum -c big.sum",
                 timeout=120) == "3000\n/workspace/big: OK\n"
    # and it snapshots again
    snapshot(v1, a)
