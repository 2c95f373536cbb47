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
#include "lib/util.h"

const struct route api_routes[] = {
	{"GET", "/health", api_health, NULL},
	{"GET", "/metrics", api_metrics, NULL},
	{"GET", "/v1/openapi.json", api_openapi, NULL},
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
struct routed {
	struct route_match m;
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
		if ((len == 0 && i < nparts - 1) || used + len + 1 > sizeof(m->buf))
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
	const char *dom = a->m->cfg->preview_domain, *host = http_header(r, "Host");
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
	n += 1 + snprintf(m->buf + n + 1, 8, "%.*s",
			  (int)(dash - host) < 7 ? (int)(dash - host) : 7, host);
	m->params[2] = m->buf + n + 1;
	snprintf(m->buf + n + 1, sizeof(m->buf) - (size_t)n - 1, "%s", r->url);
	for (char *c = (char *)m->params[0]; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	return true;
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
		api_e2b_begin(a, r);
		return;
	}
	if (preview_match(a, r, &d->m)) {
		/* a preview domain's request: the same bearer token as the
		 * /v1 path when the daemon has tokens */
		d->port = true;
		d->m.tenant = !a->auth ? "" : auth_tenant(a->auth, http_header(r, "Authorization"));
		if (!d->m.tenant)
			v1_error(r, 401, "unauthorized",
				 "missing or invalid bearer token");
		return;
	}
	if (!(d->m.tenant = tenant_of(a, r)))
		return;
	if (!strncmp(r->url, preview, sizeof(preview) - 1)) {
		d->link = split_params(r->url + sizeof(preview) - 1, 2, &d->m) &&
			  (!d->m.params[1][0] || d->m.params[1][0] == '/');
		return;
	}
	if (cf_match(r, &d->m, &d->cf_rest)) {
		api_cf_begin(a, r, &d->m, d->cf_rest);
		return;
	}
	if (!strncmp(r->url, rooms, sizeof(rooms) - 1) || !strcmp(r->url, "/mcp"))
		return;
	d->rt = find(r, &d->m, &d->wrong_method);
	if (!d->rt && port_match(r->url, &d->m)) {
		d->port = true;
		d->wrong_method = false;
	}
	if (d->rt && d->rt->begin)
		d->rt->begin(a, r, &d->m);
}

void router_handle(struct http_req *r, void *data)
{
	struct api *a = data;
	struct routed *d = r->route;

	if (!a->m) {
		http_respond_json(r, 503, json_pack("{s:s, s:s}", "error",
						    "sandboxd is shutting down",
						    "code", "unavailable"));
		return;
	}
	if (!d) {
		http_respond_text(r, 500, "out of memory\n");
		return;
	}
	if (!d->m.tenant)
		return; /* answered 401 in router_begin */
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
		v1_error(r, 405, "method_not_allowed", "%s is not allowed on %s",
			 r->method, r->url);
	else if (d->wrong_method)
		http_respond_json(r, 405, json_pack("{s:s}", "error",
						    "method not allowed"));
	else if (v1)
		v1_error(r, 404, "not_found", "no such endpoint: %s %s",
			 r->method, r->url);
	else
		http_respond_text(r, 404, "404 page not found\n");
}
