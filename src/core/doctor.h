/* SPDX-License-Identifier: MIT */
/* doctor.h: doctor.c, --doctor: what would be served, every check, and the exit serving would give
 * (D1). */
#ifndef M0_DOCTOR_H
#define M0_DOCTOR_H

#include <stddef.h>
#include <stdio.h>

#include "preflight.h"

struct m0_host;

/* Print the doctor's report; returns the exit code serving would return. */
int m0__doctor(struct m0_host *h, const struct m0_check *checks, size_t n, int first, FILE *out);

#endif /* M0_DOCTOR_H */
