/* SPDX-License-Identifier: MIT */
/*
 * wsload: many WebSocket (or event stream) connections from one thread, for bench M11 (SPEC WS7).
 *
 *   wsload fanout ws|sse HOST PORT PATH N EXPECT TIMEOUT_S
 *   wsload echo HOST PORT PATH N SECONDS SIZE
 *
 * Opens N connections to HOST:PORT (at most 256 connects in flight). "ws": each does RFC 6455's
 * opening handshake (101 or the connection fails), then reads frames: a text or binary
 * message's last frame counts one message, a ping is answered with a masked pong, a close ends
 * it. "sse": each sends one GET with Accept: text/event-stream (200 or it fails) and counts the
 * lines that start with "data:", one per event m0 and the peers send.
 * When every connection is open (or failed), prints "ready OPEN FAILED MS" on stdout.
 *
 * "fanout": prints "whole K" each time every connection has K messages, and reads until every
 * one has EXPECT, or TIMEOUT_S seconds after ready; then prints one JSON object (the messages in
 * all, the fewest and most on one connection, whether every connection got EXPECT, ms from
 * ready to the last message) and exits.
 * "echo": every open connection sends a masked binary message of SIZE bytes (8 to 2000) and
 * sends the next as soon as the whole echo is back, for SECONDS; prints one JSON object with the
 * echoes and the percentiles of their round trips, from the send to the echo's last byte read.
 * The JSON is printed before any connection is closed, so the server's CPU read when it comes
 * holds nothing of the closes.
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
#include <time.h>
#include <unistd.h>

enum { CONNECTING, HEAD, OPEN, CLOSED, FAILED };
enum { BUF = 2048 }; /* one frame of the server's, or the head of its 101 */

struct conn {
        int fd;
        int st;
        uint64_t msgs;
        uint64_t sent_ns; /* echo: when the message in flight was sent */
        unsigned lpos;    /* sse: position in the current line */
        char prefix[5];
        unsigned len; /* bytes in buf */
        unsigned char buf[BUF];
};

static struct conn *conns;
static int n_conns, ep, n_pending;
static bool sse, echo_mode;
static char request[1400];
static size_t request_len;
static struct sockaddr_in addr;
static unsigned char *echo_frame;
static size_t echo_frame_len, echo_size;
static uint64_t *rtt; /* echo: every round trip, ns */
static size_t n_rtt, cap_rtt;
static uint64_t last_msg_ns;

static uint64_t now_ns(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static bool is_pending(int st)
{
        return st == CONNECTING || st == HEAD;
}

static void set_state(struct conn *c, int st)
{
        n_pending += is_pending(st) - is_pending(c->st);
        c->st = st;
}

static void finish(struct conn *c, int st)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        set_state(c, st);
}

static int start_connect(struct conn *c)
{
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->fd < 0)
                return -errno;
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        set_state(c, CONNECTING);
        if (connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 && errno != EINPROGRESS) {
                finish(c, FAILED);
                return 0;
        }
        struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
        return 0;
}

/* A masked frame from the client (RFC 6455 5.3): the key is fixed, which the server cannot
 * tell from a random one. */
static size_t client_frame(unsigned char *out, int opcode, const unsigned char *p, size_t n)
{
        static const unsigned char key[4] = {0x37, 0xfa, 0x21, 0x3d};
        size_t h = 0;
        out[h++] = (unsigned char)(0x80 | opcode);
        if (n < 126) {
                out[h++] = (unsigned char)(0x80 | n);
        } else {
                out[h++] = 0x80 | 126;
                out[h++] = (unsigned char)(n >> 8);
                out[h++] = (unsigned char)n;
        }
        memcpy(out + h, key, 4);
        h += 4;
        for (size_t i = 0; i < n; i++)
                out[h + i] = p[i] ^ key[i % 4];
        return h + n;
}

static void send_echo(struct conn *c)
{
        c->sent_ns = now_ns();
        if (write(c->fd, echo_frame, echo_frame_len) != (ssize_t)echo_frame_len)
                finish(c, FAILED); /* 1,000 small frames never fill a socket's buffer */
}

static void on_message(struct conn *c)
{
        uint64_t t = now_ns();
        c->msgs++;
        last_msg_ns = t;
        if (!echo_mode)
                return;
        if (n_rtt == cap_rtt) {
                cap_rtt = cap_rtt ? cap_rtt * 2 : 1 << 16;
                uint64_t *r = realloc(rtt, cap_rtt * sizeof(*rtt));
                if (!r)
                        exit(1);
                rtt = r;
        }
        rtt[n_rtt++] = t - c->sent_ns;
        send_echo(c);
}

/* Whole frames at the front of c->buf: taken, and what follows moved to the front. */
static void ws_frames(struct conn *c)
{
        unsigned off = 0;
        while (c->len - off >= 2) {
                unsigned char *b = c->buf + off;
                uint64_t n = b[1] & 0x7f;
                unsigned h = 2;
                if (n == 126) {
                        if (c->len - off < 4)
                                break;
                        n = (uint64_t)b[2] << 8 | b[3];
                        h = 4;
                } else if (n == 127 || (b[1] & 0x80)) {
                        finish(c, FAILED); /* nothing here is that large; a server never masks */
                        return;
                }
                if (h + n > BUF) {
                        finish(c, FAILED);
                        return;
                }
                if (c->len - off < h + n)
                        break;
                int op = b[0] & 0x0f;
                if (op == 9) { /* ping: pong with its payload */
                        unsigned char pong[BUF + 8];
                        size_t k = client_frame(pong, 10, b + h, (size_t)n);
                        if (write(c->fd, pong, k) != (ssize_t)k) {
                                finish(c, FAILED);
                                return;
                        }
                } else if (op == 8) {
                        finish(c, CLOSED);
                        return;
                } else if (op <= 2 && (b[0] & 0x80)) {
                        on_message(c);
                        if (c->fd < 0)
                                return;
                }
                off += h + (unsigned)n;
        }
        memmove(c->buf, c->buf + off, c->len - off);
        c->len -= off;
}

static void sse_bytes(struct conn *c, const unsigned char *b, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (b[i] == '\n') {
                        c->lpos = 0;
                        continue;
                }
                if (c->lpos < 5) {
                        c->prefix[c->lpos] = (char)b[i];
                        if (c->lpos == 4 && memcmp(c->prefix, "data:", 5) == 0)
                                on_message(c);
                }
                c->lpos++;
        }
}

/* The head of the answer, then what came after it. */
static void on_data(struct conn *c, const unsigned char *b, size_t n)
{
        if (c->st == OPEN && sse) {
                sse_bytes(c, b, n);
                return;
        }
        while (n > 0 && c->fd >= 0) {
                size_t take = BUF - c->len < n ? BUF - c->len : n;
                if (take == 0) {
                        finish(c, FAILED);
                        return;
                }
                memcpy(c->buf + c->len, b, take);
                c->len += (unsigned)take;
                b += take;
                n -= take;
                if (c->st == HEAD) {
                        unsigned char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
                        if (!end)
                                continue;
                        int want = sse ? 200 : 101;
                        if (c->len < 12 || memcmp(c->buf, "HTTP/1.1 ", 9) != 0 ||
                            atoi((char *)c->buf + 9) != want) {
                                finish(c, FAILED);
                                return;
                        }
                        set_state(c, OPEN);
                        unsigned rest = c->len - (unsigned)(end + 4 - c->buf);
                        memmove(c->buf, end + 4, rest);
                        c->len = rest;
                        if (sse) {
                                unsigned char tmp[BUF];
                                memcpy(tmp, c->buf, rest);
                                c->len = 0;
                                sse_bytes(c, tmp, rest);
                                sse_bytes(c, b, n);
                                return;
                        }
                }
                ws_frames(c);
        }
}

static int usage(void)
{
        fprintf(stderr, "usage: wsload fanout ws|sse HOST PORT PATH N EXPECT TIMEOUT_S\n"
                        "       wsload echo HOST PORT PATH N SECONDS SIZE\n");
        return 2;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return (x > y) - (x < y);
}

/* The nearest rank, as bench.py's h2load_summary takes it: p in tenths of a per cent. */
static double pct_us(unsigned p)
{
        if (n_rtt == 0)
                return -1;
        size_t rank = (n_rtt * p + 999) / 1000;
        return (double)rtt[rank ? rank - 1 : 0] / 1e3;
}

static void report(double ready_ms, uint64_t ready_at, uint64_t expect)
{
        int open = 0, closed = 0, failed = 0, whole = 0;
        uint64_t msgs = 0, mmin = UINT64_MAX, mmax = 0;
        for (int i = 0; i < n_conns; i++) {
                struct conn *c = &conns[i];
                open += c->st == OPEN;
                closed += c->st == CLOSED;
                failed += c->st != OPEN && c->st != CLOSED;
                if (c->st != OPEN && c->st != CLOSED)
                        continue;
                msgs += c->msgs;
                whole += c->msgs >= expect;
                mmin = c->msgs < mmin ? c->msgs : mmin;
                mmax = c->msgs > mmax ? c->msgs : mmax;
        }
        double secs = (double)(now_ns() - ready_at) / 1e9;
        printf("{\"mode\":\"%s\",\"proto\":\"%s\",\"n\":%d,\"open\":%d,\"closed\":%d,"
               "\"failed\":%d,\"connect_ms\":%.1f,\"seconds\":%.3f,\"messages\":%" PRIu64
               ",\"messages_min\":%" PRIu64 ",\"messages_max\":%" PRIu64,
               echo_mode ? "echo" : "fanout", sse ? "sse" : "ws", n_conns, open, closed, failed,
               ready_ms, secs, msgs, mmin == UINT64_MAX ? 0 : mmin, mmax);
        if (echo_mode) {
                qsort(rtt, n_rtt, sizeof(*rtt), cmp_u64);
                printf(",\"size\":%zu,\"echoes\":%zu,\"p50_us\":%.1f,\"p90_us\":%.1f,"
                       "\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f}\n",
                       echo_size, n_rtt, pct_us(500), pct_us(900), pct_us(990), pct_us(999),
                       pct_us(1000));
        } else {
                printf(",\"expect\":%" PRIu64 ",\"connections_whole\":%d,\"every_message\":%s,"
                       "\"last_message_ms\":%.1f}\n",
                       expect, whole, whole == n_conns ? "true" : "false",
                       last_msg_ns > ready_at ? (double)(last_msg_ns - ready_at) / 1e6 : 0.0);
        }
        fflush(stdout);
}

/* Whether every connection has k messages; `from` remembers where the last call for the same k
 * stopped, since the connections before it had them. */
static bool all_have(uint64_t k)
{
        static uint64_t for_k;
        static int from;
        if (k != for_k)
                from = 0, for_k = k;
        while (from < n_conns && conns[from].st == OPEN && conns[from].msgs >= k)
                from++;
        return from == n_conns;
}

static int setup(char **argv)
{
        const char *host = argv[2], *path = argv[4];
        addr.sin_family = AF_INET;
        addr.sin_port = htons((unsigned short)atoi(argv[3]));
        if (inet_pton(AF_INET, host, &addr.sin_addr) != 1 || strlen(path) > 1000)
                return -EINVAL;
        n_conns = atoi(argv[5]);
        if (n_conns < 1)
                return -EINVAL;
        request_len = (size_t)snprintf(
                request, sizeof(request),
                sse ? "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n"
                    : "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                      "Sec-WebSocket-Version: 13\r\n\r\n",
                path, host);
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
        conns = calloc((size_t)n_conns, sizeof(*conns));
        ep = epoll_create1(EPOLL_CLOEXEC);
        if (!conns || ep < 0)
                return -ENOMEM;
        for (int i = 0; i < n_conns; i++) {
                conns[i].fd = -1;
                conns[i].st = -1; /* not started */
        }
        return 0;
}

/* One connection's turn: its connect done (the request goes), or bytes to read. */
static void on_event(struct conn *c)
{
        static unsigned char buf[65536];
        if (c->st == CONNECTING) {
                int err = 0;
                socklen_t el = sizeof(err);
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
                if (err || write(c->fd, request, request_len) != (ssize_t)request_len) {
                        finish(c, FAILED);
                        return;
                }
                set_state(c, HEAD);
                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                return;
        }
        ssize_t r = read(c->fd, buf, sizeof(buf));
        if (r > 0)
                on_data(c, buf, (size_t)r);
        else if (r == 0 || (errno != EAGAIN && errno != EINTR))
                finish(c, c->st == OPEN ? CLOSED : FAILED);
}

int main(int argc, char **argv)
{
        if (argc != 9 && argc != 8)
                return usage();
        uint64_t expect = 0;
        double run_s = 0;
        if (strcmp(argv[1], "fanout") == 0 && argc == 9) {
                if (strcmp(argv[2], "ws") != 0 && strcmp(argv[2], "sse") != 0)
                        return usage();
                sse = strcmp(argv[2], "sse") == 0;
                argv++; /* HOST is argv[2] from here, as in echo */
                expect = strtoull(argv[6], NULL, 10);
                run_s = atof(argv[7]);
        } else if (strcmp(argv[1], "echo") == 0 && argc == 8) {
                echo_mode = true;
                run_s = atof(argv[6]);
                echo_size = (size_t)atol(argv[7]);
                if (echo_size < 8 || echo_size > 2000)
                        return usage();
        } else {
                return usage();
        }
        if (setup(argv) < 0)
                return usage();
        if (echo_mode) {
                unsigned char *payload = calloc(1, echo_size);
                echo_frame = malloc(echo_size + 8);
                if (!payload || !echo_frame)
                        return 1;
                memset(payload, 'e', echo_size);
                echo_frame_len = client_frame(echo_frame, 2, payload, echo_size);
                free(payload);
        }

        struct epoll_event evs[512];
        uint64_t t0 = now_ns(), ready_at = 0, deadline = t0 + 120000000000ull;
        int next = 0;
        bool ready = false;
        uint64_t level = 0;
        for (;;) {
                while (!ready && next < n_conns && n_pending < 256) {
                        if (start_connect(&conns[next]) < 0) {
                                fprintf(stderr, "wsload: socket: %s (at connection %d)\n",
                                        strerror(errno), next);
                                for (int i = next; i < n_conns; i++)
                                        conns[i].st = FAILED;
                                next = n_conns;
                                break;
                        }
                        next++;
                }
                uint64_t t = now_ns();
                if (!ready && next >= n_conns && (n_pending == 0 || t > deadline)) {
                        int open = 0;
                        for (int i = 0; i < n_conns; i++)
                                open += conns[i].st == OPEN;
                        ready = true;
                        ready_at = t;
                        printf("ready %d %d %.0f\n", open, n_conns - open, (double)(t - t0) / 1e6);
                        fflush(stdout);
                        for (int i = 0; echo_mode && i < n_conns; i++)
                                if (conns[i].st == OPEN)
                                        send_echo(&conns[i]);
                }
                /* "whole K" once every connection has K messages: the driver publishes the next
                 * message when the last one reached every connection. */
                while (ready && !echo_mode && level < expect && all_have(level + 1)) {
                        printf("whole %" PRIu64 "\n", ++level);
                        fflush(stdout);
                }
                if (ready &&
                    (t >= ready_at + (uint64_t)(run_s * 1e9) || (!echo_mode && level == expect)))
                        break;
                int n = epoll_wait(ep, evs, 512, ready ? 10 : 100);
                if (n < 0 && errno != EINTR)
                        return 1;
                for (int i = 0; i < n; i++) {
                        struct conn *c = evs[i].data.ptr;
                        if (c->fd >= 0)
                                on_event(c);
                }
        }
        report((double)(ready_at - t0) / 1e6, ready_at, expect);
        return 0;
}
