/* /v1 network policies (shared/spec/v1.md "Network"): the "network"
 * member of a create body, GET and PUT /v1/sandbox/{id}/network. */
#include <string.h>

#include "api/api.h"
#include "core/network.h"

int v1_network_parse(struct http_req *r, json_t *j, struct net_policy *p)
{
	char why[400];
	memset(p, 0, sizeof(*p));
	if (!json_is_object(j)) {
		v1_error(r, 400, "invalid_request",
		         "network must be an object {mode, allow?, deny?}");
		return -1;
	}
	json_t *mode = json_object_get(j, "mode");
	if (!json_is_string(mode) ||
	    net_mode_parse(json_string_value(mode), &p->mode)) {
		v1_error(
		    r, 400, "invalid_request",
		    "network.mode must be \"none\", \"allowlist\" or \"full\"");
		return -1;
	}
	const char *key;
	json_t *v;
	json_object_foreach(j, key, v)
	{
		if (strcmp(key, "mode") && strcmp(key, "allow") &&
		    strcmp(key, "deny")) {
			v1_error(r, 400, "invalid_request",
			         "network: unknown member \"%.64s\"", key);
			goto bad;
		}
	}
	static const char *const lists[] = {"allow", "deny"};
	for (int l = 0; l < 2; l++) {
		json_t *arr = json_object_get(j, lists[l]), *e;
		size_t i;
		if (!arr || json_is_null(arr))
			continue;
		if (!json_is_array(arr)) {
			v1_error(r, 400, "invalid_request",
			         "network.%s must be an array of rules",
			         lists[l]);
			goto bad;
		}
		json_array_foreach(arr, i, e)
		{
			int rc = json_is_string(e)
			             ? net_policy_add(p, l == 1,
			                              json_string_value(e), why,
			                              sizeof(why))
			             : (snprintf(why, sizeof(why),
			                         "a rule is a string"),
			                -EINVAL);
			if (rc == -ENOMEM) {
				v1_error(r, 500, "internal", "out of memory");
				goto bad;
			}
			if (rc < 0) {
				v1_error(r, 400, "invalid_request",
				         "network.%s: %s", lists[l], why);
				goto bad;
			}
		}
	}
	return 0;
bad:
	net_policy_clear(p);
	return -1;
}

json_t *v1_network_json(const struct sandbox *sb)
{
	struct net_policy dflt;
	const struct net_policy *p = sandbox_net_policy(sb, &dflt);
	json_t *allow = json_array(), *deny = json_array();
	for (size_t i = 0; i < p->nallow; i++)
		json_array_append_new(allow, json_string(p->allow[i].text));
	for (size_t i = 0; i < p->ndeny; i++)
		json_array_append_new(deny, json_string(p->deny[i].text));
	return json_pack("{s:s, s:o, s:o}", "mode", net_mode_name(p->mode),
	                 "allow", allow, "deny", deny);
}

void v1_network_get(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sandbox *sb = v1_sandbox(a, r, m, false);
	if (sb)
		http_respond_json(r, 200, v1_network_json(sb));
}

void v1_network_put(struct api *a, struct http_req *r, struct route_match *m)
{
	struct sbx_err err = {0};
	struct net_policy p;
	json_t *body = v1_body(r);
	if (!body)
		return;
	struct sandbox *sb = v1_sandbox(a, r, m, false);
	if (sb && v1_network_parse(r, body, &p) == 0) {
		int rc = network_sandbox_set(sb, &p, &err);
		net_policy_clear(&p);
		static const struct v1_errmap set_errs[] = {
		    {ENETDOWN, 503, "network_unavailable"}, V1_ERR_INTERNAL};
		if (rc < 0)
			v1_error_of(r, &err, set_errs);
		else
			http_respond_json(r, 200, v1_network_json(sb));
	}
	json_decref(body);
}
