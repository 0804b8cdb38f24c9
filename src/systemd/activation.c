/* SPDX-License-Identifier: MIT */
/* activation.c: the listening sockets, passed by systemd or bound on the embedded default (Y1). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "activation.h"
#include "fdstore-log.h"
#include "util.h"

static void describe(int fd, int family, char *out, size_t len)
{
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
                snprintf(out, len, "fd %d", fd);
                return;
        }
        char a[INET6_ADDRSTRLEN];
        switch (family) {
        case AF_INET: {
                struct sockaddr_in *s = (struct sockaddr_in *)&ss;
                inet_ntop(AF_INET, &s->sin_addr, a, sizeof(a));
                snprintf(out, len, "%s:%u", a, ntohs(s->sin_port));
                break;
        }
        case AF_INET6: {
                struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
                inet_ntop(AF_INET6, &s->sin6_addr, a, sizeof(a));
                snprintf(out, len, "[%s]:%u", a, ntohs(s->sin6_port));
                break;
        }
        case AF_UNIX: {
                struct sockaddr_un *s = (struct sockaddr_un *)&ss;
                if (sl > offsetof(struct sockaddr_un, sun_path) && s->sun_path[0])
                        snprintf(out, len, "%.*s", (int)(sizeof(s->sun_path)), s->sun_path);
                else
                        snprintf(out, len, "unix:@abstract");
                break;
        }
        default: snprintf(out, len, "fd %d (family %d)", fd, family);
        }
}

/* Append a listener to the list `*v` of `*n`. */
static int add_to(struct m0_listener **v, size_t *n, int fd, const char *name, int family)
{
        struct m0_listener *nv = realloc(*v, (*n + 1) * sizeof(*nv));
        if (!nv)
                return -ENOMEM;
        *v = nv;
        struct m0_listener *l = &nv[(*n)++];
        memset(l, 0, sizeof(*l));
        l->fd = fd;
        l->family = family;
        snprintf(l->name, sizeof(l->name), "%s", name ? name : "");
        l->tls = !strcmp(l->name, M0__TLS_NAME);
        describe(fd, family, l->where, sizeof(l->where));
        return 0;
}

static int add(struct m0_sockets *s, int fd, const char *name, int family)
{
        return add_to(&s->v, &s->n, fd, name, family);
}

int m0__sockets_take(struct m0_sockets *s, char *err, size_t err_len)
{
        char **names = NULL;
        int n = sd_listen_fds_with_names(1, &names);
        int r = 0;
        if (n < 0) {
                snprintf(err, err_len, "LISTEN_FDS could not be read: %s", strerror(-n));
                return n;
        }
        s->store_fd = -1;
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                const char *name = names ? names[i] : "";
                /* B4: state the host put in the fd store comes back by name; it is no socket. */
                if (!strcmp(name, M0__STORE_NAME) && s->store_fd < 0) {
                        s->store_fd = fd;
                        continue;
                }
                int family = 0;
                socklen_t fl = sizeof(family);
                int r2 = sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1);
                if (r2 <= 0 || getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &fl) < 0 ||
                    (family != AF_INET && family != AF_INET6 && family != AF_UNIX)) {
                        snprintf(err, err_len,
                                 "passed fd %d ('%s') is not a listening stream socket", fd, name);
                        r = -ENOTSOCK;
                        /* keep going so that every passed fd is owned and closed */
                }
                /* Each loop watches the listener from its own epoll set: make it non-blocking. */
                int fl2 = fcntl(fd, F_GETFL);
                if (fl2 >= 0)
                        (void)fcntl(fd, F_SETFL, fl2 | O_NONBLOCK);
                /* O1: the metrics are served on their own sockets, never on the app's. */
                int ar = strcmp(name, M0__METRICS_NAME)
                                 ? add(s, fd, name, family)
                                 : add_to(&s->metrics, &s->nmetrics, fd, name, family);
                if (ar < 0 && r == 0)
                        r = ar;
        }
        if (names) {
                for (int i = 0; i < n; i++)
                        free(names[i]);
                free(names);
        }
        s->passed = s->n > 0;
        s->metrics_passed = s->nmetrics > 0;
        return r;
}

/* getaddrinfo() for host:port exactly as serving binds it. 0, or -EINVAL with `err` filled,
 * naming the knob `what` the host came from. */
static int resolve(const char *host, uint32_t port, const char *what, struct addrinfo **ret,
                   char *err, size_t err_len)
{
        struct addrinfo hints = {.ai_family = AF_UNSPEC,
                                 .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
        char ps[8];
        snprintf(ps, sizeof(ps), "%u", port);
        int g = getaddrinfo(host, ps, &hints, ret);
        if (g != 0) {
                snprintf(err, err_len, "cannot resolve %s '%s': %s", what, host,
                         g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
                return -EINVAL;
        }
        return 0;
}

static void listen_failed(const char *host, uint32_t port, int r, char *err, size_t err_len)
{
        snprintf(err, err_len, "cannot listen on %s:%u: %s", host, port, strerror(-r));
}

int m0__sockets_check_address(const char *host, uint32_t port, const char *what, char *err,
                              size_t err_len)
{
        struct addrinfo *res = NULL;
        int r = resolve(host, port, what, &res, err, err_len);
        if (r < 0)
                return r;
        r = -EADDRNOTAVAIL;
        for (struct addrinfo *ai = res; ai && r < 0; ai = ai->ai_next) {
                struct sockaddr_storage ss;
                if (ai->ai_addrlen > sizeof(ss))
                        continue;
                memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
                if (ss.ss_family == AF_INET)
                        ((struct sockaddr_in *)&ss)->sin_port = 0;
                else if (ss.ss_family == AF_INET6)
                        ((struct sockaddr_in6 *)&ss)->sin6_port = 0;
                int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
                if (fd < 0) {
                        r = -errno;
                        continue;
                }
                r = bind(fd, (struct sockaddr *)&ss, ai->ai_addrlen) < 0 ? -errno : 0;
                close(fd);
        }
        freeaddrinfo(res);
        if (r < 0)
                listen_failed(host, port, r, err, err_len);
        return r;
}

/* Bind and listen on the first address of host:port that takes it, added to the list `*v` of
 * `*n` as `name`. 0, or -errno with `err` saying which address could not be listened on. */
static int bind_listener(struct m0_listener **v, size_t *n, const char *name, const char *host,
                         uint32_t port, const char *what, char *err, size_t err_len)
{
        struct addrinfo *res = NULL;
        int r = resolve(host, port, what, &res, err, err_len);
        if (r < 0)
                return r;
        r = -EADDRNOTAVAIL;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fd < 0) {
                        r = -errno;
                        continue;
                }
                int one = 1;
                (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
                if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 4096) < 0) {
                        r = -errno;
                        close(fd);
                        continue;
                }
                r = add_to(v, n, fd, name, ai->ai_family);
                if (r < 0)
                        close(fd);
                break;
        }
        freeaddrinfo(res);
        if (r < 0)
                listen_failed(host, port, r, err, err_len);
        return r;
}

int m0__sockets_bind(struct m0_sockets *s, const char *host, uint32_t port, char *err,
                     size_t err_len)
{
        int r = bind_listener(&s->v, &s->n, "default", host, port, M0__HOST_KNOBS, err, err_len);
        if (r < 0) {
                size_t n = strlen(err);
                snprintf(err + n, err_len - n, " (%s)", M0__LISTEN_FIX);
        }
        return r;
}

int m0__sockets_bind_tls(struct m0_sockets *s, const char *host, uint32_t port, char *err,
                         size_t err_len)
{
        int r = bind_listener(&s->v, &s->n, M0__TLS_NAME, host, port, M0__HOST_KNOBS, err, err_len);
        if (r < 0) {
                size_t n = strlen(err);
                snprintf(err + n, err_len - n, " (set --tls-port or M0_TLS_PORT to a free port)");
        }
        return r;
}

int m0__sockets_bind_metrics(struct m0_sockets *s, const char *host, uint32_t port, char *err,
                             size_t err_len)
{
        int r = bind_listener(&s->metrics, &s->nmetrics, M0__METRICS_NAME, host, port,
                              M0__METRICS_KNOB, err, err_len);
        if (r < 0) {
                size_t n = strlen(err);
                snprintf(err + n, err_len - n, " (%s)", M0__METRICS_FIX);
        }
        return r;
}

void m0__sockets_close(struct m0_sockets *s)
{
        if (s->store_fd >= 0)
                close(s->store_fd);
        s->store_fd = -1;
        for (size_t i = 0; i < s->n; i++)
                if (s->v[i].fd >= 0)
                        close(s->v[i].fd);
        free(s->v);
        s->v = NULL;
        s->n = 0;
        for (size_t i = 0; i < s->nmetrics; i++)
                if (s->metrics[i].fd >= 0)
                        close(s->metrics[i].fd);
        free(s->metrics);
        s->metrics = NULL;
        s->nmetrics = 0;
}
