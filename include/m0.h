/* SPDX-License-Identifier: MIT */
/* m0.h: the whole public interface of libm0, an HTTP/1.1 application host for systemd. */
#ifndef M0_H
#define M0_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define M0_EXPORT __attribute__((visibility("default")))
#define M0_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define M0_EXPORT
#define M0_PRINTF(a, b)
#endif

/*
 * Threads, in every contract below:
 *   - a *loop* thread runs one event loop and owns its connections;
 *   - a *pool* thread runs the blocking routes of one loop (M0_BLOCKING_THREADS);
 *   - the *producer* thread runs the app's step;
 *   - the *coordinator* is the thread that called m0_main().
 * A handler state made by `make` is used by the one thread it was made for and no other.
 */

/** An HTTP request being served. Owned by the host; valid until the handler returns. */
typedef struct m0_req m0_req;
/** The response to one request. Owned by the host; valid until the handler returns. */
typedef struct m0_res m0_res;
/** Where m0_app.backfill writes: one beginning stream's replay of one channel (AP2). Owned by
 *  the host; valid during the callback. */
typedef struct m0_backfill m0_backfill;

/** What kind of thread a handler state was made for. */
typedef enum m0_thread_kind {
        M0_THREAD_LOOP = 0,     /**< an event loop */
        M0_THREAD_POOL = 1,     /**< a pool thread of one loop */
        M0_THREAD_PRODUCER = 2, /**< the producer thread */
} m0_thread_kind;

/** Where a handler state lives; passed to `make`. Read-only, valid during the call. */
typedef struct m0_handler_info {
        m0_thread_kind kind; /**< the thread the state is made for */
        int loop;            /**< loop index (0..threads-1); -1 for the producer */
        int thread;          /**< pool thread index within the loop, -1 unless kind is POOL */
        int loops;           /**< how many loops this process runs */
        /**
         * The longest a handler may run on a loop thread: a quarter of the watchdog's interval
         * when systemd set one (W1; a loop held past half of it is named stuck and the process
         * restarted), 0 when it did not. Work that may take longer belongs on the pool.
         */
        unsigned loop_handler_max_ms;
} m0_handler_info;

/** A route's handler: fill `res` for `req`. Returns 0, or -errno for a 500. */
typedef int (*m0_handler_fn)(m0_req *req, m0_res *res, void *state);

/** Route flags. */
enum {
        M0_ROUTE_PREFIX = 1u << 0,   /**< `path` matches itself and everything below it */
        M0_ROUTE_BLOCKING = 1u << 1, /**< runs on the loop's pool when there is one */
};

/**
 * One entry of an app's route table; the table ends with an entry whose `path` is NULL. The
 * table is compiled once at start: an entry it cannot take is a refusal (exit 78) naming it.
 * Write entries with M0_ROUTE() and end the table with M0_ROUTE_END.
 */
typedef struct m0_route {
        const char *method; /**< "GET", "POST", …; NULL matches every method (HEAD matches GET) */
        /**
         * The path (T1): segments between '/', each exact, or `:name` (one non-empty segment),
         * or, last, `*name` (the rest of the path, possibly empty): "/todos/:id", or "/files/"
         * then "*rest". With M0_ROUTE_PREFIX, a string prefix of the request path instead.
         * Captures are read with m0_req_param().
         */
        const char *path;
        m0_handler_fn handler;
        unsigned flags; /**< M0_ROUTE_* */
        /* Members added after the four above: an initializer that stops before them sets 0. */
        /**
         * The largest request body this route takes, in bytes (Q6); 0: --max-body-bytes, which
         * is also the most it can be (a larger value is lowered to it). A body past it is
         * answered 413 before it is read.
         */
        uint64_t max_body_bytes;
        /**
         * The media type a request body must have ("application/json"; a type with that suffix,
         * "application/merge-patch+json", is taken too). A body of another type, or without a
         * Content-Type, is answered 415 before it is read. NULL: any type.
         */
        const char *content_type;
        /**
         * A directory or one file this route serves instead of a handler (SF1, SF2; write it
         * with M0_FILES()). Opened once at start: one it cannot open refuses the start (exit 78)
         * naming the route. A directory serves what the route's last `*name` capture names
         * beneath it ("/app/" then "*rest": "/app/js/app.js" is js/app.js), resolved by the
         * kernel so that nothing outside it is served, whatever the encoding: `..`, an absolute
         * path, a symlink that leaves it; a name with a segment that starts with '.' (".git",
         * ".env") is never served; a directory gives its index.html, and no listing. Its answers
         * carry Content-Type (/etc/mime.types), ETag, Last-Modified and Accept-Ranges, answer
         * If-None-Match and If-Modified-Since with 304, one Range with 206 (416 when none of it
         * is in the file; several ranges get the whole file), and a precompressed sibling
         * (`app.js.zst`, `.br`, `.gz`, not older than the file) goes to a client that accepts its
         * coding, with Vary: Accept-Encoding. GET and HEAD only; `handler` must be NULL. A file
         * missing, a dotfile and a name outside all get the same 404, through m0_app.error.
         */
        const char *files;
        /**
         * With `files`: the Cache-Control its answers carry; NULL: "no-cache" (a cache keeps the
         * file but asks again, and gets a 304 while it is unchanged), and for a fingerprinted
         * name, `stem.<8 to 64 hex digits, one a letter>.ext` ("app.3f2a9c1b.js"),
         * "public, max-age=31536000, immutable".
         */
        const char *cache_control;
        /**
         * The origins a WebSocket on this route accepts (WS3), NULL-terminated: exact
         * `Origin` values ("https://app.example"), or the one entry "*" (any). NULL: an `Origin`
         * whose host and port are not the request's `Host` is refused 403 before the upgrade
         * (cross-site WebSocket hijacking); a request without `Origin` (no browser) is taken.
         */
        const char *const *ws_origins;
} m0_route;

/**
 * One route table entry (AP1): the method, the path and the handler, then any other member by
 * name: `M0_ROUTE("GET", "/todos/:id", get_todo)`, `M0_ROUTE("POST", "/todos", create,
 * .flags = M0_ROUTE_BLOCKING, .max_body_bytes = 4096, .content_type = "application/json")`.
 * Every member it leaves out is 0. A table of these builds warning-free under -Wall -Wextra,
 * where positional entries that stop before the last member (`{"GET", "/", h, 0}`) warn
 * (-Wmissing-field-initializers). Also a C++20 initializer.
 */
#define M0_ROUTE(method_, path_, ...)                                                              \
        {                                                                                          \
                .method = (method_), .path = (path_), .handler = __VA_ARGS__                       \
        }
/**
 * A route that serves files (SF1): `M0_FILES("/app/" "*rest", "/usr/share/m0/todo-www")` serves a
 * directory, `M0_FILES("/favicon.ico", "/srv/www/favicon.ico")` one file; any other member by
 * name after them (`.cache_control = "public, max-age=3600"`). GET and HEAD.
 */
#define M0_FILES(path_, ...)                                                                       \
        {                                                                                          \
                .method = "GET", .path = (path_), .files = __VA_ARGS__                             \
        }
/** The entry that ends a route table. */
#define M0_ROUTE_END                                                                               \
        {                                                                                          \
                .path = NULL                                                                       \
        }

/**
 * CORS (SPEC Q5): which web origins may call the app from a browser. Read once at start; an
 * entry it cannot take is a refusal (exit 78).
 */
typedef struct m0_cors {
        /**
         * NULL-terminated: exact origins, as browsers send them ("https://app.example",
         * "http://localhost:5173"), or the one entry "*" (any origin, without credentials).
         */
        const char *const *origins;
        /** Nonzero: answers to a listed origin say Access-Control-Allow-Credentials: true (the
         *  browser then sends cookies). Refused with "*". */
        int credentials;
        /** How long a browser may keep a preflight's answer, in seconds; 0: 600. */
        unsigned max_age;
        /** Response headers a script may read beyond the safelisted ones ("Location, ETag"),
         *  or NULL. */
        const char *expose_headers;
} m0_cors;

/**
 * The app descriptor, handed to m0_main(). Every callback is optional except that an app
 * needs `routes` or `dispatch` to answer anything.
 */
typedef struct m0_app {
        /** Short name, used in logs (`M0_APP=`) and `--version`. Required. */
        const char *name;
        /** How many handler states the app can be served by; 0 = no limit (SPEC R3). */
        unsigned max_threads;
        /**
         * Build one handler state. Called once on every loop thread, every pool thread and
         * (when `step` is set) for the producer, each on the thread that will use it.
         * Returns 0 and sets *ret_state, or -errno; any failure refuses the start (exit 78).
         * `ret_err`/`err_len` take a one-line reason for the log.
         */
        int (*make)(const m0_handler_info *info, void **ret_state, char *ret_err, size_t err_len);
        /** Free a state `make` built; called on the thread that owns it. Accepts NULL. */
        void (*free)(void *state);
        /** Routes, tried in order; NULL-path terminated. May be NULL. */
        const m0_route *routes;
        /** Called when no route's path matched (NULL: 404); a path that matched a route of another
         *  method is 405 whatever this is (T2). Runs on the loop. */
        m0_handler_fn dispatch;
        /**
         * Producer step, run on the producer thread with the producer's state. Returns the
         * milliseconds until it wants to run again (> 0), 0 to stop cleanly, or -errno (the
         * producer stops and logs; serving goes on).
         */
        int64_t (*step)(void *state);
        /** Runs on each loop every M0_APP_TICK_MS (else `tick_ms`) with that loop's state (S3). */
        void (*tick)(void *state);
        /** The tick's period when M0_APP_TICK_MS is not set; 0 = no tick unless it is. */
        unsigned tick_ms;
        /**
         * An app-defined check, run after the host's own (R2) by serving and the doctor alike.
         * Returns 0 when the configuration can be served, or -errno with a one-line finding and
         * fix (naming the M0_<APP>_* variable) written into the buffers: the start is refused (78).
         * Runs on the coordinator before any handler exists.
         */
        int (*check)(char *finding, size_t finding_len, char *fix, size_t fix_len);
        /** CORS for every answer (Q5); NULL: the host adds no Access-Control-* header. */
        const m0_cors *cors;
        /** M0_APP_* flags. */
        unsigned flags;
        /**
         * The answers the host makes by itself (SPEC Q4): 400, 404, 405, 408, 409, 411, 413,
         * 414, 415, 417, 431, 500, 503. Called with `res` empty but for its status, which it may
         * not change; it adds headers and a body, in the app's language. `detail` is one short
         * sentence for a person ("no route matches this path"); `req` is the request when the
         * host read one whole (a 404, a 405, a route's 400 or 415, a handler's failure,
         * m0_req_json()'s refusals), NULL when the refusal comes before (a malformed head, a
         * timeout, a body too large, an answer to a body held back for 100-continue). The host
         * keeps its framing and its lines: `Connection: close` where the connection closes,
         * `Allow` on a 405, the CORS fields (Q5). A 204 to OPTIONS or a preflight is no error
         * and does not come here. Runs on the thread answering (a loop, or a pool thread for what
         * happened there) with that thread's state, and must not block. Returns 0, or -errno:
         * then, as when it changed the status or opened a stream, the built-in answer goes out
         * instead, and the log says so. NULL: the built-in answer (text/plain, or
         * application/problem+json under M0_APP_ERRORS_JSON).
         */
        int (*error)(m0_req *req, m0_res *res, int status, const char *detail, void *state);
        /**
         * Backfill a replay that has a hole (AP2): called for each channel of a beginning stream
         * that gave up events after the client's Last-Event-ID `last_id`, after the stream's
         * M0_EVENT_GAP event of it and before its kept events (the oldest of which is `oldest`)
         * and the live ones, which wait for it (within --max-output-bytes) and come none twice.
         * It writes what the app's own store holds of `channel` after `last_id` with
         * m0_backfill_event(). Runs on a pool thread of the stream's loop with that thread's
         * state, or on the loop with the loop's when it has no pool. Returns 0, or -errno: the
         * stream is then closed (logged), for its client to reconnect. A WebSocket's
         * last_event_id is backfilled alike: the events come as messages with a null id after
         * its M0_EVENT_GAP message and before the kept ones (a failure closes it 1011). NULL: no
         * backfill.
         */
        int (*backfill)(m0_backfill *bf, const char *channel, uint64_t last_id, uint64_t oldest,
                        void *state);
} m0_app;

/** App flags (m0_app.flags). */
enum {
        /** The host's own answers are RFC 9457 `application/problem+json`: {"type", "title",
         *  "status", "detail"}; without it they are `text/plain`. */
        M0_APP_ERRORS_JSON = 1u << 0,
};

/**
 * Run the whole host: parse flags and M0_* variables, refuse what will not be served, take the
 * sockets, build every handler, tell systemd READY=1, serve until SIGTERM/SIGINT, drain.
 * Call once, from main(). Returns the process exit status: 0, 1 (a loop died or the drain ran
 * past its bound), 2 (usage), 78 (refused).
 */
M0_EXPORT int m0_main(const m0_app *app, int argc, char **argv);

/* --- Requests (any thread that is running the handler) --- */

/** The method, upper case ("GET"). Never NULL. */
M0_EXPORT const char *m0_req_method(const m0_req *req);
/** The path without the query, not decoded ("/x/search"). Never NULL. */
M0_EXPORT const char *m0_req_path(const m0_req *req);
/** The raw query string without '?', "" when absent. Never NULL. */
M0_EXPORT const char *m0_req_query_string(const m0_req *req);
/**
 * The first value of the query parameter `name`, percent- and '+'-decoded, NUL-terminated
 * ("" for a parameter without '='). NULL when absent, or when that first value decodes to a
 * NUL (%00), which no C string can hold. The string lives until the handler returns.
 */
M0_EXPORT const char *m0_req_query(m0_req *req, const char *name);
/**
 * The one value of the query parameter `name` (AP1), as m0_req_query() decodes it ("" for a
 * parameter without '='), into *ret_value, which lives until the handler returns. Returns 0, or:
 *   -ENOENT   no such parameter;
 *   -EEXIST   given more than once;
 *   -EBADMSG  a malformed %-escape, or one that decodes to a NUL (%00);
 *   -EILSEQ   the value is not UTF-8 (jansson, and so a JSON answer, takes only UTF-8);
 *   -ENOMEM.
 * A handler that returns the -errno it got (`if ((r = m0_req_query_get(…)) < 0) return r;`) is
 * answered 400 with a detail naming the parameter and what is wrong with it, through the app's
 * `error` callback, as m0_req_json()'s refusals are. *ret_value is written on success alone.
 */
M0_EXPORT int m0_req_query_get(m0_req *req, const char *name, const char **ret_value);
/**
 * Query parameter `name` as a whole number in [min, max], written as the configuration's numbers
 * are (AP1): decimal digits alone, no sign, no space, no '+' ("limit=+5" and "limit=%205" are
 * not numbers). Returns 0 and sets *ret; or what m0_req_query_get() returns (-ENOENT, -EEXIST,
 * -EBADMSG, -EILSEQ, -ENOMEM); or -EINVAL (not such a number), -ERANGE (above max), -EDOM
 * (below min). A handler that returns it is answered 400 naming the parameter and the bound.
 */
M0_EXPORT int m0_req_query_int(m0_req *req, const char *name, long min, long max, long *ret);
/* --- Route captures (SPEC T1) --- */

/**
 * The capture `name` of the route that matched (`:name` or `*name` in its path),
 * percent-decoded ('+' stays '+'), NUL-terminated; NULL when that route has no such capture
 * (or the request went to `dispatch`). A capture that decodes to a NUL, holds an encoded '/' in
 * a `:name` segment, a malformed escape, or a "." or ".." segment was answered 400 before the
 * handler ran. The string lives until the handler returns.
 */
M0_EXPORT const char *m0_req_param(const m0_req *req, const char *name);

/** The first value of header `name` (case-insensitive), NUL-terminated; NULL when absent. */
M0_EXPORT const char *m0_req_header(const m0_req *req, const char *name);
/** How many header fields the request carried. */
M0_EXPORT size_t m0_req_header_count(const m0_req *req);
/** Header field `i` (0-based, in order); -ERANGE past the end. Pointers live until return. */
M0_EXPORT int m0_req_header_at(const m0_req *req, size_t i, const char **ret_name,
                               const char **ret_value);
/** The request body (chunked bodies arrive decoded); *ret_len is set. Never NULL. */
M0_EXPORT const void *m0_req_body(const m0_req *req, size_t *ret_len);
/** The index of the loop that owns this request's connection. */
M0_EXPORT int m0_req_loop(const m0_req *req);
/** The pool thread running this handler within its loop, or -1 on the loop itself. */
M0_EXPORT int m0_req_thread(const m0_req *req);

/* --- Responses (the thread running the handler, before it returns) --- */

/** Set the status code (100..999 excluded: 200..599 accepted). Default 200. -EINVAL otherwise. */
M0_EXPORT int m0_res_status(m0_res *res, int status);
/**
 * Add a header. Names and values are copied; CR, LF and NUL are refused with -EINVAL, as are
 * the host's own framing headers (Content-Length, Transfer-Encoding, Date, Server, Connection).
 * -ENOBUFS past 64 headers or 16 KiB of them; -ENOMEM.
 */
M0_EXPORT int m0_res_header(m0_res *res, const char *name, const char *value);
/** Add a header whose value is formatted (at most 1023 bytes, else -ENOBUFS). Same rules as
 *  m0_res_header(): -EINVAL, -ENOBUFS, -ENOMEM. */
M0_EXPORT int m0_res_headerf(m0_res *res, const char *name, const char *fmt, ...) M0_PRINTF(3, 4);
/** Append `len` bytes to the body. -ENOMEM when it cannot grow. */
M0_EXPORT int m0_res_write(m0_res *res, const void *data, size_t len);
/** Append formatted text to the body. */
M0_EXPORT int m0_res_printf(m0_res *res, const char *fmt, ...) M0_PRINTF(2, 3);
/** Append `s` as a JSON string literal, quotes included, escaped by jansson as RFC 8259
 *  requires. -EINVAL when `s` is not UTF-8; -ENOMEM. */
M0_EXPORT int m0_res_json_string(m0_res *res, const char *s);
/** Shorthand: status, `content-type: application/json`, and a formatted body. */
M0_EXPORT int m0_res_json(m0_res *res, int status, const char *fmt, ...) M0_PRINTF(3, 4);
/** Shorthand: status, `content-type: text/plain; charset=utf-8`, and the text. */
M0_EXPORT int m0_res_text(m0_res *res, int status, const char *text);
/**
 * An RFC 9457 answer, `application/problem+json`, as the host writes its own (AP1):
 * {"type":"about:blank","title":…,"status":…,"detail":…}. `title` NULL: the status's own phrase
 * ("Not Found"), which is what "about:blank" asks for; `detail` NULL: no "detail" member. Bytes
 * that are not UTF-8 are written as U+FFFD. The body the handler wrote before is replaced; its
 * headers stay. Returns 0, -EINVAL for a status outside 400..599, -ENOBUFS (the header bounds),
 * -ENOMEM.
 */
M0_EXPORT int m0_res_problem(m0_res *res, int status, const char *title, const char *detail);
/** Send this answer's body as it is, never compressed (SPEC SF4; D183): for an answer that
 *  carries a secret (a CSRF token, a session's data) beside anything the request supplied, so
 *  that its compressed length cannot tell an attacker the secret (BREACH). Any thread running
 *  the handler; holds until the answer is sent. Without it, an answer of a compressible type
 *  (text, JSON, JavaScript, XML, ...) of at least M0_COMPRESS_MIN_BYTES goes compressed with the
 *  best coding the request's Accept-Encoding takes (zstd, br, gzip) and Vary: Accept-Encoding,
 *  unless its Sec-Fetch-Site is cross-site or same-site, or it set Content-Encoding itself; an
 *  event stream never is. */
M0_EXPORT void m0_res_no_compress(m0_res *res);

/* --- Cookies, forms and JSON (SPEC Q1–Q3; the thread running the handler) --- */

/**
 * The value of the first cookie named `name` in the request's Cookie fields (RFC 6265: pairs
 * split at ';', whitespace around them dropped, double quotes around a value stripped).
 * NULL when absent, when `name` is not a token, or when that first cookie's value is not RFC
 * 6265's (*cookie-octet: no space, comma, backslash, control or non-ASCII byte). The string
 * lives until the handler returns.
 */
M0_EXPORT const char *m0_req_cookie(m0_req *req, const char *name);

/** m0_res_cookie()'s SameSite. */
typedef enum m0_same_site {
        M0_SAMESITE_UNSET = 0, /**< no SameSite attribute: the browser's default */
        M0_SAMESITE_STRICT,
        M0_SAMESITE_LAX,
        M0_SAMESITE_NONE, /**< sent on cross-site requests too; requires `secure` */
} m0_same_site;

/** m0_cookie_attrs.max_age that removes the cookie now (`Max-Age=0`). */
#define M0_COOKIE_DELETE (-1)

/** A cookie's attributes. All zeros: no attribute, a session cookie of the request's path. */
typedef struct m0_cookie_attrs {
        int64_t max_age;    /**< seconds it lives; 0: until the browser closes; M0_COOKIE_DELETE */
        const char *path;   /**< `Path=`, starting with '/'; NULL for none */
        const char *domain; /**< `Domain=` (letters, digits, '-', '.'); NULL for none */
        bool secure;        /**< `Secure`: HTTPS only */
        bool http_only;     /**< `HttpOnly`: not readable by scripts */
        m0_same_site same_site;
} m0_cookie_attrs;

/**
 * Add one `Set-Cookie` header: `name=value`, then HttpOnly, SameSite, Path, Domain, Max-Age
 * and Secure as `attrs` asks (NULL: none). Several calls add several headers. -EINVAL for a
 * name that is not a token, a value that is not *cookie-octet (RFC 6265 4.1.1), a path that
 * does not start with '/' or holds a control character or ';', a domain of other bytes than a
 * host name's, SameSite=None without `secure`, a `__Secure-` name without `secure`, a
 * `__Host-` one without `secure` or Path=/, or with a domain (RFC 6265bis), or a max_age below
 * M0_COOKIE_DELETE; -ENOBUFS past 4096 bytes of name and value, 1024 of a path or domain, or
 * the response's header bounds; -ENOMEM.
 */
M0_EXPORT int m0_res_cookie(m0_res *res, const char *name, const char *value,
                            const m0_cookie_attrs *attrs);

/**
 * The value of field `name` of an `application/x-www-form-urlencoded` body, percent- and
 * '+'-decoded, NUL-terminated, as m0_req_query() reads the query (a body without Content-Type
 * is read as a form too). NULL when the Content-Type is another, the name is absent, or the
 * field is not one a form sends: given more than once, without '=', with a malformed %-escape,
 * or decoding to a NUL. The string lives until the handler returns.
 */
M0_EXPORT const char *m0_req_form(m0_req *req, const char *name);

/**
 * The one value of field `name` of an `application/x-www-form-urlencoded` body (a body without
 * Content-Type is read as a form too), decoded as m0_req_form() decodes it, into *ret_value,
 * which lives until the handler returns (AP1). Returns 0, or:
 *   -EMEDIUMTYPE  the Content-Type is another;
 *   -ENOENT       no such field;
 *   -EEXIST       given more than once;
 *   -EBADMSG      without '=', with a malformed %-escape, or decoding to a NUL (%00);
 *   -EILSEQ       the value is not UTF-8;
 *   -ENOMEM.
 * A handler that returns the -errno it got is answered 415 (-EMEDIUMTYPE, naming the type) or
 * 400 (naming the field and what is wrong with it), as m0_req_json()'s refusals are.
 * *ret_value is written on success alone.
 */
M0_EXPORT int m0_req_form_get(m0_req *req, const char *name, const char **ret_value);

/**
 * Parse the body as JSON (RFC 8259, any value at the top, a repeated object key refused) into
 * *ret, a value the request owns: valid until the handler returns, freed then (json_incref()
 * it to keep it). A second call returns the same value, or the same error. -EMEDIUMTYPE when
 * the Content-Type is not `application/json` or `application/<x>+json` (parameters allowed),
 * -EBADMSG when the body is not JSON (the detail names jansson's reason, line and column) or
 * nests arrays and objects deeper than M0_JSON_MAX_DEPTH (64), -ENOMEM. A handler that
 * returns the -EMEDIUMTYPE or -EBADMSG it got is answered 415 or 400 with that detail,
 * through the app's `error` callback (`if ((r = m0_req_json(req, &j)) < 0) return r;`).
 */
M0_EXPORT int m0_req_json(m0_req *req, json_t **ret);

/**
 * Shorthand: status, `content-type: application/json`, and `json` serialized (compact, no
 * trailing newline) as the body. `json` is not stolen. -EINVAL for a status m0_res_status()
 * refuses, a NULL `json`, or one jansson cannot write (a string that is not UTF-8); -ENOMEM.
 */
M0_EXPORT int m0_res_json_value(m0_res *res, int status, const json_t *json);

/**
 * m0_publish() on `channel` with `data` serialized as compact JSON (one `data:` line), `event`
 * and `flags` as m0_publish() takes them (M0_PUBLISH_TRANSIENT). `data` is not stolen. Returns
 * what m0_publish() returns, or -EINVAL for a NULL `data` or one jansson cannot write.
 */
M0_EXPORT int64_t m0_publish_json(const char *channel, const char *event, const json_t *data,
                                  unsigned flags);

/* --- Streams and the bus (SPEC S1, H9, N1–N6) --- */

/**
 * Turn this response into a server-sent event stream: `200`, `content-type: text/event-stream`,
 * `cache-control: no-cache`, `x-accel-buffering: no` plus the headers the handler added, first
 * bytes `: open` and `retry:` (M0_SSE_RETRY_MS), then heartbeats. It follows no channel until
 * m0_res_subscribe() gives it one. The status and body the handler set are ignored. Only on a
 * loop: from a pool thread it returns -EPERM and the host answers 409 (P2). Returns 0 or -errno.
 */
M0_EXPORT int m0_res_stream(m0_res *res);

/**
 * Make this response a stream (as m0_res_stream()) that follows `channel` (N1): an exact name
 * of 1–200 bytes of visible ASCII, or a prefix ending in `*` (`room:*`; `*` alone follows every
 * channel). Call it once per channel, after checking the request: which channels a client may
 * follow is the handler's to decide. When the stream begins, every kept event of its channels
 * after the request's `Last-Event-ID` is replayed in id order (all that is kept when that id is
 * past the newest), then live events, none twice. A channel that gave up an event after that
 * id (past M0_REPLAY_PER_CHANNEL or M0_REPLAY_BYTES) is first named in an M0_EVENT_GAP event,
 * before anything else of it (AP2). Ids are the bus's, one sequence for every channel. The name is copied; a channel named twice is
 * followed once. A refusal undoes the stream and every channel given before it, so that the
 * handler's own answer (a 400, a 403) is what the client gets. Only on a loop. Returns 0,
 * -EINVAL (not a channel's name), -ENOSPC (past M0_STREAM_MAX_CHANNELS channels), -EPERM (on a
 * pool thread: 409), -ENOMEM.
 */
M0_EXPORT int m0_res_subscribe(m0_res *res, const char *channel);

/**
 * The event a stream gets, before any replayed one, for each of its channels that cannot be
 * replayed whole after the client's `Last-Event-ID` (AP2): no `id:` line (the client's
 * Last-Event-ID stays the last event it saw), `event: m0-gap`, and one `data:` line,
 * `{"channel":"counter:gap","oldest":7}`: the channel, and the id of the oldest event it still
 * keeps, which the replay then begins with. What came between is the app's to give from its own
 * store, if it keeps one: m0_app.backfill writes it after this event. Not sent when the id is past the newest one (everything kept is then
 * replayed), nor on a bus shared through PostgreSQL.
 */
#define M0_EVENT_GAP "m0-gap"

/**
 * Write one event of the app's own history into the stream m0_app.backfill is filling, before
 * the events the bus kept: `event` (NULL: no `event:` line; no CR or LF) and `data` (NULL:
 * empty) split into `data:` lines as m0_publish() writes them, with no `id:` line (ids are the
 * bus's; the client's Last-Event-ID stays the last event it saw). Only inside the callback, on
 * its thread. Returns 0, -EINVAL (a CR or LF in `event`), -ENOBUFS (the stream's backfill past
 * --max-output-bytes: the event is not written), -ENOMEM.
 */
M0_EXPORT int m0_backfill_event(m0_backfill *bf, const char *event, const char *data);

/** m0_publish() flags. */
enum {
        /** Delivered to the streams that follow its channel and never kept: no id, no replay
         *  (heartbeats, progress). */
        M0_PUBLISH_TRANSIENT = 1u << 0,
};

/**
 * Publish one event on `channel` (1–200 bytes of visible ASCII, not ending in `*`) to the streams
 * that follow it, on every loop. `event` may be NULL (no `event:` line); `data` (NULL: empty) is
 * split into one `data:` line per line. A kept event takes the next id of the bus's one sequence
 * (ids never go backwards, N3) and is kept for replay, the channel's last M0_REPLAY_PER_CHANNEL
 * within M0_REPLAY_BYTES; a loop's queue holds it until that loop has delivered it, in id order
 * (a loop whose queue overflows, M0_CHANNEL_FRAMES, closes the streams that would miss it, so that
 * their clients reconnect with Last-Event-ID). A channel nobody follows costs no loop anything.
 * Any thread, any time after READY; never blocks on a subscriber.
 * Returns the event's id (> 0), 0 for an M0_PUBLISH_TRANSIENT event, or -errno (-EINVAL for a
 * channel that is not a name, CR or LF in `event`, or an unknown flag; -ENOMEM; -ENOTCONN when no
 * host is running; -EOVERFLOW past the last id there is, 2^62).
 * With M0_BUS=postgresql://… a kept event is queued for the database, which gives its id: the
 * return is 0 ("accepted, id not known yet"; it reaches every host's streams, this one's too,
 * with that id), -EINVAL also for text that is not UTF-8, and -EAGAIN when M0_BUS_QUEUE events
 * wait already. A transient event stays on this host.
 */
M0_EXPORT int64_t m0_publish(const char *channel, const char *event, const char *data,
                             unsigned flags);

/** The id of the newest event published so far (0 before the first). Any thread. */
M0_EXPORT uint64_t m0_bus_last_id(void);

/* --- WebSocket (SPEC WS1-WS4; RFC 6455 over HTTP/1.1, framed by wslay) --- */

/**
 * One WebSocket. Owned by the host; valid in its callbacks, and until on_close returns. A thread
 * that keeps it longer (to send from a pool thread or the producer) holds a reference:
 * m0_ws_ref() before it leaves the callback, m0_ws_unref() when done; sends after the close
 * then return -EPIPE.
 */
typedef struct m0_ws m0_ws;

/** A message's kind: m0_ws_callbacks.on_message's `type` and m0_ws_send()'s. */
enum {
        M0_WS_TEXT = 1,   /**< UTF-8 text (checked on the way in: invalid text is closed 1007) */
        M0_WS_BINARY = 2, /**< bytes */
};

/**
 * What a WebSocket calls, each on the loop that owns its connection, with the `state` given to
 * m0_res_websocket(). Every member may be NULL.
 */
typedef struct m0_ws_callbacks {
        /** The 101 (HTTP/2's 200) went out whole: the WebSocket is open. Sends made here follow
         *  it. Not called for a WebSocket that never opened. */
        void (*on_open)(m0_ws *ws, void *state);
        /** One whole message (fragments joined, at most M0_WS_MAX_MESSAGE bytes; text is
         *  UTF-8). `data` is valid during the call. */
        void (*on_message)(m0_ws *ws, int type, const void *data, size_t len, void *state);
        /** The WebSocket ended, once: `code` is the close code the client sent, or the one m0
         *  sent (1001 at the drain, 1002, 1007, 1008, 1009), or 1006 when the connection was
         *  lost without one. Free what `state` holds for it here: once m0_res_websocket()
         *  accepted it, this runs exactly once, opened or not, with 1006 when it never opened
         *  (the client left before the 101 went whole, the handler failed after accepting, no
         *  memory); `ws` is then NULL when no WebSocket was made. */
        void (*on_close)(m0_ws *ws, int code, void *state);
} m0_ws_callbacks;

/**
 * Accept this request as a WebSocket (WS1), after the host's checks of RFC 6455 4.2.1: GET,
 * HTTP/1.1, `Upgrade: websocket`, `Connection: Upgrade`, a `Sec-WebSocket-Key` of 16 bytes in
 * base64 and `Sec-WebSocket-Version: 13`, and the route's origins (m0_route.ws_origins). When
 * the handler returns, the host answers 101 (with the headers the handler added) and the
 * connection speaks WebSocket; the channels the handler followed with m0_res_subscribe() come
 * as text messages. Over HTTP/2 the same route and handler take RFC 8441's extended CONNECT
 * (`:protocol websocket`, seen as a GET): the version and the origins are checked alike, the
 * answer is `:status 200` and the stream carries the WebSocket. Returns 0; or -EPROTO, for the handler to return, and the host answers its
 * refusal: 400 (not a WebSocket handshake), 426 with `Sec-WebSocket-Version: 13` (no upgrade
 * asked, or another version), 403 (a foreign Origin); -EPERM on a pool thread (the host answers
 * 409 whatever the handler returns); -EIO when the handshake's digest cannot be made. `cb` may
 * be NULL (a WebSocket that only follows channels); it and `state` must outlive the WebSocket.
 * The loop's thread, in a handler.
 */
M0_EXPORT int m0_res_websocket(m0_res *res, const m0_ws_callbacks *cb, void *state);

/**
 * Send one message of `type` (M0_WS_TEXT, M0_WS_BINARY), `len` bytes copied. Any thread: from
 * another than the WebSocket's loop it goes through that loop's mailbox, in order. 0; -EPIPE
 * once the WebSocket is closing or closed; -ENOBUFS when it would pass the output bound
 * (M0_WS_MAX_QUEUED: the WebSocket is then closed 1008, as a slow consumer); -EINVAL for a bad
 * type; -ENOMEM.
 */
M0_EXPORT int m0_ws_send(m0_ws *ws, int type, const void *data, size_t len);

/**
 * Close with `code` (1000-1003, 1007-1011, or 3000-4999) and `reason` (UTF-8, at most 123
 * bytes; NULL for none), after the messages already sent: every m0_ws_send() made before it, on
 * the loop or from another thread, goes first, in order, within M0_WS_MAX_QUEUED; sends after it
 * return -EPIPE. Any thread. 0; -EINVAL for a code or
 * reason RFC 6455 does not allow; -EPIPE when it is closing already; -ENOMEM.
 */
M0_EXPORT int m0_ws_close(m0_ws *ws, int code, const char *reason);

/** Keep `ws` past its on_close (any thread). */
M0_EXPORT void m0_ws_ref(m0_ws *ws);
/** Let go of a reference m0_ws_ref() took (any thread). Accepts NULL. */
M0_EXPORT void m0_ws_unref(m0_ws *ws);

/* --- Logging (SPEC J1) --- */

/** Priorities, as syslog(3) numbers them. */
enum m0_log_prio {
        M0_LOG_CRIT = 2,
        M0_LOG_ERR = 3,
        M0_LOG_WARNING = 4,
        M0_LOG_NOTICE = 5,
        M0_LOG_INFO = 6,
        M0_LOG_DEBUG = 7,
};

/**
 * Log one line for the app: under journald a structured entry with PRIORITY, M0_APP and, on a
 * loop or one of its pool threads, M0_LOOP; elsewhere one line on stderr. Any thread.
 */
M0_EXPORT void m0_log(int priority, const char *fmt, ...) M0_PRINTF(2, 3);

/* --- Parallel compute (SPEC P4) --- */

/** One slice of a parallel computation: work on item `i`. Returns 0, or -errno to fail it. */
typedef int (*m0_parallel_fn)(size_t i, void *ctx);

/**
 * Run body(i, ctx) for every i in [0, n), spread over the host-wide compute pool
 * (M0_COMPUTE_THREADS, default the CPUs this process may use) with the calling thread taking
 * part, and return when every item is done: 0, or the first -errno a body returned (every item
 * still runs); -EINVAL when `body` is NULL. Callable from a loop, a pool thread or the producer;
 * a call from inside a body, before READY, during the drain, or with M0_COMPUTE_THREADS=0 runs
 * inline on the caller.
 *
 * A body runs on any thread at the same time as other items: it may read what the caller
 * shares through `ctx` and write only what item `i` owns (its own slot of an output array). It
 * must not touch the m0_req/m0_res of the calling handler, publish, sleep on a lock the caller
 * holds, or block for long. It is for a heavy view that is rarely busy or a producer's step,
 * where cores are idle; on a hot route under load it adds nothing — the cores are already busy.
 */
M0_EXPORT int m0_parallel_for(size_t n, m0_parallel_fn body, void *ctx);

/** The library's version string ("0.2.0"). */
M0_EXPORT const char *m0_version(void);

#ifdef __cplusplus
}
#endif
#endif /* M0_H */
