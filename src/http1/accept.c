/* SPDX-License-Identifier: MIT */
/* accept.c: take new connections and place each on the least loaded loop (L4). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "accept.h"
#include "conn.h"
#include "config.h"
#include "hctx.h"

/*
 * Pick the loop with the fewest connections, counting hand-offs still on their way; ties rotate
 * so that a burst of new connections against equal loops alternates between them. The chosen
 * loop's load is raised here, before the hand-off, so the next pick already sees it.
 */
static struct m0_hctx *pick(struct m0_hctx *self)
{
        struct m0_serve *s = self->serve;
        int n = s->nloops;
        if (n == 1 || !self->cfg->accept_share) {
                atomic_fetch_add(&self->load, 1);
                return self;
        }
        unsigned start = atomic_fetch_add(&s->rotate, 1);
        struct m0_hctx *best = &s->loops[start % (unsigned)n];
        unsigned best_load = UINT32_MAX;
        for (int i = 0; i < n; i++) {
                struct m0_hctx *l = &s->loops[(start + (unsigned)i) % (unsigned)n];
                unsigned load = atomic_load(&l->load);
                if (load < best_load) {
                        best = l;
                        best_load = load;
                }
        }
        atomic_fetch_add(&best->load, 1);
        return best;
}

/* EMFILE/ENFILE: give up the spare fd, take the connection and close it, so the listener's
 * queue moves instead of waking every loop forever; then take the spare back. */
static void shed_one(struct m0_hctx *l, int lfd)
{
        if (l->reserve_fd >= 0) {
                close(l->reserve_fd);
                l->reserve_fd = -1;
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
                close(fd);
                m0__count(&l->refused_conns, 1);
        }
        l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* A connection another loop accepted and handed to this one (L4). Hand-offs queued before the
 * stop are admitted even while draining; admit tells them to stop like the rest. */
void m0__accept_handed_over(struct m0_loop *el, struct m0_msg *m)
{
        struct m0_hctx *l = m0__hctx_of(el);
        m0__count(&l->received, 1);
        (void)m0__conn_admit_tls(l, m->fd, m->arg); /* the host's TLS for a TLS listener's */
}

/* ... that came to a loop which ended first. */
static void handoff_drop(struct m0_loop *el, struct m0_msg *m)
{
        (void)el;
        if (m->fd >= 0)
                close(m->fd);
}

void m0__accept_ready(struct m0_hctx *l, int lfd)
{
        m0__accept_ready_tls(l, lfd, false);
}

void m0__accept_ready_tls(struct m0_hctx *l, int lfd, bool is_tls)
{
        struct m0_serve *s = l->serve;
        struct m0_tls *tls = is_tls ? s->tls : NULL;
        /* A bounded batch per wake-up keeps one listener from starving the loop's connections. */
        for (int i = 0; i < 64; i++) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        if (errno == EMFILE || errno == ENFILE)
                                shed_one(l, lfd);
                        return; /* EAGAIN: another loop took it, or the queue is empty */
                }
                if (atomic_fetch_add(&s->conns, 1) >= l->cfg->max_connections) {
                        atomic_fetch_sub(&s->conns, 1);
                        close(fd);
                        m0__count(&l->refused_conns, 1);
                        continue;
                }
                struct m0_hctx *t = pick(l);
                if (t == l) {
                        m0__count(&l->accepted, 1);
                        (void)m0__conn_admit_tls(l, fd, tls);
                        continue;
                }
                struct m0_msg *m = malloc(sizeof(*m));
                if (!m) {
                        atomic_fetch_sub(&t->load, 1);
                        atomic_fetch_add(&l->load, 1);
                        m0__count(&l->accepted, 1);
                        (void)m0__conn_admit_tls(l, fd, tls);
                        continue;
                }
                *m = (struct m0_msg){.handle = m0__accept_handed_over,
                                     .drop = handoff_drop,
                                     .fd = fd,
                                     .arg = tls};
                m0__count(&l->passed, 1);
                if (m0__loop_post(&t->loop, m) < 0) {
                        /* the mailbox is there for the life of the process; this cannot fail */
                }
        }
}
