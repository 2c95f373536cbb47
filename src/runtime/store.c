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
#include "runtime/fsutil.h"

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
		return sbx_err_sys(err, errno, "open loop-control or %s", image);
	for (int tries = 0; tries < 16; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			return sbx_err_sys(err, errno, "LOOP_CTL_GET_FREE");
		snprintf(dev, cap, "/dev/loop%d", n);
		_cleanup_close_ int lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0)
			return sbx_err_sys(err, errno, "open %s", dev);
		struct loop_config cfg = {.fd = (uint32_t)file,
					  .info = {.lo_flags = LO_FLAGS_AUTOCLEAR}};
		if (ioctl(lfd, LOOP_CONFIGURE, &cfg) == 0)
			return steal_fd(&lfd);
		if (errno != EBUSY) /* EBUSY: someone took it first */
			return sbx_err_sys(err, errno, "LOOP_CONFIGURE %s", dev);
	}
	return sbx_err_set(err, EBUSY, "no free loop device");
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
		s->mounted_by_us = true; /* ours all the same: unmounted at exit */
		goto ready;
	}
	bool have_image = access(image, F_OK) == 0;
	if (!size_bytes || (!have_image && !dir_empty(s->dir))) {
		*out = s; /* plain directories, no limits */
		return 0;
	}
	if (!have_image) {
		_cleanup_close_ int fd = open(image, O_RDWR | O_CREAT | O_EXCL |
							    O_CLOEXEC, 0600);
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
	if ((r = enable_quotas(s->dir, err)) < 0)
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

int store_create(struct store *s, const char *name, uint64_t limit_bytes,
		 struct sbx_err *err)
{
	_cleanup_close_ int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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
	struct btrfs_ioctl_vol_args va = {0};
	snprintf(va.name, sizeof(va.name), "%s", name);
	if (ioctl(dfd, BTRFS_IOC_SUBVOL_CREATE, &va) < 0)
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
			return sbx_err_sys(err, errno, "limit subvolume %s", name);
	}
	return 0;
}

int store_remove(struct store *s, const char *name, struct sbx_err *err)
{
	_cleanup_close_ int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sbx_err_sys(err, errno, "open %s", s->dir);
	if (!s->quotas)
		return fs_remove_tree(dfd, name, err);
	struct btrfs_ioctl_vol_args va = {0};
	snprintf(va.name, sizeof(va.name), "%s", name);
	if (ioctl(dfd, BTRFS_IOC_SNAP_DESTROY, &va) == 0 || errno == ENOENT)
		return 0;
	return sbx_err_sys(err, errno, "delete subvolume %s", name);
}

int store_usage(struct store *s, const char *name, uint64_t *bytes)
{
	if (!s->quotas)
		return -EOPNOTSUPP;
	_cleanup_close_ int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	_cleanup_close_ int sfd =
		openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return -errno;
	/* the subvolume's id is the tree its root directory lives in */
	struct btrfs_ioctl_ino_lookup_args il = {.objectid =
							 BTRFS_FIRST_FREE_OBJECTID};
	if (ioctl(sfd, BTRFS_IOC_INO_LOOKUP, &il) < 0)
		return -errno;
	/* its level-0 qgroup's info item in the quota tree */
	struct btrfs_ioctl_search_args sa = {0};
	struct btrfs_ioctl_search_key *k = &sa.key;
	k->tree_id = BTRFS_QUOTA_TREE_OBJECTID;
	k->min_type = k->max_type = BTRFS_QGROUP_INFO_KEY;
	k->min_offset = k->max_offset = il.treeid;
	k->max_objectid = 0;
	k->max_transid = UINT64_MAX;
	k->nr_items = 1;
	if (ioctl(dfd, BTRFS_IOC_TREE_SEARCH, &sa) < 0)
		return -errno;
	if (k->nr_items < 1) {
		/* a subvolume younger than the store's last commit */
		*bytes = 0;
		return 0;
	}
	struct btrfs_ioctl_search_header sh;
	struct btrfs_qgroup_info_item info;
	memcpy(&sh, sa.buf, sizeof(sh));
	if (sh.type != BTRFS_QGROUP_INFO_KEY || sh.len < sizeof(info))
		return -EIO;
	memcpy(&info, sa.buf + sizeof(sh), sizeof(info));
	*bytes = le64toh(info.rfer);
	return 0;
}
