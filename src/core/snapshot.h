/* Snapshots of a sandbox's whole writable filesystem, and what is made
 * from them: a new sandbox (clone), a fork (a new sandbox from the
 * current state, in one step), a restore in place.
 *
 * Theory of operation. A snapshot is consistent: the sandbox's commands
 * are frozen (cgroup freezer, runtime/cgroup_freeze.c) from before the
 * store starts it until it is taken, so no process is half way through a
 * change; init is not frozen and keeps serving. The store does the work
 * (runtime/store.c: a read-only btrfs snapshot, O(1) in the data held; a
 * copy on the plain store), in a task (runtime/task.c), so the daemon's
 * loop never waits for a flush or a copy; the freeze polls from a timer.
 * A snapshot is in the registry only once it is complete on the store:
 * a daemon killed half way leaves a temporary name on the store, which the
 * next start removes, and no row. Restores and clones make the new tree
 * under a temporary name too and swap it in with one rename
 * (RENAME_EXCHANGE), so a sandbox always has either its old files or the
 * new ones.
 *
 * Ownership of files: a sandbox's files are owned on disk by its host uid
 * range, and a snapshot's by the range of the sandbox it came from. A
 * sandbox made from another's files keeps them as they are (no O(n)
 * chown) and records whose range owns them (files_owner); its root
 * filesystem is then built over an idmapped mount of its dir that shows
 * them as its own (runtime/rootfs.c).
 *
 * Everything is scoped to the tenant: a snapshot is found only by its
 * tenant, and made into sandboxes of that tenant only. Snapshots outlive
 * their sandbox unless deleted with it (snapshot_delete_of). */
#ifndef SBX_SNAPSHOT_H
#define SBX_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/manager.h"
#include "lib/util.h"

struct snapshot {
	char id[ID_RANDOM_MAX]; /* "snap_<hex>" */
	char *tenant, *sandbox; /* whose, and from which sandbox */
	char *name;             /* the client's, or NULL */
	uint64_t created_ms, size_bytes;
	uid_t owner; /* host uid base owning its files */
	bool copied; /* a copy (plain store), not CoW */
	/* the image its files sit on ("": the host's system); kept by the
	 * image store while the snapshot is (manager_images_gc) */
	char image_id[72];
	struct snapshot *next;
};

/* At manager start: the registry's snapshots, checked against the store
 * (a row whose files are gone is dropped, files without a row removed). */
int snapshots_load(struct manager *m, struct sbx_err *err);
/* At manager end: every operation in flight fails ("daemon shutting
 * down"), every snapshot is forgotten (not deleted). */
void snapshots_free(struct manager *m);

struct snapshot *snapshot_find(struct manager *m, const char *tenant,
                               const char *id);
void snapshot_foreach(struct manager *m, const char *tenant,
                      void (*fn)(const struct snapshot *s, void *ctx),
                      void *ctx);
/* Delete one (files and row). */
int snapshot_delete(struct manager *m, struct snapshot *snap,
                    struct sbx_err *err);
/* Delete every snapshot taken of (tenant, sandbox id); returns how many. */
int snapshot_delete_of(struct manager *m, const char *tenant,
                       const char *sandbox);
/* What the tenant's sandboxes and snapshots take together (shared data
 * counted once); -EOPNOTSUPP on the plain store. */
int snapshot_tenant_usage(struct manager *m, const char *tenant,
                          uint64_t *bytes);

/* An operation in flight. Its done callback runs exactly once, maybe
 * before the call that started it returns; err is set when it failed
 * (err->code an errno: EBUSY another operation runs on that sandbox,
 * ENOENT it is gone, ETIMEDOUT its processes would not freeze). */
struct snapshot_op;
typedef void (*snapshot_done_cb)(void *ctx, const struct snapshot *snap,
                                 struct sandbox *sb, const struct sbx_err *err);

/* Take a snapshot of sb (name may be NULL): done gets the snapshot. */
int snapshot_take(struct sandbox *sb, const char *name, snapshot_done_cb done,
                  void *ctx);
/* sb's files become snap's; its processes end first (it is stopped, and
 * starts again on the next request): done gets sb. */
int snapshot_restore(struct sandbox *sb, const struct snapshot *snap,
                     snapshot_done_cb done, void *ctx);
/* A new sandbox (tenant, id, opts as manager_create) whose files start as
 * snap's, or, for a fork, as from's are now (snap NULL): done gets it. On
 * failure the new sandbox is gone again. */
int snapshot_clone(struct manager *m, const char *tenant, const char *id,
                   const struct sandbox_opts *opts, const struct snapshot *snap,
                   struct sandbox *from, snapshot_done_cb done, void *ctx);

/* From the manager: sb stops (a frozen sandbox must be thawed first, or
 * its processes could never die); sb goes (its operations fail). */
void snapshot_sandbox_stopping(struct sandbox *sb);
void snapshot_sandbox_gone(struct sandbox *sb);
/* Whether sb's files are being replaced (it must not start meanwhile). */
bool snapshot_files_busy(const struct sandbox *sb);

#endif
