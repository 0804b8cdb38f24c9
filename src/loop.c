/* SPDX-License-Identifier: MIT */
/* loop.c: one event loop on one thread: its epoll set, its mailbox, its timers, its turns (L1, L2,
 * D41). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <fcntl.h>
#include <unistd.h>

#include "accept.h"
#include "conn.h"
#include "handler.h"
#include "host.h"
#include "log.h"
#include "shared.h"
#include "sse.h"

/*
 * epoll tags: a connection is registered with its own (aligned) pointer, the mailbox and the
 * journal socket with the addresses of static markers, a listener with its index shifted left
 * and the low bit set.
 */
static uint64_t tag_mailbox;
static uint64_t tag_journal; /* the access log's socket to journald, writable again (D81) */

#define LISTENER_BIT UINT64_C(1)

void m0__loop_prepare(struct m0_loop *l, struct m0_host *h, int index)
{
        memset(l, 0, sizeof(*l));
        l->host = h;
        l->index = index;
        l->epfd = -1;
        l->mb_fd = -1;
        l->reserve_fd = -1;
        pthread_mutex_init(&l->mb_lock, NULL);
        pthread_mutex_init(&l->cur_lock, NULL);
        for (int i = 0; i < M0_TASK_N; i++)
                l->src_task[i].kind = (int8_t)i;
        m0__thread_init(&l->thread, M0_THREAD_LOOP, index, -1, m0__loop_main, l);
        m0__res_keep_alive(l, h->cfg.idle_timeout_ms);
        m0__journal_prepare(&l->journal, h->app && h->app->name ? h->app->name : "m0", index,
                            h->cfg.access_log_queue);
}

/* What the loop counts and logs for operators (O1, O2): the metrics when a metrics listener is
 * set up, a journal entry per request with M0_ACCESS_LOG=journal. */
static int observe_build(struct m0_loop *l)
{
        struct m0_host *h = l->host;
        if (h->sockets.nmetrics)
                l->observe |= M0_OBSERVE_METRICS;
        if (h->cfg.access_log != M0_ACCESS_JOURNAL)
                return 0;
        l->observe |= M0_OBSERVE_JOURNAL;
        return m0__journal_open(&l->journal, l->epfd, &tag_journal);
}

int m0__loop_build(struct m0_loop *l)
{
        struct m0_host *h = l->host;
        int r = m0__pool_init(&l->pool, l, (int)h->cfg.blocking_threads);
        if (r < 0)
                return r;
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (l->epfd < 0)
                return -errno;
        l->mb_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (l->mb_fd < 0)
                return -errno;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &tag_mailbox};
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->mb_fd, &ev) < 0)
                return -errno;
        r = observe_build(l);
        if (r < 0)
                return r;
        l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        /* Each loop holds its own copy of every listener; closing it at the drain is per loop. */
        l->nlisten = h->sockets.n;
        l->listen_fds = calloc(l->nlisten ? l->nlisten : 1, sizeof(int));
        if (!l->listen_fds)
                return -ENOMEM;
        for (size_t i = 0; i < l->nlisten; i++) {
                l->listen_fds[i] = fcntl(h->sockets.v[i].fd, F_DUPFD_CLOEXEC, 3);
                if (l->listen_fds[i] < 0)
                        return -errno;
        }
        l->rscratch_cap = 64 * 1024;
        l->rscratch = malloc(l->rscratch_cap);
        l->req.headers = calloc(h->cfg.max_header_fields, sizeof(*l->req.headers));
        l->req.json_max_depth = h->cfg.json_max_depth;
        if (!l->rscratch || !l->req.headers)
                return -ENOMEM;
        /* A turn's budget plus the longest a handler may run on the loop (a quarter of the
         * watchdog's interval) stays within the half interval the watchdog allows (W1, D41,
         * D43). */
        l->turn_budget_ms = h->cfg.turn_budget_ms;
        if (h->watchdog_usec && l->turn_budget_ms > h->watchdog_usec / 8000)
                l->turn_budget_ms = h->watchdog_usec / 8000 ? h->watchdog_usec / 8000 : 1;
        l->now_ms = m0__now_ms();
        m0__loop_date(l);
        return 0;
}

int m0__loop_init(struct m0_loop *l, struct m0_host *h, int index)
{
        m0__loop_prepare(l, h, index);
        return m0__loop_build(l);
}

static void close_listeners(struct m0_loop *l)
{
        for (size_t i = 0; i < l->nlisten; i++) {
                if (l->listen_fds[i] < 0)
                        continue;
                (void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->listen_fds[i], NULL);
                close(l->listen_fds[i]); /* never shutdown(2): the socket is systemd's */
                l->listen_fds[i] = -1;
        }
}

void m0__loop_destroy(struct m0_loop *l)
{
        if (l->listen_fds)
                close_listeners(l);
        free(l->listen_fds);
        l->listen_fds = NULL;
        struct m0_link *n;
        /* what the loop took and had not handled comes first, as it would have */
        m0__list_append(&l->mb_got, &l->mb);
        while ((n = m0__list_pop(&l->mb_got))) {
                struct m0_msg *m = M0__CONTAINER_OF(n, struct m0_msg, link);
                if (m->kind == M0_MSG_CONN && m->fd >= 0)
                        close(m->fd);
                if (m->kind == M0_MSG_JOB)
                        m0__job_discard(m->job);
                if (m->kind == M0_MSG_REPLAY)
                        m0__treplay_free(m->replay);
                free(m);
        }
        if (l->mb_fd >= 0)
                close(l->mb_fd);
        if (l->epfd >= 0)
                close(l->epfd);
        if (l->reserve_fd >= 0)
                close(l->reserve_fd);
        l->mb_fd = l->epfd = l->reserve_fd = -1;
        free(l->rscratch);
        l->rscratch = NULL;
        free(l->req.headers);
        l->req.headers = NULL;
        m0__buf_free(&l->req.arena);
        m0__buf_free(&l->req.params);
        m0__buf_free(&l->res.head);
        m0__buf_free(&l->res.body);
        m0__buf_free(&l->res.chans);
        m0__subs_free(&l->subs);
        m0__buf_free(&l->wbuf);
        m0__journal_destroy(&l->journal);
        m0__pool_destroy(&l->pool);
        pthread_mutex_destroy(&l->mb_lock);
        pthread_mutex_destroy(&l->cur_lock);
}

int m0__loop_post(struct m0_loop *l, struct m0_msg *m)
{
        pthread_mutex_lock(&l->mb_lock);
        bool was_empty = m0__list_empty(&l->mb);
        m0__list_push(&l->mb, &m->link);
        pthread_mutex_unlock(&l->mb_lock);
        /* Wake only on the empty→non-empty edge; the write happens outside the lock. */
        if (was_empty) {
                uint64_t one = 1;
                if (write(l->mb_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
                        return -errno;
        }
        return 0;
}

void m0__loop_date(struct m0_loop *l)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME_COARSE, &ts);
        if (ts.tv_sec == l->date_sec)
                return;
        l->date_sec = ts.tv_sec;
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        l->date_len =
                strftime(l->date, sizeof(l->date), "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
}

/* Wake every loop: the last one to stop accepting lets those waiting on it leave. */
static void wake_all(struct m0_host *h)
{
        uint64_t one = 1;
        for (int i = 0; i < h->nloops; i++) {
                ssize_t w = write(h->loops[i].mb_fd, &one, sizeof(one));
                (void)w; /* EAGAIN: the counter is already non-zero, the loop wakes */
        }
}

static void begin_stop(struct m0_loop *l)
{
        if (l->stopping)
                return;
        l->stopping = true;
        l->drain_deadline_ms = m0__now_ms() + l->host->cfg.drain_timeout_ms;
        close_listeners(l);
        /* This loop accepts nothing more, so it hands nothing more over. */
        if (atomic_fetch_sub(&l->host->accepting, 1) == 1)
                wake_all(l->host);
        m0__sse_farewell(l);
        /* Busy connections finish their request with Connection: close; idle ones close after
         * drain_idle_ms (m0__conn_stop). */
        for (int cls = M0_TIMER_IDLE; cls < M0_TIMER_N; cls++) {
                struct m0_conn *c = M0__LIST_FIRST(&l->timers[cls], struct m0_conn, tlink);
                while (c) {
                        struct m0_conn *next = m0__conn_timer_next(c);
                        m0__conn_stop(c);
                        c = next;
                }
        }
}

/* The drain's bound has passed: whatever is still open is cut, counted and named by the host. */
static void cut_all(struct m0_loop *l)
{
        for (int cls = M0_TIMER_IDLE; cls < M0_TIMER_N; cls++) {
                struct m0_conn *c;
                while ((c = M0__LIST_FIRST(&l->timers[cls], struct m0_conn, tlink))) {
                        /* a connection lingering after its last answer was answered whole, and
                         * one idle since the stop was serving nothing */
                        if (cls != M0_TIMER_LINGER && cls != M0_TIMER_DRAIN)
                                m0__count(&l->cut, 1);
                        m0__conn_close(c);
                }
        }
        /* Connections the loop still owed answers to when the bound came; the loop's own
         * sources keep their places */
        for (struct m0_link *q = l->runq.head, *next; q; q = next) {
                struct m0_task *t = M0__CONTAINER_OF(q, struct m0_task, link);
                next = q->next;
                if (t->kind != M0_TASK_CONN)
                        continue;
                m0__count(&l->cut, 1);
                m0__conn_close(M0__CONTAINER_OF(t, struct m0_conn, task));
        }
        if (l->cut)
                m0__log(M0_LOG_ERR, l->index, M0_MID_DRAIN_TIMEOUT,
                        "loop %d still running past the drain's bound: %llu connection%s cut",
                        l->index, (unsigned long long)l->cut, l->cut == 1 ? "" : "s");
}

/* Deliver what the loop's channel holds, when a publish said there is something (D44), a turn's
 * worth of it (D85): frames left over wait for their place on the run queue. The flag is only
 * looked at first: the exchange is for when it is set. */
static void deliver_pending(struct m0_loop *l)
{
        if (atomic_load_explicit(&l->bus_pending, memory_order_relaxed) &&
            !l->src_task[M0_TASK_FRAMES].queued && atomic_exchange(&l->bus_pending, false) &&
            m0__sse_deliver(l))
                m0__turn_leave(l, M0_TASK_FRAMES);
}

/* The messages the loop has taken, in order, a turn's worth (D85); the rest keep their place. */
static void handle_messages(struct m0_loop *l)
{
        struct m0_link *n;
        while (l->mb_got.head) {
                if (!m0__turn_take(l)) {
                        m0__turn_leave(l, M0_TASK_MAILBOX);
                        return;
                }
                n = m0__list_pop(&l->mb_got);
                struct m0_msg *m = M0__CONTAINER_OF(n, struct m0_msg, link);
                switch (m->kind) {
                case M0_MSG_CONN:
                        m0__count(&l->received, 1);
                        /* Hand-offs queued before the stop are admitted even while draining;
                         * admit tells them to stop like the rest. */
                        (void)m0__conn_admit(l, m->fd);
                        break;
                case M0_MSG_STOP: begin_stop(l); break;
                case M0_MSG_JOB: m0__conn_job_done(m->job); break;
                case M0_MSG_REPLAY: m0__sse_replayed(l, m->replay); break;
                }
                free(m);
        }
}

/* The mailbox's eventfd: what was posted joins what the loop took before, behind it. */
static void drain_mailbox(struct m0_loop *l)
{
        uint64_t v;
        if (read(l->mb_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                return;
        deliver_pending(l);
        pthread_mutex_lock(&l->mb_lock);
        m0__list_append(&l->mb_got, &l->mb);
        pthread_mutex_unlock(&l->mb_lock);
        if (!l->src_task[M0_TASK_MAILBOX].queued)
                handle_messages(l);
}

/* The expired timers, oldest class first, a turn's worth (D85); the rest stay where they are,
 * expired, and the timers' place on the run queue brings them back. */
static void fire_timers(struct m0_loop *l)
{
        for (int cls = M0_TIMER_IDLE; cls < M0_TIMER_N; cls++) {
                struct m0_conn *c;
                while ((c = M0__LIST_FIRST(&l->timers[cls], struct m0_conn, tlink)) &&
                       c->deadline <= l->now_ms) {
                        if (!m0__turn_take(l)) {
                                m0__turn_leave(l, M0_TASK_TIMERS);
                                return;
                        }
                        m0__conn_timer_fire(c);
                }
        }
}

static int next_timeout(struct m0_loop *l)
{
        uint64_t next = UINT64_MAX;
        for (int cls = M0_TIMER_IDLE; cls < M0_TIMER_N; cls++) {
                struct m0_conn *c = M0__LIST_FIRST(&l->timers[cls], struct m0_conn, tlink);
                if (c && c->deadline < next)
                        next = c->deadline;
        }
        if (l->host->tick_ms && l->host->app->tick && l->next_tick_ms < next)
                next = l->next_tick_ms;
        if (l->host->cfg.sse_heartbeat_ms && !m0__list_empty(&l->streams) &&
            l->next_heartbeat_ms < next)
                next = l->next_heartbeat_ms;
        if (l->stopping && l->drain_deadline_ms < next)
                next = l->drain_deadline_ms;
        /* Wake at least once a second, and every quarter of the watchdog's interval (W1): the
         * Date line and the heartbeat advance even when idle. */
        uint64_t every = 1000;
        if (l->host->watchdog_usec && l->host->watchdog_usec / 4000 < every)
                every = l->host->watchdog_usec / 4000 ? l->host->watchdog_usec / 4000 : 1;
        uint64_t cap = l->now_ms + every;
        if (next > cap)
                next = cap;
        return next <= l->now_ms ? 0 : (int)(next - l->now_ms);
}

/* ---- turns (D41): a turn's work is bounded; what is left waits for the next turn ---- */

/* The turn's clock: the coarse monotonic clock, read after each request and each event, costs a
 * quarter of the precise one's ~30 ns here, and its few milliseconds of resolution are nothing
 * against a budget that only has to stay well below the watchdog's interval (D41). */
static uint64_t turn_clock_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

bool m0__turn_spent(struct m0_loop *l)
{
        if (!l->turn_served)
                return false; /* a turn serves someone before it can end: that is its progress */
        return turn_clock_ms() >= l->turn_end_ms;
}

/* Whether the turn may take another item: it has taken none yet, or has items and time left. */
static bool turn_open(struct m0_loop *l)
{
        return !l->turn_served || (l->turn_left && !m0__turn_spent(l));
}

bool m0__turn_take(struct m0_loop *l)
{
        if (!turn_open(l))
                return false;
        l->turn_served = true;
        if (l->turn_left)
                l->turn_left--;
        return true;
}

static void task_queue(struct m0_loop *l, struct m0_task *t)
{
        if (t->queued)
                return;
        t->queued = true;
        m0__list_push(&l->runq, &t->link);
        l->runq_len++;
}

static void task_unqueue(struct m0_loop *l, struct m0_task *t)
{
        if (!t->queued)
                return;
        m0__list_unlink(&l->runq, &t->link);
        t->queued = false;
        l->runq_len--;
}

void m0__turn_defer(struct m0_conn *c, uint32_t events)
{
        c->qevents |= events;
        c->task.kind = M0_TASK_CONN;
        task_queue(c->loop, &c->task);
}

void m0__turn_forget(struct m0_conn *c)
{
        task_unqueue(c->loop, &c->task);
        c->qevents = 0;
}

void m0__turn_leave(struct m0_loop *l, enum m0_task_kind kind)
{
        task_queue(l, &l->src_task[kind]);
}

/* One entry of the run queue has its turn: a connection its events, a source a batch. */
static void serve_task(struct m0_loop *l, struct m0_task *t)
{
        task_unqueue(l, t);
        switch (t->kind) {
        case M0_TASK_TIMERS: fire_timers(l); break;
        case M0_TASK_MAILBOX: handle_messages(l); break;
        case M0_TASK_FRAMES:
                (void)m0__turn_take(l); /* its first take, as the queue's first always runs */
                if (m0__sse_deliver(l))
                        m0__turn_leave(l, M0_TASK_FRAMES);
                break;
        default: {
                struct m0_conn *c = M0__CONTAINER_OF(t, struct m0_conn, task);
                uint32_t events = c->qevents;
                c->qevents = 0;
                (void)m0__turn_take(l); /* the queue's first always runs (turn_open held) */
                m0__conn_event(c, events);
                deliver_pending(l);
        }
        }
}

/* Serve what the last turn left, first, in order: the entries queued when this turn began (the
 * first of them whatever the budget says), each a connection with the events it was left with
 * or a source with a batch left (D41, D85). */
static void serve_queue(struct m0_loop *l)
{
        size_t n = l->runq_len;
        struct m0_link *q;
        for (size_t i = 0; i < n && (q = l->runq.head) && turn_open(l); i++)
                serve_task(l, M0__CONTAINER_OF(q, struct m0_task, link));
}

/* A connection's events: handled now, or queued behind the others once the turn is full (of
 * items or of time). One already queued has its turn there; epoll reports it again meanwhile
 * (level-triggered). */
static void serve_event(struct m0_loop *l, struct m0_conn *c, uint32_t events)
{
        if (c->fd < 0)
                return; /* closed earlier in this batch */
        if (c->task.queued || !m0__turn_take(l)) {
                m0__turn_defer(c, events);
                return;
        }
        m0__conn_event(c, events);
        /* What the loop published while serving it reaches its own streams now, in id order,
         * not only once the channel has filled up (B1). */
        deliver_pending(l);
}

int m0__loop_run_once(struct m0_loop *l, int timeout_ms)
{
        /* No more events than a turn takes items: epoll reports the ready ones it leaves out
         * next time, in rotation (level-triggered), so they need no place on the run queue. */
        struct epoll_event evs[128];
        uint32_t max = l->host->cfg.turn_items;
        int n = epoll_wait(l->epfd, evs,
                           max < M0__ARRAY_SIZE(evs) ? (int)max : (int)M0__ARRAY_SIZE(evs),
                           m0__list_empty(&l->runq) ? timeout_ms : 0);
        if (n < 0)
                return errno == EINTR ? 0 : -errno;
        l->now_ms = m0__now_ms();
        l->turn_end_ms = turn_clock_ms() + l->turn_budget_ms;
        l->turn_served = false;
        l->turn_left = l->host->cfg.turn_items;
        m0__loop_date(l);
        serve_queue(l);
        for (int i = 0; i < n; i++) {
                void *p = evs[i].data.ptr;
                if (p == &tag_mailbox) {
                        drain_mailbox(l);
                } else if (p == &tag_journal) {
                        m0__journal_flush(l);
                } else if (evs[i].data.u64 & LISTENER_BIT) {
                        /* A batch of accepts (at most 64) is one item; in a full turn the
                         * listener waits for epoll's next report. */
                        size_t li = (size_t)(evs[i].data.u64 >> 1);
                        if (li < l->nlisten && l->listen_fds[li] >= 0 && m0__turn_take(l))
                                m0__accept_ready(l, l->listen_fds[li]);
                } else {
                        serve_event(l, p, evs[i].events);
                }
        }
        if (!l->src_task[M0_TASK_TIMERS].queued)
                fire_timers(l); /* else their place on the run queue comes first */
        if (l->host->cfg.sse_heartbeat_ms && l->now_ms >= l->next_heartbeat_ms) {
                if (!m0__list_empty(&l->streams))
                        m0__sse_heartbeat(l);
                l->next_heartbeat_ms = l->now_ms + l->host->cfg.sse_heartbeat_ms;
        }
        if (l->stopping && l->now_ms >= l->drain_deadline_ms)
                cut_all(l);
        m0__conn_reap(l);
        if (l->host->tick_ms && l->host->app->tick && l->now_ms >= l->next_tick_ms) {
                l->host->app->tick(l->thread.state);
                l->next_tick_ms = l->now_ms + l->host->tick_ms;
        }
        deliver_pending(l);
        /* The turn's access log entries leave together in one datagram, off every request's
         * path (D81, D98); while journald's queue is full they wait for EPOLLOUT instead. */
        if (l->journal.n && !l->journal.waiting)
                m0__journal_flush(l);
        /* W1: the heartbeat says a whole turn, bounded, was done; a turn held by a handler that
         * does not return does not beat. */
        atomic_fetch_add_explicit(&l->heartbeat, 1, memory_order_relaxed);
        return n;
}

/*
 * A stopping loop leaves once it holds no connection and none can still reach it: every loop
 * has stopped accepting, and each hand-off raised this loop's load before it was posted (L4).
 * Past the drain's bound it leaves anyway: a loop that never read its stop keeps `accepting`
 * up, and the coordinator names it.
 */
static bool drained(struct m0_loop *l)
{
        if (!l->stopping || atomic_load(&l->load) != 0)
                return false;
        return atomic_load(&l->host->accepting) == 0 || l->now_ms >= l->drain_deadline_ms;
}

static int serve(struct m0_loop *l)
{
        for (size_t i = 0; i < l->nlisten; i++) {
                struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE,
                                         .data.u64 = ((uint64_t)i << 1) | LISTENER_BIT};
                if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->listen_fds[i], &ev) < 0)
                        return -errno;
        }
        m0__log(M0_LOG_INFO, l->index, NULL, "Event loop started (%zu listener%s)", l->nlisten,
                l->nlisten == 1 ? "" : "s");
        l->next_tick_ms = m0__now_ms() + l->host->tick_ms;
        while (!drained(l)) {
                int r = m0__loop_run_once(l, next_timeout(l));
                if (r < 0)
                        return r;
        }
        return 0;
}

void m0__loop_request_get(struct m0_loop *l, char *out, size_t len)
{
        pthread_mutex_lock(&l->cur_lock);
        snprintf(out, len, "%s", l->cur);
        pthread_mutex_unlock(&l->cur_lock);
}

/* At exit each loop says what it did (L4: passed and received among them). */
static void log_counts(const struct m0_loop *l)
{
        m0__log(M0_LOG_INFO, l->index, NULL,
                "loop stopped: accepted %llu, passed %llu, received %llu, requests %llu, "
                "connections refused %llu, slow streams closed %llu, streams closed unread at the "
                "stop %llu, streams closed at a full channel %llu, frames a full channel refused "
                "%llu, transient frames a full channel dropped %llu, Last-Event-IDs past the "
                "newest id %llu",
                (unsigned long long)l->accepted, (unsigned long long)l->passed,
                (unsigned long long)l->received, (unsigned long long)l->requests,
                (unsigned long long)l->refused_conns, (unsigned long long)l->streams_cut,
                (unsigned long long)l->streams_unread, (unsigned long long)l->chan_closed,
                (unsigned long long)l->chan_refused, (unsigned long long)l->chan_dropped,
                (unsigned long long)l->replays_ahead);
}

void *m0__loop_main(void *arg)
{
        struct m0_loop *l = arg;
        struct m0_host *h = l->host;
        if (m0__handler_begin(h, &l->thread, true)) {
                int r = serve(l);
                if (r < 0) {
                        l->failed = true;
                        m0__log(M0_LOG_CRIT, l->index, M0_MID_LOOP_CRASHED, "loop %d failed: %s",
                                l->index, strerror(-r));
                }
                m0__pool_stop(&l->pool);
                if (l->observe & M0_OBSERVE_JOURNAL)
                        m0__journal_finish(l, l->drain_deadline_ms);
                log_counts(l);
        }
        m0__handler_end(h, &l->thread);
        /* Tell the coordinator a loop ended (L5); it also joins with a bound, so a failed
         * write leaves nothing to do. */
        uint64_t one = 1;
        ssize_t w = write(h->done_fd, &one, sizeof(one));
        (void)w;
        return NULL;
}
