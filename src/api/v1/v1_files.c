/* /v1 files: raw bytes streamed both ways, directory listings, persist
 * (tar of /workspace) and hydrate (tar into it). Every path is resolved by
 * a builtin running inside the sandbox (runtime/builtin.c), beneath
 * /workspace: the daemon never opens a sandbox path on the host.
 *
 * Nothing here holds what a sandbox controls whole: a file's bytes and a
 * directory's listing are both streamed, the listing turned into JSON one
 * entry at a time as the client reads it (a slow client holds the builtin
 * back, through the pipe), so a directory of millions of entries costs the
 * daemon the same few hundred KiB as an empty one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/source.h"
#include "core/files.h"
#include "lib/log.h"
#include "lib/path.h"
#include "lib/util.h"

struct v1_file {
	struct api_fileop x; /* first: the relay's context */
	struct api *a;
	struct http_req *r; /* NULL once the request is gone */
	const char *content_type;
	size_t entries; /* listing: sent so far */
	bool done;      /* the operation has ended */
	bool answering; /* the streamed answer was begun */
	bool dir, raw;
	bool upload;   /* stdin is the request's body */
	bool reader;   /* it only reads: nobody wants it
	                  once the client is gone */
	int status_ok; /* raw mode: the status to answer with */
};

static void file_release(struct v1_file *f)
{
	if (f->done && !f->r)
		free(f);
}

static void errno_answer(struct http_req *r, int e, const char *what,
                         const char *path)
{
	switch (e) {
	case ENOENT:
	case ENOTDIR:
		v1_error(r, 404, "file_not_found", "%s: no such file", path);
		break;
	case EXDEV:
	case ELOOP:
		v1_error(r, 403, "path_outside_workspace",
		         "%s: resolves outside /workspace", path);
		break;
	case EACCES:
	case EPERM:
		v1_error(r, 403, "permission_denied", "%s: permission denied",
		         path);
		break;
	case EFBIG:
	case ENOSPC:
	case EDQUOT:
		v1_error(r, 413, "too_large", "%s: %s", path, strerror(e));
		break;
	case ENOTEMPTY:
	case EEXIST:
		v1_error(r, 409, "conflict", "%s: %s%s", path, strerror(e),
		         e == ENOTEMPTY ? " (use ?recursive=1)" : "");
		break;
	case EISDIR:
	case EINVAL:
		v1_error(r, 400, "invalid_request", "%s: %s", path,
		         strerror(e));
		break;
	case EPIPE:
		v1_error(r, 400, "invalid_request",
		         "%s: the body ended before Content-Length", path);
		break;
	default:
		v1_error(r, 500, "filesystem_error", "%s: %s: %s", path, what,
		         strerror(e));
	}
}

static void file_req_closed(struct http_req *r)
{
	struct v1_file *f = r->ctx;
	f->r = NULL;
	/* a client gone mid-upload: the builtin sees its stdin end short and
	 * removes its temp file; a read nobody will take is ended (once its
	 * stream began, the relay does that); a change (delete) completes */
	if (f->x.op && f->upload)
		fileop_stdin_close(f->x.op);
	else if (f->x.op && f->reader && !f->answering)
		fileop_cancel(f->x.op);
	file_release(f);
}

/* The answer begins: a stream of the file's bytes, a listing or a tar. */
static void begin(struct v1_file *f, uint64_t size)
{
	if (f->answering || !f->r)
		return;
	f->answering = true;
	struct relay_opts o = {.content_type = f->content_type, .size = size};
	f->x.rl = relay_open(f->r, f->a->m->loop, &o, &api_fileop_relay, f);
	if (!f->x.rl)
		fileop_cancel(f->x.op);
}

/* A file's bytes go from the builtin's pipe straight into the buffer the
 * HTTP server sends from (no copy through a queue of ours). */
static ssize_t file_pull(void *ctx, char *out, size_t max)
{
	struct v1_file *f = ctx;
	return f->x.op ? fileop_pull(f->x.op, out, max) : -1;
}

static void file_readable(void *ctx)
{
	struct v1_file *f = ctx;
	if (f->x.rl)
		relay_kick(f->x.rl);
}

static int on_file(void *ctx, uint64_t size)
{
	struct v1_file *f = ctx;
	begin(f, size);
	if (f->x.rl)
		relay_set_pull(f->x.rl, file_pull, f);
	return 0;
}

static int on_dir(void *ctx)
{
	struct v1_file *f = ctx;
	f->dir = true;
	f->content_type = "application/json";
	begin(f, HTTP_SIZE_UNKNOWN);
	return f->x.rl ? relay_write(f->x.rl, "{\"entries\":[", 12) : 0;
}

static int on_data(void *ctx, const char *data, size_t len)
{
	struct v1_file *f = ctx;
	if (f->raw) /* tar: the first bytes start the answer */
		begin(f, HTTP_SIZE_UNKNOWN);
	return f->x.rl ? relay_write(f->x.rl, data, len) : 0;
}

/* One entry as a JSON object on the stream; 1 when the stream is full. */
static int on_entry(void *ctx, const struct file_entry *e)
{
	struct v1_file *f = ctx;
	char ts[32];
	if (!f->x.rl)
		return 0;
	iso8601_ms(e->mtime_ms, ts, sizeof(ts));
	json_t *j = json_pack(
	    "{s:o, s:s, s:I, s:i, s:s}", "name",
	    json_bytes(e->path, e->path_len), "type", file_type_name(e->type),
	    "size", (json_int_t)e->size, "mode", (int)e->mode, "mtime", ts);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return 0;
	int r = 0;
	if (f->entries++)
		r = relay_write(f->x.rl, ",", 1);
	r |= relay_write(f->x.rl, text, strlen(text));
	free(text);
	return r;
}

static void answer(struct v1_file *f, const struct fileop_result *res)
{
	struct http_req *r = f->r;
	switch (res->status) {
	case FILEOP_TIMEOUT:
		v1_error(r, 504, "file_operation_timeout", "%s", res->what);
		break;
	case FILEOP_ERRNO:
		errno_answer(r, res->error, res->what, r->url);
		break;
	case FILEOP_FAILED:
	case FILEOP_CANCELLED:
		if (f->raw && *res->stderr_text)
			v1_error(r, 400, "invalid_request", "tar failed: %s",
			         res->stderr_text);
		else
			v1_error(r, 500, "internal", "%s", res->what);
		break;
	case FILEOP_OK:
		if (f->raw)
			http_respond_json(r, f->status_ok,
			                  json_pack("{s:b}", "ok", 1));
		else if (!strncmp(res->answer, "OK", 2))
			http_respond_empty(
			    r, strstr(res->answer, "created") ? 201 : 204);
		else
			v1_error(r, 500, "internal",
			         "file operation ended without an answer");
		break;
	}
}

static void on_done(void *ctx, const struct fileop_result *res)
{
	struct v1_file *f = ctx;
	f->x.op = NULL;
	f->done = true;
	if (f->x.rl) {
		/* a status is out already: a failure can only cut the body
		 * short, so that the client cannot take it for the whole */
		if (res->status == FILEOP_OK) {
			if (f->dir)
				relay_write(f->x.rl, "]}", 2);
			relay_end(f->x.rl);
		} else {
			relay_abort(f->x.rl);
		}
	} else if (f->r && !f->answering) {
		answer(f, res);
	}
	file_release(f);
}

static void stdin_drained(void *ctx)
{
	struct v1_file *f = ctx;
	if (f->r)
		http_resume(f->r);
}

static const struct fileop_ops file_ops = {
    .on_file = on_file,
    .on_dir = on_dir,
    .on_data = on_data,
    .on_entry = on_entry,
    .on_done = on_done,
    .on_stdin_drain = stdin_drained,
    .on_readable = file_readable,
};

/* Check the path of the route and build the builtin's argv; NULL after
 * answering the error. */
static struct sandbox *file_target(struct api *a, struct http_req *r,
                                   struct route_match *m, char *rel, size_t cap)
{
	int v = path_beneath("/workspace", m->params[1], rel, cap);
	if (v == PATH_OUTSIDE) {
		v1_error(r, 403, "path_outside_workspace",
		         "paths must stay inside /workspace");
		return NULL;
	}
	if (v) {
		v1_error(r, 400, "invalid_request", "not a valid path");
		return NULL;
	}
	return v1_sandbox_to_run(a, r, m);
}

static struct v1_file *file_new(struct api *a, struct http_req *r)
{
	struct v1_file *f = calloc(1, sizeof(*f));
	if (!f) {
		v1_error(r, 500, "internal", "out of memory");
		return NULL;
	}
	f->a = a;
	f->r = r;
	f->content_type = "application/octet-stream";
	r->ctx = f;
	r->on_close = file_req_closed;
	return f;
}

static void run(struct v1_file *f, struct sandbox *sb,
                const struct fileop_params *p, bool suspend)
{
	if (suspend)
		http_suspend(f->r);
	fileop_start(sb, p, &file_ops, f, &f->x.op);
}

void v1_file_get(struct api *a, struct http_req *r, struct route_match *m)
{
	char rel[4096];
	struct sandbox *sb = file_target(a, r, m, rel, sizeof(rel));
	if (!sb)
		return;
	struct v1_file *f = file_new(a, r);
	if (!f)
		return;
	const char *argv[] = {"read", "/workspace", *rel ? rel : ".", NULL};
	struct fileop_params p = {.argv = argv};
	f->reader = true;
	run(f, sb, &p, true);
}

void v1_file_delete(struct api *a, struct http_req *r, struct route_match *m)
{
	char rel[4096];
	struct sandbox *sb = file_target(a, r, m, rel, sizeof(rel));
	if (!sb)
		return;
	if (!*rel) {
		v1_error(r, 403, "path_outside_workspace",
		         "/workspace itself cannot be deleted");
		return;
	}
	const char *rec = http_query(r, "recursive");
	bool recursive = rec && (!strcmp(rec, "1") || !strcmp(rec, "true"));
	struct v1_file *f = file_new(a, r);
	if (!f)
		return;
	const char *argv[] = {"delete", "/workspace", rel,
	                      recursive ? "-r" : NULL, NULL};
	struct fileop_params p = {.argv = argv};
	run(f, sb, &p, true);
}

static size_t feed_body(struct http_req *r, const char *data, size_t len)
{
	struct v1_file *f = r->ctx;
	if (!f->x.op)
		return len; /* it ended (an error is on its way): swallow */
	return fileop_stdin_write(f->x.op, data, len);
}

static void body_ended(struct http_req *r)
{
	struct v1_file *f = r->ctx;
	if (f->x.op)
		fileop_stdin_close(f->x.op);
}

/* The request's body is the builtin's stdin, fed as it comes. */
static void run_upload(struct v1_file *f, struct sandbox *sb,
                       struct fileop_params *p)
{
	p->stdin_stream = true;
	f->upload = true;
	f->r->on_body = feed_body;
	f->r->on_body_end = body_ended;
	run(f, sb, p, false);
}

void v1_file_put(struct api *a, struct http_req *r, struct route_match *m)
{
	char rel[4096], len[32];
	const char *cl = http_header(r, "Content-Length");
	if (!cl) {
		v1_error(r, 411, "invalid_request",
		         "PUT needs a Content-Length (chunked uploads are not "
		         "taken)");
		return;
	}
	struct sandbox *sb = file_target(a, r, m, rel, sizeof(rel));
	if (!sb)
		return;
	if (!*rel) {
		v1_error(r, 400, "invalid_request", "a file path is needed");
		return;
	}
	struct v1_file *f = file_new(a, r);
	if (!f)
		return;
	snprintf(len, sizeof(len), "%llu", strtoull(cl, NULL, 10));
	const char *argv[] = {"write", "/workspace", rel, len, NULL};
	struct fileop_params p = {.argv = argv};
	run_upload(f, sb, &p);
}

/* persist and hydrate run the daemon's own tar code inside the sandbox
 * (builtin_tar.c), never a `tar` the sandbox could have replaced. */
void v1_persist(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sandbox *sb = v1_sandbox_to_run(a, r, m);
	if (!sb)
		return;
	const char *ex = http_query(r, "excludes");
	char *copy = ex ? strdup(ex) : NULL;
	const char *argv[256] = {"tar", "/workspace", "."};
	char *pats[240];
	int n = 3, np = 0;
	char *save = NULL;
	for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t && np < 240;
	     t = strtok_r(NULL, ",", &save)) {
		char rel[4096];
		if (path_beneath("/workspace", t, rel, sizeof(rel)) || !*rel)
			continue;
		if (asprintf(&pats[np], "--exclude=%s", rel) < 0)
			break;
		argv[n++] = pats[np++];
	}
	argv[n] = NULL;
	struct v1_file *f = file_new(a, r);
	if (f) {
		f->raw = f->reader = true;
		f->content_type = "application/x-tar";
		struct fileop_params p = {.argv = argv, .raw = true};
		run(f, sb, &p, true);
	}
	for (int i = 0; i < np; i++)
		free(pats[i]);
	free(copy);
}

void v1_hydrate(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sandbox *sb = v1_sandbox_to_run(a, r, m);
	if (!sb)
		return;
	struct v1_file *f = file_new(a, r);
	if (!f)
		return;
	f->raw = true;
	f->status_ok = 200;
	/* files owned by whoever runs it: the sandbox's root */
	const char *argv[] = {"untar", "/workspace", ".", NULL};
	struct fileop_params p = {.argv = argv, .raw = true};
	run_upload(f, sb, &p);
}
