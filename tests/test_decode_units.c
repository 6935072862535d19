/* The decode stage's pure parts: target formulas, presentation order, orientation and
 * output geometry, checked against hand-computed values. */
#define _POSIX_C_SOURCE 200809L
#include <libavutil/display.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "decode/frame_convert.h"
#include "decode/frame_sampler.h"
#include "decode/gif_still.h"
#include "decode/orientation.h"
#include "decode/packet_times.h"
#include "decode/presentation_order.h"
#include "decode/stretch_plan.h"
#include "decode/tiff_orientation.h"
#include "lib/file.h"
#include "tools/synth_video.h"

TEST(decode_sampler_uniform_targets)
{
    vtr_error err;
    vtr_sampler s = {.mode = VTR_SAMPLE_FRAMES, .n = 4};
    int64_t *t, n;
    /* t_i = start + floor(duration * (2i + 1) / (2N)) */
    CHECK_OK(vtr_sampler_targets(&s, 100, 1000, 1, 1000, VTR_SAMPLER_MAX_TARGETS, &t, &n, &err));
    CHECK_EQ_INT(n, 4);
    CHECK_EQ_INT(t[0], 225);
    CHECK_EQ_INT(t[1], 475);
    CHECK_EQ_INT(t[2], 725);
    CHECK_EQ_INT(t[3], 975);
    free(t);
    s.n = 3; /* 1000 / 6 = 166.67: rounded down */
    CHECK_OK(vtr_sampler_targets(&s, 0, 1000, 1, 1000, VTR_SAMPLER_MAX_TARGETS, &t, &n, &err));
    CHECK_EQ_INT(t[0], 166);
    CHECK_EQ_INT(t[1], 500);
    CHECK_EQ_INT(t[2], 833);
    free(t);
    s.n = 0;
    CHECK_FAILS(vtr_sampler_targets(&s, 0, 1000, 1, 1000, VTR_SAMPLER_MAX_TARGETS, &t, &n, &err),
                VTR_ERR_INVALID, "target");
}

TEST(decode_sampler_fps_targets)
{
    vtr_error err;
    vtr_sampler s = {.mode = VTR_SAMPLE_FPS, .fps_num = 3, .fps_den = 1};
    int64_t *t, n;
    /* 1 s at 3 fps: 0, 1/3, 2/3 s; a fourth at 1 s would not be < start + duration */
    CHECK_OK(vtr_sampler_targets(&s, 100, 1000, 1, 1000, VTR_SAMPLER_MAX_TARGETS, &t, &n, &err));
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(t[0], 100);
    CHECK_EQ_INT(t[1], 433);
    CHECK_EQ_INT(t[2], 766);
    free(t);
    /* NTSC rate in a 90 kHz time base: exactly 3003 ticks apart */
    s.fps_num = 30000;
    s.fps_den = 1001;
    CHECK_OK(vtr_sampler_targets(&s, 0, 90000, 1, 90000, VTR_SAMPLER_MAX_TARGETS, &t, &n, &err));
    CHECK_EQ_INT(n, 30);
    CHECK_EQ_INT(t[1], 3003);
    CHECK_EQ_INT(t[29], 29 * 3003);
    free(t);
    /* a zero duration still gives the first frame */
    CHECK_OK(vtr_sampler_targets(&s, 7, 0, 1, 90000, VTR_SAMPLER_MAX_TARGETS, &t, &n, &err));
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(t[0], 7);
    free(t);
}

TEST(decode_sampler_parse_rate)
{
    vtr_error err;
    int64_t num, den;
    CHECK_OK(vtr_sampler_parse_rate("29.97", &num, &den, &err));
    CHECK_EQ_INT(num, 2997);
    CHECK_EQ_INT(den, 100);
    CHECK_OK(vtr_sampler_parse_rate("30000/1001", &num, &den, &err));
    CHECK_EQ_INT(num, 30000);
    CHECK_EQ_INT(den, 1001);
    CHECK_OK(vtr_sampler_parse_rate("0.5", &num, &den, &err));
    CHECK_EQ_INT(num, 1);
    CHECK_EQ_INT(den, 2);
    CHECK_OK(vtr_sampler_parse_rate("25", &num, &den, &err));
    CHECK_EQ_INT(num, 25);
    CHECK_EQ_INT(den, 1);
    CHECK_FAILS(vtr_sampler_parse_rate("0", &num, &den, &err), VTR_ERR_INVALID, "rate");
    CHECK_FAILS(vtr_sampler_parse_rate("-2", &num, &den, &err), VTR_ERR_INVALID, "rate");
    CHECK_FAILS(vtr_sampler_parse_rate("2x", &num, &den, &err), VTR_ERR_INVALID, "rate");
    CHECK_FAILS(vtr_sampler_parse_rate("1/0", &num, &den, &err), VTR_ERR_INVALID, "rate");
}

/* A B-pyramid GOP in decode order: I0 P8 B4 b2 b6 P16 B12 b10 b14 ... */
TEST(decode_presentation_order_reordering)
{
    static const int64_t decode_order[] = {0,  8,  4,  2,  6,  16, 12, 10, 14,
                                           24, 20, 18, 22, 32, 28, 26, 30};
    const int n = (int)(sizeof decode_order / sizeof decode_order[0]);
    vtr_presentation_order po = {0};
    vtr_error err;
    for (int i = 0; i < n; i++)
        CHECK_OK(vtr_presentation_order_add(&po, decode_order[i] * 10, &err));
    /* 16 pts after 0 are known: not yet settled; the 17th settles it */
    CHECK(!vtr_presentation_order_settled(&po, 0));
    CHECK_OK(vtr_presentation_order_add(&po, 400, &err));
    CHECK(vtr_presentation_order_settled(&po, 0));
    CHECK(!vtr_presentation_order_settled(&po, 20));
    CHECK_EQ_INT(vtr_presentation_order_next(&po, 80), 100);
    CHECK_EQ_INT(vtr_presentation_order_next(&po, 85), 100);
    int64_t at;
    CHECK(vtr_presentation_order_at(&po, 119, &at));
    CHECK_EQ_INT(at, 100);
    CHECK(vtr_presentation_order_at(&po, 120, &at));
    CHECK_EQ_INT(at, 120);
    CHECK(!vtr_presentation_order_at(&po, -1, &at));
    CHECK_EQ_INT(vtr_presentation_order_rank(&po, 120), 6);
    /* a new pts fits unless it repeats or 17 known pts are later (a frame settled) */
    CHECK(vtr_presentation_order_fits(&po, 345));
    CHECK(!vtr_presentation_order_fits(&po, 120));
    CHECK(vtr_presentation_order_fits(&po, 25));  /* 16 known pts are later */
    CHECK(!vtr_presentation_order_fits(&po, 5)); /* 17 are */
    po.complete = true;
    CHECK(vtr_presentation_order_settled(&po, 1000));
    CHECK_EQ_INT(vtr_presentation_order_next(&po, 400), INT64_MAX);
    vtr_presentation_order_free(&po);
}

/* 20 segment-centre targets over 30 s (in ms) and each one's keyframe: every 10 s, or
 * only the ones listed (0-terminated after the first). */
static void msrvtt_targets(int64_t *targets, int64_t *keyframes, const int64_t *only)
{
    for (int i = 0; i < 20; i++) {
        targets[i] = 750 + 1500 * i;
        keyframes[i] = targets[i] / 10000 * 10000;
        if (only) {
            keyframes[i] = only[0];
            for (int k = 1; only[k]; k++)
                if (only[k] <= targets[i])
                    keyframes[i] = only[k];
        }
    }
}

/* Pushes MPEG-4 packets of picture types types[i] ('I', 'P' or 'B') with dts dts[i] (pts
 * unknown) through packet times and writes the pts they come out with to pts[] (every
 * packet: the last ones at the end of the stream); returns how many came out before the
 * end. */
static int times_of(const char *types, const int64_t *dts, int n, int64_t *pts)
{
    vtr_packet_times pt;
    vtr_packet_times_init(&pt, AV_CODEC_ID_MPEG4);
    AVPacket *pkt = av_packet_alloc(), *out = av_packet_alloc();
    CHECK(pkt && out);
    int got = 0, before_end = -1;
    for (int i = 0; i <= n; i++) {
        if (i < n) {
            CHECK(av_new_packet(pkt, 6) == 0);
            static const uint8_t vop[] = {0, 0, 1, 0xB6, 0, 0};
            memcpy(pkt->data, vop, 6);
            pkt->data[4] = (uint8_t)((types[i] == 'I' ? 0 : types[i] == 'P' ? 1 : 2) << 6);
            pkt->dts = dts[i];
            pkt->pts = AV_NOPTS_VALUE;
            vtr_error err;
            vtr_error_clear(&err);
            CHECK_OK(vtr_packet_times_push(&pt, pkt, &err));
        } else {
            before_end = got;
        }
        while (vtr_packet_times_pop(&pt, out, i == n)) {
            CHECK(got < n);
            pts[got++] = out->pts;
            av_packet_unref(out);
        }
    }
    CHECK_EQ_INT(got, n);
    av_packet_free(&pkt);
    av_packet_free(&out);
    vtr_packet_times_free(&pt);
    return before_end;
}

/* Decode times (AVI): a B-frame is shown at its dts, a reference frame at the next one's;
 * presentation times under the name of dts (Matroska's VfW mode from mp4): each frame at
 * its own, told by the first B-frame earlier than the reference frame before it; without
 * a B-frame to tell by, decode times (after 64 packets held, or at the end). */
TEST(decode_packet_times_told_by_b_frames)
{
    int64_t pts[80], want[80], dts[80];
    static const int64_t decode[] = {0, 1, 2, 3, 4, 5, 6};
    CHECK_EQ_INT(times_of("IPBBPBB", decode, 7, pts), 4);
    static const int64_t from_decode[] = {1, 4, 2, 3, 7, 5, 6};
    for (int i = 0; i < 7; i++)
        CHECK_EQ_INT(pts[i], from_decode[i]);
    static const int64_t shown[] = {0, 3, 1, 2, 6, 4, 5};
    CHECK_EQ_INT(times_of("IPBBPBB", shown, 7, pts), 7);
    for (int i = 0; i < 7; i++)
        CHECK_EQ_INT(pts[i], shown[i]);
    /* no B-frame: held until 64 packets, then decode times */
    char types[81];
    for (int i = 0; i < 80; i++) {
        types[i] = i % 12 ? 'P' : 'I';
        dts[i] = i;
        want[i] = i + 1;
    }
    types[80] = 0;
    CHECK_EQ_INT(times_of(types, dts, 80, pts), 79);
    for (int i = 0; i < 80; i++)
        CHECK_EQ_INT(pts[i], want[i]);
    CHECK_EQ_INT(times_of(types, dts, 20, pts), 0);
    for (int i = 0; i < 20; i++)
        CHECK_EQ_INT(pts[i], want[i]);
}

/* Stretches start only where the picker jumps to a new keyframe anyway, near equal shares
 * of the video decoded; one stretch when no split is worth it. */
TEST(decode_stretch_plan)
{
    int64_t t[20], kf[20], first[16];
    const int64_t nothing = VTR_STRETCH_JUMPS_LOSE_NOTHING; /* lost in a jump */
    msrvtt_targets(t, kf, NULL);
    /* GOPs of 10 s: jumps at targets 7 (11.25 s) and 13 (20.25 s); 9.75, 8.75, 9.25 s */
    CHECK_EQ_INT(vtr_stretch_plan(t, kf, 20, 0, 0.001, nothing, 2, first), 2);
    CHECK_EQ_INT(first[0], 0);
    CHECK_EQ_INT(first[1], 7);
    CHECK_EQ_INT(vtr_stretch_plan(t, kf, 20, 0, 0.001, nothing, 3, first), 3);
    CHECK_EQ_INT(first[1], 7);
    CHECK_EQ_INT(first[2], 13);
    /* where jumps lose frame numbers: split only if one decoder surely jumps anyway, at a
     * keyframe over a lead after the previous target (20 s, 1.25 s after 18.75 s; 10 s is
     * only 0.25 s after 9.75 s) */
    CHECK_EQ_INT(vtr_stretch_plan(t, kf, 20, 0, 0.001, 640, 2, first), 2);
    CHECK_EQ_INT(first[1], 7);
    CHECK_EQ_INT(vtr_stretch_plan(t, kf, 20, 0, 0.001, 1249, 3, first), 3);
    CHECK_EQ_INT(vtr_stretch_plan(t, kf, 20, 0, 0.001, 1250, 3, first), 1);
    CHECK_EQ_INT(vtr_stretch_plan(t, kf, 20, 0, 0.001, INT64_MAX, 3, first), 1);
    /* no more stretches than places to cut */
    CHECK_EQ_INT(vtr_stretch_plan(t, kf, 20, 0, 0.001, nothing, 16, first), 3);
    /* one thread, one target */
    CHECK_EQ_INT(vtr_stretch_plan(t, kf, 20, 0, 0.001, nothing, 1, first), 1);
    CHECK_EQ_INT(vtr_stretch_plan(t, kf, 1, 0, 0.001, nothing, 4, first), 1);
    CHECK_EQ_INT(first[0], 0);
    /* under two seconds of video in all (30 s at 0.03 ms a tick: 0.9 s) */
    CHECK_EQ_INT(vtr_stretch_plan(t, kf, 20, 0, 0.00003, nothing, 4, first), 1);
    /* a single jump, at 28 s, would leave 96% of the video to the first stretch */
    static const int64_t late[] = {0, 28000, 0};
    msrvtt_targets(t, kf, late);
    CHECK_EQ_INT(vtr_stretch_plan(t, kf, 20, 0, 0.001, nothing, 4, first), 1);
    /* no index, or a single keyframe: nowhere to cut */
    for (int i = 0; i < 20; i++)
        kf[i] = VTR_STRETCH_NO_KEYFRAME;
    CHECK_EQ_INT(vtr_stretch_plan(t, kf, 20, 0, 0.001, nothing, 4, first), 1);
    static const int64_t one[] = {0, 0};
    msrvtt_targets(t, kf, one);
    CHECK_EQ_INT(vtr_stretch_plan(t, kf, 20, 0, 0.001, nothing, 4, first), 1);
    /* a stream from 5 s whose index lists keyframes from 10 s on: the first target's cost
     * counts from the start, the first listed keyframe is a jump; shares of 27.8 s */
    for (int i = 0; i < 20; i++) {
        t[i] = 5750 + 1500 * i;
        kf[i] = t[i] < 10000 ? VTR_STRETCH_NO_KEYFRAME : t[i] / 10000 * 10000;
    }
    CHECK_EQ_INT(vtr_stretch_plan(t, kf, 20, 5000, 0.001, nothing, 2, first), 2);
    CHECK_EQ_INT(first[1], 10);
    CHECK_EQ_INT(vtr_stretch_plan(t, kf, 20, 5000, 0.001, nothing, 4, first), 4);
    CHECK_EQ_INT(first[1], 3);
    CHECK_EQ_INT(first[2], 10);
    CHECK_EQ_INT(first[3], 17);
}

/* A 3x2 picture with pixel value 10 * x + y in every channel. */
static void small_picture(uint8_t *rgb)
{
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 3; x++)
            memset(rgb + (y * 3 + x) * 3, 10 * x + y, 3);
}

static int pixel(const uint8_t *rgb, int w, int x, int y)
{
    return rgb[(y * w + x) * 3];
}

TEST(decode_orientation_from_display_matrix)
{
    int32_t m[9];
    static const int angles[] = {0, 90, 180, 270};
    for (int i = 0; i < 4; i++) {
        /* FFmpeg 5.1: set(a) is shown turned a degrees clockwise (autorotate) */
        av_display_rotation_set(m, angles[i]);
        vtr_orientation o = vtr_orientation_from_matrix(m);
        CHECK_EQ_INT(o.rotation, angles[i]);
        CHECK(!o.mirrored);
        CHECK_EQ_INT(o.transpose, angles[i] % 180 != 0);
    }
    av_display_rotation_set(m, 0);
    av_display_matrix_flip(m, 1, 0);
    vtr_orientation h = vtr_orientation_from_matrix(m);
    CHECK(h.mirrored);
    CHECK(!h.transpose);
    CHECK(h.flip_x != h.flip_y);
    vtr_orientation none = vtr_orientation_from_matrix(NULL);
    CHECK_EQ_INT(none.rotation, 0);
}

TEST(decode_tiff_orientation_tag)
{
    /* big-endian: the header, a word of pixels, then the directory at 12: ImageWidth,
     * Orientation 8 (SHORT), no next directory */
    static const char mm[] = "MM\0*\0\0\0\x0c"
                             "\xff\xff\xff\xff"
                             "\0\x02"
                             "\x01\x00\0\x03\0\0\0\x01\0\x01\0\0"
                             "\x01\x12\0\x03\0\0\0\x01\0\x08\0\0"
                             "\0\0\0\0";
    const size_t full = sizeof mm - 1, entry_end = full - 4;
    const char *path = test_path("tag.tif");
    test_write_file(path, mm, full);
    CHECK_EQ_INT(vtr_tiff_orientation(path), 8);
    /* every shorter file: the tag until its entry is cut */
    for (size_t n = 0; n < full; n++) {
        test_write_file(path, mm, n);
        CHECK_MSG(vtr_tiff_orientation(path) == (n >= entry_end ? 8 : 0), "%zu bytes", n);
    }
    char v[sizeof mm];
    memcpy(v, mm, sizeof mm);
    v[35] = 9; /* not an orientation */
    test_write_file(path, v, full);
    CHECK_EQ_INT(vtr_tiff_orientation(path), 0);
    memcpy(v, mm, sizeof mm);
    v[29] = 4; /* LONG, not SHORT */
    test_write_file(path, v, full);
    CHECK_EQ_INT(vtr_tiff_orientation(path), 0);
    memcpy(v, mm, sizeof mm);
    v[4] = 0x7f; /* the directory past the end */
    test_write_file(path, v, full);
    CHECK_EQ_INT(vtr_tiff_orientation(path), 0);
    memcpy(v, mm, sizeof mm);
    v[0] = v[1] = 'I'; /* little-endian: the numbers read otherwise */
    test_write_file(path, v, full);
    CHECK_EQ_INT(vtr_tiff_orientation(path), 0);
    CHECK_EQ_INT(vtr_tiff_orientation(test_path("missing.tif")), 0);
}

/* A GIF of two 1x1 pictures: the header with a global colour table of two colours, the
 * looping extension, then per picture a graphics control extension, the descriptor (the
 * second with a local colour table), LZW data in one sub-block; the trailer. */
TEST(decode_gif_still_counts_pictures)
{
    static const char gif[] = "GIF89a\x01\0\x01\0\x80\0\0"
                              "\0\0\0\xff\xff\xff"
                              "\x21\xff\x0bNETSCAPE2.0\x03\x01\0\0\0"
                              "\x21\xf9\x04\0\x0a\0\0\0"
                              "\x2c\0\0\0\0\x01\0\x01\0\0\x02\x02\x44\x01\0"
                              "\x21\xf9\x04\0\x0a\0\0\0"
                              "\x2c\0\0\0\0\x01\0\x01\0\x80\0\0\0\xff\xff\xff\x02\x02\x44\x01\0"
                              "\x3b";
    const size_t full = sizeof gif - 1, first = 46, second = 69;
    const uint8_t *d = (const uint8_t *)gif;
    CHECK(d[first] == 0x2c && d[second] == 0x2c);
    CHECK(!vtr_gif_is_still(d, full));
    /* every shorter file: a still once its first picture begins, until its second does */
    for (size_t n = 0; n < full; n++)
        CHECK_MSG(vtr_gif_is_still(d, n) == (n > first && n <= second), "%zu bytes", n);
    /* the first picture, then the trailer */
    uint8_t one[sizeof gif];
    memcpy(one, gif, second);
    one[second] = 0x3b;
    CHECK(vtr_gif_is_still(one, second + 1));
    memcpy(one, "GIF87a", 6);
    CHECK(vtr_gif_is_still(one, second + 1));
    memcpy(one, "GIF90a", 6);
    CHECK(!vtr_gif_is_still(one, second + 1));
    memcpy(one, gif, second);
    one[second] = 0x3b;
    one[first - 8] = 0x42; /* not a block */
    CHECK(!vtr_gif_is_still(one, second + 1));
}

TEST(decode_orientation_turns_pictures_clockwise)
{
    uint8_t src[18], dst[18];
    small_picture(src);
    /* 90 clockwise: the bottom-left pixel comes to the top-left; 2 wide, 3 high */
    vtr_orientation o = vtr_orientation_from_rotation(90);
    int dw, dh;
    vtr_orientation_display_size(&o, 3, 2, &dw, &dh);
    CHECK_EQ_INT(dw, 2);
    CHECK_EQ_INT(dh, 3);
    vtr_orientation_copy_rgb(&o, src, 3, 2, 9, 0, 0, 2, 3, dst);
    CHECK_EQ_INT(pixel(dst, 2, 0, 0), 1);  /* coded (0, 1) */
    CHECK_EQ_INT(pixel(dst, 2, 1, 0), 0);  /* coded (0, 0) */
    CHECK_EQ_INT(pixel(dst, 2, 0, 2), 21); /* coded (2, 1) */
    o = vtr_orientation_from_rotation(270);
    vtr_orientation_copy_rgb(&o, src, 3, 2, 9, 0, 0, 2, 3, dst);
    CHECK_EQ_INT(pixel(dst, 2, 0, 0), 20); /* the top-right pixel to the top-left */
    CHECK_EQ_INT(pixel(dst, 2, 1, 2), 1);
    o = vtr_orientation_from_rotation(180);
    vtr_orientation_copy_rgb(&o, src, 3, 2, 9, 0, 0, 3, 2, dst);
    CHECK_EQ_INT(pixel(dst, 3, 0, 0), 21);
    CHECK_EQ_INT(pixel(dst, 3, 2, 1), 0);
    /* a window of the turned picture */
    o = vtr_orientation_from_rotation(90);
    vtr_orientation_copy_rgb(&o, src, 3, 2, 9, 1, 1, 1, 2, dst);
    CHECK_EQ_INT(pixel(dst, 1, 0, 0), 10);
    CHECK_EQ_INT(pixel(dst, 1, 0, 1), 20);
}

TEST(decode_geometry_plan)
{
    vtr_error err;
    vtr_orientation id = vtr_orientation_identity(), r90 = vtr_orientation_from_rotation(90);
    vtr_frame_geometry g;
    vtr_geometry_request req = {224, 224, VTR_RESIZE_SHORTER_SIDE, VTR_CROP_CENTER};
    CHECK_OK(vtr_frame_geometry_plan(160, 120, 1, 1, &id, &req, &g, &err));
    /* 120 -> 224, 160 -> 298.67 rounded to 299, the middle 224 columns from 37 */
    CHECK_EQ_INT(g.scaled_w, 299);
    CHECK_EQ_INT(g.scaled_h, 224);
    CHECK_EQ_INT(g.crop_x, 37);
    CHECK_EQ_INT(g.crop_y, 0);
    CHECK_EQ_INT(g.out_w, 224);
    CHECK_EQ_INT(g.out_h, 224);
    req.crop = VTR_CROP_NONE;
    CHECK_OK(vtr_frame_geometry_plan(160, 120, 1, 1, &id, &req, &g, &err));
    CHECK_EQ_INT(g.out_w, 299);
    CHECK_EQ_INT(g.out_h, 224);
    req = (vtr_geometry_request){100, 30, VTR_RESIZE_SHORTER_SIDE, VTR_CROP_CENTER};
    CHECK_OK(vtr_frame_geometry_plan(160, 120, 1, 1, &id, &req, &g, &err));
    CHECK_EQ_INT(g.scaled_w, 100); /* the width binds: 75 rows, the middle 30 from 22 */
    CHECK_EQ_INT(g.scaled_h, 75);
    CHECK_EQ_INT(g.crop_y, 22);
    req = (vtr_geometry_request){50, 70, VTR_RESIZE_STRETCH, VTR_CROP_CENTER};
    CHECK_OK(vtr_frame_geometry_plan(160, 120, 1, 1, &r90, &req, &g, &err));
    CHECK_EQ_INT(g.display_w, 120);
    CHECK_EQ_INT(g.display_h, 160);
    CHECK_EQ_INT(g.out_w, 50);
    CHECK_EQ_INT(g.out_h, 70);
    req = (vtr_geometry_request){0, 0, VTR_RESIZE_SHORTER_SIDE, VTR_CROP_CENTER};
    CHECK_OK(vtr_frame_geometry_plan(160, 120, 1, 1, &r90, &req, &g, &err));
    CHECK_EQ_INT(g.out_w, 120);
    CHECK_EQ_INT(g.out_h, 160);
    req = (vtr_geometry_request){0, 10, VTR_RESIZE_SHORTER_SIDE, VTR_CROP_CENTER};
    CHECK_FAILS(vtr_frame_geometry_plan(160, 120, 1, 1, &id, &req, &g, &err), VTR_ERR_INVALID,
                "size");
    /* non-square pixels, as players show them: a 16:9 PAL DVD's 720x576 at 64:45 is
     * 1024x576, NTSC DV's 720x480 at 8:9 is 720x540 (heightened, not narrowed); turned
     * after */
    req = (vtr_geometry_request){0, 0, VTR_RESIZE_SHORTER_SIDE, VTR_CROP_CENTER};
    CHECK_OK(vtr_frame_geometry_plan(720, 576, 64, 45, &id, &req, &g, &err));
    CHECK(g.coded_w == 720 && g.display_w == 1024 && g.out_w == 1024 && g.out_h == 576);
    CHECK_OK(vtr_frame_geometry_plan(720, 480, 8, 9, &r90, &req, &g, &err));
    CHECK(g.display_w == 540 && g.display_h == 720 && g.out_w == 540 && g.out_h == 720);
    req = (vtr_geometry_request){224, 224, VTR_RESIZE_SHORTER_SIDE, VTR_CROP_CENTER};
    CHECK_OK(vtr_frame_geometry_plan(720, 576, 64, 45, &id, &req, &g, &err));
    CHECK(g.scaled_w == 398 && g.scaled_h == 224 && g.crop_x == 87);        /* 1024 * 224 / 576 */
    CHECK_OK(vtr_frame_geometry_plan(720, 576, 0, 1, &id, &req, &g, &err)); /* unsaid: 1:1 */
    CHECK(g.display_w == 720);
    CHECK_FAILS(vtr_frame_geometry_plan(30000, 100, 2, 1, &id, &req, &g, &err), VTR_ERR_FORMAT,
                "aspect 2:1");
}

TEST(decode_synth_pattern_round_trip)
{
    /* the index reads back from a clean picture; a damaged grid fails the check bits */
    int w = 96, h = 64;
    uint8_t *y = malloc((size_t)w * h), *u = malloc((size_t)w * h / 4),
            *v = malloc((size_t)w * h / 4), *rgb = malloc((size_t)w * h * 3);
    CHECK(y && u && v && rgb);
    for (int index = 0; index <= VTR_SYNTH_MAX_INDEX; index += 4099) {
        vtr_synth_draw_yuv420(y, w, u, w / 2, v, w / 2, w, h, index, index);
        for (int i = 0; i < w * h; i++)
            memset(rgb + 3 * i, y[i], 3); /* the luma as grey */
        CHECK_EQ_INT(vtr_synth_read_index(rgb, w, h, (size_t)w * 3), index);
    }
    memset(rgb, 255, (size_t)w * h * 3);
    CHECK_EQ_INT(vtr_synth_read_index(rgb, w, h, (size_t)w * 3), -1);
    free(y);
    free(u);
    free(v);
    free(rgb);
}

/* vtr-synth writes the same bytes every time, in every container (no random Matroska
 * segment id, no version tags), so that an archive is the same for a seed. That it is the
 * same on every CPU rests on x264's C code (tools/synth_video.c), which no test here can
 * vary. */
TEST(synth_writes_the_same_bytes_twice)
{
    const char *names[] = {"twice.mp4", "twice.mkv", "twice.webm", "twice.avi"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        vtr_synth_options o;
        vtr_synth_defaults(&o);
        o.frames = 30;
        vtr_error err;
        vtr_error_clear(&err);
        vtr_mapped_file f[2];
        for (int k = 0; k < 2; k++) {
            char path[64];
            snprintf(path, sizeof path, "%d-%s", k, names[i]);
            char *full = strdup(test_path(path));
            CHECK(full);
            CHECK_OK(vtr_synth_write(full, &o, &err));
            CHECK_OK(vtr_map_file(full, &f[k], &err));
            free(full);
        }
        CHECK_MSG(f[0].size == f[1].size && f[0].size > 0 &&
                      memcmp(f[0].data, f[1].data, f[0].size) == 0,
                  "%s: two writes differ", names[i]);
        vtr_unmap_file(&f[0]);
        vtr_unmap_file(&f[1]);
    }
}
