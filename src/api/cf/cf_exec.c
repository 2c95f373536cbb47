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

#include "api/cf/cf.h"
#include "core/env.h"
#include "api/source.h"
#include "core/process.h"
#include "http/sse.h"
#include "http/jsonout.h"
#include "lib/util.h"

#define GIT_DEFAULT_TIMEOUT_MS 600000 /* the SDK's default */

/* ---- a command's parameters -------------------------------------------- */

struct cf_cmd {
	struct exec_params p;
	struct session *sess;
	const char *command; /* as the client gave it */
	const char *argv[4];
	char **env;
	size_t envc;
	struct buf script;
	char cwd[4200];
	bool fresh;
};

static void cmd_free(struct cf_cmd *c)
{
	env_free(c->env);
	buf_free(&c->script);
}

/* The shell a command runs with: the image's own (bash may not be there:
 * busybox), else /bin/sh; an image with none at all fails the start with
 * exec's own error. */
static const char *shell_of(struct cf_req *q)
{
	const char *sh = sandbox_shell(q->sb);
	return sh ? sh : "/bin/sh";
}

/* Read the fields every command request has. background: a process (its
 * own shell beside the session). -1 after answering. */
static int cmd_prepare(struct cf_req *q, struct cf_cmd *c, bool background)
{
	uint64_t timeout;
	memset(c, 0, sizeof(*c));
	buf_init(&c->script, 0);
	if (cf_string(q, "command", &c->command) < 0)
		return -1;
	if (!c->command || !*c->command) {
		cf_error(q->r,
		         c->command ? "INVALID_COMMAND" : "VALIDATION_FAILED",
		         json_pack("{s:s}", "field", "command"),
		         "command must be a non-empty string");
		return -1;
	}
	const char *cwd;
	if (cf_string(q, "cwd", &cwd) < 0 ||
	    !(c->sess = cf_session(q, &c->fresh)) ||
	    cf_uint(q, "timeoutMs", &timeout) < 0 ||
	    cf_env(q, json_object_get(q->body, "env"), &c->env, &c->envc) < 0)
		return -1;
	if (cwd && cf_resolve(q, session_cwd(c->sess), cwd, c->cwd,
	                      sizeof(c->cwd)) < 0)
		return -1;
	c->p.timeout_ms = timeout; /* 0: the session's (core/exec.c) */
	if (background || c->fresh) {
		c->argv[0] = shell_of(q);
		c->argv[1] = "-c";
		c->argv[2] = c->command;
		c->p.argv = c->argv;
		c->p.env = (const char *const *)c->env;
		c->p.envc = c->envc;
		c->p.cwd = cwd ? c->cwd : NULL;
		c->p.detached = c->fresh;
	} else if (cwd || c->envc) {
		cf_shell_wrap(&c->script, c->command, cwd ? c->cwd : NULL,
		              c->env, c->envc);
		c->p.command = buf_cstr(&c->script);
	} else {
		c->p.command = c->command;
	}
	return 0;
}

/* ---- execute ----------------------------------------------------------- */

enum cf_exec_kind { RUN, COMMANDS, GIT };

struct cf_exec {
	struct api_exec x; /* first; x.rl NULL: one answer */
	struct api *a;
	struct http_req *r;
	enum cf_exec_kind kind;
	char *command, *sid;
	uint64_t timeout_ms;
	struct cf_utf8 u[3];
	/* git */
	char *repo, *target, *branch;
	bool remote;
};

static void exec_free(struct cf_exec *e)
{
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
	e->kind = kind;
	return e;
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
	json_t *ev = event("start");
	json_object_set_new(ev, "command", json_string(e->command));
	json_object_set_new(ev, "pid", json_integer(pid));
	if (e->sid)
		json_object_set_new(ev, "sessionId", json_string(e->sid));
	cf_event(e->x.rl, ev);
}

/* Streamed output: text events, the stream's back-pressure passed on. */
static int exec_output(void *ctx, int fd, const char *data, size_t len)
{
	struct cf_exec *e = ctx;
	if (!relay_live(e->x.rl))
		return 0; /* the client is gone: the command is being killed */
	json_t *text = cf_text(&e->u[fd], data, len, false);
	if (!text)
		return 0;
	json_t *ev = event(fd == 1 ? "stdout" : "stderr");
	json_object_set_new(ev, "data", text);
	e->a->metrics.bytes_streamed += len;
	return cf_event(e->x.rl, ev);
}

static void stream_end(struct cf_exec *e, const struct exec_result *res)
{
	for (int fd = 1; fd <= 2; fd++) {
		json_t *text = cf_text(&e->u[fd], "", 0, true);
		if (text) {
			json_t *ev = event(fd == 1 ? "stdout" : "stderr");
			json_object_set_new(ev, "data", text);
			cf_event(e->x.rl, ev);
		}
	}
	json_t *ev;
	if (res->failure == EXEC_TIMEOUT) {
		char msg[160];
		snprintf(
		    msg, sizeof(msg),
		    "Command timed out after %llu ms (its process tree was "
		    "killed)",
		    (unsigned long long)e->timeout_ms);
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
		json_object_set_new(ev, "exitCode",
		                    json_integer(res->exit_code));
	}
	cf_event(e->x.rl, ev);
	relay_end(e->x.rl);
}

static void run_done(struct cf_exec *e, const struct exec_result *res)
{
	char ts[32];
	if (res->failure == EXEC_TIMEOUT) {
		struct buf out, err;
		exec_result_take(res, &out, &err);
		struct jsonout *o = jsonout_new();
		json_t *jo = jsonout_string(o, &out),
		       *je = jsonout_string(o, &err);
		json_t *ctx = json_pack("{s:s, s:i, s:o, s:o, s:I}", "command",
		                        e->command, "exitCode", 124, "stdout",
		                        jo, "stderr", je, "timeoutMs",
		                        (json_int_t)e->timeout_ms);
		buf_free(&out);
		buf_free(&err);
		cf_error_big(
		    e->r, o, "COMMAND_EXECUTION_ERROR", ctx,
		    "Command timed out after %llu ms (its process tree "
		    "was killed)",
		    (unsigned long long)e->timeout_ms);
		return;
	}
	if (res->failure != EXEC_OK) {
		cf_error(e->r, "COMMAND_EXECUTION_ERROR",
		         json_pack("{s:s, s:s}", "command", e->command,
		                   "stderr", res->msg),
		         "Failed to execute command: %s", res->msg);
		return;
	}
	iso8601_ms(res->start_wall_ms, ts, sizeof(ts));
	struct buf out, err;
	exec_result_take(res, &out, &err);
	struct jsonout *o = jsonout_new();
	json_t *jo = jsonout_string(o, &out), *je = jsonout_string(o, &err);
	json_t *j =
	    json_pack("{s:b, s:i, s:o, s:o, s:s, s:I, s:s}", "success",
	              res->exit_code == 0, "exitCode", res->exit_code, "stdout",
	              jo, "stderr", je, "command", e->command, "duration",
	              (json_int_t)res->duration_ms, "timestamp", ts);
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
	          has(l, "network is unreachable") ||
	          has(l, "name resolution") || has(l, "couldn't connect") ||
	          has(l, "ssh:") || has(l, "cannot run ssh") ||
	          has(l, "could not read from remote")))
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
		         json_pack("{s:s, s:s, s:i, s:o}", "repository",
		                   e->repo, "targetDir", e->target, "exitCode",
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
	e->x.job = NULL;
	metrics_exec_done(e->a, res->duration_ms,
	                  res->failure != EXEC_OK &&
	                      res->failure != EXEC_TIMEOUT);
	if (e->x.rl) {
		stream_end(e, res);
	} else if (e->kind == COMMANDS) {
		commands_done(e, res);
	} else if (e->kind == GIT) {
		git_done(e, res);
	} else {
		run_done(e, res);
	}
	exec_free(e);
}

static void submit(struct cf_req *q, struct cf_exec *e, struct cf_cmd *c)
{
	struct sbx_err err = {0};
	e->timeout_ms = exec_timeout_for(q->sb, c->sess, c->p.timeout_ms);
	q->a->metrics.execs++;
	if (!e->x.rl)
		http_suspend(q->r);
	if (exec_submit(q->sb, c->sess, &c->p, exec_done, e, &e->x.job, &err) <
	    0) {
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
	if (!c.fresh && c.sess != sandbox_session(q->sb, NULL)) {
		struct session_info si;
		session_info(c.sess, &si);
		e->sid = strdup(si.id);
	}
	if (stream) {
		c.p.on_output = exec_output;
		c.p.on_started = exec_started;
		e->x.rl = relay_open(q->r, q->a->m->loop, &cf_stream_opts,
		                     &api_exec_relay, e);
		if (!e->x.rl) {
			exec_free(e);
			goto out;
		}
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
	static const char bash_list[] =
	    "export LC_ALL=C; comm -23 <(compgen -c | sort -u) "
	    "<({ compgen -b; compgen -k; } | sort -u)";
	/* without bash: the programs on PATH */
	static const char sh_list[] =
	    "export LC_ALL=C; IFS=:; for d in $PATH; do "
	    "[ -d \"$d\" ] && ls -1 \"$d\"; done 2>/dev/null | sort -u";
	const char *sh = shell_of(q);
	const char *list = strcmp(sh, "/bin/bash") ? sh_list : bash_list;
	const char *argv[] = {sh, "-c", list, NULL};
	struct cf_cmd c = {
	    .p = {.argv = argv, .detached = true, .timeout_ms = 30000}};
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
	return colon && colon > repo &&
	       !memchr(repo, '/', (size_t)(colon - repo));
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
	bool fresh;
	uint64_t depth, timeout;
	char target[4200], name[256], deftarget[300];
	const char *repo, *branch = NULL, *dir = NULL;
	struct buf cmd;
	if (cf_string(q, "repoUrl", &repo) < 0 ||
	    cf_string(q, "branch", &branch) < 0 ||
	    cf_string(q, "targetDir", &dir) < 0 ||
	    cf_uint(q, "depth", &depth) < 0 ||
	    cf_uint(q, "timeoutMs", &timeout) < 0)
		return;
	if (!repo || !*repo || repo[0] == '-' || strpbrk(repo, "\n\r\t")) {
		cf_error(q->r,
		         repo && *repo ? "INVALID_GIT_URL"
		                       : "VALIDATION_FAILED",
		         json_pack("{s:s}", "field", "repoUrl"),
		         "repoUrl must be a repository URL or path");
		return;
	}
	if (branch && (!*branch || branch[0] == '-')) {
		cf_error(q->r, "VALIDATION_FAILED",
		         json_pack("{s:s}", "field", "branch"),
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
	if (cf_resolve(q, session_cwd(sess), dir, target, sizeof(target)) < 0)
		return;
	struct cf_exec *e = exec_new(q, GIT, "git clone");
	if (!e)
		return;
	e->repo = strdup(repo);
	e->target = strdup(target);
	e->branch = branch ? strdup(branch) : NULL;
	e->remote = git_remote(repo);
	if (!e->repo || !e->target || (branch && !e->branch)) {
		exec_free(e);
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
		cf_shell_quote(&cmd, branch);
	}
	if (depth)
		buf_printf(&cmd, " --depth %llu", (unsigned long long)depth);
	buf_printf(&cmd, " -- ");
	cf_shell_quote(&cmd, repo);
	buf_printf(&cmd, " ");
	cf_shell_quote(&cmd, target);
	buf_printf(&cmd, " && { git -C ");
	cf_shell_quote(&cmd, target);
	buf_printf(&cmd, " branch --show-current || true; }");
	const char *argv[] = {shell_of(q), "-c", buf_cstr(&cmd), NULL};
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

static struct process *find(struct cf_req *q, const char *id)
{
	struct process *p = process_find(q->sb, id);
	if (!p)
		cf_error(q->r, "PROCESS_NOT_FOUND",
		         json_pack("{s:s}", "processId", id),
		         "Process not found: %s", id);
	return p;
}

static void started(struct process *p, void *ctx)
{
	struct http_req *r = ctx;
	struct process_info pi;
	process_info(p, &pi);
	if (pi.ended && pi.error[0])
		cf_error(r, "PROCESS_ERROR",
		         json_pack("{s:s, s:s}", "processId", pi.id, "stderr",
		                   pi.error),
		         "Failed to start process: %s", pi.error);
	else
		cf_ok(r, json_pack("{s:s, s:i, s:s}", "processId", pi.id, "pid",
		                   pi.pid, "command", pi.command));
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
	if (cmd_prepare(q, &c, true) < 0)
		goto out;
	const char *id;
	if (cf_string(q, "processId", &id) < 0)
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
	for (struct process *p = process_next(q->sb, NULL); p;
	     p = process_next(q->sb, p)) {
		struct process_info pi;
		process_info(p, &pi);
		if (pi.id[0])
			json_array_insert_new(arr, 0, api_process_json(p, 0));
	}
	cf_ok(q->r, json_pack("{s:o}", "processes", arr));
}

void cf_process_get(struct cf_req *q, const char *id)
{
	struct process *p = find(q, id);
	if (p)
		cf_ok(q->r,
		      json_pack("{s:o}", "process", api_process_json(p, 0)));
}

/* process/kill and process/kill-all are answered once the processes have
 * ended (their whole trees: TERM, then KILL after the grace), each
 * followed to its end; or with an error if one outlives its KILL by a
 * second. The request stays until it is answered. */
struct cf_kill;
struct cf_kill_one {
	struct cf_kill *k;
	struct process_follower *f; /* NULL once it ended */
};
struct cf_kill {
	struct http_req *r;
	struct loop *loop;
	struct loop_timer deadline;
	char id[129]; /* process/kill: its id; kill-all: "" */
	size_t n, pending;
	struct cf_kill_one ones[];
};

static void kill_answer(struct cf_kill *k, bool in_time)
{
	loop_timer_stop(k->loop, &k->deadline);
	for (size_t i = 0; i < k->n; i++)
		if (k->ones[i].f)
			process_unfollow(k->ones[i].f);
	if (!in_time)
		cf_error(k->r, "PROCESS_ERROR",
		         json_pack("{s:s}", "processId", k->id),
		         "process %s did not end after SIGKILL",
		         *k->id ? k->id : "(one of them)");
	else if (*k->id)
		cf_ok(k->r, json_pack("{s:s, s:s}", "processId", k->id,
		                      "signal", "SIGTERM"));
	else
		cf_ok(k->r, json_pack("{s:i, s:i, s:s}", "cleanedCount",
		                      (int)k->n, "killedCount", (int)k->n,
		                      "message", "processes killed"));
	free(k);
}

static int kill_output(void *ctx, int fd, uint64_t end, const char *data,
                       size_t len)
{
	(void)ctx, (void)fd, (void)end, (void)data, (void)len;
	return 0;
}

static void kill_ended(void *ctx, const struct process *p, bool gone)
{
	struct cf_kill_one *one = ctx;
	struct cf_kill *k = one->k;
	(void)p, (void)gone;
	one->f = NULL;
	if (--k->pending == 0)
		kill_answer(k, true);
}

static const struct process_follow_ops kill_follow = {.output = kill_output,
                                                      .ended = kill_ended};

static void kill_late(struct loop_timer *t)
{
	kill_answer(t->data, false);
}

/* Kill procs[0..n) and answer when they have ended. */
static void kill_and_answer(struct cf_req *q, struct process **procs, size_t n,
                            const char *id)
{
	struct cf_kill *k = calloc(1, sizeof(*k) + n * sizeof(k->ones[0]));
	if (!k) {
		cf_error(q->r, "INTERNAL_ERROR", NULL, "out of memory");
		return;
	}
	k->r = q->r;
	k->loop = q->a->m->loop;
	k->deadline = (struct loop_timer){.cb = kill_late, .data = k};
	snprintf(k->id, sizeof(k->id), "%s", id);
	k->n = n;
	k->pending = n + 1; /* + 1 until every follower is set up */
	http_suspend(q->r);
	loop_timer_start(k->loop, &k->deadline, CF_KILL_GRACE_MS + 1000);
	for (size_t i = 0; i < n; i++) {
		struct process_info pi;
		process_kill(procs[i], CF_KILL_GRACE_MS);
		process_info(procs[i], &pi);
		k->ones[i].k = k;
		if (process_follow(procs[i], pi.log_end, &kill_follow,
		                   &k->ones[i], &k->ones[i].f) < 0)
			k->pending--;
	}
	if (--k->pending == 0)
		kill_answer(k, true);
}

void cf_process_kill(struct cf_req *q, const char *id)
{
	struct process *p = find(q, id);
	if (!p)
		return;
	struct process_info pi;
	process_info(p, &pi);
	if (pi.ended) {
		cf_ok(q->r, json_pack("{s:s}", "processId", pi.id));
		return;
	}
	/* answered once it is gone, so that what the client reads next
	 * says killed */
	kill_and_answer(q, &p, 1, pi.id);
}

void cf_process_kill_all(struct cf_req *q)
{
	size_t n = 0;
	for (struct process *p = process_next(q->sb, NULL); p;
	     p = process_next(q->sb, p))
		n += !process_ended(p);
	struct process **procs = calloc(n + 1, sizeof(*procs));
	if (!procs) {
		cf_error(q->r, "INTERNAL_ERROR", NULL, "out of memory");
		return;
	}
	n = 0;
	for (struct process *p = process_next(q->sb, NULL); p;
	     p = process_next(q->sb, p))
		if (!process_ended(p))
			procs[n++] = p;
	kill_and_answer(q, procs, n, "");
	free(procs);
}

void cf_process_logs(struct cf_req *q, const char *id)
{
	struct process *p = find(q, id);
	struct buf out, err;
	struct process_info pi;
	if (!p)
		return;
	process_logs(p, &pi, &out, &err);
	struct jsonout *o = jsonout_new();
	json_t *jo = jsonout_string(o, &out), *je = jsonout_string(o, &err);
	cf_ok_big(q->r, o,
	          json_pack("{s:s, s:o, s:o}", "processId", pi.id, "stdout", jo,
	                    "stderr", je));
	buf_free(&out);
	buf_free(&err);
}

/* A process's log as the protocol's events, replayed then live: a
 * follower of the process (core/process.c) feeding a relay. */
struct cf_pwatch {
	struct api_follow fw; /* first: api_follow_end frees the whole */
	char id[129];
	struct cf_utf8 u[3];
};

static int pwatch_event(struct cf_pwatch *w, json_t *ev)
{
	json_object_set_new(ev, "processId", json_string(w->id));
	return cf_event(w->fw.rl, ev);
}

static int pwatch_text(struct cf_pwatch *w, int fd, const char *data,
                       size_t len, bool final)
{
	json_t *text = cf_text(&w->u[fd], data, len, final);
	if (!text)
		return 0;
	json_t *ev = event(fd == 1 ? "stdout" : "stderr");
	json_object_set_new(ev, "data", text);
	return pwatch_event(w, ev);
}

static int pwatch_output(void *ctx, int fd, uint64_t end, const char *data,
                         size_t len)
{
	(void)end;
	return pwatch_text(ctx, fd, data, len, false);
}

static void pwatch_ended(void *ctx, const struct process *p, bool gone)
{
	struct cf_pwatch *w = ctx;
	json_t *ev;
	if (gone) {
		ev = event("error");
		json_object_set_new(ev, "data",
		                    json_string("the process is gone"));
		json_object_set_new(ev, "error",
		                    json_string("the process is gone"));
	} else {
		char msg[80];
		struct process_info pi;
		process_info(p, &pi);
		pwatch_text(w, 1, "", 0, true);
		pwatch_text(w, 2, "", 0, true);
		snprintf(msg, sizeof(msg),
		         "Process completed with exit code %d", pi.exit_code);
		ev = event("exit");
		json_object_set_new(ev, "exitCode", json_integer(pi.exit_code));
		json_object_set_new(ev, "data", json_string(msg));
	}
	pwatch_event(w, ev);
	api_follow_end(&w->fw);
}

/* older output was dropped: the stream goes on from what is kept */
static const struct process_follow_ops pwatch_follow = {.output = pwatch_output,
                                                        .ended = pwatch_ended};

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
	struct process_info pi;
	process_info(p, &pi);
	snprintf(w->id, sizeof(w->id), "%s", pi.id);
	if (api_follow_open(&w->fw, q->r, q->a->m->loop, &cf_stream_opts) < 0)
		return;
	json_t *ev = event("process_info");
	json_object_set_new(ev, "command", json_string(pi.command));
	json_object_set_new(ev, "status",
	                    json_string(process_status_name(pi.status)));
	if (pi.pid)
		json_object_set_new(ev, "pid", json_integer(pi.pid));
	pwatch_event(w, ev);
	api_follow_attach(&w->fw, p, 0, &pwatch_follow);
}
