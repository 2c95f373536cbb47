/* /v1 terminals: GET /v1/sandbox/{id}/pty (WebSocket) and the tickets
 * that let a browser open it (POST /v1/sandbox/{id}/pty/ticket).
 *
 * A client's frames: binary = keystrokes, text = JSON
 * {"type":"resize","cols":N,"rows":N}. Ours: binary = the terminal's
 * output (first the replay of its last 256 KiB), text = {"type":"ready"}
 * once attached, {"type":"exit","code":N} when the shell ends,
 * {"type":"error","message":"..."}. The terminal (core/terminal.c) is
 * shared: every client of a session's terminal sees the same screen.
 *
 * The Origin check: a web page may open a WebSocket to any address,
 * loopback included, and the browser sends no token it was not given;
 * but a daemon without tokens (loopback only) has nothing to check, so
 * without this any page a user visits could open a shell. A browser
 * always sends Origin on a WebSocket: when it is there it must be this
 * daemon's own (scheme://Host), as the console's is. Clients that are
 * not browsers send none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "api/ticket.h"
#include "core/terminal.h"
#include "http/ws.h"
#include "lib/log.h"
#include "lib/util.h"

struct pty_client {
	struct ws *ws;
	struct terminal_client *tc;
	char sandbox[64];
};

static void send_json(struct pty_client *c, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (s)
		ws_send(c->ws, true, s, strlen(s));
	free(s);
}

static void send_error(struct pty_client *c, const char *msg)
{
	send_json(c, json_pack("{s:s, s:s}", "type", "error", "message", msg));
}

/* ---- from the terminal -------------------------------------------------- */

static int term_output(void *ctx, const char *data, size_t len)
{
	struct pty_client *c = ctx;
	return ws_send(c->ws, false, data, len);
}

static void term_exited(void *ctx, int code, const char *why)
{
	struct pty_client *c = ctx;
	c->tc = NULL;
	if (why)
		send_error(c, why);
	send_json(c, json_pack("{s:s, s:i}", "type", "exit", "code", code));
	ws_close(c->ws, WS_CLOSE_NORMAL, "the shell ended");
}

static void term_dropped(void *ctx)
{
	struct pty_client *c = ctx;
	c->tc = NULL;
	log_info("sandbox=%s event=pty-client-dropped pending=%zu", c->sandbox,
	         ws_pending(c->ws));
	ws_close(c->ws, WS_CLOSE_TOO_SLOW,
	         "too slow: the client did not read the terminal's output");
}

static const struct terminal_client_ops term_ops = {
    .output = term_output,
    .exited = term_exited,
    .dropped = term_dropped,
};

/* ---- from the client ---------------------------------------------------- */

static bool dim_ok(json_t *v, unsigned *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > 1000)
		return false;
	*out = (unsigned)json_integer_value(v);
	return true;
}

static void on_message(void *ctx, bool text, const char *data, size_t len)
{
	struct pty_client *c = ctx;
	if (!c->tc)
		return;
	if (!text) {
		int r = terminal_input(c->tc, data, len);
		if (r == -ENOBUFS)
			send_error(c,
			           "input dropped: the terminal has not read "
			           "the previous 64 KiB yet");
		return;
	}
	json_error_t jerr;
	json_t *j = json_loadb(data, len, 0, &jerr);
	const char *type = json_string_value(json_object_get(j, "type"));
	unsigned cols, rows;
	if (type && !strcmp(type, "resize")) {
		if (dim_ok(json_object_get(j, "cols"), &cols) &&
		    dim_ok(json_object_get(j, "rows"), &rows))
			terminal_resize(c->tc, cols, rows);
		else
			send_error(c, "resize needs cols and rows, integers "
			              "from 1 to 1000");
	} else {
		send_error(c, "unknown message: text frames are JSON "
		              "{\"type\":\"resize\",\"cols\":N,\"rows\":N}; "
		              "keystrokes go in binary frames");
	}
	json_decref(j);
}

static void on_drain(void *ctx)
{
	struct pty_client *c = ctx;
	if (c->tc)
		terminal_client_resume(c->tc);
}

static void on_closed(void *ctx, unsigned code)
{
	struct pty_client *c = ctx;
	(void)code;
	if (c->tc)
		terminal_detach(c->tc);
	free(c);
}

static const struct ws_ops ws_ops = {
    .message = on_message,
    .drain = on_drain,
    .closed = on_closed,
};

/* ---- the requests ------------------------------------------------------- */

/* Origin absent (not a browser), or the daemon's own. */
static bool origin_ok(struct http_req *r)
{
	const char *origin = http_header(r, "Origin");
	const char *host = http_header(r, "Host");
	if (!origin)
		return true;
	const char *auth = !strncasecmp(origin, "http://", 7)    ? origin + 7
	                   : !strncasecmp(origin, "https://", 8) ? origin + 8
	                                                         : NULL;
	return auth && host && *host && !strcasecmp(auth, host);
}

/* A query number from 1 to 1000, or 0 when absent; -1: bad. */
static int query_dim(struct http_req *r, const char *name)
{
	const char *v = http_query(r, name);
	char *end;
	if (!v)
		return 0;
	long n = strtol(v, &end, 10);
	return *v && !*end && n >= 1 && n <= 1000 ? (int)n : -1;
}

/* A shell is a path or a command name: printable, no spaces. */
static bool shell_ok(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > 255)
		return false;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return false;
	return true;
}

void v1_pty(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sbx_err err = {0};
	const char *problem = ws_handshake_problem(r);
	if (problem) {
		v1_error(r, 400, "websocket_required", "%s", problem);
		return;
	}
	if (!origin_ok(r)) {
		v1_error(r, 403, "origin_not_allowed",
		         "a WebSocket from %s may not open this daemon's "
		         "terminals (only pages it serves itself may)",
		         http_header(r, "Origin"));
		return;
	}
	int cols = query_dim(r, "cols"), rows = query_dim(r, "rows");
	if (cols < 0 || rows < 0) {
		v1_error(r, 400, "invalid_request",
		         "cols and rows must be integers from 1 to 1000");
		return;
	}
	const char *shell = http_query(r, "shell");
	if (shell && !shell_ok(shell)) {
		v1_error(r, 400, "invalid_request",
		         "shell must be a path or a command name (printable, "
		         "no spaces, at most 255 characters)");
		return;
	}
	struct sandbox *sb = v1_sandbox_to_run(a, r, m);
	if (!sb)
		return;
	/* browsers cannot set Session-Id on a WebSocket: ?session= too */
	const char *sid = http_query(r, "session");
	if (!sid || !*sid)
		sid = http_header(r, "Session-Id");
	if (sid && !*sid)
		sid = NULL;
	if (!sandbox_session(sb, sid)) {
		v1_error(r, 404, "session_not_found", "no session %s", sid);
		return;
	}
	struct terminal_opts o = {
	    .shell = shell, .cols = (unsigned)cols, .rows = (unsigned)rows};
	struct terminal *t;
	if (terminal_open(sb, sid, &o, &t, &err) < 0) {
		v1_error_of(r, &err, v1_create_errs);
		return;
	}
	struct pty_client *c = calloc(1, sizeof(*c));
	if (!c) {
		v1_error(r, 500, "internal", "out of memory");
		return;
	}
	snprintf(c->sandbox, sizeof(c->sandbox), "%s", sandbox_id(sb));
	if (!(c->ws = ws_accept(r, a->m->loop, &ws_ops, c))) {
		free(c);
		return;
	}
	send_json(c, json_pack("{s:s}", "type", "ready"));
	if (!(c->tc = terminal_attach(t, &term_ops, c))) {
		send_error(c, "out of memory");
		ws_close(c->ws, 1011, "out of memory");
		return;
	}
	/* a new size from a joining client applies to the shared screen */
	if (cols && rows)
		terminal_resize(c->tc, (unsigned)cols, (unsigned)rows);
}

void v1_pty_ticket(struct api *a, struct http_req *r, struct route_match *m)
{
	char ticket[TICKET_LEN + 1], exp[32];
	(void)a;
	if (!sandbox_id_valid(m->params[0])) {
		v1_error(r, 400, "invalid_request",
		         "sandbox id must be 1-63 characters of [a-z0-9-]");
		return;
	}
	uint64_t expires = ticket_new(m->tenant, m->params[0], ticket);
	if (!expires) {
		v1_error(r, 500, "internal", "out of memory");
		return;
	}
	iso8601_ms(expires, exp, sizeof(exp));
	http_respond_json(r, 201,
	                  json_pack("{s:s, s:s, s:i}", "ticket", ticket,
	                            "expiresAt", exp, "ttlSeconds",
	                            (int)(TICKET_TTL_MS / 1000)));
}
