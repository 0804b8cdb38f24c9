/* SPDX-License-Identifier: MIT */
/* test-bus.c: the bus at its internal interface: names, one id sequence, transient events, the
 * loops' interest and their queues, a full queue's refusals, the numbered path, the replay store's
 * bounds and eviction (N1-N5, B2, D44, D45, D74, D75). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bus.h"
#include "m0.h"
#include "unit.h"

/* A million distinct channels with M0_HEAVY=1 (contrib/test-all's plain run), 100,000 else. */
static long heavy(long whole, long reduced)
{
        const char *v = getenv("M0_HEAVY");
        return v && !strcmp(v, "1") ? whole : reduced;
}

static struct m0_bus bus;
static uint64_t woken[M0__BUS_WORDS];
static int wakes;

static void on_wake(void *ud, const uint64_t *mask)
{
        (void)ud;
        memcpy(woken, mask, sizeof(woken));
        wakes++;
}

static void setup_n(int nloops, size_t q_cap, size_t per_channel, size_t bytes)
{
        ck_assert_int_eq(m0__bus_init(&bus, nloops, q_cap, per_channel, bytes), 0);
        bus.wake = on_wake;
        memset(woken, 0, sizeof(woken));
        wakes = 0;
}

static void setup(void)
{
        setup_n(3, 16, 64, 16u << 20);
}

static void teardown(void)
{
        m0__bus_destroy(&bus);
}

static struct m0_key key(const char *pattern)
{
        size_t n = strlen(pattern);
        bool prefix = n && pattern[n - 1] == '*';
        if (prefix)
                n--;
        return (struct m0_key){.name = pattern,
                               .len = (uint16_t)n,
                               .prefix = prefix,
                               .hash = m0__hash(pattern, n)};
}

static void follow(int loop, const char *pattern)
{
        struct m0_key k = key(pattern);
        ck_assert_int_eq(m0__bus_follow(&bus, loop, &k), 0);
}

static void unfollow(int loop, const char *pattern)
{
        struct m0_key k = key(pattern);
        m0__bus_unfollow(&bus, loop, &k);
}

/* Loop `loop`'s queue holds exactly these ids (0: a transient frame), on these channels, and no
 * refusal. */
static void expect_queue(int loop, size_t n, const uint64_t *ids, const char *const *chans)
{
        struct m0_frame *f[32];
        struct m0_refusal r;
        size_t got = m0__bus_take_queue(&bus, loop, f, 32, &r);
        ck_assert_uint_eq(r.count, 0);
        ck_assert_uint_eq(r.dropped, 0);
        ck_assert_uint_eq(got, n);
        for (size_t i = 0; i < got; i++) {
                ck_assert_uint_eq(f[i]->id, ids[i]);
                ck_assert_str_eq(f[i]->chan, chans[i]);
                m0__frame_unref(f[i]);
        }
        m0__refusal_free(&r);
}

static int64_t pub(const char *channel, const char *data)
{
        return m0__bus_publish(&bus, channel, "e", data, 0);
}

/* ---- names and ids (N1, N2) ---- */

/* A node whose first insert could not grow the table (no buckets yet) is removed as a no-op:
 * the turn's file cache removes every entry it counted (D237). */
START_TEST(a_remove_from_a_table_without_buckets)
{
        struct m0_hmap m = {0};
        struct m0_hnode n = {.hash = m0__hash("a", 1), .key = "a", .len = 1};
        m0__hmap_remove(&m, &n);
        ck_assert_uint_eq(m.n, 0);
        ck_assert_int_eq(m0__hmap_insert(&m, &n), 0);
        ck_assert_ptr_eq(m0__hmap_find(&m, n.hash, "a", 1), &n);
        m0__hmap_remove(&m, &n);
        ck_assert_uint_eq(m.n, 0);
        ck_assert_ptr_null(m0__hmap_find(&m, n.hash, "a", 1));
        m0__hmap_free(&m);
}
END_TEST

START_TEST(a_channel_is_1_to_200_visible_ascii_bytes)
{
        char c200[201], c201[202];
        memset(c200, 'c', 200);
        c200[200] = '\0';
        memset(c201, 'c', 201);
        c201[201] = '\0';
        ck_assert_int_eq(m0__bus_publish(&bus, NULL, "e", "d", 0), -EINVAL);
        ck_assert_int_eq(pub("", "d"), -EINVAL);
        ck_assert_int_eq(pub(c201, "d"), -EINVAL);
        ck_assert_int_eq(pub("a b", "d"), -EINVAL);
        ck_assert_int_eq(pub("tab\there", "d"), -EINVAL);
        ck_assert_int_eq(pub("caf\xc3\xa9", "d"), -EINVAL);
        ck_assert_int_eq(pub("del\x7f", "d"), -EINVAL);
        /* a trailing '*' is how a stream names a prefix: no event is on such a channel */
        ck_assert_int_eq(pub("room:*", "d"), -EINVAL);
        ck_assert_int_eq(pub("*", "d"), -EINVAL);
        ck_assert_int_eq(m0__bus_publish(&bus, "c", "", "d", 0), -EINVAL);
        ck_assert_int_eq(m0__bus_publish(&bus, "c", "a\rb", "d", 0), -EINVAL);
        ck_assert_int_eq(m0__bus_publish(&bus, "c", "a\nb", "d", 0), -EINVAL);
        ck_assert_int_eq(m0__bus_publish(&bus, "c", "e", "d", 2), -EINVAL);
        ck_assert_uint_eq(m0__bus_last(&bus), 0); /* no refusal took an id */
        ck_assert_int_eq(pub(c200, "d"), 1);
        ck_assert_int_eq(pub("!~a*b", "d"), 2);
        ck_assert(m0__channel_ok("x", 1));
        ck_assert(!m0__channel_ok("x", 0));
}
END_TEST

START_TEST(ids_are_one_sequence_and_transient_events_take_none)
{
        ck_assert_int_eq(pub("a", "1"), 1);
        ck_assert_int_eq(pub("b", "2"), 2);
        ck_assert_int_eq(m0__bus_publish(&bus, "a", "hb", "x", M0_PUBLISH_TRANSIENT), 0);
        ck_assert_int_eq(m0__bus_publish(&bus, "c", NULL, NULL, M0_PUBLISH_TRANSIENT), 0);
        ck_assert_int_eq(pub("c", "3"), 3);
        ck_assert_uint_eq(m0__bus_last(&bus), 3);
        ck_assert_uint_eq(m0__counter_read(&bus.published), 3);
        ck_assert_uint_eq(bus.transient, 2);
        /* kept: the three, not the transient ones */
        ck_assert_uint_eq(bus.replay.frames, 3);
        ck_assert_ptr_null(m0__replay_find(&bus.replay, "hb", 2));
}
END_TEST

/* The text on the wire: the id line, then the event and each line of the data its own. */
START_TEST(a_frame_is_formatted_once)
{
        follow(0, "c");
        ck_assert_int_eq(m0__bus_publish(&bus, "c", "ev", "a\r\nb\rc\nd", 0), 1);
        ck_assert_int_eq(m0__bus_publish(&bus, "c", NULL, "", M0_PUBLISH_TRANSIENT), 0);
        struct m0_frame *f[2];
        struct m0_refusal r;
        ck_assert_uint_eq(m0__bus_take_queue(&bus, 0, f, 2, &r), 2);
        static const char kept[] = "id: 1\nevent: ev\ndata: a\ndata: b\ndata: c\ndata: d\n\n";
        ck_assert_bytes(f[0]->bytes + f[0]->start, f[0]->end - f[0]->start, kept, sizeof(kept) - 1);
        ck_assert_bytes(f[1]->bytes + f[1]->start, f[1]->end - f[1]->start, "data: \n\n", 8);
        ck_assert(f[1]->transient);
        ck_assert_uint_eq(f[1]->seq, 2);
        m0__frame_unref(f[0]);
        m0__frame_unref(f[1]);
}
END_TEST

/* ---- the loops' interest (N1, N5) ---- */

START_TEST(only_the_loops_that_follow_a_channel_get_it)
{
        follow(1, "a");
        follow(2, "room:*");
        follow(2, "a");
        wakes = 0;
        ck_assert_int_eq(pub("a", "x"), 1);
        ck_assert_int_eq(wakes, 1);
        ck_assert_uint_eq(woken[0], (1u << 1) | (1u << 2));
        ck_assert_int_eq(pub("room:7", "x"), 2);
        ck_assert_uint_eq(woken[0], 1u << 2);
        ck_assert_int_eq(pub("room:", "x"), 3); /* the prefix itself */
        ck_assert_int_eq(pub("roo", "x"), 4);   /* shorter than the prefix */
        ck_assert_int_eq(pub("b", "x"), 5);
        /* nobody follows "roo" and "b": no loop was woken, nothing queued, and they count */
        ck_assert_int_eq(wakes, 3);
        ck_assert_uint_eq(bus.unfollowed, 2);
        expect_queue(0, 0, NULL, NULL);
        expect_queue(1, 1, (const uint64_t[]){1}, (const char *const[]){"a"});
        expect_queue(2, 3, (const uint64_t[]){1, 2, 3},
                     (const char *const[]){"a", "room:7", "room:"});
}
END_TEST

START_TEST(every_channel_and_unfollowing)
{
        follow(0, "*");
        follow(1, "x:*");
        follow(1, "x:y:*");
        ck_assert_int_eq(pub("x:y:z", "d"), 1);
        ck_assert_int_eq(pub("q", "d"), 2);
        expect_queue(0, 2, (const uint64_t[]){1, 2}, (const char *const[]){"x:y:z", "q"});
        /* one frame once, however many of the loop's prefixes match it */
        expect_queue(1, 1, (const uint64_t[]){1}, (const char *const[]){"x:y:z"});
        unfollow(1, "x:*");
        ck_assert_int_eq(pub("x:a", "d"), 3);
        ck_assert_int_eq(pub("x:y:b", "d"), 4);
        expect_queue(1, 1, (const uint64_t[]){4}, (const char *const[]){"x:y:b"});
        unfollow(0, "*");
        unfollow(1, "x:y:*");
        unfollow(1, "x:y:*"); /* twice: nothing */
        wakes = 0;
        ck_assert_int_eq(pub("x:y:c", "d"), 5);
        ck_assert_int_eq(wakes, 0);
        ck_assert_int_eq(bus.nprefix_lens, 0);
        ck_assert_uint_eq(bus.follow_exact.n + bus.follow_prefix.n, 0);
        expect_queue(0, 2, (const uint64_t[]){3, 4}, (const char *const[]){"x:a", "x:y:b"});
}
END_TEST

/* ---- the numbered path, for a source of ids of its own (D74) ---- */

START_TEST(an_event_with_its_id_takes_the_one_path)
{
        follow(0, "c");
        ck_assert_int_eq(m0__bus_deliver(&bus, 10, "c", "e", "ten", 3, 0), 0);
        ck_assert_uint_eq(m0__bus_last(&bus), 10);
        ck_assert_int_eq(m0__bus_deliver(&bus, 10, "c", "e", "again", 5, 0), -EINVAL);
        ck_assert_int_eq(m0__bus_deliver(&bus, 9, "c", "e", "old", 3, 0), -EINVAL);
        ck_assert_int_eq(m0__bus_deliver(&bus, 0, "c", "e", "x", 1, 0), -EINVAL);
        ck_assert_int_eq(m0__bus_deliver(&bus, 11, "c", "e", "x", 1, M0_PUBLISH_TRANSIENT),
                         -EINVAL);
        ck_assert_int_eq(m0__bus_deliver(&bus, 0, "c", "e", "t", 1, M0_PUBLISH_TRANSIENT), 0);
        ck_assert_int_eq(m0__bus_deliver(&bus, 12, "c", NULL, "a\0b", 3, 0), -EINVAL);
        ck_assert_int_eq(m0__bus_deliver(&bus, 12, "c", NULL, "twelve", 6, 0), 0);
        ck_assert_int_eq(pub("c", "13"), 13); /* a local publish goes on from there */
        expect_queue(0, 4, (const uint64_t[]){10, 0, 12, 13},
                     (const char *const[]){"c", "c", "c", "c"});
        ck_assert_uint_eq(m0__replay_find(&bus.replay, "c", 1)->count, 3);
}
END_TEST

/* M0__ID_MAX (2^62) is the last id there is, on both paths (D46): past it, -EOVERFLOW and
 * nothing kept or queued; a transient event, which takes no id, still goes out. */
START_TEST(no_id_past_the_last_there_is)
{
        follow(0, "c");
        m0__bus_set_last(&bus, M0__ID_MAX - 1);
        ck_assert_int_eq(pub("c", "last"), (int64_t)M0__ID_MAX);
        ck_assert_int_eq(pub("c", "past"), -EOVERFLOW);
        ck_assert_int_eq(m0__bus_deliver(&bus, M0__ID_MAX + 1, "c", NULL, "x", 1, 0), -EOVERFLOW);
        ck_assert_int_eq(m0__bus_publish(&bus, "c", NULL, "t", M0_PUBLISH_TRANSIENT), 0);
        ck_assert_uint_eq(m0__bus_last(&bus), M0__ID_MAX);
        expect_queue(0, 2, (const uint64_t[]){M0__ID_MAX, 0}, (const char *const[]){"c", "c"});
        ck_assert_uint_eq(m0__replay_find(&bus.replay, "c", 1)->count, 1);
}
END_TEST

/* ---- a full queue (B2, D45, D74) ---- */

START_TEST(a_full_queue_names_each_channel_it_refused)
{
        m0__bus_destroy(&bus);
        setup_n(1, 2, 64, 16u << 20);
        follow(0, "*");
        ck_assert_int_eq(pub("a", "1"), 1);
        ck_assert_int_eq(pub("b", "2"), 2);
        ck_assert_int_eq(pub("b", "3"), 3); /* full */
        ck_assert_int_eq(m0__bus_publish(&bus, "c", NULL, "t", M0_PUBLISH_TRANSIENT), 0);
        ck_assert_int_eq(pub("a", "4"), 4);
        ck_assert_int_eq(pub("b", "5"), 5);
        struct m0_frame *f[4];
        struct m0_refusal r;
        ck_assert_uint_eq(m0__bus_take_queue(&bus, 0, f, 1, &r), 1);
        ck_assert_uint_eq(r.count, 0); /* the refusal comes after what came before it */
        m0__frame_unref(f[0]);
        ck_assert_uint_eq(m0__bus_take_queue(&bus, 0, f, 4, &r), 1);
        ck_assert_uint_eq(f[0]->id, 2);
        m0__frame_unref(f[0]);
        ck_assert_uint_eq(r.count, 3);
        ck_assert_uint_eq(r.from, 3);
        ck_assert_uint_eq(r.last, 5);
        ck_assert_uint_eq(r.dropped, 1);
        ck_assert(!r.all);
        ck_assert_uint_eq(r.chans.n, 2);
        struct m0_hnode *a = m0__hmap_find(&r.chans, m0__hash("a", 1), "a", 1);
        struct m0_hnode *b = m0__hmap_find(&r.chans, m0__hash("b", 1), "b", 1);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_uint_eq(M0__CONTAINER_OF(a, struct m0_refused_chan, node)->last, 4);
        ck_assert_uint_eq(M0__CONTAINER_OF(b, struct m0_refused_chan, node)->last, 5);
        m0__refusal_free(&r);
        /* the queue takes frames again */
        ck_assert_int_eq(pub("a", "6"), 6);
        expect_queue(0, 1, (const uint64_t[]){6}, (const char *const[]){"a"});
}
END_TEST

START_TEST(more_channels_refused_than_a_queue_holds_is_all)
{
        m0__bus_destroy(&bus);
        setup_n(1, 2, 64, 16u << 20);
        follow(0, "*");
        char name[16];
        for (int i = 0; i < 6; i++) {
                snprintf(name, sizeof(name), "c%d", i);
                ck_assert_int_eq(pub(name, "x"), i + 1);
        }
        struct m0_frame *f[4];
        struct m0_refusal r;
        ck_assert_uint_eq(m0__bus_take_queue(&bus, 0, f, 4, &r), 2);
        m0__frame_unref(f[0]);
        m0__frame_unref(f[1]);
        ck_assert_uint_eq(r.count, 4);
        ck_assert(r.all); /* c2 and c3 named, c4 no longer: every stream behind 6 is closed */
        ck_assert_uint_eq(r.last, 6);
        m0__refusal_free(&r);
}
END_TEST

/* ---- the replay store (N2, N4) ---- */

static void collect(const char *const *patterns, size_t n, uint64_t after, size_t want,
                    const uint64_t *ids)
{
        struct m0_key keys[8];
        for (size_t i = 0; i < n; i++)
                keys[i] = key(patterns[i]);
        struct m0_fvec v = {0};
        ck_assert_int_eq(m0__replay_collect(&bus.replay, keys, n, after, &v, NULL), 0);
        m0__fvec_sort(&v);
        ck_assert_uint_eq(v.n, want);
        for (size_t i = 0; i < v.n; i++)
                ck_assert_uint_eq(v.v[i]->id, ids[i]);
        m0__fvec_free(&v);
}

START_TEST(a_replay_is_of_the_stream_s_channels_in_order_once)
{
        ck_assert_int_eq(pub("room:1", "a"), 1);
        ck_assert_int_eq(pub("other", "b"), 2);
        ck_assert_int_eq(pub("room:2", "c"), 3);
        ck_assert_int_eq(pub("room:1", "d"), 4);
        ck_assert_int_eq(m0__bus_publish(&bus, "room:1", NULL, "t", M0_PUBLISH_TRANSIENT), 0);
        collect((const char *const[]){"room:1"}, 1, 0, 2, (const uint64_t[]){1, 4});
        collect((const char *const[]){"room:1"}, 1, 1, 1, (const uint64_t[]){4});
        collect((const char *const[]){"room:*", "room:1"}, 2, 0, 3, (const uint64_t[]){1, 3, 4});
        collect((const char *const[]){"*"}, 1, 2, 2, (const uint64_t[]){3, 4});
        collect((const char *const[]){"nothing", "r*"}, 2, 3, 1, (const uint64_t[]){4});
        collect((const char *const[]){"room:1"}, 1, 4, 0, NULL);

        /* subscribe: the newest id and the replay in one hold; past the newest: all kept */
        struct m0_key k = key("room:*");
        struct m0_fvec v = {0};
        struct m0_subscribed got = {.ahead = true, .table = true};
        ck_assert_int_eq(m0__bus_subscribe(&bus, 0, &k, 1, &k, 1, true, 3, &v, NULL, &got), 0);
        ck_assert_uint_eq(got.seq, 6); /* five events, then this stream */
        ck_assert_uint_eq(got.last, 4);
        ck_assert(!got.ahead);
        ck_assert(!got.table); /* the local bus: the replay store is all there is */
        ck_assert_uint_eq(v.n, 1);
        m0__fvec_free(&v);
        ck_assert_int_eq(m0__bus_subscribe(&bus, 1, NULL, 0, &k, 1, true, 19, &v, NULL, &got), 0);
        ck_assert(got.ahead);
        m0__fvec_sort(&v);
        ck_assert_uint_eq(v.n, 3);
        m0__fvec_free(&v);
        /* loop 0 follows room:* now */
        ck_assert_int_eq(pub("room:9", "e"), 5);
        expect_queue(0, 1, (const uint64_t[]){5}, (const char *const[]){"room:9"});
        expect_queue(1, 0, NULL, NULL);
}
END_TEST

START_TEST(each_channel_keeps_its_last_per_channel)
{
        m0__bus_destroy(&bus);
        setup_n(1, 16, 3, 16u << 20);
        for (int i = 1; i <= 5; i++)
                ck_assert_int_eq(pub("a", "x"), i);
        ck_assert_int_eq(pub("b", "x"), 6);
        collect((const char *const[]){"a"}, 1, 0, 3, (const uint64_t[]){3, 4, 5});
        ck_assert_uint_eq(bus.replay.frames, 4);
        ck_assert_uint_eq(bus.replay.evicted, 0);
}
END_TEST

/* What a replay's gap sink was told, "name:oldest," each. */
static char gaps_told[256];

static void gap_told(void *ud, const char *name, size_t len, uint64_t oldest)
{
        (void)ud;
        size_t n = strlen(gaps_told);
        snprintf(gaps_told + n, sizeof(gaps_told) - n, "%.*s:%llu,", (int)len, name,
                 (unsigned long long)oldest);
}

/* The gaps a replay of `patterns` after `after` tells. */
static const char *gaps_of(const char *const *patterns, size_t n, uint64_t after)
{
        struct m0_key keys[8];
        for (size_t i = 0; i < n; i++)
                keys[i] = key(patterns[i]);
        struct m0_fvec v = {0};
        gaps_told[0] = '\0';
        ck_assert_int_eq(m0__replay_collect(&bus.replay, keys, n, after, &v,
                                            &(struct m0_gap_sink){.fn = gap_told}),
                         0);
        m0__fvec_free(&v);
        return gaps_told;
}

/* AP2: a channel that gave up an event past `after` is told once, with its oldest kept id,
 * whether an exact name, a prefix or both name it; one that gave up none is not. */
START_TEST(a_replay_tells_each_channel_that_lost_an_event_after_it)
{
        m0__bus_destroy(&bus);
        setup_n(1, 16, 3, 16u << 20);
        for (int i = 1; i <= 5; i++)
                ck_assert_int_eq(pub("room:a", "x"), i); /* keeps 3, 4, 5; lost 2 */
        ck_assert_int_eq(pub("room:b", "x"), 6);
        ck_assert_str_eq(gaps_of((const char *const[]){"room:a"}, 1, 0), "room:a:3,");
        ck_assert_str_eq(gaps_of((const char *const[]){"room:a"}, 1, 1), "room:a:3,");
        ck_assert_str_eq(gaps_of((const char *const[]){"room:a"}, 1, 2), "");
        ck_assert_str_eq(gaps_of((const char *const[]){"room:a"}, 1, 4), "");
        ck_assert_str_eq(gaps_of((const char *const[]){"room:*"}, 1, 0), "room:a:3,");
        ck_assert_str_eq(gaps_of((const char *const[]){"room:*", "room:a", "*"}, 3, 0),
                         "room:a:3,");
        ck_assert_str_eq(gaps_of((const char *const[]){"room:b"}, 1, 0), "");
}
END_TEST

/* N4: a quiet channel keeps its history while a busy one publishes 100,000 events. */
START_TEST(a_quiet_channel_keeps_its_history)
{
        ck_assert_int_eq(pub("quiet", "one"), 1);
        ck_assert_int_eq(pub("quiet", "two"), 2);
        for (int i = 0; i < 100000; i++)
                ck_assert_int_eq(pub("busy", "the busy channel's event"), i + 3);
        collect((const char *const[]){"quiet"}, 1, 0, 2, (const uint64_t[]){1, 2});
        ck_assert_uint_eq(m0__replay_find(&bus.replay, "busy", 4)->count, 64);
        ck_assert_uint_eq(bus.replay.evicted, 0);
        ck_assert_uint_eq(bus.replay.frames, 66);
}
END_TEST

/*
 * N4: channels past the byte bound are evicted, the one published to longest ago first, and
 * counted; what the store holds never passes the bound, whatever the number of channels.
 */
START_TEST(the_channels_idle_longest_are_evicted_within_the_bound)
{
        m0__bus_destroy(&bus);
        setup_n(1, 16, 64, 1u << 20);
        long n = heavy(1000000, 100000);
        char name[32];
        size_t most = 0;
        int64_t id = 0;
        for (long i = 0; i < n; i++) {
                snprintf(name, sizeof(name), "user:%ld", i);
                ck_assert_int_eq(pub(name, "{\"n\":1}"), ++id);
                if (i == 1)
                        ck_assert_int_eq(pub("user:0", "again"), ++id); /* user:0 is not idle */
                if (bus.replay.evicted == 1 && i < 100000) {
                        /* the first evicted is the one published to longest ago */
                        ck_assert_ptr_null(m0__replay_find(&bus.replay, "user:1", 6));
                        ck_assert_ptr_nonnull(m0__replay_find(&bus.replay, "user:0", 6));
                }
                ck_assert_uint_le(bus.replay.bytes, bus.replay.limit);
                if (bus.replay.bytes > most)
                        most = bus.replay.bytes;
        }
        size_t kept = bus.replay.map.n;
        ck_assert_uint_gt(kept, 1000);
        ck_assert_uint_eq(bus.replay.evicted, (uint64_t)n - kept);
        ck_assert_uint_eq(bus.replay.frames, kept);
        ck_assert_uint_ge(most, bus.replay.limit - 1024); /* it was used, not only bounded */
        snprintf(name, sizeof(name), "user:%ld", n - 1);
        ck_assert_ptr_nonnull(m0__replay_find(&bus.replay, name, strlen(name)));
        /* the map's buckets stay within the share each channel is charged */
        ck_assert_uint_le(m0__hmap_bytes(&bus.replay.map), 2 * sizeof(void *) * 2 * kept + 128);
}
END_TEST

/* A frame larger than the whole bound is delivered and not kept. */
START_TEST(a_frame_past_the_bound_is_delivered_not_kept)
{
        m0__bus_destroy(&bus);
        setup_n(1, 16, 64, 4096);
        follow(0, "big");
        char data[8192];
        memset(data, 'x', sizeof(data) - 1);
        data[sizeof(data) - 1] = '\0';
        ck_assert_int_eq(pub("small", "s"), 1);
        ck_assert_int_eq(pub("big", data), 2);
        ck_assert_uint_eq(bus.replay.dropped, 1);
        ck_assert_ptr_null(m0__replay_find(&bus.replay, "big", 3));
        expect_queue(0, 1, (const uint64_t[]){2}, (const char *const[]){"big"});
        ck_assert_uint_le(bus.replay.bytes, 4096);
}
END_TEST

START_TEST(fvec_sort_orders_and_drops_repeats)
{
        ck_assert_int_eq(pub("a", "1"), 1);
        ck_assert_int_eq(pub("a", "2"), 2);
        struct m0_key k[3] = {key("a"), key("a*"), key("*")};
        struct m0_fvec v = {0};
        ck_assert_int_eq(m0__replay_collect(&bus.replay, k, 3, 0, &v, NULL), 0);
        ck_assert_uint_eq(v.n, 4); /* once by name, once by the prefixes that name it */
        m0__fvec_sort(&v);
        ck_assert_uint_eq(v.n, 2);
        ck_assert_uint_eq(v.v[0]->id, 1);
        ck_assert_uint_eq(v.v[1]->id, 2);
        ck_assert_uint_eq(atomic_load(&v.v[0]->refs), 2); /* the store's and the vector's */
        m0__fvec_free(&v);
}
END_TEST

static Suite *bus_suite(void)
{
        Suite *s = suite_create("bus");
        TCase *tc = tcase_create("publish");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, a_channel_is_1_to_200_visible_ascii_bytes);
        tcase_add_test(tc, a_remove_from_a_table_without_buckets);
        tcase_add_test(tc, ids_are_one_sequence_and_transient_events_take_none);
        tcase_add_test(tc, a_frame_is_formatted_once);
        tcase_add_test(tc, only_the_loops_that_follow_a_channel_get_it);
        tcase_add_test(tc, every_channel_and_unfollowing);
        tcase_add_test(tc, an_event_with_its_id_takes_the_one_path);
        tcase_add_test(tc, no_id_past_the_last_there_is);
        tcase_add_test(tc, a_full_queue_names_each_channel_it_refused);
        tcase_add_test(tc, more_channels_refused_than_a_queue_holds_is_all);
        suite_add_tcase(s, tc);
        tc = tcase_create("replay");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, a_replay_is_of_the_stream_s_channels_in_order_once);
        tcase_add_test(tc, each_channel_keeps_its_last_per_channel);
        tcase_add_test(tc, a_replay_tells_each_channel_that_lost_an_event_after_it);
        tcase_add_test(tc, a_quiet_channel_keeps_its_history);
        tcase_add_test(tc, the_channels_idle_longest_are_evicted_within_the_bound);
        tcase_add_test(tc, a_frame_past_the_bound_is_delivered_not_kept);
        tcase_add_test(tc, fvec_sort_orders_and_drops_repeats);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(bus_suite());
}
