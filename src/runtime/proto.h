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

#define PROTO_MAX_PAYLOAD (2u << 20) /* argv + env + cwd of one spawn */
#define PROTO_MAX_FDS 8
#define PROTO_SOCKBUF (4u << 20)

enum proto_type {
	PROTO_READY = 1, /* init -> daemon: the sandbox is set up */
	PROTO_FAILED,    /* init -> daemon: setup failed; payload: errno + text */
	PROTO_SPAWN,     /* daemon -> init: run a command */
	PROTO_SPAWNED,   /* init -> daemon: forked; payload: pid or errno */
	PROTO_EXIT,      /* init -> daemon: a spawned command ended */
	PROTO_SIGNAL,    /* daemon -> init: signal a spawned command's pid */
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
#define SPAWN_AS_USER 8u      /* run as SPAWN_USER_ID, the image's "user" */
#define SPAWN_USER_ID 1000u

/* Fds of a PROTO_SPAWN, in this order: one per stdio target (targets[]),
 * then ncg cgroup.procs fds the child writes "0" to. Absent stdin reads
 * /dev/null inside the sandbox. */
/* A spawned command's fds are placed at numbers below this. */
#define PROTO_MAX_TARGET_FD 64

struct spawn_req {
	uint32_t flags;
	uint32_t nstdio;          /* how many stdio fds come first */
	int32_t targets[4];       /* their fd numbers in the child */
	uint32_t ncg;             /* cgroup fds after them */
	const char *cwd;
	uint32_t argc, envc;
	const char *const *argv;  /* argc entries */
	const char *const *envp;  /* envc entries */
};

struct proto_status {      /* payload of SPAWNED, EXIT, FAILED */
	int32_t pid;       /* pid in the sandbox's pid namespace */
	int32_t status;    /* wait status (EXIT) */
	int32_t err;       /* errno: spawn failed (SPAWNED/EXIT) or setup */
	char what[200];    /* what failed, NUL-terminated */
};

struct proto_signal {
	int32_t pid;
	int32_t signo;
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
ssize_t proto_spawn_encode(const struct spawn_req *req, char *buf,
			   size_t cap);
/* Unpack into req, whose argv/envp arrays are allocated (free both with
 * free(req->argv); free(req->envp)) and point into buf. */
int proto_spawn_decode(const char *buf, size_t len, struct spawn_req *req,
		       struct sbx_err *err);

#endif
