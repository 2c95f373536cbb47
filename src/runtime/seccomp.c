/* Seccomp policy (isolation.md A.27-29): default allow, with the calls that
 * are never legitimate in a sandbox refused, new namespaces refused,
 * non-native architectures killed.
 *
 * Why a denylist for now: the sandbox runs a general-purpose Linux userland
 * (compilers, interpreters, package managers) whose syscall set is large and
 * moving; Docker's allowlist is the model for a later tightening, tracked in
 * docs/security.md. What is refused here is exactly what the known escapes
 * and kernel attack surface of part A need. */
#include "runtime/seccomp.h"

#include <fcntl.h>
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

/* Refused with EPERM: kernel surface no sandbox needs, and every way to
 * reshape the mount tree, namespaces or another process's memory. */
static const char *const deny_eperm[] = {
	"acct", "add_key", "bpf", "delete_module", "finit_module",
	"fsconfig", "fsmount", "fsopen", "fspick", "init_module",
	"kcmp", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie",
	"mount", "mount_setattr", "move_mount", "nfsservctl",
	"open_by_handle_at", "open_tree", "perf_event_open", "pidfd_getfd",
	"pivot_root", "process_vm_readv", "process_vm_writev", "ptrace",
	"quotactl", "quotactl_fd", "reboot", "request_key", "setns",
	"swapoff", "swapon", "syslog", "umount", "umount2", "unshare",
	"userfaultfd", "uselib", "vhangup", "_sysctl", "iopl", "ioperm",
	"create_module", "get_kernel_syms", "query_module",
	"name_to_handle_at", "fanotify_init", "lsm_set_self_attr",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"stime", "sethostname", "setdomainname", "chroot",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"move_pages", "migrate_pages", "mbind", "set_mempolicy",
};

#define NS_FLAGS                                                           \
	(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |      \
	 CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP | CLONE_NEWTIME)

/* Calls newer than the libseccomp we may be built with (2.5.4 does not
 * know them): their x86-64 numbers, so they are refused all the same. */
static int raw_number(const char *name)
{
#ifdef __x86_64__
	static const struct {
		const char *name;
		int nr;
	} table[] = {{"lsm_get_self_attr", 459},
		     {"lsm_set_self_attr", 460},
		     {"lsm_list_modules", 461}};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (!strcmp(table[i].name, name))
			return table[i].nr;
#else
	(void)name;
#endif
	return __NR_SCMP_ERROR;
}

static int add_rules(scmp_filter_ctx ctx)
{
	int r;
	for (size_t i = 0; i < sizeof(deny_eperm) / sizeof(deny_eperm[0]);
	     i++) {
		int nr = seccomp_syscall_resolve_name(deny_eperm[i]);
		if (nr == __NR_SCMP_ERROR)
			nr = raw_number(deny_eperm[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this arch */
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
		if (r < 0 && r != -EEXIST)
			return r;
	}
	/* clone3 passes flags in memory a filter cannot read: make libc fall
	 * back to clone(2), whose flags register we can check. */
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (r < 0)
		return r;
	/* clone(2) with any namespace flag: one rule per flag, since
	 * libseccomp matches MASKED_EQ as (arg & mask) == datum. */
	for (unsigned long f = CLONE_NEWTIME; f <= CLONE_NEWNET; f <<= 1) {
		if (!(f & NS_FLAGS))
			continue;
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone),
				     1, SCMP_A0(SCMP_CMP_MASKED_EQ, f, f));
		if (r < 0 && r != -EEXIST)
			return r;
	}
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
		r = seccomp_rule_add(
			ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
			SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL,
				(scmp_datum_t)families[i]));
		if (r < 0)
			return r;
	}
	/* personality: refuse the flags that weaken the address space
	 * (ADDR_NO_RANDOMIZE turns ASLR off, READ_IMPLIES_EXEC, MMAP_PAGE_ZERO,
	 * ...); the query value 0xffffffff (bit 31, which no persona sets,
	 * is in every mask) and plain PER_LINUX stay allowed. */
	static const scmp_datum_t bad_persona[] = {
		0x0040000 /* ADDR_NO_RANDOMIZE */, 0x0100000 /* MMAP_PAGE_ZERO */,
		0x0200000 /* ADDR_COMPAT_LAYOUT */, 0x0400000 /* READ_IMPLIES_EXEC */,
		0x8000000 /* ADDR_LIMIT_3GB */};
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

int seccomp_prog_build(struct seccomp_prog *out, struct sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return sbx_err_set(err, ENOMEM, "seccomp_init failed");
	/* Any architecture but the native one (i386, x32 on x86-64) is
	 * killed: its syscall table would bypass every rule here. */
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
				 SCMP_ACT_KILL_PROCESS);
	if (r == 0)
		r = add_rules(ctx);
	if (r < 0) {
		seccomp_release(ctx);
		return sbx_err_set(err, -r, "seccomp: building rules failed: %s",
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
	if (pread(fd, out->insns, (size_t)st.st_size, 0) != st.st_size) {
		free(out->insns);
		out->insns = NULL;
		return sbx_err_sys(err, EIO, "reading seccomp BPF");
	}
	out->len = (unsigned short)n;
	return 0;
}

void seccomp_prog_free(struct seccomp_prog *p)
{
	free(p->insns);
	p->insns = NULL;
	p->len = 0;
}

int seccomp_prog_apply(const struct seccomp_prog *p)
{
	struct sock_fprog prog = {.len = p->len, .filter = p->insns};
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
		    SECCOMP_FILTER_FLAG_TSYNC, &prog) < 0)
		return -errno;
	return 0;
}
