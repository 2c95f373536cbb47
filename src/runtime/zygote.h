/* The zygote: the init binary (init.h), exec'd once per daemon, that makes
 * every sandbox's init by forking itself into the sandbox's namespaces.
 *
 * Why: an exec per sandbox start (the kernel's ELF load, then static
 * glibc's start-up, whose CPU feature probes trap to the hypervisor on a
 * VM) was ~30% of a cold start's CPU; a fork of this small process copies
 * a few page tables. The daemon itself is never forked (its page tables
 * are large).
 *
 * Started by the daemon (runtime.c) with argv INIT_NAME alone, an empty
 * environment, fds 0-2, its socket at INIT_SOCK_FD and nothing at
 * INIT_USERNS_FD. It serves one request at a time on that socket
 * (proto.h framing):
 *   PROTO_START, payload struct zygote_start, fds: init's socket, then
 *     ncg cgroup.procs files of init's cgroups. The zygote makes the
 *     sandbox's user namespace (runtime/userns.c; made ahead when the
 *     previous request named this base as the next one), then clones a
 *     child with new mount, pid, ipc, uts and net namespaces (owned by the
 *     host's user namespace) as the
 *     daemon's child, not its own (CLONE_PARENT: the daemon reaps it and
 *     is its parent-death signal's parent). The child joins the cgroups
 *     first, places its two fds and runs init_run. The answer is
 *     PROTO_STARTED, payload struct proto_status: pid (host pid) or err.
 *     The child is in its namespaces from birth (the daemon may open
 *     a namespace of /proc/<pid>/ns at once), but the answer can come before it
 * has joined its cgroups: nothing the daemon does with a starting sandbox
 *     depends on that. A failure after the clone is the child's to report,
 *     on init's socket (PROTO_FAILED), as init's own failures are.
 * It exits when the daemon closes the socket, or dies with the daemon. */
#ifndef SBX_ZYGOTE_H
#define SBX_ZYGOTE_H

#include <stdint.h>
#include <sys/types.h>

#include "lib/err.h"

#define ZYGOTE_NAME "sandboxd-zygote" /* its comm (argv[0] is INIT_NAME) */

struct zygote_start {
	uint32_t ncg;       /* cgroup.procs fds after init's socket */
	uint32_t base;      /* the sandbox's host uid base (userns.h) */
	uint32_t next_base; /* the base the next start is expected to have,
	                       to make its user namespace ahead; 0: none */
};

/* In the init binary (zygote.c): serve the daemon until it lets go. */
_Noreturn void zygote_main(void);

/* The daemon's side (zygote_client.c). One thread uses it. */
struct zygote {
	int sock;    /* to the zygote; -1: none (started when needed) */
	pid_t pid;   /* the zygote, our child */
	int exe_fd;  /* the init binary, a sealed memfd */
	int slot_fd; /* holds the place of the zygote's socket while it is
	              * cloned (a low number: the clone copies no fd above) */
	int devnull;
};

/* The memfd and the low fds, while the daemon has few: call first. */
int zygote_prepare(struct zygote *z, struct sbx_err *err);
/* Exec the zygote, with its socket as fd 3, in the daemon's namespaces
 * and cgroup: once the daemon's cgroup is settled (on v2 the daemon moves
 * into <own>/daemon, and whatever else is in its cgroup with it). */
int zygote_launch(struct zygote *z, struct sbx_err *err);
/* init, in new namespaces (its user namespace mapping base..) and in the
 * cgroups of cg_fds (cgroup.procs), with sock as its fd 3: its host pid,
 * our child, or -errno. next_base: see struct zygote_start. A zygote
 * found gone is started again. */
pid_t zygote_make_init(struct zygote *z, int sock, uid_t base, uid_t next_base,
                       const int *cg_fds, int ncg, struct sbx_err *err);
/* The same in two halves, for a caller with other work meanwhile: the
 * request (0, or -errno), then its answer (as zygote_make_init's). Every
 * request is answered in order: one answer is taken before the next ask. */
int zygote_ask(struct zygote *z, int sock, uid_t base, uid_t next_base,
               const int *cg_fds, int ncg, struct sbx_err *err);
pid_t zygote_answer(struct zygote *z, struct sbx_err *err);
/* Stop the zygote and close the fds. */
void zygote_close(struct zygote *z);

#endif
