/* SPDX-License-Identifier: MIT */
/* turns.c: an LD_PRELOAD shim that measures a loop's turns from outside: the work a thread does
 * between one epoll_wait() and the next (the events it was given, and its read, send, close,
 * shutdown, epoll_ctl, accept4 and setsockopt calls, and its CPU and wall time). At exit it
 * writes to M0TEST_TURN_LOG, for each thread name, one line per counter, "max THREAD NAME N",
 * the most any one turn of a thread of that name did; then "turns N", and the turns of most CPU
 * time, "turn at_us cpu_us wall_us events reads sends closes shutdowns ctls accepts sockopts"
 * (at_us: when the turn began, on CLOCK_MONOTONIC). Built by the test that uses it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { EVENTS, READS, SENDS, CLOSES, SHUTDOWNS, CTLS, ACCEPTS, SOCKOPTS, NCOUNT };
static const char *const names[NCOUNT] = {"events",    "reads", "sends",   "closes",
                                          "shutdowns", "ctls",  "accepts", "sockopts"};

struct turn {
        int64_t at_us, cpu_us, wall_us;
        uint64_t n[NCOUNT];
};

static __thread bool in_turn;
static __thread struct turn cur;
static __thread int64_t cpu0, wall0;
static __thread int slot = -1; /* this thread's name's row of `maxes` */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
        char name[16];
        uint64_t n[NCOUNT];
} maxes[64];
static int nmaxes;
static uint64_t turns;
static struct turn top[40];

/* The real function, looked up once (a race between threads looks it up twice, harmlessly). */
#define REAL(name, type)                                                                           \
        ({                                                                                         \
                static __typeof__(type) fn_;                                                       \
                if (!fn_)                                                                          \
                        fn_ = (type)dlsym(RTLD_NEXT, name);                                        \
                fn_;                                                                               \
        })

static int64_t clock_us(clockid_t id)
{
        struct timespec t;
        clock_gettime(id, &t);
        return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static void turn_end(void)
{
        cur.cpu_us = clock_us(CLOCK_THREAD_CPUTIME_ID) - cpu0;
        cur.wall_us = clock_us(CLOCK_MONOTONIC) - wall0;
        cur.at_us = wall0;
        char name[16] = "";
        if (slot < 0)
                pthread_getname_np(pthread_self(), name, sizeof(name));
        pthread_mutex_lock(&lock);
        turns++;
        for (int i = 0; slot < 0 && i < nmaxes; i++)
                if (strcmp(maxes[i].name, name) == 0)
                        slot = i;
        if (slot < 0 && nmaxes < (int)(sizeof(maxes) / sizeof(maxes[0]))) {
                slot = nmaxes++;
                memcpy(maxes[slot].name, name, sizeof(name));
        }
        for (int i = 0; slot >= 0 && i < NCOUNT; i++)
                if (cur.n[i] > maxes[slot].n[i])
                        maxes[slot].n[i] = cur.n[i];
        size_t least = 0;
        for (size_t i = 1; i < sizeof(top) / sizeof(top[0]); i++)
                if (top[i].cpu_us < top[least].cpu_us)
                        least = i;
        if (cur.cpu_us > top[least].cpu_us)
                top[least] = cur;
        pthread_mutex_unlock(&lock);
}

int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
        if (in_turn)
                turn_end();
        int n = REAL("epoll_wait", int (*)(int, struct epoll_event *, int, int))(epfd, evs, max,
                                                                                 timeout);
        memset(&cur, 0, sizeof(cur));
        cur.n[EVENTS] = n > 0 ? (uint64_t)n : 0;
        cpu0 = clock_us(CLOCK_THREAD_CPUTIME_ID);
        wall0 = clock_us(CLOCK_MONOTONIC);
        in_turn = true;
        return n;
}

ssize_t read(int fd, void *buf, size_t len)
{
        cur.n[READS]++;
        return REAL("read", ssize_t(*)(int, void *, size_t))(fd, buf, len);
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
        cur.n[SENDS]++;
        return REAL("send", ssize_t(*)(int, const void *, size_t, int))(fd, buf, len, flags);
}

int close(int fd)
{
        cur.n[CLOSES]++;
        return REAL("close", int (*)(int))(fd);
}

int shutdown(int fd, int how)
{
        cur.n[SHUTDOWNS]++;
        return REAL("shutdown", int (*)(int, int))(fd, how);
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
        cur.n[CTLS]++;
        return REAL("epoll_ctl", int (*)(int, int, int, struct epoll_event *))(epfd, op, fd, ev);
}

int accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
        cur.n[ACCEPTS]++;
        return REAL("accept4", int (*)(int, struct sockaddr *, socklen_t *, int))(fd, sa, len,
                                                                                  flags);
}

int setsockopt(int fd, int level, int opt, const void *val, socklen_t len)
{
        cur.n[SOCKOPTS]++;
        return REAL("setsockopt", int (*)(int, int, int, const void *, socklen_t))(fd, level, opt,
                                                                                   val, len);
}

static int by_cpu(const void *a, const void *b)
{
        const struct turn *x = a, *y = b;
        return (y->cpu_us > x->cpu_us) - (y->cpu_us < x->cpu_us);
}

__attribute__((destructor)) static void report(void)
{
        const char *path = getenv("M0TEST_TURN_LOG");
        FILE *f = path ? fopen(path, "we") : NULL;
        if (!f)
                return;
        pthread_mutex_lock(&lock);
        for (int t = 0; t < nmaxes; t++)
                for (int i = 0; i < NCOUNT; i++)
                        fprintf(f, "max %s %s %llu\n", maxes[t].name, names[i],
                                (unsigned long long)maxes[t].n[i]);
        fprintf(f, "turns %llu\n", (unsigned long long)turns);
        qsort(top, sizeof(top) / sizeof(top[0]), sizeof(top[0]), by_cpu);
        for (size_t i = 0; i < sizeof(top) / sizeof(top[0]) && top[i].cpu_us; i++) {
                fprintf(f, "turn %lld %lld %lld", (long long)top[i].at_us, (long long)top[i].cpu_us,
                        (long long)top[i].wall_us);
                for (int k = 0; k < NCOUNT; k++)
                        fprintf(f, " %llu", (unsigned long long)top[i].n[k]);
                fprintf(f, "\n");
        }
        pthread_mutex_unlock(&lock);
        fclose(f);
}
