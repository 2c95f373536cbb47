/* Veth pairs over rtnetlink with libmnl. The sandbox's namespace is
 * entered only for the instant a netlink (or any) socket is made in it:
 * a socket stays in the namespace it was created in, so the daemon then
 * talks to the sandbox's network stack from its own namespace. setns()
 * of a network namespace is per thread, and the daemon is one thread on
 * one loop, so nothing else runs in the sandbox's namespace meanwhile. */
#include "runtime/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <net/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/cleanup.h"

static int host_ns = -1; /* the daemon's own network namespace */

int net_init(struct sbx_err *err)
{
	if (host_ns >= 0)
		return 0;
	host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	return host_ns < 0 ? sbx_err_sys(err, errno, "/proc/self/ns/net") : 0;
}

void net_fini(void)
{
	if (host_ns >= 0)
		close(host_ns);
	host_ns = -1;
}

static int enter(int netns_fd)
{
	if (host_ns < 0)
		return -EBADF;
	return setns(netns_fd, CLONE_NEWNET) < 0 ? -errno : 0;
}

static void leave(void)
{
	/* staying in a sandbox's namespace would put every later socket of
	 * the daemon there: never continue after that */
	if (setns(host_ns, CLONE_NEWNET) < 0)
		abort();
}

int net_ns_socket(int netns_fd, int domain, int type, int protocol)
{
	int r = enter(netns_fd);
	if (r < 0)
		return r;
	int fd = socket(domain, type | SOCK_CLOEXEC, protocol);
	r = fd < 0 ? -errno : fd;
	leave();
	return r;
}

/* One request, one acknowledgement. */
static int talk(struct mnl_socket *nl, struct nlmsghdr *nlh)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	static unsigned seq;
	nlh->nlmsg_seq = ++seq ^ (unsigned)time(NULL);
	nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
	if (n < 0)
		return -errno;
	int r = mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq,
	                   mnl_socket_get_portid(nl), NULL, NULL);
	return r < 0 ? -errno : 0;
}

static struct mnl_socket *nl_open(int netns_fd)
{
	struct mnl_socket *nl = NULL;
	if (netns_fd >= 0 && enter(netns_fd) < 0)
		return NULL;
	nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (netns_fd >= 0)
		leave();
	if (nl && mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		mnl_socket_close(nl);
		return NULL;
	}
	return nl;
}

static struct nlmsghdr *msg(char *buf, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = flags;
	return nlh;
}

static int link_del(struct mnl_socket *nl, const char *name)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = msg(buf, RTM_DELLINK, 0);
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	return talk(nl, nlh);
}

static int link_up(struct mnl_socket *nl, unsigned ifindex)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = msg(buf, RTM_NEWLINK, 0);
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = (int)ifindex;
	ifi->ifi_change = IFF_UP;
	ifi->ifi_flags = IFF_UP;
	return talk(nl, nlh);
}

static int addr_add(struct mnl_socket *nl, unsigned ifindex, uint32_t ip,
                    int prefix)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh =
	    msg(buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (unsigned char)prefix;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = ifindex;
	uint32_t a = htonl(ip);
	mnl_attr_put_u32(nlh, IFA_LOCAL, a);
	mnl_attr_put_u32(nlh, IFA_ADDRESS, a);
	return talk(nl, nlh);
}

static int route_default(struct mnl_socket *nl, unsigned ifindex, uint32_t gw)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh =
	    msg(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE);
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	rtm->rtm_dst_len = 0;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_STATIC;
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put_u32(nlh, RTA_GATEWAY, htonl(gw));
	mnl_attr_put_u32(nlh, RTA_OIF, ifindex);
	return talk(nl, nlh);
}

static int veth_new(struct mnl_socket *nl, const char *host_if, int netns_fd)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, host_if);
	struct nlattr *li = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	struct nlattr *peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	struct ifinfomsg *pi = mnl_nlmsg_put_extra_header(nlh, sizeof(*pi));
	pi->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, "eth0");
	mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)netns_fd);
	mnl_attr_nest_end(nlh, peer);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, li);
	return talk(nl, nlh);
}

/* Whether fd is the daemon's own network namespace (the host's). */
static bool is_own_ns(int fd)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && stat("/proc/self/ns/net", &b) == 0 &&
	       a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

int net_veth_setup(int netns_fd, const char *host_if, uint32_t host_ip,
                   uint32_t sb_ip, int prefix, struct sbx_err *err)
{
	/* the inside end is named eth0 and gets the sandbox's address and
	 * default route: in the host's namespace it would take over the
	 * host's network, so a namespace that is not a sandbox's is refused
	 * before anything is made */
	if (is_own_ns(netns_fd))
		return sbx_err_set(err, EINVAL,
		                   "veth %s: the namespace given is the "
		                   "daemon's own, not a sandbox's",
		                   host_if);
	struct mnl_socket *nl = nl_open(-1), *in = NULL;
	int r;
	if (!nl)
		return sbx_err_sys(err, errno, "netlink");
	r = veth_new(nl, host_if, netns_fd);
	if (r == -EEXIST) { /* a stopped sandbox's, not yet gone */
		link_del(nl, host_if);
		r = veth_new(nl, host_if, netns_fd);
	}
	if (r < 0) {
		sbx_err_sys(err, -r, "create veth %s", host_if);
		goto out;
	}
	unsigned hidx = if_nametoindex(host_if);
	if (!hidx || (r = addr_add(nl, hidx, host_ip, prefix)) < 0 ||
	    (r = link_up(nl, hidx)) < 0) {
		sbx_err_sys(err, r < 0 ? -r : ENODEV, "configure %s", host_if);
		r = r < 0 ? r : -ENODEV;
		goto fail;
	}
	if (!(in = nl_open(netns_fd))) {
		r = sbx_err_sys(err, errno, "netlink in the sandbox");
		goto fail;
	}
	/* indexes inside: lo is always 1; eth0 by name, from in there */
	if (enter(netns_fd) < 0) {
		r = sbx_err_sys(err, errno, "setns");
		goto fail;
	}
	unsigned eidx = if_nametoindex("eth0");
	leave();
	if (!eidx || (r = link_up(in, 1)) < 0 ||
	    (r = addr_add(in, eidx, sb_ip, prefix)) < 0 ||
	    (r = link_up(in, eidx)) < 0 ||
	    (r = route_default(in, eidx, host_ip)) < 0) {
		sbx_err_sys(err, r < 0 ? -r : ENODEV,
		            "configure eth0 in the sandbox");
		r = r < 0 ? r : -ENODEV;
		goto fail;
	}
	r = 0;
	goto out;
fail:
	link_del(nl, host_if);
out:
	if (in)
		mnl_socket_close(in);
	mnl_socket_close(nl);
	return r;
}

int net_veth_remove(const char *host_if, struct sbx_err *err)
{
	struct mnl_socket *nl = nl_open(-1);
	if (!nl)
		return sbx_err_sys(err, errno, "netlink");
	int r = link_del(nl, host_if);
	mnl_socket_close(nl);
	if (r == -ENODEV)
		return 0;
	return r < 0 ? sbx_err_sys(err, -r, "remove %s", host_if) : 0;
}

static int read_u64(const char *path, uint64_t *v)
{
	char buf[32];
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return -errno;
	if (n == 0) /* an empty counter file */
		return -EIO;
	buf[n] = '\0';
	*v = strtoull(buf, NULL, 10);
	return 0;
}

int net_if_bytes(const char *host_if, uint64_t *from_sb, uint64_t *to_sb)
{
	char p[128];
	snprintf(p, sizeof(p), "/sys/class/net/%s/statistics/rx_bytes",
	         host_if);
	int r = read_u64(p, from_sb);
	if (r < 0)
		return r;
	snprintf(p, sizeof(p), "/sys/class/net/%s/statistics/tx_bytes",
	         host_if);
	return read_u64(p, to_sb);
}

#define FWD "/proc/sys/net/ipv4/ip_forward"

int net_forwarding_enable(int *was, struct sbx_err *err)
{
	char c = '0';
	_cleanup_close_ int fd = open(FWD, O_RDWR | O_CLOEXEC);
	if (fd < 0 || read(fd, &c, 1) != 1)
		return sbx_err_sys(err, errno, "%s", FWD);
	*was = c == '1';
	if (c == '1')
		return 0;
	if (pwrite(fd, "1\n", 2, 0) != 2)
		return sbx_err_sys(err, errno, "enable %s", FWD);
	return 0;
}

void net_forwarding_restore(int was)
{
	_cleanup_close_ int fd = open(FWD, O_WRONLY | O_CLOEXEC);
	if (fd >= 0 && !was && write(fd, "0\n", 2) != 2)
		return;
}
