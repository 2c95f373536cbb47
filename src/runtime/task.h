/* Slow filesystem work in a child process: a snapshot that first flushes
 * gigabytes of unwritten data, a copy of a whole tree on the plain store.
 * The daemon's loop never waits for it: it watches the task's pidfd and
 * calls runtime_task_end once that is readable. The child is a fork of the
 * daemon that keeps no fd of it but the result pipe (a listening socket or
 * another command's stdin held by it would outlive their owners' wishes),
 * dies with the daemon (PDEATHSIG), and reports fn's result, errno and
 * message, through the pipe. */
#ifndef SBX_TASK_H
#define SBX_TASK_H

#include <stdint.h>
#include <sys/types.h>

#include "lib/err.h"

struct runtime_task {
	pid_t pid;
	int pidfd; /* readable once the child has exited */
	int msgfd; /* its result */
};

typedef int (*runtime_task_fn)(void *arg, uint64_t *value, struct sbx_err *err);

/* fn runs in the child with arg (a copy of the daemon's memory: pointers
 * stay valid there) and must open by path what it needs; *value is one
 * number it reports back (a size). */
int runtime_task_start(struct runtime_task *t, runtime_task_fn fn, void *arg,
                       struct sbx_err *err);
/* After pidfd became readable: reap the child; its result (fn's, or
 * -EINTR when it was killed before it had one) with err filled, and the
 * value it reported (value may be NULL). */
int runtime_task_end(struct runtime_task *t, uint64_t *value,
                     struct sbx_err *err);
/* Kill it and reap it (the daemon gives up on the work). */
void runtime_task_kill(struct runtime_task *t);

#endif
