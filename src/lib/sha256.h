/* SHA-256 (FIPS 180-4), streamed: the checksum of a backup archive as it
 * flows through the daemon, and the payload hash of an S3 request. */
#ifndef SBX_SHA256_H
#define SBX_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
	uint32_t h[8];
	uint64_t len; /* bytes hashed so far */
	unsigned char buf[64];
	size_t nbuf;
};

#define SHA256_HEX_LEN 64

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
/* The digest as 64 lowercase hex digits and a NUL (hex: 65 bytes). */
void sha256_final_hex(struct sha256 *s, char hex[SHA256_HEX_LEN + 1]);
/* One call: the hex digest of data. */
void sha256_hex(const void *data, size_t len, char hex[SHA256_HEX_LEN + 1]);

#endif
