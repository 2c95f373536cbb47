/* The Duet room API (shared/spec/duet.md). A room's sandbox is named
 * "sandbox-<roomID>" and lives in the default tenant. Validation errors
 * follow the shape of the Worker's Zod schema: {"error": "invalid request",
 * "details": {"<field>": ["<message>"]}}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/agent.h"
#include "core/assistant.h"
#include "core/exec.h"
#include "http/jsonout.h"
#include "lib/log.h"
#include "lib/util.h"

#define ROOM_ID_MAX 55 /* "sandbox-" + 55 = 63, the sandbox id limit */

struct duet_exec {
	struct http_req *r;
	char *cmd;
	char sandbox_name[80];
};

static void invalid(struct http_req *r, const char *field, const char *msg)
{
	http_respond_json(r, 400,
	                  json_pack("{s:s, s:{s:[s]}}", "error",
	                            "invalid request", "details", field, msg));
}

const char *duet_room_id_problem(const char *id, size_t len)
{
	if (len == 0)
		return "Room ID cannot be empty";
	if (len > ROOM_ID_MAX)
		return "Room ID must be at most 55 characters";
	if (id[0] == '.')
		return "Room ID cannot start with '.'";
	for (size_t i = 0; i < len; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		      c == '.'))
			return "Room ID may contain only letters, digits, "
			       "'-', '_' and '.'";
	}
	return NULL;
}

static const char *json_type_name(const json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	default:
		return "null";
	}
}

/* Parse the body as a JSON object, or answer 400 and return NULL. */
static json_t *body_object(struct http_req *r)
{
	json_error_t jerr;
	if (!r->body.len) {
		invalid(r, "body",
		        "Expected a JSON object, received an empty body");
		return NULL;
	}
	json_t *j = json_loadb(r->body.data, r->body.len, 0, &jerr);
	if (!j) {
		char msg[300];
		snprintf(msg, sizeof(msg),
		         "Invalid JSON: %s (line %d, column %d)", jerr.text,
		         jerr.line, jerr.column);
		invalid(r, "body", msg);
		return NULL;
	}
	if (!json_is_object(j)) {
		char msg[100];
		snprintf(msg, sizeof(msg), "Expected object, received %s",
		         json_type_name(j));
		json_decref(j);
		invalid(r, "body", msg);
		return NULL;
	}
	return j;
}

/* The body of a POST (else 405); NULL after answering. */
static json_t *post_body(struct http_req *r)
{
	if (strcmp(r->method, "POST")) {
		http_respond_json(
		    r, 405,
		    json_pack("{s:s}", "error",
		              "method not allowed - only POST is supported"));
		return NULL;
	}
	return body_object(r);
}

/* A string field (and not empty, with empty_msg); -1 after answering
 * 400. */
static int want_string(struct http_req *r, const char *field, json_t *v,
                       const char *empty_msg)
{
	if (!v || !json_is_string(v)) {
		char msg[100];
		snprintf(msg, sizeof(msg), "Expected string, received %s",
		         v ? json_type_name(v) : "undefined");
		invalid(r, field, msg);
		return -1;
	}
	if (empty_msg && json_string_length(v) == 0) {
		invalid(r, field, empty_msg);
		return -1;
	}
	return 0;
}

/* bash's "bash: line 1: foo: command not found": the name, or NULL. */
static char *not_found_name(const struct exec_result *res)
{
	return agent_not_found_name(
	    res->exit_code, buf_cstr((struct buf *)&res->err), res->err.len);
}

static void exec_done(const struct exec_result *res, void *ctx)
{
	struct duet_exec *d = ctx;
	struct http_req *r = d->r;
	char *missing = NULL;

	if (res->failure == EXEC_TIMEOUT) {
		http_respond_json(
		    r, 500,
		    json_pack("{s:s}", "error",
		              "sandbox execution failed: timeout"));
	} else if (res->failure != EXEC_OK) {
		char msg[700];
		snprintf(msg, sizeof(msg), "sandbox execution failed: %s",
		         res->msg);
		http_respond_json(r, 500, json_pack("{s:s}", "error", msg));
	} else if ((missing = not_found_name(res))) {
		char msg[700];
		snprintf(msg, sizeof(msg),
		         "sandbox execution failed: command not found: %s",
		         missing);
		http_respond_json(r, 500, json_pack("{s:s}", "error", msg));
	} else {
		char ts[32];
		iso8601_ms(res->start_wall_ms, ts, sizeof(ts));
		struct buf out, err;
		exec_result_take(res, &out, &err);
		bool cut_out = out.dropped > 0, cut_err = err.dropped > 0;
		struct jsonout *o = jsonout_new();
		json_t *jo = jsonout_string(o, &out),
		       *je = jsonout_string(o, &err);
		json_t *result = json_pack(
		    "{s:b, s:i, s:o, s:o, s:s, s:I, s:s, s:s}", "success",
		    res->exit_code == 0, "exitCode", res->exit_code, "stdout",
		    jo, "stderr", je, "command", d->cmd, "duration",
		    (json_int_t)res->duration_ms, "timestamp", ts, "sessionId",
		    d->sandbox_name);
		if (result && (cut_out || cut_err))
			json_object_set_new(result, "truncated",
			                    json_pack("{s:b, s:b}", "stdout",
			                              cut_out, "stderr",
			                              cut_err));
		buf_free(&out);
		buf_free(&err);
		jsonout_respond(o, r, 200,
		                json_pack("{s:o, s:s}", "result", result,
		                          "sandboxName", d->sandbox_name));
	}
	free(missing);
	free(d->cmd);
	free(d);
}

static void handle_exec(struct api *a, struct http_req *r, const char *tenant,
                        const char *room)
{
	struct sbx_err err = {0};
	json_t *body = post_body(r);
	if (!body)
		return;
	json_t *cmd = json_object_get(body, "cmd");
	if (want_string(r, "cmd", cmd, "Command cannot be empty") < 0) {
		json_decref(body);
		return;
	}
	struct duet_exec *d = calloc(1, sizeof(*d));
	if (d)
		d->cmd = strdup(json_string_value(cmd));
	json_decref(body);
	if (!d || !d->cmd) {
		free(d);
		http_respond_json(
		    r, 500,
		    json_pack("{s:s}", "error",
		              "sandbox execution failed: out of memory"));
		return;
	}
	d->r = r;
	snprintf(d->sandbox_name, sizeof(d->sandbox_name), "sandbox-%s", room);
	struct sandbox *sb;
	struct exec_params p = {.command = d->cmd};
	bool existed = manager_find(a->m, tenant, d->sandbox_name) != NULL;
	int rc = manager_get(a->m, tenant, d->sandbox_name, &sb, &err);
	if (rc == 0) {
		sandbox_touch(sb);
		if ((rc = manager_admit(sb, &err)) < 0 && !existed)
			sandbox_destroy(sb, NULL); /* refused: leave nothing */
	}
	if (rc < 0) {
		if (err.code == EDQUOT) { /* a quota: 429, which one named */
			char msg[700];
			snprintf(msg, sizeof(msg),
			         "sandbox execution failed: %s", err.msg);
			http_respond_json(r, 429,
			                  json_pack("{s:s, s:s}", "error", msg,
			                            "code", "quota_exceeded"));
			free(d->cmd);
			free(d);
			return;
		}
		struct exec_result res = {.failure = EXEC_NOT_STARTED};
		snprintf(res.msg, sizeof(res.msg), "%s", err.msg);
		exec_done(&res, d);
		return;
	}
	http_suspend(r);
	if (exec_submit(sb, NULL, &p, exec_done, d, NULL, &err) < 0) {
		struct exec_result res = {.failure = EXEC_NOT_STARTED};
		snprintf(res.msg, sizeof(res.msg), "%s", err.msg);
		exec_done(&res, d);
	}
}

static void handle_delete(struct api *a, struct http_req *r, const char *tenant,
                          const char *room)
{
	struct sbx_err err = {0};
	char name[80];
	if (strcmp(r->method, "DELETE")) {
		http_respond_json(
		    r, 405,
		    json_pack("{s:s}", "error",
		              "method not allowed - only DELETE is supported"));
		return;
	}
	snprintf(name, sizeof(name), "sandbox-%s", room);
	/* the assistant's state first, as the seed's handleCleanup does */
	json_t *errors = json_array();
	char msg[600];
	if (assistant_forget(a->m, tenant, room, &err) < 0) {
		snprintf(msg, sizeof(msg), "assistant: %s", err.msg);
		json_array_append_new(errors, json_string(msg));
	}
	struct sandbox *sb = manager_find(a->m, tenant, name);
	if (sb && sandbox_destroy(sb, &err) < 0) {
		snprintf(msg, sizeof(msg), "sandbox: %s", err.msg);
		json_array_append_new(errors, json_string(msg));
	}
	if (json_array_size(errors)) {
		http_respond_json(
		    r, 207,
		    json_pack("{s:b, s:o}", "cleaned", 1, "errors", errors));
		return;
	}
	json_decref(errors);
	http_respond_json(
	    r, 200, json_pack("{s:b, s:s}", "cleaned", 1, "roomId", room));
}

static void message_done(const struct assistant_reply *ar, void *ctx)
{
	struct http_req *r = ctx;
	if (ar->status != ASSISTANT_OK) {
		unsigned status = ar->status == ASSISTANT_NO_MODEL  ? 503
		                  : ar->status == ASSISTANT_FAILED  ? 502
		                  : ar->status == ASSISTANT_TIMEOUT ? 504
		                                                    : 500;
		char msg[800];
		snprintf(msg, sizeof(msg), "%s%s",
		         status == 500 ? "assistant failed: " : "", ar->error);
		http_respond_json(r, status, json_pack("{s:s}", "error", msg));
		return;
	}
	json_t *msgs = json_array();
	for (size_t i = 0; i < ar->nmsgs; i++) {
		const struct assistant_msg *m = &ar->msgs[i];
		json_array_append_new(
		    msgs, json_pack("{s:s, s:s, s:s, s:I}", "role", m->role,
		                    "userId", m->user_id, "text", m->text, "ts",
		                    (json_int_t)m->ts));
	}
	http_respond_json(
	    r, 200,
	    json_pack("{s:s, s:o}", "reply", ar->reply, "messages", msgs));
}

static void handle_message(struct api *a, struct http_req *r,
                           const char *tenant, const char *room)
{
	json_t *body = post_body(r);
	if (!body)
		return;
	json_t *text = json_object_get(body, "text");
	json_t *user = json_object_get(body, "userId");
	if (want_string(r, "text", text, "Text cannot be empty") < 0) {
		/* answered */
	} else if (strlen(json_string_value(text)) !=
	           json_string_length(text)) {
		invalid(r, "text", "Text cannot contain NUL characters");
	} else if (user && !json_is_null(user) &&
	           want_string(r, "userId", user, NULL) < 0) {
		/* answered */
	} else if (json_is_string(user) && (json_string_length(user) > 256 ||
	                                    strlen(json_string_value(user)) !=
	                                        json_string_length(user))) {
		invalid(r, "userId",
		        "User ID must be at most 256 characters, "
		        "without NUL");
	} else {
		char sandbox_name[80];
		snprintf(sandbox_name, sizeof(sandbox_name), "sandbox-%s",
		         room);
		const char *uid =
		    json_is_string(user) && json_string_length(user)
		        ? json_string_value(user)
		        : "anonymous";
		http_suspend(r);
		assistant_message(a->m, tenant, room, sandbox_name, uid,
		                  json_string_value(text), message_done, r);
	}
	json_decref(body);
}

void api_duet_handle(struct api *a, struct http_req *r, const char *tenant,
                     const char *rest)
{
	const char *slash = strchr(rest, '/');
	size_t len = slash ? (size_t)(slash - rest) : strlen(rest);
	const char *sub = slash ? slash : "";
	enum { EXEC, DELETE, MESSAGE } what;

	if (!strcmp(sub, "/sandbox/exec"))
		what = EXEC;
	else if (!strcmp(sub, "") || !strcmp(sub, "/"))
		what = DELETE;
	else if (!strcmp(sub, "/message"))
		what = MESSAGE;
	else {
		http_respond_text(r, 404, "404 page not found\n");
		return;
	}
	if (len == 0) {
		http_respond_text(r, 404, "404 page not found\n");
		return;
	}
	const char *problem = duet_room_id_problem(rest, len);
	if (problem) {
		invalid(r, "roomId", problem);
		return;
	}
	char room[ROOM_ID_MAX + 1];
	memcpy(room, rest, len);
	room[len] = '\0';
	if (what == EXEC)
		handle_exec(a, r, tenant, room);
	else if (what == DELETE)
		handle_delete(a, r, tenant, room);
	else
		handle_message(a, r, tenant, room);
}
