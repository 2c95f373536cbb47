/* The file API's side of the builtins (runtime/builtin.c): what a listing
 * builtin writes, turned into entries, so that every face only encodes
 * them. A listing is "D\n" and then entries, each
 * "<type> <size> <mode> <mtime_ms> <path>\0" (type f d l o, mode octal,
 * path relative to the listed directory); it comes in pieces of any size,
 * an entry may be cut between two. */
#ifndef SBX_FILES_H
#define SBX_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"

enum file_type { FILE_REGULAR, FILE_DIR, FILE_SYMLINK, FILE_OTHER };

struct file_entry {
	enum file_type type;
	uint64_t size;
	unsigned mode;     /* permission bits */
	uint64_t mtime_ms; /* wall clock */
	const char *path;  /* borrowed for the callback; not NUL-ended */
	size_t path_len;
};

/* "file", "directory", "symlink", "other" */
const char *file_type_name(enum file_type t);

/* One entry's text (len bytes, without its NUL) into e (path points into
 * it); -EINVAL when it is not an entry. */
int file_entry_parse(const char *p, size_t len, struct file_entry *e);

/* The stat builtin's answer line "S <type> <size> <mode> <mtime_ms>"
 * into e (no path); -EINVAL when it is not one. */
int file_stat_parse(const char *answer, struct file_entry *e);

/* A write builtin's answer line "OK <bytes> created|replaced": the bytes
 * written and whether the file is new; -EINVAL when it is not one. */
int file_write_parse(const char *answer, uint64_t *bytes, bool *created);

/* Feed listing bytes that follow the "D\n" line: each whole entry goes to
 * on_entry (a malformed one is skipped); a cut one waits in partial. The
 * callbacks' results are ORed (1: the consumer is full). */
int file_listing_feed(struct buf *partial, const char *data, size_t len,
                      int (*on_entry)(void *ctx, const struct file_entry *e),
                      void *ctx);

#endif
