/* The zygote's loop (zygote.h says what it is and why). One request at a
 * time; it holds nothing between them but its socket. */
#include "runtime/zygote.h"

#include <errno.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/err.h"
#include "runtime/init.h"
#include "runtime/proto.h"

/* A network namespace made ahead, for the next init (-1: none), and the
 * zygote's own to go back to. Making one (the kernel's setup_net, ~1 ms
 * here) is then done between requests, on whichever CPU is free, instead
 * of while a start waits. */
static int pool_net = -1, own_net = -1;

static void pool_refill(void)
{
	if (pool_net >= 0)
		return;
	if (own_net < 0 &&
	    (own_net = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
		return;
	if (unshare(CLONE_NEWNET) < 0)
		return; /* the clone makes one then, or says why it cannot */
	pool_net = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	/* never serve from anything but the daemon's own namespace */
	if (setns(own_net, CLONE_NEWNET) < 0)
		_exit(1);
}

/* The child, in the sandbox's namespaces: its cgroups first (init, and the
 * file operations it forks, never run anywhere else), then its two fds in place
 * and nothing else open but 0-2. fds: init's socket, the user namespace,
 * then cgroup.procs files. */
static _Noreturn void child(const int *fds, size_t nfds)
{
	struct sbx_err err = {0};
	int hi = INIT_USERNS_FD;
	for (size_t i = 0; i < nfds; i++)
		if (fds[i] > hi)
			hi = fds[i];
	for (size_t i = 2; i < nfds; i++)
		if (write(fds[i], "0", 1) != 1) {
			sbx_err_sys(&err, errno, "joining init's cgroups");
			init_failed(fds[0], &err);
		}
	/* above every target first: fds[0] may be INIT_USERNS_FD itself */
	int s = fcntl(fds[0], F_DUPFD_CLOEXEC, hi + 1);
	int u = fcntl(fds[1], F_DUPFD_CLOEXEC, hi + 1);
	if (s < 0 || u < 0 || dup2(s, INIT_SOCK_FD) < 0 ||
	    dup2(u, INIT_USERNS_FD) < 0) {
		sbx_err_sys(&err, errno, "placing init's fds");
		init_failed(fds[0], &err);
	}
	/* the zygote's socket was at INIT_SOCK_FD: replaced above */
	syscall(SYS_close_range, INIT_USERNS_FD + 1, ~0U, 0);
	init_run();
}

/* A child in new namespaces, the daemon's child: its pid, or -errno. A
 * raw clone3 without a stack: the child goes on, on a copy of this one,
 * as after a fork.
 *
 * The network namespace made ahead is entered by the zygote itself for
 * the clone, so that the child is born in it: the daemon opens
 * /proc/<pid>/ns/net as soon as it has the pid (a network's veth), and a
 * child that entered it later could still be in the host's then. */
static pid_t start(const int *fds, size_t nfds)
{
	struct clone_args ca = {.flags = CLONE_PARENT | CLONE_NEWNS |
	                                 CLONE_NEWPID | CLONE_NEWIPC |
	                                 CLONE_NEWUTS};
	bool pooled = pool_net >= 0 && setns(pool_net, CLONE_NEWNET) == 0;
	if (!pooled)
		ca.flags |= CLONE_NEWNET;
	long pid = syscall(SYS_clone3, &ca, sizeof(ca));
	int e = errno;
	if (pid == 0)
		child(fds, nfds);
	if (pooled) {
		/* never serve from anything but the daemon's own namespace */
		if (setns(own_net, CLONE_NEWNET) < 0)
			_exit(1);
		if (pid > 0) {
			close(pool_net); /* the child's now */
			pool_net = -1;
		}
	}
	return pid < 0 ? -e : (pid_t)pid;
}

_Noreturn void zygote_main(void)
{
	static char buf[sizeof(struct proto_hdr) + 64];

	prctl(PR_SET_NAME, ZYGOTE_NAME);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_DUMPABLE, 0);
	for (;;) {
		pool_refill();
		struct pollfd pfd = {.fd = INIT_SOCK_FD, .events = POLLIN};
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			_exit(1);
		struct proto_hdr h = {0};
		const void *payload;
		int fds[PROTO_MAX_FDS];
		size_t nfds = 0;
		int r = proto_recv(INIT_SOCK_FD, buf, sizeof(buf), &h, &payload,
		                   fds, &nfds);
		if (r == -EAGAIN)
			continue;
		if (r == 0)
			_exit(0); /* the daemon let go */
		struct proto_status st = {0};
		struct zygote_start zs;
		if (r < 0)
			st.err = -r;
		else if (h.type != PROTO_START || h.len != sizeof(zs))
			st.err = EPROTO;
		else {
			memcpy(&zs, payload, sizeof(zs));
			pid_t pid = nfds == 2 + (size_t)zs.ncg
			                ? start(fds, nfds)
			                : -EPROTO;
			if (pid < 0)
				st.err = -pid;
			else
				st.pid = pid;
		}
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		if (proto_send(INIT_SOCK_FD, PROTO_STARTED, h.id, &st,
		               sizeof(st), NULL, 0) == -EPIPE)
			_exit(0);
	}
}
