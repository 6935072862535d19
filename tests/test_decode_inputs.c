/* Images as single-frame videos, the audio track, and bad inputs: one error naming the
 * file and the cause, nothing left behind. */
#define _GNU_SOURCE /* memmem */
#include <dirent.h>
#include <libavformat/avformat.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "decode/audio_track.h"
#include "decode/video_reader.h"
#include "lib/file.h"
#include "test_decode_fixtures.h"

static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* No temporary file was left in test_tmpdir(). */
static void check_no_temporaries(void)
{
    DIR *d = opendir(test_tmpdir());
    CHECK(d);
    struct dirent *e;
    while ((e = readdir(d)))
        CHECK_MSG(!strstr(e->d_name, ".tmp."), "temporary file %s left", e->d_name);
    closedir(d);
}

TEST(decode_images_are_single_frame_videos)
{
    for (int i = 0; fixture_images[i]; i++) {
        decode_fixture *f = fixture_get(fixture_images[i]);
        const struct {
            vtr_sampler s;
            int64_t frames;
        } cases[] = {
            {{.mode = VTR_SAMPLE_ALL}, 1},
            {{.mode = VTR_SAMPLE_FRAMES, .n = 3}, 3},
            {{.mode = VTR_SAMPLE_FPS, .fps_num = 2, .fps_den = 1}, 1},
            {{.mode = VTR_SAMPLE_EVERY, .n = 16}, 1},
            {{.mode = VTR_SAMPLE_KEYFRAMES}, 1},
        };
        vtr_decoded_item first = {0};
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            for (int straight = 0; straight < 2; straight++) {
                vtr_decoded_item it;
                fixture_decode(f->path, &cases[c].s, straight, NULL, &it);
                CHECK_MSG(it.frames.shape[0] == cases[c].frames, "%s case %zu: %lld frames",
                          f->name, c, (long long)it.frames.shape[0]);
                CHECK_EQ_INT(it.frames.shape[1], 120);
                CHECK_EQ_INT(it.frames.shape[2], 160);
                CHECK_MSG(json_is_true(json_object_get(it.meta, "image")), "%s: not an image",
                          f->name);
                for (int64_t k = 0; k < it.frames.shape[0]; k++) {
                    CHECK_MSG(fixture_index(&it, k, 0) == 7, "%s case %zu: frame shows %d",
                              f->name, c, fixture_index(&it, k, 0));
                    if (first.meta)
                        CHECK(memcmp(fixture_frame(&it, k), fixture_frame(&first, 0),
                                     fixture_frame_bytes(&it)) == 0);
                    CHECK_EQ_INT(fixture_meta_int(&it, "frame_indices", k), 0);
                }
                if (!first.meta)
                    first = it;
                else
                    vtr_decoded_item_free(&it);
            }
        }
        vtr_decoded_item_free(&first);
    }
}

/* Pixels that are not square (a DVD's, a DV camera's) shown as players show them: a
 * 160x120 clip of pixels twice as wide as high is 320x120, of pixels twice as high
 * 160x240 (both were 160x120). */
TEST(decode_non_square_pixels)
{
    static const struct {
        int num, den, w, h;
        const char *sar;
    } cases[] = {{2, 1, 320, 120, "2:1"}, {1, 2, 160, 240, "1:2"}};
    vtr_sampler all = {.mode = VTR_SAMPLE_ALL};
    vtr_error err;
    vtr_error_clear(&err);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        vtr_synth_options o;
        vtr_synth_defaults(&o);
        o.frames = 6;
        o.sar_num = cases[c].num;
        o.sar_den = cases[c].den;
        char *path = strdup(test_path("anamorphic.mp4"));
        CHECK(path);
        CHECK_OK(vtr_synth_write(path, &o, &err));
        vtr_decoded_item it;
        fixture_decode(path, &all, false, NULL, &it);
        CHECK_STR(json_string_value(json_object_get(it.meta, "sample_aspect_ratio")), cases[c].sar);
        CHECK_MSG(it.frames.shape[2] == cases[c].w && it.frames.shape[1] == cases[c].h,
                  "%s: %lldx%lld", cases[c].sar, (long long)it.frames.shape[2],
                  (long long)it.frames.shape[1]);
        for (int64_t k = 0; k < o.frames; k++)
            CHECK_EQ_INT(fixture_index(&it, k, 0), k);
        vtr_decoded_item_free(&it);
        free(path);
    }
}

/* An animated GIF stays a video: every picture, in order (a GIF of one picture is an
 * image, above). */
TEST(decode_animated_gif_is_a_video)
{
    decode_fixture *f = fixture_get("gif_anim");
    vtr_sampler every = {.mode = VTR_SAMPLE_EVERY, .n = 1};
    vtr_decoded_item it;
    fixture_decode(f->path, &every, false, NULL, &it);
    CHECK(json_is_false(json_object_get(it.meta, "image")));
    CHECK_EQ_INT(it.frames.shape[0], f->opt.frames);
    for (int64_t k = 0; k < it.frames.shape[0]; k++)
        CHECK_MSG(fixture_index(&it, k, 0) == k, "frame %lld shows %d", (long long)k,
                  fixture_index(&it, k, 0));
    vtr_decoded_item_free(&it);
}

/* EXIF as a TIFF structure (little-endian) whose first directory holds only
 * Orientation = value: what JPEG's APP1 and WebP's EXIF chunk carry. */
enum { EXIF_BYTES = 26 };
static void exif_orientation(uint8_t out[EXIF_BYTES], int value)
{
    static const uint8_t tiff[EXIF_BYTES] = {
        'I',  'I',  0x2A, 0x00, 0x08, 0x00, 0x00, 0x00, /* TIFF, little-endian, IFD0 at 8 */
        0x01, 0x00,                                     /* one entry */
        0x12, 0x01, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, /* 0x0112 Orientation, SHORT, 1 */
        0x00, 0x00, 0x00, 0x00,                         /* value (set below) */
        0x00, 0x00, 0x00, 0x00,                         /* no next IFD */
    };
    memcpy(out, tiff, EXIF_BYTES);
    out[18] = (uint8_t)value;
}

static void put_le(FILE *f, uint32_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        fputc((int)(v >> (8 * i)) & 0xff, f);
}

/* A copy of fixture f (JPEG, simple WebP, little-endian TIFF, HEIF or AVIF) that says
 * orientation value the way a camera or phone writes it into that format instead of
 * turning the pixels: named exifVALUE.EXT. JPEG: an APP1 EXIF segment after the SOI
 * marker. WebP: the extended format (VP8X with the EXIF flag and the canvas w x h), the
 * image chunk, then an EXIF chunk. TIFF: a new first directory, the file's entries and
 * Orientation in tag order, appended, and the header pointed at it. HEIF and AVIF:
 * written again with irot/imir. */
static char *make_exif_copy(const decode_fixture *f, const char *ext, int value, int w, int h)
{
    char name[32];
    snprintf(name, sizeof name, "exif%d.%s", value, ext);
    char *dst = strdup(test_path(name));
    CHECK(dst);
    vtr_error err;
    vtr_error_clear(&err);
    if (!strcmp(ext, "heic") || !strcmp(ext, "avif")) {
        vtr_synth_options o = f->opt;
        o.orientation = value;
        CHECK_OK(vtr_synth_write(dst, &o, &err));
        return dst;
    }
    vtr_mapped_file in;
    CHECK_OK(vtr_map_file(f->path, &in, &err));
    const uint8_t *d = in.data;
    FILE *out = fopen(dst, "wb");
    CHECK(out);
    uint8_t exif[EXIF_BYTES];
    exif_orientation(exif, value);
    if (!strcmp(ext, "jpg")) {
        CHECK(in.size > 2 && d[0] == 0xFF && d[1] == 0xD8);
        fwrite(d, 1, 2, out);
        static const uint8_t app1[] = {0xFF, 0xE1, 0x00, 2 + 6 + EXIF_BYTES, 'E', 'x', 'i',
                                       'f',  0,    0};
        fwrite(app1, 1, sizeof app1, out);
        fwrite(exif, 1, EXIF_BYTES, out);
        fwrite(d + 2, 1, in.size - 2, out);
    } else if (!strcmp(ext, "webp")) {
        CHECK(in.size > 16 && !memcmp(d + 8, "WEBPVP8 ", 8));
        fputs("RIFF", out);
        put_le(out, (uint32_t)(4 + 18 + (in.size - 12) + 8 + EXIF_BYTES), 4);
        fputs("WEBPVP8X", out);
        put_le(out, 10, 4);
        put_le(out, 0x08, 4); /* flags: EXIF */
        put_le(out, (uint32_t)w - 1, 3);
        put_le(out, (uint32_t)h - 1, 3);
        fwrite(d + 12, 1, in.size - 12, out);
        fputs("EXIF", out);
        put_le(out, EXIF_BYTES, 4);
        fwrite(exif, 1, EXIF_BYTES, out);
    } else {
        CHECK(in.size > 8 && !memcmp(d, "II*\0", 4));
        uint32_t ifd = d[4] | d[5] << 8 | (uint32_t)d[6] << 16 | (uint32_t)d[7] << 24;
        CHECK(ifd + 2 <= in.size);
        int n = d[ifd] | d[ifd + 1] << 8;
        CHECK(ifd + 2 + 12 * (size_t)n <= in.size);
        size_t at = in.size + in.size % 2; /* a directory starts on a word boundary */
        fwrite(d, 1, 4, out);
        put_le(out, (uint32_t)at, 4);
        fwrite(d + 8, 1, in.size - 8, out);
        if (at > in.size)
            fputc(0, out);
        put_le(out, (uint32_t)n + 1, 2);
        bool put = false;
        for (int i = 0; i < n; i++) {
            const uint8_t *e = d + ifd + 2 + 12 * i;
            int tag = e[0] | e[1] << 8;
            CHECK(tag != 0x0112);
            if (!put && tag > 0x0112) {
                fwrite(exif + 10, 1, 12, out);
                put = true;
            }
            fwrite(e, 1, 12, out);
        }
        if (!put)
            fwrite(exif + 10, 1, 12, out);
        put_le(out, 0, 4); /* no next directory */
    }
    vtr_unmap_file(&in);
    CHECK(fclose(out) == 0);
    return dst;
}

/* Issue 16: a photo with an EXIF orientation is shown turned (and mirrored) as EXIF says,
 * and the metadata records it like a video's rotation: a JPEG's APP1 segment (FFmpeg
 * gives a display matrix), a WebP's EXIF chunk (FFmpeg gives the tag only), a TIFF's
 * own Orientation tag (which FFmpeg 5.1 ignores) and a HEIF's or AVIF's irot/imir
 * (libheif turns the picture; the metadata says nothing turned, so only the pixels are
 * checked). */
TEST(decode_photo_exif_orientation)
{
    static const struct {
        const char *fixture, *ext;
        bool turn_recorded; /* rotation and mirrored say the orientation */
    } formats[] = {{"jpeg", "jpg", true},
                   {"webp", "webp", true},
                   {"tiff", "tif", true},
                   {"heif", "heic", false},
                   {"avif", "avif", false}};
    vtr_sampler all = {.mode = VTR_SAMPLE_ALL};
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        decode_fixture *f = fixture_get(formats[i].fixture);
        vtr_decoded_item stored;
        fixture_decode(f->path, &all, false, NULL, &stored);
        int w = (int)stored.frames.shape[2], h = (int)stored.frames.shape[1];
        for (int v = 1; v <= 8; v++) {
            char *path = make_exif_copy(f, formats[i].ext, v, w, h);
            vtr_decoded_item it;
            fixture_decode(path, &all, false, NULL, &it);
            (formats[i].turn_recorded ? fixture_check_exif_display : fixture_check_exif_pixels)(
                &it, fixture_frame(&stored, 0), w, h, v, path);
            vtr_decoded_item_free(&it);
            free(path);
        }
        vtr_decoded_item_free(&stored);
    }
}

/* Mono samples of a WAV or FLAC file; their count and the rate. */
static float *read_sound(const char *path, int64_t *n, int *rate)
{
    SF_INFO info = {0};
    SNDFILE *snd = sf_open(path, SFM_READ, &info);
    CHECK_MSG(snd, "%s: %s", path, sf_strerror(NULL));
    CHECK_EQ_INT(info.channels, 1);
    float *x = malloc((size_t)info.frames * sizeof *x + 1);
    CHECK(x);
    CHECK_EQ_INT(sf_readf_float(snd, x, info.frames), info.frames);
    sf_close(snd);
    *n = info.frames;
    *rate = info.samplerate;
    return x;
}

/* The tone's frequency from zero crossings of the steady middle part. */
static double tone_frequency(const float *x, int64_t n, int rate)
{
    int64_t crossings = 0, a = n / 4, b = 3 * n / 4;
    for (int64_t i = a + 1; i < b; i++)
        crossings += (x[i - 1] < 0) != (x[i] < 0);
    return crossings / 2.0 / ((double)(b - a) / rate);
}

TEST(decode_audio_track_to_wav_and_flac)
{
    static const struct {
        const char *fixture, *file;
        int rate;
    } cases[] = {
        {"audio", "audio.wav", 16000}, /* AAC, 44.1 kHz stereo */
        {"audio", "audio8k.flac", 8000},
        {"vp9", "opus.wav", 16000},    /* Opus, 48 kHz stereo */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        decode_fixture *f = fixture_get(cases[c].fixture);
        const char *dst = test_path(cases[c].file);
        vtr_decode_options o;
        vtr_decode_options_defaults(&o);
        o.sampler = (vtr_sampler){.mode = VTR_SAMPLE_FRAMES, .n = 2};
        o.audio_rate = cases[c].rate;
        vtr_decoded_item it;
        vtr_error err;
        vtr_error_clear(&err);
        CHECK_OK(vtr_decode_item(f->path, &o, dst, &it, &err));
        CHECK_STR(json_string_value(json_object_get(it.meta, "audio")), dst);
        CHECK_EQ_INT(json_integer_value(json_object_get(it.meta, "audio_rate")), cases[c].rate);
        int64_t n;
        int rate;
        float *x = read_sound(dst, &n, &rate);
        CHECK_EQ_INT(rate, cases[c].rate);
        CHECK_EQ_INT(json_integer_value(json_object_get(it.meta, "audio_samples")), n);
        double seconds = (double)f->opt.frames * f->opt.fps_den / f->opt.fps_num;
        /* encoder priming and padding add at most a few codec frames */
        CHECK_MSG(fabs((double)n / rate - seconds) < 0.1, "%s: %lld samples at %d Hz",
                  cases[c].file, (long long)n, rate);
        double hz = tone_frequency(x, n, rate);
        CHECK_MSG(fabs(hz - 440.0) < 440.0 * 0.02, "%s: tone at %.1f Hz", cases[c].file, hz);
        free(x);
        vtr_decoded_item_free(&it);
    }
    check_no_temporaries();
}

/* Two MPEG-TS files joined end to end, as `cat` joins a broadcast's or a stream's
 * segments: the audio changes from 44.1 kHz stereo to 48 kHz mono halfway. Each half
 * resampled from its own parameters: the whole length, the first tone, then the second
 * (the resampler kept for stereo read a second channel the mono frames lack and crashed).
 * Both halves at the tone's level: the stereo mixdown's gains sum to 1 (unscaled, the two
 * channels gave 1.41 times the level, and a loud track clipped). */
TEST(decode_audio_whose_channels_and_rate_change)
{
    static const struct {
        int rate, channels;
        double hz;
    } parts[] = {{44100, 2, 440.0}, {48000, 1, 880.0}};
    const char *joined = test_path("joined.ts");
    FILE *out = fopen(joined, "wb");
    CHECK(out);
    vtr_synth_options o;
    vtr_synth_defaults(&o);
    o.frames = 50;
    double seconds = (double)o.frames * o.fps_den / o.fps_num;
    vtr_error err;
    vtr_error_clear(&err);
    for (int i = 0; i < 2; i++) {
        const char *part = test_path(i ? "part2.ts" : "part1.ts");
        o.audio_codec = "aac";
        o.audio_rate = parts[i].rate;
        o.audio_channels = parts[i].channels;
        o.tone_hz = parts[i].hz;
        o.start_time = i * seconds;
        CHECK_OK(vtr_synth_write(part, &o, &err));
        vtr_mapped_file m;
        CHECK_OK(vtr_map_file(part, &m, &err));
        CHECK_EQ_INT(fwrite(m.data, 1, m.size, out), m.size);
        vtr_unmap_file(&m);
    }
    CHECK(fclose(out) == 0);
    const char *dst = test_path("joined.wav");
    vtr_audio_result res;
    CHECK_OK(vtr_audio_extract(joined, dst, 16000, &res, &err));
    int64_t n;
    int rate;
    float *x = read_sound(dst, &n, &rate);
    CHECK_EQ_INT(res.samples, n);
    CHECK_MSG(fabs((double)n / rate - 2 * seconds) < 0.1, "%lld samples at %d Hz", (long long)n,
              rate);
    double peak[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        const float *half = x + i * n / 2;
        double hz = tone_frequency(half, n / 2, rate);
        CHECK_MSG(fabs(hz - parts[i].hz) < parts[i].hz * 0.02, "part %d: tone at %.1f Hz", i + 1,
                  hz);
        for (int64_t k = n / 8; k < 3 * n / 8; k++)
            peak[i] = fmax(peak[i], fabs(half[k]));
    }
    CHECK_MSG(fabs(peak[0] / peak[1] - 1) < 0.05, "peaks %.3f (stereo) and %.3f (mono)", peak[0],
              peak[1]);
    free(x);
    check_no_temporaries();
}

TEST(decode_video_without_audio_is_not_an_error)
{
    decode_fixture *f = fixture_get("h264");
    const char *dst = test_path("silent.wav");
    vtr_decode_options o;
    vtr_decode_options_defaults(&o);
    o.sampler = (vtr_sampler){.mode = VTR_SAMPLE_FRAMES, .n = 2};
    vtr_decoded_item it;
    vtr_error err;
    vtr_error_clear(&err);
    CHECK_OK(vtr_decode_item(f->path, &o, dst, &it, &err));
    CHECK(json_is_null(json_object_get(it.meta, "audio")));
    CHECK_STR(json_string_value(json_object_get(it.meta, "audio_reason")), "no audio stream");
    CHECK(!exists(dst));
    vtr_decoded_item_free(&it);
    vtr_audio_result res;
    CHECK_FAILS(vtr_audio_extract(f->path, test_path("x.mp3"), 16000, &res, &err),
                VTR_ERR_INVALID, ".wav or .flac");
}

/* Copies the first `bytes` of src to dst (all of it when bytes < 0), then overwrites
 * `garble` bytes at offset `at` with a pattern. */
static char *make_bad_file(const char *src, const char *name, long bytes, long at, long garble)
{
    char *dst = strdup(test_path(name));
    CHECK(dst);
    FILE *in = src ? fopen(src, "rb") : NULL, *out = fopen(dst, "wb");
    CHECK(out && (in || !src));
    long n = 0;
    int ch;
    while (in && (bytes < 0 || n < bytes) && (ch = fgetc(in)) != EOF) {
        fputc(n >= at && n < at + garble ? (int)((n * 131) & 0xff) : ch, out);
        n++;
    }
    if (in)
        fclose(in);
    fclose(out);
    return dst;
}

static long file_size(const char *path)
{
    struct stat sb;
    CHECK(stat(path, &sb) == 0);
    return (long)sb.st_size;
}

/* A copy of the fixture with frame k's packet (a keyframe) garbled but for its first
 * and last eighth. FFmpeg does not notice every damage: the middle half alone of this
 * fixture's keyframe decodes without complaint (the fixture is the same on every CPU). */
static char *make_garbled_keyframe(const decode_fixture *f, int k)
{
    vtr_error err;
    vtr_error_clear(&err);
    vtr_video_reader *r;
    CHECK_OK(vtr_video_reader_open(f->path, 1, &r, &err));
    AVPacket *pkt = av_packet_alloc();
    long at = -1, size = 0;
    while (at < 0) {
        bool eof;
        CHECK_OK(vtr_video_reader_read(r, pkt, &eof, &err));
        CHECK(!eof);
        if (fabs(vtr_video_reader_seconds(r, pkt->pts) - vtr_synth_frame_time(&f->opt, k)) <
            0.001) {
            CHECK(pkt->flags & AV_PKT_FLAG_KEY);
            at = (long)pkt->pos;
            size = pkt->size;
        }
    }
    av_packet_free(&pkt);
    vtr_video_reader_close(r);
    return make_bad_file(f->path, "garbled.mp4", -1, at + size / 8, size * 3 / 4);
}

/* An mp4 of one GOP with its index in front (faststart), cut right after frame k's
 * packet: the index still declares every frame, the data stops cleanly at a packet. */
static char *make_cut_indexed_mp4(int k)
{
    vtr_synth_options o;
    vtr_synth_defaults(&o);
    o.frames = 100;
    o.gop = 100;
    char *src = strdup(test_path("one_gop.mp4")), *whole = strdup(test_path("faststart.mp4"));
    CHECK(src && whole);
    vtr_error err;
    vtr_error_clear(&err);
    CHECK_OK(vtr_synth_write(src, &o, &err));
    fixture_remux(src, whole, "movflags", "+faststart");
    vtr_video_reader *r;
    CHECK_OK(vtr_video_reader_open(whole, 1, &r, &err));
    AVPacket *pkt = av_packet_alloc();
    long end = -1;
    while (end < 0) {
        bool eof;
        CHECK_OK(vtr_video_reader_read(r, pkt, &eof, &err));
        CHECK(!eof);
        if (fabs(vtr_video_reader_seconds(r, pkt->pts) - vtr_synth_frame_time(&o, k)) < 0.001)
            end = (long)pkt->pos + pkt->size;
    }
    av_packet_free(&pkt);
    vtr_video_reader_close(r);
    char *cut = make_bad_file(whole, "cut_indexed.mp4", end, 0, 0);
    free(src);
    free(whole);
    return cut;
}

/* Issue 16: the data of a file whose index or header declares its full length stops
 * early. The targets after the last frame must not all get that frame (the same frame
 * eight times, rc 0): the item fails as truncated. */
TEST(decode_cut_file_is_not_padded_with_its_last_frame)
{
    fixture_quiet();
    char *path = make_cut_indexed_mp4(20);
    const vtr_sampler samplers[] = {
        {.mode = VTR_SAMPLE_FRAMES, .n = 8},
        {.mode = VTR_SAMPLE_FPS, .fps_num = 2, .fps_den = 1},
        {.mode = VTR_SAMPLE_ALL},
        {.mode = VTR_SAMPLE_EVERY, .n = 4},
        {.mode = VTR_SAMPLE_KEYFRAMES},
    };
    for (size_t i = 0; i < sizeof samplers / sizeof samplers[0]; i++) {
        vtr_decode_options o;
        vtr_decode_options_defaults(&o);
        o.sampler = samplers[i];
        vtr_decoded_item it;
        vtr_error err;
        vtr_error_clear(&err);
        vtr_status st = vtr_decode_item(path, &o, NULL, &it, &err);
        CHECK_MSG(st == VTR_ERR_FORMAT && strstr(err.msg, "truncated") &&
                      strstr(err.msg, path),
                  "sampler %zu: %s: %s", i, vtr_status_name(st),
                  st == VTR_OK ? "decoded" : err.msg);
    }
    free(path);
}

/* A copy of src with `count` bytes inverted from its first video packet on, at positions
 * a fixed generator picks (issue 16: every such copy of an MPEG-4 AVI aborted vtr-decode). */
static char *make_flipped_file(const char *src, const char *name, int count)
{
    vtr_error err;
    vtr_error_clear(&err);
    vtr_video_reader *r;
    CHECK_OK(vtr_video_reader_open(src, 1, &r, &err));
    AVPacket *pkt = av_packet_alloc();
    bool eof;
    CHECK_OK(vtr_video_reader_read(r, pkt, &eof, &err));
    CHECK(!eof && pkt->pos >= 0);
    long from = (long)pkt->pos, size = file_size(src);
    av_packet_free(&pkt);
    vtr_video_reader_close(r);
    char *dst = make_bad_file(src, name, -1, 0, 0);
    FILE *f = fopen(dst, "r+b");
    CHECK(f && size > from);
    uint32_t x = 12345;
    for (int i = 0; i < count; i++) {
        x = x * 1664525u + 1013904223u;
        long at = from + (long)(x % (uint32_t)(size - from));
        CHECK(fseek(f, at, SEEK_SET) == 0);
        int ch = fgetc(f);
        CHECK(ch != EOF && fseek(f, at, SEEK_SET) == 0);
        fputc(ch ^ 0xff, f);
    }
    fclose(f);
    return dst;
}

/* H.264 with B-frames as a raw elementary stream, which keeps no times at all (once "no
 * video frames"). */
static char *make_raw_h264(void)
{
    vtr_synth_options o;
    vtr_synth_defaults(&o);
    o.codec = "h264";
    o.frames = 30;
    o.gop = 10;
    o.b_frames = 2;
    char *path = strdup(test_path("raw.h264"));
    CHECK(path);
    vtr_error err;
    vtr_error_clear(&err);
    CHECK_OK(vtr_synth_write(path, &o, &err));
    return path;
}

/* A file whose video stream has a codec this FFmpeg cannot decode: AVS3 in Matroska, or
 * when FFmpeg has an AVS3 decoder, a FourCC nobody knows in AVI. */
static char *make_unknown_codec_file(const char **needle)
{
    bool avs3 = !avcodec_find_decoder(AV_CODEC_ID_AVS3);
    char *path = strdup(test_path(avs3 ? "avs3.mkv" : "zzzz.avi"));
    CHECK(path);
    *needle = avs3 ? "no decoder for codec 'avs3'" : "unknown video codec (tag ZZZZ)";
    AVFormatContext *oc = NULL;
    CHECK(avformat_alloc_output_context2(&oc, NULL, NULL, path) >= 0);
    AVStream *st = avformat_new_stream(oc, NULL);
    CHECK(st);
    st->codecpar->codec_type = AVMEDIA_TYPE_VIDEO;
    st->codecpar->codec_id = AV_CODEC_ID_AVS3;
    st->codecpar->codec_tag = avs3 ? 0 : MKTAG('Z', 'Z', 'Z', 'Z');
    st->codecpar->width = 64;
    st->codecpar->height = 48;
    st->time_base = (AVRational){1, 25};
    CHECK(avio_open(&oc->pb, path, AVIO_FLAG_WRITE) >= 0);
    CHECK(avformat_write_header(oc, NULL) >= 0);
    AVPacket *pkt = av_packet_alloc();
    CHECK(pkt && av_new_packet(pkt, 256) >= 0);
    for (int i = 0; i < 3; i++) {
        memset(pkt->data, i, 256);
        pkt->pts = pkt->dts = i;
        pkt->flags = AV_PKT_FLAG_KEY;
        pkt->stream_index = 0;
        CHECK(av_write_frame(oc, pkt) >= 0);
    }
    av_packet_free(&pkt);
    CHECK(av_write_trailer(oc) >= 0);
    avio_closep(&oc->pb);
    avformat_free_context(oc);
    return path;
}

/* The WebM fixture with its cues (the index) before the clusters, cut in half. */
static char *make_cut_cues_front_webm(const decode_fixture *vp9)
{
    char *front = fixture_cues_in_front(vp9);
    char *cut = make_bad_file(front, "cut_cues_front.webm", file_size(front) / 2, 0, 0);
    free(front);
    return cut;
}

/* An uncompressed 160x120 RGB TIFF with its directory in front (as Pillow writes it,
 * FFmpeg's and ImageMagick's put it last), ResolutionUnit among its tags, cut halfway
 * through its pixels: the header survives the cut and points past the end. */
static char *make_cut_tiff(void)
{
    enum { W = 160, H = 120, N_TAGS = 10, PIXELS = 8 + 2 + N_TAGS * 12 + 4 + 6 };
    static const uint16_t tags[N_TAGS][2] = {
        {256, W}, {257, H}, {258, 0}, {259, 1}, {262, 2},
        {273, 0}, {277, 3}, {278, H}, {279, 0}, {296, 2},
    };
    uint8_t head[PIXELS], *p = head;
#define PUT16(v) (p[0] = (uint8_t)(v), p[1] = (uint8_t)((v) >> 8), p += 2)
#define PUT32(v) (PUT16((v)&0xffff), PUT16((uint32_t)(v) >> 16))
    memcpy(p, "II*\0", 4);
    p += 4;
    PUT32(8);
    PUT16(N_TAGS);
    for (int i = 0; i < N_TAGS; i++) {
        uint16_t tag = tags[i][0];
        bool is_long = tag == 273 || tag == 279;
        PUT16(tag);
        PUT16(is_long ? 4 : 3); /* LONG or SHORT */
        PUT32(tag == 258 ? 3 : 1);
        if (tag == 258) /* BitsPerSample 8,8,8: stored after the directory */
            PUT32(PIXELS - 6);
        else if (tag == 273)
            PUT32(PIXELS);
        else if (tag == 279)
            PUT32(W * H * 3);
        else
            PUT32(tags[i][1]);
    }
    PUT32(0); /* no next directory */
    for (int i = 0; i < 3; i++)
        PUT16(8);
#undef PUT32
#undef PUT16
    CHECK(p == head + PIXELS);
    char *path = strdup(test_path("cut.tif"));
    CHECK(path);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(head, 1, PIXELS, f) == PIXELS);
    for (int i = 0; i < W * H * 3 / 2; i++)
        fputc(i & 0xff, f);
    fclose(f);
    return path;
}

/* A file named name holding the n bytes at data. */
static char *make_file(const char *name, const void *data, size_t n)
{
    char *path = strdup(test_path(name));
    CHECK(path);
    test_write_file(path, data, n);
    return path;
}

/* The start of a phone's HEIC photo: the ftyp box of brand heic, then a meta box that
 * holds nothing. */
static char *make_heic_start(void)
{
    static const char b[] = "\0\0\0\x18"
                            "ftypheic\0\0\0\0mif1heic"
                            "\0\0\0\x10"
                            "meta\0\0\0\0\0\0\0\0";
    return make_file("photo.heic", b, sizeof b - 1);
}

/* An animated WebP's chunks: VP8X with the animation flag and a 160x120 canvas, ANIM,
 * one ANMF (FFmpeg 5.1's WebP decoder skips them and finds no image). */
static char *make_animated_webp(void)
{
    static const char b[] = "RIFF\x48\0\0\0WEBP"
                            "VP8X\x0a\0\0\0\x02\0\0\0\x9f\0\0\x77\0\0"
                            "ANIM\x06\0\0\0\0\0\0\0\0\0"
                            "ANMF\x1c\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"
                            "VP8L\x04\0\0\0\0\0\0\0";
    return make_file("animated.webp", b, sizeof b - 1);
}

/* A copy of HEIF fixture f whose image size property (ispe) declares 20000 x 20000. */
static char *make_huge_heif(const decode_fixture *f)
{
    vtr_mapped_file in;
    vtr_error err;
    vtr_error_clear(&err);
    CHECK_OK(vtr_map_file(f->path, &in, &err));
    size_t n = in.size;
    uint8_t *d = malloc(n);
    CHECK(d);
    memcpy(d, in.data, n);
    vtr_unmap_file(&in);
    uint8_t *ispe = memmem(d, n, "ispe", 4);
    CHECK(ispe && ispe + 16 <= d + n);
    static const uint8_t size[8] = {0, 0, 0x4e, 0x20, 0, 0, 0x4e, 0x20}; /* 20000, 20000 */
    memcpy(ispe + 8, size, sizeof size); /* after the version and flags */
    char *path = make_file("huge.heic", d, n);
    free(d);
    return path;
}

/* A PNG's header declaring 20000 x 20000 (gray, 8 bits), then its end: over FFmpeg's cap
 * on a picture's size, which its PNG reader refuses before any pixel is read. */
static char *make_huge_png(void)
{
    static const char b[] = "\x89PNG\r\n\x1a\n"
                            "\0\0\0\x0dIHDR\0\0\x4e\x20\0\0\x4e\x20\x08\0\0\0\0\xc6\x1b\x19\xe5"
                            "\0\0\0\0IEND\xae\x42\x60\x82";
    return make_file("huge.png", b, sizeof b - 1);
}

/* A WAV file: audio, no video. */
static char *make_audio_only_file(void)
{
    char *path = strdup(test_path("tone.wav"));
    CHECK(path);
    SF_INFO info = {.samplerate = 8000, .channels = 1, .format = SF_FORMAT_WAV | SF_FORMAT_PCM_16};
    SNDFILE *snd = sf_open(path, SFM_WRITE, &info);
    CHECK(snd);
    float x[800];
    for (int i = 0; i < 800; i++)
        x[i] = (float)sin(i * 0.3);
    CHECK_EQ_INT(sf_writef_float(snd, x, 800), 800);
    sf_close(snd);
    return path;
}

TEST(decode_bad_inputs_fail_cleanly)
{
    decode_fixture *h264 = fixture_get("h264"), *vp9 = fixture_get("vp9");
    decode_fixture *png = fixture_get("png"), *avi = fixture_get("mpeg4_avi");
    decode_fixture *heif = fixture_get("heif");
    const char *unknown_codec;
    char *unknown_path = make_unknown_codec_file(&unknown_codec);
    /* every path is strdup'd (test_path's buffers rotate) and freed at the end */
    struct {
        char *path;
        vtr_status status;
        const char *needle;
    } cases[] = {
        {strdup(test_path("missing.mp4")), VTR_ERR_IO, "No such file"},
        {make_bad_file(NULL, "empty.mp4", 0, 0, 0), VTR_ERR_FORMAT, "empty file"},
        {make_bad_file(h264->path, "noise.mp4", -1, 0, 1L << 30), VTR_ERR_FORMAT,
         "FFmpeg can read"},
        /* the mp4 index (moov) is written last: a cut file has none */
        {make_bad_file(h264->path, "cut.mp4", file_size(h264->path) / 2, 0, 0), VTR_ERR_FORMAT,
         "truncated"},
        {make_bad_file(vp9->path, "cut.webm", file_size(vp9->path) / 2, 0, 0), VTR_ERR_FORMAT,
         "truncated"},
        /* its index in front points past the cut (once "no video frames") */
        {make_cut_cues_front_webm(vp9), VTR_ERR_FORMAT, "truncated"},
        {make_bad_file(png->path, "cut.png", file_size(png->path) / 2, 0, 0), VTR_ERR_CODEC,
         "Invalid data"},
        /* TIFF's decoder is not told to explode (it would refuse unknown tags) */
        {make_cut_tiff(), VTR_ERR_CODEC, "Invalid data"},
        /* the slice data of the second keyframe (frame 30) garbled */
        {make_garbled_keyframe(h264, 30), VTR_ERR_CODEC, "decod"},
        /* inverted bytes in MPEG-4 (FFmpeg 5.1 asserted with frame threads) */
        {make_flipped_file(avi->path, "flipped.avi", 30), VTR_ERR_CODEC, "decod"},
        {unknown_path, VTR_ERR_UNSUPPORTED, unknown_codec},
        {make_raw_h264(), VTR_ERR_UNSUPPORTED, "without timestamps"},
        /* HEIF goes to libheif, told by its first bytes */
        {make_heic_start(), VTR_ERR_FORMAT, "HEIF image libheif cannot decode"},
        {make_bad_file(heif->path, "cut.heic", file_size(heif->path) / 2, 0, 0), VTR_ERR_FORMAT,
         "HEIF image libheif cannot decode"},
        /* a few kilobytes that would be 1.1 GB of RGB: refused at FFmpeg's size cap */
        {make_huge_heif(heif), VTR_ERR_FORMAT, "exceeds the maximum image size 16384x16384"},
        /* FFmpeg says why only in its log: not "corrupt" alone */
        {make_huge_png(), VTR_ERR_FORMAT, "a picture larger than FFmpeg decodes"},
        /* told by its first bytes, not "corrupt" */
        {make_animated_webp(), VTR_ERR_UNSUPPORTED, "an animated WebP, which this FFmpeg"},
        {make_audio_only_file(), VTR_ERR_FORMAT, "no video stream"},
        {strdup(test_tmpdir()), VTR_ERR_IO, "directory"},
        {strdup("/dev/null"), VTR_ERR_IO, "not a regular file (a character device)"},
    };
    const size_t n_cases = sizeof cases / sizeof cases[0];
    const vtr_sampler samplers[] = {
        {.mode = VTR_SAMPLE_ALL},
        {.mode = VTR_SAMPLE_FRAMES, .n = 5},
        {.mode = VTR_SAMPLE_KEYFRAMES},
    };
    char *audio = strdup(test_path("bad.wav"));
    for (size_t c = 0; c < n_cases; c++)
        for (size_t s = 0; s < sizeof samplers / sizeof samplers[0]; s++) {
            vtr_decode_options o;
            vtr_decode_options_defaults(&o);
            o.sampler = samplers[s];
            /* several threads: the reader uses slice threads only, so no damaged frame
             * slips through late (with frame threads the garbled keyframe once decoded
             * "ok") and the flipped AVI cannot abort the process; timed samplers decode
             * stretches of the file at once */
            o.threads = 4;
            vtr_decoded_item it;
            vtr_error err;
            vtr_error_clear(&err);
            vtr_status st = vtr_decode_item(cases[c].path, &o, audio, &it, &err);
            CHECK_MSG(st == cases[c].status, "%s (sampler %zu): %s, expected %s: %s",
                      cases[c].path, s, vtr_status_name(st), vtr_status_name(cases[c].status),
                      err.msg);
            CHECK_MSG(strstr(err.msg, cases[c].path) && strstr(err.msg, cases[c].needle),
                      "%s: message \"%s\" lacks the path or \"%s\"", cases[c].path, err.msg,
                      cases[c].needle);
            CHECK_MSG(!strchr(err.msg, '\n'), "a one-line message: %s", err.msg);
            CHECK(it.frames.data == NULL && it.meta == NULL);
            CHECK(!exists(audio));
            /* one decoder gives the same error as several stretches of the file at once */
            vtr_error one;
            o.threads = 1;
            CHECK_EQ_INT(vtr_decode_item(cases[c].path, &o, audio, &it, &one), st);
            CHECK_MSG(!strcmp(one.msg, err.msg), "%s: \"%s\" with one thread, \"%s\" with four",
                      cases[c].path, one.msg, err.msg);
        }
    check_no_temporaries();
    for (size_t c = 0; c < n_cases; c++)
        free(cases[c].path);
    free(audio);
}
