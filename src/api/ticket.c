/* Tickets: a short list, pruned of expired entries on every call. The
 * comparison of a presented ticket runs in constant time per entry, as the
 * bearer tokens' does (auth.c). */
#include "api/ticket.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "lib/util.h"

struct ticket {
	char value[TICKET_LEN + 1];
	const char *tenant; /* auth's, which outlives every ticket */
	char *id;
	uint64_t expires_ms; /* monotonic */
	struct ticket *next;
};

static struct ticket *tickets; /* newest first */

static void ticket_free(struct ticket *t)
{
	free(t->id);
	free(t);
}

static void prune(uint64_t now)
{
	size_t n = 0;
	for (struct ticket **p = &tickets; *p;) {
		struct ticket *t = *p;
		if (t->expires_ms <= now || ++n > TICKET_MAX - 1) {
			*p = t->next;
			ticket_free(t);
		} else {
			p = &t->next;
		}
	}
}

uint64_t ticket_new(const char *tenant, const char *id, char *out)
{
	uint8_t raw[16];
	uint64_t now = now_mono_ms();
	prune(now);
	if (getrandom(raw, sizeof(raw), 0) != sizeof(raw))
		return 0;
	struct ticket *t = calloc(1, sizeof(*t));
	if (!t || !(t->id = strdup(id))) {
		if (t)
			ticket_free(t);
		return 0;
	}
	memcpy(t->value, "tk_", 3);
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(t->value + 3 + 2 * i, 3, "%02x", raw[i]);
	t->tenant = tenant;
	t->expires_ms = now + TICKET_TTL_MS;
	t->next = tickets;
	tickets = t;
	memcpy(out, t->value, TICKET_LEN + 1);
	return now_wall_ms() + TICKET_TTL_MS;
}

static bool same(const char *a, const char *b)
{
	size_t la = strlen(a);
	if (la != TICKET_LEN || strlen(b) != TICKET_LEN)
		return false;
	unsigned char d = 0;
	for (size_t i = 0; i < TICKET_LEN; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

const char *ticket_take(const char *ticket, const char *id)
{
	prune(now_mono_ms());
	for (struct ticket **p = &tickets; *p; p = &(*p)->next) {
		struct ticket *t = *p;
		if (!same(t->value, ticket))
			continue;
		*p = t->next;
		const char *tenant = strcmp(t->id, id) ? NULL : t->tenant;
		ticket_free(t);
		return tenant;
	}
	return NULL;
}
