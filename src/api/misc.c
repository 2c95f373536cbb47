/* /health, /metrics (Prometheus text), /v1/openapi.json and a fleet's
 * POST /v1/admin/drain. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/fleet.h"
#include "core/network.h"
#include "core/process.h"
#include "lib/buf.h"

/* docs/openapi.json, embedded at build time (openapi_blob.S), NUL-ended */
extern const char sbx_openapi_json[];

static const unsigned bounds_ms[] = {1,   2,   5,    10,   25,   50,
                                     100, 250, 1000, 5000, 30000};

void metrics_exec_done(struct api *a, uint64_t ms, bool failed)
{
	size_t i = 0;
	while (i < sizeof(bounds_ms) / sizeof(bounds_ms[0]) &&
	       ms > bounds_ms[i])
		i++;
	a->metrics.latency_buckets[i]++;
	a->metrics.latency_sum_ms += ms;
	if (failed)
		a->metrics.exec_failures++;
}

void api_health(struct api *a, struct http_req *r, struct route_match *m)
{
	(void)m;
	/* a draining node: the load balancer sends its traffic elsewhere */
	if (a->m->fleet && fleet_draining(a->m->fleet))
		http_respond_text(r, 503, "draining");
	else
		http_respond_text(r, 200, "ok");
}

struct drain_req {
	struct http_req *r;
	struct api *a;
};

static void drain_closed(struct http_req *r)
{
	struct drain_req *q = r->ctx;
	q->r = NULL; /* the drain goes on; its answer goes nowhere */
}

static void drained(void *ctx, unsigned n, unsigned failed)
{
	struct drain_req *q = ctx;
	if (q->r) {
		q->r->on_close = NULL;
		http_respond_json(
		    q->r, failed ? 500 : 200,
		    json_pack("{s:s, s:i, s:i}", "node",
		              q->a->m && q->a->m->fleet
		                  ? fleet_node_name(q->a->m->fleet)
		                  : "",
		              "checkpointed", (int)n, "failed", (int)failed));
	}
	free(q);
}

void v1_admin_drain(struct api *a, struct http_req *r, struct route_match *m)
{
	if (!auth_operator(a->auth, m->tenant)) {
		v1_error(r, 403, "forbidden",
		         "only the operator drains a node");
		return;
	}
	if (!a->m->fleet) {
		v1_error(r, 409, "not_a_fleet",
		         "this daemon is not a node of a fleet (--etcd)");
		return;
	}
	struct drain_req *q = calloc(1, sizeof(*q));
	if (!q) {
		v1_error(r, 500, "internal", "out of memory");
		return;
	}
	q->r = r;
	q->a = a;
	r->ctx = q;
	r->on_close = drain_closed;
	http_suspend(r);
	fleet_drain(a->m->fleet, drained, q);
}

void api_openapi(struct api *a, struct http_req *r, struct route_match *m)
{
	(void)a;
	(void)m;
	json_t *doc = json_loads(sbx_openapi_json, 0, NULL);
	if (!doc)
		v1_error(r, 500, "internal",
		         "the embedded OpenAPI document is broken");
	else
		http_respond_json(r, 200, doc);
}

struct count {
	unsigned running, stopped, procs;
	uint64_t oom;
};

static void count_one(struct sandbox *sb, void *data)
{
	struct count *c = data;
	if (!sandbox_running(sb)) {
		c->stopped++;
	} else {
		c->running++;
		struct cgroup_stats st;
		if (sandbox_stats(sb, &st) == 0)
			c->oom += st.oom_kills;
	}
	for (struct process *p = process_next(sb, NULL); p;
	     p = process_next(sb, p)) {
		struct process_info pi;
		process_info(p, &pi);
		c->procs += !pi.ended;
	}
}

static void net_one(struct sandbox *sb, void *data)
{
	struct buf *b = data;
	uint64_t tx, rx;
	if (!sandbox_net_usage(sb, &tx, &rx))
		return; /* never had a link: nothing to say */
	/* ids are [a-z0-9-]; tenants come from the operator's tokens file */
	buf_printf(
	    b,
	    "sandboxd_sandbox_net_tx_bytes{tenant=\"%s\",sandbox=\"%s\"} %llu\n"
	    "sandboxd_sandbox_net_rx_bytes{tenant=\"%s\",sandbox=\"%s\"} "
	    "%llu\n",
	    sandbox_tenant(sb), sandbox_id(sb), (unsigned long long)tx,
	    sandbox_tenant(sb), sandbox_id(sb), (unsigned long long)rx);
}

void api_metrics(struct api *a, struct http_req *r, struct route_match *m)
{
	(void)m;
	struct count c = {0};
	struct buf b;
	const struct metrics *mt = &a->metrics;
	manager_foreach(a->m, count_one, &c);
	buf_init(&b, 0);
	buf_printf(
	    &b,
	    "# HELP sandboxd_sandboxes Sandboxes by state.\n"
	    "# TYPE sandboxd_sandboxes gauge\n"
	    "sandboxd_sandboxes{state=\"running\"} %u\n"
	    "sandboxd_sandboxes{state=\"stopped\"} %u\n"
	    "# HELP sandboxd_processes_running Background processes running.\n"
	    "# TYPE sandboxd_processes_running gauge\n"
	    "sandboxd_processes_running %u\n"
	    "# HELP sandboxd_requests_total HTTP requests.\n"
	    "# TYPE sandboxd_requests_total counter\n"
	    "sandboxd_requests_total %llu\n"
	    "# HELP sandboxd_execs_total Commands run through /v1 exec.\n"
	    "# TYPE sandboxd_execs_total counter\n"
	    "sandboxd_execs_total %llu\n"
	    "# HELP sandboxd_exec_failures_total Commands that could not run.\n"
	    "# TYPE sandboxd_exec_failures_total counter\n"
	    "sandboxd_exec_failures_total %llu\n"
	    "# HELP sandboxd_oom_kills Processes OOM-killed in running "
	    "sandboxes.\n"
	    "# TYPE sandboxd_oom_kills gauge\n"
	    "sandboxd_oom_kills %llu\n"
	    "# HELP sandboxd_streamed_bytes_total Output bytes sent to SSE "
	    "clients.\n"
	    "# TYPE sandboxd_streamed_bytes_total counter\n"
	    "sandboxd_streamed_bytes_total %llu\n"
	    "# HELP sandboxd_exec_duration_seconds Exec latency.\n"
	    "# TYPE sandboxd_exec_duration_seconds histogram\n",
	    c.running, c.stopped, c.procs, (unsigned long long)mt->requests,
	    (unsigned long long)mt->execs,
	    (unsigned long long)mt->exec_failures, (unsigned long long)c.oom,
	    (unsigned long long)mt->bytes_streamed);
	uint64_t cum = 0;
	size_t nb = sizeof(bounds_ms) / sizeof(bounds_ms[0]);
	for (size_t i = 0; i < nb; i++) {
		cum += mt->latency_buckets[i];
		buf_printf(
		    &b,
		    "sandboxd_exec_duration_seconds_bucket{le=\"%g\"} %llu\n",
		    bounds_ms[i] / 1000.0, (unsigned long long)cum);
	}
	cum += mt->latency_buckets[nb];
	buf_printf(&b,
	           "sandboxd_exec_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
	           "sandboxd_exec_duration_seconds_sum %g\n"
	           "sandboxd_exec_duration_seconds_count %llu\n",
	           (unsigned long long)cum, mt->latency_sum_ms / 1000.0,
	           (unsigned long long)cum);
	buf_printf(&b, "# HELP sandboxd_sandbox_net_tx_bytes Bytes a sandbox "
	               "sent over its network link.\n"
	               "# TYPE sandboxd_sandbox_net_tx_bytes counter\n"
	               "# HELP sandboxd_sandbox_net_rx_bytes Bytes a sandbox "
	               "received over its network link.\n"
	               "# TYPE sandboxd_sandbox_net_rx_bytes counter\n");
	manager_foreach(a->m, net_one, &b);
	http_respond_text(r, 200, buf_cstr(&b));
	buf_free(&b);
}
