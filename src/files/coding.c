/* SPDX-License-Identifier: MIT */
/* coding.c: content codings (SPEC SF3, SF4): Accept-Encoding read once for both uses, a file's
 * precompressed sibling chosen by it, and an answer compressed by zstd, brotli or zlib. */
#include <brotli/encode.h>
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "files.h"

static const struct {
        const char *name, *suffix;
} codings[M0__CODINGS] = {
        [M0_CODING_IDENTITY] = {NULL, NULL},
        [M0_CODING_ZSTD] = {"zstd", ".zst"},
        [M0_CODING_BR] = {"br", ".br"},
        [M0_CODING_GZIP] = {"gzip", ".gz"},
};

const char *m0__coding_name(enum m0_coding c)
{
        return c < M0__CODINGS ? codings[c].name : NULL;
}

const char *m0__coding_suffix(enum m0_coding c)
{
        return c < M0__CODINGS ? codings[c].suffix : NULL;
}

static const char *ows(const char *s)
{
        while (*s == ' ' || *s == '\t')
                s++;
        return s;
}

/* A qvalue (RFC 9110 12.4.2: "0" ["." 0*3DIGIT] / "1" ["." 0*3"0"]) at [s, e) in thousandths,
 * or -1. */
static int qvalue(const char *s, const char *e)
{
        if (s == e || (*s != '0' && *s != '1'))
                return -1;
        int q = (*s - '0') * 1000, scale = 100;
        if (++s == e)
                return q;
        if (*s++ != '.' || e - s > 3)
                return -1;
        for (; s < e; s++, scale /= 10) {
                if (*s < '0' || *s > '9')
                        return -1;
                q += (*s - '0') * scale;
        }
        return q > 1000 ? -1 : q;
}

static bool token_is(const char *s, size_t n, const char *t)
{
        return n == strlen(t) && !strncasecmp(s, t, n);
}

void m0__accept_enc_parse(const char *field, struct m0_accept_enc *ret)
{
        struct m0_accept_enc a = {.star = -1, .present = field != NULL};
        for (int c = 0; c < M0__CODINGS; c++)
                a.q[c] = -1;
        for (const char *s = field; s && *s;) {
                s = ows(s);
                const char *end = strchr(s, ',');
                if (!end)
                        end = s + strlen(s);
                const char *tok = s;
                while (s < end && *s != ';' && *s != ' ' && *s != '\t')
                        s++;
                size_t tlen = (size_t)(s - tok);
                int q = 1000;
                /* parameters: only q is defined; another one is passed over */
                while (q >= 0 && s < end) {
                        s = ows(s);
                        if (s == end)
                                break;
                        if (*s++ != ';') {
                                q = -1;
                                break;
                        }
                        s = ows(s);
                        const char *pe = s;
                        while (pe < end && *pe != ';')
                                pe++;
                        const char *ve = pe;
                        while (ve > s && (ve[-1] == ' ' || ve[-1] == '\t'))
                                ve--;
                        if (ve - s >= 2 && (*s == 'q' || *s == 'Q') && s[1] == '=')
                                q = qvalue(s + 2, ve);
                        s = pe;
                }
                s = *end ? end + 1 : end;
                if (q < 0 || !tlen)
                        continue; /* not a qvalue: the element says nothing (as D116 reads q) */
                int *slot = NULL;
                if (token_is(tok, tlen, "*"))
                        slot = &a.star;
                else if (token_is(tok, tlen, "identity"))
                        slot = &a.q[M0_CODING_IDENTITY];
                else if (token_is(tok, tlen, "x-gzip"))
                        slot = &a.q[M0_CODING_GZIP];
                for (int c = 1; !slot && c < M0__CODINGS; c++)
                        if (token_is(tok, tlen, codings[c].name))
                                slot = &a.q[c];
                if (slot && *slot < 0)
                        *slot = q;
        }
        *ret = a;
}

int m0__accept_enc_q(const struct m0_accept_enc *a, enum m0_coding c)
{
        if (a->q[c] >= 0)
                return a->q[c];
        if (c == M0_CODING_IDENTITY)
                return a->star == 0 ? 0 : 1000; /* RFC 9110 12.5.3: unless excluded */
        return a->star > 0 ? a->star : 0;
}

/* The coding of the highest weight among those `allowed` (bit 1 << c), the first in `order`
 * among equals; identity when none is above 0 or identity is weighed above it. */
static enum m0_coding best(const struct m0_accept_enc *a, unsigned allowed,
                           const enum m0_coding order[3])
{
        enum m0_coding pick = M0_CODING_IDENTITY;
        int top = 0;
        for (int i = 0; i < 3; i++) {
                int q = (allowed >> order[i]) & 1 ? m0__accept_enc_q(a, order[i]) : 0;
                if (q > top) {
                        top = q;
                        pick = order[i];
                }
        }
        if (pick != M0_CODING_IDENTITY && a->q[M0_CODING_IDENTITY] > top)
                return M0_CODING_IDENTITY;
        return pick;
}

/* --- precompressed siblings (SF3) --- */

int m0__files_sibling(int root, const struct m0_accept_enc *a, struct m0_file *f)
{
        static const enum m0_coding order[3] = {M0_CODING_ZSTD, M0_CODING_BR, M0_CODING_GZIP};
        struct m0_file sib[M0__CODINGS];
        int top = 0;
        enum m0_coding pick = M0_CODING_IDENTITY;
        char name[PATH_MAX];
        if (f->coding != M0_CODING_IDENTITY)
                return 0;
        for (int i = 0; i < 3; i++) {
                enum m0_coding c = order[i];
                sib[c].fd = -1;
                int q = m0__accept_enc_q(a, c);
                if (q <= 0 || q < top)
                        continue;
                size_t sl = strlen(codings[c].suffix);
                if (f->len + sl >= sizeof(name))
                        continue;
                memcpy(name, f->path, f->len);
                memcpy(name + f->len, codings[c].suffix, sl + 1);
                /* the sibling of "docs/index.html" is never a directory's index */
                if (m0__files_open(root, name, &sib[c]) < 0)
                        continue;
                const struct timespec *sm = &sib[c].st.st_mtim, *fm = &f->st.st_mtim;
                if (sib[c].index || sm->tv_sec < fm->tv_sec ||
                    (sm->tv_sec == fm->tv_sec && sm->tv_nsec < fm->tv_nsec)) {
                        m0__file_close(&sib[c]); /* stale: made before the file changed */
                        continue;
                }
                bool better = q > top || sib[c].st.st_size < sib[pick].st.st_size;
                if (better) {
                        if (pick != M0_CODING_IDENTITY)
                                m0__file_close(&sib[pick]);
                        top = q;
                        pick = c;
                } else {
                        m0__file_close(&sib[c]);
                }
        }
        if (pick == M0_CODING_IDENTITY)
                return 0;
        if (a->q[M0_CODING_IDENTITY] > top) {
                m0__file_close(&sib[pick]);
                return 0;
        }
        m0__file_close(f);
        *f = sib[pick];
        f->coding = pick;
        return 0;
}

/* --- compressing answers (SF4) --- */

bool m0__compressible(const char *ctype)
{
        static const char *const types[] = {
                "application/json",
                "application/javascript",
                "application/ecmascript",
                "application/xml",
                "application/wasm",
                "application/x-javascript",
                "application/manifest+json",
                "image/svg+xml",
                "image/x-icon",
                "image/vnd.microsoft.icon",
                "font/ttf",
                "font/otf",
                "application/vnd.ms-fontobject",
        };
        if (!ctype)
                return false;
        size_t n = strcspn(ctype, "; \t");
        if (token_is(ctype, n, "text/event-stream"))
                return false; /* D182: a stream's frames go as they come */
        if (n > 5 && !strncasecmp(ctype, "text/", 5))
                return true;
        if (n > 5 &&
            (!strncasecmp(ctype + n - 5, "+json", 5) || !strncasecmp(ctype + n - 4, "+xml", 4)))
                return true;
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
                if (token_is(ctype, n, types[i]))
                        return true;
        return false;
}

enum m0_coding m0__compress_choose(const struct m0_compress_cfg *cfg, const struct m0_accept_enc *a,
                                   const char *ctype, size_t len, bool no_compress,
                                   const char *fetch_site)
{
        static const enum m0_coding order[3] = {M0_CODING_ZSTD, M0_CODING_BR, M0_CODING_GZIP};
        if (no_compress || len < cfg->min_bytes || !m0__compressible(ctype))
                return M0_CODING_IDENTITY;
        /* D183: a request another site made the browser send is where BREACH's attacker
         * stands; its answer's length then says nothing of what the body holds */
        if (fetch_site &&
            (!strcasecmp(fetch_site, "cross-site") || !strcasecmp(fetch_site, "same-site")))
                return M0_CODING_IDENTITY;
        return best(a, ~0u, order);
}

static int zstd_(int level, const void *body, size_t len, struct m0_buf *out)
{
        size_t cap = ZSTD_compressBound(len);
        if (m0__buf_reserve(out, cap) < 0)
                return -ENOMEM;
        size_t n = ZSTD_compress(out->data + out->len, cap, body, len, level);
        if (ZSTD_isError(n))
                return -EIO;
        return n < len ? (out->len += n, 1) : 0;
}

static int brotli_(int level, const void *body, size_t len, struct m0_buf *out)
{
        size_t cap = BrotliEncoderMaxCompressedSize(len);
        if (!cap || m0__buf_reserve(out, cap) < 0)
                return -ENOMEM;
        size_t n = cap;
        if (!BrotliEncoderCompress(level, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_GENERIC, len, body, &n,
                                   (uint8_t *)out->data + out->len))
                return -EIO;
        return n < len ? (out->len += n, 1) : 0;
}

static int gzip_(int level, const void *body, size_t len, struct m0_buf *out)
{
        z_stream z = {0};
        /* 16 + MAX_WBITS: a gzip wrapper, as Content-Encoding: gzip means (RFC 1952) */
        if (deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
                return -ENOMEM;
        size_t cap = deflateBound(&z, (uLong)len);
        int ret = m0__buf_reserve(out, cap);
        if (!ret) {
                z.next_in = (Bytef *)(uintptr_t)body;
                z.avail_in = (uInt)len;
                z.next_out = (Bytef *)out->data + out->len;
                z.avail_out = (uInt)cap;
                ret = deflate(&z, Z_FINISH) == Z_STREAM_END ? 0 : -EIO;
        }
        if (!ret)
                ret = z.total_out < len ? (out->len += z.total_out, 1) : 0;
        deflateEnd(&z);
        return ret;
}

int m0__compress(const struct m0_compress_cfg *cfg, enum m0_coding c, const void *body, size_t len,
                 struct m0_buf *out)
{
        if (len > UINT32_MAX)
                return 0; /* zlib counts in uInt; an answer this big is not one to compress */
        switch (c) {
        case M0_CODING_ZSTD: return zstd_(cfg->zstd_level, body, len, out);
        case M0_CODING_BR: return brotli_(cfg->brotli_level, body, len, out);
        case M0_CODING_GZIP: return gzip_(cfg->gzip_level, body, len, out);
        default: return 0;
        }
}
