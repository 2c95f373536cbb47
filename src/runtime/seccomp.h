/* The seccomp policy every sandboxed command runs under. Built once at
 * daemon start (seccomp.c says how) and kept as raw BPF, one filter, so
 * that installing it is one syscall, not a compile per sandbox. */
#ifndef SBX_SECCOMP_H
#define SBX_SECCOMP_H

#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"

struct seccomp_prog {
	struct sock_filter *insns;
	unsigned short len;
};

int seccomp_prog_build(struct seccomp_prog *out, struct sbx_err *err);
/* The filter (seccomp_tree.c): verdict[nr] for nr < n, and the verdict
 * of n - 1 for every number from n up to the x32 bit; calls of another
 * architecture and x32 calls kill the process. A binary search over the
 * runs of equal verdicts, not a list of numbers. A number whose verdict
 * is SECCOMP_RET_ALLOW goes on into args, a filter of its own (its
 * instructions are appended): the rules on arguments. args NULL: allowed. */
#define SECCOMP_NR_TABLE 1024
int seccomp_tree_build(const uint32_t *verdict, size_t n,
                       const struct seccomp_prog *args,
                       struct seccomp_prog *out, struct sbx_err *err);
void seccomp_prog_free(struct seccomp_prog *p);
/* Install p on the calling thread; no_new_privs must already be set. */
int seccomp_prog_apply(const struct seccomp_prog *p);
/* The native number of a syscall name, as the policy resolves it (also
 * calls newer than libseccomp); -1 for a name nobody knows, another
 * negative number for a call that exists only on other architectures. */
int seccomp_syscall_nr(const char *name);

#endif
