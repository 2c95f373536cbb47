/* /v1 background processes (see process.h for what they are). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/process.h"
#include "api/source.h"
#include "http/jsonout.h"
#include "lib/util.h"

#define KILL_GRACE_MS 5000

static json_t *process_json(const struct process *p)
{
	return api_process_json(p, API_PROCESS_PID_ALWAYS | API_PROCESS_ERROR);
}

static void started(struct process *p, void *ctx)
{
	struct http_req *r = ctx;
	struct process_info pi;
	process_info(p, &pi);
	if (pi.ended && pi.error[0])
		v1_error(r, 500, "exec_failed", "%s", pi.error);
	else
		http_respond_json(r, 201, process_json(p));
}

void v1_process_start(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sbx_err err = {0};
	struct v1_exec_req q;
	if (v1_exec_request(a, r, m, &q) < 0)
		return;
	json_t *pid = json_object_get(q.body, "processId");
	const char *id = NULL;
	if (pid) {
		id = json_is_string(pid) ? json_string_value(pid) : NULL;
		size_t l = id ? strlen(id) : 0;
		bool ok = l > 0 && l <= 128;
		for (size_t i = 0; ok && i < l; i++)
			ok = (id[i] >= 'a' && id[i] <= 'z') ||
			     (id[i] >= 'A' && id[i] <= 'Z') ||
			     (id[i] >= '0' && id[i] <= '9') || id[i] == '-' ||
			     id[i] == '_' || id[i] == '.';
		if (!ok) {
			v1_error(r, 400, "invalid_request",
			         "processId: 1-128 of [A-Za-z0-9._-]");
			goto out;
		}
	}
	/* what the list shows: the shell command, or argv joined */
	struct buf disp;
	buf_init(&disp, 4096);
	if (q.p.command)
		buf_append(&disp, q.p.command, strlen(q.p.command));
	for (size_t i = 0; q.p.argv && q.p.argv[i]; i++)
		buf_printf(&disp, "%s%s", i ? " " : "", q.p.argv[i]);
	struct process *proc;
	http_suspend(r);
	int rc = process_start(q.sb, q.sess, id, &q.p, buf_cstr(&disp), started,
	                       r, &proc, &err);
	buf_free(&disp);
	if (rc < 0) {
		static const struct v1_errmap start_errs[] = {
		    {EEXIST, 409, "process_exists"}, V1_ERR_INTERNAL};
		v1_error_of(r, &err, start_errs);
	}
out:
	v1_exec_request_free(&q);
}

void v1_process_list(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sandbox *sb = v1_sandbox(a, r, m, true);
	if (!sb)
		return;
	json_t *arr = json_array();
	for (struct process *p = process_next(sb, NULL); p;
	     p = process_next(sb, p)) {
		struct process_info pi;
		process_info(p, &pi);
		if (pi.id[0])
			json_array_append_new(arr, process_json(p));
	}
	http_respond_json(r, 200, json_pack("{s:o}", "processes", arr));
}

static struct process *find(struct api *a, struct http_req *r,
                            struct route_match *m)
{
	struct sandbox *sb = v1_sandbox(a, r, m, true);
	if (!sb)
		return NULL;
	struct process *p = process_find(sb, m->params[1]);
	if (!p)
		v1_error(r, 404, "process_not_found", "no process %s",
		         m->params[1]);
	return p;
}

void v1_process_get(struct api *a, struct http_req *r, struct route_match *m)
{
	struct process *p = find(a, r, m);
	if (p)
		http_respond_json(r, 200, process_json(p));
}

void v1_process_kill(struct api *a, struct http_req *r, struct route_match *m)
{
	struct process *p = find(a, r, m);
	if (!p)
		return;
	struct process_info pi;
	process_info(p, &pi);
	if (!pi.ended)
		process_kill(p, KILL_GRACE_MS);
	json_t *j = process_json(p);
	process_info(p, &pi);
	if (!pi.ended)
		json_object_set_new(j, "status", json_string("killing"));
	http_respond_json(r, 200, j);
}

void v1_process_logs(struct api *a, struct http_req *r, struct route_match *m)
{
	struct process *p = find(a, r, m);
	if (!p)
		return;
	struct buf out, err;
	struct process_info pi;
	process_logs(p, &pi, &out, &err);
	struct jsonout *o = jsonout_new();
	json_t *jo = jsonout_string(o, &out), *je = jsonout_string(o, &err);
	jsonout_respond(o, r, 200,
	                json_pack("{s:o, s:o, s:b, s:I, s:I}", "stdout", jo,
	                          "stderr", je, "truncated", pi.log_dropped,
	                          "cursorStart", (json_int_t)pi.log_start,
	                          "cursorEnd", (json_int_t)pi.log_end));
	buf_free(&out);
	buf_free(&err);
}

/* ---- following a process's output as SSE ------------------------------- */

static int follow_output(void *ctx, int fd, uint64_t end, const char *data,
                         size_t len)
{
	struct api_follow *fw = ctx;
	return relay_event_b64(fw->rl, fd == 1 ? "stdout" : "stderr", end, data,
	                       len);
}

static void follow_dropped(void *ctx)
{
	struct api_follow *fw = ctx;
	relay_comment(fw->rl, "output dropped: older than the log keeps");
}

static void follow_ended(void *ctx, const struct process *p, bool gone)
{
	struct api_follow *fw = ctx;
	struct process_info pi;
	process_info(p, &pi);
	if (!gone)
		relay_event_json(fw->rl, "exit",
		                 json_pack("{s:i, s:s}", "exit_code",
		                           pi.exit_code, "status",
		                           process_status_name(pi.status)));
	api_follow_end(fw);
}

static const struct process_follow_ops follow_ops = {
    follow_output, follow_dropped, follow_ended};

void v1_process_stream(struct api *a, struct http_req *r, struct route_match *m)
{
	struct process *p = find(a, r, m);
	if (!p)
		return;
	const char *c = http_query(r, "cursor");
	if (!c)
		c = http_header(r, "Last-Event-ID");
	char *end = NULL;
	unsigned long long cursor = c ? strtoull(c, &end, 10) : 0;
	if (c && (*end || !*c || *c == '-' || *c == '+' || *c == ' ')) {
		v1_error(r, 400, "invalid_request", "cursor must be a number");
		return;
	}
	struct api_follow *fw = calloc(1, sizeof(*fw));
	if (!fw) {
		v1_error(r, 500, "internal", "out of memory");
		return;
	}
	if (api_follow_open(fw, r, a->m->loop, NULL) == 0)
		api_follow_attach(fw, p, cursor, &follow_ops);
}

/* ---- stdin --------------------------------------------------------------- */

static void stdin_answer(struct http_req *r, int err)
{
	r->on_close = NULL;
	if (!err)
		http_respond_json(r, 200, json_pack("{s:b}", "written", 1));
	else if (err == -EBUSY)
		v1_error(r, 409, "busy", "a stdin write is in progress");
	else if (err == -EPIPE)
		v1_error(r, 409, "process_ended",
		         "the process no longer reads its stdin");
	else if (err == -ESRCH)
		v1_error(r, 409, "process_ended", "the process has ended");
	else
		v1_error(r, 500, "internal", "%s", strerror(-err));
}

static void stdin_written(void *ctx, int err)
{
	stdin_answer(ctx, err);
}

/* The client left before its bytes were all written: they still go in;
 * the request is closed by an answer nobody reads. */
static void stdin_client_gone(struct http_req *r)
{
	process_stdin_forget(r->ctx);
	stdin_answer(r, -ECONNABORTED);
}

void v1_process_stdin(struct api *a, struct http_req *r, struct route_match *m)
{
	struct process *p = find(a, r, m);
	if (!p)
		return;
	int rc = process_stdin(p, r->body.data ? r->body.data : "", r->body.len,
	                       stdin_written, r);
	if (rc == 1) {
		r->ctx = p;
		r->on_close = stdin_client_gone;
		http_suspend(r);
	} else
		stdin_answer(r, rc);
}
