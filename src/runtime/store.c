#include "runtime/store.h"

#include <dirent.h>
#include <endian.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/loop.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/cleanup.h"
#include "runtime/fsclone.h"
#include "runtime/fsutil.h"

#define TMP_PREFIX ".tmp-"

static int run_mkfs(const char *image, struct sbx_err *err)
{
	pid_t pid = fork();
	if (pid < 0)
		return sbx_err_sys(err, errno, "fork mkfs.btrfs");
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
		}
		/* metadata single: the image is one file, DUP buys nothing */
		execlp("mkfs.btrfs", "mkfs.btrfs", "-q", "-f", "-m", "single",
		       "-L", "sandboxd-store", image, (char *)NULL);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return sbx_err_set(err, EIO,
		                   "mkfs.btrfs %s failed (is btrfs-progs "
		                   "installed?)",
		                   image);
	return 0;
}

/* A loop device for image that goes away with its last user: returns its
 * open fd, which must stay open until the mount holds the device (with
 * autoclear, closing it first detaches the device at once). */
static int loop_attach(const char *image, char *dev, size_t cap,
                       struct sbx_err *err)
{
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	_cleanup_close_ int file = open(image, O_RDWR | O_CLOEXEC);
	if (ctl < 0 || file < 0)
		return sbx_err_sys(err, errno, "open loop-control or %s",
		                   image);
	for (int tries = 0; tries < 16; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			return sbx_err_sys(err, errno, "LOOP_CTL_GET_FREE");
		snprintf(dev, cap, "/dev/loop%d", n);
		_cleanup_close_ int lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0)
			return sbx_err_sys(err, errno, "open %s", dev);
		struct loop_config cfg = {
		    .fd = (uint32_t)file,
		    .info = {.lo_flags = LO_FLAGS_AUTOCLEAR}};
		if (ioctl(lfd, LOOP_CONFIGURE, &cfg) == 0)
			return steal_fd(&lfd);
		if (errno != EBUSY) /* EBUSY: someone took it first */
			return sbx_err_sys(err, errno, "LOOP_CONFIGURE %s",
			                   dev);
	}
	return sbx_err_set(err, EBUSY, "no free loop device");
}

/* The store's loop device does direct I/O on the image, whether this
 * daemon attached it or took over the mount of one that was killed (and
 * may have attached it buffered). Buffered, every page btrfs writes back
 * is copied again into the page cache of store.img (a kworker's memcpy,
 * and the host holds the data twice), and that writeback competes with the
 * next write for the CPU: a 256 MiB PUT went from 297-449 to 604-646 MB/s
 * (p50 of 5, bench/ANALYSIS.md). Best effort: where the image's file
 * system refuses O_DIRECT, the device stays buffered and works as well. */
static void loop_direct_io(const char *dir)
{
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct btrfs_ioctl_fs_info_args fs = {0};
	if (dfd < 0 || ioctl(dfd, BTRFS_IOC_FS_INFO, &fs) < 0 ||
	    fs.num_devices != 1)
		return;
	struct btrfs_ioctl_dev_info_args dev = {.devid = fs.max_id};
	if (ioctl(dfd, BTRFS_IOC_DEV_INFO, &dev) < 0 ||
	    strncmp((const char *)dev.path, "/dev/loop", 9) != 0)
		return;
	_cleanup_close_ int lfd =
	    open((const char *)dev.path, O_RDWR | O_CLOEXEC);
	if (lfd >= 0)
		ioctl(lfd, LOOP_SET_DIRECT_IO, 1UL);
}

static bool is_btrfs(const char *dir)
{
	struct statfs sf;
	return statfs(dir, &sf) == 0 && sf.f_type == BTRFS_SUPER_MAGIC;
}

static int enable_quotas(const char *dir, struct sbx_err *err)
{
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct btrfs_ioctl_quota_ctl_args q = {.cmd = BTRFS_QUOTA_CTL_ENABLE};
	if (dfd < 0 || ioctl(dfd, BTRFS_IOC_QUOTA_CTL, &q) < 0)
		return sbx_err_sys(err, errno, "enable quotas on %s", dir);
	return 0;
}

static bool dir_empty(const char *dir)
{
	DIR *d = opendir(dir);
	bool empty = true;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			empty = false;
	if (d)
		closedir(d);
	return empty;
}

/* Remove name below dfd: a subvolume at once; in a plain directory
 * store, by a tree walk. */
static int remove_at(struct store *s, int dfd, const char *name,
                     struct sbx_err *err)
{
	if (!s->quotas)
		return fs_remove_tree(dfd, name, err);
	/* never a walk here, on the daemon's loop: what is not a subvolume
	 * (made before the store existed) is the caller's to walk in the
	 * background (runtime.c) */
	struct btrfs_ioctl_vol_args va = {0};
	snprintf(va.name, sizeof(va.name), "%s", name);
	if (ioctl(dfd, BTRFS_IOC_SNAP_DESTROY, &va) == 0 || errno == ENOENT)
		return 0;
	return sbx_err_sys(err, errno, "delete subvolume %s", name);
}

/* What a crash left half made: every TMP_PREFIX name (see store.h). */
static void remove_tmp(struct store *s, int dfd)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)))
			remove_at(s, dfd, e->d_name, NULL);
	closedir(d);
}

/* The snapshot dir, and no leftovers of a crash. */
static int store_prepare(struct store *s, struct sbx_err *err)
{
	_cleanup_close_ int dfd =
	    open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sbx_err_sys(err, errno, "open %s", s->dir);
	if (mkdirat(dfd, STORE_SNAPSHOTS, 0700) < 0 && errno != EEXIST)
		return sbx_err_sys(err, errno, "mkdir %s/%s", s->dir,
		                   STORE_SNAPSHOTS);
	_cleanup_close_ int sfd =
	    openat(dfd, STORE_SNAPSHOTS,
	           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return sbx_err_sys(err, errno, "open %s/%s", s->dir,
		                   STORE_SNAPSHOTS);
	remove_tmp(s, dfd);
	remove_tmp(s, sfd);
	return 0;
}

int store_open(const char *state_dir, uint64_t size_bytes, struct store **out,
               struct sbx_err *err)
{
	struct store *s = calloc(1, sizeof(*s));
	char image[4200], dev[32];
	int r = 0;
	if (!s || asprintf(&s->dir, "%s/sandboxes", state_dir) < 0) {
		free(s);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	snprintf(image, sizeof(image), "%s/store.img", state_dir);
	if (mkdir(s->dir, 0700) < 0 && errno != EEXIST) {
		r = sbx_err_sys(err, errno, "mkdir %s", s->dir);
		goto fail;
	}
	if (is_btrfs(s->dir)) { /* a previous daemon's mount, still there */
		s->quotas = true;
		s->mounted_by_us =
		    true; /* ours all the same: unmounted at exit */
		goto ready;
	}
	bool have_image = access(image, F_OK) == 0;
	if (!size_bytes || (!have_image && !dir_empty(s->dir))) {
		/* plain directories, no limits */
		if ((r = store_prepare(s, err)) < 0)
			goto fail;
		*out = s;
		return 0;
	}
	if (!have_image) {
		_cleanup_close_ int fd =
		    open(image, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 || ftruncate(fd, (off_t)size_bytes) < 0) {
			r = sbx_err_sys(err, errno, "create %s", image);
			unlink(image);
			goto fail;
		}
		if ((r = run_mkfs(image, err)) < 0) {
			unlink(image);
			goto fail;
		}
	}
	int lfd = loop_attach(image, dev, sizeof(dev), err);
	if (lfd < 0) {
		r = lfd;
		goto fail;
	}
	/* commit=5: qgroup usage (store_usage) lags writes by at most that */
	r = mount(dev, s->dir, "btrfs", MS_NOSUID | MS_NODEV | MS_NOATIME,
	          "commit=5");
	if (r < 0)
		r = sbx_err_sys(err, errno, "mount %s on %s", dev, s->dir);
	close(lfd);
	if (r < 0)
		goto fail;
	s->mounted_by_us = true;
	s->quotas = true;
ready:
	loop_direct_io(s->dir);
	if ((r = enable_quotas(s->dir, err)) < 0 ||
	    (r = store_prepare(s, err)) < 0)
		goto fail;
	chmod(s->dir, 0700);
	*out = s;
	return 0;
fail:
	store_close(s);
	return r;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	/* the loop device goes with the mount (autoclear) */
	if (s->mounted_by_us)
		umount2(s->dir, MNT_DETACH);
	free(s->dir);
	free(s);
}

/* A qgroup_inherit naming one group (the size the ioctl is told). */
struct inherit1 {
	struct btrfs_qgroup_inherit h;
	__u64 group;
};

int store_create(struct store *s, const char *name, uint64_t limit_bytes,
                 uint64_t group, struct sbx_err *err)
{
	_cleanup_close_ int dfd =
	    open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sbx_err_sys(err, errno, "open %s", s->dir);
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	if (!s->quotas) {
		if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST)
			return sbx_err_sys(err, errno, "mkdir %s", name);
		return 0;
	}
	struct inherit1 in = {.h = {.num_qgroups = 1}, .group = group};
	struct btrfs_ioctl_vol_args_v2 va = {0};
	snprintf(va.name, sizeof(va.name), "%s", name);
	if (group) {
		va.flags = BTRFS_SUBVOL_QGROUP_INHERIT;
		va.size = sizeof(in);
		va.qgroup_inherit = &in.h;
	}
	if (ioctl(dfd, BTRFS_IOC_SUBVOL_CREATE_V2, &va) < 0)
		return sbx_err_sys(err, errno, "create subvolume %s", name);
	_cleanup_close_ int sfd =
	    openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0 || fchmod(sfd, 0700) < 0)
		return sbx_err_sys(err, errno, "open subvolume %s", name);
	if (limit_bytes) {
		/* qgroupid 0: the qgroup of the subvolume sfd is in */
		struct btrfs_ioctl_qgroup_limit_args la = {
		    .qgroupid = 0,
		    .lim = {.flags = BTRFS_QGROUP_LIMIT_MAX_RFER,
		            .max_rfer = limit_bytes}};
		if (ioctl(sfd, BTRFS_IOC_QGROUP_LIMIT, &la) < 0)
			return sbx_err_sys(err, errno, "limit subvolume %s",
			                   name);
	}
	return 0;
}

/* The directory holding rel ("<name>" or "<sub>/<name>") and its last
 * part. */
static int open_parent(struct store *s, const char *rel, const char **leaf,
                       struct sbx_err *err)
{
	_cleanup_close_ int dfd =
	    open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sbx_err_sys(err, errno, "open %s", s->dir);
	const char *slash = strrchr(rel, '/');
	if (!slash) {
		*leaf = rel;
		return steal_fd(&dfd);
	}
	char sub[256];
	if ((size_t)(slash - rel) >= sizeof(sub) || !slash[1])
		return sbx_err_set(err, EINVAL, "store path %s", rel);
	memcpy(sub, rel, (size_t)(slash - rel));
	sub[slash - rel] = '\0';
	*leaf = slash + 1;
	int fd =
	    openat(dfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, errno, "open %s/%s", s->dir, sub);
	return fd;
}

int store_remove(struct store *s, const char *name, struct sbx_err *err)
{
	const char *leaf;
	_cleanup_close_ int dfd = open_parent(s, name, &leaf, err);
	if (dfd < 0)
		return dfd;
	return remove_at(s, dfd, leaf, err);
}

uint64_t store_group_of(const char *tenant)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *p = tenant; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	h &= (1ull << 48) - 1;
	return (1ull << 48) | (h ? h : 1); /* level 1 */
}

int store_group_ensure(struct store *s, uint64_t group, uint64_t limit_bytes,
                       struct sbx_err *err)
{
	if (!s->quotas)
		return 0;
	_cleanup_close_ int dfd =
	    open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sbx_err_sys(err, errno, "open %s", s->dir);
	struct btrfs_ioctl_qgroup_create_args qc = {.create = 1,
	                                            .qgroupid = group};
	if (ioctl(dfd, BTRFS_IOC_QGROUP_CREATE, &qc) < 0 && errno != EEXIST)
		return sbx_err_sys(
		    err, errno, "create qgroup 1/%llu",
		    (unsigned long long)(group & ((1ull << 48) - 1)));
	/* (re)set every time: the operator may have changed it */
	struct btrfs_ioctl_qgroup_limit_args la = {
	    .qgroupid = group,
	    .lim = {.flags = BTRFS_QGROUP_LIMIT_MAX_RFER,
	            .max_rfer = limit_bytes ? limit_bytes : UINT64_MAX}};
	if (ioctl(dfd, BTRFS_IOC_QGROUP_LIMIT, &la) < 0)
		return sbx_err_sys(
		    err, errno, "limit qgroup 1/%llu",
		    (unsigned long long)(group & ((1ull << 48) - 1)));
	return 0;
}

/* The info item of qgroup id (rfer: what its members reference), or
 * -ENOENT before the store's next commit made one. */
static int qgroup_rfer(int dfd, uint64_t id, uint64_t *bytes)
{
	struct btrfs_ioctl_search_args sa = {0};
	struct btrfs_ioctl_search_key *k = &sa.key;
	k->tree_id = BTRFS_QUOTA_TREE_OBJECTID;
	k->min_type = k->max_type = BTRFS_QGROUP_INFO_KEY;
	k->min_offset = k->max_offset = id;
	k->max_objectid = 0;
	k->max_transid = UINT64_MAX;
	k->nr_items = 1;
	if (ioctl(dfd, BTRFS_IOC_TREE_SEARCH, &sa) < 0)
		return -errno;
	if (k->nr_items < 1)
		return -ENOENT;
	struct btrfs_ioctl_search_header sh;
	struct btrfs_qgroup_info_item info;
	memcpy(&sh, sa.buf, sizeof(sh));
	if (sh.type != BTRFS_QGROUP_INFO_KEY || sh.len < sizeof(info))
		return -EIO;
	memcpy(&info, sa.buf + sizeof(sh), sizeof(info));
	*bytes = le64toh(info.rfer);
	return 0;
}

int store_group_usage(struct store *s, uint64_t group, uint64_t *bytes)
{
	if (!s->quotas)
		return -EOPNOTSUPP;
	_cleanup_close_ int dfd =
	    open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	int r = qgroup_rfer(dfd, group, bytes);
	if (r == -ENOENT) {
		*bytes = 0;
		return 0;
	}
	return r;
}

/* The id of the subvolume fd is in. */
static int subvol_id(int fd, uint64_t *id)
{
	struct btrfs_ioctl_ino_lookup_args il = {.objectid =
	                                             BTRFS_FIRST_FREE_OBJECTID};
	if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &il) < 0)
		return -errno;
	*id = il.treeid;
	return 0;
}

/* Whether the kernel says the qgroup numbers need a rescan. */
static bool quota_inconsistent(int dfd)
{
	struct btrfs_ioctl_search_args sa = {0};
	struct btrfs_ioctl_search_key *k = &sa.key;
	k->tree_id = BTRFS_QUOTA_TREE_OBJECTID;
	k->min_type = k->max_type = BTRFS_QGROUP_STATUS_KEY;
	k->max_objectid = k->max_offset = k->max_transid = UINT64_MAX;
	k->nr_items = 1;
	struct btrfs_ioctl_search_header sh;
	struct btrfs_qgroup_status_item st;
	if (ioctl(dfd, BTRFS_IOC_TREE_SEARCH, &sa) < 0 || k->nr_items < 1)
		return false;
	memcpy(&sh, sa.buf, sizeof(sh));
	if (sh.len < sizeof(st))
		return false;
	memcpy(&st, sa.buf + sizeof(sh), sizeof(st));
	return le64toh(st.flags) & BTRFS_QGROUP_STATUS_FLAG_INCONSISTENT;
}

int store_group_join(struct store *s, const char *name, uint64_t group,
                     struct sbx_err *err)
{
	if (!s->quotas || !group)
		return 0;
	_cleanup_close_ int dfd =
	    open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sbx_err_sys(err, errno, "open %s", s->dir);
	_cleanup_close_ int sfd =
	    openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	uint64_t id;
	if (sfd < 0 || subvol_id(sfd, &id) < 0)
		return sbx_err_sys(err, errno, "subvolume %s", name);
	struct btrfs_ioctl_qgroup_assign_args qa = {
	    .assign = 1, .src = id, .dst = group};
	int r = ioctl(dfd, BTRFS_IOC_QGROUP_ASSIGN, &qa);
	if (r < 0 && errno != EEXIST)
		return sbx_err_sys(err, errno, "add %s to its tenant's qgroup",
		                   name);
	/* The kernel adds a member without a rescan only when it shares
	 * nothing yet; else its numbers need one (asynchronous, once). */
	if (r >= 0 && quota_inconsistent(dfd)) {
		struct btrfs_ioctl_quota_rescan_args ra = {0};
		if (ioctl(dfd, BTRFS_IOC_QUOTA_RESCAN, &ra) < 0 &&
		    errno != EINPROGRESS)
			return sbx_err_sys(err, errno, "qgroup rescan");
	}
	return 0;
}

/* Rename tmp to leaf in dfd: in one step over an existing leaf when
 * replace (the old tree then goes), else only if leaf does not exist. */
static int put_in_place(struct store *s, int dfd, const char *tmp,
                        const char *leaf, bool replace, struct sbx_err *err)
{
	if (replace) {
		if (renameat2(dfd, tmp, dfd, leaf, RENAME_EXCHANGE) == 0) {
			/* tmp is the old tree now; a crash before it goes
			 * leaves it to store_open */
			struct sbx_err rerr = {0};
			if (remove_at(s, dfd, tmp, &rerr) < 0)
				fprintf(stderr,
				        "store: removing the replaced "
				        "%s: %s\n",
				        leaf, rerr.msg);
			return 0;
		}
		if (errno != ENOENT)
			return sbx_err_sys(err, errno, "replace %s", leaf);
	}
	if (renameat2(dfd, tmp, dfd, leaf, RENAME_NOREPLACE) < 0)
		return sbx_err_sys(err, errno, "rename into %s", leaf);
	return 0;
}

int store_snapshot(struct store *s, const char *src, const char *dst,
                   unsigned flags, uint64_t group, uint64_t limit_bytes,
                   uint64_t *bytes, bool *copied, struct sbx_err *err)
{
	const char *leaf;
	char tmp[300];
	int r;
	_cleanup_close_ int top =
	    open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (top < 0)
		return sbx_err_sys(err, errno, "open %s", s->dir);
	_cleanup_close_ int sfd =
	    openat(top, src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return sbx_err_sys(err, errno, "open %s/%s", s->dir, src);
	_cleanup_close_ int pfd = open_parent(s, dst, &leaf, err);
	if (pfd < 0)
		return pfd;
	if (strlen(leaf) > 200)
		return sbx_err_set(err, ENAMETOOLONG, "store name %s", leaf);
	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%s", leaf);
	remove_at(s, pfd, tmp, NULL);
	*copied = !s->quotas;
	if (!s->quotas) {
		/* the plain store: a copy, as faithful as the snapshot */
		if ((r = fs_clone_tree(sfd, pfd, tmp, bytes, err)) < 0) {
			remove_at(s, pfd, tmp, NULL);
			return r;
		}
		r = put_in_place(s, pfd, tmp, leaf, flags & STORE_REPLACE, err);
		if (r < 0)
			remove_at(s, pfd, tmp, NULL);
		return r;
	}
	struct inherit1 in = {.h = {.num_qgroups = 1}, .group = group};
	struct btrfs_ioctl_vol_args_v2 va = {.fd = sfd};
	snprintf(va.name, sizeof(va.name), "%s", tmp);
	if (flags & STORE_READONLY)
		va.flags |= BTRFS_SUBVOL_RDONLY;
	if (group) {
		va.flags |= BTRFS_SUBVOL_QGROUP_INHERIT;
		va.size = sizeof(in);
		va.qgroup_inherit = &in.h;
	}
	/* flushes src's unwritten data first: the slow part, if any */
	if (ioctl(pfd, BTRFS_IOC_SNAP_CREATE_V2, &va) < 0)
		return sbx_err_sys(err, errno, "snapshot %s", src);
	_cleanup_close_ int nfd =
	    openat(pfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	uint64_t id = 0;
	if (nfd < 0 || subvol_id(nfd, &id) < 0) {
		r = sbx_err_sys(err, errno, "open snapshot of %s", src);
		goto fail;
	}
	if (!(flags & STORE_READONLY)) {
		struct btrfs_ioctl_qgroup_limit_args la = {
		    .qgroupid = 0,
		    .lim = {.flags = BTRFS_QGROUP_LIMIT_MAX_RFER,
		            .max_rfer =
		                limit_bytes ? limit_bytes : UINT64_MAX}};
		if (ioctl(nfd, BTRFS_IOC_QGROUP_LIMIT, &la) < 0) {
			r = sbx_err_sys(err, errno, "limit snapshot of %s",
			                src);
			goto fail;
		}
	}
	*bytes = 0;
	qgroup_rfer(top, id, bytes); /* inherited from src at creation */
	if ((r = put_in_place(s, pfd, tmp, leaf, flags & STORE_REPLACE, err)) <
	    0)
		goto fail;
	return 0;
fail:
	remove_at(s, pfd, tmp, NULL);
	return r;
}

void store_cleanup(struct store *s, const char *dst)
{
	const char *leaf;
	char tmp[300];
	_cleanup_close_ int pfd = open_parent(s, dst, &leaf, NULL);
	if (pfd < 0)
		return;
	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%s", leaf);
	remove_at(s, pfd, tmp, NULL);
}

int store_list(struct store *s, const char *sub,
               int (*cb)(const char *name, void *ctx), void *ctx)
{
	_cleanup_close_ int dfd =
	    open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	int fd = openat(dfd, sub ? sub : ".",
	                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	int r = 0;
	struct dirent *e;
	while (r == 0 && (e = readdir(d)))
		if (e->d_name[0] != '.') /* ours are never hidden names */
			r = cb(e->d_name, ctx);
	closedir(d);
	return r;
}

int store_usage(struct store *s, const char *name, uint64_t *bytes)
{
	if (!s->quotas)
		return -EOPNOTSUPP;
	_cleanup_close_ int dfd =
	    open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	_cleanup_close_ int sfd =
	    openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return -errno;
	/* the subvolume's id is the tree its root directory lives in; its
	 * level-0 qgroup has that id */
	uint64_t id;
	int r = subvol_id(sfd, &id);
	if (r < 0)
		return r;
	r = qgroup_rfer(dfd, id, bytes);
	if (r == -ENOENT) {
		/* a subvolume younger than the store's last commit */
		*bytes = 0;
		return 0;
	}
	return r;
}
