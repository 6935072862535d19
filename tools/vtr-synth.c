/* vtr-synth: write a synthetic video or image whose frames show their own index
 * (tools/synth_video.h), for tests and benchmarks; or, with --scenes, an archive of
 * captioned scenes with MSR-VTT annotations (tools/synth_scene.h), for the demo. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <libavutil/log.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "decode/frame_sampler.h"
#include "lib/args.h"
#include "lib/blas_kernel.h"
#include "lib/file.h"
#include "lib/log.h"
#include "lib/version.h"
#include "tools/synth_scene.h"
#include "tools/synth_video.h"

static void usage(FILE *out)
{
    fputs("Usage: vtr-synth [OPTION]... OUTPUT\n"
          "       vtr-synth --scenes N [--seed S] [--captions K] [--size WxH] [--frames N]\n"
          "                 [--fps R] DIR\n"
          "Writes a synthetic video (or image) whose every frame shows its index as a grid\n"
          "of light and dark cells that survives lossy compression.\n"
          "With --scenes: writes N captioned scene clips DIR/video0.mp4 ... (H.264; coloured\n"
          "circles, squares, triangles, stars and diamonds, still, moving or visible only\n"
          "briefly, over plain, gradient or noise backgrounds) and their annotations\n"
          "DIR/videodatainfo.json in the MSR-VTT layout (vtr-import msrvtt), splits train\n"
          "70%, validate 10%, test 20% in that order, and beside them the role graph of\n"
          "every caption (DIR/sent2rolegraph.augment.json, HGR's layout; vtr-import msrvtt\n"
          "stores them) and what every clip shows (DIR/scenes.json: {\"names\": the\n"
          "colours, shapes, sizes, motions and backgrounds; \"clips\": [{\"video_id\",\n"
          "\"background\": {\"kind\", \"colour\", \"colour2\" (gradient only)}, \"objects\":\n"
          "[{\"shape\", \"colour\", \"size\", \"motion\", \"brief\", \"first_frame\",\n"
          "\"last_frame\"}]}]}, to score searches); the same seed gives the same archive, byte\n"
          "for byte, on every CPU (H.264 through x264's C code).\n"
          "\n"
          "  --codec NAME        h264, mpeg4, mpeg2video, vp9, gif, png, mjpeg, webp, bmp,\n"
          "                      tiff, heif or avif [from OUTPUT's extension: .webm vp9,\n"
          "                      .avi mpeg4, .mpg, .mpeg and .vob mpeg2video, .gif gif (an\n"
          "                      animation, or a still with --frames 1), .png, .jpg, .webp,\n"
          "                      .bmp, .tif, .heic and .avif images (HEIF and AVIF through\n"
          "                      libheif), anything else h264]; the container follows\n"
          "                      the extension (.mp4, .mkv, .webm, .avi, .mov, .ts, .mpg)\n"
          "  --size WxH          frame size, even numbers [160x120]\n"
          "  --frames N          number of frames [50]\n"
          "  --fps R             constant frame rate: N, N.M or N/D [25]\n"
          "  --pts LIST          comma-separated frame timestamps in milliseconds: a variable\n"
          "                      frame rate video (sets --frames)\n"
          "  --gop N             keyframe every N frames [12]\n"
          "  --bframes N         consecutive B-frames [0]\n"
          "  --closed-gop        MPEG-2, MPEG-4: no B-frame references across keyframes\n"
          "  --start SECONDS     first timestamp [0]\n"
          "  --rotate DEG        display matrix: show turned DEG (90, 180, 270) clockwise\n"
          "  --audio CODEC       add a sine tone track: aac, opus, vorbis or mp2\n"
          "  --audio-rate HZ     [48000 for opus, else 44100]\n"
          "  --audio-channels N  1 or 2 [2]\n"
          "  --tone HZ           tone frequency [440]\n"
          "  --first-index K     index drawn into the first frame [0]\n"
          "  --quality Q         CRF (h264, vp9) or qscale (mpeg2video, mpeg4, mjpeg) [codec\n"
          "                      default]\n"
          "  --preset NAME       libx264 preset [veryfast]\n"
          "\n"
          "Scenes (size, frames and fps as above; defaults 160x120, 50 frames, 25 fps):\n"
          "  --scenes N          write N scene clips and their annotations into DIR\n"
          "  --seed S            the archive's seed [0]\n"
          "  --captions K        captions per clip [5]\n"
          "\n"
          "  -h, --help          this text\n"
          "      --version       the version\n"
          "\n"
          "Exit status: 0 written, 1 bad usage or a file could not be written.\n",
          out);
}

static int parse_int(const char *s, const char *what, long lo, long hi, int *out)
{
    long long v;
    if (vtr_parse_int(s, lo, hi, &v) != 0) {
        fprintf(stderr, "vtr-synth: %s: '%s' is not a number in %ld..%ld\n", what, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_double(const char *s, const char *what, double *out)
{
    if (vtr_parse_double(s, out) != 0) {
        fprintf(stderr, "vtr-synth: %s: '%s' is not a number\n", what, s);
        return -1;
    }
    return 0;
}

/* "1,40,95" -> pts array (owned by the caller) */
static int64_t *parse_pts(const char *s, int *count)
{
    int n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    long long *v = malloc((size_t)n * sizeof *v);
    int64_t *pts = malloc((size_t)n * sizeof *pts);
    if (v && pts && vtr_parse_ints(s, n, 0, INT64_MAX, v) == 0) {
        for (int i = 0; i < n; i++)
            pts[i] = v[i];
        *count = n;
    } else {
        fprintf(stderr, "vtr-synth: --pts: bad list '%s'\n", s);
        free(pts);
        pts = NULL;
    }
    free(v);
    return pts;
}

static void scene_progress(void *ctx, int done, int total)
{
    (void)done, (void)total;
    vtr_progress_step(ctx, 1);
}

/* --scenes: the archive in dir (created when missing). */
static int write_scenes(const char *dir, const vtr_synth_options *o, int clips, int captions,
                        uint64_t seed)
{
    vtr_scene_archive_options ao;
    vtr_scene_archive_defaults(&ao);
    ao.clips = clips;
    ao.seed = seed;
    ao.captions = captions;
    ao.width = o->width;
    ao.height = o->height;
    ao.frames = o->frames;
    if (o->fps_den != 1) {
        fputs("vtr-synth: --scenes takes a whole number of frames per second\n", stderr);
        return 1;
    }
    ao.fps = o->fps_num;
    vtr_error err;
    vtr_error_clear(&err);
    if (vtr_make_dirs(dir, &err) != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        return 1;
    }
    vtr_progress progress;
    vtr_progress_begin(&progress, "clips", clips);
    vtr_status st = vtr_scene_archive_write(dir, &ao, scene_progress, &progress, &err);
    vtr_progress_end(&progress);
    if (st != VTR_OK) {
        vtr_log_item_error(dir, &err);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    enum {
        OPT_CODEC = 256, OPT_SIZE, OPT_FRAMES, OPT_FPS, OPT_PTS, OPT_GOP, OPT_BFRAMES,
        OPT_CLOSED_GOP, OPT_START, OPT_ROTATE, OPT_AUDIO, OPT_AUDIO_RATE, OPT_AUDIO_CHANNELS,
        OPT_TONE, OPT_FIRST_INDEX, OPT_QUALITY, OPT_PRESET, OPT_SCENES, OPT_SEED,
        OPT_CAPTIONS, OPT_VERSION
    };
    static const struct option options[] = {
        {"codec", required_argument, NULL, OPT_CODEC},
        {"size", required_argument, NULL, OPT_SIZE},
        {"frames", required_argument, NULL, OPT_FRAMES},
        {"fps", required_argument, NULL, OPT_FPS},
        {"pts", required_argument, NULL, OPT_PTS},
        {"gop", required_argument, NULL, OPT_GOP},
        {"bframes", required_argument, NULL, OPT_BFRAMES},
        {"closed-gop", no_argument, NULL, OPT_CLOSED_GOP},
        {"start", required_argument, NULL, OPT_START},
        {"rotate", required_argument, NULL, OPT_ROTATE},
        {"audio", required_argument, NULL, OPT_AUDIO},
        {"audio-rate", required_argument, NULL, OPT_AUDIO_RATE},
        {"audio-channels", required_argument, NULL, OPT_AUDIO_CHANNELS},
        {"tone", required_argument, NULL, OPT_TONE},
        {"first-index", required_argument, NULL, OPT_FIRST_INDEX},
        {"quality", required_argument, NULL, OPT_QUALITY},
        {"preset", required_argument, NULL, OPT_PRESET},
        {"scenes", required_argument, NULL, OPT_SCENES},
        {"seed", required_argument, NULL, OPT_SEED},
        {"captions", required_argument, NULL, OPT_CAPTIONS},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    vtr_log_init("vtr-synth", false);
    av_log_set_level(AV_LOG_ERROR);
    vtr_synth_options o;
    vtr_synth_defaults(&o);
    int64_t *pts = NULL;
    int rc = 1, opt, scenes = 0, captions = 5;
    long long seed = 0;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        int bad = 0;
        switch (opt) {
        case OPT_CODEC: o.codec = optarg; break;
        case OPT_SIZE:
            if (vtr_parse_size(optarg, 32768, &o.width, &o.height) != 0) {
                fprintf(stderr, "vtr-synth: --size: expected WxH, got '%s'\n", optarg);
                bad = 1;
            }
            break;
        case OPT_FRAMES: bad = parse_int(optarg, "--frames", 1, 1000000, &o.frames); break;
        case OPT_FPS: {
            int64_t num, den;
            vtr_error e;
            if (vtr_sampler_parse_rate(optarg, &num, &den, &e) != VTR_OK || num > 1000000 ||
                den > 1000000) {
                fprintf(stderr, "vtr-synth: --fps: expected N, N.M or N/D, got '%s'\n", optarg);
                bad = 1;
            } else {
                o.fps_num = (int)num;
                o.fps_den = (int)den;
            }
            break;
        }
        case OPT_PTS:
            free(pts);
            pts = parse_pts(optarg, &o.frames);
            bad = !pts;
            o.pts = pts;
            break;
        case OPT_GOP: bad = parse_int(optarg, "--gop", 1, 100000, &o.gop); break;
        case OPT_BFRAMES: bad = parse_int(optarg, "--bframes", 0, 16, &o.b_frames); break;
        case OPT_CLOSED_GOP: o.closed_gop = true; break;
        case OPT_START: bad = parse_double(optarg, "--start", &o.start_time); break;
        case OPT_ROTATE: bad = parse_int(optarg, "--rotate", 0, 270, &o.rotation); break;
        case OPT_AUDIO: o.audio_codec = optarg; break;
        case OPT_AUDIO_RATE:
            bad = parse_int(optarg, "--audio-rate", 8000, 192000, &o.audio_rate);
            break;
        case OPT_AUDIO_CHANNELS:
            bad = parse_int(optarg, "--audio-channels", 1, 2, &o.audio_channels);
            break;
        case OPT_TONE: bad = parse_double(optarg, "--tone", &o.tone_hz); break;
        case OPT_FIRST_INDEX:
            bad = parse_int(optarg, "--first-index", 0, VTR_SYNTH_MAX_INDEX, &o.first_index);
            break;
        case OPT_QUALITY: bad = parse_int(optarg, "--quality", 0, 63, &o.quality); break;
        case OPT_PRESET: o.preset = optarg; break;
        case OPT_SCENES: bad = parse_int(optarg, "--scenes", 1, 1000000, &scenes); break;
        case OPT_CAPTIONS: bad = parse_int(optarg, "--captions", 1, 1000, &captions); break;
        case OPT_SEED:
            if (vtr_parse_int(optarg, 0, INT64_MAX, &seed) != 0) {
                fprintf(stderr, "vtr-synth: --seed: '%s' is not a number >= 0\n", optarg);
                bad = 1;
            }
            break;
        case 'h': usage(stdout); rc = 0; goto end;
        case OPT_VERSION:
            printf("vtr-synth %s\n%s\n", vtr_version, vtr_blas_kernel_report());
            rc = 0;
            goto end;
        default: bad = 1; break;
        }
        if (bad) {
            fputs("Try 'vtr-synth --help'.\n", stderr);
            goto end;
        }
    }
    if (optind != argc - 1) {
        fputs("vtr-synth: name one OUTPUT file (see --help)\n", stderr);
        goto end;
    }
    vtr_error err;
    vtr_error_clear(&err);
    if (scenes) {
        rc = write_scenes(argv[optind], &o, scenes, captions, (uint64_t)seed);
        goto end;
    }
    if (vtr_synth_write(argv[optind], &o, &err) != VTR_OK) {
        vtr_log_item_error(argv[optind], &err);
        goto end;
    }
    rc = 0;
end:
    free(pts);
    return rc;
}
