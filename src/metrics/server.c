/* SPDX-License-Identifier: MIT */
/* server.c: the metrics thread: GET /metrics on the metrics sockets, one request per
 * connection, every connection bounded in number, bytes and time, so that no client of the
 * metrics port can reach a loop (O1, D79). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crash.h"
#include "host.h"
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
        int fd; /* -1: a free slot */
        uint64_t deadline_ms;
        struct m0_head_reader rd;
        struct m0_buf in;
        struct m0_buf out;
        size_t out_off;
        bool answered;
};

static uint64_t tag_stop;
#define LISTENER_BIT UINT64_C(1)

static void mconn_close(struct m0_metrics_server *m, struct m0_mconn *c)
{
        if (c->fd < 0)
                return;
        (void)epoll_ctl(m->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
        m0__buf_free(&c->in);
        m0__buf_free(&c->out);
        c->out_off = 0;
        c->answered = false;
}

static void set_events(struct m0_metrics_server *m, struct m0_mconn *c, uint32_t ev)
{
        struct epoll_event e = {.events = ev, .data.ptr = c};
        (void)epoll_ctl(m->epfd, EPOLL_CTL_MOD, c->fd, &e);
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
static void answer(struct m0_host *h, struct m0_mconn *c, int st, const struct m0_req *req)
{
        struct m0_metrics_server *m = &h->metrics;
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
        int r = m0__metrics_render(h, f, &body);
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
static void on_readable(struct m0_host *h, struct m0_mconn *c, struct m0_header *fields)
{
        struct m0_metrics_server *m = &h->metrics;
        size_t max = h->cfg.max_head_bytes;
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
                answer(h, c, st, &req);
}

/* Take what the listener holds: into a free slot, or closed at once past the limit. */
static void accept_some(struct m0_host *h, int lfd)
{
        struct m0_metrics_server *m = &h->metrics;
        for (int i = 0; i < 16; i++) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                        return;
                struct m0_mconn *c = NULL;
                for (size_t k = 0; k < m->nconns && !c; k++)
                        if (m->conns[k].fd < 0)
                                c = &m->conns[k];
                struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
                if (!c || epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
                        m0__count(&m->rejected, 1);
                        close(fd);
                        continue;
                }
                c->fd = fd;
                m0__head_reader_init(&c->rd, &h->cfg);
                c->deadline_ms = m0__now_ms() + h->cfg.metrics_timeout_ms;
        }
}

/* Close what is past its deadline; returns the wait until the next one (ms, -1: none). */
static int expire(struct m0_metrics_server *m)
{
        uint64_t now = m0__now_ms(), next = UINT64_MAX;
        for (size_t k = 0; k < m->nconns; k++) {
                struct m0_mconn *c = &m->conns[k];
                if (c->fd < 0)
                        continue;
                if (c->deadline_ms <= now) {
                        if (!c->answered) {
                                /* Slow to send its request: 408, as far as the socket takes
                                 * it now, and closed either way. */
                                static const char timeout[] =
                                        "HTTP/1.1 408 Request Timeout\r\nServer: m0\r\n"
                                        "Content-Length: 0\r\nConnection: close\r\n\r\n";
                                ssize_t w = send(c->fd, timeout, sizeof(timeout) - 1,
                                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                                (void)w;
                                m0__count(&m->rejected, 1);
                        }
                        mconn_close(m, c);
                } else if (c->deadline_ms < next) {
                        next = c->deadline_ms;
                }
        }
        return next == UINT64_MAX ? -1 : (int)(next - now);
}

static void *metrics_main(void *arg)
{
        struct m0_host *h = arg;
        struct m0_metrics_server *m = &h->metrics;
        m0__thread_identify(NULL, (m0_thread_kind)M0__THREAD_METRICS, -1, -1);
        (void)pthread_setname_np(pthread_self(), m->thread.name);
        struct m0_header *fields = calloc(h->cfg.max_header_fields, sizeof(*fields));
        for (bool run = fields != NULL; run;) {
                struct epoll_event evs[32];
                int n = epoll_wait(m->epfd, evs, 32, expire(m));
                for (int i = 0; i < n && run; i++) {
                        void *p = evs[i].data.ptr;
                        if (p == &tag_stop)
                                run = false;
                        else if (evs[i].data.u64 & LISTENER_BIT)
                                accept_some(h, h->sockets.metrics[evs[i].data.u64 >> 1].fd);
                        else if (((struct m0_mconn *)p)->fd < 0)
                                continue; /* closed earlier in this batch */
                        else if (evs[i].events & EPOLLOUT)
                                write_out(m, p);
                        else
                                on_readable(h, p, fields);
                }
        }
        if (!fields)
                m0__log(M0_LOG_ERR, -1, NULL, "the metrics thread has no memory: no metrics");
        free(fields);
        m0__thread_forget();
        return NULL;
}

/* The thread's epoll set: the stop eventfd and every metrics listener. 0 or -errno. */
static int server_build(struct m0_host *h)
{
        struct m0_metrics_server *m = &h->metrics;
        m->nconns = h->cfg.metrics_max_connections;
        m->conns = calloc(m->nconns, sizeof(*m->conns));
        if (!m->conns)
                return -ENOMEM;
        for (size_t k = 0; k < m->nconns; k++)
                m->conns[k].fd = -1;
        m->epfd = epoll_create1(EPOLL_CLOEXEC);
        m->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (m->epfd < 0 || m->stop_fd < 0)
                return -errno;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &tag_stop};
        if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->stop_fd, &ev) < 0)
                return -errno;
        for (size_t i = 0; i < h->sockets.nmetrics; i++) {
                ev = (struct epoll_event){.events = EPOLLIN,
                                          .data.u64 = ((uint64_t)i << 1) | LISTENER_BIT};
                if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, h->sockets.metrics[i].fd, &ev) < 0)
                        return -errno;
        }
        return 0;
}

int m0__metrics_start(struct m0_host *h)
{
        struct m0_metrics_server *m = &h->metrics;
        m->epfd = m->stop_fd = -1;
        if (!h->sockets.nmetrics)
                return 0;
        m0__thread_init(&m->thread, M0__THREAD_METRICS, -1, -1, metrics_main, h);
        int r = server_build(h);
        if (r == 0)
                r = m0__thread_start(&m->thread);
        if (r < 0)
                m0__metrics_stop(h);
        return r;
}

void m0__metrics_stop(struct m0_host *h)
{
        struct m0_metrics_server *m = &h->metrics;
        if (m->thread.started) {
                uint64_t one = 1;
                ssize_t w = write(m->stop_fd, &one, sizeof(one));
                (void)w;
                struct timespec end = m0__deadline_after(1000);
                if (m0__thread_join_by(&m->thread, &end) < 0) {
                        /* It never blocks; should it still run, its memory stays with it. */
                        m0__log(M0_LOG_ERR, -1, NULL, "the metrics thread did not stop");
                        return;
                }
        }
        if (!m->conns)
                return; /* never built: no descriptor of its own to close */
        for (size_t k = 0; k < m->nconns; k++)
                mconn_close(m, &m->conns[k]);
        free(m->conns);
        m->conns = NULL;
        if (m->epfd >= 0)
                close(m->epfd);
        if (m->stop_fd >= 0)
                close(m->stop_fd);
        m->epfd = m->stop_fd = -1;
}
