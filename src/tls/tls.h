/* SPDX-License-Identifier: MIT */
/* tls.h: src/tls/, TLS through OpenSSL 3 (TL1–TL5): the certificates and their checks, one
 * context for every loop, its reload, and the I/O of one connection over a non-blocking fd. */
#ifndef M0_TLS_H
#define M0_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

/* The default of M0_TLS_TICKET_ROTATE_S (TL5) and of the TLS 1.2 session cache. */
#define M0__TLS_ROTATE_S 3600
#define M0__TLS_CERTS_MAX 32 /* certificates in one set: 16 names, an ECDSA and an RSA each */
#define M0__TLS_CRED_CRT "tls.crt"
#define M0__TLS_CRED_KEY "tls.key"
/* TL3: a certificate expires within M0_TLS_WARN_DAYS (doc/m0.catalog). */
#define M0_MID_TLS_EXPIRING "a43fb562ad344569a7c72eae8308dfa0"

/* Where the certificates come from and how the context is set (TL1, TL2, TL5). */
struct m0_tls_opts {
        /* M0_TLS_CERT / M0_TLS_KEY: the default pair's files; NULL or "" when unset. Set, they
         * win over the credentials directory. */
        const char *cert, *key;
        /* $CREDENTIALS_DIRECTORY: tls.crt/tls.key, tls.rsa.crt/tls.rsa.key, and per server name
         * tls.<name>.crt/.key and tls.<name>.rsa.crt/.key (D161). NULL when unset. */
        const char *cred_dir;
        uint32_t ticket_rotate_s; /* 0: M0__TLS_ROTATE_S */
        uint32_t session_cache;   /* TLS 1.2 sessions the server keeps; 0 = no cache */
        bool alpn_h2;             /* offer h2 before http/1.1 (HT1) */
};

/* One certificate as loaded: what the doctor prints and the metrics show (TL3). Never the key. */
struct m0_tls_cert {
        char file[512];    /* the certificate's file */
        char name[256];    /* the server name it is chosen for; "" for the default */
        char subject[256]; /* RFC 2253 */
        char issuer[256];
        char sans[512];     /* "DNS:a, DNS:b, IP:…", or "" */
        char key_type[32];  /* "ECDSA P-256", "RSA", "Ed25519" */
        int bits;           /* the key's bits */
        int64_t not_after;  /* Unix seconds */
        unsigned chain_len; /* certificates after the leaf in the file */
};

/* The host's TLS: the current certificate set and the session ticket keys. Made on the
 * coordinator; conn_new, reload and the getters may be called from any thread. */
struct m0_tls;

/*
 * Whether the options name any certificate: M0_TLS_CERT or M0_TLS_KEY set, or the credentials
 * directory holding tls.crt or tls.key.
 */
bool m0__tls_configured(const struct m0_tls_opts *o);

/*
 * Load every certificate the options name, run TL3's checks on each, and build the context.
 * 0 with *ret set, or -errno with `err` naming the file and what is wrong with it and `fix` how to
 * fix it (one line each, never a byte of a key).
 */
int m0__tls_new(struct m0_tls **ret, const struct m0_tls_opts *o, char *err, size_t err_len,
                char *fix, size_t fix_len);
/* Free the context; every connection made from it must be freed first. NULL is fine. */
void m0__tls_free(struct m0_tls *t);

/*
 * TL4: build a complete new set from the same sources, run the checks, and swap it in for new
 * handshakes. Connections already open keep the set they started with; the ticket keys are kept,
 * so a ticket issued before the swap resumes after it. 0, or -errno with `err`/`fix` set and the
 * old set still serving. Any thread; reloads are serialised.
 */
int m0__tls_reload(struct m0_tls *t, char *err, size_t err_len, char *fix, size_t fix_len);

/* Call fn once per certificate of the current set, in load order (the default's first). */
void m0__tls_each_cert(struct m0_tls *t, void (*fn)(void *ud, const struct m0_tls_cert *c),
                       void *ud);
/* One doctor line for `c` (TL3): file, name, subject, SANs, issuer, key type and bits, expiry
 * and the days left at `now`. */
void m0__tls_describe(const struct m0_tls_cert *c, time_t now, char *line, size_t len);
/*
 * TL3: log one warning with M0_MID_TLS_EXPIRING for each certificate that expires within
 * `warn_days` of `now`. Returns how many were.
 */
int m0__tls_warn_expiring(struct m0_tls *t, time_t now, uint32_t warn_days);

/* Make a new ticket key the current one now, the current the previous, and drop the previous
 * (TL5). Done by itself every ticket_rotate_s; exposed for the tests. */
void m0__tls_rotate_keys(struct m0_tls *t);

/* ---- one connection (LY2's TLS transport builds on these) ---- */

/* What a connection needs next: its descriptor readable, or writable. */
enum {
        M0_TLS_WANT_READ = 1,
        M0_TLS_WANT_WRITE = 2,
};

struct m0_tls_conn;

/*
 * A server side connection over `fd` (non-blocking, owned by the caller, never closed here),
 * with the set current now. 0 with *ret set, or -ENOMEM. The thread that owns the fd uses it.
 */
int m0__tls_conn_new(struct m0_tls_conn **ret, struct m0_tls *t, int fd);
/*
 * Drive the handshake. 0 when done; -EAGAIN with m0__tls_want() saying which; -EPROTO (not TLS,
 * a version or cipher refused, a bad message), -ECONNRESET/-EPIPE or another -errno of the
 * socket, with m0__tls_reason() saying why. Anything but -EAGAIN is final: free the connection.
 */
int m0__tls_handshake(struct m0_tls_conn *c);
/* Read up to n bytes of plaintext, records one after another as far as the socket's bytes go:
 * >0 bytes, 0 at the end (close_notify, or the peer's close), -EAGAIN with a want, or -errno as
 * for the handshake. */
ssize_t m0__tls_read(struct m0_tls_conn *c, void *buf, size_t n);
/*
 * Write the bytes of iov[0..n): >0 the bytes taken (maybe fewer than offered), -EAGAIN with a
 * want, or -errno. Small pieces are gathered into records of up to 16 KiB. After -EAGAIN the
 * caller offers the same bytes again, maybe with more after them.
 */
ssize_t m0__tls_writev(struct m0_tls_conn *c, const struct iovec *iov, int n);
/* Send close_notify, best effort: 0 sent (or nothing to send), -EAGAIN with want write. Does not
 * wait for the peer's. */
int m0__tls_shutdown(struct m0_tls_conn *c);
/* Free the connection (not its fd). NULL is fine. */
void m0__tls_conn_free(struct m0_tls_conn *c);

/* Bytes held for the next read, where no readiness of the fd announces them: the socket's bytes
 * read and not yet taken (records behind a read that filled its buffer), and the plaintext of a
 * record a read took in part. */
size_t m0__tls_pending(const struct m0_tls_conn *c);
int m0__tls_want(const struct m0_tls_conn *c);
/* Why the last call failed ("wrong version number", "unsupported protocol"), or "". */
const char *m0__tls_reason(const struct m0_tls_conn *c);
/* After the handshake: "TLSv1.3", the ALPN protocol ("http/1.1", or "" for none), whether the
 * session was resumed, the client's server name (or ""). */
const char *m0__tls_version(const struct m0_tls_conn *c);
const char *m0__tls_alpn(const struct m0_tls_conn *c);
bool m0__tls_resumed(const struct m0_tls_conn *c);
const char *m0__tls_server_name(const struct m0_tls_conn *c);
/* The leaf certificate this connection presents (its subject), for tests and logs; or "". */
void m0__tls_conn_subject(const struct m0_tls_conn *c, char *out, size_t len);

/* ---- tls-transport.c: LY2's TLS transport over these (TL1, TL7) ---- */

struct m0_transport;
/* The TLS transport: handshake, read, writev, sendfile (read, then written as records),
 * shutdown (close_notify, then the write side), close (close_notify when the session lives),
 * pending and session. */
extern const struct m0_transport_ops m0__transport_tls;
/*
 * Set `t` up as a TLS connection over accepted socket `fd` with the set current in `tls` now.
 * 0, or -ENOMEM with `t` untouched and `fd` still the caller's.
 */
int m0__tls_transport_open(struct m0_transport *t, struct m0_tls *tls, int fd);

#endif /* M0_TLS_H */
