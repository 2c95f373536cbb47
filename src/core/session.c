/* Sessions: a cwd and an exported environment carried from one command to
 * the next.
 *
 * Theory of operation. A session's commands run one at a time
 * (core/exec.c queues them). A shell command is started with the
 * session's cwd and environment and BASH_ENV naming the hook below, which
 * bash sources before the command; on the shell's exit the hook writes a
 * state record (a mark, the cwd, every exported variable, NUL-separated)
 * to fd SESSION_STATE_FD, a pipe the daemon reads like stdout. When the
 * command ends, exec hands the record here (session_apply_state_except):
 * the last whole record wins, variables the command was only given for
 * itself are put back, and what the shell must not carry (SHLVL, PWD, _)
 * is dropped. A record that execve could not take again, or that would
 * put the sandbox's sessions over --max-session-env, is refused and the
 * session keeps its previous state. The manager keeps each session's
 * state in the registry (session_state_encode/decode) so that a session
 * survives a daemon restart. A command that is not a shell (argv) or a
 * background one leaves the session as it was. */
#include "core/session.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Sourced by every non-interactive bash a session runs (BASH_ENV): on exit
 * it writes the shell's cwd and exported variables to fd 63
 * (SESSION_STATE_FD), which the daemon reads to carry them to the
 * session's next command. Builtins only
 * (${!X@} lists variables without a fork), so it costs microseconds. */
static const char session_sh[] =
	"# sandboxd session hook: keeps cwd and exported variables between "
	"commands.\n"
	"unset BASH_ENV\n"
	"__sbx_save() {\n"
	"  local __sbx_rc=$? __sbx_n IFS=$' \\t\\n'\n"
	"  {\n"
	"    builtin printf '" SESSION_STATE_MARK "\\0%s\\0' \"$PWD\"\n"
	"    for __sbx_n in ${!A@} ${!B@} ${!C@} ${!D@} ${!E@} ${!F@} ${!G@} "
	"${!H@} ${!I@} ${!J@} ${!K@} ${!L@} ${!M@} ${!N@} ${!O@} ${!P@} "
	"${!Q@} ${!R@} ${!S@} ${!T@} ${!U@} ${!V@} ${!W@} ${!X@} ${!Y@} "
	"${!Z@} ${!a@} ${!b@} ${!c@} ${!d@} ${!e@} ${!f@} ${!g@} ${!h@} "
	"${!i@} ${!j@} ${!k@} ${!l@} ${!m@} ${!n@} ${!o@} ${!p@} ${!q@} "
	"${!r@} ${!s@} ${!t@} ${!u@} ${!v@} ${!w@} ${!x@} ${!y@} ${!z@} "
	"${!_@}; do\n"
	"      [[ ${!__sbx_n@a} == *x* ]] && builtin printf '%s=%s\\0' "
	"\"$__sbx_n\" \"${!__sbx_n}\"\n"
	"    done\n"
	"  } >&63 2>/dev/null\n"
	"  return $__sbx_rc\n"
	"}\n"
	"{ : >&63; } 2>/dev/null && trap __sbx_save EXIT\n";

const struct image_file session_image_file = {
	.path = SESSION_SCRIPT + 1, /* relative to the image's root */
	.data = session_sh,
	.len = sizeof(session_sh) - 1,
	.mode = 0644,
};


static const char *const default_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	"USER=root",
	"LOGNAME=root",
	"SHELL=/bin/bash",
	"LANG=C.UTF-8",
	"TERM=xterm-256color",
	"HOSTNAME=sandbox",
};

/* Variables the shell sets for itself; carrying them over would be wrong
 * (SHLVL would grow by one per command) or pointless. */
static const char *const not_carried[] = {"SHLVL", "PWD", "_", "BASH_ENV"};

/* Whether an entry was allocated on its own (not in the record block). */
static bool own_string(const struct session *s, const char *p)
{
	return !(s->block && p >= s->block && p < s->block + s->block_len);
}

static void session_env_free(struct session *s)
{
	for (size_t i = 0; s->env && i < s->envc; i++)
		if (own_string(s, s->env[i]))
			free(s->env[i]);
	free(s->env);
	free(s->block);
	s->env = NULL;
	s->block = NULL;
	s->envc = s->block_len = 0;
}

static size_t key_len(const char *kv)
{
	const char *eq = strchr(kv, '=');
	return eq ? (size_t)(eq - kv) : strlen(kv);
}

struct session *session_new(const char *id, const char *cwd,
			    const char *const *env, size_t envc)
{
	struct session *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->id = strdup(id);
	s->cwd = strdup(cwd ? cwd : "/workspace");
	if (!env) {
		env = default_env;
		envc = sizeof(default_env) / sizeof(default_env[0]);
	}
	s->env = calloc(envc + 1, sizeof(char *));
	if (!s->id || !s->cwd || !s->env)
		goto fail;
	for (size_t i = 0; i < envc; i++)
		if (session_setenv(s, env[i]) < 0)
			goto fail;
	return s;
fail:
	session_free(s);
	return NULL;
}

void session_free(struct session *s)
{
	if (!s)
		return;
	free(s->id);
	free(s->cwd);
	session_env_free(s);
	free(s);
}

int session_setenv(struct session *s, const char *kv)
{
	size_t kl = key_len(kv);
	char *dup = strdup(kv);
	if (!dup)
		return -ENOMEM;
	for (size_t i = 0; i < s->envc; i++) {
		if (key_len(s->env[i]) == kl && !strncmp(s->env[i], kv, kl)) {
			if (own_string(s, s->env[i]))
				free(s->env[i]);
			s->env[i] = dup;
			return 0;
		}
	}
	char **n = realloc(s->env, (s->envc + 2) * sizeof(char *));
	if (!n) {
		free(dup);
		return -ENOMEM;
	}
	s->env = n;
	s->env[s->envc++] = dup;
	s->env[s->envc] = NULL;
	return 0;
}

const char *session_getenv(const struct session *s, const char *kv)
{
	size_t kl = key_len(kv);
	for (size_t i = 0; i < s->envc; i++)
		if (key_len(s->env[i]) == kl && !strncmp(s->env[i], kv, kl))
			return s->env[i];
	return NULL;
}

void session_unsetenv(struct session *s, const char *kv)
{
	size_t kl = key_len(kv);
	for (size_t i = 0; i < s->envc; i++)
		if (key_len(s->env[i]) == kl && !strncmp(s->env[i], kv, kl)) {
			if (own_string(s, s->env[i]))
				free(s->env[i]);
			s->env[i] = s->env[--s->envc];
			s->env[s->envc] = NULL;
			return;
		}
}

int session_apply_state_except(struct session *s, const char *buf,
			       size_t len, char *const *extra, size_t nextra)
{
	/* what the session had for each of them, before */
	char **before = calloc(nextra + 1, sizeof(char *));
	if (!before)
		return -ENOMEM;
	for (size_t i = 0; i < nextra; i++) {
		const char *old = session_getenv(s, extra[i]);
		before[i] = old ? strdup(old) : NULL;
	}
	int r = session_apply_state(s, buf, len);
	for (size_t i = 0; r == 1 && i < nextra; i++) {
		const char *now = session_getenv(s, extra[i]);
		if (!now || strcmp(now, extra[i]))
			continue; /* the command changed or unset it: its own */
		if (before[i])
			session_setenv(s, before[i]);
		else
			session_unsetenv(s, extra[i]);
	}
	for (size_t i = 0; i < nextra; i++)
		free(before[i]);
	free(before);
	return r;
}

static int carried(const char *kv)
{
	size_t kl = key_len(kv);
	if (!kl || kv[kl] != '=')
		return 0;
	for (size_t i = 0; i < sizeof(not_carried) / sizeof(not_carried[0]); i++)
		if (strlen(not_carried[i]) == kl && !strncmp(kv, not_carried[i], kl))
			return 0;
	return 1;
}

/* The last complete record's start in buf (its mark), or NULL. */
static const char *last_record(const char *buf, size_t len)
{
	static const char mark[] = SESSION_STATE_MARK; /* followed by NUL */
	const char *rec = NULL;

	for (const char *p = buf; p + sizeof(mark) <= buf + len;) {
		const char *m = memmem(p, (size_t)(buf + len - p), mark, sizeof(mark));
		if (!m)
			break;
		if (m == buf || m[-1] == '\0')
			rec = m;
		p = m + 1;
	}
	return rec;
}

/* Check a record's shape: its cwd, and where its entries start; -EINVAL
 * when it was cut short (the shell died while writing). */
static int record_parts(const char *rec, const char *end, const char **cwd,
			const char **entries)
{
	const char *p = rec + sizeof(SESSION_STATE_MARK);
	const char *nul = memchr(p, '\0', (size_t)(end - p));
	if (!nul || p[0] != '/')
		return -EINVAL;
	if (end > nul + 1 && end[-1] != '\0')
		return -EINVAL; /* the last entry is incomplete */
	*cwd = p;
	*entries = nul + 1;
	return 0;
}

long long session_state_cost(const char *buf, size_t len)
{
	const char *rec = last_record(buf, len), *cwd, *q, *end = buf + len;
	if (!rec)
		return 0;
	if (record_parts(rec, end, &cwd, &q) < 0)
		return -EINVAL;
	long long cost = (long long)(q - cwd);
	for (size_t l; q < end; q += l + 1) {
		l = strlen(q);
		if (l + 1 > SESSION_MAX_VAR)
			return -E2BIG;
		if (carried(q))
			cost += (long long)(l + 1 + sizeof(char *));
	}
	return cost;
}

size_t session_env_cost(const struct session *s)
{
	size_t cost = strlen(s->cwd) + 1;
	for (size_t i = 0; i < s->envc; i++)
		cost += strlen(s->env[i]) + 1 + sizeof(char *);
	return cost;
}

int session_apply_state(struct session *s, const char *buf, size_t len)
{
	const char *rec = last_record(buf, len), *cwd, *first, *end = buf + len;
	if (!rec)
		return 0;
	if (record_parts(rec, end, &cwd, &first) < 0)
		return -EINVAL;
	/* one block for the carried strings and one array pointing into
	 * it: a record of many tiny variables costs what it weighs, not a
	 * heap chunk and a pointer per variable */
	size_t n = 0, bytes = 0;
	for (const char *q = first; q < end; q += strlen(q) + 1)
		if (carried(q)) {
			n++;
			bytes += strlen(q) + 1;
		}
	char **env = calloc(n + 1, sizeof(char *));
	char *block = bytes ? malloc(bytes) : NULL;
	char *ncwd = strdup(cwd);
	if (!env || (bytes && !block) || !ncwd) {
		free(env);
		free(block);
		free(ncwd);
		return -ENOMEM;
	}
	size_t k = 0, at = 0;
	for (const char *q = first; q < end; q += strlen(q) + 1) {
		if (!carried(q))
			continue;
		size_t l = strlen(q) + 1;
		memcpy(block + at, q, l);
		env[k++] = block + at;
		at += l;
	}
	session_env_free(s);
	free(s->cwd);
	s->env = env;
	s->envc = k;
	s->block = block;
	s->block_len = bytes;
	s->cwd = ncwd;
	return 1;
}

const char **session_env_for(const struct session *s,
			     const char *const *extra, size_t nextra,
			     const char *add, size_t *count)
{
	const char **out = calloc(s->envc + nextra + 2, sizeof(char *));
	size_t n = 0;
	if (!out)
		return NULL;
	for (size_t i = 0; i < s->envc; i++) {
		size_t kl = key_len(s->env[i]);
		int overridden = 0;
		for (size_t j = 0; j < nextra && !overridden; j++)
			overridden = key_len(extra[j]) == kl &&
				     !strncmp(extra[j], s->env[i], kl);
		if (!overridden)
			out[n++] = s->env[i];
	}
	for (size_t j = 0; j < nextra; j++)
		out[n++] = extra[j];
	if (add)
		out[n++] = add;
	out[n] = NULL;
	*count = n;
	return out;
}

int session_state_encode(const struct session *s, char **out, size_t *len)
{
	size_t n = strlen(s->cwd) + 1;
	for (size_t i = 0; i < s->envc; i++)
		n += strlen(s->env[i]) + 1;
	if (n > SESSION_STATE_MAX)
		return -E2BIG;
	char *buf = malloc(n), *p = buf;
	if (!buf)
		return -ENOMEM;
	size_t l = strlen(s->cwd) + 1;
	memcpy(p, s->cwd, l);
	p += l;
	for (size_t i = 0; i < s->envc; i++) {
		l = strlen(s->env[i]) + 1;
		memcpy(p, s->env[i], l);
		p += l;
	}
	*out = buf;
	*len = n;
	return 0;
}

int session_state_decode(struct session *s, const char *buf, size_t len)
{
	if (!buf || !len || len > SESSION_STATE_MAX || buf[len - 1] != '\0' ||
	    buf[0] != '/')
		return -EINVAL;
	const char *end = buf + len, *p = buf + strlen(buf) + 1;
	size_t n = 0;
	for (const char *q = p; q < end; q += strlen(q) + 1) {
		if (key_len(q) == 0 || !strchr(q, '='))
			return -EINVAL;
		n++;
	}
	char **env = calloc(n + 1, sizeof(char *));
	char *cwd = strdup(buf);
	if (!env || !cwd)
		goto nomem;
	for (size_t k = 0; k < n; k++, p += strlen(p) + 1)
		if (!(env[k] = strdup(p)))
			goto nomem;
	session_env_free(s);
	free(s->cwd);
	s->env = env;
	s->envc = n;
	s->cwd = cwd;
	return 0;
nomem:
	for (size_t k = 0; env && k < n; k++)
		free(env[k]);
	free(env);
	free(cwd);
	return -ENOMEM;
}

uint64_t session_state_hash(const char *buf, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
	return h ? h : 1;
}
