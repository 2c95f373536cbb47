/* The backup engine (theory of operation in backup.h).
 *
 *   create:  put_begin(archive) + the archive-create builtin; its stdout
 *            goes to put_data (sha256 and size on the way; a full store
 *            pauses the pipe, ready() resumes it), its stderr carries
 *            progress; then put_end(commit), then the metadata object.
 *   restore: the metadata (tenant, expiry, sha256), the archive-unpack
 *            builtin fed from get() (a full pipe pauses the get, the
 *            pipe's drain resumes it), the checksum checked at the end,
 *            then archive-commit (or archive-abort) as a second builtin.
 *
 * Metadata objects are immutable: what this daemon has read is cached by
 * key; another daemon's new backups are found by listing the store. */
#include "core/backup.h"
#include "core/config.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/exec.h"
#include "core/sandbox_internal.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "lib/sha256.h"

#define REAP_EVERY_MS (60 * 1000)
#define PROGRESS_STEP (4u << 20)

struct cached {
	char *key; /* of the metadata object */
	struct backup_info info;
	struct cached *next;
};

struct backups {
	struct manager *m;
	struct bstore *store;
	struct cached *cache;
	struct backup_op *ops;
	struct loop_timer reap;
	bool reaping, closing;
};

/* ---- info
 * --------------------------------------------------------------------- */

void backup_tenant_key(const char *tenant, char *buf, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	if (cap < 3)
		return;
	buf[o++] = 't';
	for (const unsigned char *p = (const unsigned char *)tenant;
	     *p && o + 3 < cap; p++) {
		buf[o++] = hex[*p >> 4];
		buf[o++] = hex[*p & 15];
	}
	buf[o++] = '/';
	buf[o] = '\0';
}

static void keys_of(const char *tenant, const char *id, char *meta,
                    char *archive, size_t cap)
{
	char tk[300];
	backup_tenant_key(tenant, tk, sizeof(tk));
	if (meta)
		snprintf(meta, cap, "%s%s.json", tk, id);
	if (archive)
		snprintf(archive, cap, "%s%s.tar.zst", tk, id);
}

void backup_info_clear(struct backup_info *info)
{
	free(info->tenant);
	free(info->sandbox);
	free(info->dir);
	for (size_t i = 0; i < info->nexcludes; i++)
		free(info->excludes[i]);
	free(info->excludes);
	memset(info, 0, sizeof(*info));
}

static int info_copy(struct backup_info *dst, const struct backup_info *src)
{
	*dst = *src;
	dst->tenant = strdup(src->tenant);
	dst->sandbox = strdup(src->sandbox);
	dst->dir = strdup(src->dir);
	dst->excludes =
	    src->nexcludes ? calloc(src->nexcludes, sizeof(char *)) : NULL;
	bool ok = dst->tenant && dst->sandbox && dst->dir &&
	          (!src->nexcludes || dst->excludes);
	for (size_t i = 0; ok && i < src->nexcludes; i++)
		ok = (dst->excludes[i] = strdup(src->excludes[i])) != NULL;
	if (!ok) {
		dst->nexcludes = dst->excludes ? src->nexcludes : 0;
		backup_info_clear(dst);
		return -ENOMEM;
	}
	return 0;
}

char *backup_info_encode(const struct backup_info *info)
{
	json_t *ex = json_array();
	for (size_t i = 0; i < info->nexcludes; i++)
		json_array_append_new(ex, json_string(info->excludes[i]));
	json_t *j = json_pack("{s:i, s:s, s:s, s:s, s:s, s:o, s:s, s:I, s:I, "
	                      "s:I, s:s, s:b}",
	                      "version", 1, "id", info->id, "tenant",
	                      info->tenant, "sandboxId", info->sandbox, "dir",
	                      info->dir, "excludes", ex, "sha256", info->sha256,
	                      "sizeBytes", (json_int_t)info->size_bytes,
	                      "createdMs", (json_int_t)info->created_ms,
	                      "expiresMs", (json_int_t)info->expires_ms,
	                      "format", "tar+zstd", "delta", info->delta);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return s;
}

static bool hex64(const char *s)
{
	if (strlen(s) != 64)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

int backup_info_parse(const char *text, size_t len, struct backup_info *out)
{
	json_error_t je;
	json_t *j = json_loadb(text, len, 0, &je), *ex = NULL;
	const char *id, *tenant, *sandbox, *dir, *sha;
	json_int_t size, created, expires;
	int version;
	memset(out, 0, sizeof(*out));
	if (!j ||
	    json_unpack(j, "{s:i, s:s, s:s, s:s, s:s, s:o, s:s, s:I, s:I, s:I}",
	                "version", &version, "id", &id, "tenant", &tenant,
	                "sandboxId", &sandbox, "dir", &dir, "excludes", &ex,
	                "sha256", &sha, "sizeBytes", &size, "createdMs",
	                &created, "expiresMs", &expires) < 0 ||
	    version != 1 || strlen(id) >= sizeof(out->id) ||
	    strncmp(id, "bkp_", 4) || !hex64(sha) || size < 0 || created < 0 ||
	    expires < 0 || !json_is_array(ex) || dir[0] != '/') {
		json_decref(j);
		return -EINVAL;
	}
	snprintf(out->id, sizeof(out->id), "%s", id);
	snprintf(out->sha256, sizeof(out->sha256), "%s", sha);
	out->size_bytes = (uint64_t)size;
	out->created_ms = (uint64_t)created;
	out->expires_ms = (uint64_t)expires;
	out->delta = json_is_true(json_object_get(j, "delta"));
	out->tenant = strdup(tenant);
	out->sandbox = strdup(sandbox);
	out->dir = strdup(dir);
	size_t n = json_array_size(ex);
	out->excludes = n ? calloc(n, sizeof(char *)) : NULL;
	int r = out->tenant && out->sandbox && out->dir && (!n || out->excludes)
	            ? 0
	            : -ENOMEM;
	for (size_t i = 0; r == 0 && i < n; i++) {
		json_t *e = json_array_get(ex, i);
		if (!json_is_string(e))
			r = -EINVAL;
		else if (!(out->excludes[i] = strdup(json_string_value(e))))
			r = -ENOMEM;
		else
			out->nexcludes++;
	}
	json_decref(j);
	if (r < 0)
		backup_info_clear(out);
	return r;
}

static bool expired(const struct backup_info *info)
{
	return info->expires_ms && now_wall_ms() >= info->expires_ms;
}

static struct cached *cache_find(struct backups *b, const char *key)
{
	for (struct cached *c = b->cache; c; c = c->next)
		if (!strcmp(c->key, key))
			return c;
	return NULL;
}

static void cache_put(struct backups *b, const char *key,
                      const struct backup_info *info)
{
	if (cache_find(b, key))
		return;
	struct cached *c = calloc(1, sizeof(*c));
	if (!c || !(c->key = strdup(key)) || info_copy(&c->info, info) < 0) {
		if (c)
			free(c->key);
		free(c);
		return;
	}
	c->next = b->cache;
	b->cache = c;
}

static void cache_drop(struct backups *b, const char *key)
{
	for (struct cached **p = &b->cache; *p; p = &(*p)->next)
		if (!strcmp((*p)->key, key)) {
			struct cached *c = *p;
			*p = c->next;
			backup_info_clear(&c->info);
			free(c->key);
			free(c);
			return;
		}
}

/* ---- metadata lookups
 * ---------------------------------------------------------- */

/* The info of (tenant, id), from the cache or the store. */
struct lookup {
	struct backups *b;
	char key[600];
	const char *tenant;
	void (*done)(void *ctx, const struct backup_info *info,
	             const struct sbx_err *err);
	void *ctx;
};

static bool id_ok(const char *id)
{
	if (strncmp(id, "bkp_", 4) || strlen(id) > 40 || !id[4])
		return false;
	for (const char *c = id + 4; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return false;
	return true;
}

/* Metadata gone first: from then on the backup is not listed. */
static void reap_one(struct backups *b, const char *tenant, const char *id)
{
	char meta[600], arch[600];
	keys_of(tenant, id, meta, arch, sizeof(meta));
	b->store->ops->remove(b->store, meta, NULL, NULL);
	b->store->ops->remove(b->store, arch, NULL, NULL);
	cache_drop(b, meta);
	log_info("event=backup-removed id=%s", id);
}

static void lookup_answer(struct lookup *l, const struct backup_info *info)
{
	struct sbx_err err = {0};
	if (strcmp(info->tenant, l->tenant) || !id_ok(info->id)) {
		sbx_err_set(&err, ENOENT, "no backup %s", info->id);
		l->done(l->ctx, NULL, &err);
	} else if (expired(info)) {
		char id[ID_RANDOM_MAX], tenant[256];
		snprintf(id, sizeof(id), "%s", info->id);
		snprintf(tenant, sizeof(tenant), "%s", info->tenant);
		sbx_err_set(&err, EKEYEXPIRED, "backup %s expired", info->id);
		l->done(l->ctx, NULL, &err);
		reap_one(l->b, tenant, id);
	} else {
		l->done(l->ctx, info, NULL);
	}
	free(l);
}

static void lookup_read(void *ctx, const char *data, size_t len,
                        const struct sbx_err *rerr)
{
	struct lookup *l = ctx;
	struct sbx_err err = {0};
	struct backup_info info;
	if (rerr) {
		if (rerr->code == ENOENT)
			sbx_err_set(&err, ENOENT, "no such backup");
		else
			err = *rerr;
		l->done(l->ctx, NULL, &err);
		free(l);
		return;
	}
	if (backup_info_parse(data, len, &info) < 0) {
		sbx_err_set(&err, EIO, "backup store: damaged metadata %s",
		            l->key);
		l->done(l->ctx, NULL, &err);
		free(l);
		return;
	}
	cache_put(l->b, l->key, &info);
	lookup_answer(l, &info);
	backup_info_clear(&info);
}

static void lookup(struct backups *b, const char *tenant, const char *id,
                   void (*done)(void *ctx, const struct backup_info *info,
                                const struct sbx_err *err),
                   void *ctx)
{
	struct sbx_err err = {0};
	struct lookup *l = calloc(1, sizeof(*l));
	if (!l || !id_ok(id)) {
		free(l);
		sbx_err_set(&err, l ? ENOENT : ENOMEM, "no backup %.60s", id);
		done(ctx, NULL, &err);
		return;
	}
	l->b = b;
	l->tenant = tenant;
	l->done = done;
	l->ctx = ctx;
	keys_of(tenant, id, l->key, NULL, sizeof(l->key));
	struct cached *c = cache_find(b, l->key);
	if (c) {
		lookup_answer(l, &c->info);
		return;
	}
	b->store->ops->read_small(b->store, l->key, lookup_read, l);
}

void backup_get(struct backups *b, const char *tenant, const char *id,
                void (*done)(void *ctx, const struct backup_info *info,
                             const struct sbx_err *err),
                void *ctx)
{
	lookup(b, tenant, id, done, ctx);
}

/* ---- list
 * ------------------------------------------------------------------------- */

struct listing {
	struct backups *b;
	char *tenant;
	char **keys; /* metadata keys still to read */
	size_t nkeys, next;
	struct backup_info **v;
	size_t n;
	bool all_tenants; /* the reaper */
	void (*done)(void *ctx, struct backup_info *const *v, size_t n,
	             const struct sbx_err *err);
	void *ctx;
};

static void listing_free(struct listing *ls)
{
	for (size_t i = 0; i < ls->nkeys; i++)
		free(ls->keys[i]);
	free(ls->keys);
	for (size_t i = 0; i < ls->n; i++) {
		backup_info_clear(ls->v[i]);
		free(ls->v[i]);
	}
	free(ls->v);
	free(ls->tenant);
	free(ls);
}

static int by_created(const void *a, const void *b)
{
	const struct backup_info *x = *(struct backup_info *const *)a,
	                         *y = *(struct backup_info *const *)b;
	return x->created_ms < y->created_ms ? -1
	                                     : x->created_ms > y->created_ms;
}

static void listing_add(struct listing *ls, const struct backup_info *info)
{
	if (!ls->all_tenants && strcmp(info->tenant, ls->tenant))
		return;
	if (expired(info) && !ls->all_tenants) {
		char id[ID_RANDOM_MAX];
		snprintf(id, sizeof(id), "%s", info->id);
		reap_one(ls->b, ls->tenant, id);
		return;
	}
	struct backup_info **v = realloc(ls->v, (ls->n + 1) * sizeof(*v));
	struct backup_info *c = calloc(1, sizeof(*c));
	if (!v || !c || info_copy(c, info) < 0) {
		free(c);
		if (v)
			ls->v = v;
		return;
	}
	ls->v = v;
	ls->v[ls->n++] = c;
}

static void listing_next(struct listing *ls);

static void listing_read(void *ctx, const char *data, size_t len,
                         const struct sbx_err *err)
{
	struct listing *ls = ctx;
	struct backup_info info;
	const char *key = ls->keys[ls->next - 1];
	/* one that went meanwhile, or damaged: not listed */
	if (!err && backup_info_parse(data, len, &info) == 0) {
		cache_put(ls->b, key, &info);
		listing_add(ls, &info);
		backup_info_clear(&info);
	}
	listing_next(ls);
}

/* One metadata object at a time (the cached ones at once): a daemon that
 * sees thousands of new backups does not open thousands of connections. */
static void listing_next(struct listing *ls)
{
	if (ls->b->closing) {
		struct sbx_err err = {0};
		sbx_err_set(&err, ECANCELED, "sandboxd is shutting down");
		ls->done(ls->ctx, NULL, 0, &err);
		listing_free(ls);
		return;
	}
	while (ls->next < ls->nkeys) {
		const char *key = ls->keys[ls->next++];
		struct cached *c = cache_find(ls->b, key);
		if (c) {
			listing_add(ls, &c->info);
			continue;
		}
		ls->b->store->ops->read_small(ls->b->store, key, listing_read,
		                              ls);
		return;
	}
	if (ls->n > 1)
		qsort(ls->v, ls->n, sizeof(*ls->v), by_created);
	ls->done(ls->ctx, ls->v, ls->n, NULL);
	listing_free(ls);
}

static void listing_keys(void *ctx, char *const *keys, size_t n,
                         const struct sbx_err *err)
{
	struct listing *ls = ctx;
	if (err) {
		ls->done(ls->ctx, NULL, 0, err);
		listing_free(ls);
		return;
	}
	ls->keys = calloc(n ? n : 1, sizeof(char *));
	for (size_t i = 0; ls->keys && i < n; i++) {
		size_t l = strlen(keys[i]);
		if (l > 5 && !strcmp(keys[i] + l - 5, ".json") &&
		    (ls->keys[ls->nkeys] = strdup(keys[i])))
			ls->nkeys++;
	}
	listing_next(ls);
}

static void list_keys(struct backups *b, const char *tenant, bool all,
                      void (*done)(void *ctx, struct backup_info *const *v,
                                   size_t n, const struct sbx_err *err),
                      void *ctx)
{
	struct sbx_err err = {0};
	char prefix[300] = "";
	struct listing *ls = calloc(1, sizeof(*ls));
	if (!ls || !(ls->tenant = strdup(tenant))) {
		free(ls);
		sbx_err_set(&err, ENOMEM, "out of memory");
		done(ctx, NULL, 0, &err);
		return;
	}
	ls->b = b;
	ls->all_tenants = all;
	ls->done = done;
	ls->ctx = ctx;
	if (!all)
		backup_tenant_key(tenant, prefix, sizeof(prefix));
	b->store->ops->list(b->store, prefix, listing_keys, ls);
}

void backup_list(struct backups *b, const char *tenant,
                 void (*done)(void *ctx, struct backup_info *const *v, size_t n,
                              const struct sbx_err *err),
                 void *ctx)
{
	list_keys(b, tenant, false, done, ctx);
}

/* ---- delete
 * ------------------------------------------------------------------------ */

struct deleting {
	struct backups *b;
	char tenant[256], id[ID_RANDOM_MAX];
	void (*done)(void *ctx, const struct sbx_err *err);
	void *ctx;
};

static void deleted_meta(void *ctx, const struct sbx_err *err)
{
	struct deleting *d = ctx;
	char meta[600], arch[600];
	keys_of(d->tenant, d->id, meta, arch, sizeof(meta));
	if (!err) {
		cache_drop(d->b, meta);
		d->b->store->ops->remove(d->b->store, arch, NULL, NULL);
		log_info("event=backup-deleted id=%s", d->id);
	}
	d->done(d->ctx, err);
	free(d);
}

static void delete_found(void *ctx, const struct backup_info *info,
                         const struct sbx_err *err)
{
	struct deleting *d = ctx;
	char meta[600];
	if (!info) {
		d->done(d->ctx, err);
		free(d);
		return;
	}
	keys_of(d->tenant, d->id, meta, NULL, sizeof(meta));
	d->b->store->ops->remove(d->b->store, meta, deleted_meta, d);
}

void backup_delete(struct backups *b, const char *tenant, const char *id,
                   void (*done)(void *ctx, const struct sbx_err *err),
                   void *ctx)
{
	struct sbx_err err = {0};
	struct deleting *d = calloc(1, sizeof(*d));
	if (!d) {
		sbx_err_set(&err, ENOMEM, "out of memory");
		done(ctx, &err);
		return;
	}
	d->b = b;
	snprintf(d->tenant, sizeof(d->tenant), "%s", tenant);
	snprintf(d->id, sizeof(d->id), "%.*s", (int)sizeof(d->id) - 1, id);
	d->done = done;
	d->ctx = ctx;
	lookup(b, d->tenant, id, delete_found, d);
}

/* ---- create and restore
 * -------------------------------------------------------------- */

enum op_kind { OP_CREATE, OP_RESTORE };

struct backup_op {
	enum op_kind kind;
	struct backups *b;
	struct sandbox *sb;
	struct backup_cbs cbs;
	void *ctx;
	struct backup_info info;
	char meta_key[600], arch_key[600];
	/* the builtin */
	struct exec_job *job;
	bool job_paused;
	struct buf line; /* its message lines */
	int builtin_errno;
	char builtin_what[300];
	/* the archive's bytes */
	struct sha256 sha;
	uint64_t bytes, total, reported;
	struct bstore_put *put;
	struct bstore_get *get;
	struct buf pending; /* restore: got, not yet taken by the pipe */
	bool get_done, get_paused;
	/* restore */
	char dir[4200];
	char tmp[300]; /* what archive-unpack made */
	bool unpacked, bad_sum;
	/* a chain (backup_restore_chain): its ids, the one being unpacked */
	char **chain;
	size_t nchain, ichain;
	char manifest[300]; /* written by the commit ("": none) */
	/* the end */
	bool cancelled, finished;
	struct sbx_err err; /* the first failure */
	struct backup_op *next;
};

static void op_unlink(struct backup_op *op)
{
	for (struct backup_op **p = &op->b->ops; *p; p = &(*p)->next)
		if (*p == op) {
			*p = op->next;
			return;
		}
}

static void op_free(struct backup_op *op)
{
	for (size_t i = 0; i < op->nchain; i++)
		free(op->chain[i]);
	free(op->chain);
	buf_free(&op->line);
	buf_free(&op->pending);
	backup_info_clear(&op->info);
	free(op);
}

/* The first failure is the one reported. */
static void op_fail(struct backup_op *op, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void op_fail(struct backup_op *op, int code, const char *fmt, ...)
{
	if (op->err.code)
		return;
	va_list ap;
	va_start(ap, fmt);
	op->err.code = code;
	vsnprintf(op->err.msg, sizeof(op->err.msg), fmt, ap);
	va_end(ap);
}

static void op_done(struct backup_op *op)
{
	op_unlink(op);
	op->finished = true;
	if (op->err.code)
		log_warn("event=backup-%s-failed id=%s %s",
		         op->kind == OP_CREATE ? "create" : "restore",
		         op->info.id, op->err.msg);
	op->cbs.done(op->ctx, op->err.code ? NULL : &op->info,
	             op->err.code ? &op->err : NULL);
	op_free(op);
}

static void report(struct backup_op *op, bool force)
{
	if (!op->cbs.progress || op->cancelled)
		return;
	if (force || op->bytes - op->reported >= PROGRESS_STEP) {
		op->reported = op->bytes;
		op->cbs.progress(op->ctx, op->bytes, op->total);
	}
}

/* The builtin's message lines: "T n", "P n", "E errno what", "OK ...". */
static void on_line(struct backup_op *op, const char *l)
{
	unsigned long long v, w;
	int e, off = 0;
	if (sscanf(l, "T %llu", &v) == 1 && op->kind == OP_CREATE) {
		op->total = v;
		op->reported = 0;
		if (op->cbs.progress && !op->cancelled)
			op->cbs.progress(op->ctx, 0, op->total);
	} else if (sscanf(l, "P %llu", &v) == 1 && op->kind == OP_CREATE) {
		if (op->cbs.progress && !op->cancelled)
			op->cbs.progress(op->ctx, v, op->total);
	} else if (sscanf(l, "E %d %n", &e, &off) == 1 && off > 0) {
		op->builtin_errno = e;
		snprintf(op->builtin_what, sizeof(op->builtin_what), "%s",
		         l + off);
	} else if (!strcmp(l, "M delta") && op->kind == OP_CREATE) {
		op->info.delta = true;
	} else if (sscanf(l, "C %llu %llu", &v, &w) == 2 &&
	           op->kind == OP_CREATE) {
		op->info.changes = v + w;
	} else if (!strncmp(l, "OK ", 3) && op->kind == OP_RESTORE) {
		if (!op->tmp[0])
			sscanf(l + 3, "%255s", op->tmp);
		op->unpacked = true;
	}
}

static void take_lines(struct backup_op *op, const char *data, size_t len)
{
	/* stderr also carries a NUL each second, the builtin's sign of life
	 * (runtime/builtin.h): not part of any line */
	for (const char *end = data + len, *z; data < end; data = z + 1) {
		z = memchr(data, '\0', (size_t)(end - data));
		buf_append(&op->line, data, (size_t)((z ? z : end) - data));
		if (!z)
			break;
	}
	char *start = op->line.data, *nl;
	while (start &&
	       (nl = memchr(start, '\n',
	                    op->line.len - (size_t)(start - op->line.data)))) {
		*nl = '\0';
		on_line(op, start);
		start = nl + 1;
	}
	if (start && start != op->line.data) {
		size_t rest = op->line.len - (size_t)(start - op->line.data);
		memmove(op->line.data, start, rest);
		op->line.len = rest;
	}
}

/* "what: strerror" of the builtin's E line, or of the exec failure. */
static void job_failure(struct backup_op *op, const struct exec_result *res,
                        const char *doing)
{
	if (op->cancelled)
		op_fail(op, ECANCELED, "cancelled");
	else if (op->builtin_errno) {
		/* ENOENT and EINVAL mean something else from the store (no
		 * such backup) and the API: say what they meant here */
		int e = op->builtin_errno;
		if (e == ENOENT)
			e = ENOTDIR;
		else if (e == EINVAL && op->kind == OP_RESTORE)
			e = EBADMSG; /* libarchive could not read it */
		op_fail(op, e, "%s %s: %s: %s", doing,
		        op->kind == OP_CREATE ? op->info.dir : op->dir,
		        op->builtin_what, strerror(op->builtin_errno));
	} else if (res->failure != EXEC_OK)
		op_fail(op, res->failure == EXEC_STOPPED ? ESRCH : EIO,
		        "%s: %s", doing, res->msg);
	else
		op_fail(op, EIO, "%s: the archiver exited with status %d",
		        doing, res->exit_code);
}

/* ---- create ---- */

static void create_meta_written(void *ctx, const struct sbx_err *err)
{
	struct backup_op *op = ctx;
	if (err) {
		op_fail(op, err->code, "%s", err->msg);
		if (!op->b->closing)
			op->b->store->ops->remove(op->b->store, op->arch_key,
			                          NULL, NULL);
	} else if (op->cancelled) {
		/* it got out just as the client left: take it back */
		op->b->store->ops->remove(op->b->store, op->meta_key, NULL,
		                          NULL);
		op->b->store->ops->remove(op->b->store, op->arch_key, NULL,
		                          NULL);
		op_fail(op, ECANCELED, "cancelled");
	} else {
		cache_put(op->b, op->meta_key, &op->info);
		log_info(
		    "sandbox=%s event=backup id=%s dir=%s bytes=%llu store=%s",
		    op->info.sandbox, op->info.id, op->info.dir,
		    (unsigned long long)op->info.size_bytes,
		    op->b->store->ops->name);
	}
	op_done(op);
}

static void create_committed(void *ctx, const struct sbx_err *err)
{
	struct backup_op *op = ctx;
	if (err || op->cancelled || op->b->closing) {
		if (err)
			op_fail(op, err->code, "%s", err->msg);
		else
			op_fail(op, ECANCELED, "cancelled");
		if (!op->b->closing)
			op->b->store->ops->remove(op->b->store, op->arch_key,
			                          NULL, NULL);
		op_done(op);
		return;
	}
	char *meta = backup_info_encode(&op->info);
	if (!meta) {
		op_fail(op, ENOMEM, "out of memory");
		op->b->store->ops->remove(op->b->store, op->arch_key, NULL,
		                          NULL);
		op_done(op);
		return;
	}
	op->b->store->ops->write_small(op->b->store, op->meta_key, meta,
	                               strlen(meta), create_meta_written, op);
	free(meta);
}

static void create_job_done(const struct exec_result *res, void *ctx)
{
	struct backup_op *op = ctx;
	op->job = NULL;
	if (op->line.len)
		take_lines(op, "\n", 1);
	bool ok = res->failure == EXEC_OK && res->exit_code == 0 &&
	          !op->err.code && !op->cancelled;
	if (!ok) {
		job_failure(op, res, "archiving");
		struct bstore_put *p = op->put;
		op->put = NULL;
		op->b->store->ops->put_end(p, false, NULL, NULL);
		op_done(op);
		return;
	}
	sha256_final_hex(&op->sha, op->info.sha256);
	op->info.size_bytes = op->bytes;
	op->bytes = op->total; /* the last progress: all of it */
	report(op, true);
	struct bstore_put *p = op->put;
	op->put = NULL;
	op->b->store->ops->put_end(p, true, create_committed, op);
}

static int create_output(void *ctx, int fd, const char *data, size_t len)
{
	struct backup_op *op = ctx;
	if (fd == 2) {
		take_lines(op, data, len);
		return 0;
	}
	if (op->err.code || op->cancelled || !op->put)
		return 0; /* the job is being killed */
	sha256_update(&op->sha, data, len);
	op->bytes += len;
	int r = op->b->store->ops->put_data(op->put, data, len);
	if (r < 0) {
		op_fail(op, -r, "writing the archive to the backup store: %s",
		        strerror(-r));
		if (op->job)
			exec_cancel(op->job);
		return 0;
	}
	if (r == 1)
		op->job_paused = true;
	return r;
}

static void create_put_ready(void *ctx, const struct sbx_err *err)
{
	struct backup_op *op = ctx;
	if (err) {
		op_fail(op, err->code, "%s", err->msg);
		if (op->job)
			exec_cancel(op->job);
		return;
	}
	if (op->job_paused && op->job) {
		op->job_paused = false;
		exec_resume_output(op->job);
	}
}

static struct backup_op *op_new(struct backups *b, enum op_kind kind,
                                struct sandbox *sb,
                                const struct backup_cbs *cbs, void *ctx)
{
	struct backup_op *op = calloc(1, sizeof(*op));
	if (!op)
		return NULL;
	op->kind = kind;
	op->b = b;
	op->sb = sb;
	op->cbs = *cbs;
	op->ctx = ctx;
	buf_init(&op->line, 64u << 10);
	buf_init(&op->pending, 0);
	sha256_init(&op->sha);
	op->next = b->ops;
	b->ops = op;
	return op;
}

static int create(struct backups *b, struct sandbox *sb, const char *dir,
                  const char *const *excludes, size_t nexcludes, uint64_t ttl_s,
                  const char *base, const char *manifest,
                  const struct backup_cbs *cbs, void *ctx,
                  struct backup_op **out)
{
	struct sbx_err err = {0};
	struct backup_op *op = op_new(b, OP_CREATE, sb, cbs, ctx);
	if (!op) {
		sbx_err_set(&err, ENOMEM, "out of memory");
		cbs->done(ctx, NULL, &err);
		return -ENOMEM;
	}
	*out = op;
	struct backup_info *in = &op->info;
	id_random(in->id, sizeof(in->id), "bkp_");
	in->tenant = strdup(sb->tenant);
	in->sandbox = strdup(sb->id);
	in->dir = strdup(dir);
	in->created_ms = now_wall_ms();
	in->expires_ms = ttl_s ? in->created_ms + ttl_s * 1000 : 0;
	in->excludes = nexcludes ? calloc(nexcludes, sizeof(char *)) : NULL;
	bool ok = in->tenant && in->sandbox && in->dir &&
	          (!nexcludes || in->excludes);
	for (size_t i = 0; ok && i < nexcludes; i++)
		if ((ok = (in->excludes[i] = strdup(excludes[i])) != NULL))
			in->nexcludes++;
	const char **argv = calloc(nexcludes + 6, sizeof(char *));
	char **pats = calloc(nexcludes + 3, sizeof(char *));
	if (!ok || !argv || !pats) {
		free(argv);
		free(pats);
		op_fail(op, ENOMEM, "out of memory");
		op_done(op);
		return -ENOMEM;
	}
	keys_of(sb->tenant, in->id, op->meta_key, op->arch_key,
	        sizeof(op->meta_key));
	int r = b->store->ops->put_begin(b->store, op->arch_key,
	                                 create_put_ready, op, &op->put, &err);
	if (r < 0) {
		free(argv);
		free(pats);
		op_fail(op, err.code, "%s", err.msg);
		op_done(op);
		return r;
	}
	size_t n = 0;
	argv[n++] = "archive-create";
	argv[n++] = "/";
	argv[n++] = dir;
	for (size_t i = 0; i < nexcludes; i++)
		if (asprintf(&pats[i], "--exclude=%s", excludes[i]) >= 0)
			argv[n++] = pats[i];
	if (base && asprintf(&pats[nexcludes], "--base=%s", base) >= 0)
		argv[n++] = pats[nexcludes];
	if (manifest &&
	    asprintf(&pats[nexcludes + 1], "--manifest=%s", manifest) >= 0)
		argv[n++] = pats[nexcludes + 1];
	argv[n] = NULL;
	/* a checkpoint (it writes a manifest) is not a use of the sandbox:
	 * a use while it runs leaves the sandbox changed (core/fleet.c) */
	struct exec_params p = {.argv = argv,
	                        .builtin = true,
	                        .detached = true,
	                        .internal = manifest != NULL,
	                        .timeout_ms = EXEC_NO_TIMEOUT,
	                        .on_output = create_output};
	/* from here on op may be gone when exec_submit returns 0: its done
	 * can run before (a sandbox that could not start) */
	r = exec_submit(sb, NULL, &p, create_job_done, op, &op->job, &err);
	for (size_t i = 0; i < nexcludes + 2; i++)
		free(pats[i]);
	free(pats);
	free(argv);
	if (r < 0) { /* the job never was: done was not called */
		op_fail(op, err.code ? err.code : EIO, "%s", err.msg);
		struct bstore_put *pp = op->put;
		op->put = NULL;
		b->store->ops->put_end(pp, false, NULL, NULL);
		op_done(op);
	}
	return r < 0 ? r : 0;
}

int backup_create(struct backups *b, struct sandbox *sb, const char *dir,
                  const char *const *excludes, size_t nexcludes, uint64_t ttl_s,
                  const struct backup_cbs *cbs, void *ctx,
                  struct backup_op **out)
{
	return create(b, sb, dir, excludes, nexcludes, ttl_s, NULL, NULL, cbs,
	              ctx, out);
}

int backup_checkpoint(struct backups *b, struct sandbox *sb, const char *dir,
                      const char *base, const char *manifest,
                      const struct backup_cbs *cbs, void *ctx,
                      struct backup_op **out)
{
	return create(b, sb, dir, NULL, 0, 0, base, manifest, cbs, ctx, out);
}

/* ---- restore ---- */

static void restore_finish(struct backup_op *op);
static int restore_output(void *ctx, int fd, const char *data, size_t len);

static void restore_second_done(const struct exec_result *res, void *ctx)
{
	struct backup_op *op = ctx;
	op->job = NULL;
	if (op->line.len)
		take_lines(op, "\n", 1);
	if (res->failure != EXEC_OK || res->exit_code != 0)
		job_failure(op, res, "restoring");
	else if (!op->err.code)
		log_info("sandbox=%s event=restored-backup id=%s dir=%s",
		         op->sb ? op->sb->id : "-", op->info.id, op->dir);
	op_done(op);
}

static void restore_found(void *ctx, const struct backup_info *info,
                          const struct sbx_err *lerr);

/* The next link of a chain, unpacked onto what the last ones made. */
static void restore_next(struct backup_op *op)
{
	op->ichain++;
	op->unpacked = false; /* get_done stays until the next get starts */
	op->get_paused = false;
	op->bytes = 0;
	op->builtin_errno = 0;
	buf_reset(&op->line);
	buf_reset(&op->pending);
	sha256_init(&op->sha);
	snprintf(op->info.id, sizeof(op->info.id), "%.*s",
	         (int)sizeof(op->info.id) - 1, op->chain[op->ichain]);
	lookup(op->b, op->info.tenant, op->chain[op->ichain], restore_found,
	       op);
}

/* Swap the unpacked tree in, or remove it: a second builtin. */
static void restore_finish(struct backup_op *op)
{
	struct sbx_err err = {0};
	if (op->job || !op->get_done)
		return; /* both must be over */
	bool commit = !op->err.code && !op->cancelled && op->unpacked;
	if (!op->tmp[0]) {
		if (op->cancelled)
			op_fail(op, ECANCELED, "cancelled");
		op_done(op);
		return;
	}
	if (op->cancelled)
		op_fail(op, ECANCELED, "cancelled");
	if (!op->sb || op->b->closing) {
		/* its leftover goes with the sandbox, or at the next restore
		 * of that directory */
		op_fail(op, ECANCELED, "the sandbox went away");
		op_done(op);
		return;
	}
	if (commit && op->ichain + 1 < op->nchain) {
		restore_next(op);
		return;
	}
	char mopt[320] = "";
	if (op->manifest[0])
		snprintf(mopt, sizeof(mopt), "--manifest=%s", op->manifest);
	const char *argv[] = {commit ? "archive-commit" : "archive-abort",
	                      "/",
	                      op->dir,
	                      op->tmp,
	                      mopt[0] && commit ? mopt : NULL,
	                      NULL};
	struct exec_params p = {.argv = argv,
	                        .builtin = true,
	                        .detached = true,
	                        .timeout_ms = EXEC_NO_TIMEOUT,
	                        .on_output = restore_output};
	op->builtin_errno = 0;
	buf_reset(&op->line);
	if (exec_submit(op->sb, NULL, &p, restore_second_done, op, &op->job,
	                &err) < 0) {
		op_fail(op, err.code ? err.code : EIO, "%s", err.msg);
		op_done(op);
	}
}

static void restore_job_done(const struct exec_result *res, void *ctx)
{
	struct backup_op *op = ctx;
	int pid = res->pid;
	op->job = NULL;
	if (op->line.len)
		take_lines(op, "\n", 1);
	if (!op->unpacked) {
		job_failure(op, res, "unpacking the backup into");
		/* killed half way: its directory is named after its pid */
		if (pid > 0 && !op->tmp[0]) {
			const char *leaf = strrchr(op->dir, '/') + 1;
			snprintf(op->tmp, sizeof(op->tmp), ".%s.sbx-restore-%d",
			         leaf, pid);
		}
	}
	if (!op->get_done && op->get) {
		op->b->store->ops->get_cancel(op->get);
		op->get = NULL;
		op->get_done = true;
	}
	restore_finish(op);
}

static int restore_output(void *ctx, int fd, const char *data, size_t len)
{
	if (fd == 1) /* the answer lines; stderr has only signs of life */
		take_lines(ctx, data, len);
	return 0;
}

/* Feed what is pending; true when all of it went. */
static bool feed_pending(struct backup_op *op)
{
	if (!op->pending.len)
		return true;
	if (!op->job) {
		buf_reset(&op->pending);
		return true;
	}
	size_t n = exec_stdin_write(op->job, op->pending.data, op->pending.len);
	memmove(op->pending.data, op->pending.data + n, op->pending.len - n);
	op->pending.len -= n;
	return op->pending.len == 0;
}

static int restore_data(void *ctx, const char *data, size_t len)
{
	struct backup_op *op = ctx;
	sha256_update(&op->sha, data, len);
	op->bytes += len;
	report(op, false);
	if (!op->job || op->err.code)
		return 0;
	size_t n = exec_stdin_write(op->job, data, len);
	if (n == len)
		return 0;
	if (buf_append(&op->pending, data + n, len - n) < 0) {
		op_fail(op, ENOMEM, "out of memory");
		exec_cancel(op->job);
		return 0;
	}
	op->get_paused = true;
	return 1;
}

static void restore_drain(void *ctx)
{
	struct backup_op *op = ctx;
	if (!feed_pending(op))
		return;
	if (op->get_done) {
		if (op->job)
			exec_stdin_close(op->job);
	} else if (op->get_paused && op->get) {
		op->get_paused = false;
		op->b->store->ops->get_resume(op->get);
	}
}

static void restore_got(void *ctx, const struct sbx_err *err)
{
	struct backup_op *op = ctx;
	char sum[65];
	op->get = NULL;
	op->get_done = true;
	if (err) {
		op_fail(op, err->code, "%s", err->msg);
	} else {
		sha256_final_hex(&op->sha, sum);
		if (strcmp(sum, op->info.sha256) ||
		    op->bytes != op->info.size_bytes) {
			op->bad_sum = true;
			op_fail(op, EBADMSG,
			        "backup %s: the archive does not match its "
			        "checksum (sha256 %s, %llu bytes; expected %s, "
			        "%llu bytes)",
			        op->info.id, sum, (unsigned long long)op->bytes,
			        op->info.sha256,
			        (unsigned long long)op->info.size_bytes);
		}
		report(op, true);
	}
	if (op->job) {
		if (op->err.code)
			exec_cancel(op->job); /* never swapped in */
		else if (feed_pending(op))
			exec_stdin_close(op->job);
		return;
	}
	restore_finish(op);
}

static void restore_found(void *ctx, const struct backup_info *info,
                          const struct sbx_err *lerr)
{
	struct backup_op *op = ctx;
	struct sbx_err err = {0};
	if (!info && op->nchain) {
		op_fail(op, lerr->code == ENOENT ? EBADMSG : lerr->code,
		        "checkpoint %zu of %zu (%s): %s", op->ichain + 1,
		        op->nchain, op->chain[op->ichain], lerr->msg);
	} else if (!info) {
		op->err = *lerr;
	} else if (op->nchain && info->delta != (op->ichain > 0)) {
		op_fail(op, EBADMSG, "checkpoint %zu of %zu (%s) is %s",
		        op->ichain + 1, op->nchain, info->id,
		        info->delta ? "a delta, not a full one"
		                    : "a full one, not a delta");
	} else if (op->cancelled) {
		op_fail(op, ECANCELED, "cancelled");
	}
	if (op->err.code) {
		if (op->tmp[0]) /* what the links before made goes */
			restore_finish(op);
		else
			op_done(op);
		return;
	}
	backup_info_clear(&op->info);
	if (info_copy(&op->info, info) < 0) {
		op_fail(op, ENOMEM, "out of memory");
		op_done(op);
		return;
	}
	if (!op->dir[0])
		snprintf(op->dir, sizeof(op->dir), "%s", info->dir);
	op->total = info->size_bytes;
	keys_of(info->tenant, info->id, NULL, op->arch_key,
	        sizeof(op->arch_key));
	if (!op->sb || op->b->closing) {
		op_fail(op, ECANCELED, "the sandbox went away");
		op_done(op);
		return;
	}
	char into[320] = "";
	if (op->ichain)
		snprintf(into, sizeof(into), "--into=%s", op->tmp);
	const char *argv[] = {"archive-unpack", "/", op->dir,
	                      into[0] ? into : NULL, NULL};
	struct exec_params p = {.argv = argv,
	                        .builtin = true,
	                        .detached = true,
	                        .timeout_ms = EXEC_NO_TIMEOUT,
	                        .stdin_stream = true,
	                        .on_stdin_drain = restore_drain,
	                        .on_output = restore_output};
	/* the read first (its bytes come from the loop, never before the
	 * job is there); the job last: its done may run before exec_submit
	 * returns, and op be gone */
	op->get_done = false;
	if (op->b->store->ops->get(op->b->store, op->arch_key, 0, restore_data,
	                           restore_got, op, &op->get, &err) < 0) {
		op_fail(op, err.code, "%s", err.msg);
		op->get_done = true;
		restore_finish(op); /* an earlier link's tree goes */
		return;
	}
	report(op, true);
	if (exec_submit(op->sb, NULL, &p, restore_job_done, op, &op->job,
	                &err) < 0) {
		op_fail(op, err.code ? err.code : EIO, "%s", err.msg);
		op->b->store->ops->get_cancel(op->get);
		op->get = NULL;
		op->get_done = true;
		restore_finish(op);
	}
}

int backup_restore_chain(struct backups *b, struct sandbox *sb,
                         const char *const *ids, size_t n, const char *dir,
                         const char *manifest, const struct backup_cbs *cbs,
                         void *ctx, struct backup_op **out)
{
	struct sbx_err err = {0};
	struct backup_op *op = n ? op_new(b, OP_RESTORE, sb, cbs, ctx) : NULL;
	if (!op) {
		sbx_err_set(&err, n ? ENOMEM : EINVAL,
		            n ? "out of memory" : "an empty chain");
		cbs->done(ctx, NULL, &err);
		return -err.code;
	}
	*out = op;
	op->chain = calloc(n, sizeof(char *));
	for (size_t i = 0; op->chain && i < n; i++)
		if ((op->chain[i] = strdup(ids[i])))
			op->nchain++;
	if (op->nchain != n) {
		op_fail(op, ENOMEM, "out of memory");
		op_done(op);
		return -ENOMEM;
	}
	snprintf(op->dir, sizeof(op->dir), "%s", dir);
	if (manifest)
		snprintf(op->manifest, sizeof(op->manifest), "%s", manifest);
	snprintf(op->info.id, sizeof(op->info.id), "%.*s",
	         (int)sizeof(op->info.id) - 1, ids[0]);
	lookup(b, sb->tenant, ids[0], restore_found, op);
	return 0;
}

int backup_restore(struct backups *b, struct sandbox *sb, const char *id,
                   const char *dir, const struct backup_cbs *cbs, void *ctx,
                   struct backup_op **out)
{
	struct sbx_err err = {0};
	struct backup_op *op = op_new(b, OP_RESTORE, sb, cbs, ctx);
	if (!op) {
		sbx_err_set(&err, ENOMEM, "out of memory");
		cbs->done(ctx, NULL, &err);
		return -ENOMEM;
	}
	*out = op;
	if (dir)
		snprintf(op->dir, sizeof(op->dir), "%s", dir);
	snprintf(op->info.id, sizeof(op->info.id), "%.*s",
	         (int)sizeof(op->info.id) - 1, id);
	lookup(b, sb->tenant, id, restore_found, op);
	return 0;
}

void backup_op_cancel(struct backup_op *op)
{
	if (op->finished || op->cancelled)
		return;
	op->cancelled = true;
	if (op->job)
		exec_cancel(op->job);
	else if (op->kind == OP_RESTORE && op->get) {
		op->b->store->ops->get_cancel(op->get);
		op->get = NULL;
		op->get_done = true;
		restore_finish(op);
	}
}

/* ---- reading an archive
 * ---------------------------------------------------------------- */

struct backup_read {
	struct backups *b;
	struct backup_read_cbs cbs;
	void *ctx;
	struct bstore_get *get;
	char key[600];
	bool cancelled;
};

static int read_data(void *ctx, const char *p, size_t n)
{
	struct backup_read *r = ctx;
	return r->cbs.data(r->ctx, p, n);
}

static void read_done(void *ctx, const struct sbx_err *err)
{
	struct backup_read *r = ctx;
	r->cbs.done(r->ctx, err);
	free(r);
}

static void read_found(void *ctx, const struct backup_info *info,
                       const struct sbx_err *err)
{
	struct backup_read *r = ctx;
	struct sbx_err gerr = {0};
	if (r->cancelled) {
		free(r);
		return;
	}
	if (!info) {
		r->cbs.done(r->ctx, err);
		free(r);
		return;
	}
	keys_of(info->tenant, info->id, NULL, r->key, sizeof(r->key));
	r->cbs.head(r->ctx, info);
	if (r->cancelled) {
		free(r);
		return;
	}
	if (r->b->store->ops->get(r->b->store, r->key, 0, read_data, read_done,
	                          r, &r->get, &gerr) < 0) {
		r->cbs.done(r->ctx, &gerr);
		free(r);
	}
}

void backup_read(struct backups *b, const char *tenant, const char *id,
                 const struct backup_read_cbs *cbs, void *ctx,
                 struct backup_read **out)
{
	struct sbx_err err = {0};
	struct backup_read *r = calloc(1, sizeof(*r));
	*out = r;
	if (!r) {
		sbx_err_set(&err, ENOMEM, "out of memory");
		cbs->done(ctx, &err);
		return;
	}
	r->b = b;
	r->cbs = *cbs;
	r->ctx = ctx;
	lookup(b, tenant, id, read_found, r);
}

void backup_read_resume(struct backup_read *r)
{
	if (r->get)
		r->b->store->ops->get_resume(r->get);
}

void backup_read_cancel(struct backup_read *r)
{
	if (r->get) {
		r->b->store->ops->get_cancel(r->get);
		free(r);
	} else {
		r->cancelled = true; /* freed when the lookup answers */
	}
}

/* ---- the reaper
 * ---------------------------------------------------------------------------
 */

static void reaped(void *ctx, struct backup_info *const *v, size_t n,
                   const struct sbx_err *err)
{
	struct backups *b = ctx;
	b->reaping = false;
	if (b->closing)
		return;
	if (err) {
		log_warn("event=backup-reap-failed %s", err->msg);
	} else {
		for (size_t i = 0; i < n; i++)
			if (expired(v[i]))
				reap_one(b, v[i]->tenant, v[i]->id);
	}
	loop_timer_start(b->m->loop, &b->reap, REAP_EVERY_MS);
}

static void on_reap(struct loop_timer *t)
{
	struct backups *b = t->data;
	b->reaping = true;
	list_keys(b, "", true, reaped, b);
}

int backups_new(struct manager *m, struct bstore *store, struct backups **out,
                struct sbx_err *err)
{
	struct backups *b = calloc(1, sizeof(*b));
	if (!b) {
		store->ops->free(store);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	b->m = m;
	b->store = store;
	b->reap.cb = on_reap;
	b->reap.data = b;
	loop_timer_start(m->loop, &b->reap, 5000);
	*out = b;
	return 0;
}

int backups_open(struct manager *m, struct sbx_err *err)
{
	struct bstore *store = NULL;
	int r;
	if (m->cfg->backup_s3) {
		r = backup_s3_store(m->cfg, m->loop, &store, err);
	} else {
		char dir[4200];
		if (m->cfg->backup_dir)
			snprintf(dir, sizeof(dir), "%s", m->cfg->backup_dir);
		else
			snprintf(dir, sizeof(dir), "%s/backups",
			         m->rt->state_dir);
		r = bstore_local_open(dir, m->loop, &store, err);
	}
	if (r < 0)
		return r;
	log_info("event=backup-store kind=%s where=%s", store->ops->name,
	         store->where);
	return backups_new(m, store, &m->backups, err);
}

const char *backups_store_name(const struct backups *b)
{
	return b->store->ops->name;
}

void backups_closing(struct backups *b)
{
	if (b)
		b->closing = true;
}

void backups_sandbox_gone(struct backups *b, struct sandbox *sb)
{
	for (struct backup_op *op = b ? b->ops : NULL; op; op = op->next)
		if (op->sb == sb)
			op->sb = NULL; /* its job fails as it stops */
}

void backups_free(struct backups *b)
{
	if (!b)
		return;
	b->closing = true;
	loop_timer_stop(b->m->loop, &b->reap);
	/* every sandbox is stopped by now, so no operation has a job left;
	 * what waits on the store ends with it (ECANCELED, now) */
	b->store->ops->free(b->store);
	loop_timer_stop(b->m->loop, &b->reap);
	while (b->ops) {
		struct backup_op *op = b->ops;
		op->put = NULL;
		op->get = NULL;
		op->job = NULL;
		op_fail(op, ECANCELED, "sandboxd is shutting down");
		op_done(op);
	}
	while (b->cache) {
		struct cached *c = b->cache;
		b->cache = c->next;
		backup_info_clear(&c->info);
		free(c->key);
		free(c);
	}
	free(b);
}
