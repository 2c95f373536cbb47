#include "lib/path.h"

#include <string.h>

int path_beneath(const char *base, const char *p, char *out, size_t cap)
{
	size_t bl = strcmp(base, "/") ? strlen(base) : 0;
	size_t o = 0;

	if (!p || cap == 0)
		return PATH_INVALID;
	for (const unsigned char *c = (const unsigned char *)p; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			return PATH_INVALID;
	if (p[0] == '/') {
		if (bl && (strncmp(p, base, bl) || (p[bl] != '/' && p[bl])))
			return PATH_OUTSIDE;
		p += bl;
	}
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *end = strchr(p, '/');
		size_t l = end ? (size_t)(end - p) : strlen(p);
		if (l == 1 && p[0] == '.') {
			p += l;
			continue;
		}
		if (l == 2 && p[0] == '.' && p[1] == '.')
			return PATH_OUTSIDE;
		if (l > 255 || o + l + 2 > cap)
			return PATH_INVALID;
		if (o)
			out[o++] = '/';
		memcpy(out + o, p, l);
		o += l;
		p += l;
	}
	out[o] = '\0';
	return PATH_OK;
}
