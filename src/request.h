/* SPDX-License-Identifier: MIT */
/* request.h: request.c, the request as handlers see it. */
#ifndef M0_REQUEST_H
#define M0_REQUEST_H

#include <stddef.h>

#include "buf.h"
#include "m0.h"

/* The request as handlers see it; one per loop, reused. */
struct m0_header {
        const char *name;
        const char *value;
};

struct m0_req {
        const char *method;
        const char *path;
        const char *query;
        struct m0_header *headers;
        size_t nheaders;
        const char *body;
        size_t body_len;
        int loop;
        int thread;
        struct m0_buf arena; /* decoded query values */
};

#endif /* M0_REQUEST_H */
