/* The daemon's side of the zygote (zygote.h): the init binary in a sealed
 * memfd, the zygote started from it, and the request that makes an init. */
#include "runtime/zygote.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/cleanup.h"
#include "runtime/init.h"
#include "runtime/proto.h"

/* How long a start waits for the zygote's answer: it clones, nothing
 * more, but a clone waits for CPUs the machine may be short of. */
#define ZYGOTE_TIMEOUT_MS 30000

/* init's binary in a memfd sealed as daemon/main.c seals the daemon's own:
 * nothing can write it, and init's /proc/self/exe names no host file
 * (isolation.md A.8). The fd kept is a read-only one, so that no open
 * writer makes an exec of it ETXTBSY. */
static int init_memfd(int *out, struct sbx_err *err)
{
	const size_t len = sbx_init_blob_size;
	_cleanup_close_ int fd =
	    memfd_create(INIT_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return sbx_err_sys(err, errno, "memfd_create");
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, sbx_init_blob + off, len - off);
		if (n <= 0)
			return sbx_err_sys(err, n < 0 ? errno : EIO,
			                   "writing init's memfd");
		off += (size_t)n;
	}
	if (fcntl(fd, F_ADD_SEALS,
	          F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0)
		return sbx_err_sys(err, errno, "sealing init's memfd");
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	*out = open(p, O_RDONLY | O_CLOEXEC);
	if (*out < 0)
		return sbx_err_sys(err, errno, "reopening init's memfd");
	return 0;
}

int zygote_prepare(struct zygote *z, struct sbx_err *err)
{
	int r;
	z->exe_fd = z->slot_fd = z->devnull = z->sock = -1;
	z->pid = 0;
	if ((r = init_memfd(&z->exe_fd, err)))
		return r;
	z->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (z->devnull >= 0)
		z->slot_fd = fcntl(z->devnull, F_DUPFD_CLOEXEC, 0);
	if (z->devnull < 0 || z->slot_fd < 0)
		return sbx_err_sys(err, errno, "open /dev/null");
	return 0;
}

/* The zygote gone (or never started): its socket closed, it killed and
 * reaped. */
static void drop(struct zygote *z)
{
	if (z->sock >= 0)
		close(z->sock);
	z->sock = -1;
	if (z->pid > 0) {
		kill(z->pid, SIGKILL);
		while (waitpid(z->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	z->pid = 0;
}

void zygote_close(struct zygote *z)
{
	drop(z);
	int fds[] = {z->exe_fd, z->slot_fd, z->devnull};
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	z->exe_fd = z->slot_fd = z->devnull = -1;
}

struct launch_args {
	int exe_fd, sock_slot, hi; /* hi: the higher of them */
	int err;                   /* set by the child */
};

/* The clone child: on the daemon's memory and, until its first call, on its
 * fd table too, while the daemon waits (CLONE_VFORK). Async-signal-safe
 * calls only, and nothing that writes memory but its own stack and
 * a->err. */
static int launch_child(void *arg)
{
	struct launch_args *a = arg;
	static const char *const argv[] = {INIT_NAME, NULL};
	static const char *const envp[] = {NULL};

	/* A table of its own with only the fds below hi + 1 (a handful of
	 * the daemon's, made before any sandbox's): however many sandboxes
	 * the daemon runs, their fds are neither copied here nor closed. */
	if (syscall(SYS_close_range, a->hi + 1, ~0U, CLOSE_RANGE_UNSHARE) < 0)
		goto fail;
	/* above every target first, so no dup2 clobbers one not yet placed */
	int s = fcntl(a->sock_slot, F_DUPFD_CLOEXEC, a->hi + 1);
	int x = fcntl(a->exe_fd, F_DUPFD_CLOEXEC, a->hi + 1);
	if (s < 0 || x < 0 || dup2(s, INIT_SOCK_FD) < 0 ||
	    dup3(x, INIT_USERNS_FD + 1, O_CLOEXEC) < 0)
		goto fail;
	/* nothing at INIT_USERNS_FD: that is how the binary knows it is the
	 * zygote (init.c main) */
	close(INIT_USERNS_FD);
	if (syscall(SYS_close_range, INIT_USERNS_FD + 2, ~0U, 0) < 0)
		goto fail;
	syscall(SYS_execveat, INIT_USERNS_FD + 1, "", argv, envp,
	        AT_EMPTY_PATH);
fail:
	a->err = errno ? errno : EINVAL;
	_exit(127);
}

int zygote_launch(struct zygote *z, struct sbx_err *err)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return sbx_err_sys(err, errno, "socketpair");
	struct launch_args a = {.exe_fd = z->exe_fd, .sock_slot = z->slot_fd};
	a.hi = a.exe_fd > a.sock_slot ? a.exe_fd : a.sock_slot;
	/* the child runs here while the daemon waits for its exec (one at a
	 * time: the daemon has one thread that starts sandboxes) */
	static char stack[16384] __attribute__((aligned(16)));
	sigset_t all, old;

	if (dup3(sv[1], a.sock_slot, O_CLOEXEC) < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return sbx_err_sys(err, e, "dup3 the zygote's socket");
	}
	close(sv[1]);
	/* no handler of the daemon's may run on the child's stack */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = clone(launch_child, stack + sizeof(stack),
	                  CLONE_VM | CLONE_VFORK | CLONE_FILES | SIGCHLD, &a);
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* give the place back: the zygote holds its own copy now */
	dup3(z->devnull, a.sock_slot, O_CLOEXEC);
	if (pid < 0) {
		close(sv[0]);
		return sbx_err_sys(err, e, "clone the zygote");
	}
	z->sock = sv[0];
	z->pid = pid;
	if (a.err) {
		drop(z);
		return sbx_err_sys(err, a.err, "exec the zygote");
	}
	return 0;
}

/* The zygote's answer: 0 with *st, or -errno (-ETIMEDOUT: none in time,
 * -EPIPE: it is gone). */
static int answer(struct zygote *z, struct proto_status *st)
{
	char buf[sizeof(struct proto_hdr) + sizeof(*st)];
	for (;;) {
		struct pollfd pfd = {.fd = z->sock, .events = POLLIN};
		int n = poll(&pfd, 1, ZYGOTE_TIMEOUT_MS);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ETIMEDOUT;
		struct proto_hdr h;
		const void *payload;
		int fds[PROTO_MAX_FDS];
		size_t nfds;
		int r = proto_recv(z->sock, buf, sizeof(buf), &h, &payload, fds,
		                   &nfds);
		if (r == -EAGAIN)
			continue;
		if (r == 0)
			return -EPIPE;
		if (r < 0)
			return r;
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		if (h.type != PROTO_STARTED || h.len != sizeof(*st))
			return -EPROTO;
		memcpy(st, payload, sizeof(*st));
		return 0;
	}
}

int zygote_ask(struct zygote *z, int sock, uid_t base, uid_t next_base,
               const int *cg_fds, int ncg, struct sbx_err *err)
{
	int fds[PROTO_MAX_FDS] = {sock};
	struct zygote_start zs = {.ncg = (uint32_t)ncg,
	                          .base = (uint32_t)base,
	                          .next_base = (uint32_t)next_base};
	int r;

	if (ncg < 0 || ncg > PROTO_MAX_FDS - 1)
		return sbx_err_set(err, E2BIG, "too many cgroups for init");
	for (int i = 0; i < ncg; i++)
		fds[1 + i] = cg_fds[i];
	/* A zygote that is gone (killed by hand, say) is started again. Only
	 * an unsent request is sent again: one the zygote took may have made
	 * an init already. */
	for (int tries = 0;; tries++) {
		/* dead already (a zombie): never send it what it cannot take */
		if (z->pid > 0 && waitpid(z->pid, NULL, WNOHANG) == z->pid) {
			z->pid = 0;
			drop(z);
		}
		if (z->sock < 0 && (r = zygote_launch(z, err)) < 0)
			return r;
		r = proto_send(z->sock, PROTO_START, 0, &zs, sizeof(zs), fds,
		               1 + (size_t)ncg);
		if (r == 0)
			break;
		drop(z);
		if (tries || (r != -EPIPE && r != -ECONNRESET))
			return sbx_err_sys(err, -r,
			                   "asking the zygote for init");
	}
	return 0;
}

pid_t zygote_answer(struct zygote *z, struct sbx_err *err)
{
	struct proto_status st;
	int r;
	if ((r = answer(z, &st)) < 0) {
		drop(z);
		return sbx_err_sys(err, -r, "waiting for the zygote");
	}
	st.what[sizeof(st.what) - 1] = '\0';
	if (st.err && st.what[0]) /* the zygote's own words */
		return sbx_err_set(err, st.err, "%s", st.what);
	if (st.err)
		return sbx_err_sys(err, st.err, "clone sandbox init");
	return st.pid;
}

pid_t zygote_make_init(struct zygote *z, int sock, uid_t base, uid_t next_base,
                       const int *cg_fds, int ncg, struct sbx_err *err)
{
	int r = zygote_ask(z, sock, base, next_base, cg_fds, ncg, err);
	return r < 0 ? r : zygote_answer(z, err);
}
