/* SPDX-License-Identifier: MIT */
/* route-ref.h: the routing rules of SPEC T1-T3 written the slow, obvious way -- every route in
 * table order, its path walked segment by segment -- for the fuzz harness and the unit tests to
 * hold the compiled trie's answers against. Header-only; include after route.h. */
#ifndef M0_ROUTE_REF_H
#define M0_ROUTE_REF_H

#include <stdbool.h>
#include <string.h>

#include <llhttp.h>

struct ref_match {
        int route; /* the first route in table order taking path and method; -1 for none */
        uint64_t allow;
        bool known;
        unsigned n;
        size_t off[M0__ROUTE_MAX_PARAMS], len[M0__ROUTE_MAX_PARAMS];
};

/* Does `pat` take `path`? The spans of its captures into off/len, their count into *n. */
static bool ref_path(const char *pat, bool prefix, const char *path, size_t len, size_t *off,
                     size_t *lens, unsigned *n)
{
        size_t pos = 0;
        *n = 0;
        const char *p = pat;
        for (;;) {
                const char *s = p + 1, *e = s;
                while (*e && *e != '/')
                        e++;
                size_t sn = (size_t)(e - s);
                bool last = !*e;
                if (pos >= len || path[pos] != '/')
                        return false;
                const char *seg = path + pos + 1;
                size_t rem = len - pos - 1, sl = 0;
                while (sl < rem && seg[sl] != '/')
                        sl++;
                if (prefix && last)
                        return sn <= rem && memcmp(seg, s, sn) == 0;
                if (sn && *s == '*') {
                        off[*n] = pos + 1;
                        lens[(*n)++] = rem;
                        return true;
                }
                if (sn && *s == ':') {
                        if (!sl)
                                return false;
                        off[*n] = pos + 1;
                        lens[(*n)++] = sl;
                } else if (sl != sn || memcmp(seg, s, sn) != 0) {
                        return false;
                }
                pos += 1 + sl;
                if (last)
                        return pos == len;
                p = e;
        }
}

static uint64_t ref_methods(const char *method)
{
        if (!method)
                return ~0ull;
        int m = m0__method_number(method);
        return m0__method_bit(m) | (m == HTTP_GET ? m0__method_bit(HTTP_HEAD) : 0);
}

static void ref_match(const m0_route *routes, size_t nroutes, int method, const char *path,
                      size_t len, struct ref_match *ret)
{
        memset(ret, 0, sizeof(*ret));
        ret->route = -1;
        for (size_t i = 0; i < nroutes; i++) {
                size_t off[M0__ROUTE_MAX_PARAMS], lens[M0__ROUTE_MAX_PARAMS];
                unsigned n;
                if (!ref_path(routes[i].path, routes[i].flags & M0_ROUTE_PREFIX, path, len, off,
                              lens, &n))
                        continue;
                uint64_t bits = ref_methods(routes[i].method);
                ret->known = true;
                ret->allow |= bits;
                if (ret->route < 0 && (bits & m0__method_bit(method))) {
                        ret->route = (int)i;
                        ret->n = n;
                        memcpy(ret->off, off, sizeof(off));
                        memcpy(ret->len, lens, sizeof(lens));
                }
        }
}

/* The trie's answer `m` against the reference's `x`: NULL when they agree, else what differs. */
static const char *ref_differs(const struct m0_match *m, const struct ref_match *x)
{
        int got = m->route ? (int)m->route->index : -1;
        if (got != x->route)
                return "a different route";
        if (got < 0)
                return m->path_known != x->known ? "path_known"
                       : m->allow != x->allow    ? "allow"
                                                 : NULL;
        if (m->nparams != x->n)
                return "the number of captures";
        for (unsigned k = 0; k < x->n; k++)
                if (m->off[k] != x->off[k] || m->len[k] != x->len[k])
                        return "a capture's span";
        return NULL;
}

#endif /* M0_ROUTE_REF_H */
