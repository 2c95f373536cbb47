/* A faithful copy of a sandbox's layer, for the plain-directory store's
 * snapshots (store.h): what a btrfs snapshot keeps, kept by copying. */
#ifndef SBX_FSCLONE_H
#define SBX_FSCLONE_H

#include <stdint.h>

#include "lib/err.h"

/* Copy the tree at srcfd into dstdir/name (which must not exist):
 * directories, regular files (reflinked where the filesystem can, else
 * copied), symlinks, device nodes (overlayfs whiteouts), FIFOs and
 * sockets; hard links stay links; owners, modes, extended attributes
 * (overlayfs's trusted.overlay.*, file capabilities, ACLs) and times are
 * kept. Links are never followed: the tree is the sandbox's to shape.
 * *bytes: the space its files take. */
int fs_clone_tree(int srcfd, int dstdir, const char *name, uint64_t *bytes,
                  struct sbx_err *err);

#endif
