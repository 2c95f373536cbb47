/* What the files of the E2B face share (e2b.c: dispatch, API keys, the
 * control plane; e2b_connect.c: the Connect protocol's framing and
 * errors; e2b_process.c: process.Process; e2b_fs.c: filesystem.Filesystem
 * and /files; e2b_ci.c: the code interpreter's /execute and /contexts).
 * Private to them: the rest of the daemon knows only api_e2b_* (api.h).
 *
 * E2B's own state for a sandbox (template, deadline, paused, metadata) is
 * kept in the sandbox's labels: metadata as the labels themselves, the
 * rest under the reserved key "e2b" (E2B_LABEL). */
#ifndef SBX_API_E2B_H
#define SBX_API_E2B_H

#include <stdarg.h>
#include <stdbool.h>

#include "api/api.h"
#include "http/relay.h"

/* What an envd (and code interpreter) we are answers as; the SDK gates
 * features on it (shared/spec/e2b.md 3.5): 0.5.7 takes octet-stream and
 * gzip uploads; metadata on uploads (0.6.2), watch entries (0.6.3) and
 * network mounts (0.6.4) are refused by the SDK itself. */
#define E2B_ENVD_VERSION "0.5.7"
#define E2B_ENVD_PORT "49983"
#define E2B_CI_PORT "49999"
#define E2B_LABEL "e2b"
#define E2B_HOME "/home/user"

/* A sandbox-plane request: the sandbox and the user it acts as. */
struct e2b_req {
	struct api *a;
	struct http_req *r;
	struct sandbox *sb;
	bool root;    /* user "root", else "user" */
	json_t *body; /* RPC: the request message ({} when none) */
};

/* ---- e2b.c ---- */
/* The face's one map from a core error to a status: rows {errno, status}
 * per kind of request, closed by {0, 500}. */
struct e2b_errmap {
	int errnum;
	unsigned status;
};
struct sbx_err;
unsigned e2b_status(const struct sbx_err *err, const struct e2b_errmap *map);
/* The control plane's error: {"code": status, "message": ...}. */
void e2b_error(struct http_req *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An error answer: {"code": code, "message": ...} (Connect's), or with
 * code NULL the control plane's {"code": status, ...}. */
void e2b_verror(struct http_req *r, unsigned status, const char *code,
                const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
/* Whether the sandbox is paused (E2B's state, kept in its labels). */
bool e2b_paused(struct sandbox *sb);
/* p (absolute, or relative to the user's home) as an absolute, normalized
 * path into *out (free it); -1 when it is not a valid path. */
int e2b_path(const struct e2b_req *q, const char *p, char **out);
/* The environment every envd command starts with (HOME, USER, LOGNAME,
 * PATH of the user) plus extra "K=V" (taken), NULL-terminated. */
char **e2b_user_env(const struct e2b_req *q, char **extra, size_t nextra,
                    size_t *n);

/* ---- e2b_connect.c: the Connect protocol (JSON codec) ---- */
/* "not_found", ... as the HTTP status Connect gives it. */
unsigned connect_status(const char *code);
/* A unary call's answer: 200 with the message (taken). */
void connect_ok(struct http_req *r, json_t *msg);
/* A unary call's error. */
void connect_error(struct http_req *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An errno from a file operation as a Connect code. */
const char *connect_code_of_errno(int e);
/* Whether the request is a streaming call (application/connect+json). */
bool connect_streaming(struct http_req *r);
/* The single envelope of a streaming request's body as JSON, or NULL. */
json_t *connect_unwrap(struct http_req *r, const char **why);
/* A message (taken) as one envelope appended to b. */
int connect_envelope(struct buf *b, unsigned flags, json_t *msg);
/* A message (taken) as one envelope written to a stream: relay_write's
 * answer (1: the client is behind), 0 when it could not be encoded. */
int connect_send(struct relay *rl, unsigned flags, json_t *msg);
/* The end-of-stream envelope: {} or {"error": {code, message}}. */
int connect_end(struct buf *b, const char *code, const char *msg);
/* The Connect-Timeout-Ms header in ms (0: none). */
uint64_t connect_timeout_ms(struct http_req *r);
/* The keepalive interval (Keepalive-Ping-Interval, seconds) in ms. */
unsigned connect_keepalive_ms(struct http_req *r);
/* A server stream's relay options (application/connect+json, its length
 * unknown), with ka (ka_len bytes: an envelope) sent every keepalive_ms. */
struct relay_opts connect_stream_opts(unsigned keepalive_ms, const char *ka,
                                      size_t ka_len);
/* A stream answer opened with no source yet: a streaming call that
 * fails before it starts is still HTTP 200 with an end-stream error. */
void connect_stream_error(struct http_req *r, const char *code, const char *fmt,
                          ...) __attribute__((format(printf, 3, 4)));

/* ---- e2b_process.c ---- */
void e2b_process(struct e2b_req *q, const char *method);

/* ---- e2b_fs.c ---- */
void e2b_filesystem(struct e2b_req *q, const char *method);
void e2b_files_get(struct e2b_req *q);
/* POST /files: from the begin hook (the body is streamed). */
void e2b_files_begin(struct e2b_req *q);

/* ---- e2b_ci.c ---- */
void e2b_ci(struct e2b_req *q);

#endif
