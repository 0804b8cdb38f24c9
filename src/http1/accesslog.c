/* SPDX-License-Identifier: MIT */
/* accesslog.c: what each request leaves behind: its counts and duration (O1), its log line or
 * its journald entry, queued per loop and sent at the end of the turn, the turn's entries
 * together in one datagram (O2, D81, D98). */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "accesslog.h"
#include "conn.h"
#include "config.h"
#include "log.h"

/* Datagrams per sendmmsg() call. */
#define SEND_BATCH 64
/* The bytes of entries one datagram carries at most (D98): what the kernel sends as one buffer
 * of pages without asking for a large block of contiguous memory, far above a turn's entries. */
#define DGRAM_BYTES (64 * 1024)
/* A dead journal socket is opened again at most this often, and drops are logged at most this
 * often; neither is a bound a client can push. */
#define RETRY_MS 1000
#define DROP_LOG_MS 10000

/* ---- one entry: journald's native protocol ---- */

static char *put_mem(char *p, const void *s, size_t n)
{
        memcpy(p, s, n);
        return p + n;
}

/* "00" to "99": two digits a division, which halves the divisions of a number (D82). */
static const char digit_pairs[201] = "0001020304050607080910111213141516171819"
                                     "2021222324252627282930313233343536373839"
                                     "4041424344454647484950515253545556575859"
                                     "6061626364656667686970717273747576777879"
                                     "8081828384858687888990919293949596979899";

/* A number in decimal, written once and copied into each field that names it: its digits are
 * the last `n` bytes of `d`. */
struct dec {
        char d[20];
        size_t n;
};

static void dec_of(struct dec *out, uint64_t v)
{
        char *e = out->d + sizeof(out->d), *q = e;
        for (; v >= 100; v /= 100) {
                q -= 2;
                memcpy(q, digit_pairs + 2 * (v % 100), 2);
        }
        if (v >= 10) {
                q -= 2;
                memcpy(q, digit_pairs + 2 * v, 2);
        } else {
                *--q = (char)('0' + v);
        }
        out->n = (size_t)(e - q);
}

static char *put_dec(char *p, const struct dec *v)
{
        return put_mem(p, v->d + sizeof(v->d) - v->n, v->n);
}

/* KEY=value for a value that holds no line feed (a number). */
static char *put_num(char *p, const char *key, size_t klen, const struct dec *v)
{
        p = put_mem(p, key, klen);
        p = put_dec(p, v);
        *p++ = '\n';
        return p;
}

/* journald's lengths are little-endian: one store on the machines m0 runs on. */
static void put_le64(char *p, uint64_t n)
{
        uint64_t le = htole64(n);
        memcpy(p, &le, sizeof(le));
}

/* KEY, a line feed, the value's length as a little-endian 64-bit number, the value, a line feed:
 * the form that carries any bytes (line feeds, control bytes, anything but UTF-8), D81. */
static char *put_blob(char *p, const char *key, size_t klen, const char *v, size_t n)
{
        p = put_mem(p, key, klen);
        *p++ = '\n';
        put_le64(p, n);
        p = put_mem(p + 8, v, n);
        *p++ = '\n';
        return p;
}

#define KEY(s) s, sizeof(s) - 1

/* What a request is counted under (O1), here where each request is counted; the metrics
 * (metrics/) show them. The histograms' buckets: from 25 µs (ramp's /x/now is answered in ~10 µs)
 * to 10 s (a pool job), in 1-2.5-5 steps, 18 of them and +Inf (D80). */
const uint32_t m0__bucket_us[M0__BUCKETS] = {
        25,    50,    100,    250,    500,    1000,    2500,    5000,    10000,
        25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
};

enum m0_method_class m0__method_class(const char *m, size_t n)
{
        static const struct {
                const char *name;
                size_t len;
        } names[M0_METHOD_OTHER] = {{"GET", 3},   {"HEAD", 4},   {"POST", 4},   {"PUT", 3},
                                    {"PATCH", 5}, {"DELETE", 6}, {"OPTIONS", 7}};
        for (int i = 0; i < M0_METHOD_OTHER; i++)
                if (n == names[i].len && memcmp(m, names[i].name, n) == 0)
                        return (enum m0_method_class)i;
        return M0_METHOD_OTHER;
}

/* Count `n` entries dropped, and say so at most every DROP_LOG_MS. */
static void dropped(struct m0_hctx *l, uint64_t n, const char *why)
{
        struct m0_journal *j = &l->journal;
        if (l->observe & M0_OBSERVE_METRICS)
                m0__count(&l->stats.journal_dropped, n);
        j->dropped_log += n;
        uint64_t now = m0__now_ms();
        if (j->logged_ms && now < j->logged_ms + DROP_LOG_MS)
                return;
        j->logged_ms = now;
        m0__log(M0_LOG_WARNING, l->index, NULL,
                "access log: %llu journal entr%s dropped (%s; --access-log-queue %u)",
                (unsigned long long)j->dropped_log, j->dropped_log == 1 ? "y" : "ies", why, j->cap);
        j->dropped_log = 0;
}

/* Whether HTTP/2 carried `a` (the plain line says so; HTTP/1.1's line is as it always was). */
static bool h2(const struct m0_access *a)
{
        return a->proto && strcmp(a->proto, "h2") == 0;
}

/* Queue the entry of `a`, answered in `us` microseconds on a connection of TLS version `tls`
 * (NULL: plain). */
static void journal_add(struct m0_hctx *l, const struct m0_access *a, uint64_t us, const char *tls)
{
        struct m0_journal *j = &l->journal;
        size_t tls_len = tls ? strlen(tls) : 0;
        if (j->n == j->cap) {
                dropped(l, 1, "journald is behind");
                return;
        }
        /* MESSAGE is the plain line's "GET /x/now 200 17", with the wire's byte count. */
        size_t msg_len = a->method_len + 1 + a->path_len + 1 + 3 + 1 + 20 + (a->on_pool ? 7 : 0) +
                         (tls_len ? tls_len + 3 : 0);
        const char *proto = a->proto ? a->proto : "http/1.1";
        size_t plen = strlen(proto); /* "h2" or "http/1.1", the protocol's own name */
        size_t need = j->prefix_len + 4 * 17 + msg_len + a->method_len + a->path_len + 4 * 40 + 12 +
                      plen + 2 + (tls_len ? 17 + tls_len : 0);
        if (m0__buf_reserve(&j->bytes, need) < 0) {
                dropped(l, 1, strerror(ENOMEM));
                return;
        }
        struct dec status, bytes, dur;
        dec_of(&status, (uint64_t)a->status);
        dec_of(&bytes, a->bytes);
        dec_of(&dur, us);
        char *start = j->bytes.data + j->bytes.len, *p = start;
        /* The shared fields, then MESSAGE, a blob since it holds the path: its length is filled
         * in once it is written. */
        p = put_mem(p, j->prefix, j->prefix_len);
        char *len_at = p, *mstart = p + 8, *m = mstart;
        m = put_mem(m, a->method, a->method_len);
        *m++ = ' ';
        m = put_mem(m, a->path, a->path_len);
        *m++ = ' ';
        m = put_dec(m, &status);
        *m++ = ' ';
        m = put_dec(m, &bytes);
        if (a->on_pool)
                m = put_mem(m, " (pool)", 7);
        if (tls_len) {
                m = put_mem(m, " (", 2);
                m = put_mem(m, tls, tls_len);
                *m++ = ')';
        }
        put_le64(len_at, (uint64_t)(m - mstart));
        *m++ = '\n';
        p = put_blob(m, KEY("M0_METHOD"), a->method, a->method_len);
        p = put_blob(p, KEY("M0_PATH"), a->path, a->path_len);
        p = put_num(p, KEY("M0_STATUS="), &status);
        p = put_num(p, KEY("M0_BYTES="), &bytes);
        p = put_num(p, KEY("M0_DURATION_US="), &dur);
        if (tls_len)
                p = put_blob(p, KEY("M0_TLS"), tls, tls_len);
        p = put_mem(p, "M0_PROTOCOL=", 12); /* O2, HT1: which protocol carried it */
        p = put_mem(p, proto, plen);
        *p++ = '\n';
        /* An empty line ends the entry, so that entries sent together in a datagram stay apart
         * (D98); after the last one of a datagram it ends nothing, and journald reads no more. */
        *p++ = '\n';
        j->bytes.len += (size_t)(p - start);
        j->ends[j->n++] = j->bytes.len;
}

void m0__request_done(struct m0_conn *c, const struct m0_access *a)
{
        struct m0_hctx *l = c->loop;
        uint64_t us = 0;
        if (l->observe && c->t_start)
                us = (m0__now_ns() - c->t_start) / 1000;
        if (l->observe & M0_OBSERVE_METRICS) {
                enum m0_method_class mc = m0__method_class(a->method, a->method_len);
                m0__count(&l->stats.requests[mc][m0__status_class(a->status)], 1);
                if (h2(a))
                        m0__count(&l->stats.h2_requests, 1);
                m0__histogram_note(&l->stats.duration, us);
        }
        /* TL7: a request that came over TLS says its version, " (TLSv1.3)", and M0_TLS. */
        if (l->observe & M0_OBSERVE_JOURNAL)
                journal_add(l, a, us, c->tls);
        else if (a->kind == M0_ANSWER_HANDLER && l->cfg->access_log == M0_ACCESS_LINE)
                m0__log(M0_LOG_INFO, l->index, NULL, "%.*s %.*s %d %zu%s%s%s%s%s",
                        (int)a->method_len, a->method, (int)a->path_len, a->path, a->status,
                        a->body_len, a->on_pool ? " (pool)" : "", h2(a) ? " (h2)" : "",
                        c->tls ? " (" : "", c->tls ? c->tls : "", c->tls ? ")" : "");
}

/* The bytes of the request `c` is reading, from its first byte on, wherever they are now. */
static size_t head_bytes(const struct m0_conn *c, const char **ret)
{
        const struct m0_hctx *l = c->loop;
        if (!c->req_started)
                return 0;
        if (l->cur_conn == c && c->req_off <= l->cur_len) {
                *ret = l->cur_base + c->req_off;
                return l->cur_len - c->req_off;
        }
        if (c->phase != PH_IDLE && c->rbuf && c->req_off <= c->rlen) {
                *ret = c->rbuf + c->req_off;
                return c->rlen - c->req_off;
        }
        return 0;
}

void m0__request_refused(struct m0_conn *c, int status, size_t bytes)
{
        if (!c->loop->observe)
                return;
        struct m0_access a = {.kind = M0_ANSWER_REFUSAL, .status = status, .bytes = bytes};
        const char *h = NULL;
        size_t n = head_bytes(c, &h);
        /* The request line as it came, however malformed: method SP target, the target cut at
         * its query, neither past the URI bound. */
        size_t cap = c->loop->cfg->max_uri_bytes;
        size_t i = 0;
        while (i < n && i < 32 && h[i] != ' ' && h[i] != '\r' && h[i] != '\n')
                i++;
        if (i > 0 && i < n && h[i] == ' ') {
                a.method = h;
                a.method_len = i;
                const char *t = h + i + 1;
                size_t k = 0;
                while (i + 1 + k < n && k < cap && t[k] != ' ' && t[k] != '\r' && t[k] != '\n' &&
                       t[k] != '?')
                        k++;
                a.path = t;
                a.path_len = k;
        }
        if (!a.method_len) {
                a.method = "-";
                a.method_len = 1;
        }
        if (!a.path_len) {
                a.path = "-";
                a.path_len = 1;
        }
        m0__request_done(c, &a);
}

/* ---- the loop's queue and its socket ---- */

void m0__journal_prepare(struct m0_journal *j, const char *app, int index, uint32_t cap)
{
        memset(j, 0, sizeof(*j));
        j->fd = -1;
        j->cap = cap;
        const char *ident = program_invocation_short_name;
        int n = snprintf(j->prefix, sizeof(j->prefix),
                         "PRIORITY=6\nSYSLOG_IDENTIFIER=%.40s\nM0_APP=%.40s\nM0_LOOP=%d\nMESSAGE\n",
                         strchr(ident, '\n') ? "m0" : ident, strchr(app, '\n') ? "m0" : app, index);
        if (n < 0 || (size_t)n >= sizeof(j->prefix)) /* cannot be, with the bounds above */
                n = snprintf(j->prefix, sizeof(j->prefix), "PRIORITY=6\nMESSAGE\n");
        j->prefix_len = (size_t)n;
}

/* A datagram socket connected to journald's. Returns it, or -errno; `dgram` (unless NULL) gets
 * the bytes one datagram on it may carry: DGRAM_BYTES, or less where the send buffer the kernel
 * gave is smaller (it refuses a datagram past that buffer with EMSGSIZE). */
static int journal_socket(size_t *dgram)
{
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        struct sockaddr_un sa = {.sun_family = AF_UNIX, .sun_path = M0__JOURNAL_SOCKET};
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        /* Room for a burst while journald catches up; the kernel caps it at wmem_max. */
        int sz = 8 * 1024 * 1024;
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
        if (dgram) {
                int got = 0;
                socklen_t gl = sizeof(got);
                *dgram = DGRAM_BYTES;
                if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &got, &gl) == 0 && got > 0 &&
                    (size_t)got < DGRAM_BYTES + 1024)
                        *dgram = got > 1024 ? (size_t)got - 1024 : 0;
        }
        return fd;
}

int m0__journal_probe(char *why, size_t len)
{
        int fd = journal_socket(NULL);
        if (fd < 0) {
                snprintf(why, len, "journald does not take entries at %s: %s", M0__JOURNAL_SOCKET,
                         strerror(-fd));
                return fd;
        }
        close(fd);
        snprintf(why, len, "journald takes entries at %s", M0__JOURNAL_SOCKET);
        return 0;
}

int m0__journal_open(struct m0_journal *j, struct m0_loop *el, struct m0_io *io)
{
        j->ends = calloc(j->cap, sizeof(*j->ends));
        if (!j->ends)
                return -ENOMEM;
        j->io = io;
        int fd = journal_socket(&j->dgram);
        if (fd < 0)
                return fd;
        int r = m0__io_add(el, io, fd, 0);
        if (r < 0) {
                close(fd);
                return r;
        }
        j->fd = fd;
        return 0;
}

/* Ask for EPOLLOUT while journald's queue is full, and stop asking once it is not. */
static void wait_writable(struct m0_hctx *l, bool on)
{
        struct m0_journal *j = &l->journal;
        if (j->fd >= 0 && m0__io_mod(&l->loop, j->io, j->fd, on ? EPOLLOUT : 0) == 0)
                j->waiting = on;
}

/* journald went away (a restart leaves this socket connected to nothing): a new socket, at most
 * once every RETRY_MS. 0 or -errno. */
static int reopen(struct m0_hctx *l)
{
        struct m0_journal *j = &l->journal;
        if (j->fd >= 0) {
                m0__io_del(&l->loop, j->fd);
                close(j->fd);
                j->fd = -1;
                j->waiting = false;
        }
        uint64_t now = m0__now_ms();
        if (now < j->retry_ms)
                return -EAGAIN;
        j->retry_ms = now + RETRY_MS;
        int fd = journal_socket(&j->dgram);
        if (fd < 0)
                return fd;
        int r = m0__io_add(&l->loop, j->io, fd, 0);
        if (r < 0) {
                close(fd);
                return r;
        }
        j->fd = fd;
        return 0;
}

/* Forget the first `done` entries, sent or dropped. */
static void consume(struct m0_journal *j, uint32_t done)
{
        if (!done)
                return;
        size_t off = j->ends[done - 1];
        j->n -= done;
        memmove(j->bytes.data, j->bytes.data + off, j->bytes.len - off);
        j->bytes.len -= off;
        for (uint32_t i = 0; i < j->n; i++)
                j->ends[i] = j->ends[done + i] - off;
        /* A queue that once held a burst does not keep its memory. */
        if (!j->n && j->bytes.cap > 1024 * 1024)
                m0__buf_free(&j->bytes);
}

/* One sendmmsg() of the entries from `from` on: as many datagrams as SEND_BATCH, each the
 * entries that follow one another within j->dgram bytes (one at least). Returns how many
 * datagrams journald took, with `*taken` the entries they carried and `*first` the entries of
 * the first datagram tried; or -errno about that first one. */
static int send_some(struct m0_journal *j, uint32_t from, uint32_t *taken, uint32_t *first)
{
        struct mmsghdr mm[SEND_BATCH];
        struct iovec iov[SEND_BATCH];
        uint32_t count[SEND_BATCH];
        unsigned k = 0;
        uint32_t i = from;
        for (; k < SEND_BATCH && i < j->n; k++) {
                size_t s = i ? j->ends[i - 1] : 0;
                uint32_t e = i + 1;
                while (e < j->n && j->ends[e] - s <= j->dgram)
                        e++;
                iov[k] = (struct iovec){.iov_base = j->bytes.data + s,
                                        .iov_len = j->ends[e - 1] - s};
                mm[k] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[k], .msg_iovlen = 1}};
                count[k] = e - i;
                i = e;
        }
        *first = count[0];
        int r;
        do
                r = sendmmsg(j->fd, mm, k, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (r < 0 && errno == EINTR);
        if (r < 0)
                return -errno;
        *taken = 0;
        for (int d = 0; d < r; d++)
                *taken += count[d];
        return r;
}

void m0__journal_flush(struct m0_hctx *l)
{
        struct m0_journal *j = &l->journal;
        uint32_t done = 0;
        bool reopened = false;
        while (done < j->n) {
                uint32_t taken = 0, first = 0;
                int r = j->fd >= 0 ? send_some(j, done, &taken, &first) : -ENOTCONN;
                if (r > 0) {
                        if (l->observe & M0_OBSERVE_METRICS)
                                m0__count(&l->stats.journal_sent, taken);
                        done += taken;
                        continue;
                }
                if (r == -EAGAIN) {
                        wait_writable(l, true); /* journald's queue is full */
                        break;
                }
                if (r == -EMSGSIZE && first > 1) {
                        j->dgram = 0; /* the kernel's bound is below ours: one entry each */
                        continue;
                }
                if (r == -EMSGSIZE) {
                        dropped(l, 1, "an entry larger than journald takes");
                        done++;
                        continue;
                }
                if (!reopened && reopen(l) == 0) {
                        reopened = true;
                        continue;
                }
                dropped(l, j->n - done, strerror(-r));
                done = j->n;
        }
        consume(j, done);
        if (!j->n && j->waiting)
                wait_writable(l, false);
}

void m0__journal_finish(struct m0_hctx *l, uint64_t deadline_ms)
{
        struct m0_journal *j = &l->journal;
        m0__journal_flush(l);
        for (uint64_t now = m0__now_ms(); j->n && j->fd >= 0 && now < deadline_ms;
             now = m0__now_ms()) {
                struct pollfd pf = {.fd = j->fd, .events = POLLOUT};
                uint64_t left = deadline_ms - now;
                (void)poll(&pf, 1, left < 100 ? (int)left : 100);
                m0__journal_flush(l);
        }
        if (j->n)
                dropped(l, j->n, "the loop ended before journald took them");
        j->n = 0;
}

void m0__journal_destroy(struct m0_journal *j)
{
        if (j->fd >= 0)
                close(j->fd);
        j->fd = -1;
        m0__buf_free(&j->bytes);
        free(j->ends);
        j->ends = NULL;
        j->n = 0;
}
