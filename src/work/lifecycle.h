/* SPDX-License-Identifier: MIT */
/* lifecycle.h: lifecycle.c, one lifecycle for every thread that serves with a handler state of the
 * app's (a loop, a pool thread, the producer): built on that thread, reported to the
 * make-barrier, freed there at the end (L1, L3, R4). */
#ifndef M0_HANDLER_H
#define M0_HANDLER_H

#include <pthread.h>
#include <stdbool.h>

#include "m0.h"

struct m0_barrier;
struct m0_hctx;
struct m0_thread;

/* What a thread's lifecycle reads, handed by the host before any thread starts (LY4, D240). */
struct m0_lifecycle {
        const m0_app *app;
        struct m0_barrier *barrier;   /* the make-barrier */
        int loops;                    /* m0_handler_info's `loops` */
        unsigned loop_handler_max_ms; /* ... and `loop_handler_max_ms`: a quarter of the
                                         watchdog's interval, 0 without one */
};

/*
 * On thread `t`, as it starts (`loop`: the loop it serves, a loop's own or a pool thread's;
 * NULL for the producer): name it, tell crash reports which thread it is, build its
 * handler state with the app's `make` (into t->state; `build` false: none, for a producer whose
 * app has no step), report the outcome at the make-barrier and wait there. Returns true when
 * every handler was built and serving begins.
 */
bool m0__handler_begin(const struct m0_lifecycle *lc, struct m0_hctx *loop, struct m0_thread *t,
                       bool build);
/* On thread `t`, as it ends: free its handler state and forget the thread's identity. */
void m0__handler_end(const struct m0_lifecycle *lc, struct m0_thread *t);
/* The make-barrier (L1, L3): every thread that builds a handler reports here, and none serves
 * until the coordinator opens the gate. Under `lock`. */
struct m0_barrier {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        int reported;
        bool failed;         /* a make failed; `failed_who` names the first */
        char failed_who[64]; /* "loop 1", "loop 0 pool thread 1", "the producer" */
        char failed_msg[256];
        enum { M0_GATE_WAIT, M0_GATE_GO, M0_GATE_ABORT } gate;
};

void m0__barrier_init(struct m0_barrier *b);
void m0__barrier_destroy(struct m0_barrier *b);
/*
 * A thread reports the outcome of its `make` (`why` says why it failed) and waits at the gate.
 * `who` names the thread. Returns true when every handler was built and serving begins.
 */
bool m0__barrier_wait(struct m0_barrier *b, const char *who, int make_r, const char *why);
/* The coordinator waits until `n` threads have reported; true when none failed. */
bool m0__barrier_await(struct m0_barrier *b, int n);
/* The coordinator opens the gate: serving begins (`go`), or every thread goes home. */
void m0__barrier_open(struct m0_barrier *b, bool go);

#endif /* M0_HANDLER_H */
