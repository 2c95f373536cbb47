#include "lib/jsonesc.h"

#include <string.h>

#include "lib/util.h"

static const char hex[] = "0123456789ABCDEF";

/* The escaped form of the character at s (n: its length, 0 when it is not
 * valid UTF-8: then it is one byte, replaced); writes it to out (room for
 * 6 bytes) and returns its length. */
static size_t one(const unsigned char *s, size_t n, char *out)
{
	if (!n) {
		memcpy(out, "\xef\xbf\xbd", 3);
		return 3;
	}
	if (n > 1 || (s[0] >= 0x20 && s[0] != '"' && s[0] != '\\')) {
		memcpy(out, s, n);
		return n;
	}
	out[0] = '\\';
	switch (s[0]) {
	case '"':
	case '\\':
		out[1] = (char)s[0];
		return 2;
	case '\b':
		out[1] = 'b';
		return 2;
	case '\f':
		out[1] = 'f';
		return 2;
	case '\n':
		out[1] = 'n';
		return 2;
	case '\r':
		out[1] = 'r';
		return 2;
	case '\t':
		out[1] = 't';
		return 2;
	}
	memcpy(out + 1, "u00", 3);
	out[4] = hex[s[0] >> 4];
	out[5] = hex[s[0] & 15];
	return 6;
}

size_t jsonesc_len(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	char tmp[6];
	size_t total = 0;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq(p + i, len - i);
		if (n > 1) { /* the common case, without the copy */
			total += n;
			i += n;
			continue;
		}
		total += one(p + i, n, tmp);
		i += n ? n : 1;
	}
	return total;
}

size_t jsonesc_some(const char *s, size_t len, size_t *off, char *out,
                    size_t cap)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0, i = *off;
	while (i < len && cap - o >= 6) {
		size_t n = utf8_seq(p + i, len - i);
		o += one(p + i, n, out + o);
		i += n ? n : 1;
	}
	*off = i;
	return o;
}
