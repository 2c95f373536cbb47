/* Dropping every privilege a sandboxed command could hold in its user
 * namespace, right before exec. */
#ifndef SBX_CAPS_H
#define SBX_CAPS_H

#include <sys/types.h>

/* Clear the bounding, ambient, inheritable, permitted and effective sets,
 * lock the securebits so that uid 0 gains nothing at execve, and set
 * no_new_privs; uid (not 0): become it on the way. Returns 0 or -errno.
 * Async-signal-safe (runs after fork). */
int caps_drop_all(uid_t uid);

#endif
