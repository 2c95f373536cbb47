/* Root filesystem of a sandbox (see DESIGN.md, "A sandbox start sequence"):
 *
 *   /      overlay: lower = the image skeleton (idmapped, read-only),
 *                   upper = <sandbox>/root/upper (persistent)
 *   /usr   overlay: lower = whiteouts of what the host's /usr keeps from
 *                   "others" (usrmask.c), above host /usr (both
 *                   idmapped, read-only), upper = <sandbox>/usr/upper
 *                   (persistent)
 *   /proc  fresh procfs of the sandbox's pid namespace, with the kernel
 *          interfaces that leak host state masked and /proc/sys & co
 *          read-only (isolation.md A.24)
 *   /dev   tmpfs, read-only: null zero full random urandom tty, ptmx;
 *          devpts (new instance) on /dev/pts; /dev/shm a writable bind of
 *          its own directory (isolation.md A.25)
 *   /sys   absent
 *
 * Superblocks are few (each is a memcg-aware shrinker, and every memory
 * cgroup on the machine holds 1 KiB per 64 of them): the two overlays,
 * proc, devpts and one tmpfs, which is /dev, /dev/shm and the masks of
 * /proc's directories (binds of /dev/pts's own empty directory, before
 * devpts covers it).
 *
 * Every mount is nosuid,nodev (but /dev, whose nodes must work, and it is
 * noexec). The lower layers are idmapped through the sandbox's user
 * namespace so host root's files show as the sandbox's root; without it,
 * they would show as nobody and copy-up of root-owned directories fails.
 * The overlays are mounted by host root: mounting them from inside the user
 * namespace over idmapped layers is refused by this kernel. Propagation is
 * private first, so nothing here ever reaches the host's mount table.
 *
 * Nothing in the sandbox's /proc/self/mountinfo names the host: the
 * overlays are given their layers as short paths relative to the staging
 * dir (the sandbox's dir is bound there as "sb"), since overlay shows its
 * options as given; and the tmpfs and devpts mounts take no uid=/gid=
 * (shown as host ids, i.e. the uid base): their roots are chowned. */
#include "runtime/rootfs.h"

#include <fcntl.h>
#include <stdbool.h>
#include <linux/mount.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "lib/cleanup.h"
#include "runtime/fsutil.h"

#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif

static int sys_open_tree(int dfd, const char *path, unsigned flags)
{
	return (int)syscall(SYS_open_tree, dfd, path, flags);
}

static int sys_mount_setattr(int dfd, const char *path, unsigned flags,
                             struct mount_attr *attr)
{
	return (int)syscall(SYS_mount_setattr, dfd, path, flags, attr,
	                    sizeof(*attr));
}

static int sys_move_mount(int from, const char *fpath, int to,
                          const char *tpath, unsigned flags)
{
	return (int)syscall(SYS_move_mount, from, fpath, to, tpath, flags);
}

static int do_mount(const char *src, const char *dst, const char *type,
                    unsigned long flags, const char *data, struct sbx_err *err);

/* Clone the tree at src, idmap it (read-only unless rw), attach it at
 * dst. */
static int mount_idmapped_as(const char *src, const char *dst, int userns_fd,
                             bool rw, struct sbx_err *err)
{
	_cleanup_close_ int fd = sys_open_tree(
	    AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (fd < 0)
		return sbx_err_sys(err, errno, "open_tree %s", src);
	struct mount_attr attr = {
	    .attr_set = MOUNT_ATTR_IDMAP | (rw ? 0 : MOUNT_ATTR_RDONLY) |
	                MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
	    .userns_fd = (__u64)userns_fd,
	};
	if (sys_mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr) < 0)
		return sbx_err_sys(err, errno, "idmap %s", src);
	if (sys_move_mount(fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return sbx_err_sys(err, errno, "move_mount %s", dst);
	return 0;
}

static int mount_idmapped(const char *src, const char *dst, int userns_fd,
                          struct sbx_err *err)
{
	return mount_idmapped_as(src, dst, userns_fd, false, err);
}

/* The sandbox's own dir as "sb": a bind, or, when its files are owned by
 * another range on disk, an idmapped one that shows them as its own
 * (overlayfs takes idmapped upper layers since 5.19). */
static int mount_sandbox_dir(const struct rootfs_spec *s, struct sbx_err *err)
{
	if (s->files_userns_fd < 0)
		return do_mount(s->sandbox_dir, "sb", NULL, MS_BIND, NULL, err);
	return mount_idmapped_as(s->sandbox_dir, "sb", s->files_userns_fd, true,
	                         err);
}

/* lower and dir are relative to the cwd: overlay keeps them, as given, in
 * the mount's options, which the sandbox reads in mountinfo. */
static int mount_overlay(const char *lower, const char *dir, const char *dst,
                         struct sbx_err *err)
{
	char opts[4096]; /* a page: what mount(2) takes */
	int n = snprintf(opts, sizeof(opts),
	                 "lowerdir=%s,upperdir=%s/upper,workdir=%s/work", lower,
	                 dir, dir);
	if (n < 0 || (size_t)n >= sizeof(opts))
		return sbx_err_set(err, ENAMETOOLONG,
		                   "overlay options too long");
	if (mount("overlay", dst, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
		return sbx_err_sys(err, errno, "mount overlay on %s", dst);
	return 0;
}

static int do_mount(const char *src, const char *dst, const char *type,
                    unsigned long flags, const char *data, struct sbx_err *err)
{
	if (mount(src, dst, type, flags, data) < 0)
		return sbx_err_sys(err, errno, "mount %s on %s",
		                   type  ? type
		                   : src ? src
		                         : "(remount)",
		                   dst);
	return 0;
}

static int setup_dev(uid_t base, struct sbx_err *err)
{
	static const struct {
		const char *name;
		unsigned maj, min;
	} nodes[] = {{"null", 1, 3},   {"zero", 1, 5},    {"full", 1, 7},
	             {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
	static const struct {
		const char *name, *target;
	} links[] = {
	    {"fd", "/proc/self/fd"},       {"stdin", "/proc/self/fd/0"},
	    {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"},
	    {"ptmx", "pts/ptmx"},          {"core", "/dev/null"}};
	char opts[128];
	int r;

	/* /dev's few nodes and what /dev/shm holds: shm's 64 MiB and 16,384
	 * inodes, and 64 inodes for the rest */
	snprintf(opts, sizeof(opts), "mode=755,size=64m,nr_inodes=16448");
	if ((r = do_mount("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NOEXEC, opts,
	                  err)))
		return r;
	if (chown("dev", base, base) < 0)
		return sbx_err_sys(err, errno, "chown dev");
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		char p[32];
		snprintf(p, sizeof(p), "dev/%s", nodes[i].name);
		if (mknod(p, S_IFCHR | 0666,
		          makedev(nodes[i].maj, nodes[i].min)) < 0 ||
		    chmod(p, 0666) < 0)
			return sbx_err_sys(err, errno, "mknod %s", p);
		if (lchown(p, base, base) < 0)
			return sbx_err_sys(err, errno, "chown %s", p);
	}
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		char p[32];
		snprintf(p, sizeof(p), "dev/%s", links[i].name);
		if (symlink(links[i].target, p) < 0 ||
		    lchown(p, base, base) < 0)
			return sbx_err_sys(err, errno, "symlink %s", p);
	}
	if (mkdir("dev/pts", 0755) < 0 || mkdir("dev/shm", 01777) < 0 ||
	    chmod("dev/shm", 01777) < 0)
		return sbx_err_sys(err, errno, "mkdir dev/pts, dev/shm");
	if (chown("dev/shm", base, base) < 0)
		return sbx_err_sys(err, errno, "chown dev/shm");
	/* /dev/shm: its directory, bound on itself, the one writable mount
	 * of this tmpfs */
	if ((r = do_mount("dev/shm", "dev/shm", NULL, MS_BIND, NULL, err)) ||
	    (r = do_mount(NULL, "dev/shm", NULL,
	                  MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV |
	                      MS_NOEXEC,
	                  NULL, err)))
		return r;
	/* owned by the sandbox's root so it looks as usual, and read-only so
	 * nothing in it can be replaced; the nodes still work. Read-only as
	 * a mount, not as a superblock (shm is the same one): nothing inside
	 * may remount it (the mount namespace is host root's, and a copy of
	 * it in another user namespace has the flag locked) */
	if ((r = do_mount(NULL, "dev", NULL,
	                  MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID |
	                      MS_NOEXEC,
	                  NULL, err)))
		return r;
	return 0;
}

/* devpts on /dev/pts, once setup_proc has bound its empty directory on
 * /proc's masked ones */
static int setup_pts(unsigned max_ptys, struct sbx_err *err)
{
	char opts[128];
	/* A pty instance of its own, with a max= of its own: the kernel's
	 * pool (kernel.pty.max less kernel.pty.reserve, which only the host's
	 * initial instance may use) is shared by every instance, and one
	 * sandbox could otherwise take all of it. No gid=: a new pty is the
	 * group of whoever opens it, the sandbox's root. */
	snprintf(opts, sizeof(opts),
	         "newinstance,ptmxmode=0666,mode=0620,max=%u", max_ptys);
	return do_mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	                opts, err);
}

static int setup_proc(struct sbx_err *err)
{
	static const char *const masked_files[] = {
	    "proc/kcore",       "proc/keys",         "proc/timer_list",
	    "proc/timer_stats", "proc/sched_debug",  "proc/latency_stats",
	    "proc/kallsyms",    "proc/kpagecount",   "proc/kpageflags",
	    "proc/kpagecgroup", "proc/sysrq-trigger"};
	static const char *const masked_dirs[] = {"proc/acpi", "proc/asound",
	                                          "proc/scsi", "proc/driver"};
	static const char *const readonly[] = {"proc/sys", "proc/irq",
	                                       "proc/bus", "proc/fs"};
	int r;

	if ((r = do_mount("proc", "proc", "proc",
	                  MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, err)))
		return r;
	for (size_t i = 0; i < sizeof(masked_files) / sizeof(masked_files[0]);
	     i++) {
		if (access(masked_files[i], F_OK) < 0)
			continue;
		if ((r = do_mount("dev/null", masked_files[i], NULL, MS_BIND,
		                  NULL, err)))
			return r;
	}
	/* an empty, read-only directory: /dev/pts's own, under the devpts
	 * mount to come (no superblock of its own) */
	for (size_t i = 0; i < sizeof(masked_dirs) / sizeof(masked_dirs[0]);
	     i++) {
		if (access(masked_dirs[i], F_OK) < 0)
			continue;
		if ((r = do_mount("dev/pts", masked_dirs[i], NULL, MS_BIND,
		                  NULL, err)) ||
		    (r = do_mount(NULL, masked_dirs[i], NULL,
		                  MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID |
		                      MS_NODEV | MS_NOEXEC,
		                  NULL, err)))
			return r;
	}
	for (size_t i = 0; i < sizeof(readonly) / sizeof(readonly[0]); i++) {
		if (access(readonly[i], F_OK) < 0)
			continue;
		if ((r = do_mount(readonly[i], readonly[i], NULL,
		                  MS_BIND | MS_REC, NULL, err)) ||
		    (r = do_mount(NULL, readonly[i], NULL,
		                  MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID |
		                      MS_NODEV | MS_NOEXEC,
		                  NULL, err)))
			return r;
	}
	return 0;
}

/* An image's root: one overlay, its lower layers the daemon's top layer
 * over the image's, top first, all through one idmapped mount of the
 * layers' directory ("limg/<digest>": no host path in mountinfo). */
static int image_root(const struct rootfs_spec *s, struct sbx_err *err)
{
	char lower[3800];
	size_t off = (size_t)snprintf(lower, sizeof(lower), "ltop");
	for (size_t i = s->nlayers; i-- > 0;) {
		int n = snprintf(lower + off, sizeof(lower) - off, ":limg/%s",
		                 s->layers[i]);
		if (n < 0 || (size_t)n >= sizeof(lower) - off)
			return sbx_err_set(err, E2BIG, "too many image layers");
		off += (size_t)n;
	}
	int r;
	if ((r = mount_idmapped(s->layers_dir, "limg", s->userns_fd, err)) ||
	    (r = mount_idmapped(s->image_top, "ltop", s->userns_fd, err)) ||
	    (r = mount_sandbox_dir(s, err)) ||
	    (r = mount_overlay(lower, "sb/root", "root", err)))
		return r;
	return 0;
}

int rootfs_setup(const struct rootfs_spec *s, struct sbx_err *err)
{
	int r;

	if ((r = do_mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL, err)))
		return r;
	/* from here on, every layer by a short name below the staging dir */
	if (chdir(s->mnt_dir) < 0)
		return sbx_err_sys(err, errno, "chdir %s", s->mnt_dir);
	if (s->nlayers) {
		if ((r = image_root(s, err)))
			return r;
	} else if ((r = mount_idmapped("/usr", "lusr", s->userns_fd, err)) ||
	           (r = mount_idmapped(s->image_dir, "lskel", s->userns_fd,
	                               err)) ||
	           (s->usr_mask && (r = mount_idmapped(s->usr_mask, "lmask",
	                                               s->userns_fd, err))) ||
	           (r = mount_sandbox_dir(s, err)) ||
	           (r = mount_overlay("lskel", "sb/root", "root", err)) ||
	           (r = mount_overlay(s->usr_mask ? "lmask:lusr" : "lusr",
	                              "sb/usr", "root/usr", err)))
		return r;
	if (chdir("root") < 0)
		return sbx_err_sys(err, errno, "chdir %s/root", s->mnt_dir);
	if ((r = setup_dev(s->base, err)) || (r = setup_proc(err)) ||
	    (r = setup_pts(s->max_ptys, err)))
		return r;
	/* pivot_root(".", ".") stacks the old root on top of the new one;
	 * detaching it leaves only the new tree (isolation.md A.17) */
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return sbx_err_sys(err, errno, "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		return sbx_err_sys(err, errno, "detach old root");
	if (chdir("/") < 0)
		return sbx_err_sys(err, errno, "chdir /");
	return 0;
}

int rootfs_prepare_dir(const char *sandbox_dir, uid_t owner,
                       struct sbx_err *err)
{
	static const char *const sub[] = {"root/upper", "root/work",
	                                  "usr/upper", "usr/work"};
	_cleanup_close_ int d =
	    open(sandbox_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0)
		return sbx_err_sys(err, errno, "open %s", sandbox_dir);
	for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		int r = fs_mkdirs(d, sub[i], 0755, err);
		if (r)
			return r;
	}
	/* the upper roots carry the overlays' root inodes: owned by the
	 * sandbox's root, like the directories they stand for */
	if (fchownat(d, "root/upper", owner, owner, AT_SYMLINK_NOFOLLOW) < 0 ||
	    fchownat(d, "usr/upper", owner, owner, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_err_sys(err, errno, "chown upper dirs");
	return 0;
}
