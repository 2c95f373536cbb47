/* The daemon<->init SPAWN and INIT payloads: decoding arbitrary bytes
 * never reads past them, and what decodes re-encodes to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct spawn_req req;
	struct sbx_err err;
	/* a private copy, so ASan sees any read past the end */
	char *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (proto_spawn_decode(buf, size, &req, &err) == 0) {
		char *again = malloc(size + 1);
		ssize_t n =
		    again ? proto_spawn_encode(&req, again, size + 1) : -1;
		if (n != (ssize_t)size || memcmp(again, buf, size))
			abort();
		free(again);
		free((void *)req.argv);
		free((void *)req.envp);
	}
	struct init_params p;
	if (proto_init_decode(buf, size, &p, &err) == 0) {
		char *again = malloc(size + 1);
		ssize_t n = again ? proto_init_encode(&p, again, size + 1) : -1;
		if (n != (ssize_t)size || memcmp(again, buf, size))
			abort();
		free(again);
		free((void *)p.layers);
		seccomp_prog_free(&p.seccomp);
	}
	free(buf);
	return 0;
}
