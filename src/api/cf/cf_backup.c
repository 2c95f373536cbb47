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
#include "core/fileop.h"
#include "http/held.h"

struct cf_bk {
	struct http_held held;
	struct sandbox *sb;
	struct fileop *op; /* the builtin at work, NULL between two */
	bool restore, committing;
	char dir[4200], archive[4200], tmp[300];
};

/* The client left: the builtin at work stops; its end frees b. */
static void bk_gone(void *ctx)
{
	struct cf_bk *b = ctx;
	if (b->op)
		fileop_cancel(b->op);
}

static void bk_done(void *ctx, const struct fileop_result *res);
static const struct fileop_ops bk_ops = {.on_done = bk_done};

static void bk_run(struct cf_bk *b, const char *const *argv)
{
	struct fileop_params p = {.argv = argv};
	fileop_start(b->sb, &p, &bk_ops, b, &b->op);
}

static void bk_fail(struct cf_bk *b, struct http_req *r,
                    const struct fileop_result *res, const char *code)
{
	json_t *ctx =
	    json_pack("{s:s, s:s}", "dir", b->dir, "archivePath", b->archive);
	if (res->status == FILEOP_ERRNO)
		cf_error(r,
		         res->error == ENOENT && !b->restore ? "FILE_NOT_FOUND"
		                                             : code,
		         ctx, "%s: %s", res->what, strerror(res->error));
	else
		cf_error(r, code, ctx, "%s",
		         res->what ? res->what : "the archiver failed");
}

static void bk_done(void *ctx, const struct fileop_result *res)
{
	struct cf_bk *b = ctx;
	b->op = NULL;
	bool ok = res->status == FILEOP_OK;
	if (b->restore && !b->committing && ok &&
	    sscanf(res->answer, "OK %255s", b->tmp) == 1) {
		/* unpacked beside dir: swap it in, or (the client gone)
		 * remove it */
		const char *argv[] = {b->held.r ? "archive-commit"
		                                : "archive-abort",
		                      "/", b->dir, b->tmp, NULL};
		b->committing = true;
		bk_run(b, argv);
		return;
	}
	struct http_req *r = http_take(&b->held);
	unsigned long long size = 0;
	if (r && !b->restore && ok &&
	    sscanf(res->answer, "OK %llu", &size) == 1)
		cf_ok(r, json_pack("{s:I, s:s}", "sizeBytes", (json_int_t)size,
		                   "archivePath", b->archive));
	else if (r && b->restore && ok && b->committing)
		cf_ok(r, json_pack("{s:s}", "dir", b->dir));
	else if (r)
		bk_fail(b, r, res,
		        b->restore ? "BACKUP_RESTORE_FAILED"
		                   : "BACKUP_CREATE_FAILED");
	free(b);
}

/* dir and archivePath, absolute (relative ones from the session's cwd). */
static struct cf_bk *bk_new(struct cf_req *q, bool restore)
{
	bool fresh;
	const char *dir, *arch;
	struct session *s;
	if (cf_string(q, "dir", &dir) < 0 ||
	    cf_string(q, "archivePath", &arch) < 0)
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
	    cf_resolve(q, session_cwd(s), dir, b->dir, sizeof(b->dir)) < 0 ||
	    cf_resolve(q, session_cwd(s), arch, b->archive,
	               sizeof(b->archive)) < 0) {
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
	b->sb = q->sb;
	b->restore = restore;
	http_hold(&b->held, q->r, bk_gone, b);
	return b;
}

void cf_backup_create(struct cf_req *q)
{
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
	bk_run(b, argv);
	for (size_t k = 0; k < 64; k++)
		free(pats[k]);
}

void cf_backup_restore(struct cf_req *q)
{
	struct cf_bk *b = bk_new(q, true);
	if (!b)
		return;
	char in[4300];
	snprintf(in, sizeof(in), "--in=%s", b->archive);
	const char *argv[] = {"archive-unpack", "/", b->dir, in, NULL};
	bk_run(b, argv);
}

void cf_backup_upload_parts(struct cf_req *q)
{
	cf_error(q->r, "BACKUP_CREATE_FAILED", NULL,
	         "uploading parts to presigned URLs needs the network, which "
	         "this sandbox does not have; read the archive with the file "
	         "API instead");
}
