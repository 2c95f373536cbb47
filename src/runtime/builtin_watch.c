/* watch: inotify inside the sandbox, by the daemon's own code running as a
 * builtin (builtin.h), so that the kernel's view of the sandbox's files is
 * the one watched and no host path is ever named.
 *
 *   watch base path [-r]
 *         stdout: "W\n" once every watch is set (a client may then rely
 *         on seeing what happens next), then one event per change, each
 *         "<c> <path>\0" with path relative to base/path and c one of
 *           C created (or moved in)   W written    R removed
 *           M moved away (renamed)    A attributes changed
 *           O events were lost (the kernel's queue overflowed; path empty)
 *         -r: subdirectories too, including ones made later (a directory
 *         that appears is watched before its own "C" event is written).
 *         It runs until it is killed, or ends (status 0) when the watched
 *         directory itself goes.
 *
 * Directories are watched through fds (fchdir + "."), and a new one is
 * opened with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS from the watched
 * directory, so a link swapped in never moves the watch elsewhere. */
#include "runtime/builtin.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MASK                                                                   \
	(IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |     \
	 IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR |              \
	 IN_DONT_FOLLOW | IN_EXCL_UNLINK)
#define MAX_DEPTH 64

static int root = -1, ifd = -1;
static bool recursive;
static char **paths; /* by watch descriptor: relative path, "" the root */
static size_t npaths;

static _Noreturn void die(int e, const char *what)
{
	dprintf(1, "E %d %s\n", e, what);
	_exit(1);
}

static int write_all(const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(1, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void remember(int wd, const char *rel)
{
	if ((size_t)wd >= npaths) {
		size_t n = (size_t)wd * 2 + 16;
		char **p = realloc(paths, n * sizeof(*p));
		if (!p)
			die(ENOMEM, "out of memory");
		memset(p + npaths, 0, (n - npaths) * sizeof(*p));
		paths = p;
		npaths = n;
	}
	free(paths[wd]);
	if (!(paths[wd] = strdup(rel)))
		die(ENOMEM, "out of memory");
}

/* Watch dfd (named rel) and, when recursive, every directory below it.
 * Takes dfd. */
static void add_tree(int dfd, const char *rel, int depth)
{
	if (fchdir(dfd) < 0) {
		close(dfd);
		return;
	}
	int wd = inotify_add_watch(ifd, ".", MASK);
	if (wd < 0) {
		int e = errno;
		close(dfd);
		if (!*rel)
			die(e, "inotify_add_watch");
		return; /* gone meanwhile, or out of watches: skipped */
	}
	remember(wd, rel);
	if (!recursive || depth >= MAX_DEPTH) {
		close(dfd);
		return;
	}
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN)
			continue;
		int sub =
		    openat(dirfd(d), e->d_name,
		           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			continue;
		size_t n = strlen(rel) + strlen(e->d_name) + 2;
		char *child = malloc(n);
		if (!child)
			die(ENOMEM, "out of memory");
		snprintf(child, n, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
		add_tree(sub, child, depth + 1);
		free(child);
	}
	closedir(d);
}

static void add_new_dir(const char *rel)
{
	struct open_how how = {
	    .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
	    .resolve =
	        RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof(how));
	if (fd < 0)
		return;
	int depth = 1;
	for (const char *p = rel; *p; p++)
		depth += *p == '/';
	add_tree(fd, rel, depth);
}

static char kind(uint32_t m)
{
	if (m & (IN_CREATE | IN_MOVED_TO))
		return 'C';
	if (m & IN_MODIFY)
		return 'W';
	if (m & IN_DELETE)
		return 'R';
	if (m & IN_MOVED_FROM)
		return 'M';
	if (m & IN_ATTRIB)
		return 'A';
	return 0;
}

_Noreturn void builtin_watch(int dfd, bool rec)
{
	recursive = rec;
	if ((root = fcntl(dfd, F_DUPFD_CLOEXEC, 3)) < 0)
		die(errno, "dup");
	if ((ifd = inotify_init1(IN_CLOEXEC)) < 0)
		die(errno, "inotify_init1");
	add_tree(dfd, "", 0);
	if (write_all("W\n", 2) < 0)
		_exit(1);

	static char buf[64u << 10] __attribute__((aligned(8)));
	char *out = NULL;
	size_t cap = 0;
	for (;;) {
		ssize_t n = read(ifd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue; /* the heartbeat's alarm */
		if (n <= 0)
			die(n < 0 ? errno : EIO, "read inotify");
		size_t used = 0;
		bool gone = false;
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			p += sizeof(*ev) + ev->len;
			const char *dir =
			    (ev->wd >= 0 && (size_t)ev->wd < npaths)
			        ? paths[ev->wd]
			        : NULL;
			if (ev->mask & IN_Q_OVERFLOW) {
				dir = "";
				ev->len = 0;
			} else if (ev->mask & IN_IGNORED) {
				if (dir) {
					free(paths[ev->wd]);
					paths[ev->wd] = NULL;
				}
				continue;
			}
			if (!dir)
				continue;
			if ((ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) &&
			    ev->wd >= 0 && !*dir) {
				gone = true; /* the watched directory itself */
				continue;
			}
			char c =
			    (ev->mask & IN_Q_OVERFLOW) ? 'O' : kind(ev->mask);
			if (!c || (!ev->len && c != 'O'))
				continue; /* a subdirectory's own events: its
				             parent reports them by name */
			const char *name = ev->len ? ev->name : "";
			size_t need = used + strlen(dir) + strlen(name) + 4;
			if (need > cap) {
				cap = need * 2;
				char *grown = realloc(out, cap);
				if (!grown)
					die(ENOMEM,
					    "out of memory"); /* exits */
				out = grown;
			}
			int w = snprintf(out + used, cap - used, "%c %s%s%s", c,
			                 dir, *dir && *name ? "/" : "", name);
			used += (size_t)w + 1; /* and its NUL */
			if (recursive && (ev->mask & IN_ISDIR) &&
			    (ev->mask & (IN_CREATE | IN_MOVED_TO)))
				add_new_dir(out + used - (size_t)w - 1 + 2);
		}
		if (used && write_all(out, used) < 0)
			_exit(1);
		if (gone)
			_exit(0);
	}
}
