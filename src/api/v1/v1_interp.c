/* /v1 code interpreter contexts (interp.h says what they are):
 *
 *   POST   /v1/sandbox/{id}/contexts      {language?, cwd?, env?} -> 201
 *   GET    /v1/sandbox/{id}/contexts      -> {contexts: [...]}
 *   GET    /v1/sandbox/{id}/contexts/{cid}
 *   DELETE /v1/sandbox/{id}/contexts/{cid} -> 204
 *   POST   /v1/sandbox/{id}/contexts/{cid}/run  {code, timeoutMs?}
 *
 * A run answers with server-sent events unless the client accepts only
 * application/json (as exec does): "notice", "stdout", "stderr", "result",
 * "error", then "done", each with JSON data, sent as the cell produces
 * them. A client that goes away interrupts its cell. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/env.h"
#include "core/interp.h"
#include "api/source.h"
#include "lib/log.h"
#include "lib/util.h"

static json_t *context_json(struct interp_ctx *c)
{
	struct interp_info i;
	char created[32];
	interp_get_info(c, &i);
	iso8601_ms(i.created_ms, created, sizeof(created));
	const char *status = i.busy       ? "busy"
	                     : i.running  ? "ready"
	                     : i.starting ? "starting"
	                                  : "stopped";
	return json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:s}", "id", i.id,
	                 "language", interp_lang_name(i.lang), "cwd", i.cwd,
	                 "status", status, "executionCount",
	                 (int)i.execution_count, "queued", (int)i.queued,
	                 "createdAt", created);
}

/* The context named by the route, or NULL after answering. */
static struct interp_ctx *find(struct api *a, struct http_req *r,
                               struct route_match *m, struct sandbox **sbp)
{
	struct sandbox *sb = v1_sandbox(a, r, m, true);
	if (!sb)
		return NULL;
	struct interp_ctx *c = interp_find(sb, m->params[1]);
	if (!c)
		v1_error(r, 404, "context_not_found", "no context %s",
		         m->params[1]);
	if (sbp)
		*sbp = sb;
	return c;
}

/* ---- create, list, delete ------------------------------------------------ */

static void created(struct interp_ctx *c, enum interp_start st, const char *msg,
                    void *arg)
{
	struct http_req *r = arg;
	switch (st) {
	case INTERP_STARTED:
		http_respond_json(r, 201, context_json(c));
		break;
	case INTERP_UNAVAILABLE:
		v1_error(r, 501, "language_unavailable", "%s", msg);
		break;
	case INTERP_BAD_CWD:
		v1_error(r, 400, "invalid_request", "%s", msg);
		break;
	case INTERP_DELETED:
		v1_error(r, 409, "conflict",
		         "the context was deleted before it was ready");
		break;
	default:
		v1_error(r, 500, "exec_failed", "%s", msg);
	}
}

void v1_context_create(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sbx_err err = {0};
	char *cwd = NULL;
	char **env = NULL;
	size_t envc = 0;
	json_t *body = v1_body(r);
	if (!body)
		return;
	struct sandbox *sb = v1_sandbox_to_run(a, r, m);
	struct session *sess = sb ? v1_session(r, sb) : NULL;
	if (!sess)
		goto out;
	struct interp_opts o = {.lang = INTERP_PYTHON, .sess = sess};
	json_t *lang = json_object_get(body, "language"),
	       *c = json_object_get(body, "cwd");
	if (lang && !json_is_null(lang) &&
	    (!json_is_string(lang) ||
	     interp_lang_parse(json_string_value(lang), &o.lang) < 0)) {
		v1_error(r, 400, "invalid_request",
		         "language must be \"python\", \"javascript\" or "
		         "\"typescript\"");
		goto out;
	}
	/* as exec's: relative to the session's cwd, and inside /workspace */
	if (v1_cwd(r, c, session_cwd(sess), &cwd) < 0)
		goto out;
	o.cwd = cwd;
	if (v1_env(r, json_object_get(body, "env"), &env, &envc) < 0)
		goto out;
	o.env = (const char *const *)env;
	o.envc = envc;
	http_suspend(r);
	if (interp_create(sb, &o, created, r, NULL, &err) < 0) {
		static const struct v1_errmap create_errs[] = {
		    {ENOSPC, 429, "limit"}, V1_ERR_INTERNAL};
		v1_error_of(r, &err, create_errs);
	}
out:
	free(cwd);
	env_free(env);
	json_decref(body);
}

static void list_one(struct interp_ctx *c, void *data)
{
	json_array_append_new(data, context_json(c));
}

void v1_context_list(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sandbox *sb = v1_sandbox(a, r, m, true);
	if (!sb)
		return;
	json_t *arr = json_array();
	interp_foreach(sb, list_one, arr);
	http_respond_json(r, 200, json_pack("{s:o}", "contexts", arr));
}

void v1_context_get(struct api *a, struct http_req *r, struct route_match *m)
{
	struct interp_ctx *c = find(a, r, m, NULL);
	if (c)
		http_respond_json(r, 200, context_json(c));
}

void v1_context_delete(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sandbox *sb;
	struct interp_ctx *c = find(a, r, m, &sb);
	if (!c)
		return;
	interp_delete(sb, m->params[1]);
	http_respond_empty(r, 204);
}

/* ---- run ------------------------------------------------------------------
 */

struct v1_run {
	struct api_cell c; /* first; c.rl NULL: one JSON answer */
	struct http_req *r;
	uint64_t cap, logged[3];
	json_t *doc; /* the JSON answer, while it is built */
};

static void run_free(struct v1_run *e)
{
	json_decref(e->doc);
	free(e);
}

/* One SSE event with data j (taken); returns the stream's pause flag. */
static int event(struct v1_run *e, const char *name, json_t *j)
{
	return relay_event_json(e->c.rl, name, j);
}

static void run_notice(struct v1_run *e, const char *msg)
{
	if (e->c.rl)
		event(e, "notice", json_pack("{s:s}", "message", msg));
	else
		json_object_set_new(e->doc, "notice", json_string(msg));
}

static int run_output(struct v1_run *e, int fd, const char *text, size_t len)
{
	const char *name = fd == 1 ? "stdout" : "stderr";
	if (e->c.rl)
		return event(e, name, json_pack("{s:s%}", "text", text, len));
	/* JSON: the logs keep up to the daemon's output cap per stream */
	if (e->logged[fd] + len > e->cap) {
		json_object_set_new(e->doc, "truncated", json_true());
		len = e->logged[fd] < e->cap ? (size_t)(e->cap - e->logged[fd])
		                             : 0;
		while (len && (text[len] & 0xc0) == 0x80) /* whole characters */
			len--;
	}
	if (len) {
		e->logged[fd] += len;
		json_array_append_new(
		    json_object_get(json_object_get(e->doc, "logs"), name),
		    json_stringn(text, len));
	}
	return 0;
}

static int run_result(struct v1_run *e, json_t *bundle)
{
	if (e->c.rl)
		return event(e, "result", json_incref(bundle));
	json_array_append(json_object_get(e->doc, "results"), bundle);
	return 0;
}

static void run_error(struct v1_run *e, const struct interp_error *er)
{
	json_t *j = json_pack("{s:s, s:s, s:O}", "name", er->name, "value",
	                      er->value, "traceback", er->traceback);
	if (e->c.rl)
		event(e, "error", j);
	else
		json_object_set_new(e->doc, "error", j);
}

static void run_done(struct v1_run *e, const struct interp_done *d)
{
	e->c.cell = NULL;
	json_t *j =
	    json_pack("{s:i, s:b, s:b, s:b}", "executionCount",
	              (int)d->execution_count, "timedOut", d->timed_out,
	              "restarted", d->restarted, "stateLost", d->state_lost);
	if (e->c.rl) {
		json_object_set_new(j, "error", json_boolean(d->error));
		event(e, "done", j);
		relay_end(e->c.rl);
	} else {
		json_object_update(e->doc, j);
		json_decref(j);
		http_respond_json(e->r, 200, json_incref(e->doc));
	}
	run_free(e);
}

/* The cell's events, in their order, each as one SSE event (or a part of
 * the JSON answer). */
static int run_event(void *arg, const struct interp_event *ev)
{
	struct v1_run *e = arg;
	switch (ev->type) {
	case INTERP_EV_NOTICE:
		run_notice(e, ev->text);
		return 0;
	case INTERP_EV_STDOUT:
	case INTERP_EV_STDERR:
		return run_output(e, ev->type == INTERP_EV_STDOUT ? 1 : 2,
		                  ev->text, ev->len);
	case INTERP_EV_RESULT:
		return run_result(e, ev->bundle);
	case INTERP_EV_ERROR:
		run_error(e, ev->error);
		return 0;
	case INTERP_EV_END:
		run_done(e, ev->done);
		return 0;
	}
	return 0;
}

void v1_context_run(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sbx_err err = {0};
	json_t *body = v1_body(r);
	if (!body)
		return;
	struct interp_ctx *c = find(a, r, m, NULL);
	json_t *code = json_object_get(body, "code"),
	       *to = json_object_get(body, "timeoutMs");
	uint64_t timeout = a->m->cfg->exec_timeout_ms;
	if (!c)
		goto out;
	if (!json_is_string(code)) {
		v1_error(r, 400, "invalid_request", "code must be a string");
		goto out;
	}
	if (to && !json_is_null(to)) {
		if (!json_is_integer(to) || json_integer_value(to) <= 0) {
			v1_error(r, 400, "invalid_request",
			         "timeoutMs must be a positive integer");
			goto out;
		}
		timeout = (uint64_t)json_integer_value(to);
	}
	struct v1_run *e = calloc(1, sizeof(*e));
	if (!e) {
		v1_error(r, 500, "internal", "out of memory");
		goto out;
	}
	e->r = r;
	e->cap = a->m->cfg->max_output;
	if (!v1_wants_json(r)) {
		e->c.rl = relay_open(r, a->m->loop, NULL, &api_cell_relay, e);
		if (!e->c.rl) {
			free(e);
			goto out;
		}
	} else {
		e->doc =
		    json_pack("{s:[], s:{s:[], s:[]}, s:n, s:i, s:b, s:b, "
		              "s:b, s:n, s:b}",
		              "results", "logs", "stdout", "stderr", "error",
		              "executionCount", 0, "timedOut", 0, "restarted",
		              0, "stateLost", 0, "notice", "truncated", 0);
		http_suspend(r);
	}
	if (interp_run(c, json_string_value(code), json_string_length(code),
	               timeout, run_event, e, &e->c.cell, &err) < 0) {
		if (e->c.rl) {
			event(e, "error",
			      json_pack("{s:s, s:s, s:[]}", "name",
			                "InvalidRequest", "value", err.msg,
			                "traceback"));
			relay_end(e->c.rl);
		} else {
			static const struct v1_errmap run_errs[] = {
			    {EINVAL, 400, "invalid_request"}, V1_ERR_INTERNAL};
			v1_error_of(r, &err, run_errs);
		}
		run_free(e);
	}
out:
	json_decref(body);
}
