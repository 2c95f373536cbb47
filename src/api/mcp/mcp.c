/* The MCP server at /mcp: Model Context Protocol over the Streamable HTTP
 * transport (README "For agents"; shared/spec/agents.md).
 *
 * Theory of operation. A client POSTs JSON-RPC 2.0 messages to /mcp: one
 * message, or (protocol revisions up to 2025-03-26, which had them) a
 * batch. `initialize` makes a session, whose id goes back in the
 * Mcp-Session-Id header and must come with every later request (400
 * without it, 404 once the session is gone: the client then starts a new
 * one). A session works on one sandbox: the one named by ?sandbox=ID on the
 * initialize request's URL, else a new one made for it ("mcp-" + random),
 * destroyed when the session is deleted (DELETE /mcp) unless ?keep=true.
 *
 * Each POST is a struct mcp_post that collects the answers of its
 * requests. Notifications and responses alone get 202. Requests that
 * answer at once (initialize, ping, tools/list, bad ones) and a POST whose
 * tool calls all finished before it was dispatched get one JSON answer (an
 * array for a batch). Otherwise, when the client accepts text/event-stream
 * (every client of the transport does), the answer becomes an SSE stream
 * (http/relay.h: keepalive comments while a long command runs, and a
 * client that goes away cancels its calls): each response is one "message"
 * event as soon as it is ready, and the stream ends with the last one.
 *
 * notifications/cancelled stops the named call (its command and every
 * process it started are killed) and its response is never sent, as the
 * specification asks. Sessions idle for MCP_SESSION_IDLE_MS with nothing
 * running are closed as if deleted. */
#include "api/mcp/mcp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/manager.h"
#include "http/relay.h"
#include "lib/log.h"
#include "lib/util.h"

#define MCP_SESSION_IDLE_MS (60ull * 60 * 1000)
#define LATEST_PROTOCOL "2025-11-25"

/* What the official SDKs speak (@modelcontextprotocol/sdk's
 * SUPPORTED_PROTOCOL_VERSIONS), newest first. */
static const char *const protocols[] = {"2025-11-25", "2025-06-18",
                                        "2025-03-26", "2024-11-05"};

enum {
	RPC_PARSE_ERROR = -32700,
	RPC_INVALID_REQUEST = -32600,
	RPC_METHOD_NOT_FOUND = -32601,
	RPC_INVALID_PARAMS = -32602,
	RPC_INTERNAL = -32603,
	RPC_NO_SESSION = -32000,
	RPC_SESSION_GONE = -32001,
};

struct mcp_session {
	char id[48];
	char *tenant, *sandbox_id;
	bool owned, keep;
	bool initialized; /* notifications/initialized came */
	bool closing;
	bool in_close; /* sess_close is at work: it frees it */
	char proto[16];
	uint64_t last_ms;
	struct mcp_call *calls;
	struct mcp_session *next;
};

struct mcp_post {
	struct api *a;
	struct http_req *r;
	struct mcp_session *s;
	bool batch, sse_ok, streaming, dispatching;
	json_t *out;      /* answers not sent yet */
	unsigned pending; /* tool calls running */
	struct relay *rl;
};

static struct mcp_session *sessions;

static bool supported(const char *v)
{
	for (size_t i = 0; i < sizeof(protocols) / sizeof(protocols[0]); i++)
		if (!strcmp(v, protocols[i]))
			return true;
	return false;
}

static json_t *rpc_error(json_t *id, int code, const char *msg)
{
	return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
	                 id ? id : json_null(), "error", "code", code,
	                 "message", msg);
}

static json_t *rpc_result(json_t *id, json_t *result)
{
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
	                 "result", result);
}

/* A JSON answer with extra headers (name/value pairs, NULL-ended). */
static void respond(struct api *a, struct http_req *r, unsigned status,
                    json_t *j, const char *const *headers)
{
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text) {
		http_respond_text(r, 500, "out of memory\n");
		return;
	}
	size_t len = strlen(text);
	struct relay_opts o = {.status = status,
	                       .content_type = "application/json",
	                       .size = len,
	                       .headers = headers};
	struct relay *rl = relay_open(r, a->m->loop, &o, NULL, NULL);
	if (rl) {
		relay_write(rl, text, len);
		relay_end(rl);
	}
	free(text);
}

static void respond_error(struct api *a, struct http_req *r, unsigned status,
                          int code, const char *msg)
{
	respond(a, r, status, rpc_error(NULL, code, msg), NULL);
}

/* ---- sessions ------------------------------------------------------------ */

static struct mcp_session *sess_find(const char *id, const char *tenant)
{
	for (struct mcp_session *s = sessions; s; s = s->next)
		if (!strcmp(s->id, id) && !strcmp(s->tenant, tenant) &&
		    !s->closing)
			return s;
	return NULL;
}

static void sess_unlink(struct mcp_session *s)
{
	for (struct mcp_session **p = &sessions; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			return;
		}
}

static void sess_free(struct mcp_session *s)
{
	sess_unlink(s);
	free(s->tenant);
	free(s->sandbox_id);
	free(s);
}

static void call_cancel(struct mcp_call *c)
{
	c->cancelled = true;
	if (!c->cancel_sent && c->cancel) {
		c->cancel_sent = true;
		c->cancel(c);
	}
}

/* Cancel every call that pred picks; a cancel may end calls at once, so
 * the list is walked again after each. */
static void cancel_calls(struct mcp_session *s,
                         bool (*pred)(struct mcp_call *c, void *data),
                         void *data)
{
	for (;;) {
		struct mcp_call *c = s->calls;
		while (c && (c->cancel_sent || !pred(c, data)))
			c = c->next;
		if (!c)
			return;
		c->cancelled = true;
		if (!c->cancel) {
			c->cancel_sent =
			    true; /* nothing to stop: its answer is dropped */
			continue;
		}
		call_cancel(c);
	}
}

static bool any_call(struct mcp_call *c, void *data)
{
	(void)c;
	(void)data;
	return true;
}

/* End the session: its calls are cancelled, its own sandbox destroyed
 * (unless kept); it is freed once its last call has ended. */
static void sess_close(struct api *a, struct mcp_session *s)
{
	if (s->closing)
		return;
	s->closing = true;
	/* calls that end in here (a cancel, the sandbox's destruction) must
	 * not free the session under us */
	s->in_close = true;
	cancel_calls(s, any_call, NULL);
	if (s->owned && !s->keep && a->m) {
		struct sandbox *sb =
		    manager_find(a->m, s->tenant, s->sandbox_id);
		struct sbx_err err = {0};
		if (sb && sandbox_destroy(sb, &err) < 0)
			log_warn("sandbox=%s event=mcp-destroy-failed %s",
			         s->sandbox_id, err.msg);
	}
	log_info("sandbox=%s event=mcp-session-closed", s->sandbox_id);
	s->in_close = false;
	if (!s->calls)
		sess_free(s);
}

static void sweep_idle(struct api *a)
{
	uint64_t now = now_mono_ms();
	for (struct mcp_session *s = sessions, *next; s; s = next) {
		next = s->next;
		if (!s->closing && !s->calls &&
		    now - s->last_ms > MCP_SESSION_IDLE_MS)
			sess_close(a, s);
	}
}

/* ---- answers of one POST ------------------------------------------------- */

static void post_add(struct mcp_post *p, json_t *msg)
{
	if (!msg)
		msg = rpc_error(NULL, RPC_INTERNAL, "out of memory");
	if (p->streaming) {
		if (p->rl)
			relay_event_json(p->rl, "message", msg);
		else
			json_decref(msg);
		return;
	}
	json_array_append_new(p->out, msg);
}

static void post_free(struct mcp_post *p)
{
	json_decref(p->out);
	free(p);
}

/* Everything answered: end the answer. */
static void post_maybe_finish(struct mcp_post *p)
{
	if (p->dispatching || p->pending)
		return;
	if (p->streaming) {
		if (p->rl)
			relay_end(p->rl);
		post_free(p);
		return;
	}
	if (!json_array_size(p->out))
		http_respond_empty(p->r, 202);
	else if (p->batch)
		respond(p->a, p->r, 200, json_incref(p->out), NULL);
	else
		respond(p->a, p->r, 200, json_incref(json_array_get(p->out, 0)),
		        NULL);
	post_free(p);
}

static bool call_of_post(struct mcp_call *c, void *data)
{
	return c->post == data;
}

/* The client of a streamed answer is gone: its calls stop. */
static void post_gone(void *ctx)
{
	struct mcp_post *p = ctx;
	/* the relay drops what is still written; relay_end comes as usual */
	if (p->s)
		cancel_calls(p->s, call_of_post, p);
}

static const struct relay_ops post_relay = {.cancel = post_gone};

void mcp_call_done(struct mcp_call *c, json_t *result)
{
	struct mcp_post *p = c->post;
	struct mcp_session *s = c->s;
	for (struct mcp_call **q = &s->calls; *q; q = &(*q)->next)
		if (*q == c) {
			*q = c->next;
			break;
		}
	if (c->cancelled || !result)
		json_decref(result);
	else
		post_add(p, rpc_result(c->id, result));
	json_decref(c->id);
	free(c);
	s->last_ms = now_mono_ms();
	p->pending--;
	if (s->closing && !s->calls && !s->in_close)
		sess_free(s); /* p->s is not used again */
	post_maybe_finish(p);
}

json_t *mcp_tool_error(const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *t = json_string(msg);
	if (!t)
		t = json_string("the tool failed (its message was not UTF-8)");
	return json_pack("{s:[{s:s, s:o}], s:b}", "content", "type", "text",
	                 "text", t, "isError", 1);
}

const char *mcp_sandbox_id(const struct mcp_call *c)
{
	return c->s->sandbox_id;
}

int mcp_sandbox(struct mcp_call *c, struct sandbox **out, struct sbx_err *err)
{
	struct sbx_err e = {0};
	struct manager *m = c->a->m;
	struct sandbox *sb;
	bool existed = manager_find(m, c->s->tenant, c->s->sandbox_id) != NULL;
	*out = NULL;
	int rc = manager_get(m, c->s->tenant, c->s->sandbox_id, &sb, &e);
	if (rc == 0) {
		sandbox_touch(sb);
		if ((rc = manager_admit(sb, &e)) < 0 && !existed)
			sandbox_destroy(sb, NULL);
	}
	if (rc < 0)
		return sbx_err_set(err, -rc, "sandbox %s: %s", c->s->sandbox_id,
		                   e.msg);
	*out = sb;
	return 0;
}

/* ---- JSON-RPC ------------------------------------------------------------ */

static json_t *initialize_result(const char *proto)
{
	return json_pack(
	    "{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion",
	    proto, "capabilities", "tools", "listChanged", 0, "serverInfo",
	    "name", "sandboxd", "title", "sandboxd", "version", "0.1",
	    "instructions",
	    "Tools to work in an isolated Linux sandbox (Debian userland, "
	    "bash, python3, git; no Internet unless the operator allowed "
	    "it). Files persist in the sandbox for this session; relative "
	    "paths are under /workspace. Use run_command for shell work, "
	    "read_file/write_file/list_files for files, run_code for "
	    "Python or JavaScript with rich results (plots come back as "
	    "images), start_process/process_logs/kill_process for servers "
	    "and other long-running programs.");
}

static bool is_id(const json_t *id)
{
	return json_is_string(id) || json_is_integer(id);
}

static void tools_call(struct mcp_post *p, json_t *id, json_t *params)
{
	json_t *name = json_object_get(params, "name");
	json_t *args = json_object_get(params, "arguments");
	if (!json_is_string(name)) {
		post_add(p,
		         rpc_error(id, RPC_INVALID_PARAMS,
		                   "tools/call: params.name must be a string"));
		return;
	}
	if (args && !json_is_object(args) && !json_is_null(args)) {
		post_add(p, rpc_error(id, RPC_INVALID_PARAMS,
		                      "tools/call: params.arguments must be an "
		                      "object"));
		return;
	}
	struct mcp_call *c = calloc(1, sizeof(*c));
	if (!c) {
		post_add(p, rpc_error(id, RPC_INTERNAL, "out of memory"));
		return;
	}
	c->a = p->a;
	c->s = p->s;
	c->post = p;
	c->id = json_incref(id);
	c->next = p->s->calls;
	p->s->calls = c;
	p->pending++;
	json_t *empty = json_object();
	int rc = mcp_tool_call(c, json_string_value(name),
	                       json_is_object(args) ? args : empty);
	json_decref(empty);
	if (rc < 0) {
		char msg[300];
		snprintf(msg, sizeof(msg), "Unknown tool: %.200s",
		         json_string_value(name));
		json_t *err = rpc_error(id, RPC_INVALID_PARAMS, msg);
		mcp_call_done(c, NULL); /* no answer from the tool */
		post_add(p, err);
	}
}

static void notification(struct mcp_post *p, const char *method, json_t *params)
{
	if (!strcmp(method, "notifications/initialized")) {
		p->s->initialized = true;
	} else if (!strcmp(method, "notifications/cancelled")) {
		json_t *rid = json_object_get(params, "requestId");
		for (struct mcp_call *c = p->s->calls; rid && c; c = c->next)
			if (json_equal(c->id, rid)) {
				log_info("sandbox=%s event=mcp-cancelled",
				         p->s->sandbox_id);
				call_cancel(c); /* may free c: stop here */
				break;
			}
	}
	/* others (progress, roots changes) need nothing from us */
}

/* One message of a POST (the session is known). */
static void handle_message(struct mcp_post *p, json_t *msg)
{
	if (!json_is_object(msg)) {
		post_add(p, rpc_error(
		                NULL, RPC_INVALID_REQUEST,
		                "Invalid Request: a message is a JSON object"));
		return;
	}
	json_t *id = json_object_get(msg, "id");
	json_t *method = json_object_get(msg, "method");
	json_t *params = json_object_get(msg, "params");
	const char *v = json_string_value(json_object_get(msg, "jsonrpc"));
	if (!v || strcmp(v, "2.0")) {
		post_add(p,
		         rpc_error(is_id(id) ? id : NULL, RPC_INVALID_REQUEST,
		                   "Invalid Request: jsonrpc must be \"2.0\""));
		return;
	}
	if (!method) {
		if (is_id(id) && (json_object_get(msg, "result") ||
		                  json_object_get(msg, "error")))
			return; /* a response: we never ask anything */
		post_add(p, rpc_error(NULL, RPC_INVALID_REQUEST,
		                      "Invalid Request: no method"));
		return;
	}
	if (!json_is_string(method) || (id && !is_id(id))) {
		post_add(p,
		         rpc_error(NULL, RPC_INVALID_REQUEST,
		                   "Invalid Request: method must be a string, "
		                   "id a string or an integer"));
		return;
	}
	if (params && !json_is_object(params)) {
		if (id)
			post_add(p, rpc_error(id, RPC_INVALID_PARAMS,
			                      "params must be an object"));
		return;
	}
	const char *name = json_string_value(method);
	if (!id) {
		notification(p, name, params);
		return;
	}
	if (!strcmp(name, "ping")) {
		post_add(p, rpc_result(id, json_object()));
	} else if (!strcmp(name, "tools/list")) {
		post_add(p, rpc_result(id, json_pack("{s:o}", "tools",
		                                     mcp_tools_list())));
	} else if (!strcmp(name, "tools/call")) {
		tools_call(p, id, params);
	} else if (!strcmp(name, "initialize")) {
		post_add(p, rpc_error(id, RPC_INVALID_REQUEST,
		                      "Invalid Request: this session is "
		                      "initialized already (send initialize "
		                      "without Mcp-Session-Id for a new one)"));
	} else {
		char why[300];
		snprintf(why, sizeof(why), "Method not found: %.200s", name);
		post_add(p, rpc_error(id, RPC_METHOD_NOT_FOUND, why));
	}
}

/* initialize: a new session; its answer carries Mcp-Session-Id. */
static void initialize(struct api *a, struct http_req *r, const char *tenant,
                       json_t *msg)
{
	json_t *id = json_object_get(msg, "id");
	json_t *params = json_object_get(msg, "params");
	const char *asked =
	    json_string_value(json_object_get(params, "protocolVersion"));
	if (!is_id(id) || !json_is_object(params) || !asked) {
		respond(
		    a, r, 400,
		    rpc_error(is_id(id) ? id : NULL, RPC_INVALID_PARAMS,
		              "initialize: params.protocolVersion is required"),
		    NULL);
		return;
	}
	const char *want = http_query(r, "sandbox");
	const char *keep = http_query(r, "keep");
	if (want && !sandbox_id_valid(want)) {
		respond(a, r, 400,
		        rpc_error(id, RPC_INVALID_PARAMS,
		                  "?sandbox= must be 1-63 of [a-z0-9-]"),
		        NULL);
		return;
	}
	sweep_idle(a);
	struct mcp_session *s = calloc(1, sizeof(*s));
	if (s) {
		/* 96 random bits; the sandbox's name is drawn apart, so that
		 * whoever sees it learns nothing of the session's id */
		char gen[ID_RANDOM_MAX], half[ID_RANDOM_MAX];
		id_random(s->id, sizeof(s->id), "");
		id_random(half, sizeof(half), "");
		strncat(s->id, half, sizeof(s->id) - strlen(s->id) - 1);
		id_random(gen, sizeof(gen), "mcp-");
		s->tenant = strdup(tenant);
		s->sandbox_id = strdup(want ? want : gen);
		s->owned = !want;
		s->keep = keep && (!strcmp(keep, "true") || !strcmp(keep, "1"));
		s->last_ms = now_mono_ms();
		snprintf(s->proto, sizeof(s->proto), "%s",
		         supported(asked) ? asked : LATEST_PROTOCOL);
	}
	if (!s || !s->tenant || !s->sandbox_id) {
		if (s) {
			free(s->tenant);
			free(s->sandbox_id);
			free(s);
		}
		respond(a, r, 500, rpc_error(id, RPC_INTERNAL, "out of memory"),
		        NULL);
		return;
	}
	s->next = sessions;
	sessions = s;
	/* the session's id is a secret of its client: never logged */
	log_info("sandbox=%s event=mcp-session protocol=%s", s->sandbox_id,
	         s->proto);
	const char *hdrs[] = {"Mcp-Session-Id", s->id, NULL};
	respond(a, r, 200, rpc_result(id, initialize_result(s->proto)), hdrs);
}

static bool accepts(struct http_req *r, const char *type)
{
	const char *acc = http_header(r, "Accept");
	return acc && strstr(acc, type);
}

/* DNS rebinding: a browser page may not drive a daemon without tokens. */
static bool origin_ok(struct api *a, struct http_req *r)
{
	const char *o = http_header(r, "Origin");
	if (!o || a->auth)
		return true;
	const char *h = strstr(o, "://");
	h = h ? h + 3 : o;
	static const char *const local[] = {"localhost", "127.0.0.1", "[::1]"};
	for (size_t i = 0; i < 3; i++) {
		size_t l = strlen(local[i]);
		if (!strncmp(h, local[i], l) &&
		    (h[l] == '\0' || h[l] == ':' || h[l] == '/'))
			return true;
	}
	return false;
}

static void handle_post(struct api *a, struct http_req *r, const char *tenant)
{
	const char *ct = http_header(r, "Content-Type");
	if (!ct || strncmp(ct, "application/json", 16)) {
		respond_error(a, r, 415, RPC_INVALID_REQUEST,
		              "Unsupported Media Type: Content-Type must be "
		              "application/json");
		return;
	}
	json_error_t jerr;
	json_t *body =
	    json_loadb(r->body.data ? r->body.data : "", r->body.len, 0, &jerr);
	if (!body) {
		char msg[300];
		snprintf(msg, sizeof(msg), "Parse error: %s", jerr.text);
		respond_error(a, r, 400, RPC_PARSE_ERROR, msg);
		return;
	}
	bool batch = json_is_array(body);
	if (!batch && json_is_object(body) &&
	    json_is_string(json_object_get(body, "method")) &&
	    !strcmp(json_string_value(json_object_get(body, "method")),
	            "initialize")) {
		initialize(a, r, tenant, body);
		json_decref(body);
		return;
	}
	const char *sid = http_header(r, "Mcp-Session-Id");
	if (!sid) {
		respond_error(a, r, 400, RPC_NO_SESSION,
		              "Bad Request: Mcp-Session-Id header is required "
		              "(initialize first)");
		json_decref(body);
		return;
	}
	struct mcp_session *s = sess_find(sid, tenant);
	if (!s) {
		respond_error(a, r, 404, RPC_SESSION_GONE,
		              "Session not found: initialize a new session");
		json_decref(body);
		return;
	}
	const char *pv = http_header(r, "MCP-Protocol-Version");
	if (pv && !supported(pv)) {
		char msg[200];
		snprintf(msg, sizeof(msg),
		         "Bad Request: unsupported MCP-Protocol-Version %.40s",
		         pv);
		respond_error(a, r, 400, RPC_INVALID_REQUEST, msg);
		json_decref(body);
		return;
	}
	if (batch &&
	    (strcmp(s->proto, "2025-03-26") > 0 || !json_array_size(body))) {
		respond(a, r, 400,
		        rpc_error(NULL, RPC_INVALID_REQUEST,
		                  json_array_size(body)
		                      ? "Invalid Request: JSON-RPC batches are "
		                        "not part of this protocol revision"
		                      : "Invalid Request: an empty batch"),
		        NULL);
		json_decref(body);
		return;
	}
	s->last_ms = now_mono_ms();
	struct mcp_post *p = calloc(1, sizeof(*p));
	if (!p || !(p->out = json_array())) {
		free(p);
		json_decref(body);
		respond_error(a, r, 500, RPC_INTERNAL, "out of memory");
		return;
	}
	p->a = a;
	p->r = r;
	p->s = s;
	p->batch = batch;
	p->sse_ok = accepts(r, "text/event-stream");
	p->dispatching = true;
	if (batch) {
		size_t i;
		json_t *m;
		json_array_foreach(body, i, m)
		{
			json_t *meth = json_object_get(m, "method");
			if (json_is_string(meth) &&
			    !strcmp(json_string_value(meth), "initialize"))
				post_add(
				    p, rpc_error(json_object_get(m, "id"),
				                 RPC_INVALID_REQUEST,
				                 "Invalid Request: initialize "
				                 "cannot be in a batch"));
			else
				handle_message(p, m);
		}
	} else {
		handle_message(p, body);
	}
	json_decref(body);
	p->dispatching = false;
	if (p->pending && p->sse_ok) {
		/* long work ahead: stream the answers as they come */
		p->rl = relay_open(r, a->m->loop, NULL, &post_relay, p);
		p->streaming = true;
		size_t i;
		json_t *m;
		json_array_foreach(p->out, i, m)
		{
			if (p->rl)
				relay_event_json(p->rl, "message",
				                 json_incref(m));
		}
		json_array_clear(p->out);
		if (!p->rl)
			cancel_calls(s, call_of_post, p);
	} else if (p->pending) {
		http_suspend(r);
	}
	post_maybe_finish(p);
}

void api_mcp_handle(struct api *a, struct http_req *r, const char *tenant)
{
	if (!origin_ok(a, r)) {
		respond_error(a, r, 403, RPC_INVALID_REQUEST,
		              "Forbidden: this Origin may not use /mcp");
		return;
	}
	if (!strcmp(r->method, "POST")) {
		handle_post(a, r, tenant);
	} else if (!strcmp(r->method, "DELETE")) {
		const char *sid = http_header(r, "Mcp-Session-Id");
		struct mcp_session *s = sid ? sess_find(sid, tenant) : NULL;
		if (!sid) {
			respond_error(a, r, 400, RPC_NO_SESSION,
			              "Bad Request: Mcp-Session-Id header is "
			              "required");
			return;
		}
		if (!s) {
			respond_error(a, r, 404, RPC_SESSION_GONE,
			              "Session not found");
			return;
		}
		sess_close(a, s);
		http_respond_empty(r, 204);
	} else {
		/* no server-initiated messages: no GET stream (the transport
		 * lets a server answer 405) */
		const char *hdrs[] = {"Allow", "POST, DELETE", NULL};
		respond(a, r, 405,
		        rpc_error(NULL, RPC_INVALID_REQUEST,
		                  "Method Not Allowed: POST messages, DELETE "
		                  "the session"),
		        hdrs);
	}
}
