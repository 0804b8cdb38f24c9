/* SPDX-License-Identifier: MIT */
/* cors.c: the app's CORS (Q5): the origins it names, checked once at start; what a preflight is
 * answered and what every other answer carries. A client's Origin is compared, never echoed. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "cors.h"
#include "head-checks.h"

static int refuse(struct m0_cors_c *c, const char *fix, const char *fmt, ...) M0_PRINTF(3, 4);
static int refuse(struct m0_cors_c *c, const char *fix, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, sizeof(c->err), fmt, ap);
        va_end(ap);
        snprintf(c->fix, sizeof(c->fix), "%s", fix);
        c->on = false;
        return -EINVAL;
}

static bool lower_alnum(char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}

/* An origin as a browser serializes it (RFC 6454): scheme "://" host [":" port], lower case,
 * no path, no user. NULL when it is one, else what is wrong with it. */
static const char *origin_fault(const char *o)
{
        const char *p = o;
        if (!(*p >= 'a' && *p <= 'z'))
                return "it does not begin with a lower-case scheme";
        while (lower_alnum(*p) || *p == '+' || *p == '-' || *p == '.')
                p++;
        if (strncmp(p, "://", 3) != 0)
                return "it has no \"://\" after its scheme";
        p += 3;
        const char *host = p;
        if (*p == '[') {
                while (*p && *p != ']' && (lower_alnum(*p) || *p == ':' || *p == '.' || *p == '['))
                        p++;
                if (*p++ != ']')
                        return "its IPv6 address is not closed by ']'";
        } else {
                while (lower_alnum(*p) || *p == '-' || *p == '.')
                        p++;
        }
        if (*p && *p != ':' && *p != '/')
                return "it holds a byte browsers never send in an origin (upper case, '@', ...)";
        if (p == host)
                return "it has no host";
        if (*p == ':') {
                const char *port = ++p;
                while (*p >= '0' && *p <= '9')
                        p++;
                if (p == port || p - port > 5)
                        return "its port is not 1 to 5 digits";
        }
        if (*p == '/')
                return "it has a path (an origin ends after its host and port)";
        if (*p)
                return "it holds a byte browsers never send in an origin (upper case, '@', ...)";
        return NULL;
}

/* A comma-separated list of field names (tokens), OWS around each. */
static bool token_list(const char *s, size_t n)
{
        size_t i = 0, items = 0;
        while (i < n) {
                while (i < n && (s[i] == ' ' || s[i] == '\t'))
                        i++;
                size_t t = i;
                while (i < n && m0__tchar[(unsigned char)s[i]])
                        i++;
                if (i == t)
                        return false;
                items++;
                while (i < n && (s[i] == ' ' || s[i] == '\t'))
                        i++;
                if (i < n && s[i++] != ',')
                        return false;
                if (i == n && s[n - 1] == ',')
                        return false;
        }
        return items > 0;
}

static int check_origins(struct m0_cors_c *c, const char *const *list)
{
        size_t n = 0;
        for (; list[n]; n++) {
                const char *o = list[n];
                if (!strcmp(o, "*")) {
                        c->any = true;
                        continue;
                }
                if (!strcmp(o, "null"))
                        return refuse(c, "list the origins that may call the app",
                                      "the origin 'null' is what sandboxed documents, file: "
                                      "pages and redirects send: allowing it allows them all");
                const char *why = origin_fault(o);
                if (why || strlen(o) > 255)
                        return refuse(c, "write an origin as https://app.example[:port]",
                                      "the origin '%.120s' cannot match: %s", o,
                                      why ? why : "it is longer than 255 bytes");
        }
        if (n == 0)
                return refuse(c, "name at least one origin, or set cors to NULL",
                              "cors names no origin");
        if (c->any && n > 1)
                return refuse(c, "list exact origins, or '*' alone",
                              "'*' with other origins: '*' already allows every origin");
        c->origins = list;
        c->norigins = n;
        return 0;
}

int m0__cors_build(struct m0_cors_c *c, const m0_cors *def)
{
        memset(c, 0, sizeof(*c));
        if (!def)
                return 0;
        if (!def->origins)
                return refuse(c, "name at least one origin, or set cors to NULL",
                              "cors names no origin");
        int r = check_origins(c, def->origins);
        if (r < 0)
                return r;
        if (def->credentials && c->any)
                return refuse(c, "list the exact origins that may send credentials",
                              "credentials with '*': a browser refuses them from every origin, "
                              "and m0 never sends Access-Control-Allow-Credentials with '*'");
        if (def->expose_headers && !token_list(def->expose_headers, strlen(def->expose_headers)))
                return refuse(c, "list header names separated by commas: Location, ETag",
                              "expose_headers '%.120s' is not a list of header names",
                              def->expose_headers);
        c->on = true;
        c->credentials = def->credentials != 0;
        c->max_age = def->max_age ? def->max_age : M0__CORS_MAX_AGE;
        c->expose = def->expose_headers;
        return 0;
}

const char *m0__cors_allowed(const struct m0_cors_c *c, const char *origin, size_t olen)
{
        if (!c->on || !origin)
                return NULL;
        if (c->any)
                return "*";
        for (size_t i = 0; i < c->norigins; i++)
                if (strlen(c->origins[i]) == olen && memcmp(c->origins[i], origin, olen) == 0)
                        return c->origins[i];
        return NULL;
}

static int line(struct m0_buf *out, const char *name, const char *value)
{
        return m0__buf_printf(out, "%s: %s\r\n", name, value);
}

/* Allow-Origin, and -Credentials for a listed origin. */
static int allow_origin(const struct m0_cors_c *c, const char *allowed, struct m0_buf *out)
{
        int r = line(out, "Access-Control-Allow-Origin", allowed);
        if (r == 0 && c->credentials && !c->any)
                r = line(out, "Access-Control-Allow-Credentials", "true");
        return r;
}

int m0__cors_answer(const struct m0_cors_c *c, const char *origin, size_t olen, struct m0_buf *out)
{
        const char *allowed = c->any ? "*" : m0__cors_allowed(c, origin, olen);
        int r = 0;
        /* With "*" every answer is the same for every origin; a list makes them differ. */
        if (!c->any)
                r = line(out, "Vary", "Origin");
        if (r == 0 && allowed)
                r = allow_origin(c, allowed, out);
        if (r == 0 && allowed && c->expose)
                r = line(out, "Access-Control-Expose-Headers", c->expose);
        return r;
}

/* The requested header names, lower case, ", " between them, when each is a token. */
static int allow_headers(const char *s, size_t n, struct m0_buf *out)
{
        if (!s || !token_list(s, n))
                return 0; /* not asked, or not safe to repeat: the browser refuses the headers */
        int r = m0__buf_append(out, "Access-Control-Allow-Headers: ", 30);
        bool first = true;
        for (size_t i = 0; r == 0 && i < n;) {
                while (s[i] == ' ' || s[i] == '\t' || s[i] == ',')
                        i++;
                size_t t = i;
                while (i < n && m0__tchar[(unsigned char)s[i]])
                        i++;
                if (i == t)
                        break;
                if (!first)
                        r = m0__buf_append(out, ", ", 2);
                first = false;
                for (size_t k = t; r == 0 && k < i; k++) {
                        char ch = s[k] >= 'A' && s[k] <= 'Z' ? (char)(s[k] + 32) : s[k];
                        r = m0__buf_append(out, &ch, 1);
                }
                while (i < n && (s[i] == ' ' || s[i] == '\t'))
                        i++;
        }
        return r == 0 ? m0__buf_append(out, "\r\n", 2) : r;
}

int m0__cors_preflight(const struct m0_cors_c *c, const char *origin, size_t olen,
                       const char *methods, const char *req_headers, size_t rhlen,
                       struct m0_buf *out)
{
        const char *allowed = m0__cors_allowed(c, origin, olen);
        int r = line(out, "Vary", "Origin, Access-Control-Request-Headers");
        if (r == 0 && allowed)
                r = allow_origin(c, allowed, out);
        if (r == 0 && allowed)
                r = line(out, "Access-Control-Allow-Methods", methods);
        if (r == 0 && allowed)
                r = allow_headers(req_headers, rhlen, out);
        if (r == 0 && allowed)
                r = m0__buf_printf(out, "Access-Control-Max-Age: %u\r\n", c->max_age);
        return r;
}
