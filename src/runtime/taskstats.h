/* Exit reports of every task on the host, from the kernel's per-task
 * accounting (taskstats, a generic netlink family): who died (host pid,
 * host uid, comm) and how (the wait status). The daemon uses them to name
 * seccomp kills of any process in a sandbox, not only of a command's main
 * process, whose status init reports (docs/security.md, check 43b).
 *
 * The kernel queues a task's report in its own exit path, before its
 * parent can be told of the death (taskstats_exit precedes exit_notify in
 * do_exit): whatever a parent, and after it init, reports of that death
 * comes later than the report itself, so draining the socket before
 * handling init's message sees it. Reports are best effort: a full socket
 * buffer drops them, which taskstats_read says (-ENOBUFS). */
#ifndef SBX_TASKSTATS_H
#define SBX_TASKSTATS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/err.h"

struct taskstats_exit {
	pid_t pid;  /* host pid (thread id) */
	pid_t tgid; /* host thread group id; 0 if the kernel omits it */
	uid_t uid;  /* real uid, in the host's user namespace */
	int status; /* as wait(2) would see it */
	char comm[32];
};

/* A non-blocking, close-on-exec netlink socket registered for the exits on
 * every possible CPU. Needs CAP_NET_ADMIN in the host's user namespace and
 * the host's pid namespace. Returns the fd or -errno. */
int taskstats_open(struct sbx_err *err);
/* Reads every queued report, calling cb for each exit; returns 0 once the
 * socket is empty, -ENOBUFS if the kernel dropped reports since the last
 * call (the rest is still read), another -errno on failure. */
int taskstats_read(int fd, void (*cb)(const struct taskstats_exit *, void *),
                   void *data);

#endif
