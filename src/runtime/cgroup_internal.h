/* Shared between cgroup.c (detection, layout, pool, kill loop) and the
 * per-version knobs in cgroup_v1.c / cgroup_v2.c. Not for other modules. */
#ifndef SBX_CGROUP_INTERNAL_H
#define SBX_CGROUP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/cgroup.h"

/* Controllers the runtime cares about, as bits. */
enum {
	CGROUP_CTRL_CPU = 1u << 0,
	CGROUP_CTRL_CPUACCT = 1u << 1,
	CGROUP_CTRL_MEMORY = 1u << 2,
	CGROUP_CTRL_PIDS = 1u << 3,
	CGROUP_CTRL_FREEZER = 1u << 4,
	CGROUP_CTRL_DEVICES = 1u << 5, /* v1 only, optional */
};

/* v1 at most: memory, pids, cpu, freezer, a cpuacct mounted apart, and
 * devices. */
#define CGROUP_HIER_MAX 6
#define CGROUP_NAME_MAX 128
/* Beneath a sandbox's cgroup: the parent of its command leaves, and the
 * only cgroup with the sandbox's memory limit (init lives beside it). */
#define CGROUP_CMDS "cmds"
/* Beside the sandboxes' cgroups: the next sandbox's, made ahead. */
#define CGROUP_AHEAD "ahead"

struct cgroup_hier {
	char *path;     /* <own>/<manager name>, absolute; for messages */
	int dfd;        /* directory fd of path */
	unsigned ctrls; /* CGROUP_CTRL_* this hierarchy carries */
	/* Command leaves live here. A v1 cpuacct mounted on its own only counts
	 * CPU time, and v1 devices holds one rule set per sandbox: commands
	 * inherit init's cgroup there by fork, so these need no leaves and
	 * cost no extra fd per exec. */
	bool leaves;
	/* v1 memory, mounted on its own: a sandbox is one memory cgroup,
	 * <sandbox>, which carries the memory limit and holds the commands
	 * (no init, cmds or c<N> below it); init (the spawner) lives in the
	 * manager's own dir, outside every sandbox's limit. Every memory
	 * cgroup costs the kernel 1 KiB per 64 superblocks on the machine
	 * (its shrinker map), so one per sandbox instead of four. */
	bool flat;
};

struct cgroup_manager {
	int version;
	int nh;
	int primary;   /* v2: the unified hierarchy; v1: the freezer's */
	bool has_kill; /* v2 cgroup.kill (kernel >= 5.14) */
	struct cgroup_hier h[CGROUP_HIER_MAX];
	char *name;
	char *lock_dir; /* where ownership locks live */
	int lock_fd;    /* a shared lock on <lock_dir>/<name>.lock, or -1 */
	/* v1: a sandbox's cgroups made ahead, named CGROUP_AHEAD, with these
	 * limits (cgroup_manager_make_ahead) */
	bool ahead;
	struct cgroup_limits ahead_lim;
	void (*fake_mkdir)(int dirfd, const char *name);
	void (*fake_rmdir)(int dirfd, const char *name);
	/* Unit tests only: called after a cgroup's pids are read and before
	 * any of them is signalled, so a test can recycle a pid in between. */
	void (*test_listed)(void *arg);
	void *test_arg;
};

enum cgroup_leaf_state {
	CGROUP_LEAF_FREE,
	CGROUP_LEAF_TAKEN,
	CGROUP_LEAF_DRAINING, /* released with processes left in it */
};

struct cgroup_sandbox {
	struct cgroup_manager *m;
	char *name;
	uint8_t *state; /* enum cgroup_leaf_state, per leaf c<N> */
	int *free;      /* stack of free leaf indexes */
	int nleaves, cap, nfree, ndraining;
	bool was_ahead; /* its cgroups are the set made ahead */
};

/* "rel/file" (or "file" when rel is ""), relative to a hierarchy's dfd. */
int cgroup_path(char *buf, size_t size, const char *rel, const char *file);

/* 0 / -errno; no message. */
int cgroup_file_write(int dfd, const char *path, const char *val);
/* Reads up to size-1 bytes, NUL-terminated; returns the length or -errno. */
ssize_t cgroup_file_read(int dfd, const char *path, char *buf, size_t size);

/* Write val to rel/file in hierarchy h; on failure fill err with the full
 * path. optional: a missing file is not an error (returns -ENOENT quietly). */
int cgroup_set(struct cgroup_manager *m, int h, const char *rel,
               const char *file, const char *val, bool optional,
               struct sbx_err *err);
int cgroup_get_u64(struct cgroup_manager *m, int h, const char *rel,
                   const char *file, uint64_t *out);
/* The value of a "key value" line in rel/file. */
int cgroup_get_key_u64(struct cgroup_manager *m, int h, const char *rel,
                       const char *file, const char *key, uint64_t *out);
/* mkdir / rmdir of a cgroup directory (running the env's fake hooks);
 * 0 or -errno. rmdir rides out a short EBUSY after the last exit. */
int cgroup_mkdir(struct cgroup_manager *m, int dfd, const char *path);
int cgroup_rmdir(struct cgroup_manager *m, int dfd, const char *path);
/* Calls fn (may be NULL) on each pid in dirfd's cgroup.procs; returns how
 * many there were, or -errno. A missing file counts as empty. */
int cgroup_procs_foreach(int dirfd, void (*fn)(pid_t pid, void *arg),
                         void *arg);
/* Calls fn on dfd/path and every cgroup below it, parents first; sums
 * fn's results. A missing path is an empty tree. */
int cgroup_tree_walk(int dfd, const char *path, int (*fn)(int dirfd, void *arg),
                     void *arg);
/* The hierarchy carrying ctrl, or -1. */
int cgroup_hier_find(const struct cgroup_manager *m, unsigned ctrl);

int64_t cgroup_now_ns(void);
/* Sleep *us microseconds, then double it up to a cap. */
void cgroup_backoff(unsigned *us);

/* Per-version knobs. rel is a cgroup below the manager's dir. */
int cgroup_v2_prepare_own(struct cgroup_manager *m, int own_fd,
                          const char *own_path, pid_t pid, struct sbx_err *err);
int cgroup_v2_enable_subtree(struct cgroup_manager *m, const char *rel,
                             struct sbx_err *err);
int cgroup_v2_enable_subtree_cmds(struct cgroup_manager *m, const char *rel,
                                  struct sbx_err *err);
int cgroup_v2_set_limits(struct cgroup_manager *m, const char *rel,
                         const struct cgroup_limits *lim, struct sbx_err *err);
int cgroup_v2_stats(struct cgroup_manager *m, const char *rel,
                    struct cgroup_stats *out);
/* frozen: wait until the kernel reports it, bounded by deadline_ns;
 * -ETIMEDOUT when not fully frozen by then. */
int cgroup_v2_freeze(struct cgroup_manager *m, const char *rel, bool frozen,
                     int64_t deadline_ns);
int cgroup_v2_kill(struct cgroup_manager *m, const char *rel);

int cgroup_v1_set_limits(struct cgroup_manager *m, const char *rel,
                         const struct cgroup_limits *lim, struct sbx_err *err);
int cgroup_v1_stats(struct cgroup_manager *m, const char *rel,
                    struct cgroup_stats *out);
int cgroup_v1_freeze(struct cgroup_manager *m, const char *rel, bool frozen,
                     int64_t deadline_ns);
/* The device rules of a new sandbox cgroup rel (no children yet). */
int cgroup_v1_set_devices(struct cgroup_manager *m, const char *rel,
                          struct sbx_err *err);

/* Total limits on the manager's own dir (0 = unlimited). */
int cgroup_v1_set_totals(struct cgroup_manager *m, uint64_t memory_bytes,
                         uint64_t pids, struct sbx_err *err);
int cgroup_v2_set_totals(struct cgroup_manager *m, uint64_t memory_bytes,
                         uint64_t pids, struct sbx_err *err);

#endif
