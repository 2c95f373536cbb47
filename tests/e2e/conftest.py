"""Fixtures for the end-to-end tests of sandboxd (run as root, with
/usr/bin/python3 -m pytest tests/e2e; SBX_BIN names the daemon binary).

- `daemon`: one default daemon per test module, for the many cheap tests.
- `make_daemon(*flags)`: a fresh daemon per call with extra flags, closed at
  the end of the test.
- `room` / `new_room()`: room IDs unique to the test.
Every daemon is stopped with SIGTERM at teardown and must exit with status 0;
one that crashed fails the test loudly with its log tail.
"""
import hashlib
import itertools
import re

import pytest

import helpers
from helpers import Daemon


@pytest.fixture(scope="module")
def daemon():
    d = Daemon()
    yield d
    d.close()


@pytest.fixture
def make_daemon():
    made = []

    def make(*flags):
        d = Daemon(flags)
        made.append(d)
        return d

    yield make
    problems = []
    for d in made:
        try:
            d.close()
        except (Exception, pytest.fail.Exception) as e:  # close them all first
            problems.append(str(e))
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture
def new_room(request):
    """Returns a maker of room IDs unique to this test (valid, <= 55 chars)."""
    nodeid = request.node.nodeid
    stem = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[:36]
    tag = hashlib.sha1(nodeid.encode()).hexdigest()[:6]
    counter = itertools.count(1)
    return lambda: f"{stem}-{tag}-{next(counter)}"


@pytest.fixture
def room(new_room):
    return new_room()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for d in list(helpers.LIVE):
            rep.sections.append((f"sandboxd log tail ({d.url}, pid {d.proc.pid if d.proc else '-'})",
                                 d.log_tail(40)))


# --- /v1 (tests/e2e/test_v1_*.py) ------------------------------------------------

@pytest.fixture
def v1(daemon):
    """A /v1 client for the module's daemon (no token)."""
    return helpers.V1(daemon)


@pytest.fixture
def new_sid(new_room):
    """Returns a maker of /v1 sandbox IDs ([a-z0-9-], <= 63) unique to the test."""
    return lambda: re.sub(r"[^a-z0-9-]+", "-", new_room().lower())


@pytest.fixture
def sid(new_sid):
    return new_sid()
