#define _POSIX_C_SOURCE 200809L
#include "test_decode_fixtures.h"

#include <jansson.h>
#include <libavformat/avformat.h>
#include <libavutil/log.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "decode/orientation.h"

const char *const fixture_images[] = {"png",  "jpeg", "webp", "bmp", "tiff",
                                      "heif", "avif", "gif",  NULL};

static decode_fixture fixtures[32];
static int n_fixtures;

void fixture_quiet(void)
{
    av_log_set_level(AV_LOG_QUIET);
}

static void describe(decode_fixture *f)
{
    vtr_synth_options *o = &f->opt;
    vtr_synth_defaults(o);
    const char *n = f->name;
    if (!strcmp(n, "h264")) {
        /* B-frames (pyramid) and GOPs long enough that sparse targets jump */
        o->frames = 120;
        o->gop = 30;
        o->b_frames = 3;
    } else if (!strcmp(n, "h264_mkv")) {
        /* Matroska numbers no frames: with B-frames a jump loses the frame numbers; GOPs
         * of 2 s, so that sparse targets make one decoder jump anyway */
        o->frames = 150;
        o->gop = 50;
        o->b_frames = 3;
    } else if (!strcmp(n, "h264_cut")) {
        /* cut mid-GOP (keyframes at 0, 12, 24, ...) out of a clip with B-frames */
        o->codec = "h264";
        o->frames = 100;
        o->gop = 12;
        o->b_frames = 2;
        f->cut = 17;
    } else if (!strcmp(n, "h264_avi")) {
        /* AVI keeps no pts: B-frames (pyramid) are placed by their picture order counts */
        o->codec = "h264";
        o->frames = 120;
        o->gop = 30;
        o->b_frames = 3;
    } else if (!strcmp(n, "mpeg4")) {
        /* open GOPs: B-frames before each keyframe refer to the previous GOP */
        o->codec = "mpeg4";
        o->frames = 60;
        o->gop = 12;
        o->b_frames = 2;
    } else if (!strcmp(n, "mpeg4_avi") || !strcmp(n, "divx_avi")) {
        /* AVI stores no pts: B-frames are ordered from the picture types; DivX and Xvid
         * pack them */
        o->codec = "mpeg4";
        o->frames = 50;
        o->gop = 12;
        o->b_frames = 2;
        o->packed_b_frames = !strcmp(n, "divx_avi");
    } else if (!strcmp(n, "vp9")) {
        o->frames = 60;
        o->gop = 15;
        o->audio_codec = "opus"; /* Opus pre-skip shifts the video to start at 7 ms */
    } else if (!strcmp(n, "vfr")) {
        static const int gaps[] = {40, 40, 20, 100, 33, 7, 60, 40, 200, 40};
        o->frames = 40;
        o->gop = 10;
        o->b_frames = 2;
        int64_t t = 0;
        for (int i = 0; i < o->frames; i++) {
            f->pts_ms[i] = t;
            t += gaps[i % 10];
        }
        o->pts = f->pts_ms;
    } else if (!strcmp(n, "start")) {
        o->frames = 50;
        o->gop = 12;
        o->b_frames = 2;
        o->start_time = 2.4;
    } else if (!strcmp(n, "start_webm")) {
        o->frames = 40;
        o->gop = 10;
        o->start_time = 1.5;
    } else if (!strncmp(n, "rot", 3)) {
        o->frames = 24;
        o->gop = 8;
        o->b_frames = 1;
        o->rotation = atoi(n + 3);
    } else if (!strcmp(n, "ts")) {
        /* MPEG-TS has no index: the reader makes its own (camcorders' AVCHD, broadcast) */
        o->frames = 120;
        o->gop = 30;
        o->b_frames = 3;
        o->audio_codec = "aac";
    } else if (!strcmp(n, "mpeg4_ts")) {
        o->codec = "mpeg4"; /* open GOPs, as broadcast MPEG-2 has */
        o->frames = 60;
        o->gop = 12;
        o->b_frames = 2;
    } else if (!strcmp(n, "mpeg2_ps")) {
        /* an MPEG program stream (DVD VOB, .mpg): no index, open GOPs, and a keyframe's
         * first packet of the container that begins with the tail of the frame before */
        o->codec = "mpeg2video";
        o->width = 352; /* frames over the 2 KiB of a packet of the container, as on a DVD */
        o->height = 288;
        o->quality = 2;
        o->frames = 60;
        o->gop = 12;
        o->b_frames = 2;
        o->audio_codec = "mp2";
    } else if (!strcmp(n, "gif_anim")) {
        o->frames = 20; /* an animated GIF: a video */
    } else if (!strcmp(n, "audio")) {
        o->frames = 50;
        o->gop = 25;
        o->audio_codec = "aac";
    } else {
        /* images: a single frame showing index 7 */
        o->frames = 1;
        o->first_index = 7;
    }
}

static const char *file_name(const char *n)
{
    if (!strcmp(n, "h264_mkv"))
        return "h264.mkv";
    if (!strcmp(n, "h264_avi"))
        return "h264.avi";
    if (!strcmp(n, "h264_cut"))
        return "h264_cut.mov";
    if (!strcmp(n, "mpeg4"))
        return "mpeg4.mp4";
    if (!strcmp(n, "vp9"))
        return "vp9.webm";
    if (!strcmp(n, "mpeg4_avi"))
        return "mpeg4.avi";
    if (!strcmp(n, "divx_avi"))
        return "divx.avi";
    if (!strcmp(n, "start_webm"))
        return "start.webm";
    if (!strcmp(n, "ts"))
        return "h264.ts";
    if (!strcmp(n, "mpeg4_ts"))
        return "mpeg4.ts";
    if (!strcmp(n, "mpeg2_ps"))
        return "mpeg2.mpg";
    if (!strcmp(n, "png"))
        return "image.png";
    if (!strcmp(n, "jpeg"))
        return "image.jpg";
    if (!strcmp(n, "webp"))
        return "image.webp";
    if (!strcmp(n, "bmp"))
        return "image.bmp";
    if (!strcmp(n, "tiff"))
        return "image.tif";
    if (!strcmp(n, "heif"))
        return "image.heic";
    if (!strcmp(n, "avif"))
        return "image.avif";
    if (!strcmp(n, "gif"))
        return "image.gif"; /* one picture */
    if (!strcmp(n, "gif_anim"))
        return "animated.gif";
    static char buf[8][64];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s.mp4", n);
    return b;
}

static void remux(const char *src, const char *dst, const char *key, const char *value,
                  double back);

decode_fixture *fixture_get(const char *name)
{
    fixture_quiet();
    for (int i = 0; i < n_fixtures; i++)
        if (!strcmp(fixtures[i].name, name))
            return &fixtures[i];
    CHECK(n_fixtures < (int)(sizeof fixtures / sizeof fixtures[0]));
    decode_fixture *f = &fixtures[n_fixtures];
    memset(f, 0, sizeof *f);
    f->name = name;
    describe(f);
    char *path = strdup(test_path(file_name(name)));
    CHECK(path);
    vtr_error err;
    vtr_error_clear(&err);
    const char *whole = f->cut ? test_path("cut_source.mp4") : path;
    vtr_status st = vtr_synth_write(whole, &f->opt, &err);
    if (st == VTR_ERR_UNSUPPORTED) {
        free(path);
        test_skip(err.msg); /* an encoder this FFmpeg build lacks */
    }
    CHECK_OK(st);
    if (f->cut) {
        remux(whole, path, NULL, NULL, vtr_synth_frame_time(&f->opt, f->cut));
        f->opt.first_index += f->cut;
        f->opt.frames -= f->cut;
    }
    f->path = path;
    n_fixtures++;
    return f;
}

/* fixture_remux, every timestamp moved back by `back` seconds. */
static void remux(const char *src, const char *dst, const char *key, const char *value, double back)
{
    AVFormatContext *in = NULL, *out = NULL;
    CHECK(avformat_open_input(&in, src, NULL, NULL) >= 0);
    CHECK(avformat_find_stream_info(in, NULL) >= 0);
    CHECK(avformat_alloc_output_context2(&out, NULL, NULL, dst) >= 0);
    for (unsigned i = 0; i < in->nb_streams; i++) {
        AVStream *st = avformat_new_stream(out, NULL);
        CHECK(st && avcodec_parameters_copy(st->codecpar, in->streams[i]->codecpar) >= 0);
        st->codecpar->codec_tag = 0;
        st->time_base = in->streams[i]->time_base;
        st->avg_frame_rate = in->streams[i]->avg_frame_rate;
    }
    AVDictionary *opts = NULL;
    if (key)
        av_dict_set(&opts, key, value, 0);
    CHECK(avio_open(&out->pb, dst, AVIO_FLAG_WRITE) >= 0);
    CHECK(avformat_write_header(out, &opts) >= 0);
    av_dict_free(&opts);
    AVPacket *pkt = av_packet_alloc();
    CHECK(pkt);
    while (av_read_frame(in, pkt) >= 0) {
        int i = pkt->stream_index;
        av_packet_rescale_ts(pkt, in->streams[i]->time_base, out->streams[i]->time_base);
        int64_t shift = llround(back / av_q2d(out->streams[i]->time_base));
        pkt->pts = pkt->pts == AV_NOPTS_VALUE ? pkt->pts : pkt->pts - shift;
        pkt->dts = pkt->dts == AV_NOPTS_VALUE ? pkt->dts : pkt->dts - shift;
        pkt->pos = -1;
        CHECK(av_interleaved_write_frame(out, pkt) >= 0);
    }
    av_packet_free(&pkt);
    CHECK(av_write_trailer(out) >= 0);
    CHECK(avio_closep(&out->pb) >= 0);
    avformat_free_context(out);
    avformat_close_input(&in);
}

void fixture_remux(const char *src, const char *dst, const char *key, const char *value)
{
    remux(src, dst, key, value, 0);
}

char *fixture_cues_in_front(const decode_fixture *vp9)
{
    char *front = strdup(test_path("cues_front.webm"));
    CHECK(front);
    fixture_remux(vp9->path, front, "reserve_index_space", "4096");
    return front;
}

/* fixture_decode with o.threads = threads (0: one per core). */
static void decode_on(const char *path, const vtr_sampler *s, bool straight,
                      const vtr_geometry_request *g, int threads, vtr_decoded_item *out)
{
    vtr_decode_options o;
    vtr_decode_options_defaults(&o);
    o.sampler = *s;
    o.straight = straight;
    o.threads = threads;
    if (g)
        o.geometry = *g;
    vtr_error err;
    vtr_error_clear(&err);
    CHECK_OK(vtr_decode_item(path, &o, NULL, out, &err));
    CHECK_EQ_INT(out->frames.ndim, 4);
    CHECK_EQ_INT(out->frames.shape[3], 3);
}

void fixture_decode(const char *path, const vtr_sampler *s, bool straight,
                    const vtr_geometry_request *g, vtr_decoded_item *out)
{
    decode_on(path, s, straight, g, 0, out);
}

int fixture_check_stretches(const char *path, const vtr_sampler *s)
{
    char mode[64];
    vtr_sampler_describe(s, mode, sizeof mode);
    vtr_decoded_item one, four;
    decode_on(path, s, false, NULL, 1, &one);
    decode_on(path, s, false, NULL, 4, &four);
    json_t *d1 = json_object_get(one.meta, "decode"), *d4 = json_object_get(four.meta, "decode");
    CHECK_EQ_INT(json_integer_value(json_object_get(d1, "stretches")), 1);
    int n = (int)json_integer_value(json_object_get(d4, "stretches"));
    CHECK_MSG(n >= 1 && n <= 4, "%s %s: %d stretches", path, mode, n);
    CHECK_EQ_INT(four.frames.dtype, one.frames.dtype);
    CHECK_EQ_INT(four.frames.shape[0], one.frames.shape[0]);
    CHECK_MSG(memcmp(four.frames.data, one.frames.data, vtr_tensor_nbytes(&one.frames)) == 0,
              "%s %s: %d stretches give other frames than one", path, mode, n);
    json_object_del(one.meta, "decode");
    json_object_del(four.meta, "decode");
    CHECK_MSG(json_equal(one.meta, four.meta), "%s %s: %d stretches give other metadata", path,
              mode, n);
    vtr_decoded_item_free(&one);
    vtr_decoded_item_free(&four);
    return n;
}

size_t fixture_frame_bytes(const vtr_decoded_item *it)
{
    return (size_t)it->frames.shape[1] * it->frames.shape[2] * 3;
}

const uint8_t *fixture_frame(const vtr_decoded_item *it, int64_t k)
{
    return (const uint8_t *)it->frames.data + (size_t)k * fixture_frame_bytes(it);
}

int fixture_index(const vtr_decoded_item *it, int64_t k, int rotation)
{
    int w = (int)it->frames.shape[2], h = (int)it->frames.shape[1];
    const uint8_t *rgb = fixture_frame(it, k);
    if (!rotation)
        return vtr_synth_read_index(rgb, w, h, (size_t)w * 3);
    /* turn the displayed picture back: treat it as coded and show it rotated by
     * 360 - rotation degrees clockwise */
    vtr_orientation back = vtr_orientation_from_rotation(360 - rotation);
    int cw, ch;
    vtr_orientation_display_size(&back, w, h, &cw, &ch);
    uint8_t *coded = malloc((size_t)cw * ch * 3);
    CHECK(coded);
    vtr_orientation_copy_rgb(&back, rgb, w, h, (size_t)w * 3, 0, 0, cw, ch, coded);
    int index = vtr_synth_read_index(coded, cw, ch, (size_t)cw * 3);
    free(coded);
    return index;
}

/* The stored pixel (sx, sy) that EXIF orientation v shows at (x, y). */
static void exif_source(int v, int x, int y, int w, int h, int *sx, int *sy)
{
    switch (v) {
    case 2: *sx = w - 1 - x; *sy = y; break;
    case 3: *sx = w - 1 - x; *sy = h - 1 - y; break;
    case 4: *sx = x; *sy = h - 1 - y; break;
    case 5: *sx = y; *sy = x; break;                 /* transpose */
    case 6: *sx = y; *sy = h - 1 - x; break;         /* 90 degrees clockwise */
    case 7: *sx = w - 1 - y; *sy = h - 1 - x; break; /* transverse */
    case 8: *sx = w - 1 - y; *sy = x; break;         /* 90 degrees counter-clockwise */
    default: *sx = x; *sy = y; break;
    }
}

void fixture_check_exif_display(const vtr_decoded_item *shown, const uint8_t *stored, int w,
                                int h, int exif, const char *what)
{
    /* clockwise turn per EXIF value; -1: a mirror image (a turn plus a flip, whose
     * rotation depends on the flip chosen) */
    static const int turn[9] = {0, 0, -1, 180, -1, -1, 90, -1, 270};
    fixture_check_exif_pixels(shown, stored, w, h, exif, what);
    json_int_t rotation = json_integer_value(json_object_get(shown->meta, "rotation"));
    bool mirrored = json_boolean_value(json_object_get(shown->meta, "mirrored"));
    CHECK_MSG(turn[exif] < 0 ? mirrored : !mirrored && rotation == turn[exif],
              "%s (orientation %d): rotation %lld, mirrored %d", what, exif,
              (long long)rotation, mirrored);
    CHECK_EQ_INT(json_integer_value(json_object_get(shown->meta, "source_width")), w);
}

void fixture_check_exif_pixels(const vtr_decoded_item *shown, const uint8_t *stored, int w, int h,
                               int exif, const char *what)
{
    CHECK(exif >= 1 && exif <= 8);
    int dw = (int)shown->frames.shape[2], dh = (int)shown->frames.shape[1];
    bool turned = exif >= 5;
    CHECK_MSG(shown->frames.shape[0] == 1 && dw == (turned ? h : w) && dh == (turned ? w : h),
              "%s (orientation %d): %dx%d shown, %dx%d stored", what, exif, dw, dh, w, h);
    const uint8_t *a = fixture_frame(shown, 0);
    for (int y = 0; y < dh; y++)
        for (int x = 0; x < dw; x++) {
            int sx, sy;
            exif_source(exif, x, y, w, h, &sx, &sy);
            CHECK_MSG(memcmp(a + ((size_t)y * dw + x) * 3, stored + ((size_t)sy * w + sx) * 3,
                             3) == 0,
                      "%s (orientation %d): shown (%d, %d) is not stored (%d, %d)", what, exif,
                      x, y, sx, sy);
        }
}

int64_t fixture_meta_int(const vtr_decoded_item *it, const char *key, int64_t k)
{
    json_t *a = json_object_get(it->meta, key);
    CHECK_MSG(json_is_array(a), "metadata %s is not an array", key);
    json_t *v = json_array_get(a, (size_t)k);
    CHECK_MSG(json_is_integer(v), "metadata %s[%lld] is not an integer", key, (long long)k);
    return json_integer_value(v);
}

double fixture_meta_real(const vtr_decoded_item *it, const char *key, int64_t k)
{
    json_t *a = json_object_get(it->meta, key);
    CHECK_MSG(json_is_array(a), "metadata %s is not an array", key);
    json_t *v = json_array_get(a, (size_t)k);
    CHECK_MSG(json_is_number(v), "metadata %s[%lld] is not a number", key, (long long)k);
    return json_number_value(v);
}
