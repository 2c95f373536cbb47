"""GET /v1/sandbox/{id}/watch/{path}: inotify inside the sandbox, as SSE
(ready first, then one change per create/write/remove/rename, recursive on
request; 404 for a missing directory, 403 outside /workspace)."""
import json

import requests

from helpers import assert_error, sse_events, wait_until


def open_watch(v1, sid, path, recursive=False):
    q = "?recursive=1" if recursive else ""
    r = v1.get(f"/v1/sandbox/{sid}/watch/{path}{q}", stream=True, timeout=60)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/event-stream")
    ev = sse_events(r)
    first = next(e for e in ev if e.event is not None)
    assert first.event == "ready", first
    return r, ev


def changes_until(ev, pred):
    """Change events (type, path) up to and including the first matching pred."""
    got = []
    for e in ev:
        if e.event != "change":
            continue
        d = json.loads(e.data)
        got.append((d["type"], d["path"]))
        if pred(got[-1]):
            return got
    raise AssertionError(f"stream ended before the awaited change: {got}")


def test_watch_reports_create_write_rename_remove(v1, sid):
    v1.create(sid)
    v1.sh(sid, "mkdir -p /workspace/w")
    r, ev = open_watch(v1, sid, "w")
    with r:
        v1.sh(sid, "cd /workspace/w && echo hi > a.txt && echo more >> a.txt"
                   " && mv a.txt b.txt && rm b.txt && touch done")
        got = changes_until(ev, lambda c: c == ("create", "done"))
    assert ("create", "a.txt") in got
    assert ("write", "a.txt") in got
    assert ("rename", "a.txt") in got
    assert ("create", "b.txt") in got
    assert ("remove", "b.txt") in got
    order = [got.index(c) for c in (("create", "a.txt"), ("rename", "a.txt"),
                                    ("remove", "b.txt"))]
    assert order == sorted(order), got


def test_watch_recursive_sees_new_subdirectories(v1, sid):
    v1.create(sid)
    v1.sh(sid, "mkdir -p /workspace/r/old")
    r, ev = open_watch(v1, sid, "r", recursive=True)
    with r:
        v1.sh(sid, "cd /workspace/r && touch old/x && mkdir new")
        # the new directory is watched before its create event is sent
        changes_until(ev, lambda c: c == ("create", "new"))
        v1.sh(sid, "touch /workspace/r/new/y")
        got = changes_until(ev, lambda c: c == ("create", "new/y"))
    assert ("create", "new/y") in got


def test_watch_not_recursive_ignores_subdirectories(v1, sid):
    v1.create(sid)
    v1.sh(sid, "mkdir -p /workspace/n/sub")
    r, ev = open_watch(v1, sid, "n")
    with r:
        v1.sh(sid, "touch /workspace/n/sub/deep && touch /workspace/n/top")
        got = changes_until(ev, lambda c: c == ("create", "top"))
    assert not any(p.startswith("sub/") for _, p in got), got


def test_watch_missing_directory_is_404(v1, sid):
    v1.create(sid)
    r = v1.get(f"/v1/sandbox/{sid}/watch/nope")
    assert_error(r, 404, "file_not_found")
    v1.sh(sid, "echo x > /workspace/file")
    r = v1.get(f"/v1/sandbox/{sid}/watch/file")
    assert_error(r, 404, "file_not_found")


def test_watch_outside_workspace_is_403(v1, sid):
    v1.create(sid)
    r = v1.get(f"/v1/sandbox/{sid}/watch/../etc")
    assert r.status_code in (403, 404)
    r = requests.get(v1.d.url + f"/v1/sandbox/{sid}/watch/%2E%2E/etc", timeout=30)
    assert r.status_code in (403, 404)
    v1.sh(sid, "ln -s /etc /workspace/link")
    r = v1.get(f"/v1/sandbox/{sid}/watch/link")
    assert_error(r, 403, "path_outside_workspace")


def test_watch_ends_when_the_client_leaves(v1, sid, daemon):
    v1.create(sid)
    count = "ls /proc | grep -c '^[0-9]'"
    procs = int(v1.sh(sid, count))
    before = daemon.fd_count()
    for _ in range(3):
        r, ev = open_watch(v1, sid, "")
        assert int(v1.sh(sid, count)) > procs  # the watcher runs
        r.close()
    # the watches end with their clients: the watchers are gone from the
    # sandbox and their pipes from the daemon
    assert wait_until(lambda: int(v1.sh(sid, count)) == procs, 10)
    assert wait_until(lambda: daemon.fd_count() <= before, 10), (before, daemon.fd_count())
