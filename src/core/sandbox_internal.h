/* What a sandbox is made of: for the core's files only (scripts/check-layers
 * keeps the faces out), which read and change it on the event loop. The
 * faces see struct sandbox as opaque and use core/manager.h's functions. */
#ifndef SBX_SANDBOX_INTERNAL_H
#define SBX_SANDBOX_INTERNAL_H

#include "core/manager.h"

struct sandbox {
	struct manager *m;
	char *tenant, *id;
	char name[16]; /* "s<slot>": its dir and cgroup name */
	uint32_t slot;
	uid_t base;      /* host uid of its root */
	bool range_held; /* its uid range is reserved host-wide by us */
	enum sandbox_state state;
	struct sandbox_proc proc;
	struct loop_watch sock_w; /* init's messages, and its end */
	struct loop_watch stop_w; /* init's pidfd, while stopping */
	char *stop_why;           /* while stopping: the log line's */
	bool destroyed; /* in m->dying: its files go when it has stopped */
	struct sandbox_waiter *stop_waiters; /* sandbox_when_stopped */
	struct exec_job *stop_queue;         /* commands waiting for the stop to
	                                        end, in order (core/exec.c) */
	struct cgroup_limits limits;         /* 0: the daemon's default */
	uint64_t sleep_after_ms;             /* 0: the daemon's default */
	uint64_t disk_bytes;                 /* 0: the daemon's default */
	bool keep_alive;                     /* never stopped for idleness */
	char **env;                          /* "K=V" for every command */
	size_t envc;
	char *labels; /* JSON text, or NULL */
	/* its image (kept with its files, runtime_files_image): the id, and
	 * the image while the store has it; "" and NULL: the host's system */
	char image_id[72];
	struct image *image;
	/* loaded from the registry and its files' image not read yet (a
	 * restart reads none: sandbox_image_resolve does, on first use) */
	bool image_pending;
	struct process *procs;       /* background processes */
	struct interp_group *interp; /* its interpreter contexts */
	struct terminal *terms;      /* its terminals (terminal.h) */
	unsigned nprocs;
	uint64_t created_ms, last_active_ms; /* wall clock */
	struct session *sessions;            /* first: the default session */
	struct exec_job *jobs;               /* sent to init, not yet ended */
	unsigned busy;                       /* jobs queued or running */
	struct snapshot_op *snap_op;         /* a snapshot, fork or restore
	                                        of it in flight */
	struct net_policy *net_policy;       /* NULL: --network-default */
	struct sandbox_net *net;             /* its link, while it has one */
	uint64_t net_tx, net_rx;             /* bytes of earlier links */
	uint64_t uses;                       /* sandbox_touch calls, this run */
	uint64_t fleet_saved_uses; /* the uses its latest checkpoint has
	                              (core/fleet.c): fewer, it changed */
	struct sandbox *hnext;
};

/* A sandbox loaded at start reads the image its files name on first use
 * (manager_find, a start, the image GC): sb->image_id and sb->image are
 * right after this. Cheap when done already. */
void sandbox_image_resolve(struct sandbox *sb);

#endif
