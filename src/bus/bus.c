/* SPDX-License-Identifier: MIT */
/* bus.c: one bus per process: one id sequence, named channels, a queue per loop that follows them,
 * the replay store and the fd store's copy (N1-N6, B1, B2). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bus.h"
#include "m0.h"
#include "load.h"
#include "fdstore-log.h"

/*
 * Every event takes one path, m0__bus_deliver's, once it has its id: a local publish takes the
 * next id first, another source (a bus shared by many hosts) brings its own, in id order. Under
 * the bus lock the event is kept for replay and in the fd store (unless transient), and a
 * reference is queued on the queue of every loop whose index follows its channel -- the bus
 * knows which from the loops' interest, a table each loop writes its own bit in when it gains
 * its first stream for a channel or loses its last. A loop that follows nothing of it is not
 * touched: no queue entry, no wake-up (N1). Queuing under the lock keeps every queue in id order
 * with several publishers (D44).
 */

#define ID_ROOM 32 /* "id: 18446744073709551615\n" fits */

struct m0_bus *m0__bus_global;

static size_t words(const struct m0_bus *b)
{
        return ((size_t)b->nloops + 63) / 64;
}

int m0__bus_init(struct m0_bus *b, int nloops, size_t q_cap, size_t per_channel, size_t bytes)
{
        memset(b, 0, sizeof(*b));
        pthread_mutex_init(&b->lock, NULL);
        pthread_cond_init(&b->lease_cond, NULL);
        b->lease = b->lease_low = UINT64_MAX;
        b->lease_fd = -1;
        b->shared_from = UINT64_MAX;
        b->max_channels = 16;
        m0__replay_init(&b->replay, (uint32_t)per_channel, bytes);
        b->q_cap = q_cap ? q_cap : 1;
        if (nloops > M0__BUS_LOOPS_MAX)
                return -EINVAL;
        b->qs = calloc(nloops > 0 ? (size_t)nloops : 1, sizeof(*b->qs));
        if (!b->qs)
                return -ENOMEM;
        for (; b->nloops < nloops; b->nloops++) {
                b->qs[b->nloops].q = calloc(b->q_cap, sizeof(*b->qs[0].q));
                if (!b->qs[b->nloops].q)
                        return -ENOMEM;
        }
        return 0;
}

void m0__frame_unref(struct m0_frame *f)
{
        if (f && atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1)
                free(f);
}

/* Free every node of `m` and its buckets: nodes whose m0_hnode is at `off` in their struct. */
static void free_nodes(struct m0_hmap *m, size_t off)
{
        size_t bucket = 0;
        struct m0_hnode *n = m0__hmap_next(m, &bucket, NULL);
        while (n) {
                struct m0_hnode *next = m0__hmap_next(m, &bucket, n);
                free((char *)n - off);
                n = next;
        }
        m0__hmap_free(m);
}

static void free_chans(struct m0_hmap *m)
{
        free_nodes(m, offsetof(struct m0_refused_chan, node));
}

static void free_interest(struct m0_hmap *m)
{
        free_nodes(m, offsetof(struct m0_interest, node));
}

void m0__refusal_free(struct m0_refusal *r)
{
        free_chans(&r->chans);
}

void m0__bus_destroy(struct m0_bus *b)
{
        m0__store_close(b);
        for (int i = 0; b->qs && i < b->nloops; i++) {
                struct m0_loopq *q = &b->qs[i];
                for (; q->count; q->count--, q->head = (q->head + 1) % b->q_cap)
                        m0__frame_unref(q->q[q->head]);
                free(q->q);
                free_chans(&q->chans);
        }
        free(b->qs);
        b->qs = NULL;
        b->nloops = 0;
        free_interest(&b->follow_exact);
        free_interest(&b->follow_prefix);
        m0__replay_destroy(&b->replay);
        pthread_cond_destroy(&b->lease_cond);
        pthread_mutex_destroy(&b->lock);
}

bool m0__channel_ok(const char *s, size_t len)
{
        if (len < 1 || len > M0__CHANNEL_MAX)
                return false;
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
                        return false;
        return true;
}

/* Whether an event's fields can be sent as they are: a channel a stream can follow by its exact
 * name (a trailing '*' is how a stream names a prefix), an event name of one line. */
static bool event_ok(const char *channel, size_t cl, const char *event, unsigned flags)
{
        if (flags & ~(unsigned)M0_PUBLISH_TRANSIENT)
                return false;
        if (!m0__channel_ok(channel, cl) || channel[cl - 1] == '*')
                return false;
        return !event || (*event && !strpbrk(event, "\r\n"));
}

/* Lines of `data[0, n)`: CR LF, LF and a lone CR all end one for an EventSource. */
static size_t data_lines(const char *data, size_t n)
{
        size_t lines = 1;
        for (size_t i = 0; i < n; i++)
                lines +=
                        data[i] == '\n' || (data[i] == '\r' && (i + 1 == n || data[i + 1] != '\n'));
        return lines;
}

/* `data` as `data:` lines at p, each line of the data its own (no byte of it can start a field
 * of its own); returns the end. */
static char *put_data(char *p, const char *s, size_t n)
{
        const char *end = s + n;
        for (;;) {
                const char *e = s;
                while (e < end && *e != '\r' && *e != '\n')
                        e++;
                memcpy(p, "data: ", 6);
                memcpy(p + 6, s, (size_t)(e - s));
                p += 6 + (e - s);
                *p++ = '\n';
                if (e == end)
                        return p;
                s = e + ((e[0] == '\r' && e + 1 < end && e[1] == '\n') ? 2 : 1);
        }
}

/* "event: T\ndata: …\n\n" after ID_ROOM spare bytes for the id line, then the channel's name. */
static struct m0_frame *frame_build(const char *channel, size_t cl, const char *event,
                                    const char *data, size_t dn, bool transient)
{
        size_t en = event ? strlen(event) : 0;
        size_t text = (event ? 8 + en : 0) + dn + data_lines(data, dn) * 7 + 1;
        size_t size = sizeof(struct m0_frame) + ID_ROOM + text + cl + 1;
        struct m0_frame *f = malloc(size);
        if (!f)
                return NULL;
        memset(f, 0, sizeof(*f));
        char *p = f->bytes + ID_ROOM;
        if (event) {
                memcpy(p, "event: ", 7);
                memcpy(p + 7, event, en);
                p[7 + en] = '\n';
                p += 8 + en;
        }
        p = put_data(p, data, dn);
        *p++ = '\n';
        f->start = ID_ROOM;
        f->end = (size_t)(p - f->bytes);
        memcpy(p, channel, cl);
        p[cl] = '\0';
        f->chan = p;
        f->chan_len = (uint16_t)cl;
        f->hash = m0__hash(channel, cl);
        f->transient = transient;
        f->alloc = (uint32_t)size;
        f->log_pos = M0__NO_LOG;
        atomic_init(&f->refs, 1);
        return f;
}

struct m0_frame *m0__frame_restored(uint64_t id, const char *channel, size_t chan_len,
                                    const char *text, size_t len)
{
        size_t size = sizeof(struct m0_frame) + len + chan_len + 1;
        struct m0_frame *f = malloc(size);
        if (!f)
                return NULL;
        memset(f, 0, sizeof(*f));
        memcpy(f->bytes, text, len);
        memcpy(f->bytes + len, channel, chan_len);
        f->bytes[len + chan_len] = '\0';
        f->chan = f->bytes + len;
        f->chan_len = (uint16_t)chan_len;
        f->hash = m0__hash(channel, chan_len);
        f->id = id;
        f->end = len;
        f->alloc = (uint32_t)size;
        f->log_pos = M0__NO_LOG;
        atomic_init(&f->refs, 1);
        return f;
}

/* The id line into the room before the text. */
static void frame_number(struct m0_frame *f, uint64_t id)
{
        char idl[ID_ROOM];
        int n = snprintf(idl, sizeof(idl), "id: %llu\n", (unsigned long long)id);
        f->start = ID_ROOM - (size_t)n;
        memcpy(f->bytes + f->start, idl, (size_t)n);
        f->id = id;
}

/* ---- the loops' interest (N5): a bit per loop per channel or prefix it follows ---- */

/* The loops that follow `f`'s channel, into mask; false when none does. Under the lock. */
static bool followers(struct m0_bus *b, const struct m0_frame *f, uint64_t *mask)
{
        size_t nw = words(b);
        bool any = false;
        memset(mask, 0, nw * sizeof(*mask));
        struct m0_hnode *n = m0__hmap_find(&b->follow_exact, f->hash, f->chan, f->chan_len);
        for (int i = -1; i < b->nprefix_lens; i++) {
                if (i >= 0) {
                        size_t k = b->prefix_lens[i];
                        if (k > f->chan_len)
                                break;
                        uint64_t h = k == f->chan_len ? f->hash : m0__hash(f->chan, k);
                        n = m0__hmap_find(&b->follow_prefix, h, f->chan, k);
                }
                if (!n)
                        continue;
                struct m0_interest *in = M0__CONTAINER_OF(n, struct m0_interest, node);
                for (size_t w = 0; w < nw; w++)
                        mask[w] |= in->mask[w];
                any = true;
        }
        return any;
}

/* The lengths that have prefixes followed, ascending, after one came or went. */
static void prefix_lens(struct m0_bus *b)
{
        b->nprefix_lens = 0;
        for (int k = 0; k <= M0__CHANNEL_MAX; k++)
                if (b->prefix_count[k])
                        b->prefix_lens[b->nprefix_lens++] = (uint8_t)k;
}

static int follow_locked(struct m0_bus *b, int loop, const struct m0_key *k)
{
        struct m0_hmap *m = k->prefix ? &b->follow_prefix : &b->follow_exact;
        struct m0_hnode *n = m0__hmap_find(m, k->hash, k->name, k->len);
        struct m0_interest *in;
        if (n) {
                in = M0__CONTAINER_OF(n, struct m0_interest, node);
        } else {
                size_t mw = M0__BUS_WORDS * sizeof(uint64_t);
                in = calloc(1, sizeof(*in) + mw + k->len + 1);
                if (!in)
                        return -ENOMEM;
                char *name = (char *)in->mask + mw;
                memcpy(name, k->name, k->len);
                in->node = (struct m0_hnode){.hash = k->hash, .key = name, .len = k->len};
                (void)m0__hmap_insert(m, &in->node);
                if (k->prefix && b->prefix_count[k->len]++ == 0)
                        prefix_lens(b);
        }
        uint64_t bit = UINT64_C(1) << (loop % 64);
        if (!(in->mask[loop / 64] & bit)) {
                in->mask[loop / 64] |= bit;
                in->nloops++;
        }
        return 0;
}

static void unfollow_locked(struct m0_bus *b, int loop, const struct m0_key *k)
{
        struct m0_hmap *m = k->prefix ? &b->follow_prefix : &b->follow_exact;
        struct m0_hnode *n = m0__hmap_find(m, k->hash, k->name, k->len);
        if (!n)
                return;
        struct m0_interest *in = M0__CONTAINER_OF(n, struct m0_interest, node);
        uint64_t bit = UINT64_C(1) << (loop % 64);
        if (in->mask[loop / 64] & bit) {
                in->mask[loop / 64] &= ~bit;
                in->nloops--;
        }
        if (in->nloops)
                return;
        m0__hmap_remove(m, n);
        if (k->prefix && --b->prefix_count[k->len] == 0)
                prefix_lens(b);
        free(in);
}

int m0__bus_follow(struct m0_bus *b, int loop, const struct m0_key *k)
{
        pthread_mutex_lock(&b->lock);
        int r = follow_locked(b, loop, k);
        pthread_mutex_unlock(&b->lock);
        return r;
}

void m0__bus_unfollow(struct m0_bus *b, int loop, const struct m0_key *k)
{
        pthread_mutex_lock(&b->lock);
        unfollow_locked(b, loop, k);
        pthread_mutex_unlock(&b->lock);
}

int m0__bus_subscribe(struct m0_bus *b, int loop, const struct m0_key *add, size_t nadd,
                      const struct m0_key *keys, size_t nkeys, bool replay, uint64_t after,
                      struct m0_fvec *out, const struct m0_gap_sink *gaps,
                      struct m0_subscribed *ret)
{
        int r = 0;
        size_t done = 0;
        pthread_mutex_lock(&b->lock);
        for (; r == 0 && done < nadd; done++)
                r = follow_locked(b, loop, &add[done]);
        struct m0_subscribed s = {.last = b->last_id, .seq = ++b->seq};
        s.ahead = replay && after > s.last;
        if (b->shared && replay && !s.ahead) {
                /* What this host delivered past `floor` and past its start is all here. */
                uint64_t from = b->shared_from > b->replay.floor ? b->shared_from : b->replay.floor;
                s.table = after < from;
        }
        bool local = replay && !s.table && !(s.ahead && b->shared);
        if (r == 0 && local)
                r = m0__replay_collect(&b->replay, keys, nkeys, s.ahead ? 0 : after, out,
                                       s.ahead ? NULL : gaps);
        if (r < 0)
                while (done--)
                        unfollow_locked(b, loop, &add[done]);
        pthread_mutex_unlock(&b->lock);
        if (r < 0)
                return r;
        *ret = s;
        return 0;
}

/* ---- the loops' queues (D44, D45) ---- */

/* A full queue, or one refusing since it was: the loop learns of the refusal once it has taken
 * what came before, and nothing after the first refusal may reach it before then. */
static void refuse(struct m0_bus *b, struct m0_loopq *q, const struct m0_frame *f)
{
        if (f->transient) {
                q->dropped++;
                return;
        }
        if (q->refused++ == 0)
                q->refused_from = f->id;
        q->refused_last = f->id;
        if (q->all)
                return;
        struct m0_hnode *n = m0__hmap_find(&q->chans, f->hash, f->chan, f->chan_len);
        if (n) {
                M0__CONTAINER_OF(n, struct m0_refused_chan, node)->last = f->id;
                return;
        }
        struct m0_refused_chan *c = NULL;
        if (q->chans.n < b->q_cap)
                c = malloc(sizeof(*c) + f->chan_len + 1);
        if (!c) {
                q->all = true; /* every stream behind the newest refused id is then closed */
                return;
        }
        memcpy(c->name, f->chan, f->chan_len + 1u);
        c->node = (struct m0_hnode){.hash = f->hash, .key = c->name, .len = f->chan_len};
        c->last = f->id;
        (void)m0__hmap_insert(&q->chans, &c->node);
}

/* Queue `f` on every loop of `mask`. Under the lock. */
static void enqueue(struct m0_bus *b, struct m0_frame *f, const uint64_t *mask)
{
        unsigned queued = 0;
        for (int i = 0; i < b->nloops; i++) {
                if (!(mask[i / 64] & (UINT64_C(1) << (i % 64))))
                        continue;
                struct m0_loopq *q = &b->qs[i];
                if (q->refused || q->dropped || q->count == b->q_cap) {
                        refuse(b, q, f);
                        continue;
                }
                q->q[(q->head + q->count++) % b->q_cap] = f;
                queued++;
        }
        /* Nobody can take the frame before the lock is released. */
        atomic_fetch_add_explicit(&f->refs, queued, memory_order_relaxed);
}

/* The numbered event `f` goes where it is followed and into the stores. Under the lock; true
 * when some loop is to be woken (mask). */
static bool accept_locked(struct m0_bus *b, struct m0_frame *f, uint64_t *mask)
{
        f->seq = ++b->seq;
        if (f->transient) {
                m0__count(&b->transient, 1);
        } else {
                b->last_id = f->id;
                /* Not kept for want of memory: it is still delivered live. Whatever the replay
                 * store gives up to keep it within its bounds was pushed out by it (O1). */
                uint64_t kept = b->replay.frames;
                kept += m0__replay_keep(&b->replay, f) == 0;
                m0__count(&b->evicted, kept - b->replay.frames);
                if (b->store)
                        m0__store_set_last(b->store, f->id); /* after its copy (D19) */
                m0__count(&b->published, 1);
        }
        if (!followers(b, f, mask)) {
                m0__count(&b->unfollowed, 1);
                return false;
        }
        enqueue(b, f, mask);
        return true;
}

/*
 * Taking `id` would pass the durable lease (N3, D76): the writer is poked once, and the publish
 * waits for a lease past `id` -- the uncommon case, when ids are taken faster than the writer
 * keeps its headroom. Under the lock.
 */
static void lease_wait(struct m0_bus *b, uint64_t id)
{
        if (!b->lease_poked && b->lease_fd >= 0) {
                uint64_t one = 1;
                ssize_t w = write(b->lease_fd, &one, sizeof(one));
                (void)w; /* EAGAIN: it is poked already */
                b->lease_poked = true;
        }
        while (id > b->lease) {
                m0__count(&b->lease_waits, 1);
                pthread_cond_wait(&b->lease_cond, &b->lock);
        }
}

static int validate(const char *channel, const char *event, const char *data, size_t dn,
                    unsigned flags, size_t *ret_cl)
{
        if (!channel)
                return -EINVAL;
        size_t cl = strnlen(channel, M0__CHANNEL_MAX + 1);
        if (!event_ok(channel, cl, event, flags) || (data && memchr(data, '\0', dn)))
                return -EINVAL;
        *ret_cl = cl;
        return 0;
}

int m0__bus_deliver(struct m0_bus *b, uint64_t id, const char *channel, const char *event,
                    const char *data, size_t data_len, unsigned flags)
{
        size_t cl;
        bool transient = flags & M0_PUBLISH_TRANSIENT;
        int r = validate(channel, event, data, data_len, flags, &cl);
        if (r < 0 || transient != (id == 0))
                return -EINVAL;
        if (id > M0__ID_MAX)
                return -EOVERFLOW;
        struct m0_frame *f = frame_build(channel, cl, event, data ? data : "", data_len, transient);
        if (!f)
                return -ENOMEM;
        if (!transient)
                frame_number(f, id);
        uint64_t mask[M0__BUS_WORDS];
        pthread_mutex_lock(&b->lock);
        bool wake = false;
        if (!transient && M0__UNLIKELY(b->shared_from == UINT64_MAX))
                b->shared_from = id - 1; /* a shared bus's first: nothing before it came here */
        if (transient || id > b->last_id)
                wake = accept_locked(b, f, mask);
        else
                r = -EINVAL;
        pthread_mutex_unlock(&b->lock);
        if (wake && b->wake)
                b->wake(b->wake_ud, mask);
        m0__frame_unref(f);
        return r;
}

int64_t m0__bus_publish(struct m0_bus *b, const char *channel, const char *event, const char *data,
                        unsigned flags)
{
        size_t cl;
        size_t dn = data ? strlen(data) : 0;
        int r = validate(channel, event, data, dn, flags, &cl);
        if (r < 0)
                return r;
        bool transient = flags & M0_PUBLISH_TRANSIENT;
        if (b->shared && !transient) {
                /* The database gives the id; the event comes back through m0__bus_deliver like
                 * every other host's (D93). A stopped bus is no host running. */
                r = m0__pgbus_mod->publish(b->shared, channel, event, data ? data : "");
                return r == -ESHUTDOWN ? -ENOTCONN : r;
        }
        struct m0_frame *f = frame_build(channel, cl, event, data ? data : "", dn, transient);
        if (!f)
                return -ENOMEM;
        uint64_t mask[M0__BUS_WORDS];
        uint64_t id = 0;
        pthread_mutex_lock(&b->lock);
        if (!transient && b->last_id >= M0__ID_MAX) {
                pthread_mutex_unlock(&b->lock);
                m0__frame_unref(f);
                return -EOVERFLOW; /* D46: every id handed out is one the next start takes back */
        }
        if (!transient) {
                id = b->last_id + 1;
                if (M0__UNLIKELY(id > b->lease_low))
                        lease_wait(b, id);
                frame_number(f, id);
        }
        bool wake = accept_locked(b, f, mask);
        pthread_mutex_unlock(&b->lock);
        if (wake && b->wake)
                b->wake(b->wake_ud, mask);
        m0__frame_unref(f);
        return (int64_t)id;
}

size_t m0__bus_take_queue(struct m0_bus *b, int loop, struct m0_frame **out, size_t max,
                          struct m0_refusal *ret_refused)
{
        struct m0_refusal none = {0};
        size_t n = 0;
        pthread_mutex_lock(&b->lock);
        if (loop >= 0 && loop < b->nloops) {
                struct m0_loopq *q = &b->qs[loop];
                /* The queue's references pass to the caller. */
                for (; n < max && q->count; n++, q->count--) {
                        out[n] = q->q[q->head];
                        q->q[q->head] = NULL;
                        q->head = (q->head + 1) % b->q_cap;
                }
                if (q->count == 0 && (q->refused || q->dropped)) {
                        none = (struct m0_refusal){.count = q->refused,
                                                   .from = q->refused_from,
                                                   .last = q->refused_last,
                                                   .dropped = q->dropped,
                                                   .chans = q->chans,
                                                   .all = q->all};
                        q->refused = q->dropped = 0;
                        q->chans = (struct m0_hmap){0};
                        q->all = false;
                }
        }
        pthread_mutex_unlock(&b->lock);
        *ret_refused = none;
        return n;
}

uint64_t m0__bus_last(struct m0_bus *b)
{
        pthread_mutex_lock(&b->lock);
        uint64_t id = b->last_id;
        pthread_mutex_unlock(&b->lock);
        return id;
}

void m0__bus_stats(struct m0_bus *b, struct m0_bus_stats *ret)
{
        *ret = (struct m0_bus_stats){.published = m0__counter_read(&b->published),
                                     .evicted = m0__counter_read(&b->evicted),
                                     .transient = m0__counter_read(&b->transient),
                                     .unfollowed = m0__counter_read(&b->unfollowed),
                                     .lease_waits = m0__counter_read(&b->lease_waits),
                                     .chans_evicted = m0__counter_read(&b->replay.evicted),
                                     .past_bound = m0__counter_read(&b->replay.dropped)};
}

void m0__bus_set_last(struct m0_bus *b, uint64_t last)
{
        pthread_mutex_lock(&b->lock);
        b->last_id = last;
        if (b->store)
                m0__store_set_last(b->store, last);
        pthread_mutex_unlock(&b->lock);
}

void m0__bus_shared_start(struct m0_bus *b, uint64_t from)
{
        pthread_mutex_lock(&b->lock);
        if (b->last_id < from)
                b->last_id = from;
        if (b->shared_from == UINT64_MAX)
                b->shared_from = from;
        pthread_mutex_unlock(&b->lock);
}

struct m0_frame *m0__frame_event(uint64_t id, const char *channel, const char *event,
                                 const char *data, size_t data_len)
{
        size_t cl;
        if (id == 0 || id > M0__ID_MAX || validate(channel, event, data, data_len, 0, &cl) < 0)
                return NULL;
        struct m0_frame *f = frame_build(channel, cl, event, data ? data : "", data_len, false);
        if (f)
                frame_number(f, id);
        return f;
}

struct m0_frame *m0__frame_unnumbered(const char *channel, const char *event, const char *data,
                                      size_t data_len)
{
        size_t cl;
        if (validate(channel, event, data, data_len, 0, &cl) < 0)
                return NULL;
        return frame_build(channel, cl, event, data ? data : "", data_len, true);
}

/* ---- a replay being gathered ---- */

int m0__fvec_push(struct m0_fvec *v, struct m0_frame *f)
{
        if (v->n == v->cap) {
                size_t cap = v->cap ? v->cap * 2 : 64;
                struct m0_frame **p = realloc(v->v, cap * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                v->v = p;
                v->cap = cap;
        }
        v->v[v->n++] = f;
        return 0;
}

static int by_id(const void *a, const void *b)
{
        uint64_t x = (*(struct m0_frame *const *)a)->id, y = (*(struct m0_frame *const *)b)->id;
        return x < y ? -1 : x > y;
}

void m0__fvec_sort(struct m0_fvec *v)
{
        if (v->n > 1)
                qsort(v->v, v->n, sizeof(*v->v), by_id);
        size_t k = 0;
        for (size_t i = 0; i < v->n; i++) {
                if (k && v->v[k - 1]->id == v->v[i]->id) {
                        m0__frame_unref(v->v[i]); /* a channel two keys of the stream name */
                        continue;
                }
                v->v[k++] = v->v[i];
        }
        v->n = k;
}

void m0__fvec_free(struct m0_fvec *v)
{
        for (size_t i = 0; i < v->n; i++)
                m0__frame_unref(v->v[i]);
        free(v->v);
        *v = (struct m0_fvec){0};
}

int64_t m0_publish(const char *channel, const char *event, const char *data, unsigned flags)
{
        if (!m0__bus_global)
                return -ENOTCONN;
        return m0__bus_publish(m0__bus_global, channel, event, data, flags);
}

uint64_t m0_bus_last_id(void)
{
        return m0__bus_global ? m0__bus_last(m0__bus_global) : 0;
}
