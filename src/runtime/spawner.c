/* The spawner of a sandbox (spawner.h): init itself, once the rootfs is
 * built. It is set up once per sandbox start so that a command costs no
 * more than a clone without a copy of any address space (CLONE_VM |
 * CLONE_VFORK: the spawner waits until the child has exec'd), a join of
 * its cgroup leaf and an execve:
 *
 *   - oom_score_adj 500, written while still host root (so that, where
 *     root has CAP_SYS_RESOURCE, it is also the floor no command can go
 *     below), and inherited by every command;
 *   - no supplementary groups (setgroups is denied inside), then the
 *     sandbox's user namespace, with the securebits locked, the bounding
 *     and ambient sets empty and only CAP_SETUID, CAP_SETGID (for the
 *     command's setresuid to the sandbox's root), CAP_SYS_ADMIN (for its
 *     cgroup namespace) and CAP_KILL (PROTO_SIGNAL) kept, all of them in
 *     that namespace only, which owns nothing but the cgroup namespaces
 *     of its commands;
 *   - no_new_privs and the seccomp filter, compiled by the daemon once and
 *     installed here once: commands inherit it, no command compiles it.
 *
 * It keeps host uid 0 (unmapped inside, shown as nobody): no process of
 * the sandbox, all of which run as its root, may signal, ptrace or read
 * the /proc files of a process of another uid without capabilities they
 * do not have (`kill -9 -1` inside leaves it alone), and it is
 * non-dumpable. It holds the daemon's socket, a signalfd, /dev/null and
 * the cgroup.procs fds of the command leaves the daemon gave it. Its
 * commands are its children: it reaps them and reports their exits; as
 * pid 1 it reaps the orphans too. It has no signal handler, so the kernel
 * drops every signal sent to it from inside its pid namespace. */
#include "runtime/spawner.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/caps.h"
#include "runtime/init.h"
#include "runtime/spawn.h"

/* what a command's child needs until it has exec'd */
#define CHILD_STACK (128u << 10)

/* A sandbox's commands are the first the kernel's OOM killer should pick
 * under host pressure, before host services at the default 0. Written
 * with CAP_SYS_RESOURCE it also sets oom_score_adj_min, below which
 * nothing without that capability (no command) can go again. Without it
 * the write still raises the score (raising needs nothing), but the floor
 * stays the daemon's (0 unless started lower). */
#define SPAWN_OOM_SCORE_ADJ "500"

#define KEEP_CAPS                                                              \
	((1ULL << CAP_SETUID) | (1ULL << CAP_SETGID) |                         \
	 (1ULL << CAP_SYS_ADMIN) | (1ULL << CAP_KILL))

struct child {
	pid_t pid;
	int errfd; /* a builtin's error pipe, or -1 */
	uint64_t id;
	struct spawn_what w; /* a vfork child's failure */
};

struct leaf {
	int fds[PROTO_MAX_LEAF_FDS];
	uint32_t n; /* 0: not given yet */
};

static struct {
	int sock;
	char *stack;
	struct child *children;
	size_t nchildren, capchildren;
	struct leaf *leaves;
	size_t nleaves;
} sp;

static void send_status(uint32_t type, uint64_t id, pid_t pid, int status,
                        int err, const char *what)
{
	init_send_status(sp.sock, type, id, pid, status, err, what);
}

static _Noreturn void failed(int e, const char *what)
{
	send_status(PROTO_FAILED, 0, 0, 0, e, what);
	_exit(1);
}

static void setup(int userns, const struct init_params *p)
{
	int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (oom < 0 ||
	    write(oom, SPAWN_OOM_SCORE_ADJ, sizeof(SPAWN_OOM_SCORE_ADJ) - 1) !=
	        (ssize_t)sizeof(SPAWN_OOM_SCORE_ADJ) - 1)
		failed(errno, "spawner: oom_score_adj");
	close(oom);
	if (setgroups(0, NULL) < 0)
		failed(errno, "spawner: setgroups");
	if (setns(userns, CLONE_NEWUSER) < 0)
		failed(errno, "spawner: enter user namespace");
	close(userns);
	int r = caps_limit(KEEP_CAPS);
	if (r < 0)
		failed(-r, "spawner: drop capabilities");
	/* after the last change of credentials, which resets both (entering
	 * a user namespace owned by another uid is one) */
	prctl(PR_SET_DUMPABLE, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if ((r = seccomp_prog_apply(&p->seccomp)) < 0)
		failed(-r, "spawner: seccomp");
	/* the daemon's stderr, kept for init's failures, is nothing of ours */
	dup2(0, 2);
	sp.stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
	                MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (sp.stack == MAP_FAILED)
		failed(errno, "spawner: stack");
}

static struct leaf *leaf_get(int idx)
{
	if (idx < 0)
		return NULL;
	if ((size_t)idx >= sp.nleaves) {
		size_t n = (size_t)idx + 1;
		struct leaf *l = realloc(sp.leaves, n * sizeof(*l));
		if (!l)
			return NULL;
		memset(l + sp.nleaves, 0, (n - sp.nleaves) * sizeof(*l));
		sp.leaves = l;
		sp.nleaves = n;
	}
	return &sp.leaves[idx];
}

static void handle_spawn(const struct proto_hdr *h, const void *payload,
                         int *fds, size_t nfds)
{
	struct spawn_req req;
	struct sbx_err err;
	struct leaf *leaf = NULL;
	size_t keep = 0; /* fds[keep..] are closed at the end */

	if (proto_spawn_decode(payload, h->len, &req, &err) < 0) {
		send_status(PROTO_SPAWNED, h->id, 0, 0, EPROTO, err.msg);
		goto out;
	}
	if (nfds != req.nstdio + req.ncg) {
		send_status(PROTO_SPAWNED, h->id, 0, 0, EPROTO,
		            "spawn: fd count mismatch");
		goto out;
	}
	if (req.leaf >= 0) {
		leaf = leaf_get(req.leaf);
		if (!leaf) {
			send_status(PROTO_SPAWNED, h->id, 0, 0, ENOMEM,
			            "spawn: out of memory");
			goto out;
		}
		if (req.ncg) {
			/* the leaf's fds, kept from now on */
			for (uint32_t i = 0; i < leaf->n; i++)
				close(leaf->fds[i]);
			memcpy(leaf->fds, fds + req.nstdio,
			       req.ncg * sizeof(int));
			leaf->n = req.ncg;
			keep = req.ncg;
		} else if (!leaf->n) {
			send_status(PROTO_SPAWNED, h->id, 0, 0, EPROTO,
			            "spawn: a cgroup leaf never given");
			goto out;
		}
	}
	if (sp.nchildren == sp.capchildren) {
		size_t n = sp.capchildren ? sp.capchildren * 2 : 16;
		struct child *c = realloc(sp.children, n * sizeof(*c));
		if (!c) {
			send_status(PROTO_SPAWNED, h->id, 0, 0, ENOMEM,
			            "spawn: out of memory");
			goto out;
		}
		sp.children = c;
		sp.capchildren = n;
	}
	struct spawn_ctx ctx = {.req = &req,
	                        .fds = fds,
	                        .leaf_fds = leaf ? leaf->fds : NULL,
	                        .nleaf = leaf ? leaf->n : 0,
	                        .errfd = -1};
	struct child *c = &sp.children[sp.nchildren];
	*c = (struct child){.id = h->id, .errfd = -1};
	pid_t pid;
	if (req.flags & SPAWN_BUILTIN) {
		/* runs our code for as long as the file takes, without an
		 * exec: a fork (of a few pages) of its own */
		int pipefd[2];
		if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) < 0) {
			send_status(PROTO_SPAWNED, h->id, 0, 0, errno, "pipe");
			goto out;
		}
		pid = fork();
		if (pid == 0) {
			/* the child's end must block: it writes once */
			fcntl(pipefd[1], F_SETFL, 0);
			ctx.errfd = pipefd[1];
			spawn_child(&ctx);
		}
		close(pipefd[1]);
		if (pid < 0)
			close(pipefd[0]);
		else
			c->errfd = pipefd[0];
	} else {
		/* the child runs on the spawner's memory until it execs,
		 * and the spawner waits for that: nothing is copied */
		pid = clone(spawn_child_fn, sp.stack + CHILD_STACK,
		            CLONE_VM | CLONE_VFORK | SIGCHLD, &ctx);
		c->w = ctx.w; /* set if it failed before its exec */
	}
	if (pid < 0) {
		send_status(PROTO_SPAWNED, h->id, 0, 0, errno, "clone");
	} else {
		c->pid = pid;
		sp.nchildren++;
		send_status(PROTO_SPAWNED, h->id, pid, 0, 0, NULL);
	}
out:
	free((void *)req.argv);
	free((void *)req.envp);
	for (size_t i = 0; i < nfds; i++)
		if (i < req.nstdio || i >= req.nstdio + keep)
			close(fds[i]);
}

static void handle_signal(const struct proto_hdr *h, const void *payload)
{
	struct proto_signal sg;
	if (h->len != sizeof(sg))
		return;
	memcpy(&sg, payload, sizeof(sg));
	if (sg.signo < 1 || sg.signo >= NSIG)
		return;
	/* only a command of ours that is not reaped yet: its pid is its */
	for (size_t i = 0; i < sp.nchildren; i++)
		if (sp.children[i].pid == sg.pid && sg.pid > 1) {
			kill(sg.pid, sg.signo);
			return;
		}
}

static void reap(void)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (size_t i = 0; i < sp.nchildren; i++) {
			struct child *c = &sp.children[i];
			if (c->pid != pid)
				continue;
			if (c->errfd >= 0) {
				if (read(c->errfd, &c->w, sizeof(c->w)) !=
				    sizeof(c->w))
					c->w.err = 0;
				close(c->errfd);
			}
			c->w.what[sizeof(c->w.what) - 1] = '\0';
			send_status(PROTO_EXIT, c->id, pid, status, c->w.err,
			            c->w.err ? c->w.what : NULL);
			*c = sp.children[--sp.nchildren];
			break;
		}
	}
}

_Noreturn void spawner_main(int sock, int userns, const struct init_params *p)
{
	static char buf[sizeof(struct proto_hdr) + PROTO_MAX_PAYLOAD];

	sp.sock = sock;
	setup(userns, p);
	/* SIGCHLD is blocked since init (init.c) */
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		failed(errno, "spawner: signalfd");
	send_status(PROTO_READY, 0, 1, 0, 0, NULL);

	struct pollfd pfd[2] = {{.fd = sock, .events = POLLIN},
	                        {.fd = sfd, .events = POLLIN}};
	for (;;) {
		if (poll(pfd, 2, -1) < 0)
			continue;
		if (pfd[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) > 0)
				;
			reap();
		}
		if (!pfd[0].revents)
			continue;
		for (;;) {
			struct proto_hdr h;
			const void *payload;
			int fds[PROTO_MAX_FDS];
			size_t nfds;
			int r = proto_recv(sock, buf, sizeof(buf), &h, &payload,
			                   fds, &nfds);
			if (r == -EAGAIN)
				break;
			if (r == 0)
				_exit(0); /* the daemon let go of us */
			if (r < 0)
				continue;
			if (h.type == PROTO_SPAWN) {
				handle_spawn(&h, payload, fds, nfds);
				continue;
			}
			if (h.type == PROTO_SIGNAL)
				handle_signal(&h, payload);
			for (size_t i = 0; i < nfds; i++)
				close(fds[i]);
		}
	}
}
