/* Network policies (shared/spec/v1.md "Network") and what carries them
 * out: a sandbox in allowlist or full mode gets a veth (runtime/net.c),
 * its own nftables chain (runtime/firewall.c) and a DNS server on
 * 127.0.0.1:53 inside its namespace, answered by the daemon from its loop
 * (core/dns.c). A sandbox in none mode costs nothing: only lo, as before. */
#ifndef SBX_NETWORK_H
#define SBX_NETWORK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"
#include "lib/loop.h"
#include "runtime/firewall.h"

struct sandbox;
struct manager;
struct config;

enum net_mode { NET_NONE, NET_ALLOWLIST, NET_FULL };

/* A rule: a hostname ("pypi.org"), a wildcard ("*.example.com": any name
 * below it, not itself), or an IPv4 range, each optionally ":port". */
struct net_rule {
	char *text; /* as given, for GET */
	char *host; /* lowercase, without "*." ; NULL for a range */
	bool wildcard;
	struct fw_cidr cidr; /* a range's, port included */
	uint16_t port;       /* 0: any */
};

struct net_policy {
	enum net_mode mode;
	struct net_rule *allow, *deny;
	size_t nallow, ndeny;
};

#define NET_MAX_RULES 256

const char *net_mode_name(enum net_mode m);
int net_mode_parse(const char *s, enum net_mode *out);
/* Validate and add a rule; -EINVAL with why filled. */
int net_policy_add(struct net_policy *p, bool deny, const char *rule, char *why,
                   size_t whylen);
void net_policy_clear(struct net_policy *p);
/* "mode\nA rule\nD rule\n" (the registry's form) and back. */
char *net_policy_encode(const struct net_policy *p);
int net_policy_decode(const char *s, struct net_policy *p);
/* Whether name may be resolved, and on which ports (*any: every port;
 * else ports[0..*nports)). A denied name is never allowed. */
bool net_policy_name_allowed(const struct net_policy *p, const char *name,
                             bool *any, uint16_t *ports, size_t *nports,
                             size_t maxports);
/* An IPv4 range "a.b.c.d[/n]" (host order). */
int net_cidr_parse(const char *s, struct fw_cidr *out);

/* Per running sandbox with a link. */
struct sandbox_net {
	struct sandbox *sb;
	struct sandbox_net *next; /* the daemon's list of links */
	uint32_t addr;            /* the sandbox's end */
	char ifname[16];
	int netns_fd;
	int dns_fd;
	struct loop_watch dns_w;
	uint64_t rx_base, tx_base; /* the link's counters when it was made */
	/* what DNS answered this sandbox (allowlist): the SNI/Host check */
	struct net_seen {
		uint32_t addr;
		uint64_t until_ms;
		char *name;
	} * seen;
	size_t nseen;
};

/* The daemon's side: made by manager_new, freed by manager_free. */
int network_new(struct manager *m, struct sbx_err *err);
void network_free(struct manager *m);
/* The mode a sandbox runs with (its own, else --network-default). */
enum net_mode sandbox_net_mode(const struct sandbox *sb);
/* Called right after init started: give it the link its policy asks for.
 * On failure the caller stops the sandbox (it never runs with more
 * network than asked); -ENETDOWN with why. */
int network_sandbox_start(struct sandbox *sb, struct sbx_err *err);
/* Before the sandbox stops: counters kept, link, rules and DNS gone. */
void network_sandbox_stop(struct sandbox *sb);
/* Replace a sandbox's policy (takes p's contents); applied at once when
 * it runs, and kept in the registry. -ENETDOWN when it could not be
 * applied (then the sandbox was stopped). */
int network_sandbox_set(struct sandbox *sb, struct net_policy *p,
                        struct sbx_err *err);
/* The policy to show (the default one when the sandbox has none). */
const struct net_policy *sandbox_net_policy(const struct sandbox *sb,
                                            struct net_policy *dflt);
/* Bytes the sandbox sent and received over its links, all runs. */
/* Returns whether it ever had a link (one now, or bytes of earlier). */
bool sandbox_net_usage(const struct sandbox *sb, uint64_t *tx, uint64_t *rx);
/* A socket inside the running sandbox's network namespace (the port
 * proxy); -errno. */
int sandbox_net_socket(struct sandbox *sb, int type);

#endif
