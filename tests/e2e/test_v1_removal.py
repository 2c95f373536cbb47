"""Removing a sandbox's files (issue 10): a removal that fails keeps the
sandbox's slot, and so its old files, away from every new sandbox until it
succeeds (item 9); a tree 50,000 levels deep built inside a sandbox goes,
and the daemon that removes it keeps its fds (item 10)."""
import os
import sqlite3
import subprocess

import pytest

import helpers
from helpers import UID_RANGE, V1, assert_error, wait_until

def sandbox_dir(d, v1, sid):
    """The host dir of a sandbox's files, from the uid range it runs as and
    the base the state dir records."""
    with open(os.path.join(d.state_dir, "uid-base")) as f:
        base = int(f.read())
    slot = (v1.host_uid(sid) - base) // UID_RANGE
    return os.path.join(d.state_dir, "sandboxes", f"s{slot}")


def chattr(flag, *paths):
    subprocess.run(["chattr", flag, *paths], check=False,
                   stderr=subprocess.DEVNULL)


def immutable_works(path):
    probe = os.path.join(path, ".probe")
    open(probe, "w").close()
    ok = subprocess.run(["chattr", "+i", probe], stderr=subprocess.DEVNULL).returncode == 0
    chattr("-i", probe)
    os.unlink(probe)
    return ok


@pytest.mark.parametrize("store", ["btrfs", "plain"])
def test_failed_removal_keeps_the_slot_out_of_use(make_daemon, new_sid, store):
    d = make_daemon(*(["--store-size", "0"] if store == "plain" else []))
    v1 = V1(d)
    old = new_sid()
    v1.create(old)
    v1.sh(old, "echo secret > /workspace/secret.txt")
    old_uid = v1.host_uid(old)
    sbdir = sandbox_dir(d, v1, old)
    secret = os.path.join(sbdir, "root/upper/workspace/secret.txt")
    assert os.path.exists(secret)
    if not immutable_works(os.path.dirname(secret)):
        pytest.skip("chattr +i does not work on this state dir")
    # the obstacle: the operator (or a backup tool) made these immutable;
    # neither deleting the subvolume nor moving the dir to the trash works
    chattr("+i", secret, sbdir)
    try:
        r = v1.delete(f"/v1/sandbox/{old}")
        # the DELETE answers at once; the files go when the sandbox's stop
        # has ended: the obstacle stays until that removal has failed
        def removal_failed():
            with open(d.log_path, "rb") as f:
                return b"event=remove-failed" in f.read()
        assert wait_until(removal_failed, 60), d.log_tail(20)
        assert os.path.exists(secret), "the obstacle did not hold"
        new = new_sid()
        v1.create(new)
        res = v1.run(new, "ls -A /workspace; cat /workspace/secret.txt")
        assert "secret" not in res["stdout"], res
        assert v1.host_uid(new) != old_uid, "the slot of the failed removal was reused"
        # for the client the sandbox is gone all the same
        assert r.status_code == 204, r.text
        assert_error(v1.get(f"/v1/sandbox/{old}"), 404, "sandbox_not_found")
    finally:
        chattr("-i", secret, sbdir)
    # the obstacle gone, a later housekeeping tick removes the files and
    # the slot is used again, empty
    assert wait_until(lambda: not os.path.exists(sbdir), 60), \
        f"{sbdir} still there:\n{d.log_tail(20)}"
    # the slot is taken back at the tick after (retries back off up to 1 min)
    def reclaimed():
        with open(d.log_path, "rb") as f:
            return b"event=reclaimed" in f.read()
    assert wait_until(reclaimed, 90), d.log_tail(20)
    third = new_sid()
    v1.create(third)
    assert v1.host_uid(third) == old_uid, "the slot was not reclaimed"
    assert v1.sh(third, "ls -A /workspace") == ""
    d.check_alive()


def test_leftover_files_found_at_start_are_not_reused(make_daemon, new_sid):
    """Files of a slot no sandbox owns (the daemon died mid-removal, or the
    registry row is gone): never handed to a new sandbox."""
    d = make_daemon("--store-size", "0")
    v1 = V1(d)
    sid = new_sid()
    v1.create(sid)
    v1.sh(sid, "echo old > /workspace/old.txt")
    old_uid = v1.host_uid(sid)
    sbdir = sandbox_dir(d, v1, sid)
    d.stop()
    # as if the registry row went and the files stayed
    db = sqlite3.connect(os.path.join(d.state_dir, "registry.db"))
    with db:
        db.execute("DELETE FROM sandboxes")
    db.close()
    chattr("+i", sbdir)
    try:
        d.start()
        new = new_sid()
        v1.create(new)
        assert "old.txt" not in v1.sh(new, "ls -A /workspace")
        assert v1.host_uid(new) != old_uid
    finally:
        chattr("-i", sbdir)
    assert wait_until(lambda: not os.path.exists(sbdir), 60), d.log_tail(20)


DEEP = 50_000
MAKE_DEEP = ["python3", "-c",
             "import os\n"
             "os.chdir('/workspace')\n"
             f"for i in range({DEEP}):\n"
             "    os.mkdir('d')\n"
             "    os.chdir('d')\n"
             "open('bottom', 'w').write('x')\n"]


def test_deep_tree_is_removed_and_the_daemon_keeps_its_fds(make_daemon, new_sid,
                                                           monkeypatch):
    # plain directories: the daemon's own walk removes them (a subvolume in
    # the store is deleted whole, whatever it holds); on tmpfs when there is
    # room, where 50,000 rmdirs take seconds instead of minutes of disk
    # writes
    st = os.statvfs("/dev/shm") if os.path.isdir("/dev/shm") else None
    if st and st.f_bavail * st.f_frsize > (1 << 30) and os.access("/dev/shm", os.W_OK):
        monkeypatch.setattr(helpers, "TMP_ROOT", "/dev/shm")
    d = make_daemon("--store-size", "0")
    v1 = V1(d)
    fds = d.fd_count()
    sid = new_sid()
    v1.create(sid)
    sandboxes = os.path.join(d.state_dir, "sandboxes")
    trash = os.path.join(d.state_dir, "trash")
    try:
        res = v1.run(sid, argv=MAKE_DEEP, timeout=300)
        assert res["exitCode"] == 0, res
        r = v1.delete(f"/v1/sandbox/{sid}", timeout=120)
        assert r.status_code == 204, r.text
        def slots():  # the store's own directories (.snapshots) aside
            return [n for n in os.listdir(sandboxes) if not n.startswith(".")]
        gone = wait_until(lambda: not slots() and not os.listdir(trash),
                          300, interval=0.5)
        assert gone, (slots(), os.listdir(trash), d.log_tail(20))
        d.check_alive()
        # no fd left behind (the walk ran in a child; the daemon's own stay)
        assert wait_until(lambda: d.fd_count() <= fds, 10), (fds, d.fd_count())
    finally:
        # what a failed run left (too deep for the teardown's rmtree)
        for top in (trash, sandboxes):
            for name in os.listdir(top):
                subprocess.run(["rm", "-rf", "--one-file-system",
                                os.path.join(top, name)])


def test_deep_tree_delete_through_the_file_api(v1, sid):
    res = v1.run(sid, argv=MAKE_DEEP, timeout=300)
    assert res["exitCode"] == 0, res
    r = v1.delete(f"/v1/sandbox/{sid}/file/d?recursive=1", timeout=300)
    assert r.status_code == 204, r.text
    assert v1.sh(sid, "ls -A /workspace") == ""
