/* SPDX-License-Identifier: MIT */
/* todo: a JSON todo list in SQLite, each change published to /events (SPEC A7). doc/tutorial.md
 * builds it step by step; it is the example to copy. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include <m0.h>

#include "common.h"

#define TITLE_MAX 200 /* characters: the contract's bound on a title */

/* The largest body a write takes: the longest title with every character written as a
 * surrogate pair of \u escapes (12 bytes each) fits, with room for "done" and spaces. */
#define BODY_MAX 4096

#define MAX_ORIGINS 16

/*
 * The schema, made by the first connection. AUTOINCREMENT: an id is never given twice, so a
 * deleted todo's URL stays 404 after new ones are made (D90). WAL lets readers on other threads
 * run beside a writer; synchronous=FULL makes COMMIT fsync the log, so an answered write is on
 * disk, not only in the kernel's cache (D89).
 */
static const char setup_sql[] = "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
                                "CREATE TABLE IF NOT EXISTS todos ("
                                " id INTEGER PRIMARY KEY AUTOINCREMENT,"
                                " title TEXT NOT NULL,"
                                " done INTEGER NOT NULL DEFAULT 0);";

enum { Q_LIST, Q_GET, Q_CREATE, Q_UPDATE, Q_DELETE, Q_COUNT, Q_N };

/* Every write returns the row it wrote: the answer and the event are the todo as stored. */
static const char *const query_sql[Q_N] = {
        [Q_LIST] = "SELECT id, title, done FROM todos ORDER BY id",
        [Q_GET] = "SELECT id, title, done FROM todos WHERE id = ?1",
        [Q_CREATE] = "INSERT INTO todos(title, done) SELECT ?1, ?2"
                     " WHERE (SELECT count(*) FROM todos) < ?3 RETURNING id, title, done",
        [Q_UPDATE] = "UPDATE todos SET title = coalesce(?2, title), done = coalesce(?3, done)"
                     " WHERE id = ?1 RETURNING id, title, done",
        [Q_DELETE] = "DELETE FROM todos WHERE id = ?1 RETURNING id, title, done",
        [Q_COUNT] = "SELECT count(*), coalesce(max(id), 0) FROM todos",
};

/* One handler state: a connection of its own, used by the one thread it was made for. */
struct todo {
        sqlite3 *db;
        sqlite3_stmt *q[Q_N];
};

/* Read by check() on the coordinator before any handler exists; read-only after. */
static char db_path[4096];
static long busy_ms, heartbeat_ms, max_todos, credentials;

/* M0_TODO_ORIGINS and M0_TODO_CREDENTIALS, read by main() before the host starts; check()
 * refuses too many origins, and credentials without one. */
static char origins_text[4096];
static const char *origins[MAX_ORIGINS + 1];
static int origins_over;
static m0_cors cors = {.origins = origins, .expose_headers = "Location"};

/* ---- the database ---- */

static void todo_free(void *state)
{
        struct todo *t = state;
        if (!t)
                return;
        for (int i = 0; i < Q_N; i++)
                sqlite3_finalize(t->q[i]);
        sqlite3_close(t->db);
        free(t);
}

/*
 * Every thread's `make`: a connection in WAL mode with a busy timeout, its statements prepared.
 * The makes of a start run at once and open the file one at a time: on a new file the first
 * one's switch to WAL and CREATE TABLE meet the others' locks, which SQLite may answer with
 * SQLITE_BUSY at once rather than wait (a lock upgrade that waited could deadlock).
 */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

static int make(const m0_handler_info *info, void **ret_state, char *err, size_t err_len)
{
        struct todo *t = calloc(1, sizeof(*t));
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
                snprintf(err, err_len, "cannot open %s: %s (M0_TODO_DB names the file)", db_path,
                         t->db ? sqlite3_errmsg(t->db) : sqlite3_errstr(rc));
                todo_free(t);
                return -EIO;
        }
        if (info->kind == M0_THREAD_LOOP && info->loop == 0)
                m0_log(M0_LOG_NOTICE, "todos in %s", db_path);
        *ret_state = t;
        return 0;
}

/* Statement `q`, reset and unbound. */
static sqlite3_stmt *stmt(struct todo *t, int q)
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

static json_t *todo_json(sqlite3_stmt *s)
{
        return json_pack("{s:I,s:s,s:b}", "id", (json_int_t)sqlite3_column_int64(s, 0), "title",
                         (const char *)sqlite3_column_text(s, 1), "done", sqlite3_column_int(s, 2));
}

/* Run `s`: its row as a todo in *ret (NULL when it matched none). It is stepped to its end
 * before this returns, which is where a write commits. */
static int one(sqlite3_stmt *s, json_t **ret)
{
        json_t *j = NULL;
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
                j = todo_json(s);
                rc = j ? sqlite3_step(s) : SQLITE_NOMEM;
        }
        sqlite3_reset(s);
        if (rc != SQLITE_DONE) {
                json_decref(j);
                return db_errno(rc);
        }
        *ret = j;
        return 0;
}

/* ---- answers ---- */

/* RFC 9457, as the host writes its own answers under M0_APP_ERRORS_JSON (AP1). */
static int problem(m0_req *req, m0_res *res, int status, const char *detail)
{
        int r = app_where(req, res);
        return r < 0 ? r : m0_res_problem(res, status, NULL, detail);
}

static int not_found(m0_req *req, m0_res *res)
{
        return problem(req, res, 404, "no todo has this id");
}

static int invalid(m0_req *req, m0_res *res, const char *detail)
{
        return problem(req, res, 422, detail);
}

/* The todo as the answer's body; `j` is released. */
static int send_todo(m0_req *req, m0_res *res, int status, json_t *j)
{
        int r = j ? app_where(req, res) : -ENOMEM;
        if (r == 0)
                r = m0_res_json_value(res, status, j);
        json_decref(j);
        return r;
}

/* Tell every stream of the todos channel. The write is committed whatever happens here, so a
 * failure is logged, not answered: the client would send it again. */
static void publish(const char *event, const json_t *todo)
{
        int64_t id = m0_publish_json("todos", event, todo, 0);
        if (id < 0)
                m0_log(M0_LOG_WARNING, "todo: the %s event was not published: %s", event,
                       strerror((int)-id));
}

/* ---- requests ---- */

/* The :id capture as a row id; 0 (no row) for anything but a positive decimal. */
static int64_t todo_id(m0_req *req)
{
        const char *s = m0_req_param(req, "id");
        char *end;
        if (!s || *s < '1' || *s > '9')
                return 0;
        errno = 0;
        long long id = strtoll(s, &end, 10);
        return *end || errno ? 0 : id;
}

/* A change to a todo, as a body asks for it. */
struct change {
        const char *title; /* NULL: unchanged, else in the request's JSON */
        int done;          /* -1: unchanged */
};

/* Read the body into `c`: 0, or 1 with the answer made (422), or -errno. A new todo needs
 * a title, a change something to change. A title is counted in characters: jansson has checked
 * that it is UTF-8. */
static int change_read(m0_req *req, m0_res *res, struct change *c, int creating)
{
        json_t *body;
        int r = m0_req_json(req, &body); /* bad JSON and other types: the host's 400 and 415 */
        if (r < 0)
                return r;
        *c = (struct change){.done = -1};
        json_t *title = json_object_get(body, "title"), *done = json_object_get(body, "done");
        const char *why = NULL;
        if (!json_is_object(body))
                why = "the body must be a JSON object";
        else if (json_object_size(body) != (size_t)(!!title + !!done))
                why = "a todo has only a title and done";
        else if (creating && !title)
                why = "title is required";
        else if (!title && !done)
                why = "nothing to change: give a title, done, or both";
        else if (title && !json_is_string(title))
                why = "title must be a string";
        else if (done && !json_is_boolean(done))
                why = "done must be true or false";
        if (!why && title) {
                size_t chars = 0;
                for (const char *p = json_string_value(title); *p; p++)
                        chars += ((unsigned char)*p & 0xc0) != 0x80;
                if (chars < 1 || chars > TITLE_MAX)
                        why = "title must be 1 to 200 characters";
                c->title = json_string_value(title);
        }
        c->done = done ? json_is_true(done) : -1;
        if (!why)
                return 0;
        r = invalid(req, res, why);
        return r < 0 ? r : 1;
}

static int list_todos(m0_req *req, m0_res *res, void *state)
{
        sqlite3_stmt *s = stmt(state, Q_LIST);
        json_t *all = json_array();
        int rc = all ? SQLITE_ROW : SQLITE_NOMEM;
        while (rc == SQLITE_ROW && (rc = sqlite3_step(s)) == SQLITE_ROW)
                if (json_array_append_new(all, todo_json(s)) < 0)
                        rc = SQLITE_NOMEM;
        sqlite3_reset(s);
        if (rc != SQLITE_DONE) {
                json_decref(all);
                return db_errno(rc);
        }
        return send_todo(req, res, 200, all);
}

/* Run statement `q` on the request's :id: the todo in *ret, NULL when there is none. */
static int on_id(void *state, int q, m0_req *req, json_t **ret)
{
        sqlite3_stmt *s = stmt(state, q);
        sqlite3_bind_int64(s, 1, todo_id(req));
        return one(s, ret);
}

static int get_todo(m0_req *req, m0_res *res, void *state)
{
        json_t *j = NULL;
        int r = on_id(state, Q_GET, req, &j);
        if (r < 0)
                return r;
        return j ? send_todo(req, res, 200, j) : not_found(req, res);
}

static int create_todo(m0_req *req, m0_res *res, void *state)
{
        struct change c;
        json_t *j = NULL;
        int r = change_read(req, res, &c, 1);
        if (r == 0) {
                sqlite3_stmt *s = stmt(state, Q_CREATE);
                sqlite3_bind_text(s, 1, c.title, -1, SQLITE_STATIC);
                sqlite3_bind_int(s, 2, c.done == 1);
                sqlite3_bind_int64(s, 3, max_todos);
                r = one(s, &j);
        }
        if (r != 0)
                return r < 0 ? r : 0;
        if (!j)
                return problem(req, res, 507, "the list is full: it holds M0_TODO_MAX_TODOS todos");
        publish("created", j);
        r = m0_res_headerf(res, "Location", "/todos/%lld",
                           (long long)json_integer_value(json_object_get(j, "id")));
        return r < 0 ? r : send_todo(req, res, 201, j);
}

static int update_todo(m0_req *req, m0_res *res, void *state)
{
        struct change c;
        json_t *j = NULL;
        int r = change_read(req, res, &c, 0);
        if (r == 0) {
                sqlite3_stmt *s = stmt(state, Q_UPDATE);
                sqlite3_bind_int64(s, 1, todo_id(req));
                if (c.title)
                        sqlite3_bind_text(s, 2, c.title, -1, SQLITE_STATIC);
                if (c.done >= 0)
                        sqlite3_bind_int(s, 3, c.done);
                r = one(s, &j);
        }
        if (r != 0)
                return r < 0 ? r : 0;
        if (!j)
                return not_found(req, res);
        publish("updated", j);
        return send_todo(req, res, 200, j);
}

static int delete_todo(m0_req *req, m0_res *res, void *state)
{
        json_t *j = NULL;
        int r = on_id(state, Q_DELETE, req, &j);
        if (r < 0)
                return r;
        if (!j)
                return not_found(req, res);
        publish("deleted", j);
        json_decref(j);
        r = app_where(req, res);
        return r < 0 ? r : m0_res_status(res, 204);
}

/* The list as CSV (RFC 4180): every title quoted, its quotes doubled, and one that a spreadsheet
 * would read as a formula (its first character = + - @, a tab or a CR) behind a ' that keeps it
 * text (OWASP's CSV injection; D105). A blocking route: on the pool when there is one, since a
 * long list is a long answer to build. */
static int export_csv(m0_req *req, m0_res *res, void *state)
{
        sqlite3_stmt *s = stmt(state, Q_LIST);
        int r = app_where(req, res), rc = SQLITE_ROW;
        if (r == 0)
                r = m0_res_header(res, "Content-Type", "text/csv; charset=utf-8");
        if (r == 0)
                r = m0_res_printf(res, "id,title,done\r\n");
        while (r == 0 && (rc = sqlite3_step(s)) == SQLITE_ROW) {
                const char *t = (const char *)sqlite3_column_text(s, 1);
                r = m0_res_printf(res, "%lld,\"%s", (long long)sqlite3_column_int64(s, 0),
                                  *t && strchr("=+-@\t\r", *t) ? "'" : "");
                for (const char *q; r == 0 && (q = strchr(t, '"')); t = q + 1)
                        if ((r = m0_res_write(res, t, (size_t)(q - t + 1))) == 0)
                                r = m0_res_write(res, "\"", 1);
                if (r == 0)
                        r = m0_res_printf(res, "%s\",%s\r\n", t,
                                          sqlite3_column_int(s, 2) ? "true" : "false");
        }
        sqlite3_reset(s);
        return r < 0 ? r : rc == SQLITE_DONE ? 0 : db_errno(rc);
}

static int events(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        int r = app_where(req, res);
        return r < 0 ? r : m0_res_subscribe(res, "todos");
}

/* The producer's heartbeat: how many todos there are and the newest id, from its own
 * connection, every M0_TODO_HEARTBEAT_MS; transient, so a reconnecting client is not replayed
 * old ones. */
static int64_t heartbeat(void *state)
{
        sqlite3_stmt *s = stmt(state, Q_COUNT);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
                json_t *beat = json_pack("{s:I,s:I}", "todos", sqlite3_column_int64(s, 0),
                                         "last_id", sqlite3_column_int64(s, 1));
                if (beat)
                        (void)m0_publish_json("todos", "heartbeat", beat, M0_PUBLISH_TRANSIENT);
                json_decref(beat);
        }
        sqlite3_reset(s);
        return rc == SQLITE_ROW ? heartbeat_ms : db_errno(rc);
}

/* ---- configuration ---- */

static int refuse(char *fix, size_t xlen, const char *how)
{
        snprintf(fix, xlen, "%s", how);
        return -EINVAL;
}

/* M0_TODO_DB, else STATE_DIRECTORY's first directory, else the current directory. */
static int db_path_read(char *finding, size_t flen, char *fix, size_t xlen)
{
        const char *file = getenv("M0_TODO_DB"), *dir = getenv("STATE_DIRECTORY");
        char cwd[2048];
        size_t n;
        if (file && *file)
                n = (size_t)snprintf(db_path, sizeof(db_path), "%s", file);
        else if (dir && *dir)
                n = (size_t)snprintf(db_path, sizeof(db_path), "%.*s/todo.db",
                                     (int)strcspn(dir, ":"), dir);
        else
                n = (size_t)snprintf(db_path, sizeof(db_path), "%s/todo.db",
                                     getcwd(cwd, sizeof(cwd)) ? cwd : ".");
        if (n < sizeof(db_path))
                return 0;
        snprintf(finding, flen, "the database's path is longer than %zu bytes", sizeof(db_path));
        return refuse(fix, xlen, "set M0_TODO_DB to a shorter path");
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

/* Runs on the coordinator before any handler exists, for serving and --doctor alike. */
static int check(char *finding, size_t flen, char *fix, size_t xlen)
{
        int e;
        if ((e = knob("M0_TODO_BUSY_MS", 5000, 1, 60000, &busy_ms, finding, flen, fix, xlen)) ||
            (e = knob("M0_TODO_HEARTBEAT_MS", 15000, 100, 3600000, &heartbeat_ms, finding, flen,
                      fix, xlen)) ||
            (e = knob("M0_TODO_MAX_TODOS", 10000, 1, 10000000, &max_todos, finding, flen, fix,
                      xlen)) ||
            (e = knob("M0_TODO_CREDENTIALS", 0, 0, 1, &credentials, finding, flen, fix, xlen)))
                return e;
        if (credentials && !origins[0]) {
                snprintf(finding, flen, "M0_TODO_CREDENTIALS=1 without M0_TODO_ORIGINS");
                return refuse(fix, xlen,
                              "list the origins that may send cookies in M0_TODO_ORIGINS, or "
                              "unset M0_TODO_CREDENTIALS");
        }
        if (origins_over) {
                snprintf(finding, flen,
                         "M0_TODO_ORIGINS names more than %d origins, or more "
                         "than %zu bytes of them",
                         MAX_ORIGINS, sizeof(origins_text) - 1);
                return refuse(fix, xlen, "list fewer origins in M0_TODO_ORIGINS");
        }
        e = db_path_read(finding, flen, fix, xlen);
        if (e == 0)
                snprintf(finding, flen, "todos in %s", db_path);
        return e;
}

/* M0_TODO_ORIGINS: origins a browser may call from, separated by commas or spaces;
 * M0_TODO_CREDENTIALS=1: with cookies (Access-Control-Allow-Credentials, Q5). */
static const m0_cors *cors_read(void)
{
        const char *v = getenv("M0_TODO_ORIGINS");
        size_t n = 0;
        cors.credentials = app_env_long("M0_TODO_CREDENTIALS", 0, 0) == 1;
        if (!v || !*v)
                return NULL;
        if (strlen(v) >= sizeof(origins_text))
                origins_over = 1;
        snprintf(origins_text, sizeof(origins_text), "%s", v);
        char *save;
        for (char *o = strtok_r(origins_text, ", ", &save); o; o = strtok_r(NULL, ", ", &save))
                if (n < MAX_ORIGINS)
                        origins[n++] = o;
                else
                        origins_over = 1;
        return n ? &cors : NULL;
}

/* GET /app: the page's directory named without its '/', whose relative links would miss. */
static int to_app(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)state;
        int r = m0_res_status(res, 301);
        return r < 0 ? r : m0_res_header(res, "Location", "/app/");
}

/* The page is the files of M0_TODO_WWW at /app/ (SF1), else the copy `make install` put in
 * TODO_WWW_DEFAULT when there is one; M0_TODO_WWW set empty serves no page. main() fills in
 * the route before the host starts, and a directory it names that cannot be opened refuses the
 * start (exit 78). */
#ifndef TODO_WWW_DEFAULT
#define TODO_WWW_DEFAULT "/usr/share/m0/todo-www"
#endif
#define ROUTE_APP 8

static m0_route routes[] = {
        M0_ROUTE("GET", "/todos", list_todos, .flags = M0_ROUTE_BLOCKING),
        M0_ROUTE("POST", "/todos", create_todo, .flags = M0_ROUTE_BLOCKING,
                 .max_body_bytes = BODY_MAX, .content_type = "application/json"),
        M0_ROUTE("GET", "/todos/export", export_csv, .flags = M0_ROUTE_BLOCKING),
        M0_ROUTE("GET", "/todos/:id", get_todo),
        M0_ROUTE("PATCH", "/todos/:id", update_todo, .flags = M0_ROUTE_BLOCKING,
                 .max_body_bytes = BODY_MAX, .content_type = "application/json"),
        M0_ROUTE("DELETE", "/todos/:id", delete_todo, .flags = M0_ROUTE_BLOCKING),
        M0_ROUTE("GET", "/events", events),
        M0_ROUTE("GET", "/app", to_app),
        M0_FILES("/app/*rest", NULL), /* ROUTE_APP */
        M0_ROUTE_END,
};

static void www_read(void)
{
        const char *dir = getenv("M0_TODO_WWW");
        struct stat st;
        if (!dir && stat(TODO_WWW_DEFAULT, &st) == 0 && S_ISDIR(st.st_mode))
                dir = TODO_WWW_DEFAULT;
        if (dir && *dir)
                routes[ROUTE_APP].files = dir;
        else
                routes[ROUTE_APP - 1] = routes[ROUTE_APP] = (m0_route)M0_ROUTE_END;
}

int main(int argc, char **argv)
{
        static m0_app app = {
                .name = "todo",
                .make = make,
                .free = todo_free,
                .routes = routes,
                .step = heartbeat,
                .check = check,
                .flags = M0_APP_ERRORS_JSON,
        };
        app.cors = cors_read();
        www_read();
        return m0_main(&app, argc, argv);
}
