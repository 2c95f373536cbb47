/* The S3 backup store (bstore.h over s3.h). Keys live below the
 * configured prefix. An archive smaller than one part is one PUT; a bigger
 * one a multipart upload of PART-byte parts, at most two in memory (one on
 * the wire, one filling), so that a backup of any size costs 16 MiB here.
 * The object appears only when the upload is completed; an aborted or
 * failed one is aborted on the server too (and, should that fail as well,
 * stays an incomplete upload, which S3 never lists). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bstore.h"
#include "core/config.h"
#include "core/s3.h"
#include "lib/buf.h"

#define PART (8u << 20)
#define MAX_PARTS 10000

struct s3store {
	struct bstore pub;
	struct s3_client *c;
};

struct part {
	char *data;
	size_t len;
};

struct bstore_put {
	struct s3store *s;
	char *key;
	void (*ready)(void *ctx, const struct sbx_err *err);
	void *ctx;
	struct part fill;   /* being filled */
	struct part full;   /* waiting for the wire */
	struct part wire;   /* on the wire */
	struct s3_req *req; /* the request in flight */
	char *upload_id;    /* once the multipart upload exists */
	bool creating;      /* CreateMultipartUpload in flight */
	char **etags;       /* by part number - 1 */
	size_t nparts;      /* parts sent (or being sent) */
	bool want_ready;    /* put_data said 1 */
	struct sbx_err err; /* the first failure */
	/* put_end(commit) */
	bool ending;
	bstore_done_cb done;
	void *done_ctx;
};

/* ---- writing
 * ------------------------------------------------------------------ */

static void put_free(struct bstore_put *p)
{
	free(p->fill.data);
	free(p->full.data);
	free(p->wire.data);
	for (size_t i = 0; i < p->nparts; i++)
		free(p->etags[i]);
	free(p->etags);
	free(p->upload_id);
	free(p->key);
	free(p);
}

/* For requests nobody waits on (an abort), and puts nobody waits on. */
static void forget(void *ctx, const struct s3_resp *resp)
{
	(void)ctx;
	(void)resp;
}

static void forget_done(void *ctx, const struct sbx_err *err)
{
	(void)ctx;
	(void)err;
}

static void put_failed(struct bstore_put *p, const struct sbx_err *err)
{
	if (!p->err.code)
		p->err = *err;
	if (p->ending) {
		bstore_done_cb done = p->done;
		void *ctx = p->done_ctx;
		struct sbx_err e = p->err;
		/* the server keeps nothing of it */
		if (p->upload_id) {
			char *q = s3_query_add(NULL, "uploadId", p->upload_id);
			struct s3_req_opts o = {.method = "DELETE",
			                        .key = p->key,
			                        .query = q,
			                        .on_done = forget};
			if (q)
				s3_request(p->s->c, &o, NULL, NULL);
			free(q);
		}
		put_free(p);
		done(ctx, &e);
		return;
	}
	if (p->ready)
		p->ready(p->ctx, &p->err);
}

static void send_next(struct bstore_put *p);

static void completed(void *ctx, const struct s3_resp *resp)
{
	struct bstore_put *p = ctx;
	p->req = NULL;
	struct sbx_err err = {0};
	/* CompleteMultipartUpload may say 200 and an error in its body */
	if (!resp->err && resp->body_len && strstr(resp->body, "<Error>")) {
		size_t pos = 0;
		char *code =
		    s3_xml_next(resp->body, resp->body_len, "Code", &pos);
		sbx_err_set(&err, EREMOTEIO,
		            "S3: completing the upload of %s: %s", p->key,
		            code ? code : "an error");
		free(code);
		put_failed(p, &err);
		return;
	}
	if (resp->err) {
		put_failed(p, resp->err);
		return;
	}
	bstore_done_cb done = p->done;
	void *dctx = p->done_ctx;
	put_free(p);
	done(dctx, NULL);
}

static void complete(struct bstore_put *p)
{
	struct buf x;
	struct sbx_err err = {0};
	buf_init(&x, 0);
	buf_printf(&x, "<CompleteMultipartUpload>");
	for (size_t i = 0; i < p->nparts; i++)
		buf_printf(
		    &x,
		    "<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>",
		    i + 1, p->etags[i]);
	buf_printf(&x, "</CompleteMultipartUpload>");
	char *q = s3_query_add(NULL, "uploadId", p->upload_id);
	struct s3_req_opts o = {.method = "POST",
	                        .key = p->key,
	                        .query = q,
	                        .body = x.data,
	                        .body_len = x.len,
	                        .on_done = completed,
	                        .ctx = p};
	/* the body must outlive the request: keep it in the put */
	free(p->wire.data);
	p->wire.data = x.data;
	p->wire.len = x.len;
	o.body = p->wire.data;
	int r = s3_request(p->s->c, &o, &p->req, &err);
	free(q);
	if (r < 0)
		put_failed(p, &err);
}

static void part_sent(void *ctx, const struct s3_resp *resp)
{
	struct bstore_put *p = ctx;
	p->req = NULL;
	free(p->wire.data);
	p->wire = (struct part){0};
	if (resp->err) {
		put_failed(p, resp->err);
		return;
	}
	if (!resp->etag[0]) {
		struct sbx_err err = {0};
		sbx_err_set(&err, EREMOTEIO, "S3: no ETag for a part of %s",
		            p->key);
		put_failed(p, &err);
		return;
	}
	p->etags[p->nparts - 1] = strdup(resp->etag);
	send_next(p);
}

static void single_sent(void *ctx, const struct s3_resp *resp)
{
	struct bstore_put *p = ctx;
	p->req = NULL;
	if (resp->err) {
		put_failed(p, resp->err);
		return;
	}
	bstore_done_cb done = p->done;
	void *dctx = p->done_ctx;
	put_free(p);
	done(dctx, NULL);
}

static void created(void *ctx, const struct s3_resp *resp)
{
	struct bstore_put *p = ctx;
	size_t pos = 0;
	p->req = NULL;
	p->creating = false;
	if (resp->err) {
		put_failed(p, resp->err);
		return;
	}
	p->upload_id =
	    s3_xml_next(resp->body, resp->body_len, "UploadId", &pos);
	if (!p->upload_id) {
		struct sbx_err err = {0};
		sbx_err_set(&err, EREMOTEIO, "S3: no UploadId for %s", p->key);
		put_failed(p, &err);
		return;
	}
	send_next(p);
}

/* Put on the wire what waits, if the wire is free; then, at the end,
 * complete. Wakes the writer when it can fill again. */
static void send_next(struct bstore_put *p)
{
	struct sbx_err err = {0};
	if (p->req || p->creating || p->err.code)
		return;
	if (!p->full.data && p->ending && p->fill.len) {
		p->full = p->fill; /* the last part: any size */
		p->fill = (struct part){0};
	}
	if (p->full.data) {
		if (p->nparts == MAX_PARTS) {
			sbx_err_set(&err, EFBIG,
			            "S3: %s: more than %d parts of %u "
			            "bytes",
			            p->key, MAX_PARTS, PART);
			put_failed(p, &err);
			return;
		}
		p->wire = p->full;
		p->full = (struct part){0};
		char **v = realloc(p->etags, (p->nparts + 1) * sizeof(*v));
		if (!v) {
			sbx_err_set(&err, ENOMEM, "out of memory");
			put_failed(p, &err);
			return;
		}
		p->etags = v;
		p->etags[p->nparts++] = NULL;
		char num[16];
		snprintf(num, sizeof(num), "%zu", p->nparts);
		char *q = s3_query_add(NULL, "partNumber", num);
		q = q ? s3_query_add(q, "uploadId", p->upload_id) : NULL;
		struct s3_req_opts o = {.method = "PUT",
		                        .key = p->key,
		                        .query = q,
		                        .body = p->wire.data,
		                        .body_len = p->wire.len,
		                        .on_done = part_sent,
		                        .ctx = p};
		int r = q ? s3_request(p->s->c, &o, &p->req, &err)
		          : sbx_err_set(&err, ENOMEM, "out of memory");
		free(q);
		if (r < 0) {
			put_failed(p, &err);
			return;
		}
		if (p->want_ready && !p->ending) {
			p->want_ready = false;
			p->ready(p->ctx, NULL);
		}
		return;
	}
	if (p->ending)
		complete(p);
}

static int put_begin(struct bstore *bs, const char *key,
                     void (*ready)(void *ctx, const struct sbx_err *err),
                     void *ctx, struct bstore_put **out, struct sbx_err *err)
{
	struct bstore_put *p = calloc(1, sizeof(*p));
	if (!p || !(p->key = strdup(key))) {
		free(p);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	p->s = (struct s3store *)bs;
	p->ready = ready;
	p->ctx = ctx;
	*out = p;
	return 0;
}

static int put_data(struct bstore_put *p, const char *data, size_t len)
{
	struct sbx_err err = {0};
	if (p->err.code)
		return -p->err.code;
	while (len) {
		if (!p->fill.data && !(p->fill.data = malloc(PART))) {
			sbx_err_set(&err, ENOMEM, "out of memory");
			put_failed(p, &err);
			return -ENOMEM;
		}
		size_t k = PART - p->fill.len < len ? PART - p->fill.len : len;
		memcpy(p->fill.data + p->fill.len, data, k);
		p->fill.len += k;
		data += k;
		len -= k;
		if (p->fill.len < PART)
			break;
		if (p->full.data) {
			/* cannot happen: the writer paused when this filled */
			sbx_err_set(&err, EIO, "S3: the writer did not pause");
			put_failed(p, &err);
			return -EIO;
		}
		p->full = p->fill;
		p->fill = (struct part){0};
		if (!p->upload_id && !p->creating) {
			struct s3_req_opts o = {.method = "POST",
			                        .key = p->key,
			                        .query = "uploads=",
			                        .on_done = created,
			                        .ctx = p};
			if (s3_request(p->s->c, &o, &p->req, &err) < 0) {
				put_failed(p, &err);
				return -p->err.code;
			}
			p->creating = true;
		} else {
			send_next(p);
		}
	}
	if (p->err.code)
		return -p->err.code;
	/* a full part waits for the wire: no more until it goes */
	if (p->full.data) {
		p->want_ready = true;
		return 1;
	}
	return 0;
}

static void put_end(struct bstore_put *p, bool commit, bstore_done_cb done,
                    void *ctx)
{
	struct sbx_err err = {0};
	if (!commit || p->err.code) {
		if (p->req)
			s3_req_cancel(p->req);
		p->req = NULL;
		if (!p->err.code)
			sbx_err_set(&p->err, ECANCELED, "aborted");
		p->ending = true;
		p->done = done ? done : forget_done;
		p->done_ctx = ctx;
		put_failed(p, &p->err);
		return;
	}
	p->ending = true;
	p->done = done;
	p->done_ctx = ctx;
	if (!p->upload_id && !p->creating && !p->full.data) {
		/* small: one PUT */
		p->wire = p->fill;
		p->fill = (struct part){0};
		struct s3_req_opts o = {.method = "PUT",
		                        .key = p->key,
		                        .body =
		                            p->wire.data ? p->wire.data : "",
		                        .body_len = p->wire.len,
		                        .on_done = single_sent,
		                        .ctx = p};
		if (s3_request(p->s->c, &o, &p->req, &err) < 0)
			put_failed(p, &err);
		return;
	}
	send_next(p);
}

/* ---- small objects
 * -------------------------------------------------------------- */

struct small {
	char *body;
	bstore_done_cb done;
	bstore_read_cb read_done;
	void *ctx;
};

static void small_written(void *ctx, const struct s3_resp *resp)
{
	struct small *sm = ctx;
	sm->done(sm->ctx, resp->err);
	free(sm->body);
	free(sm);
}

static void write_small(struct bstore *bs, const char *key, const char *data,
                        size_t len, bstore_done_cb done, void *ctx)
{
	struct s3store *s = (struct s3store *)bs;
	struct sbx_err err = {0};
	struct small *sm = calloc(1, sizeof(*sm));
	if (!sm || !(sm->body = malloc(len ? len : 1))) {
		free(sm);
		sbx_err_set(&err, ENOMEM, "out of memory");
		done(ctx, &err);
		return;
	}
	memcpy(sm->body, data, len);
	sm->done = done;
	sm->ctx = ctx;
	struct s3_req_opts o = {.method = "PUT",
	                        .key = key,
	                        .body = sm->body,
	                        .body_len = len,
	                        .on_done = small_written,
	                        .ctx = sm};
	if (s3_request(s->c, &o, NULL, &err) < 0) {
		free(sm->body);
		free(sm);
		done(ctx, &err);
	}
}

static void small_read(void *ctx, const struct s3_resp *resp)
{
	struct small *sm = ctx;
	sm->read_done(sm->ctx, resp->err ? NULL : resp->body,
	              resp->err ? 0 : resp->body_len, resp->err);
	free(sm);
}

static void read_small(struct bstore *bs, const char *key, bstore_read_cb done,
                       void *ctx)
{
	struct s3store *s = (struct s3store *)bs;
	struct sbx_err err = {0};
	struct small *sm = calloc(1, sizeof(*sm));
	if (!sm) {
		sbx_err_set(&err, ENOMEM, "out of memory");
		done(ctx, NULL, 0, &err);
		return;
	}
	sm->read_done = done;
	sm->ctx = ctx;
	struct s3_req_opts o = {
	    .method = "GET", .key = key, .on_done = small_read, .ctx = sm};
	if (s3_request(s->c, &o, NULL, &err) < 0) {
		free(sm);
		done(ctx, NULL, 0, &err);
	}
}

static void small_removed(void *ctx, const struct s3_resp *resp)
{
	struct small *sm = ctx;
	/* gone already is gone */
	if (sm->done)
		sm->done(sm->ctx, resp->err && resp->err->code != ENOENT
		                      ? resp->err
		                      : NULL);
	free(sm);
}

static void remove_key(struct bstore *bs, const char *key, bstore_done_cb done,
                       void *ctx)
{
	struct s3store *s = (struct s3store *)bs;
	struct sbx_err err = {0};
	struct small *sm = calloc(1, sizeof(*sm));
	if (!sm) {
		sbx_err_set(&err, ENOMEM, "out of memory");
		if (done)
			done(ctx, &err);
		return;
	}
	sm->done = done;
	sm->ctx = ctx;
	struct s3_req_opts o = {.method = "DELETE",
	                        .key = key,
	                        .on_done = small_removed,
	                        .ctx = sm};
	if (s3_request(s->c, &o, NULL, &err) < 0) {
		free(sm);
		if (done)
			done(ctx, &err);
	}
}

/* ---- reading
 * -------------------------------------------------------------------- */

struct bstore_get {
	struct s3_req *req;
	bstore_data_cb data;
	bstore_done_cb done;
	void *ctx;
};

static int got_data(void *ctx, const char *p, size_t n)
{
	struct bstore_get *g = ctx;
	return g->data(g->ctx, p, n);
}

static void got_all(void *ctx, const struct s3_resp *resp)
{
	struct bstore_get *g = ctx;
	bstore_done_cb done = g->done;
	void *dctx = g->ctx;
	free(g);
	done(dctx, resp->err);
}

static int get(struct bstore *bs, const char *key, uint64_t from,
               bstore_data_cb data, bstore_done_cb done, void *ctx,
               struct bstore_get **out, struct sbx_err *err)
{
	struct s3store *s = (struct s3store *)bs;
	struct bstore_get *g = calloc(1, sizeof(*g));
	if (!g)
		return sbx_err_set(err, ENOMEM, "out of memory");
	g->data = data;
	g->done = done;
	g->ctx = ctx;
	struct s3_req_opts o = {.method = "GET",
	                        .key = key,
	                        .range_from = from,
	                        .on_data = got_data,
	                        .on_done = got_all,
	                        .ctx = g};
	int r = s3_request(s->c, &o, &g->req, err);
	if (r < 0) {
		free(g);
		return r;
	}
	*out = g;
	return 0;
}

static void get_resume(struct bstore_get *g)
{
	s3_req_resume(g->req);
}

static void get_cancel(struct bstore_get *g)
{
	s3_req_cancel(g->req);
	free(g);
}

/* ---- listing
 * ---------------------------------------------------------------------- */

struct listing {
	struct s3store *s;
	char *prefix; /* the caller's, below the store's */
	char **keys;
	size_t n, cap;
	bstore_list_cb done;
	void *ctx;
};

static void list_page(struct listing *ls, const char *token);

static void list_free(struct listing *ls)
{
	for (size_t i = 0; i < ls->n; i++)
		free(ls->keys[i]);
	free(ls->keys);
	free(ls->prefix);
	free(ls);
}

static void listed(void *ctx, const struct s3_resp *resp)
{
	struct listing *ls = ctx;
	struct sbx_err err = {0};
	if (resp->err) {
		ls->done(ls->ctx, NULL, 0, resp->err);
		list_free(ls);
		return;
	}
	const char *store_prefix = s3_client_config(ls->s->c)->prefix;
	size_t spl = strlen(store_prefix), pos = 0;
	char *k;
	while ((k = s3_xml_next(resp->body, resp->body_len, "Key", &pos))) {
		if (strncmp(k, store_prefix, spl)) {
			free(k);
			continue;
		}
		if (ls->n == ls->cap) {
			size_t cap = ls->cap ? ls->cap * 2 : 64;
			char **v = realloc(ls->keys, cap * sizeof(*v));
			if (!v) {
				free(k);
				sbx_err_set(&err, ENOMEM, "out of memory");
				ls->done(ls->ctx, NULL, 0, &err);
				list_free(ls);
				return;
			}
			ls->keys = v;
			ls->cap = cap;
		}
		memmove(k, k + spl, strlen(k + spl) + 1);
		ls->keys[ls->n++] = k;
	}
	pos = 0;
	char *trunc =
	    s3_xml_next(resp->body, resp->body_len, "IsTruncated", &pos);
	pos = 0;
	char *token = s3_xml_next(resp->body, resp->body_len,
	                          "NextContinuationToken", &pos);
	bool more = trunc && !strcmp(trunc, "true") && token && *token;
	free(trunc);
	if (more) {
		list_page(ls, token);
		free(token);
		return;
	}
	free(token);
	ls->done(ls->ctx, ls->keys, ls->n, NULL);
	list_free(ls);
}

static void list_page(struct listing *ls, const char *token)
{
	struct sbx_err err = {0};
	char full[2048];
	snprintf(full, sizeof(full), "%s%s", s3_client_config(ls->s->c)->prefix,
	         ls->prefix);
	/* sorted by name, as SigV4's canonical query wants */
	char *q =
	    token ? s3_query_add(NULL, "continuation-token", token) : NULL;
	if (!token || q)
		q = s3_query_add(q, "list-type", "2");
	if (q)
		q = s3_query_add(q, "prefix", full);
	struct s3_req_opts o = {
	    .method = "GET", .query = q, .on_done = listed, .ctx = ls};
	if (!q)
		sbx_err_set(&err, ENOMEM, "out of memory");
	if (!q || s3_request(ls->s->c, &o, NULL, &err) < 0) {
		ls->done(ls->ctx, NULL, 0, &err);
		list_free(ls);
	}
	free(q);
}

static void list(struct bstore *bs, const char *prefix, bstore_list_cb done,
                 void *ctx)
{
	struct sbx_err err = {0};
	struct listing *ls = calloc(1, sizeof(*ls));
	if (!ls || !(ls->prefix = strdup(prefix))) {
		free(ls);
		sbx_err_set(&err, ENOMEM, "out of memory");
		done(ctx, NULL, 0, &err);
		return;
	}
	ls->s = (struct s3store *)bs;
	ls->done = done;
	ls->ctx = ctx;
	list_page(ls, NULL);
}

static void s3store_free(struct bstore *bs)
{
	struct s3store *s = (struct s3store *)bs;
	if (!s)
		return;
	s3_client_free(s->c);
	free(s->pub.where);
	free(s);
}

static const struct bstore_ops s3_ops = {
    .name = "s3",
    .put_begin = put_begin,
    .put_data = put_data,
    .put_end = put_end,
    .write_small = write_small,
    .read_small = read_small,
    .get = get,
    .get_resume = get_resume,
    .get_cancel = get_cancel,
    .list = list,
    .remove = remove_key,
    .free = s3store_free,
};

int backup_s3_store(const struct config *cfg, struct loop *loop,
                    struct bstore **out, struct sbx_err *err)
{
	struct s3_config sc;
	int r = s3_config_load(cfg, &sc, err);
	if (r < 0)
		return r;
	struct s3store *s = calloc(1, sizeof(*s));
	if (!s || asprintf(&s->pub.where, "s3://%s/%s (%s, %s-style)",
	                   sc.bucket, sc.prefix, sc.endpoint,
	                   sc.path_style ? "path" : "virtual-host") < 0) {
		free(s);
		s3_config_clear(&sc);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	s->pub.ops = &s3_ops;
	if ((r = s3_client_new(loop, &sc, &s->c, err)) < 0) {
		s3_config_clear(&sc);
		free(s->pub.where);
		free(s);
		return r;
	}
	*out = &s->pub;
	return 0;
}
