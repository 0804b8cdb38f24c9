/* SPDX-License-Identifier: MIT */
/* test-tls.c: src/tls/ against OpenSSL's own client over socketpairs: the refusals of TL3, the
 * context of TL1 and TL5, SNI and two key types (TL2), the reload (TL4), the I/O of one connection
 * (LY2, TL6). Every key and certificate is made here, at run time. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tls.h"
#include "transport.h"
#include "unit.h"

#define DAY (24L * 3600)

static char dir[64];
static EVP_PKEY *ca_key, *ec_key, *ec_key2, *rsa_key;
static X509 *ca;

/* ---- certificates, made here ---- */

static void ext(X509 *x, X509 *issuer, int nid, const char *value)
{
        X509V3_CTX v;
        X509V3_set_ctx(&v, issuer, x, NULL, NULL, 0);
        X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v, nid, value);
        ck_assert_ptr_nonnull(e);
        ck_assert_int_eq(X509_add_ext(x, e, -1), 1);
        X509_EXTENSION_free(e);
}

/* A certificate for `cn` (and `san`, "DNS:a,DNS:b", or NULL) of `key`, issued by `issuer` (NULL:
 * self-signed), valid from now + from_s to now + to_s. */
static X509 *cert(const char *cn, const char *san, EVP_PKEY *key, X509 *issuer,
                  EVP_PKEY *issuer_key, long from_s, long to_s, bool is_ca)
{
        static long serial = 1;
        X509 *x = X509_new();
        ck_assert_ptr_nonnull(x);
        X509_set_version(x, 2);
        ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
        X509_gmtime_adj(X509_getm_notBefore(x), from_s);
        X509_gmtime_adj(X509_getm_notAfter(x), to_s);
        X509_set_pubkey(x, key);
        X509_NAME *n = X509_get_subject_name(x);
        X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
        X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : n);
        ext(x, issuer ? issuer : x, NID_subject_key_identifier, "hash");
        ext(x, issuer ? issuer : x, NID_authority_key_identifier, "keyid:always");
        ext(x, x, NID_basic_constraints, is_ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
        if (is_ca)
                ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign");
        if (san)
                ext(x, x, NID_subject_alt_name, san);
        ck_assert_int_gt(X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256()), 0);
        return x;
}

static X509 *leaf(const char *cn, EVP_PKEY *key)
{
        char san[300];
        snprintf(san, sizeof(san), "DNS:%s", cn);
        return cert(cn, san, key, ca, ca_key, -DAY, 90 * DAY, false);
}

static void path_of(char *out, size_t len, const char *name)
{
        snprintf(out, len, "%s/%s", dir, name);
}

/* Write the certificates (leaf first), NULL-terminated, as PEM to dir/name. */
static void write_crt(const char *name, X509 *first, ...)
{
        char p[256];
        path_of(p, sizeof(p), name);
        FILE *f = fopen(p, "we");
        ck_assert_ptr_nonnull(f);
        va_list ap;
        va_start(ap, first);
        for (X509 *x = first; x; x = va_arg(ap, X509 *))
                ck_assert_int_eq(PEM_write_X509(f, x), 1);
        va_end(ap);
        ck_assert_int_eq(fclose(f), 0);
}

static void write_key(const char *name, EVP_PKEY *k)
{
        char p[256];
        path_of(p, sizeof(p), name);
        FILE *f = fopen(p, "we");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL), 1);
        ck_assert_int_eq(fclose(f), 0);
}

static void write_text(const char *name, const char *text)
{
        char p[256];
        path_of(p, sizeof(p), name);
        FILE *f = fopen(p, "we");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        ck_assert_int_eq(fclose(f), 0);
}

static void unchecked_setup(void)
{
        ca_key = EVP_EC_gen("P-256");
        ec_key = EVP_EC_gen("P-256");
        ec_key2 = EVP_EC_gen("P-384");
        rsa_key = EVP_RSA_gen(2048);
        ca = cert("m0 test CA", NULL, ca_key, NULL, NULL, -DAY, 365 * DAY, true);
}

static void unchecked_teardown(void)
{
        X509_free(ca);
        EVP_PKEY_free(ca_key);
        EVP_PKEY_free(ec_key);
        EVP_PKEY_free(ec_key2);
        EVP_PKEY_free(rsa_key);
}

static void setup(void)
{
        snprintf(dir, sizeof(dir), "/tmp/m0-test-tls-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
}

/* ---- the context ---- */

static char err[1024], fix[512];

/* M0_TLS_CERT/M0_TLS_KEY as dir/crt and dir/key. */
static int tls_env(struct m0_tls **t, const char *crt, const char *key)
{
        char c[256], k[256];
        path_of(c, sizeof(c), crt);
        path_of(k, sizeof(k), key);
        struct m0_tls_opts o = {.cert = c, .key = k, .session_cache = 100};
        return m0__tls_new(t, &o, err, sizeof(err), fix, sizeof(fix));
}

static int tls_cred(struct m0_tls **t)
{
        struct m0_tls_opts o = {.cred_dir = dir, .session_cache = 100};
        return m0__tls_new(t, &o, err, sizeof(err), fix, sizeof(fix));
}

/* The refusal's text must be exactly `want`, with dir/ in place of the "%s". */
static void err_is(const char *want_fmt, const char *name)
{
        char p[256], want[1024];
        path_of(p, sizeof(p), name);
        snprintf(want, sizeof(want), want_fmt, p);
        ck_assert_str_eq(err, want);
}

/* ---- a client of OpenSSL's own over a socketpair ---- */

struct link {
        int fd[2]; /* [0] the server's, [1] the client's */
        struct m0_tls_conn *s;
        SSL *c;
        SSL_CTX *cctx;
        bool client_failed;
};

/* A client context trusting the test CA, TLS up to `max` (0: any). */
static SSL_CTX *client_ctx(int max)
{
        SSL_CTX *c = SSL_CTX_new(TLS_client_method());
        ck_assert_ptr_nonnull(c);
        X509_STORE_add_cert(SSL_CTX_get_cert_store(c), ca);
        SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
        if (max) {
                SSL_CTX_set_min_proto_version(c, 0);
                SSL_CTX_set_max_proto_version(c, max);
        }
        if (max && max < TLS1_2_VERSION)
                ck_assert_int_eq(SSL_CTX_set_cipher_list(c, "DEFAULT:@SECLEVEL=0"), 1);
        return c;
}

static void link_open(struct link *l, struct m0_tls *t, SSL_CTX *cctx, const char *sni,
                      SSL_SESSION *resume)
{
        memset(l, 0, sizeof(*l));
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, l->fd),
                         0);
        ck_assert_int_eq(m0__tls_conn_new(&l->s, t, l->fd[0]), 0);
        l->c = SSL_new(cctx);
        ck_assert_ptr_nonnull(l->c);
        SSL_set_fd(l->c, l->fd[1]);
        SSL_set_connect_state(l->c);
        if (sni) {
                SSL_set_tlsext_host_name(l->c, sni);
                SSL_set1_host(l->c, sni);
        }
        static const unsigned char alpn[] = "\x08http/1.1";
        SSL_set_alpn_protos(l->c, alpn, sizeof(alpn) - 1);
        if (resume)
                SSL_set_session(l->c, resume);
}

/* Both sides send close_notify, as clients do: OpenSSL drops a session closed without it. */
static void link_close(struct link *l)
{
        if (SSL_is_init_finished(l->c))
                (void)SSL_shutdown(l->c);
        (void)m0__tls_shutdown(l->s);
        m0__tls_conn_free(l->s);
        SSL_free(l->c);
        close(l->fd[0]);
        close(l->fd[1]);
}

/* Drive both handshakes, each non-blocking, until both end. The server's result. */
static int drive(struct link *l)
{
        int sr = -EAGAIN;
        bool cdone = false;
        for (int i = 0; i < 1000 && (sr == -EAGAIN || !cdone); i++) {
                if (sr == -EAGAIN) {
                        sr = m0__tls_handshake(l->s);
                        if (sr == -EAGAIN)
                                ck_assert_int_ne(m0__tls_want(l->s), 0);
                }
                if (!cdone) {
                        int r = SSL_do_handshake(l->c);
                        int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(l->c, r);
                        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                                cdone = true;
                                l->client_failed = r != 1;
                        }
                }
                if (sr != -EAGAIN && sr != 0)
                        break; /* the client has read the server's alert */
        }
        ERR_clear_error();
        return sr;
}

/* Client reads exactly n bytes while the server sends nothing more. */
static void client_read(struct link *l, char *buf, size_t n)
{
        size_t got = 0;
        for (int i = 0; got < n && i < 100000; i++) {
                size_t k = 0;
                if (SSL_read_ex(l->c, buf + got, n - got, &k) == 1)
                        got += k;
                else
                        ck_assert_int_eq(SSL_get_error(l->c, 0), SSL_ERROR_WANT_READ);
        }
        ck_assert_uint_eq(got, n);
}

static void client_write(struct link *l, const char *s)
{
        size_t w = 0;
        ck_assert_int_eq(SSL_write_ex(l->c, s, strlen(s), &w), 1);
        ck_assert_uint_eq(w, strlen(s));
}

/* The server reads exactly the bytes of `want`. */
static void server_read_is(struct link *l, const char *want)
{
        char buf[256];
        ssize_t r;
        int i = 0;
        while ((r = m0__tls_read(l->s, buf, sizeof(buf))) == -EAGAIN && i++ < 100)
                ck_assert_int_eq(m0__tls_want(l->s), M0_TLS_WANT_READ);
        ck_assert_bytes(buf, r < 0 ? 0 : (size_t)r, want, strlen(want));
}

/* One exchange each way; the client takes the session tickets on the way. */
static void ping(struct link *l)
{
        client_write(l, "ping");
        server_read_is(l, "ping");
        struct iovec iov[2] = {{.iov_base = "po", .iov_len = 2}, {.iov_base = "ng", .iov_len = 2}};
        ck_assert_int_eq(m0__tls_writev(l->s, iov, 2), 4);
        char buf[4];
        client_read(l, buf, 4);
        ck_assert_bytes(buf, 4, "pong", 4);
}

static void subject_of_peer(struct link *l, char *out, size_t len)
{
        X509 *x = SSL_get0_peer_certificate(l->c);
        ck_assert_ptr_nonnull(x);
        X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, out, (int)len);
}

/* The usual pair: an ECDSA leaf for a.test issued by the test CA, with M0_TLS_CERT/KEY. */
static struct m0_tls *usual(void)
{
        X509 *x = leaf("a.test", ec_key);
        write_crt("a.crt", x, NULL);
        write_key("a.key", ec_key);
        X509_free(x);
        struct m0_tls *t = NULL;
        ck_assert_msg(tls_env(&t, "a.crt", "a.key") == 0, "%s (%s)", err, fix);
        return t;
}

/* ---- TL3: the refusals, each naming the file and the fix ---- */

START_TEST(TL3_missing_files)
{
        struct m0_tls *t = NULL;
        ck_assert_int_eq(tls_env(&t, "none.crt", "none.key"), -EINVAL);
        err_is("M0_TLS_CERT=%s: no such file", "none.crt");
        ck_assert_str_eq(fix, "set M0_TLS_CERT to a file holding the certificate in PEM, leaf "
                              "first, then its chain");
        ck_assert_ptr_null(t);
        X509 *x = leaf("a.test", ec_key);
        write_crt("a.crt", x, NULL);
        X509_free(x);
        ck_assert_int_eq(tls_env(&t, "a.crt", "none.key"), -EINVAL);
        err_is("M0_TLS_KEY=%s: no such file", "none.key");
        ck_assert_str_eq(fix, "set M0_TLS_KEY to a file holding its private key, PEM, unencrypted");
        /* one without the other */
        struct m0_tls_opts o = {.cert = "/x.crt"};
        ck_assert_int_eq(m0__tls_new(&t, &o, err, sizeof(err), fix, sizeof(fix)), -EINVAL);
        ck_assert_str_eq(err, "M0_TLS_CERT is set and M0_TLS_KEY is not");
        /* under systemd: the credential's name, and LoadCredential= in the fix */
        ck_assert_int_eq(tls_cred(&t), -EINVAL);
        err_is("credential tls.crt (%s): no such file; it is the default certificate", "tls.crt");
        write_key("tls.key", ec_key);
        ck_assert_int_eq(tls_cred(&t), -EINVAL);
        err_is("credential tls.crt (%s): no such file", "tls.crt");
        ck_assert_str_eq(fix, "give LoadCredential=tls.crt:<file> the certificate in PEM, leaf "
                              "first, then its chain");
}
END_TEST

START_TEST(TL3_unreadable)
{
        struct m0_tls *t = usual();
        m0__tls_free(t);
        char k[256];
        path_of(k, sizeof(k), "a.key");
        ck_assert_int_eq(chmod(k, 0), 0);
        ck_assert_int_eq(chmod(dir, 0755), 0);
        /* root reads any file: the load runs as nobody, in a child */
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
                        _exit(2);
                int r = tls_env(&t, "a.crt", "a.key");
                char want[512];
                snprintf(want, sizeof(want), "M0_TLS_KEY=%s: cannot be read (permission denied)",
                         k);
                _exit(r == -EINVAL && !strcmp(err, want) ? 0 : 1);
        }
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
}
END_TEST

START_TEST(TL3_malformed)
{
        struct m0_tls *t = NULL;
        EVP_PKEY *k = ec_key;
        write_text("bad.crt", "hello\n");
        write_key("a.key", k);
        ck_assert_int_eq(tls_env(&t, "bad.crt", "a.key"), -EINVAL);
        err_is("M0_TLS_CERT=%s is not a PEM certificate chain (no start line)", "bad.crt");
        /* a broken second certificate */
        X509 *x = leaf("a.test", ec_key);
        write_crt("a.crt", x, NULL);
        X509_free(x);
        char p[256];
        path_of(p, sizeof(p), "a.crt");
        FILE *f = fopen(p, "ae");
        fputs("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", f);
        fclose(f);
        ck_assert_int_eq(tls_env(&t, "a.crt", "a.key"), -EINVAL);
        ck_assert_msg(strstr(err, "is not a PEM certificate chain (a certificate after the first "
                                  "is broken: "),
                      "%s", err);
        /* a key that is not one, and a key with a passphrase: refused, never prompted for */
        x = leaf("a.test", ec_key);
        write_crt("a.crt", x, NULL);
        X509_free(x);
        /* Armour around four bytes that are no key (split so that no scan of the tree takes
         * this file for one that holds a key). */
        write_text("bad.key", "-----BEGIN "
                              "PRIVATE KEY-----\nAAAA\n-----END "
                              "PRIVATE KEY-----\n");
        ck_assert_int_eq(tls_env(&t, "a.crt", "bad.key"), -EINVAL);
        ck_assert_msg(!strncmp(err, "M0_TLS_KEY=", 11) &&
                              strstr(err, "/bad.key is not a PEM private key m0 can read ("),
                      "%s", err);
        path_of(p, sizeof(p), "enc.key");
        f = fopen(p, "we");
        ck_assert_int_eq(
                PEM_write_PrivateKey(f, ec_key, EVP_aes_128_cbc(), NULL, 0, NULL, (void *)"secret"),
                1);
        fclose(f);
        ck_assert_int_eq(tls_env(&t, "a.crt", "enc.key"), -EINVAL);
        ck_assert_msg(strstr(err, "/enc.key is not a PEM private key m0 can read ("), "%s", err);
        ck_assert_ptr_null(t);
}
END_TEST

START_TEST(TL3_key_does_not_match)
{
        struct m0_tls *t = NULL;
        X509 *x = leaf("a.test", ec_key);
        write_crt("a.crt", x, NULL);
        X509_free(x);
        write_key("other.key", ec_key2);
        ck_assert_int_eq(tls_env(&t, "a.crt", "other.key"), -EINVAL);
        char c[256], want[700];
        path_of(c, sizeof(c), "a.crt");
        snprintf(want, sizeof(want),
                 "M0_TLS_KEY=%s/other.key does not match the certificate of "
                 "M0_TLS_CERT=%s",
                 dir, c);
        ck_assert_str_eq(err, want);
        ck_assert_str_eq(fix, "give the key the certificate was made for, or the certificate of "
                              "this key");
        /* the key is never in a message: not even its first bytes */
        ck_assert_ptr_null(strstr(err, "PRIVATE"));
}
END_TEST

START_TEST(TL3_expired)
{
        struct m0_tls *t = NULL;
        X509 *x = cert("old.test", "DNS:old.test", ec_key, ca, ca_key, -10 * DAY, -DAY, false);
        write_crt("old.crt", x, NULL);
        write_key("old.key", ec_key);
        char when[32];
        time_t na = 0;
        struct tm tm;
        ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm);
        na = timegm(&tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&na, &tm));
        X509_free(x);
        ck_assert_int_eq(tls_env(&t, "old.crt", "old.key"), -EINVAL);
        char want[600];
        snprintf(want, sizeof(want), "M0_TLS_CERT=%s/old.crt expired at %s (subject CN=old.test)",
                 dir, when);
        ck_assert_str_eq(err, want);
        ck_assert_str_eq(fix, "renew the certificate and put the new one in its place");
}
END_TEST

START_TEST(TL3_not_yet_valid)
{
        struct m0_tls *t = NULL;
        X509 *x = cert("new.test", "DNS:new.test", ec_key, ca, ca_key, DAY, 10 * DAY, false);
        write_crt("new.crt", x, NULL);
        write_key("new.key", ec_key);
        char when[32];
        struct tm tm;
        ASN1_TIME_to_tm(X509_get0_notBefore(x), &tm);
        time_t nb = timegm(&tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&nb, &tm));
        X509_free(x);
        ck_assert_int_eq(tls_env(&t, "new.crt", "new.key"), -EINVAL);
        char want[600];
        snprintf(want, sizeof(want),
                 "M0_TLS_CERT=%s/new.crt is not valid before %s (subject CN=new.test)", dir, when);
        ck_assert_str_eq(err, want);
        ck_assert_str_eq(fix, "put a certificate valid now in its place, or check this machine's "
                              "clock");
}
END_TEST

START_TEST(TL3_broken_chain)
{
        struct m0_tls *t = NULL;
        EVP_PKEY *ik = EVP_EC_gen("P-256");
        X509 *inter = cert("m0 intermediate", NULL, ik, ca, ca_key, -DAY, 300 * DAY, true);
        X509 *x = cert("a.test", "DNS:a.test", ec_key, inter, ik, -DAY, 30 * DAY, false);
        /* leaf, then its issuer: fine */
        write_crt("good.crt", x, inter, NULL);
        write_key("a.key", ec_key);
        ck_assert_msg(tls_env(&t, "good.crt", "a.key") == 0, "%s", err);
        m0__tls_free(t);
        t = NULL;
        /* leaf, then a certificate that did not issue it */
        write_crt("bad.crt", x, ca, NULL);
        ck_assert_int_eq(tls_env(&t, "bad.crt", "a.key"), -EINVAL);
        char want[700];
        snprintf(want, sizeof(want),
                 "M0_TLS_CERT=%s/bad.crt: certificate 2 of the chain (CN=m0 test CA) did not "
                 "issue the one before it (CN=a.test, issued by CN=m0 intermediate)",
                 dir);
        ck_assert_str_eq(err, want);
        ck_assert_str_eq(fix, "put the leaf first, then the certificate that issued it, then its "
                              "issuer, in that order");
        /* in the wrong order */
        write_crt("order.crt", x, ca, inter, NULL);
        ck_assert_int_eq(tls_env(&t, "order.crt", "a.key"), -EINVAL);
        X509_free(x);
        X509_free(inter);
        EVP_PKEY_free(ik);
}
END_TEST

/* ---- TL1: a handshake, the protocol's settings ---- */

START_TEST(TL1_handshake_alpn_and_io)
{
        struct m0_tls *t = usual();
        SSL_CTX *cc = client_ctx(0);
        struct link l;
        link_open(&l, t, cc, "a.test", NULL);
        ck_assert_int_eq(drive(&l), 0);
        ck_assert(!l.client_failed);
        ck_assert_str_eq(m0__tls_version(l.s), "TLSv1.3");
        ck_assert_str_eq(m0__tls_alpn(l.s), "http/1.1");
        ck_assert_str_eq(m0__tls_server_name(l.s), "a.test");
        ck_assert(!m0__tls_resumed(l.s));
        ck_assert_int_eq(SSL_get_verify_result(l.c), X509_V_OK);
        ping(&l);
        /* small pieces gathered, a big one written whole: every byte arrives, in order */
        static char big[100000];
        for (size_t i = 0; i < sizeof(big); i++)
                big[i] = (char)('a' + i % 26);
        struct iovec iov[4] = {{"HTTP/1.1 200 OK\r\n", 17},
                               {"Content-Length: 100000\r\n\r\n", 26},
                               {big, sizeof(big)},
                               {"!", 1}};
        size_t total = 17 + 26 + sizeof(big) + 1, sent = 0, got = 0;
        char *in = malloc(total), *want = malloc(total);
        memcpy(want, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n", 43);
        memcpy(want + 43, big, sizeof(big));
        want[total - 1] = '!';
        for (int i = 0; (sent < total || got < total) && i < 10000; i++) {
                if (sent < total) {
                        /* what is left of the four pieces */
                        struct iovec rest[4];
                        int n = 0;
                        size_t skip = sent;
                        for (int k = 0; k < 4; k++) {
                                if (skip >= iov[k].iov_len) {
                                        skip -= iov[k].iov_len;
                                        continue;
                                }
                                rest[n].iov_base = (char *)iov[k].iov_base + skip;
                                rest[n++].iov_len = iov[k].iov_len - skip;
                                skip = 0;
                        }
                        ssize_t w = m0__tls_writev(l.s, rest, n);
                        if (w == -EAGAIN) {
                                ck_assert_int_eq(m0__tls_want(l.s), M0_TLS_WANT_WRITE);
                        } else {
                                ck_assert_int_gt(w, 0);
                                sent += (size_t)w;
                        }
                }
                size_t k = 0;
                while (got < total && SSL_read_ex(l.c, in + got, total - got, &k) == 1)
                        got += k;
        }
        ck_assert_uint_eq(sent, total);
        ck_assert_bytes(in, got, want, total);
        free(in);
        free(want);
        /* close_notify: the client reads the end */
        ck_assert_int_eq(m0__tls_shutdown(l.s), 0);
        char b;
        size_t k;
        ck_assert_int_eq(SSL_read_ex(l.c, &b, 1, &k), 0);
        ck_assert_int_eq(SSL_get_error(l.c, 0), SSL_ERROR_ZERO_RETURN);
        /* and the client's own close reads as 0 on the server */
        SSL_shutdown(l.c);
        ck_assert_int_eq(m0__tls_read(l.s, &b, 1), 0);
        link_close(&l);
        SSL_CTX_free(cc);
        m0__tls_free(t);
}
END_TEST

START_TEST(TL1_tls11_refused)
{
        struct m0_tls *t = usual();
        SSL_CTX *cc = client_ctx(TLS1_1_VERSION);
        struct link l;
        link_open(&l, t, cc, "a.test", NULL);
        ck_assert_int_eq(drive(&l), -EPROTO);
        ck_assert_str_eq(m0__tls_reason(l.s), "unsupported protocol");
        ck_assert(l.client_failed);
        link_close(&l);
        SSL_CTX_free(cc);
        /* TLS 1.2 is served, with an ECDHE AEAD suite: the server's first, AES-128-GCM, though
         * the client lists AES-256-GCM first (D145) */
        cc = client_ctx(TLS1_2_VERSION);
        link_open(&l, t, cc, "a.test", NULL);
        ck_assert_int_eq(drive(&l), 0);
        ck_assert_str_eq(m0__tls_version(l.s), "TLSv1.2");
        ck_assert_str_eq(SSL_get_cipher_name(l.c), "ECDHE-ECDSA-AES128-GCM-SHA256");
        ping(&l);
        link_close(&l);
        /* a CBC suite is not among the server's */
        ck_assert_int_eq(SSL_CTX_set_cipher_list(cc, "ECDHE-ECDSA-AES128-SHA"), 1);
        link_open(&l, t, cc, "a.test", NULL);
        ck_assert_int_eq(drive(&l), -EPROTO);
        ck_assert_str_eq(m0__tls_reason(l.s), "no shared cipher");
        link_close(&l);
        SSL_CTX_free(cc);
        m0__tls_free(t);
}
END_TEST

START_TEST(TL6_garbage_fails_at_once)
{
        struct m0_tls *t = usual();
        int fd[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fd), 0);
        struct m0_tls_conn *c;
        ck_assert_int_eq(m0__tls_conn_new(&c, t, fd[0]), 0);
        /* nothing yet: a want, not an error */
        ck_assert_int_eq(m0__tls_handshake(c), -EAGAIN);
        ck_assert_int_eq(m0__tls_want(c), M0_TLS_WANT_READ);
        ck_assert_int_eq(write(fd[1], "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 27), 27);
        ck_assert_int_eq(m0__tls_handshake(c), -EPROTO);
        ck_assert_str_eq(m0__tls_reason(c), "http request");
        m0__tls_conn_free(c);
        close(fd[0]);
        close(fd[1]);
        /* bytes that are no record at all */
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fd), 0);
        ck_assert_int_eq(m0__tls_conn_new(&c, t, fd[0]), 0);
        ck_assert_int_eq(write(fd[1], "\x16\x09\x09\x00\x05hello", 10), 10);
        ck_assert_int_eq(m0__tls_handshake(c), -EPROTO);
        ck_assert_str_eq(m0__tls_reason(c), "wrong version number");
        m0__tls_conn_free(c);
        close(fd[0]);
        /* the peer gone in the middle: the read that took its 6 bytes came back short, so the
         * socket was empty then and the handshake wants more; the end is read at the next
         * readiness, which the end of file is (D246) */
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fd), 0);
        ck_assert_int_eq(m0__tls_conn_new(&c, t, fd[0]), 0);
        ck_assert_int_eq(write(fd[1], "\x16\x03\x01\x02\x00\x01", 6), 6);
        close(fd[1]);
        ck_assert_int_eq(m0__tls_handshake(c), -EAGAIN);
        ck_assert_int_eq(m0__tls_want(c), M0_TLS_WANT_READ);
        ck_assert_int_eq(m0__tls_handshake(c), -ECONNRESET);
        m0__tls_conn_free(c);
        close(fd[0]);
        m0__tls_free(t);
}
END_TEST

START_TEST(TL1_alpn_h2_behind_the_flag)
{
        X509 *x = leaf("a.test", ec_key);
        write_crt("a.crt", x, NULL);
        write_key("a.key", ec_key);
        X509_free(x);
        char c[256], k[256];
        path_of(c, sizeof(c), "a.crt");
        path_of(k, sizeof(k), "a.key");
        static const unsigned char both[] = "\x02h2\x08http/1.1", h2[] = "\x02h2";
        for (int on = 0; on < 2; on++) {
                struct m0_tls_opts o = {.cert = c, .key = k, .alpn_h2 = on};
                struct m0_tls *t;
                ck_assert_int_eq(m0__tls_new(&t, &o, err, sizeof(err), fix, sizeof(fix)), 0);
                SSL_CTX *cc = client_ctx(0);
                struct link l;
                link_open(&l, t, cc, "a.test", NULL);
                SSL_set_alpn_protos(l.c, both, sizeof(both) - 1);
                ck_assert_int_eq(drive(&l), 0);
                ck_assert_str_eq(m0__tls_alpn(l.s), on ? "h2" : "http/1.1");
                link_close(&l);
                /* a client that speaks only h2 to a server that does not: refused */
                link_open(&l, t, cc, "a.test", NULL);
                SSL_set_alpn_protos(l.c, h2, sizeof(h2) - 1);
                ck_assert_int_eq(drive(&l), on ? 0 : -EPROTO);
                link_close(&l);
                /* no ALPN at all: served, none chosen */
                link_open(&l, t, cc, "a.test", NULL);
                SSL_set_alpn_protos(l.c, NULL, 0);
                ck_assert_int_eq(drive(&l), 0);
                ck_assert_str_eq(m0__tls_alpn(l.s), "");
                link_close(&l);
                SSL_CTX_free(cc);
                m0__tls_free(t);
        }
}
END_TEST

/* ---- TL2: two key types, SNI ---- */

START_TEST(TL2_ecdsa_and_rsa_together)
{
        X509 *e = leaf("both.test", ec_key), *r = leaf("both.test", rsa_key);
        write_crt("tls.crt", e, NULL);
        write_key("tls.key", ec_key);
        write_crt("tls.rsa.crt", r, NULL);
        write_key("tls.rsa.key", rsa_key);
        X509_free(e);
        X509_free(r);
        struct m0_tls *t = NULL;
        ck_assert_msg(tls_cred(&t) == 0, "%s (%s)", err, fix);
        SSL_CTX *cc = client_ctx(0);
        struct link l;
        /* a client that takes both: ECDSA */
        link_open(&l, t, cc, "both.test", NULL);
        ck_assert_int_eq(drive(&l), 0);
        ck_assert_int_eq(EVP_PKEY_get_base_id(X509_get0_pubkey(SSL_get0_peer_certificate(l.c))),
                         EVP_PKEY_EC);
        link_close(&l);
        /* a client that verifies RSA signatures only: RSA */
        ck_assert_int_eq(SSL_CTX_set1_sigalgs_list(cc, "rsa_pss_rsae_sha256:RSA+SHA256"), 1);
        link_open(&l, t, cc, "both.test", NULL);
        ck_assert_int_eq(drive(&l), 0);
        ck_assert_int_eq(EVP_PKEY_get_base_id(X509_get0_pubkey(SSL_get0_peer_certificate(l.c))),
                         EVP_PKEY_RSA);
        link_close(&l);
        SSL_CTX_free(cc);
        m0__tls_free(t);
        /* two RSA certificates for one name: refused */
        r = leaf("both.test", rsa_key);
        write_crt("tls.crt", r, NULL);
        write_key("tls.key", rsa_key);
        X509_free(r);
        ck_assert_int_eq(tls_cred(&t), -EINVAL);
        char want[700];
        snprintf(want, sizeof(want),
                 "%s/tls.crt and %s/tls.rsa.crt both hold RSA keys for the same name", dir, dir);
        ck_assert_str_eq(err, want);
        /* and an ECDSA key in the .rsa. files */
        e = leaf("both.test", ec_key);
        write_crt("tls.rsa.crt", e, NULL);
        write_key("tls.rsa.key", ec_key);
        X509_free(e);
        ck_assert_int_eq(tls_cred(&t), -EINVAL);
        snprintf(want, sizeof(want),
                 "credential tls.rsa.key (%s/tls.rsa.key) holds a ECDSA P-256 key, and the .rsa. "
                 "files are the RSA certificate's",
                 dir);
        ck_assert_str_eq(err, want);
}
END_TEST

static void doctor_line(void *ud, const struct m0_tls_cert *c)
{
        char(*lines)[1024] = ud;
        size_t i = 0;
        while (lines[i][0])
                i++;
        m0__tls_describe(c, (time_t)(c->not_after - 30 * DAY), lines[i], sizeof(lines[i]));
}

START_TEST(TL2_sni_chooses_by_name)
{
        X509 *d = leaf("default.test", ec_key), *a = leaf("a.test", ec_key2);
        write_crt("tls.crt", d, NULL);
        write_key("tls.key", ec_key);
        write_crt("tls.a.test.crt", a, ca, NULL);
        write_key("tls.a.test.key", ec_key2);
        X509_free(d);
        X509_free(a);
        struct m0_tls *t = NULL;
        ck_assert_msg(tls_cred(&t) == 0, "%s (%s)", err, fix);
        SSL_CTX *cc = client_ctx(0);
        const struct {
                const char *sni, *cn;
        } cases[] = {
                {"a.test", "a.test"},
                {"A.TEST", "a.test"},
                {"other.test", "default.test"},
                {NULL, "default.test"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct link l;
                link_open(&l, t, cc, cases[i].sni, NULL);
                if (!cases[i].sni || strcmp(cases[i].sni, cases[i].cn))
                        SSL_set_verify(l.c, SSL_VERIFY_NONE, NULL);
                ck_assert_int_eq(drive(&l), 0);
                char cn[64], srv[128];
                subject_of_peer(&l, cn, sizeof(cn));
                ck_assert_str_eq(cn, cases[i].cn);
                m0__tls_conn_subject(l.s, srv, sizeof(srv));
                char want[80];
                snprintf(want, sizeof(want), "CN=%s", cases[i].cn);
                ck_assert_str_eq(srv, want);
                ping(&l);
                link_close(&l);
        }
        /* the doctor's lines: the default first, then by name; no key */
        char lines[4][1024] = {{0}};
        m0__tls_each_cert(t, doctor_line, lines);
        char want[1200];
        snprintf(want, sizeof(want),
                 "%s/tls.crt (default): subject CN=default.test; names "
                 "DNS:default.test; issuer CN=m0 test CA; key ECDSA P-256, 256 bits; expires ",
                 dir);
        ck_assert_msg(!strncmp(lines[0], want, strlen(want)), "%s", lines[0]);
        ck_assert_msg(strstr(lines[0], " (in 30 days); chain of 0"), "%s", lines[0]);
        snprintf(want, sizeof(want),
                 "%s/tls.a.test.crt (a.test): subject CN=a.test; names "
                 "DNS:a.test; issuer CN=m0 test CA; key ECDSA P-384, 384 bits; expires ",
                 dir);
        ck_assert_msg(!strncmp(lines[1], want, strlen(want)), "%s", lines[1]);
        ck_assert_msg(strstr(lines[1], "; chain of 1"), "%s", lines[1]);
        ck_assert_str_eq(lines[2], "");
        SSL_CTX_free(cc);
        m0__tls_free(t);
        /* a name that is not one */
        write_key("tls.a_b.key", ec_key2);
        ck_assert_int_eq(tls_cred(&t), -EINVAL);
        ck_assert_str_eq(err, "credential tls.a_b.key: 'a_b' is not a server name");
}
END_TEST

/* ---- TL3: the expiry warning ---- */

START_TEST(TL3_expiry_warning)
{
        X509 *x = cert("soon.test", "DNS:soon.test", ec_key, ca, ca_key, -DAY, 3 * DAY, false);
        write_crt("soon.crt", x, NULL);
        write_key("soon.key", ec_key);
        X509_free(x);
        struct m0_tls *t = NULL;
        ck_assert_int_eq(tls_env(&t, "soon.crt", "soon.key"), 0);
        time_t now = time(NULL);
        ck_assert_int_eq(m0__tls_warn_expiring(t, now, 14), 1);
        ck_assert_int_eq(m0__tls_warn_expiring(t, now, 2), 0);
        ck_assert_int_eq(m0__tls_warn_expiring(t, now, 0), 0);
        m0__tls_free(t);
}
END_TEST

/* ---- TL5: resumption ---- */

/* A full handshake and an exchange; the session the client keeps. */
static SSL_SESSION *first_session(struct m0_tls *t, SSL_CTX *cc)
{
        struct link l;
        link_open(&l, t, cc, "a.test", NULL);
        ck_assert_int_eq(drive(&l), 0);
        ck_assert(!m0__tls_resumed(l.s));
        ping(&l);
        SSL_SESSION *s = SSL_get1_session(l.c);
        ck_assert_ptr_nonnull(s);
        link_close(&l);
        return s;
}

static bool resumes(struct m0_tls *t, SSL_CTX *cc, SSL_SESSION *s)
{
        struct link l;
        link_open(&l, t, cc, "a.test", s);
        ck_assert_int_eq(drive(&l), 0);
        ping(&l);
        bool r = m0__tls_resumed(l.s);
        ck_assert_int_eq(r, SSL_session_reused(l.c));
        link_close(&l);
        return r;
}

START_TEST(TL5_resumption_tickets_and_cache)
{
        struct m0_tls *t = usual();
        for (int v = 0; v < 3; v++) {
                /* TLS 1.3 tickets, TLS 1.2 tickets, TLS 1.2 by session id (the cache) */
                SSL_CTX *cc = client_ctx(v == 0 ? 0 : TLS1_2_VERSION);
                if (v == 2)
                        SSL_CTX_set_options(cc, SSL_OP_NO_TICKET);
                SSL_SESSION *s = first_session(t, cc);
                ck_assert_msg(resumes(t, cc, s), "case %d", v);
                SSL_SESSION_free(s);
                SSL_CTX_free(cc);
        }
        /* a ticket outlives one rotation of the keys, not two */
        SSL_CTX *cc = client_ctx(0);
        SSL_SESSION *s = first_session(t, cc);
        m0__tls_rotate_keys(t);
        ck_assert(resumes(t, cc, s));
        m0__tls_rotate_keys(t);
        ck_assert(!resumes(t, cc, s));
        SSL_SESSION_free(s);
        /* no early data is offered in a ticket */
        s = first_session(t, cc);
        ck_assert_uint_eq(SSL_SESSION_get_max_early_data(s), 0);
        SSL_SESSION_free(s);
        SSL_CTX_free(cc);
        m0__tls_free(t);
}
END_TEST

/* ---- TL4: reload ---- */

START_TEST(TL4_reload_swaps_for_new_handshakes)
{
        struct m0_tls *t = usual();
        SSL_CTX *cc = client_ctx(0);
        SSL_SESSION *s = first_session(t, cc);
        struct link old;
        link_open(&old, t, cc, "a.test", NULL);
        ck_assert_int_eq(drive(&old), 0);
        /* a renewed certificate: another key, another subject */
        X509 *x = cert("a.test", "DNS:a.test,DNS:renewed.test", ec_key2, ca, ca_key, -DAY, 90 * DAY,
                       false);
        write_crt("a.crt", x, NULL);
        write_key("a.key", ec_key2);
        X509_free(x);
        ck_assert_msg(m0__tls_reload(t, err, sizeof(err), fix, sizeof(fix)) == 0, "%s", err);
        /* the open connection keeps working, with its certificate */
        ping(&old);
        ck_assert_int_eq(EVP_PKEY_get_bits(X509_get0_pubkey(SSL_get0_peer_certificate(old.c))),
                         256);
        /* a new one gets the new certificate */
        struct link l;
        link_open(&l, t, cc, "a.test", NULL);
        ck_assert_int_eq(drive(&l), 0);
        ck_assert_int_eq(EVP_PKEY_get_bits(X509_get0_pubkey(SSL_get0_peer_certificate(l.c))), 384);
        link_close(&l);
        /* a ticket from before the reload still resumes */
        ck_assert(resumes(t, cc, s));
        SSL_SESSION_free(s);
        /* a bad set is refused and the last good one stays */
        write_text("a.crt", "not a certificate\n");
        ck_assert_int_eq(m0__tls_reload(t, err, sizeof(err), fix, sizeof(fix)), -EINVAL);
        err_is("M0_TLS_CERT=%s is not a PEM certificate chain (no start line)", "a.crt");
        link_open(&l, t, cc, "a.test", NULL);
        ck_assert_int_eq(drive(&l), 0);
        ck_assert_int_eq(EVP_PKEY_get_bits(X509_get0_pubkey(SSL_get0_peer_certificate(l.c))), 384);
        ping(&l);
        link_close(&l);
        ping(&old);
        link_close(&old);
        SSL_CTX_free(cc);
        m0__tls_free(t);
}
END_TEST

/* ---- TL5 across threads: handshakes on several loops while the keys rotate and a reload
 * swaps the set (the TSan build runs this) ---- */

struct worker {
        struct m0_tls *t;
        int resumed;
};

static void *worker(void *arg)
{
        struct worker *w = arg;
        SSL_CTX *cc = client_ctx(0);
        SSL_SESSION *s = first_session(w->t, cc);
        for (int i = 0; i < 20; i++) {
                struct link l;
                link_open(&l, w->t, cc, "a.test", s);
                ck_assert_int_eq(drive(&l), 0);
                ping(&l);
                w->resumed += m0__tls_resumed(l.s);
                SSL_SESSION *n = SSL_get1_session(l.c);
                link_close(&l);
                SSL_SESSION_free(s);
                s = n;
        }
        SSL_SESSION_free(s);
        SSL_CTX_free(cc);
        return NULL;
}

START_TEST(TL5_loops_share_one_context)
{
        struct m0_tls *t = usual();
        struct worker w[3] = {{t, 0}, {t, 0}, {t, 0}};
        pthread_t th[3];
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(pthread_create(&th[i], NULL, worker, &w[i]), 0);
        for (int i = 0; i < 10; i++) {
                m0__tls_rotate_keys(t);
                ck_assert_int_eq(m0__tls_reload(t, err, sizeof(err), fix, sizeof(fix)), 0);
        }
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        /* each took its last ticket to the next handshake: most resumed */
        for (int i = 0; i < 3; i++)
                ck_assert_int_ge(w[i].resumed, 10);
        m0__tls_free(t);
}
END_TEST

/* ---- the TLS transport (LY2): pending plaintext, sendfile through records, close_notify ---- */

/* The server's handshake through the transport's table, the client's beside it. */
static void transport_handshake(struct m0_transport *tr, SSL *c)
{
        int sr = -EAGAIN;
        bool cdone = false;
        for (int i = 0; i < 1000 && (sr == -EAGAIN || !cdone); i++) {
                if (sr == -EAGAIN) {
                        sr = tr->ops->handshake(tr);
                        if (sr == -EAGAIN)
                                ck_assert_uint_ne(tr->want, 0);
                }
                if (!cdone) {
                        int r = SSL_do_handshake(c);
                        int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(c, r);
                        cdone = e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE;
                }
        }
        ck_assert_int_eq(sr, 0);
        ck_assert(cdone);
}

START_TEST(TL7_transport_pending_sendfile_close_notify)
{
        struct m0_tls *t = usual();
        SSL_CTX *cc = client_ctx(0);
        int fd[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fd), 0);
        struct m0_transport tr;
        ck_assert_int_eq(m0__tls_transport_open(&tr, t, fd[0]), 0);
        ck_assert_ptr_eq(tr.ops, &m0__transport_tls);
        SSL *c = SSL_new(cc);
        SSL_set_fd(c, fd[1]);
        SSL_set_connect_state(c);
        SSL_set_tlsext_host_name(c, "a.test");
        transport_handshake(&tr, c);
        int resumed = -1;
        ck_assert_str_eq(tr.ops->session(&tr, &resumed), "TLSv1.3");
        ck_assert_int_eq(resumed, 0);

        /* One record of 11 bytes read 4 at a time: the rest waits inside OpenSSL, where no
         * readiness of the fd says so, and pending does. */
        size_t w = 0;
        ck_assert_int_eq(SSL_write_ex(c, "hello world", 11, &w), 1);
        char buf[64];
        ssize_t n;
        int i = 0;
        while ((n = tr.ops->read(&tr, buf, 4)) == -EAGAIN && i++ < 100)
                ck_assert_uint_eq(tr.want, M0_WANT_READ);
        ck_assert_int_eq(n, 4);
        ck_assert_bytes(buf, 4, "hell", 4);
        ck_assert_uint_eq(m0__transport_pending(&tr), 7);
        ck_assert_int_eq(tr.ops->read(&tr, buf, sizeof(buf)), 7);
        ck_assert_bytes(buf, 7, "o world", 7);
        ck_assert_uint_eq(m0__transport_pending(&tr), 0);
        /* Two short records waiting on the socket: one read() takes both, and one read of the
         * transport both records' plaintext (D246). */
        ck_assert_int_eq(SSL_write_ex(c, "abc", 3, &w), 1);
        ck_assert_int_eq(SSL_write_ex(c, "defg", 4, &w), 1);
        ck_assert_int_eq(tr.ops->read(&tr, buf, sizeof(buf)), 7);
        ck_assert_bytes(buf, 7, "abcdefg", 7);
        ck_assert_uint_eq(m0__transport_pending(&tr), 0);
        ck_assert_int_eq(tr.ops->read(&tr, buf, sizeof(buf)), -EAGAIN);
        ck_assert_uint_eq(tr.want, M0_WANT_READ);
        /* One write of a full record and 5 bytes more: the full record does not end it, so one
         * read takes both records. */
        static char big[16384 + 5], back[sizeof(big) + 64];
        for (size_t k = 0; k < sizeof(big); k++)
                big[k] = (char)('a' + k % 26);
        ck_assert_int_eq(SSL_write_ex(c, big, sizeof(big), &w), 1);
        ck_assert_uint_eq(w, sizeof(big));
        i = 0;
        while ((n = tr.ops->read(&tr, back, sizeof(back))) == -EAGAIN && i++ < 100)
                ;
        ck_assert_int_eq(n, (ssize_t)sizeof(big));
        ck_assert_int_eq(memcmp(back, big, sizeof(big)), 0);

        /* sendfile: a file's 40,000 bytes from offset 100 arrive whole, in order, as records. */
        char path[128];
        path_of(path, sizeof(path), "file.bin");
        int f = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(f, 0);
        static char data[40100], in[40000];
        for (size_t k = 0; k < sizeof(data); k++)
                data[k] = (char)(k * 7 % 251);
        ck_assert_int_eq(write(f, data, sizeof(data)), (ssize_t)sizeof(data));
        off_t off = 100;
        size_t got = 0;
        for (i = 0; (off < (off_t)sizeof(data) || got < sizeof(in)) && i < 10000; i++) {
                if (off < (off_t)sizeof(data)) {
                        ssize_t s = tr.ops->sendfile(&tr, f, &off, sizeof(data) - (size_t)off);
                        if (s == -EAGAIN)
                                ck_assert_uint_eq(tr.want, M0_WANT_WRITE);
                        else
                                ck_assert_int_gt(s, 0);
                }
                size_t k = 0;
                while (got < sizeof(in) && SSL_read_ex(c, in + got, sizeof(in) - got, &k) == 1)
                        got += k;
        }
        ck_assert_int_eq(off, (off_t)sizeof(data));
        ck_assert_bytes(in, got, data + 100, sizeof(in));
        close(f);

        /* Part of a record's header: nothing pending, and a read wants more. */
        ck_assert_int_eq(write(fd[1], "\x17\x03\x03", 3), 3);
        ck_assert_uint_eq(m0__transport_pending(&tr), 0);
        ck_assert_int_eq(tr.ops->read(&tr, buf, sizeof(buf)), -EAGAIN);
        ck_assert_uint_eq(m0__transport_pending(&tr), 0);

        /* The close sends close_notify: the client reads the session's end, not an error. */
        tr.ops->close(&tr);
        ck_assert_int_eq(tr.fd, -1);
        char b;
        size_t k;
        ck_assert_int_eq(SSL_read_ex(c, &b, 1, &k), 0);
        ck_assert_int_eq(SSL_get_error(c, 0), SSL_ERROR_ZERO_RETURN);
        SSL_free(c);
        close(fd[1]);
        SSL_CTX_free(cc);
        m0__tls_free(t);
}
END_TEST

/* The bytes of one record of `text` as the client seals it (its writes go to `mem`). */
static size_t sealed(SSL *c, BIO *mem, const char *text, unsigned char *out, size_t cap)
{
        size_t w = 0;
        ck_assert_int_eq(SSL_write_ex(c, text, strlen(text), &w), 1);
        int n = BIO_read(mem, out, (int)cap);
        ck_assert_int_gt(n, 0);
        ck_assert_int_eq(BIO_pending(mem), 0);
        return (size_t)n;
}

static int unread(int fd)
{
        int n = -1;
        ck_assert_int_eq(ioctl(fd, FIONREAD, &n), 0);
        return n;
}

/*
 * D246: OpenSSL reads from m0's buffer, which one read() of the socket fills. What that read took
 * beyond the call's need is held where pending() sees it, and is read without the socket: the
 * request behind the handshake's last flight, records behind a small buffer, across another
 * connection's reads on the same thread. A record a byte at a time is nothing until its last
 * byte; the end of file behind a record comes after it.
 */
START_TEST(TL7_one_read_of_the_socket_and_what_it_holds)
{
        struct m0_tls *t = usual();
        SSL_CTX *cc = client_ctx(0);
        struct link l, l2;
        link_open(&l, t, cc, "a.test", NULL);
        /* The client's Finished and its first request in one segment: the handshake takes the
         * Finished; the request's record waits in m0's buffer, seen by pending with the socket
         * empty, and the read takes it without the socket. */
        ck_assert_int_eq(m0__tls_handshake(l.s), -EAGAIN);
        ck_assert_int_eq(SSL_do_handshake(l.c), -1);
        ck_assert_int_eq(SSL_get_error(l.c, -1), SSL_ERROR_WANT_READ);
        ck_assert_int_eq(m0__tls_handshake(l.s), -EAGAIN);
        ck_assert_int_eq(m0__tls_want(l.s), M0_TLS_WANT_READ);
        ck_assert_int_eq(SSL_do_handshake(l.c), 1);
        client_write(&l, "GET / HTTP/1.1\r\n\r\n");
        ck_assert_int_eq(m0__tls_handshake(l.s), 0);
        ck_assert_int_eq(unread(l.fd[0]), 0);
        ck_assert_uint_gt(m0__tls_pending(l.s), 18);
        char buf[64];
        ck_assert_int_eq(m0__tls_read(l.s, buf, sizeof(buf)), 18);
        ck_assert_bytes(buf, 18, "GET / HTTP/1.1\r\n\r\n", 18);
        ck_assert_uint_eq(m0__tls_pending(l.s), 0);
        ck_assert_int_eq(m0__tls_read(l.s, buf, sizeof(buf)), -EAGAIN);

        /* From here the client's records are sealed into memory and written as we choose. */
        BIO *mem = BIO_new(BIO_s_mem());
        ck_assert_ptr_nonnull(mem);
        SSL_set0_wbio(l.c, mem);
        unsigned char seg[512];
        size_t len = 0;
        len += sealed(l.c, mem, "alpha-", seg + len, sizeof(seg) - len);
        len += sealed(l.c, mem, "bravo-", seg + len, sizeof(seg) - len);
        len += sealed(l.c, mem, "charlie", seg + len, sizeof(seg) - len);
        ck_assert_int_eq(write(l.fd[1], seg, len), (ssize_t)len);
        /* Three records in one segment, read 5 bytes at a time: the first read empties the
         * socket, and the rest is pending, never behind a readiness of the fd. */
        ck_assert_int_eq(m0__tls_read(l.s, buf, 5), 5);
        ck_assert_bytes(buf, 5, "alpha", 5);
        ck_assert_int_eq(unread(l.fd[0]), 0);
        size_t held = m0__tls_pending(l.s);
        ck_assert_uint_gt(held, 1 + 13);
        /* Another connection of the same thread reads (its handshake and a ping): the first
         * one's bytes move out of the thread's buffer and stay whole. */
        link_open(&l2, t, cc, "a.test", NULL);
        ck_assert_int_eq(drive(&l2), 0);
        ping(&l2);
        ck_assert_uint_eq(m0__tls_pending(l.s), held);
        char got[32];
        size_t n = 0;
        static const int steps[] = {5, 5, 4};
        for (int i = 0; i < 3; i++) {
                ck_assert_uint_gt(m0__tls_pending(l.s), 0);
                ssize_t r = m0__tls_read(l.s, got + n, 5);
                ck_assert_int_eq(r, steps[i]);
                n += (size_t)r;
        }
        ck_assert_bytes(got, n, "-bravo-charlie", 14);
        ck_assert_uint_eq(m0__tls_pending(l.s), 0);
        ck_assert_int_eq(m0__tls_read(l.s, buf, sizeof(buf)), -EAGAIN);
        ck_assert_int_eq(m0__tls_want(l.s), M0_TLS_WANT_READ);

        /* A record a byte at a time: a want and nothing pending until its last byte. */
        len = sealed(l.c, mem, "trickle", seg, sizeof(seg));
        for (size_t i = 0; i + 1 < len; i++) {
                ck_assert_int_eq(write(l.fd[1], seg + i, 1), 1);
                ck_assert_int_eq(m0__tls_read(l.s, buf, sizeof(buf)), -EAGAIN);
                ck_assert_int_eq(m0__tls_want(l.s), M0_TLS_WANT_READ);
                ck_assert_uint_eq(m0__tls_pending(l.s), 0);
        }
        ck_assert_int_eq(write(l.fd[1], seg + len - 1, 1), 1);
        ck_assert_int_eq(m0__tls_read(l.s, buf, sizeof(buf)), 7);
        ck_assert_bytes(buf, 7, "trickle", 7);

        /* A record and the end of file behind it: the record, then the end. */
        len = sealed(l.c, mem, "bye", seg, sizeof(seg));
        ck_assert_int_eq(write(l.fd[1], seg, len), (ssize_t)len);
        ck_assert_int_eq(shutdown(l.fd[1], SHUT_WR), 0);
        ck_assert_int_eq(m0__tls_read(l.s, buf, sizeof(buf)), 3);
        ck_assert_bytes(buf, 3, "bye", 3);
        ck_assert_int_eq(m0__tls_read(l.s, buf, sizeof(buf)), 0);
        ck_assert_uint_eq(m0__tls_pending(l.s), 0);

        link_close(&l2);
        m0__tls_conn_free(l.s);
        SSL_free(l.c);
        close(l.fd[0]);
        close(l.fd[1]);
        SSL_CTX_free(cc);
        m0__tls_free(t);
}
END_TEST

/* A connection freed while the thread's buffer holds its bytes gives the buffer back: the next
 * connection reads into it (D246). */
START_TEST(TL7_freed_with_bytes_held)
{
        struct m0_tls *t = usual();
        SSL_CTX *cc = client_ctx(0);
        struct link l, l2;
        link_open(&l, t, cc, "a.test", NULL);
        ck_assert_int_eq(drive(&l), 0);
        client_write(&l, "one");
        client_write(&l, "two");
        char buf[8];
        int i = 0;
        ssize_t r;
        while ((r = m0__tls_read(l.s, buf, 2)) == -EAGAIN && i++ < 100)
                ;
        ck_assert_int_eq(r, 2);
        ck_assert_uint_gt(m0__tls_pending(l.s), 1);
        m0__tls_conn_free(l.s);
        SSL_free(l.c);
        close(l.fd[0]);
        close(l.fd[1]);
        link_open(&l2, t, cc, "a.test", NULL);
        ck_assert_int_eq(drive(&l2), 0);
        ping(&l2);
        link_close(&l2);
        SSL_CTX_free(cc);
        m0__tls_free(t);
}
END_TEST

/* TLS 1.2 renegotiation is refused (no_renegotiation) and the session goes on (D246: its
 * ClientHello read from m0's buffer, the alert written through the socket). */
START_TEST(TL1_renegotiation_refused)
{
        struct m0_tls *t = usual();
        SSL_CTX *cc = client_ctx(TLS1_2_VERSION);
        struct link l;
        link_open(&l, t, cc, "a.test", NULL);
        ck_assert_int_eq(drive(&l), 0);
        ck_assert_str_eq(m0__tls_version(l.s), "TLSv1.2");
        ck_assert_int_eq(SSL_renegotiate(l.c), 1);
        ck_assert_int_eq(SSL_do_handshake(l.c), -1);
        ck_assert_int_eq(SSL_get_error(l.c, -1), SSL_ERROR_WANT_READ);
        char buf[8];
        ck_assert_int_eq(m0__tls_read(l.s, buf, sizeof(buf)), -EAGAIN);
        ck_assert_int_eq(m0__tls_want(l.s), M0_TLS_WANT_READ);
        ck_assert_int_eq(SSL_do_handshake(l.c), -1);
        ck_assert_int_eq(SSL_get_error(l.c, -1), SSL_ERROR_SSL);
        ERR_clear_error();
        link_close(&l);
        SSL_CTX_free(cc);
        m0__tls_free(t);
}
END_TEST

static Suite *suite(void)
{
        Suite *s = suite_create("tls");
        TCase *tc = tcase_create("tls");
        tcase_add_unchecked_fixture(tc, unchecked_setup, unchecked_teardown);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, TL3_missing_files);
        tcase_add_test(tc, TL3_unreadable);
        tcase_add_test(tc, TL3_malformed);
        tcase_add_test(tc, TL3_key_does_not_match);
        tcase_add_test(tc, TL3_expired);
        tcase_add_test(tc, TL3_not_yet_valid);
        tcase_add_test(tc, TL3_broken_chain);
        tcase_add_test(tc, TL3_expiry_warning);
        tcase_add_test(tc, TL1_handshake_alpn_and_io);
        tcase_add_test(tc, TL1_tls11_refused);
        tcase_add_test(tc, TL1_alpn_h2_behind_the_flag);
        tcase_add_test(tc, TL6_garbage_fails_at_once);
        tcase_add_test(tc, TL2_ecdsa_and_rsa_together);
        tcase_add_test(tc, TL2_sni_chooses_by_name);
        tcase_add_test(tc, TL5_resumption_tickets_and_cache);
        tcase_add_test(tc, TL4_reload_swaps_for_new_handshakes);
        tcase_add_test(tc, TL5_loops_share_one_context);
        tcase_add_test(tc, TL7_transport_pending_sendfile_close_notify);
        tcase_add_test(tc, TL7_one_read_of_the_socket_and_what_it_holds);
        tcase_add_test(tc, TL7_freed_with_bytes_held);
        tcase_add_test(tc, TL1_renegotiation_refused);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(suite());
}
