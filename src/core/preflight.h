/* SPDX-License-Identifier: MIT */
/* preflight.h: preflight.c, the one list of checks serving and the doctor both run (R2, D1). */
#ifndef M0_CHECKS_H
#define M0_CHECKS_H

#include <stdbool.h>
#include <stddef.h>

struct m0_host;

struct m0_check {
        const char *name;
        bool ok;
        char detail[512]; /* room for libpq's reason and the cause named after it (bus) */
        char fix[256];
};

/* Run the host's checks (R2) in order; returns the index of the first failure or -1. */
int m0__checks_run(struct m0_host *h, struct m0_check *out, size_t n_out, size_t *ret_n);
/* Raise RLIMIT_NOFILE's soft limit to what the connection limit needs (checked by `limits`). */
int m0__limits_raise(struct m0_host *h);
#define M0__CHECKS_MAX 16

#endif /* M0_CHECKS_H */
