/* Code interpreter contexts: long-lived Python or JavaScript (TypeScript)
 * workers inside a sandbox that run cells of code one at a time, keeping
 * their state (variables, imports, definitions) from cell to cell.
 *
 * A context is a worker process (interp/python_worker.py or
 * interp/node_worker.js, embedded in the daemon and written read-only into
 * every sandbox's skeleton under INTERP_DIR) owned by the daemon like a
 * background process: a detached exec with a stdin pipe, its output read
 * by the event loop. The two speak one JSON object per line (see the
 * workers for the protocol). A context has its own cwd and environment.
 * Cells of one context queue and run in order; contexts run in parallel.
 *
 * A cell's timeout sends SIGINT once the worker has begun the cell
 * (Python raises KeyboardInterrupt, the node worker interrupts the
 * script); a worker that has not finished the cell INTERP_KILL_GRACE_MS
 * later is killed with its whole tree. A worker that dies (killed,
 * crashed, exited, or its sandbox stopped) fails the cell it was running;
 * the next cell starts a new worker, whose state is empty, and is told so
 * (interp_done.restarted, and a NOTICE event).
 *
 * Contexts live in the daemon's memory: they survive idle stops of their
 * sandbox (without their state), not daemon restarts or the sandbox's
 * destruction. A sandbox whose only activity is idle contexts still stops
 * after its sleepAfter.
 *
 * This is the API the protocol faces (/v1 in api_v1_interp.c, the
 * Cloudflare face) build on; it knows nothing of HTTP. */
#ifndef SBX_INTERP_H
#define SBX_INTERP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/manager.h"
#include "lib/err.h"

#define INTERP_DIR "/opt/sandboxd/interp" /* the workers, in every sandbox */
#define INTERP_MAX_CONTEXTS 64            /* per sandbox */
#define INTERP_KILL_GRACE_MS 2000         /* after SIGINT, before KILL */
#define INTERP_START_TIMEOUT_MS 30000     /* for a worker's "ready" */

/* From the manager: sb is going away, and its contexts with it. */
void interp_sandbox_gone(struct sandbox *sb);
/* How many of sb's jobs are workers of contexts that have nothing to do
 * (0 when any context has): they do not keep the sandbox from idling. */
unsigned interp_idle_workers(struct sandbox *sb);

/* The workers as files of every sandbox's image (interp_files.c), into
 * out (room for cap); how many were written. */
size_t interp_image_files(struct image_file *out, size_t cap);

enum interp_lang {
	INTERP_PYTHON,
	INTERP_JAVASCRIPT,
	INTERP_TYPESCRIPT,
};

/* "python", "javascript", "typescript"; parse also takes "py", "js",
 * "ts", "node". -EINVAL for anything else. */
const char *interp_lang_name(enum interp_lang l);
int interp_lang_parse(const char *s, enum interp_lang *out);

struct interp_ctx; /* opaque */
struct interp_cell;

/* Why a context could not start (its ready callback's status). */
enum interp_start {
	INTERP_STARTED = 0,
	INTERP_UNAVAILABLE, /* no interpreter / transpiler in the sandbox */
	INTERP_BAD_CWD,     /* its cwd does not exist (or is no directory) */
	INTERP_FAILED,      /* anything else: msg says what */
	INTERP_DELETED,     /* interp_delete came first */
};

struct interp_opts {
	enum interp_lang lang;
	const char *id;  /* NULL: generated ("ctx_" + 12 hex digits) */
	const char *cwd; /* absolute; NULL: the session's cwd */
	/* Environment: the session's (NULL: the sandbox's default session),
	 * then env ("K=V" each) over it. Taken once, at creation. */
	struct session *sess;
	const char *const *env;
	size_t envc;
};

/* Called once when the context's first worker is ready (status
 * INTERP_STARTED) or could not start; then msg says why, and the context
 * is deleted right after the callback returns. */
typedef void (*interp_ready_cb)(struct interp_ctx *c, enum interp_start status,
                                const char *msg, void *arg);

/* Create a context and start its worker. Cells may be queued with
 * interp_run before it is ready. On success ready (may be NULL) is called
 * exactly once, possibly before interp_create returns; *out (may be NULL)
 * is the context, which is gone after a failed ready. On failure (-ENOSPC
 * past INTERP_MAX_CONTEXTS, -EEXIST when opts->id is taken, -ENOMEM)
 * ready is never called. */
int interp_create(struct sandbox *sb, const struct interp_opts *opts,
                  interp_ready_cb ready, void *arg, struct interp_ctx **out,
                  struct sbx_err *err);
/* The sandbox's context by id, or NULL. */
struct interp_ctx *interp_find(struct sandbox *sb, const char *id);
/* Whether the sandbox's only jobs are the workers of idle contexts (so it
 * may be stopped as idle; its contexts restart on their next cell). */
bool interp_only_idle(struct sandbox *sb);
/* Every context of the sandbox, oldest first. */
void interp_foreach(struct sandbox *sb,
                    void (*fn)(struct interp_ctx *c, void *data), void *data);
/* Kill its worker and forget it: its running and queued cells end with an
 * error (ContextDeleted). -ENOENT when there is no such context. */
int interp_delete(struct sandbox *sb, const char *id);

struct interp_info {
	const char *id;
	enum interp_lang lang;
	const char *cwd;
	bool starting;            /* its worker is starting */
	bool running;             /* a worker is ready (its state with it) */
	bool busy;                /* a cell is running */
	unsigned queued;          /* cells waiting behind it */
	unsigned execution_count; /* cells run by the current worker */
	uint64_t created_ms;      /* wall clock */
};
void interp_get_info(const struct interp_ctx *c, struct interp_info *out);

/* ---- cells ---------------------------------------------------------------
 * A cell's events reach its owner through one callback, in the order they
 * happened: NOTICE first (when the worker was restarted since the
 * context's last cell: its state is gone), STDOUT, STDERR and RESULT as
 * the cell produces them, ERROR at most once, END exactly once and last.
 * Output written before a result comes before it (the workers send what
 * the cell wrote before they send a result); only what a child process
 * writes to the raw stderr of a node worker travels apart and may come
 * late. Strings are valid UTF-8; everything is borrowed for the call. For
 * STDOUT, STDERR and RESULT the callback may return 1 to stop reading the
 * worker's output until interp_cell_resume (back-pressure for a slow
 * client); its answer is ignored for the others. */
struct interp_error {
	const char *name;  /* "ZeroDivisionError", "TimeoutError", ... */
	const char *value; /* the message */
	json_t *traceback; /* array of strings (lines) */
};

struct interp_done {
	unsigned execution_count;
	bool error;      /* an ERROR event came */
	bool timed_out;  /* the cell reached its timeout */
	bool restarted;  /* it ran on a new worker: earlier state was lost */
	bool state_lost; /* its worker died under it: the state is gone */
};

/* The name a result's MIME type goes by in the SDKs' Result objects (E2B's,
 * Cloudflare's), after Jupyter's display formats: "text/plain" -> "text",
 * "image/png" -> "png", ...; NULL for a type that has none. */
const char *interp_format_name(const char *mime);

enum interp_event_type {
	INTERP_EV_NOTICE, /* text */
	INTERP_EV_STDOUT, /* text, len */
	INTERP_EV_STDERR, /* text, len */
	INTERP_EV_RESULT, /* bundle: a MIME bundle ({"text/plain": ...}) */
	INTERP_EV_ERROR,  /* error */
	INTERP_EV_END,    /* done */
};

struct interp_event {
	enum interp_event_type type;
	const char *text;
	size_t len;
	json_t *bundle;
	const struct interp_error *error;
	const struct interp_done *done;
};

typedef int (*interp_event_cb)(void *arg, const struct interp_event *ev);

/* Queue code (UTF-8, len bytes) in the context. timeout_ms 0: none.
 * *out (may be NULL) is valid until END, or until interp_cell_cancel.
 * -ENOMEM; -EINVAL for code that is not valid UTF-8; -ENOENT when the
 * context was deleted. No event comes before interp_run returns. */
int interp_run(struct interp_ctx *c, const char *code, size_t len,
               uint64_t timeout_ms, interp_event_cb cb, void *arg,
               struct interp_cell **out, struct sbx_err *err);
void interp_cell_resume(struct interp_cell *cell);
/* The caller no longer wants the cell (its client is gone): no event
 * comes any more. A cell still queued is dropped; one sent to the worker
 * but not begun is skipped by the worker (no interrupt, the context's
 * state untouched); a running one is interrupted as at a timeout. */
void interp_cell_cancel(struct interp_cell *cell);

#endif
