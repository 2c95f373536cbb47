/* sbx cp: files and directories into and out of a sandbox, through the
 * file API (streamed both ways; a directory is walked and copied file by
 * file, as `cp -r` would). A progress bar is drawn on stderr when it is a
 * terminal, nothing otherwise. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/sbx.h"

const char help_cp[] =
    "Usage: sbx cp [-q] SRC DST\n"
    "\n"
    "Copies a file or a directory (recursively) between this machine and\n"
    "a sandbox. One side is ID:PATH, PATH relative to /workspace or\n"
    "absolute under it; the other a local path (- for stdout when\n"
    "copying out). As with cp, copying into an existing directory puts\n"
    "the source inside it. Shows progress when stderr is a terminal.\n"
    "\n"
    "  -q, --quiet    no progress bar\n"
    "\n"
    "Examples:\n"
    "  sbx cp data.csv demo:in/           # /workspace/in/data.csv\n"
    "  sbx cp demo:out ./results          # a directory, recursively\n";

struct cp {
	struct sbx_client *c;
	const char *id;
	bool bar;
	int failed;
	/* the current file's progress */
	const char *name;
	struct timespec start, last;
};

static double since(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t->tv_sec) +
	       (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

static void human(double b, char *buf, size_t n)
{
	static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int i = 0;
	while (b >= 1024 && i < 4) {
		b /= 1024;
		i++;
	}
	snprintf(buf, n, "%.1f %s", b, u[i]);
}

static void draw(struct cp *k, uint64_t done, uint64_t total, bool end)
{
	char d[32], t[32], r[32];
	double secs = since(&k->start);
	human((double)done, d, sizeof(d));
	human((double)total, t, sizeof(t));
	human(secs > 0 ? (double)done / secs : 0, r, sizeof(r));
	int pct = total ? (int)(done * 100 / total) : 100;
	char bar[21];
	int fill = pct / 5;
	for (int i = 0; i < 20; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[20] = '\0';
	fprintf(stderr, "\r%-24.24s [%s] %3d%% %10s / %-10s %10s/s\033[K%s",
	        k->name, bar, pct, d, t, r, end ? "\n" : "");
}

static void on_progress(void *ud, uint64_t done, uint64_t total)
{
	struct cp *k = ud;
	if (since(&k->last) < 0.1)
		return;
	clock_gettime(CLOCK_MONOTONIC, &k->last);
	draw(k, done, total, false);
}

static void bar_start(struct cp *k, const char *name)
{
	k->name = name;
	clock_gettime(CLOCK_MONOTONIC, &k->start);
	k->last = k->start;
}

/* "ID:path" -> id (a copy) and path; NULL for a local path */
static char *split_remote(const char *arg, const char **path)
{
	const char *colon = strchr(arg, ':');
	if (!colon || colon == arg)
		return NULL;
	for (const char *p = arg; p < colon; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		      *p == '-'))
			return NULL; /* ./a:b, /x:y are local */
	*path = colon + 1;
	return strndup(arg, (size_t)(colon - arg));
}

static char *join(const char *dir, const char *name)
{
	char *s;
	size_t n = strlen(dir);
	if (!n)
		return strdup(name);
	if (asprintf(&s, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/",
	             name) < 0)
		return NULL;
	return s;
}

static const char *base(const char *p)
{
	size_t n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		n--;
	const char *b = p + n;
	while (b > p && b[-1] != '/')
		b--;
	static char buf[4096];
	snprintf(buf, sizeof(buf), "%.*s", (int)(p + n - b), b);
	return buf;
}

static int stop_at_first(void *ud, const void *data, size_t len)
{
	(void)ud;
	(void)data;
	(void)len;
	return 1;
}

/* What a sandbox path is: 'f' a file, 'd' a directory, 'n' nothing;
 * 0 with err filled on another failure. */
static char remote_kind(struct cp *k, const char *path, struct sbx_error *err)
{
	if (sbx_file_get(k->c, k->id, path, stop_at_first, NULL, NULL, NULL,
	                 err) == 0)
		return 'f';
	if (!strcmp(err->code, "aborted"))
		return 'f';
	if (!strcmp(err->code, "is_a_directory"))
		return 'd';
	if (!strcmp(err->code, "file_not_found"))
		return 'n';
	return 0;
}

/* An absolute /workspace path for a command's argv. */
static char *abs_path(const char *path)
{
	char *s;
	if (path[0] == '/')
		return strdup(path);
	if (asprintf(&s, "/workspace/%s", path) < 0)
		return NULL;
	return s;
}

/* mkdir -p (a failure is reported) or chmod (its exit status is not
 * looked at) of path in the sandbox, with mode */
static int remote_mode(struct cp *k, const char *path, mode_t mode,
                       bool make_dir)
{
	char *a = abs_path(path), m[16];
	snprintf(m, sizeof(m), "%o", mode & 07777);
	const char *mk[] = {"mkdir", "-p", "-m", m, "--", a, NULL};
	const char *ch[] = {"chmod", m, "--", a, NULL};
	struct sbx_exec_opts o = {.argv = make_dir ? mk : ch};
	struct sbx_exec_result r;
	struct sbx_error err;
	int rc = sbx_exec(k->c, k->id, &o, &r, &err);
	free(a);
	if (rc)
		return cli_fail(path, &err);
	if (make_dir && r.exit_code) {
		cli_say(0, "%s: mkdir: %.*s", path, (int)r.err_len, r.err);
		rc = EXIT_FAIL;
	}
	sbx_exec_result_clear(&r);
	return rc;
}

static int remote_mkdir(struct cp *k, const char *path, mode_t mode)
{
	return remote_mode(k, path, mode, true);
}

static int remote_chmod(struct cp *k, const char *path, mode_t mode)
{
	return remote_mode(k, path, mode, false);
}

static int put_file(struct cp *k, const char *local, const char *remote,
                    const struct stat *st)
{
	int fd = open(local, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cli_say(EXIT_FAIL, "%s: %s", local, strerror(errno));
	struct sbx_error err;
	bar_start(k, base(local));
	int rc = sbx_file_put_fd(k->c, k->id, remote, fd,
	                         k->bar ? on_progress : NULL, k, &err);
	close(fd);
	if (rc)
		return cli_fail(remote, &err);
	if (k->bar)
		draw(k, (uint64_t)st->st_size, (uint64_t)st->st_size, true);
	/* the API writes 0644 files: keep an executable bit */
	if (st->st_mode & 0111)
		return remote_chmod(k, remote, st->st_mode);
	return 0;
}

static int put_tree(struct cp *k, const char *local, const char *remote,
                    const struct stat *st)
{
	if (remote_mkdir(k, remote, st->st_mode))
		return EXIT_FAIL;
	DIR *d = opendir(local);
	if (!d)
		return cli_say(EXIT_FAIL, "%s: %s", local, strerror(errno));
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *l = join(local, e->d_name), *r = join(remote, e->d_name);
		struct stat es;
		if (!l || !r || lstat(l, &es) < 0) {
			rc = cli_say(EXIT_FAIL, "%s: %s", l ? l : local,
			             strerror(errno));
		} else if (S_ISDIR(es.st_mode)) {
			rc |= put_tree(k, l, r, &es);
		} else if (S_ISREG(es.st_mode)) {
			rc |= put_file(k, l, r, &es);
		} else {
			cli_say(0, "%s: skipped (not a file or directory)", l);
		}
		free(l);
		free(r);
	}
	closedir(d);
	return rc ? EXIT_FAIL : 0;
}

static int copy_in(struct cp *k, const char *local, const char *remote)
{
	struct stat st;
	struct sbx_error err;
	if (stat(local, &st) < 0)
		return cli_say(EXIT_FAIL, "%s: %s", local, strerror(errno));
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return cli_say(EXIT_FAIL, "%s: not a file or directory", local);
	char *target = NULL;
	size_t rl = strlen(remote);
	char kind =
	    rl && remote[rl - 1] != '/' ? remote_kind(k, remote, &err) : 'd';
	if (!kind)
		return cli_fail(remote, &err);
	if (kind == 'd')
		target = join(remote, base(local));
	else
		target = strdup(remote);
	if (!target)
		return cli_say(EXIT_FAIL, "out of memory");
	int rc = S_ISDIR(st.st_mode) ? put_tree(k, local, target, &st)
	                             : put_file(k, local, target, &st);
	free(target);
	return rc;
}

static int get_file(struct cp *k, const char *remote, const char *local,
                    uint32_t mode)
{
	bool out = !strcmp(local, "-");
	int fd = out ? 1
	             : open(local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	                    mode ? (mode & 0777) : 0644);
	if (fd < 0)
		return cli_say(EXIT_FAIL, "%s: %s", local, strerror(errno));
	struct sbx_error err;
	bar_start(k, base(remote));
	uint64_t done = 0;
	int rc = sbx_file_get_fd(k->c, k->id, remote, fd,
	                         k->bar && !out ? on_progress : NULL, k, &err);
	if (!out && close(fd) < 0 && !rc)
		return cli_say(EXIT_FAIL, "%s: %s", local, strerror(errno));
	if (rc) {
		if (!out)
			unlink(local); /* no half file left behind */
		return cli_fail(remote, &err);
	}
	if (k->bar && !out) {
		struct stat st;
		if (stat(local, &st) == 0)
			done = (uint64_t)st.st_size;
		draw(k, done, done, true);
	}
	return 0;
}

static int get_tree(struct cp *k, const char *remote, const char *local)
{
	struct sbx_dirent *ents = NULL;
	size_t n = 0;
	struct sbx_error err;
	if (sbx_file_list(k->c, k->id, remote, &ents, &n, &err))
		return cli_fail(remote, &err);
	int rc = 0;
	if (mkdir(local, 0755) < 0 && errno != EEXIST) {
		sbx_dirents_free(ents, n);
		return cli_say(EXIT_FAIL, "%s: %s", local, strerror(errno));
	}
	for (size_t i = 0; i < n; i++) {
		const struct sbx_dirent *e = &ents[i];
		if (!e->name || strchr(e->name, '/') || !strcmp(e->name, ".") ||
		    !strcmp(e->name, ".."))
			continue; /* a listing names entries, never paths */
		char *r = join(remote, e->name), *l = join(local, e->name);
		if (!r || !l)
			rc = cli_say(EXIT_FAIL, "out of memory");
		else if (e->type && !strcmp(e->type, "directory"))
			rc |= get_tree(k, r, l);
		else if (e->type && !strcmp(e->type, "file"))
			rc |= get_file(k, r, l, e->mode);
		else
			cli_say(0, "%s:%s: skipped (a %s)", k->id, r,
			        e->type ? e->type : "?");
		free(r);
		free(l);
	}
	sbx_dirents_free(ents, n);
	return rc ? EXIT_FAIL : 0;
}

static int copy_out(struct cp *k, const char *remote, const char *local)
{
	struct sbx_error err;
	char kind = remote_kind(k, remote, &err);
	if (!kind || kind == 'n')
		return cli_fail(remote, &err);
	if (kind == 'd' && !strcmp(local, "-"))
		return cli_say(EXIT_FAIL, "%s: is a directory", remote);
	struct stat st;
	char *target = NULL;
	if (strcmp(local, "-") && stat(local, &st) == 0 && S_ISDIR(st.st_mode))
		target = join(local, *remote ? base(remote) : k->id);
	else
		target = strdup(local);
	if (!target)
		return cli_say(EXIT_FAIL, "out of memory");
	int rc = kind == 'd' ? get_tree(k, remote, target)
	                     : get_file(k, remote, target, 0);
	free(target);
	return rc;
}

int cmd_cp(struct sbx_client *c, int argc, char **argv)
{
	bool quiet = false;
	const struct cli_opt opts[] = {
	    {"quiet", 'q', CLI_FLAG, {.flag = &quiet}},
	    /* -r: directories are always recursive */
	    {NULL, 'r', CLI_IGNORED, {0}},
	    {0},
	};
	int rc = cli_args(argc, argv, help_cp, opts, 2, 2);
	if (rc != CLI_GO_ON)
		return rc;
	const char *src = argv[optind], *dst = argv[optind + 1], *sp, *dp;
	char *sid = split_remote(src, &sp), *did = split_remote(dst, &dp);
	struct cp k = {.c = c, .bar = !quiet && isatty(2)};
	if (sid && did)
		rc = cli_say(
		    EXIT_USAGE,
		    "cp: copy between two sandboxes through this machine");
	else if (!sid && !did)
		rc = cli_say(EXIT_USAGE, "cp: one side must be ID:PATH");
	else if (did) {
		k.id = did;
		rc = copy_in(&k, src, dp);
	} else {
		k.id = sid;
		rc = copy_out(&k, sp, dst);
	}
	free(sid);
	free(did);
	return rc;
}
