/* Where sandboxes' files live, and how big they may grow.
 *
 * The store is one btrfs filesystem in a sparse image file under the state
 * dir, loop-mounted once by the daemon at <state>/sandboxes. Each sandbox's
 * directory is a btrfs subvolume whose qgroup carries the sandbox's disk
 * limit: a write past it fails with EDQUOT inside the sandbox, and the
 * store as a whole can never grow past its image size, so the host's free
 * space is never exhausted by sandboxes. Destroying a sandbox deletes its
 * subvolume, which is instant whatever it holds.
 *
 * Why btrfs: the kernels we target do not always have the generic quota
 * formats (this one lacks QFMT_V2, so ext4 project quotas are out) nor XFS
 * quotas, and a filesystem per sandbox would cost a mount and a loop device
 * at every start and ~100 KiB of kernel memory per running sandbox. btrfs
 * qgroups need neither.
 *
 * Snapshots (store_snapshot) are btrfs snapshots of a sandbox's subvolume:
 * copy-on-write, so they cost the same whatever the sandbox holds. Every
 * subvolume of one tenant (its sandboxes and their snapshots) is a member
 * of the tenant's level-1 qgroup (store_group_of), which is where what
 * snapshots keep alive is counted, and limited. Snapshots, forks and
 * restores never leave the tenant's group, which is what lets the kernel
 * keep the group's numbers exact without a rescan (a snapshot added to a
 * group its source is not in would make them inconsistent).
 *
 * On the plain-directory store the same calls copy the tree (reflinked
 * where the filesystem can), which costs O(size): store_snapshot says so.
 *
 * Crash safety: a snapshot, clone or replacement is made under a temporary
 * name (".tmp-<name>", removed by store_open when a crash left one) and
 * renamed into place in one step, so a name never shows half a tree. */
#ifndef SBX_STORE_H
#define SBX_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/err.h"

/* Snapshots live in <dir>/.snapshots/<id>. */
#define STORE_SNAPSHOTS ".snapshots"

struct store {
	char *dir;   /* <state>/sandboxes */
	bool quotas; /* a mounted btrfs store (else plain directories) */
	bool mounted_by_us;
};

/* Mount (creating it if needed, size_bytes big) the store image at
 * <state>/sandboxes. size_bytes 0: no store, plain directories, no disk
 * limits (also used when the state dir already holds plain sandboxes). */
int store_open(const char *state_dir, uint64_t size_bytes, struct store **out,
               struct sbx_err *err);
void store_close(struct store *s);
/* Make <dir>/<name> for a new sandbox (a subvolume with limit_bytes, 0 =
 * none, in qgroup group, 0 = none), unless it exists. */
int store_create(struct store *s, const char *name, uint64_t limit_bytes,
                 uint64_t group, struct sbx_err *err);

/* The level-1 qgroup of a tenant's subvolumes: a hash of its name (the
 * tenant "" included), never 0. */
uint64_t store_group_of(const char *tenant);
/* Create group (if it does not exist) with limit_bytes (0: none) on what
 * its members reference together. No-op on a plain store. */
int store_group_ensure(struct store *s, uint64_t group, uint64_t limit_bytes,
                       struct sbx_err *err);
/* What the group's members reference together (shared extents once). */
int store_group_usage(struct store *s, uint64_t group, uint64_t *bytes);
/* Make <name> (a sandbox made before groups existed) a member of group;
 * a no-op when it is one. */
int store_group_join(struct store *s, const char *name, uint64_t group,
                     struct sbx_err *err);

/* store_snapshot flags */
#define STORE_READONLY 1u /* a snapshot: nothing may change it */
#define STORE_REPLACE 2u  /* dst may exist: replaced in one step */
/* Snapshot src (a sandbox's <name>, or STORE_SNAPSHOTS "/<id>") as dst,
 * in group (0: none), a writable one with limit_bytes (0: none). dst must
 * not exist unless STORE_REPLACE. *bytes: what dst references. *copied:
 * true when it was a copy (the plain store), not a snapshot. Slow on a
 * plain store and when src has much unwritten data: run it in a task
 * (task.h). */
int store_snapshot(struct store *s, const char *src, const char *dst,
                   unsigned flags, uint64_t group, uint64_t limit_bytes,
                   uint64_t *bytes, bool *copied, struct sbx_err *err);
/* Remove what a store_snapshot to dst that was cut short (its task
 * killed) left under a temporary name. */
void store_cleanup(struct store *s, const char *dst);
/* The names in <dir>/<sub> (NULL: <dir>), temporary ones left out. */
int store_list(struct store *s, const char *sub,
               int (*cb)(const char *name, void *ctx), void *ctx);
/* The bytes <dir>/<name> holds, as its qgroup counts them (updated at
 * each commit of the store, every few seconds): no walk of a tree the
 * sandbox built. -EOPNOTSUPP on a plain directory store. */
int store_usage(struct store *s, const char *name, uint64_t *bytes);
/* Remove <dir>/<name> and everything in it (the sandbox is stopped);
 * name may be STORE_SNAPSHOTS "/<id>". In a store, only by deleting its
 * subvolume (instant): the caller walks what is not one (runtime.c, in
 * the background). */
int store_remove(struct store *s, const char *name, struct sbx_err *err);

#endif
