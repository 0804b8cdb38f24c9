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
        bool tls;        /* named M0__TLS_NAME: its connections are TLS (TL1) */
};

struct m0_sockets {
        struct m0_listener *v;
        size_t n;
        bool passed;  /* came from systemd (LISTEN_FDS) */
        int store_fd; /* the fd store's event state (named M0__STORE_NAME), or -1 */
        /* The metrics listeners (O1): passed ones named M0__METRICS_NAME, or the one bound for
         * M0_METRICS. Never among `v`: the app is not served on them, nor metrics on `v`. */
        struct m0_listener *metrics;
        size_t nmetrics;
        bool metrics_passed;
};

/* The name (FileDescriptorName=) of a passed socket whose connections are TLS (TL1), and the name
 * of the one bound for M0_TLS_PORT. */
#define M0__TLS_NAME "https"
/* The name (FileDescriptorName=) of a passed socket that serves the metrics, not the app. */
#define M0__METRICS_NAME "metrics"

/*
 * Take the sockets systemd passed; `unset_env` clears LISTEN_*. Checks each is a listening
 * stream socket; on a bad one fills `err` and returns -ENOTSOCK (or another -errno).
 */
int m0__sockets_take(struct m0_sockets *s, char *err, size_t err_len);
/* Bind host:port as a TLS listener (named M0__TLS_NAME) for M0_TLS_PORT, when nothing was passed.
 * 0 or -errno with `err` filled. */
int m0__sockets_bind_tls(struct m0_sockets *s, const char *host, uint32_t port, char *err,
                         size_t err_len);
/* Bind host:port when nothing was passed. 0 or -errno with `err` filled. */
int m0__sockets_bind(struct m0_sockets *s, const char *host, uint32_t port, char *err,
                     size_t err_len);
/*
 * Whether serving could bind host:port when nothing was passed, without taking the port: the
 * name resolves as m0__sockets_bind() resolves it, and one of its addresses is this machine's
 * (bound once on port 0, never listened on, closed at once; D47). 0, or -errno with `err`
 * filled as serving's line would be, `what` naming the knob, for the `listen-sockets` and
 * `metrics` checks (R2, D1).
 */
int m0__sockets_check_address(const char *host, uint32_t port, const char *what, char *err,
                              size_t err_len);
/* The knobs an address comes from, as the refusals name them. */
#define M0__HOST_KNOBS "--host (M0_HOST)"
#define M0__METRICS_KNOB "--metrics (M0_METRICS)"
/* What a refusal about the address serving binds tells the operator to do. */
#define M0__LISTEN_FIX "set --host/--port or M0_HOST/M0_PORT"
/* Bind the metrics listener on host:port (M0_METRICS) when no socket named M0__METRICS_NAME was
 * passed. 0 or -errno with `err` filled. */
int m0__sockets_bind_metrics(struct m0_sockets *s, const char *host, uint32_t port, char *err,
                             size_t err_len);
/* What a refusal about the metrics address tells the operator to do. */
#define M0__METRICS_FIX "set --metrics or M0_METRICS to HOST:PORT, or off"
void m0__sockets_close(struct m0_sockets *s);

#endif /* M0_ACTIVATION_H */
