/* SPDX-License-Identifier: MIT */
/* files.c: a path resolved beneath a served root, and the validators, conditions and ranges of
 * RFC 9110 for the file it names (SPEC SF1, SF2). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "files.h"

/* glibc 2.36 has no wrapper. */
static int openat2_(int dirfd, const char *path, uint64_t flags, uint64_t resolve)
{
        struct open_how how = {.flags = flags, .resolve = resolve};
        long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        return fd < 0 ? -errno : (int)fd;
}

int m0__files_root_open(const char *dir, int *ret_fd)
{
        int fd = openat2_(AT_FDCWD, dir, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
        if (fd < 0)
                return fd;
        *ret_fd = fd;
        return 0;
}

/* Refused before the kernel sees it (D175): absolute, an empty segment but a last one, or a
 * segment starting with '.' (".", "..", dotfiles such as .git or .env). */
static bool path_refused(const char *p)
{
        for (const char *s = p; *s;) {
                if (*s == '.' || *s == '/')
                        return true; /* a dot first, an empty segment, or "/" first */
                const char *slash = strchr(s, '/');
                if (!slash)
                        break;
                s = slash + 1; /* "docs/" ends here: the directory */
        }
        return false;
}

#define FILE_FLAGS (O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
#define FILE_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)

/* `path` beneath `root`, fstat'ed into *st. A FIFO, socket or device opened O_NONBLOCK reads
 * nothing and blocks on nothing; only a regular file or a directory comes back. */
static int open_beneath(int root, const char *path, struct stat *st)
{
        int fd = openat2_(root, path, FILE_FLAGS, FILE_RESOLVE);
        if (fd < 0)
                return fd;
        if (fstat(fd, st) < 0) {
                int err = -errno;
                close(fd);
                return err;
        }
        if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) {
                close(fd);
                return -ENOENT;
        }
        return fd;
}

int m0__files_open(int root, const char *path, struct m0_file *ret)
{
        if (path_refused(path))
                return -ENOENT;
        size_t len = strlen(path);
        if (len >= sizeof(ret->path))
                return -ENAMETOOLONG;
        struct stat st;
        /* "" is the root itself: "." is refused above as a request's segment, not here. */
        int fd = open_beneath(root, len ? path : ".", &st);
        if (fd < 0)
                return fd;
        bool index = false;
        char full[PATH_MAX];
        memcpy(full, path, len + 1);
        if (S_ISDIR(st.st_mode)) {
                /* Resolved from the root again, not from fd, so that index.html may be a symlink
                 * to elsewhere beneath the root as any other file may (D175). */
                close(fd);
                const char *sep = len && path[len - 1] != '/' ? "/" : "";
                int n = snprintf(full, sizeof(full), "%s%sindex.html", path, sep);
                if (n < 0 || (size_t)n >= sizeof(full))
                        return -ENAMETOOLONG;
                len = (size_t)n;
                fd = open_beneath(root, full, &st);
                if (fd < 0)
                        return fd;
                if (!S_ISREG(st.st_mode)) {
                        close(fd);
                        return -ENOENT;
                }
                index = true;
        } else if (path[len - 1] == '/') {
                close(fd); /* "file/" : openat2 takes it on some kernels; it names no file */
                return -ENOTDIR;
        }
        ret->fd = fd;
        ret->st = st;
        ret->coding = 0;
        ret->index = index;
        ret->len = len;
        memcpy(ret->path, full, len + 1);
        return 0;
}

void m0__file_close(struct m0_file *f)
{
        if (f && f->fd >= 0) {
                close(f->fd);
                f->fd = -1;
        }
}

int m0__files_status(int err)
{
        switch (err) {
        case -EMFILE:
        case -ENFILE:
        case -ENOMEM: return 503;
        case -EIO:
        case -ENOSYS:
        case -EBADF: return 500;
        default: return 404;
        }
}

/* --- validators --- */

/* v in lowercase hex, without leading zeros, at p; returns the end. */
static char *put_hex(char *p, uint64_t v)
{
        char b[16];
        int n = 0;
        do {
                b[n++] = "0123456789abcdef"[v & 15];
                v >>= 4;
        } while (v);
        while (n)
                *p++ = b[--n];
        return p;
}

/* Formatted by hand, not by snprintf: a turn makes one for each file it opens (SPEC SF5, D251). */
void m0__files_etag(const struct stat *st, char out[M0__ETAG_MAX])
{
        uint64_t ns = (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
        char *p = out; /* 3 × 16 digits, 2 dashes, 2 quotes and the NUL: 53 at most */
        *p++ = '"';
        p = put_hex(p, (uint64_t)st->st_ino);
        *p++ = '-';
        p = put_hex(p, (uint64_t)st->st_size);
        *p++ = '-';
        p = put_hex(p, ns);
        *p++ = '"';
        *p = '\0';
}

static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* v (0 to 99) as two digits at p. */
static char *put2(char *p, int v)
{
        *p++ = (char)('0' + v / 10);
        *p++ = (char)('0' + v % 10);
        return p;
}

void m0__http_date(int64_t t, char out[M0__HTTP_DATE_MAX])
{
        time_t tt = (time_t)t;
        struct tm tm;
        if (!gmtime_r(&tt, &tm) || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0)
                gmtime_r(&(time_t){0}, &tm);
        /* "Sun, 06 Nov 1994 08:49:37 GMT", by hand (D251) */
        int y = tm.tm_year + 1900;
        char *p = out;
        memcpy(p, days[tm.tm_wday], 3);
        p += 3;
        *p++ = ',';
        *p++ = ' ';
        p = put2(p, tm.tm_mday);
        *p++ = ' ';
        memcpy(p, months[tm.tm_mon], 3);
        p += 3;
        *p++ = ' ';
        p = put2(p, y / 100);
        p = put2(p, y % 100);
        *p++ = ' ';
        p = put2(p, tm.tm_hour);
        *p++ = ':';
        p = put2(p, tm.tm_min);
        *p++ = ':';
        p = put2(p, tm.tm_sec);
        memcpy(p, " GMT", 5);
}

/* `n` digits at *s into *v, moving *s past them. */
static bool digits(const char **s, int n, int *v)
{
        int x = 0;
        for (int i = 0; i < n; i++) {
                if ((*s)[i] < '0' || (*s)[i] > '9')
                        return false;
                x = x * 10 + ((*s)[i] - '0');
        }
        *s += n;
        *v = x;
        return true;
}

static bool lit(const char **s, const char *l)
{
        size_t n = strlen(l);
        if (strncmp(*s, l, n))
                return false;
        *s += n;
        return true;
}

static int name_index(const char **s, const char (*names)[4], int n)
{
        for (int i = 0; i < n; i++)
                if (!strncmp(*s, names[i], 3)) {
                        *s += 3;
                        return i;
                }
        return -1;
}

static const char long_days[7][10] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                      "Thursday", "Friday", "Saturday"};

static bool hms(const char **s, struct tm *tm)
{
        return digits(s, 2, &tm->tm_hour) && lit(s, ":") && digits(s, 2, &tm->tm_min) &&
               lit(s, ":") && digits(s, 2, &tm->tm_sec);
}

int m0__http_date_parse(const char *s, int64_t *ret)
{
        struct tm tm = {0};
        int wday = -1, year = 0;
        for (int i = 0; i < 7; i++) {
                size_t n = strlen(long_days[i]);
                if (!strncmp(s, long_days[i], n) && s[n] == ',') {
                        wday = i;
                        s += n;
                        /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
                        if (!lit(&s, ", ") || !digits(&s, 2, &tm.tm_mday) || !lit(&s, "-") ||
                            (tm.tm_mon = name_index(&s, months, 12)) < 0 || !lit(&s, "-") ||
                            !digits(&s, 2, &year) || !lit(&s, " ") || !hms(&s, &tm) ||
                            !lit(&s, " GMT"))
                                return -EINVAL;
                        /* RFC 9110 5.6.7: a two-digit year more than 50 years ahead is past */
                        time_t now = time(NULL);
                        struct tm nt;
                        gmtime_r(&now, &nt);
                        int cy = nt.tm_year + 1900;
                        year += cy / 100 * 100;
                        if (year > cy + 50)
                                year -= 100;
                        goto done;
                }
        }
        wday = name_index(&s, days, 7);
        if (wday < 0)
                return -EINVAL;
        if (*s == ',') {
                /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
                if (!lit(&s, ", ") || !digits(&s, 2, &tm.tm_mday) || !lit(&s, " ") ||
                    (tm.tm_mon = name_index(&s, months, 12)) < 0 || !lit(&s, " ") ||
                    !digits(&s, 4, &year) || !lit(&s, " ") || !hms(&s, &tm) || !lit(&s, " GMT"))
                        return -EINVAL;
        } else {
                /* asctime: Sun Nov  6 08:49:37 1994 */
                if (!lit(&s, " ") || (tm.tm_mon = name_index(&s, months, 12)) < 0 || !lit(&s, " "))
                        return -EINVAL;
                if (*s == ' ') {
                        s++;
                        if (!digits(&s, 1, &tm.tm_mday))
                                return -EINVAL;
                } else if (!digits(&s, 2, &tm.tm_mday)) {
                        return -EINVAL;
                }
                if (!lit(&s, " ") || !hms(&s, &tm) || !lit(&s, " ") || !digits(&s, 4, &year))
                        return -EINVAL;
        }
done:
        if (*s || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
            tm.tm_sec > 60)
                return -EINVAL;
        tm.tm_year = year - 1900;
        int mday = tm.tm_mday, mon = tm.tm_mon;
        time_t t = timegm(&tm);
        if (t == (time_t)-1 || tm.tm_mday != mday || tm.tm_mon != mon)
                return -EINVAL; /* 31 Feb, which timegm() would carry into March */
        (void)wday;             /* a weekday that does not fit the date is taken as the date says */
        *ret = (int64_t)t;
        return 0;
}

/* --- entity-tag lists (RFC 9110 8.8.3, 13.1.1) --- */

static const char *ows(const char *s)
{
        while (*s == ' ' || *s == '\t')
                s++;
        return s;
}

/* One entity-tag at s: *weak, the opaque part with its quotes [*tag, *tag + *n); the end, or
 * NULL when s holds none. */
static const char *etag_next(const char *s, bool *weak, const char **tag, size_t *n)
{
        *weak = false;
        if (s[0] == 'W' && s[1] == '/') {
                *weak = true;
                s += 2;
        }
        if (*s != '"')
                return NULL;
        const char *e = s + 1;
        while (*e && *e != '"') {
                unsigned char ch = (unsigned char)*e;
                if (ch < 0x21 || ch == 0x7f)
                        return NULL;
                e++;
        }
        if (*e != '"')
                return NULL;
        *tag = s;
        *n = (size_t)(e + 1 - s);
        return e + 1;
}

/* Whether `list` ("*" or 1#entity-tag) holds `etag` (ours, strong): by weak comparison, or by
 * strong comparison (a W/ tag never matches). A list that does not parse matches nothing. */
static bool etag_list_match(const char *list, const char *etag, bool strong)
{
        const char *s = ows(list);
        if (*s == '*')
                return !*ows(s + 1);
        size_t elen = strlen(etag);
        bool found = false;
        while (*s) {
                if (*s == ',') {
                        s = ows(s + 1);
                        continue;
                }
                bool weak;
                const char *tag;
                size_t n;
                s = etag_next(s, &weak, &tag, &n);
                if (!s)
                        return false;
                if (n == elen && !memcmp(tag, etag, n) && !(strong && weak))
                        found = true;
                s = ows(s);
                if (*s && *s != ',')
                        return false;
        }
        return found;
}

int m0__files_conditional(const struct m0_cond *c, const char *etag, int64_t mtime)
{
        int64_t t;
        /* 1, 2: the preconditions a client asserts; a list that does not parse fails */
        if (c->if_match) {
                if (!etag_list_match(c->if_match, etag, true))
                        return 412;
        } else if (c->if_unmodified_since && !m0__http_date_parse(c->if_unmodified_since, &t) &&
                   mtime > t) {
                return 412;
        }
        /* 3, 4: a cache's validators; If-Modified-Since is ignored beside If-None-Match */
        if (c->if_none_match) {
                if (etag_list_match(c->if_none_match, etag, false))
                        return 304;
        } else if (c->if_modified_since && !m0__http_date_parse(c->if_modified_since, &t) &&
                   mtime <= t) {
                return 304;
        }
        return 0;
}

bool m0__files_if_range(const char *if_range, const char *etag, int64_t mtime)
{
        if (!if_range)
                return true;
        const char *s = ows(if_range);
        if (*s == '"' || (s[0] == 'W' && s[1] == '/')) {
                bool weak;
                const char *tag;
                size_t n;
                const char *e = etag_next(s, &weak, &tag, &n);
                return e && !*ows(e) && !weak && n == strlen(etag) && !memcmp(tag, etag, n);
        }
        int64_t t;
        return !m0__http_date_parse(s, &t) && t == mtime;
}

/* --- Range (RFC 9110 14.1, 14.2) --- */

/* Digits at *s, saturating at UINT64_MAX; false when there are none. */
static bool u64_sat(const char **s, uint64_t *v)
{
        const char *p = *s;
        uint64_t x = 0;
        while (*p >= '0' && *p <= '9') {
                unsigned d = (unsigned)(*p++ - '0');
                x = x > (UINT64_MAX - d) / 10 ? UINT64_MAX : x * 10 + d;
        }
        if (p == *s)
                return false;
        *s = p;
        *v = x;
        return true;
}

int m0__files_range(const char *range, uint64_t size, uint64_t *ret_start, uint64_t *ret_len)
{
        if (!range)
                return 200;
        const char *s = ows(range);
        if (strncasecmp(s, "bytes", 5))
                return 200;
        s = ows(s + 5);
        if (*s++ != '=')
                return 200;
        int count = 0;
        bool suffix = false;
        uint64_t first = 0, last = 0;
        for (;;) {
                s = ows(s);
                if (*s == ',') {
                        s++;
                        continue;
                }
                if (!*s)
                        break;
                if (++count > 1)
                        return 200; /* several: the whole file (D177), whatever they say */
                if (*s == '-') {
                        s++;
                        suffix = true;
                        if (!u64_sat(&s, &last))
                                return 200;
                } else {
                        if (!u64_sat(&s, &first) || *s++ != '-')
                                return 200;
                        last = UINT64_MAX;
                        if (*s >= '0' && *s <= '9') {
                                u64_sat(&s, &last);
                                if (last < first)
                                        return 200; /* invalid, so the field is ignored */
                        }
                }
                s = ows(s);
                if (*s && *s != ',')
                        return 200;
        }
        if (!count)
                return 200;
        if (suffix) {
                if (!last)
                        return 416;
                if (!size)
                        return 200; /* satisfiable, but no byte to send: the empty whole */
                uint64_t n = last < size ? last : size;
                *ret_start = size - n;
                *ret_len = n;
                return 206;
        }
        if (first >= size)
                return 416;
        if (last >= size)
                last = size - 1;
        *ret_start = first;
        *ret_len = last - first + 1;
        return 206;
}

/* --- Cache-Control --- */

bool m0__files_fingerprinted(const char *name)
{
        const char *base = strrchr(name, '/');
        base = base ? base + 1 : name;
        const char *ext = strrchr(base, '.');
        if (!ext || ext == base)
                return false;
        const char *h = ext;
        while (h > base && h[-1] != '.')
                h--;
        if (h == base)
                return false; /* "3f2a9c1b.js": no stem before the hash */
        size_t n = (size_t)(ext - h);
        bool letter = false;
        for (const char *p = h; p < ext; p++) {
                if (*p >= 'a' && *p <= 'f')
                        letter = true;
                else if (*p < '0' || *p > '9')
                        return false;
        }
        return n >= 8 && n <= 64 && letter && ext[1];
}

const char *m0__files_cache_control(const char *route_cc, const char *name)
{
        if (route_cc)
                return route_cc;
        return m0__files_fingerprinted(name) ? M0__CACHE_IMMUTABLE : M0__CACHE_REVALIDATE;
}
