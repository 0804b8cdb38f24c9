/* SPDX-License-Identifier: MIT */
/* notes: an app that keeps secrets (SPEC A4): users, Argon2id logins, signed sessions, SQLite. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <m0.h>
#include <sqlite3.h>

#include "common.h"
#include "notes.h"

#define COOKIE "m0notes"
#define MAC_HEX (2 * crypto_auth_BYTES)
#define NUM_DIGITS_MAX 18 /* a uid, an expiry or a note id: below 2^63, whatever the digits */
/* `<uid>.<expiry>.<nonce>`, the part of the cookie under the MAC. */
#define PAYLOAD_MAX (NUM_DIGITS_MAX + 1 + NUM_DIGITS_MAX + 1 + NOTES_NONCE_HEX)
/* The longest body a note request needs: every byte of title and body escaped as \u00XX. */
#define NOTE_REQUEST_MAX (6 * (NOTES_TITLE_MAX + NOTES_BODY_MAX) + 1024)
#define LOGIN_REQUEST_MAX 4096

/* The one answer to a request without a valid session, whatever was wrong with it. */
#define UNAUTHORIZED "{\"error\":\"login required\"}\n"

/* The app's knobs (M0_NOTES_*), read by `check` on the coordinator and again by every `make`. */
struct config {
        char admin_hash[NOTES_HASH_MAX];
        unsigned long long admin_ops; /* its Argon2id passes and memory: the dummy's too */
        size_t admin_mem;
        long session_s;
        long max_notes; /* per user */
        long max_bytes; /* per user */
        long max_revoked;
        long busy_ms;
        int secure;
        char dir[PATH_MAX];
};

/* One handler's state: its own SQLite connection, and copies of what every handler shares. */
struct state {
        struct config cfg;
        notes_db *db;
        uint8_t key[NOTES_KEY_BYTES];
        char dummy[NOTES_HASH_MAX];
};

/*
 * Made once, by the first `make` to take the lock, and only read after: the session key, the
 * dummy hash, and the outcome of the one import. Every later `make` copies it under the lock,
 * so no handler reads it while it is written.
 */
static struct {
        pthread_mutex_t lock;
        bool done;
        int error; /* the first make's failure, given to every make after it */
        char err[PATH_MAX + 256];
        uint8_t key[NOTES_KEY_BYTES];
        char dummy[NOTES_HASH_MAX];
} shared = {.lock = PTHREAD_MUTEX_INITIALIZER};

/*
 * Logouts whose write failed: refused by every handler of this process all the same (failing
 * closed), up to M0_NOTES_MAX_REVOKED of them. Any handler writes and reads, under the lock.
 */
struct unsaved {
        int64_t uid, expiry;
        char nonce[NOTES_NONCE_HEX + 1];
};
static struct {
        pthread_mutex_t lock;
        struct unsaved *v;
        size_t n, cap;
} unsaved = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Bounds clients reached, counted for the whole process; any handler adds. */
static atomic_ullong failed_logins, notes_full, bytes_full, save_failures;

/* ---- configuration ---- */

static int refuse(char *finding, size_t flen, char *fix, size_t xlen, const char *fix_text,
                  const char *fmt, ...) M0_PRINTF(6, 7);
static int refuse(char *finding, size_t flen, char *fix, size_t xlen, const char *fix_text,
                  const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(finding, flen, fmt, ap);
        va_end(ap);
        snprintf(fix, xlen, "%s", fix_text);
        return -EINVAL;
}

/* The booleans the host itself reads (doc/configuration.md). */
static int bool_knob(const char *var, int def, int *ret, char *finding, size_t flen, char *fix,
                     size_t xlen)
{
        static const char *const on[] = {"on", "1", "yes", "true"};
        static const char *const off[] = {"off", "0", "no", "false"};
        const char *v = getenv(var);
        *ret = def;
        if (!v)
                return 0;
        for (size_t i = 0; i < 4; i++) {
                if (strcmp(v, on[i]) == 0)
                        return *ret = 1, 0;
                if (strcmp(v, off[i]) == 0)
                        return *ret = 0, 0;
        }
        char how[96];
        snprintf(how, sizeof(how), "set %s to on or off", var);
        return refuse(finding, flen, fix, xlen, how, "%s='%s' is not on or off", var, v);
}

#define HASH_FIX                                                                                   \
        "set M0_NOTES_ADMIN_HASH to what `notes --hash-password` prints for the password it "      \
        "reads "                                                                                   \
        "on stdin"

/*
 * The user admin's Argon2id hash: M0_NOTES_ADMIN_HASH, or M0_NOTES_PASSWORD_HASH, the name
 * SPEC A4 gives it. A password in plain text, or a session key, in the environment is refused:
 * neither is read any more, and a secret left there would be the one an attacker wants.
 */
static int admin_hash(struct config *c, char *finding, size_t flen, char *fix, size_t xlen)
{
        if (getenv("M0_NOTES_PASSWORD"))
                return refuse(finding, flen, fix, xlen, HASH_FIX ", and remove M0_NOTES_PASSWORD",
                              "M0_NOTES_PASSWORD is set: a password in plain text is not read");
        if (getenv("M0_NOTES_KEY"))
                return refuse(finding, flen, fix, xlen,
                              "remove M0_NOTES_KEY: notes makes its key, session.key, in the state "
                              "directory at the first start",
                              "M0_NOTES_KEY is set: sessions are signed with a key notes keeps in "
                              "its state directory");
        const char *a = getenv("M0_NOTES_ADMIN_HASH"), *b = getenv("M0_NOTES_PASSWORD_HASH");
        if (a && b && strcmp(a, b) != 0)
                return refuse(finding, flen, fix, xlen,
                              "set only M0_NOTES_ADMIN_HASH (M0_NOTES_PASSWORD_HASH is another "
                              "name for it)",
                              "M0_NOTES_ADMIN_HASH and M0_NOTES_PASSWORD_HASH are both set, and "
                              "differ");
        const char *var = a ? "M0_NOTES_ADMIN_HASH" : "M0_NOTES_PASSWORD_HASH";
        const char *h = a ? a : b;
        if (!h)
                return refuse(finding, flen, fix, xlen, HASH_FIX,
                              "M0_NOTES_ADMIN_HASH is not set: the user admin logs in with it");
        /* A hash is not the password, but it is what a guesser works on: its length only. */
        if (notes_hash_params(h, &c->admin_ops, &c->admin_mem) < 0)
                return refuse(finding, flen, fix, xlen, HASH_FIX,
                              "%s (%zu characters) is not an Argon2id string", var, strlen(h));
        snprintf(c->admin_hash, sizeof(c->admin_hash), "%s", h);
        return 0;
}

static int config_read(struct config *c, char *finding, size_t flen, char *fix, size_t xlen)
{
        int e;
        memset(c, 0, sizeof(*c));
        if ((e = admin_hash(c, finding, flen, fix, xlen)) < 0 ||
            (e = notes_number_knob("M0_NOTES_SESSION_S", 3600, 1, 30L * 86400, "seconds",
                                   &c->session_s, finding, flen, fix, xlen)) < 0 ||
            (e = notes_number_knob("M0_NOTES_MAX_NOTES", 1000, 1, 100000, "a count", &c->max_notes,
                                   finding, flen, fix, xlen)) < 0 ||
            (e = notes_number_knob("M0_NOTES_MAX_BYTES", 8L << 20, 1, 256L << 20, "bytes",
                                   &c->max_bytes, finding, flen, fix, xlen)) < 0 ||
            (e = notes_number_knob("M0_NOTES_MAX_REVOKED", 1024, 1, 65536, "a count",
                                   &c->max_revoked, finding, flen, fix, xlen)) < 0 ||
            (e = notes_number_knob("M0_NOTES_BUSY_MS", NOTES_BUSY_MS_DEFAULT, 1, 60000,
                                   "milliseconds", &c->busy_ms, finding, flen, fix, xlen)) < 0 ||
            (e = bool_knob("M0_NOTES_SECURE_COOKIE", 0, &c->secure, finding, flen, fix, xlen)) < 0)
                return e;
        return notes_state_dir(c->dir, sizeof(c->dir), finding, flen, fix, xlen);
}

/* Runs on the coordinator before any handler exists, for serving and --doctor alike. */
static int check(char *finding, size_t flen, char *fix, size_t xlen)
{
        struct config c;
        int e = config_read(&c, finding, flen, fix, xlen);
        if (e == 0)
                e = notes_key_check(c.dir, finding, flen, fix, xlen);
        if (e < 0)
                return e;
        snprintf(finding, flen,
                 "notes in %s/%s; sessions of %ld s; admin's Argon2id hash: %zu KiB, %llu passes",
                 c.dir, NOTES_DB, c.session_s, c.admin_mem / 1024, c.admin_ops);
        return 0;
}

/* ---- answers ---- */

/*
 * Every answer: where it ran (P3); never cached, as each is about a session; and never sniffed
 * into another type, so a note's text cannot become a page in a browser.
 */
static int begin(m0_req *req, m0_res *res)
{
        int r = app_where(req, res);
        if (r == 0)
                r = m0_res_header(res, "Cache-Control", "no-store");
        if (r == 0)
                r = m0_res_header(res, "X-Content-Type-Options", "nosniff");
        return r;
}

static int reply(m0_res *res, int status, const char *json)
{
        return m0_res_json(res, status, "%s", json);
}

/* A bound a client reached: counted, and logged at 1, 2, 4, 8, … so no flood reaches the log. */
static void counted(atomic_ullong *n, const char *what)
{
        unsigned long long k = atomic_fetch_add(n, 1) + 1;
        if ((k & (k - 1)) == 0)
                m0_log(M0_LOG_WARNING, "%s (%llu so far)", what, k);
}

/* A write to the database that failed: the reason in the log, a 500 to the client. */
static int save_failed(struct state *st, m0_res *res, const char *what, int e)
{
        unsigned long long k = atomic_fetch_add(&save_failures, 1) + 1;
        m0_log(M0_LOG_ERR, "could not save %s in %s/%s: %s (%s; %llu failures so far)", what,
               st->cfg.dir, NOTES_DB, notes_db_error(st->db), strerror(-e), k);
        return reply(res, 500, "{\"error\":\"could not save\"}\n");
}

/* A read that failed: the database is there but did not answer. */
static int read_failed(struct state *st, m0_res *res)
{
        m0_log(M0_LOG_ERR, "could not read %s/%s: %s", st->cfg.dir, NOTES_DB,
               notes_db_error(st->db));
        return reply(res, 500, "{\"error\":\"could not read\"}\n");
}

/* Wall-clock seconds, as expiries are; not time(), which reads a clock up to a tick behind. */
static int64_t now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec;
}

/* ---- sessions ---- */

struct session {
        int64_t uid, expiry;
        char nonce[NOTES_NONCE_HEX + 1];
};

/*
 * The MAC of `<uid>.<expiry>.<nonce>`: libsodium's crypto_auth (HMAC-SHA-512-256) under the
 * session key, of "session:<generation>:" and the payload. The user's generation moves when
 * their revocation list overflows, which ends every session of theirs at once.
 */
static void session_mac(const struct state *st, uint64_t generation, const char *payload,
                        size_t len, uint8_t mac[crypto_auth_BYTES])
{
        char msg[32 + PAYLOAD_MAX];
        int k = snprintf(msg, sizeof(msg), "session:%llu:", (unsigned long long)generation);
        memcpy(msg + k, payload, len);
        crypto_auth(mac, (const unsigned char *)msg, (size_t)k + len, st->key);
}

static bool lower_hex(const char *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
                        return false;
        return true;
}

/* 1 to NUM_DIGITS_MAX decimal digits without a leading zero at v[*pos], then `stop`. */
static bool take_number(const char *v, size_t len, size_t *pos, char stop, int64_t *ret)
{
        size_t p = *pos, d = 0;
        int64_t n = 0;
        if (p >= len || v[p] < '1' || v[p] > '9')
                return false;
        while (p < len && v[p] >= '0' && v[p] <= '9') {
                if (++d > NUM_DIGITS_MAX)
                        return false;
                n = n * 10 + (v[p++] - '0');
        }
        if (p >= len || v[p] != stop)
                return false;
        *pos = p + 1;
        *ret = n;
        return true;
}

/*
 * Whether the request carries a valid session: `<uid>.<expiry>.<nonce>.<mac>` with the exact
 * shape, a user that exists, a MAC that matches under their generation (compared in constant
 * time), an expiry in the future and no later than one session from now, and a nonce that is
 * not revoked. 1 and *ret, 0, or -errno when the database did not answer.
 */
static int session_valid(struct state *st, m0_req *req, struct session *ret)
{
        size_t pos = 0;
        const char *v = m0_req_cookie(req, COOKIE);
        size_t len = v ? strlen(v) : 0;
        int64_t uid, expiry;
        if (!v || !take_number(v, len, &pos, '.', &uid) ||
            !take_number(v, len, &pos, '.', &expiry) ||
            len != pos + NOTES_NONCE_HEX + 1 + MAC_HEX || v[pos + NOTES_NONCE_HEX] != '.' ||
            !lower_hex(v + pos, NOTES_NONCE_HEX) ||
            !lower_hex(v + pos + NOTES_NONCE_HEX + 1, MAC_HEX))
                return 0;
        uint64_t generation = 0;
        int e = notes_db_generation(st->db, uid, &generation);
        if (e < 0 && e != -ENOENT)
                return e;
        /* The MAC is checked for a user that does not exist too: the same work either way. */
        uint8_t want[crypto_auth_BYTES], got[crypto_auth_BYTES];
        size_t payload = pos + NOTES_NONCE_HEX;
        session_mac(st, generation, v, payload, want);
        if (sodium_hex2bin(got, sizeof(got), v + payload + 1, MAC_HEX, NULL, NULL, NULL) != 0 ||
            sodium_memcmp(want, got, sizeof(got)) != 0 || e == -ENOENT)
                return 0;
        int64_t now = now_s();
        if (expiry <= now || expiry > now + st->cfg.session_s)
                return 0;
        memcpy(ret->nonce, v + pos, NOTES_NONCE_HEX);
        ret->nonce[NOTES_NONCE_HEX] = '\0';
        int r = notes_db_is_revoked(st->db, uid, ret->nonce);
        if (r != 0)
                return r < 0 ? r : 0;
        pthread_mutex_lock(&unsaved.lock);
        for (size_t i = 0; i < unsaved.n && r == 0; i++)
                r = unsaved.v[i].uid == uid && strcmp(unsaved.v[i].nonce, ret->nonce) == 0;
        pthread_mutex_unlock(&unsaved.lock);
        if (r)
                return 0;
        ret->uid = uid;
        ret->expiry = expiry;
        return 1;
}

/* Hold a revocation the database did not take, dropping those that expired to make room. */
static void hold_unsaved(const struct state *st, const struct session *s)
{
        int64_t now = now_s();
        pthread_mutex_lock(&unsaved.lock);
        if (!unsaved.v) {
                unsaved.v = calloc((size_t)st->cfg.max_revoked, sizeof(*unsaved.v));
                unsaved.cap = unsaved.v ? (size_t)st->cfg.max_revoked : 0;
        }
        size_t k = 0;
        for (size_t i = 0; i < unsaved.n; i++)
                if (unsaved.v[i].expiry > now)
                        unsaved.v[k++] = unsaved.v[i];
        unsaved.n = k;
        size_t cap = unsaved.cap;
        bool held = unsaved.n < cap;
        if (held) {
                struct unsaved *u = &unsaved.v[unsaved.n++];
                u->uid = s->uid;
                u->expiry = s->expiry;
                memcpy(u->nonce, s->nonce, sizeof(u->nonce));
        }
        pthread_mutex_unlock(&unsaved.lock);
        if (!held)
                m0_log(M0_LOG_ERR,
                       "a logout that could not be saved is not held either: %zu "
                       "are held already (M0_NOTES_MAX_REVOKED)",
                       cap);
}

/* The session cookie: HttpOnly, SameSite=Strict, Path=/, Max-Age, and Secure when asked. A
 * max_age of 0 clears it. */
static int set_cookie(const struct state *st, m0_res *res, const char *value, long max_age)
{
        const m0_cookie_attrs attrs = {
                .max_age = max_age ? max_age : M0_COOKIE_DELETE,
                .path = "/",
                .secure = st->cfg.secure,
                .http_only = true,
                .same_site = M0_SAMESITE_STRICT,
        };
        return m0_res_cookie(res, COOKIE, value, &attrs);
}

/*
 * Whether `password` is the user's: their Argon2id hash verified, admin's from the environment,
 * the others' from the database. A user that does not exist has the dummy hash verified
 * instead, made with admin's parameters, so that the answer takes as long either way and does
 * not tell which names are users. 1 and *ret_uid, 0, or -errno.
 */
static int password_ok(struct state *st, const char *user, size_t ul, const char *pw, size_t pl,
                       int64_t *ret_uid)
{
        char hash[NOTES_HASH_MAX];
        const char *h = st->dummy;
        int64_t uid = 0;
        if (notes_name_ok(user, ul) && strcmp(user, NOTES_ADMIN) == 0) {
                h = st->cfg.admin_hash;
                uid = NOTES_ADMIN_UID;
        } else if (notes_name_ok(user, ul)) {
                int e = notes_db_user_find(st->db, user, &uid, hash);
                if (e < 0 && e != -ENOENT)
                        return e;
                if (e == 0)
                        h = hash;
        }
        bool ok = crypto_pwhash_str_verify(h, pw, pl) == 0 && h != st->dummy;
        sodium_memzero(hash, sizeof(hash));
        if (ok)
                *ret_uid = uid;
        return ok;
}

/* A login form refused: m0_req_form_get()'s -errno `e` for `field`, said in notes' own shape. */
static int login_refused(m0_res *res, const char *field, int e)
{
        const char *why;
        switch (e) {
        case -EMEDIUMTYPE:
                return reply(
                        res, 415,
                        "{\"error\":\"the body must be application/x-www-form-urlencoded\"}\n");
        case -ENOENT: why = "is missing"; break;
        case -EEXIST: why = "is given more than once"; break;
        case -EBADMSG: why = "is malformed: no '=', a bad %-escape, or %00"; break;
        case -EILSEQ: why = "is not UTF-8"; break;
        default: return e;
        }
        return m0_res_json(res, 400, "{\"error\":\"the form field '%s' %s\"}\n", field, why);
}

/*
 * POST /login, body `user=<name>&password=<password>`, form-encoded. The verification costs
 * what the user's hash says (about 75 ms for the interactive cost on this class of machine): it
 * is a blocking route, so it runs on the loop's pool when there is one (D51).
 */
static int login(m0_req *req, m0_res *res, void *state)
{
        struct state *st = state;
        int r = begin(req, res);
        if (r < 0)
                return r;
        size_t len;
        (void)m0_req_body(req, &len);
        if (len > LOGIN_REQUEST_MAX)
                return reply(res, 413, "{\"error\":\"the login body is at most 4096 bytes\"}\n");
        /* Each field once, with '=', well-escaped, UTF-8 and without a NUL, or no login (Q2);
         * the answer says which field and what is wrong with it (AP1). */
        const char *user, *pw;
        if ((r = m0_req_form_get(req, "user", &user)) < 0)
                return login_refused(res, "user", r);
        if ((r = m0_req_form_get(req, "password", &pw)) < 0)
                return login_refused(res, "password", r);
        int64_t uid = 0;
        int ok = password_ok(st, user, strlen(user), pw, strlen(pw), &uid);
        if (ok < 0)
                return read_failed(st, res);
        if (!ok) {
                counted(&failed_logins, "wrong user or password at /login");
                return reply(res, 401, "{\"error\":\"wrong user or password\"}\n");
        }
        uint64_t generation;
        if (notes_db_generation(st->db, uid, &generation) < 0)
                return read_failed(st, res);
        uint8_t nonce[NOTES_NONCE_BYTES];
        randombytes_buf(nonce, sizeof(nonce));
        char value[PAYLOAD_MAX + 1 + MAC_HEX + 1];
        int k = snprintf(value, sizeof(value), "%lld.%lld.", (long long)uid,
                         (long long)(now_s() + st->cfg.session_s));
        sodium_bin2hex(value + k, NOTES_NONCE_HEX + 1, nonce, sizeof(nonce));
        k += NOTES_NONCE_HEX;
        uint8_t mac[crypto_auth_BYTES];
        session_mac(st, generation, value, (size_t)k, mac);
        value[k] = '.';
        sodium_bin2hex(value + k + 1, MAC_HEX + 1, mac, sizeof(mac));
        r = set_cookie(st, res, value, st->cfg.session_s);
        return r < 0 ? r : m0_res_status(res, 204);
}

/* POST /logout: the cookie is cleared, and the session refused from now on, restarts included. */
static int logout(m0_req *req, m0_res *res, void *state)
{
        struct state *st = state;
        int r = begin(req, res);
        if (r == 0)
                r = set_cookie(st, res, "", 0);
        if (r < 0)
                return r;
        struct session s;
        int v = session_valid(st, req, &s);
        if (v < 0)
                return read_failed(st, res);
        if (v == 0)
                return m0_res_status(res, 204);
        bool bumped;
        int e = notes_db_revoke(st->db, s.uid, s.nonce, s.expiry, now_s(), st->cfg.max_revoked,
                                &bumped);
        if (bumped)
                m0_log(M0_LOG_NOTICE,
                       "user %lld has %ld revoked sessions, the bound (M0_NOTES_MAX_REVOKED): "
                       "every session of theirs was ended",
                       (long long)s.uid, st->cfg.max_revoked);
        if (e < 0) {
                /* Refused all the same until this process ends, by every handler. */
                hold_unsaved(st, &s);
                return save_failed(st, res, "a logout", e);
        }
        return m0_res_status(res, 204);
}

/* ---- notes ---- */

/* `json` (taken) as the answer's body, a newline after it. */
static int send_json(m0_res *res, int status, json_t *json)
{
        /* json_pack() fails on ENOMEM alone: every string came from jansson or the database,
         * which holds only what jansson read. */
        int r = json ? m0_res_json_value(res, status, json) : -ENOMEM;
        json_decref(json);
        return r == 0 ? m0_res_write(res, "\n", 1) : r;
}

static int note_json(m0_res *res, int status, int64_t id, const char *title, size_t tl,
                     const char *body, size_t bl, int64_t created, int64_t updated)
{
        return send_json(res, status,
                         json_pack("{s:I,s:s%,s:s%,s:I,s:I}", "id", (json_int_t)id, "title", title,
                                   tl, "body", body, bl, "created", (json_int_t)created, "updated",
                                   (json_int_t)updated));
}

static int list(struct state *st, int64_t uid, m0_res *res)
{
        struct notes_note n;
        int k = 0;
        json_t *notes = json_array();
        notes_db_list(st->db, uid);
        while (notes && (k = notes_db_list_next(st->db, &n)) == 1) {
                json_t *one = json_pack("{s:I,s:s%,s:I}", "id", (json_int_t)n.id, "title", n.title,
                                        n.title_len, "created", (json_int_t)n.created);
                if (json_array_append_new(notes, one) < 0) {
                        k = -ENOMEM;
                        break;
                }
        }
        notes_db_release(st->db);
        if (!notes || k < 0) {
                json_decref(notes);
                if (!notes || k == -ENOMEM)
                        return -ENOMEM;
                /* Half a list was read: the host's own 500 answers instead. */
                m0_log(M0_LOG_ERR, "could not read %s/%s: %s", st->cfg.dir, NOTES_DB,
                       notes_db_error(st->db));
                return k;
        }
        return send_json(res, 200, json_pack("{s:o}", "notes", notes));
}

/* An answer to a note body that is refused: its status, or the -errno writing it failed with. */
static int refused(m0_res *res, int status, const char *json)
{
        int r = reply(res, status, json);
        return r < 0 ? r : status;
}

#define TOO_BIG "{\"error\":\"a title holds at most 200 bytes, a body at most 65536\"}\n"
#define NOT_A_NOTE "{\"error\":\"the body must be {\\\"title\\\":string,\\\"body\\\":string}\"}\n"

/* A note's body as jansson read it; the request owns the strings. */
struct note_in {
        const char *title, *body;
        size_t tl, bl;
};

/*
 * The body of POST /notes and PUT /notes/:id: exactly {"title": string, "body": string} in
 * UTF-8, read by m0_req_json(), which refuses a repeated member, anything after the object, a
 * raw control character, a bad escape, a lone surrogate and \u0000. Returns 0, the status of
 * the answer it wrote instead (> 0), or -errno.
 */
static int read_note(m0_req *req, m0_res *res, struct note_in *in)
{
        size_t len;
        (void)m0_req_body(req, &len);
        if (len > NOTE_REQUEST_MAX)
                return refused(res, 413, TOO_BIG);
        json_t *root;
        int r = m0_req_json(req, &root);
        if (r == -EMEDIUMTYPE)
                return refused(res, 415, "{\"error\":\"the body must be application/json\"}\n");
        if (r == -EBADMSG)
                return refused(res, 400, NOT_A_NOTE);
        if (r < 0)
                return r;
        const json_t *t = json_object_get(root, "title"), *b = json_object_get(root, "body");
        if (!json_is_object(root) || json_object_size(root) != 2 || !json_is_string(t) ||
            !json_is_string(b))
                return refused(res, 400, NOT_A_NOTE);
        if (json_string_length(t) > NOTES_TITLE_MAX || json_string_length(b) > NOTES_BODY_MAX)
                return refused(res, 413, TOO_BIG);
        *in = (struct note_in){json_string_value(t), json_string_value(b), json_string_length(t),
                               json_string_length(b)};
        return 0;
}

static int no_room(m0_res *res, atomic_ullong *count, const char *bound)
{
        counted(count, bound);
        return reply(res, 507, "{\"error\":\"no room for this note\"}\n");
}

#define NOTES_FULL "a note refused: M0_NOTES_MAX_NOTES reached"
#define BYTES_FULL "a note refused: M0_NOTES_MAX_BYTES reached"

static int create(struct state *st, int64_t uid, m0_req *req, m0_res *res)
{
        struct note_in in;
        int r = read_note(req, res, &in);
        if (r != 0)
                return r < 0 ? r : 0;
        int64_t id, now = now_s();
        int e = notes_db_create(st->db, uid, in.title, in.tl, in.body, in.bl, now,
                                st->cfg.max_notes, st->cfg.max_bytes, &id);
        if (e == -EDQUOT)
                r = no_room(res, &notes_full, NOTES_FULL);
        else if (e == -EFBIG)
                r = no_room(res, &bytes_full, BYTES_FULL);
        else if (e < 0)
                r = save_failed(st, res, "a note", e);
        else if ((r = m0_res_headerf(res, "Location", "/notes/%lld", (long long)id)) == 0)
                r = note_json(res, 201, id, in.title, in.tl, in.body, in.bl, now, now);
        return r;
}

/* /notes: GET lists, POST creates. Nothing at all without a session. */
static int notes_root(m0_req *req, m0_res *res, void *state)
{
        struct state *st = state;
        struct session s;
        int r = begin(req, res);
        if (r < 0)
                return r;
        int v = session_valid(st, req, &s);
        if (v <= 0)
                return v < 0 ? read_failed(st, res) : reply(res, 401, UNAUTHORIZED);
        const char *m = m0_req_method(req);
        if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0)
                return list(st, s.uid, res);
        if (strcmp(m, "POST") == 0)
                return create(st, s.uid, req, res);
        r = m0_res_header(res, "Allow", "GET, HEAD, POST");
        return r < 0 ? r : reply(res, 405, "{\"error\":\"method not allowed\"}\n");
}

/* The id of /notes/<id>: 1 to 18 decimal digits, no sign, no leading zero, nothing after. */
static bool parse_id(const char *s, int64_t *ret)
{
        size_t pos = 0, len = strlen(s);
        /* take_number wants a stop byte after the digits: the path's NUL is it. */
        return take_number(s, len + 1, &pos, '\0', ret) && pos == len + 1;
}

static int replace(struct state *st, int64_t uid, int64_t id, m0_req *req, m0_res *res)
{
        struct note_in in;
        int r = read_note(req, res, &in);
        if (r != 0)
                return r < 0 ? r : 0;
        int64_t created, now = now_s();
        int e = notes_db_replace(st->db, uid, id, in.title, in.tl, in.body, in.bl, now,
                                 st->cfg.max_bytes, &created);
        if (e == -ENOENT)
                r = reply(res, 404, "{\"error\":\"no such note\"}\n");
        else if (e == -EFBIG)
                r = no_room(res, &bytes_full, BYTES_FULL);
        else if (e < 0)
                r = save_failed(st, res, "a note", e);
        else
                r = note_json(res, 200, id, in.title, in.tl, in.body, in.bl, created, now);
        return r;
}

/*
 * /notes/<id>: GET reads, PUT replaces, DELETE deletes. Any path naming no note of this user
 * is a 404: another user's note is not there for them, and the answer is the same bytes.
 */
static int notes_one(m0_req *req, m0_res *res, void *state)
{
        static const char none[] = "{\"error\":\"no such note\"}\n";
        struct state *st = state;
        struct session s;
        int r = begin(req, res);
        if (r < 0)
                return r;
        int v = session_valid(st, req, &s);
        if (v <= 0)
                return v < 0 ? read_failed(st, res) : reply(res, 401, UNAUTHORIZED);
        int64_t id;
        if (!parse_id(m0_req_path(req) + strlen("/notes/"), &id))
                return reply(res, 404, none);
        struct notes_note n;
        int e = notes_db_get(st->db, s.uid, id, &n);
        if (e == -ENOENT)
                return reply(res, 404, none);
        if (e < 0)
                return read_failed(st, res);
        const char *m = m0_req_method(req);
        if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0) {
                r = note_json(res, 200, n.id, n.title, n.title_len, n.body, n.body_len, n.created,
                              n.updated);
                notes_db_release(st->db);
                return r;
        }
        notes_db_release(st->db);
        if (strcmp(m, "DELETE") == 0) {
                e = notes_db_delete(st->db, s.uid, id);
                if (e == -ENOENT)
                        return reply(res, 404, none);
                return e < 0 ? save_failed(st, res, "a delete", e) : m0_res_status(res, 204);
        }
        if (strcmp(m, "PUT") == 0)
                return replace(st, s.uid, id, req, res);
        r = m0_res_header(res, "Allow", "GET, HEAD, PUT, DELETE");
        return r < 0 ? r : reply(res, 405, "{\"error\":\"method not allowed\"}\n");
}

/* ---- the handlers ---- */

static void state_free(void *state)
{
        struct state *st = state;
        if (!st)
                return;
        notes_db_close(st->db);
        sodium_memzero(st, sizeof(*st));
        free(st);
}

/* A hash of a random password with admin's parameters: what a login of no user verifies. */
static int make_dummy(const struct config *c, char out[NOTES_HASH_MAX])
{
        uint8_t pw[32];
        randombytes_buf(pw, sizeof(pw));
        int r = crypto_pwhash_str(out, (const char *)pw, sizeof(pw), c->admin_ops, c->admin_mem);
        sodium_memzero(pw, sizeof(pw));
        return r == 0 ? 0 : -ENOMEM;
}

/*
 * The first make's work for every handler: the session key (made on the first start), the
 * import of an old store, the dummy hash. Later makes copy what it made, or its failure.
 */
static int shared_init(struct state *st, char *err, size_t err_len)
{
        pthread_mutex_lock(&shared.lock);
        if (!shared.done) {
                shared.done = true;
                size_t imported = 0;
                shared.error =
                        notes_key_load(st->cfg.dir, shared.key, shared.err, sizeof(shared.err));
                if (shared.error == 0)
                        shared.error = notes_import(st->db, st->cfg.dir, now_s(), &imported,
                                                    shared.err, sizeof(shared.err));
                if (shared.error == 0 && imported > 0)
                        m0_log(M0_LOG_NOTICE,
                               "imported %zu notes of %s/%s as the user admin's; the file is now "
                               "%s",
                               imported, st->cfg.dir, NOTES_OLD_FILE, NOTES_OLD_DONE);
                if (shared.error == 0 && (shared.error = make_dummy(&st->cfg, shared.dummy)) < 0)
                        snprintf(shared.err, sizeof(shared.err), "cannot make the dummy hash");
        }
        int e = shared.error;
        if (e < 0) {
                snprintf(err, err_len, "%s", shared.err);
        } else {
                memcpy(st->key, shared.key, sizeof(st->key));
                memcpy(st->dummy, shared.dummy, sizeof(st->dummy));
        }
        pthread_mutex_unlock(&shared.lock);
        return e;
}

/*
 * One state per loop and per pool thread, each with its own SQLite connection: SQLite
 * serializes the writers and lets the readers run beside them (D51).
 */
static int make(const m0_handler_info *info, void **ret_state, char *err, size_t err_len)
{
        struct state *st = calloc(1, sizeof(*st));
        if (!st)
                return -ENOMEM;
        char fix[256];
        int e = config_read(&st->cfg, err, err_len, fix, sizeof(fix));
        if (e == 0) {
                /* One open at a time: the first turns a new file into WAL mode and makes its
                 * schema, and SQLite answers a second connection doing the same at that moment
                 * with "database is locked" rather than waiting on its busy timeout. */
                pthread_mutex_lock(&shared.lock);
                e = notes_db_open(st->cfg.dir, st->cfg.busy_ms, &st->db, err, err_len);
                pthread_mutex_unlock(&shared.lock);
        }
        if (e == 0)
                e = shared_init(st, err, err_len);
        if (e < 0) {
                state_free(st);
                return e;
        }
        *ret_state = st;
        return 0;
}

/*
 * What writes (an fsync per commit) or verifies an Argon2id hash (~75 ms) is a blocking route,
 * run on the loop's pool when M0_BLOCKING_THREADS gives it one, so that neither holds up the
 * loop's other connections. Reads stay on the loop: a WAL reader waits for no writer, and a
 * flood of logins on the pool does not slow them (D51).
 */
static const m0_route routes[] = {
        M0_ROUTE("POST", "/login", login, .flags = M0_ROUTE_BLOCKING),
        M0_ROUTE("POST", "/logout", logout, .flags = M0_ROUTE_BLOCKING),
        /* GET matches HEAD too. */
        M0_ROUTE("GET", "/notes", notes_root),
        M0_ROUTE("GET", "/notes/", notes_one, .flags = M0_ROUTE_PREFIX),
        /* Every other method: the session is checked before the method, so even a 405 needs one. */
        M0_ROUTE(NULL, "/notes", notes_root, .flags = M0_ROUTE_BLOCKING),
        M0_ROUTE(NULL, "/notes/", notes_one, .flags = M0_ROUTE_PREFIX | M0_ROUTE_BLOCKING),
        M0_ROUTE_END,
};

static const m0_app app = {
        .name = "notes",
        .max_threads = 0,
        .make = make,
        .free = state_free,
        .routes = routes,
        .check = check,
};

int main(int argc, char **argv)
{
        if (sodium_init() < 0) {
                fprintf(stderr, "notes: libsodium cannot start (no random source?)\n");
                return 1;
        }
        int code = notes_cli(argc, argv);
        return code >= 0 ? code : m0_main(&app, argc, argv);
}
