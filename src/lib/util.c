#include "lib/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

uint64_t now_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t now_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void id_random(char *buf, size_t cap, const char *prefix)
{
	uint64_t rnd = 0;
	/* getrandom of 8 bytes from an initialised pool does not fail or
	 * come short; the clock stands in should it ever */
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
		rnd ^= now_mono_ms() * 0x9e3779b97f4a7c15ull;
	snprintf(buf, cap, "%s%012llx", prefix,
	         (unsigned long long)(rnd & 0xffffffffffffull));
}

void iso8601_ms(uint64_t wall_ms, char *buf, size_t cap)
{
	time_t t = (time_t)(wall_ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ",
	         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	         tm.tm_min, tm.tm_sec, (unsigned)(wall_ms % 1000));
}

/* A non-negative decimal number and the rest of the string. */
static int parse_number(const char *s, double *v, const char **rest)
{
	char *end;
	if (!s || !*s || !(s[0] >= '0' && s[0] <= '9'))
		return -EINVAL;
	errno = 0;
	*v = strtod(s, &end);
	if (errno || !isfinite(*v) || *v < 0)
		return -EINVAL;
	*rest = end;
	return 0;
}

int parse_duration_ms(const char *s, uint64_t *out)
{
	static const struct {
		const char *unit;
		double ms;
	} units[] = {{"", 1000},   {"ms", 1},      {"s", 1000},
	             {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
	double v;
	const char *rest;
	if (parse_number(s, &v, &rest))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(rest, units[i].unit))
			continue;
		double ms = v * units[i].ms;
		if (ms > 1e15)
			return -EINVAL;
		*out = (uint64_t)llround(ms);
		return 0;
	}
	return -EINVAL;
}

int parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "BKMGT";
	double v;
	const char *rest;
	if (parse_number(s, &v, &rest))
		return -EINVAL;
	double mul = 1;
	if (*rest) {
		const char *u = strchr(units, rest[0] & ~0x20);
		if (!u)
			return -EINVAL;
		for (const char *p = units; p < u; p++)
			mul *= 1024;
		rest++;
		if (*rest == 'i' && u != units)
			rest++;
		if ((*rest == 'B' || *rest == 'b') && u != units)
			rest++;
		if (*rest)
			return -EINVAL;
	}
	if (v * mul > 9e18)
		return -EINVAL;
	*out = (uint64_t)llround(v * mul);
	return 0;
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if invalid. */
size_t utf8_seq(const unsigned char *s, size_t len)
{
	unsigned c = s[0];
	if (c == 0)
		return 0;
	if (c < 0x80)
		return 1;
	size_t n;
	unsigned min;
	if ((c & 0xe0) == 0xc0)
		n = 2, min = 0x80;
	else if ((c & 0xf0) == 0xe0)
		n = 3, min = 0x800;
	else if ((c & 0xf8) == 0xf0)
		n = 4, min = 0x10000;
	else
		return 0;
	if (len < n)
		return 0;
	unsigned cp = c & (0x7f >> n);
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

size_t utf8_sanitize(const char *s, size_t len, char *out)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq(p + i, len - i);
		if (n) {
			memcpy(out + o, p + i, n);
			o += n;
			i += n;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	out[o] = '\0';
	return o;
}

int utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq(p + i, len - i);
		if (!n)
			return 0;
		i += n;
	}
	return 1;
}
