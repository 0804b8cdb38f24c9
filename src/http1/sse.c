/* SPDX-License-Identifier: MIT */
/* sse.c: server-sent event streams: the head, the channels they follow, replay after Last-Event-ID,
 * live frames (S1, H9, N1, N2, N5, B2). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bus.h"
#include "conn.h"
#include "crash.h"
#include "config.h"
#include "log.h"
#include "attach.h"
#include "pool.h"
#include "sse.h"
#include "subs.h"

#define TAKE_BATCH 64

#define FIRST_STREAM(l) M0__LIST_FIRST(&(l)->streams, struct m0_conn, slink)
#define NEXT_STREAM(c) M0__LIST_NEXT((c), struct m0_conn, slink)

/* A stream's bytes, its end after them and its cut: through its connection, or, for a stream
 * that is one of a connection's (an HTTP/2 stream, HT3), through its protocol's `send`, `drain`
 * and `closed`. */
static int out(struct m0_conn *c, const void *data, size_t len)
{
        return c->proto->send ? c->proto->send(c, data, len) : m0__conn_send(c, data, len);
}

static void end(struct m0_conn *c)
{
        if (c->proto->send)
                c->proto->drain(c);
        else
                m0__conn_end(c);
}

static void cut(struct m0_conn *c)
{
        if (c->proto->send)
                c->proto->closed(c);
        else
                m0__conn_close(c);
}

int m0_res_stream(m0_res *res)
{
        if (res->on_pool) {
                res->stream_refused = true;
                return -EPERM;
        }
        res->stream = true;
        return 0;
}

/* A subscription refused: the response is no stream, so that the handler's refusal is what the
 * client gets, and no stream begins without a channel its handler asked for. */
static int unsubscribe_all(m0_res *res, int err)
{
        res->stream = false;
        res->nchans = 0;
        res->chans.len = 0;
        return err;
}

int m0_res_subscribe(m0_res *res, const char *channel)
{
        if (res->on_pool) {
                res->stream_refused = true;
                return -EPERM;
        }
        size_t n = channel ? strnlen(channel, M0__CHANNEL_MAX + 1) : 0;
        if (!m0__channel_ok(channel, n))
                return unsubscribe_all(res, -EINVAL);
        const char *p = res->chans.data;
        for (uint16_t i = 0; i < res->nchans; i++, p += strlen(p) + 1)
                if (!strcmp(p, channel)) {
                        res->stream = true;
                        return 0; /* followed already */
                }
        unsigned max = m0__bus_global ? m0__bus_global->max_channels : M0__STREAM_CHANNELS_DEFAULT;
        if (res->nchans >= max)
                return unsubscribe_all(res, -ENOSPC);
        int r = m0__buf_append(&res->chans, channel, n + 1);
        if (r < 0)
                return unsubscribe_all(res, r);
        res->nchans++;
        res->stream = true;
        return 0;
}

static void link_stream(struct m0_hctx *l, struct m0_conn *c)
{
        m0__list_push(&l->streams, &c->slink);
        if (l->observe & M0_OBSERVE_METRICS)
                m0__count(&l->stats.streams_open, 1);
}

void m0__sse_unfollow(struct m0_conn *c)
{
        struct m0_hctx *l = c->loop;
        for (uint16_t i = 0; i < c->nsubs; i++) {
                struct m0_follow *f = m0__subs_remove(&l->subs, &c->subs[i]);
                if (!f)
                        continue;
                /* The loop's last stream of it: the bus stops queuing it here (N1). */
                m0__bus_unfollow(l->bus, l->index, &f->key);
                free(f);
        }
        free(c->subs);
        c->subs = NULL;
        c->nsubs = 0;
        if (c->treplay) {
                /* Its answer may still come: it finds no stream, and is freed. */
                m0__fvec_free(&c->treplay->held);
                c->treplay->c = NULL;
                c->treplay = NULL;
        }
}

void m0__sse_unlink(struct m0_conn *c)
{
        if (!c->stream)
                return;
        struct m0_hctx *l = c->loop;
        m0__sse_unfollow(c); /* and its replay still to come, if any */
        m0__list_unlink(&l->streams, &c->slink);
        c->stream = false;
        if (l->observe & M0_OBSERVE_METRICS)
                m0__uncount(&l->stats.streams_open, 1);
}

/*
 * An event id a client sends back (Last-Event-ID, or a WebSocket's last_event_id): a decimal
 * id, up to and including 2^64 - 1; a longer number is past every id there can be, so it is
 * taken as 2^64 - 1, which is past the newest and replays everything kept (D48). Anything that
 * is not digits, and an empty or absent value, is treated as absent (false).
 */
bool m0__sse_event_id(const char *v, uint64_t *ret)
{
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

int m0__sse_head(struct m0_hctx *l, const m0_res *res, bool close, struct m0_buf *w)
{
        static const char head[] = "HTTP/1.1 200 OK\r\nServer: m0\r\n";
        static const char kind[] = "Content-Type: text/event-stream\r\n"
                                   "Cache-Control: no-cache\r\n"
                                   "X-Accel-Buffering: no\r\n";
        static const char conn_close[] = "Connection: close\r\n";
        int r = m0__buf_append(w, head, sizeof(head) - 1);
        if (r == 0)
                r = m0__buf_append(w, l->loop.date, l->loop.date_len);
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

/* The key a stream's channel names: `room:*` is the prefix `room:`, `*` every channel. */
static struct m0_key key_of(const char *name)
{
        size_t n = strlen(name);
        bool prefix = name[n - 1] == '*';
        if (prefix)
                n--;
        return (struct m0_key){
                .name = name, .len = (uint16_t)n, .prefix = prefix, .hash = m0__hash(name, n)};
}

/*
 * The stream's channels into the loop's index, and the bus's interest in those new to the loop,
 * in one hold of the bus lock with the newest id and the replay (N2): every kept event of them
 * up to that id is in `out` (when `replay`), every later one reaches the loop's queue.
 */
static int follow_all(struct m0_conn *c, const m0_res *res, bool replay, uint64_t after,
                      struct m0_fvec *out, const struct m0_gap_sink *gaps,
                      struct m0_subscribed *ret)
{
        struct m0_hctx *l = c->loop;
        c->subs = calloc(res->nchans ? res->nchans : 1, sizeof(*c->subs));
        struct m0_key *keys = calloc(2 * (size_t)(res->nchans ? res->nchans : 1), sizeof(*keys));
        if (!c->subs || !keys) {
                free(keys);
                return -ENOMEM;
        }
        struct m0_key *add = keys + res->nchans;
        size_t nadd = 0;
        const char *name = res->chans.data;
        for (; c->nsubs < res->nchans; name += strlen(name) + 1) {
                struct m0_key k = key_of(name);
                struct m0_sub *sub = &c->subs[c->nsubs];
                bool made;
                sub->c = c;
                int r = m0__subs_add(&l->subs, sub, &k, &made);
                if (r < 0) {
                        free(keys);
                        return r;
                }
                keys[c->nsubs++] = sub->f->key;
                if (made)
                        add[nadd++] = sub->f->key;
        }
        int r = m0__bus_subscribe(l->bus, l->index, add, nadd, keys, c->nsubs, replay, after, out,
                                  gaps, ret);
        free(keys);
        c->seq = ret->seq;
        c->cursor = ret->last;
        return r;
}

static void note_ahead(struct m0_hctx *l, uint64_t after, uint64_t last);

int m0__sse_follow(struct m0_conn *c, const m0_res *res, bool replay, uint64_t after,
                   struct m0_fvec *got, const struct m0_gap_sink *gaps)
{
        struct m0_hctx *l = c->loop;
        struct m0_subscribed sub = {0};
        int r = follow_all(c, res, replay, after, got, gaps, &sub);
        if (r == 0 && sub.table)
                r = -EOPNOTSUPP; /* a shared bus's table: a stream's replay alone asks it (D192) */
        if (r < 0) {
                m0__sse_unfollow(c);
                m0__fvec_free(got);
                return r;
        }
        if (sub.ahead && l->bus->shared)
                c->cursor = after;
        else if (sub.ahead)
                note_ahead(l, after, c->cursor);
        m0__fvec_sort(got);
        if (l->observe & M0_OBSERVE_METRICS)
                m0__count(&l->stats.replayed, got->n);
        return 0;
}

/* A Last-Event-ID past the newest id (N3): counted, and said at most once a second per loop. */
static void note_ahead(struct m0_hctx *l, uint64_t after, uint64_t last)
{
        l->replays_ahead++;
        if (l->ahead_logged_ms && l->loop.now_ms < l->ahead_logged_ms + 1000)
                return;
        l->ahead_logged_ms = l->loop.now_ms ? l->loop.now_ms : 1;
        m0__log(M0_LOG_NOTICE, l->index, NULL,
                "a stream's Last-Event-ID %llu is past the newest id %llu: everything kept of its "
                "channels is replayed (%llu such stream%s on loop %d so far)",
                (unsigned long long)after, (unsigned long long)last,
                (unsigned long long)l->replays_ahead, l->replays_ahead == 1 ? "" : "s", l->index);
}

/* The stream's first bytes (S1, H9): `: open`, then the reconnection delay. */
static int first_bytes(struct m0_hctx *l, struct m0_buf *w)
{
        static const char open[] = ": open\n\n";
        int r = m0__buf_append(w, open, sizeof(open) - 1);
        if (r == 0 && l->cfg->sse_retry_ms)
                r = m0__buf_printf(w, "retry: %u\n\n", l->cfg->sse_retry_ms);
        return r;
}

/* Where the gap events of a stream's replay go: its first bytes, before any replayed event;
 * and, when the app backfills, a record of each gap for it (struct m0_treplay's `gaps`). */
struct gap_out {
        struct m0_buf *w;
        struct m0_buf *gaps; /* NULL: the app does not backfill */
        int r;
};

/*
 * AP2: a channel gave up events after the stream's Last-Event-ID, and keeps from `oldest` on:
 * the stream says so before anything of it, in an event of its own with no id (the client's
 * Last-Event-ID stays what it saw), so that the client can fetch what it missed. Runs under the
 * bus lock, once per such channel.
 */
static void gap_event(void *ud, const char *name, size_t len, uint64_t oldest)
{
        struct gap_out *g = ud;
        if (g->r < 0)
                return;
        json_t *j = json_pack("{s:s%,s:I}", "channel", name, len, "oldest", (json_int_t)oldest);
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        g->r = text ? m0__buf_printf(g->w, "event: " M0_EVENT_GAP "\ndata: %s\n\n", text) : -ENOMEM;
        if (g->r == 0 && g->gaps)
                g->r = m0__sse_gap_record(g->gaps, name, len, oldest);
        free(text);
        json_decref(j);
}

int m0__sse_gap_record(struct m0_buf *gaps, const char *name, size_t len, uint64_t oldest)
{
        int r = m0__buf_append(gaps, &oldest, sizeof(oldest));
        if (r == 0)
                r = m0__buf_append(gaps, name, len);
        return r == 0 ? m0__buf_append(gaps, "", 1) : r;
}

struct m0_backfill {
        const char *channel;
        struct m0_buf *out;
        struct m0_fvec *frames; /* a WebSocket's: the frames themselves, in place of `out` */
        size_t *bytes;          /* ... and their bytes so far */
        size_t max;             /* --max-output-bytes: what a stream may have unsent (B2) */
};

int m0_backfill_event(m0_backfill *bf, const char *event, const char *data)
{
        if (event && strpbrk(event, "\r\n"))
                return -EINVAL;
        struct m0_frame *f =
                m0__frame_unnumbered(bf->channel, event, data, data ? strlen(data) : 0);
        if (!f)
                return -ENOMEM;
        size_t n = f->end - f->start;
        if (bf->frames) {
                int r = *bf->bytes + n > bf->max ? -ENOBUFS : m0__fvec_push(bf->frames, f);
                if (r < 0)
                        m0__frame_unref(f);
                else
                        *bf->bytes += n; /* the vector holds the frame's reference */
                return r;
        }
        int r = bf->out->len + n > bf->max ? -ENOBUFS
                                           : m0__buf_append(bf->out, f->bytes + f->start, n);
        m0__frame_unref(f);
        return r;
}

/* The table's answer came back to the stream's loop, or the loop ended first. */
static void replay_back(struct m0_loop *el, struct m0_msg *m)
{
        m0__sse_replayed(m0__hctx_of(el), m->arg);
}

static void replay_drop(struct m0_loop *el, struct m0_msg *m)
{
        (void)el;
        m0__treplay_free(m->arg);
}

void m0__sse_backfill(const m0_app *app, struct m0_treplay *t, void *state)
{
        size_t bytes = 0;
        for (size_t at = 0; t->err == 0 && at < t->gaps.len;) {
                uint64_t oldest;
                memcpy(&oldest, t->gaps.data + at, sizeof(oldest));
                const char *name = t->gaps.data + at + sizeof(oldest);
                at += sizeof(oldest) + strlen(name) + 1;
                m0_backfill bf = {.channel = name,
                                  .out = &t->pre,
                                  .frames = t->frames ? &t->pre_frames : NULL,
                                  .bytes = &bytes,
                                  .max = m0__hctx_of(t->loop)->cfg->max_output_bytes};
                int r = app->backfill(&bf, name, t->after, oldest, state);
                if (r < 0) {
                        t->err = r;
                        snprintf(t->why, sizeof(t->why), "channel %s", name);
                }
        }
        m0__treplay_post(t);
}

/*
 * AP2: the app backfills the channels `gaps` records: the stream waits, holding what comes live,
 * while the app's callback runs on the loop's pool (or on the loop, posting to itself), then
 * gets the backfill, its kept replay `got` (taken, sorted) and what was held, none twice.
 */
static int backfill_begin(struct m0_conn *c, uint64_t after, struct m0_buf *gaps,
                          struct m0_fvec *got)
{
        return m0__sse_backfill_start(c, after, gaps, got, NULL);
}

int m0__sse_backfill_start(struct m0_conn *c, uint64_t after, struct m0_buf *gaps,
                           struct m0_fvec *got, m0_msg_fn *back)
{
        struct m0_hctx *l = c->loop;
        struct m0_treplay *t = calloc(1, sizeof(*t));
        struct m0_job *job = l->pool.nthreads ? calloc(1, sizeof(*job)) : NULL;
        if (t)
                t->msg = calloc(1, sizeof(*t->msg));
        if (!t || !t->msg || (l->pool.nthreads && !job)) {
                m0__treplay_free(t);
                free(job);
                return -ENOMEM;
        }
        t->loop = &l->loop;
        t->back = back ? back : replay_back;
        t->drop = replay_drop;
        t->c = c;
        t->after = after;
        t->backfill = true;
        t->frames = back != NULL;
        t->upto = c->cursor; /* every later id reaches the loop's queue, and is held */
        t->gaps = *gaps;
        *gaps = (struct m0_buf){0};
        t->rows = *got;
        *got = (struct m0_fvec){0};
        c->treplay = t;
        if (job) {
                job->loop = l;
                job->backfill = t;
                m0__pool_submit(&l->pool, job);
        } else {
                m0__sse_backfill(l->app, t, l->thread.state);
        }
        return 0;
}

int m0__sse_open(struct m0_conn *c, const m0_req *req, const m0_res *res, struct m0_buf *w)
{
        struct m0_hctx *l = c->loop;
        int r = first_bytes(l, w);
        if (r < 0)
                return r;
        c->stream = true;
        link_stream(l, c);

        /* Replay (N2): every kept frame of the stream's channels after Last-Event-ID; the live
         * ones follow with no gap and no duplicate because delivery skips what this stream's
         * cursor has passed. */
        uint64_t after = 0;
        bool replay = m0__sse_event_id(m0_req_header(req, "Last-Event-ID"), &after);
        struct m0_fvec got = {0};
        struct m0_subscribed sub = {0};
        struct m0_buf backfill = {0};
        struct gap_out gaps = {.w = w, .gaps = l->app && l->app->backfill ? &backfill : NULL};
        r = follow_all(c, res, replay, after, &got,
                       &(struct m0_gap_sink){.fn = gap_event, .ud = &gaps}, &sub);
        if (r == 0)
                r = gaps.r;
        if (r == 0 && backfill.len) {
                m0__fvec_sort(&got);
                r = backfill_begin(c, after, &backfill, &got);
        }
        m0__buf_free(&backfill);
        if (r == 0 && sub.table)
                r = m0__sse_ask_table(c, after);
        if (r < 0) {
                m0__fvec_free(&got);
                m0__sse_unlink(c);
                return r;
        }
        if (sub.ahead && l->bus->shared)
                c->cursor = after; /* another host's id: what follows it comes here too (D95) */
        else if (sub.ahead)
                note_ahead(l, after, c->cursor);
        m0__fvec_sort(&got);
        if (l->observe & M0_OBSERVE_METRICS)
                m0__count(&l->stats.replayed, got.n);
        for (size_t i = 0; i < got.n && r == 0; i++)
                r = m0__buf_append(w, got.v[i]->bytes + got.v[i]->start,
                                   got.v[i]->end - got.v[i]->start);
        m0__fvec_free(&got);
        return 0;
}

int m0__sse_open_bye(struct m0_hctx *l, struct m0_buf *w)
{
        static const char bye[] = ": bye\n\n";
        int r = first_bytes(l, w);
        return r == 0 ? m0__buf_append(w, bye, sizeof(bye) - 1) : r;
}

void m0__sse_begin(struct m0_conn *c, const m0_req *req, const m0_res *res)
{
        struct m0_hctx *l = c->loop;
        struct m0_buf *w = &l->wbuf;
        int r = m0__sse_head(l, res, false, w);
        if (r < 0) {
                m0__conn_end(c);
                return;
        }
        if (l->stopping) {
                /* Opened by a request the drain answered: the farewell comes at once. */
                (void)m0__sse_open_bye(l, w);
                c->closing = true;
                return;
        }
        if (m0__sse_open(c, req, res, w) < 0)
                m0__conn_end(c);
}

struct behind {
        uint64_t last; /* the newest refused id of the channel */
        unsigned closed;
};

/* A stream that would miss a refused frame is ended after what it was already sent. */
static void close_if_behind(void *ud, struct m0_sub *sub)
{
        struct behind *bh = ud;
        struct m0_conn *c = sub->c;
        if (c->cursor >= bh->last)
                return; /* opened after the refused frames: it has them already */
        if (c->upgraded) {
                cut(c); /* a WebSocket: its client reconnects with its last id */
                bh->closed++;
                return;
        }
        m0__sse_unlink(c);
        end(c);
        bh->closed++;
}

/* Every stream behind `last` that follows any channel: when more channels were refused than
 * the queue could name, a superset of those that would miss a frame. */
static unsigned close_all_behind(struct m0_hctx *l, uint64_t last)
{
        unsigned closed = 0;
        for (struct m0_conn *c = FIRST_STREAM(l), *next; c; c = next) {
                next = NEXT_STREAM(c);
                if (!c->nsubs || c->cursor >= last)
                        continue;
                m0__sse_unlink(c);
                end(c);
                closed++;
        }
        return closed;
}

static void log_full(struct m0_hctx *l, const struct m0_refusal *r, unsigned closed)
{
        if (l->chan_logged_ms && l->loop.now_ms < l->chan_logged_ms + 1000)
                return;
        l->chan_logged_ms = l->loop.now_ms ? l->loop.now_ms : 1;
        char dropped[96] = "";
        if (r->dropped)
                snprintf(dropped, sizeof(dropped), "; %llu transient frame%s dropped",
                         (unsigned long long)r->dropped, r->dropped == 1 ? "" : "s");
        if (!r->count) {
                m0__log(M0_LOG_WARNING, l->index, NULL,
                        "loop %d's channel is full (--channel-frames %u)%s", l->index,
                        l->cfg->channel_frames, dropped);
                return;
        }
        m0__log(M0_LOG_WARNING, l->index, NULL,
                "loop %d's channel is full (--channel-frames %u): %llu frame%s from id %llu "
                "refused; %u stream%s closed, to reconnect with Last-Event-ID%s",
                l->index, l->cfg->channel_frames, (unsigned long long)r->count,
                r->count == 1 ? "" : "s", (unsigned long long)r->from, closed,
                closed == 1 ? "" : "s", dropped);
}

/*
 * The loop's queue refused frames (B2, D45, D74): every stream that would miss one of them --
 * it follows the frame's channel and its cursor is below the frame's id -- is ended after what
 * it was already sent, so that its client reconnects with Last-Event-ID and gets them from the
 * replay store, rather than going on past a hole. A transient frame is not replayed: losing one
 * closes nothing. Logged at most once a second per loop; the exit line counts them all.
 */
static void close_behind(struct m0_hctx *l, struct m0_refusal *r)
{
        unsigned closed = 0;
        if (r->all) {
                closed = close_all_behind(l, r->last);
        } else if (r->count) {
                size_t bucket = 0;
                for (struct m0_hnode *n = m0__hmap_next(&r->chans, &bucket, NULL); n;
                     n = m0__hmap_next(&r->chans, &bucket, n)) {
                        struct m0_refused_chan *rc =
                                M0__CONTAINER_OF(n, struct m0_refused_chan, node);
                        struct behind bh = {.last = rc->last};
                        m0__subs_match(&l->subs, rc->name, n->len, n->hash, close_if_behind, &bh);
                        closed += bh.closed;
                }
        }
        m0__count(&l->chan_refused, r->count);
        l->chan_dropped += r->dropped;
        m0__count(&l->chan_closed, closed);
        log_full(l, r, closed);
        m0__refusal_free(r);
}

/* ---- a replay from the shared bus's table (G4, D95) ---- */

int m0__sse_ask_table(struct m0_conn *c, uint64_t after)
{
        struct m0_hctx *l = c->loop;
        struct m0_treplay *t = calloc(1, sizeof(*t));
        char **pats = calloc(c->nsubs ? c->nsubs : 1, sizeof(*pats));
        int r = t && pats ? 0 : -ENOMEM;
        size_t n = 0;
        for (; r == 0 && n < c->nsubs; n++) {
                const struct m0_key *k = &c->subs[n].f->key;
                if (!(pats[n] = malloc((size_t)k->len + 2)))
                        r = -ENOMEM;
                else
                        snprintf(pats[n], (size_t)k->len + 2, "%.*s%s", (int)k->len, k->name,
                                 k->prefix ? "*" : "");
        }
        if (r == 0) {
                t->loop = &l->loop;
                t->back = replay_back;
                t->drop = replay_drop;
                t->c = c;
                t->after = after;
                r = m0__shared_replay(l->bus, l->cfg->bus_replay_max, t, (const char *const *)pats,
                                      n);
        }
        while (pats && n--)
                free(pats[n]);
        free(pats);
        if (r < 0) {
                m0__log(M0_LOG_WARNING, l->index, NULL,
                        "a stream's replay after id %llu cannot be asked of the database (%s): "
                        "the stream is closed, for its client to reconnect",
                        (unsigned long long)after, strerror(-r));
                m0__treplay_free(t);
                return r;
        }
        c->treplay = t;
        return 0;
}

/* A live frame for a stream still waiting for the table: kept, in order, within the bound of
 * what a stream may have unsent (B2); past it, the stream is closed to reconnect. */
static void hold(struct m0_conn *c, const struct m0_frame *f)
{
        struct m0_treplay *t = c->treplay;
        size_t len = f->end - f->start;
        if (t->held_bytes + len > c->loop->cfg->max_output_bytes ||
            m0__fvec_push(&t->held, (struct m0_frame *)f) < 0) {
                c->loop->streams_cut++;
                cut(c);
                return;
        }
        atomic_fetch_add_explicit(&((struct m0_frame *)f)->refs, 1, memory_order_relaxed);
        t->held_bytes += len;
}

/* One frame to `c` unless its cursor has passed it (a transient one only when the stream began
 * before it), counted in `*sent` when written; false once `c` is gone. */
static bool send_frame(struct m0_conn *c, const struct m0_frame *f, uint64_t *sent)
{
        if (f->transient ? f->seq < c->seq : c->cursor >= f->id)
                return true;
        if (!f->transient)
                c->cursor = f->id;
        (*sent)++;
        return out(c, f->bytes + f->start, f->end - f->start) == 0;
}

void m0__sse_replayed(struct m0_hctx *l, struct m0_treplay *t)
{
        struct m0_conn *c = t->c;
        if (!c) {
                m0__treplay_free(t);
                return;
        }
        c->treplay = NULL;
        if (t->err) {
                m0__log(M0_LOG_WARNING, l->index, NULL,
                        "a stream's %s after id %llu failed (%s%s%s): the stream is closed, for "
                        "its client to reconnect",
                        t->backfill ? "backfill by the app" : "replay from the database",
                        (unsigned long long)t->after, strerror(-t->err), t->why[0] ? ": " : "",
                        t->why);
                m0__treplay_free(t);
                m0__sse_unlink(c);
                end(c);
                return;
        }
        /* The rows up to `upto`, then what came live meanwhile past them: no gap, no repeat. */
        c->cursor = t->after;
        bool alive = !t->pre.len || out(c, t->pre.data, t->pre.len) == 0;
        uint64_t replayed = 0, delivered = 0;
        for (size_t i = 0; alive && i < t->rows.n; i++)
                alive = send_frame(c, t->rows.v[i], &replayed);
        if (alive && c->cursor < t->upto)
                c->cursor = t->upto;
        for (size_t i = 0; alive && i < t->held.n; i++)
                alive = send_frame(c, t->held.v[i], &delivered);
        if (l->observe & M0_OBSERVE_METRICS) {
                m0__count(&l->stats.replayed, replayed);
                m0__count(&l->stats.delivered, delivered);
        }
        m0__treplay_free(t);
}

struct delivery {
        const struct m0_frame *f;
        uint64_t stamp;
        uint64_t sent; /* streams it was written to, for the metrics (O1) */
};

/* One frame to one stream that follows its channel, once, and only what its cursor has not
 * passed: a transient frame only to a stream that followed before it was published. */
static void deliver_one(void *ud, struct m0_sub *sub)
{
        struct delivery *d = ud;
        const struct m0_frame *f = d->f;
        struct m0_conn *c = sub->c;
        if (c->stamp == d->stamp)
                return; /* it follows this channel through another key too */
        c->stamp = d->stamp;
        if (c->treplay)
                hold(c, f); /* a WebSocket's backfill too (D234) */
        else if (c->upgraded)
                d->sent += (uint64_t)c->proto->event(c, f);
        else
                (void)send_frame(c, f, &d->sent);
}

bool m0__sse_deliver(struct m0_hctx *l)
{
        struct m0_bus *b = l->bus;
        for (;;) {
                struct m0_frame *f[TAKE_BATCH];
                struct m0_refusal refused;
                size_t n = m0__bus_take_queue(b, l->index, f, TAKE_BATCH, &refused);
                uint64_t sent = 0;
                for (size_t i = 0; i < n; i++) {
                        struct delivery d = {.f = f[i], .stamp = ++l->deliver_stamp};
                        m0__subs_match(&l->subs, f[i]->chan, f[i]->chan_len, f[i]->hash,
                                       deliver_one, &d);
                        sent += d.sent;
                        m0__frame_unref(f[i]);
                }
                if (l->observe & M0_OBSERVE_METRICS)
                        m0__count(&l->stats.delivered, sent);
                if (refused.count || refused.dropped)
                        close_behind(l, &refused);
                if (n < TAKE_BATCH)
                        return false;
                if (!m0__turn_take(&l->loop))
                        return true; /* the rest waits for its place on the run queue (D85) */
        }
}

void m0__sse_heartbeat(struct m0_hctx *l)
{
        static const char hb[] = ": heartbeat\n\n";
        for (struct m0_conn *c = FIRST_STREAM(l), *next; c; c = next) {
                next = NEXT_STREAM(c); /* a send may close c */
                (void)out(c, hb, sizeof(hb) - 1);
        }
}

void m0__sse_farewell(struct m0_hctx *l)
{
        static const char bye[] = ": bye\n\n";
        struct m0_conn *c;
        while ((c = FIRST_STREAM(l))) {
                m0__sse_unlink(c);
                if (out(c, bye, sizeof(bye) - 1) < 0)
                        continue; /* closed: its backlog had passed the bound (B2) */
                /* The farewell is best effort (X1): a client that is not taking its stream
                 * is closed now rather than waited for, and is no failure of the stop. It
                 * reconnects with Last-Event-ID like any other. */
                if (c->out.len > c->out_off) {
                        m0__count(&l->streams_unread, 1);
                        m0__conn_close(c);
                        continue;
                }
                end(c);
        }
}

/* The bus's wake-up: flag each loop of `mask` once and poke its mailbox eventfd on the 0→1 edge. */
void m0__bus_wake_loops(void *ud, const uint64_t *mask)
{
        struct m0_serve *s = ud;
        /* A loop publishing itself delivers after the connection it serves, or at the end of
         * its turn at the latest (D44): its own eventfd needs no write. */
        struct m0_hctx *self = m0__thread_loop_self();
        for (int i = 0; i < s->nloops; i++) {
                struct m0_hctx *l = &s->loops[i];
                if (!(mask[i / 64] & (UINT64_C(1) << (i % 64))))
                        continue;
                if (!atomic_exchange(&l->bus_pending, true) && l != self)
                        m0__loop_wake(&l->loop);
        }
}
