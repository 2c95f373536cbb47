/* pid 1 of a sandbox. Forked (clone3 with new mount, pid, ipc, uts and net
 * namespaces) from the daemon, it builds the sandbox's filesystem, then
 * serves PROTO_SPAWN/PROTO_SIGNAL requests and reports every exit. */
#ifndef SBX_INIT_H
#define SBX_INIT_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/rootfs.h"
#include "runtime/seccomp.h"

struct init_args {
	int sock;      /* SOCK_SEQPACKET to the daemon */
	int userns_fd; /* the sandbox's user namespace */
	struct rootfs_spec rootfs;
	const struct seccomp_prog *seccomp;
	uint64_t disk_bytes; /* RLIMIT_FSIZE of every command; 0: none */
};

_Noreturn void init_main(const struct init_args *a);
/* The daemon's argv strings (contiguous), which init overwrites with its
 * own name. */
void init_set_title_area(char *start, size_t len);

#endif
