/* A session: a cwd and an exported environment that carry from one command
 * to the next, and a queue, since a session runs one command at a time.
 * After each shell command, the state record that the image's session hook
 * wrote (see runtime/image.c) replaces the session's cwd and environment. */
#ifndef SBX_SESSION_H
#define SBX_SESSION_H

#include <stddef.h>

struct exec_job;

struct session {
	char *id;
	char *cwd;
	char **env;  /* "KEY=VALUE", NULL-terminated */
	size_t envc;
	/* the strings of the last state record, in one piece (an entry of
	 * env points in here, or was allocated on its own) */
	char *block;
	size_t block_len;
	struct exec_job *running;
	struct exec_job *queue_head, *queue_tail;
	struct session *next;
};

/* A session with the default environment (or env, copied, when given). */
struct session *session_new(const char *id, const char *cwd,
			    const char *const *env, size_t envc);
void session_free(struct session *s);
/* Set or replace one variable ("KEY=VALUE"). */
int session_setenv(struct session *s, const char *kv);
/* "KEY=VALUE" of key (the part of kv before '='), or NULL. */
const char *session_getenv(const struct session *s, const char *kv);
void session_unsetenv(struct session *s, const char *kv);
/* Apply a state record, but variables given to this one command (extra,
 * "KEY=VALUE") are not kept unless the command changed them. */
int session_apply_state_except(struct session *s, const char *buf,
			       size_t len, char *const *extra, size_t nextra);
/* Take the last complete state record in buf[0..len); returns 1 when the
 * session changed, 0 when there was no record, -errno on a bad one. */
int session_apply_state(struct session *s, const char *buf, size_t len);
/* What a session's state costs, counted as execve counts its environment
 * (each string, its NUL and a pointer) plus the cwd: of the session as it
 * is, and of the last complete record in buf[0..len) (0: none; -EINVAL: a
 * bad one; -E2BIG: a variable longer than execve takes, SESSION_MAX_VAR). */
#define SESSION_MAX_VAR (128u << 10)
size_t session_env_cost(const struct session *s);
long long session_state_cost(const char *buf, size_t len);
/* Environment for a command: the session's, then extra (which win),
 * then add ("KEY=VALUE" each, may be NULL). NULL-terminated; free the
 * array only (strings are borrowed). */
const char **session_env_for(const struct session *s,
			     const char *const *extra, size_t nextra,
			     const char *add, size_t *count);

#endif
