/* SPDX-License-Identifier: MIT */
/* context.c: one TLS context for every loop (TL1, TL5): the protocol settings, the session
 * ticket keys in memory, SNI and ALPN, and the certificate set swapped whole on reload (TL4). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "log.h"
#include "tls-private.h"
#include "util.h"

/* Mozilla's "intermediate" TLS 1.2 suites with forward secrecy and AEAD: ECDHE with AES-GCM and
 * ChaCha20-Poly1305 (D160). TLS 1.3 keeps OpenSSL's default suites, which are the same list. */
#define CIPHERS_TLS12                                                                              \
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"                               \
        "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"                               \
        "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
#define CIPHERS_TLS13 "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
#define GROUPS "X25519:P-256:P-384"

/* ---- session ticket keys (TL5, D163) ---- */

static uint64_t mono_s(void)
{
        return m0__now_ms() / 1000u;
}

static int tkey_new(struct m0_tls_tkey *k)
{
        if (RAND_bytes(k->name, sizeof(k->name)) != 1 || RAND_bytes(k->aes, sizeof(k->aes)) != 1 ||
            RAND_bytes(k->hmac, sizeof(k->hmac)) != 1)
                return -EIO;
        k->on = true;
        return 0;
}

/* Under keys_lock. The previous key goes, the current one becomes it, a new one encrypts. */
static void rotate_locked(struct m0_tls *t, uint64_t now)
{
        struct m0_tls_tkey fresh;
        if (tkey_new(&fresh) < 0)
                return; /* no randomness now: the current key serves another period */
        OPENSSL_cleanse(&t->keys[1], sizeof(t->keys[1]));
        t->keys[1] = t->keys[0];
        t->keys[0] = fresh;
        OPENSSL_cleanse(&fresh, sizeof(fresh));
        t->rotated_s = now;
}

void m0__tls_rotate_keys(struct m0_tls *t)
{
        pthread_mutex_lock(&t->keys_lock);
        rotate_locked(t, mono_s());
        pthread_mutex_unlock(&t->keys_lock);
}

/*
 * OpenSSL's ticket callback: `enc` 1 encrypts a new ticket with the current key; 0 finds the key
 * a ticket names. Returns 1 (done), 2 (decrypted with the previous key: issue a fresh ticket),
 * 0 (unknown key: a full handshake), -1 (error). Runs on every loop's thread.
 */
static int ticket_cb(SSL *s, unsigned char key_name[16], unsigned char *iv, EVP_CIPHER_CTX *cctx,
                     EVP_MAC_CTX *hctx, int enc)
{
        struct m0_tls *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(s));
        struct m0_tls_tkey k = {0};
        int ret = 0;
        pthread_mutex_lock(&t->keys_lock);
        uint64_t now = mono_s();
        if (now - t->rotated_s >= t->opts.ticket_rotate_s)
                rotate_locked(t, now);
        if (enc) {
                k = t->keys[0];
                ret = 1;
        } else {
                for (int i = 0; i < 2 && !ret; i++)
                        if (t->keys[i].on && !memcmp(key_name, t->keys[i].name, 16)) {
                                k = t->keys[i];
                                ret = i == 0 ? 1 : 2;
                        }
        }
        pthread_mutex_unlock(&t->keys_lock);
        if (!ret)
                return 0;
        OSSL_PARAM params[] = {
                OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, k.hmac, sizeof(k.hmac)),
                OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
                OSSL_PARAM_construct_end(),
        };
        const EVP_CIPHER *aes = EVP_aes_256_cbc();
        if (enc) {
                memcpy(key_name, k.name, 16);
                if (RAND_bytes(iv, EVP_CIPHER_get_iv_length(aes)) != 1 ||
                    EVP_EncryptInit_ex(cctx, aes, NULL, k.aes, iv) != 1)
                        ret = -1;
        } else if (EVP_DecryptInit_ex(cctx, aes, NULL, k.aes, iv) != 1) {
                ret = -1;
        }
        if (ret > 0 && EVP_MAC_CTX_set_params(hctx, params) != 1)
                ret = -1;
        OPENSSL_cleanse(&k, sizeof(k));
        return ret;
}

/* ---- ALPN and SNI ---- */

static const unsigned char alpn_h1[] = "\x08http/1.1";
static const unsigned char alpn_h2[] = "\x02h2\x08http/1.1";

/* The server's order wins: h2 (when on), then http/1.1. No protocol in common is a fatal alert,
 * as RFC 7301 asks (no_application_protocol). */
static int alpn_cb(SSL *s, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned int inlen, void *arg)
{
        const struct m0_tls *t = arg;
        const unsigned char *srv = t->opts.alpn_h2 ? alpn_h2 : alpn_h1;
        unsigned srvlen = t->opts.alpn_h2 ? sizeof(alpn_h2) - 1 : sizeof(alpn_h1) - 1;
        unsigned char *o;
        if (SSL_select_next_proto(&o, outlen, srv, srvlen, in, inlen) != OPENSSL_NPN_NEGOTIATED)
                return SSL_TLSEXT_ERR_ALERT_FATAL;
        *out = o;
        return SSL_TLSEXT_ERR_OK;
}

/* The client's server name picks the set's context of that name; any other name, or none, gets
 * the default's. `arg` is the set, which the connection holds a reference on. */
static int sni_cb(SSL *s, int *alert, void *arg)
{
        const struct m0_tls_set *set = arg;
        const char *name = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);
        for (size_t i = 0; name && i < set->nnamed; i++)
                if (!strcasecmp(name, set->named[i].name)) {
                        if (!SSL_set_SSL_CTX(s, set->named[i].ctx))
                                return SSL_TLSEXT_ERR_ALERT_FATAL;
                        break;
                }
        return SSL_TLSEXT_ERR_OK;
}

/* ---- the contexts of one set ---- */

/* A context with m0's settings (TL1, TL5) and no certificate yet. */
static SSL_CTX *ctx_new(struct m0_tls *t)
{
        SSL_CTX *c = SSL_CTX_new(TLS_server_method());
        if (!c)
                return NULL;
        const struct m0_tls_opts *o = &t->opts;
        bool ok = SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION) == 1 &&
                  SSL_CTX_set_max_proto_version(c, TLS1_3_VERSION) == 1 &&
                  SSL_CTX_set_cipher_list(c, CIPHERS_TLS12) == 1 &&
                  SSL_CTX_set_ciphersuites(c, CIPHERS_TLS13) == 1 &&
                  SSL_CTX_set1_groups_list(c, GROUPS) == 1 &&
                  SSL_CTX_set_max_early_data(c, 0) == 1 &&
                  SSL_CTX_set_recv_max_early_data(c, 0) == 1 &&
                  SSL_CTX_set_session_id_context(c, (const unsigned char *)"m0", 2) == 1 &&
                  SSL_CTX_set_tlsext_ticket_key_evp_cb(c, ticket_cb) == 1 &&
                  SSL_CTX_set_app_data(c, t) == 1;
        if (!ok) {
                SSL_CTX_free(c);
                return NULL;
        }
        /* No renegotiation, no compression; an EOF without close_notify reads as an end (the
         * HTTP framing above tells a cut body from a whole one); kTLS stays off (D164). */
        SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                       SSL_OP_IGNORE_UNEXPECTED_EOF);
        /* The server's suite order, AES-128-GCM first, ChaCha20 first for a client that puts
         * it first (one without AES instructions): every suite offered is an AEAD with ECDHE,
         * so the order costs no client anything (D145). */
        SSL_CTX_set_options(c, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA);
        SSL_CTX_clear_options(c, SSL_OP_ENABLE_KTLS);
        /* Buffers go back to the allocator while a connection is idle; a write returns after
         * each record, and its retry may come from another address (io.c gathers pieces). */
        SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                                    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        SSL_CTX_set_session_cache_mode(c, o->session_cache ? SSL_SESS_CACHE_SERVER
                                                           : SSL_SESS_CACHE_OFF);
        SSL_CTX_sess_set_cache_size(c, o->session_cache);
        /* A ticket's key is kept two periods: a session lasting one is always decryptable. */
        SSL_CTX_set_timeout(c, (long)o->ticket_rotate_s);
        SSL_CTX_set_alpn_select_cb(c, alpn_cb, t);
        return c;
}

static void set_free(struct m0_tls_set *s)
{
        if (!s)
                return;
        SSL_CTX_free(s->def);
        for (size_t i = 0; i < s->nnamed; i++)
                SSL_CTX_free(s->named[i].ctx);
        free(s);
}

void m0__tls_set_unref(struct m0_tls_set *s)
{
        if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
                set_free(s);
}

struct m0_tls_set *m0__tls_set_take(struct m0_tls *t)
{
        pthread_mutex_lock(&t->lock);
        struct m0_tls_set *s = t->cur;
        atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
        pthread_mutex_unlock(&t->lock);
        return s;
}

/* The context of `name` in the set being built, made on first use. */
static SSL_CTX *ctx_of(struct m0_tls *t, struct m0_tls_set *s, const char *name)
{
        if (!name[0])
                return s->def ? s->def : (s->def = ctx_new(t));
        for (size_t i = 0; i < s->nnamed; i++)
                if (!strcasecmp(s->named[i].name, name))
                        return s->named[i].ctx;
        struct m0_tls_named *n = &s->named[s->nnamed];
        snprintf(n->name, sizeof(n->name), "%s", name);
        if (!(n->ctx = ctx_new(t)))
                return NULL;
        s->nnamed++;
        return n->ctx;
}

/* Load and check every certificate, and build a set of them. 0 or -errno with err/fix. */
static int set_build(struct m0_tls *t, struct m0_tls_set **ret, char *err, size_t err_len,
                     char *fix, size_t fix_len)
{
        struct m0_tls_loaded *l = calloc(M0__TLS_CERTS_MAX, sizeof(*l));
        struct m0_tls_set *s = calloc(1, sizeof(*s));
        size_t n = 0;
        int r = -ENOMEM;
        if (!l || !s)
                goto out;
        atomic_init(&s->refs, 1);
        r = m0__tls_load_all(&t->opts, l, M0__TLS_CERTS_MAX, &n, err, err_len, fix, fix_len);
        for (size_t i = 0; r == 0 && i < n; i++) {
                SSL_CTX *c = ctx_of(t, s, l[i].info.name);
                ERR_clear_error();
                if (!c || SSL_CTX_use_cert_and_key(c, l[i].leaf, l[i].key, l[i].chain, 1) != 1) {
                        snprintf(err, err_len, "%s: OpenSSL cannot use it (%s)", l[i].info.file,
                                 ERR_reason_error_string(ERR_peek_error())
                                         ? ERR_reason_error_string(ERR_peek_error())
                                         : "no memory");
                        snprintf(fix, fix_len, "give a certificate and key OpenSSL 3 can serve");
                        ERR_clear_error();
                        r = -EINVAL;
                        break;
                }
                s->certs[s->ncerts++] = l[i].info;
        }
        if (r == 0) {
                SSL_CTX_set_tlsext_servername_callback(s->def, sni_cb);
                SSL_CTX_set_tlsext_servername_arg(s->def, s);
                *ret = s;
                s = NULL;
        }
out:
        for (size_t i = 0; i < n; i++)
                m0__tls_loaded_free(&l[i]);
        free(l);
        set_free(s);
        if (r == -ENOMEM && !err[0]) {
                snprintf(err, err_len, "no memory for the TLS context");
                snprintf(fix, fix_len, "give the service more memory");
        }
        return r;
}

/* ---- the context's life ---- */

int m0__tls_new(struct m0_tls **ret, const struct m0_tls_opts *o, char *err, size_t err_len,
                char *fix, size_t fix_len)
{
        err[0] = fix[0] = '\0';
        struct m0_tls *t = calloc(1, sizeof(*t));
        if (!t) {
                snprintf(err, err_len, "no memory for the TLS context");
                snprintf(fix, fix_len, "give the service more memory");
                return -ENOMEM;
        }
        t->opts = *o;
        snprintf(t->cert, sizeof(t->cert), "%s", o->cert ? o->cert : "");
        snprintf(t->key, sizeof(t->key), "%s", o->key ? o->key : "");
        snprintf(t->cred_dir, sizeof(t->cred_dir), "%s", o->cred_dir ? o->cred_dir : "");
        t->opts.cert = t->cert;
        t->opts.key = t->key;
        t->opts.cred_dir = t->cred_dir;
        if (!t->opts.ticket_rotate_s)
                t->opts.ticket_rotate_s = M0__TLS_ROTATE_S;
        pthread_mutex_init(&t->lock, NULL);
        pthread_mutex_init(&t->reload_lock, NULL);
        pthread_mutex_init(&t->keys_lock, NULL);
        t->rotated_s = mono_s();
        int r = tkey_new(&t->keys[0]);
        if (r < 0) {
                snprintf(err, err_len, "no randomness for the session ticket keys");
                snprintf(fix, fix_len, "check the kernel's getrandom()");
        } else {
                r = set_build(t, &t->cur, err, err_len, fix, fix_len);
        }
        if (r < 0) {
                m0__tls_free(t);
                return r;
        }
        *ret = t;
        return 0;
}

void m0__tls_free(struct m0_tls *t)
{
        if (!t)
                return;
        m0__tls_set_unref(t->cur);
        OPENSSL_cleanse(t->keys, sizeof(t->keys));
        pthread_mutex_destroy(&t->lock);
        pthread_mutex_destroy(&t->reload_lock);
        pthread_mutex_destroy(&t->keys_lock);
        free(t);
}

int m0__tls_reload(struct m0_tls *t, char *err, size_t err_len, char *fix, size_t fix_len)
{
        err[0] = fix[0] = '\0';
        pthread_mutex_lock(&t->reload_lock);
        struct m0_tls_set *s = NULL;
        int r = set_build(t, &s, err, err_len, fix, fix_len);
        if (r == 0) {
                pthread_mutex_lock(&t->lock);
                struct m0_tls_set *old = t->cur;
                t->cur = s;
                pthread_mutex_unlock(&t->lock);
                m0__tls_set_unref(old); /* freed once its last connection is */
        }
        pthread_mutex_unlock(&t->reload_lock);
        return r;
}

void m0__tls_each_cert(struct m0_tls *t, void (*fn)(void *ud, const struct m0_tls_cert *c),
                       void *ud)
{
        struct m0_tls_set *s = m0__tls_set_take(t);
        for (size_t i = 0; i < s->ncerts; i++)
                fn(ud, &s->certs[i]);
        m0__tls_set_unref(s);
}

void m0__tls_describe(const struct m0_tls_cert *c, time_t now, char *line, size_t len)
{
        char when[32];
        time_t na = (time_t)c->not_after;
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&na, &tm));
        long long days = ((long long)c->not_after - (long long)now) / 86400;
        snprintf(line, len,
                 "%s (%s): subject %s; names %s; issuer %s; key %s, %d bits; expires %s (in %lld "
                 "day%s); chain of %u",
                 c->file, c->name[0] ? c->name : "default", c->subject,
                 c->sans[0] ? c->sans : "none", c->issuer, c->key_type, c->bits, when, days,
                 days == 1 ? "" : "s", c->chain_len);
}

struct warn {
        time_t now;
        uint32_t days;
        int n;
};

static void warn_one(void *ud, const struct m0_tls_cert *c)
{
        struct warn *w = ud;
        if (c->not_after - (int64_t)w->now >= (int64_t)w->days * 86400)
                return;
        char when[32];
        time_t na = (time_t)c->not_after;
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&na, &tm));
        m0__log(M0_LOG_WARNING, -1, M0_MID_TLS_EXPIRING,
                "TLS certificate %s (subject %s) expires at %s, within M0_TLS_WARN_DAYS=%u days: "
                "renew it and reload",
                c->file, c->subject, when, w->days);
        w->n++;
}

int m0__tls_warn_expiring(struct m0_tls *t, time_t now, uint32_t warn_days)
{
        struct warn w = {.now = now, .days = warn_days};
        m0__tls_each_cert(t, warn_one, &w);
        return w.n;
}
