/* Errors travel as a negative errno return plus this out-parameter, which
 * carries the errno, a formatted message and (optionally) the failing path. */
#ifndef SBX_ERR_H
#define SBX_ERR_H

#include <errno.h>

struct sbx_err {
	int code;      /* positive errno, 0 when unset */
	char msg[512]; /* "what failed: why" */
};

/* Fill err (may be NULL) and return -errnum. errnum is a positive errno. */
int sbx_err_set(struct sbx_err *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Same, but appends ": strerror(errnum)". */
int sbx_err_sys(struct sbx_err *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sbx_err_clear(struct sbx_err *err);

#endif
