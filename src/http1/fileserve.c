/* SPDX-License-Identifier: MIT */
/* fileserve.c: a files route's answer: the file a request names beneath the route's root, its
 * headers, its conditions, its range and its precompressed sibling (SPEC SF1, SF2, SF3). The
 * bytes go out after the head by the transport's sendfile (conn.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fileserve.h"
#include "files.h"
#include "log.h"
#include "request.h"
#include "response.h"
#include "route.h"

/* What route r serves for `req`: its one file, or its `*name` capture ("" for the root). */
static const char *file_name(const m0_req *req, const struct m0_croute *r)
{
        if (r->files_name)
                return r->files_name;
        if (r->rest && req->nparams)
                return req->params.data + req->param[req->nparams - 1];
        return "";
}

/* The host answers what could not be opened (D175): 404 for every refusal and every missing
 * name, alike; 503 or 500 for the process's own trouble, logged. */
static int refuse(m0_req *req, const char *name, int err)
{
        int status = m0__files_status(err);
        if (status != 404) {
                char buf[128];
                m0__log(M0_LOG_ERR, req->loop, NULL, "files route %s: '%.200s': %s; answered %d",
                        req->route->def->path, name, strerror_r(-err, buf, sizeof(buf)), status);
                return m0__req_refuse(req, err, status, "the file cannot be opened now");
        }
        return m0__req_refuse(req, err, 404, "no file at this path");
}

/* A directory named without its '/' (D200): its index.html's relative links would resolve
 * against its parent, so the client is sent to the name with the '/', as nginx does. */
static int to_directory(const m0_req *req, m0_res *res)
{
        const char *q = m0_req_query_string(req);
        int r = m0_res_status(res, 301);
        if (r == 0)
                r = m0_res_headerf(res, "Location", "%s/%s%s", req->path, q[0] ? "?" : "", q);
        return r;
}

/* The validators and the caching every answer about the file carries, a 304's included. */
static int validators(m0_res *res, const struct m0_croute *r, const struct m0_file *f,
                      const char *name, const char *etag)
{
        char date[M0__HTTP_DATE_MAX];
        m0__http_date((int64_t)f->st.st_mtim.tv_sec, date);
        int e = m0_res_header(res, "ETag", etag);
        if (e == 0)
                e = m0_res_header(res, "Last-Modified", date);
        if (e == 0)
                e = m0_res_header(res, "Cache-Control",
                                  m0__files_cache_control(r->def->cache_control, name));
        if (e == 0)
                e = m0_res_header(res, "Vary", "Accept-Encoding");
        return e;
}

/* The file's status under the request's conditions and Range (RFC 9110 13.2.2, 14; D177),
 * with [*ret_start, + *ret_len) the bytes a 200 or 206 sends. */
static int status_of(const m0_req *req, const struct m0_file *f, const char *etag,
                     uint64_t *ret_start, uint64_t *ret_len)
{
        int64_t mtime = (int64_t)f->st.st_mtim.tv_sec;
        const struct m0_cond c = {.if_match = m0_req_header(req, "if-match"),
                                  .if_none_match = m0_req_header(req, "if-none-match"),
                                  .if_modified_since = m0_req_header(req, "if-modified-since"),
                                  .if_unmodified_since = m0_req_header(req, "if-unmodified-since"),
                                  .if_range = m0_req_header(req, "if-range"),
                                  .range = m0_req_header(req, "range")};
        int st = m0__files_conditional(&c, etag, mtime);
        if (st)
                return st;
        uint64_t size = (uint64_t)f->st.st_size;
        *ret_start = 0;
        *ret_len = size;
        if (!c.range || !m0__files_if_range(c.if_range, etag, mtime))
                return 200;
        return m0__files_range(c.range, size, ret_start, ret_len);
}

int m0__files_serve(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        const struct m0_croute *r = req->route;
        const char *name = file_name(req, r);
        struct m0_file f = {.fd = -1};
        int e = m0__files_open(r->files_root, name, &f);
        if (e < 0)
                return refuse(req, name, e);
        size_t nl = strlen(name);
        if (f.index && nl && name[nl - 1] != '/') {
                m0__file_close(&f);
                return to_directory(req, res);
        }
        /* the type is the file's, whichever sibling's bytes are sent */
        const char *ctype = m0__mime_type(r->mime, f.path);
        const char *ae = m0_req_header(req, "accept-encoding");
        if (ae) {
                struct m0_accept_enc a;
                m0__accept_enc_parse(ae, &a);
                if ((e = m0__files_sibling(r->files_root, &a, &f)) < 0)
                        goto fail;
        }
        char etag[M0__ETAG_MAX];
        m0__files_etag(&f.st, etag);
        uint64_t start = 0, len = 0;
        int st = status_of(req, &f, etag, &start, &len);
        res->status = st;
        if ((e = validators(res, r, &f, name, etag)) < 0)
                goto fail;
        if (st == 304 || st == 412) {
                m0__file_close(&f);
                return 0;
        }
        if ((e = m0_res_header(res, "Accept-Ranges", "bytes")) < 0)
                goto fail;
        if (st == 416) {
                m0__file_close(&f);
                return m0_res_headerf(res, "Content-Range", "bytes */%" PRIu64,
                                      (uint64_t)f.st.st_size);
        }
        e = m0_res_header(res, "Content-Type", ctype);
        if (e == 0 && f.coding != M0_CODING_IDENTITY)
                e = m0_res_header(res, "Content-Encoding", m0__coding_name(f.coding));
        if (e == 0 && st == 206)
                e = m0_res_headerf(res, "Content-Range", "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64,
                                   start, start + len - 1, (uint64_t)f.st.st_size);
        if (e < 0)
                goto fail;
        res->body.len = 0;
        res->file.on = true;
        res->file.fd = f.fd;
        res->file.off = start;
        res->file.len = len;
        res->coded = true; /* its bytes are the file's, or its sibling's: never coded again */
        return 0;
fail:
        m0__file_close(&f);
        return e;
}
