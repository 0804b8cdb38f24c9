/* SPDX-License-Identifier: MIT */
/*
 * slowloris: a crowd of slow clients beside one normal client, for the bench part M8.
 *
 *   slowloris HOST PORT N DRIP_MS TIMEOUT_MS HOLD_S PATH EVERY_MS
 *
 * Opens N connections to HOST:PORT (at most 256 connects in flight). Each one sends a request
 * head one byte at a time, a byte every DRIP_MS from its first, and never ends it, so the
 * server's header timeout (TIMEOUT_MS, counted from the head's first byte) is what closes it.
 * Beside them, on a thread of its own, a normal client asks for PATH every EVERY_MS on a fresh
 * connection and times each answer, from its connect to the answer's last byte. The run ends
 * when every slow connection is closed or failed, or HOLD_S seconds after the start, whichever
 * comes first; then it prints one JSON object:
 *
 *   slow: opened, failed (connect refused or reset before a byte was sent), closed (by the
 *         server: an end of file or a reset), status408 (closed after a 408 answer), late
 *         (closed later than TIMEOUT_MS + 1000 ms after its first byte, or never), close_ms_min
 *         and close_ms_max (its first byte to its close), open (still open at the end);
 *   normal: n, failed (connect error, a status other than 200, or no whole answer within
 *         5 s), p50_us, p99_us, max_us, fifo (whether its thread ran SCHED_FIFO), and the five
 *         slowest as [at_ms, us, connect_us, first_byte_us, runq_us]: at_ms from the start;
 *         connect_us when connect() returned and first_byte_us when the answer's first byte
 *         arrived, both from the request's start (-1: never); runq_us how long the client's own
 *         thread waited for a CPU meanwhile (its schedstat; -1 when the kernel keeps none).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { CONNECTING, DRIPPING, CLOSED, FAILED };

struct conn {
        int fd;
        int st;
        int status; /* of an answer the server sent before closing, 0 when none */
        size_t sent;
        int64_t first_us, closed_us, due_us;
        int next; /* the drip queue: a FIFO, since every connection drips at the same rate */
};

static const char head[] = "GET / HTTP/1.1\r\nHost: slow\r\nX-Slow: ";
static struct conn *conns;
static int n_conns, ep, q_head = -1, q_tail = -1;
static struct sockaddr_in addr;
static int64_t t0_us;
static atomic_bool done;

static int64_t now_us(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static void q_push(int i, int64_t due)
{
        conns[i].due_us = due;
        conns[i].next = -1;
        if (q_tail >= 0)
                conns[q_tail].next = i;
        else
                q_head = i;
        q_tail = i;
}

static void q_pop(void)
{
        q_head = conns[q_head].next;
        if (q_head < 0)
                q_tail = -1;
}

static void end(struct conn *c, int st)
{
        (void)epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
        c->st = st;
        c->closed_us = now_us();
}

/* The next byte of the endless head; false when the connection failed or is gone. */
static bool drip(struct conn *c)
{
        char b = c->sent < sizeof(head) - 1 ? head[c->sent] : 'a';
        ssize_t w = send(c->fd, &b, 1, MSG_NOSIGNAL);
        if (w == 1) {
                if (c->sent++ == 0)
                        c->first_us = now_us();
                return true;
        }
        if (w < 0 && errno == EAGAIN)
                return true;
        end(c, c->sent ? CLOSED : FAILED);
        return false;
}

static void on_event(int i, uint32_t ev, int64_t drip_us)
{
        struct conn *c = &conns[i];
        if (c->st == CONNECTING) {
                int err = 0;
                socklen_t len = sizeof(err);
                (void)getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err) {
                        end(c, FAILED);
                        return;
                }
                c->st = DRIPPING;
                struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)i};
                (void)epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
                if (drip(c))
                        q_push(i, now_us() + drip_us);
                return;
        }
        if (c->st != DRIPPING || !(ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
                return;
        char buf[4096];
        for (;;) {
                ssize_t n = read(c->fd, buf, sizeof(buf));
                if (n > 0) {
                        if (!c->status && n >= 12 && memcmp(buf, "HTTP/1.", 7) == 0)
                                c->status = atoi(buf + 9);
                        continue;
                }
                if (n < 0 && errno == EAGAIN)
                        return;
                end(c, CLOSED); /* the end of file, or a reset: the server closed it */
                return;
        }
}

/* 1 when connecting, 0 when refused at once, -errno when this client cannot go on. */
static int start_connect(int i)
{
        struct conn *c = &conns[i];
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->fd < 0)
                return -errno;
        int one = 1;
        (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 && errno != EINPROGRESS) {
                close(c->fd);
                c->fd = -1;
                c->st = FAILED;
                return 0;
        }
        c->st = CONNECTING;
        struct epoll_event e = {.events = EPOLLOUT, .data.u32 = (uint32_t)i};
        return epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e) < 0 ? -errno : 1;
}

/* ---- the normal client, on a thread of its own so that the crowd does not delay it ---- */

struct normal {
        const char *path;
        int64_t every_us;
        int64_t *us, *at;
        struct parts *parts;
        size_t n, cap, failed;
        bool fifo;
};

/* This thread's time spent runnable but waiting for a CPU, in microseconds (schedstat's second
 * field), or -1 when the kernel does not say. */
static int64_t runq_wait_us(void)
{
        FILE *f = fopen("/proc/thread-self/schedstat", "r");
        unsigned long long run = 0, wait = 0;
        int k = f ? fscanf(f, "%llu %llu", &run, &wait) : 0;
        if (f)
                fclose(f);
        /* a kernel without schedstats prints zeros: a thread that has run has run > 0 */
        return k == 2 && run ? (int64_t)(wait / 1000) : -1;
}

/* Where one request's time went: its connect() returned (the handshake, done by the kernel),
 * its first answer byte arrived, and how long this thread waited for a CPU meanwhile. */
struct parts {
        int64_t connect_us, first_us, runq_us;
};

/* One request on a fresh connection: its time in microseconds, or -1 when it failed; the parts
 * it reached are filled in (the caller sets them -1). */
static int64_t one_request(const char *path, struct parts *pt)
{
        int64_t w0 = runq_wait_us();
        int64_t t = now_us();
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        struct timeval tv = {.tv_sec = 5};
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        char req[1200], buf[8192];
        int len = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: normal\r\n\r\n", path);
        size_t got = 0;
        int64_t r = -1;
        if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
                goto out;
        pt->connect_us = now_us() - t;
        if (send(fd, req, (size_t)len, MSG_NOSIGNAL) != len)
                goto out;
        for (;;) {
                ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
                if (n <= 0)
                        goto out;
                if (!got)
                        pt->first_us = now_us() - t;
                got += (size_t)n;
                buf[got] = 0;
                char *eoh = strstr(buf, "\r\n\r\n");
                if (!eoh)
                        continue;
                if (strncmp(buf, "HTTP/1.1 200", 12) != 0)
                        goto out;
                char *cl = strcasestr(buf, "\r\ncontent-length:");
                if (!cl || cl > eoh)
                        goto out;
                size_t want = (size_t)(eoh + 4 - buf) + strtoul(cl + 17, NULL, 10);
                if (got >= want) {
                        r = now_us() - t;
                        goto out;
                }
        }
out:
        close(fd);
        int64_t w1 = runq_wait_us();
        pt->runq_us = w0 >= 0 && w1 >= 0 ? w1 - w0 : -1;
        return r;
}

static void *normal_main(void *arg)
{
        struct normal *nc = arg;
        /* The probe runs first when it wakes (SCHED_FIFO, where this process may ask for it), so
         * that what it times is the server, not the crowd's own thread holding its CPU. */
        struct sched_param sp = {.sched_priority = 1};
        nc->fifo = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
        int64_t next = now_us();
        while (!atomic_load(&done)) {
                int64_t wait = next - now_us();
                if (wait > 0) {
                        struct timespec ts = {wait / 1000000, (wait % 1000000) * 1000};
                        nanosleep(&ts, NULL);
                        continue;
                }
                next += nc->every_us;
                int64_t at = now_us() - t0_us;
                struct parts pt = {-1, -1, -1};
                int64_t us = one_request(nc->path, &pt);
                if (us < 0) {
                        nc->failed++;
                        continue;
                }
                if (nc->n == nc->cap) {
                        nc->cap = nc->cap ? 2 * nc->cap : 1024;
                        nc->us = realloc(nc->us, nc->cap * sizeof(*nc->us));
                        nc->at = realloc(nc->at, nc->cap * sizeof(*nc->at));
                        nc->parts = realloc(nc->parts, nc->cap * sizeof(*nc->parts));
                        if (!nc->us || !nc->at || !nc->parts)
                                abort();
                }
                nc->parts[nc->n] = pt;
                nc->us[nc->n] = us;
                nc->at[nc->n++] = at;
        }
        return NULL;
}

static int cmp64(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return x < y ? -1 : x > y;
}

static void report(const struct normal *nc, int64_t timeout_us)
{
        int opened = 0, failed = 0, closed = 0, s408 = 0, late = 0, open = 0;
        int64_t cmin = -1, cmax = -1;
        for (int i = 0; i < n_conns; i++) {
                struct conn *c = &conns[i];
                if (c->st == FAILED) {
                        failed++;
                        continue;
                }
                opened++;
                if (c->st != CLOSED) {
                        open++;
                        late++;
                        continue;
                }
                closed++;
                s408 += c->status == 408;
                int64_t took = c->closed_us - c->first_us;
                late += took > timeout_us + 1000000;
                cmin = cmin < 0 || took < cmin ? took : cmin;
                cmax = took > cmax ? took : cmax;
        }
        printf("{\"t0_us\":%lld,\"slow\":{\"n\":%d,\"opened\":%d,\"failed\":%d,\"closed\":%d,"
               "\"status408\":%d,"
               "\"late\":%d,\"open\":%d,\"close_ms_min\":%.1f,\"close_ms_max\":%.1f},",
               (long long)t0_us, n_conns, opened, failed, closed, s408, late, open, cmin / 1000.0,
               cmax / 1000.0);
        int64_t *sorted = malloc((nc->n ? nc->n : 1) * sizeof(*sorted));
        size_t *order = malloc((nc->n ? nc->n : 1) * sizeof(*order));
        if (!sorted || !order)
                abort();
        memcpy(sorted, nc->us, nc->n * sizeof(*sorted));
        qsort(sorted, nc->n, sizeof(*sorted), cmp64);
        size_t n = nc->n;
        int64_t p50 = n ? sorted[(n - 1) / 2] : 0, p99 = n ? sorted[(n * 99 + 99) / 100 - 1] : 0;
        printf("\"normal\":{\"n\":%zu,\"failed\":%zu,\"p50_us\":%lld,\"p99_us\":%lld,"
               "\"max_us\":%lld,\"fifo\":%s,\"slowest\":[",
               n, nc->failed, (long long)p50, (long long)p99, (long long)(n ? sorted[n - 1] : 0),
               nc->fifo ? "true" : "false");
        /* the five slowest, with when they were asked, to set beside the server's batches */
        for (size_t k = 0; k < 5 && k < n; k++) {
                size_t best = 0;
                bool found = false;
                for (size_t i = 0; i < n; i++) {
                        bool taken = false;
                        for (size_t j = 0; j < k; j++)
                                taken |= order[j] == i;
                        if (!taken && (!found || nc->us[i] > nc->us[best])) {
                                best = i;
                                found = true;
                        }
                }
                order[k] = best;
                const struct parts *pt = &nc->parts[best];
                printf("%s[%lld,%lld,%lld,%lld,%lld]", k ? "," : "",
                       (long long)(nc->at[best] / 1000), (long long)nc->us[best],
                       (long long)pt->connect_us, (long long)pt->first_us, (long long)pt->runq_us);
        }
        printf("]}}\n");
        free(sorted);
        free(order);
}

int main(int argc, char **argv)
{
        if (argc != 9) {
                fprintf(stderr, "usage: slowloris HOST PORT N DRIP_MS TIMEOUT_MS HOLD_S PATH "
                                "EVERY_MS\n");
                return 2;
        }
        addr.sin_family = AF_INET;
        addr.sin_port = htons((unsigned short)atoi(argv[2]));
        if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
                fprintf(stderr, "slowloris: %s is no IPv4 address\n", argv[1]);
                return 2;
        }
        n_conns = atoi(argv[3]);
        int64_t drip_us = atoll(argv[4]) * 1000, timeout_us = atoll(argv[5]) * 1000;
        int64_t hold_us = (int64_t)(atof(argv[6]) * 1e6);
        struct normal nc = {.path = argv[7], .every_us = atoll(argv[8]) * 1000};
        if (n_conns < 1 || drip_us < 1000 || nc.every_us < 1000 || hold_us < 1) {
                fprintf(stderr, "slowloris: N, DRIP_MS, EVERY_MS and HOLD_S must be positive\n");
                return 2;
        }
        conns = calloc((size_t)n_conns, sizeof(*conns));
        ep = epoll_create1(EPOLL_CLOEXEC);
        if (!conns || ep < 0)
                return 1;
        t0_us = now_us();
        pthread_t th;
        if (pthread_create(&th, NULL, normal_main, &nc) != 0)
                return 1;
        int started = 0, live = 0;
        struct epoll_event evs[256];
        while (now_us() - t0_us < hold_us) {
                while (started < n_conns && live < 256) {
                        int r = start_connect(started++);
                        if (r < 0)
                                return 1;
                        live += r;
                }
                int64_t now = now_us(), wait = 100000;
                while (q_head >= 0 && conns[q_head].due_us <= now) {
                        int i = q_head;
                        q_pop();
                        if (conns[i].st == DRIPPING && drip(&conns[i]))
                                q_push(i, now + drip_us);
                }
                if (q_head >= 0)
                        wait = conns[q_head].due_us - now;
                int n = epoll_wait(ep, evs, 256, (int)((wait + 999) / 1000));
                for (int k = 0; k < n; k++) {
                        int i = (int)evs[k].data.u32;
                        bool was_connecting = conns[i].st == CONNECTING;
                        on_event(i, evs[k].events, drip_us);
                        if (was_connecting)
                                live--;
                }
                int gone = 0;
                for (int i = 0; i < started; i++)
                        gone += conns[i].st == CLOSED || conns[i].st == FAILED;
                if (started == n_conns && gone == n_conns)
                        break;
        }
        atomic_store(&done, true);
        pthread_join(th, NULL);
        report(&nc, timeout_us);
        return 0;
}
