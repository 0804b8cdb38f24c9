/* SPDX-License-Identifier: MIT */
/* subs.h: subs.c, a loop's index of its streams by the channels they follow, exact names and
 * prefixes, so that an event costs the loop only the streams that follow it (N5). */
#ifndef M0_SUBS_H
#define M0_SUBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus.h"
#include "hmap.h"
#include "list.h"

struct m0_conn;

/* A name, or a prefix, that some stream of the loop follows; freed with its last stream. */
struct m0_follow {
        struct m0_hnode node;
        struct m0_key key;
        struct m0_list subs; /* of m0_sub */
        char name[];
};

/* One stream's following of one key; a stream holds at most one per key. */
struct m0_sub {
        struct m0_link link; /* on its follow's list */
        struct m0_follow *f;
        struct m0_conn *c;
};

/* The index. Its loop's thread only. */
struct m0_subs {
        struct m0_hmap exact, prefix;
        uint32_t prefix_count[M0__CHANNEL_MAX + 1]; /* prefixes followed, by length */
        uint8_t lens[M0__CHANNEL_MAX + 1];          /* the lengths with a count, ascending */
        int nlens;
};

/* `sub` (its c set) follows `k`: onto the follow of that key, made when it is the first. 0, or
 * -ENOMEM. *ret_new: the follow was made now (the bus is to learn of it). */
int m0__subs_add(struct m0_subs *s, struct m0_sub *sub, const struct m0_key *k, bool *ret_new);
/* `sub` follows nothing more. The follow it was on, when that had no other stream and is now out
 * of the index (the caller tells the bus, then frees it), else NULL. */
struct m0_follow *m0__subs_remove(struct m0_subs *s, struct m0_sub *sub);
/* The follow of exactly `k`, or NULL. */
struct m0_follow *m0__subs_find(const struct m0_subs *s, const struct m0_key *k);
/*
 * Call fn for every stream following the channel `name[0, len)` (whose hash is `hash`), through
 * each follow that matches it: its exact name, then its prefixes, shortest first. A stream that
 * follows it through several is called once per follow. fn may close its stream (and so end
 * its subs), never another's.
 */
void m0__subs_match(struct m0_subs *s, const char *name, size_t len, uint64_t hash,
                    void (*fn)(void *ud, struct m0_sub *sub), void *ud);
/* Free what the index holds (its follows must be empty: every stream ended first). */
void m0__subs_free(struct m0_subs *s);

#endif /* M0_SUBS_H */
