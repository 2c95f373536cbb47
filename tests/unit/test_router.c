/* Route matching: which handler a method and path reach, and what the
 * path's parameters are. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "api/api.h"

static const struct route *find(const char *method, const char *url,
                                struct route_match *m, bool *wrong)
{
	memset(m, 0, sizeof(*m));
	return router_find(method, url, m, wrong);
}

static void test_exact_and_params(void **state)
{
	(void)state;
	struct route_match m;
	bool wrong;
	const struct route *r =
	    find("POST", "/v1/sandbox/abc-1/exec", &m, &wrong);
	assert_non_null(r);
	assert_ptr_equal(r->handle, v1_exec);
	assert_string_equal(m.params[0], "abc-1");
	assert_false(wrong);

	r = find("GET", "/v1/sandbox/s1/process/p9/logs", &m, &wrong);
	assert_non_null(r);
	assert_ptr_equal(r->handle, v1_process_logs);
	assert_string_equal(m.params[0], "s1");
	assert_string_equal(m.params[1], "p9");
}

static void test_rest_parameter(void **state)
{
	(void)state;
	struct route_match m;
	bool wrong;
	const struct route *r =
	    find("GET", "/v1/sandbox/s1/file/a/b/c.txt", &m, &wrong);
	assert_non_null(r);
	assert_ptr_equal(r->handle, v1_file_get);
	assert_string_equal(m.params[1], "a/b/c.txt");
	/* an empty rest names /workspace itself */
	r = find("GET", "/v1/sandbox/s1/file/", &m, &wrong);
	assert_non_null(r);
	assert_string_equal(m.params[1], "");
	/* a streamed upload is a begin hook, not a handler */
	r = find("PUT", "/v1/sandbox/s1/file/x", &m, &wrong);
	assert_non_null(r);
	assert_null(r->handle);
	assert_ptr_equal(r->begin, v1_file_put);
}

static void test_no_route(void **state)
{
	(void)state;
	struct route_match m;
	bool wrong;
	/* an empty segment matches no "{id}" */
	assert_null(find("GET", "/v1/sandbox//running", &m, &wrong));
	assert_false(wrong);
	assert_null(find("GET", "/v1/sandbox/s1/nope", &m, &wrong));
	assert_false(wrong);
	/* trailing slash is another path */
	assert_null(find("GET", "/v1/sandbox/s1/", &m, &wrong));
	assert_null(find("GET", "", &m, &wrong));
}

static void test_wrong_method_and_head(void **state)
{
	(void)state;
	struct route_match m;
	bool wrong;
	assert_null(find("PATCH", "/v1/sandbox/s1/exec", &m, &wrong));
	assert_true(wrong);
	/* HEAD is answered by the GET route */
	const struct route *r = find("HEAD", "/v1/sandbox/s1", &m, &wrong);
	assert_non_null(r);
	assert_ptr_equal(r->handle, v1_sandbox_info);
}

static void test_params_never_overflow(void **state)
{
	(void)state;
	struct route_match m;
	bool wrong;
	/* a path longer than the parameter buffer matches nothing */
	char url[sizeof(m.buf) + 64];
	memcpy(url, "/v1/sandbox/", 12);
	memset(url + 12, 'a', sizeof(url) - 12 - 6);
	memcpy(url + sizeof(url) - 6, "/exec", 6);
	assert_null(find("POST", url, &m, &wrong));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exact_and_params),
	    cmocka_unit_test(test_rest_parameter),
	    cmocka_unit_test(test_no_route),
	    cmocka_unit_test(test_wrong_method_and_head),
	    cmocka_unit_test(test_params_never_overflow),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
