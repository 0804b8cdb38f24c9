/* SPDX-License-Identifier: MIT */
/* sockio.h: a connection's socket read and written by the system call itself (D259), for the
 * transports (transport.c's plain socket, src/tls/io.c's record BIO). */
#ifndef M0_SOCKIO_H
#define M0_SOCKIO_H

#include <errno.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/*
 * glibc's read(), recv(), write() and send() are cancellation points: in a process with threads
 * each wraps its call in __pthread_enable_asynccancel() and __pthread_disable_asynccancel(), two
 * atomic operations on the thread's cancel state, for a cancellation m0 never asks for (no
 * pthread_cancel() on any of its threads; an app has no handle on them). syscall() is no
 * cancellation point. recvfrom and sendto with no address are recv and send: on a socket they
 * skip read()'s and write()'s file-position and permission steps in the kernel. Both retry a
 * call a signal interrupted (EINTR); -1 with errno otherwise, as the calls themselves.
 */
static inline ssize_t m0__sock_recv(int fd, void *buf, size_t len)
{
        ssize_t n;
        do
                n = syscall(SYS_recvfrom, fd, buf, len, 0, NULL, NULL);
        while (n < 0 && errno == EINTR);
        return n;
}

static inline ssize_t m0__sock_send(int fd, const void *buf, size_t len, int flags)
{
        ssize_t n;
        do
                n = syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
        while (n < 0 && errno == EINTR);
        return n;
}

#endif
