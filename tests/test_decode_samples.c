/* Real media from Debian packages (tests/debian-sample-media): for every file that FFmpeg
 * decodes completely (no decoder error, a frame for every packet), vtr's straight decode
 * equals a plain libavcodec decode frame for frame, and every sampling mode gives exactly
 * the frames of the straight decode it names; a file whose timestamps go back (files
 * joined end to end) fails with a one-line error. JPEG photos show as their EXIF
 * orientation says. A Matroska file cut to a few percent fails instead of repeating a frame. Files of
 * packages that are not installed are left out; with none installed the test skips. */
#define _POSIX_C_SOURCE 200809L
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "decode/frame_convert.h"
#include "decode/orientation.h"
#include "test_decode_fixtures.h"

typedef struct sample {
    const char *package, *path;
    int exif; /* a JPEG's EXIF orientation (0: none) */
} sample;

#define FORENSICS "/usr/share/forensics-samples/original-files/"
#define MIMETYPE "/usr/share/gocode/src/github.com/gabriel-vasile/mimetype/testdata/"
#define JMAGICK "/usr/share/doc/jmagick6-docs/examples/exif_orientation/exif_orientation_"

static const sample samples[] = {
    {"forensics-samples-files", FORENSICS "movie1/VID_20191220_170832.mp4", 0}, /* phone */
    {"forensics-samples-files", FORENSICS "movie2/movie-hello.avi", 0},  /* H.264 in AVI */
    {"forensics-samples-files", FORENSICS "movie2/movie-hello.mpeg", 0}, /* MPEG-2 PS */
    {"forensics-samples-files", FORENSICS "movie2/movie-hello.mp4", 0},
    {"forensics-samples-files", FORENSICS "pic2/IMG_20200124_231153.jpg", 3},
    {"golang-github-gabriel-vasile-mimetype-dev", MIMETYPE "mkv.mkv", 0}, /* MPEG-4 + AAC */
    {"golang-github-gabriel-vasile-mimetype-dev", MIMETYPE "webm.webm", 0}, /* VP8 */
    {"golang-github-gabriel-vasile-mimetype-dev", MIMETYPE "ogg.ogv", 0},   /* Theora */
    {"golang-github-gabriel-vasile-mimetype-dev", MIMETYPE "flv.flv", 0},
    {"golang-github-gabriel-vasile-mimetype-dev", MIMETYPE "3gp.3gp", 0},   /* H.263 */
    {"golang-github-gabriel-vasile-mimetype-dev", MIMETYPE "mov.mov", 0},
    {"golang-github-gabriel-vasile-mimetype-dev", MIMETYPE "mp4.mp4", 0},
    {"k3b-data", "/usr/share/k3b/extra/k3bphotovcd.mpg", 0},  /* MPEG-1 PS */
    {"k3b-data", "/usr/share/k3b/extra/k3bphotosvcd.mpg", 0}, /* MPEG-2 PS */
    {"wx3.2-examples", "/usr/share/doc/wx3.2-examples/examples/samples/splash/press.mpg", 0},
    {"gem-doc", "/usr/share/gem/examples/data/alea.mpg", 0},  /* MPEG-1 elementary */
    {"gem-doc", "/usr/share/gem/examples/data/anim-1.mov", 0}, /* MJPEG */
    {"gem-doc", "/usr/share/gem/examples/data/homer.avi", 0},  /* Indeo 3 */
    {"tupi-data", "/usr/share/tupi/data/help/examples/example.avi", 0}, /* MPEG-4 in AVI */
    {"jmagick6-docs", JMAGICK "1.jpg", 1}, {"jmagick6-docs", JMAGICK "2.jpg", 2},
    {"jmagick6-docs", JMAGICK "3.jpg", 3}, {"jmagick6-docs", JMAGICK "4.jpg", 4},
    {"jmagick6-docs", JMAGICK "5.jpg", 5}, {"jmagick6-docs", JMAGICK "6.jpg", 6},
    {"jmagick6-docs", JMAGICK "7.jpg", 7}, {"jmagick6-docs", JMAGICK "8.jpg", 8},
};

static bool present(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Every frame of the file's video stream through libavcodec alone (one thread, FFmpeg's
 * default error handling), in output order, as RGB of vtr's default geometry: turned by
 * the stream's display matrix (videos), as stored (images). */
typedef struct plain_decode {
    bool complete;   /* no error, one frame per packet */
    bool increasing; /* the frames' timestamps increase */
    int64_t last_ts;
    int64_t packets, frames;
    int w, h;
    size_t frame_bytes;
    uint8_t *rgb;
    int64_t capacity; /* frames rgb holds room for: doubled when full (a realloc per frame
                         copies hundreds of MB per frame of a long video, minutes under ASan) */
} plain_decode;

static void take_frames(AVCodecContext *dec, AVFrame *frame, vtr_frame_converter *conv,
                        const vtr_frame_geometry *geom, plain_decode *out)
{
    int ret;
    while ((ret = avcodec_receive_frame(dec, frame)) >= 0) {
        /* a frame without a timestamp (the last of an MPEG program stream) says nothing */
        int64_t ts = frame->best_effort_timestamp;
        if (ts != AV_NOPTS_VALUE && out->last_ts != AV_NOPTS_VALUE && ts <= out->last_ts)
            out->increasing = false;
        if (ts != AV_NOPTS_VALUE)
            out->last_ts = ts;
        if (out->frames == out->capacity) {
            out->capacity = out->capacity ? 2 * out->capacity : 16;
            out->rgb = realloc(out->rgb, (size_t)out->capacity * out->frame_bytes);
            CHECK(out->rgb);
        }
        vtr_error err;
        vtr_error_clear(&err);
        CHECK_OK(vtr_frame_convert(conv, frame, geom,
                                   out->rgb + (size_t)out->frames * out->frame_bytes, &err));
        out->frames++;
    }
    if (ret != AVERROR(EAGAIN) && ret != AVERROR_EOF)
        out->complete = false;
}

static void decode_plainly(const char *path, bool image, plain_decode *out)
{
    memset(out, 0, sizeof *out);
    out->complete = out->increasing = true;
    out->last_ts = AV_NOPTS_VALUE;
    AVFormatContext *fmt = NULL;
    CHECK(avformat_open_input(&fmt, path, NULL, NULL) >= 0);
    CHECK(avformat_find_stream_info(fmt, NULL) >= 0);
    const AVCodec *codec = NULL;
    int si = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    CHECK(si >= 0 && codec);
    AVStream *st = fmt->streams[si];
    AVCodecContext *dec = avcodec_alloc_context3(codec);
    CHECK(dec && avcodec_parameters_to_context(dec, st->codecpar) >= 0);
    dec->thread_count = 1;
    dec->pkt_timebase = st->time_base;
    CHECK(avcodec_open2(dec, codec, NULL) >= 0);
    size_t size = 0;
    const uint8_t *m = av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, &size);
    vtr_orientation o = !image && m && size >= 9 * sizeof(int32_t)
                            ? vtr_orientation_from_matrix((const int32_t *)m)
                            : vtr_orientation_identity();
    vtr_decode_options defaults;
    vtr_decode_options_defaults(&defaults);
    vtr_frame_geometry geom;
    vtr_error err;
    vtr_error_clear(&err);
    AVRational sar = av_guess_sample_aspect_ratio(fmt, st, NULL);
    CHECK_OK(vtr_frame_geometry_plan(st->codecpar->width, st->codecpar->height, sar.num, sar.den,
                                     &o, &defaults.geometry, &geom, &err));
    out->w = geom.out_w;
    out->h = geom.out_h;
    out->frame_bytes = (size_t)geom.out_w * geom.out_h * 3;
    vtr_frame_converter *conv = vtr_frame_converter_new();
    AVPacket *pkt = av_packet_alloc();
    AVFrame *frame = av_frame_alloc();
    CHECK(conv && pkt && frame);
    while (av_read_frame(fmt, pkt) >= 0) {
        if (pkt->stream_index == si) {
            out->packets++;
            if (avcodec_send_packet(dec, pkt) < 0)
                out->complete = false;
            take_frames(dec, frame, conv, &geom, out);
        }
        av_packet_unref(pkt);
    }
    avcodec_send_packet(dec, NULL);
    take_frames(dec, frame, conv, &geom, out);
    out->complete = out->complete && out->frames == out->packets;
    av_frame_free(&frame);
    av_packet_free(&pkt);
    vtr_frame_converter_free(conv);
    avcodec_free_context(&dec);
    avformat_close_input(&fmt);
}

/* The sampled item's frames are the straight decode's frames the sampler names. */
static void check_sampled(const char *path, const vtr_decoded_item *all, const vtr_sampler *s)
{
    char mode[64];
    vtr_sampler_describe(s, mode, sizeof mode);
    vtr_decoded_item it;
    fixture_decode(path, s, false, NULL, &it);
    size_t bytes = fixture_frame_bytes(&it);
    CHECK_EQ_INT(bytes, fixture_frame_bytes(all));
    int64_t n = it.frames.shape[0], frames = all->frames.shape[0];
    for (int64_t i = 0; i < n; i++) {
        int64_t want = -1;
        if (vtr_sampler_is_timed(s)) {
            /* the frame displayed at the target: the last with pts <= t, else the first */
            double t = fixture_meta_real(&it, "target_times", i);
            want = 0;
            for (int64_t k = 0; k < frames; k++)
                if (fixture_meta_real(all, "timestamps", k) <= t)
                    want = k;
        } else if (s->mode == VTR_SAMPLE_EVERY) {
            want = i * s->n;
        } else {
            for (int64_t k = 0; k < frames && want < 0; k++)
                if (fixture_meta_int(all, "pts", k) == fixture_meta_int(&it, "pts", i))
                    want = k;
        }
        CHECK_MSG(want >= 0 && want < frames, "%s %s: frame %lld is not one of the file's",
                  path, mode, (long long)i);
        CHECK_MSG(fixture_meta_int(&it, "pts", i) == fixture_meta_int(all, "pts", want) &&
                      memcmp(fixture_frame(&it, i), fixture_frame(all, want), bytes) == 0,
                  "%s %s: frame %lld is not frame %lld of the straight decode", path, mode,
                  (long long)i, (long long)want);
    }
    if (s->mode == VTR_SAMPLE_EVERY)
        CHECK_EQ_INT(n, (frames + s->n - 1) / s->n);
    vtr_decoded_item_free(&it);
}

static void check_video(const char *path, const plain_decode *plain)
{
    vtr_decoded_item all;
    vtr_sampler every = {.mode = VTR_SAMPLE_ALL};
    fixture_decode(path, &every, true, NULL, &all);
    CHECK_MSG(all.frames.shape[0] == plain->frames, "%s: %lld frames, libavcodec gives %lld",
              path, (long long)all.frames.shape[0], (long long)plain->frames);
    CHECK_EQ_INT(all.frames.shape[2], plain->w);
    CHECK_EQ_INT(all.frames.shape[1], plain->h);
    for (int64_t k = 0; k < plain->frames; k++)
        CHECK_MSG(memcmp(fixture_frame(&all, k), plain->rgb + (size_t)k * plain->frame_bytes,
                         plain->frame_bytes) == 0,
                  "%s: frame %lld differs from libavcodec's", path, (long long)k);
    const vtr_sampler samplers[] = {
        {.mode = VTR_SAMPLE_FRAMES, .n = 8},
        {.mode = VTR_SAMPLE_FRAMES, .n = 25},
        {.mode = VTR_SAMPLE_FPS, .fps_num = 2, .fps_den = 1},
        {.mode = VTR_SAMPLE_EVERY, .n = 7},
        {.mode = VTR_SAMPLE_KEYFRAMES},
    };
    for (size_t i = 0; i < sizeof samplers / sizeof samplers[0]; i++) {
        check_sampled(path, &all, &samplers[i]);
        if (vtr_sampler_is_timed(&samplers[i]))
            fixture_check_stretches(path, &samplers[i]);
    }
    vtr_decoded_item_free(&all);
}

TEST(decode_debian_sample_media)
{
    fixture_quiet();
    int checked = 0;
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        const sample *s = &samples[i];
        if (!present(s->path))
            continue;
        plain_decode plain;
        decode_plainly(s->path, s->exif > 0, &plain);
        if (!plain.complete) {
            /* FFmpeg itself drops a frame (movie-hello.mp4: the last packet gives none) */
            printf("# %s: %lld packets, %lld frames from libavcodec: not checked\n", s->path,
                   (long long)plain.packets, (long long)plain.frames);
        } else if (!plain.increasing) {
            /* files joined end to end (mkv.mkv): no frame is "the one shown at t" */
            vtr_decode_options o;
            vtr_decode_options_defaults(&o);
            vtr_decoded_item it;
            vtr_error err;
            vtr_error_clear(&err);
            vtr_status st = vtr_decode_item(s->path, &o, NULL, &it, &err);
            CHECK_MSG(st == VTR_ERR_FORMAT && strstr(err.msg, s->path) &&
                          strstr(err.msg, "go back") && !strchr(err.msg, '\n'),
                      "%s: timestamps that go back: %s", s->path,
                      st == VTR_OK ? "decoded" : err.msg);
            printf("# %s: timestamps go back: refused\n", s->path);
            checked++;
        } else if (s->exif) {
            vtr_decoded_item shown;
            vtr_sampler all = {.mode = VTR_SAMPLE_ALL};
            fixture_decode(s->path, &all, false, NULL, &shown);
            fixture_check_exif_display(&shown, plain.rgb, plain.w, plain.h, s->exif, s->path);
            vtr_decoded_item_free(&shown);
            checked++;
        } else {
            check_video(s->path, &plain);
            checked++;
        }
        free(plain.rgb);
    }
    if (!checked)
        test_skip("none of tests/debian-sample-media is installed");
}

/* Issue 16: a Matroska file cut to 7 % gave the same frame eight times, rc 0. */
TEST(decode_debian_sample_cut_matroska_fails)
{
    const char *src = MIMETYPE "mkv.mkv";
    if (!present(src))
        test_skip("golang-github-gabriel-vasile-mimetype-dev is not installed");
    fixture_quiet();
    FILE *in = fopen(src, "rb");
    CHECK(in && fseek(in, 0, SEEK_END) == 0);
    long size = ftell(in);
    for (int percent = 5; percent <= 10; percent++) {
        char name[32];
        snprintf(name, sizeof name, "cut%d.mkv", percent);
        char *dst = strdup(test_path(name));
        FILE *out = fopen(dst, "wb");
        CHECK(dst && out && fseek(in, 0, SEEK_SET) == 0);
        for (long n = 0; n < size * percent / 100; n++)
            fputc(fgetc(in), out);
        CHECK(fclose(out) == 0);
        vtr_decode_options o;
        vtr_decode_options_defaults(&o);
        o.sampler = (vtr_sampler){.mode = VTR_SAMPLE_FRAMES, .n = 8};
        vtr_decoded_item it;
        vtr_error err;
        vtr_error_clear(&err);
        vtr_status st = vtr_decode_item(dst, &o, NULL, &it, &err);
        CHECK_MSG(st != VTR_OK && strstr(err.msg, dst) && !strchr(err.msg, '\n'),
                  "%s: %s", dst, st == VTR_OK ? "decoded" : err.msg);
        free(dst);
    }
    fclose(in);
}
