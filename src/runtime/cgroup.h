/* cgroups for sandboxes: one cgroup per sandbox, and beneath it one leaf
 * for the sandbox's init plus a pool of leaves for commands, so that killing
 * a command's leaf ends its whole process tree, daemonized children
 * included.
 *
 * Layout, in every hierarchy used (v2: the unified one; v1: memory, pids,
 * cpu, freezer, and devices where mounted), below the daemon's own cgroup
 * as /proc/self/cgroup names it:
 *
 *   <own>/<manager name>                          totals over all sandboxes
 *   <own>/<manager name>/<sandbox>                pids and CPU limits
 *   <own>/<manager name>/<sandbox>/init           the sandbox's pid 1
 *   <own>/<manager name>/<sandbox>/cmds           the memory limit
 *   <own>/<manager name>/<sandbox>/cmds/c<N>      one command's tree
 *
 * The memory limit covers the commands only: an OOM inside a sandbox picks
 * its victim among the commands, never init, whatever init's oom_score_adj
 * (which root may not be able to lower). pids and CPU cover the whole
 * sandbox. v1 devices carries the sandbox's device rules on <sandbox>, and
 * commands stay in init's cgroup there.
 *
 * Memory cgroups are the dear ones (the kernel gives each 1 KiB per 64
 * superblocks on the machine), so a sandbox has as few as the layout
 * allows. v1 memory (mounted on its own) is flat: <sandbox> alone, with
 * the memory limit and every command in it, and init in <own>/<manager
 * name> itself, beside all sandboxes and under none's limit: one memory
 * cgroup per sandbox. v2: <sandbox>, init and cmds have one each (a
 * process is in one cgroup for every controller there); the command
 * leaves have no memory controller of their own, they share cmds'.
 * Command leaves are reused
 * (mkdir/rmdir in four v1 hierarchies costs ~0.4 ms, a cost the exec path
 * should not pay). On v2 the daemon moves itself into <own>/daemon first
 * (the "no internal processes" rule forbids enabling controllers for
 * children otherwise); it never leaves the subtree it started in.
 *
 * Ownership: a manager holds a shared lock on <lock dir>/<manager name>.lock
 * for its life, and an fd on each of its dirs; cgroup_manager_remove_stale
 * removes another name only when neither is held by anyone and no process
 * lives below it. */
#ifndef SBX_CGROUP_H
#define SBX_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/err.h"

#define CGROUP_MAX_FDS 4  /* procs files a command joins: one per hierarchy */
#define CGROUP_MAX_HIER 6 /* hierarchies a sandbox lives in, at most (v1) */

struct cgroup_limits {
	uint64_t memory_bytes; /* 0 = unlimited */
	uint32_t pids;         /* 0 = unlimited */
	uint32_t cpu_millis;   /* 1000 = one CPU; 0 = unlimited */
};

struct cgroup_stats {
	uint64_t memory_bytes; /* current usage */
	uint64_t cpu_usec;     /* total CPU time used */
	uint32_t pids;         /* current tasks */
	uint64_t oom_kills;
};

/* Where the host's cgroup information is read from. NULL members take the
 * real defaults ("/proc/self/mountinfo", "/proc/self/cgroup", getpid()).
 * Unit tests point these at a fake cgroupfs tree. */
struct cgroup_env {
	const char *mountinfo_path;
	const char *self_cgroup_path;
	pid_t self_pid;
	/* Unit tests only; NULL on a real cgroupfs. A fake tree on a plain
	 * filesystem lacks cgroupfs's habit of filling a new directory with
	 * control files and of dropping them on rmdir: fake_mkdir is called
	 * after each cgroup directory is made, fake_rmdir before each is
	 * removed, so the test can play the kernel's part. */
	void (*fake_mkdir)(int dirfd, const char *name);
	void (*fake_rmdir)(int dirfd, const char *name);
	/* Where ownership locks live; NULL: CGROUP_LOCK_DIR. Host-wide, so that
	 * any daemon can tell whether another owns a manager dir. */
	const char *lock_dir;
};

#define CGROUP_LOCK_DIR "/run/sandboxd/cgroup"

struct cgroup_manager;
struct cgroup_sandbox;

/* Detect the layout (pure v2, or v1 controllers with or without a unified
 * mount) and create <own>/<name> in each hierarchy. name: [A-Za-z0-9._-]. */
int cgroup_manager_new(const struct cgroup_env *env, const char *name,
                       struct cgroup_manager **out, struct sbx_err *err);
void cgroup_manager_free(struct cgroup_manager *m);
int cgroup_manager_version(const struct cgroup_manager *m); /* 1 or 2 */
/* Kill every process left below <own>/<name> and remove its cgroups (a
 * previous daemon that died); the manager's own dirs stay. */
int cgroup_manager_clean(struct cgroup_manager *m, struct sbx_err *err);
/* cgroup_manager_clean, then remove <own>/<name> itself (daemon shutdown,
 * tests). On v2 <own>/daemon stays: the daemon still lives in it. */
int cgroup_manager_remove(struct cgroup_manager *m, struct sbx_err *err);
/* Remove the siblings <own>/<prefix>* of <own>/<name> that no manager owns
 * (daemons of earlier state dirs that died): not locked, not held open by
 * any process, no process inside; a dir that fails any of these stays.
 * Returns how many were removed, or -errno (nothing removed) when there is
 * no lock dir to decide ownership by. */
int cgroup_manager_remove_stale(struct cgroup_manager *m, const char *prefix,
                                struct sbx_err *err);
/* Limits over all sandboxes together, on <own>/<name> (0 = unlimited):
 * memory (with swap, where accounted) and pids. */
int cgroup_manager_set_totals(struct cgroup_manager *m, uint64_t memory_bytes,
                              uint64_t pids, struct sbx_err *err);

/* v1: make the next sandbox's cgroups ahead (its mkdirs, device rules and
 * limits: ~1.5 ms over six hierarchies), so that cgroup_sandbox_new only
 * renames them; the limits are rewritten there where they differ. A no-op
 * when a set is ready already, and on v2, where cgroupfs renames nothing.
 * Meant for idle moments; a start never waits for it. */
int cgroup_manager_make_ahead(struct cgroup_manager *m,
                              const struct cgroup_limits *lim,
                              struct sbx_err *err);
/* Create <name> (removing a stale one first) with limits, and its init leaf. */
int cgroup_sandbox_new(struct cgroup_manager *m, const char *name,
                       const struct cgroup_limits *lim,
                       struct cgroup_sandbox **out, struct sbx_err *err);
/* Kill everything in the sandbox, remove its cgroups, free s. s is freed
 * even on failure; what is left is removed by a later cgroup_sandbox_new of
 * the same name or by cgroup_manager_clean. */
int cgroup_sandbox_destroy(struct cgroup_sandbox *s, struct sbx_err *err);
/* Remove the cgroups of a sandbox that is known to be empty (its init
 * has been reaped, and with it everything in its pid namespace): rmdir
 * only, no kill walk, no freeze. Where a cgroup turns out not to be empty
 * it falls back to cgroup_sandbox_destroy. s is freed. */
int cgroup_sandbox_remove(struct cgroup_sandbox *s, struct sbx_err *err);
int cgroup_sandbox_set_limits(struct cgroup_sandbox *s,
                              const struct cgroup_limits *lim,
                              struct sbx_err *err);
int cgroup_sandbox_add_init(struct cgroup_sandbox *s, pid_t pid,
                            struct sbx_err *err);
/* Fill fds[0..*nfds) with O_WRONLY|O_CLOEXEC fds of the cgroup.procs files
 * of the sandbox's init cgroup, one per hierarchy: a process that writes
 * "0" to each joins it (the kernel checks the credentials of the opener).
 * The clone child that becomes init does so before its exec, so that init
 * and whatever it forks start in the sandbox's cgroups. The caller closes
 * the fds. */
int cgroup_sandbox_init_fds(struct cgroup_sandbox *s, int fds[CGROUP_MAX_HIER],
                            int *nfds, struct sbx_err *err);
/* The same for the set made ahead (-ENOENT: none), for an init made ahead
 * too: it is in the next sandbox's cgroups when they are renamed. */
int cgroup_manager_ahead_init_fds(struct cgroup_manager *m,
                                  int fds[CGROUP_MAX_HIER], int *nfds,
                                  struct sbx_err *err);
/* Whether cgroup_sandbox_new took the set made ahead for s. */
bool cgroup_sandbox_was_ahead(const struct cgroup_sandbox *s);
int cgroup_sandbox_stats(struct cgroup_sandbox *s, struct cgroup_stats *out);
/* Freeze (or thaw) every command of the sandbox, not its init
 * (cgroup_freeze.c). 0: done; -EAGAIN: freezing, not every task stopped
 * yet: call again later; -errno on failure. */
int cgroup_sandbox_freeze(struct cgroup_sandbox *s, bool frozen);
/* Thaw every cgroup below the manager: a daemon killed while a sandbox
 * was frozen left it so, and a frozen task cannot even die. */
void cgroup_manager_thaw(struct cgroup_manager *m);

/* Take an empty command leaf from the pool (creating one if none is free).
 * Returns its index >= 0 and, unless fds is NULL, opens its cgroup.procs
 * files as cgroup_cmd_open does. */
int cgroup_cmd_acquire(struct cgroup_sandbox *s, int fds[CGROUP_MAX_FDS],
                       int *nfds, struct sbx_err *err);
/* Fill fds[0..*nfds) with O_WRONLY|O_CLOEXEC fds of leaf idx's
 * cgroup.procs files, one per hierarchy with leaves: a process joins the
 * leaf by writing "0" to each, whoever it is by then (the kernel checks
 * the credentials of the opener). The caller closes the fds. */
int cgroup_cmd_open(struct cgroup_sandbox *s, int idx, int fds[CGROUP_MAX_FDS],
                    int *nfds, struct sbx_err *err);
/* One round of killing every process in the leaf, without waiting: how
 * many are still listed (0: empty; the caller retries from a timer while
 * it is not), or -errno. */
int cgroup_cmd_kill(struct cgroup_sandbox *s, int idx, struct sbx_err *err);
/* Send signo to every process in the leaf (no freeze: a polite TERM).
 * Through pidfds, so a pid that was recycled after it was listed is never
 * hit. Returns how many processes were listed, or -errno. */
int cgroup_cmd_signal(struct cgroup_sandbox *s, int idx, int signo);
bool cgroup_cmd_empty(struct cgroup_sandbox *s, int idx);
/* Return the leaf to the pool if empty; a leaf with processes left (a
 * daemonized child) stays taken until a later release finds it empty. */
bool cgroup_cmd_release(struct cgroup_sandbox *s, int idx);
/* Re-check leaves left taken by cgroup_cmd_release; return the empty ones to
 * the pool. Returns how many are still occupied. Called from the daemon's
 * periodic tick. */
int cgroup_sandbox_reclaim(struct cgroup_sandbox *s);

#endif
