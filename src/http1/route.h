/* SPDX-License-Identifier: MIT */
/* route.h: route.c, the app's route table compiled once at start into a segment trie and matched
 * in O(segments) (T1-T3), and running a handler. */
#ifndef M0_ROUTE_H
#define M0_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "files.h"
#include "m0.h"

struct m0_config;

/* Captures in one route's path: the request keeps this many spans. */
#define M0__ROUTE_MAX_PARAMS 16
/* Segments in one route's path: a match recurses once per segment of the trie, no deeper. */
#define M0__ROUTE_MAX_SEGMENTS 64
#define M0__ROUTE_NONE UINT32_MAX

/* Method sets: bit m for llhttp's method number m (HEAD is taken with GET); M0__M_ANY for a
 * route of every method (method NULL), which the Allow lists render as the common methods. */
#define M0__M_ANY (1ull << 63)
static inline uint64_t m0__method_bit(int method)
{
        return method >= 0 && method < 63 ? 1ull << method : 0;
}

enum m0_route_kind {
        M0__ROUTE_EXACT = 0, /* literal segments only */
        M0__ROUTE_PATTERN,   /* with `:name` or `*name` */
        M0__ROUTE_PREFIX,    /* M0_ROUTE_PREFIX: a string prefix of the path */
};

/* One route of the table, compiled. */
struct m0_croute {
        const m0_route *def;   /* the app's entry */
        m0_handler_fn handler; /* def->handler, or m0__files_serve for a files route (SF1) */
        /* A files route (SF1): its root, opened at start (-1 for another route), and the name
         * beneath it of the one file it serves, or NULL for a directory. */
        int files_root;
        const char *files_name;
        const struct m0_mime *mime; /* the router's, for a files route */
        uint32_t index;             /* its place in the table: the lowest that matches wins (T3) */
        uint8_t kind;               /* enum m0_route_kind */
        bool blocking;
        bool rest;       /* its last capture is `*name` */
        uint8_t nparams; /* captures, in the order of the path */
        uint64_t
                methods; /* the methods it takes: GET adds HEAD; M0__M_ANY and every bit for NULL */
        uint64_t max_body; /* its body bound: def->max_body_bytes within --max-body-bytes (Q6) */
        const char *ctype; /* def->content_type's media type, or NULL (415) */
        size_t ctype_len;
        const char *name[M0__ROUTE_MAX_PARAMS]; /* each capture's name, in def->path */
        uint8_t name_len[M0__ROUTE_MAX_PARAMS];
        uint32_t node; /* where its path ends in the trie */
};

/* A path no route but its exact ones matches, found whole: its node's routes are the answer. */
struct m0_rpath {
        const char *path; /* NULL: an empty slot */
        uint32_t len;
        uint32_t hash;
        uint32_t end, nend; /* its node's routes: a range of the router's `ents` */
};

/* A route's end in the trie: the route, and for a prefix route the literal its last segment
 * starts with. */
struct m0_rent {
        const struct m0_croute *r; /* filled once the table is whole */
        uint32_t route;
        uint32_t lit_len;
        const char *lit;
};

/*
 * One node of the trie: where `depth` segments of a path are consumed. Its exact children are
 * found through the router's hash of (parent, segment); its capture child is `param`. The
 * routes that end here are three ranges of the router's `ents`, each in table order.
 */
struct m0_rnode {
        const char *seg; /* the literal segment that leads here (NULL: a capture, or the root) */
        uint32_t seg_len;
        uint32_t hash; /* of (parent, seg) */
        uint32_t parent;
        uint32_t param;       /* the `:name` child, or M0__ROUTE_NONE */
        uint32_t nkids;       /* exact children */
        uint32_t end, nend;   /* routes whose path ends here */
        uint32_t rest, nrest; /* routes whose `*name` takes what follows */
        uint32_t pfx, npfx;   /* prefix routes whose last segment begins here */
        uint32_t min;         /* the lowest route index in this subtree: the search's bound */
};

/* The compiled table, built by the coordinator before the checks, read-only after. */
struct m0_router {
        struct m0_croute *routes;
        uint32_t nroutes;
        struct m0_rnode *nodes;
        uint32_t nnodes, nodes_cap;
        struct m0_rent *ents;
        uint32_t nents;
        uint32_t *slots; /* exact children: node index + 1, 0 for none; open addressing */
        uint32_t mask;
        struct m0_rpath *paths; /* whole exact paths (the common case's one lookup) */
        uint32_t pmask;
        uint64_t methods;  /* every method some route takes, M0__M_ANY with dispatch (OPTIONS *) */
        uint8_t order[64]; /* method numbers in the order Allow lists them */
        uint8_t norder;
        /* The media types of the files routes serve (SF2), loaded with the first one. */
        struct m0_mime mime;
        bool files;    /* some route serves files */
        int mime_err;  /* what reading /etc/mime.types for them returned: 0 or -errno */
        char err[400]; /* why the table was refused, naming the route; "" when it compiled */
        char fix[200];
};

/* What a path matched. `allow` and `path_known` are whole only when `route` is NULL (the search
 * stops at the first route that takes the method); spans are offsets into the path. */
struct m0_match {
        const struct m0_croute *route; /* the first route in table order taking path and method */
        uint64_t allow;                /* the methods of every route whose path matched */
        bool path_known;               /* some route's path matched */
        uint8_t nparams;
        uint32_t off[M0__ROUTE_MAX_PARAMS], len[M0__ROUTE_MAX_PARAMS];
};

/*
 * Compile `app`'s table (and note whether it has a dispatch) under `cfg`. 0; -EINVAL for an
 * entry it cannot take, with rt->err naming it and rt->fix; -ENOMEM. What was built is freed by
 * m0__router_free(), whatever the outcome.
 */
int m0__router_build(struct m0_router *rt, const m0_app *app, const struct m0_config *cfg);
void m0__router_free(struct m0_router *rt);
/* Match `path` (len bytes, starting with '/') for llhttp method `method` (-1: no method, to
 * learn the methods of the path). Any thread. */
void m0__router_match(const struct m0_router *rt, int method, const char *path, size_t len,
                      struct m0_match *ret);
/* `methods` as an Allow list ("GET, HEAD, OPTIONS"), OPTIONS always last; the length written. */
size_t m0__router_allow(const struct m0_router *rt, uint64_t methods, char *out, size_t cap);
/* llhttp's number for method `name` ("GET"), or -1 when llhttp parses no such method. */
int m0__method_number(const char *name);

/* The pattern of the route `req` was routed to ("/todos/:id"), or "dispatch": for the log. */
const char *m0__app_route_pattern(const m0_req *req);
/* Run `fn` for `req`, answer a failure as error.c says (Q4), and end what the handler's
 * helpers made (m0__req_end). */
void m0__app_run(const m0_app *app, m0_handler_fn fn, m0_req *req, m0_res *res, void *state);

#endif /* M0_ROUTE_H */
