/* The name a client asks for in the first bytes of a connection: the SNI
 * of a TLS ClientHello (RFC 8446 4.1.2, RFC 6066 3) or the Host header of
 * an HTTP/1 request. Pure functions over what has arrived so far. */
#ifndef SBX_PEEK_H
#define SBX_PEEK_H

#include <stddef.h>

/* 1: name found (lowercase, no port, no final dot); 0: need more bytes;
 * -1: not that protocol, or it carries no name. */
int peek_tls_sni(const unsigned char *p, size_t len, char *name, size_t cap);
int peek_http_host(const char *p, size_t len, char *name, size_t cap);

#endif
