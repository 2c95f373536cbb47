/* The Cloudflare face's MIME types, as the container's readFile shows
 * them: by extension first, then by the first bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "api/cf/cf.h"

static void test_by_extension(void **state)
{
	(void)state;
	assert_string_equal(cf_mime_of("/w/a.json", "", 0, true),
	                    "application/json");
	assert_string_equal(cf_mime_of("/w/A.PNG", "text", 4, true),
	                    "image/png"); /* the name wins, any case */
	assert_string_equal(cf_mime_of("/w/x.tar.gz", "", 0, true),
	                    "application/gzip");
	/* a leading dot is a hidden file, not an extension */
	assert_string_equal(cf_mime_of("/w/.bashrc", "x=1\n", 4, true),
	                    "text/plain");
}

static void test_by_content(void **state)
{
	(void)state;
	static const char png[] = "\x89PNG\r\n\x1a\nrest";
	assert_string_equal(cf_mime_of("/w/blob", png, sizeof(png) - 1, true),
	                    "image/png");
	static const char elf[] = "\x7f"
	                          "ELF\x02\x01";
	assert_string_equal(cf_mime_of("/w/prog", elf, sizeof(elf) - 1, true),
	                    "application/x-executable");
	assert_string_equal(cf_mime_of("/w/empty", "", 0, true),
	                    "inode/x-empty");
	assert_string_equal(cf_mime_of("/w/notyet", "", 0, false),
	                    "application/octet-stream");
	assert_string_equal(cf_mime_of("/w/bin", "a\0b", 3, true),
	                    "application/octet-stream");
	/* UTF-8 cut by the sniff window is still text; cut at the end of a
	 * complete file it is not */
	static const char cut[] = "caf\xc3";
	assert_string_equal(cf_mime_of("/w/t", cut, 4, false), "text/plain");
	assert_string_equal(cf_mime_of("/w/t", cut, 4, true),
	                    "application/octet-stream");
}

static void test_binary_or_text(void **state)
{
	(void)state;
	assert_false(cf_mime_binary("text/plain"));
	assert_false(cf_mime_binary("application/json"));
	assert_false(cf_mime_binary("application/ld+json"));
	assert_false(cf_mime_binary("image/svg+xml"));
	assert_true(cf_mime_binary("image/png"));
	assert_true(cf_mime_binary("application/octet-stream"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_by_extension),
	    cmocka_unit_test(test_by_content),
	    cmocka_unit_test(test_binary_or_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
