/* Server-sent events on an http_stream. */
#ifndef SBX_SSE_H
#define SBX_SSE_H

#include <stddef.h>
#include <stdint.h>

#include "http/http.h"

/* The headers an SSE response goes out with. */
extern const char *const sse_headers[];

/* "event: <event>\n[id: <id>\n]data: <data>\n\n"; data must hold no
 * newline (JSON or base64). Returns http_stream_write's answer. */
int sse_event(struct http_stream *s, const char *event, const char *id,
              const char *data);
/* The same with data = base64 of bytes. */
int sse_event_b64(struct http_stream *s, const char *event, uint64_t id,
                  const char *bytes, size_t len);
int sse_comment(struct http_stream *s, const char *text);

#endif
