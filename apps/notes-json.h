/* SPDX-License-Identifier: MIT */
/* notes-json.h: a strict, bounded reader of flat JSON objects, and the escaper notes writes. */
#ifndef NOTES_JSON_H
#define NOTES_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum notes_json_type {
        NOTES_JSON_STRING, /**< a string, decoded into `buf` */
        NOTES_JSON_UINT,   /**< a whole number 0..2^63-1: no sign, fraction or exponent */
};

/** One member an object may carry. The caller sets name, type, buf and cap; the reader the rest. */
struct notes_json_field {
        const char *name;
        enum notes_json_type type;
        char *buf;    /* STRING: receives the decoded bytes and a NUL; cap + 1 bytes long */
        size_t cap;   /* STRING: the most bytes the decoded value may have */
        size_t len;   /* STRING: the decoded length */
        uint64_t num; /* UINT: the value */
        bool seen;
};

/**
 * Read one JSON object (RFC 8259) at the start of p[0..len): '{', members, '}', with JSON's
 * whitespace around tokens. Every member must be one of `fields` (at most once) with the
 * value type the field names: no nesting, no null, true, false, negative or fractional number.
 * Strings are decoded (escapes, surrogate pairs into UTF-8); raw bytes 0x80..0xff are kept as
 * they are, unvalidated; a raw control character, a lone surrogate or \u0000 is refused, so a
 * decoded string never holds a NUL. Fields not present keep seen = false.
 * Returns how many bytes the object took (whitespace after it is not consumed), -EINVAL when
 * the text is not such an object, or -E2BIG when a string is longer than its field's cap.
 */
ssize_t notes_json_object(const char *p, size_t len, struct notes_json_field *fields, size_t n);

/** Where notes_json_write_string() sends its bytes; returns 0 or -errno. */
typedef int (*notes_json_put_fn)(void *ctx, const char *data, size_t len);

/**
 * Write s[0..len) as a JSON string literal, quotes included: '"' and '\' escaped, \n \r \t by
 * name, other bytes below 0x20 as \u00XX, everything else as it is (the same escaping as
 * m0_res_json_string()). Returns 0 or the first error `put` returned.
 */
int notes_json_write_string(notes_json_put_fn put, void *ctx, const char *s, size_t len);

#endif /* NOTES_JSON_H */
