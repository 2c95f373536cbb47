/* The room assistant's model client (core/llm.c): the endpoint's URL from
 * --llm-url, and the text of a chat-completions answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "core/llm.h"
#include "lib/err.h"

static void check_url(const char *in, const char *want)
{
	char *u = llm_completions_url(in);
	assert_string_equal(u, want);
	free(u);
}

static void test_url(void **state)
{
	(void)state;
	check_url("http://127.0.0.1:8081/v1",
	          "http://127.0.0.1:8081/v1/chat/completions");
	check_url("http://127.0.0.1:11434/v1/",
	          "http://127.0.0.1:11434/v1/chat/completions");
	check_url("https://api.example.com/v1/chat/completions",
	          "https://api.example.com/v1/chat/completions");
	check_url("http://h/x/chat/completions/",
	          "http://h/x/chat/completions");
}

static void test_parse(void **state)
{
	(void)state;
	struct sbx_err err = {0};
	char *t = NULL;
	const char *ok = "{\"choices\":[{\"message\":{\"role\":\"assistant\","
	                 "\"content\":\"hi <run>ls</run>\"}}]}";
	assert_int_equal(llm_parse_answer(ok, strlen(ok), &t, &err), 0);
	assert_string_equal(t, "hi <run>ls</run>");
	free(t);
	const char *bad[] = {
	    "nope", "{}", "{\"choices\":[]}",
	    "{\"choices\":[{\"message\":{\"content\":null}}]}"};
	for (size_t i = 0; i < 4; i++) {
		sbx_err_clear(&err);
		t = (char *)"unset";
		assert_int_equal(
		    llm_parse_answer(bad[i], strlen(bad[i]), &t, &err),
		    -EBADMSG);
		assert_null(t);
		assert_int_equal(err.code, EBADMSG);
		assert_true(err.msg[0] != '\0');
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_url),
	    cmocka_unit_test(test_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
