#include "core/process_internal.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/sandbox_internal.h"
#include "lib/log.h"
#include "lib/util.h"

#define MAX_ENDED 256 /* finished processes remembered per sandbox */

struct process_follower {
	struct process *p;
	const struct process_follow_ops *ops;
	void *ctx;
	uint64_t cursor;
	bool paused;
	struct process_follower *next;
};

const char *process_status_name(enum process_status s)
{
	static const char *const names[] = {"running", "completed", "failed",
	                                    "killed"};
	return names[s];
}

void process_info(const struct process *p, struct process_info *out)
{
	*out = (struct process_info){
	    .id = p->id,
	    .command = p->command,
	    .note = p->note,
	    .error = p->error,
	    .pid = p->pid,
	    .status = p->status,
	    .exit_code = p->exit_code,
	    .signo = p->signo,
	    .timed_out = p->timed_out,
	    .ended = p->ended,
	    .start_ms = p->start_ms,
	    .end_ms = p->end_ms,
	    .log_start = p->log_start,
	    .log_end = p->log_end,
	    .log_dropped = p->log_dropped,
	};
}

bool process_ended(const struct process *p)
{
	return p->ended;
}

int process_set_note(struct process *p, const char *note)
{
	char *n = NULL;
	if (note && !(n = strdup(note)))
		return -ENOMEM;
	free(p->note);
	p->note = n;
	return 0;
}

static void follow_pump(struct process_follower *f);

static void pump_all(struct process *p)
{
	for (struct process_follower *f = p->followers, *n; f; f = n) {
		n = f->next;
		follow_pump(f);
	}
}

/* Drop the oldest n bytes of p's log (n <= what it keeps). */
static void log_drop(struct process *p, uint64_t n)
{
	while (n && p->head) {
		struct log_chunk *h = p->head;
		size_t d = n < h->len ? (size_t)n : h->len;
		h->data += d;
		h->start += d;
		h->len -= d;
		p->log_bytes -= d;
		n -= d;
		if (!h->len) {
			p->head = h->next;
			if (!p->head)
				p->tail = NULL;
			free(h);
		}
	}
	p->log_start = p->head ? p->head->start : p->log_end;
	p->log_dropped = true;
}

/* Whose oldest output goes when the sandbox keeps more than
 * --max-process-logs: the process that ended longest ago, else the
 * running one that keeps the most. */
static struct process *log_victim(struct sandbox *sb)
{
	struct process *ended = NULL, *biggest = NULL;
	for (struct process *q = sb->procs; q; q = q->next) {
		if (!q->log_bytes)
			continue;
		if (q->ended)
			ended = q; /* the list is newest first */
		else if (!biggest || q->log_bytes > biggest->log_bytes)
			biggest = q;
	}
	return ended ? ended : biggest;
}

static void log_add(struct process *p, int fd, const char *data, size_t len)
{
	const struct config *cfg = p->sb->m->cfg;
	uint64_t cap = cfg->max_output;
	/* what would be dropped at once is never stored */
	if (len > cap) {
		p->log_end += len - cap;
		data += len - cap;
		len = (size_t)cap;
		log_drop(p, p->log_bytes);
	}
	struct log_chunk *c = malloc(sizeof(*c) + len);
	if (!c)
		return;
	c->next = NULL;
	c->start = p->log_end;
	c->len = len;
	c->fd = (uint8_t)fd;
	c->data = (char *)(c + 1);
	memcpy(c->data, data, len);
	if (p->tail)
		p->tail->next = c;
	else
		p->head = c;
	p->tail = c;
	p->log_end += len;
	p->log_bytes += len;
	/* exact caps, oldest bytes first (a follower behind them is told):
	 * this process's, then the sandbox's over all its processes */
	if (p->log_bytes > cap)
		log_drop(p, p->log_bytes - cap);
	uint64_t total = 0;
	for (struct process *q = p->sb->procs; q; q = q->next)
		total += q->log_bytes;
	while (total > cfg->max_process_logs) {
		struct process *v = log_victim(p->sb);
		uint64_t n = total - cfg->max_process_logs;
		if (!v)
			break;
		if (n > v->log_bytes)
			n = v->log_bytes;
		log_drop(v, n);
		total -= n;
	}
}

static int on_output(void *ctx, int fd, const char *data, size_t len)
{
	struct process *p = ctx;
	log_add(p, fd, data, len);
	pump_all(p);
	return 0; /* never paused: slow followers catch up from the log */
}

static void on_started(void *ctx, int pid)
{
	struct process *p = ctx;
	p->pid = pid;
	if (p->on_started) {
		void (*cb)(struct process *, void *) = p->on_started;
		p->on_started = NULL;
		cb(p, p->started_ctx);
	}
}

static void stdin_finish(struct process *p, int err)
{
	void (*done)(void *, int) = p->stdin_done;
	p->stdin_done = NULL;
	buf_reset(&p->stdin_pending);
	if (p->stdin_close_after && p->job) {
		p->stdin_close_after = false;
		exec_stdin_close(p->job);
	}
	if (done)
		done(p->stdin_ctx, err);
}

static void on_stdin_drain(void *ctx)
{
	struct process *p = ctx;
	if (!p->job || !p->stdin_pending.len)
		return;
	size_t n = exec_stdin_write(p->job, p->stdin_pending.data,
	                            p->stdin_pending.len);
	memmove(p->stdin_pending.data, p->stdin_pending.data + n,
	        p->stdin_pending.len - n);
	p->stdin_pending.len -= n;
	if (!exec_stdin_open(p->job))
		stdin_finish(p, -EPIPE); /* it stopped reading: bytes lost */
	else if (!p->stdin_pending.len)
		stdin_finish(p, 0);
}

/* Unlink and free a record nobody watches. */
static void forget(struct sandbox *sb, struct process *p)
{
	for (struct process **l = &sb->procs; *l; l = &(*l)->next)
		if (*l == p) {
			*l = p->next;
			break;
		}
	for (struct log_chunk *c = p->head, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	buf_free(&p->stdin_pending);
	free(p->id);
	free(p->command);
	free(p->note);
	free(p);
	sb->nprocs--;
}

static void forget_oldest_ended(struct sandbox *sb)
{
	unsigned ended = 0;
	struct process *oldest = NULL;
	for (struct process *p = sb->procs; p; p = p->next)
		if (p->ended && !p->followers) {
			ended++;
			oldest = p; /* the list is newest first */
		}
	if (ended > MAX_ENDED && oldest)
		forget(sb, oldest);
}

static void on_done(const struct exec_result *res, void *ctx)
{
	struct process *p = ctx;
	struct loop *l = p->sb->m->loop;
	p->job = NULL;
	p->ended = true;
	p->end_ms = now_wall_ms();
	p->exit_code = res->exit_code;
	p->signo = res->signo;
	p->timed_out = res->failure == EXEC_TIMEOUT;
	loop_timer_stop(l, &p->kill_timer);
	if (p->kill_requested)
		p->status = PROC_KILLED;
	else if (res->failure == EXEC_OK && res->exit_code == 0)
		p->status = PROC_COMPLETED;
	else
		p->status = PROC_FAILED;
	if (res->failure == EXEC_NOT_STARTED || res->failure == EXEC_STOPPED)
		snprintf(p->error, sizeof(p->error), "%s", res->msg);
	if (res->failure == EXEC_TIMEOUT)
		p->exit_code = 124;
	log_info("sandbox=%s event=process-ended id=%s status=%s exit=%d",
	         p->sb->id, p->id, process_status_name(p->status),
	         p->exit_code);
	if (p->stdin_done)
		stdin_finish(p, -ESRCH);
	if (p->on_started) { /* a creator still waiting hears of the end */
		void (*cb)(struct process *, void *) = p->on_started;
		p->on_started = NULL;
		cb(p, p->started_ctx);
	}
	pump_all(p);
	forget_oldest_ended(p->sb);
}

int process_start(struct sandbox *sb, struct session *sess, const char *id,
                  const struct exec_params *params, const char *display,
                  void (*cb)(struct process *p, void *ctx), void *ctx,
                  struct process **out, struct sbx_err *err)
{
	char gen[32];
	struct process *old = process_find(sb, id);
	if (old && !old->ended)
		return sbx_err_set(err, EEXIST, "process %s is running", id);
	while (!id) {
		id_random(gen, sizeof(gen), "proc_");
		id = process_find(sb, gen) ? NULL : gen;
	}
	struct process *p = calloc(1, sizeof(*p));
	if (!p || !(p->id = strdup(id)) || !(p->command = strdup(display))) {
		if (p)
			free(p->id);
		free(p);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	if (old && !old->followers) /* an ended one by that name: replaced */
		forget(sb, old);
	else if (old)
		old->id[0] = '\0'; /* still streamed: keep it, nameless */
	p->sb = sb;
	p->status = PROC_RUNNING;
	p->start_ms = now_wall_ms();
	p->on_started = cb;
	p->started_ctx = ctx;
	p->kill_timer.data = p;
	buf_init(&p->stdin_pending, 0);
	p->next = sb->procs;
	sb->procs = p;
	sb->nprocs++;
	struct exec_params ep = *params;
	ep.detached = true;
	ep.stdin_stream = true;
	ep.on_output = on_output;
	ep.on_started = on_started;
	ep.on_stdin_drain = on_stdin_drain;
	if (!ep.timeout_ms)
		ep.timeout_ms = EXEC_NO_TIMEOUT;
	log_info("sandbox=%s event=process-started id=%s", sb->id, p->id);
	int r = exec_submit(sb, sess, &ep, on_done, p, &p->job, err);
	if (r < 0) {
		forget(sb, p);
		return r;
	}
	*out = p;
	return 0;
}

struct process *process_next(struct sandbox *sb, struct process *prev)
{
	return prev ? prev->next : sb->procs;
}

struct process *process_find(struct sandbox *sb, const char *id)
{
	if (!id)
		return NULL;
	for (struct process *p = sb->procs; p; p = p->next)
		if (!strcmp(p->id, id))
			return p;
	char *end;
	long pid = strtol(id, &end, 10);
	if (*id && !*end && pid > 0)
		for (struct process *p = sb->procs; p; p = p->next)
			if (p->pid == pid)
				return p;
	return NULL;
}

static void on_kill_timer(struct loop_timer *t)
{
	struct process *p = t->data;
	if (p->job)
		exec_cancel(p->job);
}

int process_kill(struct process *p, uint64_t grace_ms)
{
	if (p->ended || !p->job)
		return -ESRCH;
	p->kill_requested = true;
	exec_signal_tree(p->job, SIGTERM);
	exec_signal_tree(p->job, SIGCONT); /* a stopped tree must hear it */
	p->kill_timer.cb = on_kill_timer;
	loop_timer_start(p->sb->m->loop, &p->kill_timer, grace_ms);
	return 0;
}

int process_signal(struct process *p, int signo)
{
	if (p->ended || !p->job)
		return -ESRCH;
	/* the main process by its pid too: a command that was just started
	 * may not have joined its cgroup yet, and then has no tree either */
	exec_signal(p->job, signo);
	exec_signal_tree(p->job, signo);
	return 0;
}

void process_logs(const struct process *p, struct process_info *info,
                  struct buf *out, struct buf *err)
{
	process_info(p, info);
	buf_init(out, 0);
	buf_init(err, 0);
	for (const struct log_chunk *c = p->head; c; c = c->next)
		buf_append(c->fd == 1 ? out : err, c->data, c->len);
}

int process_stdin(struct process *p, const char *data, size_t len,
                  void (*done)(void *ctx, int err), void *ctx)
{
	if (p->ended || !p->job)
		return -ESRCH;
	if (p->stdin_pending.len)
		return -EBUSY;
	size_t n = exec_stdin_write(p->job, data, len);
	if (!exec_stdin_open(p->job))
		return -EPIPE;
	if (n == len)
		return 0;
	if (buf_append(&p->stdin_pending, data + n, len - n) < 0)
		return -ENOMEM;
	p->stdin_done = done;
	p->stdin_ctx = ctx;
	return 1;
}

int process_stdin_close(struct process *p)
{
	if (p->ended || !p->job)
		return -ESRCH;
	if (p->stdin_pending.len)
		p->stdin_close_after = true;
	else
		exec_stdin_close(p->job);
	return 0;
}

void process_stdin_forget(struct process *p)
{
	p->stdin_done = NULL;
}

/* ---- followers ---------------------------------------------------------- */

static void follower_free(struct process_follower *f)
{
	for (struct process_follower **l = &f->p->followers; *l;
	     l = &(*l)->next)
		if (*l == f) {
			*l = f->next;
			break;
		}
	free(f);
}

/* Feed what the follower has not had yet, as far as it takes it; then,
 * once the process ended and all is delivered, its end. */
static void follow_pump(struct process_follower *f)
{
	struct process *p = f->p;
	f->paused = false;
	if (f->cursor < p->log_start) {
		f->cursor = p->log_start;
		if (f->ops->dropped)
			f->ops->dropped(f->ctx);
	}
	for (struct log_chunk *c = p->head; c; c = c->next) {
		if (c->start + c->len <= f->cursor)
			continue;
		size_t skip = (size_t)(f->cursor - c->start);
		f->cursor = c->start + c->len;
		if (f->ops->output(f->ctx, c->fd, f->cursor, c->data + skip,
		                   c->len - skip)) {
			f->paused = true;
			return; /* process_follow_resume brings us back */
		}
	}
	if (p->ended) {
		f->ops->ended(f->ctx, p, false);
		follower_free(f);
	}
}

int process_follow(struct process *p, uint64_t cursor,
                   const struct process_follow_ops *ops, void *ctx,
                   struct process_follower **out)
{
	struct process_follower *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->p = p;
	f->ops = ops;
	f->ctx = ctx;
	f->cursor = cursor;
	f->next = p->followers;
	p->followers = f;
	*out = f;
	follow_pump(f);
	return 0;
}

void process_follow_resume(struct process_follower *f)
{
	if (f->paused)
		follow_pump(f);
}

void process_unfollow(struct process_follower *f)
{
	follower_free(f);
}

void process_free_all(struct sandbox *sb)
{
	while (sb->procs) {
		struct process *p = sb->procs;
		sb->procs = p->next;
		while (p->followers) {
			struct process_follower *f = p->followers;
			p->followers = f->next;
			f->ops->ended(f->ctx, p, true);
			free(f);
		}
		if (p->stdin_done)
			stdin_finish(p, -ESRCH);
		loop_timer_stop(sb->m->loop, &p->kill_timer);
		forget(sb, p);
	}
}
