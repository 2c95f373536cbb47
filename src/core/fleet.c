/* A node of a fleet (fleet.h): etcd's lease and ownership keys, and the
 * checkpoints that move a sandbox's files. */
#include "core/fleet.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backup.h"
#include "core/curl_loop.h"
#include "core/manager.h"
#include "core/registry.h"
#include "core/sandbox_internal.h"
#include "core/session_internal.h"
#include "lib/base64.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "lib/util.h"

#define ETCD_ANSWER_MAX (4u << 20)
#define CKPT_PARALLEL 4
#define ID_MAX 64
/* A chain: one full checkpoint and at most CHAIN_MAX - 1 deltas; a full
 * one is written instead once the deltas would outweigh the base. */
#define CHAIN_MAX 8
#define CHAIN_TEXT_MAX 4096
#define CKPT_DIR "/workspace"
/* Inside the sandbox, outside CKPT_DIR: the manifest of its files as its
 * last checkpoint (generation n) has them, the next delta's base. */
#define MANIFEST_FMT "/.sbx-checkpoint/manifest.%llu"
/* The sessions' cwd and exported variables that a checkpoint carries, at
 * most (etcd takes values of up to 1.5 MiB) */
#define SESSIONS_MAX (512u << 10)

struct etcd_call;
typedef void (*etcd_cb)(struct fleet *f, void *ctx, json_t *answer,
                        const struct sbx_err *err);

struct etcd_call {
	struct fleet *f;
	CURL *easy;
	struct curl_slist *headers;
	char *body;
	struct buf answer;
	etcd_cb cb;
	void *ctx;
	struct etcd_call *next;
};

/* One ID being taken, and who waits for it. */
struct claim_op;
struct fleet_claim {
	struct claim_op *op;
	fleet_claim_cb cb;
	void *ctx;
	struct fleet_claim *next;
};

struct claim_op {
	struct fleet *f;
	char id[ID_MAX];
	struct fleet_claim *waiters;
	unsigned restores; /* backup restores in flight */
	bool failed;
	char why[1024];
	struct claim_op *next;
};

/* One checkpoint being written. */
struct ckpt {
	struct fleet *f;
	char *tenant;
	char id[ID_MAX];
	struct backup_op *op;
	uint64_t uses; /* sb's uses when it began: the archive has those
	                  (its own work is none: exec_params.internal) */
	uint64_t gen;
	char backup[ID_RANDOM_MAX];
	json_t *old_chain, *chain; /* [{backup, bytes, delta}], oldest first */
	bool empty; /* a delta of nothing: the chain stays, the backup goes */
	bool redo;  /* a drain came while it ran: one more after it (its
	               archive may have missed a write made meanwhile) */
	bool stop_after, running, done;
	struct ckpt *next;
};

struct fleet {
	struct manager *m;
	struct loop *loop;
	struct curl_loop *cl;
	char *etcd; /* without a trailing slash */
	char node[64];
	const char *url;
	uint64_t ttl_s;
	char lease[32]; /* "" while there is none */
	bool granting, renewing;
	uint64_t lease_until_ms; /* monotonic: owned IDs are valid until */
	struct loop_timer lease_t, ckpt_t;
	char **owned;
	size_t nowned, capowned;
	struct etcd_call *calls;
	struct claim_op *claims;
	struct ckpt *ckpts;
	unsigned nrunning;
	bool draining, drain_released, closing;
	unsigned drain_n, drain_failed;
	void (*drain_done)(void *ctx, unsigned n, unsigned failed);
	void *drain_ctx;
};

/* ---- etcd over its HTTP/JSON gateway ---- */

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
	struct etcd_call *c = ud;
	size_t len = size * n;
	if (c->answer.len + len > ETCD_ANSWER_MAX)
		return 0;
	return buf_append(&c->answer, p, len) < 0 ? 0 : len;
}

static void call_free(struct etcd_call *c)
{
	if (c->easy) {
		curl_loop_remove(c->f->cl, c->easy);
		curl_easy_cleanup(c->easy);
	}
	curl_slist_free_all(c->headers);
	free(c->body);
	buf_free(&c->answer);
	free(c);
}

static void call_unlink(struct etcd_call *c)
{
	for (struct etcd_call **p = &c->f->calls; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			return;
		}
}

static void on_done(CURL *easy, CURLcode cc, void *data)
{
	struct fleet *f = data;
	struct etcd_call *c = NULL;
	long status = 0;
	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&c);
	if (!c)
		return;
	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
	struct sbx_err err = {0};
	json_t *j = NULL;
	if (cc != CURLE_OK)
		sbx_err_set(&err, EREMOTEIO, "etcd %s: %s", f->etcd,
		            curl_easy_strerror(cc));
	else if (!(j = json_loadb(c->answer.data ? c->answer.data : "",
	                          c->answer.len, 0, NULL)))
		sbx_err_set(&err, EREMOTEIO,
		            "etcd %s answered HTTP %ld, not JSON", f->etcd,
		            status);
	else if (status < 200 || status > 299)
		sbx_err_set(&err, EREMOTEIO, "etcd %s answered HTTP %ld: %s",
		            f->etcd, status,
		            json_string_value(json_object_get(j, "error"))
		                ? json_string_value(json_object_get(j, "error"))
		                : "");
	call_unlink(c);
	c->cb(f, c->ctx, err.code ? NULL : j, err.code ? &err : NULL);
	json_decref(j);
	call_free(c);
}

/* POST path with body (taken); cb once, from the loop. */
static void etcd_post(struct fleet *f, const char *path, json_t *body,
                      etcd_cb cb, void *ctx)
{
	struct sbx_err err = {0};
	struct etcd_call *c = calloc(1, sizeof(*c));
	char url[512];
	snprintf(url, sizeof(url), "%s%s", f->etcd, path);
	if (c) {
		c->f = f;
		c->cb = cb;
		c->ctx = ctx;
		buf_init(&c->answer, 0);
		c->body = body ? json_dumps(body, JSON_COMPACT) : NULL;
	}
	json_decref(body);
	if (!c || !c->body || !(c->easy = curl_easy_init())) {
		if (c)
			call_free(c);
		sbx_err_set(&err, ENOMEM, "out of memory");
		cb(f, ctx, NULL, &err);
		return;
	}
	CURL *e = c->easy;
	c->headers = curl_slist_append(NULL, "Content-Type: application/json");
	c->headers = curl_slist_append(c->headers, "Expect:");
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, c);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
	curl_easy_setopt(e, CURLOPT_POST, 1L);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body);
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
	                 (curl_off_t)strlen(c->body));
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	int rc = curl_loop_add(f->cl, e);
	if (rc < 0) {
		call_free(c);
		sbx_err_set(&err, -rc, "curl: cannot add a transfer");
		cb(f, ctx, NULL, &err);
		return;
	}
	c->next = f->calls;
	f->calls = c;
}

static json_t *b64(const char *s, size_t n)
{
	char *out = malloc(base64_encoded_len(n) + 1);
	if (!out)
		return NULL;
	base64_encode(s, n, out);
	json_t *j = json_string(out);
	free(out);
	return j;
}

static json_t *b64s(const char *s)
{
	return b64(s, strlen(s));
}

/* A gateway's base64 field, decoded (NUL-terminated; NULL if absent). */
static char *unb64(json_t *v)
{
	const char *s = json_string_value(v);
	if (!s)
		return NULL;
	size_t n = strlen(s);
	char *out = malloc(n + 1);
	ssize_t r = out ? base64_decode(s, n, out) : -1;
	if (r < 0) {
		free(out);
		return NULL;
	}
	out[r] = '\0';
	return out;
}

static void own_key(const char *id, char *buf, size_t cap)
{
	snprintf(buf, cap, "sbx/own/%s", id);
}

static void ckpt_key(const char *id, const char *tenant, char *buf, size_t cap)
{
	char tk[300];
	backup_tenant_key(tenant, tk, sizeof(tk)); /* "<hex>/" */
	size_t l = strlen(tk);
	if (l && tk[l - 1] == '/')
		tk[l - 1] = '\0';
	snprintf(buf, cap, "sbx/ckpt/%s/%s", id, tk);
}

/* ---- chains of checkpoints ----
 * A sandbox's checkpoints: [{"backup": id, "bytes": n, "delta": bool}],
 * a full one first, then its deltas in order; in etcd's record ("chain")
 * and the registry (as text). */

/* The chain of a record or of the registry's text (an old record has
 * only "backup": a chain of one); NULL if there is none. */
static json_t *chain_of(json_t *rec)
{
	json_t *c = json_object_get(rec, "chain");
	if (json_is_array(c) && json_array_size(c))
		return json_incref(c);
	const char *b = json_string_value(json_object_get(rec, "backup"));
	return b ? json_pack("[{s:s, s:I, s:b}]", "backup", b, "bytes",
	                     (json_int_t)0, "delta", 0)
	         : NULL;
}

static json_t *chain_parse(const char *text)
{
	if (!text || !text[0])
		return NULL;
	if (text[0] != '[') /* an older registry: the backup's ID */
		return json_pack("[{s:s, s:I, s:b}]", "backup", text, "bytes",
		                 (json_int_t)0, "delta", 0);
	json_t *c = json_loads(text, 0, NULL);
	if (!json_is_array(c) || !json_array_size(c)) {
		json_decref(c);
		return NULL;
	}
	return c;
}

static const char *chain_id(json_t *chain, size_t i)
{
	return json_string_value(
	    json_object_get(json_array_get(chain, i), "backup"));
}

/* May the next checkpoint be a delta on chain? */
static bool chain_extends(json_t *chain)
{
	size_t n = json_array_size(chain);
	if (!n || n >= CHAIN_MAX)
		return false;
	json_int_t base = json_integer_value(
	    json_object_get(json_array_get(chain, 0), "bytes"));
	json_int_t deltas = 0;
	for (size_t i = 1; i < n; i++)
		deltas += json_integer_value(
		    json_object_get(json_array_get(chain, i), "bytes"));
	return base > 0 && deltas <= base;
}

static bool chain_has(json_t *chain, const char *id)
{
	for (size_t i = 0; i < json_array_size(chain); i++)
		if (chain_id(chain, i) && !strcmp(chain_id(chain, i), id))
			return true;
	return false;
}

static void manifest_path(uint64_t gen, char *buf, size_t cap)
{
	snprintf(buf, cap, MANIFEST_FMT, (unsigned long long)gen);
}

/* ---- sessions ----
 * A checkpoint's record carries the sandbox's sessions (cwd and exported
 * variables, session_state_encode) so that the next command on the node
 * that takes it starts where the last one left off:
 * [{"id": id, "state": base64}], the default session first. */

static json_t *sessions_encode(struct sandbox *sb)
{
	json_t *v = json_array();
	size_t total = 0;
	for (struct session *s = sb->sessions; v && s; s = s->next) {
		char *state;
		size_t len;
		if (session_state_encode(s, &state, &len) < 0)
			continue;
		total += len;
		if (total <= SESSIONS_MAX)
			json_array_append_new(v, json_pack("{s:s, s:o}", "id",
			                                   s->id, "state",
			                                   b64(state, len)));
		else
			log_warn("sandbox=%s event=fleet-session-not-kept "
			         "session=%s (the sessions are over %u bytes)",
			         sb->id, s->id, SESSIONS_MAX);
		free(state);
	}
	return v;
}

static void sessions_apply(struct sandbox *sb, json_t *v)
{
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		const char *id = json_string_value(json_object_get(e, "id"));
		const char *b = json_string_value(json_object_get(e, "state"));
		if (!id || !b)
			continue;
		size_t n = strlen(b);
		char *state = malloc(n + 1);
		ssize_t len = state ? base64_decode(b, n, state) : -1;
		struct session *s = i == 0 ? sandbox_session(sb, NULL)
		                           : sandbox_session(sb, id);
		if (len >= 0 && !s &&
		    sandbox_session_new(sb, id, NULL, NULL, 0, &s) < 0)
			s = NULL;
		if (len < 0 || !s ||
		    session_state_decode(s, state, (size_t)len) < 0)
			log_warn("sandbox=%s event=fleet-session-not-restored "
			         "session=%s",
			         sb->id, id);
		else
			sandbox_session_save(sb, s);
		free(state);
	}
}

/* ---- which IDs this node holds ---- */

static bool lease_valid(const struct fleet *f)
{
	return f->lease[0] && now_mono_ms() < f->lease_until_ms;
}

static bool owned(const struct fleet *f, const char *id)
{
	for (size_t i = 0; i < f->nowned; i++)
		if (!strcmp(f->owned[i], id))
			return true;
	return false;
}

static void own_add(struct fleet *f, const char *id)
{
	if (owned(f, id))
		return;
	if (f->nowned == f->capowned) {
		size_t cap = f->capowned ? f->capowned * 2 : 64;
		char **v = realloc(f->owned, cap * sizeof(*v));
		if (!v)
			return;
		f->owned = v;
		f->capowned = cap;
	}
	char *s = strdup(id);
	if (s)
		f->owned[f->nowned++] = s;
}

static void own_drop(struct fleet *f, const char *id)
{
	for (size_t i = 0; i < f->nowned; i++)
		if (!strcmp(f->owned[i], id)) {
			free(f->owned[i]);
			f->owned[i] = f->owned[--f->nowned];
			return;
		}
}

/* This node's record for an owner key (the key's value). */
static char *own_value(const struct fleet *f)
{
	json_t *v = json_pack("{s:s, s:s}", "node", f->node, "url", f->url);
	char *vs = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	return vs;
}

struct running_ctx {
	const char *id;
	const struct sandbox *gone; /* being destroyed: counts as nothing */
	bool running, other;
};

static void running_one(struct sandbox *sb, void *data)
{
	struct running_ctx *c = data;
	if (sb == c->gone || strcmp(sb->id, c->id))
		return;
	c->other = true;
	if (sandbox_running(sb))
		c->running = true;
}

static void release_answer(struct fleet *f, void *ctx, json_t *a,
                           const struct sbx_err *err);

/* A stopped sandbox whose checkpoint has all of it: give its ID up, so
 * that the node the load balancer picks for it next takes it (and this
 * one, if it is that node, takes it back without a restore). */
/* also_key: deleted in the same transaction either way (a destroyed
 * sandbox's checkpoint record goes before its ID is free), or NULL. */
static void own_release(struct fleet *f, const char *id,
                        const struct sandbox *gone, const char *also_key)
{
	struct running_ctx rc = {.id = id, .gone = gone};
	manager_foreach(f->m, running_one, &rc);
	bool release =
	    !rc.running && !(gone && rc.other) && owned(f, id) && !f->draining;
	if (!release && !also_key)
		return;
	char k[128];
	own_key(id, k, sizeof(k));
	char *vs = own_value(f);
	if (!vs)
		return;
	if (release)
		own_drop(f, id);
	json_t *also = json_array();
	if (also_key)
		json_array_append_new(also, json_pack("{s:{s:o}}",
		                                      "request_delete_range",
		                                      "key", b64s(also_key)));
	json_t *ok = json_deep_copy(also);
	if (release)
		json_array_append_new(ok, json_pack("{s:{s:o}}",
		                                    "request_delete_range",
		                                    "key", b64s(k)));
	/* released only while the key is this node's */
	json_t *txn =
	    json_pack("{s:[{s:o, s:s, s:s, s:o}], s:o, s:o}", "compare", "key",
	              b64s(k), "target", "VALUE", "result", "EQUAL", "value",
	              b64s(vs), "success", ok, "failure", also);
	free(vs);
	etcd_post(f, "/v3/kv/txn", txn, release_answer, NULL);
}

static void stop_one(struct sandbox *sb, void *data)
{
	(void)data;
	if (sandbox_running(sb))
		sandbox_stop(sb, "the node's etcd lease ended");
}

/* The lease is gone: nothing is ours any more, and nothing runs. */
static void lease_lost(struct fleet *f, const char *why)
{
	if (f->lease[0])
		log_error("event=fleet-lease-lost node=%s lease=%s why=\"%s\"",
		          f->node, f->lease, why);
	f->lease[0] = '\0';
	for (size_t i = 0; i < f->nowned; i++)
		free(f->owned[i]);
	f->nowned = 0;
	manager_foreach(f->m, stop_one, NULL);
}

static void release_answer(struct fleet *f, void *ctx, json_t *a,
                           const struct sbx_err *err)
{
	(void)f;
	(void)ctx;
	(void)a;
	if (err)
		log_error("event=fleet-release-failed error=\"%s\"", err->msg);
}

/* ---- claims ---- */

static void claims_fail_all(struct fleet *f, int code, const char *why);
static void claim_send(struct claim_op *op);

static void claim_finish(struct claim_op *op, enum fleet_where w,
                         const char *url, const struct sbx_err *err)
{
	struct fleet *f = op->f;
	for (struct claim_op **p = &f->claims; *p; p = &(*p)->next)
		if (*p == op) {
			*p = op->next;
			break;
		}
	while (op->waiters) {
		struct fleet_claim *c = op->waiters;
		op->waiters = c->next;
		if (c->cb)
			c->cb(c->ctx, w, url, err);
		free(c);
	}
	free(op);
}

static void claim_fail(struct claim_op *op, int code, const char *why)
{
	struct sbx_err err = {0};
	sbx_err_set(&err, code, "%s", why);
	claim_finish(op, FLEET_FAIL, NULL, &err);
}

static void restore_done(void *ctx, const struct backup_info *info,
                         const struct sbx_err *err);
static int opts_create(struct manager *m, const char *tenant, const char *id,
                       json_t *o, struct sandbox **out, struct sbx_err *err);
static void ignore_answer(struct fleet *f, void *ctx, json_t *a,
                          const struct sbx_err *err);

struct restore_ctx {
	struct claim_op *op;
	char *tenant;
	uint64_t gen;
	char backup[ID_RANDOM_MAX]; /* the chain's last */
	char *chain;                /* as the registry keeps it */
	json_t *sessions;
	struct backup_op *bop;
};

static void restore_progress_end(struct claim_op *op)
{
	if (op->restores)
		return;
	struct fleet *f = op->f;
	if (op->failed) {
		/* give the ID up: a later request tries again */
		char k[128];
		own_key(op->id, k, sizeof(k));
		etcd_post(f, "/v3/kv/deleterange",
		          json_pack("{s:o}", "key", b64s(k)), ignore_answer,
		          NULL);
		claim_fail(op, f->draining ? EAGAIN : EREMOTEIO, op->why);
		return;
	}
	own_add(f, op->id);
	claim_finish(op, FLEET_HERE, NULL, NULL);
}

static void ignore_answer(struct fleet *f, void *ctx, json_t *a,
                          const struct sbx_err *err)
{
	(void)f;
	(void)ctx;
	(void)a;
	if (err)
		log_error("event=fleet-etcd-error error=\"%s\"", err->msg);
}

/* We hold op->id now: restore what its checkpoints have that this node
 * has not. */
static void claim_take(struct claim_op *op, json_t *ckpts)
{
	struct fleet *f = op->f;
	size_t i;
	json_t *kv;
	op->restores++; /* a restore that fails at once must not end op here */
	json_array_foreach(ckpts, i, kv)
	{
		char *val = unb64(json_object_get(kv, "value"));
		json_t *j = val ? json_loads(val, 0, NULL) : NULL;
		free(val);
		const char *tenant =
		    json_string_value(json_object_get(j, "tenant"));
		json_t *chain = chain_of(j);
		size_t nlinks = json_array_size(chain);
		const char *bid = nlinks ? chain_id(chain, nlinks - 1) : NULL;
		json_int_t gen = json_integer_value(json_object_get(j, "gen"));
		uint64_t have = 0;
		const char *ids[CHAIN_MAX * 2];
		for (size_t l = 0; l < nlinks && l < CHAIN_MAX * 2; l++)
			if (!(ids[l] = chain_id(chain, l)))
				bid = NULL;
		if (!tenant || !bid || gen <= 0 ||
		    strlen(bid) >= ID_RANDOM_MAX || nlinks > CHAIN_MAX * 2) {
			json_decref(chain);
			json_decref(j);
			continue;
		}
		registry_checkpoint_get(f->m->reg, tenant, op->id, &have, NULL,
		                        0);
		struct sandbox *sb = manager_find(f->m, tenant, op->id);
		struct sbx_err err = {0};
		if ((uint64_t)gen <= have ||
		    (!sb &&
		     opts_create(f->m, tenant, op->id,
		                 json_object_get(j, "opts"), &sb, &err) < 0)) {
			if (err.code) {
				op->failed = true;
				snprintf(op->why, sizeof(op->why),
				         "sandbox %s: %s", op->id, err.msg);
			}
			json_decref(chain);
			json_decref(j);
			continue;
		}
		struct restore_ctx *rc = calloc(1, sizeof(*rc));
		if (!rc || !(rc->tenant = strdup(tenant)) ||
		    !(rc->chain = json_dumps(chain, JSON_COMPACT))) {
			if (rc)
				free(rc->tenant);
			free(rc);
			op->failed = true;
			snprintf(op->why, sizeof(op->why), "out of memory");
			json_decref(chain);
			json_decref(j);
			continue;
		}
		rc->op = op;
		rc->gen = (uint64_t)gen;
		rc->sessions = json_incref(json_object_get(j, "sessions"));
		snprintf(rc->backup, sizeof(rc->backup), "%s", bid);
		log_info("sandbox=%s event=fleet-restore tenant=%s gen=%llu "
		         "backup=%s links=%zu had=%llu",
		         op->id, tenant, (unsigned long long)gen, bid, nlinks,
		         (unsigned long long)have);
		op->restores++;
		char mpath[128];
		manifest_path((uint64_t)gen, mpath, sizeof(mpath));
		static const struct backup_cbs cbs = {.done = restore_done};
		backup_restore_chain(f->m->backups, sb, ids, nlinks, CKPT_DIR,
		                     mpath, &cbs, rc, &rc->bop);
		json_decref(chain);
		json_decref(j);
	}
	op->restores--;
	restore_progress_end(op);
}

static void restore_done(void *ctx, const struct backup_info *info,
                         const struct sbx_err *err)
{
	struct restore_ctx *rc = ctx;
	struct claim_op *op = rc->op;
	struct fleet *f = op->f;
	if (f->closing) {
		op->failed = true;
	} else if (!info) {
		op->failed = true;
		snprintf(op->why, sizeof(op->why),
		         "restoring sandbox %s's checkpoint %s: %s", op->id,
		         rc->backup, err ? err->msg : "failed");
		log_error("sandbox=%s event=fleet-restore-failed error=\"%s\"",
		          op->id, op->why);
	} else {
		struct sbx_err e2 = {0};
		registry_checkpoint_put(f->m->reg, rc->tenant, op->id, rc->gen,
		                        rc->chain, &e2);
		struct sandbox *sb = manager_find(f->m, rc->tenant, op->id);
		if (sb) {
			sessions_apply(sb, rc->sessions);
			sb->fleet_saved_uses = sb->uses;
		}
	}
	json_decref(rc->sessions);
	free(rc->tenant);
	free(rc->chain);
	free(rc);
	op->restores--;
	if (f->closing && !op->restores) {
		claim_fail(op, ECANCELED, "sandboxd is shutting down");
		return;
	}
	restore_progress_end(op);
}

static void claim_answer(struct fleet *f, void *ctx, json_t *a,
                         const struct sbx_err *err)
{
	struct claim_op *op = ctx;
	if (err) {
		claim_fail(op, EREMOTEIO, err->msg);
		return;
	}
	json_t *resp = json_object_get(a, "responses");
	if (json_is_true(json_object_get(a, "succeeded"))) {
		/* success: [put, range of checkpoints] */
		claim_take(
		    op, json_object_get(json_object_get(json_array_get(resp, 1),
		                                        "response_range"),
		                        "kvs"));
		return;
	}
	/* failure: [range of the owner key] */
	json_t *kv = json_array_get(
	    json_object_get(
	        json_object_get(json_array_get(resp, 0), "response_range"),
	        "kvs"),
	    0);
	if (!kv) { /* gone meanwhile: try again */
		claim_send(op);
		return;
	}
	char *val = unb64(json_object_get(kv, "value"));
	json_t *j = val ? json_loads(val, 0, NULL) : NULL;
	free(val);
	const char *node = json_string_value(json_object_get(j, "node"));
	const char *url = json_string_value(json_object_get(j, "url"));
	const char *lease = json_string_value(json_object_get(kv, "lease"));
	if (node && !strcmp(node, f->node)) {
		if (lease && !strcmp(lease, f->lease)) {
			own_add(f, op->id);
			claim_finish(op, FLEET_HERE, NULL, NULL);
		} else {
			/* this node's own, from before a restart: the old
			 * lease lives on until its TTL; take the key over */
			char k[128];
			own_key(op->id, k, sizeof(k));
			const char *mod = json_string_value(
			    json_object_get(kv, "mod_revision"));
			log_info("sandbox=%s event=fleet-reclaim old-lease=%s",
			         op->id, lease ? lease : "-");
			json_t *v = json_pack("{s:s, s:s}", "node", f->node,
			                      "url", f->url);
			char *vs = json_dumps(v, JSON_COMPACT);
			json_decref(v);
			char pre[160];
			snprintf(pre, sizeof(pre), "sbx/ckpt/%s/", op->id);
			char end[160];
			snprintf(end, sizeof(end), "sbx/ckpt/%s0", op->id);
			json_t *txn = json_pack(
			    "{s:[{s:o, s:s, s:s, s:s}], "
			    "s:[{s:{s:o, s:o, s:s}}, {s:{s:o, s:o}}], "
			    "s:[{s:{s:o}}]}",
			    "compare", "key", b64s(k), "target", "MOD",
			    "result", "EQUAL", "mod_revision", mod ? mod : "0",
			    "success", "request_put", "key", b64s(k), "value",
			    b64s(vs ? vs : "{}"), "lease", f->lease,
			    "request_range", "key", b64s(pre), "range_end",
			    b64s(end), "failure", "request_range", "key",
			    b64s(k));
			free(vs);
			etcd_post(f, "/v3/kv/txn", txn, claim_answer, op);
		}
		json_decref(j);
		return;
	}
	char u[300];
	snprintf(u, sizeof(u), "%s", url ? url : "");
	json_decref(j);
	if (!u[0]) {
		claim_fail(op, EREMOTEIO,
		           "the owner's record in etcd is unreadable");
		return;
	}
	claim_finish(op, FLEET_THERE, u, NULL);
}

/* create sbx/own/<id> bound to our lease if absent (and read the
 * checkpoints), else read who has it */
static void claim_send(struct claim_op *op)
{
	struct fleet *f = op->f;
	char k[128], pre[160], end[160];
	own_key(op->id, k, sizeof(k));
	snprintf(pre, sizeof(pre), "sbx/ckpt/%s/", op->id);
	snprintf(end, sizeof(end), "sbx/ckpt/%s0", op->id); /* '/'+1 */
	char *vs = own_value(f);
	json_t *txn =
	    json_pack("{s:[{s:o, s:s, s:s, s:s}], "
	              "s:[{s:{s:o, s:o, s:s}}, {s:{s:o, s:o}}], "
	              "s:[{s:{s:o}}]}",
	              "compare", "key", b64s(k), "target", "CREATE", "result",
	              "EQUAL", "create_revision", "0", "success", "request_put",
	              "key", b64s(k), "value", b64s(vs ? vs : "{}"), "lease",
	              f->lease, "request_range", "key", b64s(pre), "range_end",
	              b64s(end), "failure", "request_range", "key", b64s(k));
	free(vs);
	etcd_post(f, "/v3/kv/txn", txn, claim_answer, op);
}

int fleet_claim(struct fleet *f, const char *id, fleet_claim_cb cb, void *ctx,
                struct fleet_claim **out)
{
	if (!f->draining && lease_valid(f) && owned(f, id))
		return 1;
	struct fleet_claim *c = calloc(1, sizeof(*c));
	struct sbx_err err = {0};
	if (!c || strlen(id) >= ID_MAX) {
		free(c);
		sbx_err_set(&err, ENOMEM, "out of memory");
		if (cb)
			cb(ctx, FLEET_FAIL, NULL, &err);
		*out = NULL;
		return 0; /* answered */
	}
	c->cb = cb;
	c->ctx = ctx;
	*out = c;
	struct claim_op *op;
	for (op = f->claims; op; op = op->next)
		if (!strcmp(op->id, id))
			break;
	if (!op) {
		op = calloc(1, sizeof(*op));
		if (!op) {
			free(c);
			*out = NULL;
			sbx_err_set(&err, ENOMEM, "out of memory");
			if (cb)
				cb(ctx, FLEET_FAIL, NULL, &err);
			return 0;
		}
		op->f = f;
		snprintf(op->id, sizeof(op->id), "%s", id);
		op->next = f->claims;
		f->claims = op;
		c->op = op;
		c->next = op->waiters;
		op->waiters = c;
		if (f->draining)
			claim_fail(op, EAGAIN, "this node is draining");
		else if (lease_valid(f))
			claim_send(op);
		/* else: sent once the lease is granted */
		return 0;
	}
	c->op = op;
	c->next = op->waiters;
	op->waiters = c;
	return 0;
}

void fleet_claim_cancel(struct fleet_claim *c)
{
	if (!c)
		return;
	for (struct fleet_claim **p = &c->op->waiters; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			free(c);
			return;
		}
}

static void claims_fail_all(struct fleet *f, int code, const char *why)
{
	while (f->claims)
		claim_fail(f->claims, code, why);
}

/* ---- the lease ---- */

static void lease_grant(struct fleet *f);

static void keepalive_answer(struct fleet *f, void *ctx, json_t *a,
                             const struct sbx_err *err)
{
	uint64_t sent = (uint64_t)(uintptr_t)ctx;
	f->renewing = false;
	if (err) {
		log_error("event=fleet-keepalive-failed error=\"%s\"",
		          err->msg);
		if (!lease_valid(f))
			lease_lost(f, "etcd unreachable for the lease's TTL");
		return;
	}
	json_t *r = json_object_get(a, "result");
	const char *ttl = json_string_value(json_object_get(r, "TTL"));
	const char *id = json_string_value(json_object_get(r, "ID"));
	if (!id || strcmp(id, f->lease))
		return; /* an answer about a lease given up meanwhile */
	if (!ttl || strtoull(ttl, NULL, 10) == 0) {
		lease_lost(f, "etcd says the lease expired");
		return;
	}
	f->lease_until_ms = sent + f->ttl_s * 1000;
}

static void grant_answer(struct fleet *f, void *ctx, json_t *a,
                         const struct sbx_err *err)
{
	uint64_t sent = (uint64_t)(uintptr_t)ctx;
	f->granting = false;
	const char *id = json_string_value(json_object_get(a, "ID"));
	if (err || !id || strlen(id) >= sizeof(f->lease)) {
		log_error("event=fleet-lease-grant-failed error=\"%s\"",
		          err ? err->msg : "no lease ID in etcd's answer");
		claims_fail_all(f, EREMOTEIO,
		                err ? err->msg : "etcd granted no lease");
		return;
	}
	snprintf(f->lease, sizeof(f->lease), "%s", id);
	f->lease_until_ms = sent + f->ttl_s * 1000;
	log_info("event=fleet-lease node=%s lease=%s ttl=%llu", f->node,
	         f->lease, (unsigned long long)f->ttl_s);
	for (struct claim_op *op = f->claims; op; op = op->next)
		claim_send(op);
}

static void lease_grant(struct fleet *f)
{
	if (f->granting || f->draining)
		return;
	f->granting = true;
	etcd_post(f, "/v3/lease/grant",
	          json_pack("{s:I}", "TTL", (json_int_t)f->ttl_s), grant_answer,
	          (void *)(uintptr_t)now_mono_ms());
}

static void lease_tick(struct loop_timer *t)
{
	struct fleet *f =
	    (struct fleet *)((char *)t - offsetof(struct fleet, lease_t));
	if (f->lease[0] && !lease_valid(f))
		lease_lost(f, "etcd unreachable for the lease's TTL");
	if (!f->lease[0]) {
		lease_grant(f);
	} else if (!f->renewing) {
		f->renewing = true;
		etcd_post(f, "/v3/lease/keepalive",
		          json_pack("{s:s}", "ID", f->lease), keepalive_answer,
		          (void *)(uintptr_t)now_mono_ms());
	}
	uint64_t every = f->ttl_s * 1000 / 3;
	loop_timer_start(f->loop, t, every < 500 ? 500 : every);
}

/* ---- checkpoints ---- */

/* What a sandbox was made with, for the node that takes it next. */
static json_t *opts_encode(const struct sandbox *sb)
{
	json_t *env = json_array();
	for (size_t i = 0; env && i < sb->envc; i++)
		json_array_append_new(env, json_string(sb->env[i]));
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:b, s:o, s:s?}",
	                 "memoryBytes", (json_int_t)sb->limits.memory_bytes,
	                 "pids", (json_int_t)sb->limits.pids, "cpuMillis",
	                 (json_int_t)sb->limits.cpu_millis, "diskBytes",
	                 (json_int_t)sb->disk_bytes, "sleepAfterMs",
	                 (json_int_t)sb->sleep_after_ms, "keepAlive",
	                 sb->keep_alive, "env", env ? env : json_array(),
	                 "labels", sb->labels);
}

/* Make tenant's id here as the checkpoint's record says it was made. */
static int opts_create(struct manager *m, const char *tenant, const char *id,
                       json_t *o, struct sandbox **out, struct sbx_err *err)
{
	struct sandbox_opts opts = {0};
	json_t *env = json_object_get(o, "env");
	size_t n = json_array_size(env), k = 0;
	const char **v = n ? calloc(n, sizeof(*v)) : NULL;
	for (size_t i = 0; v && i < n; i++)
		if (json_is_string(json_array_get(env, i)))
			v[k++] = json_string_value(json_array_get(env, i));
	opts.limits.memory_bytes =
	    (uint64_t)json_integer_value(json_object_get(o, "memoryBytes"));
	opts.limits.pids =
	    (uint32_t)json_integer_value(json_object_get(o, "pids"));
	opts.limits.cpu_millis =
	    (uint32_t)json_integer_value(json_object_get(o, "cpuMillis"));
	opts.disk_bytes =
	    (uint64_t)json_integer_value(json_object_get(o, "diskBytes"));
	opts.sleep_after_ms =
	    (uint64_t)json_integer_value(json_object_get(o, "sleepAfterMs"));
	opts.keep_alive = json_is_true(json_object_get(o, "keepAlive"));
	opts.env = v;
	opts.envc = k;
	opts.labels = json_string_value(json_object_get(o, "labels"));
	int r = manager_create(m, tenant, id, &opts, out, err);
	free(v);
	return r;
}

static void ckpt_next(struct fleet *f);
static bool ckpt_queue(struct fleet *f, struct sandbox *sb, bool stop_after);

static void ckpt_free(struct ckpt *c)
{
	json_decref(c->old_chain);
	json_decref(c->chain);
	free(c->tenant);
	free(c);
}

static void ckpt_unlink(struct ckpt *c)
{
	for (struct ckpt **p = &c->f->ckpts; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			return;
		}
}

static void ckpt_end(struct ckpt *c, bool ok)
{
	struct fleet *f = c->f;
	ckpt_unlink(c);
	f->nrunning--;
	struct sandbox *sb = manager_find(f->m, c->tenant, c->id);
	bool redo = c->redo && ok && sb && f->draining && sandbox_running(sb);
	if (sb) {
		if (ok)
			sb->fleet_saved_uses = c->uses;
		if (c->stop_after && !redo && sandbox_running(sb) &&
		    (!ok || sb->uses == c->uses)) {
			sandbox_stop(sb, "idle");
			if (ok && !f->draining)
				own_release(f, c->id, NULL, NULL);
		}
	}
	if (f->draining) {
		if (ok)
			f->drain_n++;
		else
			f->drain_failed++;
	}
	ckpt_free(c);
	if (redo)
		ckpt_queue(f, sb, true);
	ckpt_next(f);
}

static void deleted(void *ctx, const struct sbx_err *err)
{
	(void)ctx;
	if (err)
		log_error("event=fleet-checkpoint-delete-failed error=\"%s\"",
		          err->msg);
}

static void ckpt_recorded(struct fleet *f, void *ctx, json_t *a,
                          const struct sbx_err *err)
{
	struct ckpt *c = ctx;
	(void)a;
	if (err) {
		log_error(
		    "sandbox=%s event=fleet-checkpoint-failed error=\"%s\"",
		    c->id, err->msg);
		/* (its archive stays: the record may have been written and
		 * only the answer lost) */
		ckpt_end(c, false);
		return;
	}
	struct sbx_err e2 = {0};
	char *text = json_dumps(c->chain, JSON_COMPACT);
	registry_checkpoint_put(f->m->reg, c->tenant, c->id, c->gen,
	                        text ? text : c->backup, &e2);
	free(text);
	size_t n = json_array_size(c->chain);
	json_t *last = json_array_get(c->chain, n - 1);
	log_info("sandbox=%s event=fleet-checkpoint gen=%llu backup=%s "
	         "kind=%s bytes=%lld links=%zu",
	         c->id, (unsigned long long)c->gen, c->backup,
	         c->empty                                       ? "unchanged"
	         : json_is_true(json_object_get(last, "delta")) ? "delta"
	                                                        : "full",
	         (long long)json_integer_value(json_object_get(last, "bytes")),
	         n);
	if (c->empty) /* the chain has all of it: this one goes */
		backup_delete(f->m->backups, c->tenant, c->backup, deleted,
		              NULL);
	/* what no chain needs any more: the old one, once a full one is
	 * recorded */
	for (size_t i = 0; i < json_array_size(c->old_chain); i++) {
		const char *id = chain_id(c->old_chain, i);
		if (id && !chain_has(c->chain, id))
			backup_delete(f->m->backups, c->tenant, id, deleted,
			              NULL);
	}
	ckpt_end(c, true);
}

static void ckpt_backup_done(void *ctx, const struct backup_info *info,
                             const struct sbx_err *err)
{
	struct ckpt *c = ctx;
	struct fleet *f = c->f;
	c->op = NULL;
	if (f->closing) {
		ckpt_unlink(c);
		ckpt_free(c);
		return;
	}
	if (!c->running) { /* failed inside backup_create */
		c->done = true;
		return;
	}
	if (!info) {
		log_error(
		    "sandbox=%s event=fleet-checkpoint-failed error=\"%s\"",
		    c->id, err ? err->msg : "failed");
		ckpt_end(c, false);
		return;
	}
	snprintf(c->backup, sizeof(c->backup), "%s", info->id);
	/* a delta extends the chain; a full one starts a new one; a delta of
	 * nothing (used, not changed: its sessions may have) adds no link */
	c->empty = info->delta && !info->changes && c->old_chain;
	c->chain = info->delta && c->old_chain ? json_deep_copy(c->old_chain)
	                                       : json_array();
	if (!c->empty)
		json_array_append_new(
		    c->chain, json_pack("{s:s, s:I, s:b}", "backup", info->id,
		                        "bytes", (json_int_t)info->size_bytes,
		                        "delta", info->delta));
	const char *last = chain_id(c->chain, json_array_size(c->chain) - 1);
	struct sandbox *sb = manager_find(f->m, c->tenant, c->id);
	char k[256];
	ckpt_key(c->id, c->tenant, k, sizeof(k));
	json_t *v = json_pack(
	    "{s:s, s:I, s:s, s:O, s:s, s:o*, s:o*}", "tenant", c->tenant, "gen",
	    (json_int_t)c->gen, "backup", last ? last : c->backup, "chain",
	    c->chain, "node", f->node, "opts", sb ? opts_encode(sb) : NULL,
	    "sessions", sb ? sessions_encode(sb) : NULL);
	char *vs = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	etcd_post(f, "/v3/kv/put",
	          json_pack("{s:o, s:o}", "key", b64s(k), "value",
	                    b64s(vs ? vs : "{}")),
	          ckpt_recorded, c);
	free(vs);
}

static void ckpt_run(struct ckpt *c)
{
	struct fleet *f = c->f;
	struct sandbox *sb = manager_find(f->m, c->tenant, c->id);
	f->nrunning++;
	/* a node that lost its lease writes nothing (nor starts the sandbox
	 * again): another node may have it now */
	if (!sb || !f->m->backups || !lease_valid(f) || !owned(f, c->id)) {
		ckpt_end(c, false);
		return;
	}
	uint64_t gen = 0;
	char text[CHAIN_TEXT_MAX];
	registry_checkpoint_get(f->m->reg, c->tenant, c->id, &gen, text,
	                        sizeof(text));
	c->old_chain = chain_parse(text);
	c->gen = gen + 1;
	c->uses = sb->uses;
	char base[128], manifest[128];
	manifest_path(gen, base, sizeof(base));
	manifest_path(c->gen, manifest, sizeof(manifest));
	static const struct backup_cbs cbs = {.done = ckpt_backup_done};
	int r = backup_checkpoint(f->m->backups, sb, CKPT_DIR,
	                          chain_extends(c->old_chain) ? base : NULL,
	                          manifest, &cbs, c, &c->op);
	if (c->done || r < 0) {
		ckpt_end(c, false);
		return;
	}
	c->running = true;
}

static void drain_finish(struct fleet *f)
{
	if (f->drain_done)
		f->drain_done(f->drain_ctx, f->drain_n, f->drain_failed);
	f->drain_done = NULL;
}

/* The drain answers once etcd has dropped the lease (or could not say):
 * from then on another node takes any of its sandboxes at once, where a
 * key still held would have sent it to this node until the TTL ran out. */
static void drain_revoked(struct fleet *f, void *ctx, json_t *a,
                          const struct sbx_err *err)
{
	ignore_answer(f, ctx, a, err);
	drain_finish(f);
}

static void ckpt_next(struct fleet *f)
{
	for (struct ckpt *c = f->ckpts; c && f->nrunning < CKPT_PARALLEL;
	     c = c->next)
		if (!c->running && !c->done && !c->op) {
			c->running = false;
			ckpt_run(c);
			return ckpt_next(f); /* the list may have changed */
		}
	if (f->draining && !f->ckpts && !f->drain_released) {
		f->drain_released = true;
		bool revoking = f->lease[0];
		if (revoking)
			etcd_post(f, "/v3/lease/revoke",
			          json_pack("{s:s}", "ID", f->lease),
			          drain_revoked, NULL);
		lease_lost(f, "drained");
		if (!revoking)
			drain_finish(f);
	}
}

static bool ckpt_queue(struct fleet *f, struct sandbox *sb, bool stop_after)
{
	for (struct ckpt *c = f->ckpts; c; c = c->next)
		if (!strcmp(c->id, sb->id) && !strcmp(c->tenant, sb->tenant)) {
			c->stop_after |= stop_after;
			if (f->draining && (c->running || c->op))
				c->redo = true;
			return true;
		}
	struct ckpt *c = calloc(1, sizeof(*c));
	if (!c || !(c->tenant = strdup(sb->tenant))) {
		free(c);
		return false;
	}
	c->f = f;
	snprintf(c->id, sizeof(c->id), "%s", sb->id);
	c->stop_after = stop_after;
	struct ckpt **p = &f->ckpts;
	while (*p)
		p = &(*p)->next;
	*p = c;
	return true;
}

static bool dirty(const struct sandbox *sb)
{
	return sb->uses != sb->fleet_saved_uses;
}

bool fleet_sandbox_idle(struct fleet *f, struct sandbox *sb)
{
	if (!owned(f, sb->id) || !f->m->backups)
		return false;
	if (!dirty(sb)) { /* its checkpoint has it all */
		sandbox_stop(sb, "idle");
		own_release(f, sb->id, NULL, NULL);
		return true;
	}
	if (!ckpt_queue(f, sb, true))
		return false;
	ckpt_next(f);
	return true;
}

static void periodic_one(struct sandbox *sb, void *data)
{
	struct fleet *f = data;
	if (sandbox_running(sb) && dirty(sb) && owned(f, sb->id))
		ckpt_queue(f, sb, false);
}

static void ckpt_tick(struct loop_timer *t)
{
	struct fleet *f =
	    (struct fleet *)((char *)t - offsetof(struct fleet, ckpt_t));
	if (!f->draining && lease_valid(f) && f->m->backups) {
		manager_foreach(f->m, periodic_one, f);
		ckpt_next(f);
	}
	loop_timer_start(f->loop, t, f->m->cfg->checkpoint_every_ms);
}

static void drain_one(struct sandbox *sb, void *data)
{
	struct fleet *f = data;
	if (dirty(sb) && owned(f, sb->id))
		ckpt_queue(f, sb, true);
	else if (sandbox_running(sb))
		sandbox_stop(sb, "the node is draining");
}

void fleet_drain(struct fleet *f,
                 void (*done)(void *ctx, unsigned n, unsigned failed),
                 void *ctx)
{
	if (f->draining) {
		done(ctx, 0, 0);
		return;
	}
	log_info("event=fleet-drain node=%s sandboxes=%zu", f->node,
	         f->m->count);
	f->draining = true;
	f->drain_done = done;
	f->drain_ctx = ctx;
	/* claims waiting for etcd fail now; one restoring fails when its
	 * restore ends (and gives the ID up) */
	for (struct claim_op *op = f->claims, *next; op; op = next) {
		next = op->next;
		if (!op->restores) {
			claim_fail(op, EAGAIN, "this node is draining");
		} else {
			op->failed = true;
			snprintf(op->why, sizeof(op->why),
			         "this node is draining");
		}
	}
	if (f->m->backups && lease_valid(f))
		manager_foreach(f->m, drain_one, f);
	ckpt_next(f);
}

void fleet_sandbox_created(struct fleet *f, struct sandbox *sb)
{
	if (owned(f, sb->id))
		return;
	struct fleet_claim *c;
	/* made here from a face that chose the ID itself: take it */
	fleet_claim(f, sb->id, NULL, NULL, &c);
}

void fleet_sandbox_gone(struct fleet *f, struct sandbox *sb)
{
	char k[256];
	ckpt_key(sb->id, sb->tenant, k, sizeof(k));
	if (owned(f, sb->id) && f->m->backups) {
		/* its chain is the latest: no one needs it any more */
		uint64_t gen = 0;
		char text[CHAIN_TEXT_MAX];
		registry_checkpoint_get(f->m->reg, sb->tenant, sb->id, &gen,
		                        text, sizeof(text));
		json_t *chain = chain_parse(text);
		for (size_t i = 0; i < json_array_size(chain); i++)
			if (chain_id(chain, i))
				backup_delete(f->m->backups, sb->tenant,
				              chain_id(chain, i), deleted,
				              NULL);
		json_decref(chain);
	}
	for (struct ckpt *c = f->ckpts; c; c = c->next)
		if (!strcmp(c->id, sb->id) && !strcmp(c->tenant, sb->tenant))
			c->stop_after = false;
	/* its checkpoint record goes; if it was the last sandbox of that ID
	 * here, the ID is free again */
	own_release(f, sb->id, sb, k);
}

/* ---- life ---- */

int fleet_new(struct manager *m, struct fleet **out, struct sbx_err *err)
{
	const struct config *cfg = m->cfg;
	int rc = curl_fns_load("A fleet (--etcd)", err);
	if (rc < 0)
		return rc;
	struct fleet *f = calloc(1, sizeof(*f));
	if (!f)
		return sbx_err_set(err, ENOMEM, "out of memory");
	f->m = m;
	f->loop = m->loop;
	f->url = cfg->advertise_url;
	f->ttl_s = cfg->etcd_ttl_s;
	f->etcd = strdup(cfg->etcd_url);
	if (!f->etcd) {
		free(f);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	size_t l = strlen(f->etcd);
	while (l && f->etcd[l - 1] == '/')
		f->etcd[--l] = '\0';
	if (cfg->node_name) {
		snprintf(f->node, sizeof(f->node), "%s", cfg->node_name);
	} else {
		const char *h = strstr(f->url, "://");
		h = h ? h + 3 : f->url;
		snprintf(f->node, sizeof(f->node), "%.*s", (int)strcspn(h, "/"),
		         h);
	}
	if ((rc = curl_loop_new(m->loop, on_done, f, &f->cl, err)) < 0) {
		free(f->etcd);
		free(f);
		return rc;
	}
	f->lease_t.cb = lease_tick;
	f->ckpt_t.cb = ckpt_tick;
	lease_grant(f);
	uint64_t every = f->ttl_s * 1000 / 3;
	loop_timer_start(f->loop, &f->lease_t, every < 500 ? 500 : every);
	loop_timer_start(f->loop, &f->ckpt_t, cfg->checkpoint_every_ms);
	*out = f;
	return 0;
}

void fleet_close(struct fleet *f)
{
	if (!f)
		return;
	f->closing = true;
	f->m->fleet = NULL;
	loop_timer_stop(f->loop, &f->lease_t);
	loop_timer_stop(f->loop, &f->ckpt_t);
	while (f->calls) {
		struct etcd_call *c = f->calls;
		f->calls = c->next;
		call_free(c);
	}
	/* claims restoring end when their restores fail, with the sandboxes */
	for (struct claim_op *op = f->claims, *next; op; op = next) {
		next = op->next;
		if (!op->restores)
			claim_fail(op, ECANCELED, "sandboxd is shutting down");
	}
	/* checkpoints still writing end with their sandboxes */
	for (struct ckpt *c = f->ckpts, *next; c; c = next) {
		next = c->next;
		if (!c->op) {
			ckpt_unlink(c);
			ckpt_free(c);
		}
	}
	if (f->drain_done)
		f->drain_done(f->drain_ctx, f->drain_n, f->drain_failed + 1);
	f->drain_done = NULL;
}

void fleet_free(struct fleet *f)
{
	if (!f)
		return;
	if (!f->closing)
		fleet_close(f);
	claims_fail_all(f, ECANCELED, "sandboxd is shutting down");
	while (f->ckpts) {
		struct ckpt *c = f->ckpts;
		f->ckpts = c->next;
		ckpt_free(c);
	}
	for (size_t i = 0; i < f->nowned; i++)
		free(f->owned[i]);
	free(f->owned);
	curl_loop_free(f->cl);
	free(f->etcd);
	free(f);
}

const char *fleet_node_name(const struct fleet *f)
{
	return f->node;
}

bool fleet_draining(const struct fleet *f)
{
	return f->draining;
}
