/* From init's forked child to a sandboxed command. Order is the point:
 *   0. an OOM score of its own, set while still host root (see below);
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
#include "runtime/proto.h"

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

/* A sandbox's commands are the first the kernel's OOM killer should pick
 * under host pressure, before host services at the default 0. Writing it
 * with CAP_SYS_RESOURCE also sets the process's oom_score_adj_min, below
 * which nothing without that capability (no command) can go again; init's
 * own -1000 is not inherited. Without CAP_SYS_RESOURCE the write still
 * raises the score (raising needs nothing), but the floor stays init's,
 * which is then the daemon's (0 unless started lower). */
#define SPAWN_OOM_SCORE_ADJ "500"

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

	int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (oom < 0 || write(oom, SPAWN_OOM_SCORE_ADJ,
			     sizeof(SPAWN_OOM_SCORE_ADJ) - 1) !=
			       (ssize_t)sizeof(SPAWN_OOM_SCORE_ADJ) - 1)
		fail(errfd, errno, "oom_score_adj");
	close(oom);

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
	 * a target can never clobber one not yet placed. */
	int high[4], have[PROTO_MAX_TARGET_FD + 1] = {0};
	for (uint32_t i = 0; i < req->nstdio; i++)
		if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 64 + 16)) < 0)
			fail(errfd, errno, "dup stdio");
	int efd = fcntl(errfd, F_DUPFD_CLOEXEC, 64 + 16);
	if (efd < 0)
		fail(errfd, errno, "dup errfd");
	errfd = efd;
	for (uint32_t i = 0; i < req->nstdio; i++) {
		int t = req->targets[i];
		if (dup2(high[i], t) < 0)
			fail(errfd, errno, "dup2 stdio");
		have[t] = 1;
	}
	if (!have[0]) {
		/* CLOEXEC like every fd we open; dup2 makes fd 0 inheritable */
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd < 0 || (fd != 0 && dup2(fd, 0) < 0) ||
		    (fd == 0 && fcntl(0, F_SETFD, 0) < 0))
			fail(errfd, errno, "open /dev/null");
		if (fd > 0)
			close(fd);
	}
	/* everything else is closed at exec: daemon sockets, cgroup fds,
	 * the user namespace fd, the error pipe (CVE-2024-21626) */
	have[PROTO_MAX_TARGET_FD] = 1; /* the end of the first sweep */
	for (int fd = 3, from = 3; fd <= PROTO_MAX_TARGET_FD; fd++) {
		if (!have[fd])
			continue;
		if (from < fd && syscall(SYS_close_range, from, fd - 1,
					 CLOSE_RANGE_CLOEXEC) < 0)
			fail(errfd, errno, "close_range");
		from = fd + 1;
	}
	if (syscall(SYS_close_range, PROTO_MAX_TARGET_FD, ~0U,
		    CLOSE_RANGE_CLOEXEC) < 0)
		fail(errfd, errno, "close_range");

	if (chdir(req->cwd) < 0) {
		if (!(req->flags & SPAWN_CWD_FALLBACK) ||
		    (chdir("/workspace") < 0 && chdir("/") < 0))
			fail(errfd, errno, "chdir");
	}

	int r = caps_drop_all_as((req->flags & SPAWN_AS_USER) ? SPAWN_USER_ID
							      : 0);
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
