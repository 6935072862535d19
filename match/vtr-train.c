/* vtr-train: trains a VSE model (VSE++, VSE∞) from a config. Argument parsing, the run
 * directory, the catalog record and progress only; the work is in match/trainer.h. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/blas_threads.h"
#include "lib/catalog.h"
#include "lib/checkpoint.h"
#include "lib/file.h"
#include "lib/hash.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/version.h"
#include "match/train_config.h"
#include "match/train_data.h"
#include "match/trainer.h"

static const char usage_text[] =
    "Usage: vtr-train [OPTION]... CONFIG.yaml\n"
    "       vtr-train --resume DIR [OPTION]...\n"
    "Trains a VSE model (VSE++, VSE∞) on the dataset its config names: a feature store and\n"
    "a catalog of items, captions and splits (docs/training.md). Writes the run directory:\n"
    "last.safetensors (the whole training state), best.safetensors (the epoch with the\n"
    "best validation RSUM), metrics.jsonl (one line per epoch), config.yaml (the resolved\n"
    "config) and vocab.json, and records the run (config, seed, code version, SHA-256 of\n"
    "the features and the vocabulary) in the catalog.\n"
    "\n"
    "  -s, --set KEY=VALUE   override a config key (repeatable; after the file)\n"
    "      --seed N          the same as --set train.seed=N\n"
    "      --init CKPT       start from CKPT's parameters (a vtr-train checkpoint, or a\n"
    "                        reference model converted by pipeline/convert_checkpoint.py):\n"
    "                        the same as --set train.init=CKPT\n"
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
    "SIGINT or SIGTERM stops the run after the current step, saving its state for --resume.\n"
    "Exit status: 0 the run finished (or stopped at --max-steps); 1 bad usage, config or\n"
    "data, or a failure (the last saved state stays); 2 stopped by a signal, state saved.\n";

enum {
    OPT_SEED = 256,
    OPT_INIT,
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

static vtr_status write_text(const char *path, const char *text, vtr_error *err)
{
    vtr_atomic_file f;
    vtr_status st = vtr_atomic_open(&f, path, err);
    if (st != VTR_OK)
        return st;
    if ((st = vtr_write_all(f.fp, text, strlen(text), path, err)) != VTR_OK) {
        vtr_atomic_abort(&f);
        return st;
    }
    return vtr_atomic_commit(&f, err);
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

/* A new run that failed before saving any state leaves nothing to resume: its files go,
 * and the directory with them when nothing else is in it. */
static void remove_unstarted_run(const char *dir)
{
    static const char *const files[] = {VTR_RUN_CONFIG, VTR_RUN_VOCAB, VTR_RUN_METRICS};
    char *last = vtr_path_join(dir, VTR_RUN_LAST);
    bool started = !last || access(last, F_OK) == 0;
    free(last);
    if (started)
        return;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *path = vtr_path_join(dir, files[i]);
        if (path)
            unlink(path);
        free(path);
    }
    rmdir(dir);
}

/* ---- progress --------------------------------------------------------------------- */

typedef struct progress_ctx {
    vtr_progress bar;
    bool active;
    int epoch;
} progress_ctx;

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
    json_t *f = json_pack("{s:i, s:f, s:f, s:o, s:b, s:f, s:f}", "epoch", info->epoch, "loss",
                          info->loss, "k", info->negatives, "val", vtr_retrieval_metrics_json(v),
                          "best", info->best, "train_s", info->train_s, "val_s", info->val_s);
    vtr_log_event("epoch", f);
    json_decref(f);
}

/* ---- main ------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"set", required_argument, NULL, 's'},
        {"seed", required_argument, NULL, OPT_SEED},
        {"init", required_argument, NULL, OPT_INIT},
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
    const char *resume_dir = NULL, *output = NULL, *seed = NULL, *init = NULL;
    const char **sets = calloc((size_t)argc, sizeof *sets);
    int n_sets = 0, threads = 0;
    long long max_steps = 0;
    bool print_config = false, log_json = false;
    if (!sets) {
        fprintf(stderr, "vtr-train: out of memory\n");
        return 1;
    }
    int opt;
    while ((opt = getopt_long(argc, argv, "s:o:h", options, NULL)) != -1) {
        char *end;
        switch (opt) {
        case 's': sets[n_sets++] = optarg; break;
        case OPT_SEED: {
            errno = 0;
            long long v = strtoll(optarg, &end, 10);
            if (errno || end == optarg || *end || v < 0) {
                fprintf(stderr, "vtr-train: --seed wants an integer >= 0, got '%s'\n", optarg);
                free(sets);
                return 1;
            }
            seed = optarg;
            break;
        }
        case OPT_INIT: init = optarg; break;
        case 'o': output = optarg; break;
        case OPT_RESUME: resume_dir = optarg; break;
        case OPT_MAX_STEPS:
            errno = 0;
            max_steps = strtoll(optarg, &end, 10);
            if (errno || end == optarg || *end || max_steps < 1) {
                fprintf(stderr, "vtr-train: --max-steps wants an integer >= 1, got '%s'\n",
                        optarg);
                free(sets);
                return 1;
            }
            break;
        case OPT_THREADS: {
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || v < 1 || v > 4096) {
                fprintf(stderr, "vtr-train: --threads wants an integer in [1, 4096], got "
                        "'%s'\n", optarg);
                free(sets);
                return 1;
            }
            threads = (int)v;
            break;
        }
        case OPT_PRINT_CONFIG: print_config = true; break;
        case OPT_HELP_CONFIG: print_schema(); free(sets); return 0;
        case OPT_LOG_JSON: log_json = true; break;
        case 'h': fputs(usage_text, stdout); free(sets); return 0;
        case OPT_VERSION: printf("vtr-train %s\n", vtr_version); free(sets); return 0;
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
    if (threads > 0) {
        omp_set_num_threads(threads);
        vtr_blas_set_threads(threads);
    }

    vtr_error err;
    vtr_status st = VTR_OK;
    int rc = 1;
    vtr_config *cfg = NULL;
    vtr_train_options o;
    vtr_train_data data = {0};
    vtr_checkpoint ck = {0};
    char *out_dir = NULL, *vocab_path = NULL, *config_file = NULL, *config_text = NULL;
    char *hashes = NULL;
    char vocab_sha[VTR_SHA256_HEX_SIZE];
    int64_t run_id = -1;
    bool fresh_dir = false; /* this invocation made the run directory's files */

    /* the config: a file and overrides, or the one stored with the run */
    if (resume_dir) {
        char *last = vtr_path_join(resume_dir, VTR_RUN_LAST);
        if (!last) {
            st = vtr_fail(&err, VTR_ERR_NOMEM, "out of memory");
            goto end;
        }
        st = vtr_checkpoint_open(last, 0, &ck, &err);
        free(last);
        if (st != VTR_OK)
            goto end;
        const char *text = vtr_checkpoint_meta(&ck, "config");
        if (!text) {
            st = vtr_fail(&err, VTR_ERR_FORMAT, "%s: no config in the checkpoint", ck.path);
            goto end;
        }
        if ((st = vtr_train_config_from_string(ck.path, text, &cfg, &err)))
            goto end;
        vtr_checkpoint_close(&ck);
        if (n_sets || seed || init)
            vtr_log_warn("overriding the stored config: the run will differ from an "
                         "uninterrupted one");
    } else if ((st = vtr_train_config_new(&cfg, &err)) ||
               (st = vtr_config_load_file(cfg, config_path, &err))) {
        goto end;
    }
    for (int i = 0; i < n_sets; i++)
        if ((st = vtr_config_set(cfg, sets[i], &err)))
            goto end;
    if ((seed && (st = set_key(cfg, "train.seed", seed, &err))) ||
        (init && (st = set_key(cfg, "train.init", init, &err))))
        goto end;
    if ((st = vtr_train_options_from_config(cfg, &o, &err)))
        goto end;
    out_dir = resume_dir ? strdup(resume_dir) : output ? strdup(output)
                                                       : default_output(config_path);
    if (print_config) {
        st = vtr_config_dump(cfg, stdout, &err);
        rc = st == VTR_OK ? 0 : 1;
        goto end;
    }
    if (!out_dir || !(vocab_path = vtr_path_join(out_dir, VTR_RUN_VOCAB)) ||
        !(config_file = vtr_path_join(out_dir, VTR_RUN_CONFIG))) {
        st = vtr_fail(&err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }

    /* the run directory */
    if (!resume_dir) {
        char *last = vtr_path_join(out_dir, VTR_RUN_LAST);
        bool exists = last && access(last, F_OK) == 0;
        free(last);
        if (exists) {
            st = vtr_fail(&err, VTR_ERR_INVALID, "%s holds a run already: continue it with "
                          "--resume %s, or choose another --output", out_dir, out_dir);
            goto end;
        }
    }

    /* the data (before the run directory is made: a bad path leaves nothing behind); a
     * resumed run reads the vocabulary it was trained with */
    vtr_log_info("reading %s and %s", o.catalog, o.features);
    if ((st = vtr_train_data_open(&o, resume_dir ? vocab_path : NULL, &data, &err))) {
        if (resume_dir && !vtr_train_explain_data_path(o.catalog, "resume from there", &err))
            vtr_train_explain_data_path(o.features, "resume from there", &err);
        goto end;
    }
    if (!resume_dir && (st = vtr_make_dirs(out_dir, &err)))
        goto end;
    fresh_dir = !resume_dir;
    if (!resume_dir && (st = vtr_vocab_save_json(data.vocab, vocab_path, &err)))
        goto end;
    if ((st = vtr_file_sha256(vocab_path, vocab_sha, &err)) ||
        (st = vtr_config_dump_string(cfg, &config_text, &err)))
        goto end;
    if (!resume_dir && (st = write_text(config_file, config_text, &err)))
        goto end;
    vtr_log_info("%s: %d items, %d captions; %s: %d items, %d captions; vocabulary %d "
                 "words (%s)", o.train_split, data.train.n_items, data.train.n_caps,
                 o.val_split, data.val.n_items, data.val.n_caps, vtr_vocab_size(data.vocab),
                 data.vocab_built ? "built" : "loaded");
    const char *hashed[] = {"vocab", data.vocab_built || resume_dir ? vocab_path : o.vocab,
                            "init", o.init, "word_vectors", o.word_vectors, NULL};
    if ((st = vtr_train_data_hashes(o.features, hashed, &hashes, &err)))
        goto end;
    vtr_run run = {.kind = "train",
                   .config = config_text,
                   .seed = o.seed,
                   .code_version = vtr_version,
                   .data_hashes = hashes};
    if ((st = vtr_catalog_begin_run(data.catalog, &run, &run_id, &err)))
        goto end;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND; /* a second signal ends the program at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    progress_ctx pc = {0};
    vtr_trainer_setup su = {.config = cfg,
                            .opt = &o,
                            .train = &data.train,
                            .val = &data.val,
                            .vocab = data.vocab,
                            .output_dir = out_dir,
                            .vocab_sha256 = vocab_sha,
                            .resume = resume_dir != NULL,
                            .max_steps = max_steps,
                            .stop = &stop_requested,
                            .on_start = on_start,
                            .on_step = on_step,
                            .on_epoch = on_epoch,
                            .on_validate = on_validate,
                            .ctx = &pc};
    vtr_train_result res;
    st = vtr_train_run(&su, &res, &err);
    if (pc.active)
        vtr_progress_end(&pc.bar);

    json_t *result = json_pack("{s:b, s:I, s:i, s:I, s:f, s:i, s:s, s:b, s:i}", "finished",
                               st == VTR_OK && res.finished, "steps", (json_int_t)res.steps,
                               "epoch", res.epoch, "iteration", (json_int_t)res.iteration,
                               "best_rsum", res.best_rsum, "best_epoch", res.best_epoch,
                               "output", out_dir, "resumed", resume_dir != NULL, "threads",
                               omp_get_max_threads());
    if (st != VTR_OK)
        json_object_set_new(result, "error", json_string(err.msg));
    char *result_text = result ? json_dumps(result, VTR_JSON_FLAGS) : NULL;
    json_decref(result);
    vtr_error err2;
    if (vtr_catalog_finish_run(data.catalog, run_id, st == VTR_OK ? VTR_RUN_DONE : VTR_RUN_FAILED,
                               result_text, &err2) != VTR_OK)
        vtr_log_warn("%s", err2.msg);
    free(result_text);
    if (st != VTR_OK)
        goto end;
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
    if (st != VTR_OK)
        vtr_log_item_error(NULL, &err);
    if (st != VTR_OK && fresh_dir)
        remove_unstarted_run(out_dir);
    vtr_checkpoint_close(&ck);
    vtr_train_data_close(&data);
    vtr_config_free(cfg);
    free(out_dir);
    free(vocab_path);
    free(config_file);
    free(config_text);
    free(hashes);
    free(sets);
    return rc;
}
