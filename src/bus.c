/* SPDX-License-Identifier: MIT */
/* bus.c: one bus per process, one channel per loop, a replay ring of the last K frames (B1–B3). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/*
 * The ring is the channel: a loop woken by a publish takes every frame newer than the last one
 * it delivered, in id order, under the bus lock (a handful of pointer copies), and writes them to
 * its streams outside it. A loop that falls more than K frames behind loses the oldest ones: they
 * are counted as dropped, and its streams' clients get them back with Last-Event-ID while kept.
 */

#define ID_ROOM 32 /* "id: 18446744073709551615\n" fits */

struct m0_bus *m0__bus_global;

int m0__bus_init(struct m0_bus *b, size_t cap)
{
        memset(b, 0, sizeof(*b));
        pthread_mutex_init(&b->lock, NULL);
        b->cap = cap ? cap : 1;
        b->ring = calloc(b->cap, sizeof(*b->ring));
        return b->ring ? 0 : -ENOMEM;
}

void m0__frame_unref(struct m0_frame *f)
{
        if (f && atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1)
                free(f);
}

void m0__bus_destroy(struct m0_bus *b)
{
        m0__store_close(b);
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
        if (b->store)
                m0__store_note(b, f);
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

uint64_t m0__bus_last(struct m0_bus *b)
{
        pthread_mutex_lock(&b->lock);
        uint64_t id = b->last_id;
        pthread_mutex_unlock(&b->lock);
        return id;
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
