/* SPDX-License-Identifier: MIT */
/* notify.c: the messages m0 sends to systemd over $NOTIFY_SOCKET (READY, STATUS, STOPPING, …). */
#include <systemd/sd-daemon.h>

#include "notify.h"

int m0__notify(const char *state)
{
        /* sd_notify answers 0 when NOTIFY_SOCKET is unset; >0 when sent. */
        int r = sd_notify(0, state);
        return r < 0 ? r : 0;
}
