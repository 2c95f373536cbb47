/* Removing trees: deep ones with a few fds, never through a link, never into
 * a mount, and what cannot go is reported while the rest goes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/fsutil.h"

static char tmp[64];

static int setup(void **state)
{
	(void)state;
	/* tmpfs: 50,000 directories cost no disk writes there */
	snprintf(tmp, sizeof(tmp), "%s/sbx-fsutil-XXXXXX",
	         access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "chattr -R -i %s 2>/dev/null; rm -rf %s",
	         tmp, tmp);
	return system(cmd) == 0 ? 0 : -1;
}

static int fd_count(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

/* A chain of depth directories below dir/name, each holding a file. */
static void make_chain(int dir, const char *name, int depth)
{
	assert_int_equal(mkdirat(dir, name, 0755), 0);
	int fd = openat(dir, name, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	for (int i = 0; i < depth; i++) {
		int f = openat(fd, "f", O_WRONLY | O_CREAT, 0644);
		assert_true(f >= 0);
		close(f);
		assert_int_equal(mkdirat(fd, "d", 0755), 0);
		int next = openat(fd, "d", O_RDONLY | O_DIRECTORY);
		assert_true(next >= 0);
		close(fd);
		fd = next;
	}
	close(fd);
}

/* 50,000 levels with RLIMIT_NOFILE at 32: a walk that holds an fd per
 * level (as the recursive one did) runs out at once. */
static void test_deep_tree_few_fds(void **state)
{
	(void)state;
	int dir = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dir >= 0);
	make_chain(dir, "deep", 50000);
	struct rlimit old, low = {32, 32};
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low.rlim_max = old.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	int before = fd_count();
	struct sbx_err err = {0};
	int r = fs_remove_tree(dir, "deep", &err);
	int after = fd_count();
	setrlimit(RLIMIT_NOFILE, &old);
	assert_int_equal(r, 0);
	assert_int_equal(before, after);
	struct stat st;
	assert_int_equal(fstatat(dir, "deep", &st, AT_SYMLINK_NOFOLLOW), -1);
	assert_int_equal(errno, ENOENT);
	close(dir);
}

static void test_links_not_followed(void **state)
{
	(void)state;
	int dir = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dir >= 0);
	assert_int_equal(mkdirat(dir, "outside", 0755), 0);
	int f = openat(dir, "outside/keep", O_WRONLY | O_CREAT, 0644);
	assert_true(f >= 0);
	close(f);
	make_chain(dir, "t", 3);
	char target[300];
	snprintf(target, sizeof(target), "%s/outside", tmp);
	assert_int_equal(symlinkat(target, dir, "t/d/abs"), 0);
	assert_int_equal(symlinkat("../../outside", dir, "t/d/rel"), 0);
	assert_int_equal(fs_remove_tree(dir, "t", NULL), 0);
	struct stat st;
	assert_int_equal(fstatat(dir, "outside/keep", &st, 0), 0);
	assert_int_equal(fstatat(dir, "t", &st, AT_SYMLINK_NOFOLLOW), -1);
	/* the link itself as the tree: only the link goes */
	assert_int_equal(symlinkat(target, dir, "lnk"), 0);
	assert_int_equal(fs_remove_tree(dir, "lnk", NULL), 0);
	assert_int_equal(fstatat(dir, "outside/keep", &st, 0), 0);
	close(dir);
}

/* A mount inside the tree is never entered (in a private mount namespace
 * of a child, so the host's mounts stay as they are). */
static void test_mount_not_entered(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char m[300], keep[320];
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(77);
		int dir = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		make_chain(dir, "m", 2);
		snprintf(m, sizeof(m), "%s/m/d/mnt", tmp);
		if (mkdir(m, 0755) < 0 ||
		    mount("tmpfs", m, "tmpfs", 0, "size=64k") < 0)
			_exit(77);
		snprintf(keep, sizeof(keep), "%s/keep", m);
		int f = open(keep, O_WRONLY | O_CREAT, 0644);
		close(f);
		struct sbx_err err = {0};
		int r = fs_remove_tree(dir, "m", &err);
		struct stat st;
		int kept = stat(keep, &st) == 0;
		int file_gone = fstatat(dir, "m/f", &st, 0) < 0;
		umount2(m, MNT_DETACH);
		_exit(r < 0 && kept && file_gone ? 0 : 1);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* What cannot be removed (an immutable file) is reported; the rest goes. */
static void test_failure_reported(void **state)
{
	(void)state;
	int dir = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dir >= 0);
	make_chain(dir, "i", 600); /* deeper than the walk's own stack */
	char p[300];
	snprintf(p, sizeof(p), "%s/i/d/d/stuck", tmp);
	int f = open(p, O_WRONLY | O_CREAT, 0644);
	assert_true(f >= 0);
	int flags = FS_IMMUTABLE_FL;
	if (ioctl(f, FS_IOC_SETFLAGS, &flags) < 0) {
		close(f);
		close(dir);
		skip(); /* no CAP_LINUX_IMMUTABLE, or no such flag here */
	}
	close(f);
	struct sbx_err err = {0};
	assert_true(fs_remove_tree(dir, "i", &err) < 0);
	assert_int_equal(err.code, EPERM);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(fstatat(dir, "i/f", &st, 0), -1);
	f = open(p, O_RDONLY);
	flags = 0;
	assert_int_equal(ioctl(f, FS_IOC_SETFLAGS, &flags), 0);
	close(f);
	assert_int_equal(fs_remove_tree(dir, "i", &err), 0);
	assert_int_equal(fstatat(dir, "i", &st, AT_SYMLINK_NOFOLLOW), -1);
	close(dir);
}

/* A path whose way to the tree crosses a link (as an absolute state dir
 * may): the way is taken as given, the tree itself walked as always. */
static void test_path_to_the_tree_as_given(void **state)
{
	(void)state;
	int dir = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dir >= 0);
	assert_int_equal(mkdirat(dir, "real", 0755), 0);
	assert_int_equal(symlinkat("real", dir, "via"), 0);
	make_chain(dir, "real/tree", 300);
	char p[300];
	snprintf(p, sizeof(p), "%s/via/tree", tmp);
	assert_int_equal(fs_remove_tree(AT_FDCWD, p, NULL), 0);
	struct stat st;
	assert_int_equal(fstatat(dir, "real/tree", &st, AT_SYMLINK_NOFOLLOW),
	                 -1);
	assert_int_equal(fstatat(dir, "via", &st, AT_SYMLINK_NOFOLLOW), 0);
	close(dir);
}

static void test_empty_dir(void **state)
{
	(void)state;
	int dir = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	make_chain(dir, "a", 300);
	make_chain(dir, "b", 2);
	assert_int_equal(symlinkat("/", dir, "c"), 0);
	assert_int_equal(fs_empty_dir(dir, NULL), 0);
	DIR *d = fdopendir(dir);
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)))
		n++;
	closedir(d);
	assert_int_equal(n, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_deep_tree_few_fds, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_links_not_followed, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_mount_not_entered, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_failure_reported, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_path_to_the_tree_as_given,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_empty_dir, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
