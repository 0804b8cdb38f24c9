/* SPDX-License-Identifier: MIT */
/* notes-crypto.h: SHA-256 (FIPS 180-4), HMAC-SHA256 (RFC 2104) and the helpers notes signs with. */
#ifndef NOTES_CRYPTO_H
#define NOTES_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NOTES_SHA256_LEN 32
#define NOTES_SHA256_BLOCK 64

/** A SHA-256 computation in progress. Plain memory: no thread may share one. */
struct notes_sha256 {
        uint32_t h[8];
        uint64_t bytes;                  /* message length so far */
        uint8_t buf[NOTES_SHA256_BLOCK]; /* the block being filled */
        size_t n;                        /* bytes in buf */
};

/** An HMAC-SHA256 computation in progress: the inner hash and the outer key block. */
struct notes_hmac {
        struct notes_sha256 inner;
        uint8_t okey[NOTES_SHA256_BLOCK];
};

/** Start a hash. */
void notes_sha256_init(struct notes_sha256 *s);
/** Hash `len` more bytes. */
void notes_sha256_update(struct notes_sha256 *s, const void *data, size_t len);
/** Finish: write the 32-byte digest into `out`, then wipe `s`. */
void notes_sha256_final(struct notes_sha256 *s, uint8_t out[NOTES_SHA256_LEN]);

/** Start an HMAC with `key` (any length; longer than a block is hashed first, as RFC 2104 says). */
void notes_hmac_init(struct notes_hmac *h, const void *key, size_t key_len);
/** Authenticate `len` more bytes. */
void notes_hmac_update(struct notes_hmac *h, const void *data, size_t len);
/** Finish: write the 32-byte MAC into `out`, then wipe `h`. */
void notes_hmac_final(struct notes_hmac *h, uint8_t out[NOTES_SHA256_LEN]);
/** One-shot HMAC-SHA256 of `msg` under `key`. */
void notes_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                       uint8_t out[NOTES_SHA256_LEN]);

/**
 * Compare `n` bytes in time that depends on `n` only, never on where they differ.
 * Returns true when equal.
 */
bool notes_ct_equal(const void *a, const void *b, size_t n);

/** Write `n` bytes as 2n lower-case hex digits and a NUL into `out` (2n+1 bytes). */
void notes_hex(const uint8_t *in, size_t n, char *out);
/**
 * Decode exactly 2n hex digits (either case) of `in` into `n` bytes. Returns 0, or -EINVAL on
 * a character that is not a hex digit (`out` is then partly written).
 */
int notes_unhex(const char *in, size_t n, uint8_t *out);

/**
 * Known-answer tests: FIPS 180-4's SHA-256 examples and RFC 4231's HMAC-SHA256 cases 1-7.
 * Returns 0, or -EIO with the failing case named in `err`.
 */
int notes_crypto_selftest(char *err, size_t err_len);

#endif /* NOTES_CRYPTO_H */
