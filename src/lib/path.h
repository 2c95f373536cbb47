/* Client-given paths, checked as strings before anything touches a file:
 * the sandbox side (openat2 RESOLVE_BENEATH) then refuses links that
 * leave the same base. */
#ifndef SBX_PATH_H
#define SBX_PATH_H

#include <stddef.h>

enum path_verdict {
	PATH_OK = 0,
	PATH_OUTSIDE = -1, /* "..", or absolute outside the base */
	PATH_INVALID = -2, /* empty component rules, control chars, too long */
};

/* Normalize p (absolute, or relative to base) to a path relative to base
 * (base itself gives ""), into out. "." and empty components vanish; ".."
 * never climbs: any ".." is PATH_OUTSIDE. base is absolute, no trailing
 * slash ("/" allowed). */
int path_beneath(const char *base, const char *p, char *out, size_t cap);

/* p (absolute, or relative to from) as an absolute path beneath base,
 * normalized as path_beneath does, into *out (malloc'd, no length limit
 * but the kernel's PATH_MAX). PATH_OK, PATH_OUTSIDE, PATH_INVALID, or
 * -ENOMEM. */
int path_join_beneath(const char *base, const char *from, const char *p,
                      char **out);

#endif
