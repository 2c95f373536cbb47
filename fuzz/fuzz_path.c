/* path_beneath: whatever it accepts is a clean relative path. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size + 1), out[512];
	if (!in)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	const char *bases[] = {"/workspace", "/"};
	for (int b = 0; b < 2; b++) {
		if (path_beneath(bases[b], in, out, sizeof(out)) != PATH_OK)
			continue;
		/* relative, no empty, "." or ".." component */
		if (out[0] == '/')
			abort();
		for (char *c = out; *c;) {
			size_t l = strcspn(c, "/");
			if (l == 0 || (l == 1 && c[0] == '.') ||
			    (l == 2 && c[0] == '.' && c[1] == '.'))
				abort();
			c += l;
			if (*c == '/')
				c++;
		}
	}
	free(in);
	return 0;
}
