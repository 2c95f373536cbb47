#include "runtime/fsutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/cleanup.h"

int fs_write_file(int dirfd, const char *name, const void *data, size_t len,
		  mode_t mode, struct sbx_err *err)
{
	_cleanup_close_ int fd = openat(
		dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		mode);
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
		int next = openat(cur, part,
				  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
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

static int remove_children(int fd, struct sbx_err *err)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return sbx_err_sys(err, errno, "fdopendir");
	}
	int r = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		int rr = fs_remove_tree(dirfd(d), e->d_name, err);
		if (rr < 0 && r == 0)
			r = rr;
	}
	closedir(d);
	return r;
}

int fs_empty_dir(int dirfd, struct sbx_err *err)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, errno, "reopen dir");
	return remove_children(fd, err);
}

int fs_remove_tree(int dirfd, const char *name, struct sbx_err *err)
{
	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return sbx_err_sys(err, errno, "unlink %s", name);
	int fd = openat(dirfd, name,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		if (fd < 0)
			return sbx_err_sys(err, errno, "open %s", name);
	}
	int r = remove_children(fd, err);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && !r)
		r = sbx_err_sys(err, errno, "rmdir %s", name);
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
