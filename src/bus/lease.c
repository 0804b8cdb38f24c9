/* SPDX-License-Identifier: MIT */
/* lease.c: a lease on the next ids in the service's StateDirectory, kept ahead of them by a thread
 * of its own, so that ids go on across a stop and a start, and past a crash without the fd store
 * (N3). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bus.h"
#include "lease.h"
#include "log.h"
#include "fdstore-log.h"
#include "util.h"

/*
 * The file holds one decimal id and a newline: no id above it was handed out. A publisher never
 * takes an id past the lease on disk (bus.c waits for it), so after a crash the next process
 * starts past every id a client could have seen. The lease runs ahead by twice the ids taken in
 * the last second, 65536 at least: the writer, woken halfway there or every second, keeps it
 * out of the publishers' way, and an fsync never holds one in the common case. At a clean stop
 * the newest id itself is written, and the next start continues right after it.
 */

static void set_why(char *why, size_t len, const char *what, const char *path, int err)
{
        snprintf(why, len, "%s %s: %s", what, path, strerror(err));
}

int m0__lease_open(struct m0_lease *l, const char *dir, uint64_t *ret_lease, char *why,
                   size_t why_len)
{
        memset(l, 0, sizeof(*l));
        l->dirfd = l->wake_fd = -1;
        if (!dir || !*dir)
                return -ENOENT;
        size_t n = strcspn(dir, ":");
        snprintf(l->dir, sizeof(l->dir), "%.*s", (int)n, dir);
        l->dirfd = open(l->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (l->dirfd < 0) {
                int e = errno;
                set_why(why, why_len, "cannot open", l->dir, e);
                return -e;
        }
        int fd = openat(l->dirfd, M0__LEASE_FILE, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                int e = errno;
                if (e == ENOENT)
                        return 0;
                set_why(why, why_len, "cannot read", M0__LEASE_FILE, e);
                return -e;
        }
        char buf[32];
        ssize_t got = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        uint64_t v = 0;
        bool ok = got >= 2 && buf[got - 1] == '\n';
        for (ssize_t i = 0; ok && i < got - 1; i++) {
                ok = buf[i] >= '0' && buf[i] <= '9' && v <= M0__STORE_COUNT_MAX / 10;
                v = v * 10 + (unsigned)(buf[i] - '0');
        }
        if (!ok || v > M0__STORE_COUNT_MAX) {
                snprintf(why, why_len, "%s/%s holds no id this host writes", l->dir,
                         M0__LEASE_FILE);
                return -EBADMSG;
        }
        *ret_lease = v;
        return 1;
}

/* `id` into the file, durably: a new file, fsync'd, renamed over the old, the directory
 * fsync'd. 0 or -errno. */
static int write_lease(struct m0_lease *l, uint64_t id)
{
        static const char tmp[] = M0__LEASE_FILE ".new";
        char text[32];
        int n = snprintf(text, sizeof(text), "%" PRIu64 "\n", id);
        int fd = openat(l->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        int r = 0;
        if (write(fd, text, (size_t)n) != n || fsync(fd) < 0)
                r = errno ? -errno : -EIO;
        close(fd);
        if (r == 0 && renameat(l->dirfd, tmp, l->dirfd, M0__LEASE_FILE) < 0)
                r = -errno;
        if (r == 0 && fsync(l->dirfd) < 0)
                r = -errno;
        if (r == 0)
                l->writes++;
        return r;
}

/* Twice the ids taken per second since the last write, M0__LEASE_MIN at least. */
static uint64_t headroom(struct m0_lease *l, uint64_t last, uint64_t now_ms)
{
        uint64_t dt = now_ms > l->base_ms ? now_ms - l->base_ms : 1;
        uint64_t taken = last > l->base ? last - l->base : 0;
        uint64_t h = taken > UINT64_MAX / 2000 ? UINT64_MAX / 2 : taken * 2000 / dt;
        if (h < M0__LEASE_MIN)
                h = M0__LEASE_MIN;
        return h > (UINT64_C(1) << 40) ? UINT64_C(1) << 40 : h;
}

/* Write a lease ahead of the newest id and tell the bus. A failed write lets publishers go on
 * unbounded (said once): serving matters more than the guarantee, which the log says is lost
 * until a write succeeds again. */
static void renew(struct m0_lease *l)
{
        struct m0_bus *b = l->bus;
        pthread_mutex_lock(&b->lock);
        uint64_t last = b->last_id;
        pthread_mutex_unlock(&b->lock);
        uint64_t now = m0__now_ms();
        uint64_t h = headroom(l, last, now);
        /* Ids up to the lease on disk may be out already: a new one never goes below it. */
        uint64_t lease = last + h > l->written ? last + h : l->written;
        if (lease > M0__ID_MAX)
                lease = M0__ID_MAX; /* past it no id is handed out (D46) */
        int r = write_lease(l, lease);
        if (r == 0)
                l->written = lease;
        pthread_mutex_lock(&b->lock);
        b->lease = r == 0 ? lease : UINT64_MAX;
        b->lease_low = r == 0 ? last + h / 2 : UINT64_MAX;
        b->lease_poked = false;
        pthread_cond_broadcast(&b->lease_cond);
        pthread_mutex_unlock(&b->lock);
        l->base = last;
        l->base_ms = now;
        l->headroom = h;
        if (r < 0 && !l->failing)
                m0__log(M0_LOG_ERR, -1, NULL,
                        "cannot write the id lease %s/%s: %s; until it can, ids may go backwards "
                        "after a crash",
                        l->dir, M0__LEASE_FILE, strerror(-r));
        else if (r == 0 && l->failing)
                m0__log(M0_LOG_NOTICE, -1, NULL, "the id lease %s/%s is written again", l->dir,
                        M0__LEASE_FILE);
        l->failing = r < 0;
}

static void *lease_main(void *arg)
{
        struct m0_lease *l = arg;
        struct m0_bus *b = l->bus;
        while (!atomic_load(&l->stop)) {
                struct pollfd pf = {.fd = l->wake_fd, .events = POLLIN};
                (void)poll(&pf, 1, 1000);
                uint64_t v;
                if (read(l->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                        break;
                if (atomic_load(&l->stop))
                        break;
                pthread_mutex_lock(&b->lock);
                bool moved = b->last_id != l->base || b->lease_poked || l->failing;
                pthread_mutex_unlock(&b->lock);
                if (moved)
                        renew(l);
        }
        return NULL;
}

int m0__lease_start(struct m0_lease *l, struct m0_bus *b, char *err, size_t err_len)
{
        l->bus = b;
        l->base = m0__bus_last(b);
        l->written = l->base;
        l->base_ms = m0__now_ms();
        l->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (l->wake_fd < 0) {
                snprintf(err, err_len, "eventfd: %s", strerror(errno));
                return -errno;
        }
        renew(l);
        pthread_mutex_lock(&b->lock);
        b->lease_fd = l->wake_fd;
        pthread_mutex_unlock(&b->lock);
        /* Signals are the coordinator's (L6): the thread starts with all of them blocked. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        int r = pthread_create(&l->thread, NULL, lease_main, l);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r != 0) {
                snprintf(err, err_len, "cannot start the lease's thread: %s", strerror(r));
                pthread_mutex_lock(&b->lock);
                b->lease = b->lease_low = UINT64_MAX;
                b->lease_fd = -1;
                pthread_mutex_unlock(&b->lock);
                return -r;
        }
        pthread_setname_np(l->thread, "m0-lease");
        l->running = true;
        return 0;
}

void m0__lease_stop(struct m0_lease *l, bool exact)
{
        if (l->running) {
                atomic_store(&l->stop, true);
                uint64_t one = 1;
                ssize_t w = write(l->wake_fd, &one, sizeof(one));
                (void)w;
                pthread_join(l->thread, NULL);
                l->running = false;
        }
        if (exact && l->bus && l->dirfd >= 0) {
                uint64_t last = m0__bus_last(l->bus);
                int r = write_lease(l, last);
                if (r < 0)
                        m0__log(M0_LOG_ERR, -1, NULL, "cannot write the last id %llu to %s/%s: %s",
                                (unsigned long long)last, l->dir, M0__LEASE_FILE, strerror(-r));
        }
        if (l->bus) {
                /* A thread still running past the drain's bound may publish: it waits at the
                 * lease as it stands (the process is ending), and pokes nobody. */
                pthread_mutex_lock(&l->bus->lock);
                if (exact)
                        l->bus->lease = l->bus->lease_low = UINT64_MAX;
                l->bus->lease_fd = -1;
                pthread_mutex_unlock(&l->bus->lock);
        }
        if (l->wake_fd >= 0)
                close(l->wake_fd);
        if (l->dirfd >= 0)
                close(l->dirfd);
        l->wake_fd = l->dirfd = -1;
}
