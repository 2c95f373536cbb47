/* The MCP face's own parts: the transport and JSON-RPC (mcp.c) and the
 * tools (mcp_tools.c). */
#ifndef SBX_API_MCP_H
#define SBX_API_MCP_H

#include <jansson.h>
#include <stdbool.h>

#include "api/api.h"

struct mcp_session;
struct mcp_post;

/* One tools/call in flight. */
struct mcp_call {
	struct api *a;
	struct mcp_session *s;
	struct mcp_post *post;
	json_t *id;     /* the request's id */
	bool cancelled; /* no answer is wanted any more */
	bool cancel_sent;
	/* set by the tool while it works: stop it (its done still comes) */
	void (*cancel)(struct mcp_call *c);
	void *op;
	struct mcp_call *next;
};

/* The tools as tools/list shows them (new reference). */
json_t *mcp_tools_list(void);
/* Start a tool: 0, and mcp_call_done follows exactly once (possibly
 * before this returns); -1 when there is no such tool (nothing follows). */
int mcp_tool_call(struct mcp_call *c, const char *name, json_t *args);
/* The tool's result (a CallToolResult, taken). */
void mcp_call_done(struct mcp_call *c, json_t *result);
/* A result {"content": [{"type": "text", "text": ...}], "isError": true}. */
json_t *mcp_tool_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* The session's sandbox, made or started as needed, into *out: 0, or
 * -errno with err filled (nothing answered). */
int mcp_sandbox(struct mcp_call *c, struct sandbox **out, struct sbx_err *err);
/* The sandbox's id (for messages). */
const char *mcp_sandbox_id(const struct mcp_call *c);

#endif
