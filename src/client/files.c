/* libsbx: files, streamed both ways (GET/PUT/DELETE .../file/{path}),
 * directory listings, persist and hydrate. A download goes to a sink as
 * it arrives and an upload is read from a source as curl sends it, so a
 * file of any size costs a fixed amount of memory. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/client.h"

/* The file URL: a path relative to /workspace, or absolute under it. */
static char *file_url(struct sbx_client *c, const char *id, const char *path,
                      const char *query)
{
	if (!path)
		path = "";
	/* "/workspace/a" is "a"; another absolute path goes as it is, for
	 * the daemon to refuse (403) */
	if (!strncmp(path, "/workspace", 10) &&
	    (path[10] == '/' || path[10] == '\0')) {
		path += 10;
		while (*path == '/')
			path++;
	}
	char *e = url_escape(path, true);
	char *u = e ? url_sandbox(c, id, "/file/%s%s", e, query) : NULL;
	free(e);
	return u;
}

int sbx_file_get(struct sbx_client *c, const char *id, const char *path,
                 sbx_sink_cb sink, void *ud, sbx_progress_cb progress,
                 void *pud, struct sbx_error *err)
{
	struct call k = {.method = "GET",
	                 .url = file_url(c, id, path, ""),
	                 .mode = CALL_SINK,
	                 .sink = sink,
	                 .sink_ud = ud,
	                 .progress = progress,
	                 .pud = pud,
	                 .refuse_json = true};
	return call_run(c, &k, err);
}

int sbx_file_put(struct sbx_client *c, const char *id, const char *path,
                 uint64_t size, sbx_source_cb src, void *ud,
                 sbx_progress_cb progress, void *pud, bool *created,
                 struct sbx_error *err)
{
	struct call k = {.method = "PUT",
	                 .url = file_url(c, id, path, ""),
	                 .content_type = "application/octet-stream",
	                 .src = src,
	                 .src_ud = ud,
	                 .src_size = size,
	                 .progress = progress,
	                 .pud = pud};
	int rc = call_whole(c, &k, NULL, NULL, err);
	if (rc == 0 && created)
		*created = k.status == 201;
	return rc;
}

static int fd_sink(void *ud, const void *data, size_t len)
{
	int fd = *(int *)ud;
	const char *p = data;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static ssize_t fd_source(void *ud, void *buf, size_t len)
{
	int fd = *(int *)ud;
	for (;;) {
		ssize_t n = read(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		return n;
	}
}

int sbx_file_get_fd(struct sbx_client *c, const char *id, const char *path,
                    int fd, sbx_progress_cb progress, void *pud,
                    struct sbx_error *err)
{
	int rc = sbx_file_get(c, id, path, fd_sink, &fd, progress, pud, err);
	if (rc && err && !strcmp(err->code, "aborted"))
		sbx_err_set(err, 0, "io", "writing: %s", strerror(errno));
	return rc;
}

int sbx_file_put_fd(struct sbx_client *c, const char *id, const char *path,
                    int fd, sbx_progress_cb progress, void *pud,
                    struct sbx_error *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		sbx_err_set(err, 0, "usage", "not a regular file");
		return -1;
	}
	return sbx_file_put(c, id, path, (uint64_t)st.st_size, fd_source, &fd,
	                    progress, pud, NULL, err);
}

void sbx_dirents_free(struct sbx_dirent *ents, size_t n)
{
	for (size_t i = 0; ents && i < n; i++) {
		free(ents[i].name);
		free(ents[i].type);
		free(ents[i].mtime);
	}
	free(ents);
}

static void dirent_fill(void *p, json_t *e)
{
	struct sbx_dirent *d = p;
	d->name = jstrdup(e, "name");
	d->type = jstrdup(e, "type");
	d->size = juint(e, "size");
	d->mode = (uint32_t)juint(e, "mode");
	d->mtime = jstrdup(e, "mtime");
}

int sbx_file_list(struct sbx_client *c, const char *id, const char *path,
                  struct sbx_dirent **ents, size_t *n, struct sbx_error *err)
{
	struct call k = {.method = "GET", .url = file_url(c, id, path, "")};
	char *body = NULL;
	size_t len = 0;
	if (call_whole(c, &k, &body, &len, err))
		return -1;
	char *ct = NULL;
	curl_easy_getinfo(c->curl, CURLINFO_CONTENT_TYPE, &ct);
	json_t *j = NULL;
	if (ct && !strncmp(ct, "application/json", 16))
		j = json_loadb(body ? body : "", len, 0, NULL);
	free(body);
	json_t *arr = json_object_get(j, "entries");
	if (!json_is_array(arr)) {
		json_decref(j);
		sbx_err_set(err, 0, "not_a_directory", "%s: not a directory",
		            path);
		return -1;
	}
	*ents = json_array_fill(arr, sizeof(**ents), dirent_fill, n, err);
	json_decref(j);
	return *ents ? 0 : -1;
}

int sbx_file_delete(struct sbx_client *c, const char *id, const char *path,
                    bool recursive, struct sbx_error *err)
{
	struct call k = {
	    .method = "DELETE",
	    .url = file_url(c, id, path, recursive ? "?recursive=1" : "")};
	return call_whole(c, &k, NULL, NULL, err);
}

int sbx_persist(struct sbx_client *c, const char *id, const char *excludes,
                sbx_sink_cb sink, void *ud, struct sbx_error *err)
{
	char *e = url_escape(excludes ? excludes : "", false);
	struct call k = {.method = "POST",
	                 .url = e ? url_sandbox(c, id, "/persist%s%s",
	                                        excludes ? "?excludes=" : "", e)
	                          : NULL,
	                 .mode = CALL_SINK,
	                 .sink = sink,
	                 .sink_ud = ud};
	free(e);
	return call_run(c, &k, err);
}

int sbx_hydrate(struct sbx_client *c, const char *id, uint64_t size,
                sbx_source_cb src, void *ud, struct sbx_error *err)
{
	struct call k = {.method = "POST",
	                 .url = url_sandbox(c, id, "/hydrate"),
	                 .content_type = "application/x-tar",
	                 .src = src,
	                 .src_ud = ud,
	                 .src_size = size};
	return call_whole(c, &k, NULL, NULL, err);
}
