/* Snapshots, clones, forks and restores (theory of operation in
 * snapshot.h). One operation at a time per sandbox (sb->snap_op); each is
 * a small state machine driven by the loop:
 *
 *   freeze (take, fork of a running sandbox; polled from a timer)
 *     -> task (runtime/task.c: store_snapshot in a child process)
 *     -> thaw, then the registry (take) or nothing more (restore, clone)
 *     -> done callback, exactly once.
 */
#include "core/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "core/registry.h"
#include "core/sandbox_internal.h"
#include "lib/log.h"
#include "runtime/task.h"

/* How long a sandbox's processes may take to stop for a snapshot: a task
 * in uninterruptible sleep (a slow disk) holds a freeze back. */
#define FREEZE_TIMEOUT_MS 10000
#define FREEZE_POLL_MS 2

enum op_kind { OP_TAKE, OP_RESTORE, OP_CLONE };

struct snapshot_op {
	enum op_kind kind;
	struct manager *m;
	struct sandbox *from;   /* whose files are read while frozen, or NULL */
	struct sandbox *target; /* whose files are replaced or made, or NULL */
	char src[64], dst[64];  /* store names */
	unsigned flags;
	uint64_t group, limit;
	bool frozen;
	uint64_t freeze_deadline;
	struct loop_timer timer;
	struct runtime_task task;
	bool task_running;
	bool after_stop; /* a restore waiting for its target's stop */
	struct loop_watch w;
	struct snapshot *snap; /* take: the one being made */
	snapshot_done_cb done;
	void *ctx;
	struct snapshot_op *next;
};

static void snap_free(struct snapshot *s)
{
	if (!s)
		return;
	free(s->tenant);
	free(s->sandbox);
	free(s->name);
	free(s);
}

static struct snapshot *snap_new(const char *tenant, const char *sandbox,
                                 const char *name)
{
	struct snapshot *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->tenant = strdup(tenant);
	s->sandbox = strdup(sandbox);
	s->name = name ? strdup(name) : NULL;
	if (!s->tenant || !s->sandbox || (name && !s->name)) {
		snap_free(s);
		return NULL;
	}
	return s;
}

static void snap_path(const struct snapshot *s, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s", STORE_SNAPSHOTS, s->id);
}

/* ---- the registry and the store at start -------------------------------- */

struct load_ctx {
	struct manager *m;
	char **names; /* on the store */
	size_t n, cap;
};

static int load_row(const struct registry_snapshot *row, void *data)
{
	struct load_ctx *c = data;
	struct manager *m = c->m;
	bool on_store = false;
	for (size_t i = 0; i < c->n && !on_store; i++)
		on_store = c->names[i] && !strcmp(c->names[i], row->id);
	if (!on_store || strlen(row->id) >= ID_RANDOM_MAX) {
		log_error("registry: snapshot %s has no files on the store; "
		          "forgotten",
		          row->id);
		registry_snapshot_delete(m->reg, row->id, NULL);
		return 0;
	}
	struct snapshot *s = snap_new(row->tenant, row->sandbox, row->name);
	if (!s)
		return -ENOMEM;
	snprintf(s->id, sizeof(s->id), "%s", row->id);
	s->created_ms = row->created_ms;
	s->size_bytes = row->size_bytes;
	s->copied = row->copied != 0;
	char path[128];
	snap_path(s, path, sizeof(path));
	runtime_files_image(m->rt, path, s->image_id, sizeof(s->image_id));
	/* kept in creation order: the list is what GET /v1/snapshot shows */
	struct snapshot **p = &m->snaps;
	while (*p)
		p = &(*p)->next;
	*p = s;
	return 0;
}

static int collect(const char *name, void *data)
{
	struct load_ctx *c = data;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		char **v = realloc(c->names, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		c->names = v;
		c->cap = cap;
	}
	if (!(c->names[c->n] = strdup(name)))
		return -ENOMEM;
	c->n++;
	return 0;
}

int snapshots_load(struct manager *m, struct sbx_err *err)
{
	struct load_ctx c = {.m = m};
	int r = store_list(m->rt->store, STORE_SNAPSHOTS, collect, &c);
	if (r == 0)
		r = registry_load_snapshots(m->reg, load_row, &c, err);
	else
		sbx_err_set(err, -r, "list %s/%s: %s", m->rt->store->dir,
		            STORE_SNAPSHOTS, strerror(-r));
	/* files no row names: a snapshot whose daemon died before it was
	 * listed */
	for (size_t i = 0; r == 0 && i < c.n; i++) {
		if (snapshot_find(m, NULL, c.names[i]))
			continue;
		char path[128];
		struct sbx_err rerr = {0};
		snprintf(path, sizeof(path), "%s/%s", STORE_SNAPSHOTS,
		         c.names[i]);
		if (store_remove(m->rt->store, path, &rerr) < 0)
			log_warn("event=snapshot-orphan-kept id=%s %s",
			         c.names[i], rerr.msg);
		else
			log_info("event=snapshot-orphan-removed id=%s",
			         c.names[i]);
	}
	for (size_t i = 0; i < c.n; i++)
		free(c.names[i]);
	free(c.names);
	return r;
}

struct snapshot *snapshot_find(struct manager *m, const char *tenant,
                               const char *id)
{
	for (struct snapshot *s = m->snaps; s; s = s->next)
		if (!strcmp(s->id, id) &&
		    (!tenant || !strcmp(s->tenant, tenant)))
			return s;
	return NULL;
}

void snapshot_foreach(struct manager *m, const char *tenant,
                      void (*fn)(const struct snapshot *s, void *ctx),
                      void *ctx)
{
	for (struct snapshot *s = m->snaps; s; s = s->next)
		if (!strcmp(s->tenant, tenant))
			fn(s, ctx);
}

static bool snap_in_use(struct manager *m, const struct snapshot *s)
{
	char path[128];
	snap_path(s, path, sizeof(path));
	for (struct snapshot_op *op = m->snap_ops; op; op = op->next)
		if (!strcmp(op->src, path))
			return true;
	return false;
}

int snapshot_delete(struct manager *m, struct snapshot *snap,
                    struct sbx_err *err)
{
	char path[128];
	if (snap_in_use(m, snap))
		return sbx_err_set(err, EBUSY,
		                   "snapshot %s is being restored or cloned",
		                   snap->id);
	/* the row first: a crash after it leaves files that the next start
	 * removes, never a listed snapshot without files */
	int r = registry_snapshot_delete(m->reg, snap->id, err);
	if (r < 0)
		return r;
	snap_path(snap, path, sizeof(path));
	struct sbx_err rerr = {0};
	if (store_remove(m->rt->store, path, &rerr) < 0)
		log_warn("event=snapshot-files-kept id=%s %s", snap->id,
		         rerr.msg);
	for (struct snapshot **p = &m->snaps; *p; p = &(*p)->next)
		if (*p == snap) {
			*p = snap->next;
			break;
		}
	log_info("sandbox=%s event=snapshot-deleted id=%s", snap->sandbox,
	         snap->id);
	bool had_image = snap->image_id[0];
	snap_free(snap);
	if (had_image) /* maybe the last that kept an unnamed image */
		manager_images_gc(m);
	return 0;
}

int snapshot_delete_of(struct manager *m, const char *tenant,
                       const char *sandbox)
{
	int n = 0;
	for (struct snapshot *s = m->snaps, *next; s; s = next) {
		next = s->next;
		struct sbx_err err = {0};
		if (strcmp(s->tenant, tenant) || strcmp(s->sandbox, sandbox))
			continue;
		if (snapshot_delete(m, s, &err) == 0)
			n++;
		else
			log_warn(
			    "sandbox=%s event=snapshot-not-deleted id=%s %s",
			    sandbox, s->id, err.msg);
	}
	return n;
}

int snapshot_tenant_usage(struct manager *m, const char *tenant,
                          uint64_t *bytes)
{
	return store_group_usage(m->rt->store, store_group_of(tenant), bytes);
}

/* ---- operations -----------------------------------------------------------
 */

static void thaw(struct snapshot_op *op)
{
	if (!op->frozen)
		return;
	op->frozen = false;
	if (op->from && op->from->proc.cg &&
	    cgroup_sandbox_freeze(op->from->proc.cg, false) < 0)
		log_warn("sandbox=%s event=thaw-failed", op->from->id);
}

static void op_unlink(struct snapshot_op *op)
{
	for (struct snapshot_op **p = &op->m->snap_ops; *p; p = &(*p)->next)
		if (*p == op) {
			*p = op->next;
			break;
		}
	if (op->from && op->from->snap_op == op)
		op->from->snap_op = NULL;
	if (op->target && op->target->snap_op == op)
		op->target->snap_op = NULL;
}

static void op_finish(struct snapshot_op *op, int r, struct sbx_err *err)
{
	struct manager *m = op->m;
	struct snapshot *snap = NULL;
	struct sandbox *sb = op->target;
	loop_timer_stop(m->loop, &op->timer);
	thaw(op);
	op_unlink(op);
	if (r == 0 && op->kind == OP_TAKE) {
		struct registry_snapshot row = {
		    .id = op->snap->id,
		    .tenant = op->snap->tenant,
		    .sandbox = op->snap->sandbox,
		    .name = op->snap->name,
		    .created_ms = op->snap->created_ms,
		    .size_bytes = op->snap->size_bytes,
		    .copied = op->snap->copied};
		r = registry_snapshot_put(m->reg, &row, err);
		if (r < 0) {
			store_remove(m->rt->store, op->dst, NULL);
		} else {
			snap = op->snap;
			op->snap = NULL;
			struct snapshot **p = &m->snaps;
			while (*p)
				p = &(*p)->next;
			*p = snap;
			log_info("sandbox=%s event=snapshot id=%s bytes=%llu%s",
			         snap->sandbox, snap->id,
			         (unsigned long long)snap->size_bytes,
			         snap->copied ? " copied" : "");
		}
	} else if (r == 0) {
		log_info("sandbox=%s event=%s from=%s", sb->id,
		         op->kind == OP_RESTORE ? "restored" : "cloned",
		         op->src);
	}
	if (r < 0) {
		store_cleanup(m->rt->store, op->dst);
		if (op->kind == OP_CLONE && sb) {
			struct sbx_err derr = {0};
			sandbox_destroy(sb, &derr);
		}
		sb = NULL;
		log_warn("event=snapshot-op-failed kind=%s src=%s %s",
		         op->kind == OP_TAKE      ? "snapshot"
		         : op->kind == OP_RESTORE ? "restore"
		                                  : "clone",
		         op->src, err->msg);
	}
	if (op->kind == OP_RESTORE && r < 0)
		sb = op->target; /* it keeps its old files */
	snapshot_done_cb done = op->done;
	void *ctx = op->ctx;
	snap_free(op->snap);
	free(op);
	done(ctx, snap, sb, r < 0 ? err : NULL);
}

static int task_fn(void *arg, uint64_t *value, struct sbx_err *err)
{
	struct snapshot_op *op = arg;
	bool copied;
	return store_snapshot(op->m->rt->store, op->src, op->dst, op->flags,
	                      op->group, op->limit, value, &copied, err);
}

static void on_task(struct loop_watch *w, uint32_t events)
{
	struct snapshot_op *op = w->data;
	struct sbx_err err = {0};
	uint64_t bytes = 0;
	(void)events;
	loop_del(op->m->loop, w);
	op->task_running = false;
	int r = runtime_task_end(&op->task, &bytes, &err);
	if (op->snap)
		op->snap->size_bytes = bytes;
	op_finish(op, r, &err);
}

static void run_task(struct snapshot_op *op)
{
	struct sbx_err err = {0};
	int r = runtime_task_start(&op->task, task_fn, op, &err);
	if (r < 0) {
		op_finish(op, r, &err);
		return;
	}
	op->task_running = true;
	op->w = (struct loop_watch){
	    .fd = op->task.pidfd, .cb = on_task, .data = op};
	int rc = loop_add(op->m->loop, &op->w, EPOLLIN);
	if (rc < 0) {
		op->task_running = false;
		runtime_task_kill(&op->task);
		op_finish(
		    op,
		    sbx_err_sys(&err, -rc, "cannot watch the snapshot worker"),
		    &err);
	}
}

/* Freeze op->from's commands, then run the task: asked again from the
 * timer until the kernel says they all stopped. */
static void try_freeze(struct loop_timer *t)
{
	struct snapshot_op *op = t->data;
	struct sbx_err err = {0};
	struct sandbox *sb = op->from;
	/* it stopped meanwhile, or is stopping: nothing runs */
	if (!sb->proc.cg || sb->state == SB_STOPPING) {
		run_task(op);
		return;
	}
	int r = cgroup_sandbox_freeze(sb->proc.cg, true);
	op->frozen = true;
	if (r == 0) {
		run_task(op);
		return;
	}
	if (r == -EAGAIN && now_mono_ms() < op->freeze_deadline) {
		loop_timer_start(op->m->loop, &op->timer, FREEZE_POLL_MS);
		return;
	}
	if (r == -EAGAIN)
		sbx_err_set(
		    &err, ETIMEDOUT,
		    "the processes of sandbox %s did not stop within %d "
		    "s for a consistent snapshot (a process in "
		    "uninterruptible sleep?)",
		    sb->id, FREEZE_TIMEOUT_MS / 1000);
	else
		sbx_err_set(&err, -r, "freezing sandbox %s: %s", sb->id,
		            strerror(-r));
	op_finish(op, r == -EAGAIN ? -ETIMEDOUT : r, &err);
}

static struct snapshot_op *op_new(struct manager *m, enum op_kind kind,
                                  snapshot_done_cb done, void *ctx)
{
	struct snapshot_op *op = calloc(1, sizeof(*op));
	if (!op)
		return NULL;
	op->kind = kind;
	op->m = m;
	op->done = done;
	op->ctx = ctx;
	op->task.pid = 0;
	op->task.pidfd = op->task.msgfd = -1;
	op->timer.cb = try_freeze;
	op->timer.data = op;
	op->next = m->snap_ops;
	m->snap_ops = op;
	return op;
}

static void op_start(struct snapshot_op *op)
{
	if (op->from && op->from->proc.cg) {
		op->freeze_deadline = now_mono_ms() + FREEZE_TIMEOUT_MS;
		try_freeze(&op->timer);
	} else {
		run_task(op);
	}
}

static int busy(struct sandbox *sb, struct sbx_err *err)
{
	if (!sb->snap_op)
		return 0;
	return sbx_err_set(
	    err, EBUSY, "sandbox %s is busy with a snapshot, fork or restore",
	    sb->id);
}

/* The sandbox's files exist, say whose range owns them, and are counted
 * in its tenant's group. */
static int files_ready(struct sandbox *sb, struct sbx_err *err)
{
	struct manager *m = sb->m;
	struct runtime_files f = {.disk_bytes =
	                              sb->disk_bytes ?: m->cfg->disk_bytes,
	                          .group = manager_store_group(m, sb->tenant)};
	uid_t owner;
	int r =
	    runtime_files_prepare(m->rt, sb->name, sb->base, &f, &owner, err);
	if (r == 0)
		r = store_group_join(m->rt->store, sb->name, f.group, err);
	return r;
}

int snapshot_take(struct sandbox *sb, const char *name, snapshot_done_cb done,
                  void *ctx)
{
	struct manager *m = sb->m;
	struct sbx_err err = {0};
	int r;
	if ((r = busy(sb, &err)) < 0 || (r = files_ready(sb, &err)) < 0) {
		done(ctx, NULL, NULL, &err);
		return r;
	}
	struct snapshot *s = snap_new(sb->tenant, sb->id, name);
	struct snapshot_op *op = s ? op_new(m, OP_TAKE, done, ctx) : NULL;
	if (!op) {
		snap_free(s);
		sbx_err_set(&err, ENOMEM, "out of memory");
		done(ctx, NULL, NULL, &err);
		return -ENOMEM;
	}
	id_random(s->id, sizeof(s->id), "snap_");
	s->created_ms = now_wall_ms();
	s->copied = !m->rt->store->quotas;
	snprintf(s->image_id, sizeof(s->image_id), "%s", sb->image_id);
	op->snap = s;
	op->from = sb;
	sb->snap_op = op;
	snprintf(op->src, sizeof(op->src), "%s", sb->name);
	snap_path(s, op->dst, sizeof(op->dst));
	op->flags = STORE_READONLY;
	op->group = manager_store_group(m, sb->tenant);
	sandbox_touch(sb);
	op_start(op);
	return 0;
}

/* The target of a restore has stopped: the restore runs, unless it was
 * given up meanwhile (the sandbox destroyed, the daemon closing). */
static void restore_stopped(void *ctx)
{
	struct sandbox *sb = ctx;
	struct snapshot_op *op = sb->snap_op;
	if (!op || op->target != sb || !op->after_stop)
		return;
	op->after_stop = false;
	op_start(op);
}

int snapshot_restore(struct sandbox *sb, const struct snapshot *snap,
                     snapshot_done_cb done, void *ctx)
{
	struct manager *m = sb->m;
	struct sbx_err err = {0};
	int r;
	if ((r = busy(sb, &err)) < 0) {
		done(ctx, NULL, NULL, &err);
		return r;
	}
	struct snapshot_op *op = op_new(m, OP_RESTORE, done, ctx);
	if (!op) {
		sbx_err_set(&err, ENOMEM, "out of memory");
		done(ctx, NULL, NULL, &err);
		return -ENOMEM;
	}
	op->target = sb;
	sb->snap_op = op;
	snap_path(snap, op->src, sizeof(op->src));
	snprintf(op->dst, sizeof(op->dst), "%s", sb->name);
	op->flags = STORE_REPLACE;
	op->group = manager_store_group(m, sb->tenant);
	op->limit = sb->disk_bytes ?: m->cfg->disk_bytes;
	/* its processes end: the files under them are about to change */
	op->after_stop = true;
	sandbox_stop(sb, "restoring a snapshot");
	sandbox_when_stopped(sb, restore_stopped, sb);
	return 0;
}

int snapshot_clone(struct manager *m, const char *tenant, const char *id,
                   const struct sandbox_opts *opts, const struct snapshot *snap,
                   struct sandbox *from, snapshot_done_cb done, void *ctx)
{
	struct sbx_err err = {0};
	struct sandbox *sb = NULL;
	int r = 0;
	if (!from == !snap) {
		r = sbx_err_set(&err, EINVAL, "clone: a snapshot or a sandbox");
		goto fail;
	}
	if (from &&
	    ((r = busy(from, &err)) < 0 || (r = files_ready(from, &err)) < 0))
		goto fail;
	if ((r = manager_create(m, tenant, id, opts, &sb, &err)) < 0)
		goto fail;
	struct snapshot_op *op = op_new(m, OP_CLONE, done, ctx);
	if (!op) {
		sandbox_destroy(sb, &err);
		r = sbx_err_set(&err, ENOMEM, "out of memory");
		goto fail;
	}
	op->target = sb;
	sb->snap_op = op;
	if (from) {
		op->from = from;
		from->snap_op = op;
		snprintf(op->src, sizeof(op->src), "%s", from->name);
		sandbox_touch(from);
	} else {
		snap_path(snap, op->src, sizeof(op->src));
	}
	snprintf(op->dst, sizeof(op->dst), "%s", sb->name);
	/* a stale dir of the slot's last sandbox, if any, goes */
	op->flags = STORE_REPLACE;
	op->group = manager_store_group(m, tenant);
	op->limit = sb->disk_bytes ?: m->cfg->disk_bytes;
	op_start(op);
	return 0;
fail:
	done(ctx, NULL, NULL, &err);
	return r;
}

/* ---- the manager's hooks --------------------------------------------------
 */

void snapshot_sandbox_stopping(struct sandbox *sb)
{
	struct snapshot_op *op = sb->snap_op;
	if (op && op->from == sb)
		thaw(op);
}

/* Give up on op: its worker is killed, what it made goes. */
static void op_abandon(struct snapshot_op *op, const char *why)
{
	struct sbx_err err = {0};
	loop_timer_stop(op->m->loop, &op->timer);
	if (op->task_running) {
		loop_del(op->m->loop, &op->w);
		runtime_task_kill(&op->task);
		op->task_running = false;
	}
	sbx_err_set(&err, ECANCELED, "%s", why);
	op_finish(op, -ECANCELED, &err);
}

void snapshot_sandbox_gone(struct sandbox *sb)
{
	struct snapshot_op *op = sb->snap_op;
	if (!op)
		return;
	/* the caller destroys sb itself: the operation must not */
	if (op->target == sb) {
		op->target = NULL;
	}
	if (op->from == sb) {
		thaw(op);
		op->from = NULL;
	}
	sb->snap_op = NULL;
	char why[128];
	snprintf(why, sizeof(why), "sandbox %s was deleted", sb->id);
	op_abandon(op, why);
}

bool snapshot_files_busy(const struct sandbox *sb)
{
	return sb->snap_op && sb->snap_op->target == sb;
}

void snapshots_free(struct manager *m)
{
	while (m->snap_ops)
		op_abandon(m->snap_ops, "sandboxd is shutting down");
	while (m->snaps) {
		struct snapshot *s = m->snaps;
		m->snaps = s->next;
		snap_free(s);
	}
}
