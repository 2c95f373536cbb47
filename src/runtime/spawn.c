/* From init's forked child to a sandboxed command. Order is the point:
 *   1. join the command's cgroup leaf (host cgroupfs, through fds the daemon
 *      passed) and unshare a cgroup namespace rooted there, so the command
 *      sees itself at "/" and cannot name its parents;
 *   2. clear supplementary groups while still host root (setgroups is
 *      denied inside the namespace), enter the sandbox's user namespace,
 *      become its root (setresgid before setresuid, isolation.md A.11);
 *   3. stdio in place, every other fd close-on-exec (A.6), cwd checked;
 *   4. capabilities gone, securebits locked, no_new_privs, seccomp last
 *      (A.13-15, A.29), then execve; a builtin, which does not exec,
 *      first closes every fd but its stdio.
 * Async-signal-safe calls only: init may have other children in flight. */
#include "runtime/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <grp.h>
#include <linux/close_range.h>

#include "runtime/builtin.h"
#include "runtime/caps.h"
#include "runtime/image.h"

static _Noreturn void fail(int errfd, int e, const char *what)
{
	struct spawn_what w = {.err = e};
	size_t l = strlen(what);
	if (l >= sizeof(w.what))
		l = sizeof(w.what) - 1;
	memcpy(w.what, what, l);
	if (write(errfd, &w, sizeof(w)) < 0) {
		/* nothing left to tell anyone */
	}
	_exit(127);
}

static const char *env_get(const struct spawn_req *req, const char *key)
{
	size_t kl = strlen(key);
	for (uint32_t i = 0; i < req->envc; i++)
		if (!strncmp(req->envp[i], key, kl) && req->envp[i][kl] == '=')
			return req->envp[i] + kl + 1;
	return NULL;
}

/* execvpe() would search the daemon's PATH; the command's own env rules. */
static void exec_search(const struct spawn_req *req)
{
	const char *file = req->argv[0];
	const char *path = env_get(req, "PATH");
	char buf[4096];
	int last = ENOENT;

	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	size_t fl = strlen(file);
	while (*path) {
		const char *end = strchr(path, ':');
		size_t dl = end ? (size_t)(end - path) : strlen(path);
		if (dl + fl + 2 <= sizeof(buf)) {
			memcpy(buf, path, dl);
			buf[dl] = '/';
			memcpy(buf + dl + 1, file, fl + 1);
			execve(dl ? buf : file, (char *const *)req->argv,
			       (char *const *)req->envp);
			if (errno != ENOENT && errno != ENOTDIR)
				last = errno;
		}
		if (!end)
			break;
		path = end + 1;
	}
	errno = last;
}

_Noreturn void spawn_child(const struct spawn_req *req, const int *fds,
			   int userns_fd, int errfd,
			   const struct seccomp_prog *seccomp)
{
	/* init has every disposition at its default (see init_main): only
	 * its blocked SIGCHLD is to be undone */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (setsid() < 0)
		fail(errfd, errno, "setsid");

	for (uint32_t i = 0; i < req->ncg; i++)
		if (write(fds[req->nstdio + i], "0", 1) != 1)
			fail(errfd, errno, "join cgroup");
	if (unshare(CLONE_NEWCGROUP) < 0)
		fail(errfd, errno, "unshare cgroup namespace");

	if (setgroups(0, NULL) < 0)
		fail(errfd, errno, "setgroups");
	if (setns(userns_fd, CLONE_NEWUSER) < 0)
		fail(errfd, errno, "enter user namespace");
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		fail(errfd, errno, "setresuid");

	/* Move every fd we keep above the targets first, so that dup2 onto
	 * 0..3/63 can never clobber one not yet placed. */
	int high[4], have[64] = {0};
	for (uint32_t i = 0; i < req->nstdio; i++)
		if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 64 + 16)) < 0)
			fail(errfd, errno, "dup stdio");
	int efd = fcntl(errfd, F_DUPFD_CLOEXEC, 64 + 16);
	if (efd < 0)
		fail(errfd, errno, "dup errfd");
	errfd = efd;
	for (uint32_t i = 0; i < req->nstdio; i++) {
		int t = req->targets[i] == 3 ? IMAGE_STATE_FD : req->targets[i];
		if (dup2(high[i], t) < 0)
			fail(errfd, errno, "dup2 stdio");
		if (t < 64)
			have[t] = 1;
	}
	if (!have[0]) {
		int fd = open("/dev/null", O_RDONLY);
		if (fd < 0 || (fd != 0 && dup2(fd, 0) < 0))
			fail(errfd, errno, "open /dev/null");
		if (fd > 0)
			close(fd);
	}
	/* everything else is closed at exec: daemon sockets, cgroup fds,
	 * the user namespace fd, the error pipe (CVE-2024-21626) */
	if (syscall(SYS_close_range, 3, IMAGE_STATE_FD - 1,
		    CLOSE_RANGE_CLOEXEC) < 0 ||
	    syscall(SYS_close_range, IMAGE_STATE_FD + !!have[IMAGE_STATE_FD],
		    ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		fail(errfd, errno, "close_range");

	if (chdir(req->cwd) < 0) {
		if (!(req->flags & SPAWN_CWD_FALLBACK) ||
		    (chdir("/workspace") < 0 && chdir("/") < 0))
			fail(errfd, errno, "chdir");
	}

	int r = caps_drop_all();
	if (r < 0)
		fail(errfd, -r, "drop capabilities");
	if ((r = seccomp_prog_apply(seccomp)) < 0)
		fail(errfd, -r, "seccomp");

	if (req->flags & SPAWN_BUILTIN) {
		/* A builtin does not exec, so close-on-exec protects nothing:
		 * whatever init holds (its socket to the daemon, the user
		 * namespace fd, cgroup.procs fds, other commands' pipes and
		 * error pipes) would stay open in a process the sandbox's root
		 * may signal. Only its stdio stay; its errors go to stdout
		 * from here on, and init reads an empty error pipe. */
		if (syscall(SYS_close_range, 3, ~0U, 0) < 0)
			fail(errfd, errno, "close_range");
		builtin_run((int)req->argc, req->argv);
	}
	if ((req->flags & SPAWN_SEARCH_PATH) && !strchr(req->argv[0], '/'))
		exec_search(req);
	else
		execve(req->argv[0], (char *const *)req->argv,
		       (char *const *)req->envp);
	fail(errfd, errno, req->argv[0]);
}
