/* cgroups: detection, layout, the pool of command leaves, and killing.
 *
 * Detection reads /proc/self/mountinfo and /proc/self/cgroup. The unified
 * hierarchy is used when the daemon's own cgroup there offers memory, pids
 * and cpu; otherwise the v1 memory, pids, cpu and freezer hierarchies (and
 * cpuacct when mounted, for CPU time) are used. A hybrid host whose cgroup2
 * mount carries only a few controllers (say hugetlb) thus runs on v1. The
 * daemon's own cgroup in a hierarchy is the /proc/self/cgroup path minus the
 * mount's root (a mount may show only a sub-tree), joined to the mountpoint.
 * Nothing is created or moved outside that cgroup.
 *
 * Every hierarchy's <own>/<manager name> is held as a directory fd and all
 * later work is relative to it, so a command leaf costs one openat() per
 * hierarchy to hand out, and nothing when it goes back to the pool.
 *
 * Killing: v2's cgroup.kill when the kernel has it; else freeze the cgroup
 * (a fork bomb cannot outrun a frozen cgroup), SIGKILL every pid listed,
 * thaw, and repeat until empty, giving up after KILL_TIMEOUT_NS. A listed
 * pid is only ever signalled through a pidfd that is proven to name the
 * process listed (procs_signal): a freeze can time out, and an OOM kill
 * thaws its victim, so "frozen" alone does not pin a pid. cgroupfs
 * directories are only ever removed with rmdir, children first.
 *
 * Ownership of a manager dir (cgroup_manager_remove_stale): its manager
 * holds a shared POSIX lock on <lock dir>/<name>.lock for life (not
 * inherited by the inits it forks), and every daemon, of any version,
 * keeps an fd on its manager dirs. A cleaner takes the lock exclusively
 * without waiting (so a live owner always wins, and an owner starting
 * meanwhile waits for the cleaner), then looks for any process holding the
 * dir open (an older daemon without locks), then for processes inside. */
#include "runtime/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/cleanup.h"
#include "runtime/cgroup_internal.h"

#define NSEC 1000000000LL
#define KILL_TIMEOUT_NS (2 * NSEC)
/* A task in uninterruptible sleep can hold a freeze back indefinitely; kill
 * what is frozen anyway and try again rather than wait it out. */
#define FREEZE_SLICE_NS (NSEC / 2)
#define EXIT_SLICE_NS (NSEC / 10)
#define RMDIR_BUSY_NS (NSEC / 5)
#define TREE_DEPTH_MAX 32

/* ---- small file helpers ------------------------------------------------ */

int cgroup_path(char *buf, size_t size, const char *rel, const char *file)
{
	int n;
	bool has_rel = rel && *rel, has_file = file && *file;

	if (has_rel && has_file)
		n = snprintf(buf, size, "%s/%s", rel, file);
	else
		n = snprintf(buf, size, "%s",
		             has_rel    ? rel
		             : has_file ? file
		                        : ".");
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	return 0;
}

int cgroup_file_write(int dfd, const char *path, const char *val)
{
	/* No O_CREAT: a missing knob must show up as ENOENT, not as a new
	 * file (and cgroupfs refuses to create files anyway). No O_TRUNC:
	 * cgroupfs ignores it, and the truncate path is a wasted setattr. */
	_cleanup_close_ int fd = openat(dfd, path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(val);
	ssize_t n = write(fd, val, len);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

ssize_t cgroup_file_read(int dfd, const char *path, char *buf, size_t size)
{
	_cleanup_close_ int fd = openat(dfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = 0;
	while (len + 1 < size) {
		ssize_t n = read(fd, buf + len, size - 1 - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return (ssize_t)len;
}

int cgroup_set(struct cgroup_manager *m, int h, const char *rel,
               const char *file, const char *val, bool optional,
               struct sbx_err *err)
{
	char p[PATH_MAX];
	int r = cgroup_path(p, sizeof(p), rel, file);
	if (r == 0)
		r = cgroup_file_write(m->h[h].dfd, p, val);
	if (r == -ENOENT && optional)
		return r;
	if (r < 0)
		return sbx_err_sys(err, -r, "cgroup: write \"%s\" to %s/%s",
		                   val, m->h[h].path, p);
	return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	while (*s == ' ' || *s == '\t')
		s++;
	if (strncmp(s, "max", 3) == 0) {
		*out = UINT64_MAX;
		return 0;
	}
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -errno;
	*out = v;
	return 0;
}

int cgroup_get_u64(struct cgroup_manager *m, int h, const char *rel,
                   const char *file, uint64_t *out)
{
	char p[PATH_MAX], buf[64];
	int r = cgroup_path(p, sizeof(p), rel, file);
	if (r < 0)
		return r;
	ssize_t n = cgroup_file_read(m->h[h].dfd, p, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	return parse_u64(buf, out);
}

int cgroup_get_key_u64(struct cgroup_manager *m, int h, const char *rel,
                       const char *file, const char *key, uint64_t *out)
{
	char p[PATH_MAX], buf[4096];
	int r = cgroup_path(p, sizeof(p), rel, file);
	if (r < 0)
		return r;
	ssize_t n = cgroup_file_read(m->h[h].dfd, p, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	size_t klen = strlen(key);
	for (char *line = buf; line && *line;) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ' ')
			return parse_u64(line + klen + 1, out);
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return -ENOENT;
}

int cgroup_hier_find(const struct cgroup_manager *m, unsigned ctrl)
{
	for (int i = 0; i < m->nh; i++)
		if (m->h[i].ctrls & ctrl)
			return i;
	return -1;
}

int64_t cgroup_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NSEC + ts.tv_nsec;
}

void cgroup_backoff(unsigned *us)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)*us * 1000};
	nanosleep(&ts, NULL);
	if (*us < 5000)
		*us *= 2;
}

static int64_t min_i64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* ---- directories ------------------------------------------------------- */

int cgroup_mkdir(struct cgroup_manager *m, int dfd, const char *path)
{
	if (mkdirat(dfd, path, 0755) < 0)
		return -errno;
	if (m->fake_mkdir)
		m->fake_mkdir(dfd, path);
	return 0;
}

int cgroup_rmdir(struct cgroup_manager *m, int dfd, const char *path)
{
	if (m->fake_rmdir)
		m->fake_rmdir(dfd, path);
	/* The last task's exit and the cgroup turning unpopulated are not one
	 * atomic step: rmdir can see EBUSY for a moment after cgroup.procs
	 * went empty. */
	int64_t until = cgroup_now_ns() + RMDIR_BUSY_NS;
	unsigned us = 100;
	for (;;) {
		if (unlinkat(dfd, path, AT_REMOVEDIR) == 0)
			return 0;
		int e = errno;
		if (e != EBUSY || cgroup_now_ns() >= until)
			return -e;
		cgroup_backoff(&us);
	}
}

static bool dirent_is_dir(int dfd, const struct dirent *de)
{
	if (de->d_name[0] == '.' &&
	    (de->d_name[1] == '\0' ||
	     (de->d_name[1] == '.' && de->d_name[2] == '\0')))
		return false;
	if (de->d_type != DT_UNKNOWN)
		return de->d_type == DT_DIR;
	struct stat st;
	return fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISDIR(st.st_mode);
}

/* Calls fn(dirfd, arg) on dfd/path and every cgroup below it, parents
 * first, summing fn's non-negative results. A missing path counts as an
 * empty tree: a cgroup may be absent from one hierarchy (cpuacct has no
 * command leaves) or gone already. */
static int tree_walk(int dfd, const char *path, int depth,
                     int (*fn)(int dirfd, void *arg), void *arg)
{
	int fd = openat(dfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	int total = fn(fd, arg);
	if (total < 0 || depth >= TREE_DEPTH_MAX) {
		close(fd);
		return total;
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!dirent_is_dir(dirfd(d), de))
			continue;
		int r = tree_walk(dirfd(d), de->d_name, depth + 1, fn, arg);
		if (r < 0) {
			total = r;
			break;
		}
		total += r;
	}
	closedir(d);
	return total;
}

int cgroup_tree_walk(int dfd, const char *path, int (*fn)(int dirfd, void *arg),
                     void *arg)
{
	return tree_walk(dfd, *path ? path : ".", 0, fn, arg);
}

/* Removes dfd/path's child cgroups depth-first, then path itself unless
 * keep_top. Keeps going past failures so that as much as possible goes;
 * returns the first error. */
static int tree_rmdir(struct cgroup_manager *m, int dfd, const char *path,
                      int depth, bool keep_top)
{
	int fd = openat(dfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	int ret = 0;
	struct dirent *de;
	while (depth < TREE_DEPTH_MAX && (de = readdir(d))) {
		if (!dirent_is_dir(dirfd(d), de))
			continue;
		int r = tree_rmdir(m, dirfd(d), de->d_name, depth + 1, false);
		if (r < 0 && ret == 0)
			ret = r;
	}
	closedir(d);
	if (!keep_top) {
		int r = cgroup_rmdir(m, dfd, path);
		if (r < 0 && r != -ENOENT && ret == 0)
			ret = r;
	}
	return ret;
}

/* ---- pids ---------------------------------------------------------------- */

/* Streams dirfd's cgroup.procs (its length is up to the sandbox, so no
 * buffer sized for it), calling fn on each pid. Returns the count. */
int cgroup_procs_foreach(int dirfd, void (*fn)(pid_t pid, void *arg), void *arg)
{
	_cleanup_close_ int fd =
	    openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	char buf[4096];
	long long cur = -1; /* -1: not inside a number */
	int count = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* n == 0 runs the loop once more with a separator, to close a
		 * number the file ends on. */
		for (ssize_t i = 0; i < (n ? n : 1); i++) {
			char c = n ? buf[i] : '\n';
			if (c >= '0' && c <= '9') {
				if (cur < 0)
					cur = 0;
				if (cur <= INT_MAX) /* saturates past it */
					cur = cur * 10 + (c - '0');
				continue;
			}
			if (cur > 0 && cur <= INT_MAX) {
				count++;
				if (fn)
					fn((pid_t)cur, arg);
			}
			cur = -1;
		}
		if (n == 0)
			return count;
	}
}

struct pids_walk {
	void (*fn)(pid_t pid, void *arg);
	void *arg;
};

static int pids_walk_dir(int dirfd, void *arg)
{
	struct pids_walk *w = arg;
	return cgroup_procs_foreach(dirfd, w->fn, w->arg);
}

/* Pids in rel and below, over all hierarchies. */
static int tree_pids(struct cgroup_manager *m, const char *rel,
                     void (*fn)(pid_t pid, void *arg), void *arg)
{
	struct pids_walk w = {fn, arg};
	int total = 0;
	for (int i = 0; i < m->nh; i++) {
		int r = tree_walk(m->h[i].dfd, *rel ? rel : ".", 0,
		                  pids_walk_dir, &w);
		if (r < 0)
			return r;
		total += r;
	}
	return total;
}

/* ---- signalling ------------------------------------------------------- */

/* A pid read from cgroup.procs may be reaped and handed to a new process
 * (anywhere on the host) before it is signalled. So: open a pidfd for it
 * (T1), read cgroup.procs again (T2), signal through the pidfd (T3). If
 * the signal finds the process not yet reaped at T3, it held that pid
 * number all through T1..T3, so the pid listed at T2 was this process: it
 * was in the cgroup, and nothing in a sandbox can move itself out (no
 * cgroupfs, a cgroup namespace, no host privilege). A pid no longer listed
 * at T2 is left alone. pidfds are opened in batches: the daemon's fd limit
 * is not the sandbox's pids limit. */
#define SIGNAL_BATCH 64

struct pid_vec {
	pid_t *v;
	size_t n, cap;
	int err;
};

static void pid_collect(pid_t pid, void *arg)
{
	struct pid_vec *p = arg;
	if (p->err)
		return;
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 64;
		pid_t *v = realloc(p->v, cap * sizeof(*v));
		if (!v) {
			p->err = -ENOMEM;
			return;
		}
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = pid;
}

struct pid_fd {
	pid_t pid;
	int fd;
	bool listed;
};

static int pid_fd_cmp(const void *a, const void *b)
{
	pid_t x = ((const struct pid_fd *)a)->pid;
	pid_t y = ((const struct pid_fd *)b)->pid;
	return (x > y) - (x < y);
}

struct pid_batch {
	struct pid_fd *b;
	size_t n;
};

static void batch_mark(pid_t pid, void *arg)
{
	struct pid_batch *bt = arg;
	struct pid_fd key = {.pid = pid};
	struct pid_fd *hit =
	    bsearch(&key, bt->b, bt->n, sizeof(*bt->b), pid_fd_cmp);
	if (hit)
		hit->listed = true;
}

/* Sends signo to every process in dirfd's cgroup.procs but skip. Returns
 * how many were listed, or -errno. */
static int procs_signal(struct cgroup_manager *m, int dirfd, int signo,
                        pid_t skip)
{
	struct pid_vec pv = {0};
	int ret = cgroup_procs_foreach(dirfd, pid_collect, &pv);
	if (ret >= 0 && pv.err)
		ret = pv.err;
	if (ret > 0 && m->test_listed)
		m->test_listed(m->test_arg);
	struct pid_fd b[SIGNAL_BATCH];
	for (size_t i = 0; ret > 0 && i < pv.n;) {
		size_t n = 0;
		while (i < pv.n && n < SIGNAL_BATCH) {
			pid_t pid = pv.v[i];
			int fd = -1;
			if (pid != skip)
				fd = (int)syscall(SYS_pidfd_open, pid, 0);
			if (fd < 0 && (errno == EMFILE || errno == ENFILE) &&
			    pid != skip) {
				if (n == 0)
					ret = -errno;
				break; /* the rest after this batch's fds */
			}
			i++;
			if (fd >= 0) /* else gone already (ESRCH) */
				b[n++] = (struct pid_fd){pid, fd, false};
		}
		qsort(b, n, sizeof(b[0]), pid_fd_cmp);
		struct pid_batch bt = {b, n};
		int r = n ? cgroup_procs_foreach(dirfd, batch_mark, &bt) : 0;
		for (size_t k = 0; k < n; k++) {
			if (r >= 0 && b[k].listed)
				syscall(SYS_pidfd_send_signal, b[k].fd, signo,
				        NULL, 0);
			close(b[k].fd);
		}
		if (r < 0)
			ret = r;
	}
	free(pv.v);
	return ret;
}

struct kill_walk {
	struct cgroup_manager *m;
	pid_t self;
};

static int kill_walk_dir(int dirfd, void *arg)
{
	struct kill_walk *k = arg;
	/* Defence against a broken layout: the daemon never kills itself. */
	int r = procs_signal(k->m, dirfd, SIGKILL, k->self);
	return r < 0 ? 0 : r; /* the loop around tries again */
}

static void tree_sigkill(struct cgroup_manager *m, const char *rel)
{
	struct kill_walk k = {m, getpid()};
	for (int i = 0; i < m->nh; i++)
		tree_walk(m->h[i].dfd, *rel ? rel : ".", 0, kill_walk_dir, &k);
}

static int wait_empty(struct cgroup_manager *m, const char *rel, int64_t until)
{
	unsigned us = 50;
	for (;;) {
		int n = tree_pids(m, rel, NULL, NULL);
		if (n <= 0 || cgroup_now_ns() >= until)
			return n;
		cgroup_backoff(&us);
	}
}

static int freeze(struct cgroup_manager *m, const char *rel, bool frozen,
                  int64_t deadline)
{
	return m->version == 2 ? cgroup_v2_freeze(m, rel, frozen, deadline)
	                       : cgroup_v1_freeze(m, rel, frozen, deadline);
}

static int tree_kill(struct cgroup_manager *m, const char *rel,
                     struct sbx_err *err)
{
	int64_t deadline = cgroup_now_ns() + KILL_TIMEOUT_NS;
	bool use_kill = m->version == 2 && m->has_kill;

	int n = tree_pids(m, rel, NULL, NULL);
	while (n > 0) {
		int r = use_kill ? cgroup_v2_kill(m, rel) : -ENOTSUP;
		if (r == -ENOENT)
			return 0; /* the cgroup itself is gone */
		if (r < 0) {
			/* cgroup.kill refuses threaded cgroups; the freezer
			 * works everywhere. */
			use_kill = false;
			freeze(m, rel, true,
			       min_i64(deadline,
			               cgroup_now_ns() + FREEZE_SLICE_NS));
			tree_sigkill(m, rel);
			freeze(m, rel, false, 0);
		}
		n = wait_empty(
		    m, rel, min_i64(deadline, cgroup_now_ns() + EXIT_SLICE_NS));
		if (n > 0 && cgroup_now_ns() >= deadline)
			return sbx_err_set(err, EBUSY,
			                   "cgroup: processes in %s/%s "
			                   "survived SIGKILL for %lld ms",
			                   m->h[m->primary].path, rel,
			                   KILL_TIMEOUT_NS / 1000000);
	}
	if (n < 0)
		return sbx_err_sys(err, -n, "cgroup: list processes in %s/%s",
		                   m->h[m->primary].path, rel);
	return 0;
}

/* One round of tree_kill that never waits: the caller retries from its
 * own timer while processes remain (how many it returns), so that a
 * command's kill never holds the daemon's loop. A freeze that has not
 * taken yet does not stop the round: what is listed is killed anyway (by
 * pidfd, so never a recycled pid) and the next round takes what forked
 * meanwhile. */
static int tree_kill_step(struct cgroup_manager *m, const char *rel)
{
	if (m->version == 2 && m->has_kill) {
		int r = cgroup_v2_kill(m, rel);
		if (r == -ENOENT)
			return 0;
		if (r == 0)
			return tree_pids(m, rel, NULL, NULL);
	}
	if (tree_pids(m, rel, NULL, NULL) <= 0)
		return 0;
	freeze(m, rel, true, cgroup_now_ns());
	tree_sigkill(m, rel);
	freeze(m, rel, false, 0);
	return tree_pids(m, rel, NULL, NULL);
}

/* Kill everything in rel, then rmdir its tree in every hierarchy. */
static int tree_destroy(struct cgroup_manager *m, const char *rel,
                        bool keep_top, struct sbx_err *err)
{
	int ret = tree_kill(m, rel, err);
	for (int i = 0; i < m->nh; i++) {
		int r = tree_rmdir(m, m->h[i].dfd, *rel ? rel : ".", 0,
		                   keep_top || !*rel);
		if (r < 0 && ret == 0)
			ret = sbx_err_sys(err, -r, "cgroup: remove %s/%s",
			                  m->h[i].path, rel);
	}
	return ret;
}

/* ---- detection ------------------------------------------------------------
 */

struct cg_mount {
	char *root, *mp;
	unsigned ctrls; /* v1 only */
	bool v2;
};

struct cg_self {
	char *path;
	unsigned ctrls; /* v1 only */
	bool v2;
};

struct cg_detect {
	struct cg_mount *mnt;
	size_t nmnt, capmnt;
	struct cg_self *self;
	size_t nself, capself;
};

static void detect_free(struct cg_detect *d)
{
	for (size_t i = 0; i < d->nmnt; i++) {
		free(d->mnt[i].root);
		free(d->mnt[i].mp);
	}
	for (size_t i = 0; i < d->nself; i++)
		free(d->self[i].path);
	free(d->mnt);
	free(d->self);
}

static unsigned ctrl_bit(const char *name, size_t len)
{
	static const struct {
		const char *name;
		unsigned bit;
	} names[] = {
	    {"cpu", CGROUP_CTRL_CPU},         {"cpuacct", CGROUP_CTRL_CPUACCT},
	    {"memory", CGROUP_CTRL_MEMORY},   {"pids", CGROUP_CTRL_PIDS},
	    {"freezer", CGROUP_CTRL_FREEZER}, {"devices", CGROUP_CTRL_DEVICES},
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i].name) == len &&
		    memcmp(names[i].name, name, len) == 0)
			return names[i].bit;
	return 0;
}

/* Bits for the names in a list such as "rw,cpu,cpuacct" or "cpu cpuacct". */
static unsigned ctrl_mask(const char *list, const char *seps)
{
	unsigned mask = 0;
	while (*list) {
		size_t len = strcspn(list, seps);
		mask |= ctrl_bit(list, len);
		list += len;
		if (*list)
			list++;
	}
	return mask;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r;) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' &&
		    r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 +
			              (r[3] - '0'));
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
}

static int grow(void **arr, size_t n, size_t *cap, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 8;
	void *p = realloc(*arr, ncap * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

static int read_mountinfo(const char *path, struct cg_detect *d,
                          struct sbx_err *err)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return sbx_err_sys(err, errno, "cgroup: open %s", path);
	char *line = NULL;
	size_t cap = 0;
	int ret = 0;
	while (getline(&line, &cap, f) > 0) {
		line[strcspn(line, "\n")] = '\0';
		/* id parent maj:min root mountpoint opts [optional...] -
		 * fstype source superopts */
		char *fld[6], *s = line;
		int nf = 0;
		while (nf < 6 && s)
			fld[nf++] = strsep(&s, " ");
		if (nf < 6 || !s)
			continue;
		char *tok;
		while ((tok = strsep(&s, " ")) && strcmp(tok, "-") != 0)
			;
		char *fstype = s ? strsep(&s, " ") : NULL;
		char *source = s ? strsep(&s, " ") : NULL;
		char *super = s ? strsep(&s, " ") : NULL;
		if (!fstype || !source || !super)
			continue;
		bool v2 = strcmp(fstype, "cgroup2") == 0;
		if (!v2 && strcmp(fstype, "cgroup") != 0)
			continue;
		if ((ret = grow((void **)&d->mnt, d->nmnt, &d->capmnt,
		                sizeof(*d->mnt))))
			break;
		unescape(fld[3]);
		unescape(fld[4]);
		struct cg_mount *mt = &d->mnt[d->nmnt];
		mt->root = strdup(fld[3]);
		mt->mp = strdup(fld[4]);
		mt->v2 = v2;
		mt->ctrls = v2 ? 0 : ctrl_mask(super, ",");
		d->nmnt++;
		if (!mt->root || !mt->mp) {
			ret = -ENOMEM;
			break;
		}
	}
	free(line);
	fclose(f);
	if (ret < 0)
		return sbx_err_sys(err, -ret, "cgroup: read %s", path);
	return 0;
}

static int read_self_cgroup(const char *path, struct cg_detect *d,
                            struct sbx_err *err)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return sbx_err_sys(err, errno, "cgroup: open %s", path);
	char *line = NULL;
	size_t cap = 0;
	int ret = 0;
	while (getline(&line, &cap, f) > 0) {
		line[strcspn(line, "\n")] = '\0';
		/* id:controllers:path -- the path itself may hold ':' */
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2 || c2[1] != '/')
			continue;
		*c1 = *c2 = '\0';
		if ((ret = grow((void **)&d->self, d->nself, &d->capself,
		                sizeof(*d->self))))
			break;
		struct cg_self *sc = &d->self[d->nself];
		sc->v2 = strcmp(line, "0") == 0 && c1[1] == '\0';
		sc->ctrls = ctrl_mask(c1 + 1, ",");
		sc->path = strdup(c2 + 1);
		d->nself++;
		if (!sc->path) {
			ret = -ENOMEM;
			break;
		}
	}
	free(line);
	fclose(f);
	if (ret < 0)
		return sbx_err_sys(err, -ret, "cgroup: read %s", path);
	return 0;
}

/* mountpoint + (path minus the mount's root), or NULL when the mount shows a
 * sub-tree that does not contain path. */
static char *own_dir(const struct cg_mount *mt, const char *path)
{
	const char *rel = path;
	if (strcmp(mt->root, "/") != 0) {
		size_t n = strlen(mt->root);
		if (strncmp(path, mt->root, n) != 0 ||
		    (path[n] != '\0' && path[n] != '/'))
			return NULL;
		rel = path + n;
	}
	if (strcmp(rel, "/") == 0)
		rel = "";
	char *dir;
	if (asprintf(&dir, "%s%s", mt->mp, rel) < 0)
		return NULL;
	return dir;
}

static bool word_in(const char *list, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = list; *p;) {
		size_t len = strcspn(p, " \n");
		if (len == wl && memcmp(p, word, wl) == 0)
			return true;
		p += len;
		if (*p)
			p++;
	}
	return false;
}

/* The unified hierarchy's own dir, if it offers what sandboxes need, into
 * *out (allocated): 0, or -ENOTSUP with err saying why not. */
static int detect_v2(const struct cg_detect *d, char **out, struct sbx_err *err)
{
	int rc =
	    sbx_err_set(err, ENOTSUP, "no cgroup2 mount shows this process");
	*out = NULL;
	for (size_t s = 0; s < d->nself; s++) {
		if (!d->self[s].v2)
			continue;
		for (size_t i = 0; i < d->nmnt; i++) {
			if (!d->mnt[i].v2)
				continue;
			char *dir = own_dir(&d->mnt[i], d->self[s].path);
			if (!dir)
				continue;
			char p[PATH_MAX], ctl[512];
			snprintf(p, sizeof(p), "%s/cgroup.controllers", dir);
			ssize_t n =
			    cgroup_file_read(AT_FDCWD, p, ctl, sizeof(ctl));
			if (n >= 0 && word_in(ctl, "memory") &&
			    word_in(ctl, "pids") && word_in(ctl, "cpu")) {
				sbx_err_clear(err);
				*out = dir;
				return 0;
			}
			ctl[strcspn(ctl, "\n")] = '\0';
			rc = sbx_err_set(err, ENOTSUP,
			                 "cgroup2 %s offers \"%s\"", dir,
			                 n >= 0 ? ctl : "nothing");
			free(dir);
		}
	}
	return rc;
}

struct own_hier {
	char *dir;
	unsigned ctrls;
};

/* The v1 hierarchies, freezer's first (it is the one kill works through);
 * devices where there is one. */
static int detect_v1(const struct cg_detect *d, struct own_hier *out, int *nout)
{
	static const unsigned order[] = {
	    CGROUP_CTRL_FREEZER, CGROUP_CTRL_MEMORY,  CGROUP_CTRL_PIDS,
	    CGROUP_CTRL_CPU,     CGROUP_CTRL_CPUACCT, CGROUP_CTRL_DEVICES,
	};
	unsigned covered = 0;
	int n = 0;
	for (size_t o = 0; o < sizeof(order) / sizeof(order[0]); o++) {
		unsigned c = order[o];
		if (covered & c)
			continue;
		const struct cg_self *sc = NULL;
		for (size_t s = 0; s < d->nself && !sc; s++)
			if (!d->self[s].v2 && (d->self[s].ctrls & c))
				sc = &d->self[s];
		if (!sc)
			continue;
		/* The same hierarchy may be mounted more than once; take the
		 * first mount that shows our cgroup. */
		for (size_t i = 0; i < d->nmnt; i++) {
			const struct cg_mount *mt = &d->mnt[i];
			if (mt->v2 || !(mt->ctrls & c))
				continue;
			char *dir = own_dir(mt, sc->path);
			if (!dir)
				continue;
			if (access(dir, F_OK) != 0) {
				free(dir);
				continue;
			}
			out[n].dir = dir;
			out[n].ctrls = mt->ctrls;
			covered |= mt->ctrls;
			n++;
			break;
		}
	}
	*nout = n;
	return (int)covered;
}

/* ---- manager ------------------------------------------------------------- */

static bool name_valid(const char *name)
{
	size_t len = strlen(name);
	if (len == 0 || len > CGROUP_NAME_MAX || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0)
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' ||
		      *p == '-'))
			return false;
	return true;
}

void cgroup_manager_free(struct cgroup_manager *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->nh; i++) {
		if (m->h[i].dfd >= 0)
			close(m->h[i].dfd);
		free(m->h[i].path);
	}
	if (m->lock_fd >= 0)
		close(m->lock_fd);
	free(m->lock_dir);
	free(m->name);
	free(m);
}

int cgroup_manager_version(const struct cgroup_manager *m)
{
	return m->version;
}

/* ---- ownership locks ----------------------------------------------------- */

static int mkdirs_private(const char *dir)
{
	char p[PATH_MAX];
	int n = snprintf(p, sizeof(p), "%s", dir);
	if (n <= 0 || (size_t)n >= sizeof(p))
		return -ENAMETOOLONG;
	for (char *c = p + 1;; c++) {
		if (*c != '/' && *c != '\0')
			continue;
		char was = *c;
		*c = '\0';
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return -errno;
		*c = was;
		if (!was)
			return 0;
	}
}

/* A POSIX lock on <dir>/<name>.lock; returns its fd. F_RDLCK: an owner's,
 * waiting out a cleaner. F_WRLCK: a cleaner's, never waiting (-EAGAIN
 * when anyone holds it). POSIX locks belong to the process: the sandbox
 * inits forked later do not inherit them. A cleaner unlinks the file while
 * it holds it; whoever then gets the lock on the unlinked file goes again
 * on the new one. */
static int lock_take(const char *dir, const char *name, short type)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s/%s.lock", dir, name);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	for (int tries = 0; tries < 100; tries++) {
		int fd =
		    open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		struct flock fl = {.l_type = type, .l_whence = SEEK_SET};
		int r;
		while ((r = fcntl(fd, type == F_RDLCK ? F_SETLKW : F_SETLK,
		                  &fl)) < 0 &&
		       errno == EINTR)
			;
		if (r < 0) {
			int e = errno;
			close(fd);
			return e == EACCES ? -EAGAIN : -e;
		}
		struct stat a, b;
		if (fstat(fd, &a) == 0 && stat(path, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			return fd;
		close(fd);
	}
	return -EAGAIN;
}

static void lock_unlink(const char *dir, const char *name)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s/%s.lock", dir, name);
	if (n > 0 && (size_t)n < sizeof(path))
		unlink(path);
}

/* mkdir <own>/<name> and hold it as h's dfd. */
static int hier_open(struct cgroup_manager *m, struct cgroup_hier *h,
                     int own_fd, const char *own, struct sbx_err *err)
{
	if (asprintf(&h->path, "%s/%s", own, m->name) < 0) {
		h->path = NULL;
		return sbx_err_sys(err, ENOMEM, "cgroup");
	}
	int r = cgroup_mkdir(m, own_fd, m->name);
	if (r < 0 && r != -EEXIST)
		return sbx_err_sys(err, -r, "cgroup: mkdir %s", h->path);
	h->dfd = openat(own_fd, m->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (h->dfd < 0)
		return sbx_err_sys(err, errno, "cgroup: open %s", h->path);
	return 0;
}

static int manager_setup(struct cgroup_manager *m, struct own_hier *own,
                         int nown, pid_t pid, struct sbx_err *err)
{
	for (int i = 0; i < nown; i++) {
		struct cgroup_hier *h = &m->h[m->nh++];
		h->dfd = -1;
		h->ctrls = own[i].ctrls;
		h->leaves =
		    m->version == 2 ||
		    (own[i].ctrls & (CGROUP_CTRL_MEMORY | CGROUP_CTRL_PIDS |
		                     CGROUP_CTRL_CPU | CGROUP_CTRL_FREEZER));
		h->flat = m->version == 1 && own[i].ctrls == CGROUP_CTRL_MEMORY;
		/* devices is a backstop, not a need: a hierarchy the daemon
		 * cannot write to (read-only in a container) is left out */
		bool optional = own[i].ctrls == CGROUP_CTRL_DEVICES;
		_cleanup_close_ int own_fd =
		    open(own[i].dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int r = own_fd < 0 ? sbx_err_sys(err, errno, "cgroup: open %s",
		                                 own[i].dir)
		                   : 0;
		if (r == 0 && m->version == 2)
			r = cgroup_v2_prepare_own(m, own_fd, own[i].dir, pid,
			                          err);
		if (r == 0)
			r = hier_open(m, h, own_fd, own[i].dir, err);
		if (r < 0 && optional) {
			if (h->dfd >= 0)
				close(h->dfd);
			free(h->path);
			h->path = NULL;
			m->nh--;
			continue;
		}
		if (r < 0)
			return r;
	}
	if (m->version == 2) {
		m->has_kill =
		    faccessat(m->h[0].dfd, "cgroup.kill", F_OK, 0) == 0;
		return cgroup_v2_enable_subtree(m, "", err);
	}
	return 0;
}

int cgroup_manager_new(const struct cgroup_env *env, const char *name,
                       struct cgroup_manager **out, struct sbx_err *err)
{
	static const struct cgroup_env defaults = {0};
	if (!env)
		env = &defaults;
	*out = NULL;
	/* "daemon" is where the daemon itself lives on v2. */
	if (!name_valid(name) || strcmp(name, "daemon") == 0)
		return sbx_err_set(err, EINVAL,
		                   "cgroup: invalid manager name \"%s\"", name);
	const char *mi =
	    env->mountinfo_path ? env->mountinfo_path : "/proc/self/mountinfo";
	const char *sc =
	    env->self_cgroup_path ? env->self_cgroup_path : "/proc/self/cgroup";
	pid_t pid = env->self_pid > 0 ? env->self_pid : getpid();

	struct cg_detect d = {0};
	struct own_hier own[CGROUP_HIER_MAX] = {0};
	int nown = 0, version = 0, r;
	struct sbx_err why = {0};

	if ((r = read_mountinfo(mi, &d, err)) < 0 ||
	    (r = read_self_cgroup(sc, &d, err)) < 0)
		goto out;
	if (detect_v2(&d, &own[0].dir, &why) == 0) {
		own[0].ctrls = CGROUP_CTRL_MEMORY | CGROUP_CTRL_PIDS |
		               CGROUP_CTRL_CPU | CGROUP_CTRL_FREEZER |
		               CGROUP_CTRL_CPUACCT;
		nown = 1;
		version = 2;
	} else {
		unsigned need = CGROUP_CTRL_MEMORY | CGROUP_CTRL_PIDS |
		                CGROUP_CTRL_CPU | CGROUP_CTRL_FREEZER;
		unsigned got = (unsigned)detect_v1(&d, own, &nown);
		if ((got & need) != need) {
			r = sbx_err_set(
			    err, ENOTSUP,
			    "cgroup: no usable hierarchy: %s; v1 lacks%s%s%s%s",
			    why.msg, got & CGROUP_CTRL_MEMORY ? "" : " memory",
			    got & CGROUP_CTRL_PIDS ? "" : " pids",
			    got & CGROUP_CTRL_CPU ? "" : " cpu",
			    got & CGROUP_CTRL_FREEZER ? "" : " freezer");
			goto out;
		}
		version = 1;
	}

	struct cgroup_manager *m = calloc(1, sizeof(*m));
	if (!m || !(m->name = strdup(name))) {
		free(m);
		r = sbx_err_sys(err, ENOMEM, "cgroup");
		goto out;
	}
	m->version = version;
	m->primary = 0; /* v2's only hierarchy; v1's freezer comes first */
	m->fake_mkdir = env->fake_mkdir;
	m->fake_rmdir = env->fake_rmdir;
	m->lock_fd = -1;
	if (!(m->lock_dir =
	          strdup(env->lock_dir ? env->lock_dir : CGROUP_LOCK_DIR))) {
		cgroup_manager_free(m);
		r = sbx_err_sys(err, ENOMEM, "cgroup");
		goto out;
	}
	/* Taken before the dirs are made, so that a cleaner never removes
	 * them under us. Without a lock dir (a read-only /run) the manager
	 * works, and stale dirs of others are left alone. */
	if (mkdirs_private(m->lock_dir) == 0)
		m->lock_fd = lock_take(m->lock_dir, m->name, F_RDLCK);
	if ((r = manager_setup(m, own, nown, pid, err)) < 0) {
		cgroup_manager_free(m);
		goto out;
	}
	*out = m;
out:
	for (int i = 0; i < nown; i++)
		free(own[i].dir);
	detect_free(&d);
	return r < 0 ? r : 0;
}

int cgroup_manager_clean(struct cgroup_manager *m, struct sbx_err *err)
{
	m->ahead = false;
	return tree_destroy(m, "", true, err);
}

int cgroup_manager_remove(struct cgroup_manager *m, struct sbx_err *err)
{
	int ret = cgroup_manager_clean(m, err);
	for (int i = 0; i < m->nh; i++) {
		int r = cgroup_rmdir(m, AT_FDCWD, m->h[i].path);
		if (r < 0 && r != -ENOENT && ret == 0)
			ret = sbx_err_sys(err, -r, "cgroup: remove %s",
			                  m->h[i].path);
	}
	/* The lock file goes too, unless another manager of the same name
	 * shares it (upgrading fails then). */
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	if (ret == 0 && m->lock_fd >= 0 && fcntl(m->lock_fd, F_SETLK, &fl) == 0)
		lock_unlink(m->lock_dir, m->name);
	return ret;
}

/* ---- stale managers ---------------------------------------------------- */

struct stale {
	char *name;
	int lock_fd; /* held exclusively: no manager of this name lives */
	bool held;   /* some process holds one of its dirs open */
};

struct stale_key {
	dev_t dev;
	size_t idx;
};

/* Is name a whole component of path? */
static bool path_has_component(const char *path, const char *name)
{
	size_t len = strlen(name);
	for (const char *p = path; (p = strstr(p, name)); p++)
		if (p > path && p[-1] == '/' && (p[len] == '/' || !p[len]))
			return true;
	return false;
}

/* Marks each unheld candidate that some process holds an fd on, in any
 * hierarchy: every sandboxd keeps its manager dirs open for life, those of
 * versions before the lock files too. The fd's link must name the dir and
 * the fd must be on one of the cgroup hierarchies' filesystems (devs), in
 * whichever cgroup of it: a daemon in another memory cgroup than ours
 * holds its dirs where we do not look; nothing else is stat()ed (a file on
 * a hung network mount would block). Returns -errno when some process
 * could not be looked at: then nobody can be said not to hold. */
static int scan_holders(struct stale *c, const struct stale_key *k, size_t nk,
                        const dev_t *devs, int ndevs)
{
	DIR *proc = opendir("/proc");
	if (!proc)
		return -errno;
	int ret = 0;
	struct dirent *de;
	while (ret == 0 && (de = readdir(proc))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char p[sizeof(de->d_name) + 4];
		snprintf(p, sizeof(p), "%s/fd", de->d_name);
		int fdd =
		    openat(dirfd(proc), p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fdd < 0) {
			if (errno != ENOENT && errno != ESRCH)
				ret = -errno; /* EACCES: cannot tell */
			continue;
		}
		DIR *fds = fdopendir(fdd);
		if (!fds) {
			close(fdd);
			continue;
		}
		struct dirent *fe;
		while ((fe = readdir(fds))) {
			char link[PATH_MAX];
			ssize_t n = readlinkat(dirfd(fds), fe->d_name, link,
			                       sizeof(link) - 1);
			if (n <= 0)
				continue;
			link[n] = '\0';
			struct stat st;
			bool stated = false;
			for (size_t i = 0; i < nk; i++) {
				struct stale *s = &c[k[i].idx];
				if (s->held ||
				    !path_has_component(link, s->name))
					continue;
				if (!stated &&
				    fstatat(dirfd(fds), fe->d_name, &st, 0) < 0)
					break;
				stated = true;
				for (int d = 0; d < ndevs; d++)
					if (st.st_dev == devs[d])
						s->held = true;
			}
		}
		closedir(fds);
	}
	closedir(proc);
	return ret;
}

static int stale_find(struct stale **out, size_t *nout, size_t *cap,
                      const char *name)
{
	for (size_t i = 0; i < *nout; i++)
		if (strcmp((*out)[i].name, name) == 0)
			return 0;
	if (grow((void **)out, *nout, cap, sizeof(**out)) < 0)
		return -ENOMEM;
	struct stale *s = &(*out)[*nout];
	if (!(s->name = strdup(name)))
		return -ENOMEM;
	s->lock_fd = -1;
	s->held = false;
	(*nout)++;
	return 0;
}

int cgroup_manager_remove_stale(struct cgroup_manager *m, const char *prefix,
                                struct sbx_err *err)
{
	int own[CGROUP_HIER_MAX], ret = 0, removed = 0;
	struct stale *c = NULL;
	struct stale_key *k = NULL;
	size_t nc = 0, capc = 0, nk = 0, plen = strlen(prefix);

	if (m->lock_fd < 0)
		return sbx_err_set(err, ENOLCK,
		                   "cgroup: no ownership lock in %s: stale "
		                   "cgroups beside %s are left",
		                   m->lock_dir, m->h[0].path);
	for (int i = 0; i < m->nh; i++)
		own[i] = -1;
	for (int i = 0; i < m->nh && ret == 0; i++) {
		own[i] = openat(m->h[i].dfd, "..",
		                O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int dfd = own[i] < 0 ? -1 : fcntl(own[i], F_DUPFD_CLOEXEC, 0);
		DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
		if (!d) {
			ret = sbx_err_sys(err, errno, "cgroup: open %s/..",
			                  m->h[i].path);
			if (dfd >= 0)
				close(dfd);
			break;
		}
		struct dirent *de;
		while (ret == 0 && (de = readdir(d)))
			if (strncmp(de->d_name, prefix, plen) == 0 &&
			    name_valid(de->d_name) &&
			    strcmp(de->d_name, m->name) != 0 &&
			    dirent_is_dir(dirfd(d), de) &&
			    stale_find(&c, &nc, &capc, de->d_name) < 0)
				ret = sbx_err_sys(err, ENOMEM, "cgroup");
		closedir(d);
	}
	if (ret < 0)
		goto out;
	if (nc > 0 && !(k = calloc(nc * (size_t)m->nh, sizeof(*k)))) {
		ret = sbx_err_sys(err, ENOMEM, "cgroup");
		goto out;
	}
	for (size_t j = 0; j < nc; j++) {
		c[j].lock_fd = lock_take(m->lock_dir, c[j].name, F_WRLCK);
		if (c[j].lock_fd < 0)
			continue; /* a live manager's (or no lock to be had) */
		for (int i = 0; i < m->nh; i++) {
			struct stat st;
			if (fstatat(own[i], c[j].name, &st,
			            AT_SYMLINK_NOFOLLOW) == 0)
				k[nk++] = (struct stale_key){st.st_dev, j};
		}
	}
	dev_t devs[CGROUP_HIER_MAX];
	int ndevs = 0;
	for (int i = 0; i < m->nh; i++) {
		struct stat st;
		if (fstat(own[i], &st) == 0)
			devs[ndevs++] = st.st_dev;
	}
	if (nk > 0 && (ret = scan_holders(c, k, nk, devs, ndevs)) < 0) {
		ret = sbx_err_sys(err, -ret,
		                  "cgroup: stale cgroups beside %s are left: "
		                  "cannot see which processes hold them",
		                  m->h[0].path);
		goto out;
	}
	struct pids_walk w = {NULL, NULL};
	for (size_t j = 0; j < nc; j++) {
		if (c[j].lock_fd < 0 || c[j].held)
			continue;
		int procs = 0;
		for (int i = 0; i < m->nh && procs == 0; i++)
			procs = cgroup_tree_walk(own[i], c[j].name,
			                         pids_walk_dir, &w);
		if (procs != 0)
			continue; /* processes left, or cannot tell */
		int r = 0;
		for (int i = 0; i < m->nh; i++) {
			int ri = tree_rmdir(m, own[i], c[j].name, 0, false);
			if (ri < 0 && r == 0)
				r = ri;
		}
		if (r == 0)
			removed++;
	}
	ret = removed;
out:
	for (size_t j = 0; j < nc; j++) {
		if (c[j].lock_fd >= 0) {
			lock_unlink(m->lock_dir, c[j].name);
			close(c[j].lock_fd);
		}
		free(c[j].name);
	}
	free(c);
	free(k);
	for (int i = 0; i < m->nh; i++)
		if (own[i] >= 0)
			close(own[i]);
	return ret;
}

int cgroup_manager_set_totals(struct cgroup_manager *m, uint64_t memory_bytes,
                              uint64_t pids, struct sbx_err *err)
{
	return m->version == 2
	           ? cgroup_v2_set_totals(m, memory_bytes, pids, err)
	           : cgroup_v1_set_totals(m, memory_bytes, pids, err);
}

/* ---- sandboxes ------------------------------------------------------------
 */

/* mkdir rel in every hierarchy (with command leaves only, if asked; a
 * flat one has nothing below a sandbox's own cgroup). excl: stop at an
 * existing one and return -EEXIST, quietly. */
static int mkdir_all(struct cgroup_manager *m, const char *rel,
                     bool leaves_only, bool excl, struct sbx_err *err)
{
	for (int i = 0; i < m->nh; i++) {
		if (leaves_only && !m->h[i].leaves)
			continue;
		if (m->h[i].flat && strchr(rel, '/'))
			continue;
		int r = cgroup_mkdir(m, m->h[i].dfd, rel);
		if (r == -EEXIST && excl)
			return r;
		if (r < 0 && r != -EEXIST)
			return sbx_err_sys(err, -r, "cgroup: mkdir %s/%s",
			                   m->h[i].path, rel);
	}
	return 0;
}

static int set_limits(struct cgroup_manager *m, const char *rel,
                      const struct cgroup_limits *lim, struct sbx_err *err)
{
	return m->version == 2 ? cgroup_v2_set_limits(m, rel, lim, err)
	                       : cgroup_v1_set_limits(m, rel, lim, err);
}

int cgroup_sandbox_set_limits(struct cgroup_sandbox *s,
                              const struct cgroup_limits *lim,
                              struct sbx_err *err)
{
	return set_limits(s->m, s->name, lim, err);
}

static void sandbox_free(struct cgroup_sandbox *s)
{
	free(s->name);
	free(s->state);
	free(s->free);
	free(s);
}

/* The cgroups of a sandbox named name, with their limits: <name>, its init
 * and its cmds, in every hierarchy (removing a stale <name> first). */
static int tree_make(struct cgroup_manager *m, const char *name,
                     const struct cgroup_limits *lim, struct sbx_err *err)
{
	char init[CGROUP_NAME_MAX + 8], cmds[CGROUP_NAME_MAX + 8];
	snprintf(init, sizeof(init), "%s/init", name);
	snprintf(cmds, sizeof(cmds), "%s/" CGROUP_CMDS, name);
	int r = mkdir_all(m, name, false, true, err);
	if (r == -EEXIST) {
		/* Left by a daemon that died or a destroy that failed: its
		 * processes must not live on inside the new sandbox. */
		if ((r = tree_destroy(m, name, false, err)) == 0 &&
		    (r = mkdir_all(m, name, false, true, err)) == -EEXIST)
			r = sbx_err_set(err, EEXIST,
			                "cgroup: %s/%s came back after removal",
			                m->h[0].path, name);
	}
	/* v1 devices copies a parent's rules into a child only at mkdir, and
	 * refuses a new default on a cgroup with children: rules first. */
	if (r == 0 && m->version == 1)
		r = cgroup_v1_set_devices(m, name, err);
	if (r == 0 && m->version == 2)
		r = cgroup_v2_enable_subtree(m, name, err);
	if (r == 0 && (r = mkdir_all(m, init, false, true, err)) == -EEXIST)
		r = sbx_err_set(err, EEXIST, "cgroup: %s/%s exists",
		                m->h[0].path, init);
	if (r == 0 && (r = mkdir_all(m, cmds, true, true, err)) == -EEXIST)
		r = sbx_err_set(err, EEXIST, "cgroup: %s/%s exists",
		                m->h[0].path, cmds);
	if (r == 0 && m->version == 2)
		r = cgroup_v2_enable_subtree_cmds(m, cmds, err);
	if (r == 0)
		r = set_limits(m, name, lim, err);
	if (r < 0)
		tree_destroy(m, name, false, NULL);
	return r;
}

int cgroup_manager_make_ahead(struct cgroup_manager *m,
                              const struct cgroup_limits *lim,
                              struct sbx_err *err)
{
	/* cgroupfs renames a directory on v1 only (cgroup1_rename) */
	if (m->version != 1 || m->ahead)
		return 0;
	int r = tree_make(m, CGROUP_AHEAD, lim, err);
	if (r == 0) {
		m->ahead = true;
		m->ahead_lim = *lim;
	}
	return r;
}

/* The set made ahead becomes name's: a rename per hierarchy, and the
 * limits written only where they differ. On any failure the set is
 * dropped and the caller makes the cgroups the long way (a stale <name>
 * included). */
static int ahead_take(struct cgroup_manager *m, const char *name,
                      const struct cgroup_limits *lim)
{
	if (!m->ahead)
		return -ENOENT;
	m->ahead = false;
	int i, r = 0;
	for (i = 0; i < m->nh; i++)
		if (renameat(m->h[i].dfd, CGROUP_AHEAD, m->h[i].dfd, name) <
		    0) {
			r = -errno;
			break;
		}
	if (r == 0 && memcmp(lim, &m->ahead_lim, sizeof(*lim)) != 0 &&
	    (r = set_limits(m, name, lim, NULL)) < 0)
		i = m->nh;
	if (r == 0)
		return 0;
	while (i-- > 0)
		renameat(m->h[i].dfd, name, m->h[i].dfd, CGROUP_AHEAD);
	tree_destroy(m, CGROUP_AHEAD, false, NULL);
	return r;
}

int cgroup_sandbox_new(struct cgroup_manager *m, const char *name,
                       const struct cgroup_limits *lim,
                       struct cgroup_sandbox **out, struct sbx_err *err)
{
	*out = NULL;
	if (!name_valid(name) || strcmp(name, CGROUP_AHEAD) == 0)
		return sbx_err_set(err, EINVAL,
		                   "cgroup: invalid sandbox name \"%s\"", name);
	struct cgroup_sandbox *s = calloc(1, sizeof(*s));
	if (!s || !(s->name = strdup(name))) {
		free(s);
		return sbx_err_sys(err, ENOMEM, "cgroup");
	}
	s->m = m;
	s->was_ahead = ahead_take(m, name, lim) == 0;
	int r = s->was_ahead ? 0 : tree_make(m, name, lim, err);
	if (r < 0) {
		sandbox_free(s);
		return r;
	}
	*out = s;
	return 0;
}

int cgroup_sandbox_destroy(struct cgroup_sandbox *s, struct sbx_err *err)
{
	if (!s)
		return 0;
	int r = tree_destroy(s->m, s->name, false, err);
	sandbox_free(s);
	return r;
}

static void leaf_rel(const struct cgroup_sandbox *s, int idx, char *buf,
                     size_t size);

/* rmdir of one cgroup of the sandbox's known layout; gone already is fine */
static int rmdir_known(struct cgroup_manager *m, int dfd, const char *rel)
{
	int r = cgroup_rmdir(m, dfd, rel);
	return r == -ENOENT ? 0 : r;
}

int cgroup_sandbox_remove(struct cgroup_sandbox *s, struct sbx_err *err)
{
	if (!s)
		return 0;
	struct cgroup_manager *m = s->m;
	char rel[CGROUP_NAME_MAX + 32];
	int r = 0;
	/* the layout is known (leaves, cmds, init, the sandbox): rmdir each,
	 * children first, with no walk, no listing of processes, no freeze */
	for (int i = 0; i < m->nh && r == 0; i++) {
		int dfd = m->h[i].dfd;
		if (m->h[i].leaves) {
			for (int k = s->nleaves - 1; k >= 0 && r == 0; k--) {
				leaf_rel(s, k, rel, sizeof(rel));
				r = rmdir_known(m, dfd, rel);
			}
			snprintf(rel, sizeof(rel), "%s/" CGROUP_CMDS, s->name);
			if (r == 0)
				r = rmdir_known(m, dfd, rel);
		}
		snprintf(rel, sizeof(rel), "%s/init", s->name);
		if (r == 0)
			r = rmdir_known(m, dfd, rel);
		if (r == 0)
			r = rmdir_known(m, dfd, s->name);
	}
	/* not empty after all (a process left, a dir that is not ours):
	 * the full kill and removal */
	if (r < 0)
		r = tree_destroy(m, s->name, false, err);
	sandbox_free(s);
	return r;
}

int cgroup_sandbox_add_init(struct cgroup_sandbox *s, pid_t pid,
                            struct sbx_err *err)
{
	char rel[CGROUP_NAME_MAX + 8], val[24];
	snprintf(rel, sizeof(rel), "%s/init", s->name);
	snprintf(val, sizeof(val), "%d", (int)pid);
	for (int i = 0; i < s->m->nh; i++) {
		/* flat: init lives in the manager's own dir (cgroup_internal.h)
		 */
		int r = cgroup_set(s->m, i, s->m->h[i].flat ? "" : rel,
		                   "cgroup.procs", val, false, err);
		if (r < 0)
			return r;
	}
	return 0;
}

_Static_assert(CGROUP_MAX_HIER == CGROUP_HIER_MAX, "CGROUP_MAX_HIER");

/* The cgroup.procs files of <name>/init, one per hierarchy. */
static int init_fds(struct cgroup_manager *m, const char *name,
                    int fds[CGROUP_MAX_HIER], int *nfds, struct sbx_err *err)
{
	char p[CGROUP_NAME_MAX + 24];
	int n = 0;
	snprintf(p, sizeof(p), "%s/init/cgroup.procs", name);
	for (int i = 0; i < m->nh; i++) {
		/* flat: init lives in the manager's own dir (cgroup_internal.h)
		 */
		fds[n] = openat(m->h[i].dfd, m->h[i].flat ? "cgroup.procs" : p,
		                O_WRONLY | O_CLOEXEC);
		if (fds[n] < 0) {
			int r = sbx_err_sys(err, errno, "cgroup: open %s/%s",
			                    m->h[i].path, p);
			while (n > 0)
				close(fds[--n]);
			*nfds = 0;
			return r;
		}
		n++;
	}
	*nfds = n;
	return 0;
}

int cgroup_sandbox_init_fds(struct cgroup_sandbox *s, int fds[CGROUP_MAX_HIER],
                            int *nfds, struct sbx_err *err)
{
	return init_fds(s->m, s->name, fds, nfds, err);
}

int cgroup_manager_ahead_init_fds(struct cgroup_manager *m,
                                  int fds[CGROUP_MAX_HIER], int *nfds,
                                  struct sbx_err *err)
{
	if (!m->ahead)
		return sbx_err_set(err, ENOENT, "cgroup: no set made ahead");
	return init_fds(m, CGROUP_AHEAD, fds, nfds, err);
}

bool cgroup_sandbox_was_ahead(const struct cgroup_sandbox *s)
{
	return s->was_ahead;
}

int cgroup_sandbox_stats(struct cgroup_sandbox *s, struct cgroup_stats *out)
{
	memset(out, 0, sizeof(*out));
	return s->m->version == 2 ? cgroup_v2_stats(s->m, s->name, out)
	                          : cgroup_v1_stats(s->m, s->name, out);
}

/* ---- command leaves -------------------------------------------------------
 */

static void leaf_rel(const struct cgroup_sandbox *s, int idx, char *buf,
                     size_t size)
{
	snprintf(buf, size, "%s/" CGROUP_CMDS "/c%d", s->name, idx);
}

static bool leaf_valid(const struct cgroup_sandbox *s, int idx)
{
	return idx >= 0 && idx < s->nleaves;
}

/* Only the primary hierarchy is looked at: a command joins it first, and
 * this is the release path, paid on every exec. */
static bool leaf_empty(const struct cgroup_sandbox *s, int idx)
{
	char rel[CGROUP_NAME_MAX + 32], p[CGROUP_NAME_MAX + 48], buf[64];
	leaf_rel(s, idx, rel, sizeof(rel));
	snprintf(p, sizeof(p), "%s/cgroup.procs", rel);
	ssize_t n =
	    cgroup_file_read(s->m->h[s->m->primary].dfd, p, buf, sizeof(buf));
	if (n == -ENOENT)
		return true;
	if (n < 0)
		return false;
	return strpbrk(buf, "0123456789") == NULL;
}

static int pool_grow(struct cgroup_sandbox *s)
{
	if (s->nleaves < s->cap)
		return 0;
	int cap = s->cap ? s->cap * 2 : 4;
	uint8_t *st = realloc(s->state, (size_t)cap);
	if (!st)
		return -ENOMEM;
	s->state = st;
	int *fr = realloc(s->free, (size_t)cap * sizeof(int));
	if (!fr)
		return -ENOMEM;
	s->free = fr;
	s->cap = cap;
	return 0;
}

int cgroup_cmd_acquire(struct cgroup_sandbox *s, int fds[CGROUP_MAX_FDS],
                       int *nfds, struct sbx_err *err)
{
	struct cgroup_manager *m = s->m;
	char rel[CGROUP_NAME_MAX + 32];
	int idx, r;

	*nfds = 0;
	if (s->nfree > 0) {
		idx = s->free[--s->nfree];
	} else {
		if (pool_grow(s) < 0)
			return sbx_err_sys(err, ENOMEM, "cgroup");
		idx = s->nleaves;
		leaf_rel(s, idx, rel, sizeof(rel));
		/* A leaf that exists already is one whose earlier creation
		 * failed half-way; it is empty and can be completed. */
		r = mkdir_all(m, rel, true, false, err);
		if (r < 0) {
			tree_destroy(m, rel, false, NULL);
			return r;
		}
		s->state[idx] = CGROUP_LEAF_FREE;
		s->nleaves++;
	}
	if (fds && (r = cgroup_cmd_open(s, idx, fds, nfds, err)) < 0) {
		s->free[s->nfree++] = idx;
		return r;
	}
	s->state[idx] = CGROUP_LEAF_TAKEN;
	return idx;
}

int cgroup_cmd_open(struct cgroup_sandbox *s, int idx, int fds[CGROUP_MAX_FDS],
                    int *nfds, struct sbx_err *err)
{
	struct cgroup_manager *m = s->m;
	char rel[CGROUP_NAME_MAX + 32], p[CGROUP_NAME_MAX + 48];
	int n = 0, r;

	*nfds = 0;
	if (!leaf_valid(s, idx))
		return sbx_err_set(err, EINVAL, "cgroup: no command leaf %d",
		                   idx);
	leaf_rel(s, idx, rel, sizeof(rel));
	snprintf(p, sizeof(p), "%s/cgroup.procs", rel);
	char box[CGROUP_NAME_MAX + 16];
	snprintf(box, sizeof(box), "%s/cgroup.procs", s->name);
	for (int i = 0; i < m->nh; i++) {
		if (!m->h[i].leaves)
			continue;
		if (n == CGROUP_MAX_FDS) {
			r = sbx_err_set(err, E2BIG,
			                "cgroup: too many hierarchies");
			goto fail;
		}
		/* flat: every command in the sandbox's one cgroup */
		const char *f = m->h[i].flat ? box : p;
		fds[n] = openat(m->h[i].dfd, f, O_WRONLY | O_CLOEXEC);
		if (fds[n] < 0) {
			r = sbx_err_sys(err, errno, "cgroup: open %s/%s",
			                m->h[i].path, f);
			goto fail;
		}
		n++;
	}
	*nfds = n;
	return 0;
fail:
	while (n > 0)
		close(fds[--n]);
	return r;
}

int cgroup_cmd_kill(struct cgroup_sandbox *s, int idx, struct sbx_err *err)
{
	if (!leaf_valid(s, idx))
		return sbx_err_set(err, EINVAL, "cgroup: no command leaf %d",
		                   idx);
	char rel[CGROUP_NAME_MAX + 32];
	leaf_rel(s, idx, rel, sizeof(rel));
	int n = tree_kill_step(s->m, rel);
	if (n < 0)
		return sbx_err_sys(err, -n, "cgroup: kill in %s/%s",
		                   s->m->h[s->m->primary].path, rel);
	return n;
}

int cgroup_cmd_signal(struct cgroup_sandbox *s, int idx, int signo)
{
	if (!leaf_valid(s, idx))
		return -EINVAL;
	char rel[CGROUP_NAME_MAX + 32];
	leaf_rel(s, idx, rel, sizeof(rel));
	_cleanup_close_ int dfd = openat(s->m->h[s->m->primary].dfd, rel,
	                                 O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	return procs_signal(s->m, dfd, signo, getpid());
}

bool cgroup_cmd_empty(struct cgroup_sandbox *s, int idx)
{
	/* A leaf that does not exist holds nothing. */
	return !leaf_valid(s, idx) || leaf_empty(s, idx);
}

bool cgroup_cmd_release(struct cgroup_sandbox *s, int idx)
{
	if (!leaf_valid(s, idx) || s->state[idx] == CGROUP_LEAF_FREE)
		return false;
	if (!leaf_empty(s, idx)) {
		if (s->state[idx] == CGROUP_LEAF_TAKEN) {
			s->state[idx] = CGROUP_LEAF_DRAINING;
			s->ndraining++;
		}
		return false;
	}
	if (s->state[idx] == CGROUP_LEAF_DRAINING)
		s->ndraining--;
	s->state[idx] = CGROUP_LEAF_FREE;
	s->free[s->nfree++] = idx;
	return true;
}

int cgroup_sandbox_reclaim(struct cgroup_sandbox *s)
{
	for (int i = 0; s->ndraining > 0 && i < s->nleaves; i++) {
		if (s->state[i] != CGROUP_LEAF_DRAINING || !leaf_empty(s, i))
			continue;
		s->state[i] = CGROUP_LEAF_FREE;
		s->free[s->nfree++] = i;
		s->ndraining--;
	}
	return s->ndraining;
}
