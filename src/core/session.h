/* A session: a cwd and an exported environment that carry from one command
 * to the next, and a queue, since a session runs one command at a time.
 * After each shell command, the state record that the image's session hook
 * wrote (session_sh in session.c) replaces the session's cwd and environment.
 * The manager keeps that state in the registry too (session_state_encode),
 * so that it survives a daemon restart. */
#ifndef SBX_SESSION_H
#define SBX_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/image.h"

/* The hook every session shell sources (BASH_ENV), the fd it writes the
 * shell's state to, and the mark that starts the record. */
#define SESSION_SCRIPT "/etc/sandboxd/session.sh"
#define SESSION_STATE_FD 63
#define SESSION_STATE_MARK "SBXSTATE"
/* The hook, as a file of every sandbox's image. */
extern const struct image_file session_image_file;
/* The most a shell's state record may hold (exec reads no more), and so
 * the most a session's saved state (cwd and environment) may be. */
#define SESSION_STATE_MAX (1u << 20)

struct exec_job;

struct session;

/* What a face may read of a session, filled by session_info: borrowed
 * from the session, valid until it runs its next command or changes. */
struct session_info {
	const char *id;
	const char *cwd;
	const char *const *env; /* "KEY=VALUE", NULL-terminated */
	size_t envc;
	uint64_t timeout_ms; /* its commands' default; 0: the daemon's */
};
void session_info(const struct session *s, struct session_info *out);
/* Its cwd alone (what the faces resolve a client's paths against). */
const char *session_cwd(const struct session *s);
/* Its commands' default timeout (0: the daemon's). */
void session_set_timeout(struct session *s, uint64_t timeout_ms);

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
int session_apply_state_except(struct session *s, const char *buf, size_t len,
                               char *const *extra, size_t nextra);
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
const char **session_env_for(const struct session *s, const char *const *extra,
                             size_t nextra, const char *add, size_t *count);

/* The session's cwd and environment as "cwd\0K=V\0K=V\0" (*out malloc'd,
 * *len bytes). -E2BIG past SESSION_STATE_MAX, -ENOMEM. */
int session_state_encode(const struct session *s, char **out, size_t *len);
/* Replace the session's cwd and environment with an encoded state (as
 * read back from the registry: checked, all or nothing). -EINVAL for a
 * state that is not one (too big, cut short, a relative cwd, an entry
 * without '=' or with an empty name), -ENOMEM. */
int session_state_decode(struct session *s, const char *buf, size_t len);
/* 64-bit FNV-1a of an encoded state (never 0), for session.saved. */
uint64_t session_state_hash(const char *buf, size_t len);

#endif
