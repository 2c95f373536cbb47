#include "daemon/exec.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/util.h"
#include "runtime/image.h"

#define STATE_LIMIT (1u << 20)

struct exec_job {
	uint64_t id;
	struct sandbox *sb;
	struct session *sess;
	char *command, *cwd;
	char **argv, **env;
	size_t envc;
	uint64_t timeout_ms;
	exec_done_cb done;
	void *ctx;
	struct exec_result res;
	struct buf state;
	struct loop_watch out_w, err_w, st_w;
	struct loop_timer timer;
	int cg_idx;
	bool exited, killed, finishing;
	uint64_t start_mono;
	struct exec_job *next;  /* in sb->jobs */
	struct exec_job *qnext; /* in its session's queue */
};

static char **dup_strv(const char *const *v, size_t n)
{
	char **out = calloc(n + 1, sizeof(char *));
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (!(out[i] = strdup(v[i]))) {
			for (size_t j = 0; j < i; j++)
				free(out[j]);
			free(out);
			return NULL;
		}
	}
	return out;
}

static void free_strv(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

static void job_free(struct exec_job *j)
{
	free(j->command);
	free(j->cwd);
	free_strv(j->argv);
	free_strv(j->env);
	buf_free(&j->res.out);
	buf_free(&j->res.err);
	buf_free(&j->state);
	free(j);
}

static void close_watch(struct loop *l, struct loop_watch *w)
{
	loop_del(l, w);
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

/* Read what is there now; returns 1 at EOF. */
static int drain(struct loop_watch *w, struct buf *b)
{
	char chunk[65536];
	for (int i = 0; i < 64; i++) {
		ssize_t n = read(w->fd, chunk, sizeof(chunk));
		if (n > 0) {
			buf_append(b, chunk, (size_t)n);
			continue;
		}
		if (n == 0)
			return 1;
		if (errno == EINTR)
			continue;
		return errno == EAGAIN ? 0 : 1;
	}
	return 0;
}

static void start_job(struct exec_job *j);

static void unlink_job(struct exec_job *j)
{
	for (struct exec_job **p = &j->sb->jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			break;
		}
}

static void finish(struct exec_job *j)
{
	struct sandbox *sb = j->sb;
	struct loop *l = sb->m->loop;

	if (j->finishing)
		return;
	j->finishing = true;
	loop_timer_stop(l, &j->timer);
	/* output written before the exit is in the pipes: take it */
	if (j->out_w.fd >= 0)
		drain(&j->out_w, &j->res.out);
	if (j->err_w.fd >= 0)
		drain(&j->err_w, &j->res.err);
	if (j->st_w.fd >= 0)
		drain(&j->st_w, &j->state);
	close_watch(l, &j->out_w);
	close_watch(l, &j->err_w);
	close_watch(l, &j->st_w);
	if (j->res.failure == EXEC_OK && j->state.len)
		session_apply_state(j->sess, j->state.data, j->state.len);
	if (j->cg_idx >= 0 && sb->proc.cg)
		cgroup_cmd_release(sb->proc.cg, j->cg_idx);
	j->res.duration_ms = j->start_mono ? now_mono_ms() - j->start_mono : 0;
	unlink_job(j);
	if (j->sess->running == j)
		j->sess->running = NULL;
	sb->busy--;
	sandbox_touch(sb);

	/* the session's next command goes first: done() may free things */
	struct session *s = j->sess;
	if (!s->running && s->queue_head) {
		struct exec_job *n = s->queue_head;
		s->queue_head = n->qnext;
		if (!s->queue_head)
			s->queue_tail = NULL;
		start_job(n);
	}
	j->done(&j->res, j->ctx);
	job_free(j);
}

static void fail(struct exec_job *j, enum exec_failure f, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void fail(struct exec_job *j, enum exec_failure f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(j->res.msg, sizeof(j->res.msg), fmt, ap);
	va_end(ap);
	j->res.failure = f;
	finish(j);
}

static void maybe_done(struct exec_job *j)
{
	if (j->exited && (j->killed || (j->out_w.fd < 0 && j->err_w.fd < 0)))
		finish(j);
}

static void on_output(struct loop_watch *w, uint32_t events)
{
	struct exec_job *j = w->data;
	struct buf *b = w == &j->out_w ? &j->res.out
			: w == &j->err_w ? &j->res.err
					 : &j->state;
	(void)events;
	if (drain(w, b)) {
		close_watch(j->sb->m->loop, w);
		maybe_done(j);
	}
}

static void on_timeout(struct loop_timer *t)
{
	struct exec_job *j = t->data;
	struct sbx_err err;
	j->killed = true;
	j->res.failure = EXEC_TIMEOUT;
	snprintf(j->res.msg, sizeof(j->res.msg), "timeout");
	if (j->sb->proc.cg && cgroup_cmd_kill(j->sb->proc.cg, j->cg_idx, &err) < 0) {
		log_warn("sandbox=%s event=kill-failed %s", j->sb->id, err.msg);
		loop_timer_start(j->sb->m->loop, t, 1000); /* try again */
	}
	maybe_done(j);
}

static int watch_pipe(struct exec_job *j, struct loop_watch *w, int fd)
{
	w->fd = fd;
	w->cb = on_output;
	w->data = j;
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return loop_add(j->sb->m->loop, w, EPOLLIN);
}

static void start_job(struct exec_job *j)
{
	struct sandbox *sb = j->sb;
	struct sbx_err err = {0};
	int p_out[2] = {-1, -1}, p_err[2] = {-1, -1}, p_st[2] = {-1, -1};

	j->sess->running = j;
	j->start_mono = now_mono_ms();
	j->res.start_wall_ms = now_wall_ms();
	if (sandbox_ensure_started(sb, &err) < 0) {
		fail(j, EXEC_NOT_STARTED, "%s", err.msg);
		return;
	}
	bool shell = j->command != NULL;
	if (pipe2(p_out, O_CLOEXEC) < 0 || pipe2(p_err, O_CLOEXEC) < 0 ||
	    (shell && pipe2(p_st, O_CLOEXEC) < 0)) {
		int e = errno;
		for (int i = 0; i < 2; i++) {
			if (p_out[i] >= 0) close(p_out[i]);
			if (p_err[i] >= 0) close(p_err[i]);
		}
		fail(j, EXEC_NOT_STARTED, "pipe: %s", strerror(e));
		return;
	}
	const char *shell_argv[] = {"/bin/bash", "-c", j->command, NULL};
	size_t envc;
	const char **env = session_env_for(
		j->sess, (const char *const *)j->env, j->envc,
		shell ? "BASH_ENV=" IMAGE_SESSION_SCRIPT : NULL, &envc);
	struct spawn_req req = {
		.flags = j->cwd ? 0 : SPAWN_CWD_FALLBACK,
		.nstdio = shell ? 3 : 2,
		.targets = {1, 2, 3},
		.cwd = j->cwd ? j->cwd : j->sess->cwd,
		.argv = shell ? shell_argv : (const char *const *)j->argv,
		.envp = env,
		.envc = (uint32_t)envc,
	};
	if (!shell)
		req.flags |= SPAWN_SEARCH_PATH;
	for (req.argc = 0; req.argv[req.argc]; req.argc++)
		;
	int fds[3] = {p_out[1], p_err[1], p_st[1]};
	int r = env ? runtime_spawn(&sb->proc, j->id, &req, fds, &j->cg_idx, &err)
		    : sbx_err_set(&err, ENOMEM, "out of memory");
	free(env);
	close(p_out[1]);
	close(p_err[1]);
	if (shell)
		close(p_st[1]);
	watch_pipe(j, &j->out_w, p_out[0]);
	watch_pipe(j, &j->err_w, p_err[0]);
	if (shell)
		watch_pipe(j, &j->st_w, p_st[0]);
	j->next = sb->jobs;
	sb->jobs = j;
	if (r < 0) {
		j->cg_idx = -1;
		fail(j, EXEC_NOT_STARTED, "%s", err.msg);
		return;
	}
	j->timer.cb = on_timeout;
	j->timer.data = j;
	loop_timer_start(sb->m->loop, &j->timer, j->timeout_ms);
}

int exec_submit(struct sandbox *sb, struct session *sess,
		const struct exec_params *p, exec_done_cb done, void *ctx,
		struct sbx_err *err)
{
	const struct config *cfg = sb->m->cfg;
	struct exec_job *j = calloc(1, sizeof(*j));
	if (!j)
		return sbx_err_set(err, ENOMEM, "out of memory");
	j->id = ++sb->m->next_job_id;
	j->sb = sb;
	j->sess = sess ? sess : sandbox_session(sb, NULL);
	j->done = done;
	j->ctx = ctx;
	j->cg_idx = -1;
	j->out_w.fd = j->err_w.fd = j->st_w.fd = -1;
	j->timeout_ms = p->timeout_ms ? p->timeout_ms : cfg->exec_timeout_ms;
	uint64_t cap = p->max_output ? p->max_output : cfg->max_output;
	buf_init(&j->res.out, cap);
	buf_init(&j->res.err, cap);
	buf_init(&j->state, STATE_LIMIT);
	size_t argc = 0;
	if (p->argv)
		while (p->argv[argc])
			argc++;
	if ((p->command && !(j->command = strdup(p->command))) ||
	    (p->argv && !(j->argv = dup_strv(p->argv, argc))) ||
	    (p->cwd && !(j->cwd = strdup(p->cwd))) ||
	    !(j->env = dup_strv(p->env, p->envc)) || !j->sess) {
		job_free(j);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	j->envc = p->envc;
	sb->busy++;
	if (j->sess->running) {
		if (j->sess->queue_tail)
			j->sess->queue_tail->qnext = j;
		else
			j->sess->queue_head = j;
		j->sess->queue_tail = j;
		return 0;
	}
	start_job(j);
	return 0;
}

static struct exec_job *find(struct sandbox *sb, uint64_t id)
{
	for (struct exec_job *j = sb->jobs; j; j = j->next)
		if (j->id == id)
			return j;
	return NULL;
}

void exec_on_spawned(struct sandbox *sb, uint64_t id, int pid, int err,
		     const char *what)
{
	struct exec_job *j = find(sb, id);
	(void)pid;
	if (j && err)
		fail(j, EXEC_NOT_STARTED, "%s: %s", what, strerror(err));
}

void exec_on_exit(struct sandbox *sb, uint64_t id, int status, int err,
		  const char *what)
{
	struct exec_job *j = find(sb, id);
	if (!j)
		return;
	j->exited = true;
	if (err) {
		fail(j, EXEC_NOT_STARTED, "cannot run %s: %s", what,
		     strerror(err));
		return;
	}
	if (WIFSIGNALED(status)) {
		j->res.signo = WTERMSIG(status);
		j->res.exit_code = 128 + j->res.signo;
	} else {
		j->res.exit_code = WEXITSTATUS(status);
	}
	maybe_done(j);
}

void exec_fail_all(struct sandbox *sb, enum exec_failure f, const char *why)
{
	/* queued ones first, so that ending a running one starts nothing */
	for (struct session *s = sb->sessions; s; s = s->next) {
		while (s->queue_head) {
			struct exec_job *j = s->queue_head;
			s->queue_head = j->qnext;
			if (!s->queue_head)
				s->queue_tail = NULL;
			fail(j, f, "%s", why);
		}
	}
	while (sb->jobs) {
		sb->jobs->cg_idx = -1; /* the sandbox's cgroups are gone */
		if (sb->jobs->res.failure == EXEC_TIMEOUT)
			finish(sb->jobs);
		else
			fail(sb->jobs, f, "%s", why);
	}
}
