/* The seccomp policy as built (seccomp_prog_build), run through a classic
 * BPF interpreter and diffed against tests/isolation/seccomp-policy.txt:
 * every syscall number 0..1023 with zero arguments, every argument rule
 * the file names, and the architecture checks. The file is the review
 * copy of the policy; a change of one without the other fails here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "runtime/seccomp.h"

#define POLICY_FILE "tests/isolation/seccomp-policy.txt"
#define MAX_NR 1024

static struct seccomp_prog prog;

/* ---- a classic BPF interpreter, for what seccomp accepts ---- */

static uint32_t load32(const struct seccomp_data *d, uint32_t off)
{
	uint32_t v;
	assert_true(off % 4 == 0 && off + 4 <= sizeof(*d));
	memcpy(&v, (const char *)d + off, 4);
	return v;
}

static uint32_t run_bpf(const struct seccomp_prog *f,
                        const struct seccomp_data *d)
{
	uint32_t A = 0, X = 0, M[BPF_MEMWORDS] = {0};
	for (unsigned pc = 0; pc < f->len; pc++) {
		const struct sock_filter *i = &f->insns[pc];
		uint32_t src = BPF_SRC(i->code) == BPF_X ? X : i->k;
		switch (BPF_CLASS(i->code)) {
		case BPF_LD:
			switch (BPF_MODE(i->code)) {
			case BPF_ABS:
				A = load32(d, i->k);
				break;
			case BPF_IMM:
				A = i->k;
				break;
			case BPF_MEM:
				A = M[i->k % BPF_MEMWORDS];
				break;
			case BPF_LEN:
				A = sizeof(*d);
				break;
			default:
				fail_msg("BPF: ld mode %#x", i->code);
			}
			break;
		case BPF_LDX:
			switch (BPF_MODE(i->code)) {
			case BPF_IMM:
				X = i->k;
				break;
			case BPF_MEM:
				X = M[i->k % BPF_MEMWORDS];
				break;
			case BPF_LEN:
				X = sizeof(*d);
				break;
			default:
				fail_msg("BPF: ldx mode %#x", i->code);
			}
			break;
		case BPF_ST:
			M[i->k % BPF_MEMWORDS] = A;
			break;
		case BPF_STX:
			M[i->k % BPF_MEMWORDS] = X;
			break;
		case BPF_ALU:
			switch (BPF_OP(i->code)) {
			case BPF_ADD:
				A += src;
				break;
			case BPF_SUB:
				A -= src;
				break;
			case BPF_MUL:
				A *= src;
				break;
			case BPF_DIV:
				A = src ? A / src : 0;
				break;
			case BPF_AND:
				A &= src;
				break;
			case BPF_OR:
				A |= src;
				break;
			case BPF_XOR:
				A ^= src;
				break;
			case BPF_LSH:
				A <<= src & 31;
				break;
			case BPF_RSH:
				A >>= src & 31;
				break;
			case BPF_NEG:
				A = -A;
				break;
			default:
				fail_msg("BPF: alu op %#x", i->code);
			}
			break;
		case BPF_JMP: {
			bool t;
			switch (BPF_OP(i->code)) {
			case BPF_JA:
				pc += i->k;
				continue;
			case BPF_JEQ:
				t = A == src;
				break;
			case BPF_JGT:
				t = A > src;
				break;
			case BPF_JGE:
				t = A >= src;
				break;
			case BPF_JSET:
				t = (A & src) != 0;
				break;
			default:
				fail_msg("BPF: jmp op %#x", i->code);
				return 0;
			}
			pc += t ? i->jt : i->jf;
			break;
		}
		case BPF_RET:
			return BPF_RVAL(i->code) == BPF_A ? A : i->k;
		case BPF_MISC:
			if (BPF_MISCOP(i->code) == BPF_TAX)
				X = A;
			else
				A = X;
			break;
		}
	}
	fail_msg("BPF: ran off the end of the program");
	return 0;
}

/* What the kernel answers: the filter's return. */
static uint32_t verdict(int nr, uint32_t arch, const uint64_t args[6])
{
	struct seccomp_data d = {.nr = nr, .arch = arch};
	if (args)
		memcpy(d.args, args, sizeof(d.args));
	return run_bpf(&prog, &d);
}

#define ERRNO(e) (SECCOMP_RET_ERRNO | (e))

static uint32_t x86(int nr, uint64_t a0, uint64_t a1, uint64_t a2)
{
	uint64_t args[6] = {a0, a1, a2, 0, 0, 0};
	return verdict(nr, AUDIT_ARCH_X86_64, args);
}

/* ---- the policy file ---- */

struct rule {
	char name[64];
	char action[32];
	bool cond;
	bool zero; /* an argument rule that refuses zero arguments too */
};

static struct rule *rules;
static size_t nrules;
static char def_action[32], badarch_action[32];

static void read_policy(void)
{
	FILE *f = fopen(POLICY_FILE, "r");
	if (!f)
		fail_msg("%s: %s (run from the repository's root)", POLICY_FILE,
		         strerror(errno));
	char line[1024];
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "#\n")] = '\0';
		char name[64], action[32], rest[2];
		int n = sscanf(line, "%63s %31s %1s", name, action, rest);
		if (n <= 0)
			continue;
		assert_true(n >= 2);
		if (!strcmp(name, "default")) {
			strcpy(def_action, action);
			continue;
		}
		if (!strcmp(name, "badarch")) {
			strcpy(badarch_action, action);
			continue;
		}
		rules = realloc(rules, (nrules + 1) * sizeof(*rules));
		assert_non_null(rules);
		struct rule *r = &rules[nrules++];
		memset(r, 0, sizeof(*r));
		strcpy(r->name, name);
		strcpy(r->action, action);
		r->cond = n == 3;
		/* "NAME ACTION arg0 != X": zero arguments are refused too */
		char *cond = strstr(line, action) + strlen(action);
		r->zero = r->cond &&
		          !strncmp(cond + strspn(cond, " \t"), "arg0 != ", 8);
	}
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	struct sbx_err err = {0};
	if (seccomp_prog_build(&prog, &err) < 0) {
		fprintf(stderr, "seccomp_prog_build: %s\n", err.msg);
		return -1;
	}
	read_policy();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	seccomp_prog_free(&prog);
	free(rules);
	return 0;
}

static uint32_t action_value(const char *a)
{
	if (!strcmp(a, "ALLOW"))
		return SECCOMP_RET_ALLOW;
	if (!strcmp(a, "EPERM"))
		return ERRNO(EPERM);
	if (!strcmp(a, "ENOSYS"))
		return ERRNO(ENOSYS);
	if (!strcmp(a, "EAFNOSUPPORT"))
		return ERRNO(EAFNOSUPPORT);
	if (!strcmp(a, "EPROTONOSUPPORT"))
		return ERRNO(EPROTONOSUPPORT);
	if (!strcmp(a, "KILL_PROCESS"))
		return SECCOMP_RET_KILL_PROCESS;
	fail_msg("unknown action %s in %s", a, POLICY_FILE);
	return 0;
}

static const char *show(uint32_t v, char *buf, size_t n)
{
	if (v == SECCOMP_RET_ALLOW)
		return "ALLOW";
	if (v == SECCOMP_RET_KILL_PROCESS)
		return "KILL_PROCESS";
	if ((v & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ERRNO)
		snprintf(buf, n, "ERRNO(%s)", strerrorname_np(v & 0xffff));
	else
		snprintf(buf, n, "%#x", v);
	return buf;
}

/* Every number 0..MAX_NR-1, zero arguments: what the file says, and the
 * default for every number the file does not name. */
static void test_every_number_matches_file(void **state)
{
	(void)state;
	assert_string_equal(def_action, "ENOSYS");
	static uint32_t want[MAX_NR];
	static const char *who[MAX_NR];
	for (int nr = 0; nr < MAX_NR; nr++)
		want[nr] = action_value(def_action);
	for (size_t i = 0; i < nrules; i++) {
		if (rules[i].cond)
			continue; /* the argument rules that refuse zero
			           * arguments come after */
		int nr = seccomp_syscall_nr(rules[i].name);
		if (nr == -1)
			fail_msg(
			    "%s names %s, which is no syscall this build can "
			    "resolve",
			    POLICY_FILE, rules[i].name);
		if (nr < 0)
			continue; /* a call of other architectures (stime, ...)
			           */
		assert_true(nr < MAX_NR);
		if (who[nr])
			fail_msg("%s: %s twice", POLICY_FILE, rules[i].name);
		who[nr] = rules[i].name;
		want[nr] = action_value(rules[i].action);
	}
	for (size_t i = 0; i < nrules; i++) {
		int nr = seccomp_syscall_nr(rules[i].name);
		if (rules[i].zero && nr >= 0 && nr < MAX_NR)
			want[nr] = action_value(rules[i].action);
	}
	int bad = 0;
	for (int nr = 0; nr < MAX_NR; nr++) {
		uint32_t got = x86(nr, 0, 0, 0);
		if (got != want[nr]) {
			char b1[64], b2[64];
			print_error("nr %d (%s): filter %s, %s says %s\n", nr,
			            who[nr] ? who[nr] : "not named",
			            show(got, b1, 64), POLICY_FILE,
			            show(want[nr], b2, 64));
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

/* New calls are refused by default, whatever the kernel: nothing names
 * them. */
static void test_new_and_unknown_calls_refused(void **state)
{
	(void)state;
	static const int nrs[] = {
	    206, 209, 207, 208,
	    210, 333,            /* io_setup io_submit io_destroy
	                          * io_getevents io_cancel io_pgetevents */
	    435,                 /* clone3 */
	    457, 458,            /* statmount listmount */
	    470, 471, 500, 1023, /* not allocated yet */
	};
	for (size_t i = 0; i < sizeof(nrs) / sizeof(nrs[0]); i++) {
		if (x86(nrs[i], 0, 0, 0) != ERRNO(ENOSYS))
			fail_msg("nr %d is not ENOSYS", nrs[i]);
	}
}

static void test_other_architectures_killed(void **state)
{
	(void)state;
	assert_string_equal(badarch_action, "KILL_PROCESS");
	assert_int_equal(verdict(20, AUDIT_ARCH_I386, NULL),
	                 SECCOMP_RET_KILL_PROCESS);
	assert_int_equal(verdict(1, AUDIT_ARCH_AARCH64, NULL),
	                 SECCOMP_RET_KILL_PROCESS);
	/* x32 shares x86_64's arch value; its numbers carry bit 30 */
	assert_int_equal(verdict(0x40000000 | 39, AUDIT_ARCH_X86_64, NULL),
	                 SECCOMP_RET_KILL_PROCESS);
	assert_int_equal(verdict(0x40000000 | 0, AUDIT_ARCH_X86_64, NULL),
	                 SECCOMP_RET_KILL_PROCESS);
	static const uint32_t high[] = {0x40000000u | 1023, 0x7fffffffu,
	                                0x80000000u, 0xfffffffeu};
	for (size_t i = 0; i < sizeof(high) / sizeof(high[0]); i++)
		assert_int_equal(verdict((int)high[i], AUDIT_ARCH_X86_64, NULL),
		                 SECCOMP_RET_KILL_PROCESS);
}

/* Past the table and below the x32 bit, and -1 (no call: what a tracer
 * sets to skip one), the default, as libseccomp's list answered them. */
static void test_numbers_past_the_table(void **state)
{
	(void)state;
	static const uint32_t past[] = {SECCOMP_NR_TABLE, SECCOMP_NR_TABLE + 1,
	                                65536, 0x3fffffffu, 0xffffffffu};
	for (size_t i = 0; i < sizeof(past) / sizeof(past[0]); i++)
		assert_int_equal(x86((int)past[i], 0, 0, 0), ERRNO(ENOSYS));
}

/* The reason the filter is a tree: short to check and JIT at every start
 * (~80 runs of numbers, then the argument rules; libseccomp's list of the
 * numbers alone was 357 instructions). */
static void test_filter_is_short(void **state)
{
	(void)state;
	assert_true(prog.len < 300);
}

/* seccomp_tree_build on tables of its own: every number of the table and
 * past it decided as the table says, however the runs fall; with argument
 * rules (a call numbered 5 refused with EACCES when its first argument is
 * 1), only the allowed numbers reach them. */
static uint32_t tree_answer(const uint32_t *v, size_t n, bool args, uint32_t nr,
                            uint64_t a0)
{
	uint32_t want = v[nr < n ? nr : n - 1];
	if (args && want == SECCOMP_RET_ALLOW && nr == 5 && a0 == 1)
		return ERRNO(EACCES);
	return want;
}

static void check_tree(const uint32_t *v, size_t n)
{
	static struct sock_filter rule[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	             offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 5, 0, 3),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	             offsetof(struct seccomp_data, args[0])),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 1, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	const struct seccomp_prog arg_rules = {rule,
	                                       sizeof(rule) / sizeof(rule[0])};
	for (int args = 0; args < 2; args++) {
		struct seccomp_prog f;
		struct sbx_err err = {0};
		assert_int_equal(seccomp_tree_build(
		                     v, n, args ? &arg_rules : NULL, &f, &err),
		                 0);
		for (uint32_t nr = 0; nr < n + 3; nr++)
			for (uint64_t a0 = 0; a0 < 2; a0++) {
				struct seccomp_data d = {.nr = (int)nr,
				                         .arch =
				                             AUDIT_ARCH_X86_64,
				                         .args = {a0}};
				assert_int_equal(
				    run_bpf(&f, &d),
				    tree_answer(v, n, args, nr, a0));
			}
		struct seccomp_data d = {.nr = 5, .arch = AUDIT_ARCH_I386};
		assert_int_equal(run_bpf(&f, &d), SECCOMP_RET_KILL_PROCESS);
		d = (struct seccomp_data){.nr = 0x40000005,
		                          .arch = AUDIT_ARCH_X86_64};
		assert_int_equal(run_bpf(&f, &d), SECCOMP_RET_KILL_PROCESS);
		d.nr = -1;
		assert_int_equal(run_bpf(&f, &d), v[n - 1]);
		free(f.insns);
	}
}

static void test_tree_builder(void **state)
{
	(void)state;
	static uint32_t v[600];
	const uint32_t acts[] = {SECCOMP_RET_ALLOW, ERRNO(EPERM), ERRNO(ENOSYS),
	                         ERRNO(EACCES)};
	v[0] = SECCOMP_RET_ALLOW; /* one number, one run */
	check_tree(v, 1);
	for (size_t i = 0; i < 600; i++) /* one run */
		v[i] = ERRNO(EPERM);
	check_tree(v, 600);
	for (size_t i = 0; i < 600; i++) /* runs of 7: 1 to 86 of them */
		v[i] = acts[(i / 7) % 4];
	for (size_t n = 2; n < 600; n += 61)
		check_tree(v, n);
	unsigned seed = 12345; /* ~75 runs of random lengths */
	for (size_t i = 0; i < 600; i++) {
		seed = seed * 1103515245u + 12345u;
		v[i] = i && (seed >> 16) % 8 ? v[i - 1] : acts[(seed >> 8) % 4];
	}
	check_tree(v, 600);
	/* too many runs for 8-bit jumps: refused, never a wrong filter */
	for (size_t i = 0; i < 600; i++)
		v[i] = acts[i % 2];
	struct seccomp_prog f = {0};
	struct sbx_err err = {0};
	assert_int_equal(seccomp_tree_build(v, 600, NULL, &f, &err), -E2BIG);
	assert_null(f.insns);
}

/* The argument rules: each refused case here is one (name, errno) of the
 * file's conditional lines, and every such line has a case. */
struct arg_case {
	const char *name;
	uint64_t a0, a1, a2;
	const char *action; /* as the file spells it */
};

#define HI (1ULL << 32)
static const struct arg_case arg_cases[] = {
    {"clone", CLONE_NEWUSER | 17, 0, 0, "EPERM"},
    {"clone", CLONE_NEWNS, 0, 0, "EPERM"},
    {"clone", CLONE_NEWNET | CLONE_VM, 0, 0, "EPERM"},
    {"clone", CLONE_NEWCGROUP, 0, 0, "EPERM"},
    {"clone", CLONE_NEWTIME, 0, 0, "EPERM"},
    {"clone", CLONE_NEWPID, 0, 0, "EPERM"},
    {"clone", CLONE_NEWIPC, 0, 0, "EPERM"},
    {"clone", CLONE_NEWUTS, 0, 0, "EPERM"},
    {"clone", 17 /* SIGCHLD: fork */, 0, 0, "ALLOW"},
    {"clone",
     CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
         CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID |
         CLONE_CHILD_CLEARTID,
     0, 0, "ALLOW"},
    {"clone", CLONE_VM | CLONE_VFORK | 17, 0, 0, "ALLOW"},
    {"unshare", CLONE_NEWCGROUP, 0, 0, "ALLOW"},
    {"unshare", 0, 0, 0, "EPERM"},
    {"unshare", CLONE_NEWUSER, 0, 0, "EPERM"},
    {"unshare", CLONE_NEWCGROUP | CLONE_NEWUSER, 0, 0, "EPERM"},
    {"unshare", CLONE_NEWCGROUP | CLONE_NEWNS, 0, 0, "EPERM"},
    {"unshare", CLONE_NEWCGROUP | HI, 0, 0, "EPERM"},
    {"unshare", CLONE_FILES, 0, 0, "EPERM"},
    {"ioctl", 0, TIOCSTI, 0, "EPERM"},
    {"ioctl", 0, TIOCSTI | HI, 0, "EPERM"},
    {"ioctl", 0, TIOCLINUX, 0, "EPERM"},
    {"ioctl", 0, TIOCGWINSZ, 0, "ALLOW"},
    {"ioctl", 0, FIONREAD, 0, "ALLOW"},
    {"socket", AF_VSOCK, SOCK_STREAM, 0, "EAFNOSUPPORT"},
    {"socket", AF_VSOCK | HI, SOCK_STREAM, 0, "EAFNOSUPPORT"},
    {"socket", AF_ALG, SOCK_SEQPACKET, 0, "EAFNOSUPPORT"},
    {"socket", AF_KEY, SOCK_RAW, 2, "EAFNOSUPPORT"},
    {"socket", AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT, "EPROTONOSUPPORT"},
    {"socket", AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT,
     "EPROTONOSUPPORT"},
    {"socket", AF_NETLINK | HI, SOCK_RAW, NETLINK_KOBJECT_UEVENT | HI,
     "EPROTONOSUPPORT"},
    {"socket", AF_NETLINK, SOCK_RAW, NETLINK_ROUTE, "ALLOW"},
    {"socket", AF_INET, SOCK_DGRAM, NETLINK_KOBJECT_UEVENT, "ALLOW"},
    {"socket", AF_UNIX, SOCK_STREAM, 0, "ALLOW"},
    {"socket", AF_INET6, SOCK_STREAM, 0, "ALLOW"},
    {"personality", 0x0040000 /* ADDR_NO_RANDOMIZE */, 0, 0, "EPERM"},
    {"personality", 0x0040000 | HI, 0, 0, "EPERM"},
    {"personality", 0x0400000 /* READ_IMPLIES_EXEC */, 0, 0, "EPERM"},
    {"personality", 0x0100000 /* MMAP_PAGE_ZERO */, 0, 0, "EPERM"},
    {"personality", 0x80040000UL, 0, 0, "EPERM"},
    {"personality", 0, 0, 0, "ALLOW"},
    {"personality", 0xffffffffUL, 0, 0, "ALLOW"},
    {"personality", 0x0008 /* PER_LINUX32 */, 0, 0, "ALLOW"},
};

static void test_argument_rules(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(arg_cases) / sizeof(arg_cases[0]); i++) {
		const struct arg_case *c = &arg_cases[i];
		uint32_t got =
		    x86(seccomp_syscall_nr(c->name), c->a0, c->a1, c->a2);
		if (got != action_value(c->action)) {
			char b[64];
			fail_msg("%s(%#llx, %#llx, %#llx): %s, want %s",
			         c->name, (unsigned long long)c->a0,
			         (unsigned long long)c->a1,
			         (unsigned long long)c->a2, show(got, b, 64),
			         c->action);
		}
	}
	/* the file's conditional lines and the refusals above: same set */
	for (size_t i = 0; i < nrules; i++) {
		if (!rules[i].cond)
			continue;
		bool seen = false;
		for (size_t j = 0; j < sizeof(arg_cases) / sizeof(arg_cases[0]);
		     j++)
			seen |= !strcmp(arg_cases[j].name, rules[i].name) &&
			        !strcmp(arg_cases[j].action, rules[i].action);
		if (!seen)
			fail_msg("%s: rule \"%s %s ...\" has no case here",
			         POLICY_FILE, rules[i].name, rules[i].action);
	}
	for (size_t j = 0; j < sizeof(arg_cases) / sizeof(arg_cases[0]); j++) {
		if (!strcmp(arg_cases[j].action, "ALLOW"))
			continue;
		bool seen = false;
		for (size_t i = 0; i < nrules; i++)
			seen |= rules[i].cond &&
			        !strcmp(arg_cases[j].name, rules[i].name) &&
			        !strcmp(arg_cases[j].action, rules[i].action);
		if (!seen)
			fail_msg("%s refuses %s with %s, which %s does not say",
			         "seccomp.c", arg_cases[j].name,
			         arg_cases[j].action, POLICY_FILE);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_number_matches_file),
	    cmocka_unit_test(test_new_and_unknown_calls_refused),
	    cmocka_unit_test(test_other_architectures_killed),
	    cmocka_unit_test(test_numbers_past_the_table),
	    cmocka_unit_test(test_filter_is_short),
	    cmocka_unit_test(test_tree_builder),
	    cmocka_unit_test(test_argument_rules),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
