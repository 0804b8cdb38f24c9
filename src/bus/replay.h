/* SPDX-License-Identifier: MIT */
/* replay.h: replay.c, what the bus keeps for clients reconnecting with Last-Event-ID: each
 * channel's last events, the whole within a byte bound, the channels idle longest evicted (N4). */
#ifndef M0_REPLAY_H
#define M0_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hmap.h"
#include "list.h"
#include "metrics.h"

struct m0_frame;
struct m0_fvec;
struct m0_key;
struct m0_store;

/* One channel's kept events, oldest first. */
struct m0_rchan {
        struct m0_hnode node;   /* in the store's map, by name */
        struct m0_link lru;     /* on the store's list, the one published to longest ago first */
        struct m0_frame **ring; /* ring[(head + i) % cap], i < count */
        uint32_t head, count, cap;
        uint64_t lost; /* the newest id it gave up (AP2): a replay after an older one has a hole */
        size_t charge; /* what it holds, counted against the bound: itself, its ring, its frames */
        char name[];
};

/*
 * Under the bus lock. Every byte it allocates is counted in `bytes` (with a malloc overhead per
 * allocation), so that `limit` bounds its memory, not only its text; the fd store's copies are
 * counted apart, by the store, against `log_limit` (D75, D77).
 */
struct m0_replay {
        struct m0_hmap map;
        struct m0_list lru;
        uint32_t per_channel; /* M0_REPLAY_PER_CHANNEL */
        size_t limit;         /* the process's share of M0_REPLAY_BYTES */
        size_t bytes;
        size_t log_limit;       /* the fd store's live copies may hold this many bytes */
        struct m0_store *store; /* written a copy of each frame kept, or NULL */
        uint64_t frames;        /* kept now */
        uint64_t floor;         /* the newest id given up or never kept: every kept event past
                                   it is still here (a shared bus's replay asks the table below
                                   it, D95) */
        /* For the metrics (O1): written under the bus lock, read without it. */
        m0_counter evicted; /* channels evicted, idle longest, to stay within the bounds */
        m0_counter dropped; /* frames not kept: their channel alone was past the bound */
};

void m0__replay_init(struct m0_replay *r, uint32_t per_channel, size_t limit);
void m0__replay_destroy(struct m0_replay *r);
/*
 * Keep `f` (a kept event, id past every one kept) as its channel's newest, taking a reference:
 * the channel's oldest goes past per_channel, then the channels published to longest ago (whole),
 * then, alone, the channel's own oldest, until both bounds hold again. 0, or -ENOMEM (not kept).
 */
int m0__replay_keep(struct m0_replay *r, struct m0_frame *f);
/* Told of each channel a replay cannot give whole (AP2): it gave up an event past the replay's
 * `after`, and keeps from `oldest` (its oldest kept id) on. Called under the bus lock. */
struct m0_gap_sink {
        void (*fn)(void *ud, const char *name, size_t len, uint64_t oldest);
        void *ud;
};

/* A reference to every kept frame of a channel `keys` name with an id past `after`, into `out`,
 * unordered, possibly twice; and, when `gaps` is not NULL, each such channel that gave up an
 * event past `after` to it, once. 0 or -ENOMEM. */
int m0__replay_collect(struct m0_replay *r, const struct m0_key *keys, size_t n, uint64_t after,
                       struct m0_fvec *out, const struct m0_gap_sink *gaps);
/* The channel named `name[0, len)`, or NULL. */
struct m0_rchan *m0__replay_find(struct m0_replay *r, const char *name, size_t len);
/* The kept frames, oldest first within each channel, for a copy into a new fd store. */
void m0__replay_each(struct m0_replay *r, void (*fn)(void *ud, struct m0_frame *f), void *ud);

#endif /* M0_REPLAY_H */
