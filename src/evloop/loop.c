/* SPDX-License-Identifier: MIT */
/* loop.c: one event loop on one thread: its epoll set, its mailbox, its timers, its turns (L1, L2,
 * D41, LY1). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "loop.h"
#include "util.h"

static void mailbox_ready(struct m0_io *io, uint32_t events);
static void timers_run(struct m0_task *t, uint32_t events);
static void mailbox_run(struct m0_task *t, uint32_t events);

void m0__loop_prepare(struct m0_loop *l, int index, const struct m0_loop_ops *ops)
{
        memset(l, 0, sizeof(*l));
        l->index = index;
        l->ops = ops;
        l->epfd = -1;
        l->mb_fd = -1;
        l->mb_io.ready = mailbox_ready;
        l->timers_task.run = timers_run;
        l->mailbox_task.run = mailbox_run;
        l->turn_items = 1;
        l->wake_every_ms = 1000;
        pthread_mutex_init(&l->mb_lock, NULL);
}

int m0__loop_build(struct m0_loop *l)
{
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (l->epfd < 0)
                return -errno;
        l->mb_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (l->mb_fd < 0)
                return -errno;
        int r = m0__io_add(l, &l->mb_io, l->mb_fd, EPOLLIN);
        if (r < 0)
                return r;
        l->now_ms = m0__now_ms();
        m0__loop_date(l);
        return 0;
}

void m0__loop_destroy(struct m0_loop *l)
{
        struct m0_link *n;
        /* what the loop took and had not handled comes first, as it would have */
        m0__list_append(&l->mb_got, &l->mb);
        while ((n = m0__list_pop(&l->mb_got))) {
                struct m0_msg *m = M0__CONTAINER_OF(n, struct m0_msg, link);
                if (m->drop)
                        m->drop(l, m);
                free(m);
        }
        if (l->mb_fd >= 0)
                close(l->mb_fd);
        if (l->epfd >= 0)
                close(l->epfd);
        l->mb_fd = l->epfd = -1;
        pthread_mutex_destroy(&l->mb_lock);
}

/* ---- descriptors ---- */

int m0__io_add(struct m0_loop *l, struct m0_io *io, int fd, uint32_t events)
{
        struct epoll_event e = {.events = events, .data.ptr = io};
        return epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &e) < 0 ? -errno : 0;
}

int m0__io_mod(struct m0_loop *l, struct m0_io *io, int fd, uint32_t events)
{
        struct epoll_event e = {.events = events, .data.ptr = io};
        return epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &e) < 0 ? -errno : 0;
}

void m0__io_del(struct m0_loop *l, int fd)
{
        (void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* ---- the mailbox ---- */

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

void m0__loop_wake(struct m0_loop *l)
{
        uint64_t one = 1;
        ssize_t w = write(l->mb_fd, &one, sizeof(one));
        (void)w; /* EAGAIN: the counter is already non-zero, the loop wakes */
}

/* The messages the loop has taken, in order, a turn's worth (D85); the rest keep their place. */
static void handle_messages(struct m0_loop *l)
{
        struct m0_link *n;
        while (l->mb_got.head) {
                if (!m0__turn_take(l)) {
                        m0__turn_defer(l, &l->mailbox_task, 0);
                        return;
                }
                n = m0__list_pop(&l->mb_got);
                struct m0_msg *m = M0__CONTAINER_OF(n, struct m0_msg, link);
                m->handle(l, m);
                free(m);
        }
}

static void mailbox_run(struct m0_task *t, uint32_t events)
{
        (void)events;
        handle_messages(M0__CONTAINER_OF(t, struct m0_loop, mailbox_task));
}

/* The mailbox's eventfd: what was posted joins what the loop took before, behind it. */
static void mailbox_ready(struct m0_io *io, uint32_t events)
{
        (void)events;
        struct m0_loop *l = M0__CONTAINER_OF(io, struct m0_loop, mb_io);
        uint64_t v;
        if (read(l->mb_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                return;
        if (l->ops && l->ops->woken)
                l->ops->woken(l);
        pthread_mutex_lock(&l->mb_lock);
        m0__list_append(&l->mb_got, &l->mb);
        pthread_mutex_unlock(&l->mb_lock);
        if (!l->mailbox_task.queued)
                handle_messages(l);
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

/* ---- timers ---- */

void m0__timer_unfile(struct m0_loop *l, struct m0_timer *t)
{
        if (t->cls == 0)
                return;
        m0__list_unlink(&l->timers[t->cls], &t->link);
        t->cls = 0;
}

void m0__timer_file(struct m0_loop *l, struct m0_timer *t, uint8_t cls, uint64_t deadline)
{
        /* Filed already where it would go: a WebSocket's settle files its unchanged idle
         * deadline after every send, and the walk back from the tail past the others would
         * make a fan-out to N sockets cost N² (D218). */
        if (t->cls == cls && t->deadline == deadline)
                return;
        m0__timer_unfile(l, t);
        struct m0_list *q = &l->timers[cls];
        struct m0_link *before = q->tail;
        while (before && M0__CONTAINER_OF(before, struct m0_timer, link)->deadline > deadline)
                before = before->prev;
        t->cls = cls;
        t->deadline = deadline;
        m0__list_insert_after(q, before, &t->link);
}

/* The expired timers, oldest class first, a turn's worth (D85); the rest stay where they are,
 * expired, and the timers' place on the run queue brings them back. */
static void fire_timers(struct m0_loop *l)
{
        for (int cls = 1; cls < M0_TIMER_CLASSES; cls++) {
                struct m0_timer *t;
                while ((t = M0__LIST_FIRST(&l->timers[cls], struct m0_timer, link)) &&
                       t->deadline <= l->now_ms) {
                        if (!m0__turn_take(l)) {
                                m0__turn_defer(l, &l->timers_task, 0);
                                return;
                        }
                        t->fire(t);
                }
        }
}

static void timers_run(struct m0_task *t, uint32_t events)
{
        (void)events;
        fire_timers(M0__CONTAINER_OF(t, struct m0_loop, timers_task));
}

int m0__loop_timeout(struct m0_loop *l)
{
        uint64_t next = UINT64_MAX;
        for (int cls = 1; cls < M0_TIMER_CLASSES; cls++) {
                struct m0_timer *t = M0__LIST_FIRST(&l->timers[cls], struct m0_timer, link);
                if (t && t->deadline < next)
                        next = t->deadline;
        }
        if (l->ops && l->ops->next_deadline) {
                uint64_t own = l->ops->next_deadline(l);
                if (own < next)
                        next = own;
        }
        uint64_t cap = l->now_ms + l->wake_every_ms;
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

bool m0__turn_open(struct m0_loop *l)
{
        return !l->turn_served || (l->turn_left && !m0__turn_spent(l));
}

bool m0__turn_take(struct m0_loop *l)
{
        if (!m0__turn_open(l))
                return false;
        l->turn_served = true;
        if (l->turn_left)
                l->turn_left--;
        return true;
}

void m0__turn_defer(struct m0_loop *l, struct m0_task *t, uint32_t events)
{
        t->events |= events;
        if (t->queued)
                return;
        t->queued = true;
        m0__list_push(&l->runq, &t->link);
        l->runq_len++;
}

void m0__turn_forget(struct m0_loop *l, struct m0_task *t)
{
        t->events = 0;
        if (!t->queued)
                return;
        m0__list_unlink(&l->runq, &t->link);
        t->queued = false;
        l->runq_len--;
}

/* Serve what the last turn left, first, in order: the entries queued when this turn began (the
 * first of them whatever the budget says), each a connection with the events it was left with
 * or a source with a batch left (D41, D85). */
static void serve_queue(struct m0_loop *l)
{
        size_t n = l->runq_len;
        struct m0_link *q;
        for (size_t i = 0; i < n && (q = l->runq.head) && m0__turn_open(l); i++) {
                struct m0_task *t = M0__CONTAINER_OF(q, struct m0_task, link);
                uint32_t events = t->events;
                m0__turn_forget(l, t);
                t->run(t, events);
        }
}

int m0__loop_run_once(struct m0_loop *l, int timeout_ms)
{
        /* No more events than a turn takes items: epoll reports the ready ones it leaves out
         * next time, in rotation (level-triggered), so they need no place on the run queue. */
        struct epoll_event evs[128];
        uint32_t max = l->turn_items;
        int n = epoll_wait(l->epfd, evs,
                           max < M0__ARRAY_SIZE(evs) ? (int)max : (int)M0__ARRAY_SIZE(evs),
                           m0__list_empty(&l->runq) ? timeout_ms : 0);
        if (n < 0)
                return errno == EINTR ? 0 : -errno;
        l->now_ms = m0__now_ms();
        l->turn_end_ms = turn_clock_ms() + l->turn_budget_ms;
        l->turn_served = false;
        l->turn_left = l->turn_items;
        m0__loop_date(l);
        serve_queue(l);
        for (int i = 0; i < n; i++) {
                struct m0_io *io = evs[i].data.ptr;
                io->ready(io, evs[i].events);
        }
        if (!l->timers_task.queued)
                fire_timers(l); /* else their place on the run queue comes first */
        if (l->ops && l->ops->turn_end)
                l->ops->turn_end(l);
        /* W1: the heartbeat says a whole turn, bounded, was done; a turn held by a handler that
         * does not return does not beat. */
        atomic_fetch_add_explicit(&l->heartbeat, 1, memory_order_relaxed);
        return n;
}
