/* SPDX-License-Identifier: MIT */
/* request.c: what a handler reads of its request. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "request.h"

const char *m0_version(void)
{
        return PACKAGE_VERSION;
}

const char *m0_req_method(const m0_req *req)
{
        return req->method;
}

const char *m0_req_path(const m0_req *req)
{
        return req->path;
}

const char *m0_req_query_string(const m0_req *req)
{
        return req->query;
}

static int hexval(int ch)
{
        if (ch >= '0' && ch <= '9')
                return ch - '0';
        if (ch >= 'a' && ch <= 'f')
                return ch - 'a' + 10;
        if (ch >= 'A' && ch <= 'F')
                return ch - 'A' + 10;
        return -1;
}

ssize_t m0__pct_decode(const char *s, size_t n, char *out, unsigned flags)
{
        bool strict = flags & M0__PCT_STRICT;
        size_t o = 0, seg = 0; /* the decoded segment so far, for the dot-segment check */
        bool dots = true;
        for (size_t i = 0; i < n; i++) {
                unsigned char ch = (unsigned char)s[i];
                if (ch == '+' && (flags & M0__PCT_PLUS)) {
                        ch = ' ';
                } else if (ch == '%') {
                        int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
                        int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
                        if (hi >= 0 && lo >= 0) {
                                ch = (unsigned char)(hi * 16 + lo);
                                i += 2;
                                if ((strict && ch == '\0') ||
                                    ((flags & M0__PCT_NO_SLASH) && ch == '/'))
                                        return -EINVAL;
                        } else if (strict) {
                                return -EINVAL;
                        }
                }
                if (strict && ch == '/') {
                        if (dots && seg && seg <= 2)
                                return -EINVAL;
                        seg = 0;
                        dots = true;
                } else if (strict) {
                        seg++;
                        dots = dots && ch == '.';
                }
                if (out)
                        out[o] = (char)ch;
                o++;
        }
        if (strict && dots && seg && seg <= 2)
                return -EINVAL; /* "." or "..": a path a handler might resolve upwards */
        return (ssize_t)o;
}

/* A query's decoding: percent escapes and '+', nothing refused. */
static size_t decode(const char *s, size_t n, char *out)
{
        return (size_t)m0__pct_decode(s, n, out, M0__PCT_PLUS);
}

/*
 * The first call decodes the whole query once into the request's arena, as records of
 * [name length][value length] name NUL value NUL (lengths as size_t), so that an empty name or a
 * decoded %00 cannot end the list early. The arena is sized up front: returned pointers stay put.
 */
static int query_index(m0_req *req)
{
        if (req->arena.len)
                return 0;
        size_t n = strlen(req->query);
        /* each record costs at most its bytes, two NULs and two lengths; '&' bounds the count */
        size_t records = 1;
        for (const char *q = req->query; *q; q++)
                records += *q == '&';
        int r = m0__buf_reserve(&req->arena, n + records * (2 + 2 * sizeof(size_t)) + 1);
        if (r < 0)
                return r;
        char *out = req->arena.data;
        size_t o = 0;
        const char *s = req->query;
        while (*s) {
                const char *amp = strchr(s, '&');
                size_t len = amp ? (size_t)(amp - s) : strlen(s);
                if (len) {
                        const char *eq = memchr(s, '=', len);
                        size_t kn = eq ? (size_t)(eq - s) : len;
                        size_t at = o;
                        o += 2 * sizeof(size_t);
                        size_t dk = decode(s, kn, out + o);
                        o += dk;
                        out[o++] = '\0';
                        size_t dv = eq ? decode(eq + 1, len - kn - 1, out + o) : 0;
                        o += dv;
                        out[o++] = '\0';
                        memcpy(out + at, &dk, sizeof(dk));
                        memcpy(out + at + sizeof(dk), &dv, sizeof(dv));
                }
                s += len + (amp ? 1 : 0);
        }
        out[o] = '\0';
        req->arena.len = o ? o : 1; /* non-zero: indexed */
        return 0;
}

const char *m0_req_query(m0_req *req, const char *name)
{
        if (!req->query[0] || query_index(req) < 0)
                return NULL;
        size_t want = strlen(name);
        const char *p = req->arena.data;
        const char *end = p + req->arena.len;
        while (p + 2 * sizeof(size_t) <= end) {
                size_t kn, vn;
                memcpy(&kn, p, sizeof(kn));
                memcpy(&vn, p + sizeof(kn), sizeof(vn));
                const char *k = p + 2 * sizeof(size_t);
                const char *v = k + kn + 1;
                /* a name with a decoded NUL in it matches no C string */
                if (kn == want && memcmp(k, name, kn) == 0)
                        return v;
                p = v + vn + 1;
        }
        return NULL;
}

int m0_req_query_int(m0_req *req, const char *name, long min, long max, long *ret)
{
        const char *v = m0_req_query(req, name);
        if (!v)
                return -ENOENT;
        if (!*v)
                return -EINVAL;
        char *end;
        errno = 0;
        long x = strtol(v, &end, 10);
        if (*end)
                return -EINVAL;
        if (errno == ERANGE || x < min || x > max)
                return -ERANGE;
        *ret = x;
        return 0;
}

int m0__req_bind(m0_req *req, const char *path, const struct m0_match *m)
{
        const struct m0_croute *r = m->route;
        if (req) {
                req->route = r;
                req->nparams = 0;
                req->params.len = 0;
        }
        if (!r || !m->nparams)
                return 0;
        size_t need = 0;
        for (unsigned k = 0; k < m->nparams; k++)
                need += m->len[k] + 1;
        if (req && m0__buf_reserve(&req->params, need) < 0)
                return -ENOMEM;
        for (unsigned k = 0; k < m->nparams; k++) {
                /* %2F is refused in one segment's capture, taken in the rest's (T1) */
                bool rest = r->rest && k + 1 == m->nparams;
                unsigned flags = M0__PCT_STRICT | (rest ? 0 : M0__PCT_NO_SLASH);
                char *out = req ? req->params.data + req->params.len : NULL;
                ssize_t d = m0__pct_decode(path + m->off[k], m->len[k], out, flags);
                if (d < 0)
                        return -EINVAL;
                if (req) {
                        out[d] = '\0';
                        req->param[k] = (uint32_t)req->params.len;
                        req->params.len += (size_t)d + 1;
                }
        }
        if (req)
                req->nparams = m->nparams;
        return 0;
}

const char *m0_req_param(const m0_req *req, const char *name)
{
        const struct m0_croute *r = req->route;
        if (!r || !name)
                return NULL;
        size_t n = strlen(name);
        for (unsigned k = 0; k < req->nparams; k++)
                if (r->name_len[k] == n && memcmp(r->name[k], name, n) == 0)
                        return req->params.data + req->param[k];
        return NULL;
}

const char *m0_req_header(const m0_req *req, const char *name)
{
        for (size_t i = 0; i < req->nheaders; i++)
                if (strcasecmp(req->headers[i].name, name) == 0)
                        return req->headers[i].value;
        return NULL;
}

size_t m0_req_header_count(const m0_req *req)
{
        return req->nheaders;
}

int m0_req_header_at(const m0_req *req, size_t i, const char **ret_name, const char **ret_value)
{
        if (i >= req->nheaders)
                return -ERANGE;
        *ret_name = req->headers[i].name;
        *ret_value = req->headers[i].value;
        return 0;
}

const void *m0_req_body(const m0_req *req, size_t *ret_len)
{
        *ret_len = req->body_len;
        return req->body;
}

int m0_req_loop(const m0_req *req)
{
        return req->loop;
}

int m0_req_thread(const m0_req *req)
{
        return req->thread;
}
