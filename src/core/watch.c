/* Watches (core/watch.h): the watch builtin run as a detached job, its
 * stdout parsed into events. The first line says whether it watches ("W")
 * or why not ("E <errno> <what>"); then events "<c> <path>\0". A path may
 * be cut between two reads: the partial one waits in `part`. */
#include "core/watch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/exec.h"

struct watch {
	const struct watch_ops *ops; /* NULL once stopped */
	void *ctx;
	struct exec_job *job; /* NULL once done */
	struct buf part;      /* the first line, then a cut event */
	bool headed;
	bool submitting, done_early;
	int err; /* from the builtin's "E" line */
	char msg[256];
};

const char *watch_event_name(enum watch_event t)
{
	switch (t) {
	case WATCH_CREATE:
		return "create";
	case WATCH_WRITE:
		return "write";
	case WATCH_REMOVE:
		return "remove";
	case WATCH_RENAME:
		return "rename";
	case WATCH_CHMOD:
		return "chmod";
	case WATCH_OVERFLOW:
		return "overflow";
	}
	return "unknown";
}

static int kind_of(char c, enum watch_event *t)
{
	switch (c) {
	case 'C':
		*t = WATCH_CREATE;
		return 0;
	case 'W':
		*t = WATCH_WRITE;
		return 0;
	case 'R':
		*t = WATCH_REMOVE;
		return 0;
	case 'M':
		*t = WATCH_RENAME;
		return 0;
	case 'A':
		*t = WATCH_CHMOD;
		return 0;
	case 'O':
		*t = WATCH_OVERFLOW;
		return 0;
	}
	return -1;
}

static int deliver(struct watch *w, const char *e, size_t len)
{
	enum watch_event t;
	if (len < 2 || e[1] != ' ' || kind_of(e[0], &t) < 0 || !w->ops)
		return 0; /* not an event: skipped */
	return w->ops->event(w->ctx, t, e + 2, len - 2);
}

static int on_output(void *ctx, int fd, const char *data, size_t len)
{
	struct watch *w = ctx;
	if (fd != 1 || !w->ops)
		return 0; /* stderr: the builtin's heartbeat */
	int full = 0;
	while (len && !w->headed) {
		const char *nl = memchr(data, '\n', len);
		size_t n = nl ? (size_t)(nl - data) + 1 : len;
		if (buf_append(&w->part, data, n) < 0 || w->part.dropped)
			return 0;
		data += n;
		len -= n;
		if (!nl)
			return 0;
		w->headed = true;
		const char *line = buf_cstr(&w->part);
		int e = 0, off = 0;
		if (line[0] == 'E' && sscanf(line, "E %d %n", &e, &off) == 1) {
			w->err = e > 0 ? e : EIO;
			snprintf(w->msg, sizeof(w->msg), "%.*s",
			         (int)strcspn(line + off, "\n"), line + off);
		} else if (line[0] == 'W' && w->ops->ready) {
			w->ops->ready(w->ctx);
		}
		buf_reset(&w->part);
	}
	if (w->err)
		return 0;
	while (len && w->ops) {
		const char *z = memchr(data, '\0', len);
		if (!z) {
			buf_append(&w->part, data, len);
			return full;
		}
		size_t n = (size_t)(z - data);
		if (w->part.len) {
			buf_append(&w->part, data, n);
			full |= deliver(w, w->part.data, w->part.len);
			buf_reset(&w->part);
		} else {
			full |= deliver(w, data, n);
		}
		data += n + 1;
		len -= n + 1;
	}
	/* the rest of this chunk is delivered now; the pause applies to
	 * the next one */
	return full;
}

static void on_done(const struct exec_result *res, void *ctx)
{
	struct watch *w = ctx;
	w->job = NULL;
	if (w->ops) {
		int e = w->err;
		const char *msg = w->msg;
		char why[600];
		if (!e && res->failure == EXEC_NOT_STARTED) {
			e = EIO;
			snprintf(why, sizeof(why), "%s", res->msg);
			msg = why;
		}
		w->ops->ended(w->ctx, e, msg);
		w->ops = NULL;
	}
	if (w->submitting) {
		w->done_early = true; /* watch_start frees it */
		return;
	}
	buf_free(&w->part);
	free(w);
}

int watch_start(struct sandbox *sb, const struct watch_opts *o,
                const struct watch_ops *ops, void *ctx, struct watch **out,
                struct sbx_err *err)
{
	*out = NULL;
	struct watch *w = calloc(1, sizeof(*w));
	if (!w)
		return sbx_err_set(err, ENOMEM, "out of memory");
	w->ops = ops;
	w->ctx = ctx;
	buf_init(&w->part, 64u << 10);
	const char *argv[] = {"watch", o->base, o->path,
	                      o->recursive ? "-r" : NULL, NULL};
	struct exec_params p = {.argv = argv,
	                        .builtin = true,
	                        .detached = true,
	                        .as_user = o->as_user,
	                        .timeout_ms = EXEC_NO_TIMEOUT,
	                        .on_output = on_output};
	struct exec_job *job = NULL;
	w->submitting = true;
	int r = exec_submit(sb, NULL, &p, on_done, w, &job, err);
	w->submitting = false;
	if (r < 0 || w->done_early) {
		/* done has run (the sandbox could not start), or never will */
		buf_free(&w->part);
		free(w);
		return r < 0 ? r : 0;
	}
	w->job = job;
	*out = w;
	return 0;
}

void watch_resume(struct watch *w)
{
	if (w->job)
		exec_resume_output(w->job);
}

void watch_stop(struct watch *w)
{
	w->ops = NULL;
	if (w->job)
		exec_cancel(w->job);
}
