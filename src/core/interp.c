/* Code interpreter contexts (see interp.h for what they are).
 *
 * Theory of operation. A context owns at most one worker: a detached exec
 * (exec_submit) with a streamed stdin, whose stdout carries the worker's
 * protocol lines and whose stderr anything the worker could not route
 * through the protocol (a crash, a child process's raw output under
 * node). Lines are parsed here as they arrive and handed to the running
 * cell's owner as events, one callback in the order they came; a cell is
 * sent to the worker only when the previous one is done, so cells of a
 * context run in order while contexts (one process each) run side by side.
 *
 * Interrupts. The worker says "start" when it begins a cell, after it is
 * ready to take SIGINT as an interrupt of that cell. Until then a SIGINT
 * would be lost (between cells a worker ignores it, as a late timeout),
 * and the cell would then run on until the worker is killed, its state
 * with it. So a cell cancelled (or timed out) before its start is not
 * signalled: the daemon writes {"cancel": id} after it, and the worker,
 * which looks for cancels before it begins a cell, skips it ("done" with
 * "skipped"). If the two cross (the worker began it before the cancel
 * came), the "start" that arrives afterwards is answered with the SIGINT.
 *
 * Everything that may call back into a consumer which may in turn delete
 * the context or cancel a cell (sending the next cell, finishing a cell,
 * killing a worker) happens from the context's own zero-delay "kick" timer,
 * never from inside an exec callback: exec must not see a job cancelled
 * under its feet, and a context is freed only when no call is on its stack
 * (busy) and its worker is gone.
 *
 * Contexts are grouped per sandbox (sb->interp); the manager tells us when
 * a sandbox goes (interp_sandbox_gone), and its contexts go with it. When
 * a sandbox stops, exec fails every job, including the workers, whose
 * contexts then restart lazily on their next cell.
 *
 * Idleness: a live worker is a running job, which would keep the manager
 * from idling the sandbox out. The manager asks how many of its jobs are
 * workers of idle contexts (interp_idle_workers) and stops a sandbox whose
 * only jobs they are once its sleepAfter has passed, as if they were not
 * there. */
#include "core/interp.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/exec.h"
#include "core/sandbox_internal.h"
#include "core/session_internal.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "lib/util.h"

#define LINE_MAX_BYTES (32u << 20) /* one protocol line (a big image) */
#define RAW_KEEP 2048 /* a failed start's stderr, for its message */

/* node cannot dup2, so a shell moves the protocol pipes off fds 0-2
 * before node starts (see interp/node_worker.js). */
static const char node_wrapper[] =
    "command -v node >/dev/null 2>&1 || "
    "{ echo 'node is not installed in this sandbox' >&2; exit 127; }; "
    "exec 3>&1 4<&0 1>&2 0</dev/null; "
    "exec node --expose-internals " INTERP_DIR "/node_worker.js \"$1\"";

enum worker_state { W_NONE, W_STARTING, W_READY };
enum kill_reason { KILL_NONE, KILL_STUCK, KILL_START, KILL_DELETE };

struct interp_cell {
	struct interp_ctx *c;
	uint64_t seq; /* the protocol id */
	char *code;
	size_t len;
	uint64_t timeout_ms;
	interp_event_cb cb; /* NULL once cancelled */
	void *arg;
	bool started;     /* the worker began it ("start") */
	bool skip_sent;   /* {"cancel"} written: stop it before it starts */
	bool interrupted; /* SIGINT sent */
	bool grace;       /* cell_timer: the kill after an interrupt */
	bool skipped;     /* the worker skipped it */
	bool timed_out, errored, done_seen, restarted;
	bool finishing; /* detached, its callbacks running */
	unsigned execution_count;
	struct interp_cell *next;
};

struct interp_group {
	struct manager *m;
	struct sandbox *sb;
	struct interp_ctx *head, *tail;
	unsigned n;
};

struct interp_ctx {
	struct interp_group *g; /* NULL once deleted */
	struct manager *m;
	char *id, *cwd;
	enum interp_lang lang;
	char **env;
	size_t envc;
	uint64_t created_ms;
	/* the worker */
	struct exec_job *job;
	enum worker_state ws;
	enum kill_reason killing;
	bool kill_sent;
	int pid;
	unsigned exec_count;
	bool lost; /* a worker ended since the last cell */
	char lost_why[800];
	char *fatal; /* the worker's own reason not to start */
	bool fatal_unavailable;
	struct buf line; /* a protocol line being received */
	bool line_skip;  /* dropping the rest of an oversized line */
	struct buf raw;  /* stderr while starting */
	struct buf in;   /* protocol input the pipe did not take yet */
	bool out_paused;
	/* cells */
	uint64_t next_seq;
	struct interp_cell *cur; /* sent to the worker */
	struct interp_cell *qhead, *qtail;
	unsigned nqueued;
	struct loop_timer cell_timer, start_timer, kick;
	interp_ready_cb ready;
	void *ready_arg;
	bool deleted;
	unsigned busy;
	struct interp_ctx *next;
};

static void kick(struct interp_ctx *c);
static void ctx_delete(struct interp_ctx *c, const char *ename,
                       const char *why);
static void interrupt(struct interp_ctx *c, struct interp_cell *cell,
                      bool timeout);

const char *interp_lang_name(enum interp_lang l)
{
	switch (l) {
	case INTERP_PYTHON:
		return "python";
	case INTERP_JAVASCRIPT:
		return "javascript";
	case INTERP_TYPESCRIPT:
		return "typescript";
	}
	return "?";
}

const char *interp_format_name(const char *mime)
{
	static const struct {
		const char *mime, *name;
	} formats[] = {
	    {"text/plain", "text"},
	    {"text/html", "html"},
	    {"text/markdown", "markdown"},
	    {"text/latex", "latex"},
	    {"image/png", "png"},
	    {"image/jpeg", "jpeg"},
	    {"image/svg+xml", "svg"},
	    {"application/pdf", "pdf"},
	    {"application/json", "json"},
	    {"application/javascript", "javascript"},
	};
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		if (!strcmp(formats[i].mime, mime))
			return formats[i].name;
	return NULL;
}

static const char *lang_title(enum interp_lang l)
{
	return l == INTERP_PYTHON       ? "Python"
	       : l == INTERP_JAVASCRIPT ? "JavaScript"
	                                : "TypeScript";
}

int interp_lang_parse(const char *s, enum interp_lang *out)
{
	static const struct {
		const char *name;
		enum interp_lang l;
	} names[] = {
	    {"python", INTERP_PYTHON},
	    {"python3", INTERP_PYTHON},
	    {"py", INTERP_PYTHON},
	    {"javascript", INTERP_JAVASCRIPT},
	    {"js", INTERP_JAVASCRIPT},
	    {"node", INTERP_JAVASCRIPT},
	    {"typescript", INTERP_TYPESCRIPT},
	    {"ts", INTERP_TYPESCRIPT},
	};
	for (size_t i = 0; s && i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(s, names[i].name)) {
			*out = names[i].l;
			return 0;
		}
	return -EINVAL;
}

/* ---- groups ------------------------------------------------------------- */

/* The group's sandbox; NULL once the context was deleted. */
static struct sandbox *group_sandbox(struct interp_group *g)
{
	return g ? g->sb : NULL;
}

static struct interp_group *group_of(struct sandbox *sb, bool create)
{
	if (sb->interp || !create)
		return sb->interp;
	struct interp_group *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->m = sb->m;
	g->sb = sb;
	sb->interp = g;
	return g;
}

void interp_sandbox_gone(struct sandbox *sb)
{
	struct interp_group *g = sb->interp;
	if (!g)
		return;
	while (g->head)
		ctx_delete(g->head, "SandboxDestroyed",
		           "the sandbox was destroyed");
	sb->interp = NULL;
	free(g);
}

static void touch(struct interp_ctx *c)
{
	struct sandbox *sb = group_sandbox(c->g);
	if (sb)
		sandbox_touch(sb);
}

/* ---- contexts: memory -----------------------------------------------------
 */

static void cell_free(struct interp_cell *cell)
{
	free(cell->code);
	free(cell);
}

static void maybe_free(struct interp_ctx *c)
{
	if (!c->deleted || c->job || c->busy)
		return;
	struct loop *l = c->m->loop;
	loop_timer_stop(l, &c->cell_timer);
	loop_timer_stop(l, &c->start_timer);
	loop_timer_stop(l, &c->kick);
	for (size_t i = 0; i < c->envc; i++)
		free(c->env[i]);
	free(c->env);
	free(c->id);
	free(c->cwd);
	free(c->fatal);
	buf_free(&c->line);
	buf_free(&c->raw);
	buf_free(&c->in);
	free(c);
}

/* ---- cells: the end ------------------------------------------------------ */

/* One event to the cell's owner (none once it cancelled); its pause flag. */
static int emit(struct interp_cell *cell, const struct interp_event *ev)
{
	return cell->cb ? cell->cb(cell->arg, ev) : 0;
}

/* A detached cell's last callbacks: an error (when ename), then done. */
static void cell_finish(struct interp_cell *cell, const char *ename,
                        const char *evalue, bool state_lost)
{
	cell->finishing = true;
	if (cell->cb && ename && !cell->errored) {
		cell->errored = true;
		json_t *tb = json_array();
		struct interp_error e = {ename, evalue ? evalue : "", tb};
		emit(cell, &(struct interp_event){.type = INTERP_EV_ERROR,
		                                  .error = &e});
		json_decref(tb);
	}
	if (cell->cb) {
		struct interp_done d = {
		    .execution_count = cell->execution_count,
		    .error = cell->errored,
		    .timed_out = cell->timed_out && cell->errored,
		    .restarted = cell->restarted,
		    .state_lost = state_lost,
		};
		emit(cell,
		     &(struct interp_event){.type = INTERP_EV_END, .done = &d});
	}
	cell_free(cell);
}

static struct interp_cell *queue_pop(struct interp_ctx *c)
{
	struct interp_cell *cell = c->qhead;
	if (cell) {
		c->qhead = cell->next;
		if (!c->qhead)
			c->qtail = NULL;
		cell->next = NULL;
		c->nqueued--;
	}
	return cell;
}

static void fail_queue(struct interp_ctx *c, const char *ename, const char *why)
{
	struct interp_cell *cell;
	while ((cell = queue_pop(c)))
		cell_finish(cell, ename, why, false);
}

static void resume_output(struct interp_ctx *c)
{
	if (c->out_paused && c->job) {
		c->out_paused = false;
		exec_resume_output(c->job);
	}
}

/* The running cell is done (its worker said so). */
static void complete_cur(struct interp_ctx *c)
{
	struct interp_cell *cell = c->cur;
	char why[200];
	c->cur = NULL;
	loop_timer_stop(c->m->loop, &c->cell_timer);
	resume_output(c);
	touch(c);
	if (cell->skipped && c->exec_count)
		c->exec_count--; /* it never ran */
	/* a restart's notice that nobody read is the next cell's */
	if (cell->restarted && (cell->skipped || !cell->cb))
		c->lost = true;
	if (cell->skipped && cell->timed_out) {
		snprintf(why, sizeof(why),
		         "the cell did not start within its timeout of %" PRIu64
		         " ms",
		         cell->timeout_ms);
		cell_finish(cell, "TimeoutError", why, false);
		return;
	}
	cell_finish(cell, NULL, NULL, false);
}

/* ---- the worker's output ---------------------------------------------------
 */

/* Text for the running cell (its consumer may ask to pause). */
static void deliver_output(struct interp_ctx *c, int fd, const char *text,
                           size_t len, bool check_utf8)
{
	struct interp_cell *cell = c->cur;
	if (!cell || cell->done_seen || !cell->cb || !len)
		return;
	char *clean = NULL;
	if (check_utf8 && !utf8_valid(text, len)) {
		if (!(clean = malloc(len * 3 + 1)))
			return;
		len = utf8_sanitize(text, len, clean);
		text = clean;
	}
	struct interp_event ev = {
	    .type = fd == 1 ? INTERP_EV_STDOUT : INTERP_EV_STDERR,
	    .text = text,
	    .len = len,
	};
	if (emit(cell, &ev))
		c->out_paused = true;
	free(clean);
}

static void on_ready_line(struct interp_ctx *c, json_t *j)
{
	if (c->ws != W_STARTING)
		return;
	c->ws = W_READY;
	loop_timer_stop(c->m->loop, &c->start_timer);
	buf_reset(&c->raw);
	struct sandbox *sb = group_sandbox(c->g);
	log_info(
	    "sandbox=%s event=context-ready id=%s lang=%s pid=%d version=%s",
	    sb ? sb->id : "?", c->id, interp_lang_name(c->lang), c->pid,
	    json_string_value(json_object_get(j, "version")) ?: "?");
	if (c->ready) {
		interp_ready_cb cb = c->ready;
		c->ready = NULL;
		cb(c, INTERP_STARTED, NULL, c->ready_arg);
	}
	kick(c);
}

static void on_error_line(struct interp_cell *cell, json_t *j)
{
	if (cell->errored || !cell->cb)
		return;
	cell->errored = true;
	const char *name = json_string_value(json_object_get(j, "ename"));
	const char *value = json_string_value(json_object_get(j, "evalue"));
	json_t *tb_in = json_object_get(j, "traceback");
	json_t *tb = json_array();
	size_t i;
	json_t *line;
	json_array_foreach(tb_in, i, line) if (json_is_string(line))
	    json_array_append(tb, line);
	char msg[600];
	if (cell->timed_out) {
		/* the interrupt was the daemon's timeout, not the user's ^C */
		snprintf(
		    msg, sizeof(msg),
		    "the cell did not finish within its timeout of %" PRIu64
		    " ms and was interrupted (%s)",
		    cell->timeout_ms, name ? name : "interrupted");
		name = "TimeoutError";
		value = msg;
	}
	struct interp_error e = {name ? name : "Error", value ? value : "", tb};
	emit(cell,
	     &(struct interp_event){.type = INTERP_EV_ERROR, .error = &e});
	json_decref(tb);
}

static void handle_line(struct interp_ctx *c, const char *data, size_t len)
{
	if (!len)
		return;
	json_error_t je;
	json_t *j = json_loadb(data, len, JSON_ALLOW_NUL, &je);
	const char *type = json_string_value(json_object_get(j, "type"));
	struct interp_cell *cell = c->cur;
	if (!type) {
		/* not the protocol: something wrote to the worker's protocol
		 * descriptor; it is the cell's output all the same */
		deliver_output(c, 1, data, len, true);
		deliver_output(c, 1, "\n", 1, false);
	} else if (!strcmp(type, "ready")) {
		on_ready_line(c, j);
	} else if (!strcmp(type, "fatal")) {
		const char *m =
		    json_string_value(json_object_get(j, "message"));
		free(c->fatal);
		c->fatal = strdup(m ? m : "the worker refused to start");
		c->fatal_unavailable =
		    json_is_true(json_object_get(j, "unavailable"));
	} else if (cell && !cell->done_seen &&
	           json_integer_value(json_object_get(j, "id")) ==
	               (json_int_t)cell->seq) {
		if (!strcmp(type, "stdout") || !strcmp(type, "stderr")) {
			json_t *t = json_object_get(j, "text");
			if (json_is_string(t))
				deliver_output(c, type[3] == 'o' ? 1 : 2,
				               json_string_value(t),
				               json_string_length(t), false);
		} else if (!strcmp(type, "start")) {
			cell->started = true;
			/* a cancel or timeout that crossed the cell on its way:
			 * now the interrupt reaches it */
			if (cell->skip_sent)
				interrupt(c, cell, false);
		} else if (!strcmp(type, "result")) {
			json_t *d = json_object_get(j, "data");
			struct interp_event ev = {.type = INTERP_EV_RESULT,
			                          .bundle = d};
			if (json_is_object(d) && emit(cell, &ev))
				c->out_paused = true;
		} else if (!strcmp(type, "error")) {
			on_error_line(cell, j);
		} else if (!strcmp(type, "done")) {
			json_int_t n = json_integer_value(
			    json_object_get(j, "execution_count"));
			if (n > 0 && n < INT32_MAX)
				cell->execution_count = (unsigned)n;
			cell->skipped =
			    json_is_true(json_object_get(j, "skipped")) &&
			    !cell->started;
			cell->done_seen = true;
			/* finished from the kick: raw stderr that came with
			 * the done line is read first */
			kick(c);
		}
	}
	json_decref(j);
}

static void take_lines(struct interp_ctx *c, const char *p, size_t len)
{
	const char *end = p + len;
	while (p < end && !c->deleted) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		const char *next = nl ? nl + 1 : end;
		if (c->line_skip) {
			c->line_skip = !nl;
		} else if (c->line.len + n > LINE_MAX_BYTES) {
			buf_free(&c->line);
			buf_init(&c->line, 0);
			c->line_skip = !nl;
			static const char why[] =
			    "sandboxd: an output of the cell was larger than "
			    "32 MB and was dropped\n";
			deliver_output(c, 2, why, sizeof(why) - 1, false);
		} else if (!nl) {
			buf_append(&c->line, p, n);
		} else if (c->line.len) {
			buf_append(&c->line, p, n);
			handle_line(c, c->line.data, c->line.len);
			if (c->line.cap >
			    (1u << 20)) { /* a big one: give it back */
				buf_free(&c->line);
				buf_init(&c->line, 0);
			}
			buf_reset(&c->line);
		} else {
			handle_line(c, p, n);
		}
		p = next;
	}
}

static int worker_output(void *ctx, int fd, const char *data, size_t len)
{
	struct interp_ctx *c = ctx;
	if (c->deleted)
		return 0;
	c->busy++;
	if (fd == 1) {
		take_lines(c, data, len);
	} else if (c->ws == W_STARTING) {
		size_t room = RAW_KEEP > c->raw.len ? RAW_KEEP - c->raw.len : 0;
		buf_append(&c->raw, data, len < room ? len : room);
	} else {
		deliver_output(c, 2, data, len, true);
	}
	c->busy--;
	return c->out_paused && !c->deleted;
}

static void worker_stdin_drain(void *ctx)
{
	struct interp_ctx *c = ctx;
	if (!c->job || !c->in.len)
		return;
	size_t n = exec_stdin_write(c->job, c->in.data, c->in.len);
	memmove(c->in.data, c->in.data + n, c->in.len - n);
	c->in.len -= n;
}

static void worker_write(struct interp_ctx *c, const char *data, size_t len)
{
	if (!c->job)
		return;
	size_t n = c->in.len ? 0 : exec_stdin_write(c->job, data, len);
	if (n < len)
		buf_append(&c->in, data + n, len - n);
}

static void worker_started(void *ctx, int pid)
{
	struct interp_ctx *c = ctx;
	c->pid = pid;
}

/* ---- the worker's life ----------------------------------------------------
 */

static enum interp_start classify(struct interp_ctx *c,
                                  const struct exec_result *res)
{
	if (c->fatal)
		return c->fatal_unavailable ? INTERP_UNAVAILABLE
		                            : INTERP_FAILED;
	if (res->failure == EXEC_NOT_STARTED && strstr(res->msg, "chdir: "))
		return INTERP_BAD_CWD;
	if (res->failure == EXEC_NOT_STARTED &&
	    strstr(res->msg, strerror(ENOENT)))
		return INTERP_UNAVAILABLE; /* no python3 (or sh) */
	if (res->failure == EXEC_OK && res->exit_code == 127)
		return INTERP_UNAVAILABLE; /* the wrapper found no node */
	return INTERP_FAILED;
}

static void describe_end(struct interp_ctx *c, const struct exec_result *res,
                         enum kill_reason kr, char *out, size_t cap)
{
	const char *lang = lang_title(c->lang);
	if (res->failure == EXEC_STOPPED)
		snprintf(out, cap, "the sandbox stopped (%s)", res->msg);
	else if (res->failure == EXEC_NOT_STARTED)
		snprintf(out, cap, "the %s worker could not start: %s", lang,
		         res->msg);
	else if (kr == KILL_STUCK && c->cur && !c->cur->started)
		snprintf(out, cap,
		         "the %s worker was killed: it did not take its cell "
		         "within %d s of the cell's timeout",
		         lang, INTERP_KILL_GRACE_MS / 1000);
	else if (kr == KILL_STUCK)
		snprintf(out, cap,
		         "the %s worker was killed: its cell did not stop "
		         "within %d s of an interrupt",
		         lang, INTERP_KILL_GRACE_MS / 1000);
	else if (kr == KILL_START)
		snprintf(out, cap, "the %s worker did not start within %d s",
		         lang, INTERP_START_TIMEOUT_MS / 1000);
	else if (res->signo == SIGKILL)
		snprintf(out, cap,
		         "the %s worker was killed (SIGKILL: out of memory, or "
		         "killed from inside the sandbox)",
		         lang);
	else if (res->signo)
		snprintf(out, cap, "the %s worker was killed by SIG%s", lang,
		         sigabbrev_np(res->signo) ?: "?");
	else
		snprintf(out, cap, "the %s worker exited with status %d", lang,
		         res->exit_code);
}

static void worker_done(const struct exec_result *res, void *ctx)
{
	struct interp_ctx *c = ctx;
	struct loop *l = c->m->loop;
	enum worker_state was = c->ws;
	enum kill_reason kr = c->killing;
	c->job = NULL;
	c->ws = W_NONE;
	c->killing = KILL_NONE;
	c->kill_sent = false;
	c->pid = 0;
	c->exec_count = 0;
	c->out_paused = false;
	c->line_skip = false;
	buf_reset(&c->line);
	buf_reset(&c->in);
	loop_timer_stop(l, &c->start_timer);
	loop_timer_stop(l, &c->cell_timer);
	if (c->deleted) { /* its cells were told already */
		maybe_free(c);
		return;
	}
	c->busy++;
	char why[800];
	bool stopped = res->failure == EXEC_STOPPED;
	describe_end(c, res, kr, why, sizeof(why));
	struct sandbox *sb = group_sandbox(c->g);
	log_info("sandbox=%s event=context-worker-ended id=%s reason=\"%s\"",
	         sb ? sb->id : "?", c->id, why);
	if (was == W_STARTING) {
		enum interp_start st = classify(c, res);
		char msg[RAW_KEEP + 500];
		const char *raw = buf_cstr(&c->raw);
		if (c->fatal)
			snprintf(msg, sizeof(msg), "%s", c->fatal);
		else if (st == INTERP_BAD_CWD)
			snprintf(msg, sizeof(msg), "cwd %s: %s", c->cwd,
			         strstr(res->msg, "chdir: ") + 7);
		else if (*raw && !stopped)
			snprintf(msg, sizeof(msg), "%s; it said: %s", why, raw);
		else
			snprintf(msg, sizeof(msg), "%s", why);
		if (c->ready) { /* the first start: the context fails with it */
			interp_ready_cb cb = c->ready;
			c->ready = NULL;
			cb(c, st, msg, c->ready_arg);
			if (!c->deleted)
				ctx_delete(c, "ContextStartFailed", msg);
		} else {
			c->lost = true;
			snprintf(c->lost_why, sizeof(c->lost_why), "%s", why);
			fail_queue(c, "ContextStartFailed", msg);
		}
	} else {
		c->lost = true;
		snprintf(c->lost_why, sizeof(c->lost_why), "%s", why);
		struct interp_cell *cell = c->cur;
		c->cur = NULL;
		if (cell && cell->done_seen) {
			cell_finish(cell, NULL, NULL, true);
		} else if (cell) {
			char val[1100];
			const char *name = cell->timed_out ? "TimeoutError"
			                   : stopped       ? "SandboxStopped"
			                                   : "WorkerDied";
			if (cell->timed_out)
				snprintf(val, sizeof(val),
				         "the cell did not finish within its "
				         "timeout of %" PRIu64
				         " ms and did not "
				         "stop when interrupted: %s; the "
				         "context's state is lost",
				         cell->timeout_ms, why);
			else
				snprintf(val, sizeof(val),
				         "%s; the context's state is lost%s",
				         why,
				         stopped ? ""
				                 : " (its next cell starts a "
				                   "new worker)");
			cell_finish(cell, name, val, true);
		}
		/* not restarted from inside a sandbox's stop (or destroy):
		 * the queued cells end too */
		if (stopped)
			fail_queue(c, "SandboxStopped", why);
		else if (c->qhead)
			kick(c);
	}
	free(c->fatal);
	c->fatal = NULL;
	c->fatal_unavailable = false;
	buf_reset(&c->raw);
	c->busy--;
	maybe_free(c);
}

static void worker_start(struct interp_ctx *c)
{
	struct sbx_err err = {0};
	struct sandbox *sb = group_sandbox(c->g);
	if (!sb) {
		ctx_delete(c, "SandboxDestroyed", "the sandbox was destroyed");
		return;
	}
	const char *py[] = {"python3", INTERP_DIR "/python_worker.py", NULL};
	const char *node[] = {"/bin/sh",
	                      "-c",
	                      node_wrapper,
	                      "sandboxd-node",
	                      interp_lang_name(c->lang),
	                      NULL};
	struct exec_params p = {
	    .argv = c->lang == INTERP_PYTHON ? py : node,
	    .detached = true,
	    .env = (const char *const *)c->env,
	    .envc = c->envc,
	    .cwd = c->cwd,
	    .timeout_ms = EXEC_NO_TIMEOUT,
	    .stdin_stream = true,
	    .on_output = worker_output,
	    .on_stdin_drain = worker_stdin_drain,
	    .on_started = worker_started,
	};
	c->ws = W_STARTING;
	c->exec_count = 0;
	buf_reset(&c->raw);
	loop_timer_start(c->m->loop, &c->start_timer, INTERP_START_TIMEOUT_MS);
	log_info("sandbox=%s event=context-worker-start id=%s lang=%s", sb->id,
	         c->id, interp_lang_name(c->lang));
	c->busy++;
	if (exec_submit(sb, sandbox_session(sb, NULL), &p, worker_done, c,
	                &c->job, &err) < 0) {
		struct exec_result res = {.failure = EXEC_NOT_STARTED};
		snprintf(res.msg, sizeof(res.msg), "%s", err.msg);
		c->job = NULL;
		worker_done(&res, c);
	}
	c->busy--;
}

/* ---- cells: the start ------------------------------------------------------
 */

static void send_cell(struct interp_ctx *c)
{
	struct interp_cell *cell = queue_pop(c);
	c->cur = cell;
	c->exec_count++;
	cell->execution_count = c->exec_count;
	if (c->lost) {
		char note[sizeof(c->lost_why) + 200];
		c->lost = false;
		cell->restarted = true;
		snprintf(
		    note, sizeof(note),
		    "the context's %s worker was restarted (%s): variables, "
		    "imports and definitions of earlier cells are gone",
		    lang_title(c->lang), c->lost_why);
		emit(cell, &(struct interp_event){.type = INTERP_EV_NOTICE,
		                                  .text = note,
		                                  .len = strlen(note)});
		if (!cell->cb) { /* cancelled from the notice: never sent */
			c->cur = NULL;
			c->exec_count--;
			c->lost = true;
			cell_free(cell);
			kick(c);
			return;
		}
	}
	json_t *msg = json_pack("{s:I, s:s%}", "id", (json_int_t)cell->seq,
	                        "code", cell->code, cell->len);
	char *line = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	free(cell->code);
	cell->code = NULL;
	if (!line) {
		c->cur = NULL;
		cell_finish(cell, "InternalError", "out of memory", false);
		kick(c);
		return;
	}
	worker_write(c, line, strlen(line));
	worker_write(c, "\n", 1);
	free(line);
	if (cell->timeout_ms)
		loop_timer_start(c->m->loop, &c->cell_timer, cell->timeout_ms);
	touch(c);
}

/* The kick: whatever can happen next, outside of any exec callback. */
static void pump(struct loop_timer *t)
{
	struct interp_ctx *c = t->data;
	c->busy++;
	if (c->job && c->killing && !c->kill_sent) {
		c->kill_sent = true;
		exec_cancel(c->job); /* worker_done may run at once */
	}
	if (c->cur && c->cur->done_seen)
		complete_cur(c);
	if (!c->deleted && !c->cur && c->qhead) {
		if (c->ws == W_NONE && !c->job)
			worker_start(c);
		else if (c->ws == W_READY)
			send_cell(c);
	}
	c->busy--;
	maybe_free(c);
}

static void kick(struct interp_ctx *c)
{
	loop_timer_start(c->m->loop, &c->kick, 0);
}

/* Stop the running cell: SIGINT once the worker began it, else a cancel
 * that the worker reads before it would begin it (see the top). A
 * timeout also arms the kill, for a worker that neither starts nor stops
 * the cell; a cancel of a cell not begun leaves its timeout to do that. */
static void interrupt(struct interp_ctx *c, struct interp_cell *cell,
                      bool timeout)
{
	if (!c->job || cell->done_seen)
		return;
	if (timeout)
		cell->timed_out = true;
	if (!cell->started) {
		if (!cell->skip_sent) {
			char line[64];
			int n =
			    snprintf(line, sizeof(line),
			             "{\"cancel\":%" PRIu64 "}\n", cell->seq);
			cell->skip_sent = true;
			worker_write(c, line, (size_t)n);
		}
	} else if (!cell->interrupted) {
		cell->interrupted = true;
		exec_signal(c->job, SIGINT);
	} else {
		return; /* the kill is armed already */
	}
	if ((timeout || cell->interrupted) && !cell->grace) {
		cell->grace = true;
		loop_timer_start(c->m->loop, &c->cell_timer,
		                 INTERP_KILL_GRACE_MS);
	}
}

static void on_cell_timer(struct loop_timer *t)
{
	struct interp_ctx *c = t->data;
	struct interp_cell *cell = c->cur;
	if (!cell || !c->job || cell->done_seen)
		return;
	if (!cell->grace) {
		interrupt(c, cell, true);
		return;
	}
	c->killing = KILL_STUCK;
	c->kill_sent = true;
	exec_cancel(c->job);
}

static void on_start_timer(struct loop_timer *t)
{
	struct interp_ctx *c = t->data;
	if (c->job && c->ws == W_STARTING) {
		c->killing = KILL_START;
		c->kill_sent = true;
		exec_cancel(c->job);
	}
}

/* ---- contexts -------------------------------------------------------------
 */

static void ctx_delete(struct interp_ctx *c, const char *ename, const char *why)
{
	if (c->deleted)
		return;
	c->busy++;
	c->deleted = true;
	struct interp_group *g = c->g;
	if (g) {
		struct interp_ctx *prev = NULL;
		for (struct interp_ctx *x = g->head; x; prev = x, x = x->next)
			if (x == c) {
				if (prev)
					prev->next = c->next;
				else
					g->head = c->next;
				if (g->tail == c)
					g->tail = prev;
				break;
			}
		g->n--;
		c->g = NULL;
	}
	loop_timer_stop(c->m->loop, &c->cell_timer);
	loop_timer_stop(c->m->loop, &c->start_timer);
	if (c->ready) {
		interp_ready_cb cb = c->ready;
		c->ready = NULL;
		cb(c, INTERP_DELETED, why, c->ready_arg);
	}
	struct interp_cell *cell = c->cur;
	c->cur = NULL;
	if (cell)
		cell_finish(cell, ename, why, true);
	fail_queue(c, ename, why);
	if (c->job) { /* killed from the kick, not under a caller's feet */
		c->killing = KILL_DELETE;
		kick(c);
	}
	c->busy--;
	maybe_free(c);
}

int interp_create(struct sandbox *sb, const struct interp_opts *o,
                  interp_ready_cb ready, void *arg, struct interp_ctx **out,
                  struct sbx_err *err)
{
	char gen[32];
	struct interp_group *g = group_of(sb, true);
	if (!g)
		return sbx_err_set(err, ENOMEM, "out of memory");
	if (g->n >= INTERP_MAX_CONTEXTS)
		return sbx_err_set(err, ENOSPC,
		                   "a sandbox has at most %d contexts",
		                   INTERP_MAX_CONTEXTS);
	const char *id = o->id;
	if (id && interp_find(sb, id))
		return sbx_err_set(err, EEXIST, "context %s exists", id);
	while (!id) {
		id_random(gen, sizeof(gen), "ctx_");
		id = interp_find(sb, gen) ? NULL : gen;
	}
	struct session *s = o->sess ? o->sess : sandbox_session(sb, NULL);
	size_t n = 0;
	const char **env = session_env_for(s, o->env, o->envc, NULL, &n);
	struct interp_ctx *c = calloc(1, sizeof(*c));
	if (!env || !c)
		goto nomem;
	c->m = sb->m;
	c->lang = o->lang;
	c->created_ms = now_wall_ms();
	buf_init(&c->line, 0);
	buf_init(&c->raw, 0);
	buf_init(&c->in, 0);
	if (!(c->id = strdup(id)) ||
	    !(c->cwd = strdup(o->cwd ? o->cwd : s->cwd)) ||
	    !(c->env = calloc(n + 1, sizeof(char *))))
		goto nomem;
	for (; c->envc < n; c->envc++)
		if (!(c->env[c->envc] = strdup(env[c->envc])))
			goto nomem;
	free(env);
	c->cell_timer = (struct loop_timer){.cb = on_cell_timer, .data = c};
	c->start_timer = (struct loop_timer){.cb = on_start_timer, .data = c};
	c->kick = (struct loop_timer){.cb = pump, .data = c};
	c->ready = ready;
	c->ready_arg = arg;
	c->g = g;
	if (g->tail)
		g->tail->next = c;
	else
		g->head = c;
	g->tail = c;
	g->n++;
	if (out)
		*out = c;
	log_info("sandbox=%s event=context-created id=%s lang=%s cwd=%s",
	         sb->id, c->id, interp_lang_name(c->lang), c->cwd);
	c->busy++;
	worker_start(c);
	c->busy--;
	maybe_free(c);
	return 0;
nomem:
	free(env);
	if (c) {
		c->deleted = true;
		maybe_free(c);
	}
	return sbx_err_set(err, ENOMEM, "out of memory");
}

struct interp_ctx *interp_find(struct sandbox *sb, const char *id)
{
	struct interp_group *g = id ? group_of(sb, false) : NULL;
	for (struct interp_ctx *c = g ? g->head : NULL; c; c = c->next)
		if (!strcmp(c->id, id))
			return c;
	return NULL;
}

void interp_foreach(struct sandbox *sb,
                    void (*fn)(struct interp_ctx *c, void *data), void *data)
{
	struct interp_group *g = group_of(sb, false);
	for (struct interp_ctx *c = g ? g->head : NULL, *next; c; c = next) {
		next = c->next;
		fn(c, data);
	}
}

int interp_delete(struct sandbox *sb, const char *id)
{
	struct interp_ctx *c = interp_find(sb, id);
	if (!c)
		return -ENOENT;
	log_info("sandbox=%s event=context-deleted id=%s", sb->id, c->id);
	ctx_delete(c, "ContextDeleted", "the context was deleted");
	return 0;
}

void interp_get_info(const struct interp_ctx *c, struct interp_info *out)
{
	*out = (struct interp_info){
	    .id = c->id,
	    .lang = c->lang,
	    .cwd = c->cwd,
	    .starting = c->ws == W_STARTING,
	    .running = c->ws == W_READY,
	    .busy = c->cur != NULL,
	    .queued = c->nqueued,
	    .execution_count = c->exec_count,
	    .created_ms = c->created_ms,
	};
}

int interp_run(struct interp_ctx *c, const char *code, size_t len,
               uint64_t timeout_ms, interp_event_cb cb, void *arg,
               struct interp_cell **out, struct sbx_err *err)
{
	if (c->deleted)
		return sbx_err_set(err, ENOENT, "the context was deleted");
	if (len && !utf8_valid(code, len))
		return sbx_err_set(err, EINVAL,
		                   "code must be UTF-8 text without NUL");
	struct interp_cell *cell = calloc(1, sizeof(*cell));
	if (!cell || !(cell->code = malloc(len + 1))) {
		free(cell);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	memcpy(cell->code, code, len);
	cell->code[len] = '\0';
	cell->len = len;
	cell->c = c;
	cell->seq = ++c->next_seq;
	cell->timeout_ms = timeout_ms;
	cell->cb = cb;
	cell->arg = arg;
	if (c->qtail)
		c->qtail->next = cell;
	else
		c->qhead = cell;
	c->qtail = cell;
	c->nqueued++;
	if (out)
		*out = cell;
	kick(c);
	return 0;
}

void interp_cell_resume(struct interp_cell *cell)
{
	if (!cell->finishing && cell->c->cur == cell)
		resume_output(cell->c);
}

void interp_cell_cancel(struct interp_cell *cell)
{
	cell->cb = NULL;
	if (cell->finishing)
		return; /* freed when its callbacks return */
	struct interp_ctx *c = cell->c;
	struct sandbox *sb = group_sandbox(c->g);
	log_info("sandbox=%s event=cell-cancelled id=%s cell=%" PRIu64 " %s",
	         sb ? sb->id : "?", c->id, cell->seq,
	         c->cur != cell  ? "queued"
	         : cell->started ? "running"
	                         : "sent");
	if (c->cur == cell) {
		/* skipped if not begun, else interrupted as at a timeout
		 * (and killed if it will not stop) */
		resume_output(c);
		interrupt(c, cell, false);
		return;
	}
	struct interp_cell *prev = NULL;
	for (struct interp_cell *x = c->qhead; x; prev = x, x = x->next)
		if (x == cell) {
			if (prev)
				prev->next = cell->next;
			else
				c->qhead = cell->next;
			if (c->qtail == cell)
				c->qtail = prev;
			c->nqueued--;
			cell_free(cell);
			return;
		}
}

/* ---- idleness ------------------------------------------------------------ */

unsigned interp_idle_workers(struct sandbox *sb)
{
	unsigned workers = 0;
	for (struct interp_ctx *c = sb->interp ? sb->interp->head : NULL; c;
	     c = c->next) {
		if (c->cur || c->qhead || c->ws == W_STARTING)
			return 0;
		workers += c->job != NULL;
	}
	return workers;
}

bool interp_only_idle(struct sandbox *sb)
{
	unsigned workers = interp_idle_workers(sb);
	return workers && sb->busy == workers;
}
