/* Packing and unpacking of daemon<->init packets. A SPAWN payload is:
 *   u32 flags, u32 nstdio, i32 targets[4], i32 leaf, u32 ncg, u32 argc,
 *   u32 envc, u32 uid, u32 gid,
 *   then cwd, argv[0..argc), envp[0..envc) as NUL-terminated strings. */
#include "runtime/proto.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/cleanup.h"

int proto_send(int sock, uint32_t type, uint64_t id, const void *payload,
               size_t len, const int *fds, size_t nfds)
{
	struct proto_hdr hdr = {.type = type, .len = (uint32_t)len, .id = id};
	struct iovec iov[2] = {
	    {.iov_base = &hdr, .iov_len = sizeof(hdr)},
	    {.iov_base = (void *)payload, .iov_len = len},
	};
	union {
		char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct msghdr msg = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};

	if (len > PROTO_MAX_PAYLOAD || nfds > PROTO_MAX_FDS)
		return -E2BIG;
	if (nfds) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	for (;;) {
		ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
		if (n >= 0)
			return (size_t)n == sizeof(hdr) + len ? 0 : -EIO;
		if (errno != EINTR)
			return -errno;
	}
}

int proto_recv(int sock, void *buf, size_t cap, struct proto_hdr *hdr,
               const void **payload, int *fds, size_t *nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = buf, .iov_len = cap};
	struct msghdr msg = {.msg_iov = &iov,
	                     .msg_iovlen = 1,
	                     .msg_control = ctl.buf,
	                     .msg_controllen = sizeof(ctl.buf)};
	ssize_t n;

	*nfds = 0;
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN
		                                               : -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c;
	     c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int tmp[PROTO_MAX_FDS];
		memcpy(tmp, CMSG_DATA(c), k * sizeof(int));
		for (size_t i = 0; i < k; i++) {
			if (*nfds < PROTO_MAX_FDS)
				fds[(*nfds)++] = tmp[i];
			else
				close(tmp[i]);
		}
	}
	if (n == 0 && *nfds == 0)
		return 0;
	if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    (size_t)n < sizeof(*hdr))
		goto bad;
	memcpy(hdr, buf, sizeof(*hdr));
	if (hdr->len != (size_t)n - sizeof(*hdr))
		goto bad;
	*payload = (const char *)buf + sizeof(*hdr);
	return 1;
bad:
	for (size_t i = 0; i < *nfds; i++)
		close(fds[i]);
	*nfds = 0;
	return -EPROTO;
}

struct spawn_fixed {
	uint32_t flags, nstdio;
	int32_t targets[4];
	int32_t leaf;
	uint32_t ncg, argc, envc;
	uint32_t uid, gid;
};

static int put_str(char *buf, size_t cap, size_t *off, const char *s)
{
	size_t l = strlen(s) + 1;
	if (l > cap - *off)
		return -E2BIG;
	memcpy(buf + *off, s, l);
	*off += l;
	return 0;
}

ssize_t proto_spawn_encode(const struct spawn_req *req, char *buf, size_t cap)
{
	struct spawn_fixed f = {
	    .flags = req->flags,
	    .nstdio = req->nstdio,
	    .leaf = req->leaf,
	    .ncg = req->ncg,
	    .argc = req->argc,
	    .envc = req->envc,
	    .uid = req->uid,
	    .gid = req->gid,
	};
	size_t off = sizeof(f);

	memcpy(f.targets, req->targets, sizeof(f.targets));
	if (cap < sizeof(f))
		return -E2BIG;
	memcpy(buf, &f, sizeof(f));
	if (put_str(buf, cap, &off, req->cwd ? req->cwd : ""))
		return -E2BIG;
	for (uint32_t i = 0; i < req->argc; i++)
		if (put_str(buf, cap, &off, req->argv[i]))
			return -E2BIG;
	for (uint32_t i = 0; i < req->envc; i++)
		if (put_str(buf, cap, &off, req->envp[i]))
			return -E2BIG;
	return (ssize_t)off;
}

/* Next NUL-terminated string at *off, or NULL if it would run past len. */
static const char *take_str(const char *buf, size_t len, size_t *off)
{
	if (*off >= len)
		return NULL;
	const char *s = buf + *off;
	const char *nul = memchr(s, '\0', len - *off);
	if (!nul)
		return NULL;
	*off += (size_t)(nul - s) + 1;
	return s;
}

int proto_spawn_decode(const char *buf, size_t len, struct spawn_req *req,
                       struct sbx_err *err)
{
	struct spawn_fixed f;
	size_t off = sizeof(f);

	memset(req, 0, sizeof(*req));
	if (len < sizeof(f))
		return sbx_err_set(err, EPROTO, "spawn: short packet");
	memcpy(&f, buf, sizeof(f));
	/* each string takes at least its NUL, which bounds the counts */
	if (f.argc == 0 || f.argc > len || f.envc > len || f.nstdio > 4 ||
	    f.ncg > PROTO_MAX_LEAF_FDS || f.leaf < -1 ||
	    f.leaf >= PROTO_MAX_LEAVES || (f.leaf == -1 && f.ncg))
		return sbx_err_set(err, EPROTO, "spawn: bad counts");
	for (uint32_t i = 0; i < f.nstdio; i++) {
		if (f.targets[i] < 0 || f.targets[i] >= PROTO_MAX_TARGET_FD)
			return sbx_err_set(err, EPROTO, "spawn: bad fd target");
		for (uint32_t j = 0; j < i; j++)
			if (f.targets[j] == f.targets[i])
				return sbx_err_set(
				    err, EPROTO,
				    "spawn: two fds at one target");
	}
	req->flags = f.flags;
	req->nstdio = f.nstdio;
	memcpy(req->targets, f.targets, sizeof(f.targets));
	req->leaf = f.leaf;
	req->ncg = f.ncg;
	req->argc = f.argc;
	req->envc = f.envc;
	if (f.uid > 65535 || f.gid > 65535)
		return sbx_err_set(err, EPROTO, "spawn: bad uid or gid");
	req->uid = f.uid;
	req->gid = f.gid;
	req->cwd = take_str(buf, len, &off);
	_cleanup_free_ const char **argv = calloc(f.argc + 1, sizeof(char *));
	_cleanup_free_ const char **envp = calloc(f.envc + 1, sizeof(char *));
	if (!argv || !envp)
		return sbx_err_set(err, ENOMEM, "spawn: out of memory");
	if (!req->cwd)
		return sbx_err_set(err, EPROTO, "spawn: truncated cwd");
	for (uint32_t i = 0; i < f.argc; i++)
		if (!(argv[i] = take_str(buf, len, &off)))
			return sbx_err_set(err, EPROTO,
			                   "spawn: truncated argv");
	for (uint32_t i = 0; i < f.envc; i++)
		if (!(envp[i] = take_str(buf, len, &off)))
			return sbx_err_set(err, EPROTO, "spawn: truncated env");
	if (off != len)
		return sbx_err_set(err, EPROTO, "spawn: trailing bytes");
	req->argv = argv;
	req->envp = envp;
	argv = NULL;
	envp = NULL;
	return 0;
}

/* An INIT payload is: u32 base, u32 max_ptys, u64 disk_bytes, u32 insns,
 * u32 nlayers, then the filter's instructions (8 bytes each), then image_dir,
 * usr_mask ("" for none), mnt_dir, sandbox_dir, layers_dir, image_top and
 * nlayers layer names as NUL-terminated strings. */
struct init_fixed {
	uint32_t base, max_ptys;
	uint64_t disk_bytes;
	uint32_t insns;
	uint32_t nlayers;
};
/* none: an initializer need not clear padding (clang's does not), and
 * uninitialized bytes would go over the socket */
_Static_assert(sizeof(struct init_fixed) == 24,
               "struct init_fixed has no implicit padding");

ssize_t proto_init_encode(const struct init_params *p, char *buf, size_t cap)
{
	struct init_fixed f = {.base = p->base,
	                       .max_ptys = p->max_ptys,
	                       .disk_bytes = p->disk_bytes,
	                       .insns = p->seccomp.len,
	                       .nlayers = p->nlayers};
	size_t off = sizeof(f);
	size_t n = p->seccomp.len * sizeof(struct sock_filter);

	if (cap < sizeof(f) || p->nlayers > PROTO_MAX_LAYERS || n > cap - off)
		return -E2BIG;
	memcpy(buf + off, p->seccomp.insns, n);
	off += n;
	memcpy(buf, &f, sizeof(f));
	if (put_str(buf, cap, &off, p->image_dir) ||
	    put_str(buf, cap, &off, p->usr_mask ? p->usr_mask : "") ||
	    put_str(buf, cap, &off, p->mnt_dir) ||
	    put_str(buf, cap, &off, p->sandbox_dir) ||
	    put_str(buf, cap, &off, p->layers_dir) ||
	    put_str(buf, cap, &off, p->image_top))
		return -E2BIG;
	for (uint32_t i = 0; i < p->nlayers; i++)
		if (put_str(buf, cap, &off, p->layers[i]))
			return -E2BIG;
	return (ssize_t)off;
}

int proto_init_decode(const char *buf, size_t len, struct init_params *p,
                      struct sbx_err *err)
{
	struct init_fixed f;
	size_t off = sizeof(f);

	memset(p, 0, sizeof(*p));
	if (len < sizeof(f))
		return sbx_err_set(err, EPROTO, "init: short packet");
	memcpy(&f, buf, sizeof(f));
	if (f.insns == 0 || f.insns > BPF_MAXINSNS)
		return sbx_err_set(err, EPROTO, "init: bad filter length");
	size_t n = f.insns * sizeof(struct sock_filter);
	if (n > len - off)
		return sbx_err_set(err, EPROTO, "init: truncated filter");
	p->seccomp.insns = malloc(n);
	if (!p->seccomp.insns)
		return sbx_err_set(err, ENOMEM, "init: out of memory");
	memcpy(p->seccomp.insns, buf + off, n);
	p->seccomp.len = (unsigned short)f.insns;
	off += n;
	if (f.nlayers > PROTO_MAX_LAYERS) {
		seccomp_prog_free(&p->seccomp);
		return sbx_err_set(err, EPROTO, "init: too many layers");
	}
	const char *s[6];
	for (int i = 0; i < 6; i++)
		s[i] = take_str(buf, len, &off);
	/* usr_mask (s[1]) may be empty; every path given is absolute */
	bool ok = true;
	for (int i = 0; ok && i < 6; i++)
		ok = s[i] && (s[i][0] == '/' || (i == 1 && !s[i][0]));
	/* a layer is a name in layers_dir: not empty, no '/', not . or .. */
	const char **layers = NULL;
	if (ok && f.nlayers && !(layers = calloc(f.nlayers, sizeof(char *)))) {
		seccomp_prog_free(&p->seccomp);
		return sbx_err_set(err, ENOMEM, "init: out of memory");
	}
	for (uint32_t i = 0; ok && i < f.nlayers; i++) {
		layers[i] = take_str(buf, len, &off);
		ok = layers[i] && layers[i][0] && !strchr(layers[i], '/') &&
		     strcmp(layers[i], ".") && strcmp(layers[i], "..");
	}
	ok = ok && off == len;
	if (!ok) {
		free(layers);
		seccomp_prog_free(&p->seccomp);
		return sbx_err_set(err, EPROTO, "init: bad paths");
	}
	p->base = f.base;
	p->max_ptys = f.max_ptys;
	p->disk_bytes = f.disk_bytes;
	p->image_dir = s[0];
	p->usr_mask = s[1][0] ? s[1] : NULL;
	p->mnt_dir = s[2];
	p->layers_dir = s[4];
	p->image_top = s[5];
	p->layers = layers;
	p->nlayers = f.nlayers;
	p->sandbox_dir = s[3];
	return 0;
}
