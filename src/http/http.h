/* HTTP glue over libmicrohttpd, run from the daemon's event loop (MHD's
 * own epoll fd sits in ours; no MHD threads). A request is handed to the
 * router once its body is complete; a handler either answers at once or
 * suspends the connection and answers later (http_respond_* resumes it),
 * so no thread ever waits for a command. */
#ifndef SBX_HTTP_H
#define SBX_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/buf.h"
#include "lib/err.h"
#include "lib/loop.h"

struct http_server;
struct MHD_Connection;
struct MHD_Response;

struct http_req {
	struct http_server *srv;
	struct MHD_Connection *conn;
	const char *method;
	const char *url; /* decoded path, without the query */
	struct buf body;
	bool body_too_large;
	bool suspended;
	bool answered;
	struct MHD_Response *pending; /* answer made while suspended */
	unsigned pending_status;
	/* set by whatever handles the request and must hear of its end: the
	 * client is gone or the answer was sent */
	void (*on_close)(struct http_req *r);
	void *ctx;
	/* A streamed request body (set from the begin hook): on_body takes
	 * what it can and returns how much; taking less suspends the upload
	 * until http_resume(). on_body_end replaces the handler. */
	size_t (*on_body)(struct http_req *r, const char *data, size_t len);
	void (*on_body_end)(struct http_req *r);
	bool body_ended;
	/* the dispatcher's decision, made once when the headers are in
	 * (who is asking, which route): freed with the request */
	void *route;
};

typedef void (*http_handler)(struct http_req *r, void *data);

struct http_config {
	/* Optional: sees each request when its headers are in, and may set
	 * on_body/on_body_end (or answer at once). */
	http_handler begin;
	const char *addr; /* IPv4 or IPv6 literal */
	uint16_t port;
	size_t max_body;
	http_handler handler;
	void *handler_data;
	/* name/value pairs (ending in NULL) added to every answer, or NULL */
	const char *const *headers;
};

int http_start(struct loop *l, const struct http_config *cfg,
               struct http_server **out, struct sbx_err *err);
void http_stop(struct http_server *s);
/* For the loop's idle hook: run MHD (resumed connections) and say when it
 * next needs to run (-1: no timeout). */
void http_run(struct http_server *s);
int http_timeout_ms(struct http_server *s);

const char *http_header(struct http_req *r, const char *name);
const char *http_query(struct http_req *r, const char *name);
/* Every header (query: every query argument, decoded; value may be NULL)
 * in the order sent; cb returns nonzero to stop. */
void http_foreach(struct http_req *r, bool query,
                  int (*cb)(void *ctx, const char *name, const char *value),
                  void *ctx);

/* Answers; each takes ownership of its body. */
void http_respond_json(struct http_req *r, unsigned status, json_t *body);
void http_respond_json_headers(struct http_req *r, unsigned status,
                               json_t *body, const char *const *headers);
void http_respond_text(struct http_req *r, unsigned status, const char *text);
void http_respond_empty(struct http_req *r, unsigned status);
/* Handler will answer later. */
void http_suspend(struct http_req *r);
/* A streamed body consumer can take more. */
void http_resume(struct http_req *r);

/* A response whose body is produced over time (SSE, file downloads). The
 * producer writes; past a high-water mark http_stream_write returns 1 and
 * the producer should pause until on_drain. on_close runs once when the
 * response is finished or the client is gone; the stream is freed after. */
struct http_stream;
#define HTTP_SIZE_UNKNOWN UINT64_MAX
struct http_stream *http_respond_stream(struct http_req *r, unsigned status,
                                        const char *content_type, uint64_t size,
                                        const char *const *headers);
int http_stream_write(struct http_stream *s, const void *data, size_t len);
void http_stream_end(struct http_stream *s);
/* End it short: what is queued is dropped and the connection closes
 * without the body's end (chunked: no last chunk; sized: fewer bytes), so
 * the client knows it did not get the whole answer. */
void http_stream_abort(struct http_stream *s);
size_t http_stream_pending(const struct http_stream *s);
/* Bytes pulled rather than written: once what was written is sent, MHD's
 * reader asks pull for the next ones straight into its own buffer (> 0:
 * bytes; 0: none now, http_stream_kick when there are; -1: no more from
 * it, the end comes by http_stream_end or _abort). */
typedef ssize_t (*http_pull_fn)(void *ctx, char *out, size_t max);
void http_stream_set_pull(struct http_stream *s, http_pull_fn pull, void *ctx);
void http_stream_kick(struct http_stream *s);
void http_stream_set_cbs(struct http_stream *s, void (*on_drain)(void *ctx),
                         void (*on_close)(void *ctx), void *ctx);

/* Switch protocols: answer 101 with headers (name/value pairs ending in
 * NULL). Once the answer is sent, upgraded(ctx, fd, extra, n, u) gets the
 * connection's socket (non-blocking, the caller's until
 * http_upgraded_close(u)) and any bytes the client sent after its
 * request. If the client leaves before that, r->on_close runs instead
 * (never both). -ENOMEM: nothing was sent, the request is the caller's. */
struct http_upgraded;
typedef void (*http_upgraded_cb)(void *ctx, int fd, const char *extra, size_t n,
                                 struct http_upgraded *u);
int http_respond_upgrade(struct http_req *r, const char *const *headers,
                         http_upgraded_cb upgraded, void *ctx);
/* Close an upgraded connection's socket (through MHD, which owns it); a
 * connection still open at http_stop is closed there. */
void http_upgraded_close(struct http_upgraded *u);

#endif
