/* SPDX-License-Identifier: MIT */
/* pgbus.c: the bus thread of a bus shared through PostgreSQL: its two connections, its loop and its state (G1–G3); pgbus-calls.c holds the calls other threads make. */
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

#include "pgbus-private.h"

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
void m0__pgbus_state_update(struct m0_pgbus *b, const char *what)
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

/* ---- connections ---- */

static void results_clear(struct conn *c)
{
        for (int i = 0; i < c->nres; i++)
                PQclear(c->res[i]);
        c->nres = 0;
}

void m0__pgbus_conn_close(struct conn *c)
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
void m0__pgbus_conn_fail(struct m0_pgbus *b, struct conn *c, const char *msg)
{
        const char *why = c->fatal[0] ? c->fatal : msg;
        if (c->pg && c->connecting)
                m0__pgbus_reason_of_attempt(b->reason, sizeof(b->reason), why, c->pg);
        else
                m0__pgbus_reason_of(b->reason, sizeof(b->reason), why);
        c->fatal[0] = '\0';
        m0__pgbus_conn_close(c);
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
        m0__pgbus_state_update(b, c->what);
}

/* Notices (a table that already exists) are no news; a FATAL is the reason of what follows. */
static void notice(void *arg, const char *message)
{
        struct conn *c = arg;
        if (!strncmp(message, "FATAL:", 6))
                m0__pgbus_one_line(c->fatal, sizeof(c->fatal), message);
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
                m0__pgbus_conn_fail(b, c, "out of memory");
                return;
        }
        if (PQstatus(c->pg) == CONNECTION_BAD) {
                m0__pgbus_conn_fail(b, c, PQerrorMessage(c->pg));
                return;
        }
        c->fatal[0] = '\0';
        PQsetNoticeProcessor(c->pg, notice, c);
        c->connecting = true;
        c->polling = PGRES_POLLING_WRITING;
        c->deadline = now + CONNECT_TIMEOUT_MS;
}

void m0__pgbus_conn_send(struct m0_pgbus *b, struct conn *c, enum step st, const char *sql)
{
        if (!PQsendQuery(c->pg, sql)) {
                m0__pgbus_conn_fail(b, c, PQerrorMessage(c->pg));
                return;
        }
        c->step = st;
        c->deadline = m0__now_ms() + QUERY_TIMEOUT_MS;
        int r = PQflush(c->pg);
        if (r < 0)
                m0__pgbus_conn_fail(b, c, PQerrorMessage(c->pg));
        else
                c->flushing = r == 1;
}

/* The connection is made: set it up (the schema on the publishing one, LISTEN on the other). */
static void conn_made(struct m0_pgbus *b, struct conn *c)
{
        c->connecting = false;
        c->deadline = 0;
        if (PQsetnonblocking(c->pg, 1) < 0) {
                m0__pgbus_conn_fail(b, c, PQerrorMessage(c->pg));
                return;
        }
        if (c->role == LSN) {
                m0__pgbus_conn_send(b, c, ST_LISTEN, "LISTEN " NOTIFY_CHANNEL);
                return;
        }
        pthread_mutex_lock(&b->lock);
        bool known = b->schema_ok;
        pthread_mutex_unlock(&b->lock);
        if (known) {
                c->ready = true;
                c->backoff_ms = 0;
                m0__pgbus_state_update(b, c->what);
                return;
        }
        m0__pgbus_schema_send(b, c);
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
                m0__pgbus_replay_done(b, c, err);
                results_clear(c);
                return;
        }
        if (err) {
                /* any other failure fails the connection: what was in flight is known to be
                 * rolled back or checked (the origin's batch) after reconnecting */
                char copy[600];
                snprintf(copy, sizeof(copy), "%s", err);
                m0__pgbus_conn_fail(b, c, copy);
                return;
        }
        switch (st) {
        case ST_SCHEMA_LOOK: m0__pgbus_schema_looked(b, c); break;
        case ST_SCHEMA_MAKE: m0__pgbus_schema_made(b, c); break;
        case ST_ORIGIN: m0__pgbus_origin_done(b, c); break;
        case ST_BATCH: m0__pgbus_batch_done(b, c); break;
        case ST_RETAIN: m0__pgbus_retain_done(b, c); break;
        case ST_LISTEN:
                c->ready = true;
                c->backoff_ms = 0;
                b->read_wanted = true;
                m0__pgbus_state_update(b, c->what);
                break;
        case ST_START: m0__pgbus_start_done(b, c); break;
        case ST_READ: m0__pgbus_read_done(b, c); break;
        case ST_REPLAY: m0__pgbus_replay_done(b, c, NULL); break;
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
                m0__pgbus_conn_fail(b, c, PQerrorMessage(c->pg));
}

static void conn_io(struct m0_pgbus *b, struct conn *c, short revents)
{
        if (c->connecting) {
                c->polling = PQconnectPoll(c->pg);
                if (c->polling == PGRES_POLLING_FAILED)
                        m0__pgbus_conn_fail(b, c, PQerrorMessage(c->pg));
                else if (c->polling == PGRES_POLLING_OK)
                        conn_made(b, c);
                return;
        }
        if ((revents & POLLOUT) && c->flushing) {
                int r = PQflush(c->pg);
                if (r < 0) {
                        m0__pgbus_conn_fail(b, c, PQerrorMessage(c->pg));
                        return;
                }
                c->flushing = r == 1;
        }
        if ((revents & (POLLIN | POLLHUP | POLLERR)) && !PQconsumeInput(c->pg)) {
                (void)PQisBusy(c->pg); /* parse what came before the end: the FATAL, if any */
                m0__pgbus_conn_fail(b, c, PQerrorMessage(c->pg));
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
                        m0__pgbus_origin_send(b, p);
                else if (b->delivering && pending && (!b->retain_active || b->last_was_retain)) {
                        m0__pgbus_batch_take(b);
                        if (b->inflight)
                                m0__pgbus_batch_send(b, p);
                } else if (b->retain_active && !stopping)
                        m0__pgbus_retain_send(b, p);
        }
        struct conn *l = &b->c[LSN];
        if (l->pg && l->ready && l->step == ST_NONE && schema_ok) {
                if (!b->delivering) {
                        if (b->opt.start_after != M0__PGBUS_FROM_END) {
                                b->last = b->opt.start_after;
                                b->delivering = true;
                                m0__pgbus_state_update(b, l->what);
                        } else {
                                m0__pgbus_conn_send(b, l, ST_START,
                                                    "SELECT last_id FROM " T_COUNTER);
                                return;
                        }
                }
                if (now >= b->poll_at)
                        b->read_wanted = true;
                /* Under a steady stream of notifications a read is always wanted: a replay
                 * waiting goes between two reads rather than after all of them. */
                bool replay = replays && !stopping;
                if (b->read_wanted && !(replay && b->last_was_read)) {
                        m0__pgbus_read_send(b, l);
                        b->last_was_read = true;
                } else if (replay) {
                        m0__pgbus_replay_send(b, l);
                        b->last_was_read = false;
                }
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
                        m0__pgbus_conn_fail(b, c,
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

void *m0__pgbus_main(void *arg)
{
        struct m0_pgbus *b = arg;
        pthread_setname_np(pthread_self(), "m0-bus");
        m0__pgbus_state_update(b, "publishing");
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
        /* A batch still out at the flush's end would go on in its backend (waiting on the
         * counter, say) and might commit after the stop counted it as not published: cancel it
         * first. PQcancel() blocks, on this thread alone and at the stop only. */
        struct conn *p = &b->c[PUB];
        if (p->pg && p->step == ST_BATCH) {
                PGcancel *k = PQgetCancel(p->pg);
                char why[256];
                if (k && !PQcancel(k, why, sizeof(why)))
                        m0__log(M0_LOG_WARNING, -1, NULL,
                                "bus: could not cancel the batch in flight at the stop (%s); it "
                                "may still commit",
                                why);
                PQfreeCancel(k);
        }
        m0__pgbus_conn_close(&b->c[PUB]);
        m0__pgbus_conn_close(&b->c[LSN]);

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
                m0__pgbus_replay_free(q);
                q = next;
        }
        set_state(b, "bus: stopped");
        return NULL;
}
