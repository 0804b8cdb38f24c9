/* SPDX-License-Identifier: MIT */
/* crash.c: which thread this is, what it serves, and the one report a fatal signal leaves (J2, L5). */
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "crash.h"
#include "log.h"
#include "hctx.h"

/*
 * Everything the signal handler reads is prepared before: thread identity in initial-exec TLS
 * (no allocation on first touch), a journal socket opened at install, a memfd that
 * backtrace_symbols_fd() writes into, and backtrace() warmed up once so that it does not load
 * libgcc from inside the handler. The handler itself only formats into stack buffers and makes
 * async-signal-safe calls (write, sendmsg, pread, lseek, ftruncate, nanosleep, raise; and the
 * ioctl that reads the journal socket's send queue).
 */

#define TLS __attribute__((tls_model("initial-exec")))
#define ALTSTACK_SIZE (64 * 1024)

static __thread int t_kind TLS = -1; /* -1: the coordinator */
static __thread int t_loop TLS = -1;
static __thread int t_thread TLS = -1;
static __thread char t_request[160] TLS;
/* The request this thread serves (m0__thread_request_set()), volatile: the handler reads them. */
static __thread const char *volatile t_req_method TLS;
static __thread const char *volatile t_req_path TLS;
static __thread volatile size_t t_req_path_len TLS;
static __thread struct m0_hctx *t_loop_ptr TLS;
static __thread void *t_altstack TLS;

static const char *crash_name;
static int journal_fd = -1;
static int bt_fd = -1;
static atomic_int crashing;

void m0__thread_identify(struct m0_hctx *l, m0_thread_kind kind, int loop, int thread)
{
        t_kind = (int)kind;
        t_loop = loop;
        t_thread = thread;
        t_loop_ptr = kind == M0_THREAD_LOOP ? l : NULL;
        /* The handler runs on its own stack: a stack overflow is reported too. */
        t_altstack = malloc(ALTSTACK_SIZE);
        if (t_altstack) {
                stack_t ss = {.ss_sp = t_altstack, .ss_size = ALTSTACK_SIZE};
                if (sigaltstack(&ss, NULL) < 0) {
                        free(t_altstack);
                        t_altstack = NULL;
                }
        }
}

int m0__thread_loop(void)
{
        return t_loop;
}

struct m0_hctx *m0__thread_loop_self(void)
{
        return t_loop_ptr;
}

void m0__thread_forget(void)
{
        if (t_altstack) {
                stack_t ss = {.ss_flags = SS_DISABLE};
                (void)sigaltstack(&ss, NULL);
                free(t_altstack);
                t_altstack = NULL;
        }
}

/* The request being served as method and path, into t_request. */
static void request_format(void)
{
        const char *method = t_req_method;
        if (!method) {
                t_request[0] = '\0';
                return;
        }
        size_t m = 0;
        while (m < 15 && method[m])
                m++;
        size_t p = t_req_path_len;
        if (p > sizeof(t_request) - m - 2)
                p = sizeof(t_request) - m - 2;
        memcpy(t_request, method, m);
        t_request[m] = ' ';
        memcpy(t_request + m + 1, t_req_path, p);
        t_request[m + 1 + p] = '\0';
}

void m0__thread_request_set(bool watched, const char *method, const char *path, size_t path_len)
{
        /* Where the request is, not a copy of it (D259): the crash handler formats it, on this
         * thread, while the request it names is still being served (its bytes are the loop's or
         * the job's until the caller sets NULL back). The method goes last when one is set and
         * first when it is cleared (the same assignment): a crash between two of these stores
         * finds no method, or the path and length that go with it. */
        if (!method)
                t_req_method = NULL;
        t_req_path = path;
        t_req_path_len = path_len;
        t_req_method = method;
        /* The watchdog names what a stuck loop serves; without it the lock is not taken. */
        if (watched && t_loop_ptr) {
                request_format();
                pthread_mutex_lock(&t_loop_ptr->cur_lock);
                memcpy(t_loop_ptr->cur, t_request, sizeof(t_loop_ptr->cur));
                pthread_mutex_unlock(&t_loop_ptr->cur_lock);
        }
}

/* ---- async-signal-safe formatting ---- */

struct out {
        char *p;
        size_t len, cap;
};

static void put(struct out *o, const char *s)
{
        while (*s && o->len + 1 < o->cap)
                o->p[o->len++] = *s++;
        o->p[o->len] = '\0';
}

static void put_u(struct out *o, unsigned long long v)
{
        char b[24];
        int i = (int)sizeof(b);
        b[--i] = '\0';
        do {
                b[--i] = (char)('0' + v % 10);
                v /= 10;
        } while (v);
        put(o, b + i);
}

static void put_x(struct out *o, uintptr_t v)
{
        static const char hex[] = "0123456789abcdef";
        char b[2 + 2 * sizeof(v) + 1];
        int i = (int)sizeof(b);
        b[--i] = '\0';
        do {
                b[--i] = hex[v & 15];
                v >>= 4;
        } while (v);
        b[--i] = 'x';
        b[--i] = '0';
        put(o, b + i);
}

static const char *sig_name(int sig)
{
        switch (sig) {
        case SIGSEGV: return "SIGSEGV";
        case SIGBUS: return "SIGBUS";
        case SIGILL: return "SIGILL";
        case SIGFPE: return "SIGFPE";
        case SIGABRT: return "SIGABRT";
        default: return "a fatal signal";
        }
}

static const char *kind_name(int kind)
{
        switch (kind) {
        case M0_THREAD_LOOP: return "loop";
        case M0_THREAD_POOL: return "pool";
        case M0_THREAD_PRODUCER: return "producer";
        case M0__THREAD_COMPUTE: return "compute";
        case M0__THREAD_METRICS: return "metrics";
        default: return "coordinator";
        }
}

/* One journal field: KEY=value, or KEY\n<le64 length><value> for values with newlines. */
static void field(struct iovec *iov, int *n, struct out *o, const char *key, const char *value)
{
        size_t start = o->len;
        size_t vlen = strlen(value);
        if (!memchr(value, '\n', vlen)) {
                put(o, key);
                put(o, "=");
                put(o, value);
                put(o, "\n");
        } else {
                put(o, key);
                put(o, "\n");
                if (o->len + 8 < o->cap) {
                        uint64_t le = vlen;
                        for (int i = 0; i < 8; i++)
                                o->p[o->len++] = (char)((le >> (8 * i)) & 0xff);
                }
                size_t room = o->cap - o->len - 2;
                size_t take = vlen < room ? vlen : room;
                memcpy(o->p + o->len, value, take);
                o->len += take;
                o->p[o->len++] = '\n';
        }
        iov[*n].iov_base = o->p + start;
        iov[*n].iov_len = o->len - start;
        (*n)++;
}

/* The report's one line: which thread, which signal, where, serving what. */
static void describe(struct out *m, int sig, const siginfo_t *si)
{
        if (t_kind == M0_THREAD_LOOP || t_kind == M0_THREAD_POOL) {
                put(m, "loop ");
                put_u(m, (unsigned)t_loop);
                if (t_kind == M0_THREAD_POOL) {
                        put(m, " pool thread ");
                        put_u(m, (unsigned)t_thread);
                }
        } else {
                put(m, t_kind == M0_THREAD_PRODUCER   ? "the producer"
                       : t_kind == M0__THREAD_COMPUTE ? "a compute thread"
                       : t_kind == M0__THREAD_METRICS ? "the metrics thread"
                                                      : "the coordinator");
        }
        put(m, " crashed: ");
        put(m, sig_name(sig));
        if (si->si_code > 0) {
                put(m, " at ");
                put_x(m, (uintptr_t)si->si_addr);
        } else {
                put(m, " (sent by a process)");
        }
        put(m, " on its ");
        put(m, kind_name(t_kind));
        put(m, " thread, serving ");
        put(m, t_request[0] ? t_request : "no request");
}

/* The backtrace, symbolised into the prepared memfd and read back into `out`. */
static void backtrace_text(char *out, size_t cap)
{
        void *frames[48];
        int nf = backtrace(frames, 48);
        out[0] = '\0';
        if (bt_fd >= 0 && nf > 0 && ftruncate(bt_fd, 0) == 0 && lseek(bt_fd, 0, SEEK_SET) == 0) {
                backtrace_symbols_fd(frames, nf, bt_fd);
                ssize_t r = pread(bt_fd, out, cap - 1, 0);
                out[r > 0 ? r : 0] = '\0';
        }
}

static const char *app_name(void)
{
        return crash_name ? crash_name : "m0";
}

/*
 * journald names the unit of an entry from the sender's /proc/PID/cgroup, read when it takes the
 * datagram; a process already gone by then is logged without _SYSTEMD_UNIT, and `journalctl -u`
 * misses its crash. So the dying process stays until journald has read the entry: an AF_UNIX
 * datagram is charged to the sending socket until the receiver consumes it, and SIOCOUTQ reads
 * that charge. Up to 1 s for the read, then 20 ms for the lookup that follows it (D18).
 */
static void wait_for_journald(void)
{
        struct timespec step = {.tv_nsec = 2 * 1000 * 1000};
        for (int i = 0; i < 500; i++) {
                int queued = 0;
                if (ioctl(journal_fd, SIOCOUTQ, &queued) < 0 || queued == 0)
                        break;
                nanosleep(&step, NULL);
        }
        struct timespec after = {.tv_nsec = 20 * 1000 * 1000};
        nanosleep(&after, NULL);
}

/* One structured entry to journald's socket (J2). True when it was sent. */
static bool report_to_journal(int sig, const char *msg, const char *btxt)
{
        if (journal_fd < 0)
                return false;
        char fbuf[8192];
        struct out f = {.p = fbuf, .cap = sizeof(fbuf)};
        struct iovec iov[10];
        int n = 0;
        char num[24];
        struct out nb = {.p = num, .cap = sizeof(num)};
        field(iov, &n, &f, "MESSAGE", msg);
        field(iov, &n, &f, "PRIORITY", "2");
        field(iov, &n, &f, "MESSAGE_ID", M0_MID_LOOP_CRASHED);
        field(iov, &n, &f, "M0_APP", app_name());
        if (t_loop >= 0) {
                put_u(&nb, (unsigned)t_loop);
                field(iov, &n, &f, "M0_LOOP", num);
        }
        field(iov, &n, &f, "M0_THREAD_KIND", kind_name(t_kind));
        field(iov, &n, &f, "M0_SIGNAL", sig_name(sig));
        field(iov, &n, &f, "M0_REQUEST", t_request[0] ? t_request : "-");
        field(iov, &n, &f, "M0_BACKTRACE", btxt[0] ? btxt : "-");
        struct sockaddr_un sa = {.sun_family = AF_UNIX, .sun_path = "/run/systemd/journal/socket"};
        struct msghdr mh = {.msg_name = &sa,
                            .msg_namelen = sizeof(sa),
                            .msg_iov = iov,
                            .msg_iovlen = (size_t)n};
        if (sendmsg(journal_fd, &mh, MSG_NOSIGNAL) < 0)
                return false;
        wait_for_journald();
        return true;
}

/* Not under journald (or it is gone): plain lines on stderr. */
static void report_to_stderr(const char *msg, const char *btxt)
{
        char lbuf[700];
        struct out l = {.p = lbuf, .cap = sizeof(lbuf)};
        put(&l, "m0[");
        put(&l, app_name());
        put(&l, "]: ");
        put(&l, msg);
        put(&l, "\nbacktrace:\n");
        /* One write of at most PIPE_BUF bytes, so that the report reaches a pipe whole, with no
         * other thread's line in the middle of it; a backtrace past that is cut. */
        size_t bn = strlen(btxt);
        if (l.len + bn > PIPE_BUF) {
                bn = PIPE_BUF > l.len ? PIPE_BUF - l.len : 0;
                while (bn && btxt[bn - 1] != '\n')
                        bn--; /* whole lines only */
        }
        struct iovec iov[2] = {{.iov_base = lbuf, .iov_len = l.len},
                               {.iov_base = (void *)btxt, .iov_len = bn}};
        ssize_t w = writev(STDERR_FILENO, iov, 2);
        (void)w;
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
        (void)uc;
        if (atomic_exchange(&crashing, 1)) {
                raise(sig); /* another thread reports; this one dies by the default action */
                return;
        }
        request_format(); /* plain reads of the request's own bytes, bounded */
        char mbuf[512];
        struct out m = {.p = mbuf, .cap = sizeof(mbuf)};
        describe(&m, sig, si);
        char btxt[4096];
        backtrace_text(btxt, sizeof(btxt));
        if (!report_to_journal(sig, mbuf, btxt))
                report_to_stderr(mbuf, btxt);
        /* SA_RESETHAND restored the default action: re-raise so that the core dump and
         * systemd's restart follow (the signal is delivered once this handler returns). */
        raise(sig);
}

void m0__crash_install(const char *name, bool journal)
{
        crash_name = name;
        void *warm[4];
        (void)backtrace(warm, 4);
        bt_fd = memfd_create("m0-backtrace", MFD_CLOEXEC);
        if (journal)
                journal_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_fatal;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
        for (size_t i = 0; i < M0__ARRAY_SIZE(sigs); i++)
                (void)sigaction(sigs[i], &sa, NULL);
}
