/* The daemon's nftables table (libnftables): what sandboxes with a veth
 * may reach. One table per daemon (inet <name>), made at the first
 * sandbox that needs it, removed when the daemon ends. See
 * docs/security.md "Network" for the rules and why. */
#ifndef SBX_FIREWALL_H
#define SBX_FIREWALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"

struct fw;

/* An IPv4 range, host byte order; port 0: any. */
struct fw_cidr {
	uint32_t addr;
	uint8_t prefix;
	uint16_t port;
};

enum fw_mode { FW_NONE, FW_ALLOWLIST, FW_FULL };

/* A context for the table (nothing changes on the host yet). table: its
 * name; ifprefix: every sandbox link's host end starts with it. */
int fw_new(const char *table, const char *ifprefix, struct fw **out,
           struct sbx_err *err);
/* Make the table (replacing one of that name left by an earlier run).
 * pool: the sandboxes' addresses (never reachable from one); deny: the
 * operator's list; proxy_port: where allowlist sandboxes' TCP 80/443 is
 * redirected (the daemon's name-checking proxy), 0: none. */
int fw_install(struct fw *fw, struct fw_cidr pool, const struct fw_cidr *deny,
               size_t ndeny, uint16_t proxy_port, struct sbx_err *err);
/* Whether another daemon's table is there (it needs forwarding too). */
bool fw_others(struct fw *fw);
/* Removes the table, if it was made. */
void fw_free(struct fw *fw);
/* (Re)make a sandbox's rules: its link's host end ifname, the mode, its
 * own allowed and denied ranges. Addresses learnt from DNS are dropped. */
int fw_sandbox_set(struct fw *fw, unsigned slot, const char *ifname,
                   enum fw_mode mode, const struct fw_cidr *allow,
                   size_t nallow, const struct fw_cidr *deny, size_t ndeny,
                   struct sbx_err *err);
void fw_sandbox_clear(struct fw *fw, unsigned slot, const char *ifname);
/* Allow an address (port 0: any) for ttl_s seconds (allowlist mode). */
int fw_allow_addr(struct fw *fw, unsigned slot, uint32_t addr, uint16_t port,
                  uint32_t ttl_s, struct sbx_err *err);
/* Format a range as nft writes it ("10.0.0.0/8"). */
void fw_cidr_str(const struct fw_cidr *c, char *out, size_t n);

#endif
