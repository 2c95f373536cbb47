/* Builds the skeleton lower layer. It is generated once per daemon start
 * (kept when its stamp still matches) and shared read-only by every
 * sandbox through an idmapped mount, so ownership here is written as it
 * should look inside: host uid 0 shows as the sandbox's root.
 *
 * /etc is generated (passwd, group, hosts, ...) or copied from an allowlist
 * of host entries that programs in /usr need (alternatives links, the
 * dynamic loader cache, CA certificates, ...), skipping anything that is not
 * world-readable on the host: no shadow, no keys, no host configuration
 * that reveals more than the distribution ships. */
#include "runtime/image.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/cleanup.h"
#include "runtime/fsutil.h"

#define IMAGE_VERSION "sandboxd-image 3"

static const char *const etc_copy[] = {
    "alternatives",
    "apt",
    "bash.bashrc",
    "bindresvport.blacklist",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "default",
    "dpkg",
    "environment",
    "ethertypes",
    "gai.conf",
    "host.conf",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "locale.gen",
    "localtime",
    "login.defs",
    "magic",
    "magic.mime",
    "mailcap",
    "manpath.config",
    "matplotlibrc",
    "mime.types",
    "nanorc",
    "networks",
    "os-release",
    "perl",
    "profile",
    "profile.d",
    "protocols",
    "python3",
    "python3.11",
    "services",
    "shells",
    "skel",
    "ssl",
    "timezone",
    "vim",
    "xattr.conf",
};

#define SEALED_OWNER 65534 /* nobody: sandbox root cannot chmod them */

/* Top-level directories and their modes. */
static const struct {
	const char *path;
	mode_t mode;
} dirs[] = {
    {"dev", 0755},       {"etc", 0755},      {"etc/sandboxd", 0755},
    {"home", 0755},      {"media", 0755},    {"mnt", 0755},
    {"opt", 0755},       {"proc", 0555},     {"root", 0700},
    {"run", 0755},       {"srv", 0755},      {"tmp", 01777},
    {"usr", 0755},       {"var", 0755},      {"var/tmp", 01777},
    {"var/cache", 0755}, {"var/log", 0755},  {"var/lib", 0755},
    {"var/local", 0755}, {"var/mail", 0755}, {"var/spool", 0755},
    {"workspace", 0755},
};

static const char passwd[] =
    "root:x:0:0:root:/root:/bin/bash\n"
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
    "bin:x:2:2:bin:/bin:/usr/sbin/nologin\n"
    "sys:x:3:3:sys:/dev:/usr/sbin/nologin\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    "_apt:x:42:65534::/nonexistent:/usr/sbin/nologin\n"
    "user:x:1000:1000:user:/home/user:/bin/bash\n";
static const char group[] =
    "root:x:0:\ndaemon:x:1:\nbin:x:2:\nsys:x:3:\nadm:x:4:\ntty:x:5:\n"
    "disk:x:6:\nstaff:x:50:\nusers:x:100:user\nnogroup:x:65534:\n"
    "user:x:1000:\n";
static const char hosts[] = "127.0.0.1\tlocalhost sandbox\n"
                            "::1\tlocalhost ip6-localhost ip6-loopback\n";
static const char nsswitch[] = "passwd: files\ngroup: files\nshadow: files\n"
                               "hosts: files dns\nnetworks: files\n"
                               "protocols: files\nservices: files\n";
static const char resolv[] = "# sandboxd: the sandbox has no network\n"
                             "nameserver 127.0.0.1\n";

static int write_etc(int root, struct sbx_err *err)
{
	_cleanup_close_ int etc = openat(
	    root, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return sbx_err_sys(err, errno, "open image etc");
	int r = 0;
	r = r ?: fs_write_str(etc, "passwd", passwd, 0644, err);
	r = r ?: fs_write_str(etc, "group", group, 0644, err);
	r = r ?: fs_write_str(etc, "hosts", hosts, 0644, err);
	r = r ?: fs_write_str(etc, "hostname", "sandbox\n", 0644, err);
	r = r ?: fs_write_str(etc, "nsswitch.conf", nsswitch, 0644, err);
	r = r ?: fs_write_str(etc, "resolv.conf", resolv, 0644, err);
	if (r)
		return r;
	unlinkat(etc, "mtab", 0);
	if (symlinkat("../proc/self/mounts", etc, "mtab") < 0)
		return sbx_err_sys(err, errno, "symlink etc/mtab");
	_cleanup_close_ int host =
	    open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (host < 0)
		return sbx_err_sys(err, errno, "open /etc");
	for (size_t i = 0; i < sizeof(etc_copy) / sizeof(etc_copy[0]); i++)
		if ((r = fs_copy_entry(host, etc, etc_copy[i], err)))
			return r;
	return 0;
}

/* /bin, /lib, ... are links into usr/ on a merged-/usr host: make the same
 * links. A host with real top-level directories is not supported yet. */
static int write_links(int root, struct sbx_err *err)
{
	static const char *const names[] = {"bin",   "sbin",  "lib",
	                                    "lib32", "lib64", "libx32"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char target[256], p[64];
		snprintf(p, sizeof(p), "/%s", names[i]);
		ssize_t l = readlink(p, target, sizeof(target) - 1);
		if (l < 0)
			continue;
		target[l] = '\0';
		unlinkat(root, names[i], 0);
		if (symlinkat(target, root, names[i]) < 0)
			return sbx_err_sys(err, errno, "symlink %s", names[i]);
	}
	return 0;
}

/* The daemon's files. A sealed file's directories, below the top-level
 * one, are nobody's and read-only too, so nothing can be swapped in. */
static int write_files(int root, const struct image_file *files, size_t n,
                       struct sbx_err *err)
{
	for (size_t i = 0; i < n; i++) {
		const struct image_file *f = &files[i];
		char dir[4096];
		const char *slash = strrchr(f->path, '/');
		int r;
		_cleanup_close_ int d = -1;
		if (slash) {
			snprintf(dir, sizeof(dir), "%.*s",
			         (int)(slash - f->path), f->path);
			if ((r = fs_mkdirs(root, dir, 0755, err)))
				return r;
			d = openat(root, dir,
			           O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			               O_CLOEXEC);
			if (d < 0)
				return sbx_err_sys(err, errno, "open %s", dir);
		}
		int dfd = slash ? d : root;
		const char *name = slash ? slash + 1 : f->path;
		if ((r = fs_write_file(dfd, name, f->data, f->len, f->mode,
		                       err)))
			return r;
		if (!f->sealed)
			continue;
		if (fchownat(dfd, name, SEALED_OWNER, SEALED_OWNER,
		             AT_SYMLINK_NOFOLLOW) < 0 ||
		    fchmodat(dfd, name, f->mode & 0555, 0) < 0)
			return sbx_err_sys(err, errno, "chown %s", f->path);
		/* its directories, deepest first, up to the top-level one */
		for (char *e; slash && (e = strrchr(dir, '/')); *e = '\0')
			if (fchownat(root, dir, SEALED_OWNER, SEALED_OWNER,
			             AT_SYMLINK_NOFOLLOW) < 0 ||
			    fchmodat(root, dir, 0555, 0) < 0)
				return sbx_err_sys(err, errno, "chown %s", dir);
	}
	return 0;
}

/* What the skeleton was built from; a change rebuilds it. */
static void image_stamp(const struct image_file *files, size_t n, char *buf,
                        size_t cap)
{
	struct stat a = {0}, b = {0};
	stat("/var/lib/dpkg/status", &a);
	stat("/etc/alternatives", &b);
	/* and the daemon's files: a new daemon's files replace old ones */
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++) {
		for (const char *p = files[i].path; *p; p++)
			h = (h ^ (unsigned char)*p) * 16777619u;
		for (size_t j = 0; j < files[i].len; j++)
			h = (h ^ (unsigned char)files[i].data[j]) * 16777619u;
		h = (h ^ files[i].mode ^ (files[i].sealed ? 0x10000u : 0)) *
		    16777619u;
	}
	snprintf(buf, cap, "%s %lld.%ld %lld.%ld %08x\n", IMAGE_VERSION,
	         (long long)a.st_mtim.tv_sec, a.st_mtim.tv_nsec,
	         (long long)b.st_mtim.tv_sec, b.st_mtim.tv_nsec, h);
}

static int build(int root, const struct image_file *files, size_t nfiles,
                 struct sbx_err *err)
{
	int r;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if (mkdirat(root, dirs[i].path, dirs[i].mode) < 0 &&
		    errno != EEXIST)
			return sbx_err_sys(err, errno, "mkdir %s",
			                   dirs[i].path);
		if (fchmodat(root, dirs[i].path, dirs[i].mode, 0) < 0)
			return sbx_err_sys(err, errno, "chmod %s",
			                   dirs[i].path);
	}
	if ((r = fs_mkdirs(root, "home/user", 0755, err)))
		return r;
	if (fchownat(root, "home/user", 1000, 1000, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_err_sys(err, errno, "chown home/user");
	if ((r = write_etc(root, err)) || (r = write_links(root, err)) ||
	    (r = write_files(root, files, nfiles, err)))
		return r;
	/* dpkg's database, so that dpkg and apt inside know what /usr holds */
	_cleanup_close_ int vl =
	    openat(root, "var/lib", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int hl =
	    open("/var/lib", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (vl >= 0 && hl >= 0 && (r = fs_copy_entry(hl, vl, "dpkg", err)))
		return r;
	return 0;
}

int image_prepare(const char *dir, const struct image_file *files,
                  size_t nfiles, struct sbx_err *err)
{
	char want[256], have[256] = "", stamp[4096];
	image_stamp(files, nfiles, want, sizeof(want));
	/* the stamp sits beside the image: inside, the image is "/" */
	snprintf(stamp, sizeof(stamp), "%s.stamp", dir);
	_cleanup_close_ int d =
	    open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d >= 0 && fs_read_small(AT_FDCWD, stamp, have, sizeof(have)) > 0 &&
	    !strcmp(have, want))
		return 0;
	/* Build beside, then swap, so a crash never leaves half a skeleton
	 * under existing sandboxes. */
	char tmp[4096], old[4096];
	snprintf(tmp, sizeof(tmp), "%s.new", dir);
	snprintf(old, sizeof(old), "%s.old", dir);
	fs_remove_tree(AT_FDCWD, tmp, NULL);
	fs_remove_tree(AT_FDCWD, old, NULL);
	if (mkdir(tmp, 0755) < 0)
		return sbx_err_sys(err, errno, "mkdir %s", tmp);
	_cleanup_close_ int t =
	    open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (t < 0)
		return sbx_err_sys(err, errno, "open %s", tmp);
	int r = build(t, files, nfiles, err);
	if (r)
		return r;
	if (d >= 0 && rename(dir, old) < 0)
		return sbx_err_sys(err, errno, "rename %s", dir);
	if (rename(tmp, dir) < 0)
		return sbx_err_sys(err, errno, "rename %s", tmp);
	fs_remove_tree(AT_FDCWD, old, NULL);
	return fs_write_str(AT_FDCWD, stamp, want, 0644, err);
}

int image_prepare_top(const char *dir, const struct image_file *files,
                      size_t nfiles, struct sbx_err *err)
{
	static const struct {
		const char *path;
		mode_t mode;
	} top_dirs[] = {{"dev", 0755},
	                {"etc", 0755},
	                {"proc", 0555},
	                {"tmp", 01777},
	                {"workspace", 0755}};
	char tmp[4096], old[4096];
	snprintf(tmp, sizeof(tmp), "%s.new", dir);
	snprintf(old, sizeof(old), "%s.old", dir);
	fs_remove_tree(AT_FDCWD, tmp, NULL);
	fs_remove_tree(AT_FDCWD, old, NULL);
	if (mkdir(tmp, 0755) < 0)
		return sbx_err_sys(err, errno, "mkdir %s", tmp);
	_cleanup_close_ int t =
	    open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (t < 0)
		return sbx_err_sys(err, errno, "open %s", tmp);
	for (size_t i = 0; i < sizeof(top_dirs) / sizeof(top_dirs[0]); i++)
		if (mkdirat(t, top_dirs[i].path, top_dirs[i].mode) < 0 ||
		    fchmodat(t, top_dirs[i].path, top_dirs[i].mode, 0) < 0)
			return sbx_err_sys(err, errno, "mkdir %s",
			                   top_dirs[i].path);
	_cleanup_close_ int etc =
	    openat(t, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return sbx_err_sys(err, errno, "open etc");
	int r = 0;
	r = r ?: fs_write_str(etc, "hosts", hosts, 0644, err);
	r = r ?: fs_write_str(etc, "hostname", "sandbox\n", 0644, err);
	r = r ?: fs_write_str(etc, "resolv.conf", resolv, 0644, err);
	r = r ?: write_files(t, files, nfiles, err);
	if (r)
		return r;
	if (rename(dir, old) < 0 && errno != ENOENT)
		return sbx_err_sys(err, errno, "rename %s", dir);
	if (rename(tmp, dir) < 0)
		return sbx_err_sys(err, errno, "rename %s", tmp);
	fs_remove_tree(AT_FDCWD, old, NULL);
	return 0;
}
