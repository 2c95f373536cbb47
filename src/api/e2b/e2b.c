/* The E2B face: what the official e2b SDKs call, on the daemon's own port
 * (shared/spec/e2b.md; docs/compat-e2b.md says what is served).
 *
 * Theory of operation. A request with an E2b-Sandbox-Id header belongs to
 * the sandbox plane: E2b-Sandbox-Port 49983 is envd (process.Process and
 * filesystem.Filesystem over Connect, /files, /health), 49999 the code
 * interpreter. It carries no API key: the sandbox is the one of that ID
 * whose envd access token (X-Access-Token) matches; the token is a hash
 * of a per-daemon secret, the tenant and the ID, so it survives restarts
 * and names one tenant's sandbox. Anything else on E2B's control-plane
 * paths (/sandboxes, /v2/sandboxes, /snapshots, /templates) needs an API
 * key (X-API-Key): with --tokens, a token of the tokens file (issue them
 * as e2b_<hex>, the form the Python SDK checks), whose tenant it acts
 * for; without, any key and the default tenant.
 *
 * E2B's lifecycle on sandboxd's: a sandbox lives until its deadline
 * (create's timeout, set again by setTimeout and connect), then is killed
 * (or paused, with autoPause); pause is a stop with the files kept, and
 * connect resumes. A sandbox of this face is never stopped for idleness
 * (its deadline bounds it), so its processes and interpreter contexts
 * live as long as E2B's would. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/e2b/e2b.h"
#include "core/env.h"
#include "core/images.h"
#include "core/snapshot.h"
#include "http/held.h"
#include "lib/log.h"
#include "lib/path.h"
#include "lib/sha256.h"
#include "lib/util.h"

#define DEFAULT_TIMEOUT_S 300
#define MAX_TIMEOUT_S (30u * 86400u)
#define LIST_LIMIT_MAX 1000

static char secret[65];
static struct loop_timer deadline_timer;
static struct api *the_api;

void e2b_verror(struct http_req *r, unsigned status, const char *code,
                const char *fmt, va_list ap)
{
	char msg[1024];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	http_respond_json(
	    r, status,
	    code
	        ? json_pack("{s:s, s:s}", "code", code, "message", msg)
	        : json_pack("{s:i, s:s}", "code", (int)status, "message", msg));
}

unsigned e2b_status(const struct sbx_err *err, const struct e2b_errmap *map)
{
	while (map->errnum && map->errnum != err->code)
		map++;
	return map->status;
}

void e2b_error(struct http_req *r, unsigned status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	e2b_verror(r, status, NULL, fmt, ap);
	va_end(ap);
}

/* ---- E2B's state, in the labels ------------------------------------------ */

struct e2b_state {
	char template[128];
	uint64_t start_ms, end_ms;
	bool paused, pause_on_timeout, ours;
};

static json_t *labels_of(const struct sandbox *sb)
{
	json_t *j =
	    sandbox_labels(sb) ? json_loads(sandbox_labels(sb), 0, NULL) : NULL;
	if (!json_is_object(j)) {
		json_decref(j);
		j = json_object();
	}
	return j;
}

static void state_of(struct sandbox *sb, struct e2b_state *st)
{
	memset(st, 0, sizeof(*st));
	snprintf(st->template, sizeof(st->template), "base");
	struct sandbox_info in;
	sandbox_info(sb, &in);
	st->start_ms = in.created_ms;
	if (!sandbox_labels(sb) ||
	    !strstr(sandbox_labels(sb), "\"" E2B_LABEL "\""))
		return;
	json_t *l = labels_of(sb);
	json_t *e = json_object_get(l, E2B_LABEL);
	if (json_is_object(e)) {
		st->ours = true;
		const char *t =
		    json_string_value(json_object_get(e, "template"));
		if (t)
			snprintf(st->template, sizeof(st->template), "%s", t);
		st->start_ms = (uint64_t)json_integer_value(
		    json_object_get(e, "startedAt"));
		st->end_ms =
		    (uint64_t)json_integer_value(json_object_get(e, "endAt"));
		st->paused = json_is_true(json_object_get(e, "paused"));
		st->pause_on_timeout =
		    json_is_true(json_object_get(e, "autoPause"));
	}
	json_decref(l);
}

static int state_save(struct sandbox *sb, const struct e2b_state *st,
                      struct sbx_err *err)
{
	json_t *l = labels_of(sb);
	json_object_set_new(
	    l, E2B_LABEL,
	    json_pack("{s:s, s:I, s:I, s:b, s:b}", "template", st->template,
	              "startedAt", (json_int_t)st->start_ms, "endAt",
	              (json_int_t)st->end_ms, "paused", st->paused, "autoPause",
	              st->pause_on_timeout));
	char *txt = json_dumps(l, JSON_COMPACT);
	json_decref(l);
	if (!txt)
		return sbx_err_set(err, ENOMEM, "out of memory");
	int r = sandbox_set_labels(sb, txt, err);
	free(txt);
	return r;
}

bool e2b_paused(struct sandbox *sb)
{
	struct e2b_state st;
	state_of(sb, &st);
	return st.paused;
}

/* ---- keys and tokens ------------------------------------------------------
 */

static void secret_load(const char *state_dir)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/e2b.secret", state_dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		ssize_t n = read(fd, secret, 64);
		close(fd);
		if (n == 64) {
			secret[64] = '\0';
			return;
		}
	}
	unsigned char raw[32];
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		log_warn("event=e2b-secret getrandom failed");
	for (int i = 0; i < 32; i++)
		snprintf(secret + 2 * i, 3, "%02x", raw[i]);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
	          0600);
	if (fd < 0 || write(fd, secret, 64) != 64)
		log_warn("event=e2b-secret path=%s not kept: envd tokens "
		         "change at restart",
		         path);
	if (fd >= 0)
		close(fd);
}

static void envd_token(const struct sandbox *sb, char out[SHA256_HEX_LEN + 1])
{
	struct sha256 s;
	sha256_init(&s);
	sha256_update(&s, "sandboxd-e2b-envd\n", 18);
	sha256_update(&s, secret, 64);
	sha256_update(&s, "\n", 1);
	sha256_update(&s, sandbox_tenant(sb), strlen(sandbox_tenant(sb)) + 1);
	sha256_update(&s, sandbox_id(sb), strlen(sandbox_id(sb)));
	sha256_final_hex(&s, out);
}

static bool same(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;
	for (size_t i = 0; i < la && i < lb; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return !d;
}

/* The tenant of the control-plane request, or NULL after answering 401. */
static const char *tenant_of(struct api *a, struct http_req *r)
{
	const char *key = http_header(r, "X-API-Key");
	char bearer[1024];
	const char *auth = http_header(r, "Authorization");
	if (key && *key) {
		snprintf(bearer, sizeof(bearer), "Bearer %s", key);
		auth = bearer;
	}
	if (!auth || strncasecmp(auth, "Bearer ", 7) || !auth[7]) {
		e2b_error(r, 401, "an API key is needed (X-API-Key)");
		return NULL;
	}
	if (!a->auth)
		return "";
	const char *t = auth_tenant(a->auth, auth);
	if (!t)
		e2b_error(r, 401, "Invalid API key");
	return t;
}

struct find_ctx {
	const char *id, *token;
	struct sandbox *found;
};

static void find_one(struct sandbox *sb, void *data)
{
	struct find_ctx *c = data;
	char tok[SHA256_HEX_LEN + 1];
	if (c->found || strcmp(sandbox_id(sb), c->id))
		return;
	envd_token(sb, tok);
	if (c->token && same(tok, c->token))
		c->found = sb;
}

/* ---- JSON of a sandbox ----------------------------------------------------
 */

static json_t *metadata_of(const struct sandbox *sb)
{
	json_t *l = labels_of(sb), *md = json_object();
	const char *k;
	json_t *v;
	json_object_foreach(l, k,
	                    v) if (strcmp(k, E2B_LABEL) && json_is_string(v))
	    json_object_set(md, k, v);
	json_decref(l);
	return md;
}

static json_t *sandbox_json(struct api *a, struct sandbox *sb, bool detail,
                            bool listed)
{
	struct e2b_state st;
	state_of(sb, &st);
	char tok[SHA256_HEX_LEN + 1];
	envd_token(sb, tok);
	json_t *j =
	    json_pack("{s:s, s:s, s:s, s:s, s:s}", "sandboxID", sandbox_id(sb),
	              "templateID", st.template, "alias", st.template,
	              "clientID", "sandboxd", "envdVersion", E2B_ENVD_VERSION);
	if (!listed) {
		json_object_set_new(j, "envdAccessToken", json_string(tok));
		json_object_set_new(j, "domain", json_null());
		/* the code interpreter's SDK sends this one on every call
		 * (X-Access-Token only on /execute): the same token */
		json_object_set_new(j, "trafficAccessToken", json_string(tok));
	}
	if (!detail && !listed)
		return j;
	struct cgroup_limits lim;
	uint64_t disk;
	sandbox_limits(sb, &lim, &disk);
	char start[32], end[32];
	iso8601_ms(st.start_ms, start, sizeof(start));
	iso8601_ms(st.end_ms ? st.end_ms : st.start_ms, end, sizeof(end));
	unsigned cpus = (lim.cpu_millis + 999) / 1000;
	json_object_set_new(j, "cpuCount", json_integer(cpus ? cpus : 1));
	json_object_set_new(j, "memoryMB",
	                    json_integer((json_int_t)(lim.memory_bytes >> 20)));
	json_object_set_new(j, "diskSizeMB",
	                    json_integer((json_int_t)(disk >> 20)));
	json_object_set_new(j, "startedAt", json_string(start));
	json_object_set_new(j, "endAt", json_string(end));
	json_object_set_new(j, "state",
	                    json_string(st.paused ? "paused" : "running"));
	json_object_set_new(j, "metadata", metadata_of(sb));
	json_object_set_new(j, "volumeMounts", json_array());
	if (detail) {
		json_object_set_new(j, "allowInternetAccess", json_false());
		json_object_set_new(
		    j, "lifecycle",
		    json_pack("{s:s, s:b}", "onTimeout",
		              st.pause_on_timeout ? "pause" : "kill",
		              "autoResume", 0));
	}
	(void)a;
	return j;
}

/* ---- the control plane ----------------------------------------------------
 */

static bool template_ok(const char *t)
{
	return !t || !*t || !strcmp(t, "base") || !strcmp(t, "default") ||
	       !strcmp(t, "code-interpreter-v1") ||
	       !strcmp(t, "code-interpreter");
}

static int timeout_of(struct http_req *r, json_t *body, uint64_t *secs)
{
	json_t *t = json_object_get(body, "timeout");
	if (!t) /* POST /sandboxes/{id}/refreshes names it so */
		t = json_object_get(body, "duration");
	*secs = DEFAULT_TIMEOUT_S;
	if (!t || json_is_null(t))
		return 0;
	if (!json_is_integer(t) || json_integer_value(t) < 0 ||
	    json_integer_value(t) > MAX_TIMEOUT_S) {
		e2b_error(r, 400, "timeout: whole seconds, 0 to %u",
		          MAX_TIMEOUT_S);
		return -1;
	}
	*secs = (uint64_t)json_integer_value(t);
	return 0;
}

static void create_from_snapshot(struct api *a, struct http_req *r,
                                 const char *tenant, const struct snapshot *s,
                                 uint64_t secs, char **env, size_t envc);

static void create(struct api *a, struct http_req *r, const char *tenant)
{
	struct sbx_err err = {0};
	json_t *body = json_loadb(r->body.data ? r->body.data : "{}",
	                          r->body.len ? r->body.len : 2, 0, NULL);
	char **env = NULL;
	size_t envc = 0;
	char *labels = NULL;
	if (!json_is_object(body)) {
		e2b_error(r, 400, "the body must be a JSON object");
		goto out;
	}
	if (json_is_true(json_object_get(body, "mcp")) ||
	    json_is_object(json_object_get(body, "mcp"))) {
		e2b_error(r, 400,
		          "the MCP gateway is not supported by sandboxd");
		goto out;
	}
	const char *tpl =
	    json_string_value(json_object_get(body, "templateID"));
	struct snapshot *from = tpl ? snapshot_find(a->m, tenant, tpl) : NULL;
	/* a template is the default system, a snapshot, or an image (by
	 * name or digest, as /v1's "image") */
	struct image *img =
	    !from && !template_ok(tpl) ? images_find(a->m->images, tpl) : NULL;
	if (!from && !img && !template_ok(tpl)) {
		e2b_error(r, 400,
		          "template '%s' is not supported: it is neither the "
		          "default (base, code-interpreter-v1), an image "
		          "(GET /v1/image) nor a snapshot",
		          tpl);
		goto out;
	}
	if (json_is_true(json_object_get(json_object_get(body, "autoResume"),
	                                 "enabled"))) {
		e2b_error(r, 400,
		          "auto-resume on traffic is not supported by "
		          "sandboxd: resume with connect");
		goto out;
	}
	json_t *vm = json_object_get(body, "volumeMounts");
	if (json_array_size(vm)) {
		e2b_error(r, 400,
		          "volume mounts are not supported by sandboxd");
		goto out;
	}
	uint64_t secs;
	if (timeout_of(r, body, &secs) < 0)
		goto out;
	const char *bad;
	int e =
	    env_from_json(json_object_get(body, "envVars"), &env, &envc, &bad);
	if (e < 0) {
		e2b_error(r, 400, "envVars: %s%s",
		          bad ? "not a valid variable name: "
		              : "an object of strings",
		          bad ? bad : "");
		goto out;
	}
	json_t *md = json_object_get(body, "metadata"), *l = json_object();
	const char *k;
	json_t *v;
	if (md && !json_is_object(md) && !json_is_null(md)) {
		json_decref(l);
		e2b_error(r, 400, "metadata: an object of strings");
		goto out;
	}
	json_object_foreach(md, k, v)
	{
		if (!json_is_string(v) || !strcmp(k, E2B_LABEL)) {
			json_decref(l);
			e2b_error(r, 400,
			          "metadata.%s: a string (and not the "
			          "reserved key \"" E2B_LABEL "\")",
			          k);
			goto out;
		}
		json_object_set(l, k, v);
	}
	if (from) { /* a snapshot as the template: its files */
		json_decref(l);
		create_from_snapshot(a, r, tenant, from, secs, env, envc);
		goto out;
	}
	uint64_t now = now_wall_ms();
	json_object_set_new(
	    l, E2B_LABEL,
	    json_pack("{s:s, s:I, s:I, s:b, s:b}", "template",
	              tpl && *tpl ? tpl : "base", "startedAt", (json_int_t)now,
	              "endAt", (json_int_t)(now + secs * 1000), "paused", 0,
	              "autoPause",
	              json_is_true(json_object_get(body, "autoPause"))));
	labels = json_dumps(l, JSON_COMPACT);
	json_decref(l);
	struct sandbox_opts o = {.env = (const char *const *)env,
	                         .envc = envc,
	                         .labels = labels,
	                         .image = img,
	                         .keep_alive = true};
	char id[40];
	struct sandbox *sb = NULL;
	for (int tries = 0; tries < 8; tries++) {
		id_random(id, sizeof(id), "i");
		if (manager_create(a->m, tenant, id, &o, &sb, &err) == 0 ||
		    err.code != EEXIST)
			break;
	}
	if (!sb) {
		static const struct e2b_errmap create_errs[] = {
		    {EDQUOT, 429}, {ENOSPC, 429}, {0, 500}};
		e2b_error(r, e2b_status(&err, create_errs), "%s", err.msg);
		goto out;
	}
	log_info("sandbox=%s event=e2b-created template=%s timeout=%llus", id,
	         tpl && *tpl ? tpl : "base", (unsigned long long)secs);
	http_respond_json(r, 201, sandbox_json(a, sb, false, false));
out:
	env_free(env);
	free(labels);
	json_decref(body);
}

static struct sandbox *find_own(struct api *a, struct http_req *r,
                                const char *tenant, const char *id)
{
	struct sandbox *sb =
	    sandbox_id_valid(id) ? manager_find(a->m, tenant, id) : NULL;
	if (!sb)
		e2b_error(r, 404, "sandbox \"%s\" not found", id);
	return sb;
}

static json_t *body_object(struct http_req *r)
{
	json_t *b = r->body.len ? json_loadb(r->body.data, r->body.len, 0, NULL)
	                        : json_object();
	if (!json_is_object(b)) {
		json_decref(b);
		e2b_error(r, 400, "the body must be a JSON object");
		return NULL;
	}
	return b;
}

/* A sandbox's end set from now + {"timeout": seconds} (or "duration"):
 * /timeout and /refreshes (204); /connect and /resume (connect: the end
 * only moves later unless it was paused, which it is no more: 201 when it
 * resumed, else 200, with the sandbox). */
static void set_end(struct api *a, struct http_req *r, const char *tenant,
                    const char *id, bool connect)
{
	struct sbx_err err = {0};
	struct sandbox *sb = find_own(a, r, tenant, id);
	json_t *b = sb ? body_object(r) : NULL;
	uint64_t secs;
	int rc = b ? timeout_of(r, b, &secs) : -1;
	json_decref(b);
	if (rc < 0)
		return;
	struct e2b_state st;
	state_of(sb, &st);
	uint64_t end = now_wall_ms() + secs * 1000;
	bool resumed = connect && st.paused;
	if (!connect || resumed || end > st.end_ms)
		st.end_ms = end;
	if (connect) {
		st.paused = false;
		if (!st.ours) {
			struct sandbox_info in;
			sandbox_info(sb, &in);
			st.start_ms = in.created_ms;
		}
	}
	if (state_save(sb, &st, &err) < 0) {
		e2b_error(r, 500, "%s", err.msg);
		return;
	}
	if (!connect) {
		http_respond_empty(r, 204);
		return;
	}
	if (resumed && sandbox_ensure_started(sb, &err) < 0) {
		static const struct e2b_errmap start_errs[] = {{EDQUOT, 429},
		                                               {0, 500}};
		e2b_error(r, e2b_status(&err, start_errs), "%s", err.msg);
		return;
	}
	http_respond_json(r, resumed ? 201 : 200,
	                  sandbox_json(a, sb, false, false));
}

static void pause_sb(struct api *a, struct http_req *r, const char *tenant,
                     const char *id)
{
	struct sbx_err err = {0};
	struct sandbox *sb = find_own(a, r, tenant, id);
	if (!sb)
		return;
	struct e2b_state st;
	state_of(sb, &st);
	if (st.paused) {
		e2b_error(r, 409, "sandbox \"%s\" is already paused", id);
		return;
	}
	st.paused = true;
	if (state_save(sb, &st, &err) < 0) {
		e2b_error(r, 500, "%s", err.msg);
		return;
	}
	/* files kept; processes and memory are not (docs/compat-e2b.md) */
	sandbox_stop(sb, "paused");
	http_respond_empty(r, 204);
}

static void kill_sb(struct api *a, struct http_req *r, const char *tenant,
                    const char *id)
{
	struct sbx_err err = {0};
	struct sandbox *sb = find_own(a, r, tenant, id);
	if (!sb)
		return;
	if (sandbox_destroy(sb, &err) < 0)
		e2b_error(r, 500, "%s", err.msg);
	else
		http_respond_empty(r, 204);
}

static void metrics(struct api *a, struct http_req *r, const char *tenant,
                    const char *id)
{
	struct sandbox *sb = find_own(a, r, tenant, id);
	if (!sb)
		return;
	struct cgroup_limits lim;
	uint64_t disk, used = 0;
	sandbox_limits(sb, &lim, &disk);
	struct cgroup_stats cs = {0};
	struct sandbox_info in;
	sandbox_stats(sb, &cs);
	sandbox_info(sb, &in);
	sandbox_disk_usage(sb, &used);
	uint64_t now = now_wall_ms();
	char ts[32];
	iso8601_ms(now, ts, sizeof(ts));
	unsigned cpus = (lim.cpu_millis + 999) / 1000;
	/* the average since it started: one sample, no history is kept */
	uint64_t up_ms = now > in.created_ms ? now - in.created_ms : 1;
	double pct =
	    (double)cs.cpu_usec / 10.0 / (double)up_ms / (cpus ? cpus : 1);
	json_t *m = json_pack(
	    "{s:s, s:I, s:i, s:f, s:I, s:I, s:I, s:I, s:I}", "timestamp", ts,
	    "timestampUnix", (json_int_t)(now / 1000), "cpuCount",
	    (int)(cpus ? cpus : 1), "cpuUsedPct", pct > 100 ? 100.0 : pct,
	    "memUsed", (json_int_t)cs.memory_bytes, "memTotal",
	    (json_int_t)lim.memory_bytes, "memCache", (json_int_t)0, "diskUsed",
	    (json_int_t)used, "diskTotal", (json_int_t)disk);
	http_respond_json(r, 200, json_pack("[o]", m));
}

/* "k=v&k2=v2" (each part percent-encoded) into a filter object. */
static void pct_decode(char *s)
{
	char *o = s;
	for (char *p = s; *p; p++) {
		if (*p == '+')
			*o++ = ' ';
		else if (*p == '%' && p[1] && p[2]) {
			char h[3] = {p[1], p[2], 0};
			*o++ = (char)strtol(h, NULL, 16);
			p += 2;
		} else
			*o++ = *p;
	}
	*o = '\0';
}

/* sb appended to *v (*n of them, room for *cap), grown as needed; left
 * out when it cannot grow. */
static void push_sandbox(struct sandbox ***v, size_t *n, size_t *cap,
                         struct sandbox *sb)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		struct sandbox **nv = realloc(*v, c * sizeof(*nv));
		if (!nv)
			return;
		*v = nv;
		*cap = c;
	}
	(*v)[(*n)++] = sb;
}

struct list_ctx {
	struct api *a;
	const char *tenant;
	bool running, paused;
	json_t *md;
	const char *template; /* NULL: any */
	uint64_t after_ms;    /* started at or after (0: any) */
	struct sandbox **v;
	size_t n, cap;
};

static void list_one(struct sandbox *sb, void *data)
{
	struct list_ctx *c = data;
	if (strcmp(sandbox_tenant(sb), c->tenant))
		return;
	struct e2b_state st;
	state_of(sb, &st);
	bool paused = st.paused;
	if ((paused && !c->paused) || (!paused && !c->running))
		return;
	if ((c->template && strcmp(c->template, st.template)) ||
	    st.start_ms < c->after_ms)
		return;
	if (json_object_size(c->md)) {
		json_t *l = labels_of(sb);
		const char *k;
		json_t *v;
		bool ok = true;
		json_object_foreach(c->md, k, v)
		{
			json_t *have = json_object_get(l, k);
			ok = ok && json_is_string(have) &&
			     !strcmp(json_string_value(have),
			             json_string_value(v));
		}
		json_decref(l);
		if (!ok)
			return;
	}
	push_sandbox(&c->v, &c->n, &c->cap, sb);
}

static int by_start(const void *x, const void *y)
{
	/* the array's pointers are const here, not the sandboxes */
	struct sandbox *a = *(struct sandbox *const *)x,
	               *b = *(struct sandbox *const *)y;
	struct sandbox_info ia, ib;
	sandbox_info(a, &ia);
	sandbox_info(b, &ib);
	if (ia.created_ms != ib.created_ms)
		return ia.created_ms < ib.created_ms ? 1
		                                     : -1; /* newest first */
	return strcmp(sandbox_id(a), sandbox_id(b));
}

static int by_start_asc(const void *x, const void *y)
{
	return by_start(y, x);
}

/* "2026-01-02T03:04:05[.123][Z]" (UTC) in ms; 0 when it is not one. */
static uint64_t parse_time_ms(const char *s)
{
	struct tm tm = {0};
	const char *rest = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	if (!rest)
		return 0;
	time_t t = timegm(&tm);
	uint64_t ms = t > 0 ? (uint64_t)t * 1000 : 0;
	if (*rest == '.') {
		unsigned frac = 0, digits = 0;
		for (rest++; *rest >= '0' && *rest <= '9'; rest++)
			if (digits++ < 3)
				frac = frac * 10 + (unsigned)(*rest - '0');
		while (digits++ < 3)
			frac *= 10;
		ms += frac;
	}
	return ms;
}

static void list(struct api *a, struct http_req *r, const char *tenant)
{
	struct list_ctx c = {.a = a, .tenant = tenant, .md = json_object()};
	const char *state = http_query(r, "state");
	if (state && *state) {
		c.running = strstr(state, "running") != NULL;
		c.paused = strstr(state, "paused") != NULL;
	} else {
		c.running = c.paused = true;
	}
	const char *md = http_query(r, "metadata");
	char *copy = md ? strdup(md) : NULL, *save = NULL;
	for (char *kv = copy ? strtok_r(copy, "&", &save) : NULL; kv;
	     kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');
		if (!eq)
			continue;
		*eq = '\0';
		pct_decode(kv);
		pct_decode(eq + 1);
		json_object_set_new(c.md, kv, json_string(eq + 1));
	}
	free(copy);
	const char *ls = http_query(r, "limit"),
	           *nt = http_query(r, "nextToken");
	unsigned long limit = ls ? strtoul(ls, NULL, 10) : 100;
	unsigned long from = nt ? strtoul(nt, NULL, 10) : 0;
	if (!limit || limit > LIST_LIMIT_MAX)
		limit = limit ? LIST_LIMIT_MAX : 100;
	const char *tpl = http_query(r, "template");
	c.template = tpl && *tpl ? tpl : NULL;
	c.after_ms = parse_time_ms(http_query(r, "startedAfter"));
	const char *order = http_query(r, "order");
	bool asc = order && !strcasecmp(order, "asc");
	manager_foreach(a->m, list_one, &c);
	if (c.n)
		qsort(c.v, c.n, sizeof(*c.v), asc ? by_start_asc : by_start);
	json_t *arr = json_array();
	size_t i;
	for (i = from; i < c.n && i < from + limit; i++)
		json_array_append_new(arr,
		                      sandbox_json(a, c.v[i], false, true));
	free(c.v);
	json_decref(c.md);
	if (i < c.n) {
		char next[32];
		snprintf(next, sizeof(next), "%zu", i);
		const char *hdrs[] = {"X-Next-Token", next, NULL};
		char *txt = json_dumps(arr, JSON_COMPACT);
		json_decref(arr);
		struct http_stream *s = http_respond_stream(
		    r, 200, "application/json", txt ? strlen(txt) : 2, hdrs);
		if (s) {
			http_stream_write(s, txt ? txt : "[]",
			                  txt ? strlen(txt) : 2);
			http_stream_end(s);
		}
		free(txt);
		return;
	}
	http_respond_json(r, 200, arr);
}

/* ---- snapshots and fork (core/snapshot.h) -------------------------------- */

/* A request waiting on snapshot operations. */
struct snap_req {
	struct api *a;
	struct http_held held;
	char tenant[256], from[128];
	char *labels;  /* a clone's E2B state */
	unsigned left; /* fork: clones still to make */
	json_t *made;  /* fork: the answer's entries */
};

static struct snap_req *snap_req_new(struct api *a, struct http_req *r,
                                     const char *tenant)
{
	struct snap_req *q = calloc(1, sizeof(*q));
	if (!q) {
		e2b_error(r, 500, "out of memory");
		return NULL;
	}
	q->a = a;
	snprintf(q->tenant, sizeof(q->tenant), "%s", tenant);
	http_hold(&q->held, r, NULL, NULL);
	return q;
}

static void snap_req_free(struct snap_req *q)
{
	free(q->labels);
	json_decref(q->made);
	free(q);
}

static unsigned snap_status(const struct sbx_err *err)
{
	static const struct e2b_errmap snap_errs[] = {{ENOENT, 404},
	                                              {EBUSY, 409},
	                                              {EDQUOT, 429},
	                                              {ENOSPC, 429},
	                                              {0, 500}};
	return e2b_status(err, snap_errs);
}

static void snap_taken(void *ctx, const struct snapshot *snap,
                       struct sandbox *sb, const struct sbx_err *err)
{
	struct snap_req *q = ctx;
	struct http_req *r = http_take(&q->held);
	(void)sb;
	if (r && err)
		e2b_error(r, snap_status(err), "%s", err->msg);
	else if (r)
		http_respond_json(
		    r, 201,
		    json_pack("{s:s, s:o}", "snapshotID", snap->id, "names",
		              snap->name ? json_pack("[s]", snap->name)
		                         : json_array()));
	snap_req_free(q);
}

static void snapshot_create(struct api *a, struct http_req *r,
                            const char *tenant, struct sandbox *sb)
{
	json_t *b = body_object(r);
	if (!b)
		return;
	const char *name = json_string_value(json_object_get(b, "name"));
	struct snap_req *q = snap_req_new(a, r, tenant);
	if (q)
		snapshot_take(sb, name, snap_taken, q);
	json_decref(b);
}

struct snap_list {
	const char *sandbox, *name;
	json_t *arr;
};

static void snap_one(const struct snapshot *s, void *ctx)
{
	struct snap_list *l = ctx;
	if ((l->sandbox && strcmp(l->sandbox, s->sandbox)) ||
	    (l->name && (!s->name || strcmp(l->name, s->name))))
		return;
	json_array_append_new(
	    l->arr,
	    json_pack("{s:s, s:o}", "snapshotID", s->id, "names",
	              s->name ? json_pack("[s]", s->name) : json_array()));
}

static void snapshot_list(struct api *a, struct http_req *r, const char *tenant)
{
	struct snap_list l = {http_query(r, "sandboxID"), http_query(r, "name"),
	                      json_array()};
	if (l.sandbox && !*l.sandbox)
		l.sandbox = NULL;
	if (l.name && !*l.name)
		l.name = NULL;
	snapshot_foreach(a->m, tenant, snap_one, &l);
	http_respond_json(r, 200, l.arr);
}

/* The E2B state a clone starts with: its origin's template and metadata,
 * a new deadline. */
static char *clone_labels(const char *from_labels, const char *tpl,
                          uint64_t secs)
{
	json_t *l = from_labels ? json_loads(from_labels, 0, NULL) : NULL;
	if (!json_is_object(l)) {
		json_decref(l);
		l = json_object();
	}
	uint64_t now = now_wall_ms();
	json_object_set_new(l, E2B_LABEL,
	                    json_pack("{s:s, s:I, s:I, s:b, s:b}", "template",
	                              tpl, "startedAt", (json_int_t)now,
	                              "endAt", (json_int_t)(now + secs * 1000),
	                              "paused", 0, "autoPause", 0));
	char *t = json_dumps(l, JSON_COMPACT);
	json_decref(l);
	return t;
}

static void cloned(void *ctx, const struct snapshot *snap, struct sandbox *sb,
                   const struct sbx_err *err)
{
	struct snap_req *q = ctx;
	struct http_req *r = http_take(&q->held);
	(void)snap;
	if (r && err)
		e2b_error(r, snap_status(err), "%s", err->msg);
	else if (r)
		http_respond_json(r, 201, sandbox_json(q->a, sb, false, false));
	snap_req_free(q);
}

static void create_from_snapshot(struct api *a, struct http_req *r,
                                 const char *tenant, const struct snapshot *s,
                                 uint64_t secs, char **env, size_t envc)
{
	struct snap_req *q = snap_req_new(a, r, tenant);
	if (!q)
		return;
	struct sandbox *from = manager_find(a->m, tenant, s->sandbox);
	struct e2b_state st = {0};
	if (from)
		state_of(from, &st);
	q->labels = clone_labels(from ? sandbox_labels(from) : NULL,
	                         from ? st.template : "base", secs);
	char id[40];
	id_random(id, sizeof(id), "i");
	struct sandbox_opts o = {.env = (const char *const *)env,
	                         .envc = envc,
	                         .labels = q->labels,
	                         .keep_alive = true};
	snapshot_clone(a->m, tenant, id, &o, s, NULL, cloned, q);
}

static void fork_next(struct snap_req *q);

static void forked(void *ctx, const struct snapshot *snap, struct sandbox *sb,
                   const struct sbx_err *err)
{
	struct snap_req *q = ctx;
	(void)snap;
	if (err)
		json_array_append_new(q->made,
		                      json_pack("{s:{s:i, s:s}}", "error",
		                                "code", (int)snap_status(err),
		                                "message", err->msg));
	else
		json_array_append_new(
		    q->made, json_pack("{s:o}", "sandbox",
		                       sandbox_json(q->a, sb, false, false)));
	fork_next(q);
}

static void fork_next(struct snap_req *q)
{
	struct sandbox *from =
	    q->a->m ? manager_find(q->a->m, q->tenant, q->from) : NULL;
	if (!q->left || !from) {
		struct http_req *r = http_take(&q->held);
		if (r && !from && !json_array_size(q->made))
			e2b_error(r, 404, "sandbox \"%s\" not found", q->from);
		else if (r)
			http_respond_json(r, 201, json_incref(q->made));
		snap_req_free(q);
		return;
	}
	q->left--;
	char id[40];
	id_random(id, sizeof(id), "i");
	/* forks run one after another: one snapshot operation per sandbox */
	struct sandbox_opts o;
	sandbox_opts_of(from, &o);
	o.sleep_after_ms = 0;
	o.keep_alive = true;
	o.labels = q->labels;
	snapshot_clone(q->a->m, q->tenant, id, &o, NULL, from, forked, q);
}

static void fork_sb(struct api *a, struct http_req *r, const char *tenant,
                    struct sandbox *sb)
{
	json_t *b = body_object(r);
	uint64_t secs;
	if (!b || timeout_of(r, b, &secs) < 0) {
		json_decref(b);
		return;
	}
	json_t *c = json_object_get(b, "count");
	json_int_t count = c ? json_integer_value(c) : 1;
	if (c && (!json_is_integer(c) || count < 1 || count > 16)) {
		json_decref(b);
		e2b_error(r, 400, "count: 1 to 16");
		return;
	}
	json_decref(b);
	struct snap_req *q = snap_req_new(a, r, tenant);
	if (!q)
		return;
	struct e2b_state st;
	state_of(sb, &st);
	snprintf(q->from, sizeof(q->from), "%s", sandbox_id(sb));
	q->labels = clone_labels(sandbox_labels(sb), st.template, secs);
	q->left = (unsigned)count;
	q->made = json_array();
	fork_next(q);
}

/* ---- the deadline ----------------------------------------------------------
 */

static void unsupported(struct http_req *r, const char *what)
{
	e2b_error(r, 501,
	          "%s is not supported by sandboxd "
	          "(docs/compat-e2b.md)",
	          what);
}

/* The deadline: kill (or pause) every E2B sandbox whose time is up. */
static void expire_one(struct sandbox *sb, void *data)
{
	uint64_t now = *(uint64_t *)data;
	if (!sandbox_labels(sb) ||
	    !strstr(sandbox_labels(sb), "\"" E2B_LABEL "\""))
		return;
	struct e2b_state st;
	state_of(sb, &st);
	if (!st.ours || st.paused || !st.end_ms || st.end_ms > now)
		return;
	struct sbx_err err = {0};
	if (st.pause_on_timeout) {
		st.paused = true;
		if (state_save(sb, &st, &err) == 0)
			sandbox_stop(sb, "timeout");
		log_info("sandbox=%s event=e2b-timeout action=pause",
		         sandbox_id(sb));
		return;
	}
	log_info("sandbox=%s event=e2b-timeout action=kill", sandbox_id(sb));
	/* from the list on_deadline collected, never inside manager_foreach */
	sandbox_destroy(sb, &err);
}

struct expired {
	struct sandbox **v;
	size_t n, cap;
	uint64_t now;
};

static void collect(struct sandbox *sb, void *data)
{
	struct expired *x = data;
	if (!sandbox_labels(sb) ||
	    !strstr(sandbox_labels(sb), "\"" E2B_LABEL "\""))
		return;
	struct e2b_state st;
	state_of(sb, &st);
	if (!st.ours || st.paused || !st.end_ms || st.end_ms > x->now)
		return;
	push_sandbox(&x->v, &x->n, &x->cap, sb);
}

static void on_deadline(struct loop_timer *t)
{
	struct api *a = the_api;
	if (!a->m)
		return;
	/* collected first: destroying while manager_foreach walks would
	 * pull the bucket from under it */
	struct expired x = {.now = now_wall_ms()};
	manager_foreach(a->m, collect, &x);
	for (size_t i = 0; i < x.n; i++)
		expire_one(x.v[i], &x.now);
	free(x.v);
	loop_timer_start(a->m->loop, t, 1000);
}

void api_e2b_start(struct api *a)
{
	the_api = a;
	secret_load(a->m->rt->state_dir);
	deadline_timer = (struct loop_timer){.cb = on_deadline, .data = a};
	loop_timer_start(a->m->loop, &deadline_timer, 1000);
}

void api_e2b_stop(struct api *a)
{
	if (a->m)
		loop_timer_stop(a->m->loop, &deadline_timer);
}

/* ---- paths and users ------------------------------------------------------
 */

int e2b_path(const struct e2b_req *q, const char *p, char **out)
{
	const char *home = q->root ? "/root" : E2B_HOME;
	if (!p || !*p)
		p = home;
	int v = path_join_beneath("/", home, p, out);
	return v == PATH_OK ? 0 : -1;
}

char **e2b_user_env(const struct e2b_req *q, char **extra, size_t nextra,
                    size_t *n)
{
	const char *base[] = {
	    q->root ? "HOME=/root" : "HOME=" E2B_HOME,
	    q->root ? "USER=root" : "USER=user",
	    q->root ? "LOGNAME=root" : "LOGNAME=user",
	    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	};
	size_t nb = sizeof(base) / sizeof(base[0]);
	char **v = calloc(nb + nextra + 1, sizeof(*v));
	if (!v)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < nb; i++)
		if (!(v[k++] = strdup(base[i])))
			goto fail;
	for (size_t i = 0; i < nextra; i++) {
		v[k++] = extra[i];
		extra[i] = NULL;
	}
	*n = k;
	return v;
fail:
	env_free(v);
	return NULL;
}

/* ---- dispatch -------------------------------------------------------------
 */

static bool prefix(const char *url, const char *p)
{
	size_t n = strlen(p);
	return !strncmp(url, p, n) &&
	       (url[n] == '\0' || url[n] == '/' || url[n] == '?');
}

bool api_e2b_match(struct http_req *r)
{
	if (http_header(r, "E2b-Sandbox-Id"))
		return true;
	return prefix(r->url, "/sandboxes") ||
	       prefix(r->url, "/v2/sandboxes") ||
	       prefix(r->url, "/snapshots") || prefix(r->url, "/templates") ||
	       prefix(r->url, "/v2/templates") ||
	       prefix(r->url, "/v3/templates") || prefix(r->url, "/volumes") ||
	       prefix(r->url, "/secrets");
}

/* The sandbox of a sandbox-plane request, or NULL after answering. */
static struct sandbox *plane_sandbox(struct api *a, struct http_req *r)
{
	struct find_ctx c = {.id = http_header(r, "E2b-Sandbox-Id"),
	                     .token = http_header(r, "X-Access-Token")};
	if (!c.token)
		c.token = http_header(r, "E2B-Traffic-Access-Token");
	if (!c.token && http_query(r, "signature")) {
		e2b_error(r, 401,
		          "signed URLs are not supported by sandboxd: "
		          "send the envd access token");
		return NULL;
	}
	if (c.id && sandbox_id_valid(c.id))
		manager_foreach(a->m, find_one, &c);
	if (!c.found || e2b_paused(c.found)) {
		/* what E2B's proxy answers for a sandbox it cannot reach: the
		 * SDKs read 502 as "not running" */
		http_respond_json(
		    r, 502,
		    json_pack("{s:i, s:s, s:s}", "code", 502, "message",
		              c.found ? "The sandbox is paused"
		                      : "The sandbox was not found",
		              "sandboxId", c.id ? c.id : ""));
		return NULL;
	}
	return c.found;
}

/* The user of Basic auth ("<user>:"): none is "user", E2B's default. -1
 * for another user. */
static int user_of(struct http_req *r, bool *root)
{
	const char *auth = http_header(r, "Authorization");
	const char *u = http_query(r, "username");
	char dec[256] = "";
	*root = false;
	if (auth && !strncasecmp(auth, "Basic ", 6)) {
		size_t n = strlen(auth + 6);
		if (n >= 300)
			return -1;
		/* small base64 decoder: the header is tiny */
		static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij"
		                          "klmnopqrstuvwxyz0123456789+/";
		unsigned acc = 0;
		int bits = 0;
		size_t k = 0;
		for (const char *p = auth + 6; *p && *p != '='; p++) {
			const char *f = strchr(tbl, *p);
			if (!f || !*p)
				return -1;
			acc = acc << 6 | (unsigned)(f - tbl);
			bits += 6;
			if (bits >= 8) {
				bits -= 8;
				if (k + 1 < sizeof(dec))
					dec[k++] = (char)(acc >> bits & 0xff);
			}
		}
		dec[k] = '\0';
		char *colon = strchr(dec, ':');
		if (colon)
			*colon = '\0';
		u = dec;
	}
	if (!u || !*u || !strcmp(u, "user"))
		return 0;
	if (!strcmp(u, "root")) {
		*root = true;
		return 0;
	}
	return -1;
}

struct e2b_begin {
	struct e2b_req q;
};

static void plane(struct api *a, struct http_req *r)
{
	const char *port = http_header(r, "E2b-Sandbox-Port");
	bool ci = port && !strcmp(port, E2B_CI_PORT);
	if (port && !ci && strcmp(port, E2B_ENVD_PORT)) {
		e2b_error(r, 502,
		          "port %s: sandboxd serves envd (" E2B_ENVD_PORT
		          ") and the code interpreter (" E2B_CI_PORT
		          ") only; user ports are not exposed",
		          port);
		return;
	}
	struct sandbox *sb = plane_sandbox(a, r);
	if (!sb)
		return;
	struct e2b_req q = {.a = a, .r = r, .sb = sb};
	if (user_of(r, &q.root) < 0) {
		if (!strncmp(r->url, "/process.", 9) ||
		    !strncmp(r->url, "/filesystem.", 12)) {
			if (connect_streaming(r))
				connect_stream_error(r, "unauthenticated",
				                     "invalid username");
			else
				connect_error(r, "unauthenticated",
				              "invalid username");
		} else {
			e2b_error(r, 401,
			          "invalid username: root and user "
			          "exist");
		}
		return;
	}
	if (manager_admit(sb, &(struct sbx_err){0}) < 0) {
		e2b_error(r, 429, "no room to run sandbox %s now",
		          sandbox_id(sb));
		return;
	}
	sandbox_touch(sb);
	if (ci) {
		e2b_ci(&q);
		return;
	}
	if (!strcmp(r->url, "/health") &&
	    (!strcmp(r->method, "GET") || !strcmp(r->method, "HEAD"))) {
		http_respond_empty(r, 204);
		return;
	}
	if (!strcmp(r->url, "/files") && !strcmp(r->method, "GET")) {
		e2b_files_get(&q);
		return;
	}
	if (!strcmp(r->url, "/envs") && !strcmp(r->method, "GET")) {
		json_t *env = json_object();
		const char *const *ev;
		size_t evc = sandbox_env(sb, &ev);
		for (size_t i = 0; i < evc; i++) {
			const char *eq = strchr(ev[i], '=');
			if (!eq || (size_t)(eq - ev[i]) >= 256)
				continue;
			char name[256];
			memcpy(name, ev[i], (size_t)(eq - ev[i]));
			name[eq - ev[i]] = '\0';
			json_object_set_new(env, name, json_string(eq + 1));
		}
		http_respond_json(r, 200, env);
		return;
	}
	const char *svc = NULL;
	if (!strncmp(r->url, "/process.Process/", 17))
		svc = "process";
	else if (!strncmp(r->url, "/filesystem.Filesystem/", 23))
		svc = "filesystem";
	if (!svc) {
		e2b_error(r, 404, "no such endpoint: %s %s", r->method, r->url);
		return;
	}
	const char *method = strrchr(r->url, '/') + 1;
	bool stream = connect_streaming(r);
	if (strcmp(r->method, "POST")) {
		connect_error(r, "unimplemented", "RPCs are POSTs");
		return;
	}
	if (r->body_too_large) {
		if (stream)
			connect_stream_error(r, "resource_exhausted",
			                     "the request is too large");
		else
			connect_error(r, "resource_exhausted",
			              "the request is too large");
		return;
	}
	const char *why = "the body is not a JSON object";
	if (stream)
		q.body = connect_unwrap(r, &why);
	else
		q.body = r->body.len
		             ? json_loadb(r->body.data, r->body.len, 0, NULL)
		             : json_object();
	if (!json_is_object(q.body)) {
		json_decref(q.body);
		if (stream)
			connect_stream_error(r, "invalid_argument", "%s", why);
		else
			connect_error(r, "invalid_argument", "%s", why);
		return;
	}
	if (!strcmp(svc, "process"))
		e2b_process(&q, method);
	else
		e2b_filesystem(&q, method);
	json_decref(q.body);
}

static void control(struct api *a, struct http_req *r)
{
	const char *tenant = tenant_of(a, r);
	if (!tenant)
		return;
	const char *u = r->url, *m = r->method;
	char id[128] = "", rest[64] = "";
	const char *p = NULL;
	if (!strncmp(u, "/v2/sandboxes", 13))
		p = u + 13;
	else if (!strncmp(u, "/sandboxes", 10))
		p = u + 10;
	if (p && (!*p || !strcmp(p, "/"))) {
		if (!strcmp(m, "POST"))
			create(a, r, tenant);
		else if (!strcmp(m, "GET"))
			list(a, r, tenant);
		else
			e2b_error(r, 405, "%s is not allowed here", m);
		return;
	}
	if (p && *p == '/') {
		size_t n = strcspn(p + 1, "/");
		if (n >= sizeof(id)) {
			e2b_error(r, 404, "sandbox not found");
			return;
		}
		memcpy(id, p + 1, n);
		id[n] = '\0';
		snprintf(rest, sizeof(rest), "%s", p + 1 + n);
		if (!strcmp(id, "metrics") && !*rest) {
			unsupported(r, "metrics of many sandboxes at once");
			return;
		}
		if (!*rest && !strcmp(m, "GET")) {
			struct sandbox *sb = find_own(a, r, tenant, id);
			if (sb)
				http_respond_json(
				    r, 200, sandbox_json(a, sb, true, false));
		} else if (!*rest && !strcmp(m, "DELETE")) {
			kill_sb(a, r, tenant, id);
		} else if (!strcmp(rest, "/timeout") && !strcmp(m, "POST")) {
			set_end(a, r, tenant, id, false);
		} else if (!strcmp(rest, "/refreshes") && !strcmp(m, "POST")) {
			set_end(a, r, tenant, id, false);
		} else if (!strcmp(rest, "/connect") && !strcmp(m, "POST")) {
			set_end(a, r, tenant, id, true);
		} else if (!strcmp(rest, "/resume") && !strcmp(m, "POST")) {
			set_end(a, r, tenant, id, true);
		} else if (!strcmp(rest, "/pause") && !strcmp(m, "POST")) {
			pause_sb(a, r, tenant, id);
		} else if (!strcmp(rest, "/metrics") && !strcmp(m, "GET")) {
			metrics(a, r, tenant, id);
		} else if (!strcmp(rest, "/network")) {
			unsupported(r,
			            "network rules (a sandbox has no network)");
		} else if (!strcmp(rest, "/fork") && !strcmp(m, "POST")) {
			struct sandbox *sb = find_own(a, r, tenant, id);
			if (sb)
				fork_sb(a, r, tenant, sb);
		} else if (!strcmp(rest, "/snapshots") && !strcmp(m, "POST")) {
			struct sandbox *sb = find_own(a, r, tenant, id);
			if (sb)
				snapshot_create(a, r, tenant, sb);
		} else {
			e2b_error(r, 404, "no such endpoint: %s %s", m, u);
		}
		return;
	}
	if (!strcmp(u, "/snapshots") && !strcmp(m, "GET")) {
		snapshot_list(a, r, tenant);
		return;
	}
	if (!strncmp(u, "/templates/", 11) && !strcmp(m, "DELETE")) {
		/* E2B deletes a snapshot as the template it is */
		struct sbx_err err = {0};
		struct snapshot *s = snapshot_find(a->m, tenant, u + 11);
		if (!s)
			e2b_error(r, 404, "snapshot \"%s\" not found", u + 11);
		else if (snapshot_delete(a->m, s, &err) < 0)
			e2b_error(r, snap_status(&err), "%s", err.msg);
		else
			http_respond_empty(r, 204);
		return;
	}
	if (prefix(u, "/snapshots")) {
		unsupported(r, "this snapshot call");
		return;
	}
	if (prefix(u, "/volumes"))
		unsupported(r, "volumes");
	else if (prefix(u, "/secrets"))
		unsupported(r, "secrets");
	else
		unsupported(r,
		            "templates (sandboxd has its default image only; "
		            "E2B's template builder is not offered)");
}

void api_e2b_begin(struct api *a, struct http_req *r)
{
	const char *port = http_header(r, "E2b-Sandbox-Port");
	if (!http_header(r, "E2b-Sandbox-Id") || strcmp(r->url, "/files") ||
	    strcmp(r->method, "POST") || (port && strcmp(port, E2B_ENVD_PORT)))
		return; /* the body is taken the usual way */
	struct sandbox *sb = plane_sandbox(a, r);
	if (!sb)
		return;
	struct e2b_req q = {.a = a, .r = r, .sb = sb};
	if (user_of(r, &q.root) < 0) {
		e2b_error(r, 401, "invalid username: root and user exist");
		return;
	}
	if (manager_admit(sb, &(struct sbx_err){0}) < 0) {
		e2b_error(r, 429, "no room to run sandbox %s now",
		          sandbox_id(sb));
		return;
	}
	sandbox_touch(sb);
	e2b_files_begin(&q);
}

void api_e2b_handle(struct api *a, struct http_req *r)
{
	if (r->answered)
		return;
	if (http_header(r, "E2b-Sandbox-Id"))
		plane(a, r);
	else
		control(a, r);
}
