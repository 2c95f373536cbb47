"""The E2B face over plain HTTP, for what the Python e2b SDK does differently
from the JS one (shared/spec/e2b.md 2.2, 3.3): the v1 create and connect
routes (201 and every field its models require), the e2b_<hex> key check
against --tokens, the polling watcher calls, and the envd rules both SDKs
rely on (access token per sandbox, Connect error shapes, /health per
sandbox, one entry per uploaded file)."""
import base64
import json
import struct

import pytest
import requests

KEY = "e2b_" + "ab" * 20
OTHER = "e2b_" + "cd" * 20

SANDBOX_FIELDS = {"templateID", "sandboxID", "clientID", "envdVersion"}
DETAIL_FIELDS = SANDBOX_FIELDS | {"startedAt", "endAt", "cpuCount", "memoryMB",
                                  "diskSizeMB", "state"}


@pytest.fixture(scope="module")
def e2b(make_daemon_module):
    return make_daemon_module


@pytest.fixture(scope="module")
def make_daemon_module(tmp_path_factory):
    from helpers import Daemon
    tokens = tmp_path_factory.mktemp("e2b") / "tokens"
    tokens.write_text(f"{KEY} alice operator\n{OTHER} bob\n")
    tokens.chmod(0o600)
    d = Daemon(["--tokens", str(tokens)])
    yield d
    d.close()


def api(d, method, path, key=KEY, **kw):
    h = kw.pop("headers", {})
    if key:
        h["X-API-Key"] = key
    return requests.request(method, d.url + path, headers=h, timeout=60, **kw)


def create(d, key=KEY, **body):
    r = api(d, "POST", "/sandboxes", key=key,
            json={"templateID": "base", "timeout": 300, "metadata": {},
                  "envVars": {}, "secure": True, **body})
    assert r.status_code == 201, r.text
    return r.json()


def envd(d, sbx, path, token=None, user=None, **kw):
    h = kw.pop("headers", {})
    h["E2b-Sandbox-Id"] = sbx["sandboxID"]
    h["E2b-Sandbox-Port"] = "49983"
    h["X-Access-Token"] = sbx["envdAccessToken"] if token is None else token
    if user:
        h["Authorization"] = "Basic " + base64.b64encode(f"{user}:".encode()).decode()
    method = kw.pop("method", "POST")
    return requests.request(method, d.url + path, headers=h, timeout=60, **kw)


def rpc(d, sbx, method, msg, **kw):
    return envd(d, sbx, "/" + method, json=msg,
                headers={"Connect-Protocol-Version": "1"}, **kw)


def envelopes(body):
    out = []
    while body:
        flags, n = struct.unpack(">BI", body[:5])
        out.append((flags, json.loads(body[5:5 + n])))
        body = body[5 + n:]
    return out


def stream(d, sbx, method, msg, **kw):
    payload = json.dumps(msg).encode()
    r = envd(d, sbx, "/" + method, data=struct.pack(">BI", 0, len(payload)) + payload,
             headers={"Content-Type": "application/connect+json",
                      "Connect-Protocol-Version": "1"}, **kw)
    return r, envelopes(r.content) if r.status_code == 200 else []


def test_v1_create_is_201_with_every_field_python_requires(e2b):
    sbx = create(e2b, metadata={"k": "v"})
    assert SANDBOX_FIELDS <= set(sbx), sbx
    assert sbx["envdAccessToken"] and sbx["envdVersion"].count(".") == 2
    r = api(e2b, "GET", f"/sandboxes/{sbx['sandboxID']}")
    assert r.status_code == 200
    assert DETAIL_FIELDS <= set(r.json()), r.json()
    assert r.json()["metadata"] == {"k": "v"}
    listed = api(e2b, "GET", "/v2/sandboxes").json()
    mine = [s for s in listed if s["sandboxID"] == sbx["sandboxID"]]
    assert len(mine) == 1 and DETAIL_FIELDS <= set(mine[0]), mine
    m = api(e2b, "GET", f"/sandboxes/{sbx['sandboxID']}/metrics").json()
    assert len(m) == 1 and "timestampUnix" in m[0], m
    assert api(e2b, "DELETE", f"/sandboxes/{sbx['sandboxID']}").status_code == 204


def test_v1_connect_resumes_paused_with_201_and_running_with_200(e2b):
    sbx = create(e2b)
    sid = sbx["sandboxID"]
    r = api(e2b, "POST", f"/sandboxes/{sid}/connect", json={"timeout": 300})
    assert r.status_code == 200 and SANDBOX_FIELDS <= set(r.json())
    assert api(e2b, "POST", f"/sandboxes/{sid}/pause", json={}).status_code == 204
    r = api(e2b, "POST", f"/sandboxes/{sid}/pause", json={})
    assert r.status_code == 409 and r.json()["code"] == 409
    r = api(e2b, "POST", f"/v2/sandboxes/{sid}/connect", json={"timeout": 300})
    assert r.status_code == 201, r.text
    assert api(e2b, "DELETE", f"/sandboxes/{sid}").status_code == 204


def test_errors_carry_code_and_message_in_the_body(e2b):
    r = api(e2b, "DELETE", "/sandboxes/inosuch")
    assert r.status_code == 404 and r.json()["code"] == 404 and r.json()["message"]
    r = api(e2b, "POST", "/sandboxes", json={"templateID": "base", "timeout": -1})
    assert r.status_code == 400 and set(r.json()) >= {"code", "message"}


def test_api_keys_are_tokens_of_their_tenant(e2b):
    assert api(e2b, "GET", "/v2/sandboxes", key=None).status_code == 401
    r = api(e2b, "GET", "/v2/sandboxes", key="e2b_00ff")
    assert r.status_code == 401 and r.json()["code"] == 401
    sbx = create(e2b)
    sid = sbx["sandboxID"]
    assert sid not in [s["sandboxID"] for s in api(e2b, "GET", "/v2/sandboxes", key=OTHER).json()]
    assert api(e2b, "GET", f"/sandboxes/{sid}", key=OTHER).status_code == 404
    assert api(e2b, "DELETE", f"/sandboxes/{sid}", key=OTHER).status_code == 404
    assert api(e2b, "DELETE", f"/sandboxes/{sid}").status_code == 204


def test_envd_needs_the_sandboxs_access_token(e2b):
    a, b = create(e2b), create(e2b, key=OTHER)
    r = envd(e2b, a, "/health", method="GET")
    assert r.status_code == 204
    # b's token does not open a, whoever knows a's id
    r = envd(e2b, a, "/health", method="GET", token=b["envdAccessToken"])
    assert r.status_code == 502
    r = rpc(e2b, a, "process.Process/List", {}, token="")
    assert r.status_code == 502
    for s in (a, b):
        api(e2b, "DELETE", f"/sandboxes/{s['sandboxID']}", key=KEY if s is a else OTHER)
    # a killed sandbox is not running: 502, as the SDKs expect
    assert envd(e2b, a, "/health", method="GET").status_code == 502


def test_connect_errors_unary_and_streaming(e2b):
    sbx = create(e2b)
    r = rpc(e2b, sbx, "filesystem.Filesystem/Stat", {"path": "/nope"})
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    r = rpc(e2b, sbx, "filesystem.Filesystem/MakeDir", {"path": "/tmp"})
    assert r.status_code == 409 and r.json()["code"] == "already_exists"
    r = rpc(e2b, sbx, "process.Process/SendSignal",
            {"process": {"pid": 999999}, "signal": "SIGNAL_SIGKILL"})
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    r = rpc(e2b, sbx, "process.Process/List", {}, user="nobody")
    assert r.status_code == 401 and r.json()["code"] == "unauthenticated"
    # a streaming call's error is a 200 with the error in the end-stream
    r, env = stream(e2b, sbx, "process.Process/Connect", {"process": {"pid": 999999}})
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/connect+json")
    assert env == [(2, {"error": {"code": "not_found", "message": "process not found"}})]
    # start, data, end, then the end-stream
    r, env = stream(e2b, sbx, "process.Process/Start",
                    {"process": {"cmd": "/bin/sh", "args": ["-c", "echo hi; exit 3"]},
                     "stdin": False}, user="root")
    assert r.status_code == 200
    assert list(env[0][1]["event"]) == ["start"] and env[0][1]["event"]["start"]["pid"] > 0
    data = b"".join(base64.b64decode(m["event"]["data"]["stdout"])
                    for f, m in env if f == 0 and "data" in m.get("event", {}))
    assert data == b"hi\n"
    end = [m["event"]["end"] for f, m in env if f == 0 and "end" in m.get("event", {})]
    assert end == [{"exitCode": 3, "exited": True, "status": "exit status 3",
                    "error": "exit status 3"}]
    assert env[-1] == (2, {})
    api(e2b, "DELETE", f"/sandboxes/{sbx['sandboxID']}")


def test_polling_watcher_create_get_remove(e2b):
    sbx = create(e2b)
    r = rpc(e2b, sbx, "filesystem.Filesystem/CreateWatcher",
            {"path": "/home/user", "recursive": False})
    assert r.status_code == 200, r.text
    wid = r.json()["watcherId"]
    r, env = stream(e2b, sbx, "process.Process/Start",
                    {"process": {"cmd": "/bin/sh", "args": ["-c", "echo x > /home/user/polled.txt"]},
                     "stdin": False})
    assert env[-1] == (2, {})
    events = []
    import time
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not any(
            e["name"] == "polled.txt" and e["type"] == "EVENT_TYPE_CREATE" for e in events):
        r = rpc(e2b, sbx, "filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid})
        assert r.status_code == 200, r.text
        events += r.json()["events"]
        time.sleep(0.05)
    assert {"name": "polled.txt", "type": "EVENT_TYPE_CREATE"} in events, events
    assert any(e["type"] == "EVENT_TYPE_WRITE" for e in events), events
    assert rpc(e2b, sbx, "filesystem.Filesystem/RemoveWatcher",
               {"watcherId": wid}).status_code == 200
    r = rpc(e2b, sbx, "filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid})
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    r = rpc(e2b, sbx, "filesystem.Filesystem/CreateWatcher", {"path": "/home/user/none"})
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    api(e2b, "DELETE", f"/sandboxes/{sbx['sandboxID']}")


def test_upload_answers_one_entry_per_file(e2b):
    sbx = create(e2b)
    files = {"file": ("/home/user/up.txt", b"uploaded", "application/octet-stream")}
    r = envd(e2b, sbx, "/files", files=files)
    assert r.status_code == 200, r.text
    assert r.json() == [{"path": "/home/user/up.txt", "name": "up.txt", "type": "file"}]
    r = envd(e2b, sbx, "/files?path=/home/user/up.txt", method="GET")
    assert r.status_code == 200 and r.content == b"uploaded"
    r = envd(e2b, sbx, "/files?path=/home/user/missing", method="GET")
    assert r.status_code == 404 and r.json()["code"] == 404
    # a cut-short body leaves nothing behind
    r = envd(e2b, sbx, "/files?path=/home/user/cut.txt", data=b"--x\r\nbroken",
             headers={"Content-Type": "multipart/form-data; boundary=x"})
    assert r.status_code == 400
    cut = (b'--x\r\nContent-Disposition: form-data; name="file"; '
           b'filename="/home/user/cut2.txt"\r\n\r\n' + b"partial data" * 1000)
    r = envd(e2b, sbx, "/files", data=cut,
             headers={"Content-Type": "multipart/form-data; boundary=x"})
    assert r.status_code == 400 and "ended early" in r.json()["message"], r.text
    # a file name longer than any path is refused, never cut to another one
    long_name = b"/home/user/" + b"d/" * 2200 + b"f.txt"
    r = envd(e2b, sbx, "/files",
             data=(b'--x\r\nContent-Disposition: form-data; name="file"; '
                   b'filename="' + long_name + b'"\r\n\r\ndata\r\n--x--\r\n'),
             headers={"Content-Type": "multipart/form-data; boundary=x"})
    assert r.status_code == 400 and "not a valid file path" in r.json()["message"], r.text
    r = rpc(e2b, sbx, "filesystem.Filesystem/ListDir", {"path": "/home/user"})
    assert sorted(e["name"] for e in r.json()["entries"]) == ["up.txt"], r.json()
    api(e2b, "DELETE", f"/sandboxes/{sbx['sandboxID']}")


def test_streams_end_without_leaking_and_commands_outlive_them(e2b):
    sbx = create(e2b)
    stream(e2b, sbx, "process.Process/Start",
           {"process": {"cmd": "/bin/true"}, "stdin": False})
    before = e2b.fd_count()
    payload = json.dumps({"process": {"cmd": "/bin/sleep", "args": ["1000"]},
                          "stdin": False}).encode()
    pids = []
    for _ in range(3):
        r = envd(e2b, sbx, "/process.Process/Start",
                 data=struct.pack(">BI", 0, len(payload)) + payload, stream=True,
                 headers={"Content-Type": "application/connect+json",
                          "Connect-Protocol-Version": "1"})
        head = r.raw.read(5)
        n = struct.unpack(">BI", head)[1]
        pids.append(json.loads(r.raw.read(n))["event"]["start"]["pid"])
        r.close()  # the client leaves; the command runs on
    listed = rpc(e2b, sbx, "process.Process/List", {}).json()["processes"]
    assert sorted(p["pid"] for p in listed) == sorted(pids), listed
    for pid in pids:
        r = rpc(e2b, sbx, "process.Process/SendSignal",
                {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
        assert r.status_code == 200, r.text
    from helpers import wait_until
    assert wait_until(lambda: not rpc(e2b, sbx, "process.Process/List", {}).json()["processes"], 10)
    # garbage in: no crash, no fd kept
    for body in (b"", b"\0\0\0", b"\x01\0\0\0\x02{}", b"\0\0\0\0\x05nope!"):
        r = envd(e2b, sbx, "/process.Process/Start", data=body,
                 headers={"Content-Type": "application/connect+json"})
        assert r.status_code == 200 and envelopes(r.content)[-1][1]["error"]["code"] == "invalid_argument"
    r = envd(e2b, sbx, "/filesystem.Filesystem/Stat", data=b"{not json",
             headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["code"] == "invalid_argument"
    assert wait_until(lambda: e2b.fd_count() <= before, 10), (before, e2b.fd_count())
    api(e2b, "DELETE", f"/sandboxes/{sbx['sandboxID']}")


def test_a_template_can_be_an_image(e2b, tmp_path):
    """templateID names an image imported through /v1 (by an operator's
    key): the sandbox runs it; a name that is nothing is 400."""
    import oci
    path = str(tmp_path / "bb")
    oci.oci_layout(path, [oci.busybox_layer()],
                   oci.config(env=["PATH=/usr/bin:/bin"], cmd=["sh"]))
    auth = {"Authorization": "Bearer " + KEY}
    r = requests.post(e2b.url + "/v1/image", headers=auth, timeout=300,
                      json={"name": "bb-e2b", "source": f"oci-layout:{path}"})
    assert r.status_code == 201, r.text
    sbx = create(e2b, templateID="bb-e2b")
    assert sbx["templateID"] == "bb-e2b"
    info = requests.get(e2b.url + f"/v1/sandbox/{sbx['sandboxID']}",
                        headers=auth, timeout=60).json()
    assert info["image"]["name"] == "bb-e2b", info
    r = requests.post(e2b.url + f"/v1/sandbox/{sbx['sandboxID']}/exec",
                      headers={**auth, "Accept": "application/json"}, timeout=60,
                      json={"argv": ["busybox", "echo", "from the image"]})
    assert r.status_code == 200 and r.json()["stdout"] == "from the image\n", r.text
    bad = api(e2b, "POST", "/sandboxes",
              json={"templateID": "no-such-image", "timeout": 300})
    assert bad.status_code == 400 and "no-such-image" in bad.text, bad.text
    api(e2b, "DELETE", f"/sandboxes/{sbx['sandboxID']}")
