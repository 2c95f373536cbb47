#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int err_vset(struct sbx_err *err, int errnum, int with_strerror,
                    const char *fmt, va_list ap)
{
	if (errnum <= 0)
		errnum = EIO;
	if (!err)
		return -errnum;
	err->code = errnum;
	int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	if (with_strerror && n >= 0 && (size_t)n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, ": %s",
		         strerror(errnum));
	return -errnum;
}

int sbx_err_set(struct sbx_err *err, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = err_vset(err, errnum, 0, fmt, ap);
	va_end(ap);
	return r;
}

int sbx_err_sys(struct sbx_err *err, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = err_vset(err, errnum, 1, fmt, ap);
	va_end(ap);
	return r;
}

void sbx_err_clear(struct sbx_err *err)
{
	if (err) {
		err->code = 0;
		err->msg[0] = '\0';
	}
}
