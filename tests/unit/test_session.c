/* Session state: what the session hook writes, and how the session takes
 * it (cwd, exported variables, what is not carried). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/session.h"

static const char *getenv_s(struct session *s, const char *k)
{
	size_t kl = strlen(k);
	for (size_t i = 0; i < s->envc; i++)
		if (!strncmp(s->env[i], k, kl) && s->env[i][kl] == '=')
			return s->env[i] + kl + 1;
	return NULL;
}

static void test_defaults(void **state)
{
	(void)state;
	struct session *s = session_new("default", NULL, NULL, 0);
	assert_non_null(s);
	assert_string_equal(s->cwd, "/workspace");
	assert_non_null(getenv_s(s, "PATH"));
	assert_string_equal(getenv_s(s, "HOME"), "/root");
	session_free(s);
}

static void test_apply_record(void **state)
{
	(void)state;
	struct session *s = session_new("x", NULL, NULL, 0);
	static const char rec[] = "SBXSTATE\0/tmp\0A=1\0PATH=/bin\0SHLVL=2\0"
				  "PWD=/tmp\0_=/bin/true\0B=has=equals\0";
	assert_int_equal(session_apply_state(s, rec, sizeof(rec) - 1), 1);
	assert_string_equal(s->cwd, "/tmp");
	assert_string_equal(getenv_s(s, "A"), "1");
	assert_string_equal(getenv_s(s, "B"), "has=equals");
	assert_string_equal(getenv_s(s, "PATH"), "/bin");
	assert_null(getenv_s(s, "SHLVL"));
	assert_null(getenv_s(s, "PWD"));
	assert_null(getenv_s(s, "_"));
	assert_null(getenv_s(s, "HOME")); /* unset by the command: gone */
	session_free(s);
}

static void test_last_record_wins(void **state)
{
	(void)state;
	struct session *s = session_new("x", NULL, NULL, 0);
	/* junk a command wrote to fd 63 first, then the hook's record */
	static const char rec[] = "garbage SBXSTATE\0/evil\0E=1\0"
				  "SBXSTATE\0/good\0G=1\0";
	assert_int_equal(session_apply_state(s, rec, sizeof(rec) - 1), 1);
	assert_string_equal(s->cwd, "/good");
	assert_string_equal(getenv_s(s, "G"), "1");
	assert_null(getenv_s(s, "E"));
	session_free(s);
}

static void test_no_or_cut_record(void **state)
{
	(void)state;
	struct session *s = session_new("x", "/w", NULL, 0);
	assert_int_equal(session_apply_state(s, "", 0), 0);
	assert_int_equal(session_apply_state(s, "hello", 5), 0);
	static const char cut[] = "SBXSTATE\0/tmp\0A=1"; /* no final NUL */
	assert_true(session_apply_state(s, cut, sizeof(cut) - 1) < 0);
	static const char rel[] = "SBXSTATE\0tmp\0";
	assert_true(session_apply_state(s, rel, sizeof(rel) - 1) < 0);
	assert_string_equal(s->cwd, "/w"); /* untouched */
	assert_non_null(getenv_s(s, "PATH"));
	session_free(s);
}

static void test_env_for_overrides(void **state)
{
	(void)state;
	struct session *s = session_new("x", NULL, NULL, 0);
	const char *extra[] = {"HOME=/h", "NEW=1"};
	size_t n;
	const char **env = session_env_for(s, extra, 2, "BASH_ENV=/x", &n);
	assert_non_null(env);
	int home = 0, nw = 0, be = 0;
	for (size_t i = 0; i < n; i++) {
		if (!strncmp(env[i], "HOME=", 5)) {
			home++;
			assert_string_equal(env[i], "HOME=/h");
		}
		nw += !strcmp(env[i], "NEW=1");
		be += !strcmp(env[i], "BASH_ENV=/x");
	}
	assert_int_equal(home, 1);
	assert_int_equal(nw, 1);
	assert_int_equal(be, 1);
	assert_null(env[n]);
	free(env);
	session_free(s);
}

static void test_setenv_replaces(void **state)
{
	(void)state;
	struct session *s = session_new("x", NULL, NULL, 0);
	size_t before = s->envc;
	assert_int_equal(session_setenv(s, "HOME=/new"), 0);
	assert_int_equal(s->envc, before);
	assert_string_equal(getenv_s(s, "HOME"), "/new");
	assert_int_equal(session_setenv(s, "Z=9"), 0);
	assert_int_equal(s->envc, before + 1);
	session_free(s);
}

static void test_state_round_trip(void **state)
{
	(void)state;
	struct session *s = session_new("x", "/tmp/d", NULL, 0);
	assert_int_equal(session_setenv(s, "A=1"), 0);
	assert_int_equal(session_setenv(s, "B=has=equals"), 0);
	assert_int_equal(session_setenv(s, "EMPTY="), 0);
	char *buf;
	size_t len;
	assert_int_equal(session_state_encode(s, &buf, &len), 0);
	assert_int_equal(buf[len - 1], '\0');
	assert_string_equal(buf, "/tmp/d");

	struct session *t = session_new("y", NULL, NULL, 0);
	assert_int_equal(session_state_decode(t, buf, len), 0);
	assert_string_equal(t->cwd, "/tmp/d");
	assert_int_equal(t->envc, s->envc);
	for (size_t i = 0; i < s->envc; i++)
		assert_string_equal(t->env[i], s->env[i]);
	assert_null(t->env[t->envc]);
	assert_string_equal(getenv_s(t, "B"), "has=equals");
	assert_string_equal(getenv_s(t, "EMPTY"), "");
	/* the same state, the same hash; another state, another */
	char *again;
	size_t alen;
	assert_int_equal(session_state_encode(t, &again, &alen), 0);
	assert_int_equal(alen, len);
	assert_true(session_state_hash(buf, len) == session_state_hash(again, alen));
	assert_int_equal(session_setenv(t, "A=2"), 0);
	free(again);
	assert_int_equal(session_state_encode(t, &again, &alen), 0);
	assert_true(session_state_hash(buf, len) != session_state_hash(again, alen));
	free(again);
	free(buf);
	session_free(t);
	session_free(s);
}

static void test_state_decode_refuses_damage(void **state)
{
	(void)state;
	struct session *s = session_new("x", "/w", NULL, 0);
	size_t envc = s->envc;
	static const char cut[] = "/tmp\0A=1"; /* no final NUL */
	static const char rel[] = "tmp\0A=1\0";
	static const char noeq[] = "/tmp\0A=1\0JUNK\0";
	static const char noname[] = "/tmp\0=1\0";
	assert_int_equal(session_state_decode(s, cut, sizeof(cut) - 1), -EINVAL);
	assert_int_equal(session_state_decode(s, rel, sizeof(rel) - 1), -EINVAL);
	assert_int_equal(session_state_decode(s, noeq, sizeof(noeq) - 1), -EINVAL);
	assert_int_equal(session_state_decode(s, noname, sizeof(noname) - 1),
			 -EINVAL);
	assert_int_equal(session_state_decode(s, "", 0), -EINVAL);
	assert_int_equal(session_state_decode(s, NULL, 0), -EINVAL);
	/* nothing of it was taken */
	assert_string_equal(s->cwd, "/w");
	assert_int_equal(s->envc, envc);
	/* a cwd alone is a state: no variables */
	assert_int_equal(session_state_decode(s, "/", 2), 0);
	assert_string_equal(s->cwd, "/");
	assert_int_equal(s->envc, 0);
	session_free(s);
}

static void test_state_is_bounded(void **state)
{
	(void)state;
	struct session *s = session_new("x", "/w", NULL, 0);
	size_t big = SESSION_STATE_MAX;
	char *kv = malloc(big + 3);
	assert_non_null(kv);
	memset(kv, 'v', big + 2);
	memcpy(kv, "K=", 2);
	kv[big + 2] = '\0';
	assert_int_equal(session_setenv(s, kv), 0);
	char *buf = NULL;
	size_t len = 0;
	assert_int_equal(session_state_encode(s, &buf, &len), -E2BIG);
	assert_null(buf);
	/* and a state over the bound is refused when read back */
	char *over = calloc(1, SESSION_STATE_MAX + 1);
	assert_non_null(over);
	over[0] = '/';
	assert_int_equal(session_state_decode(s, over, SESSION_STATE_MAX + 1),
			 -EINVAL);
	free(over);
	free(kv);
	session_free(s);
}

static void test_state_cost_counts_as_execve(void **state)
{
	(void)state;
	static const char rec[] = "SBXSTATE\0/tmp\0A=1\0SHLVL=2\0BB=22\0";
	/* "/tmp" + NUL, then A=1 and BB=22, each with its NUL and a pointer
	 * (SHLVL is not carried) */
	assert_int_equal(session_state_cost(rec, sizeof(rec) - 1),
			 5 + (4 + 8) + (6 + 8));
	assert_int_equal(session_state_cost("x", 1), 0);
	static const char cut[] = "SBXSTATE\0/tmp\0A=1";
	assert_int_equal(session_state_cost(cut, sizeof(cut) - 1), -EINVAL);
	size_t big = SESSION_MAX_VAR + 10;
	char *huge = malloc(big + 32);
	memcpy(huge, "SBXSTATE\0/\0X=", 13);
	memset(huge + 13, 'a', big);
	huge[13 + big] = '\0';
	assert_int_equal(session_state_cost(huge, 14 + big), -E2BIG);
	free(huge);
	struct session *s = session_new("x", "/w", NULL, 0);
	assert_int_equal(session_apply_state(s, rec, sizeof(rec) - 1), 1);
	assert_int_equal(session_env_cost(s), 5 + (4 + 8) + (6 + 8));
	session_free(s);
}

static void test_record_strings_in_one_block(void **state)
{
	(void)state;
	struct session *s = session_new("x", NULL, NULL, 0);
	static const char rec[] = "SBXSTATE\0/tmp\0A=1\0B=2\0C=3\0";
	assert_int_equal(session_apply_state(s, rec, sizeof(rec) - 1), 1);
	assert_int_equal(s->envc, 3);
	assert_ptr_equal(s->env[0], s->block);
	assert_ptr_equal(s->env[2], s->block + 8);
	/* entries replaced or removed one by one, then the block freed:
	 * (under ASan) no double free, no leak */
	assert_int_equal(session_setenv(s, "B=two"), 0);
	session_unsetenv(s, "A=");
	assert_string_equal(getenv_s(s, "B"), "two");
	assert_string_equal(getenv_s(s, "C"), "3");
	assert_int_equal(session_apply_state(s, rec, sizeof(rec) - 1), 1);
	assert_string_equal(getenv_s(s, "B"), "2");
	session_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_apply_record),
		cmocka_unit_test(test_last_record_wins),
		cmocka_unit_test(test_no_or_cut_record),
		cmocka_unit_test(test_env_for_overrides),
		cmocka_unit_test(test_setenv_replaces),
		cmocka_unit_test(test_state_round_trip),
		cmocka_unit_test(test_state_decode_refuses_damage),
		cmocka_unit_test(test_state_is_bounded),
		cmocka_unit_test(test_state_cost_counts_as_execve),
		cmocka_unit_test(test_record_strings_in_one_block),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
