/* Sessions: a cwd and an exported environment carried from one command to
 * the next.
 *
 * Theory of operation. A session's commands run one at a time
 * (core/exec.c queues them). A shell command is started with the
 * session's cwd and environment and BASH_ENV naming the hook below, which
 * bash sources before the command; on the shell's exit the hook writes a
 * state record (a mark, the cwd and the output of `declare -px`)
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
#include "core/session_internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Sourced by every non-interactive bash a session runs (BASH_ENV): on exit
 * __sbx_save writes the state record to fd 63 (SESSION_STATE_FD), which the
 * daemon reads to carry the shell's cwd and exported variables to the
 * session's next command:
 *
 *   SESSION_STATE_MARK \0 <cwd> \0 <the output of declare -px> \0
 *
 * Three builtins, whatever the environment holds: bash prints its exported
 * variables in its own quoting (declare_parse below reads it back), which
 * costs a fraction of what walking the variable table in bash did. Its
 * stderr is /dev/null, the call's too: fd 63 closed by the command, or
 * xtrace on, prints nothing. The exit status stays the command's (bash
 * keeps it across an EXIT trap). The Cloudflare face's wrapper calls
 * __sbx_save from a trap of its own (api/cf/cf_shell.c). */
static const char session_sh[] =
    "# sandboxd session hook: keeps cwd and exported variables between "
    "commands.\n"
    "unset BASH_ENV\n"
    "__sbx_save() { { builtin printf '" SESSION_STATE_MARK "\\0%s\\0' "
    "\"$PWD\"; builtin declare -px; builtin printf '\\0'; } "
    "2>/dev/null >&63; }\n"
    "{ : >&63; } 2>/dev/null && trap '{ __sbx_save; } 2>/dev/null' EXIT\n";

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

void session_info(const struct session *s, struct session_info *out)
{
	*out = (struct session_info){
	    .id = s->id,
	    .cwd = s->cwd,
	    .env = (const char *const *)s->env,
	    .envc = s->envc,
	    .timeout_ms = s->timeout_ms,
	};
}

const char *session_cwd(const struct session *s)
{
	return s->cwd;
}

void session_set_timeout(struct session *s, uint64_t timeout_ms)
{
	s->timeout_ms = timeout_ms;
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

int session_apply_state_except(struct session *s, const char *buf, size_t len,
                               char *const *extra, size_t nextra)
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
	for (size_t i = 0; i < sizeof(not_carried) / sizeof(not_carried[0]);
	     i++)
		if (strlen(not_carried[i]) == kl &&
		    !strncmp(kv, not_carried[i], kl))
			return 0;
	return 1;
}

/* ---- reading declare -px --------------------------------------------------
 *
 * What bash 4.4-5.2 prints for each exported variable, one per line:
 *
 *   declare -<attributes> NAME="value"     sh_double_quote: \ before $ ` " \
 *   declare -<attributes> NAME=$'value'    ansic_quote, when the value holds
 *                                          control or unprintable bytes
 *   declare -<attributes> NAME             exported, never given a value
 *
 * The attributes always hold x. An array (a, A) is not exported by bash
 * (a child never sees it), so it is read and dropped; integer, readonly,
 * nameref (which exports its own value, the target's name), case and trace
 * attributes change nothing about the value. A word is read as bash reads
 * one, so quoting the printer may use in other versions (single quotes,
 * backslashes outside quotes, quotes that span lines) reads right too. The
 * text comes from the sandbox: anything else is a bad record, refused whole. */

struct word {
	char *out; /* the decoded bytes (at most as many as the input) */
	size_t len;
};

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A code point as UTF-8 (C.UTF-8 is the sandbox's locale): at most 4
 * bytes, which never exceeds the 6 of the escape that names it. */
static size_t put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | ((cp >> 18) & 0x07));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* The body of $'...' from *pp (after the opening quote) up to and over the
 * closing one, as bash's ansicstr decodes it. */
static int ansic_body(const char **pp, const char *end, struct word *w)
{
	const char *p = *pp;
	while (p < end && *p != '\'') {
		if (*p != '\\' || p + 1 >= end) {
			w->out[w->len++] = *p++;
			continue;
		}
		char c = p[1];
		const char *q = p + 2;
		int v = -1;
		switch (c) {
		case 'a':
			v = '\a';
			break;
		case 'b':
			v = '\b';
			break;
		case 'e':
		case 'E':
			v = 033;
			break;
		case 'f':
			v = '\f';
			break;
		case 'n':
			v = '\n';
			break;
		case 'r':
			v = '\r';
			break;
		case 't':
			v = '\t';
			break;
		case 'v':
			v = '\v';
			break;
		case '\\':
		case '\'':
		case '"':
		case '?':
			v = c;
			break;
		case '0':
		case '1':
		case '2':
		case '3':
		case '4':
		case '5':
		case '6':
		case '7':
			v = 0;
			for (q = p + 1;
			     q < end && q < p + 4 && *q >= '0' && *q <= '7';
			     q++)
				v = v * 8 + (*q - '0');
			v &= 0xff;
			break;
		case 'x':
			for (v = 0; q < end && q < p + 4 && hexval(*q) >= 0;
			     q++)
				v = v * 16 + hexval(*q);
			if (q == p + 2)
				v = -1; /* no digit: "\x" as it is */
			break;
		case 'u':
		case 'U': {
			uint32_t cp = 0;
			const char *lim = p + 2 + (c == 'u' ? 4 : 8);
			for (; q < end && q < lim && hexval(*q) >= 0; q++)
				cp = cp * 16 + (uint32_t)hexval(*q);
			if (q == p + 2)
				break; /* no digit: "\u" as it is */
			if (cp == 0)
				return -EINVAL;
			if (cp > 0x10ffff)
				cp = 0xfffd;
			w->len += put_utf8(w->out + w->len, cp);
			p = q;
			continue;
		}
		case 'c':
			if (q < end && *q != '\'') {
				v = *q == '?' ? 0x7f : (*q & 0x1f);
				q++;
			}
			break;
		}
		if (v == 0)
			return -EINVAL; /* bash never prints one: no NUL in a
			                   value */
		if (v < 0) {            /* not an escape: the backslash stays */
			w->out[w->len++] = '\\';
			p++;
			continue;
		}
		w->out[w->len++] = (char)v;
		p = q;
	}
	if (p >= end)
		return -EINVAL; /* unterminated */
	*pp = p + 1;
	return 0;
}

/* One shell word from *pp up to an unquoted newline (left unread). */
static int read_word(const char **pp, const char *end, struct word *w)
{
	const char *p = *pp;
	w->len = 0;
	while (p < end && *p != '\n') {
		char c = *p;
		if (c == '\\') {
			if (p + 1 >= end)
				return -EINVAL;
			if (p[1] != '\n') /* backslash-newline: nothing */
				w->out[w->len++] = p[1];
			p += 2;
		} else if (c == '\'') {
			const char *q =
			    memchr(p + 1, '\'', (size_t)(end - p - 1));
			if (!q)
				return -EINVAL;
			memcpy(w->out + w->len, p + 1, (size_t)(q - p - 1));
			w->len += (size_t)(q - p - 1);
			p = q + 1;
		} else if (c == '$' && p + 1 < end && p[1] == '\'') {
			p += 2;
			int r = ansic_body(&p, end, w);
			if (r < 0)
				return r;
		} else if (c == '"') {
			for (p++; p < end && *p != '"'; p++) {
				if (*p == '\\' && p + 1 < end &&
				    memchr("$`\"\\\n", p[1], 5)) {
					if (p[1] != '\n')
						w->out[w->len++] = p[1];
					p++;
					continue;
				}
				w->out[w->len++] = *p;
			}
			if (p >= end)
				return -EINVAL;
			p++;
		} else {
			w->out[w->len++] = c;
			p++;
		}
	}
	*pp = p;
	return 0;
}

static bool name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (!first && c >= '0' && c <= '9');
}

/* The exported variables in text[0..len) (declare -px output) as
 * "K=V\0K=V\0..." in *out (malloc'd, *outlen bytes): the entries the hook
 * used to write itself. Every entry is shorter than its line, so len + 1
 * bytes hold them all. */
static int declare_parse(const char *text, size_t len, char **out,
                         size_t *outlen)
{
	const char *p = text, *end = text + len;
	char *buf = malloc(len + 1);
	size_t at = 0;
	int r = 0;
	if (!buf)
		return -ENOMEM;
	while (p < end) {
		static const char decl[] = "declare -";
		if ((size_t)(end - p) < sizeof(decl) - 1 ||
		    memcmp(p, decl, sizeof(decl) - 1)) {
			r = -EINVAL;
			break;
		}
		p += sizeof(decl) - 1;
		bool exported = false, array = false;
		const char *attrs = p;
		for (; p < end && *p != ' '; p++) {
			if (*p == 'x')
				exported = true;
			else if (*p == 'a' || *p == 'A')
				array = true;
			else if (!(*p >= 'a' && *p <= 'z') &&
			         !(*p >= 'A' && *p <= 'Z') && *p != '-')
				break;
		}
		if (p == attrs || p >= end || *p != ' ') {
			r = -EINVAL;
			break;
		}
		const char *name = ++p;
		while (p < end && name_char(*p, p == name))
			p++;
		size_t nl = (size_t)(p - name);
		if (!nl || p >= end || (*p != '=' && *p != '\n')) {
			r = -EINVAL;
			break;
		}
		bool has_value = *p == '=';
		struct word w = {.out = buf + at + nl + 1};
		if (has_value) {
			p++;
			if ((r = read_word(&p, end, &w)) < 0)
				break;
			if (p >= end) { /* every line ends in a newline */
				r = -EINVAL;
				break;
			}
		}
		p++; /* the newline */
		if (!exported || array || !has_value)
			continue; /* not in a child's environment */
		if (memchr(w.out, '\0', w.len)) {
			r = -EINVAL;
			break;
		}
		memcpy(buf + at, name, nl);
		buf[at + nl] = '=';
		at += nl + 1 + w.len;
		buf[at++] = '\0';
	}
	if (r < 0) {
		free(buf);
		return r;
	}
	*out = buf;
	*outlen = at;
	return 0;
}

/* The last complete record's start in buf (its mark), or NULL. */
static const char *last_record(const char *buf, size_t len)
{
	static const char mark[] = SESSION_STATE_MARK; /* followed by NUL */
	const char *rec = NULL;

	/* the hook writes last, when the shell exits: the last mark is its
	 * record (bash strings hold no NUL, so no value can forge one after
	 * it); whatever the command wrote to fd 63 before is passed over */
	for (const char *p = buf; p + sizeof(mark) <= buf + len;) {
		const char *m =
		    memmem(p, (size_t)(buf + len - p), mark, sizeof(mark));
		if (!m)
			break;
		rec = m;
		p = m + 1;
	}
	return rec;
}

/* Check a record's shape and read it: its cwd, and its exported variables
 * as "K=V\0K=V\0..." in *ent (malloc'd, *elen bytes); -EINVAL when it
 * was cut short (the shell died while writing) or is not what bash
 * prints. */
static int record_parts(const char *rec, const char *end, const char **cwd,
                        char **ent, size_t *elen)
{
	const char *p = rec + sizeof(SESSION_STATE_MARK);
	const char *nul = memchr(p, '\0', (size_t)(end - p));
	if (!nul || p[0] != '/')
		return -EINVAL;
	const char *text = nul + 1;
	const char *tend = memchr(text, '\0', (size_t)(end - text));
	if (!tend)
		return -EINVAL; /* the declare -px text is incomplete */
	*cwd = p;
	return declare_parse(text, (size_t)(tend - text), ent, elen);
}

long long session_state_cost(const char *buf, size_t len)
{
	const char *rec = last_record(buf, len), *cwd;
	char *ent;
	size_t elen;
	if (!rec)
		return 0;
	int r = record_parts(rec, buf + len, &cwd, &ent, &elen);
	if (r < 0)
		return r;
	long long cost = (long long)strlen(cwd) + 1;
	for (size_t l, i = 0; i < elen; i += l + 1) {
		l = strlen(ent + i);
		if (l + 1 > SESSION_MAX_VAR) {
			cost = -E2BIG;
			break;
		}
		if (carried(ent + i))
			cost += (long long)(l + 1 + sizeof(char *));
	}
	free(ent);
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
	const char *rec = last_record(buf, len), *cwd;
	char *first;
	size_t elen;
	if (!rec)
		return 0;
	int r = record_parts(rec, buf + len, &cwd, &first, &elen);
	if (r < 0)
		return r;
	const char *end = first + elen;
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
		free(first);
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
	free(first);
	session_env_free(s);
	free(s->cwd);
	s->env = env;
	s->envc = k;
	s->block = block;
	s->block_len = bytes;
	s->cwd = ncwd;
	return 1;
}

const char **session_env_for(const struct session *s, const char *const *extra,
                             size_t nextra, const char *add, size_t *count)
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
