#include "core/dns.h"

#include <errno.h>
#include <string.h>

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

int dns_query_parse(const uint8_t *m, size_t len, uint16_t *id, char *name,
                    size_t namecap, uint16_t *qtype, size_t *qend)
{
	if (len < 12 || namecap < 2)
		return -EINVAL;
	/* QR=0, opcode QUERY, one question */
	if ((m[2] & 0x80) || ((m[2] >> 3) & 0xf) != 0 || get16(m + 4) != 1)
		return -EINVAL;
	*id = get16(m);
	size_t p = 12, n = 0;
	for (;;) {
		if (p >= len)
			return -EINVAL;
		uint8_t l = m[p++];
		if (l == 0)
			break;
		if (l > 63 || p + l > len || n + l + 2 > namecap)
			return -EINVAL; /* compression has no place here */
		if (n)
			name[n++] = '.';
		for (uint8_t i = 0; i < l; i++) {
			char c = (char)m[p + i];
			if (c >= 'A' && c <= 'Z')
				c = (char)(c - 'A' + 'a');
			if (!((c >= 'a' && c <= 'z') ||
			      (c >= '0' && c <= '9') || c == '-' || c == '_'))
				return -EINVAL;
			name[n++] = c;
		}
		p += l;
	}
	name[n] = '\0';
	if (p + 4 > len)
		return -EINVAL;
	*qtype = get16(m + p);
	if (get16(m + p + 2) != 1) /* class IN */
		return -EINVAL;
	*qend = p + 4;
	return 0;
}

size_t dns_reply_empty(uint8_t *m, size_t qend, uint8_t rcode)
{
	m[2] = (uint8_t)(0x80 | (m[2] & 0x01)); /* QR, keep RD */
	m[3] = (uint8_t)(0x80 | (rcode & 0xf)); /* RA */
	memset(m + 6, 0, 6); /* no answer, authority, additional */
	return qend;
}

/* Past a (possibly compressed) name; 0 when it runs off the end. */
static size_t skip_name(const uint8_t *m, size_t len, size_t p)
{
	while (p < len) {
		uint8_t l = m[p];
		if (l == 0)
			return p + 1;
		if ((l & 0xc0) == 0xc0)
			return p + 2 <= len ? p + 2 : 0;
		if (l & 0xc0)
			return 0;
		p += 1u + l;
	}
	return 0;
}

int dns_answer_addrs(const uint8_t *m, size_t len,
                     void (*cb)(uint32_t addr, uint32_t ttl, void *data),
                     void *data)
{
	if (len < 12)
		return -EINVAL;
	unsigned qd = get16(m + 4), an = get16(m + 6);
	size_t p = 12;
	for (unsigned i = 0; i < qd; i++) {
		if (!(p = skip_name(m, len, p)) || p + 4 > len)
			return -EINVAL;
		p += 4;
	}
	for (unsigned i = 0; i < an; i++) {
		if (!(p = skip_name(m, len, p)) || p + 10 > len)
			return -EINVAL;
		uint16_t type = get16(m + p), class = get16(m + p + 2);
		uint32_t ttl =
		    (uint32_t)get16(m + p + 4) << 16 | get16(m + p + 6);
		uint16_t rdlen = get16(m + p + 8);
		p += 10;
		if (p + rdlen > len)
			return -EINVAL;
		if (type == DNS_T_A && class == 1 && rdlen == 4)
			cb((uint32_t)m[p] << 24 | (uint32_t)m[p + 1] << 16 |
			       (uint32_t)m[p + 2] << 8 | m[p + 3],
			   ttl, data);
		p += rdlen;
	}
	return 0;
}
