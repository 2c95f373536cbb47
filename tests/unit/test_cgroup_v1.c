/* cgroup module on this machine's real v1 hierarchies (memory, pids, cpu,
 * freezer, cpuacct): limits read back from cgroupfs, processes really
 * killed, directories really gone. Skipped when not root or when the host
 * has no v1 memory hierarchy (a pure v2 host; test_cgroup_v2 covers that).
 *
 * Everything is created under a manager named sbx-unit-<pid>; the group
 * teardown kills and removes whatever a failed test left there. The test
 * process is a child subreaper so that daemonized grandchildren come back to
 * it and can be reaped, which is how "gone" is asserted. */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/cgroup.h"
#include "runtime/cgroup_internal.h"

static struct cgroup_manager *M;
static char mgr_name[64];
static char skip_reason[600];

/* ---- helpers ----------------------------------------------------------------
 */

static const char *hpath(unsigned ctrl)
{
	int h = cgroup_hier_find(M, ctrl);
	assert_true(h >= 0);
	return M->h[h].path;
}

/* Is the v1 memory hierarchy flat (cgroup_internal.h): the sandbox one
 * memory cgroup with the limit and the commands, init in the manager's
 * own dir? Where memory is mounted on its own, as here. */
static bool mem_flat(void)
{
	return M->h[cgroup_hier_find(M, CGROUP_CTRL_MEMORY)].flat;
}

/* The memory cgroup of box's commands (the one with the limit), and of
 * its init, relative to the manager's dir in the memory hierarchy; static
 * buffers. */
static const char *mem_cmds(const char *box)
{
	static char b[128];
	snprintf(b, sizeof(b), mem_flat() ? "%s" : "%s/cmds", box);
	return b;
}

static const char *mem_init(const char *box)
{
	static char b[128];
	snprintf(b, sizeof(b), mem_flat() ? "." : "%s/init", box);
	return b;
}

/* Does hierarchy h have <box>/init (and, with leaves, <box>/cmds)? */
static bool has_init_dir(int h)
{
	return !M->h[h].flat;
}

/* Trimmed content of a file; a static buffer. NULL if unreadable. */
static const char *readf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static const char *readf(const char *fmt, ...)
{
	static char buf[4096];
	char path[PATH_MAX];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	assert_true(n > 0 && n < (int)sizeof(path));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len < 0)
		return NULL;
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
		len--;
	buf[len] = '\0';
	return buf;
}

static bool existsf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool existsf(const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return access(path, F_OK) == 0;
}

static bool has_subdirs(const char *path)
{
	DIR *d = opendir(path);
	assert_non_null(d);
	struct dirent *de;
	bool found = false;
	while ((de = readdir(d)))
		if (de->d_type == DT_DIR && strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			found = true;
	closedir(d);
	return found;
}

static bool pid_listed(const char *procs, pid_t pid)
{
	char want[24];
	snprintf(want, sizeof(want), "%d", (int)pid);
	for (const char *p = procs; p && *p;) {
		size_t len = strcspn(p, "\n");
		if (len == strlen(want) && strncmp(p, want, len) == 0)
			return true;
		p += len;
		if (*p)
			p++;
	}
	return false;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Reap every child and adopted orphan, for up to two seconds. */
static void reap_all(void)
{
	for (int i = 0; i < 2000; i++) {
		pid_t r = waitpid(-1, NULL, WNOHANG);
		if (r > 0)
			continue;
		if (r < 0 && errno == ECHILD)
			return;
		sleep_ms(1);
	}
}

/* The status of pid once it has died; fails the test if it lives on. */
static int wait_dead(pid_t pid)
{
	int status;
	for (int i = 0; i < 2000; i++) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return status;
		assert_int_equal(r, 0);
		sleep_ms(1);
	}
	fail_msg("pid %d still alive", (int)pid);
	return 0;
}

static void assert_killed(pid_t pid)
{
	int status = wait_dead(pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
	assert_int_equal(kill(pid, 0), -1);
	assert_int_equal(errno, ESRCH);
}

/* Kill rounds as exec makes them from its timer, until the leaf is empty
 * (each round returns at once). */
static void kill_until_empty(struct cgroup_sandbox *s, int idx)
{
	struct sbx_err err = {0};
	int64_t deadline = cgroup_now_ns() + 10 * 1000000000LL;
	int n;
	while ((n = cgroup_cmd_kill(s, idx, &err)) > 0) {
		if (cgroup_now_ns() > deadline)
			fail_msg("the leaf still holds %d processes", n);
		usleep(1000);
	}
	if (n < 0)
		fail_msg("cgroup_cmd_kill: %s", err.msg);
}

static struct cgroup_sandbox *sandbox(const char *name, uint64_t mem,
                                      uint32_t pids, uint32_t cpu)
{
	struct cgroup_limits lim = {mem, pids, cpu};
	struct cgroup_sandbox *s = NULL;
	struct sbx_err err = {0};
	if (cgroup_sandbox_new(M, name, &lim, &s, &err) < 0)
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

/* In a forked child: join the leaf as the sandbox's init would. */
static void join(int *fds, int nfds)
{
	for (int i = 0; i < nfds; i++)
		if (write(fds[i], "0", 1) != 1)
			_exit(111);
	close_fds(fds, nfds);
}

static pid_t read_pid(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	assert_int_equal(poll(&p, 1, 5000), 1);
	pid_t pid = 0;
	assert_int_equal(read(fd, &pid, sizeof(pid)), (ssize_t)sizeof(pid));
	assert_true(pid > 0);
	return pid;
}

/* devices.list of a sandbox's cgroup: its /dev nodes, ptmx, the ptys. */
#define DEVICE_RULES                                                           \
	"c 1:3 rwm\nc 1:5 rwm\nc 1:7 rwm\nc 1:8 rwm\nc 1:9 rwm\nc 5:0 rwm\n"   \
	"c 5:2 rwm\nc 136:* rwm"

#define NEED_V1()                                                              \
	do {                                                                   \
		if (!M) {                                                      \
			print_message("skipped: %s\n", skip_reason);           \
			skip();                                                \
		}                                                              \
	} while (0)

/* ---- tests ------------------------------------------------------------------
 */

static void test_detects_v1(void **state)
{
	(void)state;
	NEED_V1();
	assert_int_equal(cgroup_manager_version(M), 1);
	const unsigned ctrls[] = {CGROUP_CTRL_MEMORY, CGROUP_CTRL_PIDS,
	                          CGROUP_CTRL_CPU, CGROUP_CTRL_FREEZER};
	for (size_t i = 0; i < 4; i++)
		assert_true(existsf("%s", hpath(ctrls[i])));
}

static void test_limits_read_back(void **state)
{
	(void)state;
	NEED_V1();
	struct cgroup_sandbox *s = sandbox("lim", 64 << 20, 16, 500);
	const char *mem = hpath(CGROUP_CTRL_MEMORY);
	const char *cmds = mem_cmds("lim");
	bool memsw = existsf("%s/%s/memory.memsw.limit_in_bytes", mem, cmds);

	assert_string_equal(readf("%s/%s/memory.limit_in_bytes", mem, cmds),
	                    "67108864");
	if (memsw)
		assert_string_equal(
		    readf("%s/%s/memory.memsw.limit_in_bytes", mem, cmds),
		    "67108864");
	assert_string_equal(readf("%s/lim/pids.max", hpath(CGROUP_CTRL_PIDS)),
	                    "16");
	/* the kernel's default period, which the daemon does not write
	 * (each write checks every task group on the machine) */
	assert_string_equal(
	    readf("%s/lim/cpu.cfs_period_us", hpath(CGROUP_CTRL_CPU)),
	    "100000");
	assert_string_equal(
	    readf("%s/lim/cpu.cfs_quota_us", hpath(CGROUP_CTRL_CPU)), "50000");
	for (int i = 0; i < M->nh; i++) {
		assert_int_equal(existsf("%s/lim/init", M->h[i].path),
		                 has_init_dir(i));
		assert_int_equal(existsf("%s/lim/cmds", M->h[i].path),
		                 M->h[i].leaves && has_init_dir(i));
	}
	/* one memory cgroup per sandbox here */
	assert_true(mem_flat());
	/* The memory limit is the commands' alone: init's cgroup has none,
	 * nor anything between it and the manager (an OOM never picks
	 * init). */
	assert_true(
	    strtoull(readf("%s/%s/memory.limit_in_bytes", mem, mem_init("lim")),
	             NULL, 10) >= (1ull << 62));
	if (!mem_flat())
		assert_true(strtoull(readf("%s/lim/memory.limit_in_bytes", mem),
		                     NULL, 10) >= (1ull << 62));
	/* pids and CPU cover init and the commands together */
	assert_string_equal(
	    readf("%s/lim/cmds/pids.max", hpath(CGROUP_CTRL_PIDS)), "max");
	int hd = cgroup_hier_find(M, CGROUP_CTRL_DEVICES);
	if (hd >= 0) {
		assert_string_equal(readf("%s/lim/devices.list", M->h[hd].path),
		                    DEVICE_RULES);
		assert_string_equal(
		    readf("%s/lim/init/devices.list", M->h[hd].path),
		    DEVICE_RULES);
	} else {
		print_message("no v1 devices hierarchy: rules not checked\n");
	}

	/* Raising the memory limit past the memsw limit is the order the
	 * kernel refuses unless memsw goes first. */
	struct cgroup_limits up = {0, 0, 0};
	struct sbx_err err = {0};
	if (cgroup_sandbox_set_limits(s, &up, &err) < 0)
		fail_msg("set_limits: %s", err.msg);
	const char *v = readf("%s/%s/memory.limit_in_bytes", mem, cmds);
	assert_true(strtoull(v, NULL, 10) >= (1ull << 62)); /* "unlimited" */
	assert_string_equal(readf("%s/lim/pids.max", hpath(CGROUP_CTRL_PIDS)),
	                    "max");
	assert_string_equal(
	    readf("%s/lim/cpu.cfs_quota_us", hpath(CGROUP_CTRL_CPU)), "-1");

	struct cgroup_limits down = {32 << 20, 8, 2000};
	if (cgroup_sandbox_set_limits(s, &down, &err) < 0)
		fail_msg("set_limits: %s", err.msg);
	assert_string_equal(readf("%s/%s/memory.limit_in_bytes", mem, cmds),
	                    "33554432");
	if (memsw)
		assert_string_equal(
		    readf("%s/%s/memory.memsw.limit_in_bytes", mem, cmds),
		    "33554432");
	assert_string_equal(readf("%s/lim/pids.max", hpath(CGROUP_CTRL_PIDS)),
	                    "8");
	assert_string_equal(
	    readf("%s/lim/cpu.cfs_quota_us", hpath(CGROUP_CTRL_CPU)), "200000");

	struct cgroup_limits up2 = {256 << 20, 8, 2000};
	if (cgroup_sandbox_set_limits(s, &up2, &err) < 0)
		fail_msg("set_limits: %s", err.msg);
	assert_string_equal(readf("%s/%s/memory.limit_in_bytes", mem, cmds),
	                    "268435456");
	destroy(s);
}

static void test_daemonized_escaper_killed(void **state)
{
	(void)state;
	NEED_V1();
	struct cgroup_sandbox *s = sandbox("esc", 64 << 20, 64, 1000);
	int fds[CGROUP_MAX_FDS], nfds, p[2];
	int idx = acquire(s, fds, &nfds);
	int want = 0;
	for (int i = 0; i < M->nh; i++)
		want += M->h[i].leaves;
	assert_int_equal(nfds, want);
	assert_true(cgroup_cmd_empty(s, idx));
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);

	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		join(fds, nfds);
		pid_t gc = fork();
		if (gc == 0) {
			setsid();
			pid_t me = getpid();
			if (write(p[1], &me, sizeof(me)) != sizeof(me))
				_exit(112);
			for (;;)
				pause();
		}
		for (;;)
			pause();
	}
	close_fds(fds, nfds);
	close(p[1]);
	pid_t gc = read_pid(p[0]);
	close(p[0]);

	char leaf[64];
	snprintf(leaf, sizeof(leaf), "esc/cmds/c%d", idx);
	for (int i = 0; i < M->nh; i++) {
		if (!M->h[i].leaves)
			continue;
		/* flat: in the sandbox's one cgroup */
		const char *procs = readf("%s/%s/cgroup.procs", M->h[i].path,
		                          M->h[i].flat ? "esc" : leaf);
		assert_true(pid_listed(procs, child));
		assert_true(pid_listed(procs, gc));
	}
	assert_false(cgroup_cmd_empty(s, idx));

	kill_until_empty(s, idx);
	assert_killed(child);
	assert_killed(gc);
	assert_true(cgroup_cmd_empty(s, idx));
	assert_string_equal(readf("%s/%s/cgroup.procs",
	                          hpath(CGROUP_CTRL_MEMORY),
	                          mem_flat() ? "esc" : leaf),
	                    "");
	/* Thawed again: the next command must not start frozen. */
	assert_string_equal(
	    readf("%s/%s/freezer.state", hpath(CGROUP_CTRL_FREEZER), leaf),
	    "THAWED");
	assert_true(cgroup_cmd_release(s, idx));
	int idx2 = acquire(s, fds, &nfds);
	assert_int_equal(idx2, idx);
	close_fds(fds, nfds);
	destroy(s);
}

static void test_fork_bomb_contained_and_killed(void **state)
{
	(void)state;
	NEED_V1();
	struct cgroup_sandbox *s = sandbox("bomb", 64 << 20, 16, 500);
	int fds[CGROUP_MAX_FDS], nfds;
	int idx = acquire(s, fds, &nfds);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		join(fds, nfds);
		for (;;)
			fork();
	}
	close_fds(fds, nfds);
	sleep_ms(300);

	struct cgroup_stats st;
	assert_int_equal(cgroup_sandbox_stats(s, &st), 0);
	assert_true(st.pids >= 2);
	assert_true(st.pids <= 16);
	/* The limit was hit, and held. v1 counts the event in the forking
	 * process's cgroup, the leaf, not in the one whose limit it is. */
	const char *pids = hpath(CGROUP_CTRL_PIDS);
	const char *ev = readf("%s/bomb/cmds/c%d/pids.events", pids, idx);
	assert_non_null(ev);
	assert_non_null(strstr(ev, "max "));
	assert_true(strtoull(strstr(ev, "max ") + 4, NULL, 10) > 0);
	if (existsf("%s/bomb/pids.peak", pids))
		assert_true(
		    strtoull(readf("%s/bomb/pids.peak", pids), NULL, 10) <= 16);

	int64_t t0 = cgroup_now_ns();
	kill_until_empty(s, idx);
	print_message("fork bomb killed in %.1f ms\n",
	              (double)(cgroup_now_ns() - t0) / 1e6);
	assert_killed(child);
	reap_all();
	assert_true(cgroup_cmd_empty(s, idx));
	assert_string_equal(
	    readf("%s/bomb/pids.current", hpath(CGROUP_CTRL_PIDS)), "0");
	destroy(s);
}

static void test_oom_kill_counted(void **state)
{
	(void)state;
	NEED_V1();
	struct cgroup_sandbox *s = sandbox("oom", 32 << 20, 16, 1000);
	int fds[CGROUP_MAX_FDS], nfds;
	acquire(s, fds, &nfds);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		join(fds, nfds);
		for (int i = 0; i < 256; i++) {
			char *b = malloc(1 << 20);
			if (!b)
				_exit(113);
			memset(b, 1, 1 << 20);
		}
		_exit(0); /* survived 256 MiB: the limit did not hold */
	}
	close_fds(fds, nfds);
	assert_killed(child);
	struct cgroup_stats st;
	assert_int_equal(cgroup_sandbox_stats(s, &st), 0);
	assert_true(st.oom_kills >= 1);
	destroy(s);
}

static void test_init_joins_and_stats(void **state)
{
	(void)state;
	NEED_V1();
	struct cgroup_sandbox *s = sandbox("stats", 64 << 20, 16, 1000);
	int go[2], done[2];
	assert_int_equal(pipe2(go, O_CLOEXEC), 0);
	assert_int_equal(pipe2(done, O_CLOEXEC), 0);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		char c;
		if (read(go[0], &c, 1) != 1)
			_exit(114);
		/* Burn 150 ms of CPU, inside the sandbox's cgroups now. */
		struct timespec ts;
		do
			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
		while (ts.tv_sec == 0 && ts.tv_nsec < 150000000L);
		pid_t me = getpid();
		if (write(done[1], &me, sizeof(me)) != sizeof(me))
			_exit(115);
		for (;;)
			pause();
	}
	close(go[0]);
	close(done[1]);
	struct sbx_err err = {0};
	if (cgroup_sandbox_add_init(s, child, &err) < 0)
		fail_msg("add_init: %s", err.msg);
	for (int i = 0; i < M->nh; i++)
		assert_true(pid_listed(readf("%s/%s/cgroup.procs", M->h[i].path,
		                             M->h[i].flat ? "." : "stats/init"),
		                       child));
	assert_int_equal(write(go[1], "x", 1), 1);
	assert_int_equal(read_pid(done[0]), child);
	close(go[1]);
	close(done[0]);

	struct cgroup_stats st;
	assert_int_equal(cgroup_sandbox_stats(s, &st), 0);
	assert_int_equal(st.pids, 1);
	/* flat: the sandbox's memory is its commands' (none here) */
	if (!mem_flat())
		assert_true(st.memory_bytes > 0);
	if (cgroup_hier_find(M, CGROUP_CTRL_CPUACCT) >= 0)
		assert_true(st.cpu_usec >= 100000);
	assert_int_equal(st.oom_kills, 0);

	destroy(s); /* init too */
	assert_killed(child);
}

static void test_destroy_removes_every_dir(void **state)
{
	(void)state;
	NEED_V1();
	struct cgroup_sandbox *s = sandbox("rm", 0, 0, 0);
	int fds[3][CGROUP_MAX_FDS], nfds[3];
	for (int i = 0; i < 3; i++)
		assert_int_equal(acquire(s, fds[i], &nfds[i]), i);
	close_fds(fds[0], nfds[0]);
	close_fds(fds[2], nfds[2]);
	assert_true(cgroup_cmd_release(s, 0));
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		join(fds[1], nfds[1]);
		for (;;)
			pause();
	}
	close_fds(fds[1], nfds[1]);
	for (int i = 0; i < 200 && cgroup_cmd_empty(s, 1); i++)
		sleep_ms(1);
	assert_false(cgroup_cmd_empty(s, 1));
	for (int i = 0; i < M->nh; i++) {
		bool leaves = M->h[i].leaves && !M->h[i].flat;
		assert_int_equal(existsf("%s/rm/cmds/c2", M->h[i].path),
		                 leaves);
	}
	destroy(s);
	assert_killed(child);
	for (int i = 0; i < M->nh; i++)
		assert_false(existsf("%s/rm", M->h[i].path));
}

/* After a sandbox's init is gone its cgroups are empty: removed with
 * rmdir alone. */
static void test_remove_of_an_empty_sandbox(void **state)
{
	(void)state;
	NEED_V1();
	struct cgroup_sandbox *s = sandbox("rmq", 0, 0, 0);
	int fds[CGROUP_MAX_FDS], nfds;
	assert_int_equal(acquire(s, fds, &nfds), 0);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		join(fds, nfds);
		_exit(0);
	}
	close_fds(fds, nfds);
	assert_int_equal(waitpid(child, NULL, 0), child);
	assert_int_equal(acquire(s, fds, &nfds), 1);
	close_fds(fds, nfds);
	struct sbx_err err = {0};
	if (cgroup_sandbox_remove(s, &err) < 0)
		fail_msg("cgroup_sandbox_remove: %s", err.msg);
	for (int i = 0; i < M->nh; i++)
		assert_false(existsf("%s/rmq", M->h[i].path));
}

/* Told "empty" while a process still lives in a leaf: it is killed and
 * everything goes all the same (nothing is left alive or behind). */
static void test_remove_falls_back_to_the_kill(void **state)
{
	(void)state;
	NEED_V1();
	struct cgroup_sandbox *s = sandbox("rmf", 0, 0, 0);
	int fds[CGROUP_MAX_FDS], nfds;
	assert_int_equal(acquire(s, fds, &nfds), 0);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		join(fds, nfds);
		for (;;)
			pause();
	}
	close_fds(fds, nfds);
	for (int i = 0; i < 200 && cgroup_cmd_empty(s, 0); i++)
		sleep_ms(1);
	assert_false(cgroup_cmd_empty(s, 0));
	struct sbx_err err = {0};
	if (cgroup_sandbox_remove(s, &err) < 0)
		fail_msg("cgroup_sandbox_remove: %s", err.msg);
	assert_killed(child);
	for (int i = 0; i < M->nh; i++)
		assert_false(existsf("%s/rmf", M->h[i].path));
}

static void test_stale_sandbox_replaced(void **state)
{
	(void)state;
	NEED_V1();
	/* A daemon that died left sandbox "stale" behind, with a live
	 * process. A new sandbox of that name must start empty. */
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t daemon = fork();
	assert_true(daemon >= 0);
	if (daemon == 0) {
		struct cgroup_manager *m2 = NULL;
		struct cgroup_sandbox *s2 = NULL;
		struct cgroup_limits lim = {0, 0, 0};
		int fds[CGROUP_MAX_FDS], nfds;
		if (cgroup_manager_new(NULL, mgr_name, &m2, NULL) < 0 ||
		    cgroup_sandbox_new(m2, "stale", &lim, &s2, NULL) < 0 ||
		    cgroup_cmd_acquire(s2, fds, &nfds, NULL) < 0)
			_exit(116);
		if (fork() == 0) {
			join(fds, nfds);
			pid_t me = getpid();
			if (write(p[1], &me, sizeof(me)) != sizeof(me))
				_exit(117);
			for (;;)
				pause();
		}
		_exit(0); /* "dies" without cleaning up */
	}
	close(p[1]);
	pid_t orphan = read_pid(p[0]);
	close(p[0]);
	int status = wait_dead(daemon);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(kill(orphan, 0), 0);

	struct cgroup_sandbox *s = sandbox("stale", 0, 0, 0);
	assert_killed(orphan);
	for (int i = 0; i < M->nh; i++)
		assert_false(existsf("%s/stale/cmds/c0", M->h[i].path));
	destroy(s);
}

static void make_ahead(uint64_t mem, uint32_t pids, uint32_t cpu)
{
	struct cgroup_limits lim = {mem, pids, cpu};
	struct sbx_err err = {0};
	if (cgroup_manager_make_ahead(M, &lim, &err) < 0)
		fail_msg("cgroup_manager_make_ahead: %s", err.msg);
}

static void test_made_ahead_becomes_the_next_sandbox(void **state)
{
	(void)state;
	NEED_V1();
	make_ahead(64 << 20, 16, 500);
	for (int i = 0; i < M->nh; i++)
		assert_true(existsf("%s/ahead", M->h[i].path));
	const char *mem = hpath(CGROUP_CTRL_MEMORY);
	const char *pids = hpath(CGROUP_CTRL_PIDS);
	/* the same limits: the set is renamed, nothing rewritten */
	struct cgroup_sandbox *s = sandbox("ah1", 64 << 20, 16, 500);
	for (int i = 0; i < M->nh; i++) {
		assert_false(existsf("%s/ahead", M->h[i].path));
		assert_int_equal(existsf("%s/ah1/init", M->h[i].path),
		                 has_init_dir(i));
		assert_int_equal(existsf("%s/ah1/cmds", M->h[i].path),
		                 M->h[i].leaves && has_init_dir(i));
	}
	assert_string_equal(
	    readf("%s/%s/memory.limit_in_bytes", mem, mem_cmds("ah1")),
	    "67108864");
	assert_string_equal(readf("%s/ah1/pids.max", pids), "16");
	int hd = cgroup_hier_find(M, CGROUP_CTRL_DEVICES);
	if (hd >= 0)
		assert_string_equal(
		    readf("%s/ah1/init/devices.list", M->h[hd].path),
		    DEVICE_RULES);
	/* a second call while a set waits makes no second one; other limits:
	 * rewritten on the renamed set */
	make_ahead(64 << 20, 16, 500);
	make_ahead(1 << 30, 99, 0);
	struct cgroup_sandbox *t = sandbox("ah2", 32 << 20, 8, 2000);
	assert_string_equal(
	    readf("%s/%s/memory.limit_in_bytes", mem, mem_cmds("ah2")),
	    "33554432");
	assert_string_equal(readf("%s/ah2/pids.max", pids), "8");
	assert_string_equal(
	    readf("%s/ah2/cpu.cfs_quota_us", hpath(CGROUP_CTRL_CPU)), "200000");
	/* none waiting: made the long way */
	struct cgroup_sandbox *u = sandbox("ah3", 0, 5, 0);
	assert_string_equal(readf("%s/ah3/pids.max", pids), "5");
	/* a command's leaf in a renamed set works as in any other */
	int fds[CGROUP_MAX_FDS], nfds;
	int idx = acquire(s, fds, &nfds);
	assert_int_equal(idx, 0);
	close_fds(fds, nfds);
	assert_true(existsf("%s/ah1/cmds/c0", pids));
	destroy(s);
	destroy(t);
	destroy(u);
	for (int i = 0; i < M->nh; i++)
		assert_false(has_subdirs(M->h[i].path));
}

static void test_made_ahead_over_a_stale_name(void **state)
{
	(void)state;
	NEED_V1();
	/* "ah4" is left in one hierarchy (a daemon died): the rename fails
	 * there, the set is dropped, and the sandbox is made the long way,
	 * the stale dir removed first */
	const char *pids = hpath(CGROUP_CTRL_PIDS);
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/ah4", pids);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/ah4/left", pids);
	assert_int_equal(mkdir(p, 0755), 0);
	make_ahead(0, 7, 0);
	struct cgroup_sandbox *s = sandbox("ah4", 0, 3, 0);
	assert_false(existsf("%s/ah4/left", pids));
	assert_string_equal(readf("%s/ah4/pids.max", pids), "3");
	for (int i = 0; i < M->nh; i++) {
		assert_false(existsf("%s/ahead", M->h[i].path));
		assert_int_equal(existsf("%s/ah4/init", M->h[i].path),
		                 has_init_dir(i));
	}
	destroy(s);
	/* the manager's removal takes a waiting set with it */
	make_ahead(0, 0, 0);
	struct sbx_err err = {0};
	if (cgroup_manager_clean(M, &err) < 0)
		fail_msg("cgroup_manager_clean: %s", err.msg);
	for (int i = 0; i < M->nh; i++)
		assert_false(has_subdirs(M->h[i].path));
}

static void test_manager_clean_after_dead_daemon(void **state)
{
	(void)state;
	NEED_V1();
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t daemon = fork();
	assert_true(daemon >= 0);
	if (daemon == 0) {
		struct cgroup_manager *m2 = NULL;
		struct cgroup_sandbox *s2 = NULL;
		struct cgroup_limits lim = {0, 0, 0};
		int fds[CGROUP_MAX_FDS], nfds;
		if (cgroup_manager_new(NULL, mgr_name, &m2, NULL) < 0)
			_exit(116);
		for (int n = 0; n < 2; n++) {
			char name[16];
			snprintf(name, sizeof(name), "old%d", n);
			if (cgroup_sandbox_new(m2, name, &lim, &s2, NULL) < 0 ||
			    cgroup_cmd_acquire(s2, fds, &nfds, NULL) < 0)
				_exit(116);
			if (fork() == 0) {
				join(fds, nfds);
				pid_t me = getpid();
				if (write(p[1], &me, sizeof(me)) != sizeof(me))
					_exit(117);
				for (;;)
					pause();
			}
			close_fds(fds, nfds);
		}
		_exit(0);
	}
	close(p[1]);
	pid_t orphan[2] = {read_pid(p[0]), read_pid(p[0])};
	close(p[0]);
	wait_dead(daemon);

	struct sbx_err err = {0};
	if (cgroup_manager_clean(M, &err) < 0)
		fail_msg("cgroup_manager_clean: %s", err.msg);
	assert_killed(orphan[0]);
	assert_killed(orphan[1]);
	for (int i = 0; i < M->nh; i++) {
		assert_true(existsf("%s", M->h[i].path));
		assert_false(has_subdirs(M->h[i].path));
	}
}

static void test_init_outside_the_memory_limit(void **state)
{
	(void)state;
	NEED_V1();
	/* init may use more than the sandbox's limit and live: an OOM in the
	 * sandbox can only ever pick a command */
	struct cgroup_sandbox *s = sandbox("initmem", 16 << 20, 64, 0);
	int go[2], done[2];
	assert_int_equal(pipe2(go, O_CLOEXEC), 0);
	assert_int_equal(pipe2(done, O_CLOEXEC), 0);
	pid_t init = fork();
	assert_true(init >= 0);
	if (init == 0) {
		char c;
		if (read(go[0], &c, 1) != 1)
			_exit(114);
		for (int i = 0; i < 48; i++) {
			char *b = malloc(1 << 20);
			if (!b)
				_exit(113);
			memset(b, 1, 1 << 20);
		}
		pid_t me = getpid();
		if (write(done[1], &me, sizeof(me)) != sizeof(me))
			_exit(115);
		for (;;)
			pause();
	}
	close(go[0]);
	close(done[1]);
	struct sbx_err err = {0};
	if (cgroup_sandbox_add_init(s, init, &err) < 0)
		fail_msg("add_init: %s", err.msg);
	/* by structure: init's memory cgroup is not the commands' */
	const char *mem = hpath(CGROUP_CTRL_MEMORY);
	assert_true(pid_listed(
	    readf("%s/%s/cgroup.procs", mem, mem_init("initmem")), init));
	assert_false(pid_listed(
	    readf("%s/%s/cgroup.procs", mem, mem_cmds("initmem")), init));
	assert_int_equal(write(go[1], "x", 1), 1);
	assert_int_equal(read_pid(done[0]), init);
	close(go[1]);
	close(done[0]);

	/* a command past the limit is killed, init lives on */
	int fds[CGROUP_MAX_FDS], nfds;
	acquire(s, fds, &nfds);
	pid_t cmd = fork();
	assert_true(cmd >= 0);
	if (cmd == 0) {
		join(fds, nfds);
		for (int i = 0; i < 64; i++) {
			char *b = malloc(1 << 20);
			if (!b)
				_exit(113);
			memset(b, 1, 1 << 20);
		}
		_exit(0);
	}
	close_fds(fds, nfds);
	assert_killed(cmd);
	assert_int_equal(waitpid(init, NULL, WNOHANG), 0);
	assert_int_equal(kill(init, 0), 0);
	struct cgroup_stats st;
	assert_int_equal(cgroup_sandbox_stats(s, &st), 0);
	assert_true(st.oom_kills >= 1);
	if (!mem_flat())
		assert_true(st.memory_bytes > (32u << 20)); /* init's */
	destroy(s);
	assert_killed(init);
}

static void test_signal_reaches_the_tree(void **state)
{
	(void)state;
	NEED_V1();
	struct cgroup_sandbox *s = sandbox("sig", 0, 0, 0);
	int fds[CGROUP_MAX_FDS], nfds, p[2];
	int idx = acquire(s, fds, &nfds);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		join(fds, nfds);
		pid_t gc = fork();
		if (gc == 0) {
			setsid();
			pid_t me = getpid();
			if (write(p[1], &me, sizeof(me)) != sizeof(me))
				_exit(112);
			for (;;)
				pause();
		}
		for (;;)
			pause();
	}
	close_fds(fds, nfds);
	close(p[1]);
	pid_t gc = read_pid(p[0]);
	close(p[0]);
	assert_int_equal(cgroup_cmd_signal(s, idx, SIGTERM), 2);
	int status = wait_dead(child);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
	for (int i = 0; i < 2000 && kill(gc, 0) == 0; i++) {
		reap_all();
		sleep_ms(1);
	}
	assert_int_equal(kill(gc, 0), -1);
	assert_true(cgroup_cmd_empty(s, idx));
	destroy(s);
}

/* The pid of a process listed in a leaf, handed to another process (not
 * in the leaf) between the listing and the signal. */
struct recycle {
	pid_t victim;   /* in the leaf */
	pid_t stranger; /* took victim's pid, outside the leaf */
	int err;
};

static void recycle_pid(void *arg)
{
	struct recycle *r = arg;
	kill(r->victim, SIGKILL);
	waitpid(r->victim, NULL, 0);
	pid_t tid = r->victim;
	struct clone_args ca = {
	    .exit_signal = SIGCHLD,
	    .set_tid = (uint64_t)(uintptr_t)&tid,
	    .set_tid_size = 1,
	};
	pid_t pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid == 0) {
		for (;;)
			pause();
	}
	r->stranger = pid;
	r->err = pid < 0 ? errno : 0;
}

static void test_signal_never_hits_a_recycled_pid(void **state)
{
	(void)state;
	NEED_V1();
	struct cgroup_sandbox *s = sandbox("recycle", 0, 0, 0);
	int fds[CGROUP_MAX_FDS], nfds, p[2];
	int idx = acquire(s, fds, &nfds);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t victim = fork();
	assert_true(victim >= 0);
	if (victim == 0) {
		join(fds, nfds);
		if (write(p[1], "x", 1) != 1)
			_exit(112);
		for (;;)
			pause();
	}
	close_fds(fds, nfds);
	close(p[1]);
	char c;
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);

	struct recycle r = {.victim = victim};
	M->test_listed = recycle_pid;
	M->test_arg = &r;
	/* SIGUSR1 kills by default; a fatal signal fixes the exit status
	 * the moment it is sent, so the status below tells without waiting
	 * whether the stranger was hit */
	int n = cgroup_cmd_signal(s, idx, SIGUSR1);
	M->test_listed = NULL;
	if (r.err == EEXIST) {
		print_message("skipped: pid %d was taken before the test could "
		              "reuse it\n",
		              (int)victim);
		destroy(s);
		skip();
	}
	assert_int_equal(r.err, 0);
	assert_int_equal(r.stranger, victim); /* the same pid number */
	assert_int_equal(n, 1);               /* it was listed... */
	/* ...but the process that has its number now is not the one listed */
	assert_int_equal(kill(r.stranger, SIGKILL), 0);
	int status = wait_dead(r.stranger);
	assert_true(WIFSIGNALED(status));
	if (WTERMSIG(status) == SIGUSR1)
		fail_msg("a recycled pid was signalled: pid %d now names a "
		         "process outside the leaf",
		         (int)r.stranger);
	assert_int_equal(WTERMSIG(status), SIGKILL);
	assert_true(cgroup_cmd_empty(s, idx));
	destroy(s);
}

static void test_totals(void **state)
{
	(void)state;
	NEED_V1();
	const char *mem = hpath(CGROUP_CTRL_MEMORY);
	const char *pids = hpath(CGROUP_CTRL_PIDS);
	bool memsw = existsf("%s/memory.memsw.limit_in_bytes", mem);
	struct sbx_err err = {0};
	if (cgroup_manager_set_totals(M, 512ull << 20, 1000, &err) < 0)
		fail_msg("set_totals: %s", err.msg);
	assert_string_equal(readf("%s/memory.limit_in_bytes", mem),
	                    "536870912");
	if (memsw)
		assert_string_equal(
		    readf("%s/memory.memsw.limit_in_bytes", mem), "536870912");
	assert_string_equal(readf("%s/pids.max", pids), "1000");
	/* sandboxes below it keep their own limits, and fit under it */
	struct cgroup_sandbox *s = sandbox("tot", 64 << 20, 16, 0);
	assert_string_equal(readf("%s/tot/pids.max", pids), "16");
	destroy(s);
	if (cgroup_manager_set_totals(M, 0, 0, &err) < 0)
		fail_msg("set_totals: %s", err.msg);
	assert_true(strtoull(readf("%s/memory.limit_in_bytes", mem), NULL,
	                     10) >= (1ull << 62));
	assert_string_equal(readf("%s/pids.max", pids), "max");
}

/* A stale manager dir <own>/<prefix><tag> in every hierarchy, with a
 * sandbox's dirs in it. */
static void make_stale(const char *prefix, const char *tag)
{
	for (int i = 0; i < M->nh; i++) {
		char p[PATH_MAX];
		const char *subs[] = {"", "/s1", "/s1/init", "/s1/cmds",
		                      "/s1/cmds/c0"};
		for (size_t j = 0; j < 5; j++) {
			snprintf(p, sizeof(p), "%s/../%s%s%s", M->h[i].path,
			         prefix, tag, subs[j]);
			assert_int_equal(mkdir(p, 0755), 0);
		}
	}
}

static void rm_stale(const char *prefix, const char *tag)
{
	for (int i = 0; i < M->nh; i++) {
		const char *subs[] = {"/s1/cmds/c0", "/s1/cmds", "/s1/init",
		                      "/s1", ""};
		for (size_t j = 0; j < 5; j++) {
			char p[PATH_MAX];
			snprintf(p, sizeof(p), "%s/../%s%s%s", M->h[i].path,
			         prefix, tag, subs[j]);
			rmdir(p);
		}
	}
}

static bool stale_exists(const char *prefix, const char *tag, int h)
{
	return existsf("%s/../%s%s", M->h[h].path, prefix, tag);
}

static void test_stale_managers_removed(void **state)
{
	(void)state;
	NEED_V1();
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "sbx-st%d-", (int)getpid());
	const char *tags[] = {"gone", "busy", "open", "locked"};
	for (size_t t = 0; t < 4; t++)
		make_stale(prefix, tags[t]);

	/* busy: a process inside (in one hierarchy is enough) */
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t inside = fork();
	assert_true(inside >= 0);
	if (inside == 0) {
		for (;;)
			pause();
	}
	char procs[PATH_MAX], val[24];
	snprintf(procs, sizeof(procs), "%s/../%sbusy/s1/cmds/c0/cgroup.procs",
	         hpath(CGROUP_CTRL_PIDS), prefix);
	snprintf(val, sizeof(val), "%d", (int)inside);
	int fd = open(procs, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, val, strlen(val)), (ssize_t)strlen(val));
	close(fd);

	/* open: a process (an older daemon) holds its dir in one hierarchy */
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/../%sopen", hpath(CGROUP_CTRL_MEMORY),
	         prefix);
	int held = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(held >= 0);

	/* locked: a live manager of that name elsewhere (another process:
	 * POSIX locks of one process never conflict) */
	pid_t owner = fork();
	assert_true(owner >= 0);
	if (owner == 0) {
		close(held); /* it holds no dir open, only the lock */
		char lk[PATH_MAX];
		snprintf(lk, sizeof(lk), "%s/%slocked.lock", CGROUP_LOCK_DIR,
		         prefix);
		int lfd = open(lk, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
		if (lfd < 0 || fcntl(lfd, F_SETLK, &fl) < 0 ||
		    write(p[1], "x", 1) != 1)
			_exit(111);
		for (;;)
			pause();
	}
	close(p[1]);
	char c;
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);

	struct sbx_err err = {0};
	int r = cgroup_manager_remove_stale(M, prefix, &err);
	if (r < 0)
		fail_msg("remove_stale: %s", err.msg);
	assert_int_equal(r, 1);
	for (int i = 0; i < M->nh; i++) {
		assert_false(stale_exists(prefix, "gone", i));
		assert_true(stale_exists(prefix, "busy", i));
		assert_true(stale_exists(prefix, "open", i));
		assert_true(stale_exists(prefix, "locked", i));
		assert_true(existsf("%s", M->h[i].path)); /* our own stays */
	}
	assert_int_equal(kill(inside, 0), 0);
	assert_false(existsf("%s/%sgone.lock", CGROUP_LOCK_DIR, prefix));

	/* once nobody holds "open" any more, it goes too */
	close(held);
	assert_int_equal(cgroup_manager_remove_stale(M, prefix, &err), 1);
	assert_false(stale_exists(prefix, "open", 0));

	kill(inside, SIGKILL);
	assert_killed(inside);
	kill(owner, SIGKILL);
	assert_killed(owner);
	for (size_t t = 0; t < 4; t++)
		rm_stale(prefix, tags[t]);
	char lk[PATH_MAX];
	snprintf(lk, sizeof(lk), "%s/%slocked.lock", CGROUP_LOCK_DIR, prefix);
	unlink(lk);
}

static void test_manager_remove_leaves_nothing(void **state)
{
	(void)state;
	NEED_V1();
	struct cgroup_sandbox *s = sandbox("last", 0, 0, 0);
	(void)s; /* left for remove to take, as at daemon shutdown */
	char paths[CGROUP_HIER_MAX][PATH_MAX];
	int nh = M->nh;
	for (int i = 0; i < nh; i++)
		snprintf(paths[i], PATH_MAX, "%s", M->h[i].path);
	struct sbx_err err = {0};
	if (cgroup_manager_remove(M, &err) < 0)
		fail_msg("cgroup_manager_remove: %s", err.msg);
	cgroup_manager_free(M);
	M = NULL;
	free(s->name); /* the struct outlived its cgroups; free by hand */
	free(s->state);
	free(s->free);
	free(s);
	for (int i = 0; i < nh; i++)
		assert_false(existsf("%s", paths[i]));
	snprintf(skip_reason, sizeof(skip_reason), "manager removed");
}

/* ---- setup
 * -------------------------------------------------------------------- */

static bool host_has_v1_memory(void)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return false;
	char line[1024];
	bool found = false;
	while (fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		for (char *t = strtok(c1 + 1, ","); t; t = strtok(NULL, ","))
			if (strcmp(t, "memory") == 0)
				found = true;
	}
	fclose(f);
	return found;
}

static int group_setup(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		snprintf(skip_reason, sizeof(skip_reason),
		         "needs root to create cgroups");
		return 0;
	}
	/* Checked before creating the manager: on a v2 host that would move
	 * this process into <own>/daemon. */
	if (!host_has_v1_memory()) {
		snprintf(skip_reason, sizeof(skip_reason),
		         "no cgroup v1 memory hierarchy on this host");
		return 0;
	}
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	snprintf(mgr_name, sizeof(mgr_name), "sbx-unit-%d", (int)getpid());
	struct sbx_err err = {0};
	if (cgroup_manager_new(NULL, mgr_name, &M, &err) < 0) {
		fprintf(stderr, "cgroup_manager_new: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	if (M) {
		struct sbx_err err = {0};
		if (cgroup_manager_remove(M, &err) < 0)
			fprintf(stderr, "cleanup: %s\n", err.msg);
		cgroup_manager_free(M);
		M = NULL;
	}
	reap_all();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_detects_v1),
	    cmocka_unit_test(test_limits_read_back),
	    cmocka_unit_test(test_daemonized_escaper_killed),
	    cmocka_unit_test(test_fork_bomb_contained_and_killed),
	    cmocka_unit_test(test_oom_kill_counted),
	    cmocka_unit_test(test_init_joins_and_stats),
	    cmocka_unit_test(test_destroy_removes_every_dir),
	    cmocka_unit_test(test_remove_of_an_empty_sandbox),
	    cmocka_unit_test(test_remove_falls_back_to_the_kill),
	    cmocka_unit_test(test_stale_sandbox_replaced),
	    cmocka_unit_test(test_made_ahead_becomes_the_next_sandbox),
	    cmocka_unit_test(test_made_ahead_over_a_stale_name),
	    cmocka_unit_test(test_manager_clean_after_dead_daemon),
	    cmocka_unit_test(test_init_outside_the_memory_limit),
	    cmocka_unit_test(test_signal_reaches_the_tree),
	    cmocka_unit_test(test_signal_never_hits_a_recycled_pid),
	    cmocka_unit_test(test_totals),
	    cmocka_unit_test(test_stale_managers_removed),
	    cmocka_unit_test(test_manager_remove_leaves_nothing),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
