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

/* The one request whose answer is read whole, which every buffered call
 * goes through: call_run in CALL_BUFFER mode, with "Accept:
 * application/json" unless k->accept says otherwise (k->url consumed). On
 * a 2xx (0), the answer's body moves to *body (NUL-terminated, *len its
 * length; the caller frees it) when body is not NULL; k->status is the
 * status either way. */
int call_whole(struct sbx_client *c, struct call *k, char **body, size_t *len,
               struct sbx_error *err);
/* call_whole with a JSON body (consumed; may be NULL) and the answer parsed
 * into *out (may be NULL: not parsed). */
int call_json(struct sbx_client *c, struct call *k, json_t *body, json_t **out,
              struct sbx_error *err);
/* call_json of method and url alone. */
int json_call(struct sbx_client *c, const char *method, char *url, json_t *body,
              json_t **out, struct sbx_error *err);
/* POST body (consumed) to url (consumed); the answer's "id" into *idp
 * (malloc'd), else a protocol error: "the answer has no <what> id". */
int json_create(struct sbx_client *c, char *url, json_t *body, const char *what,
                char **idp, struct sbx_error *err);
/* The elements of arr as an array of *n structs of size bytes, each filled
 * by fill (calloc'd: one struct when arr is empty or not an array); NULL
 * with err set when out of memory. */
void *json_array_fill(json_t *arr, size_t size, void (*fill)(void *, json_t *),
                      size_t *n, struct sbx_error *err);
/* The answer j (consumed) as one struct of size bytes filled by fill
 * (calloc'd); NULL with err set when j is not an object with a string "id"
 * ("the answer has no <what>") or out of memory. */
void *json_one_fill(json_t *j, size_t size, void (*fill)(void *, json_t *),
                    const char *what, struct sbx_error *err);

void sbx_err_set(struct sbx_error *err, int status, const char *code,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* URLs: base + "/v1/sandbox/" + escaped id + rest (printf, already
 * escaped pieces). */
char *url_sandbox(struct sbx_client *c, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* url_sandbox's URL of one item of a sandbox's collection dir ("/process"):
 * dir + "/" + the escaped item + rest (already escaped). */
char *url_sandbox_item(struct sbx_client *c, const char *id, const char *dir,
                       const char *item, const char *rest);
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
