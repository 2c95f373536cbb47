/* What a client controls in a request: the method and URL (routing, room
 * and sandbox IDs) and a JSON body (the exec fields every /v1 exec and
 * process request goes through). Input: "METHOD URL\n<body>". */
#include <microhttpd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size + 1);
	if (!in)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	char *nl = memchr(in, '\n', size);
	size_t head = nl ? (size_t)(nl - in) : size;
	char *line = strndup(in, head);
	char *sp = line ? strchr(line, ' ') : NULL;
	if (sp) {
		*sp = '\0';
		struct route_match m = {0};
		bool wrong;
		router_find(line, sp + 1, &m, &wrong);
		if (!strncmp(sp + 1, "/api/rooms/", 11)) {
			const char *id = sp + 1 + 11;
			duet_room_id_problem(id, strcspn(id, "/"));
		}
	}
	free(line);
	/* the body, through the same validation /v1 exec uses; answers are
	 * made (and dropped) without a connection */
	struct http_req r = {.method = "POST", .url = "/v1/sandbox/f/exec"};
	buf_init(&r.body, 0);
	if (nl)
		buf_append(&r.body, nl + 1, size - head - 1);
	struct session *s = session_new("f", NULL, NULL, 0);
	json_t *body = v1_body(&r);
	if (body) {
		struct exec_params p;
		struct v1_hold hold;
		if (v1_exec_params(&r, body, NULL, s, &p, &hold) == 0)
			v1_exec_params_free(&hold);
		json_decref(body);
	}
	if (r.pending)
		MHD_destroy_response(r.pending);
	session_free(s);
	buf_free(&r.body);
	free(in);
	return 0;
}
