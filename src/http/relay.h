/* A relay ties one streamed answer to one source of the core (a command's
 * output, a process log, a cell, a file) and owns everything the two
 * share, so that no face writes it again:
 *
 *   - the response stream (SSE or plain bytes) and its headers;
 *   - keepalive: on SSE, a comment after a stretch of silence, so proxies
 *     and clients with idle timeouts keep the connection, and a reader
 *     that left is noticed by the write that fails;
 *   - back-pressure: a write returns 1 when the client is behind; the
 *     source then waits, and ops->resume runs once the client caught up;
 *   - cancel on close: when the client goes away before the source is
 *     done, ops->cancel runs once (a command is killed, a follower
 *     detached), and writes are dropped from then on;
 *   - release: the source calls relay_end when it is done; after that no
 *     callback reaches it again, and the relay frees itself once the
 *     client has the rest of the answer or is gone.
 *
 * The source's context must stay valid until it has called relay_end
 * (or ops->cancel has run, after which it still calls relay_end). */
#ifndef SBX_RELAY_H
#define SBX_RELAY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/http.h"
#include "lib/loop.h"

/* /v1's documented default */
#define RELAY_KEEPALIVE_MS 15000

struct relay_ops {
	void (*resume)(void *ctx); /* the client caught up: produce again */
	void (*cancel)(void *ctx); /* the client is gone before relay_end */
};

/* What the answer is: SSE when content_type is NULL (keepalive_ms of
 * silence before a comment; 0: RELAY_KEEPALIVE_MS), else bytes of that
 * type (size or HTTP_SIZE_UNKNOWN; extra headers as name/value pairs
 * ending in NULL). */
struct relay_opts {
	unsigned status; /* 0: 200 */
	const char *content_type;
	uint64_t size;
	const char *const *headers;
	unsigned keepalive_ms;
	/* bytes: what to write after keepalive_ms of silence (a protocol's
	 * own ping, e.g. a Connect keepalive envelope); NULL: nothing */
	const char *keepalive;
	size_t keepalive_len;
};

struct relay;

/* Answer r with a stream (opts NULL: SSE, 200). NULL when the answer
 * could not be started. ops may be NULL. */
struct relay *relay_open(struct http_req *r, struct loop *loop,
                         const struct relay_opts *opts,
                         const struct relay_ops *ops, void *ctx);

/* Whether the client is still there to read. */
bool relay_live(const struct relay *rl);
/* Each returns 1 when the producer should pause until ops->resume, else
 * 0 (also when the client is gone: the bytes are dropped). */
int relay_write(struct relay *rl, const void *data, size_t len);
/* "event: <event>\n[id: <id>\n]data: <data>\n\n" */
int relay_event(struct relay *rl, const char *event, const char *id,
                const char *data);
/* data = the compact JSON of j (taken) */
int relay_event_json(struct relay *rl, const char *event, json_t *j);
/* data = base64 of bytes; id UINT64_MAX: none */
int relay_event_b64(struct relay *rl, const char *event, uint64_t id,
                    const char *bytes, size_t len);
int relay_comment(struct relay *rl, const char *text);
/* The rest of the answer is pulled (see http_stream_set_pull) once what
 * was written is out; relay_kick when pull, having given 0, has more. */
void relay_set_pull(struct relay *rl, http_pull_fn pull, void *ctx);
void relay_kick(struct relay *rl);
/* Bytes written but not yet taken by the client. */
size_t relay_pending(const struct relay *rl);

/* The source is done: end the answer. No callback runs after this. */
void relay_end(struct relay *rl);
/* The source failed after the answer began: end it cut short (the
 * connection is closed without the body's proper end), so that the
 * client cannot take what it got for the whole. As relay_end otherwise. */
void relay_abort(struct relay *rl);

#endif
