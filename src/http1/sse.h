/* SPDX-License-Identifier: MIT */
/* sse.h: sse.c, server-sent event streams on a loop: the head, the channels they follow, replay
 * after Last-Event-ID, live frames, heartbeats and the farewell (S1, H6, H9, N1-N5, B2, X1). */
#ifndef M0_SSE_H
#define M0_SSE_H

#include <stdbool.h>
#include <stdint.h>

#include "loop.h"
#include "m0.h"

struct m0_buf;
struct m0_conn;
struct m0_hctx;
struct m0_treplay;

/* An event id a client sends back (Last-Event-ID's value, a WebSocket's last_event_id): digits,
 * a longer number taken as 2^64 - 1 (D48); false for anything else, empty or NULL. */
bool m0__sse_event_id(const char *v, uint64_t *ret);

/* A stream's head (status line, the host's and the app's headers, the blank line) into `w`;
 * `close` adds Connection: close. Alone, it answers a HEAD on a stream route (H6). */
int m0__sse_head(struct m0_hctx *l, const m0_res *res, bool close, struct m0_buf *w);
/* After the handler called m0_res_stream() or m0_res_subscribe(): the stream's head and first
 * bytes, its channels in the loop's index, the replay. */
void m0__sse_begin(struct m0_conn *c, const m0_req *req, const m0_res *res);
/* What follows the head (S1, N2): `c` becomes one of its loop's streams, its first bytes and
 * its replay after the request's Last-Event-ID into `w`, its channels followed. 0, or -errno with
 * `c` no stream (its answer is to end). A stream of another protocol (HT3's HTTP/2 streams)
 * frames `w` itself; its later bytes go through its protocol's `send`. */
int m0__sse_open(struct m0_conn *c, const m0_req *req, const m0_res *res, struct m0_buf *w);
/* ... a stream opened by a request the drain answers: its first bytes and ": bye" into `w`. */
int m0__sse_open_bye(struct m0_hctx *l, struct m0_buf *w);
/* A stream's replay is the shared bus's table's (G4, D95): ask it; until the answer comes the
 * live frames for `c` are held. 0, or -errno (the stream is to end). */
int m0__sse_ask_table(struct m0_conn *c, uint64_t after);
/* The table's answer, or a backfill's (a message handled by replay_back): the backfill's events, the rows, then
 * what was held, then live; `t` is freed. */
void m0__sse_replayed(struct m0_hctx *l, struct m0_treplay *t);
/* A stream's backfill (AP2): `app`'s backfill for each of t's gaps, with `state` (the calling
 * thread's handler state), into t->pre; then `t` is posted to its loop in a message handled by t->back. A pool
 * thread of that loop, or the loop itself. */
void m0__sse_backfill(const m0_app *app, struct m0_treplay *t, void *state);
/* A publish woke this loop: deliver the new frames to its streams, a take of them (up to 64) per
 * item of the turn (D85). True when the turn ran out with frames still waiting. */
bool m0__sse_deliver(struct m0_hctx *l);
void m0__sse_heartbeat(struct m0_hctx *l);
/* The drain: ": bye" to every stream, then close. */
void m0__sse_farewell(struct m0_hctx *l);
/* `c` stops being one of its loop's streams (it is closing). */
void m0__sse_unlink(struct m0_conn *c);
/*
 * A connection of another protocol (a WebSocket, WS2) follows res's channels as a stream does
 * (N1): into the loop's index, its cursor set, and when `replay` the kept frames of them after
 * `after` (N2) into `got`, sorted, after a call of `gaps` for each channel that gave up events
 * past `after` (AP2). Frames then reach it through its protocol's `event`. 0, or -errno with
 * nothing followed (-EOPNOTSUPP on a shared bus whose table would have to replay).
 */
struct m0_fvec;
struct m0_gap_sink;
int m0__sse_follow(struct m0_conn *c, const m0_res *res, bool replay, uint64_t after,
                   struct m0_fvec *got, const struct m0_gap_sink *gaps);
/* Its channels out of the loop's index, and the replay it waits for, if any, let go of. */
void m0__sse_unfollow(struct m0_conn *c);
/*
 * A WebSocket's backfill (AP2, D234): as a stream's, the app's callback runs for each channel
 * that `gaps` records (the gap sink's records: the oldest id kept, 8 bytes, the name and a NUL),
 * its events kept as frames (t->pre_frames); meanwhile the live frames for `c` are held; then
 * `back` gets the struct m0_treplay with the kept replay `got` (taken) as its rows and what was
 * held. 0, or -errno.
 */
struct m0_buf;
int m0__sse_backfill_start(struct m0_conn *c, uint64_t after, struct m0_buf *gaps,
                           struct m0_fvec *got, m0_msg_fn *back);
/* A gap's record as m0__sse_backfill_start reads it, appended to `gaps`. */
int m0__sse_gap_record(struct m0_buf *gaps, const char *name, size_t len, uint64_t oldest);
/* The bus's wake-up (any thread): flag each loop of `mask` once, and poke its mailbox. */
void m0__bus_wake_loops(void *ud, const uint64_t *mask);

#endif /* M0_SSE_H */
