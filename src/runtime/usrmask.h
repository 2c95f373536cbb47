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

/* The same, in a child process of its own: the walk reads every entry of /usr
 * (about 185,000 here, 0.5-5 s depending on the load), which the daemon's
 * start need not wait for; only a sandbox's start does. */
struct usrmask_job;
int usrmask_build_start(const char *src, const char *dst,
                        struct usrmask_job **out, struct sbx_err *err);
/* Waits for the build the first time; then (and every later time) gives
 * its result: 0 and *count, or its error. */
int usrmask_build_wait(struct usrmask_job *j, size_t *count,
                       struct sbx_err *err);
/* Stops it if it still runs. */
void usrmask_job_free(struct usrmask_job *j);

#endif
