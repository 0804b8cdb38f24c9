/* SPDX-License-Identifier: MIT */
/* fuzz-store.c: libFuzzer harness over the fd store's checks and restore (B4, N6, D46, D77): bytes
 * in as the memfd systemd passes back; every frame restored must be one event of its own id on a
 * channel, and what the host stores in its place must come back whole at the next start. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "bus.h"
#include "host-private.h"
#include "fdstore-log.h"

/*
 * An input is one option byte, then the memfd's bytes:
 *   bit 0     grow the memfd to the size its header claims (zeros past the input, at most
 *             64 MiB), so that a short input reaches the log (or version 1's data ring);
 *   bits 1-2  M0_REPLAY_BYTES: 64, 128, 256 or 192 KiB, a log of half of it (one other than
 *             the store's takes the path into a new log).
 * The corpus (tests/fuzz/corpus-store) holds stores in that form, of version 2 (D77) and of
 * version 1 (D19), whose ids alone are taken.
 */
#define GROW_MAX (64u << 20)
#define HEAD_SIZE 48 /* fdstore-log.c's struct store_head */

static struct m0_host host;
static int notify_fd = -1;

/* The notify socket the host's FDSTORE=1 and FDSTOREREMOVE=1 go to, as systemd's would. */
static void setup(void)
{
        char name[64];
        snprintf(name, sizeof(name), "@m0-fuzz-store-%d", (int)getpid());
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        memcpy(sa.sun_path + 1, name + 1, strlen(name) - 1);
        notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (notify_fd < 0 ||
            bind(notify_fd, (struct sockaddr *)&sa,
                 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name))) < 0 ||
            setenv("NOTIFY_SOCKET", name, 1) < 0)
                abort();
}

/* The next datagram sent to the notify socket: its text in `text`, its fd (or -1) returned.
 * -2 when nothing is queued. */
static int next_datagram(char *text, size_t len)
{
        char cbuf[CMSG_SPACE(sizeof(int) * 4)];
        struct iovec iov = {.iov_base = text, .iov_len = len - 1};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = cbuf,
                            .msg_controllen = sizeof(cbuf)};
        ssize_t n = recvmsg(notify_fd, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0)
                return -2;
        text[n] = '\0';
        int fd = -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                int fds[4];
                memcpy(fds, CMSG_DATA(c), nfds * sizeof(int));
                for (size_t i = 0; i < nfds; i++) {
                        if (fd >= 0 || i > 0)
                                __builtin_trap(); /* one fd per datagram, at most */
                        fd = fds[i];
                }
        }
        return fd;
}

/* Read as an EventSource would: one block, ended by its only blank line, no CR or NUL, whose
 * first field is the id and whose other fields are an event name or data. */
static bool one_event(const char *p, size_t len, uint64_t id)
{
        if (len < 2 || p[len - 1] != '\n' || p[len - 2] != '\n' || memchr(p, '\r', len) ||
            memchr(p, '\0', len))
                return false;
        char want[32];
        int wn = snprintf(want, sizeof(want), "id: %llu\n", (unsigned long long)id);
        if (len < (size_t)wn || memcmp(p, want, (size_t)wn) != 0)
                return false;
        size_t data_lines = 0;
        for (const char *line = p + wn, *end = p + len - 1; line < end;) {
                const char *nl = memchr(line, '\n', (size_t)(end - line));
                if (nl == line)
                        return false; /* a blank line before the end: two events */
                if (!strncmp(line, "data: ", 6))
                        data_lines++;
                else if (strncmp(line, "event: ", 7) != 0 || data_lines || line != p + wn)
                        return false;
                line = nl + 1;
        }
        return data_lines > 0;
}

/* One channel of the replay store: a name this host publishes to, ids rising, none past the
 * last, every frame one event of its own id. */
static void check_chan(const struct m0_rchan *c, uint64_t last)
{
        if (!m0__channel_ok(c->name, c->node.len) || c->name[c->node.len - 1] == '*' ||
            c->count > c->cap)
                __builtin_trap();
        uint64_t prev = 0;
        for (uint32_t i = 0; i < c->count; i++) {
                const struct m0_frame *f = c->ring[(c->head + i) % c->cap];
                if (f->id <= prev || f->id > last || f->start > f->end ||
                    f->chan_len != c->node.len || memcmp(f->chan, c->name, c->node.len) != 0 ||
                    !one_event(f->bytes + f->start, f->end - f->start, f->id))
                        __builtin_trap();
                prev = f->id;
        }
}

/* The bus after a start: ids within M0__ID_MAX, the replay store within its bound, every kept
 * frame an event of its own id on its channel. */
static void check_bus(struct m0_bus *b)
{
        struct m0_replay *r = &b->replay;
        if (b->last_id > M0__ID_MAX || r->bytes > r->limit)
                __builtin_trap();
        uint64_t frames = 0;
        size_t bucket = 0;
        for (struct m0_hnode *n = m0__hmap_next(&r->map, &bucket, NULL); n;
             n = m0__hmap_next(&r->map, &bucket, n)) {
                const struct m0_rchan *c = M0__CONTAINER_OF(n, struct m0_rchan, node);
                check_chan(c, b->last_id);
                frames += c->count;
        }
        if (frames != r->frames)
                __builtin_trap();
}

/* The frame of `id` is the newest of `channel`, with the text the harness published. */
static void expect_newest(struct m0_bus *b, const char *channel, uint64_t id)
{
        struct m0_rchan *c = m0__replay_find(&b->replay, channel, strlen(channel));
        char text[96];
        int n = snprintf(text, sizeof(text), "id: %llu\nevent: e\ndata: x\ndata: y\n\n",
                         (unsigned long long)id);
        const struct m0_frame *f =
                c && c->count ? c->ring[(c->head + c->count - 1) % c->cap] : NULL;
        if (!f || f->id != id || f->end - f->start != (size_t)n ||
            memcmp(f->bytes + f->start, text, (size_t)n) != 0)
                __builtin_trap();
}

/* Start the host's store from `fd` with a replay bound of `bytes`; returns the fd the fd store
 * then holds for it (the passed one, when it was kept), or -1 when nothing holds one. */
static int start(size_t bytes, int fd, char *msg, size_t msg_len)
{
        memset(&host, 0, sizeof(host));
        if (m0__bus_init(&host.bus, 0, 1, 64, bytes) < 0)
                abort();
        host.cfg.replay_bytes = (uint32_t)bytes;
        int keep = fd >= 0 ? dup(fd) : -1;
        bool restored;
        if (m0__store_open(&host.bus, host.cfg.replay_bytes, fd, &restored, msg, msg_len) < 0)
                abort(); /* only a failed memfd_create or mmap of our own gets here */
        char text[256];
        int stored = -1, removed = 0, got;
        while ((got = next_datagram(text, sizeof(text))) != -2) {
                if (!strcmp(text, "FDSTOREREMOVE=1\nFDNAME=" M0__STORE_NAME) && got < 0 &&
                    stored < 0)
                        removed++;
                else if (!strcmp(text, "FDSTORE=1\nFDNAME=" M0__STORE_NAME) && got >= 0 &&
                         stored < 0)
                        stored = got;
                else
                        __builtin_trap(); /* a datagram out of place */
        }
        /* A store that was not kept is removed before its replacement goes in (D46). */
        if (fd >= 0 && (stored >= 0) != (removed == 1))
                __builtin_trap();
        if (stored < 0)
                stored = keep;
        else if (keep >= 0)
                close(keep);
        return stored;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const size_t sizes[] = {65536, 131072, 262144, 196608};
        if (notify_fd < 0)
                setup();
        if (size < 1)
                return 0;
        size_t bytes = sizes[(data[0] >> 1) & 3];
        int fd = memfd_create(M0__STORE_NAME, MFD_CLOEXEC);
        if (fd < 0 || write(fd, data + 1, size - 1) != (ssize_t)(size - 1))
                abort();
        if ((data[0] & 1) && size - 1 >= 24) {
                /* Version 2: the header, then the log; version 1: the header, `cap` index
                 * entries, then the data ring. */
                uint64_t n, claimed;
                uint32_t cap;
                memcpy(&n, data + 1 + 16, sizeof(n));
                memcpy(&cap, data + 1 + 12, sizeof(cap));
                bool v1 = !memcmp(data + 1, "m0bus-1", 8);
                claimed = v1 ? 40 + (uint64_t)cap * 24 : HEAD_SIZE;
                if (n <= GROW_MAX && claimed + n <= GROW_MAX && claimed + n > size - 1 &&
                    ftruncate(fd, (off_t)(claimed + n)) < 0)
                        abort();
        }

        char msg[512];
        int stored = start(bytes, fd, msg, sizeof(msg));
        check_bus(&host.bus);
        uint64_t last = host.bus.last_id;
        /* Publishing goes on from what was restored, into the store; at the last id there is,
         * it is refused, and the store keeps what it holds. */
        if (last > M0__ID_MAX - 2) {
                if (m0__bus_publish(&host.bus, "e", "e", "x\ny", 0) !=
                    (last < M0__ID_MAX ? (int64_t)(last + 1) : -EOVERFLOW))
                        __builtin_trap();
                m0__bus_destroy(&host.bus);
                if (stored >= 0)
                        close(stored);
                return 0;
        }
        if (m0__bus_publish(&host.bus, "e", "e", "x\ny", 0) != (int64_t)(last + 1) ||
            m0__bus_publish(&host.bus, "room:f", "e", "x\ny", 0) != (int64_t)(last + 2))
                __builtin_trap();
        check_bus(&host.bus);
        m0__bus_destroy(&host.bus);
        if (stored < 0)
                __builtin_trap(); /* NOTIFY_SOCKET is set: the store always holds one */

        /* The next start gets back what this one stored: ids continue, both new frames kept on
         * their channels, no record refused. */
        int again = start(bytes, stored, msg, sizeof(msg));
        char want[128];
        snprintf(want, sizeof(want),
                 "event state taken back from the fd store: ids continue after %llu,",
                 (unsigned long long)(last + 2));
        if (strncmp(msg, want, strlen(want)) != 0 || strstr(msg, "not restored"))
                __builtin_trap();
        check_bus(&host.bus);
        expect_newest(&host.bus, "e", last + 1);
        expect_newest(&host.bus, "room:f", last + 2);
        m0__bus_destroy(&host.bus);
        if (again >= 0)
                close(again);
        return 0;
}
