/* SPDX-License-Identifier: MIT */
/* compress.h: compress.c, an app's answer compressed by the best coding its client accepts
 * (SPEC SF4). */
#ifndef M0_COMPRESS_H
#define M0_COMPRESS_H

#include "m0.h"

struct m0_config;

/*
 * Decide `res`'s coding once (res->coded is set after): an answer whose Content-Type is
 * compressible and whose body is at least M0_COMPRESS_MIN_BYTES gets Vary: Accept-Encoding
 * and, when the request accepts a coding and neither m0_res_no_compress() nor its
 * Sec-Fetch-Site forbids it (D183), its body replaced by the smaller compressed one with
 * Content-Encoding (D182). An answer that set Content-Encoding itself, a file's, an event
 * stream's and one without a body are left as they are, as is one the coder fails on. The
 * thread that ran the handler (a pool thread's CPU, not the loop's), or the loop.
 */
void m0__res_compress(const struct m0_config *k, const m0_req *req, m0_res *res);

#endif /* M0_COMPRESS_H */
