/* SPDX-License-Identifier: MIT */
/* fileserve.c: a files route's answer: the file a request names beneath the route's root, its
 * headers, its conditions, its range and its precompressed sibling (SPEC SF1, SF2, SF3). The
 * bytes go out after the head by the transport's sendfile (conn.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* "name" + v + CRLF onto b; 0 or -ENOMEM. */
static int put_line(struct m0_buf *b, const char *name, size_t nn, const char *v)
{
        size_t vn = strlen(v);
        if (m0__buf_reserve(b, nn + vn + 2) < 0)
                return -ENOMEM;
        char *p = b->data + b->len;
        memcpy(p, name, nn);
        memcpy(p + nn, v, vn);
        memcpy(p + nn + vn, "\r\n", 2);
        b->len += nn + vn + 2;
        return 0;
}

#define PUT_LINE(b, name, v) put_line(b, name, sizeof(name) - 1, v)

/* f's header lines into f->lines, made once for every answer of the turn (D239): the
 * validators and the caching every answer about the file carries (D202), then what a 200 or a
 * 206 adds. Copied, not printed (D251). */
static int make_lines(struct m0_fent *f, const struct m0_croute *r, const char *name)
{
        struct m0_buf *b = &f->lines;
        b->len = 0;
        int e = PUT_LINE(b, "ETag: ", f->etag);
        f->tag = (uint32_t)b->len;
        if (e == 0)
                e = PUT_LINE(b, "Last-Modified: ", f->mtime);
        f->lm = (uint32_t)b->len;
        if (e == 0)
                e = PUT_LINE(
                        b, "Cache-Control: ", m0__files_cache_control(r->def->cache_control, name));
        if (e == 0)
                e = PUT_LINE(b, "Vary: ", "Accept-Encoding");
        f->val = (uint32_t)b->len;
        if (e == 0)
                e = PUT_LINE(b, "Accept-Ranges: ", "bytes");
        f->ar = (uint32_t)b->len;
        if (e == 0)
                e = PUT_LINE(b, "Content-Type: ", f->ctype);
        if (e == 0 && f->coding != M0_CODING_IDENTITY)
                e = PUT_LINE(b, "Content-Encoding: ", m0__coding_name(f->coding));
        return e;
}

/* Lines [from, to) of f's, `n` of them. */
static int lines(m0_res *res, const struct m0_fent *f, uint32_t from, uint32_t to, unsigned n)
{
        return m0__res_lines(res, f->lines.data + from, to - from, n);
}

/* The file's status under the request's conditions and Range (RFC 9110 13.2.2, 14; D177),
 * with [*ret_start, + *ret_len) the bytes a 200 or 206 sends. */
static int status_of(const struct m0_cond *c, const struct m0_fent *f, const char *etag,
                     uint64_t *ret_start, uint64_t *ret_len)
{
        int64_t mtime = (int64_t)f->st.st_mtim.tv_sec;
        int st = m0__files_conditional(c, etag, mtime);
        if (st)
                return st;
        uint64_t size = (uint64_t)f->st.st_size;
        *ret_start = 0;
        *ret_len = size;
        if (!c->range || !m0__files_if_range(c->if_range, etag, mtime))
                return 200;
        return m0__files_range(c->range, size, ret_start, ret_len);
}

/* The fields a file's answer reads (its conditions, Range, Accept-Encoding), each the first of
 * its name as m0_req_header() finds it, in one walk of the request's fields rather than seven
 * (D251): most requests carry none of them. */
static void read_fields(const m0_req *req, struct m0_cond *c, const char **ret_ae)
{
        *c = (struct m0_cond){0};
        *ret_ae = NULL;
        for (size_t i = 0; i < req->nheaders; i++) {
                const char *n = req->headers[i].name, *v = req->headers[i].value;
                const char **slot = NULL;
                switch (n[0]) {
                case 'a':
                case 'A':
                        if (strcasecmp(n, "accept-encoding") == 0)
                                slot = ret_ae;
                        break;
                case 'r':
                case 'R':
                        if (strcasecmp(n, "range") == 0)
                                slot = &c->range;
                        break;
                case 'i':
                case 'I':
                        if (strncasecmp(n, "if-", 3) != 0)
                                break;
                        if (strcasecmp(n + 3, "match") == 0)
                                slot = &c->if_match;
                        else if (strcasecmp(n + 3, "none-match") == 0)
                                slot = &c->if_none_match;
                        else if (strcasecmp(n + 3, "modified-since") == 0)
                                slot = &c->if_modified_since;
                        else if (strcasecmp(n + 3, "unmodified-since") == 0)
                                slot = &c->if_unmodified_since;
                        else if (strcasecmp(n + 3, "range") == 0)
                                slot = &c->if_range;
                        break;
                default: break;
                }
                if (slot && !*slot)
                        *slot = v;
        }
}

/* What `name` finds beneath route r's root under Accept-Encoding `ae` (NULL: absent), into *e
 * (its fd the caller's): the file, or the precompressed sibling `ae` picks (D181) unless the
 * name is a directory's without its '/', with its validators and type. 0, or -errno. */
static int find_file(const struct m0_croute *r, const char *name, const char *ae, struct m0_fent *e)
{
        struct m0_file f = {.fd = -1};
        int err = m0__files_open(r->files_root, name, &f);
        if (err < 0)
                return err;
        size_t nl = strlen(name);
        bool redirect = f.index && nl && name[nl - 1] != '/';
        /* the type is the file's, whichever sibling's bytes are sent */
        e->ctype = m0__mime_type(r->mime, f.path);
        if (ae && !redirect) {
                struct m0_accept_enc a;
                m0__accept_enc_parse(ae, &a);
                if ((err = m0__files_sibling(r->files_root, &a, &f)) < 0) {
                        m0__file_close(&f);
                        return err;
                }
        }
        e->fd = f.fd;
        e->st = f.st;
        e->coding = f.coding;
        e->index = f.index;
        m0__files_etag(&f.st, e->etag);
        m0__http_date((int64_t)f.st.st_mtim.tv_sec, e->mtime);
        return 0;
}

/* The answer about file f; its body is f's fd, given to res (shared when the turn's cache holds
 * it). True in *ret_gave when res took the fd. */
static int answer(m0_req *req, m0_res *res, const struct m0_cond *c, const char *name,
                  struct m0_fent *f, bool *ret_gave)
{
        size_t nl = strlen(name);
        if (f->index && nl && name[nl - 1] != '/')
                return to_directory(req, res);
        uint64_t start = 0, len = 0;
        int st = status_of(c, f, f->etag, &start, &len);
        res->status = st;
        bool coded = f->coding != M0_CODING_IDENTITY;
        if (st == 200 || st == 206) { /* all the lines, in one copy (D251) */
                int e = lines(res, f, 0, (uint32_t)f->lines.len, coded ? 7 : 6);
                if (e == 0 && st == 206)
                        e = m0_res_headerf(res, "Content-Range",
                                           "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, start,
                                           start + len - 1, (uint64_t)f->st.st_size);
                if (e < 0)
                        return e;
                res->body.len = 0;
                res->file.on = true;
                res->file.shared = f->cached;
                res->file.ent = f->cached ? f : NULL;
                res->file.fd = f->fd;
                res->file.off = start;
                res->file.len = len;
                res->coded =
                        true; /* its bytes are the file's, or its sibling's: never coded again */
                *ret_gave = true;
                return 0;
        }
        /* a 304 carries what RFC 9110 15.4.5 asks of it, its ETag standing for Last-Modified
         * (D238); every other answer D202's validators */
        int e = lines(res, f, 0, f->tag, 1);
        if (e == 0 && st != 304)
                e = lines(res, f, f->tag, f->lm, 1);
        if (e == 0)
                e = lines(res, f, f->lm, f->val, 2);
        if (e < 0 || st == 304 || st == 412)
                return e;
        if ((e = lines(res, f, f->val, f->ar, 1)) < 0)
                return e;
        /* a 416 */
        return m0_res_headerf(res, "Content-Range", "bytes */%" PRIu64, (uint64_t)f->st.st_size);
}

int m0__files_serve(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        const struct m0_croute *r = req->route;
        const char *name = file_name(req, r);
        struct m0_cond c;
        const char *ae;
        read_fields(req, &c, &ae);
        /* RFC 9110 14.2: GET is the one method a range is defined for; a server MUST ignore Range
         * on any other, so a HEAD with one has the 200's head (D177). */
        if (strcmp(req->method, "GET") != 0)
                c.range = NULL;
        /* D237: a name this turn resolved already is served from what it found */
        struct m0_fturn *t = req->files_turn;
        struct m0_fent own; /* cleared only when it is used: it is a few hundred bytes (D251) */
        struct m0_fent *f = t ? m0__fturn_find(t, r->files_root, name, ae) : NULL;
        int e;
        if (!f) {
                own = (struct m0_fent){.fd = -1};
                if ((e = find_file(r, name, ae, &own)) < 0)
                        return refuse(req, name, e);
                f = t ? m0__fturn_add(t, r->files_root, name, ae, &own) : NULL;
                if (!f)
                        f = &own;
        }
        /* none yet, or none made when memory ran out: an ETag line is never empty */
        if (!f->lines.len && (e = make_lines(f, r, name)) < 0) {
                f->lines.len = 0;
                if (f == &own) {
                        close(own.fd);
                        m0__buf_free(&own.lines);
                }
                return e;
        }
        bool gave = false;
        e = answer(req, res, &c, name, f, &gave);
        if (f == &own) {
                if (!gave)
                        close(own.fd);
                m0__buf_free(&own.lines);
        }
        return e;
}
