/* The filter as a search tree by number (seccomp.h seccomp_tree_build).
 *
 * Why not libseccomp's own: it tests the allowed numbers one after the
 * other, ~360 instructions, and every process in a sandbox runs that
 * list on every syscall. The kernel also checks and JIT-compiles a
 * filter when it is installed, once per sandbox start, at a cost that
 * grows with its length (~0.5 ms for that list on this project's 2-CPU
 * VM; bench/ANALYSIS.md). The allowlist is ~80 runs of consecutive
 * numbers with the same verdict, so a binary search over the runs' first
 * numbers decides any call in ~7 comparisons, in ~90 instructions.
 *
 * Layout: the architecture check, the x32 check, the search tree (one
 * conditional jump per node, forward only, in preorder), then one return
 * per distinct verdict, which the tree's leaves jump to; the argument
 * rules, when given, stand where ALLOW's return would, last. */
#include "runtime/seccomp.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

/* The architecture whose numbers the table holds: any other's call is
 * killed (its syscall table would bypass every rule). */
#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#define NATIVE_ARCH 0 /* unknown: seccomp_tree_build refuses */
#endif
/* Numbers with this bit are x32 calls on x86-64 (same architecture
 * value): killed too. No other architecture has a call numbered so high. */
#define X32_BIT 0x40000000u
#define MAX_RETS 8

struct tree {
	struct sock_filter *insns;
	size_t n;
	const uint32_t *first; /* the runs' first numbers */
	const size_t *ret;     /* each run's return, as an index in rets[] */
	size_t rets_at;        /* where the returns start */
};

/* The instruction a subtree of runs [a, b] starts with (a leaf: its return,
 * which is not emitted here). */
static size_t target(const struct tree *t, size_t a, size_t b, size_t next)
{
	return a == b ? t->rets_at + t->ret[a] : next;
}

/* Emit the nodes of runs [a, b] from t->n on: "number >= first of the
 * middle run: the upper half, else the lower half". */
static int emit(struct tree *t, size_t a, size_t b)
{
	if (a == b)
		return 0;
	size_t m = a + (b - a + 1) / 2, me = t->n++;
	size_t lower = target(t, a, m - 1, t->n);
	if (emit(t, a, m - 1) < 0)
		return -1;
	size_t upper = target(t, m, b, t->n);
	if (emit(t, m, b) < 0)
		return -1;
	if (upper - me - 1 > 255 || lower - me - 1 > 255)
		return -1; /* classic BPF jumps are 8 bits */
	t->insns[me] = (struct sock_filter)BPF_JUMP(
	    BPF_JMP | BPF_JGE | BPF_K, t->first[m], (uint8_t)(upper - me - 1),
	    (uint8_t)(lower - me - 1));
	return 0;
}

/* The index of v in rets[0..n), or n. */
static size_t slot_of(const uint32_t *rets, size_t n, uint32_t v)
{
	size_t k = 0;
	while (k < n && rets[k] != v)
		k++;
	return k;
}

int seccomp_tree_build(const uint32_t *verdict, size_t n,
                       const struct seccomp_prog *args,
                       struct seccomp_prog *out, struct sbx_err *err)
{
	/* One return per verdict, the kill among them, ALLOW last: with
	 * args, the argument rules start where its return would be. */
	uint32_t rets[MAX_RETS];
	size_t nrets = 0, nruns = 0;
	bool allows = false;
	out->insns = NULL;
	out->len = 0;
	if (!NATIVE_ARCH)
		return sbx_err_set(err, ENOTSUP,
		                   "seccomp tree: not built for this CPU "
		                   "architecture (seccomp_tree.c NATIVE_ARCH)");
	if (n == 0 || n > X32_BIT)
		return sbx_err_set(err, EINVAL, "seccomp tree: %zu numbers", n);
	rets[nrets++] = SECCOMP_RET_KILL_PROCESS;
	for (size_t nr = 0; nr < n; nr++) {
		if (verdict[nr] == SECCOMP_RET_ALLOW)
			allows = true;
		else if (slot_of(rets, nrets, verdict[nr]) == nrets) {
			if (nrets == MAX_RETS - 1) /* one for ALLOW */
				return sbx_err_set(
				    err, E2BIG,
				    "seccomp tree: too many verdicts");
			rets[nrets++] = verdict[nr];
		}
	}
	if (allows)
		rets[nrets++] = SECCOMP_RET_ALLOW;
	size_t nargs = allows && args ? args->len : 0;
	/* prologue 5, nodes nruns - 1 (+ a jump), returns, args */
	size_t cap = n + 6 + nrets + nargs;
	uint32_t *first = malloc(n * sizeof(*first));
	size_t *ret = malloc(n * sizeof(*ret));
	struct tree t = {.insns = malloc(cap * sizeof(*t.insns)),
	                 .first = first,
	                 .ret = ret};
	int r = 0;
	if (!first || !ret || !t.insns) {
		r = sbx_err_set(err, ENOMEM, "seccomp tree: out of memory");
		goto out;
	}
	for (size_t nr = 0; nr < n; nr++) {
		if (nr && verdict[nr] == verdict[nr - 1])
			continue;
		first[nruns] = (uint32_t)nr;
		ret[nruns++] = slot_of(rets, nrets, verdict[nr]);
	}
	/* the last run goes on up to the x32 bit: numbers past the table
	 * have its verdict */
	size_t kill = 0, dflt = ret[nruns - 1];

	/* The architecture first: seccomp_data.nr means nothing without it. */
	t.insns[t.n++] = (struct sock_filter)BPF_STMT(
	    BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	size_t arch_jump = t.n++; /* another architecture: kill */
	t.insns[t.n++] = (struct sock_filter)BPF_STMT(
	    BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	/* -1 is no call (a tracer's "skip this one"): the default, as
	 * libseccomp answers it; above it, anything with the x32 bit kills */
	size_t minus_one = t.n++, x32_jump = t.n++;
	size_t nodes = nruns - 1, skip = nruns == 1; /* one run: a jump to it */
	t.rets_at = t.n + nodes + skip;
	if (t.rets_at + nrets - 1 - minus_one - 1 > 255 ||
	    emit(&t, 0, nruns - 1) < 0 || cap > BPF_MAXINSNS) {
		r = sbx_err_set(err, E2BIG, "seccomp tree: a jump too far");
		goto out;
	}
	if (skip) {
		size_t at = t.n++;
		t.insns[at] = (struct sock_filter)BPF_STMT(
		    BPF_JMP | BPF_JA, (uint32_t)(t.rets_at + ret[0] - at - 1));
	}
	for (size_t k = 0; k < nrets - (nargs > 0); k++)
		t.insns[t.n++] =
		    (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, rets[k]);
	/* the argument rules' own jumps are relative: they run as they are */
	for (size_t i = 0; i < nargs; i++)
		t.insns[t.n++] = args->insns[i];
	t.insns[arch_jump] = (struct sock_filter)BPF_JUMP(
	    BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 0,
	    (uint8_t)(t.rets_at + kill - arch_jump - 1));
	t.insns[minus_one] = (struct sock_filter)BPF_JUMP(
	    BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffu,
	    (uint8_t)(t.rets_at + dflt - minus_one - 1), 0);
	t.insns[x32_jump] = (struct sock_filter)BPF_JUMP(
	    BPF_JMP | BPF_JGE | BPF_K, X32_BIT,
	    (uint8_t)(t.rets_at + kill - x32_jump - 1), 0);
	out->insns = t.insns;
	out->len = (unsigned short)t.n;
	t.insns = NULL;
out:
	free(first);
	free(ret);
	free(t.insns);
	return r;
}
