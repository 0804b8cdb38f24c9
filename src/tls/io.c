/* SPDX-License-Identifier: MIT */
/* io.c: one TLS connection over a non-blocking fd: handshake, read, writev, close_notify, what it
 * wants next (LY2's TLS transport; TL1, TL6). OpenSSL's WANT_READ/WANT_WRITE are wants, never
 * errors. OpenSSL reads its records from m0's buffer, filled by one read of the socket (D246),
 * and writes each straight to the socket, both through a BIO of m0's own (D257). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>

#include "sockio.h"
#include "tls-private.h"

/* Pieces smaller than this are copied together into one record (D165). A record holds 16 KiB. */
#define GATHER 16384
/* The plaintext a TLS record holds at most (RFC 8446 5.1). */
#define RECORD_MAX 16384
/* The most a record takes on the wire (RFC 5246 6.2.3: 2048 bytes of expansion, and the header):
 * a read of the socket asks for at least this much, however little plaintext the caller takes. */
#define WIRE_RECORD_MAX (RECORD_MAX + 2048 + 5)
/* What a record adds to its plaintext on the wire, counted generously (TLS 1.3 AES-GCM adds 22,
 * TLS 1.2's 29): a read for `n` bytes of plaintext asks for n and this much per record. */
#define WIRE_PER_RECORD 64
/* The loop's buffer for the socket's bytes (D246), one per thread that reads TLS. */
#define IN_CAP (64 * 1024)

/*
 * The thread's buffer for the socket's bytes. A connection reads the socket into it and OpenSSL
 * takes its records from there; what OpenSSL has not taken when the call returns stays in it,
 * and the connection keeps it (`owner`) until the thread needs the buffer for another one, which
 * first moves the owner's bytes into a copy of their own size (evict). An idle connection holds
 * no buffer: the rest of its last read, when there was one, is in OpenSSL or in that copy.
 */
struct tls_in {
        struct m0_tls_conn *owner;
        unsigned char buf[IN_CAP];
};

struct m0_tls_conn {
        SSL *ssl;
        struct m0_tls_set *set; /* a reference: the set this connection was made with */
        int fd;
        int want;
        bool fatal; /* a protocol error or a broken socket: OpenSSL forbids a close_notify now */
        /* The socket's bytes read and not yet taken by OpenSSL: in[off..len), in the thread's
         * buffer (`from` its tls_in, while it owns it) or in a copy of its own (from NULL). */
        unsigned char *in;
        uint32_t in_off, in_len;
        struct tls_in *from;
        /* This call of m0's (handshake, read, ...): the plaintext it can still take (sizes the
         * read), whether a read() of the socket came back short (it is empty: no other read()
         * until epoll says so), whether one saw its end, and the errno of one that failed. */
        size_t room;
        bool drained;
        bool eof;
        int err;
        /* A read returned plaintext and met the session's end (a close_notify) or an error behind
         * it, both already taken from the socket: the next read returns them, and until then the
         * connection counts as having something pending, since no readiness will say so. */
        bool end_held;
        char reason[128];
};

static pthread_key_t in_key;
static pthread_once_t in_once = PTHREAD_ONCE_INIT;
static BIO_METHOD *in_method;
static __thread struct tls_in *in_self;

/* Move the owner's unread bytes out of the thread's buffer into a copy of their own. false when
 * there is no memory for it (the bytes stay where they are, and the buffer the owner's). */
static bool evict(struct tls_in *b)
{
        struct m0_tls_conn *o = b->owner;
        if (!o)
                return true;
        size_t n = o->in_len - o->in_off;
        unsigned char *copy = NULL;
        if (n > 0) {
                copy = malloc(n);
                if (!copy)
                        return false;
                memcpy(copy, o->in + o->in_off, n);
        }
        o->in = copy;
        o->in_off = 0;
        o->in_len = (uint32_t)n;
        o->from = NULL;
        b->owner = NULL;
        return true;
}

/* The thread ends: its buffer's owner keeps its bytes in a copy (or loses them, without memory:
 * its next read then fails). */
static void in_free(void *p)
{
        struct tls_in *b = p;
        if (b->owner && !evict(b)) {
                b->owner->in = NULL;
                b->owner->in_off = b->owner->in_len = 0;
                b->owner->from = NULL;
                b->owner->err = ENOMEM;
        }
        free(b);
}

/* The connection's unread bytes are all taken: give back the buffer they were in. */
static void in_done(struct m0_tls_conn *c)
{
        if (c->from)
                c->from->owner = NULL;
        else
                free(c->in);
        c->in = NULL;
        c->in_off = c->in_len = 0;
        c->from = NULL;
}

/*
 * OpenSSL's read of the connection's records: from the bytes m0 holds, or when there are none,
 * one read() of the socket into the thread's buffer, of as much as the call's plaintext may take
 * (and at least a record). A read() that came back short emptied the socket, so the next one in
 * the same call is not made: the loops' epoll is level-triggered and says when more come.
 */
static int in_read(BIO *bio, char *out, int outl)
{
        struct m0_tls_conn *c = BIO_get_data(bio);
        BIO_clear_retry_flags(bio);
        if (outl <= 0)
                return 0;
        if (c->in_off == c->in_len) {
                if (c->err) {
                        errno = c->err;
                        return -1;
                }
                if (c->eof)
                        return 0;
                if (c->drained) {
                        BIO_set_retry_read(bio);
                        return -1;
                }
                struct tls_in *b = in_self;
                if (!b) {
                        b = malloc(sizeof(*b));
                        if (!b || pthread_setspecific(in_key, b) != 0) {
                                free(b);
                                c->err = errno = ENOMEM;
                                return -1;
                        }
                        b->owner = NULL;
                        in_self = b;
                }
                if (b->owner != c && !evict(b)) {
                        c->err = errno = ENOMEM;
                        return -1;
                }
                size_t ask = c->room + (c->room / RECORD_MAX + 1) * WIRE_PER_RECORD;
                if (ask < WIRE_RECORD_MAX)
                        ask = WIRE_RECORD_MAX;
                if (ask > sizeof(b->buf))
                        ask = sizeof(b->buf);
                ssize_t n = m0__sock_recv(c->fd, b->buf, ask);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EWOULDBLOCK) {
                                c->drained = true;
                                BIO_set_retry_read(bio);
                                return -1;
                        }
                        c->err = errno;
                        return -1;
                }
                if (n == 0) {
                        c->eof = true;
                        return 0;
                }
                c->drained = (size_t)n < ask;
                b->owner = c;
                c->from = b;
                c->in = b->buf;
                c->in_off = 0;
                c->in_len = (uint32_t)n;
        }
        size_t take = c->in_len - c->in_off;
        if (take > (size_t)outl)
                take = (size_t)outl;
        memcpy(out, c->in + c->in_off, take);
        c->in_off += (uint32_t)take;
        if (c->in_off == c->in_len)
                in_done(c);
        return (int)take;
}

/* OpenSSL's write of a record (or of gathered pieces, D165): one send() of the socket, as its
 * socket BIO's write() was, without a signal for a peer gone (EPIPE) and by the system call
 * itself (D257). */
static int in_write(BIO *bio, const char *data, int len)
{
        struct m0_tls_conn *c = BIO_get_data(bio);
        BIO_clear_retry_flags(bio);
        if (len <= 0)
                return 0;
        ssize_t n = m0__sock_send(c->fd, data, (size_t)len, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                BIO_set_retry_write(bio);
        return (int)n;
}

static long in_ctrl(BIO *bio, int cmd, long num, void *ptr)
{
        (void)num;
        (void)ptr;
        struct m0_tls_conn *c = BIO_get_data(bio);
        switch (cmd) {
        case BIO_CTRL_EOF: return c->eof && c->in_off == c->in_len; /* the end read (D246) */
        case BIO_CTRL_PENDING: return (long)(c->in_len - c->in_off);
        case BIO_CTRL_FLUSH: return 1;
        default: return 0; /* no kTLS, no descriptor to hand out, nothing else */
        }
}

static int in_create(BIO *bio)
{
        BIO_set_init(bio, 1);
        return 1;
}

static void in_init(void)
{
        if (pthread_key_create(&in_key, in_free) != 0)
                return;
        BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "m0 tls");
        if (m && BIO_meth_set_read(m, in_read) == 1 && BIO_meth_set_write(m, in_write) == 1 &&
            BIO_meth_set_ctrl(m, in_ctrl) == 1 && BIO_meth_set_create(m, in_create) == 1) {
                in_method = m;
                return;
        }
        BIO_meth_free(m);
}

/* The thread's error queue emptied before a call of OpenSSL's, which SSL_get_error asks. It is
 * almost always empty already (fail() empties it): OpenSSL 3's ERR_clear_error walks its 16
 * slots and frees each one's function name (16 free(NULL)), the dearest of m0's own calls into
 * OpenSSL per keep-alive request, where a look at the queue is enough (D247). */
static void clear_errors(void)
{
        if (ERR_peek_error() != 0)
                ERR_clear_error();
}

/* A call of m0's begins: nothing read yet in it; it may take `room` bytes of plaintext. */
static void begin(struct m0_tls_conn *c, size_t room)
{
        c->want = 0;
        c->room = room;
        c->drained = false;
        clear_errors();
        errno = 0;
}

int m0__tls_conn_new(struct m0_tls_conn **ret, struct m0_tls *t, int fd)
{
        struct m0_tls_conn *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->fd = fd;
        (void)pthread_once(&in_once, in_init);
        c->set = m0__tls_set_take(t);
        c->ssl = SSL_new(c->set->def);
        BIO *in = in_method ? BIO_new(in_method) : NULL;
        if (in)
                BIO_set_data(in, c);
        /* One BIO both ways: reads from m0's bytes (D246), writes one send() per record or
         * gathered pieces (D165, D257). SSL_set0_rbio and SSL_set0_wbio each take a reference. */
        if (!c->ssl || !in || BIO_up_ref(in) != 1) {
                BIO_free(in);
                ERR_clear_error();
                m0__tls_conn_free(c);
                return -ENOMEM;
        }
        SSL_set0_rbio(c->ssl, in);
        SSL_set0_wbio(c->ssl, in);
        SSL_set_accept_state(c->ssl);
        *ret = c;
        return 0;
}

void m0__tls_conn_free(struct m0_tls_conn *c)
{
        if (!c)
                return;
        SSL_free(c->ssl);
        in_done(c);
        m0__tls_set_unref(c->set);
        free(c);
}

/* What a failed call of OpenSSL's (returning `ret`) means: -EAGAIN with a want, 0 for the peer's
 * close_notify, -errno of the socket, or -EPROTO with the reason kept. Call it right after the
 * call: errno is the write's, c->err the read's. */
static int fail(struct m0_tls_conn *c, int ret)
{
        int err = c->err ? c->err : errno;
        int e = SSL_get_error(c->ssl, ret);
        const char *why;
        switch (e) {
        case SSL_ERROR_WANT_READ: c->want = M0_TLS_WANT_READ; return -EAGAIN;
        case SSL_ERROR_WANT_WRITE: c->want = M0_TLS_WANT_WRITE; return -EAGAIN;
        case SSL_ERROR_ZERO_RETURN:
                snprintf(c->reason, sizeof(c->reason), "the peer closed the session");
                return 0;
        case SSL_ERROR_SYSCALL:
                c->fatal = true;
                ERR_clear_error();
                if (err && err != EAGAIN) {
                        snprintf(c->reason, sizeof(c->reason), "%s", strerror(err));
                        return -err;
                }
                snprintf(c->reason, sizeof(c->reason), "the peer closed the connection");
                return -ECONNRESET;
        default:
                c->fatal = true;
                why = ERR_reason_error_string(ERR_peek_error());
                snprintf(c->reason, sizeof(c->reason), "%s", why ? why : "protocol error");
                ERR_clear_error();
                return -EPROTO;
        }
}

int m0__tls_handshake(struct m0_tls_conn *c)
{
        begin(c, IN_CAP);
        int r = SSL_do_handshake(c->ssl);
        if (r == 1)
                return 0;
        r = fail(c, r);
        if (r == 0) {
                snprintf(c->reason, sizeof(c->reason), "the peer closed during the handshake");
                return -ECONNRESET;
        }
        return r;
}

/*
 * Records one after another into buf, as much as the socket held: so a read of TLS takes what a
 * read of the plain socket would. It stops when m0's bytes and OpenSSL's plaintext are all taken
 * and the socket was found empty (a short read()) or the record was shorter than a full one: a
 * peer's TLS fills records from one write, so a short one ends what it wrote then (D215). Either
 * way no read() is made to find the socket empty: the loops' epoll is level-triggered and says so
 * if more came. A keep-alive request is one read() (M9, D246).
 */
ssize_t m0__tls_read(struct m0_tls_conn *c, void *buf, size_t n)
{
        size_t got = 0;
        begin(c, n);
        c->end_held = false;
        while (got < n) {
                size_t k = 0;
                c->room = n - got;
                if (SSL_read_ex(c->ssl, (char *)buf + got, n - got, &k) == 1) {
                        got += k;
                        if (c->in_off == c->in_len && SSL_pending(c->ssl) <= 0 &&
                            (c->drained || k < RECORD_MAX))
                                break;
                        continue;
                }
                ssize_t r = fail(c, 0);
                if (got > 0) {
                        c->end_held = r != -EAGAIN;
                        c->want = 0;
                        ERR_clear_error();
                        return (ssize_t)got; /* the end, the error or the want: next time */
                }
                return r;
        }
        return (ssize_t)got;
}

/*
 * One chunk from (i, off) on: the piece itself when it holds GATHER bytes or more, else the
 * pieces from there copied into `g` up to GATHER bytes. The same bytes offered again give a chunk
 * at least as long, which is what OpenSSL asks of the retry of a write that wanted.
 */
static const void *chunk(const struct iovec *iov, int n, int i, size_t off, unsigned char *g,
                         size_t *ret_len)
{
        if (iov[i].iov_len - off >= GATHER) {
                *ret_len = iov[i].iov_len - off;
                return (const char *)iov[i].iov_base + off;
        }
        size_t len = 0;
        for (; i < n && len < GATHER; i++, off = 0) {
                size_t take = iov[i].iov_len - off;
                if (take > GATHER - len)
                        take = GATHER - len;
                memcpy(g + len, (const char *)iov[i].iov_base + off, take);
                len += take;
        }
        *ret_len = len;
        return g;
}

ssize_t m0__tls_writev(struct m0_tls_conn *c, const struct iovec *iov, int n)
{
        unsigned char g[GATHER];
        size_t total = 0, off = 0;
        int i = 0;
        begin(c, 0);
        for (;;) {
                while (i < n && off == iov[i].iov_len) {
                        i++;
                        off = 0;
                }
                if (i == n)
                        break;
                size_t len, w = 0;
                const void *p = chunk(iov, n, i, off, g, &len);
                clear_errors();
                errno = 0;
                if (SSL_write_ex(c->ssl, p, len, &w) != 1) {
                        int r = fail(c, 0);
                        if (total > 0) {
                                ERR_clear_error();
                                return (ssize_t)total; /* the rest, and the want, next time */
                        }
                        return r == 0 ? -EPIPE : r;
                }
                total += w;
                while (w > 0) {
                        size_t step = iov[i].iov_len - off < w ? iov[i].iov_len - off : w;
                        off += step;
                        w -= step;
                        if (off == iov[i].iov_len && w > 0) {
                                i++;
                                off = 0;
                        }
                }
        }
        return (ssize_t)total;
}

int m0__tls_shutdown(struct m0_tls_conn *c)
{
        c->want = 0;
        if (c->fatal || !SSL_is_init_finished(c->ssl) ||
            (SSL_get_shutdown(c->ssl) & SSL_SENT_SHUTDOWN))
                return 0; /* no session to close, or its close_notify went already */
        begin(c, 0);
        int r = SSL_shutdown(c->ssl);
        if (r >= 0)
                return 0;
        r = fail(c, r);
        if (r == -EAGAIN && c->want == M0_TLS_WANT_READ) {
                c->want = 0;
                return 0; /* sent; the peer's close_notify is not waited for */
        }
        return r;
}

size_t m0__tls_pending(const struct m0_tls_conn *c)
{
        /* The socket's bytes m0 holds, and a record's plaintext OpenSSL holds. Not
         * SSL_has_pending: it counts a record read in part, which only more bytes on the socket
         * complete; the caller, serving the connection again for it, would spin. OpenSSL takes
         * one record at a time from m0's bytes (no read-ahead), so nothing else waits inside it;
         * m0's bytes may end in part of a record, which a read hands to OpenSSL at once (D246).
         * An end or error a read met behind its plaintext counts one: the next read returns it
         * (D255). */
        int n = SSL_pending(c->ssl);
        return (size_t)(c->in_len - c->in_off) + (n > 0 ? (size_t)n : 0) + c->end_held;
}

int m0__tls_want(const struct m0_tls_conn *c)
{
        return c->want;
}

const char *m0__tls_reason(const struct m0_tls_conn *c)
{
        return c->reason;
}

const char *m0__tls_version(const struct m0_tls_conn *c)
{
        return SSL_get_version(c->ssl);
}

const char *m0__tls_alpn(const struct m0_tls_conn *c)
{
        static __thread char out[32];
        const unsigned char *p;
        unsigned len = 0;
        SSL_get0_alpn_selected(c->ssl, &p, &len);
        snprintf(out, sizeof(out), "%.*s", (int)len, len ? (const char *)p : "");
        return out;
}

bool m0__tls_resumed(const struct m0_tls_conn *c)
{
        return SSL_session_reused(c->ssl) == 1;
}

const char *m0__tls_server_name(const struct m0_tls_conn *c)
{
        const char *n = SSL_get_servername(c->ssl, TLSEXT_NAMETYPE_host_name);
        return n ? n : "";
}

void m0__tls_conn_subject(const struct m0_tls_conn *c, char *out, size_t len)
{
        X509 *x = SSL_get_certificate(c->ssl);
        out[0] = '\0';
        if (x)
                m0__tls_name_text(X509_get_subject_name(x), out, len);
}
