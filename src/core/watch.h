/* Watching a directory of a sandbox for changes: inotify run inside the
 * sandbox by the watch builtin (runtime/builtin_watch.c), its events
 * turned into callbacks, so that every face only encodes them (/v1's SSE,
 * E2B's WatchDir stream and its polling watchers).
 *
 * A watch is a detached builtin job with no wall-clock limit; it ends when
 * it is stopped, when the watched directory goes, or when the sandbox
 * stops. Its output is paused while the consumer is behind (the kernel's
 * queue then holds the events, and says when it lost some). */
#ifndef SBX_WATCH_H
#define SBX_WATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "core/manager.h"

enum watch_event {
	WATCH_CREATE, /* made, or moved in */
	WATCH_WRITE,
	WATCH_REMOVE,
	WATCH_RENAME,   /* moved away (its new name, if watched, is a CREATE) */
	WATCH_CHMOD,    /* attributes */
	WATCH_OVERFLOW, /* events were lost; path empty */
};

struct watch_ops {
	/* every watch is set: what happens from now on is reported */
	void (*ready)(void *ctx);
	/* path relative to the watched directory (not NUL-ended); nonzero:
	 * pause until watch_resume */
	int (*event)(void *ctx, enum watch_event t, const char *path,
	             size_t len);
	/* it ended: err 0 (the directory went, or the sandbox stopped), else
	 * an errno (ENOENT, ENOTDIR: no such directory) and msg. No callback
	 * follows; the watch is freed after this returns. */
	void (*ended)(void *ctx, int err, const char *msg);
};

struct watch_opts {
	const char *base; /* absolute, inside the sandbox: the confinement */
	const char *path; /* relative to base ("." for base itself) */
	bool recursive;
	bool as_user; /* resolved as the unprivileged user */
};

struct watch;

/* Start watching; the callbacks run later, from the loop (ended may run
 * before this returns when it cannot start: then *out is NULL and the
 * return value 0). -ENOMEM. */
int watch_start(struct sandbox *sb, const struct watch_opts *o,
                const struct watch_ops *ops, void *ctx, struct watch **out,
                struct sbx_err *err);
void watch_resume(struct watch *w);
/* Stop it: no callback runs after this. */
void watch_stop(struct watch *w);
/* "create", "write", "remove", "rename", "chmod", "overflow" */
const char *watch_event_name(enum watch_event t);

#endif
