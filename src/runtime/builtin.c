#include "runtime/builtin.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/cleanup.h"
#include "runtime/fsutil.h"

static _Noreturn void fail(int e, const char *what)
{
	dprintf(1, "E %d %s\n", e, what);
	_exit(1);
}

/* How paths are confined to the base: beneath it, or, when the base is the
 * sandbox's own root, in it (see builtin.h). Set once per run. */
static unsigned long long confine = RESOLVE_BENEATH;

static int open_beneath(int base, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
	    .flags = (unsigned long long)(flags | O_CLOEXEC),
	    .mode = mode,
	    .resolve = confine | RESOLVE_NO_MAGICLINKS,
	};
	int fd;
	/* EAGAIN: a rename anywhere on the host raced a ".." step; the
	 * kernel asks us to try again */
	for (int tries = 0; tries < 64; tries++) {
		fd = (int)syscall(SYS_openat2, base, path, &how, sizeof(how));
		if (fd >= 0 || errno != EAGAIN)
			break;
	}
	return fd < 0 ? -errno : fd;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Big steps: the daemon gives stdout and stdin pipes of BUILTIN_PIPE_SZ.
 * A file's page cache goes into the stdout pipe by reference (splice;
 * read and write where a file system cannot splice); stdin is read and
 * written (copy_in). */
#define STEP ((size_t)BUILTIN_PIPE_SZ)

static volatile sig_atomic_t write_cancelled;

static _Noreturn void copy_out(int fd)
{
	for (;;) {
		ssize_t n = splice(fd, NULL, 1, NULL, STEP, SPLICE_F_MORE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			_exit(0);
		if (n < 0)
			break;
	}
	if (errno != EINVAL)
		_exit(1);
	char *buf = malloc(STEP);
	if (!buf)
		_exit(1);
	for (;;) {
		ssize_t n = read(fd, buf, STEP);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(n < 0 ? 1 : 0);
		if (write_all(1, buf, (size_t)n) < 0)
			_exit(1);
	}
}

/* stdin into fd, at most max bytes (one more tells that it is longer):
 * the bytes taken, or -errno. read and write, not splice: a splice into a
 * file holds the pipe's lock while the file system takes the bytes, so
 * the daemon could not refill the pipe meanwhile; read lets go of it
 * after the copy out (a 256 MiB PUT: 559-638 -> 663-724 MB/s, p50 of 5;
 * a splice into a file copies the bytes as write does). */
static long long copy_in(int fd, long long max)
{
	long long got = 0;
	_cleanup_free_ char *buf = malloc(STEP);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (write_cancelled)
			return -ECANCELED;
		size_t want = STEP;
		if (max - got < (long long)want)
			want = (size_t)(max - got) + 1;
		ssize_t n = read(0, buf, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		int r = write_all(fd, buf, (size_t)n);
		if (r < 0)
			return r;
		got += n;
		if (got > max)
			break;
	}
	return got;
}

static char type_of(mode_t m)
{
	return S_ISREG(m) ? 'f' : S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' : 'o';
}

/* Split "a/b/c" into the parent's fd (beneath base) and "c". */
static int open_parent(int base, const char *path, char **leaf, bool create)
{
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	char *slash = strrchr(copy, '/');
	int fd;
	if (!slash) {
		fd = fcntl(base, F_DUPFD_CLOEXEC, 0);
		*leaf = strdup(path);
	} else {
		*slash = '\0';
		*leaf = strdup(slash + 1);
		if (create) {
			/* mkdir -p one level at a time; each level is opened
			 * from base by its whole prefix, so a link on the way
			 * is resolved as it would be from base (and stays in
			 * it) */
			int cur = fcntl(base, F_DUPFD_CLOEXEC, 0);
			size_t n = strlen(copy);
			for (size_t at = 0, end; cur >= 0 && at < n;
			     at = end + 1) {
				end = at + strcspn(copy + at, "/");
				if (end == at)
					continue;
				char sep = copy[end];
				copy[end] = '\0';
				if (mkdirat(cur, copy + at, 0755) < 0 &&
				    errno != EEXIST) {
					int e = errno;
					close(cur);
					free(copy);
					free(*leaf);
					return -e;
				}
				int next = open_beneath(
				    base, copy, O_PATH | O_DIRECTORY, 0);
				copy[end] = sep;
				close(cur);
				cur = next;
			}
			fd = cur;
		} else {
			fd = open_beneath(base, copy, O_PATH | O_DIRECTORY, 0);
		}
	}
	free(copy);
	if (fd < 0)
		free(*leaf);
	return fd;
}

static _Noreturn void op_read(int base, const char *path)
{
	/* O_NONBLOCK: a FIFO must not hang us waiting for a writer */
	int fd = open_beneath(base, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0)
		fail(-fd, "open");
	struct stat st;
	if (fstat(fd, &st) < 0)
		fail(errno, "stat");
	if (S_ISREG(st.st_mode)) {
		fcntl(fd, F_SETFL, 0);
		dprintf(1, "F %lld\n", (long long)st.st_size);
		copy_out(fd);
	}
	if (!S_ISDIR(st.st_mode))
		fail(EINVAL, "not a regular file or directory");
	DIR *d = fdopendir(fd);
	if (!d)
		fail(errno, "opendir");
	dprintf(1, "D\n");
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat es;
		if (fstatat(fd, e->d_name, &es, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		dprintf(1, "%c %lld %o %lld %s%c", type_of(es.st_mode),
		        (long long)es.st_size, (unsigned)(es.st_mode & 07777),
		        (long long)es.st_mtim.tv_sec * 1000 +
		            es.st_mtim.tv_nsec / 1000000,
		        e->d_name, '\0');
	}
	_exit(0);
}

static void on_cancel(int sig)
{
	(void)sig;
	write_cancelled = 1;
}

static _Noreturn void op_write(int base, const char *path, const char *lenstr)
{
	char *leaf, tmp[300];
	char *end;
	/* "-": the length is not known before; the body is whole at EOF, and
	 * a SIGTERM says it was cut short (nothing is left behind) */
	bool until_eof = !strcmp(lenstr, "-");
	long long want = until_eof ? LLONG_MAX : strtoll(lenstr, &end, 10);
	if (!until_eof && (*end || want < 0))
		fail(EINVAL, "length");
	if (until_eof) {
		struct sigaction sa = {.sa_handler = on_cancel};
		sigaction(SIGTERM, &sa, NULL);
	}
	int dir = open_parent(base, path, &leaf, true);
	if (dir < 0)
		fail(-dir, "parent directory");
	if (!*leaf || strlen(leaf) > 200)
		fail(EINVAL, "name");
	/* a link at the target is replaced by the file, unless it leads out
	 * of base: then the client meant a file it may not write */
	struct stat lst;
	if (fstatat(dir, leaf, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(lst.st_mode)) {
		int t = open_beneath(base, path, O_PATH, 0);
		if (t == -EXDEV || t == -ELOOP)
			fail(EXDEV, "symlink leads outside");
		if (t >= 0)
			close(t);
	}
	/* a temp file beside the target, renamed over it only when the whole
	 * body arrived: a failed upload leaves nothing behind */
	snprintf(tmp, sizeof(tmp), ".%s.sbx-%d", leaf, (int)getpid());
	int dfd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		fail(errno, "parent directory");
	int fd =
	    openat(dfd, tmp,
	           O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		fail(errno, "create");
	long long got = copy_in(fd, want);
	int e = got < 0 ? (int)-got : got > want ? EFBIG : 0;
	if (!e && !until_eof && got != want)
		e = EPIPE; /* the upload was cut short */
	if (!e && close(fd) < 0)
		e = errno;
	bool existed = false;
	if (!e) {
		struct stat st;
		/* keep the mode of a file we replace */
		existed = fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0;
		if (existed && S_ISREG(st.st_mode) &&
		    fchmodat(dfd, tmp, st.st_mode & 07777, 0) < 0)
			e = errno;
		if (!e && renameat(dfd, tmp, dfd, leaf) < 0)
			e = errno;
	}
	if (e) {
		unlinkat(dfd, tmp, 0);
		fail(e, "write");
	}
	dprintf(1, "OK %lld %s\n", got, existed ? "replaced" : "created");
	_exit(0);
}

static _Noreturn void op_delete(int base, const char *path, bool recursive,
                                bool files_only)
{
	char *leaf;
	int dir = open_parent(base, path, &leaf, false);
	if (dir < 0)
		fail(-dir, "parent directory");
	int dfd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (dfd < 0 || fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		fail(errno, "stat");
	if (S_ISDIR(st.st_mode) && files_only)
		fail(EISDIR, "is a directory");
	if (S_ISDIR(st.st_mode)) {
		if (!recursive) {
			if (unlinkat(dfd, leaf, AT_REMOVEDIR) < 0)
				fail(errno, "rmdir");
		} else if (fs_remove_tree(dfd, leaf, NULL) < 0) {
			fail(errno ? errno : EIO, "remove");
		}
	} else if (unlinkat(dfd, leaf, 0) < 0) {
		fail(errno, "unlink");
	}
	dprintf(1, "OK\n");
	_exit(0);
}

static _Noreturn void op_mkdir(int base, const char *path, bool parents)
{
	char *leaf;
	int dir = open_parent(base, path, &leaf, parents);
	if (dir < 0)
		fail(-dir, "parent directory");
	int dfd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		fail(errno, "parent directory");
	if (mkdirat(dfd, leaf, 0755) < 0) {
		struct stat st;
		/* -p is content with a directory, not with a file of that name
		 */
		if (!parents || errno != EEXIST ||
		    fstatat(dfd, leaf, &st, 0) < 0 || !S_ISDIR(st.st_mode))
			fail(errno == ENOENT ? EEXIST : errno, "mkdir");
	}
	dprintf(1, "OK\n");
	_exit(0);
}

static _Noreturn void op_stat(int base, const char *path)
{
	int fd = open_beneath(base, path, O_PATH, 0);
	struct stat st;
	if (fd < 0)
		fail(-fd, "open");
	if (fstat(fd, &st) < 0)
		fail(errno, "stat");
	dprintf(1, "S %c %lld %o %lld\n", type_of(st.st_mode),
	        (long long)st.st_size, (unsigned)(st.st_mode & 07777),
	        (long long)st.st_mtim.tv_sec * 1000 +
	            st.st_mtim.tv_nsec / 1000000);
	_exit(0);
}

static _Noreturn void op_rename(int base, const char *from, const char *to,
                                bool into)
{
	char *lf, *lt;
	int df = open_parent(base, from, &lf, false);
	if (df < 0)
		fail(-df, "source directory");
	int dt = into ? open_beneath(base, to, O_PATH | O_DIRECTORY, 0) : -1;
	if (dt >= 0) { /* as mv: onto a directory means into it */
		lt = lf;
	} else {
		dt = open_parent(base, to, &lt, false);
		if (dt < 0)
			fail(-dt, "target directory");
	}
	int a = openat(df, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int b = openat(dt, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (a < 0 || b < 0)
		fail(errno, "directory");
	if (renameat(a, lf, b, lt) < 0)
		fail(errno, "rename");
	dprintf(1, "OK\n");
	_exit(0);
}

/* Entries of a sorted listing, held until the walk is over: in the
 * builtin, so in the sandbox's memory (its cgroup), never the daemon's. */
struct held {
	char *line; /* "<type> <size> <mode> <mtime> <rel>" */
	size_t len; /* without the NUL */
	size_t rel; /* where rel starts in line */
};
static struct held *held;
static size_t nheld, capheld;
static bool sorted;

static void emit(const struct stat *st, const char *rel)
{
	char *line;
	int n =
	    asprintf(&line, "%c %lld %o %lld ", type_of(st->st_mode),
	             (long long)st->st_size, (unsigned)(st->st_mode & 07777),
	             (long long)st->st_mtim.tv_sec * 1000 +
	                 st->st_mtim.tv_nsec / 1000000);
	if (n < 0)
		fail(ENOMEM, "list");
	if (!sorted) {
		fputs(line, stdout);
		fputs(rel, stdout);
		putchar('\0');
		free(line);
		return;
	}
	size_t rl = strlen(rel);
	char *full = realloc(line, (size_t)n + rl + 1);
	if (!full)
		fail(ENOMEM, "list");
	memcpy(full + n, rel, rl + 1);
	if (nheld == capheld) {
		size_t c = capheld ? capheld * 2 : 1024;
		struct held *h = realloc(held, c * sizeof(*h));
		if (!h)
			fail(ENOMEM, "list");
		held = h;
		capheld = c;
	}
	/* the list owns it from here */
	held[nheld].line = full;
	held[nheld].len = (size_t)n + rl;
	held[nheld].rel = (size_t)n;
	nheld++;
}

static int by_rel(const void *x, const void *y)
{
	const struct held *a = x, *b = y;
	return strcmp(a->line + a->rel, b->line + b->rel);
}

/* One directory's entries (and, when recursive, its subdirectories'),
 * named by their path relative to the listed directory in rel[0..rl).
 * Links are listed, never followed; hidden names are skipped (and not
 * descended into) unless hidden. */
static void list_dir(int dfd, char *rel, size_t rl, size_t cap, bool recursive,
                     bool hidden, int depth)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *name = e->d_name;
		size_t nl = strlen(name);
		struct stat st;
		if (!strcmp(name, ".") || !strcmp(name, "..") ||
		    (!hidden && name[0] == '.') || rl + nl + 2 > cap ||
		    fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		size_t l = rl;
		if (l)
			rel[l++] = '/';
		memcpy(rel + l, name, nl + 1);
		emit(&st, rel);
		if (recursive && S_ISDIR(st.st_mode) && depth < 64) {
			int sub = openat(dirfd(d), name,
			                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			                     O_CLOEXEC);
			if (sub >= 0)
				list_dir(sub, rel, l + nl, cap, recursive,
				         hidden, depth + 1);
		}
		rel[rl] = '\0';
	}
	closedir(d);
}

static _Noreturn void op_list(int base, const char *path, bool recursive,
                              bool hidden)
{
	static char rel[8192];
	int fd = open_beneath(base, path, O_PATH, 0);
	struct stat st;
	if (fd < 0)
		fail(-fd, "open");
	if (fstat(fd, &st) < 0)
		fail(errno, "stat");
	if (!S_ISDIR(st.st_mode))
		fail(ENOTDIR, "not a directory");
	int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		fail(errno, "opendir");
	printf("D\n");
	list_dir(dfd, rel, 0, sizeof(rel), recursive, hidden, 0);
	if (sorted) {
		qsort(held, nheld, sizeof(*held), by_rel);
		for (size_t i = 0; i < nheld; i++)
			fwrite(held[i].line, 1, held[i].len + 1, stdout);
	}
	_exit(fflush(stdout) ? 1 : 0);
}

static bool has_flag(int argc, const char *const *argv, int from,
                     const char *flag)
{
	for (int i = from; i < argc; i++)
		if (!strcmp(argv[i], flag))
			return true;
	return false;
}

/* A sign of life on stderr, once a second, whatever the operation is
 * doing: the daemon ends a builtin that stays silent for --file-timeout
 * (one the sandbox's root SIGSTOPped), not one that works long. */
static void heartbeat(int sig)
{
	int e = errno;
	(void)sig;
	if (write(2, "", 1) < 0) {
		/* the daemon went away: the next write to stdout says so */
	}
	errno = e;
}

_Noreturn void builtin_run(int argc, const char *const *argv)
{
	struct sigaction sa = {.sa_handler = heartbeat, .sa_flags = SA_RESTART};
	struct itimerval every = {{BUILTIN_HEARTBEAT_S, 0},
	                          {BUILTIN_HEARTBEAT_S, 0}};
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &every, NULL);
	if (argc < 3)
		fail(EINVAL, "usage");
	int base = open(argv[1], O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (base < 0)
		fail(errno, "base directory");
	/* the sandbox's root as base: its absolute links (/etc/alternatives,
	 * a user's ln -s /workspace/x) mean what they mean to its programs,
	 * and resolution still never leaves that root */
	if (!strcmp(argv[1], "/"))
		confine = RESOLVE_IN_ROOT;
	const char *op = argv[0], *path = argv[2];
	if (!strcmp(op, "read"))
		op_read(base, path);
	if (!strcmp(op, "write") && argc == 4)
		op_write(base, path, argv[3]);
	if (!strcmp(op, "delete"))
		op_delete(base, path, has_flag(argc, argv, 3, "-r"),
		          has_flag(argc, argv, 3, "-f"));
	if (!strcmp(op, "mkdir"))
		op_mkdir(base, path, has_flag(argc, argv, 3, "-p"));
	if (!strcmp(op, "stat"))
		op_stat(base, path);
	if (!strcmp(op, "rename") && argc >= 4)
		op_rename(base, path, argv[3], has_flag(argc, argv, 4, "-m"));
	if (!strcmp(op, "tar") || !strcmp(op, "untar"))
		builtin_tar(base, argc, argv);
	if (!strncmp(op, "archive-", 8))
		builtin_archive(base, argc, argv);
	if (!strcmp(op, "watch")) {
		int fd = open_beneath(base, path, O_RDONLY | O_DIRECTORY, 0);
		if (fd < 0)
			fail(-fd, "open");
		builtin_watch(fd, has_flag(argc, argv, 3, "-r"));
	}
	if (!strcmp(op, "list")) {
		sorted = has_flag(argc, argv, 3, "-s");
		op_list(base, path, has_flag(argc, argv, 3, "-r"),
		        has_flag(argc, argv, 3, "-a"));
	}
	fail(EINVAL, "unknown operation");
}
