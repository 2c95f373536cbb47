/* The Cloudflare container protocol (shared/spec/cf-container.md), served
 * per sandbox under /v1/sandbox/{id}/api/..., so that the official
 * @cloudflare/sandbox SandboxClient drives a sandboxd sandbox. Same
 * sessions, processes and files as /v1: a second face, not a second
 * engine. */
#include <string.h>

#include "daemon/api.h"
#include "lib/util.h"

static void cf_error(struct http_req *r, unsigned status, const char *code,
		     const char *message)
{
	char ts[32];
	iso8601_ms(now_wall_ms(), ts, sizeof(ts));
	http_respond_json(r, status,
			  json_pack("{s:s, s:s, s:{}, s:i, s:s}", "code", code,
				    "message", message, "context", "httpStatus",
				    (int)status, "timestamp", ts));
}

void api_cf_begin(struct api *a, struct http_req *r, struct route_match *m,
		  const char *rest)
{
	(void)a;
	(void)r;
	(void)m;
	(void)rest;
}

void api_cf_handle(struct api *a, struct http_req *r, struct route_match *m,
		   const char *rest)
{
	char ts[32];
	(void)a;
	(void)m;
	iso8601_ms(now_wall_ms(), ts, sizeof(ts));
	if (!strcmp(rest, "/api/ping") && !strcmp(r->method, "GET")) {
		http_respond_json(r, 200, json_pack("{s:b, s:s, s:s}", "success", 1,
						    "status", "healthy",
						    "timestamp", ts));
		return;
	}
	cf_error(r, 404, "UNKNOWN_ERROR", "unknown route");
}
