/* SPDX-License-Identifier: MIT */
/*
 * wsfloor: the floor of bench M11 (SPEC WS7). It answers what apps/bench_app and ws-node.js
 * answer to contrib/bench/wsload and bench.py, and does nothing else:
 *
 *   wsfloor PORT               one thread on 127.0.0.1:PORT; SIGTERM ends it
 *
 *   GET /health                200
 *   GET /follow?...            101 (RFC 6455's Sec-WebSocket-Accept); the socket is a follower
 *   GET /echo                  101; every whole client frame is sent back unmasked, all those
 *                              of one read() in one write()
 *   POST /publish?...          the body, as Node's `ws` arm sends it ({"id","channel","event",
 *                              "data"}), made once into one unmasked text frame, then one
 *                              write() of that frame to every follower, then 200 {"id":N}
 *
 * A fan-out is one write() per socket of bytes built once: no server that sends each message
 * to each socket can spend less on the same system calls, so its CPU per delivered message is
 * the floor m0's and Node's are compared to. No channel is told apart (every follower gets every
 * message), no frame of a follower's is read (a read only notices the close), and a write that
 * does not take the whole frame closes the socket: wsload reads every frame before the next is
 * published, so none ever fills.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

enum { HEAD, FOLLOW, ECHO };
enum { BUF = 4096 }; /* a request's head and body, or an echo's frames in flight */

struct conn {
        int kind;
        int idx;      /* FOLLOW: its place in followers[] */
        unsigned len; /* bytes in buf */
        char *buf;    /* HEAD and ECHO; NULL for a follower */
};

static struct conn *conns; /* by descriptor */
static size_t n_slots;
static int *followers;
static size_t n_followers, cap_followers;
static int ep;
static unsigned long long last_id;

static const char health_answer[] = "HTTP/1.1 200 OK\r\n"
                                    "Content-Type: text/plain\r\n"
                                    "Content-Length: 3\r\n"
                                    "\r\n"
                                    "ok\n";

static struct conn *slot(int fd)
{
        if ((size_t)fd >= n_slots) {
                size_t n = n_slots ? n_slots : 1024;
                while (n <= (size_t)fd)
                        n *= 2;
                struct conn *c = realloc(conns, n * sizeof(*c));
                if (!c) {
                        perror("wsfloor: realloc");
                        exit(1);
                }
                memset(c + n_slots, 0, (n - n_slots) * sizeof(*c));
                conns = c;
                n_slots = n;
        }
        return &conns[fd];
}

static void drop(int fd)
{
        struct conn *c = slot(fd);
        if (c->kind == FOLLOW) {
                int last = followers[--n_followers];
                followers[c->idx] = last;
                conns[last].idx = c->idx;
        }
        free(c->buf);
        memset(c, 0, sizeof(*c));
        close(fd); /* closing drops it from the epoll set */
}

static void follow(int fd)
{
        if (n_followers == cap_followers) {
                cap_followers = cap_followers ? cap_followers * 2 : 16384;
                int *f = realloc(followers, cap_followers * sizeof(*f));
                if (!f) {
                        perror("wsfloor: realloc");
                        exit(1);
                }
                followers = f;
        }
        struct conn *c = slot(fd);
        c->kind = FOLLOW;
        c->idx = (int)n_followers;
        followers[n_followers++] = fd;
        free(c->buf);
        c->buf = NULL;
        c->len = 0;
}

/* The value of the field `name` (lower case, with its colon) in a head, or NULL. */
static const char *field(const char *head, const char *name, size_t *len)
{
        size_t n = strlen(name);
        for (const char *p = strchr(head, '\n'); p; p = strchr(p, '\n')) {
                p++;
                if (strncasecmp(p, name, n) != 0)
                        continue;
                p += n;
                while (*p == ' ' || *p == '\t')
                        p++;
                const char *e = strchr(p, '\r');
                *len = e ? (size_t)(e - p) : strlen(p);
                return p;
        }
        return NULL;
}

static bool upgrade(int fd, const char *head)
{
        static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
        size_t klen;
        const char *key = field(head, "sec-websocket-key:", &klen);
        char in[128];
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned mdlen;
        if (!key || klen + sizeof(guid) > sizeof(in))
                return false;
        memcpy(in, key, klen);
        memcpy(in + klen, guid, sizeof(guid) - 1);
        if (!EVP_Digest(in, klen + sizeof(guid) - 1, md, &mdlen, EVP_sha1(), NULL))
                return false;
        char accept[64];
        EVP_EncodeBlock((unsigned char *)accept, md, (int)mdlen);
        char out[256];
        int n = snprintf(out, sizeof(out),
                         "HTTP/1.1 101 Switching Protocols\r\n"
                         "Upgrade: websocket\r\n"
                         "Connection: Upgrade\r\n"
                         "Sec-WebSocket-Accept: %s\r\n"
                         "\r\n",
                         accept);
        return write(fd, out, (size_t)n) == n;
}

/* The body of a publish, sent as Node's arm sends it, to every follower. */
static void publish(int fd, const char *head, const char *body, size_t blen)
{
        size_t clen = 0;
        const char *ch = strstr(head, "channel=");
        if (ch && ch < strchr(head, '\r')) {
                ch += 8;
                clen = strcspn(ch, "& \r");
        } else {
                ch = "bench";
                clen = 5;
        }
        static unsigned char frame[BUF + 256];
        unsigned char *p = frame + 4; /* room for a 16-bit length */
        int n = snprintf(
                (char *)p, sizeof(frame) - 4,
                "{\"id\":%llu,\"channel\":\"%.*s\",\"event\":\"message\",\"data\":\"%.*s\"}",
                ++last_id, (int)clen, ch, (int)blen, body);
        if (n < 0 || (size_t)n >= sizeof(frame) - 4)
                return;
        size_t h = n < 126 ? 2 : 4;
        unsigned char *f = p - h;
        f[0] = 0x81; /* FIN, text */
        if (n < 126) {
                f[1] = (unsigned char)n;
        } else {
                f[1] = 126;
                f[2] = (unsigned char)(n >> 8);
                f[3] = (unsigned char)n;
        }
        size_t flen = h + (size_t)n;
        for (size_t i = 0; i < n_followers;) {
                int s = followers[i];
                if (write(s, f, flen) != (ssize_t)flen)
                        drop(s); /* the last follower moved into place i */
                else
                        i++;
        }
        char out[160];
        int k = snprintf(out, sizeof(out),
                         "HTTP/1.1 200 OK\r\n"
                         "Content-Type: application/json\r\n"
                         "Content-Length: %d\r\n"
                         "\r\n"
                         "{\"id\":%llu}",
                         snprintf(NULL, 0, "{\"id\":%llu}", last_id), last_id);
        if (write(fd, out, (size_t)k) != k)
                drop(fd);
}

/* Requests at the front of a connection's buffer, until one upgrades it; false when it was
 * dropped. */
static bool requests(int fd, struct conn *c)
{
        for (;;) {
                char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
                if (!end)
                        return c->len < BUF - 1 || (drop(fd), false);
                size_t hlen = (size_t)(end + 4 - c->buf);
                char save = c->buf[hlen];
                c->buf[hlen] = '\0'; /* the head as a string, for field() */
                size_t vlen;
                const char *cl = field(c->buf, "content-length:", &vlen);
                size_t blen = cl ? strtoul(cl, NULL, 10) : 0;
                c->buf[hlen] = save;
                if (hlen + blen >= BUF) {
                        drop(fd);
                        return false;
                }
                if (c->len < hlen + blen)
                        return true; /* the body is still on its way */
                char head[BUF];
                memcpy(head, c->buf, hlen);
                head[hlen] = '\0';
                if (strncmp(head, "GET /follow", 11) == 0 || strncmp(head, "GET /echo", 9) == 0) {
                        if (!upgrade(fd, head)) {
                                drop(fd);
                                return false;
                        }
                        if (head[5] == 'f') {
                                follow(fd);
                                return true;
                        }
                        c->kind = ECHO;
                        c->len -= (unsigned)hlen;
                        memmove(c->buf, c->buf + hlen, c->len);
                        return true;
                }
                if (strncmp(head, "POST /publish", 13) == 0) {
                        publish(fd, head, c->buf + hlen, blen);
                        if (!slot(fd)->buf)
                                return false; /* dropped */
                } else if (write(fd, health_answer, sizeof(health_answer) - 1) < 0) {
                        drop(fd);
                        return false;
                }
                c->len -= (unsigned)(hlen + blen);
                memmove(c->buf, c->buf + hlen + blen, c->len);
        }
}

/* Whole client frames at the front of an echo's buffer, each sent back unmasked; all of them in
 * one write(). */
static void echoes(int fd, struct conn *c)
{
        static unsigned char out[BUF + 64];
        size_t o = 0, off = 0;
        const unsigned char *b = (const unsigned char *)c->buf;
        while (c->len - off >= 6) {
                size_t n = b[off + 1] & 0x7f, h = 6;
                if (n == 126) {
                        if (c->len - off < 8)
                                break;
                        n = (size_t)b[off + 2] << 8 | b[off + 3];
                        h = 8;
                } else if (n == 127 || !(b[off + 1] & 0x80)) {
                        drop(fd); /* nothing wsload sends; a client always masks */
                        return;
                }
                if (c->len - off < h + n)
                        break;
                if ((b[off] & 0x0f) == 8) {
                        drop(fd);
                        return;
                }
                if (o + n + 4 > sizeof(out))
                        break;
                const unsigned char *key = b + off + h - 4, *p = b + off + h;
                out[o++] = b[off];
                if (n < 126) {
                        out[o++] = (unsigned char)n;
                } else {
                        out[o++] = 126;
                        out[o++] = (unsigned char)(n >> 8);
                        out[o++] = (unsigned char)n;
                }
                for (size_t i = 0; i < n; i++)
                        out[o++] = p[i] ^ key[i & 3];
                off += h + n;
        }
        if (off == 0 && c->len == BUF) {
                drop(fd);
                return;
        }
        c->len -= (unsigned)off;
        memmove(c->buf, c->buf + off, c->len);
        if (o && write(fd, out, o) != (ssize_t)o)
                drop(fd);
}

static void on_read(int fd)
{
        struct conn *c = slot(fd);
        if (c->kind == FOLLOW) {
                char tmp[512];
                ssize_t r = read(fd, tmp, sizeof(tmp));
                if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
                        drop(fd);
                return; /* a follower's frames are not read: wsload sends none */
        }
        ssize_t r = read(fd, c->buf + c->len, BUF - c->len);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                drop(fd);
                return;
        }
        if (r < 0)
                return;
        c->len += (unsigned)r;
        if (c->kind == HEAD && !requests(fd, c))
                return;
        if (c->kind == ECHO)
                echoes(fd, c);
}

static int listener(int port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((unsigned short)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 10000) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

int main(int argc, char **argv)
{
        int port = argc == 2 ? atoi(argv[1]) : 0;
        if (port <= 0 || port > 65535) {
                fprintf(stderr, "usage: wsfloor PORT\n");
                return 2;
        }
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
        int lfd = listener(port);
        ep = epoll_create1(EPOLL_CLOEXEC);
        if (lfd < 0 || ep < 0) {
                perror("wsfloor: listen");
                return 1;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
        epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
        struct epoll_event evs[256];
        for (;;) {
                int n = epoll_wait(ep, evs, 256, -1);
                if (n < 0 && errno != EINTR) {
                        perror("wsfloor: epoll_wait");
                        return 1;
                }
                for (int i = 0; i < n; i++) {
                        int fd = evs[i].data.fd;
                        if (fd != lfd) {
                                on_read(fd);
                                continue;
                        }
                        for (;;) {
                                int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                                if (c < 0)
                                        break;
                                int one = 1;
                                setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                                struct conn *s = slot(c);
                                s->buf = malloc(BUF);
                                if (!s->buf) {
                                        close(c);
                                        continue;
                                }
                                struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
                                epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                        }
                }
        }
}
