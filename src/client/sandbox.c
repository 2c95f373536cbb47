/* libsbx: sandboxes (create, info, list, running, stop, delete) and
 * sessions. Each call is one request; answers are decoded into the
 * public structs, keeping the server's JSON beside them. */
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

static void sandbox_fill(void *p, json_t *j)
{
	struct sbx_sandbox *s = p;
	memset(s, 0, sizeof(*s));
	s->id = jstrdup(j, "id");
	s->state = jstrdup(j, "state");
	s->created_at = jstrdup(j, "createdAt");
	s->last_active_at = jstrdup(j, "lastActiveAt");
	json_t *l = json_object_get(j, "limits");
	s->limits.memory_mb = juint(l, "memoryMB");
	s->limits.pids = juint(l, "pids");
	json_t *cpus = json_object_get(l, "cpus");
	s->limits.cpus = json_is_number(cpus) ? json_number_value(cpus) : 0;
	s->limits.disk_mb = juint(l, "diskMB");
	s->sleep_after_ms = juint(j, "sleepAfterMs");
	s->keep_alive = json_is_true(json_object_get(j, "keepAlive"));
	json_t *u = json_object_get(j, "usage");
	if (json_is_object(u)) {
		s->has_usage = true;
		s->usage.memory_bytes = juint(u, "memoryBytes");
		s->usage.cpu_ms = juint(u, "cpuMs");
		s->usage.disk_bytes = juint(u, "diskBytes");
		s->usage.pids = juint(u, "pids");
	}
	s->json = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
}

static void sandbox_clear(struct sbx_sandbox *s)
{
	free(s->id);
	free(s->state);
	free(s->created_at);
	free(s->last_active_at);
	free(s->json);
}

void sbx_sandbox_free(struct sbx_sandbox *s)
{
	if (!s)
		return;
	sandbox_clear(s);
	free(s);
}

void sbx_sandbox_list_free(struct sbx_sandbox *list, size_t n)
{
	for (size_t i = 0; list && i < n; i++)
		sandbox_clear(&list[i]);
	free(list);
}

static json_t *kv_object(const char *const *kv)
{
	return json_env(kv);
}

static int one_sandbox(json_t *j, struct sbx_sandbox **out,
                       struct sbx_error *err)
{
	*out = json_one_fill(j, sizeof(**out), sandbox_fill, "sandbox", err);
	return *out ? 0 : -1;
}

int sbx_sandbox_create(struct sbx_client *c, const struct sbx_create_opts *o,
                       struct sbx_sandbox **out, struct sbx_error *err)
{
	json_t *b = json_object(), *lim = json_object(), *ans = NULL;
	struct sbx_create_opts none = {0};
	if (!o)
		o = &none;
	if (o->id)
		json_object_set_new(b, "id", json_string(o->id));
	if (o->limits.memory_mb)
		json_object_set_new(
		    lim, "memoryMB",
		    json_integer((json_int_t)o->limits.memory_mb));
	if (o->limits.pids)
		json_object_set_new(lim, "pids",
		                    json_integer((json_int_t)o->limits.pids));
	if (o->limits.cpus > 0)
		json_object_set_new(lim, "cpus", json_real(o->limits.cpus));
	if (o->limits.disk_mb)
		json_object_set_new(
		    lim, "diskMB", json_integer((json_int_t)o->limits.disk_mb));
	if (json_object_size(lim))
		json_object_set(b, "limits", lim);
	json_decref(lim);
	if (o->sleep_after_ms) {
		char d[32];
		snprintf(d, sizeof(d), "%llums",
		         (unsigned long long)o->sleep_after_ms);
		json_object_set_new(b, "sleepAfter", json_string(d));
	}
	if (o->keep_alive)
		json_object_set_new(b, "keepAlive", json_true());
	if (o->from_snapshot)
		json_object_set_new(b, "fromSnapshot",
		                    json_string(o->from_snapshot));
	if (o->image)
		json_object_set_new(b, "image", json_string(o->image));
	if (o->env)
		json_object_set_new(b, "env", kv_object(o->env));
	if (o->labels)
		json_object_set_new(b, "labels", kv_object(o->labels));
	char *url;
	if (asprintf(&url, "%s/v1/sandbox", c->base) < 0)
		url = NULL;
	if (json_call(c, "POST", url, b, &ans, err))
		return -1;
	if (!out) {
		json_decref(ans);
		return 0;
	}
	return one_sandbox(ans, out, err);
}

int sbx_sandbox_info(struct sbx_client *c, const char *id,
                     struct sbx_sandbox **out, struct sbx_error *err)
{
	json_t *ans = NULL;
	if (json_call(c, "GET", url_sandbox(c, id, "%s", ""), NULL, &ans, err))
		return -1;
	return one_sandbox(ans, out, err);
}

int sbx_sandbox_list(struct sbx_client *c, struct sbx_sandbox **list, size_t *n,
                     struct sbx_error *err)
{
	json_t *ans = NULL;
	char *url;
	if (asprintf(&url, "%s/v1/sandbox", c->base) < 0)
		url = NULL;
	if (json_call(c, "GET", url, NULL, &ans, err))
		return -1;
	json_t *arr = json_object_get(ans, "sandboxes");
	if (!json_is_array(arr)) {
		json_decref(ans);
		sbx_err_set(err, 0, "protocol", "the answer has no sandboxes");
		return -1;
	}
	*list = json_array_fill(arr, sizeof(**list), sandbox_fill, n, err);
	json_decref(ans);
	return *list ? 0 : -1;
}

int sbx_sandbox_running(struct sbx_client *c, const char *id, bool *running,
                        struct sbx_error *err)
{
	json_t *ans = NULL;
	if (json_call(c, "GET", url_sandbox(c, id, "/running"), NULL, &ans,
	              err))
		return -1;
	*running = json_is_true(json_object_get(ans, "running"));
	json_decref(ans);
	return 0;
}

int sbx_sandbox_stop(struct sbx_client *c, const char *id,
                     struct sbx_error *err)
{
	return json_call(c, "POST", url_sandbox(c, id, "/stop"), NULL, NULL,
	                 err);
}

int sbx_sandbox_delete(struct sbx_client *c, const char *id,
                       struct sbx_error *err)
{
	return json_call(c, "DELETE", url_sandbox(c, id, "%s", ""), NULL, NULL,
	                 err);
}

int sbx_session_create(struct sbx_client *c, const char *id, const char *cwd,
                       char **sid, struct sbx_error *err)
{
	json_t *b = json_object();
	if (cwd)
		json_object_set_new(b, "cwd", json_string(cwd));
	return json_create(c, url_sandbox(c, id, "/session"), b, "session", sid,
	                   err);
}

int sbx_session_delete(struct sbx_client *c, const char *id, const char *sid,
                       struct sbx_error *err)
{
	return json_call(c, "DELETE",
	                 url_sandbox_item(c, id, "/session", sid, ""), NULL,
	                 NULL, err);
}
