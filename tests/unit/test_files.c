/* The builtins' listing protocol as the faces receive it: entries parsed
 * whatever their names hold, and whole however the bytes are cut. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/files.h"

static void test_entry_fields(void **state)
{
	(void)state;
	static const char p[] = "f 1234 644 1700000000123 dir/a file\nx";
	struct file_entry e;
	assert_int_equal(file_entry_parse(p, sizeof(p) - 1, &e), 0);
	assert_int_equal(e.type, FILE_REGULAR);
	assert_int_equal(e.size, 1234);
	assert_int_equal(e.mode, 0644);
	assert_true(e.mtime_ms == 1700000000123ull);
	/* a name keeps its spaces and newlines */
	assert_int_equal(e.path_len, strlen("dir/a file\nx"));
	assert_memory_equal(e.path, "dir/a file\nx", e.path_len);
	assert_string_equal(file_type_name(e.type), "file");
	static const char d[] = "d 0 755 1 sub";
	assert_int_equal(file_entry_parse(d, sizeof(d) - 1, &e), 0);
	assert_string_equal(file_type_name(e.type), "directory");
	static const char l[] = "l 3 777 1 ln";
	assert_int_equal(file_entry_parse(l, sizeof(l) - 1, &e), 0);
	assert_string_equal(file_type_name(e.type), "symlink");
}

static void test_bad_entries_refused(void **state)
{
	(void)state;
	struct file_entry e;
	static const char *const bad[] = {"", "f", "f 1 644", "f x 644 1 n",
	                                  "f 1 644 1 "};
	/* the last has an empty name: nothing to list */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_true(file_entry_parse(bad[i], strlen(bad[i]), &e) < 0);
	/* a NUL inside is never part of an entry */
	static const char nul[] = "f 1 644 1 a\0b";
	assert_true(file_entry_parse(nul, sizeof(nul) - 1, &e) < 0);
}

struct seen {
	char names[16][32];
	int n;
};

static int collect(void *ctx, const struct file_entry *e)
{
	struct seen *s = ctx;
	snprintf(s->names[s->n++], 32, "%.*s", (int)e->path_len, e->path);
	return s->n == 2; /* "full" after the second */
}

static void test_feed_any_cut(void **state)
{
	(void)state;
	static const char all[] = "f 1 644 1 one\0d 0 755 2 two\0"
	                          "junk\0l 1 777 3 three\0";
	size_t len = sizeof(all) - 1;
	/* every way of cutting it in two gives the same entries */
	for (size_t cut = 0; cut <= len; cut++) {
		struct seen s = {0};
		struct buf partial;
		buf_init(&partial, 0);
		int full = file_listing_feed(&partial, all, cut, collect, &s);
		full |= file_listing_feed(&partial, all + cut, len - cut,
		                          collect, &s);
		assert_int_equal(s.n, 3);
		assert_string_equal(s.names[0], "one");
		assert_string_equal(s.names[1], "two");
		assert_string_equal(s.names[2], "three");
		assert_int_equal(full, 1);
		assert_int_equal(partial.len, 0);
		buf_free(&partial);
	}
}

static void test_stat_and_write_answers(void **state)
{
	(void)state;
	struct file_entry e;
	assert_int_equal(file_stat_parse("S d 4096 755 1700000000123", &e), 0);
	assert_int_equal(e.type, FILE_DIR);
	assert_int_equal(e.size, 4096);
	assert_int_equal(e.mode, 0755);
	assert_int_equal(e.mtime_ms, 1700000000123ull);
	assert_int_equal(e.path_len, 0);
	assert_int_equal(file_stat_parse("S l 7 777 1", &e), 0);
	assert_int_equal(e.type, FILE_SYMLINK);
	assert_true(file_stat_parse("OK created", &e) < 0);
	assert_true(file_stat_parse("S f 12", &e) < 0);

	uint64_t n;
	bool created;
	assert_int_equal(file_write_parse("OK 12 created", &n, &created), 0);
	assert_int_equal(n, 12);
	assert_true(created);
	assert_int_equal(file_write_parse("OK 0 replaced", &n, &created), 0);
	assert_int_equal(n, 0);
	assert_false(created);
	assert_true(file_write_parse("OK created", &n, &created) < 0);
	assert_true(file_write_parse("S f 1 644 1", &n, &created) < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stat_and_write_answers),
	    cmocka_unit_test(test_entry_fields),
	    cmocka_unit_test(test_bad_entries_refused),
	    cmocka_unit_test(test_feed_any_cut),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
