/* SPDX-License-Identifier: MIT */
/* activation.h: activation.c, the sockets systemd passed (Y1), or the one bound when none was. */
#ifndef M0_ACTIVATION_H
#define M0_ACTIVATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct m0_listener {
        int fd;
        char name[64];
        int family;
        char where[128]; /* "127.0.0.1:8080", "/run/m0/app.sock" */
};

struct m0_sockets {
        struct m0_listener *v;
        size_t n;
        bool passed;  /* came from systemd (LISTEN_FDS) */
        int store_fd; /* the fd store's event state (named M0__STORE_NAME), or -1 */
};

/*
 * Take the sockets systemd passed; `unset_env` clears LISTEN_*. Checks each is a listening
 * stream socket; on a bad one fills `err` and returns -ENOTSOCK (or another -errno).
 */
int m0__sockets_take(struct m0_sockets *s, char *err, size_t err_len);
/* Bind host:port when nothing was passed. 0 or -errno with `err` filled. */
int m0__sockets_bind(struct m0_sockets *s, const char *host, uint32_t port, char *err,
                     size_t err_len);
/*
 * Whether serving could bind host:port when nothing was passed, without taking the port: the
 * name resolves as m0__sockets_bind() resolves it, and one of its addresses is this machine's
 * (bound once on port 0, never listened on, closed at once; D47). 0, or -errno with `err`
 * filled as serving's line would be, for the `listen-sockets` check (R2, D1).
 */
int m0__sockets_check_address(const char *host, uint32_t port, char *err, size_t err_len);
/* What a refusal about the address serving binds tells the operator to do. */
#define M0__LISTEN_FIX "set --host/--port or M0_HOST/M0_PORT"
void m0__sockets_close(struct m0_sockets *s);

#endif /* M0_ACTIVATION_H */
