/* nftables rules for sandboxes, written as nft's own language and run
 * through libnftables (the same parser and netlink code as the nft
 * tool), one atomic batch per change.
 *
 * Theory of operation. The table hooks input and forward a little before
 * the usual filter priority, and NAT postrouting:
 *   input:   anything from a sandbox link to the host itself (its loopback
 *            reached by a route trick, the daemon's port, every address it
 *            owns) is refused, except TCP redirected to the name-checking
 *            proxy (allowlist mode);
 *   forward: answers to a sandbox's own connections pass; nothing else
 *            reaches a sandbox link (no inbound, no sandbox to sandbox);
 *            from a sandbox: the deny set (loopback, link-local, metadata,
 *            multicast, the sandbox pool, the operator's list) is refused,
 *            IPv6 is refused, then the sandbox's own chain (found by its
 *            link's name in a verdict map) decides; the end is refusal.
 *   nat:     sandboxes' addresses are masqueraded to the host's.
 * Refusal is a TCP reset or an ICMP "administratively prohibited": a
 * client fails at once, never by a timeout. */
#include "runtime/firewall.h"

#include <dirent.h>
#include <fcntl.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/log.h"

struct fw {
	struct nft_ctx *nft;
	char table[32];
	char ifprefix[16];
	bool installed;
};

void fw_cidr_str(const struct fw_cidr *c, char *out, size_t n)
{
	uint32_t a = c->addr;
	if (c->prefix == 32)
		snprintf(out, n, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255,
		         (a >> 8) & 255, a & 255);
	else
		snprintf(out, n, "%u.%u.%u.%u/%u", a >> 24, (a >> 16) & 255,
		         (a >> 8) & 255, a & 255, c->prefix);
}

static int run(struct fw *fw, const char *cmd, struct sbx_err *err)
{
	int r = nft_run_cmd_from_buffer(fw->nft, cmd);
	const char *e = nft_ctx_get_error_buffer(fw->nft);
	if (r != 0) {
		char msg[400];
		snprintf(msg, sizeof(msg), "%s", e && *e ? e : "failed");
		for (char *p = msg; *p; p++)
			if (*p == '\n')
				*p = ' ';
		log_debug("event=nft-failed cmd=\"%.200s\" error=\"%s\"", cmd,
		          msg);
		return sbx_err_set(err, EIO, "nftables: %s", msg);
	}
	return 0;
}

/* "{ a, b }" of ranges (with ". port" when ported), or "" when none of
 * the kind is there. */
static void elements(struct buf *b, const struct fw_cidr *c, size_t n,
                     bool ported)
{
	bool first = true;
	for (size_t i = 0; i < n; i++) {
		char s[32];
		if ((c[i].port != 0) != ported)
			continue;
		fw_cidr_str(&c[i], s, sizeof(s));
		buf_printf(b, "%s%s", first ? "{ " : ", ", s);
		if (ported)
			buf_printf(b, " . %u", c[i].port);
		first = false;
	}
	if (!first)
		buf_printf(b, " }");
}

static bool any(const struct fw_cidr *c, size_t n, bool ported)
{
	for (size_t i = 0; i < n; i++)
		if ((c[i].port != 0) == ported)
			return true;
	return false;
}

/* libnftables opens its netlink socket without O_CLOEXEC; every fd of the
 * daemon must have it (docs/security.md), so mark what is missing it. */
static void cloexec_all(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		int fd = atoi(e->d_name);
		if (fd < 3 || fd == dirfd(d))
			continue;
		int fl = fcntl(fd, F_GETFD);
		if (fl >= 0 && !(fl & FD_CLOEXEC))
			fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
	}
	if (d)
		closedir(d);
}

int fw_new(const char *table, const char *ifprefix, struct fw **out,
           struct sbx_err *err)
{
	struct fw *fw = calloc(1, sizeof(*fw));
	if (!fw)
		return sbx_err_set(err, ENOMEM, "out of memory");
	fw->nft = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!fw->nft) {
		free(fw);
		return sbx_err_set(err, ENOMEM, "nftables context");
	}
	cloexec_all();
	nft_ctx_buffer_output(fw->nft);
	nft_ctx_buffer_error(fw->nft);
	snprintf(fw->table, sizeof(fw->table), "%s", table);
	snprintf(fw->ifprefix, sizeof(fw->ifprefix), "%s", ifprefix);
	*out = fw;
	return 0;
}

int fw_install(struct fw *fw, struct fw_cidr pool, const struct fw_cidr *deny,
               size_t ndeny, uint16_t proxy_port, struct sbx_err *err)
{
	/* a table from an earlier run of this daemon goes first */
	char del[64];
	snprintf(del, sizeof(del), "delete table inet %s", fw->table);
	nft_run_cmd_from_buffer(fw->nft, del);

	struct buf b;
	buf_init(&b, 0);
	char poolstr[32];
	fw_cidr_str(&pool, poolstr, sizeof(poolstr));
	const char *t = fw->table, *p = fw->ifprefix;
	buf_printf(&b, "table inet %s {\n", t);
	/* never reachable, whatever the operator's list says */
	buf_printf(&b,
	           " set deny { type ipv4_addr; flags interval; auto-merge;\n"
	           "  elements = { 0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, "
	           "224.0.0.0/3, %s",
	           poolstr);
	for (size_t i = 0; i < ndeny; i++) {
		char s[32];
		fw_cidr_str(&deny[i], s, sizeof(s));
		buf_printf(&b, ", %s", s);
	}
	buf_printf(&b, " } }\n");
	buf_printf(&b, " map ifs { type ifname : verdict; }\n");
	buf_printf(&b, " set proxied { type ifname; }\n");
	buf_printf(&b, " chain refuse {\n"
	               "  meta l4proto tcp reject with tcp reset\n"
	               "  reject with icmpx admin-prohibited\n }\n");
	buf_printf(
	    &b, " chain input { type filter hook input priority filter - 5;\n");
	if (proxy_port)
		buf_printf(
		    &b,
		    "  iifname @proxied ct status dnat tcp dport %u accept\n"
		    "  tcp dport %u jump refuse\n",
		    proxy_port, proxy_port);
	buf_printf(&b, "  iifname != \"%s*\" accept\n", p);
	buf_printf(&b, "  jump refuse\n }\n");
	buf_printf(
	    &b,
	    " chain forward { type filter hook forward priority filter - 5;\n"
	    "  oifname \"%s*\" ct state established,related accept\n"
	    "  oifname \"%s*\" jump refuse\n"
	    "  iifname \"%s*\" jump egress\n }\n",
	    p, p, p);
	buf_printf(&b, " chain egress {\n"
	               "  ct state established,related accept\n"
	               "  meta nfproto != ipv4 jump refuse\n"
	               "  ip daddr @deny jump refuse\n"
	               "  iifname vmap @ifs\n"
	               "  jump refuse\n }\n");
	if (proxy_port)
		buf_printf(
		    &b,
		    " chain pre { type nat hook prerouting priority dstnat;\n"
		    "  iifname @proxied tcp dport { 80, 443 } redirect to :%u\n"
		    " }\n",
		    proxy_port);
	buf_printf(&b,
	           " chain post { type nat hook postrouting priority srcnat;\n"
	           "  ip saddr %s oifname != \"%s*\" masquerade\n }\n}\n",
	           poolstr, p);
	int r = run(fw, buf_cstr(&b), err);
	buf_free(&b);
	if (r == 0)
		fw->installed = true;
	cloexec_all(); /* in case it opened its socket anew */
	return r;
}

bool fw_others(struct fw *fw)
{
	if (nft_run_cmd_from_buffer(fw->nft, "list tables") != 0)
		return true; /* unknown: assume another daemon needs forwarding
		              */
	const char *out = nft_ctx_get_output_buffer(fw->nft);
	for (const char *p = out; p && (p = strstr(p, "table inet sandboxd_"));
	     p++) {
		const char *name = p + strlen("table inet ");
		size_t n = strcspn(name, " \n");
		if (n != strlen(fw->table) || strncmp(name, fw->table, n))
			return true;
	}
	return false;
}

void fw_free(struct fw *fw)
{
	if (!fw)
		return;
	char del[64];
	snprintf(del, sizeof(del), "delete table inet %s", fw->table);
	if (fw->installed)
		nft_run_cmd_from_buffer(fw->nft, del);
	nft_ctx_free(fw->nft);
	free(fw);
}

int fw_sandbox_set(struct fw *fw, unsigned slot, const char *ifname,
                   enum fw_mode mode, const struct fw_cidr *allow,
                   size_t nallow, const struct fw_cidr *deny, size_t ndeny,
                   struct sbx_err *err)
{
	struct buf b;
	buf_init(&b, 0);
	const char *t = fw->table;
	unsigned s = slot;
	/* the sets: x denied ranges, a allowed ranges, ap allowed range .
	 * port, d addresses from DNS, dp address . port from DNS */
	buf_printf(&b, "add chain inet %s sb%u\nflush chain inet %s sb%u\n", t,
	           s, t, s);
	buf_printf(&b,
	           "add set inet %s x%u { type ipv4_addr; flags interval; "
	           "auto-merge; }\n"
	           "flush set inet %s x%u\n",
	           t, s, t, s);
	buf_printf(&b,
	           "add set inet %s a%u { type ipv4_addr; flags interval; "
	           "auto-merge; }\n"
	           "flush set inet %s a%u\n",
	           t, s, t, s);
	buf_printf(&b,
	           "add set inet %s ap%u { type ipv4_addr . inet_service; "
	           "flags interval; }\nflush set inet %s ap%u\n",
	           t, s, t, s);
	buf_printf(&b,
	           "add set inet %s d%u { type ipv4_addr; flags timeout; }\n"
	           "flush set inet %s d%u\n",
	           t, s, t, s);
	buf_printf(&b,
	           "add set inet %s dp%u { type ipv4_addr . inet_service; "
	           "flags timeout; }\nflush set inet %s dp%u\n",
	           t, s, t, s);
	if (any(deny, ndeny, false) || any(deny, ndeny, true)) {
		/* a denied range is denied on every port */
		struct fw_cidr *d = calloc(ndeny, sizeof(*d));
		if (!d) {
			buf_free(&b);
			return sbx_err_set(err, ENOMEM, "out of memory");
		}
		for (size_t i = 0; i < ndeny; i++)
			d[i] =
			    (struct fw_cidr){deny[i].addr, deny[i].prefix, 0};
		buf_printf(&b, "add element inet %s x%u ", t, s);
		elements(&b, d, ndeny, false);
		buf_printf(&b, "\n");
		free(d);
	}
	if (any(allow, nallow, false)) {
		buf_printf(&b, "add element inet %s a%u ", t, s);
		elements(&b, allow, nallow, false);
		buf_printf(&b, "\n");
	}
	if (any(allow, nallow, true)) {
		buf_printf(&b, "add element inet %s ap%u ", t, s);
		elements(&b, allow, nallow, true);
		buf_printf(&b, "\n");
	}
	buf_printf(&b, "add rule inet %s sb%u ip daddr @x%u jump refuse\n", t,
	           s, s);
	if (mode == FW_FULL) {
		buf_printf(&b, "add rule inet %s sb%u accept\n", t, s);
	} else if (mode == FW_ALLOWLIST) {
		buf_printf(&b, "add rule inet %s sb%u ip daddr @a%u accept\n",
		           t, s, s);
		buf_printf(&b, "add rule inet %s sb%u ip daddr @d%u accept\n",
		           t, s, s);
		buf_printf(&b,
		           "add rule inet %s sb%u meta l4proto { tcp, udp } "
		           "ip daddr . th dport @ap%u accept\n",
		           t, s, s);
		buf_printf(&b,
		           "add rule inet %s sb%u meta l4proto { tcp, udp } "
		           "ip daddr . th dport @dp%u accept\n",
		           t, s, s);
	}
	buf_printf(&b, "add rule inet %s sb%u jump refuse\n", t, s);
	buf_printf(&b, "add element inet %s ifs { \"%s\" : jump sb%u }\n", t,
	           ifname, s);
	int r = run(fw, buf_cstr(&b), err);
	buf_free(&b);
	if (r < 0)
		return r;
	/* the name-checking proxy sees allowlist sandboxes' web traffic */
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "%s element inet %s proxied { \"%s\" }",
	         mode == FW_ALLOWLIST ? "add" : "delete", t, ifname);
	nft_run_cmd_from_buffer(fw->nft, cmd); /* may be absent already */
	return 0;
}

void fw_sandbox_clear(struct fw *fw, unsigned slot, const char *ifname)
{
	char cmd[200];
	const char *t = fw->table;
	snprintf(cmd, sizeof(cmd), "delete element inet %s ifs { \"%s\" }", t,
	         ifname);
	nft_run_cmd_from_buffer(fw->nft, cmd);
	snprintf(cmd, sizeof(cmd), "delete element inet %s proxied { \"%s\" }",
	         t, ifname);
	nft_run_cmd_from_buffer(fw->nft, cmd);
	snprintf(cmd, sizeof(cmd), "delete chain inet %s sb%u", t, slot);
	if (nft_run_cmd_from_buffer(fw->nft, cmd) != 0) {
		snprintf(cmd, sizeof(cmd), "flush chain inet %s sb%u", t, slot);
		nft_run_cmd_from_buffer(fw->nft, cmd);
		snprintf(cmd, sizeof(cmd), "delete chain inet %s sb%u", t,
		         slot);
		nft_run_cmd_from_buffer(fw->nft, cmd);
	}
	static const char *const sets[] = {"x", "a", "ap", "d", "dp"};
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
		snprintf(cmd, sizeof(cmd), "delete set inet %s %s%u", t,
		         sets[i], slot);
		nft_run_cmd_from_buffer(fw->nft, cmd);
	}
}

int fw_allow_addr(struct fw *fw, unsigned slot, uint32_t addr, uint16_t port,
                  uint32_t ttl_s, struct sbx_err *err)
{
	char cmd[200], a[32];
	struct fw_cidr c = {addr, 32, 0};
	fw_cidr_str(&c, a, sizeof(a));
	/* "add" keeps an element's old timeout: delete, then add with the
	 * new one (a fresh answer refreshes the entry) */
	if (port)
		snprintf(cmd, sizeof(cmd),
		         "delete element inet %s dp%u { %s . %u }\n", fw->table,
		         slot, a, port);
	else
		snprintf(cmd, sizeof(cmd),
		         "delete element inet %s d%u { %s }\n", fw->table, slot,
		         a);
	nft_run_cmd_from_buffer(fw->nft, cmd);
	if (port)
		snprintf(cmd, sizeof(cmd),
		         "add element inet %s dp%u { %s . %u timeout %us }\n",
		         fw->table, slot, a, port, ttl_s);
	else
		snprintf(cmd, sizeof(cmd),
		         "add element inet %s d%u { %s timeout %us }\n",
		         fw->table, slot, a, ttl_s);
	return run(fw, cmd, err);
}
