/* Bytes as the inside of a JSON string, produced piece by piece, so that a
 * big string (a command's output, a process log) can be sent without a
 * second, escaped copy of it in memory. The text is exactly what
 * json_dumps(json_bytes(data, len)) puts between the quotes: invalid UTF-8
 * and NUL become U+FFFD, '"' '\\' and control characters are escaped as
 * jansson escapes them. */
#ifndef SBX_JSONESC_H
#define SBX_JSONESC_H

#include <stddef.h>

/* Length of the escaped text of s[0..len). */
size_t jsonesc_len(const char *s, size_t len);
/* Escape from s[*off] on into out (cap bytes, at least 12), whole
 * characters only; advances *off and returns the bytes written. */
size_t jsonesc_some(const char *s, size_t len, size_t *off, char *out,
                    size_t cap);

#endif
