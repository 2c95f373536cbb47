#include "lib/path.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
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

int path_join_beneath(const char *base, const char *from, const char *p,
                      char **out)
{
	char *joined = NULL, *rel = NULL;
	*out = NULL;
	if (!p)
		return PATH_INVALID;
	if (asprintf(&joined, "%s%s%s", p[0] == '/' ? "" : from,
	             p[0] == '/' ? "" : "/", p) < 0)
		return -ENOMEM;
	size_t cap = strlen(joined) + 1;
	int v = -ENOMEM;
	if (cap > PATH_MAX)
		v = PATH_INVALID;
	else if ((rel = malloc(cap)))
		v = path_beneath(base, joined, rel, cap);
	if (v == PATH_OK &&
	    asprintf(out, "%s%s%s", strcmp(base, "/") ? base : "",
	             *rel || !strcmp(base, "/") ? "/" : "", rel) < 0) {
		*out = NULL;
		v = -ENOMEM;
	}
	free(joined);
	free(rel);
	return v;
}
