/* SPDX-License-Identifier: MIT */
/* bus.h: bus.c, one bus per process: ids, the replay ring, and a channel per loop (B1-B3). */
#ifndef M0_BUS_H
#define M0_BUS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"

struct m0_store;

/* The largest event id: 2^62. No process of ours reaches it (146 years at a billion events a
 * second); a publish past it is refused (-EOVERFLOW), and a passed store holding a larger one is
 * none of ours (D46), so every id a bus hands out is one its fd store takes back. */
#define M0__ID_MAX (UINT64_C(1) << 62)

/* One published event, formatted once: bytes[start, end) is "id: N\nevent: T\ndata: …\n\n".
 * Immutable once published; reference-counted by the ring, and by the channels and loops that
 * hold it. */
struct m0_frame {
        atomic_uint refs;
        uint64_t id;
        int skip; /* the loop that does not deliver it, or -1 */
        size_t start, end;
        char bytes[];
};

/*
 * One loop's channel (B1, D44, D45): references to the frames published for it since it last
 * took them, oldest first, at most `chan_cap`. A frame that finds it full is refused, and so is
 * every one after it until the loop has taken the whole queue and learnt of the refusal, which
 * it answers by closing the streams that would miss them. Written by publishers, emptied by its
 * loop, both under the bus lock.
 */
struct m0_chan {
        struct m0_frame **q; /* q[(head + i) % cap], i < count */
        size_t head, count;
        uint64_t refused;      /* frames refused since the loop last took the queue */
        uint64_t refused_from; /* the first of them */
        uint64_t refused_last; /* the newest of them */
};

/* What a loop learns from its channel when the frames it took end where refusals began. */
struct m0_refusal {
        uint64_t count, from, last; /* count 0: none */
};

struct m0_bus {
        pthread_mutex_t lock;
        struct m0_frame **ring; /* frame of id i at ring[i % cap] */
        size_t cap, count;
        uint64_t last_id;      /* ids are contiguous: the next one is last_id + 1 */
        struct m0_chan *chans; /* one per loop */
        int nchans;
        size_t chan_cap;
        void (*wake)(void *ud, int skip_loop);
        void *wake_ud;
        struct m0_store *store; /* the memfd in systemd's fd store (B4), or NULL */
        /* For the metrics (O1): written under `lock`, read by m0__bus_stats() without it. */
        m0_counter published; /* events published since the process started */
        m0_counter evicted;   /* events pushed out of the replay ring by newer ones */
};

/* What the bus counted, for the metrics (O1). Named channels (N1, N4) add theirs here: channels
 * evicted, and replays per channel. */
struct m0_bus_stats {
        uint64_t published;
        uint64_t evicted;
};

extern struct m0_bus *m0__bus_global; /* set once before any thread exists */
/* A bus keeping `cap` frames for replay, with `nchans` channels of `chan_cap` frames each. */
int m0__bus_init(struct m0_bus *b, size_t cap, int nchans, size_t chan_cap);
void m0__bus_destroy(struct m0_bus *b);
int64_t m0__bus_publish(struct m0_bus *b, const char *event, const char *data, int skip_loop);
/*
 * Take references to up to `max` kept frames with ids after `after`, oldest first. *ret_last is
 * the id the caller is now up to; *ret_lost counts frames after `after` no longer kept.
 */
size_t m0__bus_take(struct m0_bus *b, uint64_t after, struct m0_frame **out, size_t max,
                    uint64_t *ret_last, uint64_t *ret_lost);
/*
 * Take references to up to `max` frames from channel `chan`, oldest first (the loop's thread).
 * When they end where the channel began refusing frames, *ret_refused says which it refused
 * (count 0 otherwise), and the channel takes frames again.
 */
size_t m0__bus_take_channel(struct m0_bus *b, int chan, struct m0_frame **out, size_t max,
                            struct m0_refusal *ret_refused);
uint64_t m0__bus_last(struct m0_bus *b);
/* The bus's counters, without its lock (any thread). */
void m0__bus_stats(struct m0_bus *b, struct m0_bus_stats *ret);
void m0__frame_unref(struct m0_frame *f);

#endif /* M0_BUS_H */
