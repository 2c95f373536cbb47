/* Bearer tokens and tenants. A tokens file has one "<token> <tenant>" per
 * line ('#' comments, blank lines ignored). Without one, every request is
 * the default tenant "" (and the daemon only listens on loopback). */
#ifndef SBX_AUTH_H
#define SBX_AUTH_H

#include "lib/err.h"

struct auth;

int auth_load(const char *path, struct auth **out, struct sbx_err *err);
void auth_free(struct auth *a);
/* The tenant of an "Authorization: Bearer <token>" header value, or NULL.
 * Compares in constant time per token. */
const char *auth_tenant(const struct auth *a, const char *header);

#endif
