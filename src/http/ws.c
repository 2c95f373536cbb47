/* WebSocket over libmicrohttpd's upgrade, framed by wslay.
 *
 * Theory of operation. ws_accept answers the handshake with 101 and makes
 * the wslay context at once, so that the face can queue messages (a
 * terminal's replay) before MHD has sent the 101; the socket arrives in
 * on_upgraded, from then on it is watched by the loop: readable, wslay
 * reads and parses (messages go to ops->message, pings are answered,
 * a close is answered); writable, wslay writes what is queued. The watch
 * asks for EPOLLOUT only while something is queued. Nothing is freed
 * inside a wslay call: the end of a connection is noted (dead) and
 * finished after the call returns, from a zero timer when the call came
 * from the face (ws_send), so that a face never sees its ws vanish while
 * it holds it. */
#include "http/ws.h"

#include <nettle/sha1.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "lib/base64.h"
#include "lib/log.h"

struct ws {
	struct loop *loop;
	const struct ws_ops *ops;
	void *ctx;
	wslay_event_context_ptr wc;
	struct http_req *r; /* until upgraded (or the client left) */
	struct http_upgraded *u;
	struct loop_watch w; /* the socket, once upgraded */
	uint32_t events;
	char *extra; /* bytes read by MHD after the request */
	size_t extra_len, extra_off;
	bool behind;  /* ws_send said 1: drain is owed */
	bool closing; /* ws_close or the client's close */
	bool dead;    /* to be finished */
	bool finished;
	bool busy;     /* inside a wslay call */
	unsigned code; /* the client's close code */
	struct loop_timer ping, grace, reap;
	struct ws *prev, *next; /* every live ws (ws_shutdown) */
};

static struct ws *live;

static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

void ws_accept_key(const char *key, char out[29])
{
	struct sha1_ctx c;
	uint8_t d[SHA1_DIGEST_SIZE];
	sha1_init(&c);
	sha1_update(&c, strlen(key), (const uint8_t *)key);
	sha1_update(&c, sizeof(guid) - 1, (const uint8_t *)guid);
	sha1_digest(&c, sizeof(d), d);
	base64_encode(d, sizeof(d), out);
}

/* Whether the comma-separated header value has token (any case). */
static bool has_token(const char *v, const char *token)
{
	size_t tl = strlen(token);
	while (v && *v) {
		v += strspn(v, " \t,");
		size_t l = strcspn(v, ",");
		size_t e = l;
		while (e && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e == tl && !strncasecmp(v, token, tl))
			return true;
		v += l;
	}
	return false;
}

const char *ws_handshake_problem(struct http_req *r)
{
	const char *key = http_header(r, "Sec-WebSocket-Key");
	const char *ver = http_header(r, "Sec-WebSocket-Version");
	char raw[32];
	if (strcmp(r->method, "GET"))
		return "a WebSocket handshake is a GET";
	if (!has_token(http_header(r, "Upgrade"), "websocket") ||
	    !has_token(http_header(r, "Connection"), "upgrade"))
		return "this endpoint is a WebSocket: the request needs "
		       "\"Upgrade: websocket\" and \"Connection: Upgrade\"";
	if (!ver || strcmp(ver, "13"))
		return "Sec-WebSocket-Version must be 13";
	/* 16 random bytes, base64: 24 characters */
	if (!key || strlen(key) != 24 || base64_decode(key, 24, raw) != 16)
		return "Sec-WebSocket-Key must be 16 bytes in base64";
	return NULL;
}

static void finish(struct ws *ws)
{
	if (ws->finished)
		return;
	ws->finished = true;
	if (ws->prev)
		ws->prev->next = ws->next;
	else
		live = ws->next;
	if (ws->next)
		ws->next->prev = ws->prev;
	loop_timer_stop(ws->loop, &ws->ping);
	loop_timer_stop(ws->loop, &ws->grace);
	loop_timer_stop(ws->loop, &ws->reap);
	if (ws->w.fd >= 0)
		loop_del(ws->loop, &ws->w);
	if (ws->u)
		http_upgraded_close(ws->u);
	if (ws->r)
		ws->r->on_close = NULL;
	wslay_event_context_free(ws->wc);
	void (*closed)(void *, unsigned) = ws->ops->closed;
	void *ctx = ws->ctx;
	unsigned code = ws->code ? ws->code : 1006;
	free(ws->extra);
	free(ws);
	closed(ctx, code);
}

static void on_reap(struct loop_timer *t)
{
	finish(t->data);
}

/* The connection is over: finished now unless a caller holds it. */
static void die(struct ws *ws)
{
	ws->dead = true;
	if (!ws->busy)
		loop_timer_start(ws->loop, &ws->reap, 0);
}

static ssize_t recv_cb(wslay_event_context_ptr wc, uint8_t *buf, size_t len,
                       int flags, void *user)
{
	struct ws *ws = user;
	(void)flags;
	if (ws->extra_off < ws->extra_len) {
		size_t n = ws->extra_len - ws->extra_off;
		if (n > len)
			n = len;
		memcpy(buf, ws->extra + ws->extra_off, n);
		ws->extra_off += n;
		return (ssize_t)n;
	}
	ssize_t n;
	do
		n = recv(ws->w.fd, buf, len, 0);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		return n;
	wslay_event_set_error(wc, n < 0 && errno == EAGAIN
	                              ? WSLAY_ERR_WOULDBLOCK
	                              : WSLAY_ERR_CALLBACK_FAILURE);
	return -1;
}

static ssize_t send_cb(wslay_event_context_ptr wc, const uint8_t *data,
                       size_t len, int flags, void *user)
{
	struct ws *ws = user;
	(void)flags;
	if (ws->w.fd < 0) { /* not upgraded yet: keep it queued */
		wslay_event_set_error(wc, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	ssize_t n;
	do
		n = send(ws->w.fd, data, len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n >= 0)
		return n;
	wslay_event_set_error(wc, errno == EAGAIN ? WSLAY_ERR_WOULDBLOCK
	                                          : WSLAY_ERR_CALLBACK_FAILURE);
	return -1;
}

static void on_msg(wslay_event_context_ptr wc,
                   const struct wslay_event_on_msg_recv_arg *arg, void *user)
{
	struct ws *ws = user;
	(void)wc;
	if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
		ws->code = arg->status_code ? arg->status_code : 1005;
		ws->closing = true;
		return;
	}
	if (ws->closing || (arg->opcode != WSLAY_TEXT_FRAME &&
	                    arg->opcode != WSLAY_BINARY_FRAME))
		return;
	ws->ops->message(ws->ctx, arg->opcode == WSLAY_TEXT_FRAME,
	                 (const char *)arg->msg, arg->msg_length);
}

/* After a wslay call: watch what wslay wants; a connection that wants
 * nothing more (closed both ways) or failed is over. */
static void settle(struct ws *ws, int rc)
{
	if (ws->dead)
		return;
	if (rc || (!wslay_event_want_read(ws->wc) &&
	           !wslay_event_want_write(ws->wc))) {
		die(ws);
		return;
	}
	if (ws->w.fd >= 0) {
		uint32_t ev = (wslay_event_want_read(ws->wc) ? EPOLLIN : 0) |
		              (wslay_event_want_write(ws->wc) ? EPOLLOUT : 0) |
		              EPOLLRDHUP;
		if (ev != ws->events) {
			if (ws->events)
				loop_mod(ws->loop, &ws->w, ev);
			else
				loop_add(ws->loop, &ws->w, ev);
			ws->events = ev;
		}
	}
	if (ws->behind && ws_pending(ws) < WS_LOW) {
		ws->behind = false;
		if (ws->ops->drain)
			ws->ops->drain(ws->ctx);
	}
}

static void on_sock(struct loop_watch *w, uint32_t events)
{
	struct ws *ws = w->data;
	int rc = 0;
	ws->busy = true;
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		rc = wslay_event_recv(ws->wc);
	if (!rc && (events & EPOLLOUT))
		rc = wslay_event_send(ws->wc);
	ws->busy = false;
	if (!rc)
		loop_timer_start(ws->loop, &ws->ping, WS_PING_MS);
	settle(ws, rc);
	if (ws->dead)
		finish(ws);
}

static void on_ping(struct loop_timer *t)
{
	struct ws *ws = t->data;
	struct wslay_event_msg m = {.opcode = WSLAY_PING};
	if (ws->closing || ws->dead)
		return;
	ws->busy = true;
	int rc = wslay_event_queue_msg(ws->wc, &m);
	if (!rc)
		rc = wslay_event_send(ws->wc);
	ws->busy = false;
	loop_timer_start(ws->loop, &ws->ping, WS_PING_MS);
	settle(ws, rc);
	if (ws->dead)
		finish(ws);
}

static void on_grace(struct loop_timer *t)
{
	struct ws *ws = t->data;
	log_info("http: websocket closed without the client's answer after "
	         "%u ms",
	         WS_CLOSE_GRACE_MS);
	finish(ws);
}

static void on_upgraded(void *ctx, int fd, const char *extra, size_t n,
                        struct http_upgraded *u)
{
	struct ws *ws = ctx;
	ws->r = NULL;
	ws->u = u;
	ws->w = (struct loop_watch){.fd = fd, .cb = on_sock, .data = ws};
	if (n && (ws->extra = malloc(n))) {
		memcpy(ws->extra, extra, n);
		ws->extra_len = n;
	}
	/* what was queued meanwhile goes now; bytes MHD read are parsed */
	on_sock(&ws->w, EPOLLOUT | (n ? EPOLLIN : 0));
}

/* The client left before the 101 went out. */
static void on_req_close(struct http_req *r)
{
	struct ws *ws = r->ctx;
	ws->r = NULL;
	finish(ws);
}

struct ws *ws_accept(struct http_req *r, struct loop *l,
                     const struct ws_ops *ops, void *ctx)
{
	static const struct wslay_event_callbacks cbs = {
	    .recv_callback = recv_cb,
	    .send_callback = send_cb,
	    .on_msg_recv_callback = on_msg,
	};
	char accept[29];
	struct ws *ws = calloc(1, sizeof(*ws));
	if (!ws || wslay_event_context_server_init(&ws->wc, &cbs, ws)) {
		free(ws);
		http_respond_text(r, 500, "out of memory\n");
		return NULL;
	}
	wslay_event_config_set_max_recv_msg_length(ws->wc, WS_MAX_MESSAGE);
	ws->loop = l;
	ws->ops = ops;
	ws->ctx = ctx;
	ws->r = r;
	ws->w.fd = -1;
	ws->ping = (struct loop_timer){.cb = on_ping, .data = ws};
	ws->grace = (struct loop_timer){.cb = on_grace, .data = ws};
	ws->reap = (struct loop_timer){.cb = on_reap, .data = ws};
	ws->next = live;
	if (live)
		live->prev = ws;
	live = ws;
	ws_accept_key(http_header(r, "Sec-WebSocket-Key"), accept);
	const char *headers[] = {"Upgrade", "websocket", "Sec-WebSocket-Accept",
	                         accept, NULL};
	r->on_close = on_req_close;
	r->ctx = ws;
	if (http_respond_upgrade(r, headers, on_upgraded, ws) < 0)
		http_respond_text(r, 500,
		                  "out of memory\n"); /* then on_close */
	return ws;
}

size_t ws_pending(const struct ws *ws)
{
	return wslay_event_get_queued_msg_length(ws->wc);
}

int ws_send(struct ws *ws, bool text, const char *data, size_t len)
{
	if (ws->closing || ws->dead)
		return 0;
	struct wslay_event_msg m = {
	    .opcode = text ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME,
	    .msg = (const uint8_t *)data,
	    .msg_length = len,
	};
	bool nested = ws->busy;
	ws->busy = true;
	int rc = wslay_event_queue_msg(ws->wc, &m);
	if (!rc && ws->w.fd >= 0)
		rc = wslay_event_send(ws->wc);
	ws->busy = nested;
	settle(ws, rc);
	if (ws->dead)
		return 0;
	if (ws_pending(ws) >= WS_HIGH)
		ws->behind = true;
	return ws->behind;
}

void ws_close(struct ws *ws, unsigned code, const char *reason)
{
	if (ws->dead || ws->closing)
		return;
	ws->closing = true;
	bool nested = ws->busy;
	ws->busy = true;
	int rc = wslay_event_queue_close(ws->wc, (uint16_t)code,
	                                 (const uint8_t *)reason,
	                                 reason ? strlen(reason) : 0);
	if (!rc && ws->w.fd >= 0)
		rc = wslay_event_send(ws->wc);
	ws->busy = nested;
	loop_timer_start(ws->loop, &ws->grace, WS_CLOSE_GRACE_MS);
	settle(ws, rc);
}

void ws_shutdown(void)
{
	while (live)
		finish(live);
}
