/* Small pure helpers: clocks, parsing of durations and sizes, UTF-8. */
#ifndef SBX_UTIL_H
#define SBX_UTIL_H

#include <stddef.h>
#include <stdint.h>

uint64_t now_mono_ms(void);
uint64_t now_wall_ms(void);
/* "2026-11-29T20:00:00.000Z" into buf (>= 25 bytes). */
void iso8601_ms(uint64_t wall_ms, char *buf, size_t cap);

/* "500ms", "2s", "10m", "1h", "1.5s", plain "30" (seconds). -EINVAL on
 * anything else or overflow. */
int parse_duration_ms(const char *s, uint64_t *out);
/* "1024", "64k", "256M", "1G", "1.5G" (binary units). */
int parse_size(const char *s, uint64_t *out);

/* prefix + 12 random hex digits into buf (cap >= strlen(prefix) + 13):
 * the one generator of every ID the daemon makes up (sandboxes, sessions,
 * processes, contexts), unguessable so that one tenant cannot aim at
 * another's by counting. */
#define ID_RANDOM_MAX 32
void id_random(char *buf, size_t cap, const char *prefix);

/* Copy s into out, replacing every invalid UTF-8 sequence (and NUL) with
 * U+FFFD, so the result is always valid for JSON. out must have room for
 * 3 * len + 1 bytes; returns the output length. */
size_t utf8_sanitize(const char *s, size_t len, char *out);
/* Length of the valid UTF-8 sequence at s (1-4), or 0 when it is invalid,
 * cut short by len, or NUL. */
size_t utf8_seq(const unsigned char *s, size_t len);
/* Whether s[0..len) is valid UTF-8 without NUL. */
int utf8_valid(const char *s, size_t len);

#endif
