/* The Cloudflare face's shell text: quoting survives every byte a client
 * may send, and the wrapper runs the command with its own cwd and env and
 * restores the session's before the session hook saves it (checked by
 * running it with bash, with a stand-in for the hook's __sbx_save). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "api/cf/cf.h"

/* What bash prints for script (stdout), run with `bash -c`. */
static char *run_bash(const char *script)
{
	char path[] = "/tmp/sbx-cf-shell-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	FILE *f = fdopen(fd, "w");
	fputs(script, f);
	fclose(f);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "bash %s 2>&1", path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	static char out[4096];
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	pclose(p);
	unlink(path);
	return out;
}

static void test_quote_round_trips(void **state)
{
	(void)state;
	static const char *const words[] = {
	    "plain", "",      "it's", "''", "a b\tc\nd", "$(touch /tmp/x)",
	    "`id`",  "\\'\\", "*?[]", "!!", "--",        "\xc3\xa9"};
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		struct buf b;
		buf_init(&b, 0);
		buf_printf(&b, "printf '%%s|' ");
		cf_shell_quote(&b, words[i]);
		buf_printf(&b, "\n");
		char want[256];
		snprintf(want, sizeof(want), "%s|", words[i]);
		assert_string_equal(run_bash(buf_cstr(&b)), want);
		buf_free(&b);
	}
}

/* The session as the hook would save it at the shell's exit. */
static const char hook[] =
    "exec 63>/dev/null\n"
    "__sbx_save() { echo \"saved rc=$? $PWD ${ONLY-unset} $HOME\"; }\n";

static void test_wrap_scopes_cwd_and_env(void **state)
{
	(void)state;
	char *env[] = {"ONLY=for it", "HOME=/elsewhere", NULL};
	struct buf b;
	buf_init(&b, 0);
	/* the session: cwd /, ONLY unset, HOME set */
	buf_printf(&b, "%scd /; export HOME=/root; unset ONLY\n", hook);
	cf_shell_wrap(&b, "echo \"$PWD $ONLY $HOME\"; exit 3", "/tmp", env, 2);
	assert_string_equal(run_bash(buf_cstr(&b)),
	                    "/tmp for it /elsewhere\n"
	                    "saved rc=3 / unset /root\n");
	buf_free(&b);
}

static void test_wrap_survives_set_e(void **state)
{
	(void)state;
	char *env[] = {"ONLY=x", NULL};
	struct buf b;
	buf_init(&b, 0);
	buf_printf(&b, "%scd /; export HOME=/root\n", hook);
	cf_shell_wrap(&b, "set -eu; false; echo not reached", "/tmp", env, 1);
	assert_string_equal(run_bash(buf_cstr(&b)),
	                    "saved rc=1 / unset /root\n");
	buf_free(&b);
}

static void test_wrap_missing_cwd_fails_the_command(void **state)
{
	(void)state;
	struct buf b;
	buf_init(&b, 0);
	buf_printf(&b, "%scd /; export HOME=/root\n", hook);
	cf_shell_wrap(&b, "echo ran", "/nonexistent-dir", NULL, 0);
	assert_string_equal(run_bash(buf_cstr(&b)),
	                    "Failed to change directory to /nonexistent-dir\n"
	                    "saved rc=1 / unset /root\n");
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quote_round_trips),
	    cmocka_unit_test(test_wrap_scopes_cwd_and_env),
	    cmocka_unit_test(test_wrap_survives_set_e),
	    cmocka_unit_test(test_wrap_missing_cwd_fails_the_command),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
