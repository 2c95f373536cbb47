/* Messages between the daemon and a sandbox's init (pid 1), over one
 * SOCK_SEQPACKET socket per sandbox. Each message is one packet: a fixed
 * header, a payload, and optionally fds (SCM_RIGHTS). Every packet is checked
 * for size and shape before use, in both directions: init trusts the daemon,
 * but a bug must give an error, never an overrun. */
#ifndef SBX_PROTO_H
#define SBX_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/err.h"
#include "runtime/seccomp.h"

#define PROTO_MAX_PAYLOAD (2u << 20) /* argv + env + cwd of one spawn */
#define PROTO_MAX_FDS 8
#define PROTO_SOCKBUF (4u << 20)

enum proto_type {
	PROTO_READY = 1, /* init -> daemon: the sandbox is set up */
	PROTO_FAILED,  /* init -> daemon: setup failed; payload: errno + text */
	PROTO_SPAWN,   /* daemon -> init: run a command */
	PROTO_SPAWNED, /* init -> daemon: forked; payload: pid or errno */
	PROTO_EXIT,    /* init -> daemon: a spawned command ended */
	PROTO_SIGNAL,  /* daemon -> init: signal a spawned command's pid */
	PROTO_INIT,    /* daemon -> init: its parameters, the first packet */
	PROTO_START,   /* daemon -> zygote: make an init (zygote.h) */
	PROTO_STARTED, /* zygote -> daemon: its pid, or errno */
};

struct proto_hdr {
	uint32_t type;
	uint32_t len; /* payload bytes after the header */
	uint64_t id;  /* the daemon's request id, echoed back */
};

/* PROTO_SPAWN flags */
#define SPAWN_CWD_FALLBACK 1u /* missing cwd: use /workspace, then / */
#define SPAWN_SEARCH_PATH 2u  /* argv[0] without '/': search env's PATH */
#define SPAWN_BUILTIN 4u      /* run runtime/builtin.c's argv[0], no exec */
#define SPAWN_CTTY                                                             \
	8u /* stdin is a pty slave: make it the                                \
	      controlling terminal of the new session */

/* Fds of a PROTO_SPAWN, in this order: one per stdio target (targets[]),
 * then ncg cgroup.procs fds of the command's cgroup leaf, which the
 * command joins by writing "0" to each. The spawner keeps a leaf's fds
 * once it has them: the daemon sends them with the first spawn into that
 * leaf only (ncg 0 afterwards). Absent stdin reads /dev/null inside the
 * sandbox. */
/* A spawned command's fds are placed at numbers below this. */
#define PROTO_MAX_TARGET_FD 64
#define PROTO_MAX_LEAF_FDS 4   /* one per cgroup hierarchy with leaves */
#define PROTO_MAX_LEAVES 65536 /* leaf numbers are below this */
#define PROTO_MAX_LAYERS 64    /* an image's layers in PROTO_INIT */

struct spawn_req {
	uint32_t flags;
	uint32_t nstdio;    /* how many stdio fds come first */
	int32_t targets[4]; /* their fd numbers in the child */
	int32_t leaf;       /* the command's cgroup leaf; -1: none */
	uint32_t ncg;       /* the leaf's fds after the stdio ones */
	uint32_t uid, gid;  /* in the sandbox (an image's User) */
	const char *cwd;
	uint32_t argc, envc;
	const char *const *argv; /* argc entries */
	const char *const *envp; /* envc entries */
};

struct proto_status {   /* payload of SPAWNED, EXIT, FAILED, STARTED */
	int32_t pid;    /* pid in the sandbox's pid namespace */
	int32_t status; /* wait status (EXIT) */
	int32_t err;    /* errno: spawn failed (SPAWNED/EXIT) or setup */
	char what[200]; /* what failed, NUL-terminated */
};

struct proto_signal {
	int32_t pid;
	int32_t signo;
};

/* PROTO_INIT: what init needs to build the sandbox and run its commands.
 * init is exec'd with nothing but its name in argv, an empty environment,
 * the socket at fd INIT_SOCK_FD and the user namespace at INIT_USERNS_FD
 * (init.h); everything else comes in this packet, which may carry one fd:
 * the user namespace that idmaps the sandbox's files (rootfs.h). */
struct init_params {
	uint32_t base;       /* host uid of the sandbox's root */
	uint32_t max_ptys;   /* devpts max= */
	uint64_t disk_bytes; /* RLIMIT_FSIZE of every command; 0: none */
	const char *image_dir, *usr_mask, *mnt_dir,
	    *sandbox_dir; /* rootfs.h;
	                   * usr_mask NULL: nothing to mask */
	/* an image sandbox (rootfs.h): its layers' names in layers_dir,
	 * bottom first, under image_top; nlayers 0: the host's system */
	const char *layers_dir, *image_top;
	const char *const *layers; /* nlayers entries */
	uint32_t nlayers;
	struct seccomp_prog seccomp; /* the commands' filter, as built */
};

int proto_send(int sock, uint32_t type, uint64_t id, const void *payload,
               size_t len, const int *fds, size_t nfds);
/* Receive one packet into buf (cap bytes). Fills hdr, the payload pointer
 * (inside buf) and up to PROTO_MAX_FDS fds. Returns 1 on a packet, 0 on EOF,
 * -EAGAIN when nothing is waiting, other -errno on a malformed packet (any
 * fds that came with it are closed). */
int proto_recv(int sock, void *buf, size_t cap, struct proto_hdr *hdr,
               const void **payload, int *fds, size_t *nfds);

/* Pack a spawn request; returns the length or -E2BIG. */
ssize_t proto_spawn_encode(const struct spawn_req *req, char *buf, size_t cap);
/* Unpack into req, whose argv/envp arrays are allocated (free both with
 * free(req->argv); free(req->envp)) and point into buf. */
int proto_spawn_decode(const char *buf, size_t len, struct spawn_req *req,
                       struct sbx_err *err);

/* Pack init's parameters; returns the length or -E2BIG. */
ssize_t proto_init_encode(const struct init_params *p, char *buf, size_t cap);
/* Unpack: the strings point into buf, the filter is copied (free it
 * with seccomp_prog_free), the layers array is allocated (free it with
 * free((void *)p->layers); NULL when nlayers is 0). Paths must be
 * absolute, layers plain names, the filter 1 to BPF_MAXINSNS
 * instructions, and nothing may follow. */
int proto_init_decode(const char *buf, size_t len, struct init_params *p,
                      struct sbx_err *err);

#endif
