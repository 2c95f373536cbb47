/* Parsing of flags' values, UTF-8 cleaning, and the growable buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"
#include "lib/buf.h"
#include "lib/path.h"
#include "lib/util.h"

static void test_durations(void **state)
{
	(void)state;
	uint64_t v;
	assert_int_equal(parse_duration_ms("500ms", &v), 0);
	assert_int_equal(v, 500);
	assert_int_equal(parse_duration_ms("2s", &v), 0);
	assert_int_equal(v, 2000);
	assert_int_equal(parse_duration_ms("1.5s", &v), 0);
	assert_int_equal(v, 1500);
	assert_int_equal(parse_duration_ms("10m", &v), 0);
	assert_int_equal(v, 600000);
	assert_int_equal(parse_duration_ms("1h", &v), 0);
	assert_int_equal(v, 3600000);
	assert_int_equal(parse_duration_ms("30", &v), 0);
	assert_int_equal(v, 30000);
	assert_true(parse_duration_ms("", &v) < 0);
	assert_true(parse_duration_ms("-1s", &v) < 0);
	assert_true(parse_duration_ms("5x", &v) < 0);
	assert_true(parse_duration_ms("s", &v) < 0);
	assert_true(parse_duration_ms("1e300s", &v) < 0);
}

static void test_sizes(void **state)
{
	(void)state;
	uint64_t v;
	assert_int_equal(parse_size("1024", &v), 0);
	assert_int_equal(v, 1024);
	assert_int_equal(parse_size("64k", &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(parse_size("256M", &v), 0);
	assert_int_equal(v, 256u << 20);
	assert_int_equal(parse_size("1G", &v), 0);
	assert_int_equal(v, 1u << 30);
	assert_int_equal(parse_size("1GiB", &v), 0);
	assert_int_equal(v, 1u << 30);
	assert_true(parse_size("1Q", &v) < 0);
	assert_true(parse_size("G", &v) < 0);
	assert_true(parse_size("1GG", &v) < 0);
}

static void test_utf8(void **state)
{
	(void)state;
	char out[64];
	assert_true(utf8_valid("h\xc3\xa9llo", 6));
	assert_false(utf8_valid("\xff", 1));
	assert_false(utf8_valid("a\0b", 3));
	assert_false(utf8_valid("\xc0\xaf", 2));     /* overlong '/' */
	assert_false(utf8_valid("\xed\xa0\x80", 3)); /* surrogate */
	size_t n = utf8_sanitize("a\xff"
	                         "b",
	                         3, out);
	assert_int_equal(n, 5);
	assert_memory_equal(out,
	                    "a\xef\xbf\xbd"
	                    "b",
	                    5);
	n = utf8_sanitize("\xe2\x82", 2, out); /* cut sequence */
	assert_int_equal(n, 6);
	assert_true(utf8_valid(out, n));
}

static void test_buf_limit(void **state)
{
	(void)state;
	struct buf b;
	buf_init(&b, 10);
	assert_int_equal(buf_append(&b, "hello", 5), 0);
	assert_int_equal(buf_append(&b, "world!!", 7), 0);
	assert_int_equal(b.len, 10);
	assert_int_equal(b.dropped, 2);
	assert_string_equal(buf_cstr(&b), "helloworld");
	buf_free(&b);
}

static void test_iso8601(void **state)
{
	(void)state;
	char ts[32];
	iso8601_ms(1732900000123ull, ts, sizeof(ts));
	assert_string_equal(ts, "2024-11-29T17:06:40.123Z");
}

static void test_path_beneath(void **state)
{
	(void)state;
	char out[64];
	assert_int_equal(path_beneath("/workspace", "a/b", out, sizeof(out)),
	                 PATH_OK);
	assert_string_equal(out, "a/b");
	assert_int_equal(
	    path_beneath("/workspace", "a//./b/", out, sizeof(out)), PATH_OK);
	assert_string_equal(out, "a/b");
	assert_int_equal(
	    path_beneath("/workspace", "/workspace/x", out, sizeof(out)),
	    PATH_OK);
	assert_string_equal(out, "x");
	assert_int_equal(
	    path_beneath("/workspace", "/workspace", out, sizeof(out)),
	    PATH_OK);
	assert_string_equal(out, "");
	assert_int_equal(path_beneath("/workspace", ".", out, sizeof(out)),
	                 PATH_OK);
	assert_string_equal(out, "");
	assert_int_equal(path_beneath("/workspace", "../etc", out, sizeof(out)),
	                 PATH_OUTSIDE);
	assert_int_equal(
	    path_beneath("/workspace", "a/../../b", out, sizeof(out)),
	    PATH_OUTSIDE);
	assert_int_equal(path_beneath("/workspace", "a/..", out, sizeof(out)),
	                 PATH_OUTSIDE);
	assert_int_equal(
	    path_beneath("/workspace", "/etc/passwd", out, sizeof(out)),
	    PATH_OUTSIDE);
	assert_int_equal(
	    path_beneath("/workspace", "/workspacefoo", out, sizeof(out)),
	    PATH_OUTSIDE);
	assert_int_equal(path_beneath("/workspace", "a\nb", out, sizeof(out)),
	                 PATH_INVALID);
	assert_int_equal(path_beneath("/workspace", "a\x7f", out, sizeof(out)),
	                 PATH_INVALID);
	assert_int_equal(path_beneath("/", "/etc/x", out, sizeof(out)),
	                 PATH_OK);
	assert_string_equal(out, "etc/x");
	char small[4];
	assert_int_equal(
	    path_beneath("/workspace", "abcdef", small, sizeof(small)),
	    PATH_INVALID);
	assert_int_equal(path_beneath("/workspace", "..a", out, sizeof(out)),
	                 PATH_OK);
	assert_string_equal(out, "..a");
}

static void test_path_join_beneath(void **state)
{
	(void)state;
	char *out;
	assert_int_equal(
	    path_join_beneath("/workspace", "/workspace/d", "x/y", &out),
	    PATH_OK);
	assert_string_equal(out, "/workspace/d/x/y");
	free(out);
	assert_int_equal(
	    path_join_beneath("/workspace", "/tmp", "/workspace", &out),
	    PATH_OK);
	assert_string_equal(out, "/workspace");
	free(out);
	assert_int_equal(
	    path_join_beneath("/workspace", "/workspace", "..", &out),
	    PATH_OUTSIDE);
	assert_null(out);
	/* a relative path from a cwd outside the base is outside */
	assert_int_equal(path_join_beneath("/workspace", "/tmp", "x", &out),
	                 PATH_OUTSIDE);
	assert_int_equal(path_join_beneath("/", "/", "a/./b", &out), PATH_OK);
	assert_string_equal(out, "/a/b");
	free(out);
	/* long paths are never cut: names of 200 bytes, 15 deep, whole; 30
	 * deep (past PATH_MAX) refused */
	char *deep = malloc(30 * 201 + 1), *p = deep;
	for (int i = 0; i < 30; i++) {
		memset(p, 'n', 200);
		p[200] = '/';
		p += 201;
	}
	*p = '\0';
	assert_int_equal(
	    path_join_beneath("/workspace", "/workspace", deep, &out),
	    PATH_INVALID);
	deep[15 * 201] = '\0';
	assert_int_equal(
	    path_join_beneath("/workspace", "/workspace", deep, &out), PATH_OK);
	assert_int_equal(strlen(out), strlen("/workspace/") + 15 * 201 - 1);
	free(out);
	free(deep);
}

static void test_base64(void **state)
{
	(void)state;
	char enc[16], dec[16];
	assert_int_equal(base64_encode("hi!", 3, enc), 4);
	assert_string_equal(enc, "aGkh");
	assert_int_equal(base64_encode("h", 1, enc), 4);
	assert_string_equal(enc, "aA==");
	assert_int_equal(base64_decode("aGkh", 4, dec), 3);
	assert_memory_equal(dec, "hi!", 3);
	assert_int_equal(base64_decode("aA==", 4, dec), 1);
	assert_int_equal(base64_decode("aA=", 3, dec), -1);
	assert_int_equal(base64_decode("a=A=", 4, dec), -1);
	assert_int_equal(base64_decode("aG k", 4, dec), -1);
	assert_int_equal(base64_decode("", 0, dec), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_durations),
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_utf8),
	    cmocka_unit_test(test_buf_limit),
	    cmocka_unit_test(test_iso8601),
	    cmocka_unit_test(test_path_beneath),
	    cmocka_unit_test(test_path_join_beneath),
	    cmocka_unit_test(test_base64),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
