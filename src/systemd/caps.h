/* SPDX-License-Identifier: MIT */
/* caps.h: caps.c, capabilities dropped once the sockets are held (K1). */
#ifndef M0_CAPS_H
#define M0_CAPS_H

#include <stddef.h>

/* Drop every capability (bounding, ambient, effective, permitted, inheritable) and set
 * no-new-privs. 0 or -errno with `err` filled. */
int m0__caps_drop(char *err, size_t err_len);
/* Before binding: keep CAP_NET_BIND_SERVICE (when held) and nothing else (K1). */
int m0__caps_keep_bind(void);
/* The capabilities held now, as text ("=" when none). */
void m0__caps_describe(char *out, size_t len);

#endif /* M0_CAPS_H */
