/* SPDX-License-Identifier: MIT */
/* fault.c: an LD_PRELOAD shim for the integration tests: makes the Nth epoll_create1() fail
 * (M0TEST_EPOLL_FAIL_AT=N) and records every close() of a descriptor below 3
 * (M0TEST_LOW_CLOSE_LOG=file), so a test can see a setup failure handled without closing
 * stdin, stdout or stderr. Built by the test that uses it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

static atomic_int epoll_calls;

int epoll_create1(int flags)
{
        int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "epoll_create1");
        const char *at = getenv("M0TEST_EPOLL_FAIL_AT");
        if (at && atomic_fetch_add(&epoll_calls, 1) + 1 == atoi(at)) {
                errno = EMFILE;
                return -1;
        }
        return real(flags);
}

int close(int fd)
{
        int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "close");
        const char *log = fd >= 0 && fd < 3 ? getenv("M0TEST_LOW_CLOSE_LOG") : NULL;
        if (log) {
                int lf = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
                if (lf >= 0) {
                        char line[16];
                        int n = snprintf(line, sizeof(line), "%d\n", fd);
                        ssize_t w = write(lf, line, (size_t)n);
                        (void)w;
                        real(lf);
                }
        }
        return real(fd);
}
