/* SPDX-License-Identifier: MIT */
/* transport.c: the plain transport, a TCP or Unix socket as it is (LY2). */
#include <errno.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sockio.h"
#include "transport.h"

static ssize_t plain_read(struct m0_transport *t, void *buf, size_t len)
{
        ssize_t n = m0__sock_recv(t->fd, buf, len);
        if (n >= 0)
                return n;
        t->want = M0_WANT_READ;
        return -errno;
}

static ssize_t plain_writev(struct m0_transport *t, const struct iovec *iov, int n)
{
        /* send or sendmsg for MSG_NOSIGNAL: a client gone is EPIPE, not SIGPIPE; one buffer by
         * send(), which copies no msghdr and no iovec array in (D239) */
        struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
        ssize_t w;
        do
                w = n == 1 ? m0__sock_send(t->fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL)
                           : sendmsg(t->fd, &mh, MSG_NOSIGNAL);
        while (w < 0 && errno == EINTR);
        if (w >= 0)
                return w;
        t->want = M0_WANT_WRITE;
        return -errno;
}

static ssize_t plain_sendfile(struct m0_transport *t, int fd, off_t *off, size_t n)
{
        ssize_t w;
        do
                w = sendfile(t->fd, fd, off, n);
        while (w < 0 && errno == EINTR);
        if (w >= 0)
                return w;
        t->want = M0_WANT_WRITE;
        return -errno;
}

static int plain_shutdown(struct m0_transport *t)
{
        return shutdown(t->fd, SHUT_WR) < 0 ? -errno : 0;
}

static void plain_close(struct m0_transport *t)
{
        if (t->fd >= 0)
                close(t->fd);
        t->fd = -1;
}

const struct m0_transport_ops m0__transport_plain = {
        .name = "plain",
        .handshake = NULL,
        .read = plain_read,
        .writev = plain_writev,
        .sendfile = plain_sendfile,
        .shutdown = plain_shutdown,
        .close = plain_close,
};

int m0__transport_open(struct m0_transport *t, const struct m0_transport_ops *ops, int fd)
{
        *t = (struct m0_transport){.ops = ops, .fd = fd};
        return 0;
}
