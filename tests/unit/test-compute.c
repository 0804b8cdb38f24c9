/* SPDX-License-Identifier: MIT */
/* test-compute.c: m0_parallel_for inline and over the compute pool, its errors and its stop (P4). */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "compute.h"
#include "host-private.h"
#include "unit.h"

/* Every wait below is on the test's own barrier or a join; the bound only keeps a failure from
 * hanging. */
#define WAIT_S 10
#define MANY 10000

static struct m0_host *host;

static struct timespec after_ms(long ms)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        return ts;
}

/* The host as far as compute.c reads it: the knob, and the struct m0_compute it fills. */
static void setup(void)
{
        host = calloc(1, sizeof(*host));
        ck_assert_ptr_nonnull(host);
}

/* The host keeps the compute pool's arrays for the life of the process; the test gives them
 * back once the threads are joined. */
static void teardown(void)
{
        m0__compute_free(&host->compute);
        free(host);
}

static void start(unsigned nthreads)
{
        host->cfg.compute_threads = nthreads;
        ck_assert_int_eq(m0__compute_start(&host->compute, host->cfg.compute_threads), 0);
        ck_assert_int_eq(host->compute.nthreads, (int)nthreads);
}

static void stop(void)
{
        m0__compute_stop(&host->compute);
        struct timespec dl = after_ms(WAIT_S * 1000);
        ck_assert_int_eq(m0__compute_join(&host->compute, &dl), 0);
}

/* Which thread ran each item, and how many times it ran. */
struct record {
        size_t n;
        atomic_int *count;
        pthread_t *who;
        atomic_size_t order_next;
        size_t *order; /* item indices in the order they ran (meaningful inline) */
        int fail_at[3];
        int fail_with[3];
};

static void record_init(struct record *r, size_t n)
{
        memset(r, 0, sizeof(*r));
        r->n = n;
        r->count = calloc(n ? n : 1, sizeof(*r->count));
        r->who = calloc(n ? n : 1, sizeof(*r->who));
        r->order = calloc(n ? n : 1, sizeof(*r->order));
        ck_assert(r->count && r->who && r->order);
        for (int k = 0; k < 3; k++)
                r->fail_at[k] = -1;
}

static void record_free(struct record *r)
{
        free(r->count);
        free(r->who);
        free(r->order);
}

static int body(size_t i, void *ctx)
{
        struct record *r = ctx;
        atomic_fetch_add(&r->count[i], 1);
        r->who[i] = pthread_self();
        r->order[atomic_fetch_add(&r->order_next, 1)] = i;
        for (int k = 0; k < 3; k++)
                if (r->fail_at[k] == (int)i)
                        return r->fail_with[k];
        return 0;
}

static void assert_each_once(const struct record *r)
{
        for (size_t i = 0; i < r->n; i++)
                ck_assert_msg(atomic_load(&r->count[i]) == 1, "item %zu ran %d times", i,
                              atomic_load(&r->count[i]));
}

/* Which of the caller (0) and the compute threads (1, 2, ...) is `t`; -1 for none of them. */
static int runner(pthread_t t, pthread_t caller)
{
        if (pthread_equal(t, caller))
                return 0;
        for (int k = 0; k < host->compute.nthreads; k++)
                if (pthread_equal(t, host->compute.threads[k].id))
                        return 1 + k;
        return -1;
}

/* A barrier of `want` that gives up after WAIT_S: items that must run at the same time meet in
 * it, and a pool that ran them one after the other fails with -ETIMEDOUT instead of hanging. */
struct meet {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        int arrived, want;
};

static int meet_wait(struct meet *m)
{
        struct timespec dl = after_ms(WAIT_S * 1000);
        int r = 0;
        pthread_mutex_lock(&m->lock);
        m->arrived++;
        pthread_cond_broadcast(&m->cond);
        while (m->arrived < m->want && r == 0)
                r = pthread_cond_timedwait(&m->cond, &m->lock, &dl);
        bool met = m->arrived >= m->want;
        pthread_mutex_unlock(&m->lock);
        return met ? 0 : -ETIMEDOUT;
}

/* ---- inline ---- */

START_TEST(without_a_pool_every_item_runs_on_the_caller_in_order)
{
        struct record r;
        record_init(&r, 5);
        ck_assert_int_eq(m0_parallel_for(5, body, &r), 0);
        assert_each_once(&r);
        for (size_t i = 0; i < 5; i++) {
                ck_assert(pthread_equal(r.who[i], pthread_self()));
                ck_assert_uint_eq(r.order[i], i);
        }
        record_free(&r);
}
END_TEST

START_TEST(inline_returns_the_first_error_and_runs_every_item)
{
        struct record r;
        record_init(&r, 6);
        r.fail_at[0] = 1, r.fail_with[0] = -EIO;
        r.fail_at[1] = 3, r.fail_with[1] = -ENOSPC;
        r.fail_at[2] = 4, r.fail_with[2] = 7; /* positive: not a failure */
        ck_assert_int_eq(m0_parallel_for(6, body, &r), -EIO);
        assert_each_once(&r);
        record_free(&r);

        record_init(&r, 3);
        r.fail_at[0] = 2, r.fail_with[0] = 1;
        ck_assert_int_eq(m0_parallel_for(3, body, &r), 0);
        record_free(&r);
}
END_TEST

START_TEST(null_body_is_einval)
{
        ck_assert_int_eq(m0_parallel_for(3, NULL, NULL), -EINVAL);
        ck_assert_int_eq(m0_parallel_for(0, NULL, NULL), -EINVAL);
        start(2);
        ck_assert_int_eq(m0_parallel_for(3, NULL, NULL), -EINVAL);
        stop();
}
END_TEST

/* M0_COMPUTE_THREADS=0: no thread, every call inline, nothing to join. */
START_TEST(zero_compute_threads_runs_inline)
{
        start(0);
        ck_assert_ptr_null(host->compute.threads);
        struct record r;
        record_init(&r, 40);
        ck_assert_int_eq(m0_parallel_for(40, body, &r), 0);
        assert_each_once(&r);
        for (size_t i = 0; i < 40; i++)
                ck_assert_uint_eq(r.order[i], i);
        record_free(&r);
        stop();
}
END_TEST

/* ---- over the pool ---- */

START_TEST(pool_runs_every_item_exactly_once)
{
        start(2);
        struct record r;
        record_init(&r, MANY);
        ck_assert_int_eq(m0_parallel_for(MANY, body, &r), 0);
        assert_each_once(&r);
        for (size_t i = 0; i < MANY; i++)
                ck_assert_msg(runner(r.who[i], pthread_self()) >= 0,
                              "item %zu ran on a thread that is neither the caller nor the pool's",
                              i);
        record_free(&r);
        stop();
}
END_TEST

START_TEST(pool_zero_and_one_item)
{
        start(2);
        struct record r;
        record_init(&r, 0);
        ck_assert_int_eq(m0_parallel_for(0, body, &r), 0);
        ck_assert_uint_eq(atomic_load(&r.order_next), 0);
        record_free(&r);

        record_init(&r, 1);
        r.fail_at[0] = 0, r.fail_with[0] = -EDOM;
        ck_assert_int_eq(m0_parallel_for(1, body, &r), -EDOM);
        assert_each_once(&r);
        ck_assert(pthread_equal(r.who[0], pthread_self())); /* one item is not worth a hand-off */
        record_free(&r);
        stop();
}
END_TEST

START_TEST(pool_returns_the_error_and_runs_every_item)
{
        start(2);
        struct record r;
        record_init(&r, MANY);
        r.fail_at[0] = MANY / 2, r.fail_with[0] = -EIO;
        ck_assert_int_eq(m0_parallel_for(MANY, body, &r), -EIO);
        assert_each_once(&r);
        record_free(&r);

        /* several items failing alike: that error, and still every item */
        record_init(&r, MANY);
        for (int k = 0; k < 3; k++)
                r.fail_at[k] = 1 + k * (MANY / 3), r.fail_with[k] = -ENOSPC;
        ck_assert_int_eq(m0_parallel_for(MANY, body, &r), -ENOSPC);
        assert_each_once(&r);
        record_free(&r);

        /* positive returns are no failure */
        record_init(&r, 64);
        r.fail_at[0] = 10, r.fail_with[0] = 3;
        ck_assert_int_eq(m0_parallel_for(64, body, &r), 0);
        assert_each_once(&r);
        record_free(&r);
        stop();
}
END_TEST

struct together {
        struct meet meet;
        pthread_t who[3];
        int rc[3];
};

static int meet_body(size_t i, void *ctx)
{
        struct together *t = ctx;
        t->who[i] = pthread_self();
        t->rc[i] = meet_wait(&t->meet);
        return t->rc[i];
}

/* Three items that wait for each other: only the caller and both compute threads at once can
 * finish them, so the pool really runs items side by side. */
START_TEST(items_run_on_three_threads_at_once)
{
        start(2);
        struct together t = {.meet = {.want = 3}};
        pthread_mutex_init(&t.meet.lock, NULL);
        pthread_cond_init(&t.meet.cond, NULL);
        ck_assert_int_eq(m0_parallel_for(3, meet_body, &t), 0);
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(t.rc[i], 0);
        int seen[3] = {0};
        for (int i = 0; i < 3; i++) {
                int k = runner(t.who[i], pthread_self());
                ck_assert_int_ge(k, 0);
                seen[k]++;
        }
        ck_assert_int_eq(seen[0], 1);
        ck_assert_int_eq(seen[1], 1);
        ck_assert_int_eq(seen[2], 1);
        pthread_cond_destroy(&t.meet.cond);
        pthread_mutex_destroy(&t.meet.lock);
        stop();
}
END_TEST

#define INNER 2000

struct nest {
        struct meet meet;
        pthread_t outer[2];
        pthread_t inner[2][INNER];
        int met[2];
};

struct nest_item {
        struct nest *n;
        size_t outer;
};

static int inner_body(size_t i, void *ctx)
{
        struct nest_item *it = ctx;
        it->n->inner[it->outer][i] = pthread_self();
        /* Some work (milliseconds in all, longer than a time slice on a loaded machine), so
         * that the idle thread of the pool, woken by a nested call that was not run inline,
         * would take some of the items: this test's assertions could not fail otherwise. */
        volatile unsigned x = 0;
        for (unsigned k = 0; k < 20000; k++)
                x += k;
        return it->outer == 1 && i == 2 ? -EXDEV : 0;
}

static int outer_body(size_t i, void *ctx)
{
        struct nest *n = ctx;
        n->outer[i] = pthread_self();
        /* both outer items run at once, on two threads; the third is idle, free to take
         * nested items were they queued */
        n->met[i] = meet_wait(&n->meet);
        struct nest_item it = {.n = n, .outer = i};
        int r = m0_parallel_for(INNER, inner_body, &it);
        return n->met[i] < 0 ? n->met[i] : r;
}

/* A call from inside a body runs inline on that body's thread, and its error comes out. */
START_TEST(nested_call_runs_inline)
{
        start(2);
        struct nest *n = calloc(1, sizeof(*n));
        ck_assert_ptr_nonnull(n);
        n->meet.want = 2;
        pthread_mutex_init(&n->meet.lock, NULL);
        pthread_cond_init(&n->meet.cond, NULL);
        ck_assert_int_eq(m0_parallel_for(2, outer_body, n), -EXDEV);
        ck_assert(!pthread_equal(n->outer[0], n->outer[1]));
        for (int i = 0; i < 2; i++) {
                ck_assert_int_eq(n->met[i], 0);
                for (int k = 0; k < INNER; k++)
                        ck_assert_msg(pthread_equal(n->inner[i][k], n->outer[i]),
                                      "inner item %d of outer item %d left its thread", k, i);
        }
        pthread_cond_destroy(&n->meet.cond);
        pthread_mutex_destroy(&n->meet.lock);
        free(n);

        /* and a later call from the caller, outside any body, uses the pool again */
        struct together t = {.meet = {.want = 3}};
        pthread_mutex_init(&t.meet.lock, NULL);
        pthread_cond_init(&t.meet.cond, NULL);
        ck_assert_int_eq(m0_parallel_for(3, meet_body, &t), 0);
        pthread_cond_destroy(&t.meet.cond);
        pthread_mutex_destroy(&t.meet.lock);
        stop();
}
END_TEST

/* X1: after the stop every call runs inline, and the threads end: none is a straggler. */
START_TEST(stop_then_calls_run_inline_and_threads_join)
{
        start(2);
        /* before the stop the threads wait for work: a short join finds both still there */
        struct timespec soon = after_ms(50);
        ck_assert_int_eq(m0__compute_join(&host->compute, &soon), 2);

        m0__compute_stop(&host->compute);
        struct record r;
        record_init(&r, 50);
        ck_assert_int_eq(m0_parallel_for(50, body, &r), 0);
        assert_each_once(&r);
        for (size_t i = 0; i < 50; i++) {
                ck_assert(pthread_equal(r.who[i], pthread_self()));
                ck_assert_uint_eq(r.order[i], i);
        }
        record_free(&r);

        struct timespec dl = after_ms(WAIT_S * 1000);
        ck_assert_int_eq(m0__compute_join(&host->compute, &dl), 0);
        ck_assert(!host->compute.threads[0].started && !host->compute.threads[1].started);
        ck_assert_int_eq(m0__compute_join(&host->compute, &dl),
                         0); /* joined threads are not joined again */
}
END_TEST

static Suite *compute_suite(void)
{
        Suite *s = suite_create("compute");
        TCase *tc = tcase_create("inline");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, without_a_pool_every_item_runs_on_the_caller_in_order);
        tcase_add_test(tc, inline_returns_the_first_error_and_runs_every_item);
        tcase_add_test(tc, null_body_is_einval);
        tcase_add_test(tc, zero_compute_threads_runs_inline);
        suite_add_tcase(s, tc);
        tc = tcase_create("pool");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, pool_runs_every_item_exactly_once);
        tcase_add_test(tc, pool_zero_and_one_item);
        tcase_add_test(tc, pool_returns_the_error_and_runs_every_item);
        tcase_add_test(tc, items_run_on_three_threads_at_once);
        tcase_add_test(tc, nested_call_runs_inline);
        tcase_add_test(tc, stop_then_calls_run_inline_and_threads_join);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(compute_suite());
}
