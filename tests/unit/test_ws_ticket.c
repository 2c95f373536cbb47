/* The WebSocket handshake's accept key (http/ws.c, RFC 6455 section 1.3's
 * example) and the terminal tickets (api/ticket.c): one use, one sandbox,
 * the tenant they were made for. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "api/ticket.h"
#include "http/ws.h"

static void test_accept_key_rfc_example(void **state)
{
	char out[29];
	(void)state;
	ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out);
	assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

static void test_ticket_once_for_its_sandbox(void **state)
{
	static const char alpha[] = "alpha", beta[] = "beta";
	char a[TICKET_LEN + 1], b[TICKET_LEN + 1], c[TICKET_LEN + 1];
	(void)state;
	assert_true(ticket_new(alpha, "box", a) > 0);
	assert_true(ticket_new(beta, "box", b) > 0);
	assert_true(ticket_new(alpha, "other", c) > 0);
	assert_int_equal(strlen(a), TICKET_LEN);
	assert_memory_equal(a, "tk_", 3);
	assert_string_not_equal(a, b);
	assert_ptr_equal(ticket_take(b, "box"), beta);
	assert_ptr_equal(ticket_take(a, "box"), alpha);
	assert_null(ticket_take(a, "box"));   /* used up */
	assert_null(ticket_take(c, "box"));   /* another sandbox's ... */
	assert_null(ticket_take(c, "other")); /* ... and used up by that */
	assert_null(ticket_take("tk_", "box"));
	assert_null(ticket_take("", "box"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_accept_key_rfc_example),
	    cmocka_unit_test(test_ticket_once_for_its_sandbox),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
