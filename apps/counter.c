/* SPDX-License-Identifier: MIT */
/* counter: one counter per name, shared by every loop, changed by POSTs and published on the
 * counter's own channel (SPEC A5 revised, N1). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <m0.h>

#include "common.h"

/*
 * POST /increment?counter=NAME, POST /decrement?counter=NAME: 204 with x-event-id (none on a
 * bus shared through PostgreSQL, where the database gives the id after the answer), and
 * `event: value`, `data: {"counter":"NAME","value":V}` on channel counter:NAME. NAME is 1-64 of
 * [a-z0-9_-], `default` when absent; anything else is 400. GET /events?counter=NAME follows that
 * channel, GET /events every counter's (counter:*), GET /ws the same as WebSocket messages; GET / the
 * values as one JSON object, by name.
 * At most M0_COUNTER_MAX (1000) counters: a POST that would make one more is 507.
 */

#define NAME_MAX_LEN 64

struct counter {
        char name[NAME_MAX_LEN + 1]; /* "" while the slot is free */
        atomic_long value;
        /* Held from the change to its publish, so that one counter's ids and values rise
         * together. */
        pthread_mutex_t lock;
};

/* Shared by every handler on purpose: one process. Slots are taken, never given back, so a
 * pointer to one stays good; `table_lock` guards taking them. */
static struct counter *table;
static size_t table_cap, table_count, counter_max = 1000;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static bool name_ok(const char *s)
{
        size_t n = strlen(s);
        if (n < 1 || n > NAME_MAX_LEN)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
                      s[i] == '-'))
                        return false;
        return true;
}

/* The name a request gives, `default` when none; NULL when it gives one that is no name. */
static const char *name_of(m0_req *req)
{
        const char *q = m0_req_query(req, "counter");
        if (!q)
                return "default";
        return name_ok(q) ? q : NULL;
}

static int bad_name(m0_res *res)
{
        return m0_res_text(res, 400, "counter: a name is 1 to 64 of a-z, 0-9, _ and -\n");
}

/* The counter named `name`, made when `make` and there is room; NULL otherwise. */
static struct counter *find(const char *name, bool make)
{
        size_t h = 2166136261u;
        for (const char *p = name; *p; p++)
                h = (h ^ (unsigned char)*p) * 16777619u;
        pthread_mutex_lock(&table_lock);
        struct counter *c = NULL;
        for (size_t i = h & (table_cap - 1);; i = (i + 1) & (table_cap - 1)) {
                if (!strcmp(table[i].name, name)) {
                        c = &table[i];
                        break;
                }
                if (!table[i].name[0]) {
                        if (make && table_count < counter_max) {
                                c = &table[i];
                                snprintf(c->name, sizeof(c->name), "%s", name);
                                table_count++;
                        }
                        break;
                }
        }
        pthread_mutex_unlock(&table_lock);
        return c;
}

static int change(m0_req *req, m0_res *res, long by)
{
        int r = app_where(req, res);
        const char *name = name_of(req);
        if (r < 0 || !name)
                return r < 0 ? r : bad_name(res);
        struct counter *c = find(name, true);
        if (!c) {
                char text[200];
                snprintf(text, sizeof(text),
                         "counter: %zu counters exist (M0_COUNTER_MAX); '%s' would be one more\n",
                         counter_max, name);
                return m0_res_text(res, 507, text);
        }
        char channel[NAME_MAX_LEN + 16], data[NAME_MAX_LEN + 64];
        snprintf(channel, sizeof(channel), "counter:%s", name);
        pthread_mutex_lock(&c->lock);
        long v = atomic_fetch_add(&c->value, by) + by;
        snprintf(data, sizeof(data), "{\"counter\":\"%s\",\"value\":%ld}", name, v);
        int64_t id = m0_publish(channel, "value", data, 0);
        if (id < 0)
                atomic_fetch_sub(&c->value, by); /* nobody was told: it did not happen */
        pthread_mutex_unlock(&c->lock);
        if (id < 0)
                return (int)id;
        r = id > 0 ? m0_res_headerf(res, "x-event-id", "%lld", (long long)id) : 0;
        return r < 0 ? r : m0_res_status(res, 204);
}

static int increment(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        return change(req, res, 1);
}

static int decrement(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        return change(req, res, -1);
}

static int events(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        int r = app_where(req, res);
        if (r < 0)
                return r;
        const char *q = m0_req_query(req, "counter");
        if (!q)
                return m0_res_subscribe(res, "counter:*");
        if (!name_ok(q))
                return bad_name(res);
        char channel[NAME_MAX_LEN + 16];
        snprintf(channel, sizeof(channel), "counter:%s", q);
        return m0_res_subscribe(res, channel);
}

static int by_name(const void *a, const void *b)
{
        return strcmp((*(struct counter *const *)a)->name, (*(struct counter *const *)b)->name);
}

/* GET /: {"a":1,"default":-2}, by name. */
static int index_page(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        int r = app_where(req, res);
        struct counter **v = calloc(counter_max ? counter_max : 1, sizeof(*v));
        if (r < 0 || !v) {
                free(v);
                return r < 0 ? r : -ENOMEM;
        }
        size_t n = 0;
        pthread_mutex_lock(&table_lock);
        for (size_t i = 0; i < table_cap; i++)
                if (table[i].name[0])
                        v[n++] = &table[i];
        pthread_mutex_unlock(&table_lock);
        qsort(v, n, sizeof(*v), by_name);
        r = m0_res_header(res, "Content-Type", "application/json");
        for (size_t i = 0; r == 0 && i < n; i++)
                r = m0_res_printf(res, "%s\"%s\":%ld", i ? "," : "{", v[i]->name,
                                  atomic_load(&v[i]->value));
        if (r == 0)
                r = m0_res_printf(res, "%s}\n", n ? "" : "{");
        free(v);
        return r;
}

/* GET /ws?counter=NAME (every counter's without it): the same events as a WebSocket's text
 * messages, {"id": N, "channel": "counter:NAME", "event": "value", "data": "…"}, resumed after
 * the query's last_event_id (SPEC WS2). */
static int websocket(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        int r = app_where(req, res);
        if (r < 0)
                return r;
        const char *q = m0_req_query(req, "counter");
        if (q && !name_ok(q))
                return bad_name(res);
        char channel[NAME_MAX_LEN + 16];
        snprintf(channel, sizeof(channel), "counter:%s", q ? q : "*");
        r = m0_res_subscribe(res, channel);
        return r < 0 ? r : m0_res_websocket(res, NULL, NULL);
}

static int check(char *finding, size_t flen, char *fix, size_t xlen)
{
        long max = app_env_long("M0_COUNTER_MAX", 1000, LONG_MIN);
        if (max >= 1 && max <= 1000000)
                return 0;
        snprintf(finding, flen, "M0_COUNTER_MAX='%s' is not a whole number from 1 to 1000000",
                 getenv("M0_COUNTER_MAX"));
        snprintf(fix, xlen, "set M0_COUNTER_MAX from 1 to 1000000 (default 1000)");
        return -EINVAL;
}

static const m0_route routes[] = {
        {"GET", "/", index_page, 0},          {"POST", "/increment", increment, 0},
        {"POST", "/decrement", decrement, 0}, {"GET", "/events", events, 0},
        {"GET", "/ws", websocket, 0},         {NULL, NULL, NULL, 0},
};

static const m0_app app = {
        .name = "counter",
        .routes = routes,
        .check = check,
};

int main(int argc, char **argv)
{
        long max = app_env_long("M0_COUNTER_MAX", 1000, LONG_MIN);
        if (max >= 1 && max <= 1000000) {
                counter_max = (size_t)max;
                /* Open addressing at most half full: a probe ends within a few slots. */
                for (table_cap = 16; table_cap < 2 * counter_max;)
                        table_cap *= 2;
                table = calloc(table_cap, sizeof(*table));
                if (!table)
                        return 1;
                for (size_t i = 0; i < table_cap; i++)
                        pthread_mutex_init(&table[i].lock, NULL);
        }
        /* A bad M0_COUNTER_MAX is the check's to refuse (78), before any handler exists. */
        return m0_main(&app, argc, argv);
}
