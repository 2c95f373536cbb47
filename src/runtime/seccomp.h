/* The seccomp policy every sandboxed command runs under. Built once with
 * libseccomp at daemon start and kept as raw BPF, so that applying it in a
 * forked child before exec is two syscalls, not a compile per command. */
#ifndef SBX_SECCOMP_H
#define SBX_SECCOMP_H

#include <linux/filter.h>

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
void seccomp_prog_free(struct seccomp_prog *p);
/* Install p on the calling thread; no_new_privs must already be set. */
int seccomp_prog_apply(const struct seccomp_prog *p);
/* The native number of a syscall name, as the policy resolves it (also
 * calls newer than libseccomp); -1 for a name nobody knows, another
 * negative number for a call that exists only on other architectures. */
int seccomp_syscall_nr(const char *name);

#endif
