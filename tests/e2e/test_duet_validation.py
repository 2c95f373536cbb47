"""Request validation: room IDs, JSON bodies, body size, methods, routes."""
import json
import socket

import pytest
import requests

ECHO = json.dumps({"cmd": "echo hi"}).encode()


def exec_path(room):
    return f"/api/rooms/{room}/sandbox/exec"


def assert_invalid(status, headers, body, field):
    assert status == 400, body
    assert headers["Content-Type"].startswith("application/json")
    doc = json.loads(body)
    assert doc["error"] == "invalid request", doc
    msgs = doc["details"][field]
    assert isinstance(msgs, list) and msgs, doc
    assert all(isinstance(m, str) and m for m in msgs), doc
    return msgs


def assert_plain_404(status, headers, body):
    assert status == 404, body
    assert headers["Content-Type"].startswith("text/plain"), headers


# --- room IDs ---------------------------------------------------------------

@pytest.mark.parametrize("room", [
    "a", "Room_1.2-x", "9", "a..b", "-dash", "_under", "x" * 55,
])
def test_valid_room_ids(daemon, room):
    status, _, body = daemon.raw("POST", exec_path(room), ECHO)
    assert status == 200, body
    doc = json.loads(body)
    assert doc["sandboxName"] == f"sandbox-{room}"
    assert doc["result"]["stdout"] == "hi\n"


@pytest.mark.parametrize("room", [
    ".hidden", "x" * 56, "a%20b", "a@b", "a:b", "a+b", "a~b", "a%25b",
    "%C3%A9", "caf%C3%A9", "a%2Cb", "a!b",
])
def test_invalid_room_ids_are_400(daemon, room):
    status, headers, body = daemon.raw("POST", exec_path(room), ECHO)
    assert_invalid(status, headers, body, "roomId")


@pytest.mark.parametrize("room", [".", ".."])
def test_dot_room_ids_never_run(daemon, room):
    status, _, body = daemon.raw("POST", exec_path(room), ECHO)
    assert status in (400, 404), body


@pytest.mark.parametrize("path", [
    exec_path("a%2Fb"), exec_path("a%2fb"), exec_path("%2F"), exec_path("a/b"),
    exec_path("a%00b"), exec_path(""), "/api/rooms/sandbox/exec",
])
def test_route_changing_room_ids_are_404(daemon, path):
    assert_plain_404(*daemon.raw("POST", path, ECHO))


def test_delete_validates_room_id(daemon):
    assert_invalid(*daemon.raw("DELETE", "/api/rooms/.hidden"), "roomId")
    assert_invalid(*daemon.raw("DELETE", "/api/rooms/" + "x" * 56), "roomId")
    assert_plain_404(*daemon.raw("DELETE", "/api/rooms/a%2Fb"))


# --- bodies ------------------------------------------------------------------

@pytest.mark.parametrize("body", [b'{"cmd":', b"not json", b"{'cmd': 'ls'}",
                                  b'{"cmd": "ls"} trailing', b"\xff\xfe"])
def test_invalid_json_is_400_body(daemon, room, body):
    assert_invalid(*daemon.raw("POST", exec_path(room), body), "body")


def test_empty_body_is_400_body(daemon, room):
    status, headers, body = daemon.raw("POST", exec_path(room),
                                       headers={"Content-Type": "application/json",
                                                "Content-Length": "0"})
    assert_invalid(status, headers, body, "body")


@pytest.mark.parametrize("body", [b"[]", b'["echo hi"]', b'"echo hi"', b"42", b"null", b"true"])
def test_non_object_json_is_400_body(daemon, room, body):
    assert_invalid(*daemon.raw("POST", exec_path(room), body), "body")


@pytest.mark.parametrize("doc", [{}, {"command": "ls"}, {"cmd": 42}, {"cmd": None},
                                 {"cmd": ["ls"]}, {"cmd": {"a": 1}}, {"cmd": True},
                                 {"cmd": 1.5}])
def test_missing_or_non_string_cmd_is_400(daemon, room, doc):
    msgs = assert_invalid(*daemon.raw("POST", exec_path(room), json.dumps(doc).encode()), "cmd")
    assert any("expected string" in m.lower() for m in msgs), msgs


def test_empty_cmd_exact_error(daemon, room):
    r = requests.post(f"{daemon.url}{exec_path(room)}", json={"cmd": ""}, timeout=10)
    assert r.status_code == 400
    assert r.json() == {"error": "invalid request",
                        "details": {"cmd": ["Command cannot be empty"]}}


def test_unknown_fields_are_ignored(daemon, room):
    r = requests.post(f"{daemon.url}{exec_path(room)}",
                      json={"cmd": "echo hi", "userId": "u1", "extra": [1]}, timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["result"]["stdout"] == "hi\n"


def test_body_just_under_1mib_is_accepted(daemon, room):
    head, tail = b'{"cmd": "echo fits"', b"}"
    body = head + b" " * (1024 * 1024 - len(head) - len(tail) - 16) + tail
    status, _, resp = daemon.raw("POST", exec_path(room), body)
    assert status == 200, resp[:500]
    assert json.loads(resp)["result"]["stdout"] == "fits\n"


def test_body_over_1mib_is_413(daemon, room):
    body = b'{"cmd": "echo ' + b"a" * (1024 * 1024) + b'"}'
    req = (f"POST {exec_path(room)} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
           "Connection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as s:
        try:
            s.sendall(req + body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon may answer and close before reading it all
        data = b""
        try:
            while chunk := s.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass
    assert data, "connection closed without a response"
    head, _, payload = data.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"413", head
    assert "error" in json.loads(payload), payload
    # the daemon is still fine
    assert daemon.run(room, "echo after")["stdout"] == "after\n"


# --- methods and routes ----------------------------------------------------------

@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE"])
def test_exec_path_only_accepts_post(daemon, room, method):
    status, headers, body = daemon.raw(method, exec_path(room))
    assert status == 405, body
    assert headers["Content-Type"].startswith("application/json")
    assert json.loads(body) == {"error": "method not allowed - only POST is supported"}


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH"])
def test_room_path_only_accepts_delete(daemon, room, method):
    status, headers, body = daemon.raw(method, f"/api/rooms/{room}")
    assert status == 405, body
    assert headers["Content-Type"].startswith("application/json")
    assert json.loads(body) == {"error": "method not allowed - only DELETE is supported"}


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("path", [
    "/", "/nope", "/api", "/api/rooms", "/api/rooms/", "/api/rooms/r1/sandbox",
    "/api/rooms/r1/sandbox/exec/more", "/api/rooms/r1/sandbox/execute",
    "/api/rooms/r1/other",
])
def test_unknown_paths_are_404_text(daemon, method, path):
    assert_plain_404(*daemon.raw(method, path, ECHO if method == "POST" else b""))


def test_nul_in_path_cannot_reach_another_room(daemon, room):
    # a decoder that stops at the NUL would see DELETE /api/rooms/<room>
    daemon.run(room, "echo mine > /workspace/keep.txt")
    assert_plain_404(*daemon.raw("DELETE", f"/api/rooms/{room}%00x/sandbox/exec"))
    assert_plain_404(*daemon.raw("DELETE", f"/api/rooms/{room}%00"))
    assert daemon.run(room, "cat /workspace/keep.txt")["stdout"] == "mine\n"
