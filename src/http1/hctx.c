/* SPDX-License-Identifier: MIT */
/* hctx.c: a loop's HTTP context and the thread that runs it (L1, L2, D41, LY1): its listeners,
 * its mailbox's messages, the stop and the drain, the turn's end (heartbeats, the drain's bound,
 * reaping, the app's tick, the journal). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "accept.h"
#include "activation.h"
#include "config.h"
#include "conn.h"
#include "lifecycle.h"
#include "hctx.h"
#include "log.h"
#include "attach.h"
#include "sse.h"

static void hctx_woken(struct m0_loop *el);
static void hctx_turn_end(struct m0_loop *el);
static uint64_t hctx_next_deadline(struct m0_loop *el);

static const struct m0_loop_ops hctx_ops = {
        .woken = hctx_woken,
        .turn_end = hctx_turn_end,
        .next_deadline = hctx_next_deadline,
};

static void frames_run(struct m0_task *t, uint32_t events);
static void journal_ready(struct m0_io *io, uint32_t events);
static void job_back(struct m0_loop *el, struct m0_msg *m);
static void job_drop(struct m0_loop *el, struct m0_msg *m);

void m0__hctx_prepare(struct m0_hctx *x, struct m0_serve *s, int index)
{
        memset(x, 0, sizeof(*x));
        m0__loop_prepare(&x->loop, index, &hctx_ops);
        x->serve = s;
        x->app = s->app;
        x->cfg = s->cfg;
        x->router = s->router;
        x->cors = s->cors;
        x->bus = s->bus;
        x->index = index;
        x->reserve_fd = -1;
        x->frames_task.run = frames_run;
        x->journal_io.ready = journal_ready;
        pthread_mutex_init(&x->cur_lock, NULL);
        m0__thread_init(&x->thread, M0_THREAD_LOOP, index, -1, m0__hctx_main, x);
        m0__res_keep_alive(x, s->cfg->idle_timeout_ms);
        m0__journal_prepare(&x->journal, s->app && s->app->name ? s->app->name : "m0", index,
                            s->cfg->access_log_queue);
}

/* What the loop counts and logs for operators (O1, O2): the metrics when a metrics listener is
 * set up, a journal entry per request with M0_ACCESS_LOG=journal. */
static int observe_build(struct m0_hctx *x)
{
        if (x->serve->sockets->nmetrics)
                x->observe |= M0_OBSERVE_METRICS;
        if (x->cfg->access_log != M0_ACCESS_JOURNAL)
                return 0;
        x->observe |= M0_OBSERVE_JOURNAL;
        return m0__journal_open(&x->journal, &x->loop, &x->journal_io);
}

static void listener_ready(struct m0_io *io, uint32_t events)
{
        (void)events;
        struct m0_lcopy *li = M0__CONTAINER_OF(io, struct m0_lcopy, io);
        /* A batch of accepts (at most 64) is one item; in a full turn the listener waits for
         * epoll's next report. Closed at the stop earlier in this batch: nothing. */
        if (li->fd >= 0 && m0__turn_take(&li->ctx->loop))
                m0__accept_ready_tls(li->ctx, li->fd, li->tls);
}

int m0__hctx_build(struct m0_hctx *x)
{
        const struct m0_serve *s = x->serve;
        const struct m0_config *cfg = x->cfg;
        int r = m0__pool_init(&x->pool, x, (int)cfg->blocking_threads, job_back, job_drop);
        if (r < 0)
                return r;
        r = m0__loop_build(&x->loop);
        if (r < 0)
                return r;
        r = observe_build(x);
        if (r < 0)
                return r;
        x->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        /* Each loop holds its own copy of every listener; closing it at the drain is per loop. */
        x->nlisten = s->sockets->n;
        x->listeners = calloc(x->nlisten ? x->nlisten : 1, sizeof(*x->listeners));
        if (!x->listeners)
                return -ENOMEM;
        for (size_t i = 0; i < x->nlisten; i++)
                x->listeners[i] = (struct m0_lcopy){.io.ready = listener_ready, .fd = -1, .ctx = x};
        for (size_t i = 0; i < x->nlisten; i++) {
                x->listeners[i].tls = s->sockets->v[i].tls;
                x->listeners[i].fd = fcntl(s->sockets->v[i].fd, F_DUPFD_CLOEXEC, 3);
                if (x->listeners[i].fd < 0)
                        return -errno;
        }
        x->rscratch_cap = 64 * 1024;
        x->rscratch = malloc(x->rscratch_cap);
        x->req.headers = calloc(cfg->max_header_fields, sizeof(*x->req.headers));
        x->req.json_max_depth = cfg->json_max_depth;
        if (!x->rscratch || !x->req.headers)
                return -ENOMEM;
        r = m0__fturn_init(&x->files_turn, cfg->files_turn_cache, M0__FILE_INLINE);
        if (r < 0)
                return r;
        x->req.files_turn = cfg->files_turn_cache ? &x->files_turn : NULL;
        /* A turn's budget plus the longest a handler may run on the loop (a quarter of the
         * watchdog's interval) stays within the half interval the watchdog allows (W1, D41,
         * D43). */
        x->loop.turn_items = cfg->turn_items;
        x->loop.turn_budget_ms = cfg->turn_budget_ms;
        if (s->watchdog_usec && x->loop.turn_budget_ms > s->watchdog_usec / 8000)
                x->loop.turn_budget_ms = s->watchdog_usec / 8000 ? s->watchdog_usec / 8000 : 1;
        /* Wake at least once a second, and every quarter of the watchdog's interval (W1): the
         * Date line and the heartbeat advance even when idle. */
        if (s->watchdog_usec && s->watchdog_usec / 4000 < x->loop.wake_every_ms)
                x->loop.wake_every_ms = s->watchdog_usec / 4000 ? s->watchdog_usec / 4000 : 1;
        return 0;
}

int m0__hctx_init(struct m0_hctx *x, struct m0_serve *s, int index)
{
        m0__hctx_prepare(x, s, index);
        return m0__hctx_build(x);
}

static void close_listeners(struct m0_hctx *x)
{
        for (size_t i = 0; i < x->nlisten; i++) {
                if (x->listeners[i].fd < 0)
                        continue;
                m0__io_del(&x->loop, x->listeners[i].fd);
                close(x->listeners[i].fd); /* never shutdown(2): the socket is systemd's */
                x->listeners[i].fd = -1;
        }
}

void m0__hctx_destroy(struct m0_hctx *x)
{
        if (x->listeners)
                close_listeners(x);
        free(x->listeners);
        x->listeners = NULL;
        m0__loop_destroy(&x->loop);
        if (x->reserve_fd >= 0)
                close(x->reserve_fd);
        x->reserve_fd = -1;
        free(x->rscratch);
        free(x->ws_text.text);
        if (x->h2_spare_free)
                x->h2_spare_free(x);
        x->rscratch = NULL;
        free(x->req.headers);
        x->req.headers = NULL;
        m0__buf_free(&x->req.arena);
        m0__buf_free(&x->req.params);
        m0__buf_free(&x->res.head);
        m0__buf_free(&x->res.body);
        m0__buf_free(&x->res.chans);
        m0__subs_free(&x->subs);
        m0__buf_free(&x->wbuf);
        m0__fturn_free(&x->files_turn);
        m0__journal_destroy(&x->journal);
        m0__pool_destroy(&x->pool);
        pthread_mutex_destroy(&x->cur_lock);
}

/* ---- messages: each carries its handler (LY1) ---- */

static void job_back(struct m0_loop *el, struct m0_msg *m)
{
        (void)el;
        m0__conn_job_done(m->arg);
}

static void job_drop(struct m0_loop *el, struct m0_msg *m)
{
        (void)el;
        m0__job_discard(m->arg);
}

/* Wake every loop: the last one to stop accepting lets those waiting on it leave. */
static void wake_all(const struct m0_serve *s)
{
        for (int i = 0; i < s->nloops; i++)
                m0__loop_wake(&s->loops[i].loop);
}

static void begin_stop(struct m0_hctx *x)
{
        if (x->stopping)
                return;
        x->stopping = true;
        x->drain_deadline_ms = m0__now_ms() + x->cfg->drain_timeout_ms;
        close_listeners(x);
        /* This loop accepts nothing more, so it hands nothing more over. */
        if (atomic_fetch_sub(&x->serve->accepting, 1) == 1)
                wake_all(x->serve);
        m0__sse_farewell(x);
        /* Busy connections finish their request with Connection: close; idle ones close after
         * drain_idle_ms (m0__conn_stop). */
        m0__conn_stop_all(x);
}

static void stop_handle(struct m0_loop *el, struct m0_msg *m)
{
        (void)m;
        begin_stop(m0__hctx_of(el));
}

int m0__hctx_post_stop(struct m0_hctx *x)
{
        struct m0_msg *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->handle = stop_handle;
        m->fd = -1;
        return m0__loop_post(&x->loop, m);
}

/* The drain's bound has passed: whatever is still open is cut, counted and named by the host. */
static void cut_all(struct m0_hctx *x)
{
        m0__conn_cut_all(x);
        if (x->cut)
                m0__log(M0_LOG_ERR, x->index, M0_MID_DRAIN_TIMEOUT,
                        "loop %d still running past the drain's bound: %llu connection%s cut",
                        x->index, (unsigned long long)x->cut, x->cut == 1 ? "" : "s");
}

/* ---- the loop's hooks ---- */

static void frames_run(struct m0_task *t, uint32_t events)
{
        (void)events;
        struct m0_hctx *x = M0__CONTAINER_OF(t, struct m0_hctx, frames_task);
        (void)m0__turn_take(&x->loop); /* its first take, as the queue's first always runs */
        if (m0__sse_deliver(x))
                m0__turn_defer(&x->loop, &x->frames_task, 0);
}

static void journal_ready(struct m0_io *io, uint32_t events)
{
        (void)events;
        m0__journal_flush(M0__CONTAINER_OF(io, struct m0_hctx, journal_io));
}

static void hctx_woken(struct m0_loop *el)
{
        m0__hctx_deliver_pending(m0__hctx_of(el));
}

static uint64_t hctx_next_deadline(struct m0_loop *el)
{
        struct m0_hctx *x = m0__hctx_of(el);
        uint64_t next = UINT64_MAX;
        if (x->serve->tick_ms && x->app->tick && x->next_tick_ms < next)
                next = x->next_tick_ms;
        if (x->cfg->sse_heartbeat_ms && !m0__list_empty(&x->streams) && x->next_heartbeat_ms < next)
                next = x->next_heartbeat_ms;
        if (x->stopping && x->drain_deadline_ms < next)
                next = x->drain_deadline_ms;
        return next;
}

static void hctx_turn_end(struct m0_loop *el)
{
        struct m0_hctx *x = m0__hctx_of(el);
        const struct m0_serve *s = x->serve;
        if (x->cfg->sse_heartbeat_ms && el->now_ms >= x->next_heartbeat_ms) {
                if (!m0__list_empty(&x->streams))
                        m0__sse_heartbeat(x);
                x->next_heartbeat_ms = el->now_ms + x->cfg->sse_heartbeat_ms;
        }
        if (x->stopping && el->now_ms >= x->drain_deadline_ms)
                cut_all(x);
        m0__conn_reap(x);
        if (s->tick_ms && x->app->tick && el->now_ms >= x->next_tick_ms) {
                x->app->tick(x->thread.state);
                x->next_tick_ms = el->now_ms + s->tick_ms;
        }
        m0__hctx_deliver_pending(x);
        /* The turn's access log entries leave together in one datagram, off every request's
         * path (D81, D98); while journald's queue is full they wait for EPOLLOUT instead. */
        if (x->journal.n && !x->journal.waiting)
                m0__journal_flush(x);
        /* D237: what a later turn asks of the files is read from them as they are then */
        m0__fturn_clear(&x->files_turn);
}

/* Deliver what the loop's channel holds, when a publish said there is something (D44), a turn's
 * worth of it (D85): frames left over wait for their place on the run queue. The flag is only
 * looked at first: the exchange is for when it is set. */
void m0__hctx_deliver_pending(struct m0_hctx *x)
{
        if (atomic_load_explicit(&x->bus_pending, memory_order_relaxed) && !x->frames_task.queued &&
            atomic_exchange(&x->bus_pending, false) && m0__sse_deliver(x))
                m0__turn_defer(&x->loop, &x->frames_task, 0);
}

int m0__hctx_run_once(struct m0_hctx *x, int timeout_ms)
{
        return m0__loop_run_once(&x->loop, timeout_ms);
}

/* ---- the loop's thread ---- */

/*
 * A stopping loop leaves once it holds no connection and none can still reach it: every loop
 * has stopped accepting, and each hand-off raised this loop's load before it was posted (L4).
 * Past the drain's bound it leaves anyway: a loop that never read its stop keeps `accepting`
 * up, and the coordinator names it.
 */
static bool drained(struct m0_hctx *x)
{
        if (!x->stopping || atomic_load(&x->load) != 0)
                return false;
        return atomic_load(&x->serve->accepting) == 0 || x->loop.now_ms >= x->drain_deadline_ms;
}

static int serve(struct m0_hctx *x)
{
        for (size_t i = 0; i < x->nlisten; i++) {
                int r = m0__io_add(&x->loop, &x->listeners[i].io, x->listeners[i].fd,
                                   EPOLLIN | EPOLLEXCLUSIVE);
                if (r < 0)
                        return r;
        }
        m0__log(M0_LOG_INFO, x->index, NULL, "Event loop started (%zu listener%s)", x->nlisten,
                x->nlisten == 1 ? "" : "s");
        x->next_tick_ms = m0__now_ms() + x->serve->tick_ms;
        while (!drained(x)) {
                int r = m0__loop_run_once(&x->loop, m0__loop_timeout(&x->loop));
                if (r < 0)
                        return r;
        }
        return 0;
}

void m0__loop_request_get(struct m0_hctx *x, char *out, size_t len)
{
        pthread_mutex_lock(&x->cur_lock);
        snprintf(out, len, "%s", x->cur);
        pthread_mutex_unlock(&x->cur_lock);
}

/* At exit each loop says what it did (L4: passed and received among them). */
static void log_counts(const struct m0_hctx *x)
{
        m0__log(M0_LOG_INFO, x->index, NULL,
                "loop stopped: accepted %llu, passed %llu, received %llu, requests %llu, "
                "connections refused %llu, slow streams closed %llu, streams closed unread at the "
                "stop %llu, streams closed at a full channel %llu, frames a full channel refused "
                "%llu, transient frames a full channel dropped %llu, Last-Event-IDs past the "
                "newest id %llu",
                (unsigned long long)x->accepted, (unsigned long long)x->passed,
                (unsigned long long)x->received, (unsigned long long)x->requests,
                (unsigned long long)x->refused_conns, (unsigned long long)x->streams_cut,
                (unsigned long long)x->streams_unread, (unsigned long long)x->chan_closed,
                (unsigned long long)x->chan_refused, (unsigned long long)x->chan_dropped,
                (unsigned long long)x->replays_ahead);
}

void *m0__hctx_main(void *arg)
{
        struct m0_hctx *x = arg;
        const struct m0_serve *s = x->serve;
        if (m0__handler_begin(s->life, x, &x->thread, true)) {
                int r = serve(x);
                if (r < 0) {
                        x->failed = true;
                        m0__log(M0_LOG_CRIT, x->index, M0_MID_LOOP_CRASHED, "loop %d failed: %s",
                                x->index, strerror(-r));
                }
                m0__pool_stop(&x->pool);
                if (x->observe & M0_OBSERVE_JOURNAL)
                        m0__journal_finish(x, x->drain_deadline_ms);
                log_counts(x);
        }
        m0__handler_end(s->life, &x->thread);
        /* Tell the coordinator a loop ended (L5); it also joins with a bound, so a failed
         * write leaves nothing to do. */
        uint64_t one = 1;
        ssize_t w = write(s->done_fd, &one, sizeof(one));
        (void)w;
        return NULL;
}
