/* SPDX-License-Identifier: MIT */
/* producer.c: the producer thread: the app's step at a fixed rate, and the watchdog (S2, W1). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "lifecycle.h"
#include "host-private.h"
#include "log.h"
#include "notify.h"
#include "producer.h"

#define SLICE_MS 50 /* a sleeping producer sees the stop within this */

static uint64_t now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void sleep_until_us(uint64_t us)
{
        struct timespec ts = {.tv_sec = (time_t)(us / 1000000u),
                              .tv_nsec = (long)(us % 1000000u) * 1000L};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
}

bool m0__producer_needed(const struct m0_host *h)
{
        return h->app->step || h->serve.watchdog_usec;
}

/*
 * W1: ping only when every loop's heartbeat moved since the last look, half an interval ago.
 * A loop that did not is named with the request it is serving, and the ping is withheld so that
 * systemd's watchdog ends the process.
 */
static void watchdog_check(struct m0_host *h, struct m0_producer *p)
{
        bool all = true;
        for (int i = 0; i < h->serve.nloops; i++) {
                struct m0_hctx *l = &h->serve.loops[i];
                uint64_t beat = atomic_load_explicit(&l->loop.heartbeat, memory_order_relaxed);
                if (beat != p->beats[i]) {
                        p->beats[i] = beat;
                        p->stuck[i] = false;
                        continue;
                }
                all = false;
                if (p->stuck[i])
                        continue; /* named once per episode */
                p->stuck[i] = true;
                char what[160];
                m0__loop_request_get(l, what, sizeof(what));
                m0__log(M0_LOG_CRIT, i, M0_MID_LOOP_STUCK,
                        "loop %d stuck: no progress for %llu ms, serving %s; watchdog ping "
                        "withheld",
                        i, (unsigned long long)(h->serve.watchdog_usec / 2000),
                        what[0] ? what : "no request");
        }
        if (all)
                (void)m0__notify("WATCHDOG=1");
}

void *m0__producer_main(void *arg)
{
        struct m0_host *h = arg;
        struct m0_producer *p = &h->producer;
        /* A producer for the watchdog alone builds no handler state: the app has no step. */
        if (!m0__handler_begin(&h->life, NULL, &p->thread, h->app->step != NULL))
                goto out;

        /* Microseconds: at 250 or 1000 Hz a millisecond clock would skip slots it only
         * woke a little late for. */
        uint64_t now = now_us();
        bool stepping = h->app->step != NULL;
        uint64_t next_step = now;
        uint64_t wd_half = h->serve.watchdog_usec / 2;
        uint64_t next_wd = wd_half ? now + wd_half : UINT64_MAX;
        /* The first look only records where every loop is; judging starts half an interval on. */
        for (int i = 0; wd_half && i < h->serve.nloops; i++)
                p->beats[i] = atomic_load_explicit(&h->serve.loops[i].loop.heartbeat,
                                                   memory_order_relaxed);
        while (!atomic_load(&p->stop)) {
                now = now_us();
                if (stepping && now >= next_step) {
                        atomic_store(&p->in_step, true);
                        int64_t want = h->app->step(p->thread.state);
                        atomic_store(&p->in_step, false);
                        now = now_us();
                        if (want < 0) {
                                m0__log(M0_LOG_ERR, -1, NULL,
                                        "producer step failed: %s; the producer stops, serving "
                                        "goes on",
                                        strerror((int)-want));
                                stepping = false;
                        } else if (want == 0) {
                                stepping = false;
                        } else {
                                /* Fixed rate on a grid. A slot woken for late still runs; slots
                                 * an overrun swallowed whole are skipped, never caught up in a
                                 * burst. */
                                uint64_t period = (uint64_t)want * 1000;
                                next_step += period;
                                if (now >= next_step + period)
                                        next_step += (now - next_step) / period * period;
                        }
                }
                if (wd_half && now >= next_wd) {
                        watchdog_check(h, p);
                        next_wd += wd_half;
                        if (next_wd <= now)
                                next_wd = now + wd_half;
                }
                uint64_t until = next_wd;
                if (stepping && next_step < until)
                        until = next_step;
                if (until > now)
                        sleep_until_us(until < now + SLICE_MS * 1000 ? until
                                                                     : now + SLICE_MS * 1000);
        }
out:
        m0__handler_end(&h->life, &p->thread);
        return NULL;
}
