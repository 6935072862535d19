#define _POSIX_C_SOURCE 200809L
#include "frame_picker.h"

#include <stdlib.h>
#include <string.h>

#include "decode/presentation_order.h"

enum { UNCLAIMED = 0, CLAIMED = 1, DONE = 2 };

/* A packet given to the decoder whose frame has not come out yet. */
typedef struct inflight {
    int64_t pts;
    bool picked;
    int64_t first, end; /* timed modes: the targets [first, end) it answers */
    int64_t frame_index;
} inflight;

typedef struct picker {
    vtr_video_reader *r;
    const vtr_video_info *info;
    const vtr_pick_plan *plan;
    vtr_frame_sink sink;
    void *ctx;
    AVFrame *frame;

    /* packets read but not yet sent, in decode order (a ring) */
    AVPacket **queue;
    int64_t q_head, q_len, q_cap;
    vtr_presentation_order order;
    inflight *fl; /* sorted by pts */
    int64_t fl_len, fl_cap;

    /* the region: packets since the start of the file or since a seek */
    bool from_start;
    bool region_started;
    int64_t region_first_ts;  /* index timestamp (dts, else pts) of its first packet */
    int64_t region_first_pts; /* pts of its first packet shown (not hidden, below) */
    int64_t region_first_pos; /* its byte position, -1 unknown */
    int64_t region_base;      /* decode-order number of its first packet, -1 unknown */
    bool region_eof;
    int64_t region_end;       /* latest pts + duration seen */
    bool sent_any;
    int64_t last_sent_ts, last_sent_pos;

    /* jumps: where the last one meant to land, and whether landings can be trusted */
    bool check_landing;
    int64_t landing_ts, landing_pos;
    int bad_landings;

    /* timed modes */
    uint8_t *state; /* per target: UNCLAIMED, CLAIMED (its packet sent), DONE */
    int64_t n_done;
    int64_t cursor;       /* no UNCLAIMED target before this one */
    int64_t pinned;       /* no forward jump until this target is claimed; -1 none */
    int64_t check_target; /* after a jump: the target whose frame must be in the region */

    bool retry;           /* the region cannot give a picked frame: go back further */
    bool to_start;        /* ... straight to the start of the file */
    int64_t retry_pts;
    int64_t delivered;    /* frame modes: slots filled */
} picker;

/* A packet decoded but not shown: before the start of an edit list (a clip cut out of a
 * longer one without re-encoding, `ffmpeg -ss T -i in -c copy out.mov`, keeps the frames
 * from the keyframe before T that the following ones need). The decoder makes no frame
 * of it; it has no place in the presentation order and is never picked. */
static bool hidden(const AVPacket *pkt)
{
    return pkt->flags & AV_PKT_FLAG_DISCARD;
}

static int64_t index_ts(const AVPacket *pkt)
{
    return pkt->dts != AV_NOPTS_VALUE ? pkt->dts : pkt->pts;
}

static double seconds(const picker *p, int64_t ticks)
{
    return vtr_video_reader_seconds(p->r, ticks);
}

static void clear_queue(picker *p)
{
    for (int64_t i = 0; i < p->q_len; i++)
        av_packet_free(&p->queue[(p->q_head + i) % p->q_cap]);
    p->q_head = p->q_len = 0;
}

static void region_reset(picker *p, bool from_start)
{
    clear_queue(p);
    vtr_presentation_order_reset(&p->order);
    p->fl_len = 0;
    p->from_start = from_start;
    p->region_started = false;
    p->region_first_pts = AV_NOPTS_VALUE;
    p->region_eof = false;
    p->region_end = INT64_MIN;
    p->sent_any = false;
    p->region_base = -1;
}

static vtr_status push_packet(picker *p, AVPacket *pkt, vtr_error *err)
{
    if (p->q_len == p->q_cap) {
        int64_t cap = p->q_cap ? 2 * p->q_cap : 64;
        AVPacket **q = malloc((size_t)cap * sizeof *q);
        if (!q)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for packets");
        for (int64_t i = 0; i < p->q_len; i++)
            q[i] = p->queue[(p->q_head + i) % p->q_cap];
        free(p->queue);
        p->queue = q;
        p->q_head = 0;
        p->q_cap = cap;
    }
    p->queue[(p->q_head + p->q_len) % p->q_cap] = pkt;
    p->q_len++;
    return VTR_OK;
}

static AVPacket *pop_packet(picker *p)
{
    AVPacket *pkt = p->queue[p->q_head];
    p->q_head = (p->q_head + 1) % p->q_cap;
    p->q_len--;
    return pkt;
}

/* Reads one more packet of the region (or notes its end). */
static vtr_status read_one(picker *p, vtr_error *err)
{
    const char *path = vtr_video_reader_path(p->r);
    AVPacket *pkt = av_packet_alloc();
    if (!pkt)
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
    bool eof;
    vtr_status st = vtr_video_reader_read(p->r, pkt, &eof, err);
    if (st != VTR_OK || eof) {
        av_packet_free(&pkt);
        if (st == VTR_OK) {
            p->region_eof = true;
            p->order.complete = true;
        }
        return st;
    }
    if (pkt->pts == AV_NOPTS_VALUE)
        pkt->pts = pkt->dts;
    if (pkt->pts == AV_NOPTS_VALUE) {
        av_packet_free(&pkt);
        return vtr_video_reader_untimed(p->r, err);
    }
    if (pkt->flags & AV_PKT_FLAG_CORRUPT) {
        double t = seconds(p, pkt->pts);
        av_packet_free(&pkt);
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: truncated or corrupt data at %.3f s", path,
                        t);
    }
    if (!hidden(pkt) && !vtr_presentation_order_fits(&p->order, pkt->pts) && !p->from_start) {
        /* after a jump: a demuxer that lands inside a packet and guesses the timestamps
         * after it (MPEG program streams): end the region, decode straight from the start */
        if (!p->retry) {
            p->retry = true;
            p->retry_pts = pkt->pts;
        }
        p->to_start = true;
        p->bad_landings = 2;
        p->region_eof = p->order.complete = true;
        av_packet_free(&pkt);
        return VTR_OK;
    }
    if (!hidden(pkt) && !vtr_presentation_order_fits(&p->order, pkt->pts)) {
        /* no frame is "the one shown at t" then */
        double t = seconds(p, pkt->pts);
        av_packet_free(&pkt);
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "%s: the timestamps repeat or go back (to %.3f s): a joined or damaged "
                        "file",
                        path, t);
    }
    if (!p->region_started) {
        p->region_started = true;
        p->region_first_ts = index_ts(pkt);
        p->region_first_pos = pkt->pos;
        if (p->check_landing) {
            /* a demuxer that lands before the keyframe asked for (mov with an empty edit
             * in FFmpeg 5.1) is still right, only slower: after two such landings stop
             * jumping and decode straight on */
            bool early = p->landing_pos >= 0 && pkt->pos >= 0 ? pkt->pos < p->landing_pos
                                                              : index_ts(pkt) < p->landing_ts;
            if (early)
                p->bad_landings++;
            p->check_landing = false;
        }
        p->region_base = p->from_start ? 0 : vtr_video_reader_frame_number(p->r, pkt->dts);
    }
    if (!hidden(pkt) && p->region_first_pts == AV_NOPTS_VALUE)
        p->region_first_pts = pkt->pts;
    int64_t end = pkt->pts + (pkt->duration > 0 ? pkt->duration : 0);
    if (end > p->region_end)
        p->region_end = end;
    if ((!hidden(pkt) && (st = vtr_presentation_order_add(&p->order, pkt->pts, err)) != VTR_OK) ||
        (st = push_packet(p, pkt, err)) != VTR_OK) {
        av_packet_free(&pkt);
        return st;
    }
    return VTR_OK;
}

/* Reads until every frame shown at or before t is known (or the region ends). */
static vtr_status settle(picker *p, int64_t t, vtr_error *err)
{
    while (!vtr_presentation_order_settled(&p->order, t)) {
        vtr_status st = read_one(p, err);
        if (st != VTR_OK)
            return st;
    }
    return VTR_OK;
}

/* Makes sure a packet waits at the head of the queue; false at the end of the region. */
static vtr_status have_packet(picker *p, bool *have, vtr_error *err)
{
    if (p->q_len == 0 && !p->region_eof) {
        vtr_status st = read_one(p, err);
        if (st != VTR_OK)
            return st;
    }
    *have = p->q_len > 0;
    return VTR_OK;
}

/* Presentation index of the frame with pts `pts`, or -1 when this region cannot tell. */
static int64_t frame_index(const picker *p, int64_t pts)
{
    int64_t rank = vtr_presentation_order_rank(&p->order, pts);
    if (p->from_start)
        return rank;
    /* after a seek: the index of the landing keyframe, when the container numbers every
     * frame and no frame of the region is shown before that keyframe (closed GOP) */
    if (p->region_base >= 0 && p->order.count > 0 && p->order.pts[0] == p->region_first_pts)
        return p->region_base + rank;
    return -1;
}

static vtr_status deliver_timed(picker *p, const inflight *e, vtr_error *err)
{
    for (int64_t k = e->first; k < e->end;) {
        if (p->state[k] != CLAIMED) {
            k++;
            continue;
        }
        int64_t run = k;
        while (run < e->end && p->state[run] == CLAIMED)
            p->state[run++] = DONE;
        vtr_status st = p->sink(p->ctx, p->frame, e->pts, e->frame_index, k, run - k, err);
        if (st != VTR_OK)
            return st;
        p->n_done += run - k;
        k = run;
    }
    return VTR_OK;
}

/* Matches a decoded frame with the packet it came from; gives picked frames to the sink. */
static vtr_status take_frame(picker *p, vtr_error *err)
{
    AVFrame *f = p->frame;
    int64_t pts = f->pts != AV_NOPTS_VALUE ? f->pts : f->best_effort_timestamp;
    /* frames come out in presentation order: packets before this one made no frame */
    int64_t drop = 0;
    while (drop < p->fl_len && p->fl[drop].pts < pts) {
        if (p->fl[drop].picked && !p->retry) {
            p->retry = true;
            p->retry_pts = p->fl[drop].pts;
        }
        drop++;
    }
    memmove(p->fl, p->fl + drop, (size_t)(p->fl_len - drop) * sizeof *p->fl);
    p->fl_len -= drop;
    if (p->fl_len == 0 || p->fl[0].pts != pts)
        return VTR_OK; /* a frame no packet announced: not ours to pick */
    inflight e = p->fl[0];
    memmove(p->fl, p->fl + 1, (size_t)(p->fl_len - 1) * sizeof *p->fl);
    p->fl_len--;
    if (p->retry)
        return VTR_OK;
    if ((f->flags & AV_FRAME_FLAG_CORRUPT) || f->decode_error_flags) {
        /* a damaged frame, picked or referenced by what is picked: what depends on it
         * cannot be trusted */
        p->retry = true;
        p->retry_pts = e.pts;
        return VTR_OK;
    }
    if (!e.picked)
        return VTR_OK;
    if (vtr_sampler_is_timed(&p->plan->sampler))
        return deliver_timed(p, &e, err);
    vtr_status st = p->sink(p->ctx, f, e.pts, e.frame_index, p->delivered, 1, err);
    p->delivered++;
    return st;
}

/* A decoder error after a jump may only mean missing references (an open GOP): go back
 * further; from the start of the file it is final. */
static vtr_status decoder_failed(picker *p, vtr_status st, int64_t pts)
{
    if (st != VTR_ERR_CODEC || p->from_start)
        return st;
    if (!p->retry) {
        p->retry = true;
        p->retry_pts = pts;
    }
    return VTR_OK;
}

static vtr_status receive_all(picker *p, vtr_error *err)
{
    for (;;) {
        bool got;
        vtr_status st = vtr_video_reader_receive(p->r, p->frame, &got, err);
        if (st != VTR_OK)
            return decoder_failed(p, st, p->fl_len ? p->fl[0].pts : 0);
        if (!got)
            return VTR_OK;
        if ((st = take_frame(p, err)) != VTR_OK)
            return st;
    }
}

/* Notes that a frame with this pts will come out of the decoder. */
static vtr_status expect_frame(picker *p, int64_t pts, bool picked, int64_t first, int64_t end,
                               vtr_error *err)
{
    if (p->fl_len == p->fl_cap) {
        int64_t cap = p->fl_cap ? 2 * p->fl_cap : 64;
        inflight *fl = realloc(p->fl, (size_t)cap * sizeof *fl);
        if (!fl)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        p->fl = fl;
        p->fl_cap = cap;
    }
    int64_t i = p->fl_len;
    while (i > 0 && p->fl[i - 1].pts > pts)
        i--;
    memmove(p->fl + i + 1, p->fl + i, (size_t)(p->fl_len - i) * sizeof *p->fl);
    p->fl[i] = (inflight){pts, picked, first, end, frame_index(p, pts)};
    p->fl_len++;
    return VTR_OK;
}

static vtr_status send_packet(picker *p, AVPacket *pkt, bool picked, int64_t first, int64_t end,
                              vtr_error *err)
{
    vtr_status st;
    if (!hidden(pkt) && (st = expect_frame(p, pkt->pts, picked, first, end, err)) != VTR_OK)
        return st;
    st = vtr_video_reader_send(p->r, pkt, picked || !p->plan->skip_nonref, err);
    if (st != VTR_OK)
        return decoder_failed(p, st, pkt->pts);
    p->sent_any = true;
    p->last_sent_ts = index_ts(pkt);
    p->last_sent_pos = pkt->pos;
    return receive_all(p, err);
}

/* Drains the decoder (every pending frame comes out) and resets it. */
static vtr_status drain(picker *p, vtr_error *err)
{
    vtr_status st = VTR_OK;
    if (p->sent_any) {
        st = decoder_failed(p, vtr_video_reader_send(p->r, NULL, true, err), 0);
        if (st == VTR_OK)
            st = receive_all(p, err);
    }
    for (int64_t i = 0; st == VTR_OK && i < p->fl_len; i++)
        if (p->fl[i].picked && !p->retry) {
            p->retry = true;
            p->retry_pts = p->fl[i].pts;
        }
    p->fl_len = 0;
    vtr_video_reader_flush(p->r);
    return st;
}

static vtr_status rewind_to_start(picker *p, vtr_error *err)
{
    p->to_start = false;
    vtr_status st = vtr_video_reader_rewind(p->r, err);
    region_reset(p, true);
    return st;
}

/* The region failed to give a picked frame: start one keyframe earlier, finally at the
 * start of the file, where a failure is final. */
static vtr_status go_back(picker *p, vtr_error *err)
{
    p->retry = false;
    if (p->from_start) {
        /* a file cut short is said to be so, not "corrupt" */
        vtr_status st = p->region_eof ? vtr_video_reader_check_end(p->r, p->region_end, err)
                                      : VTR_OK;
        if (st != VTR_OK)
            return st;
        return vtr_fail(err, VTR_ERR_CODEC,
                        "%s: the frame at %.3f s cannot be decoded (corrupt data?)",
                        vtr_video_reader_path(p->r), seconds(p, p->retry_pts));
    }
    for (int64_t k = 0; k < p->plan->n_targets; k++)
        if (p->state[k] == CLAIMED)
            p->state[k] = UNCLAIMED;
    p->cursor = 0;
    while (p->cursor < p->plan->n_targets && p->state[p->cursor] != UNCLAIMED)
        p->cursor++;
    p->pinned = p->cursor;
    p->check_target = -1;
    vtr_video_reader_flush(p->r);
    int64_t kf, before_ts = p->region_first_ts, before_pos = p->region_first_pos;
    if (p->to_start || !p->region_started ||
        !vtr_video_reader_keyframe_preceding(p->r, before_pos, before_ts, &kf) ||
        vtr_video_reader_seek(p->r, kf, err) != VTR_OK)
        return rewind_to_start(p, err);
    region_reset(p, false);
    bool have;
    vtr_status st = have_packet(p, &have, err);
    if (st != VTR_OK)
        return st;
    bool earlier = before_pos >= 0 && p->region_first_pos >= 0
                       ? p->region_first_pos < before_pos
                       : p->region_first_ts < before_ts;
    if (!have || !earlier)
        return rewind_to_start(p, err); /* no earlier keyframe to land on */
    return VTR_OK;
}

static vtr_status pick_timed(picker *p, vtr_error *err)
{
    const vtr_pick_plan *plan = p->plan;
    int64_t n = plan->n_targets;
    vtr_status st = VTR_OK;
    while (p->n_done < n) {
        if (p->retry) {
            if ((st = go_back(p, err)) != VTR_OK)
                return st;
            continue;
        }
        while (p->cursor < n && p->state[p->cursor] != UNCLAIMED)
            p->cursor++;
        if (p->cursor == n) {
            /* every target's packet is sent: drain rather than decode more */
            if ((st = drain(p, err)) != VTR_OK)
                return st;
            if (!p->retry && p->n_done < n) {
                p->retry = true; /* a claimed frame never came out */
                p->retry_pts = plan->targets[n - 1];
            }
            continue;
        }
        bool have;
        if ((st = have_packet(p, &have, err)) != VTR_OK)
            return st;
        if (p->cursor < n && plan->seek && have) {
            if (p->pinned >= 0 && p->state[p->pinned] != UNCLAIMED)
                p->pinned = -1;
            int64_t kf_ts, kf_pos, t = plan->targets[p->cursor];
            const AVPacket *head = p->queue[p->q_head];
            int64_t cur_ts = p->sent_any ? p->last_sent_ts : index_ts(head);
            int64_t cur_pos = p->sent_any ? p->last_sent_pos : head->pos;
            if (p->pinned < 0 && p->bad_landings < 2 &&
                vtr_video_reader_keyframe_before(p->r, t, &kf_ts, &kf_pos) &&
                (kf_pos >= 0 && cur_pos >= 0 ? kf_pos > cur_pos : kf_ts > cur_ts)) {
                /* a keyframe lies between here and the target: jump to it */
                if ((st = drain(p, err)) != VTR_OK)
                    return st;
                if (p->retry)
                    continue;
                if ((st = vtr_video_reader_seek(p->r, t, err)) != VTR_OK)
                    return st;
                region_reset(p, false);
                p->check_target = p->pinned = p->cursor;
                p->check_landing = true;
                p->landing_ts = kf_ts;
                p->landing_pos = kf_pos;
                continue;
            }
        }
        if (!have) {
            /* the end of the file */
            if ((st = drain(p, err)) != VTR_OK)
                return st;
            if (p->retry)
                continue;
            if ((st = vtr_video_reader_check_end(p->r, p->region_end, err)) != VTR_OK)
                return st;
            if (p->n_done < n) {
                /* targets before this region's first frame */
                p->retry = true;
                p->retry_pts = plan->targets[p->cursor < n ? p->cursor : n - 1];
            }
            continue;
        }
        if (p->check_target >= 0) {
            /* after a jump, the target's frame must be in this region */
            int64_t t = plan->targets[p->check_target], found;
            if ((st = settle(p, t, err)) != VTR_OK)
                return st;
            if (!vtr_presentation_order_at(&p->order, t, &found)) {
                p->retry = true;
                p->retry_pts = t;
                continue;
            }
            p->check_target = -1;
        }
        if ((st = settle(p, p->queue[p->q_head]->pts, err)) != VTR_OK)
            return st;
        AVPacket *pkt = pop_packet(p);
        if (hidden(pkt)) {
            st = send_packet(p, pkt, false, 0, 0, err);
            av_packet_free(&pkt);
            if (st != VTR_OK)
                return st;
            continue;
        }
        int64_t q = vtr_presentation_order_next(&p->order, pkt->pts);
        int64_t first = vtr_targets_lower_bound(plan->targets, n, pkt->pts);
        int64_t end = q == INT64_MAX ? n : vtr_targets_lower_bound(plan->targets, n, q);
        /* the last frame would get every target up to the declared end: a file cut short
         * (or whose header declares days) fails here, before millions of copies (a region
         * ended by a bad landing is not the end of the file: it is decoded again) */
        if (q == INT64_MAX && p->region_eof && !p->retry &&
            (st = vtr_video_reader_check_end(p->r, p->region_end, err)) != VTR_OK) {
            av_packet_free(&pkt);
            return st;
        }
        if (p->from_start && p->order.count && pkt->pts == p->order.pts[0])
            first = 0; /* targets before the first frame get the first frame */
        bool picked = false;
        for (int64_t k = first; k < end; k++)
            if (p->state[k] == UNCLAIMED) {
                p->state[k] = CLAIMED;
                picked = true;
            }
        st = send_packet(p, pkt, picked, first, end, err);
        av_packet_free(&pkt);
        if (st != VTR_OK)
            return st;
    }
    /* targets after the last frame of a file that ends early got that frame: a cut file
     * (its index or header still declaring the full length) is an error, not a run of
     * copies of its last frame */
    return p->region_eof ? vtr_video_reader_check_end(p->r, p->region_end, err) : VTR_OK;
}

static vtr_status pick_frames_mode(picker *p, vtr_error *err)
{
    const vtr_sampler *s = &p->plan->sampler;
    vtr_status st;
    for (;;) {
        bool have;
        if ((st = have_packet(p, &have, err)) != VTR_OK)
            return st;
        if (!have)
            break;
        if ((st = settle(p, p->queue[p->q_head]->pts, err)) != VTR_OK)
            return st;
        AVPacket *pkt = pop_packet(p);
        bool picked = !hidden(pkt);
        if (picked && s->mode == VTR_SAMPLE_EVERY)
            picked = vtr_presentation_order_rank(&p->order, pkt->pts) % s->n == 0;
        else if (picked && s->mode == VTR_SAMPLE_KEYFRAMES)
            picked = (pkt->flags & AV_PKT_FLAG_KEY) || p->info->intra_only;
        st = VTR_OK;
        /* --keyframes: other packets are not even sent */
        if (picked || s->mode != VTR_SAMPLE_KEYFRAMES)
            st = send_packet(p, pkt, picked, 0, 0, err);
        av_packet_free(&pkt);
        if (st != VTR_OK)
            return st;
        if (p->retry)
            return go_back(p, err); /* from the start: final */
    }
    if ((st = drain(p, err)) != VTR_OK)
        return st;
    if (p->retry)
        return go_back(p, err);
    return vtr_video_reader_check_end(p->r, p->region_end, err);
}

vtr_status vtr_pick_frames(vtr_video_reader *r, const vtr_pick_plan *plan, vtr_frame_sink sink,
                           void *ctx, int64_t *delivered, vtr_error *err)
{
    picker p = {.r = r, .info = vtr_video_reader_info(r), .plan = plan, .sink = sink,
                .ctx = ctx, .pinned = -1, .check_target = -1};
    vtr_status st = VTR_OK;
    *delivered = 0;
    p.frame = av_frame_alloc();
    bool timed = vtr_sampler_is_timed(&plan->sampler);
    if (timed && plan->n_targets > 0)
        p.state = calloc((size_t)plan->n_targets, 1);
    if (!p.frame || (timed && plan->n_targets > 0 && !p.state)) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", vtr_video_reader_path(r));
        goto end;
    }
    if (plan->sampler.mode == VTR_SAMPLE_EVERY && plan->sampler.n < 1) {
        st = vtr_fail(err, VTR_ERR_INVALID, "--every needs a step of at least 1");
        goto end;
    }
    region_reset(&p, true);
    if (timed) {
        st = pick_timed(&p, err);
        *delivered = p.n_done;
    } else {
        st = pick_frames_mode(&p, err);
        *delivered = p.delivered;
    }
end:
    clear_queue(&p);
    free(p.queue);
    free(p.fl);
    free(p.state);
    vtr_presentation_order_free(&p.order);
    av_frame_free(&p.frame);
    return st;
}
