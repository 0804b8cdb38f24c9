/* SPDX-License-Identifier: MIT */
/* sse.c: server-sent event streams: the head, replay after Last-Event-ID, live frames (S1, B2, B3). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bus.h"
#include "conn.h"
#include "crash.h"
#include "host.h"
#include "log.h"
#include "sse.h"

#define TAKE_BATCH 64

#define FIRST_STREAM(l) M0__LIST_FIRST(&(l)->streams, struct m0_conn, slink)
#define NEXT_STREAM(c) M0__LIST_NEXT((c), struct m0_conn, slink)

int m0_res_stream(m0_res *res)
{
        if (res->on_pool) {
                res->stream_refused = true;
                return -EPERM;
        }
        res->stream = true;
        return 0;
}

static void link_stream(struct m0_loop *l, struct m0_conn *c)
{
        m0__list_push(&l->streams, &c->slink);
        if (l->observe & M0_OBSERVE_METRICS)
                m0__count(&l->stats.streams_open, 1);
}

void m0__sse_unlink(struct m0_conn *c)
{
        if (!c->stream)
                return;
        struct m0_loop *l = c->loop;
        m0__list_unlink(&l->streams, &c->slink);
        c->stream = false;
        if (l->observe & M0_OBSERVE_METRICS)
                m0__uncount(&l->stats.streams_open, 1);
}

/*
 * Last-Event-ID: a decimal id, up to and including 2^64 - 1; a longer number is past every id
 * there can be, so it is taken as 2^64 - 1, which is past the newest and replays everything kept
 * (D48). Anything that is not digits is treated as absent.
 */
static bool last_event_id(const m0_req *req, uint64_t *ret)
{
        const char *v = m0_req_header(req, "Last-Event-ID");
        if (!v || !*v)
                return false;
        uint64_t x = 0;
        for (const char *p = v; *p; p++) {
                if (*p < '0' || *p > '9')
                        return false;
                unsigned d = (unsigned)(*p - '0');
                x = x > (UINT64_MAX - d) / 10 ? UINT64_MAX : x * 10 + d;
        }
        *ret = x;
        return true;
}

int m0__sse_head(struct m0_loop *l, const m0_res *res, bool close, struct m0_buf *w)
{
        static const char head[] = "HTTP/1.1 200 OK\r\nServer: m0\r\n";
        static const char kind[] = "Content-Type: text/event-stream\r\n"
                                   "Cache-Control: no-cache\r\n"
                                   "X-Accel-Buffering: no\r\n";
        static const char conn_close[] = "Connection: close\r\n";
        int r = m0__buf_append(w, head, sizeof(head) - 1);
        if (r == 0)
                r = m0__buf_append(w, l->date, l->date_len);
        if (r == 0)
                r = m0__buf_append(w, kind, sizeof(kind) - 1);
        if (r == 0)
                r = m0__buf_append(w, res->head.data, res->head.len);
        if (r == 0 && close)
                r = m0__buf_append(w, conn_close, sizeof(conn_close) - 1);
        if (r == 0)
                r = m0__buf_append(w, "\r\n", 2);
        return r;
}

void m0__sse_begin(struct m0_conn *c, const m0_req *req, const m0_res *res)
{
        struct m0_loop *l = c->loop;
        struct m0_buf *w = &l->wbuf;
        static const char open[] = ": open\n\n";
        int r = m0__sse_head(l, res, false, w);
        if (r == 0)
                r = m0__buf_append(w, open, sizeof(open) - 1);
        if (r < 0) {
                m0__conn_end(c);
                return;
        }
        if (l->stopping) {
                /* Opened by a request the drain answered: the farewell comes at once. */
                static const char bye[] = ": bye\n\n";
                (void)m0__buf_append(w, bye, sizeof(bye) - 1);
                c->closing = true;
                return;
        }
        c->stream = true;
        link_stream(l, c);

        /* Replay (B3): every kept frame after Last-Event-ID; the live ones follow with no gap and
         * no duplicate because delivery skips what this stream's cursor has passed. */
        struct m0_bus *b = &l->host->bus;
        uint64_t after;
        if (!last_event_id(req, &after)) {
                c->cursor = m0__bus_last(b);
                return;
        }
        /* An id past the newest one is from before the ids started over (the fd store was
         * flushed): everything kept is new to this client. */
        if (after > m0__bus_last(b))
                after = 0;
        c->cursor = after;
        for (;;) {
                struct m0_frame *f[TAKE_BATCH];
                uint64_t last, lost;
                size_t n = m0__bus_take(b, c->cursor, f, TAKE_BATCH, &last, &lost);
                if (l->observe & M0_OBSERVE_METRICS)
                        m0__count(&l->stats.replayed, n);
                for (size_t i = 0; i < n; i++) {
                        if (r == 0)
                                r = m0__buf_append(w, f[i]->bytes + f[i]->start,
                                                   f[i]->end - f[i]->start);
                        m0__frame_unref(f[i]);
                }
                c->cursor = last;
                if (n < TAKE_BATCH || r < 0)
                        break;
        }
}

/*
 * The loop's channel refused frames (B2, D45): every stream that would miss one of them is
 * ended after what it was already sent, so that its client reconnects with Last-Event-ID and
 * gets them from the replay ring, rather than going on past a hole. Logged at most once a second
 * per loop; the exit line counts them all.
 */
static void close_behind(struct m0_loop *l, const struct m0_refusal *r)
{
        unsigned closed = 0;
        for (struct m0_conn *c = FIRST_STREAM(l), *next; c; c = next) {
                next = NEXT_STREAM(c); /* a send may close c */
                if (c->cursor >= r->last)
                        continue; /* opened after the refused frames: it has them already */
                m0__sse_unlink(c);
                m0__conn_end(c);
                closed++;
        }
        m0__count(&l->chan_refused, r->count);
        m0__count(&l->chan_closed, closed);
        if (l->chan_logged_ms && l->now_ms < l->chan_logged_ms + 1000)
                return;
        l->chan_logged_ms = l->now_ms ? l->now_ms : 1;
        m0__log(M0_LOG_WARNING, l->index, NULL,
                "loop %d's channel is full (--channel-frames %u): %llu frame%s from id %llu "
                "refused; %u stream%s closed, to reconnect with Last-Event-ID",
                l->index, l->host->cfg.channel_frames, (unsigned long long)r->count,
                r->count == 1 ? "" : "s", (unsigned long long)r->from, closed,
                closed == 1 ? "" : "s");
}

bool m0__sse_deliver(struct m0_loop *l)
{
        struct m0_bus *b = &l->host->bus;
        for (;;) {
                struct m0_frame *f[TAKE_BATCH];
                struct m0_refusal refused;
                size_t n = m0__bus_take_channel(b, l->index, f, TAKE_BATCH, &refused);
                uint64_t sent = 0;
                for (size_t i = 0; i < n; i++) {
                        for (struct m0_conn *c = FIRST_STREAM(l), *next; c; c = next) {
                                next = NEXT_STREAM(c); /* a send may close c */
                                if (c->cursor >= f[i]->id)
                                        continue;
                                c->cursor = f[i]->id;
                                (void)m0__conn_send(c, f[i]->bytes + f[i]->start,
                                                    f[i]->end - f[i]->start);
                                sent++;
                        }
                        m0__frame_unref(f[i]);
                }
                if (l->observe & M0_OBSERVE_METRICS)
                        m0__count(&l->stats.delivered, sent);
                if (refused.count)
                        close_behind(l, &refused);
                if (n < TAKE_BATCH)
                        return false;
                if (!m0__turn_take(l))
                        return true; /* the rest waits for its place on the run queue (D85) */
        }
}

void m0__sse_heartbeat(struct m0_loop *l)
{
        static const char hb[] = ": heartbeat\n\n";
        for (struct m0_conn *c = FIRST_STREAM(l), *next; c; c = next) {
                next = NEXT_STREAM(c); /* a send may close c */
                (void)m0__conn_send(c, hb, sizeof(hb) - 1);
        }
}

void m0__sse_farewell(struct m0_loop *l)
{
        static const char bye[] = ": bye\n\n";
        struct m0_conn *c;
        while ((c = FIRST_STREAM(l))) {
                m0__sse_unlink(c);
                if (m0__conn_send(c, bye, sizeof(bye) - 1) < 0)
                        continue; /* closed: its backlog had passed the bound (B2) */
                /* The farewell is best effort (X1): a client that is not taking its stream
                 * is closed now rather than waited for, and is no failure of the stop. It
                 * reconnects with Last-Event-ID like any other. */
                if (c->out.len > c->out_off) {
                        m0__count(&l->streams_unread, 1);
                        m0__conn_close(c);
                        continue;
                }
                m0__conn_end(c);
        }
}

/* The bus's wake-up: flag each loop once and poke its mailbox eventfd on the 0→1 edge. */
void m0__bus_wake_loops(void *ud, int skip_loop)
{
        struct m0_host *h = ud;
        /* A loop publishing itself delivers after the connection it serves, or at the end of
         * its turn at the latest (D44): its own eventfd needs no write. */
        struct m0_loop *self = m0__thread_loop_self();
        for (int i = 0; i < h->nloops; i++) {
                struct m0_loop *l = &h->loops[i];
                if (i == skip_loop)
                        continue;
                if (!atomic_exchange(&l->bus_pending, true) && l != self) {
                        uint64_t one = 1;
                        ssize_t w = write(l->mb_fd, &one, sizeof(one));
                        (void)w; /* EAGAIN: the counter is already non-zero, the loop wakes */
                }
        }
}
