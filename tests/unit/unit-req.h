/* SPDX-License-Identifier: MIT */
/* unit-req.h: a request indexed from a real head, as a loop builds it, for the tests of what a
 * handler reads (request, cookies, forms, JSON, the host's answers). */
#ifndef M0_UNIT_REQ_H
#define M0_UNIT_REQ_H

#include "config.h"
#include "head-checks.h"
#include "request.h"
#include "response.h"
#include "unit.h"

struct parsed {
        char *buf;
        struct m0_req req;
};

/* The host's defaults, as serving reads them with no flag and no variable. */
static inline void unit_config(struct m0_config *cfg)
{
        char *argv[] = {"app", NULL};
        char *envp[] = {NULL};
        char err[256] = "";
        ck_assert_int_eq(m0__config_parse(cfg, "app", 1, argv, envp, NULL, err, sizeof(err)),
                         M0_CONFIG_SERVE);
}

/* What the handler's helpers made ends, then the request itself. */
static inline void parsed_free(struct parsed *p)
{
        m0__req_end(&p->req);
        free(p->buf);
        free(p->req.headers);
        m0__buf_free(&p->req.arena);
        m0__buf_free(&p->req.params);
        memset(p, 0, sizeof(*p));
}

/* Index `head` (a whole request head) with `body` (len bytes) as the request's body. */
static inline void parse_request(struct parsed *p, const struct m0_config *cfg, const char *head,
                                 const void *body, size_t len)
{
        size_t n = strlen(head);
        memset(p, 0, sizeof(*p));
        p->buf = malloc(n + len + 1);
        ck_assert_ptr_nonnull(p->buf);
        memcpy(p->buf, head, n);
        if (len)
                memcpy(p->buf + n, body, len);
        p->req.headers = calloc(cfg->max_header_fields, sizeof(*p->req.headers));
        ck_assert_ptr_nonnull(p->req.headers);
        size_t hl = 0;
        ck_assert_int_eq(m0__http_head_parse(p->buf, n, cfg, &p->req, &hl), 0);
        ck_assert_uint_eq(hl, n);
        p->req.body = p->buf + n;
        p->req.body_len = len;
        p->req.loop = 0;
        p->req.thread = -1;
        p->req.json_max_depth = cfg->json_max_depth;
}

/* An empty response, as a handler gets it; and its end. */
static inline void unit_res_init(struct m0_res *res)
{
        memset(res, 0, sizeof(*res));
        m0__res_reset(res);
}

static inline void unit_res_free(struct m0_res *res)
{
        m0__buf_free(&res->head);
        m0__buf_free(&res->body);
}

static inline void parse_head(struct parsed *p, const struct m0_config *cfg, const char *head)
{
        parse_request(p, cfg, head, "", 0);
}

#endif /* M0_UNIT_REQ_H */
