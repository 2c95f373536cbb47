/* The executor of AI agents: one shell command run for a model, and the
 * <run> tags of a model's answer. Both faces that serve models use it: the
 * Duet room assistant (POST /api/rooms/{room}/message, the <run> tags of
 * seed 000's executeCommands) and the MCP server's run_command (seed 004's
 * tool).
 *
 * A command runs with bash in a session of the sandbox (exec.c), with a
 * timeout that kills its cgroup, so the command and every process it
 * started end (daemonized ones too). Its output is streamed through the
 * executor, which keeps only the first head_chars and the last tail_chars
 * characters of each stream (a model's context stays small however much a
 * command prints), and counts the rest.
 *
 * Characters are Unicode code points of the output read as UTF-8; bytes
 * that are not valid UTF-8 (or NUL) count one each and read as U+FFFD. */
#ifndef SBX_AGENT_H
#define SBX_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/exec.h"
#include "lib/buf.h"

/* seed 000: the summary of one <run> keeps 500 characters */
#define AGENT_SUMMARY_CHARS 500
/* seed 004: run_command returns the last 10,000 characters of a stream */
#define AGENT_TAIL_CHARS 10000

struct agent_cmd_opts {
	const char *command;  /* a shell command (bash -c) */
	const char *cwd;      /* NULL: the session's */
	struct session *sess; /* NULL: the default session */
	uint64_t timeout_ms;  /* 0: the daemon's --exec-timeout */
	size_t head_chars;    /* keep the first ones of each stream */
	size_t tail_chars;    /* keep the last ones of each stream */
};

struct agent_stream {
	char *head;   /* the first head_chars characters, valid UTF-8 */
	char *tail;   /* the last tail_chars characters, valid UTF-8 */
	size_t chars; /* characters the stream had in all */
	bool cut;     /* more than tail_chars: tail is not all of it */
};

/* The ends of one stream (used by agent_cmd_run; public for its tests). */
struct agent_keep {
	size_t head_max, tail_max; /* bytes */
	struct buf head, tail;
	bool tail_dropped; /* bytes left the tail's front */
	size_t chars;
};
void agent_keep_init(struct agent_keep *k, size_t head_chars,
                     size_t tail_chars);
int agent_keep_add(struct agent_keep *k, const char *p, size_t n);
/* st's head and tail allocated (free them); k stays to be freed. */
int agent_keep_finish(struct agent_keep *k, size_t head_chars,
                      size_t tail_chars, struct agent_stream *st);
void agent_keep_free(struct agent_keep *k);

struct agent_cmd_result {
	enum exec_failure failure; /* EXEC_OK: it ran (whatever its exit) */
	const char *msg;           /* why, when it failed */
	int exit_code;             /* exit status, or 128 + signal */
	bool timed_out;
	uint64_t duration_ms;
	struct agent_stream out, err;
};

struct agent_cmd;
typedef void (*agent_cmd_done_cb)(const struct agent_cmd_result *res,
                                  void *ctx);

/* Run a command; done runs exactly once (possibly before this returns,
 * never when it fails), the command freed right after it. *out (may be
 * NULL) is valid until done runs; NULL when done ran already. */
int agent_cmd_run(struct sandbox *sb, const struct agent_cmd_opts *o,
                  agent_cmd_done_cb done, void *ctx, struct agent_cmd **out,
                  struct sbx_err *err);
/* Kill the command and its whole tree; done follows (EXEC_CANCELLED). */
void agent_cmd_cancel(struct agent_cmd *c);

/* The Duet exec semantics of a result: NULL when the command ran, else the
 * error's text as the Duet face says it after "sandbox execution failed: "
 * ("timeout", "command not found: <name>", or why it could not run);
 * allocated. */
char *agent_cmd_error(const struct agent_cmd_result *res);
/* bash's "bash: line 1: foo: command not found" on stderr with exit 127:
 * the name (allocated), or NULL. */
char *agent_not_found_name(int exit_code, const char *err, size_t len);

/* ---- the <run> tags of an answer (seed 000's executeCommands) ------------ */

/* The next <run>...</run> at or after *pos in s[0..len): 1 with the tag's
 * content in [*cmd, *cmd + *cmd_len) and *pos past the tag, 0 when none
 * (the regex /<run>([\s\S]*?)<\/run>/g). */
int agent_tag_next(const char *s, size_t len, size_t *pos, const char **cmd,
                   size_t *cmd_len);
/* JavaScript's String.prototype.trim of s[0..len): the bounds. */
void agent_trim(const char **s, size_t *len);
/* The summary of one run appended to b, byte for byte as the seed writes
 * it: "\n\nOutput (cmd):\n" + the first 500 characters of stdout, else of
 * stderr, else "[no output]"; or, when error is not NULL,
 * "\n\nError (cmd):\n" + error. */
int agent_summary(struct buf *b, const char *cmd, const char *out_head,
                  const char *err_head, const char *error);
/* Every tag removed and the result trimmed: allocated. */
char *agent_strip_tags(const char *s, size_t len);

/* Run every <run> tag of text, in order, in the sandbox (tenant, id) of m
 * (made when it does not exist) with Duet's exec semantics, and give done
 * the answer with the summaries appended and the tags removed (valid
 * during the call). done runs exactly once, possibly before this returns. */
int agent_run_tags(struct manager *m, const char *tenant, const char *id,
                   const char *text, void (*done)(const char *reply, void *ctx),
                   void *ctx, struct sbx_err *err);

#endif
