/* A growable byte buffer with an optional cap: bytes past the cap are
 * dropped and counted, never stored. */
#ifndef SBX_BUF_H
#define SBX_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct buf {
	char *data;
	size_t len, cap; /* cap: allocated */
	size_t limit;    /* 0 = unlimited */
	size_t dropped;  /* bytes refused because of limit */
};

void buf_init(struct buf *b, size_t limit);
void buf_free(struct buf *b);
/* Append what fits under the limit; returns -ENOMEM on allocation failure. */
int buf_append(struct buf *b, const void *p, size_t n);
int buf_printf(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* NUL-terminate without counting the NUL (data may be NULL before). */
const char *buf_cstr(struct buf *b);
void buf_reset(struct buf *b);

#endif
