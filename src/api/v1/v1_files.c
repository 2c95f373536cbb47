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
#include "core/files.h"
#include "core/exec.h"
#include "lib/log.h"
#include "lib/path.h"
#include "lib/util.h"

struct v1_file {
	struct api *a;
	struct http_req *r;       /* NULL once the request is gone */
	struct http_stream *s;
	struct exec_job *job;
	struct buf head;          /* the builtin's first line; then, in a
				     listing, an entry not complete yet */
	struct buf err;           /* stderr, for tar's complaints */
	bool headed, dir, job_done, stream_gone, raw;
	size_t entries;           /* listing: sent so far */
	const char *content_type;
	int status_ok;            /* raw mode: the status to answer with */
};

static void file_release(struct v1_file *f)
{
	if (f->job_done && (!f->s || f->stream_gone) && !f->r) {
		buf_free(&f->head);
		buf_free(&f->err);
		free(f);
	}
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
		v1_error(r, 400, "invalid_request", "%s: %s", path, strerror(e));
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

/* The builtin's "E <errno> <what>" line, if that is what head holds. */
static bool builtin_error(struct buf *head, int *e, const char **what)
{
	const char *s = buf_cstr(head);
	if (strncmp(s, "E ", 2))
		return false;
	char *end;
	*e = (int)strtol(s + 2, &end, 10);
	*what = *end == ' ' ? end + 1 : "";
	((char *)s)[strcspn(s, "\n")] = '\0';
	return true;
}

static void file_stream_drained(void *ctx)
{
	struct v1_file *f = ctx;
	if (f->job && !f->job_done)
		exec_resume_output(f->job);
}

static void file_stream_closed(void *ctx)
{
	struct v1_file *f = ctx;
	f->stream_gone = true;
	f->s = NULL;
	if (f->job && !f->job_done)
		exec_cancel(f->job);
	file_release(f);
}

static void file_req_closed(struct http_req *r)
{
	struct v1_file *f = r->ctx;
	log_debug("file: request closed job=%p done=%d", (void *)f->job, f->job_done);
	f->r = NULL;
	/* a client gone mid-upload: the builtin sees its stdin end short and
	 * removes its temp file */
	if (f->job && !f->job_done)
		exec_stdin_close(f->job);
	file_release(f);
}

static void start_stream(struct v1_file *f, uint64_t size)
{
	f->s = http_respond_stream(f->r, 200, f->content_type, size, NULL);
	if (f->s)
		http_stream_set_cbs(f->s, file_stream_drained,
				    file_stream_closed, f);
}

/* One entry as a JSON object on the stream; 1 when the stream is full. */
static int list_entry(void *ctx, const struct file_entry *e)
{
	struct v1_file *f = ctx;
	char ts[32];
	iso8601_ms(e->mtime_ms, ts, sizeof(ts));
	json_t *j = json_pack("{s:o, s:s, s:I, s:i, s:s}", "name",
			      json_bytes(e->path, e->path_len), "type",
			      file_type_name(e->type), "size",
			      (json_int_t)e->size, "mode", (int)e->mode, "mtime",
			      ts);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return 0;
	int r = 0;
	if (f->entries++)
		r = http_stream_write(f->s, ",", 1);
	r |= http_stream_write(f->s, text, strlen(text));
	free(text);
	return r;
}

/* Listing bytes from the builtin, as entries (a cut one waits in head). */
static int list_feed(struct v1_file *f, const char *data, size_t len)
{
	return file_listing_feed(&f->head, data, len, list_entry, f);
}

static int file_output(void *ctx, int fd, const char *data, size_t len)
{
	struct v1_file *f = ctx;
	if (fd != 1) {
		buf_append(&f->err, data, len);
		return 0;
	}
	if (f->s && f->dir)
		return list_feed(f, data, len);
	if (f->s)
		return http_stream_write(f->s, data, len);
	if (f->stream_gone || !f->r || f->dir)
		return 0;
	if (f->raw) { /* tar: the first bytes start the response */
		start_stream(f, HTTP_SIZE_UNKNOWN);
		return f->s ? http_stream_write(f->s, data, len) : 0;
	}
	if (f->headed) /* "OK ...", "E ...": kept for the answer */
		return buf_append(&f->head, data, len), 0;
	/* the head line first; what follows it is the body */
	const char *nl = memchr(data, '\n', len);
	size_t take = nl ? (size_t)(nl + 1 - data) : len;
	buf_append(&f->head, data, take);
	if (!nl)
		return 0;
	data += take;
	len -= take;
	f->headed = true;
	if (!strncmp(f->head.data, "F ", 2)) {
		uint64_t size = strtoull(f->head.data + 2, NULL, 10);
		buf_reset(&f->head);
		start_stream(f, size);
		return f->s && len ? http_stream_write(f->s, data, len) : 0;
	}
	if (strncmp(f->head.data, "D\n", 2))
		return buf_append(&f->head, data, len), 0;
	/* a directory: the listing starts now, and goes out as it comes */
	f->dir = true;
	f->content_type = "application/json";
	buf_reset(&f->head);
	start_stream(f, HTTP_SIZE_UNKNOWN);
	if (!f->s)
		return 0;
	int r = http_stream_write(f->s, "{\"entries\":[", 12);
	return r | list_feed(f, data, len);
}

static void file_done(const struct exec_result *res, void *ctx)
{
	struct v1_file *f = ctx;
	f->job_done = true;
	f->job = NULL;
	if (f->s) {
		/* a status is out already: a failure can only cut the body
		 * short, so that the client cannot take it for the whole */
		bool ok = res->failure == EXEC_OK && (f->raw || !res->exit_code);
		if (ok && f->dir && !f->head.len)
			http_stream_write(f->s, "]}", 2);
		if (ok && !(f->dir && f->head.len))
			http_stream_end(f->s);
		else
			http_stream_abort(f->s);
	} else if (f->r && !f->stream_gone) {
		int e;
		const char *what;
		const char *path = f->r->url;
		if (res->failure == EXEC_TIMEOUT)
			v1_error(f->r, 504, "file_operation_timeout", "%s",
				 res->msg);
		else if (res->failure == EXEC_NOT_STARTED ||
		    res->failure == EXEC_STOPPED)
			v1_error(f->r, 500, "internal", "%s", res->msg);
		else if (builtin_error(&f->head, &e, &what))
			errno_answer(f->r, e, what, path);
		else if (f->raw && res->exit_code == 0)
			http_respond_json(f->r, f->status_ok,
					  json_pack("{s:b}", "ok", 1));
		else if (f->raw)
			v1_error(f->r, 400, "invalid_request", "tar failed: %s",
				 buf_cstr(&f->err));
		else if (!strncmp(buf_cstr(&f->head), "OK", 2))
			http_respond_empty(f->r, strstr(f->head.data, "created")
							  ? 201 : 204);
		else
			v1_error(f->r, 500, "internal",
				 "file operation ended without an answer");
	}
	file_release(f);
}

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
	/* a head line, an "OK"/"E" answer, or one listing entry (a name
	 * is at most 255 bytes) */
	buf_init(&f->head, 16u << 10);
	buf_init(&f->err, 64u << 10);
	r->ctx = f;
	r->on_close = file_req_closed;
	return f;
}

static void run(struct v1_file *f, struct sandbox *sb,
		struct exec_params *p, bool suspend)
{
	struct sbx_err err = {0};
	p->on_output = file_output;
	if (suspend)
		http_suspend(f->r);
	if (exec_submit(sb, NULL, p, file_done, f, &f->job, &err) < 0) {
		struct exec_result res = {.failure = EXEC_NOT_STARTED};
		snprintf(res.msg, sizeof(res.msg), "%s", err.msg);
		file_done(&res, f);
	}
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
	/* no wall clock (a slow client may take hours), --file-timeout */
	struct exec_params p = {.argv = argv, .builtin = true, .detached = true,
				.timeout_ms = EXEC_NO_TIMEOUT};
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
	struct exec_params p = {.argv = argv, .builtin = true, .detached = true,
				.timeout_ms = EXEC_NO_TIMEOUT};
	run(f, sb, &p, true);
}

static size_t feed_body(struct http_req *r, const char *data, size_t len)
{
	struct v1_file *f = r->ctx;
	if (!f->job || f->job_done)
		return len; /* it ended (an error is on its way): swallow */
	return exec_stdin_write(f->job, data, len);
}

static void body_ended(struct http_req *r)
{
	struct v1_file *f = r->ctx;
	if (f->job && !f->job_done)
		exec_stdin_close(f->job);
}

static void stdin_drained(void *ctx)
{
	struct v1_file *f = ctx;
	if (f->r)
		http_resume(f->r);
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
	struct exec_params p = {.argv = argv, .builtin = true, .detached = true,
				.stdin_stream = true,
				.on_stdin_drain = stdin_drained,
				.timeout_ms = EXEC_NO_TIMEOUT};
	r->on_body = feed_body;
	r->on_body_end = body_ended;
	run(f, sb, &p, false);
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
		f->raw = true;
		f->content_type = "application/x-tar";
		struct exec_params p = {.argv = argv, .builtin = true,
					.detached = true,
					.timeout_ms = EXEC_NO_TIMEOUT};
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
	struct exec_params p = {.argv = argv, .builtin = true, .detached = true,
				.stdin_stream = true,
				.on_stdin_drain = stdin_drained,
				.timeout_ms = EXEC_NO_TIMEOUT};
	r->on_body = feed_body;
	r->on_body_end = body_ended;
	run(f, sb, &p, false);
}
