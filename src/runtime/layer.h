/* One tar archive (any compression libarchive reads) unpacked into a
 * directory, for an image's layer or the archive an image came in. Every
 * path is taken relative to the directory and walked one component at a
 * time without following links, so nothing is ever written outside it:
 * an absolute path, a "..", a parent that is a symlink (or not a
 * directory) or a hard link to outside fails the whole archive with a
 * message naming the entry. Sizes are checked against the limits before a
 * byte is written (a 1 TB sparse file fails at once).
 *
 * In a layer (LAYER_OCI), OCI whiteouts become overlayfs's: ".wh.NAME" a
 * 0:0 character device NAME, ".wh..wh..opq" the trusted.overlay.opaque
 * xattr on its directory; owners are kept (ids above 65535 become 65534,
 * which the sandbox's user namespace maps), as are modes, setuid and
 * setgid included (the store is root's alone on the host, and every
 * sandbox mount is nosuid); device nodes and sockets are skipped; of the
 * xattrs only user.* are kept (a trusted.* one would speak to overlayfs).
 * Otherwise (LAYER_PLAIN) regular files, directories and links only, all
 * owned by root, nothing special. Runs in a child process (it blocks). */
#ifndef SBX_LAYER_H
#define SBX_LAYER_H

#include <stdint.h>

#include "lib/err.h"

enum layer_kind { LAYER_OCI, LAYER_PLAIN };

struct layer_limits {
	uint64_t max_bytes; /* sum of the files' sizes */
	uint64_t max_entries;
};

struct layer_stats {
	uint64_t bytes, entries, skipped; /* skipped: devices, sockets */
};

/* Unpack the archive read from fd into dirfd (an empty directory). On an
 * error, what was written stays in dirfd for the caller to remove. */
int layer_unpack(int fd, int dirfd, enum layer_kind kind,
                 const struct layer_limits *lim, struct layer_stats *st,
                 struct sbx_err *err);

#endif
