/* Background processes: commands that run beside a sandbox's sessions,
 * keep their output in a capped log (oldest dropped, flagged), and can be
 * followed from any byte cursor, fed on stdin, and killed with their whole
 * tree (TERM, then KILL after a grace period). They keep the sandbox from
 * idling out while they run.
 *
 * Theory of operation. A process is an exec job (core/exec.c) submitted
 * detached, with its stdin kept open. Its output is never paused: every
 * chunk goes into the log (a list of chunks, each with the cursor of its
 * first byte; the oldest are dropped past the cap), and then to each
 * follower. A follower is a callback set with its own cursor: it is fed
 * from the log up to the end, stops when its consumer says so (a slow
 * client), and picks up from its cursor on process_follow_resume; a
 * consumer that is behind the log's start is told what it missed. When the
 * process has ended and a follower has every byte, its ended callback runs
 * once and the follower is gone. Ended records are kept (up to a number
 * per sandbox) so their logs can still be read. Nothing here knows HTTP:
 * the faces turn callbacks into answers. */
#ifndef SBX_PROCESS_H
#define SBX_PROCESS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/exec.h"

enum process_status {
	PROC_RUNNING,
	PROC_COMPLETED, /* exit 0 */
	PROC_FAILED,    /* non-zero, signal, or could not start */
	PROC_KILLED,    /* ended by process_kill */
};

struct process;
struct process_follower;

/* What a face may read of a process, filled by process_info: the strings
 * are the record's own, valid while it lives (note until process_set_note
 * replaces it), and the figures are those of the moment of the call. */
struct process_info {
	const char *id;
	const char *command;
	const char *note;  /* a face's own text about it, or NULL */
	const char *error; /* why it could not start, or "" */
	int pid;
	enum process_status status;
	int exit_code;
	int signo;      /* the signal that ended it, or 0 */
	bool timed_out; /* killed at its timeout */
	bool ended;
	uint64_t start_ms, end_ms;   /* wall clock */
	uint64_t log_start, log_end; /* cursors of retained bytes */
	bool log_dropped;            /* the oldest output was dropped */
};

/* Start one; on_started runs once it has a pid, or has failed (then
 * p->ended). -EEXIST when id is taken by a running process. */
int process_start(struct sandbox *sb, struct session *sess, const char *id,
                  const struct exec_params *params, const char *display,
                  void (*on_started)(struct process *p, void *ctx), void *ctx,
                  struct process **out, struct sbx_err *err);
struct process *process_find(struct sandbox *sb, const char *id_or_pid);
/* Its background processes, newest first: NULL starts, NULL ends. */
struct process *process_next(struct sandbox *sb, struct process *prev);
const char *process_status_name(enum process_status s);
void process_info(const struct process *p, struct process_info *out);
/* Whether it has ended (process_info's ended alone). */
bool process_ended(const struct process *p);
/* Replace a face's own text about it (copied; NULL clears it). -ENOMEM. */
int process_set_note(struct process *p, const char *note);
/* Send signo to its whole tree now, as it is (no grace, no record of a
 * kill). -ESRCH when it has ended. */
int process_signal(struct process *p, int signo);
/* TERM the tree now, KILL it after grace_ms. */
int process_kill(struct process *p, uint64_t grace_ms);
/* Its info, and stdout and stderr as retained, into out and err
 * (initialised here; the caller frees them), all of the same moment. */
void process_logs(const struct process *p, struct process_info *info,
                  struct buf *out, struct buf *err);

struct process_follow_ops {
	/* bytes of fd (1 stdout, 2 stderr) whose last byte is at cursor
	 * end - 1; nonzero: pause until process_follow_resume */
	int (*output)(void *ctx, int fd, uint64_t end, const char *data,
	              size_t len);
	/* output older than the log keeps was skipped */
	void (*dropped)(void *ctx);
	/* the process ended and every byte was delivered, or (gone) the
	 * sandbox is going away; the follower is freed after this */
	void (*ended)(void *ctx, const struct process *p, bool gone);
};
/* Follow its output from cursor on. *out is set first, then the follower
 * is fed from the log at once: for an ended process, ended may run (and
 * the follower be gone) before this returns. -ENOMEM. */
int process_follow(struct process *p, uint64_t cursor,
                   const struct process_follow_ops *ops, void *ctx,
                   struct process_follower **out);
void process_follow_resume(struct process_follower *f);
/* Stop following (no callback runs after this). */
void process_unfollow(struct process_follower *f);

/* Write to its stdin. 0: all written; 1: the rest is written as the
 * process reads it, and done(ctx, 0) runs then (done(ctx, -EPIPE) if it
 * stops reading first, -ESRCH if it ends first). Errors: -ESRCH it has
 * ended, -EPIPE it no longer reads its stdin, -EBUSY a write is still in
 * progress, -ENOMEM. */
int process_stdin(struct process *p, const char *data, size_t len,
                  void (*done)(void *ctx, int err), void *ctx);
/* Close its stdin (after bytes still pending): the process reads EOF.
 * -ESRCH it has ended. */
int process_stdin_close(struct process *p);
/* The writer waiting for done is gone: the rest is still written, and
 * nobody is told. */
void process_stdin_forget(struct process *p);
/* The sandbox is going away: free every record. */
void process_free_all(struct sandbox *sb);

#endif
