/* The API surfaces and what they share: the route table, errors, bodies. */
#ifndef SBX_API_H
#define SBX_API_H

#include <jansson.h>

#include "api/auth.h"
#include "core/exec.h"
#include "http/held.h"
#include "http/http.h"
#include "core/manager.h"
#include "lib/buf.h"

struct metrics {
	uint64_t execs, exec_failures, spawn_failures, bytes_streamed;
	uint64_t requests;
	uint64_t latency_buckets[12]; /* exec latency histogram, ms bounds */
	uint64_t latency_sum_ms;
};

struct api {
	struct manager *m;
	struct auth *auth; /* NULL: no tokens, one default tenant */
	struct metrics metrics;
};

#define ROUTE_MAX_PARAMS 3

struct route_match {
	const char *tenant;
	const char *params[ROUTE_MAX_PARAMS]; /* in pattern order */
	char buf[4096];                       /* params point in here */
};

struct route {
	const char *method;
	const char *pattern; /* "{x}" one segment, "{x*}" the rest */
	void (*handle)(struct api *a, struct http_req *r,
	               struct route_match *m);
	/* set for routes that stream their request body: called when the
	 * headers are in, instead of handle at the end */
	void (*begin)(struct api *a, struct http_req *r, struct route_match *m);
};

extern const struct route api_routes[];
extern const size_t api_nroutes;

/* The route for method + url (params into m); *wrong_method when only
 * the method differs. */
const struct route *router_find(const char *method, const char *url,
                                struct route_match *m, bool *wrong_method);
/* NULL when id is a valid Duet room ID, else why not. */
const char *duet_room_id_problem(const char *id, size_t len);

/* The http_handler and begin hook of the server. */
void router_handle(struct http_req *r, void *data);
void router_begin(struct http_req *r, void *data);

/* Duet: /api/rooms/...; rest is the path after "/api/rooms/". */
void api_duet_handle(struct api *a, struct http_req *r, const char *tenant,
                     const char *rest);

/* The MCP server at /mcp (api/mcp/mcp.c). */
void api_mcp_handle(struct api *a, struct http_req *r, const char *tenant);

/* The Cloudflare container protocol under /v1/sandbox/{id}/api/...:
 * m->params[0] is the sandbox id, rest the path from "/api/" on. begin
 * sees the request when its headers are in (it may stream the body);
 * handle when the body is complete (unless begin took the body). */
void api_cf_begin(struct api *a, struct http_req *r, struct route_match *m,
                  const char *rest);
void api_cf_handle(struct api *a, struct http_req *r, struct route_match *m,
                   const char *rest);

/* The E2B face (api/e2b/): whether r is E2B's (an E2b-Sandbox-Id header:
 * envd or the code interpreter; or a control-plane path), its begin hook
 * (streams POST /files) and handler; start/stop its deadline timer and
 * load its secret (envd access tokens). */
bool api_e2b_match(struct http_req *r);
void api_e2b_begin(struct api *a, struct http_req *r);
void api_e2b_handle(struct api *a, struct http_req *r);
void api_e2b_start(struct api *a);
void api_e2b_stop(struct api *a);

/* encode.c: a JSON string of arbitrary bytes: invalid UTF-8 becomes
 * U+FFFD. */
json_t *json_bytes(const char *data, size_t len);
/* A protocol's error code and the HTTP status it goes with; code's status
 * in a table of n of them, 500 for a code the table lacks. */
struct api_code_status {
	const char *code;
	unsigned status;
};
unsigned api_status_of(const struct api_code_status *table, size_t n,
                       const char *code);
/* A background process as the faces show it: id, command, status,
 * startTime, pid (when it has one, or always), and once it ended endTime,
 * exitCode (and error, why it could not start). */
struct process;
#define API_PROCESS_PID_ALWAYS 1u
#define API_PROCESS_ERROR 2u
json_t *api_process_json(const struct process *p, unsigned flags);

/* /v1 shared: {"error": msg, "code": code} with status. */
void v1_error(struct http_req *r, unsigned status, const char *code,
              const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* /v1's one map from a core error (-errno + struct sbx_err) to an answer.
 * A table per kind of request: rows {errno, status, code}, closed by a row
 * whose errno is 0, which answers every other errno. The message is the
 * error's own. */
struct v1_errmap {
	int errnum;
	unsigned status;
	const char *code;
};
#define V1_ERR_INTERNAL                                                        \
	{                                                                      \
		0, 500, "internal"                                             \
	}
/* The row of map for err->code (the closing row when none is). */
const struct v1_errmap *v1_err_row(const struct v1_errmap *map,
                                   const struct sbx_err *err);
/* Answer err as map says. */
void v1_error_of(struct http_req *r, const struct sbx_err *err,
                 const struct v1_errmap *map);
/* A failed manager_create/manager_admit: 429 quota_exceeded (EDQUOT) or
 * limit (ENOSPC, no uid range), else 500. */
extern const struct v1_errmap v1_create_errs[];
void v1_create_error(struct http_req *r, const struct sbx_err *err);
/* The body as a JSON object (empty body: {}), or answer 400 and NULL. */
json_t *v1_body(struct http_req *r);
/* A request held while core work runs (http/held.h), without a gone
 * callback: the client may leave, the work goes on. */
struct v1_held {
	struct http_held held;
	struct api *a;
};
/* A context of size bytes (zeroed; struct v1_held first) that holds r;
 * NULL after answering 500. Answer with http_take(&q->held), then free. */
void *v1_held_new(struct api *a, struct http_req *r, size_t size);
/* The sandbox named by the route: found, or created with defaults; NULL
 * after answering the error. */
struct sandbox *v1_sandbox(struct api *a, struct http_req *r,
                           struct route_match *m, bool create);
/* As v1_sandbox(create), for a request that runs something in it: with
 * room for it to start (manager_admit), else NULL after answering 429 (and
 * a sandbox this request made is gone again). */
struct sandbox *v1_sandbox_to_run(struct api *a, struct http_req *r,
                                  struct route_match *m);
/* Session from the Session-Id header (NULL header: default); NULL after
 * answering 404. */
struct session *v1_session(struct http_req *r, struct sandbox *sb);
/* Parse the exec-like fields of a body into p (strings borrowed from
 * body, arrays allocated in *hold, free with v1_exec_params_free). */
/* {"K": "V"} (names as core/env.h says) into env (env_free); -1 after
 * answering 400. */
int v1_env(struct http_req *r, json_t *env, char ***out, size_t *n);
/* A client's cwd (NULL or null: none, *out NULL), relative to from, as an
 * absolute path inside /workspace into *out (free it); -1 after
 * answering 400/403. */
int v1_cwd(struct http_req *r, json_t *cwd, const char *from, char **out);
struct v1_hold {
	const char **argv;
	char **env;
	char *stdin_buf;
	char *cwd;
};
int v1_exec_params(struct http_req *r, json_t *body, struct sandbox *sb,
                   struct session *sess, struct exec_params *p,
                   struct v1_hold *hold);
void v1_exec_params_free(struct v1_hold *hold);
/* The common start of exec-like requests: the body, the sandbox (created
 * if need be), the session and the exec fields; -1 after answering, else
 * free with v1_exec_request_free. */
struct v1_exec_req {
	json_t *body;
	struct sandbox *sb;
	struct session *sess;
	struct exec_params p;
	struct v1_hold hold;
};
int v1_exec_request(struct api *a, struct http_req *r, struct route_match *m,
                    struct v1_exec_req *q);
void v1_exec_request_free(struct v1_exec_req *q);
/* Accept: application/json (else SSE). */
bool v1_wants_json(struct http_req *r);
/* A sandbox as GET /v1/sandbox/{id} shows it (usage: with its usage). */
json_t *v1_sandbox_json(struct api *a, struct sandbox *sb, bool usage);

/* v1_snapshot.c */
struct snapshot;
json_t *v1_snapshot_json(const struct snapshot *s);
/* The answer for a failed snapshot operation (err->code an errno). */
void v1_snapshot_error(struct http_req *r, const struct sbx_err *err);
/* POST /v1/sandbox with fromSnapshot: answers when the files are there. */
void v1_sandbox_create_from(struct api *a, struct http_req *r,
                            struct route_match *m, const char *id,
                            const char *snap_id,
                            const struct sandbox_opts *opts);

/* Handlers, by file. */
void v1_sandbox_create(struct api *, struct http_req *, struct route_match *);
void v1_sandbox_list(struct api *, struct http_req *, struct route_match *);
void v1_sandbox_info(struct api *, struct http_req *, struct route_match *);
void v1_sandbox_running(struct api *, struct http_req *, struct route_match *);
void v1_sandbox_stop(struct api *, struct http_req *, struct route_match *);
void v1_sandbox_delete(struct api *, struct http_req *, struct route_match *);
void v1_exec(struct api *, struct http_req *, struct route_match *);
void v1_session_create(struct api *, struct http_req *, struct route_match *);
void v1_session_delete(struct api *, struct http_req *, struct route_match *);
void v1_file_get(struct api *, struct http_req *, struct route_match *);
void v1_file_put(struct api *, struct http_req *, struct route_match *);
void v1_file_delete(struct api *, struct http_req *, struct route_match *);
void v1_persist(struct api *, struct http_req *, struct route_match *);
void v1_hydrate(struct api *, struct http_req *, struct route_match *);
void v1_process_start(struct api *, struct http_req *, struct route_match *);
void v1_process_list(struct api *, struct http_req *, struct route_match *);
void v1_process_get(struct api *, struct http_req *, struct route_match *);
void v1_process_kill(struct api *, struct http_req *, struct route_match *);
void v1_process_logs(struct api *, struct http_req *, struct route_match *);
void v1_process_stream(struct api *, struct http_req *, struct route_match *);
void v1_process_stdin(struct api *, struct http_req *, struct route_match *);
void v1_snapshot_create(struct api *, struct http_req *, struct route_match *);
void v1_snapshot_list(struct api *, struct http_req *, struct route_match *);
void v1_snapshot_info(struct api *, struct http_req *, struct route_match *);
void v1_snapshot_delete(struct api *, struct http_req *, struct route_match *);
void v1_sandbox_fork(struct api *, struct http_req *, struct route_match *);
void v1_sandbox_restore(struct api *, struct http_req *, struct route_match *);
void v1_backup_create(struct api *, struct http_req *, struct route_match *);
void v1_backup_list(struct api *, struct http_req *, struct route_match *);
void v1_backup_info(struct api *, struct http_req *, struct route_match *);
void v1_backup_archive(struct api *, struct http_req *, struct route_match *);
void v1_backup_delete(struct api *, struct http_req *, struct route_match *);
/* POST /v1/sandbox/{id}/restore with a backup (body: the request's). */
void v1_backup_restore(struct api *a, struct http_req *r, struct route_match *m,
                       json_t *body);
void v1_context_create(struct api *, struct http_req *, struct route_match *);
void v1_context_list(struct api *, struct http_req *, struct route_match *);
void v1_context_get(struct api *, struct http_req *, struct route_match *);
void v1_context_delete(struct api *, struct http_req *, struct route_match *);
void v1_context_run(struct api *, struct http_req *, struct route_match *);
void v1_network_get(struct api *, struct http_req *, struct route_match *);
void v1_network_put(struct api *, struct http_req *, struct route_match *);
struct net_policy;
/* A "network" object into p (cleared); -1 with the 400 sent. */
int v1_network_parse(struct http_req *r, json_t *j, struct net_policy *p);
json_t *v1_network_json(const struct sandbox *sb);
/* The port proxy (v1_port.c): to port_s (text from the URL) of sandbox
 * id, path the rest of the URL ("/..." or ""). */
void v1_port_proxy(struct api *a, struct http_req *r, const char *tenant,
                   const char *id, const char *port_s, const char *path);
void v1_port_preview(struct api *a, struct http_req *r, const char *token,
                     const char *path);
void v1_port_expose(struct api *, struct http_req *, struct route_match *);
void v1_pty(struct api *, struct http_req *, struct route_match *);
void v1_pty_ticket(struct api *, struct http_req *, struct route_match *);
void v1_image_import(struct api *, struct http_req *, struct route_match *);
void v1_image_upload(struct api *, struct http_req *, struct route_match *);
void v1_image_list(struct api *, struct http_req *, struct route_match *);
void v1_image_info(struct api *, struct http_req *, struct route_match *);
void v1_image_delete(struct api *, struct http_req *, struct route_match *);
/* An image as /v1/image shows it (name: the one asked for, or its first) */
struct image;
json_t *v1_image_json(struct api *a, const struct image *img, const char *name);
void v1_watch(struct api *, struct http_req *, struct route_match *);
void api_openapi(struct api *, struct http_req *, struct route_match *);
void api_metrics(struct api *, struct http_req *, struct route_match *);
void api_health(struct api *, struct http_req *, struct route_match *);
void v1_admin_drain(struct api *, struct http_req *, struct route_match *);
void metrics_exec_done(struct api *a, uint64_t ms, bool failed);

#endif
