/* The network's pure parts: policy rules, the DNS messages the daemon
 * reads and writes, and the names read from a connection's first bytes
 * (TLS SNI, HTTP Host); and the veth's refusal of the host's namespace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "core/dns.h"
#include "core/network.h"
#include "core/peek.h"
#include "runtime/net.h"

static void test_rules(void **state)
{
	(void)state;
	struct net_policy p = {.mode = NET_ALLOWLIST};
	char why[200];
	assert_int_equal(
	    net_policy_add(&p, false, "PyPI.org", why, sizeof(why)), 0);
	assert_int_equal(
	    net_policy_add(&p, false, "*.example.com:443", why, sizeof(why)),
	    0);
	assert_int_equal(
	    net_policy_add(&p, false, "203.0.113.7/24:80", why, sizeof(why)),
	    0);
	assert_int_equal(
	    net_policy_add(&p, true, "bad.example.com", why, sizeof(why)), 0);
	assert_null(p.allow[2].host);
	assert_int_equal(p.allow[2].cidr.addr, 0xcb007100); /* masked */
	assert_int_equal(p.allow[2].cidr.prefix, 24);
	assert_int_equal(p.allow[2].cidr.port, 80);
	static const char *const bad[] = {
	    "",       "a..b",       "-",         "bad host",
	    "1.2.3",  "1.2.3.4/33", "x.org:0",   "x.org:65536",
	    "x.org:", "*.",         "300.1.1.1", "a/b"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(
		    net_policy_add(&p, false, bad[i], why, sizeof(why)),
		    -EINVAL);
	bool any;
	uint16_t ports[8];
	size_t np;
	assert_true(
	    net_policy_name_allowed(&p, "pypi.org", &any, ports, &np, 8));
	assert_true(any);
	assert_true(net_policy_name_allowed(&p, "a.b.example.com", &any, ports,
	                                    &np, 8));
	assert_false(any);
	assert_int_equal(np, 1);
	assert_int_equal(ports[0], 443);
	/* a wildcard is the names below, not the name itself */
	assert_false(
	    net_policy_name_allowed(&p, "example.com", &any, ports, &np, 8));
	assert_false(
	    net_policy_name_allowed(&p, "xexample.com", &any, ports, &np, 8));
	/* deny wins */
	assert_false(net_policy_name_allowed(&p, "bad.example.com", &any, ports,
	                                     &np, 8));
	/* the registry's form round-trips */
	char *enc = net_policy_encode(&p);
	struct net_policy q;
	assert_int_equal(net_policy_decode(enc, &q), 0);
	assert_int_equal(q.mode, NET_ALLOWLIST);
	assert_int_equal(q.nallow, 3);
	assert_int_equal(q.ndeny, 1);
	assert_string_equal(q.allow[1].text, "*.example.com:443");
	net_policy_clear(&q);
	assert_int_equal(net_policy_decode("everything\n", &q), -EINVAL);
	free(enc);
	net_policy_clear(&q);
	net_policy_clear(&p);
}

/* "www.Example.com" A IN, id 0x1234 */
static const unsigned char query[] = {
    0x12, 0x34, 0x01, 0x00, 0,   1,   0,   0,   0,   0,   0,
    0,    3,    'w',  'w',  'w', 7,   'E', 'x', 'a', 'm', 'p',
    'l',  'e',  3,    'c',  'o', 'm', 0,   0,   1,   0,   1};

static void test_dns_query(void **state)
{
	(void)state;
	uint16_t id, qt;
	size_t qend;
	char name[256];
	assert_int_equal(dns_query_parse(query, sizeof(query), &id, name,
	                                 sizeof(name), &qt, &qend),
	                 0);
	assert_int_equal(id, 0x1234);
	assert_string_equal(name, "www.example.com");
	assert_int_equal(qt, DNS_T_A);
	assert_int_equal(qend, sizeof(query));
	/* every cut is refused, never read past */
	for (size_t n = 0; n < sizeof(query); n++)
		assert_int_equal(dns_query_parse(query, n, &id, name,
		                                 sizeof(name), &qt, &qend),
		                 -EINVAL);
	unsigned char m[sizeof(query)];
	memcpy(m, query, sizeof(m));
	m[2] |= 0x80; /* an answer is not a query */
	assert_int_equal(
	    dns_query_parse(m, sizeof(m), &id, name, sizeof(name), &qt, &qend),
	    -EINVAL);
	memcpy(m, query, sizeof(m));
	size_t len = dns_reply_empty(m, qend, DNS_RC_NXDOMAIN);
	assert_int_equal(len, sizeof(query));
	assert_int_equal(m[2] & 0x80, 0x80);
	assert_int_equal(m[3] & 0x0f, DNS_RC_NXDOMAIN);
	assert_int_equal(m[7], 0);
}

static void count_addr(uint32_t addr, uint32_t ttl, void *data)
{
	uint32_t *got = data;
	got[0]++;
	got[1] = addr;
	got[2] = ttl;
}

static void test_dns_answer(void **state)
{
	(void)state;
	unsigned char m[sizeof(query) + 32];
	memcpy(m, query, sizeof(query));
	m[2] = 0x81;
	m[3] = 0x80;
	m[7] = 2; /* a CNAME then an A */
	size_t p = sizeof(query);
	static const unsigned char cname[] = {0xc0, 12, 0,  5, 0, 1,    0,
	                                      0,    0,  60, 0, 2, 0xc0, 12};
	memcpy(m + p, cname, sizeof(cname));
	p += sizeof(cname);
	static const unsigned char a[] = {0xc0, 12, 0, 1, 0,   1, 0,   0,
	                                  1,    0,  0, 4, 203, 0, 113, 10};
	memcpy(m + p, a, sizeof(a));
	p += sizeof(a);
	uint32_t got[3] = {0};
	assert_int_equal(dns_answer_addrs(m, p, count_addr, got), 0);
	assert_int_equal(got[0], 1);
	assert_int_equal(got[1], 0xcb00710a);
	assert_int_equal(got[2], 256);
	for (size_t n = 12; n < p; n++) /* a cut answer never reads past */
		dns_answer_addrs(m, n, count_addr, got);
}

/* A minimal ClientHello with SNI "Web.Test". */
static size_t client_hello(unsigned char *b, const char *sni)
{
	size_t nl = strlen(sni), p = 0;
	unsigned char body[512];
	body[p++] = 3, body[p++] = 3;
	memset(body + p, 7, 32), p += 32;
	body[p++] = 0; /* session id */
	body[p++] = 0, body[p++] = 2, body[p++] = 0x13, body[p++] = 1;
	body[p++] = 1, body[p++] = 0; /* compression */
	size_t ext = 4 + 5 + nl;
	body[p++] = (unsigned char)(ext >> 8), body[p++] = (unsigned char)ext;
	body[p++] = 0, body[p++] = 0; /* server_name */
	body[p++] = (unsigned char)((5 + nl) >> 8),
	body[p++] = (unsigned char)(5 + nl);
	body[p++] = (unsigned char)((3 + nl) >> 8),
	body[p++] = (unsigned char)(3 + nl);
	body[p++] = 0;
	body[p++] = (unsigned char)(nl >> 8), body[p++] = (unsigned char)nl;
	memcpy(body + p, sni, nl), p += nl;
	size_t q = 0;
	b[q++] = 0x16, b[q++] = 3, b[q++] = 1;
	b[q++] = (unsigned char)((p + 4) >> 8), b[q++] = (unsigned char)(p + 4);
	b[q++] = 1, b[q++] = 0;
	b[q++] = (unsigned char)(p >> 8), b[q++] = (unsigned char)p;
	memcpy(b + q, body, p);
	return q + p;
}

static void test_sni(void **state)
{
	(void)state;
	unsigned char b[600];
	char name[256];
	size_t n = client_hello(b, "Web.Test");
	assert_int_equal(peek_tls_sni(b, n, name, sizeof(name)), 1);
	assert_string_equal(name, "web.test");
	for (size_t k = 0; k < n; k++) /* not all there yet */
		assert_int_equal(peek_tls_sni(b, k, name, sizeof(name)), 0);
	assert_int_equal(
	    peek_tls_sni((const unsigned char *)"GET /", 5, name, sizeof(name)),
	    -1);
	n = client_hello(b, "bad name");
	assert_int_equal(peek_tls_sni(b, n, name, sizeof(name)), -1);
}

static void test_http_host(void **state)
{
	(void)state;
	char name[256];
	const char *req =
	    "GET / HTTP/1.1\r\nUser-Agent: x\r\nhost:  Web.Test:8080 \r\n\r\n";
	assert_int_equal(peek_http_host(req, strlen(req), name, sizeof(name)),
	                 1);
	assert_string_equal(name, "web.test");
	assert_int_equal(peek_http_host(req, 20, name, sizeof(name)), 0);
	const char *nohost = "GET / HTTP/1.0\r\n\r\n";
	assert_int_equal(
	    peek_http_host(nohost, strlen(nohost), name, sizeof(name)), -1);
	assert_int_equal(peek_http_host("\x16\x03\x01", 3, name, sizeof(name)),
	                 -1);
}

/* A sandbox's veth end is eth0 with the sandbox's address and default
 * route: given the daemon's own namespace (an init not yet in its own),
 * nothing is made, on either side. */
static void test_veth_refuses_the_daemons_namespace(void **state)
{
	(void)state;
	struct sbx_err err = {0};
	int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(
	    net_veth_setup(fd, "sxunit-0", 0x0a000001, 0x0a000002, 30, &err),
	    -EINVAL);
	assert_non_null(strstr(err.msg, "daemon's own"));
	assert_int_equal(if_nametoindex("sxunit-0"), 0);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rules),
	    cmocka_unit_test(test_dns_query),
	    cmocka_unit_test(test_dns_answer),
	    cmocka_unit_test(test_sni),
	    cmocka_unit_test(test_http_host),
	    cmocka_unit_test(test_veth_refuses_the_daemons_namespace),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
