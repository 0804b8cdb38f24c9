/* SPDX-License-Identifier: MIT */
/*
 * paced: publish-to-frame latency through hosts that share a bus, from one thread of C (SPEC G8,
 * M6).
 *
 *   paced CHANNEL RATE SECONDS PORT...
 *
 * Opens one stream GET /follow?channels=CHANNEL on every 127.0.0.1:PORT and, once every stream's
 * head is in, sends RATE POST /publish?channel=CHANNEL&n=1&event=t<ns> a second to every port for
 * SECONDS seconds, on keep-alive connections (a new one only when every open one is waiting for
 * its answer, up to 128 a port; past that the send waits for an answer, and is late). <ns> is CLOCK_MONOTONIC when the request is written; a frame's latency is
 * CLOCK_MONOTONIC when the read that brought its event line returned, minus it. It waits until
 * every stream has every host's events (or 60 s past the last publish), then prints one JSON
 * object: the events published, the frames each stream got, p50/p99/max of the latencies over
 * every stream's frames, how late the worst send was against its schedule, the answers that were
 * not 200, and its own CPU time. Exit 0 when every stream got every event once, else 1.
 *
 * It replaces Python threads that shared the GIL and the machine's two CPUs with the hosts and
 * PostgreSQL being measured (D120).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

enum { MAX_HOSTS = 16, MAX_POSTERS = 128, LINE = 512 };

struct poster {
        int fd;
        bool busy;
        char in[4096];
        size_t in_len;
};

struct stream {
        int fd;
        bool head; /* the head's blank line was read */
        uint64_t frames, matched;
        char line[LINE];
        size_t len;
};

struct host {
        int port;
        struct stream st;
        struct poster p[MAX_POSTERS];
        int np;
        uint64_t sent, reconnects; /* reconnects: after an answer with Connection: close */
};

static struct host hosts[MAX_HOSTS];
static int nhosts, ep, tfd;
static char timer_tag;
static const char *channel;
static uint32_t *lat_us;
static size_t nlat, cap_lat;
static uint64_t not_ok, worst_late_us;

static uint64_t now_ns(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void die(const char *what)
{
        fprintf(stderr, "paced: %s: %s\n", what, strerror(errno));
        exit(2);
}

static int connect_to(int port, void *ptr)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                die("socket");
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
                die("connect");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ptr};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
                die("epoll_ctl");
        return fd;
}

static void write_all(int fd, const char *s, size_t n)
{
        while (n) {
                ssize_t w = write(fd, s, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        die("write");
                s += w;
                n -= (size_t)w;
        }
}

/* A connection of `h` with no request under way, or NULL when MAX_POSTERS are all waiting. */
static struct poster *idle_poster(struct host *h)
{
        for (int i = 0; i < h->np; i++)
                if (!h->p[i].busy && h->p[i].fd >= 0)
                        return &h->p[i];
        for (int i = 0; i < h->np; i++)
                if (h->p[i].fd < 0) {
                        h->p[i].fd = connect_to(h->port, &h->p[i]);
                        h->reconnects++;
                        return &h->p[i];
                }
        if (h->np == MAX_POSTERS)
                return NULL;
        struct poster *p = &h->p[h->np++];
        p->fd = connect_to(h->port, p);
        return p;
}

/* The event's time is taken here, so a send later than its schedule (every connection waiting
 * for its answer) is not counted against the bus; worst_late_us says how late it was. */
static void publish(struct host *h, struct poster *p, uint64_t due)
{
        char req[256];
        uint64_t t = now_ns();
        int n = snprintf(req, sizeof(req),
                         "POST /publish?channel=%s&n=1&event=t%" PRIu64
                         " HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n",
                         channel, t);
        write_all(p->fd, req, (size_t)n);
        p->busy = true;
        h->sent++;
        if (t > due && (t - due) / 1000 > worst_late_us)
                worst_late_us = (t - due) / 1000;
}

/* An answer of host_check's /publish: a head with Content-Length, and that many bytes. */
static void poster_read(struct poster *p)
{
        ssize_t r = read(p->fd, p->in + p->in_len, sizeof(p->in) - p->in_len);
        if (r <= 0) {
                fprintf(stderr, "paced: a publishing connection closed\n");
                exit(2);
        }
        p->in_len += (size_t)r;
        for (;;) {
                char *end = memmem(p->in, p->in_len, "\r\n\r\n", 4);
                if (!end)
                        return;
                size_t head = (size_t)(end - p->in) + 4;
                char *cl = memmem(p->in, head, "Content-Length: ", 16);
                size_t body = cl ? strtoul(cl + 16, NULL, 10) : 0;
                if (p->in_len < head + body)
                        return;
                if (strncmp(p->in, "HTTP/1.1 200 ", 13))
                        not_ok++;
                p->busy = false;
                if (memmem(p->in, head, "\r\nConnection: close\r\n", 21)) {
                        /* the host's --max-keepalive-requests: the next request opens it again */
                        close(p->fd);
                        p->fd = -1;
                        p->in_len = 0;
                        return;
                }
                memmove(p->in, p->in + head + body, p->in_len - head - body);
                p->in_len -= head + body;
        }
}

static void stream_line(struct stream *s, const char *line, uint64_t at)
{
        if (!s->head) {
                if (!*line)
                        s->head = true;
                return;
        }
        if (!strncmp(line, "data:", 5))
                s->frames++;
        else if (!strncmp(line, "event: t", 8)) {
                uint64_t t = strtoull(line + 8, NULL, 10);
                s->matched++;
                if (nlat == cap_lat) {
                        cap_lat = cap_lat ? cap_lat * 2 : 65536;
                        lat_us = realloc(lat_us, cap_lat * sizeof(*lat_us));
                        if (!lat_us)
                                die("realloc");
                }
                lat_us[nlat++] = (uint32_t)((at - t) / 1000);
        }
}

static void stream_read(struct stream *s)
{
        char buf[65536];
        ssize_t r = read(s->fd, buf, sizeof(buf));
        uint64_t at = now_ns();
        if (r <= 0) {
                fprintf(stderr, "paced: a stream closed\n");
                exit(2);
        }
        for (ssize_t i = 0; i < r; i++) {
                char c = buf[i];
                if (c == '\r')
                        continue;
                if (c != '\n') {
                        if (s->len < LINE - 1)
                                s->line[s->len++] = c;
                        continue;
                }
                s->line[s->len] = '\0';
                stream_line(s, s->line, at);
                s->len = 0;
        }
}

static void dispatch(int timeout_ms)
{
        struct epoll_event evs[64];
        int n = epoll_wait(ep, evs, 64, timeout_ms);
        if (n < 0 && errno != EINTR)
                die("epoll_wait");
        for (int i = 0; i < n; i++) {
                void *ptr = evs[i].data.ptr;
                if (ptr == &timer_tag) {
                        uint64_t x;
                        if (read(tfd, &x, sizeof(x)) < 0 && errno != EAGAIN)
                                die("read timerfd");
                        continue;
                }
                bool is_stream = false;
                for (int h = 0; h < nhosts; h++)
                        if (ptr == &hosts[h].st)
                                is_stream = true;
                if (is_stream)
                        stream_read(ptr);
                else
                        poster_read(ptr);
        }
}

static int cmp_u32(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
        return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
        if (argc < 5 || argc - 4 > MAX_HOSTS) {
                fprintf(stderr, "usage: paced CHANNEL RATE SECONDS PORT... (1-%d ports)\n",
                        MAX_HOSTS);
                return 2;
        }
        channel = argv[1];
        long rate = strtol(argv[2], NULL, 10), seconds = strtol(argv[3], NULL, 10);
        if (rate <= 0 || seconds <= 0) {
                fprintf(stderr, "paced: RATE and SECONDS are positive integers\n");
                return 2;
        }
        ep = epoll_create1(EPOLL_CLOEXEC);
        if (ep < 0)
                die("epoll_create1");
        tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        struct epoll_event tev = {.events = EPOLLIN, .data.ptr = &timer_tag};
        if (tfd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &tev) < 0)
                die("timerfd");
        nhosts = argc - 4;
        char req[300];
        int rn = snprintf(req, sizeof(req), "GET /follow?channels=%s HTTP/1.1\r\nHost: b\r\n\r\n",
                          channel);
        for (int i = 0; i < nhosts; i++) {
                hosts[i].port = atoi(argv[4 + i]);
                hosts[i].st.fd = connect_to(hosts[i].port, &hosts[i].st);
                write_all(hosts[i].st.fd, req, (size_t)rn);
        }
        for (bool all = false; !all;) {
                dispatch(1000);
                all = true;
                for (int i = 0; i < nhosts; i++)
                        all = all && hosts[i].st.head;
        }

        /* Every host's sends are spread over the period, host i offset by i/nhosts of it. */
        uint64_t period = 1000000000u / (uint64_t)rate, per_host = (uint64_t)(rate * seconds);
        uint64_t t0 = now_ns() + 10000000u, total = per_host * (uint64_t)nhosts;
        struct rusage ru0;
        getrusage(RUSAGE_SELF, &ru0);
        for (uint64_t k = 0; k < per_host;) {
                uint64_t now = now_ns(), next = UINT64_MAX;
                bool all = true;
                for (int i = 0; i < nhosts; i++) {
                        if (hosts[i].sent > k)
                                continue;
                        uint64_t due = t0 + k * period + period * (uint64_t)i / (uint64_t)nhosts;
                        struct poster *p = now >= due ? idle_poster(&hosts[i]) : NULL;
                        if (p)
                                publish(&hosts[i], p, due);
                        else if (now < due && due < next)
                                next = due; /* else it waits for an answer */
                        all = all && hosts[i].sent > k;
                }
                if (all) {
                        k++;
                        continue;
                }
                if (next != UINT64_MAX) {
                        struct itimerspec its = {
                                .it_value = {.tv_sec = (time_t)(next / 1000000000u),
                                             .tv_nsec = (long)(next % 1000000000u)}};
                        if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
                                die("timerfd_settime");
                }
                dispatch(-1);
        }
        uint64_t end = now_ns() + 60000000000u;
        for (;;) {
                bool all = true;
                for (int i = 0; i < nhosts; i++)
                        all = all && hosts[i].st.frames >= total;
                for (int i = 0; i < nhosts; i++)
                        for (int j = 0; j < hosts[i].np; j++)
                                all = all && !hosts[i].p[j].busy;
                if (all || now_ns() > end)
                        break;
                dispatch(100);
        }
        dispatch(200); /* a frame more than expected would be read here */
        struct rusage ru1;
        getrusage(RUSAGE_SELF, &ru1);
        double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec -
                              ru0.ru_stime.tv_sec) +
                     (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec -
                              ru0.ru_stime.tv_usec) /
                             1e6;
        qsort(lat_us, nlat, sizeof(*lat_us), cmp_u32);
        bool ok = not_ok == 0 && nlat == total * (uint64_t)nhosts;
        printf("{\"published\":%" PRIu64 ",\"frames\":[", total);
        for (int i = 0; i < nhosts; i++) {
                printf("%s%" PRIu64, i ? "," : "", hosts[i].st.frames);
                ok = ok && hosts[i].st.frames == total && hosts[i].st.matched == total;
        }
        printf("],\"p50_us\":%u,\"p99_us\":%u,\"max_us\":%u,\"worst_late_us\":%" PRIu64
               ",\"not_200\":%" PRIu64 ",\"connections\":[",
               nlat ? lat_us[nlat / 2] : 0, nlat ? lat_us[nlat * 99 / 100] : 0,
               nlat ? lat_us[nlat - 1] : 0, worst_late_us, not_ok);
        for (int i = 0; i < nhosts; i++)
                printf("%s%d", i ? "," : "", hosts[i].np + (int)hosts[i].reconnects);
        printf("],\"cpu_s\":%.3f}\n", cpu);
        return ok ? 0 : 1;
}
