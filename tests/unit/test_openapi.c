/* The OpenAPI document served at /v1/openapi.json names every route of the
 * router's table with its method, so the document cannot fall behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <ctype.h>
#include <jansson.h>
#include <string.h>

#include "api/api.h"

extern const char sbx_openapi_json[];

static json_t *load(void)
{
	json_error_t e;
	json_t *doc = json_loads(sbx_openapi_json, 0, &e);
	if (!doc)
		fail_msg("openapi.json: %s (line %d)", e.text, e.line);
	return doc;
}

static void test_every_route_documented(void **state)
{
	(void)state;
	json_t *doc = load();
	json_t *paths = json_object_get(doc, "paths");
	assert_non_null(paths);
	for (size_t i = 0; i < api_nroutes; i++) {
		char path[256], method[16];
		size_t o = 0;
		/* "{path*}" is written "{path}" in OpenAPI */
		for (const char *p = api_routes[i].pattern; *p && o < 255; p++)
			if (*p != '*')
				path[o++] = *p;
		path[o] = '\0';
		size_t k = 0;
		for (; api_routes[i].method[k] && k < 15; k++)
			method[k] = (char)tolower(
			    (unsigned char)api_routes[i].method[k]);
		method[k] = '\0';
		json_t *item = json_object_get(paths, path);
		if (!item || !json_object_get(item, method))
			fail_msg("route %s %s is not in docs/openapi.json",
			         api_routes[i].method, api_routes[i].pattern);
	}
	json_decref(doc);
}

static void test_no_stale_paths(void **state)
{
	(void)state;
	json_t *doc = load();
	const char *path;
	json_t *item;
	json_object_foreach(json_object_get(doc, "paths"), path, item)
	{
		const char *method;
		json_t *op;
		json_object_foreach(item, method, op)
		{
			bool found = false;
			for (size_t i = 0; i < api_nroutes && !found; i++) {
				char want[256];
				size_t o = 0;
				for (const char *p = api_routes[i].pattern;
				     *p && o < 255; p++)
					if (*p != '*')
						want[o++] = *p;
				want[o] = '\0';
				found =
				    !strcmp(want, path) &&
				    !strcasecmp(api_routes[i].method, method);
			}
			/* the port proxy and exposed links take any method
			 * and are dispatched by prefix (router.c) */
			if (strstr(path, "/port/{port}/{path}") ||
			    !strncmp(path, "/v1/preview/", 12))
				found = true;
			if (!found)
				fail_msg(
				    "docs/openapi.json documents %s %s, which "
				    "the router does not serve",
				    method, path);
		}
	}
	json_decref(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_route_documented),
	    cmocka_unit_test(test_no_stale_paths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
