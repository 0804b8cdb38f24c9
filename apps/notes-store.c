/* SPDX-License-Identifier: MIT */
/* notes-store.c: the notes and revoked sessions in memory, and their one file on disk. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "notes-json.h"
#include "notes-store.h"

/* A store file larger than this is not read: no set of notes within the knobs' ranges is. */
#define LOAD_MAX_BYTES ((size_t)1 << 30)
#define WRITE_BUF_BYTES (64 * 1024)

static void errf(char *err, size_t err_len, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t err_len, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
}

/* One allocation per note: the struct, then the title and the body with their NULs. */
static struct notes_note *note_new(uint64_t id, int64_t created, int64_t updated, const char *title,
                                   size_t title_len, const char *body, size_t body_len)
{
        struct notes_note *n = malloc(sizeof(*n) + title_len + 1 + body_len + 1);
        if (!n)
                return NULL;
        n->id = id;
        n->created = created;
        n->updated = updated;
        n->title = (char *)(n + 1);
        n->title_len = title_len;
        memcpy(n->title, title, title_len);
        n->title[title_len] = '\0';
        n->body = n->title + title_len + 1;
        n->body_len = body_len;
        memcpy(n->body, body, body_len);
        n->body[body_len] = '\0';
        return n;
}

static int reserve(struct notes_store *s, size_t want)
{
        if (want <= s->cap)
                return 0;
        size_t cap = s->cap ? s->cap * 2 : 16;
        while (cap < want)
                cap *= 2;
        struct notes_note **p = realloc(s->notes, cap * sizeof(*p));
        if (!p)
                return -ENOMEM;
        s->notes = p;
        s->cap = cap;
        return 0;
}

/* Index of the note `id`, or of where it would go. */
static size_t lower_bound(const struct notes_store *s, uint64_t id)
{
        size_t lo = 0, hi = s->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (s->notes[mid]->id < id)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

struct notes_note *notes_store_find(const struct notes_store *s, uint64_t id)
{
        size_t i = lower_bound(s, id);
        return i < s->n && s->notes[i]->id == id ? s->notes[i] : NULL;
}

static bool nonce_ok(const char *p, size_t len)
{
        if (len != NOTES_NONCE_HEX)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
                        return false;
        return true;
}

/* Drop revocations whose session has expired anyway. */
static void purge_revoked(struct notes_store *s, int64_t now)
{
        size_t k = 0;
        for (size_t i = 0; i < s->n_revoked; i++)
                if (s->revoked[i].expiry > now)
                        s->revoked[k++] = s->revoked[i];
        s->n_revoked = k;
}

/* ---- writing ---- */

struct writer {
        int fd;
        size_t n;
        char *buf;
};

static int w_flush(struct writer *w)
{
        size_t off = 0;
        while (off < w->n) {
                ssize_t k = write(w->fd, w->buf + off, w->n - off);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                off += (size_t)k;
        }
        w->n = 0;
        return 0;
}

static int w_put(void *ctx, const char *data, size_t len)
{
        struct writer *w = ctx;
        while (len > 0) {
                if (w->n == WRITE_BUF_BYTES) {
                        int e = w_flush(w);
                        if (e < 0)
                                return e;
                }
                size_t take = WRITE_BUF_BYTES - w->n < len ? WRITE_BUF_BYTES - w->n : len;
                memcpy(w->buf + w->n, data, take);
                w->n += take;
                data += take;
                len -= take;
        }
        return 0;
}

static int w_printf(struct writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int w_printf(struct writer *w, const char *fmt, ...)
{
        char line[160];
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        if (k < 0 || (size_t)k >= sizeof(line))
                return -EOVERFLOW;
        return w_put(w, line, (size_t)k);
}

static int write_lines(struct notes_store *s, struct writer *w)
{
        int e = w_printf(w, "{\"m0notes\":1,\"next_id\":%llu,\"generation\":%llu}\n",
                         (unsigned long long)s->next_id, (unsigned long long)s->generation);
        for (size_t i = 0; e == 0 && i < s->n_revoked; i++)
                e = w_printf(w, "{\"revoked\":\"%s\",\"expiry\":%lld}\n", s->revoked[i].nonce,
                             (long long)s->revoked[i].expiry);
        for (size_t i = 0; e == 0 && i < s->n; i++) {
                const struct notes_note *n = s->notes[i];
                e = w_printf(w, "{\"id\":%llu,\"created\":%lld,\"updated\":%lld,\"title\":",
                             (unsigned long long)n->id, (long long)n->created,
                             (long long)n->updated);
                if (e == 0)
                        e = notes_json_write_string(w_put, w, n->title, n->title_len);
                if (e == 0)
                        e = w_put(w, ",\"body\":", 8);
                if (e == 0)
                        e = notes_json_write_string(w_put, w, n->body, n->body_len);
                if (e == 0)
                        e = w_put(w, "}\n", 2);
        }
        return e == 0 ? w_flush(w) : e;
}

/*
 * Write the whole store to NOTES_FILE_TMP, fsync it, rename it over NOTES_FILE, fsync the
 * directory. A crash at any point leaves either the old file or the new one, whole; once this
 * returns 0 the new one survives a crash. *ret_committed: the rename happened (the new file is
 * the one a restart reads), whatever came after it.
 */
static int save(struct notes_store *s, int64_t now, bool *ret_committed)
{
        struct writer w = {.fd = -1};
        int e;
        *ret_committed = false;
        purge_revoked(s, now);
        w.buf = malloc(WRITE_BUF_BYTES);
        if (!w.buf)
                return -ENOMEM;
        w.fd = openat(s->dirfd, NOTES_FILE_TMP,
                      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (w.fd < 0) {
                e = -errno;
                goto out;
        }
        /* A leftover file keeps its mode through O_TRUNC: the store is the owner's alone. */
        if (fchmod(w.fd, 0600) < 0) {
                e = -errno;
                goto out;
        }
        e = write_lines(s, &w);
        if (e < 0)
                goto out;
        if (fsync(w.fd) < 0) {
                e = -errno;
                goto out;
        }
        int fd = w.fd;
        w.fd = -1;
        if (close(fd) < 0) {
                e = -errno;
                goto out;
        }
        if (renameat(s->dirfd, NOTES_FILE_TMP, s->dirfd, NOTES_FILE) < 0) {
                e = -errno;
                goto out;
        }
        *ret_committed = true;
        if (fsync(s->dirfd) < 0)
                e = -errno;
out:
        if (w.fd >= 0)
                close(w.fd);
        free(w.buf);
        return e;
}

int notes_store_add(struct notes_store *s, const char *title, size_t title_len, const char *body,
                    size_t body_len, int64_t now, struct notes_note **ret_note)
{
        int e = reserve(s, s->n + 1);
        if (e < 0)
                return e;
        struct notes_note *n = note_new(s->next_id, now, now, title, title_len, body, body_len);
        if (!n)
                return -ENOMEM;
        /* Ids only grow, so the new note goes last. */
        s->notes[s->n++] = n;
        s->next_id++;
        s->bytes += title_len + body_len;
        bool committed;
        e = save(s, now, &committed);
        if (e < 0 && !committed) {
                s->n--;
                s->next_id--;
                s->bytes -= title_len + body_len;
                free(n);
                return e;
        }
        *ret_note = n;
        return e;
}

int notes_store_replace(struct notes_store *s, struct notes_note *note, const char *title,
                        size_t title_len, const char *body, size_t body_len, int64_t now)
{
        size_t i = lower_bound(s, note->id);
        struct notes_note *n =
                note_new(note->id, note->created, now, title, title_len, body, body_len);
        if (!n)
                return -ENOMEM;
        s->notes[i] = n;
        s->bytes = s->bytes - note->title_len - note->body_len + title_len + body_len;
        bool committed;
        int e = save(s, now, &committed);
        if (e < 0 && !committed) {
                s->notes[i] = note;
                s->bytes = s->bytes + note->title_len + note->body_len - title_len - body_len;
                free(n);
                return e;
        }
        free(note);
        return e;
}

int notes_store_delete(struct notes_store *s, struct notes_note *note, int64_t now)
{
        size_t i = lower_bound(s, note->id);
        memmove(&s->notes[i], &s->notes[i + 1], (s->n - i - 1) * sizeof(s->notes[0]));
        s->n--;
        s->bytes -= note->title_len + note->body_len;
        bool committed;
        int e = save(s, now, &committed);
        if (e < 0 && !committed) {
                /* The slot it left is still allocated: put it back where it was. */
                memmove(&s->notes[i + 1], &s->notes[i], (s->n - i) * sizeof(s->notes[0]));
                s->notes[i] = note;
                s->n++;
                s->bytes += note->title_len + note->body_len;
                return e;
        }
        free(note);
        return e;
}

bool notes_store_is_revoked(const struct notes_store *s, const char *nonce)
{
        for (size_t i = 0; i < s->n_revoked; i++)
                if (memcmp(s->revoked[i].nonce, nonce, NOTES_NONCE_HEX) == 0)
                        return true;
        return false;
}

int notes_store_revoke(struct notes_store *s, const char *nonce, int64_t expiry, int64_t now,
                       bool *ret_bumped)
{
        *ret_bumped = false;
        if (!notes_store_is_revoked(s, nonce)) {
                purge_revoked(s, now);
                if (s->n_revoked < s->max_revoked) {
                        struct notes_revoked *r = &s->revoked[s->n_revoked++];
                        memcpy(r->nonce, nonce, NOTES_NONCE_HEX);
                        r->nonce[NOTES_NONCE_HEX] = '\0';
                        r->expiry = expiry;
                } else {
                        /* No room to name this session: end them all. Nothing is un-revoked. */
                        s->generation++;
                        s->n_revoked = 0;
                        *ret_bumped = true;
                }
        }
        bool committed;
        return save(s, now, &committed);
}

/* ---- loading ---- */

enum {
        F_M0NOTES,
        F_NEXT_ID,
        F_GENERATION,
        F_ID,
        F_CREATED,
        F_UPDATED,
        F_TITLE,
        F_BODY,
        F_REVOKED,
        F_EXPIRY,
        F_COUNT,
};

#define BIT(f) (1u << (f))
#define HEADER_FIELDS (BIT(F_M0NOTES) | BIT(F_NEXT_ID) | BIT(F_GENERATION))
#define NOTE_FIELDS (BIT(F_ID) | BIT(F_CREATED) | BIT(F_UPDATED) | BIT(F_TITLE) | BIT(F_BODY))
#define REVOKED_FIELDS (BIT(F_REVOKED) | BIT(F_EXPIRY))

static int load_line(struct notes_store *s, struct notes_json_field *f, unsigned line, int64_t now,
                     uint64_t *last_id, char *err, size_t err_len)
{
        unsigned seen = 0;
        for (int i = 0; i < F_COUNT; i++)
                if (f[i].seen)
                        seen |= BIT(i);
        if (line == 1) {
                if (seen != HEADER_FIELDS || f[F_M0NOTES].num != 1 || f[F_NEXT_ID].num < 1) {
                        errf(err, err_len, "line 1 is not a version 1 header");
                        return -EINVAL;
                }
                s->next_id = f[F_NEXT_ID].num;
                s->generation = f[F_GENERATION].num;
                return 0;
        }
        if (seen == REVOKED_FIELDS) {
                if (!nonce_ok(f[F_REVOKED].buf, f[F_REVOKED].len)) {
                        errf(err, err_len, "line %u: a revoked nonce is not %d hex digits", line,
                             NOTES_NONCE_HEX);
                        return -EINVAL;
                }
                if ((int64_t)f[F_EXPIRY].num <= now)
                        return 0; /* that session has ended anyway */
                if (s->n_revoked == s->max_revoked) {
                        /* M0_NOTES_MAX_REVOKED was lowered: end every session instead. */
                        s->generation++;
                        s->n_revoked = 0;
                        return 1;
                }
                struct notes_revoked *r = &s->revoked[s->n_revoked++];
                memcpy(r->nonce, f[F_REVOKED].buf, NOTES_NONCE_HEX + 1);
                r->expiry = (int64_t)f[F_EXPIRY].num;
                return 0;
        }
        if (seen != NOTE_FIELDS) {
                errf(err, err_len, "line %u is neither a note nor a revoked session", line);
                return -EINVAL;
        }
        uint64_t id = f[F_ID].num;
        if (id <= *last_id || id >= s->next_id) {
                errf(err, err_len, "line %u: note id %llu is out of order or not below next_id",
                     line, (unsigned long long)id);
                return -EINVAL;
        }
        int e = reserve(s, s->n + 1);
        if (e < 0)
                return e;
        struct notes_note *n =
                note_new(id, (int64_t)f[F_CREATED].num, (int64_t)f[F_UPDATED].num, f[F_TITLE].buf,
                         f[F_TITLE].len, f[F_BODY].buf, f[F_BODY].len);
        if (!n)
                return -ENOMEM;
        s->notes[s->n++] = n;
        s->bytes += n->title_len + n->body_len;
        *last_id = id;
        return 0;
}

static int load(struct notes_store *s, const char *text, size_t len, int64_t now, char *err,
                size_t err_len)
{
        char title[NOTES_TITLE_MAX + 1], nonce[NOTES_NONCE_HEX + 1];
        char *body = malloc(NOTES_BODY_MAX + 1);
        if (!body)
                return -ENOMEM;
        struct notes_json_field f[F_COUNT] = {
                [F_M0NOTES] = {.name = "m0notes", .type = NOTES_JSON_UINT},
                [F_NEXT_ID] = {.name = "next_id", .type = NOTES_JSON_UINT},
                [F_GENERATION] = {.name = "generation", .type = NOTES_JSON_UINT},
                [F_ID] = {.name = "id", .type = NOTES_JSON_UINT},
                [F_CREATED] = {.name = "created", .type = NOTES_JSON_UINT},
                [F_UPDATED] = {.name = "updated", .type = NOTES_JSON_UINT},
                [F_TITLE] = {"title", NOTES_JSON_STRING, title, NOTES_TITLE_MAX, 0, 0, false},
                [F_BODY] = {"body", NOTES_JSON_STRING, body, NOTES_BODY_MAX, 0, 0, false},
                [F_REVOKED] = {"revoked", NOTES_JSON_STRING, nonce, NOTES_NONCE_HEX, 0, 0, false},
                [F_EXPIRY] = {.name = "expiry", .type = NOTES_JSON_UINT},
        };
        uint64_t last_id = 0;
        bool bumped = false;
        unsigned line = 0;
        int e = 0;
        size_t pos = 0;
        while (pos < len) {
                line++;
                const char *nl = memchr(text + pos, '\n', len - pos);
                if (!nl) {
                        errf(err, err_len, "line %u has no end (a file cut short)", line);
                        e = -EINVAL;
                        break;
                }
                size_t ll = (size_t)(nl - (text + pos));
                ssize_t k = notes_json_object(text + pos, ll, f, F_COUNT);
                if (k < 0 || (size_t)k != ll) {
                        errf(err, err_len, "line %u is not one object of known members", line);
                        e = -EINVAL;
                        break;
                }
                e = load_line(s, f, line, now, &last_id, err, err_len);
                if (e < 0)
                        break;
                bumped |= e > 0;
                e = 0;
                pos += ll + 1;
        }
        if (e == 0 && line == 0) {
                errf(err, err_len, "the file is empty");
                e = -EINVAL;
        }
        free(body);
        return e < 0 ? e : bumped;
}

int notes_store_open(struct notes_store *s, const char *dir, size_t max_revoked, int64_t now,
                     char *err, size_t err_len)
{
        char *text = NULL;
        int fd = -1, e;
        memset(s, 0, sizeof(*s));
        s->dirfd = -1;
        s->next_id = 1;
        s->max_revoked = max_revoked;
        s->revoked = calloc(max_revoked ? max_revoked : 1, sizeof(*s->revoked));
        if (!s->revoked)
                return -ENOMEM;
        s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->dirfd < 0) {
                e = -errno;
                errf(err, err_len, "cannot open the directory %s: %s", dir, strerror(-e));
                return e;
        }
        fd = openat(s->dirfd, NOTES_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
                e = -errno;
                if (e == -ENOENT)
                        return 0; /* the first start: no notes yet */
                errf(err, err_len, "cannot open %s/%s: %s", dir, NOTES_FILE, strerror(-e));
                return e;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) {
                e = -errno;
                errf(err, err_len, "cannot stat %s/%s: %s", dir, NOTES_FILE, strerror(-e));
                goto out;
        }
        if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > LOAD_MAX_BYTES) {
                e = -EINVAL;
                errf(err, err_len, "%s/%s is not a regular file of at most 1 GiB", dir, NOTES_FILE);
                goto out;
        }
        size_t size = (size_t)st.st_size, got = 0;
        text = malloc(size ? size : 1);
        if (!text) {
                e = -ENOMEM;
                goto out;
        }
        while (got < size) {
                ssize_t k = read(fd, text + got, size - got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        e = k < 0 ? -errno : -EIO;
                        errf(err, err_len, "cannot read %s/%s: %s", dir, NOTES_FILE, strerror(-e));
                        goto out;
                }
                got += (size_t)k;
        }
        char why[200] = "";
        e = load(s, text, size, now, why, sizeof(why));
        if (e < 0) {
                errf(err, err_len, "%s/%s: %s", dir, NOTES_FILE, why[0] ? why : strerror(-e));
                goto out;
        }
        if (e > 0) {
                /* Revocations past the bound became a new generation: make that durable. */
                bool committed;
                e = save(s, now, &committed);
                if (e < 0)
                        errf(err, err_len, "cannot write %s/%s: %s", dir, NOTES_FILE, strerror(-e));
        }
out:
        free(text);
        if (fd >= 0)
                close(fd);
        return e;
}

void notes_store_close(struct notes_store *s)
{
        for (size_t i = 0; i < s->n; i++)
                free(s->notes[i]);
        free(s->notes);
        free(s->revoked);
        if (s->dirfd >= 0)
                close(s->dirfd);
        memset(s, 0, sizeof(*s));
        s->dirfd = -1;
}
