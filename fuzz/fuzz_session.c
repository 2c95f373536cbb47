/* The session state record a shell writes (which sandboxed code controls). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
		for (size_t i = 0; i < s->envc; i++)
			if (!strchr(s->env[i], '='))
				abort();
	}
	free(buf);
	session_free(s);
	return 0;
}
