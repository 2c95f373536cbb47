/* Terminals: an interactive shell on a pty inside a sandbox, shared by any
 * number of clients. One terminal per session (the default session's is
 * the Duet room's terminal): a client that opens a session's terminal
 * joins the one that runs, or starts it.
 *
 * Theory of operation. The shell is an exec job (core/exec.c) submitted
 * detached, with the slave of a pty from the sandbox's own devpts
 * (runtime/pty.c) as its stdio and controlling terminal, in the session's
 * cwd and environment, under the same confinement as every command. The
 * terminal reads the master and hands each chunk to every client, and
 * keeps the last TERMINAL_REPLAY bytes in a ring that a newcomer gets
 * first. Nothing a client does makes the daemon buffer without bound:
 *   - a client that is behind (its output callback returned 1) pauses the
 *     terminal's reading, so the shell blocks in write() as on a slow
 *     serial line; if it is still behind TERMINAL_STALL_MS later it is
 *     dropped (dropped callback) and the others go on;
 *   - keystrokes the shell does not read yet wait in a buffer of
 *     TERMINAL_INPUT_MAX bytes; past it, input is refused (-ENOBUFS).
 * When the last client leaves, the shell keeps running (its output goes
 * into the ring) until the sandbox's sleep-after passes without a client;
 * then its process tree is killed. When the shell exits (or the sandbox
 * stops), each client hears it once (exited) and the terminal is freed.
 * Nothing here knows HTTP or WebSocket: the faces turn callbacks into
 * frames. */
#ifndef SBX_TERMINAL_H
#define SBX_TERMINAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/manager.h"

#define TERMINAL_REPLAY (256u << 10)
#define TERMINAL_INPUT_MAX (64u << 10)
#define TERMINAL_STALL_MS 10000u

struct terminal;
struct terminal_client;

struct terminal_opts {
	const char *shell;   /* argv[0] (searched in PATH); NULL: /bin/bash */
	unsigned cols, rows; /* 0: 80x24 (only when the terminal starts) */
	/* A terminal of its own (E2B's PTY processes): never joined by
	 * terminal_open, found by its pid (terminal_find), and not ended
	 * when no client is there (only by its end, a signal or the
	 * sandbox's stop). The fields below are for it only. */
	bool own;
	const char *const *argv; /* NULL-terminated; NULL: shell */
	const char *const *env;  /* "KEY=VALUE" over the session's */
	size_t envc;
	const char *cwd; /* NULL: the session's */
	bool as_user;    /* as the image's unprivileged user */
	/* Runs exactly once when terminal_open succeeded: pid > 0 when init
	 * forked it, or pid 0 with why when it could not start. */
	void (*started)(void *ctx, int pid, const char *why);
	void *ctx;
};

struct terminal_client_ops {
	/* Output for this client. Return 1 when it is behind: the terminal
	 * stops reading until terminal_client_resume. */
	int (*output)(void *ctx, const char *data, size_t len);
	/* The shell ended with code (exit status, 128+signal), or could not
	 * run / was ended (code -1, why says so). The client is detached
	 * and freed right after this returns. */
	void (*exited)(void *ctx, int code, const char *why);
	/* Behind for TERMINAL_STALL_MS: dropped; detached and freed after
	 * this returns. */
	void (*dropped)(void *ctx);
};

/* The terminal of session_id (NULL: the default session) of sb: the one
 * that runs, or a new one (sb is started if need be). The session's cwd
 * and environment are taken when the shell starts. -ENOENT: no such
 * session; -ENOSPC: no pty left in the sandbox; -EDQUOT: the sandbox may
 * not start (quota). */
int terminal_open(struct sandbox *sb, const char *session_id,
                  const struct terminal_opts *o, struct terminal **out,
                  struct sbx_err *err);
/* Join: the replay is handed to output before this returns. NULL: out of
 * memory. */
struct terminal_client *terminal_attach(struct terminal *t,
                                        const struct terminal_client_ops *ops,
                                        void *ctx);
/* Leave (no callback runs after this). */
void terminal_detach(struct terminal_client *c);
/* The client caught up: reading goes on once no client is behind. */
void terminal_client_resume(struct terminal_client *c);
/* Keystrokes. 0, or -ENOBUFS (input refused: the shell is not reading),
 * -EPIPE (the terminal is ending). */
int terminal_input(struct terminal_client *c, const char *data, size_t len);
/* The window size; the shell's foreground job gets SIGWINCH. */
int terminal_resize(struct terminal_client *c, unsigned cols, unsigned rows);

/* Keystrokes and window size without a client (as terminal_input and
 * terminal_resize). */
int terminal_write(struct terminal *t, const char *data, size_t len);
int terminal_set_size(struct terminal *t, unsigned cols, unsigned rows);
/* Own terminals: the one of pid that runs (NULL: none); the next one of
 * sb after prev (NULL: the first); its shell's pid; signal its program
 * (and its tree); a note the face keeps with it (copied; NULL clears). */
struct terminal *terminal_find(struct sandbox *sb, int pid);
struct terminal *terminal_next(struct sandbox *sb, struct terminal *prev);
int terminal_pid(const struct terminal *t);
int terminal_signal(struct terminal *t, int signo);
int terminal_set_note(struct terminal *t, const char *note);
const char *terminal_note(const struct terminal *t);

#endif
