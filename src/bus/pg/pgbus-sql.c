/* SPDX-License-Identifier: MIT */
/* pgbus-sql.c: what the bus thread says to the database: the schema, batches, the origin's check, reads, replay, retention (G1, G4–G6). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "pgbus-private.h"

/* ---- the schema (G6) ---- */

/* Look at the tables under the schema's lock, in a transaction m0__pgbus_schema_looked() ends. */
void m0__pgbus_schema_send(struct m0_pgbus *b, struct conn *c)
{
        m0__pgbus_conn_send(
                b, c, ST_SCHEMA_LOOK,
                "BEGIN; SELECT pg_advisory_xact_lock(" LOCK_SCHEMA ");"
                "SELECT current_setting('server_encoding');"
                "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), "
                "a.attnotnull FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid "
                "WHERE c.oid = ANY (ARRAY[to_regclass('" T_COUNTER "'), to_regclass('" T_EVENTS
                "'), to_regclass('" T_ORIGINS "')]::oid[]) AND a.attnum > 0 AND NOT "
                "a.attisdropped ORDER BY c.relname, a.attnum");
}

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

void m0__pgbus_schema_looked(struct m0_pgbus *b, struct conn *c)
{
        /* results: BEGIN, the lock, the encoding, the columns */
        if (c->nres != 4) {
                m0__pgbus_conn_fail(b, c, "unexpected answer to the schema's query");
                return;
        }
        const char *enc = PQgetvalue(c->res[2], 0, 0);
        if (strcmp(enc, "UTF8") != 0 && strcmp(enc, "SQL_ASCII") != 0) {
                m0__pgbus_refuse(
                        b,
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
                        m0__pgbus_refuse(b, "%s", why);
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
                m0__pgbus_conn_fail(b, c, "out of memory");
                return;
        }
        m0__pgbus_conn_send(b, c, ST_SCHEMA_MAKE, s->data);
}

void m0__pgbus_schema_made(struct m0_pgbus *b, struct conn *c)
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
        m0__pgbus_state_update(b, c->what);
}

/* A table that is not m0's, or a database m0 cannot use: no reconnecting, exit 78 (G6). */
void m0__pgbus_refuse(struct m0_pgbus *b, const char *fmt, ...)
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
        m0__pgbus_conn_close(&b->c[PUB]);
        m0__pgbus_conn_close(&b->c[LSN]);
        m0__pgbus_state_update(b, "publishing");
}

/* ---- publishing (G1, G2) ---- */

void m0__pgbus_qev_free_list(struct qev *q)
{
        while (q) {
                struct qev *next = q->next;
                free(q);
                q = next;
        }
}

/* Move up to a batch of queued events into `inflight` (kept there until committed). */
void m0__pgbus_batch_take(struct m0_pgbus *b)
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
void m0__pgbus_batch_send(struct m0_pgbus *b, struct conn *c)
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
                        r = m0__pgbus_sql_literal(s, c->pg, q->channel);
                if (r >= 0)
                        r = m0__buf_printf(s, ",");
                if (r >= 0)
                        r = q->event ? m0__pgbus_sql_literal(s, c->pg, q->event)
                                     : m0__buf_printf(s, "NULL::text");
                if (r >= 0)
                        r = m0__buf_printf(s, ",");
                if (r >= 0)
                        r = m0__pgbus_sql_literal(s, c->pg, q->data);
                if (r >= 0)
                        r = m0__buf_printf(s, ")");
        }
        if (r >= 0)
                r = m0__buf_printf(s, ") AS v(n, channel, event, data) ORDER BY v.n;"
                                      "NOTIFY " NOTIFY_CHANNEL);
        if (r < 0) {
                m0__pgbus_conn_fail(b, c, "out of memory building a batch");
                return;
        }
        m0__pgbus_conn_send(b, c, ST_BATCH, s->data);
}

/* The batch in flight committed: let go of it. */
static void batch_committed(struct m0_pgbus *b)
{
        size_t n = b->ninflight;
        m0__pgbus_qev_free_list(b->inflight);
        b->inflight = NULL;
        b->ninflight = 0;
        pthread_mutex_lock(&b->lock);
        b->qlen -= n;
        b->stats.published += n;
        b->stats.batches++;
        pthread_mutex_unlock(&b->lock);
        b->read_wanted = true;
}

void m0__pgbus_batch_done(struct m0_pgbus *b, struct conn *c)
{
        /* results: the origin's upsert, the insert, NOTIFY; an error fails the connection */
        batch_committed(b);
        b->last_was_retain = false;
        (void)c;
}

void m0__pgbus_origin_send(struct m0_pgbus *b, struct conn *c)
{
        struct m0_buf *s = &b->sql;
        s->len = 0;
        if (m0__buf_printf(s, "SELECT batch FROM " T_ORIGINS " WHERE origin = '%s' FOR UPDATE",
                           b->origin) < 0) {
                m0__pgbus_conn_fail(b, c, "out of memory");
                return;
        }
        m0__pgbus_conn_send(b, c, ST_ORIGIN, s->data);
}

/* After a failure with a batch in flight: its number in the origin's row tells whether it
 * committed. FOR UPDATE waits for a transaction of ours the server may still be running. */
void m0__pgbus_origin_done(struct m0_pgbus *b, struct conn *c)
{
        uint64_t got = 0;
        if (c->nres >= 1 && PQntuples(c->res[0]) == 1)
                got = strtoull(PQgetvalue(c->res[0], 0, 0), NULL, 10);
        b->uncertain = false;
        if (b->inflight && got >= b->inflight_seq)
                batch_committed(b);
}

/* ---- retention (G5) ---- */

void m0__pgbus_retain_send(struct m0_pgbus *b, struct conn *c)
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
                m0__pgbus_conn_fail(b, c, "out of memory");
                return;
        }
        m0__pgbus_conn_send(b, c, ST_RETAIN, s->data);
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

void m0__pgbus_retain_done(struct m0_pgbus *b, struct conn *c)
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

void m0__pgbus_read_send(struct m0_pgbus *b, struct conn *c)
{
        struct m0_buf *s = &b->sql;
        s->len = 0;
        if (m0__buf_printf(s,
                           "SELECT id, channel, event, data, " TIME_US " FROM " T_EVENTS
                           " WHERE id > %" PRIu64 " ORDER BY id LIMIT %d",
                           b->last, M0__PGBUS_READ_ROWS) < 0) {
                m0__pgbus_conn_fail(b, c, "out of memory");
                return;
        }
        b->read_wanted = false;
        m0__pgbus_conn_send(b, c, ST_READ, s->data);
}

void m0__pgbus_read_done(struct m0_pgbus *b, struct conn *c)
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

void m0__pgbus_start_done(struct m0_pgbus *b, struct conn *c)
{
        if (c->nres < 1 || PQntuples(c->res[0]) != 1) {
                m0__pgbus_conn_fail(b, c, T_COUNTER " has no row");
                return;
        }
        b->last = strtoull(PQgetvalue(c->res[0], 0, 0), NULL, 10);
        b->delivering = true;
        pthread_mutex_lock(&b->lock);
        b->stats.last_id = b->last;
        pthread_mutex_unlock(&b->lock);
        m0__pgbus_state_update(b, c->what);
}

/* ---- replay (G4) ---- */

void m0__pgbus_replay_send(struct m0_pgbus *b, struct conn *c)
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
                                r = m0__pgbus_sql_literal(s, c->pg, pre);
                        if (r >= 0)
                                r = m0__buf_printf(s, ")");
                } else if (r >= 0) {
                        r = m0__buf_printf(s, "channel = ");
                        if (r >= 0)
                                r = m0__pgbus_sql_literal(s, c->pg, p);
                }
        }
        if (r >= 0)
                r = m0__buf_printf(s, "%s ORDER BY id DESC LIMIT %" PRIu32 ") t ORDER BY id",
                                   q->n ? ")" : "", q->max + 1);
        if (r < 0) {
                m0__pgbus_conn_fail(b, c, "out of memory");
                return;
        }
        m0__pgbus_conn_send(b, c, ST_REPLAY, s->data);
}

void m0__pgbus_replay_free(struct replay_req *q)
{
        free(q);
}

void m0__pgbus_replay_done(struct m0_pgbus *b, struct conn *c, const char *err)
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
                m0__pgbus_one_line(why, sizeof(why), err ? err : "no answer");
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
        m0__pgbus_replay_free(q);
}
