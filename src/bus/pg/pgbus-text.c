/* SPDX-License-Identifier: MIT */
/* pgbus-text.c: the shared bus's text: what may be published, libpq's messages as reasons, the URI's syntax, the doctor's probe (G1, G3, G6). */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "bus.h"
#include "pgbus-private.h"

/* ---- text ---- */

_Static_assert(M0__PGBUS_CHANNEL_MAX == M0__CHANNEL_MAX, "one rule for a channel's name");

/* Visible ASCII, 1–200 bytes (N1): the local bus's rule, so that a name one bus takes the
 * other takes too. */
bool m0__pgbus_channel_ok(const char *s, size_t len)
{
        return m0__channel_ok(s, len);
}

/* Well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF): the
 * database's text must be, or the whole batch would fail. */
bool m0__pgbus_utf8_ok(const char *s)
{
        const unsigned char *p = (const unsigned char *)s;
        while (*p) {
                unsigned char c = *p;
                int n;
                uint32_t cp, min;
                if (c < 0x80) {
                        p++;
                        continue;
                } else if ((c & 0xe0) == 0xc0) {
                        n = 1, cp = c & 0x1f, min = 0x80;
                } else if ((c & 0xf0) == 0xe0) {
                        n = 2, cp = c & 0x0f, min = 0x800;
                } else if ((c & 0xf8) == 0xf0) {
                        n = 3, cp = c & 0x07, min = 0x10000;
                } else {
                        return false;
                }
                for (int i = 1; i <= n; i++) {
                        if ((p[i] & 0xc0) != 0x80)
                                return false;
                        cp = (cp << 6) | (p[i] & 0x3f);
                }
                if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                        return false;
                p += n + 1;
        }
        return true;
}

/* libpq's message as one line: its first line, runs of blanks made one space. */
void m0__pgbus_one_line(char *out, size_t len, const char *msg)
{
        size_t o = 0;
        bool space = false;
        if (!msg)
                msg = "";
        while (*msg == ' ' || *msg == '\t')
                msg++;
        for (; *msg && *msg != '\n' && o + 1 < len; msg++) {
                if (*msg == ' ' || *msg == '\t' || *msg == '\r') {
                        space = true;
                        continue;
                }
                if (space && o + 2 < len)
                        out[o++] = ' ';
                space = false;
                out[o++] = *msg;
        }
        out[o] = '\0';
        if (!o)
                snprintf(out, len, "no reason given");
}

#define DENY_FIX                                                                                   \
        "under m0@.service IPAddressDeny=any refuses it until a drop-in allows the database's "    \
        "address (IPAddressAllow=, doc/systemd.md)"

/* The reason for the state and the log: libpq's words, and the cause when the kernel refused a
 * connection with EPERM — under m0@.service that is IPAddressDeny=any (D28). */
static void reason_of_line(char *out, size_t len, const char *line)
{
        if (strstr(line, strerror(EPERM)))
                snprintf(out, len, "%s: the kernel refused the connection (EPERM); " DENY_FIX,
                         line);
        else
                snprintf(out, len, "%s", line);
}

void m0__pgbus_reason_of(char *out, size_t len, const char *msg)
{
        char line[300];
        m0__pgbus_one_line(line, sizeof(line), msg);
        reason_of_line(out, len, line);
}

/*
 * The address `pg` was trying when the kernel refuses packets to it, else NULL. Under IPAddressDeny= the
 * cgroup's firewall drops a TCP connect's SYN, which the connect only retries until its timeout
 * ("no connection within 10 s"); a datagram of no bytes to the same address is refused at the
 * send with EPERM, so that is asked. A Unix socket, or an address that cannot be resolved
 * again, is not refused (D102).
 */
static const char *firewalled(PGconn *pg)
{
        const char *host = PQhostaddr(pg);
        if (!host || !*host)
                host = PQhost(pg);
        const char *port = PQport(pg);
        if (!host || !*host || host[0] == '/' || host[0] == '@' || !port || !*port)
                return NULL;
        struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICSERV};
        struct addrinfo *ai = NULL;
        if (getaddrinfo(host, port, &hints, &ai) != 0)
                return NULL;
        bool denied = false;
        for (const struct addrinfo *a = ai; a && !denied; a = a->ai_next) {
                int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        continue;
                if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
                    send(fd, "", 0, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == EPERM)
                        denied = true;
                close(fd);
        }
        freeaddrinfo(ai);
        return denied ? host : NULL;
}

void m0__pgbus_reason_of_attempt(char *out, size_t len, const char *msg, PGconn *pg)
{
        char line[300];
        m0__pgbus_one_line(line, sizeof(line), msg);
        const char *host = NULL;
        if (strstr(line, strerror(EPERM)) || !pg || !(host = firewalled(pg))) {
                reason_of_line(out, len, line);
                return;
        }
        snprintf(out, len, "%s: the kernel refuses packets to %s (EPERM); " DENY_FIX, line, host);
}

/* Append `s` as a quoted SQL literal escaped for `pg`'s settings. 0 or -ENOMEM/-EINVAL. */
int m0__pgbus_sql_literal(struct m0_buf *b, PGconn *pg, const char *s)
{
        size_t n = strlen(s);
        if (m0__buf_reserve(b, 2 * n + 3) < 0)
                return -ENOMEM;
        int err = 0;
        b->data[b->len++] = '\'';
        b->len += PQescapeStringConn(pg, b->data + b->len, s, n, &err);
        b->data[b->len++] = '\'';
        b->data[b->len] = '\0';
        return err ? -EINVAL : 0;
}

/* ---- the URI ---- */

int m0__pgbus_uri_check(const char *uri, char *err, size_t err_len)
{
        if (strncmp(uri, "postgresql://", 13) != 0 && strncmp(uri, "postgres://", 11) != 0) {
                snprintf(err, err_len, "not local and not a postgresql:// URI");
                return -EINVAL;
        }
        char *msg = NULL;
        PQconninfoOption *o = PQconninfoParse(uri, &msg);
        if (!o) {
                char line[256];
                m0__pgbus_one_line(line, sizeof(line), msg ? msg : "out of memory");
                /* libpq quotes the URI after this, password and all: the log must not */
                char *quoted = strstr(line, " in URI: ");
                if (quoted)
                        *quoted = '\0';
                snprintf(err, err_len, "%s", line);
                PQfreemem(msg);
                return -EINVAL;
        }
        PQconninfoFree(o);
        return 0;
}

int m0__pgbus_probe(const char *uri, int timeout_s, char *detail, size_t detail_len)
{
        char t[16];
        snprintf(t, sizeof(t), "%d", timeout_s > 0 ? timeout_s : 1);
        const char *keys[] = {"dbname", "connect_timeout", "application_name", NULL};
        const char *vals[] = {uri, t, "m0/doctor", NULL};
        PGconn *pg = PQconnectdbParams(keys, vals, 1);
        char why[600];
        int r = 0;
        if (!pg) {
                snprintf(detail, detail_len, "cannot reach the database: out of memory");
                return -ENOMEM;
        }
        if (PQstatus(pg) != CONNECTION_OK) {
                m0__pgbus_reason_of_attempt(why, sizeof(why), PQerrorMessage(pg), pg);
                snprintf(detail, detail_len,
                         "cannot reach the database (%s); serving would start and keep "
                         "reconnecting",
                         why);
                r = -ECONNREFUSED;
                goto finish;
        }
        PGresult *res = PQexec(pg, "SELECT current_setting('server_version'), "
                                   "to_regclass('" T_EVENTS "') IS NOT NULL");
        if (PQresultStatus(res) != PGRES_TUPLES_OK) {
                m0__pgbus_one_line(why, sizeof(why), PQresultErrorMessage(res));
                snprintf(detail, detail_len, "reached the database, which answered: %s", why);
                r = -EIO;
        } else {
                bool have = PQgetvalue(res, 0, 1)[0] == 't';
                snprintf(detail, detail_len, "reached database %s as %s (PostgreSQL %s); %s",
                         PQdb(pg), PQuser(pg), PQgetvalue(res, 0, 0),
                         have ? "m0's tables are there"
                              : "m0's tables are not there yet: the first host creates them");
        }
        PQclear(res);
finish:
        PQfinish(pg);
        return r;
}
