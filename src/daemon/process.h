/* Background processes: commands that run beside a sandbox's sessions,
 * keep their output in a capped log (oldest dropped, flagged), and can be
 * streamed from any byte cursor, fed on stdin, and killed with their whole
 * tree (TERM, then KILL after a grace period). They keep the sandbox from
 * idling out while they run. */
#ifndef SBX_PROCESS_H
#define SBX_PROCESS_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/exec.h"
#include "daemon/http.h"

enum process_status {
	PROC_RUNNING,
	PROC_COMPLETED, /* exit 0 */
	PROC_FAILED,    /* non-zero, signal, or could not start */
	PROC_KILLED,    /* ended by process_kill */
};

struct log_chunk {
	struct log_chunk *next;
	uint64_t start;  /* cursor of its first byte */
	size_t len;
	uint8_t fd;      /* 1 stdout, 2 stderr */
	char *data;      /* its bytes, in the same allocation (moved on when
			    the oldest of them are dropped) */
};

struct process_watch;

struct process {
	struct sandbox *sb;
	char *id;
	char *command;
	int pid;
	enum process_status status;
	int exit_code;
	bool ended;
	char error[600];
	uint64_t start_ms, end_ms; /* wall clock */
	struct exec_job *job;      /* while it runs */
	struct log_chunk *head, *tail;
	uint64_t log_start, log_end; /* cursors of retained bytes */
	uint64_t log_bytes;
	bool log_dropped;
	struct process_watch *watches;
	struct loop_timer kill_timer;
	bool kill_requested;
	struct buf stdin_pending;  /* bytes waiting for the pipe */
	struct http_req *stdin_req; /* answered when they are written */
	void (*on_started)(struct process *p, void *ctx);
	void *started_ctx;
	struct process *next;
};

/* Start one; on_started runs once it has a pid, or has failed (then
 * p->ended). -EEXIST when id is taken by a running process. */
int process_start(struct sandbox *sb, struct session *sess, const char *id,
		  const struct exec_params *params, const char *display,
		  void (*on_started)(struct process *p, void *ctx), void *ctx,
		  struct process **out, struct sbx_err *err);
struct process *process_find(struct sandbox *sb, const char *id_or_pid);
const char *process_status_name(enum process_status s);
/* TERM the tree now, KILL it after grace_ms. */
int process_kill(struct process *p, uint64_t grace_ms);
/* stdout and stderr as retained. */
void process_logs(const struct process *p, struct buf *out, struct buf *err);
/* An SSE stream of its output from cursor on, live until it ends. */
int process_watch(struct process *p, struct http_stream *s, uint64_t cursor);
/* Write to its stdin; r is answered (200) once all is written. */
void process_stdin(struct process *p, struct http_req *r, const char *data,
		   size_t len);
/* The sandbox is going away: free every record. */
void process_free_all(struct sandbox *sb);

#endif
