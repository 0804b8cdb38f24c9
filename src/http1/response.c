/* SPDX-License-Identifier: MIT */
/* response.c: the response builder apps fill and its serialization on the wire (H4, H5). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "head-checks.h"
#include "hctx.h"
#include "response.h"

#define RES_MAX_HEADERS 64
#define RES_MAX_HEAD_BYTES (16 * 1024)

const char *m0__status_reason(int status)
{
        switch (status) {
        case 100: return "Continue";
        case 200: return "OK";
        case 201: return "Created";
        case 202: return "Accepted";
        case 204: return "No Content";
        case 206: return "Partial Content";
        case 301: return "Moved Permanently";
        case 302: return "Found";
        case 303: return "See Other";
        case 304: return "Not Modified";
        case 307: return "Temporary Redirect";
        case 308: return "Permanent Redirect";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 409: return "Conflict";
        case 412: return "Precondition Failed";
        case 411: return "Length Required";
        case 413: return "Content Too Large";
        case 414: return "URI Too Long";
        case 415: return "Unsupported Media Type";
        case 416: return "Range Not Satisfiable";
        case 417: return "Expectation Failed";
        case 422: return "Unprocessable Content";
        case 426: return "Upgrade Required";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 501: return "Not Implemented";
        case 502: return "Bad Gateway";
        case 503: return "Service Unavailable";
        case 504: return "Gateway Timeout";
        case 505: return "HTTP Version Not Supported";
        case 507: return "Insufficient Storage";
        default: return "Unknown";
        }
}

void m0__res_reset(struct m0_res *res)
{
        res->stream = false;
        res->stream_refused = false;
        res->nchans = 0;
        res->chans.len = 0;
        res->status = 200;
        res->head.len = 0;
        res->nheaders = 0;
        res->body.len = 0;
        res->no_compress = false;
        res->coded = false;
        m0__res_file_close(res);
}

void m0__res_file_close(struct m0_res *res)
{
        if (res->file.on && !res->file.shared)
                close(res->file.fd);
        res->file.on = false;
        res->file.shared = false;
        res->file.ent = NULL;
}

/* The Content-Length of `res`: its file's bytes, or its body's. */
static uint64_t body_length(const struct m0_res *res)
{
        return res->file.on ? res->file.len : res->body.len;
}

/* A status line plus the host's own headers, cached per status for the common ones. */
static int status_line(struct m0_buf *out, int status)
{
        if (status == 200) {
                static const char ok[] = "HTTP/1.1 200 OK\r\nServer: m0\r\n";
                return m0__buf_append(out, ok, sizeof(ok) - 1);
        }
        return m0__buf_printf(out, "HTTP/1.1 %d %s\r\nServer: m0\r\n", status,
                              m0__status_reason(status));
}

/* Decimal digits of v into the end of buf; returns where they start. */
static char *utoa_rev(char *end, uint64_t v)
{
        do {
                *--end = (char)('0' + v % 10);
                v /= 10;
        } while (v);
        return end;
}

void m0__res_keep_alive(struct m0_hctx *l, uint32_t idle_ms)
{
        int n = snprintf(l->keep_alive, sizeof(l->keep_alive), "Keep-Alive: timeout=%u\r\n",
                         idle_ms / 1000);
        l->keep_alive_len = n > 0 && (size_t)n < sizeof(l->keep_alive) ? (size_t)n : 0;
}

int m0__res_serialize(struct m0_hctx *l, const struct m0_res *res, bool head_only,
                      enum m0_conn_mode conn, struct m0_buf *out)
{
        int r = m0__buf_reserve(out, 160 + l->loop.date_len + l->keep_alive_len + res->head.len +
                                             (head_only ? 0 : res->body.len));
        if (r < 0)
                return r;
        r = status_line(out, res->status);
        if (r < 0)
                return r;
        char *p = out->data + out->len;
        memcpy(p, l->loop.date, l->loop.date_len);
        p += l->loop.date_len;
        /* 1xx, 204 and 304 carry no Content-Length (RFC 9110 8.6); everything else does. */
        bool no_len = res->status == 204 || res->status == 304 || res->status < 200;
        if (!no_len) {
                char num[24];
                char *d = utoa_rev(num + sizeof(num), body_length(res));
                size_t dn = (size_t)(num + sizeof(num) - d);
                memcpy(p, "Content-Length: ", 16);
                p += 16;
                memcpy(p, d, dn);
                p += dn;
                *p++ = '\r';
                *p++ = '\n';
        }
        if (conn == M0__CONN_CLOSE) {
                memcpy(p, "Connection: close\r\n", 19);
                p += 19;
        } else {
                if (conn == M0__CONN_KEEP_ALIVE) {
                        memcpy(p, "Connection: keep-alive\r\n", 24);
                        p += 24;
                }
                memcpy(p, l->keep_alive, l->keep_alive_len);
                p += l->keep_alive_len;
        }
        out->len = (size_t)(p - out->data);
        if (res->head.len) {
                memcpy(out->data + out->len, res->head.data, res->head.len);
                out->len += res->head.len;
        }
        out->data[out->len++] = '\r';
        out->data[out->len++] = '\n';
        if (!head_only && !no_len && res->body.len && !res->file.on) {
                memcpy(out->data + out->len, res->body.data, res->body.len);
                out->len += res->body.len;
        }
        return 0;
}

bool m0__res_head_value(const m0_res *res, const char *name, size_t n, char *out, size_t cap)
{
        const char *p = res->head.data, *end = p + res->head.len;
        while (p < end) {
                const char *eol = memchr(p, '\n', (size_t)(end - p));
                if (!eol)
                        break;
                if ((size_t)(eol - p) > n && p[n] == ':' && strncasecmp(p, name, n) == 0) {
                        const char *v = p + n + 1, *e = eol;
                        while (v < e && (*v == ' ' || *v == '\t'))
                                v++;
                        while (e > v && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
                                e--;
                        if (!out)
                                return true;
                        if ((size_t)(e - v) >= cap)
                                return false;
                        memcpy(out, v, (size_t)(e - v));
                        out[e - v] = '\0';
                        return true;
                }
                p = eol + 1;
        }
        return false;
}

/* ---- the public builder ---- */

int m0_res_status(m0_res *res, int status)
{
        if (status < 200 || status > 599)
                return -EINVAL;
        res->status = status;
        return 0;
}

/* The host's own framing headers, which an app may not set; matched by length first. */
static bool reserved_header(const char *name, size_t n)
{
        switch (n) {
        case 4: return strncasecmp(name, "date", 4) == 0;
        case 6: return strncasecmp(name, "server", 6) == 0;
        case 10: return strncasecmp(name, "connection", 10) == 0;
        case 14: return strncasecmp(name, "content-length", 14) == 0;
        case 17: return strncasecmp(name, "transfer-encoding", 17) == 0;
        default: return false;
        }
}

/* The length of `s` when it is a token, else 0. */
static size_t token_len(const char *s)
{
        size_t n = 0;
        while (s[n]) {
                if (!m0__tchar[(unsigned char)s[n]])
                        return 0;
                n++;
        }
        return n;
}

static int add_header(m0_res *res, const char *name, const char *value, size_t vlen)
{
        size_t nlen = name ? token_len(name) : 0;
        if (!nlen || !value || reserved_header(name, nlen))
                return -EINVAL;
        for (size_t i = 0; i < vlen; i++)
                if (!m0__vchar[(unsigned char)value[i]])
                        return -EINVAL; /* CR, LF, NUL, another CTL, or DEL */
        if (res->nheaders >= RES_MAX_HEADERS ||
            res->head.len + nlen + vlen + 4 > RES_MAX_HEAD_BYTES)
                return -ENOBUFS;
        int r = m0__buf_reserve(&res->head, nlen + vlen + 4);
        if (r < 0)
                return r;
        char *p = res->head.data + res->head.len;
        memcpy(p, name, nlen);
        p += nlen;
        *p++ = ':';
        *p++ = ' ';
        memcpy(p, value, vlen);
        p += vlen;
        *p++ = '\r';
        *p++ = '\n';
        res->head.len = (size_t)(p - res->head.data);
        res->nheaders++;
        return 0;
}

int m0__res_lines(m0_res *res, const char *lines, size_t len, unsigned n)
{
        if (res->nheaders + n > RES_MAX_HEADERS || res->head.len + len > RES_MAX_HEAD_BYTES)
                return -ENOBUFS;
        int r = m0__buf_append(&res->head, lines, len);
        if (r == 0)
                res->nheaders += n;
        return r;
}

int m0_res_header(m0_res *res, const char *name, const char *value)
{
        return add_header(res, name, value, value ? strlen(value) : 0);
}

int m0_res_headerf(m0_res *res, const char *name, const char *fmt, ...)
{
        char v[1024];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(v, sizeof(v), fmt, ap);
        va_end(ap);
        if (n < 0)
                return -EINVAL;
        if ((size_t)n >= sizeof(v))
                return -ENOBUFS;
        return add_header(res, name, v, (size_t)n);
}

int m0_res_write(m0_res *res, const void *data, size_t len)
{
        return m0__buf_append(&res->body, data, len);
}

int m0_res_printf(m0_res *res, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = m0__buf_vprintf(&res->body, fmt, ap);
        va_end(ap);
        return r;
}

int m0_res_json(m0_res *res, int status, const char *fmt, ...)
{
        int r = m0_res_status(res, status);
        if (r < 0)
                return r;
        r = m0_res_header(res, "Content-Type", "application/json");
        if (r < 0)
                return r;
        va_list ap;
        va_start(ap, fmt);
        r = m0__buf_vprintf(&res->body, fmt, ap);
        va_end(ap);
        return r;
}

int m0_res_text(m0_res *res, int status, const char *text)
{
        int r = m0_res_status(res, status);
        if (r < 0)
                return r;
        r = m0_res_header(res, "Content-Type", "text/plain; charset=utf-8");
        if (r < 0)
                return r;
        return m0__buf_append(&res->body, text, strlen(text));
}

void m0_res_no_compress(m0_res *res)
{
        res->no_compress = true;
}
