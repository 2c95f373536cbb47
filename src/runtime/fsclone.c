/* fs_clone_tree: the plain store's stand-in for a btrfs snapshot. The tree
 * is a sandbox's overlay upper layer, shaped by sandboxed code: every entry
 * is opened relative to its directory's fd with O_NOFOLLOW, links are
 * copied as links, device nodes are made again (only overlayfs whiteouts,
 * 0/0, are expected; whatever else is there cannot be opened by the
 * sandbox anyway: its mounts are nodev), and the depth is bounded, so a
 * hostile tree costs time, never a walk outside it. Runs in a task
 * (task.h), never in the daemon's loop. */
#include "runtime/fsclone.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/cleanup.h"

#define MAX_DEPTH 1024

/* Files with more than one link: where their first copy went. */
struct link_seen {
	dev_t dev;
	ino_t ino;
	char *path; /* relative to the copy's root */
};

struct clone {
	int dst_root;
	uint64_t bytes;
	struct link_seen *links;
	size_t nlinks, caplinks;
	char path[PATH_MAX]; /* of the entry being copied, from the root */
	size_t plen;
	struct sbx_err *err;
};

static const char *link_find(struct clone *c, const struct stat *st)
{
	for (size_t i = 0; i < c->nlinks; i++)
		if (c->links[i].ino == st->st_ino &&
		    c->links[i].dev == st->st_dev)
			return c->links[i].path;
	return NULL;
}

static void link_add(struct clone *c, const struct stat *st)
{
	if (c->nlinks == c->caplinks) {
		size_t n = c->caplinks ? c->caplinks * 2 : 64;
		struct link_seen *l = realloc(c->links, n * sizeof(*l));
		if (!l)
			return; /* then it is copied again, not linked */
		c->links = l;
		c->caplinks = n;
	}
	char *p = strdup(c->path);
	if (p)
		c->links[c->nlinks++] = (struct link_seen){
		    .dev = st->st_dev, .ino = st->st_ino, .path = p};
}

/* Every extended attribute of in onto out (both open fds). */
static int copy_xattrs(int in, int out, struct clone *c)
{
	char names[65536], val[65536];
	ssize_t n = flistxattr(in, names, sizeof(names));
	if (n < 0)
		return errno == ENOTSUP
		           ? 0
		           : sbx_err_sys(c->err, errno, "list xattrs of %s",
		                         c->path);
	for (char *k = names; k < names + n; k += strlen(k) + 1) {
		ssize_t l = fgetxattr(in, k, val, sizeof(val));
		if (l < 0) {
			if (errno == ENODATA)
				continue;
			return sbx_err_sys(c->err, errno, "read xattr %s of %s",
			                   k, c->path);
		}
		if (fsetxattr(out, k, val, (size_t)l, 0) < 0)
			return sbx_err_sys(c->err, errno, "set xattr %s on %s",
			                   k, c->path);
	}
	return 0;
}

/* Owner, then attributes (a chown drops file capabilities), then mode (a
 * chown drops set-id bits too), then times: out is an open fd. */
static int finish(int in, int out, const struct stat *st, struct clone *c)
{
	struct timespec ts[2] = {st->st_atim, st->st_mtim};
	int r;
	if (fchown(out, st->st_uid, st->st_gid) < 0)
		return sbx_err_sys(c->err, errno, "chown %s", c->path);
	if ((r = copy_xattrs(in, out, c)) < 0)
		return r;
	if (fchmod(out, st->st_mode & 07777) < 0 || futimens(out, ts) < 0)
		return sbx_err_sys(c->err, errno, "chmod %s", c->path);
	return 0;
}

static int copy_data(int in, int out, const struct stat *st, struct clone *c)
{
	if (ioctl(out, FICLONE, in) == 0)
		return 0;
	off_t left = st->st_size;
	while (left > 0) {
		ssize_t n =
		    copy_file_range(in, NULL, out, NULL, (size_t)left, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sbx_err_sys(c->err, errno, "copy %s", c->path);
		if (n == 0)
			break; /* it shrank: the snapshot keeps what there was
			        */
		left -= n;
	}
	return 0;
}

static int clone_dir(int sfd, int dfd, int depth, struct clone *c);

static int clone_entry(int sdir, int ddir, const char *name, int depth,
                       struct clone *c)
{
	struct stat st;
	if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT
		           ? 0
		           : sbx_err_sys(c->err, errno, "stat %s", c->path);
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		const char *first = link_find(c, &st);
		if (first && linkat(c->dst_root, first, ddir, name, 0) == 0)
			return 0;
		link_add(c, &st);
	}
	if (S_ISREG(st.st_mode)) {
		_cleanup_close_ int in = openat(
		    sdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		_cleanup_close_ int out = openat(
		    ddir, name,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (in < 0 || out < 0)
			return sbx_err_sys(c->err, errno, "copy %s", c->path);
		int r = copy_data(in, out, &st, c);
		if (r == 0)
			r = finish(in, out, &st, c);
		c->bytes += (uint64_t)st.st_blocks * 512;
		return r;
	}
	if (S_ISDIR(st.st_mode)) {
		if (depth >= MAX_DEPTH)
			return sbx_err_set(c->err, ELOOP,
			                   "%s: deeper than %d levels", c->path,
			                   MAX_DEPTH);
		if (mkdirat(ddir, name, 0700) < 0)
			return sbx_err_sys(c->err, errno, "mkdir %s", c->path);
		_cleanup_close_ int in =
		    openat(sdir, name,
		           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		_cleanup_close_ int out =
		    openat(ddir, name,
		           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (in < 0 || out < 0)
			return sbx_err_sys(c->err, errno, "open %s", c->path);
		int r = clone_dir(in, out, depth + 1, c);
		return r < 0 ? r : finish(in, out, &st, c);
	}
	struct timespec ts[2] = {st.st_atim, st.st_mtim};
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t l = readlinkat(sdir, name, target, sizeof(target) - 1);
		if (l < 0)
			return sbx_err_sys(c->err, errno, "readlink %s",
			                   c->path);
		target[l] = '\0';
		if (symlinkat(target, ddir, name) < 0)
			return sbx_err_sys(c->err, errno, "symlink %s",
			                   c->path);
	} else if (mknodat(ddir, name, st.st_mode & (S_IFMT | 0600),
	                   st.st_rdev) < 0) {
		return sbx_err_sys(c->err, errno, "mknod %s", c->path);
	}
	if (fchownat(ddir, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) <
	        0 ||
	    (!S_ISLNK(st.st_mode) &&
	     fchmodat(ddir, name, st.st_mode & 07777, 0) < 0) ||
	    utimensat(ddir, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_err_sys(c->err, errno, "attributes of %s", c->path);
	return 0;
}

static int clone_dir(int sfd, int dfd, int depth, struct clone *c)
{
	int fd = openat(sfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return sbx_err_sys(c->err, e, "open %s", c->path);
	}
	int r = 0;
	size_t at = c->plen;
	struct dirent *e;
	while (r == 0 && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		size_t nl = strlen(e->d_name);
		if (at + 1 + nl + 1 > sizeof(c->path)) {
			r = sbx_err_set(c->err, ENAMETOOLONG,
			                "%s/%s: path too long", c->path,
			                e->d_name);
			break;
		}
		c->path[at] = '/';
		memcpy(c->path + at + 1, e->d_name, nl + 1);
		c->plen = at + 1 + nl;
		r = clone_entry(sfd, dfd, e->d_name, depth, c);
		c->path[at] = '\0';
		c->plen = at;
	}
	closedir(d);
	return r;
}

int fs_clone_tree(int srcfd, int dstdir, const char *name, uint64_t *bytes,
                  struct sbx_err *err)
{
	struct clone c = {.err = err};
	struct stat st;
	int r;
	if (fstat(srcfd, &st) < 0)
		return sbx_err_sys(err, errno, "stat the tree to copy");
	if (mkdirat(dstdir, name, 0700) < 0)
		return sbx_err_sys(err, errno, "mkdir %s", name);
	c.dst_root = openat(dstdir, name,
	                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c.dst_root < 0)
		return sbx_err_sys(err, errno, "open %s", name);
	snprintf(c.path, sizeof(c.path), ".");
	c.plen = 1;
	r = clone_dir(srcfd, c.dst_root, 0, &c);
	if (r == 0)
		r = finish(srcfd, c.dst_root, &st, &c);
	close(c.dst_root);
	for (size_t i = 0; i < c.nlinks; i++)
		free(c.links[i].path);
	free(c.links);
	*bytes = c.bytes;
	return r;
}
