#include "packet_times.h"

#include <stdlib.h>
#include <string.h>

bool vtr_packet_times_applies(const AVCodecParameters *par)
{
    enum AVCodecID id = par->codec_id;
    return par->video_delay > 0 && (id == AV_CODEC_ID_MPEG1VIDEO ||
                                    id == AV_CODEC_ID_MPEG2VIDEO || id == AV_CODEC_ID_MPEG4);
}

void vtr_packet_times_init(vtr_packet_times *pt, enum AVCodecID codec)
{
    memset(pt, 0, sizeof *pt);
    pt->codec = codec;
    pt->open = -1;
}

void vtr_packet_times_reset(vtr_packet_times *pt)
{
    for (int i = 0; i < pt->len; i++)
        av_packet_free(&pt->queue[i]);
    pt->len = 0;
    pt->open = -1;
}

void vtr_packet_times_free(vtr_packet_times *pt)
{
    vtr_packet_times_reset(pt);
    free(pt->queue);
    pt->queue = NULL;
    pt->cap = 0;
}

/* MPEG-1/2: 00 00 01 00, 10 bits temporal reference, 3 bits type (3 = B); MPEG-4: 00 00 01
 * B6, 2 bits type (2 = B). A packet without a picture header counts as a reference. */
bool vtr_packet_is_b_picture(enum AVCodecID codec, const AVPacket *pkt)
{
    const uint8_t *p = pkt->data;
    bool mpeg4 = codec == AV_CODEC_ID_MPEG4;
    uint8_t code = mpeg4 ? 0xB6 : 0x00;
    for (int i = 0; i + 5 < pkt->size; i++)
        if (p[i] == 0 && p[i + 1] == 0 && p[i + 2] == 1 && p[i + 3] == code)
            return mpeg4 ? (p[i + 4] >> 6) == 2 : ((p[i + 5] >> 3) & 7) == 3;
    return false;
}

/* Packets held at most while the times are untold. */
#define MAX_UNTOLD 64

/* Tells from queue[i] what the times are, if it is a B-frame after a reference frame. */
static void tell(vtr_packet_times *pt, int i)
{
    const AVPacket *b = pt->queue[i];
    if (b->dts == AV_NOPTS_VALUE || !vtr_packet_is_b_picture(pt->codec, b))
        return;
    for (int k = i - 1; k >= 0; k--) {
        const AVPacket *ref = pt->queue[k];
        if (!vtr_packet_is_b_picture(pt->codec, ref)) {
            if (ref->dts != AV_NOPTS_VALUE)
                pt->given = b->dts < ref->dts ? VTR_TIMES_PRESENTATION : VTR_TIMES_DECODE;
            return;
        }
    }
}

/* Gives queue[i] its time, or the open reference frame its pts. */
static void settle(vtr_packet_times *pt, int i)
{
    AVPacket *p = pt->queue[i];
    if (p->dts == AV_NOPTS_VALUE) {
        /* nothing to place it by: keep the container's pts (the picker refuses none) */
    } else if (pt->given == VTR_TIMES_PRESENTATION) {
        if (p->pts == AV_NOPTS_VALUE)
            p->pts = p->dts;
    } else if (vtr_packet_is_b_picture(pt->codec, p)) {
        if (p->pts == AV_NOPTS_VALUE)
            p->pts = p->dts;
    } else {
        if (pt->open >= 0) {
            AVPacket *ref = pt->queue[pt->open];
            if (ref->pts == AV_NOPTS_VALUE || ref->pts < p->dts)
                ref->pts = p->dts;
        }
        pt->open = i;
    }
}

vtr_status vtr_packet_times_push(vtr_packet_times *pt, AVPacket *pkt, vtr_error *err)
{
    if (pt->len == pt->cap) {
        int cap = pt->cap ? 2 * pt->cap : 8;
        AVPacket **q = realloc(pt->queue, (size_t)cap * sizeof *q);
        if (!q)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for packets");
        pt->queue = q;
        pt->cap = cap;
    }
    AVPacket *p = av_packet_alloc();
    if (!p)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for packets");
    av_packet_move_ref(p, pkt);
    pt->queue[pt->len++] = p;
    if (pt->given != VTR_TIMES_UNTOLD) {
        settle(pt, pt->len - 1);
        return VTR_OK;
    }
    tell(pt, pt->len - 1);
    if (pt->given == VTR_TIMES_UNTOLD && pt->len >= MAX_UNTOLD)
        pt->given = VTR_TIMES_DECODE;
    if (pt->given != VTR_TIMES_UNTOLD) /* told now: what waited too */
        for (int i = 0; i < pt->len; i++)
            settle(pt, i);
    return VTR_OK;
}

bool vtr_packet_times_pop(vtr_packet_times *pt, AVPacket *out, bool end)
{
    if (pt->len == 0)
        return false;
    if (pt->given == VTR_TIMES_UNTOLD) {
        if (!end)
            return false;
        pt->given = VTR_TIMES_DECODE; /* no B-frame to tell by: as before */
        for (int i = 0; i < pt->len; i++)
            settle(pt, i);
    }
    if (pt->open == 0) {
        if (!end)
            return false; /* the next reference frame fixes its pts */
        /* the last reference frame: shown after every queued frame */
        AVPacket *ref = pt->queue[0], *last = pt->queue[pt->len - 1];
        int64_t after = last->dts + (last->duration > 0 ? last->duration : 1);
        if (last->dts != AV_NOPTS_VALUE && (ref->pts == AV_NOPTS_VALUE || ref->pts < after))
            ref->pts = after;
        pt->open = -1;
    }
    av_packet_move_ref(out, pt->queue[0]);
    av_packet_free(&pt->queue[0]);
    memmove(pt->queue, pt->queue + 1, (size_t)(pt->len - 1) * sizeof *pt->queue);
    pt->len--;
    if (pt->open > 0)
        pt->open--;
    return true;
}
