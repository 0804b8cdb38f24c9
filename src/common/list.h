/* SPDX-License-Identifier: MIT */
/* list.h: the one intrusive list of libm0, for its timers, streams, run queue, mailboxes and job
 * queues: a link embedded in each element, no allocation, O(1) insert and unlink. */
#ifndef M0_LIST_H
#define M0_LIST_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/* A list's link in an element; both NULL when the element is on no list. */
struct m0_link {
        struct m0_link *prev, *next;
};

/* A list: its first and last links. All zeros is the empty list, so a zeroed struct holding
 * one needs no initialization. */
struct m0_list {
        struct m0_link *head, *tail;
};

static inline bool m0__list_empty(const struct m0_list *l)
{
        return l->head == NULL;
}

/* Put `n` after `pos` on `l`; a NULL `pos` puts it first. */
static inline void m0__list_insert_after(struct m0_list *l, struct m0_link *pos, struct m0_link *n)
{
        n->prev = pos;
        n->next = pos ? pos->next : l->head;
        if (n->next)
                n->next->prev = n;
        else
                l->tail = n;
        if (pos)
                pos->next = n;
        else
                l->head = n;
}

/* Put `n` last on `l`. */
static inline void m0__list_push(struct m0_list *l, struct m0_link *n)
{
        m0__list_insert_after(l, l->tail, n);
}

/* Take `n` off `l`, which holds it. */
static inline void m0__list_unlink(struct m0_list *l, struct m0_link *n)
{
        if (n->prev)
                n->prev->next = n->next;
        else
                l->head = n->next;
        if (n->next)
                n->next->prev = n->prev;
        else
                l->tail = n->prev;
        n->prev = n->next = NULL;
}

/* Take the first link off `l`; NULL when it is empty. */
static inline struct m0_link *m0__list_pop(struct m0_list *l)
{
        struct m0_link *n = l->head;
        if (n)
                m0__list_unlink(l, n);
        return n;
}

/* Move every link of `from`, in order, to the end of `to`; `from` is left empty. */
static inline void m0__list_append(struct m0_list *to, struct m0_list *from)
{
        if (!from->head)
                return;
        if (to->tail) {
                to->tail->next = from->head;
                from->head->prev = to->tail;
        } else {
                to->head = from->head;
        }
        to->tail = from->tail;
        from->head = from->tail = NULL;
}

/* The element holding link `n` (NULL for a NULL link). */
#define M0__LIST_ENTRY(n, type, member) ((n) ? M0__CONTAINER_OF((n), type, member) : (type *)NULL)
/* The first element of `l`, or NULL. */
#define M0__LIST_FIRST(l, type, member) M0__LIST_ENTRY((l)->head, type, member)
/* The element after `e` on its list, or NULL. */
#define M0__LIST_NEXT(e, type, member) M0__LIST_ENTRY((e)->member.next, type, member)

#endif /* M0_LIST_H */
