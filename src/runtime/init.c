/* The sandbox's init. It stays host root inside the sandbox's namespaces
 * (which are owned by the host's user namespace, so nothing in the sandbox
 * can reconfigure them), is non-dumpable (no ptrace, no /proc/1/mem from
 * the sandbox, whose processes run under another uid anyway), and holds
 * only its socket and the user namespace fd.
 *
 * It never blocks on anything the sandbox controls: spawning is a fork, a
 * child's exec failure comes back through a pipe read after the child is
 * reaped, and the only other input is the daemon's socket. When that
 * socket closes (daemon gone or sandbox stopped) init exits, and the
 * kernel kills every process of the pid namespace with it. */
#include "runtime/init.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/proto.h"
#include "runtime/spawn.h"

struct child {
	pid_t pid;
	int errfd;
	uint64_t id;
};

static struct child *children;
static size_t nchildren, capchildren;

static void send_status(int sock, uint32_t type, uint64_t id, pid_t pid,
			int status, int err, const char *what)
{
	struct proto_status st = {.pid = pid, .status = status, .err = err};
	if (what) {
		strncpy(st.what, what, sizeof(st.what) - 1);
	}
	if (proto_send(sock, type, id, &st, sizeof(st), NULL, 0) == -EPIPE)
		_exit(0);
}

static void loopback_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;
	if (s < 0)
		return;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
}

static char *title_area;
static size_t title_len;

void init_set_title_area(char *start, size_t len)
{
	title_area = start;
	title_len = len;
}

/* Show as "sandboxd-init" in the sandbox's ps and /proc/1/cmdline, not as
 * the daemon's command line (which names host paths). PR_SET_MM needs
 * CONFIG_CHECKPOINT_RESTORE, so overwrite the argv area in place. The
 * kernel shows the whole area, NULs included, while its last byte is a
 * NUL; when that byte is not, it shows the area up to the first NUL (the
 * setproctitle convention), so the name alone, without padding. */
static void set_cmdline(void)
{
	static const char name[] = "sandboxd-init";
	prctl(PR_SET_NAME, name);
	if (title_area && title_len >= sizeof(name)) {
		memset(title_area, 0, title_len);
		memcpy(title_area, name, sizeof(name));
		if (title_len > sizeof(name))
			title_area[title_len - 1] = ' ';
	}
}

/* A second line behind the cgroup and the disk quota (isolation.md
 * A.34), set once here and inherited by every command: none of them can
 * raise a hard limit (no CAP_SYS_RESOURCE). */
static void set_rlimits(const struct init_args *a)
{
	/* 16384 files: plenty for a sandbox, and below what hosts usually
	 * give the daemon (which cannot raise a hard limit either) */
	struct rlimit nofile, core = {0, 0};
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
		rlim_t want = nofile.rlim_max < 16384 ? nofile.rlim_max : 16384;
		nofile.rlim_cur = nofile.rlim_max = want;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	setrlimit(RLIMIT_CORE, &core);
	if (a->disk_bytes) {
		struct rlimit fsize = {a->disk_bytes, a->disk_bytes};
		setrlimit(RLIMIT_FSIZE, &fsize);
	}
}

static void handle_spawn(const struct init_args *a, const struct proto_hdr *h,
			 const void *payload, int *fds, size_t nfds)
{
	struct spawn_req req;
	struct sbx_err err;
	int pipefd[2] = {-1, -1};

	if (proto_spawn_decode(payload, h->len, &req, &err) < 0) {
		send_status(a->sock, PROTO_SPAWNED, h->id, 0, 0, EPROTO, err.msg);
		goto out;
	}
	if (nfds != req.nstdio + req.ncg) {
		send_status(a->sock, PROTO_SPAWNED, h->id, 0, 0, EPROTO,
			    "spawn: fd count mismatch");
		goto out;
	}
	if (nchildren == capchildren) {
		size_t n = capchildren ? capchildren * 2 : 16;
		struct child *c = realloc(children, n * sizeof(*c));
		if (!c) {
			send_status(a->sock, PROTO_SPAWNED, h->id, 0, 0, ENOMEM,
				    "spawn: out of memory");
			goto out;
		}
		children = c;
		capchildren = n;
	}
	if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) < 0) {
		send_status(a->sock, PROTO_SPAWNED, h->id, 0, 0, errno, "pipe");
		goto out;
	}
	pid_t pid = fork();
	if (pid == 0) {
		/* the child's end must block: it writes once and exits */
		fcntl(pipefd[1], F_SETFL, 0);
		spawn_child(&req, fds, a->userns_fd, pipefd[1], a->seccomp);
	}
	if (pid < 0) {
		send_status(a->sock, PROTO_SPAWNED, h->id, 0, 0, errno, "fork");
		close(pipefd[0]);
	} else {
		children[nchildren++] =
			(struct child){.pid = pid, .errfd = pipefd[0], .id = h->id};
		send_status(a->sock, PROTO_SPAWNED, h->id, pid, 0, 0, NULL);
	}
	close(pipefd[1]);
out:
	free((void *)req.argv);
	free((void *)req.envp);
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
}

static void reap(int sock)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (size_t i = 0; i < nchildren; i++) {
			if (children[i].pid != pid)
				continue;
			struct spawn_what w = {0};
			if (read(children[i].errfd, &w, sizeof(w)) != sizeof(w))
				w.err = 0;
			close(children[i].errfd);
			send_status(sock, PROTO_EXIT, children[i].id, pid, status,
				    w.err, w.err ? w.what : NULL);
			children[i] = children[--nchildren];
			break;
		}
	}
}

_Noreturn void init_main(const struct init_args *a)
{
	struct sbx_err err = {0};
	static char buf[sizeof(struct proto_hdr) + PROTO_MAX_PAYLOAD];

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_DUMPABLE, 0);
	set_cmdline();
	/* An OOM inside the sandbox never picks init: it lives beside the
	 * memory-limited cgroup of the commands (cgroup.h). This only keeps
	 * it out of a host-wide OOM, where root has CAP_SYS_RESOURCE; where
	 * it has not, the write fails and init keeps the daemon's score.
	 * Commands set their own score (spawn.c), never inheriting this. */
	int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (oom >= 0) {
		if (write(oom, "-1000", 5) < 0) {
			/* EACCES without CAP_SYS_RESOURCE; see above */
		}
		close(oom);
	}
	/* Nothing of the daemon's may stay open here: other sandboxes'
	 * sockets, the registry, the listening socket. */
	int keep[3] = {a->sock, a->userns_fd, a->rootfs.files_userns_fd};
	for (int i = 0; i < 3; i++) /* sorted, -1 first */
		for (int j = i + 1; j < 3; j++)
			if (keep[j] < keep[i]) {
				int t = keep[i];
				keep[i] = keep[j];
				keep[j] = t;
			}
	int from = 3;
	for (int i = 0; i < 3; i++) {
		if (keep[i] < from)
			continue;
		if (keep[i] > from)
			syscall(SYS_close_range, from, keep[i] - 1, 0);
		from = keep[i] + 1;
	}
	syscall(SYS_close_range, from, ~0U, 0);
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull >= 0) {
		dup2(devnull, 0);
		dup2(devnull, 1);
		if (devnull > 2)
			close(devnull);
	}

	/* No handlers, nothing ignored: as the pid namespace's init, the
	 * kernel already drops every signal sent from inside it that init
	 * has no handler for, and a forked command then starts with clean
	 * dispositions without resetting 64 of them. */
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);

	set_rlimits(a);
	if (sethostname("sandbox", 7) < 0) {
		sbx_err_sys(&err, errno, "sethostname");
		goto failed;
	}
	loopback_up();
	if (rootfs_setup(&a->rootfs, &err) < 0)
		goto failed;
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		sbx_err_sys(&err, errno, "signalfd");
		goto failed;
	}
	send_status(a->sock, PROTO_READY, 0, 1, 0, 0, NULL);

	struct pollfd pfd[2] = {{.fd = a->sock, .events = POLLIN},
				{.fd = sfd, .events = POLLIN}};
	for (;;) {
		if (poll(pfd, 2, -1) < 0)
			continue;
		if (pfd[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) > 0)
				;
			reap(a->sock);
		}
		if (!pfd[0].revents)
			continue;
		for (;;) {
			struct proto_hdr h;
			const void *payload;
			int fds[PROTO_MAX_FDS];
			size_t nfds;
			int r = proto_recv(a->sock, buf, sizeof(buf), &h, &payload,
					   fds, &nfds);
			if (r == -EAGAIN)
				break;
			if (r == 0)
				_exit(0); /* the daemon let go of us */
			if (r < 0)
				continue;
			if (h.type == PROTO_SPAWN) {
				handle_spawn(a, &h, payload, fds, nfds);
			} else {
				if (h.type == PROTO_SIGNAL &&
				    h.len == sizeof(struct proto_signal)) {
					struct proto_signal sg;
					memcpy(&sg, payload, sizeof(sg));
					if (sg.pid > 1)
						kill(sg.pid, sg.signo);
				}
				for (size_t i = 0; i < nfds; i++)
					close(fds[i]);
			}
		}
	}
failed:
	send_status(a->sock, PROTO_FAILED, 0, 0, 0, err.code, err.msg);
	_exit(1);
}
