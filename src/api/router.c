/* Which handler answers a request. The /v1 surface is a table (which the
 * OpenAPI test walks, so the document can never miss a route); the Duet
 * room API keeps its own small dispatcher because its error shapes differ.
 * Authentication happens here, once, when the headers are in. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "api/ticket.h"
#include "api/ui/ui.h"
#include "core/fleet.h"
#include "lib/util.h"

const struct route api_routes[] = {
    {"GET", "/health", api_health, NULL},
    {"GET", "/metrics", api_metrics, NULL},
    {"GET", "/v1/openapi.json", api_openapi, NULL},
    {"POST", "/v1/admin/drain", v1_admin_drain, NULL},
    {"POST", "/v1/sandbox", v1_sandbox_create, NULL},
    {"GET", "/v1/sandbox", v1_sandbox_list, NULL},
    {"GET", "/v1/sandbox/{id}", v1_sandbox_info, NULL},
    {"DELETE", "/v1/sandbox/{id}", v1_sandbox_delete, NULL},
    {"GET", "/v1/sandbox/{id}/running", v1_sandbox_running, NULL},
    {"POST", "/v1/sandbox/{id}/stop", v1_sandbox_stop, NULL},
    {"POST", "/v1/sandbox/{id}/exec", v1_exec, NULL},
    {"GET", "/v1/sandbox/{id}/file/{path*}", v1_file_get, NULL},
    {"PUT", "/v1/sandbox/{id}/file/{path*}", NULL, v1_file_put},
    {"DELETE", "/v1/sandbox/{id}/file/{path*}", v1_file_delete, NULL},
    {"GET", "/v1/sandbox/{id}/watch/{path*}", v1_watch, NULL},
    {"POST", "/v1/sandbox/{id}/persist", v1_persist, NULL},
    {"POST", "/v1/sandbox/{id}/hydrate", NULL, v1_hydrate},
    {"POST", "/v1/sandbox/{id}/session", v1_session_create, NULL},
    {"DELETE", "/v1/sandbox/{id}/session/{sid}", v1_session_delete, NULL},
    {"POST", "/v1/sandbox/{id}/process", v1_process_start, NULL},
    {"GET", "/v1/sandbox/{id}/process", v1_process_list, NULL},
    {"GET", "/v1/sandbox/{id}/process/{pid}", v1_process_get, NULL},
    {"DELETE", "/v1/sandbox/{id}/process/{pid}", v1_process_kill, NULL},
    {"GET", "/v1/sandbox/{id}/process/{pid}/logs", v1_process_logs, NULL},
    {"GET", "/v1/sandbox/{id}/process/{pid}/stream", v1_process_stream, NULL},
    {"POST", "/v1/sandbox/{id}/process/{pid}/stdin", v1_process_stdin, NULL},
    {"POST", "/v1/sandbox/{id}/snapshot", v1_snapshot_create, NULL},
    {"POST", "/v1/sandbox/{id}/fork", v1_sandbox_fork, NULL},
    {"POST", "/v1/sandbox/{id}/restore", v1_sandbox_restore, NULL},
    {"POST", "/v1/sandbox/{id}/backup", v1_backup_create, NULL},
    {"GET", "/v1/backup", v1_backup_list, NULL},
    {"GET", "/v1/backup/{bid}", v1_backup_info, NULL},
    {"GET", "/v1/backup/{bid}/archive", v1_backup_archive, NULL},
    {"DELETE", "/v1/backup/{bid}", v1_backup_delete, NULL},
    {"POST", "/v1/image", v1_image_import, NULL},
    {"GET", "/v1/image", v1_image_list, NULL},
    {"GET", "/v1/image/{name*}", v1_image_info, NULL},
    {"PUT", "/v1/image/{name*}", NULL, v1_image_upload},
    {"DELETE", "/v1/image/{name*}", v1_image_delete, NULL},
    {"GET", "/v1/snapshot", v1_snapshot_list, NULL},
    {"GET", "/v1/snapshot/{sid}", v1_snapshot_info, NULL},
    {"DELETE", "/v1/snapshot/{sid}", v1_snapshot_delete, NULL},
    {"POST", "/v1/sandbox/{id}/contexts", v1_context_create, NULL},
    {"GET", "/v1/sandbox/{id}/contexts", v1_context_list, NULL},
    {"GET", "/v1/sandbox/{id}/contexts/{cid}", v1_context_get, NULL},
    {"DELETE", "/v1/sandbox/{id}/contexts/{cid}", v1_context_delete, NULL},
    {"POST", "/v1/sandbox/{id}/contexts/{cid}/run", v1_context_run, NULL},
    {"GET", "/v1/sandbox/{id}/network", v1_network_get, NULL},
    {"PUT", "/v1/sandbox/{id}/network", v1_network_put, NULL},
    {"POST", "/v1/sandbox/{id}/port/{port}/expose", v1_port_expose, NULL},
    {"DELETE", "/v1/sandbox/{id}/port/{port}/expose", v1_port_expose, NULL},
    {"GET", "/v1/sandbox/{id}/pty", v1_pty, NULL},
    {"POST", "/v1/sandbox/{id}/pty/ticket", v1_pty_ticket, NULL},
};
const size_t api_nroutes = sizeof(api_routes) / sizeof(api_routes[0]);

/* Match path against pattern, filling m->params. */
static bool match(const char *pattern, const char *path, struct route_match *m)
{
	size_t used = 0;
	int np = 0;
	const char *p = pattern, *u = path;
	while (*p) {
		if (*p != '{') {
			if (*p != *u)
				return false;
			p++;
			u++;
			continue;
		}
		const char *close = strchr(p, '}');
		bool rest = close[-1] == '*';
		size_t len = rest ? strlen(u) : strcspn(u, "/");
		/* "{x*}" may be empty (".../file/" names /workspace) */
		if ((len == 0 && !rest) || used + len + 1 > sizeof(m->buf) ||
		    np == ROUTE_MAX_PARAMS)
			return false;
		memcpy(m->buf + used, u, len);
		m->buf[used + len] = '\0';
		m->params[np++] = m->buf + used;
		used += len + 1;
		u += len;
		p = close + 1;
	}
	return *u == '\0';
}

const struct route *router_find(const char *method, const char *url,
                                struct route_match *m, bool *wrong_method)
{
	*wrong_method = false;
	for (size_t i = 0; i < api_nroutes; i++) {
		if (!match(api_routes[i].pattern, url, m))
			continue;
		if (!strcmp(api_routes[i].method, method) ||
		    (!strcmp(method, "HEAD") &&
		     !strcmp(api_routes[i].method, "GET")))
			return &api_routes[i];
		*wrong_method = true;
	}
	return NULL;
}

static const struct route *find(struct http_req *r, struct route_match *m,
                                bool *wrong_method)
{
	return router_find(r->method, r->url, m, wrong_method);
}

static const char preview[] = "/v1/preview/";

static bool needs_auth(const char *url)
{
	/* an exposed link is its own credential */
	if (!strncmp(url, preview, sizeof(preview) - 1))
		return false;
	return !strncmp(url, "/v1/", 4) || !strcmp(url, "/v1") ||
	       !strncmp(url, "/api/", 5) || !strcmp(url, "/mcp");
}

/* GET /v1/sandbox/{id}/pty?ticket=...: the tenant the ticket names, if
 * it is one for this sandbox (ticket.h); it is used up either way. */
static const char *ticket_tenant(struct http_req *r)
{
	static const char prefix[] = "/v1/sandbox/", suffix[] = "/pty";
	const char *ticket = http_query(r, "ticket");
	size_t ul = strlen(r->url), pl = sizeof(prefix) - 1,
	       sl = sizeof(suffix) - 1;
	char id[64];
	if (!ticket || strcmp(r->method, "GET") || ul <= pl + sl ||
	    strncmp(r->url, prefix, pl) || strcmp(r->url + ul - sl, suffix) ||
	    ul - pl - sl >= sizeof(id))
		return NULL;
	memcpy(id, r->url + pl, ul - pl - sl);
	id[ul - pl - sl] = '\0';
	return strchr(id, '/') ? NULL : ticket_take(ticket, id);
}

/* The caller's tenant; NULL after answering 401. */
static const char *tenant_of(struct api *a, struct http_req *r)
{
	if (!a->auth || !needs_auth(r->url) ||
	    !strcmp(r->url, "/v1/openapi.json"))
		return "";
	const char *authz = http_header(r, "Authorization");
	if (!authz) {
		const char *t = ticket_tenant(r);
		if (t)
			return t;
	}
	const char *t = auth_tenant(a->auth, authz);
	if (!t)
		v1_error(r, 401, "unauthorized",
		         "missing or invalid bearer token");
	return t;
}

/* /v1/sandbox/{id}/api/...: the Cloudflare container protocol, served per
 * sandbox (api_cf.c); *rest gets the part from "/api/" on. */
static bool cf_match(struct http_req *r, struct route_match *m,
                     const char **rest)
{
	static const char prefix[] = "/v1/sandbox/";
	if (strncmp(r->url, prefix, sizeof(prefix) - 1))
		return false;
	const char *id = r->url + sizeof(prefix) - 1;
	const char *slash = strchr(id, '/');
	if (!slash || strncmp(slash, "/api/", 5) || slash == id ||
	    (size_t)(slash - id) >= sizeof(m->buf))
		return false;
	memcpy(m->buf, id, (size_t)(slash - id));
	m->buf[slash - id] = '\0';
	m->params[0] = m->buf;
	*rest = slash;
	return true;
}

/* What router_begin decided for a request, kept for router_handle: the
 * tenant is authenticated and the route matched once per request. */
enum begin_kind { BEGIN_NONE, BEGIN_E2B, BEGIN_CF, BEGIN_RT };

struct routed {
	struct route_match m;
	/* a fleet's node: the sandbox the request is about, and the claim
	 * it waits for (core/fleet.h) */
	char fleet_id[64];
	struct fleet_gate *gate;
	bool claimed;
	enum begin_kind begin;  /* a streamed body's begin, held by a claim */
	bool port;              /* the port proxy: params id, port, rest */
	bool link;              /* an exposed link: params token, rest */
	const struct route *rt; /* NULL: cf, duet or no route */
	const char *cf_rest;    /* the Cloudflare protocol: path from /api/ */
	bool e2b;               /* E2B's (api/e2b/): it authenticates */
	bool wrong_method;
};

static const char rooms[] = "/api/rooms/";

/* Put up to three slash-separated parts of s (the last one: the rest,
 * with its slash) in m; false when they do not fit or one is empty. */
static bool split_params(const char *s, int nparts, struct route_match *m)
{
	size_t used = 0;
	for (int i = 0; i < nparts; i++) {
		size_t len = i == nparts - 1 ? strlen(s) : strcspn(s, "/");
		if ((len == 0 && i < nparts - 1) ||
		    used + len + 1 > sizeof(m->buf))
			return false;
		memcpy(m->buf + used, s, len);
		m->buf[used + len] = '\0';
		m->params[i] = m->buf + used;
		used += len + 1;
		s += len;
		if (i < nparts - 2) {
			if (*s != '/')
				return false;
			s++;
		}
	}
	return true;
}

/* /v1/sandbox/{id}/port/{port}[/rest] */
static bool port_match(const char *url, struct route_match *m)
{
	static const char prefix[] = "/v1/sandbox/";
	if (strncmp(url, prefix, sizeof(prefix) - 1))
		return false;
	const char *id = url + sizeof(prefix) - 1, *slash = strchr(id, '/');
	if (!slash || strncmp(slash, "/port/", 6) || slash == id)
		return false;
	char tmp[4096];
	int n = snprintf(tmp, sizeof(tmp), "%.*s/%s", (int)(slash - id), id,
	                 slash + 6);
	return n > 0 && (size_t)n < sizeof(tmp) && split_params(tmp, 3, m) &&
	       (!m->params[2][0] || m->params[2][0] == '/');
}

/* Host {port}-{id}.<preview domain>: params id, port, rest. */
static bool preview_match(struct api *a, struct http_req *r,
                          struct route_match *m)
{
	const char *dom = a->m->cfg->preview_domain,
	           *host = http_header(r, "Host");
	if (!dom || !host)
		return false;
	size_t hl = strcspn(host, ":"), dl = strlen(dom);
	if (hl <= dl + 1 || host[hl - dl - 1] != '.' ||
	    strncasecmp(host + hl - dl, dom, dl))
		return false;
	const char *dash = memchr(host, '-', hl - dl - 1);
	size_t idl = hl - dl - 1 - (size_t)(dash ? dash - host + 1 : 0);
	if (!dash || dash == host || idl == 0 || idl > 63 ||
	    strlen(r->url) + 80 > sizeof(m->buf))
		return false;
	int n = snprintf(m->buf, sizeof(m->buf), "%.*s", (int)idl, dash + 1);
	m->params[0] = m->buf;
	m->params[1] = m->buf + n + 1;
	n +=
	    1 + snprintf(m->buf + n + 1, 8, "%.*s",
	                 (int)(dash - host) < 7 ? (int)(dash - host) : 7, host);
	m->params[2] = m->buf + n + 1;
	snprintf(m->buf + n + 1, sizeof(m->buf) - (size_t)n - 1, "%s", r->url);
	for (char *c = (char *)m->params[0]; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	return true;
}

/* ---- a fleet's node: serve only the sandboxes this node holds ---- */

struct fleet_gate {
	struct api *a;
	struct http_req *r;
	struct fleet_claim *c;
	bool body_ended;
};

/* The segment after pre in url, if url starts with it. */
static bool url_segment(const char *url, const char *pre, char *out, size_t cap)
{
	size_t pl = strlen(pre);
	if (strncmp(url, pre, pl))
		return false;
	size_t n = strcspn(url + pl, "/");
	if (!n || n >= cap)
		return false;
	memcpy(out, url + pl, n);
	out[n] = '\0';
	return true;
}

/* Which sandbox ID the request names, wherever its face carries it
 * (contrib/haproxy/sandboxd.cfg hashes the same places). */
static bool fleet_id_of(struct http_req *r, struct routed *d)
{
	char *id = d->fleet_id, room[56]; /* "sandbox-" + 55 */
	size_t cap = sizeof(d->fleet_id);
	const char *h = http_header(r, "E2b-Sandbox-Id");
	id[0] = '\0';
	if (h)
		snprintf(id, cap, "%s", h);
	else if (d->port && d->m.params[0] && strncmp(r->url, "/v1/", 4))
		snprintf(id, cap, "%s", d->m.params[0]); /* preview domain */
	else if (url_segment(r->url, "/v1/sandbox/", id, cap) ||
	         url_segment(r->url, "/sandboxes/", id, cap) ||
	         url_segment(r->url, "/v2/sandboxes/", id, cap))
		;
	else if (url_segment(r->url, rooms, room, sizeof(room)))
		snprintf(id, cap, "sandbox-%s", room);
	else if (!strcmp(r->url, "/mcp") && http_query(r, "sandbox"))
		snprintf(id, cap, "%s", http_query(r, "sandbox"));
	return id[0] && sandbox_id_valid(id);
}

static void put_escaped(struct buf *b, const char *s, bool query)
{
	for (const char *u = s; *u; u++) {
		unsigned char c = (unsigned char)*u;
		if (c <= ' ' || c >= 0x7f || c == '%' || c == '?' || c == '#' ||
		    (query && (c == '&' || c == '=' || c == '+'))) {
			char esc[4];
			snprintf(esc, sizeof(esc), "%%%02X", c);
			buf_append(b, esc, 3);
		} else {
			buf_append(b, u, 1);
		}
	}
}

static int put_arg(void *ctx, const char *name, const char *value)
{
	struct buf *b = ctx;
	buf_append(b, b->data && memchr(b->data, '?', b->len) ? "&" : "?", 1);
	put_escaped(b, name, true);
	if (value) {
		buf_append(b, "=", 1);
		put_escaped(b, value, true);
	}
	return 0;
}

/* The Location of the same request on the node at base (a copy). */
static char *moved_to(struct http_req *r, const char *base)
{
	struct buf b;
	buf_init(&b, 0);
	size_t l = strlen(base);
	while (l && base[l - 1] == '/')
		l--;
	buf_append(&b, base, l);
	put_escaped(&b, r->url, false);
	http_foreach(r, true, put_arg, &b);
	char *s = strdup(buf_cstr(&b));
	buf_free(&b);
	return s;
}

static void gate_free(struct http_req *r)
{
	struct routed *d = r->route;
	if (d && d->gate) {
		fleet_claim_cancel(d->gate->c);
		free(d->gate);
		d->gate = NULL;
	}
}

static void gate_closed(struct http_req *r)
{
	gate_free(r);
}

static void dispatch(struct api *a, struct http_req *r, struct routed *d);
static void begin_route(struct api *a, struct http_req *r, struct routed *d);

static size_t gate_body(struct http_req *r, const char *data, size_t len)
{
	(void)r;
	(void)data;
	(void)len;
	return 0; /* wait for the claim */
}

static void gate_body_end(struct http_req *r)
{
	struct routed *d = r->route;
	if (d->gate)
		d->gate->body_ended = true;
}

/* the manager is gone: the daemon is stopping */
static void shutting_down(struct http_req *r)
{
	http_respond_json(r, 503,
	                  json_pack("{s:s, s:s}", "error",
	                            "sandboxd is shutting down", "code",
	                            "unavailable"));
}

static void claimed(void *ctx, enum fleet_where w, const char *url,
                    const struct sbx_err *err)
{
	struct fleet_gate *g = ctx;
	struct http_req *r = g->r;
	struct api *a = g->a;
	struct routed *d = r->route;
	bool at_begin = d->begin != BEGIN_NONE, ended = g->body_ended;
	d->gate = NULL;
	free(g);
	r->on_close = NULL;
	/* answered now, a body still coming is dropped (gate_body stays) */
	if (w == FLEET_THERE) {
		char *loc = moved_to(r, url);
		json_t *body =
		    json_pack("{s:s, s:s, s:s}", "error",
		              "this sandbox is served by another "
		              "node",
		              "code", "moved", "location", loc ? loc : "");
		http_respond_json_headers(
		    r, 307, body,
		    (const char *const[]){"Location", loc ? loc : "", NULL});
		free(loc);
		return;
	}
	if (w == FLEET_FAIL) {
		v1_error(r, 503,
		         err && err->code == EAGAIN ? "draining"
		                                    : "unavailable",
		         "%s",
		         err ? err->msg
		             : "the fleet cannot say who serves "
		               "this sandbox");
		return;
	}
	d->claimed = true;
	if (!a->m) {
		shutting_down(r);
		return;
	}
	if (at_begin) {
		r->on_body = NULL;
		r->on_body_end = NULL;
		begin_route(a, r, d);
		if (r->answered)
			return;
		if (ended) {
			if (r->on_body_end)
				r->on_body_end(r);
			else
				dispatch(a, r, d);
		} else {
			http_resume(r);
		}
		return;
	}
	dispatch(a, r, d);
}

/* 1: serve it now; 0: the claim answers (the request is suspended). */
static int gate(struct api *a, struct http_req *r, struct routed *d)
{
	if (!a->m || !a->m->fleet || d->claimed || !d->fleet_id[0])
		return 1;
	struct fleet_gate *g = calloc(1, sizeof(*g));
	if (!g) {
		http_respond_text(r, 500, "out of memory\n");
		return 0;
	}
	g->a = a;
	g->r = r;
	d->gate = g;
	struct fleet_claim *c = NULL;
	int rc = fleet_claim(a->m->fleet, d->fleet_id, claimed, g, &c);
	if (rc == 1) {
		d->gate = NULL;
		free(g);
		d->claimed = true;
		return 1;
	}
	if (d->gate == g) { /* not answered yet */
		g->c = c;
		r->on_close = gate_closed;
		http_suspend(r);
	}
	return 0;
}

static void begin_route(struct api *a, struct http_req *r, struct routed *d)
{
	switch (d->begin) {
	case BEGIN_E2B:
		api_e2b_begin(a, r);
		break;
	case BEGIN_CF:
		api_cf_begin(a, r, &d->m, d->cf_rest);
		break;
	case BEGIN_RT:
		d->rt->begin(a, r, &d->m);
		break;
	case BEGIN_NONE:
		break;
	}
}

/* A streamed body's begin, unless a claim must come first: then the
 * body waits (gate_body takes none of it) until the claim answers. */
static void begin_gated(struct api *a, struct http_req *r, struct routed *d,
                        enum begin_kind k)
{
	d->begin = k;
	if (!a->m->fleet || !fleet_id_of(r, d)) {
		begin_route(a, r, d);
		return;
	}
	r->on_body = gate_body;
	r->on_body_end = gate_body_end;
	if (gate(a, r, d)) {
		r->on_body = NULL;
		r->on_body_end = NULL;
		begin_route(a, r, d);
	}
}

void router_begin(struct http_req *r, void *data)
{
	struct api *a = data;
	a->metrics.requests++;
	if (!a->m)
		return; /* shutting down: router_handle answers */
	struct routed *d = calloc(1, sizeof(*d));
	if (!d)
		return; /* router_handle answers 500 */
	r->route = d;
	if (api_e2b_match(r)) {
		d->e2b = true;
		d->m.tenant = "";
		begin_gated(a, r, d, BEGIN_E2B);
		return;
	}
	if (preview_match(a, r, &d->m)) {
		/* a preview domain's request: the same bearer token as the
		 * /v1 path when the daemon has tokens */
		d->port = true;
		d->m.tenant =
		    !a->auth
		        ? ""
		        : auth_tenant(a->auth, http_header(r, "Authorization"));
		if (!d->m.tenant)
			v1_error(r, 401, "unauthorized",
			         "missing or invalid bearer token");
		return;
	}
	if (!(d->m.tenant = tenant_of(a, r)))
		return;
	if (!strncmp(r->url, preview, sizeof(preview) - 1)) {
		d->link =
		    split_params(r->url + sizeof(preview) - 1, 2, &d->m) &&
		    (!d->m.params[1][0] || d->m.params[1][0] == '/');
		return;
	}
	if (cf_match(r, &d->m, &d->cf_rest)) {
		begin_gated(a, r, d, BEGIN_CF);
		return;
	}
	if (!strncmp(r->url, rooms, sizeof(rooms) - 1) ||
	    !strcmp(r->url, "/mcp"))
		return;
	d->rt = find(r, &d->m, &d->wrong_method);
	if (!d->rt && port_match(r->url, &d->m)) {
		d->port = true;
		d->wrong_method = false;
	}
	if (d->rt && d->rt->begin)
		begin_gated(a, r, d, BEGIN_RT);
}

void router_handle(struct http_req *r, void *data)
{
	struct api *a = data;
	struct routed *d = r->route;

	if (!a->m) {
		shutting_down(r);
		return;
	}
	if (!d) {
		http_respond_text(r, 500, "out of memory\n");
		return;
	}
	if (!d->m.tenant)
		return; /* answered 401 in router_begin */
	if (a->m->fleet && !d->claimed) {
		/* POST /v1/sandbox names its sandbox in the body */
		json_t *j = NULL;
		if (!strcmp(r->method, "POST") &&
		    !strcmp(r->url, "/v1/sandbox") && r->body.len &&
		    (j = json_loadb(r->body.data, r->body.len, 0, NULL)) &&
		    json_is_string(json_object_get(j, "id")))
			snprintf(d->fleet_id, sizeof(d->fleet_id), "%s",
			         json_string_value(json_object_get(j, "id")));
		else
			fleet_id_of(r, d);
		json_decref(j);
		if (!sandbox_id_valid(d->fleet_id))
			d->fleet_id[0] = '\0';
		if (!gate(a, r, d))
			return;
	}
	dispatch(a, r, d);
}

static void dispatch(struct api *a, struct http_req *r, struct routed *d)
{
	if (d->e2b) {
		api_e2b_handle(a, r);
		return;
	}
	if (strstr(r->url, "%00")) { /* a NUL never names anything here */
		if (!strncmp(r->url, "/v1/", 4))
			v1_error(r, 404, "not_found", "no such endpoint");
		else
			http_respond_text(r, 404, "404 page not found\n");
		return;
	}
	if (!strncmp(r->url, rooms, sizeof(rooms) - 1)) {
		api_duet_handle(a, r, d->m.tenant, r->url + sizeof(rooms) - 1);
		return;
	}
	if (!strncmp(r->url, "/ui", 3) && (!r->url[3] || r->url[3] == '/')) {
		api_ui_handle(r);
		return;
	}
	if (!strcmp(r->url, "/mcp")) {
		api_mcp_handle(a, r, d->m.tenant);
		return;
	}
	if (d->cf_rest) {
		api_cf_handle(a, r, &d->m, d->cf_rest);
		return;
	}
	if (d->port) {
		v1_port_proxy(a, r, d->m.tenant, d->m.params[0], d->m.params[1],
		              d->m.params[2]);
		return;
	}
	if (d->link) {
		v1_port_preview(a, r, d->m.params[0], d->m.params[1]);
		return;
	}
	if (d->rt && d->rt->handle) {
		d->rt->handle(a, r, &d->m);
		return;
	}
	bool v1 = !strncmp(r->url, "/v1/", 4) || !strcmp(r->url, "/v1");
	if (d->wrong_method && v1)
		v1_error(r, 405, "method_not_allowed",
		         "%s is not allowed on %s", r->method, r->url);
	else if (d->wrong_method)
		http_respond_json(
		    r, 405, json_pack("{s:s}", "error", "method not allowed"));
	else if (v1)
		v1_error(r, 404, "not_found", "no such endpoint: %s %s",
		         r->method, r->url);
	else
		http_respond_text(r, 404, "404 page not found\n");
}
