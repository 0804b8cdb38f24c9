/* SPDX-License-Identifier: MIT */
/* io.c: one TLS connection over a non-blocking fd: handshake, read, writev, close_notify, what it
 * wants next (LY2's TLS transport; TL1, TL6). OpenSSL's WANT_READ/WANT_WRITE are wants, never
 * errors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>

#include "tls-private.h"

/* Pieces smaller than this are copied together into one record (D165). A record holds 16 KiB. */
#define GATHER 16384

struct m0_tls_conn {
        SSL *ssl;
        struct m0_tls_set *set; /* a reference: the set this connection was made with */
        int want;
        bool fatal; /* a protocol error or a broken socket: OpenSSL forbids a close_notify now */
        char reason[128];
};

int m0__tls_conn_new(struct m0_tls_conn **ret, struct m0_tls *t, int fd)
{
        struct m0_tls_conn *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->set = m0__tls_set_take(t);
        c->ssl = SSL_new(c->set->def);
        if (!c->ssl || SSL_set_fd(c->ssl, fd) != 1) {
                ERR_clear_error();
                m0__tls_conn_free(c);
                return -ENOMEM;
        }
        SSL_set_accept_state(c->ssl);
        *ret = c;
        return 0;
}

void m0__tls_conn_free(struct m0_tls_conn *c)
{
        if (!c)
                return;
        SSL_free(c->ssl);
        m0__tls_set_unref(c->set);
        free(c);
}

/* What a failed call of OpenSSL's (returning `ret`) means: -EAGAIN with a want, 0 for the peer's
 * close_notify, -errno of the socket, or -EPROTO with the reason kept. `err` is errno right after
 * the call. */
static int fail(struct m0_tls_conn *c, int ret, int err)
{
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
        c->want = 0;
        ERR_clear_error();
        errno = 0;
        int r = SSL_do_handshake(c->ssl);
        if (r == 1)
                return 0;
        r = fail(c, r, errno);
        if (r == 0) {
                snprintf(c->reason, sizeof(c->reason), "the peer closed during the handshake");
                return -ECONNRESET;
        }
        return r;
}

ssize_t m0__tls_read(struct m0_tls_conn *c, void *buf, size_t n)
{
        size_t got = 0;
        c->want = 0;
        ERR_clear_error();
        errno = 0;
        if (SSL_read_ex(c->ssl, buf, n, &got) == 1)
                return (ssize_t)got;
        return fail(c, 0, errno);
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
        c->want = 0;
        for (;;) {
                while (i < n && off == iov[i].iov_len) {
                        i++;
                        off = 0;
                }
                if (i == n)
                        break;
                size_t len, w = 0;
                const void *p = chunk(iov, n, i, off, g, &len);
                ERR_clear_error();
                errno = 0;
                if (SSL_write_ex(c->ssl, p, len, &w) != 1) {
                        int r = fail(c, 0, errno);
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
        ERR_clear_error();
        errno = 0;
        int r = SSL_shutdown(c->ssl);
        if (r >= 0)
                return 0;
        r = fail(c, r, errno);
        if (r == -EAGAIN && c->want == M0_TLS_WANT_READ) {
                c->want = 0;
                return 0; /* sent; the peer's close_notify is not waited for */
        }
        return r;
}

size_t m0__tls_pending(const struct m0_tls_conn *c)
{
        /* Not SSL_has_pending: it counts a record read in part, which only more bytes on the
         * socket complete; the caller, serving the connection again for it, would spin. Without
         * read-ahead OpenSSL reads one record at a time, so nothing else waits inside it. */
        int n = SSL_pending(c->ssl);
        return n > 0 ? (size_t)n : 0;
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
