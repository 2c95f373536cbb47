/* Where backups are kept: a local directory (bstore_local.c) or
 * S3-compatible object storage (bstore_s3.c), behind one interface of
 * asynchronous calls, so that the backup engine (backup.c) is written
 * once. The local store answers before the call returns; the S3 store
 * answers from the event loop. Either way every callback runs exactly once
 * (none after a cancel) and is the last thing the store does with the
 * object it reports on.
 *
 * Objects are named by keys of [A-Za-z0-9._/-] ("<tenant key>/<id>.json").
 * An object being written is invisible (to get, list) until committed, and
 * an aborted one leaves nothing visible. */
#ifndef SBX_BSTORE_H
#define SBX_BSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"
#include "lib/loop.h"

struct bstore;
struct bstore_put;
struct bstore_get;

/* err NULL: done; else err->code an errno (ENOENT: no such object,
 * EACCES: the store refused our credentials, EIO/ETIMEDOUT/ECONNREFUSED:
 * the store could not be reached) and a message without secrets. */
typedef void (*bstore_done_cb)(void *ctx, const struct sbx_err *err);
typedef void (*bstore_read_cb)(void *ctx, const char *data, size_t len,
                               const struct sbx_err *err);
typedef void (*bstore_list_cb)(void *ctx, char *const *keys, size_t n,
                               const struct sbx_err *err);
/* Bytes of an object being read; return 1 to pause until get_resume. */
typedef int (*bstore_data_cb)(void *ctx, const char *data, size_t len);

struct bstore_ops {
	const char *name; /* "local", "s3" */
	/* Start writing key. ready(ctx, NULL): it takes more after put_data
	 * said 1; ready(ctx, err): the write failed (put_end still follows,
	 * to abort). */
	int (*put_begin)(struct bstore *s, const char *key,
	                 void (*ready)(void *ctx, const struct sbx_err *err),
	                 void *ctx, struct bstore_put **out,
	                 struct sbx_err *err);
	/* Takes all of data: 0, or 1 when it would rather get no more until
	 * ready; < 0 once the write has failed. */
	int (*put_data)(struct bstore_put *p, const char *data, size_t len);
	/* Commit (visible once done(NULL) runs) or abort (nothing stays;
	 * done may be NULL); p is gone after this call. */
	void (*put_end)(struct bstore_put *p, bool commit, bstore_done_cb done,
	                void *ctx);
	/* Small objects (metadata), whole. */
	void (*write_small)(struct bstore *s, const char *key, const char *data,
	                    size_t len, bstore_done_cb done, void *ctx);
	void (*read_small)(struct bstore *s, const char *key,
	                   bstore_read_cb done, void *ctx);
	/* Read key from byte from on; data as it comes, then done. */
	int (*get)(struct bstore *s, const char *key, uint64_t from,
	           bstore_data_cb data, bstore_done_cb done, void *ctx,
	           struct bstore_get **out, struct sbx_err *err);
	void (*get_resume)(struct bstore_get *g);
	/* No callback after this; g is gone. */
	void (*get_cancel)(struct bstore_get *g);
	/* The keys that start with prefix. */
	void (*list)(struct bstore *s, const char *prefix, bstore_list_cb done,
	             void *ctx);
	void (*remove)(struct bstore *s, const char *key, bstore_done_cb done,
	               void *ctx);
	/* What is still running ends first (its callback with ECANCELED,
	 * during this call; calls made meanwhile fail the same way). */
	void (*free)(struct bstore *s);
};

struct bstore {
	const struct bstore_ops *ops;
	char *where; /* for logs and answers: a path, or s3://bucket/prefix */
};

/* A directory on this host; made (0700) if missing. Parts of objects that
 * a crash left (*.part) are removed. */
int bstore_local_open(const char *dir, struct loop *loop, struct bstore **out,
                      struct sbx_err *err);

/* S3-compatible object storage, as the daemon's flags describe it
 * (--backup-s3, --s3-*; credentials as config.c's help says). */
struct config;
int backup_s3_store(const struct config *cfg, struct loop *loop,
                    struct bstore **out, struct sbx_err *err);

#endif
