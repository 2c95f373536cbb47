/* The sandbox's init (init.h says how it is started). It is a fork of the
 * zygote, a program exec'd once (zygote.h), not of the daemon: nothing of
 * the daemon's memory (its heap, its libraries, its clients' data) is
 * mapped here, and a fork of init copies a few pages, not the daemon's.
 *
 * It is host root inside the sandbox's namespaces (which are owned by
 * the host's user namespace, so nothing in the sandbox can reconfigure
 * them) while it builds the sandbox: rlimits, hostname, loopback, the root
 * filesystem (rootfs.c). Then it becomes the sandbox's spawner
 * (spawner.c): it enters the sandbox's user namespace, keeps four
 * capabilities there and none in any other, installs the seccomp filter,
 * and makes the commands and reaps them and the sandbox's orphans. It is
 * non-dumpable throughout (no ptrace, no /proc/1/mem from the sandbox,
 * whose processes run under another uid anyway). It exits when the daemon
 * closes the socket (daemon gone or sandbox stopped), and the kernel kills
 * every process of the pid namespace. */
#include "runtime/init.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/nsfs.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/proto.h"
#include "runtime/rootfs.h"
#include "runtime/spawner.h"
#include "runtime/zygote.h"

void init_send_status(int sock, uint32_t type, uint64_t id, pid_t pid,
                      int status, int err, const char *what)
{
	struct proto_status st = {.pid = pid, .status = status, .err = err};
	if (what) {
		size_t l = strnlen(what, sizeof(st.what) - 1);
		memcpy(st.what, what, l); /* st is zeroed: NUL-terminated */
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

/* A second line behind the cgroup and the disk quota (isolation.md
 * A.34), set once here and inherited by every command: none of them can
 * raise a hard limit (no CAP_SYS_RESOURCE). */
static void set_rlimits(const struct init_params *a)
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

/* The parameters are the first packet, queued before init ran, with at
 * most one fd: the user namespace that idmaps the sandbox's own files
 * (rootfs.h files_userns_fd), returned in *files_userns (-1: none).
 * Returns 0, or -errno with err set. */
static int recv_params(char *buf, size_t cap, struct init_params *p,
                       int *files_userns, struct sbx_err *err)
{
	*files_userns = -1;
	for (;;) {
		struct pollfd pfd = {.fd = INIT_SOCK_FD, .events = POLLIN};
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return sbx_err_sys(err, errno, "poll");
		struct proto_hdr h;
		const void *payload;
		int fds[PROTO_MAX_FDS];
		size_t nfds;
		int r = proto_recv(INIT_SOCK_FD, buf, cap, &h, &payload, fds,
		                   &nfds);
		if (r == -EAGAIN)
			continue;
		if (r == 0)
			_exit(0); /* the daemon let go of us */
		bool ok =
		    r >= 0 && h.type == PROTO_INIT &&
		    (nfds == 0 || (nfds == 1 && ioctl(fds[0], NS_GET_NSTYPE) ==
		                                    CLONE_NEWUSER));
		if (!ok) {
			for (size_t i = 0; i < nfds; i++)
				close(fds[i]);
			if (r < 0)
				return sbx_err_set(err, -r, "init: bad packet");
			return sbx_err_set(err, EPROTO,
			                   "init: parameters expected first");
		}
		if ((r = proto_init_decode(payload, h.len, p, err)) < 0) {
			for (size_t i = 0; i < nfds; i++)
				close(fds[i]);
			return r;
		}
		if (nfds)
			*files_userns = fds[0];
		return 0;
	}
}

/* The binary is exec'd once per daemon, as its zygote (zygote.h): fd 3 its
 * socket, fd 4 closed. Each sandbox's init is a fork of it that runs
 * init_run. Anything else is refused. */
int main(int argc, char **argv)
{
	struct stat st;

	(void)argc;
	(void)argv;
	if (fstat(INIT_SOCK_FD, &st) < 0 || !S_ISSOCK(st.st_mode) ||
	    fcntl(INIT_USERNS_FD, F_GETFD) >= 0 || errno != EBADF)
		_exit(127);
	zygote_main();
}

_Noreturn void init_failed(int sock, const struct sbx_err *err)
{
	init_send_status(sock, PROTO_FAILED, 0, 0, 0, err->code, err->msg);
	_exit(1);
}

_Noreturn void init_run(void)
{
	struct sbx_err err = {0};
	static struct init_params params;
	const struct init_params *a = &params;
	static char buf[sizeof(struct proto_hdr) + PROTO_MAX_PAYLOAD];
	const int sock = INIT_SOCK_FD;
	struct stat st;

	prctl(PR_SET_NAME, INIT_AHEAD_NAME);
	/* our parent is the daemon: the zygote cloned us as its sibling
	 * (CLONE_PARENT) */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_DUMPABLE, 0);
	/* Started as zygote.c starts us, or not at all: fd 3 the daemon's
	 * socket, fd 4 a user namespace. */
	if (fstat(sock, &st) < 0 || !S_ISSOCK(st.st_mode) ||
	    ioctl(INIT_USERNS_FD, NS_GET_NSTYPE) != CLONE_NEWUSER)
		_exit(127);
	/* An OOM inside the sandbox never picks init: it lives beside the
	 * memory-limited cgroup of the commands (cgroup.h). Its score under a
	 * host-wide OOM is the commands' (spawner.c): they share its memory
	 * until they exec, and with it the score. */
	/* The daemon passed nothing else; make sure. */
	syscall(SYS_close_range, INIT_USERNS_FD + 1, ~0U, 0);
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull >= 0) {
		dup2(devnull, 0);
		dup2(devnull, 1);
		if (devnull > 2)
			close(devnull);
	}

	/* The signal mask and dispositions are the zygote's, set once for
	 * all its forks (zygote_main). */

	/* What needs no parameters first: an init made ahead of its start
	 * (runtime_make_ahead) does it before the start comes. */
	if (sethostname("sandbox", 7) < 0) {
		sbx_err_sys(&err, errno, "sethostname");
		goto failed;
	}
	loopback_up();
	int files_userns;
	if (recv_params(buf, sizeof(buf), &params, &files_userns, &err) < 0)
		goto failed;
	prctl(PR_SET_NAME, INIT_NAME);
	set_rlimits(a);
	struct rootfs_spec spec = {.image_dir = a->image_dir,
	                           .usr_mask = a->usr_mask,
	                           .mnt_dir = a->mnt_dir,
	                           .sandbox_dir = a->sandbox_dir,
	                           .userns_fd = INIT_USERNS_FD,
	                           .files_userns_fd = files_userns,
	                           .base = a->base,
	                           .max_ptys = a->max_ptys,
	                           .layers_dir = a->layers_dir,
	                           .layers = a->layers,
	                           .nlayers = a->nlayers,
	                           .image_top = a->image_top};
	if (rootfs_setup(&spec, &err) < 0)
		goto failed;
	if (files_userns >= 0)
		close(files_userns); /* the mount keeps what it needs */
	/* From here on init is the commands' spawner: it drops what it can
	 * and serves the daemon until the daemon lets go. */
	spawner_main(sock, INIT_USERNS_FD, a);
failed:
	init_failed(sock, &err);
}
