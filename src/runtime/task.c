#include "runtime/task.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct task_result {
	int ret;
	uint64_t value;
	struct sbx_err err;
};

int runtime_task_start(struct runtime_task *t, runtime_task_fn fn, void *arg,
                       struct sbx_err *err)
{
	int p[2];
	pid_t parent = getpid();
	t->pid = 0;
	t->pidfd = t->msgfd = -1;
	if (pipe2(p, O_CLOEXEC) < 0)
		return sbx_err_sys(err, errno, "task: pipe");
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		return sbx_err_sys(err, e, "task: fork");
	}
	if (pid == 0) {
		struct task_result res = {0};
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1); /* the daemon is gone already */
		if (dup2(p[1], 3) != 3)
			_exit(1);
		syscall(SYS_close_range, 4, ~0U, 0);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		res.ret = fn(arg, &res.value, &res.err);
		if (res.ret < 0 && !res.err.code)
			sbx_err_set(&res.err, -res.ret, "%s",
			            strerror(-res.ret));
		if (write(3, &res, sizeof(res)) != sizeof(res))
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	t->pid = pid;
	t->msgfd = p[0];
	t->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (t->pidfd < 0) {
		int e = errno;
		runtime_task_kill(t);
		return sbx_err_sys(err, e, "task: pidfd_open");
	}
	fcntl(t->pidfd, F_SETFD, FD_CLOEXEC);
	return 0;
}

int runtime_task_end(struct runtime_task *t, uint64_t *value,
                     struct sbx_err *err)
{
	struct task_result res = {0};
	int st;
	while (t->pid > 0 && waitpid(t->pid, &st, 0) < 0 && errno == EINTR)
		;
	t->pid = 0;
	ssize_t n = t->msgfd >= 0 ? read(t->msgfd, &res, sizeof(res)) : -1;
	if (t->msgfd >= 0)
		close(t->msgfd);
	if (t->pidfd >= 0)
		close(t->pidfd);
	t->msgfd = t->pidfd = -1;
	if (n != sizeof(res))
		return sbx_err_set(err, EINTR, "the worker process died");
	if (value)
		*value = res.value;
	if (res.ret < 0 && err) {
		res.err.msg[sizeof(res.err.msg) - 1] = '\0';
		*err = res.err;
	}
	return res.ret < 0 ? (res.err.code ? -res.err.code : res.ret) : res.ret;
}

void runtime_task_kill(struct runtime_task *t)
{
	if (t->pid > 0)
		kill(t->pid, SIGKILL);
	runtime_task_end(t, NULL, NULL);
}
