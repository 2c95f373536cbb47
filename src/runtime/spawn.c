/* From a child of the sandbox's spawner to a sandboxed command. Order is
 * the point:
 *   1. a session of its own, and the command's cgroup leaf (host cgroupfs,
 *      through the leaf's cgroup.procs fds the daemon opened: the kernel
 *      checks a write to cgroup.procs against the credentials of whoever
 *      opened it), then a cgroup namespace rooted there, so the command
 *      sees itself at "/" and cannot name its parents;
 *   2. stdio in place (a pty made the controlling terminal of the
 *      session), every other fd close-on-exec (A.6; a builtin, which
 *      does not exec, closes them);
 *   3. the request's uid and gid in the sandbox (its root, an image's
 *      User, E2B's user; setresgid before setresuid, isolation.md A.11:
 *      the spawner's supplementary groups are already empty), its cwd,
 *      then the last capabilities the spawner kept gone (A.13);
 *   4. execve.
 * What stays from the spawner: the user namespace, the locked securebits,
 * an empty bounding set, no_new_privs, the seccomp filter (A.13-15, A.29),
 * the rlimits (A.34) and oom_score_adj 500 (docs/security.md). */
#include "runtime/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/close_range.h>

#include "runtime/builtin.h"
#include "runtime/caps.h"
#include "runtime/proto.h"

static _Noreturn void fail(struct spawn_ctx *c, int e, const char *what)
{
	size_t l = strlen(what);
	if (l >= sizeof(c->w.what))
		l = sizeof(c->w.what) - 1;
	c->w.err = e ? e : EINVAL;
	memcpy(c->w.what, what, l);
	c->w.what[l] = '\0';
	if (c->errfd >= 0 && write(c->errfd, &c->w, sizeof(c->w)) < 0) {
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

/* Every fd from 3 up but the targets gets flags (CLOSE_RANGE_CLOEXEC, or
 * 0: closed), one close_range per gap. */
static int sweep_fds(const int *have, unsigned flags)
{
	for (int fd = 3, from = 3; fd <= PROTO_MAX_TARGET_FD; fd++) {
		if (fd < PROTO_MAX_TARGET_FD && !have[fd])
			continue;
		if (from < fd &&
		    syscall(SYS_close_range, from, fd - 1, flags) < 0)
			return -1;
		from = fd + 1;
	}
	return (int)syscall(SYS_close_range, PROTO_MAX_TARGET_FD, ~0U, flags);
}

_Noreturn void spawn_child(struct spawn_ctx *c)
{
	const struct spawn_req *req = c->req;
	/* the spawner has every disposition at its default (see init.c):
	 * only its mask is to be undone */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (setsid() < 0)
		fail(c, errno, "setsid");

	for (uint32_t i = 0; i < c->nleaf; i++)
		if (write(c->leaf_fds[i], "0", 1) != 1)
			fail(c, errno, "join cgroup");
	if (c->nleaf && unshare(CLONE_NEWCGROUP) < 0)
		fail(c, errno, "unshare cgroup namespace");

	/* Move every fd we keep above the targets first, so that dup2 onto
	 * a target can never clobber one not yet placed. */
	int high[4], have[PROTO_MAX_TARGET_FD + 1] = {0};
	for (uint32_t i = 0; i < req->nstdio; i++)
		if ((high[i] = fcntl(c->fds[i], F_DUPFD_CLOEXEC, 64 + 16)) < 0)
			fail(c, errno, "dup stdio");
	if (c->errfd >= 0) {
		int efd = fcntl(c->errfd, F_DUPFD_CLOEXEC, 64 + 16);
		if (efd < 0)
			fail(c, errno, "dup errfd");
		c->errfd = efd;
	}
	for (uint32_t i = 0; i < req->nstdio; i++) {
		int t = req->targets[i];
		if (dup2(high[i], t) < 0)
			fail(c, errno, "dup2 stdio");
		have[t] = 1;
	}
	/* 0-2 that the request does not name read and write /dev/null (the
	 * spawner's are /dev/null already; this makes sure). CLOEXEC like
	 * every fd we open; dup2 makes the target inheritable. */
	for (int t = 0; t <= 2; t++) {
		if (have[t])
			continue;
		int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fd < 0 || (fd != t && dup2(fd, t) < 0) ||
		    (fd == t && fcntl(t, F_SETFD, 0) < 0))
			fail(c, errno, "open /dev/null");
		if (fd != t)
			close(fd);
		have[t] = 1;
	}
	/* everything else is closed at exec: the daemon's socket, the
	 * cgroup fds, the error pipe (CVE-2024-21626) */
	if (sweep_fds(have, CLOSE_RANGE_CLOEXEC) < 0)
		fail(c, errno, "close_range");

	/* the session setsid made above gets the pty as its terminal, so
	 * that ^C, job control and SIGHUP on close work as in a login */
	if ((req->flags & SPAWN_CTTY) && ioctl(0, TIOCSCTTY, 0) < 0)
		fail(c, errno, "set controlling terminal");

	/* The request's user (the sandbox's root unless an image's User or
	 * E2B's user says otherwise). Raw calls: glibc's would act on every
	 * thread of the process, and this child shares the spawner's
	 * memory. The capabilities stay across the change
	 * (SECBIT_NO_SETUID_FIXUP) until caps_clear below. */
	if (syscall(SYS_setresgid, req->gid, req->gid, req->gid) < 0 ||
	    syscall(SYS_setresuid, req->uid, req->uid, req->uid) < 0)
		fail(c, errno, "setresuid");
	/* after the change of uid: a path the command's user may enter */
	if (chdir(req->cwd) < 0) {
		if (!(req->flags & SPAWN_CWD_FALLBACK) ||
		    (chdir("/workspace") < 0 && chdir("/") < 0))
			fail(c, errno, "chdir");
	}
	int r = caps_clear();
	if (r < 0)
		fail(c, -r, "drop capabilities");

	if (req->flags & SPAWN_BUILTIN) {
		/* It runs our code on the sandbox's files without an exec,
		 * so close-on-exec protects nothing: whatever the spawner
		 * holds (its socket to the daemon, cgroup.procs fds, other
		 * commands' pipes and error pipes) would stay open in a
		 * process the sandbox's root may signal. No fd but its stdio
		 * stays open at all; its errors go to stdout from here on.
		 * It goes by init's name (comm), as a fork of init. */
		if (sweep_fds(have, 0) < 0)
			fail(c, errno, "close_range");
		builtin_run((int)req->argc, req->argv);
	}
	if ((req->flags & SPAWN_SEARCH_PATH) && !strchr(req->argv[0], '/'))
		exec_search(req);
	else
		execve(req->argv[0], (char *const *)req->argv,
		       (char *const *)req->envp);
	fail(c, errno, req->argv[0]);
}

int spawn_child_fn(void *c)
{
	spawn_child(c);
}
