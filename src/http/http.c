/* HTTP over libmicrohttpd, driven by the daemon's one event loop.
 *
 * Theory of operation. MHD runs in external-select mode: its epoll fd is
 * one watch of our loop, and http_run (the loop's idle hook) lets it do
 * its work; no thread of MHD's ever runs. A request is an http_req_priv,
 * made when its headers are in (on_access's first call), when the begin
 * hook (the router) decides who is asking and where it goes, and may take
 * the body as a stream (on_body, suspended while the consumer is full).
 * A complete request goes to the handler, which answers at once or
 * suspends the connection and answers later from a callback (a command's
 * exit, a written stdin): MHD then leaves the connection alone until the
 * answer is queued.
 *
 * Streamed answers (http_stream) are a queue that the producer fills and
 * MHD's content reader drains: past STREAM_HIGH unsent bytes the producer
 * is told to pause, below STREAM_LOW it is told to go on (on_drain). A
 * reader with nothing to send suspends the connection until the next
 * write.
 *
 * MHD does not look at a suspended connection's socket, so a client that
 * leaves would go unnoticed for as long as its command runs: each
 * suspended connection is watched for EPOLLRDHUP by the loop, and its
 * waiters (on_close of the request and of its stream) hear of it at once.
 * Every request ends in on_completed, which frees it; an answer is never
 * given twice. */
#include "http/http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/ws.h"
#include "lib/log.h"

struct http_server {
	struct MHD_Daemon *mhd;
	struct loop *loop;
	struct loop_watch watch;
	struct http_config cfg;
	struct http_upgraded *upgraded; /* open ones, closed at http_stop */
};

/* A connection taken from HTTP (a WebSocket, a proxied upgrade). */
struct http_upgraded {
	struct MHD_UpgradeResponseHandle *urh;
	struct http_server *srv;
	struct http_upgraded *prev, *next;
};

struct http_req_priv {
	struct http_req pub;
	bool want_suspend;
	bool body_waiting;          /* suspended because on_body took less */
	struct http_stream *stream; /* its streamed response, if any */
	/* While suspended MHD does not look at the socket, so a client that
	 * goes away would go unnoticed: we watch for its hang-up instead. */
	struct loop_watch hup;
	bool gone;
	http_upgraded_cb upgraded; /* http_respond_upgrade */
	void *upgraded_ctx;
};

static void suspend(struct http_req_priv *p);
static void resume(struct http_req_priv *p);

#define STREAM_HIGH (1u << 20)
#define STREAM_LOW (256u << 10)
#define STREAM_BLOCK (64u << 10)
/* Each connection's buffer (MHD's default: 32 KiB): half of it is where an
 * upload's body is read, a chunked answer framed; bigger, an upload of a
 * MiB is a few reads and wakeups instead of 64. MHD zeroes it between
 * requests, so it stays modest. */
#define CONN_MEMORY (256u << 10)
#define STREAM_BIG_BLOCK (1u << 20)

struct http_stream {
	struct http_req *r; /* NULL once the request is done */
	struct buf q;
	size_t off; /* first unsent byte in q */
	bool ended;
	bool aborted;        /* cut: the client sees the body end short */
	bool reader_waiting; /* connection suspended in the reader */
	bool paused;         /* producer told to wait */
	void (*on_drain)(void *ctx);
	void (*on_close)(void *ctx);
	void *ctx;
	http_pull_fn pull; /* NULL: only what is written */
	void *pull_ctx;
	uint64_t size; /* of the body, or HTTP_SIZE_UNKNOWN */
};

static void queue_pending(struct http_req *r)
{
	MHD_queue_response(r->conn, r->pending_status, r->pending);
	MHD_destroy_response(r->pending);
	r->pending = NULL;
}

static void answer(struct http_req *r, unsigned status,
                   struct MHD_Response *resp)
{
	if (r->answered) { /* a bug: keep the first answer */
		MHD_destroy_response(resp);
		return;
	}
	r->answered = true;
	/* (a request made by a fuzzer or a unit test has no server) */
	for (const char *const *h = r->srv ? r->srv->cfg.headers : NULL;
	     h && h[0]; h += 2)
		MHD_add_response_header(resp, h[0], h[1]);
	r->pending = resp;
	r->pending_status = status;
	if (r->suspended) {
		r->suspended = false;
		resume((struct http_req_priv *)r);
	}
}

static struct MHD_Response *from_buf(char *data, size_t len, const char *type)
{
	struct MHD_Response *resp =
	    MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(data);
		return NULL;
	}
	if (type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
		                        type);
	return resp;
}

void http_respond_json(struct http_req *r, unsigned status, json_t *body)
{
	char *s = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!s) {
		s = strdup("{\"error\":\"internal error: out of memory\"}");
		status = 500;
	}
	struct MHD_Response *resp = from_buf(s, strlen(s), "application/json");
	if (resp)
		answer(r, status, resp);
}

void http_respond_json_headers(struct http_req *r, unsigned status,
                               json_t *body, const char *const *headers)
{
	char *s = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!s) {
		http_respond_text(r, 500, "out of memory\n");
		return;
	}
	struct MHD_Response *resp = from_buf(s, strlen(s), "application/json");
	if (!resp)
		return;
	for (const char *const *h = headers; h && h[0]; h += 2)
		MHD_add_response_header(resp, h[0], h[1]);
	answer(r, status, resp);
}

void http_respond_text(struct http_req *r, unsigned status, const char *text)
{
	char *s = strdup(text);
	struct MHD_Response *resp =
	    s ? from_buf(s, strlen(s), "text/plain; charset=utf-8") : NULL;
	if (resp)
		answer(r, status, resp);
}

void http_respond_empty(struct http_req *r, unsigned status)
{
	struct MHD_Response *resp =
	    MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (resp)
		answer(r, status, resp);
}

void http_suspend(struct http_req *r)
{
	((struct http_req_priv *)r)->want_suspend = true;
}

void http_resume(struct http_req *r)
{
	struct http_req_priv *p = (struct http_req_priv *)r;
	if (p->body_waiting) {
		p->body_waiting = false;
		r->suspended = false;
		resume(p);
	}
}

/* MHD sent the 101: the socket is the caller's now. The request is not
 * over for MHD until the socket is closed through it, but nobody waits on
 * it any more. */
static void on_upgrade(void *cls, struct MHD_Connection *conn, void *con_cls,
                       const char *extra, size_t n, MHD_socket sock,
                       struct MHD_UpgradeResponseHandle *urh)
{
	struct http_req_priv *p = con_cls;
	struct http_server *srv = p->pub.srv;
	(void)cls;
	(void)conn;
	loop_del(srv->loop, &p->hup);
	p->pub.on_close = NULL;
	http_upgraded_cb cb = p->upgraded;
	p->upgraded = NULL;
	struct http_upgraded *u = cb ? calloc(1, sizeof(*u)) : NULL;
	if (!u) {
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		return;
	}
	u->urh = urh;
	u->srv = srv;
	u->next = srv->upgraded;
	if (u->next)
		u->next->prev = u;
	srv->upgraded = u;
	fcntl(sock, F_SETFL, fcntl(sock, F_GETFL) | O_NONBLOCK);
	cb(p->upgraded_ctx, sock, extra, n, u);
}

int http_respond_upgrade(struct http_req *r, const char *const *headers,
                         http_upgraded_cb upgraded, void *ctx)
{
	struct http_req_priv *p = (struct http_req_priv *)r;
	struct MHD_Response *resp =
	    MHD_create_response_for_upgrade(on_upgrade, NULL);
	if (!resp)
		return -ENOMEM;
	for (const char *const *h = headers; h && h[0]; h += 2)
		MHD_add_response_header(resp, h[0], h[1]);
	p->upgraded = upgraded;
	p->upgraded_ctx = ctx;
	answer(r, 101, resp);
	return 0;
}

void http_upgraded_close(struct http_upgraded *u)
{
	if (u->prev)
		u->prev->next = u->next;
	else
		u->srv->upgraded = u->next;
	if (u->next)
		u->next->prev = u->prev;
	MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
	free(u);
}

/* Park the connection until the producer writes (or kicks). */
static ssize_t stream_wait(struct http_stream *s)
{
	if (s->r && !s->reader_waiting) {
		s->reader_waiting = true;
		suspend((struct http_req_priv *)s->r);
	}
	return 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct http_stream *s = cls;
	(void)pos;
	size_t avail = s->q.len - s->off;
	if (s->aborted)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (!avail && s->pull && !s->ended) {
		/* straight into MHD's buffer, which it sends from */
		ssize_t n = s->pull(s->pull_ctx, out, max);
		if (n > 0)
			return n;
		if (n < 0)
			s->pull = NULL;
		/* the source may have ended within the pull */
		if (s->aborted)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		avail = s->q.len - s->off;
	}
	if (avail) {
		size_t n = avail < max ? avail : max;
		memcpy(out, s->q.data + s->off, n);
		s->off += n;
		if (s->off == s->q.len)
			s->off = s->q.len = 0;
		else if (s->off > (s->q.cap / 2)) { /* compact */
			memmove(s->q.data, s->q.data + s->off,
			        s->q.len - s->off);
			s->q.len -= s->off;
			s->off = 0;
		}
		if (s->paused && s->q.len - s->off < STREAM_LOW) {
			s->paused = false;
			if (s->on_drain)
				s->on_drain(s->ctx);
		}
		return (ssize_t)n;
	}
	if (s->ended)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (s->r && ((struct http_req_priv *)s->r)->gone)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	/* nothing yet: park the connection until the producer writes */
	return stream_wait(s);
}

static void stream_free(void *cls)
{
	struct http_stream *s = cls;
	if (s->r)
		((struct http_req_priv *)s->r)->stream = NULL;
	if (s->on_close)
		s->on_close(s->ctx);
	buf_free(&s->q);
	free(s);
}

static void stream_wake(struct http_stream *s)
{
	if (s->reader_waiting && s->r) {
		s->reader_waiting = false;
		resume((struct http_req_priv *)s->r);
	}
}

struct http_stream *http_respond_stream(struct http_req *r, unsigned status,
                                        const char *content_type, uint64_t size,
                                        const char *const *headers)
{
	struct http_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->r = r;
	s->size = size;
	((struct http_req_priv *)r)->stream = s;
	buf_init(&s->q, 0);
	/* a body of known size is sent from MHD's block of this size,
	 * straight (no chunk framing): one big block, few sends per MiB */
	size_t block = STREAM_BLOCK;
	if (size != HTTP_SIZE_UNKNOWN && size > block)
		block =
		    size < STREAM_BIG_BLOCK ? (size_t)size : STREAM_BIG_BLOCK;
	struct MHD_Response *resp = MHD_create_response_from_callback(
	    size == HTTP_SIZE_UNKNOWN ? MHD_SIZE_UNKNOWN : size, block,
	    stream_read, s, stream_free);
	if (!resp) {
		free(s);
		return NULL;
	}
	if (content_type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
		                        content_type);
	for (const char *const *h = headers; h && h[0]; h += 2)
		MHD_add_response_header(resp, h[0], h[1]);
	answer(r, status, resp);
	return s;
}

int http_stream_write(struct http_stream *s, const void *data, size_t len)
{
	if (!s->ended && len)
		buf_append(&s->q, data, len);
	stream_wake(s);
	if (s->q.len - s->off >= STREAM_HIGH)
		s->paused = true;
	return s->paused;
}

void http_stream_end(struct http_stream *s)
{
	s->ended = true;
	stream_wake(s);
}

void http_stream_abort(struct http_stream *s)
{
	s->ended = s->aborted = true;
	stream_wake(s);
}

size_t http_stream_pending(const struct http_stream *s)
{
	return s->q.len - s->off;
}

void http_stream_set_pull(struct http_stream *s, http_pull_fn pull, void *ctx)
{
	s->pull = pull;
	s->pull_ctx = ctx;
}

void http_stream_kick(struct http_stream *s)
{
	stream_wake(s);
}

void http_stream_set_cbs(struct http_stream *s, void (*on_drain)(void *ctx),
                         void (*on_close)(void *ctx), void *ctx)
{
	s->on_drain = on_drain;
	s->on_close = on_close;
	s->ctx = ctx;
}

const char *http_header(struct http_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

struct foreach_ctx {
	int (*cb)(void *ctx, const char *name, const char *value);
	void *ctx;
};

static enum MHD_Result foreach_one(void *cls, enum MHD_ValueKind kind,
                                   const char *key, const char *value)
{
	struct foreach_ctx *f = cls;
	(void)kind;
	return f->cb(f->ctx, key, value) ? MHD_NO : MHD_YES;
}

void http_foreach(struct http_req *r, bool query,
                  int (*cb)(void *ctx, const char *name, const char *value),
                  void *ctx)
{
	struct foreach_ctx f = {cb, ctx};
	MHD_get_connection_values(
	    r->conn, query ? MHD_GET_ARGUMENT_KIND : MHD_HEADER_KIND,
	    foreach_one, &f);
}

const char *http_query(struct http_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND,
	                                   name);
}

static void too_large(struct http_req *r)
{
	r->body_too_large = true;
	json_t *j = json_pack("{s:s, s:s}", "error", "request body too large",
	                      "code", "too_large");
	http_respond_json(r, 413, j);
}

static void on_hangup(struct loop_watch *w, uint32_t events)
{
	(void)events; /* any of them: the client is gone */
	struct http_req_priv *p = w->data;
	struct http_req *r = &p->pub;
	loop_del(r->srv->loop, w);
	p->gone = true;
	/* those waiting on this request hear of it now, not when (or if) an
	 * answer is ready */
	if (r->on_close) {
		void (*cb)(struct http_req *) = r->on_close;
		r->on_close = NULL;
		cb(r);
	}
	struct http_stream *st = p->stream;
	if (st && st->on_close) {
		void (*cb)(void *) = st->on_close;
		st->on_close = NULL;
		st->on_drain = NULL;
		st->pull = NULL;
		cb(st->ctx);
	}
	/* an upload or a stream is woken so MHD closes it; a request still
	 * waiting for its answer is closed when the answer comes */
	if (p->body_waiting || (st && st->reader_waiting)) {
		p->body_waiting = false;
		if (st)
			st->reader_waiting = false;
		r->suspended = false;
		resume(p);
	}
}

static void watch_hangup(struct http_req_priv *p)
{
	struct http_req *r = &p->pub;
	if (p->gone || p->hup.active)
		return;
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return;
	p->hup = (struct loop_watch){
	    .fd = ci->connect_fd, .cb = on_hangup, .data = p};
	loop_add(r->srv->loop, &p->hup, EPOLLRDHUP);
}

static void suspend(struct http_req_priv *p)
{
	MHD_suspend_connection(p->pub.conn);
	watch_hangup(p);
}

static void resume(struct http_req_priv *p)
{
	/* an upload in progress stays watched: MHD misses some of its
	 * clients' departures (a half-close mid-body) */
	if (!p->pub.on_body || p->pub.body_ended)
		loop_del(p->pub.srv->loop, &p->hup);
	MHD_resume_connection(p->pub.conn);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn,
                                 const char *url, const char *method,
                                 const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
	struct http_server *s = cls;
	struct http_req_priv *p = *con_cls;
	(void)version;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return MHD_NO;
		p->pub.srv = s;
		p->pub.conn = conn;
		p->pub.method = method;
		p->pub.url = url;
		buf_init(&p->pub.body, 0);
		*con_cls = p;
		if (s->cfg.begin) {
			s->cfg.begin(&p->pub, s->cfg.handler_data);
			if (p->pub.pending) {
				queue_pending(&p->pub);
				return MHD_YES;
			}
			if (p->pub.on_body)
				watch_hangup(p);
		}
		const char *cl = MHD_lookup_connection_value(
		    conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (!p->pub.on_body && cl &&
		    strtoull(cl, NULL, 10) > s->cfg.max_body) {
			too_large(&p->pub);
			queue_pending(&p->pub);
		}
		return MHD_YES;
	}
	struct http_req *r = &p->pub;
	if (p->gone && *upload_data_size)
		return MHD_NO; /* the client left mid-upload: close */
	if (r->on_body) {
		/* Never answer before the body is in: MHD (0.9.75) spins on a
		 * connection answered mid-upload. An early answer (an error
		 * from the consumer) waits; the rest of the body is dropped. */
		if (*upload_data_size) {
			size_t took =
			    r->answered
			        ? *upload_data_size
			        : r->on_body(r, upload_data, *upload_data_size);
			*upload_data_size -= took;
			if (*upload_data_size && !r->suspended) {
				p->body_waiting = true;
				r->suspended = true;
				suspend(p);
			}
			return MHD_YES;
		}
		if (!r->body_ended) {
			r->body_ended = true;
			loop_del(s->loop, &p->hup);
			if (!r->answered)
				r->on_body_end(r);
		}
		if (r->pending) {
			queue_pending(r);
		} else if (!r->suspended) {
			r->suspended = true;
			suspend(p);
		}
		return MHD_YES;
	}
	if (*upload_data_size) {
		if (!r->body_too_large) {
			if (r->body.len + *upload_data_size > s->cfg.max_body)
				too_large(r); /* sent once the body is in */
			else if (buf_append(&r->body, upload_data,
			                    *upload_data_size) < 0)
				return MHD_NO;
		}
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (r->pending) {
		queue_pending(r);
		return MHD_YES;
	}
	if (r->answered)
		return MHD_YES; /* already queued (413) */
	if (!p->want_suspend) {
		s->cfg.handler(r, s->cfg.handler_data);
		if (r->pending) {
			queue_pending(r);
			return MHD_YES;
		}
		if (!p->want_suspend) {
			log_error("http: %s %s: handler gave no answer", method,
			          url);
			http_respond_text(r, 500, "internal error\n");
			queue_pending(r);
			return MHD_YES;
		}
	}
	if (!r->suspended) {
		r->suspended = true;
		suspend(p);
	}
	return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct http_req_priv *p = *con_cls;
	(void)cls;
	(void)conn;
	(void)toe;
	if (!p)
		return;
	loop_del(p->pub.srv->loop, &p->hup);
	if (p->pub.on_close)
		p->pub.on_close(&p->pub);
	/* its stream (if MHD still holds the response) must not touch the
	 * connection any more */
	if (p->stream)
		p->stream->r = NULL;
	if (p->pub.pending)
		MHD_destroy_response(p->pub.pending);
	buf_free(&p->pub.body);
	free(p->pub.route);
	free(p);
	*con_cls = NULL;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Percent-decoding of the path and query, except "%00": decoded, a NUL
 * would end the C string early, and "/api/rooms/a%00/x" would quietly
 * become "/api/rooms/a" (another resource). Kept as the three characters,
 * no route matches it. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
	char *w = s;
	(void)cls;
	(void)c;
	for (char *r = s; *r;) {
		int hi, lo;
		if (r[0] == '%' && (hi = hexval(r[1])) >= 0 &&
		    (lo = hexval(r[2])) >= 0 && (hi || lo)) {
			*w++ = (char)(hi * 16 + lo);
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
	return (size_t)(w - s);
}

static void on_mhd_ready(struct loop_watch *w, uint32_t events)
{
	struct http_server *s = w->data;
	(void)events;
	MHD_run(s->mhd);
}

static void log_mhd(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	log_warn("http: %s", line);
}

int http_start(struct loop *l, const struct http_config *cfg,
               struct http_server **out, struct sbx_err *err)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
	                 MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG;
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, cfg->addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(cfg->port);
	} else if (inet_pton(AF_INET6, cfg->addr, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(cfg->port);
		flags |= MHD_USE_IPv6;
	} else {
		return sbx_err_set(err, EINVAL, "bad listen address %s",
		                   cfg->addr);
	}
	struct http_server *s = calloc(1, sizeof(*s));
	if (!s)
		return sbx_err_set(err, ENOMEM, "out of memory");
	s->cfg = *cfg;
	s->loop = l;
	s->mhd = MHD_start_daemon(
	    flags, cfg->port, NULL, NULL, on_access, s,
	    MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL,
	    MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_SOCK_ADDR,
	    (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
	    s, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)300,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)4096,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
	    MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024, MHD_OPTION_END);
	if (!s->mhd) {
		/* MHD says why in the log (log_mhd); errno is its last call's
		 */
		int e = errno ? errno : EADDRINUSE;
		free(s);
		return sbx_err_sys(err, e, "cannot listen on %s:%u", cfg->addr,
		                   cfg->port);
	}
	const union MHD_DaemonInfo *info =
	    MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	s->watch.fd = info->epoll_fd;
	s->watch.cb = on_mhd_ready;
	s->watch.data = s;
	int r = loop_add(l, &s->watch, EPOLLIN);
	if (r < 0) {
		MHD_stop_daemon(s->mhd);
		free(s);
		return sbx_err_sys(err, -r, "epoll add");
	}
	*out = s;
	return 0;
}

void http_run(struct http_server *s)
{
	MHD_run(s->mhd);
}

int http_timeout_ms(struct http_server *s)
{
	MHD_UNSIGNED_LONG_LONG t;
	if (MHD_get_timeout(s->mhd, &t) != MHD_YES)
		return -1;
	return t > 60000 ? 60000 : (int)t;
}

void http_stop(struct http_server *s)
{
	if (!s)
		return;
	/* upgraded connections are ours to close, before MHD goes: the
	 * terminals say goodbye, the rest are cut */
	ws_shutdown();
	while (s->upgraded)
		http_upgraded_close(s->upgraded);
	MHD_run(s->mhd);
	loop_del(s->loop, &s->watch);
	MHD_stop_daemon(s->mhd);
	free(s);
}
