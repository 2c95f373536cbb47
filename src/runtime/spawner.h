/* The sandbox's spawner: what init (pid 1) becomes once the sandbox's
 * filesystem is built. It enters the sandbox's user namespace, drops what
 * it can, installs the seccomp filter once, and then serves the daemon's
 * socket: PROTO_SPAWN (a command is a CLONE_VM | CLONE_VFORK child of it,
 * which inherits all of that), and PROTO_SIGNAL; it reports PROTO_SPAWNED,
 * PROTO_EXIT and, once set up, PROTO_READY (or PROTO_FAILED). As pid 1 it
 * also reaps the sandbox's orphans. One process per sandbox, not two: a
 * fork less per start, and one process less to hold and to tear down. */
#ifndef SBX_SPAWNER_H
#define SBX_SPAWNER_H

#include "runtime/proto.h"

/* Called by init, as host root, once the rootfs is built; sock and userns
 * are init's. Exits when the daemon closes the socket, and the kernel
 * then kills every process of the sandbox's pid namespace. */
_Noreturn void spawner_main(int sock, int userns, const struct init_params *p);

#endif
