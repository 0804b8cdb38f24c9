/* SPDX-License-Identifier: MIT */
/* fdstore-log.h: fdstore-log.c, the event ids and the replay store's channels in a memfd kept in systemd's fd
 * store (B4, N6). */
#ifndef M0_STORE_H
#define M0_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct m0_bus;
struct m0_frame;
struct m0_store;

/* The fd store entry's name, in LISTEN_FDNAMES and FDNAME=. */
#define M0__STORE_NAME "m0-bus"
/* The largest id or byte count a passed store may hold: the largest id a bus hands out
 * (M0__ID_MAX, bus.h), so a store this host wrote is always taken back (D46). */
#define M0__STORE_COUNT_MAX M0__ID_MAX

/* The memfd's log for a replay bound of `replay_bytes` (M0_REPLAY_BYTES): half of it (D77). */
size_t m0__store_log_size(size_t replay_bytes);
/*
 * Take the event state back from `passed_fd` (-1: none was passed) into bus `b`, whose replay is
 * bound by `replay_bytes` (M0_REPLAY_BYTES), or start a new
 * one, and hand it to systemd's fd store; the replay store's share of M0_REPLAY_BYTES becomes
 * what the memfd leaves. A passed store is checked whole first (D46, D77); one that does not fit
 * is removed from the fd store and replaced; one of version 1 gives its ids, not its frames.
 * Takes `passed_fd` in every case. *ret_restored: the ids continue after the bus's last id; else
 * the caller chooses where they start (N3). `msg` says what happened, for the log. 0, or -errno
 * when no new state could be made.
 */
int m0__store_open(struct m0_bus *b, size_t replay_bytes, int passed_fd, bool *ret_restored,
                   char *msg, size_t msg_len);
/* A frame the replay store keeps: its copy is appended to the log (under the bus lock). */
void m0__store_keep(struct m0_store *s, struct m0_frame *f);
/* A frame the replay store gives up: its copy is dead (under the bus lock). */
void m0__store_drop(struct m0_store *s, struct m0_frame *f);
/* The bytes of the copies still live, which the replay store keeps within half the log. */
size_t m0__store_live(const struct m0_store *s);
/* The newest id, written after the copy of its frame (under the bus lock). */
void m0__store_set_last(struct m0_store *s, uint64_t last);
void m0__store_close(struct m0_bus *b);

#endif /* M0_STORE_H */
