/* SPDX-License-Identifier: MIT */
/* h2.c: HTTP/2 over one connection (HT1, HT2, HT4, HT5): libnghttp2's server session takes the
 * transport's bytes and gives bytes back; each request it completes is handed to dispatch.c as
 * an m0_req, and each m0_res comes back as HEADERS and DATA. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>

#include <nghttp2/nghttp2.h>

#include "error.h"
#include "h2.h"
#include "config.h"
#include "sse.h"

/* CONTINUATION frames a header block may take (nghttp2's own default, set so the defence does
 * not hang on a default, D153). */
#define H2_MAX_CONTINUATIONS 8
/* Outbound SETTINGS and PING acknowledgements a client may make m0 queue (D153). */
#define H2_MAX_OUTBOUND_ACK 1000
/* Entries one SETTINGS frame may carry (nghttp2's default, set as the two above are, D225):
 * each is worked through, and RFC 9113 defines six. */
#define H2_MAX_SETTINGS 32
/* Bytes gathered from the session before one write. */
#define H2_OUT_CHUNK (64 * 1024)
/* Bytes of a WebSocket's frames a stream keeps while its windows are shut; wslay keeps the rest,
 * within M0_WS_MAX_QUEUED (D231). */
#define H2_WS_OUT_BYTES (16 * 1024)
/* Stream records a loop keeps once their streams closed, for its next streams, with their
 * fields' and answer's buffers while these are at most H2_SPARE_BUF bytes (D249). */
#define H2_SPARE_STREAMS 128
#define H2_SPARE_BUF 1024

/* Under AddressSanitizer a spare record is poisoned past its link, as a freed one would be, so
 * that a stream's pointer kept past its close is still caught. */
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#define SPARE_POISON(st)                                                                           \
        ASAN_POISON_MEMORY_REGION((char *)(st) + sizeof((st)->link),                               \
                                  sizeof(*(st)) - sizeof((st)->link))
#define SPARE_UNPOISON(st)                                                                         \
        ASAN_UNPOISON_MEMORY_REGION((char *)(st) + sizeof((st)->link),                             \
                                    sizeof(*(st)) - sizeof((st)->link))
#else
#define SPARE_POISON(st) ((void)(st))
#define SPARE_UNPOISON(st) ((void)(st))
#endif

/* One request stream, from its HEADERS until nghttp2 closes it. */
struct h2_stream {
        struct m0_link link; /* on the session's streams */
        int32_t id;
        struct m0_buf fields;            /* each name and value NUL-terminated, in arrival order */
        uint32_t nfields;                /* regular fields, :authority counted as Host */
        size_t head_bytes;               /* what the head would take as HTTP/1.1's lines */
        ssize_t method, path, authority; /* offsets into `fields`, -1 when absent */
        ssize_t protocol;                /* ... RFC 8441's :protocol */
        ssize_t query;                   /* ... of the query, once the path is cut at its '?' */
        struct m0_buf cookie;            /* the cookie fields, joined with "; " (RFC 9113 8.2.3) */
        bool has_host;
        int refuse;     /* the head's own refusal (431), answered when it is whole */
        bool head_done; /* the request's HEADERS (and CONTINUATIONs) are whole */
        bool req_done;  /* ... and its body: END_STREAM came */
        bool answered;  /* dispatched, or refused */
        bool discard;   /* its body is dropped: the host answers it */
        bool has_body;  /* DATA announced (no END_STREAM on HEADERS) */
        uint64_t body_limit, body_seen;
        struct m0_buf body;
        uint64_t held;     /* body bytes taken and not consumed: its windows stay shut for them */
        struct m0_buf out; /* the answer's body, which the data provider reads */
        size_t out_off;
        /* or a files route's file (SF2): its own descriptor, read from `file_off` on for
         * `file_left` more bytes; -1 when the body is `out` */
        int file_fd;
        uint64_t file_off, file_left;
        uint64_t t_start;
        /* An event stream (HT3): its place among the loop's streams (sse.c), a connection of
         * the loop's in name only, whose bytes wait in `out` as the windows let them go;
         * `ending` once its last byte is there. */
        struct m0_conn *sse;
        bool ending;
        /* An extended CONNECT (RFC 8441, D230): `tunnel`; once a WebSocket took it, `ws` is its
         * stand-in connection (D231), and `in` holds the client's DATA its wslay has not read
         * (the windows open as it reads); `ws_blocked` while wslay waits for `out` to empty. */
        bool tunnel;
        bool ws_blocked;
        bool in_shut; /* its wslay reads no more: what comes is dropped, its windows opened */
        struct m0_conn *ws;
        struct m0_buf in;
        size_t in_off;
};

struct m0_h2 {
        nghttp2_session *s;
        struct m0_conn *c;
        struct m0_list streams; /* of h2_stream */
        uint64_t body_bytes;    /* of the streams' bodies kept, not yet dispatched (D155) */
        bool notice;            /* the drain's first GOAWAY (2^31-1) is submitted */
        bool goaway;            /* its last one, or the idle timeout's */
        bool ended;             /* its ending GOAWAY is queued: what comes is ignored */
        uint32_t nevents;       /* its event streams (HT3): it is not idle while any */
        uint32_t nws;           /* its WebSockets (D231): nor while any; each has its bounds */
        bool freeing;           /* its session is going: its WebSockets move no more bytes */
};

static void h2_send(struct m0_h2 *h);

/* ---- the request's head ---- */

static struct h2_stream *stream_of(struct m0_h2 *h, int32_t id)
{
        return nghttp2_session_get_stream_user_data(h->s, id);
}

/* A stream may have its body's bytes consumed (its window and the connection's opened again)
 * while the connection keeps at most M0_MAX_BODY_BYTES of bodies, or when its own is the only
 * one kept, which its route's bound holds (D155). */
static bool may_consume(const struct m0_h2 *h, const struct h2_stream *st)
{
        return h->body_bytes <= h->c->loop->cfg->max_body_bytes || h->body_bytes == st->body.len;
}

/* Bytes left unconsumed are taken now by the streams that may. */
static void release(struct m0_h2 *h)
{
        for (struct m0_link *n = h->streams.head; n; n = n->next) {
                struct h2_stream *st = M0__CONTAINER_OF(n, struct h2_stream, link);
                if (st->held && may_consume(h, st)) {
                        (void)nghttp2_session_consume(h->s, st->id, st->held);
                        st->held = 0;
                }
        }
}

/* The stream's body is let go (dispatched, refused, or its stream closed). */
static void drop_body(struct m0_h2 *h, struct h2_stream *st)
{
        size_t had = st->body.len;
        h->body_bytes -= had;
        m0__buf_free(&st->body);
        /* Only a body let go moves what may_consume() answers; a stream without one (most
         * requests) skips the walk over every open stream, twice a request (M10, D214). */
        if (had)
                release(h);
}

/* The loop's spare records, freed with it (m0__hctx_destroy, through `h2_spare_free`). */
static void spares_free(struct m0_hctx *l)
{
        struct m0_link *n;
        while ((n = l->h2_spare)) {
                struct h2_stream *st = M0__CONTAINER_OF(n, struct h2_stream, link);
                l->h2_spare = n->next;
                SPARE_UNPOISON(st);
                m0__buf_free(&st->fields);
                m0__buf_free(&st->out);
                free(st);
        }
        l->h2_nspare = 0;
}

static void stream_free(struct m0_h2 *h, struct h2_stream *st)
{
        m0__list_unlink(&h->streams, &st->link);
        if (st->ws) { /* a reset stream (or connection) ends its WebSocket, 1006 (RFC 8441 5) */
                struct m0_conn *e = st->ws;
                st->ending = true; /* nothing more is sent on it: it is gone */
                if (e->up)
                        e->proto->closed(e); /* which cuts its carrier (tunnel_cut) */
                m0__timer_unfile(&e->loop->loop, &e->timer);
                m0__turn_forget(&e->loop->loop, &e->task);
                free(e);
                h->nws--;
        }
        if (st->sse) { /* its channels are followed no more (a client's RST_STREAM, HT3) */
                m0__sse_unlink(st->sse);
                free(st->sse);
                h->nevents--;
        }
        m0__buf_free(&st->cookie);
        m0__buf_free(&st->body);
        m0__buf_free(&st->in);
        if (st->file_fd >= 0)
                close(st->file_fd);
        /* kept for the loop's next stream, its small buffers with it (D249) */
        struct m0_hctx *l = h->c->loop;
        if (st->fields.cap > H2_SPARE_BUF)
                m0__buf_free(&st->fields);
        if (st->out.cap > H2_SPARE_BUF)
                m0__buf_free(&st->out);
        if (l->h2_nspare >= H2_SPARE_STREAMS) {
                m0__buf_free(&st->fields);
                m0__buf_free(&st->out);
                free(st);
                return;
        }
        st->link.next = l->h2_spare;
        l->h2_spare = &st->link;
        l->h2_nspare++;
        l->h2_spare_free = spares_free;
        SPARE_POISON(st);
}

/* A record for a new stream: a spare of the loop's, its buffers emptied, or a new one. */
static struct h2_stream *stream_new(struct m0_hctx *l)
{
        struct m0_link *n = l->h2_spare;
        if (!n)
                return calloc(1, sizeof(struct h2_stream));
        l->h2_spare = n->next;
        l->h2_nspare--;
        struct h2_stream *st = M0__CONTAINER_OF(n, struct h2_stream, link);
        SPARE_UNPOISON(st);
        struct m0_buf fields = st->fields, out = st->out;
        memset(st, 0, sizeof(*st));
        st->fields = (struct m0_buf){.data = fields.data, .cap = fields.cap};
        st->out = (struct m0_buf){.data = out.data, .cap = out.cap};
        return st;
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
        struct m0_h2 *h = ud;
        if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0;
        struct h2_stream *st = stream_new(h->c->loop);
        if (!st)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* this stream is reset */
        st->id = f->hd.stream_id;
        st->method = st->path = st->authority = st->query = st->protocol = -1;
        st->file_fd = -1;
        if (h->c->loop->observe)
                st->t_start = m0__now_ns();
        m0__list_push(&h->streams, &st->link);
        (void)nghttp2_session_set_stream_user_data(s, st->id, st);
        return 0;
}

/* A field kept in a stream's `fields`: its name's and value's lengths, then the name and the
 * value, each NUL-terminated, so that a walk over them needs no strlen() (D249). */
struct h2_field {
        uint32_t nl, vl;
};

static struct h2_field field_at(const struct h2_stream *st, size_t off)
{
        struct h2_field f;
        memcpy(&f, st->fields.data + off, sizeof(f));
        return f;
}

/* Keep `name` and `value` in the stream's fields; their offset, or -1. */
static ssize_t keep_field(struct h2_stream *st, const uint8_t *name, size_t nl,
                          const uint8_t *value, size_t vl)
{
        size_t off = st->fields.len, n = sizeof(struct h2_field) + nl + vl + 2;
        if (m0__buf_reserve(&st->fields, n) < 0)
                return -1;
        char *p = st->fields.data + off;
        memcpy(p, &(struct h2_field){(uint32_t)nl, (uint32_t)vl}, sizeof(struct h2_field));
        p += sizeof(struct h2_field);
        memcpy(p, name, nl);
        p[nl] = '\0';
        memcpy(p + nl + 1, value, vl);
        p[nl + 1 + vl] = '\0';
        st->fields.len += n;
        return (ssize_t)off;
}

static bool is(const uint8_t *name, size_t nl, const char *lit)
{
        return nl == strlen(lit) && memcmp(name, lit, nl) == 0;
}

/*
 * One decoded field. nghttp2 has checked it already (RFC 9113 8.2: lower-case names, no
 * connection-specific field, the pseudo-headers' order and values) and reset the stream on
 * what breaks those rules. The bounds are HTTP/1.1's, on the decoded list (HT2, HT4): past
 * M0_MAX_HEAD_BYTES, counted as the HTTP/1.1 lines the fields would make, or past
 * M0_MAX_HEADER_FIELDS fields, the request gets 431 once its head is whole, and nothing more of
 * it is kept meanwhile.
 */
static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
        (void)flags;
        struct m0_h2 *h = ud;
        struct h2_stream *st = stream_of(h, f->hd.stream_id);
        if (!st || st->head_done || st->refuse)
                return 0; /* trailers are not read; a refused head keeps nothing */
        (void)s;
        const struct m0_config *cfg = h->c->loop->cfg;
        bool pseudo = nl && name[0] == ':';
        st->head_bytes += nl + vl + 4;
        if (!pseudo && !(is(name, nl, "cookie") && st->cookie.len))
                st->nfields++;
        if (is(name, nl, ":authority"))
                st->nfields++; /* it stands for Host */
        if (st->head_bytes > cfg->max_head_bytes || st->nfields > cfg->max_header_fields) {
                st->refuse = 431;
                return 0;
        }
        if (is(name, nl, "cookie")) {
                if ((st->cookie.len && m0__buf_append(&st->cookie, "; ", 2) < 0) ||
                    m0__buf_append(&st->cookie, value, vl) < 0)
                        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
                return 0;
        }
        ssize_t off = keep_field(st, name, nl, value, vl);
        if (off < 0)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        if (!pseudo) {
                st->has_host |= is(name, nl, "host");
                return 0;
        }
        if (is(name, nl, ":method"))
                st->method = off;
        else if (is(name, nl, ":path"))
                st->path = off;
        else if (is(name, nl, ":authority"))
                st->authority = off;
        else if (is(name, nl, ":protocol"))
                st->protocol = off;
        return 0;
}

/* The value of the field kept at `off`. */
static char *value_at(struct h2_stream *st, ssize_t off)
{
        return st->fields.data + off + sizeof(struct h2_field) + field_at(st, (size_t)off).nl + 1;
}

/*
 * Index the stream's head into the loop's request as head-checks.c indexes an HTTP/1.1 head:
 * method, path, query and the regular fields (Host from :authority when the client sent no
 * Host, the cookies as one field). The strings stay in the stream's buffers.
 */
static void index_head(struct m0_h2 *h, struct h2_stream *st, m0_req *req)
{
        size_t n = 0;
        if (st->query >= 0) { /* indexed before: the fields are walked whole again */
                st->fields.data[st->query - 1] = '?';
                st->query = -1;
        }
        for (size_t off = 0; off < st->fields.len;) {
                struct h2_field f = field_at(st, off);
                char *name = st->fields.data + off + sizeof(f);
                off += sizeof(f) + f.nl + f.vl + 2;
                if (name[0] != ':')
                        req->headers[n++] = (struct m0_header){name, name + f.nl + 1};
        }
        if (st->authority >= 0 && !st->has_host)
                req->headers[n++] = (struct m0_header){"host", value_at(st, st->authority)};
        if (st->cookie.len && m0__buf_append(&st->cookie, "", 1) == 0) {
                st->cookie.len--; /* NUL-terminated, not counted */
                req->headers[n++] = (struct m0_header){"cookie", st->cookie.data};
        }
        req->nheaders = n;
        /* RFC 8441's CONNECT is the app's GET, as the upgrade over HTTP/1.1 is (D230) */
        req->method = st->tunnel ? "GET" : value_at(st, st->method);
        req->protocol = st->tunnel ? value_at(st, st->protocol) : NULL;
        char *path = value_at(st, st->path);
        size_t path_len = field_at(st, (size_t)st->path).vl;
        char *q = memchr(path, '?', path_len);
        if (q) { /* a request with a body is indexed again when it is whole (above) */
                *q = '\0';
                st->query = (ssize_t)(q + 1 - st->fields.data);
                path_len = (size_t)(q - path);
        }
        req->query = st->query >= 0 ? st->fields.data + st->query : "";
        req->path = path;
        req->path_len = path_len;
        req->body = st->body.data ? st->body.data : "";
        req->body_len = st->body.len;
        req->loop = h->c->loop->index;
        req->thread = -1;
}

/* ---- answers ---- */

/* What the access log and the metrics keep of a request the head refused (O1, O2). */
static void note_refusal(struct m0_h2 *h, struct h2_stream *st, int status)
{
        struct m0_conn *c = h->c;
        if (!c->loop->observe)
                return;
        c->t_start = st->t_start;
        const char *m = st->method >= 0 ? value_at(st, st->method) : "-";
        const char *p = st->path >= 0 ? value_at(st, st->path) : "-";
        m0__request_done(c, &(struct m0_access){.kind = M0_ANSWER_REFUSAL,
                                                .method = m,
                                                .method_len = strlen(m),
                                                .path = p,
                                                .path_len = strcspn(p, "?"),
                                                .status = status,
                                                .proto = "h2"});
}

static int emit(void *ctx, const m0_res *res, bool head_only)
{
        struct m0_conn *c = ctx;
        return c->proto->respond(c, res, head_only);
}

/* The host refuses the stream's request with `status`, as HTTP/1.1's refusals (Q4): the error
 * format, with no request read. The stream's body, if any, is dropped. */
static void refuse(struct m0_h2 *h, struct h2_stream *st, int status)
{
        struct m0_conn *c = h->c;
        st->answered = st->discard = true;
        c->h2_stream = st->id;
        bool is_head = st->method >= 0 && strcmp(value_at(st, st->method), "HEAD") == 0;
        struct m0_host_answer a = {.status = status,
                                   .conn = M0__CONN_KEEP,
                                   .head_only = is_head,
                                   .emit = emit,
                                   .emit_ctx = c};
        (void)m0__res_error(c->loop, &a, &c->loop->wbuf);
        note_refusal(h, st, status);
}

/* The request is whole: routed, and answered by its handler, the pool or the host (HT2). */
static void dispatch(struct m0_h2 *h, struct h2_stream *st)
{
        struct m0_conn *c = h->c;
        struct m0_hctx *l = c->loop;
        st->answered = true;
        int method = st->tunnel ? HTTP_GET : m0__method_number(value_at(st, st->method));
        if (method < 0) {
                refuse(h, st, 400); /* as llhttp refuses a method it does not know */
                return;
        }
        index_head(h, st, &l->req);
        c->h2_stream = st->id;
        c->t_start = st->t_start;
        c->nreq++;
        l->requests++;
        /* a tunnel's DATA are no body: they are its WebSocket's */
        m0__dispatch(c, &l->req, method, st->has_body && !st->tunnel, method == HTTP_HEAD,
                     M0__CONN_KEEP);
        drop_body(h, st); /* the pool's job took a copy */
}

/* The request's HEADERS are whole. A request with a body is routed now, before a byte of it is
 * read (Q6, H8): past its route's bound by Content-Length, or of a type the route refuses, it
 * is answered now; one the host answers otherwise has its body dropped. */
static void head_whole(struct m0_h2 *h, struct h2_stream *st, bool end_stream)
{
        struct m0_conn *c = h->c;
        struct m0_hctx *l = c->loop;
        st->head_done = true;
        st->has_body = !end_stream;
        if (st->refuse) {
                refuse(h, st, st->refuse);
                return;
        }
        if (st->method < 0 || st->path < 0) {
                refuse(h, st, 405); /* CONNECT (RFC 9110 9.3.6), as over HTTP/1.1 */
                return;
        }
        if (st->protocol >= 0) {
                /* RFC 8441's extended CONNECT (nghttp2 checked its pseudo-headers): a WebSocket's
                 * is routed now, its DATA being the tunnel's; any other protocol is none m0
                 * implements (D232) */
                if (strcmp(value_at(st, st->protocol), "websocket") != 0) {
                        refuse(h, st, 501);
                        return;
                }
                st->tunnel = true;
                dispatch(h, st);
                return;
        }
        if (end_stream) {
                dispatch(h, st);
                return;
        }
        int method = m0__method_number(value_at(st, st->method));
        if (method < 0) {
                refuse(h, st, 400);
                return;
        }
        index_head(h, st, &l->req);
        struct m0_rview v = {
                .method = method, .path = l->req.path, .path_len = l->req.path_len, .req = &l->req};
        struct m0_decision d;
        m0__route_decide(l, &v, NULL, true, &d);
        st->body_limit = d.body_limit;
        const char *cl = m0_req_header(&l->req, "content-length");
        bool over = cl && strtoull(cl, NULL, 10) > d.body_limit;
        if (over && !d.status)
                d.status = 413;
        if (!d.status)
                return;
        st->discard = true;
        if (!over && d.status != 415)
                return; /* answered when the body is whole, as over HTTP/1.1 */
        st->answered = true;
        c->h2_stream = st->id;
        c->t_start = st->t_start;
        m0__route_answer(c, &v, &d, method == HTTP_HEAD, M0__CONN_KEEP);
}

/* The lines "Name: value\r\n" of `head` as fields into `nv` (room for them all), leaving out
 * what HTTP/2 forbids (RFC 9113 8.2.2). The names stay as the app wrote them: nghttp2's copy of
 * the list lowers them, as nghttp2_submit_response() says (D249). */
static size_t app_fields(const struct m0_buf *head, nghttp2_nv *nv)
{
        size_t n = 0;
        const char *p = head->data, *end = head->data + head->len;
        while (p && p < end) {
                const char *colon = memchr(p, ':', (size_t)(end - p));
                const char *eol = colon ? memchr(colon, '\r', (size_t)(end - colon)) : NULL;
                if (!eol)
                        break;
                size_t nl = (size_t)(colon - p);
                const char *v = colon + 1;
                while (v < eol && *v == ' ')
                        v++;
                bool hop = (nl == 10 && strncasecmp(p, "keep-alive", 10) == 0) ||
                           (nl == 7 && strncasecmp(p, "upgrade", 7) == 0) ||
                           (nl == 16 && strncasecmp(p, "proxy-connection", 16) == 0);
                if (!hop)
                        nv[n++] = (nghttp2_nv){(uint8_t *)p, (uint8_t *)v, nl, (size_t)(eol - v),
                                               NGHTTP2_NV_FLAG_NONE};
                p = eol + 2;
        }
        return n;
}

/* An answer's header list as nghttp2 takes it: on the stack while it fits, else on the heap;
 * its :status and Content-Length values formatted in it. */
struct h2_head {
        nghttp2_nv stack_nv[64], *nv;
        size_t n;
        char status[3];
        char len[20];
};

/* A name (or value) that lives as long as m0: nghttp2 keeps a pointer, not a copy. */
#define H2_STATIC (NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE)

/* :status, Server and the loop's Date, with room for `extra` more fields and the app's lines of
 * `res`, which head_app() adds last. -ENOMEM, with nothing to free. */
static int head_begin(struct h2_head *hd, const struct m0_hctx *l, const m0_res *res, int status,
                      size_t extra)
{
        /* the app's fields, a line each of 4 bytes or more; counted when that bound is past the
         * stack's room */
        size_t cap = 3 + extra + res->head.len / 4 + 1;
        if (cap > M0__ARRAY_SIZE(hd->stack_nv)) {
                cap = 3 + extra;
                for (const char *p = res->head.data, *end = p + res->head.len;
                     (p = memchr(p, '\n', (size_t)(end - p))); p++)
                        cap++;
        }
        hd->nv = cap <= M0__ARRAY_SIZE(hd->stack_nv) ? hd->stack_nv : malloc(cap * sizeof(*hd->nv));
        if (!hd->nv)
                return -ENOMEM;
        /* the three digits, without a format (D249) */
        hd->status[0] = (char)('0' + status / 100 % 10);
        hd->status[1] = (char)('0' + status / 10 % 10);
        hd->status[2] = (char)('0' + status % 10);
        hd->n = 0;
        hd->nv[hd->n++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)hd->status, 7, 3,
                                       NGHTTP2_NV_FLAG_NO_COPY_NAME};
        hd->nv[hd->n++] = (nghttp2_nv){(uint8_t *)"server", (uint8_t *)"m0", 6, 2, H2_STATIC};
        /* the loop's "Date: ...\r\n" line, its value */
        if (l->loop.date_len > 8)
                hd->nv[hd->n++] = (nghttp2_nv){(uint8_t *)"date", (uint8_t *)l->loop.date + 6, 4,
                                               l->loop.date_len - 8, NGHTTP2_NV_FLAG_NO_COPY_NAME};
        return 0;
}

/* A field whose name and value live as long as m0 (literals). */
static void head_add(struct h2_head *hd, const char *k, const char *v, size_t vlen)
{
        hd->nv[hd->n++] = (nghttp2_nv){(uint8_t *)k, (uint8_t *)v, strlen(k), vlen, H2_STATIC};
}

/* Content-Length: `n`'s digits in `hd`, without a format (D249). */
static void head_length(struct h2_head *hd, uint64_t n)
{
        size_t i = sizeof(hd->len);
        do
                hd->len[--i] = (char)('0' + n % 10);
        while ((n /= 10));
        hd->nv[hd->n++] = (nghttp2_nv){(uint8_t *)"content-length", (uint8_t *)hd->len + i, 14,
                                       sizeof(hd->len) - i, NGHTTP2_NV_FLAG_NO_COPY_NAME};
}

static void head_app(struct h2_head *hd, const m0_res *res)
{
        hd->n += app_fields(&res->head, hd->nv + hd->n);
}

static void head_free(struct h2_head *hd)
{
        if (hd->nv != hd->stack_nv)
                free(hd->nv);
}

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *ud)
{
        (void)s;
        (void)id;
        (void)ud;
        struct h2_stream *st = src->ptr;
        if (st->file_fd >= 0) {
                /* A file that ended before its announced length resets its stream rather than
                 * lie about it (SF2); the connection's other streams go on. */
                size_t want = st->file_left < len ? (size_t)st->file_left : len;
                ssize_t got = pread(st->file_fd, buf, want, (off_t)st->file_off);
                if (got <= 0)
                        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
                st->file_off += (uint64_t)got;
                st->file_left -= (uint64_t)got;
                if (st->file_left == 0) {
                        close(st->file_fd);
                        st->file_fd = -1;
                        *flags |= NGHTTP2_DATA_FLAG_EOF;
                }
                return got;
        }
        size_t n = st->out.len - st->out_off;
        bool open_ended = st->sse || st->ws;
        if (n == 0 && open_ended && !st->ending)
                return NGHTTP2_ERR_DEFERRED; /* an event stream waits for its next bytes */
        if (n > len)
                n = len;
        memcpy(buf, st->out.data + st->out_off, n);
        st->out_off += n;
        if (st->out_off == st->out.len && (!open_ended || st->ending))
                *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (st->ws && st->ws_blocked && n) /* its WebSocket may write again */
                m0__turn_defer(&st->ws->loop->loop, &st->ws->task, EPOLLOUT);
        return (ssize_t)n;
}

/* ---- event streams (HT3) ---- */

/* The connection writes what its event streams queued, in a later item of the turn: a stream's
 * bytes come from sse.c's walks over the loop's streams, which nothing may end meanwhile. */
static void kick(struct m0_h2 *h)
{
        struct m0_conn *c = h->c;
        if (c->tr.fd >= 0 && !c->lingering && !h->freeing)
                m0__turn_defer(&c->loop->loop, &c->task, EPOLLOUT);
}

/* The stream is cut: RST_STREAM CANCEL, its channels let go; the connection goes on. */
static void events_cut(struct m0_conn *e)
{
        struct h2_stream *st = e->up;
        struct m0_h2 *h = e->h2;
        m0__sse_unlink(e);
        st->ending = true;
        (void)nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
        kick(h);
}

/* Bytes of the stream (`: open`, events, heartbeats, `: bye`), kept until its windows let them
 * go. The slow-subscriber rule (B2) per stream: a stream whose windows stayed shut while more
 * than M0_MAX_OUTPUT_BYTES waited is reset, for its client to come back with Last-Event-ID,
 * and the connection's other streams go on (D168). */
static int events_send(struct m0_conn *e, const void *data, size_t len)
{
        struct h2_stream *st = e->up;
        struct m0_h2 *h = e->h2;
        if (st->ending)
                return -EPIPE;
        size_t left = st->out.len - st->out_off;
        if (left + len > h->c->loop->cfg->max_output_bytes) {
                m0__count(&h->c->loop->streams_cut, 1);
                events_cut(e);
                return -EPIPE;
        }
        if (st->out_off && st->out_off >= st->out.len / 2) {
                memmove(st->out.data, st->out.data + st->out_off, left);
                st->out.len = left;
                st->out_off = 0;
        }
        if (m0__buf_append(&st->out, data, len) < 0) {
                events_cut(e);
                return -EPIPE;
        }
        (void)nghttp2_session_resume_data(h->s, st->id);
        kick(h);
        return 0;
}

/* The stream ends after what it has (the drain's `: bye`, a channel's refused frames): its
 * last DATA carries END_STREAM. */
static void events_end(struct m0_conn *e)
{
        struct h2_stream *st = e->up;
        m0__sse_unlink(e);
        st->ending = true;
        (void)nghttp2_session_resume_data(e->h2->s, st->id);
        kick(e->h2);
}

/* What an event stream is to sse.c: a stream among the loop's, whose bytes go through `send`. */
static const struct m0_proto_ops events_ops = {
        .name = "h2 event stream",
        .drain = events_end,
        .closed = events_cut,
        .send = events_send,
};

/*
 * An event stream on HTTP/2 (HT3): HEADERS (200, text/event-stream, no content-length), then
 * DATA carrying the bytes HTTP/1.1 sends after its head: `: open`, the replay after the
 * request's Last-Event-ID, then live events and heartbeats as sse.c delivers them. m0 ends it
 * only at the drain (`: bye`, END_STREAM) or by the slow-subscriber rule (RST_STREAM). The
 * request is the loop's, indexed (a stream is never a pool's answer).
 */
static int begin_events(struct m0_h2 *h, struct h2_stream *st, const m0_res *res, bool head_only)
{
        struct m0_conn *c = h->c;
        struct m0_hctx *l = c->loop;
        struct h2_head hd;
        struct m0_conn *e = NULL;
        int r = head_begin(&hd, l, res, 200, 3);
        if (r < 0)
                return r;
        r = -ENOMEM;
        head_add(&hd, "content-type", "text/event-stream", 17);
        head_add(&hd, "cache-control", "no-cache", 8);
        head_add(&hd, "x-accel-buffering", "no", 2);
        head_app(&hd, res);
        if (head_only) {
                r = nghttp2_submit_response(h->s, st->id, hd.nv, hd.n, NULL) == 0 ? 0 : -EIO;
                goto out;
        }
        st->out.len = st->out_off = 0;
        if (l->stopping) {
                /* opened by a request the drain answers: its farewell comes at once */
                r = m0__sse_open_bye(l, &st->out);
                st->ending = true;
        } else {
                if (!(e = calloc(1, sizeof(*e))))
                        goto out;
                e->loop = l;
                e->tr.fd = -1;
                e->proto = &events_ops;
                e->up = st;
                e->h2 = h;
                e->h2_stream = st->id;
                r = m0__sse_open(e, &l->req, res, &st->out);
        }
        if (r < 0)
                goto out;
        nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_body};
        r = nghttp2_submit_response(h->s, st->id, hd.nv, hd.n, &prd) == 0 ? 0 : -EIO;
        if (r == 0 && e) {
                st->sse = e;
                e = NULL;
                h->nevents++;
        }
out:
        if (e) {
                m0__sse_unlink(e);
                free(e);
        }
        head_free(&hd);
        return r;
}

/*
 * The answer `res` on the stream being answered, as HEADERS and DATA (HT2): the status, Date,
 * Content-Length as HTTP/1.1 says them (none for 204 and 304; a HEAD's is its GET's), and the
 * app's and the host's lines; an event stream's HEADERS, then its bytes as they come (HT3). A
 * stream the client reset meanwhile gets nothing.
 */
static int h2_respond(struct m0_conn *c, const m0_res *res, bool head_only)
{
        struct m0_h2 *h = c->h2;
        struct h2_stream *st = stream_of(h, c->h2_stream);
        if (!st)
                return 0;
        if (res->stream)
                return begin_events(h, st, res, head_only);
        struct h2_head hd;
        int r = head_begin(&hd, c->loop, res, res->status, 1);
        if (r < 0)
                return r;
        bool no_len = res->status == 204 || res->status == 304;
        uint64_t body_len = res->file.on ? res->file.len : res->body.len;
        if (!no_len)
                head_length(&hd, body_len);
        head_app(&hd, res);
        r = -ENOMEM;
        bool body = !head_only && !no_len && body_len;
        if (body && res->file.on) {
                /* the file's bytes are read as the window lets them go (the answer's own
                 * descriptor is closed by dispatch once this returns) */
                st->file_fd = fcntl(res->file.fd, F_DUPFD_CLOEXEC, 0);
                if (st->file_fd < 0) {
                        r = -errno;
                        goto out;
                }
                st->file_off = res->file.off;
                st->file_left = res->file.len;
        } else if (body) {
                st->out.len = st->out_off = 0;
                if (m0__buf_append(&st->out, res->body.data, res->body.len) < 0)
                        goto out;
        }
        nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_body};
        r = nghttp2_submit_response(h->s, st->id, hd.nv, hd.n, body ? &prd : NULL) == 0 ? 0 : -EIO;
out:
        head_free(&hd);
        return r;
}

/* ---- WebSockets on streams (RFC 8441, D230, D231) ---- */

/* The transport of a stream's stand-in connection: the stream's buffered DATA in and out. */
static struct h2_stream *tunnel_of(struct m0_transport *t, struct m0_h2 **ret_h)
{
        *ret_h = M0__CONTAINER_OF(t, struct m0_conn, tr)->h2;
        return t->impl;
}

/* What the client sent on the stream, its windows opened by what is taken (flow control ends
 * at wslay's reading: a WebSocket that stops reading stops its client); 0 once the client ended
 * its side (a FIN, RFC 8441 5) and all of it was read. */
static ssize_t tunnel_read(struct m0_transport *t, void *buf, size_t len)
{
        struct m0_h2 *h;
        struct h2_stream *st = tunnel_of(t, &h);
        size_t left = st->in.len - st->in_off;
        if (!left) {
                if (st->req_done || h->freeing)
                        return 0;
                t->want = M0_WANT_READ;
                return -EAGAIN;
        }
        size_t n = left < len ? left : len;
        memcpy(buf, st->in.data + st->in_off, n);
        st->in_off += n;
        if (st->in_off == st->in.len)
                st->in.len = st->in_off = 0;
        if (!h->freeing) {
                (void)nghttp2_session_consume(h->s, st->id, n);
                kick(h); /* its WINDOW_UPDATEs */
        }
        return (ssize_t)n;
}

/* Frames to the stream's DATA: the stream keeps at most H2_WS_OUT_BYTES that its windows did
 * not let go, so a write may take part of what it is given, or -EAGAIN until they do (read_body
 * wakes it); the rest waits in wslay's queue, within M0_WS_MAX_QUEUED. */
static ssize_t tunnel_writev(struct m0_transport *t, const struct iovec *iov, int n)
{
        struct m0_h2 *h;
        struct h2_stream *st = tunnel_of(t, &h);
        if (st->ending || h->freeing)
                return -EPIPE;
        size_t left = st->out.len - st->out_off;
        if (left >= H2_WS_OUT_BYTES) {
                t->want = M0_WANT_WRITE;
                return -EAGAIN;
        }
        if (st->out_off) {
                memmove(st->out.data, st->out.data + st->out_off, left);
                st->out.len = left;
                st->out_off = 0;
        }
        size_t room = H2_WS_OUT_BYTES - left, total = 0;
        for (int i = 0; i < n && total < room; i++) {
                size_t k = iov[i].iov_len < room - total ? iov[i].iov_len : room - total;
                if (m0__buf_append(&st->out, iov[i].iov_base, k) < 0) {
                        if (!total)
                                return -ENOMEM;
                        break;
                }
                total += k;
        }
        (void)nghttp2_session_resume_data(h->s, st->id);
        kick(h);
        return (ssize_t)total;
}

static ssize_t tunnel_sendfile(struct m0_transport *t, int fd, off_t *off, size_t n)
{
        (void)t;
        (void)fd;
        (void)off;
        (void)n;
        return -EOPNOTSUPP; /* a WebSocket sends no file */
}

static int tunnel_shutdown(struct m0_transport *t)
{
        (void)t;
        return 0;
}

static void tunnel_close(struct m0_transport *t)
{
        t->fd = -1;
}

static const struct m0_transport_ops tunnel_transport = {
        .name = "h2 stream",
        .read = tunnel_read,
        .writev = tunnel_writev,
        .sendfile = tunnel_sendfile,
        .shutdown = tunnel_shutdown,
        .close = tunnel_close,
};

/* The stand-in's place on the run queue: the stream's events, which its HTTP/2 connection
 * found inside libnghttp2's callbacks, reach its WebSocket outside them. */
static void tunnel_run(struct m0_task *t, uint32_t events)
{
        struct m0_conn *e = M0__CONTAINER_OF(t, struct m0_conn, task);
        (void)m0__turn_take(&e->loop->loop);
        if (e->up && (events & EPOLLOUT))
                e->proto->writable(e);
        if (e->up && (events & EPOLLIN))
                e->proto->readable(e);
        m0__hctx_deliver_pending(e->loop);
}

static void tunnel_timer(struct m0_timer *t)
{
        struct m0_conn *e = M0__CONTAINER_OF(t, struct m0_conn, timer);
        if (e->up)
                e->proto->timer(e); /* which files it again, or cuts it */
        else
                m0__timer_unfile(&e->loop->loop, &e->timer);
}

/* An HTTP/1.1 WebSocket that reads no more leaves the client's bytes in the socket, where TCP
 * holds them; a stream's would hold the connection's window shut for every other stream. */
static void tunnel_shut_in(struct m0_conn *e, struct h2_stream *st)
{
        struct m0_h2 *h = e->h2;
        size_t unread = st->in.len - st->in_off;
        st->in_shut = true;
        st->in.len = st->in_off = 0;
        if (unread && !h->freeing) {
                (void)nghttp2_session_consume(h->s, st->id, unread);
                kick(h);
        }
}

static int tunnel_want(struct m0_conn *e, bool rd, bool wr)
{
        struct h2_stream *st = e->tr.impl;
        uint32_t ev = 0;
        if (!rd && !st->in_shut) /* wslay reads no more once it stops (its Close came, or m0's) */
                tunnel_shut_in(e, st);
        st->ws_blocked = wr;
        if (wr && st->out.len - st->out_off < H2_WS_OUT_BYTES)
                ev |= EPOLLOUT;
        if (rd && st->in.len > st->in_off)
                ev |= EPOLLIN;
        if (ev)
                m0__turn_defer(&e->loop->loop, &e->task, ev);
        return 0;
}

static void tunnel_arm(struct m0_conn *e, uint8_t wait, uint64_t deadline)
{
        (void)wait; /* the WebSocket keeps what it waits for */
        m0__timer_file(&e->loop->loop, &e->timer, M0_TIMER_WS_STREAM, deadline);
}

/* Its stream reset (CANCEL: RFC 8441 5's abnormal end), unless it is gone already; the
 * stand-in is freed with the stream. */
static void tunnel_cut(struct m0_conn *e)
{
        struct h2_stream *st = e->tr.impl;
        struct m0_h2 *h = e->h2;
        m0__timer_unfile(&e->loop->loop, &e->timer);
        m0__turn_forget(&e->loop->loop, &e->task);
        if (!st->ending && !h->freeing) {
                st->ending = true;
                (void)nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
                kick(h);
        }
}

/* Its stream ends after what it holds: its last DATA carries END_STREAM. */
static void tunnel_finish(struct m0_conn *e)
{
        struct h2_stream *st = e->tr.impl;
        struct m0_h2 *h = e->h2;
        m0__timer_unfile(&e->loop->loop, &e->timer);
        m0__turn_forget(&e->loop->loop, &e->task);
        if (st->ending || h->freeing)
                return;
        st->ending = true;
        (void)nghttp2_session_resume_data(h->s, st->id);
        kick(h);
}

const struct m0_carrier_ops m0__h2_carrier = {
        .wire = false, /* the connection counts its bytes */
        .want = tunnel_want,
        .arm = tunnel_arm,
        .cut = tunnel_cut,
        .finish = tunnel_finish,
};

/* The tunnel's HEADERS: 200, Server, Date and the app's fields; no Content-Length (RFC 9110
 * 9.3.6: none in a 2xx to CONNECT). Its DATA come as its WebSocket writes them. */
static int answer_tunnel(struct m0_h2 *h, struct h2_stream *st, const m0_res *res)
{
        struct h2_head hd;
        int r = head_begin(&hd, h->c->loop, res, 200, 0);
        if (r < 0)
                return r;
        head_app(&hd, res);
        nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_body};
        r = nghttp2_submit_response(h->s, st->id, hd.nv, hd.n, &prd) == 0 ? 0 : -EIO;
        head_free(&hd);
        return r;
}

/* conn.h's `tunnel`: the stream being answered becomes a WebSocket's (D231). */
static struct m0_conn *h2_tunnel(struct m0_conn *c, const m0_res *res)
{
        struct m0_h2 *h = c->h2;
        struct h2_stream *st = stream_of(h, c->h2_stream);
        if (!st)
                return NULL; /* reset meanwhile */
        struct m0_conn *e = res ? calloc(1, sizeof(*e)) : NULL;
        if (!e || answer_tunnel(h, st, res) < 0) {
                free(e);
                st->ending = true;
                (void)nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, st->id,
                                                NGHTTP2_INTERNAL_ERROR);
                kick(h);
                return NULL;
        }
        e->loop = c->loop;
        e->tr = (struct m0_transport){.ops = &tunnel_transport, .fd = -1, .impl = st};
        e->task.run = tunnel_run;
        e->timer.fire = tunnel_timer;
        e->h2 = h;
        e->h2_stream = st->id;
        st->ws = e;
        h->nws++;
        m0__turn_defer(&c->loop->loop, &e->task, EPOLLOUT); /* its on_open, then its frames */
        return e;
}

/* ---- the session's other events ---- */

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
        (void)s;
        struct m0_h2 *h = ud;
        struct h2_stream *st = stream_of(h, f->hd.stream_id);
        if (!st)
                return 0;
        bool end = f->hd.flags & NGHTTP2_FLAG_END_STREAM;
        if (f->hd.type == NGHTTP2_HEADERS && !st->head_done)
                head_whole(h, st, end);
        if (end)
                st->req_done = true;     /* on HEADERS, DATA or the trailers' HEADERS */
        if (end && st->ws && st->ws->up) /* its WebSocket reads the end (a FIN, RFC 8441 5) */
                m0__turn_defer(&st->ws->loop->loop, &st->ws->task, EPOLLIN);
        if (end && !st->answered)
                dispatch(h, st);
        return 0;
}

/* A body's bytes: within the route's bound (413 past it), kept for the handler or dropped.
 * Dropped bytes open the windows again at once; kept ones once the connection's bodies are
 * within M0_MAX_BODY_BYTES (HT2: a body is bounded per stream and per connection, D155). */
static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
        (void)flags;
        struct m0_h2 *h = ud;
        struct h2_stream *st = stream_of(h, id);
        if (st && st->ws && st->ws->up && !st->in_shut) {
                /* a WebSocket's frames: the windows open as its wslay reads them (D231) */
                if (m0__buf_append(&st->in, data, len) < 0)
                        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset */
                m0__turn_defer(&st->ws->loop->loop, &st->ws->task, EPOLLIN);
                return 0;
        }
        if (!st || st->discard || st->tunnel) {
                (void)nghttp2_session_consume(s, id, len);
                return 0;
        }
        st->body_seen += len;
        if (st->body_seen > st->body_limit || m0__buf_append(&st->body, data, len) < 0) {
                (void)nghttp2_session_consume(s, id, len);
                int status = st->body_seen > st->body_limit ? 413 : 500;
                drop_body(h, st);
                refuse(h, st, status);
                return 0;
        }
        h->body_bytes += len;
        if (may_consume(h, st))
                (void)nghttp2_session_consume(s, id, len);
        else
                st->held += len;
        return 0;
}

/* An answer complete while the request's body still comes: the client is asked to stop
 * sending it without error (RFC 9113 8.1). */
static int on_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
        struct m0_h2 *h = ud;
        if (!(f->hd.flags & NGHTTP2_FLAG_END_STREAM) ||
            (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA))
                return 0;
        struct h2_stream *st = stream_of(h, f->hd.stream_id);
        if (st && !st->req_done)
                (void)nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
        return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
        (void)code;
        struct m0_h2 *h = ud;
        struct h2_stream *st = stream_of(h, id);
        if (!st)
                return 0;
        (void)nghttp2_session_set_stream_user_data(s, id, NULL);
        if (st->held) /* the connection's window: the stream's is gone with it */
                (void)nghttp2_session_consume_connection(s, st->held);
        st->held = 0;
        if (st->in.len > st->in_off) /* ... and a WebSocket's unread DATA */
                (void)nghttp2_session_consume_connection(s, st->in.len - st->in_off);
        drop_body(h, st);
        stream_free(h, st);
        return 0;
}

/* ---- the connection ---- */

static void h2_free(struct m0_h2 *h)
{
        if (!h)
                return;
        /* the streams first: a WebSocket's on_close may send to another of them, which then
         * finds its stream going (`freeing`) rather than a session gone */
        h->freeing = true;
        struct m0_link *n;
        while ((n = h->streams.head))
                stream_free(h, M0__CONTAINER_OF(n, struct h2_stream, link));
        nghttp2_session_del(h->s); /* no callback: the streams are freed */
        free(h);
}

/* What the connection waits for once its output is out: its idle deadline while nothing is in
 * flight; a GOAWAY sent and every stream ended, the end (HT5). */
static void settle(struct m0_h2 *h)
{
        struct m0_conn *c = h->c;
        if (!nghttp2_session_want_read(h->s) && !nghttp2_session_want_write(h->s)) {
                m0__conn_linger(c);
                return;
        }
        (void)m0__conn_want(c, EPOLLIN);
        if (!h->notice || h->goaway)
                m0__timer_set(c, M0_TIMER_IDLE); /* between the GOAWAYs, the drain's timer */
}

/*
 * Write what the session has to send: its frames gathered into the connection's output and
 * written in one go, for as long as the transport takes them. What it refuses waits for
 * EPOLLOUT, and nothing more is taken from the session meanwhile, so that a client that does
 * not read holds at most a chunk past what its windows let out (HT4).
 */
static void h2_send(struct m0_h2 *h)
{
        struct m0_conn *c = h->c;
        struct m0_hctx *l = c->loop;
        for (;;) {
                if (c->tr.fd < 0)
                        return;
                if (c->out.len > c->out_off) {
                        ssize_t w = m0__transport_write(&c->tr, c->out.data + c->out_off,
                                                        c->out.len - c->out_off);
                        if (w == -EAGAIN) {
                                /* An ended session reads no more: what the client sends would
                                 * be dropped, and each read would put the stall bound off, so
                                 * a client that floods and never reads would hold it (HT4). */
                                c->wwant = (uint8_t)c->tr.want;
                                (void)m0__conn_want(c, h->ended ? EPOLLOUT : EPOLLIN | EPOLLOUT);
                                m0__wait_write(c);
                                return;
                        }
                        if (w < 0) {
                                m0__conn_close(c);
                                return;
                        }
                        c->wwant = 0;
                        if (l->observe & M0_OBSERVE_METRICS)
                                m0__count(&l->stats.bytes_out, (uint64_t)w);
                        c->out_off += (size_t)w;
                        if (c->out_off < c->out.len)
                                continue;
                        c->out.len = c->out_off = 0;
                        if (c->out.cap > 4 * H2_OUT_CHUNK)
                                m0__buf_free(&c->out);
                }
                while (c->out.len < H2_OUT_CHUNK) {
                        const uint8_t *data;
                        ssize_t n = nghttp2_session_mem_send(h->s, &data);
                        if (n < 0) {
                                m0__conn_close(c);
                                return;
                        }
                        if (n == 0)
                                break;
                        if (m0__buf_append(&c->out, data, (size_t)n) < 0) {
                                m0__conn_close(c);
                                return;
                        }
                }
                if (c->out.len == 0)
                        break;
        }
        settle(h);
}

/* A session's error: GOAWAY with its code (a flood, too many CONTINUATIONs: ENHANCE_YOUR_CALM),
 * sent as far as the socket takes it, then the connection ends. */
static void fail(struct m0_h2 *h, ssize_t err)
{
        uint32_t code = err == NGHTTP2_ERR_FLOODED || err == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS
                                ? NGHTTP2_ENHANCE_YOUR_CALM
                        : err == NGHTTP2_ERR_NOMEM || err == NGHTTP2_ERR_CALLBACK_FAILURE
                                ? NGHTTP2_INTERNAL_ERROR
                                : NGHTTP2_PROTOCOL_ERROR;
        (void)nghttp2_session_terminate_session(h->s, code);
        h->ended = true;
        h2_send(h);
        if (h->c->tr.fd >= 0 && h->c->out.len == h->c->out_off)
                m0__conn_linger(h->c);
}

static void take(struct m0_h2 *h, const char *bytes, size_t n)
{
        ssize_t r = nghttp2_session_mem_recv(h->s, (const uint8_t *)bytes, n);
        if (h->c->tr.fd < 0)
                return;
        if (r < 0)
                fail(h, r);
        else
                h2_send(h);
}

static void h2_readable(struct m0_conn *c)
{
        struct m0_hctx *l = c->loop;
        ssize_t n = c->tr.ops->read(&c->tr, l->rscratch, l->rscratch_cap);
        c->rwant = n == -EAGAIN ? (uint8_t)c->tr.want : 0;
        if (n == -EAGAIN) {
                (void)m0__conn_want(c, c->events); /* with what the transport wants (TLS) */
                return;
        }
        if (n <= 0) {
                m0__conn_close(c); /* the client left */
                return;
        }
        if (l->observe & M0_OBSERVE_METRICS)
                m0__count(&l->stats.bytes_in, (uint64_t)n);
        if (c->lingering)
                return; /* its last frames are out: what it sends is dropped */
        take(c->h2, l->rscratch, (size_t)n);
}

static void h2_writable(struct m0_conn *c)
{
        if (c->lingering)
                return;
        h2_send(c->h2);
}

static void h2_resume(struct m0_conn *c)
{
        if (!c->lingering)
                h2_send(c->h2);
}

/* HT5's last GOAWAY: it names the last stream admitted, which is answered; the connection
 * ends once every admitted stream has (settle). */
static void last_goaway(struct m0_h2 *h)
{
        h->goaway = true;
        (void)nghttp2_submit_goaway(h->s, NGHTTP2_FLAG_NONE,
                                    nghttp2_session_get_last_proc_stream_id(h->s), NGHTTP2_NO_ERROR,
                                    NULL, 0);
        h2_send(h);
}

/*
 * HT5, the stop: RFC 9113 6.8's graceful shutdown. A GOAWAY of 2^31-1 first, so the client
 * opens nothing more, while streams it sent before it (a request crossing the stop) are still
 * admitted for M0_DRAIN_IDLE_MS, as HTTP/1.1 answers one (D154); then the last GOAWAY.
 */
static void h2_drain(struct m0_conn *c)
{
        struct m0_h2 *h = c->h2;
        if (!h || h->notice || c->lingering)
                return;
        m0__slice_begin(c);
        h->notice = true;
        (void)nghttp2_submit_shutdown_notice(h->s);
        /* WS4 on each WebSocket stream: 1001 after its queued output, its stream ended when the
         * client's Close came back; the last GOAWAY waits for them as for any stream */
        for (struct m0_link *n = h->streams.head, *next; n; n = next) {
                next = n->next; /* a drain that cuts its stream leaves it in place till it closes */
                struct h2_stream *st = M0__CONTAINER_OF(n, struct h2_stream, link);
                if (st->ws && st->ws->up)
                        st->ws->proto->drain(st->ws);
        }
        if (!c->loop->cfg->drain_idle_ms) {
                last_goaway(h);
                return;
        }
        m0__timer_set(c, M0_TIMER_DRAIN);
        h2_send(h);
}

static void h2_timer(struct m0_conn *c)
{
        struct m0_h2 *h = c->h2;
        switch (c->timer.cls) {
        case M0_TIMER_IDLE:
                if (c->jobs || h->nevents || h->nws) {
                        /* the pool answers, or event streams wait for events: m0 is the wait */
                        m0__timer_set(c, M0_TIMER_IDLE);
                        return;
                }
                /* HT4: nothing came from the client for M0_IDLE_TIMEOUT_MS: an idle connection,
                 * or one whose streams wait on it (a body that stopped, a window it never
                 * opens). It is told so, then closed. */
                h->goaway = h->ended = true;
                (void)nghttp2_session_terminate_session(h->s, NGHTTP2_NO_ERROR);
                h2_send(h);
                if (c->tr.fd >= 0 && !c->lingering)
                        m0__conn_linger(c);
                return;
        case M0_TIMER_DRAIN:
                m0__slice_begin(c);
                last_goaway(h);
                return;
        default: m0__conn_close(c); return; /* a stalled reader; the end of a linger */
        }
}

static void h2_closed(struct m0_conn *c)
{
        h2_free(c->h2);
        c->h2 = NULL;
}

/* The session's callbacks and options, and the SETTINGS m0 sends first (HT1, HT4). */
static int h2_session(struct m0_h2 *h, const struct m0_config *cfg)
{
        nghttp2_session_callbacks *cb = NULL;
        nghttp2_option *opt = NULL;
        int r = -ENOMEM;
        if (nghttp2_session_callbacks_new(&cb) || nghttp2_option_new(&opt))
                goto out;
        nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
        nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
        nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
        /* Bodies' windows are opened as m0 takes their bytes (on_data_chunk). */
        nghttp2_option_set_no_auto_window_update(opt, 1);
        /* Rapid Reset (CVE-2023-44487): a burst of M0_H2_RESET_RATE, then that many a second */
        nghttp2_option_set_stream_reset_rate_limit(opt, cfg->h2_reset_rate, cfg->h2_reset_rate);
        /* the CONTINUATION flood (CVE-2024-27316) */
        nghttp2_option_set_max_continuations(opt, H2_MAX_CONTINUATIONS);
        /* PING and SETTINGS floods: acknowledgements queued past this end the session */
        nghttp2_option_set_max_outbound_ack(opt, H2_MAX_OUTBOUND_ACK);
        nghttp2_option_set_max_settings(opt, H2_MAX_SETTINGS);
        if (nghttp2_session_server_new2(&h->s, cb, h, opt))
                goto out;
        nghttp2_settings_entry iv[] = {
                {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, cfg->h2_max_streams},
                {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, cfg->h2_window_bytes},
                {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, cfg->max_head_bytes},
                /* RFC 8441: WebSockets on streams (D230) */
                {NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1},
                /* and no SETTINGS_NO_RFC7540_PRIORITIES: measured no cheaper (D250) */
        };
        r = nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) == 0
                    ? 0
                    : -ENOMEM;
out:
        nghttp2_option_del(opt);
        nghttp2_session_callbacks_del(cb);
        return r;
}

static int h2_start(struct m0_conn *c, const char *bytes, size_t n)
{
        struct m0_h2 *h = calloc(1, sizeof(*h));
        if (!h)
                goto fail;
        h->c = c;
        if (h2_session(h, c->loop->cfg) < 0)
                goto fail;
        c->h2 = h;
        c->proto = &m0__proto_h2;
        m0__timer_set(c, M0_TIMER_IDLE);
        if (n)
                take(h, bytes, n);
        else
                h2_send(h);
        return 0;
fail:
        h2_free(h);
        m0__conn_close(c);
        return -ENOMEM;
}

const struct m0_proto_ops m0__proto_h2 = {
        .name = "h2",
        .readable = h2_readable,
        .writable = h2_writable,
        .timer = h2_timer,
        .drain = h2_drain,
        .closed = h2_closed,
        .start = h2_start,
        .respond = h2_respond,
        .resume = h2_resume,
        .tunnel = h2_tunnel,
};
