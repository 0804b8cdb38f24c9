/* SPDX-License-Identifier: MIT */
/* server.c: the metrics thread: GET /metrics on the metrics sockets, one request per
 * connection, every connection bounded in number, bytes and time, so that no client of the
 * metrics port can reach a loop (O1, D79); served by an event loop of its own, evloop/'s (D211). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crash.h"
#include "activation.h"
#include "config.h"
#include "hctx.h"
#include "head-checks.h"
#include "log.h"
#include "metrics.h"
#include "request.h"
#include "response.h"

/*
 * One metrics connection. It reads a head of at most --max-head-bytes as a loop's connection reads
 * one (struct m0_head_reader: the same statuses to the same bytes, H3), answers it once (then its
 * write side is shut and what the client still sends is dropped until it closes), all within
 * --metrics-timeout-ms of its accept; past that it is closed wherever it is.
 */
struct m0_mconn {
        struct m0_io io;       /* in the metrics loop's epoll set while `fd` >= 0 */
        struct m0_timer timer; /* its deadline, in the loop's one class (all have one bound) */
        struct m0_metrics_server *m;
        int fd; /* -1: a free slot */
        struct m0_head_reader rd;
        struct m0_buf in;
        struct m0_buf out;
        size_t out_off;
        bool answered;
};

/* A metrics listener in the loop's epoll set. */
struct m0_mlisten {
        struct m0_io io;
        struct m0_metrics_server *m;
        int fd; /* the host's; it outlives the loop */
};

/* The one timer class of the metrics loop: every connection's deadline is --metrics-timeout-ms
 * from its accept, so the class is a FIFO. */
#define DEADLINE 1

static void mconn_close(struct m0_metrics_server *m, struct m0_mconn *c)
{
        if (c->fd < 0)
                return;
        m0__io_del(&m->loop, c->fd);
        m0__timer_unfile(&m->loop, &c->timer);
        close(c->fd);
        c->fd = -1;
        m0__buf_free(&c->in);
        m0__buf_free(&c->out);
        c->out_off = 0;
        c->answered = false;
}

static void set_events(struct m0_metrics_server *m, struct m0_mconn *c, uint32_t ev)
{
        (void)m0__io_mod(&m->loop, &c->io, c->fd, ev);
}

/* Send what the answer still holds; once it is out, shut the write side and wait for the
 * client's end of file (dropping its bytes), so the answer is not lost to a reset. */
static void write_out(struct m0_metrics_server *m, struct m0_mconn *c)
{
        while (c->out_off < c->out.len) {
                ssize_t w = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off,
                                 MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0 && errno == EAGAIN) {
                        set_events(m, c, EPOLLOUT);
                        return;
                }
                if (w < 0) {
                        mconn_close(m, c);
                        return;
                }
                c->out_off += (size_t)w;
        }
        m0__buf_free(&c->out);
        (void)shutdown(c->fd, SHUT_WR);
        set_events(m, c, EPOLLIN);
}

/* The answer's head: status line, the host's fields, the type and the length. */
static int head(struct m0_buf *out, int status, const char *type, size_t len, bool allow)
{
        char date[64];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        return m0__buf_printf(out,
                              "HTTP/1.1 %d %s\r\nServer: m0\r\nDate: %s\r\nContent-Type: %s\r\n"
                              "Content-Length: %zu\r\n%sConnection: close\r\n\r\n",
                              status, m0__status_reason(status), date, type, len,
                              allow ? "Allow: GET, HEAD\r\n" : "");
}

/* Answer with `status` and its reason as a text body, or its head alone to a HEAD (D100);
 * counted as rejected. */
static void refuse(struct m0_metrics_server *m, struct m0_mconn *c, int status, bool is_head)
{
        char body[64];
        int n = snprintf(body, sizeof(body), "%d %s\n", status, m0__status_reason(status));
        m0__count(&m->rejected, 1);
        c->out.len = 0;
        if (head(&c->out, status, "text/plain; charset=utf-8", (size_t)n, status == 405) < 0 ||
            (!is_head && m0__buf_append(&c->out, body, (size_t)n) < 0)) {
                mconn_close(m, c);
                return;
        }
        c->answered = true;
        write_out(m, c);
}

/* The head is read (`st` 0, `req` it) or refused (`st` its status): GET (or HEAD) /metrics
 * gets the exposition, anything else its refusal. */
static void answer(struct m0_metrics_server *m, struct m0_mconn *c, int st,
                   const struct m0_req *req)
{
        bool is_head = m0__head_read_is_head(&c->rd);
        if (st) {
                refuse(m, c, st, is_head);
                return;
        }
        if (strcmp(req->path, "/metrics") != 0) {
                refuse(m, c, 404, is_head);
                return;
        }
        if (!is_head && strcmp(req->method, "GET") != 0) {
                refuse(m, c, 405, false);
                return;
        }
        enum m0_metrics_format f = m0__metrics_negotiate(m0_req_header(req, "Accept"));
        m0__count(&m->scrapes, 1); /* before the rendering, which then counts itself */
        struct m0_buf body = {0};
        int r = m0__metrics_render(m, f, &body);
        c->out.len = 0;
        if (r == 0)
                r = head(&c->out, 200, m0__metrics_content_type(f), body.len, false);
        if (r == 0 && !is_head)
                r = m0__buf_append(&c->out, body.data, body.len);
        m0__buf_free(&body);
        if (r < 0) {
                mconn_close(m, c);
                return;
        }
        c->answered = true;
        write_out(m, c);
}

/* Bytes from the client: the head so far, or, once answered, bytes to drop until it closes. */
static void on_readable(struct m0_metrics_server *m, struct m0_mconn *c, struct m0_header *fields)
{
        size_t max = m->serve->cfg->max_head_bytes;
        char drop[4096];
        bool answered = c->answered;
        if (!answered && m0__buf_reserve(&c->in, max + 1 - c->in.len) < 0) {
                mconn_close(m, c);
                return;
        }
        char *at = answered ? drop : c->in.data + c->in.len;
        size_t room = answered ? sizeof(drop) : max + 1 - c->in.len;
        ssize_t n = read(c->fd, at, room);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                if (!answered)
                        m0__count(&m->rejected, 1); /* it left before its head was whole */
                mconn_close(m, c);
                return;
        }
        if (answered)
                return;
        struct m0_req req = {.headers = fields};
        size_t seen = c->in.len;
        c->in.len += (size_t)n;
        int st = m0__head_read(&c->rd, c->in.data, seen, c->in.len, &req);
        if (st == -EAGAIN && c->in.len > max)
                st = 431; /* empty lines before a request line, past the head bound */
        if (st != -EAGAIN)
                answer(m, c, st, &req);
}

/* A connection's descriptor is ready: its answer's bytes go out, or the client's come in. */
static void mconn_ready(struct m0_io *io, uint32_t events)
{
        struct m0_mconn *c = M0__CONTAINER_OF(io, struct m0_mconn, io);
        if (c->fd < 0)
                return; /* closed earlier in this turn */
        if (events & EPOLLOUT)
                write_out(c->m, c);
        else
                on_readable(c->m, c, c->m->fields);
}

/* Its deadline passed: slow to send its request, it gets a 408, as far as the socket takes it
 * now; closed either way. */
static void mconn_expired(struct m0_timer *t)
{
        struct m0_mconn *c = M0__CONTAINER_OF(t, struct m0_mconn, timer);
        struct m0_metrics_server *m = c->m;
        if (!c->answered) {
                static const char timeout[] = "HTTP/1.1 408 Request Timeout\r\nServer: m0\r\n"
                                              "Content-Length: 0\r\nConnection: close\r\n\r\n";
                ssize_t w = send(c->fd, timeout, sizeof(timeout) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
                (void)w;
                m0__count(&m->rejected, 1);
        }
        mconn_close(m, c);
}

/* Take what the listener holds: into a free slot, or closed at once past the limit. */
static void accept_some(struct m0_io *io, uint32_t events)
{
        struct m0_mlisten *ml = M0__CONTAINER_OF(io, struct m0_mlisten, io);
        struct m0_metrics_server *m = ml->m;
        const struct m0_config *cfg = m->serve->cfg;
        (void)events;
        for (int i = 0; i < 16; i++) {
                int fd = accept4(ml->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                        return;
                struct m0_mconn *c = NULL;
                for (size_t k = 0; k < m->nconns && !c; k++)
                        if (m->conns[k].fd < 0)
                                c = &m->conns[k];
                if (!c || m0__io_add(&m->loop, &c->io, fd, EPOLLIN) < 0) {
                        m0__count(&m->rejected, 1);
                        close(fd);
                        continue;
                }
                c->fd = fd;
                m0__head_reader_init(&c->rd, cfg);
                m0__timer_file(&m->loop, &c->timer, DEADLINE,
                               m->loop.now_ms + cfg->metrics_timeout_ms);
        }
}

static void stop_handle(struct m0_loop *l, struct m0_msg *msg)
{
        (void)msg;
        M0__CONTAINER_OF(l, struct m0_metrics_server, loop)->stopped = true;
}

static void *metrics_main(void *arg)
{
        struct m0_metrics_server *m = arg;
        m0__thread_identify(NULL, (m0_thread_kind)M0__THREAD_METRICS, -1, -1);
        (void)pthread_setname_np(pthread_self(), m->thread.name);
        m->fields = calloc(m->serve->cfg->max_header_fields, sizeof(*m->fields));
        if (!m->fields)
                m0__log(M0_LOG_ERR, -1, NULL, "the metrics thread has no memory: no metrics");
        while (m->fields && !m->stopped)
                if (m0__loop_run_once(&m->loop, m0__loop_timeout(&m->loop)) < 0)
                        break;
        free(m->fields);
        m->fields = NULL;
        m0__thread_forget();
        return NULL;
}

/* The thread's loop: its mailbox (the stop) and every metrics listener. 0 or -errno. */
static int server_build(struct m0_metrics_server *m)
{
        const struct m0_sockets *so = m->serve->sockets;
        m->nconns = m->serve->cfg->metrics_max_connections;
        m->conns = calloc(m->nconns, sizeof(*m->conns));
        m->listens = calloc(so->nmetrics, sizeof(*m->listens));
        if (!m->conns || !m->listens)
                return -ENOMEM;
        for (size_t k = 0; k < m->nconns; k++)
                m->conns[k] = (struct m0_mconn){
                        .io.ready = mconn_ready, .timer.fire = mconn_expired, .m = m, .fd = -1};
        m->loop.turn_items = 32; /* events a turn takes, as the epoll batch it was */
        m->loop.turn_budget_ms = 10;
        m->loop.wake_every_ms = 60000; /* nothing to do on a wake: it sleeps until a descriptor or
                                          a deadline, as its own epoll loop did */
        int r = m0__loop_build(&m->loop);
        for (size_t i = 0; r == 0 && i < so->nmetrics; i++) {
                m->listens[i] = (struct m0_mlisten){
                        .io.ready = accept_some, .m = m, .fd = so->metrics[i].fd};
                r = m0__io_add(&m->loop, &m->listens[i].io, m->listens[i].fd, EPOLLIN);
        }
        return r;
}

int m0__metrics_start(struct m0_metrics_server *m)
{
        if (!m->serve->sockets->nmetrics)
                return 0;
        m0__loop_prepare(&m->loop, -1, NULL);
        m->built = true;
        m0__thread_init(&m->thread, M0__THREAD_METRICS, -1, -1, metrics_main, m);
        int r = server_build(m);
        if (r == 0)
                r = m0__thread_start(&m->thread);
        if (r < 0)
                m0__metrics_stop(m);
        return r;
}

void m0__metrics_stop(struct m0_metrics_server *m)
{
        if (m->thread.started) {
                struct m0_msg *msg = calloc(1, sizeof(*msg));
                if (msg) {
                        *msg = (struct m0_msg){.handle = stop_handle, .fd = -1};
                        if (m0__loop_post(&m->loop, msg) < 0)
                                free(msg);
                }
                struct timespec end = m0__deadline_after(1000);
                if (m0__thread_join_by(&m->thread, &end) < 0) {
                        /* It never blocks; should it still run, its memory stays with it. */
                        m0__log(M0_LOG_ERR, -1, NULL, "the metrics thread did not stop");
                        return;
                }
        }
        if (!m->built)
                return; /* never built: no descriptor of its own to close */
        for (size_t k = 0; m->conns && k < m->nconns; k++)
                mconn_close(m, &m->conns[k]);
        free(m->conns);
        free(m->listens);
        m->conns = NULL;
        m->listens = NULL;
        m0__loop_destroy(&m->loop); /* the listeners are the host's: not closed here */
        m->built = false;
}
