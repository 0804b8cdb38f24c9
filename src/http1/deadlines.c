/* SPDX-License-Identifier: MIT */
/* deadlines.c: a connection's deadlines, each class a FIFO of the loop's kept in deadline order (D6,
 * D53). */
#include "conn.h"
#include "config.h"

static uint32_t class_ms(const struct m0_hctx *l, enum m0_timer_class cls)
{
        const struct m0_config *cfg = l->cfg;
        switch (cls) {
        case M0_TIMER_HEAD: return cfg->header_timeout_ms;
        case M0_TIMER_BODY: return cfg->body_timeout_ms;
        case M0_TIMER_LINGER: return cfg->linger_ms;
        case M0_TIMER_DRAIN: return cfg->drain_idle_ms;
        case M0_TIMER_HANDSHAKE: return cfg->tls_handshake_timeout_ms;
        default: return cfg->idle_timeout_ms;
        }
}

void m0__timer_unlink(struct m0_conn *c)
{
        m0__timer_unfile(&c->loop->loop, &c->timer);
}

/* File `c` in class `cls` at `deadline` (the loop keeps each class in deadline order). */
static void timer_set_at(struct m0_conn *c, enum m0_timer_class cls, uint64_t deadline)
{
        m0__timer_file(&c->loop->loop, &c->timer, (uint8_t)cls, deadline);
}

void m0__timer_set(struct m0_conn *c, enum m0_timer_class cls)
{
        if (cls == M0_TIMER_NONE)
                m0__timer_unlink(c);
        else
                timer_set_at(c, cls, c->loop->loop.now_ms + class_ms(c->loop, cls));
}

/*
 * The message being read has a deadline of its own (H2): its head's from the head's first byte,
 * its body's from the end of the head. It holds whatever else the connection waits for in the
 * meantime, an answer the client is slow to take included, so it is kept apart from the timer.
 */
void m0__read_begin(struct m0_conn *c, enum m0_timer_class cls)
{
        c->read_cls = (uint8_t)cls;
        c->read_deadline = c->loop->loop.now_ms + class_ms(c->loop, cls);
}

void m0__wait_read(struct m0_conn *c)
{
        if (c->timer.cls != c->read_cls || c->timer.deadline != c->read_deadline)
                timer_set_at(c, c->read_cls, c->read_deadline);
}

void m0__wait_write(struct m0_conn *c)
{
        uint64_t stall = c->loop->loop.now_ms + class_ms(c->loop, M0_TIMER_WRITE);
        if (c->read_deadline && !c->closing && c->read_deadline < stall)
                m0__wait_read(c);
        else
                timer_set_at(c, M0_TIMER_WRITE, stall);
}

uint64_t m0__conn_deadline(const struct m0_conn *c)
{
        return c->timer.deadline;
}

struct m0_conn *m0__conn_timer_next(const struct m0_conn *c)
{
        return M0__LIST_NEXT(c, struct m0_conn, timer.link);
}
