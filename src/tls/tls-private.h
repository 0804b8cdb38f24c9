/* SPDX-License-Identifier: MIT */
/* tls-private.h: what the files of src/tls/ share: the certificate set, the ticket keys, the
 * context that holds both. */
#ifndef M0_TLS_PRIVATE_H
#define M0_TLS_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>

#include <openssl/ssl.h>

#include "tls.h"

/* ---- certs.c: the files, loaded and checked (TL2, TL3) ---- */

/* One certificate with its chain and key, loaded and checked. */
struct m0_tls_loaded {
        X509 *leaf;
        STACK_OF(X509) * chain; /* after the leaf, in the file's order */
        EVP_PKEY *key;
        bool rsa_slot; /* from tls[.<name>].rsa.crt: the name's RSA certificate */
        struct m0_tls_cert info;
};

/*
 * Load every pair the options name into out[0..*ret_n), the default name's first, and check
 * each (TL3). 0, or -errno with `err` and `fix` set and nothing left allocated.
 */
int m0__tls_load_all(const struct m0_tls_opts *o, struct m0_tls_loaded *out, size_t max,
                     size_t *ret_n, char *err, size_t err_len, char *fix, size_t fix_len);
void m0__tls_loaded_free(struct m0_tls_loaded *l);
/* A name as RFC 2253 text ("CN=example.test,O=m0"), cut to `len`. */
void m0__tls_name_text(const X509_NAME *n, char *out, size_t len);

/* ---- context.c: one set of certificates for new handshakes, swapped whole (TL4) ---- */

struct m0_tls_named {
        char name[256];
        SSL_CTX *ctx;
};

/* A complete set: the default name's context, one more per server name (SNI), and what the
 * doctor shows. Reference-counted: the holder's reference and one per connection made with it. */
struct m0_tls_set {
        atomic_int refs;
        SSL_CTX *def;
        struct m0_tls_named named[M0__TLS_CERTS_MAX];
        size_t nnamed;
        struct m0_tls_cert certs[M0__TLS_CERTS_MAX];
        size_t ncerts;
};

/* Take a reference on the current set (any thread); give it back with m0__tls_set_unref. */
struct m0_tls_set *m0__tls_set_take(struct m0_tls *t);
void m0__tls_set_unref(struct m0_tls_set *s);

/* A session ticket key (TL5): its name in the ticket, an AES-256 key and an HMAC-SHA256 key. */
struct m0_tls_tkey {
        unsigned char name[16];
        unsigned char aes[32];
        unsigned char hmac[32];
        bool on;
};

struct m0_tls {
        /* The options, with their strings copied: a reload reads the same sources. */
        struct m0_tls_opts opts;
        char cert[512], key[512], cred_dir[512];
        /* Guards `cur`: a new connection takes a reference under it, a reload swaps it. Held for
         * a pointer load and an increment. */
        pthread_mutex_t lock;
        struct m0_tls_set *cur;
        pthread_mutex_t reload_lock; /* one reload at a time */
        /* The ticket keys, read by every loop's handshakes and rotated by whichever handshake
         * finds them due, under keys_lock; never written to disk. */
        pthread_mutex_t keys_lock;
        struct m0_tls_tkey keys[2]; /* [0] current: encrypts; [1] previous: still decrypts */
        uint64_t rotated_s;         /* monotonic seconds of the last rotation */
};

#endif /* M0_TLS_PRIVATE_H */
