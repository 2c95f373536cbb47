/* The seccomp policy every sandboxed command runs under. Built once with
 * libseccomp at daemon start and kept as raw BPF, so that applying it in a
 * forked child before exec is one syscall, not a compile per command. */
#ifndef SBX_SECCOMP_H
#define SBX_SECCOMP_H

#include <linux/filter.h>

#include "lib/err.h"

struct seccomp_prog {
	struct sock_filter *insns;
	unsigned short len;
};

int seccomp_prog_build(struct seccomp_prog *out, struct sbx_err *err);
void seccomp_prog_free(struct seccomp_prog *p);
/* Install p on the calling thread; no_new_privs must already be set. */
int seccomp_prog_apply(const struct seccomp_prog *p);

#endif
