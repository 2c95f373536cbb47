/* The sandbox's spawner: a child of init that enters the sandbox's user
 * namespace, drops what it can, installs the seccomp filter once, and
 * then serves the daemon's socket: PROTO_SPAWN (a command is a
 * CLONE_VM | CLONE_VFORK child of it, which inherits all of that), and
 * PROTO_SIGNAL; it reports PROTO_SPAWNED, PROTO_EXIT and, once set up,
 * PROTO_READY (or PROTO_FAILED). */
#ifndef SBX_SPAWNER_H
#define SBX_SPAWNER_H

#include "runtime/proto.h"

#define SPAWNER_NAME "sandboxd-spawn" /* its comm */

/* Runs in the forked child of init, as host root, after the rootfs is
 * built; sock and userns are init's. Exits when the daemon closes the
 * socket. */
_Noreturn void spawner_main(int sock, int userns, const struct init_params *p);

#endif
