/* SPDX-License-Identifier: MIT */
/* crash.h: crash.c, which thread this is, what it serves, and the one report a fatal signal
 * leaves (J2, L5). */
#ifndef M0_CRASH_H
#define M0_CRASH_H

#include <stdbool.h>
#include <stddef.h>

#include "m0.h"

struct m0_hctx;

/* A compute thread and the metrics thread, beside the kinds of m0_thread_kind. */
#define M0__THREAD_COMPUTE 3
#define M0__THREAD_METRICS 4

/* Install the fatal-signal handlers (J2) once, before any thread exists; `name` (the app's, which
 * outlives every thread) names the process in the report, "m0" when NULL. */
void m0__crash_install(const char *name, bool journal);
/* Name this thread for crash reports and give it an alternate signal stack. */
void m0__thread_identify(struct m0_hctx *l, m0_thread_kind kind, int loop, int thread);
void m0__thread_forget(void);
/* The loop this thread serves (a loop or one of its pool threads), or -1. */
int m0__thread_loop(void);
/* The loop whose own thread this is; NULL on any other thread (a pool thread included). */
struct m0_hctx *m0__thread_loop_self(void);
/* Record the request this thread is serving (`method` NULL when none), its path `path_len` bytes:
 * crash reports name it, and with `watched` (the watchdog is on) the watchdog too, through the
 * loop's copy. */
void m0__thread_request_set(bool watched, const char *method, const char *path, size_t path_len);

#endif /* M0_CRASH_H */
