/* User namespaces with a fixed mapping: sandbox ids 0..count-1 are host ids
 * base..base+count-1. The namespace is made by a short-lived child; the
 * returned fd keeps it alive after the child is gone. */
#ifndef SBX_USERNS_H
#define SBX_USERNS_H

#include <sys/types.h>

#include "lib/err.h"

#define USERNS_RANGE 65536u

/* Returns an O_CLOEXEC fd of the new user namespace, or -errno. */
int userns_create(uid_t base, struct sbx_err *err);
/* For an idmapped mount of a sandbox's files that are owned on disk by
 * another range (a fork's files are its origin's): host ids files.. show
 * as base.., host root as itself, nothing else is mapped. Owned by base. */
int userns_create_idmap(uid_t base, uid_t files, struct sbx_err *err);

#endif
