/* The sandbox manager: every known sandbox (from the registry), its state
 * and lifecycle (lazy start, idle stop, destroy), its sessions, and the
 * messages from its init. Protocol-free: the API files call into it. */
#ifndef SBX_MANAGER_H
#define SBX_MANAGER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "lib/loop.h"
#include "core/session.h"
#include "lib/err.h"
#include "runtime/runtime.h"

struct registry;
struct network;
struct net_policy;
struct sandbox_net;
struct image;
struct images;
struct exec_job;
struct process;
struct snapshot;
struct snapshot_op;

/* What a sandbox is created with; zeros take the daemon's defaults. */
struct sandbox_opts {
	struct cgroup_limits limits;
	uint64_t disk_bytes;
	uint64_t sleep_after_ms;
	bool keep_alive;
	const char *const *env; /* "K=V" */
	size_t envc;
	const char *labels;     /* JSON text */
	struct net_policy *net; /* NULL: --network-default; taken over */
	struct image *image;    /* NULL: the host's own system */
};

/* STOPPING: init is killed and its pid namespace is going down; the loop
 * finishes the stop when init's pidfd says it is gone (reap, cgroups
 * removed). What needs it stopped waits for that (sandbox_when_stopped). */
enum sandbox_state { SB_STOPPED, SB_STARTING, SB_RUNNING, SB_STOPPING };

/* A sandbox: opaque outside the core (core/sandbox_internal.h); the
 * faces read it through the functions below. */
struct sandbox;

struct manager {
	struct config *cfg;
	struct loop *loop;
	struct runtime *rt;
	struct registry *reg;
	struct sandbox **buckets;
	struct sandbox *dying; /* destroyed, still stopping (by hnext) */
	size_t nbuckets, count;
	uint8_t *slots; /* 1: a sandbox's; 2: files of a removed one still
	                 * there (removal failed): out of use until gone */
	uint32_t nslots, ndirty;
	uint32_t slot_start; /* where the search for a free slot starts */
	uint64_t dirty_next_ms, dirty_backoff_ms; /* retrying those removals */
	struct uidrange *ranges;                  /* host-wide reservations */
	uint64_t next_job_id;
	struct loop_timer cron;
	struct loop_timer ahead; /* after a start: runtime_make_ahead */
	uint32_t nrunning;       /* sandboxes not stopped */
	/* a tenant's quotas (0: none); NULL: no tenant has any */
	void (*quota_of)(void *data, const char *tenant,
	                 uint32_t *max_sandboxes, uint32_t *max_running);
	void *quota_data;
	int exits_fd; /* taskstats exit reports, or -1 */
	struct loop_watch exits_w;
	uint64_t exits_lost_ms; /* when a loss was last logged */
	struct snapshot *snaps; /* every tenant's, oldest first */
	struct snapshot_op *snap_ops;
	uint64_t *groups; /* store groups made this run */
	size_t ngroups;
	struct backups *backups; /* the backup engine */
	struct fleet *fleet;     /* a fleet's node (core/fleet.h), or NULL
	                            (made and freed by main) */
	struct network *net;     /* core/network.c */
	struct llm *llm;         /* the room assistant's model, or NULL
	                            (core/llm.h; made and freed by main) */
	bool closing;            /* in manager_free: nothing new starts */
	struct images *images;   /* OCI images (core/images.h) */
	/* loaded sandboxes whose image is not read yet; the image GC of the
	 * start waits for none to be left (cron reads them in batches) */
	size_t images_pending;
	size_t resolve_bucket; /* where cron's next batch starts */
	bool gc_pending;
};

int manager_new(struct config *cfg, struct loop *loop, struct manager **out,
                struct sbx_err *err);
/* Stop every sandbox (files kept) and free everything. */
void manager_free(struct manager *m);

/* 1-63 of [a-z0-9-]: what every face accepts as a sandbox ID (it names
 * the sandbox's cgroups and log lines, never a path). */
bool sandbox_id_valid(const char *id);
struct sandbox *manager_find(struct manager *m, const char *tenant,
                             const char *id);
/* Handle the host's queued exit reports now (each SIGSYS death in a
 * sandbox is logged as event=seccomp-kill). Called before a command's end
 * is reported, so that the kills it saw are logged first. False when the
 * daemon has no exit reports (then only a command's main process is
 * named, from init's status). */
bool manager_poll_exits(struct manager *m);
/* Register a new sandbox (not started). -EEXIST if it exists; -EDQUOT
 * (message naming it) when the tenant's maxSandboxes is reached. */
int manager_create(struct manager *m, const char *tenant, const char *id,
                   const struct sandbox_opts *opts, struct sandbox **out,
                   struct sbx_err *err);
/* Find, or create with defaults. */
int manager_get(struct manager *m, const char *tenant, const char *id,
                struct sandbox **out, struct sbx_err *err);
/* Start it if it is stopped (returns at once; init finishes setup on its
 * own and queued commands run after). -EDQUOT as manager_admit. */
int sandbox_ensure_started(struct sandbox *sb, struct sbx_err *err);
/* Make room for a stopped sandbox to start: under --max-sandboxes and its
 * tenant's maxRunning, stopping the least recently used idle sandbox (the
 * tenant's own for its quota) where needed. -EDQUOT, with a message naming
 * the quota, when none is idle. 0 at once for a running one. */
int manager_admit(struct sandbox *sb, struct sbx_err *err);
/* What the faces may read of a sandbox. */
const char *sandbox_id(const struct sandbox *sb);
const char *sandbox_tenant(const struct sandbox *sb);
const char *sandbox_labels(const struct sandbox *sb); /* JSON text, or NULL */
/* starting or running (a stopping one is not) */
bool sandbox_running(const struct sandbox *sb);
struct sandbox_info {
	uint64_t created_ms, last_active_ms; /* wall clock */
	uint64_t sleep_after_ms;             /* its own, else the default */
	bool keep_alive, running;
	const char *image_id;      /* "": the host's system */
	const struct image *image; /* NULL: none, or no longer stored */
};
/* (Its image is read on first use, after a restart: this reads it.) */
void sandbox_info(struct sandbox *sb, struct sandbox_info *out);
/* Its cgroup's figures; -ESRCH when it has none (stopped). */
int sandbox_stats(const struct sandbox *sb, struct cgroup_stats *st);
/* The daemon's configuration it runs under. */
const struct config *sandbox_config(const struct sandbox *sb);
/* What it was created with, as options for another (a fork): limits,
 * disk, idleness, environment, labels; network and image are NULL. The
 * pointers are its own: valid while it lives. */
void sandbox_opts_of(const struct sandbox *sb, struct sandbox_opts *o);
/* The variables it was created with ("K=V"); returns how many. */
size_t sandbox_env(const struct sandbox *sb, const char *const **env);
/* Its sessions, the default one first: NULL starts, NULL ends. */
struct session *sandbox_session_next(struct sandbox *sb, struct session *prev);
/* The shell its shell commands run with: bash on the host's system, its
 * image's (bash, else sh) otherwise; NULL when the image has none (or is
 * gone). */
const char *sandbox_shell(const struct sandbox *sb);
/* The limits it runs with: its own, else the daemon's defaults, never
 * above the operator's ceilings. */
void sandbox_limits(const struct sandbox *sb, struct cgroup_limits *lim,
                    uint64_t *disk_bytes);
/* Stop: every process ends, files stay. Pending commands fail with why.
 * Returns at once: the sandbox is stopping until its pid namespace is
 * gone (the loop finishes it); a command sent meanwhile waits for that,
 * then starts it afresh. */
void sandbox_stop(struct sandbox *sb, const char *why);
/* Run fn(ctx) once it is stopped: now when it is (not starting, running
 * or stopping), else when its stop ends. */
void sandbox_when_stopped(struct sandbox *sb, void (*fn)(void *ctx), void *ctx);
/* Stop it and wait, on the loop, for the stop to end (a start, a
 * destroy, a restore that cannot wait otherwise). */
void sandbox_stop_wait(struct sandbox *sb, const char *why);
/* Stop, delete files and registry entry, free sb. */
int sandbox_destroy(struct sandbox *sb, struct sbx_err *err);
/* A use of it (a command, a file operation, a terminal): it stays awake,
 * and a fleet's next checkpoint has something to take. */
void sandbox_touch(struct sandbox *sb);
/* Awake, without a use: its start, the daemon's own work in it. */
void sandbox_keep_awake(struct sandbox *sb);
/* Replace its labels (JSON text of an object, or NULL), kept in the
 * registry. */
int sandbox_set_labels(struct sandbox *sb, const char *labels,
                       struct sbx_err *err);
/* The bytes of its own layer as the store counts them; -EOPNOTSUPP where
 * the store keeps no count (plain directories). */
int sandbox_disk_usage(struct sandbox *sb, uint64_t *bytes);
/* The session by id (NULL id: the default one), or NULL. */
struct session *sandbox_session(struct sandbox *sb, const char *id);
/* A new session with the sandbox's environment plus env; NULL cwd:
 * /workspace. -EEXIST when id is taken. */
int sandbox_session_new(struct sandbox *sb, const char *id, const char *cwd,
                        const char *const *env, size_t envc,
                        struct session **out);
/* -EBUSY while it runs a command; the default session cannot go. */
int sandbox_session_delete(struct sandbox *sb, const char *id);
/* Close a session other than the default one: what it has queued is
 * cancelled and what it runs is killed with its tree. 0: gone now; 1: it
 * goes, and done(ctx) runs, once its command has ended (a closing session
 * is not found by id any more); -EINVAL: the default session. */
int sandbox_session_close(struct sandbox *sb, struct session *s,
                          void (*done)(void *ctx), void *ctx);
/* From exec: s has finished a command; a closing one goes now. */
void sandbox_session_idle(struct sandbox *sb, struct session *s);
/* Keep the session's cwd and environment in the registry (when they
 * changed since it was last kept), so that the session survives a daemon
 * restart. A failure is logged: the session goes on in memory. */
void sandbox_session_save(struct sandbox *sb, struct session *s);
/* The store group of a tenant's files (store_group_of), made with the
 * daemon's --tenant-disk limit the first time it is asked for in this
 * run; 0 on the plain store. */
uint64_t manager_store_group(struct manager *m, const char *tenant);
/* How many sandboxes use img. */
unsigned manager_image_refs(struct manager *m, const struct image *img);
/* Drop images and layers nothing names or uses (images_gc). */
void manager_images_gc(struct manager *m);

/* Iterate over all sandboxes. */
void manager_foreach(struct manager *m,
                     void (*fn)(struct sandbox *sb, void *data), void *data);

#endif
