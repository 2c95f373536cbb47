"""The port proxy (shared/spec/v1.md "Ports"): HTTP and WebSocket to a
server inside a sandbox (on its loopback, in every network mode), the
preview domain, and expiring public links."""
import base64
import hashlib
import os
import socket
import time

import pytest
import requests

import helpers

# A one-connection-at-a-time WebSocket echo server (RFC 6455, text frames
# under 126 bytes), stdlib only, run in the sandbox on 127.0.0.1.
WS_SERVER = r'''
import base64, hashlib, socket
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8765)); s.listen(8)
open("/tmp/ws.ready", "w").close()
while True:
    c, _ = s.accept()
    req = b""
    while b"\r\n\r\n" not in req:
        req += c.recv(4096)
    key = [l.split(b":", 1)[1].strip() for l in req.split(b"\r\n")
           if l.lower().startswith(b"sec-websocket-key:")][0]
    acc = base64.b64encode(hashlib.sha1(key + GUID.encode()).digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + acc + b"\r\n\r\n")
    while True:
        h = c.recv(2)
        if len(h) < 2 or h[0] & 0x0f == 8:
            break
        n = h[1] & 0x7f
        mask = c.recv(4)
        data = b""
        while len(data) < n:
            data += c.recv(n - len(data))
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        c.sendall(bytes([0x81, len(b"echo:" + data)]) + b"echo:" + data)
    c.close()
'''


def start_http_server(v1, sid, port=8000, bind="127.0.0.1"):
    v1.sh(sid, "mkdir -p /tmp/www && echo 'hello from inside' > /tmp/www/hello.txt")
    v1.start_process(sid, command=f"cd /tmp/www && exec python3 -m http.server {port} "
                                  f"--bind {bind}")
    helpers.wait_until(lambda: v1.get(f"/v1/sandbox/{sid}/port/{port}/hello.txt")
                       .status_code == 200, 30)


def test_http_to_a_server_on_the_sandboxs_loopback(v1, sid):
    v1.create(sid)  # network mode none: the proxy still reaches it
    start_http_server(v1, sid)
    r = v1.get(f"/v1/sandbox/{sid}/port/8000/hello.txt")
    assert r.status_code == 200 and r.text == "hello from inside\n"
    assert r.headers["Content-Type"].startswith("text/plain")
    r = v1.get(f"/v1/sandbox/{sid}/port/8000/no-such-file")
    assert r.status_code == 404  # the server's own answer
    r = v1.get(f"/v1/sandbox/{sid}/port/8000/")
    assert r.status_code == 200 and "hello.txt" in r.text  # a directory listing
    # a query string and a body reach the server
    v1.start_process(sid, command="exec python3 -c 'import http.server as h\n"
                                  "class H(h.BaseHTTPRequestHandler):\n"
                                  "  def do_POST(s):\n"
                                  "    b = s.rfile.read(int(s.headers[\"Content-Length\"]))\n"
                                  "    out = (s.path + \" \" + b.decode() + \" \" + str(s.headers.get(\"Authorization\"))).encode()\n"
                                  "    s.send_response(201); s.send_header(\"Content-Length\", str(len(out))); s.end_headers(); s.wfile.write(out)\n"
                                  "h.HTTPServer((\"127.0.0.1\", 8001), H).serve_forever()'")
    helpers.wait_until(lambda: v1.post(f"/v1/sandbox/{sid}/port/8001/x",
                                       data=b"").status_code == 201, 30)
    # (the daemon's bearer token is never passed on to the sandbox)
    r = v1.post(f"/v1/sandbox/{sid}/port/8001/echo/a%20b?q=1&r=x%26y", data=b"payload",
                headers={"Authorization": "Bearer not-for-the-sandbox"})
    assert r.status_code == 201
    assert r.text == "/echo/a%20b?q=1&r=x%26y payload None", r.text


def test_nothing_listening_is_502(v1, sid):
    v1.create(sid)
    v1.sh(sid, "true")
    r = v1.get(f"/v1/sandbox/{sid}/port/9/")
    helpers.assert_error(r, 502, "port_not_listening")
    helpers.assert_error(v1.get(f"/v1/sandbox/{sid}/port/0/"), 400, "invalid_request")
    helpers.assert_error(v1.get(f"/v1/sandbox/{sid}/port/70000/"), 400, "invalid_request")
    helpers.assert_error(v1.get("/v1/sandbox/no-such-box/port/80/"), 404,
                         "sandbox_not_found")


def ws_roundtrip(url_host, url_port, path, message):
    """Upgrade to WebSocket through the daemon, send one masked text frame,
    return the echoed text."""
    s = socket.create_connection((url_host, url_port), timeout=20)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET {path} HTTP/1.1\r\nHost: {url_host}:{url_port}\r\n"
               "Upgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        assert chunk, head
        head += chunk
    head, rest = head.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 101"), head
    want = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
                                         .encode()).digest())
    assert b"Sec-WebSocket-Accept: " + want in head, head
    data = message.encode()
    mask = os.urandom(4)
    s.sendall(bytes([0x81, 0x80 | len(data)]) + mask +
              bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
    buf = rest
    while len(buf) < 2 or len(buf) < 2 + buf[1]:
        chunk = s.recv(4096)
        assert chunk, buf
        buf += chunk
    s.close()
    return buf[2:2 + buf[1]].decode()


def test_websocket_echo(v1, daemon, sid):
    v1.create(sid)
    v1.sh(sid, f"cat > /tmp/ws.py <<'EOF'\n{WS_SERVER}\nEOF\n")
    v1.start_process(sid, command="exec python3 /tmp/ws.py")
    helpers.wait_until(lambda: v1.run(sid, "test -e /tmp/ws.ready")["exitCode"] == 0, 30)
    assert ws_roundtrip("127.0.0.1", daemon.port, f"/v1/sandbox/{sid}/port/8765/ws",
                        "hi there") == "echo:hi there"
    # and a second one: the daemon is still fine
    assert ws_roundtrip("127.0.0.1", daemon.port, f"/v1/sandbox/{sid}/port/8765/ws",
                        "again") == "echo:again"


def test_exposed_link_works_without_token_until_it_expires(make_daemon, tmp_path, sid):
    tokens = tmp_path / "tokens"
    tokens.write_text("secret-token-0123456789 alice\n")
    d = make_daemon("--tokens", str(tokens))
    v = helpers.V1(d, token="secret-token-0123456789")
    v.create(sid)
    start_http_server(v, sid)
    # without the token the port path is refused
    r = requests.get(f"{d.url}/v1/sandbox/{sid}/port/8000/hello.txt", timeout=30)
    helpers.assert_error(r, 401, "unauthorized")
    r = v.post(f"/v1/sandbox/{sid}/port/8000/expose", json={"ttlSeconds": 2})
    assert r.status_code == 201, r.text
    link = r.json()
    assert set(link) == {"url", "token", "expiresAt"}
    assert link["url"].endswith(f"/v1/preview/{link['token']}/")
    r = requests.get(link["url"] + "hello.txt", timeout=30)
    assert r.status_code == 200 and r.text == "hello from inside\n"
    helpers.wait_until(lambda: time.sleep(0.5) or
                       requests.get(link["url"] + "hello.txt", timeout=30).status_code == 403,
                       30)
    r = requests.get(link["url"] + "hello.txt", timeout=30)
    helpers.assert_error(r, 403, "link_expired")
    # revoking
    link2 = v.post(f"/v1/sandbox/{sid}/port/8000/expose", json={}).json()
    assert requests.get(link2["url"] + "hello.txt", timeout=30).status_code == 200
    r = v.delete(f"/v1/sandbox/{sid}/port/8000/expose")
    assert r.status_code == 200 and r.json()["revoked"] >= 1
    helpers.assert_error(requests.get(link2["url"] + "hello.txt", timeout=30), 403,
                         "forbidden")
    helpers.assert_error(v.post(f"/v1/sandbox/{sid}/port/8000/expose",
                                json={"ttlSeconds": 0}), 400, "invalid_request")


def test_preview_domain(make_daemon, sid):
    d = make_daemon("--preview-domain", "preview.test")
    v = helpers.V1(d)
    v.create(sid)
    start_http_server(v, sid)
    r = requests.get(f"{d.url}/hello.txt", headers={"Host": f"8000-{sid}.preview.test"},
                     timeout=30)
    assert r.status_code == 200 and r.text == "hello from inside\n"
    r = requests.get(f"{d.url}/hello.txt", headers={"Host": "8000-nobody.preview.test"},
                     timeout=30)
    helpers.assert_error(r, 404, "sandbox_not_found")
    # other hosts are the API as before
    assert requests.get(f"{d.url}/health", timeout=30).status_code == 200
