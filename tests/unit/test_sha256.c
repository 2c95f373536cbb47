/* SHA-256 against the FIPS 180-4 examples and sha256sum, however the input
 * is cut into updates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "lib/sha256.h"

static void test_vectors(void **state)
{
	(void)state;
	char hex[65];
	sha256_hex("", 0, hex);
	assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb924"
	                         "27ae41e4649b934ca495991b7852b855");
	sha256_hex("abc", 3, hex);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223"
	                         "b00361a396177a9cb410ff61f20015ad");
	const char *two =
	    "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	sha256_hex(two, strlen(two), hex);
	assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039"
	                         "a33ce45964ff2167f6ecedd419db06c1");
}

/* A million 'a's, fed in pieces of every size from 1 to 200. */
static void test_million_in_pieces(void **state)
{
	(void)state;
	char *a = malloc(1000000);
	char hex[65];
	assert_non_null(a);
	memset(a, 'a', 1000000);
	struct sha256 s;
	sha256_init(&s);
	size_t off = 0, step = 1;
	while (off < 1000000) {
		size_t n = step < 1000000 - off ? step : 1000000 - off;
		sha256_update(&s, a + off, n);
		off += n;
		step = step % 200 + 1;
	}
	sha256_final_hex(&s, hex);
	assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67"
	                         "f1809a48a497200e046d39ccc7112cd0");
	free(a);
}

/* Lengths around the padding boundaries (55, 56, 63, 64, 119, 120). */
static void test_boundaries(void **state)
{
	(void)state;
	static const struct {
		size_t n;
		const char *want;
	} v[] = {
	    {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734"
	         "318"},
	    {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec67"
	         "38a"},
	    {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2"
	         "f34"},
	    {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df15466"
	         "8eb"},
	};
	char buf[128], hex[65];
	memset(buf, 'a', sizeof(buf));
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		sha256_hex(buf, v[i].n, hex);
		assert_string_equal(hex, v[i].want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vectors),
	    cmocka_unit_test(test_million_in_pieces),
	    cmocka_unit_test(test_boundaries),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
