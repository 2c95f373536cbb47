/* File helpers that work relative to directory fds and never follow a
 * symlink they did not mean to: trees written or removed by the daemon can
 * hold links planted by sandboxed code. */
#ifndef SBX_FSUTIL_H
#define SBX_FSUTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "lib/err.h"

int fs_write_file(int dirfd, const char *name, const void *data, size_t len,
                  mode_t mode, struct sbx_err *err);
int fs_write_str(int dirfd, const char *name, const char *s, mode_t mode,
                 struct sbx_err *err);
/* Read a small file whole into buf (NUL-terminated); returns length. */
ssize_t fs_read_small(int dirfd, const char *name, char *buf, size_t cap);
/* mkdir -p of a relative path below dirfd, each level O_NOFOLLOW. */
int fs_mkdirs(int dirfd, const char *path, mode_t mode, struct sbx_err *err);
/* Remove name below dirfd and everything in it, never following a link
 * nor entering a mount below name (the path to name's directory, when
 * name has one, is taken as given). Iterative: a fixed number of fds at
 * any depth. */
int fs_remove_tree(int dirfd, const char *name, struct sbx_err *err);
/* Remove everything inside dirfd, which stays. */
int fs_empty_dir(int dirfd, struct sbx_err *err);
/* Copy src (a dir fd) into dst (a dir fd): directories, regular files
 * (hard-linked when on the same filesystem) and symlinks, keeping modes and
 * owners; anything not readable by "others" on the host is skipped, so
 * secrets never leak into a copy. */
int fs_copy_tree(int srcfd, int dstfd, struct sbx_err *err);
/* Copy one entry of srcdir (file, link or whole directory) into dstdir. */
int fs_copy_entry(int srcdir, int dstdir, const char *name,
                  struct sbx_err *err);

#endif
