/* A pseudo-terminal from a sandbox's own devpts instance (mounted by
 * rootfs.c with newinstance and its own max=), so that the shell's tty is
 * /dev/pts/N inside the sandbox and counts against the sandbox's ptys,
 * never the host's. */
#ifndef SBX_PTY_H
#define SBX_PTY_H

#include <sys/types.h>

#include "lib/err.h"
#include "runtime/runtime.h"

/* Open a pty in the running sandbox sp: *master (non-blocking, for the
 * daemon) and *slave (for a spawn with SPAWN_CTTY), both close-on-exec.
 * The slave belongs to the sandbox's root (host uid base). cols/rows: its
 * first window size (0: 80x24). -ENOSPC when the sandbox has all its ptys
 * in use. */
int pty_open(const struct sandbox_proc *sp, uid_t base, unsigned cols,
             unsigned rows, int *master, int *slave, struct sbx_err *err);
/* Set the window size (the foreground job gets SIGWINCH). */
int pty_resize(int master, unsigned cols, unsigned rows);

#endif
