/* Commands, background processes and git of the Cloudflare container
 * protocol, on sandboxd's exec and process engines.
 *
 * A command runs in its session's shell state (bash -c with the session
 * hook, one at a time per session). Its own cwd and env (request fields)
 * last for that command only, as in the container: the command is
 * wrapped so that, however it ends, the session's cwd and those
 * variables are put back before the hook saves the state; what the
 * command itself exports or cd's to stays, as in a persistent shell.
 * Background processes, sessionless commands and git's second step run
 * as their own shell (argv bash -c): they start from the session's state
 * and never write it back.
 *
 * Where the container misbehaves, this does the right thing: a timeout
 * kills the command's whole tree (and says so), killing a process kills
 * its tree, output streams as it is written. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/api_cf.h"
#include "daemon/jsonout.h"
#include "daemon/process.h"
#include "daemon/sse.h"
#include "lib/util.h"

/* A comment after this much silence on a stream. Shorter than /v1's: a
 * reader that went away is only noticed when a write to it fails (the
 * second after it left), and a streamed command dies with its reader. */
#define KEEPALIVE_MS 5000
#define WATCH_TICK_MS 25
#define WATCH_HIGH_WATER (512u << 10)
#define GIT_DEFAULT_TIMEOUT_MS 600000 /* the SDK's default */

/* ---- a command's parameters -------------------------------------------- */

struct cf_cmd {
	struct exec_params p;
	struct session *sess;
	const char *command;  /* as the client gave it */
	const char *argv[4];
	char **env;
	size_t envc;
	struct buf script;
	char cwd[4200];
	bool fresh;
};

static void cmd_free(struct cf_cmd *c)
{
	cf_env_free(c->env);
	buf_free(&c->script);
}

/* s as one single-quoted shell word. */
static void shell_quote(struct buf *b, const char *s)
{
	buf_append(b, "'", 1);
	for (const char *q; (q = strchr(s, '\'')); s = q + 1) {
		buf_append(b, s, (size_t)(q - s));
		buf_append(b, "'\\''", 4);
	}
	buf_printf(b, "%s'", s);
}

/* The command with its own cwd and env for it alone: set up, eval'd in
 * the session's shell, and undone by an EXIT trap (which runs however the
 * command ends, exit included) before the session hook saves the state.
 * Only helper variables that are not exported are made: they are never
 * saved. */
static void wrap(struct buf *b, const char *command, const char *cwd,
		 char **env, size_t envc)
{
	buf_printf(b, "__sbx_cf_ret() { return \"$1\"; }\n"
		      "__sbx_cf_end() {\n"
		      "  local __sbx_cf_rc=$?\n"
		      "  set +eu\n"); /* the command's set -e must not cut this short */
	if (cwd)
		buf_printf(b, "  builtin cd -- \"$__sbx_cf_prev\" 2>/dev/null\n");
	for (size_t i = 0; i < envc; i++) {
		int kl = (int)strcspn(env[i], "=");
		buf_printf(b,
			   "  if [[ -n $__sbx_cf_h%zu ]]; then export %.*s=\"$__sbx_cf_p%zu\";"
			   " else unset %.*s; fi\n",
			   i, kl, env[i], i, kl, env[i]);
	}
	buf_printf(b, "  if declare -F __sbx_save >/dev/null && { : >&63; } 2>/dev/null; then\n"
		      "    __sbx_cf_ret \"$__sbx_cf_rc\"; __sbx_save\n"
		      "  fi\n"
		      "  return \"$__sbx_cf_rc\"\n"
		      "}\n"
		      "trap __sbx_cf_end EXIT\n");
	for (size_t i = 0; i < envc; i++) {
		int kl = (int)strcspn(env[i], "=");
		buf_printf(b, "__sbx_cf_h%zu=${%.*s+x}; __sbx_cf_p%zu=${%.*s-}; export %.*s=",
			   i, kl, env[i], i, kl, env[i], kl, env[i]);
		shell_quote(b, env[i] + kl + 1);
		buf_printf(b, "\n");
	}
	if (cwd) {
		buf_printf(b, "__sbx_cf_prev=$PWD\nbuiltin cd -- ");
		shell_quote(b, cwd);
		buf_printf(b, " 2>/dev/null || { builtin printf 'Failed to change "
			      "directory to %%s\\n' ");
		shell_quote(b, cwd);
		buf_printf(b, " >&2; exit 1; }\n");
	}
	buf_printf(b, "eval ");
	shell_quote(b, command);
	buf_printf(b, "\n");
}

/* Read the fields every command request has. background: a process (its
 * own shell beside the session). -1 after answering. */
static int cmd_prepare(struct cf_req *q, struct cf_cmd *c, bool background)
{
	bool bad;
	uint64_t timeout;
	memset(c, 0, sizeof(*c));
	buf_init(&c->script, 0);
	c->command = cf_string(q, "command", &bad);
	if (bad)
		return -1;
	if (!c->command || !*c->command) {
		cf_error(q->r, c->command ? "INVALID_COMMAND" : "VALIDATION_FAILED",
			 json_pack("{s:s}", "field", "command"),
			 "command must be a non-empty string");
		return -1;
	}
	const char *cwd = cf_string(q, "cwd", &bad);
	if (bad || !(c->sess = cf_session(q, &c->fresh)) ||
	    cf_uint(q, "timeoutMs", &timeout) < 0 ||
	    cf_env(q, json_object_get(q->body, "env"), &c->env, &c->envc) < 0)
		return -1;
	if (cwd && cf_resolve(q, c->sess->cwd, cwd, c->cwd, sizeof(c->cwd)) < 0)
		return -1;
	c->p.timeout_ms = timeout ? timeout : cf_session_timeout(q, c->sess);
	if (background || c->fresh) {
		c->argv[0] = "/bin/bash";
		c->argv[1] = "-c";
		c->argv[2] = c->command;
		c->p.argv = c->argv;
		c->p.env = (const char *const *)c->env;
		c->p.envc = c->envc;
		c->p.cwd = cwd ? c->cwd : NULL;
		c->p.detached = c->fresh;
	} else if (cwd || c->envc) {
		wrap(&c->script, c->command, cwd ? c->cwd : NULL, c->env, c->envc);
		c->p.command = buf_cstr(&c->script);
	} else {
		c->p.command = c->command;
	}
	return 0;
}

/* ---- execute ----------------------------------------------------------- */

enum cf_exec_kind { RUN, COMMANDS, GIT };

struct cf_exec {
	struct api *a;
	struct http_req *r;
	struct http_stream *s;
	struct exec_job *job;
	struct loop *loop;
	struct loop_timer keepalive;
	enum cf_exec_kind kind;
	char *command, *sid;
	uint64_t timeout_ms;
	struct cf_utf8 u[3];
	bool stream, job_done, stream_gone;
	/* git */
	char *repo, *target, *branch;
	bool remote;
};

static void exec_release(struct cf_exec *e)
{
	if (!e->job_done || (e->stream && !e->stream_gone))
		return;
	loop_timer_stop(e->loop, &e->keepalive);
	free(e->command);
	free(e->sid);
	free(e->repo);
	free(e->target);
	free(e->branch);
	free(e);
}

static struct cf_exec *exec_new(struct cf_req *q, enum cf_exec_kind kind,
				const char *command)
{
	struct cf_exec *e = calloc(1, sizeof(*e));
	if (!e || !(e->command = strdup(command))) {
		free(e);
		cf_error(q->r, "INTERNAL_ERROR", NULL, "out of memory");
		return NULL;
	}
	e->a = q->a;
	e->r = q->r;
	e->loop = q->a->m->loop;
	e->kind = kind;
	e->keepalive.data = e;
	return e;
}

static void keepalive(struct loop_timer *t)
{
	struct cf_exec *e = t->data;
	if (e->s)
		sse_comment(e->s, "keepalive");
	loop_timer_start(e->loop, t, KEEPALIVE_MS);
}

static json_t *event(const char *type)
{
	char ts[32];
	return json_pack("{s:s, s:s}", "type", type, "timestamp",
			 cf_now(ts, sizeof(ts)));
}

static void exec_started(void *ctx, int pid)
{
	struct cf_exec *e = ctx;
	if (!e->s)
		return;
	json_t *ev = event("start");
	json_object_set_new(ev, "command", json_string(e->command));
	json_object_set_new(ev, "pid", json_integer(pid));
	if (e->sid)
		json_object_set_new(ev, "sessionId", json_string(e->sid));
	cf_sse(e->s, ev);
}

/* Streamed output: text events, the stream's back-pressure passed on. */
static int exec_output(void *ctx, int fd, const char *data, size_t len)
{
	struct cf_exec *e = ctx;
	if (!e->s)
		return 0; /* the client is gone: the command is being killed */
	json_t *text = cf_text(&e->u[fd], data, len, false);
	if (!text)
		return 0;
	json_t *ev = event(fd == 1 ? "stdout" : "stderr");
	json_object_set_new(ev, "data", text);
	e->a->metrics.bytes_streamed += len;
	loop_timer_start(e->loop, &e->keepalive, KEEPALIVE_MS);
	return cf_sse(e->s, ev);
}

static void stream_drained(void *ctx)
{
	struct cf_exec *e = ctx;
	if (e->job && !e->job_done)
		exec_resume_output(e->job);
}

static void stream_closed(void *ctx)
{
	struct cf_exec *e = ctx;
	e->s = NULL;
	e->stream_gone = true;
	/* as /v1: a streamed command lives for its reader */
	if (e->job && !e->job_done)
		exec_cancel(e->job);
	exec_release(e);
}

static void stream_end(struct cf_exec *e, const struct exec_result *res)
{
	for (int fd = 1; fd <= 2; fd++) {
		json_t *text = cf_text(&e->u[fd], "", 0, true);
		if (text) {
			json_t *ev = event(fd == 1 ? "stdout" : "stderr");
			json_object_set_new(ev, "data", text);
			cf_sse(e->s, ev);
		}
	}
	json_t *ev;
	if (res->failure == EXEC_TIMEOUT) {
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "Command timed out after %llu ms (its process tree was "
			 "killed)", (unsigned long long)e->timeout_ms);
		ev = event("error");
		json_object_set_new(ev, "error", json_string(msg));
		json_object_set_new(ev, "data", json_string(msg));
		json_object_set_new(ev, "exitCode", json_integer(124));
	} else if (res->failure != EXEC_OK) {
		ev = event("error");
		json_object_set_new(ev, "error", json_string(res->msg));
		json_object_set_new(ev, "data", json_string(res->msg));
	} else {
		ev = event("complete");
		json_object_set_new(ev, "exitCode", json_integer(res->exit_code));
	}
	cf_sse(e->s, ev);
	http_stream_end(e->s);
}

static void run_done(struct cf_exec *e, const struct exec_result *res)
{
	char ts[32];
	if (res->failure == EXEC_TIMEOUT) {
		struct buf out, err;
		exec_result_take(res, &out, &err);
		struct jsonout *o = jsonout_new();
		json_t *jo = jsonout_string(o, &out), *je = jsonout_string(o, &err);
		json_t *ctx = json_pack("{s:s, s:i, s:o, s:o, s:I}", "command",
					e->command, "exitCode", 124, "stdout", jo,
					"stderr", je, "timeoutMs",
					(json_int_t)e->timeout_ms);
		buf_free(&out);
		buf_free(&err);
		cf_error_big(e->r, o, "COMMAND_EXECUTION_ERROR", ctx,
			     "Command timed out after %llu ms (its process tree "
			     "was killed)", (unsigned long long)e->timeout_ms);
		return;
	}
	if (res->failure != EXEC_OK) {
		cf_error(e->r, "COMMAND_EXECUTION_ERROR",
			 json_pack("{s:s, s:s}", "command", e->command, "stderr",
				   res->msg),
			 "Failed to execute command: %s", res->msg);
		return;
	}
	iso8601_ms(res->start_wall_ms, ts, sizeof(ts));
	struct buf out, err;
	exec_result_take(res, &out, &err);
	struct jsonout *o = jsonout_new();
	json_t *jo = jsonout_string(o, &out), *je = jsonout_string(o, &err);
	json_t *j = json_pack("{s:b, s:i, s:o, s:o, s:s, s:I, s:s}", "success",
			      res->exit_code == 0, "exitCode", res->exit_code,
			      "stdout", jo, "stderr", je, "command", e->command,
			      "duration", (json_int_t)res->duration_ms,
			      "timestamp", ts);
	if (j && e->sid)
		json_object_set_new(j, "sessionId", json_string(e->sid));
	buf_free(&out);
	buf_free(&err);
	cf_ok_big(e->r, o, j);
}

static void commands_done(struct cf_exec *e, const struct exec_result *res)
{
	if (res->failure != EXEC_OK) {
		cf_error(e->r, "COMMAND_EXECUTION_ERROR", NULL,
			 "could not list the commands: %s", res->msg);
		return;
	}
	json_t *names = json_array();
	const char *p = buf_cstr((struct buf *)&res->out);
	while (*p) {
		size_t l = strcspn(p, "\n");
		if (l)
			json_array_append_new(names, json_bytes(p, l));
		p += l + (p[l] == '\n');
	}
	cf_ok(e->r, json_pack("{s:o, s:I}", "availableCommands", names, "count",
			      (json_int_t)json_array_size(names)));
}

static bool has(const char *hay, const char *needle)
{
	return strstr(hay, needle) != NULL;
}

/* The SDK's git error classes, from git's own words. */
static const char *git_code(const struct cf_exec *e, const char *err,
			    int exit_code)
{
	char *l = strdup(err);
	const char *code = "GIT_CLONE_FAILED";
	for (char *c = l; c && *c; c++)
		*c = (char)tolower((unsigned char)*c);
	if (!l)
		return code;
	if (exit_code == 127 && has(l, "git"))
		code = "GIT_OPERATION_FAILED";
	else if (e->remote &&
		 (has(l, "could not resolve") || has(l, "unable to access") ||
		  has(l, "failed to connect") || has(l, "connection refused") ||
		  has(l, "network is unreachable") || has(l, "name resolution") ||
		  has(l, "couldn't connect") || has(l, "ssh:") ||
		  has(l, "cannot run ssh") || has(l, "could not read from remote")))
		code = "GIT_NETWORK_ERROR";
	else if (has(l, "remote branch") && has(l, "not found"))
		code = "GIT_BRANCH_NOT_FOUND";
	else if (has(l, "already exists"))
		code = "GIT_CLONE_FAILED";
	else if (has(l, "authentication") || has(l, "permission denied") ||
		 has(l, "could not read username") || has(l, "access denied"))
		code = "GIT_AUTH_FAILED";
	else if (has(l, "not found") || has(l, "does not exist") ||
		 has(l, "not a git repository") ||
		 has(l, "does not appear to be a git repository"))
		code = "GIT_REPOSITORY_NOT_FOUND";
	free(l);
	return code;
}

static void git_done(struct cf_exec *e, const struct exec_result *res)
{
	if (res->failure == EXEC_TIMEOUT) {
		cf_error(e->r, "GIT_CLONE_FAILED",
			 json_pack("{s:s, s:s, s:I}", "repository", e->repo,
				   "targetDir", e->target, "timeoutMs",
				   (json_int_t)e->timeout_ms),
			 "git clone of '%s' timed out after %llu ms (killed)",
			 e->repo, (unsigned long long)e->timeout_ms);
		return;
	}
	if (res->failure != EXEC_OK || res->exit_code) {
		const char *err = res->failure != EXEC_OK
					  ? res->msg
					  : buf_cstr((struct buf *)&res->err);
		cf_error(e->r, git_code(e, err, res->exit_code),
			 json_pack("{s:s, s:s, s:i, s:o}", "repository", e->repo,
				   "targetDir", e->target, "exitCode",
				   res->exit_code, "stderr",
				   json_bytes(err, strlen(err))),
			 "Failed to clone repository '%s': %s", e->repo,
			 *err ? err : "git failed");
		return;
	}
	const char *out = buf_cstr((struct buf *)&res->out);
	size_t l = strcspn(out, "\n");
	json_t *branch = l ? json_bytes(out, l)
			   : json_string(e->branch ? e->branch : "unknown");
	cf_ok(e->r, json_pack("{s:s, s:o, s:s}", "repoUrl", e->repo, "branch",
			      branch, "targetDir", e->target));
}

static void exec_done(const struct exec_result *res, void *ctx)
{
	struct cf_exec *e = ctx;
	e->job_done = true;
	e->job = NULL;
	metrics_exec_done(e->a, res->duration_ms,
			  res->failure != EXEC_OK && res->failure != EXEC_TIMEOUT);
	if (e->stream) {
		if (e->s)
			stream_end(e, res);
	} else if (e->kind == COMMANDS) {
		commands_done(e, res);
	} else if (e->kind == GIT) {
		git_done(e, res);
	} else {
		run_done(e, res);
	}
	exec_release(e);
}

static void submit(struct cf_req *q, struct cf_exec *e, struct cf_cmd *c)
{
	struct sbx_err err = {0};
	e->timeout_ms = c->p.timeout_ms ? c->p.timeout_ms
					: q->a->m->cfg->exec_timeout_ms;
	q->a->metrics.execs++;
	if (!e->stream)
		http_suspend(q->r);
	if (exec_submit(q->sb, c->sess, &c->p, exec_done, e, &e->job, &err) < 0) {
		struct exec_result res = {.failure = EXEC_NOT_STARTED};
		snprintf(res.msg, sizeof(res.msg), "%s", err.msg);
		exec_done(&res, e);
	}
}

static void execute(struct cf_req *q, bool stream)
{
	struct cf_cmd c;
	if (cmd_prepare(q, &c, false) < 0)
		goto out;
	struct cf_exec *e = exec_new(q, RUN, c.command);
	if (!e)
		goto out;
	/* a session the client named is echoed (the default is not) */
	if (!c.fresh && c.sess != q->sb->sessions)
		e->sid = strdup(c.sess->id);
	if ((e->stream = stream)) {
		c.p.on_output = exec_output;
		c.p.on_started = exec_started;
		e->s = http_respond_stream(q->r, 200, "text/event-stream",
					   HTTP_SIZE_UNKNOWN, sse_headers);
		if (!e->s) {
			e->job_done = e->stream_gone = true;
			exec_release(e);
			goto out;
		}
		http_stream_set_cbs(e->s, stream_drained, stream_closed, e);
		e->keepalive.cb = keepalive;
		loop_timer_start(e->loop, &e->keepalive, KEEPALIVE_MS);
	}
	submit(q, e, &c);
out:
	cmd_free(&c);
}

void cf_execute(struct cf_req *q)
{
	execute(q, false);
}

void cf_execute_stream(struct cf_req *q)
{
	execute(q, true);
}

void cf_commands(struct cf_req *q)
{
	/* programs on PATH (and aliases/functions), not shell builtins or
	 * keywords */
	static const char list[] =
		"export LC_ALL=C; comm -23 <(compgen -c | sort -u) "
		"<({ compgen -b; compgen -k; } | sort -u)";
	const char *argv[] = {"/bin/bash", "-c", list, NULL};
	struct cf_cmd c = {.p = {.argv = argv, .detached = true,
				 .timeout_ms = 30000}};
	bool fresh;
	buf_init(&c.script, 0);
	json_object_set_new(q->body, "sessionId", json_string(CF_NO_SESSION));
	if (!(c.sess = cf_session(q, &fresh)))
		return;
	struct cf_exec *e = exec_new(q, COMMANDS, list);
	if (e)
		submit(q, e, &c);
	cmd_free(&c);
}

/* ---- git --------------------------------------------------------------- */

/* Whether git would fetch repo over a network: a URL with a scheme other
 * than file://, or scp-like host:path (a ':' before any '/'). */
static bool git_remote(const char *repo)
{
	const char *colon = strchr(repo, ':');
	if (!strncmp(repo, "file://", 7))
		return false;
	if (strstr(repo, "://"))
		return true;
	return colon && colon > repo && !memchr(repo, '/', (size_t)(colon - repo));
}

/* The SDK's default target: /workspace/<last part of the URL, no .git>. */
static void repo_name(const char *repo, char *out, size_t cap)
{
	size_t l = strlen(repo);
	while (l && (repo[l - 1] == '/' || repo[l - 1] == ':'))
		l--;
	size_t s = l;
	while (s && repo[s - 1] != '/' && repo[s - 1] != ':')
		s--;
	size_t n = l - s;
	if (n > 4 && !strncmp(repo + l - 4, ".git", 4))
		n -= 4;
	if (!n || (n == 1 && repo[s] == '.') ||
	    (n == 2 && !strncmp(repo + s, "..", 2)))
		snprintf(out, cap, "repository");
	else
		snprintf(out, cap, "%.*s", (int)n, repo + s);
}

void cf_git_checkout(struct cf_req *q)
{
	bool bad, fresh;
	uint64_t depth, timeout;
	char target[4200], name[256], deftarget[300];
	const char *repo = cf_string(q, "repoUrl", &bad);
	const char *branch = bad ? NULL : cf_string(q, "branch", &bad);
	const char *dir = bad ? NULL : cf_string(q, "targetDir", &bad);
	struct buf cmd;
	if (bad || cf_uint(q, "depth", &depth) < 0 ||
	    cf_uint(q, "timeoutMs", &timeout) < 0)
		return;
	if (!repo || !*repo || repo[0] == '-' || strpbrk(repo, "\n\r\t")) {
		cf_error(q->r, repo && *repo ? "INVALID_GIT_URL" : "VALIDATION_FAILED",
			 json_pack("{s:s}", "field", "repoUrl"),
			 "repoUrl must be a repository URL or path");
		return;
	}
	if (branch && (!*branch || branch[0] == '-')) {
		cf_error(q->r, "VALIDATION_FAILED", json_pack("{s:s}", "field", "branch"),
			 "Invalid branch name '%s'", branch);
		return;
	}
	struct session *sess = cf_session(q, &fresh);
	if (!sess)
		return;
	if (!dir) {
		repo_name(repo, name, sizeof(name));
		snprintf(deftarget, sizeof(deftarget), "/workspace/%s", name);
		dir = deftarget;
	}
	if (cf_resolve(q, sess->cwd, dir, target, sizeof(target)) < 0)
		return;
	struct cf_exec *e = exec_new(q, GIT, "git clone");
	if (!e)
		return;
	e->repo = strdup(repo);
	e->target = strdup(target);
	e->branch = branch ? strdup(branch) : NULL;
	e->remote = git_remote(repo);
	if (!e->repo || !e->target || (branch && !e->branch)) {
		e->job_done = true;
		exec_release(e);
		cf_error(q->r, "INTERNAL_ERROR", NULL, "out of memory");
		return;
	}
	/* inside the sandbox, in the session (so a relative repository
	 * path is the session's); never a prompt for credentials */
	buf_init(&cmd, 0);
	buf_printf(&cmd, "GIT_TERMINAL_PROMPT=0 git clone%s",
		   e->remote ? " --filter=blob:none" : "");
	if (branch) {
		buf_printf(&cmd, " --branch ");
		shell_quote(&cmd, branch);
	}
	if (depth)
		buf_printf(&cmd, " --depth %llu", (unsigned long long)depth);
	buf_printf(&cmd, " -- ");
	shell_quote(&cmd, repo);
	buf_printf(&cmd, " ");
	shell_quote(&cmd, target);
	buf_printf(&cmd, " && { git -C ");
	shell_quote(&cmd, target);
	buf_printf(&cmd, " branch --show-current || true; }");
	const char *argv[] = {"/bin/bash", "-c", buf_cstr(&cmd), NULL};
	struct cf_cmd c = {.sess = sess};
	buf_init(&c.script, 0);
	c.p.timeout_ms = timeout ? timeout : GIT_DEFAULT_TIMEOUT_MS;
	if (fresh) {
		c.p.argv = argv;
		c.p.detached = true;
	} else {
		c.p.command = buf_cstr(&cmd);
	}
	submit(q, e, &c);
	cmd_free(&c);
	buf_free(&cmd);
}

/* ---- processes --------------------------------------------------------- */

static json_t *process_json(const struct process *p)
{
	char st[32], en[32];
	iso8601_ms(p->start_ms, st, sizeof(st));
	json_t *j = json_pack("{s:s, s:s, s:s, s:s}", "id", p->id, "command",
			      p->command, "status", process_status_name(p->status),
			      "startTime", st);
	if (p->pid)
		json_object_set_new(j, "pid", json_integer(p->pid));
	if (p->ended) {
		iso8601_ms(p->end_ms, en, sizeof(en));
		json_object_set_new(j, "endTime", json_string(en));
		json_object_set_new(j, "exitCode", json_integer(p->exit_code));
	}
	return j;
}

static struct process *find(struct cf_req *q, const char *id)
{
	struct process *p = process_find(q->sb, id);
	if (!p)
		cf_error(q->r, "PROCESS_NOT_FOUND", json_pack("{s:s}", "processId", id),
			 "Process not found: %s", id);
	return p;
}

static void started(struct process *p, void *ctx)
{
	struct http_req *r = ctx;
	if (p->ended && p->error[0])
		cf_error(r, "PROCESS_ERROR",
			 json_pack("{s:s, s:s}", "processId", p->id, "stderr",
				   p->error),
			 "Failed to start process: %s", p->error);
	else
		cf_ok(r, json_pack("{s:s, s:i, s:s}", "processId", p->id, "pid",
				   p->pid, "command", p->command));
}

static bool valid_process_id(const char *id)
{
	size_t l = strlen(id);
	if (!l || l > 128)
		return false;
	for (size_t i = 0; i < l; i++)
		if (!isalnum((unsigned char)id[i]) && !strchr("-_.", id[i]))
			return false;
	return true;
}

void cf_process_start(struct cf_req *q)
{
	struct cf_cmd c;
	struct sbx_err err = {0};
	struct process *p;
	bool bad;
	if (cmd_prepare(q, &c, true) < 0)
		goto out;
	const char *id = cf_string(q, "processId", &bad);
	if (bad)
		goto out;
	if (id && !valid_process_id(id)) {
		cf_error(q->r, "VALIDATION_FAILED",
			 json_pack("{s:s}", "field", "processId"),
			 "processId: 1-128 of [A-Za-z0-9._-]");
		goto out;
	}
	http_suspend(q->r);
	if (process_start(q->sb, c.sess, id, &c.p, c.command, started, q->r, &p,
			  &err) < 0)
		cf_error(q->r, "PROCESS_ERROR",
			 json_pack("{s:s}", "processId", id ? id : ""), "%s",
			 err.msg);
out:
	cmd_free(&c);
}

void cf_process_list(struct cf_req *q)
{
	json_t *arr = json_array();
	/* oldest first, as the container lists them */
	for (struct process *p = q->sb->procs; p; p = p->next)
		if (p->id[0])
			json_array_insert_new(arr, 0, process_json(p));
	cf_ok(q->r, json_pack("{s:o}", "processes", arr));
}

void cf_process_get(struct cf_req *q, const char *id)
{
	struct process *p = find(q, id);
	if (p)
		cf_ok(q->r, json_pack("{s:o}", "process", process_json(p)));
}

static bool process_dead(struct cf_wait *w, struct http_req *r,
			 struct sandbox *sb, bool last)
{
	const char *id = cf_wait_arg(w);
	struct process *p = sb ? process_find(sb, id) : NULL;
	if (p && !p->ended) {
		if (!last)
			return false;
		cf_error(r, "PROCESS_ERROR", json_pack("{s:s}", "processId", id),
			 "process %s did not end after SIGKILL", id);
		return true;
	}
	cf_ok(r, json_pack("{s:s, s:s}", "processId", id, "signal", "SIGTERM"));
	return true;
}

void cf_process_kill(struct cf_req *q, const char *id)
{
	struct process *p = find(q, id);
	if (!p)
		return;
	if (p->ended) {
		cf_ok(q->r, json_pack("{s:s}", "processId", p->id));
		return;
	}
	/* the whole tree: TERM, then KILL after the grace; answered once
	 * it is gone, so that what the client reads next says killed */
	process_kill(p, CF_KILL_GRACE_MS);
	cf_wait_start(q, process_dead, p->id, CF_KILL_GRACE_MS);
}

static bool all_dead(struct cf_wait *w, struct http_req *r,
		     struct sandbox *sb, bool last)
{
	for (struct process *p = sb ? sb->procs : NULL; p && !last; p = p->next)
		if (p->kill_requested && !p->ended)
			return false;
	long n = *cf_wait_count(w);
	cf_ok(r, json_pack("{s:i, s:i, s:s}", "cleanedCount", (int)n,
			   "killedCount", (int)n, "message", "processes killed"));
	return true;
}

void cf_process_kill_all(struct cf_req *q)
{
	long n = 0;
	for (struct process *p = q->sb->procs; p; p = p->next)
		if (!p->ended && process_kill(p, CF_KILL_GRACE_MS) == 0)
			n++;
	struct cf_wait *w = cf_wait_start(q, all_dead, NULL, CF_KILL_GRACE_MS);
	if (w)
		*cf_wait_count(w) = n;
}

void cf_process_logs(struct cf_req *q, const char *id)
{
	struct process *p = find(q, id);
	struct buf out, err;
	if (!p)
		return;
	buf_init(&out, 0);
	buf_init(&err, 0);
	process_logs(p, &out, &err);
	struct jsonout *o = jsonout_new();
	json_t *jo = jsonout_string(o, &out), *je = jsonout_string(o, &err);
	cf_ok_big(q->r, o, json_pack("{s:s, s:o, s:o}", "processId", p->id,
				     "stdout", jo, "stderr", je));
	buf_free(&out);
	buf_free(&err);
}

/* A process's log as the protocol's events, replayed then live. The
 * process engine's own watchers speak /v1 SSE; this follows the log from
 * the loop instead, finding its process again by id each time (the
 * record may go, or be replaced by a new one of that id). */
struct cf_pwatch {
	struct api *a;
	struct loop *loop; /* outlives the manager at shutdown */
	struct http_stream *s;
	struct loop_timer tick;
	const char *tenant;
	char sbid[64], id[129];
	const struct process *p; /* compared, never followed once gone */
	uint64_t start_ms, cursor, quiet_since;
	struct cf_utf8 u[3];
	bool ended;
};

static void pwatch_event(struct cf_pwatch *w, json_t *ev)
{
	json_object_set_new(ev, "processId", json_string(w->id));
	w->quiet_since = now_mono_ms();
	cf_sse(w->s, ev);
}

static void pwatch_pump(struct cf_pwatch *w)
{
	struct sandbox *sb = manager_find(w->a->m, w->tenant, w->sbid);
	struct process *p = sb ? process_find(sb, w->id) : NULL;
	if (w->ended || !w->s)
		return;
	if (!p || p != w->p || p->start_ms != w->start_ms) {
		json_t *ev = event("error");
		json_object_set_new(ev, "data", json_string("the process is gone"));
		json_object_set_new(ev, "error", json_string("the process is gone"));
		pwatch_event(w, ev);
		w->ended = true;
		http_stream_end(w->s);
		return;
	}
	if (w->cursor < p->log_start)
		w->cursor = p->log_start; /* older output was dropped */
	for (const struct log_chunk *c = p->head; c; c = c->next) {
		if (c->start + c->len <= w->cursor)
			continue;
		if (http_stream_pending(w->s) >= WATCH_HIGH_WATER)
			return; /* on_drain brings us back */
		size_t skip = (size_t)(w->cursor - c->start);
		json_t *text = cf_text(&w->u[c->fd], c->data + skip, c->len - skip,
				       false);
		w->cursor = c->start + c->len;
		if (text) {
			json_t *ev = event(c->fd == 1 ? "stdout" : "stderr");
			json_object_set_new(ev, "data", text);
			pwatch_event(w, ev);
		}
	}
	if (!p->ended) {
		if (now_mono_ms() - w->quiet_since >= KEEPALIVE_MS) {
			sse_comment(w->s, "keepalive");
			w->quiet_since = now_mono_ms();
		}
		return;
	}
	for (int fd = 1; fd <= 2; fd++) {
		json_t *text = cf_text(&w->u[fd], "", 0, true);
		if (text) {
			json_t *ev = event(fd == 1 ? "stdout" : "stderr");
			json_object_set_new(ev, "data", text);
			pwatch_event(w, ev);
		}
	}
	char msg[80];
	snprintf(msg, sizeof(msg), "Process completed with exit code %d",
		 p->exit_code);
	json_t *ev = event("exit");
	json_object_set_new(ev, "exitCode", json_integer(p->exit_code));
	json_object_set_new(ev, "data", json_string(msg));
	pwatch_event(w, ev);
	w->ended = true;
	http_stream_end(w->s);
}

static void pwatch_tick(struct loop_timer *t)
{
	struct cf_pwatch *w = t->data;
	pwatch_pump(w);
	if (!w->ended)
		loop_timer_start(w->loop, t, WATCH_TICK_MS);
}

/* From the server, which may run this after the manager is gone (at
 * shutdown): only the loop's timer, which then never fires, is touched. */
static void pwatch_drained(void *ctx)
{
	struct cf_pwatch *w = ctx;
	if (!w->ended)
		loop_timer_start(w->loop, &w->tick, 0);
}

static void pwatch_closed(void *ctx)
{
	struct cf_pwatch *w = ctx;
	loop_timer_stop(w->loop, &w->tick);
	free(w);
}

void cf_process_stream(struct cf_req *q, const char *id)
{
	struct process *p = find(q, id);
	if (!p)
		return;
	struct cf_pwatch *w = calloc(1, sizeof(*w));
	if (!w) {
		cf_error(q->r, "INTERNAL_ERROR", NULL, "out of memory");
		return;
	}
	w->a = q->a;
	w->loop = q->a->m->loop;
	w->tenant = q->tenant;
	snprintf(w->sbid, sizeof(w->sbid), "%s", q->sbid);
	snprintf(w->id, sizeof(w->id), "%s", p->id);
	w->p = p;
	w->start_ms = p->start_ms;
	w->quiet_since = now_mono_ms();
	w->tick.cb = pwatch_tick;
	w->tick.data = w;
	w->s = http_respond_stream(q->r, 200, "text/event-stream",
				   HTTP_SIZE_UNKNOWN, sse_headers);
	if (!w->s) {
		free(w);
		return;
	}
	http_stream_set_cbs(w->s, pwatch_drained, pwatch_closed, w);
	json_t *ev = event("process_info");
	json_object_set_new(ev, "command", json_string(p->command));
	json_object_set_new(ev, "status",
			    json_string(process_status_name(p->status)));
	if (p->pid)
		json_object_set_new(ev, "pid", json_integer(p->pid));
	pwatch_event(w, ev);
	pwatch_pump(w);
	if (!w->ended)
		loop_timer_start(w->loop, &w->tick, WATCH_TICK_MS);
}
