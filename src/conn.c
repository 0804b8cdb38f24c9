/* SPDX-License-Identifier: MIT */
/* conn.c: one HTTP/1.1 connection on its loop: read, parse, answer in order, write, time out. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"

/* ---- timers: one FIFO per class; entering a class puts the connection at its tail ---- */

static uint32_t class_ms(const struct m0_loop *l, enum m0_timer_class cls)
{
        const struct m0_config *cfg = &l->host->cfg;
        switch (cls) {
        case M0_TIMER_HEAD: return cfg->header_timeout_ms;
        case M0_TIMER_BODY: return cfg->body_timeout_ms;
        case M0_TIMER_LINGER: return cfg->linger_ms;
        case M0_TIMER_DRAIN: return cfg->drain_idle_ms;
        default: return cfg->idle_timeout_ms;
        }
}

static void timer_unlink(struct m0_conn *c)
{
        if (c->tcls == M0_TIMER_NONE)
                return;
        struct m0_conn_list *q = &c->loop->timers[c->tcls];
        if (c->tprev)
                c->tprev->tnext = c->tnext;
        else
                q->head = c->tnext;
        if (c->tnext)
                c->tnext->tprev = c->tprev;
        else
                q->tail = c->tprev;
        c->tprev = c->tnext = NULL;
        c->tcls = M0_TIMER_NONE;
}

/*
 * Put `c` in class `cls` at `deadline`, keeping the class in deadline order. A deadline counted
 * from now goes at the tail at once; a head or body deadline restored after an answer went out
 * (wait_read) is older, and steps back past the few entries that are later.
 */
static void timer_set_at(struct m0_conn *c, enum m0_timer_class cls, uint64_t deadline)
{
        timer_unlink(c);
        struct m0_conn_list *q = &c->loop->timers[cls];
        struct m0_conn *before = q->tail;
        while (before && before->deadline > deadline)
                before = before->tprev;
        c->tcls = cls;
        c->deadline = deadline;
        c->tprev = before;
        c->tnext = before ? before->tnext : q->head;
        if (c->tnext)
                c->tnext->tprev = c;
        else
                q->tail = c;
        if (before)
                before->tnext = c;
        else
                q->head = c;
}

void m0__timer_set(struct m0_conn *c, enum m0_timer_class cls)
{
        if (cls == M0_TIMER_NONE)
                timer_unlink(c);
        else
                timer_set_at(c, cls, c->loop->now_ms + class_ms(c->loop, cls));
}

/*
 * The message being read has a deadline of its own (H2): its head's from the head's first byte,
 * its body's from the end of the head. It holds whatever else the connection waits for in the
 * meantime, an answer the client is slow to take included, so it is kept apart from the timer.
 */
static void read_begin(struct m0_conn *c, enum m0_timer_class cls)
{
        c->read_cls = (uint8_t)cls;
        c->read_deadline = c->loop->now_ms + class_ms(c->loop, cls);
}

/* Wait on the deadline of the message being read. */
static void wait_read(struct m0_conn *c)
{
        if (c->tcls != c->read_cls || c->deadline != c->read_deadline)
                timer_set_at(c, c->read_cls, c->read_deadline);
}

/* Output the client has not taken: the write-stall bound counts from now, unless the message
 * being read must be whole sooner. */
static void wait_write(struct m0_conn *c)
{
        uint64_t stall = c->loop->now_ms + class_ms(c->loop, M0_TIMER_WRITE);
        if (c->read_deadline && !c->closing && c->read_deadline < stall)
                wait_read(c);
        else
                timer_set_at(c, M0_TIMER_WRITE, stall);
}

uint64_t m0__conn_deadline(const struct m0_conn *c)
{
        return c->deadline;
}

struct m0_conn *m0__conn_timer_next(const struct m0_conn *c)
{
        return c->tnext;
}

/* ---- lifetime ---- */

static void stop_idle(struct m0_conn *c);

static int set_events(struct m0_conn *c, uint32_t ev)
{
        if (c->events == ev)
                return 0;
        struct epoll_event e = {.events = ev, .data.ptr = c};
        if (epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &e) < 0)
                return -errno;
        c->events = ev;
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
        if (c->fd < 0)
                return;
        struct m0_loop *l = c->loop;
        timer_unlink(c);
        m0__turn_forget(c);
        m0__sse_unlink(c);
        (void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
        rbuf_release(c);
        m0__buf_free(&c->body);
        m0__buf_free(&c->out);
        atomic_fetch_sub(&l->load, 1);
        atomic_fetch_sub(&l->host->conns, 1);
        if (c->busy)
                return; /* the job names c: it is freed when the job comes back */
        /* Events later in this batch may still name c: free it after the batch. */
        c->tnext = l->dead;
        l->dead = c;
}

void m0__conn_reap(struct m0_loop *l)
{
        while (l->dead) {
                struct m0_conn *c = l->dead;
                l->dead = c->tnext;
                free(c);
        }
}

int m0__conn_admit(struct m0_loop *l, int fd)
{
        struct m0_conn *c = calloc(1, sizeof(*c));
        if (!c)
                goto fail;
        c->loop = l;
        c->fd = fd;
        c->events = EPOLLIN;
        /* An answer leaves in one send (D5), but the tail of one the socket took in parts, an
         * event frame behind one not yet acknowledged, or a 100-continue's final answer would
         * wait for the client's delayed ACK under Nagle. A Unix socket refuses the option. */
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        llhttp_init(&c->parser, HTTP_REQUEST, &m0__http_settings);
        c->parser.data = c;
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &e) < 0)
                goto fail;
        m0__timer_set(c, M0_TIMER_IDLE);
        if (l->stopping)
                m0__conn_stop(c);
        return 0;
fail:
        free(c);
        close(fd);
        atomic_fetch_sub(&l->load, 1);
        atomic_fetch_sub(&l->host->conns, 1);
        return -ENOMEM;
}

/* ---- llhttp callbacks: they run inside llhttp_execute on the loop's thread ---- */

static int on_message_begin(llhttp_t *p)
{
        struct m0_conn *c = p->data;
        c->phase = PH_HEAD;
        c->req_started = false;
        c->err_status = 0;
        c->body.len = 0;
        /* Its first byte may have come before this parse (on_readable, keep_rest). */
        if (!c->read_deadline)
                read_begin(c, M0_TIMER_HEAD);
        wait_read(c);
        return 0;
}

static int on_method(llhttp_t *p, const char *at, size_t len)
{
        (void)len;
        struct m0_conn *c = p->data;
        if (!c->req_started) {
                c->req_off = (uint32_t)(at - c->loop->cur_base);
                c->req_started = true;
        }
        return 0;
}

static int on_headers_complete(llhttp_t *p)
{
        struct m0_conn *c = p->data;
        struct m0_loop *l = c->loop;
        const struct m0_config *cfg = &l->host->cfg;
        size_t hl = 0;
        /* The head is contiguous in the buffer being parsed: it is never dropped while in PH_HEAD. */
        char *head = (char *)l->cur_base + c->req_off;
        bool has_body =
                (p->flags & F_CHUNKED) || ((p->flags & F_CONTENT_LENGTH) && p->content_length);
        /* Without a body the request is answered within this very llhttp_execute(): the head is
         * checked and indexed into the loop's request in one walk. With one, other connections
         * may be served before it completes, so the head stays intact and is indexed then. */
        int st = m0__http_head_parse(head, l->cur_len - c->req_off, cfg, has_body ? NULL : &l->req,
                                     &hl);
        if (st) {
                c->err_status = st;
                return -1;
        }
        c->indexed = !has_body;
        c->head_len = (uint32_t)hl;
        c->read_deadline = 0; /* the head is whole */
        if ((p->flags & F_CONTENT_LENGTH) && p->content_length > cfg->max_body_bytes) {
                c->err_status = 413;
                return -1;
        }
        if (p->method == HTTP_CONNECT) {
                c->err_status = 405;
                return -1;
        }
        c->phase = PH_BODY;
        if (has_body) {
                read_begin(c, M0_TIMER_BODY);
                wait_read(c);
                /* Expect: 100-continue — ask for the body the client is holding back. */
                if (p->http_minor >= 1) {
                        const char *e = head;
                        const char *hend = head + hl;
                        static const char want[] = "\r\nexpect:";
                        for (const char *x = e; x + sizeof(want) - 1 < hend; x++) {
                                if (*x != '\r' || strncasecmp(x, want, sizeof(want) - 1) != 0)
                                        continue;
                                const char *v = x + sizeof(want) - 1;
                                while (*v == ' ' || *v == '\t')
                                        v++;
                                if (strncasecmp(v, "100-continue", 12) == 0) {
                                        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
                                        if (m0__buf_append(&l->wbuf, cont, sizeof(cont) - 1) < 0)
                                                return -1;
                                } else {
                                        c->err_status = 417;
                                        return -1;
                                }
                                break;
                        }
                }
        }
        return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
        struct m0_conn *c = p->data;
        if (c->body.len + len > c->loop->host->cfg.max_body_bytes) {
                c->err_status = 413;
                return -1;
        }
        if (m0__buf_append(&c->body, at, len) < 0) {
                c->err_status = 500;
                return -1;
        }
        return 0;
}

static int on_message_complete(llhttp_t *p)
{
        struct m0_conn *c = p->data;
        c->read_deadline = 0; /* the body is whole */
        /* Stop here so the request is answered before the next pipelined one is parsed. */
        return HPE_PAUSED;
}

const llhttp_settings_t m0__http_settings = {
        .on_message_begin = on_message_begin,
        .on_method = on_method,
        .on_headers_complete = on_headers_complete,
        .on_body = on_body,
        .on_message_complete = on_message_complete,
};

/* ---- answering ---- */

static void dispatch(struct m0_conn *c)
{
        struct m0_loop *l = c->loop;
        struct m0_host *h = l->host;
        struct m0_req *req = &l->req;
        size_t hl;
        char *head = (char *)l->cur_base + c->req_off;
        int st = c->indexed ? 0 : m0__http_head_parse(head, c->head_len, &h->cfg, req, &hl);
        c->indexed = false;
        bool is_head = c->parser.method == HTTP_HEAD;
        c->nreq++;
        l->requests++;
        bool keep = llhttp_should_keep_alive(&c->parser) &&
                    !atomic_load_explicit(&h->stopping, memory_order_relaxed) && !c->closing &&
                    (h->cfg.max_keepalive_requests == 0 || c->nreq < h->cfg.max_keepalive_requests);
        if (st) {
                /* checked at headers-complete already; a second walk cannot disagree */
                (void)m0__res_error(l, st, &l->wbuf);
                c->closing = true;
                return;
        }
        req->body = c->body.data ? c->body.data : "";
        req->body_len = c->body.len;
        req->loop = l->index;
        req->thread = -1;
        req->arena.len = 0;
        bool blocking = false;
        int status = 0;
        m0_handler_fn fn = m0__app_route(h->app, req, is_head, &blocking, &status);
        if (fn && blocking && l->pool.nthreads > 0) {
                struct m0_job *job = m0__job_new(c, req);
                if (job) {
                        job->fn = fn;
                        job->loop = l;
                        job->is_head = is_head;
                        job->keep_alive = keep;
                        c->busy = true;
                        timer_unlink(c);
                        m0__pool_submit(&l->pool, job);
                        goto done;
                }
                /* no memory for a job: answer on the loop rather than not at all */
        }
        m0__res_reset(&l->res);
        m0__thread_request_set(h, req->method, req->path);
        m0__app_run(h->app, fn, status, req, &l->res, l->state);
        m0__thread_request_set(h, NULL, NULL);
        if (l->res.stream && !is_head) {
                m0__sse_begin(c, req, &l->res);
                goto done;
        }
        /* A drain that began while the handler ran still closes this connection (X1). */
        if (atomic_load_explicit(&h->stopping, memory_order_relaxed))
                keep = false;
        /* H6: HEAD on a stream route is the stream's head, and the connection goes on. */
        size_t mark = l->wbuf.len;
        int sr = l->res.stream ? m0__sse_head(l, &l->res, !keep, &l->wbuf)
                               : m0__res_serialize(l, &l->res, is_head, !keep, &l->wbuf);
        if (sr < 0) {
                l->wbuf.len = mark; /* no half-written head goes out before the 500 */
                (void)m0__res_error(l, 500, &l->wbuf);
                keep = false;
        }
        if (h->cfg.access_log)
                m0__log(M0_LOG_INFO, l->index, NULL, "%s %s %d %zu", req->method, req->path,
                        l->res.status, l->res.body.len);
        if (!keep)
                c->closing = true;
done:
        /* A large body's buffer is not kept for the next request. */
        if (c->body.cap > 64 * 1024)
                m0__buf_free(&c->body);
        c->body.len = 0;
}

/* Refuse the request being read with `status`, Connection: close, and read no further. */
static void refuse(struct m0_conn *c, int status)
{
        (void)m0__res_error(c->loop, status, &c->loop->wbuf);
        c->closing = true;
}

/* The last four bytes llhttp consumed, most recent in the low byte. */
#define TAIL_CRLFCRLF 0x0d0a0d0au

static void tail_note(struct m0_conn *c, const char *p, size_t n)
{
        size_t i = n > 4 ? n - 4 : 0;
        for (; i < n; i++)
                c->tail = (c->tail << 8) | (uint8_t)p[i];
}

/* ---- a connection's slice of a turn (D41) ---- */

/* `c` is served now: it may run up to slice_requests requests before the loop turns to others. */
static void slice_begin(struct m0_conn *c)
{
        struct m0_loop *l = c->loop;
        l->slice_left = l->host->cfg.slice_requests;
        l->turn_served = true;
}

/*
 * Whether the connection being served may run one more request now: not past its slice, nor,
 * once it ran one, past the turn's budget (which then ends the slice too). The first request of
 * a slice always runs, so that a turn makes progress whatever its budget.
 */
static bool slice_goes_on(struct m0_loop *l)
{
        if (l->slice_left == 0)
                return false;
        if (l->slice_left < l->host->cfg.slice_requests && m0__turn_spent(l)) {
                l->slice_left = 0;
                return false;
        }
        return true;
}

/*
 * Parse and answer what `base[pos..len)` holds. Returns how far parsing got. Stops early when
 * the connection is closing, its answers pass max_output_bytes, or its slice of the turn is
 * spent (the rest waits, unparsed).
 */
static size_t process(struct m0_conn *c, char *base, size_t len, size_t pos)
{
        struct m0_loop *l = c->loop;
        const struct m0_config *cfg = &l->host->cfg;
        l->cur_base = base;
        l->cur_len = len;
        while (pos < len && !c->closing && !c->busy && !c->stream) {
                if (l->wbuf.len >= cfg->max_output_bytes || !slice_goes_on(l))
                        break;
                size_t from = pos;
                llhttp_errno_t e = llhttp_execute(&c->parser, base + pos, len - pos);
                if (e == HPE_OK) {
                        tail_note(c, base + from, len - from);
                        pos = len;
                        break;
                }
                if (e == HPE_PAUSED) {
                        pos = (size_t)(llhttp_get_error_pos(&c->parser) - base);
                        tail_note(c, base + from, pos - from);
                        llhttp_resume(&c->parser);
                        /* A chunked body ends with CRLF CRLF (after the last chunk, or its
                         * trailers); llhttp 8.1 also takes a bare LF there (H3). */
                        if ((c->parser.flags & F_CHUNKED) && c->tail != TAIL_CRLFCRLF) {
                                refuse(c, 400);
                                pos = len;
                                break;
                        }
                        /* An Upgrade is not taken: the request is answered, then the
                         * connection closes, since what follows is not HTTP/1.1. */
                        if (c->parser.upgrade)
                                c->closing = true;
                        l->slice_left--;
                        dispatch(c);
                        c->phase = PH_IDLE;
                        continue;
                }
                if (e == HPE_PAUSED_UPGRADE) {
                        c->closing = true; /* answered already (above); read nothing more */
                        pos = len;
                        break;
                }
                refuse(c, c->err_status ? c->err_status : 400);
                pos = len;
        }
        if (c->closing || c->busy || c->stream)
                return c->busy ? pos : len;
        /* Heads still arriving: 414 for a request line past the URI bound, 431 past the head bound. */
        if (c->phase == PH_HEAD && c->req_started) {
                size_t have = len - c->req_off;
                const char *lf = memchr(base + c->req_off, '\n', have);
                if (!lf && have > (size_t)cfg->max_uri_bytes + 32)
                        refuse(c, 414);
                else if (have > cfg->max_head_bytes)
                        refuse(c, 431);
        }
        return pos;
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

/* Send what the socket takes now. Returns the bytes sent (0 when it is full), or -1 after
 * closing the connection on an error. */
static ssize_t send_now(struct m0_conn *c, const void *data, size_t len)
{
        ssize_t w;
        do
                w = send(c->fd, data, len, MSG_NOSIGNAL);
        while (w < 0 && errno == EINTR);
        if (w >= 0)
                return w;
        if (errno == EAGAIN)
                return 0;
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
        const struct m0_config *cfg = &c->loop->host->cfg;
        if (cfg->linger_ms == 0) {
                m0__conn_close(c);
                return;
        }
        /* Shut our side and drop what the client still sends, so the last answer is not lost
         * to a reset caused by unread bytes. */
        (void)shutdown(c->fd, SHUT_WR);
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
        struct m0_loop *l = c->loop;
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
                wait_write(c);
                return false;
        }
        if (c->busy) {
                /* Read nothing more until the pool answers: pipelined bytes wait, in order. */
                (void)set_events(c, 0);
                timer_unlink(c);
                return false;
        }
        (void)set_events(c, EPOLLIN);
        if (c->closing) {
                linger_or_close(c);
                return false;
        }
        if (c->stream) {
                timer_unlink(c); /* a stream is not idle: heartbeats keep it alive */
                return false;
        }
        if (c->phase != PH_IDLE) {
                wait_read(c); /* the head or body goes on arriving, against its own deadline */
                return false;
        }
        if (c->rlen > c->rpos) {
                if (l->slice_left)
                        return true; /* stopped at max_output_bytes: the rest is parsed now */
                /* Its slice is spent: the rest waits for its next turn, and no client timeout
                 * runs meanwhile, since the loop, not the client, is what it waits for. */
                timer_unlink(c);
                m0__turn_defer(c, EPOLLIN);
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
                read_begin(c, M0_TIMER_HEAD);
        if (r < 0) {
                rbuf_release(c);
                refuse(c, 503);
        }
}

/* Parse what is buffered in rbuf and answer, for as long as the output keeps being taken. */
static void run_buffered(struct m0_conn *c)
{
        do {
                size_t pos = process(c, c->rbuf, c->rlen, c->rpos);
                keep_rest(c, c->rbuf, c->rlen, pos);
        } while (flush(c));
}

static void on_readable(struct m0_conn *c)
{
        struct m0_loop *l = c->loop;
        const struct m0_config *cfg = &l->host->cfg;
        if (c->lingering || c->stream) {
                /* Nothing more is parsed: drop what arrives and notice the close. */
                ssize_t n = read(c->fd, l->rscratch, l->rscratch_cap);
                if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                        m0__conn_close(c);
                return;
        }
        if (c->rlen > c->rpos) {
                /* Requests its last slice left unparsed: they come before anything new. */
                run_buffered(c);
                return;
        }
        if (c->rlen > 0) {
                /* A request is in progress: append to its buffer. */
                size_t want = 16 * 1024;
                size_t limit = (size_t)cfg->max_head_bytes + 64 * 1024;
                if (c->rcap - c->rlen < want) {
                        size_t cap = c->rlen + want;
                        if (cap > limit)
                                cap = limit > c->rlen + 1024 ? limit : c->rlen + 1024;
                        char *p = realloc(c->rbuf, cap);
                        if (!p) {
                                refuse(c, 503);
                                (void)flush(c);
                                return;
                        }
                        c->rbuf = p;
                        c->rcap = (uint32_t)cap;
                }
                ssize_t n = read(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen);
                if (n < 0) {
                        if (errno != EAGAIN && errno != EINTR)
                                m0__conn_close(c);
                        return;
                }
                if (n == 0) {
                        m0__conn_close(c); /* the client left mid-request */
                        return;
                }
                c->rlen += (uint32_t)n;
                run_buffered(c);
                return;
        }
        ssize_t n = read(c->fd, l->rscratch, l->rscratch_cap);
        if (n < 0) {
                if (errno != EAGAIN && errno != EINTR)
                        m0__conn_close(c);
                return;
        }
        if (n == 0) {
                m0__conn_close(c); /* every complete request was answered as it arrived */
                return;
        }
        if (c->phase == PH_IDLE && !c->read_deadline) {
                read_begin(c, M0_TIMER_HEAD); /* from the head's first byte (H2) */
                wait_read(c);
        }
        size_t pos = process(c, l->rscratch, (size_t)n, 0);
        keep_rest(c, l->rscratch, (size_t)n, pos);
        if (flush(c))
                run_buffered(c);
}

static void on_writable(struct m0_conn *c)
{
        ssize_t w = send_now(c, c->out.data + c->out_off, c->out.len - c->out_off);
        if (w < 0 || (w == 0 && c->out_off < c->out.len))
                return; /* closed, or still full: no progress */
        c->out_off += (size_t)w;
        if (c->out_off < c->out.len) {
                wait_write(c); /* progress: the stall bound counts from here */
                return;
        }
        m0__buf_free(&c->out);
        c->out_off = 0;
        if (c->busy) {
                (void)set_events(c, 0);
                timer_unlink(c);
                return;
        }
        if (c->closing) {
                linger_or_close(c);
                return;
        }
        (void)set_events(c, EPOLLIN);
        if (c->stream) {
                timer_unlink(c);
                return;
        }
        /* Bytes that waited while the output was full are parsed now. */
        if (c->rlen > c->rpos)
                run_buffered(c);
        else
                (void)flush(c);
}

void m0__conn_event(struct m0_conn *c, uint32_t events)
{
        if (c->fd < 0)
                return; /* closed earlier in this batch */
        slice_begin(c);
        if (events & EPOLLOUT) {
                on_writable(c);
                if (c->fd < 0)
                        return;
        }
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                if (c->events & EPOLLIN)
                        on_readable(c);
                else if (events & (EPOLLHUP | EPOLLERR))
                        m0__conn_close(c); /* a busy one is freed when its job returns */
        }
}

void m0__conn_job_done(struct m0_loop *l, struct m0_job *job)
{
        struct m0_conn *c = job->conn;
        if (c->fd < 0) {
                /* closed while the pool worked: nobody to answer */
                m0__job_free(job);
                free(c);
                return;
        }
        c->busy = false;
        slice_begin(c);
        bool keep =
                job->keep_alive && !atomic_load_explicit(&l->host->stopping, memory_order_relaxed);
        if (m0__res_serialize(l, &job->res, job->is_head, !keep, &l->wbuf) < 0) {
                (void)m0__res_error(l, 500, &l->wbuf);
                keep = false;
        }
        if (l->host->cfg.access_log)
                m0__log(M0_LOG_INFO, l->index, NULL, "%s %s %d %zu (pool)", job->req.method,
                        job->req.path, job->res.status, job->res.body.len);
        m0__job_free(job);
        if (!keep)
                c->closing = true;
        if (flush(c))
                run_buffered(c);
}

int m0__conn_send(struct m0_conn *c, const void *data, size_t len)
{
        if (c->fd < 0 || c->closing)
                return -EPIPE;
        size_t pending = c->out.len - c->out_off;
        if (pending) {
                if (pending + len > c->loop->host->cfg.max_output_bytes) {
                        /* B2: a subscriber this far behind is closed; it reconnects with
                         * Last-Event-ID and gets what is still kept. */
                        c->loop->streams_cut++;
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
        wait_write(c);
        return r;
}

void m0__conn_end(struct m0_conn *c)
{
        if (c->fd < 0)
                return;
        c->closing = true;
        if (!c->busy && c->out.len == c->out_off)
                linger_or_close(c);
}

void m0__job_discard(struct m0_job *job)
{
        if (job->conn->fd < 0)
                free(job->conn);
        m0__job_free(job);
}

void m0__conn_timer_fire(struct m0_conn *c)
{
        switch (c->tcls) {
        case M0_TIMER_HEAD:
        case M0_TIMER_BODY:
                timer_unlink(c);
                c->read_deadline = 0;
                refuse(c, 408);
                (void)flush(c);
                break;
        case M0_TIMER_DRAIN: linger_or_close(c); break; /* which leaves this timer */
        default: m0__conn_close(c); break;
        }
}

void m0__conn_stop(struct m0_conn *c)
{
        if (c->fd < 0)
                return;
        slice_begin(c);
        stop_idle(c);
}

static void stop_idle(struct m0_conn *c)
{
        if (c->fd < 0 || c->lingering || c->tcls == M0_TIMER_DRAIN)
                return;
        if (c->phase != PH_IDLE || c->out.len > c->out_off || c->rlen > c->rpos) {
                /* In flight: it is answered whole, with Connection: close. */
                return;
        }
        /* Bytes that reached the socket before the stop are a request in flight, not idleness. */
        int unread = 0;
        if (ioctl(c->fd, FIONREAD, &unread) == 0 && unread > 0) {
                on_readable(c);
                return;
        }
        /* Idle. A client may have written its next request a moment ago: for drain_idle_ms
         * one that arrives is answered (with Connection: close), then the connection closes
         * through the linger, so a request crossing our FIN meets an end of file, not a reset. */
        if (c->loop->host->cfg.drain_idle_ms) {
                m0__timer_set(c, M0_TIMER_DRAIN);
                return;
        }
        linger_or_close(c);
}
