/* libsbx: commands (buffered and streamed), background processes and the
 * code interpreter. Streams are server-sent events, parsed by sse.c's
 * parser in client.c; each event is decoded here and handed to the
 * caller's callback as it arrives. */
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

/* The exec body shared by exec and process start; NULL with err set. */
static json_t *exec_body(const struct sbx_exec_opts *o, struct sbx_error *err)
{
	if (!o || (!o->argv == !o->command)) {
		sbx_err_set(err, 0, "usage",
		            "give exactly one of argv and command");
		return NULL;
	}
	json_t *b = json_object();
	if (o->argv) {
		json_t *a = json_array();
		for (const char *const *p = o->argv; *p; p++)
			json_array_append_new(a, json_string(*p));
		json_object_set_new(b, "argv", a);
	} else {
		json_object_set_new(b, "command", json_string(o->command));
	}
	if (o->cwd)
		json_object_set_new(b, "cwd", json_string(o->cwd));
	if (o->env)
		json_object_set_new(b, "env", json_env(o->env));
	if (o->stdin_data) {
		char *s = b64_encode(o->stdin_data, o->stdin_len);
		if (!s) {
			json_decref(b);
			sbx_err_set(err, 0, "io", "out of memory");
			return NULL;
		}
		json_object_set_new(b, "stdinBase64", json_string(s));
		free(s);
	}
	if (o->timeout_ms)
		json_object_set_new(b, "timeoutMs",
		                    json_integer((json_int_t)o->timeout_ms));
	if (o->max_output_bytes)
		json_object_set_new(
		    b, "maxOutputBytes",
		    json_integer((json_int_t)o->max_output_bytes));
	return b;
}

static char *dump(json_t *b, struct sbx_error *err)
{
	char *s = json_dumps(b, JSON_COMPACT);
	json_decref(b);
	if (!s)
		sbx_err_set(err, 0, "io", "out of memory");
	return s;
}

void sbx_exec_result_clear(struct sbx_exec_result *r)
{
	if (!r)
		return;
	free(r->signal);
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof(*r));
}

/* A JSON string that may hold any byte, copied with its length. */
static void take_bytes(json_t *o, const char *key, char **p, size_t *n)
{
	json_t *v = json_object_get(o, key);
	*n = json_is_string(v) ? json_string_length(v) : 0;
	*p = malloc(*n + 1);
	if (!*p) {
		*n = 0;
		return;
	}
	if (*n)
		memcpy(*p, json_string_value(v), *n);
	(*p)[*n] = '\0';
}

int sbx_exec(struct sbx_client *c, const char *id,
             const struct sbx_exec_opts *o, struct sbx_exec_result *r,
             struct sbx_error *err)
{
	json_t *b = exec_body(o, err), *j = NULL;
	if (!b)
		return -1;
	struct call k = {.method = "POST",
	                 .url = url_sandbox(c, id, "/exec"),
	                 .session = o->session};
	if (call_json(c, &k, b, &j, err))
		return -1;
	if (!json_is_object(j)) {
		json_decref(j);
		sbx_err_set(err, 0, "protocol",
		            "the exec answer is not a JSON object");
		return -1;
	}
	memset(r, 0, sizeof(*r));
	r->exit_code = (int)json_integer_value(json_object_get(j, "exitCode"));
	r->timed_out = json_is_true(json_object_get(j, "timedOut"));
	r->signal = jstrdup(j, "signal");
	json_t *t = json_object_get(j, "truncated");
	r->truncated = json_is_true(json_object_get(t, "stdout")) ||
	               json_is_true(json_object_get(t, "stderr"));
	r->duration_ms = juint(j, "durationMs");
	take_bytes(j, "stdout", &r->out, &r->out_len);
	take_bytes(j, "stderr", &r->err, &r->err_len);
	json_decref(j);
	return 0;
}

/* ---- streamed output: stdout/stderr (base64), exit, error ---- */

struct outstream {
	sbx_output_cb cb;
	void *ud;
	struct call *k;
	struct sbx_exec_result *r;
	bool exited;
	unsigned char *tmp;
	size_t tmpcap;
};

static void error_event(struct call *k, const char *data, size_t len)
{
	json_t *j = json_loadb(data, len, 0, NULL);
	json_t *m = json_object_get(j, "error"),
	       *code = json_object_get(j, "code");
	if (!json_is_string(m))
		m = json_object_get(j, "message");
	sbx_err_set(&k->cb_err, 0,
	            json_is_string(code) ? json_string_value(code) : "error",
	            "%s", json_is_string(m) ? json_string_value(m) : data);
	k->cb_err_set = true;
	json_decref(j);
}

static int on_output_event(void *ud, const char *event, const char *data,
                           size_t len, const char *id)
{
	struct outstream *s = ud;
	(void)id;
	int stream = !strcmp(event, "stdout")   ? SBX_STDOUT
	             : !strcmp(event, "stderr") ? SBX_STDERR
	                                        : 0;
	if (stream) {
		if (len > s->tmpcap) {
			unsigned char *t = realloc(s->tmp, len);
			if (!t)
				return -1;
			s->tmp = t;
			s->tmpcap = len;
		}
		ssize_t n = b64_decode(data, len, s->tmp);
		if (n < 0) {
			sbx_err_set(&s->k->cb_err, 0, "protocol",
			            "an output event is not base64");
			s->k->cb_err_set = true;
			return -1;
		}
		return n ? s->cb(s->ud, stream, s->tmp, (size_t)n) : 0;
	}
	if (!strcmp(event, "exit")) {
		json_t *j = json_loadb(data, len, 0, NULL);
		s->exited = true;
		if (s->r) {
			s->r->exit_code = (int)json_integer_value(
			    json_object_get(j, "exit_code"));
			s->r->timed_out =
			    json_is_true(json_object_get(j, "timed_out"));
			s->r->truncated =
			    json_is_true(json_object_get(j, "truncated"));
			free(s->r->signal);
			s->r->signal = jstrdup(j, "signal");
		}
		json_decref(j);
	} else if (!strcmp(event, "error")) {
		error_event(s->k, data, len);
	}
	return 0;
}

static int run_output_stream(struct sbx_client *c, struct call *k,
                             sbx_output_cb cb, void *ud,
                             struct sbx_exec_result *r, struct sbx_error *err)
{
	struct outstream s = {.cb = cb, .ud = ud, .k = k, .r = r};
	k->mode = CALL_SSE;
	k->accept = "text/event-stream";
	k->on_event = on_output_event;
	/* s outlives the call; k's pointer to it is cleared after */
	// cppcheck-suppress autoVariables
	k->ev_ud = &s;
	int rc = call_run(c, k, err);
	k->ev_ud = NULL;
	free(s.tmp);
	if (rc == 0 && !s.exited) {
		sbx_err_set(err, 0, "protocol",
		            "the stream ended before the command did");
		rc = -1;
	}
	return rc;
}

int sbx_exec_stream(struct sbx_client *c, const char *id,
                    const struct sbx_exec_opts *o, sbx_output_cb cb, void *ud,
                    struct sbx_exec_result *r, struct sbx_error *err)
{
	json_t *b = exec_body(o, err);
	char *text = b ? dump(b, err) : NULL;
	if (!text)
		return -1;
	if (r)
		memset(r, 0, sizeof(*r));
	struct call k = {.method = "POST",
	                 .url = url_sandbox(c, id, "/exec"),
	                 .session = o->session,
	                 .body = text,
	                 .body_len = strlen(text)};
	int rc = run_output_stream(c, &k, cb, ud, r, err);
	free(text);
	return rc;
}

/* ---- background processes ---- */

static void process_fill(void *to, json_t *j)
{
	struct sbx_process *p = to;
	memset(p, 0, sizeof(*p));
	p->id = jstrdup(j, "id");
	p->pid = (long)json_integer_value(json_object_get(j, "pid"));
	p->command = jstrdup(j, "command");
	p->status = jstrdup(j, "status");
	p->start_time = jstrdup(j, "startTime");
	p->end_time = jstrdup(j, "endTime");
	json_t *ec = json_object_get(j, "exitCode");
	p->has_exit_code = json_is_integer(ec);
	p->exit_code = (int)json_integer_value(ec);
}

static void process_clear(struct sbx_process *p)
{
	free(p->id);
	free(p->command);
	free(p->status);
	free(p->start_time);
	free(p->end_time);
}

void sbx_process_free(struct sbx_process *p)
{
	if (p)
		process_clear(p);
	free(p);
}

void sbx_process_list_free(struct sbx_process *list, size_t n)
{
	for (size_t i = 0; list && i < n; i++)
		process_clear(&list[i]);
	free(list);
}

static int one_process(json_t *j, struct sbx_process **out,
                       struct sbx_error *err)
{
	*out = json_one_fill(j, sizeof(**out), process_fill, "process", err);
	return *out ? 0 : -1;
}

int sbx_process_start(struct sbx_client *c, const char *id,
                      const char *process_id, const struct sbx_exec_opts *o,
                      struct sbx_process **out, struct sbx_error *err)
{
	json_t *b = exec_body(o, err), *ans = NULL;
	if (!b)
		return -1;
	if (process_id)
		json_object_set_new(b, "processId", json_string(process_id));
	if (json_call(c, "POST", url_sandbox(c, id, "/process"), b, &ans, err))
		return -1;
	if (!out) {
		json_decref(ans);
		return 0;
	}
	return one_process(ans, out, err);
}

int sbx_process_list(struct sbx_client *c, const char *id,
                     struct sbx_process **list, size_t *n,
                     struct sbx_error *err)
{
	json_t *ans = NULL;
	if (json_call(c, "GET", url_sandbox(c, id, "/process"), NULL, &ans,
	              err))
		return -1;
	*list = json_array_fill(json_object_get(ans, "processes"),
	                        sizeof(**list), process_fill, n, err);
	json_decref(ans);
	return *list ? 0 : -1;
}

static char *process_url(struct sbx_client *c, const char *id, const char *pid,
                         const char *rest)
{
	return url_sandbox_item(c, id, "/process", pid, rest);
}

int sbx_process_info(struct sbx_client *c, const char *id, const char *pid,
                     struct sbx_process **out, struct sbx_error *err)
{
	json_t *ans = NULL;
	if (json_call(c, "GET", process_url(c, id, pid, ""), NULL, &ans, err))
		return -1;
	return one_process(ans, out, err);
}

int sbx_process_kill(struct sbx_client *c, const char *id, const char *pid,
                     struct sbx_error *err)
{
	return json_call(c, "DELETE", process_url(c, id, pid, ""), NULL, NULL,
	                 err);
}

int sbx_process_logs(struct sbx_client *c, const char *id, const char *pid,
                     struct sbx_exec_result *r, struct sbx_error *err)
{
	json_t *ans = NULL;
	if (json_call(c, "GET", process_url(c, id, pid, "/logs"), NULL, &ans,
	              err))
		return -1;
	memset(r, 0, sizeof(*r));
	take_bytes(ans, "stdout", &r->out, &r->out_len);
	take_bytes(ans, "stderr", &r->err, &r->err_len);
	r->truncated = json_is_true(json_object_get(ans, "truncated"));
	json_decref(ans);
	return 0;
}

int sbx_process_stream(struct sbx_client *c, const char *id, const char *pid,
                       uint64_t cursor, sbx_output_cb cb, void *ud,
                       int *exit_code, struct sbx_error *err)
{
	char rest[48];
	snprintf(rest, sizeof(rest), "/stream?cursor=%llu",
	         (unsigned long long)cursor);
	struct sbx_exec_result r = {0};
	struct call k = {.method = "GET", .url = process_url(c, id, pid, rest)};
	int rc = run_output_stream(c, &k, cb, ud, &r, err);
	if (rc == 0 && exit_code)
		*exit_code = r.exit_code;
	sbx_exec_result_clear(&r);
	return rc;
}

struct membuf {
	const char *p;
	size_t left;
};

static ssize_t mem_read(void *ud, void *buf, size_t len)
{
	struct membuf *m = ud;
	size_t n = len < m->left ? len : m->left;
	memcpy(buf, m->p, n);
	m->p += n;
	m->left -= n;
	return (ssize_t)n;
}

int sbx_process_stdin(struct sbx_client *c, const char *id, const char *pid,
                      const void *data, size_t len, struct sbx_error *err)
{
	struct membuf m = {data, len};
	struct call k = {.method = "POST",
	                 .url = process_url(c, id, pid, "/stdin"),
	                 .content_type = "application/octet-stream",
	                 .src = mem_read,
	                 .src_ud = &m,
	                 .src_size = len};
	return call_whole(c, &k, NULL, NULL, err);
}

/* ---- the code interpreter ---- */

int sbx_context_create(struct sbx_client *c, const char *id,
                       const char *language, const char *cwd, char **cid,
                       struct sbx_error *err)
{
	json_t *b = json_object();
	if (language)
		json_object_set_new(b, "language", json_string(language));
	if (cwd)
		json_object_set_new(b, "cwd", json_string(cwd));
	return json_create(c, url_sandbox(c, id, "/contexts"), b, "context",
	                   cid, err);
}

static char *context_url(struct sbx_client *c, const char *id, const char *cid,
                         const char *rest)
{
	return url_sandbox_item(c, id, "/contexts", cid, rest);
}

int sbx_context_delete(struct sbx_client *c, const char *id, const char *cid,
                       struct sbx_error *err)
{
	return json_call(c, "DELETE", context_url(c, id, cid, ""), NULL, NULL,
	                 err);
}

struct cellstream {
	sbx_event_cb cb;
	void *ud;
	bool done;
};

static int on_cell_event(void *ud, const char *event, const char *data,
                         size_t len, const char *id)
{
	struct cellstream *s = ud;
	(void)len;
	(void)id;
	if (!strcmp(event, "done"))
		s->done = true;
	return s->cb ? s->cb(s->ud, event, data) : 0;
}

int sbx_context_run(struct sbx_client *c, const char *id, const char *cid,
                    const char *code, uint64_t timeout_ms, sbx_event_cb cb,
                    void *ud, struct sbx_error *err)
{
	json_t *b = json_object();
	json_object_set_new(b, "code", json_string(code ? code : ""));
	if (timeout_ms)
		json_object_set_new(b, "timeoutMs",
		                    json_integer((json_int_t)timeout_ms));
	char *text = dump(b, err);
	if (!text)
		return -1;
	struct cellstream s = {.cb = cb, .ud = ud};
	struct call k = {.method = "POST",
	                 .url = context_url(c, id, cid, "/run"),
	                 .mode = CALL_SSE,
	                 .accept = "text/event-stream",
	                 .body = text,
	                 .body_len = strlen(text),
	                 .on_event = on_cell_event,
	                 .ev_ud = &s};
	int rc = call_run(c, &k, err);
	free(text);
	if (rc == 0 && !s.done) {
		sbx_err_set(err, 0, "protocol",
		            "the stream ended before the cell did");
		rc = -1;
	}
	return rc;
}
