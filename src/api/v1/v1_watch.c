/* GET /v1/sandbox/{id}/watch/{path}: a directory under /workspace watched
 * (core/watch.h), as server-sent events. The answer starts once every
 * watch is set, with "ready", so a client that saw it knows that what it
 * does next is reported; a directory that does not exist is a 404 instead.
 *   event: ready   data: {"path": "<dir>"}
 *   event: change  data: {"type": "create|write|remove|rename|chmod|overflow",
 *                         "path": "<relative to the watched directory>"}
 *   event: end     data: {}   (the directory itself went, or the sandbox
 *                              stopped)
 * ?recursive=1 watches subdirectories too. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/source.h"
#include "core/watch.h"
#include "lib/path.h"

struct v1_watch {
	struct api_watch x; /* first: api_watch_relay frees the context */
	struct api *a;
	struct http_req *r; /* until the stream is open */
	char path[4096 + 16];
};

static void gone_early(struct http_req *r)
{
	struct v1_watch *v = r->ctx;
	if (v->x.w)
		watch_stop(v->x.w);
	free(v);
}

static void ready(void *ctx)
{
	struct v1_watch *v = ctx;
	struct http_req *r = v->r;
	v->r = NULL;
	r->on_close = NULL;
	v->x.rl = relay_open(r, v->a->m->loop, NULL, &api_watch_relay, v);
	if (!v->x.rl) {
		watch_stop(v->x.w);
		free(v);
		return;
	}
	relay_event_json(v->x.rl, "ready", json_pack("{s:s}", "path", v->path));
}

static int event(void *ctx, enum watch_event t, const char *path, size_t len)
{
	struct v1_watch *v = ctx;
	if (!v->x.rl)
		return 0;
	return relay_event_json(v->x.rl, "change",
	                        json_pack("{s:s, s:s%}", "type",
	                                  watch_event_name(t), "path", path,
	                                  len));
}

static void ended(void *ctx, int err, const char *msg)
{
	struct v1_watch *v = ctx;
	v->x.w = NULL;
	if (v->r) { /* never watched */
		struct http_req *r = v->r;
		r->on_close = NULL;
		if (err == ENOENT || err == ENOTDIR)
			v1_error(r, 404, "file_not_found",
			         "%s: no such directory", v->path);
		else if (err == EXDEV || err == ELOOP)
			v1_error(r, 403, "path_outside_workspace",
			         "%s: resolves outside /workspace", v->path);
		else
			v1_error(r, 500, "internal", "watch: %s",
			         *msg ? msg : "it ended");
		free(v);
		return;
	}
	relay_event_json(v->x.rl, "end", json_object());
	relay_end(v->x.rl);
	free(v);
}

static const struct watch_ops ops = {ready, event, ended};

void v1_watch(struct api *a, struct http_req *r, struct route_match *m)
{
	char rel[4096];
	int pv = path_beneath("/workspace", m->params[1], rel, sizeof(rel));
	if (pv == PATH_OUTSIDE) {
		v1_error(r, 403, "path_outside_workspace",
		         "paths must stay inside /workspace");
		return;
	}
	if (pv) {
		v1_error(r, 400, "invalid_request", "not a valid path");
		return;
	}
	const char *rec = http_query(r, "recursive");
	struct watch_opts o = {
	    .base = "/workspace",
	    .path = *rel ? rel : ".",
	    .recursive = rec && (!strcmp(rec, "1") || !strcmp(rec, "true")),
	};
	struct sandbox *sb = v1_sandbox_to_run(a, r, m);
	if (!sb)
		return;
	struct v1_watch *v = calloc(1, sizeof(*v));
	if (!v) {
		v1_error(r, 500, "internal", "out of memory");
		return;
	}
	v->a = a;
	v->r = r;
	snprintf(v->path, sizeof(v->path), "/workspace%s%s", *rel ? "/" : "",
	         rel);
	r->ctx = v;
	r->on_close = gone_early;
	http_suspend(r);
	struct sbx_err err = {0};
	struct watch *w;
	if (watch_start(sb, &o, &ops, v, &w, &err) < 0) {
		r->on_close = NULL;
		v1_error(r, 500, "internal", "%s", err.msg);
		free(v);
		return;
	}
	if (w)
		v->x.w = w;
	/* else ended ran already, answered and freed v */
}
