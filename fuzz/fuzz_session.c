/* The session state record a shell writes (which sandboxed code controls),
 * and a session's state as kept in the registry. */
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
				abort(); /* what is read back is what was kept */
			free(enc);
		}
	}
	free(buf);
	session_free(s);
	return 0;
}
