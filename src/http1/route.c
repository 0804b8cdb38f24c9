/* SPDX-License-Identifier: MIT */
/* route.c: the route table compiled once at start into a segment trie (T1), matched in
 * O(segments) with the first route in table order winning (T3); and running a handler, a
 * failure answered as error.c says (Q4). */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <llhttp.h>

#include "config.h"
#include "error.h"
#include "fileserve.h"
#include "head-checks.h"
#include "request.h"
#include "response.h"
#include "route.h"

/* The methods llhttp parses in a request, by number. */
#define METHOD_NAME(num, name, string) [num] = #string,
static const char *const method_names[64] = {HTTP_METHOD_MAP(METHOD_NAME)};
#undef METHOD_NAME

int m0__method_number(const char *name)
{
        for (int i = 0; i < 63; i++)
                if (method_names[i] && strcmp(method_names[i], name) == 0)
                        return i;
        return -1;
}

/* ---- the trie's exact children: one hash of (parent, segment) for the whole table ---- */

static inline uint32_t seg_hash(uint32_t parent, const char *s, size_t n)
{
        uint32_t h = 2166136261u ^ (parent * 0x9e3779b1u);
        for (size_t i = 0; i < n; i++)
                h = (h ^ (unsigned char)s[i]) * 16777619u;
        return h;
}

static inline bool seg_eq(const char *a, const char *b, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (a[i] != b[i])
                        return false;
        return true;
}

/* The exact child of `parent` for segment s (n bytes, hash h), or M0__ROUTE_NONE. */
static inline uint32_t kid(const struct m0_router *rt, uint32_t parent, const char *s, size_t n,
                           uint32_t h)
{
        for (uint32_t i = h & rt->mask;; i = (i + 1) & rt->mask) {
                uint32_t k = rt->slots[i];
                if (!k)
                        return M0__ROUTE_NONE;
                const struct m0_rnode *c = &rt->nodes[k - 1];
                if (c->hash == h && c->parent == parent && c->seg_len == n && seg_eq(c->seg, s, n))
                        return k - 1;
        }
}

static void slot_put(uint32_t *slots, uint32_t mask, uint32_t h, uint32_t node)
{
        uint32_t i = h & mask;
        while (slots[i])
                i = (i + 1) & mask;
        slots[i] = node + 1;
}

/* Keep the hash at most half full: grow it (and re-file every exact child) past that. */
static int slots_room(struct m0_router *rt)
{
        if (rt->slots && (rt->nnodes + 1) * 2 <= rt->mask + 1)
                return 0;
        uint32_t size = rt->slots ? (rt->mask + 1) * 2 : 64;
        uint32_t *s = calloc(size, sizeof(*s));
        if (!s)
                return -ENOMEM;
        for (uint32_t i = 1; i < rt->nnodes; i++)
                if (rt->nodes[i].seg)
                        slot_put(s, size - 1, rt->nodes[i].hash, i);
        free(rt->slots);
        rt->slots = s;
        rt->mask = size - 1;
        return 0;
}

static uint32_t node_new(struct m0_router *rt, uint32_t parent, const char *seg, size_t n)
{
        if (rt->nnodes == rt->nodes_cap) {
                uint32_t cap = rt->nodes_cap ? rt->nodes_cap * 2 : 16;
                struct m0_rnode *p = realloc(rt->nodes, cap * sizeof(*p));
                if (!p)
                        return M0__ROUTE_NONE;
                rt->nodes = p;
                rt->nodes_cap = cap;
        }
        struct m0_rnode *c = &rt->nodes[rt->nnodes];
        memset(c, 0, sizeof(*c));
        c->seg = seg;
        c->seg_len = (uint32_t)n;
        c->parent = parent;
        c->param = M0__ROUTE_NONE;
        c->min = M0__ROUTE_NONE;
        if (seg) {
                c->hash = seg_hash(parent, seg, n);
                slot_put(rt->slots, rt->mask, c->hash, rt->nnodes);
                rt->nodes[parent].nkids++;
        }
        return rt->nnodes++;
}

/* The exact child of `parent` for a literal segment, made when there is none. */
static uint32_t child_literal(struct m0_router *rt, uint32_t parent, const char *s, size_t n)
{
        uint32_t k = kid(rt, parent, s, n, seg_hash(parent, s, n));
        if (k != M0__ROUTE_NONE)
                return k;
        if (slots_room(rt) < 0)
                return M0__ROUTE_NONE;
        return node_new(rt, parent, s, n);
}

static uint32_t child_param(struct m0_router *rt, uint32_t parent)
{
        if (rt->nodes[parent].param != M0__ROUTE_NONE)
                return rt->nodes[parent].param;
        uint32_t k = node_new(rt, parent, NULL, 0);
        if (k != M0__ROUTE_NONE)
                rt->nodes[parent].param = k;
        return k;
}

/* ---- compiling one route ---- */

/* Where a route ends while the table is compiled: sorted into the nodes' ranges after. */
struct pending {
        uint32_t node;
        uint8_t kind; /* 0 end, 1 rest, 2 prefix */
        struct m0_rent ent;
};

struct build {
        struct m0_router *rt;
        const struct m0_config *cfg;
        struct pending *ends;
        uint32_t nends, ends_cap;
};

static int refuse(struct m0_router *rt, const m0_route *def, uint32_t i, const char *fix,
                  const char *fmt, ...) M0_PRINTF(5, 6);
static int refuse(struct m0_router *rt, const m0_route *def, uint32_t i, const char *fix,
                  const char *fmt, ...)
{
        char why[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        snprintf(rt->err, sizeof(rt->err), "route %u (%s %.120s): %s", i,
                 def->method ? def->method : "*", def->path, why);
        snprintf(rt->fix, sizeof(rt->fix), "%s", fix);
        return -EINVAL;
}

static int end_at(struct build *b, uint32_t node, uint8_t kind, uint32_t route, const char *lit,
                  size_t lit_len)
{
        if (node == M0__ROUTE_NONE)
                return -ENOMEM;
        if (b->nends == b->ends_cap) {
                uint32_t cap = b->ends_cap ? b->ends_cap * 2 : 16;
                struct pending *p = realloc(b->ends, cap * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                b->ends = p;
                b->ends_cap = cap;
        }
        b->ends[b->nends++] = (struct pending){
                .node = node,
                .kind = kind,
                .ent = {.route = route, .lit_len = (uint32_t)lit_len, .lit = lit},
        };
        return 0;
}

/* A path byte a pattern may hold: visible ASCII, and not '?' or '#', which end a path. */
static bool path_byte(unsigned char ch)
{
        return ch > 0x20 && ch < 0x7f && ch != '?' && ch != '#';
}

static bool name_byte(unsigned char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               ch == '_';
}

/* Record capture `s` (n bytes: the name after ':' or '*') of route `r`; 0 or the refusal. */
static int capture(struct build *b, struct m0_croute *r, const char *s, size_t n, char sigil)
{
        const m0_route *def = r->def;
        if (n == 0)
                return refuse(b->rt, def, r->index, "name every capture: /todos/:id, /files/*rest",
                              "a '%c' capture without a name", sigil);
        for (size_t i = 0; i < n; i++)
                if (!name_byte((unsigned char)s[i]))
                        return refuse(b->rt, def, r->index,
                                      "a capture's name is letters, digits and '_'",
                                      "the capture name '%.*s' holds '%c'", (int)n, s, s[i]);
        if (n > 64)
                return refuse(b->rt, def, r->index, "shorten the capture's name",
                              "a capture name of %zu bytes (64 at most)", n);
        for (unsigned k = 0; k < r->nparams; k++)
                if (r->name_len[k] == n && memcmp(r->name[k], s, n) == 0)
                        return refuse(b->rt, def, r->index,
                                      "give each capture of a route its own name",
                                      "the capture name '%.*s' appears twice", (int)n, s);
        if (r->nparams == M0__ROUTE_MAX_PARAMS)
                return refuse(b->rt, def, r->index, "split the route", "more than %d captures",
                              M0__ROUTE_MAX_PARAMS);
        r->name[r->nparams] = s;
        r->name_len[r->nparams++] = (uint8_t)n;
        return 0;
}

/* The path of route `r`, segment by segment, into the trie. */
static int insert_path(struct build *b, struct m0_croute *r)
{
        struct m0_router *rt = b->rt;
        const m0_route *def = r->def;
        const char *p = def->path;
        bool prefix = r->kind == M0__ROUTE_PREFIX;
        uint32_t node = 0, depth = 0;
        for (;;) {
                const char *s = p + 1; /* past the '/' */
                const char *e = s;
                while (*e && *e != '/')
                        e++;
                size_t n = (size_t)(e - s);
                bool last = *e == '\0';
                if (++depth > M0__ROUTE_MAX_SEGMENTS)
                        return refuse(rt, def, r->index, "shorten the path",
                                      "more than %d segments", M0__ROUTE_MAX_SEGMENTS);
                if (prefix && n && *s == '*')
                        return refuse(rt, def, r->index,
                                      "drop M0_ROUTE_PREFIX: *name "
                                      "takes the rest already",
                                      "M0_ROUTE_PREFIX with a '*' capture");
                if (prefix && last) {
                        if (n && *s == ':')
                                return refuse(rt, def, r->index,
                                              "end a prefix route with a literal, or use *name",
                                              "M0_ROUTE_PREFIX with a capture as its last segment");
                        return end_at(b, node, 2, r->index, s, n);
                }
                if (n && *s == '*') {
                        if (!last)
                                return refuse(rt, def, r->index,
                                              "put the '*' capture last: /files/*rest",
                                              "a '*' capture before the end of the path");
                        int c = capture(b, r, s + 1, n - 1, '*');
                        r->rest = true;
                        return c < 0 ? c : end_at(b, node, 1, r->index, NULL, 0);
                }
                if (n && *s == ':') {
                        int c = capture(b, r, s + 1, n - 1, ':');
                        if (c < 0)
                                return c;
                        node = child_param(rt, node);
                } else {
                        node = child_literal(rt, node, s, n);
                }
                if (node == M0__ROUTE_NONE)
                        return -ENOMEM;
                if (last) {
                        r->node = node;
                        return end_at(b, node, 0, r->index, NULL, 0);
                }
                p = e;
        }
}

/* A media type "type/subtype": two tokens. */
static bool media_type_ok(const char *s)
{
        const char *slash = strchr(s, '/');
        if (!slash || slash == s || !slash[1])
                return false;
        for (const char *q = s; *q; q++)
                if (q != slash && !m0__tchar[(unsigned char)*q])
                        return false;
        return true;
}

/* Check route `i` of the table and compile what it says but its path. */
static int route_head(struct build *b, const m0_route *def, uint32_t i, struct m0_croute *r)
{
        struct m0_router *rt = b->rt;
        memset(r, 0, sizeof(*r));
        r->def = def;
        r->index = i;
        r->files_root = -1;
        r->handler = def->handler;
        if (def->files) {
                if (def->handler)
                        return refuse(rt, def, i, "give a files route no handler",
                                      "a route serves files or runs a handler, not both");
                if (!def->method || strcmp(def->method, "GET") != 0 ||
                    (def->flags & M0_ROUTE_PREFIX))
                        return refuse(rt, def, i, "write it with M0_FILES(path, dir)",
                                      "files are served to GET and HEAD, on a path without "
                                      "M0_ROUTE_PREFIX");
                for (const char *q = def->cache_control; q && *q; q++)
                        if (!m0__vchar[(unsigned char)*q])
                                return refuse(rt, def, i, "write Cache-Control as one line",
                                              "cache_control holds the byte 0x%02x",
                                              (unsigned char)*q);
                r->handler = m0__files_serve;
        }
        if (!r->handler)
                return refuse(rt, def, i, "give every route a handler", "no handler");
        if (def->flags & ~(unsigned)(M0_ROUTE_PREFIX | M0_ROUTE_BLOCKING))
                return refuse(rt, def, i, "use the M0_ROUTE_* flags only", "unknown flags 0x%x",
                              def->flags & ~(unsigned)(M0_ROUTE_PREFIX | M0_ROUTE_BLOCKING));
        if (!def->method) {
                r->methods = ~0ull;
        } else {
                int m = m0__method_number(def->method);
                if (m < 0 || m == HTTP_CONNECT)
                        return refuse(rt, def, i,
                                      "use a method m0 serves, in upper case: GET, "
                                      "POST, PUT, PATCH, DELETE, ...",
                                      "'%.32s' is not a method m0 serves", def->method);
                r->methods = m0__method_bit(m) | (m == HTTP_GET ? m0__method_bit(HTTP_HEAD) : 0);
        }
        if (def->path[0] != '/')
                return refuse(rt, def, i, "begin the path with '/'",
                              "the path does not begin with '/'");
        for (const char *q = def->path; *q; q++)
                if (!path_byte((unsigned char)*q))
                        return refuse(rt, def, i, "a path is visible ASCII without '?' or '#'",
                                      "the path holds the byte 0x%02x", (unsigned char)*q);
        if (def->content_type && !media_type_ok(def->content_type))
                return refuse(rt, def, i, "name a media type such as application/json",
                              "content_type '%.64s' is not type/subtype", def->content_type);
        r->ctype = def->content_type;
        r->ctype_len = def->content_type ? strlen(def->content_type) : 0;
        r->blocking = (def->flags & M0_ROUTE_BLOCKING) != 0;
        r->kind = (def->flags & M0_ROUTE_PREFIX) ? M0__ROUTE_PREFIX : M0__ROUTE_EXACT;
        r->max_body = def->max_body_bytes && def->max_body_bytes < b->cfg->max_body_bytes
                              ? def->max_body_bytes
                              : b->cfg->max_body_bytes;
        return 0;
}

/* ---- files routes (SF1) ---- */

/* Open route r's `files` (D200): a directory is its root; a file is served as its name beneath
 * its own directory, opened as the root, so that one resolution serves both. */
static int open_root(struct m0_router *rt, struct m0_croute *r)
{
        const m0_route *def = r->def;
        struct stat st;
        int fd;
        int e = stat(def->files, &st) < 0 ? -errno : 0;
        if (e == 0 && S_ISDIR(st.st_mode)) {
                e = m0__files_root_open(def->files, &fd);
        } else if (e == 0 && S_ISREG(st.st_mode)) {
                const char *slash = strrchr(def->files, '/');
                r->files_name = slash ? slash + 1 : def->files;
                char dir[PATH_MAX];
                size_t n = slash ? (size_t)(slash - def->files) : 0;
                if (n >= sizeof(dir))
                        e = -ENAMETOOLONG;
                else {
                        memcpy(dir, def->files, n);
                        strcpy(dir + n, n ? "" : (slash ? "/" : "."));
                        e = m0__files_root_open(dir, &fd);
                }
                if (e == 0 && r->files_name[0] == '.') {
                        close(fd);
                        e = -EPERM;
                }
        } else if (e == 0) {
                e = -ENOTDIR;
        }
        if (e < 0) {
                char why[128];
                return refuse(rt, def, r->index, "give it a directory or a file m0 can read",
                              "files '%.200s': %s", def->files,
                              e == -EPERM ? "a dotfile is never served"
                                          : strerror_r(-e, why, sizeof(why)));
        }
        r->files_root = fd;
        return 0;
}

/* Open every files route's root, and read the media types once when there is one (D179). */
static int open_files(struct m0_router *rt)
{
        for (uint32_t i = 0; i < rt->nroutes; i++) {
                struct m0_croute *r = &rt->routes[i];
                if (!r->def->files)
                        continue;
                int e = open_root(rt, r);
                if (e < 0)
                        return e;
                r->mime = &rt->mime;
                if (!rt->files) {
                        rt->files = true;
                        /* Without the file every name is application/octet-stream; the
                         * `routes` check says so, and the doctor shows it. */
                        rt->mime_err = m0__mime_load(&rt->mime, M0__MIME_TYPES);
                }
        }
        return 0;
}

/* ---- the whole table ---- */

static int file_paths(struct m0_router *rt);

static int by_node(const void *a, const void *b)
{
        const struct pending *x = a, *y = b;
        if (x->node != y->node)
                return x->node < y->node ? -1 : 1;
        if (x->kind != y->kind)
                return x->kind < y->kind ? -1 : 1;
        return x->ent.route < y->ent.route ? -1 : x->ent.route > y->ent.route;
}

/* The ends, sorted, become each node's three ranges; each route's index bounds its ancestors. */
static int file_ends(struct build *b)
{
        struct m0_router *rt = b->rt;
        if (b->nends) /* an app of dispatch alone has none, and qsort() takes no NULL */
                qsort(b->ends, b->nends, sizeof(*b->ends), by_node);
        rt->ents = calloc(b->nends ? b->nends : 1, sizeof(*rt->ents));
        if (!rt->ents)
                return -ENOMEM;
        for (uint32_t i = 0; i < b->nends; i++) {
                const struct pending *pe = &b->ends[i];
                struct m0_rnode *n = &rt->nodes[pe->node];
                uint32_t *at = pe->kind == 0 ? &n->end : pe->kind == 1 ? &n->rest : &n->pfx;
                uint32_t *cnt = pe->kind == 0 ? &n->nend : pe->kind == 1 ? &n->nrest : &n->npfx;
                if (!*cnt)
                        *at = i;
                (*cnt)++;
                rt->ents[i] = pe->ent;
                rt->ents[i].r = &rt->routes[pe->ent.route];
                for (uint32_t k = pe->node; k != M0__ROUTE_NONE; k = rt->nodes[k].parent)
                        if (rt->nodes[k].min > pe->ent.route)
                                rt->nodes[k].min = pe->ent.route;
        }
        rt->nents = b->nends;
        return 0;
}

/* Allow's order: the common methods first, the rest by number, OPTIONS last. */
static void allow_order(struct m0_router *rt)
{
        static const int first[] = {HTTP_GET, HTTP_HEAD,  HTTP_POST,
                                    HTTP_PUT, HTTP_PATCH, HTTP_DELETE};
        uint64_t placed = m0__method_bit(HTTP_OPTIONS);
        rt->norder = 0;
        for (size_t i = 0; i < sizeof(first) / sizeof(first[0]); i++) {
                rt->order[rt->norder++] = (uint8_t)first[i];
                placed |= m0__method_bit(first[i]);
        }
        for (int m = 0; m < 63; m++)
                if (method_names[m] && !(placed & m0__method_bit(m)))
                        rt->order[rt->norder++] = (uint8_t)m;
        rt->order[rt->norder++] = HTTP_OPTIONS;
}

int m0__router_build(struct m0_router *rt, const m0_app *app, const struct m0_config *cfg)
{
        memset(rt, 0, sizeof(*rt));
        allow_order(rt);
        struct build b = {.rt = rt, .cfg = cfg};
        uint32_t n = 0;
        for (const m0_route *d = app->routes; d && d->path; d++)
                n++;
        rt->routes = calloc(n ? n : 1, sizeof(*rt->routes));
        int r = rt->routes ? slots_room(rt) : -ENOMEM;
        if (r == 0 && node_new(rt, M0__ROUTE_NONE, NULL, 0) == M0__ROUTE_NONE)
                r = -ENOMEM;
        for (uint32_t i = 0; r == 0 && i < n; i++) {
                struct m0_croute *c = &rt->routes[i];
                r = route_head(&b, &app->routes[i], i, c);
                if (r == 0)
                        r = insert_path(&b, c);
                if (r == 0 && c->kind != M0__ROUTE_PREFIX && c->nparams)
                        c->kind = M0__ROUTE_PATTERN;
                if (r == 0) {
                        rt->nroutes = i + 1;
                        rt->methods |= c->methods == ~0ull ? M0__M_ANY : c->methods;
                }
        }
        if (r == 0)
                r = open_files(rt);
        if (r == 0)
                r = file_ends(&b);
        if (r == 0)
                r = file_paths(rt);
        if (app->dispatch)
                rt->methods |= M0__M_ANY;
        if (r == -ENOMEM) {
                snprintf(rt->err, sizeof(rt->err), "no memory to compile the route table");
                snprintf(rt->fix, sizeof(rt->fix), "give the service more memory");
        }
        free(b.ends);
        return r;
}

void m0__router_free(struct m0_router *rt)
{
        for (uint32_t i = 0; rt->routes && i < rt->nroutes; i++)
                if (rt->routes[i].files_root >= 0) {
                        close(rt->routes[i].files_root);
                        rt->routes[i].files_root = -1;
                }
        if (rt->files)
                m0__mime_free(&rt->mime);
        rt->files = false;
        free(rt->routes);
        free(rt->nodes);
        free(rt->ents);
        free(rt->slots);
        free(rt->paths);
        rt->paths = NULL;
        rt->routes = NULL;
        rt->nodes = NULL;
        rt->ents = NULL;
        rt->slots = NULL;
        rt->nroutes = rt->nnodes = rt->nodes_cap = rt->nents = 0;
}

/* ---- matching ---- */

struct walk {
        const struct m0_router *rt;
        const char *path;
        size_t len;
        uint64_t bit; /* the request's method */
        struct m0_match *m;
        uint32_t best;              /* the index of m->route, M0__ROUTE_NONE while there is none */
        const struct m0_rent *only; /* compiling: the one range a whole path may match */
        bool impure;                /* ... and another matched it */
        uint32_t off[M0__ROUTE_MAX_PARAMS], len_[M0__ROUTE_MAX_PARAMS];
};

/* Routes ending at one place; `ncaps` captures lead there. The first in table order that takes
 * the method, if it comes before the best so far, is the best now. */
static void take(struct walk *w, const struct m0_rent *e, uint32_t n, unsigned ncaps)
{
        if (e != w->only)
                w->impure = true;
        for (uint32_t i = 0; i < n; i++) {
                const struct m0_croute *r = e[i].r;
                w->m->allow |= r->methods;
                w->m->path_known = true;
                if ((r->methods & w->bit) && r->index < w->best) {
                        w->best = r->index;
                        w->m->route = r;
                        w->m->nparams = (uint8_t)ncaps;
                        for (unsigned k = 0; k < ncaps; k++) {
                                w->m->off[k] = w->off[k];
                                w->m->len[k] = w->len_[k];
                        }
                        return; /* the rest of this range comes later in the table */
                }
        }
}

/* Prefix routes whose last segment begins at `pos` + 1: each takes the path when what follows
 * begins with its literal. */
static void take_prefixes(struct walk *w, const struct m0_rnode *n, size_t pos, unsigned ncaps)
{
        const char *s = w->path + pos + 1;
        size_t rem = w->len - pos - 1;
        for (uint32_t i = 0; i < n->npfx; i++) {
                const struct m0_rent *e = &w->rt->ents[n->pfx + i];
                if (e->lit_len <= rem && seg_eq(e->lit, s, e->lit_len))
                        take(w, e, 1, ncaps);
        }
}

/* Routes that end inside the rest of the path: prefix routes, and `*name` captures. */
static void take_inner(struct walk *w, const struct m0_rnode *n, size_t pos, unsigned ncaps)
{
        if (n->npfx)
                take_prefixes(w, n, pos, ncaps);
        if (n->nrest && ncaps < M0__ROUTE_MAX_PARAMS) {
                w->off[ncaps] = (uint32_t)(pos + 1);
                w->len_[ncaps] = (uint32_t)(w->len - pos - 1);
                take(w, &w->rt->ents[n->rest], n->nrest, ncaps + 1);
        }
}

/*
 * The trie below node `ni`, with `pos` bytes of the path consumed (path[pos] is '/' unless the
 * path ends there). A node with both an exact child and a capture child for the next segment
 * explores both (the exact one by recursion, the capture in this loop): each node is visited
 * at most once per match, and a subtree whose lowest route comes after the best so far not at
 * all. A path of exact segments is one loop, one hash lookup per segment.
 */
static void visit(struct walk *w, uint32_t ni, size_t pos, unsigned ncaps)
{
        const struct m0_router *rt = w->rt;
        for (;;) {
                const struct m0_rnode *n = &rt->nodes[ni];
                if (n->min >= w->best)
                        return;
                if (pos == w->len) {
                        take(w, &rt->ents[n->end], n->nend, ncaps);
                        return;
                }
                if (n->npfx | n->nrest)
                        take_inner(w, n, pos, ncaps);
                const char *s = w->path + pos + 1;
                size_t rem = w->len - pos - 1, sl = 0;
                uint32_t h = 2166136261u ^ (ni * 0x9e3779b1u);
                while (sl < rem && s[sl] != '/')
                        h = (h ^ (unsigned char)s[sl++]) * 16777619u;
                uint32_t k = n->nkids ? kid(rt, ni, s, sl, h) : M0__ROUTE_NONE;
                pos += 1 + sl;
                if (n->param != M0__ROUTE_NONE && sl && ncaps < M0__ROUTE_MAX_PARAMS) {
                        if (k != M0__ROUTE_NONE)
                                visit(w, k, pos, ncaps);
                        w->off[ncaps] = (uint32_t)(pos - sl);
                        w->len_[ncaps] = (uint32_t)sl;
                        ncaps++;
                        ni = n->param;
                        continue;
                }
                if (k == M0__ROUTE_NONE)
                        return;
                ni = k;
        }
}

static inline uint64_t load8(const char *p)
{
        uint64_t v;
        memcpy(&v, p, sizeof(v));
        return v;
}

static inline uint64_t load4(const char *p)
{
        uint32_t v;
        memcpy(&v, p, sizeof(v));
        return v;
}

/* A whole path's hash, eight bytes at a time: a short path costs a few loads and multiplies,
 * not a multiply per byte. */
static inline uint32_t path_hash(const char *s, size_t n)
{
        const uint64_t k = 0x9e3779b97f4a7c15ull;
        uint64_t h = (uint64_t)n * k, tail;
        if (n >= 8) {
                for (size_t i = 0; i + 8 < n; i += 8)
                        h = (h ^ load8(s + i)) * k;
                tail = load8(s + n - 8);
        } else if (n >= 4) {
                tail = load4(s) << 32 | load4(s + n - 4);
        } else {
                tail = n ? (uint64_t)(unsigned char)s[0] << 16 |
                                       (uint64_t)(unsigned char)s[n / 2] << 8 |
                                       (unsigned char)s[n - 1]
                         : 0;
        }
        h = (h ^ tail) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        h *= 0x94d049bb133111ebull;
        return (uint32_t)(h ^ (h >> 29));
}

/* Equal bytes, eight at a time where it can. */
static inline bool path_eq(const char *a, const char *b, size_t n)
{
        if (n >= 8) {
                for (size_t i = 0; i + 8 < n; i += 8)
                        if (load8(a + i) != load8(b + i))
                                return false;
                return load8(a + n - 8) == load8(b + n - 8);
        }
        if (n >= 4)
                return load4(a) == load4(b) && load4(a + n - 4) == load4(b + n - 4);
        return seg_eq(a, b, n);
}

static inline const struct m0_rpath *path_find(const struct m0_router *rt, const char *path,
                                               size_t len, uint32_t h)
{
        for (uint32_t i = h & rt->pmask;; i = (i + 1) & rt->pmask) {
                const struct m0_rpath *e = &rt->paths[i];
                if (!e->path)
                        return NULL;
                if (e->hash == h && e->len == len && path_eq(e->path, path, len))
                        return e;
        }
}

static void walk_init(struct walk *w, const struct m0_router *rt, int method, const char *path,
                      size_t len, struct m0_match *ret)
{
        /* the capture spans are written before they are read */
        w->rt = rt;
        w->path = path;
        w->len = len;
        w->bit = m0__method_bit(method);
        w->m = ret;
        w->best = M0__ROUTE_NONE;
        w->only = NULL;
        w->impure = false;
        ret->route = NULL;
        ret->allow = 0;
        ret->path_known = false;
        ret->nparams = 0;
}

void m0__router_match(const struct m0_router *rt, int method, const char *path, size_t len,
                      struct m0_match *ret)
{
        ret->route = NULL;
        ret->allow = 0;
        ret->path_known = false;
        ret->nparams = 0;
        if (!rt->nnodes || len == 0 || path[0] != '/')
                return;
        const struct m0_rpath *e = path_find(rt, path, len, path_hash(path, len));
        if (e) {
                /* No capture, and only these routes: the first taking the method (T3). */
                const struct m0_rent *x = &rt->ents[e->end];
                uint64_t bit = m0__method_bit(method);
                ret->path_known = true;
                for (uint32_t i = 0; i < e->nend; i++) {
                        const struct m0_croute *r = x[i].r;
                        ret->allow |= r->methods;
                        if (r->methods & bit) {
                                ret->route = r;
                                return;
                        }
                }
                return;
        }
        struct walk w;
        walk_init(&w, rt, method, path, len, ret);
        visit(&w, 0, 0, 0);
}

/* Every exact path that no other route matches goes into the whole-path table: for it, one
 * hash and one compare find what the trie walk would. */
static int file_paths(struct m0_router *rt)
{
        uint32_t n = 0, size = 16;
        for (uint32_t i = 0; i < rt->nroutes; i++)
                n += rt->routes[i].kind == M0__ROUTE_EXACT;
        while (size < n * 2)
                size *= 2;
        rt->paths = calloc(size, sizeof(*rt->paths));
        if (!rt->paths)
                return -ENOMEM;
        rt->pmask = size - 1;
        for (uint32_t i = 0; i < rt->nroutes; i++) {
                const struct m0_croute *r = &rt->routes[i];
                const char *p = r->def->path;
                size_t len = strlen(p);
                uint32_t h = path_hash(p, len);
                if (r->kind != M0__ROUTE_EXACT || path_find(rt, p, len, h))
                        continue;
                struct m0_match m;
                struct walk w;
                walk_init(&w, rt, -1, p, len, &m);
                w.only = &rt->ents[rt->nodes[r->node].end];
                visit(&w, 0, 0, 0);
                if (w.impure)
                        continue; /* a pattern or prefix route matches it too: the trie decides */
                uint32_t k = h & rt->pmask;
                while (rt->paths[k].path)
                        k = (k + 1) & rt->pmask;
                const struct m0_rnode *at = &rt->nodes[r->node];
                rt->paths[k] = (struct m0_rpath){.path = p,
                                                 .len = (uint32_t)len,
                                                 .hash = h,
                                                 .end = at->end,
                                                 .nend = at->nend};
        }
        return 0;
}

size_t m0__router_allow(const struct m0_router *rt, uint64_t methods, char *out, size_t cap)
{
        /* A route of every method (or dispatch) is said as the common methods. */
        if (methods & M0__M_ANY)
                methods = m0__method_bit(HTTP_GET) | m0__method_bit(HTTP_HEAD) |
                          m0__method_bit(HTTP_POST) | m0__method_bit(HTTP_PUT) |
                          m0__method_bit(HTTP_PATCH) | m0__method_bit(HTTP_DELETE);
        methods |= m0__method_bit(HTTP_OPTIONS); /* the host answers OPTIONS itself (T2) */
        size_t n = 0;
        out[0] = '\0';
        for (unsigned i = 0; i < rt->norder; i++) {
                int m = rt->order[i];
                if (!(methods & m0__method_bit(m)) || m == HTTP_CONNECT)
                        continue;
                int w = snprintf(out + n, cap - n, "%s%s", n ? ", " : "", method_names[m]);
                if (w < 0 || (size_t)w >= cap - n) {
                        out[n] = '\0'; /* what fits, whole methods only */
                        break;
                }
                n += (size_t)w;
        }
        return n;
}

/* ---- running a handler ---- */

const char *m0__app_route_pattern(const m0_req *req)
{
        return req->route ? req->route->def->path : "dispatch";
}

void m0__app_run(const m0_app *app, m0_handler_fn fn, m0_req *req, m0_res *res, void *state)
{
        int r = fn(req, res, state);
        /* A stream refused on a pool thread is answered 409 by the pool (P2), whatever the
         * handler made of m0_res_stream()'s -EPERM. */
        if (r < 0 && !res->stream_refused)
                m0__error_handler_failed(app, state, req, res, r);
        m0__req_end(req);
}
