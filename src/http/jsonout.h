/* JSON answers that carry big strings (a command's output, a process log)
 * without a second copy of them: the document is built with a small
 * placeholder where each big string goes, dumped (small), and sent with
 * each placeholder replaced by its bytes, escaped only as the client reads
 * them (runtime memory: the bytes themselves and one chunk, never the
 * escaped whole, which can be six times larger). The answer has a
 * Content-Length, as a json_dumps one would. */
#ifndef SBX_JSONOUT_H
#define SBX_JSONOUT_H

#include <jansson.h>

#include "http/http.h"
#include "lib/buf.h"

struct jsonout;

struct jsonout *jsonout_new(void);
/* The placeholder for b's bytes, to put in the document where the string
 * goes; the bytes move into o (b is left empty, ready for buf_free). NULL
 * when out of memory or out of placeholders. */
json_t *jsonout_string(struct jsonout *o, struct buf *b);
/* The same for bytes sent as base64. */
json_t *jsonout_base64(struct jsonout *o, struct buf *b);
/* Answer r with doc; o and doc are consumed, whatever happens. */
void jsonout_respond(struct jsonout *o, struct http_req *r, unsigned status,
                     json_t *doc);
/* Drop o unanswered (after an error answer). */
void jsonout_free(struct jsonout *o);

#endif
