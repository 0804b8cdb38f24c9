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
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "caps.h"
#include "preflight.h"
#include "crash.h"
#include "doctor.h"
#include "h2.h"
#include "host-private.h"
#include "log.h"
#include "notify.h"
#include "sse.h"
#include "fdstore-log.h"

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

/* ---- what the other folders read of the host, handed to them (LY4, D240) ---- */

void m0__host_link(struct m0_host *h)
{
        struct m0_serve *s = &h->serve;
        s->app = h->app;
        s->cfg = &h->cfg;
        s->router = &h->router;
        s->cors = &h->cors;
        s->bus = &h->bus;
        s->sockets = &h->sockets;
        s->life = &h->life;
        s->tls = h->tls;
        h->life = (struct m0_lifecycle){.app = h->app,
                                        .barrier = &h->barrier,
                                        .loops = s->nloops,
                                        .loop_handler_max_ms = (unsigned)(s->watchdog_usec / 4000)};
        h->metrics.serve = s;
        h->metrics.shared = &h->shared;
}

/* ---- the threads: one list of every thread started, in the order they started ---- */

static void add_thread(struct m0_host *h, struct m0_thread *t)
{
        h->threads[h->nthreads++] = t; /* sized for every thread there can be (prepare) */
}

/* Start `t` and put it on the host's list. 0, or -errno with the failure logged. */
static int start_thread(struct m0_host *h, struct m0_thread *t)
{
        int r = m0__thread_start(t);
        if (r < 0) {
                m0__log(M0_LOG_ERR, t->loop, NULL, "cannot start %s: %s", t->who, strerror(-r));
                return r;
        }
        add_thread(h, t);
        return 0;
}

/* Each loop's thread and its pool threads (L1): they build their handlers and wait. */
static int start_loops(struct m0_host *h)
{
        for (int i = 0; i < h->serve.nloops; i++) {
                struct m0_hctx *l = &h->serve.loops[i];
                int r = start_thread(h, &l->thread);
                for (int t = 0; r == 0 && t < l->pool.nthreads; t++)
                        r = start_thread(h, &l->pool.threads[t].thread);
                if (r < 0)
                        return M0__EXIT_FAIL;
        }
        return M0__EXIT_OK;
}

/* ---- the start ---- */

/*
 * Everything serving needs before a thread exists: the signals blocked (every thread inherits
 * the mask, L6), the crash handlers, the loops (every one prepared before any is built, so a
 * failure on one leaves the rest safe to destroy), the thread list and the barrier.
 */
static int prepare(struct m0_host *h, int *ret_sfd)
{
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);
        *ret_sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        h->serve.done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (*ret_sfd < 0 || h->serve.done_fd < 0) {
                m0__log(M0_LOG_ERR, -1, NULL, "cannot set up signals: %s", strerror(errno));
                return M0__EXIT_FAIL;
        }
        h->serve.nloops = (int)h->cfg.threads;
        m0__crash_install(h->app->name, m0__log_journal());
        h->serve.tick_ms = m0__config_source(&h->cfg, "app-tick-ms") != M0_SRC_DEFAULT
                                   ? h->cfg.app_tick_ms
                                   : h->app->tick_ms;
        uint64_t wd = 0;
        if (sd_watchdog_enabled(0, &wd) > 0)
                h->serve.watchdog_usec = wd;
        m0__barrier_init(&h->barrier);
        atomic_store(&h->serve.accepting, h->serve.nloops);
        m0__thread_init(&h->producer.thread, M0_THREAD_PRODUCER, -1, -1, m0__producer_main, h);
        h->threads_cap = h->serve.nloops * (1 + (int)h->cfg.blocking_threads) + 1 +
                         (int)h->cfg.compute_threads;
        h->serve.loops = calloc((size_t)h->serve.nloops, sizeof(*h->serve.loops));
        h->threads = calloc((size_t)h->threads_cap, sizeof(*h->threads));
        if (!h->serve.loops || !h->threads)
                return M0__EXIT_FAIL;
        m0__host_link(h);
        for (int i = 0; i < h->serve.nloops; i++)
                m0__hctx_prepare(&h->serve.loops[i], &h->serve, i);
        for (int i = 0; i < h->serve.nloops; i++) {
                int r = m0__hctx_build(&h->serve.loops[i]);
                if (r < 0) {
                        m0__log(M0_LOG_ERR, i, NULL, "cannot set up loop %d: %s", i, strerror(-r));
                        return M0__EXIT_FAIL;
                }
        }
        return M0__EXIT_OK;
}

static void status_line(struct m0_host *h, char *out, size_t len)
{
        unsigned comp = h->cfg.compute_threads;
        int n = snprintf(out, len, "STATUS=serving on %d loop%s, %u pool thread%s, %zu socket%s:",
                         h->serve.nloops, h->serve.nloops == 1 ? "" : "s",
                         h->cfg.blocking_threads * (unsigned)h->serve.nloops,
                         h->cfg.blocking_threads * (unsigned)h->serve.nloops == 1 ? "" : "s",
                         h->sockets.n, h->sockets.n == 1 ? "" : "s");
        for (size_t i = 0; i < h->sockets.n && n > 0 && (size_t)n < len; i++)
                n += snprintf(out + n, len - (size_t)n, " %s", h->sockets.v[i].where);
        if (n > 0 && (size_t)n < len)
                n += snprintf(out + n, len - (size_t)n, "; %u compute thread%s", comp,
                              comp == 1 ? "" : "s");
        for (size_t i = 0; i < h->sockets.nmetrics && n > 0 && (size_t)n < len; i++)
                n += snprintf(out + n, len - (size_t)n, "%s %s", i ? "" : "; metrics on",
                              h->sockets.metrics[i].where);
}

/*
 * The barrier (L1, L3): nobody accepts until every loop and pool thread has built its handler;
 * then the producer, built after every handler and before any loop serves (S2); then the
 * compute pool (P4); then READY=1. Returns true when serving begins; the gate is still shut.
 */
static bool await_handlers(struct m0_host *h)
{
        if (!m0__barrier_await(&h->barrier, h->nthreads))
                return false;
        if (m0__producer_needed(h)) {
                struct m0_producer *p = &h->producer;
                p->beats = calloc((size_t)h->serve.nloops, sizeof(*p->beats));
                p->stuck = calloc((size_t)h->serve.nloops, sizeof(*p->stuck));
                if (!p->beats || !p->stuck) {
                        m0__log(M0_LOG_ERR, -1, NULL, "cannot start the producer: %s",
                                strerror(ENOMEM));
                        return false;
                }
                if (start_thread(h, &p->thread) < 0)
                        return false;
                if (!m0__barrier_await(&h->barrier, h->nthreads))
                        return false;
        }
        int r = m0__compute_start(&h->compute, h->cfg.compute_threads);
        for (int i = 0; h->compute.threads && i < h->compute.nthreads; i++)
                if (h->compute.threads[i].started)
                        add_thread(h, &h->compute.threads[i]);
        if (r < 0) {
                m0__log(M0_LOG_ERR, -1, NULL, "cannot start the compute pool");
                return false;
        }
        r = m0__metrics_start(&h->metrics);
        if (r < 0) {
                m0__log(M0_LOG_ERR, -1, NULL, "cannot start the metrics thread: %s", strerror(-r));
                return false;
        }
        char st[1200];
        status_line(h, st, 512);
        m0__shared_notify_ready(&h->shared, st, sizeof(st));
        m0__log(M0_LOG_NOTICE, -1, M0_MID_READY, "ready: %s", st + 7);
        return true;
}

/* A start that does not go on: every thread is let go from the barrier and joined, and a make
 * that failed is the refusal (R4: no loop took a connection). */
static int abort_start(struct m0_host *h, int code)
{
        m0__barrier_open(&h->barrier, false);
        m0__compute_stop(&h->compute);
        struct timespec far = m0__deadline_after(3600 * 1000);
        for (int i = 0; i < h->nthreads; i++)
                (void)m0__thread_join_by(h->threads[i], &far);
        if (!h->barrier.failed)
                return code == M0__EXIT_OK ? M0__EXIT_FAIL : code;
        char finding[400];
        snprintf(finding, sizeof(finding), "%s's make failed: %s", h->barrier.failed_who,
                 h->barrier.failed_msg);
        return refuse(finding, "the app could not build its handler; no loop accepted");
}

/* ---- the stop ---- */

static void post_stop_all(struct m0_host *h)
{
        atomic_store(&h->serve.stopping, true);
        atomic_store(&h->producer.stop, true);
        m0__compute_stop(&h->compute); /* queued work finishes; new calls run inline */
        /* a stop that cannot be allocated leaves its loop named as a straggler at the bound */
        for (int i = 0; i < h->serve.nloops; i++)
                (void)m0__hctx_post_stop(&h->serve.loops[i]);
}

/*
 * Every connection one loop handed over was taken by another (L4, X1): a hand-off that no loop
 * received is a client closed with no answer, and the stop is then not clean. Read once every
 * loop has been joined.
 */
static bool handoffs_balance(struct m0_host *h)
{
        uint64_t passed = 0, received = 0;
        for (int i = 0; i < h->serve.nloops; i++) {
                passed += h->serve.loops[i].passed;
                received += h->serve.loops[i].received;
        }
        if (passed == received)
                return true;
        m0__log(M0_LOG_ERR, -1, M0_MID_DRAIN_TIMEOUT,
                "%llu connection%s handed between loops and never received: closed unanswered",
                (unsigned long long)(passed - received),
                passed - received == 1 ? " was" : "s were");
        return false;
}

/* Name a thread still running past the drain's bound (X2), each kind in its own words. */
static void name_straggler(struct m0_host *h, const struct m0_thread *t, uint64_t bound_ms)
{
        unsigned long long ms = (unsigned long long)bound_ms;
        if (t->kind == M0_THREAD_PRODUCER)
                m0__log(M0_LOG_ERR, -1, M0_MID_DRAIN_TIMEOUT,
                        "the producer %s still running past the drain's bound (%llu ms)",
                        atomic_load(&h->producer.in_step) ? "step is" : "is", ms);
        else if (t->kind != M0__THREAD_COMPUTE)
                m0__log(M0_LOG_ERR, t->loop, M0_MID_DRAIN_TIMEOUT,
                        "%s still running past the drain's bound (%llu ms)", t->who, ms);
}

/*
 * Join every thread within one bound counted from the signal (X2): the drain + 1 s slack, and
 * for pool threads at least 500 ms of drain whatever the bound. Returns the exit status: 0 when
 * all stopped in time, no loop failed or cut a connection, and every hand-off was received.
 */
static int join_all(struct m0_host *h, uint64_t bound_ms)
{
        struct timespec dl = m0__deadline_after(bound_ms);
        uint64_t pool_ms = h->cfg.drain_timeout_ms < 500 ? 500 + 1000 : bound_ms;
        struct timespec pool_dl = m0__deadline_after(pool_ms);
        int code = M0__EXIT_OK, compute_left = 0;
        for (int i = 0; i < h->nthreads; i++) {
                struct m0_thread *t = h->threads[i];
                bool pool = t->kind == M0_THREAD_POOL;
                /* A loop that never got to the end of its drain did not stop its pool. */
                if (pool && h->serve.loops[t->loop].thread.started)
                        m0__pool_stop(&h->serve.loops[t->loop].pool);
                if (m0__thread_join_by(t, pool ? &pool_dl : &dl) == 0)
                        continue;
                code = M0__EXIT_FAIL;
                if (t->kind == M0__THREAD_COMPUTE)
                        compute_left++;
                else
                        name_straggler(h, t, bound_ms);
        }
        if (compute_left)
                m0__log(M0_LOG_ERR, -1, M0_MID_DRAIN_TIMEOUT,
                        "%d compute thread%s still running past the drain's bound (%llu ms)",
                        compute_left, compute_left == 1 ? "" : "s", (unsigned long long)bound_ms);
        for (int i = 0; i < h->serve.nloops; i++)
                if (h->serve.loops[i].failed || h->serve.loops[i].cut)
                        code = M0__EXIT_FAIL;
        if (code == M0__EXIT_OK && !handoffs_balance(h))
                code = M0__EXIT_FAIL;
        return code;
}

/* A loop ended while nobody asked it to stop (L5): the process ends with it. */
static int loop_died(struct m0_host *h, uint64_t bound_ms)
{
        for (int i = 0; i < h->serve.nloops; i++)
                if (h->serve.loops[i].failed)
                        m0__log(M0_LOG_CRIT, i, M0_MID_LOOP_CRASHED,
                                "loop %d died; the process ends (systemd restarts it)", i);
        (void)m0__notify("STOPPING=1");
        post_stop_all(h);
        (void)join_all(h, bound_ms);
        return M0__EXIT_FAIL;
}

/* SIGTERM or SIGINT: the drain (X1, X2). */
static int drain(struct m0_host *h, int signo, uint64_t bound_ms)
{
        /* Before the line: whoever reads "draining" in the log finds m0_draining at 1 (O1). */
        atomic_store(&h->serve.stopping, true);
        m0__log(M0_LOG_NOTICE, -1, NULL, "%s: draining (bound %u ms)", strsignal(signo),
                h->cfg.drain_timeout_ms);
        char ext[64];
        snprintf(ext, sizeof(ext), "STOPPING=1\nEXTEND_TIMEOUT_USEC=%llu",
                 (unsigned long long)(bound_ms + 1000) * 1000ull);
        (void)m0__notify(ext);
        h->stop_by_ms = m0__now_ms() + bound_ms;
        m0__shared_draining(&h->shared);
        post_stop_all(h);
        return join_all(h, bound_ms);
}

/* Serve until a signal, or until a loop ends on its own (L5, L6). */
/* What the bus did, at the stop: the counts N4 and N3 promise (eviction, the lease's waits). */
static void log_bus(struct m0_bus *b)
{
        struct m0_bus_stats st;
        pthread_mutex_lock(&b->lock);
        m0__bus_stats(b, &st);
        m0__log(M0_LOG_NOTICE, -1, NULL,
                "bus stopped: published %llu events and %llu transient ones (%llu on a channel "
                "nobody followed); last id %llu; replay kept %llu frames of %zu channels in %zu "
                "bytes, channels "
                "evicted %llu, frames given up past the bound %llu; publishes that waited for "
                "the id lease %llu",
                (unsigned long long)st.published, (unsigned long long)st.transient,
                (unsigned long long)st.unfollowed, (unsigned long long)b->last_id,
                (unsigned long long)b->replay.frames, b->replay.map.n, b->replay.bytes,
                (unsigned long long)st.chans_evicted, (unsigned long long)st.past_bound,
                (unsigned long long)st.lease_waits);
        pthread_mutex_unlock(&b->lock);
}

static void count_cert(void *ud, const struct m0_tls_cert *c)
{
        (void)c;
        (*(size_t *)ud)++;
}

/*
 * SIGHUP (TL4): the certificates and keys are read again and, when they pass TL3's checks, serve
 * every handshake from now on; connections open keep theirs. A set that fails keeps the old one
 * serving, and the log says why. The rest of the configuration is read at start only.
 */
static void reload(struct m0_host *h)
{
        if (!h->tls) {
                m0__log(M0_LOG_NOTICE, -1, NULL,
                        "SIGHUP ignored: configuration is read at start; restart to reload");
                return;
        }
        char err[512], fix[512];
        if (m0__tls_reload(h->tls, err, sizeof(err), fix, sizeof(fix)) < 0) {
                m0__log(M0_LOG_ERR, -1, NULL,
                        "TLS reload refused, the certificates loaded before still serve: %s (%s)",
                        err, fix);
                return;
        }
        size_t n = 0;
        m0__tls_each_cert(h->tls, count_cert, &n);
        m0__log(M0_LOG_NOTICE, -1, NULL,
                "TLS reloaded: %zu certificate%s for new handshakes; open connections keep theirs",
                n, n == 1 ? "" : "s");
        (void)m0__tls_warn_expiring(h->tls, time(NULL), h->cfg.tls_warn_days);
}

static int serve_until_signal(struct m0_host *h, int sfd)
{
        m0__barrier_open(&h->barrier, true);
        uint64_t bound = (uint64_t)h->cfg.drain_timeout_ms + 1000;
        for (;;) {
                struct pollfd pf[2] = {{.fd = sfd, .events = POLLIN},
                                       {.fd = h->serve.done_fd, .events = POLLIN}};
                if (poll(pf, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return M0__EXIT_FAIL;
                }
                if (pf[1].revents & POLLIN)
                        return loop_died(h, bound);
                struct signalfd_siginfo si;
                if (!(pf[0].revents & POLLIN) || read(sfd, &si, sizeof(si)) != sizeof(si))
                        continue;
                if (si.ssi_signo != SIGHUP) {
                        int code = drain(h, (int)si.ssi_signo, bound);
                        if (code == M0__EXIT_OK) {
                                log_bus(&h->bus);
                                m0__log(M0_LOG_INFO, -1, NULL, "stopped");
                        }
                        return code;
                }
                reload(h);
        }
}

/* Free what serving held. A straggler still runs: its loop's memory stays, as the process is
 * ending anyway. */
static void release(struct m0_host *h)
{
        bool running = false;
        for (int i = 0; i < h->nthreads; i++)
                running |= h->threads[i]->started;
        if (!running) {
                for (int i = 0; h->serve.loops && i < h->serve.nloops; i++)
                        m0__hctx_destroy(&h->serve.loops[i]);
                free(h->serve.loops);
                h->serve.loops = NULL;
                free(h->producer.beats);
                free(h->producer.stuck);
                m0__compute_free(&h->compute);
                m0__barrier_destroy(&h->barrier);
        }
        free(h->threads);
        h->threads = NULL;
        h->nthreads = 0;
        if (h->serve.done_fd >= 0)
                close(h->serve.done_fd);
}

static int serve(struct m0_host *h)
{
        int sfd = -1;
        h->serve.done_fd = -1;
        int code = prepare(h, &sfd);
        if (code == M0__EXIT_OK)
                code = start_loops(h);
        if (code == M0__EXIT_OK && await_handlers(h))
                code = serve_until_signal(h, sfd);
        else
                code = abort_start(h, code);
        /* Scrapes are answered through the drain, until every loop is joined (O1). */
        m0__metrics_stop(&h->metrics);
        /* The shared bus publishes what is queued within what is left of the drain's bound (a
         * failed start has none), once nothing that publishes is running (D97). */
        uint64_t now = m0__now_ms();
        m0__shared_stop(&h->shared, h->stop_by_ms > now ? h->stop_by_ms - now : 0);
        release(h);
        if (sfd >= 0)
                close(sfd);
        return code;
}

/* ---- m0_main: parse, refuse, take the sockets, start the bus, serve ---- */

/* The configuration: 0 (serve), or the status m0_main() returns now. */
static int configure(struct m0_host *h, const char *name, int argc, char **argv)
{
        char err[512];
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
        return -1;
}

/* The sockets, the checks (R2) or the doctor (D1), the bind, the rlimit and the capabilities
 * (K1). -1 to go on serving, else the status m0_main() returns now. */
static int take_sockets(struct m0_host *h)
{
        char err[512];
        /* Passed sockets are looked at before the checks: `listen-sockets` is one of them. */
        if (m0__sockets_take(&h->sockets, h->sockets_err, sizeof(h->sockets_err)) < 0 &&
            !h->sockets_err[0])
                snprintf(h->sockets_err, sizeof(h->sockets_err), "LISTEN_FDS could not be used");
        struct m0_check checks[M0__CHECKS_MAX];
        size_t nchecks = 0;
        int first = m0__checks_run(h, checks, M0__ARRAY_SIZE(checks), &nchecks);
        if (h->cfg.doctor)
                return m0__doctor(h, checks, nchecks, first, stdout);
        if (first >= 0) {
                char finding[400];
                snprintf(finding, sizeof(finding), "%s: %s", checks[first].name,
                         checks[first].detail);
                return refuse(finding, checks[first].fix);
        }
        /* TL3: a certificate near its end is a warning at the start. */
        if (h->tls)
                (void)m0__tls_warn_expiring(h->tls, time(NULL), h->cfg.tls_warn_days);
        if (!h->sockets.passed || (h->cfg.metrics.on && !h->sockets.metrics_passed))
                (void)m0__caps_keep_bind(); /* the bound set is dropped whole right after */
        if (!h->sockets.passed &&
            m0__sockets_bind(&h->sockets, h->cfg.host, h->cfg.port, err, sizeof(err)) < 0)
                return refuse(err, NULL);
        /* TL1: outside systemd, --tls-port serves TLS beside the plain port. */
        if (!h->sockets.passed && h->cfg.tls_port &&
            m0__sockets_bind_tls(&h->sockets, h->cfg.host, h->cfg.tls_port, err, sizeof(err)) < 0)
                return refuse(err, NULL);
        /* O1: a passed socket named metrics wins over M0_METRICS, as passed sockets win over
         * M0_HOST/M0_PORT. */
        if (h->cfg.metrics.on && !h->sockets.metrics_passed &&
            m0__sockets_bind_metrics(&h->sockets, h->cfg.metrics.host, h->cfg.metrics.port, err,
                                     sizeof(err)) < 0)
                return refuse(err, NULL);
        (void)m0__limits_raise(h);
        /* K1: the sockets are held; nothing else the host does needs a capability. */
        if (m0__caps_drop(err, sizeof(err)) < 0) {
                m0__log(M0_LOG_ERR, -1, NULL, "%s", err);
                return M0__EXIT_FAIL;
        }
        return -1;
}

/* Microseconds of the wall clock: past every id a process of ours started from it before, as long
 * as none took more than a million ids a second on average (N3, D76). */
static uint64_t wall_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/*
 * Where the ids start when the fd store gave none back (N3): after the lease in the state
 * directory; at 1 in a state directory that holds none yet (the service's first start); above
 * the wall clock's microseconds without one, so that a Last-Event-ID of an earlier process is
 * below every new id and gets a full replay. `ids` says which, for the log.
 */
static uint64_t ids_from(struct m0_host *h, int found, uint64_t lease, const char *why, char *ids,
                         size_t len)
{
        if (found == 1) {
                snprintf(ids, len, "ids continue after %llu, the lease kept in %s",
                         (unsigned long long)lease, h->lease.dir);
                return lease;
        }
        if (found == 0) {
                snprintf(ids, len, "ids start at 1 (%s holds no lease yet)", h->lease.dir);
                return 0;
        }
        uint64_t us = wall_us();
        snprintf(ids, len, "ids start above the wall clock, after %llu (%s)",
                 (unsigned long long)us, found == -ENOENT ? "no state directory" : why);
        return us;
}

/* The ids' start: the fd store's last id, or ids_from(); then the lease's writer (N3). */
static void start_ids(struct m0_host *h, bool restored, const char *store_msg)
{
        char why[300] = "", ids[600] = "";
        uint64_t lease = 0;
        int found = m0__lease_open(&h->lease, getenv("STATE_DIRECTORY"), &lease, why, sizeof(why));
        if (!restored)
                m0__bus_set_last(&h->bus, ids_from(h, found, lease, why, ids, sizeof(ids)));
        m0__log(M0_LOG_NOTICE, -1, NULL, "%s%s%s", store_msg, *store_msg && *ids ? "; " : "", ids);
        if (h->lease.dirfd >= 0 && m0__lease_start(&h->lease, &h->bus, why, sizeof(why)) < 0)
                m0__log(M0_LOG_ERR, -1, NULL, "%s: ids may go backwards after a stop", why);
}

/* The bus and, under systemd, its state in the fd store (B4, N6); where ids start (N3). 0 or
 * M0__EXIT_FAIL. */
static int start_bus(struct m0_host *h)
{
        char err[700];
        if (m0__bus_init(&h->bus, (int)h->cfg.threads, h->cfg.channel_frames,
                         h->cfg.replay_per_channel, h->cfg.replay_bytes) < 0) {
                m0__log(M0_LOG_ERR, -1, NULL, "no memory for the bus");
                return M0__EXIT_FAIL;
        }
        h->bus.max_channels = h->cfg.stream_max_channels;
        h->bus.wake = m0__bus_wake_loops;
        h->bus.wake_ud = &h->serve;
        m0__bus_global = &h->bus;
        int r = m0__shared_start(&h->shared, &h->bus, &h->cfg, h->app, err, sizeof(err));
        if (r == -EPROTO)
                return refuse(err, "drop or rename that table, or name another database or "
                                   "search_path in M0_BUS");
        if (r < 0) {
                m0__log(M0_LOG_ERR, -1, NULL, "%s", err);
                return M0__EXIT_FAIL;
        }
        if (h->bus.shared) {
                /* Ids are the database's: no fd store of events, no lease (D93). */
                if (h->sockets.store_fd >= 0)
                        close(h->sockets.store_fd);
                h->sockets.store_fd = -1;
                return M0__EXIT_OK;
        }
        char msg[600] = "";
        bool restored = false;
        if (getenv("NOTIFY_SOCKET") || h->sockets.store_fd >= 0) {
                int fd = h->sockets.store_fd;
                h->sockets.store_fd = -1; /* the store owns it now */
                if (m0__store_open(&h->bus, h->cfg.replay_bytes, fd, &restored, msg, sizeof(msg)) <
                    0) {
                        m0__log(M0_LOG_WARNING, -1, NULL,
                                "event state cannot be kept in the fd store: replay starts empty "
                                "with each process");
                        msg[0] = '\0';
                }
        }
        start_ids(h, restored, msg);
        return M0__EXIT_OK;
}

int m0_main(const m0_app *app, int argc, char **argv)
{
        static struct m0_host host;
        struct m0_host *h = &host;
        const char *name = app && app->name ? app->name : "m0";
        memset(h, 0, sizeof(*h));
        h->app = app;
        h->serve.h2 = &m0__proto_h2; /* HT1: prior knowledge on every plain socket */
        h->sockets.store_fd = -1;
        m0__log_init(name);
        int code = configure(h, name, argc, argv);
        if (code >= 0)
                return code;
        /* T1, Q5: compiled once, here; what they refuse is the checks' `routes` and `cors`. */
        (void)m0__router_build(&h->router, app, &h->cfg);
        (void)m0__cors_build(&h->cors, app->cors);
        code = take_sockets(h);
        if (code < 0 && (code = start_bus(h)) == M0__EXIT_OK) {
                code = serve(h);
                /* A clean stop writes the last id itself: the next start goes on after it. */
                m0__lease_stop(&h->lease, code == M0__EXIT_OK);
                if (code == M0__EXIT_OK) {
                        /* Threads that outlived the bound may still publish: keep the bus then. */
                        m0__bus_global = NULL;
                        m0__shared_free(&h->shared);
                        m0__bus_destroy(&h->bus);
                }
        } else if (h->bus.shared) {
                m0__shared_stop(&h->shared, 0);
                m0__bus_global = NULL;
                m0__shared_free(&h->shared);
                m0__bus_destroy(&h->bus);
        }
        m0__sockets_close(&h->sockets);
        /* A straggler past the drain's bound may still route: the table stays then. */
        if (code == M0__EXIT_OK || code == M0__EXIT_CONFIG || code == M0__EXIT_USAGE) {
                m0__router_free(&h->router);
                m0__tls_free(h->tls);
        }
        return code;
}
