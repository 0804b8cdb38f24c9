/* SPDX-License-Identifier: MIT */
/* json.h: json.c, JSON through jansson (SPEC Q3): a request's body, a response's, an event's
 * data, and strings made fit for a JSON document whatever their bytes (D47). */
#ifndef M0_JSON_H
#define M0_JSON_H

#include <stdbool.h>

#include "m0.h"

/* The deepest M0_JSON_MAX_DEPTH: jansson's own bound on its parser's recursion. */
#define M0__JSON_DEPTH_MAX 2048

/* A JSON string of `s` that is valid UTF-8 whatever the bytes: each byte that is not part of a
 * well-formed sequence becomes U+FFFD (D47). A new reference, or NULL on ENOMEM. */
json_t *m0__json_string_lossy(const char *s);
/* Whether the NUL-terminated `s` is well-formed UTF-8 (RFC 3629), as jansson requires. */
bool m0__utf8_ok(const char *s);
/* Append `json` serialized compact to the body. 0, -EINVAL (jansson cannot write it; nothing
 * is appended), -ENOMEM. */
int m0__res_json_append(m0_res *res, const json_t *json);

#endif /* M0_JSON_H */
