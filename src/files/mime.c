/* SPDX-License-Identifier: MIT */
/* mime.c: a file's Content-Type by its extension, from the system's mime.types (SPEC SF2). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "files.h"

#define MIME_FILE_MAX (4u << 20)
#define EXT_MAX 32

struct m0_mime_ext {
        struct m0_hnode node;
        size_t type; /* offset in m->types until the table is built */
};

/* Whether a type's text is read as UTF-8 by default (D179): text/ types, JavaScript, JSON, +json. */
static bool utf8_type(const char *t, size_t n)
{
        static const char *const exact[] = {"application/javascript", "application/json",
                                            "application/ecmascript"};
        if (n > 5 && !strncasecmp(t, "text/", 5))
                return true;
        for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
                if (n == strlen(exact[i]) && !strncasecmp(t, exact[i], n))
                        return true;
        return n > 5 && !strncasecmp(t + n - 5, "+json", 5);
}

static int read_all(const char *path, char **ret, size_t *ret_len)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        char *b = NULL;
        size_t n = 0, cap = 0;
        int err = 0;
        for (;;) {
                if (n + 1 >= cap) {
                        if (cap >= MIME_FILE_MAX) {
                                err = -EFBIG;
                                break;
                        }
                        size_t nc = cap ? cap * 2 : 65536;
                        char *nb = realloc(b, nc);
                        if (!nb) {
                                err = -ENOMEM;
                                break;
                        }
                        b = nb;
                        cap = nc;
                }
                ssize_t r = read(fd, b + n, cap - n - 1);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0) {
                        err = -errno;
                        break;
                }
                if (!r)
                        break;
                n += (size_t)r;
        }
        close(fd);
        if (err) {
                free(b);
                return err;
        }
        b[n] = '\0';
        *ret = b;
        *ret_len = n;
        return 0;
}

static bool space(char c)
{
        return c == ' ' || c == '\t' || c == '\r';
}

/* Walk the file's lines: `type ext...`; with `m->ext` NULL only count the extensions. */
static int walk(struct m0_mime *m, char *text, size_t *count)
{
        size_t n = 0;
        for (char *line = text; line && *line;) {
                char *eol = strchr(line, '\n');
                if (eol)
                        *eol = '\0';
                char *p = line;
                line = eol ? eol + 1 : NULL;
                while (space(*p))
                        p++;
                if (!*p || *p == '#')
                        continue;
                char *type = p;
                while (*p && !space(*p))
                        p++;
                size_t tlen = (size_t)(p - type);
                if (!memchr(type, '/', tlen))
                        continue;
                size_t off = m->types.len;
                bool added = false;
                while (*p) {
                        while (space(*p))
                                p++;
                        char *ext = p;
                        while (*p && !space(*p))
                                p++;
                        size_t elen = (size_t)(p - ext);
                        if (!elen || elen > EXT_MAX)
                                continue;
                        if (*p)
                                *p++ = '\0';
                        n++;
                        if (!m->ext)
                                continue;
                        for (size_t i = 0; i < elen; i++)
                                ext[i] = (char)((ext[i] >= 'A' && ext[i] <= 'Z') ? ext[i] + 32
                                                                                 : ext[i]);
                        uint64_t h = m0__hash(ext, elen);
                        if (m0__hmap_find(&m->map, h, ext, elen))
                                continue; /* the first line naming it wins */
                        if (!added) {
                                bool u = utf8_type(type, tlen);
                                if (m0__buf_append(&m->types, type, tlen) < 0 ||
                                    (u && m0__buf_append(&m->types, "; charset=utf-8", 15) < 0) ||
                                    m0__buf_append(&m->types, "", 1) < 0)
                                        return -ENOMEM;
                                added = true;
                        }
                        struct m0_mime_ext *e = &m->ext[m->n++];
                        e->node = (struct m0_hnode){.hash = h, .key = ext, .len = (uint32_t)elen};
                        e->type = off;
                        if (m0__hmap_insert(&m->map, &e->node) < 0)
                                return -ENOMEM;
                }
        }
        *count = n;
        return 0;
}

int m0__mime_load(struct m0_mime *m, const char *path)
{
        char *text = NULL;
        size_t len, count;
        int err = read_all(path, &text, &len);
        if (err < 0)
                return err;
        /* Counted on a copy (the walk cuts lines), so that the nodes never move. */
        char *copy = strdup(text);
        if (!copy) {
                free(text);
                return -ENOMEM;
        }
        walk(m, copy, &count);
        free(copy);
        m->text = text;
        m->ext = calloc(count ? count : 1, sizeof(*m->ext));
        if (!m->ext || walk(m, text, &count) < 0) {
                m0__mime_free(m);
                return -ENOMEM;
        }
        return 0;
}

const char *m0__mime_type(const struct m0_mime *m, const char *name)
{
        const char *base = strrchr(name, '/');
        base = base ? base + 1 : name;
        const char *dot = strrchr(base, '.');
        if (!dot || !m->n)
                return M0__MIME_DEFAULT;
        size_t n = strlen(dot + 1);
        if (!n || n > EXT_MAX)
                return M0__MIME_DEFAULT;
        char ext[EXT_MAX];
        for (size_t i = 0; i < n; i++)
                ext[i] = (char)((dot[1 + i] >= 'A' && dot[1 + i] <= 'Z') ? dot[1 + i] + 32
                                                                         : dot[1 + i]);
        struct m0_hnode *h = m0__hmap_find(&m->map, m0__hash(ext, n), ext, n);
        if (!h)
                return M0__MIME_DEFAULT;
        const struct m0_mime_ext *e = (const struct m0_mime_ext *)h;
        return m->types.data + e->type;
}

void m0__mime_free(struct m0_mime *m)
{
        m0__hmap_free(&m->map);
        m0__buf_free(&m->types);
        free(m->ext);
        free(m->text);
        *m = (struct m0_mime){0};
}
