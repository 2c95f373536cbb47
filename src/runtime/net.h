/* A sandbox's link to the outside, when it has one: a veth pair, one end
 * on the host (named by the daemon), the other as eth0 in the sandbox's
 * network namespace, with an address and a default route. Made over
 * rtnetlink (libmnl). No policy here: what may pass is runtime/firewall.c's
 * business. */
#ifndef SBX_NET_H
#define SBX_NET_H

#include <stdint.h>

#include "lib/err.h"

/* Keep a handle on the daemon's own namespace (to come back to after
 * making a socket in a sandbox's); before any other call. */
int net_init(struct sbx_err *err);
void net_fini(void);
/* Addresses are IPv4 in host byte order; prefix is the pair's netmask
 * length. Brings up lo in the namespace too (init may not have yet). An
 * existing host link of that name (left by a sandbox that just stopped)
 * is removed first. */
int net_veth_setup(int netns_fd, const char *host_if, uint32_t host_ip,
                   uint32_t sb_ip, int prefix, struct sbx_err *err);
/* Remove the pair by its host end; 0 when it is already gone. */
int net_veth_remove(const char *host_if, struct sbx_err *err);
/* A socket made inside netns_fd's namespace (it stays there); -errno. */
int net_ns_socket(int netns_fd, int domain, int type, int protocol);
/* Bytes the host end received (the sandbox sent) and sent; -errno. */
int net_if_bytes(const char *host_if, uint64_t *from_sb, uint64_t *to_sb);
/* Enable IPv4 forwarding; *was: the value before. */
int net_forwarding_enable(int *was, struct sbx_err *err);
void net_forwarding_restore(int was);

#endif
