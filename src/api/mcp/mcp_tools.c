/* The MCP server's tools (shared/spec/agents.md): their schemas, and each
 * one turned into a call of the core. run_command is seed 004's tool, on
 * the agents' executor (core/agent.h); the file tools are the core's file
 * operations (core/fileop.h), so a path is resolved only inside the
 * sandbox; run_code is a cell of a code-interpreter context
 * (core/interp.h), whose images come back as MCP image content; the
 * process tools are the core's background processes (core/process.h).
 *
 * A bad argument, a missing file, a failed command start: each is a tool
 * result with isError and a message that says what to change, never a
 * protocol error (those are for unknown tools and malformed requests). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/mcp/mcp.h"
#include "core/agent.h"
#include "core/fileop.h"
#include "core/files.h"
#include "core/interp.h"
#include "core/process.h"
#include "lib/base64.h"
#include "lib/buf.h"
#include "lib/path.h"
#include "lib/util.h"

#define RUN_DEFAULT_TIMEOUT_S 60
#define RUN_MAX_TIMEOUT_S 3600
#define READ_MAX (1u << 20) /* read_file returns at most this */
#define LIST_MAX 2000       /* entries list_files shows */
#define CODE_OUTPUT_MAX (256u << 10)

/* ---- the schemas --------------------------------------------------------- */

static const char tools_json[] =
    "["
    "{\"name\":\"run_command\",\"title\":\"Run a shell command\","
    "\"description\":\"Run a shell command with bash in this session's Linux "
    "sandbox (a Debian userland with the usual tools, python3 and git when the "
    "host has them; no Internet unless the operator allowed it). Files, the "
    "working directory and exported variables persist from one call to the "
    "next; relative paths are under /workspace. The command and every process "
    "it started (background ones too) are killed after timeout_seconds. "
    "Returns exitCode and the last 10,000 characters of stdout and of stderr; "
    "stdoutTruncated or stderrTruncated is true when the start of that stream "
    "was cut (then narrow the output down: grep, head, tail, wc, or write it "
    "to a file and read parts of it). timedOut is true when the timeout ended "
    "it (exitCode 124).\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"command\":{\"type\":\"string\",\"minLength\":1,\"description\":\"The "
    "shell command, run as bash -c (pipes, &&, redirections and here-documents "
    "work).\"},"
    "\"timeout_seconds\":{\"type\":\"number\",\"minimum\":1,\"maximum\":3600,"
    "\"default\":60,\"description\":\"Seconds before the command and all its "
    "processes are killed (default 60).\"},"
    "\"cwd\":{\"type\":\"string\",\"description\":\"Directory to run in: "
    "absolute, or relative to /workspace. Default: where the previous command "
    "left off (/workspace at first).\"}"
    "},\"required\":[\"command\"],\"additionalProperties\":false},"
    "\"outputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"exitCode\":{\"type\":\"integer\"},\"stdout\":{\"type\":\"string\"},"
    "\"stderr\":{\"type\":\"string\"},"
    "\"stdoutTruncated\":{\"type\":\"boolean\"},\"stderrTruncated\":{\"type\":"
    "\"boolean\"},\"timedOut\":{\"type\":\"boolean\"}},"
    "\"required\":[\"exitCode\",\"stdout\",\"stderr\",\"stdoutTruncated\","
    "\"stderrTruncated\",\"timedOut\"]},"
    "\"annotations\":{\"title\":\"Run a shell "
    "command\",\"readOnlyHint\":false,\"destructiveHint\":true,"
    "\"idempotentHint\":false,\"openWorldHint\":false}},"

    "{\"name\":\"read_file\",\"title\":\"Read a file\","
    "\"description\":\"Read a file of the sandbox. Text comes back as text; an "
    "image (PNG, JPEG, GIF, WebP) as an image; other binary files as base64. "
    "At most 1 MiB: for larger files use run_command with head, tail, sed -n "
    "or grep.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Absolute "
    "path, or relative to /workspace.\"}"
    "},\"required\":[\"path\"],\"additionalProperties\":false},"
    "\"annotations\":{\"readOnlyHint\":true,\"openWorldHint\":false}},"

    "{\"name\":\"write_file\",\"title\":\"Write a file\","
    "\"description\":\"Create or replace a file of the sandbox with content "
    "(parent directories are made). The file is replaced whole, at once. Set "
    "base64 to true to write binary data given as base64.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Absolute "
    "path, or relative to /workspace.\"},"
    "\"content\":{\"type\":\"string\",\"description\":\"The file's whole new "
    "content.\"},"
    "\"base64\":{\"type\":\"boolean\",\"default\":false,\"description\":"
    "\"content is base64 of the bytes to write.\"}"
    "},\"required\":[\"path\",\"content\"],\"additionalProperties\":false},"
    "\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,"
    "\"idempotentHint\":true,\"openWorldHint\":false}},"

    "{\"name\":\"list_files\",\"title\":\"List files\","
    "\"description\":\"List a directory of the sandbox, one entry per line: "
    "type (file, directory, symlink, other), size in bytes, and the path "
    "relative to the directory (directories end with /). Hidden files are "
    "included. recursive lists the whole tree (at most 2000 entries).\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"default\":\"/"
    "workspace\",\"description\":\"Absolute path, or relative to /workspace "
    "(default /workspace).\"},"
    "\"recursive\":{\"type\":\"boolean\",\"default\":false,\"description\":"
    "\"Walk the whole tree.\"}"
    "},\"additionalProperties\":false},"
    "\"annotations\":{\"readOnlyHint\":true,\"openWorldHint\":false}},"

    "{\"name\":\"run_code\",\"title\":\"Run Python or JavaScript\","
    "\"description\":\"Run code in a persistent interpreter context of the "
    "sandbox (like a notebook: variables, imports and definitions stay for the "
    "next call with the same context). The value of the last expression is "
    "returned; matplotlib figures and other images come back as images. Errors "
    "come back with their traceback.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"language\":{\"type\":\"string\",\"enum\":[\"python\",\"javascript\"],"
    "\"description\":\"python or javascript (Node.js).\"},"
    "\"code\":{\"type\":\"string\",\"description\":\"The code to run.\"},"
    "\"context\":{\"type\":\"string\",\"description\":\"Name of the context to "
    "run in (made on first use; default: one per language). Contexts do not "
    "share state.\"},"
    "\"timeout_seconds\":{\"type\":\"number\",\"minimum\":1,\"maximum\":3600,"
    "\"default\":60,\"description\":\"Seconds before the code is interrupted "
    "(default 60).\"}"
    "},\"required\":[\"language\",\"code\"],\"additionalProperties\":false},"
    "\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,"
    "\"openWorldHint\":false}},"

    "{\"name\":\"start_process\",\"title\":\"Start a background process\","
    "\"description\":\"Start a long-running shell command (a server, a "
    "watcher, a long build) in the background; it keeps running after this "
    "call returns. Returns its id; read its output with process_logs and stop "
    "it with kill_process.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"command\":{\"type\":\"string\",\"minLength\":1,\"description\":\"The "
    "shell command, run as bash -c.\"}"
    "},\"required\":[\"command\"],\"additionalProperties\":false},"
    "\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,"
    "\"openWorldHint\":false}},"

    "{\"name\":\"process_logs\",\"title\":\"Read a process's output\","
    "\"description\":\"The status (running, completed, failed, killed), exit "
    "code once it ended, and the last 10,000 characters of stdout and of "
    "stderr of a process started with start_process.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"id\":{\"type\":\"string\",\"description\":\"The id start_process "
    "returned.\"}"
    "},\"required\":[\"id\"],\"additionalProperties\":false},"
    "\"annotations\":{\"readOnlyHint\":true,\"openWorldHint\":false}},"

    "{\"name\":\"kill_process\",\"title\":\"Stop a process\","
    "\"description\":\"Stop a process started with start_process, and every "
    "process it started: SIGTERM, then SIGKILL 2 seconds later.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"id\":{\"type\":\"string\",\"description\":\"The id start_process "
    "returned.\"}"
    "},\"required\":[\"id\"],\"additionalProperties\":false},"
    "\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,"
    "\"idempotentHint\":true,\"openWorldHint\":false}}"
    "]";

json_t *mcp_tools_list(void)
{
	static json_t *tools;
	if (!tools)
		tools = json_loads(tools_json, 0, NULL);
	return json_deep_copy(tools);
}

/* ---- helpers ------------------------------------------------------------- */

static json_t *text_result(json_t *text)
{
	return json_pack("{s:[{s:s, s:o}]}", "content", "type", "text", "text",
	                 text ? text : json_string(""));
}

/* A string argument into *out (NULL when absent): 0, or -EINVAL when
 * present but not a string (nothing answered: the tool says what it
 * takes). */
static int arg_str(json_t *args, const char *name, const char **out)
{
	json_t *v = json_object_get(args, name);
	*out = json_string_value(v);
	return v && !json_is_null(v) && !json_is_string(v) ? -EINVAL : 0;
}

/* -1 after answering when args has a name not in known. */
static int unknown_args(struct mcp_call *c, json_t *args,
                        const char *const *known)
{
	const char *k;
	json_t *v;
	json_object_foreach(args, k, v)
	{
		bool ok = false;
		for (size_t i = 0; known[i]; i++)
			ok = ok || !strcmp(k, known[i]);
		if (!ok) {
			mcp_call_done(
			    c, mcp_tool_error(
			           "unknown argument \"%.100s\" (see the "
			           "tool's inputSchema)",
			           k));
			return -1;
		}
	}
	return 0;
}

/* The one argument a tool takes, a non-empty string; NULL after answering
 * (with what, when it is missing or not such a string). */
static const char *sole_arg(struct mcp_call *c, json_t *args, const char *name,
                            const char *what)
{
	const char *const known[] = {name, NULL};
	const char *v;
	if (unknown_args(c, args, known) < 0)
		return NULL;
	if (arg_str(args, name, &v) < 0 || !v || !*v) {
		mcp_call_done(c, mcp_tool_error("%s", what));
		return NULL;
	}
	return v;
}

/* path (absolute, or relative to /workspace) as the builtins take it
 * beneath "/": *abs allocated; NULL after answering. */
static const char *sandbox_path(struct mcp_call *c, const char *path,
                                char **abs)
{
	int r = path_join_beneath("/", "/workspace", path, abs);
	if (r != PATH_OK) {
		mcp_call_done(
		    c, mcp_tool_error("path \"%.300s\": %s", path,
		                      r == -ENOMEM ? "out of memory"
		                      : r == PATH_OUTSIDE
		                          ? "it leaves the sandbox's root"
		                          : "not a valid path (empty parts "
		                            "or control characters)"));
		return NULL;
	}
	return (*abs)[1] ? *abs + 1 : ".";
}

static struct sandbox *sandbox_of(struct mcp_call *c)
{
	struct sbx_err err = {0};
	struct sandbox *sb;
	if (mcp_sandbox(c, &sb, &err) < 0)
		mcp_call_done(c, mcp_tool_error("%s", err.msg));
	return sb;
}

/* timeout_seconds: 1..3600 (default 60) into *ms; -1 after answering. */
static int timeout_arg(struct mcp_call *c, json_t *args, uint64_t *ms)
{
	json_t *t = json_object_get(args, "timeout_seconds");
	double v = RUN_DEFAULT_TIMEOUT_S;
	if (t && !json_is_null(t)) {
		if (!json_is_number(t) || json_number_value(t) < 1 ||
		    json_number_value(t) > RUN_MAX_TIMEOUT_S) {
			mcp_call_done(c, mcp_tool_error(
			                     "timeout_seconds must be a number "
			                     "from 1 to %d",
			                     RUN_MAX_TIMEOUT_S));
			return -1;
		}
		v = json_number_value(t);
	}
	*ms = (uint64_t)(v * 1000);
	return 0;
}

/* ---- run_command --------------------------------------------------------- */

static void command_done(const struct agent_cmd_result *res, void *ctx)
{
	struct mcp_call *c = ctx;
	c->cancel = NULL;
	if (res->failure != EXEC_OK && res->failure != EXEC_TIMEOUT) {
		mcp_call_done(c, mcp_tool_error("the command could not run: %s",
		                                res->msg));
		return;
	}
	json_t *st = json_pack(
	    "{s:i, s:s, s:s, s:b, s:b, s:b}", "exitCode",
	    res->timed_out ? 124 : res->exit_code, "stdout", res->out.tail,
	    "stderr", res->err.tail, "stdoutTruncated", res->out.cut,
	    "stderrTruncated", res->err.cut, "timedOut", res->timed_out);
	char *text = st ? json_dumps(st, JSON_COMPACT) : NULL;
	json_t *r = text ? text_result(json_string(text)) : NULL;
	free(text);
	if (r)
		json_object_set_new(r, "structuredContent", st);
	else
		json_decref(st);
	mcp_call_done(c, r ? r : mcp_tool_error("out of memory"));
}

static void command_cancel(struct mcp_call *c)
{
	agent_cmd_cancel(c->op);
}

static void tool_run_command(struct mcp_call *c, json_t *args)
{
	static const char *const known[] = {"command", "timeout_seconds", "cwd",
	                                    NULL};
	const char *cmd = NULL, *cwd = NULL;
	uint64_t ms;
	char *abs = NULL;
	if (unknown_args(c, args, known) < 0)
		return;
	if (arg_str(args, "command", &cmd) < 0 ||
	    arg_str(args, "cwd", &cwd) < 0 || !cmd || !*cmd) {
		mcp_call_done(
		    c, mcp_tool_error("command must be a non-empty "
		                      "string (cwd, if given, a string)"));
		return;
	}
	if (timeout_arg(c, args, &ms) < 0)
		return;
	if (cwd && !sandbox_path(c, cwd, &abs))
		return;
	struct sandbox *sb = sandbox_of(c);
	if (!sb) {
		free(abs);
		return;
	}
	struct sbx_err err = {0};
	struct agent_cmd_opts o = {.command = cmd,
	                           .cwd = abs,
	                           .timeout_ms = ms,
	                           .tail_chars = AGENT_TAIL_CHARS};
	struct agent_cmd *job = NULL;
	c->cancel = command_cancel;
	if (agent_cmd_run(sb, &o, command_done, c, &job, &err) < 0) {
		c->cancel = NULL;
		mcp_call_done(c, mcp_tool_error("the command could not run: %s",
		                                err.msg));
	} else if (job) {
		c->op = job; /* still running */
	}
	free(abs);
}

/* ---- the file tools (core/fileop.h) -------------------------------------- */

struct file_op {
	struct mcp_call *c;
	struct fileop *op; /* NULL once done */
	const char *who; /* in the message of an operation that did not start */
	char *abs;
	char *stdin_copy;
	void (*finish)(struct file_op *f, const struct fileop_result *res);
	bool starting;   /* in fileop_start */
	bool unstarted;  /* it did not start: answered, file_run frees f */
	bool file, dir;  /* the answer is a file's bytes, a listing */
	bool stopped;    /* cancelled here: it said all that is needed */
	uint64_t size;   /* read_file: the file's size */
	struct buf data; /* read_file: its bytes */
	struct buf text; /* list_files: the lines */
	unsigned n;      /* list_files: entries listed */
};

static void file_cancel(struct mcp_call *c)
{
	struct file_op *f = c->op;
	if (f && f->op)
		fileop_cancel(f->op);
}

static void file_free(struct file_op *f)
{
	free(f->abs);
	free(f->stdin_copy);
	buf_free(&f->data);
	buf_free(&f->text);
	free(f);
}

static void file_done(void *ctx, const struct fileop_result *res)
{
	struct file_op *f = ctx;
	f->op = NULL;
	f->c->cancel = NULL;
	if (f->starting) {
		f->unstarted = true;
		mcp_call_done(f->c,
		              mcp_tool_error("%s: %s", f->who, res->what));
		return;
	}
	f->finish(f, res);
	file_free(f);
}

/* Stop the builtin: what it said so far is the answer. */
static void file_stop(struct file_op *f)
{
	f->stopped = true;
	fileop_cancel(f->op);
}

/* The builtin's "E <errno> <what>" answer, or a failure: -1 after
 * answering it as a tool error. */
static int file_failed(struct file_op *f, const struct fileop_result *res,
                       const char *tool)
{
	if (res->status == FILEOP_OK)
		return 0;
	if (res->status == FILEOP_ERRNO) {
		int e = res->error;
		const char *hint =
		    e == ENOENT    ? " (check the path with list_files)"
		    : e == EISDIR  ? " (it is a directory: use list_files)"
		    : e == ENOTDIR ? " (a part of the path is not a directory)"
		    : e == EXDEV   ? " (a link leads out of the sandbox)"
		                   : "";
		mcp_call_done(f->c, mcp_tool_error("%s %s: %s%s", tool, f->abs,
		                                   strerror(e), hint));
	} else if (res->status == FILEOP_FAILED && res->exit_code) {
		mcp_call_done(f->c,
		              mcp_tool_error("%s %s: failed (exit %d)", tool,
		                             f->abs, res->exit_code));
	} else {
		mcp_call_done(f->c, mcp_tool_error("%s %s: %s", tool, f->abs,
		                                   res->status == FILEOP_TIMEOUT
		                                       ? "timed out"
		                                       : res->what));
	}
	return -1;
}

/* Run the builtin; f is freed once it answered (maybe before this
 * returns). */
static void file_run(struct file_op *f, struct sandbox *sb,
                     const struct fileop_params *p,
                     const struct fileop_ops *ops)
{
	f->c->op = f;
	f->c->cancel = file_cancel;
	f->starting = true;
	fileop_start(sb, p, ops, f, &f->op);
	if (f->unstarted)
		file_free(f);
	else
		f->starting = false;
}

static const char *image_type(const unsigned char *p, size_t n)
{
	if (n >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8))
		return "image/png";
	if (n >= 3 && !memcmp(p, "\xff\xd8\xff", 3))
		return "image/jpeg";
	if (n >= 6 && (!memcmp(p, "GIF87a", 6) || !memcmp(p, "GIF89a", 6)))
		return "image/gif";
	if (n >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4))
		return "image/webp";
	return NULL;
}

static char *b64(const char *p, size_t n)
{
	char *o = malloc(base64_encoded_len(n) + 1);
	if (o)
		o[base64_encode(p, n, o)] = '\0';
	return o;
}

static int read_file_head(void *ctx, uint64_t size)
{
	struct file_op *f = ctx;
	f->file = true;
	f->size = size;
	if (size > READ_MAX)
		file_stop(f); /* the answer says so */
	return 0;
}

static int file_dir(void *ctx)
{
	struct file_op *f = ctx;
	f->dir = true;
	return 0;
}

static int read_data(void *ctx, const char *data, size_t len)
{
	struct file_op *f = ctx;
	buf_append(&f->data, data, len);
	return 0;
}

static void read_finish(struct file_op *f, const struct fileop_result *res)
{
	if (f->file && f->size > READ_MAX) {
		mcp_call_done(
		    f->c, mcp_tool_error(
		              "read_file %s: the file is %llu bytes, "
		              "more than read_file returns (%u); read "
		              "parts of it with run_command (head -c, "
		              "tail -n, sed -n '100,200p', grep)",
		              f->abs, (unsigned long long)f->size, READ_MAX));
		return;
	}
	if (file_failed(f, res, "read_file") < 0)
		return;
	if (f->dir) {
		mcp_call_done(f->c,
		              mcp_tool_error("read_file %s: it is a directory "
		                             "(use list_files)",
		                             f->abs));
		return;
	}
	if (!f->file) {
		mcp_call_done(
		    f->c, mcp_tool_error("read_file %s: no answer", f->abs));
		return;
	}
	const char *data = f->data.data ? f->data.data : "";
	size_t n = f->data.len;
	const char *img = image_type((const unsigned char *)data, n);
	json_t *r;
	if (img) {
		char *d = b64(data, n);
		r = d ? json_pack("{s:[{s:s, s:s, s:s}]}", "content", "type",
		                  "image", "data", d, "mimeType", img)
		      : NULL;
		free(d);
	} else if (utf8_valid(data, n)) {
		r = text_result(json_stringn(data, n));
	} else {
		char *d = b64(data, n);
		char *t = NULL;
		if (d &&
		    asprintf(&t, "%s is binary (%zu bytes); its base64:\n%s",
		             f->abs, n, d) < 0)
			t = NULL;
		r = t ? text_result(json_string(t)) : NULL;
		free(d);
		free(t);
	}
	mcp_call_done(f->c, r ? r : mcp_tool_error("out of memory"));
}

static const struct fileop_ops read_ops = {.on_file = read_file_head,
                                           .on_dir = file_dir,
                                           .on_data = read_data,
                                           .on_done = file_done};

/* A file tool's call: f, with its path resolved (*rel) and its sandbox;
 * NULL after answering. */
static struct file_op *file_new(struct mcp_call *c, const char *path,
                                void (*finish)(struct file_op *f,
                                               const struct fileop_result *),
                                const char **rel, struct sandbox **sb)
{
	struct file_op *f = calloc(1, sizeof(*f));
	if (!f) {
		mcp_call_done(c, mcp_tool_error("out of memory"));
		return NULL;
	}
	f->c = c;
	f->finish = finish;
	buf_init(&f->data, READ_MAX);
	buf_init(&f->text, 0);
	if (!(*rel = sandbox_path(c, path, &f->abs)) ||
	    !(*sb = sandbox_of(c))) {
		free(f->abs);
		free(f);
		return NULL;
	}
	return f;
}

static void tool_read_file(struct mcp_call *c, json_t *args)
{
	const char *path =
	    sole_arg(c, args, "path", "path must be a non-empty string");
	if (!path)
		return;
	const char *rel;
	struct sandbox *sb;
	struct file_op *f = file_new(c, path, read_finish, &rel, &sb);
	if (!f)
		return;
	f->who = "read";
	const char *argv[] = {"read", "/", rel, NULL};
	struct fileop_params p = {.argv = argv};
	file_run(f, sb, &p, &read_ops);
}

static void write_finish(struct file_op *f, const struct fileop_result *res)
{
	if (file_failed(f, res, "write_file") < 0)
		return;
	uint64_t n = 0;
	bool created;
	file_write_parse(res->answer, &n, &created);
	char msg[4400];
	snprintf(msg, sizeof(msg), "wrote %llu bytes to %s",
	         (unsigned long long)n, f->abs);
	mcp_call_done(f->c, text_result(json_string(msg)));
}

static const struct fileop_ops write_ops = {.on_done = file_done};

static void tool_write_file(struct mcp_call *c, json_t *args)
{
	static const char *const known[] = {"path", "content", "base64", NULL};
	const char *path;
	json_t *content = json_object_get(args, "content");
	json_t *is64 = json_object_get(args, "base64");
	if (unknown_args(c, args, known) < 0)
		return;
	if (arg_str(args, "path", &path) < 0 || !path || !*path ||
	    !json_is_string(content) ||
	    (is64 && !json_is_boolean(is64) && !json_is_null(is64))) {
		mcp_call_done(c,
		              mcp_tool_error("path must be a non-empty string, "
		                             "content a string, base64 a "
		                             "boolean"));
		return;
	}
	size_t len = json_string_length(content);
	const char *s = json_string_value(content);
	char *bytes;
	if (json_is_true(is64)) {
		bytes = malloc(len / 4 * 3 + 4);
		ssize_t n =
		    bytes ? base64_decode(s, len, (unsigned char *)bytes) : -1;
		if (n < 0) {
			free(bytes);
			mcp_call_done(
			    c, mcp_tool_error("content is not valid base64"));
			return;
		}
		len = (size_t)n;
	} else {
		if (strlen(s) != len) {
			mcp_call_done(c, mcp_tool_error("content holds a NUL "
			                                "character: send it as "
			                                "base64"));
			return;
		}
		bytes = strdup(s);
	}
	if (!bytes) {
		mcp_call_done(c, mcp_tool_error("out of memory"));
		return;
	}
	const char *rel;
	struct sandbox *sb;
	struct file_op *f = file_new(c, path, write_finish, &rel, &sb);
	if (!f) {
		free(bytes);
		return;
	}
	f->who = "write_file";
	f->stdin_copy = bytes;
	char lens[32];
	snprintf(lens, sizeof(lens), "%zu", len);
	/* the stdin copy is the bytes; a NUL from base64 is why the length
	 * goes apart */
	const char *argv[] = {"write", "/", rel, lens, NULL};
	struct fileop_params p = {
	    .argv = argv, .stdin_data = bytes, .stdin_len = len};
	file_run(f, sb, &p, &write_ops);
}

/* Entries past LIST_MAX end the listing: "more entries". */
static int list_entry(void *ctx, const struct file_entry *e)
{
	struct file_op *f = ctx;
	if (f->n >= LIST_MAX) {
		if (!f->stopped)
			file_stop(f);
		return 0;
	}
	f->n++;
	buf_printf(&f->text, "%s %llu %.*s%s\n", file_type_name(e->type),
	           (unsigned long long)e->size, (int)e->path_len, e->path,
	           e->type == FILE_DIR ? "/" : "");
	return 0;
}

static void list_finish(struct file_op *f, const struct fileop_result *res)
{
	if (!f->stopped && file_failed(f, res, "list_files") < 0)
		return;
	if (!f->dir) {
		mcp_call_done(f->c,
		              mcp_tool_error("list_files %s: not a directory "
		                             "(use read_file)",
		                             f->abs));
		return;
	}
	if (f->stopped)
		buf_printf(&f->text,
		           "... (more entries: list a subdirectory)\n");
	if (!f->n)
		buf_printf(&f->text, "(empty directory)\n");
	char *clean = malloc(3 * f->text.len + 1);
	if (clean)
		clean[utf8_sanitize(f->text.data ? f->text.data : "",
		                    f->text.len, clean)] = '\0';
	mcp_call_done(f->c, clean ? text_result(json_string(clean))
	                          : mcp_tool_error("out of memory"));
	free(clean);
}

static const struct fileop_ops list_ops = {
    .on_dir = file_dir, .on_entry = list_entry, .on_done = file_done};

static void tool_list_files(struct mcp_call *c, json_t *args)
{
	static const char *const known[] = {"path", "recursive", NULL};
	const char *path;
	json_t *rec = json_object_get(args, "recursive");
	if (unknown_args(c, args, known) < 0)
		return;
	if (arg_str(args, "path", &path) < 0 ||
	    (rec && !json_is_boolean(rec) && !json_is_null(rec))) {
		mcp_call_done(c,
		              mcp_tool_error("path must be a string, recursive "
		                             "a boolean"));
		return;
	}
	const char *rel;
	struct sandbox *sb;
	struct file_op *f = file_new(c, path && *path ? path : "/workspace",
	                             list_finish, &rel, &sb);
	if (!f)
		return;
	f->who = "list";
	const char *argv[] = {"list", "/",  rel,
	                      "-a",   "-s", json_is_true(rec) ? "-r" : NULL,
	                      NULL};
	struct fileop_params p = {.argv = argv};
	file_run(f, sb, &p, &list_ops);
}

/* ---- run_code ------------------------------------------------------------ */

struct code_op {
	struct mcp_call *c;
	struct interp_cell *cell;
	struct buf out, err;
	json_t *content;
	bool error;
};

static void code_free(struct code_op *o)
{
	buf_free(&o->out);
	buf_free(&o->err);
	json_decref(o->content);
	free(o);
}

static void add_text(json_t *content, const char *s, size_t n)
{
	json_array_append_new(content, json_pack("{s:s, s:o}", "type", "text",
	                                         "text", json_stringn(s, n)));
}

static int code_event(void *arg, const struct interp_event *ev)
{
	struct code_op *o = arg;
	switch (ev->type) {
	case INTERP_EV_NOTICE:
		add_text(o->content, ev->text, strlen(ev->text));
		break;
	case INTERP_EV_STDOUT:
		buf_append(&o->out, ev->text, ev->len);
		break;
	case INTERP_EV_STDERR:
		buf_append(&o->err, ev->text, ev->len);
		break;
	case INTERP_EV_RESULT: {
		static const char *const imgs[] = {"image/png", "image/jpeg"};
		bool shown = false;
		for (size_t i = 0; i < 2; i++) {
			const char *d = json_string_value(
			    json_object_get(ev->bundle, imgs[i]));
			if (d) {
				json_array_append_new(
				    o->content,
				    json_pack("{s:s, s:s, s:s}", "type",
				              "image", "data", d, "mimeType",
				              imgs[i]));
				shown = true;
			}
		}
		json_t *t = json_object_get(ev->bundle, "text/plain");
		if (json_is_string(t) && !shown)
			add_text(o->content, json_string_value(t),
			         json_string_length(t));
		break;
	}
	case INTERP_EV_ERROR: {
		struct buf b;
		buf_init(&b, CODE_OUTPUT_MAX);
		buf_printf(&b, "%s: %s",
		           ev->error->name ? ev->error->name : "Error",
		           ev->error->value ? ev->error->value : "");
		size_t i;
		json_t *line;
		json_array_foreach(ev->error->traceback, i,
		                   line) if (json_is_string(line))
		    buf_printf(&b, "\n%s", json_string_value(line));
		add_text(o->content, b.data ? b.data : "", b.len);
		buf_free(&b);
		o->error = true;
		break;
	}
	case INTERP_EV_END: {
		struct mcp_call *c = o->c;
		json_t *content = json_array();
		if (o->out.len)
			add_text(content, o->out.data, o->out.len);
		if (o->err.len) {
			struct buf b;
			buf_init(&b, 0);
			buf_printf(&b, "stderr:\n%.*s", (int)o->err.len,
			           o->err.data);
			add_text(content, b.data, b.len);
			buf_free(&b);
		}
		if (ev->done->timed_out)
			add_text(content,
			         "(interrupted: timeout_seconds reached)", 38);
		json_array_extend(content, o->content);
		if (!json_array_size(content))
			add_text(content, "(no output)", 11);
		json_t *r = json_pack("{s:o}", "content", content);
		if (o->error || ev->done->timed_out)
			json_object_set_new(r, "isError", json_true());
		c->cancel = NULL;
		code_free(o);
		mcp_call_done(c, r);
		break;
	}
	}
	return 0;
}

static void code_cancel(struct mcp_call *c)
{
	struct code_op *o = c->op;
	interp_cell_cancel(o->cell); /* no event comes any more */
	c->cancel = NULL;
	code_free(o);
	mcp_call_done(c, NULL);
}

static void tool_run_code(struct mcp_call *c, json_t *args)
{
	static const char *const known[] = {"language", "code", "context",
	                                    "timeout_seconds", NULL};
	const char *lang = NULL, *code = NULL, *ctx = NULL;
	enum interp_lang l;
	uint64_t ms;
	if (unknown_args(c, args, known) < 0)
		return;
	if (arg_str(args, "language", &lang) < 0 ||
	    arg_str(args, "code", &code) < 0 ||
	    arg_str(args, "context", &ctx) < 0 || !code || !lang ||
	    interp_lang_parse(lang, &l) < 0 || l == INTERP_TYPESCRIPT) {
		mcp_call_done(c,
		              mcp_tool_error("language must be \"python\" or "
		                             "\"javascript\", code a string"));
		return;
	}
	if (timeout_arg(c, args, &ms) < 0)
		return;
	char id[80];
	snprintf(id, sizeof(id), "mcp-%s", interp_lang_name(l));
	if (ctx && *ctx) {
		size_t n = strlen(ctx);
		bool ok = n <= 64;
		for (size_t i = 0; ok && i < n; i++)
			ok = (ctx[i] >= 'a' && ctx[i] <= 'z') ||
			     (ctx[i] >= 'A' && ctx[i] <= 'Z') ||
			     (ctx[i] >= '0' && ctx[i] <= '9') ||
			     ctx[i] == '-' || ctx[i] == '_';
		if (!ok) {
			mcp_call_done(c, mcp_tool_error("context: 1-64 of "
			                                "[A-Za-z0-9_-]"));
			return;
		}
		snprintf(id, sizeof(id), "mcp-%s", ctx);
	}
	struct sandbox *sb = sandbox_of(c);
	if (!sb)
		return;
	struct sbx_err err = {0};
	struct interp_ctx *ic = interp_find(sb, id);
	if (ic) {
		struct interp_info info;
		interp_get_info(ic, &info);
		if (info.lang != l) {
			mcp_call_done(
			    c,
			    mcp_tool_error("context %s runs %s, not %s: name "
			                   "another context",
			                   ctx ? ctx : id,
			                   interp_lang_name(info.lang), lang));
			return;
		}
	} else {
		struct interp_opts io = {.lang = l, .id = id};
		if (interp_create(sb, &io, NULL, NULL, &ic, &err) < 0) {
			mcp_call_done(c,
			              mcp_tool_error("run_code: %s", err.msg));
			return;
		}
	}
	struct code_op *o = calloc(1, sizeof(*o));
	if (!o || !(o->content = json_array())) {
		free(o);
		mcp_call_done(c, mcp_tool_error("out of memory"));
		return;
	}
	o->c = c;
	buf_init(&o->out, CODE_OUTPUT_MAX);
	buf_init(&o->err, CODE_OUTPUT_MAX);
	if (interp_run(ic, code, strlen(code), ms, code_event, o, &o->cell,
	               &err) < 0) {
		code_free(o);
		mcp_call_done(c, mcp_tool_error("run_code: %s", err.msg));
		return;
	}
	c->op = o;
	c->cancel = code_cancel;
}

/* ---- background processes ------------------------------------------------ */

static void started(struct process *p, void *ctx)
{
	struct mcp_call *c = ctx;
	struct process_info pi;
	process_info(p, &pi);
	if (pi.ended && pi.error[0]) {
		mcp_call_done(c, mcp_tool_error("start_process: %s", pi.error));
		return;
	}
	json_t *j = json_pack("{s:s, s:i, s:s}", "id", pi.id, "pid", pi.pid,
	                      "status", process_status_name(pi.status));
	char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	mcp_call_done(c, t ? text_result(json_string(t))
	                   : mcp_tool_error("out of memory"));
	free(t);
}

static void tool_start_process(struct mcp_call *c, json_t *args)
{
	const char *cmd =
	    sole_arg(c, args, "command", "command must be a non-empty string");
	if (!cmd)
		return;
	struct sandbox *sb = sandbox_of(c);
	if (!sb)
		return;
	struct sbx_err err = {0};
	struct exec_params p = {.command = cmd};
	struct process *proc;
	if (process_start(sb, NULL, NULL, &p, cmd, started, c, &proc, &err) < 0)
		mcp_call_done(c, mcp_tool_error("start_process: %s", err.msg));
}

static struct process *find_process(struct mcp_call *c, json_t *args)
{
	const char *id = sole_arg(c, args, "id",
	                          "id must be the string start_process "
	                          "returned");
	if (!id)
		return NULL;
	struct sandbox *sb = sandbox_of(c);
	if (!sb)
		return NULL;
	struct process *p = process_find(sb, id);
	if (!p)
		mcp_call_done(c, mcp_tool_error("no process %.100s in this "
		                                "sandbox (ids come from "
		                                "start_process)",
		                                id));
	return p;
}

static void tool_process_logs(struct mcp_call *c, json_t *args)
{
	struct process *p = find_process(c, args);
	if (!p)
		return;
	struct buf out, err;
	struct process_info pi;
	process_logs(p, &pi, &out, &err);
	struct agent_keep ko, ke;
	struct agent_stream so = {0}, se = {0};
	agent_keep_init(&ko, 0, AGENT_TAIL_CHARS);
	agent_keep_init(&ke, 0, AGENT_TAIL_CHARS);
	agent_keep_add(&ko, out.data ? out.data : "", out.len);
	agent_keep_add(&ke, err.data ? err.data : "", err.len);
	agent_keep_finish(&ko, 0, AGENT_TAIL_CHARS, &so);
	agent_keep_finish(&ke, 0, AGENT_TAIL_CHARS, &se);
	json_t *j =
	    json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "id", pi.id, "status",
	              process_status_name(pi.status), "stdout",
	              so.tail ? so.tail : "", "stderr", se.tail ? se.tail : "",
	              "stdoutTruncated", so.cut || pi.log_dropped,
	              "stderrTruncated", se.cut || pi.log_dropped);
	if (j && pi.ended)
		json_object_set_new(j, "exitCode", json_integer(pi.exit_code));
	char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	free(so.head);
	free(so.tail);
	free(se.head);
	free(se.tail);
	agent_keep_free(&ko);
	agent_keep_free(&ke);
	buf_free(&out);
	buf_free(&err);
	mcp_call_done(c, t ? text_result(json_string(t))
	                   : mcp_tool_error("out of memory"));
	free(t);
}

static void tool_kill_process(struct mcp_call *c, json_t *args)
{
	struct process *p = find_process(c, args);
	if (!p)
		return;
	char msg[300];
	struct process_info pi;
	process_info(p, &pi);
	if (pi.ended) {
		snprintf(msg, sizeof(msg),
		         "process %.100s had ended already (%s)", pi.id,
		         process_status_name(pi.status));
	} else if (process_kill(p, 2000) < 0) {
		mcp_call_done(c,
		              mcp_tool_error("kill_process %s failed", pi.id));
		return;
	} else {
		snprintf(msg, sizeof(msg),
		         "process %.100s and its children: "
		         "SIGTERM sent, SIGKILL follows in 2 s",
		         pi.id);
	}
	mcp_call_done(c, text_result(json_string(msg)));
}

int mcp_tool_call(struct mcp_call *c, const char *name, json_t *args)
{
	static const struct {
		const char *name;
		void (*fn)(struct mcp_call *c, json_t *args);
	} tools[] = {
	    {"run_command", tool_run_command},
	    {"read_file", tool_read_file},
	    {"write_file", tool_write_file},
	    {"list_files", tool_list_files},
	    {"run_code", tool_run_code},
	    {"start_process", tool_start_process},
	    {"process_logs", tool_process_logs},
	    {"kill_process", tool_kill_process},
	};
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
		if (!strcmp(name, tools[i].name)) {
			tools[i].fn(c, args);
			return 0;
		}
	return -1;
}
