/* SPDX-License-Identifier: MIT */
/* bus.h: bus.c, one bus per process: one id sequence, named channels, a queue per loop fed only
 * when the loop follows the channel, the replay store (N1-N5, B1, B2, D44, D45). */
#ifndef M0_BUS_H
#define M0_BUS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hmap.h"
#include "list.h"
#include "metrics.h"
#include "replay.h"

struct m0_pgbus;
struct m0_store;

/* The largest event id: 2^62. No process of ours reaches it (146 years at a billion events a
 * second); a publish past it is refused (-EOVERFLOW), and a passed store holding a larger one is
 * none of ours (D46), so every id a bus hands out is one its fd store takes back. */
#define M0__ID_MAX (UINT64_C(1) << 62)

/* A channel's name: 1–200 bytes of visible ASCII (N1); a trailing '*' names a prefix instead. */
#define M0__CHANNEL_MAX 200
/* The most loops a bus serves: M0_THREADS' bound. */
#define M0__BUS_LOOPS_MAX 1024
#define M0__BUS_WORDS ((M0__BUS_LOOPS_MAX + 63) / 64)
/* M0_STREAM_MAX_CHANNELS' default, for a stream begun with no bus running (unit tests). */
#define M0__STREAM_CHANNELS_DEFAULT 16
/* log_pos of a frame the fd store holds no copy of. */
#define M0__NO_LOG UINT64_MAX

/*
 * One event, formatted once: bytes[start, end) is what a stream is sent ("id: N\nevent: T\n
 * data: …\n\n", without the id line for a transient event). Immutable once published but for
 * the fd store's fields, which only the bus lock's holder touches; reference-counted by the
 * replay store and by the loops' queues.
 */
struct m0_frame {
        atomic_uint refs;
        bool transient;
        uint16_t chan_len;
        uint32_t alloc;   /* bytes of this allocation, for the replay store's accounting */
        uint64_t id;      /* 0 for a transient event */
        uint64_t seq;     /* the bus's count of events and streams begun, when it was published */
        uint64_t hash;    /* m0__hash() of the channel */
        const char *chan; /* the channel, NUL-terminated, inside bytes[] */
        size_t start, end;
        uint64_t log_pos;   /* where the fd store's copy starts, or M0__NO_LOG */
        struct m0_link log; /* on the fd store's list, in log order */
        char bytes[];
};

/* A channel as a stream names it: an exact name, or a prefix (`room:` for `room:*`). */
struct m0_key {
        const char *name;
        uint16_t len;
        bool prefix;
        uint64_t hash; /* m0__hash(name, len) */
};

/* A growing array of frame references (a replay being gathered). */
struct m0_fvec {
        struct m0_frame **v;
        size_t n, cap;
};

/* One channel of the frames a full queue refused: the newest of them (D45, D74). */
struct m0_refused_chan {
        struct m0_hnode node;
        uint64_t last;
        char name[];
};

/*
 * One loop's queue (D44's channel): references to the frames published for it since it last
 * took them, oldest first, at most `q_cap`. A frame that finds it full is refused, and so is
 * every one after it until the loop has taken the whole queue and learnt of the refusals, which
 * it answers by closing the streams that would miss them. Written by publishers, emptied by its
 * loop, both under the bus lock.
 */
struct m0_loopq {
        struct m0_frame **q; /* q[(head + i) % cap], i < count */
        size_t head, count;
        uint64_t refused;      /* kept frames refused since the loop last took the queue */
        uint64_t refused_from; /* the first of them */
        uint64_t refused_last; /* the newest of them */
        uint64_t dropped;      /* transient frames refused meanwhile */
        struct m0_hmap chans;  /* of m0_refused_chan: each channel refused, its newest id */
        bool all;              /* more channels than q_cap refused: `chans` is incomplete */
};

/* What a loop learns from its queue when the frames it took end where refusals began; its
 * `chans` (and their nodes) are the loop's to free with m0__refusal_free(). */
struct m0_refusal {
        uint64_t count, from, last; /* kept frames; count 0: none */
        uint64_t dropped;           /* transient frames */
        struct m0_hmap chans;
        bool all;
};

/* Which loops follow a channel, or a prefix (N5): one bit per loop whose index holds it. */
struct m0_interest {
        struct m0_hnode node;
        uint32_t nloops; /* bits set */
        uint64_t mask[]; /* M0__BUS_WORDS words, then the name */
};

struct m0_bus {
        pthread_mutex_t lock;
        uint64_t last_id; /* the newest kept id: ids are one contiguous sequence (N2) */
        uint64_t seq;     /* events published and streams begun, in the order they took the lock */
        struct m0_replay replay;
        struct m0_loopq *qs; /* one per loop */
        int nloops;
        size_t q_cap;
        /* The loops' interest, written by each loop for its own bit, read by publishers. */
        struct m0_hmap follow_exact, follow_prefix;
        uint32_t prefix_count[M0__CHANNEL_MAX + 1]; /* prefixes followed, by length */
        uint8_t prefix_lens[M0__CHANNEL_MAX + 1];   /* the lengths with a count, ascending */
        int nprefix_lens;
        /* Wake the loops whose bits are set in `mask` (M0__BUS_WORDS words); outside the lock. */
        void (*wake)(void *ud, const uint64_t *mask);
        void *wake_ud;
        struct m0_store *store; /* the memfd in systemd's fd store (B4, N6), or NULL */
        /* N3: ids up to `lease` are durable in the state directory (lease.c); taking one past
         * `lease_low` pokes its writer, past `lease` waits for it. UINT64_MAX: no lease. */
        uint64_t lease, lease_low;
        int lease_fd; /* the writer's eventfd, or -1 */
        bool lease_poked;
        pthread_cond_t lease_cond;
        unsigned max_channels; /* M0_STREAM_MAX_CHANNELS */
        /* M0_BUS=postgresql://… (G1, D93): kept events are published to the database, and
         * come back through m0__bus_deliver with its ids; NULL for the local bus. */
        struct m0_pgbus *shared;
        uint64_t shared_from; /* every id past it was delivered here; UINT64_MAX: not yet known */
        /* For the metrics (O1): written under `lock`, read by m0__bus_stats() without it. */
        m0_counter published;   /* kept events published since the process started */
        m0_counter evicted;     /* kept events pushed out of the replay store by newer ones */
        m0_counter transient;   /* transient events published */
        m0_counter unfollowed;  /* events published to a channel no loop followed */
        m0_counter lease_waits; /* publishes that waited for the lease */
};

/* What the bus counted, for the metrics (O1). */
struct m0_bus_stats {
        uint64_t published, evicted, transient, unfollowed, lease_waits;
        uint64_t chans_evicted; /* the replay store's */
        uint64_t past_bound;    /* the replay store's: frames a channel alone past the bound lost */
};

extern struct m0_bus *m0__bus_global; /* set once before any thread exists */

/*
 * A bus for `nloops` loops, each queue holding `q_cap` frames, the replay store keeping
 * `per_channel` events a channel within `bytes`. 0 or -ENOMEM; m0__bus_destroy() is safe after
 * either.
 */
int m0__bus_init(struct m0_bus *b, int nloops, size_t q_cap, size_t per_channel, size_t bytes);
void m0__bus_destroy(struct m0_bus *b);
/* Whether `s[0, len)` may name a channel (N1): 1–200 bytes of visible ASCII. */
bool m0__channel_ok(const char *s, size_t len);
/*
 * Publish: the next id (none for M0_PUBLISH_TRANSIENT), then m0__bus_deliver's path. Any thread.
 * The id, 0 for a transient event, or -EINVAL / -ENOMEM / -EOVERFLOW (m0_publish()'s contract).
 */
int64_t m0__bus_publish(struct m0_bus *b, const char *channel, const char *event, const char *data,
                        unsigned flags);
/*
 * The one path of an event that already has its id (the local publish's, or another source's
 * in id order, D74): kept in the replay store and the fd store unless transient, and queued on
 * every loop that follows its channel, which is woken. `id` must be past every kept id (0 for a
 * transient event) and at most M0__ID_MAX. 0, -EINVAL (a bad name or an id not past the newest),
 * -EOVERFLOW (an id past M0__ID_MAX), -ENOMEM. Any thread.
 */
int m0__bus_deliver(struct m0_bus *b, uint64_t id, const char *channel, const char *event,
                    const char *data, size_t data_len, unsigned flags);
/*
 * Loop `loop` begins or ends following `k` (its index gained its first stream for it, or lost
 * its last). Follow: 0 or -ENOMEM. The loop's thread.
 */
int m0__bus_follow(struct m0_bus *b, int loop, const struct m0_key *k);
void m0__bus_unfollow(struct m0_bus *b, int loop, const struct m0_key *k);
/* What m0__bus_subscribe() found, under the lock. */
struct m0_subscribed {
        uint64_t last; /* the newest id */
        uint64_t seq;  /* the bus's sequence: the transient events after it are the stream's */
        bool ahead;    /* `after` was past the newest id */
        bool table;    /* a shared bus whose replay store may lack events past `after`: the
                          replay is the table's to give (G4, D95); `out` is left empty */
};

/*
 * A stream begins on loop `loop`: follow the keys `add` (new to the loop) and, all under one
 * hold of the lock, fill *ret and, when `replay`, take a reference to every kept frame of `keys`
 * after `after` into `out` (unordered; the caller sorts), telling `gaps` (NULL: none) of each
 * channel that gave up an event past `after` (AP2). On the local bus an `after` past the newest
 * id replays everything kept, without gaps; on a shared bus nothing (the id is another host's,
 * whose later events come here too). 0 or -ENOMEM (nothing followed). The loop's thread.
 */
int m0__bus_subscribe(struct m0_bus *b, int loop, const struct m0_key *add, size_t nadd,
                      const struct m0_key *keys, size_t nkeys, bool replay, uint64_t after,
                      struct m0_fvec *out, const struct m0_gap_sink *gaps,
                      struct m0_subscribed *ret);
/*
 * Take references to up to `max` frames from loop `loop`'s queue, oldest first (the loop's
 * thread). When they end where the queue began refusing frames, *ret_refused says which it
 * refused (count and dropped 0 otherwise), and the queue takes frames again.
 */
size_t m0__bus_take_queue(struct m0_bus *b, int loop, struct m0_frame **out, size_t max,
                          struct m0_refusal *ret_refused);
void m0__refusal_free(struct m0_refusal *r);
uint64_t m0__bus_last(struct m0_bus *b);
/* The bus's counters, without its lock (any thread). */
void m0__bus_stats(struct m0_bus *b, struct m0_bus_stats *ret);
/* Set the newest id before anything is published (the coordinator, at the start, N3). */
void m0__bus_set_last(struct m0_bus *b, uint64_t last);
/* A shared bus delivers every id after `from` from now on (its start in the table, D95): the
 * newest id and, when it is not known yet, `shared_from`, are raised to it. Any thread. */
void m0__bus_shared_start(struct m0_bus *b, uint64_t from);
/* The frame of an event that already has its id (a replay from the table). NULL on ENOMEM or
 * fields a stream cannot be sent (m0__bus_deliver's refusals). Any thread. */
struct m0_frame *m0__frame_event(uint64_t id, const char *channel, const char *event,
                                 const char *data, size_t data_len);
/* The frame of an event without an id (a backfill's, AP2): its text starts at f->start. NULL
 * on ENOMEM or fields a stream cannot be sent. Any thread. */
struct m0_frame *m0__frame_unnumbered(const char *channel, const char *event, const char *data,
                                      size_t data_len);
void m0__frame_unref(struct m0_frame *f);
/* A frame of `text[0, len)` (an event's text, id line included) on `channel`: what the fd store
 * restores. NULL on ENOMEM. */
struct m0_frame *m0__frame_restored(uint64_t id, const char *channel, size_t chan_len,
                                    const char *text, size_t len);
int m0__fvec_push(struct m0_fvec *v, struct m0_frame *f);
/* Sort by id, drop repeats (unreferencing them); what is left is a replay in order. */
void m0__fvec_sort(struct m0_fvec *v);
void m0__fvec_free(struct m0_fvec *v);

#endif /* M0_BUS_H */
