#include "http/relay.h"

#include <stdlib.h>

#include "http/sse.h"
#include "lib/util.h"

struct relay {
	struct http_stream *s; /* NULL once the client is gone */
	struct loop *loop;
	struct loop_timer keepalive;
	bool sse;
	const char *ping; /* bytes: the keepalive, or NULL */
	size_t ping_len;
	bool ended; /* the source called relay_end */
	uint64_t last_write_ms;
	unsigned keepalive_ms;
	const struct relay_ops *ops;
	void *ctx;
};

/* Writes only note the time; the timer, armed once, looks at it when it
 * fires and speaks only after a whole interval of silence. */
static void wrote(struct relay *rl)
{
	rl->last_write_ms = now_mono_ms();
}

static void on_keepalive(struct loop_timer *t)
{
	struct relay *rl = t->data;
	uint64_t quiet = now_mono_ms() - rl->last_write_ms;
	if (!rl->s)
		return;
	if (quiet >= rl->keepalive_ms) {
		if (rl->sse)
			sse_comment(rl->s, "keepalive");
		else
			http_stream_write(rl->s, rl->ping, rl->ping_len);
		wrote(rl);
		quiet = 0;
	}
	loop_timer_start(rl->loop, t, rl->keepalive_ms - quiet);
}

static void on_drain(void *arg)
{
	struct relay *rl = arg;
	if (!rl->ended && rl->ops && rl->ops->resume)
		rl->ops->resume(rl->ctx);
}

static void on_close(void *arg)
{
	struct relay *rl = arg;
	rl->s = NULL;
	loop_timer_stop(rl->loop, &rl->keepalive);
	if (!rl->ended) {
		if (rl->ops && rl->ops->cancel)
			rl->ops->cancel(rl->ctx);
		return; /* freed by relay_end */
	}
	free(rl);
}

struct relay *relay_open(struct http_req *r, struct loop *loop,
                         const struct relay_opts *opts,
                         const struct relay_ops *ops, void *ctx)
{
	static const struct relay_opts sse = {0};
	struct relay *rl = calloc(1, sizeof(*rl));
	if (!rl) {
		http_respond_text(r, 500, "out of memory\n");
		return NULL;
	}
	if (!opts)
		opts = &sse;
	rl->sse = !opts->content_type;
	rl->keepalive_ms = opts->keepalive_ms ?: RELAY_KEEPALIVE_MS;
	rl->s = http_respond_stream(r, opts->status ?: 200,
	                            rl->sse ? "text/event-stream"
	                                    : opts->content_type,
	                            rl->sse ? HTTP_SIZE_UNKNOWN : opts->size,
	                            rl->sse ? sse_headers : opts->headers);
	if (!rl->s) {
		free(rl);
		return NULL;
	}
	rl->loop = loop;
	rl->ops = ops;
	rl->ctx = ctx;
	rl->keepalive = (struct loop_timer){.cb = on_keepalive, .data = rl};
	http_stream_set_cbs(rl->s, on_drain, on_close, rl);
	rl->ping = opts->keepalive;
	rl->ping_len = opts->keepalive_len;
	if (rl->sse || rl->ping) {
		wrote(rl);
		loop_timer_start(loop, &rl->keepalive, rl->keepalive_ms);
	}
	return rl;
}

bool relay_live(const struct relay *rl)
{
	return rl->s != NULL;
}

size_t relay_pending(const struct relay *rl)
{
	return rl->s ? http_stream_pending(rl->s) : 0;
}

int relay_write(struct relay *rl, const void *data, size_t len)
{
	if (!rl->s)
		return 0;
	wrote(rl);
	return http_stream_write(rl->s, data, len);
}

int relay_event(struct relay *rl, const char *event, const char *id,
                const char *data)
{
	if (!rl->s)
		return 0;
	wrote(rl);
	return sse_event(rl->s, event, id, data);
}

int relay_event_json(struct relay *rl, const char *event, json_t *j)
{
	char *data = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	int r = relay_event(rl, event, NULL, data ? data : "{}");
	free(data);
	return r;
}

int relay_event_b64(struct relay *rl, const char *event, uint64_t id,
                    const char *bytes, size_t len)
{
	if (!rl->s)
		return 0;
	wrote(rl);
	return sse_event_b64(rl->s, event, id, bytes, len);
}

int relay_comment(struct relay *rl, const char *text)
{
	return rl->s ? sse_comment(rl->s, text) : 0;
}

void relay_set_pull(struct relay *rl, http_pull_fn pull, void *ctx)
{
	if (rl->s)
		http_stream_set_pull(rl->s, pull, ctx);
}

void relay_kick(struct relay *rl)
{
	if (rl->s)
		http_stream_kick(rl->s);
}

static void finish(struct relay *rl, void (*how)(struct http_stream *))
{
	rl->ended = true;
	loop_timer_stop(rl->loop, &rl->keepalive);
	if (!rl->s) {
		free(rl);
		return;
	}
	/* on_close frees it once the client has the rest */
	how(rl->s);
}

void relay_end(struct relay *rl)
{
	finish(rl, http_stream_end);
}

void relay_abort(struct relay *rl)
{
	finish(rl, http_stream_abort);
}
