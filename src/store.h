/* SPDX-License-Identifier: MIT */
/* store.h: store.c, the event ids and the replay ring in a memfd kept in systemd's fd store (B4). */
#ifndef M0_STORE_H
#define M0_STORE_H

#include <stddef.h>

struct m0_bus;
struct m0_frame;
struct m0_host;
struct m0_store;

/* The fd store entry's name, in LISTEN_FDNAMES and FDNAME=. */
#define M0__STORE_NAME "m0-bus"
/*
 * Take the event state back from `passed_fd` (-1: none was passed) into the bus, or start a new
 * one, and hand it to systemd's fd store. A passed store is checked whole first (D46); one that
 * does not fit is removed from the fd store and replaced. Takes `passed_fd` in every case. `msg`
 * says what happened, for the log. 0, or -errno when no new state could be made.
 */
int m0__store_open(struct m0_host *h, int passed_fd, char *msg, size_t msg_len);
/* Record a frame just published (under the bus lock). */
void m0__store_note(struct m0_bus *b, const struct m0_frame *f);
void m0__store_close(struct m0_bus *b);

#endif /* M0_STORE_H */
