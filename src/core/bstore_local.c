/* The local backup store: <dir>/<key>, written as <key>.part and renamed
 * into place on commit (a crash leaves a .part, removed at the next open,
 * never a visible half object). The files are the daemon's own, under its
 * state dir (0700); reads and writes are plain file I/O from the loop, in
 * blocks of 256 KiB, resumed from a timer so that a big archive never
 * holds the loop for long. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/bstore.h"
#include "lib/cleanup.h"

#define BLOCK (256u << 10)

struct local {
	struct bstore pub;
	int dfd;
	struct loop *loop;
	struct bstore_get *gets; /* reading */
};

struct bstore_put {
	struct local *s;
	int fd;
	char *key, *part;
	int failed; /* errno of a failed write */
	uint64_t written, flushed;
};

/* Write-back is started as the archive grows (never waited for), so that
 * the fdatasync at commit finds little left to write. */
#define FLUSH_EVERY (8u << 20)

struct bstore_get {
	struct local *s;
	int fd;
	bstore_data_cb data;
	bstore_done_cb done;
	void *ctx;
	bool paused, in_pump;
	struct loop_timer t;
	char *buf;
	struct bstore_get *next;
};

static void get_unlink(struct bstore_get *g)
{
	for (struct bstore_get **p = &g->s->gets; *p; p = &(*p)->next)
		if (*p == g) {
			*p = g->next;
			return;
		}
}

static bool key_ok(const char *key)
{
	if (!*key || key[0] == '/' || strstr(key, "..") || strlen(key) > 1000)
		return false;
	for (const char *c = key; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' ||
		      *c == '-' || *c == '/'))
			return false;
	return true;
}

/* mkdir -p of key's directories. */
static int make_parents(struct local *s, const char *key)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s", key);
	for (char *p = strchr(path, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		if (mkdirat(s->dfd, path, 0700) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

static int put_begin(struct bstore *bs, const char *key,
                     void (*ready)(void *ctx, const struct sbx_err *err),
                     void *ctx, struct bstore_put **out, struct sbx_err *err)
{
	struct local *s = (struct local *)bs;
	(void)ready; /* a local write never waits */
	(void)ctx;
	if (!key_ok(key))
		return sbx_err_set(err, EINVAL, "backup store: bad key %s",
		                   key);
	struct bstore_put *p = calloc(1, sizeof(*p));
	if (!p || !(p->key = strdup(key)) ||
	    asprintf(&p->part, "%s.part", key) < 0) {
		if (p)
			free(p->key);
		free(p);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	p->s = s;
	int r = make_parents(s, key);
	p->fd =
	    r < 0
	        ? -1
	        : openat(s->dfd, p->part,
	                 O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
	                 0600);
	if (p->fd < 0) {
		int e = r < 0 ? -r : errno;
		free(p->part);
		free(p->key);
		free(p);
		return sbx_err_sys(err, e, "backup store %s: create %s",
		                   s->pub.where, key);
	}
	*out = p;
	return 0;
}

static int put_data(struct bstore_put *p, const char *data, size_t len)
{
	if (p->failed)
		return -p->failed;
	while (len) {
		ssize_t n = write(p->fd, data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			p->failed = errno;
			return -p->failed;
		}
		data += n;
		len -= (size_t)n;
		p->written += (uint64_t)n;
	}
	if (p->written - p->flushed >= FLUSH_EVERY) {
		sync_file_range(p->fd, (off_t)p->flushed,
		                (off_t)(p->written - p->flushed),
		                SYNC_FILE_RANGE_WRITE);
		p->flushed = p->written;
	}
	return 0;
}

static void put_end(struct bstore_put *p, bool commit, bstore_done_cb done,
                    void *ctx)
{
	struct local *s = p->s;
	struct sbx_err err = {0};
	int e = p->failed;
	/* durable before it is visible: the rename publishes it */
	if (commit && !e && fdatasync(p->fd) < 0)
		e = errno;
	close(p->fd);
	if (commit && !e && renameat(s->dfd, p->part, s->dfd, p->key) < 0)
		e = errno;
	if (!commit || e)
		unlinkat(s->dfd, p->part, 0);
	if (e)
		sbx_err_sys(&err, e, "backup store %s: write %s", s->pub.where,
		            p->key);
	free(p->part);
	free(p->key);
	free(p);
	if (done)
		done(ctx, commit && e ? &err : NULL);
}

static void write_small(struct bstore *bs, const char *key, const char *data,
                        size_t len, bstore_done_cb done, void *ctx)
{
	struct bstore_put *p;
	struct sbx_err err = {0};
	if (put_begin(bs, key, NULL, NULL, &p, &err) < 0) {
		done(ctx, &err);
		return;
	}
	put_data(p, data, len);
	put_end(p, true, done, ctx);
}

static void read_small(struct bstore *bs, const char *key, bstore_read_cb done,
                       void *ctx)
{
	struct local *s = (struct local *)bs;
	struct sbx_err err = {0};
	char buf[65536];
	if (!key_ok(key)) {
		sbx_err_set(&err, ENOENT, "no such backup");
		done(ctx, NULL, 0, &err);
		return;
	}
	_cleanup_close_ int fd =
	    openat(s->dfd, key, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf));
	if (n < 0) {
		sbx_err_sys(&err, errno, "backup store %s: read %s",
		            s->pub.where, key);
		done(ctx, NULL, 0, &err);
		return;
	}
	done(ctx, buf, (size_t)n, NULL);
}

/* Read and hand over blocks until the reader pauses or the end. */
static void pump(struct bstore_get *g)
{
	struct sbx_err err = {0};
	g->in_pump = true;
	int budget = 16; /* then the loop gets a turn (a timer resumes) */
	while (!g->paused && budget-- > 0) {
		ssize_t n = read(g->fd, g->buf, BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			bstore_done_cb done = g->done;
			void *ctx = g->ctx;
			if (n < 0)
				sbx_err_sys(&err, errno,
				            "backup store %s: read",
				            g->s->pub.where);
			loop_timer_stop(g->s->loop, &g->t);
			get_unlink(g);
			close(g->fd);
			free(g->buf);
			free(g);
			done(ctx, n < 0 ? &err : NULL);
			return;
		}
		if (g->data(g->ctx, g->buf, (size_t)n) == 1)
			g->paused = true;
	}
	g->in_pump = false;
	if (!g->paused)
		loop_timer_start(g->s->loop, &g->t, 0);
}

static void on_timer(struct loop_timer *t)
{
	pump(t->data);
}

static int get(struct bstore *bs, const char *key, uint64_t from,
               bstore_data_cb data, bstore_done_cb done, void *ctx,
               struct bstore_get **out, struct sbx_err *err)
{
	struct local *s = (struct local *)bs;
	if (!key_ok(key))
		return sbx_err_set(err, ENOENT, "no such backup");
	int fd = openat(s->dfd, key, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, errno, "backup store %s: open %s",
		                   s->pub.where, key);
	if (from && lseek(fd, (off_t)from, SEEK_SET) < 0) {
		close(fd);
		return sbx_err_sys(err, errno, "backup store: seek %s", key);
	}
	struct bstore_get *g = calloc(1, sizeof(*g));
	if (!g || !(g->buf = malloc(BLOCK))) {
		free(g);
		close(fd);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	*g = (struct bstore_get){.s = s,
	                         .fd = fd,
	                         .data = data,
	                         .done = done,
	                         .ctx = ctx,
	                         .buf = g->buf};
	g->t.cb = on_timer;
	g->t.data = g;
	g->next = s->gets;
	s->gets = g;
	*out = g;
	/* the first bytes come from the loop, after the caller has g */
	loop_timer_start(s->loop, &g->t, 0);
	return 0;
}

static void get_resume(struct bstore_get *g)
{
	if (!g->paused)
		return;
	g->paused = false;
	if (!g->in_pump)
		loop_timer_start(g->s->loop, &g->t, 0);
}

static void get_cancel(struct bstore_get *g)
{
	loop_timer_stop(g->s->loop, &g->t);
	get_unlink(g);
	close(g->fd);
	free(g->buf);
	free(g);
}

struct keys {
	char **v;
	size_t n, cap;
};

static int keys_add(struct keys *k, const char *a, const char *b)
{
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 32;
		char **v = realloc(k->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		k->v = v;
		k->cap = cap;
	}
	if (asprintf(&k->v[k->n], "%s%s", a, b) < 0)
		return -ENOMEM;
	k->n++;
	return 0;
}

/* Every committed object below sub ("" or "<dir>/"), recursively. */
static int walk(int dfd, const char *sub, struct keys *k, int depth)
{
	int fd = openat(dfd, *sub ? sub : ".",
	                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return errno == ENOENT ? 0 : -errno;
	}
	int r = 0;
	struct dirent *e;
	while (r == 0 && (e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (e->d_name[0] == '.' ||
		    (l > 5 && !strcmp(e->d_name + l - 5, ".part")))
			continue;
		if (e->d_type == DT_DIR && depth < 4) {
			char next[1024];
			snprintf(next, sizeof(next), "%s%s/", sub, e->d_name);
			r = walk(dfd, next, k, depth + 1);
		} else if (e->d_type == DT_REG) {
			r = keys_add(k, sub, e->d_name);
		}
	}
	closedir(d);
	return r;
}

static void list(struct bstore *bs, const char *prefix, bstore_list_cb done,
                 void *ctx)
{
	struct local *s = (struct local *)bs;
	struct keys k = {0};
	struct sbx_err err = {0};
	/* the directory part of the prefix, then filter by the rest */
	char sub[1024];
	snprintf(sub, sizeof(sub), "%s", prefix);
	char *slash = strrchr(sub, '/');
	if (slash)
		slash[1] = '\0';
	else
		sub[0] = '\0';
	int r = walk(s->dfd, sub, &k, 0);
	size_t n = 0;
	for (size_t i = 0; i < k.n; i++) {
		if (!strncmp(k.v[i], prefix, strlen(prefix)))
			k.v[n++] = k.v[i];
		else
			free(k.v[i]);
	}
	k.n = n;
	if (r < 0)
		sbx_err_sys(&err, -r, "backup store %s: list", s->pub.where);
	done(ctx, k.v, k.n, r < 0 ? &err : NULL);
	for (size_t i = 0; i < k.n; i++)
		free(k.v[i]);
	free(k.v);
}

static void remove_key(struct bstore *bs, const char *key, bstore_done_cb done,
                       void *ctx)
{
	struct local *s = (struct local *)bs;
	struct sbx_err err = {0};
	int e = !key_ok(key)                                      ? EINVAL
	        : unlinkat(s->dfd, key, 0) < 0 && errno != ENOENT ? errno
	                                                          : 0;
	if (e)
		sbx_err_sys(&err, e, "backup store %s: remove %s", s->pub.where,
		            key);
	if (done)
		done(ctx, e ? &err : NULL);
}

static void local_free(struct bstore *bs)
{
	struct local *s = (struct local *)bs;
	if (!s)
		return;
	while (s->gets) {
		struct bstore_get *g = s->gets;
		struct sbx_err err = {0};
		bstore_done_cb done = g->done;
		void *ctx = g->ctx;
		sbx_err_set(&err, ECANCELED, "sandboxd is shutting down");
		get_cancel(g);
		done(ctx, &err);
	}
	close(s->dfd);
	free(s->pub.where);
	free(s);
}

static const struct bstore_ops local_ops = {
    .name = "local",
    .put_begin = put_begin,
    .put_data = put_data,
    .put_end = put_end,
    .write_small = write_small,
    .read_small = read_small,
    .get = get,
    .get_resume = get_resume,
    .get_cancel = get_cancel,
    .list = list,
    .remove = remove_key,
    .free = local_free,
};

/* .part files a crash left, at any depth. */
static void remove_parts(int dfd, int depth)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (e->d_name[0] == '.')
			continue;
		if (e->d_type == DT_DIR && depth < 4) {
			int sub = openat(dirfd(d), e->d_name,
			                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			                     O_CLOEXEC);
			if (sub >= 0) {
				remove_parts(sub, depth + 1);
				close(sub);
			}
		} else if (l > 5 && !strcmp(e->d_name + l - 5, ".part")) {
			unlinkat(dirfd(d), e->d_name, 0);
		}
	}
	if (d)
		closedir(d);
}

int bstore_local_open(const char *dir, struct loop *loop, struct bstore **out,
                      struct sbx_err *err)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return sbx_err_sys(err, errno, "backup dir %s", dir);
	struct local *s = calloc(1, sizeof(*s));
	if (!s || !(s->pub.where = strdup(dir))) {
		free(s);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	s->pub.ops = &local_ops;
	s->loop = loop;
	s->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dfd < 0) {
		int e = errno;
		free(s->pub.where);
		free(s);
		return sbx_err_sys(err, e, "backup dir %s", dir);
	}
	remove_parts(s->dfd, 0);
	*out = &s->pub;
	return 0;
}
