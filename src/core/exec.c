/* One command's life on the daemon's side. Pipes are made here (the
 * daemon's ends non-blocking, in the event loop), the child's ends go to
 * init with the SPAWN. The job is over when init reported the exit and the
 * output pipes are closed (a background child holding stdout keeps the
 * command running, as in a shell), or when it was killed; then done() runs
 * once and the job is freed. Output is either kept in capped buffers or
 * handed to on_output as it arrives, with pause/resume for back-pressure:
 * a paused stream is simply not read, so the command blocks in write(). */
#include "core/exec.h"
#include "core/images.h"
#include "core/sandbox_internal.h"
#include "core/session_internal.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/util.h"
#include "runtime/builtin.h"

/* One session's state record at most: what one command's environment
 * may hold (execve takes about 2 MiB of argv and env together; the spawn
 * message the same), whatever --max-session-env allows a sandbox. */
#define STATE_LIMIT SESSION_STATE_MAX

struct exec_job {
	uint64_t id;
	struct sandbox *sb;
	struct session *sess;
	struct exec_params p; /* strings below are our copies */
	char *command, *cwd, *stdin_copy;
	char **argv, **env;
	size_t stdin_off;
	exec_done_cb done;
	void *ctx;
	struct exec_result res;
	struct buf state;
	struct loop_watch out_w, err_w, st_w, in_w;
	bool out_paused, err_paused, in_waiting;
	bool pulling; /* stdout read by exec_output_pull */
	struct loop_timer timer;
	struct loop_timer stall; /* builtins: no progress for too long */
	int cg_idx;
	bool exited, killed, finishing;
	bool tree_left;         /* killed, and its cgroup is not empty yet */
	unsigned kill_delay_ms; /* until the next kill round */
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
	if (j->p.pty && j->p.pty_slave >= 0)
		close(j->p.pty_slave);
	free(j->command);
	free(j->cwd);
	free(j->stdin_copy);
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

/* Read what is there now into b, or hand it on; returns 1 at EOF, 0 when
 * drained, 2 when the consumer asked to pause. */
static int drain(struct exec_job *j, struct loop_watch *w, struct buf *b,
                 int fd_no)
{
	char chunk[65536];
	for (int i = 0; i < 16; i++) {
		ssize_t n = read(w->fd, chunk, sizeof(chunk));
		if (n > 0) {
			if (j->p.on_output && fd_no) {
				if (j->p.on_output(j->ctx, fd_no, chunk,
				                   (size_t)n))
					return 2;
			} else {
				buf_append(b, chunk, (size_t)n);
			}
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

/* The session takes the command's cwd and exports, unless they would take
 * the sandbox's sessions past --max-session-env or cannot be given to the
 * next command at all; then the session stays as it was, and the command's
 * stderr ends with a line that says why (every face shows stderr). */
static void apply_state(struct exec_job *j)
{
	const struct config *cfg = j->sb->m->cfg;
	char why[200] = "";
	long long cost = session_state_cost(j->state.data, j->state.len);
	if (j->state.dropped && j->state.limit < STATE_LIMIT)
		snprintf(why, sizeof(why),
		         "it is larger than --max-session-env (%zu bytes)",
		         j->state.limit);
	else if (j->state.dropped || cost > STATE_LIMIT)
		snprintf(why, sizeof(why),
		         "it is larger than a command's environment may be (%u "
		         "bytes)",
		         STATE_LIMIT);
	else if (cost == -E2BIG)
		snprintf(why, sizeof(why),
		         "a variable is longer than execve takes (%u bytes)",
		         SESSION_MAX_VAR);
	if (!why[0] && cost > 0) {
		uint64_t total = (uint64_t)cost;
		for (struct session *s = j->sb->sessions; s; s = s->next)
			if (s != j->sess)
				total += session_env_cost(s);
		if (total > cfg->max_session_env)
			snprintf(
			    why, sizeof(why),
			    "the sandbox's sessions would keep %llu bytes of "
			    "environment, more than --max-session-env %llu",
			    (unsigned long long)total,
			    (unsigned long long)cfg->max_session_env);
	}
	if (!why[0]) {
		/* the session's new state is kept, for a daemon restart */
		if (session_apply_state_except(j->sess, j->state.data,
		                               j->state.len, j->env,
		                               j->p.envc) == 1)
			sandbox_session_save(j->sb, j->sess);
		return;
	}
	log_warn("sandbox=%s event=session-state-refused session=%s %s",
	         j->sb->id, j->sess->id, why);
	char note[300];
	int n = snprintf(note, sizeof(note),
	                 "sandboxd: the session keeps its previous cwd and "
	                 "environment: this command's exported environment was "
	                 "not kept, %s\n",
	                 why);
	if (j->p.on_output) {
		j->p.on_output(j->ctx, 2, note, (size_t)n);
	} else { /* past the output cap too: it must be seen */
		size_t limit = j->res.err.limit;
		j->res.err.limit = 0;
		buf_append(&j->res.err, note, (size_t)n);
		j->res.err.limit = limit;
	}
}

/* A builtin (a file operation) has no wall-clock limit: a big download to
 * a slow client may rightly take hours. It is ended instead when it makes
 * no progress for --file-timeout while the daemon waits on it, e.g. when
 * the sandbox's root SIGSTOPs it: not while its output is held back for a
 * slow client, nor while its stdin waits for an upload's next bytes. Its
 * heartbeat on stderr (runtime/builtin.h) is progress: a long delete or
 * sort is alive, a stopped builtin is silent. */
static void stall_check(struct exec_job *j)
{
	struct loop *l = j->sb->m->loop;
	uint64_t t = j->sb->m->cfg->file_timeout_ms;
	if (!j->p.builtin || !t || j->killed || j->finishing || !j->start_mono)
		return;
	bool waiting =
	    !j->out_paused && !j->err_paused &&
	    !(j->p.stdin_stream && j->in_w.fd >= 0 && !j->in_waiting);
	if (waiting)
		loop_timer_start(l, &j->stall, t);
	else
		loop_timer_stop(l, &j->stall);
}

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
	loop_timer_stop(l, &j->stall);
	/* output written before the exit is in the pipes: take it, unless
	 * its consumer is gone or full (then the rest is dropped) */
	if (j->out_w.fd >= 0 && !j->out_paused)
		drain(j, &j->out_w, &j->res.out, 1);
	if (j->err_w.fd >= 0 && !j->err_paused)
		drain(j, &j->err_w, &j->res.err, 2);
	if (j->st_w.fd >= 0)
		drain(j, &j->st_w, &j->state, 0);
	close_watch(l, &j->out_w);
	close_watch(l, &j->err_w);
	close_watch(l, &j->st_w);
	close_watch(l, &j->in_w);
	/* a background job's cd or export is its own, never the session's */
	if (j->res.failure == EXEC_OK && j->state.len && !j->p.detached)
		apply_state(j);
	if (j->cg_idx >= 0 && sb->proc.cg)
		cgroup_cmd_release(sb->proc.cg, j->cg_idx);
	j->res.duration_ms = j->start_mono ? now_mono_ms() - j->start_mono : 0;
	unlink_job(j);
	if (j->sess->running == j)
		j->sess->running = NULL;
	sb->busy--;
	if (j->p.internal)
		sandbox_keep_awake(sb);
	else
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
	sandbox_session_idle(sb, s);
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
	if (j->exited &&
	    (j->killed ? !j->tree_left : j->out_w.fd < 0 && j->err_w.fd < 0))
		finish(j);
}

static void on_output(struct loop_watch *w, uint32_t events)
{
	struct exec_job *j = w->data;
	struct loop *l = j->sb->m->loop;
	int no = w == &j->out_w ? 1 : w == &j->err_w ? 2 : 0;
	struct buf *b = no == 1   ? &j->res.out
	                : no == 2 ? &j->res.err
	                          : &j->state;
	(void)events;
	if (no == 1 && j->pulling) {
		/* stdout has bytes for the puller: it reads them itself */
		loop_del(l, w);
		j->out_paused = true;
		stall_check(j);
		j->p.on_output(j->ctx, 1, NULL, 0);
		return;
	}
	int r = drain(j, w, b, no);
	if (r == 1) {
		close_watch(l, w);
		maybe_done(j);
		return;
	}
	if (r == 2) {
		loop_del(l, w);
		*(no == 1 ? &j->out_paused : &j->err_paused) = true;
	}
	stall_check(j);
}

void exec_resume_output(struct exec_job *j)
{
	struct loop *l = j->sb->m->loop;
	if (j->out_paused && j->out_w.fd >= 0) {
		j->out_paused = false;
		loop_add(l, &j->out_w, EPOLLIN);
	}
	if (j->err_paused && j->err_w.fd >= 0) {
		j->err_paused = false;
		loop_add(l, &j->err_w, EPOLLIN);
	}
	stall_check(j);
}

ssize_t exec_output_pull(struct exec_job *j, char *buf, size_t max)
{
	struct loop *l = j->sb->m->loop;
	if (j->out_w.fd < 0)
		return -1;
	j->pulling = true;
	for (;;) {
		ssize_t n = read(j->out_w.fd, buf, max);
		if (n > 0)
			return n;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (j->out_paused) {
				j->out_paused = false;
				loop_add(l, &j->out_w, EPOLLIN);
			}
			stall_check(j);
			return 0;
		}
		close_watch(l, &j->out_w);
		maybe_done(j);
		return -1;
	}
}

/* One kill round (it never waits: see cgroup_cmd_kill), repeated from
 * the job's timer, soon while processes remain in its cgroup (a fork
 * bomb, a freeze still taking hold), else every 500 ms as the backstop
 * for a command forked but not yet in its cgroup, whose main process is
 * signalled through init until init reports its exit. The job ends once
 * its main process has exited and its cgroup is empty. */
static void kill_tree(struct exec_job *j)
{
	struct sbx_err err;
	int left = 0;
	j->killed = true;
	loop_timer_stop(j->sb->m->loop, &j->stall);
	if (j->cg_idx >= 0 && j->sb->proc.cg &&
	    (left = cgroup_cmd_kill(j->sb->proc.cg, j->cg_idx, &err)) < 0) {
		log_warn("sandbox=%s event=kill-failed %s", j->sb->id, err.msg);
		left = 0;
	}
	j->tree_left = left > 0;
	if (j->res.pid)
		exec_signal(j, SIGKILL);
	unsigned d = j->kill_delay_ms;
	j->kill_delay_ms = !left ? 500 : !d ? 2 : d < 256 ? d * 2 : 256;
	loop_timer_start(j->sb->m->loop, &j->timer, j->kill_delay_ms);
}

static void on_timeout(struct loop_timer *t)
{
	struct exec_job *j = t->data;
	if (j->res.failure == EXEC_OK) {
		j->res.failure = EXEC_TIMEOUT;
		snprintf(j->res.msg, sizeof(j->res.msg), "timeout");
	}
	kill_tree(j);
	maybe_done(j);
}

static void on_stall(struct loop_timer *t)
{
	struct exec_job *j = t->data;
	if (j->res.failure == EXEC_OK) {
		j->res.failure = EXEC_TIMEOUT;
		snprintf(j->res.msg, sizeof(j->res.msg),
		         "the file operation made no progress for %llu ms "
		         "(--file-timeout) and was ended",
		         (unsigned long long)j->sb->m->cfg->file_timeout_ms);
	}
	log_warn("sandbox=%s event=file-op-stalled pid=%d", j->sb->id,
	         j->res.pid);
	kill_tree(j);
	maybe_done(j);
}

void exec_cancel(struct exec_job *j)
{
	if (j->finishing)
		return;
	if (!j->start_mono) { /* still queued in its session */
		struct session *s = j->sess;
		for (struct exec_job **p = &j->sb->stop_queue; *p;
		     p = &(*p)->qnext)
			if (*p == j) {
				*p = j->qnext;
				break;
			}
		for (struct exec_job **p = &s->queue_head; *p; p = &(*p)->qnext)
			if (*p == j) {
				*p = j->qnext;
				if (s->queue_tail == j) {
					s->queue_tail = NULL;
					for (struct exec_job *q = s->queue_head;
					     q; q = q->qnext)
						s->queue_tail = q;
				}
				break;
			}
		fail(j, EXEC_CANCELLED, "cancelled");
		return;
	}
	if (j->res.failure == EXEC_OK) {
		j->res.failure = EXEC_CANCELLED;
		snprintf(j->res.msg, sizeof(j->res.msg), "cancelled");
	}
	kill_tree(j);
	maybe_done(j);
}

int exec_signal(struct exec_job *j, int signo)
{
	if (!j->res.pid || j->exited)
		return -ESRCH;
	struct proto_signal sg = {.pid = j->res.pid, .signo = signo};
	return proto_send(j->sb->proc.sock, PROTO_SIGNAL, j->id, &sg,
	                  sizeof(sg), NULL, 0);
}

int exec_signal_tree(struct exec_job *j, int signo)
{
	if (j->cg_idx < 0 || !j->sb->proc.cg)
		return -ESRCH;
	return cgroup_cmd_signal(j->sb->proc.cg, j->cg_idx, signo);
}

void exec_result_take(const struct exec_result *res, struct buf *out,
                      struct buf *err)
{
	/* the result is the job's, which frees what is left in it */
	struct exec_result *r = (struct exec_result *)res;
	*out = r->out;
	*err = r->err;
	buf_init(&r->out, 0);
	buf_init(&r->err, 0);
}

int exec_pid(const struct exec_job *j)
{
	return j->res.pid;
}

/* stdin: write what fits; the rest waits for EPOLLOUT */
static void pump_stdin(struct exec_job *j)
{
	while (j->stdin_copy && j->stdin_off < j->p.stdin_len) {
		ssize_t n = write(j->in_w.fd, j->stdin_copy + j->stdin_off,
		                  j->p.stdin_len - j->stdin_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			if (errno == EAGAIN && !j->in_waiting) {
				j->in_waiting = true;
				loop_add(j->sb->m->loop, &j->in_w, EPOLLOUT);
			}
			if (errno != EAGAIN)
				close_watch(j->sb->m->loop, &j->in_w);
			return;
		}
		j->stdin_off += (size_t)n;
	}
	if (j->stdin_copy)
		close_watch(j->sb->m->loop, &j->in_w);
	stall_check(j);
}

static void on_stdin_ready(struct loop_watch *w, uint32_t events)
{
	struct exec_job *j = w->data;
	(void)events;
	loop_del(j->sb->m->loop, w);
	j->in_waiting = false;
	stall_check(j);
	if (j->stdin_copy)
		pump_stdin(j);
	else if (j->p.on_stdin_drain)
		j->p.on_stdin_drain(j->ctx);
}

size_t exec_stdin_write(struct exec_job *j, const char *data, size_t len)
{
	size_t off = 0;
	if (j->in_w.fd < 0)
		return len; /* nobody reads it any more: swallow */
	while (off < len) {
		ssize_t n = write(j->in_w.fd, data + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			if (errno == EAGAIN) {
				if (!j->in_waiting) {
					j->in_waiting = true;
					loop_add(j->sb->m->loop, &j->in_w,
					         EPOLLOUT);
					stall_check(j);
				}
				return off;
			}
			close_watch(j->sb->m->loop, &j->in_w); /* EPIPE */
			stall_check(j);
			return len;
		}
		off += (size_t)n;
	}
	return off;
}

bool exec_stdin_open(const struct exec_job *j)
{
	return j->in_w.fd >= 0;
}

void exec_stdin_close(struct exec_job *j)
{
	close_watch(j->sb->m->loop, &j->in_w);
	stall_check(j);
}

static int watch_pipe(struct exec_job *j, struct loop_watch *w, int fd,
                      loop_fd_cb cb, uint32_t events)
{
	w->fd = fd;
	w->cb = cb;
	w->data = j;
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return events ? loop_add(j->sb->m->loop, w, events) : 0;
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0)
			close(p[i]);
}

/* After runtime_spawn (r): the job is the sandbox's, and either fails
 * now or runs under its time limit and stall watch. */
static bool launched(struct exec_job *j, int r, const struct sbx_err *err)
{
	struct sandbox *sb = j->sb;
	j->next = sb->jobs;
	sb->jobs = j;
	if (r < 0) {
		j->cg_idx = -1;
		fail(j, EXEC_NOT_STARTED, "%s", err->msg);
		return false;
	}
	j->timer.cb = on_timeout;
	j->timer.data = j;
	if (j->p.timeout_ms != EXEC_NO_TIMEOUT)
		loop_timer_start(sb->m->loop, &j->timer, j->p.timeout_ms);
	j->stall.cb = on_stall;
	j->stall.data = j;
	return true;
}

/* Who a command runs as: the image's User (a terminal's shell too), but
 * the daemon's builtins as root; E2B's "user" for everything it starts,
 * builtins included (their file rights are that user's). */
static void set_user(const struct exec_job *j, struct spawn_req *req)
{
	const struct image *img = j->sb->image;
	if (img && !j->p.builtin) {
		req->uid = (uint32_t)img->uid;
		req->gid = (uint32_t)img->gid;
	}
	if (j->p.as_user)
		req->uid = req->gid = EXEC_USER_ID;
}

/* A terminal's shell: the pty slave is its stdio, no pipes, no session
 * state record (an interactive shell's cd is its own). */
static void start_pty_job(struct exec_job *j)
{
	struct sandbox *sb = j->sb;
	struct sbx_err err = {0};
	size_t envc;
	const char **env = session_env_for(j->sess, (const char *const *)j->env,
	                                   j->p.envc, NULL, &envc);
	struct spawn_req req = {
	    .flags = SPAWN_CTTY | SPAWN_SEARCH_PATH |
	             (j->cwd ? 0 : SPAWN_CWD_FALLBACK),
	    .cwd = j->cwd ? j->cwd : j->sess->cwd,
	    .argv = (const char *const *)j->argv,
	    .envp = env,
	    .envc = (uint32_t)envc,
	    .nstdio = 3,
	    .targets = {0, 1, 2},
	};
	set_user(j, &req);
	int fds[3] = {j->p.pty_slave, j->p.pty_slave, j->p.pty_slave};
	for (req.argc = 0; req.argv[req.argc]; req.argc++)
		;
	int r =
	    env ? runtime_spawn(&sb->proc, j->id, &req, fds, &j->cg_idx, &err)
	        : sbx_err_set(&err, ENOMEM, "out of memory");
	free(env);
	close(j->p.pty_slave);
	j->p.pty_slave = -1;
	launched(j, r, &err);
}

static void start_job(struct exec_job *j)
{
	struct sandbox *sb = j->sb;
	struct sbx_err err = {0};
	int p_in[2] = {-1, -1}, p_out[2] = {-1, -1}, p_err[2] = {-1, -1},
	    p_st[2] = {-1, -1};
	bool shell = j->command != NULL;
	bool has_stdin = j->stdin_copy || j->p.stdin_stream;

	if (sb->state == SB_STOPPING) {
		/* it starts afresh once its stop has ended (exec_stop_ended);
		 * until then the command waits as if queued */
		struct exec_job **p = &sb->stop_queue;
		while (*p)
			p = &(*p)->qnext;
		j->qnext = NULL;
		*p = j;
		return;
	}
	if (!j->p.detached)
		j->sess->running = j;
	j->start_mono = now_mono_ms();
	j->res.start_wall_ms = now_wall_ms();
	if (sandbox_ensure_started(sb, &err) < 0) {
		fail(j, EXEC_NOT_STARTED, "%s", err.msg);
		return;
	}
	if (j->p.pty) {
		start_pty_job(j);
		return;
	}
	if (pipe2(p_out, O_CLOEXEC) < 0 || pipe2(p_err, O_CLOEXEC) < 0 ||
	    (shell && pipe2(p_st, O_CLOEXEC) < 0) ||
	    (has_stdin && pipe2(p_in, O_CLOEXEC) < 0)) {
		int e = errno;
		close_pair(p_out);
		close_pair(p_err);
		close_pair(p_st);
		close_pair(p_in);
		fail(j, EXEC_NOT_STARTED, "pipe: %s", strerror(e));
		return;
	}
	/* a file operation moves its bytes in big steps (runtime/builtin.c):
	 * fewer wakeups of the loop per MiB (at worst, the default size) */
	if (j->p.builtin) {
		fcntl(p_out[0], F_SETPIPE_SZ, BUILTIN_PIPE_SZ);
		if (has_stdin)
			fcntl(p_in[0], F_SETPIPE_SZ, BUILTIN_PIPE_SZ);
	}
	/* an image without bash runs sh: no session hook, so the session
	 * keeps its cwd and environment as they were (docs/api-v1.md) */
	const char *sh = sandbox_shell(sb);
	bool bash = sh && !strcmp(sh, "/bin/bash");
	if (shell && !sh) {
		close_pair(p_out);
		close_pair(p_err);
		close_pair(p_st);
		close_pair(p_in);
		fail(j, EXEC_NOT_STARTED,
		     "image %s has no /bin/sh: run a command as argv",
		     sb->image_id);
		return;
	}
	const char *shell_argv[] = {sh, "-c", j->command, NULL};
	size_t envc;
	const char **env = session_env_for(
	    j->sess, (const char *const *)j->env, j->p.envc,
	    shell && bash ? "BASH_ENV=" SESSION_SCRIPT : NULL, &envc);
	struct spawn_req req = {
	    .flags = j->cwd ? 0 : SPAWN_CWD_FALLBACK,
	    .cwd = j->cwd ? j->cwd : j->sess->cwd,
	    .argv = shell ? shell_argv : (const char *const *)j->argv,
	    .envp = env,
	    .envc = (uint32_t)envc,
	};
	set_user(j, &req);
	int fds[4], n = 0;
	fds[n] = p_out[1];
	req.targets[n++] = 1;
	fds[n] = p_err[1];
	req.targets[n++] = 2;
	if (shell) {
		fds[n] = p_st[1];
		req.targets[n++] = SESSION_STATE_FD;
	}
	if (has_stdin) {
		fds[n] = p_in[0];
		req.targets[n++] = 0;
	}
	req.nstdio = (uint32_t)n;
	if (!shell)
		req.flags |= j->p.builtin ? SPAWN_BUILTIN : SPAWN_SEARCH_PATH;
	for (req.argc = 0; req.argv[req.argc]; req.argc++)
		;
	int r =
	    env ? runtime_spawn(&sb->proc, j->id, &req, fds, &j->cg_idx, &err)
	        : sbx_err_set(&err, ENOMEM, "out of memory");
	free(env);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	watch_pipe(j, &j->out_w, p_out[0], on_output, EPOLLIN);
	watch_pipe(j, &j->err_w, p_err[0], on_output, EPOLLIN);
	if (shell)
		watch_pipe(j, &j->st_w, p_st[0], on_output, EPOLLIN);
	if (has_stdin)
		watch_pipe(j, &j->in_w, p_in[1], on_stdin_ready, 0);
	if (!launched(j, r, &err))
		return;
	stall_check(j);
	if (j->stdin_copy)
		pump_stdin(j);
}

uint64_t exec_timeout_for(const struct sandbox *sb, const struct session *sess,
                          uint64_t asked_ms)
{
	if (asked_ms)
		return asked_ms;
	if (sess && sess->timeout_ms)
		return sess->timeout_ms;
	return sb->m->cfg->exec_timeout_ms;
}

/* It starts now, or after the command its session is running (a
 * detached one never waits). */
static void start_or_queue(struct exec_job *j)
{
	struct session *s = j->sess;
	j->qnext = NULL;
	if (j->p.detached || !s->running) {
		start_job(j);
		return;
	}
	if (s->queue_tail)
		s->queue_tail->qnext = j;
	else
		s->queue_head = j;
	s->queue_tail = j;
}

int exec_submit(struct sandbox *sb, struct session *sess,
                const struct exec_params *p, exec_done_cb done, void *ctx,
                struct exec_job **out, struct sbx_err *err)
{
	const struct config *cfg = sb->m->cfg;
	struct exec_job *j = calloc(1, sizeof(*j));
	if (!j) {
		if (p->pty && p->pty_slave >= 0)
			close(p->pty_slave);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	j->id = ++sb->m->next_job_id;
	j->sb = sb;
	j->sess = sess ? sess : sandbox_session(sb, NULL);
	j->done = done;
	j->ctx = ctx;
	j->cg_idx = -1;
	j->out_w.fd = j->err_w.fd = j->st_w.fd = j->in_w.fd = -1;
	j->p = *p;
	j->p.timeout_ms = exec_timeout_for(sb, j->sess, p->timeout_ms);
	uint64_t cap = p->max_output ? p->max_output : cfg->max_output;
	buf_init(&j->res.out, cap);
	buf_init(&j->res.err, cap);
	buf_init(&j->state, cfg->max_session_env < STATE_LIMIT
	                        ? cfg->max_session_env
	                        : STATE_LIMIT);
	size_t argc = 0;
	if (p->argv)
		while (p->argv[argc])
			argc++;
	if ((p->command && !(j->command = strdup(p->command))) ||
	    (p->argv && !(j->argv = dup_strv(p->argv, argc))) ||
	    (p->cwd && !(j->cwd = strdup(p->cwd))) ||
	    (p->stdin_data && !(j->stdin_copy = malloc(p->stdin_len + 1))) ||
	    !(j->env = dup_strv(p->env, p->envc)) || !j->sess) {
		job_free(j);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	if (j->stdin_copy)
		memcpy(j->stdin_copy, p->stdin_data, p->stdin_len);
	sb->busy++;
	if (out)
		*out = j;
	start_or_queue(j);
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
	if (!j)
		return;
	if (err) {
		fail(j, EXEC_NOT_STARTED, "%s: %s", what, strerror(err));
		return;
	}
	j->res.pid = pid;
	if (j->killed) { /* killed before it even ran */
		exec_signal(j, SIGKILL);
		return;
	}
	if (j->p.on_started)
		j->p.on_started(j->ctx, pid);
}

void exec_on_exit(struct sandbox *sb, uint64_t id, int status, int err,
                  const char *what)
{
	struct exec_job *j = find(sb, id);
	if (!j)
		return;
	j->exited = true;
	/* a kill of any process the command ran is logged before its end */
	bool named = manager_poll_exits(sb->m);
	if (err) {
		fail(j, EXEC_NOT_STARTED, "cannot run %s: %s", what,
		     strerror(err));
		return;
	}
	if (WIFSIGNALED(status)) {
		j->res.signo = WTERMSIG(status);
		j->res.exit_code = 128 + j->res.signo;
		if (j->res.signo == SIGSYS &&
		    !named) /* a call the policy kills for */
			log_warn("sandbox=%s event=seccomp-kill pid=%d "
			         "signal=SIGSYS",
			         sb->id, j->res.pid);
	} else {
		j->res.exit_code = WEXITSTATUS(status);
	}
	maybe_done(j);
}

void exec_fail_all(struct sandbox *sb, enum exec_failure f, const char *why)
{
	/* queued ones first, so that ending a running one starts nothing */
	while (sb->stop_queue) {
		struct exec_job *j = sb->stop_queue;
		sb->stop_queue = j->qnext;
		fail(j, f, "%s", why);
	}
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
		if (sb->jobs->res.failure != EXEC_OK)
			finish(sb->jobs);
		else
			fail(sb->jobs, f, "%s", why);
	}
}

void exec_stop_ended(struct sandbox *sb)
{
	struct exec_job *j;
	while (sb->state != SB_STOPPING && (j = sb->stop_queue)) {
		sb->stop_queue = j->qnext;
		start_or_queue(j);
	}
}
