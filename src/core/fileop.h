/* One file operation: a builtin (runtime/builtin.c) run inside a sandbox,
 * its text protocol turned into events, so that a face only encodes them.
 * The daemon never opens a sandbox path on the host; every path is
 * resolved by the builtin, in the sandbox.
 *
 * What a builtin writes on stdout, and what becomes of it:
 *   "F <size>\n" + bytes       on_file(size), then on_data(bytes...)
 *   "D\n" + listing entries    on_dir(), then on_entry(e) per entry
 *   "OK ...\n", "S ...\n"      the answer line, in the result
 *   "E <errno> <what>\n"       FILEOP_ERRNO in the result
 * A raw operation (tar) writes bytes from its first one: on_data only;
 * its complaints come on stderr and end up in the result.
 *
 * Each callback that takes bytes returns 1 when its consumer is full;
 * the builtin is then held back (through its pipe) until fileop_resume.
 * on_done runs exactly once, possibly before fileop_start returns; the
 * operation is freed right after it. fileop_cancel is safe from inside
 * any callback (it takes effect from the event loop). */
#ifndef SBX_FILEOP_H
#define SBX_FILEOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/files.h"
#include "core/manager.h"

enum fileop_status {
	FILEOP_OK = 0,
	FILEOP_ERRNO,     /* the builtin refused: error, what */
	FILEOP_TIMEOUT,   /* no progress for --file-timeout: msg */
	FILEOP_FAILED,    /* not started, the sandbox stopped, a crash, or
	                     the output cut short: msg */
	FILEOP_CANCELLED, /* fileop_cancel */
};

struct fileop_result {
	enum fileop_status status;
	int error;               /* FILEOP_ERRNO */
	const char *what;        /* FILEOP_ERRNO: the builtin's words; else a
	                            message for a log or an answer */
	const char *answer;      /* FILEOP_OK: the answer line without its
	                            newline ("OK created", "S f 12 ..."), or "" */
	const char *stderr_text; /* a raw operation's complaints, or "" */
	bool began;              /* on_file / on_dir / raw data came first: the
	                            face's answer has started */
	int exit_code;           /* the builtin's, once it ran to its end */
};

struct fileop_ops {
	int (*on_file)(void *ctx, uint64_t size);
	int (*on_dir)(void *ctx);
	int (*on_data)(void *ctx, const char *data, size_t len);
	int (*on_entry)(void *ctx, const struct file_entry *e);
	void (*on_done)(void *ctx, const struct fileop_result *res);
	void (*on_stdin_drain)(void *ctx); /* stdin can take more */
	/* Set: a file's bytes are pulled (fileop_pull), not pushed through
	 * on_data (those that came with the head still are, first); this
	 * says that there are bytes to pull again after fileop_pull gave 0. */
	void (*on_readable)(void *ctx);
};

struct fileop_params {
	const char *const *argv; /* the builtin's, NULL-terminated */
	bool raw;                /* output is bytes from the first one */
	const char *stdin_data;  /* written, then stdin closes */
	size_t stdin_len;
	bool stdin_stream; /* fed with fileop_stdin_write */
	bool as_user;      /* as the image's unprivileged "user"
	                      (exec_params.as_user), not root */
};

struct fileop;

/* *out (may be NULL) gets the operation, valid until on_done runs. A
 * failure to start is reported by on_done (FILEOP_FAILED), never here. */
void fileop_start(struct sandbox *sb, const struct fileop_params *p,
                  const struct fileop_ops *ops, void *ctx, struct fileop **out);
void fileop_resume(struct fileop *op);
/* A file's next bytes (ops->on_readable set), read straight into buf:
 * > 0 bytes, 0 none now (on_readable follows), -1 at the end (on_done may
 * have run within this call: op is gone). */
ssize_t fileop_pull(struct fileop *op, char *buf, size_t max);
void fileop_cancel(struct fileop *op);
/* SIGTERM to the builtin (one not started yet gets it as it starts): a
 * write of unknown length ("-") drops its temp file and answers
 * ECANCELED, where fileop_cancel's SIGKILL would leave the file behind. */
void fileop_interrupt(struct fileop *op);
/* Feed stdin without blocking; returns bytes taken (fewer: on_stdin_drain
 * follows when more fits). */
size_t fileop_stdin_write(struct fileop *op, const char *data, size_t len);
void fileop_stdin_close(struct fileop *op);

#endif
