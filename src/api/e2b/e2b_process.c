/* envd's process.Process over the core's background processes
 * (core/process.h): Start runs one (its output followed from its first
 * byte), Connect follows a running one from now on, and neither ties the
 * process to the HTTP stream: a client that leaves only stops following.
 * List, SendInput, CloseStdin and SendSignal act on the same records, so a
 * process started here is also one of /v1's.
 *
 * A Start with a "pty" field runs its program on a terminal of its own
 * (core/terminal.h, the engine of /v1's pty) and follows its output as
 * "pty" data events; SendInput with input.pty, Update (resize),
 * SendSignal, Connect and List find it by its pid. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/e2b/e2b.h"
#include "api/source.h"
#include "core/env.h"
#include "core/process.h"
#include "core/terminal.h"
#include "lib/base64.h"

#define KEEPALIVE_MSG "{\"event\":{\"keepalive\":{}}}"
static const char keepalive_env[] = "\0\0\0\0\x1a" KEEPALIVE_MSG;

struct e2b_stream {
	struct api_follow fw; /* first: api_follow frees the context */
	struct http_req *r;   /* until the stream is open */
	struct api *a;
	unsigned keepalive_ms;
	bool from_start; /* Start: every byte; Connect: from now on */
};

static int on_output(void *ctx, int fd, uint64_t end, const char *data,
                     size_t len)
{
	struct e2b_stream *s = ctx;
	(void)end;
	char *b64 = malloc(base64_encoded_len(len) + 1);
	if (!b64)
		return 0;
	base64_encode(data, len, b64);
	int r = connect_send(s->fw.rl, 0,
	                     json_pack("{s:{s:{s:s}}}", "event", "data",
	                               fd == 2 ? "stderr" : "stdout", b64));
	free(b64);
	return r;
}

static void on_dropped(void *ctx)
{
	(void)ctx; /* envd keeps no log to lose: nothing to say */
}

/* Go's os.ProcessState as envd reports it. */
static json_t *end_json_of(int signo, int exit_code)
{
	char status[64];
	json_t *e = json_object();
	if (signo) {
		const char *name = signo == SIGKILL   ? "killed"
		                   : signo == SIGTERM ? "terminated"
		                   : signo == SIGINT  ? "interrupt"
		                                      : strsignal(signo);
		snprintf(status, sizeof(status), "signal: %s", name);
		json_object_set_new(e, "exitCode", json_integer(-1));
		json_object_set_new(e, "exited", json_false());
		json_object_set_new(e, "error", json_string(status));
	} else {
		snprintf(status, sizeof(status), "exit status %d", exit_code);
		if (exit_code)
			json_object_set_new(e, "exitCode",
			                    json_integer(exit_code));
		json_object_set_new(e, "exited", json_true());
		if (exit_code)
			json_object_set_new(e, "error", json_string(status));
	}
	json_object_set_new(e, "status", json_string(status));
	return json_pack("{s:{s:o}}", "event", "end", e);
}

static json_t *end_json(const struct process *p)
{
	struct process_info pi;
	process_info(p, &pi);
	return end_json_of(pi.signo, pi.exit_code);
}

static void on_ended(void *ctx, const struct process *p, bool gone)
{
	struct e2b_stream *s = ctx;
	struct buf b;
	struct process_info pi;
	process_info(p, &pi);
	buf_init(&b, 0);
	if (gone || pi.error[0]) {
		connect_end(&b, "unavailable",
		            pi.error[0] ? pi.error : "the sandbox stopped");
	} else if (pi.timed_out) {
		connect_end(&b, "deadline_exceeded",
		            "the command's timeout was reached: it was killed");
	} else {
		connect_envelope(&b, 0, end_json(p));
		connect_end(&b, NULL, NULL);
	}
	relay_write(s->fw.rl, b.data, b.len);
	buf_free(&b);
	api_follow_end(&s->fw);
}

static const struct process_follow_ops follow_ops = {on_output, on_dropped,
                                                     on_ended};

static struct e2b_stream *stream_new(struct e2b_req *q, bool from_start)
{
	struct e2b_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->a = q->a;
	s->r = q->r;
	s->from_start = from_start;
	s->keepalive_ms = connect_keepalive_ms(q->r);
	return s;
}

static void stream_free(struct e2b_stream *s)
{
	free(s);
}

/* Open the answer and follow p: start{pid} first, then its output. */
static void stream_open(struct e2b_stream *s, struct process *p)
{
	struct http_req *r = s->r;
	s->r = NULL;
	r->on_close = NULL;
	struct relay_opts o = connect_stream_opts(
	    s->keepalive_ms, keepalive_env, sizeof(keepalive_env) - 1);
	if (api_follow_open(&s->fw, r, s->a->m->loop, &o) < 0)
		return; /* s is freed */
	struct process_info pi;
	process_info(p, &pi);
	connect_send(
	    s->fw.rl, 0,
	    json_pack("{s:{s:{s:i}}}", "event", "start", "pid", pi.pid));
	api_follow_attach(&s->fw, p, s->from_start ? 0 : pi.log_end,
	                  &follow_ops);
}

static void start_gone(struct http_req *r)
{
	struct e2b_stream *s = r->ctx;
	s->r = NULL; /* the process runs on; started frees s */
}

static void started(struct process *p, void *ctx)
{
	struct e2b_stream *s = ctx;
	struct process_info pi;
	process_info(p, &pi);
	if (!s->r) {
		stream_free(s);
		return;
	}
	if (pi.ended && pi.error[0]) {
		struct http_req *r = s->r;
		r->on_close = NULL;
		stream_free(s);
		/* envd: a cwd that does not exist, a program that cannot run */
		connect_stream_error(r, "invalid_argument", "%s",
		                     pi.error[0] ? pi.error
		                                 : "it did not start");
		return;
	}
	stream_open(s, p);
}

/* ---- PTY processes: a terminal of their own, one stream per client ---- */

struct e2b_pty {
	struct http_req *r; /* Start: until the program runs */
	struct api *a;
	unsigned keepalive_ms;
	struct terminal *t;
	struct terminal_client *c;
	struct relay *rl;
	bool skip; /* Connect: the replay is not news */
};

static int pty_output(void *ctx, const char *data, size_t len)
{
	struct e2b_pty *s = ctx;
	if (s->skip || !s->rl)
		return 0;
	char *b64 = malloc(base64_encoded_len(len) + 1);
	if (!b64)
		return 0;
	base64_encode(data, len, b64);
	int r = connect_send(
	    s->rl, 0, json_pack("{s:{s:{s:s}}}", "event", "data", "pty", b64));
	free(b64);
	return r;
}

/* The terminal's exited code is an exit status or 128 + signal; the only
 * signals sent here are SIGKILL and SIGTERM (SendSignal), so 137 and 143
 * are reported as those, as envd's os.ProcessState does. */
static void pty_exited(void *ctx, int code, const char *why)
{
	struct e2b_pty *s = ctx;
	struct buf b;
	buf_init(&b, 0);
	if (code < 0) {
		connect_end(&b, "unavailable", why ? why : "it was ended");
	} else {
		int signo = code == 128 + SIGKILL   ? SIGKILL
		            : code == 128 + SIGTERM ? SIGTERM
		                                    : 0;
		connect_envelope(&b, 0, end_json_of(signo, signo ? 0 : code));
		connect_end(&b, NULL, NULL);
	}
	relay_write(s->rl, b.data, b.len);
	buf_free(&b);
	relay_end(s->rl);
	free(s);
}

static void pty_dropped(void *ctx)
{
	struct e2b_pty *s = ctx;
	relay_abort(s->rl); /* behind too long: cut short, not ended */
	free(s);
}

static const struct terminal_client_ops pty_term_ops = {pty_output, pty_exited,
                                                        pty_dropped};

static void pty_resume(void *ctx)
{
	struct e2b_pty *s = ctx;
	if (s->c)
		terminal_client_resume(s->c);
}

static void pty_cancel(void *ctx)
{
	struct e2b_pty *s = ctx; /* the client left: the program runs on */
	if (s->c)
		terminal_detach(s->c);
	relay_end(s->rl);
	free(s);
}

static const struct relay_ops pty_relay_ops = {pty_resume, pty_cancel};

/* Answer r with the stream: start{pid}, then the terminal's output (from
 * its first byte on Start, from now on with Connect). */
static void pty_open(struct e2b_pty *s, struct http_req *r, int pid,
                     bool from_start)
{
	struct relay_opts o = connect_stream_opts(
	    s->keepalive_ms, keepalive_env, sizeof(keepalive_env) - 1);
	if (!(s->rl = relay_open(r, s->a->m->loop, &o, &pty_relay_ops, s))) {
		free(s);
		return;
	}
	connect_send(s->rl, 0,
	             json_pack("{s:{s:{s:i}}}", "event", "start", "pid", pid));
	s->skip = !from_start;
	s->c = terminal_attach(s->t, &pty_term_ops, s);
	s->skip = false;
	if (!s->c) {
		struct buf b;
		buf_init(&b, 0);
		connect_end(&b, "internal", "out of memory");
		relay_write(s->rl, b.data, b.len);
		buf_free(&b);
		relay_end(s->rl);
		free(s);
	}
}

static void pty_start_gone(struct http_req *r)
{
	struct e2b_pty *s = r->ctx;
	s->r = NULL; /* the program runs on; pty_started frees s */
}

static void pty_started(void *ctx, int pid, const char *why)
{
	struct e2b_pty *s = ctx;
	struct http_req *r = s->r;
	if (!r) {
		free(s);
		return;
	}
	r->on_close = NULL;
	s->r = NULL;
	if (pid <= 0) {
		free(s);
		/* envd: a cwd that does not exist, a program that cannot run */
		connect_stream_error(r, "invalid_argument", "%s",
		                     why ? why : "it did not start");
		return;
	}
	pty_open(s, r, pid, true);
}

/* The PTY a request's "process" selector names: {pid} or {tag}. */
static struct terminal *selected_pty(struct e2b_req *q)
{
	json_t *sel = json_object_get(q->body, "process");
	json_t *pid = json_object_get(sel, "pid");
	const char *tag = json_string_value(json_object_get(sel, "tag"));
	if (json_is_integer(pid))
		return terminal_find(q->sb, (int)json_integer_value(pid));
	if (json_is_string(pid))
		return terminal_find(q->sb, atoi(json_string_value(pid)));
	if (!tag)
		return NULL;
	for (struct terminal *t = terminal_next(q->sb, NULL); t;
	     t = terminal_next(q->sb, t)) {
		const char *n = terminal_note(t);
		json_t *j = n ? json_loads(n, 0, NULL) : NULL;
		const char *tt = json_string_value(json_object_get(j, "tag"));
		bool hit = tt && !strcmp(tt, tag);
		json_decref(j);
		if (hit)
			return t;
	}
	return NULL;
}

static unsigned size_field(json_t *pty, const char *k)
{
	json_t *v = json_object_get(json_object_get(pty, "size"), k);
	long long n = json_is_integer(v) ? json_integer_value(v) : 0;
	return n > 0 && n <= 4096 ? (unsigned)n : 0;
}

/* Start with a "pty" field: the program runs on a terminal of its own. */
static void start_pty(struct e2b_req *q, const char *const *argv, char **all,
                      size_t allc, const char *cwd, json_t *note)
{
	struct http_req *r = q->r;
	json_t *pty = json_object_get(q->body, "pty");
	struct e2b_pty *s = calloc(1, sizeof(*s));
	if (!s) {
		connect_stream_error(r, "internal", "out of memory");
		return;
	}
	s->a = q->a;
	s->r = r;
	s->keepalive_ms = connect_keepalive_ms(r);
	struct terminal_opts o = {.cols = size_field(pty, "cols"),
	                          .rows = size_field(pty, "rows"),
	                          .own = true,
	                          .argv = argv,
	                          .env = (const char *const *)all,
	                          .envc = allc,
	                          .cwd = cwd,
	                          .as_user = !q->root,
	                          .started = pty_started,
	                          .ctx = s};
	struct sbx_err err = {0};
	r->ctx = s;
	r->on_close = pty_start_gone;
	http_suspend(r);
	int rc = terminal_open(q->sb, NULL, &o, &s->t, &err);
	if (rc < 0) {
		r->on_close = NULL;
		free(s);
		connect_stream_error(r,
		                     rc == -ENOSPC ? "resource_exhausted"
		                     : rc == -EIO  ? "invalid_argument"
		                                   : "internal",
		                     "%s", err.msg);
		return;
	}
	char *n = json_dumps(note, JSON_COMPACT);
	if (n)
		terminal_set_note(s->t, n);
	free(n);
}

static json_t *process_config(const struct process *p)
{
	struct process_info pi;
	process_info(p, &pi);
	json_t *n = pi.note ? json_loads(pi.note, 0, NULL) : NULL;
	if (json_is_object(n))
		return n;
	json_decref(n);
	return json_pack("{s:{s:s, s:[s, s], s:{}}}", "config", "cmd",
	                 "/bin/bash", "args", "-c",
	                 pi.command ? pi.command : "", "envs");
}

/* What List shows of a process it started: its config and tag. ("o"
 * takes a reference: the body's own values get one.) */
static json_t *config_note(struct e2b_req *q, json_t *proc, json_t *args,
                           const char *cmd, const char *cwd)
{
	json_t *envs = json_object_get(proc, "envs");
	json_t *note =
	    json_pack("{s:{s:s, s:o, s:o, s:s}}", "config", "cmd", cmd, "args",
	              args ? json_incref(args) : json_array(), "envs",
	              json_is_object(envs) ? json_incref(envs) : json_object(),
	              "cwd", cwd);
	const char *tag = json_string_value(json_object_get(q->body, "tag"));
	if (note && tag)
		json_object_set_new(note, "tag", json_string(tag));
	return note;
}

static void start(struct e2b_req *q)
{
	struct http_req *r = q->r;
	json_t *proc = json_object_get(q->body, "process");
	bool pty = json_object_get(q->body, "pty") &&
	           !json_is_null(json_object_get(q->body, "pty"));
	const char *cmd = json_string_value(json_object_get(proc, "cmd"));
	json_t *args = json_object_get(proc, "args");
	if (!json_is_object(proc) || !cmd || !*cmd ||
	    (args && !json_is_array(args))) {
		connect_stream_error(r, "invalid_argument",
		                     "process.cmd: a program is needed");
		return;
	}
	size_t na = json_array_size(args);
	const char **argv = calloc(na + 2, sizeof(*argv));
	char **env = NULL, **all = NULL, *cwd = NULL;
	size_t envc = 0, allc = 0;
	struct e2b_stream *s = NULL;
	if (!argv)
		goto oom;
	argv[0] = cmd;
	for (size_t i = 0; i < na; i++)
		if (!(argv[i + 1] =
		          json_string_value(json_array_get(args, i)))) {
			connect_stream_error(r, "invalid_argument",
			                     "process.args: strings");
			goto out;
		}
	const char *bad;
	int e = env_from_json(json_object_get(proc, "envs"), &env, &envc, &bad);
	if (e == -ENOMEM)
		goto oom;
	if (e < 0) {
		connect_stream_error(r, "invalid_argument", "process.envs: %s",
		                     bad ? bad : "not an object");
		goto out;
	}
	if (!(all = e2b_user_env(q, env, envc, &allc)))
		goto oom;
	const char *c = json_string_value(json_object_get(proc, "cwd"));
	if (e2b_path(q, c, &cwd) < 0) {
		connect_stream_error(r, "invalid_argument",
		                     "cwd '%s' is not a valid path", c);
		goto out;
	}
	if (pty) {
		json_t *note = config_note(q, proc, args, cmd, cwd);
		start_pty(q, argv, all, allc, cwd, note);
		json_decref(note);
		goto out;
	}
	json_t *st = json_object_get(q->body, "stdin");
	bool keep_stdin = !st || json_is_true(st);
	uint64_t timeout = connect_timeout_ms(r);
	struct exec_params p = {.argv = argv,
	                        .env = (const char *const *)all,
	                        .envc = allc,
	                        .cwd = cwd,
	                        .as_user = !q->root,
	                        .timeout_ms =
	                            timeout ? timeout : EXEC_NO_TIMEOUT};
	/* what /v1 lists as its command */
	struct buf disp;
	buf_init(&disp, 4096);
	for (size_t i = 0; argv[i]; i++)
		buf_printf(&disp, "%s%s", i ? " " : "", argv[i]);
	if (!(s = stream_new(q, true))) {
		buf_free(&disp);
		goto oom;
	}
	r->ctx = s;
	r->on_close = start_gone;
	http_suspend(r);
	struct process *pr;
	struct sbx_err err = {0};
	int rc = process_start(q->sb, NULL, NULL, &p, buf_cstr(&disp), started,
	                       s, &pr, &err);
	buf_free(&disp);
	if (rc < 0) {
		r->on_close = NULL;
		stream_free(s);
		connect_stream_error(r, "internal", "%s", err.msg);
		goto out;
	}
	json_t *note = config_note(q, proc, args, cmd, cwd);
	char *text = note ? json_dumps(note, JSON_COMPACT) : NULL;
	process_set_note(pr, text);
	free(text);
	json_decref(note);
	if (!keep_stdin)
		process_stdin_close(pr);
	goto out;
oom:
	connect_stream_error(r, "internal", "out of memory");
out:
	free(argv);
	env_free(env);
	env_free(all);
	free(cwd);
}

/* The process a request's "process" selector names: {pid} or {tag}. */
static struct process *selected(struct e2b_req *q)
{
	json_t *sel = json_object_get(q->body, "process");
	json_t *pid = json_object_get(sel, "pid");
	const char *tag = json_string_value(json_object_get(sel, "tag"));
	char buf[32];
	if (json_is_integer(pid)) {
		snprintf(buf, sizeof(buf), "%lld",
		         (long long)json_integer_value(pid));
	} else if (json_is_string(pid)) {
		snprintf(buf, sizeof(buf), "%s", json_string_value(pid));
	} else if (tag) {
		for (struct process *p = process_next(q->sb, NULL); p;
		     p = process_next(q->sb, p)) {
			struct process_info pi;
			process_info(p, &pi);
			json_t *n =
			    pi.note ? json_loads(pi.note, 0, NULL) : NULL;
			const char *t =
			    json_string_value(json_object_get(n, "tag"));
			bool hit = !pi.ended && t && !strcmp(t, tag);
			json_decref(n);
			if (hit)
				return p;
		}
		return NULL;
	} else {
		return NULL;
	}
	struct process *p = process_find(q->sb, buf);
	/* a pid names a live process; an ended record of an old pid does not
	 * shadow a newer one of the same number */
	for (struct process *o = process_next(q->sb, NULL);
	     o && p && process_ended(p); o = process_next(q->sb, o)) {
		struct process_info po, oi;
		process_info(p, &po);
		process_info(o, &oi);
		if (oi.pid == po.pid && !oi.ended)
			p = o;
	}
	return p;
}

static void connect_rpc(struct e2b_req *q)
{
	struct terminal *t = selected_pty(q);
	if (t) {
		struct e2b_pty *s = calloc(1, sizeof(*s));
		if (!s) {
			connect_stream_error(q->r, "internal", "out of memory");
			return;
		}
		s->a = q->a;
		s->t = t;
		s->keepalive_ms = connect_keepalive_ms(q->r);
		pty_open(s, q->r, terminal_pid(t), false);
		return;
	}
	struct process *p = selected(q);
	if (!p) {
		connect_stream_error(q->r, "not_found", "process not found");
		return;
	}
	struct e2b_stream *s = stream_new(q, false);
	if (!s) {
		connect_stream_error(q->r, "internal", "out of memory");
		return;
	}
	stream_open(s, p);
}

static void list(struct e2b_req *q)
{
	json_t *arr = json_array();
	for (struct process *p = process_next(q->sb, NULL); p;
	     p = process_next(q->sb, p)) {
		struct process_info pi;
		process_info(p, &pi);
		if (pi.ended || !pi.pid)
			continue;
		json_t *j = process_config(p);
		json_object_set_new(j, "pid", json_integer(pi.pid));
		json_array_append_new(arr, j);
	}
	for (struct terminal *t = terminal_next(q->sb, NULL); t;
	     t = terminal_next(q->sb, t)) {
		const char *n = terminal_note(t);
		json_t *j = n ? json_loads(n, 0, NULL) : NULL;
		if (!json_is_object(j)) {
			json_decref(j);
			j = json_pack("{s:{s:s, s:[], s:{}}}", "config", "cmd",
			              "/bin/bash", "args", "envs");
		}
		json_object_set_new(j, "pid", json_integer(terminal_pid(t)));
		json_array_append_new(arr, j);
	}
	connect_ok(q->r, json_pack("{s:o}", "processes", arr));
}

static void stdin_done(void *ctx, int err)
{
	struct http_req *r = ctx;
	r->on_close = NULL;
	if (err == -ESRCH)
		connect_error(r, "not_found", "the process has ended");
	else if (err)
		connect_error(r, "internal", "stdin: %s", strerror(-err));
	else
		connect_ok(r, NULL);
}

static void stdin_gone(struct http_req *r)
{
	process_stdin_forget(r->ctx);
}

/* input.<field>'s base64 as bytes (*len of them, to free); NULL after
 * answering. */
static char *input_bytes(struct e2b_req *q, const char *b64, const char *field,
                         size_t *len)
{
	size_t n = strlen(b64);
	char *data = malloc(n / 4 * 3 + 3);
	ssize_t got = data ? base64_decode(b64, n, data) : -1;
	if (got < 0) {
		free(data);
		connect_error(q->r, "invalid_argument",
		              "input.%s: base64 bytes", field);
		return NULL;
	}
	*len = (size_t)got;
	return data;
}

static void send_input_pty(struct e2b_req *q, struct terminal *t,
                           const char *b64)
{
	size_t len;
	char *data = input_bytes(q, b64, "pty", &len);
	if (!data)
		return;
	int rc = terminal_write(t, data, len);
	free(data);
	if (rc == -ENOBUFS)
		connect_error(q->r, "resource_exhausted",
		              "the terminal is not reading its input");
	else if (rc == -EPIPE)
		connect_error(q->r, "not_found", "the process has ended");
	else if (rc < 0)
		connect_error(q->r, "internal", "input: %s", strerror(-rc));
	else
		connect_ok(q->r, NULL);
}

static void send_input(struct e2b_req *q)
{
	json_t *in = json_object_get(q->body, "input");
	struct terminal *t = selected_pty(q);
	if (t) {
		const char *b64 = json_string_value(json_object_get(in, "pty"));
		if (!b64) /* stdin of a PTY process is its terminal too */
			b64 = json_string_value(json_object_get(in, "stdin"));
		send_input_pty(q, t, b64 ? b64 : "");
		return;
	}
	struct process *p = selected(q);
	if (!p || process_ended(p)) {
		connect_error(q->r, "not_found", "process not found");
		return;
	}
	if (json_object_get(in, "pty")) {
		connect_error(q->r, "invalid_argument",
		              "input.pty: this process has no terminal");
		return;
	}
	const char *b64 = json_string_value(json_object_get(in, "stdin"));
	if (!b64)
		b64 = "";
	size_t len;
	char *data = input_bytes(q, b64, "stdin", &len);
	if (!data)
		return;
	int rc = process_stdin(p, data, len, stdin_done, q->r);
	free(data);
	if (rc == 1) {
		q->r->ctx = p;
		q->r->on_close = stdin_gone;
		http_suspend(q->r);
	} else if (rc == -EBUSY) {
		connect_error(q->r, "unavailable",
		              "a stdin write is in progress");
	} else if (rc == -EPIPE) {
		connect_error(q->r, "internal",
		              "the process no longer reads its stdin");
	} else if (rc < 0) {
		stdin_done(q->r, rc);
	} else {
		connect_ok(q->r, NULL);
	}
}

static void close_stdin(struct e2b_req *q)
{
	if (selected_pty(q)) {
		connect_error(q->r, "invalid_argument",
		              "a PTY process has no stdin to close: send "
		              "Ctrl-D (0x04) as input");
		return;
	}
	struct process *p = selected(q);
	if (!p || process_stdin_close(p) < 0)
		connect_error(q->r, "not_found", "process not found");
	else
		connect_ok(q->r, NULL);
}

static void send_signal(struct e2b_req *q)
{
	struct process *p = selected(q);
	json_t *sig = json_object_get(q->body, "signal");
	int signo = 0;
	if (json_is_string(sig)) {
		const char *s = json_string_value(sig);
		signo = !strcmp(s, "SIGNAL_SIGKILL")   ? SIGKILL
		        : !strcmp(s, "SIGNAL_SIGTERM") ? SIGTERM
		                                       : 0;
	} else if (json_is_integer(sig)) {
		long long v = json_integer_value(sig);
		signo = v == 9 ? SIGKILL : v == 15 ? SIGTERM : 0;
	}
	if (!signo) {
		connect_error(q->r, "invalid_argument",
		              "signal: SIGNAL_SIGKILL or SIGNAL_SIGTERM");
		return;
	}
	struct terminal *t = selected_pty(q);
	if (t) {
		terminal_signal(t, signo);
		connect_ok(q->r, NULL);
		return;
	}
	if (!p || process_signal(p, signo) < 0) {
		connect_error(q->r, "not_found", "process not found");
		return;
	}
	connect_ok(q->r, NULL);
}

/* Update: a PTY's window size. */
static void update(struct e2b_req *q)
{
	struct terminal *t = selected_pty(q);
	json_t *pty = json_object_get(q->body, "pty");
	unsigned cols = size_field(pty, "cols"), rows = size_field(pty, "rows");
	if (!t) {
		connect_error(q->r, "not_found",
		              selected(q) ? "the process has no terminal"
		                          : "process not found");
		return;
	}
	if (!cols || !rows) {
		connect_error(q->r, "invalid_argument",
		              "pty.size: cols and rows from 1 to 4096");
		return;
	}
	int rc = terminal_set_size(t, cols, rows);
	if (rc < 0)
		connect_error(q->r, "internal", "resize: %s", strerror(-rc));
	else
		connect_ok(q->r, NULL);
}

void e2b_process(struct e2b_req *q, const char *method)
{
	bool stream = connect_streaming(q->r);
	if (!strcmp(method, "Start") && stream)
		start(q);
	else if (!strcmp(method, "Connect") && stream)
		connect_rpc(q);
	else if (!strcmp(method, "List"))
		list(q);
	else if (!strcmp(method, "SendInput"))
		send_input(q);
	else if (!strcmp(method, "CloseStdin"))
		close_stdin(q);
	else if (!strcmp(method, "SendSignal"))
		send_signal(q);
	else if (!strcmp(method, "Update"))
		update(q);
	else if (stream)
		connect_stream_error(q->r, "unimplemented",
		                     "process.Process/%s is not supported",
		                     method);
	else
		connect_error(q->r, "unimplemented",
		              "process.Process/%s is not supported", method);
}
