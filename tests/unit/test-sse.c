/* SPDX-License-Identifier: MIT */
/* test-sse.c: streams on a loop at sse's internal interface: the first bytes, the loop's index of
 * channels and prefixes, delivery of exactly the channels a stream follows, transient events,
 * replay after Last-Event-ID, and a full queue closing exactly the streams that would miss a
 * frame (S1, H9, N1-N5, B2, D45, D74). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "host-private.h"
#include "log.h"
#include "sse.h"
#include "subs.h"
#include "unit.h"

static struct m0_host *host;
static struct m0_hctx *loop;

static void setup_q(uint32_t q_cap)
{
        m0__log_init("test-sse");
        host = calloc(1, sizeof(*host));
        ck_assert_ptr_nonnull(host);
        host->cfg.idle_timeout_ms = 60000;
        host->cfg.max_output_bytes = 1u << 20;
        host->cfg.max_header_fields = 100;
        host->cfg.sse_retry_ms = 2000;
        host->cfg.channel_frames = q_cap;
        host->serve.nloops = 1;
        host->serve.loops = calloc(1, sizeof(*host->serve.loops));
        ck_assert_ptr_nonnull(host->serve.loops);
        loop = &host->serve.loops[0];
        m0__host_link(host);
        ck_assert_int_eq(m0__hctx_init(loop, &host->serve, 0), 0);
        ck_assert_int_eq(m0__bus_init(&host->bus, 1, q_cap, 64, 16u << 20), 0);
        host->bus.wake = m0__bus_wake_loops;
        host->bus.wake_ud = &host->serve;
        m0__bus_global = &host->bus;
}

static void setup(void)
{
        setup_q(64);
}

static void teardown(void)
{
        struct m0_conn *c;
        while ((c = M0__LIST_FIRST(&loop->streams, struct m0_conn, slink)))
                m0__conn_close(c);
        for (int cls = M0_TIMER_IDLE; cls < M0_TIMER_N; cls++)
                while ((c = M0__LIST_FIRST(&loop->loop.timers[cls], struct m0_conn, timer.link)))
                        m0__conn_close(c);
        m0__conn_reap(loop);
        /* every stream gone: the bus follows nothing for this loop any more */
        ck_assert_uint_eq(host->bus.follow_exact.n + host->bus.follow_prefix.n, 0);
        ck_assert_uint_eq(loop->subs.exact.n + loop->subs.prefix.n, 0);
        m0__bus_global = NULL;
        m0__bus_destroy(&host->bus);
        m0__hctx_destroy(loop);
        free(host->serve.loops);
        free(host);
}

struct client {
        int fd;
        struct m0_conn *c;
        char buf[8192];
        size_t len;
};

/* A stream as a handler makes one: its channels subscribed, then m0__sse_begin() as dispatch
 * calls it, and its first bytes sent. `last_id`: a Last-Event-ID header, or NULL. */
static void stream(struct client *cl, const char *const *channels, const char *last_id)
{
        int sv[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        atomic_fetch_add(&loop->load, 1);
        atomic_fetch_add(&host->serve.conns, 1);
        ck_assert_int_eq(m0__conn_admit(loop, sv[0]), 0);
        cl->fd = sv[1];
        cl->len = 0;
        cl->c = M0__LIST_ENTRY(loop->loop.timers[M0_TIMER_IDLE].tail, struct m0_conn, timer.link);
        ck_assert_int_eq(cl->c->tr.fd, sv[0]);
        m0__res_reset(&loop->res);
        ck_assert_int_eq(m0_res_stream(&loop->res), 0);
        for (; channels && *channels; channels++)
                ck_assert_int_eq(m0_res_subscribe(&loop->res, *channels), 0);
        struct m0_header hs[1] = {{"Last-Event-ID", last_id}};
        struct m0_req req = {.method = "GET", .path = "/s", .headers = hs, .nheaders = !!last_id};
        m0__sse_begin(cl->c, &req, &loop->res);
        m0__conn_resume(cl->c);
        /* the head, which the HTTP tests check; the body from here on is this test's */
        char *end = NULL;
        while (!end) {
                struct pollfd p = {.fd = cl->fd, .events = POLLIN};
                ck_assert_int_eq(poll(&p, 1, 5000), 1);
                ssize_t n = read(cl->fd, cl->buf + cl->len, sizeof(cl->buf) - 1 - cl->len);
                ck_assert_int_gt(n, 0);
                cl->len += (size_t)n;
                cl->buf[cl->len] = '\0';
                end = strstr(cl->buf, "\r\n\r\n");
        }
        ck_assert_msg(!strncmp(cl->buf, "HTTP/1.1 200 OK\r\n", 17), "head %s", cl->buf);
        size_t head = (size_t)(end + 4 - cl->buf);
        memmove(cl->buf, cl->buf + head, cl->len - head);
        cl->len -= head;
}

/* Everything the client has now; -1 when the stream ended (EOF) and nothing was left. */
static ssize_t take(struct client *cl, char *out, size_t cap)
{
        bool eof = false;
        for (;;) {
                ssize_t n = read(cl->fd, cl->buf + cl->len, sizeof(cl->buf) - 1 - cl->len);
                if (n > 0) {
                        cl->len += (size_t)n;
                        continue;
                }
                eof = n == 0;
                break;
        }
        ck_assert_uint_lt(cl->len, cap);
        memcpy(out, cl->buf, cl->len);
        out[cl->len] = '\0';
        ssize_t got = (ssize_t)cl->len;
        cl->len = 0;
        return got == 0 && eof ? -1 : got;
}

static void expect(struct client *cl, const char *want)
{
        char got[8192];
        ssize_t n = take(cl, got, sizeof(got));
        ck_assert_int_ge(n, 0);
        ck_assert_bytes(got, (size_t)n, want, strlen(want));
}

static int64_t pub(const char *channel, const char *data)
{
        return m0_publish(channel, NULL, data, 0);
}

/* ---- first bytes (S1, H9) ---- */

START_TEST(first_bytes_are_open_then_retry)
{
        struct client a, b;
        stream(&a, NULL, NULL);
        expect(&a, ": open\n\nretry: 2000\n\n");
        host->cfg.sse_retry_ms = 0;
        stream(&b, (const char *const[]){"c", NULL}, NULL);
        expect(&b, ": open\n\n");
        /* a stream of no channel is one still: heartbeats and the farewell reach it */
        ck_assert_ptr_eq(M0__LIST_FIRST(&loop->streams, struct m0_conn, slink), a.c);
        ck_assert_uint_eq(a.c->nsubs, 0);
        ck_assert_uint_eq(b.c->nsubs, 1);
        ck_assert_int_eq(pub("c", "x"), 1);
        m0__sse_deliver(loop);
        expect(&a, "");
        expect(&b, "id: 1\ndata: x\n\n");
        close(a.fd);
        close(b.fd);
}
END_TEST

START_TEST(subscribe_refuses_what_is_no_channel)
{
        m0__res_reset(&loop->res);
        char c201[202];
        memset(c201, 'c', 201);
        c201[201] = '\0';
        ck_assert_int_eq(m0_res_subscribe(&loop->res, NULL), -EINVAL);
        ck_assert_int_eq(m0_res_subscribe(&loop->res, ""), -EINVAL);
        ck_assert_int_eq(m0_res_subscribe(&loop->res, "a b"), -EINVAL);
        ck_assert_int_eq(m0_res_subscribe(&loop->res, c201), -EINVAL);
        ck_assert(!loop->res.stream);
        host->bus.max_channels = 3;
        ck_assert_int_eq(m0_res_subscribe(&loop->res, "a"), 0);
        ck_assert_int_eq(m0_res_subscribe(&loop->res, "a"), 0); /* once */
        ck_assert_int_eq(m0_res_subscribe(&loop->res, "b*"), 0);
        ck_assert_int_eq(m0_res_subscribe(&loop->res, "*"), 0);
        ck_assert_uint_eq(loop->res.nchans, 3);
        ck_assert(loop->res.stream);
        /* A refusal undoes the stream and its channels: the handler's answer is what the
         * client gets, never a stream missing a channel it asked for (D73). */
        ck_assert_int_eq(m0_res_subscribe(&loop->res, "d"), -ENOSPC);
        ck_assert_uint_eq(loop->res.nchans, 0);
        ck_assert_uint_eq(loop->res.chans.len, 0);
        ck_assert(!loop->res.stream);
        ck_assert_int_eq(m0_res_subscribe(&loop->res, "a"), 0);
        ck_assert_int_eq(m0_res_subscribe(&loop->res, "a b"), -EINVAL);
        ck_assert(!loop->res.stream);
        m0_res pool = {.on_pool = true};
        ck_assert_int_eq(m0_res_subscribe(&pool, "a"), -EPERM);
        ck_assert(pool.stream_refused);
}
END_TEST

/* ---- delivery by index (N1, N5) ---- */

START_TEST(each_stream_gets_exactly_its_channels_once)
{
        struct client cl[4];
        struct client *a = &cl[0], *room = &cl[1], *all = &cl[2], *none = &cl[3];
        stream(a, (const char *const[]){"a", NULL}, NULL);
        stream(room, (const char *const[]){"room:*", NULL}, NULL);
        stream(all, (const char *const[]){"a", "room:*", "*", "room:1", NULL}, NULL);
        stream(none, NULL, NULL);
        for (int i = 0; i < 4; i++)
                (void)take(&cl[i], (char[64]){0}, 64);
        ck_assert_int_eq(pub("a", "1"), 1);
        ck_assert_int_eq(pub("room:1", "2"), 2);
        ck_assert_int_eq(pub("b", "3"), 3);
        ck_assert_int_eq(m0_publish("room:2", "progress", "50%", M0_PUBLISH_TRANSIENT), 0);
        ck_assert(atomic_load(&loop->bus_pending)); /* the publish woke the loop */
        m0__sse_deliver(loop);
        expect(a, "id: 1\ndata: 1\n\n");
        expect(room, "id: 2\ndata: 2\n\nevent: progress\ndata: 50%\n\n");
        expect(all, "id: 1\ndata: 1\n\nid: 2\ndata: 2\n\nid: 3\ndata: 3\n\n"
                    "event: progress\ndata: 50%\n\n");
        expect(none, "");
        /* the index: one follow per key, the streams on it */
        struct m0_key k = {.name = "a", .len = 1, .hash = m0__hash("a", 1)};
        struct m0_follow *f = m0__subs_find(&loop->subs, &k);
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_eq(f->subs.head, &a->c->subs[0].link);
        ck_assert_int_eq(loop->subs.nlens, 2); /* "room:" and "" */
        /* a stream that goes away takes its follows with it; the bus stops queuing them */
        m0__conn_close(room->c);
        m0__conn_close(all->c);
        ck_assert_int_eq(loop->subs.nlens, 0);
        ck_assert_uint_eq(host->bus.follow_prefix.n, 0);
        atomic_store(&loop->bus_pending, false);
        ck_assert_int_eq(pub("room:3", "4"), 4);
        ck_assert(!atomic_load(&loop->bus_pending)); /* nobody here follows it: not woken */
        ck_assert_uint_eq(host->bus.unfollowed, 1);  /* "b" was followed, through "*" */
        for (int i = 0; i < 4; i++)
                close(cl[i].fd);
}
END_TEST

/* A transient event reaches the streams that followed before it, and never a later one. */
START_TEST(a_transient_event_is_for_the_streams_that_followed_before_it)
{
        struct client early, late;
        stream(&early, (const char *const[]){"t", NULL}, NULL);
        ck_assert_int_eq(m0_publish("t", "hb", "", M0_PUBLISH_TRANSIENT), 0);
        stream(&late, (const char *const[]){"t", NULL}, NULL);
        (void)take(&early, (char[64]){0}, 64);
        (void)take(&late, (char[64]){0}, 64);
        m0__sse_deliver(loop);
        expect(&early, "event: hb\ndata: \n\n");
        expect(&late, "");
        close(early.fd);
        close(late.fd);
}
END_TEST

/* ---- replay (N2, N3) ---- */

START_TEST(last_event_id_replays_the_stream_s_channels_in_order)
{
        ck_assert_int_eq(pub("a", "1"), 1);
        ck_assert_int_eq(pub("b", "2"), 2);
        ck_assert_int_eq(pub("c", "3"), 3);
        ck_assert_int_eq(pub("a", "4"), 4);
        struct client r, ahead, none;
        stream(&r, (const char *const[]){"c", "a", NULL}, "1");
        expect(&r, ": open\n\nretry: 2000\n\nid: 3\ndata: 3\n\nid: 4\ndata: 4\n\n");
        stream(&ahead, (const char *const[]){"b", "a", NULL}, "18446744073709551616");
        expect(&ahead, ": open\n\nretry: 2000\n\nid: 1\ndata: 1\n\nid: 2\ndata: 2\n\n"
                       "id: 4\ndata: 4\n\n");
        ck_assert_uint_eq(loop->replays_ahead, 1);
        stream(&none, (const char *const[]){"a", NULL}, "x4");
        expect(&none, ": open\n\nretry: 2000\n\n");
        /* live after the replay: no gap, nothing twice */
        ck_assert_int_eq(pub("a", "5"), 5);
        m0__sse_deliver(loop);
        expect(&r, "id: 5\ndata: 5\n\n");
        expect(&ahead, "id: 5\ndata: 5\n\n");
        expect(&none, "id: 5\ndata: 5\n\n");
        close(r.fd);
        close(ahead.fd);
        close(none.fd);
}
END_TEST

/* ---- a full queue (B2, D45, D74) ---- */

static bool ended(struct client *cl)
{
        char got[8192];
        return take(cl, got, sizeof(got)) == -1 || (cl->len == 0 && take(cl, got, 64) == -1);
}

START_TEST(a_full_queue_closes_exactly_the_streams_that_would_miss_a_frame)
{
        m0__bus_destroy(&host->bus);
        ck_assert_int_eq(m0__bus_init(&host->bus, 1, 2, 64, 16u << 20), 0);
        host->bus.wake = m0__bus_wake_loops;
        host->bus.wake_ud = &host->serve;
        host->cfg.channel_frames = 2;
        struct client cl[5];
        struct client *a = &cl[0], *b = &cl[1], *c = &cl[2], *p = &cl[3], *late = &cl[4];
        stream(a, (const char *const[]){"a", NULL}, NULL);
        stream(b, (const char *const[]){"b", NULL}, NULL);
        stream(c, (const char *const[]){"c", NULL}, NULL);
        stream(p, (const char *const[]){"b*", NULL}, NULL);
        for (int i = 0; i < 4; i++)
                (void)take(&cl[i], (char[64]){0}, 64);
        ck_assert_int_eq(pub("a", "1"), 1);
        ck_assert_int_eq(pub("a", "2"), 2);
        ck_assert_int_eq(pub("b", "3"), 3); /* refused: b and the prefix b* would miss it */
        ck_assert_int_eq(m0_publish("c", NULL, "t", M0_PUBLISH_TRANSIENT), 0); /* dropped */
        stream(late, (const char *const[]){"b", NULL}, NULL); /* after: it has id 3 already */
        (void)take(late, (char[64]){0}, 64);
        m0__sse_deliver(loop);
        expect(a, "id: 1\ndata: 1\n\nid: 2\ndata: 2\n\n");
        m0__conn_reap(loop);
        ck_assert(ended(b));
        ck_assert(ended(p));
        expect(c, "");
        expect(late, "");
        ck_assert_uint_eq(loop->chan_closed, 2);
        ck_assert_uint_eq(loop->chan_refused, 1);
        ck_assert_uint_eq(loop->chan_dropped, 1);
        /* the queue takes frames again; the streams left go on */
        ck_assert_int_eq(pub("c", "4"), 4);
        ck_assert_int_eq(pub("b", "5"), 5);
        m0__sse_deliver(loop);
        expect(c, "id: 4\ndata: 4\n\n");
        expect(late, "id: 5\ndata: 5\n\n");
        for (int i = 0; i < 5; i++)
                close(cl[i].fd);
}
END_TEST

/* ---- the loop's turns (D85) ---- */

/* The frames of ids [from, to], each "x", appended at `at` of `want`; the new length. */
static size_t ids_text(char *want, size_t cap, size_t at, uint64_t from, uint64_t to)
{
        for (uint64_t id = from; id <= to; id++)
                at += (size_t)snprintf(want + at, cap - at, "id: %llu\ndata: x\n\n",
                                       (unsigned long long)id);
        ck_assert_uint_lt(at, cap);
        return at;
}

/*
 * Frames reach the loop through its turns: after the wake-up's take, each take of up to 64 frames
 * is one item of the turn (m0__turn_take), and what the turn leaves stays in the loop's queue, in
 * id order, while the frames' place on the run queue (M0_TASK_FRAMES) waits behind the rest. The
 * queue holds only the channels the loop's streams follow (N1, N5).
 */
START_TEST(a_take_of_frames_is_one_item_of_a_turn_and_the_rest_waits_its_place)
{
        m0__bus_destroy(&host->bus);
        ck_assert_int_eq(m0__bus_init(&host->bus, 1, 1024, 1024, 16u << 20), 0);
        host->bus.wake = m0__bus_wake_loops;
        host->bus.wake_ud = &host->serve;
        host->cfg.channel_frames = 1024;
        host->cfg.turn_items = 2;
        loop->loop.turn_items = 2; /* the loop took the configured value when it was built */
        loop->loop.turn_budget_ms = 10000; /* items, not time, end these turns */
        struct client a, b;
        stream(&a, (const char *const[]){"a", NULL}, NULL);
        stream(&b, (const char *const[]){"b", NULL}, NULL);
        (void)take(&a, (char[64]){0}, 64);
        (void)take(&b, (char[64]){0}, 64);
        for (int64_t id = 1; id <= 300; id++)
                ck_assert_int_eq(m0_publish("a", NULL, "x", 0), id);
        ck_assert_int_eq(m0_publish("b", NULL, "x", 0), 301);
        ck_assert_int_eq(m0_publish("z", NULL, "x", 0), 302); /* nobody here follows it */
        ck_assert_uint_eq(host->bus.qs[0].count, 301);

        /* The turn the publishes woke: the wake-up's take, then two items of 64 frames each;
         * the 109 left wait in the queue and the frames take their place on the run queue. */
        ck_assert_int_eq(m0__hctx_run_once(loop, 0), 1);
        char want[8192];
        ids_text(want, sizeof(want), 0, 1, 192);
        expect(&a, want);
        expect(&b, "");
        ck_assert(loop->frames_task.queued);
        ck_assert_uint_eq(loop->loop.runq_len, 1);
        ck_assert_uint_eq(host->bus.qs[0].count, 109);

        /* A publish meanwhile joins behind them; the next turn does not sleep in epoll, and its
         * place on the run queue delivers the rest in id order. */
        ck_assert_int_eq(m0_publish("a", NULL, "x", 0), 303);
        ck_assert_int_eq(m0__hctx_run_once(loop, 60000), 1); /* the mailbox's wake-up */
        ids_text(want, sizeof(want), ids_text(want, sizeof(want), 0, 193, 300), 303, 303);
        expect(&a, want);
        expect(&b, "id: 301\ndata: x\n\n");
        ck_assert(!loop->frames_task.queued);
        ck_assert_uint_eq(loop->loop.runq_len, 0);
        ck_assert_uint_eq(host->bus.qs[0].count, 0);
        close(a.fd);
        close(b.fd);
}
END_TEST

static Suite *sse_suite(void)
{
        Suite *s = suite_create("sse");
        TCase *tc = tcase_create("streams");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, first_bytes_are_open_then_retry);
        tcase_add_test(tc, subscribe_refuses_what_is_no_channel);
        tcase_add_test(tc, each_stream_gets_exactly_its_channels_once);
        tcase_add_test(tc, a_transient_event_is_for_the_streams_that_followed_before_it);
        tcase_add_test(tc, last_event_id_replays_the_stream_s_channels_in_order);
        tcase_add_test(tc, a_full_queue_closes_exactly_the_streams_that_would_miss_a_frame);
        tcase_add_test(tc, a_take_of_frames_is_one_item_of_a_turn_and_the_rest_waits_its_place);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(sse_suite());
}
