/* SPDX-License-Identifier: MIT */
/* notes: an app that keeps secrets (SPEC A4): a login, signed session cookies, notes on disk. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <m0.h>

#include "notes-crypto.h"
#include "notes-json.h"
#include "notes-store.h"

#define COOKIE "m0notes"
#define KEY_MIN_BYTES 32
#define KEY_MAX_BYTES 64
#define NONCE_BYTES (NOTES_NONCE_HEX / 2)
#define MAC_HEX (2 * NOTES_SHA256_LEN)
#define EXPIRY_DIGITS_MAX 18 /* below 2^63, whatever the digits */
#define ID_DIGITS_MAX 18
/* The longest body a note request needs: every byte of title and body escaped as \u00XX. */
#define NOTE_REQUEST_MAX (6 * (NOTES_TITLE_MAX + NOTES_BODY_MAX) + 1024)
#define LOGIN_REQUEST_MAX 4096

/* The one answer to a request without a valid session, whatever was wrong with it. */
#define UNAUTHORIZED "{\"error\":\"login required\"}\n"

/* The app's knobs (M0_NOTES_*), read by `check` on the coordinator and again by `make`. */
struct config {
        uint8_t key[KEY_MAX_BYTES];
        size_t key_len;
        const char *password; /* the environment's; hashed by make, never kept */
        long session_s;
        long max_notes;
        long max_bytes;
        long max_revoked;
        int secure;
        char dir[PATH_MAX];
};

/* The one handler's state (max_threads = 1): the store, and scratch space for a request. */
struct state {
        struct config cfg;
        uint8_t password_mac[NOTES_SHA256_LEN];
        struct notes_store store;
        unsigned long long wrong_passwords, notes_full, bytes_full, save_failures;
        char title[NOTES_TITLE_MAX + 1];
        char body[NOTES_BODY_MAX + 1];
};

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

/* A decimal whole number in [min, max]: digits only, as the host's own knobs are read. */
static int parse_long(const char *v, long min, long max, long *ret)
{
        long n = 0;
        if (!*v)
                return -EINVAL;
        for (const char *p = v; *p; p++) {
                if (*p < '0' || *p > '9' || n > (LONG_MAX - (*p - '0')) / 10)
                        return -EINVAL;
                n = n * 10 + (*p - '0');
        }
        if (n < min || n > max)
                return -ERANGE;
        *ret = n;
        return 0;
}

static int number_knob(const char *var, long def, long min, long max, const char *unit, long *ret,
                       char *finding, size_t flen, char *fix, size_t xlen)
{
        const char *v = getenv(var);
        *ret = def;
        if (!v || parse_long(v, min, max, ret) == 0)
                return 0;
        char how[160];
        snprintf(how, sizeof(how), "set %s to %s, %ld to %ld, or unset it for %ld", var, unit, min,
                 max, def);
        return refuse(finding, flen, fix, xlen, how,
                      "%s='%s' is not a whole number from %ld to %ld", var, v, min, max);
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

/*
 * Where the notes live: M0_NOTES_DIR when set, else the first of systemd's STATE_DIRECTORY
 * paths (StateDirectory= may name several, joined by ':'). It must be a writable directory.
 */
static int state_dir(struct config *c, char *finding, size_t flen, char *fix, size_t xlen)
{
        static const char how[] = "run under systemd with StateDirectory= or set M0_NOTES_DIR to a "
                                  "writable directory";
        const char *v = getenv("M0_NOTES_DIR");
        const char *var = "M0_NOTES_DIR";
        size_t n;
        if (v) {
                n = strlen(v);
        } else {
                v = getenv("STATE_DIRECTORY");
                var = "STATE_DIRECTORY";
                if (!v)
                        return refuse(finding, flen, fix, xlen, how,
                                      "no state directory: neither M0_NOTES_DIR nor "
                                      "STATE_DIRECTORY is set");
                n = strcspn(v, ":");
        }
        if (n == 0)
                return refuse(finding, flen, fix, xlen, how, "%s is empty", var);
        if (n >= sizeof(c->dir))
                return refuse(finding, flen, fix, xlen, how, "%s is longer than PATH_MAX", var);
        memcpy(c->dir, v, n);
        c->dir[n] = '\0';
        struct stat st;
        if (stat(c->dir, &st) < 0)
                return refuse(finding, flen, fix, xlen, how, "%s='%s': %s", var, c->dir,
                              strerror(errno));
        if (!S_ISDIR(st.st_mode))
                return refuse(finding, flen, fix, xlen, how, "%s='%s' is not a directory", var,
                              c->dir);
        if (access(c->dir, W_OK | X_OK) < 0)
                return refuse(finding, flen, fix, xlen, how, "%s='%s' is not writable: %s", var,
                              c->dir, strerror(errno));
        return 0;
}

static int config_read(struct config *c, char *finding, size_t flen, char *fix, size_t xlen)
{
        static const char key_fix[] =
                "set M0_NOTES_KEY to 64 hex digits (32 random bytes), e.g. `openssl rand -hex 32`";
        int e;
        memset(c, 0, sizeof(*c));
        /* The key and the password are secrets: a finding gives their length, never a byte. */
        const char *key = getenv("M0_NOTES_KEY");
        if (!key)
                return refuse(finding, flen, fix, xlen, key_fix,
                              "M0_NOTES_KEY is not set: sessions are signed with it");
        size_t kl = strlen(key);
        if (kl < 2 * KEY_MIN_BYTES || kl > 2 * KEY_MAX_BYTES || kl % 2 ||
            notes_unhex(key, kl / 2, c->key) < 0)
                return refuse(finding, flen, fix, xlen, key_fix,
                              "M0_NOTES_KEY (%zu characters) is not %d to %d hex digits", kl,
                              2 * KEY_MIN_BYTES, 2 * KEY_MAX_BYTES);
        c->key_len = kl / 2;
        c->password = getenv("M0_NOTES_PASSWORD");
        if (!c->password || !*c->password)
                return refuse(finding, flen, fix, xlen,
                              "set M0_NOTES_PASSWORD to the password /login will take",
                              "M0_NOTES_PASSWORD is %s", c->password ? "empty" : "not set");
        if ((e = number_knob("M0_NOTES_SESSION_S", 3600, 1, 30L * 86400, "seconds", &c->session_s,
                             finding, flen, fix, xlen)) < 0 ||
            (e = number_knob("M0_NOTES_MAX_NOTES", 1000, 1, 100000, "a count", &c->max_notes,
                             finding, flen, fix, xlen)) < 0 ||
            (e = number_knob("M0_NOTES_MAX_BYTES", 8L << 20, 1, 256L << 20, "bytes", &c->max_bytes,
                             finding, flen, fix, xlen)) < 0 ||
            (e = number_knob("M0_NOTES_MAX_REVOKED", 1024, 1, 65536, "a count", &c->max_revoked,
                             finding, flen, fix, xlen)) < 0 ||
            (e = bool_knob("M0_NOTES_SECURE_COOKIE", 0, &c->secure, finding, flen, fix, xlen)) < 0)
                return e;
        return state_dir(c, finding, flen, fix, xlen);
}

/* Runs on the coordinator before any handler exists, for serving and --doctor alike. */
static int check(char *finding, size_t flen, char *fix, size_t xlen)
{
        struct config c;
        int e = config_read(&c, finding, flen, fix, xlen);
        explicit_bzero(c.key, sizeof(c.key));
        if (e < 0)
                return e;
        if (notes_crypto_selftest(finding, flen) < 0) {
                snprintf(fix, xlen, "this build of notes computes SHA-256 wrongly; rebuild it");
                return -EIO;
        }
        snprintf(finding, flen, "notes in %s; sessions of %ld s; SHA-256 self-test passed", c.dir,
                 c.session_s);
        return 0;
}

/* ---- answers ---- */

/*
 * Every answer: where it ran (P3); never cached, as each is about a session; and never sniffed
 * into another type, so a note's text cannot become a page in a browser.
 */
static int begin(m0_req *req, m0_res *res)
{
        int r = m0_res_headerf(res, "x-worker", "%d", m0_req_loop(req));
        if (r == 0)
                r = m0_res_headerf(res, "x-thread", "%d", m0_req_thread(req));
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

static int unauthorized(m0_res *res)
{
        return reply(res, 401, UNAUTHORIZED);
}

/* A bound a client reached: counted, and logged at 1, 2, 4, 8, … so no flood reaches the log. */
static void counted(unsigned long long *n, const char *what)
{
        ++*n;
        if ((*n & (*n - 1)) == 0)
                fprintf(stderr, "notes: %s (%llu so far)\n", what, *n);
}

/* Wall-clock seconds, as expiries are; not time(), which reads a clock up to a tick behind. */
static int64_t now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec;
}

/* ---- sessions ---- */

/* The MAC of "<expiry>.<nonce>" under the key, bound to the current generation. */
static void session_mac(const struct state *st, const char *payload, size_t len,
                        char out[MAC_HEX + 1])
{
        char prefix[48];
        int k = snprintf(prefix, sizeof(prefix),
                         "session:%llu:", (unsigned long long)st->store.generation);
        uint8_t mac[NOTES_SHA256_LEN];
        struct notes_hmac h;
        notes_hmac_init(&h, st->cfg.key, st->cfg.key_len);
        notes_hmac_update(&h, prefix, (size_t)k);
        notes_hmac_update(&h, payload, len);
        notes_hmac_final(&h, mac);
        notes_hex(mac, sizeof(mac), out);
}

/* The value of the first m0notes cookie of the request's Cookie fields; NULL when none. */
static const char *find_cookie(const m0_req *req, size_t *ret_len)
{
        size_t n = m0_req_header_count(req);
        for (size_t i = 0; i < n; i++) {
                const char *name, *v;
                if (m0_req_header_at(req, i, &name, &v) < 0 || strcasecmp(name, "cookie") != 0)
                        continue;
                while (*v) {
                        v += strspn(v, " \t");
                        size_t pair = strcspn(v, ";");
                        size_t nl = sizeof(COOKIE) - 1;
                        if (pair > nl && strncmp(v, COOKIE "=", nl + 1) == 0) {
                                size_t len = pair - nl - 1;
                                while (len > 0 &&
                                       (v[nl + 1 + len - 1] == ' ' || v[nl + 1 + len - 1] == '\t'))
                                        len--;
                                *ret_len = len;
                                return v + nl + 1;
                        }
                        v += pair;
                        if (*v == ';')
                                v++;
                }
        }
        return NULL;
}

static bool lower_hex(const char *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
                        return false;
        return true;
}

/*
 * Whether the request carries a valid session: `<expiry>.<nonce>.<mac>` with the exact shape,
 * a MAC that matches (compared in constant time), an expiry in the future and no later than
 * one session from now, and a nonce not revoked. The nonce and expiry are returned for logout.
 */
static bool session_valid(const struct state *st, const m0_req *req,
                          char ret_nonce[NOTES_NONCE_HEX + 1], int64_t *ret_expiry)
{
        size_t len;
        const char *v = find_cookie(req, &len);
        if (!v)
                return false;
        size_t d = 0;
        int64_t expiry = 0;
        while (d < len && v[d] >= '0' && v[d] <= '9' && d < EXPIRY_DIGITS_MAX)
                expiry = expiry * 10 + (v[d++] - '0');
        if (d == 0 || v[0] == '0' || len != d + 1 + NOTES_NONCE_HEX + 1 + MAC_HEX || v[d] != '.' ||
            v[d + 1 + NOTES_NONCE_HEX] != '.' || !lower_hex(v + d + 1, NOTES_NONCE_HEX) ||
            !lower_hex(v + d + 2 + NOTES_NONCE_HEX, MAC_HEX))
                return false;
        char mac[MAC_HEX + 1];
        size_t payload = d + 1 + NOTES_NONCE_HEX;
        session_mac(st, v, payload, mac);
        if (!notes_ct_equal(mac, v + payload + 1, MAC_HEX))
                return false;
        int64_t now = now_s();
        if (expiry <= now || expiry > now + st->cfg.session_s)
                return false;
        memcpy(ret_nonce, v + d + 1, NOTES_NONCE_HEX);
        ret_nonce[NOTES_NONCE_HEX] = '\0';
        if (notes_store_is_revoked(&st->store, ret_nonce))
                return false;
        *ret_expiry = expiry;
        return true;
}

static bool authorized(const struct state *st, const m0_req *req)
{
        char nonce[NOTES_NONCE_HEX + 1];
        int64_t expiry;
        return session_valid(st, req, nonce, &expiry);
}

static int set_cookie(const struct state *st, m0_res *res, const char *value, long max_age)
{
        return m0_res_headerf(res, "Set-Cookie",
                              "%s=%s; HttpOnly; SameSite=Strict; Path=/; Max-Age=%ld%s", COOKIE,
                              value, max_age, st->cfg.secure ? "; Secure" : "");
}

/*
 * The `password` field of an application/x-www-form-urlencoded body, '+' and %XX decoded into
 * out (at least len + 1 bytes). -EINVAL: absent, given twice, a bad escape, or a NUL.
 */
static int form_password(const char *body, size_t len, char *out, size_t *ret_len)
{
        static const char name[] = "password=";
        const size_t nl = sizeof(name) - 1;
        bool found = false;
        size_t pos = 0;
        while (pos < len) {
                const char *amp = memchr(body + pos, '&', len - pos);
                size_t end = amp ? (size_t)(amp - body) : len;
                if (end - pos >= nl && memcmp(body + pos, name, nl) == 0) {
                        if (found)
                                return -EINVAL;
                        found = true;
                        size_t o = 0;
                        for (size_t i = pos + nl; i < end; i++) {
                                char c = body[i];
                                if (c == '+') {
                                        c = ' ';
                                } else if (c == '%') {
                                        uint8_t b;
                                        if (i + 2 >= end || notes_unhex(body + i + 1, 1, &b) < 0)
                                                return -EINVAL;
                                        c = (char)b;
                                        i += 2;
                                }
                                if (c == '\0')
                                        return -EINVAL;
                                out[o++] = c;
                        }
                        out[o] = '\0';
                        *ret_len = o;
                } else if (end - pos == nl - 1 && memcmp(body + pos, name, nl - 1) == 0) {
                        return -EINVAL; /* "password" without a value */
                }
                pos = end + 1;
        }
        return found ? 0 : -EINVAL;
}

static void password_mac(const uint8_t *key, size_t key_len, const char *pw, size_t len,
                         uint8_t out[NOTES_SHA256_LEN])
{
        struct notes_hmac h;
        notes_hmac_init(&h, key, key_len);
        notes_hmac_update(&h, "password:", 9);
        notes_hmac_update(&h, pw, len);
        notes_hmac_final(&h, out);
}

/*
 * POST /login, body `password=<form-encoded>`: both the given password and the configured one
 * are reduced to an HMAC under the key, and the two MACs compared in constant time, so neither
 * the length nor the first differing byte of the real password shows in the answer's timing.
 */
static int login(m0_req *req, m0_res *res, void *state)
{
        struct state *st = state;
        int r = begin(req, res);
        if (r < 0)
                return r;
        size_t len;
        const char *body = m0_req_body(req, &len);
        if (len > LOGIN_REQUEST_MAX)
                return reply(res, 413, "{\"error\":\"the login body is at most 4096 bytes\"}\n");
        char pw[LOGIN_REQUEST_MAX + 1];
        size_t pw_len;
        if (form_password(body, len, pw, &pw_len) < 0)
                return reply(res, 400,
                             "{\"error\":\"the body must be password=<form-encoded>\"}\n");
        uint8_t mac[NOTES_SHA256_LEN];
        password_mac(st->cfg.key, st->cfg.key_len, pw, pw_len, mac);
        bool ok = notes_ct_equal(mac, st->password_mac, sizeof(mac));
        explicit_bzero(pw, sizeof(pw));
        explicit_bzero(mac, sizeof(mac));
        if (!ok) {
                counted(&st->wrong_passwords, "wrong password at /login");
                return reply(res, 401, "{\"error\":\"wrong password\"}\n");
        }
        uint8_t nonce[NONCE_BYTES];
        if (getrandom(nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
                return -EIO;
        char value[EXPIRY_DIGITS_MAX + 1 + NOTES_NONCE_HEX + 1 + MAC_HEX + 1];
        int k = snprintf(value, sizeof(value), "%lld.", (long long)(now_s() + st->cfg.session_s));
        notes_hex(nonce, sizeof(nonce), value + k);
        k += NOTES_NONCE_HEX;
        value[k] = '.';
        session_mac(st, value, (size_t)k, value + k + 1);
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
        char nonce[NOTES_NONCE_HEX + 1];
        int64_t expiry;
        if (session_valid(st, req, nonce, &expiry)) {
                bool bumped;
                int e = notes_store_revoke(&st->store, nonce, expiry, now_s(), &bumped);
                if (bumped)
                        fprintf(stderr,
                                "notes: %ld revoked sessions is the bound (M0_NOTES_MAX_REVOKED): "
                                "every session was ended\n",
                                st->cfg.max_revoked);
                if (e < 0) {
                        /* Revoked in memory all the same: refused until this process ends. */
                        fprintf(stderr, "notes: could not save a logout: %s\n", strerror(-e));
                        return reply(res, 500, "{\"error\":\"could not save\"}\n");
                }
        }
        return m0_res_status(res, 204);
}

/* ---- notes ---- */

static int note_json(m0_res *res, int status, const struct notes_note *n)
{
        int r = m0_res_json(res, status, "{\"id\":%llu,\"title\":", (unsigned long long)n->id);
        if (r == 0)
                r = m0_res_json_string(res, n->title);
        if (r == 0)
                r = m0_res_write(res, ",\"body\":", 8);
        if (r == 0)
                r = m0_res_json_string(res, n->body);
        if (r == 0)
                r = m0_res_printf(res, ",\"created\":%lld,\"updated\":%lld}\n",
                                  (long long)n->created, (long long)n->updated);
        return r;
}

static int list(const struct state *st, m0_res *res)
{
        int r = m0_res_json(res, 200, "{\"notes\":[");
        for (size_t i = 0; r == 0 && i < st->store.n; i++) {
                const struct notes_note *n = st->store.notes[i];
                r = m0_res_printf(res, "%s{\"id\":%llu,\"title\":", i ? "," : "",
                                  (unsigned long long)n->id);
                if (r == 0)
                        r = m0_res_json_string(res, n->title);
                if (r == 0)
                        r = m0_res_printf(res, ",\"created\":%lld}", (long long)n->created);
        }
        return r == 0 ? m0_res_write(res, "]}\n", 3) : r;
}

/* Content-Type is application/json, with parameters or without. */
static bool is_json(const m0_req *req)
{
        const char *ct = m0_req_header(req, "Content-Type");
        static const char want[] = "application/json";
        if (!ct || strncasecmp(ct, want, sizeof(want) - 1) != 0)
                return false;
        ct += sizeof(want) - 1;
        ct += strspn(ct, " \t");
        return *ct == '\0' || *ct == ';';
}

/* An answer to a note body that is refused: its status, or the -errno writing it failed with. */
static int refused(m0_res *res, int status, const char *json)
{
        int r = reply(res, status, json);
        return r < 0 ? r : status;
}

#define TOO_BIG "{\"error\":\"a title holds at most 200 bytes, a body at most 65536\"}\n"
#define NOT_A_NOTE "{\"error\":\"the body must be {\\\"title\\\":string,\\\"body\\\":string}\"}\n"

/*
 * The body of POST /notes and PUT /notes/:id: exactly {"title": string, "body": string}, into
 * st->title and st->body (f[0] and f[1] say how long). Returns 0, the status of the answer it
 * wrote instead (> 0), or -errno.
 */
static int read_note(struct state *st, const m0_req *req, m0_res *res, struct notes_json_field *f)
{
        if (!is_json(req))
                return refused(res, 415, "{\"error\":\"the body must be application/json\"}\n");
        size_t len;
        const char *body = m0_req_body(req, &len);
        if (len > NOTE_REQUEST_MAX)
                return refused(res, 413, TOO_BIG);
        f[0] = (struct notes_json_field){.name = "title",
                                         .type = NOTES_JSON_STRING,
                                         .buf = st->title,
                                         .cap = NOTES_TITLE_MAX};
        f[1] = (struct notes_json_field){
                .name = "body", .type = NOTES_JSON_STRING, .buf = st->body, .cap = NOTES_BODY_MAX};
        ssize_t k = notes_json_object(body, len, f, 2);
        if (k == -E2BIG)
                return refused(res, 413, TOO_BIG);
        size_t rest = k < 0 ? 0 : (size_t)k;
        while (rest < len && (body[rest] == ' ' || body[rest] == '\t' || body[rest] == '\n' ||
                              body[rest] == '\r'))
                rest++;
        if (k < 0 || rest != len || !f[0].seen || !f[1].seen)
                return refused(res, 400, NOT_A_NOTE);
        return 0;
}

static int save_failed(struct state *st, m0_res *res, int e)
{
        fprintf(stderr, "notes: could not save the notes in %s: %s (%llu failures so far)\n",
                st->cfg.dir, strerror(-e), ++st->save_failures);
        return reply(res, 500, "{\"error\":\"could not save\"}\n");
}

static int no_room(m0_res *res, unsigned long long *count, const char *bound)
{
        counted(count, bound);
        return reply(res, 507, "{\"error\":\"no room for this note\"}\n");
}

static int create(struct state *st, const m0_req *req, m0_res *res)
{
        struct notes_json_field f[2];
        int r = read_note(st, req, res, f);
        if (r != 0)
                return r < 0 ? r : 0;
        if (st->store.n >= (size_t)st->cfg.max_notes)
                return no_room(res, &st->notes_full, "a note refused: M0_NOTES_MAX_NOTES reached");
        if (st->store.bytes + f[0].len + f[1].len > (size_t)st->cfg.max_bytes)
                return no_room(res, &st->bytes_full, "a note refused: M0_NOTES_MAX_BYTES reached");
        struct notes_note *n;
        int e = notes_store_add(&st->store, st->title, f[0].len, st->body, f[1].len, now_s(), &n);
        if (e < 0)
                return save_failed(st, res, e);
        r = m0_res_headerf(res, "Location", "/notes/%llu", (unsigned long long)n->id);
        return r < 0 ? r : note_json(res, 201, n);
}

/* /notes: GET lists, POST creates. Nothing at all without a session. */
static int notes_root(m0_req *req, m0_res *res, void *state)
{
        struct state *st = state;
        int r = begin(req, res);
        if (r < 0)
                return r;
        if (!authorized(st, req))
                return unauthorized(res);
        const char *m = m0_req_method(req);
        if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0)
                return list(st, res);
        if (strcmp(m, "POST") == 0)
                return create(st, req, res);
        r = m0_res_header(res, "Allow", "GET, HEAD, POST");
        return r < 0 ? r : reply(res, 405, "{\"error\":\"method not allowed\"}\n");
}

/* The id of /notes/<id>: 1 to 18 decimal digits, no sign, no leading zero, nothing after. */
static bool parse_id(const char *s, uint64_t *ret)
{
        uint64_t v = 0;
        if (*s < '1' || *s > '9')
                return false;
        for (size_t n = 0; s[n]; n++) {
                if (s[n] < '0' || s[n] > '9' || n == ID_DIGITS_MAX)
                        return false;
                v = v * 10 + (uint64_t)(s[n] - '0');
        }
        *ret = v;
        return true;
}

/* /notes/<id>: GET reads, PUT replaces, DELETE deletes. Any path naming no note is a 404. */
static int notes_one(m0_req *req, m0_res *res, void *state)
{
        struct state *st = state;
        int r = begin(req, res);
        if (r < 0)
                return r;
        if (!authorized(st, req))
                return unauthorized(res);
        uint64_t id;
        struct notes_note *n = NULL;
        if (parse_id(m0_req_path(req) + strlen("/notes/"), &id))
                n = notes_store_find(&st->store, id);
        if (!n)
                return reply(res, 404, "{\"error\":\"no such note\"}\n");
        const char *m = m0_req_method(req);
        if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0)
                return note_json(res, 200, n);
        if (strcmp(m, "DELETE") == 0) {
                int e = notes_store_delete(&st->store, n, now_s());
                return e < 0 ? save_failed(st, res, e) : m0_res_status(res, 204);
        }
        if (strcmp(m, "PUT") == 0) {
                struct notes_json_field f[2];
                r = read_note(st, req, res, f);
                if (r != 0)
                        return r < 0 ? r : 0;
                if (st->store.bytes - n->title_len - n->body_len + f[0].len + f[1].len >
                    (size_t)st->cfg.max_bytes)
                        return no_room(res, &st->bytes_full,
                                       "a note refused: M0_NOTES_MAX_BYTES reached");
                int e = notes_store_replace(&st->store, n, st->title, f[0].len, st->body, f[1].len,
                                            now_s());
                if (e < 0)
                        return save_failed(st, res, e);
                return note_json(res, 200, notes_store_find(&st->store, id));
        }
        r = m0_res_header(res, "Allow", "GET, HEAD, PUT, DELETE");
        return r < 0 ? r : reply(res, 405, "{\"error\":\"method not allowed\"}\n");
}

/* ---- the handler ---- */

static void state_free(void *state)
{
        struct state *st = state;
        if (!st)
                return;
        notes_store_close(&st->store);
        explicit_bzero(st, sizeof(*st));
        free(st);
}

/* Loads the notes on the one loop; max_threads = 1 means there is no other handler to build. */
static int make(const m0_handler_info *info, void **ret_state, char *err, size_t err_len)
{
        if (info->kind != M0_THREAD_LOOP || info->loop != 0 || info->loops != 1) {
                snprintf(err, err_len, "notes keeps its notes in one handler and runs on one loop");
                return -EINVAL;
        }
        struct state *st = calloc(1, sizeof(*st));
        if (!st)
                return -ENOMEM;
        st->store.dirfd = -1;
        char fix[256];
        int e = config_read(&st->cfg, err, err_len, fix, sizeof(fix));
        if (e < 0)
                goto fail;
        password_mac(st->cfg.key, st->cfg.key_len, st->cfg.password, strlen(st->cfg.password),
                     st->password_mac);
        st->cfg.password = NULL;
        e = notes_store_open(&st->store, st->cfg.dir, (size_t)st->cfg.max_revoked, now_s(), err,
                             err_len);
        if (e < 0)
                goto fail;
        *ret_state = st;
        return 0;
fail:
        state_free(st);
        return e;
}

static const m0_route routes[] = {
        {"POST", "/login", login, 0},
        {"POST", "/logout", logout, 0},
        /* Every method: the session is checked before the method, so even a 405 needs one. */
        {NULL, "/notes", notes_root, 0},
        {NULL, "/notes/", notes_one, M0_ROUTE_PREFIX},
        {NULL, NULL, NULL, 0},
};

static const m0_app app = {
        .name = "notes",
        .max_threads = 1,
        .make = make,
        .free = state_free,
        .routes = routes,
        .check = check,
};

int main(int argc, char **argv)
{
        return m0_main(&app, argc, argv);
}
