/* Dropping every privilege a sandboxed command could hold in its user
 * namespace. In two steps: the sandbox's spawner (spawner.c) locks
 * everything down once but for the few capabilities it needs to make a
 * command, and each command drops those before exec. */
#ifndef SBX_CAPS_H
#define SBX_CAPS_H

#include <stdint.h>

/* Lock the securebits so that uid 0 gains nothing at execve and a change
 * of uid clears nothing, empty the bounding and ambient sets, keep only
 * the capabilities in keep (a mask of 1 << CAP_*) permitted and effective
 * (none inheritable), and set no_new_privs. Needs CAP_SETPCAP. Returns 0
 * or -errno. */
int caps_limit(uint64_t keep);
/* Clear the permitted, effective and inheritable sets, all that
 * caps_limit left. Returns 0 or -errno. Async-signal-safe: runs in a
 * vfork child. */
int caps_clear(void);

#endif
