/* HTTP glue over libmicrohttpd, run from the daemon's event loop (MHD's
 * own epoll fd sits in ours; no MHD threads). A request is handed to the
 * router once its body is complete; a handler either answers at once or
 * suspends the connection and answers later (http_respond_* resumes it),
 * so no thread ever waits for a command. */
#ifndef SBX_HTTP_H
#define SBX_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/loop.h"
#include "lib/buf.h"

struct http_server;
struct MHD_Connection;
struct MHD_Response;

struct http_req {
	struct http_server *srv;
	struct MHD_Connection *conn;
	const char *method;
	const char *url;   /* decoded path, without the query */
	struct buf body;
	bool body_too_large;
	bool suspended;
	bool answered;
	struct MHD_Response *pending; /* answer made while suspended */
	unsigned pending_status;
	/* set by whatever handles the request and must hear of its end: the
	 * client is gone or the answer was sent */
	void (*on_close)(struct http_req *r);
	void *ctx;
};

typedef void (*http_handler)(struct http_req *r, void *data);

struct http_config {
	const char *addr;  /* IPv4 or IPv6 literal */
	uint16_t port;
	size_t max_body;
	http_handler handler;
	void *handler_data;
};

int http_start(struct loop *l, const struct http_config *cfg,
	       struct http_server **out, char *errbuf, size_t errcap);
void http_stop(struct http_server *s);
/* For the loop's idle hook: run MHD (resumed connections) and say when it
 * next needs to run (-1: no timeout). */
void http_run(struct http_server *s);
int http_timeout_ms(struct http_server *s);

const char *http_header(struct http_req *r, const char *name);
const char *http_query(struct http_req *r, const char *name);

/* Answers; each takes ownership of its body. */
void http_respond_json(struct http_req *r, unsigned status, json_t *body);
void http_respond_text(struct http_req *r, unsigned status, const char *text);
void http_respond_empty(struct http_req *r, unsigned status);
/* Handler will answer later. */
void http_suspend(struct http_req *r);

#endif
