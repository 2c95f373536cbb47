/* Files of the Cloudflare container protocol. Every operation is one
 * builtin (runtime/builtin.c) run inside the sandbox with base "/": the
 * daemon never opens a sandbox path on the host. Paths were made absolute
 * and normal by cf_resolve (relative ones from the session's cwd).
 *
 * read answers text as UTF-8 and anything else as base64, by MIME type:
 * from the name's extension, else from the first bytes (magic numbers,
 * then "valid UTF-8 without NUL" is text/plain), as the container does
 * with its extension table and `file --mime-type`.
 *
 * A listing is sorted by the builtin (in the sandbox's memory, charged to
 * its cgroup) and turned into JSON here one entry at a time, as the client
 * reads: the daemon never holds a listing whole. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/cf/cf.h"
#include "core/files.h"
#include "http/sse.h"
#include "http/jsonout.h"
#include "lib/base64.h"
#include "lib/util.h"

#define READ_MAX (32ull << 20)   /* the container's limit for /api/read */
#define HEAD_MAX (16u << 10)     /* a head or error line, one entry */
#define SNIFF_BYTES 8192
#define CHUNK_MAX 65535          /* raw bytes per read/stream chunk */


/* ---- one file operation ------------------------------------------------ */

enum cf_file_op { OP_READ, OP_STREAM, OP_WRITE, OP_SIMPLE, OP_LIST, OP_EXISTS };

struct cf_file {
	struct api *a;
	struct loop *loop;       /* outlives the manager at shutdown */
	struct http_req *r;      /* NULL once the request is gone */
	struct http_stream *s;   /* read/stream, once the metadata is out */
	struct exec_job *job;
	struct loop_timer cancel; /* a cancel outside the output callback */
	enum cf_file_op op;
	json_t *ok;              /* the success answer of simple ops */
	char *path, *abs;        /* as given; absolute */
	struct buf out;          /* the builtin's stdout (read/stream: the
				    head line, then the sniffed bytes) */
	int encoding;            /* read: 0 by type, 1 utf-8, 2 base64 */
	bool recursive;          /* list */
	bool headed, dir, too_big, job_done, stream_gone, started;
	size_t count;            /* list: entries sent */
	const char *mime;
	uint64_t size, sent;
	struct cf_utf8 u;
};

static void file_release(struct cf_file *f)
{
	if (!f->job_done || f->r || (f->s && !f->stream_gone))
		return;
	loop_timer_stop(f->loop, &f->cancel);
	json_decref(f->ok);
	buf_free(&f->out);
	free(f->path);
	free(f->abs);
	free(f);
}

static void file_req_closed(struct http_req *r)
{
	struct cf_file *f = r->ctx;
	f->r = NULL;
	if (f->job && !f->job_done && !f->s)
		exec_cancel(f->job);
	file_release(f);
}

static void cancel_now(struct loop_timer *t)
{
	struct cf_file *f = t->data;
	if (f->job && !f->job_done)
		exec_cancel(f->job);
}

/* The builtin's "E <errno> <what>" line, if out holds one. */
static bool builtin_error(struct buf *out, int *e, char *what, size_t cap)
{
	const char *s = buf_cstr(out);
	char *end;
	if (strncmp(s, "E ", 2))
		return false;
	*e = (int)strtol(s + 2, &end, 10);
	snprintf(what, cap, "%.*s", (int)strcspn(end + (*end == ' '), "\n"),
		 end + (*end == ' '));
	return true;
}

/* ---- read/stream ------------------------------------------------------- */

static int stream_write(struct cf_file *f, const char *data, size_t len,
			bool final)
{
	int paused = 0;
	bool binary = cf_mime_binary(f->mime);
	f->sent += len;
	while (len || final) {
		size_t n = len > CHUNK_MAX ? CHUNK_MAX : len;
		json_t *chunk;
		if (binary) {
			char *b64 = n ? malloc(base64_encoded_len(n) + 1) : NULL;
			if (!n)
				break;
			if (!b64)
				return 1;
			base64_encode(data, n, b64);
			chunk = json_string(b64);
			free(b64);
		} else {
			chunk = cf_text(&f->u, data, n, final && n == len);
		}
		if (chunk)
			paused |= cf_sse(f->s, json_pack("{s:s, s:o}", "type", "chunk",
						      "data", chunk));
		data += n;
		len -= n;
		if (!len)
			break;
	}
	return paused;
}

static void stream_drained(void *ctx)
{
	struct cf_file *f = ctx;
	if (f->job && !f->job_done)
		exec_resume_output(f->job);
}

static void stream_closed(void *ctx)
{
	struct cf_file *f = ctx;
	f->stream_gone = true;
	f->s = NULL;
	if (f->job && !f->job_done)
		exec_cancel(f->job);
	file_release(f);
}

/* The type is known (enough bytes, or all of them): the metadata event,
 * then what was held back. */
static int stream_start(struct cf_file *f, bool complete)
{
	const char *held = f->out.data ? f->out.data : "";
	f->mime = cf_mime_of(f->abs, held, f->out.len, complete);
	bool binary = cf_mime_binary(f->mime);
	f->s = http_respond_stream(f->r, 200, "text/event-stream",
				   HTTP_SIZE_UNKNOWN, sse_headers);
	f->started = true;
	if (!f->s)
		return 0;
	http_stream_set_cbs(f->s, stream_drained, stream_closed, f);
	cf_sse(f->s, json_pack("{s:s, s:s, s:I, s:b, s:s}", "type", "metadata",
			       "mimeType", f->mime, "size", (json_int_t)f->size,
			       "isBinary", binary, "encoding",
			       binary ? "base64" : "utf-8"));
	int r = f->out.len ? stream_write(f, held, f->out.len, false) : 0;
	buf_reset(&f->out);
	return r;
}

/* The head line of read: "F <size>" (a file follows), "D" (a directory),
 * "E ..." (an error, answered at the end). Returns how much of data was
 * the head, or -1 while it is not complete. */
static ssize_t take_head(struct cf_file *f, const char *data, size_t len)
{
	size_t had = f->out.len;
	buf_append(&f->out, data, len);
	char *nl = memchr(f->out.data, '\n', f->out.len);
	if (!nl)
		return -1;
	size_t head = (size_t)(nl + 1 - f->out.data);
	f->headed = true;
	if (!strncmp(f->out.data, "F ", 2)) {
		f->size = strtoull(f->out.data + 2, NULL, 10);
		buf_reset(&f->out);
		return (ssize_t)(head - had);
	}
	f->dir = !strncmp(f->out.data, "D\n", 2);
	return (ssize_t)len; /* "D" or "E": kept as it is, for the end */
}

/* ---- list ------------------------------------------------------------- */

static void mode_string(unsigned mode, char *out)
{
	static const char rwx[] = "rwxrwxrwx";
	for (int i = 0; i < 9; i++)
		out[i] = mode & (0400u >> i) ? rwx[i] : '-';
	out[9] = '\0';
}

/* One entry as a JSON object on the stream; 1 when the stream is full. */
static int list_entry(void *ctx, const struct file_entry *e)
{
	struct cf_file *f = ctx;
	char when[32], mstr[10];
	const char *slash = memrchr(e->path, '/', e->path_len);
	const char *name = slash ? slash + 1 : e->path;
	struct buf absb;
	buf_init(&absb, 0);
	buf_printf(&absb, "%s/%.*s", strcmp(f->abs, "/") ? f->abs : "",
		   (int)e->path_len, e->path);
	iso8601_ms(e->mtime_ms, when, sizeof(when));
	mode_string(e->mode, mstr);
	json_t *j = json_pack(
		"{s:o, s:o, s:o, s:s, s:I, s:s, s:s, s:{s:b, s:b, s:b}}", "name",
		json_bytes(name, (size_t)(e->path + e->path_len - name)),
		"absolutePath", json_bytes(absb.data, absb.len), "relativePath",
		json_bytes(e->path, e->path_len), "type",
		file_type_name(e->type), "size", (json_int_t)e->size,
		"modifiedAt", when, "mode", mstr, "permissions", "readable",
		(e->mode & 0400) != 0, "writable", (e->mode & 0200) != 0,
		"executable", (e->mode & 0100) != 0);
	buf_free(&absb);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return 0;
	int r = f->count++ ? http_stream_write(f->s, ",", 1) : 0;
	r |= http_stream_write(f->s, text, strlen(text));
	free(text);
	return r;
}

/* Listing bytes, as entries (a cut one waits in out). */
static int list_feed(struct cf_file *f, const char *data, size_t len)
{
	return file_listing_feed(&f->out, data, len, list_entry, f);
}

/* Until the head line is in: "D" starts the answer (200, then entries as
 * they come), anything else is an error answered at the end. */
static int list_output(struct cf_file *f, const char *data, size_t len)
{
	if (f->s)
		return list_feed(f, data, len);
	if (f->started || !f->r)
		return 0;
	if (f->out.len && memchr(f->out.data, '\n', f->out.len))
		return buf_append(&f->out, data, len), 0; /* an error line */
	const char *nl = memchr(data, '\n', len);
	size_t take = nl ? (size_t)(nl + 1 - data) : len;
	buf_append(&f->out, data, take);
	if (!nl || strncmp(f->out.data, "D\n", 2))
		return 0;
	data += take;
	len -= take;
	buf_reset(&f->out);
	f->started = true;
	f->s = http_respond_stream(f->r, 200, "application/json",
				   HTTP_SIZE_UNKNOWN, NULL);
	int r = 0;
	json_t *path = json_string(f->path);
	char *ptext = path ? json_dumps(path, JSON_COMPACT | JSON_ENCODE_ANY)
			   : NULL;
	json_decref(path);
	if (f->s && ptext) {
		http_stream_set_cbs(f->s, stream_drained, stream_closed, f);
		static const char a[] = "{\"success\":true,\"path\":";
		static const char b[] = ",\"files\":[";
		http_stream_write(f->s, a, sizeof(a) - 1);
		http_stream_write(f->s, ptext, strlen(ptext));
		r = http_stream_write(f->s, b, sizeof(b) - 1);
		r |= list_feed(f, data, len);
	} else if (f->s) {
		http_stream_set_cbs(f->s, stream_drained, stream_closed, f);
		http_stream_abort(f->s);
	}
	free(ptext);
	return r;
}

/* The end of a started listing: its count and time, or, after a failure,
 * a body cut short (the status is out already). */
static void list_end(struct cf_file *f, const struct exec_result *res)
{
	char tail[96], ts[32];
	if (!f->s || f->stream_gone)
		return;
	if (res->failure != EXEC_OK || res->exit_code || f->out.len) {
		http_stream_abort(f->s);
		return;
	}
	int n = snprintf(tail, sizeof(tail), "],\"count\":%zu,\"timestamp\":\"%s\"}",
			 f->count, cf_now(ts, sizeof(ts)));
	http_stream_write(f->s, tail, (size_t)n);
	http_stream_end(f->s);
}

static int file_output(void *ctx, int fd, const char *data, size_t len)
{
	struct cf_file *f = ctx;
	if (fd != 1 || f->stream_gone || (!f->r && !f->s))
		return 0;
	if (f->op == OP_LIST)
		return list_output(f, data, len);
	if ((f->op == OP_READ || f->op == OP_STREAM) && !f->headed) {
		ssize_t h = take_head(f, data, len);
		if (h < 0)
			return 0;
		data += h;
		len -= (size_t)h;
		if (f->dir || !strncmp(buf_cstr(&f->out), "E ", 2))
			return 0;
		if (f->op == OP_READ && f->size > READ_MAX) {
			f->too_big = true;
			loop_timer_start(f->loop, &f->cancel, 0);
			return 0;
		}
	}
	if (f->dir || f->too_big)
		return 0; /* a directory's listing is not wanted here */
	if (f->op != OP_STREAM) {
		buf_append(&f->out, data, len);
		return 0;
	}
	if (f->s)
		return stream_write(f, data, len, false);
	if (f->started) /* the stream could not be made */
		return 0;
	buf_append(&f->out, data, len);
	return f->out.len >= SNIFF_BYTES ? stream_start(f, false) : 0;
}

/* ---- answers ----------------------------------------------------------- */

static void answer_read(struct cf_file *f)
{
	const char *data = f->out.data ? f->out.data : "";
	size_t n = f->out.len;
	const char *mime = cf_mime_of(f->abs, data, n, true);
	bool b64 = f->encoding == 2 || (!f->encoding && cf_mime_binary(mime));
	json_t *content;
	if (f->out.dropped || f->too_big) {
		cf_error(f->r, "FILE_TOO_LARGE",
			 json_pack("{s:s, s:I, s:I}", "path", f->path, "actualSize",
				   (json_int_t)f->size, "maxSize",
				   (json_int_t)READ_MAX),
			 "File too large: %llu bytes is more than the %llu of "
			 "readFile (use readFileStream)",
			 (unsigned long long)f->size, (unsigned long long)READ_MAX);
		return;
	}
	/* up to READ_MAX of the sandbox's bytes: sent from f->out, encoded
	 * as the client reads (daemon/jsonout.h), never copied whole */
	struct jsonout *o = jsonout_new();
	content = b64 ? jsonout_base64(o, &f->out) : jsonout_string(o, &f->out);
	cf_ok_big(f->r, o,
		  json_pack("{s:s, s:o, s:s, s:b, s:s, s:I}", "path", f->path,
			    "content", content, "encoding",
			    b64 ? "base64" : "utf-8", "isBinary", b64,
			    "mimeType", mime, "size", (json_int_t)n));
}

static void file_done(const struct exec_result *res, void *ctx)
{
	struct cf_file *f = ctx;
	char what[128];
	int e;
	f->job_done = true;
	f->job = NULL;
	if (f->op == OP_LIST && f->started) {
		list_end(f, res);
	} else if (f->op == OP_STREAM && f->started) {
		if (f->s && !f->stream_gone) {
			if (res->failure != EXEC_OK || res->exit_code) {
				cf_sse(f->s, json_pack("{s:s, s:s}", "type", "error",
						       "error", "reading the file failed"));
			} else {
				stream_write(f, "", 0, true);
				cf_sse(f->s, json_pack("{s:s, s:I}", "type", "complete",
						       "bytesRead", (json_int_t)f->sent));
			}
			http_stream_end(f->s);
		}
	} else if (!f->r) {
		/* the client is gone */
	} else if (res->failure == EXEC_TIMEOUT) {
		cf_error(f->r, "FILE_OPERATION_TIMEOUT",
			 json_pack("{s:s}", "path", f->path), "%s: %s", f->path,
			 res->msg);
	} else if (res->failure == EXEC_NOT_STARTED || res->failure == EXEC_STOPPED) {
		cf_error(f->r, "FILESYSTEM_ERROR", json_pack("{s:s}", "path", f->path),
			 "%s", res->msg);
	} else if (f->too_big && f->op == OP_READ) {
		answer_read(f);
	} else if (builtin_error(&f->out, &e, what, sizeof(what))) {
		if (f->op == OP_EXISTS)
			cf_ok(f->r, json_pack("{s:s, s:b}", "path", f->path,
					      "exists", 0));
		else
			cf_errno(f->r, e, what, f->path);
	} else if ((f->op == OP_READ || f->op == OP_STREAM) && f->dir) {
		cf_errno(f->r, EISDIR, "read", f->path);
	} else if (res->failure != EXEC_OK || !f->headed ||
		   (res->exit_code && f->op != OP_EXISTS)) {
		cf_error(f->r, "FILESYSTEM_ERROR", json_pack("{s:s}", "path", f->path),
			 "%s: the file operation failed", f->path);
	} else if (f->op == OP_READ) {
		answer_read(f);
	} else if (f->op == OP_STREAM) {
		/* small enough to be held whole: type, bytes, end at once */
		stream_start(f, true);
		if (f->s) {
			stream_write(f, "", 0, true);
			cf_sse(f->s, json_pack("{s:s, s:I}", "type", "complete",
					       "bytesRead", (json_int_t)f->sent));
			http_stream_end(f->s);
		}
	} else if (f->op == OP_EXISTS) {
		cf_ok(f->r, json_pack("{s:s, s:b}", "path", f->path, "exists", 1));
	} else {
		cf_ok(f->r, json_incref(f->ok));
	}
	file_release(f);
}

/* ---- requests ---------------------------------------------------------- */

/* The request's path field, resolved in its session; a new operation for
 * it (NULL after answering). */
static struct cf_file *file_new(struct cf_req *q, enum cf_file_op op,
				const char *field)
{
	bool bad, fresh;
	char abs[4200];
	const char *path = cf_string(q, field, &bad);
	struct session *s;
	if (bad || !(s = cf_session(q, &fresh)) ||
	    cf_resolve(q, s->cwd, path, abs, sizeof(abs)) < 0)
		return NULL;
	struct cf_file *f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(path)) || !(f->abs = strdup(abs))) {
		if (f)
			free(f->path);
		free(f);
		cf_error(q->r, "INTERNAL_ERROR", NULL, "out of memory");
		return NULL;
	}
	f->a = q->a;
	f->loop = q->a->m->loop;
	f->r = q->r;
	f->op = op;
	f->cancel.cb = cancel_now;
	f->cancel.data = f;
	/* read: the whole file; stream: what the type is sniffed from
	 * (less than SNIFF_BYTES, then one read of the pipe at most);
	 * others: an answer line, or one listing entry */
	buf_init(&f->out, op == OP_READ     ? READ_MAX + 64
			  : op == OP_STREAM ? SNIFF_BYTES + (128u << 10)
					    : HEAD_MAX);
	f->headed = op != OP_READ && op != OP_STREAM;
	return f;
}

static void run(struct cf_req *q, struct cf_file *f, const char *const *argv,
		const char *in, size_t inlen)
{
	struct sbx_err err = {0};
	struct exec_params p = {.argv = argv, .builtin = true, .detached = true,
				.on_output = file_output, .stdin_data = in,
				.stdin_len = inlen, .timeout_ms = EXEC_NO_TIMEOUT};
	q->r->ctx = f;
	q->r->on_close = file_req_closed;
	http_suspend(q->r);
	if (exec_submit(q->sb, NULL, &p, file_done, f, &f->job, &err) < 0) {
		struct exec_result res = {.failure = EXEC_NOT_STARTED};
		snprintf(res.msg, sizeof(res.msg), "%s", err.msg);
		file_done(&res, f);
	}
}

void cf_file_read(struct cf_req *q)
{
	bool bad;
	const char *enc = cf_string(q, "encoding", &bad);
	int encoding = 0;
	if (bad)
		return;
	if (enc && (!strcmp(enc, "utf-8") || !strcmp(enc, "utf8")))
		encoding = 1;
	else if (enc && !strcmp(enc, "base64"))
		encoding = 2;
	else if (enc) {
		cf_error(q->r, "VALIDATION_FAILED",
			 json_pack("{s:s}", "field", "encoding"),
			 "encoding must be utf-8 or base64 (\"none\" needs the "
			 "RPC transport)");
		return;
	}
	struct cf_file *f = file_new(q, OP_READ, "path");
	if (!f)
		return;
	f->encoding = encoding;
	const char *argv[] = {"read", "/", cf_rel(f->abs), NULL};
	run(q, f, argv, NULL, 0);
}

void cf_file_read_stream(struct cf_req *q)
{
	struct cf_file *f = file_new(q, OP_STREAM, "path");
	if (!f)
		return;
	const char *argv[] = {"read", "/", cf_rel(f->abs), NULL};
	run(q, f, argv, NULL, 0);
}

/* base64 as clients write it: whitespace allowed, padding optional. */
static ssize_t decode_b64(const char *in, size_t n, char **out)
{
	char *clean = malloc(n + 4);
	size_t m = 0;
	if (!clean)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!strchr(" \t\r\n", in[i]))
			clean[m++] = in[i];
	while (m % 4)
		clean[m++] = '=';
	*out = malloc(m / 4 * 3 + 1);
	ssize_t r = *out ? base64_decode(clean, m, *out) : -1;
	free(clean);
	if (r < 0) {
		free(*out);
		*out = NULL;
	}
	return r;
}

void cf_file_write(struct cf_req *q)
{
	bool bad;
	json_t *content = json_object_get(q->body, "content");
	const char *enc = cf_string(q, "encoding", &bad);
	char *decoded = NULL, len[32];
	const char *data;
	size_t n;
	if (bad)
		return;
	if (!json_is_string(content)) {
		cf_error(q->r, "VALIDATION_FAILED",
			 json_pack("{s:s}", "field", "content"),
			 "content must be a string");
		return;
	}
	if (enc && strcmp(enc, "utf-8") && strcmp(enc, "utf8") &&
	    strcmp(enc, "base64")) {
		cf_error(q->r, "VALIDATION_FAILED",
			 json_pack("{s:s}", "field", "encoding"),
			 "encoding must be utf-8 or base64");
		return;
	}
	if (enc && !strcmp(enc, "base64")) {
		ssize_t r = decode_b64(json_string_value(content),
				       json_string_length(content), &decoded);
		if (r < 0) {
			cf_error(q->r, "VALIDATION_FAILED",
				 json_pack("{s:s}", "field", "content"),
				 "content is not valid base64");
			return;
		}
		data = decoded;
		n = (size_t)r;
	} else {
		data = json_string_value(content);
		n = json_string_length(content);
	}
	struct cf_file *f = file_new(q, OP_WRITE, "path");
	if (f) {
		f->ok = json_pack("{s:s}", "path", f->path);
		snprintf(len, sizeof(len), "%zu", n);
		const char *argv[] = {"write", "/", cf_rel(f->abs), len, NULL};
		run(q, f, argv, n ? data : "", n);
	}
	free(decoded);
}

void cf_file_delete(struct cf_req *q)
{
	struct cf_file *f = file_new(q, OP_SIMPLE, "path");
	if (!f)
		return;
	f->ok = json_pack("{s:s}", "path", f->path);
	/* files only, as the container (a directory: rm -rf by exec) */
	const char *argv[] = {"delete", "/", cf_rel(f->abs), "-f", NULL};
	run(q, f, argv, NULL, 0);
}

void cf_file_rename(struct cf_req *q, bool move)
{
	bool bad, fresh;
	char to[4200];
	const char *dst = cf_string(q, move ? "destinationPath" : "newPath", &bad);
	struct session *s;
	if (bad || !(s = cf_session(q, &fresh)) ||
	    cf_resolve(q, s->cwd, dst, to, sizeof(to)) < 0)
		return;
	struct cf_file *f = file_new(q, OP_SIMPLE, move ? "sourcePath" : "oldPath");
	if (!f)
		return;
	f->ok = json_pack("{s:s, s:s}", "path", f->path, "newPath", dst);
	const char *argv[] = {"rename", "/", cf_rel(f->abs), cf_rel(to),
			      move ? "-m" : NULL, NULL};
	run(q, f, argv, NULL, 0);
}

void cf_file_mkdir(struct cf_req *q)
{
	json_t *rec = json_object_get(q->body, "recursive");
	if (rec && !json_is_boolean(rec) && !json_is_null(rec)) {
		cf_error(q->r, "VALIDATION_FAILED",
			 json_pack("{s:s}", "field", "recursive"),
			 "recursive must be a boolean");
		return;
	}
	struct cf_file *f = file_new(q, OP_SIMPLE, "path");
	if (!f)
		return;
	bool r = rec && json_is_true(rec);
	f->ok = json_pack("{s:s, s:b}", "path", f->path, "recursive", r);
	const char *argv[] = {"mkdir", "/", cf_rel(f->abs), r ? "-p" : NULL,
			      NULL};
	run(q, f, argv, NULL, 0);
}

void cf_file_list(struct cf_req *q)
{
	json_t *o = json_object_get(q->body, "options");
	json_t *rec = json_object_get(o, "recursive"),
	       *hid = json_object_get(o, "includeHidden");
	if ((o && !json_is_object(o) && !json_is_null(o)) ||
	    (rec && !json_is_boolean(rec)) || (hid && !json_is_boolean(hid))) {
		cf_error(q->r, "VALIDATION_FAILED",
			 json_pack("{s:s}", "field", "options"),
			 "options: {recursive?: boolean, includeHidden?: boolean}");
		return;
	}
	struct cf_file *f = file_new(q, OP_LIST, "path");
	if (!f)
		return;
	/* sorted by relative path, as the container answers */
	const char *argv[7] = {"list", "/", cf_rel(f->abs), "-s"};
	int n = 4;
	if (rec && json_is_true(rec))
		argv[n++] = "-r";
	if (hid && json_is_true(hid))
		argv[n++] = "-a";
	run(q, f, argv, NULL, 0);
}

void cf_file_exists(struct cf_req *q)
{
	struct cf_file *f = file_new(q, OP_EXISTS, "path");
	if (!f)
		return;
	const char *argv[] = {"stat", "/", cf_rel(f->abs), NULL};
	run(q, f, argv, NULL, 0);
}
