/* vtr-decode: video and image files -> frame records (or NPY files), optionally audio.
 * Argument parsing and reporting only; the work is in decode/decode_items.h. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <libavutil/log.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/decode_items.h"
#include "lib/args.h"
#include "lib/blas_kernel.h"
#include "lib/file.h"
#include "lib/item_output.h"
#include "lib/keyed_files.h"
#include "lib/log.h"
#include "lib/manifest.h"
#include "lib/version.h"

static const char usage_text[] =
    "Usage: vtr-decode [OPTION]... FILE...\n"
    "       vtr-decode [OPTION]... -m MANIFEST\n"
    "       vtr-decode [OPTION]... -            (paths, or KEY<TAB>PATH lines, on stdin)\n"
    "Decodes videos and images (single-frame videos) into frame records: per item one\n"
    "uint8 array (N, H, W, 3) of RGB frames, or float32 with --mean/--std, and a JSON\n"
    "object with the source, size, timestamps (seconds, from the pts), frame indices,\n"
    "duration, fps, rotation, sampler and audio. An item's key is its manifest key, or\n"
    "the file name without directory and extension; the output takes each key once (an\n"
    "item of a key written before, x.jpg of another folder, fails naming both files).\n"
    "\n"
    "Input and output:\n"
    "  -m, --manifest FILE   one PATH or KEY<TAB>PATH per line ('#' starts a comment)\n"
    "  -o, --output FILE     write the record stream to FILE [stdout]\n"
    "      --out-dir DIR     write DIR/KEY.npy and DIR/KEY.json per item instead\n"
    "\n"
    "Sampling (at most one; default: every frame):\n"
    "      --frames N        N frames uniformly over the duration, at the segment centres\n"
    "                        t_i = start + (i + 0.5) * duration / N, i = 0..N-1\n"
    "                        (rounded down to the stream's time base)\n"
    "      --fps R           t_k = start + k / R while t_k < start + duration (R: 2, 0.5,\n"
    "                        29.97 or 30000/1001)\n"
    "      --every K         frames 0, K, 2K, ... in presentation order\n"
    "      --keyframes       the keyframes only\n"
    "  The frame for a time t is the one displayed at t: the last frame, in presentation\n"
    "  order, whose pts <= t (the first frame when t precedes it); start and duration are\n"
    "  the video stream's. Sparse targets are reached by seeking to the keyframe before\n"
    "  them; frames nothing needs are not decoded.\n"
    "      --straight        decode every frame in order (no seeking or skipping); the\n"
    "                        frames delivered are the same, only slower\n"
    "      --max-frames N    an item that would give more than N frames fails (a damaged\n"
    "                        header declaring days of video, under --fps) [10000000]\n"
    "\n"
    "Geometry (frames are first turned upright as the display matrix says):\n"
    "      --size WxH        output size [the video's as shown: turned, square pixels]\n"
    "      --resize MODE     shorter-side: keep the aspect ratio, cover WxH [default];\n"
    "                        stretch: exactly WxH\n"
    "      --crop MODE       center: cut the WxH middle [default]; none: keep the whole\n"
    "                        resized picture\n"
    "      --mean R,G,B      with --std: float32 output (x / 255 - mean) / std\n"
    "      --std R,G,B       (e.g. 0.485,0.456,0.406 and 0.229,0.224,0.225)\n"
    "\n"
    "Audio (mono, 16-bit, through libsndfile; no audio stream is not an error):\n"
    "      --audio FILE      write the single input's audio to FILE (.wav or .flac)\n"
    "      --audio-dir DIR   write each item's audio to DIR/KEY.wav\n"
    "      --audio-format F  wav or flac, for --audio-dir [wav]\n"
    "      --audio-rate HZ   sample rate [16000]\n"
    "\n"
    "Other:\n"
    "      --threads N       threads per item: with --frames or --fps up to N stretches\n"
    "                        of the file decoded at once (cut at keyframes the decode\n"
    "                        jumps to anyway: the same bytes); the decoders' slice\n"
    "                        threads; 0 = one per core [0]\n"
    "      --log-json        log events as JSON lines on stderr\n"
    "  -v, --verbose         let FFmpeg print its own warnings\n"
    "  -h, --help            this text\n"
    "      --version         the version\n"
    "\n"
    "A file that cannot be decoded (missing, empty, truncated, corrupt, unknown codec, no\n"
    "video stream) is reported on stderr in one line naming it; the other items still\n"
    "finish, and nothing partial is written for it.\n"
    "Exit status: 0 every item decoded; 2 some items failed (the others were written);\n"
    "1 bad usage, or the output could not be opened or written.\n";

/* Appends the items of a manifest (lib/manifest.h); on failure prints why and returns -1. */
static int read_manifest(FILE *in, const char *name, vtr_keyed_files *l)
{
    vtr_line_reader r;
    vtr_line_reader_init(&r, in, name);
    vtr_error err;
    const char *key, *path;
    vtr_status st;
    while ((st = vtr_manifest_next(&r, &key, &path, &err)) == VTR_OK && path &&
           (st = vtr_keyed_files_add(l, key, path, &err)) == VTR_OK)
        ;
    vtr_line_reader_free(&r);
    if (st != VTR_OK)
        vtr_log_item_error(NULL, &err);
    return st == VTR_OK ? 0 : -1;
}

int main(int argc, char **argv)
{
    enum {
        OPT_OUT_DIR = 256,
        OPT_FRAMES,
        OPT_FPS,
        OPT_EVERY,
        OPT_KEYFRAMES,
        OPT_STRAIGHT,
        OPT_MAX_FRAMES,
        OPT_SIZE,
        OPT_RESIZE,
        OPT_CROP,
        OPT_MEAN,
        OPT_STD,
        OPT_AUDIO,
        OPT_AUDIO_DIR,
        OPT_AUDIO_FORMAT,
        OPT_AUDIO_RATE,
        OPT_THREADS,
        OPT_LOG_JSON,
        OPT_VERSION
    };
    static const struct option options[] = {
        {"manifest", required_argument, NULL, 'm'},
        {"output", required_argument, NULL, 'o'},
        {"out-dir", required_argument, NULL, OPT_OUT_DIR},
        {"frames", required_argument, NULL, OPT_FRAMES},
        {"fps", required_argument, NULL, OPT_FPS},
        {"every", required_argument, NULL, OPT_EVERY},
        {"keyframes", no_argument, NULL, OPT_KEYFRAMES},
        {"straight", no_argument, NULL, OPT_STRAIGHT},
        {"max-frames", required_argument, NULL, OPT_MAX_FRAMES},
        {"size", required_argument, NULL, OPT_SIZE},
        {"resize", required_argument, NULL, OPT_RESIZE},
        {"crop", required_argument, NULL, OPT_CROP},
        {"mean", required_argument, NULL, OPT_MEAN},
        {"std", required_argument, NULL, OPT_STD},
        {"audio", required_argument, NULL, OPT_AUDIO},
        {"audio-dir", required_argument, NULL, OPT_AUDIO_DIR},
        {"audio-format", required_argument, NULL, OPT_AUDIO_FORMAT},
        {"audio-rate", required_argument, NULL, OPT_AUDIO_RATE},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"log-json", no_argument, NULL, OPT_LOG_JSON},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    vtr_decode_options o;
    vtr_decode_options_defaults(&o);
    const char *manifest = NULL, *output = NULL, *out_dir = NULL, *audio = NULL;
    const char *audio_dir = NULL, *audio_ext = "wav";
    bool log_json = false, verbose = false, have_mean = false, have_std = false;
    int samplers = 0, opt;
    long long v;
    vtr_keyed_files items = {0};
    vtr_item_output *out = NULL;
    int rc = 1;

    while ((opt = getopt_long(argc, argv, "m:o:vh", options, NULL)) != -1) {
        const char *bad = NULL;
        switch (opt) {
        case 'm': manifest = optarg; break;
        case 'o': output = optarg; break;
        case OPT_OUT_DIR: out_dir = optarg; break;
        case OPT_FRAMES:
            samplers++;
            o.sampler.mode = VTR_SAMPLE_FRAMES;
            if (vtr_parse_int(optarg, 1, VTR_SAMPLER_MAX_TARGETS, &v) == 0)
                o.sampler.n = v;
            else
                bad = "--frames needs a count from 1";
            break;
        case OPT_FPS: {
            samplers++;
            o.sampler.mode = VTR_SAMPLE_FPS;
            vtr_error e;
            if (vtr_sampler_parse_rate(optarg, &o.sampler.fps_num, &o.sampler.fps_den, &e) !=
                VTR_OK)
                bad = "--fps needs a positive rate: 2, 0.5, 29.97 or 30000/1001";
            break;
        }
        case OPT_EVERY:
            samplers++;
            o.sampler.mode = VTR_SAMPLE_EVERY;
            if (vtr_parse_int(optarg, 1, INT64_MAX, &v) == 0)
                o.sampler.n = v;
            else
                bad = "--every needs a step from 1";
            break;
        case OPT_KEYFRAMES:
            samplers++;
            o.sampler.mode = VTR_SAMPLE_KEYFRAMES;
            break;
        case OPT_STRAIGHT: o.straight = true; break;
        case OPT_MAX_FRAMES:
            if (vtr_parse_int(optarg, 1, VTR_SAMPLER_MAX_TARGETS, &v) == 0)
                o.max_frames = v;
            else
                bad = "--max-frames needs a count from 1 to 10000000";
            break;
        case OPT_SIZE:
            if (vtr_parse_size(optarg, 32768, &o.geometry.width, &o.geometry.height) != 0)
                bad = "--size needs WxH, e.g. 224x224";
            break;
        case OPT_RESIZE:
            if (!strcmp(optarg, "shorter-side"))
                o.geometry.resize = VTR_RESIZE_SHORTER_SIDE;
            else if (!strcmp(optarg, "stretch"))
                o.geometry.resize = VTR_RESIZE_STRETCH;
            else
                bad = "--resize is shorter-side or stretch";
            break;
        case OPT_CROP:
            if (!strcmp(optarg, "center"))
                o.geometry.crop = VTR_CROP_CENTER;
            else if (!strcmp(optarg, "none"))
                o.geometry.crop = VTR_CROP_NONE;
            else
                bad = "--crop is center or none";
            break;
        case OPT_MEAN:
            have_mean = true;
            if (vtr_parse_floats(optarg, 3, o.mean) != 0)
                bad = "--mean needs R,G,B";
            break;
        case OPT_STD:
            have_std = true;
            if (vtr_parse_floats(optarg, 3, o.std) != 0 || !(o.std[0] > 0) || !(o.std[1] > 0) ||
                !(o.std[2] > 0))
                bad = "--std needs three positive numbers R,G,B";
            break;
        case OPT_AUDIO: audio = optarg; break;
        case OPT_AUDIO_DIR: audio_dir = optarg; break;
        case OPT_AUDIO_FORMAT:
            if (!strcmp(optarg, "wav") || !strcmp(optarg, "flac"))
                audio_ext = optarg;
            else
                bad = "--audio-format is wav or flac";
            break;
        case OPT_AUDIO_RATE:
            if (vtr_parse_int(optarg, 1, 384000, &v) == 0 && v >= 1000)
                o.audio_rate = (int)v;
            else
                bad = "--audio-rate needs a rate in Hz from 1000 to 384000";
            break;
        case OPT_THREADS:
            if (!strcmp(optarg, "0"))
                o.threads = 0;
            else if (vtr_parse_int(optarg, 1, 256, &v) == 0)
                o.threads = (int)v;
            else
                bad = "--threads needs a count from 0 to 256";
            break;
        case OPT_LOG_JSON: log_json = true; break;
        case 'v': verbose = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case OPT_VERSION:
            printf("vtr-decode %s\n%s\n", vtr_version, vtr_blas_kernel_report());
            return 0;
        default: fputs("Try 'vtr-decode --help'.\n", stderr); return 1;
        }
        if (bad) {
            fprintf(stderr, "vtr-decode: %s (got '%s')\n", bad, optarg);
            return 1;
        }
    }
    vtr_log_init("vtr-decode", log_json);
    av_log_set_level(verbose ? AV_LOG_WARNING : AV_LOG_QUIET);
    const char *usage_error = NULL;
    if (samplers > 1)
        usage_error = "choose one of --frames, --fps, --every and --keyframes";
    else if (have_mean != have_std)
        usage_error = "--mean and --std go together";
    else if (output && out_dir)
        usage_error = "--output and --out-dir exclude each other";
    else if (audio && audio_dir)
        usage_error = "--audio and --audio-dir exclude each other";
    else if (!manifest && optind == argc)
        usage_error = "no input: name files, a manifest (-m) or - for stdin";
    if (usage_error) {
        fprintf(stderr, "vtr-decode: %s (see --help)\n", usage_error);
        return 1;
    }
    o.normalize = have_mean;

    /* the items */
    if (manifest) {
        FILE *f = fopen(manifest, "r");
        if (!f) {
            vtr_error err;
            vtr_fail_errno(&err, "%s", manifest);
            vtr_log_item_error(NULL, &err);
            goto end;
        }
        int r = read_manifest(f, manifest, &items);
        fclose(f);
        if (r != 0)
            goto end;
    }
    for (int i = optind; i < argc; i++) {
        if (!strcmp(argv[i], "-")) {
            if (read_manifest(stdin, "stdin", &items) != 0)
                goto end;
        } else if (vtr_keyed_files_add(&items, NULL, argv[i], NULL) != VTR_OK) {
            fprintf(stderr, "vtr-decode: out of memory\n");
            goto end;
        }
    }
    if (audio && items.n != 1) {
        fprintf(stderr, "vtr-decode: --audio takes one input; use --audio-dir for %zu\n", items.n);
        goto end;
    }

    /* the output */
    vtr_error err;
    vtr_error_clear(&err);
    vtr_item_output_options oo = {
        .path = output, .alternatives = "-o FILE, --out-dir DIR or a pipe", .dir = out_dir};
    if (vtr_item_output_open(&oo, &out, &err) != VTR_OK ||
        (audio_dir && vtr_make_dirs(audio_dir, &err) != VTR_OK)) {
        vtr_log_item_error(NULL, &err);
        goto end;
    }

    vtr_item_log r = {0};
    vtr_decode_audio ad = {.file = audio, .dir = audio_dir, .ext = audio_ext};
    vtr_progress_begin(&r.progress, "items", (int64_t)items.n);
    vtr_item_report report = vtr_item_log_report(&r);
    vtr_status st = vtr_decode_items(&items, &o, &ad, out, &report);
    vtr_progress_end(&r.progress);
    if (st != VTR_OK) /* the output broke, reported with its item */
        goto end;
    if (vtr_item_output_commit(out, &err) != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        goto end;
    }
    rc = r.failed ? 2 : 0;
end:
    vtr_item_output_close(out);
    vtr_keyed_files_free(&items);
    return rc;
}
