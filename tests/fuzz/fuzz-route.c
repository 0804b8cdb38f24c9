/* SPDX-License-Identifier: MIT */
/* fuzz-route.c: libFuzzer harness over the route table's compiler and matcher (T1-T3) and the
 * CORS origins (Q5). The input is lines: a route table, the paths to match against it, strings
 * to percent-decode, origins and what requests say. Every answer of the compiled trie must be
 * the slow reference's (route-ref.h), every capture must decode or be refused, a decoding must
 * refuse what its flags refuse and only that, and no CORS line may hold a byte a header value
 * cannot. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "config.h"
#include "cors.h"
#include "head-checks.h"
#include "request.h"
#include "route.h"
#include "route-ref.h"

/* The second byte of a line picks its method. */
static const char *const methods[] = {NULL,     "GET",   "POST",    "PUT",
                                      "DELETE", "PATCH", "OPTIONS", "HEAD"};
#define NMETHODS (sizeof(methods) / sizeof(methods[0]))
#define MAX_ROUTES 64
#define MAX_LINES 256

static int handler(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)res;
        (void)state;
        return 0;
}

static const char *method_of(char c)
{
        return methods[(unsigned char)c % NMETHODS];
}

/* Each line of a CORS answer is "Name: value\r\n" with a value of field-value bytes. */
static void check_lines(const struct m0_buf *b)
{
        size_t i = 0;
        while (i < b->len) {
                const char *nl = memchr(b->data + i, '\n', b->len - i);
                if (!nl || nl == b->data + i || nl[-1] != '\r')
                        __builtin_trap();
                const char *colon = memchr(b->data + i, ':', (size_t)(nl - b->data) - i);
                if (!colon)
                        __builtin_trap();
                for (const char *q = colon + 1; q < nl - 1; q++)
                        if (!m0__vchar[(unsigned char)*q])
                                __builtin_trap(); /* a CR, LF or CTL from a client's bytes */
                i = (size_t)(nl - b->data) + 1;
        }
}

static void query(const struct m0_router *rt, const m0_route *table, size_t n, const char *line,
                  size_t len)
{
        const char *method = method_of(line[1]);
        int m = method ? m0__method_number(method) : -1;
        const char *path = line + 2;
        size_t plen = len - 2;
        struct m0_match got;
        struct ref_match want;
        m0__router_match(rt, m, path, plen, &got);
        ref_match(table, n, m, path, plen, &want);
        if (ref_differs(&got, &want))
                __builtin_trap();
        char allow[512];
        size_t an = m0__router_allow(rt, got.allow, allow, sizeof(allow));
        if (an < 7 || strcmp(allow + an - 7, "OPTIONS") != 0)
                __builtin_trap();
        if (!got.route)
                return;
        m0_req req;
        memset(&req, 0, sizeof(req));
        int r = m0__req_bind(&req, path, &got);
        if (r == 0) {
                for (unsigned k = 0; k < req.nparams; k++) {
                        const char *v = req.params.data + req.param[k];
                        if (strlen(v) > got.len[k] || v[0] == '/')
                                __builtin_trap(); /* decoding never lengthens, holds no NUL,
                                                   * and no capture begins with '/' (D110) */
                }
        } else if (r != -EINVAL || m0__req_bind(NULL, path, &got) != -EINVAL) {
                __builtin_trap(); /* checking alone says what binding says */
        }
        m0__buf_free(&req.params);
}

/* The escapes and segments m0__pct_decode() must refuse under `flags`, found the obvious way. */
static bool ref_refused(const char *s, size_t n, unsigned flags)
{
        bool strict = flags & M0__PCT_STRICT;
        size_t seg = 0, dots = 0;
        bool first = true;
        for (size_t i = 0; i <= n; i++) {
                unsigned ch = i < n ? (unsigned char)s[i] : '/';
                bool escape = ch == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
                              isxdigit((unsigned char)s[i + 2]);
                if (ch == '%' && !escape && strict)
                        return true; /* a malformed escape */
                if (escape) {
                        ch = (unsigned)strtoul((char[]){s[i + 1], s[i + 2], 0}, NULL, 16);
                        i += 2;
                        if ((strict && ch == 0) || (ch == '/' && (flags & M0__PCT_NO_SLASH)))
                                return true;
                }
                if (i < n && ch == '/' && (flags & M0__PCT_RELATIVE) && first)
                        return true; /* a capture that begins with '/' (D110) */
                first = false;
                if (ch == '/') {
                        if (strict && seg && seg == dots && seg <= 2)
                                return true; /* "." or ".." */
                        seg = dots = 0;
                } else {
                        seg++;
                        dots += ch == '.';
                }
        }
        return false;
}

/* "D<f><bytes>": decode the bytes under flags f (its low four bits), checking alone and into a
 * buffer: both say the same, a refusal is the reference's, and the output is never longer, has
 * no NUL under M0__PCT_STRICT, and no '/' the input did not hold literally under NO_SLASH. */
static void decode(const char *line, size_t len)
{
        unsigned flags = (unsigned char)line[1] & 15u;
        const char *s = line + 2;
        size_t n = len - 2;
        char *out = malloc(n + 1);
        if (!out)
                return;
        ssize_t a = m0__pct_decode(s, n, NULL, flags), b = m0__pct_decode(s, n, out, flags);
        if (a != b || (b < 0) != ref_refused(s, n, flags) || (b < 0 && b != -EINVAL) ||
            b > (ssize_t)n)
                __builtin_trap();
        if (b >= 0 && (flags & M0__PCT_STRICT) && memchr(out, '\0', (size_t)b))
                __builtin_trap();
        if (b >= 0 && (flags & M0__PCT_NO_SLASH)) {
                size_t in = 0, got = 0;
                for (size_t i = 0; i < n; i++)
                        in += s[i] == '/';
                for (ssize_t i = 0; i < b; i++)
                        got += out[i] == '/';
                if (in != got)
                        __builtin_trap();
        }
        if (b >= 0 && !memchr(s, '%', n) && !((flags & M0__PCT_PLUS) && memchr(s, '+', n)) &&
            (b != (ssize_t)n || memcmp(s, out, n) != 0))
                __builtin_trap(); /* nothing to decode: the bytes as they are */
        free(out);
}

static void cors(char **lines, size_t nlines)
{
        const char *origins[MAX_LINES + 1];
        size_t n = 0;
        for (size_t i = 0; i < nlines; i++)
                if (lines[i][0] == 'O')
                        origins[n++] = lines[i] + 1;
        if (!n)
                return;
        origins[n] = NULL;
        m0_cors def = {.origins = origins, .credentials = n & 1};
        struct m0_cors_c c;
        if (m0__cors_build(&c, &def) < 0) {
                if (!c.err[0] || !c.fix[0])
                        __builtin_trap();
                return;
        }
        for (size_t i = 0; i < nlines; i++) {
                const char *o = lines[i] + 1;
                if (lines[i][0] != 'C')
                        continue;
                const char *a = m0__cors_allowed(&c, o, strlen(o));
                bool listed = false;
                for (size_t k = 0; k < n; k++)
                        listed |= !strcmp(origins[k], o);
                if (!c.any && (a != NULL) != listed)
                        __builtin_trap();
                struct m0_buf out = {0};
                if (m0__cors_answer(&c, o, strlen(o), &out) < 0 ||
                    m0__cors_preflight(&c, o, strlen(o), "GET, OPTIONS", o, strlen(o), &out) < 0)
                        __builtin_trap();
                check_lines(&out);
                m0__buf_free(&out);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct m0_config cfg = {.max_body_bytes = 4096};
        char *text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';
        char *lines[MAX_LINES];
        size_t nlines = 0;
        for (char *p = text; p && nlines < MAX_LINES;) {
                char *nl = strchr(p, '\n');
                if (nl)
                        *nl = '\0';
                lines[nlines++] = p;
                p = nl ? nl + 1 : NULL;
        }
        /* "R<m><path>" and "P<m><path>" (a prefix route) make the table, in order. */
        m0_route table[MAX_ROUTES + 1];
        size_t n = 0;
        memset(table, 0, sizeof(table));
        for (size_t i = 0; i < nlines && n < MAX_ROUTES; i++) {
                if ((lines[i][0] != 'R' && lines[i][0] != 'P') || !lines[i][1])
                        continue;
                table[n].method = method_of(lines[i][1]);
                table[n].path = lines[i] + 2;
                table[n].handler = handler;
                table[n].flags = lines[i][0] == 'P' ? M0_ROUTE_PREFIX : 0;
                n++;
        }
        m0_app app = {.name = "fuzz", .routes = table};
        struct m0_router rt;
        int r = m0__router_build(&rt, &app, &cfg);
        if (r == -EINVAL && strncmp(rt.err, "route ", 6) != 0)
                __builtin_trap(); /* a refusal names its route */
        if (r == 0) {
                /* "Q<m><path>": a path to match; only paths as a request can have them */
                for (size_t i = 0; i < nlines; i++)
                        if (lines[i][0] == 'Q' && lines[i][1] && lines[i][2] == '/')
                                query(&rt, table, n, lines[i], strlen(lines[i]));
        }
        m0__router_free(&rt);
        for (size_t i = 0; i < nlines; i++)
                if (lines[i][0] == 'D' && lines[i][1])
                        decode(lines[i], strlen(lines[i]));
        cors(lines, nlines);
        free(text);
        return 0;
}
