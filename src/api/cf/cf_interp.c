/* The code interpreter of the Cloudflare container protocol, on
 * sandboxd's interpreter contexts (interp.h):
 *
 *   POST   /api/contexts       {language?, cwd?, env_vars?} -> {contextId,
 * language, cwd} GET    /api/contexts       -> {contexts: [{id, language,
 * cwd}]} DELETE /api/contexts/{id}  -> {contextId} POST   /api/execute/code
 * {context_id, code, language?, timeout_ms?} -> SSE
 *
 * execute/code streams, as the cell produces them, frames the SDK's
 * InterpreterClient parses: {"type": "stdout"|"stderr", "text"}, one
 * {"type": "result", text|html|png|jpeg|svg|json|latex|markdown|javascript,
 * "metadata": {}} per rich output (the MIME bundle's keys renamed; any
 * other MIME type stays under "data"), then {"type": "execution_complete",
 * "execution_count"} or, for a cell that failed, {"type": "error", "ename",
 * "evalue", "traceback": [lines]} instead (as the container: one or the
 * other, the stream ends after it). A reader that goes away interrupts
 * its cell. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/cf/cf.h"
#include "core/env.h"
#include "api/source.h"
#include "core/interp.h"
#include "lib/util.h"

/* A comment after this much silence (as execute/stream): a reader that
 * went away is noticed by the write after it left at the latest. */

static const char *unavailable_code(enum interp_lang l)
{
	/* TypeScript runs on node: the SDK has no code of its own for it */
	return l == INTERP_PYTHON ? "PYTHON_NOT_AVAILABLE"
	                          : "JAVASCRIPT_NOT_AVAILABLE";
}

/* The body's "language": 0 and *out when given, 1 when absent, -1 after
 * answering. */
static int body_lang(struct cf_req *q, enum interp_lang *out)
{
	const char *s;
	if (cf_string(q, "language", &s) < 0)
		return -1;
	if (!s || !*s)
		return 1;
	if (interp_lang_parse(s, out) < 0) {
		cf_error(
		    q->r, "VALIDATION_FAILED",
		    json_pack("{s:s, s:s}", "field", "language", "language", s),
		    "Unsupported language '%.100s'. Supported languages: "
		    "python, javascript, typescript",
		    s);
		return -1;
	}
	return 0;
}

/* ---- contexts ------------------------------------------------------------ */

/* The protocol's code for a cwd the worker could not enter. */
static const char *bad_cwd_code(const char *msg)
{
	if (strstr(msg, strerror(ENOENT)))
		return "FILE_NOT_FOUND";
	if (strstr(msg, strerror(ENOTDIR)))
		return "NOT_DIRECTORY";
	if (strstr(msg, strerror(EACCES)) || strstr(msg, strerror(EPERM)))
		return "PERMISSION_DENIED";
	return "VALIDATION_FAILED";
}

static void created(struct interp_ctx *c, enum interp_start st, const char *msg,
                    void *arg)
{
	struct http_req *r = arg;
	struct interp_info i;
	char m[1024];
	interp_get_info(c, &i);
	const char *lang = interp_lang_name(i.lang);
	/* msg may end with what the worker said, newline included */
	size_t n = strlen(msg ? msg : "");
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		n--;
	snprintf(m, sizeof(m), "%.*s", (int)n, n ? msg : "");
	msg = m;
	switch (st) {
	case INTERP_STARTED:
		cf_ok(r, json_pack("{s:s, s:s, s:s}", "contextId", i.id,
		                   "language", lang, "cwd", i.cwd));
		break;
	case INTERP_UNAVAILABLE:
		cf_error(r, unavailable_code(i.lang),
		         json_pack("{s:s}", "language", lang), "%s", msg);
		break;
	case INTERP_BAD_CWD:
		cf_error(r, bad_cwd_code(msg),
		         json_pack("{s:s, s:s}", "path", i.cwd, "operation",
		                   "chdir"),
		         "%s", msg);
		break;
	case INTERP_DELETED:
		cf_error(r, "INTERNAL_ERROR",
		         json_pack("{s:s}", "contextId", i.id),
		         "Code context '%s' was deleted before its %s worker "
		         "had started",
		         i.id, lang);
		break;
	default:
		cf_error(r, "INTERNAL_ERROR",
		         json_pack("{s:s}", "originalError", msg),
		         "Failed to create code context: %s", msg);
	}
}

void cf_context_create(struct cf_req *q)
{
	struct sbx_err err = {0};
	struct interp_opts o = {.lang = INTERP_PYTHON};
	char cwd[4200];
	char **env = NULL;
	size_t envc = 0;
	bool fresh;
	json_t *ev = json_object_get(q->body, "env_vars");
	if (!ev || json_is_null(ev))
		ev = json_object_get(q->body, "envVars");
	if (!ev || json_is_null(ev))
		ev = json_object_get(q->body, "env");
	const char *c;
	if (cf_string(q, "cwd", &c) < 0 || body_lang(q, &o.lang) < 0 ||
	    !(o.sess = cf_session(q, &fresh)) || cf_env(q, ev, &env, &envc) < 0)
		goto out;
	/* anywhere in the sandbox, or relative to the session's cwd */
	if (c && *c) {
		if (cf_resolve(q, session_cwd(o.sess), c, cwd, sizeof(cwd)) < 0)
			goto out;
		o.cwd = cwd;
	}
	o.env = (const char *const *)env;
	o.envc = envc;
	http_suspend(q->r);
	if (interp_create(q->sb, &o, created, q->r, NULL, &err) < 0) {
		if (err.code == ENOSPC)
			cf_error(q->r, "RESOURCE_BUSY",
			         json_pack("{s:i}", "maxContexts",
			                   INTERP_MAX_CONTEXTS),
			         "%s; delete some first", err.msg);
		else
			cf_error(q->r, "INTERNAL_ERROR", NULL,
			         "Failed to create code context: %s", err.msg);
	}
out:
	env_free(env);
}

static void list_one(struct interp_ctx *c, void *data)
{
	struct interp_info i;
	interp_get_info(c, &i);
	json_array_append_new(
	    data, json_pack("{s:s, s:s, s:s}", "id", i.id, "language",
	                    interp_lang_name(i.lang), "cwd", i.cwd));
}

void cf_context_list(struct cf_req *q)
{
	json_t *arr = json_array();
	interp_foreach(q->sb, list_one, arr);
	cf_ok(q->r, json_pack("{s:o}", "contexts", arr));
}

static void context_not_found(struct http_req *r, const char *id)
{
	cf_error(r, "CONTEXT_NOT_FOUND", json_pack("{s:s}", "contextId", id),
	         "Code context '%.200s' not found", id);
}

void cf_context_delete(struct cf_req *q, const char *id)
{
	if (interp_delete(q->sb, id) < 0) {
		context_not_found(q->r, id);
		return;
	}
	cf_ok(q->r, json_pack("{s:s}", "contextId", id));
}

/* ---- execute/code ----------------------------------------------------------
 */

struct cf_run {
	struct api_cell c; /* first */
};

/* One frame (takes ev); the stream's pause flag. */
static int frame(struct cf_run *e, json_t *ev)
{
	return ev ? cf_event(e->c.rl, ev) : 0;
}

static json_t *output(const char *type, const char *text, size_t len)
{
	return json_pack("{s:s, s:s%, s:I}", "type", type, "text", text, len,
	                 "timestamp", (json_int_t)now_wall_ms());
}

static json_t *result(json_t *bundle)
{
	json_t *ev = json_pack("{s:s}", "type", "result"), *rest = NULL;
	const char *mime;
	json_t *v;
	json_object_foreach(bundle, mime, v)
	{
		/* the SDK's Result fields; it has none for a PDF */
		const char *key = interp_format_name(mime);
		if (key && strcmp(key, "pdf")) {
			json_object_set(ev, key, v);
			continue;
		}
		if (!rest)
			rest = json_object();
		json_object_set(rest, mime, v);
	}
	if (rest)
		json_object_set_new(ev, "data", rest);
	json_object_set_new(ev, "metadata", json_object());
	return ev;
}

/* The worker was restarted since the context's last cell: its state is
 * gone. The protocol has no frame for that; the SDK shows stderr. */
static json_t *notice(const char *msg)
{
	char *text;
	if (asprintf(&text, "[sandboxd] %s\n", msg) < 0)
		return NULL;
	json_t *ev = output("stderr", text, strlen(text));
	free(text);
	return ev;
}

static void run_done(struct cf_run *e, const struct interp_done *d)
{
	e->c.cell = NULL;
	if (!d->error)
		frame(e, json_pack("{s:s, s:i}", "type", "execution_complete",
		                   "execution_count", (int)d->execution_count));
	relay_end(e->c.rl);
	free(e);
}

/* The cell's events, in their order, each as one frame. */
static int run_event(void *arg, const struct interp_event *ev)
{
	struct cf_run *e = arg;
	switch (ev->type) {
	case INTERP_EV_NOTICE:
		frame(e, notice(ev->text));
		return 0;
	case INTERP_EV_STDOUT:
	case INTERP_EV_STDERR:
		return frame(e, output(ev->type == INTERP_EV_STDOUT ? "stdout"
		                                                    : "stderr",
		                       ev->text, ev->len));
	case INTERP_EV_RESULT:
		return frame(e, result(ev->bundle));
	case INTERP_EV_ERROR:
		frame(e, json_pack("{s:s, s:s, s:s, s:O}", "type", "error",
		                   "ename", ev->error->name, "evalue",
		                   ev->error->value, "traceback",
		                   ev->error->traceback));
		return 0;
	case INTERP_EV_END:
		run_done(e, ev->done);
		return 0;
	}
	return 0;
}

void cf_execute_code(struct cf_req *q)
{
	struct sbx_err err = {0};
	enum interp_lang lang;
	uint64_t timeout;
	const char *id;
	if (cf_string(q, "context_id", &id) < 0)
		return;
	if (!id || !*id) {
		cf_error(q->r, "VALIDATION_FAILED",
		         json_pack("{s:s}", "field", "context_id"),
		         "context_id is required");
		return;
	}
	json_t *code = json_object_get(q->body, "code");
	if (!json_is_string(code)) {
		cf_error(q->r, "VALIDATION_FAILED",
		         json_pack("{s:s}", "field", "code"),
		         "code must be a string");
		return;
	}
	int given = body_lang(q, &lang);
	if (given < 0 || cf_uint(q, "timeout_ms", &timeout) < 0 ||
	    (!timeout && cf_uint(q, "timeoutMs", &timeout) < 0))
		return;
	struct interp_ctx *c = interp_find(q->sb, id);
	if (!c) {
		context_not_found(q->r, id);
		return;
	}
	struct interp_info i;
	interp_get_info(c, &i);
	if (given == 0 && lang != i.lang) {
		cf_error(
		    q->r, "VALIDATION_FAILED",
		    json_pack("{s:s, s:s, s:s}", "contextId", id, "language",
		              interp_lang_name(i.lang), "requested",
		              interp_lang_name(lang)),
		    "Context %s was created for %s, cannot execute %s code", id,
		    interp_lang_name(i.lang), interp_lang_name(lang));
		return;
	}
	struct cf_run *e = calloc(1, sizeof(*e));
	if (!e) {
		cf_error(q->r, "INTERNAL_ERROR", NULL, "out of memory");
		return;
	}
	/* queued first (its callbacks come from the loop, never from in
	 * here), so that a cell refused is a plain error answer */
	if (interp_run(c, json_string_value(code), json_string_length(code),
	               timeout ? timeout : q->a->m->cfg->exec_timeout_ms,
	               run_event, e, &e->c.cell, &err) < 0) {
		if (err.code == EINVAL)
			cf_error(q->r, "VALIDATION_FAILED",
			         json_pack("{s:s}", "field", "code"), "%s",
			         err.msg);
		else if (err.code == ENOENT)
			context_not_found(q->r, id);
		else
			cf_error(q->r, "CODE_EXECUTION_ERROR",
			         json_pack("{s:s, s:s}", "contextId", id,
			                   "evalue", err.msg),
			         "Failed to execute code in context '%s': %s",
			         id, err.msg);
		free(e);
		return;
	}
	e->c.rl = relay_open(q->r, q->a->m->loop, &cf_stream_opts,
	                     &api_cell_relay, e);
	if (!e->c.rl) {
		interp_cell_cancel(e->c.cell);
		free(e);
	}
}
