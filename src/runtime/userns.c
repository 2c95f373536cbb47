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

int userns_create(uid_t base, struct sbx_err *err)
{
	int pipefd[2];
	if (base == 0)
		return sbx_err_set(err, EINVAL, "userns: host uid 0 is never mapped");
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return sbx_err_sys(err, errno, "userns: pipe");
	/* fork-like clone: when it returns, the child is already in its new
	 * namespace, so the maps can be written without a handshake */
	pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return sbx_err_sys(err, errno, "userns: clone");
	}
	if (pid == 0) {
		char c;
		close(pipefd[1]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		while (read(pipefd[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(pipefd[0]);
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
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return r ? r : fd;
}
