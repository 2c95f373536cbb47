/* The seccomp policy every sandboxed command runs under. Built once at
 * daemon start (the argument rules with libseccomp) and kept as raw BPF, so
 * that applying it in a forked child before exec is two syscalls, not a compile
 * per command. */
#ifndef SBX_SECCOMP_H
#define SBX_SECCOMP_H

#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"

struct seccomp_bpf {
	struct sock_filter *insns;
	unsigned short len;
};

/* The policy is two filters, installed in this order (see seccomp.c);
 * the kernel runs both and takes the strictest answer. */
enum {
	SECCOMP_BY_NUMBER, /* the allowlist: default ENOSYS */
	SECCOMP_BY_ARGS,   /* argument rules: default allow */
	SECCOMP_NFILTERS
};

struct seccomp_prog {
	struct seccomp_bpf f[SECCOMP_NFILTERS];
};

int seccomp_prog_build(struct seccomp_prog *out, struct sbx_err *err);
/* The by-number filter (seccomp_tree.c): verdict[nr] for nr < n, and the
 * verdict of n - 1 for every number from n up to the x32 bit; calls of
 * another architecture and x32 calls kill the process. A binary search
 * over the runs of equal verdicts, not a list of numbers. */
#define SECCOMP_NR_TABLE 1024
int seccomp_tree_build(const uint32_t *verdict, size_t n,
                       struct seccomp_bpf *out, struct sbx_err *err);
void seccomp_prog_free(struct seccomp_prog *p);
/* Install p on the calling thread; no_new_privs must already be set. */
int seccomp_prog_apply(const struct seccomp_prog *p);
/* The native number of a syscall name, as the policy resolves it (also
 * calls newer than libseccomp); -1 for a name nobody knows, another
 * negative number for a call that exists only on other architectures. */
int seccomp_syscall_nr(const char *name);

#endif
