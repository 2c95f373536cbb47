/* Environment variables as clients give them: one rule for every face. */
#ifndef SBX_ENV_H
#define SBX_ENV_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* A shell name, [A-Za-z_][A-Za-z0-9_]*: what bash can export. */
bool env_name_valid(const char *name);

/* A JSON object {"NAME": "value", ...} (NULL or null: none) as
 * "NAME=value" strings into *out, NULL-terminated (free with env_free),
 * *n of them. A null value is skipped (the SDKs' undefined). 0; -EINVAL
 * with *bad the offending name, or NULL when env is not an object; or
 * -ENOMEM. */
int env_from_json(json_t *env, char ***out, size_t *n, const char **bad);
void env_free(char **env);

#endif
