/* The embedded default image: the host's own /usr, read-only underneath,
 * plus a small generated skeleton (/etc without host secrets, the top-level
 * directories, the /bin -> usr/bin links) that is the lower layer of every
 * sandbox's root overlay. */
#ifndef SBX_IMAGE_H
#define SBX_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "lib/err.h"

/* A file the daemon adds to every sandbox's skeleton (a helper script, the
 * interpreter's workers): the runtime writes it without knowing what it
 * is for. */
struct image_file {
	const char *path; /* relative to the root; parents are made 0755 */
	const char *data;
	size_t len;
	mode_t mode;
	/* owned by nobody, and so are the directories made for it: not even
	 * the sandbox's root can change it in place */
	bool sealed;
};

/* Make (or refresh, when the host or the files changed) the skeleton in
 * dir, with files added. */
int image_prepare(const char *dir, const struct image_file *files,
                  size_t nfiles, struct sbx_err *err);

/* The top lower layer of an image sandbox (core/images.h): only what the
 * daemon adds to any image (/etc/hosts, /etc/hostname, /etc/resolv.conf,
 * the mount points /dev, /proc, /tmp, /workspace, and files), rebuilt at
 * every daemon start. */
int image_prepare_top(const char *dir, const struct image_file *files,
                      size_t nfiles, struct sbx_err *err);

#endif
