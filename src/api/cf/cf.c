/* The Cloudflare container protocol (shared/spec/cf-container.md), served
 * per sandbox under /v1/sandbox/{id}/api/..., so that the official
 * @cloudflare/sandbox SandboxClient drives a sandboxd sandbox. Same
 * sessions, processes and files as /v1: a second face, not a second
 * engine.
 *
 * This file: the dispatcher, the protocol's errors, sessions, paths and
 * the small routes. Every request's body is taken here (begin hook), so
 * that a body too large is answered in the protocol's own error shape and
 * a file write may carry more than --max-body. Commands, processes and
 * git are in api_cf_exec.c, files in api_cf_files.c, the code interpreter
 * in api_cf_interp.c.
 *
 * Paths are absolute anywhere in the sandbox (the sandbox is the
 * boundary) or relative to the session's cwd; they are normalized here as
 * words and then resolved inside the sandbox by the builtins with base
 * "/" (openat2 RESOLVE_IN_ROOT), never on the host. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/cf/cf.h"
#include "core/env.h"
#include "core/process.h"
#include "http/jsonout.h"
#include "lib/util.h"

/* What version/ping say: the protocol of this SDK release is what is
 * spoken, so the SDK's version check stays quiet. */
#define CF_PROTOCOL_VERSION "0.12.10"
/* A write carries the file in its JSON body (base64: 4/3 of it). */
#define CF_MIN_WRITE_BODY (64ull << 20)
#define CF_MAX_SESSIONS 1024

/* The SDK's error code -> HTTP status table (errors/status-map). */
static const struct api_code_status statuses[] = {
    {"FILE_NOT_FOUND", 404},
    {"COMMAND_NOT_FOUND", 404},
    {"PROCESS_NOT_FOUND", 404},
    {"PORT_NOT_EXPOSED", 404},
    {"GIT_REPOSITORY_NOT_FOUND", 404},
    {"GIT_BRANCH_NOT_FOUND", 404},
    {"CONTEXT_NOT_FOUND", 404},
    {"WATCH_NOT_FOUND", 404},
    {"BACKUP_NOT_FOUND", 404},
    {"IS_DIRECTORY", 400},
    {"NOT_DIRECTORY", 400},
    {"INVALID_COMMAND", 400},
    {"INVALID_PORT_NUMBER", 400},
    {"INVALID_PORT", 400},
    {"INVALID_GIT_URL", 400},
    {"CUSTOM_DOMAIN_REQUIRED", 400},
    {"INVALID_JSON_RESPONSE", 400},
    {"NAME_TOO_LONG", 400},
    {"VALIDATION_FAILED", 400},
    {"MISSING_CREDENTIALS", 400},
    {"INVALID_MOUNT_CONFIG", 400},
    {"BACKUP_EXPIRED", 400},
    {"INVALID_BACKUP_CONFIG", 400},
    {"GIT_AUTH_FAILED", 401},
    {"PERMISSION_DENIED", 403},
    {"COMMAND_PERMISSION_DENIED", 403},
    {"PROCESS_PERMISSION_DENIED", 403},
    {"READ_ONLY", 403},
    {"PROCESS_READY_TIMEOUT", 408},
    {"FILE_EXISTS", 409},
    {"PORT_ALREADY_EXPOSED", 409},
    {"PORT_IN_USE", 409},
    {"RESOURCE_BUSY", 409},
    {"SESSION_ALREADY_EXISTS", 409},
    {"OPERATION_INTERRUPTED", 409},
    {"SESSION_DESTROYED", 410},
    {"SESSION_TERMINATED", 410},
    {"FILE_TOO_LARGE", 413},
    /* sandboxd's own: a file operation ended for want of progress */
    {"FILE_OPERATION_TIMEOUT", 504},
    {"PYTHON_NOT_AVAILABLE", 501},
    {"JAVASCRIPT_NOT_AVAILABLE", 501},
    {"SERVICE_NOT_RESPONDING", 502},
    {"GIT_NETWORK_ERROR", 502},
    {"INTERPRETER_NOT_READY", 503},
    {"OPENCODE_STARTUP_FAILED", 503},
    {"RPC_TRANSPORT_ERROR", 503},
    {"CONTAINER_UNAVAILABLE", 503},
};

unsigned cf_status(const char *code)
{
	return api_status_of(statuses, sizeof(statuses) / sizeof(statuses[0]),
	                     code);
}

const char *cf_now(char *buf, size_t cap)
{
	iso8601_ms(now_wall_ms(), buf, cap);
	return buf;
}

static void error_answer(struct http_req *r, struct jsonout *o,
                         const char *code, json_t *context, const char *fmt,
                         va_list ap)
{
	char msg[1200], ts[32];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	unsigned status = cf_status(code);
	json_t *j =
	    json_pack("{s:s, s:o, s:o, s:i, s:s}", "code", code, "message",
	              json_bytes(msg, strlen(msg)), "context",
	              context ? context : json_object(), "httpStatus",
	              (int)status, "timestamp", cf_now(ts, sizeof(ts)));
	if (o)
		jsonout_respond(o, r, status, j);
	else
		http_respond_json(r, status, j);
}

void cf_error(struct http_req *r, const char *code, json_t *context,
              const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	error_answer(r, NULL, code, context, fmt, ap);
	va_end(ap);
}

void cf_error_big(struct http_req *r, struct jsonout *o, const char *code,
                  json_t *context, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	error_answer(r, o, code, context, fmt, ap);
	va_end(ap);
}

void cf_ok(struct http_req *r, json_t *body)
{
	char ts[32];
	if (!json_object_get(body, "success"))
		json_object_set_new(body, "success", json_true());
	if (!json_object_get(body, "timestamp"))
		json_object_set_new(body, "timestamp",
		                    json_string(cf_now(ts, sizeof(ts))));
	http_respond_json(r, 200, body);
}

void cf_ok_big(struct http_req *r, struct jsonout *o, json_t *body)
{
	char ts[32];
	if (body && !json_object_get(body, "success"))
		json_object_set_new(body, "success", json_true());
	if (body && !json_object_get(body, "timestamp"))
		json_object_set_new(body, "timestamp",
		                    json_string(cf_now(ts, sizeof(ts))));
	jsonout_respond(o, r, 200, body);
}

void cf_errno(struct http_req *r, int e, const char *what, const char *path)
{
	const char *code;
	switch (e) {
	case ENOENT:
		code = "FILE_NOT_FOUND";
		break;
	case ENOTDIR:
		/* the target itself, or a file where a directory was on
		 * the way (then, as for the container, it does not exist) */
		code = !strcmp(what, "not a directory") ? "NOT_DIRECTORY"
		                                        : "FILE_NOT_FOUND";
		break;
	case EISDIR:
		code = "IS_DIRECTORY";
		break;
	case EEXIST:
	case ENOTEMPTY:
		code = "FILE_EXISTS";
		break;
	case EACCES:
	case EPERM:
		code = "PERMISSION_DENIED";
		break;
	case EROFS:
		code = "READ_ONLY";
		break;
	case EFBIG:
		code = "FILE_TOO_LARGE";
		break;
	case ENOSPC:
	case EDQUOT:
		code = "NO_SPACE";
		break;
	case ENAMETOOLONG:
		code = "NAME_TOO_LONG";
		break;
	case ELOOP:
	case EMLINK:
		code = "TOO_MANY_LINKS";
		break;
	case EMFILE:
	case ENFILE:
		code = "TOO_MANY_FILES";
		break;
	case EBUSY:
	case ETXTBSY:
		code = "RESOURCE_BUSY";
		break;
	default:
		code = "FILESYSTEM_ERROR";
	}
	cf_error(r, code,
	         json_pack("{s:s, s:s, s:i}", "path", path, "operation", what,
	                   "errno", e),
	         "%s: %s", path,
	         e == ENOENT ? "no such file or directory" : strerror(e));
}

/* ---- bodies ------------------------------------------------------------ */

int cf_string(struct cf_req *q, const char *key, const char **out)
{
	json_t *v = json_object_get(q->body, key);
	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v)) {
		cf_error(q->r, "VALIDATION_FAILED",
		         json_pack("{s:s}", "field", key),
		         "%s must be a string", key);
		return -1;
	}
	*out = json_string_value(v);
	return 0;
}

int cf_uint(struct cf_req *q, const char *key, uint64_t *out)
{
	json_t *v = json_object_get(q->body, key);
	*out = 0;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) <= 0) {
		cf_error(q->r, "VALIDATION_FAILED",
		         json_pack("{s:s}", "field", key),
		         "%s must be a positive integer", key);
		return -1;
	}
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

int cf_env(struct cf_req *q, json_t *env, char ***out, size_t *n)
{
	const char *bad;
	int r = env_from_json(env, out, n, &bad);
	if (r == -ENOMEM)
		cf_error(q->r, "INTERNAL_ERROR", NULL, "out of memory");
	else if (r < 0 && !bad)
		cf_error(q->r, "VALIDATION_FAILED",
		         json_pack("{s:s}", "field", "env"),
		         "env must be an object of strings");
	else if (r < 0)
		cf_error(q->r, "VALIDATION_FAILED",
		         json_pack("{s:s}", "key", bad),
		         "Invalid environment variable: %.200s (names are "
		         "[A-Za-z_][A-Za-z0-9_]*, values strings)",
		         bad);
	return r < 0 ? -1 : 0;
}

/* ---- paths ------------------------------------------------------------- */

int cf_resolve(struct cf_req *q, const char *cwd, const char *path, char *out,
               size_t cap)
{
	if (!path || !*path) {
		cf_error(q->r, "VALIDATION_FAILED",
		         json_pack("{s:s}", "field", "path"),
		         "a path is required");
		return -1;
	}
	for (const unsigned char *c = (const unsigned char *)path; *c; c++)
		if (*c < 0x20 || *c == 0x7f) {
			cf_error(q->r, "VALIDATION_FAILED",
			         json_pack("{s:s}", "field", "path"),
			         "paths may not hold control characters");
			return -1;
		}
	/* as path.resolve: cwd, then path; "." vanishes, ".." drops the
	 * last word (never above /) */
	size_t o = 0;
	for (int part = path[0] == '/' ? 1 : 0; part < 2; part++) {
		const char *p = part ? path : cwd;
		while (*p) {
			while (*p == '/')
				p++;
			size_t l = strcspn(p, "/");
			if (!l)
				break;
			if (l == 1 && p[0] == '.') {
			} else if (l == 2 && p[0] == '.' && p[1] == '.') {
				while (o && out[o] != '/')
					o--;
			} else if (l > 255) {
				cf_error(
				    q->r, "NAME_TOO_LONG",
				    json_pack("{s:s}", "path", path),
				    "a name in %.200s is longer than 255 bytes",
				    path);
				return -1;
			} else {
				if (o + l + 2 > cap) {
					cf_error(
					    q->r, "NAME_TOO_LONG",
					    json_pack("{s:s}", "path", path),
					    "path too long");
					return -1;
				}
				out[o++] = '/';
				memcpy(out + o, p, l);
				o += l;
			}
			p += l;
		}
	}
	if (!o)
		out[o++] = '/';
	out[o] = '\0';
	return 0;
}

const char *cf_rel(const char *abs)
{
	return abs[1] ? abs + 1 : ".";
}

/* ---- output text and SSE ----------------------------------------------- */

/* Bytes at the end of p[0..len) that start a UTF-8 sequence not complete
 * yet. */
static size_t incomplete_tail(const unsigned char *p, size_t len)
{
	for (size_t back = 1; back <= 3 && back <= len; back++) {
		unsigned char c = p[len - back];
		if ((c & 0xc0) == 0x80)
			continue;
		size_t need = c < 0xc2   ? 1
		              : c < 0xe0 ? 2
		              : c < 0xf0 ? 3
		              : c < 0xf5 ? 4
		                         : 1;
		return need > back ? back : 0;
	}
	return 0;
}

json_t *cf_text(struct cf_utf8 *u, const char *data, size_t len, bool final)
{
	const char *src = data;
	char *joined = NULL;
	size_t total = len;
	if (u->n) {
		total = u->n + len;
		if (!(joined = malloc(total)))
			return NULL;
		memcpy(joined, u->held, u->n);
		if (len)
			memcpy(joined + u->n, data, len);
		src = joined;
	}
	size_t keep =
	    final ? 0 : incomplete_tail((const unsigned char *)src, total);
	memcpy(u->held, src + total - keep, keep);
	u->n = keep;
	json_t *j = total - keep ? json_bytes(src, total - keep) : NULL;
	free(joined);
	return j;
}

const struct relay_opts cf_stream_opts = {.keepalive_ms = 5000};

int cf_event(struct relay *rl, json_t *ev)
{
	return relay_event_json(rl, NULL, ev);
}

/* ---- sessions ---------------------------------------------------------- */

static bool valid_sid(const char *sid)
{
	size_t n = strlen(sid);
	if (!n || n > 256)
		return false;
	for (const unsigned char *c = (const unsigned char *)sid; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			return false;
	return true;
}

static unsigned count_sessions(struct sandbox *sb)
{
	unsigned n = 0;
	for (struct session *s = sandbox_session_next(sb, NULL); s;
	     s = sandbox_session_next(sb, s))
		n++;
	return n;
}

struct session *cf_session(struct cf_req *q, bool *fresh)
{
	const char *sid;
	struct session *s;
	*fresh = false;
	if (cf_string(q, "sessionId", &sid) < 0)
		return NULL;
	if (!sid)
		sid = http_header(q->r, "X-Session-Id");
	if (!sid || !*sid)
		return sandbox_session(q->sb, NULL);
	if (!valid_sid(sid)) {
		cf_error(q->r, "VALIDATION_FAILED",
		         json_pack("{s:s}", "field", "sessionId"),
		         "sessionId: 1-256 characters, no control characters");
		return NULL;
	}
	*fresh = !strcmp(sid, CF_NO_SESSION);
	if ((s = sandbox_session(q->sb, sid)))
		return s;
	if (count_sessions(q->sb) >= CF_MAX_SESSIONS) {
		cf_error(q->r, "RESOURCE_BUSY",
		         json_pack("{s:s}", "sessionId", sid),
		         "this sandbox has %d sessions; delete some first",
		         CF_MAX_SESSIONS);
		return NULL;
	}
	/* as the container: a session named for the first time is made */
	if (sandbox_session_new(q->sb, sid, NULL, NULL, 0, &s) < 0) {
		cf_error(q->r, "INTERNAL_ERROR", NULL, "out of memory");
		return NULL;
	}
	return s;
}

static void session_create(struct cf_req *q)
{
	char idbuf[64], cwd[4200];
	const char *id, *c = NULL;
	uint64_t timeout;
	char **env = NULL;
	size_t envc = 0;
	struct session *s;
	if (cf_string(q, "id", &id) < 0 || cf_string(q, "cwd", &c) < 0 ||
	    cf_uint(q, "commandTimeoutMs", &timeout) < 0 ||
	    cf_env(q, json_object_get(q->body, "env"), &env, &envc) < 0)
		return;
	if (!id || !*id) {
		/* the container's shape: session_<ms>_<hex> */
		char prefix[40];
		snprintf(prefix, sizeof(prefix), "session_%" PRIu64 "_",
		         now_wall_ms());
		id_random(idbuf, sizeof(idbuf), prefix);
		id = idbuf;
	}
	if (!valid_sid(id) || !strcmp(id, CF_NO_SESSION)) {
		cf_error(q->r, "VALIDATION_FAILED",
		         json_pack("{s:s}", "field", "id"),
		         "id: 1-256 characters, no control characters");
		goto out;
	}
	if (cf_resolve(q, "/workspace", c ? c : "/workspace", cwd,
	               sizeof(cwd)) < 0)
		goto out;
	if (sandbox_session(q->sb, id)) {
		cf_error(q->r, "SESSION_ALREADY_EXISTS",
		         json_pack("{s:s}", "sessionId", id),
		         "Session '%s' already exists", id);
		goto out;
	}
	if (count_sessions(q->sb) >= CF_MAX_SESSIONS) {
		cf_error(q->r, "RESOURCE_BUSY",
		         json_pack("{s:s}", "sessionId", id),
		         "this sandbox has %d sessions; delete some first",
		         CF_MAX_SESSIONS);
		goto out;
	}
	if (sandbox_session_new(q->sb, id, cwd, (const char *const *)env, envc,
	                        &s) < 0) {
		cf_error(q->r, "INTERNAL_ERROR", NULL, "out of memory");
		goto out;
	}
	session_set_timeout(s, timeout);
	cf_ok(q->r,
	      json_pack("{s:s, s:s, s:n, s:{s:s, s:s}}", "id", id, "message",
	                "Session created", "containerPlacementId", "data", "id",
	                id, "cwd", cwd));
out:
	env_free(env);
}

static void session_list(struct cf_req *q)
{
	json_t *ids = json_array();
	for (struct session *s = sandbox_session_next(q->sb, NULL); s;
	     s = sandbox_session_next(q->sb, s)) {
		struct session_info si;
		session_info(s, &si);
		if (strcmp(si.id, CF_NO_SESSION))
			json_array_append_new(ids, json_string(si.id));
	}
	cf_ok(q->r, json_pack("{s:o}", "data", ids));
}

/* session/delete is answered once the session's command is gone (the
 * request stays until it is answered, even when its client left). */
struct cf_closing {
	struct http_req *r;
	char sid[];
};

static void session_closed(void *ctx)
{
	struct cf_closing *c = ctx;
	cf_ok(c->r, json_pack("{s:s}", "sessionId", c->sid));
	free(c);
}

static void session_delete(struct cf_req *q)
{
	const char *sid;
	struct session *s;
	if (cf_string(q, "sessionId", &sid) < 0)
		return;
	if (!sid || !*sid) {
		cf_error(q->r, "VALIDATION_FAILED",
		         json_pack("{s:s}", "field", "sessionId"),
		         "sessionId is required");
		return;
	}
	s = sandbox_session(q->sb, sid);
	if (!s || s == sandbox_session(q->sb, NULL)) {
		/* the container's answer for a session it does not know */
		cf_error(q->r, "INTERNAL_ERROR",
		         json_pack("{s:s, s:s}", "sessionId", sid,
		                   "originalError",
		                   s ? "the default session cannot be deleted"
		                     : "Session not found"),
		         "Session '%s' %s", sid,
		         s ? "is the default session and cannot be deleted"
		           : "not found");
		return;
	}
	/* as the container, which destroys the session's shell: what it
	 * runs or has queued is killed (its whole tree) */
	struct cf_closing *c = malloc(sizeof(*c) + strlen(sid) + 1);
	if (!c) {
		cf_error(q->r, "INTERNAL_ERROR", NULL, "out of memory");
		return;
	}
	c->r = q->r;
	strcpy(c->sid, sid);
	if (sandbox_session_close(q->sb, s, session_closed, c) == 1) {
		http_suspend(q->r);
		return;
	}
	session_closed(c);
}

/* ---- the small routes -------------------------------------------------- */

static void ping(struct http_req *r)
{
	cf_ok(r,
	      json_pack("{s:s, s:s}", "status", "healthy", "message", "pong"));
}

/* ---- dispatch ---------------------------------------------------------- */

/* "/api/process/{id}[/tail]": the id (into buf) and the tail. */
static const char *process_route(const char *rest, char *buf, size_t cap,
                                 const char **tail)
{
	static const char pre[] = "/api/process/";
	if (strncmp(rest, pre, sizeof(pre) - 1))
		return NULL;
	const char *id = rest + sizeof(pre) - 1;
	size_t l = strcspn(id, "/");
	if (!l || l >= cap)
		return NULL;
	memcpy(buf, id, l);
	buf[l] = '\0';
	*tail = id + l;
	return buf;
}

/* The container's answer to a route it does not have: 404, though the
 * SDK's table says 500 for the code. */
static void unknown_route(struct http_req *r)
{
	char ts[32];
	http_respond_json(r, 404,
	                  json_pack("{s:s, s:s, s:{}, s:i, s:s}", "code",
	                            "UNKNOWN_ERROR", "message", "Not found",
	                            "context", "httpStatus", 404, "timestamp",
	                            cf_now(ts, sizeof(ts))));
}

static bool route(struct cf_req *q, const char *method, const char *path)
{
	return !strcmp(q->rest, path) &&
	       (!strcmp(q->r->method, method) ||
	        (!strcmp(method, "GET") && !strcmp(q->r->method, "HEAD")));
}

static void dispatch(struct api *a, struct http_req *r, const char *tenant,
                     const char *sbid, const char *rest)
{
	struct cf_req q = {
	    .a = a, .r = r, .tenant = tenant, .sbid = sbid, .rest = rest};
	struct sbx_err err = {0};
	char pid[256];
	const char *tail;
	bool get = !strcmp(r->method, "GET") || !strcmp(r->method, "HEAD");
	bool del = !strcmp(r->method, "DELETE");

	if (strstr(r->url, "%00")) { /* a NUL never names anything here */
		unknown_route(r);
		return;
	}
	if (route(&q, "GET", "/api/ping") || route(&q, "GET", "/api/health")) {
		ping(r);
		return;
	}
	if (route(&q, "GET", "/api/version")) {
		cf_ok(r, json_pack("{s:s}", "version", CF_PROTOCOL_VERSION));
		return;
	}
	if (!sandbox_id_valid(sbid)) {
		cf_error(r, "VALIDATION_FAILED",
		         json_pack("{s:s}", "field", "id"),
		         "sandbox id must be 1-63 characters of [a-z0-9-]");
		return;
	}
	if (r->body.len) {
		json_error_t jerr;
		q.body = json_loadb(r->body.data, r->body.len, 0, &jerr);
		if (!json_is_object(q.body)) {
			json_decref(q.body);
			cf_error(r, "VALIDATION_FAILED", NULL,
			         "Failed to parse request body: %s",
			         q.body ? "not a JSON object" : jerr.text);
			return;
		}
	} else {
		q.body = json_object();
	}
	/* as getSandbox(id): a sandbox named for the first time is made */
	if (!(q.sb = manager_find(a->m, tenant, sbid)) &&
	    manager_create(a->m, tenant, sbid, NULL, &q.sb, &err) < 0) {
		cf_error(r, "INTERNAL_ERROR", NULL, "%s", err.msg);
		goto out;
	}
	sandbox_touch(q.sb);

	if (route(&q, "POST", "/api/execute"))
		cf_execute(&q);
	else if (route(&q, "POST", "/api/execute/stream"))
		cf_execute_stream(&q);
	else if (route(&q, "GET", "/api/commands"))
		cf_commands(&q);
	else if (route(&q, "POST", "/api/session/create"))
		session_create(&q);
	else if (route(&q, "GET", "/api/session/list"))
		session_list(&q);
	else if (route(&q, "POST", "/api/session/delete"))
		session_delete(&q);
	else if (route(&q, "POST", "/api/process/start"))
		cf_process_start(&q);
	else if (route(&q, "GET", "/api/process/list"))
		cf_process_list(&q);
	else if (route(&q, "DELETE", "/api/process/kill-all"))
		cf_process_kill_all(&q);
	else if (route(&q, "POST", "/api/read"))
		cf_file_read(&q);
	else if (route(&q, "POST", "/api/read/stream"))
		cf_file_read_stream(&q);
	else if (route(&q, "POST", "/api/write"))
		cf_file_write(&q);
	else if (route(&q, "POST", "/api/delete"))
		cf_file_delete(&q);
	else if (route(&q, "POST", "/api/rename"))
		cf_file_rename(&q, false);
	else if (route(&q, "POST", "/api/move"))
		cf_file_rename(&q, true);
	else if (route(&q, "POST", "/api/mkdir"))
		cf_file_mkdir(&q);
	else if (route(&q, "POST", "/api/list-files"))
		cf_file_list(&q);
	else if (route(&q, "POST", "/api/exists"))
		cf_file_exists(&q);
	else if (route(&q, "POST", "/api/git/checkout"))
		cf_git_checkout(&q);
	else if (route(&q, "POST", "/api/backup/create"))
		cf_backup_create(&q);
	else if (route(&q, "POST", "/api/backup/restore"))
		cf_backup_restore(&q);
	else if (route(&q, "POST", "/api/backup/upload-parts"))
		cf_backup_upload_parts(&q);
	else if (route(&q, "GET", "/api/contexts"))
		cf_context_list(&q);
	else if (route(&q, "POST", "/api/contexts"))
		cf_context_create(&q);
	else if (route(&q, "POST", "/api/execute/code"))
		cf_execute_code(&q);
	else if (del && !strncmp(rest, "/api/contexts/", 14) && rest[14] &&
	         !strchr(rest + 14, '/'))
		cf_context_delete(&q, rest + 14);
	else if (process_route(rest, pid, sizeof(pid), &tail) && get && !*tail)
		cf_process_get(&q, pid);
	else if (process_route(rest, pid, sizeof(pid), &tail) && del && !*tail)
		cf_process_kill(&q, pid);
	else if (process_route(rest, pid, sizeof(pid), &tail) && get &&
	         !strcmp(tail, "/logs"))
		cf_process_logs(&q, pid);
	else if (process_route(rest, pid, sizeof(pid), &tail) && get &&
	         !strcmp(tail, "/stream"))
		cf_process_stream(&q, pid);
	else
		unknown_route(r);
out:
	json_decref(q.body);
}

/* ---- the request's body ------------------------------------------------ */

struct cf_begin {
	struct api *a;
	const char *tenant;
	char sbid[64];
	size_t max;
};

static void begin_closed(struct http_req *r)
{
	free(r->ctx);
	r->ctx = NULL;
}

static size_t begin_body(struct http_req *r, const char *data, size_t len)
{
	struct cf_begin *b = r->ctx;
	if (r->body.len + len > b->max) {
		/* the rest is read and dropped by the server */
		r->body_too_large = true;
		cf_error(r, "FILE_TOO_LARGE",
		         json_pack("{s:I}", "maxSize", (json_int_t)b->max),
		         "request body larger than %zu bytes", b->max);
		return len;
	}
	if (buf_append(&r->body, data, len) < 0) {
		r->body_too_large = true;
		cf_error(r, "INTERNAL_ERROR", NULL, "out of memory");
	}
	return len;
}

static void begin_end(struct http_req *r)
{
	struct cf_begin *b = r->ctx;
	struct api *a = b->a;
	const char *tenant = b->tenant;
	char sbid[64];
	const char *rest = strstr(r->url + strlen("/v1/sandbox/"), "/api/");
	memcpy(sbid, b->sbid, sizeof(sbid));
	/* the handlers own ctx and on_close from here */
	free(b);
	r->ctx = NULL;
	r->on_close = NULL;
	dispatch(a, r, tenant, sbid, rest);
}

void api_cf_begin(struct api *a, struct http_req *r, struct route_match *m,
                  const char *rest)
{
	struct cf_begin *b = calloc(1, sizeof(*b));
	if (!b)
		return; /* the body is taken the usual way */
	b->a = a;
	b->tenant = m->tenant;
	/* an id too long is refused as it is, never cut to another's */
	if (strlen(m->params[0]) < sizeof(b->sbid))
		strcpy(b->sbid, m->params[0]);
	else
		strcpy(b->sbid, "!");
	b->max = a->m->cfg->max_body;
	if (!strcmp(rest, "/api/write") && b->max < CF_MIN_WRITE_BODY)
		b->max = CF_MIN_WRITE_BODY;
	r->ctx = b;
	r->on_close = begin_closed;
	r->on_body = begin_body;
	r->on_body_end = begin_end;
}

void api_cf_handle(struct api *a, struct http_req *r, struct route_match *m,
                   const char *rest)
{
	dispatch(a, r, m->tenant, m->params[0], rest);
}
