/* The configuration file (--config FILE, /etc/sandboxd/sandboxd.conf for
 * the service): every flag can be set there, the command line wins, and a
 * mistake names the file and line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"

static char errbuf[1024];

static int parse(struct config *cfg, const char *const *args)
{
	char *argv[32];
	int argc = 0;
	argv[argc++] = (char *)"sandboxd";
	for (; *args; args++)
		argv[argc++] = (char *)*args;
	argv[argc] = NULL;
	FILE *saved = stderr;
	memset(errbuf, 0, sizeof(errbuf));
	stderr = fmemopen(errbuf, sizeof(errbuf) - 1, "w");
	int r = config_parse(cfg, argc, argv);
	fclose(stderr);
	stderr = saved;
	return r;
}

static char *conf(const char *text)
{
	char *path = strdup("/tmp/sandboxd-conf-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static void test_file_sets_flags(void **state)
{
	(void)state;
	struct config cfg;
	char *path = conf("# sandboxd settings\n"
	                  "\n"
	                  "listen = 127.0.0.1:9191\n"
	                  "  state-dir = \"/srv/sandboxes\"  \n"
	                  "memory=2G\n"
	                  "--pids = 100\n"
	                  "sleep-after = 30s\n"
	                  "log-level = warn\n");
	const char *args[] = {"--config", path, NULL};
	assert_int_equal(parse(&cfg, args), 0);
	assert_string_equal(cfg.listen_addr, "127.0.0.1");
	assert_int_equal(cfg.port, 9191);
	assert_string_equal(cfg.state_dir, "/srv/sandboxes");
	assert_true(cfg.limits.memory_bytes == 2ull << 30);
	assert_int_equal(cfg.limits.pids, 100);
	assert_true(cfg.sleep_after_ms == 30000);
	assert_true(cfg.given & CFG_MEMORY);
	unlink(path);
	free(path);
}

static void test_command_line_wins(void **state)
{
	(void)state;
	struct config cfg;
	char *path = conf("memory = 2G\nstate-dir = /a\n");
	const char *args[] = {"--memory", "512M", "--config=", NULL};
	char opt[64];
	snprintf(opt, sizeof(opt), "--config=%s", path);
	args[2] = opt;
	assert_int_equal(parse(&cfg, args), 0);
	assert_true(cfg.limits.memory_bytes == 512ull << 20);
	assert_string_equal(cfg.state_dir, "/a");
	unlink(path);
	free(path);
}

static void test_mistakes_name_the_line(void **state)
{
	(void)state;
	struct config cfg;
	char *path = conf("memory = 2G\nfrobnicate = yes\n");
	const char *args[] = {"--config", path, NULL};
	assert_int_equal(parse(&cfg, args), -1);
	assert_non_null(strstr(errbuf, ":2: unknown setting frobnicate"));
	unlink(path);
	free(path);

	path = conf("just words\n");
	args[1] = path;
	assert_int_equal(parse(&cfg, args), -1);
	assert_non_null(strstr(errbuf, ":1: expected name = value"));
	unlink(path);
	free(path);

	path = conf("help = 1\n"); /* not a setting */
	args[1] = path;
	assert_int_equal(parse(&cfg, args), -1);
	unlink(path);
	free(path);

	path = conf("memory = lots\n"); /* the flag's own check */
	args[1] = path;
	assert_int_equal(parse(&cfg, args), -1);
	assert_non_null(strstr(errbuf, "--memory lots"));
	unlink(path);
	free(path);

	const char *missing[] = {"--config", "/nonexistent/sandboxd.conf",
	                         NULL};
	assert_int_equal(parse(&cfg, missing), -1);
	assert_non_null(strstr(errbuf, "No such file"));
}

static void test_no_file_no_change(void **state)
{
	(void)state;
	struct config cfg;
	const char *none[] = {NULL};
	assert_int_equal(parse(&cfg, none), 0);
	assert_string_equal(cfg.state_dir, "/var/lib/sandboxd");
	assert_int_equal(cfg.port, 8080);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_file_sets_flags),
	    cmocka_unit_test(test_command_line_wins),
	    cmocka_unit_test(test_mistakes_name_the_line),
	    cmocka_unit_test(test_no_file_no_change),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
