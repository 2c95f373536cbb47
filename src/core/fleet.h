/* A node of a fleet (--etcd): which node serves a sandbox, and the
 * checkpoints that let a sandbox move (docs/operations.md "Running a
 * fleet").
 *
 * Theory of operation. Ownership lives in etcd, spoken to through its
 * v3 HTTP/JSON gateway with libcurl on the event loop (curl_loop.h). The
 * node holds one lease (--etcd-ttl), granted at start and kept alive from
 * a loop timer; a sandbox ID is the node's while the key sbx/own/<id>
 * exists bound to that lease. It is taken with one transaction: create
 * the key if absent, else read who has it. A node whose lease ended (it
 * could not reach etcd for a TTL, or etcd said so) owns nothing any more
 * and stops its sandboxes: one sandbox is never served by two nodes.
 *
 * A checkpoint is a backup (backup.h) of the sandbox's /workspace into
 * the daemon's backup store (shared by the fleet: --backup-s3), recorded
 * as sbx/ckpt/<id>/<tenant key> = {tenant, gen, backup} in etcd and as
 * the generation in the registry. They are written on an idle stop, on a
 * drain and every --checkpoint-every for sandboxes used since their last
 * one. Taking a sandbox whose checkpoint is newer than this node's copy
 * restores it first; what a dead node changed after its last checkpoint
 * is lost. */
#ifndef SBX_FLEET_H
#define SBX_FLEET_H

#include <stdbool.h>

#include "lib/err.h"

struct manager;
struct sandbox;
struct fleet;
struct fleet_claim;

enum fleet_where {
	FLEET_HERE,  /* this node holds it: serve */
	FLEET_THERE, /* another live node does: url is where */
	FLEET_FAIL,  /* neither: err says why (etcd unreachable, draining,
	                a restore that failed) */
};
typedef void (*fleet_claim_cb)(void *ctx, enum fleet_where w, const char *url,
                               const struct sbx_err *err);

/* Made by main when --etcd is given (m->fleet); starts the lease. */
int fleet_new(struct manager *m, struct fleet **out, struct sbx_err *err);
/* Before manager_free: claims and checkpoints end (with the sandboxes
 * manager_free stops), nothing new starts, m->fleet is NULL. After it,
 * fleet_free. */
void fleet_close(struct fleet *f);
void fleet_free(struct fleet *f);
const char *fleet_node_name(const struct fleet *f);
/* Drained (or draining): /health says 503. */
bool fleet_draining(const struct fleet *f);

/* May this node serve sandbox id (any tenant's)? 1: yes, now (cb is not
 * called); 0: cb follows once (not after fleet_claim_cancel), *out is
 * set. Taking a free ID restores its checkpoints. */
int fleet_claim(struct fleet *f, const char *id, fleet_claim_cb cb, void *ctx,
                struct fleet_claim **out);
void fleet_claim_cancel(struct fleet_claim *c);

/* From the manager: sb was made here (take its ID, if it is not yet);
 * sb is idle (true: the fleet checkpoints it and stops it itself); sb is
 * being destroyed (its checkpoint record goes). */
void fleet_sandbox_created(struct fleet *f, struct sandbox *sb);
bool fleet_sandbox_idle(struct fleet *f, struct sandbox *sb);
void fleet_sandbox_gone(struct fleet *f, struct sandbox *sb);

/* Checkpoint every sandbox changed since its last checkpoint, stop them,
 * give up every ID; done(ctx, checkpointed, failed) once. */
void fleet_drain(struct fleet *f,
                 void (*done)(void *ctx, unsigned n, unsigned failed),
                 void *ctx);

#endif
