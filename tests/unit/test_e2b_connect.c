/* The Connect protocol's framing as the E2B face writes and reads it
 * (api/e2b/e2b_connect.c): envelopes, the end-of-stream message, the one
 * envelope of a streaming request (refused when cut, compressed or not an
 * object), and the code <-> status table the SDKs map back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "api/e2b/e2b.h"

static void test_envelope_bytes(void **state)
{
	(void)state;
	struct buf b;
	buf_init(&b, 0);
	assert_int_equal(connect_envelope(&b, 0,
	                                  json_pack("{s:{s:{s:i}}}", "event",
	                                            "start", "pid", 100)),
	                 0);
	static const char msg[] = "{\"event\":{\"start\":{\"pid\":100}}}";
	assert_int_equal(b.len, 5 + sizeof(msg) - 1);
	assert_memory_equal(b.data, "\0\0\0\0\x1f", 5);
	assert_memory_equal(b.data + 5, msg, sizeof(msg) - 1);
	buf_reset(&b);
	assert_int_equal(connect_end(&b, NULL, NULL), 0);
	assert_int_equal(b.len, 7);
	assert_memory_equal(b.data, "\x02\0\0\0\x02{}", 7);
	buf_reset(&b);
	connect_end(&b, "not_found", "process not found");
	assert_int_equal((unsigned char)b.data[0], 2);
	json_t *j = json_loadb(b.data + 5, b.len - 5, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(
	                        json_object_get(j, "error"), "code")),
	                    "not_found");
	json_decref(j);
	buf_free(&b);
}

static json_t *unwrap(const char *data, size_t len, const char **why)
{
	struct http_req r;
	memset(&r, 0, sizeof(r));
	buf_init(&r.body, 0);
	buf_append(&r.body, data, len);
	json_t *j = connect_unwrap(&r, why);
	buf_free(&r.body);
	return j;
}

static void test_unwrap_request(void **state)
{
	(void)state;
	const char *why;
	static const char ok[] = "\0\0\0\0\x17{\"process\":{\"pid\":100}}";
	json_t *j = unwrap(ok, sizeof(ok) - 1, &why);
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(
	                     json_object_get(j, "process"), "pid")),
	                 100);
	json_decref(j);
	/* cut short, a length past the body, compressed, not an object */
	assert_null(unwrap(ok, 4, &why));
	assert_null(unwrap(ok, sizeof(ok) - 2, &why));
	static const char z[] = "\x01\0\0\0\x02{}";
	assert_null(unwrap(z, sizeof(z) - 1, &why));
	assert_non_null(strstr(why, "compressed"));
	static const char arr[] = "\0\0\0\0\x02[]";
	assert_null(unwrap(arr, sizeof(arr) - 1, &why));
	static const char huge[] = "\0\xff\xff\xff\xff{}";
	assert_null(unwrap(huge, sizeof(huge) - 1, &why));
}

static void test_codes(void **state)
{
	(void)state;
	assert_int_equal(connect_status("not_found"), 404);
	assert_int_equal(connect_status("already_exists"), 409);
	assert_int_equal(connect_status("invalid_argument"), 400);
	assert_int_equal(connect_status("unauthenticated"), 401);
	assert_int_equal(connect_status("unimplemented"), 501);
	assert_int_equal(connect_status("deadline_exceeded"), 504);
	assert_int_equal(connect_status("no such code"), 500);
	assert_string_equal(connect_code_of_errno(ENOENT), "not_found");
	assert_string_equal(connect_code_of_errno(EEXIST), "already_exists");
	assert_string_equal(connect_code_of_errno(ENOTDIR), "invalid_argument");
	assert_string_equal(connect_code_of_errno(EACCES), "permission_denied");
	assert_string_equal(connect_code_of_errno(ENOSPC),
	                    "resource_exhausted");
	assert_string_equal(connect_code_of_errno(EIO), "internal");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_envelope_bytes),
	    cmocka_unit_test(test_unwrap_request),
	    cmocka_unit_test(test_codes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
