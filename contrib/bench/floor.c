/* SPDX-License-Identifier: MIT */
/*
 * floor: the ceiling of the benchmarks (SPEC M1). It parses nothing: every read() that returns
 * data is answered with one canned HTTP/1.1 200 carrying the same body as ramp's /x/now. No
 * HTTP server can do less work per request over the same socket calls, so its CPU per request
 * is the floor the others are compared to.
 *
 *   floor PORT [THREADS]     listens on 127.0.0.1:PORT; THREADS loops (default 1), each with
 *                            its own SO_REUSEPORT listener and epoll set. SIGTERM ends it.
 *
 * Correct only for a client that sends one request and waits for its answer (wrk without
 * pipelining): two requests in one read() get one answer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char canned[] = "HTTP/1.1 200 OK\r\n"
                             "Server: floor\r\n"
                             "Content-Length: 22\r\n"
                             "Content-Type: application/json\r\n"
                             "\r\n"
                             "{\"now\":1700000000.000}";

static int port;

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
                                if (write(fd, canned, sizeof(canned) - 1) < 0 && errno != EAGAIN)
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
        if (argc < 2 || argc > 3) {
                fprintf(stderr, "usage: floor PORT [THREADS]\n");
                return 2;
        }
        port = atoi(argv[1]);
        int threads = argc > 2 ? atoi(argv[2]) : 1;
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
