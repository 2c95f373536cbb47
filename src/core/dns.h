/* The few DNS message operations the sandboxes' resolver needs (RFC
 * 1035): read a query's one question, answer it with an error or nothing,
 * and read the IPv4 addresses of an answer. Every length is checked; a
 * message that does not parse is dropped by the caller. */
#ifndef SBX_DNS_H
#define SBX_DNS_H

#include <stddef.h>
#include <stdint.h>

#define DNS_T_A 1
#define DNS_T_AAAA 28
#define DNS_RC_NOERROR 0
#define DNS_RC_SERVFAIL 2
#define DNS_RC_NXDOMAIN 3
#define DNS_RC_REFUSED 5

/* A query: its id, its question's name (lowercase, dotted, no final dot)
 * and type; *qend: where the question ends. -EINVAL if it is not a
 * standard query with exactly one question. */
int dns_query_parse(const uint8_t *m, size_t len, uint16_t *id, char *name,
                    size_t namecap, uint16_t *qtype, size_t *qend);
/* Turn a query (its first qend bytes in m, cap >= qend) into an answer
 * with rcode and no records; returns its length. */
size_t dns_reply_empty(uint8_t *m, size_t qend, uint8_t rcode);
/* Call cb for every A record in an answer's answer section. -EINVAL
 * when it does not parse. */
int dns_answer_addrs(const uint8_t *m, size_t len,
                     void (*cb)(uint32_t addr, uint32_t ttl, void *data),
                     void *data);

#endif
