/* SPDX-License-Identifier: MIT */
/* h2.h: h2.c, HTTP/2 as a connection's protocol (HT1): libnghttp2's server session over the
 * connection's transport, whose requests go through the same dispatch, routes and handlers as
 * HTTP/1.1's (LY3, HT2). */
#ifndef M0_H2_H
#define M0_H2_H

#include "conn.h"

/*
 * HTTP/2 (struct m0_proto_ops, conn.h). The host sets it as its `h2`: conn.c hands it a plain
 * connection whose first bytes are the preface (prior knowledge), through `start` with those
 * bytes. A transport whose ALPN chose "h2" starts it the same way with no bytes:
 * `c->proto = &m0__proto_h2; c->proto->start(c, NULL, 0)`, once its handshake is done, on the
 * connection's loop thread.
 */
extern const struct m0_proto_ops m0__proto_h2;

/* What carries a WebSocket on one of its streams (RFC 8441, D231): the stand-in connection its
 * `tunnel` returns, whose transport reads the stream's DATA and writes DATA to it. */
extern const struct m0_carrier_ops m0__h2_carrier;

#endif /* M0_H2_H */
