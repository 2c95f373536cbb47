/* /v1 backups (shared/spec/v1.md "Backups"): create, list, info, archive,
 * delete, and restore (POST /v1/sandbox/{id}/restore {backup}). The work
 * is core/backup.c's; this file decodes requests and encodes answers. With
 * Accept: text/event-stream, create and restore answer as a stream of
 * `progress` events ({bytes, totalBytes}) and a final `done` (the backup's
 * info) or `error`; else one JSON answer at the end. A client that leaves
 * cancels the operation: nothing of a cancelled backup stays. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/source.h"
#include "core/backup.h"
#include "http/relay.h"
#include "lib/path.h"
#include "lib/util.h"

#define MAX_EXCLUDES 64
#define MAX_PATTERN 256
#define MAX_TTL_S (10ull * 366 * 24 * 3600)

static json_t *info_json(struct api *a, const struct backup_info *in)
{
	char created[32], expires[32];
	iso8601_ms(in->created_ms, created, sizeof(created));
	json_t *ex = json_array();
	for (size_t i = 0; i < in->nexcludes; i++)
		json_array_append_new(ex, json_string(in->excludes[i]));
	json_t *j = json_pack(
	    "{s:s, s:s, s:s, s:o, s:I, s:s, s:s, s:s}", "id", in->id,
	    "sandboxId", in->sandbox, "dir", in->dir, "excludes", ex,
	    "sizeBytes", (json_int_t)in->size_bytes, "sha256", in->sha256,
	    "createdAt", created, "store", backups_store_name(a->m->backups));
	if (in->expires_ms) {
		iso8601_ms(in->expires_ms, expires, sizeof(expires));
		json_object_set_new(j, "expiresAt", json_string(expires));
	} else {
		json_object_set_new(j, "expiresAt", json_null());
	}
	return j;
}

/* An engine error as status and code. */
static const struct v1_errmap backup_errs[] = {
    {ENOENT, 404, "backup_not_found"},
    {EKEYEXPIRED, 410, "backup_expired"},
    {ENOTDIR, 404, "file_not_found"},
    {EACCES, 403, "permission_denied"},
    {EPERM, 403, "permission_denied"},
    {EDQUOT, 507, "disk_full"},
    {ENOSPC, 507, "disk_full"},
    {EFBIG, 507, "disk_full"},
    {EBADMSG, 502, "backup_corrupt"},
    {EKEYREJECTED, 502, "backup_store_denied"},
    {EREMOTEIO, 503, "backup_store_unavailable"},
    {ECONNREFUSED, 503, "backup_store_unavailable"},
    {ETIMEDOUT, 503, "backup_store_unavailable"},
    {EHOSTUNREACH, 503, "backup_store_unavailable"},
    {ECANCELED, 409, "cancelled"},
    {ESRCH, 409, "sandbox_stopped"},
    V1_ERR_INTERNAL,
};

static void answer_error(struct http_req *r, const struct sbx_err *err)
{
	v1_error_of(r, err, backup_errs);
}

/* ---- create and restore: one request per operation
 * --------------------------- */

struct v1_bop {
	struct api *a;
	struct http_held held; /* JSON answer */
	struct relay *rl;      /* SSE answer */
	struct backup_op *op;  /* NULL once done */
	bool restore;
	char sandbox[64];
};

static void bop_progress(void *ctx, uint64_t bytes, uint64_t total)
{
	struct v1_bop *q = ctx;
	if (q->rl)
		relay_event_json(q->rl, "progress",
		                 json_pack("{s:I, s:I}", "bytes",
		                           (json_int_t)bytes, "totalBytes",
		                           (json_int_t)total));
}

static void bop_done(void *ctx, const struct backup_info *info,
                     const struct sbx_err *err)
{
	struct v1_bop *q = ctx;
	struct http_req *r = http_take(&q->held);
	q->op = NULL;
	json_t *j = NULL;
	if (info) {
		j = info_json(q->a, info);
		if (q->restore) {
			json_t *k =
			    json_pack("{s:s, s:s, s:o}", "id", q->sandbox,
			              "restoredFrom", info->id, "backup", j);
			j = k;
		}
	}
	if (q->rl) {
		if (j) {
			relay_event_json(q->rl, "done", j);
		} else {
			relay_event_json(
			    q->rl, "error",
			    json_pack("{s:s, s:s}", "error", err->msg, "code",
			              v1_err_row(backup_errs, err)->code));
		}
		relay_end(q->rl);
	} else if (r) {
		if (j)
			http_respond_json(r, q->restore ? 200 : 201, j);
		else
			answer_error(r, err);
	} else {
		json_decref(j);
	}
	free(q);
}

static void bop_resume(void *ctx)
{
	(void)ctx; /* progress events are small and few */
}

/* the client left (the relay's, or the held request's) */
static void bop_abandoned(void *ctx)
{
	struct v1_bop *q = ctx;
	if (q->op)
		backup_op_cancel(q->op);
}

static const struct relay_ops bop_relay = {bop_resume, bop_abandoned};

static const struct backup_cbs bop_cbs = {bop_progress, bop_done};

/* The request's answer: SSE when asked for, else JSON at the end. */
static struct v1_bop *bop_new(struct api *a, struct http_req *r, bool restore)
{
	struct v1_bop *q = calloc(1, sizeof(*q));
	if (!q) {
		v1_error(r, 500, "internal", "out of memory");
		return NULL;
	}
	q->a = a;
	q->restore = restore;
	const char *acc = http_header(r, "Accept");
	if (acc && strstr(acc, "text/event-stream")) {
		q->rl = relay_open(r, a->m->loop, NULL, &bop_relay, q);
		if (!q->rl) {
			free(q);
			return NULL;
		}
	} else {
		http_hold(&q->held, r, bop_abandoned, q);
	}
	return q;
}

/* dir from the body: absolute, normalized, not / and not the kernel's
 * own trees; into out ("/..."). NULL body value: def. */
static int parse_dir(struct http_req *r, json_t *v, const char *def, char *out,
                     size_t cap)
{
	char rel[4096];
	if (!v || json_is_null(v)) {
		if (!def) {
			out[0] = '\0';
			return 0;
		}
		snprintf(out, cap, "%s", def);
		return 0;
	}
	if (!json_is_string(v) || json_string_value(v)[0] != '/' ||
	    strlen(json_string_value(v)) != json_string_length(v) ||
	    path_beneath("/", json_string_value(v), rel, sizeof(rel)) !=
	        PATH_OK) {
		v1_error(r, 400, "invalid_request",
		         "dir: an absolute path inside the sandbox");
		return -1;
	}
	if (!rel[0] || !strcmp(rel, "proc") || !strncmp(rel, "proc/", 5) ||
	    !strcmp(rel, "dev") || !strncmp(rel, "dev/", 4) ||
	    !strcmp(rel, "sys") || !strncmp(rel, "sys/", 4)) {
		v1_error(r, 400, "invalid_request",
		         "dir: not /, /proc, /dev or /sys (a snapshot keeps "
		         "the whole filesystem)");
		return -1;
	}
	snprintf(out, cap, "/%s", rel);
	return 0;
}

void v1_backup_create(struct api *a, struct http_req *r, struct route_match *m)
{
	char dir[4200];
	const char *ex[MAX_EXCLUDES];
	size_t nex = 0;
	uint64_t ttl = 0;
	json_t *body = v1_body(r);
	if (!body)
		return;
	json_t *excludes = json_object_get(body, "excludes"),
	       *tv = json_object_get(body, "ttlSeconds");
	if (parse_dir(r, json_object_get(body, "dir"), "/workspace", dir,
	              sizeof(dir)) < 0)
		goto out;
	if (excludes && !json_is_null(excludes)) {
		if (!json_is_array(excludes) ||
		    json_array_size(excludes) > MAX_EXCLUDES) {
			v1_error(r, 400, "invalid_request",
			         "excludes: an array of at most %d patterns",
			         MAX_EXCLUDES);
			goto out;
		}
		size_t i;
		json_t *e;
		json_array_foreach(excludes, i, e)
		{
			const char *p = json_string_value(e);
			if (!p || !*p || strlen(p) != json_string_length(e) ||
			    strlen(p) > MAX_PATTERN) {
				v1_error(r, 400, "invalid_request",
				         "excludes: patterns of 1 to %d bytes",
				         MAX_PATTERN);
				goto out;
			}
			ex[nex++] = p;
		}
	}
	if (tv && !json_is_null(tv)) {
		if (!json_is_integer(tv) || json_integer_value(tv) < 1 ||
		    (uint64_t)json_integer_value(tv) > MAX_TTL_S) {
			v1_error(r, 400, "invalid_request",
			         "ttlSeconds: a positive integer (at most 10 "
			         "years)");
			goto out;
		}
		ttl = (uint64_t)json_integer_value(tv);
	}
	struct sandbox *sb = v1_sandbox(a, r, m, false);
	if (!sb)
		goto out;
	struct v1_bop *q = bop_new(a, r, false);
	if (q) {
		snprintf(q->sandbox, sizeof(q->sandbox), "%s", sandbox_id(sb));
		backup_create(a->m->backups, sb, dir, ex, nex, ttl, &bop_cbs, q,
		              &q->op);
	}
out:
	json_decref(body);
}

void v1_backup_restore(struct api *a, struct http_req *r, struct route_match *m,
                       json_t *body)
{
	char dir[4200];
	json_t *id = json_object_get(body, "backup");
	if (!json_is_string(id)) {
		v1_error(r, 400, "invalid_request", "backup: an id string");
		return;
	}
	if (parse_dir(r, json_object_get(body, "dir"), NULL, dir, sizeof(dir)) <
	    0)
		return;
	struct sandbox *sb = v1_sandbox(a, r, m, true);
	if (!sb)
		return;
	struct v1_bop *q = bop_new(a, r, true);
	if (q) {
		snprintf(q->sandbox, sizeof(q->sandbox), "%s", sandbox_id(sb));
		backup_restore(a->m->backups, sb, json_string_value(id),
		               dir[0] ? dir : NULL, &bop_cbs, q, &q->op);
	}
}

/* ---- list, info, delete: answered when the store has
 * -------------------------- */

static void listed(void *ctx, struct backup_info *const *v, size_t n,
                   const struct sbx_err *err)
{
	struct v1_held *q = ctx;
	struct http_req *r = http_take(&q->held);
	if (r && err) {
		answer_error(r, err);
	} else if (r) {
		json_t *arr = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(arr, info_json(q->a, v[i]));
		http_respond_json(r, 200, json_pack("{s:o}", "backups", arr));
	}
	free(q);
}

void v1_backup_list(struct api *a, struct http_req *r, struct route_match *m)
{
	struct v1_held *q = v1_held_new(a, r, sizeof(*q));
	if (q)
		backup_list(a->m->backups, m->tenant, listed, q);
}

static void got(void *ctx, const struct backup_info *info,
                const struct sbx_err *err)
{
	struct v1_held *q = ctx;
	struct http_req *r = http_take(&q->held);
	if (r && err)
		answer_error(r, err);
	else if (r)
		http_respond_json(r, 200, info_json(q->a, info));
	free(q);
}

void v1_backup_info(struct api *a, struct http_req *r, struct route_match *m)
{
	struct v1_held *q = v1_held_new(a, r, sizeof(*q));
	if (q)
		backup_get(a->m->backups, m->tenant, m->params[0], got, q);
}

static void removed(void *ctx, const struct sbx_err *err)
{
	struct v1_held *q = ctx;
	struct http_req *r = http_take(&q->held);
	if (r && err)
		answer_error(r, err);
	else if (r)
		http_respond_empty(r, 204);
	free(q);
}

void v1_backup_delete(struct api *a, struct http_req *r, struct route_match *m)
{
	struct v1_held *q = v1_held_new(a, r, sizeof(*q));
	if (q)
		backup_delete(a->m->backups, m->tenant, m->params[0], removed,
		              q);
}

/* ---- the archive, streamed
 * ------------------------------------------------------ */

struct v1_barch {
	struct api *a;
	struct http_held held; /* until the stream is open */
	struct relay *rl;
	struct backup_read *rd; /* NULL once done */
};

/* the client left before the stream began */
static void arch_gone(void *ctx)
{
	struct v1_barch *q = ctx;
	if (q->rd)
		backup_read_cancel(q->rd);
	free(q);
}

static void arch_resume(void *ctx)
{
	struct v1_barch *q = ctx;
	if (q->rd)
		backup_read_resume(q->rd);
}

/* no callback comes after a cancel: the context goes now */
static void arch_abandoned(void *ctx)
{
	struct v1_barch *q = ctx;
	if (q->rd)
		backup_read_cancel(q->rd);
	relay_end(q->rl);
	free(q);
}

static const struct relay_ops arch_relay = {arch_resume, arch_abandoned};

static void arch_head(void *ctx, const struct backup_info *info)
{
	struct v1_barch *q = ctx;
	struct http_req *r = http_take(&q->held);
	char disp[128];
	snprintf(disp, sizeof(disp), "attachment; filename=\"%s.tar.zst\"",
	         info->id);
	const char *headers[] = {"Content-Disposition", disp, "X-Backup-Sha256",
	                         info->sha256, NULL};
	struct relay_opts o = {.content_type = "application/zstd",
	                       .size = info->size_bytes,
	                       .headers = headers};
	q->rl = relay_open(r, q->a->m->loop, &o, &arch_relay, q);
	if (!q->rl && q->rd) {
		/* could not answer: the read stops at its first bytes */
		q->rl = NULL;
	}
}

static int arch_data(void *ctx, const char *p, size_t n)
{
	struct v1_barch *q = ctx;
	return q->rl ? relay_write(q->rl, p, n) : 0;
}

static void arch_done(void *ctx, const struct sbx_err *err)
{
	struct v1_barch *q = ctx;
	q->rd = NULL;
	if (q->rl) {
		relay_end(q->rl); /* a short answer, if it failed half way */
	} else {
		struct http_req *r = http_take(&q->held);
		if (r)
			answer_error(r, err);
	}
	free(q);
}

static const struct backup_read_cbs arch_cbs = {arch_head, arch_data,
                                                arch_done};

void v1_backup_archive(struct api *a, struct http_req *r, struct route_match *m)
{
	struct v1_barch *q = calloc(1, sizeof(*q));
	if (!q) {
		v1_error(r, 500, "internal", "out of memory");
		return;
	}
	q->a = a;
	http_hold(&q->held, r, arch_gone, q);
	backup_read(a->m->backups, m->tenant, m->params[0], &arch_cbs, q,
	            &q->rd);
}
