/* SPDX-License-Identifier: MIT */
/* notes-crypto.c: SHA-256 and HMAC-SHA256, small and checked against their published vectors. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "notes-crypto.h"

static const uint32_t K[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
};

static uint32_t ror(uint32_t x, unsigned n)
{
        return (x >> n) | (x << (32 - n));
}

static uint32_t load_be32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void store_be32(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)(v >> 24);
        p[1] = (uint8_t)(v >> 16);
        p[2] = (uint8_t)(v >> 8);
        p[3] = (uint8_t)v;
}

static void wipe(void *p, size_t n)
{
        explicit_bzero(p, n);
}

/* FIPS 180-4 section 6.2.2: one 64-byte block into the state. */
static void compress(uint32_t h[8], const uint8_t block[NOTES_SHA256_BLOCK])
{
        uint32_t w[64];
        for (int t = 0; t < 16; t++)
                w[t] = load_be32(block + 4 * t);
        for (int t = 16; t < 64; t++) {
                uint32_t s0 = ror(w[t - 15], 7) ^ ror(w[t - 15], 18) ^ (w[t - 15] >> 3);
                uint32_t s1 = ror(w[t - 2], 17) ^ ror(w[t - 2], 19) ^ (w[t - 2] >> 10);
                w[t] = w[t - 16] + s0 + w[t - 7] + s1;
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
        for (int t = 0; t < 64; t++) {
                uint32_t t1 = k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) +
                              K[t] + w[t];
                uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
                k = g;
                g = f;
                f = e;
                e = d + t1;
                d = c;
                c = b;
                b = a;
                a = t1 + t2;
        }
        h[0] += a;
        h[1] += b;
        h[2] += c;
        h[3] += d;
        h[4] += e;
        h[5] += f;
        h[6] += g;
        h[7] += k;
        wipe(w, sizeof(w));
}

void notes_sha256_init(struct notes_sha256 *s)
{
        static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
        memcpy(s->h, iv, sizeof(iv));
        s->bytes = 0;
        s->n = 0;
}

void notes_sha256_update(struct notes_sha256 *s, const void *data, size_t len)
{
        const uint8_t *p = data;
        s->bytes += len;
        if (s->n > 0) {
                size_t take = NOTES_SHA256_BLOCK - s->n < len ? NOTES_SHA256_BLOCK - s->n : len;
                memcpy(s->buf + s->n, p, take);
                s->n += take;
                p += take;
                len -= take;
                if (s->n < NOTES_SHA256_BLOCK)
                        return;
                compress(s->h, s->buf);
                s->n = 0;
        }
        for (; len >= NOTES_SHA256_BLOCK; p += NOTES_SHA256_BLOCK, len -= NOTES_SHA256_BLOCK)
                compress(s->h, p);
        memcpy(s->buf, p, len);
        s->n = len;
}

void notes_sha256_final(struct notes_sha256 *s, uint8_t out[NOTES_SHA256_LEN])
{
        uint64_t bits = s->bytes * 8;
        /* Padding (5.1.1): a 1 bit, zeros to 56 mod 64, then the length in bits, big-endian. */
        s->buf[s->n++] = 0x80;
        if (s->n > 56) {
                memset(s->buf + s->n, 0, NOTES_SHA256_BLOCK - s->n);
                compress(s->h, s->buf);
                s->n = 0;
        }
        memset(s->buf + s->n, 0, 56 - s->n);
        store_be32(s->buf + 56, (uint32_t)(bits >> 32));
        store_be32(s->buf + 60, (uint32_t)bits);
        compress(s->h, s->buf);
        for (int i = 0; i < 8; i++)
                store_be32(out + 4 * i, s->h[i]);
        wipe(s, sizeof(*s));
}

void notes_hmac_init(struct notes_hmac *h, const void *key, size_t key_len)
{
        uint8_t k[NOTES_SHA256_BLOCK] = {0};
        if (key_len > NOTES_SHA256_BLOCK) {
                struct notes_sha256 s;
                notes_sha256_init(&s);
                notes_sha256_update(&s, key, key_len);
                notes_sha256_final(&s, k);
        } else if (key_len > 0) {
                memcpy(k, key, key_len);
        }
        uint8_t ikey[NOTES_SHA256_BLOCK];
        for (size_t i = 0; i < NOTES_SHA256_BLOCK; i++) {
                ikey[i] = k[i] ^ 0x36;
                h->okey[i] = k[i] ^ 0x5c;
        }
        notes_sha256_init(&h->inner);
        notes_sha256_update(&h->inner, ikey, sizeof(ikey));
        wipe(k, sizeof(k));
        wipe(ikey, sizeof(ikey));
}

void notes_hmac_update(struct notes_hmac *h, const void *data, size_t len)
{
        notes_sha256_update(&h->inner, data, len);
}

void notes_hmac_final(struct notes_hmac *h, uint8_t out[NOTES_SHA256_LEN])
{
        uint8_t inner[NOTES_SHA256_LEN];
        notes_sha256_final(&h->inner, inner);
        struct notes_sha256 outer;
        notes_sha256_init(&outer);
        notes_sha256_update(&outer, h->okey, sizeof(h->okey));
        notes_sha256_update(&outer, inner, sizeof(inner));
        notes_sha256_final(&outer, out);
        wipe(inner, sizeof(inner));
        wipe(h, sizeof(*h));
}

void notes_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                       uint8_t out[NOTES_SHA256_LEN])
{
        struct notes_hmac h;
        notes_hmac_init(&h, key, key_len);
        notes_hmac_update(&h, msg, msg_len);
        notes_hmac_final(&h, out);
}

bool notes_ct_equal(const void *a, const void *b, size_t n)
{
        /* volatile: the compiler may not turn the loop into an early-exit memcmp. */
        const volatile uint8_t *x = a, *y = b;
        uint8_t diff = 0;
        for (size_t i = 0; i < n; i++)
                diff |= x[i] ^ y[i];
        return diff == 0;
}

void notes_hex(const uint8_t *in, size_t n, char *out)
{
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[in[i] >> 4];
                out[2 * i + 1] = digits[in[i] & 15];
        }
        out[2 * n] = '\0';
}

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

int notes_unhex(const char *in, size_t n, uint8_t *out)
{
        for (size_t i = 0; i < n; i++) {
                int hi = hexval(in[2 * i]), lo = hexval(in[2 * i + 1]);
                if (hi < 0 || lo < 0)
                        return -EINVAL;
                out[i] = (uint8_t)(hi << 4 | lo);
        }
        return 0;
}

/* ---- known answers ---- */

static bool digest_is(const uint8_t d[NOTES_SHA256_LEN], const char *hex, size_t hex_len)
{
        char got[2 * NOTES_SHA256_LEN + 1];
        notes_hex(d, NOTES_SHA256_LEN, got);
        return strncmp(got, hex, hex_len) == 0;
}

int notes_crypto_selftest(char *err, size_t err_len)
{
        /* FIPS 180-4 examples (and the NIST CSRC example set for the empty and long messages). */
        static const struct {
                const char *msg;
                const char *hex;
        } sha[] = {
                {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
                {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
                {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
                {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqk"
                 "lmnopqrlmnopqrsmnopqrstnopqrstu",
                 "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
        };
        uint8_t d[NOTES_SHA256_LEN];
        struct notes_sha256 s;
        for (size_t i = 0; i < sizeof(sha) / sizeof(sha[0]); i++) {
                /* Once whole, once a byte at a time: both paths through update. */
                for (int bytewise = 0; bytewise < 2; bytewise++) {
                        size_t len = strlen(sha[i].msg);
                        notes_sha256_init(&s);
                        if (bytewise)
                                for (size_t j = 0; j < len; j++)
                                        notes_sha256_update(&s, sha[i].msg + j, 1);
                        else
                                notes_sha256_update(&s, sha[i].msg, len);
                        notes_sha256_final(&s, d);
                        if (!digest_is(d, sha[i].hex, 64)) {
                                snprintf(err, err_len,
                                         "SHA-256 self-test failed on FIPS 180 example %zu", i + 1);
                                return -EIO;
                        }
                }
        }
        /* One million 'a', fed in 997-byte pieces so that pieces straddle blocks. */
        char a[997];
        memset(a, 'a', sizeof(a));
        notes_sha256_init(&s);
        for (size_t left = 1000000; left > 0;) {
                size_t n = left < sizeof(a) ? left : sizeof(a);
                notes_sha256_update(&s, a, n);
                left -= n;
        }
        notes_sha256_final(&s, d);
        if (!digest_is(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", 64)) {
                snprintf(err, err_len, "SHA-256 self-test failed on one million 'a'");
                return -EIO;
        }

        /* RFC 4231 section 4: keys and data are built from their repeated bytes. */
        uint8_t k20_0b[20], k20_aa[20], k25[25], k20_0c[20], k131[131], dd50[50], cd50[50];
        memset(k20_0b, 0x0b, sizeof(k20_0b));
        memset(k20_aa, 0xaa, sizeof(k20_aa));
        for (size_t i = 0; i < sizeof(k25); i++)
                k25[i] = (uint8_t)(i + 1);
        memset(k20_0c, 0x0c, sizeof(k20_0c));
        memset(k131, 0xaa, sizeof(k131));
        memset(dd50, 0xdd, sizeof(dd50));
        memset(cd50, 0xcd, sizeof(cd50));
        static const char t6[] = "Test Using Larger Than Block-Size Key - Hash Key First";
        static const char t7[] = "This is a test using a larger than block-size key and a larger "
                                 "than block-size data. The key needs to be hashed before being "
                                 "used by the HMAC algorithm.";
        const struct {
                const void *key;
                size_t key_len;
                const void *data;
                size_t data_len;
                const char *hex;
                size_t hex_len; /* case 5 is truncated to 128 bits */
        } mac[] = {
                {k20_0b, 20, "Hi There", 8,
                 "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", 64},
                {"Jefe", 4, "what do ya want for nothing?", 28,
                 "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", 64},
                {k20_aa, 20, dd50, 50,
                 "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe", 64},
                {k25, 25, cd50, 50,
                 "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b", 64},
                {k20_0c, 20, "Test With Truncation", 20, "a3b6167473100ee06e0c796c2955552b", 32},
                {k131, 131, t6, sizeof(t6) - 1,
                 "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", 64},
                {k131, 131, t7, sizeof(t7) - 1,
                 "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2", 64},
        };
        for (size_t i = 0; i < sizeof(mac) / sizeof(mac[0]); i++) {
                notes_hmac_sha256(mac[i].key, mac[i].key_len, mac[i].data, mac[i].data_len, d);
                if (!digest_is(d, mac[i].hex, mac[i].hex_len)) {
                        snprintf(err, err_len, "HMAC-SHA256 self-test failed on RFC 4231 case %zu",
                                 i + 1);
                        return -EIO;
                }
        }
        return 0;
}
