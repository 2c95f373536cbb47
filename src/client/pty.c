/* libsbx: the terminal, a WebSocket (RFC 6455) at GET /v1/sandbox/{id}/pty
 * (shared/spec/v1.md "Terminal").
 *
 * Debian 12's libcurl (7.88) has no WebSocket support, so the connection is
 * made by libcurl in CONNECT_ONLY mode (plain or TLS, the same proxies and
 * resolution as every other call), the upgrade request is written and its
 * answer read here over curl_easy_send/recv, and wslay frames the messages
 * over that same connection. Binary frames carry keystrokes and output;
 * text frames carry JSON: resize from us, ready/exit/error from the
 * daemon. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <wslay/wslay.h>

#include "client/client.h"

#define HANDSHAKE_MAX (64u << 10)
#define IO_TIMEOUT_MS 60000

struct sbx_pty {
	CURL *h;
	curl_socket_t fd;
	wslay_event_context_ptr ws;
	struct dbuf pre; /* bytes read past the handshake's answer */
	size_t pre_off;
	sbx_output_cb cb;
	void *ud;
	bool eof, exited, failed;
	int code;
	struct sbx_error err;
};

/* ---- SHA-1, for Sec-WebSocket-Accept only ---- */

static uint32_t rol(uint32_t v, int n)
{
	return v << n | v >> (32 - n);
}

static void sha1(const unsigned char *msg, size_t len, unsigned char out[20])
{
	uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476,
	                 0xC3D2E1F0};
	size_t total = ((len + 8) / 64 + 1) * 64;
	unsigned char *m = calloc(1, total);
	if (!m) {
		memset(out, 0, 20);
		return;
	}
	memcpy(m, msg, len);
	m[len] = 0x80;
	uint64_t bits = (uint64_t)len * 8;
	for (int i = 0; i < 8; i++)
		m[total - 1 - i] = (unsigned char)(bits >> (8 * i));
	for (size_t off = 0; off < total; off += 64) {
		uint32_t w[80];
		for (int i = 0; i < 16; i++)
			w[i] = (uint32_t)m[off + 4 * i] << 24 |
			       (uint32_t)m[off + 4 * i + 1] << 16 |
			       (uint32_t)m[off + 4 * i + 2] << 8 |
			       m[off + 4 * i + 3];
		for (int i = 16; i < 80; i++)
			w[i] =
			    rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
		uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
		for (int i = 0; i < 80; i++) {
			uint32_t f, k;
			if (i < 20) {
				f = (b & c) | (~b & d);
				k = 0x5A827999;
			} else if (i < 40) {
				f = b ^ c ^ d;
				k = 0x6ED9EBA1;
			} else if (i < 60) {
				f = (b & c) | (b & d) | (c & d);
				k = 0x8F1BBCDC;
			} else {
				f = b ^ c ^ d;
				k = 0xCA62C1D6;
			}
			uint32_t t = rol(a, 5) + f + e + k + w[i];
			e = d;
			d = c;
			c = rol(b, 30);
			b = a;
			a = t;
		}
		h[0] += a;
		h[1] += b;
		h[2] += c;
		h[3] += d;
		h[4] += e;
	}
	free(m);
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (unsigned char)(h[i] >> (24 - 8 * j));
}

/* ---- raw I/O over curl's connection ---- */

static int wait_fd(curl_socket_t fd, short ev, int ms)
{
	struct pollfd p = {.fd = fd, .events = ev};
	int r;
	do
		r = poll(&p, 1, ms);
	while (r < 0 && errno == EINTR);
	return r;
}

static int send_all(struct sbx_pty *p, const char *d, size_t n,
                    struct sbx_error *err)
{
	while (n) {
		size_t sent = 0;
		CURLcode cc = curl_easy_send(p->h, d, n, &sent);
		if (cc == CURLE_AGAIN) {
			if (wait_fd(p->fd, POLLOUT, IO_TIMEOUT_MS) <= 0) {
				sbx_err_set(err, 0, "connect",
				            "sending: timed out");
				return -1;
			}
			continue;
		}
		if (cc != CURLE_OK) {
			sbx_err_set(err, 0, "connect", "sending: %s",
			            curl_easy_strerror(cc));
			return -1;
		}
		d += sent;
		n -= sent;
	}
	return 0;
}

static ssize_t on_ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
                          int flags, void *ud)
{
	struct sbx_pty *p = ud;
	(void)flags;
	if (p->pre_off < p->pre.len) {
		size_t n = p->pre.len - p->pre_off;
		if (n > len)
			n = len;
		memcpy(buf, p->pre.data + p->pre_off, n);
		p->pre_off += n;
		return (ssize_t)n;
	}
	size_t got = 0;
	CURLcode cc = curl_easy_recv(p->h, buf, len, &got);
	if (cc == CURLE_AGAIN) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (cc != CURLE_OK || got == 0) {
		p->eof = true;
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return (ssize_t)got;
}

static ssize_t on_ws_send(wslay_event_context_ptr ctx, const uint8_t *data,
                          size_t len, int flags, void *ud)
{
	struct sbx_pty *p = ud;
	(void)flags;
	size_t sent = 0;
	CURLcode cc = curl_easy_send(p->h, data, len, &sent);
	if (cc == CURLE_AGAIN) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (cc != CURLE_OK) {
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return (ssize_t)sent;
}

static int on_ws_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
                         void *ud)
{
	(void)ctx;
	(void)ud;
	return getrandom(buf, len, 0) == (ssize_t)len ? 0 : -1;
}

static void on_ws_msg(wslay_event_context_ptr ctx,
                      const struct wslay_event_on_msg_recv_arg *m, void *ud)
{
	struct sbx_pty *p = ud;
	(void)ctx;
	if (m->opcode == WSLAY_BINARY_FRAME) {
		if (p->cb && m->msg_length &&
		    p->cb(p->ud, SBX_STDOUT, m->msg, m->msg_length))
			p->failed = true;
		return;
	}
	if (m->opcode != WSLAY_TEXT_FRAME)
		return;
	json_t *j = json_loadb((const char *)m->msg, m->msg_length, 0, NULL);
	const char *type = json_string_value(json_object_get(j, "type"));
	if (type && !strcmp(type, "exit")) {
		p->exited = true;
		p->code = (int)json_integer_value(json_object_get(j, "code"));
	} else if (type && !strcmp(type, "error")) {
		const char *msg =
		    json_string_value(json_object_get(j, "message"));
		const char *code =
		    json_string_value(json_object_get(j, "code"));
		sbx_err_set(&p->err, 0, code ? code : "pty_error", "%s",
		            msg ? msg : "the terminal failed");
		p->failed = true;
	}
	json_decref(j);
}

static const struct wslay_event_callbacks ws_callbacks = {
    .recv_callback = on_ws_recv,
    .send_callback = on_ws_send,
    .genmask_callback = on_ws_genmask,
    .on_msg_recv_callback = on_ws_msg,
};

/* ---- the upgrade ---- */

/* A header's value in an HTTP head (case-insensitive name), or NULL. */
static char *head_value(const char *head, const char *name)
{
	size_t nl = strlen(name);
	for (const char *l = strstr(head, "\r\n"); l; l = strstr(l, "\r\n")) {
		l += 2;
		if (!strncasecmp(l, name, nl) && l[nl] == ':') {
			const char *v = l + nl + 1;
			v += strspn(v, " \t");
			return strndup(v, strcspn(v, "\r\n"));
		}
	}
	return NULL;
}

static int handshake(struct sbx_client *c, struct sbx_pty *p,
                     const char *target, const char *session,
                     struct sbx_error *err)
{
	unsigned char nonce[16], digest[20];
	if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce)) {
		sbx_err_set(err, 0, "io", "getrandom: %s", strerror(errno));
		return -1;
	}
	char *key = b64_encode(nonce, sizeof(nonce)), *req = NULL;
	const char *hp = strstr(c->base, "://") + 3;
	size_t hl = strcspn(hp, "/");
	int rc = -1;
	if (!key ||
	    asprintf(&req,
	             "GET %s HTTP/1.1\r\nHost: %.*s\r\nUpgrade: websocket\r\n"
	             "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
	             "Sec-WebSocket-Version: 13\r\nUser-Agent: libsbx/%s\r\n"
	             "%s%s%s%s%s\r\n",
	             target, (int)hl, hp, key, LIBSBX_VERSION,
	             c->auth ? c->auth : "", c->auth ? "\r\n" : "",
	             session ? "Session-Id: " : "", session ? session : "",
	             session ? "\r\n" : "") < 0) {
		req = NULL;
		sbx_err_set(err, 0, "io", "out of memory");
		goto out;
	}
	if (send_all(p, req, strlen(req), err))
		goto out;
	/* the answer's head; anything after it is the first frames */
	struct dbuf in = {0};
	char *end = NULL;
	while (!end) {
		char buf[4096];
		size_t got = 0;
		CURLcode cc = curl_easy_recv(p->h, buf, sizeof(buf), &got);
		if (cc == CURLE_AGAIN) {
			if (wait_fd(p->fd, POLLIN, IO_TIMEOUT_MS) <= 0) {
				sbx_err_set(err, 0, "connect",
				            "no answer to the upgrade");
				goto out_in;
			}
			continue;
		}
		if (cc != CURLE_OK || got == 0 ||
		    in.len + got > HANDSHAKE_MAX || dbuf_add(&in, buf, got)) {
			sbx_err_set(err, 0, "connect",
			            "the connection closed during the upgrade");
			goto out_in;
		}
		end = strstr(in.data, "\r\n\r\n");
	}
	size_t head_len = (size_t)(end - in.data) + 4;
	int status = 0;
	if (sscanf(in.data, "HTTP/1.%*d %d", &status) != 1) {
		sbx_err_set(err, 0, "protocol", "not an HTTP answer");
		goto out_in;
	}
	if (status != 101) {
		/* the API's JSON error: read its body (Content-Length) */
		char *cl = head_value(in.data, "Content-Length");
		size_t want = cl ? strtoul(cl, NULL, 10) : 0;
		free(cl);
		if (want > HANDSHAKE_MAX)
			want = HANDSHAKE_MAX;
		while (in.len - head_len < want) {
			char buf[4096];
			size_t got = 0;
			CURLcode cc =
			    curl_easy_recv(p->h, buf, sizeof(buf), &got);
			if (cc == CURLE_AGAIN &&
			    wait_fd(p->fd, POLLIN, IO_TIMEOUT_MS) > 0)
				continue;
			if (cc != CURLE_OK || got == 0 ||
			    dbuf_add(&in, buf, got))
				break;
		}
		json_t *j =
		    json_loadb(in.data + head_len, in.len - head_len, 0, NULL);
		const char *m = json_string_value(json_object_get(j, "error"));
		const char *code =
		    json_string_value(json_object_get(j, "code"));
		sbx_err_set(err, status, code ? code : "http", "%s",
		            m ? m : "the daemon refused the terminal");
		json_decref(j);
		goto out_in;
	}
	char *accept = head_value(in.data, "Sec-WebSocket-Accept"),
	     *want = NULL;
	char kg[128];
	snprintf(kg, sizeof(kg), "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key);
	sha1((const unsigned char *)kg, strlen(kg), digest);
	want = b64_encode(digest, sizeof(digest));
	bool good = accept && want && !strcmp(accept, want);
	free(accept);
	free(want);
	if (!good) {
		sbx_err_set(
		    err, 101, "protocol",
		    "the WebSocket upgrade's Sec-WebSocket-Accept is wrong");
		goto out_in;
	}
	if (dbuf_add(&p->pre, in.data + head_len, in.len - head_len))
		goto out_in;
	rc = 0;
out_in:
	dbuf_free(&in);
out:
	free(key);
	free(req);
	return rc;
}

int sbx_pty_open(struct sbx_client *c, const char *id, const char *session,
                 const char *shell, unsigned cols, unsigned rows,
                 struct sbx_pty **out, struct sbx_error *err)
{
	struct sbx_pty *p = calloc(1, sizeof(*p));
	char *url = NULL, *esh = shell ? url_escape(shell, false) : NULL;
	if (!p) {
		sbx_err_set(err, 0, "io", "out of memory");
		return -1;
	}
	url =
	    url_sandbox(c, id, "/pty?cols=%u&rows=%u%s%s", cols ? cols : 80,
	                rows ? rows : 24, esh ? "&shell=" : "", esh ? esh : "");
	free(esh);
	p->h = curl_easy_init();
	if (!url || !p->h) {
		sbx_err_set(err, 0, "io", "out of memory");
		goto fail;
	}
	curl_easy_setopt(p->h, CURLOPT_URL, url);
	curl_easy_setopt(p->h, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(p->h, CURLOPT_NOSIGNAL, 1L);
	CURLcode cc = curl_easy_perform(p->h);
	if (cc != CURLE_OK) {
		sbx_err_set(err, 0, "connect", "%s: %s", c->base,
		            curl_easy_strerror(cc));
		goto fail;
	}
	curl_easy_getinfo(p->h, CURLINFO_ACTIVESOCKET, &p->fd);
	/* the request target: the URL without scheme and authority */
	const char *target = strchr(strstr(url, "://") + 3, '/');
	if (handshake(c, p, target, session, err))
		goto fail;
	if (wslay_event_context_client_init(&p->ws, &ws_callbacks, p)) {
		sbx_err_set(err, 0, "io", "out of memory");
		goto fail;
	}
	free(url);
	*out = p;
	return 0;
fail:
	free(url);
	sbx_pty_close(p);
	return -1;
}

int sbx_pty_fd(const struct sbx_pty *p)
{
	return (int)p->fd;
}

/* Sends what wslay has queued, waiting for the socket when it is full. */
static int flush(struct sbx_pty *p, struct sbx_error *err)
{
	while (wslay_event_want_write(p->ws)) {
		if (wslay_event_send(p->ws)) {
			sbx_err_set(err, 0, "connect",
			            "the terminal's connection broke");
			return -1;
		}
		if (wslay_event_want_write(p->ws) &&
		    wait_fd(p->fd, POLLOUT, IO_TIMEOUT_MS) <= 0) {
			sbx_err_set(err, 0, "connect", "sending: timed out");
			return -1;
		}
	}
	return 0;
}

static int queue(struct sbx_pty *p, uint8_t opcode, const void *data,
                 size_t len, struct sbx_error *err)
{
	struct wslay_event_msg m = {
	    .opcode = opcode, .msg = data, .msg_length = len};
	if (wslay_event_queue_msg(p->ws, &m)) {
		sbx_err_set(err, 0, "connect", "the terminal is closed");
		return -1;
	}
	return flush(p, err);
}

int sbx_pty_write(struct sbx_pty *p, const void *data, size_t len,
                  struct sbx_error *err)
{
	return queue(p, WSLAY_BINARY_FRAME, data, len, err);
}

int sbx_pty_resize(struct sbx_pty *p, unsigned cols, unsigned rows,
                   struct sbx_error *err)
{
	char msg[96];
	int n = snprintf(msg, sizeof(msg),
	                 "{\"type\":\"resize\",\"cols\":%u,\"rows\":%u}", cols,
	                 rows);
	return queue(p, WSLAY_TEXT_FRAME, msg, (size_t)n, err);
}

int sbx_pty_read(struct sbx_pty *p, sbx_output_cb cb, void *ud, int *code,
                 struct sbx_error *err)
{
	p->cb = cb;
	p->ud = ud;
	int r = wslay_event_recv(p->ws);
	p->cb = NULL;
	if (p->exited) {
		if (code)
			*code = p->code;
		return 1;
	}
	if (p->failed) {
		if (err)
			*err = p->err;
		if (!p->err.code[0])
			sbx_err_set(err, 0, "aborted", "stopped by the caller");
		return -1;
	}
	if (r != 0 || p->eof || !wslay_event_want_read(p->ws)) {
		sbx_err_set(err, 0, "connect",
		            "the terminal's connection closed before its shell "
		            "exited");
		return -1;
	}
	return flush(p, err); /* pongs, a close's answer */
}

void sbx_pty_close(struct sbx_pty *p)
{
	if (!p)
		return;
	if (p->ws) {
		if (!p->eof) {
			wslay_event_queue_close(
			    p->ws, WSLAY_CODE_NORMAL_CLOSURE, NULL, 0);
			flush(p, NULL);
		}
		wslay_event_context_free(p->ws);
	}
	if (p->h)
		curl_easy_cleanup(p->h);
	dbuf_free(&p->pre);
	free(p);
}
