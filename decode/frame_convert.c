#include "frame_convert.h"

#include <libavutil/imgutils.h>
#include <libavutil/mem.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
#include <stdbool.h>
#include <string.h>

#include "decode/hdr_tone.h"

#define SCALE_FLAGS (SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT)

struct vtr_frame_converter {
    struct SwsContext *sws;
    uint8_t *buf; /* the scaled RGB picture in coded orientation */
    size_t buf_size;
    /* HDR frames: the scaled picture as 16-bit YUV 4:4:4, and the tables for their signal */
    uint8_t *wide;
    size_t wide_size;
    vtr_hdr_tone *tone;
    vtr_hdr_signal tone_signal;
};

vtr_status vtr_frame_geometry_plan(int coded_w, int coded_h, int sar_num, int sar_den,
                                   const vtr_orientation *o, const vtr_geometry_request *req,
                                   vtr_frame_geometry *g, vtr_error *err)
{
    if (coded_w <= 0 || coded_h <= 0 || coded_w > 32768 || coded_h > 32768)
        return vtr_fail(err, VTR_ERR_FORMAT, "frame size %dx%d out of range", coded_w, coded_h);
    if (req->width < 0 || req->height < 0 || (req->width == 0) != (req->height == 0) ||
        req->width > 32768 || req->height > 32768)
        return vtr_fail(err, VTR_ERR_INVALID, "output size %dx%d out of range", req->width,
                        req->height);
    if (sar_num <= 0 || sar_den <= 0)
        sar_num = sar_den = 1;
    /* square pixels: widened (a sample aspect ratio over 1) or heightened, never narrowed */
    int64_t w = coded_w, h = coded_h;
    if (sar_num > sar_den)
        w = ((int64_t)coded_w * sar_num * 2 + sar_den) / (2 * (int64_t)sar_den);
    else if (sar_num < sar_den)
        h = ((int64_t)coded_h * sar_den * 2 + sar_num) / (2 * (int64_t)sar_num);
    if (w > 32768 || h > 32768)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "frame size %dx%d with pixels of aspect %d:%d "
                        "out of range",
                        coded_w, coded_h, sar_num, sar_den);
    g->orientation = *o;
    g->coded_w = coded_w;
    g->coded_h = coded_h;
    vtr_orientation_display_size(o, (int)w, (int)h, &g->display_w, &g->display_h);
    int dw = g->display_w, dh = g->display_h, W = req->width, H = req->height;
    if (W == 0) {
        g->scaled_w = dw;
        g->scaled_h = dh;
    } else if (req->resize == VTR_RESIZE_STRETCH) {
        g->scaled_w = W;
        g->scaled_h = H;
    } else if ((int64_t)W * dh >= (int64_t)H * dw) {
        /* the width binds: W / dw >= H / dh */
        g->scaled_w = W;
        g->scaled_h = (int)(((int64_t)dh * W * 2 + dw) / (2 * (int64_t)dw)); /* rounded */
        if (g->scaled_h < H)
            g->scaled_h = H;
    } else {
        g->scaled_h = H;
        g->scaled_w = (int)(((int64_t)dw * H * 2 + dh) / (2 * (int64_t)dh));
        if (g->scaled_w < W)
            g->scaled_w = W;
    }
    if (W && req->crop == VTR_CROP_CENTER) {
        g->crop_x = (g->scaled_w - W) / 2;
        g->crop_y = (g->scaled_h - H) / 2;
        g->out_w = W;
        g->out_h = H;
    } else {
        g->crop_x = g->crop_y = 0;
        g->out_w = g->scaled_w;
        g->out_h = g->scaled_h;
    }
    return VTR_OK;
}

vtr_frame_converter *vtr_frame_converter_new(void)
{
    return calloc(1, sizeof(vtr_frame_converter));
}

void vtr_frame_converter_free(vtr_frame_converter *c)
{
    if (!c)
        return;
    sws_freeContext(c->sws);
    av_free(c->buf);
    av_free(c->wide);
    vtr_hdr_tone_free(c->tone);
    free(c);
}

/* The deprecated full-range "J" formats as their plain twins plus a range flag. */
static enum AVPixelFormat plain_format(enum AVPixelFormat f, int *full_range)
{
    switch (f) {
    case AV_PIX_FMT_YUVJ420P: *full_range = 1; return AV_PIX_FMT_YUV420P;
    case AV_PIX_FMT_YUVJ422P: *full_range = 1; return AV_PIX_FMT_YUV422P;
    case AV_PIX_FMT_YUVJ444P: *full_range = 1; return AV_PIX_FMT_YUV444P;
    case AV_PIX_FMT_YUVJ440P: *full_range = 1; return AV_PIX_FMT_YUV440P;
    case AV_PIX_FMT_YUVJ411P: *full_range = 1; return AV_PIX_FMT_YUV411P;
    default: return f;
    }
}

/* A buffer of at least need bytes at *buf (of *size). */
static vtr_status reserve(uint8_t **buf, size_t *size, size_t need, vtr_error *err)
{
    if (need <= *size)
        return VTR_OK;
    av_free(*buf);
    *buf = av_malloc(need);
    *size = *buf ? need : 0;
    return *buf ? VTR_OK : vtr_fail(err, VTR_ERR_NOMEM, "out of memory for a picture");
}

/* The tables for an HDR frame (kept while frames stay alike). */
static vtr_status fit_tone(vtr_frame_converter *c, const AVFrame *frame, vtr_error *err)
{
    vtr_hdr_signal s;
    vtr_hdr_signal_of(frame, &s);
    if (c->tone && !memcmp(&s, &c->tone_signal, sizeof s))
        return VTR_OK;
    vtr_hdr_tone_free(c->tone);
    c->tone = vtr_hdr_tone_new(&s);
    c->tone_signal = s;
    return c->tone ? VTR_OK : vtr_fail(err, VTR_ERR_NOMEM, "out of memory for HDR tables");
}

vtr_status vtr_frame_convert(vtr_frame_converter *c, const AVFrame *frame,
                             const vtr_frame_geometry *g, uint8_t *out, vtr_error *err)
{
    const vtr_orientation *o = &g->orientation;
    /* the scaled picture, in coded orientation */
    int pw = o->transpose ? g->scaled_h : g->scaled_w;
    int ph = o->transpose ? g->scaled_w : g->scaled_h;
    int full_range = frame->color_range == AVCOL_RANGE_JPEG;
    enum AVPixelFormat src = plain_format((enum AVPixelFormat)frame->format, &full_range);
    const AVPixFmtDescriptor *desc = av_pix_fmt_desc_get(src);
    bool yuv = desc && !(desc->flags & AV_PIX_FMT_FLAG_RGB);
    /* HDR: scaled as YUV, then made SDR RGB by hdr_tone.c */
    bool hdr = yuv && vtr_hdr_kind_of(frame->color_trc) != VTR_HDR_NONE;
    c->sws = sws_getCachedContext(c->sws, frame->width, frame->height, src, pw, ph,
                                  hdr ? AV_PIX_FMT_YUV444P16 : AV_PIX_FMT_RGB24, SCALE_FLAGS, NULL,
                                  NULL, NULL);
    if (!c->sws)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "no conversion from %s %dx%d to RGB %dx%d",
                        av_get_pix_fmt_name(src), frame->width, frame->height, pw, ph);
    if (yuv && !hdr) {
        /* as FFmpeg's scale filter: the matrix the frame declares (BT.601 by default) */
        const int *coef = sws_getCoefficients(frame->colorspace);
        sws_setColorspaceDetails(c->sws, coef, full_range, sws_getCoefficients(SWS_CS_DEFAULT),
                                 1, 0, 1 << 16, 1 << 16);
    }
    int stride = FFALIGN(pw * 3, 64), plane = FFALIGN(pw * 2, 64);
    vtr_status st = reserve(&c->buf, &c->buf_size, (size_t)stride * ph, err);
    if (st == VTR_OK && hdr)
        st = reserve(&c->wide, &c->wide_size, 3 * (size_t)plane * ph, err);
    if (st == VTR_OK && hdr)
        st = fit_tone(c, frame, err);
    if (st != VTR_OK)
        return st;
    uint8_t *dst[4] = {c->buf, NULL, NULL, NULL};
    int dst_stride[4] = {stride, 0, 0, 0};
    if (hdr)
        for (int k = 0; k < 3; k++) {
            dst[k] = c->wide + (size_t)k * plane * ph;
            dst_stride[k] = plane;
        }
    int rows = sws_scale(c->sws, (const uint8_t *const *)frame->data, frame->linesize, 0,
                         frame->height, dst, dst_stride);
    if (rows != ph)
        return vtr_fail(err, VTR_ERR_CODEC, "pixel conversion produced %d of %d rows", rows, ph);
    if (hdr)
        vtr_hdr_tone_map(c->tone, (const uint8_t *const *)dst, dst_stride, pw, ph, c->buf,
                         (size_t)stride);
    vtr_orientation_copy_rgb(o, c->buf, pw, ph, (size_t)stride, g->crop_x, g->crop_y, g->out_w,
                             g->out_h, out);
    return VTR_OK;
}

void vtr_rgb_normalize(const uint8_t *rgb, size_t pixels, const float mean[3],
                       const float std[3], float *out)
{
    float scale[3], shift[3];
    for (int k = 0; k < 3; k++) {
        scale[k] = 1.0f / (255.0f * std[k]);
        shift[k] = -mean[k] / std[k];
    }
    for (size_t i = 0; i < pixels; i++)
        for (int k = 0; k < 3; k++)
            out[3 * i + k] = (float)rgb[3 * i + k] * scale[k] + shift[k];
}
