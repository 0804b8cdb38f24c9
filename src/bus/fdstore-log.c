/* SPDX-License-Identifier: MIT */
/* fdstore-log.c: the event ids and the replay store's channels in a memfd kept in systemd's fd store
 * (B4, N6): a log of the kept frames, appended as they are published. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "bus.h"
#include "fdstore-log.h"

/*
 * Layout of the memfd (native endianness: only this host on this machine reads it back), D77:
 *   struct store_head, then a circular log of `log_size` bytes. The log holds one record per
 *   frame the replay store keeps (struct rec_head, the channel's name, the frame's text), at
 *   positions that only grow (modulo log_size in the memfd). Records between `tail` and `head`
 *   may be live; a frame the replay store gave up leaves a dead record behind. To append, the
 *   oldest live record at the tail is copied to the head (forwarded) before the tail moves past
 *   it, so that a quiet channel's frames survive however much a busy one writes, and a crash at
 *   any point leaves every live frame at least once in [tail, head) (twice at worst: the copies
 *   have one id, and the restore keeps one). A record is written before `head` names it, and
 *   `head` before `tail` passes its older copy.
 */

#define STORE_MAGIC "m0bus-2"
#define STORE_VERSION 2u
#define V1_MAGIC "m0bus-1"
#define V1_CAP_MAX 1048576u /* M0_REPLAY_FRAMES' range, which version 1 was made within */
#define LOG_MIN (32u * 1024)
#define LOG_MAX (512u * 1024 * 1024)

struct store_head {
        char magic[8];
        uint32_t version;
        uint32_t pad;
        uint64_t log_size;
        uint64_t last_id;
        uint64_t head; /* bytes ever appended to the log */
        uint64_t tail; /* where the oldest record that may be live starts */
};

struct rec_head {
        uint64_t id;
        uint32_t len; /* the whole record's */
        uint16_t chan_len;
        uint16_t pad;
};

/* Version 1's header (D19), read only for its last id. */
struct v1_head {
        char magic[8];
        uint32_t version;
        uint32_t cap;
        uint64_t data_size;
        uint64_t last_id;
        uint64_t data_head;
};

/* The shape and the log's ends are kept here as well as in the mapping: every offset is computed
 * from these copies, checked once at open, so no later write into the shared pages can send an
 * access outside them. */
struct m0_store {
        int fd;
        size_t size;
        struct store_head *head;
        char *log;
        uint64_t log_size;
        uint64_t w_head, w_tail;
        size_t live;          /* bytes of the live records */
        struct m0_list order; /* the frames whose copy is live, in log order */
        size_t nlive;
};

size_t m0__store_log_size(size_t replay_bytes)
{
        size_t n = replay_bytes / 2 & ~(size_t)7;
        return n < LOG_MIN ? LOG_MIN : n > LOG_MAX ? LOG_MAX : n;
}

/* A record longer than this is not copied: the frame is served and replayed while this process
 * lives, and not after a restart. With the log kept at most half live, a copy always fits. */
static uint64_t rec_max(const struct m0_store *s)
{
        return s->log_size / 8;
}

static uint64_t rec_len(const struct m0_frame *f)
{
        return sizeof(struct rec_head) + f->chan_len + (f->end - f->start);
}

/* ---- the log, circular: bytes in and out at a position ---- */

static void put(struct m0_store *s, uint64_t pos, const void *src, size_t n)
{
        size_t at = (size_t)(pos % s->log_size);
        size_t first = n < s->log_size - at ? n : (size_t)(s->log_size - at);
        memcpy(s->log + at, src, first);
        memcpy(s->log, (const char *)src + first, n - first);
}

static void get(const struct m0_store *s, uint64_t pos, void *dst, size_t n)
{
        size_t at = (size_t)(pos % s->log_size);
        size_t first = n < s->log_size - at ? n : (size_t)(s->log_size - at);
        memcpy(dst, s->log + at, first);
        memcpy((char *)dst + first, s->log, n - first);
}

static uint64_t space(const struct m0_store *s)
{
        return s->log_size - (s->w_head - s->w_tail);
}

/* `f`'s record at the head, which then names it. */
static void append(struct m0_store *s, struct m0_frame *f)
{
        struct rec_head rh = {.id = f->id, .len = (uint32_t)rec_len(f), .chan_len = f->chan_len};
        put(s, s->w_head, &rh, sizeof(rh));
        put(s, s->w_head + sizeof(rh), f->chan, f->chan_len);
        put(s, s->w_head + sizeof(rh) + f->chan_len, f->bytes + f->start, f->end - f->start);
        f->log_pos = s->w_head;
        m0__list_push(&s->order, &f->log);
        s->w_head += rh.len;
        /* Publish order: the record, then the head that names it. */
        atomic_thread_fence(memory_order_release);
        s->head->head = s->w_head;
}

/*
 * One step towards room at the head: the tail moves to the oldest live record, past dead ones,
 * or that record is forwarded to the head (its copy at the tail is then dead). A record that
 * cannot be forwarded -- only after a restore, before the log was kept half live -- loses its
 * copy rather than the log its head.
 */
static void lose_copy(struct m0_store *s, struct m0_frame *f)
{
        m0__list_unlink(&s->order, &f->log);
        f->log_pos = M0__NO_LOG;
        s->live -= rec_len(f);
        s->nlive--;
}

static void clean(struct m0_store *s, bool forward)
{
        struct m0_frame *o = M0__LIST_FIRST(&s->order, struct m0_frame, log);
        if (!o || o->log_pos > s->w_tail) {
                s->w_tail = o ? o->log_pos : s->w_head;
                atomic_thread_fence(memory_order_release);
                s->head->tail = s->w_tail;
                return;
        }
        if (!forward || space(s) < rec_len(o)) {
                lose_copy(s, o);
                return;
        }
        m0__list_unlink(&s->order, &o->log);
        append(s, o);
}

void m0__store_keep(struct m0_store *s, struct m0_frame *f)
{
        uint64_t len = rec_len(f);
        if (len > rec_max(s))
                return;
        /* A quarter of the log free before each append: room for any record, and for the
         * forwarding of any record while making room. With the log at most half live, one
         * lap of forwarding gets there; the bound on the steps is for a log just restored. */
        for (size_t steps = 2 * s->nlive + 2; space(s) < s->log_size / 4 && steps; steps--)
                clean(s, true);
        while (space(s) < len)
                clean(s, false);
        append(s, f);
        s->live += len;
        s->nlive++;
}

void m0__store_drop(struct m0_store *s, struct m0_frame *f)
{
        if (f->log_pos != M0__NO_LOG)
                lose_copy(s, f);
}

size_t m0__store_live(const struct m0_store *s)
{
        return s->live;
}

void m0__store_set_last(struct m0_store *s, uint64_t last)
{
        atomic_thread_fence(memory_order_release);
        s->head->last_id = last;
}

/* ---- the memfd ---- */

static int map(struct m0_store *s, int fd, size_t size)
{
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                return -errno;
        s->fd = fd;
        s->size = size;
        s->head = p;
        s->log = (char *)p + sizeof(struct store_head);
        return 0;
}

static void unmap(struct m0_store *s)
{
        if (s->head)
                munmap(s->head, s->size);
        s->head = NULL;
}

/* A new memfd of a log of `log_size` bytes, empty, ids after `last`. */
static int create(struct m0_store *s, uint64_t log_size, uint64_t last)
{
        int fd = memfd_create(M0__STORE_NAME, MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t size = sizeof(struct store_head) + (size_t)log_size;
        struct store_head h = {.version = STORE_VERSION, .log_size = log_size, .last_id = last};
        memcpy(h.magic, STORE_MAGIC, sizeof(h.magic));
        if (ftruncate(fd, (off_t)size) < 0 || pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
                int r = errno ? -errno : -EIO;
                close(fd);
                return r;
        }
        *s = (struct m0_store){.log_size = log_size};
        int r = map(s, fd, size);
        if (r < 0)
                close(fd);
        return r;
}

/*
 * Version 1 (D19, D46): its header checked as it was, for its last id alone -- its frames name no
 * channel, so no stream could follow them. 0 and *ret_last, or -EBADMSG with `why`.
 */
static int open_v1(int fd, uint64_t size, uint64_t *ret_last, char *why, size_t why_len)
{
        struct v1_head h;
        if (size < sizeof(h) || pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
                snprintf(why, why_len, "%llu bytes, shorter than version 1's %zu-byte header",
                         (unsigned long long)size, sizeof(h));
                return -EBADMSG;
        }
        uint64_t ds = (uint64_t)h.cap * 512 < 65536 ? 65536 : (uint64_t)h.cap * 512;
        if (h.version != 1 || h.cap < 1 || h.cap > V1_CAP_MAX || h.data_size != ds ||
            size != sizeof(h) + (uint64_t)h.cap * 24 + ds) {
                snprintf(why, why_len, "a version 1 header of another shape (%u slots, %llu bytes)",
                         h.cap, (unsigned long long)size);
                return -EBADMSG;
        }
        if (h.last_id > M0__STORE_COUNT_MAX) {
                snprintf(why, why_len, "last id %llu, past the largest id (%llu)",
                         (unsigned long long)h.last_id, (unsigned long long)M0__STORE_COUNT_MAX);
                return -EBADMSG;
        }
        *ret_last = h.last_id;
        return 0;
}

/* The header of a passed version 2 store against the shape this host writes (D46, D77). */
static int check_head(const struct store_head *h, uint64_t size, char *why, size_t why_len)
{
        if (h->version != STORE_VERSION) {
                snprintf(why, why_len, "version %u, where this host writes %u", h->version,
                         STORE_VERSION);
                return -EBADMSG;
        }
        if (h->log_size < LOG_MIN || h->log_size > LOG_MAX) {
                snprintf(why, why_len, "a log of %llu bytes, outside %u-%u",
                         (unsigned long long)h->log_size, LOG_MIN, LOG_MAX);
                return -EBADMSG;
        }
        if (size != sizeof(*h) + h->log_size) {
                snprintf(why, why_len, "%llu bytes, where a log of %llu takes %llu",
                         (unsigned long long)size, (unsigned long long)h->log_size,
                         (unsigned long long)(sizeof(*h) + h->log_size));
                return -EBADMSG;
        }
        if (h->last_id > M0__STORE_COUNT_MAX || h->head > M0__STORE_COUNT_MAX) {
                snprintf(why, why_len, "last id %llu or head %llu, past %llu",
                         (unsigned long long)h->last_id, (unsigned long long)h->head,
                         (unsigned long long)M0__STORE_COUNT_MAX);
                return -EBADMSG;
        }
        if (h->tail > h->head || h->head - h->tail > h->log_size) {
                snprintf(why, why_len, "records from %llu to %llu, more than its log holds",
                         (unsigned long long)h->tail, (unsigned long long)h->head);
                return -EBADMSG;
        }
        return 0;
}

/*
 * Open a memfd handed back by systemd. Its content came from outside the process: any process of
 * the unit may have stored an entry of this name, so the header is checked whole before anything
 * past it is read. 0 (a version 2 store, mapped), 1 (version 1: *ret_last is its last id, the
 * memfd is closed), or -EBADMSG (or a failed call's -errno) with `why` saying what does not fit.
 */
static int open_passed(struct m0_store *s, int fd, uint64_t *ret_last, char *why, size_t why_len)
{
        struct stat st;
        struct store_head h;
        if (fstat(fd, &st) < 0) {
                int r = -errno;
                snprintf(why, why_len, "fstat: %s", strerror(-r));
                return r;
        }
        if (!S_ISREG(st.st_mode)) {
                snprintf(why, why_len, "not a memfd or regular file");
                return -EBADMSG;
        }
        uint64_t size = (uint64_t)st.st_size;
        if (size >= 8 && pread(fd, h.magic, 8, 0) == 8 && !memcmp(h.magic, V1_MAGIC, 8)) {
                int r = open_v1(fd, size, ret_last, why, why_len);
                return r < 0 ? r : 1;
        }
        if (size < sizeof(h) || pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
                snprintf(why, why_len, "%llu bytes, shorter than its %zu-byte header",
                         (unsigned long long)size, sizeof(h));
                return -EBADMSG;
        }
        if (memcmp(h.magic, STORE_MAGIC, sizeof(h.magic)) != 0) {
                snprintf(why, why_len, "no '%s' header", STORE_MAGIC);
                return -EBADMSG;
        }
        int r = check_head(&h, size, why, why_len);
        if (r < 0)
                return r;
        *s = (struct m0_store){.log_size = h.log_size, .w_head = h.head, .w_tail = h.tail};
        r = map(s, fd, (size_t)size);
        if (r < 0)
                snprintf(why, why_len, "mmap: %s", strerror(-r));
        return r;
}

/*
 * Whether bytes[0, len) are one event exactly as bus.c writes it for `id`: "id: <id>\n", at most
 * one "event: <name>\n" (a name of one byte or more), one or more "data: <text>\n", then "\n" --
 * with no NUL or CR anywhere and no LF but those. Anything else sent on a stream could end the
 * event early or start one the bus never published.
 */
static bool frame_is_event(const char *bytes, size_t len, uint64_t id)
{
        char idl[32];
        int n = snprintf(idl, sizeof(idl), "id: %llu\n", (unsigned long long)id);
        if (len < (size_t)n || memcmp(bytes, idl, (size_t)n) != 0)
                return false;
        bool data = false;
        for (size_t at = (size_t)n; at < len;) {
                const char *line = bytes + at;
                const char *nl = memchr(line, '\n', len - at);
                if (!nl)
                        return false;
                size_t ll = (size_t)(nl - line);
                if (ll == 0)
                        return data && at + 1 == len;
                if (memchr(line, '\r', ll) || memchr(line, '\0', ll))
                        return false;
                if (ll >= 6 && !memcmp(line, "data: ", 6))
                        data = true;
                else if (at != (size_t)n || ll < 8 || memcmp(line, "event: ", 7) != 0)
                        return false;
                at += ll + 1;
        }
        return false;
}

struct restored {
        struct m0_fvec got; /* the records that are frames, in log order */
        size_t refused;     /* records that were not */
        uint64_t first_refused;
        const char *why; /* what was wrong with the first refused record */
};

static void refused(struct restored *out, uint64_t id, const char *why)
{
        if (!out->refused++) {
                out->first_refused = id;
                out->why = why;
        }
}

/* What is wrong with record `rh` of bytes `body` (its channel, then its text), or NULL. */
static const char *check_rec(const struct rec_head *rh, const char *body, uint64_t last)
{
        size_t tl = rh->len - sizeof(*rh) - rh->chan_len;
        if (!m0__channel_ok(body, rh->chan_len) || body[rh->chan_len - 1] == '*')
                return "a channel name this host never writes";
        if (rh->id == 0 || rh->id > last)
                return "an id past the store's last";
        if (!frame_is_event(body + rh->chan_len, tl, rh->id))
                return "bytes that are not one well-formed event";
        return NULL;
}

/*
 * Read the records of [tail, head) into frames. Each header is read once into a local copy and
 * checked against the shape fixed at open before its bytes are copied: a length this host
 * writes, inside [tail, head); then its channel and its text, one well-formed event of its own
 * id. A record that fails is counted and skipped; one whose length cannot be trusted ends the
 * walk, since the next record starts where its length says.
 */
static int scan(struct m0_store *s, uint64_t last, struct restored *out)
{
        for (uint64_t pos = s->w_tail; pos < s->w_head;) {
                struct rec_head rh;
                uint64_t left = s->w_head - pos;
                if (left >= sizeof(rh))
                        get(s, pos, &rh, sizeof(rh));
                if (left < sizeof(rh) || rh.chan_len < 1 || rh.chan_len > M0__CHANNEL_MAX ||
                    rh.len < sizeof(rh) + rh.chan_len + 2 || rh.len > rec_max(s) || rh.len > left) {
                        refused(out, left >= sizeof(rh) ? rh.id : 0,
                                "a length this host never writes");
                        return 0;
                }
                char *body = malloc(rh.len - sizeof(rh));
                if (!body)
                        return -ENOMEM;
                get(s, pos + sizeof(rh), body, rh.len - sizeof(rh));
                const char *bad = check_rec(&rh, body, last);
                struct m0_frame *f = NULL;
                if (!bad) {
                        f = m0__frame_restored(rh.id, body, rh.chan_len, body + rh.chan_len,
                                               rh.len - sizeof(rh) - rh.chan_len);
                        if (!f || m0__fvec_push(&out->got, f) < 0) {
                                free(f);
                                free(body);
                                return -ENOMEM;
                        }
                        f->log_pos = pos;
                }
                free(body);
                if (bad)
                        refused(out, rh.id, bad);
                pos += rh.len;
        }
        return 0;
}

static int by_pos(const void *a, const void *b)
{
        uint64_t x = (*(struct m0_frame *const *)a)->log_pos;
        uint64_t y = (*(struct m0_frame *const *)b)->log_pos;
        return x < y ? -1 : x > y;
}

struct gather {
        struct m0_frame **v;
        size_t n, cap;
};

static void gather(void *ud, struct m0_frame *f)
{
        struct gather *g = ud;
        if (f->log_pos == M0__NO_LOG)
                return;
        if (g->n < g->cap)
                g->v[g->n++] = f;
        else
                f->log_pos = M0__NO_LOG; /* no memory to list it: its copy is dead */
}

/* The log's order again, from the frames kept that have a copy in it. */
static void relist(struct m0_store *s, struct m0_bus *b)
{
        struct gather g = {.cap = b->replay.frames};
        g.v = malloc((g.cap ? g.cap : 1) * sizeof(*g.v));
        if (!g.v)
                g.cap = 0;
        m0__replay_each(&b->replay, gather, &g);
        if (g.n > 1)
                qsort(g.v, g.n, sizeof(*g.v), by_pos);
        for (size_t i = 0; i < g.n; i++) {
                m0__list_push(&s->order, &g.v[i]->log);
                s->live += rec_len(g.v[i]);
                s->nlive++;
        }
        free(g.v);
}

/* By id; of two copies of one id, the later in the log first. */
static int by_id_later(const void *a, const void *b)
{
        const struct m0_frame *x = *(struct m0_frame *const *)a, *y = *(struct m0_frame *const *)b;
        if (x->id != y->id)
                return x->id < y->id ? -1 : 1;
        return x->log_pos > y->log_pos ? -1 : x->log_pos < y->log_pos;
}

/*
 * The frames read from a store, in id order, into the replay store, which keeps what its bounds
 * allow (writing copies into `into`, or none while NULL: the frames keep the places they were
 * read from). Two copies of one id -- a forward that a crash caught between its write and the
 * tail's move -- are one frame: the later.
 */
static void feed(struct m0_bus *b, struct restored *n, struct m0_store *into)
{
        if (n->got.n > 1)
                qsort(n->got.v, n->got.n, sizeof(*n->got.v), by_id_later);
        b->replay.store = into;
        for (size_t i = 0; i < n->got.n; i++) {
                struct m0_frame *f = n->got.v[i];
                if (i > 0 && n->got.v[i - 1]->id == f->id)
                        continue;
                if (into)
                        f->log_pos = M0__NO_LOG;
                (void)m0__replay_keep(&b->replay, f);
        }
        m0__fvec_free(&n->got);
}

/* ", 3 not restored (the first, id 7, has …)" when records were refused, else "". */
static void describe_refused(const struct restored *r, char *out, size_t len)
{
        out[0] = '\0';
        if (r->refused)
                snprintf(out, len, "; %zu not restored (the first, id %llu, has %s)", r->refused,
                         (unsigned long long)r->first_refused, r->why);
}

static void forget(struct m0_store *s)
{
        unmap(s);
        if (s->fd >= 0)
                close(s->fd);
        *s = (struct m0_store){.fd = -1};
}

/*
 * A passed version 2 store `s`: its frames back into the bus. Of the shape this host writes, it
 * stays as it is in the fd store (*ret_keep); of another (M0_REPLAY_BYTES changed), the frames go
 * into a new memfd of the new shape, which replaces it.
 */
static int take_back(struct m0_store *s, struct m0_bus *b, uint64_t log_size, bool *ret_keep,
                     char *msg, size_t msg_len)
{
        struct restored n = {0};
        uint64_t last = s->head->last_id;
        int r = scan(s, last, &n);
        if (r < 0) {
                m0__fvec_free(&n.got);
                return r;
        }
        char refusals[200];
        describe_refused(&n, refusals, sizeof(refusals));
        b->last_id = last;
        /* A store with records refused is written anew with the good ones alone: kept, it
         * would hold the bad ones until its tail passed them, refused again at every start. */
        bool resized = s->log_size != log_size;
        *ret_keep = !resized && !n.refused;
        if (*ret_keep) {
                feed(b, &n, NULL);
                relist(s, b);
                b->replay.store = s;
        } else {
                forget(s);
                (void)sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" M0__STORE_NAME);
                r = create(s, log_size, last);
                if (r < 0) {
                        m0__fvec_free(&n.got);
                        return r;
                }
                feed(b, &n, s);
        }
        snprintf(msg, msg_len,
                 "event state taken back from the fd store%s: ids continue after %llu, %llu "
                 "frame%s of %zu channel%s kept for replay%s",
                 *ret_keep ? ""
                 : resized ? " into a log of a new size (M0_REPLAY_BYTES changed)"
                           : " into a new log",
                 (unsigned long long)last, (unsigned long long)b->replay.frames,
                 b->replay.frames == 1 ? "" : "s", b->replay.map.n, b->replay.map.n == 1 ? "" : "s",
                 refusals);
        return 0;
}

/* The passed fd, or a new store in its place: 0 with *ret_keep when the passed one stays. */
static int open_or_replace(struct m0_store *s, struct m0_bus *b, int fd, uint64_t log_size,
                           bool *ret_restored, bool *ret_keep, char *msg, size_t msg_len)
{
        char why[200];
        uint64_t last = 0;
        int r = open_passed(s, fd, &last, why, sizeof(why));
        if (r == 0) {
                *ret_restored = true;
                r = take_back(s, b, log_size, ret_keep, msg, msg_len);
                if (r < 0)
                        forget(s);
                return r;
        }
        /* Out of the store first, so that it cannot come back at the next start even if the
         * new state cannot be made. */
        close(fd);
        (void)sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" M0__STORE_NAME);
        if (r == 1) {
                *ret_restored = true;
                b->last_id = last;
                snprintf(msg, msg_len,
                         "event state of version 1 taken back from the fd store: ids continue "
                         "after %llu; its frames name no channel and are not kept",
                         (unsigned long long)last);
        } else {
                snprintf(msg, msg_len,
                         "the fd store's '%s' is not m0 event state (%s): replaced by a new one",
                         M0__STORE_NAME, why);
        }
        return create(s, log_size, last);
}

int m0__store_open(struct m0_bus *b, size_t replay_bytes, int passed_fd, bool *ret_restored,
                   char *msg, size_t msg_len)
{
        uint64_t log_size = m0__store_log_size(replay_bytes);
        size_t whole = b->replay.limit;
        *ret_restored = false;
        struct m0_store *s = calloc(1, sizeof(*s));
        if (!s) {
                if (passed_fd >= 0)
                        close(passed_fd);
                return -ENOMEM;
        }
        s->fd = -1;
        /* M0_REPLAY_BYTES bounds the process's copy and the memfd together (D77). */
        b->replay.limit = whole > log_size ? whole - log_size : 0;
        b->replay.log_limit = (size_t)log_size / 2;
        bool keep = false;
        int r;
        if (passed_fd < 0) {
                r = create(s, log_size, 0);
                snprintf(msg, msg_len,
                         "no event state in the fd store (a first start, or systemctl stop "
                         "flushed it)");
        } else {
                r = open_or_replace(s, b, passed_fd, log_size, ret_restored, &keep, msg, msg_len);
        }
        if (r < 0) {
                b->replay.store = NULL;
                b->replay.limit = whole;
                free(s);
                return r;
        }
        b->store = s;
        b->replay.store = s;
        if (!keep) {
                int fd = s->fd;
                r = sd_pid_notify_with_fds(0, 0, "FDSTORE=1\nFDNAME=" M0__STORE_NAME, &fd, 1);
                if (r <= 0) {
                        /* Nobody keeps it: serve without persistence rather than not at all. */
                        snprintf(msg + strlen(msg), msg_len - strlen(msg),
                                 "; the fd store did not take the state (%s)",
                                 r < 0 ? strerror(-r) : "no NOTIFY_SOCKET");
                }
        }
        return 0;
}

void m0__store_close(struct m0_bus *b)
{
        struct m0_store *s = b->store;
        if (!s)
                return;
        forget(s);
        free(s);
        b->store = NULL;
        b->replay.store = NULL;
}
