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
#include "core/images.h"
#include "core/env.h"
#include "core/exec.h"
#include "core/network.h"
#include "core/process.h"
#include "core/snapshot.h"
#include "api/source.h"
#include "http/jsonout.h"
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

void *v1_held_new(struct api *a, struct http_req *r, size_t size)
{
	struct v1_held *q = calloc(1, size);
	if (!q) {
		v1_error(r, 500, "internal", "out of memory");
		return NULL;
	}
	q->a = a;
	http_hold(&q->held, r, NULL, NULL);
	return q;
}

json_t *v1_body(struct http_req *r)
{
	json_error_t jerr;
	if (!r->body.len)
		return json_object();
	json_t *j = json_loadb(r->body.data, r->body.len, 0, &jerr);
	if (!j) {
		v1_error(r, 400, "invalid_request",
		         "invalid JSON: %s (line %d)", jerr.text, jerr.line);
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

const struct v1_errmap *v1_err_row(const struct v1_errmap *map,
                                   const struct sbx_err *err)
{
	while (map->errnum && map->errnum != err->code)
		map++;
	return map;
}

void v1_error_of(struct http_req *r, const struct sbx_err *err,
                 const struct v1_errmap *map)
{
	const struct v1_errmap *row = v1_err_row(map, err);
	v1_error(r, row->status, row->code, "%s", err->msg);
}

const struct v1_errmap v1_create_errs[] = {
    {EDQUOT, 429, "quota_exceeded"},
    {ENOSPC, 429, "limit"},
    V1_ERR_INTERNAL,
};

void v1_create_error(struct http_req *r, const struct sbx_err *err)
{
	v1_error_of(r, err, v1_create_errs);
}

/* A sandbox to use: as a create, and a network that cannot be set up. */
static const struct v1_errmap sandbox_errs[] = {
    {ENETDOWN, 503, "network_unavailable"},
    {EDQUOT, 429, "quota_exceeded"},
    {ENOSPC, 429, "limit"},
    V1_ERR_INTERNAL,
};

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
		v1_create_error(r, &err);
		return NULL;
	}
	return sb;
}

struct sandbox *v1_sandbox_to_run(struct api *a, struct http_req *r,
                                  struct route_match *m)
{
	struct sbx_err err = {0};
	bool existed = manager_find(a->m, m->tenant, m->params[0]) != NULL;
	struct sandbox *sb = v1_sandbox(a, r, m, true);
	if (!sb)
		return NULL;
	int rc = manager_admit(sb, &err);
	/* a sandbox with a network starts here, so that a network that
	 * cannot be set up is a 503 that says why */
	if (rc == 0 && !sandbox_running(sb) && sandbox_net_mode(sb) != NET_NONE)
		rc = sandbox_ensure_started(sb, &err);
	if (rc == 0)
		return sb;
	if (!existed) /* a refused request leaves nothing behind */
		sandbox_destroy(sb, NULL);
	v1_error_of(r, &err, sandbox_errs);
	return NULL;
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
	struct cgroup_limits lim;
	uint64_t disk;
	sandbox_limits(sb, &lim, &disk);
	json_t *j = json_pack("{s:I, s:i, s:f}", "memoryMB",
	                      (json_int_t)(lim.memory_bytes >> 20), "pids",
	                      (int)lim.pids, "cpus", lim.cpu_millis / 1000.0);
	/* a limit only where the store enforces one */
	if (a->m->rt->store->quotas && disk)
		json_object_set_new(j, "diskMB",
		                    json_integer((json_int_t)(disk >> 20)));
	return j;
}

json_t *v1_sandbox_json(struct api *a, struct sandbox *sb, bool usage)
{
	char created[32], active[32];
	struct sandbox_info in;
	sandbox_info(sb, &in);
	iso8601_ms(in.created_ms, created, sizeof(created));
	iso8601_ms(in.last_active_ms, active, sizeof(active));
	json_t *j = json_pack(
	    "{s:s, s:s, s:s, s:s, s:o, s:I, s:b}", "id", sandbox_id(sb),
	    "state", in.running ? "running" : "stopped", "createdAt", created,
	    "lastActiveAt", active, "limits", limits_json(a, sb),
	    "sleepAfterMs", (json_int_t)in.sleep_after_ms, "keepAlive",
	    in.keep_alive);
	json_t *labels =
	    sandbox_labels(sb) ? json_loads(sandbox_labels(sb), 0, NULL) : NULL;
	json_object_set_new(j, "labels", labels ? labels : json_object());
	json_object_set_new(j, "network", v1_network_json(sb));
	if (in.image_id[0]) {
		const char *names[1];
		size_t n =
		    in.image ? images_names_of(a->m->images, in.image, names, 1)
		             : 0;
		json_object_set_new(j, "image",
		                    json_pack("{s:s?, s:s}", "name",
		                              n ? names[0] : NULL, "digest",
		                              in.image_id));
		const char *sh = sandbox_shell(sb);
		if (!sh || strcmp(sh, "/bin/bash"))
			json_object_set_new(
			    j, "note",
			    json_string(sh ? "no bash in its image: shell "
			                     "commands run with /bin/sh "
			                     "and sessions do not carry "
			                     "cwd and exported variables"
			                   : "no shell in its image: "
			                     "commands run as argv only"));
	}
	if (usage) {
		struct cgroup_stats st = {0};
		sandbox_stats(sb, &st);
		json_t *u = json_pack("{s:I, s:I, s:i, s:I}", "memoryBytes",
		                      (json_int_t)st.memory_bytes, "cpuMs",
		                      (json_int_t)(st.cpu_usec / 1000), "pids",
		                      (int)st.pids, "oomKills",
		                      (json_int_t)st.oom_kills);
		uint64_t disk, tx, rx;
		sandbox_net_usage(sb, &tx, &rx);
		json_object_set_new(u, "netTxBytes",
		                    json_integer((json_int_t)tx));
		json_object_set_new(u, "netRxBytes",
		                    json_integer((json_int_t)rx));
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
	if (json_is_string(v) &&
	    parse_duration_ms(json_string_value(v), ms) == 0 && *ms > 0)
		return 0;
	return -1;
}

/* A client's limits: 400 invalid_request for a wrong type or a value
 * below the minimum, 400 limit_exceeds_ceiling (naming the flag) above
 * the operator's ceiling: never clamped. -1 after answering. */
static int parse_limits(struct api *a, struct http_req *r, json_t *l,
                        struct cgroup_limits *out, uint64_t *disk_bytes)
{
	const struct config *cfg = a->m->cfg;
	if (!l)
		return 0;
	if (!json_is_object(l)) {
		v1_error(r, 400, "invalid_request", "limits must be an object");
		return -1;
	}
	json_t *mem = json_object_get(l, "memoryMB"),
	       *pids = json_object_get(l, "pids"),
	       *cpus = json_object_get(l, "cpus"),
	       *disk = json_object_get(l, "diskMB");
	if (mem && (!json_is_integer(mem) || json_integer_value(mem) < 16)) {
		v1_error(r, 400, "invalid_request",
		         "limits.memoryMB: an integer from 16");
		return -1;
	}
	if (pids && (!json_is_integer(pids) || json_integer_value(pids) < 8)) {
		v1_error(r, 400, "invalid_request",
		         "limits.pids: an integer from 8");
		return -1;
	}
	if (cpus && (!json_is_number(cpus) || json_number_value(cpus) < 0.01)) {
		v1_error(r, 400, "invalid_request",
		         "limits.cpus: a number from 0.01");
		return -1;
	}
	if (disk && (!json_is_integer(disk) || json_integer_value(disk) < 1)) {
		v1_error(r, 400, "invalid_request",
		         "limits.diskMB: a positive integer");
		return -1;
	}
	uint64_t cmem = cfg->max_limits.memory_bytes >> 20,
	         cdisk = cfg->max_disk >> 20;
	if (mem && (uint64_t)json_integer_value(mem) > cmem) {
		v1_error(r, 400, "limit_exceeds_ceiling",
		         "limits.memoryMB: %" JSON_INTEGER_FORMAT " is above "
		         "this daemon's ceiling of %" PRIu64 " (--max-memory)",
		         json_integer_value(mem), cmem);
		return -1;
	}
	if (pids && (uint64_t)json_integer_value(pids) > cfg->max_limits.pids) {
		v1_error(r, 400, "limit_exceeds_ceiling",
		         "limits.pids: %" JSON_INTEGER_FORMAT " is above this "
		         "daemon's ceiling of %u (--max-pids)",
		         json_integer_value(pids), cfg->max_limits.pids);
		return -1;
	}
	if (cpus &&
	    json_number_value(cpus) * 1000 > cfg->max_limits.cpu_millis + 0.5) {
		v1_error(r, 400, "limit_exceeds_ceiling",
		         "limits.cpus: %g is above this daemon's ceiling of "
		         "%g (--max-cpus)",
		         json_number_value(cpus),
		         cfg->max_limits.cpu_millis / 1000.0);
		return -1;
	}
	if (disk && (uint64_t)json_integer_value(disk) > cdisk) {
		v1_error(r, 400, "limit_exceeds_ceiling",
		         "limits.diskMB: %" JSON_INTEGER_FORMAT
		         " is above this "
		         "daemon's ceiling of %" PRIu64 " (--max-disk)",
		         json_integer_value(disk), cdisk);
		return -1;
	}
	if (mem)
		out->memory_bytes = (uint64_t)json_integer_value(mem) << 20;
	if (pids)
		out->pids = (uint32_t)json_integer_value(pids);
	if (cpus)
		out->cpu_millis =
		    (uint32_t)(json_number_value(cpus) * 1000 + 0.5);
	if (disk)
		*disk_bytes = (uint64_t)json_integer_value(disk) << 20;
	return 0;
}

int v1_cwd(struct http_req *r, json_t *cwd, const char *from, char **out)
{
	*out = NULL;
	if (!cwd || json_is_null(cwd))
		return 0;
	if (!json_is_string(cwd)) {
		v1_error(r, 400, "invalid_request", "cwd must be a string");
		return -1;
	}
	int v =
	    path_join_beneath("/workspace", from, json_string_value(cwd), out);
	if (v == PATH_OUTSIDE)
		v1_error(r, 403, "path_outside_workspace",
		         "cwd must be inside /workspace");
	else if (v == -ENOMEM)
		v1_error(r, 500, "internal", "out of memory");
	else if (v)
		v1_error(r, 400, "invalid_request", "cwd is not a valid path");
	return v ? -1 : 0;
}

int v1_env(struct http_req *r, json_t *env, char ***out, size_t *n)
{
	const char *bad;
	int e = env_from_json(env, out, n, &bad);
	if (e == -ENOMEM)
		v1_error(r, 500, "internal", "out of memory");
	else if (e < 0 && !bad)
		v1_error(r, 400, "invalid_request",
		         "env must be an object of strings");
	else if (e < 0)
		v1_error(r, 400, "invalid_request",
		         "env.%.100s: a string value and a name of letters, "
		         "digits and _ (not a digit first)",
		         bad);
	return e < 0 ? -1 : 0;
}

void v1_sandbox_create(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sbx_err err = {0};
	char idbuf[32];
	json_t *body = v1_body(r);
	if (!body)
		return;
	struct sandbox_opts o = {0};
	json_t *id = json_object_get(body, "id"),
	       *ka = json_object_get(body, "keepAlive"),
	       *labels = json_object_get(body, "labels"),
	       *from = json_object_get(body, "fromSnapshot");
	char **env = NULL;
	size_t envc = 0;
	char *labels_txt = NULL;
	struct net_policy net = {0};
	json_t *netj = json_object_get(body, "network");
	if (id &&
	    (!json_is_string(id) || !sandbox_id_valid(json_string_value(id)))) {
		v1_error(r, 400, "invalid_request",
		         "id must be 1-63 characters of [a-z0-9-]");
		goto out;
	}
	if (parse_sleep(json_object_get(body, "sleepAfter"),
	                &o.sleep_after_ms)) {
		v1_error(r, 400, "invalid_request",
		         "sleepAfter: a duration like \"10m\" or seconds");
		goto out;
	}
	json_t *image = json_object_get(body, "image");
	if (image && !json_is_null(image)) {
		if (!json_is_string(image)) {
			v1_error(r, 400, "invalid_request",
			         "image: an image name or digest string");
			goto out;
		}
		o.image = images_find(a->m->images, json_string_value(image));
		if (!o.image) {
			v1_error(r, 404, "image_not_found", "no image %s",
			         json_string_value(image));
			goto out;
		}
		if (from) {
			v1_error(r, 400, "invalid_request",
			         "image and fromSnapshot: a sandbox from a "
			         "snapshot has its snapshot's image");
			goto out;
		}
	}
	if (ka && !json_is_boolean(ka)) {
		v1_error(r, 400, "invalid_request",
		         "keepAlive must be a boolean");
		goto out;
	}
	o.keep_alive = ka && json_is_true(ka);
	if (from && !json_is_string(from)) {
		v1_error(r, 400, "invalid_request",
		         "fromSnapshot: a snapshot id string");
		goto out;
	}
	if (parse_limits(a, r, json_object_get(body, "limits"), &o.limits,
	                 &o.disk_bytes) < 0)
		goto out;
	if (v1_env(r, json_object_get(body, "env"), &env, &envc) < 0)
		goto out;
	if (labels) {
		if (!json_is_object(labels)) {
			v1_error(r, 400, "invalid_request",
			         "labels must be an object");
			goto out;
		}
		labels_txt = json_dumps(labels, JSON_COMPACT);
	}
	if (netj && !json_is_null(netj)) {
		if (v1_network_parse(r, netj, &net) < 0)
			goto out;
		o.net = &net;
	}
	o.env = (const char *const *)env;
	o.envc = envc;
	o.labels = labels_txt;
	const char *sid = id ? json_string_value(id) : NULL;
	if (!sid) {
		id_random(idbuf, sizeof(idbuf), "sbx-");
		sid = idbuf;
	}
	struct sandbox *sb;
	if (from) {
		v1_sandbox_create_from(a, r, m, sid, json_string_value(from),
		                       &o);
		goto out;
	}
	if (manager_create(a->m, m->tenant, sid, &o, &sb, &err) < 0) {
		if (err.code == EEXIST)
			v1_error(r, 409, "sandbox_exists", "sandbox %s exists",
			         sid);
		else
			v1_create_error(r, &err);
		goto out;
	}
	http_respond_json(r, 201, v1_sandbox_json(a, sb, false));
out:
	net_policy_clear(&net);
	env_free(env);
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
	if (!strcmp(sandbox_tenant(sb), c->tenant))
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
	http_respond_json(
	    r, 200, json_pack("{s:b}", "running", sb && sandbox_running(sb)));
}

struct v1_stop_req {
	struct v1_held h; /* first */
	char id[64];
};

static void v1_stopped(void *ctx)
{
	struct v1_stop_req *q = ctx;
	struct http_req *r = http_take(&q->h.held);
	if (r)
		http_respond_json(
		    r, 200, json_pack("{s:b, s:s}", "stopped", 1, "id", q->id));
	free(q);
}

void v1_sandbox_stop(struct api *a, struct http_req *r, struct route_match *m)
{
	if (!sandbox_id_valid(m->params[0])) {
		v1_sandbox(a, r, m, false);
		return;
	}
	struct sandbox *sb = manager_find(a->m, m->tenant, m->params[0]);
	struct v1_stop_req *q;
	if (!sb) {
		http_respond_json(
		    r, 200,
		    json_pack("{s:b, s:s}", "stopped", 1, "id", m->params[0]));
		return;
	}
	sandbox_stop(sb, "stopped by request");
	/* answered once its processes are gone */
	if (!(q = v1_held_new(a, r, sizeof(*q))))
		return;
	snprintf(q->id, sizeof(q->id), "%s", m->params[0]);
	sandbox_when_stopped(sb, v1_stopped, q);
}

void v1_sandbox_delete(struct api *a, struct http_req *r, struct route_match *m)
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
	env_free(h->env);
	free(h->cwd);
	free(h->stdin_buf);
	memset(h, 0, sizeof(*h));
}

int v1_exec_params(struct http_req *r, json_t *body, struct sandbox *sb,
                   struct session *sess, struct exec_params *p,
                   struct v1_hold *h)
{
	json_t *argv = json_object_get(body, "argv"),
	       *cmd = json_object_get(body, "command"),
	       *in = json_object_get(body, "stdin"),
	       *in64 = json_object_get(body, "stdinBase64"),
	       *cwd = json_object_get(body, "cwd"),
	       *to = json_object_get(body, "timeoutMs"),
	       *maxo = json_object_get(body, "maxOutputBytes");
	memset(p, 0, sizeof(*p));
	memset(h, 0, sizeof(*h));
	if (!argv == !cmd) {
		v1_error(
		    r, 400, "invalid_request",
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
			if (!json_is_string(s) ||
			    (i == 0 && !json_string_length(s))) {
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
	if (v1_env(r, json_object_get(body, "env"), &h->env, &envc) < 0) {
		v1_exec_params_free(h);
		return -1;
	}
	p->env = (const char *const *)h->env;
	p->envc = envc;
	if (in && in64) {
		v1_error(r, 400, "invalid_request",
		         "give stdin or stdinBase64, not both");
		goto bad;
	}
	if (in) {
		if (!json_is_string(in)) {
			v1_error(r, 400, "invalid_request",
			         "stdin must be a string");
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
	/* relative to the session's cwd, and never outside /workspace (as in
	 * the Bridge) */
	if (v1_cwd(r, cwd, session_cwd(sess), &h->cwd) < 0)
		goto bad;
	p->cwd = h->cwd;
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
		uint64_t ceiling = sandbox_config(sb)->max_output;
		if (p->max_output > ceiling) {
			/* the daemon keeps up to this much per stream: the
			 * operator's bound, never silently lowered */
			v1_error(r, 400, "limit_exceeds_ceiling",
			         "maxOutputBytes %llu is above this daemon's "
			         "ceiling of %llu bytes (--max-output)",
			         (unsigned long long)p->max_output,
			         (unsigned long long)ceiling);
			goto bad;
		}
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
		len = e->sent[fd] < e->max_output ? e->max_output - e->sent[fd]
		                                  : 0;
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
	bool failed =
	    res->failure == EXEC_NOT_STARTED || res->failure == EXEC_STOPPED;
	json_t *sig = res->signo && !timed_out
	                  ? json_string(sigabbrev_np(res->signo))
	                  : json_null();
	if (!e->x.rl) {
		if (failed) {
			json_decref(sig);
			v1_error(e->r, 500, "exec_failed", "%s", res->msg);
		} else {
			/* the output is sent from its buffers, escaped as the
			 * client reads (no second copy, jsonout.h) */
			struct buf out, err;
			exec_result_take(res, &out, &err);
			bool cut_out = out.dropped > 0,
			     cut_err = err.dropped > 0;
			struct jsonout *o = jsonout_new();
			json_t *jo = jsonout_string(o, &out);
			json_t *je = jsonout_string(o, &err);
			json_t *j = json_pack(
			    "{s:i, s:o, s:o, s:b, s:{s:b, s:b}, s:I, s:o}",
			    "exitCode", code, "stdout", jo, "stderr", je,
			    "timedOut", timed_out, "truncated", "stdout",
			    cut_out, "stderr", cut_err, "durationMs",
			    (json_int_t)res->duration_ms, "signal", sig);
			buf_free(&out);
			buf_free(&err);
			jsonout_respond(o, e->r, 200, j);
		}
	} else {
		if (failed) {
			json_decref(sig);
			relay_event_json(e->x.rl, "error",
			                 json_pack("{s:s, s:s}", "error",
			                           res->msg, "code",
			                           "exec_failed"));
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

int v1_exec_request(struct api *a, struct http_req *r, struct route_match *m,
                    struct v1_exec_req *q)
{
	q->body = v1_body(r);
	if (!q->body)
		return -1;
	q->sb = v1_sandbox_to_run(a, r, m);
	q->sess = q->sb ? v1_session(r, q->sb) : NULL;
	if (!q->sess ||
	    v1_exec_params(r, q->body, q->sb, q->sess, &q->p, &q->hold) < 0) {
		json_decref(q->body);
		return -1;
	}
	return 0;
}

void v1_exec_request_free(struct v1_exec_req *q)
{
	v1_exec_params_free(&q->hold);
	json_decref(q->body);
}

void v1_exec(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sbx_err err = {0};
	struct v1_exec_req q;
	if (v1_exec_request(a, r, m, &q) < 0)
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
		e->max_output = q.p.max_output ? q.p.max_output : UINT64_MAX;
		q.p.on_output = exec_output;
		e->x.rl = relay_open(r, a->m->loop, NULL, &api_exec_relay, e);
		if (!e->x.rl) {
			free(e);
			goto out;
		}
	} else {
		http_suspend(r);
	}
	if (exec_submit(q.sb, q.sess, &q.p, exec_done, e, &e->x.job, &err) <
	    0) {
		struct exec_result res = {.failure = EXEC_NOT_STARTED};
		snprintf(res.msg, sizeof(res.msg), "%s", err.msg);
		exec_done(&res, e);
	}
out:
	v1_exec_request_free(&q);
}

/* ---- sessions ----------------------------------------------------------- */

void v1_session_create(struct api *a, struct http_req *r, struct route_match *m)
{
	char id[40], *cwd = NULL;
	json_t *body = v1_body(r);
	if (!body)
		return;
	struct sandbox *sb = v1_sandbox(a, r, m, true);
	char **env = NULL;
	size_t envc = 0;
	json_t *c = json_object_get(body, "cwd");
	if (!sb)
		goto out;
	if (v1_env(r, json_object_get(body, "env"), &env, &envc) < 0)
		goto out;
	/* relative to /workspace */
	if (v1_cwd(r, c, "/workspace", &cwd) < 0)
		goto out;
	if (!cwd && !(cwd = strdup("/workspace"))) {
		v1_error(r, 500, "internal", "out of memory");
		goto out;
	}
	id_random(id, sizeof(id), "sess_");
	struct session *s;
	if (sandbox_session_new(sb, id, cwd, (const char *const *)env, envc,
	                        &s) < 0) {
		v1_error(r, 500, "internal", "out of memory");
		goto out;
	}
	http_respond_json(r, 201,
	                  json_pack("{s:s, s:s}", "id", id, "cwd", cwd));
out:
	free(cwd);
	env_free(env);
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
