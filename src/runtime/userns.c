/* A user namespace made by a child that takes the sandbox's host uid, then
 * unshares, and waits while the parent writes its maps (setgroups "deny"
 * first: an unprivileged-style map must not let the namespace drop
 * supplementary groups used as deny-lists). The parent opens
 * /proc/<child>/ns/user, which keeps the namespace alive, and lets the
 * child exit. The namespace holds no process and is entered by each
 * command just before exec.
 *
 * Its owner is the sandbox's own host uid (the base of its range), not
 * host root: the kernel charges the per-user counts of everything made
 * inside a user namespace (inotify instances and watches, mqueue bytes,
 * pending signals, user namespaces...) to the namespace's owner in the
 * parent namespace. Owned by root, one sandbox could take host root's
 * whole share (fs.inotify.max_user_instances is 128): systemd and udev
 * would then fail. Owned by the base, each sandbox has a share of its own.
 * The other namespaces stay owned by host root (runtime.c). Host root,
 * in the parent namespace, still writes the maps, enters the namespace
 * and idmaps mounts with it: capabilities of an ancestor namespace hold
 * in every descendant. */
#include "runtime/userns.h"

#include <fcntl.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/cleanup.h"
#include "runtime/fsutil.h"

static int write_map(pid_t pid, const char *file, const char *text,
                     struct sbx_err *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, file);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, errno, "open %s", path);
	size_t len = strlen(text);
	if (write(fd, text, len) != (ssize_t)len)
		return sbx_err_sys(err, errno, "write %s", path);
	return 0;
}

struct child_arg {
	int rfd, wfd; /* parent -> child: EOF means "done, exit" */
	int ready;    /* child -> parent: an int, 0 or the errno */
	uid_t base;
	pid_t parent;
};

/* Runs on its own small stack in the parent's memory (CLONE_VM): it takes
 * the sandbox's uid, unshares, reports, waits for EOF and exits. Sharing
 * the memory spares a copy of the daemon's page tables and their teardown
 * (~ms) per sandbox start. It shares the parent's errno too, so it calls
 * the kernel directly and reports its own result through the pipe.
 * Credentials are per task: raw syscalls change only the child's (glibc's
 * setresuid would try to change every thread of the process). */
static int child_main(void *p)
{
	struct child_arg *a = p;
	int e = 0;
	char c;
	close(a->wfd); /* its own fd table: EOF must come from the parent's */
	/* The euid becomes the base; keeping the capabilities (no setuid
	 * fixup) lets it create the namespace where unprivileged user
	 * namespaces are switched off (Debian's
	 * kernel.unprivileged_userns_clone, AppArmor's restriction). The
	 * real uid stays 0: process counts (RLIMIT_NPROC) are not the
	 * sandbox's business. */
	if (syscall(SYS_prctl, PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0,
	            0) < 0 ||
	    syscall(SYS_setresgid, -1, a->base, -1) < 0 ||
	    syscall(SYS_setresuid, -1, a->base, -1) < 0)
		e = errno ? errno : EPERM;
	/* after the uid change: a change of credentials clears it */
	if (!e && syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		e = errno ? errno : EINVAL;
	if (!e && syscall(SYS_getppid) != a->parent)
		e = ESRCH; /* the daemon died before PDEATHSIG was set */
	if (!e && syscall(SYS_unshare, CLONE_NEWUSER) < 0)
		e = errno ? errno : EPERM;
	if (write(a->ready, &e, sizeof(e)) != sizeof(e) || e)
		return 1;
	while (read(a->rfd, &c, 1) < 0 && errno == EINTR)
		;
	return 0;
}

/* A namespace owned by base whose uid and gid maps are map. */
static int create(uid_t base, const char *map, struct sbx_err *err)
{
	int pipefd[2], readyfd[2];
	static char stack[16384] __attribute__((aligned(16)));
	if (base == 0)
		return sbx_err_set(err, EINVAL,
		                   "userns: host uid 0 is never mapped");
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return sbx_err_sys(err, errno, "userns: pipe");
	if (pipe2(readyfd, O_CLOEXEC) < 0) {
		int e = errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return sbx_err_sys(err, e, "userns: pipe");
	}
	struct child_arg arg = {.rfd = pipefd[0],
	                        .wfd = pipefd[1],
	                        .ready = readyfd[1],
	                        .base = base,
	                        .parent = getpid()};
	/* A change of euid makes the mm non-dumpable, and the child shares
	 * ours: put back what we had once it is gone. */
	int dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
	pid_t pid =
	    clone(child_main, stack + sizeof(stack), CLONE_VM | SIGCHLD, &arg);
	if (pid < 0) {
		int e = errno;
		close(pipefd[0]);
		close(pipefd[1]);
		close(readyfd[0]);
		close(readyfd[1]);
		return sbx_err_sys(err, e, "userns: clone");
	}
	close(readyfd[1]);
	int r = 0, fd = -1, ce = 0;
	ssize_t n;
	while ((n = read(readyfd[0], &ce, sizeof(ce))) < 0 && errno == EINTR)
		;
	close(readyfd[0]);
	if (n < 0)
		r = sbx_err_sys(err, errno, "userns: reading the helper");
	else if (n != sizeof(ce))
		r = sbx_err_set(err, EIO, "userns: helper died");
	else if (ce)
		r = sbx_err_sys(err, ce, "userns: new namespace as uid %u",
		                (unsigned)base);
	char child[64];
	snprintf(child, sizeof(child), "/proc/%d/ns/user", pid);
	if (!r)
		r = write_map(pid, "setgroups", "deny", err);
	if (!r)
		r = write_map(pid, "uid_map", map, err);
	if (!r)
		r = write_map(pid, "gid_map", map, err);
	if (!r) {
		fd = open(child, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			r = sbx_err_sys(err, errno, "userns: open %s", child);
	}
	close(pipefd[1]);
	int st;
	/* it shares our memory and stack: it must be gone before the next
	 * call reuses them */
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	close(pipefd[0]);
	if (dumpable >= 0)
		prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0);
	return r ? r : fd;
}

int userns_create(uid_t base, struct sbx_err *err)
{
	char map[64];
	snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)base, USERNS_RANGE);
	return create(base, map, err);
}

int userns_create_idmap(uid_t base, uid_t files, struct sbx_err *err)
{
	char map[96];
	if (files < USERNS_RANGE)
		return sbx_err_set(err, EINVAL, "userns: files owned by uid %u",
		                   (unsigned)files);
	/* host root stays itself: overlayfs makes its work dirs as the
	 * mounter, and an unmapped mounter could make nothing */
	snprintf(map, sizeof(map), "0 0 1\n%u %u %u\n", (unsigned)files,
	         (unsigned)base, USERNS_RANGE);
	return create(base, map, err);
}
