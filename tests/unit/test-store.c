/* SPDX-License-Identifier: MIT */
/* test-store.c: the bus's memfd in the fd store: its log written, taken back with its channels,
 * resized, version 1's ids carried, refused (B4, N3, N6, D46, D77). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bus.h"
#include "host-private.h"
#include "fdstore-log.h"
#include "unit.h"

/*
 * The memfd's layout as D77 documents it, mirrored here because the test reads what the store
 * wrote and writes stores by hand: a 48-byte header, then a circular log of records, each a
 * 16-byte head (id, the record's length, the channel's), the channel's name and the frame's text.
 */
struct disk_head {
        char magic[8];
        uint32_t version;
        uint32_t pad;
        uint64_t log_size;
        uint64_t last_id;
        uint64_t head;
        uint64_t tail;
};

struct disk_rec {
        uint64_t id;
        uint32_t len;
        uint16_t chan_len;
        uint16_t pad;
};

_Static_assert(sizeof(struct disk_head) == 48, "D77's header is 48 bytes");
_Static_assert(sizeof(struct disk_rec) == 16, "D77's record heads are 16 bytes");

#define BYTES 65536u /* M0_REPLAY_BYTES' least */
#define LOG (BYTES / 2)
#define COUNT_MAX (UINT64_C(1) << 62)

static const char replaced_fmt[] =
        "the fd store's 'm0-bus' is not m0 event state (%s): replaced by a new one";
static const char first_start[] = "no event state in the fd store (a first start, or systemctl "
                                  "stop flushed it)";

/* ---- the notify socket: a datagram socket of the test's, named by NOTIFY_SOCKET ---- */

static int notify_fd = -1;

static void setup(void)
{
        char name[64];
        snprintf(name, sizeof(name), "m0-unit-store-%d", (int)getpid());
        notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_int_ge(notify_fd, 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        memcpy(a.sun_path + 1, name, strlen(name)); /* abstract: nothing to clean up */
        socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
        ck_assert_int_eq(bind(notify_fd, (struct sockaddr *)&a, alen), 0);
        char env[80];
        snprintf(env, sizeof(env), "@%s", name);
        ck_assert_int_eq(setenv("NOTIFY_SOCKET", env, 1), 0);
}

static void teardown(void)
{
        close(notify_fd);
        unsetenv("NOTIFY_SOCKET");
}

struct note {
        char text[256];
        int fd; /* the one descriptor it carried, or -1 */
        int nfds;
};

/* The next message sent to systemd, without waiting: sd_notify's datagram is queued before the
 * call that sent it returns. False when there is none. */
static bool notify_take(struct note *n)
{
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * 4)];
        } c;
        struct iovec iov = {.iov_base = n->text, .iov_len = sizeof(n->text) - 1};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = c.buf,
                            .msg_controllen = sizeof(c)};
        ssize_t r = recvmsg(notify_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (r < 0) {
                ck_assert_int_eq(errno, EAGAIN);
                return false;
        }
        n->text[r] = '\0';
        n->fd = -1;
        n->nfds = 0;
        for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
                if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
                        continue;
                n->nfds = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                memcpy(&n->fd, CMSG_DATA(h), sizeof(int));
        }
        return true;
}

/* Exactly FDSTORE=1 for the store's name, with one descriptor, which is returned. */
static int expect_fdstore(void)
{
        struct note n;
        ck_assert_msg(notify_take(&n), "nothing was sent to the fd store");
        ck_assert_str_eq(n.text, "FDSTORE=1\nFDNAME=m0-bus");
        ck_assert_int_eq(n.nfds, 1);
        ck_assert_int_ge(n.fd, 0);
        return n.fd;
}

static void expect_fdstoreremove(void)
{
        struct note n;
        ck_assert_msg(notify_take(&n), "nothing was sent to the fd store");
        ck_assert_str_eq(n.text, "FDSTOREREMOVE=1\nFDNAME=m0-bus");
        ck_assert_int_eq(n.nfds, 0);
}

static void expect_nothing_sent(void)
{
        struct note n;
        ck_assert_msg(!notify_take(&n), "unexpected message to systemd: %s", n.text);
}

/* ---- a host with a bus, as m0_main() sets one up before serving ---- */

static struct m0_host *host_open(size_t bytes, int passed_fd, char *msg, size_t msg_len,
                                 bool *ret_restored)
{
        struct m0_host *h = calloc(1, sizeof(*h));
        ck_assert_ptr_nonnull(h);
        /* No loop follows a channel here: the store sees only the replay store. */
        ck_assert_int_eq(m0__bus_init(&h->bus, 0, 1, 64, bytes), 0);
        h->cfg.replay_bytes = (uint32_t)bytes;
        msg[0] = '\0';
        bool restored;
        ck_assert_int_eq(
                m0__store_open(&h->bus, h->cfg.replay_bytes, passed_fd, &restored, msg, msg_len),
                0);
        ck_assert_ptr_nonnull(h->bus.store);
        if (ret_restored)
                *ret_restored = restored;
        return h;
}

static void host_close(struct m0_host *h)
{
        m0__bus_destroy(&h->bus);
        free(h);
}

static int64_t publish(struct m0_host *h, const char *channel, const char *event, const char *data)
{
        return m0__bus_publish(&h->bus, channel, event, data, 0);
}

/* The channel keeps exactly `n` frames, oldest first, with these ids and (unless NULL) bytes. */
static void assert_kept(struct m0_host *h, const char *channel, size_t n, const uint64_t *ids,
                        const char *const *want)
{
        struct m0_rchan *c = m0__replay_find(&h->bus.replay, channel, strlen(channel));
        ck_assert_msg(n == 0 || c, "channel %s is not kept", channel);
        ck_assert_uint_eq(c ? c->count : 0, n);
        for (size_t k = 0; k < n; k++) {
                struct m0_frame *f = c->ring[(c->head + k) % c->cap];
                ck_assert_uint_eq(f->id, ids[k]);
                ck_assert_str_eq(f->chan, channel);
                if (want && want[k])
                        ck_assert_bytes(f->bytes + f->start, f->end - f->start, want[k],
                                        strlen(want[k]));
        }
}

static struct disk_head read_head(int fd)
{
        struct disk_head hd;
        ck_assert_int_eq(pread(fd, &hd, sizeof(hd), 0), sizeof(hd));
        return hd;
}

static void write_head(int fd, const struct disk_head *hd)
{
        ck_assert_int_eq(pwrite(fd, hd, sizeof(*hd), 0), sizeof(*hd));
}

/* `n` bytes at log position `pos`, wrapping. */
static void log_read(int fd, uint64_t log_size, uint64_t pos, void *out, size_t n)
{
        for (size_t i = 0; i < n; i++)
                ck_assert_int_eq(pread(fd, (char *)out + i, 1,
                                       (off_t)(sizeof(struct disk_head) + (pos + i) % log_size)),
                                 1);
}

static void log_write(int fd, uint64_t log_size, uint64_t pos, const void *in, size_t n)
{
        for (size_t i = 0; i < n; i++)
                ck_assert_int_eq(pwrite(fd, (const char *)in + i, 1,
                                        (off_t)(sizeof(struct disk_head) + (pos + i) % log_size)),
                                 1);
}

/* A record as fdstore-log.c writes one, at `pos`; returns its length. */
static size_t put_rec(int fd, uint64_t pos, uint64_t id, const char *chan, const char *text,
                      size_t text_len)
{
        struct disk_rec r = {.id = id, .chan_len = (uint16_t)strlen(chan)};
        r.len = (uint32_t)(sizeof(r) + r.chan_len + text_len);
        log_write(fd, LOG, pos, &r, sizeof(r));
        log_write(fd, LOG, pos + sizeof(r), chan, r.chan_len);
        log_write(fd, LOG, pos + sizeof(r) + r.chan_len, text, text_len);
        return r.len;
}

/* The record at `pos` is `id` on `chan` with exactly `text`; returns its length. */
static size_t expect_rec(int fd, uint64_t pos, uint64_t id, const char *chan, const char *text)
{
        struct disk_rec r;
        char buf[512];
        log_read(fd, LOG, pos, &r, sizeof(r));
        ck_assert_uint_eq(r.id, id);
        ck_assert_uint_eq(r.chan_len, strlen(chan));
        ck_assert_uint_eq(r.len, sizeof(r) + strlen(chan) + strlen(text));
        ck_assert_uint_lt(r.len, sizeof(buf));
        log_read(fd, LOG, pos + sizeof(r), buf, r.len - sizeof(r));
        ck_assert_bytes(buf, r.chan_len, chan, strlen(chan));
        ck_assert_bytes(buf + r.chan_len, r.len - sizeof(r) - r.chan_len, text, strlen(text));
        return r.len;
}

/* A memfd of version 2 of a log of LOG bytes, with the header fields given. */
static int make_store(uint64_t last, uint64_t head, uint64_t tail)
{
        int fd = memfd_create("m0-bus", MFD_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, (off_t)(sizeof(struct disk_head) + LOG)), 0);
        struct disk_head hd = {
                .version = 2, .log_size = LOG, .last_id = last, .head = head, .tail = tail};
        memcpy(hd.magic, "m0bus-2", 8);
        write_head(fd, &hd);
        return fd;
}

static void assert_fresh(int fd, uint64_t last)
{
        struct disk_head hd = read_head(fd);
        ck_assert_bytes(hd.magic, sizeof(hd.magic), "m0bus-2", 8);
        ck_assert_uint_eq(hd.version, 2);
        ck_assert_uint_eq(hd.log_size, LOG);
        ck_assert_uint_eq(hd.last_id, last);
        ck_assert_uint_eq(hd.head, 0);
        ck_assert_uint_eq(hd.tail, 0);
        struct stat st;
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert_int_eq(st.st_size, sizeof(struct disk_head) + LOG);
}

static int count_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        ck_assert_ptr_nonnull(d);
        int n = 0;
        struct dirent *e;
        while ((e = readdir(d)))
                n += e->d_name[0] != '.';
        closedir(d);
        return n - 1; /* the directory's own */
}

/* ---- a new store, written, handed back ---- */

START_TEST(new_store_is_handed_to_systemd)
{
        char msg[512];
        bool restored = true;
        struct m0_host *h = host_open(BYTES, -1, msg, sizeof(msg), &restored);
        ck_assert_str_eq(msg, first_start);
        ck_assert(!restored);
        int fd = expect_fdstore();
        expect_nothing_sent();
        assert_fresh(fd, 0);
        /* D77: the memfd takes half of M0_REPLAY_BYTES, the process's copy the other half */
        ck_assert_uint_eq(h->bus.replay.limit, BYTES - LOG);
        ck_assert_uint_eq(h->bus.replay.log_limit, LOG / 2);
        ck_assert_uint_eq(m0__bus_last(&h->bus), 0);
        host_close(h);
        close(fd);
}
END_TEST

/* Without NOTIFY_SOCKET nobody keeps the state: the host serves on without persistence. */
START_TEST(no_notify_socket_serves_without_the_store)
{
        unsetenv("NOTIFY_SOCKET");
        char msg[512];
        struct m0_host *h = host_open(BYTES, -1, msg, sizeof(msg), NULL);
        char exp[600];
        snprintf(exp, sizeof(exp), "%s; the fd store did not take the state (no NOTIFY_SOCKET)",
                 first_start);
        ck_assert_str_eq(msg, exp);
        expect_nothing_sent();
        ck_assert_int_eq(publish(h, "c", "e", "x"), 1);
        host_close(h);
}
END_TEST

static const char *const f1 = "id: 1\nevent: tick\ndata: one\n\n";
static const char *const f2 = "id: 2\ndata: two\ndata: lines\n\n";
static const char *const f3 = "id: 3\nevent: e\ndata: \n\n";

START_TEST(published_frames_are_written_and_come_back_with_their_channels)
{
        char msg[512];
        struct m0_host *h = host_open(BYTES, -1, msg, sizeof(msg), NULL);
        int fd = expect_fdstore();
        ck_assert_int_eq(publish(h, "room:1", "tick", "one"), 1);
        ck_assert_int_eq(publish(h, "room:2", NULL, "two\nlines"), 2);
        ck_assert_int_eq(m0__bus_publish(&h->bus, "room:1", "hb", "x", M0_PUBLISH_TRANSIENT), 0);
        ck_assert_int_eq(publish(h, "room:1", "e", ""), 3);

        /* D77: each record at the head, then the head and the last id; no transient one */
        struct disk_head hd = read_head(fd);
        ck_assert_uint_eq(hd.last_id, 3);
        ck_assert_uint_eq(hd.tail, 0);
        uint64_t pos = 0;
        pos += expect_rec(fd, pos, 1, "room:1", f1);
        pos += expect_rec(fd, pos, 2, "room:2", f2);
        pos += expect_rec(fd, pos, 3, "room:1", f3);
        ck_assert_uint_eq(hd.head, pos);
        expect_nothing_sent(); /* publishing writes the pages systemd holds: nothing to send */
        host_close(h);         /* the process ends; systemd keeps `fd` */

        /* the next process: the same memfd passed back, the same bound */
        int before = count_fds();
        bool restored = false;
        h = host_open(BYTES, dup(fd), msg, sizeof(msg), &restored);
        ck_assert(restored);
        ck_assert_int_eq(count_fds(), before + 1); /* the store holds the dup it was given */
        ck_assert_str_eq(msg, "event state taken back from the fd store: ids continue after 3, "
                              "3 frames of 2 channels kept for replay");
        expect_nothing_sent(); /* it is still in the store */
        assert_kept(h, "room:1", 2, (const uint64_t[]){1, 3}, (const char *const[]){f1, f3});
        assert_kept(h, "room:2", 1, (const uint64_t[]){2}, (const char *const[]){f2});

        /* ids continue, into the same shared pages */
        ck_assert_int_eq(publish(h, "room:2", "x", "four"), 4);
        hd = read_head(fd);
        ck_assert_uint_eq(hd.last_id, 4);
        ck_assert_uint_eq(
                hd.head, pos + expect_rec(fd, pos, 4, "room:2", "id: 4\nevent: x\ndata: four\n\n"));
        host_close(h);
        ck_assert_int_eq(count_fds(), before);
        close(fd);
}
END_TEST

/* A frame longer than an eighth of the log is served but not kept across a restart (D77). */
START_TEST(a_frame_too_large_to_copy_is_kept_only_in_the_process)
{
        char msg[512];
        struct m0_host *h = host_open(BYTES, -1, msg, sizeof(msg), NULL);
        int fd = expect_fdstore();
        char big[LOG / 8];
        memset(big, 'b', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        ck_assert_int_eq(publish(h, "c", NULL, big), 1);
        ck_assert_int_eq(publish(h, "c", NULL, "small"), 2);
        assert_kept(h, "c", 2, (const uint64_t[]){1, 2}, NULL);
        ck_assert_uint_eq(read_head(fd).head, expect_rec(fd, 0, 2, "c", "id: 2\ndata: small\n\n"));
        host_close(h);

        h = host_open(BYTES, dup(fd), msg, sizeof(msg), NULL);
        ck_assert_str_eq(msg, "event state taken back from the fd store: ids continue after 2, "
                              "1 frame of 1 channel kept for replay");
        assert_kept(h, "c", 1, (const uint64_t[]){2},
                    (const char *const[]){"id: 2\ndata: small\n\n"});
        host_close(h);
        close(fd);
}
END_TEST

/*
 * N6: a quiet channel's frame outlives a busy channel's 20,000 in a log of 32 KiB: it is
 * forwarded to the head each time the tail reaches it, so it is always in [tail, head), and it
 * comes back after a restart with the busy channel's newest.
 */
START_TEST(a_quiet_channel_survives_a_busy_one_in_the_log)
{
        char msg[512];
        struct m0_host *h = host_open(BYTES, -1, msg, sizeof(msg), NULL);
        int fd = expect_fdstore();
        static const char quiet[] = "id: 1\nevent: q\ndata: still here\n\n";
        ck_assert_int_eq(publish(h, "quiet", "q", "still here"), 1);
        for (int i = 0; i < 20000; i++)
                ck_assert_int_eq(
                        publish(h, "busy", "b", "0123456789012345678901234567890123456789"), i + 2);
        struct disk_head hd = read_head(fd);
        ck_assert_uint_gt(hd.head, 40 * LOG); /* the log went round many times */
        ck_assert_uint_le(hd.head - hd.tail, LOG);
        ck_assert_uint_le(m0__store_live(h->bus.store), LOG / 2);
        size_t kept_busy = m0__replay_find(&h->bus.replay, "busy", 4)->count;
        ck_assert_uint_eq(kept_busy, 64); /* M0_REPLAY_PER_CHANNEL */
        ck_assert_uint_eq(h->bus.replay.evicted, 0);
        host_close(h);

        h = host_open(BYTES, dup(fd), msg, sizeof(msg), NULL);
        ck_assert_str_eq(msg, "event state taken back from the fd store: ids continue after "
                              "20001, 65 frames of 2 channels kept for replay");
        assert_kept(h, "quiet", 1, (const uint64_t[]){1}, (const char *const[]){quiet});
        struct m0_rchan *b = m0__replay_find(&h->bus.replay, "busy", 4);
        ck_assert_uint_eq(b->count, 64);
        ck_assert_uint_eq(b->ring[(b->head + 63) % b->cap]->id, 20001);
        ck_assert_uint_eq(b->ring[b->head]->id, 20001 - 63);
        ck_assert_int_eq(publish(h, "quiet", "q", "again"), 20002);
        host_close(h);
        close(fd);
}
END_TEST

/* A crash between a forward's write and the tail's move leaves two copies of one id: restored
 * once, from the later. */
START_TEST(two_copies_of_an_id_are_one_frame)
{
        static const char t1[] = "id: 1\ndata: one\n\n", t2[] = "id: 2\ndata: two\n\n";
        int fd = make_store(2, 0, 0);
        uint64_t pos = put_rec(fd, 0, 1, "a", t1, strlen(t1));
        pos += put_rec(fd, pos, 2, "b", t2, strlen(t2));
        uint64_t again = pos;
        pos += put_rec(fd, pos, 1, "a", t1, strlen(t1));
        struct disk_head hd = read_head(fd);
        hd.head = pos;
        write_head(fd, &hd);
        char msg[512];
        struct m0_host *h = host_open(BYTES, dup(fd), msg, sizeof(msg), NULL);
        ck_assert_str_eq(msg, "event state taken back from the fd store: ids continue after 2, "
                              "2 frames of 2 channels kept for replay");
        assert_kept(h, "a", 1, (const uint64_t[]){1}, (const char *const[]){t1});
        ck_assert_uint_eq(m0__replay_find(&h->bus.replay, "a", 1)->ring[0]->log_pos, again);
        ck_assert_uint_eq(m0__store_live(h->bus.store), pos - strlen(t1) - 17);
        host_close(h);
        close(fd);
}
END_TEST

/* ---- M0_REPLAY_BYTES changed: the frames move to a memfd of the new shape ---- */

START_TEST(a_new_bound_carries_the_frames_into_a_new_log)
{
        char msg[512];
        struct m0_host *h = host_open(BYTES, -1, msg, sizeof(msg), NULL);
        int fd = expect_fdstore();
        for (int id = 1; id <= 6; id++)
                ck_assert_int_eq(publish(h, id % 2 ? "odd" : "even", "t", "n"), id);
        host_close(h);

        h = host_open(2 * BYTES, fd, msg, sizeof(msg), NULL);
        ck_assert_str_eq(msg, "event state taken back from the fd store into a log of a new size "
                              "(M0_REPLAY_BYTES changed): ids continue after 6, 6 frames of 2 "
                              "channels kept for replay");
        expect_fdstoreremove();
        int fd2 = expect_fdstore();
        expect_nothing_sent();
        struct disk_head hd = read_head(fd2);
        ck_assert_uint_eq(hd.log_size, BYTES);
        ck_assert_uint_eq(hd.last_id, 6);
        assert_kept(h, "odd", 3, (const uint64_t[]){1, 3, 5}, NULL);
        assert_kept(h, "even", 3, (const uint64_t[]){2, 4, 6}, NULL);
        host_close(h);

        /* the new memfd comes back as any other */
        h = host_open(2 * BYTES, fd2, msg, sizeof(msg), NULL);
        ck_assert_str_eq(msg, "event state taken back from the fd store: ids continue after 6, "
                              "6 frames of 2 channels kept for replay");
        expect_nothing_sent();
        ck_assert_int_eq(publish(h, "odd", "t", "n"), 7);
        host_close(h);
}
END_TEST

/* Version 1 (D19): its ids go on, its frames (no channel) stay behind; it leaves the store. */
START_TEST(version_1_gives_its_ids)
{
        struct {
                char magic[8];
                uint32_t version, cap;
                uint64_t data_size, last_id, data_head;
        } v1 = {.version = 1, .cap = 4, .data_size = 65536, .last_id = 41, .data_head = 300};
        memcpy(v1.magic, "m0bus-1", 8);
        int fd = memfd_create("m0-bus", MFD_CLOEXEC);
        ck_assert_int_eq(ftruncate(fd, 40 + 4 * 24 + 65536), 0);
        ck_assert_int_eq(pwrite(fd, &v1, sizeof(v1), 0), sizeof(v1));
        char msg[512];
        bool restored = false;
        struct m0_host *h = host_open(BYTES, fd, msg, sizeof(msg), &restored);
        ck_assert(restored);
        ck_assert_str_eq(msg, "event state of version 1 taken back from the fd store: ids "
                              "continue after 41; its frames name no channel and are not kept");
        expect_fdstoreremove();
        int nfd = expect_fdstore();
        assert_fresh(nfd, 41);
        ck_assert_int_eq(publish(h, "c", NULL, "x"), 42);
        host_close(h);
        close(nfd);

        /* a version 1 header of another shape is no state at all */
        fd = memfd_create("m0-bus", MFD_CLOEXEC);
        ck_assert_int_eq(ftruncate(fd, 40 + 4 * 24 + 65536), 0);
        v1.data_size = 0;
        ck_assert_int_eq(pwrite(fd, &v1, sizeof(v1), 0), sizeof(v1));
        h = host_open(BYTES, fd, msg, sizeof(msg), &restored);
        ck_assert(!restored);
        char exp[512];
        snprintf(exp, sizeof(exp), replaced_fmt,
                 "a version 1 header of another shape (4 slots, 65672 bytes)");
        ck_assert_str_eq(msg, exp);
        expect_fdstoreremove();
        nfd = expect_fdstore();
        host_close(h);
        close(nfd);
}
END_TEST

/* ---- a store that is not this host's: replaced (D46) ---- */

static const struct {
        const char *magic;
        uint32_t version;
        uint64_t log_size, last_id, head, tail;
        off_t size; /* the file's */
        const char *why;
} refused[] = {
#define FILE_SIZE ((off_t)(48 + LOG))
        {"m0bus-3", 2, LOG, 0, 0, 0, FILE_SIZE, "no 'm0bus-2' header"},
        {"M0BUS-2", 2, LOG, 0, 0, 0, FILE_SIZE, "no 'm0bus-2' header"},
        {"m0bus-2", 1, LOG, 0, 0, 0, FILE_SIZE, "version 1, where this host writes 2"},
        {"m0bus-2", 3, LOG, 0, 0, 0, FILE_SIZE, "version 3, where this host writes 2"},
        {"m0bus-2", 2, 0, 0, 0, 0, 48, "a log of 0 bytes, outside 32768-536870912"},
        {"m0bus-2", 2, 32767, 0, 0, 0, 48 + 32767, "a log of 32767 bytes, outside 32768-536870912"},
        {"m0bus-2", 2, UINT64_MAX - 40, 0, 0, 0, FILE_SIZE,
         "a log of 18446744073709551575 bytes, outside 32768-536870912"},
        {"m0bus-2", 2, LOG, 0, 0, 0, FILE_SIZE + 1,
         "32817 bytes, where a log of 32768 takes 32816"},
        {"m0bus-2", 2, LOG, 0, 0, 0, FILE_SIZE - 1,
         "32815 bytes, where a log of 32768 takes 32816"},
        {"m0bus-2", 2, LOG, COUNT_MAX + 1, 0, 0, FILE_SIZE,
         "last id 4611686018427387905 or head 0, past 4611686018427387904"},
        {"m0bus-2", 2, LOG, 0, UINT64_MAX, 0, FILE_SIZE,
         "last id 0 or head 18446744073709551615, past 4611686018427387904"},
        {"m0bus-2", 2, LOG, 0, 10, 11, FILE_SIZE, "records from 11 to 10, more than its log holds"},
        {"m0bus-2", 2, LOG, 0, LOG + 1, 0, FILE_SIZE,
         "records from 0 to 32769, more than its log holds"},
        {"m0bus-2", 2, LOG, 0, 0, 0, 47, "47 bytes, shorter than its 48-byte header"},
        {"m0bus-2", 2, LOG, 0, 0, 0, 0, "0 bytes, shorter than its 48-byte header"},
};

/* Each field that does not fit is named with its value; the entry leaves the fd store before a
 * new one is stored, and the caller chooses where the ids start. The passed fd is taken. */
START_TEST(a_store_that_does_not_fit_is_replaced)
{
        int i = _i;
        int fd = memfd_create("m0-bus", MFD_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, refused[i].size), 0);
        struct disk_head hd = {.version = refused[i].version,
                               .log_size = refused[i].log_size,
                               .last_id = refused[i].last_id,
                               .head = refused[i].head,
                               .tail = refused[i].tail};
        memcpy(hd.magic, refused[i].magic, 8);
        size_t n = (size_t)refused[i].size < sizeof(hd) ? (size_t)refused[i].size : sizeof(hd);
        ck_assert_int_eq(pwrite(fd, &hd, n, 0), (ssize_t)n);
        int before = count_fds();
        char msg[512];
        bool restored = true;
        struct m0_host *h = host_open(BYTES, fd, msg, sizeof(msg), &restored);
        char exp[512];
        snprintf(exp, sizeof(exp), replaced_fmt, refused[i].why);
        ck_assert_str_eq(msg, exp);
        ck_assert(!restored);
        expect_fdstoreremove();
        int nfd = expect_fdstore();
        expect_nothing_sent();
        /* the passed fd was closed, the new store holds one, and systemd's copy came here */
        ck_assert_int_eq(count_fds(), before + 1);
        assert_fresh(nfd, 0);
        ck_assert_uint_eq(m0__bus_last(&h->bus), 0);
        ck_assert_int_eq(publish(h, "a", NULL, "b"), 1);
        ck_assert_uint_eq(read_head(nfd).last_id, 1);
        host_close(h);
        close(nfd);
}
END_TEST

START_TEST(a_descriptor_that_is_no_file_is_replaced)
{
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        close(p[1]);
        char msg[512];
        struct m0_host *h = host_open(BYTES, p[0], msg, sizeof(msg), NULL);
        char exp[512];
        snprintf(exp, sizeof(exp), replaced_fmt, "not a memfd or regular file");
        ck_assert_str_eq(msg, exp);
        expect_fdstoreremove();
        int nfd = expect_fdstore();
        assert_fresh(nfd, 0);
        host_close(h);
        close(nfd);
}
END_TEST

/* The bounds themselves are this host's: taken back, not replaced. */
START_TEST(a_store_at_the_bounds_is_taken_back)
{
        char msg[512];
        int fd = make_store(COUNT_MAX, COUNT_MAX, COUNT_MAX - LOG);
        struct m0_host *h = host_open(BYTES, fd, msg, sizeof(msg), NULL);
        ck_assert_str_eq(msg, "event state taken back from the fd store into a new log: ids "
                              "continue after 4611686018427387904, 0 frames of 0 channels kept "
                              "for replay; 1 not restored (the first, id 0, has a length this "
                              "host never writes)");
        expect_fdstoreremove();
        close(expect_fdstore());
        /* The last id there is (M0__ID_MAX): a publish past it is refused, so the store stays
         * one this host takes back; a transient event, which takes no id, still goes out. */
        ck_assert_int_eq(publish(h, "c", NULL, "x"), -EOVERFLOW);
        ck_assert_int_eq(m0__bus_publish(&h->bus, "c", NULL, "x", M0_PUBLISH_TRANSIENT), 0);
        host_close(h);

        /* One below it: that last id is handed out, and the next start takes the store back
         * with its frame. */
        fd = make_store(COUNT_MAX - 1, 0, 0);
        h = host_open(BYTES, dup(fd), msg, sizeof(msg), NULL);
        ck_assert_int_eq(publish(h, "c", NULL, "x"), (int64_t)COUNT_MAX);
        ck_assert_int_eq(publish(h, "c", NULL, "y"), -EOVERFLOW);
        host_close(h);
        h = host_open(BYTES, fd, msg, sizeof(msg), NULL);
        ck_assert_str_eq(msg, "event state taken back from the fd store: ids continue after "
                              "4611686018427387904, 1 frame of 1 channel kept for replay");
        expect_nothing_sent();
        host_close(h);
}
END_TEST

/* ---- records that do not fit: dropped, the rest restored (D46, D77) ---- */

#define BAD_EVENT "bytes that are not one well-formed event"

static const char nul_frame[] = "id: 2\ndata: a\0b\n\n";

static const struct {
        const char *frame; /* the frame of id 2, between two good ones */
        size_t len;        /* 0: strlen */
        const char *chan;  /* NULL: "c" */
        const char *why;   /* NULL: it is restored */
} events[] = {
        {"id: 2\ndata: a\n\n", 0, NULL, NULL},
        {"id: 2\ndata: \n\n", 0, NULL, NULL},
        {"id: 2\nevent: x\ndata: a\ndata: b\n\n", 0, NULL, NULL},
        {"id: 2\ndata: a\n\n", 0, "room:*", "a channel name this host never writes"},
        {"id: 2\ndata: a\n\n", 0, "a b", "a channel name this host never writes"},
        {"id: 2\ndata: a\r\n\n", 0, NULL, BAD_EVENT}, /* a CR would end the line early */
        {nul_frame, sizeof(nul_frame) - 1, NULL, BAD_EVENT},
        {"id: 2\ndata: a\n", 0, NULL, BAD_EVENT},    /* no blank line at the end */
        {"id: 2\ndata: a\n\nX", 0, NULL, BAD_EVENT}, /* bytes after the end */
        {"id: 2\ndata: a\nevent: x\n\n", 0, NULL, BAD_EVENT},
        {"id: 2\nevent: \ndata: a\n\n", 0, NULL, BAD_EVENT},
        {"id: 2\nevent: x\nevent: y\ndata: a\n\n", 0, NULL, BAD_EVENT},
        {"id: 2\nevent: x\n\n", 0, NULL, BAD_EVENT},
        {"id: 22\ndata: a\n\n", 0, NULL, BAD_EVENT}, /* another id, sharing the first digit */
        {"id: 2\nretry: 1\ndata: a\n\n", 0, NULL, BAD_EVENT},
        {"data: a\n\n", 0, NULL, BAD_EVENT},
        {"id: 2\ndata: a\n\n\n", 0, NULL, BAD_EVENT},
        {"id: 2\ndata:a\n\n", 0, NULL, BAD_EVENT},
};

START_TEST(each_record_is_one_well_formed_event_of_a_channel)
{
        int i = _i;
        static const char t1[] = "id: 1\ndata: one\n\n", t3[] = "id: 3\ndata: three\n\n";
        int fd = make_store(3, 0, 0);
        uint64_t pos = put_rec(fd, 0, 1, "c", t1, strlen(t1));
        pos += put_rec(fd, pos, 2, events[i].chan ? events[i].chan : "c", events[i].frame,
                       events[i].len ? events[i].len : strlen(events[i].frame));
        pos += put_rec(fd, pos, 3, "c", t3, strlen(t3));
        struct disk_head hd = read_head(fd);
        hd.head = pos;
        write_head(fd, &hd);
        char msg[512];
        struct m0_host *h = host_open(BYTES, dup(fd), msg, sizeof(msg), NULL);
        if (!events[i].why) {
                ck_assert_str_eq(msg, "event state taken back from the fd store: ids continue "
                                      "after 3, 3 frames of 1 channel kept for replay");
                assert_kept(h, "c", 3, (const uint64_t[]){1, 2, 3}, NULL);
                expect_nothing_sent();
                ck_assert_int_eq(publish(h, "c", NULL, "four"), 4);
                host_close(h);
                close(fd);
                return;
        }
        char exp[512];
        snprintf(exp, sizeof(exp),
                 "event state taken back from the fd store into a new log: ids continue after 3, "
                 "2 frames of 1 channel kept for replay; 1 not restored (the first, id 2, has %s)",
                 events[i].why);
        ck_assert_str_eq(msg, exp);
        assert_kept(h, "c", 2, (const uint64_t[]){1, 3}, (const char *const[]){t1, t3});
        /* Written anew with the good records alone: kept as it was, the bad one would be
         * refused again at every start until the log's tail passed it. */
        expect_fdstoreremove();
        int nfd = expect_fdstore();
        ck_assert_int_eq(publish(h, "c", NULL, "four"), 4);
        host_close(h);
        close(fd);
        h = host_open(BYTES, nfd, msg, sizeof(msg), NULL);
        ck_assert_str_eq(msg, "event state taken back from the fd store: ids continue after 4, 3 "
                              "frames of 1 channel kept for replay");
        assert_kept(h, "c", 3, (const uint64_t[]){1, 3, 4}, (const char *const[]){t1, t3, NULL});
        expect_nothing_sent();
        host_close(h);
}
END_TEST

/* Records whose head cannot be trusted end the walk there; ids past the last are refused. */
START_TEST(a_record_out_of_range_is_dropped)
{
        static const char t1[] = "id: 1\ndata: one\n\n", t2[] = "id: 2\ndata: two\n\n";
        static const char head[] = "event state taken back from the fd store into a new log: ids "
                                   "continue after 2, 1 frame of 1 channel kept for replay; 1 not "
                                   "restored (the first, ";
        const struct {
                struct disk_rec r;
                const char *why;
        } cases[] = {
                {{.id = 2, .len = 16 + 1, .chan_len = 1},
                 "id 2, has a length this host never writes"},
                {{.id = 2, .len = 16 + 1 + 4096, .chan_len = 1},
                 "id 2, has a length this host never writes"},
                {{.id = 2, .len = 40, .chan_len = 0}, "id 2, has a length this host never writes"},
                {{.id = 2, .len = 400, .chan_len = 201},
                 "id 2, has a length this host never writes"},
                {{.id = 2, .len = 1000, .chan_len = 1},
                 "id 2, has a length this host never writes"},
                {{.id = 3, .len = 16 + 1 + sizeof(t2) - 1, .chan_len = 1},
                 "id 3, has an id past the store's last"},
                {{.id = 0, .len = 16 + 1 + sizeof(t2) - 1, .chan_len = 1},
                 "id 0, has an id past the store's last"},
        };
        for (size_t c = 0; c < M0__ARRAY_SIZE(cases); c++) {
                int fd = make_store(2, 0, 0);
                uint64_t pos = put_rec(fd, 0, 1, "c", t1, strlen(t1));
                uint64_t at = pos;
                pos += put_rec(fd, pos, 2, "c", t2, strlen(t2));
                log_write(fd, LOG, at, &cases[c].r, sizeof(cases[c].r));
                struct disk_head hd = read_head(fd);
                hd.head = pos;
                write_head(fd, &hd);
                char msg[512];
                struct m0_host *h = host_open(BYTES, fd, msg, sizeof(msg), NULL);
                char exp[512];
                snprintf(exp, sizeof(exp), "%s%s)", head, cases[c].why);
                ck_assert_msg(!strcmp(msg, exp), "case %zu:\n  got      \"%s\"\n  expected \"%s\"",
                              c, msg, exp);
                assert_kept(h, "c", 1, (const uint64_t[]){1}, NULL);
                expect_fdstoreremove();
                close(expect_fdstore());
                host_close(h);
        }
        expect_nothing_sent();
}
END_TEST

/* A log that wrapped: a record split across the end of the memfd comes back whole. */
START_TEST(a_record_across_the_end_of_the_log_comes_back)
{
        static const char t[] = "id: 7\nevent: w\ndata: wrapped around\n\n";
        uint64_t at = 5 * (uint64_t)LOG - 20; /* its head and part of its channel at the end */
        int fd = make_store(7, at, at);
        uint64_t len = put_rec(fd, at, 7, "wrap:ch", t, strlen(t));
        struct disk_head hd = read_head(fd);
        hd.head = at + len;
        write_head(fd, &hd);
        char msg[512];
        struct m0_host *h = host_open(BYTES, dup(fd), msg, sizeof(msg), NULL);
        ck_assert_str_eq(msg, "event state taken back from the fd store: ids continue after 7, 1 "
                              "frame of 1 channel kept for replay");
        assert_kept(h, "wrap:ch", 1, (const uint64_t[]){7}, (const char *const[]){t});
        ck_assert_int_eq(publish(h, "wrap:ch", NULL, "x"), 8);
        ck_assert_uint_eq(read_head(fd).head,
                          at + len + expect_rec(fd, at + len, 8, "wrap:ch", "id: 8\ndata: x\n\n"));
        host_close(h);
        close(fd);
}
END_TEST

static Suite *store_suite(void)
{
        Suite *s = suite_create("store");
        TCase *tc = tcase_create("kept");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, new_store_is_handed_to_systemd);
        tcase_add_test(tc, no_notify_socket_serves_without_the_store);
        tcase_add_test(tc, published_frames_are_written_and_come_back_with_their_channels);
        tcase_add_test(tc, a_frame_too_large_to_copy_is_kept_only_in_the_process);
        tcase_add_test(tc, a_quiet_channel_survives_a_busy_one_in_the_log);
        tcase_add_test(tc, two_copies_of_an_id_are_one_frame);
        tcase_add_test(tc, a_new_bound_carries_the_frames_into_a_new_log);
        tcase_add_test(tc, version_1_gives_its_ids);
        tcase_add_test(tc, a_record_across_the_end_of_the_log_comes_back);
        suite_add_tcase(s, tc);
        tc = tcase_create("refused");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_loop_test(tc, a_store_that_does_not_fit_is_replaced, 0,
                            (int)M0__ARRAY_SIZE(refused));
        tcase_add_test(tc, a_descriptor_that_is_no_file_is_replaced);
        tcase_add_test(tc, a_store_at_the_bounds_is_taken_back);
        tcase_add_loop_test(tc, each_record_is_one_well_formed_event_of_a_channel, 0,
                            (int)M0__ARRAY_SIZE(events));
        tcase_add_test(tc, a_record_out_of_range_is_dropped);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(store_suite());
}
