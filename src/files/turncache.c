/* SPDX-License-Identifier: MIT */
/* turncache.c: the files one turn of a loop opened, kept for the rest of that turn and closed
 * at its end (SPEC SF5, D237): a name asked for again within the turn costs no openat2, fstat,
 * pread or close, and a file changed between two turns is seen as it is now. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "util.h"

int m0__fturn_init(struct m0_fturn *t, uint32_t cap, uint32_t inline_max)
{
        memset(t, 0, sizeof(*t));
        t->inline_max = inline_max;
        if (!cap)
                return 0;
        t->ent = calloc(cap, sizeof(*t->ent));
        if (!t->ent)
                return -ENOMEM;
        t->cap = cap;
        return 0;
}

/* The key of (root, name, ae) into *k: the root's descriptor, the name's length and bytes, and
 * the Accept-Encoding's presence and bytes, so that no two keys' bytes are alike. */
static int make_key(struct m0_buf *k, int root, const char *name, const char *ae)
{
        uint32_t nl = (uint32_t)strlen(name);
        size_t al = ae ? strlen(ae) : 0;
        k->len = 0;
        if (m0__buf_reserve(k, sizeof(root) + sizeof(nl) + nl + 1 + al) < 0)
                return -ENOMEM;
        char *p = k->data;
        memcpy(p, &root, sizeof(root));
        p += sizeof(root);
        memcpy(p, &nl, sizeof(nl));
        p += sizeof(nl);
        memcpy(p, name, nl);
        p += nl;
        *p++ = ae ? 1 : 0;
        if (al)
                memcpy(p, ae, al);
        k->len = (size_t)(p - k->data) + al;
        return 0;
}

/* Whether key k is (root, name [nl bytes], ae [al bytes] or NULL), as make_key() lays it out. */
static bool key_is(const struct m0_buf *k, int root, const char *name, uint32_t nl, const char *ae,
                   size_t al)
{
        const char *p = k->data;
        if (k->len != sizeof(root) + sizeof(nl) + nl + 1 + al || memcmp(p, &root, sizeof(root)) ||
            memcmp(p + sizeof(root), &nl, sizeof(nl)))
                return false;
        p += sizeof(root) + sizeof(nl);
        return memcmp(p, name, nl) == 0 && p[nl] == (ae ? 1 : 0) &&
               (!al || memcmp(p + nl + 1, ae, al) == 0);
}

/* Up to this many entries a lookup compares the keys one by one: cheaper than hashing the key
 * (D251); the map is for the turns that open many names. */
#define SCAN_MAX 8

struct m0_fent *m0__fturn_find(struct m0_fturn *t, int root, const char *name, const char *ae)
{
        if (!t->n)
                return NULL;
        if (t->n <= SCAN_MAX) {
                size_t nl = strlen(name), al = ae ? strlen(ae) : 0;
                if (nl > UINT32_MAX)
                        return NULL;
                for (uint32_t i = 0; i < t->n; i++)
                        if (key_is(&t->ent[i].key, root, name, (uint32_t)nl, ae, al))
                                return &t->ent[i];
                return NULL;
        }
        struct m0_buf *k = &t->look;
        if (make_key(k, root, name, ae) < 0 || k->len > UINT32_MAX)
                return NULL;
        struct m0_hnode *n = m0__hmap_find(&t->map, m0__hash(k->data, k->len), k->data, k->len);
        return n ? M0__CONTAINER_OF(n, struct m0_fent, node) : NULL;
}

struct m0_fent *m0__fturn_add(struct m0_fturn *t, int root, const char *name, const char *ae,
                              const struct m0_fent *src)
{
        if (t->n == t->cap)
                return NULL;
        struct m0_fent *e = &t->ent[t->n];
        if (make_key(&e->key, root, name, ae) < 0 || e->key.len > UINT32_MAX)
                return NULL;
        struct m0_buf key = e->key, bytes = e->bytes, lines = e->lines;
        *e = *src;
        e->key = key;
        e->bytes = bytes;
        e->bytes.len = 0;
        e->lines = lines; /* the caller makes them in the cache's buffer */
        e->lines.len = 0;
        e->bytes_read = 0;
        e->cached = true;
        e->node = (struct m0_hnode){
                .hash = m0__hash(key.data, key.len), .key = key.data, .len = (uint32_t)key.len};
        /* -ENOMEM: in it anyway on a longer chain, or (a first insert) found by the scan of
         * small turns only; m0__hmap_remove takes either */
        (void)m0__hmap_insert(&t->map, &e->node);
        t->n++;
        return e;
}

void m0__fturn_clear(struct m0_fturn *t)
{
        for (uint32_t i = 0; i < t->n; i++) {
                struct m0_fent *e = &t->ent[i];
                m0__hmap_remove(&t->map, &e->node);
                if (e->fd >= 0)
                        close(e->fd);
                e->fd = -1;
                e->cached = false;
                e->bytes.len = 0;
                e->bytes_read = 0;
        }
        t->n = 0;
}

void m0__fturn_free(struct m0_fturn *t)
{
        m0__fturn_clear(t);
        for (uint32_t i = 0; i < t->cap; i++) {
                m0__buf_free(&t->ent[i].key);
                m0__buf_free(&t->ent[i].bytes);
                m0__buf_free(&t->ent[i].lines);
        }
        m0__buf_free(&t->look);
        free(t->ent);
        m0__hmap_free(&t->map);
        memset(t, 0, sizeof(*t));
}

const void *m0__fent_bytes(struct m0_fturn *t, struct m0_fent *e)
{
        if (!e->cached || e->bytes_read < 0 || e->st.st_size > (off_t)t->inline_max)
                return NULL;
        if (e->bytes_read > 0)
                return e->bytes.data;
        size_t len = (size_t)e->st.st_size;
        e->bytes_read = -1;
        e->bytes.len = 0;
        if (m0__buf_reserve(&e->bytes, len ? len : 1) < 0)
                return NULL;
        ssize_t r = len ? pread(e->fd, e->bytes.data, len, 0) : 0;
        if (r < 0 || (size_t)r != len)
                return NULL;
        e->bytes.len = len;
        e->bytes_read = 1;
        return e->bytes.data;
}
