/* A request held open while work it started runs in the background (a
 * snapshot, a backup, a store query), and answered once when that work
 * ends. The client may leave first: the request is then gone, the work
 * goes on (or is cancelled by the holder's gone callback) and its end
 * answers no one.
 *
 * The holder embeds a struct http_held in its own context and calls
 * http_hold; when it has the answer it calls http_take and answers the
 * request it gets, if any (a later http_take gets NULL). The request's
 * ctx and on_close are the held's until then. gone may free the holder's
 * context: nothing touches the held after it. */
#ifndef SBX_HTTP_HELD_H
#define SBX_HTTP_HELD_H

#include "http/http.h"

struct http_held {
	struct http_req *r; /* NULL once the client is gone or it is taken */
	void (*gone)(void *ctx);
	void *ctx;
};

/* Suspend r until the answer; if its client leaves before http_take,
 * gone(ctx) runs (gone may be NULL). */
void http_hold(struct http_held *h, struct http_req *r, void (*gone)(void *ctx),
               void *ctx);

/* The held request, to be answered now, detached from h (its leaving
 * runs nothing more); NULL when the client has gone. */
struct http_req *http_take(struct http_held *h);

#endif
