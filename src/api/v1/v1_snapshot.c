/* /v1 snapshots (shared/spec/v1.md "Snapshots and fork"): take, list,
 * info, delete; a new sandbox from one (POST /v1/sandbox fromSnapshot),
 * fork, restore in place. The work is core/snapshot.c's; this file decodes
 * requests and encodes answers. A request waits (suspended) for its
 * operation; a client that leaves does not stop it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/snapshot.h"
#include "lib/util.h"

#define NAME_MAX_LEN 128

struct v1_snap_req {
	struct v1_held h; /* first */
	const char *from; /* a fork: the origin's id (for the answer) */
	char from_buf[64];
	char restored[ID_RANDOM_MAX];
};

static struct v1_snap_req *req_new(struct api *a, struct http_req *r)
{
	return v1_held_new(a, r, sizeof(struct v1_snap_req));
}

/* errno -> status and code; anything else is 500 internal */
static const struct v1_errmap snap_errs[] = {
    {EBUSY, 409, "sandbox_busy"},       {EEXIST, 409, "sandbox_exists"},
    {ENOENT, 404, "not_found"},         {ECANCELED, 409, "cancelled"},
    {ETIMEDOUT, 503, "freeze_timeout"}, {ENOSPC, 507, "disk_full"},
    {EDQUOT, 507, "disk_full"},         V1_ERR_INTERNAL,
};

void v1_snapshot_error(struct http_req *r, const struct sbx_err *err)
{
	v1_error_of(r, err, snap_errs);
}

json_t *v1_snapshot_json(const struct snapshot *s)
{
	char created[32];
	iso8601_ms(s->created_ms, created, sizeof(created));
	json_t *j =
	    json_pack("{s:s, s:s, s:s, s:I, s:b, s:s}", "id", s->id,
	              "sandboxId", s->sandbox, "createdAt", created,
	              "sizeBytes", (json_int_t)s->size_bytes, "copyOnWrite",
	              !s->copied, "method", s->copied ? "copy" : "snapshot");
	json_object_set_new(j, "name",
	                    s->name ? json_string(s->name) : json_null());
	if (s->copied)
		json_object_set_new(
		    j, "note",
		    json_string("the store is not btrfs: this snapshot is a "
		                "full copy of the sandbox's files"));
	return j;
}

/* ---- take ---------------------------------------------------------------- */

static void taken(void *ctx, const struct snapshot *snap, struct sandbox *sb,
                  const struct sbx_err *err)
{
	struct v1_snap_req *q = ctx;
	struct http_req *r = http_take(&q->h.held);
	(void)sb;
	if (r && err)
		v1_snapshot_error(r, err);
	else if (r)
		http_respond_json(r, 201, v1_snapshot_json(snap));
	free(q);
}

void v1_snapshot_create(struct api *a, struct http_req *r,
                        struct route_match *m)
{
	json_t *body = v1_body(r);
	if (!body)
		return;
	json_t *name = json_object_get(body, "name");
	if (name && !json_is_null(name) &&
	    (!json_is_string(name) || !json_string_length(name) ||
	     json_string_length(name) > NAME_MAX_LEN)) {
		v1_error(r, 400, "invalid_request",
		         "name: a string of 1 to %d bytes", NAME_MAX_LEN);
		json_decref(body);
		return;
	}
	struct sandbox *sb = v1_sandbox(a, r, m, false);
	struct v1_snap_req *q = sb ? req_new(a, r) : NULL;
	if (q)
		snapshot_take(
		    sb, json_is_string(name) ? json_string_value(name) : NULL,
		    taken, q);
	json_decref(body);
}

/* ---- list, info, delete -------------------------------------------------- */

static void list_one(const struct snapshot *s, void *ctx)
{
	json_array_append_new(ctx, v1_snapshot_json(s));
}

void v1_snapshot_list(struct api *a, struct http_req *r, struct route_match *m)
{
	json_t *arr = json_array();
	const char *of = http_query(r, "sandbox");
	snapshot_foreach(a->m, m->tenant, list_one, arr);
	if (of) { /* ?sandbox=<id>: only those taken of it */
		size_t i = 0;
		while (i < json_array_size(arr)) {
			json_t *s = json_array_get(arr, i);
			if (strcmp(json_string_value(
			               json_object_get(s, "sandboxId")),
			           of))
				json_array_remove(arr, i);
			else
				i++;
		}
	}
	json_t *j = json_pack("{s:o}", "snapshots", arr);
	uint64_t bytes;
	if (snapshot_tenant_usage(a->m, m->tenant, &bytes) == 0) {
		json_t *u = json_pack("{s:I}", "diskBytes", (json_int_t)bytes);
		if (a->m->cfg->tenant_disk_bytes)
			json_object_set_new(
			    u, "limitBytes",
			    json_integer(
			        (json_int_t)a->m->cfg->tenant_disk_bytes));
		json_object_set_new(j, "tenantUsage", u);
	}
	http_respond_json(r, 200, j);
}

static struct snapshot *find(struct api *a, struct http_req *r,
                             struct route_match *m, const char *id)
{
	struct snapshot *s = snapshot_find(a->m, m->tenant, id);
	if (!s)
		v1_error(r, 404, "snapshot_not_found", "no snapshot %.100s",
		         id);
	return s;
}

void v1_snapshot_info(struct api *a, struct http_req *r, struct route_match *m)
{
	struct snapshot *s = find(a, r, m, m->params[0]);
	if (s)
		http_respond_json(r, 200, v1_snapshot_json(s));
}

void v1_snapshot_delete(struct api *a, struct http_req *r,
                        struct route_match *m)
{
	struct sbx_err err = {0};
	struct snapshot *s = find(a, r, m, m->params[0]);
	if (!s)
		return;
	if (snapshot_delete(a->m, s, &err) < 0)
		v1_snapshot_error(r, &err);
	else
		http_respond_empty(r, 204);
}

/* ---- new sandboxes from snapshots: clone and fork ------------------------ */

/* A sandbox made from a snapshot or forked (201), or restored in place
 * (200, q->restored set). */
static void sandbox_done(void *ctx, const struct snapshot *snap,
                         struct sandbox *sb, const struct sbx_err *err)
{
	struct v1_snap_req *q = ctx;
	struct http_req *r = http_take(&q->h.held);
	bool restore = q->restored[0] != '\0';
	(void)snap;
	if (r && err) {
		v1_snapshot_error(r, err);
	} else if (r) {
		json_t *j = v1_sandbox_json(q->h.a, sb, false);
		if (q->from)
			json_object_set_new(j, "forkedFrom",
			                    json_string(q->from));
		if (restore)
			json_object_set_new(j, "restoredFrom",
			                    json_string(q->restored));
		else if (!q->h.a->m->rt->store->quotas)
			json_object_set_new(
			    j, "note",
			    json_string("the store is not btrfs: the files "
			                "were copied"));
		http_respond_json(r, restore ? 200 : 201, j);
	}
	free(q);
}

void v1_sandbox_create_from(struct api *a, struct http_req *r,
                            struct route_match *m, const char *id,
                            const char *snap_id,
                            const struct sandbox_opts *opts)
{
	struct snapshot *s = find(a, r, m, snap_id);
	struct v1_snap_req *q = s ? req_new(a, r) : NULL;
	if (q)
		snapshot_clone(a->m, m->tenant, id, opts, s, NULL, sandbox_done,
		               q);
}

void v1_sandbox_fork(struct api *a, struct http_req *r, struct route_match *m)
{
	char idbuf[32];
	json_t *body = v1_body(r);
	if (!body)
		return;
	json_t *id = json_object_get(body, "id");
	if (id &&
	    (!json_is_string(id) || !sandbox_id_valid(json_string_value(id)))) {
		v1_error(r, 400, "invalid_request",
		         "id must be 1-63 characters of [a-z0-9-]");
		json_decref(body);
		return;
	}
	struct sandbox *from = v1_sandbox(a, r, m, false);
	if (!from) {
		json_decref(body);
		return;
	}
	const char *nid = id ? json_string_value(id) : NULL;
	if (!nid) {
		id_random(idbuf, sizeof(idbuf), "sbx-");
		nid = idbuf;
	}
	/* the fork starts as its origin is: limits, environment, labels */
	struct sandbox_opts o;
	sandbox_opts_of(from, &o);
	struct v1_snap_req *q = req_new(a, r);
	if (q) {
		snprintf(q->from_buf, sizeof(q->from_buf), "%s",
		         sandbox_id(from));
		q->from = q->from_buf;
		snapshot_clone(a->m, m->tenant, nid, &o, NULL, from,
		               sandbox_done, q);
	}
	json_decref(body);
}

/* ---- restore in place ------------------------------------------------------
 */

void v1_sandbox_restore(struct api *a, struct http_req *r,
                        struct route_match *m)
{
	json_t *body = v1_body(r);
	if (!body)
		return;
	json_t *snap = json_object_get(body, "snapshot"),
	       *bkp = json_object_get(body, "backup");
	if (!snap == !bkp) {
		v1_error(r, 400, "invalid_request",
		         "give exactly one of snapshot or backup (an id)");
		goto out;
	}
	if (bkp) {
		v1_backup_restore(a, r, m, body);
		goto out;
	}
	if (!json_is_string(snap)) {
		v1_error(r, 400, "invalid_request", "snapshot: an id string");
		goto out;
	}
	struct snapshot *s = find(a, r, m, json_string_value(snap));
	struct sandbox *sb = s ? v1_sandbox(a, r, m, true) : NULL;
	struct v1_snap_req *q = sb ? req_new(a, r) : NULL;
	if (q) {
		snprintf(q->restored, sizeof(q->restored), "%s", s->id);
		snapshot_restore(sb, s, sandbox_done, q);
	}
out:
	json_decref(body);
}
