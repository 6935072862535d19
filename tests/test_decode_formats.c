/* Every sampling mode returns exactly the expected frames, on every generated format,
 * with pixels byte-identical to a straight decode of the same frames. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "decode/video_reader.h"
#include "test_decode_fixtures.h"

typedef struct stream_times {
    int64_t start, duration;
    int tb_num, tb_den;
} stream_times;

/* The stream's start and duration in ticks, checked against what was written. */
static stream_times times_of(const decode_fixture *f)
{
    vtr_error err;
    vtr_error_clear(&err);
    vtr_video_reader *r;
    CHECK_OK(vtr_video_reader_open(f->path, 1, &r, &err));
    const vtr_video_info *in = vtr_video_reader_info(r);
    if (in->duration < 0)
        CHECK_OK(vtr_video_reader_measure(r, &err));
    stream_times t = {in->start, in->duration, in->tb_num, in->tb_den};
    vtr_video_reader_close(r);
    const vtr_synth_options *o = &f->opt;
    int last = o->frames - 1;
    double gap = (double)o->fps_den / o->fps_num, tolerance = 0.0011;
    if (o->pts) {
        /* an mp4 with B-frames ends at the last dts plus a duration: off by up to a gap */
        gap = (double)(o->pts[last] - o->pts[last - 1]) / o->timescale;
        for (int i = 1; i < o->frames; i++)
            if ((double)(o->pts[i] - o->pts[i - 1]) / o->timescale > tolerance)
                tolerance = (double)(o->pts[i] - o->pts[i - 1]) / o->timescale + 0.0011;
    }
    double written = vtr_synth_frame_time(o, last) + gap - vtr_synth_frame_time(o, 0);
    double got = (double)t.duration * t.tb_num / t.tb_den;
    CHECK_MSG(fabs(got - written) < tolerance, "%s: duration %.4f s, written %.4f s", f->name,
              got, written);
    return t;
}

/* The straight decode of every frame: frame k must show index first_index + k. */
static void check_straight(decode_fixture *f, vtr_decoded_item *all)
{
    vtr_sampler s = {.mode = VTR_SAMPLE_ALL};
    fixture_decode(f->path, &s, true, NULL, all);
    CHECK_EQ_INT(all->frames.shape[0], f->opt.frames);
    int rot = f->opt.rotation;
    int w = f->opt.width, h = f->opt.height;
    CHECK_EQ_INT(all->frames.shape[2], rot % 180 ? h : w);
    CHECK_EQ_INT(all->frames.shape[1], rot % 180 ? w : h);
    double offset = fixture_meta_real(all, "timestamps", 0) - vtr_synth_frame_time(&f->opt, 0);
    /* containers may shift a stream (WebM: Opus pre-skip; MPEG-TS and -PS: by the
     * B-frames' reorder delay, so that no dts is negative, and MPEG-PS by FFmpeg's 0.5 s
     * preload) or round the start to frames */
    bool ts = strstr(f->path, ".ts") != NULL, ps = strstr(f->path, ".mpg") != NULL;
    double shift = ts || ps ? vtr_synth_frame_time(&f->opt, f->opt.b_frames) -
                                  vtr_synth_frame_time(&f->opt, 0) + (ps ? 0.5 : 0.0)
                            : 0.0;
    CHECK_MSG(fabs(offset) < 0.05 + shift, "%s: first frame at %+.4f s from where it was written",
              f->name, offset);
    for (int64_t k = 0; k < f->opt.frames; k++) {
        CHECK_MSG(fixture_index(all, k, rot) == f->opt.first_index + k,
                  "%s: straight frame %lld shows %d", f->name, (long long)k,
                  fixture_index(all, k, rot));
        CHECK_EQ_INT(fixture_meta_int(all, "frame_indices", k), k);
        double t = fixture_meta_real(all, "timestamps", k);
        double want = vtr_synth_frame_time(&f->opt, (int)k) + offset;
        CHECK_MSG(fabs(t - want) < 0.0011, "%s: frame %lld at %.4f s, written at %.4f s",
                  f->name, (long long)k, t, want);
        if (k)
            CHECK(fixture_meta_int(all, "pts", k) > fixture_meta_int(all, "pts", k - 1));
    }
}

/* The frame displayed at t: the last frame with pts <= t, else the first. */
static int64_t displayed_at(const vtr_decoded_item *all, int64_t t)
{
    int64_t k = 0;
    for (int64_t i = 0; i < all->frames.shape[0]; i++)
        if (fixture_meta_int(all, "pts", i) <= t)
            k = i;
    return k;
}

/* Expected frame numbers for sampler s, computed here from the stated formulas. */
static int64_t expected_frames(const decode_fixture *f, const vtr_decoded_item *all,
                               const vtr_sampler *s, const stream_times *st, int64_t *want)
{
    int64_t n = 0, frames = all->frames.shape[0];
    switch (s->mode) {
    case VTR_SAMPLE_FRAMES:
        for (int64_t i = 0; i < s->n; i++)
            want[n++] = displayed_at(all, st->start + st->duration * (2 * i + 1) / (2 * s->n));
        break;
    case VTR_SAMPLE_FPS:
        /* t_k = start + k / R while k / R < duration */
        for (int64_t k = 0; k * s->fps_den * st->tb_den < st->duration * st->tb_num * s->fps_num;
             k++)
            want[n++] = displayed_at(all, st->start + k * st->tb_den * s->fps_den /
                                                          (st->tb_num * s->fps_num));
        if (n == 0)
            want[n++] = 0;
        break;
    case VTR_SAMPLE_EVERY:
        for (int64_t k = 0; k < frames; k += s->n)
            want[n++] = k;
        break;
    case VTR_SAMPLE_KEYFRAMES: {
        /* the frames whose packets the container marks as keyframes */
        vtr_error err;
        vtr_error_clear(&err);
        vtr_video_reader *r;
        CHECK_OK(vtr_video_reader_open(f->path, 1, &r, &err));
        AVPacket *pkt = av_packet_alloc();
        for (;;) {
            bool eof;
            CHECK_OK(vtr_video_reader_read(r, pkt, &eof, &err));
            if (eof)
                break;
            if (pkt->flags & AV_PKT_FLAG_KEY)
                for (int64_t k = 0; k < frames; k++)
                    if (fixture_meta_int(all, "pts", k) == pkt->pts)
                        want[n++] = k;
        }
        av_packet_free(&pkt);
        vtr_video_reader_close(r);
        /* in presentation order */
        for (int64_t i = 1; i < n; i++)
            for (int64_t j = i; j > 0 && want[j - 1] > want[j]; j--) {
                int64_t t = want[j];
                want[j] = want[j - 1];
                want[j - 1] = t;
            }
        /* at least a keyframe every gop frames of the synthetic video (of a cut one, those
         * shown) */
        int64_t keyframes = 0;
        for (int64_t k = 0; k < frames; k++)
            keyframes += (f->opt.first_index + k) % f->opt.gop == 0;
        CHECK(n >= keyframes);
        break;
    }
    default:
        for (int64_t k = 0; k < frames; k++)
            want[n++] = k;
        break;
    }
    return n;
}

static void check_mode(decode_fixture *f, const vtr_decoded_item *all, const vtr_sampler *s,
                       bool straight)
{
    char mode[64];
    vtr_sampler_describe(s, mode, sizeof mode);
    stream_times st = times_of(f);
    int64_t want[512];
    int64_t n = expected_frames(f, all, s, &st, want);
    vtr_decoded_item it;
    fixture_decode(f->path, s, straight, NULL, &it);
    CHECK_MSG(it.frames.shape[0] == n, "%s %s: %lld frames, expected %lld", f->name, mode,
              (long long)it.frames.shape[0], (long long)n);
    json_t *indices = json_object_get(it.meta, "frame_indices");
    size_t bytes = fixture_frame_bytes(&it);
    CHECK_EQ_INT(bytes, fixture_frame_bytes(all));
    for (int64_t i = 0; i < n; i++) {
        int got = fixture_index(&it, i, f->opt.rotation);
        CHECK_MSG(got == f->opt.first_index + want[i],
                  "%s %s%s: frame %lld shows %d, expected %lld", f->name, mode,
                  straight ? " straight" : "", (long long)i, got,
                  (long long)(f->opt.first_index + want[i]));
        CHECK_MSG(memcmp(fixture_frame(&it, i), fixture_frame(all, want[i]), bytes) == 0,
                  "%s %s: frame %lld differs from the straight decode", f->name, mode,
                  (long long)i);
        CHECK_EQ_INT(fixture_meta_int(&it, "pts", i), fixture_meta_int(all, "pts", want[i]));
        if (!json_is_null(indices))
            CHECK_EQ_INT(fixture_meta_int(&it, "frame_indices", i), want[i]);
    }
    if (straight)
        CHECK_MSG(!json_is_null(indices), "%s %s: a straight decode knows its frame indices",
                  f->name, mode);
    vtr_decoded_item_free(&it);
}

static void check_all_modes(const char *name)
{
    decode_fixture *f = fixture_get(name);
    vtr_decoded_item all;
    check_straight(f, &all);
    int frames = f->opt.frames;
    const vtr_sampler samplers[] = {
        {.mode = VTR_SAMPLE_FRAMES, .n = 1},
        {.mode = VTR_SAMPLE_FRAMES, .n = 7},
        {.mode = VTR_SAMPLE_FRAMES, .n = 13},
        {.mode = VTR_SAMPLE_FRAMES, .n = 2 * frames + 3}, /* more targets than frames */
        {.mode = VTR_SAMPLE_FPS, .fps_num = 3, .fps_den = 1},
        {.mode = VTR_SAMPLE_FPS, .fps_num = 15, .fps_den = 2},
        {.mode = VTR_SAMPLE_FPS, .fps_num = 30000, .fps_den = 1001},
        {.mode = VTR_SAMPLE_EVERY, .n = 1},
        {.mode = VTR_SAMPLE_EVERY, .n = 4},
        {.mode = VTR_SAMPLE_EVERY, .n = 16},
        {.mode = VTR_SAMPLE_KEYFRAMES},
    };
    int stretches = 1;
    for (size_t i = 0; i < sizeof samplers / sizeof samplers[0]; i++) {
        check_mode(f, &all, &samplers[i], false);
        check_mode(f, &all, &samplers[i], true);
        if (vtr_sampler_is_timed(&samplers[i])) {
            int n = fixture_check_stretches(f->path, &samplers[i]);
            stretches = n > stretches ? n : stretches;
        }
    }
    CHECK_MSG(stretches > 1, "%s: one stretch for every sampler", name);
    vtr_decoded_item_free(&all);
}

TEST(decode_h264_bframes_long_gop) { check_all_modes("h264"); }
TEST(decode_h264_bframes_avi)
{
    check_all_modes("h264_avi");
}
TEST(decode_h264_bframes_matroska)
{
    check_all_modes("h264_mkv");
}
TEST(decode_mpeg4_open_gop) { check_all_modes("mpeg4"); }
TEST(decode_mpeg4_bframes_avi) { check_all_modes("mpeg4_avi"); }
TEST(decode_divx_packed_bframes_avi) { check_all_modes("divx_avi"); }
TEST(decode_vp9_webm) { check_all_modes("vp9"); }
TEST(decode_variable_frame_rate) { check_all_modes("vfr"); }
TEST(decode_start_offset_mp4) { check_all_modes("start"); }
TEST(decode_start_offset_webm) { check_all_modes("start_webm"); }

/* Open GOPs (B-frames before each keyframe refer to the previous GOP) in Matroska, which
 * numbers no frames: one decoder reading through dense targets never jumps and keeps the
 * frame numbers, so the item is one stretch whatever the threads (four once lost them). */
TEST(decode_matroska_open_gop_keeps_frame_numbers)
{
    decode_fixture *f = fixture_get("mpeg4");
    char *mkv = strdup(test_path("open_gop.mkv"));
    CHECK(mkv);
    fixture_remux(f->path, mkv, NULL, NULL);
    const vtr_sampler samplers[] = {
        {.mode = VTR_SAMPLE_FRAMES, .n = 123},
        {.mode = VTR_SAMPLE_FPS, .fps_num = 10, .fps_den = 1},
        {.mode = VTR_SAMPLE_FPS, .fps_num = 3, .fps_den = 1},
    };
    for (size_t i = 0; i < sizeof samplers / sizeof samplers[0]; i++)
        fixture_check_stretches(mkv, &samplers[i]);
    free(mkv);
}

/* FLV without a duration in its metadata (as GStreamer's flvmux writes it, or a live
 * stream saved; here FFmpeg's with no_duration_filesize), measured by reading from the
 * last indexed keyframe: FFmpeg's index lists the H.264 end-of-sequence marker, which holds
 * no frame, last. The span is then read from the start (it once said "no video frames"),
 * and every sampler gives the mp4's frames. */
TEST(decode_flv_without_duration)
{
    decode_fixture *f = fixture_get("h264");
    char *flv = strdup(test_path("no_duration.flv"));
    CHECK(flv);
    fixture_remux(f->path, flv, "flvflags", "no_duration_filesize");
    const vtr_sampler samplers[] = {
        {.mode = VTR_SAMPLE_FRAMES, .n = 7},
        {.mode = VTR_SAMPLE_FPS, .fps_num = 3, .fps_den = 1},
        {.mode = VTR_SAMPLE_ALL},
    };
    for (size_t j = 0; j < sizeof samplers / sizeof samplers[0]; j++) {
        vtr_decoded_item want, got;
        fixture_decode(f->path, &samplers[j], false, NULL, &want);
        fixture_decode(flv, &samplers[j], false, NULL, &got);
        CHECK_EQ_INT(got.frames.shape[0], want.frames.shape[0]);
        CHECK(memcmp(got.frames.data, want.frames.data, vtr_tensor_nbytes(&want.frames)) == 0);
        vtr_decoded_item_free(&want);
        vtr_decoded_item_free(&got);
    }
    free(flv);
}

/* MPEG-4 Part 2 with B-frames remuxed by mkvmerge, which stores it in Matroska's VfW mode:
 * libavformat reads the blocks' times as decode times, but mkvmerge wrote presentation
 * times when it took the stream from mp4, decode times when from AVI
 * (decode/packet_times.h). Either way, every sampler gives the source's frames at the
 * source's times (before, from mp4 the reference frames were taken one slot late: wrong
 * frames, and "the timestamps repeat" at the end). */
TEST(decode_matroska_vfw_mode_times)
{
    if (test_run("command -v mkvmerge >/dev/null 2>&1") != 0)
        test_skip("no mkvmerge (Debian's mkvtoolnix)");
    const char *sources[] = {"mpeg4", "mpeg4_avi"};
    const vtr_sampler samplers[] = {
        {.mode = VTR_SAMPLE_FRAMES, .n = 7},
        {.mode = VTR_SAMPLE_FPS, .fps_num = 3, .fps_den = 1},
        {.mode = VTR_SAMPLE_EVERY, .n = 4},
        {.mode = VTR_SAMPLE_KEYFRAMES},
        {.mode = VTR_SAMPLE_ALL},
    };
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
        decode_fixture *f = fixture_get(sources[i]);
        char *mkv = strdup(test_path(i ? "vfw_from_avi.mkv" : "vfw_from_mp4.mkv"));
        CHECK(mkv);
        /* exit 1: warnings only */
        int rc = test_run("mkvmerge -q -o '%s' '%s'", mkv, f->path);
        CHECK_MSG(rc == 0 || rc == 1, "mkvmerge %s: exit %d", f->path, rc);
        for (size_t j = 0; j < sizeof samplers / sizeof samplers[0]; j++) {
            char mode[64];
            vtr_sampler_describe(&samplers[j], mode, sizeof mode);
            vtr_decoded_item want, got;
            fixture_decode(f->path, &samplers[j], false, NULL, &want);
            fixture_decode(mkv, &samplers[j], false, NULL, &got);
            CHECK_MSG(got.frames.shape[0] == want.frames.shape[0], "%s %s: %lld frames, %lld", mkv,
                      mode, (long long)got.frames.shape[0], (long long)want.frames.shape[0]);
            for (int64_t k = 0; k < want.frames.shape[0]; k++) {
                CHECK_MSG(fixture_index(&got, k, 0) == fixture_index(&want, k, 0),
                          "%s %s: frame %lld shows %d, the source's %d", mkv, mode, (long long)k,
                          fixture_index(&got, k, 0), fixture_index(&want, k, 0));
                CHECK(fabs(fixture_meta_real(&got, "timestamps", k) -
                           fixture_meta_real(&want, "timestamps", k)) < 0.0011);
            }
            CHECK(memcmp(got.frames.data, want.frames.data, vtr_tensor_nbytes(&want.frames)) == 0);
            vtr_decoded_item_free(&want);
            vtr_decoded_item_free(&got);
        }
        free(mkv);
    }
}

/* A WebM with its cues (the index) before the clusters, as mkvmerge writes it, read with
 * the header: the same frames as with the cues at the end, in stretches too. */
TEST(decode_webm_cues_in_front)
{
    decode_fixture *f = fixture_get("vp9");
    char *front = fixture_cues_in_front(f);
    vtr_sampler s = {.mode = VTR_SAMPLE_FPS, .fps_num = 10, .fps_den = 1};
    vtr_decoded_item end, in_front;
    fixture_decode(f->path, &s, false, NULL, &end);
    fixture_decode(front, &s, false, NULL, &in_front);
    CHECK_EQ_INT(in_front.frames.shape[0], end.frames.shape[0]);
    CHECK(memcmp(in_front.frames.data, end.frames.data, vtr_tensor_nbytes(&end.frames)) == 0);
    CHECK_MSG(fixture_check_stretches(front, &s) > 1, "%s: one stretch", front);
    vtr_decoded_item_free(&end);
    vtr_decoded_item_free(&in_front);
    free(front);
}
TEST(decode_rotation_90) { check_all_modes("rot90"); }
TEST(decode_rotation_180) { check_all_modes("rot180"); }
TEST(decode_rotation_270) { check_all_modes("rot270"); }
TEST(decode_with_audio_track) { check_all_modes("audio"); }
/* frames an edit list hides (decoded, not shown) are neither delivered nor numbered (such a
 * clip failed: "the frame at -0.200 s cannot be decoded") */
TEST(decode_cut_with_edit_list)
{
    check_all_modes("h264_cut");
}
TEST(decode_h264_mpeg_ts)
{
    check_all_modes("ts");
}
TEST(decode_mpeg4_open_gop_mpeg_ts)
{
    check_all_modes("mpeg4_ts");
}
TEST(decode_mpeg2_program_stream)
{
    check_all_modes("mpeg2_ps");
}

/* MPEG-TS and -PS have no index, so the reader makes one. TS: the targets of frames:2,
 * keyframes 30 and 90 of 120, are reached by jumps (2 frames decoded), not by decoding
 * everything up to frame 90 (60 frames, the B-frames skipped, before the reader had an
 * index). PS: frames 15 and 45 of 60 (GOPs of 12, open) in 6 frames, where FFmpeg's own
 * seek, whose landings lose the keyframe's times, took 16. */
TEST(decode_mpeg_ts_and_ps_jump_to_sparse_targets)
{
    const char *names[] = {"ts", "mpeg2_ps"};
    for (int i = 0; i < 2; i++) {
        decode_fixture *f = fixture_get(names[i]);
        vtr_sampler s = {.mode = VTR_SAMPLE_FRAMES, .n = 2};
        vtr_decoded_item it;
        fixture_decode(f->path, &s, false, NULL, &it);
        json_t *d = json_object_get(it.meta, "decode");
        int64_t decoded = json_integer_value(json_object_get(d, "frames_decoded"));
        CHECK_MSG(decoded < 10, "%s: %lld frames decoded for 2", names[i], (long long)decoded);
        CHECK(json_integer_value(json_object_get(d, "seeks")) >= 1);
        vtr_decoded_item_free(&it);
    }
}

/* Rotated frames are really turned: unreadable as coded, readable turned back only the
 * right way. */
TEST(decode_rotation_direction)
{
    decode_fixture *f = fixture_get("rot90");
    vtr_decoded_item it;
    vtr_sampler s = {.mode = VTR_SAMPLE_FRAMES, .n = 3};
    fixture_decode(f->path, &s, false, NULL, &it);
    CHECK_EQ_INT(json_integer_value(json_object_get(it.meta, "rotation")), 90);
    for (int64_t i = 0; i < 3; i++) {
        CHECK(fixture_index(&it, i, 90) >= 0);
        CHECK_EQ_INT(fixture_index(&it, i, 270), -1);
    }
    vtr_decoded_item_free(&it);
}

/* Sparse sampling decodes only what it needs: it jumps, and decodes fewer frames than a
 * straight pass. */
TEST(decode_sparse_sampling_seeks)
{
    decode_fixture *f = fixture_get("h264");
    vtr_sampler s = {.mode = VTR_SAMPLE_FRAMES, .n = 3};
    vtr_decoded_item sparse, straight;
    fixture_decode(f->path, &s, false, NULL, &sparse);
    fixture_decode(f->path, &s, true, NULL, &straight);
    json_t *ds = json_object_get(sparse.meta, "decode");
    json_t *dd = json_object_get(straight.meta, "decode");
    int64_t seeks = json_integer_value(json_object_get(ds, "seeks"));
    int64_t decoded = json_integer_value(json_object_get(ds, "frames_decoded"));
    int64_t decoded_straight = json_integer_value(json_object_get(dd, "frames_decoded"));
    CHECK_MSG(seeks >= 2, "%lld seeks", (long long)seeks);
    /* the last target is frame 100: a straight pass stops soon after it */
    CHECK(decoded_straight > 100);
    CHECK_MSG(decoded * 2 < decoded_straight, "decoded %lld of %lld frames", (long long)decoded,
              (long long)decoded_straight);
    /* mp4 numbers every frame: the indices stay known across jumps */
    CHECK(!json_is_null(json_object_get(sparse.meta, "frame_indices")));
    vtr_decoded_item_free(&sparse);
    vtr_decoded_item_free(&straight);
}

/* Resizing and cropping give the same bytes on the sampled and the straight path, and the
 * planned sizes. */
TEST(decode_geometry_matches_straight_decode)
{
    static const struct {
        const char *fixture;
        vtr_geometry_request g;
        int w, h;
    } cases[] = {
        {"h264", {64, 64, VTR_RESIZE_SHORTER_SIDE, VTR_CROP_CENTER}, 64, 64},
        {"h264", {64, 64, VTR_RESIZE_SHORTER_SIDE, VTR_CROP_NONE}, 85, 64},
        {"h264", {50, 70, VTR_RESIZE_STRETCH, VTR_CROP_CENTER}, 50, 70},
        {"rot90", {64, 64, VTR_RESIZE_SHORTER_SIDE, VTR_CROP_CENTER}, 64, 64},
        {"rot90", {60, 100, VTR_RESIZE_SHORTER_SIDE, VTR_CROP_NONE}, 75, 100},
        {"mpeg4", {224, 224, VTR_RESIZE_SHORTER_SIDE, VTR_CROP_CENTER}, 224, 224},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        decode_fixture *f = fixture_get(cases[c].fixture);
        vtr_sampler all_s = {.mode = VTR_SAMPLE_ALL};
        vtr_sampler s = {.mode = VTR_SAMPLE_FRAMES, .n = 5};
        vtr_decoded_item all, it;
        fixture_decode(f->path, &all_s, true, &cases[c].g, &all);
        fixture_decode(f->path, &s, false, &cases[c].g, &it);
        CHECK_EQ_INT(it.frames.shape[2], cases[c].w);
        CHECK_EQ_INT(it.frames.shape[1], cases[c].h);
        CHECK_EQ_INT(json_integer_value(json_object_get(it.meta, "width")), cases[c].w);
        size_t bytes = fixture_frame_bytes(&it);
        stream_times st = times_of(f);
        int64_t want[8];
        CHECK_EQ_INT(expected_frames(f, &all, &s, &st, want), 5);
        for (int64_t i = 0; i < 5; i++)
            CHECK_MSG(memcmp(fixture_frame(&it, i), fixture_frame(&all, want[i]), bytes) == 0,
                      "%s case %zu: frame %lld differs", f->name, c, (long long)i);
        vtr_decoded_item_free(&all);
        vtr_decoded_item_free(&it);
    }
}

/* --mean/--std: float32 (x / 255 - mean) / std of the uint8 frames. */
TEST(decode_normalized_float_output)
{
    decode_fixture *f = fixture_get("vp9");
    vtr_decode_options o;
    vtr_decode_options_defaults(&o);
    o.sampler = (vtr_sampler){.mode = VTR_SAMPLE_FRAMES, .n = 4};
    vtr_decoded_item u8, f32;
    vtr_error err;
    vtr_error_clear(&err);
    CHECK_OK(vtr_decode_item(f->path, &o, NULL, &u8, &err));
    o.normalize = true;
    const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
    memcpy(o.mean, mean, sizeof mean);
    memcpy(o.std, sd, sizeof sd);
    CHECK_OK(vtr_decode_item(f->path, &o, NULL, &f32, &err));
    CHECK_EQ_INT(f32.frames.dtype, VTR_F32);
    CHECK_EQ_INT(u8.frames.dtype, VTR_U8);
    int64_t n = vtr_tensor_numel(&u8.frames);
    CHECK_EQ_INT(vtr_tensor_numel(&f32.frames), n);
    const uint8_t *a = u8.frames.data;
    const float *b = f32.frames.data;
    for (int64_t i = 0; i < n; i++) {
        float want = ((float)a[i] / 255.0f - mean[i % 3]) / sd[i % 3];
        CHECK_MSG(fabsf(b[i] - want) < 1e-5f, "element %lld: %f != %f", (long long)i, b[i],
                  want);
    }
    vtr_decoded_item_free(&u8);
    vtr_decoded_item_free(&f32);
}
