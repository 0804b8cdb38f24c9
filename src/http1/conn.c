/* SPDX-License-Identifier: MIT */
/* conn.c: one connection on its loop: its transport (LY2) and its protocol (LY3), and HTTP/1.1's
 * side of it: read, parse, answer in order, write, time out. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "config.h"
#include "files.h"
#include "log.h"
#include "sse.h"
#include "tls.h"

/* ---- lifetime ---- */

static void stop_idle(struct m0_conn *c);
static void file_end(struct m0_conn *c);
static bool send_file(struct m0_conn *c);

static void conn_ready(struct m0_io *io, uint32_t events);
static void conn_run(struct m0_task *t, uint32_t events);
static void conn_timer(struct m0_timer *t);

/*
 * The epoll interest for what the protocol waits on (`ev`): a transport whose last operation
 * could not go on asks for its own readiness besides (LY2: a TLS read that must write first).
 * A plain socket's want is always its operation's own, so this adds nothing to it.
 */
static uint32_t transport_events(const struct m0_conn *c, uint32_t ev)
{
        if ((ev & EPOLLIN) && (c->rwant & M0_WANT_WRITE))
                ev |= EPOLLOUT;
        if ((ev & EPOLLOUT) && (c->wwant & M0_WANT_READ))
                ev |= EPOLLIN;
        return ev;
}

static int set_events(struct m0_conn *c, uint32_t ev)
{
        uint32_t io = transport_events(c, ev);
        if (c->ioevents == io) {
                c->events = ev;
                return 0;
        }
        int r = m0__io_mod(&c->loop->loop, &c->io, c->tr.fd, io);
        if (r < 0)
                return r;
        c->events = ev;
        c->ioevents = io;
        return 0;
}

static void rbuf_release(struct m0_conn *c)
{
        free(c->rbuf);
        c->rbuf = NULL;
        c->rlen = c->rcap = c->rpos = 0;
}

void m0__conn_close(struct m0_conn *c)
{
        if (c->tr.fd < 0)
                return;
        struct m0_hctx *l = c->loop;
        if (c->handshaking)
                l->tls_handshaking--;
        m0__timer_unlink(c);
        m0__turn_forget(&l->loop, &c->task);
        c->proto->closed(c);
        m0__io_del(&l->loop, c->tr.fd);
        c->tr.ops->close(&c->tr);
        rbuf_release(c);
        m0__buf_free(&c->body);
        m0__buf_free(&c->out);
        file_end(c);
        atomic_fetch_sub(&l->load, 1);
        atomic_fetch_sub(&l->serve->conns, 1);
        if (l->observe & M0_OBSERVE_METRICS)
                m0__uncount(&l->stats.conns_open, 1);
        if (c->busy)
                return; /* the job names c: it is freed when the job comes back */
        /* Events later in this turn may still name c: free it after the turn. */
        m0__list_push(&l->dead, &c->timer.link);
}

void m0__conn_reap(struct m0_hctx *l)
{
        struct m0_link *n;
        while ((n = m0__list_pop(&l->dead)))
                free(M0__CONTAINER_OF(n, struct m0_conn, timer.link));
}

int m0__conn_admit(struct m0_hctx *l, int fd)
{
        return m0__conn_admit_tls(l, fd, NULL);
}

/* Whether the loop may begin one more TLS handshake (TL6); counted when it may not. */
static bool handshake_admitted(struct m0_hctx *l)
{
        if (l->tls_handshaking < l->cfg->tls_max_handshakes)
                return true;
        m0__count(&l->tls_refused, 1);
        return false;
}

int m0__conn_admit_tls(struct m0_hctx *l, int fd, struct m0_tls *tls)
{
        struct m0_conn *c = NULL;
        if (tls && !handshake_admitted(l))
                goto fail;
        c = calloc(1, sizeof(*c));
        if (!c)
                goto fail;
        c->loop = l;
        if (!tls)
                (void)m0__transport_open(&c->tr, &m0__transport_plain, fd);
        else if (m0__tls_transport_open(&c->tr, tls, fd) < 0)
                goto fail;
        c->proto = &m0__proto_http1;
        c->io.ready = conn_ready;
        c->task.run = conn_run;
        c->timer.fire = conn_timer;
        c->handshaking = c->tr.ops->handshake != NULL;
        c->events = c->ioevents = EPOLLIN;
        /* An answer leaves in one send (D5), but the tail of one the socket took in parts, an
         * event frame behind one not yet acknowledged, or a 100-continue's final answer would
         * wait for the client's delayed ACK under Nagle. A Unix socket refuses the option. */
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        m0__parser_init(c);
        if (m0__io_add(&l->loop, &c->io, fd, EPOLLIN) < 0) {
                if (c->tr.impl)
                        c->tr.ops->close(&c->tr); /* closes fd too */
                free(c);
                c = NULL;
                fd = -1;
                goto fail;
        }
        if (c->handshaking)
                l->tls_handshaking++;
        m0__timer_set(c, c->handshaking ? M0_TIMER_HANDSHAKE : M0_TIMER_IDLE);
        if (l->observe & M0_OBSERVE_METRICS)
                m0__count(&l->stats.conns_open, 1);
        if (l->stopping)
                m0__conn_stop(c);
        return 0;
fail:
        free(c);
        if (fd >= 0)
                close(fd);
        atomic_fetch_sub(&l->load, 1);
        atomic_fetch_sub(&l->serve->conns, 1);
        return -ENOMEM;
}

/* Keep what must outlive this read: [from, len) of base, parse resuming at `pos`. */
static int stash(struct m0_conn *c, char *base, size_t from, size_t len, size_t pos)
{
        size_t n = len - from;
        if (n == 0) {
                rbuf_release(c);
                return 0;
        }
        if (base == c->rbuf) {
                memmove(c->rbuf, c->rbuf + from, n);
        } else {
                size_t cap = n < 4096 ? 4096 : n;
                if (c->rcap < cap) {
                        char *p = realloc(c->rbuf, cap);
                        if (!p)
                                return -ENOMEM;
                        c->rbuf = p;
                        c->rcap = (uint32_t)cap;
                }
                memcpy(c->rbuf, base + from, n);
        }
        c->rlen = (uint32_t)n;
        c->rpos = (uint32_t)(pos - from);
        if (c->req_started && c->req_off >= from)
                c->req_off -= (uint32_t)from;
        return 0;
}

/* Send what the transport takes now. Returns the bytes sent (0 when it is full), or -1 after
 * closing the connection on an error. */
static ssize_t send_now(struct m0_conn *c, const void *data, size_t len)
{
        ssize_t w = m0__transport_write(&c->tr, data, len);
        if (w >= 0) {
                c->wwant = 0;
                if (c->loop->observe & M0_OBSERVE_METRICS)
                        m0__count(&c->loop->stats.bytes_out, (uint64_t)w);
                return w;
        }
        if (w == -EAGAIN) {
                c->wwant = (uint8_t)c->tr.want;
                return 0;
        }
        m0__conn_close(c);
        return -1;
}

/* Keep the bytes the socket refused as the connection's whole output. */
static int keep_unsent(struct m0_conn *c, const void *data, size_t len)
{
        c->out.len = c->out_off = 0;
        return m0__buf_append(&c->out, data, len);
}

static void linger_or_close(struct m0_conn *c)
{
        const struct m0_config *cfg = c->loop->cfg;
        if (cfg->linger_ms == 0) {
                m0__conn_close(c);
                return;
        }
        /* Shut our side and drop what the client still sends, so the last answer is not lost
         * to a reset caused by unread bytes. */
        (void)c->tr.ops->shutdown(&c->tr);
        c->lingering = true;
        rbuf_release(c);
        (void)set_events(c, EPOLLIN);
        m0__timer_set(c, M0_TIMER_LINGER);
}

/*
 * Write the loop's wbuf (this connection's answers), keeping what the socket refuses. Returns
 * true when the connection can go on parsing bytes it already holds.
 */
static bool flush(struct m0_conn *c)
{
        struct m0_hctx *l = c->loop;
        if (l->wbuf.len) {
                if (c->out.len == c->out_off) {
                        ssize_t w = send_now(c, l->wbuf.data, l->wbuf.len);
                        if (w < 0) {
                                l->wbuf.len = 0;
                                return false;
                        }
                        if ((size_t)w < l->wbuf.len)
                                (void)keep_unsent(c, l->wbuf.data + w, l->wbuf.len - (size_t)w);
                } else {
                        (void)m0__buf_append(&c->out, l->wbuf.data, l->wbuf.len);
                }
                l->wbuf.len = 0;
                /* A large scratch is not kept across connections. */
                if (l->wbuf.cap > 4u * 1024 * 1024)
                        m0__buf_free(&l->wbuf);
        }
        if (c->out.len > c->out_off) {
                (void)set_events(c, EPOLLOUT);
                m0__wait_write(c);
                return false;
        }
        if (c->file.on && !send_file(c))
                return false;
        if (c->upgraded) {
                /* the answer that switched is out: the new protocol goes on from here */
                c->proto->writable(c);
                return false;
        }
        if (c->busy) {
                /* Read nothing more until the pool answers: pipelined bytes wait, in order. */
                (void)set_events(c, 0);
                m0__timer_unlink(c);
                return false;
        }
        (void)set_events(c, EPOLLIN);
        if (c->closing) {
                linger_or_close(c);
                return false;
        }
        if (c->stream) {
                m0__timer_unlink(c); /* a stream is not idle: heartbeats keep it alive */
                return false;
        }
        if (c->phase != PH_IDLE) {
                m0__wait_read(c); /* the head or body goes on arriving, against its own deadline */
                return false;
        }
        if (c->rlen > c->rpos) {
                if (l->slice_left)
                        return true; /* stopped at max_output_bytes: the rest is parsed now */
                /* Its slice is spent: the rest waits for its next turn, and no client timeout
                 * runs meanwhile, since the loop, not the client, is what it waits for. */
                m0__timer_unlink(c);
                m0__turn_defer(&l->loop, &c->task, EPOLLIN);
                return false;
        }
        if (c->read_deadline && !l->stopping) {
                /* Bytes came that began no request: the empty lines RFC 9112 lets a client send
                 * before one. The head's deadline, begun with the first of them, still holds, so
                 * a line every second keeps no connection past the header timeout (H2). */
                m0__wait_read(c);
                return false;
        }
        m0__timer_set(c, M0_TIMER_IDLE);
        if (l->stopping)
                stop_idle(c);
        return false;
}

/*
 * After parsing base[..len) up to pos, keep what the connection still needs: a head in
 * progress, a complete head whose body is being read (the body bytes are in c->body), or bytes
 * not parsed yet because the output was full.
 */
static void keep_rest(struct m0_conn *c, char *base, size_t len, size_t pos)
{
        int r;
        if (c->upgraded) {
                /* the new protocol's bytes, read behind the request that switched */
                if (stash(c, base, pos, len, pos) < 0)
                        m0__conn_close(c);
                return;
        }
        if (c->closing || c->stream) {
                rbuf_release(c); /* a stream reads nothing more */
                return;
        }
        if (c->phase == PH_HEAD && c->req_started) {
                r = stash(c, base, c->req_off, len, len);
        } else if (c->phase == PH_BODY) {
                r = stash(c, base, c->req_off, c->req_off + c->head_len, c->req_off + c->head_len);
        } else if (base == c->rbuf && pos < len) {
                /* Unparsed bytes stay where they are, for the connection's next slice. */
                c->rpos = (uint32_t)pos;
                r = 0;
        } else {
                r = stash(c, base, pos, len, pos);
        }
        /* Bytes of the next request, held unparsed behind an answer the client has not taken
         * or for the next slice: its head's deadline counts from now, when they arrived (or
         * earlier, when it was set then). Behind a pool job the wait is the host's, and the
         * deadline starts when parsing resumes. */
        if (c->phase == PH_IDLE && pos < len && !c->busy && !c->read_deadline)
                m0__read_begin(c, M0_TIMER_HEAD);
        if (r < 0) {
                rbuf_release(c);
                m0__conn_refuse(c, 503);
        }
}

/* Parse what is buffered in rbuf and answer, for as long as the output keeps being taken. */
static void run_buffered(struct m0_conn *c)
{
        do {
                size_t pos = m0__conn_parse(c, c->rbuf, c->rlen, c->rpos);
                keep_rest(c, c->rbuf, c->rlen, pos);
        } while (flush(c));
}

/*
 * Read what the socket holds into `buf` (at most `cap` bytes). Returns how many bytes came, or
 * 0 when there were none now or the connection is gone: closed here, on the client's end of file
 * or an error. The one place a read of a connection that parses can fail.
 */
static size_t read_in(struct m0_conn *c, char *buf, size_t cap)
{
        ssize_t n = c->tr.ops->read(&c->tr, buf, cap);
        c->rwant = n == -EAGAIN ? (uint8_t)c->tr.want : 0;
        if (n > 0) {
                struct m0_hctx *l = c->loop;
                if (l->observe)
                        c->read_ns = m0__now_ns(); /* when requests begun in it arrived (D80) */
                if (l->observe & M0_OBSERVE_METRICS)
                        m0__count(&l->stats.bytes_in, (uint64_t)n);
                return (size_t)n;
        }
        if (n != -EAGAIN)
                m0__conn_close(c); /* the client left, after its last answer or mid-request */
        return 0;
}

/* Room for more of a request in progress at the end of rbuf, within the head's bound plus a
 * read's worth of body. False (and the connection refused) when there is no memory for it. */
static bool rbuf_room(struct m0_conn *c)
{
        const struct m0_config *cfg = c->loop->cfg;
        size_t want = 16 * 1024;
        size_t limit = (size_t)cfg->max_head_bytes + 64 * 1024;
        if (c->rcap - c->rlen >= want)
                return true;
        size_t cap = c->rlen + want;
        if (cap > limit)
                cap = limit > c->rlen + 1024 ? limit : c->rlen + 1024;
        char *p = realloc(c->rbuf, cap);
        if (!p) {
                m0__conn_refuse(c, 503);
                (void)flush(c);
                return false;
        }
        c->rbuf = p;
        c->rcap = (uint32_t)cap;
        return true;
}

/*
 * HT1: a connection whose first bytes are HTTP/2's preface (RFC 9113 3.4) speaks HTTP/2 by prior
 * knowledge; there is no Upgrade: h2c. True when `c` was handed to the host's HTTP/2 protocol
 * with the `n` bytes at `base` (or closed), or when they are the start of a preface and it waits
 * for the rest; false for anything else, which HTTP/1.1 reads.
 */
static bool prior_knowledge(struct m0_conn *c, char *base, size_t n)
{
        static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
        const size_t len = sizeof(preface) - 1;
        const struct m0_proto_ops *h2 = c->loop->serve->h2;
        if (!h2 || c->nreq || c->phase != PH_IDLE)
                return false;
        if (memcmp(base, preface, n < len ? n : len)) {
                /* Bytes held unparsed below as a preface's start are HTTP/1.1's after all
                 * (rbuf holds no other unparsed bytes of an idle first request). */
                if (base == c->rbuf)
                        c->rpos = 0;
                return false;
        }
        if (n < len) {
                if (base != c->rbuf && stash(c, base, 0, n, n) < 0) {
                        m0__conn_close(c);
                        return true;
                }
                c->rpos = c->rlen; /* nothing of it is parsed */
                if (!c->read_deadline)
                        m0__read_begin(c, M0_TIMER_HEAD);
                m0__wait_read(c);
                return true;
        }
        c->read_deadline = 0;
        c->proto = h2;
        (void)h2->start(c, base, n);
        rbuf_release(c);
        return true;
}

/*
 * The one read path. Bytes its last slice left unparsed come before anything new; a request in
 * progress reads on into its buffer; otherwise the read lands in the loop's scratch buffer, and
 * only what must outlive it is kept (D5).
 */
static void h1_readable(struct m0_conn *c)
{
        struct m0_hctx *l = c->loop;
        if (c->lingering || c->stream) {
                /* Nothing more is parsed: drop what arrives and notice the close. */
                (void)read_in(c, l->rscratch, l->rscratch_cap);
                return;
        }
        if (c->rlen > c->rpos) {
                run_buffered(c);
                return;
        }
        if (c->rlen > 0) {
                size_t n = rbuf_room(c) ? read_in(c, c->rbuf + c->rlen, c->rcap - c->rlen) : 0;
                if (n) {
                        c->rlen += (uint32_t)n;
                        if (!prior_knowledge(c, c->rbuf, c->rlen))
                                run_buffered(c);
                }
                return;
        }
        size_t n = read_in(c, l->rscratch, l->rscratch_cap);
        if (!n || prior_knowledge(c, l->rscratch, n))
                return;
        if (c->phase == PH_IDLE && !c->read_deadline) {
                m0__read_begin(c, M0_TIMER_HEAD); /* from the head's first byte (H2) */
                m0__wait_read(c);
        }
        size_t pos = m0__conn_parse(c, l->rscratch, n, 0);
        keep_rest(c, l->rscratch, n, pos);
        m0__conn_resume(c);
}

static void h1_writable(struct m0_conn *c)
{
        if (c->out.len == c->out_off) {
                m0__conn_resume(c); /* a file's body is what waited (SF2) */
                return;
        }
        ssize_t w = send_now(c, c->out.data + c->out_off, c->out.len - c->out_off);
        if (w < 0 || (w == 0 && c->out_off < c->out.len))
                return; /* closed, or still full: no progress */
        c->out_off += (size_t)w;
        if (c->out_off < c->out.len) {
                m0__wait_write(c); /* progress: the stall bound counts from here */
                return;
        }
        m0__buf_free(&c->out);
        c->out_off = 0;
        m0__conn_resume(c); /* and bytes that waited while the output was full are parsed now */
}

/* The handshake is done: counted by version (TL7), and the protocol starts, waiting to read
 * under the idle timeout. */
static void handshake_done(struct m0_conn *c)
{
        struct m0_hctx *l = c->loop;
        int resumed = 0;
        c->handshaking = false;
        l->tls_handshaking--;
        c->tr.want = 0;
        c->tls = c->tr.ops->session ? c->tr.ops->session(&c->tr, &resumed) : NULL;
        c->tls_resumed = resumed != 0;
        m0__count(&l->tls_done[c->tls && !strcmp(c->tls, "TLSv1.3") ? 1 : 0], 1);
        if (resumed)
                m0__count(&l->tls_resumed, 1);
        /* HT1: a client that chose h2 by ALPN speaks HTTP/2 from its first byte on. */
        const struct m0_proto_ops *h2 = l->serve->h2;
        const char *alpn = c->tr.ops->alpn ? c->tr.ops->alpn(&c->tr) : NULL;
        if (h2 && alpn && strcmp(alpn, "h2") == 0) {
                (void)h2->start(c, NULL, 0);
                return;
        }
        (void)set_events(c, EPOLLIN);
        m0__timer_set(c, M0_TIMER_IDLE);
}

/* The transport's handshake goes on; true once it is done and the protocol may start. */
static bool handshake(struct m0_conn *c)
{
        int r = c->tr.ops->handshake(&c->tr);
        if (r == 0) {
                handshake_done(c);
                return c->tr.fd >= 0; /* a protocol that failed to start closed it */
        }
        if (r != -EAGAIN) {
                /* Garbage where a ClientHello should be, a version or cipher refused, the peer
                 * gone: closed at once (TL6). */
                m0__count(&c->loop->tls_failed, 1);
                m0__conn_close(c);
                return false;
        }
        uint32_t ev = c->tr.want & M0_WANT_WRITE ? EPOLLOUT : EPOLLIN;
        if (m0__io_mod(&c->loop->loop, &c->io, c->tr.fd, ev) == 0)
                c->events = c->ioevents = ev;
        return false;
}

/*
 * Bytes the transport holds for the next read (what one read of a TLS socket brought past the
 * caller's room, D246) are announced by no readiness of the fd: a connection that waits to read
 * and has them is served again on the run queue, as if its socket were readable (LY2). After
 * its events, and when reading resumes after a pool job (HTTP/1.1 stops reading while one runs;
 * HTTP/2 reads on beside it).
 */
static void requeue_pending(struct m0_conn *c)
{
        if (c->tr.fd < 0 || (c->busy && !c->h2) || !(c->events & EPOLLIN) || c->task.queued)
                return;
        if (m0__transport_pending(&c->tr) > 0)
                m0__turn_defer(&c->loop->loop, &c->task, EPOLLIN);
}

void m0__conn_event(struct m0_conn *c, uint32_t events)
{
        if (c->tr.fd < 0)
                return; /* closed earlier in this batch */
        if (c->handshaking) {
                if (!handshake(c))
                        return;
                events = EPOLLIN; /* the request may have come with the handshake's last bytes */
        }
        m0__slice_begin(c);
        /* The transport may want the other readiness than the protocol waits on (LY2): then
         * that readiness is the protocol's own event. */
        if ((events & EPOLLOUT) && !(c->events & EPOLLOUT) && (c->rwant & M0_WANT_WRITE))
                events = (events & ~(uint32_t)EPOLLOUT) | EPOLLIN;
        if ((events & EPOLLIN) && !(c->events & EPOLLIN) && (c->wwant & M0_WANT_READ))
                events = (events & ~(uint32_t)EPOLLIN) | EPOLLOUT;
        if (events & EPOLLOUT) {
                c->proto->writable(c);
                if (c->tr.fd < 0)
                        return;
        }
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                if (c->events & EPOLLIN)
                        c->proto->readable(c);
                else if (events & (EPOLLHUP | EPOLLERR))
                        m0__conn_close(c); /* a busy one is freed when its job returns */
        }
        requeue_pending(c);
}

/* Its events, now, or behind the others once the turn is full (of items or of time). One
 * already queued has its turn there; epoll reports it again meanwhile (level-triggered). */
static void conn_ready(struct m0_io *io, uint32_t events)
{
        struct m0_conn *c = M0__CONTAINER_OF(io, struct m0_conn, io);
        struct m0_loop *l = &c->loop->loop;
        if (c->tr.fd < 0)
                return; /* closed earlier in this batch */
        if (c->task.queued || !m0__turn_take(l)) {
                m0__turn_defer(l, &c->task, events);
                return;
        }
        m0__conn_event(c, events);
        /* What the loop published while serving it reaches its own streams now, in id order,
         * not only once the channel has filled up (B1). */
        m0__hctx_deliver_pending(c->loop);
}

/* Its place on the run queue came: the events it was left with. */
static void conn_run(struct m0_task *t, uint32_t events)
{
        struct m0_conn *c = M0__CONTAINER_OF(t, struct m0_conn, task);
        (void)m0__turn_take(&c->loop->loop); /* the queue's first always runs */
        m0__conn_event(c, events);
        m0__hctx_deliver_pending(c->loop);
}

static void conn_timer(struct m0_timer *t)
{
        struct m0_conn *c = M0__CONTAINER_OF(t, struct m0_conn, timer);
        m0__conn_timer_fire(c);
}

void m0__conn_stop_all(struct m0_hctx *l)
{
        for (int cls = M0_TIMER_IDLE; cls < M0_TIMER_N; cls++) {
                struct m0_conn *c =
                        M0__LIST_FIRST(&l->loop.timers[cls], struct m0_conn, timer.link);
                while (c) {
                        struct m0_conn *next = m0__conn_timer_next(c);
                        m0__conn_stop(c);
                        c = next;
                }
        }
}

void m0__conn_cut_all(struct m0_hctx *l)
{
        for (int cls = M0_TIMER_IDLE; cls < M0_TIMER_N; cls++) {
                struct m0_conn *c;
                while ((c = M0__LIST_FIRST(&l->loop.timers[cls], struct m0_conn, timer.link))) {
                        /* a connection lingering after its last answer was answered whole, and
                         * one idle since the stop was serving nothing */
                        if (cls != M0_TIMER_LINGER && cls != M0_TIMER_DRAIN)
                                m0__count(&l->cut, 1);
                        m0__conn_close(c);
                }
        }
        /* Connections the loop still owed answers to when the bound came; the loop's own
         * sources keep their places */
        for (struct m0_link *q = l->loop.runq.head, *next; q; q = next) {
                struct m0_task *t = M0__CONTAINER_OF(q, struct m0_task, link);
                next = q->next;
                if (t->run != conn_run)
                        continue;
                m0__count(&l->cut, 1);
                m0__conn_close(M0__CONTAINER_OF(t, struct m0_conn, task));
        }
}

int m0__conn_want(struct m0_conn *c, uint32_t ev)
{
        return set_events(c, ev);
}

void m0__conn_linger(struct m0_conn *c)
{
        linger_or_close(c);
}

void m0__conn_resume(struct m0_conn *c)
{
        if (c->proto->resume)
                c->proto->resume(c);
        else if (flush(c))
                run_buffered(c);
        requeue_pending(c);
}

int m0__conn_send(struct m0_conn *c, const void *data, size_t len)
{
        if (c->tr.fd < 0 || c->closing)
                return -EPIPE;
        size_t pending = c->out.len - c->out_off;
        if (pending) {
                if (pending + len > c->loop->cfg->max_output_bytes) {
                        /* B2: a subscriber this far behind is closed; it reconnects with
                         * Last-Event-ID and gets what is still kept. */
                        m0__count(&c->loop->streams_cut, 1);
                        m0__conn_close(c);
                        return -EPIPE;
                }
                return m0__buf_append(&c->out, data, len);
        }
        ssize_t w = send_now(c, data, len);
        if (w < 0)
                return -EPIPE;
        if ((size_t)w == len)
                return 0;
        int r = keep_unsent(c, (const char *)data + w, len - (size_t)w);
        (void)set_events(c, EPOLLOUT);
        m0__wait_write(c);
        return r;
}

void m0__conn_end(struct m0_conn *c)
{
        if (c->tr.fd < 0)
                return;
        c->closing = true;
        if (!c->busy && c->out.len == c->out_off && !c->file.on)
                linger_or_close(c);
}

static void h1_timer(struct m0_conn *c)
{
        switch (c->timer.cls) {
        case M0_TIMER_HEAD:
        case M0_TIMER_BODY:
                m0__timer_unlink(c);
                c->read_deadline = 0;
                m0__conn_refuse(c, 408);
                (void)flush(c);
                break;
        case M0_TIMER_DRAIN: linger_or_close(c); break; /* which leaves this timer */
        default: m0__conn_close(c); break;
        }
}

void m0__conn_stop(struct m0_conn *c)
{
        if (c->tr.fd < 0)
                return;
        if (c->handshaking) {
                m0__conn_close(c); /* no request can be in flight before the handshake ends */
                return;
        }
        c->proto->drain(c);
}

void m0__conn_timer_fire(struct m0_conn *c)
{
        if (c->handshaking) {
                /* TL6: no handshake outlives tls_handshake_timeout_ms. */
                m0__count(&c->loop->tls_timedout, 1);
                m0__conn_close(c);
                return;
        }
        c->proto->timer(c);
}

static void stop_idle(struct m0_conn *c)
{
        if (c->tr.fd < 0 || c->lingering || c->timer.cls == M0_TIMER_DRAIN)
                return;
        if (c->phase != PH_IDLE || c->out.len > c->out_off || c->rlen > c->rpos || c->file.on) {
                /* In flight: it is answered whole, with Connection: close. */
                return;
        }
        /* Bytes that reached the socket before the stop are a request in flight, not idleness. */
        int unread = 0;
        if ((ioctl(c->tr.fd, FIONREAD, &unread) == 0 && unread > 0) ||
            m0__transport_pending(&c->tr) > 0) {
                h1_readable(c);
                return;
        }
        /* Idle. A client may have written its next request a moment ago: for drain_idle_ms
         * one that arrives is answered (with Connection: close), then the connection closes
         * through the linger, so a request crossing our FIN meets an end of file, not a reset. */
        if (c->loop->cfg->drain_idle_ms) {
                m0__timer_set(c, M0_TIMER_DRAIN);
                return;
        }
        linger_or_close(c);
}

static void h1_drain(struct m0_conn *c)
{
        m0__slice_begin(c);
        stop_idle(c);
}

/* ---- a file's body (SF2) ---- */

/* The most of a file one connection sends in one go, and then in one slice of a turn, as
 * nginx's sendfile_max_chunk: a fast client on a large file does not hold its loop (D201). */
#define FILE_CHUNK (2u << 20)

/* Read res's file into the loop's wbuf behind its head (D205: a file of M0__FILE_INLINE bytes or
 * less, one write and one segment where sendfile would take a second of each), from the turn's
 * copy of its bytes when the turn's cache holds it (D237). False when there is no memory for it
 * (sendfile goes on with it then). A file that ends before its announced length closes the
 * connection once what was read is out (D201). */
static bool file_inline(struct m0_conn *c, struct m0_res *res)
{
        struct m0_buf *w = &c->loop->wbuf;
        size_t len = (size_t)res->file.len;
        if (m0__buf_reserve(w, len) < 0)
                return false;
        const char *bytes =
                res->file.ent ? m0__fent_bytes(&c->loop->files_turn, res->file.ent) : NULL;
        ssize_t r;
        if (bytes) {
                memcpy(w->data + w->len, bytes + res->file.off, len);
                r = (ssize_t)len;
        } else {
                r = pread(res->file.fd, w->data + w->len, len, (off_t)res->file.off);
        }
        if (r < 0)
                r = 0;
        w->len += (size_t)r;
        if ((size_t)r < len) {
                m0__log(M0_LOG_WARNING, c->loop->index, NULL,
                        "a file shrank while it was sent: %zu bytes of its answer were missing; "
                        "the connection is closed",
                        len - (size_t)r);
                c->closing = true;
        }
        m0__res_file_close(res);
        return true;
}

void m0__conn_file_begin(struct m0_conn *c, struct m0_res *res)
{
        if (res->file.len <= M0__FILE_INLINE && file_inline(c, res))
                return;
        int fd = res->file.fd;
        if (res->file.shared) {
                /* the turn's cache closes its own at the turn's end; this one may outlast it */
                fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
                if (fd < 0) {
                        m0__log(M0_LOG_ERR, c->loop->index, NULL,
                                "a file's descriptor could not be kept for its answer: %s; the "
                                "connection is closed",
                                strerror(errno));
                        c->closing = true;
                        return;
                }
        }
        c->file.on = true;
        c->file.fd = fd;
        c->file.off = (off_t)res->file.off;
        c->file.left = res->file.len;
        res->file.on = false;
}

static void file_end(struct m0_conn *c)
{
        if (c->file.on)
                close(c->file.fd);
        c->file.on = false;
}

/* Up to `n` bytes of the file through the transport: its sendfile, or, for a transport without
 * one, a read into a buffer and its writev. As an operation of the transport returns. */
static ssize_t file_chunk(struct m0_conn *c, size_t n)
{
        if (c->tr.ops->sendfile)
                return c->tr.ops->sendfile(&c->tr, c->file.fd, &c->file.off, n);
        char buf[16384];
        ssize_t r = pread(c->file.fd, buf, n < sizeof(buf) ? n : sizeof(buf), c->file.off);
        if (r <= 0)
                return r < 0 ? -EIO : 0;
        ssize_t w = m0__transport_write(&c->tr, buf, (size_t)r);
        if (w > 0)
                c->file.off += w;
        return w;
}

/*
 * Send the file's bytes for as long as the transport takes them. True once they are all out
 * (the file closed); false while they wait for the socket (EPOLLOUT, the write-stall bound) or
 * for the connection's next turn, or when the connection was closed: on an error, and when the
 * file ends before the length its head announced, since it shrank while being sent and the
 * client must not take what follows for the rest of the body (D201).
 */
static bool send_file(struct m0_conn *c)
{
        struct m0_hctx *l = c->loop;
        uint64_t sent = 0;
        while (c->file.left) {
                if (sent >= FILE_CHUNK) {
                        m0__timer_unlink(c); /* the loop, not the client, is what it waits for */
                        m0__turn_defer(&l->loop, &c->task, EPOLLOUT);
                        return false;
                }
                size_t n = c->file.left < FILE_CHUNK ? (size_t)c->file.left : FILE_CHUNK;
                ssize_t w = file_chunk(c, n);
                if (w > 0) {
                        c->wwant = 0;
                        c->file.left -= (uint64_t)w;
                        sent += (uint64_t)w;
                        if (l->observe & M0_OBSERVE_METRICS)
                                m0__count(&l->stats.bytes_out, (uint64_t)w);
                        continue;
                }
                if (w == -EAGAIN) {
                        c->wwant = (uint8_t)c->tr.want;
                        (void)set_events(c, EPOLLOUT);
                        m0__wait_write(c);
                        return false;
                }
                if (w == 0)
                        m0__log(M0_LOG_WARNING, l->index, NULL,
                                "a file shrank while it was sent: %llu bytes of its answer were "
                                "missing; the connection is closed",
                                (unsigned long long)c->file.left);
                m0__conn_close(c);
                return false;
        }
        file_end(c);
        return true;
}

const struct m0_proto_ops m0__proto_http1 = {
        .name = "http/1.1",
        .readable = h1_readable,
        .writable = h1_writable,
        .timer = h1_timer,
        .drain = h1_drain,
        .closed = m0__sse_unlink,
};

/* ---- a connection another protocol took over (WS1): what it needs of conn.c ---- */

int m0__conn_write_out(struct m0_conn *c)
{
        if (c->out.len == c->out_off)
                return 1;
        ssize_t w = send_now(c, c->out.data + c->out_off, c->out.len - c->out_off);
        if (w < 0)
                return -1;
        c->out_off += (size_t)w;
        if (c->out_off < c->out.len) {
                (void)set_events(c, EPOLLOUT);
                if (w > 0 || c->timer.cls != M0_TIMER_WRITE)
                        m0__wait_write(c); /* progress: the stall bound counts from here */
                return 0;
        }
        m0__buf_free(&c->out);
        c->out_off = 0;
        return 1;
}

void m0__conn_downgrade_end(struct m0_conn *c)
{
        c->proto = &m0__proto_http1;
        c->upgraded = false;
        c->up = NULL;
        rbuf_release(c);
        m0__timer_unlink(c);
        m0__conn_end(c);
}
