/* SPDX-License-Identifier: MIT */
/* accesslog.h: accesslog.c, what each request leaves behind: its counts and duration for the
 * metrics (O1), a log line (M0_ACCESS_LOG=on) or a structured journald entry
 * (M0_ACCESS_LOG=journal, O2), the entries queued per loop and sent at the end of the loop's turn,
 * together in as few datagrams as they fit (D81, D98). */
#ifndef M0_ACCESSLOG_H
#define M0_ACCESSLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct m0_conn;
struct m0_hctx;
struct m0_io;
struct m0_loop;

/* Where journald takes entries of its native protocol: a datagram holds one, or several each
 * ended by an empty line (D98). */
#define M0__JOURNAL_SOCKET "/run/systemd/journal/socket"

/* How a request was answered, for what it leaves behind. */
enum m0_answer_kind {
        M0_ANSWER_HANDLER = 0, /* a handler or the router answered, on the loop or the pool */
        M0_ANSWER_REFUSAL,     /* the host refused it (400, 408, 413, 414, 431, 503, …) */
        M0_ANSWER_STREAM,      /* a stream began (its head, `: open`, its replay) */
};

/* One answered request. The strings need not be NUL-terminated nor text: they are copied as
 * bytes (a refused request's target may hold anything, D81). */
struct m0_access {
        enum m0_answer_kind kind;
        const char *method;
        size_t method_len;
        const char *path; /* without the query */
        size_t path_len;
        int status;
        size_t bytes;    /* of the response queued: status line, headers and body */
        size_t body_len; /* the body's length, as the plain line has always said it */
        bool on_pool;
        const char *proto; /* the protocol that carried it: "http/1.1", "h2" (NULL: HTTP/1.1) */
};

/*
 * A loop's journal entries on their way to journald: each an entry of the native protocol ended
 * by an empty line, back to back in `bytes`, entry i ending at ends[i]; those that follow one
 * another leave together in one datagram of at most `dgram` bytes (D98). At most `cap` (M0_ACCESS_LOG_QUEUE) wait;
 * past it a new entry is dropped and counted. Its loop's thread only.
 */
struct m0_journal {
        int fd;           /* SOCK_DGRAM, non-blocking, connected to M0__JOURNAL_SOCKET; -1 */
        struct m0_io *io; /* the fd's entry in its loop's epoll set */
        bool waiting;     /* journald's queue was full: EPOLLOUT is asked for */
        struct m0_buf bytes;
        size_t *ends; /* where each queued entry ends in `bytes`, its empty line included */
        uint32_t n, cap;
        size_t dgram;     /* the bytes of entries one datagram carries (D98); 0: one entry each */
        char prefix[160]; /* the fields every entry of this loop shares, then MESSAGE's key */
        size_t prefix_len;
        uint64_t retry_ms;    /* a refused socket is opened again no sooner than this */
        uint64_t dropped_log; /* drops not logged yet */
        uint64_t logged_ms;   /* when drops were last logged */
};

/* Count request `a` answered on `c` (the metrics), time it, and log it (the line, or a journal
 * entry queued), as its loop's `observe` and M0_ACCESS_LOG say. The loop's thread. */
void m0__request_done(struct m0_conn *c, const struct m0_access *a);
/* What a refused request's head holds so far: its method and target, as bytes (none: "-"). */
void m0__request_refused(struct m0_conn *c, int status, size_t bytes);

/* Set `j` up for loop `index` of app `app`, with nothing acquired yet (fd -1). */
void m0__journal_prepare(struct m0_journal *j, const char *app, int index, uint32_t cap);
/* Connect the loop's journal socket and register it (as `io`, no events) in loop `el`. 0 or
 * -errno. */
int m0__journal_open(struct m0_journal *j, struct m0_loop *el, struct m0_io *io);
/* Send what is queued, as far as journald takes it now; what it does not take waits for
 * EPOLLOUT. At the end of each turn, and when the socket is writable again. */
void m0__journal_flush(struct m0_hctx *l);
/* The loop is ending: send what is queued, waiting for journald until `deadline_ms` (the
 * drain's bound) at most; what is left is dropped, counted and logged. */
void m0__journal_finish(struct m0_hctx *l, uint64_t deadline_ms);
void m0__journal_destroy(struct m0_journal *j);
/* Whether journald takes datagrams at M0__JOURNAL_SOCKET: 0, or -errno with `why` filled (the
 * `access-log` check, R2). */
int m0__journal_probe(char *why, size_t len);

#endif /* M0_ACCESSLOG_H */
