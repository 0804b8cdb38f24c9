/* SPDX-License-Identifier: MIT */
/* notes.h: what the parts of the notes app share: its bounds, its database and its commands. */
#ifndef NOTES_H
#define NOTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <m0.h>
#include <sodium.h>

#define NOTES_TITLE_MAX 200        /* bytes */
#define NOTES_BODY_MAX (64 * 1024) /* bytes */
#define NOTES_NAME_MAX 64          /* a user name: [a-z0-9][a-z0-9._-]* */
#define NOTES_PASSWORD_MAX 1024    /* bytes; what `--hash-password` and `--add-user` take */
#define NOTES_NONCE_BYTES 16       /* a session nonce, from randombytes_buf() */
#define NOTES_NONCE_HEX (2 * NOTES_NONCE_BYTES)
#define NOTES_KEY_BYTES crypto_auth_KEYBYTES
#define NOTES_HASH_MAX crypto_pwhash_STRBYTES /* an Argon2id string and its NUL */
#define NOTES_ADMIN "admin"
#define NOTES_ADMIN_UID 1 /* the users row the schema creates; its hash is the environment's */

#define NOTES_DB "notes.db"
#define NOTES_KEY_FILE "session.key"
#define NOTES_OLD_FILE "notes.jsonl"          /* the store of the versions before SQLite */
#define NOTES_OLD_DONE "notes.jsonl.imported" /* what it is renamed to once imported */
#define NOTES_BUSY_MS_DEFAULT 5000

/* ---- notes-cli.c: the state directory, the hash cost, and the commands before m0_main() ---- */

/** snprintf() into a finding or error buffer. */
void notes_errf(char *err, size_t err_len, const char *fmt, ...) M0_PRINTF(3, 4);

/**
 * Where the notes live: M0_NOTES_DIR when set, else the first path of systemd's
 * STATE_DIRECTORY (StateDirectory= may name several, joined by ':'). It must be a writable
 * directory. Returns 0, or -EINVAL with a finding and its fix written into the buffers.
 */
int notes_state_dir(char *dir, size_t dir_len, char *finding, size_t flen, char *fix, size_t xlen);

/**
 * A decimal knob in [min, max] from the environment (unset: `def`): digits only, as the host
 * reads its own. Returns 0, or -EINVAL with a finding and its fix.
 */
int notes_number_knob(const char *var, long def, long min, long max, const char *unit, long *ret,
                      char *finding, size_t flen, char *fix, size_t xlen);

/**
 * The Argon2id parameters of a hash string ("$argon2id$v=19$m=<KiB>,t=<passes>,p=1$…"), as
 * crypto_pwhash_str() takes them. -EINVAL when the string is not one libsodium made.
 */
int notes_hash_params(const char *hash, unsigned long long *ret_ops, size_t *ret_mem);

/** Whether `name` is a user name: 1 to NOTES_NAME_MAX of [a-z0-9._-], the first [a-z0-9]. */
bool notes_name_ok(const char *name, size_t len);

/**
 * `notes --hash-password` and `notes --add-user NAME`, run by main() before m0_main(): returns
 * the process's exit status, or -1 when argv names neither command.
 */
int notes_cli(int argc, char **argv);

/* ---- notes-db.c: one SQLite connection with its statements; one thread's ---- */

typedef struct notes_db notes_db;

/** One note as the database holds it. The strings live until the next call on the same db. */
struct notes_note {
        int64_t id, created, updated; /* seconds since the epoch */
        const char *title, *body;     /* NUL-terminated, UTF-8, no other NUL */
        size_t title_len, body_len;
};

/**
 * Open (creating when absent, mode 0600, owned as the directory is) `dir`/notes.db, in WAL mode
 * with synchronous=FULL and a busy timeout of `busy_ms`, create the schema when it is new, and
 * prepare the statements. Returns 0, or -errno with a one-line reason in `err`. The connection
 * is the calling thread's alone.
 */
int notes_db_open(const char *dir, long busy_ms, notes_db **ret, char *err, size_t err_len);
/** Close what notes_db_open() opened. Accepts NULL. */
void notes_db_close(notes_db *db);
/** Run SQL that returns no row (several statements may follow each other): 0, or -errno with
 *  SQLite's message in `err`. */
int notes_db_exec(notes_db *db, const char *sql, char *err, size_t err_len);
/** SQLite's message for the last failure on this connection. */
const char *notes_db_error(const notes_db *db);

/**
 * A user's id and Argon2id hash, by name. 0, -ENOENT (no such user, or the admin row, whose
 * hash is the environment's), or -EIO.
 */
int notes_db_user_find(notes_db *db, const char *name, int64_t *ret_uid,
                       char ret_hash[NOTES_HASH_MAX]);
/** Add a user. 0, -EEXIST when the name is taken, or -EIO/-EBUSY. */
int notes_db_user_add(notes_db *db, const char *name, const char *hash, int64_t now);
/** A user's session generation (part of every session's MAC). 0, -ENOENT, or -EIO. */
int notes_db_generation(notes_db *db, int64_t uid, uint64_t *ret);

/** Whether the user's session `nonce` was revoked: 1, 0, or -EIO. */
int notes_db_is_revoked(notes_db *db, int64_t uid, const char *nonce);
/**
 * Revoke a session of `uid` until `expiry`, dropping the user's revocations that expired by
 * `now`. When `max` live ones are held already, the user's generation is bumped instead, which
 * ends every session of theirs (*ret_bumped). 0 once committed, or -errno.
 */
int notes_db_revoke(notes_db *db, int64_t uid, const char *nonce, int64_t expiry, int64_t now,
                    long max, bool *ret_bumped);

/** Start listing the user's notes by id; then notes_db_list_next() until it returns 0. */
void notes_db_list(notes_db *db, int64_t uid);
/** The next note of the list (only id, title, created are set): 1, 0 at the end, or -EIO. */
int notes_db_list_next(notes_db *db, struct notes_note *ret);
/** Let go of the rows the last list or get returned: their strings are gone after it. */
void notes_db_release(notes_db *db);
/** The user's note `id`: 0, -ENOENT (none, or another user's), or -EIO. */
int notes_db_get(notes_db *db, int64_t uid, int64_t id, struct notes_note *ret);
/**
 * Add a note of `uid`, within `max_notes` notes and `max_bytes` title and body bytes for the
 * user. 0 once committed (*ret_id), -EDQUOT (max_notes), -EFBIG (max_bytes), or -errno.
 */
int notes_db_create(notes_db *db, int64_t uid, const char *title, size_t tl, const char *body,
                    size_t bl, int64_t now, long max_notes, long max_bytes, int64_t *ret_id);
/**
 * Replace the user's note `id`: title, body and updated; created is kept (*ret_created).
 * 0 once committed, -ENOENT, -EFBIG (max_bytes), or -errno.
 */
int notes_db_replace(notes_db *db, int64_t uid, int64_t id, const char *title, size_t tl,
                     const char *body, size_t bl, int64_t now, long max_bytes,
                     int64_t *ret_created);
/** Delete the user's note `id`: 0 once committed, -ENOENT, or -errno. */
int notes_db_delete(notes_db *db, int64_t uid, int64_t id);

/** Read exactly `n` bytes: 0, or -errno (-EIO when the file ends first). */
int notes_read_exact(int fd, void *buf, size_t n);

/**
 * The session key: `dir`/session.key, NOTES_KEY_BYTES random bytes made on the first start
 * (mode 0600; two starts racing agree on one). Returns 0, or -errno with the reason in `err`.
 */
int notes_key_load(const char *dir, uint8_t key[NOTES_KEY_BYTES], char *err, size_t err_len);
/**
 * Whether an existing key file can be read: 0 (also when there is none yet), or -EINVAL with a
 * finding and its fix. For `check`, which makes nothing.
 */
int notes_key_check(const char *dir, char *finding, size_t flen, char *fix, size_t xlen);

/* ---- notes-import.c: the store file of the versions before SQLite ---- */

/**
 * Import `dir`/notes.jsonl into the database once, as the user admin's notes, with their ids
 * and times, in one transaction, then rename it to notes.jsonl.imported. A crash at any point
 * leaves the notes either not imported (the file is read again at the next start) or imported
 * with the file recorded, never half or twice. No file: 0, nothing done. A file that does not
 * read whole is refused (-EINVAL, the line and what is wrong in `err`) and left as it is.
 * *ret_count: how many notes were imported.
 */
int notes_import(notes_db *db, const char *dir, int64_t now, size_t *ret_count, char *err,
                 size_t err_len);

/* Raw access for notes-import.c, which writes in one transaction of its own. */
struct sqlite3;
/** The connection itself. */
struct sqlite3 *notes_db_handle(notes_db *db);

#endif /* NOTES_H */
