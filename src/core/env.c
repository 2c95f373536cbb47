#include "core/env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

bool env_name_valid(const char *k)
{
	if (!*k || (*k >= '0' && *k <= '9'))
		return false;
	for (; *k; k++)
		if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') ||
		      (*k >= '0' && *k <= '9') || *k == '_'))
			return false;
	return true;
}

void env_free(char **env)
{
	for (char **e = env; e && *e; e++)
		free(*e);
	free(env);
}

int env_from_json(json_t *env, char ***out, size_t *n, const char **bad)
{
	*out = NULL;
	*n = 0;
	*bad = NULL;
	if (!env || json_is_null(env))
		return 0;
	if (!json_is_object(env))
		return -EINVAL;
	char **v = calloc(json_object_size(env) + 1, sizeof(char *));
	if (!v)
		return -ENOMEM;
	size_t k = 0;
	const char *name;
	json_t *val;
	json_object_foreach(env, name, val)
	{
		if (json_is_null(val))
			continue;
		if (!json_is_string(val) || !env_name_valid(name)) {
			*bad = name;
			env_free(v);
			return -EINVAL;
		}
		if (asprintf(&v[k], "%s=%s", name, json_string_value(val)) <
		    0) {
			v[k] = NULL;
			env_free(v);
			return -ENOMEM;
		}
		k++;
	}
	*out = v;
	*n = k;
	return 0;
}
