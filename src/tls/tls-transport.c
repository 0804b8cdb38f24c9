/* SPDX-License-Identifier: MIT */
/* tls-transport.c: the TLS transport (LY2, TL1, TL7): the table of a connection's operations over
 * io.c's OpenSSL connection, beside the plain one, so that nothing above it knows TLS is there. */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tls.h"
#include "transport.h"

/* A file's bytes go through OpenSSL a record at a time: no sendfile(2) without kTLS (D164). */
#define FILE_CHUNK 16384

static struct m0_tls_conn *conn_of(struct m0_transport *t)
{
        return t->impl;
}

/* The want of the call that returned `r`, kept where the connection reads it. */
static ssize_t wanted(struct m0_transport *t, ssize_t r)
{
        if (r == -EAGAIN)
                t->want = (unsigned)m0__tls_want(conn_of(t));
        return r;
}

static int tls_handshake(struct m0_transport *t)
{
        return (int)wanted(t, m0__tls_handshake(conn_of(t)));
}

/* As much as `len` holds of what is there now, records one after another (io.c, D246). */
static ssize_t tls_read(struct m0_transport *t, void *buf, size_t len)
{
        return wanted(t, m0__tls_read(conn_of(t), buf, len));
}

static ssize_t tls_writev(struct m0_transport *t, const struct iovec *iov, int n)
{
        return wanted(t, m0__tls_writev(conn_of(t), iov, n));
}

/*
 * Up to `n` bytes of `fd` from *off, read and written as records. A write that wanted is offered
 * the same bytes again next time (read again from the same offset), as OpenSSL asks.
 */
static ssize_t tls_sendfile(struct m0_transport *t, int fd, off_t *off, size_t n)
{
        unsigned char b[FILE_CHUNK];
        size_t sent = 0;
        while (sent < n) {
                size_t want = n - sent < sizeof(b) ? n - sent : sizeof(b);
                ssize_t r;
                do
                        r = pread(fd, b, want, *off);
                while (r < 0 && errno == EINTR);
                if (r <= 0) {
                        if (sent > 0)
                                break;
                        return r < 0 ? -errno : -EIO; /* the file shrank under its answer */
                }
                struct iovec iov = {.iov_base = b, .iov_len = (size_t)r};
                ssize_t w = m0__tls_writev(conn_of(t), &iov, 1);
                if (w <= 0) {
                        if (sent > 0)
                                break;
                        return wanted(t, w == 0 ? -EAGAIN : w);
                }
                *off += w;
                sent += (size_t)w;
                if (w < r)
                        break;
        }
        return (ssize_t)sent;
}

/* close_notify, then the write side: the peer reads the end of the session, then of the stream. */
static int tls_shutdown(struct m0_transport *t)
{
        (void)m0__tls_shutdown(conn_of(t));
        return shutdown(t->fd, SHUT_WR) < 0 ? -errno : 0;
}

static void tls_close(struct m0_transport *t)
{
        if (t->impl) {
                /* Best effort: a close without close_notify would also lose the TLS 1.2 session
                 * from the cache (D165). Sent already after a shutdown; never after an error. */
                (void)m0__tls_shutdown(conn_of(t));
                m0__tls_conn_free(conn_of(t));
                t->impl = NULL;
        }
        if (t->fd >= 0)
                close(t->fd);
        t->fd = -1;
}

static size_t tls_pending(struct m0_transport *t)
{
        return t->impl ? m0__tls_pending(conn_of(t)) : 0;
}

static const char *tls_session(struct m0_transport *t, int *ret_resumed)
{
        *ret_resumed = m0__tls_resumed(conn_of(t));
        return m0__tls_version(conn_of(t));
}

static const char *tls_alpn(struct m0_transport *t)
{
        return m0__tls_alpn(conn_of(t));
}

const struct m0_transport_ops m0__transport_tls = {
        .name = "tls",
        .handshake = tls_handshake,
        .read = tls_read,
        .writev = tls_writev,
        .sendfile = tls_sendfile,
        .shutdown = tls_shutdown,
        .close = tls_close,
        .pending = tls_pending,
        .session = tls_session,
        .alpn = tls_alpn,
};

int m0__tls_transport_open(struct m0_transport *t, struct m0_tls *tls, int fd)
{
        struct m0_tls_conn *c;
        int r = m0__tls_conn_new(&c, tls, fd);
        if (r < 0)
                return r;
        *t = (struct m0_transport){.ops = &m0__transport_tls, .fd = fd, .impl = c};
        return 0;
}
