/* SPDX-License-Identifier: MIT */
/* notes-import.c: the one import of the JSON Lines store the versions before SQLite kept. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "notes.h"

/* A store file larger than this is not read: no set of notes within the old knobs' ranges is. */
#define OLD_MAX_BYTES ((size_t)1 << 30)

/*
 * The old format, as notes-store.c wrote it (version 1), one JSON object per line:
 *   {"m0notes":1,"next_id":N,"generation":G}              the header, first
 *   {"revoked":"<32 hex>","expiry":E}                       a logged-out session
 *   {"id":I,"created":C,"updated":U,"title":"…","body":"…"} a note, by ascending id
 * Sessions are not imported: they were signed with M0_NOTES_KEY, which is no longer read, so
 * none of them is valid any more, revoked or not.
 */

/* A whole number 0..2^63-1 member, or -1 when it is absent or anything else. */
static json_int_t uint_member(const json_t *o, const char *name)
{
        const json_t *v = json_object_get(o, name);
        return json_is_integer(v) && json_integer_value(v) >= 0 ? json_integer_value(v) : -1;
}

static bool hex_nonce(const json_t *v)
{
        if (!json_is_string(v) || json_string_length(v) != NOTES_NONCE_HEX)
                return false;
        const char *s = json_string_value(v);
        for (size_t i = 0; i < NOTES_NONCE_HEX; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

struct old_store {
        json_int_t next_id;
        json_t **notes; /* the note lines, in order */
        size_t n;
};

static void old_free(struct old_store *o)
{
        for (size_t i = 0; i < o->n; i++)
                json_decref(o->notes[i]);
        free(o->notes);
        memset(o, 0, sizeof(*o));
}

/* One line: the header, a revocation (checked, then dropped) or a note (kept in `o`). */
static int old_line(struct old_store *o, json_t *line, unsigned no, json_int_t *last_id, char *err,
                    size_t err_len)
{
        size_t members = json_object_size(line);
        if (no == 1) {
                if (members != 3 || uint_member(line, "m0notes") != 1 ||
                    uint_member(line, "next_id") < 1 || uint_member(line, "generation") < 0) {
                        notes_errf(err, err_len, "line 1 is not a version 1 header");
                        return -EINVAL;
                }
                o->next_id = uint_member(line, "next_id");
                return 0;
        }
        if (members == 2 && hex_nonce(json_object_get(line, "revoked")) &&
            uint_member(line, "expiry") >= 0)
                return 0;
        const json_t *title = json_object_get(line, "title"), *body = json_object_get(line, "body");
        json_int_t id = uint_member(line, "id");
        if (members != 5 || id < 0 || uint_member(line, "created") < 0 ||
            uint_member(line, "updated") < 0 || !json_is_string(title) || !json_is_string(body)) {
                notes_errf(err, err_len, "line %u is neither a note nor a revoked session", no);
                return -EINVAL;
        }
        if (json_string_length(title) > NOTES_TITLE_MAX ||
            json_string_length(body) > NOTES_BODY_MAX) {
                notes_errf(err, err_len,
                           "line %u: a title holds at most %d bytes, a body at most %d", no,
                           NOTES_TITLE_MAX, NOTES_BODY_MAX);
                return -EINVAL;
        }
        if (id <= *last_id || id >= o->next_id) {
                notes_errf(err, err_len,
                           "line %u: note id %lld is out of order or not below next_id", no,
                           (long long)id);
                return -EINVAL;
        }
        json_t **p = realloc(o->notes, (o->n + 1) * sizeof(*p));
        if (!p)
                return -ENOMEM;
        o->notes = p;
        o->notes[o->n++] = json_incref(line);
        *last_id = id;
        return 0;
}

/*
 * Parse the whole file before anything is written: a file that does not read whole is refused
 * as the old code refused it, and imports nothing. Strings must be UTF-8 (jansson's rule, and
 * JSON's): a note the old code took with other bytes is refused here, naming its line.
 */
static int old_parse(const char *text, size_t len, struct old_store *o, char *err, size_t err_len)
{
        json_int_t last_id = 0;
        unsigned no = 0;
        size_t pos = 0;
        int e = 0;
        while (e == 0 && pos < len) {
                no++;
                const char *nl = memchr(text + pos, '\n', len - pos);
                if (!nl) {
                        notes_errf(err, err_len, "line %u has no end (a file cut short)", no);
                        return -EINVAL;
                }
                size_t ll = (size_t)(nl - (text + pos));
                json_error_t je;
                json_t *line = json_loadb(text + pos, ll, JSON_REJECT_DUPLICATES, &je);
                if (!json_is_object(line)) {
                        /* The position only: jansson's text quotes the line, a note's words. */
                        notes_errf(err, err_len,
                                   "line %u is not a JSON object in UTF-8 (column %d)", no,
                                   line ? 1 : je.column);
                        json_decref(line);
                        return -EINVAL;
                }
                e = old_line(o, line, no, &last_id, err, err_len);
                json_decref(line);
                pos += ll + 1;
        }
        if (e == 0 && no == 0) {
                notes_errf(err, err_len, "the file is empty");
                e = -EINVAL;
        }
        return e;
}

static int read_all(int fd, char **ret, size_t *ret_len)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > OLD_MAX_BYTES)
                return -EFBIG;
        size_t size = (size_t)st.st_size;
        char *text = malloc(size ? size : 1);
        if (!text)
                return -ENOMEM;
        int e = notes_read_exact(fd, text, size);
        if (e < 0) {
                free(text);
                return e;
        }
        *ret = text;
        *ret_len = size;
        return 0;
}

/* One int64 from a query with up to one text parameter; -ENOENT when it returns no row. */
static int sql_int(sqlite3 *h, const char *q, const char *param, int64_t *ret, char *text,
                   size_t text_len)
{
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(h, q, -1, &s, NULL) != SQLITE_OK)
                return -EIO;
        if (param)
                sqlite3_bind_text(s, 1, param, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
                *ret = sqlite3_column_int64(s, 0);
                const char *t = (const char *)sqlite3_column_text(s, 1);
                if (text)
                        snprintf(text, text_len, "%s", t ? t : "");
        }
        sqlite3_finalize(s);
        return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : -EIO;
}

static int insert_notes(sqlite3 *h, const struct old_store *o)
{
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(h,
                               "INSERT INTO notes(id, owner, created, updated, size, title, body)"
                               " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                               -1, &s, NULL) != SQLITE_OK)
                return -EIO;
        int e = 0;
        for (size_t i = 0; e == 0 && i < o->n; i++) {
                const json_t *n = o->notes[i];
                const json_t *t = json_object_get(n, "title"), *b = json_object_get(n, "body");
                size_t tl = json_string_length(t), bl = json_string_length(b);
                sqlite3_reset(s);
                sqlite3_bind_int64(s, 1, uint_member(n, "id"));
                sqlite3_bind_int64(s, 2, NOTES_ADMIN_UID);
                sqlite3_bind_int64(s, 3, uint_member(n, "created"));
                sqlite3_bind_int64(s, 4, uint_member(n, "updated"));
                sqlite3_bind_int64(s, 5, (int64_t)(tl + bl));
                sqlite3_bind_text(s, 6, json_string_value(t), (int)tl, SQLITE_STATIC);
                sqlite3_bind_text(s, 7, json_string_value(b), (int)bl, SQLITE_STATIC);
                if (sqlite3_step(s) != SQLITE_DONE)
                        e = -EIO;
        }
        sqlite3_finalize(s);
        return e;
}

/*
 * In one transaction: the notes, the id counter past the old next_id (ids are never reused),
 * and the file's digest in `imports`. A file whose digest is recorded already was imported by a
 * start that stopped before the rename: it is only renamed now.
 */
static int import_tx(notes_db *db, const struct old_store *o, const char *digest, int64_t now,
                     bool *ret_done_before, char *err, size_t err_len)
{
        sqlite3 *h = notes_db_handle(db);
        char why[200] = "", seen[2 * crypto_generichash_BYTES + 1] = "";
        int64_t v;
        *ret_done_before = false;
        int e = notes_db_exec(db, "BEGIN IMMEDIATE", why, sizeof(why));
        if (e < 0)
                goto fail;
        e = sql_int(h, "SELECT notes, digest FROM imports WHERE file = ?1", NOTES_OLD_FILE, &v,
                    seen, sizeof(seen));
        if (e == 0) {
                (void)notes_db_exec(db, "ROLLBACK", why, sizeof(why));
                if (strcmp(seen, digest) != 0) {
                        notes_errf(err, err_len,
                                   "another %s was imported already (%lld notes); this one is not "
                                   "read: move it away",
                                   NOTES_OLD_FILE, (long long)v);
                        return -EEXIST;
                }
                *ret_done_before = true;
                return 0;
        }
        if (e == -ENOENT)
                e = sql_int(h, "SELECT count(*) FROM notes", NULL, &v, NULL, 0);
        if (e == 0 && v > 0) {
                (void)notes_db_exec(db, "ROLLBACK", why, sizeof(why));
                notes_errf(
                        err, err_len,
                        "the database has notes already, and %s is imported only into one without: "
                        "move it away",
                        NOTES_OLD_FILE);
                return -EEXIST;
        }
        if (e == 0)
                e = insert_notes(h, o);
        char q[512];
        if (e == 0) {
                snprintf(q, sizeof(q),
                         "INSERT OR IGNORE INTO sqlite_sequence(name, seq) VALUES ('notes', 0);"
                         "UPDATE sqlite_sequence SET seq = max(seq, %lld) WHERE name = 'notes';"
                         "INSERT INTO imports(file, digest, notes, at) VALUES ('%s', '%s', %zu, "
                         "%lld);",
                         (long long)(o->next_id - 1), NOTES_OLD_FILE, digest, o->n, (long long)now);
                e = notes_db_exec(db, q, why, sizeof(why));
        }
        if (e == 0)
                e = notes_db_exec(db, "COMMIT", why, sizeof(why));
        if (e == 0)
                return 0;
fail:
        notes_errf(err, err_len, "cannot import it: %s", why[0] ? why : sqlite3_errmsg(h));
        if (!sqlite3_get_autocommit(h))
                (void)notes_db_exec(db, "ROLLBACK", why, sizeof(why));
        return e;
}

int notes_import(notes_db *db, const char *dir, int64_t now, size_t *ret_count, char *err,
                 size_t err_len)
{
        struct old_store o = {0};
        char *text = NULL, why[256] = "";
        size_t len = 0;
        *ret_count = 0;
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                int e = -errno;
                notes_errf(err, err_len, "cannot open the directory %s: %s", dir, strerror(-e));
                return e;
        }
        int e = 0, fd = openat(dfd, NOTES_OLD_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
                if (errno != ENOENT) {
                        e = -errno;
                        snprintf(why, sizeof(why), "%s", strerror(-e));
                }
                goto out; /* none: nothing to import, as on every start after the first */
        }
        e = read_all(fd, &text, &len);
        if (e < 0) {
                snprintf(why, sizeof(why), "%s",
                         e == -EFBIG ? "not a regular file of at most 1 GiB" : strerror(-e));
                goto out;
        }
        e = old_parse(text, len, &o, why, sizeof(why));
        if (e < 0)
                goto out;
        uint8_t sum[crypto_generichash_BYTES];
        char digest[2 * crypto_generichash_BYTES + 1];
        crypto_generichash(sum, sizeof(sum), (const unsigned char *)text, len, NULL, 0);
        sodium_bin2hex(digest, sizeof(digest), sum, sizeof(sum));
        bool done_before;
        e = import_tx(db, &o, digest, now, &done_before, why, sizeof(why));
        if (e < 0)
                goto out;
        /* Renamed only once the import is committed; kept, for whoever wants the old file. */
        if (renameat(dfd, NOTES_OLD_FILE, dfd, NOTES_OLD_DONE) < 0 || fsync(dfd) < 0) {
                e = -errno;
                snprintf(why, sizeof(why), "imported, but cannot rename it to %s: %s",
                         NOTES_OLD_DONE, strerror(-e));
                goto out;
        }
        *ret_count = done_before ? 0 : o.n;
out:
        if (e < 0)
                notes_errf(err, err_len, "%s/%s: %s", dir, NOTES_OLD_FILE, why);
        if (fd >= 0)
                close(fd);
        close(dfd);
        free(text);
        old_free(&o);
        return e;
}
