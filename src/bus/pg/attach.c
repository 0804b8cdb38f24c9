/* SPDX-License-Identifier: MIT */
/* attach.c: the bus shared through PostgreSQL attached to the host (G1–G4, D93–D97): the start
 * before READY=1, the table's events through m0__bus_deliver, replays from the table, STATUS=,
 * the stop. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "notify.h"
#include "load.h"
#include "attach.h"

/*
 * The database is the one source of kept events (D93): m0_publish() of a kept event queues it
 * for the bus thread (bus.c) and returns 0, and every row the thread reads from the table, this
 * host's own included, takes the local bus's one path, m0__bus_deliver, with the database's id.
 * So the replay store, the loops' queues, the channels' interest and the frames are the local
 * bus's, and every host's streams see one sequence. Transient events never reach the table: they
 * take the local path at once and stay on this host.
 */

/* Each row of the table, in id order, on the bus thread. */
static void deliver(void *ud, const struct m0_pgbus_event *ev)
{
        struct m0_shared *s = ud;
        int r = m0__bus_deliver(s->bus, ev->id, ev->channel, ev->event, ev->data, ev->data_len, 0);
        if (r == 0)
                return;
        /* A row some other writer put there, which no stream can be sent as it is: passed over,
         * counted, and said at most once a minute. */
        s->unsendable++;
        uint64_t now = m0__now_ms();
        if (s->logged_ms && now < s->logged_ms + 60000)
                return;
        s->logged_ms = now;
        m0__log(M0_LOG_WARNING, -1, NULL,
                "bus: id %" PRIu64 " on channel '%.200s' cannot be sent to a stream (%s): passed "
                "over (%" PRIu64 " so far)",
                ev->id, ev->channel, strerror(-r), s->unsendable);
}

/* The serving line and the bus's state, sent under the lock. */
static void send_status(struct m0_shared *s, const char *prefix)
{
        char state[640], msg[1400];
        m0__pgbus_mod->state(s->bus->shared, state, sizeof(state));
        snprintf(msg, sizeof(msg), "%s%s; %s", prefix, s->status, state);
        (void)m0__notify(msg);
}

static void state_changed(void *ud, const char *state)
{
        struct m0_shared *s = ud;
        (void)state; /* read again under the lock: the newest is what STATUS= says */
        pthread_mutex_lock(&s->lock);
        if (s->serving && !s->stopping)
                send_status(s, "");
        pthread_mutex_unlock(&s->lock);
}

void m0__shared_notify_ready(struct m0_shared *s, char *st, size_t len)
{
        if (!s->bus->shared) {
                char msg[600];
                snprintf(msg, sizeof(msg), "READY=1\n%s", st);
                (void)m0__notify(msg);
                return;
        }
        pthread_mutex_lock(&s->lock);
        snprintf(s->status, sizeof(s->status), "%s", st);
        send_status(s, "READY=1\n");
        s->serving = true;
        char state[640];
        m0__pgbus_mod->state(s->bus->shared, state, sizeof(state));
        size_t n = strlen(st);
        if (n < len)
                snprintf(st + n, len - n, "; %s", state);
        pthread_mutex_unlock(&s->lock);
}

void m0__shared_draining(struct m0_shared *s)
{
        pthread_mutex_lock(&s->lock);
        s->stopping = true;
        pthread_mutex_unlock(&s->lock);
}

static int wait_ready(struct m0_shared *s, char *err, size_t err_len)
{
        char why[640];
        int r = m0__pgbus_mod->wait_ready(s->bus->shared, (int)s->cfg->bus_ready_ms, why,
                                          sizeof(why));
        if (r == -EPROTO) {
                snprintf(err, err_len, "bus: %s", why);
                return r;
        }
        struct m0_pgbus_stats st;
        if (r == 0) {
                m0__pgbus_mod->stats(s->bus->shared, &st);
                m0__bus_shared_start(s->bus, st.last_id);
                m0__log(M0_LOG_NOTICE, -1, NULL,
                        "bus: shared through PostgreSQL; ids come from the database, delivered "
                        "here "
                        "after id %" PRIu64 " (the fd store and the id lease are not used)",
                        st.last_id);
                return 0;
        }
        m0__log(M0_LOG_WARNING, -1, NULL,
                "bus: the database did not answer within --bus-ready-ms (%u ms): %s; serving "
                "without it, publishes queue up to %u and streams get the events once it answers",
                s->cfg->bus_ready_ms, why, s->cfg->bus_queue);
        return 0;
}

int m0__shared_start(struct m0_shared *s, struct m0_bus *bus, const struct m0_config *cfg,
                     const m0_app *app, char *err, size_t err_len)
{
        s->bus = bus;
        s->cfg = cfg;
        s->app = app;
        pthread_mutex_init(&s->lock, NULL);
        if (!strcmp(cfg->bus, "local"))
                return 0;
        char name[96];
        snprintf(name, sizeof(name), "%.64s-%ld", app && app->name ? app->name : "m0",
                 (long)getpid());
        struct m0_pgbus_options opt = {
                .uri = cfg->bus,
                .name = name,
                .queue_max = cfg->bus_queue,
                .replay_max = cfg->bus_replay_max,
                .retain_s = cfg->bus_retain_s,
                .retain_rows = cfg->bus_retain_rows,
                .start_after = M0__PGBUS_FROM_END,
                .deliver = deliver,
                .state_changed = state_changed,
                .ud = s,
        };
        char why[700];
        /* The module, and libpq with it, is mapped only when a database is named (D210). The
         * check `bus` loaded it already and refuses (78) when it cannot; the load's first result
         * is kept, so this one fails only where no check ran. */
        int r = m0__pgbus_load(why, sizeof(why));
        if (r < 0) {
                snprintf(err, err_len, "bus: %s: install the package " M0__PGBUS_PACKAGE, why);
                return -ENOENT;
        }
        r = m0__pgbus_mod->create(&bus->shared, &opt, why, sizeof(why));
        if (r < 0) {
                snprintf(err, err_len, "bus: cannot start: %s", why);
                return r;
        }
        s->pgbus = bus->shared; /* the metrics show its state from now on (O1) */
        return wait_ready(s, err, err_len);
}

void m0__treplay_free(struct m0_treplay *t)
{
        if (!t)
                return;
        m0__fvec_free(&t->held);
        m0__fvec_free(&t->rows);
        m0__buf_free(&t->gaps);
        m0__buf_free(&t->pre);
        m0__fvec_free(&t->pre_frames);
        free(t->msg);
        free(t);
}

void m0__treplay_post(struct m0_treplay *t)
{
        struct m0_msg *m = t->msg;
        t->msg = NULL; /* the loop frees the message, and then `t` */
        *m = (struct m0_msg){.handle = t->back, .drop = t->drop, .fd = -1, .arg = t};
        (void)m0__loop_post(t->loop, m);
}

/* The table's answer, on the bus thread: its rows as frames, posted to the stream's loop. */
static void replayed(void *ud, const struct m0_pgbus_replayed *r)
{
        struct m0_treplay *t = ud;
        t->err = r->err;
        snprintf(t->why, sizeof(t->why), "%s", r->why ? r->why : "");
        t->truncated = r->truncated;
        t->upto = r->upto;
        for (size_t i = 0; t->err == 0 && i < r->n; i++) {
                const struct m0_pgbus_event *ev = &r->ev[i];
                struct m0_frame *f =
                        m0__frame_event(ev->id, ev->channel, ev->event, ev->data, ev->data_len);
                if (!f)
                        continue; /* a row no stream can be sent, as deliver() passes over */
                if (m0__fvec_push(&t->rows, f) < 0) {
                        m0__frame_unref(f);
                        t->err = -ENOMEM;
                }
        }
        m0__treplay_post(t);
}

int m0__shared_replay(struct m0_bus *b, uint32_t max, struct m0_treplay *t, const char *const *pats,
                      size_t n)
{
        if (!t->msg && !(t->msg = calloc(1, sizeof(*t->msg))))
                return -ENOMEM;
        return m0__pgbus_mod->replay(b->shared, t->after, pats, n, max, replayed, t);
}

void m0__shared_stop(struct m0_shared *s, uint64_t flush_ms)
{
        if (!s->bus || !s->bus->shared)
                return;
        m0__shared_draining(s);
        uint64_t left = m0__pgbus_mod->stop(s->bus->shared,
                                            flush_ms > INT32_MAX ? INT32_MAX : (int)flush_ms);
        struct m0_pgbus_stats st;
        m0__pgbus_mod->stats(s->bus->shared, &st);
        m0__log(left ? M0_LOG_WARNING : M0_LOG_NOTICE, -1, NULL,
                "bus: the shared bus stopped: %" PRIu64 " events committed in %" PRIu64
                " transactions, %" PRIu64 " delivered from the table (last id %" PRIu64
                "), %" PRIu64 " replays, %" PRIu64 " publishes refused (queue full), %" PRIu64
                " reconnects; %" PRIu64 " accepted event%s not committed within the drain's bound",
                st.published, st.batches, st.delivered, st.last_id, st.replays, st.refused,
                st.reconnects, left, left == 1 ? "" : "s");
}

void m0__shared_free(struct m0_shared *s)
{
        if (s->bus && s->bus->shared)
                m0__pgbus_mod->free(s->bus->shared);
        if (s->bus)
                s->bus->shared = NULL;
        s->pgbus = NULL;
        pthread_mutex_destroy(&s->lock);
}
