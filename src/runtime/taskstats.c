/* Exit reports from the kernel's taskstats family (see taskstats.h, and the
 * kernel's Documentation/accounting/taskstats.rst): resolve the family,
 * register a listener for every possible CPU, then parse TASKSTATS_CMD_NEW
 * messages, each an AGGR_PID attribute holding the task's pid and its
 * struct taskstats. The struct only ever grows at its end, so a field is
 * read when the attribute is long enough to hold it. */
#include "runtime/taskstats.h"

#include <fcntl.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/taskstats.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/cleanup.h"

#define NLA_ALIGNED(len) (((len) + NLA_ALIGNTO - 1) & ~(NLA_ALIGNTO - 1))

struct genl_req {
	struct nlmsghdr n;
	struct genlmsghdr g;
	char attrs[256];
};

static int put_attr(struct genl_req *r, uint16_t type, const void *data,
                    size_t len)
{
	size_t at = r->n.nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
	if (at + NLA_HDRLEN + NLA_ALIGNED(len) > sizeof(r->attrs))
		return -E2BIG;
	struct nlattr *a = (struct nlattr *)(r->attrs + at);
	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	memcpy((char *)a + NLA_HDRLEN, data, len);
	r->n.nlmsg_len += (uint32_t)(NLA_HDRLEN + NLA_ALIGNED(len));
	return 0;
}

static int send_req(int fd, uint16_t family, uint8_t cmd, uint16_t type,
                    const void *data, size_t len, uint32_t seq)
{
	struct genl_req r;
	memset(&r, 0, sizeof(r));
	r.n.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	r.n.nlmsg_type = family;
	r.n.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	r.n.nlmsg_seq = seq;
	r.g.cmd = cmd;
	r.g.version = 1;
	int e = put_attr(&r, type, data, len);
	if (e < 0)
		return e;
	if (send(fd, &r, r.n.nlmsg_len, 0) < 0)
		return -errno;
	return 0;
}

/* Walks the attributes in [p, p + len): calls fn for each well-formed one. */
static void each_attr(const char *p, size_t len,
                      void (*fn)(const struct nlattr *, size_t, void *),
                      void *data)
{
	while (len >= NLA_HDRLEN) {
		const struct nlattr *a = (const struct nlattr *)p;
		if (a->nla_len < NLA_HDRLEN || a->nla_len > len)
			return;
		fn(a, a->nla_len - NLA_HDRLEN, data);
		size_t step = NLA_ALIGNED(a->nla_len);
		if (step >= len)
			return;
		p += step;
		len -= step;
	}
}

static const void *attr_data(const struct nlattr *a)
{
	return (const char *)a + NLA_HDRLEN;
}

static void find_family_id(const struct nlattr *a, size_t len, void *data)
{
	if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID &&
	    len >= sizeof(uint16_t))
		memcpy(data, attr_data(a), sizeof(uint16_t));
}

/* Waits for the answer to seq: the family id (for GETFAMILY), or the ack.
 * Exit reports that arrive meanwhile are dropped: nobody asked yet. */
static int wait_answer(int fd, uint32_t seq, uint16_t *family)
{
	static char buf[16384];
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		size_t left = (size_t)n;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf;
		     NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_seq != seq)
				continue;
			if (h->nlmsg_type == NLMSG_ERROR) {
				if (h->nlmsg_len <
				    NLMSG_LENGTH(sizeof(struct nlmsgerr)))
					return -EPROTO;
				const struct nlmsgerr *e = NLMSG_DATA(h);
				if (e->error || !family)
					return e->error;
				continue; /* the ack after the family's answer
				           */
			}
			if (family &&
			    h->nlmsg_len >= NLMSG_LENGTH(GENL_HDRLEN)) {
				each_attr(
				    (const char *)NLMSG_DATA(h) + GENL_HDRLEN,
				    h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN),
				    find_family_id, family);
				if (*family)
					return 0;
			}
		}
	}
}

int taskstats_open(struct sbx_err *err)
{
	_cleanup_close_ int fd =
	    socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (fd < 0)
		return sbx_err_sys(err, errno, "taskstats: netlink socket");
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return sbx_err_sys(err, errno, "taskstats: bind");
	/* answers must not hang the daemon's start */
	struct timeval tv = {.tv_sec = 2};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

	uint16_t family = 0;
	int r = send_req(fd, GENL_ID_CTRL, CTRL_CMD_GETFAMILY,
	                 CTRL_ATTR_FAMILY_NAME, TASKSTATS_GENL_NAME,
	                 sizeof(TASKSTATS_GENL_NAME), 1);
	if (r == 0)
		r = wait_answer(fd, 1, &family);
	if (r < 0)
		return sbx_err_set(err, -r, "taskstats: no %s family: %s",
		                   TASKSTATS_GENL_NAME, strerror(-r));

	/* every CPU a task may ever exit on, as the kernel spells the set */
	char cpus[256] = "";
	_cleanup_close_ int pfd =
	    open("/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC);
	ssize_t n = pfd >= 0 ? read(pfd, cpus, sizeof(cpus) - 1) : -1;
	if (n <= 0)
		return sbx_err_sys(
		    err, n < 0 ? errno : EIO,
		    "taskstats: /sys/devices/system/cpu/possible");
	cpus[n] = '\0';
	cpus[strcspn(cpus, "\n")] = '\0';
	r = send_req(fd, family, TASKSTATS_CMD_GET,
	             TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, cpus,
	             strlen(cpus) + 1, 2);
	if (r == 0)
		r = wait_answer(fd, 2, NULL);
	if (r < 0)
		return sbx_err_set(err, -r,
		                   "taskstats: registering for CPUs %s: %s",
		                   cpus, strerror(-r));
	/* room for bursts of exits (a make -j on the host) between two
	 * turns of the daemon's loop; FORCE works past rmem_max for root */
	int size = 4 << 20;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return sbx_err_sys(err, errno, "taskstats: O_NONBLOCK");
	return steal_fd(&fd);
}

struct pid_aggr {
	struct taskstats_exit x;
	bool have_stats;
};

static void read_pid_aggr(const struct nlattr *a, size_t len, void *data)
{
	struct pid_aggr *p = data;
	switch (a->nla_type & NLA_TYPE_MASK) {
	case TASKSTATS_TYPE_PID:
		if (len >= sizeof(uint32_t)) {
			uint32_t v;
			memcpy(&v, attr_data(a), sizeof(v));
			p->x.pid = (pid_t)v;
		}
		break;
	case TASKSTATS_TYPE_STATS: {
		struct taskstats ts;
		memset(&ts, 0, sizeof(ts));
		if (len < offsetof(struct taskstats, ac_ppid))
			return; /* older than anything Linux 3.x sends */
		memcpy(&ts, attr_data(a), len < sizeof(ts) ? len : sizeof(ts));
		p->x.status = (int)ts.ac_exitcode;
		p->x.uid = ts.ac_uid;
		if (len >=
		    offsetof(struct taskstats, ac_tgid) + sizeof(ts.ac_tgid))
			p->x.tgid = (pid_t)ts.ac_tgid;
		size_t cl = sizeof(ts.ac_comm) < sizeof(p->x.comm)
		                ? sizeof(ts.ac_comm)
		                : sizeof(p->x.comm) - 1;
		memcpy(p->x.comm, ts.ac_comm, cl);
		p->x.comm[cl] = '\0';
		p->have_stats = true;
		break;
	}
	}
}

struct msg_ctx {
	void (*cb)(const struct taskstats_exit *, void *);
	void *data;
};

static void read_top(const struct nlattr *a, size_t len, void *data)
{
	struct msg_ctx *m = data;
	/* AGGR_TGID repeats the leader's group as a sum without the exit
	 * code; the AGGR_PID report of each thread is what says how it died */
	if ((a->nla_type & NLA_TYPE_MASK) != TASKSTATS_TYPE_AGGR_PID)
		return;
	struct pid_aggr p;
	memset(&p, 0, sizeof(p));
	each_attr(attr_data(a), len, read_pid_aggr, &p);
	if (p.have_stats && p.x.pid > 0)
		m->cb(&p.x, m->data);
}

int taskstats_read(int fd, void (*cb)(const struct taskstats_exit *, void *),
                   void *data)
{
	static char buf[65536];
	struct msg_ctx m = {cb, data};
	int ret = 0;
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS) { /* dropped: say so, read on */
				ret = -ENOBUFS;
				continue;
			}
			return errno == EAGAIN ? ret : -errno;
		}
		if (n == 0)
			return ret;
		size_t left = (size_t)n;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf;
		     NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_type < NLMSG_MIN_TYPE ||
			    h->nlmsg_len < NLMSG_LENGTH(GENL_HDRLEN))
				continue;
			const struct genlmsghdr *g = NLMSG_DATA(h);
			if (g->cmd != TASKSTATS_CMD_NEW)
				continue;
			each_attr((const char *)g + GENL_HDRLEN,
			          h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN),
			          read_top, &m);
		}
	}
}
