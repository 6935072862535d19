/* Picture order times (poc_times.h). */
#include "poc_times.h"

#include <stdlib.h>
#include <string.h>

bool vtr_poc_times_applies(const AVCodecParameters *par, const char *fmt)
{
    return par->video_delay > 0 &&
           (par->codec_id == AV_CODEC_ID_H264 || par->codec_id == AV_CODEC_ID_HEVC) &&
           !strcmp(fmt, "avi");
}

vtr_status vtr_poc_times_init(vtr_poc_times *pt, const AVCodecParameters *par, const char *path,
                              vtr_error *err)
{
    memset(pt, 0, sizeof *pt);
    pt->path = path;
    pt->parser = av_parser_init(par->codec_id);
    pt->ctx = avcodec_alloc_context3(NULL);
    if (!pt->parser || !pt->ctx || avcodec_parameters_to_context(pt->ctx, par) < 0) {
        vtr_poc_times_free(pt);
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory for the picture order parser", path);
    }
    pt->parser->flags |= PARSER_FLAG_COMPLETE_FRAMES; /* a packet is a picture */
    return VTR_OK;
}

void vtr_poc_times_reset(vtr_poc_times *pt)
{
    for (int i = 0; i < pt->len; i++)
        av_packet_free(&pt->queue[i]);
    pt->len = pt->waiting = 0;
    pt->in_run = pt->shown_any = false;
}

void vtr_poc_times_free(vtr_poc_times *pt)
{
    vtr_poc_times_reset(pt);
    av_parser_close(pt->parser);
    avcodec_free_context(&pt->ctx);
    free(pt->queue);
    free(pt->poc);
    free(pt->slots);
    memset(pt, 0, sizeof *pt);
}

/* Shows the waiting packet of lowest count: it gets the earliest slot not given. */
static void show_next(vtr_poc_times *pt)
{
    int best = -1;
    for (int i = 0; i < pt->len; i++)
        if (pt->queue[i]->pts == AV_NOPTS_VALUE && (best < 0 || pt->poc[i] < pt->poc[best]))
            best = i;
    pt->queue[best]->pts = pt->slots[0];
    pt->waiting--;
    memmove(pt->slots, pt->slots + 1, (size_t)pt->waiting * sizeof *pt->slots);
    pt->last_shown = pt->poc[best];
    pt->shown_any = true;
}

vtr_status vtr_poc_times_push(vtr_poc_times *pt, AVPacket *pkt, vtr_error *err)
{
    if (pkt->dts == AV_NOPTS_VALUE)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: a video packet without a decode time", pt->path);
    if (pt->len == pt->cap) {
        int cap = pt->cap ? 2 * pt->cap : 32;
        AVPacket **q = realloc(pt->queue, (size_t)cap * sizeof *q);
        if (q)
            pt->queue = q;
        int *poc = q ? realloc(pt->poc, (size_t)cap * sizeof *poc) : NULL;
        if (poc)
            pt->poc = poc;
        int64_t *slots = poc ? realloc(pt->slots, (size_t)cap * sizeof *slots) : NULL;
        if (!slots)
            return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory for packets", pt->path);
        pt->slots = slots;
        pt->cap = cap;
    }
    uint8_t *data;
    int size;
    pt->parser->output_picture_number = 0;
    av_parser_parse2(pt->parser, pt->ctx, &data, &size, pkt->data, pkt->size, AV_NOPTS_VALUE,
                     pkt->dts, pkt->pos);
    int poc = pt->parser->output_picture_number;
    bool key = (pkt->flags & AV_PKT_FLAG_KEY) || pt->parser->key_frame == 1;
    if (key && pt->in_run && poc <= pt->run_max) {
        /* the count starts again (an IDR picture): the run before is shown first */
        while (pt->waiting > 0)
            show_next(pt);
        pt->shown_any = false;
        pt->in_run = false;
    }
    if (pt->shown_any && poc < pt->last_shown)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "%s: a picture shown before one %d or more pictures ahead of it in "
                        "the stream (damaged?)",
                        pt->path, VTR_POC_DEPTH);
    AVPacket *p = av_packet_alloc();
    if (!p)
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory for packets", pt->path);
    av_packet_move_ref(p, pkt);
    p->pts = AV_NOPTS_VALUE; /* until shown */
    pt->run_max = pt->in_run && pt->run_max > poc ? pt->run_max : poc;
    pt->in_run = true;
    pt->queue[pt->len] = p;
    pt->poc[pt->len++] = poc;
    pt->slots[pt->waiting++] = p->dts;
    while (pt->waiting > VTR_POC_DEPTH)
        show_next(pt);
    return VTR_OK;
}

bool vtr_poc_times_pop(vtr_poc_times *pt, AVPacket *out, bool end)
{
    while (end && pt->waiting > 0)
        show_next(pt);
    if (pt->len == 0 || pt->queue[0]->pts == AV_NOPTS_VALUE)
        return false;
    av_packet_move_ref(out, pt->queue[0]);
    av_packet_free(&pt->queue[0]);
    pt->len--;
    memmove(pt->queue, pt->queue + 1, (size_t)pt->len * sizeof *pt->queue);
    memmove(pt->poc, pt->poc + 1, (size_t)pt->len * sizeof *pt->poc);
    return true;
}
