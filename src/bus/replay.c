/* SPDX-License-Identifier: MIT */
/* replay.c: each channel's last events for Last-Event-ID, within a byte bound; the channels idle
 * longest are evicted first (N2, N4). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bus.h"
#include "replay.h"
#include "fdstore-log.h"

/*
 * What malloc adds to each allocation (glibc: a 16-byte header, 16-byte alignment): charged per
 * allocation, so that many small channels cannot hold many times the bound in headers.
 */
#define MALLOC_OVERHEAD 16
/* A channel's share of the map's buckets, which number at most twice the channels. */
#define BUCKET_SHARE (2 * sizeof(void *))

static size_t chan_charge(size_t len, size_t cap)
{
        size_t ring = cap ? cap * sizeof(struct m0_frame *) + MALLOC_OVERHEAD : 0;
        return sizeof(struct m0_rchan) + len + 1 + MALLOC_OVERHEAD + ring + BUCKET_SHARE;
}

static size_t frame_charge(const struct m0_frame *f)
{
        return f->alloc + MALLOC_OVERHEAD;
}

void m0__replay_init(struct m0_replay *r, uint32_t per_channel, size_t limit)
{
        memset(r, 0, sizeof(*r));
        r->per_channel = per_channel ? per_channel : 1;
        r->limit = limit;
}

/* The oldest frame of `c` leaves the store. */
static void drop_oldest(struct m0_replay *r, struct m0_rchan *c)
{
        struct m0_frame *f = c->ring[c->head];
        c->ring[c->head] = NULL;
        c->head = (c->head + 1) % c->cap;
        c->count--;
        c->lost = f->id;
        c->charge -= frame_charge(f);
        r->bytes -= frame_charge(f);
        r->frames--;
        if (f->id > r->floor)
                r->floor = f->id;
        if (r->store)
                m0__store_drop(r->store, f);
        m0__frame_unref(f);
}

static void chan_free(struct m0_replay *r, struct m0_rchan *c)
{
        while (c->count)
                drop_oldest(r, c);
        m0__hmap_remove(&r->map, &c->node);
        m0__list_unlink(&r->lru, &c->lru);
        r->bytes -= c->charge;
        free(c->ring);
        free(c);
}

void m0__replay_destroy(struct m0_replay *r)
{
        struct m0_rchan *c;
        r->store = NULL; /* the store is closed first: its copies go with it */
        while ((c = M0__LIST_FIRST(&r->lru, struct m0_rchan, lru)))
                chan_free(r, c);
        m0__hmap_free(&r->map);
}

struct m0_rchan *m0__replay_find(struct m0_replay *r, const char *name, size_t len)
{
        struct m0_hnode *n = m0__hmap_find(&r->map, m0__hash(name, len), name, len);
        return n ? M0__CONTAINER_OF(n, struct m0_rchan, node) : NULL;
}

/* The channel of `f`, made (empty, most recently used) when it is new. NULL on ENOMEM. */
static struct m0_rchan *chan_of(struct m0_replay *r, const struct m0_frame *f)
{
        struct m0_hnode *n = m0__hmap_find(&r->map, f->hash, f->chan, f->chan_len);
        if (n)
                return M0__CONTAINER_OF(n, struct m0_rchan, node);
        struct m0_rchan *c = calloc(1, sizeof(*c) + f->chan_len + 1);
        if (!c)
                return NULL;
        memcpy(c->name, f->chan, f->chan_len);
        c->node = (struct m0_hnode){.hash = f->hash, .key = c->name, .len = f->chan_len};
        (void)m0__hmap_insert(&r->map, &c->node); /* a chain longer for want of memory */
        m0__list_push(&r->lru, &c->lru);
        c->charge = chan_charge(f->chan_len, 0);
        r->bytes += c->charge;
        return c;
}

/* Room for one more frame in `c`'s ring, which grows by doubling up to per_channel (a channel
 * that holds one event does not pay for 64). 0 or -ENOMEM. */
static int ring_room(struct m0_replay *r, struct m0_rchan *c)
{
        if (c->count < c->cap)
                return 0;
        uint32_t cap = c->cap ? c->cap * 2 : 2;
        if (cap > r->per_channel)
                cap = r->per_channel;
        struct m0_frame **ring = malloc(cap * sizeof(*ring));
        if (!ring)
                return -ENOMEM;
        for (uint32_t i = 0; i < c->count; i++)
                ring[i] = c->ring[(c->head + i) % c->cap];
        free(c->ring);
        size_t grown = chan_charge(c->node.len, cap) - chan_charge(c->node.len, c->cap);
        c->ring = ring;
        c->head = 0;
        c->cap = cap;
        c->charge += grown;
        r->bytes += grown;
        return 0;
}

/* Over either bound: what is there to give up first. */
static bool over(const struct m0_replay *r)
{
        return r->bytes > r->limit || (r->store && m0__store_live(r->store) > r->log_limit);
}

/*
 * Back within the bounds after `c` grew: whole channels, the one published to longest ago first
 * (N4: a quiet channel loses its history only once every channel idle longer has lost theirs),
 * then `c`'s own oldest frames. An empty channel is freed.
 */
static void shrink(struct m0_replay *r, struct m0_rchan *c)
{
        while (over(r)) {
                struct m0_rchan *old = M0__LIST_FIRST(&r->lru, struct m0_rchan, lru);
                if (old && old != c) {
                        chan_free(r, old);
                        m0__count(&r->evicted, 1);
                        continue;
                }
                if (!c->count)
                        break;
                drop_oldest(r, c);
                m0__count(&r->dropped, 1);
        }
        if (!c->count)
                chan_free(r, c);
}

int m0__replay_keep(struct m0_replay *r, struct m0_frame *f)
{
        struct m0_rchan *c = chan_of(r, f);
        if (!c) {
                r->floor = f->id;
                return -ENOMEM;
        }
        if (c->count == r->per_channel && c->count)
                drop_oldest(r, c);
        int ret = ring_room(r, c);
        if (ret < 0) {
                if (!c->count)
                        chan_free(r, c);
                else
                        c->lost = f->id;
                r->floor = f->id;
                return ret;
        }
        atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
        c->ring[(c->head + c->count++) % c->cap] = f;
        c->charge += frame_charge(f);
        r->bytes += frame_charge(f);
        r->frames++;
        if (r->store)
                m0__store_keep(r->store, f);
        /* Most recently published: last to be evicted. */
        m0__list_unlink(&r->lru, &c->lru);
        m0__list_push(&r->lru, &c->lru);
        shrink(r, c);
        return 0;
}

static bool matches(const struct m0_key *k, const struct m0_rchan *c)
{
        if (!k->prefix)
                return k->len == c->node.len && !memcmp(k->name, c->name, k->len);
        return c->node.len >= k->len && !memcmp(k->name, c->name, k->len);
}

/* The frames of `c` past `after`, newest last; `gaps` told first when it lost one past `after`. */
static int collect_chan(const struct m0_rchan *c, uint64_t after, struct m0_fvec *out,
                        const struct m0_gap_sink *gaps)
{
        if (gaps && c->lost > after && c->count)
                gaps->fn(gaps->ud, c->name, c->node.len, c->ring[c->head]->id);
        uint32_t i = c->count;
        while (i > 0 && c->ring[(c->head + i - 1) % c->cap]->id > after)
                i--;
        for (; i < c->count; i++) {
                struct m0_frame *f = c->ring[(c->head + i) % c->cap];
                atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
                if (m0__fvec_push(out, f) < 0) {
                        m0__frame_unref(f);
                        return -ENOMEM;
                }
        }
        return 0;
}

/* Whether one of `keys` names `c` exactly: the prefix scan then leaves its gap to that one. */
static bool named(const struct m0_key *keys, size_t n, const struct m0_rchan *c)
{
        for (size_t i = 0; i < n; i++)
                if (!keys[i].prefix && matches(&keys[i], c))
                        return true;
        return false;
}

int m0__replay_collect(struct m0_replay *r, const struct m0_key *keys, size_t n, uint64_t after,
                       struct m0_fvec *out, const struct m0_gap_sink *gaps)
{
        bool scan = false;
        for (size_t i = 0; i < n; i++) {
                if (keys[i].prefix) {
                        scan = true;
                        continue;
                }
                struct m0_hnode *h =
                        m0__hmap_find(&r->map, keys[i].hash, keys[i].name, keys[i].len);
                int ret = h ? collect_chan(M0__CONTAINER_OF(h, struct m0_rchan, node), after, out,
                                           gaps)
                            : 0;
                if (ret < 0)
                        return ret;
        }
        if (!scan)
                return 0;
        /* A prefix names channels by their start: every channel kept is looked at once, which a
         * reconnect does rarely; its exact names were taken above, and repeats go at the sort. */
        size_t bucket = 0;
        for (struct m0_hnode *h = m0__hmap_next(&r->map, &bucket, NULL); h;
             h = m0__hmap_next(&r->map, &bucket, h)) {
                struct m0_rchan *c = M0__CONTAINER_OF(h, struct m0_rchan, node);
                for (size_t i = 0; i < n; i++) {
                        if (!keys[i].prefix || !matches(&keys[i], c))
                                continue;
                        int ret = collect_chan(c, after, out,
                                               gaps && !named(keys, n, c) ? gaps : NULL);
                        if (ret < 0)
                                return ret;
                        break;
                }
        }
        return 0;
}

void m0__replay_each(struct m0_replay *r, void (*fn)(void *ud, struct m0_frame *f), void *ud)
{
        for (struct m0_rchan *c = M0__LIST_FIRST(&r->lru, struct m0_rchan, lru); c;
             c = M0__LIST_NEXT(c, struct m0_rchan, lru))
                for (uint32_t i = 0; i < c->count; i++)
                        fn(ud, c->ring[(c->head + i) % c->cap]);
}
