/* The @e2b/code-interpreter face (E2b-Sandbox-Port 49999) on the core's
 * interpreter (core/interp.h): /execute runs a cell and streams its events
 * as NDJSON, one object per line, in E2B's shapes; /contexts manages the
 * contexts. A run without a context uses the sandbox's default context
 * of its language (made on first use), as E2B's server does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/e2b/e2b.h"
#include "api/source.h"
#include "core/interp.h"
#include "lib/util.h"

#define NDJSON "application/x-ndjson"
static const char ci_keepalive[] = "{\"type\":\"keepalive\"}\n";

static const char *lang_name(enum interp_lang l)
{
	return l == INTERP_PYTHON ? "python" : interp_lang_name(l);
}

static json_t *context_json(struct interp_ctx *c)
{
	struct interp_info i;
	interp_get_info(c, &i);
	return json_pack("{s:s, s:s, s:s}", "id", i.id, "language",
	                 lang_name(i.lang), "cwd", i.cwd ? i.cwd : E2B_HOME);
}

/* E2B's languages: python, js/javascript, ts/typescript. */
static int lang_of(json_t *j, enum interp_lang *l)
{
	*l = INTERP_PYTHON;
	if (!j || json_is_null(j))
		return 0;
	const char *s = json_string_value(j);
	if (!s)
		return -1;
	return interp_lang_parse(s, l) < 0 ? -1 : 0;
}

/* ---- /execute -------------------------------------------------------------
 */

struct ci_run {
	struct api_cell c;  /* first: the relay's glue */
	struct http_req *r; /* until the stream is open */
	struct api *a;
};

static int line(struct ci_run *e, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!s)
		return 0;
	size_t n = strlen(s);
	s[n] = '\n';
	int r = relay_write(e->c.rl, s, n + 1);
	free(s);
	return r;
}

static json_t *result_json(json_t *bundle)
{
	json_t *j =
	    json_pack("{s:s, s:b}", "type", "result", "is_main_result", 1);
	const char *k;
	json_t *v;
	json_t *extra = json_object();
	json_object_foreach(bundle, k, v)
	{
		/* the Result fields, and the two E2B's own kernel adds */
		const char *key = interp_format_name(k);
		if (!key && !strcmp(k, "e2b/data"))
			key = "data";
		else if (!key && !strcmp(k, "e2b/chart"))
			key = "chart";
		json_object_set(key ? j : extra, key ? key : k, v);
	}
	if (json_object_size(extra))
		json_object_set_new(j, "extra", extra);
	else
		json_decref(extra);
	return j;
}

static int run_event(void *arg, const struct interp_event *ev)
{
	struct ci_run *e = arg;
	char ts[32];
	iso8601_ms(now_wall_ms(), ts, sizeof(ts));
	switch (ev->type) {
	case INTERP_EV_NOTICE:
		return 0; /* E2B has no such line */
	case INTERP_EV_STDOUT:
	case INTERP_EV_STDERR:
		return line(
		    e, json_pack("{s:s, s:s%, s:s}", "type",
		                 ev->type == INTERP_EV_STDOUT ? "stdout"
		                                              : "stderr",
		                 "text", ev->text, ev->len, "timestamp", ts));
	case INTERP_EV_RESULT:
		return line(e, result_json(ev->bundle));
	case INTERP_EV_ERROR: {
		json_t *tb = ev->error->traceback;
		struct buf b;
		buf_init(&b, 0);
		for (size_t i = 0; i < json_array_size(tb); i++) {
			const char *l =
			    json_string_value(json_array_get(tb, i));
			if (l)
				buf_printf(&b, "%s%s", i ? "\n" : "", l);
		}
		line(e, json_pack(
		            "{s:s, s:s, s:s, s:s}", "type", "error", "name",
		            ev->error->name ? ev->error->name : "Error",
		            "value", ev->error->value ? ev->error->value : "",
		            "traceback", buf_cstr(&b)));
		buf_free(&b);
		return 0;
	}
	case INTERP_EV_END:
		e->c.cell = NULL;
		line(e, json_pack("{s:s, s:i}", "type", "number_of_executions",
		                  "execution_count",
		                  (int)ev->done->execution_count));
		line(e, json_pack("{s:s}", "type",
		                  ev->done->state_lost
		                      ? "unexpected_end_of_execution"
		                      : "end_of_execution"));
		relay_end(e->c.rl);
		free(e);
		return 0;
	}
	return 0;
}

static void created_default(struct interp_ctx *c, enum interp_start st,
                            const char *msg, void *arg)
{
	(void)c;
	(void)arg;
	if (st != INTERP_STARTED)
		fprintf(stderr, "e2b: default context: %s\n", msg);
}

static struct interp_ctx *default_context(struct e2b_req *q, enum interp_lang l,
                                          struct sbx_err *err)
{
	char id[64];
	snprintf(id, sizeof(id), "e2b-default-%s", lang_name(l));
	struct interp_ctx *c = interp_find(q->sb, id);
	if (c)
		return c;
	struct interp_opts o = {.lang = l, .id = id, .cwd = E2B_HOME};
	if (interp_create(q->sb, &o, created_default, NULL, &c, err) < 0)
		return NULL;
	return c;
}

static void execute(struct e2b_req *q)
{
	struct http_req *r = q->r;
	struct sbx_err err = {0};
	json_t *body =
	    r->body.len ? json_loadb(r->body.data, r->body.len, 0, NULL) : NULL;
	json_t *code = json_object_get(body, "code");
	const char *cid =
	    json_string_value(json_object_get(body, "context_id"));
	json_t *envs = json_object_get(body, "env_vars");
	enum interp_lang l;
	struct interp_ctx *c = NULL;
	if (!json_is_string(code)) {
		e2b_error(r, 400, "code: a string is needed");
		goto out;
	}
	if (json_object_size(envs)) {
		e2b_error(r, 400,
		          "env_vars per execution are not supported by "
		          "sandboxd: set envs when creating the sandbox or the "
		          "context");
		goto out;
	}
	if (cid) {
		if (!(c = interp_find(q->sb, cid))) {
			e2b_error(r, 404, "Context %s not found", cid);
			goto out;
		}
	} else {
		if (lang_of(json_object_get(body, "language"), &l) < 0) {
			e2b_error(r, 400,
			          "language: python, javascript or "
			          "typescript");
			goto out;
		}
		if (!(c = default_context(q, l, &err))) {
			e2b_error(r, 500, "%s", err.msg);
			goto out;
		}
	}
	struct ci_run *e = calloc(1, sizeof(*e));
	if (!e) {
		e2b_error(r, 500, "out of memory");
		goto out;
	}
	struct relay_opts o = {.content_type = NDJSON,
	                       .size = HTTP_SIZE_UNKNOWN,
	                       .keepalive_ms = 30000,
	                       .keepalive = ci_keepalive,
	                       .keepalive_len = sizeof(ci_keepalive) - 1};
	e->c.rl = relay_open(r, q->a->m->loop, &o, &api_cell_relay, e);
	if (!e->c.rl) {
		free(e);
		goto out;
	}
	if (interp_run(c, json_string_value(code), json_string_length(code), 0,
	               run_event, e, &e->c.cell, &err) < 0) {
		line(e, json_pack("{s:s, s:s, s:s, s:s}", "type", "error",
		                  "name", "InvalidRequest", "value", err.msg,
		                  "traceback", ""));
		line(e, json_pack("{s:s}", "type", "end_of_execution"));
		relay_end(e->c.rl);
		free(e);
	}
out:
	json_decref(body);
}

/* ---- /contexts ------------------------------------------------------------
 */

static void ctx_created(struct interp_ctx *c, enum interp_start st,
                        const char *msg, void *arg)
{
	struct http_req *r = arg;
	if (st == INTERP_STARTED)
		http_respond_json(r, 200, context_json(c));
	else if (st == INTERP_BAD_CWD)
		e2b_error(r, 400, "%s", msg);
	else
		e2b_error(r, 500, "%s", msg);
}

static void create_context(struct e2b_req *q, const char *id,
                           enum interp_lang l, const char *cwd)
{
	struct sbx_err err = {0};
	struct interp_opts o = {.lang = l, .id = id, .cwd = cwd};
	http_suspend(q->r);
	if (interp_create(q->sb, &o, ctx_created, q->r, NULL, &err) < 0) {
		static const struct e2b_errmap create_errs[] = {{ENOSPC, 429},
		                                                {0, 500}};
		e2b_error(q->r, e2b_status(&err, create_errs), "%s", err.msg);
	}
}

static void list_one(struct interp_ctx *c, void *data)
{
	json_array_append_new(data, context_json(c));
}

void e2b_ci(struct e2b_req *q)
{
	struct http_req *r = q->r;
	const char *u = r->url, *m = r->method;
	if (!strcmp(u, "/health")) {
		http_respond_json(r, 200, json_string("OK"));
	} else if (!strcmp(u, "/execute") && !strcmp(m, "POST")) {
		execute(q);
	} else if (!strcmp(u, "/contexts") && !strcmp(m, "GET")) {
		json_t *arr = json_array();
		interp_foreach(q->sb, list_one, arr);
		http_respond_json(r, 200, arr);
	} else if (!strcmp(u, "/contexts") && !strcmp(m, "POST")) {
		json_t *b = r->body.len
		                ? json_loadb(r->body.data, r->body.len, 0, NULL)
		                : json_object();
		enum interp_lang l;
		char *cwd = NULL;
		const char *c = json_string_value(json_object_get(b, "cwd"));
		if (!json_is_object(b) ||
		    lang_of(json_object_get(b, "language"), &l) < 0) {
			e2b_error(r, 400,
			          "language: python, javascript or "
			          "typescript");
		} else if (e2b_path(q, c ? c : E2B_HOME, &cwd) < 0) {
			e2b_error(r, 400, "cwd: not a valid path");
		} else {
			create_context(q, NULL, l, cwd);
		}
		free(cwd);
		json_decref(b);
	} else if (!strncmp(u, "/contexts/", 10)) {
		char id[128];
		const char *rest = u + 10;
		size_t n = strcspn(rest, "/");
		if (n >= sizeof(id)) {
			e2b_error(r, 404, "Context not found");
			return;
		}
		memcpy(id, rest, n);
		id[n] = '\0';
		rest += n;
		struct interp_ctx *c = interp_find(q->sb, id);
		if (!c) {
			e2b_error(r, 404, "Context %s not found", id);
		} else if (!*rest && !strcmp(m, "DELETE")) {
			interp_delete(q->sb, id);
			http_respond_empty(r, 204);
		} else if (!strcmp(rest, "/restart") && !strcmp(m, "POST")) {
			/* a new worker: the state is gone, as a kernel restart
			 */
			struct interp_info i;
			interp_get_info(c, &i);
			enum interp_lang l = i.lang;
			char *cwd = strdup(i.cwd ? i.cwd : E2B_HOME);
			interp_delete(q->sb, id);
			if (cwd)
				create_context(q, id, l, cwd);
			else
				e2b_error(r, 500, "out of memory");
			free(cwd);
		} else {
			e2b_error(r, 404, "no such endpoint: %s %s", m, u);
		}
	} else {
		e2b_error(r, 404, "no such endpoint: %s %s", m, u);
	}
}
