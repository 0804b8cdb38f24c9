/* SPDX-License-Identifier: MIT */
/* notify.h: notify.c, the messages m0 sends to systemd over $NOTIFY_SOCKET. */
#ifndef M0_NOTIFY_H
#define M0_NOTIFY_H

/* Send `state` to $NOTIFY_SOCKET when set; 0, or -errno. A no-op returning 0 without it. */
int m0__notify(const char *state);

#endif /* M0_NOTIFY_H */
