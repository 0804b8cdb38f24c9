/* SPDX-License-Identifier: MIT */
/* ws-bus.c: the bus's events as a WebSocket's text messages (WS2): the channels its handler
 * followed, the replay after its `last_event_id` (N2, AP2), each event one JSON object
 * {"id", "channel", "event", "data"}. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bus.h"
#include "conn.h"
#include "hctx.h"
#include "attach.h"
#include "log.h"
#include "replay.h"
#include "sse.h"
#include "ws.h"

static int send_json(struct m0_ws *ws, json_t *j)
{
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        int r = text ? m0__ws_queue(ws, WSLAY_TEXT_FRAME, text, strlen(text)) : -ENOMEM;
        free(text);
        json_decref(j);
        return r;
}

/* Where a follow's gaps go: the WebSocket's m0-gap messages, and a record of each for the app's
 * backfill when it has one. */
struct ws_gaps {
        struct m0_ws *ws;
        struct m0_buf *gaps; /* NULL: the app does not backfill */
        int r;
};

/* AP2: a channel gave up events past the client's last id; it is told before the kept ones, in
 * a message with no id, as a stream's m0-gap event. Under the bus lock: only queued. */
static void gap(void *ud, const char *name, size_t len, uint64_t oldest)
{
        struct ws_gaps *g = ud;
        struct m0_ws *ws = g->ws;
        if (g->gaps && g->r == 0)
                g->r = m0__sse_gap_record(g->gaps, name, len, oldest);
        json_t *d = json_pack("{s:s%,s:I}", "channel", name, len, "oldest", (json_int_t)oldest);
        char *data = d ? json_dumps(d, JSON_COMPACT) : NULL;
        json_decref(d);
        if (data)
                (void)send_json(ws, json_pack("{s:n,s:s%,s:s,s:s}", "id", "channel", name, len,
                                              "event", M0_EVENT_GAP, "data", data));
        free(data);
}

/*
 * AP2's backfill came back (D234): the app's events, then the kept replay, then what came live
 * meanwhile, each once, as messages; a backfill that failed closes the WebSocket 1011, for its
 * client to reconnect, as a stream is closed.
 */
static void backfilled(struct m0_loop *el, struct m0_msg *m)
{
        (void)el;
        struct m0_treplay *t = m->arg;
        struct m0_conn *c = t->c;
        struct m0_ws *ws = c ? c->up : NULL;
        if (c)
                c->treplay = NULL;
        if (!ws || ws->ended) {
                m0__treplay_free(t);
                return;
        }
        if (t->err) {
                m0__log(M0_LOG_WARNING, ws->loop->index, NULL,
                        "a WebSocket's backfill by the app after id %llu failed (%s%s%s): it is "
                        "closed 1011, for its client to reconnect",
                        (unsigned long long)t->after, strerror(-t->err), t->why[0] ? ": " : "",
                        t->why);
                m0__treplay_free(t);
                m0__ws_close_now(ws, 1011, "backfill failed");
                return;
        }
        bool io = ws->in_io;
        ws->in_io = true; /* queued all, then sent */
        c->cursor = t->after;
        for (size_t i = 0; i < t->pre_frames.n; i++)
                (void)m0__ws_event(ws, t->pre_frames.v[i]);
        for (size_t i = 0; i < t->rows.n; i++)
                (void)m0__ws_event(ws, t->rows.v[i]);
        if (c->cursor < t->upto)
                c->cursor = t->upto;
        for (size_t i = 0; i < t->held.n; i++)
                (void)m0__ws_event(ws, t->held.v[i]);
        ws->in_io = io;
        m0__treplay_free(t);
        m0__ws_flush(ws);
}

int m0__ws_follow(struct m0_ws *ws, m0_req *req, const m0_res *res)
{
        struct m0_hctx *l = ws->loop;
        uint64_t after = 0;
        /* the query's: a browser's WebSocket cannot set a header */
        bool replay = m0__sse_event_id(m0_req_query(req, "last_event_id"), &after);
        struct m0_fvec got = {0};
        struct m0_buf records = {0};
        struct ws_gaps g = {.ws = ws, .gaps = l->app && l->app->backfill ? &records : NULL};
        ws->bus = true;
        ws->in_io = true; /* the 101 is not out yet: what the replay queues waits for it */
        int r = m0__sse_follow(ws->c, res, replay, after, &got,
                               &(struct m0_gap_sink){.fn = gap, .ud = &g});
        if (r == 0)
                r = g.r;
        if (r == 0 && records.len) {
                /* AP2: the app's events first, then the kept ones, when its backfill is back */
                r = m0__sse_backfill_start(ws->c, after, &records, &got, backfilled);
                m0__buf_free(&records);
                m0__fvec_free(&got);
                ws->in_io = false;
                return r;
        }
        m0__buf_free(&records);
        if (r < 0)
                ws->bus = false;
        /* the kept frames past `after`, in id order; the live ones then go on from the newest
         * id the bus had when it followed, none twice (N2) */
        uint64_t last = ws->c->cursor;
        if (r == 0 && replay && after < last)
                ws->c->cursor = after;
        for (size_t i = 0; r == 0 && i < got.n; i++)
                (void)m0__ws_event(ws, got.v[i]);
        if (ws->c->cursor < last)
                ws->c->cursor = last;
        m0__fvec_free(&got);
        ws->in_io = false;
        return r;
}

/*
 * One of the bus's frames, an event as streams get it ("id: N\nevent: T\ndata: …\n\n"), as its
 * JSON object's text: the data's lines joined again with LF, the event `message` when it has no
 * name (as EventSource reads it), the id null for a transient event. NULL: no memory.
 */
static char *frame_text(const struct m0_frame *f)
{
        const char *p = f->bytes + f->start, *end = f->bytes + f->end;
        const char *event = "message";
        size_t en = 7;
        char *data = malloc((size_t)(end - p) + 1);
        size_t dn = 0;
        if (!data)
                return NULL;
        while (p < end) {
                const char *e = memchr(p, '\n', (size_t)(end - p));
                if (!e)
                        break;
                if (e - p >= 7 && !memcmp(p, "event: ", 7)) {
                        event = p + 7;
                        en = (size_t)(e - p - 7);
                } else if (e - p >= 6 && !memcmp(p, "data: ", 6)) {
                        if (dn)
                                data[dn++] = '\n';
                        memcpy(data + dn, p + 6, (size_t)(e - p - 6));
                        dn += (size_t)(e - p - 6);
                }
                p = e + 1;
        }
        json_t *j = f->transient
                            ? json_pack("{s:n,s:s%,s:s%,s:s%}", "id", "channel", f->chan,
                                        (size_t)f->chan_len, "event", event, en, "data", data, dn)
                            : json_pack("{s:I,s:s%,s:s%,s:s%}", "id", (json_int_t)f->id, "channel",
                                        f->chan, (size_t)f->chan_len, "event", event, en, "data",
                                        data, dn);
        free(data);
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        return text;
}

/* The frame's message, queued on `ws`. Its text is the loop's last one when that was packed for
 * the same frame: a fan-out packs it for its first follower and copies it for the others (D216).
 * wslay copies what it queues, so the text may be replaced by the next frame's at once. */
int m0__ws_event(struct m0_ws *ws, const struct m0_frame *f)
{
        struct m0_conn *c = ws->c;
        /* a transient frame of seq 0 is none of the bus's: an app's backfilled event (D234) */
        bool backfilled = f->transient && !f->seq;
        if (f->transient ? !backfilled && f->seq < c->seq : c->cursor >= f->id)
                return 0; /* before it followed, or sent already (N2) */
        if (!f->transient)
                c->cursor = f->id;
        if (backfilled) { /* this WebSocket's alone, and its frame's address is no key (D216) */
                char *text = frame_text(f);
                int r = text ? m0__ws_queue(ws, WSLAY_TEXT_FRAME, text, strlen(text)) : -ENOMEM;
                free(text);
                return r == 0;
        }
        struct m0_ws_text *t = &ws->loop->ws_text;
        if (t->frame != f || t->id != f->id || t->seq != f->seq || !t->text) {
                char *text = frame_text(f);
                if (!text)
                        return 0;
                free(t->text);
                t->frame = f;
                t->id = f->id;
                t->seq = f->seq;
                t->text = text;
                t->len = strlen(text);
        }
        return m0__ws_queue(ws, WSLAY_TEXT_FRAME, t->text, t->len) == 0;
}

void m0__ws_unfollow(struct m0_ws *ws)
{
        if (ws->c)
                m0__sse_unfollow(ws->c);
        ws->bus = false;
}
