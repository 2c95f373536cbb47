"""Network policies (shared/spec/v1.md "Network"): none, full, allowlist,
changed while running, and what no sandbox may ever reach, against the
stand-in Internet of fakenet.py (203.0.113.0/24, 198.51.100.0/24)."""
import re
import subprocess

import pytest
import requests

import helpers
from fakenet import DNS, HOST, OTHER, WEB, FakeInternet
from helpers import Daemon


@pytest.fixture(scope="module")
def inet():
    f = FakeInternet()
    yield f
    f.close()


@pytest.fixture(scope="module")
def netd(inet):
    d = Daemon(["--dns", DNS])
    yield d
    table = table_name(d)
    d.close()
    # the daemon took its table with it
    assert table not in nft_tables()


def nft_tables():
    return subprocess.run(["nft", "list", "tables"], capture_output=True,
                          text=True).stdout.split()


def table_name(d):
    """The daemon's nftables table: named from its state dir (FNV-1a)."""
    h = 2166136261
    for c in d.state_dir.encode():
        h = ((h ^ c) * 16777619) & 0xffffffff
    return "sandboxd_%04x" % (h & 0xffff)


@pytest.fixture
def v1n(netd):
    return helpers.V1(netd)


# A TCP connect from inside, by bash's /dev/tcp: "connected", or the error.
# `timeout` turns a hang into "hung" so that a hang fails the test.
PROBE = r'''probe() { out=$(timeout 8 bash -c "exec 3<>/dev/tcp/$1/$2 && echo connected" 2>&1); rc=$?; [ $rc = 124 ] && echo hung || echo "$out" | tail -n1; }
'''


def probe(v1, sid, host, port):
    return v1.sh(sid, PROBE + f"probe {host} {port}").strip()


def fetch(v1, sid, host):
    """GET / by name or address over HTTP: the body, or the error."""
    cmd = (f"timeout 15 python3 -c 'import urllib.request as u,sys\n"
           f"try: print(u.urlopen(\"http://{host}/\", timeout=8).read().decode().strip())\n"
           f"except Exception as e: print(\"error\", e)'")
    return v1.sh(sid, cmd).strip()


def refused(out):
    return "refused" in out or "unreachable" in out.lower() or \
        "No route" in out or "prohibited" in out.lower()


def sandbox_addr(v1, sid):
    out = v1.sh(sid, "ip -4 -o addr show dev eth0")
    return re.search(r"inet (\d+\.\d+\.\d+\.\d+)", out).group(1)


def test_none_is_the_default_and_reaches_nothing(v1n, inet, sid):
    info = v1n.create(sid)
    assert info["network"] == {"mode": "none", "allow": [], "deny": []}
    assert v1n.sh(sid, "awk -F: 'NR>2{print $1}' /proc/net/dev").split() == ["lo"]
    assert "unreachable" in probe(v1n, sid, WEB, 80).lower()
    assert fetch(v1n, sid, "web.test").startswith("error")


def test_full_reaches_the_internet_by_address_and_name(v1n, netd, inet, sid):
    v1n.create(sid, network={"mode": "full"})
    v1n.sh(sid, "true")
    assert table_name(netd) in nft_tables()  # made when first needed
    assert fetch(v1n, sid, WEB) == f"fakenet {WEB} host={WEB}"
    assert fetch(v1n, sid, "web.test") == f"fakenet {WEB} host=web.test"
    assert fetch(v1n, sid, "other.test") == f"fakenet {OTHER} host=other.test"
    # HTTPS with the test CA
    v1n.sh(sid, f"cat > /tmp/ca.pem <<'EOF'\n{inet.ca_pem}EOF\n")
    out = v1n.sh(sid, "curl -sS --max-time 8 --cacert /tmp/ca.pem https://web.test/ 2>&1 "
                      "|| python3 -c 'import ssl,urllib.request as u;"
                      "print(u.urlopen(\"https://web.test/\",timeout=8,"
                      "context=ssl.create_default_context(cafile=\"/tmp/ca.pem\")).read().decode())'")
    assert out.strip() == f"fakenet {WEB} host=web.test"
    info = v1n.info(sid)
    assert info["network"]["mode"] == "full"
    assert info["usage"]["netTxBytes"] > 0 and info["usage"]["netRxBytes"] > 0
    metrics = v1n.get("/metrics").text
    assert re.search(rf'sandboxd_sandbox_net_tx_bytes{{tenant="[^"]*",sandbox="{sid}"}} [1-9]',
                     metrics), metrics[-800:]


def test_full_never_reaches_the_host_metadata_or_private_ranges(v1n, netd, inet, sid):
    v1n.create(sid, network={"mode": "full"})
    gw = v1n.sh(sid, "ip -4 route show default").split()[2]
    host_eth = subprocess.run(["ip", "-4", "-o", "route", "get", "192.0.2.1"],
                              capture_output=True, text=True).stdout
    m = re.search(r"src (\S+)", host_eth)
    targets = [(HOST, netd.port), (HOST, 22), (gw, netd.port), (gw, 53),
               ("169.254.169.254", 80), ("10.1.2.3", 80), ("192.168.1.1", 80),
               ("172.16.0.1", 80), ("100.64.0.1", 80), ("127.0.0.1", netd.port)]
    if m:
        targets.append((m.group(1), netd.port))
    for host, port in targets:
        out = probe(v1n, sid, host, port)
        assert refused(out), f"{host}:{port} -> {out!r}"
    # names that point there are no way around it
    assert fetch(v1n, sid, "metadata.test").startswith("error")
    assert fetch(v1n, sid, "private.test").startswith("error")


def test_full_sandboxes_do_not_reach_each_other(v1n, inet, new_sid):
    a, b = new_sid(), new_sid()
    v1n.create(a, network={"mode": "full"})
    v1n.create(b, network={"mode": "full"})
    v1n.start_process(a, command="python3 -m http.server 8000 --bind 0.0.0.0")
    helpers.wait_until(lambda: "connected" in probe(v1n, a, "127.0.0.1", 8000), 20)
    addr_a = sandbox_addr(v1n, a)
    out = probe(v1n, b, addr_a, 8000)
    assert refused(out), out
    # and not through the host's end of its link either
    gw_a = v1n.sh(a, "ip -4 route show default").split()[2]
    assert refused(probe(v1n, b, gw_a, 8000))


def test_policy_changes_while_running(v1n, inet, sid):
    v1n.create(sid, network={"mode": "full"})
    assert "connected" in probe(v1n, sid, WEB, 80)
    r = v1n.put(f"/v1/sandbox/{sid}/network", json={"mode": "none"})
    assert r.status_code == 200, r.text
    assert r.json() == {"mode": "none", "allow": [], "deny": []}
    assert "unreachable" in probe(v1n, sid, WEB, 80).lower()
    r = v1n.put(f"/v1/sandbox/{sid}/network",
                json={"mode": "full", "deny": ["203.0.113.0/24"]})
    assert r.status_code == 200, r.text
    assert refused(probe(v1n, sid, WEB, 80))
    assert "connected" in probe(v1n, sid, OTHER, 80)
    assert v1n.get(f"/v1/sandbox/{sid}/network").json() == {
        "mode": "full", "allow": [], "deny": ["203.0.113.0/24"]}


def put_ca(v1, sid, inet):
    v1.sh(sid, f"cat > /tmp/ca.pem <<'EOF'\n{inet.ca_pem}EOF\n")


def tls_fetch(v1, sid, addr, sni, port=443):
    """GET / over TLS to addr, sending sni (checked against the test CA)."""
    cmd = ("timeout 15 python3 -c 'import socket,ssl,sys\n"
           "ctx = ssl.create_default_context(cafile=\"/tmp/ca.pem\")\n"
           "try:\n"
           f"  s = ctx.wrap_socket(socket.create_connection((\"{addr}\", {port}), timeout=8),"
           f" server_hostname=\"{sni}\")\n"
           f"  s.sendall(b\"GET / HTTP/1.0\\r\\nHost: {sni}\\r\\n\\r\\n\")\n"
           "  data = b\"\"\n"
           "  while chunk := s.recv(4096): data += chunk\n"
           "  print(data.decode().split(\"\\r\\n\\r\\n\")[-1].strip())\n"
           "except Exception as e: print(\"error\", type(e).__name__, e)'")
    return v1.sh(sid, cmd).strip()


def http_host(v1, sid, addr, host):
    """GET / over HTTP to addr with a Host header of our choosing."""
    return v1.sh(sid, f"curl -sS --max-time 8 -H 'Host: {host}' http://{addr}/ 2>&1 "
                      "|| true").strip()


def test_allowlist_by_name(v1n, inet, sid):
    v1n.create(sid, network={"mode": "allowlist", "allow": ["web.test"]})
    # before any name was resolved, not even the allowed server's address
    assert fetch(v1n, sid, WEB).startswith("error")
    assert refused(probe(v1n, sid, WEB, 22))
    assert fetch(v1n, sid, "web.test") == f"fakenet {WEB} host=web.test"
    # other names do not resolve; the other server's address is refused
    out = v1n.sh(sid, "getent hosts other.test; echo rc=$?")
    assert out.strip() == "rc=2", out
    assert fetch(v1n, sid, "other.test").startswith("error")
    assert fetch(v1n, sid, OTHER).startswith("error")
    assert refused(probe(v1n, sid, OTHER, 22))


def test_allowlist_checks_sni_and_host(v1n, inet, sid):
    v1n.create(sid, network={"mode": "allowlist", "allow": ["web.test"]})
    put_ca(v1n, sid, inet)
    assert v1n.sh(sid, "getent hosts web.test").split()[0] == WEB
    assert tls_fetch(v1n, sid, WEB, "web.test") == f"fakenet {WEB} host=web.test"
    # the allowed address with a name that is not allowed: no
    assert tls_fetch(v1n, sid, WEB, "other.test").startswith("error")
    assert tls_fetch(v1n, sid, WEB, "also.test").startswith("error")
    assert "fakenet" not in http_host(v1n, sid, WEB, "other.test")
    assert http_host(v1n, sid, WEB, "web.test") == f"fakenet {WEB} host=web.test"
    # an allowed name at an address it did not resolve to: no
    assert tls_fetch(v1n, sid, OTHER, "web.test").startswith("error")
    assert "fakenet" not in http_host(v1n, sid, OTHER, "web.test")


def test_allowlist_wildcards_ports_and_ranges(v1n, inet, sid):
    v1n.create(sid, network={"mode": "allowlist",
                             "allow": ["*.test:443", "198.51.100.0/24:80"]})
    put_ca(v1n, sid, inet)
    assert v1n.sh(sid, "getent hosts web.test").split()[0] == WEB
    assert tls_fetch(v1n, sid, WEB, "web.test") == f"fakenet {WEB} host=web.test"
    assert fetch(v1n, sid, "web.test").startswith("error")   # the rule says :443
    assert fetch(v1n, sid, OTHER) == f"fakenet {OTHER} host={OTHER}"  # by range
    assert tls_fetch(v1n, sid, OTHER, "other.test").startswith("error")  # not resolved


def test_network_validation(v1n, sid, new_sid):
    for body in ({"mode": "some"}, {"mode": 1}, {},
                 {"mode": "allowlist", "allow": "web.test"},
                 {"mode": "allowlist", "allow": [5]},
                 {"mode": "allowlist", "allow": ["bad host!"]},
                 {"mode": "allowlist", "allow": ["1.2.3.4/40"]},
                 {"mode": "allowlist", "allow": ["web.test:99999"]},
                 {"mode": "full", "extra": 1}):
        r = v1n.post("/v1/sandbox", json={"id": new_sid(), "network": body})
        helpers.assert_error(r, 400, "invalid_request")
    v1n.create(sid)
    r = v1n.put(f"/v1/sandbox/{sid}/network", json={"mode": "everything"})
    helpers.assert_error(r, 400, "invalid_request")
    r = v1n.put("/v1/sandbox/nope-not-here/network", json={"mode": "full"})
    helpers.assert_error(r, 404, "sandbox_not_found")


def test_policy_survives_a_restart(make_daemon, inet, sid):
    d = make_daemon("--dns", DNS)
    v = helpers.V1(d)
    v.create(sid, network={"mode": "allowlist", "allow": ["web.test", "198.51.100.0/24"]})
    d.restart()
    assert v.get(f"/v1/sandbox/{sid}/network").json() == {
        "mode": "allowlist", "allow": ["web.test", "198.51.100.0/24"], "deny": []}
    assert fetch(v, sid, "web.test") == f"fakenet {WEB} host=web.test"
    assert fetch(v, sid, OTHER) == f"fakenet {OTHER} host={OTHER}"
    assert fetch(v, sid, "other.test").startswith("error")


def test_network_default_flag(make_daemon, inet, sid):
    d = make_daemon("--dns", DNS, "--network-default", "full")
    v = helpers.V1(d)
    assert v.create(sid)["network"]["mode"] == "full"
    assert fetch(v, sid, "web.test") == f"fakenet {WEB} host=web.test"
    # the Duet face has the default too
    r = requests.post(d.url + "/api/rooms/duetnet/sandbox/exec",
                      json={"cmd": PROBE + f"probe {WEB} 80"}, timeout=60)
    assert r.status_code == 200 and "connected" in r.json()["result"]["stdout"], r.text


def test_bad_network_flags_are_refused():
    for flags in (["--network-default", "some"], ["--dns", "x"],
                  ["--deny-cidr", "10.0.0.0/33"], ["--net-pool", "10.0.0.0/30"]):
        p = subprocess.run([helpers.SBX_BIN, *flags], capture_output=True, text=True,
                           timeout=30)
        assert p.returncode != 0 and flags[0] in p.stderr, (flags, p.stderr)


def test_fifty_full_sandboxes_reach_the_internet_not_each_other(make_daemon, inet, new_sid):
    from concurrent.futures import ThreadPoolExecutor
    d = make_daemon("--dns", DNS, "--max-sandboxes", "64", "--memory", "64M")
    v = helpers.V1(d)
    sids = [new_sid() for _ in range(50)]
    for s in sids:
        v.create(s, network={"mode": "full"})
    first = sids[0]
    v.start_process(first, command="exec python3 -m http.server 8000 --bind 0.0.0.0")
    # reachable on its own address from inside itself: the listener is there
    addr0 = None

    def ready():
        nonlocal addr0
        addr0 = sandbox_addr(v, first)
        return "connected" in probe(v, first, addr0, 8000)
    helpers.wait_until(ready, 30)

    def one(s):
        out = v.sh(s, PROBE + "exec 3<>/dev/tcp/%s/80 && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 "
                   "&& tail -n1 <&3; echo; probe %s 8000" % (WEB, addr0))
        return s, [line for line in out.split("\n") if line]

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(one, sids[1:]))
    for s, lines in results:
        assert lines[0] == f"fakenet {WEB} host=", (s, lines)
        assert len(lines) == 2 and refused(lines[1]), (s, lines)
