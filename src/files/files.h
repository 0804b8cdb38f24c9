/* SPDX-License-Identifier: MIT */
/* files.h: files.c, mime.c and coding.c, a directory served (SPEC SF1–SF4) as pure functions: a
 * path resolved beneath a root, the file's validators and media type, the conditional and range
 * rules of RFC 9110, Accept-Encoding, precompressed siblings and compressed answers. They do no
 * network I/O and keep no state but what their callers pass; the serving calls them. */
#ifndef M0_FILES_H
#define M0_FILES_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "buf.h"
#include "hmap.h"

/* --- files.c: resolution beneath a root (SF1) --- */

/* A file a request named, opened beneath the root (all zeros but fd = -1 is none). */
struct m0_file {
        int fd;         /* O_RDONLY|O_CLOEXEC, a regular file; owned: m0__file_close() */
        struct stat st; /* of fd */
        int coding;     /* enum m0_coding of fd's bytes: a precompressed sibling's, or identity */
        bool index;     /* the path named a directory, and this is its index.html */
        size_t len;     /* strlen(path) */
        char path[PATH_MAX]; /* what was opened, relative to the root: "docs/index.html" */
};

/* Open `dir` as a root to serve (O_PATH|O_DIRECTORY|O_CLOEXEC) into *ret_fd, once at start.
 * -errno of the open: -ENOSYS when the kernel has no openat2 (Linux < 5.6), found here rather
 * than at the first request. */
int m0__files_root_open(const char *dir, int *ret_fd);

/* Resolve `path` (a router's `*rest` capture, percent-decoded; NUL-terminated) beneath `root`
 * into *ret (D175): refused with -ENOENT before any system call when it is absolute, has an
 * empty segment (but a last one: "docs/" names a directory) or one starting with '.' (".", "..",
 * dotfiles); otherwise openat2 with RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS, so no step, a
 * symlink's included, leaves the root (-EXDEV). A directory gives its index.html (no listing:
 * -ENOENT without one); anything but a regular file is -ENOENT (a FIFO or a device is never read:
 * the open is O_NONBLOCK|O_NOCTTY). 0, or -errno as openat2 returned it for the log;
 * m0__files_status() says what the client is told. *ret is written on success only. */
int m0__files_open(int root, const char *path, struct m0_file *ret);
/* Close what `f` holds (fd -1 or a half-filled struct are fine); f->fd is -1 after. */
void m0__file_close(struct m0_file *f);
/* The status m0__files_open()'s -errno answers (D175): 404 for every refusal and every missing
 * file, so nothing tells a name outside the root, a forbidden one and an absent one apart; 503
 * when the process is out of descriptors or memory (it says nothing of the path); 500 else. */
int m0__files_status(int err);

/* --- files.c: validators and caching (SF2) --- */

/* Bytes of an ETag with its quotes and NUL: '"' ino '-' size '-' mtime_ns '"' in hex. */
#define M0__ETAG_MAX 64
/* Bytes of an IMF-fixdate and NUL: "Sun, 06 Nov 1994 08:49:37 GMT". */
#define M0__HTTP_DATE_MAX 30

/* `st`'s strong entity tag (D176) into `out`: "\"<ino>-<size>-<mtime ns>\"" in lower-case hex. */
void m0__files_etag(const struct stat *st, char out[M0__ETAG_MAX]);
/* `t` as an IMF-fixdate (RFC 9110 5.6.7) into `out`, in no locale. */
void m0__http_date(int64_t t, char out[M0__HTTP_DATE_MAX]);
/* An HTTP-date (IMF-fixdate, or the obsolete RFC 850 and asctime forms a recipient must take)
 * into *ret (seconds since the epoch). 0, or -EINVAL with *ret untouched. */
int m0__http_date_parse(const char *s, int64_t *ret);

/* A request's conditional fields (each NULL when absent; a field sent on several lines is given
 * as one comma-joined value, as RFC 9110 5.3 allows). */
struct m0_cond {
        const char *if_match;
        const char *if_none_match;
        const char *if_modified_since;
        const char *if_unmodified_since;
        const char *if_range;
        const char *range;
};

/* RFC 9110 13.2.2's evaluation for a GET or HEAD of a file whose tag is `etag` and modification
 * second `mtime`: 412 (If-Match, else If-Unmodified-Since, fails), 304 (If-None-Match matches by
 * weak comparison, else If-Modified-Since is not before mtime), or 0 to go on to the range. */
int m0__files_conditional(const struct m0_cond *c, const char *etag, int64_t mtime);
/* Whether `range` is honoured under `if_range` (NULL: it is): an entity tag compared strongly,
 * or an HTTP-date equal to mtime (RFC 9110 13.1.5). */
bool m0__files_if_range(const char *if_range, const char *etag, int64_t mtime);
/* `Range` (NULL: absent) against a representation of `size` bytes (D177): 200 (absent, not
 * `bytes=`, malformed, or several ranges: the whole file), 206 with *ret_start and *ret_len
 * (at least 1 byte) set, or 416 (no range satisfiable: `Content-Range: bytes * /size`). Numbers
 * past 2^64 - 1 saturate, which keeps each answer what the RFC wants. */
int m0__files_range(const char *range, uint64_t size, uint64_t *ret_start, uint64_t *ret_len);
/* Whether the last segment of `name` is fingerprinted, `stem.<8 to 64 hex, one a letter>.ext`
 * ("app.3f2a9c1b.js"), and so may be cached as immutable (D178). */
bool m0__files_fingerprinted(const char *name);
/* The Cache-Control a file gets (D178): the route's when it set one, else
 * M0__CACHE_IMMUTABLE for a fingerprinted name and M0__CACHE_REVALIDATE for any other. */
const char *m0__files_cache_control(const char *route_cc, const char *name);
#define M0__CACHE_IMMUTABLE "public, max-age=31536000, immutable"
#define M0__CACHE_REVALIDATE "no-cache"

/* --- mime.c: Content-Type from /etc/mime.types (SF2) --- */

struct m0_mime_ext;
struct m0_mime {
        struct m0_hmap map;      /* extension (lower case) -> struct m0_mime_ext */
        char *text;              /* the file, its extensions lower-cased and NUL-ended in place */
        struct m0_buf types;     /* each Content-Type value, NUL-ended */
        struct m0_mime_ext *ext; /* the table's nodes */
        size_t n;
};

#define M0__MIME_TYPES "/etc/mime.types"
#define M0__MIME_DEFAULT "application/octet-stream"

/* Read a mime.types file (`type ext ext ...` lines, '#' comments) into *m (all zeros before),
 * once at start: the first line naming an extension wins; a type under text/, JavaScript,
 * JSON or +json gets "; charset=utf-8" (D179). 0, or -errno of the read (*m is then empty and
 * every name gets the default), -ENOMEM, -EFBIG past 4 MiB. */
int m0__mime_load(struct m0_mime *m, const char *path);
/* The Content-Type of `name` by the extension of its last segment, case-insensitively, or
 * M0__MIME_DEFAULT. The string lives as long as `m`. Any thread, once loaded. */
const char *m0__mime_type(const struct m0_mime *m, const char *name);
void m0__mime_free(struct m0_mime *m);

/* --- coding.c: Accept-Encoding, siblings and compression (SF3, SF4) --- */

enum m0_coding {
        M0_CODING_IDENTITY = 0,
        M0_CODING_ZSTD,
        M0_CODING_BR,
        M0_CODING_GZIP,
        M0__CODINGS,
};

/* An Accept-Encoding's weights, in thousandths: q[c] for each coding (identity's included), -1
 * where the field does not name it; star is `*`'s, -1 when absent. */
struct m0_accept_enc {
        int q[M0__CODINGS];
        int star;
        bool present; /* the field was sent */
};

/* Parse Accept-Encoding (NULL: absent) into *ret (D180): codings case-insensitively (x-gzip is
 * gzip), `;q=` as RFC 9110 12.4.2 writes a qvalue, an element whose q is not one ignored, the
 * first naming of a coding kept. Never fails: what does not parse is not accepted. */
void m0__accept_enc_parse(const char *field, struct m0_accept_enc *ret);
/* The weight `a` gives coding `c` (thousandths): its own, else `*`'s, else 0; identity's is 1000
 * unless named or `*` says otherwise. */
int m0__accept_enc_q(const struct m0_accept_enc *a, enum m0_coding c);
/* The coding's token ("zstd", "br", "gzip"), or NULL for identity. */
const char *m0__coding_name(enum m0_coding c);
/* The file suffix of a precompressed sibling (".zst", ".br", ".gz"), or NULL for identity. */
const char *m0__coding_suffix(enum m0_coding c);

/* Replace *f (an identity file m0__files_open() gave) by its precompressed sibling `f->path` +
 * ".zst", ".br" or ".gz" (D181) when `a` accepts one: the highest weight wins, the smallest file
 * among equal weights; a sibling serves only as a regular file beneath the root, and not when it
 * is older than the file. 0 (f->coding says which; the file's fd is closed when a sibling
 * replaced it), or -ENOMEM. The answer carries `Vary: Accept-Encoding` either way. */
int m0__files_sibling(int root, const struct m0_accept_enc *a, struct m0_file *f);

/* An answer's compression settings: the knobs (SF4). */
struct m0_compress_cfg {
        uint32_t min_bytes; /* M0_COMPRESS_MIN_BYTES */
        int zstd_level, brotli_level, gzip_level;
};

/* Whether Content-Type `ctype` is worth compressing: text/ types but text/event-stream, JSON and
 * +json, JavaScript, XML and +xml (SVG, Atom...), WebAssembly, and a few others (D182). */
bool m0__compressible(const char *ctype);
/* The coding an answer of `len` bytes and type `ctype` gets under `a`, or identity (D182, D183):
 * identity for a body under cfg->min_bytes, an incompressible type, an answer the app marked
 * (`no_compress`, BREACH), a request whose Sec-Fetch-Site is cross-site or same-site
 * (`fetch_site`, NULL when absent), or when `a` accepts none; else the highest weight, zstd
 * before br before gzip among equals, unless identity is weighed above it. */
enum m0_coding m0__compress_choose(const struct m0_compress_cfg *cfg, const struct m0_accept_enc *a,
                                   const char *ctype, size_t len, bool no_compress,
                                   const char *fetch_site);
/* `body[0, len)` compressed with coding `c` (not identity) at cfg's level, appended to *out.
 * 1 when the result is kept (*out holds it), 0 when it was not smaller than the body (*out as it
 * was), -ENOMEM, or -EIO when the library failed. */
int m0__compress(const struct m0_compress_cfg *cfg, enum m0_coding c, const void *body, size_t len,
                 struct m0_buf *out);

/* --- turncache.c: the files of one turn of a loop (SF5, D237) --- */

/* A file this small joins its head in the loop's output buffer (D205), read from the turn's
 * cache when it holds the file's bytes. */
#define M0__FILE_INLINE (16u << 10)

/* What serving a name found: the file (or its sibling) opened, its validators and its type,
 * made once. Held by a turn's cache (`cached`: its fd is the cache's, valid until the turn
 * ends) or by one answer alone (the fd is the answer's to close). */
struct m0_fent {
        struct m0_hnode node; /* in m0_fturn.map; key: root, name, Accept-Encoding */
        struct m0_buf key;
        int fd;
        struct stat st;
        int coding;        /* enum m0_coding of fd's bytes */
        bool index;        /* the name was a directory's, and this is its index.html */
        bool cached;       /* the cache holds it */
        int8_t bytes_read; /* 0 not yet, 1 `bytes` holds st.st_size bytes, -1 it cannot */
        const char *ctype; /* the file's Content-Type (mime.c's string) */
        char etag[M0__ETAG_MAX];
        char mtime[M0__HTTP_DATE_MAX]; /* Last-Modified */
        struct m0_buf bytes;           /* a small file's bytes, read at most once a turn */
        /* The answer's header lines about the file, made once (D239), in runs: ETag [0, tag),
         * Last-Modified [tag, lm), Cache-Control and Vary [lm, val), Accept-Ranges [val, ar),
         * Content-Type and Content-Encoding [ar, lines.len): each run's end an offset. */
        struct m0_buf lines;
        uint32_t tag, lm, val, ar;
};

/* A loop's cache of the files its turn opened (D237): at most `cap` entries (0: none), each
 * closed when the turn ends, so that a file changed or replaced between two turns is seen. One
 * thread. All zeros is a cache of none. */
struct m0_fturn {
        struct m0_hmap map;
        struct m0_fent *ent; /* [0, n) in use, [n, cap) kept for their buffers */
        uint32_t cap, n;
        uint32_t inline_max; /* bytes of a file m0__fent_bytes() keeps (D205's bound) */
        struct m0_buf look;  /* the key being looked up */
};

/* A cache of at most `cap` entries, keeping the bytes of files up to `inline_max`. 0 or -ENOMEM. */
int m0__fturn_init(struct m0_fturn *t, uint32_t cap, uint32_t inline_max);
/* What this turn found for `name` beneath `root` under Accept-Encoding `ae` (NULL: absent), or
 * NULL. The key is the exact string the request named, under the same root's descriptor: what
 * it resolved to within this turn is what it resolves to now (D237). */
struct m0_fent *m0__fturn_find(struct m0_fturn *t, int root, const char *name, const char *ae);
/* Keep *e (an answer's, fd owned) as what `name` under `root` and `ae` found: the cached entry,
 * which owns the fd now, or NULL when the cache is full or out of memory (*e stays the
 * caller's). */
struct m0_fent *m0__fturn_add(struct m0_fturn *t, int root, const char *name, const char *ae,
                              const struct m0_fent *e);
/* The end of a turn: every entry's fd closed, the cache emptied (buffers kept). */
void m0__fturn_clear(struct m0_fturn *t);
void m0__fturn_free(struct m0_fturn *t);
/* A cached entry's bytes [0, st.st_size) when the file is no larger than the cache's inline_max,
 * read once in the turn; NULL when it is larger, the read failed or came short (the file shrank:
 * the caller reads it itself and sees that), or there is no memory. */
const void *m0__fent_bytes(struct m0_fturn *t, struct m0_fent *e);

#endif /* M0_FILES_H */
