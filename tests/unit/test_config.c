/* The operator ceilings: flags, defaults derived from the machine, and the
 * checks between a per-sandbox default and its ceiling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "lib/err.h"

static const struct machine box = {.ram_bytes = 24ull << 30,
                                   .ncpus = 2,
                                   .pid_max = 32768,
                                   .disk_bytes = 100ull << 30};

static int parse(struct config *cfg, const char *const *args)
{
	char *argv[32];
	int argc = 0;
	argv[argc++] = (char *)"sandboxd";
	for (; *args; args++)
		argv[argc++] = (char *)*args;
	argv[argc] = NULL;
	FILE *saved = stderr;
	stderr = fopen("/dev/null", "w");
	int r = config_parse(cfg, argc, argv);
	fclose(stderr);
	stderr = saved;
	return r;
}

static void test_defaults_from_the_machine(void **state)
{
	(void)state;
	struct config cfg;
	struct sbx_err err = {0};
	const char *none[] = {NULL};
	assert_int_equal(parse(&cfg, none), 0);
	assert_int_equal(config_resolve(&cfg, &box, &err), 0);
	assert_true(cfg.max_limits.memory_bytes == 24ull << 30);
	assert_int_equal(cfg.max_limits.pids, 32768 / 8);
	assert_int_equal(cfg.max_limits.cpu_millis, 2000);
	assert_true(cfg.max_disk == 100ull << 30);
	assert_true(cfg.total_memory == (24ull << 30) / 4 * 3);
	assert_int_equal(cfg.total_pids, 16384);
	/* 16384 pids / 512 per sandbox, fewer than 24G / 128M */
	assert_int_equal(cfg.max_sandboxes, 32);
}

static void test_ceiling_never_below_the_default(void **state)
{
	(void)state;
	struct config cfg;
	struct sbx_err err = {0};
	struct machine tiny = {.ram_bytes = 512ull << 20,
	                       .ncpus = 1,
	                       .pid_max = 1024,
	                       .disk_bytes = 1ull << 30};
	const char *none[] = {NULL};
	assert_int_equal(parse(&cfg, none), 0);
	assert_int_equal(config_resolve(&cfg, &tiny, &err), 0);
	assert_true(cfg.max_limits.memory_bytes == 1ull
	                                               << 30); /* --memory 1G */
	assert_int_equal(cfg.max_limits.pids, 512);
	assert_true(cfg.max_disk == 10ull << 30);
	assert_int_equal(cfg.max_sandboxes, 1);
}

static void test_given_ceiling_lowers_a_default_not_given(void **state)
{
	(void)state;
	struct config cfg;
	struct sbx_err err = {0};
	const char *args[] = {"--max-memory", "256M",       "--max-pids",
	                      "64",           "--max-cpus", "0.5",
	                      "--max-disk",   "1G",         NULL};
	assert_int_equal(parse(&cfg, args), 0);
	assert_int_equal(config_resolve(&cfg, &box, &err), 0);
	assert_true(cfg.limits.memory_bytes == 256u << 20);
	assert_int_equal(cfg.limits.pids, 64);
	assert_int_equal(cfg.limits.cpu_millis, 500);
	assert_true(cfg.disk_bytes == 1ull << 30);
}

static void test_given_default_above_given_ceiling_refused(void **state)
{
	(void)state;
	static const char *const cases[][5] = {
	    {"--memory", "2G", "--max-memory", "1G", "--max-memory"},
	    {"--pids", "100", "--max-pids", "99", "--max-pids"},
	    {"--cpus", "2", "--max-cpus", "1", "--max-cpus"},
	    {"--disk", "2G", "--max-disk", "1G", "--max-disk"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct config cfg;
		struct sbx_err err = {0};
		const char *args[] = {cases[i][0], cases[i][1], cases[i][2],
		                      cases[i][3], NULL};
		assert_int_equal(parse(&cfg, args), 0);
		assert_int_equal(config_resolve(&cfg, &box, &err), -EINVAL);
		assert_int_equal(err.code, EINVAL);
		assert_non_null(strstr(err.msg, cases[i][4]));
		assert_non_null(strstr(err.msg, cases[i][0]));
	}
}

static void test_flag_values(void **state)
{
	(void)state;
	struct config cfg;
	struct sbx_err err = {0};
	const char *ok[] = {"--max-sandboxes",
	                    "3",
	                    "--total-memory",
	                    "0",
	                    "--total-pids",
	                    "0",
	                    NULL};
	assert_int_equal(parse(&cfg, ok), 0);
	assert_int_equal(config_resolve(&cfg, &box, &err), 0);
	assert_int_equal(cfg.max_sandboxes, 3);
	assert_true(cfg.total_memory == 0 && cfg.total_pids == 0);
	static const char *const bad[][2] = {
	    {"--max-sandboxes", "0"}, {"--max-sandboxes", "x"},
	    {"--max-memory", "1M"},   {"--max-pids", "7"},
	    {"--max-cpus", "0"},      {"--max-disk", "1M"},
	    {"--total-memory", "1M"}, {"--total-pids", "3"},
	    {"--total-pids", ""},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *args[] = {bad[i][0], bad[i][1], NULL};
		assert_int_equal(parse(&cfg, args), -1);
	}
}

static void test_llm_flags(void **state)
{
	(void)state;
	struct config cfg;
	const char *none[] = {NULL};
	assert_int_equal(parse(&cfg, none), 0);
	assert_null(cfg.llm_url);
	assert_string_equal(cfg.llm_model, "default");
	assert_int_equal(cfg.llm_timeout_ms, 60000);
	const char *ok[] = {"--llm-url",
	                    "http://127.0.0.1:8081/v1",
	                    "--llm-model",
	                    "llama3.1",
	                    "--llm-key-file",
	                    "/k",
	                    "--llm-timeout",
	                    "90s",
	                    NULL};
	assert_int_equal(parse(&cfg, ok), 0);
	assert_string_equal(cfg.llm_url, "http://127.0.0.1:8081/v1");
	assert_string_equal(cfg.llm_model, "llama3.1");
	assert_string_equal(cfg.llm_key_file, "/k");
	assert_int_equal(cfg.llm_timeout_ms, 90000);
	const char *bad_url[] = {"--llm-url", "ftp://x", NULL};
	assert_int_equal(parse(&cfg, bad_url), -1);
	const char *bad_t[] = {"--llm-timeout", "0", NULL};
	assert_int_equal(parse(&cfg, bad_t), -1);
	const char *bad_m[] = {"--llm-model", "", NULL};
	assert_int_equal(parse(&cfg, bad_m), -1);
}

static void test_fleet_flags(void **state)
{
	(void)state;
	struct config cfg;
	const char *none[] = {NULL};
	assert_int_equal(parse(&cfg, none), 0);
	assert_null(cfg.etcd_url); /* a single daemon */
	assert_int_equal(cfg.etcd_ttl_s, 10);
	assert_int_equal(cfg.checkpoint_every_ms, 60000);
	const char *ok[] = {"--etcd",
	                    "http://127.0.0.1:2379",
	                    "--advertise-url",
	                    "http://10.0.0.2:8080",
	                    "--node-name",
	                    "n-2",
	                    "--etcd-ttl",
	                    "4500ms",
	                    "--checkpoint-every",
	                    "30s",
	                    NULL};
	assert_int_equal(parse(&cfg, ok), 0);
	assert_string_equal(cfg.etcd_url, "http://127.0.0.1:2379");
	assert_string_equal(cfg.advertise_url, "http://10.0.0.2:8080");
	assert_string_equal(cfg.node_name, "n-2");
	assert_int_equal(cfg.etcd_ttl_s, 5); /* whole seconds, rounded up */
	assert_int_equal(cfg.checkpoint_every_ms, 30000);
	const char *no_adv[] = {"--etcd", "http://127.0.0.1:2379", NULL};
	assert_int_equal(parse(&cfg, no_adv), -1);
	const char *bad_url[] = {"--etcd", "127.0.0.1:2379", "--advertise-url",
	                         "http://x", NULL};
	assert_int_equal(parse(&cfg, bad_url), -1);
	const char *bad_adv[] = {"--advertise-url", "http://x y", NULL};
	assert_int_equal(parse(&cfg, bad_adv), -1);
	const char *bad_ttl[] = {"--etcd-ttl", "1s", NULL};
	assert_int_equal(parse(&cfg, bad_ttl), -1);
	const char *bad_ck[] = {"--checkpoint-every", "10ms", NULL};
	assert_int_equal(parse(&cfg, bad_ck), -1);
	const char *bad_name[] = {"--node-name", "a/b", NULL};
	assert_int_equal(parse(&cfg, bad_name), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults_from_the_machine),
	    cmocka_unit_test(test_ceiling_never_below_the_default),
	    cmocka_unit_test(test_given_ceiling_lowers_a_default_not_given),
	    cmocka_unit_test(test_given_default_above_given_ceiling_refused),
	    cmocka_unit_test(test_flag_values),
	    cmocka_unit_test(test_llm_flags),
	    cmocka_unit_test(test_fleet_flags),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
