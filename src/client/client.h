/* libsbx's internals: one HTTP call (client.c), the SSE parser (sse.c),
 * JSON helpers. Nothing here is installed. */
#ifndef SBX_CLIENT_INTERNAL_H
#define SBX_CLIENT_INTERNAL_H

#include <curl/curl.h>
#include <jansson.h>

#include "client/libsbx.h"

struct sbx_client {
	char *base; /* without a trailing slash */
	char *auth; /* "Authorization: Bearer ...", or NULL */
	CURL *curl;
};

/* A growing byte buffer, always NUL-terminated. */
struct dbuf {
	char *data;
	size_t len, cap;
};
int dbuf_add(struct dbuf *b, const void *p, size_t n);
void dbuf_free(struct dbuf *b);

/* Server-sent events: fed bytes, calls on_event once per event. */
typedef int (*sse_event_fn)(void *ud, const char *event, const char *data,
                            size_t len, const char *id);
struct sse {
	struct dbuf line, data;
	char event[64];
	char id[32];
	bool has_data;
	sse_event_fn on_event;
	void *ud;
};
/* 0, or the nonzero an event callback returned. */
int sse_feed(struct sse *s, const char *p, size_t n);
void sse_free(struct sse *s);

enum { CALL_BUFFER, CALL_SINK, CALL_SSE };

struct call {
	const char *method;
	char *url; /* owned: freed by call_run */
	const char *accept;
	const char *session;
	const char *content_type;
	const char *body; /* a request body in memory, or */
	size_t body_len;
	sbx_source_cb src; /* a streamed one of src_size bytes */
	void *src_ud;
	uint64_t src_size;
	int mode;
	sbx_sink_cb sink;
	void *sink_ud;
	sse_event_fn on_event;
	void *ev_ud;
	sbx_progress_cb progress;
	void *pud;
	bool refuse_json; /* a JSON 2xx answer is a directory listing */
	/* results */
	CURL *h;
	long status;
	struct dbuf resp; /* CALL_BUFFER's body, or an error's */
	struct sse sse;
	bool started, aborted, is_dir, io_error;
	bool cb_err_set; /* an "error" event: cb_err holds it */
	struct sbx_error cb_err;
};

/* Performs k; 0 for a 2xx answer delivered whole. The caller frees
 * k->resp (dbuf_free) when it used CALL_BUFFER. */
int call_run(struct sbx_client *c, struct call *k, struct sbx_error *err);

/* A JSON call (body consumed, url freed) whose answer is parsed into *out
 * (may be NULL: not parsed). */
int json_call(struct sbx_client *c, const char *method, char *url, json_t *body,
              json_t **out, struct sbx_error *err);

void sbx_err_set(struct sbx_error *err, int status, const char *code,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* URLs: base + "/v1/sandbox/" + escaped id + rest (printf, already
 * escaped pieces). */
char *url_sandbox(struct sbx_client *c, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Percent-escapes s (keeping '/' when keep_slash); malloc'd. */
char *url_escape(const char *s, bool keep_slash);

/* base64 of an SSE data line into out (len <= 3/4 of n). -1 if invalid. */
ssize_t b64_decode(const char *in, size_t n, unsigned char *out);
char *b64_encode(const void *p, size_t n);

/* JSON helpers (jansson) */
char *jstrdup(json_t *o, const char *key); /* NULL when absent */
uint64_t juint(json_t *o, const char *key);
json_t *json_env(const char *const *kv); /* "K=V" list -> object */

#endif
