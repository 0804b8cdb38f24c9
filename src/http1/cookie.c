/* SPDX-License-Identifier: MIT */
/* cookie.c: cookies (SPEC Q1, RFC 6265): the request's Cookie fields read into the parameter
 * index, and one Set-Cookie built from checked parts. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cookie.h"
#include "head-checks.h"
#include "request.h"

/* Bounds browsers hold cookies to (RFC 6265 6.1, RFC 6265bis 5.6): past them a cookie or an
 * attribute is dropped on the client's side, so m0 refuses to send it. */
#define COOKIE_PAIR_MAX 4096 /* name and value */
#define COOKIE_ATTR_MAX 1024 /* a Path or Domain value */
#define COOKIE_LINE_MAX (COOKIE_PAIR_MAX + 2 * COOKIE_ATTR_MAX + 128)

/* RFC 6265 4.1.1's cookie-octet: visible ASCII but DQUOTE, comma, semicolon and backslash. */
static bool cookie_octet(unsigned char c)
{
        return c >= 0x21 && c <= 0x7e && c != '"' && c != ',' && c != ';' && c != '\\';
}

static bool octets_ok(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!cookie_octet((unsigned char)s[i]))
                        return false;
        return true;
}

static bool ows(char c)
{
        return c == ' ' || c == '\t';
}

size_t m0__cookie_bound(const m0_req *req)
{
        size_t need = 0;
        for (size_t i = 0; i < req->nheaders; i++)
                if (strcasecmp(req->headers[i].name, "cookie") == 0)
                        need += m0__param_bound(req->headers[i].value,
                                                strlen(req->headers[i].value), ';');
        return need;
}

/*
 * The record of one cookie-pair [s, s+n) at `out`, or none (0) for a part that is not a pair
 * (no '=', no name). Whitespace around the name and the value is dropped; a value in double
 * quotes loses them; a value that is not *cookie-octet is M0__PARAM_BAD.
 */
static size_t pair_put(const char *s, size_t n, char *out)
{
        while (n && ows(*s))
                s++, n--;
        while (n && ows(s[n - 1]))
                n--;
        const char *eq = memchr(s, '=', n);
        if (!eq)
                return 0;
        size_t nl = (size_t)(eq - s);
        while (nl && ows(s[nl - 1]))
                nl--;
        if (!nl)
                return 0;
        const char *v = eq + 1;
        size_t vl = n - (size_t)(v - s);
        while (vl && ows(*v))
                v++, vl--;
        if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"')
                v++, vl -= 2;
        unsigned flags = 0;
        if (!octets_ok(v, vl)) {
                flags = M0__PARAM_BAD;
                vl = 0;
        }
        return m0__param_put(out, flags, s, nl, v, vl);
}

size_t m0__cookie_put(const m0_req *req, char *out)
{
        size_t o = 0;
        for (size_t i = 0; i < req->nheaders; i++) {
                if (strcasecmp(req->headers[i].name, "cookie") != 0)
                        continue;
                for (const char *v = req->headers[i].value; *v;) {
                        size_t len = strcspn(v, ";");
                        o += pair_put(v, len, out + o);
                        v += len + (v[len] == ';');
                }
        }
        return o;
}

/* The length of `s` when it is a token (a cookie's name, RFC 6265 4.1.1), else 0. */
static size_t token_len(const char *s)
{
        size_t n = 0;
        while (s[n])
                if (!m0__tchar[(unsigned char)s[n++]])
                        return 0;
        return n;
}

const char *m0_req_cookie(m0_req *req, const char *name)
{
        if (!name || !token_len(name))
                return NULL;
        return m0__param_cookie(req, name);
}

/* RFC 6265's path-value: CHAR but CTLs and ';'. m0 also wants the leading '/' without which
 * a browser uses the request's own directory instead (RFC 6265 5.2.4). 0, -EINVAL, -ENOBUFS. */
static int path_check(const char *p)
{
        size_t n = strlen(p);
        if (p[0] != '/')
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (p[i] < 0x20 || p[i] > 0x7e || p[i] == ';')
                        return -EINVAL;
        return n > COOKIE_ATTR_MAX ? -ENOBUFS : 0;
}

/* A host name's letters, digits, hyphens and dots (RFC 1034, as RFC 6265's domain-value). */
static int domain_check(const char *d)
{
        size_t n = strlen(d), dots = strspn(d, ".");
        if (dots == n)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                char c = d[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.'))
                        return -EINVAL;
        }
        return n > COOKIE_ATTR_MAX ? -ENOBUFS : 0;
}

/* What the attributes must hold together: SameSite=None only with Secure (browsers drop it
 * otherwise), and the name prefixes of RFC 6265bis 4.1.3. 0 or -EINVAL. */
static int attrs_check(const char *name, const m0_cookie_attrs *a)
{
        if (a->max_age < M0_COOKIE_DELETE || a->same_site < M0_SAMESITE_UNSET ||
            a->same_site > M0_SAMESITE_NONE)
                return -EINVAL;
        if (a->same_site == M0_SAMESITE_NONE && !a->secure)
                return -EINVAL;
        if (strncasecmp(name, "__Secure-", 9) == 0 && !a->secure)
                return -EINVAL;
        if (strncasecmp(name, "__Host-", 7) == 0 &&
            (!a->secure || a->domain || !a->path || strcmp(a->path, "/") != 0))
                return -EINVAL;
        int r = a->path ? path_check(a->path) : 0;
        if (r == 0 && a->domain)
                r = domain_check(a->domain);
        return r;
}

int m0_res_cookie(m0_res *res, const char *name, const char *value, const m0_cookie_attrs *attrs)
{
        static const m0_cookie_attrs none = {0};
        static const char *const same_site[] = {"", "; SameSite=Strict", "; SameSite=Lax",
                                                "; SameSite=None"};
        const m0_cookie_attrs *a = attrs ? attrs : &none;
        size_t nl = name ? token_len(name) : 0;
        size_t vl = value ? strlen(value) : 0;
        if (!nl || !value || !octets_ok(value, vl))
                return -EINVAL;
        int r = attrs_check(name, a);
        if (r < 0)
                return r;
        if (nl + vl > COOKIE_PAIR_MAX)
                return -ENOBUFS;
        char line[COOKIE_LINE_MAX], age[32] = "";
        if (a->max_age)
                snprintf(age, sizeof(age), "; Max-Age=%" PRId64,
                         a->max_age == M0_COOKIE_DELETE ? (int64_t)0 : a->max_age);
        /* Every part is bounded above, so the line fits. */
        snprintf(line, sizeof(line), "%s=%s%s%s%s%s%s%s%s%s", name, value,
                 a->http_only ? "; HttpOnly" : "", same_site[a->same_site],
                 a->path ? "; Path=" : "", a->path ? a->path : "", a->domain ? "; Domain=" : "",
                 a->domain ? a->domain : "", age, a->secure ? "; Secure" : "");
        return m0_res_header(res, "Set-Cookie", line);
}
