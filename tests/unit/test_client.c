/* libsbx's pure parts: the server-sent-events parser (events split
 * anywhere, CRLF, comments, multi-line data, a last event without its
 * blank line), base64 both ways and URL escaping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

struct seen {
	char log[1024];
	int n;
	int stop_at; /* return nonzero from this event on (1-based); 0 never */
};

static int on_event(void *ud, const char *event, const char *data, size_t len,
                    const char *id)
{
	struct seen *s = ud;
	s->n++;
	size_t at = strlen(s->log);
	snprintf(s->log + at, sizeof(s->log) - at, "[%s|%.*s|%s]", event,
	         (int)len, data, id);
	return s->stop_at && s->n >= s->stop_at;
}

static void feed_split(const char *text, size_t step, struct seen *s)
{
	struct sse p = {.on_event = on_event, .ud = s};
	size_t n = strlen(text);
	for (size_t i = 0; i < n; i += step)
		sse_feed(&p, text + i, i + step > n ? n - i : step);
	sse_free(&p);
}

static void test_sse_events_whatever_the_chunks(void **state)
{
	(void)state;
	const char *text = ": keepalive\n\n"
	                   "event: stdout\r\ndata: aGkK\r\n\r\n"
	                   "event: stderr\nid: 7\ndata:YnllCg==\n\n"
	                   "data: line one\ndata: line two\n\n"
	                   "event: exit\ndata: {\"exit_code\":3}\n\n";
	const char *want =
	    "[stdout|aGkK|][stderr|YnllCg==|7]"
	    "[message|line one\nline two|7][exit|{\"exit_code\":3}|7]";
	for (size_t step = 1; step <= strlen(text); step++) {
		struct seen s = {0};
		feed_split(text, step, &s);
		assert_string_equal(s.log, want);
	}
}

static void test_sse_callback_stops_the_stream(void **state)
{
	(void)state;
	struct seen s = {.stop_at = 1};
	struct sse p = {.on_event = on_event, .ud = &s};
	const char *text = "data: a\n\ndata: b\n\n";
	assert_int_not_equal(sse_feed(&p, text, strlen(text)), 0);
	assert_int_equal(s.n, 1);
	sse_free(&p);
}

static void test_sse_last_event_without_blank_line(void **state)
{
	(void)state;
	struct seen s = {0};
	struct sse p = {.on_event = on_event, .ud = &s};
	const char *text = "event: exit\ndata: {}";
	sse_feed(&p, text, strlen(text));
	assert_int_equal(s.n, 0);
	sse_feed(&p, "\n\n", 2); /* what call_run does at the end */
	assert_string_equal(s.log, "[exit|{}|]");
	sse_free(&p);
}

static void test_base64_round_trip(void **state)
{
	(void)state;
	unsigned char in[256], out[256];
	for (int i = 0; i < 256; i++)
		in[i] = (unsigned char)(i * 7);
	for (size_t n = 0; n <= sizeof(in); n += 17) {
		char *e = b64_encode(in, n);
		assert_non_null(e);
		assert_int_equal(strlen(e), (n + 2) / 3 * 4);
		assert_int_equal(b64_decode(e, strlen(e), out), (ssize_t)n);
		assert_memory_equal(in, out, n);
		free(e);
	}
	char *e = b64_encode("hi\n", 3);
	assert_string_equal(e, "aGkK");
	free(e);
	assert_int_equal(b64_decode("a$", 2, out), -1);
}

static void test_url_escape(void **state)
{
	(void)state;
	char *e = url_escape("a b/c%d?e#f", true);
	assert_string_equal(e, "a%20b/c%25d%3Fe%23f");
	free(e);
	e = url_escape("x/y", false);
	assert_string_equal(e, "x%2Fy");
	free(e);
}

static void test_client_refuses_a_bad_url(void **state)
{
	(void)state;
	struct sbx_error err;
	assert_null(sbx_client_new("ftp://x", NULL, &err));
	assert_string_equal(err.code, "usage");
	assert_null(sbx_client_new("", NULL, &err));
	struct sbx_client *c = sbx_client_new("http://127.0.0.1:1/", "t", &err);
	assert_non_null(c);
	/* nothing listens on port 1 */
	struct sbx_sandbox *s = NULL;
	assert_int_equal(sbx_sandbox_info(c, "x", &s, &err), -1);
	assert_string_equal(err.code, "connect");
	assert_int_equal(err.status, 0);
	sbx_client_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sse_events_whatever_the_chunks),
	    cmocka_unit_test(test_sse_callback_stops_the_stream),
	    cmocka_unit_test(test_sse_last_event_without_blank_line),
	    cmocka_unit_test(test_base64_round_trip),
	    cmocka_unit_test(test_url_escape),
	    cmocka_unit_test(test_client_refuses_a_bad_url),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
