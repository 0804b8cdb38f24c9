/* SPDX-License-Identifier: MIT */
/* pgbus.c: the bus thread of a bus shared through PostgreSQL: batches, LISTEN, reads, replay, retention, schema (G1–G6). */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "buf.h"
#include "log.h"
#include "pgbus.h"
#include "util.h"

/*
 * The design, in short (doc/DECISIONS.md D60–D66):
 *  - Ids come from one row, m0_bus_counter, updated in the inserting transaction. Publishers
 *    serialize on its row lock, so ids are gap-free and a transaction holding ids N.. commits
 *    before any transaction can take N+k: a reader of `id > last ORDER BY id` never passes an
 *    id that commits later (G1). A rolled-back transaction rolls its ids back with it.
 *  - One transaction carries up to M0__PGBUS_BATCH queued events, and the NOTIFY that wakes
 *    the listeners. The table is the truth: the listener also reads on (re)connect and every
 *    POLL_EVERY_MS.
 *  - Each transaction also writes (origin, batch) for this process in m0_bus_origins, first,
 *    so that after a connection fails in the middle of a commit the thread can tell whether the
 *    batch in flight committed (and must not be sent twice) or not (and must be sent again).
 *  - Everything runs on one thread with non-blocking libpq and poll(): a connection that hangs
 *    is bounded by CONNECT_TIMEOUT_MS and QUERY_TIMEOUT_MS, a stop is seen at once.
 */

#define CONNECT_TIMEOUT_MS 10000
#define QUERY_TIMEOUT_MS 30000
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
#define POLL_EVERY_MS 1000
#define RETAIN_EVERY_MS 60000
#define MAX_RESULTS 8
#define T_EVENTS "m0_bus_events"
#define T_COUNTER "m0_bus_counter"
#define T_ORIGINS "m0_bus_origins"
#define NOTIFY_CHANNEL "m0_bus"
/* Advisory lock keys ("m0bus", "m0bur"): creating the schema; retention, one host at a time. */
#define LOCK_SCHEMA "468963194227"
#define LOCK_RETAIN "468963194226"
#define TIME_US "(extract(epoch FROM time) * 1000000)::int8"

/* One accepted publish; the three strings live in `mem`. */
struct qev {
        struct qev *next;
        const char *channel;
        const char *event; /* NULL: none */
        const char *data;
        size_t bytes;
        char mem[];
};

/* One replay query waiting for the listening connection. */
struct replay_req {
        struct replay_req *next;
        uint64_t after;
        uint32_t max;
        m0_pgbus_replay_fn done;
        void *ud;
        size_t n;
        char **pat; /* exact names, or a prefix ending in '*' */
};

enum role { PUB = 0, LSN = 1 };

enum step {
        ST_NONE = 0,
        ST_SCHEMA_LOOK, /* BEGIN, the schema lock, the encoding, the tables' columns */
        ST_SCHEMA_MAKE, /* the missing tables, the counter's row, this origin's row, COMMIT */
        ST_ORIGIN,      /* after a failure: did the batch in flight commit? */
        ST_BATCH,
        ST_RETAIN,
        ST_LISTEN,
        ST_START, /* where delivery starts: the counter */
        ST_READ,
        ST_REPLAY,
};

struct conn {
        enum role role;
        const char *what; /* "publishing", "listening" */
        PGconn *pg;       /* NULL while down */
        bool connecting;
        PostgresPollingStatusType polling;
        bool ready; /* connected and set up: may take work */
        enum step step;
        bool flushing;     /* PQflush() left bytes to send */
        uint64_t deadline; /* of the connect or the query in flight; 0: none */
        uint64_t retry_at; /* while down */
        uint32_t backoff_ms;
        int nres;
        PGresult *res[MAX_RESULTS];
        /* The server's FATAL that came as a notice before it closed an idle connection
         * ("terminating connection due to administrator command"): a better reason than
         * libpq's "server closed the connection unexpectedly". */
        char fatal[256];
};

struct m0_pgbus {
        struct m0_pgbus_options opt;
        char *uri, *name;
        char origin[33]; /* this process, in m0_bus_origins */
        int wake_fd;
        pthread_t thread;
        bool running;

        /* Shared with every thread, under `lock`. */
        pthread_mutex_t lock;
        pthread_cond_t cond; /* started or refused became true */
        struct qev *qhead, *qtail;
        size_t qlen; /* accepted and not committed: the queue and the batch in flight */
        struct replay_req *rhead, *rtail;
        size_t rlen;
        bool stopping;
        uint64_t flush_deadline;
        bool schema_ok;
        bool started;           /* the schema is checked and delivery's first id is known */
        uint64_t accepted_down; /* publishes accepted while `down` */
        bool down;
        bool refused;
        char why[512]; /* the refusal */
        char state[600];
        struct m0_pgbus_stats stats;

        /* The bus thread's alone. */
        struct conn c[2];
        struct qev *inflight; /* the batch sent and not known to be committed */
        size_t ninflight;
        uint64_t seq, inflight_seq;
        bool uncertain;  /* a connection failed while `inflight` was out */
        bool delivering; /* `last` is known */
        uint64_t last;
        bool read_wanted;
        uint64_t poll_at;
        uint64_t retain_at;
        bool retain_active, last_was_retain;
        uint64_t run_deleted, run_batches, run_lo, run_hi;
        struct replay_req *replaying;
        uint64_t replay_upto;
        bool was_up;
        uint64_t down_since; /* 0: not down */
        uint64_t down_last;  /* the last id delivered when it went down */
        char reason[400];    /* the last failure, for the state */
        uint64_t rng;
        struct m0_buf sql;
};

/* ---- text ---- */

/* Visible ASCII, 1–200 bytes (N1). */
static bool channel_ok(const char *s, size_t len)
{
        if (len < 1 || len > M0__PGBUS_CHANNEL_MAX)
                return false;
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
                        return false;
        return true;
}

/* Well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF): the
 * database's text must be, or the whole batch would fail. */
static bool utf8_ok(const char *s)
{
        const unsigned char *p = (const unsigned char *)s;
        while (*p) {
                unsigned char c = *p;
                int n;
                uint32_t cp, min;
                if (c < 0x80) {
                        p++;
                        continue;
                } else if ((c & 0xe0) == 0xc0) {
                        n = 1, cp = c & 0x1f, min = 0x80;
                } else if ((c & 0xf0) == 0xe0) {
                        n = 2, cp = c & 0x0f, min = 0x800;
                } else if ((c & 0xf8) == 0xf0) {
                        n = 3, cp = c & 0x07, min = 0x10000;
                } else {
                        return false;
                }
                for (int i = 1; i <= n; i++) {
                        if ((p[i] & 0xc0) != 0x80)
                                return false;
                        cp = (cp << 6) | (p[i] & 0x3f);
                }
                if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                        return false;
                p += n + 1;
        }
        return true;
}

/* libpq's message as one line: its first line, runs of blanks made one space. */
static void one_line(char *out, size_t len, const char *msg)
{
        size_t o = 0;
        bool space = false;
        if (!msg)
                msg = "";
        while (*msg == ' ' || *msg == '\t')
                msg++;
        for (; *msg && *msg != '\n' && o + 1 < len; msg++) {
                if (*msg == ' ' || *msg == '\t' || *msg == '\r') {
                        space = true;
                        continue;
                }
                if (space && o + 2 < len)
                        out[o++] = ' ';
                space = false;
                out[o++] = *msg;
        }
        out[o] = '\0';
        if (!o)
                snprintf(out, len, "no reason given");
}

/* The reason for the state and the log: libpq's words, and the cause when the kernel refused a
 * connection with EPERM — under m0@.service that is IPAddressDeny=any (D28). */
static void reason_of(char *out, size_t len, const char *msg)
{
        char line[300];
        one_line(line, sizeof(line), msg);
        if (strstr(line, strerror(EPERM)))
                snprintf(out, len,
                         "%s: the kernel refused the connection (EPERM); under m0@.service "
                         "IPAddressDeny=any refuses it until a drop-in allows the database's "
                         "address (IPAddressAllow=, doc/systemd.md)",
                         line);
        else
                snprintf(out, len, "%s", line);
}

/* Append `s` as a quoted SQL literal escaped for `pg`'s settings. 0 or -ENOMEM/-EINVAL. */
static int sql_literal(struct m0_buf *b, PGconn *pg, const char *s)
{
        size_t n = strlen(s);
        if (m0__buf_reserve(b, 2 * n + 3) < 0)
                return -ENOMEM;
        int err = 0;
        b->data[b->len++] = '\'';
        b->len += PQescapeStringConn(pg, b->data + b->len, s, n, &err);
        b->data[b->len++] = '\'';
        b->data[b->len] = '\0';
        return err ? -EINVAL : 0;
}

/* ---- the URI ---- */

int m0__pgbus_uri_check(const char *uri, char *err, size_t err_len)
{
        if (strncmp(uri, "postgresql://", 13) != 0 && strncmp(uri, "postgres://", 11) != 0) {
                snprintf(err, err_len, "not local and not a postgresql:// URI");
                return -EINVAL;
        }
        char *msg = NULL;
        PQconninfoOption *o = PQconninfoParse(uri, &msg);
        if (!o) {
                char line[256];
                one_line(line, sizeof(line), msg ? msg : "out of memory");
                /* libpq quotes the URI after this, password and all: the log must not */
                char *quoted = strstr(line, " in URI: ");
                if (quoted)
                        *quoted = '\0';
                snprintf(err, err_len, "%s", line);
                PQfreemem(msg);
                return -EINVAL;
        }
        PQconninfoFree(o);
        return 0;
}

/* Append bytes to out[*o], keeping a NUL within `len`. */
static void put(char *out, size_t len, size_t *o, const char *s, size_t n)
{
        for (size_t i = 0; i < n && *o + 1 < len; i++)
                out[(*o)++] = s[i];
        out[*o] = '\0';
}

void m0__pgbus_redact(const char *uri, char *out, size_t len)
{
        size_t o = 0;
        if (!len)
                return;
        out[0] = '\0';
        const char *sep = strstr(uri, "://");
        if (!sep) {
                put(out, len, &o, uri, strlen(uri));
                return;
        }
        const char *auth = sep + 3, *auth_end = auth + strcspn(auth, "/?");
        put(out, len, &o, uri, (size_t)(auth - uri));
        const char *at = NULL;
        for (const char *p = auth; p < auth_end; p++)
                if (*p == '@')
                        at = p;
        const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
        if (colon) {
                put(out, len, &o, auth, (size_t)(colon - auth) + 1);
                put(out, len, &o, "***", 3);
                auth = at;
        }
        const char *q = strchr(auth_end, '?');
        put(out, len, &o, auth, (size_t)((q ? q : auth_end + strlen(auth_end)) - auth));
        if (!q)
                return;
        for (const char *p = q; *p;) {
                size_t n = 1 + strcspn(p + 1, "&");
                if (!strncmp(p + 1, "password=", 9)) {
                        put(out, len, &o, p, 10);
                        put(out, len, &o, "***", 3);
                } else {
                        put(out, len, &o, p, n);
                }
                p += n;
        }
}

int m0__pgbus_probe(const char *uri, int timeout_s, char *detail, size_t detail_len)
{
        char t[16];
        snprintf(t, sizeof(t), "%d", timeout_s > 0 ? timeout_s : 1);
        const char *keys[] = {"dbname", "connect_timeout", "application_name", NULL};
        const char *vals[] = {uri, t, "m0/doctor", NULL};
        PGconn *pg = PQconnectdbParams(keys, vals, 1);
        char why[600];
        int r = 0;
        if (!pg) {
                snprintf(detail, detail_len, "cannot reach the database: out of memory");
                return -ENOMEM;
        }
        if (PQstatus(pg) != CONNECTION_OK) {
                reason_of(why, sizeof(why), PQerrorMessage(pg));
                snprintf(detail, detail_len,
                         "cannot reach the database (%s); serving would start and keep "
                         "reconnecting",
                         why);
                r = -ECONNREFUSED;
                goto finish;
        }
        PGresult *res = PQexec(pg, "SELECT current_setting('server_version'), "
                                   "to_regclass('" T_EVENTS "') IS NOT NULL");
        if (PQresultStatus(res) != PGRES_TUPLES_OK) {
                one_line(why, sizeof(why), PQresultErrorMessage(res));
                snprintf(detail, detail_len, "reached the database, which answered: %s", why);
                r = -EIO;
        } else {
                bool have = PQgetvalue(res, 0, 1)[0] == 't';
                snprintf(detail, detail_len, "reached database %s as %s (PostgreSQL %s); %s",
                         PQdb(pg), PQuser(pg), PQgetvalue(res, 0, 0),
                         have ? "m0's tables are there"
                              : "m0's tables are not there yet: the first host creates them");
        }
        PQclear(res);
finish:
        PQfinish(pg);
        return r;
}

/* ---- state, shared ---- */

static void set_state(struct m0_pgbus *b, const char *s)
{
        pthread_mutex_lock(&b->lock);
        bool same = !strcmp(b->state, s);
        if (!same)
                snprintf(b->state, sizeof(b->state), "%s", s);
        pthread_mutex_unlock(&b->lock);
        if (!same && b->opt.state_changed)
                b->opt.state_changed(b->opt.ud, s);
}

void m0__pgbus_state(struct m0_pgbus *b, char *out, size_t len)
{
        pthread_mutex_lock(&b->lock);
        snprintf(out, len, "%s", b->state);
        pthread_mutex_unlock(&b->lock);
}

void m0__pgbus_stats(struct m0_pgbus *b, struct m0_pgbus_stats *ret)
{
        pthread_mutex_lock(&b->lock);
        *ret = b->stats;
        ret->queued = b->qlen;
        pthread_mutex_unlock(&b->lock);
}

static bool is_up(const struct m0_pgbus *b)
{
        return b->c[PUB].ready && b->c[LSN].ready && b->delivering;
}

/* Recompute the state after a connection changed, and log the going and the coming back (G3). */
static void state_update(struct m0_pgbus *b, const char *what)
{
        char s[sizeof(b->state)];
        bool up = is_up(b);
        if (b->refused)
                snprintf(s, sizeof(s), "bus: refused (%s)", b->why);
        else if (up)
                snprintf(s, sizeof(s), "bus: up");
        else if (b->reason[0])
                snprintf(s, sizeof(s), "bus: reconnecting (%s)", b->reason);
        else
                snprintf(s, sizeof(s), "bus: connecting");
        set_state(b, s);
        if (b->refused)
                return;

        uint64_t now = m0__now_ms();
        if (b->delivering) {
                pthread_mutex_lock(&b->lock);
                if (!b->started) {
                        b->started = true;
                        pthread_cond_broadcast(&b->cond);
                }
                pthread_mutex_unlock(&b->lock);
        }
        if (up && !b->was_up) {
                b->was_up = true;
                pthread_mutex_lock(&b->lock);
                uint64_t q = b->accepted_down;
                b->down = false;
                b->accepted_down = 0;
                pthread_mutex_unlock(&b->lock);
                if (b->down_since)
                        m0__log(M0_LOG_NOTICE, -1, M0_MID_BUS_UP,
                                "bus: the database is back after %.1f s; the %" PRIu64
                                " event%s published meanwhile go out in order, and every event "
                                "after id %" PRIu64 " is read",
                                (double)(now - b->down_since) / 1000.0, q, q == 1 ? "" : "s",
                                b->down_last);
                else
                        m0__log(M0_LOG_INFO, -1, NULL,
                                "bus: up on database %s, delivering every event after id %" PRIu64,
                                PQdb(b->c[PUB].pg), b->last);
                b->down_since = 0;
                b->reason[0] = '\0';
        } else if (!up && b->reason[0] && !b->down_since) {
                b->down_since = now;
                b->down_last = b->last;
                pthread_mutex_lock(&b->lock);
                b->down = true;
                b->accepted_down = 0;
                pthread_mutex_unlock(&b->lock);
                if (b->was_up)
                        m0__log(M0_LOG_WARNING, -1, M0_MID_BUS_DOWN,
                                "bus: lost the database (%s connection: %s); serving goes on, "
                                "publishes queue up to %u",
                                what, b->reason, b->opt.queue_max);
                else
                        m0__log(M0_LOG_WARNING, -1, M0_MID_BUS_DOWN,
                                "bus: cannot reach the database (%s connection: %s); retrying, "
                                "publishes queue up to %u",
                                what, b->reason, b->opt.queue_max);
                b->was_up = false;
        }
}

static void refuse(struct m0_pgbus *b, const char *fmt, ...) M0_PRINTF(2, 3);

/* ---- connections ---- */

static void results_clear(struct conn *c)
{
        for (int i = 0; i < c->nres; i++)
                PQclear(c->res[i]);
        c->nres = 0;
}

static void conn_close(struct conn *c)
{
        results_clear(c);
        if (c->pg)
                PQfinish(c->pg);
        c->pg = NULL;
        c->connecting = false;
        c->ready = false;
        c->step = ST_NONE;
        c->flushing = false;
        c->deadline = 0;
}

static uint64_t jitter(struct m0_pgbus *b, uint32_t ms)
{
        /* xorshift64: enough to keep hosts that lost one database from reconnecting in step */
        b->rng ^= b->rng << 13;
        b->rng ^= b->rng >> 7;
        b->rng ^= b->rng << 17;
        return ms * 3 / 4 + b->rng % (ms / 2 + 1);
}

/* A connection failed: close it, note what was in flight, and retry after the backoff (D63). */
static void conn_fail(struct m0_pgbus *b, struct conn *c, const char *msg)
{
        reason_of(b->reason, sizeof(b->reason), c->fatal[0] ? c->fatal : msg);
        c->fatal[0] = '\0';
        conn_close(c);
        if (c->role == PUB && b->inflight)
                b->uncertain = true;
        if (c->role == LSN) {
                if (b->replaying) {
                        b->replaying->next = NULL;
                        pthread_mutex_lock(&b->lock);
                        b->replaying->next = b->rhead;
                        b->rhead = b->replaying;
                        if (!b->rtail)
                                b->rtail = b->replaying;
                        b->rlen++;
                        pthread_mutex_unlock(&b->lock);
                        b->replaying = NULL;
                }
                b->read_wanted = true;
        }
        c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : BACKOFF_MIN_MS;
        if (c->backoff_ms > BACKOFF_MAX_MS)
                c->backoff_ms = BACKOFF_MAX_MS;
        c->retry_at = m0__now_ms() + jitter(b, c->backoff_ms);
        state_update(b, c->what);
}

/* Notices (a table that already exists) are no news; a FATAL is the reason of what follows. */
static void notice(void *arg, const char *message)
{
        struct conn *c = arg;
        if (!strncmp(message, "FATAL:", 6))
                one_line(c->fatal, sizeof(c->fatal), message);
}

static void conn_start(struct m0_pgbus *b, struct conn *c, uint64_t now)
{
        char app[128];
        snprintf(app, sizeof(app), "m0/%s/%s", b->name, c->role == PUB ? "publish" : "listen");
        /* Keys before dbname are defaults the URI may change; keys after it are m0's own. */
        const char *keys[] = {
                "keepalives", "keepalives_idle",  "keepalives_interval", "keepalives_count",
                "dbname",     "application_name", "client_encoding",     NULL};
        const char *vals[] = {"1", "10", "5", "3", b->uri, app, "UTF8", NULL};
        c->pg = PQconnectStartParams(keys, vals, 1);
        if (!c->pg) {
                conn_fail(b, c, "out of memory");
                return;
        }
        if (PQstatus(c->pg) == CONNECTION_BAD) {
                conn_fail(b, c, PQerrorMessage(c->pg));
                return;
        }
        c->fatal[0] = '\0';
        PQsetNoticeProcessor(c->pg, notice, c);
        c->connecting = true;
        c->polling = PGRES_POLLING_WRITING;
        c->deadline = now + CONNECT_TIMEOUT_MS;
}

static void conn_send(struct m0_pgbus *b, struct conn *c, enum step st, const char *sql)
{
        if (!PQsendQuery(c->pg, sql)) {
                conn_fail(b, c, PQerrorMessage(c->pg));
                return;
        }
        c->step = st;
        c->deadline = m0__now_ms() + QUERY_TIMEOUT_MS;
        int r = PQflush(c->pg);
        if (r < 0)
                conn_fail(b, c, PQerrorMessage(c->pg));
        else
                c->flushing = r == 1;
}

/* The connection is made: set it up (the schema on the publishing one, LISTEN on the other). */
static void conn_made(struct m0_pgbus *b, struct conn *c)
{
        c->connecting = false;
        c->deadline = 0;
        if (PQsetnonblocking(c->pg, 1) < 0) {
                conn_fail(b, c, PQerrorMessage(c->pg));
                return;
        }
        if (c->role == LSN) {
                conn_send(b, c, ST_LISTEN, "LISTEN " NOTIFY_CHANNEL);
                return;
        }
        pthread_mutex_lock(&b->lock);
        bool known = b->schema_ok;
        pthread_mutex_unlock(&b->lock);
        if (known) {
                c->ready = true;
                c->backoff_ms = 0;
                state_update(b, c->what);
                return;
        }
        conn_send(b, c, ST_SCHEMA_LOOK,
                  "BEGIN; SELECT pg_advisory_xact_lock(" LOCK_SCHEMA ");"
                  "SELECT current_setting('server_encoding');"
                  "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), "
                  "a.attnotnull FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid "
                  "WHERE c.oid = ANY (ARRAY[to_regclass('" T_COUNTER "'), to_regclass('" T_EVENTS
                  "'), to_regclass('" T_ORIGINS "')]::oid[]) AND a.attnum > 0 AND NOT "
                  "a.attisdropped ORDER BY c.relname, a.attnum");
}

/* ---- the schema (G6) ---- */

static const struct column {
        const char *table, *name, *type;
        bool notnull;
} shape[] = {
        {T_COUNTER, "one", "boolean", true},
        {T_COUNTER, "last_id", "bigint", true},
        {T_EVENTS, "id", "bigint", true},
        {T_EVENTS, "channel", "text", true},
        {T_EVENTS, "event", "text", false},
        {T_EVENTS, "data", "text", true},
        {T_EVENTS, "time", "timestamp with time zone", true},
        {T_ORIGINS, "origin", "text", true},
        {T_ORIGINS, "batch", "bigint", true},
        {T_ORIGINS, "time", "timestamp with time zone", true},
};

static const struct {
        const char *table, *create;
} tables[] = {
        {T_COUNTER, "CREATE TABLE " T_COUNTER " (one boolean PRIMARY KEY DEFAULT true CHECK (one), "
                    "last_id bigint NOT NULL);"},
        {T_EVENTS, "CREATE TABLE " T_EVENTS " (id bigint PRIMARY KEY, channel text NOT NULL, "
                   "event text, data text NOT NULL, time timestamptz NOT NULL DEFAULT now());"
                   "CREATE INDEX " T_EVENTS "_channel ON " T_EVENTS " (channel, id);"},
        {T_ORIGINS, "CREATE TABLE " T_ORIGINS " (origin text PRIMARY KEY, batch bigint NOT NULL, "
                    "time timestamptz NOT NULL DEFAULT now());"},
};

static void column_text(char *out, size_t len, const char *name, const char *type, bool notnull)
{
        snprintf(out, len, "%s %s%s", name, type, notnull ? " not null" : "");
}

/* Compare the columns found for `table` (rows [lo, hi) of `r`) with m0's. 0, or -EPROTO with
 * the refusal filled. */
static int shape_check(const PGresult *r, int lo, int hi, const char *table, char *why, size_t len)
{
        size_t first = 0, n = 0;
        for (size_t i = 0; i < M0__ARRAY_SIZE(shape); i++)
                if (!strcmp(shape[i].table, table)) {
                        if (!n)
                                first = i;
                        n++;
                }
        char have[160], want[160];
        for (size_t k = 0; k < n || (int)k < hi - lo; k++) {
                const struct column *w = k < n ? &shape[first + k] : NULL;
                int row = lo + (int)k;
                if (row < hi)
                        column_text(have, sizeof(have), PQgetvalue(r, row, 1),
                                    PQgetvalue(r, row, 2), PQgetvalue(r, row, 3)[0] == 't');
                if (w)
                        column_text(want, sizeof(want), w->name, w->type, w->notnull);
                if (row < hi && w && !strcmp(have, want))
                        continue;
                if (!w)
                        snprintf(why, len,
                                 "table %s is not m0's: column %zu \"%s\" is one m0 does not have",
                                 table, k + 1, have);
                else if (row >= hi)
                        snprintf(why, len,
                                 "table %s is not m0's: it has no column %zu (m0's is \"%s\")",
                                 table, k + 1, want);
                else
                        snprintf(why, len,
                                 "table %s is not m0's: column %zu is \"%s\", m0's is \"%s\"",
                                 table, k + 1, have, want);
                return -EPROTO;
        }
        return 0;
}

static void schema_looked(struct m0_pgbus *b, struct conn *c)
{
        /* results: BEGIN, the lock, the encoding, the columns */
        if (c->nres != 4) {
                conn_fail(b, c, "unexpected answer to the schema's query");
                return;
        }
        const char *enc = PQgetvalue(c->res[2], 0, 0);
        if (strcmp(enc, "UTF8") != 0 && strcmp(enc, "SQL_ASCII") != 0) {
                refuse(b,
                       "database %s's encoding is %s: the bus keeps UTF-8 text (createdb -E UTF8)",
                       PQdb(c->pg), enc);
                return;
        }
        const PGresult *r = c->res[3];
        int rows = PQntuples(r);
        bool present[M0__ARRAY_SIZE(tables)] = {false};
        char why[512];
        for (size_t t = 0; t < M0__ARRAY_SIZE(tables); t++) {
                int lo = -1, hi = -1;
                for (int i = 0; i < rows; i++)
                        if (!strcmp(PQgetvalue(r, i, 0), tables[t].table)) {
                                if (lo < 0)
                                        lo = i;
                                hi = i + 1;
                        }
                if (lo < 0)
                        continue;
                present[t] = true;
                if (shape_check(r, lo, hi, tables[t].table, why, sizeof(why)) < 0) {
                        refuse(b, "%s", why);
                        return;
                }
        }
        struct m0_buf *s = &b->sql;
        s->len = 0;
        bool created = false, ok = true;
        for (size_t t = 0; t < M0__ARRAY_SIZE(tables); t++)
                if (!present[t]) {
                        ok = ok && m0__buf_printf(s, "%s", tables[t].create) >= 0;
                        created = true;
                }
        /* The counter's one row; past any id already in the table (a counter that was lost). */
        ok = ok && m0__buf_printf(
                           s,
                           "INSERT INTO " T_COUNTER " (one, last_id) SELECT true, "
                           "coalesce((SELECT max(id) FROM " T_EVENTS "), 0) WHERE NOT EXISTS "
                           "(SELECT 1 FROM " T_COUNTER ");"
                           "INSERT INTO " T_ORIGINS " (origin, batch) VALUES ('%s', 0) ON CONFLICT "
                           "DO NOTHING; COMMIT",
                           b->origin) >= 0;
        pthread_mutex_lock(&b->lock);
        b->stats.created = created;
        pthread_mutex_unlock(&b->lock);
        if (!ok) {
                conn_fail(b, c, "out of memory");
                return;
        }
        conn_send(b, c, ST_SCHEMA_MAKE, s->data);
}

static void schema_made(struct m0_pgbus *b, struct conn *c)
{
        pthread_mutex_lock(&b->lock);
        bool created = b->stats.created;
        b->schema_ok = true;
        pthread_mutex_unlock(&b->lock);
        if (created)
                m0__log(M0_LOG_NOTICE, -1, NULL,
                        "bus: created the tables " T_EVENTS ", " T_COUNTER " and " T_ORIGINS
                        " in database %s",
                        PQdb(c->pg));
        else
                m0__log(M0_LOG_INFO, -1, NULL, "bus: found m0's tables in database %s",
                        PQdb(c->pg));
        c->ready = true;
        c->backoff_ms = 0;
        state_update(b, c->what);
}

/* A table that is not m0's, or a database m0 cannot use: no reconnecting, exit 78 (G6). */
static void refuse(struct m0_pgbus *b, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        pthread_mutex_lock(&b->lock);
        vsnprintf(b->why, sizeof(b->why), fmt, ap);
        b->refused = true;
        pthread_cond_broadcast(&b->cond);
        pthread_mutex_unlock(&b->lock);
        va_end(ap);
        m0__log(M0_LOG_ERR, -1, M0_MID_BUS_REFUSED, "bus: refused: %s", b->why);
        conn_close(&b->c[PUB]);
        conn_close(&b->c[LSN]);
        state_update(b, "publishing");
}

/* ---- publishing (G1, G2) ---- */

static void qev_free_list(struct qev *q)
{
        while (q) {
                struct qev *next = q->next;
                free(q);
                q = next;
        }
}

/* Move up to a batch of queued events into `inflight` (kept there until committed). */
static void batch_take(struct m0_pgbus *b)
{
        if (b->inflight)
                return;
        pthread_mutex_lock(&b->lock);
        size_t n = 0, bytes = 0;
        struct qev *q = b->qhead, *last = NULL;
        while (q && n < M0__PGBUS_BATCH && (n == 0 || bytes + q->bytes <= M0__PGBUS_BATCH_BYTES)) {
                bytes += q->bytes;
                n++;
                last = q;
                q = q->next;
        }
        if (n) {
                b->inflight = b->qhead;
                b->qhead = q;
                if (!q)
                        b->qtail = NULL;
                last->next = NULL;
        }
        pthread_mutex_unlock(&b->lock);
        b->ninflight = n;
}

/*
 * One transaction (a simple query of several statements is one): this origin's batch number
 * first (its row lock orders a later check behind this transaction), then the counter, whose
 * row lock serializes publishers, and the rows, then the NOTIFY. A missing counter row makes
 * the ids NULL and the whole transaction fail rather than commit nothing.
 */
static void batch_send(struct m0_pgbus *b, struct conn *c)
{
        struct m0_buf *s = &b->sql;
        s->len = 0;
        b->inflight_seq = ++b->seq;
        int r = m0__buf_printf(s,
                               "INSERT INTO " T_ORIGINS " (origin, batch, time) VALUES ('%s', "
                               "%" PRIu64 ", now()) ON CONFLICT (origin) DO UPDATE SET batch = "
                               "excluded.batch, time = excluded.time;"
                               "WITH c AS (UPDATE " T_COUNTER " SET last_id = last_id + %zu "
                               "RETURNING last_id - %zu AS base) INSERT INTO " T_EVENTS
                               " (id, channel, event, data) SELECT (SELECT base FROM c) + v.n, "
                               "v.channel, v.event, v.data FROM (VALUES ",
                               b->origin, b->inflight_seq, b->ninflight, b->ninflight);
        size_t i = 1;
        for (struct qev *q = b->inflight; q && r >= 0; q = q->next, i++) {
                r = m0__buf_printf(s, "%s(%zu,", i > 1 ? "," : "", i);
                if (r >= 0)
                        r = sql_literal(s, c->pg, q->channel);
                if (r >= 0)
                        r = m0__buf_printf(s, ",");
                if (r >= 0)
                        r = q->event ? sql_literal(s, c->pg, q->event)
                                     : m0__buf_printf(s, "NULL::text");
                if (r >= 0)
                        r = m0__buf_printf(s, ",");
                if (r >= 0)
                        r = sql_literal(s, c->pg, q->data);
                if (r >= 0)
                        r = m0__buf_printf(s, ")");
        }
        if (r >= 0)
                r = m0__buf_printf(s, ") AS v(n, channel, event, data) ORDER BY v.n;"
                                      "NOTIFY " NOTIFY_CHANNEL);
        if (r < 0) {
                conn_fail(b, c, "out of memory building a batch");
                return;
        }
        conn_send(b, c, ST_BATCH, s->data);
}

/* The batch in flight committed: let go of it. */
static void batch_committed(struct m0_pgbus *b)
{
        size_t n = b->ninflight;
        qev_free_list(b->inflight);
        b->inflight = NULL;
        b->ninflight = 0;
        pthread_mutex_lock(&b->lock);
        b->qlen -= n;
        b->stats.published += n;
        b->stats.batches++;
        pthread_mutex_unlock(&b->lock);
        b->read_wanted = true;
}

static void batch_done(struct m0_pgbus *b, struct conn *c)
{
        /* results: the origin's upsert, the insert, NOTIFY; an error fails the connection */
        batch_committed(b);
        b->last_was_retain = false;
        (void)c;
}

static void origin_send(struct m0_pgbus *b, struct conn *c)
{
        struct m0_buf *s = &b->sql;
        s->len = 0;
        if (m0__buf_printf(s, "SELECT batch FROM " T_ORIGINS " WHERE origin = '%s' FOR UPDATE",
                           b->origin) < 0) {
                conn_fail(b, c, "out of memory");
                return;
        }
        conn_send(b, c, ST_ORIGIN, s->data);
}

/* After a failure with a batch in flight: its number in the origin's row tells whether it
 * committed. FOR UPDATE waits for a transaction of ours the server may still be running. */
static void origin_done(struct m0_pgbus *b, struct conn *c)
{
        uint64_t got = 0;
        if (c->nres >= 1 && PQntuples(c->res[0]) == 1)
                got = strtoull(PQgetvalue(c->res[0], 0, 0), NULL, 10);
        b->uncertain = false;
        if (b->inflight && got >= b->inflight_seq)
                batch_committed(b);
}

/* ---- retention (G5) ---- */

static void retain_send(struct m0_pgbus *b, struct conn *c)
{
        struct m0_buf *s = &b->sql;
        s->len = 0;
        char cond[256];
        if (b->opt.retain_s && b->opt.retain_rows)
                snprintf(cond, sizeof(cond),
                         "low.time < now() - make_interval(secs => %" PRIu32 ") OR low.id <= "
                         "(SELECT last_id FROM " T_COUNTER ") - %" PRIu64,
                         b->opt.retain_s, b->opt.retain_rows);
        else if (b->opt.retain_s)
                snprintf(cond, sizeof(cond),
                         "low.time < now() - make_interval(secs => %" PRIu32 ")", b->opt.retain_s);
        else
                snprintf(cond, sizeof(cond),
                         "low.id <= (SELECT last_id FROM " T_COUNTER ") - %" PRIu64,
                         b->opt.retain_rows);
        /* The oldest rows by id, a batch at a time: the primary key's order, no scan of the
         * table; the lock makes one host at a time do it. */
        int r = m0__buf_printf(
                s,
                "WITH lk AS MATERIALIZED (SELECT pg_try_advisory_xact_lock(" LOCK_RETAIN
                ") AS got), "
                "low AS (SELECT id, time FROM " T_EVENTS " ORDER BY id LIMIT %d), "
                "del AS (DELETE FROM " T_EVENTS " d USING low, lk WHERE lk.got AND d.id = low.id "
                "AND (%s) RETURNING d.id) "
                "SELECT (SELECT got FROM lk), count(*), coalesce(min(id), 0), coalesce(max(id), 0) "
                "FROM del;"
                "DELETE FROM " T_ORIGINS " WHERE time < now() - interval '7 days' AND origin <> "
                "'%s' AND pg_try_advisory_xact_lock(" LOCK_RETAIN ")",
                M0__PGBUS_RETAIN_BATCH, cond, b->origin);
        if (r < 0) {
                conn_fail(b, c, "out of memory");
                return;
        }
        conn_send(b, c, ST_RETAIN, s->data);
}

static void retain_end(struct m0_pgbus *b)
{
        b->retain_active = false;
        if (b->run_deleted)
                m0__log(M0_LOG_INFO, -1, NULL,
                        "bus: retention deleted %" PRIu64 " row%s in %" PRIu64
                        " batch%s (ids %" PRIu64 "-%" PRIu64 ")",
                        b->run_deleted, b->run_deleted == 1 ? "" : "s", b->run_batches,
                        b->run_batches == 1 ? "" : "es", b->run_lo, b->run_hi);
}

static void retain_done(struct m0_pgbus *b, struct conn *c)
{
        b->last_was_retain = true;
        const PGresult *r = c->res[0];
        if (c->nres < 1 || PQntuples(r) != 1) {
                retain_end(b);
                return;
        }
        bool got = PQgetvalue(r, 0, 0)[0] == 't';
        uint64_t n = strtoull(PQgetvalue(r, 0, 1), NULL, 10);
        pthread_mutex_lock(&b->lock);
        if (!got)
                b->stats.retain_busy++;
        else {
                if (!b->run_batches)
                        b->stats.retain_runs++;
                b->stats.retain_batches++;
                b->stats.retain_deleted += n;
        }
        pthread_mutex_unlock(&b->lock);
        if (!got) {
                retain_end(b);
                return;
        }
        b->run_batches++;
        if (n) {
                if (!b->run_deleted)
                        b->run_lo = strtoull(PQgetvalue(r, 0, 2), NULL, 10);
                b->run_hi = strtoull(PQgetvalue(r, 0, 3), NULL, 10);
                b->run_deleted += n;
        }
        if (n < M0__PGBUS_RETAIN_BATCH)
                retain_end(b);
}

/* ---- delivery (G1, G3) ---- */

static void event_of(const PGresult *r, int i, struct m0_pgbus_event *ev)
{
        ev->id = strtoull(PQgetvalue(r, i, 0), NULL, 10);
        ev->channel = PQgetvalue(r, i, 1);
        ev->event = PQgetisnull(r, i, 2) ? NULL : PQgetvalue(r, i, 2);
        ev->data = PQgetvalue(r, i, 3);
        ev->data_len = (size_t)PQgetlength(r, i, 3);
        ev->time_us = strtoll(PQgetvalue(r, i, 4), NULL, 10);
}

static void read_send(struct m0_pgbus *b, struct conn *c)
{
        struct m0_buf *s = &b->sql;
        s->len = 0;
        if (m0__buf_printf(s,
                           "SELECT id, channel, event, data, " TIME_US " FROM " T_EVENTS
                           " WHERE id > %" PRIu64 " ORDER BY id LIMIT %d",
                           b->last, M0__PGBUS_READ_ROWS) < 0) {
                conn_fail(b, c, "out of memory");
                return;
        }
        b->read_wanted = false;
        conn_send(b, c, ST_READ, s->data);
}

static void read_done(struct m0_pgbus *b, struct conn *c)
{
        const PGresult *r = c->res[0];
        int n = c->nres >= 1 ? PQntuples(r) : 0;
        uint64_t delivered = 0, lost = 0;
        for (int i = 0; i < n; i++) {
                struct m0_pgbus_event ev;
                event_of(r, i, &ev);
                if (ev.id <= b->last)
                        continue;
                if (ev.id > b->last + 1) {
                        /* ids are gap-free (G1): the missing ones were deleted by retention */
                        m0__log(M0_LOG_WARNING, -1, NULL,
                                "bus: events %" PRIu64 "-%" PRIu64
                                " were deleted by retention before this host read them",
                                b->last + 1, ev.id - 1);
                        lost += ev.id - b->last - 1;
                }
                b->last = ev.id;
                delivered++;
                b->opt.deliver(b->opt.ud, &ev);
        }
        pthread_mutex_lock(&b->lock);
        b->stats.delivered += delivered;
        b->stats.lost += lost;
        b->stats.last_id = b->last;
        pthread_mutex_unlock(&b->lock);
        if (n >= M0__PGBUS_READ_ROWS)
                b->read_wanted = true;
        b->poll_at = m0__now_ms() + POLL_EVERY_MS;
}

static void start_done(struct m0_pgbus *b, struct conn *c)
{
        if (c->nres < 1 || PQntuples(c->res[0]) != 1) {
                conn_fail(b, c, T_COUNTER " has no row");
                return;
        }
        b->last = strtoull(PQgetvalue(c->res[0], 0, 0), NULL, 10);
        b->delivering = true;
        pthread_mutex_lock(&b->lock);
        b->stats.last_id = b->last;
        pthread_mutex_unlock(&b->lock);
        state_update(b, c->what);
}

/* ---- replay (G4) ---- */

static void replay_send(struct m0_pgbus *b, struct conn *c)
{
        pthread_mutex_lock(&b->lock);
        struct replay_req *q = b->rhead;
        if (q) {
                b->rhead = q->next;
                if (!b->rhead)
                        b->rtail = NULL;
                b->rlen--;
        }
        pthread_mutex_unlock(&b->lock);
        if (!q)
                return;
        q->next = NULL;
        b->replaying = q;
        b->replay_upto = b->last;
        struct m0_buf *s = &b->sql;
        s->len = 0;
        int r = m0__buf_printf(s,
                               "SELECT id, channel, event, data, t FROM (SELECT id, channel, "
                               "event, data, " TIME_US " AS t FROM " T_EVENTS " WHERE id > %" PRIu64
                               " AND id <= %" PRIu64,
                               q->after, b->replay_upto);
        for (size_t i = 0; i < q->n && r >= 0; i++) {
                const char *p = q->pat[i];
                size_t len = strlen(p);
                r = m0__buf_printf(s, "%s", i ? " OR " : " AND (");
                if (r >= 0 && len && p[len - 1] == '*') {
                        char pre[M0__PGBUS_CHANNEL_MAX + 1];
                        snprintf(pre, sizeof(pre), "%.*s", (int)(len - 1), p);
                        r = m0__buf_printf(s, "starts_with(channel, ");
                        if (r >= 0)
                                r = sql_literal(s, c->pg, pre);
                        if (r >= 0)
                                r = m0__buf_printf(s, ")");
                } else if (r >= 0) {
                        r = m0__buf_printf(s, "channel = ");
                        if (r >= 0)
                                r = sql_literal(s, c->pg, p);
                }
        }
        if (r >= 0)
                r = m0__buf_printf(s, "%s ORDER BY id DESC LIMIT %" PRIu32 ") t ORDER BY id",
                                   q->n ? ")" : "", q->max + 1);
        if (r < 0) {
                conn_fail(b, c, "out of memory");
                return;
        }
        conn_send(b, c, ST_REPLAY, s->data);
}

static void replay_free(struct replay_req *q)
{
        free(q);
}

static void replay_done(struct m0_pgbus *b, struct conn *c, const char *err)
{
        struct replay_req *q = b->replaying;
        b->replaying = NULL;
        if (!q)
                return;
        struct m0_pgbus_replayed out = {.upto = b->replay_upto};
        struct m0_pgbus_event *ev = NULL;
        char why[300];
        const PGresult *r = c->nres >= 1 ? c->res[0] : NULL;
        if (err || !r) {
                one_line(why, sizeof(why), err ? err : "no answer");
                out.err = -EIO;
                out.why = why;
        } else {
                int n = PQntuples(r), skip = 0;
                if ((uint32_t)n > q->max) {
                        out.truncated = true;
                        skip = n - (int)q->max;
                }
                ev = calloc((size_t)(n - skip) + 1, sizeof(*ev));
                if (!ev) {
                        out.err = -ENOMEM;
                        out.why = "out of memory";
                } else {
                        for (int i = skip; i < n; i++)
                                event_of(r, i, &ev[i - skip]);
                        out.ev = ev;
                        out.n = (size_t)(n - skip);
                }
        }
        pthread_mutex_lock(&b->lock);
        b->stats.replays++;
        pthread_mutex_unlock(&b->lock);
        q->done(q->ud, &out);
        free(ev);
        replay_free(q);
}

/* ---- the thread ---- */

static void query_done(struct m0_pgbus *b, struct conn *c)
{
        enum step st = c->step;
        c->step = ST_NONE;
        c->deadline = 0;
        const char *err = NULL;
        for (int i = 0; i < c->nres && !err; i++) {
                ExecStatusType t = PQresultStatus(c->res[i]);
                if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK)
                        err = PQresultErrorMessage(c->res[i]);
        }
        if (err && st == ST_REPLAY && PQstatus(c->pg) == CONNECTION_OK) {
                /* a replay's own failure is the caller's to hear, not the connection's */
                replay_done(b, c, err);
                results_clear(c);
                return;
        }
        if (err) {
                /* any other failure fails the connection: what was in flight is known to be
                 * rolled back or checked (the origin's batch) after reconnecting */
                char copy[600];
                snprintf(copy, sizeof(copy), "%s", err);
                conn_fail(b, c, copy);
                return;
        }
        switch (st) {
        case ST_SCHEMA_LOOK: schema_looked(b, c); break;
        case ST_SCHEMA_MAKE: schema_made(b, c); break;
        case ST_ORIGIN: origin_done(b, c); break;
        case ST_BATCH: batch_done(b, c); break;
        case ST_RETAIN: retain_done(b, c); break;
        case ST_LISTEN:
                c->ready = true;
                c->backoff_ms = 0;
                b->read_wanted = true;
                state_update(b, c->what);
                break;
        case ST_START: start_done(b, c); break;
        case ST_READ: read_done(b, c); break;
        case ST_REPLAY: replay_done(b, c, NULL); break;
        case ST_NONE: break;
        }
        results_clear(c);
}

/* Act on what libpq has buffered: notifications, and the results of the query in flight. A
 * flush may read input too (libpq reads while it cannot write), so this also runs when the
 * socket has nothing new to say. */
static void conn_parse(struct m0_pgbus *b, struct conn *c)
{
        if (!c->pg || c->connecting)
                return;
        if (c->role == LSN) {
                PGnotify *n;
                while ((n = PQnotifies(c->pg))) {
                        b->read_wanted = true;
                        PQfreemem(n);
                }
        }
        while (c->pg && c->step != ST_NONE && !PQisBusy(c->pg)) {
                PGresult *r = PQgetResult(c->pg);
                if (!r) {
                        query_done(b, c);
                        break;
                }
                if (c->nres < MAX_RESULTS)
                        c->res[c->nres++] = r;
                else
                        PQclear(r);
        }
        if (c->pg && PQstatus(c->pg) == CONNECTION_BAD)
                conn_fail(b, c, PQerrorMessage(c->pg));
}

static void conn_io(struct m0_pgbus *b, struct conn *c, short revents)
{
        if (c->connecting) {
                c->polling = PQconnectPoll(c->pg);
                if (c->polling == PGRES_POLLING_FAILED)
                        conn_fail(b, c, PQerrorMessage(c->pg));
                else if (c->polling == PGRES_POLLING_OK)
                        conn_made(b, c);
                return;
        }
        if ((revents & POLLOUT) && c->flushing) {
                int r = PQflush(c->pg);
                if (r < 0) {
                        conn_fail(b, c, PQerrorMessage(c->pg));
                        return;
                }
                c->flushing = r == 1;
        }
        if ((revents & (POLLIN | POLLHUP | POLLERR)) && !PQconsumeInput(c->pg)) {
                (void)PQisBusy(c->pg); /* parse what came before the end: the FATAL, if any */
                conn_fail(b, c, PQerrorMessage(c->pg));
                return;
        }
        conn_parse(b, c);
}

static bool stop_now(struct m0_pgbus *b, uint64_t now)
{
        pthread_mutex_lock(&b->lock);
        bool stop = b->stopping && (b->qlen == 0 || now >= b->flush_deadline || b->refused);
        pthread_mutex_unlock(&b->lock);
        return stop;
}

/* Give each idle, ready connection its next query. */
static void work(struct m0_pgbus *b, uint64_t now)
{
        pthread_mutex_lock(&b->lock);
        bool stopping = b->stopping, queued = b->qhead != NULL, replays = b->rhead != NULL;
        bool schema_ok = b->schema_ok;
        pthread_mutex_unlock(&b->lock);

        struct conn *p = &b->c[PUB];
        if (p->pg && p->ready && p->step == ST_NONE) {
                bool pending = b->inflight || queued;
                if (b->uncertain)
                        origin_send(b, p);
                else if (b->delivering && pending && (!b->retain_active || b->last_was_retain)) {
                        batch_take(b);
                        if (b->inflight)
                                batch_send(b, p);
                } else if (b->retain_active && !stopping)
                        retain_send(b, p);
        }
        struct conn *l = &b->c[LSN];
        if (l->pg && l->ready && l->step == ST_NONE && schema_ok) {
                if (!b->delivering) {
                        if (b->opt.start_after != M0__PGBUS_FROM_END) {
                                b->last = b->opt.start_after;
                                b->delivering = true;
                                state_update(b, l->what);
                        } else {
                                conn_send(b, l, ST_START, "SELECT last_id FROM " T_COUNTER);
                                return;
                        }
                }
                if (now >= b->poll_at)
                        b->read_wanted = true;
                if (b->read_wanted)
                        read_send(b, l);
                else if (replays && !stopping)
                        replay_send(b, l);
        }
}

static void tick(struct m0_pgbus *b, uint64_t now)
{
        pthread_mutex_lock(&b->lock);
        bool stopping = b->stopping, refused = b->refused;
        pthread_mutex_unlock(&b->lock);
        for (int i = 0; i < 2; i++) {
                struct conn *c = &b->c[i];
                if (refused)
                        continue;
                if (!c->pg && now >= c->retry_at && !(stopping && c->role == LSN)) {
                        if (c->retry_at) {
                                pthread_mutex_lock(&b->lock);
                                b->stats.reconnects++;
                                pthread_mutex_unlock(&b->lock);
                        }
                        conn_start(b, c, now);
                }
                if (c->pg && c->connecting && PQsocket(c->pg) < 0)
                        conn_io(b, c, POLLOUT);
                if (c->pg && c->deadline && now >= c->deadline)
                        conn_fail(b, c,
                                  c->connecting ? "no connection within 10 s"
                                                : "no answer within 30 s");
        }
        if (!stopping && !b->retain_active && (b->opt.retain_s || b->opt.retain_rows) &&
            now >= b->retain_at && b->c[PUB].ready) {
                b->retain_active = true;
                b->run_deleted = b->run_batches = b->run_lo = b->run_hi = 0;
                b->retain_at =
                        now + (b->opt.retain_every_ms ? b->opt.retain_every_ms : RETAIN_EVERY_MS);
        }
}

/* Until the next thing due: a deadline, a retry, the listener's safety-net read, retention, the
 * end of a flush. Only what work() or tick() would act on counts, so nothing spins. */
static int poll_timeout(struct m0_pgbus *b, uint64_t now)
{
        uint64_t next = now + 1000;
        pthread_mutex_lock(&b->lock);
        bool refused = b->refused, schema_ok = b->schema_ok, stopping = b->stopping;
        uint64_t flush = b->flush_deadline;
        pthread_mutex_unlock(&b->lock);
        if (refused)
                return stopping ? 0 : 1000;
        for (int i = 0; i < 2; i++) {
                const struct conn *c = &b->c[i];
                if (c->pg && c->deadline && c->deadline < next)
                        next = c->deadline;
                if (!c->pg && c->retry_at < next)
                        next = c->retry_at;
        }
        const struct conn *l = &b->c[LSN];
        if (l->ready && l->step == ST_NONE && schema_ok && b->delivering && b->poll_at < next)
                next = b->poll_at;
        if ((b->opt.retain_s || b->opt.retain_rows) && !b->retain_active && b->c[PUB].ready &&
            !stopping && b->retain_at < next)
                next = b->retain_at;
        if (stopping && flush < next)
                next = flush;
        return next > now ? (int)(next - now) : 0;
}

static void *bus_main(void *arg)
{
        struct m0_pgbus *b = arg;
        pthread_setname_np(pthread_self(), "m0-bus");
        state_update(b, "publishing");
        for (;;) {
                uint64_t now = m0__now_ms();
                if (stop_now(b, now))
                        break;
                tick(b, now);
                work(b, now);
                conn_parse(b, &b->c[PUB]);
                conn_parse(b, &b->c[LSN]);
                struct pollfd pfd[3] = {{.fd = b->wake_fd, .events = POLLIN}};
                struct conn *who[3] = {NULL};
                int n = 1;
                for (int i = 0; i < 2; i++) {
                        struct conn *c = &b->c[i];
                        int fd = c->pg ? PQsocket(c->pg) : -1;
                        if (fd < 0)
                                continue;
                        short ev = POLLIN;
                        if (c->connecting)
                                ev = c->polling == PGRES_POLLING_READING ? POLLIN : POLLOUT;
                        else if (c->flushing)
                                ev |= POLLOUT;
                        pfd[n] = (struct pollfd){.fd = fd, .events = ev};
                        who[n++] = c;
                }
                int r = poll(pfd, (nfds_t)n, poll_timeout(b, m0__now_ms()));
                if (r < 0 && errno != EINTR)
                        break;
                if (r <= 0)
                        continue;
                if (pfd[0].revents) {
                        uint64_t v;
                        ssize_t got = read(b->wake_fd, &v, sizeof(v));
                        (void)got;
                }
                for (int i = 1; i < n; i++)
                        if (pfd[i].revents && who[i]->pg && PQsocket(who[i]->pg) == pfd[i].fd)
                                conn_io(b, who[i], pfd[i].revents);
        }
        conn_close(&b->c[PUB]);
        conn_close(&b->c[LSN]);

        /* Replays nobody will answer now. */
        pthread_mutex_lock(&b->lock);
        struct replay_req *q = b->rhead;
        b->rhead = b->rtail = NULL;
        b->rlen = 0;
        pthread_mutex_unlock(&b->lock);
        if (b->replaying) {
                b->replaying->next = q;
                q = b->replaying;
                b->replaying = NULL;
        }
        while (q) {
                struct replay_req *next = q->next;
                struct m0_pgbus_replayed out = {.err = -ECANCELED, .why = "the bus stopped"};
                q->done(q->ud, &out);
                replay_free(q);
                q = next;
        }
        set_state(b, "bus: stopped");
        return NULL;
}

/* ---- the calls ---- */

static void wake(struct m0_pgbus *b)
{
        uint64_t one = 1;
        ssize_t w = write(b->wake_fd, &one, sizeof(one));
        (void)w; /* a full counter is still a wake */
}

int m0__pgbus_new(struct m0_pgbus **ret, const struct m0_pgbus_options *opt, char *err,
                  size_t err_len)
{
        int r;
        if (!opt->deliver) {
                snprintf(err, err_len, "no deliver callback");
                return -EINVAL;
        }
        r = m0__pgbus_uri_check(opt->uri, err, err_len);
        if (r < 0)
                return r;
        struct m0_pgbus *b = calloc(1, sizeof(*b));
        if (!b) {
                snprintf(err, err_len, "out of memory");
                return -ENOMEM;
        }
        b->wake_fd = -1;
        pthread_mutex_init(&b->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&b->cond, &ca);
        pthread_condattr_destroy(&ca);
        b->opt = *opt;
        b->c[PUB] = (struct conn){.role = PUB, .what = "publishing"};
        b->c[LSN] = (struct conn){.role = LSN, .what = "listening"};
        snprintf(b->state, sizeof(b->state), "bus: connecting");
        b->uri = strdup(opt->uri);
        b->name = strdup(opt->name && *opt->name ? opt->name : "m0");
        if (!b->uri || !b->name) {
                r = -ENOMEM;
                snprintf(err, err_len, "out of memory");
                goto fail;
        }
        if (!b->opt.queue_max)
                b->opt.queue_max = 10000;
        if (!b->opt.replay_max)
                b->opt.replay_max = 10000;
        unsigned char rnd[16];
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                r = -errno;
                snprintf(err, err_len, "getrandom: %s", strerror(errno));
                goto fail;
        }
        for (int i = 0; i < 16; i++)
                snprintf(b->origin + 2 * i, 3, "%02x", rnd[i]);
        memcpy(&b->rng, rnd, sizeof(b->rng));
        b->rng |= 1;
        b->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (b->wake_fd < 0) {
                r = -errno;
                snprintf(err, err_len, "eventfd: %s", strerror(errno));
                goto fail;
        }
        b->retain_at = m0__now_ms(); /* a first run soon after the start */

        /* The bus thread takes no signal meant for the process; faults still reach it. */
        sigset_t all, old;
        sigfillset(&all);
        sigdelset(&all, SIGSEGV);
        sigdelset(&all, SIGBUS);
        sigdelset(&all, SIGFPE);
        sigdelset(&all, SIGILL);
        sigdelset(&all, SIGABRT);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        r = -pthread_create(&b->thread, NULL, bus_main, b);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
                snprintf(err, err_len, "cannot start the bus thread: %s", strerror(-r));
                goto fail;
        }
        b->running = true;
        *ret = b;
        return 0;
fail:
        m0__pgbus_free(b);
        return r;
}

int m0__pgbus_wait_ready(struct m0_pgbus *b, int timeout_ms, char *err, size_t err_len)
{
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
        }
        int r = 0;
        pthread_mutex_lock(&b->lock);
        while (!b->started && !b->refused && r == 0)
                r = pthread_cond_timedwait(&b->cond, &b->lock, &until);
        if (b->refused) {
                snprintf(err, err_len, "%s", b->why);
                r = -EPROTO;
        } else if (b->started) {
                r = 0;
        } else {
                snprintf(err, err_len, "%s", b->state);
                r = -ETIMEDOUT;
        }
        pthread_mutex_unlock(&b->lock);
        return r;
}

int m0__pgbus_publish(struct m0_pgbus *b, const char *channel, const char *event, const char *data)
{
        size_t cl = strlen(channel), el = event ? strlen(event) : 0, dl = strlen(data);
        if (!channel_ok(channel, cl))
                return -EINVAL;
        if (event && (strpbrk(event, "\r\n") || !utf8_ok(event)))
                return -EINVAL;
        if (!utf8_ok(data))
                return -EINVAL;
        struct qev *q = malloc(sizeof(*q) + cl + 1 + (event ? el + 1 : 0) + dl + 1);
        if (!q)
                return -ENOMEM;
        char *p = q->mem;
        q->next = NULL;
        q->channel = memcpy(p, channel, cl + 1);
        p += cl + 1;
        q->event = NULL;
        if (event) {
                q->event = memcpy(p, event, el + 1);
                p += el + 1;
        }
        q->data = memcpy(p, data, dl + 1);
        q->bytes = cl + el + dl + 16;

        pthread_mutex_lock(&b->lock);
        if (b->stopping) {
                pthread_mutex_unlock(&b->lock);
                free(q);
                return -ESHUTDOWN;
        }
        if (b->qlen >= b->opt.queue_max) {
                b->stats.refused++;
                pthread_mutex_unlock(&b->lock);
                free(q);
                return -EAGAIN;
        }
        bool edge = !b->qhead; /* the thread looks at the queue whenever it is free otherwise */
        if (b->qtail)
                b->qtail->next = q;
        else
                b->qhead = q;
        b->qtail = q;
        b->qlen++;
        if (b->down)
                b->accepted_down++;
        pthread_mutex_unlock(&b->lock);
        if (edge)
                wake(b);
        return 0;
}

int m0__pgbus_replay(struct m0_pgbus *b, uint64_t after, const char *const *channels, size_t n,
                     uint32_t max, m0_pgbus_replay_fn done, void *ud)
{
        size_t size = sizeof(struct replay_req) + n * sizeof(char *);
        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(channels[i]);
                bool prefix = len && channels[i][len - 1] == '*';
                if (prefix ? (len - 1 && !channel_ok(channels[i], len - 1))
                           : !channel_ok(channels[i], len))
                        return -EINVAL;
                size += len + 1;
        }
        struct replay_req *q = calloc(1, size);
        if (!q)
                return -ENOMEM;
        q->after = after;
        q->max = max && max < b->opt.replay_max ? max : b->opt.replay_max;
        q->done = done;
        q->ud = ud;
        q->n = n;
        q->pat = (char **)(q + 1);
        char *p = (char *)(q->pat + n);
        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(channels[i]);
                q->pat[i] = memcpy(p, channels[i], len + 1);
                p += len + 1;
        }
        pthread_mutex_lock(&b->lock);
        if (b->stopping || b->rlen >= b->opt.queue_max) {
                int r = b->stopping ? -ESHUTDOWN : -EAGAIN;
                pthread_mutex_unlock(&b->lock);
                free(q);
                return r;
        }
        if (b->rtail)
                b->rtail->next = q;
        else
                b->rhead = q;
        b->rtail = q;
        b->rlen++;
        pthread_mutex_unlock(&b->lock);
        wake(b);
        return 0;
}

uint64_t m0__pgbus_stop(struct m0_pgbus *b, int flush_ms)
{
        if (!b || !b->running)
                return 0;
        pthread_mutex_lock(&b->lock);
        b->stopping = true;
        b->flush_deadline = m0__now_ms() + (uint64_t)(flush_ms > 0 ? flush_ms : 0);
        pthread_mutex_unlock(&b->lock);
        wake(b);
        pthread_join(b->thread, NULL);
        b->running = false;
        pthread_mutex_lock(&b->lock);
        uint64_t left = b->qlen;
        pthread_mutex_unlock(&b->lock);
        return left;
}

void m0__pgbus_free(struct m0_pgbus *b)
{
        if (!b)
                return;
        m0__pgbus_stop(b, 0);
        qev_free_list(b->inflight);
        qev_free_list(b->qhead);
        if (b->wake_fd >= 0)
                close(b->wake_fd);
        m0__buf_free(&b->sql);
        pthread_cond_destroy(&b->cond);
        pthread_mutex_destroy(&b->lock);
        free(b->uri);
        free(b->name);
        free(b);
}
