/* The interpreter's workers (interp/, embedded at build time by
 * interp_blob.S, each followed by a NUL) as files of every sandbox's image,
 * under INTERP_DIR, sealed: read-only even to the sandbox's root. */
#include "core/interp.h"

#include <string.h>

extern const char sbx_interp_python_worker[];
extern const char sbx_interp_node_worker[];

size_t interp_image_files(struct image_file *out, size_t cap)
{
	const struct image_file files[] = {
	    {INTERP_DIR "/python_worker.py" + 1, sbx_interp_python_worker,
	     strlen(sbx_interp_python_worker), 0444, true},
	    {INTERP_DIR "/node_worker.js" + 1, sbx_interp_node_worker,
	     strlen(sbx_interp_node_worker), 0444, true},
	};
	size_t n = sizeof(files) / sizeof(files[0]);
	if (n > cap)
		n = cap;
	for (size_t i = 0; i < n; i++)
		out[i] = files[i];
	return n;
}
