/* Bytes escaped piece by piece as a JSON string's inside (lib/jsonesc.c):
 * exactly what json_dumps(json_bytes(...)) puts between the quotes, for
 * any bytes, however the output is cut into pieces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "lib/jsonesc.h"

/* json_dumps of the string json_bytes makes, without its quotes */
static char *reference(const char *s, size_t n, size_t *len)
{
	json_t *j = json_bytes(s, n);
	char *d = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(j);
	*len = strlen(d) - 2;
	memmove(d, d + 1, *len);
	return d;
}

static void check(const char *s, size_t n, size_t cap)
{
	size_t want_len;
	char *want = reference(s, n, &want_len);
	char *got = malloc(want_len + cap + 1);
	size_t off = 0, len = 0;
	assert_int_equal(jsonesc_len(s, n), want_len);
	while (off < n) {
		size_t w = jsonesc_some(s, n, &off, got + len, cap);
		assert_true(w > 0 && w <= cap);
		len += w;
	}
	assert_int_equal(len, want_len);
	assert_memory_equal(got, want, len);
	free(got);
	free(want);
}

static void test_special_bytes(void **state)
{
	(void)state;
	static const char s[] = "a\x01\x1f\x7f\"\\/\b\f\n\r\t\xe2\x80\xa8z\0q"
	                        "\xff\xc3(\xe2\x82\xf0\x9f\x98\x80\xed\xa0\x80";
	for (size_t cap = 12; cap < 40; cap++)
		check(s, sizeof(s) - 1, cap);
	check("", 0, 12);
}

static void test_random_bytes(void **state)
{
	(void)state;
	unsigned seed = 7;
	char buf[4096];
	for (int round = 0; round < 300; round++) {
		size_t n = (size_t)rand_r(&seed) % sizeof(buf);
		for (size_t i = 0; i < n; i++) {
			int r = rand_r(&seed);
			/* mostly ASCII and UTF-8 lead/continuation bytes */
			buf[i] = (char)(r % 3 ? r % 128 : 0x80 + r % 128);
		}
		check(buf, n, 12 + (size_t)rand_r(&seed) % 200);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_special_bytes),
	    cmocka_unit_test(test_random_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
