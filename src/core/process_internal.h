/* What a process record is made of: for the core's files only
 * (scripts/check-layers keeps the faces out). The faces see struct process
 * as opaque and read it through process_info (core/process.h). */
#ifndef SBX_PROCESS_INTERNAL_H
#define SBX_PROCESS_INTERNAL_H

#include "core/process.h"

struct log_chunk {
	struct log_chunk *next;
	uint64_t start; /* cursor of its first byte */
	size_t len;
	uint8_t fd; /* 1 stdout, 2 stderr */
	char *data; /* its bytes, in the same allocation (moved on when
	               the oldest of them are dropped) */
};

struct process {
	struct sandbox *sb;
	char *id;
	char *command;
	char *note; /* a face's own text about it (E2B: its
	               config and tag), freed with it */
	int pid;
	enum process_status status;
	int exit_code;
	int signo;      /* the signal that ended it, or 0 */
	bool timed_out; /* killed at its timeout */
	bool ended;
	char error[600];
	uint64_t start_ms, end_ms; /* wall clock */
	struct exec_job *job;      /* while it runs */
	struct log_chunk *head, *tail;
	uint64_t log_start, log_end; /* cursors of retained bytes */
	uint64_t log_bytes;
	bool log_dropped;
	struct process_follower *followers;
	struct loop_timer kill_timer;
	bool kill_requested;
	struct buf stdin_pending;               /* bytes waiting for the pipe */
	void (*stdin_done)(void *ctx, int err); /* when they are written */
	void *stdin_ctx;
	bool stdin_close_after; /* close once stdin_pending is written */
	void (*on_started)(struct process *p, void *ctx);
	void *started_ctx;
	struct process *next;
};

#endif
