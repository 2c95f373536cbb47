/* Unpacking a tar archive into a directory without ever leaving it (see
 * layer.h). Paths are split into components and walked with one openat()
 * per component, O_NOFOLLOW, so a symlink (planted by an earlier entry)
 * can never redirect a later one; ".." and absolute paths are refused
 * before anything is opened. Sizes come from the headers and are checked
 * against the limits before a file is made. */
#include "runtime/layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/cleanup.h"
#include "runtime/fsutil.h"

#define MAX_DEPTH 256
#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"

struct path {
	char buf[4096];
	const char *comp[MAX_DEPTH];
	size_t n;
};

/* Split p into components: "" and "." dropped, ".." and absolute paths
 * refused (they could only mean outside). */
static int path_split(const char *p, struct path *out, struct sbx_err *err)
{
	if (!p || !*p)
		return sbx_err_set(err, EINVAL, "an entry without a name");
	if (p[0] == '/')
		return sbx_err_set(err, EPERM, "%.200s: an absolute path", p);
	if (strlen(p) >= sizeof(out->buf))
		return sbx_err_set(err, ENAMETOOLONG,
		                   "%.200s...: path too long", p);
	strcpy(out->buf, p);
	out->n = 0;
	char *save = NULL;
	for (char *c = strtok_r(out->buf, "/", &save); c;
	     c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, ".."))
			return sbx_err_set(err, EPERM,
			                   "%.200s: a path that leaves the "
			                   "archive's root (..)",
			                   p);
		if (out->n == MAX_DEPTH)
			return sbx_err_set(err, ENAMETOOLONG,
			                   "%.200s: too deep", p);
		out->comp[out->n++] = c;
	}
	return 0;
}

/* The directory holding the last component, walked from root one
 * component at a time; missing ones are made (0755, root's) when create.
 * A component that is a symlink or not a directory fails. */
static int open_parent(int root, const struct path *p, bool create,
                       const char *name, struct sbx_err *err)
{
	int fd = fcntl(root, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return sbx_err_sys(err, errno, "dup");
	for (size_t i = 0; i + 1 < p->n; i++) {
		int nfd =
		    openat(fd, p->comp[i],
		           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT && create) {
			if (mkdirat(fd, p->comp[i], 0755) < 0 &&
			    errno != EEXIST) {
				int e = errno;
				close(fd);
				return sbx_err_sys(err, e, "%.200s: mkdir",
				                   name);
			}
			nfd = openat(fd, p->comp[i],
			             O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			                 O_CLOEXEC);
		}
		int e = errno;
		close(fd);
		if (nfd < 0) {
			if (e == ELOOP || e == ENOTDIR)
				return sbx_err_set(err, EPERM,
				                   "%.200s: a parent is a "
				                   "symlink or not a directory",
				                   name);
			return sbx_err_sys(err, e, "%.200s", name);
		}
		fd = nfd;
	}
	return fd;
}

/* Make room for a new entry: an old one of the same name goes, but a
 * directory stays for a directory (its contents are kept). */
static int clear_name(int dfd, const char *base, bool new_is_dir,
                      struct sbx_err *err)
{
	struct stat st;
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0
		                       : sbx_err_sys(err, errno, "%s", base);
	if (S_ISDIR(st.st_mode)) {
		if (new_is_dir)
			return 1;
		return fs_remove_tree(dfd, base, err);
	}
	if (unlinkat(dfd, base, 0) < 0)
		return sbx_err_sys(err, errno, "unlink %s", base);
	return 0;
}

static unsigned clamp_id(int64_t id)
{
	return id < 0 || id > 65535 ? 65534u : (unsigned)id;
}

static int write_data(struct archive *a, int fd, int64_t size, const char *name,
                      struct sbx_err *err)
{
	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int r = archive_read_data_block(a, &buf, &len, &off);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK)
			return sbx_err_set(err, EIO, "%.200s: %s", name,
			                   archive_error_string(a));
		if (off < 0 || (uint64_t)off + len > (uint64_t)size)
			return sbx_err_set(err, EINVAL,
			                   "%.200s: data past the file's size",
			                   name);
		const char *p = buf;
		while (len) {
			ssize_t n = pwrite(fd, p, len, off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return sbx_err_sys(err, n < 0 ? errno : EIO,
				                   "%.200s: write", name);
			p += n;
			off += n;
			len -= (size_t)n;
		}
	}
	if (ftruncate(fd, size) < 0)
		return sbx_err_sys(err, errno, "%.200s: truncate", name);
	return 0;
}

static void copy_xattrs(struct archive_entry *e, int dfd, const char *base)
{
	const char *xname;
	const void *val;
	size_t len;
	if (archive_entry_xattr_reset(e) == 0)
		return;
	_cleanup_close_ int fd =
	    openat(dfd, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	while (archive_entry_xattr_next(e, &xname, &val, &len) == ARCHIVE_OK) {
		/* pax SCHILY.xattr.* names come through as given */
		if (strncmp(xname, "user.", 5))
			continue;
		lsetxattr(proc, xname, val, len, 0);
	}
}

static int one_entry(struct archive *a, struct archive_entry *e, int root,
                     enum layer_kind kind, const struct layer_limits *lim,
                     struct layer_stats *st, struct sbx_err *err)
{
	const char *name = archive_entry_pathname(e);
	struct path p;
	int r;
	if ((r = path_split(name, &p, err)))
		return r;
	if (p.n == 0)
		return 0; /* the root itself ("./") */
	if (++st->entries > lim->max_entries)
		return sbx_err_set(err, EFBIG, "more than %llu entries",
		                   (unsigned long long)lim->max_entries);
	const char *base = p.comp[p.n - 1];
	_cleanup_close_ int dfd = open_parent(root, &p, true, name, err);
	if (dfd < 0)
		return dfd;
	bool oci = kind == LAYER_OCI;

	if (oci && !strncmp(base, WH_PREFIX, strlen(WH_PREFIX))) {
		if (!strcmp(base, WH_OPAQUE)) {
			if (fsetxattr(dfd, "trusted.overlay.opaque", "y", 1,
			              0) < 0)
				return sbx_err_sys(
				    err, errno, "%.200s: opaque xattr", name);
			return 0;
		}
		const char *target = base + strlen(WH_PREFIX);
		if (!*target || !strcmp(target, ".") || !strcmp(target, ".."))
			return sbx_err_set(err, EINVAL,
			                   "%.200s: a bad whiteout", name);
		if ((r = clear_name(dfd, target, false, err)) < 0)
			return r;
		if (mknodat(dfd, target, S_IFCHR | 0600, makedev(0, 0)) < 0)
			return sbx_err_sys(err, errno, "%.200s: whiteout",
			                   name);
		return 0;
	}

	const char *hard = archive_entry_hardlink(e);
	mode_t type = archive_entry_filetype(e);
	mode_t mode = archive_entry_perm(e) & (oci ? 07777 : 0777);
	if (hard) {
		struct path t;
		if ((r = path_split(hard, &t, err)))
			return r;
		if (t.n == 0)
			return sbx_err_set(err, EPERM,
			                   "%.200s: a link to the root", name);
		_cleanup_close_ int tfd =
		    open_parent(root, &t, false, hard, err);
		if (tfd < 0)
			return tfd;
		if ((r = clear_name(dfd, base, false, err)) < 0)
			return r;
		if (linkat(tfd, t.comp[t.n - 1], dfd, base, 0) < 0)
			return sbx_err_sys(err, errno, "%.200s: link to %.200s",
			                   name, hard);
		return 0;
	}
	if ((r = clear_name(dfd, base, type == AE_IFDIR, err)) < 0)
		return r;
	switch (type) {
	case AE_IFDIR:
		if (r == 0 && mkdirat(dfd, base, 0700) < 0)
			return sbx_err_sys(err, errno, "%.200s: mkdir", name);
		break;
	case AE_IFREG: {
		int64_t size = archive_entry_size(e);
		if (size < 0 || (uint64_t)size > lim->max_bytes ||
		    st->bytes + (uint64_t)size > lim->max_bytes)
			return sbx_err_set(err, EFBIG,
			                   "%.200s: the files' sizes pass the "
			                   "limit of %llu bytes",
			                   name,
			                   (unsigned long long)lim->max_bytes);
		st->bytes += (uint64_t)size;
		_cleanup_close_ int fd = openat(
		    dfd, base,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return sbx_err_sys(err, errno, "%.200s: create", name);
		if ((r = write_data(a, fd, size, name, err)))
			return r;
		break;
	}
	case AE_IFLNK: {
		const char *target = archive_entry_symlink(e);
		if (!target || !*target)
			return sbx_err_set(err, EINVAL,
			                   "%.200s: an empty symlink", name);
		if (symlinkat(target, dfd, base) < 0)
			return sbx_err_sys(err, errno, "%.200s: symlink", name);
		break;
	}
	case AE_IFIFO:
		if (!oci) {
			st->skipped++;
			return 0;
		}
		if (mknodat(dfd, base, S_IFIFO | 0600, 0) < 0)
			return sbx_err_sys(err, errno, "%.200s: mkfifo", name);
		break;
	default: /* character and block devices, sockets */
		st->skipped++;
		return 0;
	}
	if (oci) {
		/* owner first: chown clears setuid and setgid */
		if (fchownat(dfd, base, clamp_id(archive_entry_uid(e)),
		             clamp_id(archive_entry_gid(e)),
		             AT_SYMLINK_NOFOLLOW) < 0)
			return sbx_err_sys(err, errno, "%.200s: chown", name);
		copy_xattrs(e, dfd, base);
	}
	if (type != AE_IFLNK && fchmodat(dfd, base, mode, 0) < 0)
		return sbx_err_sys(err, errno, "%.200s: chmod", name);
	if (type != AE_IFDIR) {
		struct timespec ts[2] = {
		    {.tv_sec = archive_entry_mtime(e),
		     .tv_nsec = archive_entry_mtime_nsec(e)},
		    {.tv_sec = archive_entry_mtime(e),
		     .tv_nsec = archive_entry_mtime_nsec(e)}};
		utimensat(dfd, base, ts, AT_SYMLINK_NOFOLLOW);
	}
	return 0;
}

int layer_unpack(int fd, int dirfd, enum layer_kind kind,
                 const struct layer_limits *lim, struct layer_stats *st,
                 struct sbx_err *err)
{
	struct archive *a = archive_read_new();
	if (!a)
		return sbx_err_set(err, ENOMEM, "out of memory");
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	archive_read_support_format_empty(a);
	memset(st, 0, sizeof(*st));
	int r = 0;
	if (archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK) {
		r = sbx_err_set(err, EINVAL, "not an archive: %s",
		                archive_error_string(a));
		goto out;
	}
	for (;;) {
		struct archive_entry *e;
		int ar = archive_read_next_header(a, &e);
		if (ar == ARCHIVE_EOF)
			break;
		if (ar != ARCHIVE_OK && ar != ARCHIVE_WARN) {
			r = sbx_err_set(err, EINVAL, "a bad archive: %s",
			                archive_error_string(a));
			break;
		}
		if ((r = one_entry(a, e, dirfd, kind, lim, st, err)))
			break;
	}
out:
	archive_read_free(a);
	return r;
}
