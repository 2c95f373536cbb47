/* The sandbox registry: which sandboxes exist, their uid slot and limits,
 * and the state (cwd, environment) of their sessions. SQLite in WAL mode
 * under the state dir; survives daemon restarts. Writes happen on create,
 * destroy and stop, and for a session when it is made, deleted, or a
 * command changed its cwd or environment. */
#ifndef SBX_REGISTRY_H
#define SBX_REGISTRY_H

#include <stdint.h>

#include "lib/err.h"
#include "runtime/cgroup.h"

struct registry;

struct registry_row {
	const char *tenant, *id;
	uint32_t slot;
	uint64_t created_ms, last_active_ms;
	struct cgroup_limits limits;
	uint64_t disk_bytes;     /* 0: the daemon's */
	uint64_t sleep_after_ms; /* 0: the daemon's */
	int keep_alive;
	const char *env; /* "K=V\0K=V\0", env_len bytes */
	size_t env_len;
	const char *labels; /* JSON text, or NULL */
};

int registry_open(const char *path, struct registry **out, struct sbx_err *err);
void registry_close(struct registry *r);
int registry_load(struct registry *r,
                  int (*cb)(const struct registry_row *row, void *data),
                  void *data, struct sbx_err *err);
int registry_insert(struct registry *r, const struct registry_row *row,
                    struct sbx_err *err);
int registry_delete(struct registry *r, const char *tenant, const char *id,
                    struct sbx_err *err);
/* Replace a sandbox's labels (JSON text, or NULL). */
int registry_set_labels(struct registry *r, const char *tenant, const char *id,
                        const char *labels, struct sbx_err *err);
int registry_touch(struct registry *r, const char *tenant, const char *id,
                   uint64_t last_active_ms, struct sbx_err *err);
/* Many touches in one transaction (a shutdown stops every sandbox): what
 * is written between them is kept at registry_commit. Nothing that opens
 * a transaction of its own (registry_delete) may run in between. */
int registry_begin(struct registry *r);
void registry_commit(struct registry *r);

/* A fleet's checkpoints (core/fleet.h): the generation of a sandbox's
 * files this node has, and the backup that holds it; backup NULL drops
 * the row. get: gen 0 and backup "" when there is none. */
int registry_checkpoint_put(struct registry *r, const char *tenant,
                            const char *id, uint64_t gen, const char *backup,
                            struct sbx_err *err);
int registry_checkpoint_get(struct registry *r, const char *tenant,
                            const char *id, uint64_t *gen, char *backup,
                            size_t cap);

/* Snapshots (core/snapshot.c): one row per snapshot, written once it is
 * complete on the store; they outlive their sandbox. */
struct registry_snapshot {
	const char *id, *tenant, *sandbox, *name;
	uint64_t created_ms, size_bytes;
	int copied; /* a copy (plain store), not a CoW snapshot */
};
int registry_snapshot_put(struct registry *r,
                          const struct registry_snapshot *row,
                          struct sbx_err *err);
int registry_snapshot_delete(struct registry *r, const char *id,
                             struct sbx_err *err);
int registry_load_snapshots(struct registry *r,
                            int (*cb)(const struct registry_snapshot *row,
                                      void *data),
                            void *data, struct sbx_err *err);

/* Sessions: one row per (tenant, id, session), its encoded state
 * (session_state_encode). registry_delete drops a sandbox's sessions with
 * it. */
struct registry_session {
	const char *tenant, *id, *session;
	const char *state;
	size_t state_len;
};
int registry_session_put(struct registry *r, const struct registry_session *row,
                         struct sbx_err *err);
int registry_session_delete(struct registry *r, const char *tenant,
                            const char *id, const char *session,
                            struct sbx_err *err);
int registry_load_sessions(struct registry *r,
                           int (*cb)(const struct registry_session *row,
                                     void *data),
                           void *data, struct sbx_err *err);

/* A sandbox's network policy (net_policy_encode), NULL: none kept.
 * registry_delete drops it with the sandbox. */
int registry_network_put(struct registry *r, const char *tenant, const char *id,
                         const char *policy, struct sbx_err *err);
int registry_load_networks(struct registry *r,
                           int (*cb)(const char *tenant, const char *id,
                                     const char *policy, void *data),
                           void *data, struct sbx_err *err);
/* The room assistant's history: messages of (tenant, room) in order; only
 * the newest REGISTRY_MESSAGES_KEPT of a room are kept. */
#define REGISTRY_MESSAGES_KEPT 50
struct registry_message {
	const char *role; /* "user" or "agent" */
	const char *user_id;
	const char *text;
	uint64_t ts; /* wall clock, ms */
};
/* All of msgs, or none. */
int registry_messages_add(struct registry *r, const char *tenant,
                          const char *room, const struct registry_message *msgs,
                          size_t n, struct sbx_err *err);
/* The last `last` messages, oldest first. */
int registry_messages_load(struct registry *r, const char *tenant,
                           const char *room, unsigned last,
                           int (*cb)(const struct registry_message *m,
                                     void *data),
                           void *data, struct sbx_err *err);
int registry_messages_clear(struct registry *r, const char *tenant,
                            const char *room, struct sbx_err *err);

#endif
