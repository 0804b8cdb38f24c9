/* SPDX-License-Identifier: MIT */
/* transport.h: transport.c, what moves one connection's bytes (LY2): a table of operations over
 * the connection, plain TCP or Unix (m0__transport_plain) or TLS (src/tls/tls-transport.c), as
 * nginx's connection carries recv/send pointers that its TLS code swaps. Nothing above a transport calls read(),
 * write(), writev(), send() or close() on a connection's descriptor. */
#ifndef M0_TRANSPORT_H
#define M0_TRANSPORT_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

/* struct m0_transport's `want`: what readiness lets the operation that returned -EAGAIN go on.
 * A plain socket's read wants to read and its write to write; TLS's may want the other (OpenSSL's
 * SSL_ERROR_WANT_READ/WANT_WRITE are a want, never an error). */
#define M0_WANT_READ 1u
#define M0_WANT_WRITE 2u

struct m0_transport;

/*
 * Every operation returns bytes moved (> 0), 0 at the peer's end of file (read), -EAGAIN with
 * `want` set when it cannot go on now, or another -errno (the connection is broken; close it).
 * EINTR is retried inside.
 */
struct m0_transport_ops {
        const char *name;
        /* Optional (NULL: none): what must happen before the protocol's first byte (a TLS
         * handshake). 0 done, -EAGAIN with `want`, or -errno. */
        int (*handshake)(struct m0_transport *t);
        ssize_t (*read)(struct m0_transport *t, void *buf, size_t len);
        ssize_t (*writev)(struct m0_transport *t, const struct iovec *iov, int n);
        ssize_t (*sendfile)(struct m0_transport *t, int fd, off_t *off, size_t n);
        /* Shut the write side (after a close_notify, for TLS). 0 or -errno. */
        int (*shutdown)(struct m0_transport *t);
        /* Close the descriptor and free `impl`; `fd` becomes -1. */
        void (*close)(struct m0_transport *t);
        /* Optional (NULL: none): bytes the transport already holds for the next read, which no
         * readiness of the descriptor will announce (TLS: a record's plaintext not yet taken). */
        size_t (*pending)(struct m0_transport *t);
        /* Optional (NULL: none): once the handshake is done, the protocol version it agreed on
         * ("TLSv1.3") and whether it resumed a session; NULL for a transport without one. */
        const char *(*session)(struct m0_transport *t, int *ret_resumed);
        /* Optional (NULL: none): once the handshake is done, the application protocol it agreed
         * on by ALPN ("h2", "http/1.1"), or "" for none. */
        const char *(*alpn)(struct m0_transport *t);
};

/* One connection's transport. `fd` is -1 once closed. */
struct m0_transport {
        const struct m0_transport_ops *ops;
        int fd;
        unsigned want; /* M0_WANT_*: set by the operation that returned -EAGAIN */
        void *impl;    /* the transport's own state (TLS: its SSL *) */
};

/* A socket as it is: TCP or Unix. */
extern const struct m0_transport_ops m0__transport_plain;

/* Set `t` up over accepted socket `fd` with `ops`. 0 (the plain transport cannot fail). */
int m0__transport_open(struct m0_transport *t, const struct m0_transport_ops *ops, int fd);

/* What the transport holds for the next read without the descriptor (0 for a plain socket). */
static inline size_t m0__transport_pending(struct m0_transport *t)
{
        return t->ops->pending ? t->ops->pending(t) : 0;
}

/* One buffer through writev. */
static inline ssize_t m0__transport_write(struct m0_transport *t, const void *buf, size_t len)
{
        struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
        return t->ops->writev(t, &iov, 1);
}

#endif /* M0_TRANSPORT_H */
