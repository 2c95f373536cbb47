/* Standard base64 (RFC 4648, with padding). */
#ifndef SBX_BASE64_H
#define SBX_BASE64_H

#include <stddef.h>
#include <sys/types.h>

static inline size_t base64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}
/* Writes base64_encoded_len(n) bytes plus a NUL; returns the length. */
size_t base64_encode(const void *in, size_t n, char *out);
/* Decodes into out (room for n / 4 * 3 bytes); returns the length, or -1
 * on anything that is not canonical padded base64 (whitespace refused). */
ssize_t base64_decode(const char *in, size_t n, void *out);

#endif
