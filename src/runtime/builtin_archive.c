/* Backups made and unpacked inside the sandbox (builtin.h): the daemon
 * never walks a sandbox's files as host root. These run as builtins, with
 * all of the sandbox's isolation (its user namespace, no capabilities,
 * seccomp, its cgroup and disk limits), and the daemon only moves bytes
 * through pipes. The archive is tar (pax) compressed with zstd, made and
 * read with libarchive.
 *
 *   archive-create base dir [--exclude=PATTERN]... [--out=PATH]
 *       stdout (or the file PATH, made or truncated, which is then left
 *       out of the archive; "OK <size>" on stdout at the end): the
 *       archive of dir's contents, members named by their path
 *       below dir; one file system (mount points are not crossed); regular
 *       files, directories, symlinks (never followed), hard links, FIFOs.
 *       stderr: "T <bytes>\n" (the regular files' total, from a first walk),
 *       "P <bytes>\n" as they are archived, "E <errno> <what>\n" on failure
 *       (on stdout with --out, which then carries only the answer).
 *       PATTERN without '/' matches an entry's name at any depth, with '/'
 *       its path below dir (fnmatch, FNM_PATHNAME); an excluded directory
 *       is not entered.
 *       With --manifest=PATH it also writes (at the end, once the
 *       archive is whole) the manifest of what it archived to PATH: per
 *       entry its path, type, mode, size, mtime and ctime; other
 *       manifests beside PATH of the same stem ("<stem>.<n>") but the
 *       --base one are removed. With --base=PATH (an earlier manifest) the
 *       archive is a delta: only the entries added or changed since it
 *       (the unit is the file: a changed file goes whole), then a member
 *       named DELETED_MEMBER listing (NUL-separated) the paths gone; a
 *       base that cannot be read makes it a full archive. stderr says
 *       which first: "M full\n" or "M delta\n", and at the end
 *       "C <entries archived> <paths deleted>\n".
 *   archive-unpack base dir [--in=PATH] [--into=TMP]
 *       stdin (or the file PATH): an archive (hostile input: libarchive's
 * secure extraction, no "..", no absolute names, no writing through a symlink,
 * set-id bits dropped, devices skipped), unpacked into a new directory
 *       ".<name>.sbx-restore-<pid>" beside dir (parents made as needed);
 *       stdout "OK <that name>\n". dir itself is untouched: archive-commit
 *       swaps it in, once the daemon has checked the archive's checksum.
 *       --into=TMP (a name an earlier archive-unpack made): a delta is
 *       applied to that directory instead (an entry whose type changed is
 *       replaced; the paths its DELETED_MEMBER lists are removed).
 *   archive-commit base dir tmp [--manifest=PATH]
 *       tmp (a name made by archive-unpack) takes dir's place in one
 *       rename; what dir held is removed; then dir's manifest is written
 *       to PATH (as archive-create's). stdout "OK\n".
 *   archive-abort base dir tmp
 *       tmp is removed. stdout "OK\n".
 * Errors of unpack, commit and abort: stdout "E <errno> <what>\n", exit 1. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/builtin.h"
#include "runtime/fsutil.h"

#define MAX_DEPTH 256
#define PROGRESS_EVERY (4u << 20)
#define RESTORE_MARK ".sbx-restore-"
/* A member no archive of files can have (archive-unpack refuses "..") */
#define DELETED_MEMBER "../sbx-deleted"
#define MANIFEST_MAGIC "sbx-manifest 1"
#define MANIFEST_MAX (1ull << 30)

static unsigned long long confine = RESOLVE_BENEATH;
static int msgfd = 1;      /* where errors go: stdout, or stderr for a create
                              that writes its archive there */
static char failtag = 'E'; /* 'W': a failure that fails nothing else */

__attribute__((noreturn)) static void fail(int e, const char *what)
{
	dprintf(msgfd, "%c %d %s\n", failtag, e, what);
	_exit(1);
}

static int open_in(int base, const char *path, int flags)
{
	struct open_how how = {
	    .flags = (unsigned long long)(flags | O_CLOEXEC),
	    .resolve = confine | RESOLVE_NO_MAGICLINKS,
	};
	int fd;
	for (int tries = 0; tries < 64; tries++) {
		fd = (int)syscall(SYS_openat2, base, path, &how, sizeof(how));
		if (fd >= 0 || errno != EAGAIN)
			break;
	}
	return fd < 0 ? -errno : fd;
}

static int open_parent_of(int base, const char *dir, char *leaf, size_t cap,
                          bool make);

/* A file to write the archive to, made beneath base with its parents; a
 * link in its place is refused, never written through. */
static int open_out(int base, const char *path)
{
	char leaf[NAME_MAX + 1];
	int pfd = open_parent_of(base, path, leaf, sizeof(leaf), true);
	int fd =
	    openat(pfd, leaf,
	           O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		fail(errno == ELOOP ? EEXIST : errno, path);
	close(pfd);
	return fd;
}

/* Manifests: a file of NUL-terminated strings, MANIFEST_MAGIC, then per
 * entry its attributes (attr_of) and its path below dir. */

struct ment {
	char *path, *attr;
	bool seen;
};

struct mtab {
	struct ment *v; /* open addressing; path NULL: free */
	size_t cap, n;
	char *text; /* the file, which the strings point into */
};

static size_t path_hash(const char *s)
{
	size_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static struct ment *mtab_find(struct mtab *t, const char *path)
{
	if (!t || !t->cap)
		return NULL;
	for (size_t i = path_hash(path) & (t->cap - 1);;
	     i = (i + 1) & (t->cap - 1)) {
		if (!t->v[i].path)
			return NULL;
		if (!strcmp(t->v[i].path, path))
			return &t->v[i];
	}
}

/* The manifest at path, or NULL (missing, unreadable, not one). */
static struct mtab *mtab_load(int base, const char *file)
{
	int fd = open_in(base, file, O_RDONLY);
	struct stat st;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > MANIFEST_MAX) {
		close(fd);
		return NULL;
	}
	size_t len = (size_t)st.st_size, got = 0;
	struct mtab *t = calloc(1, sizeof(*t));
	char *text = malloc(len + 1);
	while (t && text && got < len) {
		ssize_t r = read(fd, text + got, len - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	size_t magic = strlen(MANIFEST_MAGIC) + 1;
	if (!t || !text || got != len || len < magic || text[len - 1] ||
	    memcmp(text, MANIFEST_MAGIC, magic)) {
		free(text);
		free(t);
		return NULL;
	}
	text[len] = '\0';
	size_t n = 0;
	for (size_t i = magic; i < len; i++)
		n += !text[i];
	t->cap = 16;
	while (t->cap < n + 16) /* at most half full: n counts both strings */
		t->cap *= 2;
	t->v = calloc(t->cap, sizeof(*t->v));
	t->text = text;
	if (!t->v || n % 2) {
		free(t->v);
		free(text);
		free(t);
		return NULL;
	}
	for (char *p = text + magic; p < text + len;) {
		char *attr = p;
		char *path = attr + strlen(attr) + 1;
		p = path + strlen(path) + 1;
		size_t i = path_hash(path) & (t->cap - 1);
		while (t->v[i].path && strcmp(t->v[i].path, path))
			i = (i + 1) & (t->cap - 1);
		if (!t->v[i].path)
			t->n++;
		t->v[i].path = path;
		t->v[i].attr = attr;
	}
	return t;
}

/* What says an entry changed: its type, mode, size, mtime and ctime (a
 * directory: its type and mode; its entries are entries of their own). */
static void attr_of(const struct stat *st, char *buf, size_t cap)
{
	if (S_ISDIR(st->st_mode)) {
		snprintf(buf, cap, "d %o", (unsigned)(st->st_mode & 07777));
		return;
	}
	snprintf(buf, cap, "%c %o %lld %lld.%09ld %lld.%09ld",
	         S_ISREG(st->st_mode)   ? 'f'
	         : S_ISLNK(st->st_mode) ? 'l'
	                                : 'p',
	         (unsigned)(st->st_mode & 07777), (long long)st->st_size,
	         (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
	         (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
}

/* Write the manifest text (len bytes) to path; remove the other
 * manifests of its stem but keep's. */
static void manifest_write_now(int base, const char *path, const char *text,
                               size_t len, const char *keep)
{
	char leaf[NAME_MAX + 1], tmp[NAME_MAX + 8];
	int pfd = open_parent_of(base, path, leaf, sizeof(leaf), true);
	snprintf(tmp, sizeof(tmp), "%s.tmp", leaf);
	int fd =
	    openat(pfd, tmp,
	           O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		fail(errno, path);
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, text + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fail(errno, path);
		off += (size_t)n;
	}
	if (fsync(fd) < 0 || renameat(pfd, tmp, pfd, leaf) < 0)
		fail(errno, path);
	close(fd);
	const char *dot = strrchr(leaf, '.');
	const char *kl = keep ? strrchr(keep, '/') : NULL;
	kl = kl ? kl + 1 : keep;
	size_t stem = dot ? (size_t)(dot - leaf) + 1 : 0;
	int dfd =
	    stem ? openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, leaf, stem) &&
		    strcmp(de->d_name, leaf) && (!kl || strcmp(de->d_name, kl)))
			unlinkat(pfd, de->d_name, 0);
	if (d)
		closedir(d);
	close(pfd);
}

/* Whole or not at all, and never failing the archive it describes (a
 * sandbox whose root cannot take it gets full checkpoints): in a child,
 * whose failure is a "W" line. */
static void manifest_write(int base, const char *path, const char *text,
                           size_t len, const char *keep)
{
	pid_t pid = fork();
	if (pid == 0) {
		failtag = 'W';
		manifest_write_now(base, path, text, len, keep);
		_exit(0);
	}
	int st;
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
}

/* A manifest of this name from an attempt that failed describes another
 * tree: it goes before anything is written. */
static void manifest_forget(int base, const char *path)
{
	const char *slash = strrchr(path, '/');
	char parent[PATH_MAX];
	if (!slash || (size_t)(slash - path) >= sizeof(parent))
		return;
	memcpy(parent, path, (size_t)(slash - path));
	parent[slash - path] = '\0';
	int pfd = open_in(base, *parent ? parent : "/", O_RDONLY | O_DIRECTORY);
	if (pfd >= 0) {
		unlinkat(pfd, slash + 1, 0);
		close(pfd);
	}
}

/* ---- create -----------------------------------------------------------------
 */

struct walk {
	const char *const *ex; /* patterns */
	int nex;
	dev_t out_dev; /* the archive's own file, never in it */
	ino_t out_ino;
	uint64_t mnt;       /* the mount dir is on */
	char rel[PATH_MAX]; /* the entry's path below dir */
	uint64_t total, done, reported;
	struct archive *a; /* NULL: the first walk, which only counts */
	struct archive_entry_linkresolver *lr;
	struct mtab *old;   /* a delta's base (NULL: everything goes) */
	FILE *man;          /* the new manifest (NULL: none) */
	bool manifest_only; /* archive-commit's walk: nothing archived */
	uint64_t entries;   /* archived */
};

/* The mount a directory is on: what a mount point changes. (st_dev
 * will not do: overlayfs shows its files with their layer's.) */
static uint64_t mount_of(int dfd, const char *name)
{
	struct statx sx;
	if (statx(dfd, name, AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH),
	          STATX_MNT_ID, &sx) < 0 ||
	    !(sx.stx_mask & STATX_MNT_ID))
		return 0;
	return sx.stx_mnt_id;
}

static bool excluded(const struct walk *w, const char *name)
{
	for (int i = 0; i < w->nex; i++) {
		const char *p = w->ex[i];
		if (strchr(p, '/') ? fnmatch(p, w->rel, FNM_PATHNAME) == 0
		                   : fnmatch(p, name, 0) == 0)
			return true;
	}
	return false;
}

static void progress(struct walk *w)
{
	if (w->done - w->reported >= PROGRESS_EVERY) {
		w->reported = w->done;
		dprintf(2, "P %llu\n", (unsigned long long)w->done);
	}
}

static void write_entry(struct walk *w, struct archive_entry *e, int fd)
{
	struct archive_entry *sparse = NULL;
	/* tar's way: a second name of a file becomes a link of size 0 */
	archive_entry_linkify(w->lr, &e, &sparse);
	if (!e)
		return;
	if (archive_write_header(w->a, e) < ARCHIVE_WARN)
		fail(archive_errno(w->a) > 0 ? archive_errno(w->a) : EIO,
		     archive_error_string(w->a));
	int64_t left = fd >= 0 ? archive_entry_size(e) : 0;
	while (left > 0) {
		static char buf[65536];
		ssize_t n = read(fd, buf,
		                 sizeof(buf) < (size_t)left ? sizeof(buf)
		                                            : (size_t)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* it shrank meanwhile: libarchive pads */
		if (archive_write_data(w->a, buf, (size_t)n) < 0)
			fail(archive_errno(w->a) > 0 ? archive_errno(w->a)
			                             : EIO,
			     archive_error_string(w->a));
		left -= n;
		w->done += (uint64_t)n;
		progress(w);
	}
	if (archive_write_finish_entry(w->a) < ARCHIVE_WARN)
		fail(EIO, archive_error_string(w->a));
	archive_entry_free(e);
}

/* An entry the sandbox's root may not read (mode 000): left out, said on
 * stderr, as tar does. */
static bool skippable(int e)
{
	return e == EACCES || e == EPERM || e == ENOENT;
}

static void walk_dir(struct walk *w, int dfd, size_t rl, int depth)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d)
		fail(errno, w->rel[0] ? w->rel : ".");
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *name = de->d_name;
		struct stat st;
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		size_t nl = strlen(name);
		if (rl + nl + 2 > sizeof(w->rel))
			fail(ENAMETOOLONG, name);
		size_t l = rl;
		if (l)
			w->rel[l++] = '/';
		memcpy(w->rel + l, name, nl + 1);
		if (excluded(w, name) ||
		    fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    (w->out_ino && st.st_ino == w->out_ino &&
		     st.st_dev == w->out_dev) ||
		    (S_ISDIR(st.st_mode) &&
		     mount_of(dirfd(d), name) != w->mnt) ||
		    S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ||
		    S_ISSOCK(st.st_mode)) {
			w->rel[rl] = '\0';
			continue;
		}
		char attr[128];
		attr_of(&st, attr, sizeof(attr));
		struct ment *o = mtab_find(w->old, w->rel);
		bool same = o && !strcmp(o->attr, attr);
		if (!w->a && !w->manifest_only) { /* counting */
			if (S_ISREG(st.st_mode) && !same)
				w->total += (uint64_t)st.st_size;
		} else if (w->a && !same) {
			struct archive_entry *e = archive_entry_new();
			int in = -1;
			archive_entry_copy_pathname(e, w->rel);
			archive_entry_copy_stat(e, &st);
			if (S_ISLNK(st.st_mode)) {
				char target[PATH_MAX];
				ssize_t n = readlinkat(dirfd(d), name, target,
				                       sizeof(target) - 1);
				if (n < 0)
					fail(errno, w->rel);
				target[n] = '\0';
				archive_entry_copy_symlink(e, target);
			} else if (S_ISREG(st.st_mode)) {
				in = openat(dirfd(d), name,
				            O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
				                O_CLOEXEC);
				if (in < 0 && skippable(errno)) {
					dprintf(2, "W %d %s\n", errno, w->rel);
					archive_entry_free(e);
					w->rel[rl] = '\0';
					continue;
				}
				if (in < 0)
					fail(errno, w->rel);
			}
			write_entry(w, e, in);
			w->entries++;
			if (in >= 0)
				close(in);
		}
		if (w->a || w->manifest_only) {
			if (o)
				o->seen = true;
			if (w->man) {
				fputs(attr, w->man);
				fputc('\0', w->man);
				fputs(w->rel, w->man);
				fputc('\0', w->man);
			}
		}
		if (S_ISDIR(st.st_mode)) {
			if (depth >= MAX_DEPTH)
				fail(ELOOP, w->rel);
			int sub = openat(dirfd(d), name,
			                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			                     O_CLOEXEC);
			if (sub < 0 && skippable(errno)) {
				if (w->a && !same)
					dprintf(2, "W %d %s\n", errno, w->rel);
				w->rel[rl] = '\0';
				continue;
			}
			if (sub < 0)
				fail(errno, w->rel);
			walk_dir(w, sub, l + nl, depth + 1);
			close(sub);
		}
		w->rel[rl] = '\0';
	}
	closedir(d);
}

static int out_fd = 1;

static ssize_t out_write(struct archive *a, void *data, const void *buf,
                         size_t len)
{
	(void)a;
	(void)data;
	const char *p = buf;
	size_t left = len;
	while (left) {
		ssize_t n = write(out_fd, p, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1; /* the daemon stopped reading: cancelled */
		p += n;
		left -= (size_t)n;
	}
	return (ssize_t)len;
}

static _Noreturn void op_create(int base, const char *dir, int argc,
                                const char *const *argv)
{
	const char *ex[256], *out = NULL, *basem = NULL, *manifest = NULL;
	int nex = 0;
	for (int i = 3; i < argc; i++) {
		if (!strncmp(argv[i], "--exclude=", 10) && argv[i][10] &&
		    nex < 256)
			ex[nex++] = argv[i] + 10;
		else if (!strncmp(argv[i], "--out=", 6) && argv[i][6])
			out = argv[i] + 6;
		else if (!strncmp(argv[i], "--base=", 7) && argv[i][7])
			basem = argv[i] + 7;
		else if (!strncmp(argv[i], "--manifest=", 11) && argv[i][11])
			manifest = argv[i] + 11;
	}
	/* stdout is the archive's, unless it goes to a file */
	msgfd = out ? 1 : 2;
	int dfd = open_in(base, dir, O_RDONLY | O_DIRECTORY);
	if (dfd < 0)
		fail(-dfd, dir);
	struct walk w = {.ex = ex, .nex = nex, .mnt = mount_of(dfd, "")};
	if (out) {
		struct stat ost;
		out_fd = open_out(base, out);
		if (fstat(out_fd, &ost) < 0)
			fail(errno, out);
		w.out_dev = ost.st_dev;
		w.out_ino = ost.st_ino;
	}
	if (manifest)
		manifest_forget(base, manifest);
	w.old = basem ? mtab_load(base, basem) : NULL;
	dprintf(2, "M %s\n", w.old ? "delta" : "full");
	char *mtext = NULL;
	size_t mlen = 0;
	if (manifest) {
		if (!(w.man = open_memstream(&mtext, &mlen)))
			fail(ENOMEM, "manifest");
		fputs(MANIFEST_MAGIC, w.man);
		fputc('\0', w.man);
	}
	walk_dir(&w, dfd, 0, 0);
	dprintf(2, "T %llu\n", (unsigned long long)w.total);

	w.a = archive_write_new();
	w.lr = archive_entry_linkresolver_new();
	if (!w.a || !w.lr ||
	    archive_write_set_format_pax_restricted(w.a) != ARCHIVE_OK ||
	    archive_write_add_filter_zstd(w.a) != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(w.a, 65536) != ARCHIVE_OK ||
	    /* a stream: no padding after the compressed data */
	    archive_write_set_bytes_in_last_block(w.a, 1) != ARCHIVE_OK)
		fail(ENOMEM, w.a ? archive_error_string(w.a) : "libarchive");
	archive_entry_linkresolver_set_strategy(w.lr, archive_format(w.a));
	if (archive_write_open(w.a, NULL, NULL, out_write, NULL) != ARCHIVE_OK)
		fail(EIO, archive_error_string(w.a));
	walk_dir(&w, dfd, 0, 0);
	uint64_t deleted = 0;
	if (w.old) { /* what the base had and dir has not any more */
		char *gone = NULL;
		size_t glen = 0;
		FILE *g = open_memstream(&gone, &glen);
		for (size_t i = 0; g && i < w.old->cap; i++)
			if (w.old->v[i].path && !w.old->v[i].seen) {
				fputs(w.old->v[i].path, g);
				fputc('\0', g);
				deleted++;
			}
		if (!g || fclose(g) != 0)
			fail(ENOMEM, "deletions");
		if (glen) {
			struct archive_entry *e = archive_entry_new();
			archive_entry_copy_pathname(e, DELETED_MEMBER);
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_perm(e, 0600);
			archive_entry_set_size(e, (la_int64_t)glen);
			if (archive_write_header(w.a, e) < ARCHIVE_WARN ||
			    archive_write_data(w.a, gone, glen) < 0 ||
			    archive_write_finish_entry(w.a) < ARCHIVE_WARN)
				fail(archive_errno(w.a) > 0 ? archive_errno(w.a)
				                            : EIO,
				     archive_error_string(w.a));
			archive_entry_free(e);
		}
		free(gone);
	}
	archive_entry_linkresolver_free(w.lr);
	if (archive_write_close(w.a) != ARCHIVE_OK)
		fail(archive_errno(w.a) ? archive_errno(w.a) : EIO,
		     archive_error_string(w.a));
	if (w.man) {
		if (fclose(w.man) != 0)
			fail(ENOMEM, "manifest");
		manifest_write(base, manifest, mtext, mlen, basem);
	}
	dprintf(2, "C %llu %llu\n", (unsigned long long)w.entries,
	        (unsigned long long)deleted);
	dprintf(2, "P %llu\n", (unsigned long long)w.done);
	if (out) {
		struct stat ost;
		if (fsync(out_fd) < 0 || fstat(out_fd, &ost) < 0)
			fail(errno, out);
		dprintf(1, "OK %llu\n", (unsigned long long)ost.st_size);
	}
	_exit(0);
}

/* ---- unpack, commit, abort --------------------------------------------------
 */

/* dir's parent (opened beneath base, made when missing) and its last
 * part; dir must have one. */
static int open_parent_of(int base, const char *dir, char *leaf, size_t cap,
                          bool make)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(dir, '/');
	if (!slash || !slash[1] || strlen(slash + 1) >= cap ||
	    (size_t)(slash - dir) >= sizeof(parent))
		fail(EINVAL, "directory");
	memcpy(parent, dir, (size_t)(slash - dir));
	parent[slash - dir] = '\0';
	snprintf(leaf, cap, "%s", slash + 1);
	if (!strcmp(leaf, ".") || !strcmp(leaf, ".."))
		fail(EINVAL, "directory");
	if (make && *parent) { /* mkdir -p, one level at a time from base */
		for (char *p = parent + 1;; p++) {
			if (*p != '/' && *p)
				continue;
			char c = *p;
			*p = '\0';
			int fd = open_in(base, parent, O_PATH | O_DIRECTORY);
			if (fd == -ENOENT) {
				char *l = strrchr(parent, '/');
				*l = '\0';
				int up = open_in(base, *parent ? parent : "/",
				                 O_PATH | O_DIRECTORY);
				*l = '/';
				if (up < 0 || (mkdirat(up, l + 1, 0755) < 0 &&
				               errno != EEXIST))
					fail(up < 0 ? -up : errno,
					     "make parent");
				close(up);
			} else if (fd < 0) {
				fail(-fd, "parent directory");
			} else {
				close(fd);
			}
			*p = c;
			if (!c)
				break;
		}
	}
	int fd = open_in(base, *parent ? parent : "/", O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		fail(-fd, "parent directory");
	return fd;
}

/* A name archive-unpack made for leaf. */
static bool restore_name(const char *leaf, const char *tmp)
{
	size_t ll = strlen(leaf);
	return tmp[0] == '.' && !strncmp(tmp + 1, leaf, ll) &&
	       !strncmp(tmp + 1 + ll, RESTORE_MARK, strlen(RESTORE_MARK)) &&
	       !strchr(tmp, '/');
}

/* Leftovers of earlier restores of leaf that were cut short. */
static void remove_stale(int pfd, const char *leaf)
{
	int fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (restore_name(leaf, de->d_name))
			fs_remove_tree(pfd, de->d_name, NULL);
	if (d)
		closedir(d);
}

static int tmpfd_for_cleanup = -1;
static char tmpname[NAME_MAX + 1];

static _Noreturn void unpack_fail(int e, const char *what)
{
	if (tmpfd_for_cleanup >= 0)
		fs_remove_tree(tmpfd_for_cleanup, tmpname, NULL);
	fail(e, what);
}

/* The parent of rel below tfd, never through a link; -1 if there is none
 * (*leaf then undefined). */
static int delta_parent(int tfd, const char *rel, const char **leaf)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(rel, '/');
	*leaf = slash ? slash + 1 : rel;
	if (!slash)
		return fcntl(tfd, F_DUPFD_CLOEXEC, 0);
	if ((size_t)(slash - rel) >= sizeof(parent))
		return -1;
	memcpy(parent, rel, (size_t)(slash - rel));
	parent[slash - rel] = '\0';
	struct open_how how = {
	    .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
	    .resolve =
	        RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	return (int)syscall(SYS_openat2, tfd, parent, &how, sizeof(how));
}

static bool delta_path_ok(const char *p)
{
	if (!*p || *p == '/')
		return false;
	for (const char *c = p; c;) {
		const char *next = strchr(c, '/');
		size_t l = next ? (size_t)(next - c) : strlen(c);
		if (!l || (l == 1 && c[0] == '.') ||
		    (l == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		c = next ? next + 1 : NULL;
	}
	return true;
}

/* A delta's list of paths gone (the member's data): removed below tfd. */
static void apply_deletions(struct archive *a, int tfd, int64_t size)
{
	if (size < 0 || (uint64_t)size > MANIFEST_MAX)
		unpack_fail(EINVAL, "a delta's list of deletions is too big");
	char *list = malloc((size_t)size + 1);
	if (!list)
		unpack_fail(ENOMEM, "deletions");
	la_ssize_t n = archive_read_data(a, list, (size_t)size);
	if (n != (la_ssize_t)size)
		unpack_fail(EINVAL, "a delta's list of deletions is short");
	list[size] = '\0';
	for (char *p = list; p < list + size; p += strlen(p) + 1) {
		const char *leaf;
		if (!delta_path_ok(p))
			unpack_fail(EINVAL, "a delta deletes a bad path");
		int pfd = delta_parent(tfd, p, &leaf);
		if (pfd < 0)
			continue; /* its parent went too */
		fs_remove_tree(pfd, leaf, NULL);
		close(pfd);
	}
	free(list);
}

/* A delta's entry where dir's had another type: the old one goes (a
 * directory would not give way to a file). */
static void replace_other_type(int tfd, struct archive_entry *e)
{
	const char *rel = archive_entry_pathname(e), *leaf;
	struct stat st;
	if (!rel || !delta_path_ok(rel))
		return; /* libarchive's checks refuse it */
	int pfd = delta_parent(tfd, rel, &leaf);
	if (pfd < 0)
		return;
	bool dir =
	    archive_entry_filetype(e) == AE_IFDIR && !archive_entry_hardlink(e);
	if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISDIR(st.st_mode) != dir)
		fs_remove_tree(pfd, leaf, NULL);
	close(pfd);
}

static _Noreturn void op_unpack(int base, const char *dir, const char *in,
                                const char *into)
{
	char leaf[NAME_MAX + 1];
	if (in) { /* the archive from a file of the sandbox's, not stdin */
		int fd = open_in(base, in, O_RDONLY);
		if (fd < 0 || dup2(fd, 0) < 0)
			fail(fd < 0 ? -fd : errno, in);
		close(fd);
	}
	int pfd = open_parent_of(base, dir, leaf, sizeof(leaf), true);
	if (into) { /* a delta onto what an earlier unpack made */
		if (!restore_name(leaf, into) ||
		    strlen(into) >= sizeof(tmpname))
			fail(EINVAL, "not a restore of that directory");
		snprintf(tmpname, sizeof(tmpname), "%s", into);
	} else {
		remove_stale(pfd, leaf);
		if (snprintf(tmpname, sizeof(tmpname), ".%s" RESTORE_MARK "%d",
		             leaf, (int)getpid()) >= (int)sizeof(tmpname))
			fail(ENAMETOOLONG, "directory name");
		if (mkdirat(pfd, tmpname, 0755) < 0)
			fail(errno, "make the directory to restore into");
	}
	tmpfd_for_cleanup = pfd;
	int tfd = openat(pfd, tmpname,
	                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tfd < 0 || fchdir(tfd) < 0)
		unpack_fail(errno, "enter the directory to restore into");
	umask(022);

	struct archive *a = archive_read_new();
	struct archive *ext = archive_write_disk_new();
	if (!a || !ext)
		unpack_fail(ENOMEM, "libarchive");
	/* only what archive-create writes: tar, plain or zstd */
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_none(a);
	archive_read_support_format_tar(a);
	archive_write_disk_set_options(
	    ext, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
	             ARCHIVE_EXTRACT_SECURE_SYMLINKS |
	             ARCHIVE_EXTRACT_SECURE_NODOTDOT |
	             ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
	if (archive_read_open_fd(a, 0, 65536) != ARCHIVE_OK)
		unpack_fail(EINVAL, archive_error_string(a));
	uint64_t files = 0;
	for (;;) {
		struct archive_entry *e;
		int r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN)
			unpack_fail(archive_errno(a) > 0 ? archive_errno(a)
			                                 : EINVAL,
			            archive_error_string(a));
		const char *name = archive_entry_pathname(e);
		if (name && !strcmp(name, DELETED_MEMBER)) {
			if (!into)
				unpack_fail(EINVAL,
				            "deletions in a full archive");
			apply_deletions(a, tfd, archive_entry_size(e));
			continue;
		}
		if (into)
			replace_other_type(tfd, e);
		mode_t t = archive_entry_filetype(e);
		if (t != AE_IFREG && t != AE_IFDIR && t != AE_IFLNK &&
		    t != AE_IFIFO && !archive_entry_hardlink(e))
			continue; /* devices and sockets: never made */
		archive_entry_set_perm(e, archive_entry_perm(e) & 01777);
		r = archive_write_header(ext, e);
		if (r < ARCHIVE_WARN)
			unpack_fail(archive_errno(ext) > 0 ? archive_errno(ext)
			                                   : EINVAL,
			            archive_error_string(ext));
		if (archive_entry_size(e) > 0) {
			const void *buf;
			size_t len;
			int64_t off;
			while ((r = archive_read_data_block(
			            a, &buf, &len, &off)) == ARCHIVE_OK) {
				if (archive_write_data_block(
				        ext, buf, len, off) < ARCHIVE_WARN)
					unpack_fail(archive_errno(ext) > 0
					                ? archive_errno(ext)
					                : EIO,
					            archive_error_string(ext));
			}
			if (r < ARCHIVE_WARN)
				unpack_fail(archive_errno(a) > 0
				                ? archive_errno(a)
				                : EINVAL,
				            archive_error_string(a));
		}
		if (archive_write_finish_entry(ext) < ARCHIVE_WARN)
			unpack_fail(archive_errno(ext) > 0 ? archive_errno(ext)
			                                   : EIO,
			            archive_error_string(ext));
		files++;
	}
	if (archive_write_close(ext) != ARCHIVE_OK)
		unpack_fail(archive_errno(ext) > 0 ? archive_errno(ext) : EIO,
		            archive_error_string(ext));
	archive_read_free(a);
	archive_write_free(ext);
	dprintf(1, "OK %s %llu\n", tmpname, (unsigned long long)files);
	_exit(0);
}

/* Move every entry of from into to (renames within one file system);
 * an entry that will not move (EXDEV: a directory overlayfs merges from
 * its lower layer) is removed instead when remove_stuck. */
static void move_entries(int from, int to, bool remove_stuck)
{
	int fd = openat(from, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d)
		fail(errno, "open directory");
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (renameat(dirfd(d), de->d_name, to, de->d_name) == 0)
			continue;
		if (!remove_stuck || errno != EXDEV ||
		    fs_remove_tree(dirfd(d), de->d_name, NULL) < 0)
			fail(errno ? errno : EIO, de->d_name);
	}
	closedir(d);
}

/* A directory that cannot be renamed (overlayfs refuses to rename one
 * that its lower layer has, as /workspace): its entries go aside, the
 * restored ones move in. Not one step, as a rename is; the window is the
 * few renames of the top-level entries. */
static void move_contents(int pfd, const char *leaf, const char *tmp)
{
	char old[NAME_MAX + 1];
	if (snprintf(old, sizeof(old), ".%s" RESTORE_MARK "old-%d", leaf,
	             (int)getpid()) >= (int)sizeof(old))
		fail(ENAMETOOLONG, "directory name");
	int dfd =
	    openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int tfd =
	    openat(pfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || tfd < 0 || mkdirat(pfd, old, 0700) < 0)
		fail(errno, "open directory");
	int ofd =
	    openat(pfd, old, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ofd < 0)
		fail(errno, "open directory");
	move_entries(dfd, ofd, true);
	move_entries(tfd, dfd, false);
	fs_remove_tree(pfd, old, NULL);
	unlinkat(pfd, tmp, AT_REMOVEDIR);
}

/* dir's manifest (archive-create's) to path, once a restore is in place:
 * the base of the next delta. */
static void commit_manifest(int base, const char *dir, const char *path)
{
	manifest_forget(base, path);
	pid_t pid = fork(); /* its failure fails not the restore */
	if (pid != 0) {
		int st;
		while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		return;
	}
	failtag = 'W';
	int dfd = open_in(base, dir, O_RDONLY | O_DIRECTORY);
	if (dfd < 0)
		fail(-dfd, dir);
	char *mtext = NULL;
	size_t mlen = 0;
	struct walk w = {.mnt = mount_of(dfd, ""), .manifest_only = true};
	if (!(w.man = open_memstream(&mtext, &mlen)))
		fail(ENOMEM, "manifest");
	fputs(MANIFEST_MAGIC, w.man);
	fputc('\0', w.man);
	walk_dir(&w, dfd, 0, 0);
	if (fclose(w.man) != 0)
		fail(ENOMEM, "manifest");
	manifest_write_now(base, path, mtext, mlen, NULL);
	_exit(0);
}

static _Noreturn void op_commit(int base, const char *dir, const char *tmp,
                                bool abort, const char *manifest)
{
	char leaf[NAME_MAX + 1];
	int pfd = open_parent_of(base, dir, leaf, sizeof(leaf), false);
	if (!restore_name(leaf, tmp))
		fail(EINVAL, "not a restore of that directory");
	if (abort) {
		if (fs_remove_tree(pfd, tmp, NULL) < 0)
			fail(errno ? errno : EIO, "remove");
		dprintf(1, "OK\n");
		_exit(0);
	}
	struct stat st;
	if (fstatat(pfd, tmp, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(st.st_mode))
		fail(ENOENT, "the restored directory is gone");
	if (renameat2(pfd, tmp, pfd, leaf, RENAME_EXCHANGE) == 0) {
		/* tmp holds what dir held */
		fs_remove_tree(pfd, tmp, NULL);
	} else if (errno == ENOENT) {
		if (renameat2(pfd, tmp, pfd, leaf, RENAME_NOREPLACE) < 0)
			fail(errno, "rename into place");
	} else if (errno == EXDEV) {
		move_contents(pfd, leaf, tmp);
	} else {
		fail(errno, "swap into place");
	}
	if (manifest)
		commit_manifest(base, dir, manifest);
	dprintf(1, "OK\n");
	_exit(0);
}

/* The value of option name (as "--name=") among argv[from...], or NULL. */
static const char *opt(int argc, const char *const *argv, int from,
                       const char *name)
{
	size_t l = strlen(name);
	for (int i = from; i < argc; i++)
		if (!strncmp(argv[i], name, l) && argv[i][l])
			return argv[i] + l;
	return NULL;
}

_Noreturn void builtin_archive(int base, int argc, const char *const *argv)
{
	const char *op = argv[0], *dir = argv[2];
	confine = strcmp(argv[1], "/") ? RESOLVE_BENEATH : RESOLVE_IN_ROOT;
	if (!strcmp(op, "archive-create"))
		op_create(base, dir, argc, argv);
	if (!strcmp(op, "archive-unpack"))
		op_unpack(base, dir, opt(argc, argv, 3, "--in="),
		          opt(argc, argv, 3, "--into="));
	if (!strcmp(op, "archive-commit") && argc >= 4)
		op_commit(base, dir, argv[3], false,
		          opt(argc, argv, 4, "--manifest="));
	if (!strcmp(op, "archive-abort") && argc >= 4)
		op_commit(base, dir, argv[3], true, NULL);
	fail(EINVAL, "unknown operation");
}
