/* What the files of the Cloudflare container protocol share (api_cf.c:
 * dispatch, errors, sessions, paths; api_cf_exec.c: commands, processes,
 * git; api_cf_files.c: files; api_cf_interp.c: the code interpreter).
 * Private to them: the rest of the daemon
 * knows only api_cf_begin/api_cf_handle (api.h). */
#ifndef SBX_API_CF_H
#define SBX_API_CF_H

#include <stdbool.h>

#include "api/api.h"
#include "core/session.h"
#include "http/relay.h"

/* The SDK's token for "no session": a fresh shell for one command. */
#define CF_NO_SESSION "__DISABLE_SESSION__"
/* A kill sends TERM to the tree, then KILL after this long. */
#define CF_KILL_GRACE_MS 5000

/* One request: the sandbox it names (NULL for the few routes that need
 * none) and its JSON body ({} when it has none). Valid during the
 * handler only: whatever answers later copies what it needs. */
struct cf_req {
	struct api *a;
	struct http_req *r;
	const char *tenant;
	const char *sbid;
	const char *rest; /* the path from "/api/" on */
	struct sandbox *sb;
	json_t *body;
};

/* The protocol's error: {code, message, context, httpStatus, timestamp}
 * with the status the SDK maps the code to. context may be NULL. */
void cf_error(struct http_req *r, const char *code, json_t *context,
              const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* cf_error whose context holds big strings from o (daemon/jsonout.h). */
struct jsonout;
void cf_error_big(struct http_req *r, struct jsonout *o, const char *code,
                  json_t *context, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The HTTP status of a code, as in the SDK's table (500 when unknown). */
unsigned cf_status(const char *code);
/* 200 with body plus "success": true and "timestamp" (takes body). */
void cf_ok(struct http_req *r, json_t *body);
/* cf_ok for a body with big strings from o (daemon/jsonout.h). */
void cf_ok_big(struct http_req *r, struct jsonout *o, json_t *body);
/* The ISO time of now into buf (>= 32 bytes). */
const char *cf_now(char *buf, size_t cap);
/* An errno from a file operation as the protocol's error for path. */
void cf_errno(struct http_req *r, int e, const char *what, const char *path);

/* Body fields: a string into *out (NULL when absent). -1 after answering
 * 400 when present but not a string. */
int cf_string(struct cf_req *q, const char *key, const char **out);
/* An optional positive integer (0 when absent). -1 after answering 400. */
int cf_uint(struct cf_req *q, const char *key, uint64_t *out);
/* {"K": "V"} into a NULL-terminated array of "K=V" (null values
 * skipped; names must be shell names). -1 after answering 400. */
int cf_env(struct cf_req *q, json_t *env, char ***out, size_t *n);

/* cf_mime.c: the type of a file named path whose first n bytes are data
 * (all of it when complete), by extension, then by content. */
const char *cf_mime_of(const char *path, const char *data, size_t n,
                       bool complete);
/* Whether the protocol sends that type as base64 (else as UTF-8 text). */
bool cf_mime_binary(const char *mime);

/* cf_shell.c: s as one single-quoted shell word, appended to b. */
void cf_shell_quote(struct buf *b, const char *s);
/* The script that runs command in the session's shell with its own cwd
 * (NULL: the session's) and env, both undone when it ends, before the
 * session hook saves the session's state. */
void cf_shell_wrap(struct buf *b, const char *command, const char *cwd,
                   char **env, size_t envc);

/* The session a request names (body "sessionId" or the X-Session-Id
 * header): none is the default session; an unknown one is created, as
 * the container does. CF_NO_SESSION gives a hidden session of the
 * sandbox's environment in /workspace and sets *fresh: its commands must
 * run as their own shell (argv bash -c, detached), which never writes
 * state back, so that session never changes. NULL after answering. */
struct session *cf_session(struct cf_req *q, bool *fresh);

/* A path of the protocol (absolute anywhere in the sandbox, or relative
 * to cwd) made absolute and normal ("." and ".." resolved as words, as
 * path.resolve does) into out. -1 after answering 400. */
int cf_resolve(struct cf_req *q, const char *cwd, const char *path, char *out,
               size_t cap);
/* The builtin's path for an absolute one: relative to "/" ("." for it). */
const char *cf_rel(const char *abs);

/* A JSON string of output text: the complete UTF-8 of what is held plus
 * data (an incomplete sequence at the end waits for the next call, unless
 * final); invalid bytes become U+FFFD. NULL when nothing is complete. */
struct cf_utf8 {
	char held[4];
	size_t n;
};
json_t *cf_text(struct cf_utf8 *u, const char *data, size_t len, bool final);
/* One SSE frame "data: <json>\n\n" on a relay (takes ev); relay_write's
 * answer. */
int cf_event(struct relay *rl, json_t *ev);
/* The face's streams: SSE with a keepalive shorter than /v1's, since a
 * reader that went away is only noticed when a write to it fails (the
 * second after it left), and a streamed command dies with its reader. */
extern const struct relay_opts cf_stream_opts;

/* Handlers (api_cf_exec.c). */
void cf_execute(struct cf_req *q);
void cf_execute_stream(struct cf_req *q);
void cf_commands(struct cf_req *q);
void cf_process_start(struct cf_req *q);
void cf_process_list(struct cf_req *q);
void cf_process_get(struct cf_req *q, const char *id);
void cf_process_kill(struct cf_req *q, const char *id);
void cf_process_kill_all(struct cf_req *q);
void cf_process_logs(struct cf_req *q, const char *id);
void cf_process_stream(struct cf_req *q, const char *id);
void cf_git_checkout(struct cf_req *q);

/* Handlers (api_cf_files.c). */
void cf_file_read(struct cf_req *q);
void cf_file_read_stream(struct cf_req *q);
void cf_file_write(struct cf_req *q);
void cf_file_delete(struct cf_req *q);
void cf_file_rename(struct cf_req *q, bool move);
void cf_file_mkdir(struct cf_req *q);
void cf_file_list(struct cf_req *q);
void cf_file_exists(struct cf_req *q);

/* Handlers (cf_backup.c). */
void cf_backup_create(struct cf_req *q);
void cf_backup_restore(struct cf_req *q);
void cf_backup_upload_parts(struct cf_req *q);

/* Handlers (api_cf_interp.c). */
void cf_context_create(struct cf_req *q);
void cf_context_list(struct cf_req *q);
void cf_context_delete(struct cf_req *q, const char *id);
void cf_execute_code(struct cf_req *q);

#endif
