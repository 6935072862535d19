/* vtr-features: frame records -> CNN feature sets (records, NPY files or a feature store).
 * Argument parsing and reporting only; the work is in features/frame_features.h and,
 * with --audio, features/audio_features.h. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "features/audio_features.h"
#include "features/backbone.h"
#include "features/conv.h"
#include "features/extractor.h"
#include "features/frame_features.h"
#include "features/logmel.h"
#include "lib/args.h"
#include "lib/blas_kernel.h"
#include "lib/hash.h"
#include "lib/item_output.h"
#include "lib/keyed_files.h"
#include "lib/log.h"
#include "lib/shard.h"
#include "lib/version.h"

static const char usage_text[] =
    "Usage: vtr-features [OPTION]... --weights FILE [RECORDS]...\n"
    "       vtr-features --audio [OPTION]... AUDIO|DIR...\n"
    "Reads frame records (uint8 RGB frames (N, H, W, 3) per item, as vtr-decode writes\n"
    "them) from the files named, or from stdin when none is named or for '-', runs a CNN\n"
    "over every frame and writes one feature set per item: float32 (N, D), each frame's\n"
    "globally pooled features (D = 2048 for ResNet-50/101/152, 512 for ResNet-18/34),\n"
    "or with --grid (N*G, D), the G cells of each frame's last feature map (7x7 for\n"
    "224x224 frames), frame after frame. The item's metadata passes through, with\n"
    "\"extractor\" added (architecture, weights and their SHA-256, grid, dtype).\n"
    "\n"
    "Model:\n"
    "  -w, --weights FILE    backbone weights: torchvision's ResNets with torchvision's\n"
    "                        names (conv1.weight, bn1.*, layer1.0.conv1.weight, ...; fc.*\n"
    "                        ignored), as safetensors or a torch.save state_dict (.pth, as\n"
    "                        torchvision releases them; read without PyTorch, its pickle\n"
    "                        never run); or a Keras CNN converted by vtr-backbone-init\n"
    "                        --tfjs (MobileNetV2, InceptionV3: pipeline/nsfwjs.sh)\n"
    "  -a, --arch NAME       resnet18, resnet34, resnet50, resnet101, resnet152,\n"
    "                        mobilenet_v2, inception_v3 or keras (another Keras CNN)\n"
    "                        [the weights': their metadata, else their tensors]\n"
    "      --grid            grid features instead of pooled ones\n"
    "      --device DEV      cpu (oneDNN), or cuda or cuda:N (cuDNN on GPU N, 0 for cuda)\n"
    "                        [cpu]\n"
    "      --bf16            convolutions in bfloat16 with float32 sums (CPUs with\n"
    "                        AVX512-BF16 or AMX, GPUs from Ampere on; elsewhere a\n"
    "                        warning, and float32); features stay float32, cosine to\n"
    "                        float32's about 0.9999\n"
    "      --batch N         frames per backbone call; batches span items [32]\n"
    "      --threads N       CPU threads, 0 = one per core [0]\n"
    "\n"
    "Preprocessing (resize and crop as torchvision's eval transform on a PIL image, bit for\n"
    "bit; then (pixel / 255 - mean) / std); the defaults are the weights': torchvision's\n"
    "ImageNet transform for ResNets (256, 224, the ImageNet mean and std), what\n"
    "vtr-backbone-init --tfjs recorded for a Keras CNN (its input size, mean 0 and std 1\n"
    "for nsfwjs's models):\n"
    "      --resize N        shorter side after resizing (Pillow bilinear), 0 = keep\n"
    "      --crop N          side of the center crop, 0 = none; frames of exactly NxN\n"
    "                        pixels (vtr-decode --size 224x224) are only normalized\n"
    "      --mean R,G,B      of pixel / 255\n"
    "      --std R,G,B\n"
    "\n"
    "Audio (--audio: log-mel spectrograms instead of CNN features):\n"
    "      --audio           read audio files (WAV, FLAC, anything libsndfile reads; a\n"
    "                        directory: its *.wav and *.flac files, as vtr-decode --audio-dir\n"
    "                        writes them) and write per item float32 (frames, mels), frame\n"
    "                        t covering samples [t*hop, t*hop + window): frames =\n"
    "                        1 + (samples - window) / hop; the key is the file name without\n"
    "                        extension. Definition: features/logmel.h (VGGish's)\n"
    "      --window S        analysis window, seconds [0.025]\n"
    "      --hop S           hop between frames, seconds [0.010]\n"
    "      --mels N          mel bands [64]\n"
    "      --fmin HZ         lower edge of the first band [125]\n"
    "      --fmax HZ         upper edge of the last band, at most half the rate [7500]\n"
    "      --n-fft N         FFT size, a power of two >= the window, 0 = the smallest [0]\n"
    "      --power P         1: magnitude, 2: power spectrum [1]\n"
    "      --log-offset X    added before the log [1e-6] (VGGish: 0.01)\n"
    "\n"
    "Output (one of):\n"
    "  -o, --output FILE     feature-set records to FILE [stdout]\n"
    "      --out-dir DIR     DIR/KEY.npy and DIR/KEY.json per item\n"
    "      --store DIR       a feature store (rows.npy, offsets.npy, keys.txt, meta.json)\n"
    "      --half            float16 features\n"
    "\n"
    "Sharding (docs/sharding.md; vtr-merge joins the parts):\n"
    "      --shard I/N       shard I of N (0 <= I < N) takes the records at positions p\n"
    "                        with p % N == I (counted over all inputs), with --audio the\n"
    "                        contiguous share I of the files; under mpirun (without\n"
    "                        --shard) rank R of N is shard R of N. With N > 1 the output\n"
    "                        FILE or DIR becomes FILE.shard-I-of-N or DIR.shard-I-of-N;\n"
    "                        stdout is refused under mpirun\n"
    "\n"
    "Other:\n"
    "      --log-json        log events as JSON lines on stderr\n"
    "  -h, --help            this text\n"
    "      --version         the version\n"
    "\n"
    "A record that is not uint8 frames (N, H, W, 3), or with --audio a file that is not\n"
    "audio, and an item of a key written before (x.wav of another folder: the output\n"
    "takes each key once) are reported on stderr in one line naming the key; the other\n"
    "items still finish. Weights that do not fit the architecture (a missing tensor, a\n"
    "wrong shape) stop the program with one line naming the tensor; weights of another\n"
    "architecture than --arch, with one line naming theirs.\n"
    "Exit status: 0 every item done; 2 some items (or an input stream) failed, the others\n"
    "were written; 1 bad usage, unusable weights, or the output could not be written.\n";

int main(int argc, char **argv)
{
    enum {
        OPT_GRID = 256,
        OPT_DEVICE,
        OPT_BATCH,
        OPT_THREADS,
        OPT_RESIZE,
        OPT_CROP,
        OPT_MEAN,
        OPT_STD,
        OPT_OUT_DIR,
        OPT_STORE,
        OPT_HALF,
        OPT_BF16,
        OPT_LOG_JSON,
        OPT_VERSION,
        OPT_AUDIO,
        OPT_WINDOW,
        OPT_HOP,
        OPT_MELS,
        OPT_FMIN,
        OPT_FMAX,
        OPT_N_FFT,
        OPT_POWER,
        OPT_LOG_OFFSET,
        OPT_SHARD
    };
    static const struct option options[] = {
        {"weights", required_argument, NULL, 'w'},
        {"arch", required_argument, NULL, 'a'},
        {"grid", no_argument, NULL, OPT_GRID},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"resize", required_argument, NULL, OPT_RESIZE},
        {"crop", required_argument, NULL, OPT_CROP},
        {"mean", required_argument, NULL, OPT_MEAN},
        {"std", required_argument, NULL, OPT_STD},
        {"output", required_argument, NULL, 'o'},
        {"out-dir", required_argument, NULL, OPT_OUT_DIR},
        {"store", required_argument, NULL, OPT_STORE},
        {"half", no_argument, NULL, OPT_HALF},
        {"bf16", no_argument, NULL, OPT_BF16},
        {"log-json", no_argument, NULL, OPT_LOG_JSON},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {"audio", no_argument, NULL, OPT_AUDIO},
        {"window", required_argument, NULL, OPT_WINDOW},
        {"hop", required_argument, NULL, OPT_HOP},
        {"mels", required_argument, NULL, OPT_MELS},
        {"fmin", required_argument, NULL, OPT_FMIN},
        {"fmax", required_argument, NULL, OPT_FMAX},
        {"n-fft", required_argument, NULL, OPT_N_FFT},
        {"power", required_argument, NULL, OPT_POWER},
        {"log-offset", required_argument, NULL, OPT_LOG_OFFSET},
        {"shard", required_argument, NULL, OPT_SHARD},
        {NULL, 0, NULL, 0},
    };
    vtr_extractor_options xo;
    vtr_extractor_defaults(&xo);
    vtr_preprocess_unset(&xo.pre); /* the backbone's, unless given */
    const char *weights = NULL, *output = NULL, *out_dir = NULL, *store = NULL;
    const char *shard_option = NULL;
    vtr_backbone_arch arch = VTR_BACKBONE_ARCH_INFER;
    vtr_device device = VTR_DEVICE_CPU;
    int device_index = 0;
    bool log_json = false, half = false, audio = false, bf16 = false;
    vtr_logmel_options lo;
    vtr_logmel_options_defaults(&lo);
    const char *image_option = NULL; /* an option of the CNN mode, refused with --audio */
    const char *audio_option = NULL; /* an option of --audio, refused without it */
    int threads = 0, opt;
    double d;
    long long v;
    vtr_error err;
    vtr_error_clear(&err);

    while ((opt = getopt_long(argc, argv, "w:a:o:h", options, NULL)) != -1) {
        const char *bad = NULL;
        switch (opt) {
        case 'w':
            weights = optarg;
            image_option = "--weights";
            break;
        case 'a':
            image_option = "--arch";
            if (vtr_backbone_arch_parse(optarg, &arch, &err) != VTR_OK)
                bad = "--arch is resnet18, resnet34, resnet50, resnet101, resnet152, "
                      "mobilenet_v2, inception_v3 or keras";
            break;
        case OPT_GRID:
            xo.grid = true;
            image_option = "--grid";
            break;
        case OPT_DEVICE:
            image_option = "--device";
            if (vtr_device_parse(optarg, &device, &device_index, &err) != VTR_OK)
                bad = "--device is cpu, cuda or cuda:N";
            break;
        case OPT_BATCH:
            image_option = "--batch";
            if (vtr_parse_int(optarg, 1, 65536, &v) == 0)
                xo.batch = (int)v;
            else
                bad = "--batch needs a count from 1 to 65536";
            break;
        case OPT_THREADS:
            if (vtr_parse_int(optarg, 0, 1024, &v) == 0)
                threads = (int)v;
            else
                bad = "--threads needs a count from 0 to 1024";
            break;
        case OPT_RESIZE:
            image_option = "--resize";
            if (vtr_parse_int(optarg, 0, 65536, &v) == 0)
                xo.pre.resize = (int)v;
            else
                bad = "--resize needs a size from 0 to 65536";
            break;
        case OPT_CROP:
            image_option = "--crop";
            if (vtr_parse_int(optarg, 0, 65536, &v) == 0)
                xo.pre.crop = (int)v;
            else
                bad = "--crop needs a size from 0 to 65536";
            break;
        case OPT_MEAN:
            image_option = "--mean";
            if (vtr_parse_floats(optarg, 3, xo.pre.mean) != 0)
                bad = "--mean needs R,G,B";
            break;
        case OPT_STD:
            image_option = "--std";
            if (vtr_parse_floats(optarg, 3, xo.pre.std) != 0 || !(xo.pre.std[0] > 0) ||
                !(xo.pre.std[1] > 0) || !(xo.pre.std[2] > 0))
                bad = "--std needs three positive numbers R,G,B";
            break;
        case 'o': output = optarg; break;
        case OPT_OUT_DIR: out_dir = optarg; break;
        case OPT_STORE: store = optarg; break;
        case OPT_HALF: half = true; break;
        case OPT_BF16:
            bf16 = true;
            image_option = "--bf16";
            break;
        case OPT_LOG_JSON: log_json = true; break;
        case OPT_SHARD: shard_option = optarg; break;
        case OPT_AUDIO: audio = true; break;
        case OPT_WINDOW:
            audio_option = "--window";
            if (vtr_parse_double(optarg, &d) == 0 && d > 0)
                lo.window_s = d;
            else
                bad = "--window needs a positive number of seconds";
            break;
        case OPT_HOP:
            audio_option = "--hop";
            if (vtr_parse_double(optarg, &d) == 0 && d > 0)
                lo.hop_s = d;
            else
                bad = "--hop needs a positive number of seconds";
            break;
        case OPT_MELS:
            audio_option = "--mels";
            if (vtr_parse_int(optarg, 1, 1024, &v) == 0)
                lo.n_mels = (int)v;
            else
                bad = "--mels needs a count from 1 to 1024";
            break;
        case OPT_FMIN:
            audio_option = "--fmin";
            if (vtr_parse_double(optarg, &d) == 0 && d >= 0)
                lo.fmin_hz = d;
            else
                bad = "--fmin needs a frequency >= 0 Hz";
            break;
        case OPT_FMAX:
            audio_option = "--fmax";
            if (vtr_parse_double(optarg, &d) == 0 && d > 0)
                lo.fmax_hz = d;
            else
                bad = "--fmax needs a frequency > 0 Hz";
            break;
        case OPT_N_FFT:
            audio_option = "--n-fft";
            if (vtr_parse_int(optarg, 0, 1 << 21, &v) == 0 && (v & (v - 1)) == 0)
                lo.n_fft = (int)v;
            else
                bad = "--n-fft needs 0 or a power of two";
            break;
        case OPT_POWER:
            audio_option = "--power";
            if (vtr_parse_int(optarg, 1, 2, &v) == 0)
                lo.power = (int)v;
            else
                bad = "--power is 1 or 2";
            break;
        case OPT_LOG_OFFSET:
            audio_option = "--log-offset";
            if (vtr_parse_double(optarg, &d) == 0 && d > 0)
                lo.log_offset = d;
            else
                bad = "--log-offset needs a number > 0";
            break;
        case 'h': fputs(usage_text, stdout); return 0;
        case OPT_VERSION:
            printf("vtr-features %s\n%s\n%s\n", vtr_version, vtr_blas_kernel_report(),
                   vtr_conv_cpu_report());
            return 0;
        default: fputs("Try 'vtr-features --help'.\n", stderr); return 1;
        }
        if (bad) {
            fprintf(stderr, "vtr-features: %s (got '%s')\n", bad, optarg);
            return 1;
        }
    }
    const char *usage_error = NULL;
    char usage_buf[128];
    if (audio && image_option) {
        snprintf(usage_buf, sizeof usage_buf, "%s is for CNN features, not --audio", image_option);
        usage_error = usage_buf;
    } else if (!audio && audio_option) {
        snprintf(usage_buf, sizeof usage_buf, "%s goes with --audio", audio_option);
        usage_error = usage_buf;
    } else if (audio && !(lo.fmin_hz < lo.fmax_hz))
        usage_error = "--fmin must be below --fmax";
    else if (audio && optind == argc)
        usage_error = "--audio needs audio files or directories";
    else if (!audio && !weights)
        usage_error = "--weights FILE is required";
    else if ((output != NULL) + (out_dir != NULL) + (store != NULL) > 1)
        usage_error = "--output, --out-dir and --store exclude each other";
    if (usage_error) {
        fprintf(stderr, "vtr-features: %s (see --help)\n", usage_error);
        return 1;
    }
    if (threads > 0)
        omp_set_num_threads(threads);

    /* the shard, and where it writes */
    int rc = 1;
    vtr_dist dist;
    vtr_shard shard;
    char name[96], *shard_out = NULL;
    const char **named = store ? &store : out_dir ? &out_dir : &output;
    if (vtr_shard_start(shard_option, *named, &dist, &shard, &shard_out, &err) != VTR_OK) {
        fprintf(stderr, "vtr-features: %s\n", err.msg);
        vtr_dist_finalize(&dist);
        return 1;
    }
    vtr_log_init(vtr_shard_program_name(&shard, "vtr-features", name, sizeof name), log_json);
    *named = shard_out;

    vtr_item_log r = {0};
    vtr_item_report report = vtr_item_log_report(&r);
    vtr_backbone *backbone = NULL;
    vtr_frame_features *ff = NULL;
    vtr_item_output *out = NULL;
    char sha[VTR_SHA256_HEX_SIZE];
    vtr_keyed_files audio_files = {0};
    json_t *audio_params = NULL; /* --audio: the store's provenance */
    char what[64];               /* the store's extractor */
    int64_t dim;

    if (audio) {
        audio_params = vtr_audio_features_source(&lo);
        if (!audio_params || vtr_audio_features_list(argv + optind, argc - optind, &audio_files,
                                                     &report, &err) != VTR_OK) {
            fprintf(stderr, "vtr-features: out of memory\n");
            goto end;
        }
        snprintf(what, sizeof what, "logmel");
        dim = lo.n_mels;
    } else {
        /* the model and what is recorded about it */
        if (vtr_file_sha256(weights, sha, &err) != VTR_OK ||
            (device == VTR_DEVICE_CUDA && vtr_cuda_init(device_index, NULL, 0, &err) != VTR_OK) ||
            vtr_backbone_load(weights, arch, device, &backbone, &err) != VTR_OK) {
            vtr_log_item_error(NULL, &err);
            goto end;
        }
        if (bf16 && vtr_backbone_set_bf16(backbone, true, &err) != VTR_OK)
            fprintf(stderr, "vtr-features: warning: --bf16: %s; running float32\n", err.msg);
        vtr_preprocess_options theirs;
        vtr_backbone_preprocess(backbone, &theirs);
        vtr_preprocess_fill(&xo.pre, &theirs);
        if (vtr_frame_features_new(backbone, vtr_backbone_get_arch(backbone), weights, sha, &xo,
                                   half, &ff, &err) != VTR_OK) {
            vtr_log_item_error(NULL, &err);
            goto end;
        }
        snprintf(what, sizeof what, "%s/%s",
                 vtr_backbone_arch_name(vtr_backbone_get_arch(backbone)),
                 xo.grid ? "grid" : "avgpool");
        dim = vtr_backbone_dim(backbone);
    }

    /* the output */
    vtr_feature_store_options so = {
        .dim = dim,
        .extractor = what,
        .source = audio ? audio_params : vtr_frame_features_provenance(ff)};
    vtr_item_output_options oo = {.path = output,
                                  .alternatives = "-o FILE, --out-dir DIR, --store DIR or a pipe",
                                  .dir = out_dir,
                                  .store = store,
                                  .store_options = &so,
                                  .half = half};
    if (vtr_item_output_open(&oo, &out, &err) != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        goto end;
    }

    /* the inputs: audio files, or record streams one after the other */
    vtr_progress_begin(&r.progress, "items", -1);
    vtr_status st = audio ? vtr_audio_features_write(&audio_files, &shard, &lo, out, &report)
                          : vtr_frame_features_run(ff, argv + optind, argc - optind, &shard, out,
                                                   &report);
    vtr_progress_end(&r.progress);
    if (st != VTR_OK) /* reported */
        goto end;
    if (vtr_item_output_commit(out, &err) != VTR_OK) {
        vtr_log_item_error(NULL, &err);
        goto end;
    }
    rc = r.failed ? 2 : 0;
end:
    vtr_item_output_close(out);
    vtr_frame_features_free(ff);
    vtr_backbone_free(backbone);
    json_decref(audio_params);
    vtr_keyed_files_free(&audio_files);
    free(shard_out);
    vtr_dist_finalize(&dist);
    return rc;
}
