/* SPDX-License-Identifier: MIT */
/* notes-json.c: a strict, bounded reader of flat JSON objects, and the escaper notes writes. */
#include <errno.h>
#include <string.h>

#include "notes-json.h"

/* Longest member name any schema of notes has; a longer name cannot match, so it is refused. */
#define NAME_MAX_BYTES 32

struct reader {
        const char *p, *end;
};

static void skip_ws(struct reader *r)
{
        while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
                r->p++;
}

static int hex4(struct reader *r, unsigned *ret)
{
        unsigned v = 0;
        if (r->end - r->p < 4)
                return -EINVAL;
        for (int i = 0; i < 4; i++) {
                char c = *r->p++;
                v <<= 4;
                if (c >= '0' && c <= '9')
                        v |= (unsigned)(c - '0');
                else if (c >= 'a' && c <= 'f')
                        v |= (unsigned)(c - 'a' + 10);
                else if (c >= 'A' && c <= 'F')
                        v |= (unsigned)(c - 'A' + 10);
                else
                        return -EINVAL;
        }
        *ret = v;
        return 0;
}

/* Append `n` bytes to out[0..*len) within `cap`. */
static int put(char *out, size_t cap, size_t *len, const char *b, size_t n)
{
        if (n > cap - *len)
                return -E2BIG;
        memcpy(out + *len, b, n);
        *len += n;
        return 0;
}

/* The \u escape after its backslash and 'u': one code point, or a surrogate pair, as UTF-8. */
static int unicode_escape(struct reader *r, char *out, size_t cap, size_t *len)
{
        unsigned cp;
        int e = hex4(r, &cp);
        if (e < 0)
                return e;
        if (cp >= 0xdc00 && cp <= 0xdfff)
                return -EINVAL; /* a low surrogate first */
        if (cp >= 0xd800 && cp <= 0xdbff) {
                unsigned lo;
                if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u')
                        return -EINVAL;
                r->p += 2;
                e = hex4(r, &lo);
                if (e < 0)
                        return e;
                if (lo < 0xdc00 || lo > 0xdfff)
                        return -EINVAL;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        if (cp == 0)
                return -EINVAL; /* no NUL in a decoded string */
        char u[4];
        size_t n;
        if (cp < 0x80) {
                u[0] = (char)cp;
                n = 1;
        } else if (cp < 0x800) {
                u[0] = (char)(0xc0 | cp >> 6);
                u[1] = (char)(0x80 | (cp & 0x3f));
                n = 2;
        } else if (cp < 0x10000) {
                u[0] = (char)(0xe0 | cp >> 12);
                u[1] = (char)(0x80 | (cp >> 6 & 0x3f));
                u[2] = (char)(0x80 | (cp & 0x3f));
                n = 3;
        } else {
                u[0] = (char)(0xf0 | cp >> 18);
                u[1] = (char)(0x80 | (cp >> 12 & 0x3f));
                u[2] = (char)(0x80 | (cp >> 6 & 0x3f));
                u[3] = (char)(0x80 | (cp & 0x3f));
                n = 4;
        }
        return put(out, cap, len, u, n);
}

/* A string token at r->p, decoded into out (cap bytes at most, then a NUL at out[*ret_len]). */
static int string(struct reader *r, char *out, size_t cap, size_t *ret_len)
{
        size_t len = 0;
        int e;
        if (r->p >= r->end || *r->p != '"')
                return -EINVAL;
        r->p++;
        for (;;) {
                /* A run of plain bytes is copied at once. */
                const char *s = r->p;
                while (r->p < r->end && *r->p != '"' && *r->p != '\\' &&
                       (unsigned char)*r->p >= 0x20)
                        r->p++;
                e = put(out, cap, &len, s, (size_t)(r->p - s));
                if (e < 0)
                        return e;
                if (r->p >= r->end)
                        return -EINVAL;
                char c = *r->p++;
                if (c == '"')
                        break;
                if (c != '\\')
                        return -EINVAL; /* a raw control character */
                if (r->p >= r->end)
                        return -EINVAL;
                char x = *r->p++;
                const char *plain = NULL;
                switch (x) {
                case '"': plain = "\""; break;
                case '\\': plain = "\\"; break;
                case '/': plain = "/"; break;
                case 'b': plain = "\b"; break;
                case 'f': plain = "\f"; break;
                case 'n': plain = "\n"; break;
                case 'r': plain = "\r"; break;
                case 't': plain = "\t"; break;
                case 'u': e = unicode_escape(r, out, cap, &len); break;
                default: return -EINVAL;
                }
                if (plain)
                        e = put(out, cap, &len, plain, 1);
                if (e < 0)
                        return e;
        }
        out[len] = '\0';
        *ret_len = len;
        return 0;
}

static int uint_value(struct reader *r, uint64_t *ret)
{
        const uint64_t max = (uint64_t)INT64_MAX;
        uint64_t v = 0;
        const char *s = r->p;
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
                unsigned d = (unsigned)(*r->p - '0');
                if (v > (max - d) / 10)
                        return -EINVAL;
                v = v * 10 + d;
                r->p++;
        }
        size_t n = (size_t)(r->p - s);
        if (n == 0 || (n > 1 && *s == '0'))
                return -EINVAL;
        /* A fraction or an exponent makes it another kind of number. */
        if (r->p < r->end && (*r->p == '.' || *r->p == 'e' || *r->p == 'E'))
                return -EINVAL;
        *ret = v;
        return 0;
}

ssize_t notes_json_object(const char *p, size_t len, struct notes_json_field *fields, size_t n)
{
        struct reader r = {.p = p, .end = p + len};
        int e;
        for (size_t i = 0; i < n; i++) {
                fields[i].seen = false;
                fields[i].len = 0;
                fields[i].num = 0;
        }
        skip_ws(&r);
        if (r.p >= r.end || *r.p != '{')
                return -EINVAL;
        r.p++;
        skip_ws(&r);
        if (r.p < r.end && *r.p == '}') {
                r.p++;
                return r.p - p;
        }
        for (;;) {
                char name[NAME_MAX_BYTES + 1];
                size_t name_len;
                skip_ws(&r);
                e = string(&r, name, NAME_MAX_BYTES, &name_len);
                if (e < 0)
                        return -EINVAL; /* a name too long for any field is no field's name */
                struct notes_json_field *f = NULL;
                for (size_t i = 0; i < n && !f; i++)
                        if (strlen(fields[i].name) == name_len &&
                            memcmp(fields[i].name, name, name_len) == 0)
                                f = &fields[i];
                if (!f || f->seen)
                        return -EINVAL;
                skip_ws(&r);
                if (r.p >= r.end || *r.p != ':')
                        return -EINVAL;
                r.p++;
                skip_ws(&r);
                if (f->type == NOTES_JSON_STRING)
                        e = string(&r, f->buf, f->cap, &f->len);
                else
                        e = uint_value(&r, &f->num);
                if (e < 0)
                        return e;
                f->seen = true;
                skip_ws(&r);
                if (r.p >= r.end)
                        return -EINVAL;
                char c = *r.p++;
                if (c == '}')
                        return r.p - p;
                if (c != ',')
                        return -EINVAL;
        }
}

int notes_json_write_string(notes_json_put_fn putf, void *ctx, const char *s, size_t len)
{
        static const char hex[] = "0123456789abcdef";
        int e = putf(ctx, "\"", 1);
        size_t i = 0;
        while (e == 0 && i < len) {
                size_t j = i;
                while (j < len && s[j] != '"' && s[j] != '\\' && (unsigned char)s[j] >= 0x20)
                        j++;
                if (j > i) {
                        e = putf(ctx, s + i, j - i);
                        i = j;
                        continue;
                }
                unsigned char c = (unsigned char)s[i++];
                char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                switch (c) {
                case '"': e = putf(ctx, "\\\"", 2); break;
                case '\\': e = putf(ctx, "\\\\", 2); break;
                case '\n': e = putf(ctx, "\\n", 2); break;
                case '\r': e = putf(ctx, "\\r", 2); break;
                case '\t': e = putf(ctx, "\\t", 2); break;
                default: e = putf(ctx, esc, sizeof(esc)); break;
                }
        }
        return e == 0 ? putf(ctx, "\"", 1) : e;
}
