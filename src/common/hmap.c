/* SPDX-License-Identifier: MIT */
/* hmap.c: an intrusive chained hash table of names, keyed SipHash-1-3 (N4, N5). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "hmap.h"

/*
 * Channel names come from clients (a counter's name, a room's): with a hash anyone can compute,
 * a client could pick thousands of names of one bucket and make every publish walk them. SipHash
 * under a key of this process's is the table hash redis and the kernel use for that reason; 1-3
 * is the reduced round count redis chose for its tables (the same defence for a table that no
 * attacker reads the hashes of, at about two thirds of 2-4's cost).
 */

static uint64_t sip_k0, sip_k1;
static pthread_once_t sip_once = PTHREAD_ONCE_INIT;

static void sip_init(void)
{
        uint64_t k[2];
        if (getrandom(k, sizeof(k), GRND_NONBLOCK) != (ssize_t)sizeof(k)) {
                /* Early in boot, before the pool is ready: a key no client can know in advance. */
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                k[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15u ^ (uint64_t)getpid();
                k[1] = (uint64_t)ts.tv_sec ^ ((uint64_t)(uintptr_t)&ts << 17);
        }
        sip_k0 = k[0];
        sip_k1 = k[1];
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
        do {                                                                                       \
                v0 += v1;                                                                          \
                v1 = ROTL(v1, 13);                                                                 \
                v1 ^= v0;                                                                          \
                v0 = ROTL(v0, 32);                                                                 \
                v2 += v3;                                                                          \
                v3 = ROTL(v3, 16);                                                                 \
                v3 ^= v2;                                                                          \
                v0 += v3;                                                                          \
                v3 = ROTL(v3, 21);                                                                 \
                v3 ^= v0;                                                                          \
                v2 += v1;                                                                          \
                v1 = ROTL(v1, 17);                                                                 \
                v1 ^= v2;                                                                          \
                v2 = ROTL(v2, 32);                                                                 \
        } while (0)

uint64_t m0__hash(const void *p, size_t n)
{
        pthread_once(&sip_once, sip_init);
        const unsigned char *in = p;
        uint64_t v0 = 0x736f6d6570736575u ^ sip_k0, v1 = 0x646f72616e646f6du ^ sip_k1;
        uint64_t v2 = 0x6c7967656e657261u ^ sip_k0, v3 = 0x7465646279746573u ^ sip_k1;
        uint64_t b = (uint64_t)n << 56;
        size_t whole = n - n % 8;
        for (size_t i = 0; i < whole; i += 8) {
                uint64_t m;
                memcpy(&m, in + i, 8); /* native order: the hash never leaves the process */
                v3 ^= m;
                SIPROUND;
                v0 ^= m;
        }
        for (size_t i = 0; i < n % 8; i++)
                b |= (uint64_t)in[whole + i] << (8 * i);
        v3 ^= b;
        SIPROUND;
        v0 ^= b;
        v2 ^= 0xff;
        SIPROUND;
        SIPROUND;
        SIPROUND;
        return v0 ^ v1 ^ v2 ^ v3;
}

struct m0_hnode *m0__hmap_find(const struct m0_hmap *m, uint64_t hash, const char *key, size_t len)
{
        if (!m->nb)
                return NULL;
        for (struct m0_hnode *n = m->b[hash & (m->nb - 1)]; n; n = n->next)
                if (n->hash == hash && n->len == len && memcmp(n->key, key, len) == 0)
                        return n;
        return NULL;
}

static int grow(struct m0_hmap *m)
{
        size_t nb = m->nb ? m->nb * 2 : 16;
        struct m0_hnode **b = calloc(nb, sizeof(*b));
        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < m->nb; i++) {
                struct m0_hnode *n = m->b[i], *next;
                for (; n; n = next) {
                        next = n->next;
                        n->next = b[n->hash & (nb - 1)];
                        b[n->hash & (nb - 1)] = n;
                }
        }
        free(m->b);
        m->b = b;
        m->nb = nb;
        return 0;
}

int m0__hmap_insert(struct m0_hmap *m, struct m0_hnode *n)
{
        int r = 0;
        if (m->n >= m->nb)
                r = grow(m);
        if (!m->nb)
                return -ENOMEM;
        struct m0_hnode **head = &m->b[n->hash & (m->nb - 1)];
        n->next = *head;
        *head = n;
        m->n++;
        return r;
}

void m0__hmap_remove(struct m0_hmap *m, struct m0_hnode *n)
{
        if (!m->nb)
                return; /* a first insert that could not grow the table left nothing in it */
        struct m0_hnode **p = &m->b[n->hash & (m->nb - 1)];
        while (*p && *p != n)
                p = &(*p)->next;
        if (*p) {
                *p = n->next;
                m->n--;
        }
        n->next = NULL;
}

struct m0_hnode *m0__hmap_next(const struct m0_hmap *m, size_t *bucket, struct m0_hnode *n)
{
        if (n && n->next)
                return n->next;
        size_t i = n ? *bucket + 1 : *bucket;
        for (; i < m->nb; i++) {
                if (m->b[i]) {
                        *bucket = i;
                        return m->b[i];
                }
        }
        *bucket = m->nb;
        return NULL;
}

size_t m0__hmap_bytes(const struct m0_hmap *m)
{
        return m->nb * sizeof(*m->b);
}

void m0__hmap_free(struct m0_hmap *m)
{
        free(m->b);
        *m = (struct m0_hmap){0};
}
