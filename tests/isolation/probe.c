/* Isolation probe: one static binary that runs inside a sandbox (or on the
 * host, as a baseline) and reports what it could and could not do.
 *
 *   probe CHECK [ARGS...]
 *
 * Output is one KEY=VALUE line per observation on stdout, for example
 * "MOUNT_TMPFS=EPERM" or "UID=0". A value is OK when a call succeeded, the
 * errno's name when it failed, or a plain value. Keys never contain '='.
 * The runner (tests/isolation/test_iso_*.py) asserts on these lines and on
 * the host's state; this file only observes.
 *
 * Safety rules, since the same binary also runs on the host as a baseline:
 * arguments are invalid pointers/fds wherever a call could do harm if it
 * were allowed, the syscall sweep never executes a call (see check_sweep),
 * and every resource check has a hard cap of its own so that a broken limit
 * cannot hurt the machine. Nothing here sends traffic off loopback: the
 * network check refuses to try a non-local connect() unless the namespace
 * has only "lo" and no routes, where the kernel refuses it at route lookup.
 *
 * Build: cc -static -O2 -o probe probe.c (the test fixture does this). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <net/route.h>
#include <linux/if_packet.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_open_tree_attr
#define SYS_open_tree_attr 467
#endif
#ifndef SYS_lsm_set_self_attr
#define SYS_lsm_set_self_attr 460
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif
#ifndef AF_KEY
#define AF_KEY 15
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#ifndef F_OFD_GETLK
#define F_OFD_GETLK 36
#define F_OFD_SETLK 37
#endif

/* ---- output ---------------------------------------------------------------- */

static void kv(const char *key, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void kv(const char *key, const char *fmt, ...)
{
	va_list ap;
	printf("%s=", key);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static const char *errname(int e)
{
	static char buf[16];
	switch (e) {
#define E(x) case x: return #x;
	E(EPERM) E(ENOENT) E(ESRCH) E(EINTR) E(EIO) E(ENXIO) E(E2BIG)
	E(ENOEXEC) E(EBADF) E(ECHILD) E(EAGAIN) E(ENOMEM) E(EACCES) E(EFAULT)
	E(EBUSY) E(EEXIST) E(EXDEV) E(ENODEV) E(ENOTDIR) E(EISDIR) E(EINVAL)
	E(ENFILE) E(EMFILE) E(ENOTTY) E(ETXTBSY) E(EFBIG) E(ENOSPC) E(ESPIPE)
	E(EROFS) E(EMLINK) E(EPIPE) E(EDOM) E(ERANGE) E(ENOSYS) E(ENAMETOOLONG)
	E(ELOOP) E(ENOMSG) E(EIDRM) E(ENODATA) E(ENOTSOCK) E(EPROTONOSUPPORT)
	E(EOPNOTSUPP) E(EAFNOSUPPORT) E(EADDRINUSE) E(EADDRNOTAVAIL)
	E(ENETDOWN) E(ENETUNREACH) E(ECONNREFUSED) E(EHOSTUNREACH)
	E(ETIMEDOUT) E(EINPROGRESS) E(EALREADY) E(EDQUOT) E(ESTALE)
	E(ENOTCONN) E(EOVERFLOW) E(ENOKEY) E(EBADMSG) E(EPROTOTYPE)
	E(ESOCKTNOSUPPORT) E(ECONNRESET) E(ENOTEMPTY) E(EUSERS) E(ENOTBLK)
#undef E
	}
	snprintf(buf, sizeof(buf), "E%d", e);
	return buf;
}

/* KEY=OK or KEY=<errno name>, from a call's return value */
static long res(const char *key, long r)
{
	if (r < 0)
		kv(key, "%s", errname(errno));
	else
		kv(key, "OK");
	return r;
}

static const char *sig_name(int s)
{
	static char buf[16];
	switch (s) {
	case SIGSYS: return "SIGSYS";
	case SIGKILL: return "SIGKILL";
	case SIGSEGV: return "SIGSEGV";
	case SIGBUS: return "SIGBUS";
	case SIGILL: return "SIGILL";
	case SIGABRT: return "SIGABRT";
	case SIGTERM: return "SIGTERM";
	}
	snprintf(buf, sizeof(buf), "SIG%d", s);
	return buf;
}

/* "EXIT:n" or "SIGNAL:SIGxxx" */
static const char *status_str(int st)
{
	static char buf[40];
	if (WIFEXITED(st))
		snprintf(buf, sizeof(buf), "EXIT:%d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, sizeof(buf), "SIGNAL:%s", sig_name(WTERMSIG(st)));
	else
		snprintf(buf, sizeof(buf), "STATUS:%d", st);
	return buf;
}

static ssize_t read_file(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t off = 0;
	while (off + 1 < cap) {
		ssize_t n = read(fd, buf + off, cap - 1 - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	buf[off] = '\0';
	close(fd);
	return (ssize_t)off;
}

static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	int e = errno;
	close(fd);
	errno = e;
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* Copies the "Name:\tvalue" line of /proc/<pid>/status into out. */
static int status_field(const char *pid, const char *name, char *out,
			size_t cap)
{
	char path[64], buf[8192];
	snprintf(path, sizeof(path), "/proc/%s/status", pid);
	if (read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	size_t nl = strlen(name);
	for (char *line = buf; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (!strncmp(line, name, nl) && line[nl] == ':') {
			char *v = line + nl + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			snprintf(out, cap, "%s", v);
			for (char *p = out; *p; p++)
				if (*p == '\t')
					*p = ' ';
			return 0;
		}
		line = next;
	}
	return -1;
}

static void print_status_fields(const char *pid, const char *const *names)
{
	for (; *names; names++) {
		char v[256];
		if (status_field(pid, *names, v, sizeof(v)) == 0)
			kv(*names, "%s", v);
		else
			kv(*names, "MISSING");
	}
}

/* First line of a map file, as "inside:outside:count" */
static void print_map(const char *key, const char *path)
{
	char buf[512];
	unsigned long a, b, c;
	if (read_file(path, buf, sizeof(buf)) < 0) {
		kv(key, "%s", errname(errno));
		return;
	}
	int lines = 0;
	for (char *p = buf; *p; p++)
		lines += *p == '\n';
	if (sscanf(buf, "%lu %lu %lu", &a, &b, &c) == 3)
		kv(key, "%lu:%lu:%lu", a, b, c);
	else
		kv(key, "UNPARSED");
	char k2[64];
	snprintf(k2, sizeof(k2), "%s_LINES", key);
	kv(k2, "%d", lines);
}

/* ---- identity and privilege --------------------------------------------- */

static const char *const status_names[] = {
	"Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd",
	"CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters", NULL};

static int check_ids(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	kv("UID", "%d", (int)getuid());
	kv("EUID", "%d", (int)geteuid());
	kv("GID", "%d", (int)getgid());
	kv("EGID", "%d", (int)getegid());
	print_map("UID_MAP", "/proc/self/uid_map");
	print_map("GID_MAP", "/proc/self/gid_map");
	char buf[64];
	if (read_file("/proc/self/setgroups", buf, sizeof(buf)) >= 0) {
		buf[strcspn(buf, "\n")] = '\0';
		kv("SETGROUPS", "%s", buf);
	}
	print_status_fields("self", status_names);
	int sb = prctl(PR_GET_SECUREBITS);
	kv("SECUREBITS", "0x%x", sb);
	/* can we become someone else? (needs CAP_SETUID, which we lack) */
	pid_t p = fork();
	if (p == 0)
		_exit(setresuid(1000, 1000, 1000) == 0 ? 0 : 10 + (errno & 0x7f));
	int st;
	waitpid(p, &st, 0);
	kv("SETUID_1000", "%s",
	   WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "OK"
	   : WIFEXITED(st) ? errname(WEXITSTATUS(st) - 10) : status_str(st));
	return 0;
}

/* Prints who we are after an exec: used through a setuid copy. */
static int check_whoami(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	uid_t r, e, s;
	getresuid(&r, &e, &s);
	kv("RUID", "%d", (int)r);
	kv("EUID", "%d", (int)e);
	kv("SUID", "%d", (int)s);
	static const char *const n[] = {"CapEff", "CapPrm", "NoNewPrivs", NULL};
	print_status_fields("self", n);
	return 0;
}

/* Execs PATH whoami in a child and forwards its output. */
static int check_exec(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	pid_t p = fork();
	if (p == 0) {
		execv(argv[2], (char *[]){argv[2], "whoami", NULL});
		kv("EXEC", "%s", errname(errno));
		_exit(127);
	}
	int st;
	waitpid(p, &st, 0);
	kv("EXEC_STATUS", "%s", status_str(st));
	return 0;
}

static long raw_clone(unsigned long flags)
{
	return syscall(SYS_clone, flags, 0, 0, 0, 0);
}

/* clone() with flags: OK when a child was made (it exits at once) */
static void try_clone(const char *key, unsigned long flags)
{
	long r = raw_clone(flags | SIGCHLD);
	if (r == 0)
		_exit(0);
	if (r > 0) {
		waitpid((pid_t)r, NULL, 0);
		kv(key, "OK");
	} else {
		kv(key, "%s", errname(errno));
	}
}

struct clone_args_min {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack,
		stack_size, tls;
};

static int check_userns(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	static const struct {
		const char *name;
		int flag;
	} ns[] = {{"USER", CLONE_NEWUSER}, {"NS", CLONE_NEWNS},
		  {"NET", CLONE_NEWNET},   {"PID", CLONE_NEWPID},
		  {"IPC", CLONE_NEWIPC},   {"UTS", CLONE_NEWUTS},
		  {"CGROUP", CLONE_NEWCGROUP}, {"TIME", 0x80}};
	/* unshare in a child, so a success changes nothing of ours */
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		char key[64];
		snprintf(key, sizeof(key), "UNSHARE_%s", ns[i].name);
		pid_t p = fork();
		if (p == 0)
			_exit(unshare(ns[i].flag) == 0 ? 0 : 10 + (errno & 0x7f));
		int st;
		waitpid(p, &st, 0);
		kv(key, "%s", WEXITSTATUS(st) == 0 ? "OK"
					       : errname(WEXITSTATUS(st) - 10));
		snprintf(key, sizeof(key), "CLONE_%s", ns[i].name);
		try_clone(key, (unsigned long)ns[i].flag);
	}
	try_clone("CLONE_USER_NS", CLONE_NEWUSER | CLONE_NEWNS);
	try_clone("CLONE_PLAIN", 0); /* control: a plain fork works */
	struct clone_args_min ca = {.flags = CLONE_NEWUSER,
				    .exit_signal = SIGCHLD};
	long r = syscall(SYS_clone3, &ca, sizeof(ca));
	if (r == 0)
		_exit(0);
	if (r > 0) {
		waitpid((pid_t)r, NULL, 0);
		kv("CLONE3_USER", "OK");
	} else {
		kv("CLONE3_USER", "%s", errname(errno));
	}
	struct clone_args_min c0 = {.exit_signal = SIGCHLD};
	r = syscall(SYS_clone3, &c0, sizeof(c0));
	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid((pid_t)r, NULL, 0);
	kv("CLONE3_PLAIN", "%s", r >= 0 ? "OK" : errname(errno));
	char buf[64];
	if (read_file("/proc/sys/user/max_user_namespaces", buf, sizeof(buf)) >= 0)
		kv("MAX_USER_NAMESPACES", "%ld", strtol(buf, NULL, 10));
	return 0;
}

static int check_setns(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	static const char *const pids[] = {"self", "1"};
	static const char *const kinds[] = {"user", "mnt", "pid", "net", "ipc",
					    "uts", "cgroup", "time",
					    "pid_for_children",
					    "time_for_children"};
	int tried = 0;
	for (size_t p = 0; p < 2; p++) {
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
			char path[96], key[128];
			snprintf(path, sizeof(path), "/proc/%s/ns/%s", pids[p],
				 kinds[k]);
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			snprintf(key, sizeof(key), "OPEN:%s", path);
			if (fd < 0) {
				kv(key, "%s", errname(errno));
				continue;
			}
			kv(key, "OK");
			snprintf(key, sizeof(key), "SETNS:%s", path);
			/* in a child: a success must not move the probe */
			pid_t c = fork();
			if (c == 0)
				_exit(setns(fd, 0) == 0 ? 0 : 10 + (errno & 0x7f));
			int st;
			waitpid(c, &st, 0);
			kv(key, "%s", WEXITSTATUS(st) == 0
					      ? "OK"
					      : errname(WEXITSTATUS(st) - 10));
			tried++;
			close(fd);
		}
	}
	kv("SETNS_TRIED", "%d", tried);
	return 0;
}

/* ---- namespaces and visibility ------------------------------------------- */

static int is_pid_name(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

static int check_pidns(int argc, char **argv)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	char list[4096] = "";
	int n = 0, maxpid = 0;
	while (d && (e = readdir(d))) {
		if (!is_pid_name(e->d_name))
			continue;
		n++;
		if (atoi(e->d_name) > maxpid)
			maxpid = atoi(e->d_name);
		if (strlen(list) + strlen(e->d_name) + 2 < sizeof(list)) {
			if (*list)
				strcat(list, ",");
			strcat(list, e->d_name);
		}
	}
	if (d)
		closedir(d);
	kv("PIDS", "%s", list);
	kv("NPIDS", "%d", n);
	kv("MAXPID", "%d", maxpid);
	kv("PPID", "%d", (int)getppid());
	kv("SELF", "%d", (int)getpid());
	char buf[256];
	if (read_file("/proc/1/comm", buf, sizeof(buf)) >= 0) {
		buf[strcspn(buf, "\n")] = '\0';
		kv("PID1_COMM", "%s", buf);
	} else {
		kv("PID1_COMM", "%s", errname(errno));
	}
	char v[256];
	if (status_field("self", "NSpid", v, sizeof(v)) == 0)
		kv("NSPID", "%s", v);
	for (int i = 2; i < argc; i++) {
		char key[64];
		snprintf(key, sizeof(key), "KILL0_%s", argv[i]);
		res(key, kill(atoi(argv[i]), 0));
	}
	return 0;
}

static int check_ptrace(int argc, char **argv)
{
	/* a child of ours: the easiest possible target */
	pid_t child = fork();
	if (child == 0) {
		for (;;)
			pause();
	}
	res("PTRACE_ATTACH_CHILD",
	    syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, child, 0, 0));
	res("PTRACE_SEIZE_CHILD",
	    syscall(SYS_ptrace, 0x4206 /* PTRACE_SEIZE */, child, 0, 0));
	pid_t t = fork();
	if (t == 0)
		_exit(syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0) == 0
			      ? 0
			      : 10 + (errno & 0x7f));
	int st;
	waitpid(t, &st, 0);
	kv("PTRACE_TRACEME", "%s", WEXITSTATUS(st) == 0
					   ? "OK"
					   : errname(WEXITSTATUS(st) - 10));
	res("PTRACE_ATTACH_INIT", syscall(SYS_ptrace, 16, 1, 0, 0));
	for (int i = 2; i < argc; i++) {
		char key[64];
		snprintf(key, sizeof(key), "PTRACE_ATTACH_%s", argv[i]);
		res(key, syscall(SYS_ptrace, 16, atoi(argv[i]), 0, 0));
	}
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	return 0;
}

/* process_vm_readv/writev and ptrace against the given pids */
static int check_pvw(int argc, char **argv)
{
	char local[8] = "sandbox", remote_buf[8];
	struct iovec l = {local, sizeof(local)};
	struct iovec r = {remote_buf, sizeof(remote_buf)};
	/* our own memory: allowed by the kernel, so EPERM here is policy */
	res("PVW_SELF", syscall(SYS_process_vm_writev, getpid(), &l, 1, &r, 1, 0));
	res("PVR_SELF", syscall(SYS_process_vm_readv, getpid(), &l, 1, &r, 1, 0));
	for (int i = 2; i < argc; i++) {
		char key[64];
		pid_t pid = atoi(argv[i]);
		struct iovec rr = {(void *)0x10000, 8};
		snprintf(key, sizeof(key), "PVW_%s", argv[i]);
		res(key, syscall(SYS_process_vm_writev, pid, &l, 1, &rr, 1, 0));
		snprintf(key, sizeof(key), "PVR_%s", argv[i]);
		res(key, syscall(SYS_process_vm_readv, pid, &l, 1, &rr, 1, 0));
		snprintf(key, sizeof(key), "PTRACE_%s", argv[i]);
		res(key, syscall(SYS_ptrace, 16, pid, 0, 0));
		snprintf(key, sizeof(key), "KCMP_%s", argv[i]);
		res(key, syscall(SYS_kcmp, getpid(), pid, 0 /* KCMP_FILE */, 0, 0));
	}
	return 0;
}

static int check_uts(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	char h[256] = "";
	gethostname(h, sizeof(h));
	kv("HOSTNAME", "%s", h);
	res("SETHOSTNAME", sethostname(h, strlen(h)));
	char dn[256] = "";
	getdomainname(dn, sizeof(dn));
	kv("DOMAINNAME", "%s", dn);
	res("SETDOMAINNAME", setdomainname(dn, strlen(dn)));
	return 0;
}

static int check_ipc_create(int argc, char **argv)
{
	key_t key = argc > 2 ? (key_t)strtol(argv[2], NULL, 0) : 0x5bd1;
	int shm = shmget(key, 4096, IPC_CREAT | 0600);
	res("SHMGET_CREATE", shm);
	kv("SHMID", "%d", shm);
	int msg = msgget(key, IPC_CREAT | 0600);
	res("MSGGET_CREATE", msg);
	int sem = semget(key, 1, IPC_CREAT | 0600);
	res("SEMGET_CREATE", sem);
	return 0;
}

static int count_lines(const char *path)
{
	char buf[65536];
	if (read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	int n = 0;
	for (char *p = buf; *p; p++)
		n += *p == '\n';
	return n;
}

static int check_ipc_lookup(int argc, char **argv)
{
	key_t key = argc > 2 ? (key_t)strtol(argv[2], NULL, 0) : 0x5bd1;
	res("SHMGET_LOOKUP", shmget(key, 0, 0));
	res("MSGGET_LOOKUP", msgget(key, 0));
	res("SEMGET_LOOKUP", semget(key, 0, 0));
	/* header line only when empty */
	kv("SYSVIPC_SHM", "%d", count_lines("/proc/sysvipc/shm") - 1);
	kv("SYSVIPC_MSG", "%d", count_lines("/proc/sysvipc/msg") - 1);
	kv("SYSVIPC_SEM", "%d", count_lines("/proc/sysvipc/sem") - 1);
	return 0;
}

static int check_cgroupns(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	char buf[4096];
	if (read_file("/proc/self/cgroup", buf, sizeof(buf)) >= 0) {
		int i = 0;
		for (char *line = strtok(buf, "\n"); line;
		     line = strtok(NULL, "\n")) {
			char key[32];
			snprintf(key, sizeof(key), "CGROUP_%d", i++);
			kv(key, "%s", line);
		}
		kv("CGROUP_LINES", "%d", i);
	}
	struct stat st;
	res("STAT_SYS", stat("/sys", &st));
	res("STAT_SYS_FS_CGROUP", stat("/sys/fs/cgroup", &st));
	res("MKDIR_SYS", mkdir("/sys", 0755));
	return 0;
}

static int abstract_addr(const char *name, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	size_t l = strlen(name);
	if (l > sizeof(a->sun_path) - 2)
		l = sizeof(a->sun_path) - 2;
	memcpy(a->sun_path + 1, name, l);
	return (int)(offsetof(struct sockaddr_un, sun_path) + 1 + l);
}

/* Binds @NAME and answers connections with "pong" for SECONDS. */
static int check_abstract_listen(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	struct sockaddr_un a;
	int len = abstract_addr(argv[2], &a);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (res("BIND", bind(s, (struct sockaddr *)&a, (socklen_t)len)) < 0)
		return 1;
	listen(s, 16);
	alarm((unsigned)atoi(argv[3]));
	for (;;) {
		int c = accept(s, NULL, NULL);
		if (c >= 0) {
			if (write(c, "pong", 4) < 0) {
			}
			close(c);
		}
	}
	return 0;
}

static int check_abstract_connect(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	struct sockaddr_un a;
	int len = abstract_addr(argv[2], &a);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (res("CONNECT", connect(s, (struct sockaddr *)&a, (socklen_t)len)) == 0) {
		char b[8] = "";
		ssize_t n = read(s, b, 4);
		kv("REPLY", "%.*s", n > 0 ? (int)n : 0, b);
	}
	return 0;
}

/* ---- filesystem ------------------------------------------------------------ */

/* Tries to create/truncate and write each path; never unlinks anything. */
static int check_write(int argc, char **argv)
{
	for (int i = 2; i < argc; i++) {
		char key[512];
		snprintf(key, sizeof(key), "WRITE:%s", argv[i]);
		int fd = open(argv[i], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0) {
			kv(key, "%s", errname(errno));
			continue;
		}
		ssize_t n = write(fd, "x\n", 2);
		kv(key, "%s", n == 2 ? "OK" : errname(errno));
		close(fd);
	}
	return 0;
}

static int check_read(int argc, char **argv)
{
	for (int i = 2; i < argc; i++) {
		char key[512];
		snprintf(key, sizeof(key), "READ:%s", argv[i]);
		int fd = open(argv[i], O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0) {
			kv(key, "%s", errname(errno));
			continue;
		}
		char buf[4096];
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0)
			kv(key, "%s", errname(errno));
		else
			kv(key, "%zd", n);
		struct stat st;
		fstat(fd, &st);
		snprintf(key, sizeof(key), "STAT:%s", argv[i]);
		kv(key, "%s:%u:%u", S_ISCHR(st.st_mode) ? "chr"
				    : S_ISREG(st.st_mode) ? "reg"
				    : S_ISDIR(st.st_mode) ? "dir"
							  : "other",
		   major(st.st_rdev), minor(st.st_rdev));
		close(fd);
	}
	return 0;
}

struct mount_attr_min {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

static int check_mountcalls(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	mkdir("/tmp/probe-mnt", 0755);
	res("MOUNT_TMPFS", mount("tmpfs", "/tmp/probe-mnt", "tmpfs", 0, NULL));
	res("MOUNT_PROC", mount("proc", "/tmp/probe-mnt", "proc", 0, NULL));
	res("MOUNT_BIND", mount("/", "/tmp/probe-mnt", NULL, MS_BIND, NULL));
	res("MOUNT_REMOUNT_RW_ROOT",
	    mount(NULL, "/", NULL, MS_REMOUNT, NULL));
	res("MOUNT_REMOUNT_RW_DEV",
	    mount(NULL, "/dev", NULL, MS_REMOUNT | MS_BIND, NULL));
	res("MOUNT_REMOUNT_RW_PROC_SYS",
	    mount(NULL, "/proc/sys", NULL, MS_REMOUNT | MS_BIND, NULL));
	res("MOUNT_MAKE_SHARED", mount(NULL, "/", NULL, MS_SHARED | MS_REC, NULL));
	res("UMOUNT2_PROC_KEYS", umount2("/proc/keys", MNT_DETACH));
	res("UMOUNT2_PROC_SYS", umount2("/proc/sys", MNT_DETACH));
	res("UMOUNT2_DEV", umount2("/dev", MNT_DETACH));
	res("PIVOT_ROOT", syscall(SYS_pivot_root, "/tmp", "/tmp/probe-mnt"));
	pid_t p = fork();
	if (p == 0)
		_exit(chroot("/tmp") == 0 ? 0 : 10 + (errno & 0x7f));
	int st;
	waitpid(p, &st, 0);
	kv("CHROOT", "%s", WEXITSTATUS(st) == 0 ? "OK"
						: errname(WEXITSTATUS(st) - 10));
	res("FSOPEN", syscall(SYS_fsopen, "tmpfs", 0));
	res("FSCONFIG", syscall(SYS_fsconfig, -1, 6 /* CMD_CREATE */, NULL, NULL, 0));
	res("FSMOUNT", syscall(SYS_fsmount, -1, 0, 0));
	res("FSPICK", syscall(SYS_fspick, AT_FDCWD, "/", 0));
	res("OPEN_TREE_CLONE",
	    syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */));
	res("OPEN_TREE", syscall(SYS_open_tree, AT_FDCWD, "/", 0));
	res("MOVE_MOUNT", syscall(SYS_move_mount, -1, "", AT_FDCWD,
				  "/tmp/probe-mnt", 4 /* F_EMPTY_PATH */));
	struct mount_attr_min ma = {.attr_clr = 1 /* MOUNT_ATTR_RDONLY */};
	res("MOUNT_SETATTR", syscall(SYS_mount_setattr, AT_FDCWD, "/dev", 0,
				     &ma, sizeof(ma)));
	res("OPEN_TREE_ATTR_CLONE",
	    syscall(SYS_open_tree_attr, AT_FDCWD, "/", 1, NULL, 0));
	rmdir("/tmp/probe-mnt");
	return 0;
}

static int same_file(const char *a, const char *b)
{
	struct stat x, y;
	if (stat(a, &x) < 0 || stat(b, &y) < 0)
		return 0;
	return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

static int check_oldroot(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	static const char *const names[] = {"/oldroot", "/newroot", "/.oldroot",
					    "/old_root", "/.pivot_root",
					    "/host", "/rootfs", NULL};
	struct stat st;
	for (const char *const *n = names; *n; n++) {
		char key[64];
		snprintf(key, sizeof(key), "EXISTS:%s", *n);
		kv(key, "%s", lstat(*n, &st) == 0 ? "yes" : "no");
	}
	kv("DOTDOT_IS_ROOT", "%s", same_file("/..", "/") ? "yes" : "no");
	kv("DOTDOT_DEEP_IS_ROOT", "%s",
	   same_file("/../../../../../../..", "/") ? "yes" : "no");
	if (chdir("/") == 0) {
		for (int i = 0; i < 20; i++)
			if (chdir("..") < 0)
				break;
		char cwd[4096] = "";
		if (getcwd(cwd, sizeof(cwd)))
			kv("CWD_AFTER_CHDIR_UP", "%s", cwd);
		kv("CWD_AFTER_CHDIR_UP_IS_ROOT", "%s",
		   same_file(".", "/") ? "yes" : "no");
	}
	char l[4096];
	ssize_t n = readlink("/proc/self/root", l, sizeof(l) - 1);
	kv("PROC_SELF_ROOT", "%s", n >= 0 ? (l[n] = '\0', l) : errname(errno));
	kv("PROC_SELF_ROOT_IS_ROOT", "%s",
	   same_file("/proc/self/root/", "/") ? "yes" : "no");
	n = readlink("/proc/1/root", l, sizeof(l) - 1);
	kv("PROC1_ROOT", "%s", n >= 0 ? (l[n] = '\0', l) : errname(errno));
	DIR *d = opendir("/proc/1/root/");
	kv("PROC1_ROOT_OPENDIR", "%s", d ? "OK" : errname(errno));
	if (d) {
		kv("PROC1_ROOT_IS_ROOT", "%s",
		   same_file("/proc/1/root/", "/") ? "yes" : "no");
		closedir(d);
	}
	n = readlink("/proc/1/cwd", l, sizeof(l) - 1);
	kv("PROC1_CWD", "%s", n >= 0 ? (l[n] = '\0', l) : errname(errno));
	return 0;
}

static int check_fds(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	char l[4096];
	ssize_t n = readlink("/proc/self/cwd", l, sizeof(l) - 1);
	kv("CWD", "%s", n >= 0 ? (l[n] = '\0', l) : errname(errno));
	char cwd[4096];
	kv("GETCWD", "%s", getcwd(cwd, sizeof(cwd)) ? cwd : errname(errno));
	/* A cwd outside the root (CVE-2024-21626) walks up to the real root,
	 * not to ours: climb from the cwd and see where it ends. */
	int here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < 256; i++)
		if (chdir("..") < 0)
			break;
	kv("CWD_UNDER_ROOT", "%s", same_file(".", "/") ? "yes" : "no");
	if (here >= 0) {
		if (fchdir(here) < 0) {
		}
		close(here);
	}
	DIR *d = opendir("/proc/self/fd");
	int self = d ? dirfd(d) : -1, nfds = 0;
	char list[1024] = "";
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!is_pid_name(e->d_name) || atoi(e->d_name) == self)
			continue;
		char p[300], key[300];
		snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
		n = readlink(p, l, sizeof(l) - 1);
		snprintf(key, sizeof(key), "FD_%s", e->d_name);
		kv(key, "%s", n >= 0 ? (l[n] = '\0', l) : errname(errno));
		nfds++;
		if (strlen(list) + strlen(e->d_name) + 2 < sizeof(list)) {
			if (*list)
				strcat(list, ",");
			strcat(list, e->d_name);
		}
	}
	if (d)
		closedir(d);
	kv("FDS", "%s", list);
	kv("NFDS", "%d", nfds);
	return 0;
}

static int check_handle(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	/* FILEID_INO32_GEN: inode 2 (the root of most filesystems), gen 0 */
	struct {
		unsigned int handle_bytes;
		int handle_type;
		unsigned char f_handle[8];
	} h = {.handle_bytes = 8, .handle_type = 1};
	uint32_t ino = 2, gen = 0;
	memcpy(h.f_handle, &ino, 4);
	memcpy(h.f_handle + 4, &gen, 4);
	int mfd = open("/", O_RDONLY | O_DIRECTORY);
	res("OPEN_BY_HANDLE_AT", syscall(SYS_open_by_handle_at, mfd, &h, O_RDONLY));
	int mfd2 = open("/usr", O_RDONLY | O_DIRECTORY);
	res("OPEN_BY_HANDLE_AT_USR",
	    syscall(SYS_open_by_handle_at, mfd2, &h, O_RDONLY));
	struct {
		unsigned int handle_bytes;
		int handle_type;
		unsigned char f_handle[128];
	} h2 = {.handle_bytes = 128};
	int mount_id;
	res("NAME_TO_HANDLE_AT",
	    syscall(SYS_name_to_handle_at, AT_FDCWD, "/usr/bin/env", &h2,
		    &mount_id, 0));
	return 0;
}

/* /dev contents, mknod attempts (in /workspace, never on the host). */
static int check_dev(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	DIR *d = opendir("/dev");
	struct dirent *e;
	char list[2048] = "";
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (strlen(list) + strlen(e->d_name) + 2 < sizeof(list)) {
			if (*list)
				strcat(list, ",");
			strcat(list, e->d_name);
		}
		char p[300], key[300];
		struct stat st;
		snprintf(p, sizeof(p), "/dev/%s", e->d_name);
		if (lstat(p, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) {
			snprintf(key, sizeof(key), "NODE:%s", e->d_name);
			kv(key, "%s:%u:%u", S_ISCHR(st.st_mode) ? "c" : "b",
			   major(st.st_rdev), minor(st.st_rdev));
		}
	}
	if (d)
		closedir(d);
	kv("DEV", "%s", list);
	int blocks = 0;
	d = opendir("/dev");
	while (d && (e = readdir(d))) {
		char p[300];
		struct stat st;
		snprintf(p, sizeof(p), "/dev/%s", e->d_name);
		if (lstat(p, &st) == 0 && S_ISBLK(st.st_mode))
			blocks++;
	}
	if (d)
		closedir(d);
	kv("BLOCK_DEVICES", "%d", blocks);
	const char *dir = "/workspace";
	char p[256];
	snprintf(p, sizeof(p), "%s/.probe-mem", dir);
	res("MKNOD_CHR_MEM", mknod(p, S_IFCHR | 0600, makedev(1, 1)));
	unlink(p);
	snprintf(p, sizeof(p), "%s/.probe-sda", dir);
	res("MKNOD_BLK_SDA", mknod(p, S_IFBLK | 0600, makedev(8, 0)));
	unlink(p);
	snprintf(p, sizeof(p), "%s/.probe-null", dir);
	res("MKNOD_CHR_NULL", mknod(p, S_IFCHR | 0666, makedev(1, 3)));
	unlink(p);
	res("MKNOD_IN_DEV", mknod("/dev/probe-null", S_IFCHR | 0666, makedev(1, 3)));
	snprintf(p, sizeof(p), "%s/.probe-fifo", dir);
	res("MKNOD_FIFO", mknod(p, S_IFIFO | 0600, 0)); /* control: allowed */
	unlink(p);
	static const char *const bad[] = {"/dev/mem", "/dev/kmem", "/dev/port",
					  "/dev/kmsg", "/dev/kvm", "/dev/sda",
					  "/dev/vda", "/dev/nvme0n1",
					  "/dev/console", "/dev/tty0",
					  "/dev/fuse", "/dev/net/tun",
					  "/dev/vsock", "/dev/vhost-vsock",
					  NULL};
	for (const char *const *b = bad; *b; b++) {
		char key[64];
		snprintf(key, sizeof(key), "OPEN:%s", *b);
		int fd = open(*b, O_RDONLY | O_NONBLOCK);
		kv(key, "%s", fd >= 0 ? "OK" : errname(errno));
		if (fd >= 0)
			close(fd);
	}
	return 0;
}

/* TIOCSTI on a pty that is our controlling terminal: the one case the
 * kernel allows without CAP_SYS_ADMIN, so a refusal here is the policy. */
static int check_tty(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	int fd = open("/dev/tty", O_RDWR | O_NOCTTY);
	kv("OPEN_DEV_TTY", "%s", fd >= 0 ? "OK" : errname(errno));
	if (fd >= 0)
		close(fd);
	char stat[1024];
	if (read_file("/proc/self/stat", stat, sizeof(stat)) > 0) {
		char *p = strrchr(stat, ')');
		int tty = -1;
		if (p)
			sscanf(p + 2, "%*c %*d %*d %*d %d", &tty);
		kv("TTY_NR", "%d", tty);
	}
	kv("SID_IS_SELF", "%s", getsid(0) == getpid() ? "yes" : "no");
	res("TIOCSTI_STDIN", ioctl(0, TIOCSTI, "x"));

	int pipefd[2];
	if (pipe(pipefd) < 0)
		return 1;
	pid_t p = fork();
	if (p == 0) {
		close(pipefd[0]);
		FILE *out = fdopen(pipefd[1], "w");
		setsid();
		int m = posix_openpt(O_RDWR | O_NOCTTY);
		if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) {
			fprintf(out, "OPENPT=%s\n", errname(errno));
			fclose(out);
			_exit(0);
		}
		fprintf(out, "OPENPT=OK\n");
		int s = open(ptsname(m), O_RDWR); /* becomes our ctty */
		fprintf(out, "OPEN_PTS=%s\n", s >= 0 ? "OK" : errname(errno));
		if (s < 0) {
			fclose(out);
			_exit(0);
		}
		ioctl(s, TIOCSCTTY, 0);
		char c = 'x';
		long r = syscall(SYS_ioctl, s, (unsigned long)TIOCSTI, &c);
		fprintf(out, "TIOCSTI=%s\n", r == 0 ? "OK" : errname(errno));
		r = syscall(SYS_ioctl, s, (unsigned long)TIOCSTI | (1UL << 32), &c);
		fprintf(out, "TIOCSTI_HIGHBITS=%s\n", r == 0 ? "OK" : errname(errno));
		r = syscall(SYS_ioctl, s, (unsigned long)TIOCSTI | 0xffffffff00000000UL,
			    &c);
		fprintf(out, "TIOCSTI_ALLHIGH=%s\n", r == 0 ? "OK" : errname(errno));
		char sub = 0; /* TIOCL_* 0: no such subcode, EINVAL if allowed */
		r = syscall(SYS_ioctl, s, (unsigned long)TIOCLINUX, &sub);
		fprintf(out, "TIOCLINUX=%s\n", r == 0 ? "OK" : errname(errno));
		/* control: an ordinary tty ioctl still works */
		struct winsize ws;
		r = ioctl(s, TIOCGWINSZ, &ws);
		fprintf(out, "TIOCGWINSZ=%s\n", r == 0 ? "OK" : errname(errno));
		fclose(out);
		_exit(0);
	}
	close(pipefd[1]);
	char buf[1024];
	ssize_t n;
	while ((n = read(pipefd[0], buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stdout);
	fflush(stdout);
	waitpid(p, NULL, 0);
	return 0;
}

/* ---- syscall surface --------------------------------------------------------- */

/* The sweep never runs a syscall. A second seccomp filter of our own (legal
 * under no_new_privs) answers SECCOMP_RET_USER_NOTIF for every call whose
 * sixth argument is MAGIC; the supervisor (our parent) then replies EDOM
 * without executing it. The kernel takes the strictest answer of all the
 * filters: ERRNO (sandboxd's policy) outranks USER_NOTIF, so a call the
 * policy refuses comes back with the policy's errno and never reaches the
 * supervisor, and a call the policy allows is seen by the supervisor. So
 * even exit, reboot or kill can be swept safely, and "blocked" means
 * exactly "refused by a seccomp filter other than ours". */
#define SWEEP_MAGIC 0x5b0c5b0c5b0c5b0cULL

static int send_fd(int sock, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	char dummy = 'f';
	struct iovec iov = {&dummy, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
			   .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return (int)sendmsg(sock, &m, 0);
}

static int recv_fd(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	char dummy;
	struct iovec iov = {&dummy, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
			   .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	if (recvmsg(sock, &m, 0) <= 0)
		return -1;
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		return -1;
	int fd;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* uretprobe (335) and uprobe (336) bypass seccomp by design (the kernel
 * runs them unfiltered, since 6.11/6.16) and raise SIGILL outside a uprobe
 * trampoline: they cannot be classified, only skipped. */
static int sweep_skip(int nr)
{
	return nr == 335 || nr == 336;
}

static int check_sweep(int argc, char **argv)
{
	int lo = argc > 2 ? atoi(argv[2]) : 0;
	int hi = argc > 3 ? atoi(argv[3]) : 470;
	if (lo < 0 || hi < lo || hi > 4096)
		return 2;
	int n = hi - lo + 1;
	/* per nr: errno seen by the caller; notified by the supervisor */
	int *seen = mmap(NULL, (size_t)n * 2 * sizeof(int),
			 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (seen == MAP_FAILED)
		return 1;
	int *notified = seen + n;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 1;
	pid_t child = fork();
	if (child == 0) {
		close(sv[0]);
		struct sock_filter f[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
				 offsetof(struct seccomp_data, arch)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 5),
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
				 offsetof(struct seccomp_data, args[5])),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
				 (uint32_t)(SWEEP_MAGIC & 0xffffffff), 0, 3),
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
				 offsetof(struct seccomp_data, args[5]) + 4),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
				 (uint32_t)(SWEEP_MAGIC >> 32), 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		int lfd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
				       SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
		if (lfd < 0) {
			dprintf(sv[1], "%d", errno);
			_exit(3);
		}
		send_fd(sv[1], lfd);
		close(lfd);
		for (int i = 0; i < n; i++) {
			if (sweep_skip(lo + i))
				continue;
			errno = 0;
			long r = syscall(lo + i, 0L, 0L, 0L, 0L, 0L,
					 (long)SWEEP_MAGIC);
			seen[i] = r < 0 ? errno : 0;
		}
		/* r9 (the sixth argument) still holds the magic, and exit_group
		 * does not set it: clear it, or our own exit is "notified" */
		syscall(SYS_exit_group, 0L, 0L, 0L, 0L, 0L, 0L);
		_exit(0);
	}
	close(sv[1]);
	int lfd = recv_fd(sv[0]);
	if (lfd < 0) {
		char buf[32] = "";
		if (read(sv[0], buf, sizeof(buf) - 1) < 0) {
		}
		kv("SWEEP", "NO_LISTENER:%s", errname(atoi(buf)));
		waitpid(child, NULL, 0);
		return 1;
	}
	struct seccomp_notif_sizes sz;
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) < 0)
		return 1;
	struct seccomp_notif *req = calloc(1, sz.seccomp_notif);
	struct seccomp_notif_resp *resp = calloc(1, sz.seccomp_notif_resp);
	for (;;) {
		struct pollfd pfd = {lfd, POLLIN, 0};
		int pr = poll(&pfd, 1, 5000);
		if (pr <= 0 || (pfd.revents & (POLLHUP | POLLERR)))
			break;
		memset(req, 0, sz.seccomp_notif);
		if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) {
			if (errno == EINTR || errno == ENOENT)
				continue;
			break;
		}
		int nr = req->data.nr;
		if (nr >= lo && nr <= hi)
			notified[nr - lo] = 1;
		memset(resp, 0, sz.seccomp_notif_resp);
		resp->id = req->id;
		resp->error = -EDOM; /* never executed */
		ioctl(lfd, SECCOMP_IOCTL_NOTIF_SEND, resp);
	}
	int st;
	waitpid(child, &st, 0);
	kv("SWEEP_CHILD", "%s", status_str(st));
	int blocked = 0;
	for (int i = 0; i < n; i++) {
		char key[32];
		snprintf(key, sizeof(key), "SYS_%d", lo + i);
		if (sweep_skip(lo + i))
			kv(key, "SKIPPED");
		else if (notified[i])
			kv(key, "ALLOWED");
		else {
			kv(key, "BLOCKED:%s", errname(seen[i]));
			blocked++;
		}
	}
	kv("SWEEP_RANGE", "%d-%d", lo, hi);
	kv("SWEEP_BLOCKED", "%d", blocked);
	return 0;
}

/* Calls the policy names in spot checks. Args are invalid wherever an
 * allowed call could have an effect. */
static int check_spot(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	res("KEYCTL", syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */,
			       -3 /* KEY_SPEC_SESSION_KEYRING */, 0));
	res("ADD_KEY", syscall(SYS_add_key, "user", "sbx-probe", "x", 1,
				-2 /* KEY_SPEC_PROCESS_KEYRING */));
	res("REQUEST_KEY", syscall(SYS_request_key, "user", "sbx-probe", NULL, 0));
	res("BPF", syscall(SYS_bpf, 0 /* MAP_CREATE */, NULL, 0));
	res("PERF_EVENT_OPEN", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
	long r = syscall(SYS_userfaultfd, 0);
	res("USERFAULTFD", r);
	if (r >= 0)
		close((int)r);
	res("IO_URING_SETUP", syscall(SYS_io_uring_setup, 1, NULL));
	res("IO_URING_ENTER", syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0));
	res("IO_URING_REGISTER", syscall(SYS_io_uring_register, -1, 0, NULL, 0));
	/* an unknown KEXEC_ARCH: EINVAL if allowed (flags 0 would unload) */
	res("KEXEC_LOAD", syscall(SYS_kexec_load, 0, 0, NULL, 0x7fff0000UL));
	res("KEXEC_FILE_LOAD", syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0));
	res("INIT_MODULE", syscall(SYS_init_module, NULL, 0, ""));
	res("FINIT_MODULE", syscall(SYS_finit_module, -1, "", 0));
	res("DELETE_MODULE", syscall(SYS_delete_module, "sbx_none", O_NONBLOCK));
	res("ACCT", syscall(SYS_acct, (char *)1)); /* NULL would turn it off */
	res("SWAPON", syscall(SYS_swapon, NULL, 0));
	res("SWAPOFF", syscall(SYS_swapoff, NULL));
	res("REBOOT", syscall(SYS_reboot, 0, 0, 0, NULL)); /* bad magic */
	res("SYSLOG", syscall(SYS_syslog, 10 /* SIZE_BUFFER */, NULL, 0));
	res("IOPL", syscall(SYS_iopl, 0));
	res("IOPERM", syscall(SYS_ioperm, 0, 0, 0));
	res("QUOTACTL", syscall(SYS_quotactl, 0, NULL, 0, NULL));
	res("SETTIMEOFDAY", syscall(SYS_settimeofday, NULL, NULL));
	res("CLOCK_SETTIME", syscall(SYS_clock_settime, 0, NULL));
	r = syscall(SYS_fanotify_init, 0, 0);
	res("FANOTIFY_INIT", r);
	if (r >= 0)
		close((int)r);
	/* only without a controlling terminal: it would hang ours up */
	int ctty = open("/dev/tty", O_RDONLY | O_NOCTTY);
	if (ctty >= 0)
		close(ctty);
	else
		res("VHANGUP", syscall(SYS_vhangup));
	static const struct {
		const char *name;
		long fam;
		int type;
	} fams[] = {{"VSOCK", AF_VSOCK, SOCK_STREAM},
		    {"ALG", AF_ALG, SOCK_SEQPACKET},
		    {"KEY", AF_KEY, SOCK_RAW},
		    {"UNIX", AF_UNIX, SOCK_STREAM}, /* control */
		    {"INET", AF_INET, SOCK_STREAM}};  /* control */
	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
		char key[64];
		snprintf(key, sizeof(key), "SOCKET_%s", fams[i].name);
		r = syscall(SYS_socket, fams[i].fam, (long)fams[i].type, 0L);
		res(key, r);
		if (r >= 0)
			close((int)r);
		/* the kernel reads family as an int: bits 32-63 are ignored
		 * by socket(2), so a filter must ignore them too */
		snprintf(key, sizeof(key), "SOCKET_%s_HIGHBITS", fams[i].name);
		r = syscall(SYS_socket, fams[i].fam | (1L << 32),
			    (long)fams[i].type, 0L);
		res(key, r);
		if (r >= 0)
			close((int)r);
	}
	return 0;
}

/* Minimal i386 ELF: write(1, "i386\n", 5); exit(42). */
static size_t make_elf32(unsigned char *b)
{
	static const unsigned char code[] = {
		0xb8, 4, 0, 0, 0,		/* mov eax, 4 (write) */
		0xbb, 1, 0, 0, 0,		/* mov ebx, 1 */
		0xb9, 0, 0, 0, 0,		/* mov ecx, msg (patched) */
		0xba, 5, 0, 0, 0,		/* mov edx, 5 */
		0xcd, 0x80,			/* int 0x80 */
		0xb8, 1, 0, 0, 0,		/* mov eax, 1 (exit) */
		0xbb, 42, 0, 0, 0,		/* mov ebx, 42 */
		0xcd, 0x80,			/* int 0x80 */
		'i', '3', '8', '6', '\n'};
	const uint32_t base = 0x08048000, hdr = 52 + 32;
	memset(b, 0, hdr);
	memcpy(b, "\x7f" "ELF", 4);
	b[4] = 1; /* 32-bit */
	b[5] = 1; /* little endian */
	b[6] = 1;
	uint16_t u16;
	uint32_t u32;
#define P16(off, v) (u16 = (uint16_t)(v), memcpy(b + (off), &u16, 2))
#define P32(off, v) (u32 = (uint32_t)(v), memcpy(b + (off), &u32, 4))
	P16(16, 2);	/* ET_EXEC */
	P16(18, 3);	/* EM_386 */
	P32(20, 1);
	P32(24, base + hdr); /* entry */
	P32(28, 52);	/* phoff */
	P16(40, 52);	/* ehsize */
	P16(42, 32);	/* phentsize */
	P16(44, 1);	/* phnum */
	P32(52 + 0, 1);	/* PT_LOAD */
	P32(52 + 4, 0);
	P32(52 + 8, base);
	P32(52 + 12, base);
	P32(52 + 16, hdr + sizeof(code));
	P32(52 + 20, hdr + sizeof(code));
	P32(52 + 24, 5); /* R+X */
	P32(52 + 28, 0x1000);
	memcpy(b + hdr, code, sizeof(code));
	P32(hdr + 11, base + hdr + sizeof(code) - 5);
#undef P16
#undef P32
	return hdr + sizeof(code);
}

static void run_child(const char *key, void (*fn)(void))
{
	pid_t p = fork();
	if (p == 0) {
		fn();
		_exit(99);
	}
	int st;
	waitpid(p, &st, 0);
	kv(key, "%s", status_str(st));
}

static void do_int80_getpid(void)
{
	long r;
	__asm__ volatile("int $0x80" : "=a"(r) : "a"(20) : "memory");
	_exit(r > 0 ? 0 : 1);
}

static void do_int80_socketcall(void)
{
	long r;
	static unsigned int args[3] = {AF_INET, SOCK_STREAM, 0};
	unsigned int p = (unsigned int)(uintptr_t)args; /* static: below 4G */
	__asm__ volatile("int $0x80"
			 : "=a"(r)
			 : "a"(102), "b"(1 /* SYS_SOCKET */), "c"(p)
			 : "memory");
	_exit(r >= 0 ? 0 : 1);
}

static void do_x32_getpid(void)
{
	long r = syscall(0x40000000 | SYS_getpid);
	_exit(r > 0 ? 0 : 1);
}

static int check_i386(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	run_child("INT80_GETPID", do_int80_getpid);
	run_child("INT80_SOCKETCALL", do_int80_socketcall);
	run_child("X32_GETPID", do_x32_getpid);
	/* the -m32 static binary, written where we may write */
	unsigned char elf[256];
	size_t len = make_elf32(elf);
	const char *path = argc > 2 ? argv[2] : "/workspace/.probe-i386";
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (fd < 0 || write(fd, elf, len) != (ssize_t)len) {
		kv("ELF32_WRITE", "%s", errname(errno));
		return 0;
	}
	close(fd);
	int pfd[2];
	if (pipe(pfd) < 0)
		return 1;
	pid_t p = fork();
	if (p == 0) {
		close(pfd[0]);
		dup2(pfd[1], 1);
		execl(path, path, NULL);
		_exit(100 + (errno & 0x7f));
	}
	close(pfd[1]);
	char out[64] = "";
	ssize_t n = read(pfd[0], out, sizeof(out) - 1);
	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	int st;
	waitpid(p, &st, 0);
	kv("ELF32_EXEC", "%s", status_str(st));
	kv("ELF32_OUTPUT", "%s", out);
	unlink(path);
	return 0;
}

/* The main process itself makes a call of another ABI: with the policy it
 * is killed by SIGSYS, and the daemon should say so. An x32 call (getpid
 * with bit 30), not int 0x80: a kernel without IA32 emulation, or a guest
 * that does not route int 0x80, answers that with SIGSEGV before seccomp
 * sees it, while every x86_64 kernel passes x32 numbers to seccomp. */
static int check_sigsys(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	kv("BEFORE", "1");
	long r = syscall(0x40000000L | SYS_getpid);
	kv("SURVIVED", "%ld", r);
	return 0;
}

/* Device events: a NETLINK_KOBJECT_UEVENT socket would receive the host's
 * uevents (other sandboxes' store mounts among them). NETLINK_ROUTE is the
 * control (ip(8) needs it). */
static int check_uevent(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	static const struct {
		const char *key;
		long fam, type, proto;
	} c[] = {
		{"UEVENT_RAW", AF_NETLINK, SOCK_RAW, 15 /* KOBJECT_UEVENT */},
		{"UEVENT_DGRAM", AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, 15},
		/* the kernel reads ints: bits 32-63 must not get past a filter */
		{"UEVENT_HIGHBITS", AF_NETLINK | (1L << 32), SOCK_RAW,
		 15 | (1L << 32)},
		{"ROUTE", AF_NETLINK, SOCK_RAW, 0 /* NETLINK_ROUTE */},
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		long fd = syscall(SYS_socket, c[i].fam, c[i].type, c[i].proto);
		res(c[i].key, fd);
		if (fd < 0)
			continue;
		if ((c[i].proto & 0xffffffff) == 15) {
			/* group 1: the kernel's broadcast of device events */
			struct {
				unsigned short family, pad;
				unsigned pid, groups;
			} sa = {AF_NETLINK, 0, 0, 1};
			char key[64];
			snprintf(key, sizeof(key), "%s_BIND", c[i].key);
			res(key, bind((int)fd, (struct sockaddr *)&sa, sizeof(sa)));
		}
		close((int)fd);
	}
	return 0;
}

/* Kernel AIO contexts come from one host-wide pool (fs.aio-max-nr): take
 * as many as we can, say how many and what stopped us, then hold them for
 * argv[2] seconds. */
static int check_aio_hog(int argc, char **argv)
{
	int hold = argc > 2 ? atoi(argv[2]) : 0;
	long n = 0;
	int err = 0;
	for (; n < 100000; n++) {
		unsigned long ctx = 0;
		if (syscall(SYS_io_setup, 4096, &ctx) < 0) {
			err = errno;
			break;
		}
	}
	kv("AIO_CONTEXTS", "%ld", n);
	kv("AIO_ERR", "%s", err ? errname(err) : "none");
	if (hold > 0)
		sleep((unsigned)hold);
	return 0;
}

static int check_aslr(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	int local;
	void *m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	kv("STACK", "%p", (void *)&local);
	kv("MMAP", "%p", m);
	kv("PERSONA", "0x%lx", syscall(SYS_personality, 0xffffffffUL));
	return 0;
}

/* Runs "probe aslr" twice (after setting persona, unless it is ~0) and says
 * whether the stack moved. */
static void aslr_twice(const char *self, unsigned long persona,
		       const char *key)
{
	char stacks[2][64] = {"", ""};
	char persona_seen[64] = "";
	for (int i = 0; i < 2; i++) {
		int pfd[2];
		if (pipe(pfd) < 0)
			return;
		pid_t p = fork();
		if (p == 0) {
			close(pfd[0]);
			dup2(pfd[1], 1);
			if (persona != ~0UL &&
			    syscall(SYS_personality, persona) < 0) {
				printf("PERSONA_SET=%s\n", errname(errno));
				fflush(stdout);
				_exit(1);
			}
			execl(self, self, "aslr", NULL);
			_exit(127);
		}
		close(pfd[1]);
		char buf[512] = "";
		ssize_t n, off = 0;
		while ((n = read(pfd[0], buf + off, sizeof(buf) - 1 - (size_t)off)) > 0)
			off += n;
		buf[off] = '\0';
		close(pfd[0]);
		waitpid(p, NULL, 0);
		char *s = strstr(buf, "STACK=");
		if (s)
			sscanf(s + 6, "%63s", stacks[i]);
		s = strstr(buf, "PERSONA=");
		if (s)
			sscanf(s + 8, "%63s", persona_seen);
	}
	char k[96];
	snprintf(k, sizeof(k), "%s_STACKS", key);
	kv(k, "%s,%s", stacks[0], stacks[1]);
	snprintf(k, sizeof(k), "%s_PERSONA", key);
	kv(k, "%s", persona_seen);
	kv(key, "%s", !*stacks[0] || !*stacks[1]		  ? "UNKNOWN"
		      : strcmp(stacks[0], stacks[1]) ? "on"
						     : "off");
}

static int check_personality(int argc, char **argv)
{
	(void)argc;
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		snprintf(self, sizeof(self), "%s", argv[0]);
	else
		self[n] = '\0';
	kv("PERSONA_NOW", "0x%lx", syscall(SYS_personality, 0xffffffffUL));
	char buf[16];
	if (read_file("/proc/sys/kernel/randomize_va_space", buf, sizeof(buf)) > 0)
		kv("RANDOMIZE_VA_SPACE", "%ld", strtol(buf, NULL, 10));
	/* each attempt in a child, so an accepted persona stays there */
	static const struct {
		const char *key;
		unsigned long v;
	} tries[] = {
		{"PERS_ADDR_NO_RANDOMIZE", 0x0040000},
		{"PERS_READ_IMPLIES_EXEC", 0x0400000},
		{"PERS_ADDR_NO_RANDOMIZE_HIGHBITS", 0x0040000UL | (1UL << 32)},
		{"PERS_ADDR_NO_RANDOMIZE_BIT31", 0x0040000UL | 0x80000000UL},
		{"PERS_LINUX", 0},			/* control */
	};
	for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		pid_t p = fork();
		if (p == 0) {
			long r = syscall(SYS_personality, tries[i].v);
			if (r < 0)
				_exit(10 + (errno & 0x7f));
			unsigned long now = (unsigned long)syscall(
				SYS_personality, 0xffffffffUL);
			_exit((now & 0x0040000) ? 1 : 0);
		}
		int st;
		waitpid(p, &st, 0);
		int c = WEXITSTATUS(st);
		kv(tries[i].key, "%s", c == 0   ? "OK"
				       : c == 1 ? "OK_ASLR_OFF"
						: errname(c - 10));
	}
	aslr_twice(self, ~0UL, "ASLR_DEFAULT");
	aslr_twice(self, 0x0040000UL | 0x80000000UL, "ASLR_AFTER_BIT31");
	return 0;
}

/* Holds a shared flock and an fcntl read lock on PATH for SECONDS. */
static int check_lock_hold(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		kv("OPEN", "%s", errname(errno));
		return 1;
	}
	res("FLOCK_EX", flock(fd, LOCK_EX));
	struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
	res("SETLK_RD", fcntl(fd, F_SETLK, &fl));
	int fd2 = open(argv[2], O_RDONLY | O_CLOEXEC);
	struct flock ofd = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 1,
			    .l_len = 1};
	res("OFD_SETLK_RD", fcntl(fd2, F_OFD_SETLK, &ofd));
	sleep((unsigned)atoi(argv[3]));
	return 0;
}

/* Would a lock on PATH conflict with one held elsewhere? */
static int check_lock_test(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		kv("OPEN", "%s", errname(errno));
		return 1;
	}
	int r = flock(fd, LOCK_EX | LOCK_NB);
	kv("FLOCK_EX_NB", "%s", r == 0 ? "OK" : errname(errno));
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	if (fcntl(fd, F_GETLK, &fl) < 0)
		kv("GETLK_WR", "%s", errname(errno));
	else
		kv("GETLK_WR", "%s", fl.l_type == F_UNLCK ? "UNLCK" : "CONFLICT");
	struct flock ofd = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	if (fcntl(fd, F_OFD_GETLK, &ofd) < 0)
		kv("OFD_GETLK_WR", "%s", errname(errno));
	else
		kv("OFD_GETLK_WR", "%s", ofd.l_type == F_UNLCK ? "UNLCK" : "CONFLICT");
	return 0;
}

/* ---- network ------------------------------------------------------------------ */

static int connect_to(int family, const char *addr, int port)
{
	int s = socket(family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -1;
	int r;
	if (family == AF_INET) {
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_port = htons((uint16_t)port)};
		inet_pton(AF_INET, addr, &a.sin_addr);
		r = connect(s, (struct sockaddr *)&a, sizeof(a));
	} else {
		struct sockaddr_in6 a = {.sin6_family = AF_INET6,
					 .sin6_port = htons((uint16_t)port)};
		inet_pton(AF_INET6, addr, &a.sin6_addr);
		r = connect(s, (struct sockaddr *)&a, sizeof(a));
	}
	int e = errno;
	if (r < 0 && e == EINPROGRESS) {
		struct pollfd p = {s, POLLOUT, 0};
		if (poll(&p, 1, 2000) == 1) {
			socklen_t l = sizeof(e);
			getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &l);
			r = e ? -1 : 0;
		} else {
			e = ETIMEDOUT;
		}
	}
	close(s);
	errno = e;
	return r;
}

static int check_net(int argc, char **argv)
{
	char buf[8192];
	char ifaces[512] = "";
	int nif = 0, only_lo = 1;
	if (read_file("/proc/net/dev", buf, sizeof(buf)) >= 0) {
		int line = 0;
		for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
			if (line++ < 2)
				continue;
			while (*l == ' ')
				l++;
			char *c = strchr(l, ':');
			if (!c)
				continue;
			*c = '\0';
			nif++;
			if (strcmp(l, "lo"))
				only_lo = 0;
			if (strlen(ifaces) + strlen(l) + 2 < sizeof(ifaces)) {
				if (*ifaces)
					strcat(ifaces, ",");
				strcat(ifaces, l);
			}
		}
	} else {
		only_lo = 0;
	}
	kv("IFACES", "%s", ifaces);
	int routes = count_lines("/proc/net/route") - 1;
	kv("ROUTES4", "%d", routes);
	/* ipv6_route lists lo's own routes; count the others */
	int routes6 = 0;
	if (read_file("/proc/net/ipv6_route", buf, sizeof(buf)) >= 0) {
		for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
			size_t n = strlen(l);
			if (n >= 2 && strcmp(l + n - 2, "lo") != 0)
				routes6++;
		}
	}
	kv("ROUTES6_NOT_LO", "%d", routes6);
	for (int i = 2; i < argc; i++) {
		char key[64];
		snprintf(key, sizeof(key), "CONNECT_LOCAL_%s", argv[i]);
		res(key, connect_to(AF_INET, "127.0.0.1", atoi(argv[i])));
	}
	/* Non-local destinations only when the kernel can route nowhere but
	 * lo: the connect then fails at route lookup, and nothing leaves. */
	if (only_lo && routes == 0 && routes6 == 0) {
		kv("EXTERNAL_TRIED", "yes");
		res("CONNECT_METADATA", connect_to(AF_INET, "169.254.169.254", 80));
		res("CONNECT_TESTNET", connect_to(AF_INET, "192.0.2.1", 80));
		res("CONNECT_TESTNET6", connect_to(AF_INET6, "2001:db8::1", 80));
		int s = socket(AF_INET, SOCK_DGRAM, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
		inet_pton(AF_INET, "192.0.2.53", &a.sin_addr);
		res("UDP_SENDTO_TESTNET",
		    sendto(s, "q", 1, 0, (struct sockaddr *)&a, sizeof(a)));
		close(s);
	} else {
		kv("EXTERNAL_TRIED", "no");
	}
	return 0;
}

/* A sandbox with egress (check 33): each ADDR:PORT argument connected
 * to (the error, or OK), then what would let it route, spoof or listen
 * around the daemon's rules: raw and packet sockets, changing its own
 * address, link or routes, transparent sockets. */
static int check_egress(int argc, char **argv)
{
	for (int i = 2; i < argc; i++) {
		char host[64], key[128];
		const char *colon = strrchr(argv[i], ':');
		if (!colon || (size_t)(colon - argv[i]) >= sizeof(host))
			continue;
		memcpy(host, argv[i], (size_t)(colon - argv[i]));
		host[colon - argv[i]] = '\0';
		snprintf(key, sizeof(key), "CONNECT:%s", argv[i]);
		res(key, connect_to(AF_INET, host, atoi(colon + 1)));
	}
	int fd = (int)res("RAW_SOCKET", socket(AF_INET, SOCK_RAW, IPPROTO_TCP));
	if (fd >= 0)
		close(fd);
	fd = (int)res("PACKET_SOCKET", socket(AF_PACKET, SOCK_RAW, 0));
	if (fd >= 0)
		close(fd);
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "eth0");
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, "203.0.113.99", &sin->sin_addr);
	res("SET_ADDR", ioctl(s, SIOCSIFADDR, &ifr));
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "eth0");
	res("SET_LINK_DOWN", ioctl(s, SIOCSIFFLAGS, &ifr));
	struct rtentry rt;
	memset(&rt, 0, sizeof(rt));
	sin = (struct sockaddr_in *)&rt.rt_dst;
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, "198.51.100.0", &sin->sin_addr);
	sin = (struct sockaddr_in *)&rt.rt_genmask;
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, "255.255.255.0", &sin->sin_addr);
	rt.rt_flags = RTF_UP;
	rt.rt_dev = "lo";
	res("ADD_ROUTE", ioctl(s, SIOCADDRT, &rt));
	int one = 1;
	res("IP_TRANSPARENT", setsockopt(s, SOL_IP, IP_TRANSPARENT, &one,
					 sizeof(one)));
	close(s);
	return 0;
}

/* Sockets anywhere in the tree (not /proc, /sys, /dev). */
static int sock_count;
static void walk_sockets(const char *dir, int depth)
{
	if (depth > 12)
		return;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char p[4096];
		snprintf(p, sizeof(p), "%s/%s", strcmp(dir, "/") ? dir : "",
			 e->d_name);
		if (!strcmp(p, "/proc") || !strcmp(p, "/sys") || !strcmp(p, "/dev"))
			continue;
		struct stat st;
		if (lstat(p, &st) < 0)
			continue;
		if (S_ISSOCK(st.st_mode)) {
			char key[4200];
			snprintf(key, sizeof(key), "SOCKET:%s", p);
			kv(key, "found");
			sock_count++;
		} else if (S_ISDIR(st.st_mode)) {
			walk_sockets(p, depth + 1);
		}
	}
	if (d)
		closedir(d);
}

static int check_sockscan(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	static const char *const known[] = {
		"/var/run/docker.sock", "/run/docker.sock",
		"/run/containerd/containerd.sock", "/var/run/crio/crio.sock",
		"/run/podman/podman.sock", "/run/user/0/podman/podman.sock",
		"/var/run/dbus/system_bus_socket", "/run/systemd/private",
		"/run/systemd/notify", "/var/lib/sandboxd", "/run/sandboxd.sock",
		NULL};
	for (const char *const *k = known; *k; k++) {
		char key[128];
		struct stat st;
		snprintf(key, sizeof(key), "KNOWN:%s", *k);
		kv(key, "%s", lstat(*k, &st) == 0 ? "present" : errname(errno));
	}
	walk_sockets("/", 0);
	kv("SOCKETS_FOUND", "%d", sock_count);
	/* unix sockets this netns knows about (header line excluded) */
	kv("PROC_NET_UNIX", "%d", count_lines("/proc/net/unix") - 1);
	return 0;
}

/* ---- resources -------------------------------------------------------------------- */

/* while(1) fork(): every process, parent and children alike, keeps forking.
 * The first failure's errno and the number of successful forks go to
 * OUTFILE and stdout; then everyone waits to be killed. Its own hard cap
 * (1024 successful forks in all, counted in shared memory) keeps a host
 * without a pids limit safe. */
#define FORKBOMB_CAP 1024
static int check_forkbomb(int argc, char **argv)
{
	const char *out = argc > 2 ? argv[2] : "/workspace/forkbomb.out";
	int *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	pid_t top = getpid();
	for (;;) {
		if (__atomic_load_n(&sh[0], __ATOMIC_SEQ_CST) >= FORKBOMB_CAP)
			break;
		pid_t p = fork();
		if (p < 0) {
			int zero = 0;
			__atomic_compare_exchange_n(&sh[1], &zero, errno, 0,
						    __ATOMIC_SEQ_CST,
						    __ATOMIC_SEQ_CST);
			if (getpid() == top)
				break;
			usleep(100000);
			continue;
		}
		if (p > 0)
			__atomic_add_fetch(&sh[0], 1, __ATOMIC_SEQ_CST);
		/* p == 0: a new bomber, same loop */
	}
	if (getpid() != top)
		for (;;)
			pause();
	char text[128];
	int made = __atomic_load_n(&sh[0], __ATOMIC_SEQ_CST);
	snprintf(text, sizeof(text), "FORK_ERRNO=%s\nFORKS=%d\nCAP_REACHED=%s\n",
		 sh[1] ? errname(sh[1]) : "NONE", made,
		 made >= FORKBOMB_CAP ? "yes" : "no");
	write_text(out, text);
	printf("%s", text);
	fflush(stdout);
	for (;;)
		pause();
	return 0;
}

/* Touch memory in 8 MiB steps until killed; hard cap 2 GiB. */
static int check_memhog(int argc, char **argv)
{
	long cap_mb = argc > 2 ? atol(argv[2]) : 2048;
	const char *out = argc > 3 ? argv[3] : NULL;
	long mb = 0;
	for (; mb < cap_mb; mb += 8) {
		char *p = mmap(NULL, 8 << 20, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			kv("MMAP", "%s", errname(errno));
			break;
		}
		for (size_t i = 0; i < (8u << 20); i += 4096)
			p[i] = 1;
		if (out && (mb % 64) == 0) {
			char t[64];
			snprintf(t, sizeof(t), "TOUCHED_MB=%ld\n", mb + 8);
			write_text(out, t);
		}
	}
	kv("TOUCHED_MB", "%ld", mb);
	kv("CAP_REACHED", "%s", mb >= cap_mb ? "yes" : "no");
	return 0;
}

/* Write 1 MiB blocks to PATH until an error or MAX_MB; then remove it. */
static int check_diskfill(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	long max_mb = atol(argv[3]);
	int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		kv("OPEN", "%s", errname(errno));
		return 1;
	}
	static char block[1 << 20];
	memset(block, 0xa5, sizeof(block));
	long mb = 0;
	int err = 0;
	while (mb < max_mb) {
		ssize_t n = write(fd, block, sizeof(block));
		if (n < 0) {
			err = errno;
			break;
		}
		if (n < (ssize_t)sizeof(block)) {
			/* short write: the next one says why */
			n = write(fd, block, sizeof(block));
			err = n < 0 ? errno : 0;
			break;
		}
		mb++;
	}
	/* no fsync: quotas and tmpfs sizes are enforced at write() time, and
	 * writeback under a small memory limit would cost seconds */
	close(fd);
	kv("WRITTEN_MB", "%ld", mb);
	kv("ERRNO", "%s", err ? errname(err) : "NONE");
	kv("CAP_REACHED", "%s", mb >= max_mb ? "yes" : "no");
	unlink(argv[2]);
	return 0;
}

/* Create empty files in DIR until an error or MAX; then remove them. */
static int check_inodefill(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	long max = atol(argv[3]);
	mkdir(argv[2], 0755);
	int dfd = open(argv[2], O_RDONLY | O_DIRECTORY);
	if (dfd < 0) {
		kv("OPEN", "%s", errname(errno));
		return 1;
	}
	long n = 0;
	int err = 0;
	for (; n < max; n++) {
		char name[32];
		snprintf(name, sizeof(name), "f%ld", n);
		int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0) {
			err = errno;
			break;
		}
		close(fd);
	}
	kv("CREATED", "%ld", n);
	kv("ERRNO", "%s", err ? errname(err) : "NONE");
	kv("CAP_REACHED", "%s", n >= max ? "yes" : "no");
	for (long i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%ld", i);
		unlinkat(dfd, name, 0);
	}
	close(dfd);
	rmdir(argv[2]);
	return 0;
}

static int check_fdfill(int argc, char **argv)
{
	long cap = argc > 2 ? atol(argv[2]) : 200000;
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	kv("NOFILE_SOFT", "%llu", (unsigned long long)rl.rlim_cur);
	kv("NOFILE_HARD", "%llu", (unsigned long long)rl.rlim_max);
	long n = 0;
	int err = 0;
	for (; n < cap; n++) {
		if (open("/dev/null", O_RDONLY) < 0) {
			err = errno;
			break;
		}
	}
	kv("OPENED", "%ld", n);
	kv("ERRNO", "%s", err ? errname(err) : "NONE");
	/* can the soft limit be raised past the hard one? (CAP_SYS_RESOURCE) */
	struct rlimit up = {rl.rlim_max + 1, rl.rlim_max + 1};
	res("RAISE_HARD", setrlimit(RLIMIT_NOFILE, &up));
	static const struct {
		const char *name;
		int res;
	} lims[] = {{"NPROC", RLIMIT_NPROC},   {"FSIZE", RLIMIT_FSIZE},
		    {"CORE", RLIMIT_CORE},     {"MEMLOCK", RLIMIT_MEMLOCK},
		    {"STACK", RLIMIT_STACK},   {"CPU", RLIMIT_CPU},
		    {"AS", RLIMIT_AS}};
	for (size_t i = 0; i < sizeof(lims) / sizeof(lims[0]); i++) {
		char key[64];
		getrlimit(lims[i].res, &rl);
		snprintf(key, sizeof(key), "RLIMIT_%s_HARD", lims[i].name);
		if (rl.rlim_max == RLIM_INFINITY)
			kv(key, "unlimited");
		else
			kv(key, "%llu", (unsigned long long)rl.rlim_max);
	}
	return 0;
}

/* Fill a per-user or global kernel pool (issue 10 items 2 and 3) up to
 * cap or the first failure; with a file argument, write the report there
 * too and hold everything until killed (the runner looks from the host and
 * from a second sandbox meanwhile). */
static int fill_and_hold(int argc, char **argv, int (*open_one)(void))
{
	long cap = argc > 2 ? atol(argv[2]) : 4096;
	long n = 0;
	int err = 0;
	if (cap <= 0 || cap > 65536)
		cap = 4096;
	for (; n < cap; n++) {
		if (open_one() < 0) {
			err = errno;
			break;
		}
	}
	kv("OPENED", "%ld", n);
	kv("ERRNO", "%s", err ? errname(err) : "NONE");
	if (argc > 3) {
		char buf[128];
		int l = snprintf(buf, sizeof(buf), "OPENED=%ld\nERRNO=%s\n", n,
				 err ? errname(err) : "NONE");
		int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, buf, (size_t)l) != l)
			return 1;
		close(fd);
		for (;;)
			pause();
	}
	return 0;
}

static int open_inotify(void)
{
	return (int)syscall(SYS_inotify_init1, 0);
}

static int open_pty(void)
{
	return open("/dev/ptmx", O_RDWR | O_NOCTTY);
}

static int check_inotifyfill(int argc, char **argv)
{
	return fill_and_hold(argc, argv, open_inotify);
}

static int check_ptyfill(int argc, char **argv)
{
	return fill_and_hold(argc, argv, open_pty);
}

static long cpu_ms_of(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_file(path, buf, sizeof(buf)) < 0)
		return 0;
	char *p = strrchr(buf, ')');
	unsigned long ut = 0, st = 0;
	if (p)
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
		       &ut, &st);
	return (long)((ut + st) * 1000 / (unsigned long)sysconf(_SC_CLK_TCK));
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* NPROC spinners for MS milliseconds: CPU time used against wall time.
 * With "forever", keep spinning afterwards (to be killed by the timeout). */
static int check_cpuspin(int argc, char **argv)
{
	long ms = argc > 2 ? atol(argv[2]) : 1500;
	int nproc = argc > 3 ? atoi(argv[3]) : 2;
	int forever = argc > 4 && !strcmp(argv[4], "forever");
	pid_t kids[64];
	if (nproc > 64)
		nproc = 64;
	long t0 = now_ms();
	for (int i = 0; i < nproc; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			volatile unsigned long x = 0;
			for (;;)
				x++;
		}
	}
	usleep((useconds_t)ms * 1000);
	long cpu = 0;
	for (int i = 0; i < nproc; i++)
		cpu += cpu_ms_of(kids[i]);
	long wall = now_ms() - t0;
	kv("CPU_MS", "%ld", cpu);
	kv("WALL_MS", "%ld", wall);
	kv("NPROC", "%d", nproc);
	if (forever)
		for (;;)
			pause();
	for (int i = 0; i < nproc; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
	return 0;
}

/* Children stop themselves, then the probe stops itself. */
static int check_stopself(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	for (int i = 0; i < 3; i++) {
		if (fork() == 0) {
			raise(SIGSTOP);
			for (;;)
				pause();
		}
	}
	kv("STOPPING", "1");
	raise(SIGSTOP);
	for (;;)
		pause();
	return 0;
}

/* Daemonise out of the command: fork, setsid, fork, close every fd. The
 * grandchild writes its pid to PIDFILE and sleeps SECONDS. */
static int check_escaper(int argc, char **argv)
{
	const char *pidfile = argc > 2 ? argv[2] : "/workspace/escaper.pid";
	int secs = argc > 3 ? atoi(argv[3]) : 300;
	unlink(pidfile);
	pid_t p = fork();
	if (p == 0) {
		setsid();
		if (fork() != 0)
			_exit(0);
		int fd = open("/dev/null", O_RDWR);
		for (int i = 0; i < 1024; i++)
			if (i != fd)
				close(i);
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
		chdir("/");
		char t[32];
		snprintf(t, sizeof(t), "%d\n", (int)getpid());
		write_text(pidfile, t);
		sleep((unsigned)secs);
		_exit(0);
	}
	waitpid(p, NULL, 0);
	char buf[32] = "";
	for (int i = 0; i < 200 && read_file(pidfile, buf, sizeof(buf)) <= 0; i++)
		usleep(10000);
	kv("ESCAPER_PID", "%ld", strtol(buf, NULL, 10));
	return 0;
}

/* ---- known escapes ------------------------------------------------------------- */

static int check_release_agent(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	mkdir("/tmp/probe-cg", 0755);
	res("MOUNT_CGROUP_V1", mount("cgroup", "/tmp/probe-cg", "cgroup", 0, "memory"));
	res("MOUNT_CGROUP_V1_RDMA", mount("cgroup", "/tmp/probe-cg", "cgroup", 0, "rdma"));
	res("MOUNT_CGROUP2", mount("cgroup2", "/tmp/probe-cg", "cgroup2", 0, NULL));
	rmdir("/tmp/probe-cg");
	pid_t p = fork();
	if (p == 0)
		_exit(unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWCGROUP) == 0
			      ? 0
			      : 10 + (errno & 0x7f));
	int st;
	waitpid(p, &st, 0);
	kv("UNSHARE_USER_NS_CGROUP", "%s", WEXITSTATUS(st) == 0
						   ? "OK"
						   : errname(WEXITSTATUS(st) - 10));
	static const char *const agents[] = {
		"/sys/fs/cgroup/memory/release_agent",
		"/sys/fs/cgroup/rdma/release_agent",
		"/sys/fs/cgroup/release_agent", NULL};
	for (const char *const *a = agents; *a; a++) {
		char key[128];
		snprintf(key, sizeof(key), "WRITE:%s", *a);
		int fd = open(*a, O_WRONLY);
		kv(key, "%s", fd >= 0 ? "OK" : errname(errno));
		if (fd >= 0)
			close(fd);
	}
	return 0;
}

static int check_corepattern(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	int fd = open("/proc/sys/kernel/core_pattern", O_WRONLY);
	kv("OPEN_CORE_PATTERN_W", "%s", fd >= 0 ? "OK" : errname(errno));
	if (fd >= 0) {
		ssize_t n = write(fd, "|/workspace/evil", 16);
		kv("WRITE_CORE_PATTERN", "%s", n > 0 ? "OK" : errname(errno));
		close(fd);
	}
	char buf[256] = "";
	read_file("/proc/sys/kernel/core_pattern", buf, sizeof(buf));
	buf[strcspn(buf, "\n")] = '\0';
	kv("CORE_PATTERN", "%s", buf);
	struct rlimit rl;
	getrlimit(RLIMIT_CORE, &rl);
	kv("RLIMIT_CORE_SOFT", "%llu", (unsigned long long)rl.rlim_cur);
	kv("RLIMIT_CORE_HARD", "%llu", (unsigned long long)rl.rlim_max);
	struct rlimit up = {1 << 20, 1 << 20};
	res("RAISE_RLIMIT_CORE", setrlimit(RLIMIT_CORE, &up));
	pid_t p = fork();
	if (p == 0) {
		if (chdir("/workspace") < 0) {
		}
		abort();
	}
	int st;
	waitpid(p, &st, 0);
	kv("CRASH", "%s", status_str(st));
	kv("CORE_DUMPED", "%s", WCOREDUMP(st) ? "yes" : "no");
	return 0;
}

/* Looks for a process whose argv[0] is "/proc/self/exe": the interpreter
 * of a "#!/proc/self/exe" script the daemon was made to exec, that is, the
 * binary of the process that exec'd it (CVE-2019-5736). If the daemon's
 * helper exec'd it, that is the host's sandboxd. Opens /proc/N/exe, says
 * where it points, and tries to open it for writing, during and after the
 * process's life (never writing to it: an open that succeeds is proof
 * enough, and a write would damage the host's binary). Writes its findings
 * to OUTFILE, then moves BACKUP back to TARGET (the runner's bash). */
static int check_exewatch(int argc, char **argv)
{
	if (argc < 6)
		return 2;
	const char *out = argv[2], *target = argv[3], *backup = argv[4];
	int secs = atoi(argv[5]);
	pid_t self = getpid();
	long end = now_ms() + secs * 1000L;
	char report[8192] = "";
	size_t rl = 0;
	int caught = 0;
#define REP(...) (rl += (size_t)snprintf(report + rl, sizeof(report) - rl, __VA_ARGS__))
	while (now_ms() < end && !caught) {
		DIR *d = opendir("/proc");
		struct dirent *e;
		while (d && (e = readdir(d))) {
			int pid = atoi(e->d_name);
			if (pid <= 1 || pid == self)
				continue;
			char p[64], argv0[64] = "";
			snprintf(p, sizeof(p), "/proc/%d/cmdline", pid);
			if (read_file(p, argv0, sizeof(argv0)) <= 0 ||
			    strcmp(argv0, "/proc/self/exe") != 0)
				continue;
			snprintf(p, sizeof(p), "/proc/%d/exe", pid);
			int fd = open(p, O_RDONLY | O_CLOEXEC);
			if (fd < 0) {
				/* seen, and its binary out of reach: good */
				REP("INTERPRETER_SEEN=yes\nHOST_EXE_OPENED=no\n"
				    "OPEN_EXE=%s\n", errname(errno));
				caught = 1;
				break;
			}
			struct stat st, same;
			fstat(fd, &st);
			char l[1024] = "";
			if (readlink(p, l, sizeof(l) - 1) < 0) {
			}
			/* the same file under the same name inside: ours; an
			 * unlinked memfd (a sealed copy, runc-style): no host file */
			int inside = stat(l, &same) == 0 && same.st_dev == st.st_dev &&
				     same.st_ino == st.st_ino;
			int memfd = !strncmp(l, "/memfd:", 7) && st.st_nlink == 0;
			REP("INTERPRETER_SEEN=yes\nHOST_EXE_OPENED=%s\nHOST_EXE_LINK=%s\n"
			    "HOST_EXE_SIZE=%lld\nEXE_IS_MEMFD=%s\n",
			    inside || memfd ? "no" : "yes", l, (long long)st.st_size,
			    memfd ? "yes" : "no");
			char fp[64];
			snprintf(fp, sizeof(fp), "/proc/self/fd/%d", fd);
			int w = open(fp, O_WRONLY | O_CLOEXEC);
			REP("HOST_EXE_OPEN_W_LIVE=%s\n", w >= 0 ? "OK" : errname(errno));
			if (w >= 0 && memfd) {
				/* a copy of ours: the write itself must fail (seals).
				 * Never tried on a host file: it would hit it. */
				ssize_t wn = pwrite(w, "\0", 1, 0);
				REP("HOST_EXE_WRITE_LIVE=%s\n", wn == 1 ? "OK" : errname(errno));
			}
			if (w >= 0)
				close(w);
			char magic[4] = "";
			ssize_t n = pread(fd, magic, 4, 0);
			REP("HOST_EXE_READ=%s\n",
			    n == 4 && !memcmp(magic, "\x7f" "ELF", 4) ? "ELF" : "NO");
			for (int i = 0; i < 300 && kill(pid, 0) == 0; i++)
				usleep(10000);
			w = open(fp, O_WRONLY | O_CLOEXEC);
			REP("HOST_EXE_OPEN_W_AFTER_EXIT=%s\n",
			    w >= 0 ? "OK" : errname(errno));
			if (w >= 0)
				close(w);
			caught = 1;
			close(fd);
			break;
		}
		if (d)
			closedir(d);
	}
	if (!caught)
		REP("INTERPRETER_CAUGHT=no\nHOST_EXE_OPENED=no\n");
	int r = rename(backup, target);
	REP("RESTORED=%s\n", r == 0 ? "OK" : errname(errno));
#undef REP
	write_text(out, report);
	return 0;
}

static int check_procexe(int argc, char **argv)
{
	static const char *const pids[] = {"1", "self", NULL};
	for (const char *const *p = pids; *p; p++) {
		char path[64], key[64], l[1024];
		snprintf(path, sizeof(path), "/proc/%s/exe", *p);
		ssize_t n = readlink(path, l, sizeof(l) - 1);
		snprintf(key, sizeof(key), "READLINK_EXE_%s", *p);
		kv(key, "%s", n >= 0 ? (l[n] = '\0', l) : errname(errno));
		snprintf(key, sizeof(key), "OPEN_EXE_%s", *p);
		int fd = open(path, O_RDONLY);
		kv(key, "%s", fd >= 0 ? "OK" : errname(errno));
		if (fd >= 0)
			close(fd);
		snprintf(key, sizeof(key), "OPEN_MEM_%s", *p);
		snprintf(path, sizeof(path), "/proc/%s/mem", *p);
		fd = open(path, O_RDONLY);
		kv(key, "%s", fd >= 0 ? "OK" : errname(errno));
		if (fd >= 0)
			close(fd);
		snprintf(key, sizeof(key), "READ_ENVIRON_%s", *p);
		snprintf(path, sizeof(path), "/proc/%s/environ", *p);
		char buf[64];
		kv(key, "%s", read_file(path, buf, sizeof(buf)) >= 0 ? "OK"
								     : errname(errno));
	}
	for (int i = 2; i < argc; i++) {
		char key[512];
		snprintf(key, sizeof(key), "OPEN_W:%s", argv[i]);
		int fd = open(argv[i], O_WRONLY);
		kv(key, "%s", fd >= 0 ? "OK" : errname(errno));
		if (fd >= 0)
			close(fd);
	}
	return 0;
}

/* ---- main ------------------------------------------------------------------------- */

static const struct {
	const char *name;
	int (*fn)(int, char **);
} checks[] = {
	{"ids", check_ids},
	{"whoami", check_whoami},
	{"exec", check_exec},
	{"userns", check_userns},
	{"setns", check_setns},
	{"pidns", check_pidns},
	{"ptrace", check_ptrace},
	{"pvw", check_pvw},
	{"uts", check_uts},
	{"ipc-create", check_ipc_create},
	{"ipc-lookup", check_ipc_lookup},
	{"cgroupns", check_cgroupns},
	{"abstract-listen", check_abstract_listen},
	{"abstract-connect", check_abstract_connect},
	{"write", check_write},
	{"read", check_read},
	{"mountcalls", check_mountcalls},
	{"oldroot", check_oldroot},
	{"fds", check_fds},
	{"handle", check_handle},
	{"dev", check_dev},
	{"tty", check_tty},
	{"sweep", check_sweep},
	{"spot", check_spot},
	{"i386", check_i386},
	{"sigsys", check_sigsys},
	{"uevent", check_uevent},
	{"aio-hog", check_aio_hog},
	{"aslr", check_aslr},
	{"personality", check_personality},
	{"lock-hold", check_lock_hold},
	{"lock-test", check_lock_test},
	{"net", check_net},
	{"egress", check_egress},
	{"sockscan", check_sockscan},
	{"forkbomb", check_forkbomb},
	{"memhog", check_memhog},
	{"diskfill", check_diskfill},
	{"inodefill", check_inodefill},
	{"fdfill", check_fdfill},
	{"cpuspin", check_cpuspin},
	{"stopself", check_stopself},
	{"escaper", check_escaper},
	{"release-agent", check_release_agent},
	{"corepattern", check_corepattern},
	{"exewatch", check_exewatch},
	{"procexe", check_procexe},
	{"inotifyfill", check_inotifyfill},
	{"ptyfill", check_ptyfill},
};

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: probe CHECK [ARGS...]\nchecks:");
		for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
			fprintf(stderr, " %s", checks[i].name);
		fputc('\n', stderr);
		return 2;
	}
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
		if (!strcmp(argv[1], checks[i].name)) {
			kv("CHECK", "%s", argv[1]);
			int r = checks[i].fn(argc, argv);
			kv("DONE", "%d", r);
			return r;
		}
	fprintf(stderr, "probe: unknown check %s\n", argv[1]);
	return 2;
}
