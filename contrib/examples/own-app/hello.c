/* SPDX-License-Identifier: MIT */
/* hello.c: the smallest m0 application, run under systemd as your own binary (doc/systemd.md).
 * Build: cc -Wall -o hello hello.c $(pkg-config --cflags --libs m0) */
#include <m0.h>

static int hello(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)state;
        return m0_res_text(res, 200, "hello\n");
}

static const m0_route routes[] = {
        {"GET", "/", hello, 0},
        {0},
};

int main(int argc, char **argv)
{
        static const m0_app app = {.name = "hello", .routes = routes};

        return m0_main(&app, argc, argv);
}
