/* The runtime's face to the daemon: make, run and tear down sandboxes. No
 * HTTP, no JSON: names, uids, limits, fds and messages. */
#ifndef SBX_RUNTIME_H
#define SBX_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/err.h"
#include "runtime/zygote.h"
#include "runtime/cgroup.h"
#include "runtime/image.h"
#include "runtime/proto.h"
#include "runtime/seccomp.h"
#include "runtime/store.h"
#include "runtime/usrmask.h"

/* ptys per sandbox unless the daemon says otherwise (docs/security.md) */
#define RUNTIME_MAX_PTYS 64

struct runtime {
	char *state_dir;     /* absolute */
	char *image_dir;     /* <state>/image/default */
	char *mnt_dir;       /* <state>/run/mnt: init's staging mountpoints */
	char *sandboxes_dir; /* <state>/sandboxes/<name>: persistent files */
	char *trash_dir; /* <state>/trash: removed sandboxes, emptied async */
	char
	    *usr_mask_dir; /* <state>/image/usrmask, or NULL: nothing to mask */
	char
	    *image_top_dir; /* <state>/image/top: above an OCI image's layers */
	char *layers_dir;   /* <state>/images/layers (core/images.h) */
	unsigned max_ptys;  /* per sandbox (devpts max=) */
	struct cgroup_manager *cg;
	struct store *store;
	struct seccomp_prog seccomp;
	struct zygote zygote; /* makes every init (zygote.h) */
	uid_t next_base;      /* runtime_expect_base */
	/* the last start's limits, for the set runtime_make_ahead makes */
	struct cgroup_limits last_lim;
	/* An init made ahead (runtime_make_ahead), waiting for its parameters
	 * in the set of cgroups made ahead and in the user namespace of base;
	 * pid 0: none, or asked of the zygote and not answered yet. */
	struct {
		pid_t pid;
		bool asked;
		int sock;
		uid_t base;
	} ahead;
	struct {
		pid_t pid;
		char name[16]; /* the sandbox it removes in place, or "" */
	} cleaners[64];        /* removing children not yet reaped, and inits
	                          made ahead for nothing (killed) */
	size_t ncleaners;
	struct usrmask_job *usr_mask_job; /* builds usr_mask_dir at start */
	bool usr_mask_done;
};

/* A running sandbox's handles on the daemon side. */
struct sandbox_proc {
	pid_t init_pid; /* host pid; our child until runtime_reap */
	int pidfd;      /* -1: init is watched through sock; made by
	                 * runtime_kill, to watch its end */
	int sock;       /* to init, the spawner; end of file when the
	                 * sandbox is gone (init exits, or dies) */
	struct cgroup_sandbox *cg;
	/* command leaves whose fds the spawner has: [idx] != 0 */
	uint8_t *leaf_given;
	size_t nleaf_given;
};

/* store_bytes: size of the disk store (see store.h); 0: plain directories
 * without disk limits. */
int runtime_new(const char *state_dir, uint64_t store_bytes,
                const struct image_file *files, size_t nfiles,
                struct runtime **out, struct sbx_err *err);
void runtime_free(struct runtime *rt);
/* Limits over all of this daemon's sandboxes together (0 = unlimited):
 * memory and pids of its cgroup subtree. */
int runtime_set_totals(struct runtime *rt, uint64_t memory_bytes, uint64_t pids,
                       struct sbx_err *err);

/* A sandbox's files: how much they may take, and which store group they
 * are counted in (store_group_of its tenant; 0: none). Which host uid
 * range owns them on disk is written beside them (runtime_files_owner). */
struct runtime_files {
	uint64_t disk_bytes; /* set when its files are first made (0: none) */
	uint64_t group;
	/* An image sandbox: the image's id, written beside its files when
	 * they are first made (runtime_files_image reads it back), and, to
	 * start it, its layers' names in layers_dir, bottom first. */
	const char *image;
	const char *const *layers;
	size_t nlayers;
};

/* The uid base the next start is expected to have (the next new
 * sandbox's), so that its user namespace is made ahead, and its init with
 * runtime_make_ahead; 0: no guess. A wrong guess costs a namespace and an
 * init made for nothing (killed at the next start), never a wrong one. */
void runtime_expect_base(struct runtime *rt, uid_t base);

/* Make the next start's cgroups ahead, with the last start's limits
 * (cgroup_manager_make_ahead), and its init in them (v1: where the set can
 * be renamed), forked into the namespaces of the expected base and waiting
 * for its parameters; for an idle moment of the daemon. A start whose
 * base is another kills that init. A failure only means the next start
 * makes them itself. */
void runtime_make_ahead(struct runtime *rt);

/* Start a sandbox's init. Returns at once: setup continues in init, which
 * sends PROTO_READY or PROTO_FAILED; requests sent before that are queued
 * in the socket and served after setup. */
int runtime_start(struct runtime *rt, const char *name, uid_t base,
                  const struct cgroup_limits *lim,
                  const struct runtime_files *files, struct sandbox_proc *out,
                  struct sbx_err *err);
/* Make the store's <name> for a sandbox unless it exists (store_create),
 * and say which host uid range owns its files on disk (*owner, its
 * base): the sandbox's own (base), or, for files that came from another
 * sandbox (a fork, a restore of another's snapshot), that one's. It is
 * kept in <name>/owner, beside the layers and out of the sandbox's reach,
 * so that it travels with every snapshot; when none is kept yet, base is
 * written. */
int runtime_files_prepare(struct runtime *rt, const char *name, uid_t base,
                          const struct runtime_files *files, uid_t *owner,
                          struct sbx_err *err);

/* The image id kept with a sandbox's files into buf ("" when it runs the
 * host's system, or has no files yet). */
int runtime_files_image(struct runtime *rt, const char *name, char *buf,
                        size_t cap);

/* Send a spawn: takes a command cgroup leaf (returned in *cg_idx) and
 * passes stdio fds (nstdio, targets in req), plus the leaf's fds the first
 * time that leaf is used (the spawner keeps them). */
int runtime_spawn(struct sandbox_proc *sp, uint64_t id, struct spawn_req *req,
                  const int *stdio_fds, int *cg_idx, struct sbx_err *err);
/* Kill init (so the whole pid namespace) without waiting; sp->pidfd is
 * init's from then on (-1 where the kernel has no pidfd_open). */
void runtime_kill(struct sandbox_proc *sp);
/* After runtime_kill: reap init, remove cgroups, close handles. Waits
 * for init, whose exit waits for its whole pid namespace to be gone. */
void runtime_reap(struct sandbox_proc *sp);
/* The same without waiting: 1 when done, 0 while init has not exited
 * (its namespace is still going down). sp->pidfd turns readable when it
 * has: watch it, then call this again. Without a pidfd (-1) only
 * runtime_reap can tell. */
int runtime_reap_nowait(struct sandbox_proc *sp);
/* After runtime_kill: wait until init has exited (its namespaces and
 * mounts are gone), without reaping it or removing its cgroups. */
void runtime_wait_exit(struct sandbox_proc *sp);
/* Remove a stopped sandbox's files: its subvolume at once, or (plain
 * directories) a move to the trash, emptied by a background process.
 * Returns 0 once <sandboxes>/<name> is gone from its place; otherwise an
 * error (a background process may still be at work on it), and the name
 * must not be given to another sandbox until runtime_files_exist() says
 * it is gone or a later call returns 0. name NULL: empty the trash. */
int runtime_remove_files(struct runtime *rt, const char *name,
                         struct sbx_err *err);
/* Whether <sandboxes>/<name> exists. */
bool runtime_files_exist(struct runtime *rt, const char *name);
/* Reap finished trash-removal processes (non-blocking). */
void runtime_collect(struct runtime *rt);

#endif
