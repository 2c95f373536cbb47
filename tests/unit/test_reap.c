/* The runtime's stop without waiting: runtime_kill gives a pidfd that
 * turns readable when init has exited, runtime_reap_nowait reaps only
 * then (0 before, never blocking), and runtime_reap still waits. A plain
 * child stands in for init (no cgroups, no socket). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/runtime.h"

static struct sandbox_proc child(void)
{
	struct sandbox_proc sp = {.sock = -1, .pidfd = -1};
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (;;)
			pause();
	}
	sp.init_pid = pid;
	return sp;
}

static void test_nowait_before_the_kill_is_not_done(void **state)
{
	(void)state;
	struct sandbox_proc sp = child();
	pid_t pid = sp.init_pid;
	/* alive: not reaped, nothing closed */
	assert_int_equal(runtime_reap_nowait(&sp), 0);
	assert_int_equal(sp.init_pid, pid);
	runtime_kill(&sp);
	assert_true(sp.pidfd >= 0);
	struct pollfd p = {.fd = sp.pidfd, .events = POLLIN};
	assert_int_equal(poll(&p, 1, 30000), 1);
	assert_int_equal(runtime_reap_nowait(&sp), 1);
	assert_int_equal(sp.init_pid, 0);
	assert_int_equal(sp.pidfd, -1);
	/* reaped: the pid is no child of ours any more */
	assert_int_equal(waitpid(pid, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
	/* again: nothing to do, done */
	assert_int_equal(runtime_reap_nowait(&sp), 1);
}

static void test_reap_still_waits(void **state)
{
	(void)state;
	struct sandbox_proc sp = child();
	pid_t pid = sp.init_pid;
	runtime_kill(&sp);
	runtime_reap(&sp);
	assert_int_equal(sp.init_pid, 0);
	assert_int_equal(sp.pidfd, -1);
	assert_int_equal(waitpid(pid, NULL, WNOHANG), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nowait_before_the_kill_is_not_done),
	    cmocka_unit_test(test_reap_still_waits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
