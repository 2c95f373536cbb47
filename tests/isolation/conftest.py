"""Fixtures of the isolation suite (run as root:
/usr/bin/python3 -m pytest -q tests/isolation; SBX_BIN names the daemon).

- `probe_bin`: the static probe, compiled once per session.
- `daemon`: one sandboxd for the whole session, with the suite's small
  limits (isolation_lib.DAEMON_FLAGS).
- `sandbox()`: a new room (sandbox) of `daemon` (or of another daemon) with
  the probe pushed in on first use.
- `make_daemon(flags)`: an extra daemon for this test only.
- Autouse: after every test, each room it used is deleted and the host
  post-conditions of part B check 49 are asserted (no process of the
  sandbox's uid range, no cgroup, no mount, no files, the daemon's fd count
  not grown, the daemon alive).
"""
import hashlib
import itertools
import os
import re

import pytest

import isolation_lib as lib


@pytest.fixture(scope="session")
def probe_bin(tmp_path_factory):
    return lib.compile_probe(str(tmp_path_factory.mktemp("probe")))


@pytest.fixture(scope="session")
def daemon():
    d = lib.Daemon()
    yield d
    d.close()


class _Tracker:
    def __init__(self):
        self.sandboxes = []
        self.fd_before = {}
        self.daemons = []  # made for this test only: closed last


@pytest.fixture(autouse=True)
def _postconditions(request):
    t = _Tracker()
    request.node._iso_tracker = t
    yield t
    problems = []
    # all rooms first: a slot freed by one is reused by the next
    for sb in t.sandboxes:
        try:
            if not sb.deleted and sb.d.alive():
                sb.delete()
        except (AssertionError, OSError) as e:
            problems.append(f"{sb.name}: {e}")
    for sb in t.sandboxes:
        try:
            lib.assert_sandbox_gone(sb.d, sb)
        except AssertionError as e:
            problems.append(f"{sb.name}: {e}")
    for d, before in t.fd_before.items():
        if not d.alive():
            problems.append(f"daemon {d.url} died:\n{d.log_tail(30)}")
            continue
        after = lib.wait_until(lambda: d.fd_count() <= before and d.fd_count(), 5)
        if not after:
            fds = {}
            for fd in os.listdir(f"/proc/{d.pid}/fd"):
                try:
                    fds[fd] = os.readlink(f"/proc/{d.pid}/fd/{fd}")
                except OSError:
                    pass
            problems.append(f"daemon fd count grew: {before} -> {d.fd_count()}: {fds}")
    for d in t.daemons:
        try:
            d.close()
        except AssertionError as e:
            problems.append(str(e))
    if problems:
        pytest.fail("host post-conditions (check 49):\n" + "\n".join(problems),
                    pytrace=False)


@pytest.fixture
def sandbox(request, daemon, probe_bin, _postconditions):
    """sandbox(d=None) -> a new lib.Sandbox on daemon d (default: the
    session daemon), tracked for the post-conditions."""
    stem = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[:34]
    tag = hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:6]
    counter = itertools.count(1)

    def make(d=None):
        d = d or daemon
        if d not in _postconditions.fd_before:
            _postconditions.fd_before[d] = d.fd_count()
        sb = lib.Sandbox(d, f"{stem}-{tag}-{next(counter)}", probe_bin)
        _postconditions.sandboxes.append(sb)
        return sb

    return make


@pytest.fixture
def make_daemon(_postconditions):
    """make_daemon(flags, nofile=None) -> an extra lib.Daemon, closed after
    this test's post-conditions."""
    def make(flags=lib.DAEMON_FLAGS, **kw):
        d = lib.Daemon(flags, **kw)
        _postconditions.daemons.append(d)
        return d

    return make


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for d in list(lib.LIVE):
            rep.sections.append((f"sandboxd log tail ({d.url})", d.log_tail(30)))
