/* SPDX-License-Identifier: MIT */
/* producer.c: the producer thread: the app's step at a fixed rate, and the watchdog (S2, W1). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "internal.h"

#define SLICE_MS 50 /* a sleeping producer sees the stop within this */

static void sleep_ms(uint64_t ms)
{
        struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                              .tv_nsec = (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

bool m0__producer_needed(const struct m0_host *h)
{
        return h->app->step || h->watchdog_usec;
}

/*
 * W1: ping only when every loop's heartbeat moved since the last look, half an interval ago.
 * A loop that did not is named with the request it is serving, and the ping is withheld so that
 * systemd's watchdog ends the process.
 */
static void watchdog_check(struct m0_host *h, struct m0_producer *p)
{
        bool all = true;
        for (int i = 0; i < h->nloops; i++) {
                struct m0_loop *l = &h->loops[i];
                uint64_t beat = atomic_load_explicit(&l->heartbeat, memory_order_relaxed);
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
                        i, (unsigned long long)(h->watchdog_usec / 2000),
                        what[0] ? what : "no request");
        }
        if (all)
                (void)m0__notify("WATCHDOG=1");
}

void *m0__producer_main(void *arg)
{
        struct m0_host *h = arg;
        struct m0_producer *p = &h->producer;
        pthread_setname_np(pthread_self(), "m0-producer");
        m0__thread_identify(NULL, M0_THREAD_PRODUCER, -1, -1);
        char why[200] = "";
        int r = 0;
        if (h->app->step && h->app->make) {
                m0_handler_info info = {
                        .kind = M0_THREAD_PRODUCER, .loop = -1, .thread = -1, .loops = h->nloops};
                r = h->app->make(&info, &p->state, why, sizeof(why));
                if (r < 0 && !why[0])
                        snprintf(why, sizeof(why), "%s", strerror(-r));
        }
        if (!m0__barrier_wait(h, "the producer", r, why))
                goto out;

        uint64_t now = m0__now_ms();
        bool stepping = h->app->step != NULL;
        uint64_t next_step = now;
        uint64_t wd_half = h->watchdog_usec / 2000;
        uint64_t next_wd = now + (wd_half ? wd_half : UINT64_MAX / 2);
        /* The first look only records where every loop is; judging starts half an interval on. */
        for (int i = 0; wd_half && i < h->nloops; i++)
                p->beats[i] = atomic_load_explicit(&h->loops[i].heartbeat, memory_order_relaxed);
        while (!atomic_load(&p->stop)) {
                now = m0__now_ms();
                if (stepping && now >= next_step) {
                        atomic_store(&p->in_step, true);
                        int64_t want = h->app->step(p->state);
                        atomic_store(&p->in_step, false);
                        now = m0__now_ms();
                        if (want < 0) {
                                m0__log(M0_LOG_ERR, -1, NULL,
                                        "producer step failed: %s; the producer stops, serving "
                                        "goes on",
                                        strerror((int)-want));
                                stepping = false;
                        } else if (want == 0) {
                                stepping = false;
                        } else {
                                /* Fixed rate: the next slot on the grid, never a burst of
                                 * catch-up steps after an overrun. */
                                uint64_t period = (uint64_t)want;
                                next_step += period;
                                if (next_step <= now)
                                        next_step = now + period - (now - next_step) % period;
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
                        sleep_ms(until - now < SLICE_MS ? until - now : SLICE_MS);
        }
out:
        if (h->app->free && p->state)
                h->app->free(p->state);
        p->state = NULL;
        m0__thread_forget();
        return NULL;
}
