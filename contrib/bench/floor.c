/* SPDX-License-Identifier: MIT */
/*
 * floor: the ceiling of the benchmarks (SPEC M1). It parses nothing: every read() that returns
 * data is answered with one canned HTTP/1.1 200 carrying the same body as ramp's /x/now. No
 * HTTP server can do less work per request over the same socket calls, so its CPU per request
 * is the floor the others are compared to.
 *
 *   floor [OPTIONS] PORT [THREADS]
 *                            listens on 127.0.0.1:PORT; THREADS loops (default 1), each with
 *                            its own SO_REUSEPORT listener and epoll set. SIGTERM ends it.
 *
 * The options make the canned answer that of a file (SPEC SF5, bench M12), built once at start:
 *
 *   --body-file FILE         a 200 whose body is FILE's bytes (application/octet-stream)
 *   --status 304             a 304 with no body (an ETag, no Content-Length)
 *   --head-bytes N           the head padded (a field X-Floor-Pad) to N bytes, its blank line
 *                            included, as large as the head of a peer's answer
 *
 * Every answer goes in one write(), head and body together.
 *
 * Correct only for a client that sends one request and waits for its answer (wrk without
 * pipelining): two requests in one read() get one answer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char now_answer[] = "HTTP/1.1 200 OK\r\n"
                                 "Server: floor\r\n"
                                 "Content-Length: 22\r\n"
                                 "Content-Type: application/json\r\n"
                                 "\r\n"
                                 "{\"now\":1700000000.000}";

static const char *canned = now_answer;
static size_t canned_len = sizeof(now_answer) - 1;
static int port;

/* The canned answer of a file: its head (padded to head_bytes, when not 0) and its body. */
static int file_answer(const char *body_file, int status, size_t head_bytes)
{
        char *body = NULL;
        size_t blen = 0;
        if (body_file) {
                FILE *f = fopen(body_file, "rb");
                long size = -1;
                if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 &&
                    fseek(f, 0, SEEK_SET) == 0 && (body = malloc((size_t)size + 1)) &&
                    fread(body, 1, (size_t)size, f) == (size_t)size)
                        blen = (size_t)size;
                else
                        size = -1;
                if (f)
                        fclose(f);
                if (size < 0) {
                        perror(body_file);
                        return -1;
                }
        }
        char head[4096];
        int n = status == 304 ? snprintf(head, sizeof(head),
                                         "HTTP/1.1 304 Not Modified\r\n"
                                         "Server: floor\r\n"
                                         "ETag: \"floor\"\r\n")
                              : snprintf(head, sizeof(head),
                                         "HTTP/1.1 200 OK\r\n"
                                         "Server: floor\r\n"
                                         "Content-Length: %zu\r\n"
                                         "Content-Type: application/octet-stream\r\n",
                                         blen);
        size_t h = (size_t)n;
        static const char pad[] = "X-Floor-Pad: ";
        if (head_bytes) {
                /* the pad's name, at least one byte of value, its CRLF and the blank line */
                if (head_bytes < h + sizeof(pad) - 1 + 1 + 4 || head_bytes > sizeof(head)) {
                        fprintf(stderr, "floor: --head-bytes %zu: from %zu to %zu\n", head_bytes,
                                h + sizeof(pad) + 4, sizeof(head));
                        return -1;
                }
                memcpy(head + h, pad, sizeof(pad) - 1);
                h += sizeof(pad) - 1;
                while (h < head_bytes - 4)
                        head[h++] = 'x';
                memcpy(head + h, "\r\n", 2);
                h += 2;
        }
        memcpy(head + h, "\r\n", 2);
        h += 2;
        if (status == 304)
                blen = 0;
        char *out = malloc(h + blen);
        if (!out)
                return -1;
        memcpy(out, head, h);
        if (blen)
                memcpy(out + h, body, blen);
        free(body);
        canned = out;
        canned_len = h + blen;
        return 0;
}

static int listener(void)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((unsigned short)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 4096) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

static void *serve(void *arg)
{
        int lfd = (int)(long)arg;
        int ep = epoll_create1(EPOLL_CLOEXEC);
        if (ep < 0) {
                perror("floor: epoll_create1");
                exit(1);
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
        epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
        static __thread char buf[65536];
        struct epoll_event evs[256];
        for (;;) {
                int n = epoll_wait(ep, evs, 256, -1);
                if (n < 0 && errno != EINTR) {
                        perror("floor: epoll_wait");
                        exit(1);
                }
                for (int i = 0; i < n; i++) {
                        int fd = evs[i].data.fd;
                        if (fd == lfd) {
                                for (;;) {
                                        int c = accept4(lfd, NULL, NULL,
                                                        SOCK_NONBLOCK | SOCK_CLOEXEC);
                                        if (c < 0)
                                                break;
                                        int one = 1;
                                        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                                        struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
                                        epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                                }
                                continue;
                        }
                        ssize_t r = read(fd, buf, sizeof(buf));
                        if (r > 0) {
                                if (write(fd, canned, canned_len) < 0 && errno != EAGAIN)
                                        close(fd);
                        } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                                close(fd); /* closing drops it from the epoll set */
                        }
                }
        }
        return NULL;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {{"body-file", required_argument, NULL, 'b'},
                                             {"status", required_argument, NULL, 's'},
                                             {"head-bytes", required_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
        const char *body_file = NULL;
        int status = 200, o;
        long head_bytes = 0;
        bool file = false;
        while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                file = true;
                if (o == 'b')
                        body_file = optarg;
                else if (o == 's')
                        status = atoi(optarg);
                else if (o == 'h')
                        head_bytes = atol(optarg);
                else
                        return 2;
        }
        if (argc - optind < 1 || argc - optind > 2 || (status != 200 && status != 304) ||
            head_bytes < 0) {
                fprintf(stderr, "usage: floor [--body-file FILE] [--status 200|304] "
                                "[--head-bytes N] PORT [THREADS]\n");
                return 2;
        }
        if (file && file_answer(body_file, status, (size_t)head_bytes) < 0)
                return 2;
        port = atoi(argv[optind]);
        int threads = argc - optind > 1 ? atoi(argv[optind + 1]) : 1;
        if (port <= 0 || port > 65535 || threads < 1 || threads > 256) {
                fprintf(stderr, "floor: bad PORT or THREADS\n");
                return 2;
        }
        pthread_t t;
        for (int i = 0; i < threads; i++) {
                int lfd = listener();
                if (lfd < 0) {
                        perror("floor: listen");
                        return 1;
                }
                if (i == threads - 1)
                        serve((void *)(long)lfd);
                else if (pthread_create(&t, NULL, serve, (void *)(long)lfd) != 0)
                        return 1;
        }
        return 0;
}
