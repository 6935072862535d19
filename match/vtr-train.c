/* vtr-train: trains a VSE model (VSE++, VSE∞) from a config. Argument parsing, the config,
 * signals and progress only; the run directory and the catalog record are
 * match/run_record.h's, the training match/trainer.h's. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <limits.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/args.h"
#include "lib/blas_kernel.h"
#include "lib/blas_threads.h"
#include "lib/dist.h"
#include "lib/log.h"
#include "lib/matmul.h"
#include "lib/version.h"
#include "match/run_record.h"
#include "match/train_config.h"

static const char usage_text[] =
    "Usage: vtr-train [OPTION]... CONFIG.yaml\n"
    "       vtr-train --resume DIR [OPTION]...\n"
    "Trains a model (VSE++, VSE∞, set embeddings, HGR, HGR∞) on the dataset its config\n"
    "names: a feature store and a catalog of items, captions and splits (docs/training.md).\n"
    "Writes the run directory: last.safetensors (the whole training state),\n"
    "best.safetensors (the epoch with the best validation RSUM), metrics.jsonl (one line per\n"
    "epoch), config.yaml (the resolved config) and vocab.json, and records the run (config,\n"
    "seed, code version, SHA-256 of the features and the vocabulary) in the catalog.\n"
    "\n"
    "  -s, --set KEY=VALUE   override a config key (repeatable; after the file)\n"
    "      --seed N          the same as --set train.seed=N\n"
    "      --init CKPT       start from CKPT's parameters (a vtr-train checkpoint, or a\n"
    "                        reference model converted by pipeline/convert_checkpoint.py):\n"
    "                        the same as --set train.init=CKPT\n"
    "      --device DEV      cpu, cuda or cuda:N: the same as --set train.device=DEV\n"
    "  -o, --output DIR      run directory [runs/<config file name without .yaml>]\n"
    "      --resume DIR      continue the run in DIR from DIR/last.safetensors with the\n"
    "                        config and vocabulary stored there; with the same build and\n"
    "                        --threads the result is byte-identical to an uninterrupted run\n"
    "      --max-steps N     stop once the run has taken N steps in all (state saved)\n"
    "      --threads N       OpenMP and BLAS threads [OpenMP's default]\n"
    "      --print-config    check the config, print it resolved, and exit\n"
    "      --help-config     list every config key with its default, and exit\n"
    "      --log-json        log events (progress, epochs) as JSON lines on stderr\n"
    "  -h, --help            this text\n"
    "      --version         the version\n"
    "\n"
    "Several processes: started by mpirun or srun (a build with Open MPI), the N ranks train\n"
    "one model, each on train.batch_size / N pairs of every batch, the loss over the whole\n"
    "batch; rank 0 writes the run and speaks (docs/training.md). --threads is per rank.\n"
    "\n"
    "SIGINT or SIGTERM stops the run after the current step, saving its state for --resume.\n"
    "Exit status: 0 the run finished (or stopped at --max-steps); 1 bad usage, config or\n"
    "data, or a failure (the last saved state stays); 2 stopped by a signal, state saved.\n";

enum {
    OPT_SEED = 256,
    OPT_INIT,
    OPT_DEVICE,
    OPT_RESUME,
    OPT_MAX_STEPS,
    OPT_THREADS,
    OPT_PRINT_CONFIG,
    OPT_HELP_CONFIG,
    OPT_LOG_JSON,
    OPT_VERSION,
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static const char *const type_names[] = {"bool", "int", "float", "string", "int list",
                                         "float list", "string list"};

static void print_schema(void)
{
    for (size_t i = 0; i < vtr_train_schema_count; i++) {
        const vtr_config_field *f = &vtr_train_schema[i];
        printf("%-30s %-8s %-12s %s\n", f->key, type_names[f->type],
               f->default_value ? f->default_value : "(required)", f->help ? f->help : "");
    }
}

/* "runs/<file name without directory and .yaml/.yml>" */
static char *default_output(const char *config_path)
{
    const char *base = strrchr(config_path, '/');
    base = base ? base + 1 : config_path;
    size_t len = strlen(base);
    if (len > 5 && strcmp(base + len - 5, ".yaml") == 0)
        len -= 5;
    else if (len > 4 && strcmp(base + len - 4, ".yml") == 0)
        len -= 4;
    char *out = malloc(len + 6);
    if (out)
        snprintf(out, len + 6, "runs/%.*s", (int)len, base);
    return out;
}

/* Whether the run directory holds a checkpoint to resume from. */
static bool has_checkpoint(const char *dir)
{
    char *last = vtr_path_join(dir, VTR_RUN_LAST);
    bool yes = last && access(last, R_OK) == 0;
    free(last);
    return yes;
}

/* --set KEY=VALUE */
static vtr_status set_key(vtr_config *cfg, const char *key, const char *value, vtr_error *err)
{
    size_t len = strlen(key) + strlen(value) + 2;
    char *kv = malloc(len);
    if (!kv)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    snprintf(kv, len, "%s=%s", key, value);
    vtr_status st = vtr_config_set(cfg, kv, err);
    free(kv);
    return st;
}

/* ---- progress --------------------------------------------------------------------- */

typedef struct progress_ctx {
    const vtr_train_options *o;
    vtr_progress bar;
    bool active;
    int epoch;
} progress_ctx;

static void on_reading(void *ctx)
{
    const progress_ctx *p = ctx;
    vtr_log_info("reading %s and %s", p->o->catalog, p->o->features);
}

static void on_data(void *ctx, const vtr_train_data *data)
{
    const progress_ctx *p = ctx;
    vtr_log_info("%s: %d items, %d captions; %s: %d items, %d captions; vocabulary %d "
                 "words (%s)", p->o->train_split, data->train.n_items, data->train.n_caps,
                 p->o->val_split, data->val.n_items, data->val.n_caps,
                 vtr_vocab_size(data->vocab),
                 data->vocab_built ? "built" : data->vocab_from_catalog ? "from the catalog"
                                                                        : "loaded");
}

/* The run is recorded: from now on SIGINT and SIGTERM stop it with its state saved. */
static void on_recorded(void *ctx)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND; /* a second signal ends the program at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void on_start(void *ctx, const vtr_train_start_info *info)
{
    if (info->init)
        vtr_log_info("starting from the parameters of %s", info->init);
    if (info->word_vectors >= 0)
        vtr_log_info("word vectors for %lld of the %d vocabulary words (the others drawn "
                     "at random)", (long long)info->word_vectors, info->vocab_size);
    if (info->resumed)
        vtr_log_info("resuming at epoch %d, step %lld", info->epoch + 1,
                     (long long)info->iteration);
    if (strcmp(info->device, "cpu") != 0)
        vtr_log_info("training on %s", info->device);
}

static void on_step(void *ctx, const vtr_train_step_info *info)
{
    progress_ctx *p = ctx;
    if (!p->active || p->epoch != info->epoch) {
        if (p->active)
            vtr_progress_end(&p->bar);
        char what[64];
        snprintf(what, sizeof what, "epoch %d/%d", info->epoch + 1, info->epochs);
        vtr_progress_begin(&p->bar, what, info->iterations);
        p->bar.done = info->iteration;
        p->active = true;
        p->epoch = info->epoch;
    }
    snprintf(p->bar.what, sizeof p->bar.what, "epoch %d/%d, loss %.4g, K %d, lr %.3g",
             info->epoch + 1, info->epochs, (double)info->loss, info->negatives, info->lr);
    vtr_progress_step(&p->bar, 1);
}

static void on_validate(void *ctx, int epoch)
{
    progress_ctx *p = ctx;
    if (p->active)
        vtr_progress_end(&p->bar);
    p->active = false;
}

static void on_epoch(void *ctx, const vtr_train_epoch_info *info)
{
    const vtr_retrieval_metrics *v = &info->val;
    vtr_log_info("epoch %d: loss %.4f, K %.1f, val R@1 %.1f/%.1f, RSUM %.1f%s (%.1f s + "
                 "%.1f s val)", info->epoch + 1, info->loss, info->negatives, v->v2t.r1,
                 v->t2v.r1, v->rsum, info->best ? ", best" : "", info->train_s, info->val_s);
    json_t *f = json_pack("{s:i, s:f, s:f, s:o, s:b, s:f, s:f}", "epoch", info->epoch + 1, "loss",
                          info->loss, "k", info->negatives, "val", vtr_retrieval_metrics_json(v),
                          "best", info->best, "train_s", info->train_s, "val_s", info->val_s);
    vtr_log_event("epoch", f);
    json_decref(f);
}

static void on_record_error(void *ctx, const vtr_error *e)
{
    progress_ctx *p = ctx;
    if (p->active)
        vtr_progress_end(&p->bar);
    p->active = false;
    vtr_log_warn("%s", e->msg);
}

/* ---- main ------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"set", required_argument, NULL, 's'},
        {"seed", required_argument, NULL, OPT_SEED},
        {"init", required_argument, NULL, OPT_INIT},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"output", required_argument, NULL, 'o'},
        {"resume", required_argument, NULL, OPT_RESUME},
        {"max-steps", required_argument, NULL, OPT_MAX_STEPS},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"print-config", no_argument, NULL, OPT_PRINT_CONFIG},
        {"help-config", no_argument, NULL, OPT_HELP_CONFIG},
        {"log-json", no_argument, NULL, OPT_LOG_JSON},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    const char *resume_dir = NULL, *output = NULL, *seed = NULL, *init = NULL, *device = NULL;
    const char **sets = calloc((size_t)argc, sizeof *sets);
    int n_sets = 0, threads = 0;
    long long max_steps = 0, v;
    bool print_config = false, log_json = false;
    if (!sets) {
        fprintf(stderr, "vtr-train: out of memory\n");
        return 1;
    }
    int opt;
    while ((opt = getopt_long(argc, argv, "s:o:h", options, NULL)) != -1) {
        switch (opt) {
        case 's': sets[n_sets++] = optarg; break;
        case OPT_SEED:
            if (vtr_parse_int(optarg, 0, LLONG_MAX, &v)) {
                fprintf(stderr, "vtr-train: --seed wants an integer >= 0, got '%s'\n", optarg);
                free(sets);
                return 1;
            }
            seed = optarg;
            break;
        case OPT_INIT: init = optarg; break;
        case OPT_DEVICE: device = optarg; break;
        case 'o': output = optarg; break;
        case OPT_RESUME: resume_dir = optarg; break;
        case OPT_MAX_STEPS:
            if (vtr_parse_int(optarg, 1, LLONG_MAX, &max_steps)) {
                fprintf(stderr, "vtr-train: --max-steps wants an integer >= 1, got '%s'\n",
                        optarg);
                free(sets);
                return 1;
            }
            break;
        case OPT_THREADS:
            if (vtr_parse_int(optarg, 1, 4096, &v)) {
                fprintf(stderr, "vtr-train: --threads wants an integer in [1, 4096], got "
                        "'%s'\n", optarg);
                free(sets);
                return 1;
            }
            threads = (int)v;
            break;
        case OPT_PRINT_CONFIG: print_config = true; break;
        case OPT_HELP_CONFIG: print_schema(); free(sets); return 0;
        case OPT_LOG_JSON: log_json = true; break;
        case 'h': fputs(usage_text, stdout); free(sets); return 0;
        case OPT_VERSION:
            printf("vtr-train %s\n%s\n%s\n", vtr_version, vtr_blas_kernel_report(),
                   vtr_matmul_report());
            free(sets);
            return 0;
        default: fputs("Try 'vtr-train --help'.\n", stderr); free(sets); return 1;
        }
    }
    const char *config_path = optind < argc ? argv[optind] : NULL;
    const char *usage_error = NULL;
    if (resume_dir && config_path)
        usage_error = "--resume takes its config from the run directory: give no CONFIG";
    else if (!resume_dir && !config_path)
        usage_error = "no config: name CONFIG.yaml, or --resume DIR";
    else if (optind + 1 < argc && !resume_dir)
        usage_error = "one config file only (merge others with --set)";
    else if (resume_dir && output)
        usage_error = "--resume DIR is the run directory: --output does not go with it";
    if (usage_error) {
        fprintf(stderr, "vtr-train: %s (see --help)\n", usage_error);
        free(sets);
        return 1;
    }
    vtr_log_init(argv[0], log_json);
    vtr_error err;
    vtr_dist dist;
    if (vtr_dist_init(&dist, &argc, &argv, &err)) {
        vtr_log_item_error(NULL, &err);
        free(sets);
        return 1;
    }
    bool talk = dist.rank == 0; /* rank 0 speaks for a data-parallel job */
    if (threads > 0) {
        omp_set_num_threads(threads);
        vtr_blas_set_threads(threads);
    }

    vtr_status st = VTR_OK;
    int rc = 1;
    bool resumable = false; /* a failed run that saved a checkpoint */
    vtr_config *cfg = NULL;
    vtr_train_options o;
    char *out_dir = NULL;

    /* the config: a file and overrides, or the one stored with the run */
    if (resume_dir) {
        if ((st = vtr_run_dir_config(resume_dir, &cfg, &err)))
            goto loaded;
        if (n_sets || seed || init || device)
            vtr_log_warn("overriding the stored config: the run will differ from an "
                         "uninterrupted one");
    } else if ((st = vtr_train_config_new(&cfg, &err)) ||
               (st = vtr_config_load_file(cfg, config_path, &err))) {
        goto loaded;
    }
    for (int i = 0; i < n_sets; i++)
        if ((st = vtr_config_set(cfg, sets[i], &err)))
            goto loaded;
    if ((seed && (st = set_key(cfg, "train.seed", seed, &err))) ||
        (init && (st = set_key(cfg, "train.init", init, &err))) ||
        (device && (st = set_key(cfg, "train.device", device, &err))))
        goto loaded;
    st = vtr_train_options_from_config(cfg, &o, &err);
loaded:
    /* under mpirun a config that one rank cannot read is every rank's failure */
    if ((st = vtr_dist_agree(&dist, st, &err)))
        goto end;
    out_dir = resume_dir ? strdup(resume_dir) : output ? strdup(output)
                                                       : default_output(config_path);
    if (print_config) {
        st = vtr_config_dump(cfg, stdout, &err);
        rc = st == VTR_OK ? 0 : 1;
        goto end;
    }
    if (!out_dir) {
        st = vtr_fail(&err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }

    if (o.device == VTR_DEVICE_CPU && vtr_matmul_check(o.precision, &err) != VTR_OK) {
        if (talk)
            vtr_log_warn("train.precision %s: %s; training in float32",
                         vtr_precision_name(o.precision), err.msg);
        o.precision = VTR_PRECISION_F32;
    }

    progress_ctx pc = {.o = &o};
    if (talk && dist.size > 1 && o.batch_size % dist.size == 0)
        vtr_log_info("data parallel: %d ranks, %d pairs each per batch of %d", dist.size,
                     o.batch_size / dist.size, o.batch_size);
    vtr_training_setup su = {.config = cfg,
                             .opt = &o,
                             .dir = out_dir,
                             .resume = resume_dir != NULL,
                             .trainer = {.max_steps = max_steps,
                                         .stop = &stop_requested,
                                         .dist = &dist,
                                         .on_start = talk ? on_start : NULL,
                                         .on_step = talk ? on_step : NULL,
                                         .on_epoch = talk ? on_epoch : NULL,
                                         .on_validate = talk ? on_validate : NULL,
                                         .ctx = &pc},
                             .on_reading = talk ? on_reading : NULL,
                             .on_data = talk ? on_data : NULL,
                             .on_recorded = on_recorded,
                             .on_record_error = on_record_error};
    vtr_train_result res;
    st = vtr_run_training(&su, &res, &err);
    if (pc.active)
        vtr_progress_end(&pc.bar);
    if (st != VTR_OK) {
        resumable = res.steps > 0 && has_checkpoint(out_dir);
        goto end;
    }
    if (!talk) { /* the other ranks end as rank 0 does, silently */
        rc = res.finished || !stop_requested ? 0 : 2;
        goto end;
    }
    if (vtr_matmul_fallbacks() > 0)
        vtr_log_warn("%lld bfloat16 matrix products ran in float32: oneDNN could not run "
                     "them (out of memory?)",
                     (long long)vtr_matmul_fallbacks());
    if (res.finished) {
        if (res.resumed_from_end)
            vtr_log_info("the run in %s had finished already", out_dir);
        vtr_log_info("finished %d epoch%s; best validation RSUM %.2f after epoch %d: %s/%s",
                     o.epochs, o.epochs == 1 ? "" : "s", res.best_rsum, res.best_epoch + 1, out_dir, VTR_RUN_BEST);
        rc = 0;
    } else {
        vtr_log_info("stopped at epoch %d, step %lld of it (%lld steps in all); continue with "
                     "vtr-train --resume %s", res.epoch + 1, (long long)res.iteration,
                     (long long)res.steps, out_dir);
        rc = stop_requested ? 2 : 0;
    }
end:
    if (st != VTR_OK) {
        /* a failure of this rank alone (lib/dist.h): the others may wait for it in a
         * collective, so it says why itself and ends the job */
        bool alone = dist.size > 1 && !dist.shared_failure;
        if (alone)
            vtr_error_context(&err, "rank %d", dist.rank);
        if (alone || talk) {
            vtr_log_item_error(NULL, &err);
            if (resumable)
                vtr_log_info("%s keeps its last checkpoint: vtr-train --resume %s goes on "
                             "from there",
                             out_dir, out_dir);
        }
        if (alone)
            vtr_dist_abort(&dist, 1);
    }
    vtr_config_free(cfg);
    free(out_dir);
    free(sets);
    vtr_dist_finalize(&dist);
    return rc;
}
