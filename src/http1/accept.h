/* SPDX-License-Identifier: MIT */
/* accept.h: accept.c, new connections, each placed on the least loaded loop (L4). */
#ifndef M0_ACCEPT_H
#define M0_ACCEPT_H

#include <stdbool.h>

struct m0_hctx;

/* Listener `lfd` is readable on loop `l`: take a bounded batch of connections and place each. */
void m0__accept_ready(struct m0_hctx *l, int lfd);
/* ... of a listener whose connections are TLS when `tls` (TL1). */
void m0__accept_ready_tls(struct m0_hctx *l, int lfd, bool tls);
/* The message a loop hands an accepted connection to another with (L4): the other admits it. */
struct m0_loop;
struct m0_msg;
void m0__accept_handed_over(struct m0_loop *el, struct m0_msg *m);

#endif /* M0_ACCEPT_H */
