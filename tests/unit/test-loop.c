/* SPDX-License-Identifier: MIT */
/* test-loop.c: the event loop alone (LY1): descriptors and their callbacks, messages that carry
 * their handler, timers in deadline order, the run queue and the owner's hooks. No HTTP. */
#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop.h"
#include "unit.h"
#include "util.h"

static struct m0_loop loop;
static int turn_ends, woken;
static uint64_t own_deadline = UINT64_MAX;

static void on_woken(struct m0_loop *l)
{
        ck_assert_ptr_eq(l, &loop);
        woken++;
}

static void on_turn_end(struct m0_loop *l)
{
        ck_assert_ptr_eq(l, &loop);
        turn_ends++;
}

static uint64_t on_next_deadline(struct m0_loop *l)
{
        (void)l;
        return own_deadline;
}

static const struct m0_loop_ops ops = {
        .woken = on_woken, .turn_end = on_turn_end, .next_deadline = on_next_deadline};

static void setup(void)
{
        turn_ends = woken = 0;
        own_deadline = UINT64_MAX;
        m0__loop_prepare(&loop, 3, &ops);
        loop.turn_items = 64;
        loop.turn_budget_ms = 1000;
        ck_assert_int_eq(m0__loop_build(&loop), 0);
}

static void teardown(void)
{
        m0__loop_destroy(&loop);
}

/* ---- descriptors ---- */

struct end {
        struct m0_io io;
        int fd;
        int calls;
        uint32_t events;
};

static void end_ready(struct m0_io *io, uint32_t events)
{
        struct end *e = M0__CONTAINER_OF(io, struct end, io);
        e->calls++;
        e->events = events;
        char b[16];
        ck_assert_int_eq(read(e->fd, b, sizeof(b)), 1);
}

START_TEST(a_ready_descriptor_calls_the_callback_it_was_registered_with)
{
        int sv[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
        struct end e = {.io.ready = end_ready, .fd = sv[0]};
        ck_assert_int_eq(m0__io_add(&loop, &e.io, sv[0], EPOLLIN), 0);
        ck_assert_int_eq(m0__loop_run_once(&loop, 0), 0);
        ck_assert_int_eq(e.calls, 0);
        ck_assert_int_eq(turn_ends, 1);
        ck_assert_uint_eq(atomic_load(&loop.heartbeat), 1);
        ck_assert_int_eq(write(sv[1], "x", 1), 1);
        ck_assert_int_eq(m0__loop_run_once(&loop, 1000), 1);
        ck_assert_int_eq(e.calls, 1);
        ck_assert_uint_eq(e.events, EPOLLIN);
        ck_assert_int_eq(turn_ends, 2);
        /* no interest: a write is not reported; removed: neither */
        ck_assert_int_eq(m0__io_mod(&loop, &e.io, sv[0], 0), 0);
        ck_assert_int_eq(write(sv[1], "y", 1), 1);
        ck_assert_int_eq(m0__loop_run_once(&loop, 0), 0);
        m0__io_del(&loop, sv[0]);
        ck_assert_int_eq(m0__io_mod(&loop, &e.io, sv[0], EPOLLIN), -ENOENT);
        ck_assert_int_eq(m0__loop_run_once(&loop, 0), 0);
        ck_assert_int_eq(e.calls, 1);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

/* ---- messages ---- */

static char order[16];
static size_t norder;

static void handle_a(struct m0_loop *l, struct m0_msg *m)
{
        ck_assert_ptr_eq(l, &loop);
        order[norder++] = *(const char *)m->arg;
}

static void drop_b(struct m0_loop *l, struct m0_msg *m)
{
        ck_assert_ptr_eq(l, &loop);
        order[norder++] = (char)('A' + m->fd);
}

static struct m0_msg *msg(m0_msg_fn *handle, m0_msg_fn *drop, int fd, const char *arg)
{
        struct m0_msg *m = calloc(1, sizeof(*m));
        ck_assert_ptr_nonnull(m);
        *m = (struct m0_msg){.handle = handle, .drop = drop, .fd = fd, .arg = (void *)arg};
        return m;
}

START_TEST(each_message_runs_its_own_handler_in_the_order_posted)
{
        norder = 0;
        ck_assert_int_eq(m0__loop_post(&loop, msg(handle_a, NULL, -1, "1")), 0);
        ck_assert_int_eq(m0__loop_post(&loop, msg(handle_a, NULL, -1, "2")), 0);
        ck_assert_int_eq(m0__loop_post(&loop, msg(handle_a, NULL, -1, "3")), 0);
        ck_assert_int_eq(m0__loop_run_once(&loop, 1000), 1); /* one eventfd wake-up */
        ck_assert_int_eq(woken, 1);
        ck_assert_uint_eq(norder, 3);
        ck_assert_int_eq(memcmp(order, "123", 3), 0);
}
END_TEST

/* A turn of two items takes two messages; the third keeps its place on the run queue and comes
 * first in the next turn, which does not sleep (D85). */
START_TEST(messages_past_a_turns_items_wait_their_place)
{
        norder = 0;
        loop.turn_items = 2;
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(m0__loop_post(&loop, msg(handle_a, NULL, -1, "abc" + i)), 0);
        ck_assert_int_eq(m0__loop_run_once(&loop, 1000), 1);
        ck_assert_uint_eq(norder, 2);
        ck_assert(loop.mailbox_task.queued);
        ck_assert_uint_eq(loop.runq_len, 1);
        ck_assert_int_eq(m0__loop_run_once(&loop, 60000), 0);
        ck_assert_uint_eq(norder, 3);
        ck_assert_int_eq(memcmp(order, "abc", 3), 0);
        ck_assert(!loop.mailbox_task.queued);
        ck_assert_uint_eq(loop.runq_len, 0);
}
END_TEST

START_TEST(messages_the_loop_never_handled_are_dropped_by_their_own_drop)
{
        norder = 0;
        ck_assert_int_eq(m0__loop_post(&loop, msg(handle_a, drop_b, 1, "x")), 0);
        ck_assert_int_eq(m0__loop_post(&loop, msg(handle_a, NULL, 5, "y")), 0);
        ck_assert_int_eq(m0__loop_post(&loop, msg(handle_a, drop_b, 2, "z")), 0);
        m0__loop_destroy(&loop);
        ck_assert_uint_eq(norder, 2);
        ck_assert_int_eq(memcmp(order, "BC", 2), 0);
        m0__loop_prepare(&loop, 3, &ops); /* for the teardown */
}
END_TEST

/* ---- timers ---- */

struct tm0 {
        struct m0_timer t;
        char name;
};

static void fired(struct m0_timer *t)
{
        struct tm0 *x = M0__CONTAINER_OF(t, struct tm0, t);
        m0__timer_unfile(&loop, t);
        order[norder++] = x->name;
}

START_TEST(expired_timers_fire_by_class_in_deadline_order)
{
        norder = 0;
        uint64_t now = loop.now_ms;
        struct tm0 a = {.t.fire = fired, .name = 'a'}, b = {.t.fire = fired, .name = 'b'},
                   c = {.t.fire = fired, .name = 'c'}, d = {.t.fire = fired, .name = 'd'},
                   e = {.t.fire = fired, .name = 'e'};
        m0__timer_file(&loop, &a.t, 2, now + 5);
        m0__timer_file(&loop, &b.t, 2, now + 1); /* steps back before a */
        m0__timer_file(&loop, &c.t, 1, now + 3);
        m0__timer_file(&loop, &d.t, 2, now + 100000); /* not yet */
        m0__timer_file(&loop, &e.t, 3, now + 2);
        m0__timer_unfile(&loop, &e.t);
        ck_assert_uint_eq(e.t.cls, 0);
        ck_assert_ptr_eq(loop.timers[2].head, &b.t.link);
        /* the earliest deadline bounds the wait: 1 ms */
        ck_assert_int_le(m0__loop_timeout(&loop), 1);
        usleep(20 * 1000);
        ck_assert_int_eq(m0__loop_run_once(&loop, 0), 0);
        ck_assert_uint_eq(norder, 3);
        ck_assert_int_eq(memcmp(order, "cba", 3), 0);
        ck_assert_uint_eq(d.t.cls, 2);
        m0__timer_unfile(&loop, &d.t);
}
END_TEST

/* D218: a timer filed again in its class with its deadline stays where it is, before the
 * others of the same deadline filed after it; one moved by its deadline goes to its place. */
START_TEST(a_timer_filed_again_with_its_deadline_keeps_its_place)
{
        uint64_t now = loop.now_ms;
        struct tm0 a = {.t.fire = fired, .name = 'a'}, b = {.t.fire = fired, .name = 'b'},
                   c = {.t.fire = fired, .name = 'c'};
        m0__timer_file(&loop, &a.t, 2, now + 1000);
        m0__timer_file(&loop, &b.t, 2, now + 1000);
        m0__timer_file(&loop, &c.t, 2, now + 1000);
        m0__timer_file(&loop, &a.t, 2, now + 1000);
        ck_assert_ptr_eq(loop.timers[2].head, &a.t.link);
        ck_assert_ptr_eq(loop.timers[2].tail, &c.t.link);
        m0__timer_file(&loop, &a.t, 2, now + 1001); /* a later deadline: behind the others */
        ck_assert_ptr_eq(loop.timers[2].head, &b.t.link);
        ck_assert_ptr_eq(loop.timers[2].tail, &a.t.link);
        m0__timer_file(&loop, &c.t, 1, now + 1000); /* another class */
        ck_assert_uint_eq(c.t.cls, 1);
        ck_assert_ptr_eq(loop.timers[2].tail, &a.t.link);
        m0__timer_unfile(&loop, &a.t);
        m0__timer_unfile(&loop, &b.t);
        m0__timer_unfile(&loop, &c.t);
}
END_TEST

START_TEST(the_wait_is_bounded_by_the_owners_deadline_and_the_wake_bound)
{
        loop.wake_every_ms = 700;
        ck_assert_int_eq(m0__loop_timeout(&loop), 700);
        own_deadline = loop.now_ms + 40;
        ck_assert_int_eq(m0__loop_timeout(&loop), 40);
        own_deadline = loop.now_ms;
        ck_assert_int_eq(m0__loop_timeout(&loop), 0);
}
END_TEST

/* ---- the run queue ---- */

struct job0 {
        struct m0_task t;
        int runs;
        uint32_t events;
};

static void job_run(struct m0_task *t, uint32_t events)
{
        struct job0 *j = M0__CONTAINER_OF(t, struct job0, t);
        j->runs++;
        j->events = events;
}

START_TEST(a_deferred_task_runs_next_turn_with_the_events_it_gathered)
{
        struct job0 j = {.t.run = job_run};
        m0__turn_defer(&loop, &j.t, EPOLLIN);
        m0__turn_defer(&loop, &j.t, EPOLLOUT); /* once on the queue, its events add up */
        ck_assert_uint_eq(loop.runq_len, 1);
        ck_assert_int_eq(m0__loop_run_once(&loop, 60000), 0); /* no sleep with work queued */
        ck_assert_int_eq(j.runs, 1);
        ck_assert_uint_eq(j.events, EPOLLIN | EPOLLOUT);
        ck_assert(!j.t.queued);
        m0__turn_defer(&loop, &j.t, EPOLLIN);
        m0__turn_forget(&loop, &j.t);
        ck_assert_uint_eq(loop.runq_len, 0);
        ck_assert_int_eq(m0__loop_run_once(&loop, 0), 0);
        ck_assert_int_eq(j.runs, 1);
}
END_TEST

START_TEST(a_turn_takes_its_items_then_closes)
{
        loop.turn_items = 2;
        loop.turn_left = 2;
        loop.turn_served = false;
        loop.turn_end_ms = UINT64_MAX;
        ck_assert(m0__turn_take(&loop));
        ck_assert(m0__turn_take(&loop));
        ck_assert(!m0__turn_open(&loop));
        ck_assert(!m0__turn_take(&loop));
}
END_TEST

static Suite *loop_suite(void)
{
        Suite *s = suite_create("loop");
        TCase *tc = tcase_create("loop");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, a_ready_descriptor_calls_the_callback_it_was_registered_with);
        tcase_add_test(tc, each_message_runs_its_own_handler_in_the_order_posted);
        tcase_add_test(tc, messages_past_a_turns_items_wait_their_place);
        tcase_add_test(tc, messages_the_loop_never_handled_are_dropped_by_their_own_drop);
        tcase_add_test(tc, expired_timers_fire_by_class_in_deadline_order);
        tcase_add_test(tc, a_timer_filed_again_with_its_deadline_keeps_its_place);
        tcase_add_test(tc, the_wait_is_bounded_by_the_owners_deadline_and_the_wake_bound);
        tcase_add_test(tc, a_deferred_task_runs_next_turn_with_the_events_it_gathered);
        tcase_add_test(tc, a_turn_takes_its_items_then_closes);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(loop_suite());
}
