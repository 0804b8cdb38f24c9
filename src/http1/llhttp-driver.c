/* SPDX-License-Identifier: MIT */
/* llhttp-driver.c: llhttp over a connection's bytes (its callbacks, beside the loop that drives
 * them), and each request it completes handed to dispatch.c, within the connection's slice of the
 * turn (H1, H2, H3, D41); and the same reading of one head alone, for the metrics sockets (O1). */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "conn.h"
#include "config.h"
#include "head-checks.h"

/* ---- llhttp's callbacks: they run inside llhttp_execute() on the loop's thread ---- */

static int on_message_begin(llhttp_t *p)
{
        struct m0_conn *c = p->data;
        c->phase = PH_HEAD;
        c->req_started = false;
        c->err_status = 0;
        c->body.len = 0;
        c->routed = false; /* body_ahead() routes a request with a body, and bounds it */
        c->discard = false;
        c->t_start = c->read_ns; /* the request arrived with the read that brought this byte */
        /* Its first byte may have come before this parse (on_readable, keep_rest). */
        if (!c->read_deadline)
                m0__read_begin(c, M0_TIMER_HEAD);
        m0__wait_read(c);
        return 0;
}

static int on_method(llhttp_t *p, const char *at, size_t len)
{
        (void)len;
        struct m0_conn *c = p->data;
        if (!c->req_started) {
                c->req_off = (uint32_t)(at - c->loop->cur_base);
                c->req_started = true;
        }
        return 0;
}

/* The request's expectation (RFC 9110 10.1.1): 0 none (or HTTP/1.0's, which is ignored), 1
 * 100-continue, -1 one the host does not know (417). */
static int expectation(const llhttp_t *p, const char *head, size_t hl)
{
        size_t n = 0;
        const char *e = p->http_minor >= 1 ? m0__head_field(head, hl, "expect", &n) : NULL;
        if (!e)
                return 0;
        return n == 12 && strncasecmp(e, "100-continue", 12) == 0 ? 1 : -1;
}

/*
 * A request with a body whose head is whole, before one byte of the body is taken (Q6, H8): it is
 * routed now. One the host answers itself (404, 405, 415, a capture's 400, OPTIONS) has its body
 * read and dropped when it comes anyway within the bound; a client holding the body back for
 * 100-continue, or announcing more than the bound, gets that answer now, and the connection
 * closes. One to serve is refused 413 past its route's bound, and else asked for its body.
 */
static int body_ahead(struct m0_conn *c, char *head, size_t hl)
{
        llhttp_t *p = &c->parser;
        struct m0_hctx *l = c->loop;
        m0__read_begin(c, M0_TIMER_BODY);
        m0__wait_read(c);
        int expect = expectation(p, head, hl);
        if (expect < 0) {
                c->err_status = 417;
                return -1;
        }
        struct m0_rview v = {.method = p->method, .head = head, .head_len = hl};
        m0__http_target(head, hl, &v.path, &v.path_len);
        struct m0_decision d;
        m0__route_decide(l, &v, NULL, true, &d);
        c->routed = true;
        c->body_limit = d.body_limit;
        c->body_seen = 0;
        bool over = (p->flags & F_CONTENT_LENGTH) && p->content_length > d.body_limit;
        if (over && !d.status)
                d.status = 413; /* routing's answer: it carries the app's CORS lines (Q5) */
        if (d.status) {
                c->discard = true;
                if (!expect && !over)
                        return 0;
                m0__route_answer(c, &v, &d, p->method == HTTP_HEAD, M0__CONN_CLOSE);
                c->err_status = M0__ERR_ANSWERED;
                return -1;
        }
        if (expect) {
                static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
                if (m0__buf_append(&l->wbuf, cont, sizeof(cont) - 1) < 0)
                        return -1;
        }
        return 0;
}

static int on_headers_complete(llhttp_t *p)
{
        struct m0_conn *c = p->data;
        struct m0_hctx *l = c->loop;
        const struct m0_config *cfg = l->cfg;
        size_t hl = 0;
        /* The head is contiguous in the buffer being parsed: it is never dropped while in PH_HEAD. */
        char *head = (char *)l->cur_base + c->req_off;
        bool has_body =
                (p->flags & F_CHUNKED) || ((p->flags & F_CONTENT_LENGTH) && p->content_length);
        /* Without a body the request is answered within this very llhttp_execute(): the head is
         * checked and indexed into the loop's request in one walk. With one, other connections
         * may be served before it completes, so the head stays intact and is indexed then. */
        c->indexed = !has_body; /* whatever the walk says: the head is cut into the request */
        int st = m0__http_head_parse(head, l->cur_len - c->req_off, cfg, has_body ? NULL : &l->req,
                                     &hl);
        if (st) {
                c->err_status = st;
                return -1;
        }
        c->head_len = (uint32_t)hl;
        c->read_deadline = 0; /* the head is whole */
        if (p->method == HTTP_CONNECT) {
                c->err_status = 405;
                return -1;
        }
        c->phase = PH_BODY;
        return has_body ? body_ahead(c, head, hl) : 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
        struct m0_conn *c = p->data;
        if (c->body_seen + len > c->body_limit) {
                c->err_status = 413;
                return -1;
        }
        c->body_seen += len;
        if (c->discard)
                return 0; /* the host answers it: nothing of the body is kept */
        if (m0__buf_append(&c->body, at, len) < 0) {
                c->err_status = 500;
                return -1;
        }
        return 0;
}

static int on_message_complete(llhttp_t *p)
{
        struct m0_conn *c = p->data;
        c->read_deadline = 0; /* the body is whole */
        /* Stop here so the request is answered before the next pipelined one is parsed. */
        return HPE_PAUSED;
}

static const llhttp_settings_t settings = {
        .on_message_begin = on_message_begin,
        .on_method = on_method,
        .on_headers_complete = on_headers_complete,
        .on_body = on_body,
        .on_message_complete = on_message_complete,
};

void m0__parser_init(struct m0_conn *c)
{
        llhttp_init(&c->parser, HTTP_REQUEST, &settings);
        c->parser.data = c;
}

/* The last four bytes llhttp consumed, most recent in the low byte. */
#define TAIL_CRLFCRLF 0x0d0a0d0au

static void tail_note(struct m0_conn *c, const char *p, size_t n)
{
        size_t i = n > 4 ? n - 4 : 0;
        for (; i < n; i++)
                c->tail = (c->tail << 8) | (uint8_t)p[i];
}

/* ---- a connection's slice of a turn (D41) ---- */

void m0__slice_begin(struct m0_conn *c)
{
        struct m0_hctx *l = c->loop;
        l->slice_left = l->cfg->slice_requests;
        l->loop.turn_served = true;
}

/*
 * Whether the connection being served may run one more request now: not past its slice, nor,
 * once it ran one, past the turn's budget (which then ends the slice too). The first request of
 * a slice always runs, so that a turn makes progress whatever its budget.
 */
static bool slice_goes_on(struct m0_hctx *l)
{
        if (l->slice_left == 0)
                return false;
        if (l->slice_left < l->cfg->slice_requests && m0__turn_spent(&l->loop)) {
                l->slice_left = 0;
                return false;
        }
        return true;
}

size_t m0__conn_parse(struct m0_conn *c, char *base, size_t len, size_t pos)
{
        struct m0_hctx *l = c->loop;
        const struct m0_config *cfg = l->cfg;
        l->cur_base = base;
        l->cur_len = len;
        l->cur_conn = c;
        /* A file answer's body goes out before anything behind it is parsed (SF2). */
        while (pos < len && !c->closing && !c->busy && !c->stream && !c->file.on && !c->upgraded) {
                if (l->wbuf.len >= cfg->max_output_bytes || !slice_goes_on(l))
                        break;
                size_t from = pos;
                llhttp_errno_t e = llhttp_execute(&c->parser, base + pos, len - pos);
                if (e == HPE_OK) {
                        tail_note(c, base + from, len - from);
                        pos = len;
                        break;
                }
                if (e == HPE_PAUSED) {
                        pos = (size_t)(llhttp_get_error_pos(&c->parser) - base);
                        tail_note(c, base + from, pos - from);
                        llhttp_resume(&c->parser);
                        /* A chunked body ends with CRLF CRLF (after the last chunk, or its
                         * trailers); llhttp 8.1 also takes a bare LF there (H3). */
                        if ((c->parser.flags & F_CHUNKED) && c->tail != TAIL_CRLFCRLF) {
                                m0__conn_refuse(c, 400);
                                pos = len;
                                break;
                        }
                        /* An Upgrade is not taken: the request is answered, then the
                         * connection closes, since what follows is not HTTP/1.1. */
                        if (c->parser.upgrade)
                                c->closing = true;
                        l->slice_left--;
                        m0__conn_dispatch(c);
                        c->phase = PH_IDLE;
                        continue;
                }
                if (e == HPE_PAUSED_UPGRADE) {
                        c->closing = true; /* answered already (above); read nothing more */
                        pos = len;
                        break;
                }
                if (c->err_status == M0__ERR_ANSWERED)
                        c->closing = true;
                else
                        m0__conn_refuse(c, c->err_status ? c->err_status : 400);
                pos = len;
        }
        if (c->closing || c->busy || c->stream || c->upgraded) {
                l->cur_conn = NULL;
                /* an upgraded connection's bytes after the request are the new protocol's */
                return c->busy || c->upgraded ? pos : len;
        }
        /* Heads still arriving: 414 for a request line past the URI bound, 431 past the head bound. */
        if (c->phase == PH_HEAD && c->req_started) {
                int st = m0__http_head_pending(base + c->req_off, len - c->req_off, cfg);
                if (st)
                        m0__conn_refuse(c, st);
        }
        l->cur_conn = NULL;
        return pos;
}

/* ---- a request head read alone, outside the loops (the metrics sockets) ---- */

static int reader_on_method(llhttp_t *p, const char *at, size_t len)
{
        (void)len;
        struct m0_head_reader *r = p->data;
        if (!r->started) {
                r->off = (size_t)(at - r->buf);
                r->started = true;
        }
        return 0;
}

/* The head is whole: the walk a loop's connection makes in on_headers_complete(), then a pause,
 * since the body is not read. */
static int reader_on_headers_complete(llhttp_t *p)
{
        struct m0_head_reader *r = p->data;
        size_t hl;
        r->walked = true;
        r->status = m0__http_head_parse(r->buf + r->off, r->len - r->off, r->cfg, r->req, &hl);
        return r->status ? -1 : HPE_PAUSED;
}

static const llhttp_settings_t reader_settings = {
        .on_method = reader_on_method,
        .on_headers_complete = reader_on_headers_complete,
};

void m0__head_reader_init(struct m0_head_reader *r, const struct m0_config *cfg)
{
        *r = (struct m0_head_reader){.cfg = cfg};
        llhttp_init(&r->parser, HTTP_REQUEST, &reader_settings);
        r->parser.data = r;
}

int m0__head_read(struct m0_head_reader *r, char *buf, size_t seen, size_t len, struct m0_req *req)
{
        if (r->walked)
                return r->status;
        r->buf = buf;
        r->len = len;
        r->req = req;
        llhttp_errno_t e = llhttp_execute(&r->parser, buf + seen, len - seen);
        r->req = NULL;
        if (r->walked)
                return r->status;
        if (e != HPE_OK)
                return 400; /* what llhttp refused before the head was whole */
        int st = r->started ? m0__http_head_pending(buf + r->off, len - r->off, r->cfg) : 0;
        return st ? st : -EAGAIN;
}

bool m0__head_read_is_head(const struct m0_head_reader *r)
{
        if (r->walked && !r->status)
                return r->parser.method == HTTP_HEAD; /* the walk cut the method out */
        return r->started && r->len - r->off >= 5 && memcmp(r->buf + r->off, "HEAD ", 5) == 0;
}
