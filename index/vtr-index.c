/* vtr-index: a video archive -> an embedding index, incrementally. Argument parsing and
 * reporting only; the work is in index/archive_index.h. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <libavutil/log.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "features/conv.h"
#include "index/archive_index.h"
#include "lib/args.h"
#include "lib/blas_kernel.h"
#include "lib/log.h"
#include "lib/shard.h"
#include "lib/version.h"

static const char usage_text[] =
    "Usage: vtr-index [OPTION]... DIR|MANIFEST --model CKPT --index OUT\n"
    "Indexes a video archive for text search: every video and image file under DIR\n"
    "(recursively, by extension: mp4 m4v mov mkv webm avi mpg mpeg vob m2v ts mts m2ts\n"
    "mxf dv flv f4v wmv asf rm rmvb 3gp 3g2 ogv gif jpg jpeg png bmp webp tif tiff avif\n"
    "jxl heic heif; names starting with '.' skipped), or every path listed in MANIFEST\n"
    "(one PATH or KEY<TAB>PATH per line, '#' comments; the key, or else the path, names\n"
    "the item), is decoded, N frames are sampled uniformly, a CNN backbone gives each\n"
    "frame's features, and the trained model pools and projects them into one\n"
    "L2-normalized embedding, stored as float16 in the index OUT\n"
    "(OUT/index.sqlite, OUT/seg-*.npy; docs/index.md) with the catalog\n"
    "OUT/catalog.sqlite (path, size, mtime, duration, status, failure reason per file).\n"
    "\n"
    "Incremental: files already indexed with the same size and mtime are skipped without\n"
    "decoding; new files are added; changed files are redone; files no longer in the\n"
    "source are dropped. Files that failed are recorded and skipped on later runs unless\n"
    "--retry-failed. The work is committed every --commit-every files, so the program may\n"
    "be killed at any point and rerun; searches see the last commit meanwhile. An\n"
    "approximate index (vtr-approx) is brought up to date at the end: the new items\n"
    "added to it, or, after a compaction, built again.\n"
    "\n"
    "Model (recorded in a new index; a later run must use the same, or is refused):\n"
    "  -m, --model CKPT      the trained model (a vtr-train checkpoint)\n"
    "      --vocab FILE      its vocabulary [vocab.json beside CKPT, or its config's]\n"
    "  -w, --weights FILE    backbone weights with torchvision's names: safetensors or a\n"
    "                        torch.save state_dict (.pth); required for a new index\n"
    "                        [the index's]\n"
    "  -a, --arch NAME       resnet18, resnet34, resnet50, resnet101 or resnet152\n"
    "                        [the index's, or the weights']\n"
    "      --frames N        frames per video [the index's, or 8]\n"
    "      --resize N        shorter side before the crop, 0 = keep [the index's, or the\n"
    "                        backbone's: 256 for ResNets, the input size of a Keras CNN]\n"
    "      --crop N          center crop side, 0 = none [the index's, or the backbone's]\n"
    "      --device DEV      cpu, or cuda or cuda:N (GPU N, 0 for cuda), for the backbone\n"
    "                        and the model's encoders [cpu]\n"
    "      --bf16            the backbone in bfloat16: vtr-features --bf16 (a CPU\n"
    "                        without AVX512-BF16 or AMX: a warning, and float32; a GPU\n"
    "                        before Ampere: an error)\n"
    "\n"
    "Run:\n"
    "  -o, --index OUT       the index directory (created when absent)\n"
    "      --retry-failed    redo files that failed before, even when unchanged\n"
    "      --commit-every N  files per commit [32]\n"
    "      --decode-ahead N  files decoded ahead, on a thread of their own, while the\n"
    "                        backbone and the model embed the current one; 0: each in\n"
    "                        its turn [2]\n"
    "      --threads N       CPU threads, 0 = one per core [0]\n"
    "      --shard I/N       shard I of N (0 <= I < N): index the contiguous share I of\n"
    "                        the archive's files (in key order) into OUT.shard-I-of-N;\n"
    "                        under mpirun (without --shard) rank R of N is shard R of N.\n"
    "                        vtr-merge joins the shards' indexes (docs/sharding.md); keep\n"
    "                        N from run to run, or the shares move\n"
    "      --log-json        log events as JSON lines on stderr\n"
    "  -h, --help            this text\n"
    "      --version         the version\n"
    "\n"
    "A file that cannot be indexed (unreadable, not a video, corrupt) is reported on\n"
    "stderr in one line naming it and the cause; the others still finish. At the end a\n"
    "summary line gives the counts.\n"
    "SIGINT or SIGTERM stops the run after the file it is on, committing the work done\n"
    "(a second one ends it at once); a rerun goes on from there.\n"
    "Exit status: 0 every file indexed (or unchanged); 2 some files failed in this run, or\n"
    "it was stopped by a signal; 1 bad usage, or a fatal error (model, backbone, index or\n"
    "catalog unusable, another model's index); what was committed before it stays.\n";

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

typedef struct reporter {
    vtr_progress progress;
    bool begun;
} reporter;

static void on_plan(void *ctx, const vtr_archive_stats *p)
{
    reporter *r = ctx;
    vtr_log_info("%lld files: %lld new, %lld changed, %lld unchanged, %lld failed before "
                 "(skipped), %lld gone",
                 (long long)p->files, (long long)p->added, (long long)p->updated,
                 (long long)p->unchanged, (long long)p->skipped_failed, (long long)p->removed);
    json_t *ev = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "files", (json_int_t)p->files,
                           "new", (json_int_t)p->added, "changed", (json_int_t)p->updated,
                           "unchanged", (json_int_t)p->unchanged, "skipped_failed",
                           (json_int_t)p->skipped_failed, "gone", (json_int_t)p->removed);
    vtr_log_event("plan", ev);
    json_decref(ev);
    vtr_progress_begin(&r->progress, "files", p->added + p->updated);
    r->begun = true;
}

static void on_item(void *ctx, const char *key, vtr_archive_outcome outcome,
                    const vtr_error *err)
{
    reporter *r = ctx;
    if (outcome == VTR_ARCHIVE_FAILED)
        vtr_log_item_error(key, err);
    json_t *ev = json_pack("{s:s, s:s}", "key", key, "outcome", vtr_archive_outcome_name(outcome));
    vtr_log_event("item", ev);
    json_decref(ev);
    if (outcome != VTR_ARCHIVE_REMOVED && r->begun)
        vtr_progress_step(&r->progress, 1);
}

/* Runs the indexing of o and reports it; the exit status. */
static int index_archive(vtr_archive_options *o, vtr_error *err)
{
    reporter r = {0};
    o->on_plan = on_plan;
    o->on_item = on_item;
    o->ctx = &r;
    o->stop = &stop_requested;
    vtr_archive_stats s;
    vtr_status st = vtr_archive_index_update(o, &s, err);
    if (r.begun)
        vtr_progress_end(&r.progress);
    if (st != VTR_OK) {
        vtr_log_item_error(NULL, err);
        return 1;
    }
    static const char *const approx_done[] = {
        [VTR_APPROX_ABSENT] = "", [VTR_APPROX_CURRENT] = "",
        [VTR_APPROX_ADDED] = "; approximate index: new rows added",
        [VTR_APPROX_REBUILT] = "; approximate index rebuilt"};
    vtr_log_info("%s: %lld added, %lld updated, %lld removed, %lld failed, %lld unchanged, "
                 "%lld skipped (failed before)%s%s",
                 o->index_dir, (long long)s.added, (long long)s.updated, (long long)s.removed,
                 (long long)s.failed, (long long)s.unchanged, (long long)s.skipped_failed,
                 s.compacted ? "; compacted" : "", approx_done[s.approx]);
    json_t *ev = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}", "index", o->index_dir,
                           "added", (json_int_t)s.added, "updated", (json_int_t)s.updated,
                           "removed", (json_int_t)s.removed, "failed", (json_int_t)s.failed,
                           "unchanged", (json_int_t)s.unchanged, "skipped_failed",
                           (json_int_t)s.skipped_failed, "commits", (json_int_t)s.commits,
                           "compacted", s.compacted);
    vtr_log_event("indexed", ev);
    json_decref(ev);
    if (s.stopped)
        vtr_log_info("%s: stopped by a signal; the work done is committed, and a rerun goes on "
                     "from there", o->index_dir);
    return s.failed || s.stopped ? 2 : 0;
}

int main(int argc, char **argv)
{
    enum {
        OPT_VOCAB = 256, OPT_FRAMES, OPT_RESIZE, OPT_CROP, OPT_DEVICE, OPT_BF16, OPT_RETRY,
        OPT_COMMIT, OPT_AHEAD, OPT_THREADS, OPT_SHARD, OPT_LOG_JSON, OPT_VERSION
    };
    static const struct option options[] = {
        {"model", required_argument, NULL, 'm'},
        {"vocab", required_argument, NULL, OPT_VOCAB},
        {"weights", required_argument, NULL, 'w'},
        {"arch", required_argument, NULL, 'a'},
        {"frames", required_argument, NULL, OPT_FRAMES},
        {"resize", required_argument, NULL, OPT_RESIZE},
        {"crop", required_argument, NULL, OPT_CROP},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"bf16", no_argument, NULL, OPT_BF16},
        {"index", required_argument, NULL, 'o'},
        {"retry-failed", no_argument, NULL, OPT_RETRY},
        {"commit-every", required_argument, NULL, OPT_COMMIT},
        {"decode-ahead", required_argument, NULL, OPT_AHEAD},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"shard", required_argument, NULL, OPT_SHARD},
        {"log-json", no_argument, NULL, OPT_LOG_JSON},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    vtr_archive_options o;
    vtr_archive_options_defaults(&o);
    bool log_json = false;
    const char *shard_option = NULL;
    int opt;
    long long v;
    vtr_error err;
    vtr_error_clear(&err);
    while ((opt = getopt_long(argc, argv, "m:w:a:o:h", options, NULL)) != -1) {
        const char *bad = NULL;
        switch (opt) {
        case 'm': o.checkpoint = optarg; break;
        case OPT_VOCAB: o.vocab = optarg; break;
        case 'w': o.weights = optarg; break;
        case 'a': {
            vtr_backbone_arch arch;
            if (vtr_backbone_arch_parse(optarg, &arch, &err) == VTR_OK)
                o.arch = optarg;
            else
                bad = "--arch is resnet18, resnet34, resnet50, resnet101 or resnet152";
            break;
        }
        case OPT_FRAMES:
            if (vtr_parse_int(optarg, 1, 10000, &v) == 0)
                o.frames = (int)v;
            else
                bad = "--frames needs a count from 1 to 10000";
            break;
        case OPT_RESIZE:
            if (vtr_parse_int(optarg, 0, 65536, &v) == 0)
                o.resize = (int)v;
            else
                bad = "--resize needs a size from 0 to 65536";
            break;
        case OPT_CROP:
            if (vtr_parse_int(optarg, 0, 65536, &v) == 0)
                o.crop = (int)v;
            else
                bad = "--crop needs a size from 0 to 65536";
            break;
        case OPT_DEVICE:
            if (vtr_device_parse(optarg, &o.device, &o.device_index, &err) != VTR_OK)
                bad = "--device is cpu, cuda or cuda:N";
            break;
        case OPT_BF16: o.bf16 = true; break;
        case 'o': o.index_dir = optarg; break;
        case OPT_RETRY: o.retry_failed = true; break;
        case OPT_COMMIT:
            if (vtr_parse_int(optarg, 1, 1000000, &v) == 0)
                o.commit_items = (int)v;
            else
                bad = "--commit-every needs a count from 1 to 1000000";
            break;
        case OPT_AHEAD:
            if (vtr_parse_int(optarg, 0, 64, &v) == 0)
                o.decode_ahead = (int)v;
            else
                bad = "--decode-ahead needs a count from 0 to 64";
            break;
        case OPT_THREADS:
            if (vtr_parse_int(optarg, 0, 1024, &v) == 0)
                o.threads = (int)v;
            else
                bad = "--threads needs a count from 0 to 1024";
            break;
        case OPT_SHARD: shard_option = optarg; break;
        case OPT_LOG_JSON: log_json = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case OPT_VERSION:
            printf("vtr-index %s\n%s\n%s\n", vtr_version, vtr_blas_kernel_report(),
                   vtr_conv_cpu_report());
            return 0;
        default: fputs("Try 'vtr-index --help'.\n", stderr); return 1;
        }
        if (bad) {
            fprintf(stderr, "vtr-index: %s (got '%s')\n", bad, optarg);
            return 1;
        }
    }
    av_log_set_level(AV_LOG_QUIET); /* a file FFmpeg cannot read gets our one-line error */
    const char *usage_error = NULL;
    if (optind == argc)
        usage_error = "name the archive: a directory or a manifest";
    else if (argc - optind > 1)
        usage_error = "one archive (DIR or MANIFEST) per run";
    else if (!o.checkpoint)
        usage_error = "--model CKPT is required";
    else if (!o.index_dir)
        usage_error = "--index OUT is required";
    if (usage_error) {
        fprintf(stderr, "vtr-index: %s (see --help)\n", usage_error);
        return 1;
    }
    o.source = argv[optind];
    if (o.bf16 && vtr_backbone_bf16_check(o.device, &err) != VTR_OK) {
        fprintf(stderr, "vtr-index: warning: --bf16: %s; running float32\n", err.msg);
        o.bf16 = false;
    }
    if (o.threads > 0)
        omp_set_num_threads(o.threads);

    /* the shard, and its index */
    vtr_dist dist;
    vtr_shard shard;
    char name[96], *index_dir = NULL;
    if (vtr_shard_start(shard_option, o.index_dir, &dist, &shard, &index_dir, &err) != VTR_OK) {
        fprintf(stderr, "vtr-index: %s\n", err.msg);
        vtr_dist_finalize(&dist);
        return 1;
    }
    vtr_log_init(vtr_shard_program_name(&shard, "vtr-index", name, sizeof name), log_json);
    o.index_dir = index_dir;
    o.shard = &shard;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND; /* a second signal ends the program at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int rc = index_archive(&o, &err);
    free(index_dir);
    vtr_dist_finalize(&dist);
    return rc;
}
