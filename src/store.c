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

#include "internal.h"

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

struct m0_store {
        int fd;
        size_t size;
        struct store_head *head;
        char *data;
};

static size_t data_size_for(size_t cap)
{
        size_t d = cap * 512;
        return d < 64 * 1024 ? 64 * 1024 : d;
}

static size_t total_size(size_t cap, size_t data_size)
{
        return sizeof(struct store_head) + cap * sizeof(struct store_entry) + data_size;
}

static int map(struct m0_store *s, int fd, size_t size)
{
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                return -errno;
        s->fd = fd;
        s->size = size;
        s->head = p;
        s->data = (char *)p + sizeof(struct store_head) + s->head->cap * sizeof(struct store_entry);
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
        int r = map(s, fd, size);
        if (r < 0)
                close(fd);
        return r;
}

/* Open a memfd handed back by systemd; -EBADMSG when it is not ours or not whole. */
static int open_passed(struct m0_store *s, int fd)
{
        struct stat st;
        struct store_head h;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || (size_t)st.st_size < sizeof(h) ||
            pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
                return -EBADMSG;
        if (memcmp(h.magic, STORE_MAGIC, sizeof(h.magic)) != 0 || h.version != STORE_VERSION ||
            h.cap == 0 || h.cap > (1u << 24) || h.data_size > (1ull << 32) ||
            total_size(h.cap, h.data_size) != (size_t)st.st_size)
                return -EBADMSG;
        return map(s, fd, (size_t)st.st_size);
}

static void unmap(struct m0_store *s)
{
        if (s->head)
                munmap(s->head, s->size);
        s->head = NULL;
}

/* Put the kept frames of `s` into the bus's ring; returns how many. */
static size_t restore(struct m0_store *s, struct m0_bus *b)
{
        struct store_head *h = s->head;
        uint64_t last = h->last_id;
        uint64_t first = last > h->cap ? last - h->cap + 1 : 1;
        size_t n = 0;
        for (uint64_t id = first; id && id <= last; id++) {
                struct store_entry *e = &h->idx[id % h->cap];
                if (e->id != id || e->len == NOT_KEPT || e->len > h->data_size ||
                    e->pos + e->len > h->data_head || h->data_head - e->pos > h->data_size)
                        continue; /* never kept, or overwritten since */
                struct m0_frame *f = malloc(sizeof(*f) + e->len);
                if (!f)
                        break;
                size_t at = (size_t)(e->pos % h->data_size);
                size_t first_part = e->len < h->data_size - at ? e->len : h->data_size - at;
                memcpy(f->bytes, s->data + at, first_part);
                memcpy(f->bytes + first_part, s->data, e->len - first_part);
                atomic_init(&f->refs, 1);
                f->id = id;
                f->skip = -1;
                f->start = 0;
                f->end = e->len;
                struct m0_frame **slot = &b->ring[id % b->cap];
                m0__frame_unref(*slot);
                *slot = f;
                n++;
        }
        b->last_id = last;
        b->count = last < b->cap ? (size_t)last : b->cap;
        return n;
}

void m0__store_note(struct m0_bus *b, const struct m0_frame *f)
{
        struct m0_store *s = b->store;
        struct store_head *h = s->head;
        struct store_entry *e = &h->idx[f->id % h->cap];
        size_t len = f->end - f->start;
        if (len > h->data_size / 4) {
                e->id = f->id;
                e->len = NOT_KEPT; /* too large to keep: replay after a restart skips it */
        } else {
                size_t at = (size_t)(h->data_head % h->data_size);
                size_t first_part = len < h->data_size - at ? len : h->data_size - at;
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

int m0__store_open(struct m0_host *h, int passed_fd, char *msg, size_t msg_len)
{
        struct m0_bus *b = &h->bus;
        struct m0_store *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->fd = -1;
        bool send = true;
        if (passed_fd >= 0) {
                int r = open_passed(s, passed_fd);
                if (r == 0 && s->head->cap == b->cap) {
                        size_t n = restore(s, b);
                        snprintf(msg, msg_len,
                                 "event state taken back from the fd store: ids continue after "
                                 "%llu, %zu frame%s kept for replay",
                                 (unsigned long long)s->head->last_id, n, n == 1 ? "" : "s");
                        send = false; /* it is still in the store */
                } else if (r == 0) {
                        /* M0_REPLAY_FRAMES changed: carry the frames into a memfd of the new
                         * shape and swap it in the store. */
                        struct m0_store old = *s;
                        size_t n = restore(&old, b);
                        uint64_t last = old.head->last_id;
                        unmap(&old);
                        close(passed_fd);
                        r = create(s, b->cap);
                        if (r < 0) {
                                free(s);
                                return r;
                        }
                        for (uint64_t id = last >= b->cap ? last - b->cap + 1 : 1; id && id <= last;
                             id++)
                                if (b->ring[id % b->cap] && b->ring[id % b->cap]->id == id) {
                                        b->store = s;
                                        m0__store_note(b, b->ring[id % b->cap]);
                                }
                        s->head->last_id = last;
                        (void)sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" M0__STORE_NAME);
                        snprintf(msg, msg_len,
                                 "event state taken back from the fd store and resized to %zu "
                                 "frames: ids continue after %llu, %zu frame%s kept",
                                 b->cap, (unsigned long long)last, n, n == 1 ? "" : "s");
                } else {
                        close(passed_fd);
                        snprintf(msg, msg_len,
                                 "the fd store's '%s' is not m0 event state (%s): ids start at 1",
                                 M0__STORE_NAME, strerror(-r));
                        r = create(s, b->cap);
                        if (r < 0) {
                                free(s);
                                return r;
                        }
                        (void)sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" M0__STORE_NAME);
                }
        } else {
                int r = create(s, b->cap);
                if (r < 0) {
                        free(s);
                        return r;
                }
                snprintf(msg, msg_len,
                         "no event state in the fd store (a first start, or systemctl stop "
                         "flushed it): ids start at 1");
        }
        if (send) {
                int fd = s->fd;
                int r = sd_pid_notify_with_fds(0, 0, "FDSTORE=1\nFDNAME=" M0__STORE_NAME, &fd, 1);
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
