/* The mount tree of a sandbox, built by its init (host root, in the
 * sandbox's new mount namespace) before anything of the sandbox runs. */
#ifndef SBX_ROOTFS_H
#define SBX_ROOTFS_H

#include <stddef.h>
#include <sys/types.h>

#include "lib/err.h"

struct rootfs_spec {
	const char *image_dir;   /* skeleton lower layer */
	const char *usr_mask;    /* whiteouts above /usr (usrmask.h), or NULL */
	const char *mnt_dir;     /* empty host dir with root/, lusr/, lskel/,
	                          * lmask/, sb/ */
	const char *sandbox_dir; /* has root/{upper,work}, usr/{upper,work} */
	int userns_fd;           /* idmaps the lower layers */
	int files_userns_fd;     /* idmaps sandbox_dir when its files are owned
	                          * by another range (a fork's are its
	                          * origin's: userns_create_idmap); -1: none */
	uid_t base;              /* host uid of the sandbox's root */
	unsigned max_ptys;       /* devpts max= */
	/* An image sandbox (core/images.h): its layers, bottom first, by
	 * name in layers_dir, under image_top (the daemon's files, /etc/hosts
	 * and the mount points), stacked as the lower layers of the root
	 * overlay in place of the skeleton and the host's /usr. nlayers 0:
	 * the host's own system. */
	const char *layers_dir;
	const char *const *layers;
	size_t nlayers;
	const char *image_top;
};

/* Build the tree and pivot_root into it; on return the old root is gone
 * and the cwd is the new "/". */
int rootfs_setup(const struct rootfs_spec *s, struct sbx_err *err);

/* Create the sandbox's persistent dirs (upper layers owned by owner, the
 * base of the range its files are owned by on disk). */
int rootfs_prepare_dir(const char *sandbox_dir, uid_t owner,
                       struct sbx_err *err);

#endif
