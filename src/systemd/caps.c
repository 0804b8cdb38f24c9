/* SPDX-License-Identifier: MIT */
/* caps.c: once the sockets are held, give up every capability and forbid gaining any (K1). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include <sys/capability.h>

#include "caps.h"

/* Empty the bounding set: it needs CAP_SETPCAP, so it goes before the other sets. */
static int drop_bound(char *err, size_t err_len)
{
        for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++) {
                if (cap_get_bound(c) == 1 && cap_drop_bound(c) < 0 && errno != EPERM) {
                        snprintf(err, err_len,
                                 "cannot drop capability %d from the bounding set: %s", (int)c,
                                 strerror(errno));
                        return -errno;
                }
        }
        return 0;
}

int m0__caps_drop(char *err, size_t err_len)
{
        int b = drop_bound(err, err_len);
        if (b < 0)
                return b;
        (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        cap_t none = cap_init(); /* every set empty */
        if (!none) {
                snprintf(err, err_len, "cannot allocate a capability set: %s", strerror(errno));
                return -ENOMEM;
        }
        int r = cap_set_proc(none) < 0 ? -errno : 0;
        cap_free(none);
        if (r < 0) {
                snprintf(err, err_len, "cannot drop capabilities: %s", strerror(-r));
                return r;
        }
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
                snprintf(err, err_len, "cannot set no-new-privs: %s", strerror(errno));
                return -errno;
        }
        return 0;
}

int m0__caps_keep_bind(void)
{
        /* The bounding set goes first: emptying it needs CAP_SETPCAP, which goes next. */
        char err[160];
        int b = drop_bound(err, sizeof(err));
        if (b < 0)
                return b;
        /* K1: before binding a port below 1024 the process needs CAP_NET_BIND_SERVICE, and
         * nothing else; keep it only if it is held. */
        cap_t now = cap_get_proc();
        if (!now)
                return -errno;
        cap_flag_value_t held = CAP_CLEAR;
        (void)cap_get_flag(now, CAP_NET_BIND_SERVICE, CAP_PERMITTED, &held);
        cap_free(now);
        cap_t keep = cap_init();
        if (!keep)
                return -ENOMEM;
        cap_value_t v[] = {CAP_NET_BIND_SERVICE};
        if (held == CAP_SET) {
                (void)cap_set_flag(keep, CAP_PERMITTED, 1, v, CAP_SET);
                (void)cap_set_flag(keep, CAP_EFFECTIVE, 1, v, CAP_SET);
        }
        int r = cap_set_proc(keep) < 0 ? -errno : 0;
        cap_free(keep);
        return r;
}

void m0__caps_describe(char *out, size_t len)
{
        cap_t now = cap_get_proc();
        if (!now) {
                snprintf(out, len, "unknown");
                return;
        }
        char *text = cap_to_text(now, NULL);
        snprintf(out, len, "%s", text && *text ? text : "=");
        cap_free(text);
        cap_free(now);
}
