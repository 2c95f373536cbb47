"""A small WebSocket client (RFC 6455) in stdlib Python, for the terminal
tests: handshake, masked frames out, frames in (pings answered, fragments
joined), close codes. Deliberately simple and independent of the daemon's
code (which frames with wslay)."""
import base64
import hashlib
import json
import os
import socket
import struct
import time
import urllib.parse

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class HandshakeError(Exception):
    def __init__(self, status, headers, body):
        super().__init__(f"handshake refused: {status} {body[:300]!r}")
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)


class Closed(Exception):
    def __init__(self, code, reason):
        super().__init__(f"closed: {code} {reason!r}")
        self.code = code
        self.reason = reason


class WS:
    def __init__(self, url, headers=None, timeout=30, rcvbuf=None):
        u = urllib.parse.urlsplit(url)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((u.hostname, u.port))
        key = base64.b64encode(os.urandom(16)).decode()
        path = u.path + (("?" + u.query) if u.query else "")
        h = {"Host": f"{u.hostname}:{u.port}", "Upgrade": "websocket",
             "Connection": "Upgrade", "Sec-WebSocket-Key": key,
             "Sec-WebSocket-Version": "13"}
        h.update(headers or {})
        req = f"GET {path} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in h.items() if v is not None) + "\r\n"
        self.sock.sendall(req.encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise HandshakeError(0, {}, self.buf.decode(errors="replace"))
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        if status != 101:
            n = int(hdrs.get("content-length", "0"))
            while len(self.buf) < n:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                self.buf += chunk
            self.sock.close()
            raise HandshakeError(status, hdrs, self.buf[:n].decode(errors="replace"))
        want = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        assert hdrs.get("sec-websocket-accept") == want, hdrs
        self.closed = None

    # --- sending ---
    def _send(self, opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def send_bytes(self, data):
        self._send(0x2, data if isinstance(data, bytes) else data.encode())

    def send_text(self, text):
        self._send(0x1, text.encode())

    def send_json(self, obj):
        self.send_text(json.dumps(obj))

    def resize(self, cols, rows):
        self.send_json({"type": "resize", "cols": cols, "rows": rows})

    def close(self, code=1000):
        try:
            self._send(0x8, struct.pack("!H", code))
        except OSError:
            pass
        self.sock.close()

    # --- receiving ---
    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise Closed(1006, "connection closed without a close frame")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _frame(self):
        b0, b1 = self._need(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._need(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._need(8))[0]
        assert not b1 & 0x80, "server frames are never masked"
        return b0 & 0x80, b0 & 0x0F, self._need(n)

    def recv(self):
        """One message: ("text", str) or ("binary", bytes). Raises Closed."""
        if self.closed:
            raise self.closed
        parts, kind = [], None
        while True:
            fin, op, payload = self._frame()
            if op == 0x9:
                self._send(0xA, payload)
                continue
            if op == 0xA:
                continue
            if op == 0x8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                self.closed = Closed(code, payload[2:].decode(errors="replace"))
                try:
                    self._send(0x8, payload[:2])
                except OSError:
                    pass
                raise self.closed
            if op in (0x1, 0x2):
                kind = "text" if op == 0x1 else "binary"
            parts.append(payload)
            if fin:
                data = b"".join(parts)
                return (kind, data.decode()) if kind == "text" else (kind, data)


class Term:
    """A terminal client: collects the screen's bytes and the JSON messages."""

    def __init__(self, url, keep=None, **kw):
        self.ws = WS(url, **kw)
        self.out = b""
        self.total = 0
        self.keep = keep  # keep only the last bytes of output (big outputs)
        self.msgs = []

    def pump(self):
        kind, data = self.ws.recv()
        if kind == "binary":
            self.total += len(data)
            self.out += data
            if self.keep and len(self.out) > 2 * self.keep:
                self.out = self.out[-self.keep:]
        else:
            self.msgs.append(json.loads(data))

    def wait_for(self, what, timeout=30):
        """Reads until what (bytes in the output, or a predicate on self)."""
        deadline = time.monotonic() + timeout
        while True:
            if callable(what) and what(self):
                return
            if isinstance(what, bytes) and what in self.out:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what!r}; output tail: "
                                     f"{self.out[-2000:]!r}; messages: {self.msgs}")
            self.ws.sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                self.pump()
            except socket.timeout:
                pass

    def wait_msg(self, typ, timeout=30):
        self.wait_for(lambda t: any(m.get("type") == typ for m in t.msgs), timeout)
        return next(m for m in self.msgs if m.get("type") == typ)

    def type(self, text):
        self.ws.send_bytes(text.encode())

    def run(self, cmd, marker, timeout=30):
        """Types cmd; waits for marker (bytes) in the output."""
        self.type(cmd + "\r")
        self.wait_for(marker, timeout)

    def close(self):
        self.ws.close()
