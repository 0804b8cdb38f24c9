/* SPDX-License-Identifier: MIT */
/* request.c: what a handler reads of its request: its head, its query and form parameters
 * (Q2), and the end of what its helpers made. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "config.h"
#include "cookie.h"
#include "error.h"
#include "head-checks.h"
#include "json.h"
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
        /* Nothing to decode (no '%', no '+' that is a space): the bytes as they are, the checks
         * made a segment at a time (D251) */
        if (n && !memchr(s, '%', n) && (!(flags & M0__PCT_PLUS) || !memchr(s, '+', n))) {
                if (s[0] == '/' && (flags & M0__PCT_RELATIVE))
                        return -EINVAL;
                for (const char *g = s, *end = s + n; strict;) {
                        const char *sl = memchr(g, '/', (size_t)(end - g));
                        size_t gn = (size_t)((sl ? sl : end) - g);
                        if (gn && gn <= 2 && g[0] == '.' && g[gn - 1] == '.')
                                return -EINVAL; /* "." or ".." */
                        if (!sl)
                                break;
                        g = sl + 1;
                }
                if (out)
                        memcpy(out, s, n);
                return (ssize_t)n;
        }
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
                if (o == 0 && ch == '/' && (flags & M0__PCT_RELATIVE))
                        return -EINVAL; /* "/etc/passwd", "%2Froot": a root of its own */
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

/*
 * A query's or a form's decoding of [s, s+n) into out: percent escapes and '+'; returns the
 * decoded length. A malformed escape stays as it is and adds M0__PARAM_LAX to *flags (no '%' can
 * be a valid escape's digit, so each one found is where an escape starts); a decoded NUL (%00, or
 * a raw one in a body) adds M0__PARAM_BAD.
 */
static size_t decode(const char *s, size_t n, char *out, unsigned *flags)
{
        size_t o = (size_t)m0__pct_decode(s, n, out, M0__PCT_PLUS);
        const char *end = s + n;
        for (const char *p = memchr(s, '%', n); p; p = memchr(p + 1, '%', (size_t)(end - p - 1)))
                if (end - p < 3 || hexval(p[1]) < 0 || hexval(p[2]) < 0)
                        *flags |= M0__PARAM_LAX;
        if (memchr(out, '\0', o))
                *flags |= M0__PARAM_BAD;
        return o;
}

size_t m0__param_put(char *out, unsigned flags, const char *name, size_t nl, const char *value,
                     size_t vl)
{
        out[0] = (char)flags;
        memcpy(out + 1, name, nl);
        out[1 + nl] = '\0';
        if (vl)
                memcpy(out + 2 + nl, value, vl);
        out[2 + nl + vl] = '\0';
        return 3 + nl + vl;
}

/* The record of one "name=value" of a query or a form at `out`, decoded in place; its size.
 * A value that decodes to a NUL is kept empty and M0__PARAM_BAD. */
static size_t pair_put(const char *s, size_t len, char *out)
{
        const char *eq = memchr(s, '=', len);
        size_t kn = eq ? (size_t)(eq - s) : len;
        unsigned fk = 0, fv = eq ? 0 : M0__PARAM_BARE;
        size_t dk = decode(s, kn, out + 1, &fk);
        if (fk & M0__PARAM_BAD)
                return 0;
        size_t dv = eq ? decode(eq + 1, len - kn - 1, out + 2 + dk, &fv) : 0;
        if (fv & M0__PARAM_BAD)
                dv = 0;
        out[0] = (char)(fk | fv);
        out[1 + dk] = '\0';
        out[2 + dk + dv] = '\0';
        return 3 + dk + dv;
}

/* The most the records of an `sep`-separated list of n bytes take: each part that is not empty
 * costs its bytes and three more (a flag, two NULs); decoding only shrinks. */
size_t m0__param_bound(const char *s, size_t n, char sep)
{
        size_t need = 0;
        for (size_t at = 0; at < n;) {
                const char *p = memchr(s + at, sep, n - at);
                size_t len = p ? (size_t)(p - (s + at)) : n - at;
                if (len)
                        need += len + 3;
                at += len + 1;
        }
        return need;
}

/* The records of the "&"-separated pairs [s, s+n) at `out`; returns their size. Empty pairs
 * ("&&") have none. */
static size_t pairs_put(const char *s, size_t n, char *out)
{
        size_t o = 0;
        for (size_t at = 0; at < n;) {
                const char *amp = memchr(s + at, '&', n - at);
                size_t len = amp ? (size_t)(amp - (s + at)) : n - at;
                if (len)
                        o += pair_put(s + at, len, out + o);
                at += len + 1;
        }
        return o;
}

/* Whether the body is read as a form: its Content-Type says so, or it has none (RFC 9110 8.3
 * leaves that to the recipient; a browser always sends one, and a cross-site page can send a
 * form anyway, so taking a bare body for one opens nothing, D70). */
static bool is_form(const m0_req *req)
{
        static const char form[] = "application/x-www-form-urlencoded";
        size_t n;
        if (!m0_req_header(req, "Content-Type"))
                return true;
        const char *t = m0__req_media_type(req, &n);
        return t && n == sizeof(form) - 1 && strncasecmp(t, form, n) == 0;
}

/*
 * The first call of a parameter reader indexes the query, the form body (when the request has
 * one) and the cookies at once, into an arena sized up front so that returned pointers stay put
 * until the handler returns.
 */
static int params_index(m0_req *req)
{
        if (req->indexed)
                return 0;
        size_t qn = strlen(req->query);
        size_t fn = is_form(req) ? req->body_len : 0;
        size_t need = m0__param_bound(req->query, qn, '&') + m0__param_bound(req->body, fn, '&') +
                      m0__cookie_bound(req) + 1; /* never empty: data is never NULL */
        req->scratch = true;
        req->arena.len = 0;
        /* exactly what the index needs: a large form's is not doubled */
        if (req->arena.cap < need) {
                char *p = realloc(req->arena.data, need);
                if (!p)
                        return -ENOMEM;
                req->arena.data = p;
                req->arena.cap = need;
        }
        char *out = req->arena.data;
        req->query_end = pairs_put(req->query, qn, out);
        req->form_end = req->query_end + pairs_put(req->body, fn, out + req->query_end);
        req->arena.len = req->form_end + m0__cookie_put(req, out + req->form_end);
        req->indexed = true;
        return 0;
}

/* The value of the first record named `name` in [from, to) of the index, NULL when it has none
 * or that record is M0__PARAM_BAD: the query's and the cookies' lenient reading. */
static const char *param_first(const m0_req *req, size_t from, size_t to, const char *name)
{
        for (const char *p = req->arena.data + from, *end = req->arena.data + to; p < end;) {
                unsigned flags = (unsigned char)p[0];
                const char *k = p + 1;
                const char *v = k + strlen(k) + 1;
                p = v + strlen(v) + 1;
                if (strcmp(k, name) == 0)
                        return flags & M0__PARAM_BAD ? NULL : v;
        }
        return NULL;
}

/*
 * The one record named `name` in [from, to) of the index (AP1): 0 and *ret_value; -ENOENT (none),
 * -EEXIST (more than one), -EBADMSG (a decoded NUL, or a flag of `bad`: M0__PARAM_LAX, a
 * malformed %-escape; M0__PARAM_BARE, no '='), and with `utf8`, -EILSEQ (not UTF-8).
 */
static int param_one(const m0_req *req, size_t from, size_t to, const char *name, unsigned bad,
                     bool utf8, const char **ret_value)
{
        const char *hit = NULL;
        unsigned hit_flags = 0;
        for (const char *p = req->arena.data + from, *end = req->arena.data + to; p < end;) {
                unsigned flags = (unsigned char)p[0];
                const char *k = p + 1;
                const char *v = k + strlen(k) + 1;
                p = v + strlen(v) + 1;
                if (strcmp(k, name) != 0)
                        continue;
                if (hit)
                        return -EEXIST;
                hit = v;
                hit_flags = flags;
        }
        if (!hit)
                return -ENOENT;
        if (hit_flags & (M0__PARAM_BAD | bad))
                return -EBADMSG;
        if (utf8 && !m0__utf8_ok(hit))
                return -EILSEQ;
        *ret_value = hit;
        return 0;
}

int m0__req_refuse(m0_req *req, int err, int status, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(req->refusal.detail, sizeof(req->refusal.detail), fmt, ap);
        va_end(ap);
        req->scratch = true;
        req->refusal.err = err;
        req->refusal.status = status;
        req->refusal.headers = NULL;
        return err;
}

/* What param_one() found wrong with `what` ("the form field", "the query parameter") `name`,
 * recorded as the 400 the host answers when the handler returns it (AP1). */
static int refuse_param(m0_req *req, const char *what, const char *name, int err)
{
        const char *why;
        switch (err) {
        case -ENOENT: why = "is missing"; break;
        case -EEXIST: why = "is given more than once"; break;
        case -EBADMSG: why = "is malformed: a bad %-escape, %00, or no '=' in a form"; break;
        case -EILSEQ: why = "is not UTF-8"; break;
        default: return err;
        }
        return m0__req_refuse(req, err, 400, "%s '%.64s' %s", what, name, why);
}

const char *m0_req_query(m0_req *req, const char *name)
{
        if (!req->query[0] || params_index(req) < 0)
                return NULL;
        return param_first(req, 0, req->query_end, name);
}

int m0_req_query_get(m0_req *req, const char *name, const char **ret_value)
{
        int r = params_index(req);
        if (r == 0)
                r = param_one(req, 0, req->query_end, name, M0__PARAM_LAX, true, ret_value);
        return r < 0 ? refuse_param(req, "the query parameter", name, r) : 0;
}

/* What a form does not send: a field without '=', a malformed %-escape (Q2). */
#define FORM_BAD (M0__PARAM_LAX | M0__PARAM_BARE)

const char *m0_req_form(m0_req *req, const char *name)
{
        const char *v;
        if (!is_form(req) || params_index(req) < 0)
                return NULL;
        return param_one(req, req->query_end, req->form_end, name, FORM_BAD, false, &v) == 0 ? v
                                                                                             : NULL;
}

int m0_req_form_get(m0_req *req, const char *name, const char **ret_value)
{
        static const char form[] = "application/x-www-form-urlencoded";
        if (!is_form(req)) {
                char detail[sizeof(req->refusal.detail)];
                m0__error_media_detail(form, sizeof(form) - 1, detail, sizeof(detail));
                return m0__req_refuse(req, -EMEDIUMTYPE, 415, "%s", detail);
        }
        int r = params_index(req);
        if (r == 0)
                r = param_one(req, req->query_end, req->form_end, name, FORM_BAD, true, ret_value);
        return r < 0 ? refuse_param(req, "the form field", name, r) : 0;
}

const char *m0__param_cookie(m0_req *req, const char *name)
{
        if (params_index(req) < 0)
                return NULL;
        return param_first(req, req->form_end, req->arena.len, name);
}

int m0_req_query_int(m0_req *req, const char *name, long min, long max, long *ret)
{
        const char *v;
        int r = m0_req_query_get(req, name, &v);
        if (r < 0)
                return r;
        uint64_t x;
        /* the configuration's numbers: digits alone, no sign, no space */
        r = m0__parse_uint(v, &x);
        if (r == -EINVAL)
                return m0__req_refuse(req, -EINVAL, 400,
                                      "the query parameter '%.64s' must be a whole number from "
                                      "%ld to %ld",
                                      name, min < 0 ? 0 : min, max); /* none has a sign */
        if (r == -ERANGE || max < 0 || x > (uint64_t)max)
                return m0__req_refuse(req, -ERANGE, 400,
                                      "the query parameter '%.64s' must be at most %ld", name, max);
        if ((long)x < min)
                return m0__req_refuse(req, -EDOM, 400,
                                      "the query parameter '%.64s' must be at least %ld", name,
                                      min);
        *ret = (long)x;
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
                /* %2F is refused in one segment's capture, taken in the rest's (T1); no
                 * capture begins with '/', literal or encoded (D110) */
                bool rest = r->rest && k + 1 == m->nparams;
                unsigned flags = M0__PCT_STRICT | M0__PCT_RELATIVE | (rest ? 0 : M0__PCT_NO_SLASH);
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

const char *m0__req_media_type(const m0_req *req, size_t *ret_len)
{
        const char *ct = m0_req_header(req, "Content-Type");
        if (!ct)
                return NULL;
        size_t n = 0;
        while (m0__tchar[(unsigned char)ct[n]])
                n++;
        if (n == 0 || ct[n] != '/')
                return NULL;
        size_t sub = ++n;
        while (m0__tchar[(unsigned char)ct[n]])
                n++;
        size_t rest = n + strspn(ct + n, " \t");
        if (n == sub || (ct[rest] != '\0' && ct[rest] != ';'))
                return NULL;
        *ret_len = n;
        return ct;
}

/* A parameter index past this many bytes is not kept for the loop's next request. */
#define ARENA_KEEP_MAX (64 * 1024)

void m0__req_scratch_end(m0_req *req)
{
        json_decref(req->json);
        req->json = NULL;
        req->json_err = 0;
        req->refusal.err = 0;
        req->indexed = false;
        req->arena.len = 0;
        if (req->arena.cap > ARENA_KEEP_MAX)
                m0__buf_free(&req->arena);
        req->scratch = false;
}
