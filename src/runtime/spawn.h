/* The child side of a spawn: runs in a process forked by the sandbox's
 * init, turns it into a sandboxed command, and execs. */
#ifndef SBX_SPAWN_H
#define SBX_SPAWN_H

#include "runtime/proto.h"
#include "runtime/seccomp.h"

struct spawn_what {   /* written to errfd when the child cannot exec */
	int err;
	char what[120];
};

/* fds: the request's stdio fds then its cgroup fds, as received. Never
 * returns: execs, or reports to errfd and exits 127. */
_Noreturn void spawn_child(const struct spawn_req *req, const int *fds,
			   int userns_fd, int errfd,
			   const struct seccomp_prog *seccomp);

#endif
