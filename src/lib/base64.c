#include "lib/base64.h"

#include <stdint.h>

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encode(const void *in, size_t n, char *out)
{
	const unsigned char *p = in;
	size_t o = 0, i = 0;
	for (; i + 2 < n; i += 3) {
		uint32_t v =
		    (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = alphabet[(v >> 6) & 63];
		out[o++] = alphabet[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	out[o] = '\0';
	return o;
}

static int value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

ssize_t base64_decode(const char *in, size_t n, void *out)
{
	unsigned char *o = out;
	size_t len = 0;
	if (n % 4)
		return -1;
	for (size_t i = 0; i < n; i += 4) {
		int v[4], pad = 0;
		for (int k = 0; k < 4; k++) {
			if (in[i + k] == '=' && i + 4 == n && k >= 2) {
				v[k] = 0;
				pad++;
				continue;
			}
			if (pad || (v[k] = value(in[i + k])) < 0)
				return -1;
		}
		uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
		             (uint32_t)v[2] << 6 | (uint32_t)v[3];
		o[len++] = (unsigned char)(x >> 16);
		if (pad < 2)
			o[len++] = (unsigned char)(x >> 8);
		if (pad < 1)
			o[len++] = (unsigned char)x;
	}
	return (ssize_t)len;
}
