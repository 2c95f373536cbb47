/* The API surfaces and what they share. */
#ifndef SBX_API_H
#define SBX_API_H

#include <jansson.h>

#include "daemon/http.h"
#include "daemon/manager.h"
#include "lib/buf.h"

struct api {
	struct manager *m;
};

/* Routes every request (the http_handler of the server). */
void router_handle(struct http_req *r, void *data);

/* /api/rooms/...: rest is the path after "/api/rooms/". */
void api_duet_handle(struct api *a, struct http_req *r, const char *rest);

/* A JSON string of arbitrary bytes: invalid UTF-8 becomes U+FFFD. */
json_t *json_bytes(const char *data, size_t len);

#endif
