/* SPDX-License-Identifier: MIT */
/* head-checks.h: head-checks.c, what H3 forbids in a request head and llhttp may let through, checked and
 * indexed in one walk. */
#ifndef M0_HTTP_H
#define M0_HTTP_H

#include <llhttp.h>
#include <stdbool.h>
#include <stddef.h>

struct m0_config;
struct m0_req;

/* 1 for the bytes RFC 9110 allows in a token (a field name, a method). */
extern const unsigned char m0__tchar[256];
/* 1 for the bytes RFC 9110 allows in a field value: HTAB, SP, VCHAR, obs-text. */
extern const unsigned char m0__vchar[256];

/* Trim OWS (SP, HTAB) from both ends of [*p, *p + *n). */
void m0__http_trim(const char **p, size_t *n);

/*
 * Check a complete request head at `head` for what H3 forbids and llhttp may let through, and
 * index it. Returns 0 and the head's length in *ret_len, or an HTTP status (400, 414, 431)
 * for a head that must be refused. When `req` is non-NULL the head is also cut into
 * NUL-terminated strings and indexed into req (headers up to `max_fields`); a head refused
 * leaves req's headers the fields cut before the refusal, for the refusal's own lines (Q5).
 */
int m0__http_head_parse(char *head, size_t avail, const struct m0_config *cfg, struct m0_req *req,
                        size_t *ret_len);

/* A head still arriving, `have` bytes of it at `head` so far: 414 once its request line is past the
 * URI bound with no end in sight, 431 once it is past the head bound, else 0 (H2). */
int m0__http_head_pending(const char *head, size_t have, const struct m0_config *cfg);

/*
 * One request head read alone the way a loop's connection reads one (H1, H2, H3): llhttp over
 * the bytes as they come, m0__http_head_parse() once llhttp has the whole head, and the bounds of
 * a head still arriving; the body, if any, is not read. For a socket that answers one request
 * outside the loops: the metrics sockets (O1). The head stays in the caller's buffer.
 */
struct m0_head_reader {
        llhttp_t parser;
        const struct m0_config *cfg;
        struct m0_req *req; /* during m0__head_read() */
        char *buf;          /* every byte read so far */
        size_t len;
        size_t off;   /* where the request line begins, past the empty lines llhttp skips */
        bool started; /* the request line began: `off` says where */
        bool walked;  /* the head was whole and checked: `status` is the walk's */
        int status;
};

void m0__head_reader_init(struct m0_head_reader *r, const struct m0_config *cfg);
/*
 * Read on: `buf` holds every byte read so far, `len` of them, the first `seen` of which an earlier
 * call took. Returns -EAGAIN while the head is incomplete and within its bounds; 0 once it is
 * whole and checked, cut into `req` as m0__http_head_parse() cuts it; or the status refusing it
 * (400, 414, 431), the same a loop's connection answers to the same bytes.
 */
int m0__head_read(struct m0_head_reader *r, char *buf, size_t seen, size_t len, struct m0_req *req);
/* Whether the request read asks for HEAD, as far as its bytes tell: its answer, whatever it is, is
 * then a head alone (D100). */
bool m0__head_read_is_head(const struct m0_head_reader *r);

/* The path of a head m0__http_head_parse() accepted without indexing it: where it is in the head
 * and its length (up to the query; past the authority of an absolute-form target). */
void m0__http_target(const char *head, size_t len, const char **ret_path, size_t *ret_len);
/* The first value of field `name` (case-insensitive) in such a head, OWS trimmed, and its
 * length; NULL when absent. The value is not NUL-terminated. */
const char *m0__head_field(const char *head, size_t len, const char *name, size_t *ret_len);

#endif /* M0_HTTP_H */
