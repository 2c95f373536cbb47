/* Network policies and their enforcement (see network.h; the threat
 * model is in docs/security.md "Network").
 *
 * Theory of operation. Nothing happens for a sandbox in none mode. The
 * first sandbox that needs a link makes the daemon's nftables table and
 * turns IPv4 forwarding on (both logged; the table goes, and forwarding
 * is put back, when the daemon ends). A sandbox's link is made right
 * after its init is cloned, its rules first, so that no packet ever
 * leaves before they are in place (until then the table refuses anything
 * from an unknown link). Its DNS is a UDP socket the daemon binds to
 * 127.0.0.1:53 inside the sandbox's namespace (port 53 needs a capability
 * the sandbox lacks there, so it cannot take the place): every query
 * comes to the loop with its sandbox known by the socket it came in on.
 * An allowed query goes to the upstream resolver with a fresh id; its
 * answer goes back, and in allowlist mode the addresses it names are
 * added to the sandbox's nftables set for their TTL. A name that is not
 * allowed gets NXDOMAIN at once; AAAA questions get an empty answer (a
 * sandbox has no IPv6 route), so clients go straight to IPv4. */
#include "core/network.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/tcp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/dns.h"
#include "core/peek.h"
#include "lib/fdpipe.h"
#include "core/manager.h"
#include "core/registry.h"
#include "core/sandbox_internal.h"
#include "lib/log.h"
#include "lib/util.h"
#include "runtime/net.h"

#define NPEND 1024 /* queries waiting for the upstream, all sandboxes */
#define PEND_MS 4000
#define TTL_MIN 30
#define TTL_MAX 3600

struct dns_pending {
	struct sandbox *sb; /* NULL: free */
	uint16_t client_id, up_id;
	struct sockaddr_in from;
	uint64_t at_ms;
	char name[256];
};

struct network {
	struct manager *m;
	struct fw *fw;
	bool installed; /* the table is there */
	bool fwd_set;
	int fwd_was;
	char table[32], ifprefix[16];
	int up_fd;
	struct loop_watch up_w;
	struct sockaddr_in up[4];
	unsigned nup;
	struct dns_pending pend[NPEND];
	unsigned npend;
	struct loop_timer tick;
	/* the name-checking proxy for allowlist sandboxes' TCP 80 and 443 */
	int px_fd;
	uint16_t px_port;
	struct loop_watch px_w;
	struct peek_conn *peeking;
	unsigned npeeking;
	struct sandbox_net *links; /* every sandbox with a link */
};

#define PEEK_MAX 16384
#define PEEK_MS 10000
#define PEEK_CONNS 1024

/* A connection redirected to the proxy, until its name is read and it is
 * joined to its destination (or refused). */
struct peek_conn {
	struct network *n;
	int fd, up_fd;
	struct loop_watch w, up_w;
	struct loop_timer t;
	struct sockaddr_in peer, dst;
	char name[256];
	size_t len;
	unsigned char buf[PEEK_MAX];
	struct peek_conn *next;
};

/* ---- policies ------------------------------------------------------------ */

const char *net_mode_name(enum net_mode m)
{
	return m == NET_FULL        ? "full"
	       : m == NET_ALLOWLIST ? "allowlist"
	                            : "none";
}

int net_mode_parse(const char *s, enum net_mode *out)
{
	if (!strcmp(s, "none"))
		*out = NET_NONE;
	else if (!strcmp(s, "allowlist"))
		*out = NET_ALLOWLIST;
	else if (!strcmp(s, "full"))
		*out = NET_FULL;
	else
		return -EINVAL;
	return 0;
}

int net_cidr_parse(const char *s, struct fw_cidr *out)
{
	char a[20];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	unsigned long prefix = 32;
	if (n == 0 || n >= sizeof(a))
		return -EINVAL;
	memcpy(a, s, n);
	a[n] = '\0';
	if (slash) {
		char *end;
		if (!slash[1] || slash[1] < '0' || slash[1] > '9')
			return -EINVAL;
		prefix = strtoul(slash + 1, &end, 10);
		if (*end || prefix > 32)
			return -EINVAL;
	}
	struct in_addr in;
	if (inet_pton(AF_INET, a, &in) != 1)
		return -EINVAL;
	uint32_t addr = ntohl(in.s_addr);
	uint32_t mask = prefix ? ~0u << (32 - prefix) : 0;
	*out = (struct fw_cidr){addr & mask, (uint8_t)prefix, 0};
	return 0;
}

static bool host_valid(const char *h)
{
	size_t n = strlen(h), label = 0;
	if (n == 0 || n > 253 || h[0] == '.' || h[n - 1] == '.')
		return false;
	for (const char *c = h; *c; c++) {
		if (*c == '.') {
			if (!label || c[-1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (*c == '-' && (!label || !c[1] || c[1] == '.'))
			return false; /* a label neither starts nor ends so */
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
		      *c == '-' || *c == '_') ||
		    ++label > 63)
			return false;
	}
	return true;
}

int net_policy_add(struct net_policy *p, bool deny, const char *rule, char *why,
                   size_t whylen)
{
	struct net_rule r = {0};
	size_t *n = deny ? &p->ndeny : &p->nallow;
	struct net_rule **arr = deny ? &p->deny : &p->allow;
	char body[300];
	if (*n >= NET_MAX_RULES) {
		snprintf(why, whylen, "at most %d rules", NET_MAX_RULES);
		return -EINVAL;
	}
	if (strlen(rule) >= sizeof(body)) {
		snprintf(why, whylen, "rule too long");
		return -EINVAL;
	}
	snprintf(body, sizeof(body), "%s", rule);
	for (char *c = body; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	char *colon = strrchr(body, ':');
	if (colon) {
		char *end;
		unsigned long port = strtoul(colon + 1, &end, 10);
		if (!colon[1] || *end || port == 0 || port > 65535) {
			snprintf(why, whylen, "rule \"%s\": bad port", rule);
			return -EINVAL;
		}
		r.port = (uint16_t)port;
		*colon = '\0';
	}
	if (net_cidr_parse(body, &r.cidr) == 0) {
		r.cidr.port = r.port;
	} else {
		const char *h = body;
		if (!strncmp(h, "*.", 2)) {
			r.wildcard = true;
			h += 2;
		}
		/* a name is not an address: 1.2.3 or 300.1.1.1 */
		bool digits = true;
		for (const char *c = h; *c; c++)
			if (!((*c >= '0' && *c <= '9') || *c == '.' ||
			      *c == '/'))
				digits = false;
		if (digits || !host_valid(h)) {
			snprintf(
			    why, whylen,
			    "rule \"%s\": expected a hostname, *.domain or "
			    "an IPv4 range, optionally with :port",
			    rule);
			return -EINVAL;
		}
		if (!(r.host = strdup(h)))
			return -ENOMEM;
	}
	if (!(r.text = strdup(rule))) {
		free(r.host);
		return -ENOMEM;
	}
	struct net_rule *grown = realloc(*arr, (*n + 1) * sizeof(**arr));
	if (!grown) {
		free(r.text);
		free(r.host);
		return -ENOMEM;
	}
	*arr = grown;
	grown[(*n)++] = r;
	return 0;
}

void net_policy_clear(struct net_policy *p)
{
	for (size_t i = 0; i < p->nallow; i++) {
		free(p->allow[i].text);
		free(p->allow[i].host);
	}
	for (size_t i = 0; i < p->ndeny; i++) {
		free(p->deny[i].text);
		free(p->deny[i].host);
	}
	free(p->allow);
	free(p->deny);
	memset(p, 0, sizeof(*p));
}

char *net_policy_encode(const struct net_policy *p)
{
	size_t n = 16;
	for (size_t i = 0; i < p->nallow; i++)
		n += strlen(p->allow[i].text) + 3;
	for (size_t i = 0; i < p->ndeny; i++)
		n += strlen(p->deny[i].text) + 3;
	char *s = malloc(n), *w = s;
	if (!s)
		return NULL;
	w += sprintf(w, "%s\n", net_mode_name(p->mode));
	for (size_t i = 0; i < p->nallow; i++)
		w += sprintf(w, "A %s\n", p->allow[i].text);
	for (size_t i = 0; i < p->ndeny; i++)
		w += sprintf(w, "D %s\n", p->deny[i].text);
	return s;
}

int net_policy_decode(const char *s, struct net_policy *p)
{
	char line[320], why[200];
	memset(p, 0, sizeof(*p));
	for (int first = 1; *s; first = 0) {
		const char *nl = strchr(s, '\n');
		size_t n = nl ? (size_t)(nl - s) : strlen(s);
		if (n >= sizeof(line))
			goto bad;
		memcpy(line, s, n);
		line[n] = '\0';
		s += n + (nl ? 1 : 0);
		if (first) {
			if (net_mode_parse(line, &p->mode))
				goto bad;
		} else if (n > 2 && (line[0] == 'A' || line[0] == 'D') &&
		           line[1] == ' ') {
			if (net_policy_add(p, line[0] == 'D', line + 2, why,
			                   sizeof(why)))
				goto bad;
		} else if (n) {
			goto bad;
		}
	}
	return 0;
bad:
	net_policy_clear(p);
	return -EINVAL;
}

static bool name_match(const struct net_rule *r, const char *name)
{
	if (!r->host)
		return false;
	if (!r->wildcard)
		return !strcmp(r->host, name);
	size_t n = strlen(name), h = strlen(r->host);
	return n > h + 1 && name[n - h - 1] == '.' &&
	       !strcmp(name + n - h, r->host);
}

bool net_policy_name_allowed(const struct net_policy *p, const char *name,
                             bool *any, uint16_t *ports, size_t *nports,
                             size_t maxports)
{
	*any = false;
	*nports = 0;
	for (size_t i = 0; i < p->ndeny; i++)
		if (name_match(&p->deny[i], name))
			return false;
	if (p->mode == NET_FULL) {
		*any = true;
		return true;
	}
	bool ok = false;
	for (size_t i = 0; i < p->nallow; i++) {
		if (!name_match(&p->allow[i], name))
			continue;
		ok = true;
		if (!p->allow[i].port)
			*any = true;
		else if (*nports < maxports)
			ports[(*nports)++] = p->allow[i].port;
	}
	return ok;
}

/* ---- sandboxes ----------------------------------------------------------- */

enum net_mode sandbox_net_mode(const struct sandbox *sb)
{
	return sb->net_policy ? sb->net_policy->mode
	                      : (enum net_mode)sb->m->cfg->network_default;
}

const struct net_policy *sandbox_net_policy(const struct sandbox *sb,
                                            struct net_policy *dflt)
{
	if (sb->net_policy)
		return sb->net_policy;
	memset(dflt, 0, sizeof(*dflt));
	dflt->mode = (enum net_mode)sb->m->cfg->network_default;
	return dflt;
}

static int proxy_socket(struct network *n, struct sbx_err *err);

static int ensure_fw(struct network *n, struct sbx_err *err)
{
	const struct config *cfg = n->m->cfg;
	if (n->installed)
		return 0;
	int r;
	if (!n->fwd_set) { /* once: a retry must not take 1 for "as it was" */
		if ((r = net_forwarding_enable(&n->fwd_was, err)) < 0)
			return r;
		n->fwd_set = true;
		if (!n->fwd_was)
			log_info(
			    "event=network-setup ip_forward=1 (it was 0; put "
			    "back when the daemon ends)");
	}
	if (listen(n->px_fd, 256) < 0)
		return sbx_err_sys(err, errno, "name-checking proxy: listen");
	/* watched from now on: a socket that does not listen yet reports
	 * EPOLLHUP, always, and the loop would spin on it */
	if (!n->px_w.active &&
	    (r = loop_add(n->m->loop, &n->px_w, EPOLLIN)) < 0)
		return sbx_err_sys(err, -r, "name-checking proxy: watch");
	r = fw_install(n->fw, cfg->net_pool, cfg->deny, cfg->ndeny, n->px_port,
	               err);
	if (r < 0)
		return r;
	n->installed = true;
	char pool[32];
	fw_cidr_str(&cfg->net_pool, pool, sizeof(pool));
	log_info("event=network-setup nft_table=\"inet %s\" links=%s* pool=%s "
	         "(NAT to the host's addresses) proxy_port=%u",
	         n->table, n->ifprefix, pool, n->px_port);
	return 0;
}

static void policy_cidrs(const struct net_rule *rules, size_t n,
                         struct fw_cidr *out, size_t *nout)
{
	*nout = 0;
	for (size_t i = 0; i < n; i++)
		if (!rules[i].host)
			out[(*nout)++] = rules[i].cidr;
}

static int apply_rules(struct network *n, struct sandbox *sb,
                       struct sbx_err *err)
{
	struct net_policy dflt;
	const struct net_policy *p = sandbox_net_policy(sb, &dflt);
	struct fw_cidr allow[NET_MAX_RULES], deny[NET_MAX_RULES];
	size_t na, nd;
	policy_cidrs(p->allow, p->nallow, allow, &na);
	policy_cidrs(p->deny, p->ndeny, deny, &nd);
	enum fw_mode fm = p->mode == NET_FULL        ? FW_FULL
	                  : p->mode == NET_ALLOWLIST ? FW_ALLOWLIST
	                                             : FW_NONE;
	return fw_sandbox_set(n->fw, sb->slot, sb->net->ifname, fm, allow, na,
	                      deny, nd, err);
}

static void on_dns_query(struct loop_watch *w, uint32_t events);

static void seen_clear(struct sandbox_net *sn)
{
	for (size_t i = 0; i < sn->nseen; i++)
		free(sn->seen[i].name);
	free(sn->seen);
	sn->seen = NULL;
	sn->nseen = 0;
}

static void link_free(struct network *n, struct sandbox *sb)
{
	struct sandbox_net *sn = sb->net;
	uint64_t rx, tx;
	if (!sn)
		return;
	if (net_if_bytes(sn->ifname, &rx, &tx) == 0) {
		sb->net_tx += rx - sn->rx_base;
		sb->net_rx += tx - sn->tx_base;
	}
	if (sn->dns_fd >= 0) {
		loop_del(n->m->loop, &sn->dns_w);
		close(sn->dns_fd);
	}
	for (unsigned i = 0; i < NPEND; i++)
		if (n->pend[i].sb == sb) {
			n->pend[i].sb = NULL;
			n->npend--;
		}
	if (n->installed)
		fw_sandbox_clear(n->fw, sb->slot, sn->ifname);
	struct sbx_err err = {0};
	if (net_veth_remove(sn->ifname, &err) < 0)
		log_warn("sandbox=%s event=link-not-removed %s", sb->id,
		         err.msg);
	if (sn->netns_fd >= 0)
		close(sn->netns_fd);
	for (struct sandbox_net **pp = &n->links; *pp; pp = &(*pp)->next)
		if (*pp == sn) {
			*pp = sn->next;
			break;
		}
	seen_clear(sn);
	free(sn);
	sb->net = NULL;
}

static int link_make(struct network *n, struct sandbox *sb, struct sbx_err *err)
{
	const struct config *cfg = n->m->cfg;
	uint64_t cap = 1ull << (32 - cfg->net_pool.prefix);
	int r;
	if ((uint64_t)sb->slot * 4 + 4 > cap)
		return sbx_err_set(err, ENETDOWN,
		                   "network: --net-pool has no /30 left for "
		                   "slot %u",
		                   sb->slot);
	if ((r = ensure_fw(n, err)) < 0) {
		char msg[sizeof(err->msg)];
		snprintf(msg, sizeof(msg), "%s", err->msg);
		return sbx_err_set(err, ENETDOWN, "network: %s", msg);
	}
	struct sandbox_net *sn = calloc(1, sizeof(*sn));
	if (!sn)
		return sbx_err_set(err, ENOMEM, "out of memory");
	sn->dns_fd = -1;
	sn->sb = sb;
	sn->next = n->links;
	n->links = sn;
	/* IFNAMSIZ: "sx" + 4 hex + "-" + at most 5 digits */
	char ifname[32];
	snprintf(ifname, sizeof(ifname), "%s%u", n->ifprefix, sb->slot);
	memcpy(sn->ifname, ifname, sizeof(sn->ifname) - 1);
	sb->net = sn;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)sb->proc.init_pid);
	sn->netns_fd = open(path, O_RDONLY | O_CLOEXEC);
	uint32_t base = cfg->net_pool.addr + sb->slot * 4;
	sn->addr = base + 2;
	if (sn->netns_fd < 0) {
		r = sbx_err_sys(err, errno, "network: %s", path);
		goto fail;
	}
	/* the rules before the link: nothing passes before they are in */
	if ((r = apply_rules(n, sb, err)) < 0 ||
	    (r = net_veth_setup(sn->netns_fd, sn->ifname, base + 1, base + 2,
	                        30, err)) < 0)
		goto fail_msg;
	net_if_bytes(sn->ifname, &sn->rx_base, &sn->tx_base);
	r = net_ns_socket(sn->netns_fd, AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	if (r < 0) {
		sbx_err_sys(err, -r, "dns socket");
		goto fail_msg;
	}
	sn->dns_fd = r;
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons(53),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (bind(sn->dns_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = sbx_err_sys(err, errno, "dns 127.0.0.1:53");
		goto fail_msg;
	}
	sn->dns_w = (struct loop_watch){
	    .fd = sn->dns_fd, .cb = on_dns_query, .data = sb};
	if ((r = loop_add(n->m->loop, &sn->dns_w, EPOLLIN)) < 0) {
		sbx_err_sys(err, -r, "dns watch");
		close(sn->dns_fd);
		sn->dns_fd = -1;
		goto fail_msg;
	}
	log_info("sandbox=%s event=network mode=%s link=%s", sb->id,
	         net_mode_name(sandbox_net_mode(sb)), sn->ifname);
	return 0;
fail_msg : {
	char msg[sizeof(err->msg)];
	snprintf(msg, sizeof(msg), "%s", err->msg);
	sbx_err_set(err, ENETDOWN, "network: %s", msg);
}
fail:
	link_free(n, sb);
	return -ENETDOWN;
}

int network_sandbox_start(struct sandbox *sb, struct sbx_err *err)
{
	if (sandbox_net_mode(sb) == NET_NONE)
		return 0;
	return link_make(sb->m->net, sb, err);
}

void network_sandbox_stop(struct sandbox *sb)
{
	if (sb->net)
		link_free(sb->m->net, sb);
}

int network_sandbox_set(struct sandbox *sb, struct net_policy *p,
                        struct sbx_err *err)
{
	struct network *n = sb->m->net;
	struct net_policy *np = calloc(1, sizeof(*np));
	if (!np)
		return sbx_err_set(err, ENOMEM, "out of memory");
	*np = *p;
	memset(p, 0, sizeof(*p));
	char *enc = net_policy_encode(np);
	if (!enc || registry_network_put(sb->m->reg, sb->tenant, sb->id, enc,
	                                 err) < 0) {
		free(enc);
		net_policy_clear(np);
		free(np);
		return err->code ? -err->code
		                 : sbx_err_set(err, ENOMEM, "out of memory");
	}
	free(enc);
	if (sb->net_policy) {
		net_policy_clear(sb->net_policy);
		free(sb->net_policy);
	}
	sb->net_policy = np;
	if (!sandbox_running(sb))
		return 0;
	int r = 0;
	if (np->mode == NET_NONE) {
		link_free(n, sb);
	} else if (sb->net) {
		seen_clear(sb->net);
		if ((r = apply_rules(n, sb, err)) < 0) {
			char msg[sizeof(err->msg)];
			snprintf(msg, sizeof(msg), "%s", err->msg);
			sbx_err_set(err, ENETDOWN, "network: %s", msg);
		}
	} else {
		r = link_make(n, sb, err);
	}
	if (r < 0) {
		/* never left running with other rules than asked */
		char why[600];
		snprintf(why, sizeof(why), "%s", err->msg);
		sandbox_stop(sb, why);
		return -ENETDOWN;
	}
	log_info("sandbox=%s event=network-policy mode=%s", sb->id,
	         net_mode_name(np->mode));
	return 0;
}

bool sandbox_net_usage(const struct sandbox *sb, uint64_t *tx, uint64_t *rx)
{
	*tx = sb->net_tx;
	*rx = sb->net_rx;
	uint64_t a, b;
	if (sb->net && net_if_bytes(sb->net->ifname, &a, &b) == 0) {
		*tx += a - sb->net->rx_base;
		*rx += b - sb->net->tx_base;
	}
	return sb->net || *tx || *rx;
}

int sandbox_net_socket(struct sandbox *sb, int type)
{
	char path[64];
	if (!sandbox_running(sb))
		return -ESRCH;
	if (sb->net)
		return net_ns_socket(sb->net->netns_fd, AF_INET, type, 0);
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)sb->proc.init_pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = net_ns_socket(fd, AF_INET, type, 0);
	close(fd);
	return r;
}

/* ---- DNS ----------------------------------------------------------------- */

static void reply(struct sandbox_net *sn, uint8_t *m, size_t len,
                  const struct sockaddr_in *to)
{
	sendto(sn->dns_fd, m, len, MSG_DONTWAIT, (const struct sockaddr *)to,
	       sizeof(*to));
}

static void on_dns_query(struct loop_watch *w, uint32_t events)
{
	struct sandbox *sb = w->data;
	struct sandbox_net *sn = sb->net;
	struct network *n = sb->m->net;
	(void)events;
	for (int budget = 64; budget--;) {
		uint8_t m[1500];
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t len = recvfrom(sn->dns_fd, m, sizeof(m), MSG_DONTWAIT,
		                       (struct sockaddr *)&from, &fl);
		if (len < 0)
			return;
		uint16_t id, qtype;
		size_t qend;
		char name[256];
		if (dns_query_parse(m, (size_t)len, &id, name, sizeof(name),
		                    &qtype, &qend) < 0)
			continue;
		struct net_policy dflt;
		const struct net_policy *p = sandbox_net_policy(sb, &dflt);
		bool any;
		uint16_t ports[8];
		size_t np;
		if (!net_policy_name_allowed(p, name, &any, ports, &np, 8)) {
			log_debug("sandbox=%s event=dns-refused name=%s",
			          sb->id, name);
			reply(sn, m, dns_reply_empty(m, qend, DNS_RC_NXDOMAIN),
			      &from);
			continue;
		}
		if (qtype == DNS_T_AAAA || !n->nup || n->up_fd < 0) {
			reply(sn, m,
			      dns_reply_empty(m, qend,
			                      n->nup ? DNS_RC_NOERROR
			                             : DNS_RC_SERVFAIL),
			      &from);
			continue;
		}
		/* a free entry; its index is in the upstream id */
		unsigned i = 0;
		uint16_t rnd = 0;
		if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
			rnd = (uint16_t)now_mono_ms();
		for (unsigned k = 0; k < NPEND; k++) {
			i = (rnd + k) % NPEND;
			if (!n->pend[i].sb)
				break;
		}
		if (n->pend[i].sb) {
			reply(sn, m, dns_reply_empty(m, qend, DNS_RC_SERVFAIL),
			      &from);
			continue;
		}
		struct dns_pending *q = &n->pend[i];
		q->sb = sb;
		q->client_id = id;
		q->up_id = (uint16_t)((rnd & 0xfc00) | i);
		q->from = from;
		q->at_ms = now_mono_ms();
		snprintf(q->name, sizeof(q->name), "%s", name);
		n->npend++;
		m[0] = (uint8_t)(q->up_id >> 8);
		m[1] = (uint8_t)q->up_id;
		for (unsigned u = 0; u < n->nup; u++)
			sendto(n->up_fd, m, (size_t)len, MSG_DONTWAIT,
			       (struct sockaddr *)&n->up[u], sizeof(n->up[u]));
		if (!n->tick.heap_idx)
			loop_timer_start(n->m->loop, &n->tick, 1000);
	}
}

struct learn {
	struct network *n;
	struct sandbox *sb;
	const char *name;
	bool any;
	uint16_t ports[8];
	size_t nports;
};

static void learn_addr(uint32_t addr, uint32_t ttl, void *data)
{
	struct learn *l = data;
	struct sandbox_net *sn = l->sb->net;
	struct sbx_err err = {0};
	ttl = ttl < TTL_MIN ? TTL_MIN : ttl > TTL_MAX ? TTL_MAX : ttl;
	if (l->any)
		fw_allow_addr(l->n->fw, l->sb->slot, addr, 0, ttl, &err);
	for (size_t i = 0; i < l->nports; i++)
		fw_allow_addr(l->n->fw, l->sb->slot, addr, l->ports[i], ttl,
		              &err);
	if (err.code)
		log_warn("sandbox=%s event=allow-failed name=%s %s", l->sb->id,
		         l->name, err.msg);
	/* kept for the name check on SNI / Host */
	uint64_t until = now_mono_ms() + ttl * 1000ull;
	for (size_t i = 0; i < sn->nseen; i++)
		if (sn->seen[i].addr == addr &&
		    !strcmp(sn->seen[i].name, l->name)) {
			sn->seen[i].until_ms = until;
			return;
		}
	if (sn->nseen >= 4096)
		return;
	struct net_seen *g = realloc(sn->seen, (sn->nseen + 1) * sizeof(*g));
	if (!g)
		return;
	sn->seen = g;
	char *name = strdup(l->name);
	if (!name)
		return;
	g[sn->nseen++] = (struct net_seen){addr, until, name};
}

static void on_upstream(struct loop_watch *w, uint32_t events)
{
	struct network *n = w->data;
	(void)events;
	for (int budget = 64; budget--;) {
		uint8_t m[4096];
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t len = recvfrom(n->up_fd, m, sizeof(m), MSG_DONTWAIT,
		                       (struct sockaddr *)&from, &fl);
		if (len < 0)
			return;
		if (len < 12)
			continue;
		bool known = false;
		for (unsigned u = 0; u < n->nup; u++)
			known |=
			    from.sin_addr.s_addr == n->up[u].sin_addr.s_addr &&
			    from.sin_port == n->up[u].sin_port;
		uint16_t id = (uint16_t)(m[0] << 8 | m[1]);
		struct dns_pending *q = &n->pend[id % NPEND];
		if (!known || !q->sb || q->up_id != id)
			continue;
		struct sandbox *sb = q->sb;
		q->sb = NULL;
		n->npend--;
		struct net_policy dflt;
		const struct net_policy *p = sandbox_net_policy(sb, &dflt);
		struct learn l = {.n = n, .sb = sb, .name = q->name};
		/* the policy may have changed while the question was out */
		if (!sb->net || !net_policy_name_allowed(p, q->name, &l.any,
		                                         l.ports, &l.nports, 8))
			continue;
		if (p->mode == NET_ALLOWLIST &&
		    dns_answer_addrs(m, (size_t)len, learn_addr, &l) < 0)
			continue;
		m[0] = (uint8_t)(q->client_id >> 8);
		m[1] = (uint8_t)q->client_id;
		reply(sb->net, m, (size_t)len, &q->from);
	}
}

static void on_tick(struct loop_timer *t)
{
	struct network *n = t->data;
	uint64_t now = now_mono_ms();
	for (unsigned i = 0; i < NPEND && n->npend; i++) {
		struct dns_pending *q = &n->pend[i];
		if (!q->sb || now - q->at_ms < PEND_MS)
			continue;
		/* the upstream did not answer: say so rather than let the
		 * client wait out its own timeout */
		uint8_t m[512];
		size_t nl = strlen(q->name);
		if (nl + 18 <= sizeof(m) && q->sb->net) {
			memset(m, 0, 12);
			m[0] = (uint8_t)(q->client_id >> 8);
			m[1] = (uint8_t)q->client_id;
			m[2] = 0x01;
			m[5] = 1;
			size_t p = 12;
			for (const char *s = q->name; *s;) {
				const char *dot = strchr(s, '.');
				size_t l = dot ? (size_t)(dot - s) : strlen(s);
				m[p++] = (uint8_t)l;
				memcpy(m + p, s, l);
				p += l;
				s += l + (dot ? 1 : 0);
			}
			m[p++] = 0;
			m[p++] = 0;
			m[p++] = DNS_T_A;
			m[p++] = 0;
			m[p++] = 1;
			reply(q->sb->net, m,
			      dns_reply_empty(m, p, DNS_RC_SERVFAIL), &q->from);
		}
		q->sb = NULL;
		n->npend--;
	}
	if (n->npend)
		loop_timer_start(n->m->loop, t, 1000);
}

/* The upstream resolvers: --dns, else the host's resolv.conf (IPv4). */
static void upstreams(struct network *n)
{
	const struct config *cfg = n->m->cfg;
	for (unsigned i = 0; i < cfg->ndns && i < 4; i++)
		n->up[n->nup++] = (struct sockaddr_in){
		    .sin_family = AF_INET,
		    .sin_port = htons(cfg->dns[i].port),
		    .sin_addr.s_addr = htonl(cfg->dns[i].addr)};
	if (n->nup)
		return;
	FILE *f = fopen("/etc/resolv.conf", "re");
	char line[256];
	while (f && fgets(line, sizeof(line), f) && n->nup < 4) {
		char addr[64];
		struct in_addr in;
		if (sscanf(line, " nameserver %63s", addr) == 1 &&
		    inet_pton(AF_INET, addr, &in) == 1)
			n->up[n->nup++] =
			    (struct sockaddr_in){.sin_family = AF_INET,
			                         .sin_port = htons(53),
			                         .sin_addr = in};
	}
	if (f)
		fclose(f);
}

/* ---- the name-checking proxy ----------------------------------------------
 */

static bool in_cidr(uint32_t a, const struct fw_cidr *c)
{
	uint32_t mask = c->prefix ? ~0u << (32 - c->prefix) : 0;
	return (a & mask) == (c->addr & mask);
}

/* What the table's deny set holds, and the host's own addresses: the
 * proxy connects from the host, past the sandbox's forward rules, so it
 * checks them itself. */
static bool never_reachable(struct network *n, uint32_t a)
{
	static const struct fw_cidr fixed[] = {{0x00000000, 8, 0},
	                                       {0x7f000000, 8, 0},
	                                       {0xa9fe0000, 16, 0},
	                                       {0xe0000000, 3, 0}};
	const struct config *cfg = n->m->cfg;
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (in_cidr(a, &fixed[i]))
			return true;
	if (in_cidr(a, &cfg->net_pool))
		return true;
	for (unsigned i = 0; i < cfg->ndeny; i++)
		if (in_cidr(a, &cfg->deny[i]))
			return true;
	struct ifaddrs *ifs, *i;
	bool local = false;
	if (getifaddrs(&ifs) < 0)
		return true;
	for (i = ifs; i && !local; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ntohl(
		        ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr) ==
		        a)
			local = true;
	freeifaddrs(ifs);
	return local;
}

/* Whether the sandbox may open dst:port asking for name (NULL: none). */
static bool proxy_allows(struct network *n, struct sandbox *sb, uint32_t dst,
                         uint16_t port, const char *name, const char **why)
{
	struct net_policy dflt;
	const struct net_policy *p = sandbox_net_policy(sb, &dflt);
	if (never_reachable(n, dst)) {
		*why = "never-reachable address";
		return false;
	}
	for (size_t i = 0; i < p->ndeny; i++)
		if (!p->deny[i].host && in_cidr(dst, &p->deny[i].cidr)) {
			*why = "denied range";
			return false;
		}
	if (p->mode == NET_FULL)
		return true;
	for (size_t i = 0; i < p->nallow; i++)
		if (!p->allow[i].host && in_cidr(dst, &p->allow[i].cidr) &&
		    (!p->allow[i].port || p->allow[i].port == port))
			return true;
	if (!name) {
		*why = "no name (TLS SNI or HTTP Host) to check";
		return false;
	}
	bool any;
	uint16_t ports[8];
	size_t np;
	if (!net_policy_name_allowed(p, name, &any, ports, &np, 8)) {
		*why = "name not allowed";
		return false;
	}
	bool port_ok = any;
	for (size_t i = 0; i < np; i++)
		port_ok |= ports[i] == port;
	if (!port_ok) {
		*why = "port not allowed for that name";
		return false;
	}
	uint64_t now = now_mono_ms();
	for (size_t i = 0; i < sb->net->nseen; i++)
		if (sb->net->seen[i].addr == dst &&
		    sb->net->seen[i].until_ms > now &&
		    !strcmp(sb->net->seen[i].name, name))
			return true;
	*why = "the name did not resolve to that address";
	return false;
}

static struct sandbox *sandbox_by_addr(struct network *n, uint32_t a)
{
	for (struct sandbox_net *sn = n->links; sn; sn = sn->next)
		if (sn->addr == a)
			return sn->sb;
	return NULL;
}

static void peek_free(struct peek_conn *c, bool reset)
{
	struct network *n = c->n;
	for (struct peek_conn **pp = &n->peeking; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	n->npeeking--;
	loop_timer_stop(n->m->loop, &c->t);
	if (c->fd >= 0) {
		loop_del(n->m->loop, &c->w);
		if (reset) {
			/* a reset, not a close: the client fails at once */
			struct linger lg = {1, 0};
			setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg,
			           sizeof(lg));
		}
		close(c->fd);
	}
	if (c->up_fd >= 0) {
		loop_del(n->m->loop, &c->up_w);
		close(c->up_fd);
	}
	free(c);
}

static void on_peek_timeout(struct loop_timer *t)
{
	peek_free(t->data, true);
}

static void on_upstream_connected(struct loop_watch *w, uint32_t events)
{
	struct peek_conn *c = w->data;
	struct network *n = c->n;
	int e = 0;
	socklen_t el = sizeof(e);
	(void)events;
	getsockopt(c->up_fd, SOL_SOCKET, SO_ERROR, &e, &el);
	if (e == EINPROGRESS)
		return;
	if (e) {
		peek_free(c, true);
		return;
	}
	loop_del(n->m->loop, &c->up_w);
	loop_del(n->m->loop, &c->w);
	int a = c->fd, b = c->up_fd;
	c->fd = c->up_fd = -1;
	fdpipe_new(n->m->loop, a, b, c->buf, c->len, NULL, NULL);
	peek_free(c, false);
}

static void on_peek_data(struct loop_watch *w, uint32_t events)
{
	struct peek_conn *c = w->data;
	struct network *n = c->n;
	(void)events;
	if (c->up_fd >= 0) { /* connecting: the client's bytes wait */
		char x;
		if (recv(c->fd, &x, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
			peek_free(c, true);
		return;
	}
	ssize_t got =
	    recv(c->fd, c->buf + c->len, PEEK_MAX - c->len, MSG_DONTWAIT);
	if (got < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (got <= 0) {
		peek_free(c, true);
		return;
	}
	c->len += (size_t)got;
	int r = c->buf[0] == 0x16
	            ? peek_tls_sni(c->buf, c->len, c->name, sizeof(c->name))
	            : peek_http_host((const char *)c->buf, c->len, c->name,
	                             sizeof(c->name));
	if (r == 0 && c->len < PEEK_MAX)
		return;
	uint32_t peer = ntohl(c->peer.sin_addr.s_addr),
	         dst = ntohl(c->dst.sin_addr.s_addr);
	uint16_t port = ntohs(c->dst.sin_port);
	struct sandbox *sb = sandbox_by_addr(n, peer);
	const char *why = "no such sandbox";
	if (!sb || !sb->net ||
	    !proxy_allows(n, sb, dst, port, r == 1 ? c->name : NULL, &why)) {
		char d[32];
		struct fw_cidr dc = {dst, 32, 0};
		fw_cidr_str(&dc, d, sizeof(d));
		log_info(
		    "sandbox=%s event=connection-refused dst=%s:%u name=%s "
		    "reason=\"%s\"",
		    sb ? sb->id : "?", d, port, r == 1 ? c->name : "-", why);
		peek_free(c, true);
		return;
	}
	c->up_fd =
	    socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->up_fd < 0 || (connect(c->up_fd, (struct sockaddr *)&c->dst,
	                             sizeof(c->dst)) < 0 &&
	                     errno != EINPROGRESS)) {
		peek_free(c, true);
		return;
	}
	c->up_w = (struct loop_watch){
	    .fd = c->up_fd, .cb = on_upstream_connected, .data = c};
	if (loop_add(n->m->loop, &c->up_w, EPOLLOUT) < 0) {
		close(c->up_fd);
		c->up_fd = -1;
		peek_free(c, true);
	}
}

static void on_proxy_accept(struct loop_watch *w, uint32_t events)
{
	struct network *n = w->data;
	(void)events;
	for (int budget = 64; budget--;) {
		struct sockaddr_in peer;
		socklen_t pl = sizeof(peer);
		int fd = accept4(n->px_fd, (struct sockaddr *)&peer, &pl,
		                 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct sockaddr_in dst;
		socklen_t dl = sizeof(dst);
		struct peek_conn *c = NULL;
		if (n->npeeking >= PEEK_CONNS ||
		    getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &dst, &dl) < 0 ||
		    !sandbox_by_addr(n, ntohl(peer.sin_addr.s_addr)) ||
		    !(c = calloc(1, sizeof(*c)))) {
			struct linger lg = {1, 0};
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			close(fd);
			continue;
		}
		*c = (struct peek_conn){
		    .n = n, .fd = fd, .up_fd = -1, .peer = peer, .dst = dst};
		c->w = (struct loop_watch){
		    .fd = fd, .cb = on_peek_data, .data = c};
		c->t = (struct loop_timer){.cb = on_peek_timeout, .data = c};
		c->next = n->peeking;
		n->peeking = c;
		n->npeeking++;
		loop_timer_start(n->m->loop, &c->t, PEEK_MS);
		if (loop_add(n->m->loop, &c->w, EPOLLIN) < 0) {
			loop_timer_stop(n->m->loop, &c->t);
			c->fd = -1;
			close(fd);
			peek_free(c, false);
		}
	}
}

/* Any port: the table redirects to it and lets only redirected
 * connections from allowlist sandboxes' links in. Bound when the daemon
 * starts, listening (and watched) only once the table is there. */
static int proxy_socket(struct network *n, struct sbx_err *err)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return sbx_err_sys(err, e, "name-checking proxy");
	}
	n->px_fd = fd;
	n->px_port = ntohs(sa.sin_port);
	/* watched once it listens (ensure_fw) */
	n->px_w =
	    (struct loop_watch){.fd = fd, .cb = on_proxy_accept, .data = n};
	return 0;
}

/* ---- the daemon's side --------------------------------------------------- */

int network_new(struct manager *m, struct sbx_err *err)
{
	struct network *n = calloc(1, sizeof(*n));
	if (!n)
		return sbx_err_set(err, ENOMEM, "out of memory");
	n->m = m;
	n->up_fd = -1;
	n->px_fd = -1;
	/* names of this daemon's table and links, from its state dir: two
	 * daemons on one host never touch each other's */
	uint32_t h = 2166136261u;
	for (const char *c = m->cfg->state_dir; *c; c++)
		h = (h ^ (unsigned char)*c) * 16777619u;
	snprintf(n->table, sizeof(n->table), "sandboxd_%04x", h & 0xffff);
	snprintf(n->ifprefix, sizeof(n->ifprefix), "sx%04x-", h & 0xffff);
	n->tick = (struct loop_timer){.cb = on_tick, .data = n};
	m->net = n;
	/* every fd the network will ever need, now: none comes later but
	 * a link's own */
	int r;
	if ((r = net_init(err)) < 0 ||
	    (r = fw_new(n->table, n->ifprefix, &n->fw, err)) < 0 ||
	    (r = proxy_socket(n, err)) < 0)
		return r;
	upstreams(n);
	n->up_fd =
	    socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (n->up_fd >= 0) {
		n->up_w = (struct loop_watch){
		    .fd = n->up_fd, .cb = on_upstream, .data = n};
		if (loop_add(m->loop, &n->up_w, EPOLLIN) < 0) {
			close(n->up_fd);
			n->up_fd = -1;
		}
	}
	m->net = n;
	return 0;
}

void network_free(struct manager *m)
{
	struct network *n = m->net;
	if (!n)
		return;
	loop_timer_stop(m->loop, &n->tick);
	while (n->peeking)
		peek_free(n->peeking, true);
	if (n->px_fd >= 0) {
		loop_del(m->loop, &n->px_w);
		close(n->px_fd);
	}
	if (n->up_fd >= 0) {
		loop_del(m->loop, &n->up_w);
		close(n->up_fd);
	}
	bool others = n->installed && fw_others(n->fw);
	fw_free(n->fw);
	if (n->installed)
		log_info("event=network-teardown nft_table=\"inet %s\" removed",
		         n->table);
	net_fini();
	if (n->fwd_set && !n->fwd_was && others)
		log_info("event=network-teardown ip_forward stays 1: another "
		         "sandboxd on this host has sandboxes with a network");
	else if (n->fwd_set && !n->fwd_was) {
		net_forwarding_restore(0);
		log_info("event=network-teardown ip_forward=0 (as it was)");
	}
	free(n);
	m->net = NULL;
}
