/* The embedded default image: the host's own /usr, read-only underneath,
 * plus a small generated skeleton (/etc without host secrets, the top-level
 * directories, the /bin -> usr/bin links) that is the lower layer of every
 * sandbox's root overlay. */
#ifndef SBX_IMAGE_H
#define SBX_IMAGE_H

#include "lib/err.h"

#define IMAGE_SESSION_SCRIPT "/etc/sandboxd/session.sh"
#define IMAGE_STATE_FD 63 /* where session.sh writes the shell's state */
#define IMAGE_STATE_MARK "SBXSTATE"

/* Make (or refresh, when the host changed) the skeleton in dir. */
int image_prepare(const char *dir, struct sbx_err *err);

#endif
