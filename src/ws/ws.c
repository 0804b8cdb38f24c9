/* SPDX-License-Identifier: MIT */
/* ws.c: WebSocket over an HTTP/1.1 connection (RFC 6455; SPEC WS1, WS3, WS4): the upgrade's
 * checks and the 101, then wslay's event context over the connection's transport, as the
 * connection's protocol; sends from any thread through the loop's mailbox; the bounds, the
 * pings, the close handshake and the drain. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/uio.h>

#include <openssl/evp.h>

#include "conn.h"
#include "crash.h"
#include "h2.h"
#include "config.h"
#include "json.h"
#include "log.h"
#include "request.h"
#include "ws.h"

static const char GUID[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/* ---- the upgrade's checks (RFC 6455 4.2.1, 4.2.2; WS3's Origin) ---- */

/* Whether the comma-separated list `v` holds `token`, case-insensitive (RFC 9110 5.6.1). */
static bool has_token(const char *v, const char *token)
{
        size_t n = strlen(token);
        while (v && *v) {
                while (*v == ' ' || *v == '\t' || *v == ',')
                        v++;
                const char *e = v;
                while (*e && *e != ',')
                        e++;
                const char *t = e;
                while (t > v && (t[-1] == ' ' || t[-1] == '\t'))
                        t--;
                if ((size_t)(t - v) == n && strncasecmp(v, token, n) == 0)
                        return true;
                v = e;
        }
        return false;
}

/* A Sec-WebSocket-Key: 16 bytes in base64, 24 characters ending in "==" (4.2.1 item 5). */
static bool key_ok(const char *k)
{
        unsigned char out[24];
        if (!k || strlen(k) != 24 || strcmp(k + 22, "==") != 0)
                return false;
        /* EVP_DecodeBlock counts the padding's bytes: 16 decoded come back as 18 */
        return EVP_DecodeBlock(out, (const unsigned char *)k, 24) == 18;
}

/* base64(SHA-1(key + GUID)) into `out` (29 bytes with its NUL) (4.2.2 item 5.4). */
static int accept_of(const char *key, char *out)
{
        unsigned char in[24 + sizeof(GUID)], md[EVP_MAX_MD_SIZE];
        unsigned int mdn = 0;
        memcpy(in, key, 24);
        memcpy(in + 24, GUID, sizeof(GUID) - 1);
        if (!EVP_Digest(in, 24 + sizeof(GUID) - 1, md, &mdn, EVP_sha1(), NULL) || mdn != 20)
                return -EIO;
        return EVP_EncodeBlock((unsigned char *)out, md, 20) == 28 ? 0 : -EIO;
}

/* The host and port of `v` (host[:port], or [v6]:port), the port `def` when absent; false when
 * it is not that shape. */
static bool host_port(const char *v, size_t n, const char **ret_host, size_t *ret_hn,
                      unsigned *ret_port, unsigned def)
{
        const char *colon = NULL;
        if (n && v[0] == '[') {
                const char *close = memchr(v, ']', n);
                if (!close)
                        return false;
                if ((size_t)(close - v) + 1 < n) {
                        if (close[1] != ':')
                                return false;
                        colon = close + 1;
                }
        } else {
                colon = memchr(v, ':', n);
        }
        size_t hn = colon ? (size_t)(colon - v) : n;
        unsigned port = def;
        if (colon) {
                const char *p = colon + 1, *end = v + n;
                if (p == end || end - p > 5)
                        return false;
                port = 0;
                for (; p < end; p++) {
                        if (*p < '0' || *p > '9')
                                return false;
                        port = port * 10 + (unsigned)(*p - '0');
                }
        }
        if (!hn)
                return false;
        *ret_host = v;
        *ret_hn = hn;
        *ret_port = port;
        return true;
}

/*
 * With no origins declared by the route, an Origin is the request's own when its host and port
 * are the Host's: its port is its scheme's default when it gives none, and a Host without a port
 * takes the Origin's (a proxy may have ended TLS before m0).
 */
static bool same_origin(const char *origin, const char *host)
{
        unsigned def;
        size_t skip;
        if (!strncasecmp(origin, "http://", 7)) {
                def = 80;
                skip = 7;
        } else if (!strncasecmp(origin, "https://", 8)) {
                def = 443;
                skip = 8;
        } else {
                return false; /* "null", or a scheme that is no web page's */
        }
        const char *oh, *hh;
        size_t ohn, hhn;
        unsigned op, hp;
        if (!host || !host_port(origin + skip, strlen(origin + skip), &oh, &ohn, &op, def) ||
            !host_port(host, strlen(host), &hh, &hhn, &hp, 0))
                return false;
        if (ohn != hhn || strncasecmp(oh, hh, ohn) != 0)
                return false;
        return hp == 0 ? op == def : op == hp;
}

static bool origin_ok(const m0_req *req)
{
        const char *origin = m0_req_header(req, "Origin");
        if (!origin)
                return true; /* no browser: nothing to hijack */
        const char *const *allowed = req->route ? req->route->def->ws_origins : NULL;
        if (!allowed)
                return same_origin(origin, m0_req_header(req, "Host"));
        for (; *allowed; allowed++)
                if (!strcmp(*allowed, "*") || !strcmp(*allowed, origin))
                        return true;
        return false;
}

/* HTTP/1.1's own part of the handshake (RFC 6455 4.2.1 items 1-5): GET, Upgrade, Connection
 * and the key; 0, or the host's refusal recorded. */
static int check_upgrade(m0_req *req)
{
        static const char up[] = "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n";
        const char *upgrade = m0_req_header(req, "Upgrade");
        int r = 0;
        if (strcmp(req->method, "GET") != 0 || req->http_minor < 1)
                r = m0__req_refuse(req, -EPROTO, 400, "a WebSocket opens with GET over HTTP/1.1");
        else if (!upgrade) {
                r = m0__req_refuse(req, -EPROTO, 426, "this is a WebSocket: ask for the upgrade");
                req->refusal.headers = up;
        } else if (!has_token(upgrade, "websocket"))
                r = m0__req_refuse(req, -EPROTO, 400, "the upgrade is not to websocket");
        else if (!has_token(m0_req_header(req, "Connection"), "upgrade"))
                r = m0__req_refuse(req, -EPROTO, 400, "Connection does not say Upgrade");
        else if (!key_ok(m0_req_header(req, "Sec-WebSocket-Key")))
                r = m0__req_refuse(req, -EPROTO, 400,
                                   "Sec-WebSocket-Key is not 16 bytes in base64");
        return r;
}

/* The handshake's checks, in RFC 6455 4.2.1's order; 0, or the host's refusal recorded. An
 * HTTP/2 stream's extended CONNECT has neither Upgrade, Connection nor a key (RFC 8441 5): its
 * `:protocol` said websocket already (h2.c); the version and the Origin are checked alike. */
static int check(m0_req *req)
{
        static const char ver[] = "Sec-WebSocket-Version: 13\r\n";
        const char *v = m0_req_header(req, "Sec-WebSocket-Version");
        int r = req->protocol ? 0 : check_upgrade(req);
        if (r < 0)
                return r;
        if (!v || strcmp(v, "13") != 0) {
                r = m0__req_refuse(req, -EPROTO, v ? 426 : 400, "Sec-WebSocket-Version must be 13");
                if (v)
                        req->refusal.headers = ver;
        } else if (!origin_ok(req))
                r = m0__req_refuse(req, -EPROTO, 403, "this Origin may not open a WebSocket here");
        return r;
}

static void ws_begin(struct m0_conn *c, m0_req *req, m0_res *res);

/* A WebSocket accepted that never was (D224): the app's on_close, 1006, hands its state back;
 * `ws` is NULL when none was made (no memory, or the handler answered an error after). */
static void give_back(const m0_res *res, struct m0_ws *ws)
{
        const m0_ws_callbacks *cb = res->upgrade.cb;
        if (cb && cb->on_close)
                cb->on_close(ws, 1006, res->upgrade.state);
}

static void ws_drop(m0_res *res)
{
        give_back(res, NULL);
}

int m0_res_websocket(m0_res *res, const m0_ws_callbacks *cb, void *state)
{
        if (res->on_pool || !res->req) {
                res->stream_refused = true;
                return -EPERM;
        }
        m0_req *req = res->req;
        int r = check(req);
        if (r < 0)
                return r;
        if (!req->protocol &&
            accept_of(m0_req_header(req, "Sec-WebSocket-Key"), res->upgrade.accept) < 0)
                return -EIO;
        res->upgrade.begin = ws_begin;
        res->upgrade.drop = ws_drop;
        res->upgrade.cb = cb;
        res->upgrade.state = state;
        return 0;
}

/* ---- wslay over the connection's transport ---- */

static void ws_free(struct m0_ws *ws)
{
        wslay_event_context_free(ws->ctx);
        free(ws);
}

void m0_ws_ref(m0_ws *ws)
{
        atomic_fetch_add_explicit(&ws->refs, 1, memory_order_relaxed);
}

void m0_ws_unref(m0_ws *ws)
{
        if (ws && atomic_fetch_sub_explicit(&ws->refs, 1, memory_order_acq_rel) == 1)
                ws_free(ws);
}

/* What the client sent: the bytes read behind the upgrade's request first, then the socket's,
 * within the turn's share (a client sending without pause waits for the next turn). */
static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *ud)
{
        (void)flags;
        struct m0_ws *ws = ud;
        struct m0_conn *c = ws->c;
        if (c->rlen > c->rpos) {
                size_t n = c->rlen - c->rpos < len ? c->rlen - c->rpos : len;
                memcpy(buf, c->rbuf + c->rpos, n);
                c->rpos += (uint32_t)n;
                if (c->rpos == c->rlen) {
                        free(c->rbuf);
                        c->rbuf = NULL;
                        c->rlen = c->rcap = c->rpos = 0;
                }
                return (ssize_t)n;
        }
        if (!ws->read_left) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        if (len > ws->read_left)
                len = ws->read_left;
        ssize_t n = c->tr.ops->read(&c->tr, buf, len);
        c->rwant = n == -EAGAIN ? (uint8_t)c->tr.want : 0;
        if (n > 0) {
                ws->read_left -= (uint32_t)n;
                ws->last_in_ms = c->loop->loop.now_ms;
                if ((c->loop->observe & M0_OBSERVE_METRICS) && ws->carrier->wire)
                        m0__count(&c->loop->stats.bytes_in, (uint64_t)n);
                return n;
        }
        if (n == -EAGAIN) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        ws->broken = true; /* the client left (0) or the connection broke */
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

/*
 * wslay sends a frame's header and its payload in two calls, the header's flagged
 * WSLAY_MSG_MORE: the header is held (14 bytes at most) and goes with the payload in one writev,
 * so that a message is one system call and, under TCP_NODELAY, one segment, where it was two
 * (D217). wslay is told the header went; when the write ends inside it, the rest stays held and
 * the payload waits, as for a full socket.
 */
static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *ud)
{
        struct m0_ws *ws = ud;
        struct m0_conn *c = ws->c;
        if ((flags & WSLAY_MSG_MORE) && !ws->nhold && len <= sizeof(ws->hold)) {
                memcpy(ws->hold, data, len);
                ws->nhold = (uint8_t)len;
                return (ssize_t)len;
        }
        struct iovec iov[2] = {{.iov_base = ws->hold, .iov_len = ws->nhold},
                               {.iov_base = (void *)data, .iov_len = len}};
        int first = ws->nhold ? 0 : 1;
        ssize_t w = c->tr.ops->writev(&c->tr, iov + first, 2 - first);
        c->wwant = w == -EAGAIN ? (uint8_t)c->tr.want : 0;
        if (w >= 0 && (c->loop->observe & M0_OBSERVE_METRICS) && ws->carrier->wire)
                m0__count(&c->loop->stats.bytes_out, (uint64_t)w);
        if (w >= 0 && w < ws->nhold) { /* the socket is full inside the header */
                memmove(ws->hold, ws->hold + w, (size_t)(ws->nhold - w));
                ws->nhold = (uint8_t)(ws->nhold - w);
                w = -EAGAIN;
        } else if (w >= 0) {
                w -= ws->nhold;
                ws->nhold = 0;
                if (w > 0)
                        return w;
                w = -EAGAIN; /* the header alone went: the payload waits */
        }
        if (w == -EAGAIN) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        ws->broken = true;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

/* Close with `code` now (a bound that was passed, a refusal, or the asked Close whose turn
 * came); reading stops, and what is queued behind the Close is dropped (wslay sends a Close
 * first, and nothing after it). */
static void fail(struct m0_ws *ws, uint16_t code, const char *reason)
{
        atomic_store(&ws->closing, true);
        ws->close_queued = true;
        if (!ws->code)
                ws->code = code;
        (void)wslay_event_queue_close(ws->ctx, code, (const uint8_t *)reason,
                                      reason ? strlen(reason) : 0);
        wslay_event_shutdown_read(ws->ctx);
}

/* The app's Close, or the drain's 1001 (D189, D223): no more sends from now, and the Close waits
 * for every message queued before it, in wslay's queue or in the loop's mailbox, since wslay
 * would send a control frame ahead of them and drop what stays queued behind it. */
static void ask_close(struct m0_ws *ws, uint16_t code, const char *reason)
{
        atomic_store(&ws->closing, true);
        if (ws->close_queued || ws->close_code)
                return;
        if (!ws->code)
                ws->code = code;
        ws->close_code = code;
        snprintf(ws->close_reason, sizeof(ws->close_reason), "%s", reason ? reason : "");
}

/* The asked Close into wslay's queue once what went before it is out: true when it was. */
static bool close_when_sent(struct m0_ws *ws)
{
        if (!ws->close_code || ws->close_queued || wslay_event_get_queued_msg_count(ws->ctx) ||
            atomic_load(&ws->inbox))
                return false;
        fail(ws, ws->close_code, ws->close_reason[0] ? ws->close_reason : NULL);
        return true;
}

/* WS3: frames of one message are bounded, each one a chunk wslay keeps until the last. */
static void frame_start_cb(wslay_event_context_ptr ctx,
                           const struct wslay_event_on_frame_recv_start_arg *arg, void *ud)
{
        (void)ctx;
        struct m0_ws *ws = ud;
        if (arg->opcode & 0x8)
                return; /* a control frame, between fragments or not */
        if (++ws->frags > M0__WS_MAX_FRAGMENTS)
                fail(ws, 1009, "too many fragments");
}

static void msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                   void *ud)
{
        (void)ctx;
        struct m0_ws *ws = ud;
        struct m0_hctx *l = ws->loop;
        if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
                /* wslay answers it with the same code; the client's word ends it */
                atomic_store(&ws->closing, true);
                if (!ws->code)
                        ws->code = arg->status_code ? arg->status_code : 1005;
                return;
        }
        if (arg->opcode & 0x8)
                return; /* a ping (wslay answers it) or a pong: its bytes counted as life */
        ws->frags = 0;
        if (atomic_load(&ws->closing))
                return;
        if (l->observe & M0_OBSERVE_METRICS)
                m0__count(&l->stats.ws_in, 1);
        if (ws->cb && ws->cb->on_message)
                ws->cb->on_message(ws, arg->opcode == WSLAY_TEXT_FRAME ? M0_WS_TEXT : M0_WS_BINARY,
                                   arg->msg, arg->msg_length, ws->state);
}

static const struct wslay_event_callbacks callbacks = {
        .recv_callback = recv_cb,
        .send_callback = send_cb,
        .on_frame_recv_start_callback = frame_start_cb,
        .on_msg_recv_callback = msg_cb,
};

/*
 * A frame wslay's event layer refused before its own checks (a control frame over 125 bytes or
 * fragmented, a length not in its shortest form): wslay queued a Close without a code. The
 * client is told 1002 (RFC 6455 7.4.1) by a Close of wslay's frame layer instead, when nothing
 * of another frame is on the wire before it; the connection then ends.
 */
static ssize_t frame_send_cb(const uint8_t *data, size_t len, int flags, void *ud)
{
        (void)flags;
        struct m0_conn *c = ud;
        ssize_t w = m0__transport_write(&c->tr, data, len);
        return w >= 0 ? w : WSLAY_ERR_CALLBACK_FAILURE;
}

static void protocol_error(struct m0_ws *ws, bool clean)
{
        ws->code = 1002;
        atomic_store(&ws->closing, true);
        wslay_event_shutdown_write(ws->ctx);
        wslay_event_shutdown_read(ws->ctx);
        struct wslay_frame_callbacks fcb = {.send_callback = frame_send_cb};
        wslay_frame_context_ptr f;
        if (!clean || wslay_frame_context_init(&f, &fcb, ws->c) != 0)
                return;
        uint8_t payload[2] = {1002 >> 8, 1002 & 0xff};
        struct wslay_frame_iocb iocb = {.fin = 1,
                                        .opcode = WSLAY_CONNECTION_CLOSE,
                                        .payload_length = 2,
                                        .data = payload,
                                        .data_length = 2};
        (void)wslay_frame_send(f, &iocb);
        wslay_frame_context_free(f);
}

/* ---- its life on the loop ---- */

/* It ended: on_close, once, and its connection let go of. */
static void end(struct m0_ws *ws, uint16_t code)
{
        if (ws->ended)
                return;
        ws->ended = true;
        atomic_store(&ws->closing, true);
        /* a Close wslay sent on its own: 1002, 1007 or 1009 for what it refused */
        if (!ws->code && wslay_event_get_close_sent(ws->ctx))
                ws->code = wslay_event_get_status_code_sent(ws->ctx);
        if (!ws->code)
                ws->code = code;
        struct m0_hctx *l = ws->loop;
        if (l->observe & M0_OBSERVE_METRICS) {
                m0__uncount(&l->stats.ws_open, 1);
                m0__count(&l->stats.ws_closed[m0__ws_code_index(ws->code)], 1);
        }
        if (ws->bus)
                m0__ws_unfollow(ws);
        /* once m0_res_websocket() took the state it is handed back here, opened or not (D224) */
        if (ws->cb && ws->cb->on_close)
                ws->cb->on_close(ws, ws->opened ? ws->code : 1006, ws->state);
}

/* The connection lets go of it (its reference), closing or handed back to HTTP/1.1. */
static void let_go(struct m0_ws *ws)
{
        struct m0_conn *c = ws->c;
        end(ws, 1006);
        ws->c = NULL;
        c->up = NULL;
        m0_ws_unref(ws);
}

/* It ended now (its end recorded): its carrier closes, and lets go of it. */
static void cut(struct m0_ws *ws)
{
        struct m0_conn *c = ws->c;
        ws->carrier->cut(c); /* a connection's close lets go of it already (ws_closed) */
        if (c->up == ws)
                let_go(ws);
}

static uint64_t next_deadline(const struct m0_ws *ws, const struct m0_config *cfg)
{
        uint64_t idle = ws->last_in_ms + cfg->idle_timeout_ms;
        if (!cfg->ws_ping_ms)
                return idle;
        uint64_t ping = (ws->last_ping_ms > ws->last_in_ms ? ws->last_ping_ms : ws->last_in_ms) +
                        cfg->ws_ping_ms;
        return ping < idle ? ping : idle;
}

/*
 * After wslay read or sent: the connection ends once neither side has more to say (the Close
 * went both ways, or the transport broke); else it waits for what wslay wants, under its timer:
 * the write stall while output waits, the close handshake's bound once its Close is out, the
 * next ping or the idle bound otherwise.
 */
static void settle(struct m0_ws *ws)
{
        struct m0_conn *c = ws->c;
        const struct m0_carrier_ops *k = ws->carrier;
        struct m0_hctx *l = ws->loop;
        const struct m0_config *cfg = l->cfg;
        if (ws->broken) {
                end(ws, 1006);
                cut(ws);
                return;
        }
        if (ws->drain)
                ask_close(ws, 1001, "server shutting down"); /* unless a Close is asked already */
        if (close_when_sent(ws)) {
                /* the messages before it are out (WS4); now the Close */
                (void)wslay_event_send(ws->ctx);
                if (ws->broken) {
                        end(ws, 1006);
                        cut(ws);
                        return;
                }
        }
        bool rd = wslay_event_want_read(ws->ctx), wr = wslay_event_want_write(ws->ctx);
        if (!rd && !wr) {
                let_go(ws);
                k->finish(c); /* the server ends its side first (7.1.1) */
                return;
        }
        if (k->want(c, rd, wr) < 0) {
                end(ws, 1006);
                cut(ws);
                return;
        }
        if (wr) {
                if (ws->wait != M0__WS_WAIT_WRITE) {
                        ws->wait = M0__WS_WAIT_WRITE;
                        k->arm(c, ws->wait, l->loop.now_ms + cfg->idle_timeout_ms);
                }
        } else if (wslay_event_get_close_sent(ws->ctx)) {
                if (!ws->close_wait) {
                        ws->close_wait = true; /* the client's Close, within the linger */
                        ws->wait = M0__WS_WAIT_CLOSE;
                        k->arm(c, ws->wait, l->loop.now_ms + (cfg->linger_ms ? cfg->linger_ms : 1));
                }
        } else {
                ws->wait = M0__WS_WAIT_PING;
                k->arm(c, ws->wait, next_deadline(ws, cfg));
        }
}

/* Read (when `read`) and send what wslay has, then settle. */
static void run(struct m0_ws *ws, bool read)
{
        struct m0_conn *c = ws->c;
        bool clean = !wslay_event_want_write(ws->ctx);
        ws->in_io = true;
        int r = 0;
        if (read || c->rlen > c->rpos) {
                ws->read_left = 256 * 1024;
                r = wslay_event_recv(ws->ctx);
                if (r == WSLAY_ERR_CALLBACK_FAILURE && !ws->broken)
                        protocol_error(ws, clean);
        }
        if (!ws->broken && wslay_event_send(ws->ctx) == WSLAY_ERR_CALLBACK_FAILURE)
                ws->broken = true;
        ws->in_io = false;
        if (!ws->read_left && !ws->broken && wslay_event_want_read(ws->ctx))
                m0__turn_defer(&ws->loop->loop, &c->task, EPOLLIN); /* its share is spent */
        settle(ws);
}

static void ws_readable(struct m0_conn *c)
{
        run(c->up, true);
}

static void ws_writable(struct m0_conn *c)
{
        struct m0_ws *ws = c->up;
        int w = m0__conn_write_out(c); /* the rest of the 101 */
        if (w <= 0)
                return;
        if (!ws->opened) {
                ws->opened = true;
                ws->last_in_ms = ws->loop->loop.now_ms;
                if (ws->cb && ws->cb->on_open) {
                        ws->in_io = true;
                        ws->cb->on_open(ws, ws->state);
                        ws->in_io = false;
                }
        }
        run(ws, c->rlen > c->rpos);
}

static void ws_timer(struct m0_conn *c)
{
        struct m0_ws *ws = c->up;
        struct m0_hctx *l = ws->loop;
        const struct m0_config *cfg = l->cfg;
        uint64_t now = l->loop.now_ms;
        if (ws->wait != M0__WS_WAIT_PING || now >= ws->last_in_ms + cfg->idle_timeout_ms) {
                /* the write stall, the close handshake's bound, or the idle bound: no Close can
                 * be expected to reach a client this silent */
                end(ws, 1006);
                cut(ws);
                return;
        }
        if (cfg->ws_ping_ms && now >= ws->last_ping_ms + cfg->ws_ping_ms) {
                ws->last_ping_ms = now;
                struct wslay_event_msg ping = {.opcode = WSLAY_PING};
                (void)wslay_event_queue_msg(ws->ctx, &ping);
        }
        run(ws, false);
}

/* The stop (WS4): 1001 once its queued messages are out. A client that is not taking what it
 * was sent is closed now, as a stream's is (X1): it reconnects like any other, and the drain
 * does not wait for it past its bound. */
static void ws_drain(struct m0_conn *c)
{
        struct m0_ws *ws = c->up;
        struct m0_hctx *l = ws->loop;
        ws->drain = true;
        ask_close(ws, 1001, "server shutting down");
        if (!ws->opened || ws->in_io)
                return;
        run(ws, false);
        if (c->up == ws && wslay_event_want_write(ws->ctx)) {
                m0__count(&l->streams_unread, 1);
                end(ws, 1006);
                cut(ws);
        }
}

/* Its connection closes: it ends, and is let go of. */
static void ws_closed(struct m0_conn *c)
{
        if (c->up)
                let_go(c->up);
}

/* A stream's WebSocket cut by sse.c (its channel refused frames it would miss): its client
 * reconnects with its last id, as over HTTP/1.1. */
static void ws_stream_cut(struct m0_conn *c)
{
        struct m0_ws *ws = c->up;
        if (!ws)
                return;
        end(ws, 1006);
        cut(ws);
}

/* No event-stream bytes go through a WebSocket: it has `event`. */
static int ws_stream_send(struct m0_conn *c, const void *data, size_t len)
{
        (void)c;
        (void)data;
        (void)len;
        return -EPIPE;
}

static int ws_event(struct m0_conn *c, const struct m0_frame *f)
{
        return c->up ? m0__ws_event(c->up, f) : 0;
}

const struct m0_proto_ops m0__proto_ws = {
        .name = "websocket",
        .readable = ws_readable,
        .writable = ws_writable,
        .timer = ws_timer,
        .drain = ws_drain,
        .closed = ws_closed,
        .event = ws_event,
};

/* The protocol of an HTTP/2 stream's stand-in connection, which its HTTP/2 connection calls for
 * the stream's events (D231): `readable` when DATA came, `writable` when its windows let bytes
 * go, `timer` for its own timer (M0_TIMER_WS_STREAM), `drain` at the stop, `closed` when the
 * stream is gone; sse.c cuts it through `closed` too (a channel's refused frames), as `send`,
 * which takes no bytes, tells it the WebSocket is one stream of a connection. `closed` ends the
 * WebSocket (1006 unless its end is known), its on_close once, and cuts its carrier. */
static const struct m0_proto_ops proto_ws_stream = {
        .name = "websocket",
        .readable = ws_readable,
        .writable = ws_writable,
        .timer = ws_timer,
        .drain = ws_drain,
        .closed = ws_stream_cut,
        .event = ws_event,
        .send = ws_stream_send,
};

/* ---- its own connection as its carrier (HTTP/1.1's, switched) ---- */

static int conn_want(struct m0_conn *c, bool rd, bool wr)
{
        return m0__conn_want(c, (rd ? EPOLLIN : 0) | (wr ? EPOLLOUT : 0));
}

static void conn_arm(struct m0_conn *c, uint8_t wait, uint64_t deadline)
{
        struct m0_loop *el = &c->loop->loop;
        switch (wait) {
        case M0__WS_WAIT_WRITE:
                if (c->timer.cls != M0_TIMER_WRITE)
                        m0__wait_write(c);
                break;
        case M0__WS_WAIT_CLOSE: m0__timer_file(el, &c->timer, M0_TIMER_LINGER, deadline); break;
        default: m0__timer_file(el, &c->timer, M0_TIMER_WS, deadline); break;
        }
}

static void conn_cut(struct m0_conn *c)
{
        m0__conn_close(c); /* which lets go of it (ws_closed) */
}

static void conn_finish(struct m0_conn *c)
{
        m0__conn_downgrade_end(c); /* the server closes the TCP connection (7.1.1) */
}

static const struct m0_carrier_ops conn_carrier = {
        .wire = true,
        .want = conn_want,
        .arm = conn_arm,
        .cut = conn_cut,
        .finish = conn_finish,
};

/* The 101 (4.2.2 item 5), with the headers the handler added. */
static int switching(struct m0_hctx *l, const m0_res *res, struct m0_buf *w)
{
        int r = m0__buf_printf(w,
                               "HTTP/1.1 101 Switching Protocols\r\nServer: m0\r\n%.*s"
                               "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                               "Sec-WebSocket-Accept: %s\r\n",
                               (int)l->loop.date_len, l->loop.date, res->upgrade.accept);
        if (r == 0)
                r = m0__buf_append(w, res->head.data, res->head.len);
        if (r == 0)
                r = m0__buf_append(w, "\r\n", 2);
        return r;
}

/* A new WebSocket with its wslay context, or NULL. */
static struct m0_ws *ws_new(struct m0_hctx *l, const m0_res *res)
{
        struct m0_ws *ws = calloc(1, sizeof(*ws));
        if (!ws || wslay_event_context_server_init(&ws->ctx, &callbacks, ws) != 0) {
                if (ws)
                        ws_free(ws);
                return NULL;
        }
        atomic_init(&ws->refs, 1);
        ws->loop = l;
        ws->cb = res->upgrade.cb;
        ws->state = res->upgrade.state;
        wslay_event_config_set_max_recv_msg_length(ws->ctx, l->cfg->ws_max_message);
        return ws;
}

/* HTTP/1.1's: the 101 in the loop's wbuf, then the connection is its carrier; `c`, or NULL
 * (503 answered). */
static struct m0_conn *switch_conn(struct m0_conn *c, struct m0_ws *ws, m0_res *res)
{
        struct m0_hctx *l = c->loop;
        size_t mark = l->wbuf.len;
        if (!ws || switching(l, res, &l->wbuf) < 0) {
                l->wbuf.len = mark;
                m0__conn_refuse(c, 503);
                res->upgrade.status = 503;
                return NULL;
        }
        c->closing = false;
        c->proto = &m0__proto_ws;
        m0__timer_unlink(c);
        ws->carrier = &conn_carrier;
        res->upgrade.status = 101;
        return c;
}

/* HTTP/2's (RFC 8441, D231): the stream answered 200, its stand-in connection the carrier; the
 * stand-in, or NULL (the stream reset). */
static struct m0_conn *switch_stream(struct m0_conn *c, struct m0_ws *ws, m0_res *res)
{
        struct m0_conn *e = c->proto->tunnel(c, ws ? res : NULL);
        if (!e)
                return NULL;
        e->proto = &proto_ws_stream;
        ws->carrier = &m0__h2_carrier;
        res->upgrade.status = 200;
        return e;
}

/* After the handler accepted (dispatch.c's upgrade): the 101 (or HTTP/2's 200), then the
 * connection (or the stream) is its. */
static void ws_begin(struct m0_conn *c, m0_req *req, m0_res *res)
{
        struct m0_hctx *l = c->loop;
        struct m0_ws *ws = ws_new(l, res);
        struct m0_conn *k = c->proto->tunnel ? switch_stream(c, ws, res) : switch_conn(c, ws, res);
        if (!k) {
                give_back(res, ws); /* no 101 (or 200) went: its state goes back all the same */
                if (ws)
                        ws_free(ws);
                return;
        }
        ws->c = k;
        k->upgraded = true;
        k->up = ws;
        ws->last_in_ms = ws->last_ping_ms = l->loop.now_ms;
        if (l->observe & M0_OBSERVE_METRICS)
                m0__count(&l->stats.ws_open, 1);
        if (res->nchans && m0__ws_follow(ws, req, res) < 0)
                fail(ws, 1011, "cannot follow its channels");
        if (l->stopping) {
                ws->drain = true; /* opened by a request the drain answered: 1001 at once */
                ask_close(ws, 1001, "server shutting down");
        }
}

/* ---- sends ---- */

/* Into wslay's queue, unless its Close is there already (a Close asked for waits for this). */
static int queue(struct m0_ws *ws, uint8_t op, const void *data, size_t len)
{
        struct m0_hctx *l = ws->loop;
        if (ws->ended || ws->close_queued)
                return -EPIPE;
        if (wslay_event_get_queued_msg_length(ws->ctx) + len > l->cfg->ws_max_queued) {
                /* WS3: a slow consumer is closed, and keeps nobody waiting */
                fail(ws, 1008, "too slow");
                if (!ws->in_io && ws->opened)
                        run(ws, false);
                return -ENOBUFS;
        }
        struct wslay_event_msg m = {.opcode = op, .msg = data, .msg_length = len};
        int r = wslay_event_queue_msg(ws->ctx, &m);
        if (r == WSLAY_ERR_NOMEM)
                return -ENOMEM;
        if (r != 0)
                return -EPIPE;
        if (l->observe & M0_OBSERVE_METRICS)
                m0__count(&l->stats.ws_out, 1);
        if (!ws->in_io && ws->opened)
                run(ws, false);
        return 0;
}

int m0__ws_queue(struct m0_ws *ws, uint8_t op, const void *data, size_t len)
{
        if (ws->ended || atomic_load(&ws->closing) || ws->drain)
                return -EPIPE;
        return queue(ws, op, data, len);
}

void m0__ws_flush(struct m0_ws *ws)
{
        if (ws->c && !ws->ended && ws->opened && !ws->in_io)
                run(ws, false);
}

void m0__ws_close_now(struct m0_ws *ws, uint16_t code, const char *reason)
{
        if (!ws->close_queued)
                fail(ws, code, reason);
        m0__ws_flush(ws);
}

/* A send or a close from another thread, on its way through the loop's mailbox: the app's
 * Close, after what it sent before; the output bound's 1008, at once. */
enum { POST_CLOSE = 0, POST_BOUND = -1 };

struct ws_post {
        struct m0_msg m;
        struct m0_ws *ws;
        int type; /* M0_WS_TEXT, M0_WS_BINARY, POST_CLOSE or POST_BOUND */
        uint16_t code;
        size_t len;
        char data[];
};

static void post_handle(struct m0_loop *el, struct m0_msg *m)
{
        (void)el;
        struct ws_post *p = M0__CONTAINER_OF(m, struct ws_post, m);
        struct m0_ws *ws = p->ws;
        if (p->type > 0) {
                atomic_fetch_sub(&ws->posted, p->len);
                atomic_fetch_sub(&ws->inbox, 1);
        }
        if (ws->c && !ws->ended) {
                /* a message sent before a Close was asked for goes before it (D223) */
                if (p->type > 0)
                        (void)queue(ws,
                                    p->type == M0_WS_TEXT ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME,
                                    p->data, p->len);
                else if (p->type == POST_CLOSE)
                        ask_close(ws, p->code, p->data);
                else if (!ws->close_queued)
                        fail(ws, p->code, p->data); /* the output bound: 1008 at once (D187) */
                if (ws->c && !ws->ended && ws->opened && !ws->in_io &&
                    (p->type <= 0 || ws->close_code))
                        run(ws, false); /* a Close, or the one that waited may go now */
        }
        m0_ws_unref(ws); /* the loop frees the message, `p` */
}

static void post_drop(struct m0_loop *el, struct m0_msg *m)
{
        (void)el;
        struct ws_post *p = M0__CONTAINER_OF(m, struct ws_post, m);
        if (p->type > 0) {
                atomic_fetch_sub(&p->ws->posted, p->len);
                atomic_fetch_sub(&p->ws->inbox, 1);
        }
        m0_ws_unref(p->ws);
}

static int post(struct m0_ws *ws, int type, uint16_t code, const void *data, size_t len)
{
        /* what waits in the mailbox counts against the output bound too: past it the loop
         * closes the WebSocket 1008, and this sender is not made to wait (WS3) */
        size_t out = type > 0 ? len : 0;
        if (out && atomic_fetch_add(&ws->posted, out) + out > ws->loop->cfg->ws_max_queued) {
                atomic_fetch_sub(&ws->posted, out);
                (void)post(ws, POST_BOUND, 1008, "too slow", 8);
                return -ENOBUFS;
        }
        struct ws_post *p = malloc(sizeof(*p) + len + 1);
        if (!p) {
                atomic_fetch_sub(&ws->posted, out);
                return -ENOMEM;
        }
        *p = (struct ws_post){.m = {.handle = post_handle, .drop = post_drop, .fd = -1},
                              .ws = ws,
                              .type = type,
                              .code = code,
                              .len = len};
        if (len)
                memcpy(p->data, data, len);
        p->data[len] = '\0';
        m0_ws_ref(ws);
        if (type > 0)
                atomic_fetch_add(&ws->inbox, 1);
        int r = m0__loop_post(&ws->loop->loop, &p->m);
        if (r < 0) {
                atomic_fetch_sub(&ws->posted, out);
                if (type > 0)
                        atomic_fetch_sub(&ws->inbox, 1);
                m0_ws_unref(ws);
                free(p);
        }
        return r;
}

int m0_ws_send(m0_ws *ws, int type, const void *data, size_t len)
{
        if (!ws || (type != M0_WS_TEXT && type != M0_WS_BINARY) || (len && !data))
                return -EINVAL;
        if (atomic_load(&ws->closing))
                return -EPIPE;
        if (m0__thread_loop_self() == ws->loop)
                return m0__ws_queue(ws, type == M0_WS_TEXT ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME,
                                    data, len);
        return post(ws, type, 0, data, len);
}

static bool code_ok(int code)
{
        return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1011) ||
               (code >= 3000 && code <= 4999);
}

int m0_ws_close(m0_ws *ws, int code, const char *reason)
{
        size_t n = reason ? strlen(reason) : 0;
        if (!ws || !code_ok(code) || n > 123 || (reason && !m0__utf8_ok(reason)))
                return -EINVAL;
        if (atomic_load(&ws->closing))
                return -EPIPE;
        if (m0__thread_loop_self() != ws->loop)
                return post(ws, POST_CLOSE, (uint16_t)code, reason ? reason : "", n);
        if (ws->ended)
                return -EPIPE;
        ask_close(ws, (uint16_t)code, reason);
        if (!ws->in_io && ws->opened)
                run(ws, false);
        return 0;
}
