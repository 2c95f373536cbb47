/* Session state: what the session hook writes (declare -px, read back by
 * the daemon), and how the session takes it (cwd, exported variables, what
 * is not carried); a real bash runs the hook once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/session_internal.h"

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

/* What a face sees of a session is what the session holds, and follows
 * its changes. */
static void test_info_view(void **state)
{
	(void)state;
	const char *env[] = {"A=1", "B=2"};
	struct session *s = session_new("room", "/tmp", env, 2);
	assert_non_null(s);
	struct session_info si;
	session_info(s, &si);
	assert_string_equal(si.id, "room");
	assert_string_equal(si.cwd, "/tmp");
	assert_string_equal(session_cwd(s), "/tmp");
	assert_int_equal(si.envc, 2);
	assert_string_equal(si.env[0], "A=1");
	assert_string_equal(si.env[1], "B=2");
	assert_null(si.env[2]);
	assert_int_equal(si.timeout_ms, 0);
	session_set_timeout(s, 1234);
	assert_int_equal(session_setenv(s, "C=3"), 0);
	session_info(s, &si);
	assert_int_equal(si.timeout_ms, 1234);
	assert_int_equal(si.envc, 3);
	assert_string_equal(si.env[2], "C=3");
	session_free(s);
}

/* A record as the hook writes it: mark, cwd, declare -px, NUL. */
#define REC(cwd, text) "SBXSTATE\0" cwd "\0" text "\0"

static void test_apply_record(void **state)
{
	(void)state;
	struct session *s = session_new("x", NULL, NULL, 0);
	static const char rec[] = REC("/tmp", "declare -x A=\"1\"\n"
	                                      "declare -x OLDPWD\n"
	                                      "declare -x PATH=\"/bin\"\n"
	                                      "declare -x PWD=\"/tmp\"\n"
	                                      "declare -x SHLVL=\"2\"\n"
	                                      "declare -x _=\"/bin/true\"\n"
	                                      "declare -x B=\"has=equals\"\n"
	                                      "declare -x EMPTY=\"\"\n");
	assert_int_equal(session_apply_state(s, rec, sizeof(rec) - 1), 1);
	assert_string_equal(s->cwd, "/tmp");
	assert_string_equal(getenv_s(s, "A"), "1");
	assert_string_equal(getenv_s(s, "B"), "has=equals");
	assert_string_equal(getenv_s(s, "PATH"), "/bin");
	assert_string_equal(getenv_s(s, "EMPTY"), "");
	assert_null(getenv_s(s, "OLDPWD")); /* exported, never set */
	assert_null(getenv_s(s, "SHLVL"));
	assert_null(getenv_s(s, "PWD"));
	assert_null(getenv_s(s, "_"));
	assert_null(getenv_s(s, "HOME")); /* unset by the command: gone */
	assert_int_equal(s->envc, 4);
	session_free(s);
}

static void test_last_record_wins(void **state)
{
	(void)state;
	struct session *s = session_new("x", NULL, NULL, 0);
	/* junk a command wrote to fd 63 first, then the hook's record */
	static const char rec[] =
	    "garbage SBXSTATE\0/evil\0declare -x E=\"1\"\n\0"
	    "more junk" REC("/good", "declare -x G=\"1\"\n");
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
	/* the shell died while writing: no final NUL */
	static const char cut[] = "SBXSTATE\0/tmp\0declare -x A=\"1\"\n";
	assert_int_equal(session_apply_state(s, cut, sizeof(cut) - 1), -EINVAL);
	static const char cut2[] = "SBXSTATE\0/tmp";
	assert_int_equal(session_apply_state(s, cut2, sizeof(cut2) - 1),
	                 -EINVAL);
	static const char rel[] = REC("tmp", "");
	assert_int_equal(session_apply_state(s, rel, sizeof(rel) - 1), -EINVAL);
	assert_string_equal(s->cwd, "/w"); /* untouched */
	assert_non_null(getenv_s(s, "PATH"));
	/* no variable at all is a state too */
	static const char none[] = REC("/", "");
	assert_int_equal(session_apply_state(s, none, sizeof(none) - 1), 1);
	assert_string_equal(s->cwd, "/");
	assert_int_equal(s->envc, 0);
	session_free(s);
}

/* One declare -px text; returns session_apply_state's result. */
static int apply_text(struct session *s, const char *text)
{
	size_t tl = strlen(text);
	char *rec = malloc(tl + 32);
	assert_non_null(rec);
	memcpy(rec, "SBXSTATE\0/d\0", 12);
	memcpy(rec + 12, text, tl);
	rec[12 + tl] = '\0';
	int r = session_apply_state(s, rec, 12 + tl + 1);
	free(rec);
	return r;
}

static void test_declare_quoting(void **state)
{
	(void)state;
	struct session *s = session_new("x", NULL, NULL, 0);
	/* what bash 5.2 prints, taken from `declare -px` */
	assert_int_equal(
	    apply_text(s, "declare -x NL=$'line1\\nline2'\n"
	                  "declare -x Q=\"q\\\"uo'te\"\n"
	                  "declare -x BS=\"back\\\\slash\"\n"
	                  "declare -x D=\"\\$dollar \\`tick\\`\"\n"
	                  "declare -x U=\"h\xc3\xa9llo \xe2\x9c\x93\"\n"
	                  "declare -x BIN=$'\\001\\177\\377\\376'\n"
	                  "declare -x T=$'tab\\there\\r'\n"
	                  "declare -x ESC=$'h\\303\\251\\E'\n"
	                  "declare -x BANG=\"!bang\"\n"
	                  "declare -x SQ=$'it\\'s \\\\ \"x\"'\n"),
	    1);
	assert_string_equal(getenv_s(s, "NL"), "line1\nline2");
	assert_string_equal(getenv_s(s, "Q"), "q\"uo'te");
	assert_string_equal(getenv_s(s, "BS"), "back\\slash");
	assert_string_equal(getenv_s(s, "D"), "$dollar `tick`");
	assert_string_equal(getenv_s(s, "U"), "h\xc3\xa9llo \xe2\x9c\x93");
	assert_string_equal(getenv_s(s, "BIN"), "\001\177\377\376");
	assert_string_equal(getenv_s(s, "T"), "tab\there\r");
	assert_string_equal(getenv_s(s, "ESC"), "h\xc3\xa9\033");
	assert_string_equal(getenv_s(s, "BANG"), "!bang");
	assert_string_equal(getenv_s(s, "SQ"), "it's \\ \"x\"");
	assert_int_equal(s->envc, 10);
	/* quoting bash reads but does not print today: single quotes,
	 * backslashes outside quotes, \x \u \c escapes, a quote across lines,
	 * a backslash before an ordinary character inside double quotes */
	assert_int_equal(
	    apply_text(s, "declare -x A='a b'\\ c\"d\"$'\\x41\\u00e9\\cA'\n"
	                  "declare -x ML=\"one\ntwo\"\n"
	                  "declare -x K=\"\\k\\\n\"\n"
	                  "declare -x X=$'\\xZ\\q\\u'\n"),
	    1);
	assert_string_equal(getenv_s(s, "A"), "a b cdA\xc3\xa9\001");
	assert_string_equal(getenv_s(s, "ML"), "one\ntwo");
	assert_string_equal(getenv_s(s, "K"), "\\k");
	assert_string_equal(getenv_s(s, "X"), "\\xZ\\q\\u");
	session_free(s);
}

static void test_declare_attributes(void **state)
{
	(void)state;
	struct session *s = session_new("x", NULL, NULL, 0);
	assert_int_equal(apply_text(s,
	                            "declare -ax ARR=([0]=\"1\" [1]=$'2\\n')\n"
	                            "declare -Ax ASS=([k]=\"v\" )\n"
	                            "declare -ix N=\"5\"\n"
	                            "declare -rx R=\"ro\"\n"
	                            "declare -nx REF=\"T\"\n"
	                            "declare -xl LOW=\"abc\"\n"
	                            "declare -x UNSETX\n"
	                            "declare -- NOTX=\"1\"\n"),
	                 1);
	/* bash exports no array: a child never sees one */
	assert_null(getenv_s(s, "ARR"));
	assert_null(getenv_s(s, "ASS"));
	assert_string_equal(getenv_s(s, "N"), "5");
	assert_string_equal(getenv_s(s, "R"), "ro");
	assert_string_equal(getenv_s(s, "REF"), "T");
	assert_string_equal(getenv_s(s, "LOW"), "abc");
	assert_null(getenv_s(s, "UNSETX"));
	assert_null(getenv_s(s, "NOTX"));
	assert_int_equal(s->envc, 4);
	session_free(s);
}

static void test_declare_refuses_damage(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "declare -x A=\"1\"", /* no final newline */
	    "declare -x A=\"1\n", /* unterminated quote */
	    "declare -x A=$'1\n",
	    "declare -x A='1\n",
	    "declare -x A=\"1\"\nexport B=\"2\"\n", /* not declare */
	    "declare -x 1A=\"1\"\n",                /* not a name */
	    "declare -x A-B=\"1\"\n",
	    "declare -x =\"1\"\n",
	    "declare x A=\"1\"\n",
	    "declare -x A=$'\\0'\n", /* a NUL in a value */
	    "declare -x A=$'\\x00'\n",
	    "declare -x A=$'\\u0000'\n",
	    "declare -x A=\\", /* a backslash at the end */
	    "declare -x! A=\"1\"\n",
	    "garbage\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct session *s = session_new("x", "/w", NULL, 0);
		size_t envc = s->envc;
		assert_int_equal(apply_text(s, bad[i]), -EINVAL);
		assert_string_equal(s->cwd, "/w"); /* nothing taken */
		assert_int_equal(s->envc, envc);
		session_free(s);
	}
}

/* The hook itself, run by the real bash, read back by the parser: every
 * value survives as bash had it, whatever bytes it holds. */
static void test_hook_round_trip_with_bash(void **state)
{
	(void)state;
	if (access("/bin/bash", X_OK) != 0)
		skip();
	char dir[] = "/tmp/sbx-test-session-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char hook[64];
	snprintf(hook, sizeof(hook), "%s/session.sh", dir);
	FILE *f = fopen(hook, "w");
	assert_non_null(f);
	assert_int_equal(
	    fwrite(session_image_file.data, 1, session_image_file.len, f),
	    session_image_file.len);
	fclose(f);

	/* every byte but NUL, and some shapes bash quotes differently */
	char all[256];
	for (int i = 1; i < 256; i++)
		all[i - 1] = (char)i;
	all[255] = '\0';
	static const char *const tricky[] = {
	    "plain",
	    "",
	    "two words",
	    "line1\nline2\n",
	    "q\"uo'te",
	    "back\\slash\\",
	    "$dollar `tick` $(x) ${y}",
	    "!bang",
	    "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80",
	    "\xff\xfe bad utf8",
	    "\t\r\v\f\a\b\033",
	    "trailing\\",
	    "=leading=equals",
	};
	size_t nt = sizeof(tricky) / sizeof(tricky[0]);
	char *envp[32];
	size_t ne = 0;
	envp[ne++] = "PATH=/usr/bin:/bin";
	envp[ne++] = "LANG=C.UTF-8";
	char *bashenv = NULL;
	assert_true(asprintf(&bashenv, "BASH_ENV=%s", hook) > 0);
	envp[ne++] = bashenv;
	for (size_t i = 0; i <= nt; i++) {
		char *kv;
		assert_true(
		    asprintf(&kv, "V%zu=%s", i, i < nt ? tricky[i] : all) > 0);
		envp[ne++] = kv;
	}
	envp[ne] = NULL;
	const char *cmd = "cd /tmp; export -n V0; declare -ix N=6*7; "
	                  "declare -rx R=ro; declare -ax ARR=(1 2); "
	                  "T=target; declare -nx REF=T; export NOVALUE; "
	                  "declare -lx LOW=ABC; export NEW=$'a\\nb'; exit 3";

	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 63);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		execle("/bin/bash", "bash", "-c", cmd, (char *)NULL, envp);
		_exit(127);
	}
	close(p[1]);
	char *out = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			out = realloc(out, cap);
			assert_non_null(out);
		}
		ssize_t n = read(p[0], out + len, cap - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(p[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 3); /* the command's own status */

	struct session *s = session_new("x", NULL, NULL, 0);
	assert_int_equal(session_apply_state(s, out, len), 1);
	assert_string_equal(s->cwd, "/tmp");
	assert_null(getenv_s(s, "V0")); /* unexported by the command */
	for (size_t i = 1; i <= nt; i++) {
		char k[16];
		snprintf(k, sizeof(k), "V%zu", i);
		const char *v = getenv_s(s, k);
		assert_non_null(v);
		assert_string_equal(v, i < nt ? tricky[i] : all);
	}
	assert_string_equal(getenv_s(s, "N"), "42");
	assert_string_equal(getenv_s(s, "R"), "ro");
	assert_null(getenv_s(s, "ARR"));
	assert_string_equal(getenv_s(s, "REF"), "T");
	assert_null(getenv_s(s, "NOVALUE"));
	assert_string_equal(getenv_s(s, "LOW"), "abc");
	assert_string_equal(getenv_s(s, "NEW"), "a\nb");
	assert_string_equal(getenv_s(s, "PATH"), "/usr/bin:/bin");
	assert_null(getenv_s(s, "BASH_ENV")); /* the hook's own: not carried */
	assert_null(getenv_s(s, "SHLVL"));
	assert_null(getenv_s(s, "PWD"));
	session_free(s);
	free(out);
	for (size_t i = 2; i < ne; i++)
		free(envp[i]);
	unlink(hook);
	rmdir(dir);
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
	assert_true(session_state_hash(buf, len) ==
	            session_state_hash(again, alen));
	assert_int_equal(session_setenv(t, "A=2"), 0);
	free(again);
	assert_int_equal(session_state_encode(t, &again, &alen), 0);
	assert_true(session_state_hash(buf, len) !=
	            session_state_hash(again, alen));
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
	assert_int_equal(session_state_decode(s, cut, sizeof(cut) - 1),
	                 -EINVAL);
	assert_int_equal(session_state_decode(s, rel, sizeof(rel) - 1),
	                 -EINVAL);
	assert_int_equal(session_state_decode(s, noeq, sizeof(noeq) - 1),
	                 -EINVAL);
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
	static const char rec[] = REC("/tmp", "declare -x A=\"1\"\n"
	                                      "declare -x SHLVL=\"2\"\n"
	                                      "declare -x BB=\"22\"\n");
	/* "/tmp" + NUL, then A=1 and BB=22, each with its NUL and a pointer
	 * (SHLVL is not carried) */
	assert_int_equal(session_state_cost(rec, sizeof(rec) - 1),
	                 5 + (4 + 8) + (6 + 8));
	assert_int_equal(session_state_cost("x", 1), 0);
	static const char cut[] = "SBXSTATE\0/tmp\0declare -x A=\"1";
	assert_int_equal(session_state_cost(cut, sizeof(cut) - 1), -EINVAL);
	static const char bad[] = REC("/tmp", "A=1\n");
	assert_int_equal(session_state_cost(bad, sizeof(bad) - 1), -EINVAL);
	size_t big = SESSION_MAX_VAR + 10;
	char *huge = malloc(big + 32);
	memcpy(huge, "SBXSTATE\0/\0declare -x X=", 24);
	memset(huge + 24, 'a', big);
	memcpy(huge + 24 + big, "\n", 2); /* and the record's NUL */
	assert_int_equal(session_state_cost(huge, 26 + big), -E2BIG);
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
	static const char rec[] = REC("/tmp", "declare -x A=\"1\"\n"
	                                      "declare -x B=\"2\"\n"
	                                      "declare -x C=\"3\"\n");
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
	    cmocka_unit_test(test_info_view),
	    cmocka_unit_test(test_apply_record),
	    cmocka_unit_test(test_last_record_wins),
	    cmocka_unit_test(test_no_or_cut_record),
	    cmocka_unit_test(test_declare_quoting),
	    cmocka_unit_test(test_declare_attributes),
	    cmocka_unit_test(test_declare_refuses_damage),
	    cmocka_unit_test(test_hook_round_trip_with_bash),
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
