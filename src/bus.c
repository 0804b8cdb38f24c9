/* SPDX-License-Identifier: MIT */
/* bus.c: one bus per process, one channel per loop, a replay ring of the last K frames (B1–B3). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bus.h"
#include "crash.h"
#include "host.h"
#include "loop.h"
#include "store.h"

/*
 * A publish takes the next id, keeps the frame in the replay ring and queues a reference to it
 * on every loop's channel but the skipped one, all under the bus lock, so that each channel
 * holds its frames in id order (D44). A loop woken by it takes its channel's frames (a handful
 * of pointer copies under the lock) and writes them to its streams outside it. A frame stays
 * alive while a channel holds it, however far the ring has moved on. A channel that is full
 * refuses frames, and its loop closes the streams that would miss them: their clients reconnect
 * with Last-Event-ID and get them from the ring.
 */

#define ID_ROOM 32 /* "id: 18446744073709551615\n" fits */

struct m0_bus *m0__bus_global;

int m0__bus_init(struct m0_bus *b, size_t cap, int nchans, size_t chan_cap)
{
        memset(b, 0, sizeof(*b));
        pthread_mutex_init(&b->lock, NULL);
        b->cap = cap ? cap : 1;
        b->ring = calloc(b->cap, sizeof(*b->ring));
        b->chan_cap = chan_cap ? chan_cap : 1;
        b->chans = calloc(nchans > 0 ? (size_t)nchans : 1, sizeof(*b->chans));
        if (!b->ring || !b->chans)
                return -ENOMEM;
        for (; b->nchans < nchans; b->nchans++) {
                b->chans[b->nchans].q = calloc(b->chan_cap, sizeof(*b->chans[0].q));
                if (!b->chans[b->nchans].q)
                        return -ENOMEM;
        }
        return 0;
}

void m0__frame_unref(struct m0_frame *f)
{
        if (f && atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1)
                free(f);
}

void m0__bus_destroy(struct m0_bus *b)
{
        m0__store_close(b);
        for (int i = 0; b->chans && i < b->nchans; i++) {
                struct m0_chan *ch = &b->chans[i];
                for (; ch->count; ch->count--, ch->head = (ch->head + 1) % b->chan_cap)
                        m0__frame_unref(ch->q[ch->head]);
                free(ch->q);
        }
        free(b->chans);
        b->chans = NULL;
        b->nchans = 0;
        if (!b->ring)
                return;
        for (size_t i = 0; i < b->cap; i++)
                m0__frame_unref(b->ring[i]);
        free(b->ring);
        b->ring = NULL;
        pthread_mutex_destroy(&b->lock);
}

/* The frame kept for `id`, or NULL when it is not in the ring. Under the lock. */
static struct m0_frame *slot(struct m0_bus *b, uint64_t id)
{
        if (id == 0 || id > b->last_id || b->last_id - id >= b->count)
                return NULL;
        struct m0_frame *f = b->ring[id % b->cap];
        return f && f->id == id ? f : NULL;
}

/* Build "event: T\ndata: …\n\n" after ID_ROOM spare bytes the id line is written into. */
static struct m0_frame *frame_build(const char *event, const char *data)
{
        size_t dn = strlen(data);
        size_t lines = 1;
        for (size_t i = 0; i < dn; i++)
                lines += data[i] == '\n' || data[i] == '\r';
        size_t en = event ? strlen(event) : 0;
        size_t size = ID_ROOM + (event ? 8 + en : 0) + dn + lines * 7 + 2;
        struct m0_frame *f = malloc(sizeof(*f) + size);
        if (!f)
                return NULL;
        char *p = f->bytes + ID_ROOM;
        if (event) {
                memcpy(p, "event: ", 7);
                p += 7;
                memcpy(p, event, en);
                p += en;
                *p++ = '\n';
        }
        /* CR LF, LF and a lone CR all end a line for an EventSource: each becomes its own
         * `data:` line, so no byte of the data can start a field of its own. */
        const char *s = data;
        for (;;) {
                size_t n = strcspn(s, "\r\n");
                memcpy(p, "data: ", 6);
                p += 6;
                memcpy(p, s, n);
                p += n;
                *p++ = '\n';
                s += n;
                if (!*s)
                        break;
                s += (s[0] == '\r' && s[1] == '\n') ? 2 : 1;
        }
        *p++ = '\n';
        f->end = (size_t)(p - f->bytes);
        atomic_init(&f->refs, 1);
        return f;
}

int64_t m0__bus_publish(struct m0_bus *b, const char *event, const char *data, int skip_loop)
{
        if (event && (strpbrk(event, "\r\n") || !*event))
                return -EINVAL;
        struct m0_frame *f = frame_build(event, data ? data : "");
        if (!f)
                return -ENOMEM;
        f->skip = skip_loop;
        pthread_mutex_lock(&b->lock);
        if (b->last_id >= M0__ID_MAX) {
                pthread_mutex_unlock(&b->lock);
                m0__frame_unref(f);
                return -EOVERFLOW;
        }
        uint64_t id = ++b->last_id;
        char idl[ID_ROOM];
        int n = snprintf(idl, sizeof(idl), "id: %llu\n", (unsigned long long)id);
        f->start = ID_ROOM - (size_t)n;
        memcpy(f->bytes + f->start, idl, (size_t)n);
        f->id = id;
        struct m0_frame **s = &b->ring[id % b->cap];
        struct m0_frame *old = *s;
        *s = f;
        if (b->count < b->cap)
                b->count++;
        m0__count(&b->published, 1);
        if (old)
                m0__count(&b->evicted, 1);
        if (b->store)
                m0__store_note(b, f);
        unsigned queued = 0;
        for (int i = 0; i < b->nchans; i++) {
                struct m0_chan *ch = &b->chans[i];
                if (i == skip_loop)
                        continue;
                /* Full, or refusing since it was: the loop learns of it once it has taken what
                 * came before, and nothing after the first refusal may reach it before then. */
                if (ch->refused || ch->count == b->chan_cap) {
                        if (ch->refused++ == 0)
                                ch->refused_from = id;
                        ch->refused_last = id;
                        continue;
                }
                ch->q[(ch->head + ch->count++) % b->chan_cap] = f;
                queued++;
        }
        /* Nobody can take the frame before the lock is released. */
        atomic_fetch_add_explicit(&f->refs, queued, memory_order_relaxed);
        pthread_mutex_unlock(&b->lock);
        m0__frame_unref(old);
        if (b->wake)
                b->wake(b->wake_ud, skip_loop);
        return (int64_t)id;
}

size_t m0__bus_take(struct m0_bus *b, uint64_t after, struct m0_frame **out, size_t max,
                    uint64_t *ret_last, uint64_t *ret_lost)
{
        size_t n = 0;
        pthread_mutex_lock(&b->lock);
        uint64_t oldest = b->last_id - b->count + 1;
        *ret_lost = 0;
        if (after + 1 < oldest && b->count) {
                *ret_lost = oldest - after - 1;
                after = oldest - 1;
        }
        uint64_t id = after + 1;
        for (; id <= b->last_id && n < max; id++) {
                struct m0_frame *f = slot(b, id);
                if (!f)
                        continue;
                atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
                out[n++] = f;
        }
        *ret_last = id - 1;
        pthread_mutex_unlock(&b->lock);
        return n;
}

size_t m0__bus_take_channel(struct m0_bus *b, int chan, struct m0_frame **out, size_t max,
                            struct m0_refusal *ret_refused)
{
        struct m0_refusal none = {0};
        size_t n = 0;
        pthread_mutex_lock(&b->lock);
        if (chan >= 0 && chan < b->nchans) {
                struct m0_chan *ch = &b->chans[chan];
                /* The channel's references pass to the caller. */
                for (; n < max && ch->count; n++, ch->count--) {
                        out[n] = ch->q[ch->head];
                        ch->q[ch->head] = NULL;
                        ch->head = (ch->head + 1) % b->chan_cap;
                }
                if (ch->count == 0 && ch->refused) {
                        none = (struct m0_refusal){.count = ch->refused,
                                                   .from = ch->refused_from,
                                                   .last = ch->refused_last};
                        ch->refused = 0;
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
                                     .evicted = m0__counter_read(&b->evicted)};
}

int64_t m0_publish(const char *event, const char *data, int skip_loop)
{
        if (!m0__bus_global)
                return -ENOTCONN;
        return m0__bus_publish(m0__bus_global, event, data, skip_loop);
}

uint64_t m0_bus_last_id(void)
{
        return m0__bus_global ? m0__bus_last(m0__bus_global) : 0;
}
