#include "lib/buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(struct buf *b, size_t limit)
{
	memset(b, 0, sizeof(*b));
	b->limit = limit;
}

void buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	b->dropped = 0;
}

static int reserve(struct buf *b, size_t need)
{
	if (need <= b->cap)
		return 0;
	size_t c = b->cap ? b->cap : 256;
	while (c < need)
		c *= 2;
	char *p = realloc(b->data, c);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = c;
	return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
	size_t take = n;
	if (b->limit && b->len + take > b->limit)
		take = b->limit > b->len ? b->limit - b->len : 0;
	b->dropped += n - take;
	if (!take)
		return 0;
	if (reserve(b, b->len + take + 1) < 0)
		return -ENOMEM;
	memcpy(b->data + b->len, p, take);
	b->len += take;
	return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || reserve(b, b->len + (size_t)n + 1) < 0)
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

const char *buf_cstr(struct buf *b)
{
	if (reserve(b, b->len + 1) < 0)
		return "";
	b->data[b->len] = '\0';
	return b->data;
}
