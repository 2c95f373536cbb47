"""The servers of the tests' stand-in Internet, run inside its network
namespace by fakenet.py: HTTP on :80, HTTPS on :443 (a test CA's
certificate) and DNS on :53 (UDP) answering the names given. Every answer names the address it was asked
on, so a test sees which server it reached.

usage: fakenet_server.py CERT KEY DNS_ADDR NAME=ADDR...
"""
import http.server
import socket
import socketserver
import ssl
import struct
import sys
import threading


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        local = self.connection.getsockname()[0]
        body = f"fakenet {local} host={self.headers.get('Host', '')}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def dns_serve(bind_addr, names):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((bind_addr, 53))
    while True:
        q, peer = s.recvfrom(1500)
        if len(q) < 12:
            continue
        p, labels = 12, []
        while p < len(q) and q[p]:
            labels.append(q[p + 1:p + 1 + q[p]].decode().lower())
            p += 1 + q[p]
        qend = p + 5
        qtype = struct.unpack(">H", q[p + 1:p + 3])[0]
        name = ".".join(labels)
        addr = names.get(name)
        flags = 0x8180 if addr else 0x8183  # NOERROR / NXDOMAIN
        ans = b""
        if addr and qtype == 1:
            ans = (b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) +
                   socket.inet_aton(addr))
        hdr = q[:2] + struct.pack(">HHHHH", flags, 1, 1 if ans else 0, 0, 0)
        s.sendto(hdr + q[12:qend] + ans, peer)


def main():
    cert, key = sys.argv[1], sys.argv[2]
    names = dict(a.split("=", 1) for a in sys.argv[4:])
    plain = Server(("0.0.0.0", 80), Handler)
    tls = Server(("0.0.0.0", 443), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
    for srv in (plain, tls):
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    threading.Thread(target=dns_serve, args=(sys.argv[3], names), daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
