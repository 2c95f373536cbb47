"""Part B, network (checks 32-34). Check 32 is loopback only: every
destination is 127.0.0.1 or a socket we made, and the probe tries a
non-local connect() only after it has seen that its namespace holds nothing
but "lo" and no route, where the kernel refuses at route lookup and no
packet is ever sent. Check 33 gives sandboxes a network (--network-default
full) towards the e2e suite's stand-in Internet in a namespace of its own
(203.0.113.0/24, 198.51.100.0/24), and tries every way out of the rules."""
import pathlib
import socket
import subprocess
import sys

import pytest
import requests

import isolation_lib as lib


def test_32_only_loopback(sandbox, daemon):
    sb = sandbox()
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        srv.setblocking(False)
        port = srv.getsockname()[1]
        r = sb.probe("net", port, daemon.port)
        with pytest.raises(BlockingIOError):
            srv.accept()
    assert r["IFACES"] == "lo", r
    assert r["ROUTES4"] == "0" and r["ROUTES6_NOT_LO"] == "0", r
    # the host's loopback is another namespace's: nothing there answers
    assert r[f"CONNECT_LOCAL_{port}"] == "ECONNREFUSED", r
    assert r[f"CONNECT_LOCAL_{daemon.port}"] == "ECONNREFUSED", r
    assert r["EXTERNAL_TRIED"] == "yes", r
    for k in ("CONNECT_METADATA", "CONNECT_TESTNET", "CONNECT_TESTNET6",
              "UDP_SENDTO_TESTNET"):
        assert r[k] == "ENETUNREACH", (k, r)
    # names do not resolve (resolv.conf points at the sandbox's own lo)
    res = sb.run("getent hosts example.com; echo rc=$?", timeout=30)
    assert "rc=0" not in res["stdout"], res


@pytest.fixture
def inet():
    """The e2e suite's stand-in Internet (tests/e2e/fakenet.py)."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "e2e"))
    import fakenet
    f = fakenet.FakeInternet()
    yield fakenet, f
    f.close()


PERM = ("EPERM", "EACCES")
REFUSED = ("ECONNREFUSED", "EHOSTUNREACH", "EACCES", "ENETUNREACH")


def test_33_egress_policy(sandbox, make_daemon, inet):
    fakenet, _ = inet
    d = make_daemon(lib.DAEMON_FLAGS + ["--network-default", "full",
                                        "--dns", fakenet.DNS])
    a, b = sandbox(d), sandbox(d)
    w = a.probe("write", "/proc/sys/net/ipv4/conf/all/route_localnet",
                "/proc/sys/net/ipv4/conf/eth0/route_localnet",
                "/proc/sys/net/ipv4/conf/lo/route_localnet")
    for k, v in w.items():
        if k.startswith("WRITE:"):
            assert v in ("EROFS", "EACCES"), (k, w)
    # a listener in b, on every address of b
    b.background("python3 -m http.server 8000 --bind 0.0.0.0")
    b_addr = b.sh("ip -4 -o addr show dev eth0").split()[3].split("/")[0]
    assert lib.wait_until(lambda: "OK" in b.probe("egress", f"{b_addr}:8000")
                          .get(f"CONNECT:{b_addr}:8000", ""), 30)
    gw = a.sh("ip -4 route show default").split()[2]
    host_eth = subprocess.run(["ip", "-4", "-o", "route", "get", "192.0.2.1"],
                              capture_output=True, text=True).stdout.split()
    host_addr = host_eth[host_eth.index("src") + 1] if "src" in host_eth else fakenet.HOST
    never = [f"{fakenet.HOST}:{d.port}", f"{gw}:{d.port}", f"{gw}:22",
             f"{host_addr}:{d.port}", f"127.0.0.1:{d.port}",
             "169.254.169.254:80", "10.1.2.3:80", "192.168.0.1:80",
             "100.64.0.1:80", f"{b_addr}:8000"]
    r = a.probe("egress", f"{fakenet.WEB}:80", f"{fakenet.OTHER}:443", *never)
    assert r[f"CONNECT:{fakenet.WEB}:80"] == "OK", r
    assert r[f"CONNECT:{fakenet.OTHER}:443"] == "OK", r
    for t in never:
        assert r[f"CONNECT:{t}"] in REFUSED, (t, r)
    # nothing to route, spoof or listen around the rules with
    for k in ("RAW_SOCKET", "PACKET_SOCKET", "SET_ADDR", "SET_LINK_DOWN",
              "ADD_ROUTE", "IP_TRANSPARENT"):
        assert r[k] in PERM, (k, r)
    # an allowlist sandbox reaches only what it resolved
    v1 = f"{d.url}/v1/sandbox/{a.name}/network"
    resp = requests.put(v1, json={"mode": "allowlist", "allow": ["web.test"]}, timeout=30)
    assert resp.status_code == 200, resp.text
    a.sh("getent hosts web.test")
    r = a.probe("egress", f"{fakenet.WEB}:22", f"{fakenet.OTHER}:22")
    assert r[f"CONNECT:{fakenet.OTHER}:22"] in REFUSED, r


def test_34_no_daemon_sockets(sandbox):
    sb = sandbox()
    sb.install_probe()
    # the walk covers all of / (with the host's /usr underneath): longer
    # than one exec may take, so in the background
    sb.background(f"{lib.PROBE_PATH} sockscan", out="/workspace/scan.out")
    done = lib.wait_until(lambda: "DONE=" in sb.sh("cat /workspace/scan.out"), 60, 0.25)
    assert done, sb.sh("tail -5 /workspace/scan.out")
    r = lib.parse_kv(sb.sh("cat /workspace/scan.out"))
    for k, v in r.items():
        if k.startswith("KNOWN:"):
            assert v == "ENOENT", (k, v)
    assert r["SOCKETS_FOUND"] == "0", r
    assert r["PROC_NET_UNIX"] == "0", f"unix sockets of another namespace visible: {r}"
