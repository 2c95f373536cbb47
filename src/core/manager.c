/* Sandboxes known to the daemon, in a hash table keyed by (tenant, id),
 * loaded from the registry at start. A sandbox's host uid range comes from
 * its slot, which the registry keeps for its whole life: its files on disk
 * are owned by that range, so the range must not change across restarts
 * (nor the base: the state dir records it), and no two live sandboxes ever
 * share one, in this daemon or in any other on the host (runtime/uidrange.c
 * reserves each range host-wide while its sandbox exists). Sessions (cwd,
 * environment) are kept in the registry too, and come back with their
 * sandbox. */
#include "core/manager.h"
#include "core/images.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/exec.h"
#include "core/fleet.h"
#include "core/interp.h"
#include "core/network.h"
#include "core/process.h"
#include "core/registry.h"
#include "core/backup.h"
#include "core/snapshot.h"
#include "core/sandbox_internal.h"
#include "core/session_internal.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "lib/util.h"
#include "runtime/taskstats.h"
#include "runtime/uidrange.h"
#include "runtime/userns.h"

#define NBUCKETS 16384
#define MAX_SLOTS 65536u

enum { SLOT_FREE, SLOT_TAKEN, SLOT_DIRTY };
#define DIRTY_RETRY_MIN_MS 1000
#define DIRTY_RETRY_MAX_MS 60000

static size_t hash(const char *tenant, const char *id)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *p = tenant; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	h = (h ^ 0xff) * 1099511628211ull;
	for (const char *p = id; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	return (size_t)(h % NBUCKETS);
}

static struct sandbox *find(struct manager *m, const char *tenant,
                            const char *id)
{
	for (struct sandbox *sb = m->buckets[hash(tenant, id)]; sb;
	     sb = sb->hnext)
		if (!strcmp(sb->id, id) && !strcmp(sb->tenant, tenant))
			return sb;
	return NULL;
}

struct sandbox *manager_find(struct manager *m, const char *tenant,
                             const char *id)
{
	struct sandbox *sb = find(m, tenant, id);
	if (sb)
		sandbox_image_resolve(sb);
	return sb;
}

static struct sandbox *add(struct manager *m, const char *tenant,
                           const char *id, uint32_t slot)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return NULL;
	sb->tenant = strdup(tenant);
	sb->id = strdup(id);
	sb->sessions = session_new("default", NULL, NULL, 0);
	if (!sb->tenant || !sb->id || !sb->sessions) {
		free(sb->tenant);
		free(sb->id);
		session_free(sb->sessions);
		free(sb);
		return NULL;
	}
	sb->m = m;
	sb->slot = slot;
	sb->base = m->cfg->uid_base + slot * USERNS_RANGE;
	snprintf(sb->name, sizeof(sb->name), "s%u", slot);
	sb->proc.sock = sb->proc.pidfd = -1;
	m->slots[slot] = SLOT_TAKEN;
	size_t h = hash(tenant, id);
	sb->hnext = m->buckets[h];
	m->buckets[h] = sb;
	m->count++;
	return sb;
}

/* Nothing finds it any more and what it had is freed, but for its slot
 * and uid range (a destroyed sandbox still stopping: free_sandbox). */
static void forget_sandbox(struct manager *m, struct sandbox *sb)
{
	for (struct sandbox **p = &m->buckets[hash(sb->tenant, sb->id)]; *p;
	     p = &(*p)->hnext)
		if (*p == sb) {
			*p = sb->hnext;
			break;
		}
	sb->hnext = NULL;
	if (sb->image_pending)
		m->images_pending--;
	sb->image_pending = false;
	m->count--;
	interp_sandbox_gone(sb);
	process_free_all(sb);
	for (size_t i = 0; i < sb->envc; i++)
		free(sb->env[i]);
	free(sb->env);
	free(sb->labels);
	if (sb->net_policy) {
		net_policy_clear(sb->net_policy);
		free(sb->net_policy);
	}
	sb->net_policy = NULL;
	sb->env = NULL;
	sb->envc = 0;
	sb->labels = NULL;
	while (sb->sessions) {
		struct session *s = sb->sessions;
		sb->sessions = s->next;
		session_free(s);
	}
}

static void free_sandbox(struct manager *m, struct sandbox *sb)
{
	m->slots[sb->slot] = SLOT_FREE;
	if (sb->range_held)
		uidrange_release(m->ranges, sb->base);
	free(sb->tenant);
	free(sb->id);
	free(sb);
}

static void unlink_sandbox(struct manager *m, struct sandbox *sb)
{
	forget_sandbox(m, sb);
	free_sandbox(m, sb);
}

/* The sandbox's own env and labels, and its default session's env. */
static int set_env_labels(struct sandbox *sb, const char *const *env,
                          size_t envc, const char *labels)
{
	if (envc) {
		sb->env = calloc(envc + 1, sizeof(char *));
		if (!sb->env)
			return -ENOMEM;
		for (size_t i = 0; i < envc; i++) {
			if (!(sb->env[i] = strdup(env[i])))
				return -ENOMEM;
			sb->envc++;
			if (session_setenv(sb->sessions, env[i]) < 0)
				return -ENOMEM;
		}
	}
	if (labels && !(sb->labels = strdup(labels)))
		return -ENOMEM;
	return 0;
}

/* An image's config for the sandbox's default session: its Env over the
 * defaults, its WorkingDir as the cwd. */
static int apply_image(struct sandbox *sb, struct image *img)
{
	sb->image = img;
	snprintf(sb->image_id, sizeof(sb->image_id), "%s", img->digest);
	struct session *s = sb->sessions;
	for (size_t i = 0; i < img->envc; i++)
		if (session_setenv(s, img->env[i]) < 0)
			return -ENOMEM;
	if (img->working_dir) {
		char *cwd = strdup(img->working_dir);
		if (!cwd)
			return -ENOMEM;
		free(s->cwd);
		s->cwd = cwd;
	}
	return 0;
}

static void stop_now(struct sandbox *sb);
static void destroy_finish(struct sandbox *sb);

/* The image its files name (a fork's or a restored snapshot's may differ
 * from what it was made with). */
static void refresh_image(struct sandbox *sb)
{
	char id[128];
	if (runtime_files_image(sb->m->rt, sb->name, id, sizeof(id)) < 0 ||
	    !strcmp(id, sb->image_id))
		return;
	snprintf(sb->image_id, sizeof(sb->image_id), "%.71s", id);
	sb->image = *id ? images_find(sb->m->images, id) : NULL;
	if (sb->image && apply_image(sb, sb->image) < 0)
		log_error("sandbox=%s event=image-env out of memory", sb->id);
}

/* The image its files name, read once for a sandbox loaded at start. At
 * load it was not (one directory lookup in the store and a file read per
 * sandbox made a restart with thousands take seconds). The result is what
 * load_row did before: the image's env and cwd in the default session
 * under the sandbox's own env, unless that session came back from the
 * registry (its saved state replaced them then). */
void sandbox_image_resolve(struct sandbox *sb)
{
	struct manager *m = sb->m;
	char id[128];
	if (!sb->image_pending)
		return;
	sb->image_pending = false;
	m->images_pending--;
	if (runtime_files_image(m->rt, sb->name, id, sizeof(id)) < 0 || !*id)
		return;
	struct image *img = images_find(m->images, id);
	snprintf(sb->image_id, sizeof(sb->image_id), "%.71s", id);
	if (!img) {
		log_error("sandbox=%s event=image-missing image=%s: it "
		          "cannot start",
		          sb->id, id);
		return;
	}
	if (sb->sessions->saved) { /* its saved state stands */
		sb->image = img;
		return;
	}
	int r = apply_image(sb, img);
	for (size_t i = 0; r == 0 && i < sb->envc; i++)
		r = session_setenv(sb->sessions, sb->env[i]);
	if (r < 0)
		log_error("sandbox=%s event=image-env out of memory", sb->id);
}

/* Every loaded sandbox's image read (before anything counts them). */
static void resolve_all_images(struct manager *m)
{
	for (size_t b = 0; m->images_pending && b < m->nbuckets; b++)
		for (struct sandbox *sb = m->buckets[b]; sb; sb = sb->hnext)
			sandbox_image_resolve(sb);
}

/* From the housekeeping tick: some of them, then the image GC the start
 * left for when all are read. */
static void resolve_some_images(struct manager *m)
{
	uint64_t t0 = now_mono_ms();
	while (m->images_pending && now_mono_ms() - t0 < 5) {
		for (int k = 0; k < 16 && m->images_pending; k++) {
			for (struct sandbox *sb = m->buckets[m->resolve_bucket];
			     sb; sb = sb->hnext)
				sandbox_image_resolve(sb);
			m->resolve_bucket =
			    (m->resolve_bucket + 1) % m->nbuckets;
		}
	}
	if (!m->images_pending && m->gc_pending) {
		m->gc_pending = false;
		manager_images_gc(m);
		log_info("event=images-gc-after-load every sandbox's image "
		         "is known");
	}
}

unsigned manager_image_refs(struct manager *m, const struct image *img)
{
	unsigned n = 0;
	resolve_all_images(m);
	for (size_t b = 0; b < m->nbuckets; b++)
		for (struct sandbox *sb = m->buckets[b]; sb; sb = sb->hnext)
			if (sb->image == img)
				n++;
	return n;
}

/* by a sandbox, or by a snapshot (restoring it needs the image's layers,
 * even after its name was deleted) */
static bool image_in_use(void *data, const struct image *img)
{
	struct manager *m = data;
	for (struct snapshot *s = m->snaps; s; s = s->next)
		if (!strcmp(s->image_id, img->digest))
			return true;
	return manager_image_refs(m, img) > 0;
}

void manager_images_gc(struct manager *m)
{
	images_gc(m->images, image_in_use, m);
	/* the layers moved to the trash go in the background */
	runtime_remove_files(m->rt, NULL, NULL);
}

static int load_row(const struct registry_row *row, void *data)
{
	struct manager *m = data;
	if (row->slot >= m->nslots || m->slots[row->slot]) {
		log_error("registry: sandbox %s has bad slot %u; skipped",
		          row->id, row->slot);
		return 0;
	}
	struct sandbox *sb = add(m, row->tenant, row->id, row->slot);
	if (!sb)
		return -ENOMEM;
	sb->limits = row->limits;
	sb->disk_bytes = row->disk_bytes;
	sb->created_ms = row->created_ms;
	sb->last_active_ms = row->last_active_ms;
	sb->sleep_after_ms = row->sleep_after_ms;
	sb->keep_alive = row->keep_alive != 0;
	/* its image: on first use (sandbox_image_resolve) */
	sb->image_pending = true;
	m->images_pending++;
	/* Its files are owned by its range: it keeps it. Another daemon may
	 * have taken it while this one was down; then this sandbox cannot
	 * start until that one lets it go (sandbox_ensure_started asks again).
	 */
	int c = uidrange_claim(m->ranges, sb->base);
	sb->range_held = c == 0;
	if (c < 0)
		log_error("sandbox=%s event=uid-range-busy uid=%u: %s", row->id,
		          (unsigned)sb->base,
		          c == -EBUSY
		              ? "in use by another sandboxd on this host"
		              : strerror(-c));
	/* env comes back as "K=V\0K=V\0" */
	const char *e = row->env,
	           *end = row->env ? row->env + row->env_len : NULL;
	size_t n = 0;
	for (const char *p = e; p && p < end; p += strlen(p) + 1)
		n++;
	const char **env = calloc(n + 1, sizeof(char *));
	if (!env)
		return -ENOMEM;
	n = 0;
	for (const char *p = e;
	     p && p < end && memchr(p, '\0', (size_t)(end - p));
	     p += strlen(p) + 1)
		env[n++] = p;
	int r = set_env_labels(sb, env, n, row->labels);
	free(env);
	return r;
}

/* Files of a removed sandbox that are still there (its removal failed,
 * or the daemon died between the two): the slot is kept out of use until
 * they are gone, so no new sandbox ever starts on an old upper layer. */
static void slot_dirty(struct manager *m, uint32_t slot)
{
	if (m->slots[slot] == SLOT_DIRTY)
		return;
	m->slots[slot] = SLOT_DIRTY;
	m->ndirty++;
	m->dirty_backoff_ms = DIRTY_RETRY_MIN_MS;
	m->dirty_next_ms = now_wall_ms() + DIRTY_RETRY_MIN_MS;
}

static bool slot_usable(struct manager *m, uint32_t slot)
{
	char name[16];
	if (m->slots[slot] != SLOT_FREE)
		return false;
	snprintf(name, sizeof(name), "s%u", slot);
	if (!runtime_files_exist(m->rt, name))
		return true;
	log_warn("slot=%u event=leftover-files its files are still there; "
	         "removing them, the slot is not used until they are gone",
	         slot);
	slot_dirty(m, slot);
	return false;
}

/* The uid base the next new sandbox will most likely have: that of the
 * slot sandbox_create would take now (without its checks of leftover
 * files and other daemons' reservations, which only a create may make);
 * 0 when none is free. A hint for the runtime, which makes that sandbox's
 * user namespace ahead. */
static uid_t next_new_base(struct manager *m)
{
	for (uint32_t k = 0; k < m->nslots; k++) {
		uint32_t s = (m->slot_start + k) % m->nslots;
		uid_t first = m->cfg->uid_base + s * USERNS_RANGE;
		if (m->slots[s] == SLOT_FREE && !uidrange_reserved(first))
			return first;
	}
	return 0;
}

/* Try the removals that failed again, less often while they keep
 * failing (from the housekeeping tick). */
static void retry_dirty(struct manager *m)
{
	uint64_t now = now_wall_ms();
	if (!m->ndirty || now < m->dirty_next_ms)
		return;
	for (uint32_t slot = 0; slot < m->nslots && m->ndirty; slot++) {
		char name[16];
		struct sbx_err err = {0};
		if (m->slots[slot] != SLOT_DIRTY)
			continue;
		snprintf(name, sizeof(name), "s%u", slot);
		if (runtime_files_exist(m->rt, name) &&
		    runtime_remove_files(m->rt, name, &err) < 0) {
			log_debug("slot=%u event=remove-retry %s", slot,
			          err.msg);
			continue;
		}
		m->slots[slot] = SLOT_FREE;
		m->ndirty--;
		log_info("slot=%u event=reclaimed its old files are gone",
		         slot);
	}
	m->dirty_backoff_ms = m->dirty_backoff_ms * 2 > DIRTY_RETRY_MAX_MS
	                          ? DIRTY_RETRY_MAX_MS
	                          : m->dirty_backoff_ms * 2;
	m->dirty_next_ms = now + m->dirty_backoff_ms;
}

/* At start: every s<N> in the store that no sandbox owns. */
static void find_leftovers(struct manager *m)
{
	DIR *d = opendir(m->rt->sandboxes_dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char *end;
		if (e->d_name[0] != 's' || e->d_name[1] < '0' ||
		    e->d_name[1] > '9')
			continue;
		unsigned long slot = strtoul(e->d_name + 1, &end, 10);
		if (*end || slot >= m->nslots || m->slots[slot] != SLOT_FREE)
			continue;
		log_warn("slot=%lu event=leftover-files no sandbox owns them; "
		         "removing them",
		         slot);
		slot_dirty(m, (uint32_t)slot);
	}
	if (d)
		closedir(d);
	m->dirty_next_ms = 0; /* at the first tick */
}

/* The tenant's sandboxes (running only, or all). */
static uint32_t tenant_count(struct manager *m, const char *tenant,
                             bool running)
{
	uint32_t n = 0;
	for (size_t b = 0; b < m->nbuckets; b++)
		for (struct sandbox *sb = m->buckets[b]; sb; sb = sb->hnext)
			if ((!running || sandbox_running(sb)) &&
			    !strcmp(sb->tenant, tenant))
				n++;
	return n;
}

int manager_create(struct manager *m, const char *tenant, const char *id,
                   const struct sandbox_opts *opts, struct sandbox **out,
                   struct sbx_err *err)
{
	static const struct sandbox_opts none;
	if (!opts)
		opts = &none;
	if (manager_find(m, tenant, id))
		return sbx_err_set(err, EEXIST, "sandbox %s exists", id);
	uint32_t max_sandboxes = 0, max_running = 0;
	if (m->quota_of)
		m->quota_of(m->quota_data, tenant, &max_sandboxes,
		            &max_running);
	if (max_sandboxes && tenant_count(m, tenant, false) >= max_sandboxes)
		return sbx_err_set(
		    err, EDQUOT,
		    "quota maxSandboxes reached: this tenant may "
		    "have %u sandboxes; delete one first",
		    max_sandboxes);
	/* a usable slot whose range nobody on this host uses, searched from
	 * this state dir's own starting point: a daemon that is down holds
	 * no reservation, and another daemon sharing the base then takes
	 * ranges far from the ones it will want back */
	uint32_t slot = m->nslots;
	for (uint32_t k = 0; k < m->nslots; k++) {
		uint32_t s = (m->slot_start + k) % m->nslots;
		uid_t first = m->cfg->uid_base + s * USERNS_RANGE;
		if (slot_usable(m, s) && !uidrange_reserved(first) &&
		    uidrange_claim(m->ranges, first) == 0) {
			slot = s;
			break;
		}
	}
	if (slot == m->nslots)
		return sbx_err_set(err, ENOSPC,
		                   "no free uid range for a sandbox");
	struct sandbox *sb = add(m, tenant, id, slot);
	if (!sb) {
		uidrange_release(m->ranges,
		                 m->cfg->uid_base + slot * USERNS_RANGE);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	sb->range_held = true;
	sb->limits = opts->limits;
	sb->disk_bytes = opts->disk_bytes;
	sb->sleep_after_ms = opts->sleep_after_ms;
	sb->keep_alive = opts->keep_alive;
	sb->created_ms = sb->last_active_ms = now_wall_ms();
	sb->uses = 1; /* made here: a fleet's checkpoint has it to take */
	struct buf envblob;
	buf_init(&envblob, 0);
	int r = opts->image ? apply_image(sb, opts->image) : 0;
	if (r == 0)
		r = set_env_labels(sb, opts->env, opts->envc, opts->labels);
	for (size_t i = 0; r == 0 && i < opts->envc; i++)
		r = buf_append(&envblob, opts->env[i],
		               strlen(opts->env[i]) + 1);
	if (r < 0) {
		buf_free(&envblob);
		unlink_sandbox(m, sb);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	struct registry_row row = {.tenant = tenant,
	                           .id = id,
	                           .slot = slot,
	                           .created_ms = sb->created_ms,
	                           .last_active_ms = sb->last_active_ms,
	                           .limits = sb->limits,
	                           .disk_bytes = sb->disk_bytes,
	                           .sleep_after_ms = sb->sleep_after_ms,
	                           .keep_alive = sb->keep_alive,
	                           .env = envblob.data,
	                           .env_len = envblob.len,
	                           .labels = opts->labels};
	if (opts->image) {
		/* its files now, with the image's id kept beside them */
		struct runtime_files files = {
		    .group = manager_store_group(m, tenant),
		    .image = opts->image->digest};
		struct cgroup_limits lim;
		uid_t owner;
		sandbox_limits(sb, &lim, &files.disk_bytes);
		r = runtime_files_prepare(m->rt, sb->name, sb->base, &files,
		                          &owner, err);
		if (r < 0) {
			buf_free(&envblob);
			if (runtime_files_exist(m->rt, sb->name))
				runtime_remove_files(m->rt, sb->name, NULL);
			unlink_sandbox(m, sb);
			return r;
		}
	}
	r = registry_insert(m->reg, &row, err);
	buf_free(&envblob);
	if (r == 0 && opts->net)
		r = network_sandbox_set(sb, opts->net, err);
	if (r < 0) {
		registry_delete(m->reg, tenant, id, NULL);
		if (opts->image && runtime_files_exist(m->rt, sb->name))
			runtime_remove_files(m->rt, sb->name, NULL);
		unlink_sandbox(m, sb);
		return r;
	}
	log_info("sandbox=%s event=created slot=%u uid=%u", id, slot,
	         (unsigned)sb->base);
	if (m->fleet)
		fleet_sandbox_created(m->fleet, sb);
	*out = sb;
	return 0;
}

int manager_get(struct manager *m, const char *tenant, const char *id,
                struct sandbox **out, struct sbx_err *err)
{
	*out = manager_find(m, tenant, id);
	if (*out)
		return 0;
	return manager_create(m, tenant, id, NULL, out, err);
}

int sandbox_set_labels(struct sandbox *sb, const char *labels,
                       struct sbx_err *err)
{
	char *copy = labels ? strdup(labels) : NULL;
	if (labels && !copy)
		return sbx_err_set(err, ENOMEM, "out of memory");
	int r =
	    registry_set_labels(sb->m->reg, sb->tenant, sb->id, labels, err);
	if (r < 0) {
		free(copy);
		return r;
	}
	free(sb->labels);
	sb->labels = copy;
	return 0;
}

void sandbox_touch(struct sandbox *sb)
{
	sb->last_active_ms = now_wall_ms();
	sb->uses++;
}

void sandbox_keep_awake(struct sandbox *sb)
{
	sb->last_active_ms = now_wall_ms();
}

bool sandbox_id_valid(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > 63)
		return false;
	for (const char *c = id; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
		      *c == '-'))
			return false;
	return true;
}

int sandbox_disk_usage(struct sandbox *sb, uint64_t *bytes)
{
	return store_usage(sb->m->rt->store, sb->name, bytes);
}

int sandbox_session_new(struct sandbox *sb, const char *id, const char *cwd,
                        const char *const *env, size_t envc,
                        struct session **out)
{
	if (sandbox_session(sb, id))
		return -EEXIST;
	struct session *s = session_new(id, cwd, NULL, 0);
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < sb->envc; i++)
		if (session_setenv(s, sb->env[i]) < 0)
			goto nomem;
	for (size_t i = 0; i < envc; i++)
		if (session_setenv(s, env[i]) < 0)
			goto nomem;
	/* after the default session, which stays first */
	s->next = sb->sessions->next;
	sb->sessions->next = s;
	sandbox_session_save(sb, s);
	*out = s;
	return 0;
nomem:
	session_free(s);
	return -ENOMEM;
}

/* Out of the sandbox and the registry, and freed. */
static void session_unlink(struct sandbox *sb, struct session *s)
{
	struct sbx_err err = {0};
	for (struct session **p = &sb->sessions->next; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			break;
		}
	if (registry_session_delete(sb->m->reg, sb->tenant, sb->id, s->id,
	                            &err) < 0)
		log_warn("sandbox=%s event=session-not-forgotten session=%s %s",
		         sb->id, s->id, err.msg);
	session_free(s);
}

int sandbox_session_delete(struct sandbox *sb, const char *id)
{
	for (struct session *s = sb->sessions->next; s; s = s->next) {
		if (strcmp(s->id, id))
			continue;
		if (s->running || s->queue_head)
			return -EBUSY;
		session_unlink(sb, s);
		return 0;
	}
	return -ENOENT;
}

int sandbox_session_close(struct sandbox *sb, struct session *s,
                          void (*done)(void *ctx), void *ctx)
{
	if (s == sb->sessions)
		return -EINVAL;
	while (s->queue_head)
		exec_cancel(s->queue_head);
	if (s->running)
		exec_cancel(s->running);
	if (!s->running) {
		session_unlink(sb, s);
		return 0;
	}
	s->on_closed = done;
	s->closed_ctx = ctx;
	return 1;
}

void sandbox_session_idle(struct sandbox *sb, struct session *s)
{
	if (!s->on_closed || s->running || s->queue_head)
		return;
	void (*done)(void *) = s->on_closed;
	void *ctx = s->closed_ctx;
	session_unlink(sb, s);
	done(ctx);
}

void sandbox_session_save(struct sandbox *sb, struct session *s)
{
	struct sbx_err err = {0};
	char *state;
	size_t len;
	int r = session_state_encode(s, &state, &len);
	if (r < 0) {
		log_warn("sandbox=%s event=session-not-saved session=%s %s",
		         sb->id, s->id,
		         r == -E2BIG ? "its environment is over 1 MiB"
		                     : "out of memory");
		return;
	}
	uint64_t h = session_state_hash(state, len);
	if (h != s->saved) {
		struct registry_session row = {
		    .tenant = sb->tenant,
		    .id = sb->id,
		    .session = s->id,
		    .state = state,
		    .state_len = len,
		};
		if (registry_session_put(sb->m->reg, &row, &err) < 0)
			log_warn(
			    "sandbox=%s event=session-not-saved session=%s %s",
			    sb->id, s->id, err.msg);
		else
			s->saved = h;
	}
	free(state);
}

/* A session kept in the registry, back into its sandbox's memory. */
static int load_session(const struct registry_session *row, void *data)
{
	struct manager *m = data;
	struct sandbox *sb = find(m, row->tenant, row->id);
	if (!sb)
		return 0; /* a sandbox skipped at load: its sessions with it */
	struct session *s = sandbox_session(sb, row->session), *made = NULL;
	if (!s && !(s = made = session_new(row->session, NULL, NULL, 0)))
		return -ENOMEM;
	int r = session_state_decode(s, row->state, row->state_len);
	if (r == -ENOMEM) {
		session_free(made);
		return r;
	}
	if (r < 0) {
		log_error("registry: session %s of sandbox %s is damaged; "
		          "%s",
		          row->session, row->id,
		          made ? "skipped" : "it starts afresh");
		session_free(made);
		return 0;
	}
	s->saved = session_state_hash(row->state, row->state_len);
	if (made) { /* after the default session, which stays first */
		made->next = sb->sessions->next;
		sb->sessions->next = made;
	}
	return 0;
}

uint64_t manager_store_group(struct manager *m, const char *tenant)
{
	if (!m->rt->store->quotas)
		return 0;
	uint64_t g = store_group_of(tenant);
	for (size_t i = 0; i < m->ngroups; i++)
		if (m->groups[i] == g)
			return g;
	struct sbx_err err = {0};
	if (store_group_ensure(m->rt->store, g, m->cfg->tenant_disk_bytes,
	                       &err) < 0) {
		/* the files are still made, and limited one by one */
		log_warn("event=store-group-failed %s", err.msg);
		return 0;
	}
	uint64_t *v = realloc(m->groups, (m->ngroups + 1) * sizeof(*v));
	if (v) {
		m->groups = v;
		m->groups[m->ngroups++] = g;
	}
	return g;
}

/* A sandbox's network policy, back from the registry. */
static int load_network(const char *tenant, const char *id, const char *policy,
                        void *data)
{
	struct manager *m = data;
	struct sandbox *sb = find(m, tenant, id);
	if (!sb)
		return 0;
	struct net_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	if (net_policy_decode(policy, p) < 0) {
		/* never more network than asked: a damaged one is none */
		log_error("registry: the network policy of sandbox %s is "
		          "damaged; it has none",
		          id);
		p->mode = NET_NONE;
	}
	sb->net_policy = p;
	return 0;
}

void manager_foreach(struct manager *m,
                     void (*fn)(struct sandbox *sb, void *data), void *data)
{
	for (size_t b = 0; b < m->nbuckets; b++)
		for (struct sandbox *sb = m->buckets[b], *next; sb; sb = next) {
			next = sb->hnext;
			fn(sb, data);
		}
}

struct session *sandbox_session(struct sandbox *sb, const char *id)
{
	if (!id)
		return sb->sessions;
	for (struct session *s = sb->sessions; s; s = s->next)
		if (!s->on_closed && !strcmp(s->id, id))
			return s;
	return NULL;
}

static void on_init_msg(struct loop_watch *w, uint32_t events)
{
	struct sandbox *sb = w->data;
	char buf[1024];
	(void)events;
	for (;;) {
		struct proto_hdr h;
		const void *payload;
		int fds[PROTO_MAX_FDS];
		size_t nfds;
		int r = proto_recv(sb->proc.sock, buf, sizeof(buf), &h,
		                   &payload, fds, &nfds);
		if (r == -EAGAIN)
			return;
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]); /* init never sends fds */
		if (r <= 0) {
			/* its end closed: init is gone (crashed, or killed
			 * from outside), and so is everything it ran; or it
			 * can no longer be understood */
			if (r == 0)
				log_warn("sandbox=%s event=init-exited",
				         sb->id);
			else
				log_error("sandbox=%s event=init-unreadable %s",
				          sb->id, strerror(-r));
			sandbox_stop(sb, "the sandbox's init exited");
			return; /* the watch is gone */
		}
		struct proto_status st;
		if (h.len != sizeof(st))
			continue;
		memcpy(&st, payload, sizeof(st));
		st.what[sizeof(st.what) - 1] = '\0';
		switch (h.type) {
		case PROTO_READY:
			sb->state = SB_RUNNING;
			log_info("sandbox=%s event=ready", sb->id);
			break;
		case PROTO_FAILED: {
			char why[300];
			snprintf(why, sizeof(why),
			         "sandbox could not be started: %s", st.what);
			log_error("sandbox=%s event=start-failed %s", sb->id,
			          st.what);
			sandbox_stop(sb, why);
			return; /* the watch is gone */
		}
		case PROTO_SPAWNED:
			exec_on_spawned(sb, h.id, st.pid, st.err, st.what);
			break;
		case PROTO_EXIT:
			exec_on_exit(sb, h.id, st.status, st.err, st.what);
			break;
		}
	}
}

/* A seccomp kill is a death by SIGSYS (init's own status reports say the
 * same for a command's main process; a SIGSYS the sandbox sends itself
 * looks alike, and is logged alike). The uid says whose: each sandbox owns
 * its range of host uids. */
static void on_task_exit(const struct taskstats_exit *x, void *data)
{
	struct manager *m = data;
	if (!WIFSIGNALED(x->status) || WTERMSIG(x->status) != SIGSYS)
		return;
	if (x->tgid > 0 && x->tgid != x->pid)
		return; /* one line per process: its leader's */
	for (size_t b = 0; b < m->nbuckets; b++) {
		for (struct sandbox *sb = m->buckets[b]; sb; sb = sb->hnext) {
			if (sb->state == SB_STOPPED || x->uid < sb->base ||
			    x->uid - sb->base >= USERNS_RANGE)
				continue;
			/* comm is the sandbox's to set (PR_SET_NAME): only
			 * plain characters reach the log */
			char comm[sizeof(x->comm)];
			size_t i = 0;
			for (; i < sizeof(comm) - 1 && x->comm[i]; i++) {
				char c = x->comm[i];
				comm[i] = (c >= 'a' && c <= 'z') ||
				                  (c >= 'A' && c <= 'Z') ||
				                  (c >= '0' && c <= '9') ||
				                  c == '.' || c == '-' ||
				                  c == '_'
				              ? c
				              : '?';
			}
			comm[i] = '\0';
			log_warn("sandbox=%s event=seccomp-kill host_pid=%d "
			         "uid=%u comm=%s signal=SIGSYS",
			         sb->id, (int)x->pid,
			         (unsigned)(x->uid - sb->base), comm);
			return;
		}
	}
}

bool manager_poll_exits(struct manager *m)
{
	if (m->exits_fd < 0)
		return false;
	int r = taskstats_read(m->exits_fd, on_task_exit, m);
	if (r < 0) {
		/* a busy host overran the socket: say so, at most once a
		 * minute */
		uint64_t now = now_mono_ms();
		if (!m->exits_lost_ms || now - m->exits_lost_ms >= 60000) {
			m->exits_lost_ms = now;
			log_warn(
			    "event=exit-reports-lost error=\"%s\" (seccomp "
			    "kills in sandboxes may go unnamed)",
			    strerror(-r));
		}
	}
	return true;
}

static void on_exits(struct loop_watch *w, uint32_t events)
{
	(void)events;
	manager_poll_exits(w->data);
}

static uint64_t min_nz(uint64_t v, uint64_t ceiling)
{
	return ceiling && (!v || v > ceiling) ? ceiling : v;
}

const char *sandbox_id(const struct sandbox *sb)
{
	return sb->id;
}

const char *sandbox_tenant(const struct sandbox *sb)
{
	return sb->tenant;
}

const char *sandbox_labels(const struct sandbox *sb)
{
	return sb->labels;
}

bool sandbox_running(const struct sandbox *sb)
{
	return sb->state == SB_STARTING || sb->state == SB_RUNNING;
}

void sandbox_info(struct sandbox *sb, struct sandbox_info *out)
{
	sandbox_image_resolve(sb);
	*out = (struct sandbox_info){
	    .created_ms = sb->created_ms,
	    .last_active_ms = sb->last_active_ms,
	    .sleep_after_ms = sb->sleep_after_ms ? sb->sleep_after_ms
	                                         : sb->m->cfg->sleep_after_ms,
	    .keep_alive = sb->keep_alive,
	    .running = sandbox_running(sb),
	    .image_id = sb->image_id,
	    .image = sb->image,
	};
}

int sandbox_stats(const struct sandbox *sb, struct cgroup_stats *st)
{
	if (!sb->proc.cg)
		return -ESRCH;
	return cgroup_sandbox_stats(sb->proc.cg, st);
}

const struct config *sandbox_config(const struct sandbox *sb)
{
	return sb->m->cfg;
}

void sandbox_opts_of(const struct sandbox *sb, struct sandbox_opts *o)
{
	*o = (struct sandbox_opts){
	    .limits = sb->limits,
	    .disk_bytes = sb->disk_bytes,
	    .sleep_after_ms = sb->sleep_after_ms,
	    .keep_alive = sb->keep_alive,
	    .env = (const char *const *)sb->env,
	    .envc = sb->envc,
	    .labels = sb->labels,
	};
}

size_t sandbox_env(const struct sandbox *sb, const char *const **env)
{
	*env = (const char *const *)sb->env;
	return sb->envc;
}

struct session *sandbox_session_next(struct sandbox *sb, struct session *prev)
{
	return prev ? prev->next : sb->sessions;
}

const char *sandbox_shell(const struct sandbox *sb)
{
	if (!sb->image_id[0])
		return "/bin/bash";
	return sb->image ? sb->image->shell : NULL;
}

void sandbox_limits(const struct sandbox *sb, struct cgroup_limits *lim,
                    uint64_t *disk_bytes)
{
	const struct config *cfg = sb->m->cfg;
	const struct cgroup_limits *d = &cfg->limits, *c = &cfg->max_limits;
	/* a limit the sandbox was not created with follows the daemon's
	 * current default; one made before the operator lowered a ceiling
	 * runs under the ceiling */
	lim->memory_bytes =
	    min_nz(sb->limits.memory_bytes ?: d->memory_bytes, c->memory_bytes);
	lim->pids = (uint32_t)min_nz(sb->limits.pids ?: d->pids, c->pids);
	lim->cpu_millis = (uint32_t)min_nz(
	    sb->limits.cpu_millis ?: d->cpu_millis, c->cpu_millis);
	*disk_bytes = min_nz(sb->disk_bytes ?: cfg->disk_bytes, cfg->max_disk);
}

/* The least recently used running sandbox that nothing is using (no
 * command, process or file operation, no interpreter cell; not
 * keepAlive), of tenant if given. */
static struct sandbox *lru_idle(struct manager *m, const char *tenant)
{
	struct sandbox *best = NULL;
	for (size_t b = 0; b < m->nbuckets; b++)
		for (struct sandbox *sb = m->buckets[b]; sb; sb = sb->hnext)
			if (sandbox_running(sb) && !sb->keep_alive &&
			    (!sb->busy || interp_only_idle(sb)) &&
			    (!tenant || !strcmp(sb->tenant, tenant)) &&
			    (!best ||
			     sb->last_active_ms < best->last_active_ms))
				best = sb;
	return best;
}

int manager_admit(struct sandbox *sb, struct sbx_err *err)
{
	struct manager *m = sb->m;
	uint32_t max_sandboxes = 0, max_running = 0;
	if (sandbox_running(sb))
		return 0;
	if (m->quota_of)
		m->quota_of(m->quota_data, sb->tenant, &max_sandboxes,
		            &max_running);
	while (max_running &&
	       tenant_count(m, sb->tenant, true) >= max_running) {
		struct sandbox *v = lru_idle(m, sb->tenant);
		if (!v)
			return sbx_err_set(
			    err, EDQUOT,
			    "quota maxRunning reached: this tenant "
			    "may run %u sandboxes at once and none "
			    "of them is idle",
			    max_running);
		log_info("sandbox=%s event=making-room for=%s quota=maxRunning",
		         v->id, sb->id);
		sandbox_stop(v,
		             "stopped to make room (the tenant's maxRunning)");
	}
	while (m->nrunning >= m->cfg->max_sandboxes) {
		struct sandbox *v = lru_idle(m, NULL);
		if (!v)
			return sbx_err_set(
			    err, EDQUOT,
			    "quota --max-sandboxes reached: this "
			    "daemon runs %u sandboxes at once and "
			    "none of them is idle",
			    m->cfg->max_sandboxes);
		log_info(
		    "sandbox=%s event=making-room for=%s quota=max-sandboxes",
		    v->id, sb->id);
		sandbox_stop(v, "stopped to make room (--max-sandboxes)");
	}
	return 0;
}

int sandbox_ensure_started(struct sandbox *sb, struct sbx_err *err)
{
	struct manager *m = sb->m;
	/* what cannot wait for a stop to end (exec's commands do) */
	stop_now(sb);
	if (sb->state != SB_STOPPED)
		return 0;
	if (!sb->range_held) {
		int c = uidrange_claim(m->ranges, sb->base);
		if (c < 0)
			return sbx_err_set(
			    err, -c,
			    "its host uids %u..%u are in use by another "
			    "sandboxd on this host (same --uid-base, "
			    "started while this one was down): stop it",
			    (unsigned)sb->base,
			    (unsigned)(sb->base + USERNS_RANGE - 1));
		sb->range_held = true;
	}
	if (snapshot_files_busy(sb))
		return sbx_err_set(
		    err, EBUSY,
		    "sandbox %s: its files are being restored or "
		    "made from a snapshot; try again when that "
		    "request has answered",
		    sb->id);
	struct cgroup_limits lim;
	struct runtime_files files = {.group =
	                                  manager_store_group(m, sb->tenant)};
	sandbox_limits(sb, &lim, &files.disk_bytes);
	sandbox_image_resolve(sb);
	refresh_image(sb);
	if (sb->image_id[0] && !sb->image)
		return sbx_err_set(err, ENOENT,
		                   "sandbox %s: its image %s is no longer in "
		                   "the store",
		                   sb->id, sb->image_id);
	if (sb->image) {
		files.layers = (const char *const *)sb->image->layers;
		files.nlayers = sb->image->nlayers;
	}
	int r = manager_admit(sb, err);
	if (r < 0)
		return r;
	runtime_expect_base(m->rt, next_new_base(m));
	r = runtime_start(m->rt, sb->name, sb->base, &lim, &files, &sb->proc,
	                  err);
	if (r < 0) {
		log_error("sandbox=%s event=start-failed %s", sb->id, err->msg);
		return r;
	}
	/* the next start's cgroups, while init builds the sandbox on another
	 * CPU (a 0 ms timer runs once this batch of events is done) */
	loop_timer_start(m->loop, &m->ahead, 0);
	sb->sock_w = (struct loop_watch){
	    .fd = sb->proc.sock, .cb = on_init_msg, .data = sb};
	loop_add(m->loop, &sb->sock_w, EPOLLIN);
	sb->state = SB_STARTING;
	m->nrunning++;
	/* a start is activity: the first one may have waited for the /usr
	 * mask (runtime.c usr_mask_ready) longer than a short sleep-after;
	 * no use of it, though: nothing changed for a checkpoint to take */
	sandbox_keep_awake(sb);
	log_info("sandbox=%s event=started pid=%d", sb->id, sb->proc.init_pid);
	if ((r = network_sandbox_start(sb, err)) < 0) {
		/* never running with less isolation than asked */
		log_error("sandbox=%s event=start-failed %s", sb->id, err->msg);
		sandbox_stop(sb, err->msg);
		return r;
	}
	return 0;
}

struct sandbox_waiter {
	void (*fn)(void *ctx);
	void *ctx;
	struct sandbox_waiter *next;
};

/* Its init is reaped and its cgroups removed: it is stopped. What waited
 * for that runs: the waiters first (they want it stopped), then the
 * commands sent while it stopped, which start it afresh. */
static void stop_finish(struct sandbox *sb)
{
	struct manager *m = sb->m;
	sb->state = SB_STOPPED;
	if (!sb->destroyed)
		registry_touch(m->reg, sb->tenant, sb->id, sb->last_active_ms,
		               NULL);
	log_info("sandbox=%s event=stopped reason=\"%s\"", sb->id,
	         sb->stop_why ? sb->stop_why : "");
	free(sb->stop_why);
	sb->stop_why = NULL;
	struct sandbox_waiter *w = sb->stop_waiters;
	sb->stop_waiters = NULL;
	while (w) {
		struct sandbox_waiter *next = w->next;
		w->fn(w->ctx);
		free(w);
		w = next;
	}
	if (sb->destroyed)
		destroy_finish(sb);
	else if (m->closing)
		exec_fail_all(sb, EXEC_STOPPED, "daemon shutting down");
	else if (sb->state == SB_STOPPED)
		exec_stop_ended(sb);
}

/* init's pidfd is readable: init has exited, its namespace is gone */
static void on_init_gone(struct loop_watch *w, uint32_t events)
{
	struct sandbox *sb = w->data;
	(void)events;
	loop_del(sb->m->loop, &sb->stop_w); /* before its fd closes */
	if (!runtime_reap_nowait(&sb->proc)) {
		loop_add(sb->m->loop, &sb->stop_w, EPOLLIN);
		return;
	}
	stop_finish(sb);
}

/* A stopping sandbox's stop ends now: waits for its namespace to go. */
static void stop_now(struct sandbox *sb)
{
	if (sb->state != SB_STOPPING)
		return;
	loop_del(sb->m->loop, &sb->stop_w);
	runtime_reap(&sb->proc);
	stop_finish(sb);
}

void sandbox_stop(struct sandbox *sb, const char *why)
{
	struct manager *m = sb->m;
	if (!sandbox_running(sb))
		return;
	/* frozen processes could never die, nor init's exit end */
	snapshot_sandbox_stopping(sb);
	loop_del(m->loop, &sb->sock_w);
	network_sandbox_stop(sb);
	/* init's death takes the whole pid namespace with it */
	runtime_kill(&sb->proc);
	sb->state = SB_STOPPING;
	m->nrunning--;
	sb->stop_why = strdup(why);
	sb->stop_w = (struct loop_watch){
	    .fd = sb->proc.pidfd, .cb = on_init_gone, .data = sb};
	bool watched =
	    sb->proc.pidfd >= 0 && loop_add(m->loop, &sb->stop_w, EPOLLIN) == 0;
	/* what runs there ends now: its processes are killed */
	exec_fail_all(sb, EXEC_STOPPED, why);
	if (!watched)
		stop_now(sb); /* no pidfd to watch: wait here */
}

void sandbox_when_stopped(struct sandbox *sb, void (*fn)(void *ctx), void *ctx)
{
	struct sandbox_waiter *w;
	if (sb->state == SB_STOPPED || !(w = malloc(sizeof(*w)))) {
		stop_now(sb); /* out of memory: wait here */
		fn(ctx);
		return;
	}
	if (sandbox_running(sb))
		log_warn("sandbox=%s event=when-stopped-of-running", sb->id);
	*w = (struct sandbox_waiter){.fn = fn, .ctx = ctx};
	struct sandbox_waiter **p = &sb->stop_waiters;
	while (*p)
		p = &(*p)->next;
	*p = w;
}

void sandbox_stop_wait(struct sandbox *sb, const char *why)
{
	sandbox_stop(sb, why);
	stop_now(sb);
}

/* Stop every running sandbox at once (daemon shutdown). Every init is
 * signalled first; then each is reaped in turn. The kernel tears the pid
 * namespaces down side by side (an init's exit kills and waits for
 * everything in its namespace and drops its mounts) instead of one after
 * the other, and the registry takes all the touches in one
 * transaction. */
static void stop_all(struct manager *m, const char *why)
{
	uint64_t t0 = now_mono_ms();
	size_t n = 0;
	for (size_t b = 0; b < m->nbuckets; b++)
		for (struct sandbox *sb = m->buckets[b]; sb; sb = sb->hnext) {
			n += sb->state != SB_STOPPED;
			sandbox_stop(sb, why);
		}
	uint64_t t_killed = now_mono_ms();
	bool batch = n && m->reg && registry_begin(m->reg) == 0;
	/* every init gone before the first cgroup goes, so that the log
	 * tells the kernel's teardown of the namespaces (exited_ms) from the
	 * cgroups' removal: the two are most of a shutdown's time, and
	 * neither is the daemon's own work (bench/ANALYSIS.md) */
	for (size_t b = 0; b < m->nbuckets; b++)
		for (struct sandbox *sb = m->buckets[b]; sb; sb = sb->hnext)
			if (sb->state == SB_STOPPING)
				runtime_wait_exit(&sb->proc);
	uint64_t t_exited = now_mono_ms();
	for (size_t b = 0; b < m->nbuckets; b++)
		for (struct sandbox *sb = m->buckets[b]; sb; sb = sb->hnext)
			stop_now(sb);
	while (m->dying) /* destroyed, still stopping */
		stop_now(m->dying);
	if (batch)
		registry_commit(m->reg);
	if (n)
		log_info(
		    "event=all-stopped sandboxes=%zu ms=%llu killed_ms=%llu "
		    "exited_ms=%llu",
		    n, (unsigned long long)(now_mono_ms() - t0),
		    (unsigned long long)(t_killed - t0),
		    (unsigned long long)(t_exited - t0));
}

/* A destroyed sandbox nothing finds any more, whose stop has ended: its
 * files go, then the rest of it. A removal that fails does not fail the
 * destroy: the sandbox is gone for its client either way, and its files
 * are out of reach, in a slot no sandbox gets until they are removed
 * (retried). */
static void remove_and_free(struct sandbox *sb)
{
	struct manager *m = sb->m;
	struct sbx_err rerr = {0};
	uint32_t slot = sb->slot;
	int r = runtime_files_exist(m->rt, sb->name)
	            ? runtime_remove_files(m->rt, sb->name, &rerr)
	            : 0; /* never started: nothing on disk */
	if (r < 0)
		log_warn("sandbox=%s event=remove-failed slot=%u %s; retried "
		         "until it succeeds, the slot unused until then",
		         sb->id, slot, rerr.msg);
	free_sandbox(m, sb);
	if (r < 0)
		slot_dirty(m, slot);
}

/* A destroyed sandbox's stop has ended (stop_finish). */
static void destroy_finish(struct sandbox *sb)
{
	for (struct sandbox **p = &sb->m->dying; *p; p = &(*p)->hnext)
		if (*p == sb) {
			*p = sb->hnext;
			break;
		}
	remove_and_free(sb);
}

int sandbox_destroy(struct sandbox *sb, struct sbx_err *err)
{
	struct manager *m = sb->m;
	snapshot_sandbox_gone(sb);
	backups_sandbox_gone(m->backups, sb);
	if (m->fleet)
		fleet_sandbox_gone(m->fleet, sb);
	sandbox_stop(sb, "sandbox destroyed");
	/* commands sent while it stopped: they never start */
	exec_fail_all(sb, EXEC_STOPPED, "sandbox destroyed");
	int r2 = registry_delete(m->reg, sb->tenant, sb->id, err);
	log_info("sandbox=%s event=destroyed", sb->id);
	if (sb->state == SB_STOPPING) {
		/* its ID is free now; its slot, uid range and files are its
		 * own until its stop has ended (stop_finish) */
		sb->destroyed = true;
		forget_sandbox(m, sb);
		sb->hnext = m->dying;
		m->dying = sb;
		return r2;
	}
	forget_sandbox(m, sb);
	remove_and_free(sb);
	return r2;
}

static void make_ahead(struct loop_timer *t)
{
	struct manager *m = t->data;
	if (!m->closing)
		runtime_make_ahead(m->rt);
}

static void cron(struct loop_timer *t)
{
	struct manager *m = t->data;
	uint64_t now = now_wall_ms();
	for (size_t b = 0; b < m->nbuckets; b++) {
		for (struct sandbox *sb = m->buckets[b], *next; sb; sb = next) {
			next = sb->hnext;
			if (!sandbox_running(sb))
				continue;
			uint64_t idle_ms = sb->sleep_after_ms
			                       ? sb->sleep_after_ms
			                       : m->cfg->sleep_after_ms;
			/* idle interpreter workers keep nobody awake */
			if (sb->busy ==
			        (sb->busy ? interp_idle_workers(sb) : 0) &&
			    !sb->keep_alive &&
			    now - sb->last_active_ms >= idle_ms) {
				/* a fleet's node checkpoints it, then stops it
				 */
				if (!m->fleet ||
				    !fleet_sandbox_idle(m->fleet, sb))
					sandbox_stop(sb, "idle");
				continue;
			}
			if (sb->proc.cg)
				cgroup_sandbox_reclaim(sb->proc.cg);
		}
	}
	runtime_collect(m->rt);
	retry_dirty(m);
	resolve_some_images(m);
	uint64_t tick = m->cfg->sleep_after_ms < 2000 ? 100 : 1000;
	if (m->images_pending) /* reading them: 5 ms of every 50 */
		tick = 50;
	loop_timer_start(m->loop, &m->cron, tick);
}

/* The store's size when it is first made: by default 90% of what is free
 * where the state dir is, so sandboxes can never fill the host's disk. */
static uint64_t store_size(const struct config *cfg)
{
	struct statvfs sv;
	if (cfg->store_bytes != UINT64_MAX)
		return cfg->store_bytes;
	if (statvfs(cfg->state_dir, &sv) < 0)
		return 0;
	uint64_t free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
	return free_bytes / 10 * 9;
}

/* The uid base this state dir's sandboxes have: their files on disk are
 * owned by it, so it is recorded in <state>/uid-base and kept. A state dir
 * from before the record is read from its files (the owner of a sandbox's
 * upper layer is the base of its slot's range). A --uid-base that differs
 * from the recorded one is refused while sandboxes have files. */
static int resolve_uid_base(struct manager *m, struct sbx_err *err)
{
	struct config *cfg = m->cfg;
	char path[4200], buf[32];
	uint64_t have = 0;
	bool files = false;
	snprintf(path, sizeof(path), "%s/uid-base", m->rt->state_dir);
	ssize_t n = -1;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n > 0) {
		buf[n] = '\0';
		have = strtoull(buf, NULL, 10);
		if (have < 65536 || have > 0xffff0000ull - USERNS_RANGE)
			have = 0; /* not ours: read the files instead */
	}
	/* with a record, the files matter only when --uid-base differs from
	 * it (refused if any sandbox has files): a restart with thousands of
	 * sandboxes reads none of their dirs; otherwise the first one with
	 * files tells */
	bool look = !have || (have != cfg->uid_base && cfg->uid_base_given);
	DIR *d = look ? opendir(m->rt->sandboxes_dir) : NULL;
	for (struct dirent *e; d && (e = readdir(d));) {
		char *end;
		unsigned long slot =
		    e->d_name[0] == 's' ? strtoul(e->d_name + 1, &end, 10) : 0;
		struct stat st;
		char upper[4300];
		if (e->d_name[0] != 's' || !e->d_name[1] || *end ||
		    slot >= MAX_SLOTS)
			continue;
		snprintf(upper, sizeof(upper), "%s/%s/root/upper",
		         m->rt->sandboxes_dir, e->d_name);
		if (lstat(upper, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		files = true;
		if (!have && st.st_uid >= slot * USERNS_RANGE + 65536)
			have = st.st_uid - slot * USERNS_RANGE;
		if (have)
			break;
	}
	if (d)
		closedir(d);
	if (have && have != cfg->uid_base) {
		if (cfg->uid_base_given && files)
			return sbx_err_set(
			    err, EINVAL,
			    "--uid-base %u: the sandboxes of %s are owned by "
			    "uid base %llu; drop --uid-base or pass that",
			    cfg->uid_base, m->rt->state_dir,
			    (unsigned long long)have);
		if (!cfg->uid_base_given || files)
			cfg->uid_base = (uint32_t)have;
	}
	if (have != cfg->uid_base) {
		char tmp[4300];
		int l = snprintf(buf, sizeof(buf), "%u\n", cfg->uid_base);
		snprintf(tmp, sizeof(tmp), "%s.new", path);
		fd = open(tmp,
		          O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		          0600);
		if (fd < 0 || write(fd, buf, (size_t)l) != l || fsync(fd) < 0 ||
		    rename(tmp, path) < 0) {
			int e = errno;
			if (fd >= 0)
				close(fd);
			return sbx_err_sys(err, e, "write %s", path);
		}
		close(fd);
	}
	return 0;
}

int manager_new(struct config *cfg, struct loop *loop, struct manager **out,
                struct sbx_err *err)
{
	struct manager *m = calloc(1, sizeof(*m));
	int r;
	if (!m)
		return sbx_err_set(err, ENOMEM, "out of memory");
	m->cfg = cfg;
	m->loop = loop;
	m->exits_fd = -1;
	m->nbuckets = NBUCKETS;
	/* the daemon's own files in every sandbox: the session hook and the
	 * interpreter's workers */
	struct image_file files[8] = {session_image_file};
	size_t nfiles = 1 + interp_image_files(files + 1, 7);
	if ((r = runtime_new(cfg->state_dir, store_size(cfg), files, nfiles,
	                     &m->rt, err)) ||
	    (r = resolve_uid_base(m, err)) ||
	    (r = uidrange_open(UIDRANGE_LOCK_PATH, &m->ranges, err)))
		goto fail;
	m->rt->max_ptys = cfg->max_ptys;
	/* ranges up to 0xFFFEFFFF: the last one would hold (uid_t)-1 and -2 */
	m->nslots = (uint32_t)((0xffff0000ull - cfg->uid_base) / USERNS_RANGE);
	if (m->nslots > MAX_SLOTS)
		m->nslots = MAX_SLOTS;
	/* where this state dir's search for a free range starts: among the
	 * ranges below 2^31 (some tools take uids above as negative) */
	uint32_t h = 2166136261u;
	for (const char *c = m->rt->state_dir; *c; c++)
		h = (h ^ (unsigned char)*c) * 16777619u;
	uint32_t low = m->nslots < 4095 ? m->nslots : 4095;
	m->slot_start = low ? h % low : 0;
	m->buckets = calloc(NBUCKETS, sizeof(*m->buckets));
	m->slots = calloc(m->nslots ? m->nslots : 1, 1);
	if (!m->buckets || !m->slots) {
		r = sbx_err_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	struct machine mc;
	config_machine(&mc, m->rt->sandboxes_dir);
	if ((r = config_resolve(cfg, &mc, err)) < 0)
		goto fail;
	log_info("event=ceilings max-memory=%lluM max-pids=%u max-cpus=%.2f "
	         "max-disk=%lluM max-sandboxes=%u total-memory=%lluM "
	         "total-pids=%llu",
	         (unsigned long long)(cfg->max_limits.memory_bytes >> 20),
	         cfg->max_limits.pids, cfg->max_limits.cpu_millis / 1000.0,
	         (unsigned long long)(cfg->max_disk >> 20), cfg->max_sandboxes,
	         (unsigned long long)(cfg->total_memory >> 20),
	         (unsigned long long)cfg->total_pids);
	if ((r = runtime_set_totals(m->rt, cfg->total_memory, cfg->total_pids,
	                            err)))
		goto fail;
	if (uidrange_in_container_range(cfg->uid_base))
		log_warn("event=uid-base base=%u: inside systemd-nspawn's "
		         "container uid range (524288..1879048191)",
		         cfg->uid_base);
	char path[4096];
	snprintf(path, sizeof(path), "%s/registry.db", m->rt->state_dir);
	uint64_t t0 = now_mono_ms();
	if ((r = images_open(loop, m->rt->state_dir, m->rt->trash_dir,
	                     &m->images, err)) ||
	    (r = registry_open(path, &m->reg, err)) ||
	    (r = registry_load(m->reg, load_row, m, err)) ||
	    (r = registry_load_sessions(m->reg, load_session, m, err)) ||
	    (r = snapshots_load(m, err)) || (r = backups_open(m, err)) ||
	    (r = network_new(m, err)) ||
	    (r = registry_load_networks(m->reg, load_network, m, err)))
		goto fail;
	find_leftovers(m);
	/* what an import killed with a daemon left, images nothing uses:
	 * once every loaded sandbox's image is known (cron reads them) */
	m->gc_pending = true;
	if (!m->images_pending)
		resolve_some_images(m);
	/* none is started: each starts on its first request */
	log_info("event=loaded sandboxes=%zu ms=%llu", m->count,
	         (unsigned long long)(now_mono_ms() - t0));
	m->cron.cb = cron;
	m->cron.data = m;
	loop_timer_start(loop, &m->cron, 1000);
	m->ahead.cb = make_ahead;
	m->ahead.data = m;
	struct sbx_err terr = {0};
	m->exits_fd = taskstats_open(&terr);
	if (m->exits_fd < 0) {
		log_warn("event=no-exit-reports %s (a seccomp kill is named "
		         "only when it ends a command's main process)",
		         terr.msg);
	} else {
		m->exits_w = (struct loop_watch){
		    .fd = m->exits_fd, .cb = on_exits, .data = m};
		loop_add(loop, &m->exits_w, EPOLLIN);
	}
	*out = m;
	return 0;
fail:
	manager_free(m);
	return r;
}

void manager_free(struct manager *m)
{
	if (!m)
		return;
	m->closing = true;
	loop_timer_stop(m->loop, &m->cron);
	loop_timer_stop(m->loop, &m->ahead);
	/* first: a fork in flight destroys the sandbox it was making */
	snapshots_free(m);
	backups_closing(m->backups);
	if (m->exits_fd >= 0) {
		loop_del(m->loop, &m->exits_w);
		close(m->exits_fd);
	}
	if (m->buckets)
		stop_all(m, "daemon shutting down");
	for (size_t b = 0; m->buckets && b < m->nbuckets; b++) {
		while (m->buckets[b]) {
			struct sandbox *sb = m->buckets[b];
			sandbox_stop_wait(sb, "daemon shutting down");
			/* uidrange_free below lets every range go at once
			 * (one by one, each unlock splits the daemon's lock
			 * list: quadratic in the number of sandboxes) */
			sb->range_held = false;
			unlink_sandbox(m, sb);
		}
	}
	backups_free(m->backups);
	network_free(m);
	images_close(m->images);
	registry_close(m->reg);
	runtime_free(m->rt);
	free(m->groups);
	uidrange_free(m->ranges);
	free(m->buckets);
	free(m->slots);
	free(m);
}
