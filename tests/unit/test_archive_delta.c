/* The archive builtins' checkpoints (runtime/builtin_archive.c), run in a
 * child on a temporary directory as the sandbox's root: a full archive
 * with its manifest, a delta on that manifest (changed, added and deleted
 * files, entries whose type changed, a symlink), both unpacked in a chain
 * and committed: the result is the tree, and the manifest the commit
 * writes makes the next delta empty. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/builtin.h"

static char root[64];

static void path_of(char *buf, size_t cap, const char *rel)
{
	snprintf(buf, cap, "%s/%s", root, rel);
}

static void put(const char *rel, const char *data)
{
	char p[512];
	path_of(p, sizeof(p), rel);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(data, f);
	fclose(f);
}

static void mkd(const char *rel)
{
	char p[512];
	path_of(p, sizeof(p), rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static void rm(const char *rel)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/%s'", root, rel);
	assert_int_equal(system(cmd), 0);
}

/* Run one archive builtin with stdin from in and stdout to out (paths
 * below root, NULL: /dev/null); its exit status, stdout and stderr. */
static int run(const char *in, const char *out, char *said, size_t cap,
               char *err, size_t ecap, const char *const *argv)
{
	char inp[512], outp[512], errp[512];
	path_of(inp, sizeof(inp), in ? in : "");
	path_of(outp, sizeof(outp), out ? out : ".said");
	path_of(errp, sizeof(errp), ".err");
	int argc = 0;
	while (argv[argc])
		argc++;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int i = in ? open(inp, O_RDONLY) : open("/dev/null", O_RDONLY);
		int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int base = open(root, O_PATH | O_DIRECTORY);
		if (i < 0 || o < 0 || e < 0 || base < 0 || dup2(i, 0) < 0 ||
		    dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(99);
		builtin_archive(base, argc, argv);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	FILE *f;
	if (said && (f = fopen(outp, "r"))) {
		size_t n = fread(said, 1, cap - 1, f);
		said[n] = '\0';
		fclose(f);
	}
	if (err && (f = fopen(errp, "r"))) {
		size_t n = fread(err, 1, ecap - 1, f);
		err[n] = '\0';
		fclose(f);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static off_t size_of(const char *rel)
{
	char p[512];
	struct stat st;
	path_of(p, sizeof(p), rel);
	return stat(p, &st) == 0 ? st.st_size : -1;
}

/* `ls -lR`-like listing with contents, to compare two trees. */
static char *listing(const char *rel)
{
	char cmd[700], *out = malloc(1 << 20);
	snprintf(cmd, sizeof(cmd),
	         "cd '%s/%s' && find . -printf '%%y %%m %%p %%l\\n' | sort && "
	         "find . -type f | sort | xargs -r md5sum",
	         root, rel);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(out, 1, (1 << 20) - 1, p);
	out[n] = '\0';
	assert_int_equal(pclose(p), 0);
	return out;
}

static void test_full_delta_chain(void **state)
{
	(void)state;
	char said[4096], err[4096];
	snprintf(root, sizeof(root), "/tmp/sbx-delta-XXXXXX");
	assert_non_null(mkdtemp(root));
	mkd("ws");
	mkd("ws/d");
	mkd("ws/u");
	mkd("ws/gdir");
	put("ws/a", "alpha\n");
	put("ws/d/x", "x\n");
	put("ws/t", "t is a file\n");
	put("ws/u/y", "in u\n");
	put("ws/gone", "bye\n");
	put("ws/gdir/z", "z\n");
	char big[65536 + 1];
	uint32_t x =
	    2463534242u; /* xorshift: letters zstd cannot shrink much */
	for (size_t i = 0; i < sizeof(big) - 1; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		big[i] = (char)('a' + x % 26);
	}
	big[sizeof(big) - 1] = '\0';
	put("ws/big", big);
	char lp[512];
	path_of(lp, sizeof(lp), "ws/link");
	assert_int_equal(symlink("a", lp), 0);

	const char *full[] = {"archive-create", "/", "/ws",
	                      "--manifest=/m/manifest.1", NULL};
	assert_int_equal(run(NULL, "full.tar", NULL, 0, err, sizeof(err), full),
	                 0);
	assert_non_null(strstr(err, "M full\n"));
	assert_true(size_of("m/manifest.1") > 0);

	/* changes of every kind */
	sleep(0);               /* (ctime changes with every write anyway) */
	put("ws/a", "ALPHA\n"); /* same size, other bytes */
	rm("ws/gone");          /* a file gone */
	rm("ws/gdir");          /* a directory gone with its file */
	rm("ws/t");             /* a file that becomes a directory */
	mkd("ws/t");
	put("ws/t/n", "now a dir\n");
	rm("ws/u"); /* a directory that becomes a file */
	put("ws/u", "now a file\n");
	put("ws/d/new", "added\n"); /* a file added */
	rm("ws/link");              /* a link pointing elsewhere */
	assert_int_equal(symlink("d/x", lp), 0);

	const char *delta[] = {
	    "archive-create",           "/", "/ws", "--base=/m/manifest.1",
	    "--manifest=/m/manifest.2", NULL};
	assert_int_equal(
	    run(NULL, "delta.tar", NULL, 0, err, sizeof(err), delta), 0);
	assert_non_null(strstr(err, "M delta\n"));
	/* a, t, t/n, u, d/new, link; gone, gdir, gdir/z, u/y */
	assert_non_null(strstr(err, "C 6 4\n"));
	/* the base stays (until a later one names another), both are there */
	assert_true(size_of("m/manifest.1") > 0);
	assert_true(size_of("m/manifest.2") > 0);
	/* the 64 KiB file that did not change is not in it */
	assert_true(size_of("delta.tar") < size_of("full.tar") / 4);

	/* the chain, unpacked beside /r, then swapped in */
	const char *unpack[] = {"archive-unpack", "/", "/r", NULL};
	assert_int_equal(
	    run("full.tar", NULL, said, sizeof(said), NULL, 0, unpack), 0);
	char tmp[256];
	assert_int_equal(sscanf(said, "OK %255s", tmp), 1);
	char into[300];
	snprintf(into, sizeof(into), "--into=%s", tmp);
	const char *unpack2[] = {"archive-unpack", "/", "/r", into, NULL};
	assert_int_equal(
	    run("delta.tar", NULL, said, sizeof(said), NULL, 0, unpack2), 0);
	assert_true(!strncmp(said, "OK ", 3));
	const char *commit[] = {"archive-commit",
	                        "/",
	                        "/r",
	                        tmp,
	                        "--manifest=/r-m/manifest.2",
	                        NULL};
	assert_int_equal(run(NULL, NULL, said, sizeof(said), NULL, 0, commit),
	                 0);
	assert_string_equal(said, "OK\n");
	char *want = listing("ws"), *got = listing("r");
	assert_string_equal(got, want);
	free(want);
	free(got);

	/* on the commit's manifest, nothing changed: an empty delta */
	const char *again[] = {"archive-create",
	                       "/",
	                       "/r",
	                       "--base=/r-m/manifest.2",
	                       "--manifest=/r-m/manifest.3",
	                       NULL};
	assert_int_equal(
	    run(NULL, "again.tar", NULL, 0, err, sizeof(err), again), 0);
	assert_non_null(strstr(err, "M delta\n"));
	assert_true(size_of("again.tar") < 200);
	assert_non_null(strstr(err, "C 0 0\n"));
	/* the older manifests of that stem went, the base stayed */
	assert_true(size_of("r-m/manifest.2") > 0);
	assert_true(size_of("r-m/manifest.3") > 0);

	/* a delta into a directory no unpack made is refused */
	const char *bad[] = {"archive-unpack", "/", "/r", "--into=r", NULL};
	assert_int_not_equal(
	    run("delta.tar", NULL, said, sizeof(said), NULL, 0, bad), 0);
	assert_true(!strncmp(said, "E ", 2));
	/* a delta's deletions in a full unpack are refused */
	assert_int_not_equal(
	    run("delta.tar", NULL, said, sizeof(said), NULL, 0, unpack), 0);
	/* a base that is not a manifest: a full archive */
	put("m/manifest.9", "not a manifest");
	const char *nobase[] = {"archive-create",
	                        "/",
	                        "/ws",
	                        "--base=/m/manifest.9",
	                        "--manifest=/m/manifest.10",
	                        NULL};
	assert_int_equal(
	    run(NULL, "full2.tar", NULL, 0, err, sizeof(err), nobase), 0);
	assert_non_null(strstr(err, "M full\n"));
	/* a manifest that cannot be written fails not the archive */
	put("ws/blocker", "a file, not a directory");
	const char *nowhere[] = {"archive-create", "/", "/ws",
	                         "--manifest=/ws/blocker/manifest.11", NULL};
	assert_int_equal(
	    run(NULL, "full3.tar", NULL, 0, err, sizeof(err), nowhere), 0);
	assert_non_null(strstr(err, "\nW "));
	assert_true(size_of("full3.tar") > 0);
	rm("");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_full_delta_chain),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
