/* SPDX-License-Identifier: MIT */
/* log.h: log.c, one line per event: a structured journal entry under journald, a plain line
 * elsewhere (J1). */
#ifndef M0_LOG_H
#define M0_LOG_H

#include <stdbool.h>
#include <stddef.h>

#include "m0.h"

/* Message ids (J1), one per event a person acts on; the catalog explains them. */
#define M0_MID_READY "9b3b6f1e2d4c4a7e8f0a1b2c3d4e5f60"
#define M0_MID_REFUSED "9b3b6f1e2d4c4a7e8f0a1b2c3d4e5f61"
#define M0_MID_LOOP_CRASHED "9b3b6f1e2d4c4a7e8f0a1b2c3d4e5f62"
#define M0_MID_LOOP_STUCK "9b3b6f1e2d4c4a7e8f0a1b2c3d4e5f63"
#define M0_MID_DRAIN_TIMEOUT "9b3b6f1e2d4c4a7e8f0a1b2c3d4e5f64"

void m0__log_init(const char *app_name);
/* Whether lines go to journald as structured entries (J1). */
bool m0__log_journal(void);
/* Log one line; `loop` is -1 when no loop speaks; `mid` may be NULL. Thread-safe. */
void m0__log(int prio, int loop, const char *mid, const char *fmt, ...) M0_PRINTF(4, 5);

#define M0__LOG_FIELDS_MAX 8
/* m0__log() with more journal fields: `fields` are "NAME=value" strings (up to
 * M0__LOG_FIELDS_MAX), added to the structured entry under journald and left out of the plain
 * line, which says the same in words. */
void m0__log_fields(int prio, int loop, const char *const *fields, size_t nfields, const char *fmt,
                    ...) M0_PRINTF(5, 6);

#endif /* M0_LOG_H */
