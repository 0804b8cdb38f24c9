/* SPDX-License-Identifier: MIT */
/* accept.h: accept.c, new connections, each placed on the least loaded loop (L4). */
#ifndef M0_ACCEPT_H
#define M0_ACCEPT_H

struct m0_loop;

/* Listener `lfd` is readable on loop `l`: take a bounded batch of connections and place each. */
void m0__accept_ready(struct m0_loop *l, int lfd);

#endif /* M0_ACCEPT_H */
