/* Small JPEG pictures of frames (thumbnail.h). */
#include "thumbnail.h"

#include <libavcodec/avcodec.h>
#include <libavutil/frame.h>
#include <libswscale/swscale.h>
#include <stdlib.h>
#include <string.h>

/* The size of a w x h frame scaled to fit max_w x max_h, never enlarged. */
static void fit(int w, int h, int max_w, int max_h, int *ow, int *oh)
{
    *ow = w;
    *oh = h;
    if (*ow > max_w) {
        *oh = (int)((int64_t)*oh * max_w / *ow);
        *ow = max_w;
    }
    if (*oh > max_h) {
        *ow = (int)((int64_t)*ow * max_h / *oh);
        *oh = max_h;
    }
    *ow = *ow < 1 ? 1 : *ow;
    *oh = *oh < 1 ? 1 : *oh;
}

vtr_status vtr_thumbnail_jpeg(const uint8_t *rgb, int h, int w, int max_w, int max_h, int q,
                              uint8_t **jpeg, size_t *size, vtr_error *err)
{
    *jpeg = NULL;
    *size = 0;
    if (h < 1 || w < 1 || max_w < 1 || max_h < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "a picture of a %d x %d frame in %d x %d", w, h,
                        max_w, max_h);
    int ow, oh;
    fit(w, h, max_w, max_h, &ow, &oh);
    const AVCodec *codec = avcodec_find_encoder(AV_CODEC_ID_MJPEG);
    if (!codec)
        return vtr_fail(err, VTR_ERR_CODEC, "this FFmpeg has no JPEG encoder");
    AVCodecContext *cx = avcodec_alloc_context3(codec);
    AVFrame *f = av_frame_alloc();
    AVPacket *pkt = av_packet_alloc();
    struct SwsContext *sws = NULL;
    vtr_status st = VTR_OK;
    int rc;
    if (!cx || !f || !pkt) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    cx->width = ow;
    cx->height = oh;
    cx->pix_fmt = AV_PIX_FMT_YUVJ420P;
    cx->time_base = (AVRational){1, 1};
    cx->flags |= AV_CODEC_FLAG_QSCALE;
    cx->global_quality = FF_QP2LAMBDA * q;
    f->format = AV_PIX_FMT_YUVJ420P;
    f->width = ow;
    f->height = oh;
    if ((rc = avcodec_open2(cx, codec, NULL)) < 0 || (rc = av_frame_get_buffer(f, 0)) < 0) {
        st = vtr_fail(err, VTR_ERR_CODEC, "JPEG encoder: %s", av_err2str(rc));
        goto end;
    }
    sws = sws_getContext(w, h, AV_PIX_FMT_RGB24, ow, oh, AV_PIX_FMT_YUVJ420P, SWS_BICUBIC,
                         NULL, NULL, NULL);
    if (!sws) {
        st = vtr_fail(err, VTR_ERR_CODEC, "no scaler from %d x %d RGB to %d x %d", w, h, ow, oh);
        goto end;
    }
    const uint8_t *src[1] = {rgb};
    const int stride[1] = {3 * w};
    sws_scale(sws, src, stride, 0, h, f->data, f->linesize);
    f->quality = cx->global_quality;
    f->pict_type = AV_PICTURE_TYPE_I;
    if ((rc = avcodec_send_frame(cx, f)) < 0 || (rc = avcodec_receive_packet(cx, pkt)) < 0) {
        st = vtr_fail(err, VTR_ERR_CODEC, "JPEG encoder: %s", av_err2str(rc));
        goto end;
    }
    if (!(*jpeg = malloc((size_t)pkt->size))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    memcpy(*jpeg, pkt->data, (size_t)pkt->size);
    *size = (size_t)pkt->size;
end:
    sws_freeContext(sws);
    av_packet_free(&pkt);
    av_frame_free(&f);
    avcodec_free_context(&cx);
    return st;
}
