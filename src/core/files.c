#include "core/files.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

const char *file_type_name(enum file_type t)
{
	static const char *const names[] = {"file", "directory", "symlink",
	                                    "other"};
	return names[t];
}

static enum file_type type_of(char t)
{
	return t == 'f'   ? FILE_REGULAR
	       : t == 'd' ? FILE_DIR
	       : t == 'l' ? FILE_SYMLINK
	                  : FILE_OTHER;
}

int file_entry_parse(const char *p, size_t len, struct file_entry *e)
{
	char type;
	unsigned long long size, mtime;
	unsigned mode;
	int off = 0;
	/* the builtin ends each entry with a NUL, which sscanf needs */
	if (!len || memchr(p, '\0', len) || p[len] != '\0' ||
	    sscanf(p, "%c %llu %o %llu %n", &type, &size, &mode, &mtime,
	           &off) != 4 ||
	    off <= 0 || (size_t)off >= len)
		return -EINVAL;
	e->type = type_of(type);
	e->size = size;
	e->mode = mode & 07777;
	e->mtime_ms = mtime;
	e->path = p + off;
	e->path_len = len - (size_t)off;
	return 0;
}

int file_stat_parse(const char *answer, struct file_entry *e)
{
	char type;
	unsigned long long size, mtime;
	unsigned mode;
	if (sscanf(answer, "S %c %llu %o %llu", &type, &size, &mode, &mtime) !=
	    4)
		return -EINVAL;
	*e = (struct file_entry){.type = type_of(type),
	                         .size = size,
	                         .mode = mode & 07777,
	                         .mtime_ms = mtime,
	                         .path = ""};
	return 0;
}

int file_write_parse(const char *answer, uint64_t *bytes, bool *created)
{
	unsigned long long n;
	int off = 0;
	if (sscanf(answer, "OK %llu %n", &n, &off) != 1 || !off)
		return -EINVAL;
	*bytes = n;
	*created = !strcmp(answer + off, "created");
	return 0;
}

static int one(const char *p, size_t len,
               int (*on_entry)(void *ctx, const struct file_entry *e),
               void *ctx)
{
	struct file_entry e;
	return file_entry_parse(p, len, &e) == 0 ? on_entry(ctx, &e) : 0;
}

int file_listing_feed(struct buf *partial, const char *data, size_t len,
                      int (*on_entry)(void *ctx, const struct file_entry *e),
                      void *ctx)
{
	int paused = 0;
	while (len) {
		const char *z = memchr(data, '\0', len);
		if (!z) {
			buf_append(partial, data, len);
			break;
		}
		size_t n = (size_t)(z - data);
		if (partial->len) {
			buf_append(partial, data, n);
			paused |=
			    one(buf_cstr(partial), partial->len, on_entry, ctx);
			buf_reset(partial);
		} else {
			paused |= one(data, n, on_entry, ctx);
		}
		data = z + 1;
		len -= n + 1;
	}
	return paused;
}
