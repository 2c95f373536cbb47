/* WebSocket (RFC 6455) over an upgraded HTTP connection. Framing,
 * masking, fragments, ping/pong and the closing handshake are wslay's
 * (Debian's libwslay); this file does the handshake and ties a wslay
 * context to the event loop, with the same duties as a relay (relay.h):
 *   - back-pressure: ws_send returns 1 past WS_HIGH bytes not yet taken
 *     by the client, and ops->drain runs once it is below WS_LOW again;
 *   - keepalive: a ping after WS_PING_MS of silence, so idle proxies keep
 *     the connection and a vanished client is found by the write;
 *   - close: ops->closed runs exactly once, when the connection is gone
 *     (either side closed it, the client left, or ws_close's grace ran
 *     out); the ws is freed right after. */
#ifndef SBX_WS_H
#define SBX_WS_H

#include <stdbool.h>
#include <stddef.h>

#include "http/http.h"
#include "lib/loop.h"

#define WS_HIGH (1u << 20)
#define WS_LOW (256u << 10)
#define WS_PING_MS 30000u
#define WS_MAX_MESSAGE (1u << 20) /* from the client; larger: 1009 */
#define WS_CLOSE_GRACE_MS 30000u  /* for the client to take the rest */

/* Close codes (1000-1011 are RFC 6455's; 4000-4999 are ours). */
#define WS_CLOSE_NORMAL 1000
#define WS_CLOSE_GOING_AWAY 1001
#define WS_CLOSE_TOO_SLOW 4008 /* the client did not read its output */

struct ws;

struct ws_ops {
	/* one whole message (text: UTF-8 as the client sent it) */
	void (*message)(void *ctx, bool text, const char *data, size_t len);
	void (*drain)(void *ctx);
	/* code: the close code the client sent, or 1006 when it left
	 * without one */
	void (*closed)(void *ctx, unsigned code);
};

/* Why r is not a WebSocket handshake (version 13), or NULL. */
const char *ws_handshake_problem(struct http_req *r);
/* Answer r's handshake (checked with ws_handshake_problem) with 101.
 * Messages may be sent at once: they go out once the connection is
 * upgraded. NULL: out of memory (r answered 500). */
struct ws *ws_accept(struct http_req *r, struct loop *l,
                     const struct ws_ops *ops, void *ctx);
/* Queue a message. 1: the client is WS_HIGH behind (wait for drain);
 * 0 otherwise, also when the connection is closing (dropped). */
int ws_send(struct ws *ws, bool text, const char *data, size_t len);
/* Bytes queued and not yet written to the socket. */
size_t ws_pending(const struct ws *ws);
/* Start the closing handshake after what is queued; nothing more is
 * sent. closed runs when it is done, or after WS_CLOSE_GRACE_MS. */
void ws_close(struct ws *ws, unsigned code, const char *reason);

/* The server is stopping: every connection ends now (closed runs). */
void ws_shutdown(void);

/* Sec-WebSocket-Accept for a Sec-WebSocket-Key (out: 29 bytes). */
void ws_accept_key(const char *key, char out[29]);

#endif
