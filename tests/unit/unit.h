/* SPDX-License-Identifier: MIT */
/* unit.h: what the unit tests share: the Check runner and an exact-bytes assertion. */
#ifndef M0_UNIT_H
#define M0_UNIT_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes [p, p + n) as a C string literal body, for failure messages; caller frees. */
static inline char *unit_escape(const void *p, size_t n)
{
        const unsigned char *s = p;
        char *out = malloc(4 * n + 1);
        size_t o = 0;
        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                unsigned char ch = s[i];
                if (ch == '\r') {
                        out[o++] = '\\', out[o++] = 'r';
                } else if (ch == '\n') {
                        out[o++] = '\\', out[o++] = 'n';
                } else if (ch == '\\' || ch == '"') {
                        out[o++] = '\\', out[o++] = (char)ch;
                } else if (ch < 0x20 || ch >= 0x7f) {
                        o += (size_t)snprintf(out + o, 5, "\\x%02x", ch);
                } else {
                        out[o++] = (char)ch;
                }
        }
        out[o] = '\0';
        return out;
}

/* Exactly these bytes, this many of them; on a mismatch both sides are shown escaped. */
#define ck_assert_bytes(got, got_len, exp, exp_len)                                                \
        do {                                                                                       \
                const void *g_ = (got);                                                            \
                const void *e_ = (exp);                                                            \
                size_t gl_ = (got_len), el_ = (exp_len);                                           \
                if (gl_ != el_ || (el_ && memcmp(g_, e_, el_) != 0)) {                             \
                        char *gs_ = unit_escape(g_, gl_);                                          \
                        char *es_ = unit_escape(e_, el_);                                          \
                        ck_abort_msg(                                                              \
                                "bytes differ:\n  got      %zu \"%s\"\n  expected %zu \"%s\"",     \
                                gl_, gs_ ? gs_ : "?", el_, es_ ? es_ : "?");                       \
                }                                                                                  \
        } while (0)

/* A buffer's contents against a string literal. */
#define ck_assert_buf_lit(buf, lit) ck_assert_bytes((buf).data, (buf).len, lit, sizeof(lit) - 1)

/* Run one suite with Check's normal output; the process status is the verdict. */
static inline int unit_run(Suite *s)
{
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif /* M0_UNIT_H */
