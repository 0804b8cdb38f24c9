/* SPDX-License-Identifier: MIT */
/* notes-db.c: the notes, users and revoked sessions in SQLite, and the session key's file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "notes.h"

#define SCHEMA_VERSION 1

/*
 * The schema. Ids of users and notes come from AUTOINCREMENT, so neither is ever reused, even
 * after the highest is deleted. A note's `size` is its title and body bytes, summed for the
 * per-user bound. The admin row's hash is NULL: admin's is M0_NOTES_ADMIN_HASH.
 */
static const char schema_sql[] = "CREATE TABLE users ("
                                 " id INTEGER PRIMARY KEY AUTOINCREMENT,"
                                 " name TEXT NOT NULL UNIQUE,"
                                 " hash TEXT,"
                                 " generation INTEGER NOT NULL DEFAULT 0,"
                                 " created INTEGER NOT NULL);"
                                 "CREATE TABLE notes ("
                                 " id INTEGER PRIMARY KEY AUTOINCREMENT,"
                                 " owner INTEGER NOT NULL REFERENCES users(id),"
                                 " created INTEGER NOT NULL,"
                                 " updated INTEGER NOT NULL,"
                                 " size INTEGER NOT NULL,"
                                 " title TEXT NOT NULL,"
                                 " body TEXT NOT NULL);"
                                 "CREATE INDEX notes_by_owner ON notes(owner, id);"
                                 "CREATE TABLE revoked ("
                                 " owner INTEGER NOT NULL REFERENCES users(id),"
                                 " nonce TEXT NOT NULL,"
                                 " expiry INTEGER NOT NULL,"
                                 " PRIMARY KEY (owner, nonce)) WITHOUT ROWID;"
                                 "CREATE TABLE imports ("
                                 " file TEXT PRIMARY KEY,"
                                 " digest TEXT NOT NULL,"
                                 " notes INTEGER NOT NULL,"
                                 " at INTEGER NOT NULL);"
                                 "PRAGMA user_version = 1;";

enum {
        Q_BEGIN,
        Q_COMMIT,
        Q_ROLLBACK,
        Q_USER_FIND,
        Q_USER_ADD,
        Q_GENERATION,
        Q_IS_REVOKED,
        Q_REVOKED_PURGE,
        Q_REVOKED_COUNT,
        Q_REVOKE,
        Q_REVOKED_CLEAR,
        Q_BUMP,
        Q_LIST,
        Q_GET,
        Q_USAGE,
        Q_CREATE,
        Q_OLD,
        Q_REPLACE,
        Q_DELETE,
        Q_COUNT,
};

static const char *const query_sql[Q_COUNT] = {
        [Q_BEGIN] = "BEGIN IMMEDIATE",
        [Q_COMMIT] = "COMMIT",
        [Q_ROLLBACK] = "ROLLBACK",
        [Q_USER_FIND] = "SELECT id, hash FROM users WHERE name = ?1",
        [Q_USER_ADD] = "INSERT INTO users(name, hash, generation, created) VALUES (?1, ?2, 0, ?3)",
        [Q_GENERATION] = "SELECT generation FROM users WHERE id = ?1",
        [Q_IS_REVOKED] = "SELECT 1 FROM revoked WHERE owner = ?1 AND nonce = ?2",
        [Q_REVOKED_PURGE] = "DELETE FROM revoked WHERE owner = ?1 AND expiry <= ?2",
        [Q_REVOKED_COUNT] = "SELECT count(*) FROM revoked WHERE owner = ?1",
        [Q_REVOKE] = "INSERT OR IGNORE INTO revoked(owner, nonce, expiry) VALUES (?1, ?2, ?3)",
        [Q_REVOKED_CLEAR] = "DELETE FROM revoked WHERE owner = ?1",
        [Q_BUMP] = "UPDATE users SET generation = generation + 1 WHERE id = ?1",
        [Q_LIST] = "SELECT id, title, created FROM notes WHERE owner = ?1 ORDER BY id",
        [Q_GET] =
                "SELECT id, title, body, created, updated FROM notes WHERE id = ?1 AND owner = ?2",
        [Q_USAGE] = "SELECT count(*), coalesce(sum(size), 0) FROM notes WHERE owner = ?1",
        [Q_CREATE] = "INSERT INTO notes(owner, created, updated, size, title, body)"
                     " VALUES (?1, ?2, ?2, ?3, ?4, ?5) RETURNING id",
        [Q_OLD] = "SELECT size, created FROM notes WHERE id = ?1 AND owner = ?2",
        [Q_REPLACE] = "UPDATE notes SET title = ?3, body = ?4, size = ?5, updated = ?6"
                      " WHERE id = ?1 AND owner = ?2",
        [Q_DELETE] = "DELETE FROM notes WHERE id = ?1 AND owner = ?2",
};

struct notes_db {
        sqlite3 *h;
        sqlite3_stmt *q[Q_COUNT];
        char err[256]; /* SQLite's message for the last failure, kept past the rollback */
};

/* A SQLite result as -errno: what the caller can tell apart, the rest an I/O failure. */
static int db_errno(int rc)
{
        switch (rc & 0xff) {
        case SQLITE_BUSY:
        case SQLITE_LOCKED: return -EBUSY;
        case SQLITE_FULL: return -ENOSPC;
        case SQLITE_NOMEM: return -ENOMEM;
        case SQLITE_READONLY: return -EROFS;
        default: return -EIO;
        }
}

const char *notes_db_error(const notes_db *db)
{
        return db->err;
}

/* A statement of this connection failed with `rc`: its message kept, as -errno. */
static int db_fail(notes_db *db, int rc)
{
        snprintf(db->err, sizeof(db->err), "%s", sqlite3_errmsg(db->h));
        return db_errno(rc);
}

struct sqlite3 *notes_db_handle(notes_db *db)
{
        return db->h;
}

/* The statement `q`, reset and unbound: ready for its parameters. */
static sqlite3_stmt *stmt(notes_db *db, int q)
{
        sqlite3_reset(db->q[q]);
        sqlite3_clear_bindings(db->q[q]);
        return db->q[q];
}

/* Run a statement that returns no row; it is reset whatever happened. */
static int run(notes_db *db, sqlite3_stmt *s)
{
        int rc = sqlite3_step(s);
        int e = rc == SQLITE_DONE ? 0 : db_fail(db, rc);
        sqlite3_reset(s);
        return e;
}

/* A write waits for no read of this connection: a pending row would hold its snapshot. */
static int tx_begin(notes_db *db)
{
        notes_db_release(db);
        return run(db, stmt(db, Q_BEGIN));
}

/* Whatever failed inside a transaction undoes the whole of it. */
static int tx_abort(notes_db *db, int e)
{
        if (!sqlite3_get_autocommit(db->h))
                (void)run(db, stmt(db, Q_ROLLBACK));
        return e;
}

static int tx_commit(notes_db *db)
{
        int e = run(db, stmt(db, Q_COMMIT));
        return e < 0 ? tx_abort(db, e) : 0;
}

/*
 * Create the database file when there is none: 0600, so that SQLite's -wal and -shm files,
 * which take its mode, are the owner's alone whatever the umask; and, when root makes it for a
 * directory someone else owns (`notes --add-user` run by root for a DynamicUser= service),
 * owned as the directory is, as SQLite then makes its -wal and -shm files too.
 */
static int db_file_create(const char *dir, const char *path, char *err, size_t err_len)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
                if (errno == EEXIST)
                        return 0;
                int e = -errno;
                notes_errf(err, err_len, "cannot create %s: %s", path, strerror(-e));
                return e;
        }
        struct stat d;
        int e = 0;
        if (geteuid() == 0 && stat(dir, &d) == 0 && d.st_uid != 0 &&
            fchown(fd, d.st_uid, d.st_gid) < 0) {
                e = -errno;
                notes_errf(err, err_len, "cannot give %s to the owner of %s: %s", path, dir,
                           strerror(-e));
        }
        close(fd);
        return e;
}

int notes_db_exec(notes_db *db, const char *sql, char *err, size_t err_len)
{
        char *msg = NULL;
        int rc = sqlite3_exec(db->h, sql, NULL, NULL, &msg);
        if (rc != SQLITE_OK)
                notes_errf(err, err_len, "%s", msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return rc == SQLITE_OK ? 0 : db_errno(rc);
}

static int pragma_int(notes_db *db, const char *sql, int64_t *ret)
{
        sqlite3_stmt *s;
        int rc = sqlite3_prepare_v2(db->h, sql, -1, &s, NULL);
        if (rc != SQLITE_OK)
                return db_errno(rc);
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW)
                *ret = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
        return rc == SQLITE_ROW ? 0 : db_errno(rc);
}

/*
 * The schema, made in one transaction when the file is new (two starts racing: the second waits
 * on the first's write lock, then finds version 1). A version this code does not know is
 * refused rather than guessed at.
 */
static int db_schema(notes_db *db, const char *path, char *err, size_t err_len)
{
        char why[200] = "";
        int64_t version = 0;
        int e = notes_db_exec(db, "BEGIN IMMEDIATE", why, sizeof(why));
        if (e == 0)
                e = pragma_int(db, "PRAGMA user_version", &version);
        if (e == 0 && version == 0) {
                e = notes_db_exec(db, schema_sql, why, sizeof(why));
                if (e == 0) {
                        char admin[160];
                        snprintf(admin, sizeof(admin),
                                 "INSERT INTO users(id, name, hash, generation, created) "
                                 "VALUES (%d, '%s', NULL, 0, CAST(strftime('%%s', 'now') AS "
                                 "INTEGER))",
                                 NOTES_ADMIN_UID, NOTES_ADMIN);
                        e = notes_db_exec(db, admin, why, sizeof(why));
                }
        } else if (e == 0 && version != SCHEMA_VERSION) {
                notes_errf(err, err_len, "%s has schema version %lld; this notes reads version %d",
                           path, (long long)version, SCHEMA_VERSION);
                (void)notes_db_exec(db, "ROLLBACK", why, sizeof(why));
                return -EINVAL;
        }
        if (e == 0)
                e = notes_db_exec(db, "COMMIT", why, sizeof(why));
        if (e < 0) {
                notes_errf(err, err_len, "cannot set up %s: %s", path,
                           why[0] ? why : sqlite3_errmsg(db->h));
                if (!sqlite3_get_autocommit(db->h))
                        (void)notes_db_exec(db, "ROLLBACK", why, sizeof(why));
        }
        return e;
}

int notes_db_open(const char *dir, long busy_ms, notes_db **ret, char *err, size_t err_len)
{
        char path[4096];
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, NOTES_DB) >= sizeof(path)) {
                notes_errf(err, err_len, "%s/%s is longer than PATH_MAX", dir, NOTES_DB);
                return -ENAMETOOLONG;
        }
        notes_db *db = calloc(1, sizeof(*db));
        if (!db)
                return -ENOMEM;
        int e = db_file_create(dir, path, err, err_len);
        if (e < 0)
                goto fail;
        /* One thread's connection (NOMUTEX); never through a symlink planted in its place. */
        int rc = sqlite3_open_v2(path, &db->h,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
                                 NULL);
        if (rc != SQLITE_OK) {
                notes_errf(err, err_len, "cannot open %s: %s", path,
                           db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc));
                e = db_errno(rc);
                goto fail;
        }
        sqlite3_extended_result_codes(db->h, 1);
        sqlite3_busy_timeout(db->h, (int)busy_ms);
        /*
         * WAL: readers never wait on the writer. synchronous=FULL: the WAL is fsync'd at every
         * commit, so an acknowledged write survives a power cut, not only kill -9 (D50).
         * secure_delete: a deleted note's bytes are overwritten in the file, not left in a free
         * page for whoever reads it later.
         */
        char why[200] = "";
        int64_t wal = 0;
        e = notes_db_exec(
                db,
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;"
                " PRAGMA secure_delete = ON; PRAGMA trusted_schema = OFF;",
                why, sizeof(why));
        if (e == 0)
                e = pragma_int(db, "SELECT journal_mode = 'wal' FROM pragma_journal_mode", &wal);
        if (e == 0 && !wal)
                e = -EIO;
        if (e < 0) {
                notes_errf(err, err_len, "cannot put %s in WAL mode: %s", path,
                           why[0] ? why : sqlite3_errmsg(db->h));
                goto fail;
        }
        e = db_schema(db, path, err, err_len);
        if (e < 0)
                goto fail;
        for (int i = 0; i < Q_COUNT; i++) {
                rc = sqlite3_prepare_v3(db->h, query_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                                        &db->q[i], NULL);
                if (rc != SQLITE_OK) {
                        notes_errf(err, err_len, "%s: %s", path, sqlite3_errmsg(db->h));
                        e = db_errno(rc);
                        goto fail;
                }
        }
        *ret = db;
        return 0;
fail:
        notes_db_close(db);
        return e;
}

void notes_db_close(notes_db *db)
{
        if (!db)
                return;
        for (int i = 0; i < Q_COUNT; i++)
                sqlite3_finalize(db->q[i]);
        /* The last connection to close checkpoints the WAL into the file and removes it. */
        sqlite3_close_v2(db->h);
        free(db);
}

/* ---- users and sessions ---- */

int notes_db_user_find(notes_db *db, const char *name, int64_t *ret_uid,
                       char ret_hash[NOTES_HASH_MAX])
{
        sqlite3_stmt *s = stmt(db, Q_USER_FIND);
        sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        int e = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : db_fail(db, rc);
        if (e == 0) {
                const char *h = (const char *)sqlite3_column_text(s, 1);
                size_t n = (size_t)sqlite3_column_bytes(s, 1);
                if (!h || n >= NOTES_HASH_MAX) {
                        e = -ENOENT; /* the admin row, or a hash no login could match */
                } else {
                        memcpy(ret_hash, h, n + 1);
                        *ret_uid = sqlite3_column_int64(s, 0);
                }
        }
        sqlite3_reset(s);
        return e;
}

int notes_db_user_add(notes_db *db, const char *name, const char *hash, int64_t now)
{
        sqlite3_stmt *s = stmt(db, Q_USER_ADD);
        sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, hash, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 3, now);
        int rc = sqlite3_step(s);
        int e = rc == SQLITE_DONE ? 0 : rc == SQLITE_CONSTRAINT_UNIQUE ? -EEXIST : db_fail(db, rc);
        sqlite3_reset(s);
        return e;
}

int notes_db_generation(notes_db *db, int64_t uid, uint64_t *ret)
{
        sqlite3_stmt *s = stmt(db, Q_GENERATION);
        sqlite3_bind_int64(s, 1, uid);
        int rc = sqlite3_step(s);
        int e = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : db_fail(db, rc);
        if (rc == SQLITE_ROW)
                *ret = (uint64_t)sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
        return e;
}

int notes_db_is_revoked(notes_db *db, int64_t uid, const char *nonce)
{
        sqlite3_stmt *s = stmt(db, Q_IS_REVOKED);
        sqlite3_bind_int64(s, 1, uid);
        sqlite3_bind_text(s, 2, nonce, NOTES_NONCE_HEX, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        int r = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : db_fail(db, rc);
        sqlite3_reset(s);
        return r;
}

int notes_db_revoke(notes_db *db, int64_t uid, const char *nonce, int64_t expiry, int64_t now,
                    long max, bool *ret_bumped)
{
        *ret_bumped = false;
        int e = tx_begin(db);
        if (e < 0)
                return e;
        sqlite3_stmt *s = stmt(db, Q_REVOKED_PURGE);
        sqlite3_bind_int64(s, 1, uid);
        sqlite3_bind_int64(s, 2, now);
        if ((e = run(db, s)) < 0)
                return tx_abort(db, e);
        int r = notes_db_is_revoked(db, uid, nonce);
        if (r < 0)
                return tx_abort(db, r);
        if (r == 1)
                return tx_commit(db);
        s = stmt(db, Q_REVOKED_COUNT);
        sqlite3_bind_int64(s, 1, uid);
        int rc = sqlite3_step(s);
        int64_t n = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
        sqlite3_reset(s);
        if (rc != SQLITE_ROW)
                return tx_abort(db, db_fail(db, rc));
        if (n < max) {
                s = stmt(db, Q_REVOKE);
                sqlite3_bind_int64(s, 1, uid);
                sqlite3_bind_text(s, 2, nonce, NOTES_NONCE_HEX, SQLITE_STATIC);
                sqlite3_bind_int64(s, 3, expiry);
                e = run(db, s);
        } else {
                /* No room to name this session: end all of the user's. Nothing is un-revoked. */
                s = stmt(db, Q_BUMP);
                sqlite3_bind_int64(s, 1, uid);
                e = run(db, s);
                if (e == 0) {
                        s = stmt(db, Q_REVOKED_CLEAR);
                        sqlite3_bind_int64(s, 1, uid);
                        e = run(db, s);
                }
                *ret_bumped = e == 0;
        }
        if (e == 0)
                e = tx_commit(db);
        else
                e = tx_abort(db, e);
        if (e < 0)
                *ret_bumped = false;
        return e;
}

/* ---- notes ---- */

static void note_from_row(sqlite3_stmt *s, int title, int body, struct notes_note *n)
{
        n->title = (const char *)sqlite3_column_text(s, title);
        n->title_len = (size_t)sqlite3_column_bytes(s, title);
        if (body >= 0) {
                n->body = (const char *)sqlite3_column_text(s, body);
                n->body_len = (size_t)sqlite3_column_bytes(s, body);
        }
        if (!n->title)
                n->title = "";
        if (body >= 0 && !n->body)
                n->body = "";
}

void notes_db_list(notes_db *db, int64_t uid)
{
        sqlite3_bind_int64(stmt(db, Q_LIST), 1, uid);
}

void notes_db_release(notes_db *db)
{
        sqlite3_reset(db->q[Q_LIST]);
        sqlite3_reset(db->q[Q_GET]);
}

int notes_db_list_next(notes_db *db, struct notes_note *ret)
{
        sqlite3_stmt *s = db->q[Q_LIST];
        int rc = sqlite3_step(s);
        if (rc == SQLITE_DONE) {
                sqlite3_reset(s);
                return 0;
        }
        if (rc != SQLITE_ROW) {
                sqlite3_reset(s);
                return db_fail(db, rc);
        }
        *ret = (struct notes_note){.id = sqlite3_column_int64(s, 0),
                                   .created = sqlite3_column_int64(s, 2)};
        note_from_row(s, 1, -1, ret);
        return 1;
}

int notes_db_get(notes_db *db, int64_t uid, int64_t id, struct notes_note *ret)
{
        sqlite3_stmt *s = stmt(db, Q_GET);
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, uid);
        int rc = sqlite3_step(s);
        if (rc != SQLITE_ROW) {
                /* Another user's note is not found either: the same answer as none at all. */
                sqlite3_reset(s);
                return rc == SQLITE_DONE ? -ENOENT : db_fail(db, rc);
        }
        *ret = (struct notes_note){.id = sqlite3_column_int64(s, 0),
                                   .created = sqlite3_column_int64(s, 3),
                                   .updated = sqlite3_column_int64(s, 4)};
        note_from_row(s, 1, 2, ret);
        return 0;
}

/* The user's notes and their bytes, read inside the caller's write transaction. */
static int usage(notes_db *db, int64_t uid, int64_t *ret_notes, int64_t *ret_bytes)
{
        sqlite3_stmt *s = stmt(db, Q_USAGE);
        sqlite3_bind_int64(s, 1, uid);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
                *ret_notes = sqlite3_column_int64(s, 0);
                *ret_bytes = sqlite3_column_int64(s, 1);
        }
        sqlite3_reset(s);
        return rc == SQLITE_ROW ? 0 : db_fail(db, rc);
}

int notes_db_create(notes_db *db, int64_t uid, const char *title, size_t tl, const char *body,
                    size_t bl, int64_t now, long max_notes, long max_bytes, int64_t *ret_id)
{
        int64_t n, bytes;
        int e = tx_begin(db);
        if (e < 0)
                return e;
        /* Counted under the write lock: two handlers cannot both take the last place. */
        if ((e = usage(db, uid, &n, &bytes)) < 0)
                return tx_abort(db, e);
        if (n >= max_notes)
                return tx_abort(db, -EDQUOT);
        if (bytes + (int64_t)(tl + bl) > max_bytes)
                return tx_abort(db, -EFBIG);
        sqlite3_stmt *s = stmt(db, Q_CREATE);
        sqlite3_bind_int64(s, 1, uid);
        sqlite3_bind_int64(s, 2, now);
        sqlite3_bind_int64(s, 3, (int64_t)(tl + bl));
        sqlite3_bind_text(s, 4, title, (int)tl, SQLITE_STATIC);
        sqlite3_bind_text(s, 5, body, (int)bl, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
        sqlite3_reset(s);
        if (rc != SQLITE_ROW)
                return tx_abort(db, db_fail(db, rc));
        if ((e = tx_commit(db)) < 0)
                return e;
        *ret_id = id;
        return 0;
}

int notes_db_replace(notes_db *db, int64_t uid, int64_t id, const char *title, size_t tl,
                     const char *body, size_t bl, int64_t now, long max_bytes, int64_t *ret_created)
{
        int64_t n, bytes;
        int e = tx_begin(db);
        if (e < 0)
                return e;
        sqlite3_stmt *s = stmt(db, Q_OLD);
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, uid);
        int rc = sqlite3_step(s);
        int64_t old_size = 0, created = 0;
        if (rc == SQLITE_ROW) {
                old_size = sqlite3_column_int64(s, 0);
                created = sqlite3_column_int64(s, 1);
        }
        sqlite3_reset(s);
        if (rc != SQLITE_ROW)
                return tx_abort(db, rc == SQLITE_DONE ? -ENOENT : db_fail(db, rc));
        if ((e = usage(db, uid, &n, &bytes)) < 0)
                return tx_abort(db, e);
        if (bytes - old_size + (int64_t)(tl + bl) > max_bytes)
                return tx_abort(db, -EFBIG);
        s = stmt(db, Q_REPLACE);
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, uid);
        sqlite3_bind_text(s, 3, title, (int)tl, SQLITE_STATIC);
        sqlite3_bind_text(s, 4, body, (int)bl, SQLITE_STATIC);
        sqlite3_bind_int64(s, 5, (int64_t)(tl + bl));
        sqlite3_bind_int64(s, 6, now);
        if ((e = run(db, s)) < 0)
                return tx_abort(db, e);
        if ((e = tx_commit(db)) < 0)
                return e;
        *ret_created = created;
        return 0;
}

int notes_db_delete(notes_db *db, int64_t uid, int64_t id)
{
        notes_db_release(db);
        sqlite3_stmt *s = stmt(db, Q_DELETE);
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, uid);
        int e = run(db, s);
        if (e == 0 && sqlite3_changes(db->h) == 0)
                e = -ENOENT;
        return e;
}

/* ---- the session key ---- */

int notes_read_exact(int fd, void *buf, size_t n)
{
        size_t got = 0;
        while (got < n) {
                ssize_t k = read(fd, (char *)buf + got, n - got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -EIO;
                got += (size_t)k;
        }
        return 0;
}

static int read_key(int fd, const char *path, uint8_t key[NOTES_KEY_BYTES], char *err,
                    size_t err_len)
{
        struct stat st;
        if (fstat(fd, &st) < 0) {
                int e = -errno;
                notes_errf(err, err_len, "cannot stat %s: %s", path, strerror(-e));
                return e;
        }
        if (!S_ISREG(st.st_mode) || st.st_size != NOTES_KEY_BYTES) {
                notes_errf(err, err_len, "%s is not a file of %d bytes", path, NOTES_KEY_BYTES);
                return -EINVAL;
        }
        int e = notes_read_exact(fd, key, NOTES_KEY_BYTES);
        if (e < 0)
                notes_errf(err, err_len, "cannot read %s: %s", path, strerror(-e));
        return e;
}

/*
 * Write a new key under a name of its own, then link it to session.key: link() fails with
 * EEXIST when another start got there first, so every process ends up reading the one key.
 * Returns 0 (the key is `key`), -EEXIST (read the one that is there), or -errno.
 */
static int make_key(int dfd, const char *path, uint8_t key[NOTES_KEY_BYTES], char *err,
                    size_t err_len)
{
        char tmp[64];
        snprintf(tmp, sizeof(tmp), "%s.new.%08x", NOTES_KEY_FILE, randombytes_random());
        int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
                int e = -errno;
                notes_errf(err, err_len, "cannot create a key in %s: %s", path, strerror(-e));
                return e;
        }
        randombytes_buf(key, NOTES_KEY_BYTES);
        int e = 0;
        size_t put = 0;
        while (e == 0 && put < NOTES_KEY_BYTES) {
                ssize_t k = write(fd, key + put, NOTES_KEY_BYTES - put);
                if (k < 0 && errno != EINTR)
                        e = -errno;
                else if (k > 0)
                        put += (size_t)k;
        }
        if (e == 0 && fsync(fd) < 0)
                e = -errno;
        close(fd);
        if (e == 0 && linkat(dfd, tmp, dfd, NOTES_KEY_FILE, 0) < 0)
                e = -errno;
        (void)unlinkat(dfd, tmp, 0);
        if (e == 0 && fsync(dfd) < 0)
                e = -errno;
        if (e < 0 && e != -EEXIST)
                notes_errf(err, err_len, "cannot write %s: %s", path, strerror(-e));
        return e;
}

int notes_key_load(const char *dir, uint8_t key[NOTES_KEY_BYTES], char *err, size_t err_len)
{
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, NOTES_KEY_FILE);
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                int e = -errno;
                notes_errf(err, err_len, "cannot open the directory %s: %s", dir, strerror(-e));
                return e;
        }
        int e = -ENOENT;
        /* Twice at most: a key made by a start that raced this one is there the second time. */
        for (int attempt = 0; attempt < 2 && e == -ENOENT; attempt++) {
                int fd = openat(dfd, NOTES_KEY_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd >= 0) {
                        e = read_key(fd, path, key, err, err_len);
                        close(fd);
                        break;
                }
                e = -errno;
                if (e != -ENOENT) {
                        notes_errf(err, err_len, "cannot open %s: %s", path, strerror(-e));
                        break;
                }
                e = make_key(dfd, path, key, err, err_len);
                if (e == -EEXIST)
                        e = -ENOENT;
        }
        close(dfd);
        if (e < 0)
                sodium_memzero(key, NOTES_KEY_BYTES);
        return e;
}

int notes_key_check(const char *dir, char *finding, size_t flen, char *fix, size_t xlen)
{
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, NOTES_KEY_FILE);
        struct stat st;
        if (lstat(path, &st) < 0) {
                if (errno == ENOENT)
                        return 0;
                notes_errf(finding, flen, "cannot stat %s: %s", path, strerror(errno));
        } else if (!S_ISREG(st.st_mode) || st.st_size != NOTES_KEY_BYTES) {
                notes_errf(finding, flen, "%s is not a file of %d bytes", path, NOTES_KEY_BYTES);
        } else if (st.st_mode & 077) {
                notes_errf(finding, flen, "%s is readable by others (mode %04o)", path,
                           (unsigned)(st.st_mode & 07777));
                notes_errf(fix, xlen, "chmod 600 %s", path);
                return -EINVAL;
        } else {
                return 0;
        }
        notes_errf(fix, xlen,
                   "remove it: notes makes a new key at the next start, which ends every session");
        return -EINVAL;
}
