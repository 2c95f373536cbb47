#include "api/auth.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct token {
	char *token, *tenant;
	uint32_t max_sandboxes, max_running; /* 0: none */
	bool op; /* "operator": may manage images (host paths) */
};

struct auth {
	struct token *t;
	size_t n;
};

static int valid_tenant(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 63)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		      *s == '-' || *s == '_'))
			return 0;
	return 1;
}

/* "maxSandboxes=N maxRunning=N" (either, both or none) after the tenant. */
static int parse_quotas(char **save, uint32_t q[2], bool *op)
{
	static const char *const names[] = {"maxSandboxes=", "maxRunning="};
	for (char *w; (w = strtok_r(NULL, " \t\r\n", save));) {
		if (!strcmp(w, "operator")) {
			*op = true;
			continue;
		}
		int i = !strncmp(w, names[0], strlen(names[0]))   ? 0
		        : !strncmp(w, names[1], strlen(names[1])) ? 1
		                                                  : -1;
		if (i < 0 || q[i])
			return -1;
		char *end;
		const char *v = w + strlen(names[i]);
		unsigned long n = strtoul(v, &end, 10);
		if (*end || !*v || *v == '-' || n < 1 || n > 1000000)
			return -1;
		q[i] = (uint32_t)n;
	}
	return 0;
}

/* Quotas belong to the tenant: two lines of it must not disagree (a line
 * without any takes the tenant's). */
static bool same_tenant_other_quotas(struct auth *a, const char *tenant,
                                     const uint32_t q[2])
{
	for (size_t i = 0; i < a->n; i++) {
		struct token *t = &a->t[i];
		if (strcmp(t->tenant, tenant))
			continue;
		bool tq = t->max_sandboxes || t->max_running, nq = q[0] || q[1];
		if (tq && nq &&
		    (t->max_sandboxes != q[0] || t->max_running != q[1]))
			return true;
	}
	return false;
}

int auth_load(const char *path, struct auth **out, struct sbx_err *err)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return sbx_err_sys(err, errno, "tokens file %s", path);
	struct auth *a = calloc(1, sizeof(*a));
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0, r = 0;
	if (!a) {
		fclose(f);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	while (getline(&line, &cap, f) > 0) {
		lineno++;
		char *save = NULL;
		char *tok = strtok_r(line, " \t\r\n", &save);
		if (!tok || tok[0] == '#')
			continue;
		char *tenant = strtok_r(NULL, " \t\r\n", &save);
		uint32_t q[2] = {0, 0};
		bool op = false;
		if (!tenant || strlen(tok) < 16 || !valid_tenant(tenant) ||
		    parse_quotas(&save, q, &op) < 0) {
			r = sbx_err_set(
			    err, EINVAL,
			    "%s:%d: expected \"<token of 16+ chars> "
			    "<tenant [a-z0-9_-]> [maxSandboxes=N] "
			    "[maxRunning=N] [operator]\"",
			    path, lineno);
			break;
		}
		if (same_tenant_other_quotas(a, tenant, q)) {
			r = sbx_err_set(err, EINVAL,
			                "%s:%d: tenant %s has other quotas on "
			                "another line",
			                path, lineno, tenant);
			break;
		}
		struct token *t = realloc(a->t, (a->n + 1) * sizeof(*t));
		if (!t) {
			r = sbx_err_set(err, ENOMEM, "out of memory");
			break;
		}
		a->t = t;
		a->t[a->n].token = strdup(tok);
		a->t[a->n].tenant = strdup(tenant);
		a->t[a->n].max_sandboxes = q[0];
		a->t[a->n].max_running = q[1];
		a->t[a->n].op = op;
		a->n++;
	}
	free(line);
	fclose(f);
	if (!r && !a->n)
		r = sbx_err_set(err, EINVAL, "%s: no tokens", path);
	if (r) {
		auth_free(a);
		return r;
	}
	*out = a;
	return 0;
}

void auth_free(struct auth *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->n; i++) {
		/* wiped: the process may dump core or be inspected */
		explicit_bzero(a->t[i].token, strlen(a->t[i].token));
		free(a->t[i].token);
		free(a->t[i].tenant);
	}
	free(a->t);
	free(a);
}

static int same(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = (unsigned char)(la != lb);
	for (size_t i = 0; i < la; i++)
		d |= (unsigned char)(a[i] ^ b[i < lb ? i : 0]);
	return d == 0;
}

const char *auth_tenant(const struct auth *a, const char *header)
{
	static const char prefix[] = "Bearer ";
	if (!header || strncmp(header, prefix, sizeof(prefix) - 1))
		return NULL;
	const char *tok = header + sizeof(prefix) - 1;
	const char *found = NULL;
	for (size_t i = 0; i < a->n; i++)
		if (same(tok, a->t[i].token))
			found = a->t[i].tenant;
	return found;
}

void auth_quota(const struct auth *a, const char *tenant,
                uint32_t *max_sandboxes, uint32_t *max_running)
{
	*max_sandboxes = *max_running = 0;
	for (size_t i = 0; a && i < a->n; i++)
		if (!strcmp(a->t[i].tenant, tenant) &&
		    (a->t[i].max_sandboxes || a->t[i].max_running)) {
			*max_sandboxes = a->t[i].max_sandboxes;
			*max_running = a->t[i].max_running;
			return;
		}
}

bool auth_operator(const struct auth *a, const char *tenant)
{
	if (!a)
		return true;
	for (size_t i = 0; tenant && i < a->n; i++)
		if (a->t[i].op && !strcmp(a->t[i].tenant, tenant))
			return true;
	return false;
}
