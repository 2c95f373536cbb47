/* Terminals: see terminal.h for the theory of operation. */
#include "core/terminal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core/exec.h"
#include "core/images.h"
#include "core/sandbox_internal.h"
#include "core/session_internal.h"
#include "lib/log.h"
#include "runtime/pty.h"

struct terminal_client {
	struct terminal *t;
	const struct terminal_client_ops *ops;
	void *ctx;
	bool behind;
	struct loop_timer stall; /* behind since; fires: dropped */
	struct terminal_client *next;
};

struct terminal {
	struct sandbox *sb;
	char *session;        /* its session's id */
	struct exec_job *job; /* NULL once the shell ended */
	struct loop_watch w;  /* the master */
	uint32_t events;      /* what w waits for now */
	bool eof;             /* the master hung up (no slave open) */
	char *ring;           /* the last TERMINAL_REPLAY bytes */
	size_t ring_head, ring_len;
	struct buf in; /* keystrokes the shell has not taken */
	struct terminal_client *clients;
	unsigned nbehind;
	struct loop_timer idle; /* no client: ends the shell */
	bool ending;
	bool starting; /* inside start_shell */
	bool ended_at_once;
	char start_err[700]; /* why the shell ended at once */
	/* until the sandbox is set up: what the shell starts with */
	struct loop_timer wait;
	char *shell;
	unsigned cols, rows;
	/* own terminals (terminal_opts.own) */
	bool own, as_user;
	char **argv, **env, *cwd, *note;
	size_t envc;
	int pid;
	void (*started)(void *ctx, int pid, const char *why);
	void *started_ctx;
	struct terminal *next; /* in sb->terms */
};

static struct loop *loop_of(struct terminal *t)
{
	return t->sb->m->loop;
}

static void ring_put(struct terminal *t, const char *d, size_t n)
{
	if (n > TERMINAL_REPLAY) { /* only the last ones stay */
		d += n - TERMINAL_REPLAY;
		n = TERMINAL_REPLAY;
	}
	size_t tail = (t->ring_head + t->ring_len) % TERMINAL_REPLAY;
	size_t first = TERMINAL_REPLAY - tail < n ? TERMINAL_REPLAY - tail : n;
	memcpy(t->ring + tail, d, first);
	memcpy(t->ring, d + first, n - first);
	t->ring_len += n;
	if (t->ring_len > TERMINAL_REPLAY) {
		t->ring_head = (t->ring_head + t->ring_len - TERMINAL_REPLAY) %
		               TERMINAL_REPLAY;
		t->ring_len = TERMINAL_REPLAY;
	}
}

/* What the master watch waits for: output unless a client is behind (or
 * the master hung up), room for input while keystrokes wait. */
static void update_watch(struct terminal *t)
{
	if (t->w.fd < 0)
		return;
	uint32_t ev =
	    (!t->nbehind && !t->eof ? EPOLLIN : 0) | (t->in.len ? EPOLLOUT : 0);
	if (ev == t->events)
		return;
	if (!ev)
		loop_del(loop_of(t), &t->w);
	else if (!t->events)
		loop_add(loop_of(t), &t->w, ev);
	else
		loop_mod(loop_of(t), &t->w, ev);
	t->events = ev;
}

static void client_free(struct terminal_client *c)
{
	struct terminal *t = c->t;
	loop_timer_stop(loop_of(t), &c->stall);
	if (c->behind)
		t->nbehind--;
	for (struct terminal_client **p = &t->clients; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	free(c);
}

static void set_behind(struct terminal_client *c, bool behind)
{
	struct terminal *t = c->t;
	if (c->behind == behind)
		return;
	c->behind = behind;
	if (behind) {
		t->nbehind++;
		loop_timer_start(loop_of(t), &c->stall, TERMINAL_STALL_MS);
	} else {
		t->nbehind--;
		loop_timer_stop(loop_of(t), &c->stall);
	}
}

static void fan_out(struct terminal *t, const char *d, size_t n)
{
	ring_put(t, d, n);
	for (struct terminal_client *c = t->clients; c; c = c->next)
		if (c->ops->output(c->ctx, d, n))
			set_behind(c, true);
}

/* Take what the shell wrote, up to 256 KiB per turn so that one busy
 * terminal does not hold the loop. */
static void read_master(struct terminal *t)
{
	char chunk[16384];
	for (int i = 0; i < 16 && !t->nbehind; i++) {
		ssize_t n = read(t->w.fd, chunk, sizeof(chunk));
		if (n > 0) {
			fan_out(t, chunk, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		/* EIO: no slave is open any more (the shell and all it
		 * started are gone); the job's end follows */
		t->eof = true;
		return;
	}
}

static void write_master(struct terminal *t)
{
	size_t off = 0;
	if (t->w.fd < 0 || !t->in.len)
		return; /* nothing, or the shell is not there yet: they wait */
	while (off < t->in.len) {
		ssize_t n = write(t->w.fd, t->in.data + off, t->in.len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0 && errno != EAGAIN)
				off = t->in.len; /* hung up: nobody reads */
			break;
		}
		off += (size_t)n;
	}
	memmove(t->in.data, t->in.data + off, t->in.len - off);
	t->in.len -= off;
}

static void on_master(struct loop_watch *w, uint32_t events)
{
	struct terminal *t = w->data;
	if (events & EPOLLOUT)
		write_master(t);
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		read_master(t);
	update_watch(t);
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static char **strv_dup(const char *const *v, size_t n, bool *oom)
{
	if (!v)
		return NULL;
	if (n == SIZE_MAX)
		for (n = 0; v[n]; n++)
			;
	char **d = calloc(n + 1, sizeof(*d));
	for (size_t i = 0; d && i < n; i++)
		if (!(d[i] = strdup(v[i]))) {
			strv_free(d);
			d = NULL;
		}
	if (!d)
		*oom = true;
	return d;
}

/* An own terminal's starter hears once: pid, or why not. */
static void report_started(struct terminal *t, int pid, const char *why)
{
	void (*cb)(void *, int, const char *) = t->started;
	t->started = NULL;
	if (cb)
		cb(t->started_ctx, pid, why);
}

static void terminal_free(struct terminal *t)
{
	for (struct terminal **p = &t->sb->terms; *p; p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			break;
		}
	loop_timer_stop(loop_of(t), &t->idle);
	loop_timer_stop(loop_of(t), &t->wait);
	free(t->shell);
	strv_free(t->argv);
	strv_free(t->env);
	free(t->cwd);
	free(t->note);
	if (t->w.fd >= 0) {
		loop_del(loop_of(t), &t->w);
		close(t->w.fd);
	}
	buf_free(&t->in);
	free(t->ring);
	free(t->session);
	free(t);
}

/* The end: what the shell wrote last is handed on, then every client
 * hears of it (code -1: why says what went wrong), and t is freed. */
static void terminal_end(struct terminal *t, int code, const char *why)
{
	t->ending = true;
	if (t->w.fd >= 0 && !t->eof) {
		/* the rest of its output, whoever is behind */
		t->nbehind = 0;
		read_master(t);
	}
	log_info("sandbox=%s event=terminal-ended session=%s code=%d%s%s",
	         t->sb->id, t->session, code, why ? " why=" : "",
	         why ? why : "");
	report_started(t, 0, why ? why : "the program ended at once");
	while (t->clients) {
		struct terminal_client *c = t->clients;
		/* client_free fixes nbehind; the face may free its side */
		const struct terminal_client_ops *ops = c->ops;
		void *cctx = c->ctx;
		client_free(c);
		ops->exited(cctx, code, why);
	}
	terminal_free(t);
}

/* The shell ended (or never ran, or was killed). */
static void on_shell_done(const struct exec_result *res, void *ctx)
{
	struct terminal *t = ctx;
	char why[700] = "";
	int code = res->exit_code;
	t->job = NULL;
	if (res->failure != EXEC_OK) {
		code = -1;
		snprintf(
		    why, sizeof(why), "%s%s",
		    res->failure == EXEC_NOT_STARTED ? "the shell could not "
		                                       "start: "
		    : res->failure == EXEC_STOPPED   ? "the sandbox stopped: "
		                                     : "",
		    res->msg);
	}
	if (t->starting) { /* inside exec_submit: start_shell says why */
		snprintf(t->start_err, sizeof(t->start_err), "%s",
		         why[0] ? why : "the shell ended at once");
		t->ended_at_once = true;
		return;
	}
	terminal_end(t, code, why[0] ? why : NULL);
}

static void on_idle(struct loop_timer *tm)
{
	struct terminal *t = tm->data;
	log_info("sandbox=%s event=terminal-idle session=%s: no client for "
	         "the sandbox's sleep-after; its shell is ended",
	         t->sb->id, t->session);
	if (t->job)
		exec_cancel(t->job); /* on_shell_done frees t */
	else
		terminal_end(t, -1, "no client");
}

static void on_started(void *ctx, int pid)
{
	struct terminal *t = ctx;
	t->pid = pid;
	report_started(t, pid, NULL);
}

/* No client: the shell ends after the sandbox's sleep-after (own
 * terminals run on). */
static void start_idle(struct terminal *t)
{
	if (!t->clients && t->job && !t->own)
		loop_timer_start(loop_of(t), &t->idle,
		                 t->sb->sleep_after_ms
		                     ? t->sb->sleep_after_ms
		                     : t->sb->m->cfg->sleep_after_ms);
}

static void on_stall(struct loop_timer *tm)
{
	struct terminal_client *c = tm->data;
	struct terminal *t = c->t;
	const struct terminal_client_ops *ops = c->ops;
	void *ctx = c->ctx;
	log_warn("sandbox=%s event=terminal-client-dropped session=%s: behind "
	         "for %u ms",
	         t->sb->id, t->session, TERMINAL_STALL_MS);
	client_free(c);
	update_watch(t);
	ops->dropped(ctx);
	start_idle(t);
}

/* The sandbox is set up (its devpts is mounted: a pty opened before
 * would come from whatever /dev/pts init's root had then). */
static int start_shell(struct terminal *t, struct sbx_err *err)
{
	struct sandbox *sb = t->sb;
	int master = -1, slave = -1, r;
	struct session *sess = sandbox_session(sb, t->session);
	if (!sess)
		return sbx_err_set(err, ENOENT, "no session %s", t->session);
	/* an image's own shell: bash may not be there (busybox) */
	const char *shell = t->shell ? t->shell : sandbox_shell(sb);
	if (!shell && !t->argv)
		return sbx_err_set(err, ENOENT, "image %s has no /bin/sh",
		                   sb->image_id);
	if ((r = pty_open(&sb->proc, sb->base, t->cols, t->rows, &master,
	                  &slave, err)) < 0)
		return r;
	t->w = (struct loop_watch){.fd = master, .cb = on_master, .data = t};
	/* the session's variables over the default session's (the job runs
	 * on the default session, which outlives any other), and a TERM
	 * that xterm.js and most clients speak */
	size_t envc = 0;
	const char **env = calloc(sess->envc + t->envc + 2, sizeof(char *));
	if (!env) {
		close(slave);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < sess->envc; i++)
		if (strncmp(sess->env[i], "TERM=", 5))
			env[envc++] = sess->env[i];
	env[envc++] = "TERM=xterm-256color";
	for (size_t i = 0; i < t->envc; i++) /* later ones win */
		env[envc++] = t->env[i];
	const char *argv[] = {shell, NULL};
	struct exec_params p = {
	    .argv = t->argv ? (const char *const *)t->argv : argv,
	    .as_user = t->as_user,
	    .on_started = t->own ? on_started : NULL,
	    .detached = true,
	    .env = env,
	    .envc = envc,
	    .cwd = t->cwd ? t->cwd : sess->cwd,
	    .timeout_ms = EXEC_NO_TIMEOUT,
	    .pty = true,
	    .pty_slave = slave,
	};
	struct exec_job *job = NULL;
	t->job = NULL;
	t->starting = true;
	r = exec_submit(sb, NULL, &p, on_shell_done, t, &job, err);
	t->starting = false;
	free(env);
	if (r < 0)
		return r;
	/* on_shell_done ran inside exec_submit: the job is gone */
	if (t->ended_at_once)
		return sbx_err_set(err, EIO, "%s", t->start_err);
	t->job = job;
	write_master(t); /* keystrokes typed while it started */
	update_watch(t);
	log_info("sandbox=%s event=terminal-started session=%s", sb->id,
	         t->session);
	return 0;
}

/* Waiting for the sandbox's setup (init sends READY when it is done). */
static void on_wait(struct loop_timer *tm)
{
	struct terminal *t = tm->data;
	struct sbx_err err = {0};
	if (t->sb->state == SB_STARTING) {
		loop_timer_start(loop_of(t), &t->wait, 2);
		return;
	}
	if (t->sb->state != SB_RUNNING) {
		terminal_end(t, -1, "the sandbox could not start");
		return;
	}
	if (start_shell(t, &err) < 0)
		terminal_end(t, -1, err.msg);
}

int terminal_open(struct sandbox *sb, const char *session_id,
                  const struct terminal_opts *o, struct terminal **out,
                  struct sbx_err *err)
{
	struct session *sess = sandbox_session(sb, session_id);
	if (!sess)
		return sbx_err_set(err, ENOENT, "no session %s", session_id);
	for (struct terminal *t = sb->terms; t && !o->own; t = t->next)
		if (!t->ending && !t->own && !strcmp(t->session, sess->id)) {
			*out = t;
			return 0;
		}
	int r = sandbox_ensure_started(sb, err);
	if (r < 0)
		return r;
	struct terminal *t = calloc(1, sizeof(*t));
	bool oom = false;
	if (t && o->own) {
		t->own = true;
		t->as_user = o->as_user;
		t->argv = strv_dup(o->argv, SIZE_MAX, &oom);
		t->env = strv_dup(o->env, o->envc, &oom);
		t->envc = t->env ? o->envc : 0;
		if (o->cwd && !(t->cwd = strdup(o->cwd)))
			oom = true;
	}
	if (!t || oom || !(t->ring = malloc(TERMINAL_REPLAY)) ||
	    !(t->session = strdup(sess->id)) ||
	    (o->shell && !(t->shell = strdup(o->shell)))) {
		if (t) {
			free(t->ring);
			free(t->session);
			free(t->shell);
			strv_free(t->argv);
			strv_free(t->env);
			free(t->cwd);
		}
		free(t);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	t->sb = sb;
	t->w.fd = -1;
	t->cols = o->cols;
	t->rows = o->rows;
	buf_init(&t->in, 0);
	t->idle = (struct loop_timer){.cb = on_idle, .data = t};
	t->wait = (struct loop_timer){.cb = on_wait, .data = t};
	t->next = sb->terms;
	sb->terms = t;
	if (sb->state == SB_RUNNING) {
		/* at once, so that a refusal (no pty left) is the answer */
		if ((r = start_shell(t, err)) < 0) {
			terminal_free(t);
			return r;
		}
		/* from here on, started runs once (it may have already) */
		t->started = o->started;
		t->started_ctx = o->ctx;
		if (t->pid)
			report_started(t, t->pid, NULL);
	} else {
		t->started = o->started;
		t->started_ctx = o->ctx;
		loop_timer_start(loop_of(t), &t->wait, 1);
	}
	*out = t;
	return 0;
}

struct terminal_client *terminal_attach(struct terminal *t,
                                        const struct terminal_client_ops *ops,
                                        void *ctx)
{
	struct terminal_client *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->t = t;
	c->ops = ops;
	c->ctx = ctx;
	c->stall = (struct loop_timer){.cb = on_stall, .data = c};
	c->next = t->clients;
	t->clients = c;
	loop_timer_stop(loop_of(t), &t->idle);
	size_t first = TERMINAL_REPLAY - t->ring_head < t->ring_len
	                   ? TERMINAL_REPLAY - t->ring_head
	                   : t->ring_len;
	int behind = 0;
	if (first)
		behind |= ops->output(ctx, t->ring + t->ring_head, first);
	if (t->ring_len > first)
		behind |= ops->output(ctx, t->ring, t->ring_len - first);
	if (behind)
		set_behind(c, true);
	update_watch(t);
	return c;
}

void terminal_detach(struct terminal_client *c)
{
	struct terminal *t = c->t;
	client_free(c);
	update_watch(t);
	start_idle(t);
}

void terminal_client_resume(struct terminal_client *c)
{
	set_behind(c, false);
	update_watch(c->t);
}

int terminal_input(struct terminal_client *c, const char *data, size_t len)
{
	return terminal_write(c->t, data, len);
}

int terminal_write(struct terminal *t, const char *data, size_t len)
{
	if (t->ending)
		return -EPIPE;
	if (t->in.len + len > TERMINAL_INPUT_MAX)
		return -ENOBUFS;
	if (buf_append(&t->in, data, len) < 0)
		return -ENOMEM;
	write_master(t);
	update_watch(t);
	sandbox_touch(t->sb);
	return 0;
}

int terminal_resize(struct terminal_client *c, unsigned cols, unsigned rows)
{
	return terminal_set_size(c->t, cols, rows);
}

int terminal_set_size(struct terminal *t, unsigned cols, unsigned rows)
{
	t->cols = cols;
	t->rows = rows;
	if (t->w.fd < 0)
		return t->ending ? -EPIPE : 0; /* taken when the shell starts */
	return pty_resize(t->w.fd, cols, rows);
}

struct terminal *terminal_find(struct sandbox *sb, int pid)
{
	for (struct terminal *t = sb->terms; t && pid > 0; t = t->next)
		if (t->own && !t->ending && t->job && t->pid == pid)
			return t;
	return NULL;
}

struct terminal *terminal_next(struct sandbox *sb, struct terminal *prev)
{
	for (struct terminal *t = prev ? prev->next : sb->terms; t; t = t->next)
		if (t->own && !t->ending && t->job && t->pid > 0)
			return t;
	return NULL;
}

int terminal_pid(const struct terminal *t)
{
	return t->pid;
}

int terminal_signal(struct terminal *t, int signo)
{
	if (!t->job)
		return -ESRCH;
	/* the main process by its pid too (it may not have joined its
	 * cgroup yet) */
	exec_signal(t->job, signo);
	exec_signal_tree(t->job, signo);
	return 0;
}

int terminal_set_note(struct terminal *t, const char *note)
{
	char *n = note ? strdup(note) : NULL;
	if (note && !n)
		return -ENOMEM;
	free(t->note);
	t->note = n;
	return 0;
}

const char *terminal_note(const struct terminal *t)
{
	return t->note;
}
