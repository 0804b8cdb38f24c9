/* SPDX-License-Identifier: MIT */
/* buf.h: buf.c, a growable byte buffer. */
#ifndef M0_BUF_H
#define M0_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "m0.h"

/* All zeros is an empty buffer that owns nothing. */
struct m0_buf {
        char *data;
        size_t len;
        size_t cap;
};

/* Make room for `extra` more bytes. 0 or -ENOMEM. */
int m0__buf_reserve(struct m0_buf *b, size_t extra);
int m0__buf_append(struct m0_buf *b, const void *data, size_t len);
int m0__buf_vprintf(struct m0_buf *b, const char *fmt, va_list ap);
int m0__buf_printf(struct m0_buf *b, const char *fmt, ...) M0_PRINTF(2, 3);
/* Free what `b` owns and leave it empty; a freed buffer may be freed again. */
void m0__buf_free(struct m0_buf *b);

#endif /* M0_BUF_H */
