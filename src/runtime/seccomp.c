/* Seccomp policy (isolation.md A.27-29): an allowlist. Every command runs
 * under one filter, in two parts:
 *
 *   1. by number: the calls in allowed[] pass on to part 2, the ones in
 *      deny_eperm[] fail with EPERM, and every other number -- a call
 *      this list does not know, one the kernel added after it was written
 *      (listmount, statmount, file_getattr, ...), one that does not exist
 *      -- fails with ENOSYS, which programs take as "this kernel is too
 *      old" and fall back from (clone3 -> clone, io_uring/AIO -> threads);
 *   2. by argument: the few allowed calls that are harmful with some
 *      arguments (clone with namespace flags, TIOCSTI, some socket
 *      families, the uevent netlink, personality flags that weaken ASLR).
 *
 * Both kill a process that makes a call of another architecture (i386,
 * x32): its syscall table would bypass every rule here.
 *
 * Part 1 is a binary search over runs of numbers (seccomp_tree.c), made
 * here from the two lists below; libseccomp makes part 2 from the
 * argument rules alone, and part 1's allowed numbers jump into it.
 *
 * Why part 2 is apart: libseccomp lets an unconditional rule for a call
 * override every conditional rule for it, so "allow ioctl except TIOCSTI"
 * cannot be one libseccomp filter without relying on how it orders its
 * decision tree. Only an allowed call reaches part 2, and its answer is
 * final: the strictest of the two, as the kernel would take it from two
 * filters (seccomp_filter.rst), because part 1 allowed it. They were two
 * filters until the kernel's check and JIT of each at every sandbox start
 * (~0.15 ms of fixed cost apiece here) showed in the cold start.
 *
 * allowed[] is Docker's default profile (moby profiles/seccomp/default.json)
 * for x86_64 without any capability: its unconditional list, minus what
 * deny_eperm[] refuses (calls sandboxd refused before it had an allowlist)
 * and minus kernel AIO (io_setup & co: the host-wide fs.aio-nr pool) and
 * modify_ldt (16-bit code only); plus fchmodat2, map_shadow_stack and mseal,
 * newer calls of glibc that act on the caller alone. Nothing Docker allows
 * only with a capability (CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_SYS_NICE, ...)
 * is here: a sandbox has none. tests/isolation/seccomp-policy.txt is the
 * review copy; tests/unit/test_seccomp.c diffs the built filters against
 * it, and isolation check 27 diffs a sweep inside a sandbox against it. */
#include "runtime/seccomp.h"

#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "lib/cleanup.h"

static const char *const allowed[] = {
    "accept",
    "accept4",
    "access",
    "alarm",
    "arch_prctl",
    "bind",
    "brk",
    "capget",
    "capset",
    "chdir",
    "chmod",
    "chown",
    "clock_getres",
    "clock_gettime",
    "clock_nanosleep",
    "clone",
    "close",
    "close_range",
    "connect",
    "copy_file_range",
    "creat",
    "dup",
    "dup2",
    "dup3",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "eventfd",
    "eventfd2",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "faccessat",
    "faccessat2",
    "fadvise64",
    "fallocate",
    "fanotify_mark",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "fchown",
    "fchownat",
    "fcntl",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "flock",
    "fork",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstatfs",
    "fsync",
    "ftruncate",
    "futex",
    "futex_waitv",
    "futimesat",
    "get_robust_list",
    "get_thread_area",
    "getcpu",
    "getcwd",
    "getdents",
    "getdents64",
    "getegid",
    "geteuid",
    "getgid",
    "getgroups",
    "getitimer",
    "getpeername",
    "getpgid",
    "getpgrp",
    "getpid",
    "getppid",
    "getpriority",
    "getrandom",
    "getresgid",
    "getresuid",
    "getrlimit",
    "getrusage",
    "getsid",
    "getsockname",
    "getsockopt",
    "gettid",
    "gettimeofday",
    "getuid",
    "getxattr",
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    "ioctl",
    "ioprio_get",
    "ioprio_set",
    "kill",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "lchown",
    "lgetxattr",
    "link",
    "linkat",
    "listen",
    "listxattr",
    "llistxattr",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lstat",
    "madvise",
    "map_shadow_stack",
    "membarrier",
    "memfd_create",
    "memfd_secret",
    "mincore",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "mlock",
    "mlock2",
    "mlockall",
    "mmap",
    "mprotect",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedsend",
    "mq_unlink",
    "mremap",
    "mseal",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    "nanosleep",
    "newfstatat",
    "open",
    "openat",
    "openat2",
    "pause",
    "personality",
    "pidfd_open",
    "pidfd_send_signal",
    "pipe",
    "pipe2",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "poll",
    "ppoll",
    "prctl",
    "pread64",
    "preadv",
    "preadv2",
    "prlimit64",
    "process_mrelease",
    "pselect6",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readlink",
    "readlinkat",
    "readv",
    "recvfrom",
    "recvmmsg",
    "recvmsg",
    "remap_file_pages",
    "removexattr",
    "rename",
    "renameat",
    "renameat2",
    "restart_syscall",
    "rmdir",
    "rseq",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_tgsigqueueinfo",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_setaffinity",
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    "sched_yield",
    "seccomp",
    "select",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "sendfile",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "set_robust_list",
    "set_thread_area",
    "set_tid_address",
    "setfsgid",
    "setfsuid",
    "setgid",
    "setgroups",
    "setitimer",
    "setpgid",
    "setpriority",
    "setregid",
    "setresgid",
    "setresuid",
    "setreuid",
    "setrlimit",
    "setsid",
    "setsockopt",
    "setuid",
    "setxattr",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "shutdown",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "socket",
    "socketpair",
    "splice",
    "stat",
    "statfs",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "syncfs",
    "sysinfo",
    "tee",
    "tgkill",
    "time",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_settime",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_settime",
    "times",
    "tkill",
    "truncate",
    "umask",
    "uname",
    "unlink",
    "unlinkat",
    "unshare",
    "utime",
    "utimensat",
    "utimes",
    "vfork",
    "vmsplice",
    "wait4",
    "waitid",
    "write",
    "writev",
};

/* Refused with EPERM: kernel surface no sandbox needs, and every way to
 * reshape the mount tree, namespaces or another process's memory. Named
 * although the default refuses them too, so that they answer "not
 * permitted" (as they did before the allowlist) rather than "no such
 * call", and so that an allowlist entry can never let one through. */
static const char *const deny_eperm[] = {
    "acct",
    "add_key",
    "bpf",
    "delete_module",
    "finit_module",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "init_module",
    "kcmp",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "lookup_dcookie",
    "mount",
    "mount_setattr",
    "move_mount",
    "nfsservctl",
    "open_by_handle_at",
    "open_tree",
    "open_tree_attr",
    "perf_event_open",
    "pidfd_getfd",
    "pivot_root",
    "process_vm_readv",
    "process_vm_writev",
    "ptrace",
    "quotactl",
    "quotactl_fd",
    "reboot",
    "request_key",
    "setns",
    "swapoff",
    "swapon",
    "syslog",
    "umount",
    "umount2",
    "userfaultfd",
    "uselib",
    "vhangup",
    "_sysctl",
    "iopl",
    "ioperm",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "name_to_handle_at",
    "fanotify_init",
    "lsm_set_self_attr",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "stime",
    "sethostname",
    "setdomainname",
    "chroot",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "move_pages",
    "migrate_pages",
    "mbind",
    "set_mempolicy",
};

#define NS_FLAGS                                                               \
	(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |           \
	 CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP | CLONE_NEWTIME)

/* Calls newer than the libseccomp we may be built with (2.5.4 does not
 * know them all): their x86-64 numbers, so they are ruled on all the
 * same. */
static int raw_number(const char *name)
{
#ifdef __x86_64__
	static const struct {
		const char *name;
		int nr;
	} table[] = {{"fchmodat2", 452},         {"map_shadow_stack", 453},
	             {"lsm_get_self_attr", 459}, {"lsm_set_self_attr", 460},
	             {"lsm_list_modules", 461},  {"mseal", 462},
	             {"open_tree_attr", 467}};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (!strcmp(table[i].name, name))
			return table[i].nr;
#else
	(void)name;
#endif
	return __NR_SCMP_ERROR;
}

int seccomp_syscall_nr(const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);
	if (nr == __NR_SCMP_ERROR)
		nr = raw_number(name);
	return nr; /* __NR_SCMP_ERROR is -1 */
}

/* The by-number filter's verdict for every number below SECCOMP_NR_TABLE
 * (numbers above it get the default, ENOSYS). */
static int number_verdicts(uint32_t *v, struct sbx_err *err)
{
	static const struct {
		const char *const *names;
		size_t n;
		uint32_t action;
	} lists[] = {
	    {allowed, sizeof(allowed) / sizeof(allowed[0]), SECCOMP_RET_ALLOW},
	    /* after the allowlist: a name on both is refused */
	    {deny_eperm, sizeof(deny_eperm) / sizeof(deny_eperm[0]),
	     SECCOMP_RET_ERRNO | EPERM},
	};
	for (size_t nr = 0; nr < SECCOMP_NR_TABLE; nr++)
		v[nr] = SECCOMP_RET_ERRNO | ENOSYS;
	for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++)
		for (size_t i = 0; i < lists[l].n; i++) {
			int nr = seccomp_syscall_nr(lists[l].names[i]);
			if (nr < 0)
				continue; /* not on this arch: the default
				             refuses it */
			if (nr >= SECCOMP_NR_TABLE - 1) /* the last: default */
				return sbx_err_set(err, ERANGE,
				                   "seccomp: %s is number %d",
				                   lists[l].names[i], nr);
			v[nr] = lists[l].action;
		}
	return 0;
}

static int add_arg_rules(scmp_filter_ctx ctx)
{
	int r = 0;
	/* clone(2) with any namespace flag: one rule per flag, since
	 * libseccomp matches MASKED_EQ as (arg & mask) == datum. (clone3
	 * passes its flags in memory a filter cannot read: the first filter
	 * answers ENOSYS, and libc falls back to clone.) */
	for (unsigned long f = CLONE_NEWTIME; f <= CLONE_NEWNET; f <<= 1) {
		if (!(f & NS_FLAGS))
			continue;
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
		                     SCMP_SYS(clone), 1,
		                     SCMP_A0(SCMP_CMP_MASKED_EQ, f, f));
		if (r < 0 && r != -EEXIST)
			return r;
	}
	/* unshare(2): a cgroup namespace only, the one step of a command's
	 * start that needs it (spawn.c; the spawner keeps CAP_SYS_ADMIN in
	 * the sandbox's user namespace for it). Commands hold no capability
	 * in any user namespace and can make none (unshare and clone with
	 * CLONE_NEWUSER stay refused), so the kernel refuses them this one
	 * with EPERM all the same. All 64 bits: the kernel reads a long. */
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
	                     SCMP_A0(SCMP_CMP_NE, CLONE_NEWCGROUP));
	if (r < 0)
		return r;
	/* TIOCSTI/TIOCLINUX push input into a terminal (CVE-2017-5226); the
	 * kernel ignores the upper 32 bits of cmd, so compare only the low 32
	 * (CVE-2019-10063). */
	static const unsigned long tty_cmds[] = {TIOCSTI, TIOCLINUX};
	for (size_t i = 0; i < 2; i++) {
		r = seccomp_rule_add(
		    ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
		    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, tty_cmds[i]));
		if (r < 0)
			return r;
	}
	/* Address families with a history of kernel bugs and no use here. */
	static const int families[] = {AF_VSOCK, AF_ALG, AF_KEY};
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
		/* the kernel reads an int: compare the low 32 bits only, or
		 * AF_VSOCK | 1 << 32 would pass */
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT),
		                     SCMP_SYS(socket), 1,
		                     SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL,
		                             (scmp_datum_t)families[i]));
		if (r < 0)
			return r;
	}
	/* The kernel broadcasts every host device event (uevent) to the
	 * NETLINK_KOBJECT_UEVENT sockets of each network namespace owned by
	 * the host's user namespace -- which a sandbox's is, its init being
	 * host root: other sandboxes' store mounts, USB devices, ... Nothing
	 * in a sandbox has devices to manage; the kernel's own answer for a
	 * netlink protocol it lacks is EPROTONOSUPPORT. */
	r = seccomp_rule_add(
	    ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket), 2,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, AF_NETLINK),
	    SCMP_A2(SCMP_CMP_MASKED_EQ, 0xffffffffUL, NETLINK_KOBJECT_UEVENT));
	if (r < 0)
		return r;
	/* personality: refuse the flags that weaken the address space
	 * (ADDR_NO_RANDOMIZE turns ASLR off, READ_IMPLIES_EXEC, MMAP_PAGE_ZERO,
	 * ...); the query value 0xffffffff (bit 31, which no persona sets,
	 * is in every mask) and plain PER_LINUX stay allowed. */
	static const scmp_datum_t bad_persona[] = {
	    0x0040000 /* ADDR_NO_RANDOMIZE */, 0x0100000 /* MMAP_PAGE_ZERO */,
	    0x0200000 /* ADDR_COMPAT_LAYOUT */,
	    0x0400000 /* READ_IMPLIES_EXEC */, 0x8000000 /* ADDR_LIMIT_3GB */};
	/* ...and any value with bit 31 set but the query itself: "bit 31
	 * set and bit b clear", one rule per b (libseccomp 2.5 takes one
	 * comparison per argument) */
	for (unsigned b = 0; b < 31; b++) {
		r = seccomp_rule_add(
		    ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
		    SCMP_A0(SCMP_CMP_MASKED_EQ, 0x80000000UL | (1UL << b),
		            0x80000000UL));
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < sizeof(bad_persona) / sizeof(bad_persona[0]);
	     i++) {
		r = seccomp_rule_add(
		    ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
		    SCMP_A0(SCMP_CMP_MASKED_EQ, bad_persona[i] | 0x80000000UL,
		            bad_persona[i]));
		if (r < 0)
			return r;
	}
	return r < 0 ? r : 0;
}

/* One filter: default action def, rules from add, exported as BPF. */
static int build_one(uint32_t def, int (*add)(scmp_filter_ctx),
                     struct seccomp_prog *out, struct sbx_err *err)
{
	scmp_filter_ctx ctx = seccomp_init(def);
	if (!ctx)
		return sbx_err_set(err, ENOMEM, "seccomp_init failed");
	/* Any architecture but the native one (i386, x32 on x86-64) is
	 * killed: its syscall table would bypass every rule here. */
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
	                         SCMP_ACT_KILL_PROCESS);
	if (r == 0)
		r = add(ctx);
	if (r < 0) {
		seccomp_release(ctx);
		return sbx_err_set(err, -r,
		                   "seccomp: building rules failed: %s",
		                   strerror(-r));
	}
	/* libseccomp 2.5 exports BPF only to an fd. */
	_cleanup_close_ int fd = memfd_create("seccomp", MFD_CLOEXEC);
	if (fd < 0) {
		seccomp_release(ctx);
		return sbx_err_sys(err, errno, "memfd_create");
	}
	r = seccomp_export_bpf(ctx, fd);
	seccomp_release(ctx);
	if (r < 0)
		return sbx_err_set(err, -r, "seccomp_export_bpf: %s",
		                   strerror(-r));
	struct stat st;
	if (fstat(fd, &st) < 0)
		return sbx_err_sys(err, errno, "fstat seccomp memfd");
	size_t n = (size_t)st.st_size / sizeof(struct sock_filter);
	if (n == 0 || n > BPF_MAXINSNS)
		return sbx_err_set(err, E2BIG, "seccomp: %zu instructions", n);
	out->insns = malloc((size_t)st.st_size);
	if (!out->insns)
		return sbx_err_set(err, ENOMEM, "seccomp: out of memory");
	ssize_t got = pread(fd, out->insns, (size_t)st.st_size, 0);
	if (got != st.st_size) {
		int e = got < 0 ? errno : EIO; /* EIO: a short read */
		free(out->insns);
		out->insns = NULL;
		return sbx_err_sys(err, e, "reading seccomp BPF");
	}
	out->len = (unsigned short)n;
	return 0;
}

int seccomp_prog_build(struct seccomp_prog *out, struct sbx_err *err)
{
	static uint32_t v[SECCOMP_NR_TABLE];
	struct seccomp_prog args = {0};
	memset(out, 0, sizeof(*out));
	int r = number_verdicts(v, err);
	if (r == 0)
		r = build_one(SCMP_ACT_ALLOW, add_arg_rules, &args, err);
	if (r == 0)
		r = seccomp_tree_build(v, SECCOMP_NR_TABLE, &args, out, err);
	seccomp_prog_free(&args);
	return r;
}
