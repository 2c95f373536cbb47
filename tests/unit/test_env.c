/* One rule for environment variables from every face. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "core/env.h"

static void test_object_to_strings(void **state)
{
	(void)state;
	json_t *j =
	    json_pack("{s:s, s:s, s:n}", "A", "1", "_B2", "x=y", "GONE");
	char **env;
	size_t n;
	const char *bad;
	assert_int_equal(env_from_json(j, &env, &n, &bad), 0);
	assert_int_equal(n, 2); /* the null is skipped */
	assert_null(env[2]);
	assert_true((!strcmp(env[0], "A=1") && !strcmp(env[1], "_B2=x=y")) ||
	            (!strcmp(env[1], "A=1") && !strcmp(env[0], "_B2=x=y")));
	env_free(env);
	json_decref(j);
	assert_int_equal(env_from_json(NULL, &env, &n, &bad), 0);
	assert_null(env);
	assert_int_equal(n, 0);
}

static void test_bad_names_and_values(void **state)
{
	(void)state;
	static const char *const names[] = {"",    "1A",  "A-B",
	                                    "A=B", "A B", "\xc3\xa9"};
	char **env;
	size_t n;
	const char *bad;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		json_t *j = json_pack("{s:s}", names[i], "v");
		assert_int_equal(env_from_json(j, &env, &n, &bad), -EINVAL);
		assert_string_equal(bad, names[i]);
		assert_null(env);
		json_decref(j);
	}
	json_t *num = json_pack("{s:i}", "N", 1);
	assert_int_equal(env_from_json(num, &env, &n, &bad), -EINVAL);
	assert_string_equal(bad, "N");
	json_decref(num);
	json_t *arr = json_pack("[s]", "A=1");
	assert_int_equal(env_from_json(arr, &env, &n, &bad), -EINVAL);
	assert_null(bad);
	json_decref(arr);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_object_to_strings),
	    cmocka_unit_test(test_bad_names_and_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
