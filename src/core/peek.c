#include "core/peek.h"

#include <string.h>
#include <strings.h>

static int set_name(const char *s, size_t n, char *name, size_t cap)
{
	while (n && s[n - 1] == '.')
		n--;
	if (n == 0 || n >= cap)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '.' || c == '_'))
			return -1;
		name[i] = c;
	}
	name[n] = '\0';
	return 1;
}

static size_t be(const unsigned char *p, int n)
{
	size_t v = 0;
	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

int peek_tls_sni(const unsigned char *p, size_t len, char *name, size_t cap)
{
	if (len < 5)
		return 0;
	/* one handshake record holding a ClientHello (a ClientHello split
	 * over records is legal but no client does it for the first one) */
	if (p[0] != 0x16 || p[1] != 3)
		return -1;
	size_t rec = be(p + 3, 2);
	if (len < 5 + rec)
		return rec > 16384 ? -1 : 0;
	const unsigned char *h = p + 5, *end = h + rec;
	if (rec < 4 || h[0] != 1)
		return -1;
	size_t hl = be(h + 1, 3);
	if (hl + 4 > rec)
		return -1;
	end = h + 4 + hl;
	const unsigned char *q = h + 4 + 2 + 32; /* version, random */
	if (q + 1 > end)
		return -1;
	q += 1 + q[0]; /* session id */
	if (q + 2 > end)
		return -1;
	q += 2 + be(q, 2); /* cipher suites */
	if (q + 1 > end)
		return -1;
	q += 1 + q[0]; /* compression */
	if (q + 2 > end)
		return -1;
	size_t el = be(q, 2);
	q += 2;
	if (q + el > end)
		return -1;
	const unsigned char *ee = q + el;
	while (q + 4 <= ee) {
		size_t type = be(q, 2), l = be(q + 2, 2);
		q += 4;
		if (q + l > ee)
			return -1;
		if (type == 0) { /* server_name: list of (type, name) */
			if (l < 5 || q[2] != 0)
				return -1;
			size_t nl = be(q + 3, 2);
			if (5 + nl > l)
				return -1;
			return set_name((const char *)q + 5, nl, name, cap);
		}
		q += l;
	}
	return -1;
}

int peek_http_host(const char *p, size_t len, char *name, size_t cap)
{
	/* a request line first: a token and a space */
	size_t i = 0;
	while (i < len && i < 16 && p[i] >= 'A' && p[i] <= 'Z')
		i++;
	if (i < len && (i == 0 || p[i] != ' '))
		return -1;
	const char *hdr_end = NULL;
	for (size_t k = 0; k + 3 < len; k++)
		if (!memcmp(p + k, "\r\n\r\n", 4)) {
			hdr_end = p + k + 2;
			break;
		}
	if (!hdr_end)
		return len > 16384 ? -1 : 0;
	const char *line = memchr(p, '\n', (size_t)(hdr_end - p));
	while (line && line + 1 < hdr_end) {
		line++;
		const char *eol = memchr(line, '\n', (size_t)(hdr_end - line));
		if (!eol)
			break;
		if ((size_t)(eol - line) > 5 &&
		    !strncasecmp(line, "host:", 5)) {
			const char *v = line + 5, *e = eol;
			while (v < e && (*v == ' ' || *v == '\t'))
				v++;
			while (e > v &&
			       (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
				e--;
			const char *colon = memchr(v, ':', (size_t)(e - v));
			if (colon)
				e = colon;
			return set_name(v, (size_t)(e - v), name, cap);
		}
		line = eol;
	}
	return -1;
}
