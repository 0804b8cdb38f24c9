/* SPDX-License-Identifier: MIT */
/* rooms: rooms of messages in SQLite, posted and followed by WebSocket or event stream, behind a
 * login by cookie, with CORS (SPEC WS6). The last step of doc/tutorial.md walks through it. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <m0.h>
#include <sodium.h>
#include <sqlite3.h>

#include "common.h"

#define COOKIE "rooms_session"
#define ROOM_MAX 64 /* a room's name: 1 to 64 of [a-z0-9_-] */
#define USER_MAX 32 /* a user's name: 1 to 32 of [a-z0-9_-] */
#define TOKEN_BYTES 32
#define KEY_BYTES crypto_generichash_BYTES
#define B64URL sodium_base64_VARIANT_URLSAFE_NO_PADDING
#define MAX_ORIGINS 16
#define FORM_MAX 4096

/*
 * The schema, made by the first connection. A message's `id` is the room's history order
 * (AUTOINCREMENT: never given twice); `event_id` is the bus's id of its event, for the backfill
 * of a stream whose Last-Event-ID the bus no longer keeps (AP2). Sessions are kept as the hash
 * of their token, as doc/tutorial.md's step 5 keeps them.
 */
static const char setup_sql[] = "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
                                "CREATE TABLE IF NOT EXISTS rooms (name TEXT PRIMARY KEY);"
                                "CREATE TABLE IF NOT EXISTS messages ("
                                " id INTEGER PRIMARY KEY AUTOINCREMENT,"
                                " room TEXT NOT NULL,"
                                " author TEXT NOT NULL,"
                                " text TEXT NOT NULL,"
                                " time INTEGER NOT NULL,"
                                " event_id INTEGER);"
                                "CREATE INDEX IF NOT EXISTS messages_room ON messages(room, id);"
                                "CREATE INDEX IF NOT EXISTS messages_event"
                                " ON messages(room, event_id);"
                                "CREATE INDEX IF NOT EXISTS messages_author"
                                " ON messages(author, time);"
                                "CREATE TABLE IF NOT EXISTS sessions ("
                                " token_hash BLOB PRIMARY KEY,"
                                " user TEXT NOT NULL,"
                                " expires INTEGER NOT NULL);";

enum {
        Q_SESSION,
        Q_SESSION_ADD,
        Q_SESSION_PURGE,
        Q_SESSION_DEL,
        Q_ROOM_ADD,
        Q_ROOM_HAS,
        Q_RECENT,
        Q_POST,
        Q_TRIM,
        Q_EVENT_ID,
        Q_BEFORE,
        Q_AFTER,
        Q_BACKFILL,
        Q_N
};

#define MESSAGE_COLS "id, room, author, text, time"
static const char *const query_sql[Q_N] = {
        [Q_SESSION] = "SELECT user FROM sessions WHERE token_hash = ?1 AND expires > ?2",
        [Q_SESSION_ADD] = "INSERT INTO sessions(token_hash, user, expires) SELECT ?1, ?2, ?3"
                          " WHERE (SELECT count(*) FROM sessions) < ?4",
        [Q_SESSION_PURGE] = "DELETE FROM sessions WHERE expires <= ?1",
        [Q_SESSION_DEL] = "DELETE FROM sessions WHERE token_hash = ?1",
        [Q_ROOM_ADD] = "INSERT OR IGNORE INTO rooms(name) SELECT ?1"
                       " WHERE (SELECT count(*) FROM rooms) < ?2",
        [Q_ROOM_HAS] = "SELECT 1 FROM rooms WHERE name = ?1",
        /* a user's messages of the last minute, in every room (M0_ROOMS_USER_POSTS) */
        [Q_RECENT] = "SELECT count(*) FROM messages WHERE author = ?1 AND time > ?2",
        [Q_POST] = "INSERT INTO messages(room, author, text, time) VALUES (?1, ?2, ?3, ?4)"
                   " RETURNING " MESSAGE_COLS,
        /* the room's oldest past M0_ROOMS_KEEP go with the write that passes it */
        [Q_TRIM] = "DELETE FROM messages WHERE room = ?1 AND id <= (SELECT id FROM messages"
                   " WHERE room = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
        [Q_EVENT_ID] = "UPDATE messages SET event_id = ?2 WHERE id = ?1",
        [Q_BEFORE] = "SELECT * FROM (SELECT " MESSAGE_COLS " FROM messages"
                     " WHERE room = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3) ORDER BY id",
        [Q_AFTER] = "SELECT " MESSAGE_COLS " FROM messages WHERE room = ?1 AND id > ?2"
                    " ORDER BY id LIMIT ?3",
        [Q_BACKFILL] = "SELECT * FROM (SELECT " MESSAGE_COLS ", event_id FROM messages"
                       " WHERE room = ?1 AND event_id > ?2 AND event_id < ?3"
                       " ORDER BY event_id DESC LIMIT ?4) ORDER BY event_id",
};

/* One handler state: a connection of its own, used by the one thread it was made for. */
struct rooms {
        sqlite3 *db;
        sqlite3_stmt *q[Q_N];
};

/* The knobs (M0_ROOMS_*), read by check() on the coordinator before any handler exists;
 * read-only after. */
static char db_path[4096];
static long busy_ms, session_s, max_sessions, max_text, max_rooms, keep, max_page, backfill_max,
        user_posts, secure;

/* M0_ROOMS_ORIGINS, read by main() before the host starts: CORS with cookies for those origins,
 * and the origins a room's WebSocket takes (D220). */
static char origins_text[4096];
static const char *origins[MAX_ORIGINS + 1];
static int origins_over, origins_star;
static const m0_cors cors = {.origins = origins, .credentials = 1, .expose_headers = "X-Event-Id"};

/* ---- the database ---- */

static void rooms_free(void *state)
{
        struct rooms *t = state;
        if (!t)
                return;
        for (int i = 0; i < Q_N; i++)
                sqlite3_finalize(t->q[i]);
        sqlite3_close(t->db);
        free(t);
}

/* Opens run one at a time: on a new file the first one's switch to WAL and CREATE TABLE meet
 * the others' locks, which SQLite may answer with SQLITE_BUSY at once rather than wait. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

static int make(const m0_handler_info *info, void **ret_state, char *err, size_t err_len)
{
        struct rooms *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        pthread_mutex_lock(&open_lock);
        int rc = sqlite3_open_v2(db_path, &t->db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                                 NULL);
        if (rc == SQLITE_OK) {
                sqlite3_busy_timeout(t->db, (int)busy_ms);
                rc = sqlite3_exec(t->db, setup_sql, NULL, NULL, NULL);
        }
        for (int i = 0; rc == SQLITE_OK && i < Q_N; i++)
                rc = sqlite3_prepare_v3(t->db, query_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                                        &t->q[i], NULL);
        pthread_mutex_unlock(&open_lock);
        if (rc != SQLITE_OK) {
                snprintf(err, err_len, "cannot open %s: %s (M0_ROOMS_DB names the file)", db_path,
                         t->db ? sqlite3_errmsg(t->db) : sqlite3_errstr(rc));
                rooms_free(t);
                return -EIO;
        }
        if (info->kind == M0_THREAD_LOOP && info->loop == 0)
                m0_log(M0_LOG_NOTICE, "rooms in %s", db_path);
        *ret_state = t;
        return 0;
}

/* Statement `q`, reset and unbound. */
static sqlite3_stmt *stmt(struct rooms *t, int q)
{
        sqlite3_reset(t->q[q]);
        sqlite3_clear_bindings(t->q[q]);
        return t->q[q];
}

static int db_errno(int rc)
{
        switch (rc & 0xff) {
        case SQLITE_BUSY: return -EBUSY;
        case SQLITE_FULL: return -ENOSPC;
        case SQLITE_NOMEM: return -ENOMEM;
        default: return -EIO;
        }
}

/* Run a statement that returns no row, to its end: 0, or -errno. */
static int run(sqlite3_stmt *s)
{
        int rc = sqlite3_step(s);
        sqlite3_reset(s);
        return rc == SQLITE_DONE ? 0 : db_errno(rc);
}

static int exec(struct rooms *t, const char *sql)
{
        int rc = sqlite3_exec(t->db, sql, NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : db_errno(rc);
}

/* A message row (its first five columns) as the JSON clients get. */
static json_t *message_json(sqlite3_stmt *s)
{
        return json_pack("{s:I,s:s,s:s,s:s,s:I}", "id", (json_int_t)sqlite3_column_int64(s, 0),
                         "room", (const char *)sqlite3_column_text(s, 1), "from",
                         (const char *)sqlite3_column_text(s, 2), "text",
                         (const char *)sqlite3_column_text(s, 3), "time",
                         (json_int_t)sqlite3_column_int64(s, 4));
}

static int64_t now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec;
}

/* ---- names and sessions ---- */

/* 1 to `max` of [a-z0-9_-]. */
static bool name_ok(const char *s, size_t max)
{
        size_t n = strlen(s);
        if (n < 1 || n > max)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
                      s[i] == '-'))
                        return false;
        return true;
}

/* What SQLite keeps of a token: its hash, so that a copy of the database opens no session. */
static void token_key(const unsigned char token[TOKEN_BYTES], unsigned char key[KEY_BYTES])
{
        crypto_generichash(key, KEY_BYTES, token, TOKEN_BYTES, NULL, 0);
}

/* The key of the request's session cookie; -ENOENT when it has none that could be one. */
static int cookie_key(m0_req *req, unsigned char key[KEY_BYTES])
{
        const char *v = m0_req_cookie(req, COOKIE);
        unsigned char token[TOKEN_BYTES];
        size_t len;
        if (!v ||
            sodium_base642bin(token, sizeof(token), v, strlen(v), NULL, &len, NULL, B64URL) != 0 ||
            len != TOKEN_BYTES)
                return -ENOENT;
        token_key(token, key);
        return 0;
}

/* The user of the live session `key`: 1 and `user`, 0 when there is none, or -errno. */
static int session_user(struct rooms *t, const unsigned char key[KEY_BYTES],
                        char user[USER_MAX + 1])
{
        sqlite3_stmt *s = stmt(t, Q_SESSION);
        sqlite3_bind_blob(s, 1, key, KEY_BYTES, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, now_s());
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW)
                snprintf(user, USER_MAX + 1, "%s", (const char *)sqlite3_column_text(s, 0));
        sqlite3_reset(s);
        return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : db_errno(rc);
}

/* ---- answers ---- */

/* RFC 9457, as the host writes its own answers under M0_APP_ERRORS_JSON (AP1). */
static int problem(m0_req *req, m0_res *res, int status, const char *detail)
{
        int r = app_where(req, res);
        return r < 0 ? r : m0_res_problem(res, status, NULL, detail);
}

/*
 * What every room's route checks first: a live session (401), a room's name (404: the path
 * names nothing that could be). 0 with `user` and `key`, 1 with the answer made, or -errno.
 */
static int enter(struct rooms *t, m0_req *req, m0_res *res, char user[USER_MAX + 1],
                 unsigned char key[KEY_BYTES])
{
        int r = cookie_key(req, key) < 0 ? 0 : session_user(t, key, user);
        if (r < 0)
                return r;
        if (r == 0)
                r = problem(req, res, 401, "no session: log in first (POST /login)");
        else if (!name_ok(m0_req_param(req, "room"), ROOM_MAX))
                r = problem(req, res, 404, "a room's name is 1 to 64 of a-z, 0-9, _ and -");
        else
                return 0;
        return r < 0 ? r : 1;
}

static int set_cookie(m0_res *res, const char *value, int64_t max_age)
{
        const m0_cookie_attrs attrs = {
                .max_age = max_age,
                .path = "/",
                .http_only = true,
                /* with Secure, a page of another site listed in M0_ROOMS_ORIGINS may send it */
                .same_site = secure ? M0_SAMESITE_NONE : M0_SAMESITE_LAX,
                .secure = secure,
        };
        return m0_res_cookie(res, COOKIE, value, &attrs);
}

/* ---- login and logout ---- */

/* A session for `user`, made room for by dropping the expired ones when the table is full:
 * 1 and the token's text, 0 when it is full of live ones, or -errno. */
static int session_new(struct rooms *t, const char *user,
                       char text[sodium_base64_ENCODED_LEN(TOKEN_BYTES, B64URL)])
{
        unsigned char token[TOKEN_BYTES], key[KEY_BYTES];
        randombytes_buf(token, sizeof(token));
        token_key(token, key);
        sodium_bin2base64(text, sodium_base64_ENCODED_LEN(TOKEN_BYTES, B64URL), token,
                          sizeof(token), B64URL);
        int64_t now = now_s();
        for (int pass = 0; pass < 2; pass++) {
                sqlite3_stmt *s = stmt(t, Q_SESSION_ADD);
                sqlite3_bind_blob(s, 1, key, KEY_BYTES, SQLITE_STATIC);
                sqlite3_bind_text(s, 2, user, -1, SQLITE_STATIC);
                sqlite3_bind_int64(s, 3, now + session_s);
                sqlite3_bind_int64(s, 4, max_sessions);
                int r = run(s);
                if (r < 0 || sqlite3_changes(t->db) == 1)
                        return r < 0 ? r : 1;
                s = stmt(t, Q_SESSION_PURGE);
                sqlite3_bind_int64(s, 1, now);
                if ((r = run(s)) < 0)
                        return r;
        }
        return 0;
}

/* POST /login, a form with `name`: a session in a cookie, and {"user": name}. A name is all
 * it takes: who may use a room is the app's to decide, and this one trusts every name. */
static int login(m0_req *req, m0_res *res, void *state)
{
        const char *name;
        char text[sodium_base64_ENCODED_LEN(TOKEN_BYTES, B64URL)];
        int r = m0_req_form_get(req, "name", &name);
        if (r < 0)
                return r; /* the host's 400 naming the field, or 415 naming the type */
        if (!name_ok(name, USER_MAX))
                return problem(req, res, 400, "a name is 1 to 32 of a-z, 0-9, _ and -");
        if ((r = session_new(state, name, text)) <= 0)
                return r < 0 ? r
                             : problem(req, res, 503,
                                       "M0_ROOMS_MAX_SESSIONS sessions are open: try later");
        json_t *j = json_pack("{s:s}", "user", name);
        r = j ? app_where(req, res) : -ENOMEM;
        if (r == 0)
                r = set_cookie(res, text, session_s);
        if (r == 0)
                r = m0_res_json_value(res, 200, j);
        json_decref(j);
        return r;
}

/* POST /logout: the session's row goes, so the cookie opens nothing anywhere, and the
 * browser's is cleared. */
static int logout(m0_req *req, m0_res *res, void *state)
{
        unsigned char key[KEY_BYTES];
        int r = 0;
        if (cookie_key(req, key) == 0) {
                sqlite3_stmt *s = stmt(state, Q_SESSION_DEL);
                sqlite3_bind_blob(s, 1, key, KEY_BYTES, SQLITE_STATIC);
                r = run(s);
        }
        if (r == 0)
                r = app_where(req, res);
        if (r == 0)
                r = set_cookie(res, "", M0_COOKIE_DELETE);
        return r < 0 ? r : m0_res_status(res, 204);
}

/* ---- posting ---- */

/* A refusal of a message to post: the status and a sentence for a person. */
struct refusal {
        int status;
        const char *detail;
};

/* The text a body asks to post, `{"text": "…"}`: 0 and *ret, or 1 and the refusal. A text is
 * counted in characters: jansson has checked that it is UTF-8. */
static int text_of(const json_t *body, const char **ret, struct refusal *no)
{
        const json_t *text = json_object_get(body, "text");
        if (!json_is_object(body) || json_object_size(body) != 1 || !json_is_string(text))
                *no = (struct refusal){400, "a message is {\"text\": \"…\"} and nothing else"};
        else if (json_string_length(text) == 0)
                *no = (struct refusal){400, "a message's text is not empty"};
        else
                no->status = 0;
        if (no->status)
                return 1;
        size_t chars = 0;
        for (const char *p = json_string_value(text); *p; p++)
                chars += ((unsigned char)*p & 0xc0) != 0x80;
        if (chars > (size_t)max_text) {
                *no = (struct refusal){413, "a message's text is longer than M0_ROOMS_MAX_TEXT "
                                            "characters"};
                return 1;
        }
        *ret = json_string_value(text);
        return 0;
}

/* Store the message in one transaction: refused if its user posted M0_ROOMS_USER_POSTS in the
 * last minute (every room, every session and loop: the count is the database's), the room made
 * if new (within M0_ROOMS_MAX_ROOMS), the message added, the room's oldest past M0_ROOMS_KEEP
 * dropped. 0 and the row as JSON, 1 and the refusal, or -errno. */
static int store(struct rooms *t, const char *room, const char *user, const char *text,
                 json_t **ret, struct refusal *no)
{
        int r = exec(t, "BEGIN IMMEDIATE");
        if (r < 0)
                return r;
        sqlite3_stmt *s = stmt(t, Q_RECENT);
        sqlite3_bind_text(s, 1, user, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, now_s() - 60);
        int rc = sqlite3_step(s);
        int64_t recent = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
        sqlite3_reset(s);
        if (rc != SQLITE_ROW || recent >= user_posts) {
                (void)exec(t, "ROLLBACK");
                if (rc != SQLITE_ROW)
                        return db_errno(rc);
                *no = (struct refusal){429, "M0_ROOMS_USER_POSTS messages a minute at most: "
                                            "post again in a minute"};
                return 1;
        }
        s = stmt(t, Q_ROOM_ADD);
        sqlite3_bind_text(s, 1, room, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, max_rooms);
        r = run(s);
        s = stmt(t, Q_ROOM_HAS);
        sqlite3_bind_text(s, 1, room, -1, SQLITE_STATIC);
        rc = r < 0 ? SQLITE_OK : sqlite3_step(s);
        sqlite3_reset(s);
        if (r == 0 && rc == SQLITE_DONE) {
                (void)exec(t, "ROLLBACK");
                *no = (struct refusal){507, "M0_ROOMS_MAX_ROOMS rooms exist: post in one of them"};
                return 1;
        }
        if (r == 0 && rc != SQLITE_ROW)
                r = db_errno(rc);
        json_t *j = NULL;
        if (r == 0) {
                s = stmt(t, Q_POST);
                sqlite3_bind_text(s, 1, room, -1, SQLITE_STATIC);
                sqlite3_bind_text(s, 2, user, -1, SQLITE_STATIC);
                sqlite3_bind_text(s, 3, text, -1, SQLITE_STATIC);
                sqlite3_bind_int64(s, 4, now_s());
                rc = sqlite3_step(s);
                j = rc == SQLITE_ROW ? message_json(s) : NULL;
                r = rc != SQLITE_ROW ? db_errno(rc) : j ? 0 : -ENOMEM;
                sqlite3_reset(s);
        }
        if (r == 0) {
                s = stmt(t, Q_TRIM);
                sqlite3_bind_text(s, 1, room, -1, SQLITE_STATIC);
                sqlite3_bind_int64(s, 2, keep);
                r = run(s);
        }
        if (r == 0)
                r = exec(t, "COMMIT");
        if (r < 0) {
                (void)exec(t, "ROLLBACK");
                json_decref(j);
                return r;
        }
        *ret = j;
        return 0;
}

/*
 * Post: stored, then published on the room's channel, then the event's id written beside the
 * message for a backfill. The message is committed whatever happens after, so a failure to
 * publish is logged, not answered (the sender would post it twice). 0 with the message and
 * its event's id (0 when the bus gives it later: M0_BUS=postgresql://…), 1 and the refusal,
 * or -errno.
 */
static int post(struct rooms *t, const char *room, const char *user, const char *text, json_t **ret,
                int64_t *ret_event, struct refusal *no)
{
        json_t *j = NULL;
        int r = store(t, room, user, text, &j, no);
        if (r != 0)
                return r;
        char channel[ROOM_MAX + 8];
        snprintf(channel, sizeof(channel), "room:%s", room);
        int64_t id = m0_publish_json(channel, "message", j, 0);
        if (id < 0)
                m0_log(M0_LOG_WARNING, "rooms: a message of %s was not published: %s", channel,
                       strerror((int)-id));
        if (id > 0) {
                sqlite3_stmt *s = stmt(t, Q_EVENT_ID);
                sqlite3_bind_int64(s, 1, json_integer_value(json_object_get(j, "id")));
                sqlite3_bind_int64(s, 2, id);
                if ((r = run(s)) < 0) /* only a backfill misses it */
                        m0_log(M0_LOG_WARNING, "rooms: event %lld's id not kept: %s", (long long)id,
                               strerror(-r));
        }
        *ret = j;
        *ret_event = id > 0 ? id : 0;
        return 0;
}

/* POST /rooms/:room/messages, {"text": "…"}: 201, the message as stored, and X-Event-Id (the
 * bus's id of its event). */
static int post_message(m0_req *req, m0_res *res, void *state)
{
        char user[USER_MAX + 1];
        unsigned char key[KEY_BYTES];
        int r = enter(state, req, res, user, key);
        if (r != 0)
                return r < 0 ? r : 0;
        json_t *body, *j = NULL;
        if ((r = m0_req_json(req, &body)) < 0)
                return r; /* the host's 400 (not JSON) and 415 */
        const char *text, *room = m0_req_param(req, "room");
        struct refusal no;
        int64_t event = 0;
        r = text_of(body, &text, &no);
        if (r == 0)
                r = post(state, room, user, text, &j, &event, &no);
        if (r == 1 && no.status == 429) /* the window is a minute: the oldest of it ends in one */
                r = (r = m0_res_header(res, "Retry-After", "60")) < 0 ? r : 1;
        if (r != 0)
                return r < 0 ? r : problem(req, res, no.status, no.detail);
        r = app_where(req, res);
        if (r == 0 && event > 0)
                r = m0_res_headerf(res, "X-Event-Id", "%lld", (long long)event);
        if (r == 0)
                r = m0_res_json_value(res, 201, j);
        json_decref(j);
        return r;
}

/* ---- history ---- */

/* A query parameter in [1, max], `def` when absent: 0, or the -errno for the host's 400. */
static int query_num(m0_req *req, const char *name, long max, long def, long *ret)
{
        int r = m0_req_query_int(req, name, 1, max, ret);
        if (r == -ENOENT) {
                *ret = def;
                r = 0;
        }
        return r;
}

/* GET /rooms/:room/messages?before=ID&limit=N: {"messages": […]}, the room's `limit` (default
 * and most M0_ROOMS_MAX_PAGE) messages before id ID (default: the newest), oldest first; the
 * first one's id is the next page's `before`. ?after=ID instead: the `limit` after ID, which
 * is how a client that got an m0-gap fills its hole. */
static int history(m0_req *req, m0_res *res, void *state)
{
        char user[USER_MAX + 1];
        unsigned char key[KEY_BYTES];
        long before, after, limit;
        int r = enter(state, req, res, user, key);
        if (r != 0)
                return r < 0 ? r : 0;
        if ((r = query_num(req, "before", INT64_MAX, INT64_MAX, &before)) < 0 ||
            (r = query_num(req, "after", INT64_MAX, 0, &after)) < 0 ||
            (r = query_num(req, "limit", max_page, max_page, &limit)) < 0)
                return r;
        if (after && m0_req_query(req, "before"))
                return problem(req, res, 400, "give before or after, not both");
        sqlite3_stmt *s = stmt(state, after ? Q_AFTER : Q_BEFORE);
        sqlite3_bind_text(s, 1, m0_req_param(req, "room"), -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, after ? after : before);
        sqlite3_bind_int64(s, 3, limit);
        json_t *all = json_array();
        int rc = all ? SQLITE_ROW : SQLITE_NOMEM;
        while (rc == SQLITE_ROW && (rc = sqlite3_step(s)) == SQLITE_ROW)
                if (json_array_append_new(all, message_json(s)) < 0)
                        rc = SQLITE_NOMEM;
        sqlite3_reset(s);
        json_t *j = rc == SQLITE_DONE ? json_pack("{s:o}", "messages", all) : NULL;
        if (rc != SQLITE_DONE)
                json_decref(all);
        r = rc != SQLITE_DONE ? db_errno(rc) : j ? app_where(req, res) : -ENOMEM;
        if (r == 0)
                r = m0_res_json_value(res, 200, j);
        json_decref(j);
        return r;
}

/* ---- following: an event stream, or a WebSocket that posts too ---- */

static int follow(m0_req *req, m0_res *res)
{
        char channel[ROOM_MAX + 8];
        snprintf(channel, sizeof(channel), "room:%s", m0_req_param(req, "room"));
        return m0_res_subscribe(res, channel);
}

/* GET /rooms/:room/events: the room's messages as a server-sent event stream, resumed after
 * Last-Event-ID (the fallback for a client without WebSocket). */
static int events(m0_req *req, m0_res *res, void *state)
{
        char user[USER_MAX + 1];
        unsigned char key[KEY_BYTES];
        int r = enter(state, req, res, user, key);
        return r != 0 ? (r < 0 ? r : 0) : follow(req, res);
}

/* One room's WebSocket: what its messages post with. Made by the upgrade's handler, freed by
 * on_close; used on its loop alone. */
struct socket {
        struct rooms *t; /* the loop's state, which outlives its WebSockets */
        char room[ROOM_MAX + 1];
        unsigned char key[KEY_BYTES]; /* its session, looked up again at every post */
};

/* A refusal of a message sent over the WebSocket, in the shape of the bus's messages (one
 * parser for the client): {"id": null, "channel", "event": "problem", "data": problem+json}. */
static void ws_refuse(m0_ws *ws, const struct socket *k, const struct refusal *no)
{
        static const struct {
                int status;
                const char *title;
        } titles[] = {{400, "Bad Request"},         {401, "Unauthorized"},
                      {413, "Content Too Large"},   {415, "Unsupported Media Type"},
                      {429, "Too Many Requests"},   {500, "Internal Server Error"},
                      {507, "Insufficient Storage"}};
        const char *title = "Error";
        for (size_t i = 0; i < sizeof(titles) / sizeof(titles[0]); i++)
                if (titles[i].status == no->status)
                        title = titles[i].title;
        char *data = NULL, *text = NULL, channel[ROOM_MAX + 8];
        snprintf(channel, sizeof(channel), "room:%s", k->room);
        json_t *p = json_pack("{s:s,s:s,s:i,s:s}", "type", "about:blank", "title", title, "status",
                              no->status, "detail", no->detail);
        data = p ? json_dumps(p, JSON_COMPACT) : NULL;
        json_t *m = data ? json_pack("{s:n,s:s,s:s,s:s}", "id", "channel", channel, "event",
                                     "problem", "data", data)
                         : NULL;
        text = m ? json_dumps(m, JSON_COMPACT) : NULL;
        if (text)
                (void)m0_ws_send(ws, M0_WS_TEXT, text, strlen(text));
        free(text);
        free(data);
        json_decref(m);
        json_decref(p);
}

/*
 * A text message `{"text": "…"}` posts to the room as POST does, as the session's user if it
 * is still live (one logged out is closed 1008); the sender gets its message back
 * from the room's channel, as everyone does. It runs on the loop, SQLite's fsync with it: a
 * room with many writers would hand its posts to a thread of its own.
 */
static void ws_message(m0_ws *ws, int type, const void *data, size_t len, void *state)
{
        struct socket *k = state;
        char user[USER_MAX + 1];
        struct refusal no = {0};
        json_t *body = NULL, *j = NULL;
        const char *text = NULL;
        int64_t event;
        int r = session_user(k->t, k->key, user);
        if (r == 0)
                no = (struct refusal){401, "the session ended: log in again"};
        else if (r > 0 && type != M0_WS_TEXT)
                no = (struct refusal){415, "a message is JSON text: {\"text\": \"…\"}"};
        else if (r > 0 && !(body = json_loadb(data, len, JSON_REJECT_DUPLICATES, NULL)))
                no = (struct refusal){400, "a message is JSON text: {\"text\": \"…\"}"};
        else if (r > 0 && (r = text_of(body, &text, &no)) == 0)
                r = post(k->t, k->room, user, text, &j, &event, &no);
        if (r < 0)
                no = (struct refusal){500, "the message could not be stored"};
        /* a close goes out before what is queued (wslay sends control frames first), so the
         * logged out are told by the close's reason alone */
        if (no.status == 401)
                (void)m0_ws_close(ws, 1008, "the session ended: log in again");
        else if (no.status)
                ws_refuse(ws, k, &no);
        json_decref(body);
        json_decref(j);
}

static void ws_close(m0_ws *ws, int code, void *state)
{
        (void)ws;
        (void)code;
        sodium_memzero(state, sizeof(struct socket));
        free(state);
}

static const m0_ws_callbacks ws_callbacks = {.on_message = ws_message, .on_close = ws_close};

/* GET /rooms/:room/ws: the room's messages as WebSocket text messages, resumed after the
 * query's last_event_id (WS2), and its posts as text messages. */
static int websocket(m0_req *req, m0_res *res, void *state)
{
        struct socket *k = calloc(1, sizeof(*k));
        char user[USER_MAX + 1];
        int r = k ? enter(state, req, res, user, k->key) : -ENOMEM;
        if (r == 0) {
                k->t = state;
                snprintf(k->room, sizeof(k->room), "%s", m0_req_param(req, "room"));
                r = follow(req, res);
        }
        if (r == 0 && (r = m0_res_websocket(res, &ws_callbacks, k)) == 0)
                return 0;
        free(k);
        return r < 0 ? r : 0;
}

/*
 * AP2: a stream whose Last-Event-ID is older than what the bus keeps of a room gets the
 * messages between from SQLite, by their events' ids, after its m0-gap event and before the
 * kept ones: at most M0_ROOMS_BACKFILL_MAX, the newest of them, and fewer when they pass the
 * stream's output bound (the client then reads the rest with ?before=). A WebSocket gets the
 * same, as messages with a null id between its m0-gap message and the kept ones.
 */
static int backfill(m0_backfill *bf, const char *channel, uint64_t last_id, uint64_t oldest,
                    void *state)
{
        if (strncmp(channel, "room:", 5) != 0)
                return 0;
        sqlite3_stmt *s = stmt(state, Q_BACKFILL);
        sqlite3_bind_text(s, 1, channel + 5, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, (sqlite3_int64)last_id);
        sqlite3_bind_int64(s, 3, (sqlite3_int64)oldest);
        sqlite3_bind_int64(s, 4, backfill_max);
        int r = 0, rc = SQLITE_DONE;
        while (r == 0 && (rc = sqlite3_step(s)) == SQLITE_ROW) {
                json_t *j = message_json(s);
                char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
                r = text ? m0_backfill_event(bf, "message", text) : -ENOMEM;
                free(text);
                json_decref(j);
        }
        sqlite3_reset(s);
        if (r == -ENOBUFS)
                return 0;
        return r < 0 ? r : rc == SQLITE_DONE ? 0 : db_errno(rc);
}

/* ---- configuration ---- */

static int refuse(char *fix, size_t xlen, const char *how)
{
        snprintf(fix, xlen, "%s", how);
        return -EINVAL;
}

/* M0_ROOMS_DB, else STATE_DIRECTORY's first directory, else the current directory. */
static int db_path_read(char *finding, size_t flen, char *fix, size_t xlen)
{
        const char *file = getenv("M0_ROOMS_DB"), *dir = getenv("STATE_DIRECTORY");
        char cwd[2048];
        size_t n;
        if (file && *file)
                n = (size_t)snprintf(db_path, sizeof(db_path), "%s", file);
        else if (dir && *dir)
                n = (size_t)snprintf(db_path, sizeof(db_path), "%.*s/rooms.db",
                                     (int)strcspn(dir, ":"), dir);
        else
                n = (size_t)snprintf(db_path, sizeof(db_path), "%s/rooms.db",
                                     getcwd(cwd, sizeof(cwd)) ? cwd : ".");
        if (n < sizeof(db_path))
                return 0;
        snprintf(finding, flen, "the database's path is longer than %zu bytes", sizeof(db_path));
        return refuse(fix, xlen, "set M0_ROOMS_DB to a shorter path");
}

/* Variable `var` in [min, max], `def` when unset; a refusal naming it otherwise. */
static int knob(const char *var, long def, long min, long max, long *ret, char *finding,
                size_t flen, char *fix, size_t xlen)
{
        *ret = app_env_long(var, def, min - 1);
        if (*ret >= min && *ret <= max)
                return 0;
        snprintf(finding, flen, "%s='%s' is not a number from %ld to %ld", var, getenv(var), min,
                 max);
        snprintf(fix, xlen, "set %s to %ld..%ld, or unset it (%ld)", var, min, max, def);
        return -EINVAL;
}

static int knobs(char *finding, size_t flen, char *fix, size_t xlen)
{
        int e;
        if ((e = knob("M0_ROOMS_BUSY_MS", 5000, 1, 60000, &busy_ms, finding, flen, fix, xlen)) ||
            (e = knob("M0_ROOMS_SESSION_S", 86400, 60, 30L * 86400, &session_s, finding, flen, fix,
                      xlen)) ||
            (e = knob("M0_ROOMS_MAX_SESSIONS", 100000, 1, 10000000, &max_sessions, finding, flen,
                      fix, xlen)) ||
            (e = knob("M0_ROOMS_MAX_TEXT", 2000, 1, 65536, &max_text, finding, flen, fix, xlen)) ||
            (e = knob("M0_ROOMS_MAX_ROOMS", 1000, 1, 1000000, &max_rooms, finding, flen, fix,
                      xlen)) ||
            (e = knob("M0_ROOMS_KEEP", 10000, 1, 100000000, &keep, finding, flen, fix, xlen)) ||
            (e = knob("M0_ROOMS_MAX_PAGE", 100, 1, 10000, &max_page, finding, flen, fix, xlen)) ||
            (e = knob("M0_ROOMS_BACKFILL_MAX", 500, 0, 100000, &backfill_max, finding, flen, fix,
                      xlen)) ||
            (e = knob("M0_ROOMS_USER_POSTS", 60, 1, 1000000, &user_posts, finding, flen, fix,
                      xlen)))
                return e;
        return knob("M0_ROOMS_SECURE_COOKIE", 0, 0, 1, &secure, finding, flen, fix, xlen);
}

/* Runs on the coordinator before any handler exists, for serving and --doctor alike. */
static int check(char *finding, size_t flen, char *fix, size_t xlen)
{
        int e = knobs(finding, flen, fix, xlen);
        if (e)
                return e;
        if (origins_star) {
                snprintf(finding, flen, "M0_ROOMS_ORIGINS names '*'");
                return refuse(fix, xlen,
                              "list the origins whose pages may use the rooms with their "
                              "cookies: any origin could act as the user");
        }
        if (origins_over) {
                snprintf(finding, flen,
                         "M0_ROOMS_ORIGINS names more than %d origins, or more than %zu bytes "
                         "of them",
                         MAX_ORIGINS, sizeof(origins_text) - 1);
                return refuse(fix, xlen, "list fewer origins in M0_ROOMS_ORIGINS");
        }
        e = db_path_read(finding, flen, fix, xlen);
        if (e == 0)
                snprintf(finding, flen, "rooms in %s", db_path);
        return e;
}

/* M0_ROOMS_ORIGINS: the origins whose pages may call with their cookies, separated by commas
 * or spaces. NULL when unset: no CORS, and a WebSocket takes its Host's own origin alone. */
static const char *const *origins_read(void)
{
        const char *v = getenv("M0_ROOMS_ORIGINS");
        size_t n = 0;
        if (!v || !*v)
                return NULL;
        if (strlen(v) >= sizeof(origins_text))
                origins_over = 1;
        snprintf(origins_text, sizeof(origins_text), "%s", v);
        char *save;
        for (char *o = strtok_r(origins_text, ", ", &save); o; o = strtok_r(NULL, ", ", &save)) {
                origins_star |= strcmp(o, "*") == 0;
                if (n < MAX_ORIGINS)
                        origins[n++] = o;
                else
                        origins_over = 1;
        }
        return n ? origins : NULL;
}

#define FORM .max_body_bytes = FORM_MAX, .content_type = "application/x-www-form-urlencoded"
#define ROUTE_POST 2
#define ROUTE_WS 5

/* What writes (an fsync per commit) is a blocking route, on the loop's pool when there is one;
 * following must be on the loop, and the reads stay there (a WAL reader waits for no writer). */
static m0_route routes[] = {
        M0_ROUTE("POST", "/login", login, .flags = M0_ROUTE_BLOCKING, FORM),
        M0_ROUTE("POST", "/logout", logout, .flags = M0_ROUTE_BLOCKING),
        /* ROUTE_POST: its body's bound follows M0_ROOMS_MAX_TEXT (main) */
        M0_ROUTE("POST", "/rooms/:room/messages", post_message, .flags = M0_ROUTE_BLOCKING,
                 .content_type = "application/json"),
        M0_ROUTE("GET", "/rooms/:room/messages", history),
        M0_ROUTE("GET", "/rooms/:room/events", events),
        /* ROUTE_WS: its origins are M0_ROOMS_ORIGINS (main) */
        M0_ROUTE("GET", "/rooms/:room/ws", websocket),
        M0_ROUTE_END,
};

int main(int argc, char **argv)
{
        static m0_app app = {
                .name = "rooms",
                .make = make,
                .free = rooms_free,
                .routes = routes,
                .check = check,
                .backfill = backfill,
                .flags = M0_APP_ERRORS_JSON,
        };
        if (sodium_init() < 0) {
                fprintf(stderr, "rooms: libsodium cannot start\n");
                return 1;
        }
        /* '*' is check()'s to refuse, naming M0_ROOMS_ORIGINS, before the host's CORS check */
        const char *const *listed = origins_read();
        if (listed && !origins_star) {
                routes[ROUTE_WS].ws_origins = listed;
                app.cors = &cors;
        }
        /* every character of the longest text escaped as a surrogate pair of \u escapes */
        long max = app_env_long("M0_ROOMS_MAX_TEXT", 2000, 0);
        routes[ROUTE_POST].max_body_bytes = (uint64_t)(max > 0 && max <= 65536 ? max : 1) * 12 + 64;
        return m0_main(&app, argc, argv);
}
