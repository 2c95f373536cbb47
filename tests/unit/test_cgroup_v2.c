/* cgroup module against a fake cgroupfs tree in a temporary directory: fake
 * mountinfo and /proc/self/cgroup files, and directories whose control files
 * the env's fake_mkdir hook creates the way cgroupfs would. The production
 * code opens control files without O_CREAT, so a knob it writes that the
 * "kernel" did not provide fails here as it would on a real host. */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/cgroup.h"
#include "runtime/cgroup_internal.h"

#define FAKE_PID 4242
#define MGR "sbx-test"
#define OWN_REL "user.slice/sbx.service"
#define SUBTREE "+memory +pids +cpu"

struct fake {
	char tmp[64];
	char mountinfo[PATH_MAX];
	char selfcg[PATH_MAX];
	char own[PATH_MAX]; /* <tmp>/cg/user.slice/sbx.service */
	char locks[PATH_MAX];
	struct cgroup_env env;
};

/* What the fake kernel provides; tests flip these. */
static bool fake_has_swap = true;
static bool fake_has_kill = true;

static void write_at(int dfd, const char *name, const char *content)
{
	int fd =
	    openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	size_t len = strlen(content);
	assert_int_equal(write(fd, content, len), (ssize_t)len);
	close(fd);
}

static void write_file(const char *path, const char *content)
{
	write_at(AT_FDCWD, path, content);
}

/* Path helpers take printf formats; a path that does not fit fails the
 * test instead of being cut short. */
static void vpath(char *buf, const char *fmt, va_list ap)
{
	int n = vsnprintf(buf, PATH_MAX, fmt, ap);
	assert_true(n > 0 && n < PATH_MAX);
}

static void put(const char *content, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(const char *content, const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;
	va_start(ap, fmt);
	vpath(path, fmt, ap);
	va_end(ap);
	write_file(path, content);
}

static void mkdir_p(const char *path);
static void mkdirf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void mkdirf(const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;
	va_start(ap, fmt);
	vpath(path, fmt, ap);
	va_end(ap);
	mkdir_p(path);
}

/* The file's content; a static buffer, valid until the next call. */
static const char *read_file(const char *fmt, ...)
{
	static char buf[4096];
	char path[PATH_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return NULL;
	buf[n] = '\0';
	return buf;
}

static bool is_dir(const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool exists(const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return access(path, F_OK) == 0;
}

/* The control files cgroupfs puts into every new v2 cgroup (those the
 * module touches), with plausible contents for the read-only ones. */
static void populate_v2(int dfd)
{
	write_at(dfd, "cgroup.procs", "");
	write_at(dfd, "cgroup.controllers", "cpu memory pids\n");
	write_at(dfd, "cgroup.subtree_control", "");
	write_at(dfd, "cgroup.freeze", "");
	write_at(dfd, "cgroup.events", "populated 0\nfrozen 0\n");
	if (fake_has_kill)
		write_at(dfd, "cgroup.kill", "");
	write_at(dfd, "memory.max", "");
	write_at(dfd, "memory.oom.group", "");
	if (fake_has_swap)
		write_at(dfd, "memory.swap.max", "");
	write_at(dfd, "pids.max", "");
	write_at(dfd, "cpu.max", "");
	write_at(dfd, "memory.current", "4096\n");
	write_at(dfd, "cpu.stat",
	         "usage_usec 1234\nuser_usec 1000\nsystem_usec 234\n");
	write_at(dfd, "pids.current", "3\n");
	write_at(dfd, "memory.events",
	         "low 0\nhigh 0\nmax 5\noom 1\noom_kill 2\noom_group_kill 0\n");
}

static void fake_mkdir(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	populate_v2(fd);
	close(fd);
}

static void fake_rmdir(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	DIR *d = fdopendir(fd);
	assert_non_null(d);
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_type == DT_REG)
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
}

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(buf, 0755);
		*p = '/';
	}
	assert_true(mkdir(buf, 0755) == 0 || errno == EEXIST);
}

static struct fake *fake_new(void)
{
	struct fake *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	snprintf(f->tmp, sizeof(f->tmp), "/tmp/sbx-cgtest.XXXXXX");
	assert_non_null(mkdtemp(f->tmp));
	snprintf(f->mountinfo, sizeof(f->mountinfo), "%s/mountinfo", f->tmp);
	snprintf(f->selfcg, sizeof(f->selfcg), "%s/self_cgroup", f->tmp);
	snprintf(f->own, sizeof(f->own), "%s/cg/%s", f->tmp, OWN_REL);
	f->env.mountinfo_path = f->mountinfo;
	f->env.self_cgroup_path = f->selfcg;
	f->env.self_pid = FAKE_PID;
	f->env.fake_mkdir = fake_mkdir;
	f->env.fake_rmdir = fake_rmdir;
	snprintf(f->locks, sizeof(f->locks), "%s/locks", f->tmp);
	f->env.lock_dir = f->locks;
	fake_has_swap = true;
	fake_has_kill = true;
	return f;
}

/* A pure v2 host: one cgroup2 mount, the daemon in a service's cgroup. */
static int setup_v2(void **state)
{
	struct fake *f = fake_new();
	char buf[2 * PATH_MAX];
	snprintf(buf, sizeof(buf),
	         "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
	         "30 22 0:26 / %s/cg rw,nosuid,nodev,noexec,relatime shared:4 "
	         "- cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
	         "31 22 0:27 / /proc rw - proc proc rw\n",
	         f->tmp);
	write_file(f->mountinfo, buf);
	write_file(f->selfcg, "0::/" OWN_REL "\n");
	mkdir_p(f->own);
	int fd = open(f->own, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	populate_v2(fd);
	write_at(fd, "cgroup.controllers",
	         "cpuset cpu io memory hugetlb pids\n");
	close(fd);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fake *f = *state;
	nftw(f->tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static struct cgroup_manager *manager(struct fake *f)
{
	struct cgroup_manager *m = NULL;
	struct sbx_err err = {0};
	int r = cgroup_manager_new(&f->env, MGR, &m, &err);
	if (r < 0)
		fail_msg("cgroup_manager_new: %s", err.msg);
	return m;
}

static struct cgroup_sandbox *sandbox(struct cgroup_manager *m,
                                      const char *name, uint64_t mem,
                                      uint32_t pids, uint32_t cpu)
{
	struct cgroup_limits lim = {mem, pids, cpu};
	struct cgroup_sandbox *s = NULL;
	struct sbx_err err = {0};
	if (cgroup_sandbox_new(m, name, &lim, &s, &err) < 0)
		fail_msg("cgroup_sandbox_new: %s", err.msg);
	return s;
}

static void destroy(struct cgroup_sandbox *s)
{
	struct sbx_err err = {0};
	if (cgroup_sandbox_destroy(s, &err) < 0)
		fail_msg("cgroup_sandbox_destroy: %s", err.msg);
}

static int acquire(struct cgroup_sandbox *s, int fds[CGROUP_MAX_FDS], int *nfds)
{
	struct sbx_err err = {0};
	int idx = cgroup_cmd_acquire(s, fds, nfds, &err);
	if (idx < 0)
		fail_msg("cgroup_cmd_acquire: %s", err.msg);
	return idx;
}

static void close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* ---- tests ----------------------------------------------------------------
 */

static void test_detect_picks_v2(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	assert_int_equal(cgroup_manager_version(m), 2);
	assert_true(is_dir("%s/" MGR, f->own));
	cgroup_manager_free(m);
}

static void test_daemon_moved_into_own_daemon(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	assert_true(is_dir("%s/daemon", f->own));
	assert_string_equal(read_file("%s/daemon/cgroup.procs", f->own),
	                    "4242");
	cgroup_manager_free(m);
}

static void test_subtree_control_enabled(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	assert_string_equal(read_file("%s/cgroup.subtree_control", f->own),
	                    SUBTREE);
	assert_string_equal(
	    read_file("%s/" MGR "/cgroup.subtree_control", f->own), SUBTREE);
	struct cgroup_sandbox *s = sandbox(m, "box1", 0, 0, 0);
	assert_string_equal(
	    read_file("%s/" MGR "/box1/cgroup.subtree_control", f->own),
	    SUBTREE);
	/* The commands' parent hands pids and cpu on to the leaves, not
	 * memory: the leaves share its memory cgroup (one per sandbox fewer
	 * per command); leaves hold processes, so theirs stays empty. */
	assert_string_equal(
	    read_file("%s/" MGR "/box1/cmds/cgroup.subtree_control", f->own),
	    "+pids +cpu");
	assert_string_equal(
	    read_file("%s/" MGR "/box1/init/cgroup.subtree_control", f->own),
	    "");
	destroy(s);
	cgroup_manager_free(m);
}

static void test_limits_written(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	struct cgroup_sandbox *s = sandbox(m, "box1", 64 << 20, 16, 500);
	const char *b = f->own;
	assert_true(is_dir("%s/" MGR "/box1", b));
	assert_true(is_dir("%s/" MGR "/box1/init", b));
	assert_string_equal(read_file("%s/" MGR "/box1/cmds/memory.max", b),
	                    "67108864");
	assert_string_equal(
	    read_file("%s/" MGR "/box1/cmds/memory.swap.max", b), "0");
	/* The sandbox itself has no memory limit: init lives beside the
	 * commands' limited parent, so an OOM in the sandbox never takes it.
	 * OOM grouping is per command leaf. */
	assert_string_equal(read_file("%s/" MGR "/box1/memory.max", b), "");
	assert_string_equal(read_file("%s/" MGR "/box1/memory.swap.max", b),
	                    "");
	assert_string_equal(
	    read_file("%s/" MGR "/box1/cmds/memory.oom.group", b), "");
	assert_string_equal(read_file("%s/" MGR "/box1/init/memory.max", b),
	                    "");
	assert_string_equal(read_file("%s/" MGR "/box1/cmds/pids.max", b), "");
	assert_string_equal(read_file("%s/" MGR "/box1/pids.max", b), "16");
	assert_string_equal(read_file("%s/" MGR "/box1/cpu.max", b),
	                    "50000 100000");
	destroy(s);
	cgroup_manager_free(m);
}

static void test_unlimited_written_as_max(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	struct cgroup_sandbox *s = sandbox(m, "box1", 0, 0, 0);
	const char *b = f->own;
	assert_string_equal(read_file("%s/" MGR "/box1/cmds/memory.max", b),
	                    "max");
	assert_string_equal(read_file("%s/" MGR "/box1/pids.max", b), "max");
	assert_string_equal(read_file("%s/" MGR "/box1/cpu.max", b),
	                    "max 100000");
	destroy(s);
	cgroup_manager_free(m);
}

static void test_tiny_cpu_quota_clamped(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	/* 5 millis would be a 500 us quota, which the kernel refuses. */
	struct cgroup_sandbox *s = sandbox(m, "box1", 0, 0, 5);
	assert_string_equal(read_file("%s/" MGR "/box1/cpu.max", f->own),
	                    "1000 100000");
	destroy(s);
	cgroup_manager_free(m);
}

static void test_swap_max_absent_is_skipped(void **state)
{
	struct fake *f = *state;
	fake_has_swap = false;
	struct cgroup_manager *m = manager(f);
	struct cgroup_sandbox *s = sandbox(m, "box1", 1 << 20, 0, 0);
	assert_false(exists("%s/" MGR "/box1/cmds/memory.swap.max", f->own));
	assert_string_equal(
	    read_file("%s/" MGR "/box1/cmds/memory.max", f->own), "1048576");
	destroy(s);
	cgroup_manager_free(m);
}

static void test_set_limits_updates(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	struct cgroup_sandbox *s = sandbox(m, "box1", 64 << 20, 16, 500);
	const char *b = f->own;
	/* The fake files keep old bytes on a shorter write; cgroupfs would
	 * not. Start from empty files. */
	const char *knobs[] = {"cmds/memory.max", "pids.max", "cpu.max"};
	for (size_t i = 0; i < 3; i++) {
		put("", "%s/" MGR "/box1/%s", b, knobs[i]);
	}
	struct cgroup_limits lim = {128 << 20, 0, 2000};
	struct sbx_err err = {0};
	assert_int_equal(cgroup_sandbox_set_limits(s, &lim, &err), 0);
	assert_string_equal(read_file("%s/" MGR "/box1/cmds/memory.max", b),
	                    "134217728");
	assert_string_equal(read_file("%s/" MGR "/box1/pids.max", b), "max");
	assert_string_equal(read_file("%s/" MGR "/box1/cpu.max", b),
	                    "200000 100000");
	destroy(s);
	cgroup_manager_free(m);
}

static void test_add_init(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	struct cgroup_sandbox *s = sandbox(m, "box1", 0, 0, 0);
	struct sbx_err err = {0};
	assert_int_equal(cgroup_sandbox_add_init(s, 31337, &err), 0);
	assert_string_equal(
	    read_file("%s/" MGR "/box1/init/cgroup.procs", f->own), "31337");
	/* The fake "process" never exits; let destroy find the leaf empty. */
	put("", "%s/" MGR "/box1/init/cgroup.procs", f->own);
	destroy(s);
	cgroup_manager_free(m);
}

static void test_acquire_fds_land_in_c0(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	struct cgroup_sandbox *s = sandbox(m, "box1", 0, 0, 0);
	int fds[CGROUP_MAX_FDS], nfds = -1;
	assert_int_equal(acquire(s, fds, &nfds), 0);
	assert_int_equal(nfds, 1);
	assert_true(is_dir("%s/" MGR "/box1/cmds/c0", f->own));
	assert_int_equal(fcntl(fds[0], F_GETFL) & O_ACCMODE, O_WRONLY);
	assert_true(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
	assert_int_equal(write(fds[0], "0", 1), 1);
	close_fds(fds, nfds);
	assert_string_equal(
	    read_file("%s/" MGR "/box1/cmds/c0/cgroup.procs", f->own), "0");
	/* no memory controller of its own: nothing written to its memory
	 * files (the fake tree has them; the kernel would not) */
	assert_string_equal(
	    read_file("%s/" MGR "/box1/cmds/c0/memory.oom.group", f->own), "");
	destroy(s);
	cgroup_manager_free(m);
}

/* What the clone child that becomes init writes to, before its exec. */
static void test_init_fds_land_in_init(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	struct cgroup_sandbox *s = sandbox(m, "box1", 0, 0, 0);
	struct sbx_err err = {0};
	int fds[CGROUP_MAX_HIER], nfds = -1;
	assert_int_equal(cgroup_sandbox_init_fds(s, fds, &nfds, &err), 0);
	assert_int_equal(nfds, 1);
	assert_int_equal(fcntl(fds[0], F_GETFL) & O_ACCMODE, O_WRONLY);
	assert_true(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
	assert_int_equal(write(fds[0], "0", 1), 1);
	close_fds(fds, nfds);
	assert_string_equal(
	    read_file("%s/" MGR "/box1/init/cgroup.procs", f->own), "0");
	destroy(s);
	cgroup_manager_free(m);
}

/* The spawner keeps a leaf's fds: taking a leaf again opens nothing, and
 * its fds can be opened apart, for a leaf that exists only. */
static void test_acquire_without_fds_then_open(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	struct cgroup_sandbox *s = sandbox(m, "box1", 0, 0, 0);
	struct sbx_err err = {0};
	int fds[CGROUP_MAX_FDS], nfds = -1;
	assert_int_equal(cgroup_cmd_acquire(s, NULL, &nfds, &err), 0);
	assert_int_equal(nfds, 0);
	assert_true(is_dir("%s/" MGR "/box1/cmds/c0", f->own));
	assert_int_equal(cgroup_cmd_open(s, 0, fds, &nfds, &err), 0);
	assert_int_equal(nfds, 1);
	assert_true(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
	assert_int_equal(write(fds[0], "0", 1), 1);
	close_fds(fds, nfds);
	assert_string_equal(
	    read_file("%s/" MGR "/box1/cmds/c0/cgroup.procs", f->own), "0");
	assert_int_equal(cgroup_cmd_open(s, 1, fds, &nfds, &err), -EINVAL);
	assert_int_equal(nfds, 0);
	destroy(s);
	cgroup_manager_free(m);
}

static void test_release_then_acquire_reuses_c0(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	struct cgroup_sandbox *s = sandbox(m, "box1", 0, 0, 0);
	int fds[CGROUP_MAX_FDS], nfds;
	assert_int_equal(acquire(s, fds, &nfds), 0);
	close_fds(fds, nfds);
	assert_true(cgroup_cmd_empty(s, 0));
	assert_true(cgroup_cmd_release(s, 0));
	/* Releasing twice must not put c0 in the pool twice. */
	assert_false(cgroup_cmd_release(s, 0));
	assert_int_equal(acquire(s, fds, &nfds), 0);
	close_fds(fds, nfds);
	assert_false(is_dir("%s/" MGR "/box1/cmds/c1", f->own));
	/* c0 is taken: the next one is new. */
	assert_int_equal(acquire(s, fds, &nfds), 1);
	close_fds(fds, nfds);
	assert_true(is_dir("%s/" MGR "/box1/cmds/c1", f->own));
	destroy(s);
	cgroup_manager_free(m);
}

static void test_busy_leaf_waits_for_reclaim(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	struct cgroup_sandbox *s = sandbox(m, "box1", 0, 0, 0);
	int fds[CGROUP_MAX_FDS], nfds;
	assert_int_equal(acquire(s, fds, &nfds), 0);
	/* A daemonized child that outlived its command. */
	assert_int_equal(write(fds[0], "777\n", 4), 4);
	close_fds(fds, nfds);
	assert_false(cgroup_cmd_empty(s, 0));
	assert_false(cgroup_cmd_release(s, 0));
	assert_int_equal(acquire(s, fds, &nfds), 1);
	close_fds(fds, nfds);
	assert_true(cgroup_cmd_release(s, 1));
	assert_int_equal(cgroup_sandbox_reclaim(s), 1);
	/* c1 is free, c0 is still occupied: c1 comes back. */
	assert_int_equal(acquire(s, fds, &nfds), 1);
	close_fds(fds, nfds);
	/* the child exited */
	put("", "%s/" MGR "/box1/cmds/c0/cgroup.procs", f->own);
	assert_int_equal(cgroup_sandbox_reclaim(s), 0);
	assert_int_equal(acquire(s, fds, &nfds), 0);
	close_fds(fds, nfds);
	assert_false(is_dir("%s/" MGR "/box1/cmds/c2", f->own));
	destroy(s);
	cgroup_manager_free(m);
}

static void test_destroy_removes_dirs(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	struct cgroup_sandbox *s = sandbox(m, "box1", 0, 0, 0);
	struct cgroup_sandbox *s2 = sandbox(m, "box2", 0, 0, 0);
	int fds[CGROUP_MAX_FDS], nfds;
	acquire(s, fds, &nfds);
	close_fds(fds, nfds);
	acquire(s, fds, &nfds);
	close_fds(fds, nfds);
	assert_true(is_dir("%s/" MGR "/box1/cmds/c1", f->own));
	destroy(s);
	assert_false(exists("%s/" MGR "/box1", f->own));
	/* Only that sandbox went. */
	assert_true(is_dir("%s/" MGR "/box2/init", f->own));
	assert_true(is_dir("%s/" MGR, f->own));
	destroy(s2);
	cgroup_manager_free(m);
}

static void test_remove_of_an_empty_sandbox(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	struct cgroup_sandbox *s = sandbox(m, "box1", 0, 0, 0);
	struct cgroup_sandbox *s2 = sandbox(m, "box2", 0, 0, 0);
	int fds[CGROUP_MAX_FDS], nfds;
	for (int i = 0; i < 3; i++) {
		acquire(s, fds, &nfds);
		close_fds(fds, nfds);
	}
	assert_true(is_dir("%s/" MGR "/box1/cmds/c2", f->own));
	struct sbx_err err = {0};
	assert_int_equal(cgroup_sandbox_remove(s, &err), 0);
	assert_false(exists("%s/" MGR "/box1", f->own));
	assert_true(is_dir("%s/" MGR "/box2/init", f->own));
	/* a directory that is not of its layout: the whole tree goes anyway */
	mkdirf("%s/" MGR "/box2/cmds/stray/", f->own);
	put("", "%s/" MGR "/box2/cmds/stray/cgroup.procs", f->own);
	assert_int_equal(cgroup_sandbox_remove(s2, &err), 0);
	assert_false(exists("%s/" MGR "/box2", f->own));
	assert_true(is_dir("%s/" MGR, f->own));
	cgroup_manager_free(m);
}

static void test_kill_never_waits_for_a_survivor(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	struct cgroup_sandbox *s = sandbox(m, "box1", 0, 0, 0);
	int fds[CGROUP_MAX_FDS], nfds;
	acquire(s, fds, &nfds);
	/* A "process" the fake kernel never removes: a kill round returns
	 * at once saying one is left (the caller retries from a timer). A
	 * pid far beyond pid_max, so no real process can be hit. */
	assert_int_equal(write(fds[0], "2000000000\n", 11), 11);
	close_fds(fds, nfds);
	struct sbx_err err = {0};
	int64_t t0 = cgroup_now_ns();
	assert_int_equal(cgroup_cmd_kill(s, 0, &err), 1);
	assert_int_equal(cgroup_cmd_kill(s, 0, &err), 1);
	assert_true(cgroup_now_ns() - t0 < 1000000000LL);
	put("", "%s/" MGR "/box1/cmds/c0/cgroup.procs", f->own);
	assert_int_equal(cgroup_cmd_kill(s, 0, &err), 0);
	destroy(s);
	cgroup_manager_free(m);
}

static void test_kill_without_cgroup_kill_freezes(void **state)
{
	struct fake *f = *state;
	fake_has_kill = false; /* a kernel older than 5.14 */
	struct cgroup_manager *m = manager(f);
	struct cgroup_sandbox *s = sandbox(m, "box1", 0, 0, 0);
	int fds[CGROUP_MAX_FDS], nfds;
	acquire(s, fds, &nfds);
	close_fds(fds, nfds);
	put("populated 1\nfrozen 1\n", "%s/" MGR "/box1/cmds/c0/cgroup.events",
	    f->own);
	put("2000000000\n", "%s/" MGR "/box1/cmds/c0/cgroup.procs", f->own);
	struct sbx_err err = {0};
	assert_int_equal(cgroup_cmd_kill(s, 0, &err), 1);
	/* It froze the leaf, and thawed it again before returning. */
	assert_string_equal(
	    read_file("%s/" MGR "/box1/cmds/c0/cgroup.freeze", f->own), "0");
	assert_false(exists("%s/" MGR "/box1/cmds/c0/cgroup.kill", f->own));
	put("", "%s/" MGR "/box1/cmds/c0/cgroup.procs", f->own);
	destroy(s);
	cgroup_manager_free(m);
}

static void test_stats(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	struct cgroup_sandbox *s = sandbox(m, "box1", 0, 0, 0);
	struct cgroup_stats st;
	assert_int_equal(cgroup_sandbox_stats(s, &st), 0);
	assert_int_equal(st.memory_bytes, 4096);
	assert_int_equal(st.cpu_usec, 1234);
	assert_int_equal(st.pids, 3);
	assert_int_equal(st.oom_kills, 2);
	destroy(s);
	cgroup_manager_free(m);
}

static void test_stale_sandbox_replaced(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	/* A previous daemon's sandbox with a leaf and a nested cgroup. */
	mkdirf("%s/" MGR "/box1/c7/deeper", f->own);
	struct cgroup_sandbox *s = sandbox(m, "box1", 1 << 20, 0, 0);
	assert_false(exists("%s/" MGR "/box1/c7", f->own));
	assert_true(is_dir("%s/" MGR "/box1/init", f->own));
	assert_string_equal(
	    read_file("%s/" MGR "/box1/cmds/memory.max", f->own), "1048576");
	destroy(s);
	cgroup_manager_free(m);
}

static void test_manager_clean_and_remove(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	mkdirf("%s/" MGR "/old1/c0", f->own);
	mkdirf("%s/" MGR "/old2/init", f->own);
	struct sbx_err err = {0};
	assert_int_equal(cgroup_manager_clean(m, &err), 0);
	assert_false(exists("%s/" MGR "/old1", f->own));
	assert_false(exists("%s/" MGR "/old2", f->own));
	assert_true(is_dir("%s/" MGR, f->own)); /* the manager's dir stays */
	assert_int_equal(cgroup_manager_remove(m, &err), 0);
	assert_false(exists("%s/" MGR, f->own));
	/* The daemon still lives in <own>/daemon. */
	assert_true(is_dir("%s/daemon", f->own));
	cgroup_manager_free(m);
}

static void test_totals(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	struct sbx_err err = {0};
	assert_int_equal(cgroup_manager_set_totals(m, 8ull << 30, 4096, &err),
	                 0);
	assert_string_equal(read_file("%s/" MGR "/memory.max", f->own),
	                    "8589934592");
	assert_string_equal(read_file("%s/" MGR "/pids.max", f->own), "4096");
	/* the daemon's own cgroup and its leaf are not touched */
	assert_string_equal(read_file("%s/memory.max", f->own), "");
	assert_string_equal(read_file("%s/daemon/memory.max", f->own), "");
	put("", "%s/" MGR "/memory.max", f->own);
	put("", "%s/" MGR "/pids.max", f->own);
	assert_int_equal(cgroup_manager_set_totals(m, 0, 0, &err), 0);
	assert_string_equal(read_file("%s/" MGR "/memory.max", f->own), "max");
	assert_string_equal(read_file("%s/" MGR "/pids.max", f->own), "max");
	cgroup_manager_free(m);
}

/* Holds a read lock on path in a child process (a live manager); returns
 * its pid. POSIX locks of one process never conflict with each other. */
static pid_t lock_in_child(const char *path)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
		if (fd < 0 || fcntl(fd, F_SETLK, &fl) < 0 ||
		    write(p[1], "x", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	char c;
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	return pid;
}

static void test_stale_managers_removed(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	/* earlier daemons' dirs beside ours */
	mkdirf("%s/old-1/s0/init", f->own);
	mkdirf("%s/old-1/s0/cmds/c3", f->own);
	mkdirf("%s/old-2/s0/init", f->own);
	put("2000000000\n", "%s/old-2/s0/init/cgroup.procs", f->own);
	mkdirf("%s/old-3/s1", f->own);
	mkdirf("%s/old-4/s2", f->own);
	mkdirf("%s/other", f->own);
	char lock[PATH_MAX + 16];
	snprintf(lock, sizeof(lock), "%s/old-4.lock", f->locks);
	pid_t owner = lock_in_child(lock);
	char dir[PATH_MAX + 8];
	snprintf(dir, sizeof(dir), "%s/old-3", f->own);
	int held = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(held >= 0);

	struct sbx_err err = {0};
	assert_int_equal(cgroup_manager_remove_stale(m, "old-", &err), 1);
	assert_false(exists("%s/old-1", f->own));   /* nobody's: gone */
	assert_true(is_dir("%s/old-2/s0", f->own)); /* a process inside */
	assert_true(is_dir("%s/old-3/s1", f->own)); /* held open */
	assert_true(is_dir("%s/old-4/s2", f->own)); /* locked by its owner */
	assert_true(is_dir("%s/other", f->own));    /* not ours to judge */
	assert_true(is_dir("%s/daemon", f->own));
	assert_true(is_dir("%s/" MGR, f->own));
	assert_false(exists("%s/locks/old-1.lock", f->tmp));
	assert_true(exists("%s/locks/old-4.lock", f->tmp));

	close(held);
	kill(owner, SIGKILL);
	waitpid(owner, NULL, 0);
	put("", "%s/old-2/s0/init/cgroup.procs", f->own);
	assert_int_equal(cgroup_manager_remove_stale(m, "old-", &err), 3);
	assert_false(exists("%s/old-2", f->own));
	assert_false(exists("%s/old-3", f->own));
	assert_false(exists("%s/old-4", f->own));
	assert_true(is_dir("%s/other", f->own));
	cgroup_manager_free(m);
}

static void test_live_manager_keeps_its_dirs(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	/* another daemon, alive, with a sandbox */
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t other = fork();
	assert_true(other >= 0);
	if (other == 0) {
		struct cgroup_manager *m2 = NULL;
		struct cgroup_sandbox *s2 = NULL;
		struct cgroup_limits lim = {0};
		if (cgroup_manager_new(&f->env, "old-live", &m2, NULL) < 0 ||
		    cgroup_sandbox_new(m2, "box1", &lim, &s2, NULL) < 0 ||
		    write(p[1], "x", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	char c;
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	struct sbx_err err = {0};
	assert_int_equal(cgroup_manager_remove_stale(m, "old-", &err), 0);
	assert_true(is_dir("%s/old-live/box1/init", f->own));
	/* it dies without cleaning up: the next start removes its dirs */
	kill(other, SIGKILL);
	waitpid(other, NULL, 0);
	assert_int_equal(cgroup_manager_remove_stale(m, "old-", &err), 1);
	assert_false(exists("%s/old-live", f->own));
	assert_false(exists("%s/old-live.lock", f->locks));
	cgroup_manager_free(m);
}

static void test_no_lock_dir_leaves_stale_dirs(void **state)
{
	struct fake *f = *state;
	f->env.lock_dir = "/proc/self/no-such-dir";
	struct cgroup_manager *m = manager(f); /* works without */
	mkdirf("%s/old-1/s0", f->own);
	struct sbx_err err = {0};
	assert_int_equal(cgroup_manager_remove_stale(m, "old-", &err), -ENOLCK);
	assert_non_null(strstr(err.msg, "/proc/self/no-such-dir"));
	assert_true(is_dir("%s/old-1/s0", f->own));
	cgroup_manager_free(m);
}

static void test_invalid_names_rejected(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = NULL;
	struct sbx_err err = {0};
	assert_int_equal(cgroup_manager_new(&f->env, "../x", &m, &err),
	                 -EINVAL);
	assert_int_equal(cgroup_manager_new(&f->env, "daemon", &m, &err),
	                 -EINVAL);
	assert_null(m);
	m = manager(f);
	struct cgroup_limits lim = {0};
	struct cgroup_sandbox *s = NULL;
	/* "ahead": the name of the set made ahead (v1) */
	const char *bad[] = {"", ".", "..", "a/b", "a b", "x\n", "ahead"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(cgroup_sandbox_new(m, bad[i], &lim, &s, &err),
		                 -EINVAL);
	assert_null(s);
	cgroup_manager_free(m);
}

static void test_nothing_made_ahead_on_v2(void **state)
{
	/* cgroupfs renames no directory on v2: a start makes its own */
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	struct cgroup_limits lim = {0, 10, 0};
	struct sbx_err err = {0};
	assert_int_equal(cgroup_manager_make_ahead(m, &lim, &err), 0);
	assert_false(exists("%s/" MGR "/ahead", f->own));
	struct cgroup_sandbox *s = sandbox(m, "box1", 0, 10, 0);
	assert_true(is_dir("%s/" MGR "/box1/init", f->own));
	destroy(s);
	cgroup_manager_free(m);
}

static void test_v2_without_controllers_and_no_v1_fails(void **state)
{
	struct fake *f = *state;
	put("cpuset io hugetlb\n", "%s/cgroup.controllers", f->own);
	struct cgroup_manager *m = NULL;
	struct sbx_err err = {0};
	assert_int_equal(cgroup_manager_new(&f->env, MGR, &m, &err), -ENOTSUP);
	assert_null(m);
	assert_non_null(strstr(err.msg, "cpuset io hugetlb"));
	assert_false(exists("%s/" MGR, f->own));
}

/* ---- hybrid detection -------------------------------------------------------
 */

static const char *const v1_dirs[] = {"cpu",    "cpuacct", "cpuset",
                                      "memory", "devices", "freezer",
                                      "blkio",  "pids",    "systemd"};

/* This development machine's layout: v1 controllers each on its own mount
 * (cpu and cpuacct apart), memory's own cgroup deep down, and a cgroup2
 * mount that offers only hugetlb. The fake tree's root sits in a directory
 * with a space, to check mountinfo's escapes. */
static int setup_hybrid(void **state)
{
	struct fake *f = fake_new();
	char root[PATH_MAX], mi[8192];
	snprintf(root, sizeof(root), "%s/sys fs", f->tmp);
	int off = snprintf(mi, sizeof(mi),
	                   "31 23 0:28 / %s/sys\\040fs rw,relatime - tmpfs "
	                   "tmpfs rw,mode=755\n",
	                   f->tmp);
	for (size_t i = 0; i < sizeof(v1_dirs) / sizeof(v1_dirs[0]); i++) {
		off += snprintf(
		    mi + off, sizeof(mi) - (size_t)off,
		    "%zu 31 0:%zu / %s/sys\\040fs/%s rw,relatime "
		    "shared:%zu - cgroup cgroup rw,%s%s\n",
		    32 + i, 29 + i, f->tmp, v1_dirs[i], 9 + i,
		    strcmp(v1_dirs[i], "systemd") ? "" : "name=", v1_dirs[i]);
		mkdirf("%s/%s", root, v1_dirs[i]);
	}
	snprintf(mi + off, sizeof(mi) - (size_t)off,
	         "41 31 0:38 / %s/sys\\040fs/unified rw,relatime - cgroup2 "
	         "cgroup2 rw\n",
	         f->tmp);
	write_file(f->mountinfo, mi);
	mkdirf("%s/unified", root);
	put("hugetlb\n", "%s/unified/cgroup.controllers", root);
	mkdirf("%s/memory/process_api/6ae6612d", root);
	write_file(f->selfcg, "9:name=systemd:/\n8:pids:/\n7:blkio:/\n"
	                      "6:freezer:/\n5:devices:/\n"
	                      "4:memory:/process_api/6ae6612d\n3:cpuset:/\n"
	                      "2:cpuacct:/\n1:cpu:/\n0::/\n");
	f->env.fake_mkdir = NULL; /* v1 dirs need no v2 control files */
	f->env.fake_rmdir = NULL;
	*state = f;
	return 0;
}

static void test_hybrid_selects_v1(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	assert_int_equal(cgroup_manager_version(m), 1);
	const char *r = "sys fs";
	assert_true(
	    is_dir("%s/%s/memory/process_api/6ae6612d/" MGR, f->tmp, r));
	assert_true(is_dir("%s/%s/pids/" MGR, f->tmp, r));
	assert_true(is_dir("%s/%s/cpu/" MGR, f->tmp, r));
	assert_true(is_dir("%s/%s/freezer/" MGR, f->tmp, r));
	assert_true(is_dir("%s/%s/cpuacct/" MGR, f->tmp, r));
	/* devices, where mounted: the sandboxes' device rules */
	assert_true(is_dir("%s/%s/devices/" MGR, f->tmp, r));
	/* Hierarchies the runtime does not use stay untouched, as does the
	 * unified one: the daemon does not move there. */
	assert_false(exists("%s/%s/cpuset/" MGR, f->tmp, r));
	assert_false(exists("%s/%s/systemd/" MGR, f->tmp, r));
	assert_false(exists("%s/%s/unified/" MGR, f->tmp, r));
	assert_false(exists("%s/%s/unified/daemon", f->tmp, r));
	struct sbx_err err = {0};
	assert_int_equal(cgroup_manager_remove(m, &err), 0);
	assert_false(exists("%s/%s/pids/" MGR, f->tmp, r));
	assert_true(is_dir("%s/%s/memory/process_api/6ae6612d", f->tmp, r));
	cgroup_manager_free(m);
}

/* cpu and cpuacct co-mounted (the usual v1 layout), and a memory mount that
 * shows only a sub-tree (root field "/docker/x", as in a container): the
 * own dir is mountpoint + (path - root). */
static int setup_v1_combined(void **state)
{
	struct fake *f = fake_new();
	char mi[4096];
	snprintf(mi, sizeof(mi),
	         "40 30 0:40 / %1$s/v1/cpu,cpuacct rw - cgroup cgroup "
	         "rw,cpu,cpuacct\n"
	         "41 30 0:41 /docker/x %1$s/v1/memory rw - cgroup cgroup "
	         "rw,memory\n"
	         "42 30 0:42 / %1$s/v1/pids rw - cgroup cgroup rw,pids\n"
	         "43 30 0:43 / %1$s/v1/freezer rw - cgroup cgroup rw,freezer\n",
	         f->tmp);
	write_file(f->mountinfo, mi);
	write_file(f->selfcg, "5:freezer:/\n4:pids:/\n"
	                      "3:memory:/docker/x/inner\n2:cpu,cpuacct:/\n");
	const char *dirs[] = {"cpu,cpuacct", "memory/inner", "pids", "freezer"};
	for (size_t i = 0; i < 4; i++) {
		mkdirf("%s/v1/%s", f->tmp, dirs[i]);
	}
	f->env.fake_mkdir = NULL;
	f->env.fake_rmdir = NULL;
	*state = f;
	return 0;
}

static void test_v1_combined_and_subtree_mount(void **state)
{
	struct fake *f = *state;
	struct cgroup_manager *m = manager(f);
	assert_int_equal(cgroup_manager_version(m), 1);
	assert_true(is_dir("%s/v1/cpu,cpuacct/" MGR, f->tmp));
	assert_true(is_dir("%s/v1/memory/inner/" MGR, f->tmp));
	assert_false(exists("%s/v1/memory/docker", f->tmp));
	assert_true(is_dir("%s/v1/pids/" MGR, f->tmp));
	assert_true(is_dir("%s/v1/freezer/" MGR, f->tmp));
	struct sbx_err err = {0};
	assert_int_equal(cgroup_manager_remove(m, &err), 0);
	cgroup_manager_free(m);
}

static void test_v1_missing_freezer_fails(void **state)
{
	struct fake *f = *state;
	char mi[4096];
	snprintf(mi, sizeof(mi),
	         "40 30 0:40 / %1$s/v1/cpu,cpuacct rw - cgroup cgroup "
	         "rw,cpu,cpuacct\n"
	         "41 30 0:41 /docker/x %1$s/v1/memory rw - cgroup cgroup "
	         "rw,memory\n"
	         "42 30 0:42 / %1$s/v1/pids rw - cgroup cgroup rw,pids\n",
	         f->tmp);
	write_file(f->mountinfo, mi);
	struct cgroup_manager *m = NULL;
	struct sbx_err err = {0};
	assert_int_equal(cgroup_manager_new(&f->env, MGR, &m, &err), -ENOTSUP);
	assert_non_null(strstr(err.msg, "freezer"));
	assert_false(exists("%s/v1/pids/" MGR, f->tmp));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup_v2, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_detect_picks_v2),
	    T(test_daemon_moved_into_own_daemon),
	    T(test_subtree_control_enabled),
	    T(test_limits_written),
	    T(test_unlimited_written_as_max),
	    T(test_tiny_cpu_quota_clamped),
	    T(test_swap_max_absent_is_skipped),
	    T(test_set_limits_updates),
	    T(test_add_init),
	    T(test_acquire_fds_land_in_c0),
	    T(test_acquire_without_fds_then_open),
	    T(test_init_fds_land_in_init),
	    T(test_release_then_acquire_reuses_c0),
	    T(test_busy_leaf_waits_for_reclaim),
	    T(test_destroy_removes_dirs),
	    T(test_remove_of_an_empty_sandbox),
	    T(test_kill_never_waits_for_a_survivor),
	    T(test_kill_without_cgroup_kill_freezes),
	    T(test_stats),
	    T(test_stale_sandbox_replaced),
	    T(test_manager_clean_and_remove),
	    T(test_totals),
	    T(test_stale_managers_removed),
	    T(test_live_manager_keeps_its_dirs),
	    T(test_no_lock_dir_leaves_stale_dirs),
	    T(test_nothing_made_ahead_on_v2),
	    T(test_invalid_names_rejected),
	    T(test_v2_without_controllers_and_no_v1_fails),
	    cmocka_unit_test_setup_teardown(test_hybrid_selects_v1,
	                                    setup_hybrid, teardown),
	    cmocka_unit_test_setup_teardown(test_v1_combined_and_subtree_mount,
	                                    setup_v1_combined, teardown),
	    cmocka_unit_test_setup_teardown(test_v1_missing_freezer_fails,
	                                    setup_v1_combined, teardown),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
