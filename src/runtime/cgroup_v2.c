/* cgroup v2 knobs: the daemon's move into <own>/daemon, subtree_control,
 * limits, stats, freeze and cgroup.kill. Everything works on the unified
 * hierarchy, the manager's only one (index 0). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "runtime/cgroup_internal.h"

#define SUBTREE_CTRLS "+memory +pids +cpu"
#define CPU_PERIOD_US 100000
/* The kernel refuses a cpu.max quota below 1 ms. */
#define CPU_QUOTA_MIN_US 1000

struct move_ctx {
	int own_fd;
	int moved;
};

static void move_one(pid_t pid, void *arg)
{
	struct move_ctx *c = arg;
	char val[24];
	snprintf(val, sizeof(val), "%d", (int)pid);
	/* ESRCH (it exited meanwhile) is as good as moved. */
	if (cgroup_file_write(c->own_fd, "daemon/cgroup.procs", val) == 0)
		c->moved++;
}

int cgroup_v2_prepare_own(struct cgroup_manager *m, int own_fd,
                          const char *own_path, pid_t pid, struct sbx_err *err)
{
	char val[24];
	int r = cgroup_mkdir(m, own_fd, "daemon");
	if (r < 0 && r != -EEXIST)
		return sbx_err_sys(err, -r, "cgroup: mkdir %s/daemon",
		                   own_path);
	/* "No internal processes": <own> can only hand controllers to its
	 * children once no process lives in it. <own>/daemon is still inside
	 * the subtree the daemon was started in. */
	snprintf(val, sizeof(val), "%d", (int)pid);
	r = cgroup_file_write(own_fd, "daemon/cgroup.procs", val);
	if (r < 0)
		return sbx_err_sys(err, -r,
		                   "cgroup: move pid %s into %s/daemon", val,
		                   own_path);
	r = cgroup_file_write(own_fd, "cgroup.subtree_control", SUBTREE_CTRLS);
	if (r == -EBUSY) {
		/* Others share our cgroup (a helper started with us, the shell
		 * that ran us). They go down into <own>/daemon with us: still
		 * the subtree they started in, and the only way to enable
		 * controllers for the sandboxes. */
		struct move_ctx c = {own_fd, 0};
		cgroup_procs_foreach(own_fd, move_one, &c);
		r = cgroup_file_write(own_fd, "cgroup.subtree_control",
		                      SUBTREE_CTRLS);
	}
	if (r < 0)
		return sbx_err_sys(err, -r,
		                   "cgroup: write \"%s\" to "
		                   "%s/cgroup.subtree_control",
		                   SUBTREE_CTRLS, own_path);
	return 0;
}

int cgroup_v2_enable_subtree(struct cgroup_manager *m, const char *rel,
                             struct sbx_err *err)
{
	return cgroup_set(m, 0, rel, "cgroup.subtree_control", SUBTREE_CTRLS,
	                  false, err);
}

/* The command leaves get pids and cpu, not memory: they share the memory
 * cgroup of cmds (one memory cgroup fewer per command leaf; each costs
 * the kernel 1 KiB per 64 superblocks on the machine). */
int cgroup_v2_enable_subtree_cmds(struct cgroup_manager *m, const char *rel,
                                  struct sbx_err *err)
{
	return cgroup_set(m, 0, rel, "cgroup.subtree_control", "+pids +cpu",
	                  false, err);
}

int cgroup_v2_set_limits(struct cgroup_manager *m, const char *rel,
                         const struct cgroup_limits *lim, struct sbx_err *err)
{
	char val[48], cmds[PATH_MAX];
	int r;

	/* memory on the commands' parent only: init stays out of it */
	if ((r = cgroup_path(cmds, sizeof(cmds), rel, CGROUP_CMDS)) < 0)
		return sbx_err_sys(err, -r, "cgroup: %s", rel);
	if (lim->memory_bytes)
		snprintf(val, sizeof(val), "%llu",
		         (unsigned long long)lim->memory_bytes);
	else
		snprintf(val, sizeof(val), "max");
	if ((r = cgroup_set(m, 0, cmds, "memory.max", val, false, err)) < 0)
		return r;
	/* Without swap accounting the file is absent and there is nothing to
	 * escape the memory limit into. */
	r = cgroup_set(m, 0, cmds, "memory.swap.max", "0", true, err);
	if (r < 0 && r != -ENOENT)
		return r;

	if (lim->pids)
		snprintf(val, sizeof(val), "%u", lim->pids);
	else
		snprintf(val, sizeof(val), "max");
	if ((r = cgroup_set(m, 0, rel, "pids.max", val, false, err)) < 0)
		return r;

	if (lim->cpu_millis) {
		unsigned long long q =
		    (unsigned long long)lim->cpu_millis * 100;
		if (q < CPU_QUOTA_MIN_US)
			q = CPU_QUOTA_MIN_US;
		snprintf(val, sizeof(val), "%llu %d", q, CPU_PERIOD_US);
	} else {
		snprintf(val, sizeof(val), "max %d", CPU_PERIOD_US);
	}
	return cgroup_set(m, 0, rel, "cpu.max", val, false, err);
}

int cgroup_v2_set_totals(struct cgroup_manager *m, uint64_t memory_bytes,
                         uint64_t pids, struct sbx_err *err)
{
	char val[32];
	int r;

	if (memory_bytes)
		snprintf(val, sizeof(val), "%llu",
		         (unsigned long long)memory_bytes);
	else
		snprintf(val, sizeof(val), "max");
	if ((r = cgroup_set(m, 0, "", "memory.max", val, false, err)) < 0)
		return r;
	if (pids)
		snprintf(val, sizeof(val), "%llu", (unsigned long long)pids);
	else
		snprintf(val, sizeof(val), "max");
	return cgroup_set(m, 0, "", "pids.max", val, false, err);
}

int cgroup_v2_stats(struct cgroup_manager *m, const char *rel,
                    struct cgroup_stats *out)
{
	uint64_t v;
	int ret = 0, r;

	if ((r = cgroup_get_u64(m, 0, rel, "memory.current", &v)) == 0)
		out->memory_bytes = v;
	else
		ret = ret ? ret : r;
	if ((r = cgroup_get_key_u64(m, 0, rel, "cpu.stat", "usage_usec", &v)) ==
	    0)
		out->cpu_usec = v;
	else
		ret = ret ? ret : r;
	if ((r = cgroup_get_u64(m, 0, rel, "pids.current", &v)) == 0)
		out->pids = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	else
		ret = ret ? ret : r;
	/* memory.events (not .local) counts the whole subtree: kills happen
	 * in the leaves. */
	if ((r = cgroup_get_key_u64(m, 0, rel, "memory.events", "oom_kill",
	                            &v)) == 0)
		out->oom_kills = v;
	else
		ret = ret ? ret : r;
	return ret;
}

static bool events_frozen(struct cgroup_manager *m, const char *rel)
{
	uint64_t v;
	return cgroup_get_key_u64(m, 0, rel, "cgroup.events", "frozen", &v) ==
	           0 &&
	       v == 1;
}

int cgroup_v2_freeze(struct cgroup_manager *m, const char *rel, bool frozen,
                     int64_t deadline_ns)
{
	int r = cgroup_set(m, 0, rel, "cgroup.freeze", frozen ? "1" : "0",
	                   false, NULL);
	if (r < 0 || !frozen)
		return r;
	unsigned us = 50;
	while (!events_frozen(m, rel)) {
		if (cgroup_now_ns() >= deadline_ns)
			return -ETIMEDOUT;
		cgroup_backoff(&us);
	}
	return 0;
}

int cgroup_v2_kill(struct cgroup_manager *m, const char *rel)
{
	/* cgroup.kill takes the whole subtree at once and races no fork. */
	return cgroup_set(m, 0, rel, "cgroup.kill", "1", false, NULL);
}
