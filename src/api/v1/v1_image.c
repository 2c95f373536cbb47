/* /v1/image: import (host paths, or an archive streamed in), list, info,
 * delete. Images are the daemon's: any tenant may list them and make
 * sandboxes from them; only the operator (auth_operator) imports and
 * deletes. An import answers when the importer child is done
 * (core/images.h); a client that leaves before does not stop a path
 * import, but does stop an upload (its archive is cut short). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/images.h"
#include "lib/util.h"

struct v1_imp {
	struct api *a;
	struct http_req *r;       /* NULL once the client is gone */
	struct image_import *imp; /* NULL once it ended */
	bool stream;
	char name[IMAGE_NAME_MAX + 1];
};

json_t *v1_image_json(struct api *a, const struct image *img, const char *name)
{
	const char *names[32];
	size_t n = images_names_of(a->m->images, img, names, 32);
	json_t *jn = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(jn, json_string(names[i]));
	json_t *env = json_array();
	for (size_t i = 0; i < img->envc; i++)
		json_array_append_new(env, json_string(img->env[i]));
	json_t *cmd = img->cmd_json ? json_loads(img->cmd_json, 0, NULL) : NULL;
	char created[32];
	iso8601_ms(img->created_ms, created, sizeof(created));
	json_t *cfg =
	    json_pack("{s:o, s:s?, s:s?, s:i, s:i, s:O, s:O}", "env", env,
	              "workingDir", img->working_dir, "user", img->user, "uid",
	              (int)img->uid, "gid", (int)img->gid, "entrypoint",
	              json_object_get(cmd, "entrypoint") ?: json_null(), "cmd",
	              json_object_get(cmd, "cmd") ?: json_null());
	json_decref(cmd);
	json_t *j = json_pack(
	    "{s:s?, s:o, s:s, s:I, s:i, s:s, s:o, s:s?, s:i}", "name",
	    name ? name : (n ? names[0] : NULL), "names", jn, "digest",
	    img->digest, "sizeBytes", (json_int_t)img->size_bytes, "layers",
	    (int)img->nlayers, "createdAt", created, "config", cfg, "shell",
	    img->shell, "sandboxes", (int)manager_image_refs(a->m, img));
	if (!img->shell || strcmp(img->shell, "/bin/bash"))
		json_object_set_new(
		    j, "note",
		    json_string(img->shell ? "no bash in this image: shell "
		                             "commands run with /bin/sh, and "
		                             "a session does not carry cwd "
		                             "and exported variables from one "
		                             "command to the next"
		                           : "no shell in this image: commands "
		                             "run as argv only"));
	return j;
}

/* -1 after answering 403 when the tenant is not the operator. */
static int operator_only(struct api *a, struct http_req *r,
                         struct route_match *m)
{
	if (auth_operator(a->auth, m->tenant))
		return 0;
	v1_error(r, 403, "forbidden",
	         "only the operator imports and deletes images");
	return -1;
}

static const struct v1_errmap import_errs[] = {
    {EFBIG, 413, "image_too_large"}, {E2BIG, 413, "image_too_large"},
    {ENOMEM, 500, "import_failed"},  {EIO, 500, "import_failed"},
    {ENOSPC, 500, "import_failed"},  {EDQUOT, 500, "import_failed"},
    {0, 400, "invalid_image"},
};

static void import_error(struct http_req *r, const struct sbx_err *err)
{
	v1_error_of(r, err, import_errs);
}

static const struct v1_errmap delete_errs[] = {
    {EBUSY, 409, "image_in_use"},
    {ENOENT, 404, "image_not_found"},
    V1_ERR_INTERNAL,
};

static void imp_closed(struct http_req *r)
{
	struct v1_imp *c = r->ctx;
	c->r = NULL;
	if (c->imp && c->stream) {
		images_import_cancel(c->imp); /* done never runs */
		c->imp = NULL;
	}
	if (!c->imp)
		free(c);
}

static void imp_done(void *ctx, struct image *img, const struct sbx_err *err)
{
	struct v1_imp *c = ctx;
	c->imp = NULL;
	if (!c->r) {
		free(c);
		return;
	}
	struct http_req *r = c->r;
	/* on_close frees c, now or when the answer is out */
	if (img)
		http_respond_json(r, 201, v1_image_json(c->a, img, c->name));
	else
		import_error(r, err);
}

static struct v1_imp *imp_new(struct api *a, struct http_req *r, bool stream,
                              const char *name)
{
	struct v1_imp *c = calloc(1, sizeof(*c));
	if (!c) {
		v1_error(r, 500, "internal", "out of memory");
		return NULL;
	}
	c->a = a;
	c->r = r;
	c->stream = stream;
	snprintf(c->name, sizeof(c->name), "%s", name);
	return c;
}

void v1_image_import(struct api *a, struct http_req *r, struct route_match *m)
{
	if (operator_only(a, r, m) < 0)
		return;
	json_t *body = v1_body(r);
	if (!body)
		return;
	const char *name = json_string_value(json_object_get(body, "name"));
	const char *source = json_string_value(json_object_get(body, "source"));
	struct sbx_err err = {0};
	if (!name || !image_name_valid(name)) {
		v1_error(r, 400, "invalid_request",
		         "name: 1-%d of [a-zA-Z0-9._:@/-], not starting with "
		         ". or /",
		         IMAGE_NAME_MAX);
	} else if (!source) {
		v1_error(r, 400, "invalid_request",
		         "source: \"oci-layout:/path[:tag]\", "
		         "\"oci-archive:/path[:tag]\", "
		         "\"docker-archive:/path[:tag]\" or \"dir:/path\"");
	} else {
		struct v1_imp *c = imp_new(a, r, false, name);
		if (c && images_import(a->m->images, name, source, imp_done, c,
		                       &c->imp, &err) < 0) {
			free(c);
			v1_error(r, 400, "invalid_request", "%s", err.msg);
		} else if (c) {
			r->ctx = c;
			r->on_close = imp_closed;
			http_suspend(r);
		}
	}
	json_decref(body);
}

static void upload_drained(void *ctx)
{
	struct v1_imp *c = ctx;
	if (c->r)
		http_resume(c->r);
}

static size_t upload_body(struct http_req *r, const char *data, size_t len)
{
	struct v1_imp *c = r->ctx;
	if (!c->imp)
		return len;
	return images_import_write(c->imp, data, len, upload_drained);
}

static void upload_end(struct http_req *r)
{
	struct v1_imp *c = r->ctx;
	if (c->imp)
		images_import_write_end(c->imp);
}

/* the drain callback gets the import's ctx: ours */
void v1_image_upload(struct api *a, struct http_req *r, struct route_match *m)
{
	if (operator_only(a, r, m) < 0)
		return;
	const char *name = m->params[0];
	struct sbx_err err = {0};
	if (!image_name_valid(name)) {
		v1_error(r, 400, "invalid_request",
		         "image name: 1-%d of [a-zA-Z0-9._:@/-], not starting "
		         "with . or /",
		         IMAGE_NAME_MAX);
		return;
	}
	struct v1_imp *c = imp_new(a, r, true, name);
	if (!c)
		return;
	if (images_import_stream(a->m->images, name, imp_done, c, &c->imp,
	                         &err) < 0) {
		free(c);
		v1_error(r, 500, "import_failed", "%s", err.msg);
		return;
	}
	r->ctx = c;
	r->on_close = imp_closed;
	r->on_body = upload_body;
	r->on_body_end = upload_end;
}

void v1_image_list(struct api *a, struct http_req *r, struct route_match *m)
{
	(void)m;
	json_t *arr = json_array();
	struct images *im = a->m->images;
	for (struct image *img = im->list; img; img = img->next) {
		const char *names[32];
		size_t n = images_names_of(im, img, names, 32);
		if (!n && !manager_image_refs(a->m, img))
			continue;
		json_array_append_new(arr, v1_image_json(a, img, NULL));
	}
	http_respond_json(r, 200, json_pack("{s:o}", "images", arr));
}

void v1_image_info(struct api *a, struct http_req *r, struct route_match *m)
{
	struct image *img = images_find(a->m->images, m->params[0]);
	if (!img) {
		v1_error(r, 404, "image_not_found", "no image %s",
		         m->params[0]);
		return;
	}
	http_respond_json(r, 200, v1_image_json(a, img, m->params[0]));
}

void v1_image_delete(struct api *a, struct http_req *r, struct route_match *m)
{
	if (operator_only(a, r, m) < 0)
		return;
	struct sbx_err err = {0};
	const char *name = m->params[0];
	struct image *img = images_find(a->m->images, name);
	if (!img || !strncmp(name, "sha256:", 7)) {
		v1_error(r, 404, "image_not_found", "no image named %s", name);
		return;
	}
	unsigned refs = manager_image_refs(a->m, img);
	if (images_delete(a->m->images, name, refs, &err) < 0) {
		v1_error_of(r, &err, delete_errs);
		return;
	}
	manager_images_gc(a->m);
	http_respond_empty(r, 204);
}
