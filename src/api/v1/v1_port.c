/* Ports (shared/spec/v1.md "Ports"): ANY /v1/sandbox/{id}/port/{port}/...
 * is proxied to 127.0.0.1:{port} inside the sandbox's network namespace,
 * whatever its network mode (the daemon makes the socket in there, so a
 * server bound to the sandbox's loopback is reached, and nothing is
 * opened to the outside); so are requests for {port}-{id}.<preview
 * domain>, and /v1/preview/{token}/... of an exposed link.
 *
 * Theory of operation. The request goes to the server as HTTP/1.0 with
 * "Connection: close" (so the answer ends with the connection and is
 * never chunked), minus hop-by-hop headers and the client's bearer token;
 * the answer's head is read and parsed, then its body is streamed to the
 * client through an http_stream (a slow client stops the reading). A
 * WebSocket upgrade goes as HTTP/1.1; on a 101 the client's connection is
 * taken from the HTTP server and joined to the server's (lib/fdpipe.c). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/api.h"
#include "core/network.h"
#include "lib/buf.h"
#include "lib/fdpipe.h"
#include "lib/log.h"
#include "lib/util.h"

#define HEAD_MAX 65536

struct portreq {
	struct api *a;
	struct http_req *r;     /* NULL once the request ended */
	struct http_stream *st; /* NULL before the head, or once freed */
	int refs;
	int fd;
	struct loop_watch w;
	uint32_t events;
	bool connected, streaming, paused, upgrade;
	struct buf out; /* the request, to send */
	size_t out_off;
	char *head; /* the answer's head, as read */
	size_t hlen;
};

/* ---- exposed links ------------------------------------------------------- */

struct link {
	char token[40];
	char *tenant, *id;
	unsigned port;
	uint64_t expires_ms; /* wall clock */
	struct link *next;
};
static struct link *links;

static void link_free(struct link *l)
{
	free(l->tenant);
	free(l->id);
	free(l);
}

static struct link *link_find(const char *token)
{
	for (struct link *l = links; l; l = l->next)
		if (!strcmp(l->token, token))
			return l;
	return NULL;
}

/* Drop expired links long gone (kept a day, so late users get 403). */
static void links_gc(void)
{
	uint64_t now = now_wall_ms();
	for (struct link **pp = &links; *pp;) {
		struct link *l = *pp;
		if (l->expires_ms + 86400000ull < now) {
			*pp = l->next;
			link_free(l);
		} else {
			pp = &l->next;
		}
	}
}

/* ---- the proxy ----------------------------------------------------------- */

static void pr_unref(struct portreq *p)
{
	if (--p->refs)
		return;
	buf_free(&p->out);
	free(p->head);
	free(p);
}

static void pr_close_fd(struct portreq *p)
{
	if (p->fd < 0)
		return;
	loop_del(p->a->m->loop, &p->w);
	close(p->fd);
	p->fd = -1;
}

static void pr_fail(struct portreq *p, unsigned status, const char *code,
                    const char *msg)
{
	pr_close_fd(p);
	if (p->r && !p->streaming)
		v1_error(p->r, status, code, "%s", msg);
}

static void pr_rearm(struct portreq *p)
{
	if (p->fd < 0)
		return;
	uint32_t ev = 0;
	if (!p->connected || p->out_off < p->out.len)
		ev |= EPOLLOUT;
	if (p->connected && !p->paused)
		ev |= EPOLLIN;
	if (ev != p->events) {
		p->events = ev;
		loop_mod(p->a->m->loop, &p->w, ev);
	}
}

static bool hop_by_hop(const char *name, bool upgrade)
{
	static const char *const hop[] = {"connection",
	                                  "keep-alive",
	                                  "proxy-authenticate",
	                                  "proxy-authorization",
	                                  "te",
	                                  "trailer",
	                                  "trailers",
	                                  "transfer-encoding",
	                                  "upgrade",
	                                  "content-length"};
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (!strcasecmp(name, hop[i]))
			return !(upgrade && !strcasecmp(name, "upgrade"));
	return false;
}

static void on_stream_drain(void *ctx)
{
	struct portreq *p = ctx;
	p->paused = false;
	pr_rearm(p);
}

static void on_stream_close(void *ctx)
{
	struct portreq *p = ctx;
	p->st = NULL;
	pr_close_fd(p);
	pr_unref(p);
}

static void on_upgraded_done(void *ctx, uint64_t a, uint64_t b)
{
	(void)a;
	(void)b;
	http_upgraded_close(ctx);
}

static void on_upgraded(void *ctx, int fd, const char *extra, size_t nextra,
                        struct http_upgraded *u)
{
	struct portreq *p = ctx;
	int up = p->fd;
	/* the pipe owns the server's fd from now on */
	loop_del(p->a->m->loop, &p->w);
	p->fd = -1;
	if (nextra)
		(void)!send(up, extra, nextra, MSG_NOSIGNAL | MSG_DONTWAIT);
	int mine = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (mine < 0) {
		close(up);
		http_upgraded_close(u);
	} else if (!fdpipe_new(p->a->m->loop, up, mine, p->head, p->hlen,
	                       on_upgraded_done, u)) {
		/* the pipe ended at once and closed it */
	}
	/* the request is over for us: its on_close does not run after an
	 * upgrade (http.h), so its reference goes here, then the upgrade's */
	p->r = NULL;
	p->refs--; /* never the last: the upgrade holds one */
	pr_unref(p);
}

/* The head is in: answer the client with it. */
static void pr_head(struct portreq *p, size_t end)
{
	char *h = p->head;
	h[end - 2] = '\0'; /* the last CRLF of the head */
	unsigned status = 0;
	if (sscanf(h, "HTTP/1.%*1[01] %3u", &status) != 1 || status < 100 ||
	    status > 599) {
		pr_fail(p, 502, "bad_gateway",
		        "the server in the sandbox did not answer HTTP");
		return;
	}
	const char *headers[2 * 64 + 1];
	size_t nh = 0;
	const char *ctype = NULL;
	uint64_t size = HTTP_SIZE_UNKNOWN;
	for (char *line = strstr(h, "\r\n"); line && nh < 2 * 64;) {
		line += 2;
		char *eol = strstr(line, "\r\n");
		if (eol)
			*eol = '\0';
		char *colon = strchr(line, ':');
		if (colon) {
			*colon = '\0';
			char *v = colon + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			if (!strcasecmp(line, "content-type"))
				ctype = v;
			else if (!strcasecmp(line, "content-length") &&
			         !p->upgrade)
				size = strtoull(v, NULL, 10);
			else if (!hop_by_hop(line,
			                     p->upgrade && status == 101) ||
			         (p->upgrade && status == 101 &&
			          !strcasecmp(line, "connection")))
				headers[nh++] = line, headers[nh++] = v;
		}
		line = eol;
	}
	headers[nh] = NULL;
	size_t rest = p->hlen - end;
	memmove(p->head, p->head + end, rest);
	p->hlen = rest;
	if (p->upgrade && status == 101) {
		p->refs++;
		p->streaming = true;
		if (http_respond_upgrade(p->r, headers, on_upgraded, p) < 0) {
			p->refs--;
			p->streaming = false;
			pr_fail(p, 502, "bad_gateway", "upgrade failed");
		}
		return;
	}
	p->st = http_respond_stream(p->r, status, ctype, size, headers);
	if (!p->st) {
		pr_fail(p, 500, "internal", "out of memory");
		return;
	}
	p->streaming = true;
	p->refs++;
	http_stream_set_cbs(p->st, on_stream_drain, on_stream_close, p);
	if (rest && http_stream_write(p->st, p->head, rest) == 1)
		p->paused = true;
	p->hlen = 0;
}

static void pr_io(struct loop_watch *w, uint32_t events)
{
	struct portreq *p = w->data;
	(void)events;
	if (!p->connected) {
		int e = 0;
		socklen_t el = sizeof(e);
		getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &e, &el);
		if (e == EINPROGRESS || (!e && !(events & EPOLLOUT)))
			return;
		if (e) {
			pr_fail(p, 502, "port_not_listening",
			        "nothing listens on that port in the sandbox");
			return;
		}
		p->connected = true;
	}
	while (p->out_off < p->out.len) {
		ssize_t n =
		    send(p->fd, p->out.data + p->out_off,
		         p->out.len - p->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN)
				break;
			pr_fail(p, 502, "bad_gateway",
			        "the server closed the connection");
			return;
		}
		p->out_off += (size_t)n;
	}
	while (!p->paused && p->fd >= 0) {
		char buf[65536];
		if (!p->streaming) {
			ssize_t n = recv(p->fd, p->head + p->hlen,
			                 HEAD_MAX - p->hlen, MSG_DONTWAIT);
			if (n < 0 && errno == EAGAIN)
				break;
			if (n <= 0) {
				pr_fail(p, 502, "bad_gateway",
				        "the server in the sandbox closed the "
				        "connection without an answer");
				return;
			}
			p->hlen += (size_t)n;
			char *e = memmem(p->head, p->hlen, "\r\n\r\n", 4);
			if (e) {
				pr_head(p, (size_t)(e - p->head) + 4);
				if (p->upgrade || p->fd < 0)
					return;
			} else if (p->hlen == HEAD_MAX) {
				pr_fail(p, 502, "bad_gateway",
				        "the answer's head is over 64 KiB");
				return;
			}
			continue;
		}
		if (!p->st) {
			pr_close_fd(p);
			return;
		}
		ssize_t n = recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			if (n < 0)
				http_stream_abort(p->st);
			else
				http_stream_end(p->st);
			pr_close_fd(p);
			return;
		}
		if (http_stream_write(p->st, buf, (size_t)n) == 1)
			p->paused = true;
	}
	pr_rearm(p);
}

static void pr_req_closed(struct http_req *r)
{
	struct portreq *p = r->ctx;
	p->r = NULL;
	if (!p->streaming)
		pr_close_fd(p);
	pr_unref(p);
}

/* Percent-encode what a path or query part may not carry raw. */
static void enc(struct buf *b, const char *s, bool query)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		bool ok =
		    (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		    (*c >= '0' && *c <= '9') || strchr("-._~!$'()*,;:@", *c) ||
		    (!query &&
		     (*c == '/' || *c == '=' || *c == '&' || *c == '+'));
		if (ok) {
			buf_append(b, c, 1);
		} else {
			char e[3] = {'%', hex[*c >> 4], hex[*c & 15]};
			buf_append(b, e, 3);
		}
	}
}

struct qctx {
	struct buf *b;
	bool first;
};

static int add_query(void *ctx, const char *k, const char *v)
{
	struct qctx *q = ctx;
	buf_append(q->b, q->first ? "?" : "&", 1);
	q->first = false;
	enc(q->b, k, true);
	if (v) {
		buf_append(q->b, "=", 1);
		enc(q->b, v, true);
	}
	return 0;
}

struct hctx {
	struct buf *b;
	bool upgrade;
};

static int add_header(void *ctx, const char *k, const char *v)
{
	struct hctx *h = ctx;
	/* the bearer token is the daemon's business, never the sandbox's;
	 * Host is rewritten to what the server listens on */
	if (!strcasecmp(k, "authorization") || !strcasecmp(k, "host") ||
	    hop_by_hop(k, h->upgrade) || strchr(k, '\r') || strchr(k, '\n') ||
	    (v && (strchr(v, '\r') || strchr(v, '\n'))))
		return 0;
	buf_printf(h->b, "%s: %s\r\n", k, v ? v : "");
	return 0;
}

void v1_port_proxy(struct api *a, struct http_req *r, const char *tenant,
                   const char *id, const char *port_s, const char *path)
{
	char *end;
	unsigned long port = strtoul(port_s, &end, 10);
	if (*end || !*port_s || port == 0 || port > 65535) {
		v1_error(r, 400, "invalid_request", "port must be 1-65535");
		return;
	}
	if (!sandbox_id_valid(id)) {
		v1_error(r, 400, "invalid_request",
		         "sandbox id must be 1-63 characters of [a-z0-9-]");
		return;
	}
	struct sandbox *sb = manager_find(a->m, tenant, id);
	if (!sb) {
		v1_error(r, 404, "sandbox_not_found", "no sandbox %s", id);
		return;
	}
	if (!sandbox_running(sb)) {
		v1_error(r, 502, "port_not_listening",
		         "the sandbox is not running, so nothing listens on "
		         "port %lu",
		         port);
		return;
	}
	sandbox_touch(sb);
	const char *upg = http_header(r, "Upgrade");
	bool upgrade = upg && !strcasecmp(upg, "websocket");
	int fd = sandbox_net_socket(sb, SOCK_STREAM | SOCK_NONBLOCK);
	if (fd < 0) {
		v1_error(r, 502, "port_not_listening",
		         "cannot reach the sandbox's network: %s",
		         strerror(-fd));
		return;
	}
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 &&
	    errno != EINPROGRESS) {
		close(fd);
		v1_error(r, 502, "port_not_listening",
		         "nothing listens on port %lu in the sandbox", port);
		return;
	}
	const char *failed = "out of memory";
	struct portreq *p = calloc(1, sizeof(*p));
	char *head = malloc(HEAD_MAX);
	if (!p || !head)
		goto fail;
	p->a = a;
	p->r = r;
	p->fd = fd;
	p->head = head;
	p->refs = 1;
	p->upgrade = upgrade;
	buf_init(&p->out, 0);
	buf_printf(&p->out, "%s ", r->method);
	enc(&p->out, path && *path ? path : "/", false);
	struct qctx q = {&p->out, true};
	http_foreach(r, true, add_query, &q);
	buf_printf(&p->out, " HTTP/%s\r\nHost: 127.0.0.1:%lu\r\n",
	           upgrade ? "1.1" : "1.0", port);
	struct hctx h = {&p->out, upgrade};
	http_foreach(r, false, add_header, &h);
	if (upgrade)
		buf_printf(&p->out, "Connection: Upgrade\r\n");
	else
		buf_printf(&p->out, "Connection: close\r\n");
	if (r->body.len ||
	    (strcmp(r->method, "GET") && strcmp(r->method, "HEAD")))
		buf_printf(&p->out, "Content-Length: %zu\r\n", r->body.len);
	buf_printf(&p->out, "X-Forwarded-Proto: http\r\n\r\n");
	if (r->body.len)
		buf_append(&p->out, r->body.data, r->body.len);
	p->w = (struct loop_watch){.fd = fd, .cb = pr_io, .data = p};
	p->events = EPOLLOUT;
	if (loop_add(a->m->loop, &p->w, EPOLLOUT) < 0) {
		failed = "cannot watch the connection";
		goto fail;
	}
	r->ctx = p;
	r->on_close = pr_req_closed;
	http_suspend(r);
	return;
fail:
	if (p)
		buf_free(&p->out);
	free(p);
	free(head);
	close(fd);
	v1_error(r, 500, "internal", "%s", failed);
}

/* ---- routes -------------------------------------------------------------- */

void v1_port_expose(struct api *a, struct http_req *r, struct route_match *m)
{
	char *end;
	unsigned long port = strtoul(m->params[1], &end, 10);
	if (*end || port == 0 || port > 65535) {
		v1_error(r, 400, "invalid_request", "port must be 1-65535");
		return;
	}
	struct sandbox *sb = v1_sandbox(a, r, m, false);
	if (!sb)
		return;
	links_gc();
	if (!strcmp(r->method, "DELETE")) {
		unsigned n = 0;
		for (struct link **pp = &links; *pp;) {
			struct link *l = *pp;
			if (l->port == port && !strcmp(l->id, sandbox_id(sb)) &&
			    !strcmp(l->tenant, sandbox_tenant(sb))) {
				*pp = l->next;
				link_free(l);
				n++;
			} else {
				pp = &l->next;
			}
		}
		http_respond_json(r, 200,
		                  json_pack("{s:I}", "revoked", (json_int_t)n));
		return;
	}
	json_t *body = v1_body(r);
	if (!body)
		return;
	json_t *ttl = json_object_get(body, "ttlSeconds");
	json_int_t secs = 3600;
	if (ttl && (!json_is_integer(ttl) || json_integer_value(ttl) < 1 ||
	            json_integer_value(ttl) > 7 * 86400)) {
		json_decref(body);
		v1_error(r, 400, "invalid_request",
		         "ttlSeconds must be an integer from 1 to 604800");
		return;
	}
	if (ttl)
		secs = json_integer_value(ttl);
	json_decref(body);
	struct link *l = calloc(1, sizeof(*l));
	if (!l || !(l->tenant = strdup(sandbox_tenant(sb))) ||
	    !(l->id = strdup(sandbox_id(sb)))) {
		if (l)
			link_free(l);
		v1_error(r, 500, "internal", "out of memory");
		return;
	}
	/* 128 random bits: the link is a bearer token for that port */
	unsigned char rnd[16];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		link_free(l);
		v1_error(r, 500, "internal", "no randomness");
		return;
	}
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(l->token + 2 * i, 3, "%02x", rnd[i]);
	l->port = (unsigned)port;
	l->expires_ms = now_wall_ms() + (uint64_t)secs * 1000;
	l->next = links;
	links = l;
	const char *host = http_header(r, "Host");
	char url[600], exp[32];
	snprintf(url, sizeof(url), "http://%s/v1/preview/%s/",
	         host && !strpbrk(host, "/\r\n \"") ? host : "127.0.0.1",
	         l->token);
	iso8601_ms(l->expires_ms, exp, sizeof(exp));
	http_respond_json(r, 201,
	                  json_pack("{s:s, s:s, s:s}", "url", url, "token",
	                            l->token, "expiresAt", exp));
}

void v1_port_preview(struct api *a, struct http_req *r, const char *token,
                     const char *path)
{
	struct link *l = link_find(token);
	if (!l || l->expires_ms <= now_wall_ms()) {
		v1_error(r, 403, l ? "link_expired" : "forbidden",
		         l ? "this link has expired" : "no such link");
		return;
	}
	char port[8];
	snprintf(port, sizeof(port), "%u", l->port);
	v1_port_proxy(a, r, l->tenant, l->id, port, path);
}
