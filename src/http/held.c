/* A request held while background work runs: see held.h. */
#include <stddef.h>

#include "http/held.h"

static void held_closed(struct http_req *r)
{
	struct http_held *h = r->ctx;
	h->r = NULL;
	if (h->gone)
		h->gone(h->ctx);
}

void http_hold(struct http_held *h, struct http_req *r, void (*gone)(void *ctx),
               void *ctx)
{
	h->r = r;
	h->gone = gone;
	h->ctx = ctx;
	r->ctx = h;
	r->on_close = held_closed;
	http_suspend(r);
}

struct http_req *http_take(struct http_held *h)
{
	struct http_req *r = h->r;
	if (r) {
		r->on_close = NULL;
		r->ctx = NULL;
	}
	h->r = NULL;
	return r;
}
