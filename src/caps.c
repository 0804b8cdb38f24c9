/* SPDX-License-Identifier: MIT */
/* caps.c: once the sockets are held, give up every capability and forbid gaining any (K1). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include <sys/capability.h>

#include "internal.h"

int m0__caps_drop(char *err, size_t err_len)
{
        /* The bounding set first: dropping from it needs CAP_SETPCAP, which goes next. */
        if (CAP_IS_SUPPORTED(CAP_SETPCAP)) {
                for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++) {
                        if (cap_get_bound(c) == 1 && cap_drop_bound(c) < 0 && errno != EPERM) {
                                snprintf(err, err_len,
                                         "cannot drop capability %d from the bounding "
                                         "set: %s",
                                         (int)c, strerror(errno));
                                return -errno;
                        }
                }
        }
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
