#include "http/sse.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"
#include "lib/buf.h"

const char *const sse_headers[] = {
    "Cache-Control",
    "no-cache",
    /* proxies (nginx) must pass events on as they come */
    "X-Accel-Buffering",
    "no",
    NULL,
};

int sse_event(struct http_stream *s, const char *event, const char *id,
              const char *data)
{
	struct buf b;
	buf_init(&b, 0);
	if (event)
		buf_printf(&b, "event: %s\n", event);
	if (id)
		buf_printf(&b, "id: %s\n", id);
	buf_printf(&b, "data: %s\n\n", data);
	int r = http_stream_write(s, b.data, b.len);
	buf_free(&b);
	return r;
}

int sse_event_b64(struct http_stream *s, const char *event, uint64_t id,
                  const char *bytes, size_t len)
{
	char *enc = malloc(base64_encoded_len(len) + 1);
	char idbuf[32];
	if (!enc)
		return 1;
	base64_encode(bytes, len, enc);
	snprintf(idbuf, sizeof(idbuf), "%" PRIu64, id);
	int r = sse_event(s, event, id == UINT64_MAX ? NULL : idbuf, enc);
	free(enc);
	return r;
}

int sse_comment(struct http_stream *s, const char *text)
{
	struct buf b;
	buf_init(&b, 0);
	buf_printf(&b, ": %s\n\n", text);
	int r = http_stream_write(s, b.data, b.len);
	buf_free(&b);
	return r;
}
