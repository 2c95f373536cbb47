"""A fleet: three sandboxd nodes behind HAProxy (the shipped configuration),
ownership in etcd, checkpoints in S3 (s3rver). The cases run in order on one
fleet: sandboxes spread and keep their files, every face routes one ID to one
node, a non-owner answers 307, a drained node's sandboxes answer from the
others with every file, and a SIGKILLed node's come back elsewhere from their
last checkpoint. Each request's serving node is its Sandboxd-Node header."""
import json
import os
from concurrent.futures import ThreadPoolExecutor

import requests

from helpers import wait_until

JSON = {"Accept": "application/json"}
N = 300
ALL = [f"fleet-{i:03d}" for i in range(N)]
# what the later cases (drain, kill, restart) follow: every tenth of them
IDS = ALL[::10]
# sid -> the node that served it when it was made (filled by the first test)
MADE = {}


def req(base, method, path, **kw):
    kw.setdefault("timeout", 120)
    return requests.request(method, base + path, allow_redirects=False, **kw)


def lbreq(base, method, path, **kw):
    """Through HAProxy. It sends an ID to the node the hash picks among the
    healthy ones; when a slow health check had a node out for a moment,
    that node may not hold the sandbox and answers 307 to the one that
    does: followed once, as a client would."""
    r = req(base, method, path, **kw)
    if r.status_code == 307:
        kw.setdefault("timeout", 120)
        r = requests.request(method, r.headers["Location"], allow_redirects=False, **kw)
    return r


def node_of(r):
    return r.headers.get("Sandboxd-Node")


def served_by(lb, path, timeout, on=None):
    """GET path through the balancer until it answers 200 (from a node in
    on, when given), within timeout seconds: the answer, or None."""
    def ok():
        try:
            r = lbreq(lb, "GET", path, timeout=30)
        except requests.RequestException:
            return False
        return r.status_code == 200 and (on is None or node_of(r) in on) and r
    return wait_until(ok, timeout, interval=0.5) or None


def run(base, sid, command):
    r = lbreq(base, "POST", f"/v1/sandbox/{sid}/exec", json={"command": command}, headers=JSON)
    assert r.status_code == 200, f"{sid}: {command!r}: {r.status_code} {r.text[:500]}"
    res = r.json()
    assert res["exitCode"] == 0, f"{sid}: {command!r}: {res}"
    return r, res["stdout"]


def checkpoint_gen(fleet, sid):
    """The generation of sid's latest checkpoint in etcd (0: none)."""
    kvs = fleet.etcd.get_prefix(f"sbx/ckpt/{sid}/")
    return max((json.loads(v)["gen"] for v in kvs.values()), default=0)


def test_creates_spread_over_nodes_and_keep_files_and_cwd(fleet):
    lb = fleet.haproxy.url

    def make(sid):
        r = lbreq(lb, "POST", "/v1/sandbox", json={"id": sid, "labels": {"sid": sid},
                                                 "env": {"FLEET_ENV": sid}})
        assert r.status_code == 201, f"{sid}: {r.status_code} {r.text}"
        node = node_of(r)
        assert node in {"node1", "node2", "node3"}, r.headers
        r, _ = run(lb, sid, f"mkdir -p /workspace/d && echo {sid} > /workspace/d/f.txt && cd /workspace/d")
        assert node_of(r) == node
        return sid, node

    def check(sid):
        r, out = run(lb, sid, "pwd && cat f.txt")
        assert node_of(r) == MADE[sid]
        assert out == f"/workspace/d\n{sid}\n"
        r = lbreq(lb, "GET", f"/v1/sandbox/{sid}/file/d/f.txt")
        assert r.status_code == 200 and r.text == f"{sid}\n" and node_of(r) == MADE[sid]

    # a few clients at once (the machine has two cores)
    with ThreadPoolExecutor(6) as pool:
        MADE.update(pool.map(make, ALL))
        list(pool.map(check, ALL))
    for sid in ALL:
        assert fleet.owner(sid) == MADE[sid], sid
    counts = {n: sum(1 for v in MADE.values() if v == n) for n in ("node1", "node2", "node3")}
    print(f"{N} sandboxes through HAProxy: {counts}")
    assert min(counts.values()) >= 50, counts


def same_sandbox(lb, sid):
    """What it was made with came along: its labels and environment."""
    r = lbreq(lb, "GET", f"/v1/sandbox/{sid}")
    assert r.status_code == 200 and r.json()["labels"] == {"sid": sid}, r.text
    _, out = run(lb, sid, "echo $FLEET_ENV")
    assert out == f"{sid}\n"


def test_one_id_one_node_on_every_face(fleet):
    lb = fleet.haproxy.url
    for room in ("faces-a", "faces-b", "faces-c", "faces-d"):
        sid = f"sandbox-{room}"
        r = lbreq(lb, "POST", "/v1/sandbox", json={"id": sid})
        assert r.status_code == 201, r.text
        node = node_of(r)
        answers = [
            lbreq(lb, "POST", f"/api/rooms/{room}/sandbox/exec", json={"cmd": "echo hi > /workspace/hi"}),
            lbreq(lb, "GET", f"/v1/sandbox/{sid}/file/hi"),
            lbreq(lb, "GET", f"/v1/sandbox/{sid}"),
            lbreq(lb, "POST", f"/v1/sandbox/{sid}/api/execute", json={"command": "true"}),
            lbreq(lb, "GET", "/health", headers={"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983"}),
            lbreq(lb, "GET", f"/sandboxes/{sid}"),
            lbreq(lb, "GET", f"/mcp?sandbox={sid}"),
        ]
        for a in answers:
            assert a.status_code != 307, f"{a.request.method} {a.request.url}: {a.text}"
            # the node that holds it answers, whichever face asks
            assert node_of(a) == node, (a.request.method, a.request.url, a.status_code,
                                        node_of(a), node)
        assert answers[1].status_code == 200 and answers[1].text == "hi\n"
        assert fleet.owner(sid) == node


def test_a_node_that_does_not_own_answers_307(fleet):
    sid = next(s for s in IDS if MADE[s] == "node1")
    other = fleet.by_name("node2")
    r = req(other.url, "GET", f"/v1/sandbox/{sid}/file/d/f.txt?x=1")
    assert r.status_code == 307, r.text
    assert node_of(r) == "node2"
    owner = fleet.by_name("node1")
    assert r.headers["Location"] == f"{owner.url}/v1/sandbox/{sid}/file/d/f.txt?x=1"
    assert r.json()["code"] == "moved"
    r = requests.get(r.headers["Location"], timeout=60)
    assert r.status_code == 200 and r.text == f"{sid}\n" and node_of(r) == "node1"
    assert fleet.owner(sid) == "node1"


def test_an_idle_sandbox_is_checkpointed_and_given_up(fleet):
    lb = fleet.haproxy.url
    sid = "fleet-idle"
    r = lbreq(lb, "POST", "/v1/sandbox", json={"id": sid, "sleepAfter": "2s"})
    assert r.status_code == 201, r.text
    node = node_of(r)
    run(lb, sid, "echo idle > /workspace/idle.txt")
    # stopped for idleness once a checkpoint has it all, its ID given up
    assert wait_until(lambda: fleet.owner(sid) is None and checkpoint_gen(fleet, sid) >= 1,
                      120, interval=0.2), (fleet.owner(sid), checkpoint_gen(fleet, sid))
    # so any node may take it, from that checkpoint
    other = next(n for n in fleet.nodes if n.name != node)
    r = req(other.url, "GET", f"/v1/sandbox/{sid}/file/idle.txt")
    assert r.status_code == 200 and r.text == "idle\n" and node_of(r) == other.name, r.text
    assert fleet.owner(sid) == other.name
    r = req(fleet.by_name(node).url, "GET", f"/v1/sandbox/{sid}/file/idle.txt")
    assert r.status_code in (200, 307), r.text
    if r.status_code == 307:  # unless it went idle again meanwhile
        assert r.headers["Location"].startswith(other.url)


def test_an_upload_to_a_node_that_must_take_the_sandbox_first(fleet):
    """A streamed body (PUT file) waits while the node takes the sandbox
    and restores it; to a node that does not hold it, 307 (body dropped)."""
    sid = "fleet-idle"  # the test above: sleepAfter 2s, so given up again
    assert wait_until(lambda: fleet.owner(sid) is None, 120, interval=0.2)
    data = bytes(range(256)) * 4096  # 1 MiB
    taker = fleet.nodes[2]
    r = req(taker.url, "PUT", f"/v1/sandbox/{sid}/file/up.bin", data=data)
    assert r.status_code in (200, 201, 204), r.text
    assert node_of(r) == taker.name and fleet.owner(sid) == taker.name
    other = fleet.nodes[0]
    r = req(other.url, "PUT", f"/v1/sandbox/{sid}/file/up2.bin", data=data)
    if fleet.owner(sid) == taker.name:  # unless it went idle meanwhile
        assert r.status_code == 307, r.text
        assert r.headers["Location"] == f"{taker.url}/v1/sandbox/{sid}/file/up2.bin"
    r = req(taker.url, "GET", f"/v1/sandbox/{sid}/file/up.bin")
    if r.status_code == 307:  # given up and taken by `other` meanwhile: follow
        r = requests.get(r.headers["Location"], timeout=60)
    assert r.status_code == 200 and r.content == data
    r = requests.get(f"{fleet.haproxy.url}/v1/sandbox/{sid}/file/idle.txt", timeout=60)
    assert r.status_code == 200 and r.text == "idle\n"


def test_a_deleted_sandbox_frees_its_id_and_leaves_no_checkpoint(fleet):
    lb = fleet.haproxy.url
    sid = "fleet-deleted"
    r = lbreq(lb, "POST", "/v1/sandbox", json={"id": sid})
    assert r.status_code == 201, r.text
    node = node_of(r)
    run(lb, sid, "echo x > /workspace/x")
    assert wait_until(lambda: checkpoint_gen(fleet, sid) >= 1, 60, interval=0.2)
    assert lbreq(lb, "DELETE", f"/v1/sandbox/{sid}").status_code == 204
    assert wait_until(lambda: fleet.owner(sid) is None and
                      not fleet.etcd.get_prefix(f"sbx/ckpt/{sid}/"), 60, interval=0.2)
    # made again elsewhere: a new, empty sandbox (no checkpoint restored)
    other = next(n for n in fleet.nodes if n.name != node)
    r = req(other.url, "POST", "/v1/sandbox", json={"id": sid})
    assert r.status_code == 201 and node_of(r) == other.name, r.text
    _, out = run(other.url, sid, "ls /workspace")
    assert out == ""
    assert req(other.url, "DELETE", f"/v1/sandbox/{sid}").status_code == 204


def test_drain_moves_a_nodes_sandboxes_with_every_file(fleet):
    lb = fleet.haproxy.url
    n1 = fleet.by_name("node1")
    mine = [s for s in IDS if fleet.owner(s) == "node1"]
    assert mine
    for sid in mine:  # written after the last periodic checkpoint, maybe
        run(lb, sid, f"echo late-{sid} > /workspace/late.txt")
    r = req(n1.url, "POST", "/v1/admin/drain", timeout=600)
    assert r.status_code == 200, r.text
    assert r.json()["failed"] == 0 and r.json()["node"] == "node1", r.json()
    assert req(n1.url, "GET", "/health").status_code == 503
    # a draining node serves none of them any more
    r = req(n1.url, "GET", f"/v1/sandbox/{mine[0]}/file/late.txt")
    assert r.status_code in (307, 503), r.text

    for sid in mine:
        r = served_by(lb, f"/v1/sandbox/{sid}/file/late.txt", 120, on=("node2", "node3"))
        assert r, f"{sid} did not come back on another node"
        assert r.text == f"late-{sid}\n"
        r2, out = run(lb, sid, "cat /workspace/d/f.txt")
        assert out == f"{sid}\n" and node_of(r2) == node_of(r)
        assert fleet.owner(sid) == node_of(r)
        same_sandbox(lb, sid)


def test_a_killed_nodes_sandboxes_come_back_from_their_checkpoint(fleet):
    lb = fleet.haproxy.url
    n2 = fleet.by_name("node2")
    on2 = [s for s in IDS if fleet.owner(s) == "node2"]
    on3 = [s for s in IDS if fleet.owner(s) == "node3"]
    assert on2 and on3
    for sid in on2:
        before = checkpoint_gen(fleet, sid)
        run(lb, sid, f"echo kept-{sid} > /workspace/k.txt")
        # a checkpoint after the write (every --checkpoint-every)
        assert wait_until(lambda: checkpoint_gen(fleet, sid) > before, 60 + fleet.checkpoint_s,
                          interval=0.2), f"{sid}: no checkpoint after the write"
    n2.kill()

    for sid in on2:
        r = served_by(lb, f"/v1/sandbox/{sid}/file/k.txt", 60 + fleet.ttl_s)
        assert r, f"{sid} did not come back after node2 died"
        assert r.text == f"kept-{sid}\n" and node_of(r) == "node3"
        _, out = run(lb, sid, "cat /workspace/d/f.txt")
        assert out == f"{sid}\n"
        same_sandbox(lb, sid)
    # the survivor's own sandboxes are untouched
    for sid in on3:
        r = lbreq(lb, "GET", f"/v1/sandbox/{sid}/file/d/f.txt")
        assert r.status_code == 200 and r.text == f"{sid}\n" and node_of(r) == "node3"


def test_a_restarted_node_never_serves_what_another_holds(fleet):
    lb = fleet.haproxy.url
    n2 = fleet.by_name("node2")
    n2.restart()  # its state dir still has the sandboxes it held
    for sid in IDS:
        answers = {n.name: req(n.url, "GET", f"/v1/sandbox/{sid}/file/d/f.txt")
                   for n in fleet.nodes}
        served = {name: r for name, r in answers.items() if r.status_code == 200}
        assert len(served) == 1, {k: (r.status_code, r.text[:200]) for k, r in answers.items()}
        (name, r), = served.items()
        assert r.text == f"{sid}\n" and node_of(r) == name == fleet.owner(sid)
        for other, a in answers.items():
            if other != name:  # the drained node1 says 503, the others 307
                assert a.status_code in (307, 503), (other, a.status_code, a.text)
                if a.status_code == 307:
                    assert a.headers["Location"].startswith(fleet.by_name(name).url)
        r = requests.get(f"{lb}/v1/sandbox/{sid}/file/d/f.txt", timeout=60)
        assert r.status_code == 200 and r.text == f"{sid}\n" and node_of(r) == name


def test_a_node_cut_off_from_etcd_stops_serving_until_it_is_back(fleet):
    """etcd paused past the lease's TTL: a node can no longer prove it holds
    a sandbox, so it stops it and answers 503; once etcd is back it serves
    it again (taking its key back), with its files."""
    import os
    import signal
    lb = fleet.haproxy.url
    sid = next(s for s in IDS if fleet.owner(s) in ("node2", "node3"))
    holder = fleet.by_name(fleet.owner(sid))
    os.kill(fleet.etcd.proc.pid, signal.SIGSTOP)
    try:
        seen = []

        def refused():
            try:
                r = req(holder.url, "GET", f"/v1/sandbox/{sid}/file/d/f.txt", timeout=60)
            except requests.RequestException as e:
                seen.append(repr(e))
                return False
            seen.append((r.status_code, r.text[:200]))
            return r.status_code == 503 and [r]  # (a 503 Response is falsy)
        got = wait_until(refused, 120, interval=0.5)
        assert got, f"{holder.name} kept serving {sid} without its lease: {seen[-5:]}"
        assert got[0].json()["code"] == "unavailable"
    finally:
        os.kill(fleet.etcd.proc.pid, signal.SIGCONT)

    r = served_by(lb, f"/v1/sandbox/{sid}/file/d/f.txt", 120)
    assert r and r.text == f"{sid}\n"
    assert fleet.owner(sid) == node_of(r)


# ---- incremental checkpoints -------------------------------------------------

MIB = 1 << 20


def ckpt_record(fleet, sid):
    """sid's checkpoint record in etcd (its chain: [{backup, bytes, delta}])."""
    kvs = fleet.etcd.get_prefix(f"sbx/ckpt/{sid}/")
    assert len(kvs) <= 1, kvs
    return json.loads(next(iter(kvs.values()))) if kvs else None


def stored_size(fleet, backup):
    """The size of a checkpoint's archive as s3rver keeps it on disk."""
    found = []
    for root, _, files in os.walk(fleet.s3.dir):
        for name in files:
            if name in (f"{backup}.tar.zst", f"{backup}.tar.zst._S3rver_object"):
                found.append(os.path.join(root, name))
    assert len(found) == 1, (backup, found)
    return os.path.getsize(found[0])


def stored_objects(fleet):
    return {name for _, _, files in os.walk(fleet.s3.dir) for name in files}


def next_checkpoint(fleet, sid, after):
    """Wait for a checkpoint of sid newer than generation after."""
    assert wait_until(lambda: checkpoint_gen(fleet, sid) > after, 120, interval=0.2), \
        f"{sid}: no checkpoint after generation {after}"
    return ckpt_record(fleet, sid)


def live_nodes(fleet):
    def healthy(n):
        try:
            return n.running() and req(n.url, "GET", "/health", timeout=10).status_code == 200
        except requests.RequestException:
            return False
    return [n for n in fleet.nodes if healthy(n)]


def test_a_broken_chain_fails_the_restore_and_changes_nothing(fleet):
    """A delta damaged in the store: the node taking the sandbox says so
    (503 with the reason) on every request, never serves part of it; once
    the delta is whole again it serves all of it."""
    a, b = live_nodes(fleet)[:2]
    sid = "fleet-broken"
    r = req(a.url, "POST", "/v1/sandbox", json={"id": sid, "sleepAfter": "2s"})
    assert r.status_code == 201 and node_of(r) == a.name, r.text
    run(a.url, sid, "echo one > /workspace/one && echo two > /workspace/two")
    # idle: checkpointed (a full one) and given up
    assert wait_until(lambda: fleet.owner(sid) is None and checkpoint_gen(fleet, sid) >= 1,
                      120, interval=0.2)
    gen = checkpoint_gen(fleet, sid)
    # b takes it, changes it, goes idle: a delta
    run(b.url, sid, "echo ONE > /workspace/one && rm /workspace/two && echo three > /workspace/three")
    assert wait_until(lambda: fleet.owner(sid) is None and checkpoint_gen(fleet, sid) > gen,
                      120, interval=0.2)
    chain = ckpt_record(fleet, sid)["chain"]
    assert len(chain) == 2 and chain[1]["delta"], chain
    found = [os.path.join(root, name) for root, _, files in os.walk(fleet.s3.dir)
             for name in files if name == f"{chain[1]['backup']}.tar.zst._S3rver_object"]
    assert len(found) == 1, found
    with open(found[0], "rb") as f:
        good = f.read()
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0xFF
    with open(found[0], "wb") as f:
        f.write(bad)
    try:
        # a still has the first checkpoint: it must not serve it as the latest
        for _ in range(2):
            r = req(a.url, "GET", f"/v1/sandbox/{sid}/file/three")
            assert r.status_code == 503, (r.status_code, r.text)
            assert r.json()["code"] == "unavailable"
            assert "checksum" in r.json()["error"] and chain[1]["backup"] in r.json()["error"], r.text
            assert fleet.owner(sid) is None
    finally:
        with open(found[0], "wb") as f:
            f.write(good)
    r = req(a.url, "GET", f"/v1/sandbox/{sid}/file/three")
    assert r.status_code == 200 and r.text == "three\n" and node_of(r) == a.name, r.text
    _, out = run(a.url, sid, "cat /workspace/one; ls /workspace")
    assert out == "ONE\none\nthree\n"


TREE = "(cd /workspace && find . -path ./big -prune -o -print | sort && sha256sum big/* small/*)"


def test_a_small_change_uploads_a_small_delta_and_a_restore_applies_the_chain(fleet):
    """The unit is the file: a 1-byte change uploads that file (and the
    paths deleted), not the sandbox; the node that takes it applies the
    whole chain, and the session's cwd and exports come with it."""
    lb = fleet.haproxy.url
    sid = "fleet-incr"
    r = lbreq(lb, "POST", "/v1/sandbox", json={"id": sid})
    assert r.status_code == 201, r.text
    run(lb, sid, "mkdir -p /workspace/big /workspace/small /workspace/olddir/sub && "
                 "for i in $(seq 1 20); do head -c 1048576 /dev/urandom > /workspace/big/f$i; done && "
                 "echo hello > /workspace/small/a.txt && echo bye > /workspace/small/gone.txt && "
                 "echo x > /workspace/olddir/sub/x && echo keep > /workspace/small/b.txt")
    # until one full checkpoint has all 20 MiB (one made while the files
    # were being written has part of them; the next one is then a delta,
    # and a full one comes again once the chain is at its longest: small
    # changes make it grow)
    rec = next_checkpoint(fleet, sid, 0)
    for i in range(12):
        chain = rec["chain"]
        if len(chain) == 1 and chain[0]["bytes"] >= 20 * MIB:
            break
        run(lb, sid, f"echo {i} > /workspace/big/tick")
        rec = next_checkpoint(fleet, sid, rec["gen"])
    assert len(chain) == 1 and not chain[0]["delta"] and chain[0]["bytes"] >= 20 * MIB, rec
    assert stored_size(fleet, chain[0]["backup"]) == chain[0]["bytes"]
    full = chain[0]
    # used but not changed: a checkpoint (for its sessions) without a link
    run(lb, sid, "true")
    rec = next_checkpoint(fleet, sid, rec["gen"])
    assert rec["chain"] == [full], rec

    # one byte changed, a file and a directory deleted, a file added
    run(lb, sid, "printf J | dd of=/workspace/small/a.txt bs=1 seek=0 conv=notrunc 2>/dev/null && "
                 "rm /workspace/small/gone.txt && rm -r /workspace/olddir && "
                 "echo new > /workspace/small/new.txt")
    rec = next_checkpoint(fleet, sid, rec["gen"])
    chain = rec["chain"]
    assert [c["backup"] for c in chain[:1]] == [full["backup"]], rec
    delta = chain[-1]
    assert delta["delta"] and delta["bytes"] < 20 * MIB // 10, rec
    assert stored_size(fleet, delta["backup"]) == delta["bytes"]
    print(f"full checkpoint {full['bytes']} bytes, delta after a 1-byte change "
          f"{delta['bytes']} bytes")
    # a second change, and the session's cwd and an exported variable:
    # the chain grows, the session comes along
    run(lb, sid, "printf K | dd of=/workspace/small/b.txt bs=1 seek=1 conv=notrunc 2>/dev/null && "
                 "cd /workspace/small && export MOVED_VAR=moved-along")
    rec = next_checkpoint(fleet, sid, rec["gen"])
    chain = rec["chain"]
    assert len(chain) >= 3 and all(c["delta"] for c in chain[1:]), rec
    assert chain[-1]["bytes"] < 20 * MIB // 10
    _, want = run(lb, sid, TREE)
    assert "./small/gone.txt" not in want and "./olddir" not in want

    # the node dies: the sandbox comes back elsewhere from the chain
    owner = fleet.by_name(fleet.owner(sid))
    owner.kill()

    r = served_by(lb, f"/v1/sandbox/{sid}/file/small/a.txt", 60 + fleet.ttl_s)
    assert r, f"{sid} did not come back after {owner.name} died"
    assert node_of(r) != owner.name
    assert r.text == "Jello\n"
    r2, got = run(lb, sid, TREE)
    assert got == want
    _, out = run(lb, sid, "cat /workspace/small/b.txt /workspace/small/new.txt; "
                          "ls /workspace/small && ls /workspace")
    assert out == "kKep\nnew\na.txt\nb.txt\nnew.txt\nbig\nsmall\n", out
    # the next command starts where the last one on the dead node left off
    _, out = run(lb, sid, "pwd && echo $MOVED_VAR")
    assert out == "/workspace/small\nmoved-along\n", out
