/* SPDX-License-Identifier: MIT */
/* host.h: host.c, the serve sequence (L1). The host's struct is core's alone (SPEC LY4, D240):
 * outside src/core/ it is this incomplete type, and no folder below core reads the host. Each
 * subsystem is handed what it reads when it is set up: the loops a struct m0_serve (hctx.h),
 * a thread's lifecycle a struct m0_lifecycle (lifecycle.h), the metrics thread and the
 * database bus theirs (metrics.h, attach.h), the others their arguments. The layout and the
 * function that hands those out are in host-private.h, which only src/core/ includes. */
#ifndef M0_HOST_H
#define M0_HOST_H

struct m0_host;

#endif /* M0_HOST_H */
