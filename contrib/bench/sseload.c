/* SPDX-License-Identifier: MIT */
/*
 * sseload: many idle-ish connections from one process, for SPEC M2 and M3.
 *
 *   sseload stream    HOST PORT PATH N HOLD_S [EVENT]
 *   sseload keepalive HOST PORT PATH N HOLD_S
 *
 * Opens N connections to HOST:PORT (at most 256 connects in flight) and sends one GET PATH on
 * each. "stream": each one reads a server-sent event stream, and counts its frames (those of
 * type EVENT, or every frame without it) and checks that the ids of every frame it sees are
 * contiguous. "keepalive": each one reads one whole response (Content-Length), then stays
 * open and idle. When every connection is open (or failed), it prints one line
 * "ready OPEN FAILED MS" on stdout, holds HOLD_S seconds, then prints one JSON object and exits.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { CONNECTING, HEAD, BODY, OPEN, CLOSED, FAILED };

struct conn {
        int fd;
        int st;
        int status; /* HTTP status of the head */
        uint64_t first_id, last_id, frames, gaps, dups;
        uint64_t frame_id; /* id line of the frame being read */
        bool frame_has_id, frame_match, seen_id;
        long body_left;
        unsigned short len; /* bytes in line */
        char line[1024];
};

static struct conn *conns;
static int n_conns, ep;
static bool stream_mode;
static const char *event_filter;
static char request[1200];
static size_t request_len;
static struct sockaddr_in addr;

static double now_s(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int n_pending; /* connections not yet OPEN, CLOSED or FAILED */

static bool is_pending(int st)
{
        return st == CONNECTING || st == HEAD || st == BODY;
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
        set_state(c, CONNECTING);
        if (connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 && errno != EINPROGRESS) {
                finish(c, FAILED);
                return 0;
        }
        struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
        return 0;
}

/* A whole head is in c->line: take the status and Content-Length. */
static void parse_head(struct conn *c)
{
        c->status = 0;
        if (c->len > 12 && strncmp(c->line, "HTTP/1.", 7) == 0)
                c->status = atoi(c->line + 9);
        c->body_left = 0;
        for (char *p = c->line; (p = strchr(p, '\n')); p++)
                if (strncasecmp(p + 1, "content-length:", 15) == 0)
                        c->body_left = strtol(p + 16, NULL, 10);
}

static void stream_line(struct conn *c)
{
        char *l = c->line;
        size_t n = c->len;
        if (n == 0) { /* the frame ends */
                if (c->frame_has_id) {
                        uint64_t id = c->frame_id;
                        if (!c->seen_id) {
                                c->first_id = c->last_id = id;
                                c->seen_id = true;
                        } else if (id <= c->last_id) {
                                c->dups++;
                        } else {
                                c->gaps += id - c->last_id - 1;
                                c->last_id = id;
                        }
                        if (c->frame_match)
                                c->frames++;
                }
                c->frame_has_id = false;
                c->frame_match = event_filter == NULL;
                return;
        }
        if (n > 4 && strncmp(l, "id: ", 4) == 0) {
                c->frame_id = strtoull(l + 4, NULL, 10);
                c->frame_has_id = true;
        } else if (n > 7 && strncmp(l, "event: ", 7) == 0 && event_filter) {
                c->frame_match = strcmp(l + 7, event_filter) == 0;
        }
}

static void on_data(struct conn *c, const char *b, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                char ch = b[i];
                if (c->st == HEAD) {
                        if (c->len < sizeof(c->line) - 1)
                                c->line[c->len++] = ch;
                        c->line[c->len] = 0;
                        if (c->len >= 4 && memcmp(c->line + c->len - 4, "\r\n\r\n", 4) == 0) {
                                parse_head(c);
                                c->len = 0;
                                if (c->status != 200) {
                                        finish(c, FAILED);
                                        return;
                                }
                                if (stream_mode) {
                                        set_state(c, OPEN);
                                        c->frame_match = event_filter == NULL;
                                } else {
                                        set_state(c, c->body_left > 0 ? BODY : OPEN);
                                }
                        }
                } else if (c->st == BODY) {
                        size_t take = n - i;
                        if ((long)take > c->body_left)
                                take = (size_t)c->body_left;
                        c->body_left -= (long)take;
                        i += take - 1;
                        if (c->body_left == 0)
                                set_state(c, OPEN);
                } else if (stream_mode) {
                        if (ch == '\r')
                                continue;
                        if (ch == '\n') {
                                c->line[c->len] = 0;
                                stream_line(c);
                                c->len = 0;
                        } else if (c->len < sizeof(c->line) - 1) {
                                c->line[c->len++] = ch;
                        }
                }
                /* keepalive mode: bytes after the response are ignored */
        }
}

int main(int argc, char **argv)
{
        if (argc < 7 || argc > 8 ||
            (strcmp(argv[1], "stream") != 0 && strcmp(argv[1], "keepalive") != 0)) {
                fprintf(stderr,
                        "usage: sseload stream|keepalive HOST PORT PATH N HOLD_S [EVENT]\n");
                return 2;
        }
        stream_mode = strcmp(argv[1], "stream") == 0;
        const char *host = argv[2], *path = argv[4];
        addr.sin_family = AF_INET;
        addr.sin_port = htons((unsigned short)atoi(argv[3]));
        if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
                fprintf(stderr, "sseload: HOST must be an IPv4 address\n");
                return 2;
        }
        n_conns = atoi(argv[5]);
        double hold = atof(argv[6]);
        event_filter = argc > 7 ? argv[7] : NULL;
        if (n_conns < 1 || strlen(path) > 1000)
                return 2;
        request_len =
                (size_t)snprintf(request, sizeof(request), "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n",
                                 path, host, stream_mode ? "Accept: text/event-stream\r\n" : "");

        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
        conns = calloc((size_t)n_conns, sizeof(*conns));
        ep = epoll_create1(EPOLL_CLOEXEC);
        if (!conns || ep < 0)
                return 1;
        for (int i = 0; i < n_conns; i++) {
                conns[i].fd = -1;
                conns[i].st = -1; /* not started */
        }

        static char buf[65536];
        struct epoll_event evs[512];
        double t0 = now_s(), ready_at = 0, deadline = t0 + 120;
        int next = 0, inflight = 0, closed_in_hold = 0;
        bool ready = false;
        for (;;) {
                while (!ready && next < n_conns && inflight < 256) {
                        if (start_connect(&conns[next]) < 0) {
                                fprintf(stderr, "sseload: socket: %s (at connection %d)\n",
                                        strerror(errno), next);
                                for (int i = next; i < n_conns; i++)
                                        conns[i].st = FAILED;
                                next = n_conns;
                                break;
                        }
                        if (conns[next].st == CONNECTING)
                                inflight++;
                        next++;
                }
                double t = now_s();
                if (!ready && next >= n_conns && (n_pending == 0 || t > deadline)) {
                        int open = 0, failed = 0;
                        for (int i = 0; i < n_conns; i++)
                                open += conns[i].st == OPEN;
                        failed = n_conns - open;
                        ready = true;
                        ready_at = t;
                        printf("ready %d %d %.0f\n", open, failed, (t - t0) * 1000);
                        fflush(stdout);
                }
                if (ready && t >= ready_at + hold)
                        break;
                int timeout = ready ? (int)((ready_at + hold - t) * 1000) + 1 : 100;
                int n = epoll_wait(ep, evs, 512, timeout);
                if (n < 0 && errno != EINTR)
                        return 1;
                for (int i = 0; i < n; i++) {
                        struct conn *c = evs[i].data.ptr;
                        if (c->fd < 0)
                                continue;
                        if (c->st == CONNECTING) {
                                int err = 0;
                                socklen_t el = sizeof(err);
                                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
                                inflight--;
                                if (err ||
                                    write(c->fd, request, request_len) != (ssize_t)request_len) {
                                        finish(c, FAILED);
                                        continue;
                                }
                                set_state(c, HEAD);
                                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                                continue;
                        }
                        ssize_t r = read(c->fd, buf, sizeof(buf));
                        if (r > 0) {
                                on_data(c, buf, (size_t)r);
                        } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                                if (c->st == OPEN && ready)
                                        closed_in_hold++;
                                finish(c, c->st == OPEN ? CLOSED : FAILED);
                        }
                }
        }

        int open = 0, closed = 0, failed = 0, with_gaps = 0, with_frames = 0;
        uint64_t frames = 0, gaps = 0, dups = 0, fmin = UINT64_MAX, fmax = 0;
        uint64_t first_max = 0, last_min = UINT64_MAX;
        for (int i = 0; i < n_conns; i++) {
                struct conn *c = &conns[i];
                open += c->st == OPEN;
                closed += c->st == CLOSED;
                failed += c->st == FAILED || c->st == CONNECTING || c->st == HEAD || c->st == BODY;
                if (c->st != OPEN && c->st != CLOSED)
                        continue;
                frames += c->frames;
                gaps += c->gaps;
                dups += c->dups;
                with_gaps += c->gaps > 0 || c->dups > 0;
                if (c->frames < fmin)
                        fmin = c->frames;
                if (c->frames > fmax)
                        fmax = c->frames;
                if (c->seen_id) {
                        with_frames++;
                        if (c->first_id > first_max)
                                first_max = c->first_id;
                        if (c->last_id < last_min)
                                last_min = c->last_id;
                }
        }
        if (fmin == UINT64_MAX)
                fmin = 0;
        if (last_min == UINT64_MAX)
                last_min = 0;
        printf("{\"mode\":\"%s\",\"n\":%d,\"open\":%d,\"closed\":%d,\"closed_in_hold\":%d,"
               "\"failed\":%d,\"hold_s\":%.3f,\"connect_ms\":%.1f,"
               "\"frames\":%" PRIu64 ",\"frames_min\":%" PRIu64 ",\"frames_max\":%" PRIu64
               ",\"gaps\":%" PRIu64 ",\"dups\":%" PRIu64 ",\"clients_with_gaps\":%d,"
               "\"clients_with_frames\":%d,\"first_id_max\":%" PRIu64 ",\"last_id_min\":%" PRIu64
               ",\"first_id\":%" PRIu64 ",\"last_id\":%" PRIu64 "}\n",
               stream_mode ? "stream" : "keepalive", n_conns, open, closed, closed_in_hold, failed,
               now_s() - ready_at, (ready_at - t0) * 1000, frames, fmin, fmax, gaps, dups,
               with_gaps, with_frames, first_max, last_min, n_conns ? conns[0].first_id : 0,
               n_conns ? conns[0].last_id : 0);
        return 0;
}
