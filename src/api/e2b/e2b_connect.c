/* The Connect protocol as the e2b SDKs speak it (shared/spec/e2b.md 3.1):
 * JSON messages only, over HTTP/1.1. A unary call is a JSON body in and a
 * JSON body out (errors: a Connect code, as the HTTP status the protocol
 * maps it to, with {"code","message"}). A server-streaming call sends one
 * envelope in (flags byte, big-endian length, message) and gets 200 with
 * envelopes back, the last one flagged end-of-stream, where errors go. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/e2b/e2b.h"

static const struct api_code_status codes[] = {
    {"canceled", 499},
    {"unknown", 500},
    {"invalid_argument", 400},
    {"deadline_exceeded", 504},
    {"not_found", 404},
    {"already_exists", 409},
    {"permission_denied", 403},
    {"resource_exhausted", 429},
    {"failed_precondition", 400},
    {"aborted", 409},
    {"out_of_range", 400},
    {"unimplemented", 501},
    {"internal", 500},
    {"unavailable", 503},
    {"data_loss", 500},
    {"unauthenticated", 401},
};

unsigned connect_status(const char *code)
{
	return api_status_of(codes, sizeof(codes) / sizeof(codes[0]), code);
}

void connect_ok(struct http_req *r, json_t *msg)
{
	http_respond_json(r, 200, msg ? msg : json_object());
}

void connect_error(struct http_req *r, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	e2b_verror(r, connect_status(code), code, fmt, ap);
	va_end(ap);
}

const char *connect_code_of_errno(int e)
{
	switch (e) {
	case ENOENT:
		return "not_found";
	case EEXIST:
	case ENOTEMPTY:
		return "already_exists";
	case EACCES:
	case EPERM:
		return "permission_denied";
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return "resource_exhausted";
	case ENOTDIR:
	case EISDIR:
	case EINVAL:
	case EXDEV:
	case ELOOP:
	case ENAMETOOLONG:
		return "invalid_argument";
	default:
		return "internal";
	}
}

bool connect_streaming(struct http_req *r)
{
	const char *ct = http_header(r, "Content-Type");
	return ct && !strncasecmp(ct, "application/connect+json", 24);
}

json_t *connect_unwrap(struct http_req *r, const char **why)
{
	const unsigned char *p = (const unsigned char *)r->body.data;
	size_t n = r->body.len;
	*why = "a streaming request is one envelope";
	if (n < 5)
		return NULL;
	uint32_t len;
	memcpy(&len, p + 1, 4);
	len = ntohl(len);
	if (p[0] & 1) {
		*why = "compressed envelopes are not accepted";
		return NULL;
	}
	if ((size_t)len > n - 5)
		return NULL;
	json_t *j = json_loadb((const char *)p + 5, len, 0, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		*why = "the message is not a JSON object";
		return NULL;
	}
	return j;
}

int connect_envelope(struct buf *b, unsigned flags, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	if (!s)
		return -ENOMEM;
	size_t len = strlen(s);
	unsigned char head[5] = {(unsigned char)flags};
	uint32_t be = htonl((uint32_t)len);
	memcpy(head + 1, &be, 4);
	int r = buf_append(b, head, 5);
	r = r ?: buf_append(b, s, len);
	free(s);
	return r;
}

int connect_send(struct relay *rl, unsigned flags, json_t *msg)
{
	struct buf b;
	buf_init(&b, 0);
	int r = connect_envelope(&b, flags, msg) < 0
	            ? 0
	            : relay_write(rl, b.data, b.len);
	buf_free(&b);
	return r;
}

int connect_end(struct buf *b, const char *code, const char *msg)
{
	json_t *j = code ? json_pack("{s:{s:s, s:s}}", "error", "code", code,
	                             "message", msg ? msg : code)
	                 : json_object();
	return connect_envelope(b, 2, j);
}

uint64_t connect_timeout_ms(struct http_req *r)
{
	const char *t = http_header(r, "Connect-Timeout-Ms");
	char *end;
	unsigned long long v = t ? strtoull(t, &end, 10) : 0;
	return t && !*end ? v : 0;
}

unsigned connect_keepalive_ms(struct http_req *r)
{
	const char *t = http_header(r, "Keepalive-Ping-Interval");
	char *end;
	unsigned long v = t ? strtoul(t, &end, 10) : 0;
	if (!t || *end || !v || v > 3600)
		v = 50; /* what the SDKs ask for */
	return (unsigned)v * 1000u;
}

struct relay_opts connect_stream_opts(unsigned keepalive_ms, const char *ka,
                                      size_t ka_len)
{
	return (struct relay_opts){.content_type = "application/connect+json",
	                           .size = HTTP_SIZE_UNKNOWN,
	                           .keepalive_ms = keepalive_ms,
	                           .keepalive = ka,
	                           .keepalive_len = ka_len};
}

void connect_stream_error(struct http_req *r, const char *code, const char *fmt,
                          ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	struct buf b;
	buf_init(&b, 0);
	connect_end(&b, code, msg);
	static const char *const hdrs[] = {NULL};
	struct http_stream *s = http_respond_stream(
	    r, 200, "application/connect+json", b.len, hdrs);
	if (s) {
		http_stream_write(s, b.data, b.len);
		http_stream_end(s);
	}
	buf_free(&b);
}
