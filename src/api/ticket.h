/* Short-lived tickets for WebSocket URLs. A browser cannot set an
 * Authorization header on a WebSocket, so a client with a bearer token
 * asks for a ticket (POST /v1/sandbox/{id}/pty/ticket) and puts it in the
 * URL (?ticket=): it names one tenant's one sandbox, works once, and
 * expires after TICKET_TTL_MS, so a URL that ends up in a log or a
 * browser's history is worth nothing. */
#ifndef SBX_TICKET_H
#define SBX_TICKET_H

#include <stddef.h>
#include <stdint.h>

#define TICKET_TTL_MS 60000u
#define TICKET_MAX 1024 /* outstanding at once; the oldest goes first */
#define TICKET_LEN 35   /* "tk_" + 32 hex digits */

/* A new ticket for tenant's sandbox id into out (TICKET_LEN + 1 bytes);
 * returns its expiry (wall clock, ms), 0 when out of memory. tenant is
 * kept as given: a string of auth's (or a literal), never freed before
 * the daemon ends. */
uint64_t ticket_new(const char *tenant, const char *id, char *out);
/* The tenant the ticket was made for, when it is valid for sandbox id
 * (it is used up either way); NULL otherwise. */
const char *ticket_take(const char *ticket, const char *id);

#endif
