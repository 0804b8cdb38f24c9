/* SPDX-License-Identifier: MIT */
/* compress.c: an app's answer compressed by the best coding its client accepts: zstd, brotli or
 * gzip, for a compressible type past M0_COMPRESS_MIN_BYTES, with Vary (SPEC SF4, D182, D183). */
#include <string.h>
#include <strings.h>

#include "compress.h"
#include "files.h"
#include "config.h"
#include "response.h"

void m0__res_compress(const struct m0_config *k, const m0_req *req, m0_res *res)
{
        char ctype[256], coding[64];
        res->coded = true;
        /* 204, 304 and 1xx carry no body; a 206's bytes are a range of the identity body */
        if (res->file.on || res->stream || res->body.len < k->compress_min_bytes ||
            res->status == 204 || res->status == 206 || res->status == 304 || res->no_compress)
                return;
        if (!m0__res_head_value(res, "content-type", 12, ctype, sizeof(ctype)) ||
            !m0__compressible(ctype) ||
            m0__res_head_value(res, "content-encoding", 16, coding, sizeof(coding)))
                return;
        /* What a cache keeps of this answer depends on the request's Accept-Encoding from here
         * on, whichever coding this request gets. */
        if (m0_res_header(res, "Vary", "Accept-Encoding") < 0)
                return;
        struct m0_accept_enc a;
        m0__accept_enc_parse(m0_req_header(req, "accept-encoding"), &a);
        const struct m0_compress_cfg cfg = {.min_bytes = k->compress_min_bytes,
                                            .zstd_level = (int)k->compress_zstd_level,
                                            .brotli_level = (int)k->compress_brotli_level,
                                            .gzip_level = (int)k->compress_gzip_level};
        enum m0_coding c = m0__compress_choose(&cfg, &a, ctype, res->body.len, false,
                                               m0_req_header(req, "sec-fetch-site"));
        if (c == M0_CODING_IDENTITY)
                return;
        struct m0_buf out = {0};
        if (m0__compress(&cfg, c, res->body.data, res->body.len, &out) == 1 &&
            m0_res_header(res, "Content-Encoding", m0__coding_name(c)) == 0) {
                struct m0_buf body = res->body;
                res->body = out;
                out = body;
        }
        m0__buf_free(&out);
}
