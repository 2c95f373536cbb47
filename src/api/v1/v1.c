/* /v1 (shared/spec/v1.md): sandboxes, exec, sessions, and what the other
 * /v1 files share (errors, bodies, the exec fields of a request). Errors
 * are {"error": "<message>", "code": "<stable code>"}. */
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <dirent.h>
#include <unistd.h>

#include "api/api.h"
#include "core/exec.h"
#include "core/process.h"
#include "core/snapshot.h"
#include "api/source.h"
#include "lib/base64.h"
#include "lib/log.h"
#include "lib/path.h"
#include "lib/util.h"


void v1_error(struct http_req *r, unsigned status, const char *code,
	      const char *fmt, ...)
{
	char msg[700];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	http_respond_json(r, status,
			  json_pack("{s:s, s:s}", "error", msg, "code", code));
}

json_t *v1_body(struct http_req *r)
{
	json_error_t jerr;
	if (!r->body.len)
		return json_object();
	json_t *j = json_loadb(r->body.data, r->body.len, 0, &jerr);
	if (!j) {
		v1_error(r, 400, "invalid_request", "invalid JSON: %s (line %d)",
			 jerr.text, jerr.line);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		v1_error(r, 400, "invalid_request",
			 "the body must be a JSON object");
		return NULL;
	}
	return j;
}

struct sandbox *v1_sandbox(struct api *a, struct http_req *r,
			   struct route_match *m, bool create)
{
	const char *id = m->params[0];
	struct sbx_err err = {0};
	if (!sandbox_id_valid(id)) {
		v1_error(r, 400, "invalid_request",
			 "sandbox id must be 1-63 characters of [a-z0-9-]");
		return NULL;
	}
	struct sandbox *sb = manager_find(a->m, m->tenant, id);
	if (sb) {
		sandbox_touch(sb);
		return sb;
	}
	if (!create) {
		v1_error(r, 404, "sandbox_not_found", "no sandbox %s", id);
		return NULL;
	}
	if (manager_create(a->m, m->tenant, id, NULL, &sb, &err) < 0) {
		v1_error(r, err.code == ENOSPC ? 429 : 500,
			 err.code == ENOSPC ? "limit" : "internal", "%s", err.msg);
		return NULL;
	}
	return sb;
}

struct session *v1_session(struct http_req *r, struct sandbox *sb)
{
	const char *sid = http_header(r, "Session-Id");
	struct session *s = sandbox_session(sb, sid && *sid ? sid : NULL);
	if (!s)
		v1_error(r, 404, "session_not_found", "no session %s", sid);
	return s;
}

/* ---- sandboxes ---------------------------------------------------------- */

static json_t *limits_json(struct api *a, const struct sandbox *sb)
{
	const struct cgroup_limits *d = &a->m->cfg->limits;
	uint64_t mem = sb->limits.memory_bytes ?: d->memory_bytes;
	uint32_t pids = sb->limits.pids ?: d->pids;
	uint32_t cpu = sb->limits.cpu_millis ?: d->cpu_millis;
	uint64_t disk = sb->disk_bytes ?: a->m->cfg->disk_bytes;
	json_t *j = json_pack("{s:I, s:i, s:f}", "memoryMB",
			      (json_int_t)(mem >> 20), "pids", (int)pids, "cpus",
			      cpu / 1000.0);
	/* a limit only where the store enforces one */
	if (a->m->rt->store->quotas && disk)
		json_object_set_new(j, "diskMB", json_integer((json_int_t)(disk >> 20)));
	return j;
}

json_t *v1_sandbox_json(struct api *a, struct sandbox *sb, bool usage)
{
	char created[32], active[32];
	iso8601_ms(sb->created_ms, created, sizeof(created));
	iso8601_ms(sb->last_active_ms, active, sizeof(active));
	uint64_t sleep = sb->sleep_after_ms ?: a->m->cfg->sleep_after_ms;
	json_t *j = json_pack(
		"{s:s, s:s, s:s, s:s, s:o, s:I, s:b}", "id", sb->id, "state",
		sb->state == SB_STOPPED ? "stopped" : "running", "createdAt",
		created, "lastActiveAt", active, "limits", limits_json(a, sb),
		"sleepAfterMs", (json_int_t)sleep, "keepAlive", sb->keep_alive);
	json_t *labels = sb->labels ? json_loads(sb->labels, 0, NULL) : NULL;
	json_object_set_new(j, "labels", labels ? labels : json_object());
	if (usage) {
		struct cgroup_stats st = {0};
		if (sb->proc.cg)
			cgroup_sandbox_stats(sb->proc.cg, &st);
		json_t *u = json_pack("{s:I, s:I, s:i, s:I}", "memoryBytes",
				      (json_int_t)st.memory_bytes, "cpuMs",
				      (json_int_t)(st.cpu_usec / 1000), "pids",
				      (int)st.pids, "oomKills",
				      (json_int_t)st.oom_kills);
		uint64_t disk;
		if (sandbox_disk_usage(sb, &disk) == 0)
			json_object_set_new(u, "diskBytes",
					    json_integer((json_int_t)disk));
		json_object_set_new(j, "usage", u);
	}
	return j;
}

/* "10m", 600 (seconds), or absent. */
static int parse_sleep(json_t *v, uint64_t *ms)
{
	if (!v)
		return 0;
	if (json_is_integer(v) && json_integer_value(v) > 0) {
		*ms = (uint64_t)json_integer_value(v) * 1000;
		return 0;
	}
	if (json_is_string(v) && parse_duration_ms(json_string_value(v), ms) == 0 &&
	    *ms > 0)
		return 0;
	return -1;
}

static int parse_limits(json_t *l, struct cgroup_limits *out,
			uint64_t *disk_bytes, char *why, size_t whylen)
{
	if (!l)
		return 0;
	if (!json_is_object(l)) {
		snprintf(why, whylen, "limits must be an object");
		return -1;
	}
	json_t *mem = json_object_get(l, "memoryMB"),
	       *pids = json_object_get(l, "pids"),
	       *cpus = json_object_get(l, "cpus"),
	       *disk = json_object_get(l, "diskMB");
	if (mem && (!json_is_integer(mem) || json_integer_value(mem) < 16 ||
		    json_integer_value(mem) > (1 << 24))) {
		snprintf(why, whylen, "limits.memoryMB: an integer from 16");
		return -1;
	}
	if (pids && (!json_is_integer(pids) || json_integer_value(pids) < 8 ||
		     json_integer_value(pids) > 4194304)) {
		snprintf(why, whylen, "limits.pids: an integer from 8");
		return -1;
	}
	if (cpus && (!json_is_number(cpus) || json_number_value(cpus) < 0.01 ||
		     json_number_value(cpus) > 1024)) {
		snprintf(why, whylen, "limits.cpus: a number from 0.01");
		return -1;
	}
	if (disk && (!json_is_integer(disk) || json_integer_value(disk) < 1)) {
		snprintf(why, whylen, "limits.diskMB: a positive integer");
		return -1;
	}
	if (mem)
		out->memory_bytes = (uint64_t)json_integer_value(mem) << 20;
	if (pids)
		out->pids = (uint32_t)json_integer_value(pids);
	if (cpus)
		out->cpu_millis = (uint32_t)(json_number_value(cpus) * 1000 + 0.5);
	if (disk)
		*disk_bytes = (uint64_t)json_integer_value(disk) << 20;
	return 0;
}

/* {"K": "V"} into "K=V" strings (allocated in *hold). */
static int parse_env(json_t *env, const char ***out, size_t *n, char *why,
		     size_t whylen)
{
	*out = NULL;
	*n = 0;
	if (!env)
		return 0;
	if (!json_is_object(env)) {
		snprintf(why, whylen, "env must be an object of strings");
		return -1;
	}
	size_t cnt = json_object_size(env);
	const char **v = calloc(cnt + 1, sizeof(char *));
	if (!v)
		return -1;
	const char *k;
	json_t *val;
	json_object_foreach(env, k, val)
	{
		if (!json_is_string(val) || !*k || strchr(k, '=') ||
		    strlen(k) > 4096) {
			snprintf(why, whylen, "env.%.100s: a string value and a "
					      "name without '='", k);
			for (size_t i = 0; i < *n; i++)
				free((void *)v[i]);
			free(v);
			return -1;
		}
		char *kv;
		if (asprintf(&kv, "%s=%s", k, json_string_value(val)) < 0)
			break;
		v[(*n)++] = kv;
	}
	*out = v;
	return 0;
}

static void free_env(const char **env, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free((void *)env[i]);
	free(env);
}

void v1_sandbox_create(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sbx_err err = {0};
	char why[300], idbuf[32];
	json_t *body = v1_body(r);
	if (!body)
		return;
	struct sandbox_opts o = {0};
	json_t *id = json_object_get(body, "id"),
	       *ka = json_object_get(body, "keepAlive"),
	       *labels = json_object_get(body, "labels"),
	       *from = json_object_get(body, "fromSnapshot");
	const char **env = NULL;
	size_t envc = 0;
	char *labels_txt = NULL;
	if (id && (!json_is_string(id) || !sandbox_id_valid(json_string_value(id)))) {
		v1_error(r, 400, "invalid_request",
			 "id must be 1-63 characters of [a-z0-9-]");
		goto out;
	}
	if (parse_sleep(json_object_get(body, "sleepAfter"), &o.sleep_after_ms)) {
		v1_error(r, 400, "invalid_request",
			 "sleepAfter: a duration like \"10m\" or seconds");
		goto out;
	}
	if (ka && !json_is_boolean(ka)) {
		v1_error(r, 400, "invalid_request", "keepAlive must be a boolean");
		goto out;
	}
	o.keep_alive = ka && json_is_true(ka);
	if (from && !json_is_string(from)) {
		v1_error(r, 400, "invalid_request",
			 "fromSnapshot: a snapshot id string");
		goto out;
	}
	if (parse_limits(json_object_get(body, "limits"), &o.limits,
			 &o.disk_bytes, why, sizeof(why)) ||
	    parse_env(json_object_get(body, "env"), &env, &envc, why,
		      sizeof(why))) {
		v1_error(r, 400, "invalid_request", "%s", why);
		goto out;
	}
	if (labels) {
		if (!json_is_object(labels)) {
			v1_error(r, 400, "invalid_request",
				 "labels must be an object");
			goto out;
		}
		labels_txt = json_dumps(labels, JSON_COMPACT);
	}
	o.env = env;
	o.envc = envc;
	o.labels = labels_txt;
	const char *sid = id ? json_string_value(id) : NULL;
	if (!sid) {
		id_random(idbuf, sizeof(idbuf), "sbx-");
		sid = idbuf;
	}
	struct sandbox *sb;
	if (from) {
		v1_sandbox_create_from(a, r, m, sid, json_string_value(from), &o);
		goto out;
	}
	if (manager_create(a->m, m->tenant, sid, &o, &sb, &err) < 0) {
		if (err.code == EEXIST)
			v1_error(r, 409, "sandbox_exists", "sandbox %s exists", sid);
		else
			v1_error(r, err.code == ENOSPC ? 429 : 500,
				 err.code == ENOSPC ? "limit" : "internal", "%s",
				 err.msg);
		goto out;
	}
	http_respond_json(r, 201, v1_sandbox_json(a, sb, false));
out:
	free_env(env, envc);
	free(labels_txt);
	json_decref(body);
}

struct list_ctx {
	struct api *a;
	const char *tenant;
	json_t *arr;
};

static void list_one(struct sandbox *sb, void *data)
{
	struct list_ctx *c = data;
	if (!strcmp(sb->tenant, c->tenant))
		json_array_append_new(c->arr, v1_sandbox_json(c->a, sb, false));
}

void v1_sandbox_list(struct api *a, struct http_req *r, struct route_match *m)
{
	struct list_ctx c = {a, m->tenant, json_array()};
	manager_foreach(a->m, list_one, &c);
	http_respond_json(r, 200, json_pack("{s:o}", "sandboxes", c.arr));
}

void v1_sandbox_info(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sandbox *sb = v1_sandbox(a, r, m, false);
	if (sb)
		http_respond_json(r, 200, v1_sandbox_json(a, sb, true));
}

void v1_sandbox_running(struct api *a, struct http_req *r,
			struct route_match *m)
{
	if (!sandbox_id_valid(m->params[0])) {
		v1_sandbox(a, r, m, false); /* answers the 400 */
		return;
	}
	struct sandbox *sb = manager_find(a->m, m->tenant, m->params[0]);
	http_respond_json(r, 200, json_pack("{s:b}", "running",
					    sb && sb->state != SB_STOPPED));
}

void v1_sandbox_stop(struct api *a, struct http_req *r, struct route_match *m)
{
	if (!sandbox_id_valid(m->params[0])) {
		v1_sandbox(a, r, m, false);
		return;
	}
	struct sandbox *sb = manager_find(a->m, m->tenant, m->params[0]);
	if (sb)
		sandbox_stop(sb, "stopped by request");
	http_respond_json(r, 200, json_pack("{s:b, s:s}", "stopped", 1, "id",
					    m->params[0]));
}

void v1_sandbox_delete(struct api *a, struct http_req *r,
		       struct route_match *m)
{
	struct sbx_err err = {0};
	if (!sandbox_id_valid(m->params[0])) {
		v1_sandbox(a, r, m, false);
		return;
	}
	struct sandbox *sb = manager_find(a->m, m->tenant, m->params[0]);
	if (sb && sandbox_destroy(sb, &err) < 0) {
		v1_error(r, 500, "internal", "%s", err.msg);
		return;
	}
	/* its snapshots outlive it unless asked (?snapshots=true) */
	const char *snaps = http_query(r, "snapshots");
	if (snaps && (!strcmp(snaps, "1") || !strcmp(snaps, "true")))
		snapshot_delete_of(a->m, m->tenant, m->params[0]);
	http_respond_empty(r, 204);
}

/* ---- exec --------------------------------------------------------------- */

void v1_exec_params_free(struct v1_hold *h)
{
	free(h->argv);
	if (h->env)
		for (const char **e = h->env; *e; e++)
			free((void *)*e);
	free(h->env);
	free(h->stdin_buf);
	memset(h, 0, sizeof(*h));
}

int v1_exec_params(struct http_req *r, json_t *body, struct sandbox *sb,
		   struct session *sess, struct exec_params *p,
		   struct v1_hold *h)
{
	char why[300];
	json_t *argv = json_object_get(body, "argv"),
	       *cmd = json_object_get(body, "command"),
	       *in = json_object_get(body, "stdin"),
	       *in64 = json_object_get(body, "stdinBase64"),
	       *cwd = json_object_get(body, "cwd"),
	       *to = json_object_get(body, "timeoutMs"),
	       *maxo = json_object_get(body, "maxOutputBytes");
	(void)sb;
	memset(p, 0, sizeof(*p));
	memset(h, 0, sizeof(*h));
	if (!argv == !cmd) {
		v1_error(r, 400, "invalid_request",
			 "give exactly one of argv (array) or command (string)");
		return -1;
	}
	if (cmd) {
		if (!json_is_string(cmd) || !json_string_length(cmd)) {
			v1_error(r, 400, "invalid_request",
				 "command must be a non-empty string");
			return -1;
		}
		p->command = json_string_value(cmd);
	} else {
		size_t n = json_is_array(argv) ? json_array_size(argv) : 0;
		if (!n) {
			v1_error(r, 400, "invalid_request",
				 "argv must be a non-empty array of strings");
			return -1;
		}
		h->argv = calloc(n + 1, sizeof(char *));
		for (size_t i = 0; h->argv && i < n; i++) {
			json_t *s = json_array_get(argv, i);
			if (!json_is_string(s) || (i == 0 && !json_string_length(s))) {
				v1_error(r, 400, "invalid_request",
					 "argv[%zu] must be a string", i);
				v1_exec_params_free(h);
				return -1;
			}
			h->argv[i] = json_string_value(s);
		}
		p->argv = h->argv;
	}
	size_t envc;
	if (parse_env(json_object_get(body, "env"), &h->env, &envc, why,
		      sizeof(why))) {
		v1_error(r, 400, "invalid_request", "%s", why);
		v1_exec_params_free(h);
		return -1;
	}
	p->env = h->env;
	p->envc = envc;
	if (in && in64) {
		v1_error(r, 400, "invalid_request",
			 "give stdin or stdinBase64, not both");
		goto bad;
	}
	if (in) {
		if (!json_is_string(in)) {
			v1_error(r, 400, "invalid_request", "stdin must be a string");
			goto bad;
		}
		p->stdin_data = json_string_value(in);
		p->stdin_len = json_string_length(in);
	} else if (in64) {
		size_t l = json_is_string(in64) ? json_string_length(in64) : 1;
		h->stdin_buf = malloc(l / 4 * 3 + 1);
		ssize_t n = h->stdin_buf && json_is_string(in64)
				    ? base64_decode(json_string_value(in64), l,
						    h->stdin_buf)
				    : -1;
		if (n < 0) {
			v1_error(r, 400, "invalid_request",
				 "stdinBase64 must be padded base64");
			goto bad;
		}
		p->stdin_data = h->stdin_buf;
		p->stdin_len = (size_t)n;
	}
	if (cwd) {
		char rel[4096];
		if (!json_is_string(cwd)) {
			v1_error(r, 400, "invalid_request", "cwd must be a string");
			goto bad;
		}
		/* relative to the session's cwd, and never outside
		 * /workspace (as in the Bridge) */
		const char *c = json_string_value(cwd);
		char joined[8300];
		if (c[0] != '/')
			snprintf(joined, sizeof(joined), "%s/%s", sess->cwd, c);
		else
			snprintf(joined, sizeof(joined), "%s", c);
		int v = path_beneath("/workspace", joined, rel, sizeof(rel));
		if (v == PATH_OUTSIDE) {
			v1_error(r, 403, "path_outside_workspace",
				 "cwd must be inside /workspace");
			goto bad;
		}
		if (v) {
			v1_error(r, 400, "invalid_request", "cwd is not a valid path");
			goto bad;
		}
		snprintf(h->cwd, sizeof(h->cwd), "/workspace%s%s", *rel ? "/" : "",
			 rel);
		p->cwd = h->cwd;
	}
	if (to) {
		if (!json_is_integer(to) || json_integer_value(to) <= 0) {
			v1_error(r, 400, "invalid_request",
				 "timeoutMs must be a positive integer");
			goto bad;
		}
		p->timeout_ms = (uint64_t)json_integer_value(to);
	}
	if (maxo) {
		if (!json_is_integer(maxo) || json_integer_value(maxo) <= 0) {
			v1_error(r, 400, "invalid_request",
				 "maxOutputBytes must be a positive integer");
			goto bad;
		}
		p->max_output = (uint64_t)json_integer_value(maxo);
	}
	return 0;
bad:
	v1_exec_params_free(h);
	return -1;
}

struct v1_exec {
	struct api_exec x; /* first; x.rl NULL: one JSON answer */
	struct api *a;
	struct http_req *r;
	uint64_t max_output, sent[3];
	bool truncated[3];
};

static int exec_output(void *ctx, int fd, const char *data, size_t len)
{
	struct v1_exec *e = ctx;
	if (e->sent[fd] + len > e->max_output) { /* maxOutputBytes per stream */
		len = e->sent[fd] < e->max_output ? e->max_output - e->sent[fd] : 0;
		e->truncated[fd] = true;
	}
	e->sent[fd] += len;
	e->a->metrics.bytes_streamed += len;
	return len ? relay_event_b64(e->x.rl, fd == 1 ? "stdout" : "stderr",
				     UINT64_MAX, data, len)
		   : 0;
}


static void exec_done(const struct exec_result *res, void *ctx)
{
	struct v1_exec *e = ctx;
	bool timed_out = res->failure == EXEC_TIMEOUT;
	int code = timed_out ? 124 : res->exit_code;
	e->x.job = NULL;
	metrics_exec_done(e->a, res->duration_ms,
			  res->failure != EXEC_OK && !timed_out);
	bool failed = res->failure == EXEC_NOT_STARTED ||
		      res->failure == EXEC_STOPPED;
	json_t *sig = res->signo && !timed_out
			      ? json_string(sigabbrev_np(res->signo))
			      : json_null();
	if (!e->x.rl) {
		if (failed) {
			json_decref(sig);
			v1_error(e->r, 500, "exec_failed", "%s", res->msg);
		} else {
			json_t *j = json_pack(
				"{s:i, s:o, s:o, s:b, s:{s:b, s:b}, s:I, s:o}",
				"exitCode", code, "stdout",
				json_bytes(res->out.data, res->out.len), "stderr",
				json_bytes(res->err.data, res->err.len), "timedOut",
				timed_out, "truncated", "stdout",
				res->out.dropped > 0, "stderr", res->err.dropped > 0,
				"durationMs", (json_int_t)res->duration_ms, "signal",
				sig);
			http_respond_json(e->r, 200, j);
		}
	} else {
		if (failed) {
			json_decref(sig);
			relay_event_json(e->x.rl, "error",
					 json_pack("{s:s, s:s}", "error", res->msg,
						   "code", "exec_failed"));
		} else {
			relay_event_json(
				e->x.rl, "exit",
				json_pack("{s:i, s:b, s:b, s:o}", "exit_code", code,
					  "timed_out", timed_out, "truncated",
					  e->truncated[1] || e->truncated[2],
					  "signal", sig));
		}
		relay_end(e->x.rl);
	}
	free(e);
}

bool v1_wants_json(struct http_req *r)
{
	const char *acc = http_header(r, "Accept");
	return acc && strstr(acc, "application/json") &&
	       !strstr(acc, "text/event-stream");
}

json_t *v1_exec_request(struct api *a, struct http_req *r,
			struct route_match *m, struct sandbox **sb,
			struct session **sess, struct exec_params *p,
			struct v1_hold *hold)
{
	json_t *body = v1_body(r);
	if (!body)
		return NULL;
	*sb = v1_sandbox(a, r, m, true);
	*sess = *sb ? v1_session(r, *sb) : NULL;
	if (!*sess || v1_exec_params(r, body, *sb, *sess, p, hold) < 0) {
		json_decref(body);
		return NULL;
	}
	return body;
}

void v1_exec(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sbx_err err = {0};
	struct sandbox *sb;
	struct session *sess;
	struct exec_params p;
	struct v1_hold hold;
	json_t *body = v1_exec_request(a, r, m, &sb, &sess, &p, &hold);
	if (!body)
		return;
	struct v1_exec *e = calloc(1, sizeof(*e));
	if (!e) {
		v1_error(r, 500, "internal", "out of memory");
		goto out;
	}
	e->a = a;
	e->r = r;
	a->metrics.execs++;
	if (!v1_wants_json(r)) {
		e->max_output = p.max_output ? p.max_output : UINT64_MAX;
		p.on_output = exec_output;
		e->x.rl = relay_open(r, a->m->loop, NULL, &api_exec_relay, e);
		if (!e->x.rl) {
			free(e);
			goto out;
		}
	} else {
		http_suspend(r);
	}
	if (exec_submit(sb, sess, &p, exec_done, e, &e->x.job, &err) < 0) {
		struct exec_result res = {.failure = EXEC_NOT_STARTED};
		snprintf(res.msg, sizeof(res.msg), "%s", err.msg);
		exec_done(&res, e);
	}
out:
	v1_exec_params_free(&hold);
	json_decref(body);
}

/* ---- sessions ----------------------------------------------------------- */

void v1_session_create(struct api *a, struct http_req *r, struct route_match *m)
{
	char why[300], id[40], rel[4096], cwd[4200];
	json_t *body = v1_body(r);
	if (!body)
		return;
	struct sandbox *sb = v1_sandbox(a, r, m, true);
	const char **env = NULL;
	size_t envc = 0;
	json_t *c = json_object_get(body, "cwd");
	if (!sb)
		goto out;
	if (parse_env(json_object_get(body, "env"), &env, &envc, why,
		      sizeof(why))) {
		v1_error(r, 400, "invalid_request", "%s", why);
		goto out;
	}
	snprintf(cwd, sizeof(cwd), "/workspace");
	if (c) {
		int v = json_is_string(c) ? path_beneath("/workspace",
							 json_string_value(c), rel,
							 sizeof(rel))
					  : PATH_INVALID;
		if (v == PATH_OUTSIDE) {
			v1_error(r, 403, "path_outside_workspace",
				 "cwd must be inside /workspace");
			goto out;
		}
		if (v) {
			v1_error(r, 400, "invalid_request", "cwd must be a path");
			goto out;
		}
		snprintf(cwd, sizeof(cwd), "/workspace%s%s", *rel ? "/" : "", rel);
	}
	id_random(id, sizeof(id), "sess_");
	struct session *s;
	if (sandbox_session_new(sb, id, cwd, env, envc, &s) < 0) {
		v1_error(r, 500, "internal", "out of memory");
		goto out;
	}
	http_respond_json(r, 201, json_pack("{s:s, s:s}", "id", id, "cwd", cwd));
out:
	free_env(env, envc);
	json_decref(body);
}

void v1_session_delete(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sandbox *sb = v1_sandbox(a, r, m, false);
	if (!sb)
		return;
	int rc = sandbox_session_delete(sb, m->params[1]);
	if (rc == -ENOENT)
		v1_error(r, 404, "session_not_found", "no session %s",
			 m->params[1]);
	else if (rc == -EBUSY)
		v1_error(r, 409, "session_busy",
			 "session %s is running a command", m->params[1]);
	else
		http_respond_empty(r, 204);
}
