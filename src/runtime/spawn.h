/* The child side of a spawn: runs in a child of the sandbox's spawner
 * (spawner.c), which is already in the sandbox's user namespace, with its
 * capabilities down to four, its securebits locked, no_new_privs and the
 * seccomp filter on; all of that the child inherits. It turns itself into
 * the command and execs (or runs a builtin). */
#ifndef SBX_SPAWN_H
#define SBX_SPAWN_H

#include "runtime/proto.h"

struct spawn_what { /* what failed, when the child cannot exec */
	int err;
	char what[120];
};

struct spawn_ctx {
	const struct spawn_req *req;
	const int *fds;      /* the request's stdio fds, as received */
	const int *leaf_fds; /* cgroup.procs of the command's leaf */
	uint32_t nleaf;
	/* How a failure is told: written to errfd (a forked child), or,
	 * when errfd is -1, left in w (a CLONE_VM | CLONE_VFORK child,
	 * whose memory is the spawner's until it execs or exits). */
	int errfd;
	struct spawn_what w;
};

/* Never returns: execs, runs the builtin, or reports the failure and
 * exits 127. Async-signal-safe calls only, writes no memory but its own
 * stack and c->w, so that it can run on the spawner's memory. */
_Noreturn void spawn_child(struct spawn_ctx *c);
/* The same, as a clone(2) entry point. */
int spawn_child_fn(void *c);

#endif
