/* SPDX-License-Identifier: MIT */
/* certs.c: the certificates and keys TLS serves, found, read and checked (TL2, TL3, D161, D162). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "tls-private.h"
#include "util.h"

#define FILE_MAX (1u << 20) /* a PEM file past 1 MiB is not a certificate chain */

/* One pair to load: its two files and how a refusal names each. */
struct pair {
        char crt[512], key[512];
        char name[256]; /* the server name; "" for the default */
        bool rsa_slot;
        bool cred; /* from the credentials directory, else M0_TLS_CERT/M0_TLS_KEY */
};

static int failf(char *err, size_t err_len, char *fix, size_t fix_len, const char *fixs,
                 const char *fmt, ...) M0_PRINTF(6, 7);
static int failf(char *err, size_t err_len, char *fix, size_t fix_len, const char *fixs,
                 const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
        snprintf(fix, fix_len, "%s", fixs);
        return -EINVAL;
}

/* How a refusal names a file: "M0_TLS_CERT=/etc/x.pem" or "credential tls.crt (/run/…)". */
static void shown(const struct pair *p, bool key, char *out, size_t len)
{
        const char *path = key ? p->key : p->crt;
        if (p->cred) {
                const char *base = strrchr(path, '/');
                snprintf(out, len, "credential %.100s (%.500s)", base ? base + 1 : path, path);
        } else {
                snprintf(out, len, "%s=%.500s", key ? "M0_TLS_KEY" : "M0_TLS_CERT", path);
        }
}

/* The fix for a file of `p`. */
static void fix_for(const struct pair *p, bool key, char *out, size_t len)
{
        const char *what = key ? "its private key, PEM, unencrypted"
                               : "the certificate in PEM, leaf first, then its chain";
        if (p->cred) {
                const char *base = strrchr(key ? p->key : p->crt, '/');
                snprintf(out, len, "give LoadCredential=%s:<file> %s", base ? base + 1 : "", what);
        } else {
                snprintf(out, len, "set %s to a file holding %s",
                         key ? "M0_TLS_KEY" : "M0_TLS_CERT", what);
        }
}

/* Read a whole file, at most FILE_MAX bytes. 0 with *ret and *ret_n set (free it with OPENSSL_clear_free),
 * or -errno. */
static int slurp(const char *path, char **ret, size_t *ret_n)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)FILE_MAX) {
                int r = S_ISDIR(st.st_mode) ? -EISDIR : -EFBIG;
                close(fd);
                return r;
        }
        size_t cap = (size_t)st.st_size + 1, n = 0;
        char *buf = OPENSSL_malloc(cap);
        if (!buf) {
                close(fd);
                return -ENOMEM;
        }
        for (;;) {
                ssize_t k = read(fd, buf + n, cap - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        int r = -errno;
                        close(fd);
                        OPENSSL_clear_free(buf, cap);
                        return r;
                }
                if (k == 0 || (n += (size_t)k) == cap)
                        break;
        }
        close(fd);
        *ret = buf;
        *ret_n = n;
        return 0;
}

static const char *slurp_why(int r)
{
        switch (r) {
        case -ENOENT: return "no such file";
        case -EACCES: return "cannot be read (permission denied)";
        case -EISDIR: return "is a directory";
        case -EFBIG: return "is not a regular file of at most 1 MiB";
        default: return strerror(-r);
        }
}

/* A passphrase callback that gives none: an encrypted key is refused, never prompted for. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
        return 0;
}

void m0__tls_name_text(const X509_NAME *n, char *out, size_t len)
{
        out[0] = '\0';
        BIO *b = BIO_new(BIO_s_mem());
        if (!b)
                return;
        if (X509_NAME_print_ex(b, n, 0, XN_FLAG_RFC2253) >= 0) {
                char *p;
                long k = BIO_get_mem_data(b, &p);
                snprintf(out, len, "%.*s", (int)(k < 0 ? 0 : k), p);
        }
        BIO_free(b);
}

static void sans_text(X509 *x, char *out, size_t len)
{
        out[0] = '\0';
        GENERAL_NAMES *g = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
        size_t o = 0;
        for (int i = 0; g && i < sk_GENERAL_NAME_num(g); i++) {
                const GENERAL_NAME *n = sk_GENERAL_NAME_value(g, i);
                char one[300] = "";
                if (n->type == GEN_DNS)
                        snprintf(one, sizeof(one), "DNS:%.*s", ASN1_STRING_length(n->d.dNSName),
                                 (const char *)ASN1_STRING_get0_data(n->d.dNSName));
                else if (n->type == GEN_IPADD) {
                        char *ip = OPENSSL_buf2hexstr(ASN1_STRING_get0_data(n->d.iPAddress),
                                                      ASN1_STRING_length(n->d.iPAddress));
                        const unsigned char *a = ASN1_STRING_get0_data(n->d.iPAddress);
                        if (ASN1_STRING_length(n->d.iPAddress) == 4)
                                snprintf(one, sizeof(one), "IP:%u.%u.%u.%u", a[0], a[1], a[2],
                                         a[3]);
                        else
                                snprintf(one, sizeof(one), "IP:%s", ip ? ip : "?");
                        OPENSSL_free(ip);
                }
                if (one[0] && o < len)
                        o += (size_t)snprintf(out + o, len - o, "%s%s", o ? ", " : "", one);
        }
        GENERAL_NAMES_free(g);
}

static void key_text(EVP_PKEY *k, char *out, size_t len)
{
        switch (EVP_PKEY_get_base_id(k)) {
        case EVP_PKEY_EC: {
                char group[64] = "";
                size_t gl = 0;
                (void)EVP_PKEY_get_utf8_string_param(k, OSSL_PKEY_PARAM_GROUP_NAME, group,
                                                     sizeof(group), &gl);
                int nid = OBJ_txt2nid(group);
                const char *nist = nid != NID_undef ? EC_curve_nid2nist(nid) : NULL;
                snprintf(out, len, "ECDSA %.20s", nist ? nist : group);
                break;
        }
        case EVP_PKEY_RSA: snprintf(out, len, "RSA"); break;
        case EVP_PKEY_ED25519: snprintf(out, len, "Ed25519"); break;
        default: snprintf(out, len, "%s", OBJ_nid2sn(EVP_PKEY_get_base_id(k))); break;
        }
}

static int64_t asn1_seconds(const ASN1_TIME *t)
{
        struct tm tm;
        if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
                return 0;
        return (int64_t)timegm(&tm);
}

/* The reason of the first queued OpenSSL error, then the queue cleared. */
static const char *ossl_why(void)
{
        const char *r = ERR_reason_error_string(ERR_peek_error());
        ERR_clear_error();
        return r ? r : "unknown reason";
}

/* One file of a pair, read whole, with how a refusal names it and the fix. */
struct pem {
        char who[700], fix[300];
        char *buf;
        size_t n;
        BIO *bio; /* NULL short of memory */
};

static int pem_open(struct pem *m, const struct pair *p, bool key, char *err, size_t err_len,
                    char *fix, size_t fix_len)
{
        shown(p, key, m->who, sizeof(m->who));
        fix_for(p, key, m->fix, sizeof(m->fix));
        int r = slurp(key ? p->key : p->crt, &m->buf, &m->n);
        if (r < 0)
                return failf(err, err_len, fix, fix_len, m->fix, "%s: %s", m->who, slurp_why(r));
        m->bio = BIO_new_mem_buf(m->buf, (int)m->n);
        ERR_clear_error();
        return 0;
}

/* The file's bytes are wiped: a key's stay in no freed memory. */
static void pem_close(struct pem *m)
{
        BIO_free(m->bio);
        OPENSSL_clear_free(m->buf, m->n + 1);
}

/* The certificate file: the leaf, its chain, and the checks on them. */
static int load_crt(struct m0_tls_loaded *l, const struct pair *p, char *err, size_t err_len,
                    char *fix, size_t fix_len)
{
        struct pem m;
        int r = pem_open(&m, p, false, err, err_len, fix, fix_len);
        if (r < 0)
                return r;
        char who[sizeof(m.who)], f[sizeof(m.fix)];
        memcpy(who, m.who, sizeof(who));
        memcpy(f, m.fix, sizeof(f));
        BIO *b = m.bio;
        l->leaf = b ? PEM_read_bio_X509(b, NULL, no_passphrase, NULL) : NULL;
        l->chain = sk_X509_new_null();
        X509 *x;
        while (l->leaf && l->chain && (x = PEM_read_bio_X509(b, NULL, no_passphrase, NULL)))
                if (!sk_X509_push(l->chain, x))
                        X509_free(x);
        /* The loop ends at the end of the file (no start line: fine) or at a broken block. */
        unsigned long e = ERR_peek_last_error();
        bool broken =
                e && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE);
        if (!l->leaf || broken) {
                r = failf(err, err_len, fix, fix_len, f, "%s is not a PEM certificate chain (%s%s)",
                          who, l->leaf ? "a certificate after the first is broken: " : "",
                          ossl_why());
                pem_close(&m);
                return r;
        }
        pem_close(&m);
        ERR_clear_error();
        struct m0_tls_cert *c = &l->info;
        snprintf(c->file, sizeof(c->file), "%.511s", p->crt);
        snprintf(c->name, sizeof(c->name), "%.255s", p->name);
        m0__tls_name_text(X509_get_subject_name(l->leaf), c->subject, sizeof(c->subject));
        m0__tls_name_text(X509_get_issuer_name(l->leaf), c->issuer, sizeof(c->issuer));
        sans_text(l->leaf, c->sans, sizeof(c->sans));
        c->not_after = asn1_seconds(X509_get0_notAfter(l->leaf));
        c->chain_len = (unsigned)sk_X509_num(l->chain);
        if (X509_cmp_current_time(X509_get0_notAfter(l->leaf)) <= 0) {
                char when[32];
                time_t na = (time_t)c->not_after;
                struct tm tm;
                strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&na, &tm));
                return failf(err, err_len, fix, fix_len,
                             "renew the certificate and put the new one in its place",
                             "%s expired at %s (subject %.200s)", who, when, c->subject);
        }
        if (X509_cmp_current_time(X509_get0_notBefore(l->leaf)) > 0) {
                /* Every client refuses it until then: serving it would be serving nothing. */
                char when[32];
                time_t nb = (time_t)asn1_seconds(X509_get0_notBefore(l->leaf));
                struct tm tm;
                strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&nb, &tm));
                return failf(err, err_len, fix, fix_len,
                             "put a certificate valid now in its place, or check this machine's "
                             "clock",
                             "%s is not valid before %s (subject %.200s)", who, when, c->subject);
        }
        /* Each certificate of the chain must have issued the one before it (TL3). */
        X509 *child = l->leaf;
        for (int i = 0; i < sk_X509_num(l->chain); i++) {
                X509 *parent = sk_X509_value(l->chain, i);
                EVP_PKEY *pk = X509_get0_pubkey(parent);
                if (X509_check_issued(parent, child) != X509_V_OK || !pk ||
                    X509_verify(child, pk) != 1) {
                        char cs[256], ps[256], ci[256];
                        m0__tls_name_text(X509_get_subject_name(child), cs, sizeof(cs));
                        m0__tls_name_text(X509_get_issuer_name(child), ci, sizeof(ci));
                        m0__tls_name_text(X509_get_subject_name(parent), ps, sizeof(ps));
                        ERR_clear_error();
                        return failf(err, err_len, fix, fix_len,
                                     "put the leaf first, then the certificate that issued it, "
                                     "then its issuer, in that order",
                                     "%s: certificate %d of the chain (%.120s) did not issue the "
                                     "one before it (%.120s, issued by %.120s)",
                                     who, i + 2, ps, cs, ci);
                }
                child = parent;
        }
        return 0;
}

/* The key file, and whether it is the certificate's. */
static int load_key(struct m0_tls_loaded *l, const struct pair *p, char *err, size_t err_len,
                    char *fix, size_t fix_len)
{
        struct pem m;
        int r = pem_open(&m, p, true, err, err_len, fix, fix_len);
        if (r < 0)
                return r;
        char who[sizeof(m.who)];
        memcpy(who, m.who, sizeof(who));
        l->key = m.bio ? PEM_read_bio_PrivateKey(m.bio, NULL, no_passphrase, NULL) : NULL;
        if (!l->key)
                r = failf(err, err_len, fix, fix_len, m.fix,
                          "%s is not a PEM private key m0 can read (%s)", who, ossl_why());
        pem_close(&m);
        if (r < 0)
                return r;
        ERR_clear_error();
        if (X509_check_private_key(l->leaf, l->key) != 1) {
                char crt[700];
                shown(p, false, crt, sizeof(crt));
                ERR_clear_error();
                return failf(err, err_len, fix, fix_len,
                             "give the key the certificate was made for, or the certificate of "
                             "this key",
                             "%s does not match the certificate of %s", who, crt);
        }
        key_text(l->key, l->info.key_type, sizeof(l->info.key_type));
        l->info.bits = EVP_PKEY_get_bits(l->key);
        if (l->rsa_slot && EVP_PKEY_get_base_id(l->key) != EVP_PKEY_RSA)
                return failf(err, err_len, fix, fix_len,
                             "put an RSA certificate in the .rsa. files, the other in tls.crt",
                             "%s holds a %s key, and the .rsa. files are the RSA certificate's",
                             who, l->info.key_type);
        return 0;
}

void m0__tls_loaded_free(struct m0_tls_loaded *l)
{
        X509_free(l->leaf);
        sk_X509_pop_free(l->chain, X509_free);
        EVP_PKEY_free(l->key);
        memset(l, 0, sizeof(*l));
}

/* A server name in a credential's name: letters, digits, '-' and '.', not "rsa". */
static bool name_ok(const char *s, size_t n)
{
        if (n == 0 || n > 253 || (n == 3 && !strncasecmp(s, "rsa", 3)))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '.'))
                        return false;
        return true;
}

/* A pair from a label: "" → tls.crt, "rsa" → tls.rsa.crt, "a.b" → tls.a.b.crt. */
static void pair_of(struct pair *p, const char *dir, const char *label)
{
        size_t n = strlen(label);
        memset(p, 0, sizeof(*p));
        p->cred = true;
        const char *dot = n ? "." : "";
        snprintf(p->crt, sizeof(p->crt), "%s/tls%s%s.crt", dir, dot, label);
        snprintf(p->key, sizeof(p->key), "%s/tls%s%s.key", dir, dot, label);
        p->rsa_slot = (n == 3 || (n > 4 && label[n - 4] == '.')) && n >= 3 &&
                      !strcasecmp(label + n - 3, "rsa");
        size_t nl = p->rsa_slot ? (n > 3 ? n - 4 : 0) : n;
        snprintf(p->name, sizeof(p->name), "%.*s", (int)nl, label);
}

static int cmp_label(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The pairs of the credentials directory (D161): tls.crt/.key first (the default), then
 * tls.rsa.*, then tls.<name>.* and tls.<name>.rsa.* by name. Either file of a pair names it.
 */
static int cred_pairs(const char *dir, struct pair *out, size_t max, size_t *ret_n, char *err,
                      size_t err_len, char *fix, size_t fix_len)
{
        DIR *d = opendir(dir);
        if (!d)
                return failf(err, err_len, fix, fix_len,
                             "check $CREDENTIALS_DIRECTORY, or set M0_TLS_CERT and M0_TLS_KEY",
                             "the credentials directory %s: %s", dir, strerror(errno));
        char *labels[M0__TLS_CERTS_MAX];
        size_t n = 0;
        int r = 0;
        struct dirent *e;
        while (r == 0 && (e = readdir(d))) {
                const char *s = e->d_name;
                size_t len = strlen(s);
                if (len < 7 || strncmp(s, "tls.", 4) ||
                    (strcmp(s + len - 4, ".crt") && strcmp(s + len - 4, ".key")))
                        continue;
                if (len != 7 && len < 9)
                        continue;
                size_t ll = len == 7 ? 0 : len - 8; /* between "tls." and ".crt" */
                const char *label = s + 4;
                bool known = false;
                for (size_t i = 0; i < n && !known; i++)
                        known = strlen(labels[i]) == ll && !strncmp(labels[i], label, ll);
                if (known)
                        continue;
                size_t nl = ll;
                if (ll >= 3 && !strncasecmp(label + ll - 3, "rsa", 3) &&
                    (ll == 3 || label[ll - 4] == '.'))
                        nl = ll == 3 ? 0 : ll - 4;
                if (nl && !name_ok(label, nl)) {
                        r = failf(err, err_len, fix, fix_len,
                                  "name it tls.<server name>.crt, the name in letters, digits, "
                                  "'-' and '.'",
                                  "credential %s: '%.*s' is not a server name", s, (int)nl, label);
                        break;
                }
                if (n == max || n == M0__TLS_CERTS_MAX) {
                        r = failf(err, err_len, fix, fix_len, "give fewer tls.* credentials",
                                  "more than %u certificates in %s", M0__TLS_CERTS_MAX, dir);
                        break;
                }
                labels[n] = strndup(label, ll);
                if (!labels[n])
                        r = -ENOMEM;
                else
                        n++;
        }
        closedir(d);
        qsort(labels, n, sizeof(labels[0]), cmp_label);
        /* "" sorts first, then "rsa" is moved right after it; names follow in order. */
        for (size_t i = 0; i < n; i++) {
                pair_of(&out[i], dir, labels[i]);
                free(labels[i]);
        }
        for (size_t i = 1; i < n; i++)
                if (!out[i].name[0] && out[i].rsa_slot && out[i - 1].name[0]) {
                        struct pair p = out[i];
                        memmove(&out[2], &out[1], (i - 1) * sizeof(out[0]));
                        out[1] = p;
                }
        if (r < 0)
                return r;
        if (n == 0 || out[0].name[0] || out[0].rsa_slot) {
                struct pair p;
                pair_of(&p, dir, "");
                return failf(
                        err, err_len, fix, fix_len,
                        "give LoadCredential=tls.crt:<file> and LoadCredential=tls.key:<file>; "
                        "the other names' certificates come after the default's",
                        "credential tls.crt (%s): no such file; it is the default certificate",
                        p.crt);
        }
        *ret_n = n;
        return 0;
}

bool m0__tls_configured(const struct m0_tls_opts *o)
{
        if ((o->cert && o->cert[0]) || (o->key && o->key[0]))
                return true;
        if (!o->cred_dir || !o->cred_dir[0])
                return false;
        char p[600];
        snprintf(p, sizeof(p), "%s/" M0__TLS_CRED_CRT, o->cred_dir);
        if (access(p, F_OK) == 0)
                return true;
        snprintf(p, sizeof(p), "%s/" M0__TLS_CRED_KEY, o->cred_dir);
        return access(p, F_OK) == 0;
}

/* Two certificates of one name: at most one RSA and one other (TL2). */
static int slots_ok(const struct m0_tls_loaded *l, size_t n, char *err, size_t err_len, char *fix,
                    size_t fix_len)
{
        for (size_t i = 0; i < n; i++)
                for (size_t j = i + 1; j < n; j++) {
                        if (strcmp(l[i].info.name, l[j].info.name))
                                continue;
                        bool ri = EVP_PKEY_get_base_id(l[i].key) == EVP_PKEY_RSA;
                        bool rj = EVP_PKEY_get_base_id(l[j].key) == EVP_PKEY_RSA;
                        if (ri != rj)
                                continue;
                        return failf(err, err_len, fix, fix_len,
                                     "give one name an ECDSA certificate in tls[.<name>].crt and "
                                     "an RSA one in tls[.<name>].rsa.crt",
                                     "%s and %s both hold %s keys for the same name",
                                     l[i].info.file, l[j].info.file, ri ? "RSA" : "non-RSA");
                }
        return 0;
}

int m0__tls_load_all(const struct m0_tls_opts *o, struct m0_tls_loaded *out, size_t max,
                     size_t *ret_n, char *err, size_t err_len, char *fix, size_t fix_len)
{
        struct pair pairs[M0__TLS_CERTS_MAX];
        size_t n = 0;
        int r;
        if ((o->cert && o->cert[0]) || (o->key && o->key[0])) {
                if (!o->cert || !o->cert[0] || !o->key || !o->key[0])
                        return failf(err, err_len, fix, fix_len,
                                     "set both M0_TLS_CERT and M0_TLS_KEY, or neither",
                                     "%s is set and %s is not",
                                     o->cert && o->cert[0] ? "M0_TLS_CERT" : "M0_TLS_KEY",
                                     o->cert && o->cert[0] ? "M0_TLS_KEY" : "M0_TLS_CERT");
                memset(&pairs[0], 0, sizeof(pairs[0]));
                snprintf(pairs[0].crt, sizeof(pairs[0].crt), "%s", o->cert);
                snprintf(pairs[0].key, sizeof(pairs[0].key), "%s", o->key);
                n = 1;
        } else if (o->cred_dir && o->cred_dir[0]) {
                r = cred_pairs(o->cred_dir, pairs,
                               max < M0__TLS_CERTS_MAX ? max : M0__TLS_CERTS_MAX, &n, err, err_len,
                               fix, fix_len);
                if (r < 0)
                        return r;
        } else {
                return failf(
                        err, err_len, fix, fix_len,
                        "set M0_TLS_CERT and M0_TLS_KEY, or LoadCredential=tls.crt and "
                        "tls.key in the unit",
                        "no certificate: neither M0_TLS_CERT nor $CREDENTIALS_DIRECTORY/tls.crt");
        }
        size_t done = 0;
        for (r = 0; done < n && r == 0; done++) {
                memset(&out[done], 0, sizeof(out[done]));
                out[done].rsa_slot = pairs[done].rsa_slot;
                r = load_crt(&out[done], &pairs[done], err, err_len, fix, fix_len);
                if (r == 0)
                        r = load_key(&out[done], &pairs[done], err, err_len, fix, fix_len);
        }
        if (r == 0)
                r = slots_ok(out, n, err, err_len, fix, fix_len);
        if (r < 0) {
                for (size_t i = 0; i < done; i++)
                        m0__tls_loaded_free(&out[i]);
                return r;
        }
        *ret_n = n;
        return 0;
}
