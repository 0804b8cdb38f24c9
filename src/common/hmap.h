/* SPDX-License-Identifier: MIT */
/* hmap.h: hmap.c, one intrusive hash table of names for the bus's channels and each loop's index
 * of them (N4, N5), hashed with a key of the process's own so that no client can choose names
 * that collide. */
#ifndef M0_HMAP_H
#define M0_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A table's node, embedded in each element; `key[0, len)` is the element's name. */
struct m0_hnode {
        struct m0_hnode *next;
        uint64_t hash;
        const char *key;
        uint32_t len;
};

/* A chained table whose bucket count doubles when it holds as many nodes. All zeros is the empty
 * table. Not locked: its owner says which thread may touch it. */
struct m0_hmap {
        struct m0_hnode **b;
        size_t nb; /* buckets: 0, or a power of two */
        size_t n;  /* nodes */
};

/* SipHash-1-3 of `p[0, n)` under a key made once per process from getrandom(). Any thread. */
uint64_t m0__hash(const void *p, size_t n);
/* The node named `key[0, len)` whose hash is `hash`, or NULL. */
struct m0_hnode *m0__hmap_find(const struct m0_hmap *m, uint64_t hash, const char *key, size_t len);
/* Put `n` (hash, key and len set; no node of that name in `m`) into `m`. 0, or -ENOMEM when the
 * table needed to grow and could not: `n` is then in it anyway, on a longer chain. */
int m0__hmap_insert(struct m0_hmap *m, struct m0_hnode *n);
/* Take `n`, which `m` holds, out of it. */
void m0__hmap_remove(struct m0_hmap *m, struct m0_hnode *n);
/* The node after `n` in bucket order (the first when `n` is NULL), or NULL: a walk of every
 * node. `*bucket` is where the walk is; 0 before the first call. `n` may not be removed before
 * the call that moves past it. */
struct m0_hnode *m0__hmap_next(const struct m0_hmap *m, size_t *bucket, struct m0_hnode *n);
/* The bucket array's bytes, for the accounting of what holds the table. */
size_t m0__hmap_bytes(const struct m0_hmap *m);
/* Free the buckets (not the nodes). */
void m0__hmap_free(struct m0_hmap *m);

#endif /* M0_HMAP_H */
