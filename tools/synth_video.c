#define _POSIX_C_SOURCE 200809L
#include "synth_video.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libheif/heif.h>
#include <libswscale/swscale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "decode/packet_times.h"
#include "lib/file.h"

/* ---- the index pattern ---------------------------------------------------------- */

#define GRID_COLS 6
#define GRID_ROWS 4
#define INDEX_BITS 16
#define LIGHT 196
#define DARK 60
#define TEXTURE_AMPLITUDE 24

static int8_t texture[256][256]; /* tileable value noise in [-24, 24] */
static pthread_once_t texture_once = PTHREAD_ONCE_INIT;

static double lattice(uint32_t x, uint32_t y, uint32_t period)
{
    uint32_t h = (x % period) * 374761393u + (y % period) * 668265263u;
    h = (h ^ (h >> 13)) * 1274126177u;
    return (double)((h ^ (h >> 16)) & 0xffff) / 32767.5 - 1.0;
}

static double smooth_noise(int x, int y, int cell)
{
    uint32_t period = 256 / (uint32_t)cell;
    int gx = x / cell, gy = y / cell;
    double fx = (double)(x % cell) / cell, fy = (double)(y % cell) / cell;
    fx = fx * fx * (3 - 2 * fx);
    fy = fy * fy * (3 - 2 * fy);
    double a = lattice((uint32_t)gx, (uint32_t)gy, period);
    double b = lattice((uint32_t)gx + 1, (uint32_t)gy, period);
    double c = lattice((uint32_t)gx, (uint32_t)gy + 1, period);
    double d = lattice((uint32_t)gx + 1, (uint32_t)gy + 1, period);
    return (a + (b - a) * fx) + ((c + (d - c) * fx) - (a + (b - a) * fx)) * fy;
}

static void texture_init(void)
{
    for (int y = 0; y < 256; y++)
        for (int x = 0; x < 256; x++) {
            double v = 0.6 * smooth_noise(x, y, 32) + 0.4 * smooth_noise(x + 7, y + 3, 8);
            texture[y][x] = (int8_t)lrint(v * TEXTURE_AMPLITUDE);
        }
}

static unsigned check_bits(unsigned index)
{
    return (((index * 2654435761u) >> 24) ^ 0xA5u) & 0xFFu;
}

static int clamp_u8(int v)
{
    return v < 0 ? 0 : v > 255 ? 255 : v;
}

void vtr_synth_draw_yuv420(uint8_t *y, int y_stride, uint8_t *u, int u_stride, uint8_t *v,
                           int v_stride, int w, int h, int index, int phase)
{
    pthread_once(&texture_once, texture_init);
    uint32_t code = ((uint32_t)index & 0xFFFFu) | (check_bits((unsigned)index & 0xFFFFu) << 16);
    int cw = w / GRID_COLS, ch = h / GRID_ROWS;
    for (int row = 0; row < h; row++) {
        int gy = ch > 0 ? row / ch : GRID_ROWS;
        const int8_t *tex = texture[(row + phase) & 255];
        uint8_t *out = y + (size_t)row * y_stride;
        for (int col = 0; col < w; col++) {
            int gx = cw > 0 ? col / cw : GRID_COLS;
            int base = 128;
            if (gx < GRID_COLS && gy < GRID_ROWS)
                base = (code >> (gy * GRID_COLS + gx)) & 1 ? LIGHT : DARK;
            out[col] = (uint8_t)clamp_u8(base + tex[(col + 2 * phase) & 255]);
        }
    }
    for (int row = 0; row < (h + 1) / 2; row++) {
        const int8_t *tu = texture[(row + 91 + phase) & 255];
        const int8_t *tv = texture[(row + 17 - phase) & 255];
        for (int col = 0; col < (w + 1) / 2; col++) {
            u[(size_t)row * u_stride + col] = (uint8_t)(128 + tu[(col + 40 + phase) & 255] / 2);
            v[(size_t)row * v_stride + col] = (uint8_t)(128 + tv[(col + 3 * phase) & 255] / 2);
        }
    }
}

int vtr_synth_read_index(const uint8_t *rgb, int width, int height, size_t stride)
{
    int cw = width / GRID_COLS, ch = height / GRID_ROWS;
    if (cw < 2 || ch < 2)
        return -1;
    uint32_t code = 0;
    for (int gy = 0; gy < GRID_ROWS; gy++)
        for (int gx = 0; gx < GRID_COLS; gx++) {
            /* the central half of the cell: away from edges that ringing and chroma
             * subsampling blur */
            int x0 = gx * cw + cw / 4, x1 = gx * cw + (3 * cw) / 4;
            int y0 = gy * ch + ch / 4, y1 = gy * ch + (3 * ch) / 4;
            uint64_t sum = 0, n = 0;
            for (int yy = y0; yy < y1; yy++) {
                const uint8_t *p = rgb + (size_t)yy * stride + (size_t)x0 * 3;
                for (int xx = x0; xx < x1; xx++, p += 3) {
                    sum += (77u * p[0] + 150u * p[1] + 29u * p[2]) >> 8;
                    n++;
                }
            }
            if (n && sum > 128 * n)
                code |= 1u << (gy * GRID_COLS + gx);
        }
    unsigned index = code & 0xFFFFu;
    if ((code >> 16) != check_bits(index))
        return -1;
    return (int)index;
}

/* ---- options -------------------------------------------------------------------- */

void vtr_synth_defaults(vtr_synth_options *o)
{
    memset(o, 0, sizeof *o);
    o->width = 160;
    o->height = 120;
    o->frames = 50;
    o->fps_num = 25;
    o->fps_den = 1;
    o->timescale = 1000;
    o->gop = 12;
    o->audio_channels = 2;
    o->tone_hz = 440.0;
    o->preset = "veryfast";
}

static bool is_image_codec(const char *codec)
{
    return !strcmp(codec, "png") || !strcmp(codec, "mjpeg") || !strcmp(codec, "webp") ||
           !strcmp(codec, "bmp") || !strcmp(codec, "tiff") || !strcmp(codec, "heif") ||
           !strcmp(codec, "avif");
}

/* Whether path's extension (after its last dot) is ext, in any case. */
static bool has_extension(const char *path, const char *ext)
{
    const char *dot = strrchr(path, '.');
    return dot && !strcasecmp(dot + 1, ext);
}

static const char *codec_for_path(const char *path)
{
    if (has_extension(path, "webm"))
        return "vp9";
    if (has_extension(path, "avi"))
        return "mpeg4";
    if (has_extension(path, "mpg") || has_extension(path, "mpeg") || has_extension(path, "vob"))
        return "mpeg2video";
    if (has_extension(path, "png"))
        return "png";
    if (has_extension(path, "jpg") || has_extension(path, "jpeg"))
        return "mjpeg";
    if (has_extension(path, "webp"))
        return "webp";
    if (has_extension(path, "bmp"))
        return "bmp";
    if (has_extension(path, "tif") || has_extension(path, "tiff"))
        return "tiff";
    if (has_extension(path, "heic") || has_extension(path, "heif"))
        return "heif";
    if (has_extension(path, "avif"))
        return "avif";
    if (has_extension(path, "gif"))
        return "gif"; /* a video of o->frames pictures, one a still */
    return "h264";
}

/* Frame i's timestamp in the encoder time base (see video_time_base). */
static int64_t frame_pts(const vtr_synth_options *o, int i)
{
    if (o->pts)
        return llround(o->start_time * o->timescale) + o->pts[i];
    return llround(o->start_time * o->fps_num / o->fps_den) + i;
}

static AVRational video_time_base(const vtr_synth_options *o)
{
    return o->pts ? (AVRational){1, o->timescale} : (AVRational){o->fps_den, o->fps_num};
}

double vtr_synth_frame_time(const vtr_synth_options *o, int i)
{
    return (double)frame_pts(o, i) * av_q2d(video_time_base(o));
}

/* Duration of frame i in the encoder time base: the gap to the next frame (the last
 * frame lasts as long as the one before it). */
static int64_t frame_duration(const vtr_synth_options *o, int i)
{
    if (!o->pts)
        return 1;
    if (o->frames < 2)
        return 1;
    if (i + 1 < o->frames)
        return o->pts[i + 1] - o->pts[i];
    return o->pts[i] - o->pts[i - 1];
}

static vtr_status check_options(const char *path, const vtr_synth_options *o, const char *codec,
                                vtr_error *err)
{
    if (o->width < 16 || o->height < 16 || o->width % 2 || o->height % 2 || o->width > 8192 ||
        o->height > 8192)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: size %dx%d: need even sizes from 16 to 8192",
                        path, o->width, o->height);
    if (!is_image_codec(codec) && o->frames < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: need at least one frame", path);
    if (o->fps_num <= 0 || o->fps_den <= 0 || o->timescale <= 0 || o->gop < 1 ||
        o->b_frames < 0 || o->b_frames > 16)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: bad rate, GOP or B-frame count", path);
    if (o->first_index < 0 || o->first_index + (o->frames > 0 ? o->frames : 1) - 1 >
                                  VTR_SYNTH_MAX_INDEX)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: frame indices must stay within 0..%d", path,
                        VTR_SYNTH_MAX_INDEX);
    if (o->rotation % 90 || o->rotation < 0 || o->rotation >= 360)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: rotation %d: use 0, 90, 180 or 270", path,
                        o->rotation);
    if (o->orientation < 0 || o->orientation > 8 ||
        (o->orientation && strcmp(codec, "heif") && strcmp(codec, "avif")))
        return vtr_fail(err, VTR_ERR_INVALID,
                        "%s: an orientation (1..8) is for HEIF and AVIF images", path);
    if (o->pts)
        for (int i = 1; i < o->frames; i++)
            if (o->pts[i] <= o->pts[i - 1])
                return vtr_fail(err, VTR_ERR_INVALID, "%s: pts must increase (frame %d)", path,
                                i);
    if (o->start_time < 0)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: negative start time", path);
    if (o->packed_b_frames && (strcmp(codec, "mpeg4") || o->pts))
        return vtr_fail(err, VTR_ERR_INVALID,
                        "%s: packed B-frames need MPEG-4 at a constant frame rate", path);
    if (o->audio_channels < 1 || o->audio_channels > 2)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: 1 or 2 audio channels", path);
    return VTR_OK;
}

/* ---- encoding ------------------------------------------------------------------- */

typedef struct synth {
    const char *path;
    const vtr_synth_options *o;
    AVFormatContext *oc;
    AVCodecContext *venc, *aenc;
    AVStream *vst, *ast;
    AVFrame *yuv;   /* the drawn picture, yuv420p */
    AVFrame *conv;  /* the picture in the encoder's pixel format, when that differs */
    AVFrame *audio;
    AVFrame *rgb;   /* the picture the draw callback paints, rgb24 */
    AVPacket *pkt;
    struct SwsContext *sws;
    struct SwsContext *rgb_sws; /* rgb -> yuv */
    int64_t audio_next;  /* next audio sample to encode, counted from the first */
    int64_t audio_total; /* samples to encode */
    /* packed B-frames: the reference frame waiting for the B-frame it is packed with,
     * whether an N-VOP is owed for the last packed one, packets written */
    AVPacket *held;
    bool nvop_owed;
    int64_t chunks;
} synth;

static vtr_status codec_error(vtr_error *err, const char *path, const char *what, int ret)
{
    return vtr_fail(err, VTR_ERR_CODEC, "%s: %s: %s", path, what, av_err2str(ret));
}

static vtr_status open_encoder(synth *s, const char *name, AVCodecContext **out,
                               vtr_error *err)
{
    const AVCodec *codec = avcodec_find_encoder_by_name(name);
    if (!codec)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s: encoder %s missing from this FFmpeg",
                        s->path, name);
    *out = avcodec_alloc_context3(codec);
    if (!*out)
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", s->path);
    /* the same bytes from every FFmpeg build and CPU: bit-exact DCTs, no version tags */
    (*out)->flags |= AV_CODEC_FLAG_BITEXACT;
    return VTR_OK;
}

/* *out: a new frame of the picture's size in format fmt. */
static vtr_status new_frame(synth *s, enum AVPixelFormat fmt, AVFrame **out, vtr_error *err)
{
    AVFrame *f = *out = av_frame_alloc();
    if (!f)
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", s->path);
    f->format = fmt;
    f->width = s->o->width;
    f->height = s->o->height;
    int ret = av_frame_get_buffer(f, 0);
    return ret < 0 ? codec_error(err, s->path, "allocating a frame", ret) : VTR_OK;
}

/* The frames a picture is drawn into (yuv420p, and rgb24 for a draw callback) and, when
 * pix_fmt differs, the frame it is converted into for encoding, with its converter. */
static vtr_status setup_frames(synth *s, enum AVPixelFormat pix_fmt, vtr_error *err)
{
    const vtr_synth_options *o = s->o;
    vtr_status st = new_frame(s, AV_PIX_FMT_YUV420P, &s->yuv, err);
    if (st != VTR_OK)
        return st;
    if (o->draw) {
        if ((st = new_frame(s, AV_PIX_FMT_RGB24, &s->rgb, err)) != VTR_OK)
            return st;
        s->rgb_sws =
            sws_getContext(o->width, o->height, AV_PIX_FMT_RGB24, o->width, o->height,
                           AV_PIX_FMT_YUV420P, SWS_BICUBIC | SWS_ACCURATE_RND, NULL, NULL, NULL);
        if (!s->rgb_sws)
            return vtr_fail(err, VTR_ERR_CODEC, "%s: no pixel conversion from rgb24", s->path);
    }
    if (pix_fmt != AV_PIX_FMT_YUV420P) {
        if ((st = new_frame(s, pix_fmt, &s->conv, err)) != VTR_OK)
            return st;
        enum AVPixelFormat dst = pix_fmt == AV_PIX_FMT_YUVJ420P ? AV_PIX_FMT_YUV420P : pix_fmt;
        s->sws =
            sws_getContext(o->width, o->height, AV_PIX_FMT_YUV420P, o->width, o->height, dst,
                           SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, NULL, NULL, NULL);
        if (!s->sws)
            return vtr_fail(err, VTR_ERR_CODEC, "%s: no pixel conversion to %s", s->path,
                            av_get_pix_fmt_name(pix_fmt));
        if (pix_fmt == AV_PIX_FMT_YUVJ420P) {
            /* limited-range source to full-range JPEG */
            const int *coef = sws_getCoefficients(SWS_CS_ITU601);
            sws_setColorspaceDetails(s->sws, coef, 0, coef, 1, 0, 1 << 16, 1 << 16);
        }
    }
    return VTR_OK;
}

static vtr_status setup_video(synth *s, const char *codec_name, bool image, vtr_error *err)
{
    const vtr_synth_options *o = s->o;
    const char *encoder = !strcmp(codec_name, "h264")   ? "libx264"
                          : !strcmp(codec_name, "vp9")  ? "libvpx-vp9"
                          : !strcmp(codec_name, "webp") ? "libwebp"
                                                        : codec_name;
    AVDictionary *opts = NULL;
    vtr_status st = open_encoder(s, encoder, &s->venc, err);
    if (st != VTR_OK)
        return st;
    AVCodecContext *c = s->venc;
    c->width = o->width;
    c->height = o->height;
    c->time_base = image ? (AVRational){1, 25} : video_time_base(o);
    c->framerate = (AVRational){o->fps_num, o->fps_den};
    c->pix_fmt = AV_PIX_FMT_YUV420P;
    c->sample_aspect_ratio = (AVRational){o->sar_num, o->sar_den ? o->sar_den : 1};
    c->gop_size = o->gop;
    c->max_b_frames = o->b_frames;
    char buf[64];
    if (!strcmp(codec_name, "h264")) {
        c->keyint_min = o->gop;
        av_dict_set(&opts, "preset", o->preset ? o->preset : "veryfast", 0);
        snprintf(buf, sizeof buf, "%d", o->quality ? o->quality : 23);
        av_dict_set(&opts, "crf", buf, 0);
        /* keyframes exactly every `gop` frames, none at scene changes; x264's C code,
         * since its SIMD kernels (SSSE3 and up) choose differently: the same archive on
         * every CPU, at half the encoding speed */
        av_dict_set(&opts, "x264-params", "scenecut=0:asm=0", 0);
    } else if (!strcmp(codec_name, "mpeg4") || !strcmp(codec_name, "mpeg2video")) {
        c->flags |= AV_CODEC_FLAG_QSCALE;
        c->global_quality = FF_QP2LAMBDA * (o->quality ? o->quality : 3);
        av_dict_set(&opts, "sc_threshold", "1000000000", 0); /* no scene-cut keyframes */
        if (o->closed_gop)
            c->flags |= AV_CODEC_FLAG_CLOSED_GOP;
    } else if (!strcmp(codec_name, "vp9")) {
        c->max_b_frames = 0;
        c->keyint_min = o->gop;
        c->bit_rate = 0;
        snprintf(buf, sizeof buf, "%d", o->quality ? o->quality : 30);
        av_dict_set(&opts, "crf", buf, 0);
        av_dict_set(&opts, "deadline", "good", 0);
        av_dict_set(&opts, "cpu-used", "5", 0);
    } else if (!strcmp(codec_name, "png") || !strcmp(codec_name, "tiff")) {
        c->pix_fmt = AV_PIX_FMT_RGB24;
    } else if (!strcmp(codec_name, "bmp")) {
        c->pix_fmt = AV_PIX_FMT_BGR24;
    } else if (!strcmp(codec_name, "gif")) {
        c->pix_fmt = AV_PIX_FMT_RGB8; /* 3-3-2 bits of colour, a palette of 256 */
    } else if (!strcmp(codec_name, "mjpeg")) {
        c->pix_fmt = AV_PIX_FMT_YUVJ420P;
        c->color_range = AVCOL_RANGE_JPEG;
        c->flags |= AV_CODEC_FLAG_QSCALE;
        c->global_quality = FF_QP2LAMBDA * (o->quality ? o->quality : 3);
    } else if (!strcmp(codec_name, "webp")) {
        av_dict_set(&opts, "quality", "90", 0);
    } else {
        av_dict_free(&opts);
        return vtr_fail(err, VTR_ERR_INVALID, "%s: unknown codec %s", s->path, codec_name);
    }
    if (s->oc && (s->oc->oformat->flags & AVFMT_GLOBALHEADER))
        c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    int ret = avcodec_open2(c, c->codec, &opts);
    av_dict_free(&opts);
    if (ret < 0)
        return codec_error(err, s->path, "opening the video encoder", ret);

    if ((st = setup_frames(s, c->pix_fmt, err)) != VTR_OK)
        return st;

    if (s->oc) {
        s->vst = avformat_new_stream(s->oc, NULL);
        if (!s->vst)
            return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", s->path);
        s->vst->time_base = c->time_base;
        s->vst->avg_frame_rate = c->framerate;
        s->vst->sample_aspect_ratio = c->sample_aspect_ratio;
        if ((ret = avcodec_parameters_from_context(s->vst->codecpar, c)) < 0)
            return codec_error(err, s->path, "copying encoder parameters", ret);
        if (o->rotation) {
            uint8_t *side = av_stream_new_side_data(s->vst, AV_PKT_DATA_DISPLAYMATRIX,
                                                    9 * sizeof(int32_t));
            if (!side)
                return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", s->path);
            /* FFmpeg 5.1's display matrix convention: set(angle) makes players turn the
             * picture `angle` degrees clockwise (ffmpeg -autorotate: transpose=clock). */
            av_display_rotation_set((int32_t *)side, o->rotation);
        }
    }
    return VTR_OK;
}

static vtr_status setup_audio(synth *s, vtr_error *err)
{
    const vtr_synth_options *o = s->o;
    const char *name = o->audio_codec;
    const char *encoder = !strcmp(name, "opus")     ? "libopus"
                          : !strcmp(name, "vorbis") ? "libvorbis"
                          : !strcmp(name, "aac")    ? "aac"
                          : !strcmp(name, "mp2")    ? "mp2"
                                                    : NULL;
    if (!encoder)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: unknown audio codec %s", s->path, name);
    vtr_status st = open_encoder(s, encoder, &s->aenc, err);
    if (st != VTR_OK)
        return st;
    AVCodecContext *c = s->aenc;
    int rate = o->audio_rate ? o->audio_rate : !strcmp(name, "opus") ? 48000 : 44100;
    c->sample_rate = rate;
    c->time_base = (AVRational){1, rate};
    av_channel_layout_default(&c->ch_layout, o->audio_channels);
    c->bit_rate = 96000;
    static const enum AVSampleFormat wanted[] = {AV_SAMPLE_FMT_FLTP, AV_SAMPLE_FMT_FLT,
                                                 AV_SAMPLE_FMT_S16};
    const enum AVSampleFormat *fmts = c->codec->sample_fmts;
    c->sample_fmt = AV_SAMPLE_FMT_NONE;
    for (int w = 0; w < 3 && c->sample_fmt == AV_SAMPLE_FMT_NONE; w++)
        for (int i = 0; fmts && fmts[i] != AV_SAMPLE_FMT_NONE; i++)
            if (fmts[i] == wanted[w])
                c->sample_fmt = wanted[w];
    if (c->sample_fmt == AV_SAMPLE_FMT_NONE)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s: %s takes no float or s16 samples",
                        s->path, encoder);
    if (s->oc->oformat->flags & AVFMT_GLOBALHEADER)
        c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    int ret = avcodec_open2(c, c->codec, NULL);
    if (ret < 0)
        return codec_error(err, s->path, "opening the audio encoder", ret);
    s->ast = avformat_new_stream(s->oc, NULL);
    if (!s->ast)
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", s->path);
    s->ast->time_base = c->time_base;
    if ((ret = avcodec_parameters_from_context(s->ast->codecpar, c)) < 0)
        return codec_error(err, s->path, "copying encoder parameters", ret);

    s->audio = av_frame_alloc();
    if (!s->audio)
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", s->path);
    s->audio->format = c->sample_fmt;
    s->audio->sample_rate = rate;
    s->audio->nb_samples = c->frame_size > 0 ? c->frame_size : 1024;
    if ((ret = av_channel_layout_copy(&s->audio->ch_layout, &c->ch_layout)) < 0 ||
        (ret = av_frame_get_buffer(s->audio, 0)) < 0)
        return codec_error(err, s->path, "allocating an audio frame", ret);
    /* as long as the video: from the first frame's start to the last frame's end */
    AVRational vtb = video_time_base(o);
    int64_t video_ticks = frame_pts(o, o->frames - 1) + frame_duration(o, o->frames - 1) -
                          frame_pts(o, 0);
    s->audio_total = av_rescale_q(video_ticks, vtb, c->time_base);
    return VTR_OK;
}

/* ---- packed B-frames ------------------------------------------------------------ */

/* Writes one AVI chunk holding a (size a) and b (size b, may be 0): the next display
 * slot. The first chunk carries the DivX user data that marks the stream as packed. */
static vtr_status write_chunk(synth *s, const uint8_t *a, int na, const uint8_t *b, int nb,
                              bool key, vtr_error *err)
{
    static const uint8_t divx[] = {0, 0, 1, 0xB2, 'D', 'i', 'v', 'X', '5', '0', '3',
                                   'b', '1', '3', '9', '3', 'p'};
    int at = -1; /* before the first VOP start code of the first chunk */
    for (int i = 0; s->chunks == 0 && i + 3 < na && at < 0; i++)
        if (!a[i] && !a[i + 1] && a[i + 2] == 1 && a[i + 3] == 0xB6)
            at = i;
    int extra = at >= 0 ? (int)sizeof divx : 0;
    AVPacket *pkt = av_packet_alloc();
    int ret = pkt ? av_new_packet(pkt, na + nb + extra) : AVERROR(ENOMEM);
    if (ret < 0) {
        av_packet_free(&pkt);
        return codec_error(err, s->path, "packing B-frames", ret);
    }
    int head = at >= 0 ? at : na;
    memcpy(pkt->data, a, (size_t)head);
    if (extra)
        memcpy(pkt->data + head, divx, sizeof divx);
    memcpy(pkt->data + head + extra, a + head, (size_t)(na - head));
    if (nb)
        memcpy(pkt->data + na + extra, b, (size_t)nb);
    AVRational vtb = video_time_base(s->o);
    pkt->pts = pkt->dts = av_rescale_q(frame_pts(s->o, 0) + s->chunks, vtb, s->vst->time_base);
    pkt->duration = av_rescale_q(1, vtb, s->vst->time_base);
    pkt->flags = key ? AV_PKT_FLAG_KEY : 0;
    pkt->stream_index = s->vst->index;
    s->chunks++;
    ret = av_interleaved_write_frame(s->oc, pkt);
    av_packet_free(&pkt);
    return ret < 0 ? codec_error(err, s->path, "writing a packet", ret) : VTR_OK;
}

/* The N-VOP that fills the display slot of a packed P-frame: a P-VOP header with
 * vop_coded 0, its time increment as wide as the encoder's (log2 of its time base). */
static vtr_status write_nvop(synth *s, vtr_error *err)
{
    int bits = av_log2(s->venc->time_base.den - 1) + 1;
    uint8_t v[8] = {0, 0, 1, 0xB6};
    /* 01 P, 0 modulo time base, 1 marker, increment 0, 1 marker, 0 vop_coded, then the
     * stuffing 0 1...1 to the byte boundary */
    uint32_t word = 0x5u << (32 - 4); /* 0101 */
    int n = 4 + bits;
    word |= 0x2u << (32 - n - 2); /* 10 */
    n += 2;
    int stuff = 8 - n % 8;
    word |= ((1u << (stuff - 1)) - 1) << (32 - n - stuff);
    n += stuff;
    for (int i = 0; i < n / 8; i++)
        v[4 + i] = (uint8_t)(word >> (24 - 8 * i));
    return write_chunk(s, v, 4 + n / 8, NULL, 0, false, err);
}

/* Takes the encoder's packets in decode order (I0 P3 B1 B2 P6 B4 B5 ...) and writes one
 * per display slot: I0 | P3 B1 | B2 | N-VOP | P6 B4 | B5 | N-VOP; pkt NULL: the end. */
static vtr_status write_packed(synth *s, AVPacket *pkt, vtr_error *err)
{
    vtr_status st = VTR_OK;
    bool b = pkt && vtr_packet_is_b_picture(AV_CODEC_ID_MPEG4, pkt);
    if (!b && s->held) {
        st = write_chunk(s, s->held->data, s->held->size, NULL, 0,
                         s->held->flags & AV_PKT_FLAG_KEY, err);
        av_packet_free(&s->held);
    }
    if (st == VTR_OK && !b && s->nvop_owed) {
        st = write_nvop(s, err);
        s->nvop_owed = false;
    }
    if (st != VTR_OK || !pkt)
        return st;
    if (!b) {
        if (!(s->held = av_packet_clone(pkt)))
            return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", s->path);
        return VTR_OK;
    }
    if (!s->held)
        return write_chunk(s, pkt->data, pkt->size, NULL, 0, false, err);
    st = write_chunk(s, s->held->data, s->held->size, pkt->data, pkt->size,
                     s->held->flags & AV_PKT_FLAG_KEY, err);
    av_packet_free(&s->held);
    s->nvop_owed = true;
    return st;
}

/* Sends frame (NULL: flush) to enc and writes every packet that comes out. */
static vtr_status encode(synth *s, AVCodecContext *enc, AVStream *stream, AVFrame *frame,
                         vtr_error *err)
{
    int ret = avcodec_send_frame(enc, frame);
    if (ret < 0)
        return codec_error(err, s->path, "encoding", ret);
    for (;;) {
        ret = avcodec_receive_packet(enc, s->pkt);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF)
            return VTR_OK;
        if (ret < 0)
            return codec_error(err, s->path, "encoding", ret);
        if (enc == s->venc && s->pkt->duration <= 0) {
            /* give the container exact frame durations, the last one included */
            int64_t first = frame_pts(s->o, 0);
            int i = 0;
            if (s->o->pts) {
                int lo = 0, hi = s->o->frames - 1;
                while (lo < hi) {
                    int mid = (lo + hi + 1) / 2;
                    if (frame_pts(s->o, mid) <= s->pkt->pts)
                        lo = mid;
                    else
                        hi = mid - 1;
                }
                i = lo;
            } else {
                i = (int)(s->pkt->pts - first);
            }
            if (i >= 0 && i < s->o->frames)
                s->pkt->duration = frame_duration(s->o, i);
        }
        if (enc == s->venc && s->o->packed_b_frames) {
            vtr_status st = write_packed(s, s->pkt, err);
            av_packet_unref(s->pkt);
            if (st != VTR_OK)
                return st;
            continue;
        }
        av_packet_rescale_ts(s->pkt, enc->time_base, stream->time_base);
        s->pkt->stream_index = stream->index;
        ret = av_interleaved_write_frame(s->oc, s->pkt);
        if (ret < 0)
            return codec_error(err, s->path, "writing a packet", ret);
    }
}

/* Encodes the tone up to sample `until` (counted from the first sample). */
static vtr_status encode_audio_until(synth *s, int64_t until, vtr_error *err)
{
    const vtr_synth_options *o = s->o;
    AVCodecContext *c = s->aenc;
    int64_t start = llround(o->start_time * c->sample_rate);
    if (until > s->audio_total)
        until = s->audio_total;
    while (s->audio_next < until) {
        int ret = av_frame_make_writable(s->audio);
        if (ret < 0)
            return codec_error(err, s->path, "audio frame", ret);
        int n = s->audio->nb_samples;
        if (!(c->codec->capabilities & AV_CODEC_CAP_VARIABLE_FRAME_SIZE) ||
            s->audio_total - s->audio_next >= n) {
            /* full frames; the encoder pads the last one */
        } else {
            n = (int)(s->audio_total - s->audio_next);
        }
        int channels = c->ch_layout.nb_channels;
        for (int i = 0; i < s->audio->nb_samples; i++) {
            int64_t k = s->audio_next + i;
            double x = k < s->audio_total
                           ? 0.5 * sin(2 * M_PI * o->tone_hz * (double)k / c->sample_rate)
                           : 0.0;
            for (int ch = 0; ch < channels; ch++) {
                switch (c->sample_fmt) {
                case AV_SAMPLE_FMT_FLTP: ((float *)s->audio->data[ch])[i] = (float)x; break;
                case AV_SAMPLE_FMT_FLT:
                    ((float *)s->audio->data[0])[i * channels + ch] = (float)x;
                    break;
                default:
                    ((int16_t *)s->audio->data[0])[i * channels + ch] = (int16_t)lrint(x * 32767);
                    break;
                }
            }
        }
        s->audio->pts = start + s->audio_next;
        int saved = s->audio->nb_samples;
        s->audio->nb_samples = n;
        vtr_status st = encode(s, c, s->ast, s->audio, err);
        s->audio->nb_samples = saved;
        if (st != VTR_OK)
            return st;
        s->audio_next += n;
    }
    return VTR_OK;
}

static vtr_status draw(synth *s, int i, vtr_error *err)
{
    int ret = av_frame_make_writable(s->yuv);
    if (ret < 0)
        return codec_error(err, s->path, "video frame", ret);
    AVFrame *f = s->yuv;
    if (s->o->draw) {
        if ((ret = av_frame_make_writable(s->rgb)) < 0)
            return codec_error(err, s->path, "video frame", ret);
        s->o->draw(s->o->draw_ctx, i, s->rgb->data[0], (size_t)s->rgb->linesize[0],
                   s->o->width, s->o->height);
        sws_scale(s->rgb_sws, (const uint8_t *const *)s->rgb->data, s->rgb->linesize, 0,
                  s->o->height, f->data, f->linesize);
    } else {
        vtr_synth_draw_yuv420(f->data[0], f->linesize[0], f->data[1], f->linesize[1],
                              f->data[2], f->linesize[2], s->o->width, s->o->height,
                              s->o->first_index + i, i);
    }
    if (s->conv) {
        if ((ret = av_frame_make_writable(s->conv)) < 0)
            return codec_error(err, s->path, "video frame", ret);
        sws_scale(s->sws, (const uint8_t *const *)f->data, f->linesize, 0, s->o->height,
                  s->conv->data, s->conv->linesize);
    }
    return VTR_OK;
}

/* libheif's writer: appends to the FILE at userdata. */
static struct heif_error write_heif_bytes(struct heif_context *ctx, const void *data, size_t size,
                                          void *userdata)
{
    (void)ctx;
    if (fwrite(data, 1, size, userdata) != size)
        return (struct heif_error){heif_error_Encoding_error,
                                   heif_suberror_Cannot_write_output_data, "write failed"};
    return (struct heif_error){heif_error_Ok, heif_suberror_Unspecified, "ok"};
}

/* A HEIF image: the picture in RGB, coded by libheif in HEVC (a phone's HEIC photo; its
 * x265 encoder) or AV1 (an AVIF; libaom); VTR_ERR_UNSUPPORTED without that encoder. */
static vtr_status write_heif(synth *s, bool av1, vtr_error *err)
{
    vtr_status st = setup_frames(s, AV_PIX_FMT_RGB24, err);
    if (st == VTR_OK)
        st = draw(s, 0, err);
    if (st != VTR_OK)
        return st;
    int w = s->o->width, h = s->o->height;
    struct heif_context *ctx = heif_context_alloc();
    struct heif_encoder *enc = NULL;
    struct heif_image *img = NULL;
    if (!ctx)
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", s->path);
    struct heif_error e = heif_context_get_encoder_for_format(
        ctx, av1 ? heif_compression_AV1 : heif_compression_HEVC, &enc);
    if (e.code != heif_error_Ok) {
        st = vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s: libheif has no %s encoder: %s", s->path,
                      av1 ? "AV1" : "HEVC", e.message);
        goto end;
    }
    e = heif_encoder_set_lossy_quality(enc, 90);
    if (e.code == heif_error_Ok)
        e = heif_image_create(w, h, heif_colorspace_RGB, heif_chroma_interleaved_RGB, &img);
    if (e.code == heif_error_Ok)
        e = heif_image_add_plane(img, heif_channel_interleaved, w, h, 8);
    if (e.code == heif_error_Ok) {
        int stride;
        uint8_t *plane = heif_image_get_plane(img, heif_channel_interleaved, &stride);
        for (int y = 0; y < h; y++)
            memcpy(plane + (size_t)y * (size_t)stride,
                   s->conv->data[0] + (size_t)y * (size_t)s->conv->linesize[0], (size_t)w * 3);
        struct heif_encoding_options *eo = heif_encoding_options_alloc();
        if (eo && s->o->orientation)
            eo->image_orientation = (enum heif_orientation)s->o->orientation;
        e = eo ? heif_context_encode_image(ctx, img, enc, eo, NULL)
               : (struct heif_error){heif_error_Memory_allocation_error, heif_suberror_Unspecified,
                                     "out of memory"};
        heif_encoding_options_free(eo);
    }
    if (e.code != heif_error_Ok) {
        st = vtr_fail(err, VTR_ERR_CODEC, "%s: encoding the image: %s", s->path, e.message);
        goto end;
    }
    vtr_atomic_file file;
    if ((st = vtr_atomic_open(&file, s->path, err)) != VTR_OK)
        goto end;
    struct heif_writer writer = {.writer_api_version = 1, .write = write_heif_bytes};
    e = heif_context_write(ctx, &writer, file.fp);
    if (e.code != heif_error_Ok) {
        vtr_atomic_abort(&file);
        st = vtr_fail(err, VTR_ERR_IO, "%s: %s", s->path, e.message);
        goto end;
    }
    st = vtr_atomic_commit(&file, err);
end:
    heif_image_release(img);
    heif_encoder_release(enc);
    heif_context_free(ctx);
    return st;
}

static vtr_status write_image(synth *s, const char *codec, vtr_error *err)
{
    if (!strcmp(codec, "heif") || !strcmp(codec, "avif"))
        return write_heif(s, !strcmp(codec, "avif"), err);
    vtr_status st = setup_video(s, codec, true, err);
    if (st != VTR_OK)
        return st;
    if ((st = draw(s, 0, err)) != VTR_OK)
        return st;
    AVFrame *frame = s->conv ? s->conv : s->yuv;
    frame->pts = 0;
    int ret = avcodec_send_frame(s->venc, frame);
    if (ret >= 0)
        ret = avcodec_send_frame(s->venc, NULL);
    if (ret >= 0)
        ret = avcodec_receive_packet(s->venc, s->pkt);
    if (ret < 0)
        return codec_error(err, s->path, "encoding the image", ret);
    vtr_atomic_file file;
    if ((st = vtr_atomic_open(&file, s->path, err)) != VTR_OK)
        return st;
    st = vtr_write_all(file.fp, s->pkt->data, (size_t)s->pkt->size, s->path, err);
    if (st != VTR_OK) {
        vtr_atomic_abort(&file);
        return st;
    }
    return vtr_atomic_commit(&file, err);
}

static vtr_status write_video(synth *s, const char *codec, vtr_error *err)
{
    const vtr_synth_options *o = s->o;
    char *tmp = NULL;
    bool opened = false;
    vtr_status st = VTR_OK;
    /* .vob: the DVD program stream (libavformat's guess from the extension is SVCD's) */
    const char *format = has_extension(s->path, "vob") ? "vob" : NULL;
    int ret = avformat_alloc_output_context2(&s->oc, NULL, format, s->path);
    if (ret < 0 || !s->oc)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: no container for this extension: %s",
                        s->path, av_err2str(ret));
    s->oc->flags |= AVFMT_FLAG_BITEXACT; /* no random ids (Matroska) or version tags */
    /* an MPEG program stream at a DVD's rate (libavformat's guess, from encoders with no
     * bit rate, underflows the decoder's buffer at every large picture) */
    if (!strcmp(s->oc->oformat->name, "mpeg") || !strcmp(s->oc->oformat->name, "vob"))
        av_opt_set_int(s->oc->priv_data, "muxrate", 10080000, 0);
    if ((st = setup_video(s, codec, false, err)) != VTR_OK)
        goto end;
    bool audio = o->audio_codec && strcmp(o->audio_codec, "none");
    if (audio && (st = setup_audio(s, err)) != VTR_OK)
        goto end;

    size_t n = strlen(s->path) + 32;
    tmp = malloc(n);
    if (!tmp) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", s->path);
        goto end;
    }
    snprintf(tmp, n, "%s.tmp.%ld", s->path, (long)getpid());
    if ((ret = avio_open(&s->oc->pb, tmp, AVIO_FLAG_WRITE)) < 0) {
        st = vtr_fail(err, VTR_ERR_IO, "%s: %s", s->path, av_err2str(ret));
        goto end;
    }
    opened = true;
    if ((ret = avformat_write_header(s->oc, NULL)) < 0) {
        st = codec_error(err, s->path, "writing the header", ret);
        goto end;
    }
    AVRational vtb = video_time_base(o);
    for (int i = 0; i < o->frames; i++) {
        if (audio) {
            /* interleave: the audio up to the end of this frame first */
            int64_t end_ticks = frame_pts(o, i) + frame_duration(o, i) - frame_pts(o, 0);
            int64_t until = av_rescale_q(end_ticks, vtb, s->aenc->time_base);
            if ((st = encode_audio_until(s, until, err)) != VTR_OK)
                goto end;
        }
        if ((st = draw(s, i, err)) != VTR_OK)
            goto end;
        AVFrame *frame = s->conv ? s->conv : s->yuv;
        frame->pts = frame_pts(o, i);
        if ((st = encode(s, s->venc, s->vst, frame, err)) != VTR_OK)
            goto end;
    }
    if ((st = encode(s, s->venc, s->vst, NULL, err)) != VTR_OK)
        goto end;
    if (o->packed_b_frames && (st = write_packed(s, NULL, err)) != VTR_OK)
        goto end;
    if (audio) {
        if ((st = encode_audio_until(s, s->audio_total, err)) != VTR_OK ||
            (st = encode(s, s->aenc, s->ast, NULL, err)) != VTR_OK)
            goto end;
    }
    if ((ret = av_write_trailer(s->oc)) < 0) {
        st = codec_error(err, s->path, "writing the trailer", ret);
        goto end;
    }
    ret = avio_closep(&s->oc->pb);
    opened = false;
    if (ret < 0) {
        st = vtr_fail(err, VTR_ERR_IO, "%s: %s", s->path, av_err2str(ret));
        goto end;
    }
    if (rename(tmp, s->path) != 0)
        st = vtr_fail_errno(err, "%s: rename", s->path);
end:
    if (opened)
        avio_closep(&s->oc->pb);
    if (tmp) {
        if (st != VTR_OK)
            unlink(tmp);
        free(tmp);
    }
    return st;
}

vtr_status vtr_synth_write(const char *path, const vtr_synth_options *o, vtr_error *err)
{
    const char *codec = o->codec ? o->codec : codec_for_path(path);
    vtr_status st = check_options(path, o, codec, err);
    if (st != VTR_OK)
        return st;
    synth s = {.path = path, .o = o};
    s.pkt = av_packet_alloc();
    if (!s.pkt) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
        goto end;
    }
    if (is_image_codec(codec))
        st = write_image(&s, codec, err);
    else
        st = write_video(&s, codec, err);
end:
    avcodec_free_context(&s.venc);
    avcodec_free_context(&s.aenc);
    av_frame_free(&s.yuv);
    av_frame_free(&s.conv);
    av_frame_free(&s.audio);
    av_frame_free(&s.rgb);
    av_packet_free(&s.pkt);
    av_packet_free(&s.held);
    sws_freeContext(s.sws);
    sws_freeContext(s.rgb_sws);
    avformat_free_context(s.oc);
    return st;
}
