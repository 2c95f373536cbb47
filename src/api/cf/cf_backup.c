/* Backups of the Cloudflare container protocol, as the pinned client's
 * BackupClient calls them: POST /api/backup/create {dir, archivePath,
 * excludes?} writes an archive of dir to archivePath inside the sandbox
 * (the Durable Object then moves it to R2), POST /api/backup/restore {dir,
 * archivePath} replaces dir with an archive's content. The archive is
 * sandboxd's own (tar + zstd; Cloudflare's container writes squashfs, an
 * implementation detail the client never looks into), made and unpacked
 * by the same builtins as /v1's backups, inside the sandbox, as hostile
 * input. POST /api/backup/upload-parts (the container PUTting parts to R2
 * presigned URLs) needs the network, which a sandbox has none of: it
 * answers BACKUP_CREATE_FAILED saying so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/cf/cf.h"

struct cf_bk {
	struct http_req *r; /* NULL once the client is gone */
	struct sandbox *sb;
	struct exec_job *job;
	bool restore, committing;
	char dir[4200], archive[4200], tmp[300];
};

static void bk_closed(struct http_req *r)
{
	struct cf_bk *b = r->ctx;
	b->r = NULL;
	if (b->job)
		exec_cancel(b->job); /* its done frees b */
}

static void bk_free(struct cf_bk *b)
{
	if (b->r) {
		b->r->on_close = NULL;
		b->r->ctx = NULL;
	}
	free(b);
}

/* The builtin's "E <errno> <what>" line in out, if any. */
static bool bk_error(const struct buf *out, int *e, char *what, size_t cap)
{
	const char *s = out->data ? out->data : "";
	for (const char *l = s; l && l < s + out->len; l = strchr(l, '\n')) {
		if (*l == '\n')
			l++;
		char *end;
		if (strncmp(l, "E ", 2))
			continue;
		*e = (int)strtol(l + 2, &end, 10);
		snprintf(what, cap, "%.*s",
		         (int)strcspn(end + (*end == ' '), "\n"),
		         end + (*end == ' '));
		return true;
	}
	return false;
}

static void bk_done(const struct exec_result *res, void *ctx);

static int bk_run(struct cf_bk *b, const char *const *argv, struct sbx_err *err)
{
	struct exec_params p = {.argv = argv,
	                        .builtin = true,
	                        .detached = true,
	                        .timeout_ms = EXEC_NO_TIMEOUT,
	                        .max_output = 64u << 10};
	return exec_submit(b->sb, NULL, &p, bk_done, b, &b->job, err);
}

static void bk_fail(struct cf_bk *b, const struct exec_result *res,
                    const char *code)
{
	int e;
	char what[300];
	if (!b->r)
		return;
	if (bk_error(&res->err, &e, what, sizeof(what)) ||
	    bk_error(&res->out, &e, what, sizeof(what)))
		cf_error(b->r,
		         e == ENOENT && !b->restore ? "FILE_NOT_FOUND" : code,
		         json_pack("{s:s, s:s}", "dir", b->dir, "archivePath",
		                   b->archive),
		         "%s: %s", what, strerror(e));
	else
		cf_error(b->r, code,
		         json_pack("{s:s, s:s}", "dir", b->dir, "archivePath",
		                   b->archive),
		         "%s", res->msg[0] ? res->msg : "the archiver failed");
}

static void bk_done(const struct exec_result *res, void *ctx)
{
	struct cf_bk *b = ctx;
	struct sbx_err err = {0};
	b->job = NULL;
	bool ok = res->failure == EXEC_OK && res->exit_code == 0;
	if (!b->restore) {
		unsigned long long size = 0;
		if (ok && b->r &&
		    sscanf(buf_cstr((struct buf *)&res->out), "OK %llu",
		           &size) == 1)
			cf_ok(b->r, json_pack("{s:I, s:s}", "sizeBytes",
			                      (json_int_t)size, "archivePath",
			                      b->archive));
		else if (b->r)
			bk_fail(b, res, "BACKUP_CREATE_FAILED");
		bk_free(b);
		return;
	}
	if (!b->committing) {
		/* unpacked beside dir: now swap it in */
		if (ok && b->r &&
		    sscanf(buf_cstr((struct buf *)&res->out), "OK %255s",
		           b->tmp) == 1) {
			const char *argv[] = {"archive-commit", "/", b->dir,
			                      b->tmp, NULL};
			b->committing = true;
			if (bk_run(b, argv, &err) == 0)
				return;
			cf_error(b->r, "BACKUP_RESTORE_FAILED", NULL, "%s",
			         err.msg);
		} else if (b->r) {
			bk_fail(b, res, "BACKUP_RESTORE_FAILED");
		}
		bk_free(b);
		return;
	}
	if (ok && b->r)
		cf_ok(b->r, json_pack("{s:s}", "dir", b->dir));
	else if (b->r)
		bk_fail(b, res, "BACKUP_RESTORE_FAILED");
	bk_free(b);
}

/* dir and archivePath, absolute (relative ones from the session's cwd). */
static struct cf_bk *bk_new(struct cf_req *q, bool restore)
{
	bool bad1 = false, bad2 = false, fresh;
	const char *dir = cf_string(q, "dir", &bad1);
	const char *arch = bad1 ? NULL : cf_string(q, "archivePath", &bad2);
	struct session *s;
	if (bad1 || bad2)
		return NULL;
	if (!dir || !arch) {
		cf_error(
		    q->r, "VALIDATION_FAILED",
		    json_pack("{s:s}", "field", dir ? "archivePath" : "dir"),
		    "dir and archivePath are required");
		return NULL;
	}
	struct cf_bk *b = calloc(1, sizeof(*b));
	if (!b) {
		cf_error(q->r, "INTERNAL_ERROR", NULL, "out of memory");
		return NULL;
	}
	if (!(s = cf_session(q, &fresh)) ||
	    cf_resolve(q, s->cwd, dir, b->dir, sizeof(b->dir)) < 0 ||
	    cf_resolve(q, s->cwd, arch, b->archive, sizeof(b->archive)) < 0) {
		free(b);
		return NULL;
	}
	if (!strcmp(b->dir, "/")) {
		cf_error(q->r, "INVALID_BACKUP_CONFIG",
		         json_pack("{s:s}", "dir", b->dir),
		         "dir: not / itself (a snapshot keeps the whole "
		         "filesystem)");
		free(b);
		return NULL;
	}
	b->r = q->r;
	b->sb = q->sb;
	b->restore = restore;
	q->r->ctx = b;
	q->r->on_close = bk_closed;
	http_suspend(q->r);
	return b;
}

void cf_backup_create(struct cf_req *q)
{
	struct sbx_err err = {0};
	json_t *ex = json_object_get(q->body, "excludes");
	if (ex && !json_is_null(ex) &&
	    (!json_is_array(ex) || json_array_size(ex) > 64)) {
		cf_error(q->r, "VALIDATION_FAILED",
		         json_pack("{s:s}", "field", "excludes"),
		         "excludes: an array of at most 64 patterns");
		return;
	}
	size_t i, n = 0;
	json_t *e;
	json_array_foreach(ex, i, e)
	{
		if (!json_is_string(e) || !json_string_length(e) ||
		    json_string_length(e) > 256 ||
		    strlen(json_string_value(e)) != json_string_length(e)) {
			cf_error(q->r, "VALIDATION_FAILED",
			         json_pack("{s:s}", "field", "excludes"),
			         "excludes: patterns of 1 to 256 bytes");
			return;
		}
	}
	struct cf_bk *b = bk_new(q, false);
	if (!b)
		return;
	const char *argv[72];
	char *pats[64] = {0}, out[4300];
	argv[n++] = "archive-create";
	argv[n++] = "/";
	argv[n++] = b->dir;
	snprintf(out, sizeof(out), "--out=%s", b->archive);
	argv[n++] = out;
	json_array_foreach(ex, i, e)
	{
		if (asprintf(&pats[i], "--exclude=%s", json_string_value(e)) >=
		    0)
			argv[n++] = pats[i];
	}
	argv[n] = NULL;
	int r = bk_run(b, argv, &err);
	for (size_t k = 0; k < 64; k++)
		free(pats[k]);
	if (r < 0) {
		cf_error(b->r, "BACKUP_CREATE_FAILED", NULL, "%s", err.msg);
		bk_free(b);
	}
}

void cf_backup_restore(struct cf_req *q)
{
	struct sbx_err err = {0};
	struct cf_bk *b = bk_new(q, true);
	if (!b)
		return;
	char in[4300];
	snprintf(in, sizeof(in), "--in=%s", b->archive);
	const char *argv[] = {"archive-unpack", "/", b->dir, in, NULL};
	if (bk_run(b, argv, &err) < 0) {
		cf_error(b->r, "BACKUP_RESTORE_FAILED", NULL, "%s", err.msg);
		bk_free(b);
	}
}

void cf_backup_upload_parts(struct cf_req *q)
{
	cf_error(q->r, "BACKUP_CREATE_FAILED", NULL,
	         "uploading parts to presigned URLs needs the network, which "
	         "this sandbox does not have; read the archive with the file "
	         "API instead");
}
