/* The host's /usr is every sandbox's lower /usr layer, idmapped so that
 * host root's files show as the sandbox's root's (copy-up and apt need
 * that). It follows that the sandbox's root is their owner, and a file
 * that only host root may read (0600 root:root, a 0700 directory) would be
 * readable inside, as would one of group root. So the daemon lists, at
 * start, every entry under /usr that "others" may not read (a directory:
 * read and search), and builds a layer of overlay whiteouts at those paths,
 * stacked above /usr: inside, they do not exist. The directories that lead
 * to them mirror their host counterparts' owner and mode, since a merged
 * directory takes its attributes from the topmost layer that has it.
 *
 * It is the same rule as the skeleton's copies of /etc (fs_copy_tree):
 * a sandbox sees of the host what any unprivileged host user sees.
 * Limit: the list is made when the daemon starts; an entry made private
 * under /usr later stays visible until the daemon restarts. */
#include "runtime/usrmask.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/cleanup.h"
#include "lib/log.h"
#include "runtime/fsutil.h"

#define MAX_DEPTH 64  /* deeper directories are masked whole */
#define MAX_LOGGED 20 /* masked paths named in the log */

struct walk {
	int dst;             /* the layer being built */
	char path[PATH_MAX]; /* below /usr, of the entry at hand */
	size_t len;
	struct stat dir_st[MAX_DEPTH + 1]; /* the directories on the way */
	size_t dir_len[MAX_DEPTH + 1];     /* their path lengths */
	int made; /* levels whose mirror exists in dst */
	size_t count;
	struct sbx_err *err;
};

static int mirror_attrs(int dfd, const char *name, const struct stat *st,
                        struct sbx_err *err)
{
	if (fchownat(dfd, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) <
	        0 ||
	    fchmodat(dfd, name, st->st_mode & 07777, 0) < 0)
		return sbx_err_sys(err, errno, "usr mask: attributes of %s",
		                   name);
	return 0;
}

/* Make the mirrors of the directories above the entry, down to depth. */
static int ensure_dirs(struct walk *w, int depth)
{
	for (int lvl = w->made; lvl <= depth; lvl++) {
		char saved = w->path[w->dir_len[lvl]];
		w->path[w->dir_len[lvl]] = '\0';
		int r = 0;
		if (lvl == 0) {
			const struct stat *st = &w->dir_st[0];
			if (fchown(w->dst, st->st_uid, st->st_gid) < 0 ||
			    fchmod(w->dst, st->st_mode & 07777) < 0)
				r = sbx_err_sys(w->err, errno,
				                "usr mask: attributes of /usr");
		} else if (mkdirat(w->dst, w->path, 0700) < 0 &&
		           errno != EEXIST)
			r = sbx_err_sys(w->err, errno, "usr mask: mkdir %s",
			                w->path);
		else
			r = mirror_attrs(w->dst, w->path, &w->dir_st[lvl],
			                 w->err);
		w->path[w->dir_len[lvl]] = saved;
		if (r)
			return r;
	}
	if (w->made < depth + 1)
		w->made = depth + 1;
	return 0;
}

/* A whiteout (0/0 character device) at the entry's path. */
static int mask(struct walk *w, int depth)
{
	int r = ensure_dirs(w, depth);
	if (r)
		return r;
	if (mknodat(w->dst, w->path, S_IFCHR | 0000, makedev(0, 0)) < 0)
		return sbx_err_sys(w->err, errno, "usr mask: mknod %s",
		                   w->path);
	if (w->count < MAX_LOGGED)
		log_info("event=usr-masked path=/usr/%s", w->path);
	w->count++;
	return 0;
}

static bool private_to_others(const struct stat *st)
{
	if (S_ISDIR(st->st_mode))
		return (st->st_mode & (S_IROTH | S_IXOTH)) !=
		       (S_IROTH | S_IXOTH);
	return !(st->st_mode & S_IROTH);
}

/* Walks the directory fd (consumed) at depth; w->path holds its path. */
static int walk_dir(struct walk *w, int fd, int depth)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return sbx_err_sys(w->err, errno, "usr mask: open /usr/%s",
		                   w->path);
	}
	size_t base = w->len;
	int r = 0;
	for (struct dirent *e; !r && (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    e->d_type == DT_LNK)
			continue;
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) <
		        0 ||
		    S_ISLNK(st.st_mode))
			continue; /* gone meanwhile */
		size_t nl = strlen(e->d_name);
		if (base + !!base + nl + 1 > sizeof(w->path)) {
			r = sbx_err_set(w->err, ENAMETOOLONG,
			                "usr mask: path too long below /usr/%s",
			                w->path);
			break;
		}
		w->len = base;
		if (base)
			w->path[w->len++] = '/';
		memcpy(w->path + w->len, e->d_name, nl + 1);
		w->len += nl;
		/* a sibling's subtree: the mirrors below this level are not
		 * this entry's */
		if (w->made > depth + 1)
			w->made = depth + 1;
		if (private_to_others(&st) ||
		    (S_ISDIR(st.st_mode) && depth + 1 >= MAX_DEPTH)) {
			r = mask(w, depth);
		} else if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), e->d_name,
			                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			                     O_CLOEXEC);
			if (sub < 0)
				continue;
			w->dir_st[depth + 1] = st;
			w->dir_len[depth + 1] = w->len;
			r = walk_dir(w, sub, depth + 1);
		}
		w->len = base;
		w->path[base] = '\0';
	}
	closedir(d);
	return r;
}

int usrmask_build(const char *src, const char *dst, size_t *count,
                  struct sbx_err *err)
{
	char tmp[PATH_MAX];
	struct walk *w = NULL;
	int r;

	*count = 0;
	if (snprintf(tmp, sizeof(tmp), "%s.new", dst) >= (int)sizeof(tmp))
		return sbx_err_set(err, ENAMETOOLONG, "usr mask: %s", dst);
	fs_remove_tree(AT_FDCWD, tmp, NULL);
	int sfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sfd < 0)
		return sbx_err_sys(err, errno, "usr mask: open %s", src);
	if (mkdir(tmp, 0700) < 0) {
		close(sfd);
		return sbx_err_sys(err, errno, "usr mask: mkdir %s", tmp);
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		close(sfd);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	w->err = err;
	w->dst = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (w->dst < 0 || fstat(sfd, &w->dir_st[0]) < 0) {
		r = sbx_err_sys(err, errno, "usr mask: open %s", tmp);
		close(sfd);
		goto out;
	}
	r = walk_dir(w, sfd, 0);
	if (!r) {
		*count = w->count;
		fs_remove_tree(AT_FDCWD, dst, NULL);
		/* nothing to hide: no layer at all */
		if (w->count && rename(tmp, dst) < 0)
			r = sbx_err_sys(err, errno, "usr mask: rename %s", tmp);
	}
out:
	if (w->dst >= 0)
		close(w->dst);
	free(w);
	fs_remove_tree(AT_FDCWD, tmp, NULL);
	return r;
}

/* The build runs in a child process, not a thread: the daemon forks
 * (cleaners, helpers) while it starts, and a fork taken while another
 * thread holds an allocator lock leaves the child stuck on that lock
 * (ASan's allocator does not guard fork as glibc's does). The child is a
 * fork of a daemon still single-threaded; it keeps only stdio and the pipe
 * that carries its result back, and dies with the daemon. */
struct usrmask_job {
	pid_t pid;
	int fd; /* the result's read end, -1 once read */
	bool done;
	struct usrmask_result {
		int r;
		size_t count;
		struct sbx_err err;
	} res;
};

static void build_child(const char *src, const char *dst, int out)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (dup2(out, 3) != 3)
		_exit(1);
	syscall(SYS_close_range, 4, ~0U, 0);
	struct usrmask_result res = {0};
	res.r = usrmask_build(src, dst, &res.count, &res.err);
	const char *p = (const char *)&res;
	for (size_t off = 0; off < sizeof(res);) {
		ssize_t n = write(3, p + off, sizeof(res) - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(1);
		off += (size_t)n;
	}
	_exit(0);
}

int usrmask_build_start(const char *src, const char *dst,
                        struct usrmask_job **out, struct sbx_err *err)
{
	struct usrmask_job *j = calloc(1, sizeof(*j));
	int p[2];
	if (!j)
		return sbx_err_set(err, ENOMEM, "out of memory");
	if (pipe2(p, O_CLOEXEC) < 0) {
		free(j);
		return sbx_err_sys(err, errno, "usr mask: pipe");
	}
	pid_t ppid = getpid();
	j->pid = fork();
	if (j->pid == 0) {
		if (getppid() != ppid) /* the daemon died before PDEATHSIG */
			_exit(1);
		build_child(src, dst, p[1]);
	}
	close(p[1]);
	if (j->pid < 0) {
		int e = errno;
		close(p[0]);
		free(j);
		return sbx_err_sys(err, e, "usr mask: fork");
	}
	j->fd = p[0];
	*out = j;
	return 0;
}

int usrmask_build_wait(struct usrmask_job *j, size_t *count,
                       struct sbx_err *err)
{
	if (!j->done) {
		char *p = (char *)&j->res;
		size_t off = 0;
		while (off < sizeof(j->res)) {
			ssize_t n = read(j->fd, p + off, sizeof(j->res) - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			off += (size_t)n;
		}
		int st = 0;
		while (waitpid(j->pid, &st, 0) < 0 && errno == EINTR)
			;
		if (off < sizeof(j->res))
			j->res.r = sbx_err_set(&j->res.err, EIO,
			                       "usr mask: the builder died "
			                       "(wait status %d)",
			                       st);
		close(j->fd);
		j->fd = -1;
		j->done = true;
	}
	*count = j->res.count;
	if (j->res.r < 0) {
		if (err)
			*err = j->res.err;
		return j->res.r;
	}
	return 0;
}

void usrmask_job_free(struct usrmask_job *j)
{
	if (!j)
		return;
	if (!j->done) {
		/* nobody waited: the daemon stops before any sandbox ran;
		 * the next start removes the half-built layer */
		kill(j->pid, SIGKILL);
		while (waitpid(j->pid, NULL, 0) < 0 && errno == EINTR)
			;
		close(j->fd);
	}
	free(j);
}
