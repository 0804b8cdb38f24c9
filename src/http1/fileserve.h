/* SPDX-License-Identifier: MIT */
/* fileserve.h: fileserve.c, the handler of a route that serves files (SPEC SF1-SF3). */
#ifndef M0_FILESERVE_H
#define M0_FILESERVE_H

#include "m0.h"

/*
 * The handler of every files route (m0_route.files): the file the request names beneath the
 * route's root (its `*name` capture, or the one file it serves) as res's file body, with its
 * validators and the answers of RFC 9110 to its conditions and ranges, or its precompressed
 * sibling (D181). A name that resolves to nothing servable is the host's 404 (D175). The
 * thread running the handler.
 */
int m0__files_serve(m0_req *req, m0_res *res, void *state);

#endif /* M0_FILESERVE_H */
