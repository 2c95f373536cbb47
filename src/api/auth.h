/* Bearer tokens and tenants. A tokens file has one "<token> <tenant>
 * [maxSandboxes=N] [maxRunning=N] [operator]" per line ('#' comments, blank
 * lines ignored); the quotas are the tenant's (given on any of its lines, the
 * same wherever given). Without one, every request is the default tenant
 * "" (and the daemon only listens on loopback). */
#ifndef SBX_AUTH_H
#define SBX_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/err.h"

struct auth;

int auth_load(const char *path, struct auth **out, struct sbx_err *err);
void auth_free(struct auth *a);
/* The tenant of an "Authorization: Bearer <token>" header value, or NULL.
 * Compares in constant time per token. */
const char *auth_tenant(const struct auth *a, const char *header);
/* A tenant's quotas (0: none): sandboxes it may have, and have running. */
void auth_quota(const struct auth *a, const char *tenant,
                uint32_t *max_sandboxes, uint32_t *max_running);

/* Whether a tenant is the operator's (a token line with "operator"; every
 * caller without tokens): it may import images from host paths, upload
 * and delete images. */
bool auth_operator(const struct auth *a, const char *tenant);

#endif
