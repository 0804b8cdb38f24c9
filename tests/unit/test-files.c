/* SPDX-License-Identifier: MIT */
/* test-files.c: files/ (SPEC SF1-SF4): resolution beneath a root built in a temporary directory,
 * media types, validators, conditions, ranges, Accept-Encoding, siblings and compression. */
#include <brotli/decode.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "files.h"
#include "unit.h"

static char tmp[256];   /* the test's directory */
static char rootp[300]; /* tmp/root, the directory served */
static int root = -1;

static void put(const char *rel, const char *text)
{
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", tmp, rel);
        FILE *f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
}

static void mkd(const char *rel)
{
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", tmp, rel);
        ck_assert_int_eq(mkdir(p, 0755), 0);
}

static void link_(const char *target, const char *rel)
{
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", tmp, rel);
        ck_assert_int_eq(symlink(target, p), 0);
}

static void set_mtime(const char *rel, time_t s, long ns)
{
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", tmp, rel);
        struct timespec ts[2] = {{s, ns}, {s, ns}};
        ck_assert_int_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
}

static int nfds(void)
{
        int n = 0;
        DIR *d = opendir("/proc/self/fd");
        for (struct dirent *e; (e = readdir(d));)
                n++;
        closedir(d);
        return n;
}

static void setup(void)
{
        snprintf(tmp, sizeof(tmp), "/tmp/m0-files-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(tmp));
        snprintf(rootp, sizeof(rootp), "%s/root", tmp);
        mkd("root");
        put("outside.txt", "outside\n");
        put("root/hello.txt", "hello\n");
        put("root/.secret", "secret\n");
        mkd("root/.git");
        put("root/.git/config", "[core]\n");
        mkd("root/docs");
        put("root/docs/index.html", "<p>docs</p>\n");
        put("root/docs/page.html", "<p>page</p>\n");
        mkd("root/empty");
        link_("hello.txt", "root/link_in");
        link_("docs/page.html", "root/docs_link");
        link_("/etc/passwd", "root/link_abs");
        link_(rootp, "root/link_abs_in"); /* absolute, to the root itself: still an escape */
        link_("../outside.txt", "root/link_up");
        link_("..", "root/dir_out");
        link_("loop2", "root/loop1");
        link_("loop1", "root/loop2");
        link_("/proc/self/root/etc/passwd", "root/magic");
        char p[512];
        snprintf(p, sizeof(p), "%s/root/fifo", tmp);
        ck_assert_int_eq(mkfifo(p, 0644), 0);
        snprintf(p, sizeof(p), "%s/root/sock", tmp);
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        ck_assert_uint_lt(strlen(p), sizeof(sa.sun_path));
        memcpy(sa.sun_path, p, strlen(p) + 1);
        ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
        close(s);
        snprintf(p, sizeof(p), "%s/root/null", tmp);
        if (mknod(p, S_IFCHR | 0666, makedev(1, 3)) < 0) /* root only: else another FIFO */
                ck_assert_int_eq(mkfifo(p, 0644), 0);
        ck_assert_int_eq(m0__files_root_open(rootp, &root), 0);
}

static void teardown(void)
{
        close(root);
        root = -1;
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
        ck_assert_int_eq(system(cmd), 0);
}

static const char *read_fd(int fd)
{
        static char b[256];
        ssize_t n = pread(fd, b, sizeof(b) - 1, 0);
        ck_assert_int_ge(n, 0);
        b[n] = '\0';
        return b;
}

/* SF1: every way out of the root, and every name not to serve, is refused with no fd given */
START_TEST(refusals)
{
        static const struct {
                const char *path;
                int err;
        } t[] = {
                {"../outside.txt", -ENOENT},         /* ".." */
                {"docs/../../outside.txt", -ENOENT}, /* "..%2F..%2F" as the rest decodes it */
                {"docs/..", -ENOENT},
                {"/etc/passwd", -ENOENT}, /* absolute */
                {"//etc/passwd", -ENOENT},
                {"./hello.txt", -ENOENT},
                {"docs/./page.html", -ENOENT},
                {"docs//page.html", -ENOENT},
                {".secret", -ENOENT}, /* dotfiles, and what a dot directory holds */
                {".git/config", -ENOENT},
                {"docs/.hidden", -ENOENT},
                {"link_up", -EXDEV}, /* symlinks that leave */
                {"link_abs", -EXDEV},
                {"link_abs_in", -EXDEV},
                {"dir_out/outside.txt", -EXDEV},
                {"dir_out/root/hello.txt", -EXDEV},
                {"magic", -EXDEV},
                {"loop1", -ELOOP},
                {"fifo", -ENOENT}, /* neither a regular file nor a directory */
                {"sock", -ENXIO},
                {"null", -ENOENT},
                {"empty", -ENOENT}, /* a directory without index.html: no listing */
                {"empty/", -ENOENT},
                {"hello.txt/", -ENOTDIR},
                {"missing.txt", -ENOENT},
                {"docs/missing/", -ENOENT},
        };
        int before = nfds();
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                struct m0_file f = {.fd = -77};
                int r = m0__files_open(root, t[i].path, &f);
                ck_assert_msg(r == t[i].err, "%s: %d, not %d", t[i].path, r, t[i].err);
                ck_assert_int_eq(f.fd, -77);
                ck_assert_int_eq(m0__files_status(r), 404);
        }
        char big[PATH_MAX + 8];
        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        struct m0_file f = {.fd = -77};
        ck_assert_int_eq(m0__files_open(root, big, &f), -ENAMETOOLONG);
        ck_assert_int_eq(m0__files_status(-ENAMETOOLONG), 404);
        ck_assert_int_eq(f.fd, -77);
        ck_assert_int_eq(nfds(), before); /* and nothing left open */
        ck_assert_int_eq(m0__files_status(-EMFILE), 503);
        ck_assert_int_eq(m0__files_status(-EIO), 500);
}
END_TEST

START_TEST(served)
{
        static const struct {
                const char *path, *opened, *body;
                bool index;
        } t[] = {
                {"hello.txt", "hello.txt", "hello\n", false},
                {"", "index.html", NULL, true}, /* the root has none: see below */
                {"docs", "docs/index.html", "<p>docs</p>\n", true},
                {"docs/", "docs/index.html", "<p>docs</p>\n", true},
                {"docs/page.html", "docs/page.html", "<p>page</p>\n", false},
                {"link_in", "link_in", "hello\n", false}, /* symlinks that stay inside (D175) */
                {"docs_link", "docs_link", "<p>page</p>\n", false},
        };
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                struct m0_file f = {.fd = -1};
                int r = m0__files_open(root, t[i].path, &f);
                if (!t[i].body) {
                        ck_assert_int_eq(r, -ENOENT);
                        continue;
                }
                ck_assert_msg(r == 0, "%s: %d", t[i].path, r);
                ck_assert_str_eq(f.path, t[i].opened);
                ck_assert_uint_eq(f.len, strlen(t[i].opened));
                ck_assert_int_eq(f.index, t[i].index);
                ck_assert_int_eq(f.coding, M0_CODING_IDENTITY);
                ck_assert(S_ISREG(f.st.st_mode));
                ck_assert_str_eq(read_fd(f.fd), t[i].body);
                ck_assert(fcntl(f.fd, F_GETFD) & FD_CLOEXEC);
                m0__file_close(&f);
                ck_assert_int_eq(f.fd, -1);
                m0__file_close(&f);
        }
        put("root/index.html", "root\n");
        struct m0_file f;
        ck_assert_int_eq(m0__files_open(root, "", &f), 0);
        ck_assert_str_eq(f.path, "index.html");
        ck_assert_str_eq(read_fd(f.fd), "root\n");
        m0__file_close(&f);
        /* an index.html that is a directory is no index */
        mkd("root/empty/index.html");
        ck_assert_int_eq(m0__files_open(root, "empty", &f), -ENOENT);
        ck_assert_int_eq(m0__files_root_open("/nonexistent-m0", &root), -ENOENT);
}
END_TEST

/* SF5 (D237): a turn's cache finds what it was given by exactly its root, name and
 * Accept-Encoding, holds at most its bound, reads a small file's bytes once, and closes every
 * descriptor at the turn's end, after which a changed file is read as it is now */
static struct m0_fent opened(const char *name)
{
        struct m0_file f = {.fd = -1};
        ck_assert_int_eq(m0__files_open(root, name, &f), 0);
        struct m0_fent e = {.fd = f.fd, .st = f.st, .coding = f.coding, .index = f.index};
        m0__files_etag(&f.st, e.etag);
        return e;
}

START_TEST(turn_cache)
{
        int fds = nfds();
        struct m0_fturn t;
        ck_assert_int_eq(m0__fturn_init(&t, 2, 8), 0);
        ck_assert_ptr_null(m0__fturn_find(&t, root, "hello.txt", NULL));
        struct m0_fent a = opened("hello.txt");
        struct m0_fent *ca = m0__fturn_add(&t, root, "hello.txt", NULL, &a);
        ck_assert_ptr_nonnull(ca);
        ck_assert(ca->cached);
        ck_assert_int_eq(ca->fd, a.fd);
        ck_assert_str_eq(ca->etag, a.etag);
        ck_assert_ptr_eq(m0__fturn_find(&t, root, "hello.txt", NULL), ca);
        /* another Accept-Encoding, another name, another root, no Accept-Encoding against an
         * empty one: other keys */
        ck_assert_ptr_null(m0__fturn_find(&t, root, "hello.txt", "gzip"));
        ck_assert_ptr_null(m0__fturn_find(&t, root, "hello.txt", ""));
        ck_assert_ptr_null(m0__fturn_find(&t, root, "hello.tx", NULL));
        ck_assert_ptr_null(m0__fturn_find(&t, root, "hello.txt/", NULL));
        ck_assert_ptr_null(m0__fturn_find(&t, root + 1000, "hello.txt", NULL));
        struct m0_fent b = opened("docs/page.html");
        struct m0_fent *cb = m0__fturn_add(&t, root, "docs/page.html", "br, gzip", &b);
        ck_assert_ptr_nonnull(cb);
        ck_assert_ptr_eq(m0__fturn_find(&t, root, "docs/page.html", "br, gzip"), cb);
        ck_assert_ptr_null(m0__fturn_find(&t, root, "docs/page.html", "gzip, br"));
        ck_assert_ptr_null(m0__fturn_find(&t, root, "docs/page.html", NULL));
        /* full: the third is the caller's own */
        struct m0_fent c = opened("docs/index.html");
        ck_assert_ptr_null(m0__fturn_add(&t, root, "docs/index.html", NULL, &c));
        ck_assert_ptr_null(m0__fturn_find(&t, root, "docs/index.html", NULL));
        close(c.fd);
        /* a small file's bytes, read once: a change within the turn is not seen */
        const char *bytes = m0__fent_bytes(&t, ca);
        ck_assert_ptr_nonnull(bytes);
        ck_assert_mem_eq(bytes, "hello\n", 6);
        put("root/hello.txt", "HELLO\n");
        ck_assert_ptr_eq(m0__fent_bytes(&t, ca), bytes);
        ck_assert_mem_eq(bytes, "hello\n", 6);
        /* past the cache's bound for bytes (8): none kept */
        ck_assert_ptr_null(m0__fent_bytes(&t, cb)); /* "<p>page</p>\n" is 12 bytes */
        /* the turn's end: each descriptor closed, nothing found */
        int fa = ca->fd, fb = cb->fd;
        m0__fturn_clear(&t);
        ck_assert_int_eq(fcntl(fa, F_GETFD), -1);
        ck_assert_int_eq(fcntl(fb, F_GETFD), -1);
        ck_assert_int_eq(nfds(), fds);
        ck_assert_ptr_null(m0__fturn_find(&t, root, "hello.txt", NULL));
        /* the next turn reads the file as it is now */
        a = opened("hello.txt");
        ca = m0__fturn_add(&t, root, "hello.txt", NULL, &a);
        ck_assert_ptr_nonnull(ca);
        bytes = m0__fent_bytes(&t, ca);
        ck_assert_ptr_nonnull(bytes);
        ck_assert_mem_eq(bytes, "HELLO\n", 6);
        /* a file that shrank after its stat: no bytes, the caller reads and sees it */
        put("root/hello.txt", "HE");
        struct m0_fent d = opened("docs/page.html");
        d.st.st_size = 6;
        struct m0_fent *cd = m0__fturn_add(&t, root, "shrunk", NULL, &d);
        ck_assert_ptr_nonnull(cd);
        put("root/docs/page.html", "x");
        ck_assert_ptr_null(m0__fent_bytes(&t, cd));
        m0__fturn_free(&t);
        ck_assert_int_eq(nfds(), fds);
        /* a cache of none finds nothing and keeps nothing */
        ck_assert_int_eq(m0__fturn_init(&t, 0, 8), 0);
        a = opened("hello.txt");
        ck_assert_ptr_null(m0__fturn_add(&t, root, "hello.txt", NULL, &a));
        ck_assert_ptr_null(m0__fturn_find(&t, root, "hello.txt", NULL));
        close(a.fd);
        m0__fturn_free(&t);
        ck_assert_int_eq(nfds(), fds);
}
END_TEST

/* SF5 (D251): past the few entries a lookup compares one by one, the map finds each entry by
 * the same key, and a near miss finds none, before and after the switch */
START_TEST(turn_cache_many)
{
        int fds = nfds();
        struct m0_fturn t;
        ck_assert_int_eq(m0__fturn_init(&t, 12, 8), 0);
        char names[10][16];
        struct m0_fent *got[10];
        for (int i = 0; i < 10; i++) {
                snprintf(names[i], sizeof(names[i]), "n%d", i);
                struct m0_fent e = opened("hello.txt");
                got[i] = m0__fturn_add(&t, root, names[i], i % 2 ? "gzip" : NULL, &e);
                ck_assert_ptr_nonnull(got[i]);
                for (int k = 0; k <= i; k++) {
                        ck_assert_ptr_eq(m0__fturn_find(&t, root, names[k], k % 2 ? "gzip" : NULL),
                                         got[k]);
                        ck_assert_ptr_null(
                                m0__fturn_find(&t, root, names[k], k % 2 ? NULL : "gzip"));
                        ck_assert_ptr_null(
                                m0__fturn_find(&t, root + 1000, names[k], k % 2 ? "gzip" : NULL));
                }
                ck_assert_ptr_null(m0__fturn_find(&t, root, "n", NULL));
                ck_assert_ptr_null(m0__fturn_find(&t, root, "n10", NULL));
        }
        m0__fturn_free(&t);
        ck_assert_int_eq(nfds(), fds);
}
END_TEST

/* SF1 (D251): the ETag and the HTTP-date are formatted by hand, as the printf formats did */
START_TEST(formats)
{
        char d[M0__HTTP_DATE_MAX];
        m0__http_date(784111777, d);
        ck_assert_str_eq(d, "Sun, 06 Nov 1994 08:49:37 GMT");
        m0__http_date(0, d);
        ck_assert_str_eq(d, "Thu, 01 Jan 1970 00:00:00 GMT");
        m0__http_date(253402300799, d);
        ck_assert_str_eq(d, "Fri, 31 Dec 9999 23:59:59 GMT");
        m0__http_date(253402300800, d); /* past 9999: the epoch, as before */
        ck_assert_str_eq(d, "Thu, 01 Jan 1970 00:00:00 GMT");
        char e[M0__ETAG_MAX];
        struct stat st = {.st_ino = 0xa74188, .st_size = 1024};
        st.st_mtim.tv_sec = 1796148473;
        st.st_mtim.tv_nsec = 123456789;
        m0__files_etag(&st, e);
        ck_assert_str_eq(e, "\"a74188-400-18ed338518624715\"");
        st = (struct stat){0};
        m0__files_etag(&st, e);
        ck_assert_str_eq(e, "\"0-0-0\"");
        st.st_ino = UINT64_MAX;
        st.st_size = INT64_MAX;
        st.st_mtim.tv_sec = 1;
        m0__files_etag(&st, e);
        ck_assert_str_eq(e, "\"ffffffffffffffff-7fffffffffffffff-3b9aca00\"");
}
END_TEST

/* SF2: media types from a mime.types file, the first naming winning, case-insensitive */
START_TEST(mime_types)
{
        put("mime.types", "# comment\n"
                          "text/html\t\thtml htm\n"
                          "text/javascript\tjs mjs\n"
                          "application/json json\n"
                          "application/ld+json jsonld\r\n"
                          "image/png png\n"
                          "image/svg+xml svg\n"
                          "application/x-other html png\n"
                          "  \n"
                          "notatype foo\n"
                          "application/wasm wasm");
        char p[512];
        snprintf(p, sizeof(p), "%s/mime.types", tmp);
        struct m0_mime m = {0};
        ck_assert_int_eq(m0__mime_load(&m, p), 0);
        static const struct {
                const char *name, *type;
        } t[] = {
                {"index.html", "text/html; charset=utf-8"},
                {"docs/A.HTM", "text/html; charset=utf-8"},
                {"app.js", "text/javascript; charset=utf-8"},
                {"m.mjs", "text/javascript; charset=utf-8"},
                {"d.json", "application/json; charset=utf-8"},
                {"d.jsonld", "application/ld+json; charset=utf-8"},
                {"logo.PNG", "image/png"},
                {"i.svg", "image/svg+xml"},
                {"x.wasm", "application/wasm"},
                {"x.foo", M0__MIME_DEFAULT},
                {"README", M0__MIME_DEFAULT},
                {"dir.html/README", M0__MIME_DEFAULT},
                {"trailing.", M0__MIME_DEFAULT},
                {"x.unknown", M0__MIME_DEFAULT},
        };
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
                ck_assert_str_eq(m0__mime_type(&m, t[i].name), t[i].type);
        m0__mime_free(&m);
        ck_assert_str_eq(m0__mime_type(&m, "index.html"), M0__MIME_DEFAULT);
        ck_assert_int_eq(m0__mime_load(&m, "/nonexistent-m0/mime.types"), -ENOENT);
        ck_assert_str_eq(m0__mime_type(&m, "index.html"), M0__MIME_DEFAULT);
        /* the system's, as the host reads it (media-types) */
        ck_assert_int_eq(m0__mime_load(&m, M0__MIME_TYPES), 0);
        ck_assert_str_eq(m0__mime_type(&m, "a.css"), "text/css; charset=utf-8");
        ck_assert_str_eq(m0__mime_type(&m, "a.js"), "text/javascript; charset=utf-8");
        ck_assert_str_eq(m0__mime_type(&m, "a.json"), "application/json; charset=utf-8");
        ck_assert_str_eq(m0__mime_type(&m, "a.png"), "image/png");
        ck_assert_str_eq(m0__mime_type(&m, "a.wasm"), "application/wasm");
        m0__mime_free(&m);
}
END_TEST

/* SF2: the exact validators of a file with a set mtime */
START_TEST(validators)
{
        set_mtime("root/hello.txt", 1700000000, 123456789);
        struct m0_file f;
        ck_assert_int_eq(m0__files_open(root, "hello.txt", &f), 0);
        char etag[M0__ETAG_MAX], want[M0__ETAG_MAX], date[M0__HTTP_DATE_MAX];
        m0__files_etag(&f.st, etag);
        snprintf(want, sizeof(want), "\"%llx-6-17979cfe3d85cd15\"",
                 (unsigned long long)f.st.st_ino);
        ck_assert_str_eq(etag, want);
        m0__http_date(f.st.st_mtim.tv_sec, date);
        ck_assert_str_eq(date, "Tue, 14 Nov 2023 22:13:20 GMT");
        m0__file_close(&f);
        m0__http_date(0, date);
        ck_assert_str_eq(date, "Thu, 01 Jan 1970 00:00:00 GMT");

        static const struct {
                const char *s;
                int64_t t; /* -1: refused */
        } d[] = {
                {"Sun, 06 Nov 1994 08:49:37 GMT", 784111777},
                {"Sunday, 06-Nov-94 08:49:37 GMT", 784111777},
                {"Sun Nov  6 08:49:37 1994", 784111777},
                {"Sun Nov 16 08:49:37 1994", 784975777},
                {"Tue, 14 Nov 2023 22:13:20 GMT", 1700000000},
                {"Sun, 06 Nov 1994 08:49:37 UTC", -1},
                {"Sun, 06 Nov 1994 08:49:37 GMT ", -1},
                {"Sun, 6 Nov 1994 08:49:37 GMT", -1},
                {"Sun, 31 Feb 1994 08:49:37 GMT", -1},
                {"Sun, 06 Nov 1994 24:00:00 GMT", -1},
                {"sun, 06 nov 1994 08:49:37 GMT", -1},
                {"", -1},
                {"1700000000", -1},
        };
        for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
                int64_t t = 42;
                int r = m0__http_date_parse(d[i].s, &t);
                ck_assert_msg(r == (d[i].t < 0 ? -EINVAL : 0), "'%s': %d", d[i].s, r);
                ck_assert_int_eq(t, d[i].t < 0 ? 42 : d[i].t);
        }
}
END_TEST

#define TAG "\"1a-6-17979cfe3d85cd15\""
#define T 1700000000
#define AT "Tue, 14 Nov 2023 22:13:20 GMT"
#define BEFORE "Tue, 14 Nov 2023 22:13:19 GMT"
#define AFTER "Tue, 14 Nov 2023 22:13:21 GMT"

/* SF2, RFC 9110 13.2.2: each condition, and their order */
START_TEST(conditionals)
{
        static const struct {
                struct m0_cond c;
                int want;
        } t[] = {
                {{0}, 0},
                /* If-None-Match: weak comparison, lists, '*' */
                {{.if_none_match = TAG}, 304},
                {{.if_none_match = "W/" TAG}, 304},
                {{.if_none_match = "\"x\", " TAG}, 304},
                {{.if_none_match = "\"x\" ,W/" TAG " , \"y\""}, 304},
                {{.if_none_match = ",," TAG}, 304},
                {{.if_none_match = "\"x\""}, 0},
                {{.if_none_match = "\"1a-6-17979cfe3d85cd1\""}, 0},
                {{.if_none_match = "*"}, 304},
                {{.if_none_match = " * "}, 304},
                {{.if_none_match = "*, " TAG}, 0},               /* not a list that parses */
                {{.if_none_match = "1a-6-17979cfe3d85cd15"}, 0}, /* unquoted */
                {{.if_none_match = TAG " junk"}, 0},
                {{.if_none_match = "w/" TAG}, 0},
                {{.if_none_match = ""}, 0},
                /* If-Modified-Since */
                {{.if_modified_since = AT}, 304},
                {{.if_modified_since = AFTER}, 304},
                {{.if_modified_since = BEFORE}, 0},
                {{.if_modified_since = "yesterday"}, 0},
                {{.if_modified_since = "Sunday, 14-Nov-23 22:13:20 GMT"}, 304},
                /* If-None-Match decides alone when both are sent */
                {{.if_none_match = "\"x\"", .if_modified_since = AT}, 0},
                {{.if_none_match = TAG, .if_modified_since = BEFORE}, 304},
                /* If-Match: strong comparison; a failure is 412 before anything else */
                {{.if_match = TAG}, 0},
                {{.if_match = "\"x\", " TAG}, 0},
                {{.if_match = "*"}, 0},
                {{.if_match = "W/" TAG}, 412},
                {{.if_match = "\"x\""}, 412},
                {{.if_match = "garbage"}, 412},
                {{.if_match = "\"x\"", .if_none_match = TAG}, 412},
                {{.if_match = TAG, .if_none_match = TAG}, 304},
                /* If-Unmodified-Since, and If-Match over it */
                {{.if_unmodified_since = AT}, 0},
                {{.if_unmodified_since = AFTER}, 0},
                {{.if_unmodified_since = BEFORE}, 412},
                {{.if_unmodified_since = "junk"}, 0},
                {{.if_match = TAG, .if_unmodified_since = BEFORE}, 0},
                {{.if_unmodified_since = BEFORE, .if_none_match = TAG}, 412},
                {{.if_unmodified_since = AT, .if_modified_since = AT}, 304},
        };
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                int r = m0__files_conditional(&t[i].c, TAG, T);
                ck_assert_msg(r == t[i].want, "case %zu: %d, not %d", i, r, t[i].want);
        }
        /* If-Range: a strong tag equal to ours, or a date equal to Last-Modified */
        ck_assert(m0__files_if_range(NULL, TAG, T));
        ck_assert(m0__files_if_range(TAG, TAG, T));
        ck_assert(m0__files_if_range(" " TAG " ", TAG, T));
        ck_assert(!m0__files_if_range("W/" TAG, TAG, T));
        ck_assert(!m0__files_if_range("\"x\"", TAG, T));
        ck_assert(!m0__files_if_range(TAG ", " TAG, TAG, T));
        ck_assert(m0__files_if_range(AT, TAG, T));
        ck_assert(!m0__files_if_range(AFTER, TAG, T));
        ck_assert(!m0__files_if_range(BEFORE, TAG, T));
        ck_assert(!m0__files_if_range("junk", TAG, T));
        ck_assert(!m0__files_if_range("", TAG, T));
}
END_TEST

/* SF2, RFC 9110 14: one range 206, none satisfiable 416, several or malformed 200 (D177) */
START_TEST(ranges)
{
        static const struct {
                const char *range;
                uint64_t size;
                int status;
                uint64_t start, len;
        } t[] = {
                {NULL, 100, 200, 0, 0},
                {"bytes=0-0", 100, 206, 0, 1},
                {"bytes=0-99", 100, 206, 0, 100},
                {"bytes=10-19", 100, 206, 10, 10},
                {"bytes=10-1000", 100, 206, 10, 90},
                {"bytes=10-", 100, 206, 10, 90},
                {"bytes=99-", 100, 206, 99, 1},
                {"bytes=-10", 100, 206, 90, 10},
                {"bytes=-100", 100, 206, 0, 100},
                {"bytes=-1000", 100, 206, 0, 100},
                {"BYTES = 5-6", 100, 206, 5, 2},
                {"bytes= 5-6 ", 100, 206, 5, 2},
                {"bytes=5-6,", 100, 206, 5, 2},
                {"bytes=, 5-6", 100, 206, 5, 2},
                {"bytes=100-", 100, 416, 0, 0}, /* past the end */
                {"bytes=100-200", 100, 416, 0, 0},
                {"bytes=-0", 100, 416, 0, 0},
                {"bytes=0-", 0, 416, 0, 0}, /* a zero-length file */
                {"bytes=-5", 0, 200, 0, 0},
                {"bytes=0-0,5-6", 100, 200, 0, 0}, /* several */
                {"bytes=0-0,200-300", 100, 200, 0, 0},
                {"bytes=200-300,400-", 100, 200, 0, 0},
                {"bytes=5-4", 100, 200, 0, 0}, /* malformed */
                {"bytes=5", 100, 200, 0, 0},
                {"bytes=-", 100, 200, 0, 0},
                {"bytes=a-b", 100, 200, 0, 0},
                {"bytes=1-2x", 100, 200, 0, 0},
                {"bytes=+1-2", 100, 200, 0, 0},
                {"bytes=1 - 2", 100, 200, 0, 0},
                {"bytes=", 100, 200, 0, 0},
                {"bytes", 100, 200, 0, 0},
                {"bytes 1-2", 100, 200, 0, 0},
                {"items=1-2", 100, 200, 0, 0},
                {"", 100, 200, 0, 0},
                /* numbers past 2^64 - 1 saturate */
                {"bytes=99999999999999999999999-", 100, 416, 0, 0},
                {"bytes=5-99999999999999999999999", 100, 206, 5, 95},
                {"bytes=-99999999999999999999999", 100, 206, 0, 100},
                {"bytes=18446744073709551615-", UINT64_MAX, 416, 0, 0},
                {"bytes=0-18446744073709551615", UINT64_MAX, 206, 0, UINT64_MAX},
                {"bytes=1-", UINT64_MAX, 206, 1, UINT64_MAX - 1},
        };
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                uint64_t start = 77, len = 77;
                int r = m0__files_range(t[i].range, t[i].size, &start, &len);
                ck_assert_msg(r == t[i].status, "'%s': %d", t[i].range ? t[i].range : "(null)", r);
                ck_assert_uint_eq(start, r == 206 ? t[i].start : 77);
                ck_assert_uint_eq(len, r == 206 ? t[i].len : 77);
        }
}
END_TEST

START_TEST(cache_control)
{
        static const struct {
                const char *name;
                bool fp;
        } t[] = {
                {"app.3f2a9c1b.js", true},
                {"assets/app.3f2a9c1b.js", true},
                {"app.min.3f2a9c1b0123456789abcdef.css", true},
                {"a.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.js", true},
                {"a.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0.js", false},
                {"app.3f2a9c1.js", false},  /* 7 digits */
                {"app.20231231.js", false}, /* a date: no letter */
                {"app.3F2A9C1B.js", false}, /* hashes are written lower case */
                {"app-3f2a9c1b.js", false},
                {"3f2a9c1b.js", false},  /* no stem */
                {"app.3f2a9c1b", false}, /* no extension after it */
                {"app.3f2a9c1b.", false},
                {"app.3f2a9c1g.js", false},
                {"a.3f2a9c1b.js/app.js", false},
                {"index.html", false},
        };
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                ck_assert_msg(m0__files_fingerprinted(t[i].name) == t[i].fp, "%s", t[i].name);
                ck_assert_str_eq(m0__files_cache_control(NULL, t[i].name),
                                 t[i].fp ? M0__CACHE_IMMUTABLE : M0__CACHE_REVALIDATE);
                ck_assert_str_eq(m0__files_cache_control("max-age=60", t[i].name), "max-age=60");
        }
}
END_TEST

/* SF3, SF4: Accept-Encoding's weights (thousandths) */
START_TEST(accept_encoding)
{
        static const struct {
                const char *field;
                int id, zstd, br, gzip; /* m0__accept_enc_q() of each */
                enum m0_coding choose;  /* m0__compress_choose() */
        } t[] = {
                {NULL, 1000, 0, 0, 0, M0_CODING_IDENTITY},
                {"", 1000, 0, 0, 0, M0_CODING_IDENTITY},
                {"gzip", 1000, 0, 0, 1000, M0_CODING_GZIP},
                {"gzip, deflate, br", 1000, 0, 1000, 1000, M0_CODING_BR},
                {"gzip, deflate, br, zstd", 1000, 1000, 1000, 1000, M0_CODING_ZSTD},
                {"br;q=0.9, gzip", 1000, 0, 900, 1000, M0_CODING_GZIP},
                {"br;q=1.0, gzip;q=1", 1000, 0, 1000, 1000, M0_CODING_BR},
                {"BR ; Q=0.5 ,GZip;q=0.25", 1000, 0, 500, 250, M0_CODING_BR},
                {"x-gzip", 1000, 0, 0, 1000, M0_CODING_GZIP},
                {"gzip;q=0", 1000, 0, 0, 0, M0_CODING_IDENTITY},
                {"gzip;q=0.000", 1000, 0, 0, 0, M0_CODING_IDENTITY},
                {"gzip;q=0.001", 1000, 0, 0, 1, M0_CODING_GZIP},
                {"*", 1000, 1000, 1000, 1000, M0_CODING_ZSTD},
                {"*;q=0.5, br", 1000, 500, 1000, 500, M0_CODING_BR},
                {"*;q=0", 0, 0, 0, 0, M0_CODING_IDENTITY},
                {"*;q=0, identity", 1000, 0, 0, 0, M0_CODING_IDENTITY},
                {"identity;q=0", 0, 0, 0, 0, M0_CODING_IDENTITY},
                {"identity;q=0, gzip", 0, 0, 0, 1000, M0_CODING_GZIP},
                {"gzip;q=0.5, identity", 1000, 0, 0, 500, M0_CODING_IDENTITY},
                {"gzip;q=0.5, identity;q=0.5", 500, 0, 0, 500, M0_CODING_GZIP},
                {"gzip;q=0.5", 1000, 0, 0, 500, M0_CODING_GZIP},
                {"gzip, gzip;q=0", 1000, 0, 0, 1000, M0_CODING_GZIP}, /* the first naming */
                /* qvalues that are not: the element is passed over */
                {"gzip;q=1.5", 1000, 0, 0, 0, M0_CODING_IDENTITY},
                {"gzip;q=0.5000", 1000, 0, 0, 0, M0_CODING_IDENTITY},
                {"gzip;q=", 1000, 0, 0, 0, M0_CODING_IDENTITY},
                {"gzip;q=-1, br", 1000, 0, 1000, 0, M0_CODING_BR},
                {"gzip;q=1.001", 1000, 0, 0, 0, M0_CODING_IDENTITY},
                {"gzip junk, br", 1000, 0, 1000, 0, M0_CODING_BR},
                {"gzip;level=9;q=0.3", 1000, 0, 0, 300, M0_CODING_GZIP},
                {"  gzip\t;\tq=0.3  ,  br  ", 1000, 0, 1000, 300, M0_CODING_BR},
                {"gzipx, brotli, zst", 1000, 0, 0, 0, M0_CODING_IDENTITY},
                {",,,", 1000, 0, 0, 0, M0_CODING_IDENTITY},
        };
        struct m0_compress_cfg cfg = {
                .min_bytes = 1024, .zstd_level = 3, .brotli_level = 5, .gzip_level = 6};
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                struct m0_accept_enc a;
                m0__accept_enc_parse(t[i].field, &a);
                const char *f = t[i].field ? t[i].field : "(null)";
                ck_assert_int_eq(a.present, t[i].field != NULL);
                ck_assert_msg(m0__accept_enc_q(&a, M0_CODING_IDENTITY) == t[i].id, "%s: id", f);
                ck_assert_msg(m0__accept_enc_q(&a, M0_CODING_ZSTD) == t[i].zstd, "%s: zstd", f);
                ck_assert_msg(m0__accept_enc_q(&a, M0_CODING_BR) == t[i].br, "%s: br", f);
                ck_assert_msg(m0__accept_enc_q(&a, M0_CODING_GZIP) == t[i].gzip, "%s: gzip", f);
                enum m0_coding c =
                        m0__compress_choose(&cfg, &a, "application/json", 2048, false, NULL);
                ck_assert_msg(c == t[i].choose, "%s: chose %d", f, c);
        }
        ck_assert_str_eq(m0__coding_name(M0_CODING_ZSTD), "zstd");
        ck_assert_str_eq(m0__coding_name(M0_CODING_BR), "br");
        ck_assert_str_eq(m0__coding_name(M0_CODING_GZIP), "gzip");
        ck_assert_ptr_null(m0__coding_name(M0_CODING_IDENTITY));
}
END_TEST

/* SF3: the best sibling the client accepts, regular, beneath the root, not stale */
START_TEST(siblings)
{
        put("root/app.js", "console.log('the app, as written, longer than its siblings');\n");
        put("root/app.js.gz", "gz-bytes-longest");
        put("root/app.js.br", "br-bytes");
        put("root/app.js.zst", "zst-bytes-long");
        put("root/docs/index.html.gz", "gz-index");
        put("root/hello.txt.gz", "stale");
        set_mtime("root/hello.txt.gz", 1000, 0);
        put("root/page.html", "<p>page</p>\n");
        mkd("root/page.html.br");                     /* a directory is no sibling */
        link_("../outside.txt", "root/page.html.gz"); /* nor a link out */
        put("root/page.html.zst", "zst-page");
        static const struct {
                const char *path, *ae;
                enum m0_coding coding;
                const char *body;
        } t[] = {
                {"app.js", "gzip, br, zstd", M0_CODING_BR, "br-bytes"}, /* smallest of equals */
                {"app.js", "gzip, zstd", M0_CODING_ZSTD, "zst-bytes-long"},
                {"app.js", "gzip", M0_CODING_GZIP, "gz-bytes-longest"},
                {"app.js", "gzip;q=1, br;q=0.5", M0_CODING_GZIP, "gz-bytes-longest"},
                {"app.js", "*", M0_CODING_BR, "br-bytes"},
                {"app.js", "*, br;q=0", M0_CODING_ZSTD, "zst-bytes-long"},
                {"app.js", "deflate", M0_CODING_IDENTITY, NULL},
                {"app.js", NULL, M0_CODING_IDENTITY, NULL},
                {"app.js", "gzip;q=0.5, identity", M0_CODING_IDENTITY, NULL},
                {"docs/", "gzip, br", M0_CODING_GZIP, "gz-index"},
                {"hello.txt", "gzip", M0_CODING_IDENTITY, "hello\n"}, /* older than the file */
                {"page.html", "gzip, br", M0_CODING_IDENTITY, "<p>page</p>\n"},
                {"page.html", "gzip, br, zstd", M0_CODING_ZSTD, "zst-page"},
        };
        int before = nfds();
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                struct m0_file f;
                ck_assert_int_eq(m0__files_open(root, t[i].path, &f), 0);
                const char *plain = t[i].body ? t[i].body : strdup(read_fd(f.fd));
                struct m0_accept_enc a;
                m0__accept_enc_parse(t[i].ae, &a);
                ck_assert_int_eq(m0__files_sibling(root, &a, &f), 0);
                ck_assert_msg(f.coding == (int)t[i].coding, "%s under %s: %d", t[i].path,
                              t[i].ae ? t[i].ae : "(null)", f.coding);
                ck_assert_str_eq(read_fd(f.fd), plain);
                ck_assert_uint_eq((uint64_t)f.st.st_size, strlen(plain));
                if (!t[i].body)
                        free((char *)plain);
                m0__file_close(&f);
        }
        ck_assert_int_eq(nfds(), before);
}
END_TEST

static void decode(enum m0_coding c, const struct m0_buf *z, const char *want, size_t n)
{
        char *out = malloc(n + 16);
        size_t got = n + 16;
        switch (c) {
        case M0_CODING_ZSTD:
                got = ZSTD_decompress(out, n + 16, z->data, z->len);
                ck_assert(!ZSTD_isError(got));
                break;
        case M0_CODING_BR:
                ck_assert_int_eq(BrotliDecoderDecompress(z->len, (const uint8_t *)z->data, &got,
                                                         (uint8_t *)out),
                                 BROTLI_DECODER_RESULT_SUCCESS);
                break;
        default: {
                z_stream s = {0};
                ck_assert_int_eq(inflateInit2(&s, 16 + MAX_WBITS), Z_OK); /* gzip only */
                s.next_in = (Bytef *)z->data;
                s.avail_in = (uInt)z->len;
                s.next_out = (Bytef *)out;
                s.avail_out = (uInt)(n + 16);
                ck_assert_int_eq(inflate(&s, Z_FINISH), Z_STREAM_END);
                got = s.total_out;
                inflateEnd(&s);
                ck_assert_uint_eq((unsigned char)z->data[0], 0x1f); /* a gzip member */
                ck_assert_uint_eq((unsigned char)z->data[1], 0x8b);
        }
        }
        ck_assert_bytes(out, got, want, n);
        free(out);
}

/* SF4: each coder round trips through its library's decoder, and only a smaller result is kept */
START_TEST(compression)
{
        struct m0_compress_cfg cfg = {
                .min_bytes = 1024, .zstd_level = 3, .brotli_level = 5, .gzip_level = 6};
        struct m0_buf json = {0};
        for (int i = 0; i < 200; i++)
                m0__buf_printf(&json, "%s{\"id\":%d,\"title\":\"todo number %d\",\"done\":%s}",
                               i ? "," : "[", i, i, i % 3 ? "false" : "true");
        m0__buf_append(&json, "]", 1);
        for (enum m0_coding c = M0_CODING_ZSTD; c <= M0_CODING_GZIP; c++) {
                struct m0_buf z = {0};
                m0__buf_append(&z, "kept", 4); /* appended after what the buffer holds */
                ck_assert_int_eq(m0__compress(&cfg, c, json.data, json.len, &z), 1);
                ck_assert_uint_lt(z.len, json.len / 4);
                ck_assert_bytes(z.data, 4, "kept", 4);
                struct m0_buf only = {.data = z.data + 4, .len = z.len - 4};
                decode(c, &only, json.data, json.len);
                m0__buf_free(&z);
        }
        /* incompressible bytes: no result smaller, so none kept */
        unsigned char rnd[4096];
        uint64_t x = 0x9e3779b97f4a7c15u;
        for (size_t i = 0; i < sizeof(rnd); i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                rnd[i] = (unsigned char)x;
        }
        for (enum m0_coding c = M0_CODING_ZSTD; c <= M0_CODING_GZIP; c++) {
                struct m0_buf z = {0};
                ck_assert_int_eq(m0__compress(&cfg, c, rnd, sizeof(rnd), &z), 0);
                ck_assert_uint_eq(z.len, 0);
                m0__buf_free(&z);
        }
        ck_assert_int_eq(m0__compress(&cfg, M0_CODING_IDENTITY, json.data, json.len, &json), 0);
        m0__buf_free(&json);
}
END_TEST

/* SF4: what is compressed at all (D182, D183) */
START_TEST(compress_choice)
{
        struct m0_compress_cfg cfg = {
                .min_bytes = 1024, .zstd_level = 3, .brotli_level = 5, .gzip_level = 6};
        struct m0_accept_enc a;
        m0__accept_enc_parse("gzip, br", &a);
        static const struct {
                const char *type;
                bool yes;
        } t[] = {
                {"application/json", true},
                {"application/json; charset=utf-8", true},
                {"Application/JSON", true},
                {"application/problem+json", true},
                {"text/html; charset=utf-8", true},
                {"text/css", true},
                {"text/plain", true},
                {"text/javascript", true},
                {"application/javascript", true},
                {"image/svg+xml", true},
                {"application/xml", true},
                {"application/atom+xml", true},
                {"application/wasm", true},
                {"text/event-stream", false},
                {"text/event-stream; charset=utf-8", false},
                {"image/png", false},
                {"application/octet-stream", false},
                {"application/zstd", false},
                {"video/mp4", false},
                {"text/", false},
                {"", false},
                {NULL, false},
        };
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                ck_assert_msg(m0__compressible(t[i].type) == t[i].yes, "%s", t[i].type);
                ck_assert_int_eq(m0__compress_choose(&cfg, &a, t[i].type, 4096, false, NULL),
                                 t[i].yes ? M0_CODING_BR : M0_CODING_IDENTITY);
        }
        const char *j = "application/json";
        ck_assert_int_eq(m0__compress_choose(&cfg, &a, j, 1023, false, NULL), M0_CODING_IDENTITY);
        ck_assert_int_eq(m0__compress_choose(&cfg, &a, j, 1024, false, NULL), M0_CODING_BR);
        ck_assert_int_eq(m0__compress_choose(&cfg, &a, j, 1 << 20, true, NULL),
                         M0_CODING_IDENTITY); /* the app's mark */
        ck_assert_int_eq(m0__compress_choose(&cfg, &a, j, 4096, false, "cross-site"),
                         M0_CODING_IDENTITY);
        ck_assert_int_eq(m0__compress_choose(&cfg, &a, j, 4096, false, "Same-Site"),
                         M0_CODING_IDENTITY);
        ck_assert_int_eq(m0__compress_choose(&cfg, &a, j, 4096, false, "same-origin"),
                         M0_CODING_BR);
        ck_assert_int_eq(m0__compress_choose(&cfg, &a, j, 4096, false, "none"), M0_CODING_BR);
        cfg.min_bytes = 0;
        ck_assert_int_eq(m0__compress_choose(&cfg, &a, j, 0, false, NULL), M0_CODING_BR);
}
END_TEST

static Suite *files_suite(void)
{
        Suite *s = suite_create("files");
        TCase *tc = tcase_create("files");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, refusals);
        tcase_add_test(tc, served);
        tcase_add_test(tc, mime_types);
        tcase_add_test(tc, validators);
        tcase_add_test(tc, siblings);
        tcase_add_test(tc, turn_cache);
        tcase_add_test(tc, turn_cache_many);
        suite_add_tcase(s, tc);
        TCase *pure = tcase_create("pure");
        tcase_add_test(pure, conditionals);
        tcase_add_test(pure, formats);
        tcase_add_test(pure, ranges);
        tcase_add_test(pure, cache_control);
        tcase_add_test(pure, accept_encoding);
        tcase_add_test(pure, compression);
        tcase_add_test(pure, compress_choice);
        suite_add_tcase(s, pure);
        return s;
}

int main(void)
{
        return unit_run(files_suite());
}
