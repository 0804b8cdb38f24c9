/* SPDX-License-Identifier: MIT */
/* subs.c: a loop's index of its streams by the channels they follow (N5). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "subs.h"

/*
 * Two tables of follows, exact names and prefixes, each a list of the streams on it. An event's
 * channel is looked up once in the first; in the second once per length that some prefix
 * followed on this loop has (a loop whose streams follow `room:*` and `*` looks twice), so what
 * an event costs is its followers on this loop plus a handful of lookups, whatever the number of
 * streams and channels.
 */

static void lens_update(struct m0_subs *s)
{
        s->nlens = 0;
        for (int k = 0; k <= M0__CHANNEL_MAX; k++)
                if (s->prefix_count[k])
                        s->lens[s->nlens++] = (uint8_t)k;
}

struct m0_follow *m0__subs_find(const struct m0_subs *s, const struct m0_key *k)
{
        const struct m0_hmap *m = k->prefix ? &s->prefix : &s->exact;
        struct m0_hnode *n = m0__hmap_find(m, k->hash, k->name, k->len);
        return n ? M0__CONTAINER_OF(n, struct m0_follow, node) : NULL;
}

int m0__subs_add(struct m0_subs *s, struct m0_sub *sub, const struct m0_key *k, bool *ret_new)
{
        struct m0_follow *f = m0__subs_find(s, k);
        *ret_new = false;
        if (!f) {
                f = calloc(1, sizeof(*f) + k->len + 1);
                if (!f)
                        return -ENOMEM;
                memcpy(f->name, k->name, k->len);
                f->key = (struct m0_key){
                        .name = f->name, .len = k->len, .prefix = k->prefix, .hash = k->hash};
                f->node = (struct m0_hnode){.hash = k->hash, .key = f->name, .len = k->len};
                (void)m0__hmap_insert(k->prefix ? &s->prefix : &s->exact, &f->node);
                if (k->prefix && s->prefix_count[k->len]++ == 0)
                        lens_update(s);
                *ret_new = true;
        }
        sub->f = f;
        m0__list_push(&f->subs, &sub->link);
        return 0;
}

struct m0_follow *m0__subs_remove(struct m0_subs *s, struct m0_sub *sub)
{
        struct m0_follow *f = sub->f;
        if (!f)
                return NULL;
        m0__list_unlink(&f->subs, &sub->link);
        sub->f = NULL;
        if (!m0__list_empty(&f->subs))
                return NULL;
        m0__hmap_remove(f->key.prefix ? &s->prefix : &s->exact, &f->node);
        if (f->key.prefix && --s->prefix_count[f->key.len] == 0)
                lens_update(s);
        return f;
}

/* Every stream on `f`; the next one is found before fn runs, since fn may end the current one's
 * subs (and, with the last of them, the follow: then there is no next). */
static void visit(struct m0_follow *f, void (*fn)(void *ud, struct m0_sub *sub), void *ud)
{
        struct m0_link *n = f->subs.head;
        while (n) {
                struct m0_link *next = n->next;
                fn(ud, M0__CONTAINER_OF(n, struct m0_sub, link));
                n = next;
        }
}

void m0__subs_match(struct m0_subs *s, const char *name, size_t len, uint64_t hash,
                    void (*fn)(void *ud, struct m0_sub *sub), void *ud)
{
        /* fn may end the last follow of a length: walk the lengths as they were. */
        uint8_t lens[M0__CHANNEL_MAX + 1];
        int nlens = s->nlens;
        memcpy(lens, s->lens, (size_t)nlens);
        struct m0_hnode *n = m0__hmap_find(&s->exact, hash, name, len);
        if (n)
                visit(M0__CONTAINER_OF(n, struct m0_follow, node), fn, ud);
        for (int i = 0; i < nlens; i++) {
                size_t k = lens[i];
                if (k > len)
                        break;
                n = m0__hmap_find(&s->prefix, k == len ? hash : m0__hash(name, k), name, k);
                if (n)
                        visit(M0__CONTAINER_OF(n, struct m0_follow, node), fn, ud);
        }
}

void m0__subs_free(struct m0_subs *s)
{
        m0__hmap_free(&s->exact);
        m0__hmap_free(&s->prefix);
}
