/* cgroup v1 knobs: limits spread over the memory, pids and cpu hierarchies,
 * stats (cpuacct when mounted), the freezer that kill works through, and
 * the device rules (devices, where mounted). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cgroup_internal.h"

/* The quota is per period of 100 ms, the kernel's default period, which is
 * never written: every write of a cfs knob checks the bandwidth of every
 * task group on the machine (tg_set_cfs_bandwidth), one per sandbox, so
 * each write costs O(sandboxes) and a start made two of them.
 * The kernel refuses a cfs quota below 1 ms. */
#define CPU_QUOTA_MIN_US 1000

static int set_memory(struct cgroup_manager *m, int h, const char *rel,
                      const char *val, struct sbx_err *err)
{
	/* memory.limit_in_bytes may never exceed memory.memsw.limit_in_bytes:
	 * raising the limit of a sandbox whose memsw limit sits at the old
	 * value fails with EINVAL until memsw is raised first. */
	int r =
	    cgroup_set(m, h, rel, "memory.limit_in_bytes", val, false, NULL);
	if (r == -EINVAL) {
		r = cgroup_set(m, h, rel, "memory.memsw.limit_in_bytes", val,
		               true, err);
		if (r < 0 && r != -ENOENT)
			return r;
		r = cgroup_set(m, h, rel, "memory.limit_in_bytes", val, false,
		               NULL);
	}
	if (r < 0)
		return sbx_err_sys(err, -r,
		                   "cgroup: write \"%s\" to "
		                   "%s/%s/memory.limit_in_bytes",
		                   val, m->h[h].path, rel);
	/* Present only with swap accounting; without it there is no swap to
	 * escape the memory limit into either way. */
	r = cgroup_set(m, h, rel, "memory.memsw.limit_in_bytes", val, true,
	               err);
	return r == -ENOENT ? 0 : r;
}

int cgroup_v1_set_limits(struct cgroup_manager *m, const char *rel,
                         const struct cgroup_limits *lim, struct sbx_err *err)
{
	int hm = cgroup_hier_find(m, CGROUP_CTRL_MEMORY);
	int hp = cgroup_hier_find(m, CGROUP_CTRL_PIDS);
	int hc = cgroup_hier_find(m, CGROUP_CTRL_CPU);
	char val[32];
	int r;

	if (hm < 0 || hp < 0 || hc < 0)
		return sbx_err_set(err, ENOTSUP, "cgroup: missing hierarchy");

	/* memory on the commands' cgroup only: init stays out of it (flat:
	 * the sandbox's own, where init is not; else its cmds) */
	char cmds[PATH_MAX];
	if (m->h[hm].flat)
		snprintf(cmds, sizeof(cmds), "%s", rel);
	else if ((r = cgroup_path(cmds, sizeof(cmds), rel, CGROUP_CMDS)) < 0)
		return sbx_err_sys(err, -r, "cgroup: %s", rel);
	if (lim->memory_bytes)
		snprintf(val, sizeof(val), "%llu",
		         (unsigned long long)lim->memory_bytes);
	else
		snprintf(val, sizeof(val), "-1");
	if ((r = set_memory(m, hm, cmds, val, err)) < 0)
		return r;

	if (lim->pids)
		snprintf(val, sizeof(val), "%u", lim->pids);
	else
		snprintf(val, sizeof(val), "max");
	if ((r = cgroup_set(m, hp, rel, "pids.max", val, false, err)) < 0)
		return r;

	if (lim->cpu_millis) {
		unsigned long long q =
		    (unsigned long long)lim->cpu_millis * 100;
		if (q < CPU_QUOTA_MIN_US)
			q = CPU_QUOTA_MIN_US;
		snprintf(val, sizeof(val), "%llu", q);
	} else {
		snprintf(val, sizeof(val), "-1");
	}
	return cgroup_set(m, hc, rel, "cpu.cfs_quota_us", val, false, err);
}

int cgroup_v1_set_totals(struct cgroup_manager *m, uint64_t memory_bytes,
                         uint64_t pids, struct sbx_err *err)
{
	int hm = cgroup_hier_find(m, CGROUP_CTRL_MEMORY);
	int hp = cgroup_hier_find(m, CGROUP_CTRL_PIDS);
	char val[32];
	int r;

	if (hm < 0 || hp < 0)
		return sbx_err_set(err, ENOTSUP, "cgroup: missing hierarchy");
	if (memory_bytes)
		snprintf(val, sizeof(val), "%llu",
		         (unsigned long long)memory_bytes);
	else
		snprintf(val, sizeof(val), "-1");
	if ((r = set_memory(m, hm, "", val, err)) < 0)
		return r;
	if (pids)
		snprintf(val, sizeof(val), "%llu", (unsigned long long)pids);
	else
		snprintf(val, sizeof(val), "max");
	return cgroup_set(m, hp, "", "pids.max", val, false, err);
}

int cgroup_v1_set_devices(struct cgroup_manager *m, const char *rel,
                          struct sbx_err *err)
{
	/* The nodes of a sandbox's /dev (rootfs.c setup_dev) and of its devpts
	 * (ptmx 5:2, the ptys 136:*), nothing else. "m" too: init makes the
	 * nodes, and may have joined its cgroup by then. */
	static const char *const allow[] = {
	    "c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 1:8 rwm",
	    "c 1:9 rwm", "c 5:0 rwm", "c 5:2 rwm", "c 136:* rwm",
	};
	int h = cgroup_hier_find(m, CGROUP_CTRL_DEVICES);
	if (h < 0)
		return 0;
	int r = cgroup_set(m, h, rel, "devices.deny", "a", false, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < sizeof(allow) / sizeof(allow[0]); i++) {
		r = cgroup_set(m, h, rel, "devices.allow", allow[i], false,
		               NULL);
		/* EPERM: the daemon's own cgroup denies it already, which is
		 * stricter still */
		if (r < 0 && r != -EPERM)
			return sbx_err_sys(err, -r,
			                   "cgroup: write \"%s\" to "
			                   "%s/%s/devices.allow",
			                   allow[i], m->h[h].path, rel);
	}
	return 0;
}

struct oom_sum {
	uint64_t kills;
};

static int oom_sum_dir(int dirfd, void *arg)
{
	struct oom_sum *o = arg;
	char buf[512];
	ssize_t n =
	    cgroup_file_read(dirfd, "memory.oom_control", buf, sizeof(buf));
	if (n < 0)
		return 0;
	for (char *line = buf; line && *line;) {
		if (strncmp(line, "oom_kill ", 9) == 0) {
			o->kills += strtoull(line + 9, NULL, 10);
			break;
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return 0;
}

int cgroup_v1_stats(struct cgroup_manager *m, const char *rel,
                    struct cgroup_stats *out)
{
	int hm = cgroup_hier_find(m, CGROUP_CTRL_MEMORY);
	int hp = cgroup_hier_find(m, CGROUP_CTRL_PIDS);
	int ha = cgroup_hier_find(m, CGROUP_CTRL_CPUACCT);
	uint64_t v;
	int ret = 0, r;

	if ((r = cgroup_get_u64(m, hm, rel, "memory.usage_in_bytes", &v)) == 0)
		out->memory_bytes = v;
	else
		ret = ret ? ret : r;
	if (ha >= 0) {
		if ((r = cgroup_get_u64(m, ha, rel, "cpuacct.usage", &v)) == 0)
			out->cpu_usec = v / 1000;
		else
			ret = ret ? ret : r;
	}
	if ((r = cgroup_get_u64(m, hp, rel, "pids.current", &v)) == 0)
		out->pids = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	else
		ret = ret ? ret : r;
	/* v1 counts an OOM kill only in the victim's own memcg, which is a
	 * leaf: sum the sandbox's tree. */
	struct oom_sum o = {0};
	r = cgroup_tree_walk(m->h[hm].dfd, rel, oom_sum_dir, &o);
	if (r < 0)
		ret = ret ? ret : r;
	out->oom_kills = o.kills;
	return ret;
}

int cgroup_v1_freeze(struct cgroup_manager *m, const char *rel, bool frozen,
                     int64_t deadline_ns)
{
	int h = cgroup_hier_find(m, CGROUP_CTRL_FREEZER);
	int r = cgroup_set(m, h, rel, "freezer.state",
	                   frozen ? "FROZEN" : "THAWED", false, NULL);
	if (r < 0 || !frozen)
		return r;
	/* The state reads FREEZING until every task has stopped; reading it
	 * is also what moves a v1 cgroup on to FROZEN. */
	char p[PATH_MAX], buf[32];
	if ((r = cgroup_path(p, sizeof(p), rel, "freezer.state")) < 0)
		return r;
	unsigned us = 50;
	for (;;) {
		ssize_t n = cgroup_file_read(m->h[h].dfd, p, buf, sizeof(buf));
		if (n < 0)
			return (int)n;
		if (strncmp(buf, "FROZEN", 6) == 0)
			return 0;
		if (cgroup_now_ns() >= deadline_ns)
			return -ETIMEDOUT;
		cgroup_backoff(&us);
	}
}
