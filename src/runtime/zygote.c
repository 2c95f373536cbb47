/* The zygote's loop (zygote.h says what it is and why). One request at a
 * time; between them it holds its socket and what it made ahead. */
#include "runtime/zygote.h"

#include <errno.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/err.h"
#include "runtime/init.h"
#include "runtime/proto.h"
#include "runtime/userns.h"

/* Made ahead, between requests, on whichever CPU is free, instead of
 * while a start waits: a network namespace for the next init (the
 * kernel's setup_net, ~1 ms here; -1: none), with the zygote's own to go
 * back to, and the user namespace of the base the daemon expects the next
 * start to have (a helper process and three map writes, ~1 ms; -1: none).
 * A user namespace made for a base that the next start does not have is
 * dropped: nothing ever ran in it. */
static int pool_net = -1, own_net = -1;
static int pool_user = -1;
static uint32_t pool_user_base, want_user_base;

static void pool_refill(void)
{
	if (want_user_base && pool_user < 0) {
		struct sbx_err err;
		int fd = userns_create((uid_t)want_user_base, &err);
		if (fd >= 0) {
			pool_user = fd;
			pool_user_base = want_user_base;
		}
		want_user_base = 0; /* one try: a failure recurs at the start */
	}
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

/* The user namespace of base: the one made ahead, or a new one. */
static int user_ns(uint32_t base, struct sbx_err *err)
{
	if (pool_user >= 0 && pool_user_base == base) {
		int fd = pool_user;
		pool_user = -1;
		return fd;
	}
	if (pool_user >= 0) {
		close(pool_user);
		pool_user = -1;
	}
	return userns_create((uid_t)base, err);
}

/* The child, in the sandbox's namespaces: its cgroups first (init, and the
 * file operations it forks, never run anywhere else), then its two fds in
 * place and nothing else open but 0-2. fds: init's socket, then
 * cgroup.procs files. */
static _Noreturn void child(int userns, const int *fds, size_t nfds)
{
	struct sbx_err err = {0};
	int hi = userns > INIT_USERNS_FD ? userns : INIT_USERNS_FD;
	for (size_t i = 0; i < nfds; i++)
		if (fds[i] > hi)
			hi = fds[i];
	for (size_t i = 1; i < nfds; i++)
		if (write(fds[i], "0", 1) != 1) {
			sbx_err_sys(&err, errno, "joining init's cgroups");
			init_failed(fds[0], &err);
		}
	/* above every target first: either may be at the other's place */
	int s = fcntl(fds[0], F_DUPFD_CLOEXEC, hi + 1);
	int u = fcntl(userns, F_DUPFD_CLOEXEC, hi + 1);
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
static pid_t start(int userns, const int *fds, size_t nfds)
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
		child(userns, fds, nfds);
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

/* Every signal to SIG_DFL. The raw call: glibc's signal() and sigaction()
 * refuse its two internal signals (32 and 33), and one the daemon was
 * started with ignored would stay ignored in every command. */
static void reset_dispositions(void)
{
	struct {
		void *handler; /* SIG_DFL */
		unsigned long flags;
		void *restorer;
		uint64_t mask;
	} dfl = {0};
	for (int s = 1; s <= 64; s++)
		if (s != SIGKILL && s != SIGSTOP)
			syscall(SYS_rt_sigaction, s, &dfl, NULL,
			        sizeof(dfl.mask));
}

_Noreturn void zygote_main(void)
{
	static char buf[sizeof(struct proto_hdr) + 64];

	prctl(PR_SET_NAME, ZYGOTE_NAME);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_DUMPABLE, 0);
	/* Once here, for every init it forks: no handlers, nothing ignored.
	 * As a pid namespace's init, the kernel already drops every signal
	 * sent from inside it that init has no handler for, and its commands
	 * start with clean dispositions without resetting 64 of them. The
	 * exec kept the daemon's mask and ignored signals: set both. SIGCHLD
	 * stays blocked for the spawner's signalfd. */
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_SETMASK, &mask, NULL);
	reset_dispositions();
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
		struct zygote_start zs;
		struct sbx_err err = {0};
		pid_t pid;
		if (r < 0)
			pid = r;
		else if (h.type != PROTO_START || h.len != sizeof(zs))
			pid = -EPROTO;
		else {
			memcpy(&zs, payload, sizeof(zs));
			int userns =
			    nfds == 1 + (size_t)zs.ncg
			        ? user_ns(zs.base, &err)
			        : sbx_err_set(&err, EPROTO, "zygote: fd count");
			pid = userns < 0 ? userns : start(userns, fds, nfds);
			if (userns >= 0)
				close(userns); /* the child's now */
			want_user_base = zs.next_base;
		}
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		/* the words of a failure before the clone; else its errno */
		init_send_status(INIT_SOCK_FD, PROTO_STARTED, h.id,
		                 pid > 0 ? pid : 0, 0, pid < 0 ? -pid : 0,
		                 err.code ? err.msg : NULL);
	}
}
