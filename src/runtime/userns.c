/* A user namespace made by a child that unshares and waits while the parent
 * writes its maps (setgroups "deny" first: an unprivileged-style map must
 * not let the namespace drop supplementary groups used as deny-lists). The
 * parent opens /proc/<child>/ns/user, which keeps the namespace alive, and
 * lets the child exit. The namespace is owned by host root, holds no
 * process, and is entered by each command just before exec. */
#include "runtime/userns.h"

#include <fcntl.h>
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
	int rfd, wfd;
};

/* Runs on its own small stack in the parent's memory (CLONE_VM): it only
 * waits for EOF and exits. Sharing the memory spares a copy of the
 * daemon's page tables and their teardown (~ms) per sandbox start. */
static int child_main(void *p)
{
	struct child_arg *a = p;
	char c;
	close(a->wfd); /* its own fd table: EOF must come from the parent's */
	while (read(a->rfd, &c, 1) < 0 && errno == EINTR)
		;
	return 0;
}

int userns_create(uid_t base, struct sbx_err *err)
{
	int pipefd[2];
	static char stack[16384] __attribute__((aligned(16)));
	if (base == 0)
		return sbx_err_set(err, EINVAL, "userns: host uid 0 is never mapped");
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return sbx_err_sys(err, errno, "userns: pipe");
	struct child_arg arg = {.rfd = pipefd[0], .wfd = pipefd[1]};
	/* when clone returns, the child is already in its new namespace, so
	 * the maps can be written without a handshake */
	pid_t pid = clone(child_main, stack + sizeof(stack),
			  CLONE_NEWUSER | CLONE_VM | SIGCHLD, &arg);
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return sbx_err_sys(err, errno, "userns: clone");
	}
	int r = 0, fd = -1;
	char child[64], map[64];
	snprintf(child, sizeof(child), "/proc/%d/ns/user", pid);
	snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)base, USERNS_RANGE);
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
	return r ? r : fd;
}
