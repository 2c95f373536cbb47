#include "runtime/fsutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/cleanup.h"

int fs_write_file(int dirfd, const char *name, const void *data, size_t len,
                  mode_t mode, struct sbx_err *err)
{
	_cleanup_close_ int fd =
	    openat(dirfd, name,
	           O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return sbx_err_sys(err, errno, "open %s", name);
	const char *p = data;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return sbx_err_sys(err, errno, "write %s", name);
		}
		p += n;
		len -= (size_t)n;
	}
	if (fchmod(fd, mode) < 0) /* umask must not change what we meant */
		return sbx_err_sys(err, errno, "chmod %s", name);
	return 0;
}

int fs_write_str(int dirfd, const char *name, const char *s, mode_t mode,
                 struct sbx_err *err)
{
	return fs_write_file(dirfd, name, s, strlen(s), mode, err);
}

ssize_t fs_read_small(int dirfd, const char *name, char *buf, size_t cap)
{
	_cleanup_close_ int fd =
	    openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || cap == 0)
		return -errno;
	size_t off = 0;
	while (off + 1 < cap) {
		ssize_t n = read(fd, buf + off, cap - 1 - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	buf[off] = '\0';
	return (ssize_t)off;
}

int fs_mkdirs(int dirfd, const char *path, mode_t mode, struct sbx_err *err)
{
	char *copy = strdup(path);
	if (!copy)
		return sbx_err_set(err, ENOMEM, "out of memory");
	int cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 0), r = 0;
	char *save = NULL;
	for (char *part = strtok_r(copy, "/", &save); part && cur >= 0;
	     part = strtok_r(NULL, "/", &save)) {
		if (mkdirat(cur, part, mode) < 0 && errno != EEXIST) {
			r = sbx_err_sys(err, errno, "mkdir %s", path);
			break;
		}
		int next = openat(
		    cur, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(cur);
		cur = next;
		if (cur < 0)
			r = sbx_err_sys(err, errno, "open %s", path);
	}
	if (cur >= 0)
		close(cur);
	free(copy);
	return r;
}

/* Removing a tree that sandboxed code built, as host root (the trash
 * cleaner, the store's fallback) or inside a sandbox (the delete builtin).
 * Such a tree can be any depth (50,000 levels cost a sandbox nothing), so
 * the walk is not recursive and holds a fixed number of fds (the top, the
 * directory at hand, one more in passing) and one getdents buffer however
 * deep it goes. Links are never followed and mounts never entered: every
 * step down is openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV). Going back
 * up is by "..", checked against the dev/ino recorded on the way down, so
 * a directory moved meanwhile stops the walk instead of leading it
 * elsewhere. That record is a heap stack of RM_MAX_DEPTH small frames at
 * most: a subtree deeper than that is renamed up into the top directory
 * (RENAME_NOREPLACE, a fresh name) and taken from there later. Where a
 * directory's offsets are not stable (an overlayfs merged directory), a
 * pass can miss entries; passes repeat while they make progress. */
#define RM_MAX_DEPTH 256
#define RM_BUF (32u << 10)

struct rm_frame {
	dev_t dev;
	ino_t ino;
	off_t resume;             /* where to read on once back from child */
	char child[NAME_MAX + 1]; /* the entry we went down into */
};

struct rm_walk {
	int top;
	struct rm_frame *f; /* f[0]: top; f[d]: the directory at depth d */
	size_t cap;
	char *buf;
	unsigned long seq; /* fresh names for subtrees moved up */
	int err;           /* first errno of this pass */
	bool progress;     /* this pass removed or moved something */
};

static int rm_open_dir(int dfd, const char *name)
{
	struct open_how how = {
	    .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
	    .resolve =
	        RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS,
	};
	int fd = -1;
	for (int tries = 0; tries < 16; tries++) {
		fd = (int)syscall(SYS_openat2, dfd, name, &how, sizeof(how));
		if (fd >= 0 || errno != EAGAIN)
			break;
	}
	return fd;
}

static void rm_note(struct rm_walk *w, int e)
{
	if (!w->err)
		w->err = e ? e : EIO;
}

static bool rm_reserve(struct rm_walk *w, size_t n)
{
	if (n <= w->cap)
		return true;
	size_t cap = w->cap ? w->cap * 2 : 16;
	while (cap < n)
		cap *= 2;
	struct rm_frame *f = realloc(w->f, cap * sizeof(*f));
	if (!f)
		return false;
	w->f = f;
	w->cap = cap;
	return true;
}

/* Move the subtree name (in dir) up into the top under a fresh name. */
static int rm_move_up(struct rm_walk *w, int dir, const char *name)
{
	char fresh[64];
	for (int tries = 0; tries < 64; tries++) {
		snprintf(fresh, sizeof(fresh), ".sbx-rm.%d.%lu", (int)getpid(),
		         ++w->seq);
		if (renameat2(dir, name, w->top, fresh, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

static bool is_dot(const char *n)
{
	return n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2]));
}

/* One pass over everything below w->top. 0, or -errno when the walk had to
 * stop (the tree changed under it, or memory ran out). */
static int rm_pass(struct rm_walk *w)
{
	int cur = openat(w->top, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return -errno;
	size_t depth = 0;
	off_t pos = 0;
	int r = 0;
	for (;;) {
		ssize_t n = -1;
		if (lseek(cur, pos, SEEK_SET) >= 0)
			n = getdents64(cur, w->buf, RM_BUF);
		if (n < 0) {
			rm_note(w, errno);
			n = 0;
		}
		bool down = false;
		for (ssize_t off = 0; off < n && !down;) {
			struct dirent64 *d = (struct dirent64 *)(w->buf + off);
			const char *name = d->d_name;
			off += d->d_reclen;
			pos = d->d_off;
			if (is_dot(name))
				continue;
			if (d->d_type != DT_DIR) {
				if (unlinkat(cur, name, 0) == 0) {
					w->progress = true;
					continue;
				}
				if (errno == ENOENT)
					continue;
				if (errno != EISDIR) {
					rm_note(w, errno);
					continue;
				}
			}
			if (unlinkat(cur, name, AT_REMOVEDIR) == 0) {
				w->progress = true;
				continue;
			}
			if (errno == ENOENT)
				continue;
			if (errno != ENOTEMPTY && errno != EEXIST) {
				rm_note(w, errno);
				continue;
			}
			if (depth + 1 >= RM_MAX_DEPTH &&
			    rm_move_up(w, cur, name) == 0) {
				w->progress = true;
				continue;
			}
			if (!rm_reserve(w, depth + 2)) {
				r = -ENOMEM;
				goto out;
			}
			int child = rm_open_dir(cur, name);
			struct stat st;
			if (child < 0 || fstat(child, &st) < 0) {
				rm_note(
				    w,
				    errno); /* EXDEV: a mount, never entered */
				if (child >= 0)
					close(child);
				continue;
			}
			w->f[depth].resume = pos;
			snprintf(w->f[depth].child, sizeof(w->f[depth].child),
			         "%s", name);
			depth++;
			w->f[depth].dev = st.st_dev;
			w->f[depth].ino = st.st_ino;
			close(cur);
			cur = child;
			pos = 0;
			down = true;
		}
		if (down || n > 0)
			continue;
		if (depth == 0)
			break; /* the end of the top: this pass is done */
		int parent = rm_open_dir(cur, "..");
		struct stat st;
		if (parent < 0 || fstat(parent, &st) < 0 ||
		    st.st_dev != w->f[depth - 1].dev ||
		    st.st_ino != w->f[depth - 1].ino) {
			/* moved while we were below it: going on from here
			 * could remove what is not ours to remove */
			if (parent >= 0)
				close(parent);
			r = -ESTALE;
			goto out;
		}
		close(cur);
		cur = parent;
		depth--;
		if (unlinkat(cur, w->f[depth].child, AT_REMOVEDIR) == 0)
			w->progress = true;
		else if (errno != ENOENT)
			rm_note(w, errno);
		pos = w->f[depth].resume;
	}
out:
	close(cur);
	return r;
}

/* Remove everything inside top (which stays). 0 or -errno. */
static int rm_contents(int top)
{
	struct rm_walk w = {.top = top};
	struct stat st;
	int r;
	if (fstat(top, &st) < 0)
		return -errno;
	w.buf = malloc(RM_BUF);
	if (!w.buf || !rm_reserve(&w, RM_MAX_DEPTH + 1)) {
		free(w.buf);
		free(w.f);
		return -ENOMEM;
	}
	w.f[0].dev = st.st_dev;
	w.f[0].ino = st.st_ino;
	for (;;) {
		w.err = 0;
		w.progress = false;
		if ((r = rm_pass(&w)) < 0)
			break;
		if (!w.progress) { /* nothing left, or nothing more we can do */
			r = -w.err;
			break;
		}
	}
	free(w.buf);
	free(w.f);
	return r;
}

int fs_empty_dir(int dirfd, struct sbx_err *err)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, errno, "reopen dir");
	int r = rm_contents(fd);
	close(fd);
	if (r < 0) {
		errno = -r;
		return sbx_err_sys(err, -r, "empty dir");
	}
	return 0;
}

static int remove_tree_at(int dirfd, const char *name, struct sbx_err *err);

int fs_remove_tree(int dirfd, const char *name, struct sbx_err *err)
{
	const char *slash = strrchr(name, '/');
	if (!slash || !slash[1])
		return remove_tree_at(dirfd, name, err);
	/* "a/b/name": the way to name's directory is the caller's, as given
	 * (an absolute path of the state dir may cross mounts and links);
	 * from there on nothing is followed */
	char *parent =
	    slash == name ? strdup("/") : strndup(name, (size_t)(slash - name));
	if (!parent)
		return sbx_err_set(err, ENOMEM, "out of memory");
	int pfd = openat(dirfd, parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(parent);
	if (pfd < 0) {
		if (errno == ENOENT)
			return 0;
		int r =
		    sbx_err_sys(err, errno, "open the directory of %s", name);
		errno = -r;
		return r;
	}
	int r = remove_tree_at(pfd, slash + 1, err);
	int e = errno;
	close(pfd);
	errno = e;
	return r;
}

static int remove_tree_at(int dirfd, const char *name, struct sbx_err *err)
{
	int r;
	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM) {
		r = sbx_err_sys(err, errno, "unlink %s", name);
		goto out;
	}
	int e0 = errno;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0; /* an empty directory */
	int fd = rm_open_dir(dirfd, name);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		/* EPERM above, and not a directory: an immutable file */
		r = sbx_err_sys(err, errno == ENOTDIR ? e0 : errno, "open %s",
		                name);
		goto out;
	}
	r = rm_contents(fd);
	close(fd);
	if (r < 0)
		r = sbx_err_sys(err, -r, "remove %s", name);
	else if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = sbx_err_sys(err, errno, "rmdir %s", name);
out:
	if (r < 0)
		errno = -r; /* for callers without an sbx_err */
	return r;
}

static int copy_file(int srcdir, int dstdir, const char *name,
                     const struct stat *st, struct sbx_err *err)
{
	/* A hard link costs nothing and is safe here: only world-readable
	 * files are copied, the copy is a read-only lower layer, and package
	 * managers replace files by rename, never in place. Across
	 * filesystems, copy. */
	unlinkat(dstdir, name, 0);
	if (linkat(srcdir, name, dstdir, name, 0) == 0)
		return 0;
	_cleanup_close_ int in =
	    openat(srcdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return 0; /* vanished or unreadable: skip */
	_cleanup_close_ int out = openat(
	    dstdir, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
	    st->st_mode & 07777);
	if (out < 0)
		return sbx_err_sys(err, errno, "create %s", name);
	off_t left = st->st_size;
	while (left > 0) {
		ssize_t n = sendfile(out, in, NULL, (size_t)left);
		if (n <= 0)
			break; /* file shrank under us: keep what we have */
		left -= n;
	}
	if (fchown(out, st->st_uid, st->st_gid) < 0 ||
	    fchmod(out, st->st_mode & 07777) < 0)
		return sbx_err_sys(err, errno, "chown %s", name);
	return 0;
}

int fs_copy_entry(int srcdir, int dstdir, const char *n, struct sbx_err *err)
{
	struct stat st;
	if (fstatat(srcdir, n, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t l = readlinkat(srcdir, n, target, sizeof(target) - 1);
		if (l < 0)
			return 0;
		target[l] = '\0';
		unlinkat(dstdir, n, 0);
		if (symlinkat(target, dstdir, n) < 0)
			return sbx_err_sys(err, errno, "symlink %s", n);
		return 0;
	}
	if (!(st.st_mode & S_IROTH))
		return 0; /* private to its owner on the host */
	if (S_ISREG(st.st_mode))
		return copy_file(srcdir, dstdir, n, &st, err);
	if (!S_ISDIR(st.st_mode) || !(st.st_mode & S_IXOTH))
		return 0; /* devices, fifos, sockets: never copied */
	if (mkdirat(dstdir, n, 0700) < 0 && errno != EEXIST)
		return sbx_err_sys(err, errno, "mkdir %s", n);
	_cleanup_close_ int s2 =
	    openat(srcdir, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int d2 =
	    openat(dstdir, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s2 < 0 || d2 < 0)
		return 0;
	int r = fs_copy_tree(s2, d2, err);
	if (r == 0 && (fchown(d2, st.st_uid, st.st_gid) < 0 ||
	               fchmod(d2, st.st_mode & 07777) < 0))
		r = sbx_err_sys(err, errno, "chown %s", n);
	return r;
}

int fs_copy_tree(int srcfd, int dstfd, struct sbx_err *err)
{
	int dfd = openat(srcfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sbx_err_sys(err, errno, "reopen dir");
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return sbx_err_sys(err, errno, "fdopendir");
	}
	int r = 0;
	struct dirent *e;
	while (r == 0 && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			r = fs_copy_entry(srcfd, dstfd, e->d_name, err);
	}
	closedir(d);
	return r;
}
