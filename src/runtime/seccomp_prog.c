/* The seccomp policy as data: built by the daemon (seccomp.c,
 * seccomp_tree.c), carried to each sandbox's init in its PROTO_INIT packet, and
 * installed there once. This half links against nothing but libc, so that
 * init does not need libseccomp. */
#include "runtime/seccomp.h"

#include <linux/seccomp.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

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
