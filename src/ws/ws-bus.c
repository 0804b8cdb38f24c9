/* SPDX-License-Identifier: MIT */
/* ws-bus.c: the bus's events as a WebSocket's text messages (not yet). */
#include <errno.h>

#include "ws.h"

int m0__ws_follow(struct m0_ws *ws, const m0_req *req, const m0_res *res)
{
        (void)ws;
        (void)req;
        (void)res;
        return -ENOTSUP;
}

bool m0__ws_event(struct m0_ws *ws, const struct m0_frame *f)
{
        (void)ws;
        (void)f;
        return false;
}

void m0__ws_unfollow(struct m0_ws *ws)
{
        (void)ws;
}
