#include "core/registry.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

struct registry {
	sqlite3 *db;
	sqlite3_stmt *insert, *del, *touch;
	sqlite3_stmt *sess_put, *sess_del, *sess_del_all;
	sqlite3_stmt *snap_put, *snap_del;
};

static const char schema[] = "PRAGMA journal_mode=WAL;"
                             "PRAGMA synchronous=NORMAL;"
                             "CREATE TABLE IF NOT EXISTS sandboxes ("
                             "  tenant TEXT NOT NULL,"
                             "  id TEXT NOT NULL,"
                             "  slot INTEGER NOT NULL UNIQUE,"
                             "  created_ms INTEGER NOT NULL,"
                             "  last_active_ms INTEGER NOT NULL,"
                             "  memory_bytes INTEGER NOT NULL,"
                             "  pids INTEGER NOT NULL,"
                             "  cpu_millis INTEGER NOT NULL,"
                             "  sleep_after_ms INTEGER NOT NULL DEFAULT 0,"
                             "  keep_alive INTEGER NOT NULL DEFAULT 0,"
                             "  env BLOB,"
                             "  labels TEXT,"
                             "  disk_bytes INTEGER NOT NULL DEFAULT 0,"
                             "  PRIMARY KEY (tenant, id));"
                             "CREATE TABLE IF NOT EXISTS sessions ("
                             "  tenant TEXT NOT NULL,"
                             "  id TEXT NOT NULL,"
                             "  session TEXT NOT NULL,"
                             "  state BLOB NOT NULL,"
                             "  PRIMARY KEY (tenant, id, session));"
                             "CREATE TABLE IF NOT EXISTS snapshots ("
                             "  id TEXT PRIMARY KEY,"
                             "  tenant TEXT NOT NULL,"
                             "  sandbox TEXT NOT NULL,"
                             "  name TEXT,"
                             "  created_ms INTEGER NOT NULL,"
                             "  size_bytes INTEGER NOT NULL,"
                             "  copied INTEGER NOT NULL);"
                             "CREATE TABLE IF NOT EXISTS networks ("
                             "  tenant TEXT NOT NULL,"
                             "  id TEXT NOT NULL,"
                             "  policy TEXT NOT NULL,"
                             "  PRIMARY KEY (tenant, id));";

/* The room assistant's history (core/assistant.c): its messages in order,
 * the newest REGISTRY_MESSAGES_KEPT of each room. */
static const char messages_schema[] =
    "CREATE TABLE IF NOT EXISTS checkpoints ("
    "  tenant TEXT NOT NULL,"
    "  id TEXT NOT NULL,"
    "  gen INTEGER NOT NULL,"
    "  backup TEXT NOT NULL,"
    "  PRIMARY KEY (tenant, id));"
    "CREATE TABLE IF NOT EXISTS room_messages ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  tenant TEXT NOT NULL,"
    "  room TEXT NOT NULL,"
    "  role TEXT NOT NULL,"
    "  user_id TEXT NOT NULL,"
    "  text TEXT NOT NULL,"
    "  ts INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS room_messages_room "
    "  ON room_messages (tenant, room, seq);";

/* SQLite's failures carry its own codes, not an errno a caller could act
 * on: they are EIO (an internal error to every face), with its message. */
static int db_err(struct registry *r, struct sbx_err *err, const char *what)
{
	return sbx_err_set(err, EIO, "registry: %s: %s", what,
	                   sqlite3_errmsg(r->db));
}

/* What sandboxes put in their environment (a session's exports, a token)
 * rests in the registry, and the state dir is 0711: the database and its
 * WAL and SHM files (which SQLite makes with the database's mode) must be
 * the daemon's alone, also those of a registry made before this. */
static int private_files(const char *path, struct sbx_err *err)
{
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_err_sys(err, errno, "registry %s", path);
	int r = fchmod(fd, 0600);
	close(fd);
	if (r < 0)
		return sbx_err_sys(err, errno, "chmod %s", path);
	static const char *const side[] = {"-wal", "-shm"};
	for (size_t i = 0; i < sizeof(side) / sizeof(side[0]); i++) {
		char *p;
		if (asprintf(&p, "%s%s", path, side[i]) < 0)
			return sbx_err_set(err, ENOMEM, "out of memory");
		r = chmod(p, 0600) < 0 && errno != ENOENT ? -errno : 0;
		free(p);
		if (r < 0)
			return sbx_err_sys(err, -r, "chmod %s%s", path,
			                   side[i]);
	}
	return 0;
}

int registry_open(const char *path, struct registry **out, struct sbx_err *err)
{
	struct registry *r = calloc(1, sizeof(*r));
	int rc;
	if (!r)
		return sbx_err_set(err, ENOMEM, "out of memory");
	if ((rc = private_files(path, err)) < 0)
		goto fail;
	if (sqlite3_open_v2(path, &r->db,
	                    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	                        SQLITE_OPEN_NOMUTEX,
	                    NULL) != SQLITE_OK) {
		rc = db_err(r, err, path);
		goto fail;
	}
	sqlite3_busy_timeout(r->db, 5000);
	if (sqlite3_exec(r->db, schema, NULL, NULL, NULL) != SQLITE_OK) {
		rc = db_err(r, err, "schema");
		goto fail;
	}
	/* registries made before these columns existed */
	static const char *const added[] = {
	    "ALTER TABLE sandboxes ADD COLUMN sleep_after_ms INTEGER NOT NULL "
	    "DEFAULT 0",
	    "ALTER TABLE sandboxes ADD COLUMN keep_alive INTEGER NOT NULL "
	    "DEFAULT 0",
	    "ALTER TABLE sandboxes ADD COLUMN env BLOB",
	    "ALTER TABLE sandboxes ADD COLUMN labels TEXT",
	    "ALTER TABLE sandboxes ADD COLUMN disk_bytes INTEGER NOT NULL "
	    "DEFAULT 0",
	};
	for (size_t i = 0; i < sizeof(added) / sizeof(added[0]); i++)
		sqlite3_exec(r->db, added[i], NULL, NULL, NULL); /* may exist */
	if (sqlite3_exec(r->db, messages_schema, NULL, NULL, NULL) !=
	    SQLITE_OK) {
		rc = db_err(r, err, "schema");
		goto fail;
	}
	if (sqlite3_prepare_v2(
	        r->db,
	        "INSERT INTO sandboxes VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", -1,
	        &r->insert, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(r->db,
	                       "DELETE FROM sandboxes WHERE tenant=? AND id=?",
	                       -1, &r->del, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(r->db,
	                       "UPDATE sandboxes SET last_active_ms=? "
	                       "WHERE tenant=? AND id=?",
	                       -1, &r->touch, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(
	        r->db, "INSERT OR REPLACE INTO sessions VALUES (?,?,?,?)", -1,
	        &r->sess_put, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(r->db,
	                       "DELETE FROM sessions WHERE tenant=? AND id=? "
	                       "AND session=?",
	                       -1, &r->sess_del, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(r->db,
	                       "DELETE FROM sessions WHERE tenant=? AND id=?",
	                       -1, &r->sess_del_all, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(r->db,
	                       "INSERT INTO snapshots VALUES (?,?,?,?,?,?,?)",
	                       -1, &r->snap_put, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(r->db, "DELETE FROM snapshots WHERE id=?", -1,
	                       &r->snap_del, NULL) != SQLITE_OK) {
		rc = db_err(r, err, "prepare");
		goto fail;
	}
	*out = r;
	return 0;
fail:
	registry_close(r);
	return rc;
}

void registry_close(struct registry *r)
{
	if (!r)
		return;
	sqlite3_finalize(r->insert);
	sqlite3_finalize(r->del);
	sqlite3_finalize(r->touch);
	sqlite3_finalize(r->sess_put);
	sqlite3_finalize(r->sess_del);
	sqlite3_finalize(r->sess_del_all);
	sqlite3_finalize(r->snap_put);
	sqlite3_finalize(r->snap_del);
	sqlite3_close(r->db);
	free(r);
}

int registry_load(struct registry *r,
                  int (*cb)(const struct registry_row *row, void *data),
                  void *data, struct sbx_err *err)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(
	        r->db,
	        "SELECT tenant, id, slot, created_ms, "
	        "last_active_ms, memory_bytes, pids, cpu_millis, "
	        "sleep_after_ms, keep_alive, env, labels, disk_bytes "
	        "FROM sandboxes",
	        -1, &st, NULL) != SQLITE_OK)
		return db_err(r, err, "load");
	int rc = 0, s;
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		struct registry_row row = {
		    .tenant = (const char *)sqlite3_column_text(st, 0),
		    .id = (const char *)sqlite3_column_text(st, 1),
		    .slot = (uint32_t)sqlite3_column_int64(st, 2),
		    .created_ms = (uint64_t)sqlite3_column_int64(st, 3),
		    .last_active_ms = (uint64_t)sqlite3_column_int64(st, 4),
		    .limits =
		        {
		            .memory_bytes =
		                (uint64_t)sqlite3_column_int64(st, 5),
		            .pids = (uint32_t)sqlite3_column_int64(st, 6),
		            .cpu_millis = (uint32_t)sqlite3_column_int64(st, 7),
		        },
		    .sleep_after_ms = (uint64_t)sqlite3_column_int64(st, 8),
		    .keep_alive = sqlite3_column_int(st, 9),
		    .env = sqlite3_column_blob(st, 10),
		    .env_len = (size_t)sqlite3_column_bytes(st, 10),
		    .labels = (const char *)sqlite3_column_text(st, 11),
		    .disk_bytes = (uint64_t)sqlite3_column_int64(st, 12),
		};
		if (!row.tenant || !row.id)
			continue;
		if ((rc = cb(&row, data)) < 0)
			break;
	}
	if (s != SQLITE_DONE && s != SQLITE_ROW && rc == 0)
		rc = db_err(r, err, "load");
	sqlite3_finalize(st);
	return rc;
}

static int step_done(struct registry *r, sqlite3_stmt *st, struct sbx_err *err,
                     const char *what)
{
	int s = sqlite3_step(st);
	int rc = s == SQLITE_DONE ? 0 : db_err(r, err, what);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc;
}

int registry_insert(struct registry *r, const struct registry_row *row,
                    struct sbx_err *err)
{
	sqlite3_stmt *st = r->insert;
	sqlite3_bind_text(st, 1, row->tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, row->id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, row->slot);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)row->created_ms);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)row->last_active_ms);
	sqlite3_bind_int64(st, 6, (sqlite3_int64)row->limits.memory_bytes);
	sqlite3_bind_int64(st, 7, row->limits.pids);
	sqlite3_bind_int64(st, 8, row->limits.cpu_millis);
	sqlite3_bind_int64(st, 9, (sqlite3_int64)row->sleep_after_ms);
	sqlite3_bind_int(st, 10, row->keep_alive);
	if (row->env_len)
		sqlite3_bind_blob(st, 11, row->env, (int)row->env_len,
		                  SQLITE_STATIC);
	if (row->labels)
		sqlite3_bind_text(st, 12, row->labels, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 13, (sqlite3_int64)row->disk_bytes);
	return step_done(r, st, err, "insert");
}

int registry_delete(struct registry *r, const char *tenant, const char *id,
                    struct sbx_err *err)
{
	/* one transaction: a sandbox made again under the name never finds
	 * sessions of the one before */
	if (sqlite3_exec(r->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
		return db_err(r, err, "delete");
	sqlite3_bind_text(r->sess_del_all, 1, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(r->sess_del_all, 2, id, -1, SQLITE_STATIC);
	int rc = step_done(r, r->sess_del_all, err, "delete");
	if (rc == 0) {
		sqlite3_bind_text(r->del, 1, tenant, -1, SQLITE_STATIC);
		sqlite3_bind_text(r->del, 2, id, -1, SQLITE_STATIC);
		rc = step_done(r, r->del, err, "delete");
	}
	if (rc == 0)
		rc = registry_network_put(r, tenant, id, NULL, err);
	if (rc == 0)
		rc = registry_checkpoint_put(r, tenant, id, 0, NULL, err);
	if (sqlite3_exec(r->db, rc ? "ROLLBACK" : "COMMIT", NULL, NULL, NULL) !=
	        SQLITE_OK &&
	    rc == 0) {
		rc = db_err(r, err, "delete");
		sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
	}
	return rc;
}

int registry_begin(struct registry *r)
{
	return sqlite3_exec(r->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK
	           ? 0
	           : -EIO;
}

void registry_commit(struct registry *r)
{
	sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL);
}

int registry_touch(struct registry *r, const char *tenant, const char *id,
                   uint64_t last_active_ms, struct sbx_err *err)
{
	sqlite3_bind_int64(r->touch, 1, (sqlite3_int64)last_active_ms);
	sqlite3_bind_text(r->touch, 2, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(r->touch, 3, id, -1, SQLITE_STATIC);
	return step_done(r, r->touch, err, "touch");
}

int registry_checkpoint_put(struct registry *r, const char *tenant,
                            const char *id, uint64_t gen, const char *backup,
                            struct sbx_err *err)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(r->db,
	                       backup ? "INSERT OR REPLACE INTO checkpoints "
	                                "VALUES (?,?,?,?)"
	                              : "DELETE FROM checkpoints WHERE "
	                                "tenant=? AND id=?",
	                       -1, &st, NULL) != SQLITE_OK)
		return db_err(r, err, "checkpoint");
	sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
	if (backup) {
		sqlite3_bind_int64(st, 3, (sqlite3_int64)gen);
		sqlite3_bind_text(st, 4, backup, -1, SQLITE_STATIC);
	}
	int rc = step_done(r, st, err, "checkpoint");
	sqlite3_finalize(st);
	return rc;
}

int registry_checkpoint_get(struct registry *r, const char *tenant,
                            const char *id, uint64_t *gen, char *backup,
                            size_t cap)
{
	sqlite3_stmt *st;
	*gen = 0;
	if (cap)
		backup[0] = '\0';
	if (sqlite3_prepare_v2(r->db,
	                       "SELECT gen, backup FROM checkpoints WHERE "
	                       "tenant=? AND id=?",
	                       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*gen = (uint64_t)sqlite3_column_int64(st, 0);
		const char *b = (const char *)sqlite3_column_text(st, 1);
		if (cap)
			snprintf(backup, cap, "%s", b ? b : "");
	}
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -EIO;
}

int registry_set_labels(struct registry *r, const char *tenant, const char *id,
                        const char *labels, struct sbx_err *err)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(r->db,
	                       "UPDATE sandboxes SET labels=? WHERE tenant=? "
	                       "AND id=?",
	                       -1, &st, NULL) != SQLITE_OK)
		return db_err(r, err, "labels");
	sqlite3_bind_text(st, 1, labels, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, id, -1, SQLITE_STATIC);
	int rc = step_done(r, st, err, "labels");
	sqlite3_finalize(st);
	return rc;
}

int registry_session_put(struct registry *r, const struct registry_session *row,
                         struct sbx_err *err)
{
	sqlite3_stmt *st = r->sess_put;
	sqlite3_bind_text(st, 1, row->tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, row->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, row->session, -1, SQLITE_STATIC);
	sqlite3_bind_blob(st, 4, row->state, (int)row->state_len,
	                  SQLITE_STATIC);
	return step_done(r, st, err, "session");
}

int registry_session_delete(struct registry *r, const char *tenant,
                            const char *id, const char *session,
                            struct sbx_err *err)
{
	sqlite3_bind_text(r->sess_del, 1, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(r->sess_del, 2, id, -1, SQLITE_STATIC);
	sqlite3_bind_text(r->sess_del, 3, session, -1, SQLITE_STATIC);
	return step_done(r, r->sess_del, err, "session delete");
}

int registry_load_sessions(struct registry *r,
                           int (*cb)(const struct registry_session *row,
                                     void *data),
                           void *data, struct sbx_err *err)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(
	        r->db, "SELECT tenant, id, session, state FROM sessions", -1,
	        &st, NULL) != SQLITE_OK)
		return db_err(r, err, "load sessions");
	int rc = 0, s;
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		struct registry_session row = {
		    .tenant = (const char *)sqlite3_column_text(st, 0),
		    .id = (const char *)sqlite3_column_text(st, 1),
		    .session = (const char *)sqlite3_column_text(st, 2),
		    .state = sqlite3_column_blob(st, 3),
		    .state_len = (size_t)sqlite3_column_bytes(st, 3),
		};
		if (!row.tenant || !row.id || !row.session)
			continue;
		if ((rc = cb(&row, data)) < 0)
			break;
	}
	if (s != SQLITE_DONE && s != SQLITE_ROW && rc == 0)
		rc = db_err(r, err, "load sessions");
	sqlite3_finalize(st);
	return rc;
}

int registry_snapshot_put(struct registry *r,
                          const struct registry_snapshot *row,
                          struct sbx_err *err)
{
	sqlite3_stmt *st = r->snap_put;
	sqlite3_bind_text(st, 1, row->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, row->tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, row->sandbox, -1, SQLITE_STATIC);
	if (row->name)
		sqlite3_bind_text(st, 4, row->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)row->created_ms);
	sqlite3_bind_int64(st, 6, (sqlite3_int64)row->size_bytes);
	sqlite3_bind_int(st, 7, row->copied);
	return step_done(r, st, err, "snapshot");
}

int registry_snapshot_delete(struct registry *r, const char *id,
                             struct sbx_err *err)
{
	sqlite3_bind_text(r->snap_del, 1, id, -1, SQLITE_STATIC);
	return step_done(r, r->snap_del, err, "snapshot delete");
}

int registry_load_snapshots(struct registry *r,
                            int (*cb)(const struct registry_snapshot *row,
                                      void *data),
                            void *data, struct sbx_err *err)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(r->db,
	                       "SELECT id, tenant, sandbox, name, created_ms, "
	                       "size_bytes, copied FROM snapshots "
	                       "ORDER BY created_ms",
	                       -1, &st, NULL) != SQLITE_OK)
		return db_err(r, err, "load snapshots");
	int rc = 0, s;
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		struct registry_snapshot row = {
		    .id = (const char *)sqlite3_column_text(st, 0),
		    .tenant = (const char *)sqlite3_column_text(st, 1),
		    .sandbox = (const char *)sqlite3_column_text(st, 2),
		    .name = (const char *)sqlite3_column_text(st, 3),
		    .created_ms = (uint64_t)sqlite3_column_int64(st, 4),
		    .size_bytes = (uint64_t)sqlite3_column_int64(st, 5),
		    .copied = sqlite3_column_int(st, 6),
		};
		if (!row.id || !row.tenant || !row.sandbox)
			continue;
		if ((rc = cb(&row, data)) < 0)
			break;
	}
	if (s != SQLITE_DONE && s != SQLITE_ROW && rc == 0)
		rc = db_err(r, err, "load snapshots");
	sqlite3_finalize(st);
	return rc;
}

int registry_network_put(struct registry *r, const char *tenant, const char *id,
                         const char *policy, struct sbx_err *err)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(r->db,
	                       policy ? "INSERT OR REPLACE INTO networks "
	                                "VALUES (?,?,?)"
	                              : "DELETE FROM networks WHERE tenant=? "
	                                "AND id=?",
	                       -1, &st, NULL) != SQLITE_OK)
		return db_err(r, err, "network");
	sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
	if (policy)
		sqlite3_bind_text(st, 3, policy, -1, SQLITE_STATIC);
	int rc =
	    sqlite3_step(st) == SQLITE_DONE ? 0 : db_err(r, err, "network");
	sqlite3_finalize(st);
	return rc;
}

int registry_load_networks(struct registry *r,
                           int (*cb)(const char *tenant, const char *id,
                                     const char *policy, void *data),
                           void *data, struct sbx_err *err)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(r->db, "SELECT tenant, id, policy FROM networks",
	                       -1, &st, NULL) != SQLITE_OK)
		return db_err(r, err, "load networks");
	int rc = 0, s;
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(st, 0),
		           *i = (const char *)sqlite3_column_text(st, 1),
		           *p = (const char *)sqlite3_column_text(st, 2);
		if (t && i && p && (rc = cb(t, i, p, data)) < 0)
			break;
	}
	if (s != SQLITE_DONE && s != SQLITE_ROW && rc == 0)
		rc = db_err(r, err, "load networks");
	sqlite3_finalize(st);
	return rc;
}

/* ---- the room assistant's history
 * -------------------------------------------- */

static int exec_sql(struct registry *r, const char *sql, struct sbx_err *err,
                    const char *what)
{
	return sqlite3_exec(r->db, sql, NULL, NULL, NULL) == SQLITE_OK
	           ? 0
	           : db_err(r, err, what);
}

int registry_messages_add(struct registry *r, const char *tenant,
                          const char *room, const struct registry_message *msgs,
                          size_t n, struct sbx_err *err)
{
	sqlite3_stmt *ins = NULL, *prune = NULL;
	int rc = exec_sql(r, "BEGIN", err, "history");
	if (rc < 0)
		return rc;
	if (sqlite3_prepare_v2(r->db,
	                       "INSERT INTO room_messages (tenant, room, role, "
	                       "user_id, text, ts) VALUES (?,?,?,?,?,?)",
	                       -1, &ins, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(r->db,
	                       "DELETE FROM room_messages WHERE tenant=?1 AND "
	                       "room=?2 AND seq NOT IN (SELECT seq FROM "
	                       "room_messages WHERE tenant=?1 AND room=?2 "
	                       "ORDER BY seq DESC LIMIT ?3)",
	                       -1, &prune, NULL) != SQLITE_OK)
		rc = db_err(r, err, "history");
	for (size_t i = 0; rc == 0 && i < n; i++) {
		sqlite3_bind_text(ins, 1, tenant, -1, SQLITE_STATIC);
		sqlite3_bind_text(ins, 2, room, -1, SQLITE_STATIC);
		sqlite3_bind_text(ins, 3, msgs[i].role, -1, SQLITE_STATIC);
		sqlite3_bind_text(ins, 4, msgs[i].user_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(ins, 5, msgs[i].text, -1, SQLITE_STATIC);
		sqlite3_bind_int64(ins, 6, (sqlite3_int64)msgs[i].ts);
		rc = step_done(r, ins, err, "history");
	}
	if (rc == 0) {
		sqlite3_bind_text(prune, 1, tenant, -1, SQLITE_STATIC);
		sqlite3_bind_text(prune, 2, room, -1, SQLITE_STATIC);
		sqlite3_bind_int(prune, 3, REGISTRY_MESSAGES_KEPT);
		rc = step_done(r, prune, err, "history");
	}
	sqlite3_finalize(ins);
	sqlite3_finalize(prune);
	if (rc == 0 && (rc = exec_sql(r, "COMMIT", err, "history")) == 0)
		return 0;
	sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

int registry_messages_load(struct registry *r, const char *tenant,
                           const char *room, unsigned last,
                           int (*cb)(const struct registry_message *m,
                                     void *data),
                           void *data, struct sbx_err *err)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(r->db,
	                       "SELECT role, user_id, text, ts FROM (SELECT * "
	                       "FROM room_messages WHERE tenant=? AND room=? "
	                       "ORDER BY seq DESC LIMIT ?) ORDER BY seq",
	                       -1, &st, NULL) != SQLITE_OK)
		return db_err(r, err, "history");
	sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, room, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, last);
	int rc = 0, s;
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		struct registry_message m = {
		    .role = (const char *)sqlite3_column_text(st, 0),
		    .user_id = (const char *)sqlite3_column_text(st, 1),
		    .text = (const char *)sqlite3_column_text(st, 2),
		    .ts = (uint64_t)sqlite3_column_int64(st, 3)};
		if (!m.role || !m.user_id || !m.text)
			continue;
		if ((rc = cb(&m, data)) < 0)
			break;
	}
	if (s != SQLITE_DONE && s != SQLITE_ROW && rc == 0)
		rc = db_err(r, err, "history");
	sqlite3_finalize(st);
	return rc;
}

int registry_messages_clear(struct registry *r, const char *tenant,
                            const char *room, struct sbx_err *err)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(
	        r->db, "DELETE FROM room_messages WHERE tenant=? AND room=?",
	        -1, &st, NULL) != SQLITE_OK)
		return db_err(r, err, "history");
	sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, room, -1, SQLITE_STATIC);
	int rc = step_done(r, st, err, "history");
	sqlite3_finalize(st);
	return rc;
}
