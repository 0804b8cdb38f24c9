/* SPDX-License-Identifier: MIT */
/* log.c: one line per event, a structured journal entry under journald, a plain line elsewhere (J1). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

#include "crash.h"
#include "log.h"

/* Written once by the coordinator before any other thread exists; read-only after. */
static const char *log_app = "m0";
static bool log_journal;

/* JOURNAL_STREAM names the device and inode of the stream journald connected to stderr. */
static bool stderr_is_journal(void)
{
        const char *js = getenv("JOURNAL_STREAM");
        if (!js)
                return false;
        unsigned long long dev, ino;
        if (sscanf(js, "%llu:%llu", &dev, &ino) != 2)
                return false;
        struct stat st;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void m0__log_init(const char *app_name)
{
        log_app = app_name ? app_name : "m0";
        log_journal = stderr_is_journal();
}

bool m0__log_journal(void)
{
        return log_journal;
}

static void emit(int prio, int loop, const char *mid, const char *const *fields, size_t nfields,
                 const char *msg);

void m0__log(int prio, int loop, const char *mid, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        emit(prio, loop, mid, NULL, 0, msg);
}

void m0__log_fields(int prio, int loop, const char *const *fields, size_t nfields, const char *fmt,
                    ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        emit(prio, loop, NULL, fields, nfields, msg);
}

void m0_log(int priority, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (priority < M0_LOG_CRIT)
                priority = M0_LOG_CRIT; /* alert and emergency belong to the host's own reports */
        if (priority > M0_LOG_DEBUG)
                priority = M0_LOG_DEBUG;
        emit(priority, m0__thread_loop(), NULL, NULL, 0, msg);
}

/* The journal entry's own fields and the caller's: MESSAGE, PRIORITY, M0_APP, M0_LOOP, MESSAGE_ID
 * and up to M0__LOG_FIELDS_MAX more. */
#define ENTRY_FIELDS (5 + M0__LOG_FIELDS_MAX)

static void emit(int prio, int loop, const char *mid, const char *const *fields, size_t nfields,
                 const char *msg)
{
        if (log_journal) {
                char f[5][1100];
                struct iovec iov[ENTRY_FIELDS];
                int n = 0;
                snprintf(f[n++], sizeof(f[0]), "MESSAGE=%s", msg);
                snprintf(f[n++], sizeof(f[0]), "PRIORITY=%d", prio);
                snprintf(f[n++], sizeof(f[0]), "M0_APP=%s", log_app);
                if (loop >= 0)
                        snprintf(f[n++], sizeof(f[0]), "M0_LOOP=%d", loop);
                if (mid)
                        snprintf(f[n++], sizeof(f[0]), "MESSAGE_ID=%s", mid);
                for (int i = 0; i < n; i++)
                        iov[i] = (struct iovec){.iov_base = f[i], .iov_len = strlen(f[i])};
                for (size_t i = 0; i < nfields && i < M0__LOG_FIELDS_MAX; i++)
                        iov[n++] = (struct iovec){.iov_base = (void *)fields[i],
                                                  .iov_len = strlen(fields[i])};
                if (sd_journal_sendv(iov, n) >= 0)
                        return;
                /* journald went away: fall back to the plain line */
        }
        /* One write per line so that lines from different threads never interleave. */
        char line[1200];
        int n;
        if (loop >= 0)
                n = snprintf(line, sizeof(line), "m0[%s] loop %d: %s\n", log_app, loop, msg);
        else
                n = snprintf(line, sizeof(line), "m0[%s]: %s\n", log_app, msg);
        if (n > (int)sizeof(line) - 1)
                n = (int)sizeof(line) - 1;
        ssize_t w = write(STDERR_FILENO, line, (size_t)n);
        (void)w;
}
