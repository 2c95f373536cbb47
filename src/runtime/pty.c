/* Ptys come from the sandbox's devpts, reached through init's root: the
 * path is walked with openat2 confined to that root and refusing every
 * symlink, so nothing the sandbox made can send the open elsewhere (its
 * /dev is a read-only tmpfs and dev/pts a mount, but the walk does not
 * rely on that). The slave is opened from the master (TIOCGPTPEER), never
 * by path: /dev/pts/N is a name the sandbox could race. The daemon is
 * host root, so the pty would belong to host uid 0 (nobody, inside):
 * the slave is given to the sandbox's root, as login would. */
#include "runtime/pty.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include "lib/cleanup.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

int pty_resize(int master, unsigned cols, unsigned rows)
{
	struct winsize ws = {.ws_row = (unsigned short)(rows ? rows : 24),
	                     .ws_col = (unsigned short)(cols ? cols : 80)};
	return ioctl(master, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

int pty_open(const struct sandbox_proc *sp, uid_t base, unsigned cols,
             unsigned rows, int *master, int *slave, struct sbx_err *err)
{
	char root[64];
	snprintf(root, sizeof(root), "/proc/%d/root", (int)sp->init_pid);
	_cleanup_close_ int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return sbx_err_sys(err, errno, "open the sandbox's root");
	struct open_how how = {
	    .flags = O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK,
	    .resolve =
	        RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	_cleanup_close_ int m =
	    (int)syscall(SYS_openat2, rfd, "dev/pts/ptmx", &how, sizeof(how));
	if (m < 0) {
		int e = errno;
		if (e == ENOSPC)
			return sbx_err_set(
			    err, ENOSPC,
			    "the sandbox has all its ptys in use "
			    "(--max-ptys)");
		return sbx_err_sys(err, e, "open the sandbox's /dev/pts/ptmx");
	}
	/* Defence in depth: init's root is the sandbox's only once setup is
	 * done (the core waits for READY); a pty of the host's own devpts
	 * instance must never be handed to a sandbox. */
	struct stat mine, host;
	if (fstat(m, &mine) < 0)
		return sbx_err_sys(err, errno, "stat the sandbox's ptmx");
	if (stat("/dev/pts/ptmx", &host) == 0 && host.st_dev == mine.st_dev)
		return sbx_err_set(err, EAGAIN,
		                   "the sandbox's /dev/pts is not set up yet");
	int unlock = 0;
	if (ioctl(m, TIOCSPTLCK, &unlock) < 0)
		return sbx_err_sys(err, errno, "unlock pty");
	_cleanup_close_ int s =
	    ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0)
		return sbx_err_sys(err, errno, "open pty slave");
	if (fchown(s, base, base) < 0)
		return sbx_err_sys(err, errno, "chown pty slave");
	int r = pty_resize(m, cols, rows);
	if (r < 0)
		return sbx_err_sys(err, -r, "set pty size");
	*master = steal_fd(&m);
	*slave = steal_fd(&s);
	return 0;
}
