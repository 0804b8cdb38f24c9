/* SPDX-License-Identifier: MIT */
/* buf.c: the growable byte buffer every module writes into, and the clock. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"

int m0__buf_reserve(struct m0_buf *b, size_t extra)
{
        if (b->cap - b->len >= extra)
                return 0;
        if (extra > SIZE_MAX / 2 - b->len)
                return -ENOMEM;
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < extra)
                cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p)
                return -ENOMEM;
        b->data = p;
        b->cap = cap;
        return 0;
}

int m0__buf_append(struct m0_buf *b, const void *data, size_t len)
{
        int r = m0__buf_reserve(b, len);
        if (r < 0)
                return r;
        if (len)
                memcpy(b->data + b->len, data, len);
        b->len += len;
        return 0;
}

int m0__buf_vprintf(struct m0_buf *b, const char *fmt, va_list ap)
{
        va_list aq;
        va_copy(aq, ap);
        int r = m0__buf_reserve(b, 64);
        if (r < 0)
                goto out;
        int n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, aq);
        if (n < 0) {
                r = -EINVAL;
                goto out;
        }
        if ((size_t)n >= b->cap - b->len) {
                r = m0__buf_reserve(b, (size_t)n + 1);
                if (r < 0)
                        goto out;
                vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        }
        b->len += (size_t)n;
        r = 0;
out:
        va_end(aq);
        return r;
}

int m0__buf_printf(struct m0_buf *b, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = m0__buf_vprintf(b, fmt, ap);
        va_end(ap);
        return r;
}

void m0__buf_free(struct m0_buf *b)
{
        free(b->data);
        b->data = NULL;
        b->len = b->cap = 0;
}
