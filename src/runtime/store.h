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
 * qgroups need neither. */
#ifndef SBX_STORE_H
#define SBX_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/err.h"

struct store {
	char *dir;       /* <state>/sandboxes */
	bool quotas;     /* a mounted btrfs store (else plain directories) */
	bool mounted_by_us;
};

/* Mount (creating it if needed, size_bytes big) the store image at
 * <state>/sandboxes. size_bytes 0: no store, plain directories, no disk
 * limits (also used when the state dir already holds plain sandboxes). */
int store_open(const char *state_dir, uint64_t size_bytes, struct store **out,
	       struct sbx_err *err);
void store_close(struct store *s);
/* Make <dir>/<name> for a new sandbox (a subvolume with limit_bytes, 0 =
 * none), unless it exists. */
int store_create(struct store *s, const char *name, uint64_t limit_bytes,
		 struct sbx_err *err);
/* The bytes <dir>/<name> holds, as its qgroup counts them (updated at
 * each commit of the store, every few seconds): no walk of a tree the
 * sandbox built. -EOPNOTSUPP on a plain directory store. */
int store_usage(struct store *s, const char *name, uint64_t *bytes);
/* Remove <dir>/<name> and everything in it (the sandbox is stopped). In a
 * store, only by deleting its subvolume (instant): the caller walks what
 * is not one (runtime.c, in the background). */
int store_remove(struct store *s, const char *name, struct sbx_err *err);

#endif
