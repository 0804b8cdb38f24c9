/* SPDX-License-Identifier: MIT */
/* test-pool.c: the handler pool: a job's copy, queue order, stop, the answer sent back (P1, P2). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "lifecycle.h"
#include "host-private.h"
#include "hctx.h"
#include "pool.h"
#include "unit.h"

/* Every wait below is on the pool's own signals; the bound only keeps a failure from hanging. */
#define WAIT_MS 10000

static struct m0_host *host;
static struct m0_hctx *loop;
static m0_app app;

/* The pool never touches a job's connection (the loop does, once the job is back): a marker
 * names it, and the test takes every job back off the mailbox before the loop is destroyed. */
static struct m0_conn conn_marker;

/* What the app's callbacks saw, written on pool threads and read by the test under `rec_lock`
 * (the mailbox's lock and the joins order them too). */
struct tstate {
        int loop, thread;
};

static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static m0_handler_info made[4];
static int nmade;
static int fail_make_thread = -1; /* the pool thread whose make fails with -EIO */
static int freed[4];              /* thread index of each state freed, in order */
static int nfreed;
static char ran[16][32];      /* the paths the handlers ran, in order */
static int ran_thread[16];    /* req->thread of each */
static int ran_state[16];     /* the thread the handler's state was made for */
static char ran_name[16][16]; /* the name of the thread that ran it */
static int nran;
static int stream_rc[16]; /* m0_res_stream()'s answer, in the stream handlers */

static struct timespec deadline(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += WAIT_MS / 1000;
        return ts;
}

static int make(const m0_handler_info *info, void **ret_state, char *ret_err, size_t err_len)
{
        (void)ret_err;
        (void)err_len;
        pthread_mutex_lock(&rec_lock);
        made[nmade++] = *info;
        pthread_mutex_unlock(&rec_lock);
        if (info->thread == fail_make_thread)
                return -EIO; /* and no reason: the pool names the errno */
        struct tstate *s = malloc(sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->loop = info->loop;
        s->thread = info->thread;
        *ret_state = s;
        return 0;
}

static void free_state(void *state)
{
        struct tstate *s = state;
        pthread_mutex_lock(&rec_lock);
        freed[nfreed++] = s->thread;
        pthread_mutex_unlock(&rec_lock);
        free(s);
}

static int record(const m0_req *req, void *state)
{
        struct tstate *s = state;
        pthread_mutex_lock(&rec_lock);
        int i = nran++;
        snprintf(ran[i], sizeof(ran[i]), "%s", req->path);
        ran_thread[i] = req->thread;
        ran_state[i] = s->thread;
        pthread_getname_np(pthread_self(), ran_name[i], sizeof(ran_name[i]));
        pthread_mutex_unlock(&rec_lock);
        return i;
}

static int echo(m0_req *req, m0_res *res, void *state)
{
        (void)record(req, state);
        (void)m0_res_header(res, "X-Ran", "pool");
        return m0_res_printf(res, "%s %s on %d.%d", req->method, req->path, req->loop, req->thread);
}

static int failing(m0_req *req, m0_res *res, void *state)
{
        (void)record(req, state);
        (void)m0_res_text(res, 201, "half an answer");
        return -EIO;
}

/* Starts a stream after writing a header and a body, then returns what m0_res_stream said. */
static int stream_and_fail(m0_req *req, m0_res *res, void *state)
{
        int i = record(req, state);
        (void)m0_res_header(res, "X-Lost", "1");
        (void)m0_res_printf(res, "partial");
        int r = m0_res_stream(res);
        pthread_mutex_lock(&rec_lock);
        stream_rc[i] = r;
        pthread_mutex_unlock(&rec_lock);
        return r;
}

/* The same, ignoring the refusal. */
static int stream_and_ignore(m0_req *req, m0_res *res, void *state)
{
        (void)stream_and_fail(req, res, state);
        return 0;
}

/*
 * A host and one loop, as m0_main() makes them, set up enough for m0__pool_main:
 * - cfg.blocking_threads: m0__loop_init sizes the loop's pool from it;
 * - cfg.max_header_fields: m0__loop_init allocates the loop's request headers from it;
 * - app: the pool thread calls its make and free, and m0__app_run runs the job's handler;
 * - nloops: handed to make as info.loops;
 * - barrier: the make-barrier the pool thread waits at (L1);
 * - watchdog_usec stays 0, so m0__thread_request_set touches no loop;
 * - cfg.compress_min_bytes: its default, 1024, which the answers here stay below (SF4: a pool
 *   thread compresses its job's answer).
 * m0__loop_init gives the loop the mailbox (mb_lock, mb_fd) jobs come back through.
 */
static void setup_pool(int nthreads)
{
        nmade = nfreed = nran = 0;
        fail_make_thread = -1;
        memset(&app, 0, sizeof(app));
        app.name = "t";
        app.make = make;
        app.free = free_state;
        host = calloc(1, sizeof(*host));
        loop = calloc(1, sizeof(*loop));
        ck_assert_ptr_nonnull(host);
        ck_assert_ptr_nonnull(loop);
        host->cfg.blocking_threads = (uint32_t)nthreads;
        host->cfg.max_header_fields = 16;
        host->cfg.compress_min_bytes = 1024;
        host->app = &app;
        host->serve.nloops = 1;
        m0__barrier_init(&host->barrier);
        m0__host_link(host);
        ck_assert_int_eq(m0__hctx_init(loop, &host->serve, 0), 0);
        ck_assert_int_eq(loop->pool.nthreads, nthreads);
}

static void teardown_pool(void)
{
        ck_assert(m0__list_empty(&loop->loop.mb)); /* every job was taken back */
        m0__hctx_destroy(loop);
        m0__barrier_destroy(&host->barrier);
        free(loop);
        free(host);
}

/* As the coordinator does: start every pool thread, wait until each has reported its make,
 * then open (or close) the gate. */
static void start_pool(bool go)
{
        struct m0_pool *p = &loop->pool;
        for (int i = 0; i < p->nthreads; i++)
                ck_assert_int_eq(m0__thread_start(&p->threads[i].thread), 0);
        struct m0_barrier *b = &host->barrier;
        struct timespec dl = deadline();
        pthread_mutex_lock(&b->lock);
        while (b->reported < p->nthreads)
                if (pthread_cond_timedwait(&b->cond, &b->lock, &dl) == ETIMEDOUT)
                        break;
        int reported = b->reported;
        pthread_mutex_unlock(&b->lock);
        m0__barrier_open(b, go);
        ck_assert_int_eq(reported, p->nthreads);
}

static void join_pool(void)
{
        struct m0_pool *p = &loop->pool;
        struct timespec dl = deadline();
        for (int i = 0; i < p->nthreads; i++) {
                ck_assert_msg(m0__thread_join_by(&p->threads[i].thread, &dl) == 0,
                              "pool thread %d did not end", i);
        }
}

/* A job for `path`, made as the loop makes one: the request copied, the handler and loop set. */
static struct m0_job *job_for(const char *method, const char *path, m0_handler_fn fn)
{
        m0_req r = {.method = method, .path = path, .query = ""};
        struct m0_job *j = m0__job_new(&conn_marker, &r);
        ck_assert_ptr_nonnull(j);
        j->fn = fn;
        j->loop = loop;
        return j;
}

/* Queue `n` jobs for `<prefix><first>` … as the loop queues them. */
static void submit(const char *method, const char *prefix, int first, int n, m0_handler_fn fn)
{
        for (int i = first; i < first + n; i++) {
                char path[16];
                snprintf(path, sizeof(path), "%s%d", prefix, i);
                m0__pool_submit(&loop->pool, job_for(method, path, fn));
        }
}

/*
 * Take `n` messages off the loop's mailbox as the loop does: the eventfd says the list became
 * non-empty, the list is taken whole under its lock. Returns how many came within the bound.
 */
static size_t take_mailbox(struct m0_msg **out, size_t n)
{
        size_t got = 0;
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (got < n) {
                struct timespec now;
                clock_gettime(CLOCK_MONOTONIC, &now);
                long left = WAIT_MS - ((now.tv_sec - t0.tv_sec) * 1000 +
                                       (now.tv_nsec - t0.tv_nsec) / 1000000);
                struct pollfd pf = {.fd = loop->loop.mb_fd, .events = POLLIN};
                if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
                        break;
                uint64_t v;
                ck_assert_int_eq(read(loop->loop.mb_fd, &v, sizeof(v)), sizeof(v));
                struct m0_list taken = {0};
                pthread_mutex_lock(&loop->loop.mb_lock);
                m0__list_append(&taken, &loop->loop.mb);
                pthread_mutex_unlock(&loop->loop.mb_lock);
                struct m0_link *link;
                while ((link = m0__list_pop(&taken))) {
                        ck_assert_msg(got < n, "more messages than the %zu expected", n);
                        out[got++] = M0__CONTAINER_OF(link, struct m0_msg, link);
                }
        }
        return got;
}

static void free_msgs(struct m0_msg **m, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                m0__job_free((struct m0_job *)m[i]->arg);
                free(m[i]);
        }
}

/* ---- init and destroy ---- */

START_TEST(init_without_threads)
{
        struct m0_hctx l;
        struct m0_pool p;
        memset(&p, 0xa5, sizeof(p));
        ck_assert_int_eq(m0__pool_init(&p, &l, 0, NULL, NULL), 0);
        ck_assert_int_eq(p.nthreads, 0);
        ck_assert_ptr_null(p.threads);
        ck_assert(m0__list_empty(&p.queue));
        ck_assert(!p.stop);
        m0__pool_destroy(&p);
        ck_assert_ptr_null(p.threads);
}
END_TEST

START_TEST(init_with_threads)
{
        struct m0_hctx l = {.index = 4};
        struct m0_pool p;
        memset(&p, 0xa5, sizeof(p));
        ck_assert_int_eq(m0__pool_init(&p, &l, 3, NULL, NULL), 0);
        ck_assert_int_eq(p.nthreads, 3);
        ck_assert_ptr_nonnull(p.threads);
        for (int i = 0; i < 3; i++) {
                ck_assert_ptr_eq(p.threads[i].loop, &l);
                ck_assert_int_eq(p.threads[i].index, i);
                ck_assert(!p.threads[i].thread.started);
                ck_assert_ptr_null(p.threads[i].thread.state);
                ck_assert_int_eq(p.threads[i].thread.kind, M0_THREAD_POOL);
                ck_assert_int_eq(p.threads[i].thread.loop, 4);
                ck_assert_int_eq(p.threads[i].thread.index, i);
        }
        char who[48];
        snprintf(who, sizeof(who), "loop 4 pool thread 2");
        ck_assert_str_eq(p.threads[2].thread.who, who);
        ck_assert_str_eq(p.threads[2].thread.name, "m0-pool-4.2");
        ck_assert(m0__list_empty(&p.queue));
        ck_assert(!p.stop);
        m0__pool_destroy(&p);
        ck_assert_ptr_null(p.threads);
}
END_TEST

/* A pool whose threads never started still owns its queue: destroy frees every job in it (the
 * sanitizer build sees a leak otherwise). */
START_TEST(destroy_frees_queued_jobs_of_a_pool_never_started)
{
        struct m0_hctx l;
        struct m0_pool p;
        ck_assert_int_eq(m0__pool_init(&p, &l, 2, NULL, NULL), 0);
        m0_req r = {.method = "GET", .path = "/a", .query = "q=1", .body = "xyz", .body_len = 3};
        struct m0_job *j[3];
        for (int i = 0; i < 3; i++) {
                j[i] = m0__job_new(&conn_marker, &r);
                ck_assert_ptr_nonnull(j[i]);
                /* what a handler would have left in the job */
                ck_assert_int_eq(m0_res_text(&j[i]->res, 200, "body"), 0);
                m0__pool_submit(&p, j[i]);
        }
        ck_assert_ptr_eq(M0__LIST_FIRST(&p.queue, struct m0_job, link), j[0]);
        ck_assert_ptr_eq(M0__LIST_NEXT(j[0], struct m0_job, link), j[1]);
        ck_assert_ptr_eq(M0__LIST_NEXT(j[1], struct m0_job, link), j[2]);
        ck_assert_ptr_null(M0__LIST_NEXT(j[2], struct m0_job, link));
        ck_assert_ptr_eq(p.queue.tail, &j[2]->link);
        m0__pool_destroy(&p);
        ck_assert(m0__list_empty(&p.queue));
        ck_assert_ptr_null(p.threads);
}
END_TEST

/* ---- the job's copy of the request ---- */

static char *dup_or_die(const char *s)
{
        char *d = strdup(s);
        ck_assert_ptr_nonnull(d);
        return d;
}

START_TEST(job_copies_the_request)
{
        static const char body[] = "ab\0cd\0\0e"; /* 8 bytes, three of them NUL */
        char *method = dup_or_die("POST");
        char *path = dup_or_die("/notes/7");
        char *query = dup_or_die("a=1&b=");
        const char *names[] = {"Host", "X-Empty", "Content-Type"};
        const char *values[] = {"example.org", "", "application/octet-stream"};
        struct m0_header *hd = calloc(3, sizeof(*hd));
        ck_assert_ptr_nonnull(hd);
        for (int i = 0; i < 3; i++) {
                hd[i].name = dup_or_die(names[i]);
                hd[i].value = dup_or_die(values[i]);
        }
        char *b = malloc(sizeof(body) - 1);
        ck_assert_ptr_nonnull(b);
        memcpy(b, body, sizeof(body) - 1);
        m0_req r = {.method = method,
                    .path = path,
                    .query = query,
                    .headers = hd,
                    .nheaders = 3,
                    .body = b,
                    .body_len = sizeof(body) - 1,
                    .loop = 2,
                    .thread = 5};

        struct m0_job *j = m0__job_new(&conn_marker, &r);
        ck_assert_ptr_nonnull(j);

        /* The original is the loop's, reused for the next request: overwrite it, then free it.
         * The copy must not change (and the sanitizer build sees any read of the old memory). */
        memset(method, 'X', strlen(method));
        memset(path, 'X', strlen(path));
        memset(query, 'X', strlen(query));
        memset(b, 'X', sizeof(body) - 1);
        for (int i = 0; i < 3; i++) {
                memset((char *)hd[i].name, 'X', strlen(hd[i].name));
                free((char *)hd[i].name);
                free((char *)hd[i].value);
        }
        free(hd);
        free(method);
        free(path);
        free(query);
        free(b);

        ck_assert_str_eq(j->req.method, "POST");
        ck_assert_str_eq(j->req.path, "/notes/7");
        ck_assert_str_eq(j->req.query, "a=1&b=");
        ck_assert_uint_eq(j->req.nheaders, 3);
        for (int i = 0; i < 3; i++) {
                ck_assert_str_eq(j->req.headers[i].name, names[i]);
                ck_assert_str_eq(j->req.headers[i].value, values[i]);
        }
        ck_assert_uint_eq(j->req.body_len, 8);
        ck_assert_bytes(j->req.body, j->req.body_len, body, sizeof(body) - 1);
        ck_assert_int_eq(j->req.body[8], '\0'); /* a handler may read the body as a string */
        ck_assert_int_eq(j->req.loop, 2);
        ck_assert_int_eq(j->req.thread, 0); /* the pool thread that runs it sets it */
        ck_assert_uint_eq(j->req.arena.len, 0);

        ck_assert_ptr_eq(j->conn, &conn_marker);
        ck_assert_ptr_null(j->link.next);
        ck_assert_ptr_null(j->loop);
        ck_assert(j->fn == NULL);
        ck_assert(!j->is_head && j->conn_mode == M0__CONN_KEEP);
        ck_assert_int_eq(j->res.status, 200);
        ck_assert(j->res.on_pool); /* what makes m0_res_stream refuse (P2) */
        ck_assert(!j->res.stream && !j->res.stream_refused);
        ck_assert_uint_eq(j->res.head.len, 0);
        ck_assert_uint_eq(j->res.body.len, 0);
        m0__job_free(j);
}
END_TEST

START_TEST(job_of_a_bare_request)
{
        m0_req r = {.method = "GET", .path = "/", .query = ""};
        struct m0_job *j = m0__job_new(&conn_marker, &r);
        ck_assert_ptr_nonnull(j);
        ck_assert_str_eq(j->req.method, "GET");
        ck_assert_str_eq(j->req.path, "/");
        ck_assert_str_eq(j->req.query, "");
        ck_assert_uint_eq(j->req.nheaders, 0);
        ck_assert_ptr_nonnull(j->req.body);
        ck_assert_uint_eq(j->req.body_len, 0);
        ck_assert_int_eq(j->req.body[0], '\0');
        m0__job_free(j);
}
END_TEST

START_TEST(job_free_accepts_null)
{
        m0__job_free(NULL);
        /* and a job holding a decoded query and a built answer gives all of it back */
        m0_req r = {.method = "GET", .path = "/q", .query = "a=%41"};
        struct m0_job *j = m0__job_new(&conn_marker, &r);
        ck_assert_ptr_nonnull(j);
        ck_assert_str_eq(m0_req_query(&j->req, "a"), "A");
        ck_assert_uint_gt(j->req.arena.len, 0);
        ck_assert_int_eq(m0_res_text(&j->res, 200, "x"), 0);
        m0__job_free(j);
}
END_TEST

/* ---- the pool's threads ---- */

/* Jobs queued before the thread runs come back in the order they were queued, each with the
 * handler's answer; jobs queued while it waits wake it. */
START_TEST(one_thread_takes_jobs_in_order)
{
        setup_pool(1);
        submit("GET", "/j", 0, 5, echo);
        start_pool(true);
        struct m0_msg *m[8];
        ck_assert_uint_eq(take_mailbox(m, 5), 5);
        submit("PUT", "/j", 5, 3, echo);
        ck_assert_uint_eq(take_mailbox(m + 5, 3), 3);
        m0__pool_stop(&loop->pool);
        join_pool();

        for (int i = 0; i < 8; i++) {
                char path[16], exp[64];
                snprintf(path, sizeof(path), "/j%d", i);
                ck_assert_ptr_eq(m[i]->handle, loop->pool.back);
                ck_assert_int_eq(m[i]->fd, -1);
                struct m0_job *j = (struct m0_job *)m[i]->arg;
                ck_assert_ptr_eq(j->conn, &conn_marker);
                ck_assert_str_eq(j->req.path, path);
                ck_assert_int_eq(j->req.thread, 0);
                ck_assert_int_eq(j->res.status, 200);
                ck_assert_buf_lit(j->res.head, "X-Ran: pool\r\n");
                snprintf(exp, sizeof(exp), "%s %s on 0.0", i < 5 ? "GET" : "PUT", path);
                ck_assert_bytes(j->res.body.data, j->res.body.len, exp, strlen(exp));
                ck_assert_str_eq(ran[i], path);
                ck_assert_str_eq(ran_name[i], "m0-pool-0.0");
        }
        ck_assert_int_eq(nran, 8);
        ck_assert_int_eq(nmade, 1);
        ck_assert_int_eq(made[0].kind, M0_THREAD_POOL);
        ck_assert_int_eq(made[0].loop, 0);
        ck_assert_int_eq(made[0].thread, 0);
        ck_assert_int_eq(made[0].loops, 1);
        ck_assert_int_eq(nfreed, 1);
        ck_assert_int_eq(freed[0], 0);
        ck_assert_ptr_null(loop->pool.threads[0].thread.state);
        free_msgs(m, 8);
        teardown_pool();
}
END_TEST

/* A stop that comes before any job ran still lets the whole queue run, then every thread ends;
 * each job runs once, on a thread whose own handler state it is given. */
START_TEST(stop_lets_the_queue_finish)
{
        setup_pool(2);
        submit("GET", "/s", 0, 6, echo);
        m0__pool_stop(&loop->pool);
        start_pool(true);
        join_pool();
        ck_assert(m0__list_empty(&loop->pool.queue));

        struct m0_msg *m[6];
        ck_assert_uint_eq(take_mailbox(m, 6), 6);
        bool seen[6] = {false};
        for (int i = 0; i < 6; i++) {
                struct m0_job *j = (struct m0_job *)m[i]->arg;
                int k = j->req.path[2] - '0';
                ck_assert(k >= 0 && k < 6 && !seen[k]);
                seen[k] = true;
                char exp[32];
                snprintf(exp, sizeof(exp), "GET /s%d on 0.%d", k, j->req.thread);
                ck_assert_bytes(j->res.body.data, j->res.body.len, exp, strlen(exp));
        }
        ck_assert_int_eq(nran, 6);
        for (int i = 0; i < 6; i++) {
                char name[16];
                ck_assert(ran_thread[i] == 0 || ran_thread[i] == 1);
                ck_assert_int_eq(ran_state[i], ran_thread[i]);
                snprintf(name, sizeof(name), "m0-pool-0.%d", ran_thread[i]);
                ck_assert_str_eq(ran_name[i], name);
        }
        /* one handler state per thread, made and freed on it */
        ck_assert_int_eq(nmade, 2);
        ck_assert_int_eq(made[0].thread + made[1].thread, 1);
        ck_assert_int_eq(nfreed, 2);
        ck_assert_int_eq(freed[0] + freed[1], 1);
        free_msgs(m, 6);
        teardown_pool();
}
END_TEST

/* A handler that fails is answered 500, whatever it had written. */
START_TEST(failing_handler_is_answered_500)
{
        setup_pool(1);
        m0__pool_submit(&loop->pool, job_for("GET", "/fail", failing));
        start_pool(true);
        struct m0_msg *m[1];
        ck_assert_uint_eq(take_mailbox(m, 1), 1);
        m0__pool_stop(&loop->pool);
        join_pool();
        struct m0_job *j = ((struct m0_job *)m[0]->arg);
        ck_assert_int_eq(j->res.status, 500);
        ck_assert_buf_lit(j->res.head, "Content-Type: text/plain; charset=utf-8\r\n");
        ck_assert_buf_lit(j->res.body, "500 Internal Server Error\n");
        free_msgs(m, 1);
        teardown_pool();
}
END_TEST

/* P2: m0_res_stream on a pool thread answers -EPERM, and the job comes back a 409 with the
 * handler's headers and body dropped, whether the handler passed the error on or not; the log
 * says which request and thread. */
START_TEST(stream_on_a_pool_thread_is_409)
{
        int pfd[2];
        ck_assert_int_eq(pipe2(pfd, O_CLOEXEC | O_NONBLOCK), 0);
        int saved = dup(STDERR_FILENO);
        ck_assert_int_ge(saved, 0);
        ck_assert_int_eq(dup2(pfd[1], STDERR_FILENO), STDERR_FILENO);

        setup_pool(1);
        m0__pool_submit(&loop->pool, job_for("POST", "/s1", stream_and_fail));
        m0__pool_submit(&loop->pool, job_for("GET", "/s2", stream_and_ignore));
        start_pool(true);
        struct m0_msg *m[2];
        size_t got = take_mailbox(m, 2);
        m0__pool_stop(&loop->pool);
        join_pool();
        ck_assert_int_eq(dup2(saved, STDERR_FILENO), STDERR_FILENO);
        close(saved);
        char log[1024];
        ssize_t n = read(pfd[0], log, sizeof(log));
        close(pfd[0]);
        close(pfd[1]);

        ck_assert_uint_eq(got, 2);
        for (int i = 0; i < 2; i++) {
                struct m0_job *j = (struct m0_job *)m[i]->arg;
                ck_assert_int_eq(stream_rc[i], -EPERM);
                ck_assert_int_eq(j->res.status, 409);
                ck_assert(!j->res.stream && !j->res.stream_refused);
                ck_assert_uint_eq(j->res.nheaders, 1);
                ck_assert_buf_lit(j->res.head, "Content-Type: text/plain; charset=utf-8\r\n");
                ck_assert_buf_lit(j->res.body, "409 Conflict: streams are served on the loop\n");
        }
        ck_assert_str_eq(((struct m0_job *)m[0]->arg)->req.path, "/s1");
        ck_assert_str_eq(((struct m0_job *)m[1]->arg)->req.path, "/s2");
        static const char exp[] =
                "m0[m0] loop 0: POST /s1 opened a stream on pool thread 0: answered 409 (streams "
                "are served from loop routes only)\n"
                "m0[m0] loop 0: GET /s2 opened a stream on pool thread 0: answered 409 (streams "
                "are served from loop routes only)\n";
        ck_assert_int_ge(n, 0);
        ck_assert_bytes(log, (size_t)n, exp, sizeof(exp) - 1);
        free_msgs(m, 2);
        teardown_pool();
}
END_TEST

/* L1, L3: a make that fails is named at the barrier; with the gate closed no queued job runs,
 * the threads end, the states that were made are freed, and destroy frees the queue. */
START_TEST(failed_make_closes_the_gate)
{
        setup_pool(2);
        fail_make_thread = 1;
        m0__pool_submit(&loop->pool, job_for("GET", "/never", echo));
        start_pool(false);
        join_pool();
        ck_assert(host->barrier.failed);
        ck_assert_str_eq(host->barrier.failed_who, "loop 0 pool thread 1");
        ck_assert_str_eq(host->barrier.failed_msg, strerror(EIO));
        ck_assert_int_eq(nmade, 2);
        ck_assert_int_eq(nran, 0);
        ck_assert_int_eq(nfreed, 1);
        ck_assert_int_eq(freed[0], 0);
        ck_assert(!m0__list_empty(&loop->pool.queue)); /* still queued: destroy frees it */
        struct pollfd pf = {.fd = loop->loop.mb_fd, .events = POLLIN};
        ck_assert_int_eq(poll(&pf, 1, 0), 0);
        teardown_pool();
}
END_TEST

static Suite *pool_suite(void)
{
        Suite *s = suite_create("pool");
        TCase *tc = tcase_create("init");
        tcase_add_test(tc, init_without_threads);
        tcase_add_test(tc, init_with_threads);
        tcase_add_test(tc, destroy_frees_queued_jobs_of_a_pool_never_started);
        suite_add_tcase(s, tc);
        tc = tcase_create("job");
        tcase_add_test(tc, job_copies_the_request);
        tcase_add_test(tc, job_of_a_bare_request);
        tcase_add_test(tc, job_free_accepts_null);
        suite_add_tcase(s, tc);
        tc = tcase_create("threads");
        tcase_add_test(tc, one_thread_takes_jobs_in_order);
        tcase_add_test(tc, stop_lets_the_queue_finish);
        tcase_add_test(tc, failing_handler_is_answered_500);
        tcase_add_test(tc, stream_on_a_pool_thread_is_409);
        tcase_add_test(tc, failed_make_closes_the_gate);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(pool_suite());
}
