/* A lower layer of overlay whiteouts that hides, in every sandbox's /usr,
 * what "others" may not read in the host's (see usrmask.c). */
#ifndef SBX_USRMASK_H
#define SBX_USRMASK_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/err.h"

/* Build the layer for src (the host's /usr) at dst, replacing what is
 * there; *count: entries masked. With none, dst is removed (no layer). */
int usrmask_build(const char *src, const char *dst, size_t *count,
		  struct sbx_err *err);

#endif
