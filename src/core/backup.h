/* Backups: a directory of a sandbox archived (tar + zstd) into a backup
 * store (bstore.h: a local directory, or S3-compatible object storage),
 * outliving the sandbox and the daemon, restored later into the same or
 * another sandbox of the tenant, on this daemon or another one pointed at
 * the same store.
 *
 * Theory of operation. The archive is made and unpacked inside the
 * sandbox's confinement, by builtins (runtime/builtin_archive.c) that the
 * daemon runs like any command; the daemon only moves the bytes between
 * their pipes and the store, streaming, with back-pressure both ways, and
 * computes the archive's sha256 and size on the way. Nothing is ever held
 * whole in memory or written twice.
 *
 * Visibility: an archive is written under a name the store keeps
 * invisible until committed (bstore.h), and a backup exists once its
 * metadata object (<tenant key>/<id>.json) does, written last. A cancelled
 * request, a failed write, a store gone down or a daemon killed half way
 * leave no listed backup. A restore unpacks into a new directory beside the
 * target and swaps it in with one rename only after the archive's sha256
 * matched; the target is untouched otherwise.
 *
 * Expiry: a backup made with a TTL answers ENOENT-like EKEYEXPIRED once
 * past it (the API says 410) and is deleted then, and by a periodic reap. */
#ifndef SBX_BACKUP_H
#define SBX_BACKUP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/bstore.h"
#include "core/manager.h"
#include "lib/util.h"

struct backup_info {
	char id[ID_RANDOM_MAX]; /* "bkp_<hex>" */
	char *tenant, *sandbox, *dir;
	char **excludes;
	size_t nexcludes;
	char sha256[65];
	uint64_t size_bytes, created_ms;
	uint64_t expires_ms; /* 0: never */
	bool delta;          /* a checkpoint's delta (backup_checkpoint) */
	/* backup_checkpoint's: entries archived plus paths deleted (0 for a
	 * delta: nothing changed); not kept in the metadata */
	uint64_t changes;
};

struct backups;

/* The engine over the store the daemon's flags name (m->backups). */
int backups_open(struct manager *m, struct sbx_err *err);
/* The engine over store (taken). */
int backups_new(struct manager *m, struct bstore *store, struct backups **out,
                struct sbx_err *err);
/* The daemon is stopping: start no new work (its sandboxes stop next). */
void backups_closing(struct backups *b);
/* sb is being destroyed: its operations fail with their jobs. */
void backups_sandbox_gone(struct backups *b, struct sandbox *sb);
/* After every sandbox stopped: what is left fails, the store goes. */
void backups_free(struct backups *b);
const char *backups_store_name(const struct backups *b);

struct backup_op;
struct backup_cbs {
	/* bytes of total so far (total 0: not known yet); may be NULL */
	void (*progress)(void *ctx, uint64_t bytes, uint64_t total);
	/* exactly once, also after backup_op_cancel; info NULL on failure,
	 * err->code an errno: ENOENT no such backup, EKEYEXPIRED expired,
	 * ECANCELED cancelled, EBADMSG the archive is damaged (its checksum,
	 * or unreadable), ENOTDIR the directory is not there, ESRCH the
	 * sandbox stopped; from the store EKEYREJECTED (credentials refused)
	 * or EREMOTEIO (unreachable, failing); else what the sandbox's side
	 * said (EACCES, EDQUOT, ...). */
	void (*done)(void *ctx, const struct backup_info *info,
	             const struct sbx_err *err);
};

/* Archive dir of sb (absolute, inside the sandbox) leaving out excludes;
 * ttl_s 0: kept until deleted. */
int backup_create(struct backups *b, struct sandbox *sb, const char *dir,
                  const char *const *excludes, size_t nexcludes, uint64_t ttl_s,
                  const struct backup_cbs *cbs, void *ctx,
                  struct backup_op **out);
/* A fleet's checkpoint (core/fleet.c): backup_create of dir that also
 * writes the manifest of what it archived to manifest (a path inside the
 * sandbox, outside dir); with base (the manifest an earlier checkpoint
 * wrote) only what changed since: the files added or changed, whole (the
 * unit is the file), and the list of the paths gone. info->delta says
 * which it was (a base that cannot be read makes a full one). */
int backup_checkpoint(struct backups *b, struct sandbox *sb, const char *dir,
                      const char *base, const char *manifest,
                      const struct backup_cbs *cbs, void *ctx,
                      struct backup_op **out);
/* Replace dir of sb with a chain of checkpoints: ids[0] a full one, then
 * its deltas in order, all unpacked (and checked) beside dir before it is
 * swapped in (a chain with a link missing or damaged changes nothing and
 * fails); then dir's manifest is written to manifest (NULL: none). */
int backup_restore_chain(struct backups *b, struct sandbox *sb,
                         const char *const *ids, size_t n, const char *dir,
                         const char *manifest, const struct backup_cbs *cbs,
                         void *ctx, struct backup_op **out);
/* Replace dir (NULL: the backup's own) of sb with backup id's content;
 * sb's tenant must be the backup's. */
int backup_restore(struct backups *b, struct sandbox *sb, const char *id,
                   const char *dir, const struct backup_cbs *cbs, void *ctx,
                   struct backup_op **out);
/* The client is gone: stop; done still follows (ECANCELED unless it had
 * finished), and nothing of a cancelled backup stays visible. */
void backup_op_cancel(struct backup_op *op);

/* The tenant's backups (expired ones are left out, and reaped). */
void backup_list(struct backups *b, const char *tenant,
                 void (*done)(void *ctx, struct backup_info *const *v, size_t n,
                              const struct sbx_err *err),
                 void *ctx);
/* One backup; EKEYEXPIRED when expired (and then reaped). */
void backup_get(struct backups *b, const char *tenant, const char *id,
                void (*done)(void *ctx, const struct backup_info *info,
                             const struct sbx_err *err),
                void *ctx);
void backup_delete(struct backups *b, const char *tenant, const char *id,
                   void (*done)(void *ctx, const struct sbx_err *err),
                   void *ctx);

/* Stream backup id's archive: head once (its info), then data (return 1
 * to pause until backup_read_resume), then done. */
struct backup_read;
struct backup_read_cbs {
	void (*head)(void *ctx, const struct backup_info *info);
	int (*data)(void *ctx, const char *p, size_t n);
	void (*done)(void *ctx, const struct sbx_err *err);
};
void backup_read(struct backups *b, const char *tenant, const char *id,
                 const struct backup_read_cbs *cbs, void *ctx,
                 struct backup_read **out);
void backup_read_resume(struct backup_read *r);
/* No callback after this. */
void backup_read_cancel(struct backup_read *r);

/* A backup's info as JSON text, and back (backup_info_parse: 0, or
 * -EINVAL). Exposed for the unit tests. */
char *backup_info_encode(const struct backup_info *info);
int backup_info_parse(const char *text, size_t len, struct backup_info *out);
void backup_info_clear(struct backup_info *info);
/* "<tenant key>/": where a tenant's objects are (hex of its name). */
void backup_tenant_key(const char *tenant, char *buf, size_t cap);

#endif
