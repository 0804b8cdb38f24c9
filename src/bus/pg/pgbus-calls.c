/* SPDX-License-Identifier: MIT */
/* pgbus-calls.c: the calls other threads make on a bus shared through PostgreSQL: start it, wait for
 * it, publish to it, replay from it, stop it (G1–G4). */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "pgbus-private.h"

static void wake(struct m0_pgbus *b)
{
        uint64_t one = 1;
        ssize_t w = write(b->wake_fd, &one, sizeof(one));
        (void)w; /* a full counter is still a wake */
}

int m0__pgbus_new(struct m0_pgbus **ret, const struct m0_pgbus_options *opt, char *err,
                  size_t err_len)
{
        int r;
        if (!opt->deliver) {
                snprintf(err, err_len, "no deliver callback");
                return -EINVAL;
        }
        r = m0__pgbus_uri_check(opt->uri, err, err_len);
        if (r < 0)
                return r;
        struct m0_pgbus *b = calloc(1, sizeof(*b));
        if (!b) {
                snprintf(err, err_len, "out of memory");
                return -ENOMEM;
        }
        b->wake_fd = -1;
        pthread_mutex_init(&b->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&b->cond, &ca);
        pthread_condattr_destroy(&ca);
        b->opt = *opt;
        b->c[PUB] = (struct conn){.role = PUB, .what = "publishing"};
        b->c[LSN] = (struct conn){.role = LSN, .what = "listening"};
        snprintf(b->state, sizeof(b->state), "bus: connecting");
        b->uri = strdup(opt->uri);
        b->name = strdup(opt->name && *opt->name ? opt->name : "m0");
        if (!b->uri || !b->name) {
                r = -ENOMEM;
                snprintf(err, err_len, "out of memory");
                goto fail;
        }
        if (!b->opt.queue_max)
                b->opt.queue_max = 10000;
        if (!b->opt.replay_max)
                b->opt.replay_max = 10000;
        unsigned char rnd[16];
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                r = -errno;
                snprintf(err, err_len, "getrandom: %s", strerror(errno));
                goto fail;
        }
        for (int i = 0; i < 16; i++)
                snprintf(b->origin + 2 * i, 3, "%02x", rnd[i]);
        memcpy(&b->rng, rnd, sizeof(b->rng));
        b->rng |= 1;
        b->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (b->wake_fd < 0) {
                r = -errno;
                snprintf(err, err_len, "eventfd: %s", strerror(errno));
                goto fail;
        }
        b->retain_at = m0__now_ms(); /* a first run soon after the start */

        /* The bus thread takes no signal meant for the process; faults still reach it. */
        sigset_t all, old;
        sigfillset(&all);
        sigdelset(&all, SIGSEGV);
        sigdelset(&all, SIGBUS);
        sigdelset(&all, SIGFPE);
        sigdelset(&all, SIGILL);
        sigdelset(&all, SIGABRT);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        r = -pthread_create(&b->thread, NULL, m0__pgbus_main, b);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
                snprintf(err, err_len, "cannot start the bus thread: %s", strerror(-r));
                goto fail;
        }
        b->running = true;
        *ret = b;
        return 0;
fail:
        m0__pgbus_free(b);
        return r;
}

int m0__pgbus_wait_ready(struct m0_pgbus *b, int timeout_ms, char *err, size_t err_len)
{
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
        }
        int r = 0;
        pthread_mutex_lock(&b->lock);
        while (!b->started && !b->refused && r == 0)
                r = pthread_cond_timedwait(&b->cond, &b->lock, &until);
        if (b->refused) {
                snprintf(err, err_len, "%s", b->why);
                r = -EPROTO;
        } else if (b->started) {
                r = 0;
        } else {
                snprintf(err, err_len, "%s", b->state);
                r = -ETIMEDOUT;
        }
        pthread_mutex_unlock(&b->lock);
        return r;
}

int m0__pgbus_publish(struct m0_pgbus *b, const char *channel, const char *event, const char *data)
{
        size_t cl = strlen(channel), el = event ? strlen(event) : 0, dl = strlen(data);
        if (!m0__pgbus_channel_ok(channel, cl))
                return -EINVAL;
        if (event && (strpbrk(event, "\r\n") || !m0__pgbus_utf8_ok(event)))
                return -EINVAL;
        if (!m0__pgbus_utf8_ok(data))
                return -EINVAL;
        struct qev *q = malloc(sizeof(*q) + cl + 1 + (event ? el + 1 : 0) + dl + 1);
        if (!q)
                return -ENOMEM;
        char *p = q->mem;
        q->next = NULL;
        q->channel = memcpy(p, channel, cl + 1);
        p += cl + 1;
        q->event = NULL;
        if (event) {
                q->event = memcpy(p, event, el + 1);
                p += el + 1;
        }
        q->data = memcpy(p, data, dl + 1);
        q->bytes = cl + el + dl + 16;

        pthread_mutex_lock(&b->lock);
        if (b->stopping) {
                pthread_mutex_unlock(&b->lock);
                free(q);
                return -ESHUTDOWN;
        }
        if (b->qlen >= b->opt.queue_max) {
                b->stats.refused++;
                pthread_mutex_unlock(&b->lock);
                free(q);
                return -EAGAIN;
        }
        bool edge = !b->qhead; /* the thread looks at the queue whenever it is free otherwise */
        if (b->qtail)
                b->qtail->next = q;
        else
                b->qhead = q;
        b->qtail = q;
        b->qlen++;
        if (b->down)
                b->accepted_down++;
        pthread_mutex_unlock(&b->lock);
        if (edge)
                wake(b);
        return 0;
}

int m0__pgbus_replay(struct m0_pgbus *b, uint64_t after, const char *const *channels, size_t n,
                     uint32_t max, m0_pgbus_replay_fn done, void *ud)
{
        size_t size = sizeof(struct replay_req) + n * sizeof(char *);
        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(channels[i]);
                bool prefix = len && channels[i][len - 1] == '*';
                if (prefix ? (len - 1 && !m0__pgbus_channel_ok(channels[i], len - 1))
                           : !m0__pgbus_channel_ok(channels[i], len))
                        return -EINVAL;
                size += len + 1;
        }
        struct replay_req *q = calloc(1, size);
        if (!q)
                return -ENOMEM;
        q->after = after;
        q->max = max && max < b->opt.replay_max ? max : b->opt.replay_max;
        q->done = done;
        q->ud = ud;
        q->n = n;
        q->pat = (char **)(q + 1);
        char *p = (char *)(q->pat + n);
        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(channels[i]);
                q->pat[i] = memcpy(p, channels[i], len + 1);
                p += len + 1;
        }
        pthread_mutex_lock(&b->lock);
        if (b->stopping || b->rlen >= b->opt.queue_max) {
                int r = b->stopping ? -ESHUTDOWN : -EAGAIN;
                pthread_mutex_unlock(&b->lock);
                free(q);
                return r;
        }
        if (b->rtail)
                b->rtail->next = q;
        else
                b->rhead = q;
        b->rtail = q;
        b->rlen++;
        pthread_mutex_unlock(&b->lock);
        wake(b);
        return 0;
}

uint64_t m0__pgbus_stop(struct m0_pgbus *b, int flush_ms)
{
        if (!b || !b->running)
                return 0;
        pthread_mutex_lock(&b->lock);
        b->stopping = true;
        b->flush_deadline = m0__now_ms() + (uint64_t)(flush_ms > 0 ? flush_ms : 0);
        pthread_mutex_unlock(&b->lock);
        wake(b);
        pthread_join(b->thread, NULL);
        b->running = false;
        pthread_mutex_lock(&b->lock);
        uint64_t left = b->qlen;
        pthread_mutex_unlock(&b->lock);
        return left;
}

void m0__pgbus_free(struct m0_pgbus *b)
{
        if (!b)
                return;
        m0__pgbus_stop(b, 0);
        m0__pgbus_qev_free_list(b->inflight);
        m0__pgbus_qev_free_list(b->qhead);
        if (b->wake_fd >= 0)
                close(b->wake_fd);
        m0__buf_free(&b->sql);
        pthread_cond_destroy(&b->cond);
        pthread_mutex_destroy(&b->lock);
        free(b->uri);
        free(b->name);
        free(b);
}
