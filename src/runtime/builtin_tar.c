/* persist and hydrate: the tar of /workspace made, and the one unpacked
 * into it, by the daemon's own code running as a builtin (builtin.h)
 * inside the sandbox, never by a `tar` binary there. The sandbox can write
 * every path of its filesystem, /usr included (its overlay's upper layer),
 * and with it the dynamic loader, libc and /etc/ld.so.preload that any
 * exec'd binary would load: no binary run in the sandbox is fixed, not
 * even a host one passed in by fd. A builtin runs code already in memory.
 * It still runs as the sandbox (its uid range, limits, seccomp), so what
 * it archives is the sandbox's to choose: an archive made by persist is
 * hostile input to whoever reads it (docs/security.md).
 *
 *   tar   base path [--exclude=PATTERN]...
 *         stdout: a POSIX tar (ustar; pax headers for long names and links
 *         and big sizes) of base/path, members named "./<rel>"; regular
 *         files, directories, symlinks, hard links (as links, as far as
 *         a bounded table tracks them) and FIFOs; sockets and devices are
 *         skipped. A PATTERN (fnmatch, matched against <rel>, a match
 *         also excluding what is below) leaves a member out.
 *   untar base path
 *         stdin: a tar (ustar, pax, GNU long names), unpacked beneath
 *         base/path: leading "/" dropped, a name with ".." refused, every
 *         path resolved with RESOLVE_BENEATH (a link in the archive never
 *         leads a later member out), an existing file or link replaced
 *         (never written through), files owned by whoever runs this.
 * Problems go to stderr as "tar: ..." lines; the exit status is 2 after
 * any (what could be done is done), 0 otherwise. */
#include "runtime/builtin.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BLOCK 512
#define IOBUF (64u << 10)
#define META_MAX (1u << 20) /* a long name or pax header, at most */
#define LINKS_MAX 65536     /* hard links remembered while archiving */
#define DELAYED_MAX 65536   /* directory modes set at the end */

struct ustar {
	char name[100], mode[8], uid[8], gid[8], size[12], mtime[12];
	char chksum[8], typeflag, linkname[100], magic[6], version[2];
	char uname[32], gname[32], devmajor[8], devminor[8], prefix[155];
	char pad[12];
};
_Static_assert(sizeof(struct ustar) == BLOCK, "a tar header is one block");

static int status;

static void complain(const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	dprintf(2, "tar: %s\n", msg);
	status = 2;
}

static int beneath(int base, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
	    .flags = (unsigned long long)(flags | O_CLOEXEC),
	    .mode = mode,
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	int fd = -1;
	for (int tries = 0; tries < 64; tries++) {
		fd = (int)syscall(SYS_openat2, base, path, &how, sizeof(how));
		if (fd >= 0 || errno != EAGAIN)
			break;
	}
	return fd;
}

/* ---- writing ------------------------------------------------------------ */

static char obuf[IOBUF];
static size_t olen;

static void out_flush(void)
{
	for (size_t off = 0; off < olen;) {
		ssize_t n = write(1, obuf + off, olen - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(2); /* the reader is gone: nothing more to do */
		off += (size_t)n;
	}
	olen = 0;
}

static void out(const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		size_t k = sizeof(obuf) - olen < n ? sizeof(obuf) - olen : n;
		memcpy(obuf + olen, c, k);
		olen += k;
		c += k;
		n -= k;
		if (olen == sizeof(obuf))
			out_flush();
	}
}

static void out_zeros(size_t n)
{
	static const char zero[BLOCK];
	while (n) {
		size_t k = n < sizeof(zero) ? n : sizeof(zero);
		out(zero, k);
		n -= k;
	}
}

/* v in octal, right-aligned in a field of w bytes (NUL last); false when
 * it does not fit. */
static bool octal(char *f, size_t w, uint64_t v)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "%0*llo", (int)(w - 1),
	                 (unsigned long long)v);
	if (n < 0 || (size_t)n > w - 1)
		return false;
	memcpy(f, tmp, w - 1);
	f[w - 1] = '\0';
	return true;
}

/* One pax record: "<len> key=value\n", its length counting itself. */
static void pax_record(char **buf, size_t *len, size_t *cap, const char *key,
                       const char *val)
{
	size_t body = strlen(key) + strlen(val) + 3; /* ' ' '=' '\n' */
	size_t total = body + 1;
	for (int digits = 1;; digits++) {
		total = body + (size_t)digits;
		char tmp[24];
		if ((size_t)snprintf(tmp, sizeof(tmp), "%zu", total) ==
		    (size_t)digits)
			break;
	}
	if (*len + total + 1 > *cap) {
		size_t ncap = (*len + total + 1) * 2;
		char *nb = realloc(*buf, ncap);
		if (!nb)
			_exit(2);
		*buf = nb;
		*cap = ncap;
	}
	*len += (size_t)snprintf(*buf + *len, *cap - *len, "%zu %s=%s\n", total,
	                         key, val);
}

static void header_sum(struct ustar *h)
{
	unsigned sum = 0;
	memset(h->chksum, ' ', sizeof(h->chksum));
	for (size_t i = 0; i < BLOCK; i++)
		sum += ((unsigned char *)h)[i];
	snprintf(h->chksum, sizeof(h->chksum), "%06o", sum);
	h->chksum[7] = ' ';
}

/* A member's header (and a pax header before it where ustar's fields
 * cannot hold the name, link or size). */
static void emit_header(const char *name, char type, const struct stat *st,
                        uint64_t size, const char *link)
{
	struct ustar h;
	char *pax = NULL;
	size_t plen = 0, pcap = 0;
	memset(&h, 0, sizeof(h));
	if (strlen(name) > sizeof(h.name))
		pax_record(&pax, &plen, &pcap, "path", name);
	if (link && strlen(link) > sizeof(h.linkname))
		pax_record(&pax, &plen, &pcap, "linkpath", link);
	if (!octal(h.size, sizeof(h.size), size)) {
		char v[24];
		snprintf(v, sizeof(v), "%llu", (unsigned long long)size);
		pax_record(&pax, &plen, &pcap, "size", v);
	}
	if (pax) {
		struct ustar x;
		memset(&x, 0, sizeof(x));
		snprintf(x.name, sizeof(x.name), "./PaxHeaders/%.80s",
		         strrchr(name, '/') && strrchr(name, '/')[1]
		             ? strrchr(name, '/') + 1
		             : "x");
		octal(x.mode, sizeof(x.mode), 0644);
		octal(x.uid, sizeof(x.uid), 0);
		octal(x.gid, sizeof(x.gid), 0);
		octal(x.size, sizeof(x.size), plen);
		octal(x.mtime, sizeof(x.mtime), 0);
		x.typeflag = 'x';
		memcpy(x.magic, "ustar", 6);
		memcpy(x.version, "00", 2);
		header_sum(&x);
		out(&x, sizeof(x));
		out(pax, plen);
		out_zeros((BLOCK - plen % BLOCK) % BLOCK);
		free(pax);
	}
	/* not NUL-ended when full, as ustar allows */
	memcpy(h.name, name, strnlen(name, sizeof(h.name)));
	octal(h.mode, sizeof(h.mode), st->st_mode & 07777);
	if (!octal(h.uid, sizeof(h.uid), st->st_uid))
		octal(h.uid, sizeof(h.uid), 0);
	if (!octal(h.gid, sizeof(h.gid), st->st_gid))
		octal(h.gid, sizeof(h.gid), 0);
	if (!octal(h.size, sizeof(h.size), size))
		octal(h.size, sizeof(h.size), 0);
	octal(h.mtime, sizeof(h.mtime),
	      st->st_mtim.tv_sec > 0 ? (uint64_t)st->st_mtim.tv_sec : 0);
	h.typeflag = type;
	if (link)
		memcpy(h.linkname, link, strnlen(link, sizeof(h.linkname)));
	memcpy(h.magic, "ustar", 6);
	memcpy(h.version, "00", 2);
	header_sum(&h);
	out(&h, sizeof(h));
}

/* Hard links seen (dev, ino) -> the member name first stored. */
static struct hl {
	dev_t dev;
	ino_t ino;
	char *name;
} * links;
static size_t nlinks;

static const char *link_seen(const struct stat *st, const char *name)
{
	if (!links && !(links = calloc(LINKS_MAX * 2, sizeof(*links))))
		return NULL;
	size_t i =
	    (size_t)((st->st_ino * 2654435761u) ^ st->st_dev) % (LINKS_MAX * 2);
	for (; links[i].name; i = (i + 1) % (LINKS_MAX * 2))
		if (links[i].dev == st->st_dev && links[i].ino == st->st_ino)
			return links[i].name;
	if (nlinks < LINKS_MAX && (links[i].name = strdup(name))) {
		links[i].dev = st->st_dev;
		links[i].ino = st->st_ino;
		nlinks++;
	}
	return NULL;
}

static void emit_file(int dir, const char *leaf, const char *name,
                      const struct stat *lst)
{
	int fd =
	    openat(dir, leaf,
	           O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_ino != lst->st_ino) {
		complain("%s: cannot open: %s", name,
		         fd < 0 ? strerror(errno) : "changed while read");
		if (fd >= 0)
			close(fd);
		return;
	}
	uint64_t size = (uint64_t)st.st_size, left = size;
	emit_header(name, '0', &st, size, NULL);
	while (left) {
		size_t want = left < IOBUF ? (size_t)left : IOBUF;
		if (sizeof(obuf) - olen < want)
			out_flush();
		ssize_t n = read(
		    fd, obuf + olen,
		    want < sizeof(obuf) - olen ? want : sizeof(obuf) - olen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) { /* it shrank: keep the archive whole */
			complain("%s: file shrank by %llu bytes; padding with "
			         "zeros",
			         name, (unsigned long long)left);
			out_zeros(left);
			break;
		}
		olen += (size_t)n;
		left -= (uint64_t)n;
	}
	close(fd);
	out_zeros((BLOCK - size % BLOCK) % BLOCK);
}

/* The path being walked: "./a/b", grown as needed. */
static char *path;
static size_t path_cap;

static size_t path_set(size_t at, const char *leaf)
{
	size_t n = strlen(leaf);
	if (at + n + 3 > path_cap) {
		size_t cap = (at + n + 3) * 2;
		char *p = realloc(path, cap);
		if (!p)
			_exit(2);
		path = p;
		path_cap = cap;
	}
	if (at && path[at - 1] != '/')
		path[at++] = '/';
	memcpy(path + at, leaf, n + 1);
	return at + n;
}

static bool excluded(const char *rel, const char *const *ex, int nex)
{
	for (int i = 0; i < nex; i++)
		if (fnmatch(ex[i], rel, FNM_LEADING_DIR) == 0)
			return true;
	return false;
}

struct frame {
	DIR *d;
	size_t len; /* of path for this directory */
};

static _Noreturn void tar_create(int base, const char *where,
                                 const char *const *ex, int nex)
{
	int top = beneath(base, where, O_RDONLY | O_DIRECTORY, 0);
	struct stat st;
	if (top < 0 || fstat(top, &st) < 0) {
		complain("%s: cannot open: %s", where, strerror(errno));
		_exit(2);
	}
	size_t cap = 64, depth = 0;
	struct frame *stack = malloc(cap * sizeof(*stack));
	if (!stack || !(stack[0].d = fdopendir(top)))
		_exit(2);
	stack[0].len = path_set(0, ".");
	emit_header("./", '5', &st, 0, NULL);
	for (;;) {
		struct frame *f = &stack[depth];
		struct dirent *e = readdir(f->d);
		if (!e) {
			closedir(f->d);
			if (depth-- == 0)
				break;
			continue;
		}
		const char *leaf = e->d_name;
		if (leaf[0] == '.' &&
		    (!leaf[1] || (leaf[1] == '.' && !leaf[2])))
			continue;
		size_t len = path_set(f->len, leaf);
		const char *rel = path + 2; /* past "./" */
		int dfd = dirfd(f->d);
		if (nex && excluded(rel, ex, nex))
			continue;
		if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			complain("%s: cannot stat: %s", path, strerror(errno));
			continue;
		}
		if (S_ISREG(st.st_mode)) {
			const char *first =
			    st.st_nlink > 1 ? link_seen(&st, path) : NULL;
			if (first)
				emit_header(path, '1', &st, 0, first);
			else
				emit_file(dfd, leaf, path, &st);
		} else if (S_ISLNK(st.st_mode)) {
			char target[4096];
			ssize_t n =
			    readlinkat(dfd, leaf, target, sizeof(target) - 1);
			if (n < 0) {
				complain("%s: cannot readlink: %s", path,
				         strerror(errno));
				continue;
			}
			target[n] = '\0';
			emit_header(path, '2', &st, 0, target);
		} else if (S_ISFIFO(st.st_mode)) {
			emit_header(path, '6', &st, 0, NULL);
		} else if (S_ISDIR(st.st_mode)) {
			path[len] = '/'; /* path_set left room */
			path[len + 1] = '\0';
			emit_header(path, '5', &st, 0, NULL);
			path[len] = '\0';
			int sub = openat(dfd, leaf,
			                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			                     O_CLOEXEC);
			DIR *d = sub >= 0 ? fdopendir(sub) : NULL;
			if (!d) {
				complain("%s: cannot open: %s", path,
				         strerror(errno));
				if (sub >= 0)
					close(sub);
				continue;
			}
			if (depth + 1 == cap) {
				struct frame *ns =
				    realloc(stack, cap * 2 * sizeof(*ns));
				if (!ns)
					_exit(2);
				stack = ns;
				cap *= 2;
			}
			stack[++depth] = (struct frame){d, len};
		}
		/* sockets and devices: not archived */
	}
	out_zeros(2 * BLOCK); /* the end of the archive */
	out_flush();
	_exit(status);
}

/* ---- reading ------------------------------------------------------------ */

static char ibuf[IOBUF];
static size_t ipos, ilen;
static uint64_t consumed;

/* n bytes of stdin into p (NULL: skip them); false at EOF first. */
static bool in(void *p, uint64_t n)
{
	char *c = p;
	while (n) {
		if (ipos == ilen) {
			ssize_t r = read(0, ibuf, sizeof(ibuf));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return false;
			ipos = 0;
			ilen = (size_t)r;
		}
		size_t k = ilen - ipos < n ? ilen - ipos : (size_t)n;
		if (c) {
			memcpy(c, ibuf + ipos, k);
			c += k;
		}
		ipos += k;
		n -= k;
		consumed += k;
	}
	return true;
}

static void drain(void)
{
	while (read(0, ibuf, sizeof(ibuf)) > 0 || errno == EINTR)
		;
}

static bool parse_num(const char *f, size_t w, uint64_t *v)
{
	const unsigned char *u = (const unsigned char *)f;
	*v = 0;
	if (u[0] & 0x80) { /* base-256, GNU's for big values */
		if (u[0] != 0x80)
			return false; /* negative, or beyond 64 bits */
		for (size_t i = 1; i < w; i++) {
			if (*v >> 56)
				return false;
			*v = (*v << 8) | u[i];
		}
		return true;
	}
	size_t i = 0;
	while (i < w && f[i] == ' ')
		i++;
	bool any = false;
	for (; i < w && f[i] >= '0' && f[i] <= '7'; i++) {
		if (*v >> 61)
			return false;
		*v = (*v << 3) | (uint64_t)(f[i] - '0');
		any = true;
	}
	for (; i < w; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return false;
	return any || f[0] == '\0' || f[0] == ' ';
}

static bool sum_ok(const struct ustar *h)
{
	uint64_t want;
	unsigned usum = 0;
	int ssum = 0;
	if (!parse_num(h->chksum, sizeof(h->chksum), &want))
		return false;
	for (size_t i = 0; i < BLOCK; i++) {
		bool in_sum = i >= offsetof(struct ustar, chksum) &&
		              i < offsetof(struct ustar, chksum) + 8;
		unsigned char c = in_sum ? ' ' : ((const unsigned char *)h)[i];
		usum += c;
		ssum += (signed char)c;
	}
	return want == usum || want == (uint64_t)(unsigned)ssum;
}

static bool all_zero(const void *p)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < BLOCK; i++)
		if (c[i])
			return false;
	return true;
}

/* What compressed data starts with: a clearer answer than "not a tar". */
static const char *compressed(const unsigned char *b)
{
	if (b[0] == 0x1f && b[1] == 0x8b)
		return "gzip";
	if (b[0] == 'B' && b[1] == 'Z' && b[2] == 'h')
		return "bzip2";
	if (b[0] == 0xfd && b[1] == '7' && b[2] == 'z' && b[3] == 'X')
		return "xz";
	if (b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd)
		return "zstd";
	return NULL;
}

/* A member's name made relative and safe: leading "/" and "." parts
 * dropped, "" for the root; false when it has a ".." part. */
static bool clean_name(char *s)
{
	char *w = s;
	for (char *p = s; *p;) {
		while (*p == '/')
			p++;
		char *end = p + strcspn(p, "/");
		size_t n = (size_t)(end - p);
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return false;
		if (n && !(n == 1 && p[0] == '.')) {
			if (w != s)
				*w++ = '/';
			memmove(w, p, n);
			w += n;
		}
		p = end;
	}
	*w = '\0';
	return true;
}

/* The parent directory of rel beneath the top (made as needed, each level
 * resolved from the top, so no link leads out), and the last part. */
static int parent_of(int top, char *rel, const char **leaf)
{
	char *slash = strrchr(rel, '/');
	if (!slash) {
		*leaf = rel;
		return fcntl(top, F_DUPFD_CLOEXEC, 0);
	}
	*slash = '\0';
	*leaf = slash + 1;
	int fd = beneath(top, rel, O_PATH | O_DIRECTORY, 0);
	if (fd < 0 && errno == ENOENT) {
		for (char *p = rel;;) { /* mkdir -p, one level at a time */
			char *end = p + strcspn(p, "/");
			char c = *end;
			int dir, e = 0;
			*end = '\0';
			if (p == rel) {
				dir = fcntl(top, F_DUPFD_CLOEXEC, 0);
			} else {
				p[-1] = '\0';
				dir =
				    beneath(top, rel, O_PATH | O_DIRECTORY, 0);
				p[-1] = '/';
			}
			if (dir < 0 ||
			    (mkdirat(dir, p, 0755) < 0 && errno != EEXIST))
				e = errno;
			if (dir >= 0)
				close(dir);
			*end = c;
			if (e) {
				*slash = '/';
				errno = e;
				return -1;
			}
			if (!c)
				break;
			p = end + 1;
		}
		fd = beneath(top, rel, O_PATH | O_DIRECTORY, 0);
	}
	int e = errno;
	*slash = '/';
	errno = e;
	return fd;
}

/* Make way for a new entry: an existing file, link or FIFO goes (it is
 * replaced, never written through); a directory stays. */
static int make_way(int dir, const char *leaf, bool want_dir)
{
	struct stat st;
	if (fstatat(dir, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISDIR(st.st_mode))
		return want_dir ? 1 : -EISDIR;
	return unlinkat(dir, leaf, 0) < 0 ? -errno : 0;
}

static struct delayed {
	char *rel;
	mode_t mode;
} * delayed;
static size_t ndelayed;

static void set_dir_mode(int top, const char *rel, mode_t mode)
{
	int fd = beneath(top, rel, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 || fchmod(fd, mode) < 0)
		complain("%s: cannot chmod: %s", rel, strerror(errno));
	if (fd >= 0)
		close(fd);
}

static bool write_data(int fd, uint64_t size, const char *name)
{
	bool ok = true;
	while (size) {
		size_t k = size < sizeof(obuf) ? (size_t)size : sizeof(obuf);
		if (!in(obuf, k))
			return false;
		size -= k;
		for (size_t off = 0; ok && off < k;) {
			ssize_t n = write(fd, obuf + off, k - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				complain("%s: cannot write: %s", name,
				         strerror(errno));
				ok = false;
				break;
			}
			off += (size_t)n;
		}
	}
	return true;
}

static _Noreturn void tar_extract(int base, const char *where)
{
	int top = beneath(base, where, O_PATH | O_DIRECTORY, 0);
	if (top < 0) {
		complain("%s: cannot open: %s", where, strerror(errno));
		drain();
		_exit(2);
	}
	char *longname = NULL, *longlink = NULL;
	uint64_t paxsize = 0;
	bool have_paxsize = false, seen = false;
	for (;;) {
		struct ustar h;
		memset(&h, 0, sizeof(h));
		if (!in(&h, sizeof(h))) {
			const char *z =
			    seen ? NULL : compressed((unsigned char *)&h);
			if (z)
				complain("the archive is %s-compressed: send a "
				         "plain tar",
				         z);
			else if (!seen)
				complain(
				    "This does not look like a tar archive");
			else if (consumed % BLOCK || longname || longlink)
				complain("unexpected end of the archive");
			break; /* ending without the two zero blocks: fine */
		}
		if (all_zero(&h))
			break; /* the end (or an empty archive) */
		if (!sum_ok(&h)) {
			const char *z =
			    seen ? NULL : compressed((unsigned char *)&h);
			if (z)
				complain("the archive is %s-compressed: send a "
				         "plain tar",
				         z);
			else if (!seen)
				complain(
				    "This does not look like a tar archive");
			else
				complain(
				    "a damaged header at byte %llu; stopping",
				    (unsigned long long)(consumed - BLOCK));
			break;
		}
		seen = true;
		uint64_t size;
		if (!parse_num(h.size, sizeof(h.size), &size)) {
			complain("a damaged size at byte %llu; stopping",
			         (unsigned long long)(consumed - BLOCK));
			break;
		}
		if (have_paxsize && h.typeflag != 'x' && h.typeflag != 'L' &&
		    h.typeflag != 'K')
			size = paxsize;
		uint64_t padded = size + (BLOCK - size % BLOCK) % BLOCK;
		char type = h.typeflag;
		if (type == 'L' || type == 'K' || type == 'x') {
			if (size > META_MAX) {
				complain(
				    "a %llu-byte extended header; stopping",
				    (unsigned long long)size);
				break;
			}
			char *meta = malloc(size + 1);
			if (!meta || !in(meta, size) ||
			    !in(NULL, padded - size)) {
				complain("unexpected end of the archive");
				free(meta);
				break;
			}
			meta[size] = '\0';
			if (type == 'L') {
				free(longname);
				longname = meta;
			} else if (type == 'K') {
				free(longlink);
				longlink = meta;
			} else {
				/* pax records: "<len> key=value\n" */
				for (char *p = meta; p < meta + size;) {
					char *end;
					unsigned long rl = strtoul(p, &end, 10);
					if (!rl || *end != ' ' ||
					    rl > (size_t)(meta + size - p))
						break;
					char *rec = end + 1, *stop = p + rl - 1;
					char *eq = memchr(rec, '=',
					                  (size_t)(stop - rec));
					if (eq && *stop == '\n') {
						*eq = '\0';
						*stop = '\0';
						if (!strcmp(rec, "path")) {
							free(longname);
							longname =
							    strdup(eq + 1);
						} else if (!strcmp(
						               rec,
						               "linkpath")) {
							free(longlink);
							longlink =
							    strdup(eq + 1);
						} else if (!strcmp(rec,
						                   "size")) {
							paxsize = strtoull(
							    eq + 1, NULL, 10);
							have_paxsize = true;
						}
					}
					p += rl;
				}
				free(meta);
			}
			continue;
		}
		char namebuf[sizeof(h.prefix) + sizeof(h.name) + 2];
		char *name;
		if (longname) {
			name = longname;
		} else {
			bool posix = !memcmp(h.magic, "ustar", 6);
			size_t pl =
			    posix ? strnlen(h.prefix, sizeof(h.prefix)) : 0;
			snprintf(namebuf, sizeof(namebuf), "%.*s%s%.*s",
			         (int)pl, h.prefix, pl ? "/" : "",
			         (int)strnlen(h.name, sizeof(h.name)), h.name);
			name = namebuf;
		}
		char linkbuf[sizeof(h.linkname) + 1];
		const char *link = longlink;
		if (!link) {
			snprintf(linkbuf, sizeof(linkbuf), "%.*s",
			         (int)strnlen(h.linkname, sizeof(h.linkname)),
			         h.linkname);
			link = linkbuf;
		}
		uint64_t mode = 0644, mtime = 0;
		parse_num(h.mode, sizeof(h.mode), &mode);
		parse_num(h.mtime, sizeof(h.mtime), &mtime);
		mode &= 07777;
		char shown[300];
		snprintf(shown, sizeof(shown), "%.280s", name);
		bool data_read = false;
		if (!clean_name(name)) {
			complain("%s: a member name with \"..\"; skipped",
			         shown);
		} else if (!*name || type == 'g' || type == 'V') {
			/* the top itself ("./": its mode stays the sandbox's),
			 * global pax records, a volume label: nothing to do */
		} else {
			const char *leaf;
			int dir = parent_of(top, name, &leaf);
			int r;
			if (dir < 0) {
				complain("%s: cannot make its directory: %s",
				         shown, strerror(errno));
			} else if (type == '5') {
				r = make_way(dir, leaf, true);
				if (r == 0 && mkdirat(dir, leaf, 0700) < 0)
					r = -errno;
				if (r < 0) {
					complain("%s: cannot mkdir: %s", shown,
					         strerror(-r));
				} else if ((mode & 0700) != 0700 &&
				           ndelayed < DELAYED_MAX &&
				           (delayed ||
				            (delayed =
				                 calloc(DELAYED_MAX,
				                        sizeof(*delayed)))) &&
				           (delayed[ndelayed].rel =
				                strdup(name))) {
					/* a directory we could not write into
					 * gets its mode once it is filled */
					delayed[ndelayed++].mode = (mode_t)mode;
				} else {
					set_dir_mode(top, name, (mode_t)mode);
				}
			} else if (type == '0' || type == '\0' || type == '7') {
				int fd = -1;
				r = make_way(dir, leaf, false);
				if (r == 0)
					fd =
					    openat(dir, leaf,
					           O_WRONLY | O_CREAT | O_EXCL |
					               O_NOFOLLOW | O_CLOEXEC,
					           0600);
				if (r == 0 && fd < 0)
					r = -errno;
				if (r < 0) {
					complain("%s: cannot create: %s", shown,
					         strerror(-r));
				} else {
					data_read = true;
					if (!write_data(fd, size, shown)) {
						close(fd);
						close(dir);
						complain("unexpected end of "
						         "the archive");
						break;
					}
					in(NULL, padded - size);
					struct timespec ts[2] = {
					    {.tv_nsec = UTIME_OMIT},
					    {.tv_sec = (time_t)mtime}};
					if (fchmod(fd, (mode_t)mode) < 0 ||
					    futimens(fd, ts) < 0)
						complain(
						    "%s: cannot set mode: %s",
						    shown, strerror(errno));
					close(fd);
				}
			} else if (type == '2') {
				r = make_way(dir, leaf, false);
				if (r == 0 && symlinkat(link, dir, leaf) < 0)
					r = -errno;
				if (r < 0)
					complain("%s: cannot symlink: %s",
					         shown, strerror(-r));
			} else if (type == '1') {
				char *t = strdup(link);
				const char *tleaf;
				int tdir = -1;
				r = -EINVAL;
				if (t && clean_name(t) && *t &&
				    (tdir = parent_of(top, t, &tleaf)) >= 0) {
					r = make_way(dir, leaf, false);
					if (r == 0 && linkat(tdir, tleaf, dir,
					                     leaf, 0) < 0)
						r = -errno;
				} else if (t && tdir < 0 && errno) {
					r = -errno;
				}
				if (r < 0)
					complain("%s: cannot link to %s: %s",
					         shown, link, strerror(-r));
				if (tdir >= 0)
					close(tdir);
				free(t);
			} else if (type == '6') {
				r = make_way(dir, leaf, false);
				if (r == 0 &&
				    mkfifoat(dir, leaf, (mode_t)mode) < 0)
					r = -errno;
				if (r < 0)
					complain("%s: cannot mkfifo: %s", shown,
					         strerror(-r));
			} else {
				complain(
				    "%s: member type '%c' is not unpacked here",
				    shown,
				    type > ' ' && type < 127 ? type : '?');
			}
			if (dir >= 0)
				close(dir);
		}
		if (!data_read && !in(NULL, padded)) {
			complain("unexpected end of the archive");
			break;
		}
		free(longname);
		free(longlink);
		longname = longlink = NULL;
		have_paxsize = false;
	}
	for (size_t i = ndelayed; i-- > 0;)
		set_dir_mode(top, delayed[i].rel, delayed[i].mode);
	drain(); /* the whole body is read: the upload ends cleanly */
	_exit(status);
}

_Noreturn void builtin_tar(int base, int argc, const char *const *argv)
{
	const char *ex[240];
	int nex = 0;
	if (!strcmp(argv[0], "untar"))
		tar_extract(base, argv[2]);
	for (int i = 3; i < argc && nex < 240; i++)
		if (!strncmp(argv[i], "--exclude=", 10) && argv[i][10])
			ex[nex++] = argv[i] + 10;
	tar_create(base, argv[2], ex, nex);
}
