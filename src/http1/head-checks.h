/* SPDX-License-Identifier: MIT */
/* head-checks.h: head-checks.c, what H3 forbids in a request head and llhttp may let through, checked and
 * indexed in one walk. */
#ifndef M0_HTTP_H
#define M0_HTTP_H

#include <stddef.h>

struct m0_config;
struct m0_req;

/* 1 for the bytes RFC 9110 allows in a token (a field name, a method). */
extern const unsigned char m0__tchar[256];
/* 1 for the bytes RFC 9110 allows in a field value: HTAB, SP, VCHAR, obs-text. */
extern const unsigned char m0__vchar[256];

/*
 * Check a complete request head at `head` for what H3 forbids and llhttp may let through, and
 * index it. Returns 0 and the head's length in *ret_len, or an HTTP status (400, 414, 431)
 * for a head that must be refused. When `req` is non-NULL the head is also cut into
 * NUL-terminated strings and indexed into req (headers up to `max_fields`); a head refused
 * leaves req's headers the fields cut before the refusal, for the refusal's own lines (Q5).
 */
int m0__http_head_parse(char *head, size_t avail, const struct m0_config *cfg, struct m0_req *req,
                        size_t *ret_len);

/* The path of a head m0__http_head_parse() accepted without indexing it: where it is in the head
 * and its length (up to the query; past the authority of an absolute-form target). */
void m0__http_target(const char *head, size_t len, const char **ret_path, size_t *ret_len);
/* The first value of field `name` (case-insensitive) in such a head, OWS trimmed, and its
 * length; NULL when absent. The value is not NUL-terminated. */
const char *m0__head_field(const char *head, size_t len, const char *name, size_t *ret_len);

#endif /* M0_HTTP_H */
