/* Images: OCI images imported into the daemon's store, each a stack of
 * layers that sandboxes made from it share read-only (runtime/layer.h
 * unpacks them, runtime/rootfs.c stacks them).
 *
 * Under <state>/images: layers/<hex> (one unpacked layer per digest of its
 * blob, unpacked once, shared by every image that has it), meta/<hex>.json
 * (one image, by the digest of its manifest, or of its config for a
 * `docker save` archive: its layers bottom first, its config, its size),
 * names/<name> (the digest a name stands for), tmp/ (imports in flight).
 *
 * An import runs in a child process (reading, checking digests and
 * unpacking block); the loop hears of its end on a pipe and then names the
 * image. Sources: an OCI image layout directory, an OCI archive, a `docker
 * save` archive (host paths), or an archive streamed in
 * (images_import_stream): both archive kinds are told apart by what they
 * hold. A registry pull would be one more source writing the same layout. */
#ifndef SBX_IMAGES_H
#define SBX_IMAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/err.h"
#include "lib/loop.h"

#define IMAGE_NAME_MAX 128
/* the most an image's files may take, unpacked, and its archive */
#define IMAGE_MAX_BYTES (16ull << 30)
#define IMAGE_MAX_ENTRIES 2000000ull
/* lower layers one overlay takes here (their names fit its options) */
#define IMAGE_MAX_LAYERS 48

struct image {
	char digest[72]; /* "sha256:<hex>" */
	char **layers;   /* hex digests of its layers' blobs, bottom first */
	size_t nlayers;
	uint64_t size_bytes; /* its files, unpacked */
	uint64_t created_ms;
	/* its config */
	char **env; /* "K=V" */
	size_t envc;
	char *working_dir; /* or NULL */
	char *user;        /* as the config says it, or NULL */
	uid_t uid;
	gid_t gid;
	char *cmd_json;    /* {"entrypoint": [...], "cmd": [...]} as text */
	const char *shell; /* "/bin/bash", "/bin/sh" or NULL: none */
	struct image *next;
};

struct image_name {
	char *name;
	struct image *img;
};

struct image_import;

struct images {
	struct loop *loop;
	char *dir;       /* <state>/images */
	char *trash_dir; /* removed layers go there (emptied by the runtime) */
	struct image *list;
	struct image_name *names;
	size_t nnames;
	struct image_import *imports;
	unsigned nimports;
};

int images_open(struct loop *loop, const char *state_dir, const char *trash_dir,
                struct images **out, struct sbx_err *err);
/* Ends imports in flight (their callbacks are not called). */
void images_close(struct images *im);

/* Image names: 1-128 of [a-zA-Z0-9._:@/-], not starting with '.' or '/'. */
bool image_name_valid(const char *name);
/* By name, or by "sha256:<hex>" digest; NULL when unknown. */
struct image *images_find(struct images *im, const char *name);
/* The names an image goes by ("name" array of n), for listings. */
size_t images_names_of(struct images *im, const struct image *img,
                       const char **names, size_t cap);

/* Done: img on success (named), or NULL and err. */
typedef void (*image_done_cb)(void *ctx, struct image *img,
                              const struct sbx_err *err);

/* Import from a host path: source is "oci-layout:/path[:tag]",
 * "oci-archive:/path[:tag]" or "docker-archive:/path[:tag]". Returns at
 * once (or -errno, err, for a bad source or name); done runs later, on
 * the loop, unless images_import_cancel comes first. */
int images_import(struct images *im, const char *name, const char *source,
                  image_done_cb done, void *ctx, struct image_import **out,
                  struct sbx_err *err);
/* Import from an archive streamed in through images_import_write. */
int images_import_stream(struct images *im, const char *name,
                         image_done_cb done, void *ctx,
                         struct image_import **out, struct sbx_err *err);
/* Feed the stream: returns how many bytes were taken (fewer than len: the
 * pipe is full; on_drain(ctx) runs when it takes more). */
size_t images_import_write(struct image_import *imp, const char *data,
                           size_t len, void (*on_drain)(void *ctx));
void images_import_write_end(struct image_import *imp);
/* The caller is gone: the import is stopped, done never runs. */
void images_import_cancel(struct image_import *imp);

/* Remove a name (refs: sandboxes using its image, counted by the
 * caller): -EBUSY when refs, -ENOENT when unknown. An image no name and no
 * sandbox uses goes, and so do layers no image has. */
int images_delete(struct images *im, const char *name, unsigned refs,
                  struct sbx_err *err);
/* Drop images that are neither named nor in use (in_use(digest) says)
 * and layers no image has; not while an import runs. */
void images_gc(struct images *im,
               bool (*in_use)(void *data, const struct image *img), void *data);

#endif
