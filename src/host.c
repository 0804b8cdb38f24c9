/* SPDX-License-Identifier: MIT */
/* host.c: the serve sequence (L1): parse, refuse, sockets, loops, barrier, READY, signals, drain. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "internal.h"

extern char **environ;

/*
 * R1: one line a person reads, `m0: <finding> (<fix>)`. Under journald it is one structured
 * entry (with MESSAGE_ID); elsewhere one line on stderr.
 */
static int refuse(const char *finding, const char *fix)
{
        bool has_fix = fix && *fix;
        if (m0__log_journal()) {
                m0__log(M0_LOG_ERR, -1, M0_MID_REFUSED, "m0: %s%s%s%s", finding,
                        has_fix ? " (" : "", has_fix ? fix : "", has_fix ? ")" : "");
        } else {
                fprintf(stderr, "m0: %s%s%s%s\n", finding, has_fix ? " (" : "", has_fix ? fix : "",
                        has_fix ? ")" : "");
                fflush(stderr);
        }
        return M0__EXIT_CONFIG;
}

static struct timespec deadline_after(uint64_t ms)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t)(ms / 1000);
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        return ts;
}

bool m0__barrier_wait(struct m0_host *h, const char *who, int make_r, const char *why)
{
        pthread_mutex_lock(&h->lock);
        if (make_r < 0 && h->failed_loop < 0) {
                h->failed_loop = 1; /* any failure; `failed_who` names it */
                snprintf(h->failed_who, sizeof(h->failed_who), "%s", who);
                snprintf(h->failed_msg, sizeof(h->failed_msg), "%s", why);
        }
        h->reported++;
        pthread_cond_broadcast(&h->cond);
        while (h->gate == M0_GATE_WAIT)
                pthread_cond_wait(&h->cond, &h->lock);
        bool go = h->gate == M0_GATE_GO;
        pthread_mutex_unlock(&h->lock);
        return go;
}

static void post_stop_all(struct m0_host *h)
{
        atomic_store(&h->stopping, true);
        m0__compute_stop(h); /* queued work finishes; new calls run inline */
        for (int i = 0; i < h->nloops; i++) {
                struct m0_msg *m = calloc(1, sizeof(*m));
                if (!m)
                        continue; /* the loop is then named as a straggler at the bound */
                m->kind = M0_MSG_STOP;
                m->fd = -1;
                (void)m0__loop_post(&h->loops[i], m);
        }
}

/*
 * Join every loop within one bound counted from `t0` (X2): drain + 1 s slack. Returns the exit
 * status: 0 when all stopped in time and none failed, 1 otherwise (stragglers are named).
 */
static bool before(const struct timespec *a, const struct timespec *b)
{
        return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/*
 * Join `t` by `end` (CLOCK_REALTIME); while it runs, tell systemd every second that the drain
 * goes on (EXTEND_TIMEOUT_USEC, X2). 0 when joined, ETIMEDOUT past `end`.
 */
static int join_by(pthread_t t, const struct timespec *end)
{
        for (;;) {
                struct timespec step = deadline_after(1000);
                bool last = !before(&step, end);
                int r = pthread_timedjoin_np(t, NULL, last ? end : &step);
                if (r != ETIMEDOUT || last)
                        return r;
                struct timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                long long left_ms = (long long)(end->tv_sec - now.tv_sec) * 1000 +
                                    (end->tv_nsec - now.tv_nsec) / 1000000;
                char ext[64];
                snprintf(ext, sizeof(ext), "EXTEND_TIMEOUT_USEC=%llu",
                         (unsigned long long)(left_ms > 0 ? left_ms : 0) * 1000ull + 2000000ull);
                (void)m0__notify(ext);
        }
}

/*
 * Every connection one loop handed over was taken by another (L4, X1): a hand-off that no loop
 * received is a client closed with no answer, and the stop is then not clean. Read once every
 * loop has been joined.
 */
static bool handoffs_balance(struct m0_host *h)
{
        uint64_t passed = 0, received = 0;
        for (int i = 0; i < h->nloops; i++) {
                passed += h->loops[i].passed;
                received += h->loops[i].received;
        }
        if (passed == received)
                return true;
        m0__log(M0_LOG_ERR, -1, M0_MID_DRAIN_TIMEOUT,
                "%llu connection%s handed between loops and never received: closed unanswered",
                (unsigned long long)(passed - received),
                passed - received == 1 ? " was" : "s were");
        return false;
}

static int join_loops(struct m0_host *h, uint64_t bound_ms, bool *joined)
{
        struct timespec dl = deadline_after(bound_ms);
        /* The pool's floor (X2): its jobs get at least 500 ms of drain, whatever the bound. */
        uint64_t pool_ms = h->cfg.drain_timeout_ms < 500 ? 500 + 1000 : bound_ms;
        struct timespec pool_dl = deadline_after(pool_ms);
        int code = M0__EXIT_OK;
        struct m0_producer *p = &h->producer;
        atomic_store(&p->stop, true);
        for (int i = 0; i < h->nloops; i++) {
                if (joined[i])
                        continue;
                int r = join_by(h->loops[i].thread, &dl);
                if (r == 0) {
                        joined[i] = true;
                        if (h->loops[i].failed || h->loops[i].cut)
                                code = M0__EXIT_FAIL;
                        continue;
                }
                m0__log(M0_LOG_ERR, i, M0_MID_DRAIN_TIMEOUT,
                        "loop %d still running past the drain's bound (%llu ms)", i,
                        (unsigned long long)bound_ms);
                code = M0__EXIT_FAIL;
        }
        if (code == M0__EXIT_OK && !handoffs_balance(h))
                code = M0__EXIT_FAIL;
        if (p->started) {
                if (join_by(p->thread, &dl) == 0) {
                        p->started = false;
                } else {
                        m0__log(M0_LOG_ERR, -1, M0_MID_DRAIN_TIMEOUT,
                                "the producer %s still running past the drain's bound (%llu ms)",
                                atomic_load(&p->in_step) ? "step is" : "is",
                                (unsigned long long)bound_ms);
                        code = M0__EXIT_FAIL;
                }
        }
        int stuck = m0__compute_join(h, &dl);
        if (stuck) {
                m0__log(M0_LOG_ERR, -1, M0_MID_DRAIN_TIMEOUT,
                        "%d compute thread%s still running past the drain's bound (%llu ms)", stuck,
                        stuck == 1 ? "" : "s", (unsigned long long)bound_ms);
                code = M0__EXIT_FAIL;
        }
        /* Pool threads finish their queue once their loop stopped; same deadline (X2). */
        for (int i = 0; i < h->nloops; i++) {
                struct m0_pool *pool = &h->loops[i].pool;
                if (!joined[i])
                        m0__pool_stop(pool); /* the loop never got there: stop its pool anyway */
                for (int t = 0; t < pool->nthreads; t++) {
                        if (!pool->threads[t].started)
                                continue;
                        if (join_by(pool->threads[t].thread, &pool_dl) == 0) {
                                pool->threads[t].started = false;
                                continue;
                        }
                        m0__log(M0_LOG_ERR, i, M0_MID_DRAIN_TIMEOUT,
                                "loop %d pool thread %d still running past the drain's bound "
                                "(%llu ms)",
                                i, t, (unsigned long long)bound_ms);
                        code = M0__EXIT_FAIL;
                }
        }
        return code;
}

static void status_line(struct m0_host *h, char *out, size_t len)
{
        unsigned comp = h->cfg.compute_threads;
        int n = snprintf(out, len,
                         "STATUS=serving on %d loop%s, %u pool thread%s, %zu socket%s:", h->nloops,
                         h->nloops == 1 ? "" : "s", h->cfg.blocking_threads * (unsigned)h->nloops,
                         h->cfg.blocking_threads * (unsigned)h->nloops == 1 ? "" : "s",
                         h->sockets.n, h->sockets.n == 1 ? "" : "s");
        for (size_t i = 0; i < h->sockets.n && n > 0 && (size_t)n < len; i++)
                n += snprintf(out + n, len - (size_t)n, " %s", h->sockets.v[i].where);
        if (n > 0 && (size_t)n < len)
                snprintf(out + n, len - (size_t)n, "; %u compute thread%s", comp,
                         comp == 1 ? "" : "s");
}

static int serve(struct m0_host *h)
{
        int code = M0__EXIT_OK;
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        /* Blocked here, before any thread exists, so every loop inherits the mask (L6). */
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        h->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (sfd < 0 || h->done_fd < 0) {
                m0__log(M0_LOG_ERR, -1, NULL, "cannot set up signals: %s", strerror(errno));
                return M0__EXIT_FAIL;
        }

        h->nloops = (int)h->cfg.threads;
        m0__crash_install(h, m0__log_journal());
        h->tick_ms = m0__config_source(&h->cfg, "app-tick-ms") != M0_SRC_DEFAULT
                             ? h->cfg.app_tick_ms
                             : h->app->tick_ms;
        uint64_t wd = 0;
        if (sd_watchdog_enabled(0, &wd) > 0)
                h->watchdog_usec = wd;
        h->loops = calloc((size_t)h->nloops, sizeof(*h->loops));
        bool *joined = calloc((size_t)h->nloops, sizeof(bool));
        if (!h->loops || !joined) {
                free(joined);
                close(sfd);
                return M0__EXIT_FAIL;
        }
        h->failed_loop = -1;
        atomic_store(&h->accepting, h->nloops);
        pthread_mutex_init(&h->lock, NULL);
        pthread_cond_init(&h->cond, NULL);

        int started = 0;
        for (int i = 0; i < h->nloops; i++) {
                int r = m0__loop_init(&h->loops[i], h, i);
                if (r < 0) {
                        m0__log(M0_LOG_ERR, i, NULL, "cannot set up loop %d: %s", i, strerror(-r));
                        code = M0__EXIT_FAIL;
                        break;
                }
        }
        for (int i = 0; code == M0__EXIT_OK && i < h->nloops; i++) {
                struct m0_loop *l = &h->loops[i];
                int r = pthread_create(&l->thread, NULL, m0__loop_main, l);
                if (r != 0) {
                        m0__log(M0_LOG_ERR, i, NULL, "cannot start loop %d: %s", i, strerror(r));
                        code = M0__EXIT_FAIL;
                        break;
                }
                l->started = true;
                started++;
                for (int t = 0; t < l->pool.nthreads; t++) {
                        r = pthread_create(&l->pool.threads[t].thread, NULL, m0__pool_main,
                                           &l->pool.threads[t]);
                        if (r != 0) {
                                m0__log(M0_LOG_ERR, i, NULL, "cannot start loop %d's pool: %s", i,
                                        strerror(r));
                                code = M0__EXIT_FAIL;
                                break;
                        }
                        l->pool.threads[t].started = true;
                        started++;
                }
        }

        /* The barrier (L1, L3): nobody accepts until every loop has built its handler. */
        pthread_mutex_lock(&h->lock);
        while (h->reported < started)
                pthread_cond_wait(&h->cond, &h->lock);
        bool go = code == M0__EXIT_OK && h->failed_loop < 0;
        /* Then the producer, built after every handler and before any loop serves (S2). */
        if (go && m0__producer_needed(h)) {
                struct m0_producer *p = &h->producer;
                p->beats = calloc((size_t)h->nloops, sizeof(*p->beats));
                p->stuck = calloc((size_t)h->nloops, sizeof(*p->stuck));
                if (!p->beats || !p->stuck ||
                    pthread_create(&p->thread, NULL, m0__producer_main, h) != 0) {
                        m0__log(M0_LOG_ERR, -1, NULL, "cannot start the producer");
                        code = M0__EXIT_FAIL;
                        go = false;
                } else {
                        p->started = true;
                        started++;
                        while (h->reported < started)
                                pthread_cond_wait(&h->cond, &h->lock);
                        go = h->failed_loop < 0;
                }
        }
        /* P4: the compute pool, after every handler exists and before any loop serves. */
        if (go && m0__compute_start(h) < 0) {
                m0__log(M0_LOG_ERR, -1, NULL, "cannot start the compute pool");
                code = M0__EXIT_FAIL;
                go = false;
        }
        if (go) {
                char st[512];
                status_line(h, st, sizeof(st));
                char msg[600];
                snprintf(msg, sizeof(msg), "READY=1\n%s", st);
                (void)m0__notify(msg);
                m0__log(M0_LOG_NOTICE, -1, M0_MID_READY, "ready: %s", st + 7);
        }
        h->gate = go ? M0_GATE_GO : M0_GATE_ABORT;
        pthread_cond_broadcast(&h->cond);
        pthread_mutex_unlock(&h->lock);

        if (!go) {
                for (int i = 0; i < h->nloops; i++) {
                        struct m0_loop *l = &h->loops[i];
                        if (l->started)
                                pthread_join(l->thread, NULL);
                        l->started = false;
                        for (int t = 0; t < l->pool.nthreads; t++)
                                if (l->pool.threads[t].started)
                                        pthread_join(l->pool.threads[t].thread, NULL);
                        for (int t = 0; t < l->pool.nthreads; t++)
                                l->pool.threads[t].started = false;
                        joined[i] = true;
                }
                if (h->producer.started)
                        pthread_join(h->producer.thread, NULL);
                h->producer.started = false;
                m0__compute_stop(h);
                struct timespec far = deadline_after(3600 * 1000);
                (void)m0__compute_join(h, &far);
                if (h->failed_loop >= 0) {
                        char finding[400];
                        snprintf(finding, sizeof(finding), "%s's make failed: %s", h->failed_who,
                                 h->failed_msg);
                        code = refuse(finding,
                                      "the app could not build its handler; no loop accepted");
                }
                goto out;
        }

        /* Serve until a signal, or until a loop ends on its own (L5: then the process ends). */
        uint64_t bound = (uint64_t)h->cfg.drain_timeout_ms + 1000;
        for (;;) {
                struct pollfd pf[2] = {{.fd = sfd, .events = POLLIN},
                                       {.fd = h->done_fd, .events = POLLIN}};
                int n = poll(pf, 2, -1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        code = M0__EXIT_FAIL;
                        break;
                }
                if (pf[1].revents & POLLIN) {
                        /* A loop ended while nobody asked it to stop. */
                        for (int i = 0; i < h->nloops; i++)
                                if (h->loops[i].failed)
                                        m0__log(M0_LOG_CRIT, i, M0_MID_LOOP_CRASHED,
                                                "loop %d died; the process ends (systemd restarts "
                                                "it)",
                                                i);
                        (void)m0__notify("STOPPING=1");
                        post_stop_all(h);
                        (void)join_loops(h, bound, joined);
                        code = M0__EXIT_FAIL;
                        break;
                }
                if (pf[0].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        if (read(sfd, &si, sizeof(si)) != sizeof(si))
                                continue;
                        if (si.ssi_signo == SIGHUP) {
                                m0__log(M0_LOG_NOTICE, -1, NULL,
                                        "SIGHUP ignored: configuration is read at start; restart "
                                        "to reload");
                                continue;
                        }
                        m0__log(M0_LOG_NOTICE, -1, NULL, "%s: draining (bound %u ms)",
                                strsignal((int)si.ssi_signo), h->cfg.drain_timeout_ms);
                        char ext[64];
                        snprintf(ext, sizeof(ext), "STOPPING=1\nEXTEND_TIMEOUT_USEC=%llu",
                                 (unsigned long long)(bound + 1000) * 1000ull);
                        (void)m0__notify(ext);
                        post_stop_all(h);
                        code = join_loops(h, bound, joined);
                        break;
                }
        }
        if (code == M0__EXIT_OK)
                m0__log(M0_LOG_INFO, -1, NULL, "stopped");
out:
        for (int i = 0; i < h->nloops; i++) {
                /* A straggler still runs: its loop's memory stays, the process is ending. */
                struct m0_loop *l = &h->loops[i];
                bool pool_running = false;
                for (int t = 0; t < l->pool.nthreads; t++)
                        pool_running |= l->pool.threads[t].started;
                if ((joined[i] || !l->started) && !pool_running)
                        m0__loop_destroy(l);
        }
        free(joined);
        if (!h->producer.started) {
                free(h->producer.beats);
                free(h->producer.stuck);
        }
        close(sfd);
        close(h->done_fd);
        return code;
}

int m0_main(const m0_app *app, int argc, char **argv)
{
        static struct m0_host host;
        struct m0_host *h = &host;
        char err[512];
        const char *name = app && app->name ? app->name : "m0";
        memset(h, 0, sizeof(*h));
        h->app = app;
        m0__log_init(name);

        switch (m0__config_parse(&h->cfg, name, argc, argv, environ, stdout, err, sizeof(err))) {
        case M0_CONFIG_HELP:
        case M0_CONFIG_VERSION: return M0__EXIT_OK;
        case M0_CONFIG_USAGE:
                m0__config_usage(stderr, name);
                fprintf(stderr, "\nm0: %s\n", err);
                return M0__EXIT_USAGE;
        case M0_CONFIG_REFUSED:
                if (h->cfg.doctor) {
                        /* D1: the doctor answers for this configuration too, and exits 78 like
                         * serving would. The values shown are what parsed before the refusal. */
                        struct m0_check bad = {.name = "configuration", .ok = false};
                        snprintf(bad.detail, sizeof(bad.detail), "%.255s", err);
                        snprintf(bad.fix, sizeof(bad.fix), "set the variable to a value it takes");
                        h->sockets.store_fd = -1;
                        return m0__doctor(h, &bad, 1, 0, stdout);
                }
                return refuse(err, NULL);
        case M0_CONFIG_SERVE: break;
        }

        /* Passed sockets are looked at before the checks: `listen-sockets` is one of them. */
        if (m0__sockets_take(&h->sockets, h->sockets_err, sizeof(h->sockets_err)) < 0 &&
            !h->sockets_err[0])
                snprintf(h->sockets_err, sizeof(h->sockets_err), "LISTEN_FDS could not be used");

        struct m0_check checks[M0__CHECKS_MAX];
        size_t nchecks = 0;
        int first = m0__checks_run(h, checks, M0__ARRAY_SIZE(checks), &nchecks);
        if (h->cfg.doctor) {
                int code = m0__doctor(h, checks, nchecks, first, stdout);
                m0__sockets_close(&h->sockets);
                return code;
        }
        if (first >= 0) {
                char finding[400];
                snprintf(finding, sizeof(finding), "%s: %s", checks[first].name,
                         checks[first].detail);
                m0__sockets_close(&h->sockets);
                return refuse(finding, checks[first].fix);
        }
        if (!h->sockets.passed) {
                (void)m0__caps_keep_bind(); /* the bound set is dropped whole right after */
                int r = m0__sockets_bind(&h->sockets, h->cfg.host, h->cfg.port, err, sizeof(err));
                if (r < 0) {
                        m0__sockets_close(&h->sockets);
                        return refuse(err, NULL);
                }
        }
        (void)m0__limits_raise(h);
        /* K1: the sockets are held; nothing else the host does needs a capability. */
        if (m0__caps_drop(err, sizeof(err)) < 0) {
                m0__sockets_close(&h->sockets);
                m0__log(M0_LOG_ERR, -1, NULL, "%s", err);
                return M0__EXIT_FAIL;
        }
        if (m0__bus_init(&h->bus, h->cfg.replay_frames, (int)h->cfg.threads,
                         h->cfg.channel_frames) < 0) {
                m0__sockets_close(&h->sockets);
                m0__log(M0_LOG_ERR, -1, NULL, "no memory for the replay ring");
                return M0__EXIT_FAIL;
        }
        h->bus.wake = m0__bus_wake_loops;
        h->bus.wake_ud = h;
        /* B4: under systemd the event ids and the replay ring outlive this process. */
        if (getenv("NOTIFY_SOCKET") || h->sockets.store_fd >= 0) {
                char msg[300];
                int fd = h->sockets.store_fd;
                h->sockets.store_fd = -1; /* the store owns it now */
                if (m0__store_open(h, fd, msg, sizeof(msg)) == 0)
                        m0__log(M0_LOG_NOTICE, -1, NULL, "%s", msg);
                else
                        m0__log(M0_LOG_WARNING, -1, NULL,
                                "event state cannot be kept in the fd store: ids restart with the "
                                "process");
        }
        m0__bus_global = &h->bus;
        int code = serve(h);
        m0__sockets_close(&h->sockets);
        if (code == M0__EXIT_OK) {
                /* Threads that outlived the bound may still publish: keep the ring then. */
                m0__bus_global = NULL;
                m0__bus_destroy(&h->bus);
        }
        return code;
}
