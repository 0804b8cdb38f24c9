/* SPDX-License-Identifier: MIT */
/* head-checks.c: the request head as H3 allows it, checked byte by byte whatever llhttp let through. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "head-checks.h"
#include "request.h"

/* RFC 9110 tchar. */
const unsigned char m0__tchar[256] = {
        ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1,
        ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1,  ['~'] = 1, ['0'] = 1,
        ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1,  ['7'] = 1, ['8'] = 1,
        ['9'] = 1, ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1,  ['F'] = 1, ['G'] = 1,
        ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1,  ['N'] = 1, ['O'] = 1,
        ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1,  ['V'] = 1, ['W'] = 1,
        ['X'] = 1, ['Y'] = 1, ['Z'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1,  ['d'] = 1, ['e'] = 1,
        ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1,  ['l'] = 1, ['m'] = 1,
        ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1,  ['t'] = 1, ['u'] = 1,
        ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
};

/* RFC 9110 field-value bytes: HTAB, SP, VCHAR, obs-text. CTLs (CR and LF among them) and DEL
 * are not, so a scan over a value stops at its CRLF or at the first byte to refuse. */
/* clang-format off */
const unsigned char m0__vchar[256] = {
        ['\t'] = 1, [0x20 ... 0x7e] = 1, [0x80 ... 0xff] = 1,
};

/* Past the field-value bytes from s (m0__vchar's), to the first other byte or end. Eight bytes at
 * a time while none of them is below 0x20 (HTAB included: it goes the slow way) nor DEL, which
 * the two tests of each word say exactly; the word with the CR that ends the value, or with a
 * tab, is walked byte by byte (D251). */
static inline const unsigned char *value_end(const unsigned char *s, const unsigned char *end)
{
        const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
        while (end - s >= 8) {
                uint64_t w;
                memcpy(&w, s, 8);
                uint64_t x = w ^ (ones * 0x7f); /* DEL's byte becomes zero */
                if (((w - ones * 0x20) & ~w & highs) | ((x - ones) & ~x & highs))
                        break;
                s += 8;
        }
        while (s < end && m0__vchar[*s])
                s++;
        return s;
}

/* A request-target byte: visible ASCII; no CTL, SP, DEL, or non-ASCII. */
static inline bool target_ok(unsigned char ch)
{
        return ch > 0x20 && ch < 0x7f;
}

/* A byte of uri-host [":" port]: unreserved, pct-encoded, sub-delims, ':' and IP-literal's []. */
static const unsigned char host_char[256] = {
        ['a' ... 'z'] = 1, ['A' ... 'Z'] = 1, ['0' ... '9'] = 1, ['-'] = 1, ['.'] = 1, ['_'] = 1,
        ['~'] = 1, ['%'] = 1, ['!'] = 1, ['$'] = 1, ['&'] = 1, ['\''] = 1, ['('] = 1, [')'] = 1,
        ['*'] = 1, ['+'] = 1, [','] = 1, [';'] = 1, ['='] = 1, [':'] = 1, ['['] = 1, [']'] = 1,
};
/* clang-format on */

static bool name_is(const char *p, size_t n, const char *lit)
{
        return strlen(lit) == n && strncasecmp(p, lit, n) == 0;
}

/* A field name (tchar bytes alone, checked) is `lit`, a lower-case name of letters and '-', in
 * any case: a tchar byte ORed with 0x20 is a lower-case letter only when it is that letter, and
 * '-' only when it is '-' (CR, the other byte that gives '-', is no tchar). */
static inline bool token_is(const char *p, size_t n, const char *lit)
{
        for (size_t i = 0; i < n; i++)
                if (((unsigned char)p[i] | 0x20) != (unsigned char)lit[i])
                        return false;
        return true;
}

static inline void trim(const char **p, size_t *n)
{
        while (*n && (**p == ' ' || **p == '\t')) {
                (*p)++;
                (*n)--;
        }
        while (*n && ((*p)[*n - 1] == ' ' || (*p)[*n - 1] == '\t'))
                (*n)--;
}

void m0__http_trim(const char **p, size_t *n)
{
        trim(p, n);
}

/* Is the last element of a comma list `chunked` (case-insensitive)? */
static bool ends_in_chunked(const char *v, size_t n)
{
        const char *comma = NULL;
        for (size_t i = 0; i < n; i++)
                if (v[i] == ',')
                        comma = v + i;
        const char *last = comma ? comma + 1 : v;
        size_t ln = n - (size_t)(last - v);
        m0__http_trim(&last, &ln);
        return name_is(last, ln, "chunked");
}

/* Content-Length: one or more comma-separated copies of the same decimal number. */
static int parse_cl(const char *v, size_t n, uint64_t *ret)
{
        bool have = false;
        uint64_t first = 0;
        size_t i = 0;
        while (i <= n) {
                size_t j = i;
                while (j < n && v[j] != ',')
                        j++;
                const char *e = v + i;
                size_t en = j - i;
                m0__http_trim(&e, &en);
                if (en == 0 || en > 19)
                        return -EINVAL;
                uint64_t x = 0;
                for (size_t k = 0; k < en; k++) {
                        if (e[k] < '0' || e[k] > '9')
                                return -EINVAL;
                        x = x * 10 + (uint64_t)(e[k] - '0');
                }
                if (have && x != first)
                        return -EINVAL;
                first = x;
                have = true;
                i = j + 1;
        }
        *ret = first;
        return 0;
}

/* What the walk of one head found, for the checks that span its fields. */
struct head_walk {
        const unsigned char *p, *end; /* the head */
        const unsigned char *method_end, *target, *target_end;
        size_t tlen;
        bool v11;
        size_t nfields, nhost;
        bool have_cl, have_te, te_chunked;
        uint64_t cl;
};

/* request-line = method SP request-target SP HTTP-version CRLF. Returns 0 and where the fields
 * begin, or the status refusing it. */
static int request_line(struct head_walk *w, const struct m0_config *cfg,
                        const unsigned char **ret_s)
{
        const unsigned char *p = w->p, *end = w->end, *s = p;
        while (s < end && m0__tchar[*s])
                s++;
        if (s == p || s >= end || *s != ' ')
                return 400;
        w->method_end = s++;
        w->target = s;
        while (s < end && target_ok(*s))
                s++;
        w->tlen = (size_t)(s - w->target);
        if (w->tlen > cfg->max_uri_bytes)
                return 414;
        /* A target followed by CRLF has no version: HTTP/0.9, refused. */
        if (w->tlen == 0 || s >= end || *s != ' ')
                return 400;
        w->target_end = s++;
        if (end - s < 10 || memcmp(s, "HTTP/1.", 7) != 0 || s[7] < '0' || s[7] > '9' ||
            s[8] != '\r' || s[9] != '\n')
                return 400;
        w->v11 = s[7] >= '1';
        *ret_s = s + 10;
        return 0;
}

/* What the host checks of one field's value: Host, Content-Length, Transfer-Encoding (H3). */
static int field_meaning(struct head_walk *w, const char *name, size_t nn, const char *v, size_t vn)
{
        /* by length first: most fields are none of the three */
        if (nn == 4 && token_is(name, 4, "host")) {
                w->nhost++;
                /* uri-host [":" port] (RFC 9112 3.2, RFC 3986 3.2.2): no whitespace, no
                 * userinfo, no path — a Host naming anything else is refused */
                for (size_t k = 0; k < vn; k++)
                        if (!host_char[(unsigned char)v[k]])
                                return 400;
        } else if (nn == 14 && token_is(name, 14, "content-length")) {
                uint64_t x;
                if (parse_cl(v, vn, &x) < 0 || (w->have_cl && x != w->cl))
                        return 400;
                w->have_cl = true;
                w->cl = x;
        } else if (nn == 17 && token_is(name, 17, "transfer-encoding")) {
                w->have_te = true;
                /* Of several TE fields, the last one's last coding is the final one. */
                w->te_chunked = ends_in_chunked(v, vn);
        }
        return 0;
}

/* The header fields from `*sp` to the blank line, each checked and, with `req`, cut into
 * NUL-terminated strings and indexed. Returns 0 with *sp past the blank line, or a status. */
static int header_fields(struct head_walk *w, char *head, const struct m0_config *cfg,
                         struct m0_req *req, const unsigned char **sp)
{
        const unsigned char *p = w->p, *end = w->end, *s = *sp;
        size_t nfields = 0; /* in a register through the loop; the walk learns it at the end */
        for (;;) {
                if (s >= end)
                        return 400; /* llhttp said complete; a head we cannot walk is malformed */
                if (*s == '\r') {
                        if (s + 1 >= end || s[1] != '\n')
                                return 400;
                        *sp = s + 2;
                        w->nfields = nfields;
                        return 0;
                }
                if (*s == '\n')
                        return 400; /* bare LF */
                if (*s == ' ' || *s == '\t')
                        return 400; /* obs-fold */
                const unsigned char *name = s;
                while (s < end && m0__tchar[*s])
                        s++;
                if (s == name || s >= end || *s != ':')
                        return 400; /* empty name, or whitespace before the colon */
                const unsigned char *name_end = s++;
                const unsigned char *val = s;
                s = value_end(s, end);
                if (s + 1 >= end || *s != '\r' || s[1] != '\n')
                        return 400; /* a CTL or DEL, a bare LF, or a CR not followed by LF */
                const unsigned char *val_end = s;
                s += 2;
                if ((size_t)(s - p) > cfg->max_head_bytes || ++nfields > cfg->max_header_fields)
                        return 431;
                const char *v = (const char *)val;
                size_t vn = (size_t)(val_end - val);
                trim(&v, &vn);
                int st = field_meaning(w, (const char *)name, (size_t)(name_end - name), v, vn);
                if (st)
                        return st;
                if (req) {
                        struct m0_header *hd = &req->headers[nfields - 1];
                        head[name_end - p] = '\0';
                        hd->name = (const char *)name;
                        ((char *)v)[vn] = '\0';
                        hd->value = v;
                        req->nheaders = nfields; /* a walk refused later leaves these readable */
                }
        }
}

/* The path of the request-target [t, t + n), whose query begins at q (NULL: none): up to it, and in absolute-form past
 * "scheme://authority" ("/" when that has no path). The asterisk-form "*" is its own path. */
static inline void target_path(const char *t, size_t n, const char *q, const char **ret,
                               size_t *ret_len)
{
        size_t pn = q ? (size_t)(q - t) : n;
        if (t[0] != '/' && !(pn == 1 && t[0] == '*')) {
                const char *a = memmem(t, pn, "://", 3);
                const char *slash = a ? memchr(a + 3, '/', pn - (size_t)(a + 3 - t)) : NULL;
                if (!slash) {
                        *ret = "/";
                        *ret_len = 1;
                        return;
                }
                pn -= (size_t)(slash - t);
                t = slash;
        }
        *ret = t;
        *ret_len = pn;
}

/* Method, path and query into `req`, cut out of the request line. */
static void index_target(const struct head_walk *w, char *head, struct m0_req *req)
{
        const unsigned char *p = w->p;
        head[w->method_end - p] = '\0';
        req->method = head;
        head[w->target_end - p] = '\0';
        char *t = head + (w->target - p);
        char *q = memchr(t, '?', w->tlen);
        target_path(t, w->tlen, q, &req->path, &req->path_len);
        if (q) {
                *q = '\0';
                req->query = q + 1;
        } else {
                req->query = "";
        }
        req->nheaders = w->nfields;
}

int m0__http_head_pending(const char *head, size_t have, const struct m0_config *cfg)
{
        if (!memchr(head, '\n', have) && have > (size_t)cfg->max_uri_bytes + 32)
                return 414;
        return have > cfg->max_head_bytes ? 431 : 0;
}

void m0__http_target(const char *head, size_t len, const char **ret_path, size_t *ret_len)
{
        const char *t = memchr(head, ' ', len);
        t = t ? t + 1 : head + len;
        const char *e = memchr(t, ' ', len - (size_t)(t - head));
        size_t n = e ? (size_t)(e - t) : 0;
        target_path(t, n, memchr(t, '?', n), ret_path, ret_len);
}

const char *m0__head_field(const char *head, size_t len, const char *name, size_t *ret_len)
{
        size_t nn = strlen(name);
        const char *end = head + len;
        const char *p = memchr(head, '\n', len);
        while (p && ++p < end && *p != '\r') {
                /* checked already (H3): every line ends in CRLF, and no value holds a CR */
                const char *eol = memchr(p, '\r', (size_t)(end - p));
                if (!eol)
                        return NULL;
                const char *colon = memchr(p, ':', (size_t)(eol - p));
                if (colon && (size_t)(colon - p) == nn && strncasecmp(p, name, nn) == 0) {
                        const char *v = colon + 1;
                        size_t vn = (size_t)(eol - v);
                        m0__http_trim(&v, &vn);
                        *ret_len = vn;
                        return v;
                }
                p = eol + 1;
        }
        return NULL;
}

int m0__http_head_parse(char *head, size_t avail, const struct m0_config *cfg, struct m0_req *req,
                        size_t *ret_len)
{
        struct head_walk w = {.p = (const unsigned char *)head, .te_chunked = true};
        w.end = w.p + avail;
        const unsigned char *s;
        if (req)
                req->nheaders = 0;
        int st = request_line(&w, cfg, &s);
        if (!st)
                st = header_fields(&w, head, cfg, req, &s);
        if (st)
                return st;
        if ((size_t)(s - w.p) > cfg->max_head_bytes)
                return 431;
        if (w.have_cl && w.have_te)
                return 400;
        if (w.have_te && (!w.te_chunked || !w.v11))
                return 400;
        if (w.nhost > 1 || (w.v11 && w.nhost == 0))
                return 400;
        if (req)
                index_target(&w, head, req);
        *ret_len = (size_t)(s - w.p);
        return 0;
}
