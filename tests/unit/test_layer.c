/* Unpacking layers (runtime/layer.c): OCI whiteouts become overlayfs's,
 * owners, modes and links are kept, devices skipped; a path that would
 * leave the directory, a symlinked parent and a huge (sparse) file fail
 * with nothing written outside. Archives are made here with libarchive. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "runtime/layer.h"

static char tmp[64], dir[128], outside[128];

struct ent {
	const char *name;
	mode_t type;      /* AE_IF* */
	const char *data; /* file content, symlink or hardlink target */
	int64_t size;     /* a file's declared size when no data */
	unsigned mode;
	int64_t uid;
};

/* A pax tar of ents in a memfd, read position at 0. */
static int archive_of(const struct ent *e, size_t n)
{
	int fd = memfd_create("layer", MFD_CLOEXEC);
	assert_true(fd >= 0);
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	assert_int_equal(archive_write_open_fd(a, fd), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *ae = archive_entry_new();
		archive_entry_set_pathname(ae, e[i].name);
		archive_entry_set_uid(ae, e[i].uid);
		archive_entry_set_gid(ae, e[i].uid);
		archive_entry_set_perm(ae, e[i].mode ? e[i].mode : 0644);
		size_t len = 0;
		if (e[i].type == AE_IFLNK) {
			archive_entry_set_filetype(ae, AE_IFLNK);
			archive_entry_set_symlink(ae, e[i].data);
		} else if (e[i].type == AE_IFREG && e[i].data &&
		           e[i].size < 0) {
			/* a hard link: a regular entry naming its target */
			archive_entry_set_filetype(ae, AE_IFREG);
			archive_entry_set_hardlink(ae, e[i].data);
		} else {
			archive_entry_set_filetype(ae, e[i].type);
			if (e[i].type == AE_IFCHR)
				archive_entry_set_rdev(ae, makedev(1, 3));
			if (e[i].type == AE_IFREG) {
				len = e[i].data ? strlen(e[i].data) : 0;
				archive_entry_set_size(
				    ae, e[i].data ? (int64_t)len : e[i].size);
			}
		}
		assert_int_equal(archive_write_header(a, ae), ARCHIVE_OK);
		if (len)
			archive_write_data(a, e[i].data, len);
		archive_entry_free(ae);
	}
	/* a header declaring more than follows: the archive ends short */
	archive_write_close(a);
	archive_write_free(a);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static int unpack(const struct ent *e, size_t n, struct layer_stats *st,
                  struct sbx_err *err)
{
	int fd = archive_of(e, n);
	int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct layer_limits lim = {.max_bytes = 1 << 20, .max_entries = 100};
	int r = layer_unpack(fd, d, LAYER_OCI, &lim, st, err);
	close(d);
	close(fd);
	return r;
}

static int setup(void **state)
{
	(void)state;
	snprintf(tmp, sizeof(tmp), "/tmp/sbx-layer-XXXXXX");
	if (!mkdtemp(tmp))
		return -1;
	snprintf(dir, sizeof(dir), "%s/layer", tmp);
	snprintf(outside, sizeof(outside), "%s/outside", tmp);
	return mkdir(dir, 0755) || mkdir(outside, 0755);
}

static int teardown(void **state)
{
	(void)state;
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	return system(cmd);
}

static void path(char *buf, size_t cap, const char *rel)
{
	snprintf(buf, cap, "%s/%s", dir, rel);
}

static void test_unpacks_and_converts_whiteouts(void **state)
{
	(void)state;
	const struct ent e[] = {
	    {"./etc/", AE_IFDIR, NULL, 0, 0755, 0},
	    {"etc/app.conf", AE_IFREG, "x=1\n", 0, 0640, 1000},
	    {"etc/link", AE_IFLNK, "app.conf", 0, 0777, 0},
	    {"etc/hard", AE_IFREG, "etc/app.conf", -1, 0640, 1000},
	    {"bin/su", AE_IFREG, "#!", 0, 04755, 0},
	    {"big-id", AE_IFREG, "", 0, 0644, 100000},
	    {"dev/null", AE_IFCHR, NULL, 0, 0666, 0},
	    {"etc/.wh.removed", AE_IFREG, "", 0, 0644, 0},
	    {"opq/.wh..wh..opq", AE_IFREG, "", 0, 0644, 0},
	};
	struct layer_stats st;
	struct sbx_err err = {0};
	assert_int_equal(unpack(e, sizeof(e) / sizeof(e[0]), &st, &err), 0);
	char p[256], buf[64];
	struct stat sb;
	path(p, sizeof(p), "etc/app.conf");
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0640);
	assert_int_equal(sb.st_uid, 1000);
	assert_int_equal(sb.st_size, 4);
	assert_int_equal(sb.st_nlink, 2); /* and etc/hard */
	path(p, sizeof(p), "etc/link");
	ssize_t l = readlink(p, buf, sizeof(buf));
	assert_int_equal(l, 8);
	path(p, sizeof(p), "bin/su");
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 04755); /* kept after chown */
	path(p, sizeof(p), "big-id");
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_uid, 65534);
	path(p, sizeof(p), "dev/null");
	assert_int_equal(lstat(p, &sb), -1); /* devices skipped */
	assert_int_equal(st.skipped, 1);
	path(p, sizeof(p), "etc/removed");
	assert_int_equal(lstat(p, &sb), 0);
	assert_true(S_ISCHR(sb.st_mode) && sb.st_rdev == makedev(0, 0));
	path(p, sizeof(p), "etc/.wh.removed");
	assert_int_equal(lstat(p, &sb), -1);
	path(p, sizeof(p), "opq");
	assert_int_equal(
	    getxattr(p, "trusted.overlay.opaque", buf, sizeof(buf)), 1);
	assert_int_equal(buf[0], 'y');
}

static void expect_refused(const struct ent *e, size_t n, int code,
                           const char *what)
{
	struct layer_stats st;
	struct sbx_err err = {0};
	assert_true(unpack(e, n, &st, &err) < 0);
	assert_int_equal(err.code, code);
	assert_non_null(strstr(err.msg, what));
	/* nothing reached the directory beside the layer */
	char p[256];
	snprintf(p, sizeof(p), "%s/pwned", outside);
	assert_int_equal(access(p, F_OK), -1);
	snprintf(p, sizeof(p), "%s/pwned", tmp);
	assert_int_equal(access(p, F_OK), -1);
}

static void test_dotdot_refused(void **state)
{
	(void)state;
	const struct ent e[] = {{"a/../../pwned", AE_IFREG, "x", 0, 0644, 0}};
	expect_refused(e, 1, EPERM, "..");
}

static void test_absolute_refused(void **state)
{
	(void)state;
	char abs[200];
	snprintf(abs, sizeof(abs), "%s/pwned", outside);
	const struct ent e[] = {{abs, AE_IFREG, "x", 0, 0644, 0}};
	expect_refused(e, 1, EPERM, "absolute");
}

static void test_symlinked_parent_refused(void **state)
{
	(void)state;
	const struct ent e[] = {{"esc", AE_IFLNK, outside, 0, 0777, 0},
	                        {"esc/pwned", AE_IFREG, "x", 0, 0644, 0}};
	expect_refused(e, 2, EPERM, "symlink");
	const struct ent rel[] = {{"esc2", AE_IFLNK, "../outside", 0, 0777, 0},
	                          {"esc2/pwned", AE_IFREG, "x", 0, 0644, 0}};
	expect_refused(rel, 2, EPERM, "symlink");
}

static void test_hardlink_outside_refused(void **state)
{
	(void)state;
	const struct ent e[] = {{"h", AE_IFREG, "../outside/x", -1, 0644, 0}};
	expect_refused(e, 1, EPERM, "..");
}

static void test_huge_file_refused_before_writing(void **state)
{
	(void)state;
	/* 2 MiB against a limit of 1 (libarchive pads the data it is not
	 * given: the 1 TB sparse file is the e2e test's, made by GNU tar) */
	const struct ent e[] = {{"huge", AE_IFREG, NULL, 2 << 20, 0644, 0}};
	expect_refused(e, 1, EFBIG, "limit");
	char p[256];
	path(p, sizeof(p), "huge");
	assert_int_equal(access(p, F_OK), -1);
}

static void test_bad_whiteout_refused(void **state)
{
	(void)state;
	const struct ent e[] = {{"a/.wh...", AE_IFREG, "", 0, 0644, 0}};
	expect_refused(e, 1, EINVAL, "whiteout");
}

static void test_later_entry_replaces(void **state)
{
	(void)state;
	const struct ent e[] = {{"x", AE_IFREG, "file", 0, 0644, 0},
	                        {"x", AE_IFDIR, NULL, 0, 0755, 0},
	                        {"x/in", AE_IFREG, "in", 0, 0644, 0},
	                        {"x", AE_IFDIR, NULL, 0, 0700, 0},
	                        {"y", AE_IFDIR, NULL, 0, 0755, 0},
	                        {"y", AE_IFLNK, "x", 0, 0777, 0}};
	struct layer_stats st;
	struct sbx_err err = {0};
	assert_int_equal(unpack(e, 6, &st, &err), 0);
	char p[256];
	struct stat sb;
	path(p, sizeof(p), "x/in");
	assert_int_equal(stat(p, &sb), 0); /* a directory kept its contents */
	path(p, sizeof(p), "x");
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	path(p, sizeof(p), "y");
	assert_int_equal(lstat(p, &sb), 0);
	assert_true(S_ISLNK(sb.st_mode));
}

static void test_not_an_archive(void **state)
{
	(void)state;
	int fd = memfd_create("junk", MFD_CLOEXEC);
	assert_int_equal(write(fd, "definitely not a tar archive, no", 32), 32);
	lseek(fd, 0, SEEK_SET);
	int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct layer_limits lim = {.max_bytes = 1 << 20, .max_entries = 100};
	struct layer_stats st;
	struct sbx_err err = {0};
	assert_true(layer_unpack(fd, d, LAYER_OCI, &lim, &st, &err) < 0);
	assert_int_equal(err.code, EINVAL);
	close(d);
	close(fd);
}

int main(void)
{
	if (geteuid() != 0) {
		fprintf(stderr,
		        "test_layer: needs root (chown, mknod, trusted.* "
		        "xattrs); skipped\n");
		return 0;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_unpacks_and_converts_whiteouts,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dotdot_refused, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_absolute_refused, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_symlinked_parent_refused,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hardlink_outside_refused,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_huge_file_refused_before_writing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_whiteout_refused, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_later_entry_replaces, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_not_an_archive, setup,
	                                    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
