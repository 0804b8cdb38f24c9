/* SPDX-License-Identifier: MIT */
/*
 * steady: the steady client of contrib/bench/restart-under-load (SPEC M4). K closed-loop
 * keep-alive connections each send `GET PATH` again as soon as the previous answer was read whole,
 * and reconnect after an answer with `Connection: close` or a close after a complete answer. It
 * counts by windows that the driver names on standard input, and writes JSON lines on standard
 * output: one per lost request and per refused connect as it happens, one per window as it ends.
 *
 *   steady --port N [--host A] [--conns K] [--path P] [--think-us U] [--connect-timeout-ms T]
 *
 * stdin: "mark LABEL" ends the current window and starts the next; "stop" (or end of file) ends
 * the last one and exits. Times are CLOCK_REALTIME seconds, so that the driver can set them beside
 * its own. A request is "lost" when it was written whole and its connection then closed or was
 * reset before a complete answer. A connection whose peer had already closed it before the next
 * request (seen with a peek just before the write) is not a loss: nothing was sent on it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum phase { WAITING, CONNECTING, READING };

struct conn {
        int slot, fd;
        enum phase phase;
        unsigned gen;      /* how many connections this slot has opened */
        unsigned nreq;     /* requests written on this connection */
        unsigned lport;    /* our port, which the driver maps to the process serving it */
        double sent_at;    /* when the request in flight was written */
        double next_at;    /* WAITING: when to go on */
        double connect_at; /* CONNECTING: when connect() was called */
        size_t have;
        char buf[4096];
};

struct window {
        char label[256];
        double t0;
        unsigned long long connects, refused, connect_errors, sent, answered, non200, lost,
                close_answers, closed_idle, send_failed;
        double max_wait; /* the longest time from a request to its whole answer */
};

static struct window win;
static const char *host = "127.0.0.1", *path = "/x/now";
static int port, nconns = 8;
static long think_us;
static double connect_timeout = 5.0;
static char req[512];
static size_t req_len;
static int ep;

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void json_label(const char *s)
{
        putchar('"');
        for (; *s; s++)
                if (*s == '"' || *s == '\\')
                        printf("\\%c", *s);
                else if ((unsigned char)*s >= 0x20)
                        putchar(*s);
        putchar('"');
}

static void window_end(double t1)
{
        printf("{\"type\":\"window\",\"label\":");
        json_label(win.label);
        printf(",\"t0\":%.6f,\"t1\":%.6f,\"connects\":%llu,\"refused\":%llu,\"connect_errors\":%"
               "llu,"
               "\"sent\":%llu,\"answered\":%llu,\"non200\":%llu,\"lost\":%llu,"
               "\"close_answers\":%llu,\"closed_idle\":%llu,\"send_failed\":%llu,"
               "\"max_wait_ms\":%.3f}\n",
               win.t0, t1, win.connects, win.refused, win.connect_errors, win.sent, win.answered,
               win.non200, win.lost, win.close_answers, win.closed_idle, win.send_failed,
               win.max_wait * 1e3);
        fflush(stdout);
}

static void window_start(const char *label, double t0)
{
        memset(&win, 0, sizeof(win));
        snprintf(win.label, sizeof(win.label), "%s", label);
        win.t0 = t0;
}

static void drop(struct conn *c, double retry_at)
{
        if (c->fd >= 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
        }
        c->fd = -1;
        c->phase = WAITING;
        c->next_at = retry_at;
        c->have = 0;
}

static void lost(struct conn *c, const char *why, int err)
{
        double t = now();
        win.lost++;
        printf("{\"type\":\"lost\",\"label\":");
        json_label(win.label);
        printf(",\"t\":%.6f,\"sent_at\":%.6f,\"slot\":%d,\"gen\":%u,\"lport\":%u,\"nreq\":%u,"
               "\"bytes_in\":%zu,\"why\":\"%s\",\"errno\":\"%s\"}\n",
               t, c->sent_at, c->slot, c->gen, c->lport, c->nreq, c->have, why,
               err ? strerrorname_np(err) : "");
        fflush(stdout);
        drop(c, t);
}

/* A connect that failed: refused (counted and written as it happens) or another error. */
static void connect_failed(struct conn *c, int err)
{
        if (err == ECONNREFUSED || err == ECONNRESET) {
                win.refused++;
                printf("{\"type\":\"refused\",\"label\":");
                json_label(win.label);
                printf(",\"t\":%.6f,\"errno\":\"%s\"}\n", now(), strerrorname_np(err));
                fflush(stdout);
        } else {
                win.connect_errors++;
        }
        drop(c, now() + 0.01); /* not at once: a refusing socket would be a spin */
}

static void start_connect(struct conn *c)
{
        c->gen++;
        c->nreq = 0;
        c->lport = 0;
        c->have = 0;
        win.connects++;
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->fd < 0) {
                perror("steady: socket");
                exit(1);
        }
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        inet_pton(AF_INET, host, &sa.sin_addr);
        c->connect_at = now();
        c->phase = CONNECTING;
        int r = connect(c->fd, (struct sockaddr *)&sa, sizeof(sa));
        struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
        if (r == 0 || errno == EINPROGRESS) {
                epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
                return;
        }
        connect_failed(c, errno);
}

/* Write the next request; on a reused connection, first make sure the peer has not closed it. */
static void send_request(struct conn *c)
{
        if (c->nreq > 0) {
                char b;
                ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
                if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                        win.closed_idle++;
                        drop(c, now());
                        return;
                }
        }
        ssize_t w = send(c->fd, req, req_len, MSG_NOSIGNAL);
        if (w != (ssize_t)req_len) {
                /* Nothing, or a part the server cannot take for a request: not sent. */
                win.send_failed++;
                drop(c, now());
                return;
        }
        c->nreq++;
        c->sent_at = now();
        c->have = 0;
        c->phase = READING;
        win.sent++;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void connected(struct conn *c)
{
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
                connect_failed(c, err);
                return;
        }
        struct sockaddr_in sa;
        socklen_t sl = sizeof(sa);
        if (getsockname(c->fd, (struct sockaddr *)&sa, &sl) == 0)
                c->lport = ntohs(sa.sin_port);
        send_request(c);
}

/* The answer so far is whole: returns its length, 0 while incomplete, -1 when malformed. */
static long parse(struct conn *c, int *status, bool *close_after)
{
        char *end = memmem(c->buf, c->have, "\r\n\r\n", 4);
        if (!end)
                return c->have >= sizeof(c->buf) ? -1 : 0;
        size_t head = (size_t)(end - c->buf) + 4;
        if (c->have < 12 || memcmp(c->buf, "HTTP/1.1 ", 9) != 0)
                return -1;
        *status = atoi(c->buf + 9);
        long clen = -1;
        *close_after = false;
        for (char *p = memchr(c->buf, '\n', head); p && p < end;) {
                char *line = p + 1;
                if (!strncasecmp(line, "content-length:", 15))
                        clen = strtol(line + 15, NULL, 10);
                else if (!strncasecmp(line, "connection:", 11)) {
                        char *v = line + 11;
                        while (*v == ' ')
                                v++;
                        if (!strncasecmp(v, "close", 5))
                                *close_after = true;
                }
                p = memchr(line, '\n', (size_t)(end + 2 - line));
        }
        if (clen < 0)
                return -1;
        size_t total = head + (size_t)clen;
        if (total > sizeof(c->buf))
                return -1;
        return c->have >= total ? (long)total : 0;
}

static void readable(struct conn *c)
{
        for (;;) {
                ssize_t n = read(c->fd, c->buf + c->have, sizeof(c->buf) - c->have);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return;
                if (n < 0) {
                        lost(c, c->have ? "reset-partial" : "reset", errno);
                        return;
                }
                if (n == 0) {
                        lost(c, c->have ? "eof-partial" : "eof", 0);
                        return;
                }
                c->have += (size_t)n;
                int status = 0;
                bool close_after = false;
                long whole = parse(c, &status, &close_after);
                if (whole < 0) {
                        lost(c, "malformed", 0);
                        return;
                }
                if (whole == 0)
                        continue;
                double t = now();
                if (t - c->sent_at > win.max_wait)
                        win.max_wait = t - c->sent_at;
                if (status == 200)
                        win.answered++;
                else
                        win.non200++;
                if ((size_t)whole != c->have) {
                        lost(c, "extra-bytes", 0);
                        return;
                }
                c->have = 0;
                if (close_after) {
                        win.close_answers++;
                        drop(c, t);
                        return;
                }
                if (think_us > 0) {
                        c->phase = WAITING;
                        c->next_at = t + (double)think_us / 1e6;
                        struct epoll_event ev = {.events = 0, .data.ptr = c};
                        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                        return;
                }
                send_request(c);
                return;
        }
}

/* A control line from the driver: returns false on "stop". */
static bool control(char *line)
{
        if (!strncmp(line, "mark ", 5)) {
                double t = now();
                window_end(t);
                window_start(line + 5, t);
                return true;
        }
        return strcmp(line, "stop") != 0;
}

static void usage(void)
{
        fprintf(stderr, "usage: steady --port N [--host A] [--conns K] [--path P] [--think-us U] "
                        "[--connect-timeout-ms T]\n");
        exit(2);
}

int main(int argc, char **argv)
{
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                if (!v)
                        usage();
                if (!strcmp(a, "--port"))
                        port = atoi(v);
                else if (!strcmp(a, "--host"))
                        host = v;
                else if (!strcmp(a, "--conns"))
                        nconns = atoi(v);
                else if (!strcmp(a, "--path"))
                        path = v;
                else if (!strcmp(a, "--think-us"))
                        think_us = atol(v);
                else if (!strcmp(a, "--connect-timeout-ms"))
                        connect_timeout = atof(v) / 1e3;
                else
                        usage();
                i++;
        }
        if (port <= 0 || port > 65535 || nconns <= 0 || nconns > 4096)
                usage();
        req_len = (size_t)snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: m0\r\n\r\n", path);
        ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event sev = {.events = EPOLLIN, .data.ptr = NULL};
        epoll_ctl(ep, EPOLL_CTL_ADD, STDIN_FILENO, &sev);
        struct conn *cs = calloc((size_t)nconns, sizeof(*cs));
        if (!cs)
                return 1;
        window_start("start", now());
        for (int i = 0; i < nconns; i++) {
                cs[i].slot = i;
                cs[i].fd = -1;
                start_connect(&cs[i]);
        }
        char line[256];
        size_t llen = 0;
        bool running = true;
        struct epoll_event evs[64];
        while (running) {
                double t = now(), next = t + 0.1;
                for (int i = 0; i < nconns; i++) {
                        struct conn *c = &cs[i];
                        if (c->phase == WAITING && c->next_at <= t) {
                                if (c->fd < 0)
                                        start_connect(c);
                                else
                                        send_request(c);
                        }
                        if (c->phase == CONNECTING && t - c->connect_at > connect_timeout) {
                                win.connect_errors++;
                                drop(c, t);
                        }
                        if (c->phase == WAITING && c->next_at < next)
                                next = c->next_at;
                }
                int timeout = (int)((next - now()) * 1e3);
                int n = epoll_wait(ep, evs, 64, timeout < 0 ? 0 : timeout);
                for (int i = 0; i < n; i++) {
                        struct conn *c = evs[i].data.ptr;
                        if (!c) {
                                ssize_t r =
                                        read(STDIN_FILENO, line + llen, sizeof(line) - 1 - llen);
                                if (r <= 0) {
                                        running = false;
                                        break;
                                }
                                llen += (size_t)r;
                                char *nl;
                                while (running && (nl = memchr(line, '\n', llen))) {
                                        *nl = '\0';
                                        running = control(line);
                                        llen -= (size_t)(nl + 1 - line);
                                        memmove(line, nl + 1, llen);
                                }
                                if (llen == sizeof(line) - 1)
                                        llen = 0; /* a line too long to be a command */
                                continue;
                        }
                        if (c->phase == CONNECTING)
                                connected(c);
                        else if (c->phase == WAITING && c->fd >= 0) {
                                win.closed_idle++; /* closed while we were thinking */
                                drop(c, now());
                        } else if (c->phase == READING)
                                readable(c);
                }
        }
        window_end(now());
        for (int i = 0; i < nconns; i++)
                if (cs[i].fd >= 0)
                        close(cs[i].fd);
        free(cs);
        return 0;
}
