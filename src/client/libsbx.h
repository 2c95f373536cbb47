/* libsbx: a small C client for sandboxd's /v1 API (docs/api-v1.md).
 *
 * One struct sbx_client holds a daemon's URL, an optional bearer token and
 * one libcurl handle (connections are reused). A client is used by one
 * thread at a time; make one per thread.
 *
 * Every call returns 0 on success and -1 on failure, with *err filled
 * (err may be NULL). The error carries what the server said when it
 * answered: its HTTP status, its stable code ("sandbox_not_found",
 * "path_outside_workspace", ... see docs/api-v1.md) and its message. When
 * no answer came, status is 0 and code is one of libsbx's own:
 *   "connect"   the daemon could not be reached (message from libcurl)
 *   "protocol"  the answer was not what the API promises
 *   "aborted"   a callback of yours asked to stop
 *   "io"        a local read or write (a source or sink) failed
 *   "usage"     the arguments were wrong (e.g. both argv and command)
 *   "is_a_directory"  sbx_file_get named a directory
 *
 * Strings and arrays a call returns are the caller's, freed with the
 * matching *_free function. Sandbox IDs are 1-63 of [a-z0-9-]; file paths
 * are relative to /workspace, or absolute under it.
 *
 * Link with `pkg-config --cflags --libs libsbx`.
 */
#ifndef LIBSBX_H
#define LIBSBX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif
/* libsbx is built with hidden symbols: what this header declares is the
 * whole of its ABI. */
#pragma GCC visibility push(default)

#define LIBSBX_VERSION "0.1.0"

struct sbx_error {
	int status;         /* HTTP status; 0 when no answer came */
	char code[64];      /* the server's stable code, or libsbx's own */
	char message[1024]; /* for a human */
};

struct sbx_client;

/* url: the daemon's base, e.g. "http://127.0.0.1:8080" (a trailing "/" is
 * fine); token: a bearer token or NULL. Copies both. */
struct sbx_client *sbx_client_new(const char *url, const char *token,
                                  struct sbx_error *err);
void sbx_client_free(struct sbx_client *c);

/* ---- Sandboxes --------------------------------------------------------- */

/* 0 in a field: the daemon's default. */
struct sbx_limits {
	uint64_t memory_mb;
	uint64_t pids;
	double cpus;
	uint64_t disk_mb;
};

struct sbx_usage {
	uint64_t memory_bytes;
	uint64_t cpu_ms;
	uint64_t disk_bytes;
	uint64_t pids;
};

struct sbx_sandbox {
	char *id;
	char *state;          /* "running" or "stopped" */
	char *created_at;     /* RFC 3339, UTC */
	char *last_active_at; /* RFC 3339, UTC */
	struct sbx_limits limits;
	uint64_t sleep_after_ms;
	bool keep_alive;
	bool has_usage; /* usage is given for one sandbox, not in a listing */
	struct sbx_usage usage;
	char *json; /* the object exactly as the server sent it */
};

struct sbx_create_opts {
	const char *id; /* NULL: the daemon makes one */
	struct sbx_limits limits;
	uint64_t sleep_after_ms; /* 0: the daemon's --sleep-after */
	bool keep_alive;
	const char *const *env;    /* "NAME=value", NULL-terminated, or NULL */
	const char *const *labels; /* "key=value", NULL-terminated, or NULL */
	const char *from_snapshot; /* "snap_...": files start as its, or NULL */
	const char *image;         /* an image's name or digest, or NULL: the
	                              host's system */
};

/* 409 sandbox_exists when the ID is taken. */
int sbx_sandbox_create(struct sbx_client *c, const struct sbx_create_opts *o,
                       struct sbx_sandbox **out, struct sbx_error *err);
/* 404 sandbox_not_found when there is none. */
int sbx_sandbox_info(struct sbx_client *c, const char *id,
                     struct sbx_sandbox **out, struct sbx_error *err);
/* *list: an array of *n sandboxes (free with sbx_sandbox_list_free). */
int sbx_sandbox_list(struct sbx_client *c, struct sbx_sandbox **list, size_t *n,
                     struct sbx_error *err);
int sbx_sandbox_running(struct sbx_client *c, const char *id, bool *running,
                        struct sbx_error *err);
/* Processes end, files stay. A no-op for an unknown ID. */
int sbx_sandbox_stop(struct sbx_client *c, const char *id,
                     struct sbx_error *err);
/* Everything gone; idempotent. */
int sbx_sandbox_delete(struct sbx_client *c, const char *id,
                       struct sbx_error *err);
void sbx_sandbox_free(struct sbx_sandbox *s);
void sbx_sandbox_list_free(struct sbx_sandbox *list, size_t n);

/* ---- Exec -------------------------------------------------------------- */

struct sbx_exec_opts {
	const char *const *argv; /* NULL-terminated: run without a shell; or */
	const char *command;     /* a bash command line, in the session */
	const char *cwd;         /* under /workspace; NULL: the session's */
	const char *const *env;  /* "NAME=value", NULL-terminated, or NULL */
	const void *stdin_data;  /* given to the command's stdin, or NULL */
	size_t stdin_len;
	uint64_t timeout_ms;       /* 0: the daemon's --exec-timeout */
	uint64_t max_output_bytes; /* 0: the daemon's default */
	const char *session;       /* a session ID, or NULL: the default */
};

struct sbx_exec_result {
	int exit_code; /* 124 after a timeout; 128+N after signal N */
	bool timed_out;
	char *signal;   /* e.g. "SIGKILL", or NULL */
	bool truncated; /* some output was dropped (maxOutputBytes) */
	/* sbx_exec only (sbx_exec_stream gives output to its callback): */
	char *out, *err; /* NUL-terminated too, may hold NULs */
	size_t out_len, err_len;
	uint64_t duration_ms;
};
void sbx_exec_result_clear(struct sbx_exec_result *r);

enum { SBX_STDOUT = 1, SBX_STDERR = 2 };

/* Output as it arrives. Returning nonzero stops: the connection is closed,
 * which kills the command's whole process tree, and the call fails with
 * code "aborted". */
typedef int (*sbx_output_cb)(void *ud, int stream, const void *data,
                             size_t len);

/* Runs a command and waits for it; the output comes back in *r. */
int sbx_exec(struct sbx_client *c, const char *id,
             const struct sbx_exec_opts *o, struct sbx_exec_result *r,
             struct sbx_error *err);
/* Runs a command, streaming its output to cb (server-sent events); *r gets
 * the exit (out/err stay NULL). A failure the server reports mid-stream
 * (an "error" event) fails the call with its code. */
int sbx_exec_stream(struct sbx_client *c, const char *id,
                    const struct sbx_exec_opts *o, sbx_output_cb cb, void *ud,
                    struct sbx_exec_result *r, struct sbx_error *err);

/* ---- Files (streamed both ways) ---------------------------------------- */

/* A download's bytes; nonzero stops ("aborted"). */
typedef int (*sbx_sink_cb)(void *ud, const void *data, size_t len);
/* An upload's bytes: fills buf with up to len, returns how many, 0 at the
 * end, -1 on an error ("io"). */
typedef ssize_t (*sbx_source_cb)(void *ud, void *buf, size_t len);
/* Bytes moved so far, of total (0 when unknown). */
typedef void (*sbx_progress_cb)(void *ud, uint64_t done, uint64_t total);

struct sbx_dirent {
	char *name;
	char *type; /* "file", "directory", "symlink", "other" */
	uint64_t size;
	uint32_t mode; /* permission bits */
	char *mtime;   /* RFC 3339 */
};

/* Fails with "is_a_directory" (before sink saw a byte) for a directory. */
int sbx_file_get(struct sbx_client *c, const char *id, const char *path,
                 sbx_sink_cb sink, void *ud, sbx_progress_cb progress,
                 void *pud, struct sbx_error *err);
/* Uploads exactly size bytes from src; parents are created; the file
 * appears whole or not at all. *created (may be NULL): a new file. */
int sbx_file_put(struct sbx_client *c, const char *id, const char *path,
                 uint64_t size, sbx_source_cb src, void *ud,
                 sbx_progress_cb progress, void *pud, bool *created,
                 struct sbx_error *err);
/* The same from and to a file descriptor (put: a regular file). */
int sbx_file_get_fd(struct sbx_client *c, const char *id, const char *path,
                    int fd, sbx_progress_cb progress, void *pud,
                    struct sbx_error *err);
int sbx_file_put_fd(struct sbx_client *c, const char *id, const char *path,
                    int fd, sbx_progress_cb progress, void *pud,
                    struct sbx_error *err);
/* A directory's entries (free with sbx_dirents_free). */
int sbx_file_list(struct sbx_client *c, const char *id, const char *path,
                  struct sbx_dirent **ents, size_t *n, struct sbx_error *err);
void sbx_dirents_free(struct sbx_dirent *ents, size_t n);
/* A file or an empty directory; recursive: a whole tree. */
int sbx_file_delete(struct sbx_client *c, const char *id, const char *path,
                    bool recursive, struct sbx_error *err);
/* A tar of /workspace to sink; excludes: "a,b" (paths or globs) or NULL. */
int sbx_persist(struct sbx_client *c, const char *id, const char *excludes,
                sbx_sink_cb sink, void *ud, struct sbx_error *err);
/* Unpacks a tar of size bytes from src into /workspace. */
int sbx_hydrate(struct sbx_client *c, const char *id, uint64_t size,
                sbx_source_cb src, void *ud, struct sbx_error *err);

/* ---- Sessions ---------------------------------------------------------- */

/* *sid: "sess_..." (free()); cwd may be NULL. */
int sbx_session_create(struct sbx_client *c, const char *id, const char *cwd,
                       char **sid, struct sbx_error *err);
int sbx_session_delete(struct sbx_client *c, const char *id, const char *sid,
                       struct sbx_error *err);

/* ---- Background processes ---------------------------------------------- */

struct sbx_process {
	char *id;
	long pid;
	char *command;
	char *status; /* running, completed, failed, killed */
	char *start_time;
	char *end_time; /* NULL while running */
	bool has_exit_code;
	int exit_code;
};

/* Starts o's command in the background; process_id may be NULL. */
int sbx_process_start(struct sbx_client *c, const char *id,
                      const char *process_id, const struct sbx_exec_opts *o,
                      struct sbx_process **out, struct sbx_error *err);
int sbx_process_list(struct sbx_client *c, const char *id,
                     struct sbx_process **list, size_t *n,
                     struct sbx_error *err);
int sbx_process_info(struct sbx_client *c, const char *id, const char *pid,
                     struct sbx_process **out, struct sbx_error *err);
/* TERM to its whole tree, KILL after 5 s. */
int sbx_process_kill(struct sbx_client *c, const char *id, const char *pid,
                     struct sbx_error *err);
/* The kept logs: r->out, r->err (and r->truncated); other fields unset. */
int sbx_process_logs(struct sbx_client *c, const char *id, const char *pid,
                     struct sbx_exec_result *r, struct sbx_error *err);
/* Replays the log from byte cursor, then follows it live until the
 * process ends; *exit_code (may be NULL) is its exit code. */
int sbx_process_stream(struct sbx_client *c, const char *id, const char *pid,
                       uint64_t cursor, sbx_output_cb cb, void *ud,
                       int *exit_code, struct sbx_error *err);
int sbx_process_stdin(struct sbx_client *c, const char *id, const char *pid,
                      const void *data, size_t len, struct sbx_error *err);
void sbx_process_free(struct sbx_process *p);
void sbx_process_list_free(struct sbx_process *list, size_t n);

/* ---- Code interpreter (docs/interpreter.md) ---------------------------- */

/* language: "python", "javascript", "typescript" (or NULL: python);
 * *cid: "ctx_..." (free()). */
int sbx_context_create(struct sbx_client *c, const char *id,
                       const char *language, const char *cwd, char **cid,
                       struct sbx_error *err);
int sbx_context_delete(struct sbx_client *c, const char *id, const char *cid,
                       struct sbx_error *err);
/* One event of a cell: event is "stdout", "stderr", "result", "error",
 * "notice" or "done"; data its JSON (docs/interpreter.md). Nonzero stops
 * (interrupting the cell). */
typedef int (*sbx_event_cb)(void *ud, const char *event, const char *data);
/* Runs code in the context, streaming its events; timeout_ms 0: default. */
int sbx_context_run(struct sbx_client *c, const char *id, const char *cid,
                    const char *code, uint64_t timeout_ms, sbx_event_cb cb,
                    void *ud, struct sbx_error *err);

/* ---- Terminal (GET /v1/sandbox/{id}/pty, a WebSocket) ------------------ */

struct sbx_pty;

/* Opens the session's shared terminal (session NULL: the default; shell
 * NULL: the daemon's). 404 when the daemon has no terminals. */
int sbx_pty_open(struct sbx_client *c, const char *id, const char *session,
                 const char *shell, unsigned cols, unsigned rows,
                 struct sbx_pty **out, struct sbx_error *err);
/* A descriptor to poll for input; call sbx_pty_read when readable. */
int sbx_pty_fd(const struct sbx_pty *p);
/* Keystrokes. */
int sbx_pty_write(struct sbx_pty *p, const void *data, size_t len,
                  struct sbx_error *err);
int sbx_pty_resize(struct sbx_pty *p, unsigned cols, unsigned rows,
                   struct sbx_error *err);
/* Reads what arrived, giving terminal output to cb (stream SBX_STDOUT).
 * Returns 0 while the terminal is open, 1 once the shell exited (*code:
 * its exit code), -1 on an error (the server's "error" message in err). */
int sbx_pty_read(struct sbx_pty *p, sbx_output_cb cb, void *ud, int *code,
                 struct sbx_error *err);
/* Closes the connection (the shell goes on for other clients). */
void sbx_pty_close(struct sbx_pty *p);

/* ---- Anything else ----------------------------------------------------- */

/* One request: method, a path under the daemon ("/v1/snapshot"), an
 * optional JSON body. A 2xx answer's body goes to *body (NUL-terminated,
 * free()); anything else fails with the server's error. */
int sbx_request(struct sbx_client *c, const char *method, const char *path,
                const char *json_body, long *status, char **body, size_t *len,
                struct sbx_error *err);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif

#endif
