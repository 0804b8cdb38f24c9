/* SPDX-License-Identifier: MIT */
/* json.c: JSON through jansson (SPEC Q3): a request's body parsed and bounded, a response's body
 * and an event's data written, a string made fit for a JSON document whatever its bytes (D47).
 * m0 writes no JSON of its own: jansson parses and escapes. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "json.h"
#include "request.h"
#include "response.h"

_Static_assert(M0__JSON_DEPTH_MAX == JSON_PARSER_MAX_DEPTH,
               "M0_JSON_MAX_DEPTH's ceiling is jansson's own bound");

/* ---- a request's body (Q3) ---- */

/* Whether the Content-Type is application/json or application/<x>+json, parameters allowed. */
static bool is_json(const m0_req *req)
{
        static const char app[] = "application/";
        size_t n;
        const char *t = m0__req_media_type(req, &n);
        if (!t || n < sizeof(app) - 1 + 4 || strncasecmp(t, app, sizeof(app) - 1) != 0)
                return false;
        const char *sub = t + sizeof(app) - 1;
        size_t sn = n - (sizeof(app) - 1);
        return (sn == 4 && strncasecmp(sub, "json", 4) == 0) ||
               (sn > 5 && strncasecmp(sub + sn - 5, "+json", 5) == 0);
}

/* Record what m0_req_json() refused, for the host's answer when the handler returns `err`; a
 * second call returns the same. */
static int refuse(m0_req *req, int err, int status, const char *fmt, ...) M0_PRINTF(4, 5);
static int refuse(m0_req *req, int err, int status, const char *fmt, ...)
{
        char detail[sizeof(req->refusal.detail)];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        req->json_err = err;
        return m0__req_refuse(req, err, status, "%s", detail);
}

/*
 * jansson's reason without its " near '…'" part, which quotes the client's bytes, and with any
 * byte outside printable ASCII as '?': the detail goes into text/plain and JSON answers alike.
 */
static void reason(const json_error_t *je, char *out, size_t len)
{
        const char *t = je->text;
        size_t n = strlen(t);
        const char *near = strstr(t, " near ");
        if (near)
                n = (size_t)(near - t);
        if (json_error_code(je) == json_error_null_character)
                t = "\\u0000 is not allowed", n = strlen(t); /* not jansson's flag name */
        snprintf(out, len, "%.*s", (int)n, t);
        for (char *p = out; *p; p++)
                if (*p < 0x20 || *p > 0x7e)
                        *p = '?';
}

/* Whether `j` nests arrays and objects deeper than `max` levels (a top-level array is one).
 * The walk goes no deeper than max + 1, whatever the value's depth. */
static bool too_deep(json_t *j, unsigned max)
{
        size_t i;
        const char *k;
        json_t *v;
        if (!json_is_array(j) && !json_is_object(j))
                return false;
        if (max == 0)
                return true;
        if (json_is_array(j)) {
                json_array_foreach(j, i, v)
                {
                        if (too_deep(v, max - 1))
                                return true;
                }
        } else {
                json_object_foreach(j, k, v)
                {
                        if (too_deep(v, max - 1))
                                return true;
                }
        }
        return false;
}

#define DEPTH_DETAIL "the body nests JSON deeper than %u levels (M0_JSON_MAX_DEPTH)"

int m0_req_json(m0_req *req, json_t **ret)
{
        if (req->json) {
                *ret = req->json;
                return 0;
        }
        if (req->json_err)
                return req->json_err;
        if (!is_json(req)) {
                static const char type[] = "application/json";
                char detail[128];
                m0__error_media_detail(type, sizeof(type) - 1, detail, sizeof(detail));
                return refuse(req, -EMEDIUMTYPE, 415, "%s", detail);
        }
        if (req->body_len == 0)
                return refuse(req, -EBADMSG, 400, "the body is empty: JSON was expected");
        /* jansson's parser recurses once per level and stops past JSON_PARSER_MAX_DEPTH, the
         * knob's ceiling: no input gets it deeper than that. */
        json_error_t je;
        json_t *j =
                json_loadb(req->body, req->body_len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
        if (!j && json_error_code(&je) == json_error_out_of_memory)
                return -ENOMEM;
        if (!j && json_error_code(&je) == json_error_stack_overflow)
                return refuse(req, -EBADMSG, 400, DEPTH_DETAIL, req->json_max_depth);
        if (!j) {
                char why[JSON_ERROR_TEXT_LENGTH];
                reason(&je, why, sizeof(why));
                return refuse(req, -EBADMSG, 400,
                              "the body is not valid JSON: %s at line %d, column %d", why, je.line,
                              je.column);
        }
        if (too_deep(j, req->json_max_depth)) {
                json_decref(j);
                return refuse(req, -EBADMSG, 400, DEPTH_DETAIL, req->json_max_depth);
        }
        req->scratch = true;
        req->json = j;
        *ret = j;
        return 0;
}

/* ---- JSON out ---- */

/* Where json_dump_callback() writes: the body, and whether it ran out of memory. */
struct sink {
        struct m0_buf *buf;
        int err;
};

static int append_cb(const char *buffer, size_t size, void *data)
{
        struct sink *k = data;
        if (m0__buf_append(k->buf, buffer, size) == 0)
                return 0;
        k->err = -ENOMEM;
        return -1;
}

int m0__res_json_append(m0_res *res, const json_t *json)
{
        struct sink k = {&res->body, 0};
        size_t mark = res->body.len;
        if (json_dump_callback(json, append_cb, &k, JSON_COMPACT | JSON_ENCODE_ANY) == 0)
                return 0;
        /* Else a string jansson cannot write (not UTF-8, from json_stringn_nocheck()). */
        res->body.len = mark;
        return k.err ? k.err : -EINVAL;
}

int m0_res_json_value(m0_res *res, int status, const json_t *json)
{
        if (!json)
                return -EINVAL;
        int r = m0_res_status(res, status);
        if (r < 0)
                return r;
        size_t mark = res->body.len;
        r = m0__res_json_append(res, json);
        if (r == 0)
                r = m0_res_header(res, "Content-Type", "application/json");
        if (r < 0)
                res->body.len = mark;
        return r;
}

int m0_res_json_string(m0_res *res, const char *s)
{
        json_t *str = json_stringn_nocheck(s, strlen(s));
        if (!str)
                return -ENOMEM;
        int r = m0__res_json_append(res, str);
        json_decref(str);
        return r;
}

int64_t m0_publish_json(const char *channel, const char *event, const json_t *data, unsigned flags)
{
        if (!data)
                return -EINVAL;
        char *text = json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!text)
                return -EINVAL;
        int64_t id = m0_publish(channel, event, text, flags);
        free(text);
        return id;
}

/* ---- strings of any bytes (D47) ---- */

/* The length of the well-formed UTF-8 sequence at `p` (RFC 3629: no overlong form, no
 * surrogate, nothing past U+10FFFF), or 0. Reads no byte past a NUL. */
static size_t utf8_len(const unsigned char *p)
{
        unsigned char lo = 0x80, hi = 0xbf;
        size_t n;
        if (p[0] < 0x80)
                return 1;
        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                n = 2;
        else if (p[0] >= 0xe0 && p[0] <= 0xef)
                n = 3, lo = p[0] == 0xe0 ? 0xa0 : 0x80, hi = p[0] == 0xed ? 0x9f : 0xbf;
        else if (p[0] >= 0xf0 && p[0] <= 0xf4)
                n = 4, lo = p[0] == 0xf0 ? 0x90 : 0x80, hi = p[0] == 0xf4 ? 0x8f : 0xbf;
        else
                return 0;
        if (p[1] < lo || p[1] > hi)
                return 0;
        for (size_t i = 2; i < n; i++)
                if (p[i] < 0x80 || p[i] > 0xbf)
                        return 0;
        return n;
}

bool m0__utf8_ok(const char *s)
{
        size_t k;
        for (const unsigned char *p = (const unsigned char *)s; *p; p += k)
                if (!(k = utf8_len(p)))
                        return false;
        return true;
}

json_t *m0__json_string_lossy(const char *s)
{
        static const char fffd[] = "\xef\xbf\xbd";
        size_t n = strlen(s);
        /* each byte turns into at most the three of U+FFFD */
        char *buf = n < (SIZE_MAX - 1) / 3 ? malloc(3 * n + 1) : NULL;
        if (!buf)
                return NULL;
        size_t o = 0;
        for (const unsigned char *p = (const unsigned char *)s; *p;) {
                size_t k = utf8_len(p);
                if (k) {
                        memcpy(buf + o, p, k);
                        o += k;
                } else {
                        memcpy(buf + o, fffd, 3);
                        o += 3;
                }
                p += k ? k : 1;
        }
        json_t *str = json_stringn_nocheck(buf, o);
        free(buf);
        return str;
}
