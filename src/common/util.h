/* SPDX-License-Identifier: MIT */
/* util.h: what every module of libm0 uses: exit statuses, a few macros, the monotonic clock. */
#ifndef M0_UTIL_H
#define M0_UTIL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "m0.h"

/* The statuses m0_main() returns (m0(8)). */
#define M0__EXIT_OK 0
#define M0__EXIT_FAIL 1
#define M0__EXIT_USAGE 2
#define M0__EXIT_CONFIG 78

#define M0__ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define M0__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define M0__LIKELY(x) __builtin_expect(!!(x), 1)

/* The struct of type `type` whose member `member` is at `ptr`. */
#define M0__CONTAINER_OF(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* Monotonic milliseconds. */
static inline uint64_t m0__now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A knob's number (config.c), and m0_req_query_int()'s (AP1): decimal digits alone, no sign, no
 * space, up to 2^64 - 1. 0 and *ret; -EINVAL (not such a number), -ERANGE (past 2^64 - 1). Here,
 * below both the configuration and the request, so neither folder calls into the other's. */
static inline int m0__parse_uint(const char *v, uint64_t *ret)
{
        /* strtoull() alone takes a sign and leading space, and "-1" as 2^64 - 1 */
        if (*v < '0' || *v > '9')
                return -EINVAL;
        errno = 0;
        char *end;
        unsigned long long x = strtoull(v, &end, 10);
        if (*end)
                return -EINVAL;
        if (errno == ERANGE)
                return -ERANGE;
        *ret = x;
        return 0;
}

#endif /* M0_UTIL_H */
