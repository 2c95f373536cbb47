/* The session state record a shell writes (which sandboxed code controls:
 * the mark, the cwd and bash's `declare -px`, parsed by the daemon), and a
 * session's state as kept in the registry. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/session_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* value as bash prints it: "..." with \ before $ ` " \, or $'...' with
 * octal escapes when it holds a control or non-ASCII byte */
static size_t quote(const char *v, char *o)
{
	size_t n = 0;
	int ansic = 0;
	for (const char *p = v; *p; p++)
		ansic |= (unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f;
	if (ansic) {
		o[n++] = '$';
		o[n++] = '\'';
		for (const char *p = v; *p; p++) {
			unsigned char c = (unsigned char)*p;
			if (c < 0x20 || c >= 0x7f)
				n += (size_t)sprintf(o + n, "\\%03o", c);
			else if (c == '\\' || c == '\'') {
				o[n++] = '\\';
				o[n++] = (char)c;
			} else
				o[n++] = (char)c;
		}
		o[n++] = '\'';
		return n;
	}
	o[n++] = '"';
	for (const char *p = v; *p; p++) {
		if (strchr("$`\"\\", *p))
			o[n++] = '\\';
		o[n++] = *p;
	}
	o[n++] = '"';
	return n;
}

/* What the parser read, printed again the way bash would, reads back the
 * same. */
static void check_round_trip(const struct session *s)
{
	size_t cap = 32 + strlen(s->cwd);
	for (size_t i = 0; i < s->envc; i++)
		cap += 16 + 4 * strlen(s->env[i]);
	char *rec = malloc(cap), *o = rec;
	if (!rec)
		abort();
	o += sprintf(o, "SBXSTATE%c%s%c", 0, s->cwd, 0);
	for (size_t i = 0; i < s->envc; i++) {
		const char *eq = strchr(s->env[i], '=');
		o += sprintf(o, "declare -x %.*s=", (int)(eq - s->env[i]),
		             s->env[i]);
		o += quote(eq + 1, o);
		*o++ = '\n';
	}
	*o++ = '\0';
	struct session *t = session_new("t", NULL, NULL, 0);
	if (!t || session_apply_state(t, rec, (size_t)(o - rec)) != 1 ||
	    strcmp(t->cwd, s->cwd) || t->envc != s->envc)
		abort();
	for (size_t i = 0; i < s->envc; i++)
		if (strcmp(t->env[i], s->env[i]))
			abort();
	session_free(t);
	free(rec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct session *s = session_new("f", NULL, NULL, 0);
	char *buf = malloc(size ? size : 1);
	if (!s || !buf)
		abort();
	memcpy(buf, data, size);
	if (session_apply_state(s, buf, size) == 1) {
		if (s->cwd[0] != '/')
			abort();
		for (size_t i = 0; i < s->envc; i++) {
			const char *kv = s->env[i], *eq = strchr(kv, '=');
			if (!eq || eq == kv)
				abort();
			for (const char *c = kv; c < eq; c++)
				if (!(*c == '_' || (*c >= 'a' && *c <= 'z') ||
				      (*c >= 'A' && *c <= 'Z') ||
				      (c > kv && *c >= '0' && *c <= '9')))
					abort(); /* names are bash's */
		}
		check_round_trip(s);
	}
	/* the same bytes as a state read back from the registry */
	if (session_state_decode(s, buf, size) == 0) {
		char *enc;
		size_t len;
		if (s->cwd[0] != '/')
			abort();
		for (size_t i = 0; i < s->envc; i++)
			if (!strchr(s->env[i], '=') || s->env[i][0] == '=')
				abort();
		if (session_state_encode(s, &enc, &len) == 0) {
			if (len != size || memcmp(enc, buf, len))
				abort(); /* what is read back is what was kept
				          */
			free(enc);
		}
	}
	free(buf);
	session_free(s);
	return 0;
}
