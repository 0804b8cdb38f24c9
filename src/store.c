/* SPDX-License-Identifier: MIT */
/* store.c: the event-id counter and the replay ring in a memfd kept in systemd's fd store (B4). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "bus.h"
#include "host.h"
#include "store.h"

/*
 * Layout of the memfd (native endianness: only this host on this machine reads it back):
 *   struct store_head, then `cap` index entries, then `data_size` bytes of frame text used as a
 *   circular byte ring. Entry id % cap describes frame `id`: where its bytes start (a position
 *   that only grows; modulo data_size in the ring) and how long they are. A frame is written
 *   before last_id names it, so a crash in the middle of a publish loses only that frame, whose
 *   id no client has seen (delivery follows the store).
 */

#define STORE_MAGIC "m0bus-1"
#define STORE_VERSION 1u
#define NOT_KEPT UINT32_MAX

struct store_entry {
        uint64_t id;
        uint64_t pos;
        uint32_t len;
        uint32_t pad;
};

struct store_head {
        char magic[8];
        uint32_t version;
        uint32_t cap;
        uint64_t data_size;
        uint64_t last_id;
        uint64_t data_head; /* total bytes ever written to the data ring */
        struct store_entry idx[];
};

/* The shape is kept here as well as in the mapping: every index and ring offset is computed
 * from these copies, checked once at open, so no later write into the shared pages can send an
 * access outside them. */
struct m0_store {
        int fd;
        size_t size;
        struct store_head *head;
        char *data;
        uint32_t cap;
        uint64_t data_size;
};

/* The largest last id or byte count a passed store may hold: the largest id a bus hands out
 * (M0__ID_MAX, 2^62), so a store this host wrote is always taken back. */
#define STORE_COUNT_MAX M0__ID_MAX

static size_t data_size_for(size_t cap)
{
        size_t d = cap * 512;
        return d < 64 * 1024 ? 64 * 1024 : d;
}

static size_t total_size(size_t cap, size_t data_size)
{
        return sizeof(struct store_head) + cap * sizeof(struct store_entry) + data_size;
}

/* Map `fd` whole; s->cap is the shape it was made or checked for. */
static int map(struct m0_store *s, int fd, size_t size)
{
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                return -errno;
        s->fd = fd;
        s->size = size;
        s->head = p;
        s->data =
                (char *)p + sizeof(struct store_head) + (size_t)s->cap * sizeof(struct store_entry);
        return 0;
}

static int create(struct m0_store *s, size_t cap)
{
        int fd = memfd_create("m0-bus", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t ds = data_size_for(cap);
        size_t size = total_size(cap, ds);
        if (ftruncate(fd, (off_t)size) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        /* A fresh memfd reads as zeros: set the header before mapping computes the data area. */
        struct store_head h = {.version = STORE_VERSION, .cap = (uint32_t)cap, .data_size = ds};
        memcpy(h.magic, STORE_MAGIC, sizeof(h.magic));
        if (pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
                close(fd);
                return -EIO;
        }
        s->cap = (uint32_t)cap;
        s->data_size = ds;
        int r = map(s, fd, size);
        if (r < 0)
                close(fd);
        return r;
}

/*
 * Open a memfd handed back by systemd. Its content came from outside the process: any process of
 * the unit may have stored an entry of this name, so every header field is checked against the
 * shape this host writes (D46) before anything past the header is read. Returns 0, or -EBADMSG
 * (or the -errno of a failed call) with `why` saying what does not fit.
 */
static int open_passed(struct m0_store *s, int fd, char *why, size_t why_len)
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
        if ((uint64_t)st.st_size < sizeof(h) || pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
                snprintf(why, why_len, "%lld bytes, shorter than its %zu-byte header",
                         (long long)st.st_size, sizeof(h));
                return -EBADMSG;
        }
        if (memcmp(h.magic, STORE_MAGIC, sizeof(h.magic)) != 0) {
                snprintf(why, why_len, "no '%s' header", STORE_MAGIC);
                return -EBADMSG;
        }
        if (h.version != STORE_VERSION) {
                snprintf(why, why_len, "version %u, where this host writes %u", h.version,
                         STORE_VERSION);
                return -EBADMSG;
        }
        if (h.cap < 1 || h.cap > M0__REPLAY_FRAMES_MAX) {
                snprintf(why, why_len, "%u slots, outside 1-%u", h.cap, M0__REPLAY_FRAMES_MAX);
                return -EBADMSG;
        }
        /* cap is at most 2^20 here, so neither sum below can overflow 64 bits. */
        uint64_t ds = data_size_for(h.cap);
        if (h.data_size != ds) {
                snprintf(why, why_len, "a data ring of %llu bytes, where %u slots take %llu",
                         (unsigned long long)h.data_size, h.cap, (unsigned long long)ds);
                return -EBADMSG;
        }
        uint64_t want = sizeof(h) + (uint64_t)h.cap * sizeof(struct store_entry) + ds;
        if ((uint64_t)st.st_size != want || want > SIZE_MAX) {
                snprintf(why, why_len, "%lld bytes, where %u slots take %llu",
                         (long long)st.st_size, h.cap, (unsigned long long)want);
                return -EBADMSG;
        }
        if (h.last_id > STORE_COUNT_MAX) {
                snprintf(why, why_len, "last id %llu, past the largest id (%llu)",
                         (unsigned long long)h.last_id, (unsigned long long)STORE_COUNT_MAX);
                return -EBADMSG;
        }
        /* Each id adds at most a quarter of the ring (larger frames are not kept), and a publish
         * advances data_head before last_id: no store of ours has written more than this. */
        uint64_t most;
        if (__builtin_mul_overflow(h.last_id + 1, ds / 4, &most) || most > STORE_COUNT_MAX)
                most = STORE_COUNT_MAX;
        if (h.data_head > most) {
                snprintf(why, why_len, "%llu bytes written, more than %llu events can write",
                         (unsigned long long)h.data_head, (unsigned long long)h.last_id + 1);
                return -EBADMSG;
        }
        s->cap = h.cap;
        s->data_size = ds;
        int r = map(s, fd, (size_t)want);
        if (r < 0)
                snprintf(why, why_len, "mmap: %s", strerror(-r));
        return r;
}

static void unmap(struct m0_store *s)
{
        if (s->head)
                munmap(s->head, s->size);
        s->head = NULL;
}

/*
 * Whether bytes[0, len) are one event exactly as bus.c's frame_build() writes it for `id`:
 * "id: <id>\n", at most one "event: <name>\n" (a name of one byte or more), one or more
 * "data: <text>\n", then "\n" -- with no NUL or CR anywhere and no LF but those. Anything else
 * sent on a stream could end the event early or start one the bus never published.
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
        size_t kept;    /* frames put in the bus's ring */
        size_t refused; /* entries that claimed a frame and were not one */
        uint64_t first_refused;
        const char *why; /* what was wrong with the first refused entry */
};

/*
 * Put the kept frames of `s` into the bus's ring: the newest of the last ids that both the
 * store and the ring have room for. Each entry is read once into a local copy and checked
 * against the shape fixed at open before its bytes are copied: inside the bytes written, still
 * within the last ring's worth of them, past the previous frame restored (so the copies add up
 * to one ring at most), and one well-formed event with its own id. An entry that fails is
 * counted and cleared.
 */
static struct restored restore(struct m0_store *s, struct m0_bus *b)
{
        struct store_head *h = s->head;
        struct restored out = {0};
        uint64_t last = h->last_id, written = h->data_head, ds = s->data_size;
        uint64_t room = s->cap < b->cap ? s->cap : b->cap;
        uint64_t first = last >= room ? last - room + 1 : 1;
        uint64_t end = 0; /* where the last frame restored ends */
        for (uint64_t id = first; id && id <= last; id++) {
                struct store_entry e = h->idx[id % s->cap];
                if (e.id != id || e.len == NOT_KEPT)
                        continue; /* never kept, or its slot reused since */
                const char *bad = NULL;
                if (e.len == 0 || e.len > ds / 4)
                        bad = "a length this host never keeps";
                else if (e.pos > written || e.len > written - e.pos)
                        bad = "bytes past those written";
                else if (written - e.pos > ds)
                        continue; /* overwritten since */
                else if (e.pos < end)
                        bad = "bytes overlapping the frame before it";
                struct m0_frame *f = NULL;
                if (!bad) {
                        f = malloc(sizeof(*f) + e.len);
                        if (!f)
                                break;
                        size_t at = (size_t)(e.pos % ds);
                        size_t first_part = e.len < ds - at ? e.len : (size_t)(ds - at);
                        memcpy(f->bytes, s->data + at, first_part);
                        memcpy(f->bytes + first_part, s->data, e.len - first_part);
                        if (!frame_is_event(f->bytes, e.len, id))
                                bad = "bytes that are not one well-formed event";
                }
                if (bad) {
                        /* Reported once: the entry is cleared in the store that goes on. */
                        h->idx[id % s->cap].id = 0;
                        free(f);
                        if (!out.refused++) {
                                out.first_refused = id;
                                out.why = bad;
                        }
                        continue;
                }
                end = e.pos + e.len;
                atomic_init(&f->refs, 1);
                f->id = id;
                f->skip = -1;
                f->start = 0;
                f->end = e.len;
                struct m0_frame **slot = &b->ring[id % b->cap];
                m0__frame_unref(*slot);
                *slot = f;
                out.kept++;
        }
        b->last_id = last;
        b->count = last < b->cap ? (size_t)last : b->cap;
        return out;
}

/* ", 3 not restored (the first, id 7, has …)" when entries were refused, else "". */
static void describe_refused(const struct restored *r, char *out, size_t len)
{
        out[0] = '\0';
        if (r->refused)
                snprintf(out, len, "; %zu not restored (the first, id %llu, has %s)", r->refused,
                         (unsigned long long)r->first_refused, r->why);
}

void m0__store_note(struct m0_bus *b, const struct m0_frame *f)
{
        struct m0_store *s = b->store;
        struct store_head *h = s->head;
        struct store_entry *e = &h->idx[f->id % s->cap];
        size_t len = f->end - f->start;
        if (len > s->data_size / 4) {
                e->id = f->id;
                e->len = NOT_KEPT; /* too large to keep: replay after a restart skips it */
        } else {
                size_t at = (size_t)(h->data_head % s->data_size);
                size_t first_part = len < s->data_size - at ? len : (size_t)(s->data_size - at);
                memcpy(s->data + at, f->bytes + f->start, first_part);
                memcpy(s->data, f->bytes + f->start + first_part, len - first_part);
                e->id = f->id;
                e->pos = h->data_head;
                e->len = (uint32_t)len;
                h->data_head += len;
        }
        /* Publish order: the frame, then the id that names it. */
        atomic_thread_fence(memory_order_release);
        h->last_id = f->id;
}

/* Carry the frames of the passed store `s` (of another cap) into a new memfd of the bus's shape,
 * which replaces it in `s`. */
static int resize(struct m0_store *s, struct m0_bus *b, char *msg, size_t msg_len)
{
        struct m0_store old = *s;
        struct restored n = restore(&old, b);
        uint64_t last = b->last_id;
        unmap(&old);
        close(old.fd);
        *s = (struct m0_store){.fd = -1};
        (void)sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" M0__STORE_NAME);
        int r = create(s, b->cap);
        if (r < 0)
                return r;
        b->store = s;
        for (uint64_t id = last >= b->cap ? last - b->cap + 1 : 1; id && id <= last; id++)
                if (b->ring[id % b->cap] && b->ring[id % b->cap]->id == id)
                        m0__store_note(b, b->ring[id % b->cap]);
        s->head->last_id = last;
        char refused[160];
        describe_refused(&n, refused, sizeof(refused));
        snprintf(msg, msg_len,
                 "event state taken back from the fd store and resized to %zu frames: ids "
                 "continue after %llu, %zu frame%s kept%s",
                 b->cap, (unsigned long long)last, n.kept, n.kept == 1 ? "" : "s", refused);
        return 0;
}

int m0__store_open(struct m0_host *h, int passed_fd, char *msg, size_t msg_len)
{
        struct m0_bus *b = &h->bus;
        struct m0_store *s = calloc(1, sizeof(*s));
        if (!s) {
                if (passed_fd >= 0)
                        close(passed_fd);
                return -ENOMEM;
        }
        s->fd = -1;
        bool send = true;
        int r = 0;
        if (passed_fd < 0) {
                r = create(s, b->cap);
                snprintf(msg, msg_len,
                         "no event state in the fd store (a first start, or systemctl stop "
                         "flushed it): ids start at 1");
        } else {
                char why[160];
                r = open_passed(s, passed_fd, why, sizeof(why));
                if (r < 0) {
                        /* Out of the store first, so that it cannot come back at the next start
                         * even if the new state cannot be made. */
                        close(passed_fd);
                        (void)sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" M0__STORE_NAME);
                        snprintf(msg, msg_len,
                                 "the fd store's '%s' is not m0 event state (%s): replaced by a "
                                 "new one, ids start at 1",
                                 M0__STORE_NAME, why);
                        r = create(s, b->cap);
                } else if (s->cap == b->cap) {
                        struct restored n = restore(s, b);
                        char refused[160];
                        describe_refused(&n, refused, sizeof(refused));
                        snprintf(msg, msg_len,
                                 "event state taken back from the fd store: ids continue after "
                                 "%llu, %zu frame%s kept for replay%s",
                                 (unsigned long long)b->last_id, n.kept, n.kept == 1 ? "" : "s",
                                 refused);
                        send = false; /* it is still in the store */
                } else {
                        /* M0_REPLAY_FRAMES changed: carry the frames into a memfd of the new
                         * shape and swap it in the store. */
                        r = resize(s, b, msg, msg_len);
                }
        }
        if (r < 0) {
                b->store = NULL;
                free(s);
                return r;
        }
        if (send) {
                int fd = s->fd;
                r = sd_pid_notify_with_fds(0, 0, "FDSTORE=1\nFDNAME=" M0__STORE_NAME, &fd, 1);
                if (r <= 0) {
                        /* Nobody keeps it: serve without persistence rather than not at all. */
                        snprintf(msg + strlen(msg), msg_len - strlen(msg),
                                 "; the fd store did not take the state (%s)",
                                 r < 0 ? strerror(-r) : "no NOTIFY_SOCKET");
                }
        }
        b->store = s;
        return 0;
}

void m0__store_close(struct m0_bus *b)
{
        struct m0_store *s = b->store;
        if (!s)
                return;
        unmap(s);
        if (s->fd >= 0)
                close(s->fd);
        free(s);
        b->store = NULL;
}
