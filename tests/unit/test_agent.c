/* The agents' executor's pure parts (core/agent.c): the <run> tags of an
 * answer and their summaries as seed 000's executeCommands writes them,
 * and the ends of a stream that a model gets, cut at characters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "core/agent.h"

static void test_tags(void **state)
{
	(void)state;
	const char *s =
	    "a <run> ls </run> b <run></run><run>x<run>y</run> <run>z";
	size_t pos = 0, cl;
	const char *cmd;
	assert_int_equal(agent_tag_next(s, strlen(s), &pos, &cmd, &cl), 1);
	assert_int_equal(cl, 4);
	assert_memory_equal(cmd, " ls ", 4);
	assert_int_equal(agent_tag_next(s, strlen(s), &pos, &cmd, &cl), 1);
	assert_int_equal(cl, 0);
	assert_int_equal(agent_tag_next(s, strlen(s), &pos, &cmd, &cl), 1);
	/* non-greedy from the first <run>, as the regex */
	assert_int_equal(cl, 7);
	assert_memory_equal(cmd, "x<run>y", 7);
	/* an unclosed tag is no tag */
	assert_int_equal(agent_tag_next(s, strlen(s), &pos, &cmd, &cl), 0);
	/* case matters */
	pos = 0;
	assert_int_equal(agent_tag_next("<RUN>ls</RUN>", 13, &pos, &cmd, &cl),
	                 0);
}

static void test_trim(void **state)
{
	(void)state;
	const char *s = " \t\n\xc2\xa0 echo hi \r\n\xe2\x80\xa8";
	size_t l = strlen(s);
	agent_trim(&s, &l);
	assert_int_equal(l, 7);
	assert_memory_equal(s, "echo hi", 7);
	s = "   ";
	l = 3;
	agent_trim(&s, &l);
	assert_int_equal(l, 0);
}

static void test_summary(void **state)
{
	(void)state;
	struct buf b;
	buf_init(&b, 0);
	agent_summary(&b, "echo hi", "hi\n", "", NULL);
	agent_summary(&b, "ls nope", "", "ls: nope\n", NULL);
	agent_summary(&b, "true", "", "", NULL);
	agent_summary(&b, "sleep 9", NULL, NULL, "timeout");
	assert_string_equal(buf_cstr(&b), "\n\nOutput (echo hi):\nhi\n"
	                                  "\n\nOutput (ls nope):\nls: nope\n"
	                                  "\n\nOutput (true):\n[no output]"
	                                  "\n\nError (sleep 9):\ntimeout");
	buf_free(&b);
}

static void test_strip(void **state)
{
	(void)state;
	const char *s =
	    "I'll create the file for you.\n<run>echo 'Hello World' > "
	    "hello.txt</run>\n\nOutput (echo 'Hello World' > hello.txt):\n"
	    "[no output]";
	char *o = agent_strip_tags(s, strlen(s));
	/* seed 001's example, byte for byte */
	assert_string_equal(o,
	                    "I'll create the file for you.\n\n\nOutput (echo "
	                    "'Hello World' > hello.txt):\n[no output]");
	free(o);
	/* output that holds a tag loses it too, as the regex does */
	s = "<run>cat f</run>\n\nOutput (cat f):\nx<run>y</run>z\n";
	o = agent_strip_tags(s, strlen(s));
	assert_string_equal(o, "Output (cat f):\nxz");
	free(o);
	o = agent_strip_tags("<run>a</run>", 12);
	assert_string_equal(o, "");
	free(o);
}

static void test_not_found(void **state)
{
	(void)state;
	const char *e = "bash: line 1: nosuch: command not found\n";
	char *n = agent_not_found_name(127, e, strlen(e));
	assert_string_equal(n, "nosuch");
	free(n);
	assert_null(agent_not_found_name(1, e, strlen(e)));
	assert_null(agent_not_found_name(127, "x", 1));
}

static void keep(const char *data, size_t len, size_t chunk, size_t head,
                 size_t tail, struct agent_stream *st)
{
	struct agent_keep k;
	agent_keep_init(&k, head, tail);
	for (size_t i = 0; i < len; i += chunk)
		assert_int_equal(
		    agent_keep_add(&k, data + i,
		                   len - i < chunk ? len - i : chunk),
		    0);
	assert_int_equal(agent_keep_finish(&k, head, tail, st), 0);
	agent_keep_free(&k);
}

static void test_keep_ends(void **state)
{
	(void)state;
	size_t n = 50000;
	char *y = malloc(n);
	for (size_t i = 0; i < n; i += 2)
		memcpy(y + i, "y\n", 2);
	/* however the output comes in, the same ends */
	size_t chunks[] = {1, 7, 4096, 65536};
	for (size_t c = 0; c < 4; c++) {
		struct agent_stream st;
		keep(y, n, chunks[c], 500, 10000, &st);
		assert_int_equal(strlen(st.head), 500);
		assert_int_equal(strlen(st.tail), 10000);
		assert_memory_equal(st.tail, y + n - 10000, 10000);
		assert_true(st.cut);
		assert_int_equal(st.chars, n);
		free(st.head);
		free(st.tail);
	}
	struct agent_stream st;
	keep("short", 5, 5, 500, 10000, &st);
	assert_string_equal(st.head, "short");
	assert_string_equal(st.tail, "short");
	assert_false(st.cut);
	free(st.head);
	free(st.tail);
	/* exactly the limit is not cut */
	keep(y, 10000, 3, 0, 10000, &st);
	assert_false(st.cut);
	assert_int_equal(strlen(st.tail), 10000);
	free(st.head);
	free(st.tail);
	free(y);
}

static void test_keep_utf8(void **state)
{
	(void)state;
	/* 3000 "é" (2 bytes each): 600 characters kept of each end */
	size_t n = 3000;
	char *s = malloc(2 * n);
	for (size_t i = 0; i < n; i++)
		memcpy(s + 2 * i, "\xc3\xa9", 2);
	struct agent_stream st;
	keep(s, 2 * n, 333, 600, 600, &st);
	assert_int_equal(strlen(st.head), 1200);
	assert_int_equal(strlen(st.tail), 1200);
	assert_memory_equal(st.tail, s, 1200);
	assert_true(st.cut);
	free(st.head);
	free(st.tail);
	/* invalid bytes read as U+FFFD */
	keep("a\xff"
	     "b",
	     3, 1, 10, 10, &st);
	assert_string_equal(st.head, "a\xef\xbf\xbd"
	                             "b");
	free(st.head);
	free(st.tail);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tags),      cmocka_unit_test(test_trim),
	    cmocka_unit_test(test_summary),   cmocka_unit_test(test_strip),
	    cmocka_unit_test(test_not_found), cmocka_unit_test(test_keep_ends),
	    cmocka_unit_test(test_keep_utf8),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
