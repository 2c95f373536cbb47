/* envd's filesystem.Filesystem and /files, over the core's file
 * operations (core/fileop.h: a builtin run inside the sandbox) and watches
 * (core/watch.h): every path is resolved inside the sandbox, as the
 * request's user (root, or the unprivileged "user"), with the sandbox's
 * root as the boundary.
 *
 * An operation is one file operation, or a few in a row (MakeDir: stat,
 * then mkdir -p; Move: rename, then stat of the result), each collected
 * whole (a stat answer, an "OK", a listing's entries) and then answered.
 * GET /files streams the file as the builtin reads it; POST /files streams
 * the body into a write builtin per file: multipart (each part's filename
 * is its path) or raw bytes (gzip inflated here), a file only replacing its
 * target once it is whole. WatchDir streams a watch; the polling watcher
 * calls keep one per watcher id with its events queued until fetched. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "api/e2b/e2b.h"
#include "api/source.h"
#include "core/files.h"
#include "core/watch.h"
#include "lib/util.h"

#define LIST_CAP (64u << 20) /* a listing held to be answered */
#define UPLOAD_PENDING (1u << 20)
#define MAX_WATCHERS 64
#define MAX_WATCHER_EVENTS 10000

static const char *rel_of(const char *abs)
{
	while (*abs == '/')
		abs++;
	return *abs ? abs : ".";
}

static const char *name_of(const char *abs)
{
	const char *s = strrchr(abs, '/');
	return s && s[1] ? s + 1 : abs;
}

/* ---- entries --------------------------------------------------------------
 */

static void perm_string(char type, unsigned mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";
	out[0] = type == 'd' ? 'd' : type == 'l' ? 'L' : '-';
	for (int i = 0; i < 9; i++)
		out[1 + i] = (mode & (0400u >> i)) ? rwx[i] : '-';
	out[10] = '\0';
}

static json_t *entry_json(char type, uint64_t size, unsigned mode,
                          uint64_t mtime_ms, const char *abs)
{
	char perms[11], ts[40];
	perm_string(type, mode, perms);
	/* RFC 3339 with nanoseconds, as Go's protojson writes Timestamps */
	iso8601_ms(mtime_ms, ts, sizeof(ts));
	uint32_t gomode = mode & 0777;
	if (type == 'd')
		gomode |= 0x80000000u;
	else if (type == 'l')
		gomode |= 0x08000000u;
	char sz[32];
	snprintf(sz, sizeof(sz), "%llu", (unsigned long long)size);
	json_t *j =
	    json_pack("{s:s, s:s, s:s, s:I, s:s, s:s}", "name", name_of(abs),
	              "path", abs, "size", sz, "mode", (json_int_t)gomode,
	              "permissions", perms, "modifiedTime", ts);
	if (type == 'f')
		json_object_set_new(j, "type", json_string("FILE_TYPE_FILE"));
	else if (type == 'd')
		json_object_set_new(j, "type",
		                    json_string("FILE_TYPE_DIRECTORY"));
	else if (type == 'l')
		json_object_set_new(j, "type", json_integer(3)); /* SYMLINK */
	return j;
}

static char type_char(enum file_type t)
{
	static const char types[] = {[FILE_REGULAR] = 'f',
	                             [FILE_DIR] = 'd',
	                             [FILE_SYMLINK] = 'l',
	                             [FILE_OTHER] = 'o'};
	return types[t];
}

/* The stat builtin's answer, as an entry. */
static json_t *stat_entry(const char *answer, const char *abs)
{
	struct file_entry e;
	if (file_stat_parse(answer, &e) < 0)
		return NULL;
	return entry_json(type_char(e.type), e.size, e.mode, e.mtime_ms, abs);
}

/* ---- one operation: builtins in a row ----------------------------------- */

struct fs_op {
	struct api *a;
	struct http_req *r; /* NULL once the client is gone */
	struct sandbox *sb;
	bool root;
	int step;
	char *path, *path2;
	unsigned depth;
	struct fileop *fop; /* the builtin running */
	bool dir;           /* its answer is a listing */
	json_t *entries;    /* ListDir: the listing's entries */
	size_t listed;      /* ListDir: the listing's bytes */
	bool too_big;       /* ListDir: more than LIST_CAP of them */
	/* the next step; NULL: done */
	void (*next)(struct fs_op *o, const struct fileop_result *res);
};

static void op_free(struct fs_op *o)
{
	free(o->path);
	free(o->path2);
	json_decref(o->entries);
	free(o);
}

static void op_gone(struct http_req *r)
{
	struct fs_op *o = r->ctx;
	o->r = NULL; /* the builtin finishes; nobody is told */
}

static int op_dir(void *ctx)
{
	struct fs_op *o = ctx;
	o->dir = true;
	return 0;
}

/* A listing's entry, kept when it is within the depth asked for. */
static int op_entry(void *ctx, const struct file_entry *e)
{
	struct fs_op *o = ctx;
	char t = type_char(e->type);
	if (!o->entries || o->too_big)
		return 0;
	/* as many bytes as the builtin wrote for it: "D\n", then
	 * "<type> <size> <mode> <mtime> <path>\0" each */
	o->listed += (size_t)snprintf(NULL, 0, "%c %llu %o %llu ", t,
	                              (unsigned long long)e->size, e->mode,
	                              (unsigned long long)e->mtime_ms) +
	             e->path_len + 1;
	if (2 + o->listed > LIST_CAP) {
		o->too_big = true;
		fileop_cancel(o->fop);
		return 0;
	}
	unsigned depth = 1;
	for (size_t i = 0; i < e->path_len; i++)
		depth += e->path[i] == '/';
	if (depth > o->depth || t == 'o')
		return 0;
	char *abs = NULL;
	if (asprintf(&abs, "%s%s%.*s", o->path, strcmp(o->path, "/") ? "/" : "",
	             (int)e->path_len, e->path) < 0)
		return 0;
	json_array_append_new(
	    o->entries, entry_json(t, e->size, e->mode, e->mtime_ms, abs));
	free(abs);
	return 0;
}

static void op_done(void *ctx, const struct fileop_result *res)
{
	struct fs_op *o = ctx;
	o->fop = NULL;
	if (!o->r) {
		op_free(o);
		return;
	}
	o->step++;
	o->next(o, res);
}

static const struct fileop_ops op_ops = {
    .on_dir = op_dir, .on_entry = op_entry, .on_done = op_done};

static void op_run(struct fs_op *o, const char *const *argv)
{
	struct fileop_params p = {.argv = argv, .as_user = !o->root};
	o->dir = false;
	fileop_start(o->sb, &p, &op_ops, o, &o->fop);
}

/* Answer and free. */
static void op_answer_error(struct fs_op *o, const char *code, const char *fmt,
                            ...) __attribute__((format(printf, 3, 4)));
static void op_answer_error(struct fs_op *o, const char *code, const char *fmt,
                            ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	o->r->on_close = NULL;
	connect_error(o->r, code, "%s", msg);
	op_free(o);
}

static void op_answer(struct fs_op *o, json_t *msg)
{
	o->r->on_close = NULL;
	connect_ok(o->r, msg);
	op_free(o);
}

/* The builtin's failure as an answer; 0 when it succeeded. */
static int op_failed(struct fs_op *o, const struct fileop_result *res,
                     const char *path)
{
	if (res->status == FILEOP_ERRNO) {
		int e = res->error;
		const char *code = connect_code_of_errno(e);
		if (e == ENOENT)
			op_answer_error(o, code, "path '%s' does not exist",
			                path);
		else if (e == EACCES || e == EPERM)
			op_answer_error(o, code, "permission denied: %s", path);
		else
			op_answer_error(o, code, "%s: %s (%.255s)", path,
			                strerror(e), res->what);
		return 1;
	}
	if (res->status != FILEOP_OK) {
		op_answer_error(o, "internal", "%s: %s", path,
		                res->what && res->what[0]
		                    ? res->what
		                    : "the operation failed");
		return 1;
	}
	return 0;
}

static struct fs_op *op_new(struct e2b_req *q, const char *key, bool required)
{
	const char *p = json_string_value(json_object_get(q->body, key));
	struct fs_op *o = calloc(1, sizeof(*o));
	if (!o) {
		connect_error(q->r, "internal", "out of memory");
		return NULL;
	}
	o->a = q->a;
	o->r = q->r;
	o->sb = q->sb;
	o->root = q->root;
	if ((required && (!p || !*p)) || e2b_path(q, p, &o->path) < 0) {
		connect_error(q->r, "invalid_argument", "%s: not a valid path",
		              key);
		op_free(o);
		return NULL;
	}
	q->r->ctx = o;
	q->r->on_close = op_gone;
	http_suspend(q->r);
	return o;
}

/* ---- Stat, MakeDir, Move, Remove, ListDir ---------------------------------
 */

static void stat_next(struct fs_op *o, const struct fileop_result *res)
{
	if (op_failed(o, res, o->path))
		return;
	json_t *e = stat_entry(res->answer, o->path);
	if (!e)
		op_answer_error(o, "internal",
		                "stat: an answer it did not expect");
	else
		op_answer(o, json_pack("{s:o}", "entry", e));
}

static void mkdir_next(struct fs_op *o, const struct fileop_result *res)
{
	if (o->step == 1) {
		if (res->status == FILEOP_OK) {
			op_answer_error(o, "already_exists",
			                "path '%s' already exists", o->path);
			return;
		}
		if (res->status != FILEOP_ERRNO || res->error != ENOENT) {
			op_failed(o, res, o->path);
			return;
		}
		const char *argv[] = {"mkdir", "/", rel_of(o->path), "-p",
		                      NULL};
		op_run(o, argv);
		return;
	}
	if (!op_failed(o, res, o->path))
		op_answer(o, NULL);
}

static void move_next(struct fs_op *o, const struct fileop_result *res)
{
	if (o->step == 1) {
		if (op_failed(o, res, o->path))
			return;
		const char *argv[] = {"stat", "/", rel_of(o->path2), NULL};
		op_run(o, argv);
		return;
	}
	if (op_failed(o, res, o->path2))
		return;
	json_t *e = stat_entry(res->answer, o->path2);
	op_answer(o, json_pack("{s:o?}", "entry", e));
}

static void remove_next(struct fs_op *o, const struct fileop_result *res)
{
	if (!op_failed(o, res, o->path))
		op_answer(o, NULL);
}

static void list_next(struct fs_op *o, const struct fileop_result *res)
{
	if (o->too_big) {
		op_answer_error(o, "resource_exhausted",
		                "the listing is larger than %u MiB",
		                LIST_CAP >> 20);
		return;
	}
	if (op_failed(o, res, o->path))
		return;
	if (!o->dir) {
		op_answer_error(o, "invalid_argument",
		                "path '%s' is not a directory", o->path);
		return;
	}
	op_answer(o, json_pack("{s:O}", "entries", o->entries));
}

/* ---- WatchDir and the polling watchers ------------------------------------
 */

static json_t *event_json(enum watch_event t, const char *path, size_t len)
{
	static const char *const names[] = {
	    [WATCH_CREATE] = "EVENT_TYPE_CREATE",
	    [WATCH_WRITE] = "EVENT_TYPE_WRITE",
	    [WATCH_REMOVE] = "EVENT_TYPE_REMOVE",
	    [WATCH_RENAME] = "EVENT_TYPE_RENAME",
	    [WATCH_CHMOD] = "EVENT_TYPE_CHMOD",
	};
	if (t == WATCH_OVERFLOW)
		return NULL;
	return json_pack("{s:s%, s:s}", "name", path, len, "type", names[t]);
}

/* Why a watch of path ended before it was ready, as a Connect code and a
 * message in buf. */
static const char *watch_end_why(int err, const char *msg, const char *path,
                                 char *buf, size_t cap)
{
	if (err == ENOENT) {
		snprintf(buf, cap, "path '%s' does not exist", path);
		return "not_found";
	}
	if (err == ENOTDIR) {
		snprintf(buf, cap, "path '%s' is not a directory", path);
		return "invalid_argument";
	}
	snprintf(buf, cap, "watch: %s", *msg ? msg : "it ended");
	return "internal";
}

struct e2b_watch {
	struct api_watch x; /* first: api_watch_relay frees the context */
	struct api *a;
	struct http_req *r; /* until the stream is open */
	unsigned keepalive_ms;
	char path[4200];
};

#define WATCH_KEEPALIVE "{\"keepalive\":{}}"
static const char watch_keepalive[] = "\0\0\0\0\x10" WATCH_KEEPALIVE;

static void stream_ready(void *ctx)
{
	struct e2b_watch *w = ctx;
	struct http_req *r = w->r;
	w->r = NULL;
	r->on_close = NULL;
	struct relay_opts o = connect_stream_opts(
	    w->keepalive_ms, watch_keepalive, sizeof(watch_keepalive) - 1);
	w->x.rl = relay_open(r, w->a->m->loop, &o, &api_watch_relay, w);
	if (!w->x.rl) {
		watch_stop(w->x.w);
		free(w);
		return;
	}
	connect_send(w->x.rl, 0, json_pack("{s:{}}", "start"));
}

static int stream_event(void *ctx, enum watch_event t, const char *path,
                        size_t len)
{
	struct e2b_watch *w = ctx;
	json_t *e = event_json(t, path, len);
	if (!w->x.rl || !e) {
		json_decref(e);
		return 0;
	}
	return connect_send(w->x.rl, 0, json_pack("{s:o}", "filesystem", e));
}

static void stream_ended(void *ctx, int err, const char *msg)
{
	struct e2b_watch *w = ctx;
	w->x.w = NULL;
	if (w->r) {
		struct http_req *r = w->r;
		r->on_close = NULL;
		char why[1024];
		const char *code =
		    watch_end_why(err, msg, w->path, why, sizeof(why));
		connect_stream_error(r, code, "%s", why);
		free(w);
		return;
	}
	struct buf b;
	buf_init(&b, 0);
	connect_end(&b, NULL, NULL);
	relay_write(w->x.rl, b.data, b.len);
	buf_free(&b);
	relay_end(w->x.rl);
	free(w);
}

static const struct watch_ops stream_ops = {stream_ready, stream_event,
                                            stream_ended};

static void stream_gone_early(struct http_req *r)
{
	struct e2b_watch *w = r->ctx;
	if (w->x.w)
		watch_stop(w->x.w);
	free(w);
}

/* Watch abs (recursive as the request's body says) for ops with ctx, the
 * request suspended meanwhile (gone: its on_close); -1 with err, on_close
 * cleared, when it could not start. */
static int watch_begin(struct e2b_req *q, const char *abs,
                       const struct watch_ops *ops, void *ctx,
                       void (*gone)(struct http_req *r), struct watch **wt,
                       struct sbx_err *err)
{
	struct watch_opts o = {
	    .base = "/",
	    .path = rel_of(abs),
	    .recursive = json_is_true(json_object_get(q->body, "recursive")),
	    .as_user = !q->root};
	q->r->ctx = ctx;
	q->r->on_close = gone;
	http_suspend(q->r);
	int rc = watch_start(q->sb, &o, ops, ctx, wt, err);
	if (rc < 0)
		q->r->on_close = NULL;
	return rc;
}

/* The body's "path" to watch, absolute (free it); NULL when it is not a
 * valid path. */
static char *watch_path(struct e2b_req *q)
{
	const char *p = json_string_value(json_object_get(q->body, "path"));
	char *abs = NULL;
	if (e2b_path(q, p, &abs) < 0 || strlen(abs) >= 4200) {
		free(abs);
		return NULL;
	}
	return abs;
}

static void watch_dir(struct e2b_req *q)
{
	if (!connect_streaming(q->r)) {
		connect_error(q->r, "invalid_argument", "WatchDir is a stream");
		return;
	}
	char *abs = watch_path(q);
	if (!abs) {
		connect_stream_error(q->r, "invalid_argument",
		                     "path: not a valid path");
		return;
	}
	struct e2b_watch *w = calloc(1, sizeof(*w));
	if (!w) {
		free(abs);
		connect_stream_error(q->r, "internal", "out of memory");
		return;
	}
	w->a = q->a;
	w->r = q->r;
	w->keepalive_ms = connect_keepalive_ms(q->r);
	snprintf(w->path, sizeof(w->path), "%s", abs);
	struct sbx_err err = {0};
	struct watch *wt;
	int rc =
	    watch_begin(q, abs, &stream_ops, w, stream_gone_early, &wt, &err);
	free(abs);
	if (rc < 0) {
		connect_stream_error(q->r, "internal", "%s", err.msg);
		free(w);
		return;
	}
	if (wt)
		w->x.w = wt;
}

/* A polling watcher: its events wait here until GetWatcherEvents. */
struct poller {
	struct poller *next;
	char id[ID_RANDOM_MAX];
	char *tenant, *sandbox;
	struct watch *w; /* NULL once it ended */
	json_t *events;  /* FilesystemEvent[] */
	bool ready, lost;
	struct http_req *waiting; /* CreateWatcher, until ready */
	char path[4200];
};

static struct poller *pollers;

static void poller_unlink(struct poller *pl)
{
	for (struct poller **l = &pollers; *l; l = &(*l)->next)
		if (*l == pl) {
			*l = pl->next;
			break;
		}
	json_decref(pl->events);
	free(pl->tenant);
	free(pl->sandbox);
	free(pl);
}

static void poll_ready(void *ctx)
{
	struct poller *pl = ctx;
	pl->ready = true;
	if (pl->waiting) {
		struct http_req *r = pl->waiting;
		pl->waiting = NULL;
		r->on_close = NULL;
		connect_ok(r, json_pack("{s:s}", "watcherId", pl->id));
	}
}

static int poll_event(void *ctx, enum watch_event t, const char *path,
                      size_t len)
{
	struct poller *pl = ctx;
	json_t *e = event_json(t, path, len);
	if (!e || json_array_size(pl->events) >= MAX_WATCHER_EVENTS) {
		pl->lost = true;
		json_decref(e);
		return 0;
	}
	json_array_append_new(pl->events, e);
	return 0;
}

static void poll_ended(void *ctx, int err, const char *msg)
{
	struct poller *pl = ctx;
	pl->w = NULL;
	if (pl->waiting) {
		struct http_req *r = pl->waiting;
		pl->waiting = NULL;
		r->on_close = NULL;
		char why[1024];
		const char *code =
		    watch_end_why(err, msg, pl->path, why, sizeof(why));
		connect_error(r, code, "%s", why);
		poller_unlink(pl);
	} else if (!json_array_size(pl->events)) {
		poller_unlink(pl); /* nothing left to fetch */
	}
	/* else kept: its events can still be fetched, then it is removed */
}

static const struct watch_ops poll_ops = {poll_ready, poll_event, poll_ended};

static void poll_create_gone(struct http_req *r)
{
	struct poller *pl = r->ctx;
	pl->waiting = NULL;
	if (pl->w)
		watch_stop(pl->w);
	poller_unlink(pl);
}

static struct poller *poller_find(struct e2b_req *q)
{
	const char *id =
	    json_string_value(json_object_get(q->body, "watcherId"));
	for (struct poller *pl = pollers; id && pl; pl = pl->next)
		if (!strcmp(pl->id, id) &&
		    !strcmp(pl->tenant, sandbox_tenant(q->sb)) &&
		    !strcmp(pl->sandbox, sandbox_id(q->sb)) && pl->ready)
			return pl;
	return NULL;
}

static void create_watcher(struct e2b_req *q)
{
	unsigned n = 0;
	for (struct poller *pl = pollers; pl; pl = pl->next)
		n += !strcmp(pl->sandbox, sandbox_id(q->sb)) &&
		     !strcmp(pl->tenant, sandbox_tenant(q->sb));
	if (n >= MAX_WATCHERS) {
		connect_error(q->r, "resource_exhausted",
		              "at most %d watchers per sandbox", MAX_WATCHERS);
		return;
	}
	char *abs = watch_path(q);
	if (!abs) {
		connect_error(q->r, "invalid_argument",
		              "path: not a valid path");
		return;
	}
	struct poller *pl = calloc(1, sizeof(*pl));
	if (!pl || !(pl->tenant = strdup(sandbox_tenant(q->sb))) ||
	    !(pl->sandbox = strdup(sandbox_id(q->sb))) ||
	    !(pl->events = json_array())) {
		if (pl) {
			free(pl->tenant);
			free(pl->sandbox);
			free(pl);
		}
		free(abs);
		connect_error(q->r, "internal", "out of memory");
		return;
	}
	id_random(pl->id, sizeof(pl->id), "w");
	snprintf(pl->path, sizeof(pl->path), "%s", abs);
	pl->next = pollers;
	pollers = pl;
	pl->waiting = q->r;
	struct sbx_err err = {0};
	struct watch *wt;
	int rc =
	    watch_begin(q, abs, &poll_ops, pl, poll_create_gone, &wt, &err);
	free(abs);
	if (rc < 0) {
		pl->waiting = NULL;
		connect_error(q->r, "internal", "%s", err.msg);
		poller_unlink(pl);
		return;
	}
	if (wt)
		pl->w = wt;
}

static void get_watcher_events(struct e2b_req *q)
{
	struct poller *pl = poller_find(q);
	if (!pl) {
		connect_error(q->r, "not_found", "watcher not found");
		return;
	}
	json_t *ev = pl->events;
	pl->events = json_array();
	bool ended = !pl->w;
	connect_ok(q->r, json_pack("{s:o}", "events", ev));
	if (ended) /* the directory went: nothing more will come */
		poller_unlink(pl);
}

static void remove_watcher(struct e2b_req *q)
{
	struct poller *pl = poller_find(q);
	if (!pl) {
		connect_error(q->r, "not_found", "watcher not found");
		return;
	}
	if (pl->w)
		watch_stop(pl->w);
	poller_unlink(pl);
	connect_ok(q->r, NULL);
}

/* ---- dispatch -------------------------------------------------------------
 */

void e2b_filesystem(struct e2b_req *q, const char *method)
{
	struct fs_op *o;
	if (!strcmp(method, "WatchDir")) {
		watch_dir(q);
		return;
	}
	if (connect_streaming(q->r)) {
		connect_stream_error(q->r, "unimplemented",
		                     "filesystem.Filesystem/%s is not a stream",
		                     method);
		return;
	}
	if (!strcmp(method, "CreateWatcher")) {
		create_watcher(q);
	} else if (!strcmp(method, "GetWatcherEvents")) {
		get_watcher_events(q);
	} else if (!strcmp(method, "RemoveWatcher")) {
		remove_watcher(q);
	} else if (!strcmp(method, "Stat")) {
		if (!(o = op_new(q, "path", true)))
			return;
		o->next = stat_next;
		const char *argv[] = {"stat", "/", rel_of(o->path), NULL};
		op_run(o, argv);
	} else if (!strcmp(method, "MakeDir")) {
		if (!(o = op_new(q, "path", true)))
			return;
		o->next = mkdir_next;
		const char *argv[] = {"stat", "/", rel_of(o->path), NULL};
		op_run(o, argv);
	} else if (!strcmp(method, "Move")) {
		const char *d =
		    json_string_value(json_object_get(q->body, "destination"));
		if (!d || !*d) {
			connect_error(q->r, "invalid_argument",
			              "destination: not a valid path");
			return;
		}
		char *dest = NULL;
		if (e2b_path(q, d, &dest) < 0) {
			connect_error(q->r, "invalid_argument",
			              "destination: not a valid path");
			return;
		}
		if (!(o = op_new(q, "source", true))) {
			free(dest);
			return;
		}
		o->path2 = dest;
		o->next = move_next;
		const char *argv[] = {"rename", "/", rel_of(o->path),
		                      rel_of(o->path2), NULL};
		op_run(o, argv);
	} else if (!strcmp(method, "Remove")) {
		if (!(o = op_new(q, "path", true)))
			return;
		if (!strcmp(o->path, "/")) {
			op_answer_error(o, "invalid_argument",
			                "the root cannot be removed");
			return;
		}
		o->next = remove_next;
		const char *argv[] = {"delete", "/", rel_of(o->path), "-r",
		                      NULL};
		op_run(o, argv);
	} else if (!strcmp(method, "ListDir")) {
		json_t *d = json_object_get(q->body, "depth");
		json_int_t depth = json_is_integer(d) ? json_integer_value(d)
		                   : json_is_string(d)
		                       ? strtoll(json_string_value(d), NULL, 10)
		                       : 1;
		if (!(o = op_new(q, "path", false)))
			return;
		o->depth = depth < 1 ? 1 : depth > 64 ? 64 : (unsigned)depth;
		o->entries = json_array();
		o->next = list_next;
		const char *argv[] = {"list",
		                      "/",
		                      rel_of(o->path),
		                      "-a",
		                      o->depth > 1 ? "-r" : NULL,
		                      NULL};
		op_run(o, argv);
	} else {
		connect_error(q->r, "unimplemented",
		              "filesystem.Filesystem/%s is not supported",
		              method);
	}
}

/* ---- GET /files -----------------------------------------------------------
 */

struct download {
	struct api_fileop x; /* first: the relay's glue */
	struct api *a;
	struct http_req *r; /* until the file's bytes begin */
	bool dir;
	char path[4200];
};

static void download_gone(struct http_req *r)
{
	struct download *d = r->ctx;
	d->r = NULL;
	if (d->x.op)
		fileop_cancel(d->x.op); /* done frees it */
}

static int download_file(void *ctx, uint64_t size)
{
	struct download *d = ctx;
	if (!d->r)
		return 0;
	struct http_req *r = d->r;
	d->r = NULL;
	r->on_close = NULL;
	char disp[4400];
	snprintf(disp, sizeof(disp), "inline; filename=\"%s\"",
	         name_of(d->path));
	const char *hdrs[] = {"Content-Disposition", disp, NULL};
	struct relay_opts o = {.content_type = "application/octet-stream",
	                       .size = size,
	                       .headers = hdrs};
	d->x.rl = relay_open(r, d->a->m->loop, &o, &api_fileop_relay, d);
	if (!d->x.rl)
		fileop_cancel(d->x.op);
	return 0;
}

static int download_dir(void *ctx)
{
	struct download *d = ctx;
	d->dir = true; /* done answers */
	return 0;
}

static int download_data(void *ctx, const char *data, size_t len)
{
	struct download *d = ctx;
	return d->x.rl ? relay_write(d->x.rl, data, len) : 0;
}

static void download_done(void *ctx, const struct fileop_result *res)
{
	struct download *d = ctx;
	d->x.op = NULL;
	if (d->r) {
		struct http_req *r = d->r;
		r->on_close = NULL;
		int e = res->error;
		if (d->dir)
			e2b_error(r, 400, "path '%s' is a directory", d->path);
		else if (res->status == FILEOP_ERRNO)
			e2b_error(r,
			          e == ENOENT                 ? 404
			          : e == EACCES || e == EPERM ? 403
			          : e == EISDIR               ? 400
			                                      : 500,
			          e == ENOENT ? "path '%s' does not exist"
			                      : "path '%s': cannot be read",
			          d->path);
		else
			e2b_error(r, 500, "%s: %s", d->path,
			          res->status != FILEOP_OK && res->what[0]
			              ? res->what
			              : "read failed");
	}
	if (d->x.rl)
		relay_end(d->x.rl);
	free(d);
}

static const struct fileop_ops download_ops = {.on_file = download_file,
                                               .on_dir = download_dir,
                                               .on_data = download_data,
                                               .on_done = download_done};

void e2b_files_get(struct e2b_req *q)
{
	const char *p = http_query(q->r, "path");
	char *abs = NULL;
	if (e2b_path(q, p, &abs) < 0 || strlen(abs) >= 4200) {
		free(abs);
		e2b_error(q->r, 400, "path: not a valid path");
		return;
	}
	struct download *d = calloc(1, sizeof(*d));
	if (!d) {
		free(abs);
		e2b_error(q->r, 500, "out of memory");
		return;
	}
	d->a = q->a;
	d->r = q->r;
	snprintf(d->path, sizeof(d->path), "%s", abs);
	free(abs);
	q->r->ctx = d;
	q->r->on_close = download_gone;
	http_suspend(q->r);
	const char *argv[] = {"read", "/", rel_of(d->path), NULL};
	struct fileop_params fp = {.argv = argv, .as_user = !q->root};
	fileop_start(q->sb, &fp, &download_ops, d, &d->x.op);
}

/* ---- POST /files ----------------------------------------------------------
 */

enum mp_state { MP_PREAMBLE, MP_HEADERS, MP_DATA, MP_END };

struct upload {
	struct api *a;
	struct http_req *r; /* NULL once the client is gone */
	struct sandbox *sb;
	bool root, multipart, gzip, failed, body_ended;
	char *query_path;   /* ?path= (absolute), or NULL */
	char boundary[128]; /* "\r\n--" + the boundary */
	size_t blen;
	enum mp_state st;
	struct buf in; /* multipart: raw bytes not parsed yet;
	                  octet: bytes for the builtin */
	z_stream z;
	bool z_on;
	struct fileop *job; /* the file being written */
	bool job_running, closing;
	bool starting;   /* in fileop_start: a failure is answered there */
	char cur[4200];  /* its path */
	json_t *written; /* [{path, name, type}] */
	unsigned status; /* an error to answer */
	char msg[512];
};

static void up_pump(struct upload *u);

/* The file being written is not kept: SIGTERM makes the write builtin
 * drop its temp file (once it runs: a queued one hears it at its start). */
static void up_cancel(struct upload *u)
{
	if (u->job && u->job_running)
		fileop_interrupt(u->job);
}

static void up_fail(struct upload *u, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void up_fail(struct upload *u, unsigned status, const char *fmt, ...)
{
	if (u->status)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(u->msg, sizeof(u->msg), fmt, ap);
	va_end(ap);
	u->status = status;
	u->failed = true;
	up_cancel(u);
}

static void up_free(struct upload *u)
{
	if (u->z_on)
		inflateEnd(&u->z);
	buf_free(&u->in);
	json_decref(u->written);
	free(u->query_path);
	free(u);
}

/* Answer once the body is in and no builtin runs. */
static void up_finish(struct upload *u)
{
	if (!u->body_ended || u->job_running)
		return;
	if (!u->r) {
		up_free(u);
		return;
	}
	struct http_req *r = u->r;
	u->r = NULL;
	r->on_close = NULL;
	if (!u->status && u->multipart && u->st != MP_END)
		up_fail(u, 400, "the multipart body ended early");
	if (!u->status && !json_array_size(u->written))
		up_fail(u, 400, "no file in the request");
	if (u->status)
		e2b_error(r, u->status, "%s", u->msg);
	else
		http_respond_json(r, 200, json_incref(u->written));
	up_free(u);
}

static void up_job_done(void *ctx, const struct fileop_result *res)
{
	struct upload *u = ctx;
	u->job = NULL;
	u->job_running = false;
	u->closing = false;
	int e = res->error;
	if (u->starting) { /* it did not start: up_start_file goes on */
		up_fail(u, 500, "%s", res->what);
		return;
	}
	if (res->status == FILEOP_ERRNO) {
		if (e == ECANCELED)
			;
		else if (e == ENOSPC || e == EDQUOT)
			up_fail(u, 507, "not enough disk space for %s", u->cur);
		else if (e == EISDIR)
			up_fail(u, 400, "path '%s' is a directory", u->cur);
		else if (e == EACCES || e == EPERM)
			up_fail(u, 403, "permission denied: %s", u->cur);
		else if (e == ENOTDIR || e == EXDEV || e == ELOOP)
			up_fail(u, 400, "path '%s': %s", u->cur, strerror(e));
		else
			up_fail(u, 500, "%s: %s", u->cur, strerror(e));
	} else if (res->status != FILEOP_OK) {
		up_fail(u, 500, "%s: %s", u->cur,
		        res->what[0] ? res->what : "write failed");
	} else if (!u->failed) {
		json_array_append_new(u->written,
		                      json_pack("{s:s, s:s, s:s}", "path",
		                                u->cur, "name", name_of(u->cur),
		                                "type", "file"));
	}
	up_pump(u);
	up_finish(u);
}

static void up_drained(void *ctx)
{
	struct upload *u = ctx;
	up_pump(u);
	if (u->r && u->in.len < UPLOAD_PENDING)
		http_resume(u->r);
}

static const struct fileop_ops up_ops = {.on_done = up_job_done,
                                         .on_stdin_drain = up_drained};

static int up_start_file(struct upload *u, const char *path)
{
	struct e2b_req q = {.a = u->a, .r = u->r, .sb = u->sb, .root = u->root};
	char *abs = NULL;
	if (u->query_path)
		abs = strdup(u->query_path);
	else if (e2b_path(&q, path, &abs) < 0)
		abs = NULL;
	if (!abs || strlen(abs) >= sizeof(u->cur) || !strcmp(abs, "/")) {
		free(abs);
		up_fail(u, 400, "'%s': not a valid file path",
		        path ? path : "");
		return -1;
	}
	snprintf(u->cur, sizeof(u->cur), "%s", abs);
	free(abs);
	const char *argv[] = {"write", "/", rel_of(u->cur), "-", NULL};
	struct fileop_params p = {
	    .argv = argv, .as_user = !u->root, .stdin_stream = true};
	u->job_running = true;
	u->starting = true;
	fileop_start(u->sb, &p, &up_ops, u, &u->job);
	u->starting = false;
	return u->job_running ? 0 : -1;
}

/* Feed n bytes to the running file; returns how many it took. */
static size_t up_feed(struct upload *u, const char *data, size_t n)
{
	if (!u->job || !u->job_running || u->closing)
		return n; /* failed: swallowed */
	return fileop_stdin_write(u->job, data, n);
}

static void up_close_file(struct upload *u)
{
	if (u->job && u->job_running && !u->closing) {
		u->closing = true;
		fileop_stdin_close(u->job);
	}
}

static void buf_consume(struct buf *b, size_t n)
{
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

static char *find_bytes(const char *h, size_t hl, const char *n, size_t nl)
{
	return memmem(h, hl, n, nl);
}

/* Parse what is in u->in as far as it goes. */
static void up_pump(struct upload *u)
{
	if (!u->multipart) {
		if (u->in.len) {
			size_t n = up_feed(u, u->in.data, u->in.len);
			buf_consume(&u->in, n);
		}
		if (u->body_ended && !u->in.len)
			up_close_file(u);
		return;
	}
	for (;;) {
		if (u->failed) {
			u->in.len = 0;
			return;
		}
		if (u->st == MP_PREAMBLE) {
			/* the first boundary has no CRLF before it */
			char *b = find_bytes(u->in.data, u->in.len,
			                     u->boundary + 2, u->blen - 2);
			if (!b)
				return;
			size_t used = (size_t)(b - u->in.data) + u->blen - 2;
			if (u->in.len < used + 2)
				return;
			if (!memcmp(u->in.data + used, "--", 2)) {
				u->st = MP_END;
				u->in.len = 0;
				return;
			}
			buf_consume(&u->in, used);
			u->st = MP_HEADERS;
		}
		if (u->st == MP_HEADERS) {
			if (u->job_running)
				return; /* the previous file is still closing */
			char *end =
			    find_bytes(u->in.data, u->in.len, "\r\n\r\n", 4);
			if (!end) {
				if (u->in.len > 16384)
					up_fail(u, 400,
					        "multipart headers too long");
				return;
			}
			*end = '\0';
			char *cd =
			    strcasestr(u->in.data, "content-disposition:");
			char fname[4200] = "", pname[64] = "";
			if (cd) {
				char *f = strstr(cd, "filename=\"");
				char *nm = strstr(cd, " name=\"");
				if (!nm)
					nm = strstr(cd, ";name=\"");
				if (f) {
					f += 10;
					size_t l = strcspn(f, "\"\r\n");
					if (l >= sizeof(fname) &&
					    !u->query_path) {
						/* never cut: a cut name is
						 * another file */
						up_fail(
						    u, 400,
						    "'%.200s...': not a valid "
						    "file path (longer than "
						    "%zu bytes)",
						    f, sizeof(fname) - 1);
						return;
					}
					if (l < sizeof(fname)) {
						memcpy(fname, f, l);
						fname[l] = '\0';
					}
				}
				if (nm) {
					nm += 7;
					size_t l = strcspn(nm, "\"\r\n");
					if (l < sizeof(pname)) {
						memcpy(pname, nm, l);
						pname[l] = '\0';
					}
				}
			}
			buf_consume(&u->in, (size_t)(end - u->in.data) + 4);
			if (strcmp(pname, "file")) {
				up_fail(u, 400,
				        "a multipart part named \"file\" "
				        "is expected");
				return;
			}
			if (up_start_file(u, fname) < 0)
				return;
			u->st = MP_DATA;
		}
		if (u->st == MP_DATA) {
			char *b = find_bytes(u->in.data, u->in.len, u->boundary,
			                     u->blen);
			size_t safe = b ? (size_t)(b - u->in.data)
			              : u->in.len >= u->blen
			                  ? u->in.len - (u->blen - 1)
			                  : 0;
			if (safe) {
				size_t n = up_feed(u, u->in.data, safe);
				buf_consume(&u->in, n);
				if (n < safe)
					return; /* the builtin is full */
			}
			if (!b)
				return;
			/* the delimiter is at the start now */
			if (u->in.len < u->blen + 2)
				return;
			bool last = !memcmp(u->in.data + u->blen, "--", 2);
			buf_consume(&u->in, u->blen + 2);
			up_close_file(u);
			if (last) {
				u->st = MP_END;
				u->in.len = 0;
				return;
			}
			u->st = MP_HEADERS;
			continue;
		}
		return; /* MP_END: the epilogue is ignored */
	}
}

static size_t inflate_into(struct upload *u, const char *data, size_t len)
{
	u->z.next_in = (Bytef *)data;
	u->z.avail_in = (uInt)len;
	char out[65536];
	while (u->z.avail_in) {
		u->z.next_out = (Bytef *)out;
		u->z.avail_out = sizeof(out);
		int zr = inflate(&u->z, Z_NO_FLUSH);
		size_t got = sizeof(out) - u->z.avail_out;
		if (got && buf_append(&u->in, out, got) < 0) {
			up_fail(u, 500, "out of memory");
			return len;
		}
		if (zr == Z_STREAM_END)
			break;
		if (zr != Z_OK) {
			up_fail(u, 400, "the body is not valid gzip");
			return len;
		}
		if (u->in.len > 4 * UPLOAD_PENDING)
			break; /* take the rest later */
	}
	return len - u->z.avail_in;
}

static size_t up_body(struct http_req *r, const char *data, size_t len)
{
	struct upload *u = r->ctx;
	if (u->failed)
		return len;
	if (u->in.len >= UPLOAD_PENDING) {
		up_pump(u);
		if (u->in.len >= UPLOAD_PENDING)
			return 0; /* resumed by up_drained */
	}
	size_t took;
	if (u->gzip) {
		took = inflate_into(u, data, len);
	} else {
		if (buf_append(&u->in, data, len) < 0) {
			up_fail(u, 500, "out of memory");
			return len;
		}
		took = len;
	}
	up_pump(u);
	return took;
}

static void up_body_end(struct http_req *r)
{
	struct upload *u = r->ctx;
	u->body_ended = true;
	up_pump(u);
	if (!u->multipart && u->gzip && !u->failed && u->z_on) {
		/* a gzip stream that did not end is a cut upload */
		int zr = inflate(&u->z, Z_FINISH);
		if (zr != Z_STREAM_END && zr != Z_BUF_ERROR)
			up_fail(u, 400, "the gzip body is incomplete");
	}
	/* a part cut short: its file is not kept (SIGTERM to the builtin) */
	if (u->multipart && u->st == MP_DATA &&
	    !find_bytes(u->in.data, u->in.len, u->boundary, u->blen))
		up_fail(u, 400, "the multipart body ended early");
	up_finish(u); /* after the files still being written */
}

static void up_gone(struct http_req *r)
{
	struct upload *u = r->ctx;
	u->r = NULL;
	if (!u->body_ended) {
		/* cut short: the file being written is not kept */
		u->body_ended = true;
		u->failed = true;
		up_cancel(u);
	}
	if (!u->job_running)
		up_free(u);
}

void e2b_files_begin(struct e2b_req *q)
{
	struct http_req *r = q->r;
	const char *ct = http_header(r, "Content-Type");
	const char *ce = http_header(r, "Content-Encoding");
	const char *p = http_query(r, "path");
	struct upload *u = calloc(1, sizeof(*u));
	if (!u || !(u->written = json_array())) {
		free(u);
		e2b_error(r, 500, "out of memory");
		return;
	}
	u->a = q->a;
	u->r = r;
	u->sb = q->sb;
	u->root = q->root;
	buf_init(&u->in, 0);
	if (p && *p && e2b_path(q, p, &u->query_path) < 0) {
		up_free(u);
		e2b_error(r, 400, "path: not a valid path");
		return;
	}
	const char *bd = ct ? strcasestr(ct, "boundary=") : NULL;
	if (ct && !strncasecmp(ct, "multipart/form-data", 19) && bd) {
		bd += 9;
		if (*bd == '"')
			bd++;
		size_t l = strcspn(bd, "\";, ");
		if (!l || l + 4 >= sizeof(u->boundary)) {
			up_free(u);
			e2b_error(r, 400, "a multipart boundary is needed");
			return;
		}
		u->multipart = true;
		u->blen = (size_t)snprintf(u->boundary, sizeof(u->boundary),
		                           "\r\n--%.*s", (int)l, bd);
	} else {
		if (!u->query_path) {
			up_free(u);
			e2b_error(r, 400, "a raw upload needs ?path=");
			return;
		}
		if (ce && !strcasecmp(ce, "gzip")) {
			u->gzip = true;
			if (inflateInit2(&u->z, MAX_WBITS + 16) != Z_OK) {
				up_free(u);
				e2b_error(r, 500, "zlib failed");
				return;
			}
			u->z_on = true;
		} else if (ce && strcasecmp(ce, "identity")) {
			up_free(u);
			e2b_error(r, 400,
			          "Content-Encoding %s is not supported", ce);
			return;
		}
		if (up_start_file(u, NULL) < 0) {
			e2b_error(r, u->status, "%s", u->msg);
			up_free(u);
			return;
		}
	}
	r->ctx = u;
	r->on_close = up_gone;
	r->on_body = up_body;
	r->on_body_end = up_body_end;
}
