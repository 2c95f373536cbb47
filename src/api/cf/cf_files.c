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
#include "api/source.h"
#include "http/jsonout.h"
#include "lib/base64.h"
#include "lib/util.h"

#define READ_MAX (32ull << 20) /* the container's limit for /api/read */
#define SNIFF_BYTES 8192
#define CHUNK_MAX 65535 /* raw bytes per read/stream chunk */

/* ---- one file operation ------------------------------------------------ */

enum cf_file_op { OP_READ, OP_STREAM, OP_WRITE, OP_SIMPLE, OP_LIST, OP_EXISTS };

struct cf_file {
	struct api_fileop x; /* first: the relay's context */
	struct api *a;
	struct http_req *r; /* NULL once the request is gone */
	enum cf_file_op op;
	json_t *ok;       /* the success answer of simple ops */
	char *path, *abs; /* as given; absolute */
	struct buf out;   /* read: the file; stream: the bytes its
	                     type is sniffed from */
	int encoding;     /* read: 0 by type, 1 utf-8, 2 base64 */
	bool done;        /* the operation has ended */
	bool answering;   /* the streamed answer was begun */
	bool dir, too_big;
	size_t count; /* list: entries sent */
	const char *mime;
	uint64_t size, sent;
	struct cf_utf8 u;
};

static void file_release(struct cf_file *f)
{
	if (!f->done || f->r)
		return;
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
	if (f->x.op && !f->answering)
		fileop_cancel(f->x.op);
	file_release(f);
}

/* The answer begins as a stream (opts NULL: cf's SSE). */
static bool begin(struct cf_file *f, const struct relay_opts *opts)
{
	if (f->answering || !f->r)
		return false;
	f->answering = true;
	f->x.rl = relay_open(f->r, f->a->m->loop, opts ? opts : &cf_stream_opts,
	                     &api_fileop_relay, f);
	if (!f->x.rl)
		fileop_cancel(f->x.op);
	return f->x.rl != NULL;
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
			char *b64 =
			    n ? malloc(base64_encoded_len(n) + 1) : NULL;
			if (n && !b64)
				return paused;
			if (b64)
				base64_encode(data, n, b64);
			chunk = json_string(b64 ? b64 : "");
			free(b64);
		} else {
			chunk = cf_text(&f->u, data, n, final && n == len);
		}
		if (chunk)
			paused |= cf_event(f->x.rl,
			                   json_pack("{s:s, s:o}", "type",
			                             "chunk", "data", chunk));
		data += n;
		len -= n;
		if (!len)
			break;
	}
	return paused;
}

/* The type is known (enough bytes, or all of them): the metadata event,
 * then what was held back. */
static int stream_start(struct cf_file *f, bool complete)
{
	const char *held = f->out.data ? f->out.data : "";
	f->mime = cf_mime_of(f->abs, held, f->out.len, complete);
	bool binary = cf_mime_binary(f->mime);
	if (!begin(f, NULL))
		return 0;
	cf_event(f->x.rl, json_pack("{s:s, s:s, s:I, s:b, s:s}", "type",
	                            "metadata", "mimeType", f->mime, "size",
	                            (json_int_t)f->size, "isBinary", binary,
	                            "encoding", binary ? "base64" : "utf-8"));
	int r = f->out.len ? stream_write(f, held, f->out.len, false) : 0;
	buf_reset(&f->out);
	return r;
}

/* The end of a stream: the last chunk and "complete", or an error. */
static void stream_end(struct cf_file *f, bool ok)
{
	if (ok) {
		stream_write(f, "", 0, true);
		cf_event(f->x.rl, json_pack("{s:s, s:I}", "type", "complete",
		                            "bytesRead", (json_int_t)f->sent));
	} else {
		cf_event(f->x.rl,
		         json_pack("{s:s, s:s}", "type", "error", "error",
		                   "reading the file failed"));
	}
	relay_end(f->x.rl);
}

/* ---- list ------------------------------------------------------------- */

static void mode_string(unsigned mode, char *out)
{
	static const char rwx[] = "rwxrwxrwx";
	for (int i = 0; i < 9; i++)
		out[i] = mode & (0400u >> i) ? rwx[i] : '-';
	out[9] = '\0';
}

/* The listing's answer begins: 200, then entries as they come. */
static int list_begin(struct cf_file *f)
{
	static const struct relay_opts json = {
	    .content_type = "application/json", .size = HTTP_SIZE_UNKNOWN};
	static const char a[] = "{\"success\":true,\"path\":";
	static const char b[] = ",\"files\":[";
	json_t *path = json_string(f->path);
	char *ptext =
	    path ? json_dumps(path, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	json_decref(path);
	int r = 0;
	if (!ptext)
		fileop_cancel(f->x.op);
	else if (begin(f, &json)) {
		relay_write(f->x.rl, a, sizeof(a) - 1);
		relay_write(f->x.rl, ptext, strlen(ptext));
		r = relay_write(f->x.rl, b, sizeof(b) - 1);
	}
	free(ptext);
	return r;
}

/* One entry as a JSON object on the stream; 1 when the stream is full. */
static int on_entry(void *ctx, const struct file_entry *e)
{
	struct cf_file *f = ctx;
	char when[32], mstr[10];
	if (!f->x.rl)
		return 0;
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
	    json_bytes(e->path, e->path_len), "type", file_type_name(e->type),
	    "size", (json_int_t)e->size, "modifiedAt", when, "mode", mstr,
	    "permissions", "readable", (e->mode & 0400) != 0, "writable",
	    (e->mode & 0200) != 0, "executable", (e->mode & 0100) != 0);
	buf_free(&absb);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return 0;
	int r = f->count++ ? relay_write(f->x.rl, ",", 1) : 0;
	r |= relay_write(f->x.rl, text, strlen(text));
	free(text);
	return r;
}

/* The end of a started listing: its count and time, or, after a failure,
 * a body cut short (the status is out already). */
static void list_end(struct cf_file *f, bool ok)
{
	char tail[96], ts[32];
	if (!ok) {
		relay_abort(f->x.rl);
		return;
	}
	int n = snprintf(tail, sizeof(tail),
	                 "],\"count\":%zu,\"timestamp\":\"%s\"}", f->count,
	                 cf_now(ts, sizeof(ts)));
	relay_write(f->x.rl, tail, (size_t)n);
	relay_end(f->x.rl);
}

/* ---- the operation's events ---------------------------------------------- */

static int on_file(void *ctx, uint64_t size)
{
	struct cf_file *f = ctx;
	f->size = size;
	if (f->op == OP_READ && size > READ_MAX) {
		f->too_big = true;
		fileop_cancel(f->x.op);
	}
	return 0;
}

static int on_dir(void *ctx)
{
	struct cf_file *f = ctx;
	if (f->op == OP_LIST)
		return list_begin(f);
	/* read of a directory: its listing is not wanted */
	f->dir = true;
	fileop_cancel(f->x.op);
	return 0;
}

static int on_data(void *ctx, const char *data, size_t len)
{
	struct cf_file *f = ctx;
	if (f->too_big)
		return 0;
	if (f->op != OP_STREAM) {
		buf_append(&f->out, data, len);
		return 0;
	}
	if (f->x.rl)
		return stream_write(f, data, len, false);
	if (f->answering) /* the stream could not be made */
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
		         json_pack("{s:s, s:I, s:I}", "path", f->path,
		                   "actualSize", (json_int_t)f->size, "maxSize",
		                   (json_int_t)READ_MAX),
		         "File too large: %llu bytes is more than the %llu of "
		         "readFile (use readFileStream)",
		         (unsigned long long)f->size,
		         (unsigned long long)READ_MAX);
		return;
	}
	/* up to READ_MAX of the sandbox's bytes: sent from f->out, encoded
	 * as the client reads (http/jsonout.h), never copied whole */
	struct jsonout *o = jsonout_new();
	content = b64 ? jsonout_base64(o, &f->out) : jsonout_string(o, &f->out);
	cf_ok_big(f->r, o,
	          json_pack("{s:s, s:o, s:s, s:b, s:s, s:I}", "path", f->path,
	                    "content", content, "encoding",
	                    b64 ? "base64" : "utf-8", "isBinary", b64,
	                    "mimeType", mime, "size", (json_int_t)n));
}

/* The answer of an operation whose stream did not begin. */
static void answer(struct cf_file *f, const struct fileop_result *res)
{
	if (res->status == FILEOP_TIMEOUT) {
		cf_error(f->r, "FILE_OPERATION_TIMEOUT",
		         json_pack("{s:s}", "path", f->path), "%s: %s", f->path,
		         res->what);
	} else if (f->too_big) {
		answer_read(f);
	} else if (f->dir) {
		cf_errno(f->r, EISDIR, "read", f->path);
	} else if (res->status == FILEOP_ERRNO) {
		if (f->op == OP_EXISTS)
			cf_ok(f->r, json_pack("{s:s, s:b}", "path", f->path,
			                      "exists", 0));
		else
			cf_errno(f->r, res->error, res->what, f->path);
	} else if (res->status != FILEOP_OK) {
		cf_error(f->r, "FILESYSTEM_ERROR",
		         json_pack("{s:s}", "path", f->path), "%s: %s", f->path,
		         res->what);
	} else if (f->op == OP_READ) {
		answer_read(f);
	} else if (f->op == OP_STREAM) {
		/* small enough to be held whole: type, bytes, end at once */
		stream_start(f, true);
		if (f->x.rl)
			stream_end(f, true);
	} else if (f->op == OP_EXISTS) {
		cf_ok(f->r,
		      json_pack("{s:s, s:b}", "path", f->path, "exists", 1));
	} else {
		cf_ok(f->r, json_incref(f->ok));
	}
}

static void on_done(void *ctx, const struct fileop_result *res)
{
	struct cf_file *f = ctx;
	f->x.op = NULL;
	f->done = true;
	if (f->x.rl && f->op == OP_LIST)
		list_end(f, res->status == FILEOP_OK);
	else if (f->x.rl)
		stream_end(f, res->status == FILEOP_OK);
	else if (f->r && !f->answering)
		answer(f, res);
	file_release(f);
}

static const struct fileop_ops file_ops = {
    .on_file = on_file,
    .on_dir = on_dir,
    .on_data = on_data,
    .on_entry = on_entry,
    .on_done = on_done,
};

/* ---- requests ---------------------------------------------------------- */

/* The request's path field, resolved in its session; a new operation for
 * it (NULL after answering). */
static struct cf_file *file_new(struct cf_req *q, enum cf_file_op op,
                                const char *field)
{
	bool fresh;
	char abs[4200];
	const char *path;
	struct session *s;
	if (cf_string(q, field, &path) < 0 || !(s = cf_session(q, &fresh)) ||
	    cf_resolve(q, session_cwd(s), path, abs, sizeof(abs)) < 0)
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
	f->r = q->r;
	f->op = op;
	/* read: the whole file; stream: what the type is sniffed from
	 * (less than SNIFF_BYTES, then one read of the pipe at most);
	 * others: nothing */
	buf_init(&f->out, op == OP_READ     ? READ_MAX + 64
	                  : op == OP_STREAM ? SNIFF_BYTES + (128u << 10)
	                                    : 1);
	return f;
}

static void run(struct cf_req *q, struct cf_file *f, const char *const *argv,
                const char *in, size_t inlen)
{
	struct fileop_params p = {
	    .argv = argv, .stdin_data = in, .stdin_len = inlen};
	q->r->ctx = f;
	q->r->on_close = file_req_closed;
	http_suspend(q->r);
	fileop_start(q->sb, &p, &file_ops, f, &f->x.op);
}

void cf_file_read(struct cf_req *q)
{
	const char *enc;
	int encoding = 0;
	if (cf_string(q, "encoding", &enc) < 0)
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
	json_t *content = json_object_get(q->body, "content");
	const char *enc;
	char *decoded = NULL, len[32];
	const char *data;
	size_t n;
	if (cf_string(q, "encoding", &enc) < 0)
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
	bool fresh;
	char to[4200];
	const char *dst;
	struct session *s;
	if (cf_string(q, move ? "destinationPath" : "newPath", &dst) < 0 ||
	    !(s = cf_session(q, &fresh)) ||
	    cf_resolve(q, session_cwd(s), dst, to, sizeof(to)) < 0)
		return;
	struct cf_file *f =
	    file_new(q, OP_SIMPLE, move ? "sourcePath" : "oldPath");
	if (!f)
		return;
	f->ok = json_pack("{s:s, s:s}", "path", f->path, "newPath", dst);
	const char *argv[] = {"rename",           "/",
	                      cf_rel(f->abs),     cf_rel(to),
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
		cf_error(
		    q->r, "VALIDATION_FAILED",
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
