#include "core/fileop.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/exec.h"
#include "core/sandbox_internal.h"
#include "lib/log.h"

#define HEAD_MAX                                                               \
	(16u << 10)         /* a head or answer line; one listing entry        \
	                       (a name is at most 255 bytes, a path more) */
#define ERR_MAX (64u << 10) /* a raw operation's stderr */

enum state { S_HEAD, S_FILE, S_LISTING, S_ANSWER, S_RAW };

struct fileop {
	struct loop *loop;
	struct exec_job *job; /* NULL once done */
	const struct fileop_ops *ops;
	void *ctx;
	struct loop_timer cancel; /* fileop_cancel, from the loop */
	struct buf head;          /* the head line; in a listing, an entry
	                             not complete yet; else the answer */
	struct buf err;           /* stderr, heartbeats left out */
	enum state state;
	bool began;
	bool interrupt; /* fileop_interrupt before the builtin ran */
};

static int emit_file(struct fileop *op, uint64_t size)
{
	op->began = true;
	return op->ops->on_file ? op->ops->on_file(op->ctx, size) : 0;
}

static int emit_dir(struct fileop *op)
{
	op->began = true;
	return op->ops->on_dir ? op->ops->on_dir(op->ctx) : 0;
}

static int emit_data(struct fileop *op, const char *data, size_t len)
{
	if (!len || !op->ops->on_data)
		return 0;
	return op->ops->on_data(op->ctx, data, len);
}

static int emit_listing(struct fileop *op, const char *data, size_t len)
{
	if (!op->ops->on_entry)
		return 0;
	return file_listing_feed(&op->head, data, len, op->ops->on_entry,
	                         op->ctx);
}

/* The builtin's stderr carries a NUL each second as a sign of life
 * (runtime/builtin.h); only the words are kept. */
static void keep_stderr(struct fileop *op, const char *data, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (data[i])
			buf_append(&op->err, data + i, 1);
}

static int on_output(void *ctx, int fd, const char *data, size_t len)
{
	struct fileop *op = ctx;
	if (fd != 1) {
		keep_stderr(op, data, len);
		return 0;
	}
	if (!data) { /* pulled: stdout has bytes again */
		if (op->ops->on_readable)
			op->ops->on_readable(op->ctx);
		return 0;
	}
	switch (op->state) {
	case S_RAW:
		op->began = true;
		return emit_data(op, data, len);
	case S_FILE:
		return emit_data(op, data, len);
	case S_LISTING:
		return emit_listing(op, data, len);
	case S_ANSWER:
		buf_append(&op->head, data, len);
		return 0;
	case S_HEAD:
		break;
	}
	const char *nl = memchr(data, '\n', len);
	size_t take = nl ? (size_t)(nl + 1 - data) : len;
	buf_append(&op->head, data, take);
	if (!nl)
		return 0;
	data += take;
	len -= take;
	const char *h = buf_cstr(&op->head);
	if (!strncmp(h, "F ", 2)) {
		uint64_t size = strtoull(h + 2, NULL, 10);
		buf_reset(&op->head);
		op->state = S_FILE;
		int full = emit_file(op, size) | emit_data(op, data, len);
		/* the consumer pulls the rest: stdout is not read for it */
		return op->ops->on_readable ? 1 : full;
	}
	if (!strcmp(h, "D\n")) {
		buf_reset(&op->head);
		op->state = S_LISTING;
		return emit_dir(op) | emit_listing(op, data, len);
	}
	/* "OK", "S", "E": the answer, whole at the end */
	op->state = S_ANSWER;
	buf_append(&op->head, data, len);
	return 0;
}

static void on_stdin_drain(void *ctx)
{
	struct fileop *op = ctx;
	if (op->ops->on_stdin_drain)
		op->ops->on_stdin_drain(op->ctx);
}

static void on_started(void *ctx, int pid)
{
	struct fileop *op = ctx;
	(void)pid;
	if (op->interrupt && op->job) {
		op->interrupt = false;
		exec_signal(op->job, SIGTERM);
	}
}

static void finish(struct fileop *op, struct fileop_result *res)
{
	res->began = op->began;
	res->stderr_text = buf_cstr(&op->err);
	if (!res->answer)
		res->answer = "";
	op->job = NULL;
	loop_timer_stop(op->loop, &op->cancel);
	op->ops->on_done(op->ctx, res);
	buf_free(&op->head);
	buf_free(&op->err);
	free(op);
}

static void on_done(const struct exec_result *er, void *ctx)
{
	struct fileop *op = ctx;
	struct fileop_result res = {.what = er->msg,
	                            .exit_code = er->exit_code};
	char *h = (char *)buf_cstr(&op->head);
	if (er->failure == EXEC_CANCELLED) {
		res.status = FILEOP_CANCELLED;
	} else if (er->failure == EXEC_TIMEOUT) {
		res.status = FILEOP_TIMEOUT;
	} else if (er->failure != EXEC_OK) {
		res.status = FILEOP_FAILED;
	} else if (op->state == S_ANSWER && !strncmp(h, "E ", 2)) {
		char *end;
		res.status = FILEOP_ERRNO;
		res.error = (int)strtol(h + 2, &end, 10);
		end[strcspn(end, "\n")] = '\0';
		res.what = *end == ' ' ? end + 1 : end;
	} else if (er->exit_code) {
		res.status = FILEOP_FAILED;
		res.what = op->err.len ? buf_cstr(&op->err)
		                       : "the file operation failed";
	} else if (op->state == S_HEAD) {
		/* the builtin ended without a word (a raw operation never
		 * waits for a head: no output is a whole answer there) */
		res.status = FILEOP_FAILED;
		res.what = "the file operation ended without an answer";
	} else if (op->state == S_LISTING && op->head.len) {
		res.status = FILEOP_FAILED; /* an entry cut short */
		res.what = "the listing ended in the middle of an entry";
	} else {
		if (op->state == S_ANSWER) {
			h[strcspn(h, "\n")] = '\0';
			res.answer = h;
		}
		res.status = FILEOP_OK;
	}
	finish(op, &res);
}

static void cancel_now(struct loop_timer *t)
{
	struct fileop *op = t->data;
	if (op->job)
		exec_cancel(op->job);
}

void fileop_start(struct sandbox *sb, const struct fileop_params *p,
                  const struct fileop_ops *ops, void *ctx, struct fileop **out)
{
	struct fileop *op = calloc(1, sizeof(*op));
	if (out)
		*out = op;
	if (!op) {
		struct fileop_result res = {.status = FILEOP_FAILED,
		                            .what = "out of memory",
		                            .answer = "",
		                            .stderr_text = ""};
		ops->on_done(ctx, &res);
		return;
	}
	op->loop = sb->m->loop;
	op->ops = ops;
	op->ctx = ctx;
	op->cancel = (struct loop_timer){.cb = cancel_now, .data = op};
	op->state = p->raw ? S_RAW : S_HEAD;
	buf_init(&op->head, HEAD_MAX);
	buf_init(&op->err, ERR_MAX);
	/* detached: beside the session's commands, not after them; no wall
	 * clock (a slow client may take hours), only --file-timeout of no
	 * progress */
	struct exec_params ep = {.argv = p->argv,
	                         .builtin = true,
	                         .detached = true,
	                         .timeout_ms = EXEC_NO_TIMEOUT,
	                         .stdin_data = p->stdin_data,
	                         .stdin_len = p->stdin_len,
	                         .stdin_stream = p->stdin_stream,
	                         .as_user = p->as_user,
	                         .on_output = on_output,
	                         .on_stdin_drain = on_stdin_drain,
	                         .on_started = on_started};
	struct sbx_err err = {0};
	if (exec_submit(sb, NULL, &ep, on_done, op, &op->job, &err) < 0) {
		struct exec_result er = {.failure = EXEC_NOT_STARTED};
		snprintf(er.msg, sizeof(er.msg), "%s", err.msg);
		log_warn("sandbox=%s event=file-op-failed %s", sb->id, err.msg);
		on_done(&er, op);
	}
}

void fileop_resume(struct fileop *op)
{
	if (op->job)
		exec_resume_output(op->job);
}

ssize_t fileop_pull(struct fileop *op, char *buf, size_t max)
{
	return op->job && op->state == S_FILE
	           ? exec_output_pull(op->job, buf, max)
	           : -1;
}

void fileop_cancel(struct fileop *op)
{
	if (op->job)
		loop_timer_start(op->loop, &op->cancel, 0);
}

void fileop_interrupt(struct fileop *op)
{
	if (!op->job)
		return;
	if (exec_pid(op->job) > 0)
		exec_signal(op->job, SIGTERM);
	else
		op->interrupt = true;
}

size_t fileop_stdin_write(struct fileop *op, const char *data, size_t len)
{
	return op->job ? exec_stdin_write(op->job, data, len) : len;
}

void fileop_stdin_close(struct fileop *op)
{
	if (op->job)
		exec_stdin_close(op->job);
}
