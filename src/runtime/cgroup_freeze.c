/* Freezing a sandbox's commands for an instant (a consistent snapshot of
 * its files: no process is half way through a change). Only the commands'
 * subtree (<sandbox>/cmds) freezes: init keeps answering the daemon, and
 * a command spawned meanwhile joins a frozen leaf and waits like the rest.
 * Never waits: the caller asks again (from a timer) until the kernel says
 * every task has stopped; a task in uninterruptible sleep can take long. */
#include <stdio.h>
#include <string.h>

#include "runtime/cgroup_internal.h"

int cgroup_sandbox_freeze(struct cgroup_sandbox *s, bool frozen)
{
	struct cgroup_manager *m = s->m;
	char rel[CGROUP_NAME_MAX * 2];
	snprintf(rel, sizeof(rel), "%s/%s", s->name, CGROUP_CMDS);
	/* deadline "now": one look at the state after the write */
	int64_t now = cgroup_now_ns();
	int r = m->version == 2 ? cgroup_v2_freeze(m, rel, frozen, now)
	                        : cgroup_v1_freeze(m, rel, frozen, now);
	return r == -ETIMEDOUT ? -EAGAIN : r;
}

static int thaw_dir(int dirfd, void *arg)
{
	const char *knob = arg;
	cgroup_file_write(dirfd, knob,
	                  strcmp(knob, "cgroup.freeze") ? "THAWED" : "0");
	return 0;
}

void cgroup_manager_thaw(struct cgroup_manager *m)
{
	int h = m->version == 2 ? 0 : cgroup_hier_find(m, CGROUP_CTRL_FREEZER);
	if (h < 0)
		return;
	/* parents first: a v1 child thaws only once its parents have */
	cgroup_tree_walk(m->h[h].dfd, "", thaw_dir,
	                 m->version == 2 ? "cgroup.freeze" : "freezer.state");
}
