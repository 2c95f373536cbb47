/* Which surface answers a request: /health, the Duet room API, and a plain
 * 404 for everything else. */
#include <stdlib.h>
#include <string.h>

#include "daemon/api.h"
#include "lib/util.h"

json_t *json_bytes(const char *data, size_t len)
{
	if (!len)
		return json_string("");
	if (utf8_valid(data, len))
		return json_stringn_nocheck(data, len);
	char *clean = malloc(len * 3 + 1);
	if (!clean)
		return NULL;
	size_t n = utf8_sanitize(data, len, clean);
	json_t *j = json_stringn_nocheck(clean, n);
	free(clean);
	return j;
}

void router_handle(struct http_req *r, void *data)
{
	struct api *a = data;
	static const char rooms[] = "/api/rooms/";

	if (!strcmp(r->url, "/health")) {
		if (strcmp(r->method, "GET") && strcmp(r->method, "HEAD"))
			http_respond_json(r, 405, json_pack("{s:s}", "error",
					  "method not allowed - only GET is supported"));
		else
			http_respond_text(r, 200, "ok");
		return;
	}
	if (!strncmp(r->url, rooms, sizeof(rooms) - 1)) {
		api_duet_handle(a, r, r->url + sizeof(rooms) - 1);
		return;
	}
	http_respond_text(r, 404, "404 page not found\n");
}
