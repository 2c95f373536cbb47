/* Running one command in a sandbox: pipes made by the daemon, one SPAWN to
 * init, output read by the event loop into capped buffers, a timer for the
 * timeout (which kills the command's whole cgroup), the exit from init.
 * The job ends when the command has exited and its output is closed (or it
 * was killed); then the done callback runs once and the job is freed. */
#ifndef SBX_EXEC_H
#define SBX_EXEC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/manager.h"
#include "lib/buf.h"

#define EXEC_NO_TIMEOUT UINT64_MAX
/* The unprivileged user (uid and gid in the sandbox) of as_user */
#define EXEC_USER_ID 1000u

struct exec_params {
	const char *command;     /* a shell command (bash -c), or */
	const char *const *argv; /* argv, NULL-terminated */
	bool builtin;            /* argv is a runtime/builtin.c op:
	                            ended after --file-timeout without
	                            progress (EXEC_TIMEOUT) */
	bool internal;           /* the daemon's own work in it (a
	                            checkpoint's archive): keeps it awake,
	                            is no use of it (sandbox_keep_awake) */
	bool as_user;            /* as the image's unprivileged "user"
	                            (uid 1000), not the sandbox's root */
	bool detached;           /* a background process: runs beside
	                            the session's commands, not after */
	const char *const *env;  /* extra "KEY=VALUE", or NULL */
	size_t envc;
	const char *cwd;        /* NULL: the session's */
	uint64_t timeout_ms;    /* 0: the daemon's default */
	uint64_t max_output;    /* 0: the daemon's default */
	const char *stdin_data; /* written, then stdin closes */
	size_t stdin_len;
	bool stdin_stream; /* fed with exec_stdin_write */
	/* Streaming: output goes here instead of the result's buffers;
	 * return 1 to pause reading that stream until exec_resume_output. */
	int (*on_output)(void *ctx, int fd, const char *data, size_t len);
	void (*on_stdin_drain)(void *ctx);      /* stdin can take more */
	void (*on_started)(void *ctx, int pid); /* init forked it */
	/* A terminal: argv runs with this pty slave as stdin, stdout and
	 * stderr and its controlling terminal (no pipes; the caller reads
	 * the master). exec_submit takes the fd, also when it fails. */
	bool pty;
	int pty_slave;
};

enum exec_failure {
	EXEC_OK = 0,
	EXEC_TIMEOUT,     /* killed at its timeout */
	EXEC_NOT_STARTED, /* could not be started: msg says why */
	EXEC_STOPPED,     /* the sandbox stopped under it */
	EXEC_CANCELLED,   /* exec_cancel */
};

struct exec_result {
	enum exec_failure failure;
	char msg[600];
	int exit_code; /* exit status, or 128 + signal */
	int signo;     /* 0 unless killed by a signal */
	int pid;       /* in the sandbox; 0 until it ran */
	struct buf out, err;
	uint64_t start_wall_ms, duration_ms;
};

struct exec_job;
typedef void (*exec_done_cb)(const struct exec_result *res, void *ctx);

/* The timeout a command gets when it asks for asked_ms (0: none): the
 * session's default, else the daemon's. */
uint64_t exec_timeout_for(const struct sandbox *sb, const struct session *sess,
                          uint64_t asked_ms);
/* Queue a command in a session (NULL: default). done runs exactly once,
 * possibly before exec_submit returns; the job is freed right after it.
 * *out (may be NULL) gets the job, valid until done runs. */
int exec_submit(struct sandbox *sb, struct session *sess,
                const struct exec_params *p, exec_done_cb done, void *ctx,
                struct exec_job **out, struct sbx_err *err);
void exec_resume_output(struct exec_job *j);
/* Pull stdout instead (a consumer that reads it straight into its own
 * buffer, e.g. a socket's): stdout must be paused (on_output returned 1).
 * Returns the bytes read (> 0); 0 when there is nothing now: on_output
 * (ctx, 1, NULL, 0) says when there is; -1 at its end, after which the job
 * may be over (done() may have run within this call: j is gone). */
ssize_t exec_output_pull(struct exec_job *j, char *buf, size_t max);
/* Feed stdin without blocking; returns bytes taken (less: on_stdin_drain
 * follows when more fits). */
size_t exec_stdin_write(struct exec_job *j, const char *data, size_t len);
void exec_stdin_close(struct exec_job *j);
/* Whether stdin can still take bytes (false once closed or broken: the
 * command stopped reading). */
bool exec_stdin_open(const struct exec_job *j);
/* Signal the command's main process, or every process of its tree. */
int exec_signal(struct exec_job *j, int signo);
int exec_signal_tree(struct exec_job *j, int signo);
/* Kill the command's whole tree; done follows with EXEC_CANCELLED unless
 * it had ended already. */
void exec_cancel(struct exec_job *j);
int exec_pid(const struct exec_job *j);
/* For a done callback: take the output buffers (so that an answer can be
 * sent from them after the job is freed); the result keeps empty ones. */
void exec_result_take(const struct exec_result *res, struct buf *out,
                      struct buf *err);

/* Manager hooks: messages from init, and a sandbox going away. */
void exec_on_spawned(struct sandbox *sb, uint64_t id, int pid, int err,
                     const char *what);
void exec_on_exit(struct sandbox *sb, uint64_t id, int status, int err,
                  const char *what);
void exec_fail_all(struct sandbox *sb, enum exec_failure f, const char *why);
/* The sandbox's stop has ended: the commands sent while it stopped start,
 * in order (which starts it afresh). */
void exec_stop_ended(struct sandbox *sb);

#endif
