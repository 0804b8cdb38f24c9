/* SPDX-License-Identifier: MIT */
/* one_handler: an app one handler state serves (max_threads = 1), for the host's R3 refusals. */
#include <m0.h>

static int health(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)state;
        return m0_res_text(res, 200, "ok\n");
}

static const m0_route routes[] = {
        {"GET", "/health", health, 0},
        {NULL, NULL, NULL, 0},
};

static const m0_app app = {
        .name = "one_handler",
        .max_threads = 1,
        .routes = routes,
};

int main(int argc, char **argv)
{
        return m0_main(&app, argc, argv);
}
