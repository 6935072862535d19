/* The VSE training loop (trainer.h). */
#define _POSIX_C_SOURCE 200809L
#include "trainer.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/checkpoint.h"
#include "lib/dist_device.h"
#include "lib/file.h"
#include "lib/json.h"
#include "lib/lines.h"
#include "lib/log.h"
#include "lib/matmul.h"
#include "lib/optim.h"
#include "match/batch_ahead.h"
#include "match/model_ops.h"
#include "match/run_model.h"
#include "match/trained_model.h"
#include "text/word_vectors.h"

typedef struct trainer {
    const vtr_trainer_setup *su;
    const vtr_train_options *o;
    vtr_dist *dist;        /* su->dist, or solo: one process */
    vtr_dist solo;
    vtr_run_model m;       /* either kind (run_model.h) */
    vtr_optimizer optim;   /* on the GPU, its moments are copies of those there */
    /* where the steps run (train.device), the model's values and gradients there, and on
     * the GPU the optimizer's moments and the clipping's scratch (model_ops.h) */
    vtr_device dev;
    float *dev_data, *dev_grad;
    void *moments, *scratch;
    char device_name[1024];
    vtr_batch_ahead train_b; /* training batches, one step ahead */
    vtr_batcher val_b;
    int64_t *order;        /* (n_caps) this epoch's caption order */
    char *config_text;     /* resolved YAML stored in checkpoints */
    char *last_path, *best_path, *metrics_path;

    /* the state beyond parameters and optimizer, saved in last.safetensors */
    int64_t step;
    double best_rsum;
    int best_epoch;
    double loss_sum;       /* this epoch's summed step losses */
    int64_t negatives_sum; /* and negatives per query */
    int64_t loss_steps;
} trainer;

int64_t vtr_train_iterations_per_epoch(int64_t n_caps, int batch_size, bool drop_last,
                                       int ranks)
{
    int64_t full = n_caps / batch_size, rem = n_caps % batch_size;
    return full + (!drop_last && rem >= 2 && rem >= ranks ? 1 : 0);
}

vtr_status vtr_train_check_ranks(const vtr_train_options *o, int ranks, vtr_error *err)
{
    if (o->batch_size % ranks != 0)
        return vtr_fail(err, VTR_ERR_INVALID, "train.batch_size %d is not a multiple of the %d "
                        "ranks", o->batch_size, ranks);
    return VTR_OK;
}

/* Whether this process writes the run directory: rank 0 (trainer.h). */
static bool is_writer(const trainer *t)
{
    return t->dist->rank == 0;
}

/* ---- the GPU's copies -------------------------------------------------------------- */

/* The parameters and the optimizer's moments, from the host to the device (after they
 * were set or loaded) or back (before a checkpoint; the moments only when it saves them).
 * Nothing to do on the CPU. */
static vtr_status state_to_device(trainer *t, vtr_error *err)
{
    size_t bytes = sizeof(float) * t->optim.n;
    if (t->dev == VTR_DEVICE_CPU)
        return VTR_OK;
    VTR_TRY(vtr_run_model_params_to_device(&t->m, err));
    VTR_TRY(vtr_dev_upload(t->dev, t->moments, t->optim.exp_avg, bytes, err));
    return vtr_dev_upload(t->dev, (float *)t->moments + t->optim.n, t->optim.exp_avg_sq, bytes,
                          err);
}

static vtr_status state_to_host(trainer *t, bool moments, vtr_error *err)
{
    size_t bytes = sizeof(float) * t->optim.n;
    if (t->dev == VTR_DEVICE_CPU)
        return VTR_OK;
    VTR_TRY(vtr_run_model_params_to_host(&t->m, err));
    if (!moments)
        return VTR_OK;
    VTR_TRY(vtr_dev_download(t->dev, t->optim.exp_avg, t->moments, bytes, err));
    return vtr_dev_download(t->dev, t->optim.exp_avg_sq, (float *)t->moments + t->optim.n, bytes,
                            err);
}

/* ---- checkpoints ------------------------------------------------------------------ */

static vtr_status save_last(trainer *t, int64_t epoch, int64_t iteration, vtr_error *err)
{
    char best_rsum[64], best_epoch[32], loss_sum[64], loss_steps[32], negatives_sum[32];
    snprintf(best_rsum, sizeof best_rsum, "%a", t->best_rsum);
    snprintf(best_epoch, sizeof best_epoch, "%d", t->best_epoch + 1); /* 0: none yet */
    snprintf(loss_sum, sizeof loss_sum, "%a", t->loss_sum);
    snprintf(loss_steps, sizeof loss_steps, "%" PRId64, t->loss_steps);
    snprintf(negatives_sum, sizeof negatives_sum, "%" PRId64, t->negatives_sum);
    vtr_checkpoint_kv extra[] = {
        {"best_rsum", best_rsum},     {"best_epoch", best_epoch},
        {"epoch_loss_sum", loss_sum}, {"epoch_negatives_sum", negatives_sum},
        {"epoch_steps", loss_steps},
        {"vocab_sha256", t->su->vocab_sha256},
    };
    vtr_checkpoint_state state = {.step = t->step,
                                  .epoch = epoch,
                                  .iteration = iteration,
                                  .config = t->config_text,
                                  .extra = extra,
                                  .extra_count = sizeof extra / sizeof extra[0]};
    vtr_status st = state_to_host(t, true, err);
    if (st == VTR_OK && is_writer(t))
        st = vtr_checkpoint_save(t->last_path, vtr_run_model_params(&t->m), &t->optim, &state,
                                 err);
    return vtr_dist_agree(t->dist, st, err);
}

static vtr_status save_best(trainer *t, int epoch, double rsum, vtr_error *err)
{
    char rsum_text[64], epoch_text[32];
    snprintf(rsum_text, sizeof rsum_text, "%.17g", rsum);
    snprintf(epoch_text, sizeof epoch_text, "%d", epoch + 1);
    vtr_checkpoint_kv extra[] = {
        {"rsum", rsum_text},
        {"best_epoch", epoch_text},
        {"vocab_sha256", t->su->vocab_sha256},
    };
    vtr_checkpoint_state state = {.step = t->step,
                                  .epoch = epoch + 1,
                                  .iteration = 0,
                                  .config = t->config_text,
                                  .extra = extra,
                                  .extra_count = sizeof extra / sizeof extra[0]};
    vtr_status st = state_to_host(t, false, err);
    if (st == VTR_OK && is_writer(t))
        st = vtr_checkpoint_save(t->best_path, vtr_run_model_params(&t->m), NULL, &state, err);
    return vtr_dist_agree(t->dist, st, err);
}

/* Parses a metadata string of the resumed checkpoint. */
static vtr_status meta_double(const vtr_checkpoint *ck, const char *key, double *out,
                              vtr_error *err)
{
    const char *s = vtr_checkpoint_meta(ck, key);
    char *end;
    if (!s)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: no '%s' in the metadata (not written by "
                        "vtr-train?)", ck->path, key);
    errno = 0;
    *out = strtod(s, &end);
    if (errno || end == s || *end)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: metadata '%s' is not a number: '%.40s'",
                        ck->path, key, s);
    return VTR_OK;
}

static vtr_status meta_int(const vtr_checkpoint *ck, const char *key, int64_t *out,
                           vtr_error *err)
{
    const char *s = vtr_checkpoint_meta(ck, key);
    char *end;
    if (!s)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: no '%s' in the metadata (not written by "
                        "vtr-train?)", ck->path, key);
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: metadata '%s' is not an integer: '%.40s'",
                        ck->path, key, s);
    *out = v;
    return VTR_OK;
}

static vtr_status resume(trainer *t, int64_t *epoch, int64_t *iteration, vtr_error *err)
{
    vtr_checkpoint ck;
    vtr_checkpoint_state state = {0};
    int64_t best_epoch;
    vtr_status st = vtr_checkpoint_open(t->last_path, 0, &ck, err);
    if (st != VTR_OK)
        return st;
    const char *vocab = vtr_checkpoint_meta(&ck, "vocab_sha256");
    if (vocab && strcmp(vocab, t->su->vocab_sha256) != 0) {
        st = vtr_fail(err, VTR_ERR_INVALID, "%s was trained with another vocabulary than "
                      "%s/" VTR_RUN_VOCAB, t->last_path, t->su->output_dir);
        goto end;
    }
    if ((st = meta_double(&ck, "best_rsum", &t->best_rsum, err)) ||
        (st = meta_int(&ck, "best_epoch", &best_epoch, err)) ||
        (st = meta_double(&ck, "epoch_loss_sum", &t->loss_sum, err)) ||
        (st = meta_int(&ck, "epoch_steps", &t->loss_steps, err)) ||
        (st = meta_int(&ck, "epoch_negatives_sum", &t->negatives_sum, err)) ||
        (st = vtr_checkpoint_load_params(&ck, vtr_run_model_params(&t->m), 0, err)) ||
        (st = vtr_checkpoint_load_optimizer(&ck, vtr_run_model_params(&t->m), &t->optim,
                                            err)) ||
        (st = vtr_checkpoint_load_state(&ck, &state, err)))
        goto end;
    t->best_epoch = (int)best_epoch - 1;
    t->step = state.step;
    *epoch = state.epoch;
    *iteration = state.iteration;
end:
    vtr_checkpoint_close(&ck);
    return st;
}

/* A fresh run's parameters beyond the seed's initialization: GloVe rows of the word
 * embedding, or every parameter from a checkpoint. *word_vectors: words given a vector,
 * -1 when none were asked for. */
static vtr_status start_params(trainer *t, int64_t *word_vectors, vtr_error *err)
{
    const vtr_train_options *o = t->o;
    vtr_status st = VTR_OK;
    *word_vectors = -1;
    if (o->word_vectors[0]) {
        vtr_glove_options go = {.dim = o->model.word_dim};
        vtr_glove_stats gs;
        if ((st = vtr_glove_load(o->word_vectors, t->su->vocab, &go,
                                 vtr_run_model_word_embedding(&t->m), &gs, err))) {
            vtr_error_context(err, "model.word_vectors");
            return st;
        }
        *word_vectors = gs.hits;
    }
    if (o->init[0]) {
        vtr_trained_model init;
        st = vtr_trained_model_open(o->init, NULL, NULL, 0, NULL, &init, err);
        if (st == VTR_OK && !vtr_vocab_same(init.vocab, t->su->vocab))
            st = vtr_fail(err, VTR_ERR_INVALID, "%s was trained with another vocabulary (%s) "
                          "than this run's", o->init, init.vocab_path);
        else if (st == VTR_OK)
            st = vtr_checkpoint_load_params(&init.ck, vtr_run_model_params(&t->m), 0, err);
        vtr_trained_model_close(&init);
        if (st != VTR_OK)
            vtr_error_context(err, "train.init");
    }
    return st;
}

/* ---- metrics.jsonl ---------------------------------------------------------------- */

/* Rewrites the log keeping only the lines of epochs before `epoch` (all of them written by
 * an earlier part of this run); a missing log is created empty. A log that cannot be read
 * whole fails the rewrite (it is left as it was). */
static vtr_status truncate_metrics_file(trainer *t, int64_t epoch, vtr_error *err)
{
    vtr_atomic_file out;
    vtr_status st = vtr_atomic_open(&out, t->metrics_path, err);
    if (st != VTR_OK)
        return st;
    FILE *in = fopen(t->metrics_path, "r");
    if (!in && errno != ENOENT)
        st = vtr_fail_errno(err, "%s", t->metrics_path);
    vtr_line_reader r;
    vtr_line_reader_init(&r, in, t->metrics_path);
    char *line;
    size_t len;
    while (in && st == VTR_OK && (st = vtr_line_next(&r, &line, &len, err)) == VTR_OK && line) {
        json_t *obj = json_loadb(line, len, 0, NULL);
        json_t *e = obj ? json_object_get(obj, "epoch") : NULL;
        bool keep = e && json_is_integer(e) && json_integer_value(e) <= epoch;
        json_decref(obj);
        if (keep && (st = vtr_write_all(out.fp, line, len, t->metrics_path, err)) == VTR_OK)
            st = vtr_write_all(out.fp, "\n", 1, t->metrics_path, err);
    }
    vtr_line_reader_free(&r);
    if (in)
        fclose(in);
    if (st != VTR_OK) {
        vtr_atomic_abort(&out);
        return st;
    }
    return vtr_atomic_commit(&out, err);
}

static vtr_status truncate_metrics(trainer *t, int64_t epoch, vtr_error *err)
{
    vtr_status st = is_writer(t) ? truncate_metrics_file(t, epoch, err) : VTR_OK;
    return vtr_dist_agree(t->dist, st, err);
}

static vtr_status append_metrics_line(trainer *t, const vtr_train_epoch_info *info,
                                      int64_t steps, double lr_first, double lr_last,
                                      vtr_hinge_negatives neg, vtr_error *err)
{
    json_t *obj = json_pack("{s:i, s:I, s:f, s:s, s:f, s:[f, f], s:o, s:b, s:f, s:f}", "epoch",
                            info->epoch + 1, "steps", (json_int_t)steps, "loss", info->loss,
                            "negatives", neg == VTR_HINGE_ALL_NEGATIVES ? "all" : "hardest",
                            "k", info->negatives, "lr", lr_first, lr_last, "val",
                            vtr_retrieval_metrics_json(&info->val), "best", info->best,
                            "train_s", info->train_s, "val_s", info->val_s);
    char *text = obj ? json_dumps(obj, VTR_JSON_FLAGS) : NULL;
    json_decref(obj);
    if (!text)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory writing %s", t->metrics_path);
    vtr_status st = VTR_OK;
    FILE *f = fopen(t->metrics_path, "a");
    if (!f)
        st = vtr_fail_errno(err, "%s", t->metrics_path);
    else if (fprintf(f, "%s\n", text) < 0 || fflush(f) != 0)
        st = vtr_fail_errno(err, "writing %s", t->metrics_path);
    if (f && fclose(f) != 0 && st == VTR_OK)
        st = vtr_fail_errno(err, "closing %s", t->metrics_path);
    free(text);
    return st;
}

static vtr_status append_metrics(trainer *t, const vtr_train_epoch_info *info, int64_t steps,
                                 double lr_first, double lr_last, vtr_hinge_negatives neg,
                                 vtr_error *err)
{
    vtr_status st = is_writer(t) ? append_metrics_line(t, info, steps, lr_first, lr_last, neg,
                                                       err)
                                 : VTR_OK;
    return vtr_dist_agree(t->dist, st, err);
}

/* ---- the loop --------------------------------------------------------------------- */

/* On the GPU, its products from now on in p (lib/device.h); nothing on the CPU, where
 * vtr_matmul_use decides. */
static vtr_status gpu_products(const trainer *t, vtr_precision p, vtr_error *err)
{
    return t->dev == VTR_DEVICE_CUDA ? vtr_cuda_set_precision(p, err) : VTR_OK;
}

/* Asks for iteration's batch of this epoch's order (the last one may be short). */
static void request_batch(trainer *t, int64_t iteration, const vtr_augment *aug)
{
    int64_t first = iteration * t->o->batch_size, n_caps = t->train_b.b[0].split->n_caps;
    int B = (int)(n_caps - first < t->o->batch_size ? n_caps - first : t->o->batch_size);
    vtr_batch_ahead_request(&t->train_b, t->order + first, B, aug);
}

/* vtr_batch_ahead_stage_fn: batch n+1's copy to the GPU, queued during step n */
static vtr_status stage_batch(void *trainer_, int k, vtr_batcher *b, vtr_error *err)
{
    trainer *t = trainer_;
    return vtr_run_model_stage(&t->m, k, b, t->dist, err);
}

static void trainer_free(trainer *t)
{
    vtr_batch_ahead_free(&t->train_b);
    vtr_batcher_free(&t->val_b);
    vtr_optimizer_free(&t->optim);
    vtr_dev_free(t->dev, t->moments);
    vtr_dev_free(t->dev, t->scratch);
    vtr_run_model_free(&t->m);
    free(t->order);
    free(t->config_text);
    free(t->last_path);
    free(t->best_path);
    free(t->metrics_path);
}

/* The GPU of this rank: cuda:index alone; in a data-parallel job, the ranks on one
 * machine take the visible GPUs from cuda:index on, in turn (local rank 0 on index, 1 on
 * index + 1, ...), wrapping around when there are more ranks than GPUs. */
static int rank_gpu(const vtr_dist *d, int index)
{
    int gpus = vtr_cuda_device_count();
    return d->size > 1 && index >= 0 && index < gpus ? (index + d->local_rank) % gpus : index;
}

/* The checks of trainer_init, which every rank makes alike on the same config and data. */
static vtr_status check_setup(const vtr_trainer_setup *su, int ranks, vtr_error *err)
{
    const vtr_train_options *o = su->opt;
    const vtr_split *tr = su->train, *va = su->val;
    vtr_status st;
    if ((st = vtr_train_check_ranks(o, ranks, err)))
        return st;
    int64_t F = vtr_feature_store_reader_dim(tr->store);
    if (F != o->model.feature_dim)
        return vtr_fail(err, VTR_ERR_INVALID, "model.feature_dim is %d but the features of "
                        "split '%s' have %lld dimensions", o->model.feature_dim, tr->name,
                        (long long)F);
    if (vtr_feature_store_reader_dim(va->store) != F)
        return vtr_fail(err, VTR_ERR_INVALID, "the training and validation features differ "
                        "in size");
    if (vtr_train_iterations_per_epoch(tr->n_caps, o->batch_size, o->drop_last, ranks) < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "split '%s' has %d captions, fewer than one "
                        "batch of %d", tr->name, tr->n_caps, o->batch_size);
    return VTR_OK;
}

/* The model, optimizer and batches of trainer_init, on this rank's device. */
static vtr_status trainer_alloc(trainer *t, vtr_error *err)
{
    const vtr_trainer_setup *su = t->su;
    const vtr_train_options *o = su->opt;
    const vtr_split *tr = su->train, *va = su->val;
    int max_batch = o->batch_size > o->val_batch_size ? o->batch_size : o->val_batch_size;
    int max_frames = tr->max_frames > va->max_frames ? tr->max_frames : va->max_frames;
    int max_words = tr->max_words > va->max_words ? tr->max_words : va->max_words;
    vtr_status st;
    if ((st = vtr_run_model_init(&t->m, o, su->vocab, o->device, max_batch, max_frames,
                                 max_words, err)))
        return st;
    t->dev = vtr_run_model_device(&t->m, &t->dev_data, &t->dev_grad);
    size_t n = vtr_run_model_params(&t->m)->n_trainable;
    if ((t->dev == VTR_DEVICE_CUDA &&
         ((st = vtr_dev_alloc(t->dev, &t->moments, sizeof(float) * 2 * n, "optimizer moments",
                              false, err)) ||
          (st = vtr_dev_alloc(t->dev, &t->scratch, VTR_DEV_STEP_SCRATCH, "gradient clipping", false,
                              err)))) ||
        (st = vtr_optimizer_init(&t->optim, vtr_run_model_params(&t->m), &o->optim, err)) ||
        (st = vtr_batch_ahead_init(&t->train_b, tr, o->batch_size, true, stage_batch, t, err)) ||
        (st = vtr_batcher_init(&t->val_b, va, o->val_batch_size, err)) ||
        (st = vtr_config_dump_string(su->config, &t->config_text, err)))
        return st;
    t->order = malloc((size_t)tr->n_caps * sizeof *t->order);
    t->last_path = vtr_path_join(su->output_dir, VTR_RUN_LAST);
    t->best_path = vtr_path_join(su->output_dir, VTR_RUN_BEST);
    t->metrics_path = vtr_path_join(su->output_dir, VTR_RUN_METRICS);
    if (!t->order || !t->last_path || !t->best_path || !t->metrics_path)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    return VTR_OK;
}

static vtr_status trainer_init(trainer *t, const vtr_trainer_setup *su, vtr_error *err)
{
    const vtr_train_options *o = su->opt;
    vtr_status st;
    memset(t, 0, sizeof *t);
    t->su = su;
    t->o = o;
    t->solo = (vtr_dist){.size = 1};
    t->dist = su->dist ? su->dist : &t->solo;
    t->best_rsum = -1.0;
    t->best_epoch = -1;
    int ranks = t->dist->size;
    if ((st = check_setup(su, ranks, err)))
        return vtr_dist_fail_alike(t->dist, st);
    snprintf(t->device_name, sizeof t->device_name, "cpu");
    if (o->device == VTR_DEVICE_CUDA) {
        if ((st = vtr_cuda_init(rank_gpu(t->dist, o->device_index), t->device_name,
                                sizeof t->device_name, err)))
            vtr_error_context(err, "train.device cuda:%d", o->device_index);
        /* every rank has its GPU before they choose how the GPUs exchange */
        char how[sizeof err->msg + 32];
        if ((st = vtr_dist_agree(t->dist, st, err)) ||
            (st = vtr_dist_device_init(t->dist, o->device, how, sizeof how, err)))
            return st;
        if (ranks > 1) {
            size_t len = strlen(t->device_name);
            snprintf(t->device_name + len, sizeof t->device_name - len,
                     "; the ranks exchange through %s", how);
        }
    }
    /* a GPU short of memory on one rank: every rank learns it */
    return vtr_dist_agree(t->dist, trainer_alloc(t, err), err);
}

/* Validation, best checkpoint, metrics line and the epoch-end checkpoint of epoch e. */
static vtr_status finish_epoch(trainer *t, int e, int64_t iters, double train_s,
                               vtr_hinge_negatives neg, vtr_error *err)
{
    const vtr_train_options *o = t->o;
    const vtr_trainer_setup *su = t->su;
    vtr_train_epoch_info info = {.epoch = e, .train_s = train_s};
    vtr_retrieval_options ro = {.fold_items = o->val_fold_items};
    if (o->kind == VTR_MODEL_HGR) { /* HGR's protocol: de-duplicated texts, median + 1 */
        ro.cap_text = t->val_b.split->cap_text;
        ro.n_texts = t->val_b.split->n_texts;
        ro.median_no_floor = 1;
    }
    vtr_status st;
    if (su->on_validate)
        su->on_validate(su->ctx, e);
    double t0 = vtr_now_seconds();
    /* each rank counts the metrics after the last gather: a failure there is agreed on */
    st = vtr_run_model_evaluate(&t->m, &t->val_b, t->dist, &ro, &info.val, NULL, err);
    if ((st = vtr_dist_agree(t->dist, st, err))) {
        vtr_error_context(err, "validation after epoch %d", e);
        return st;
    }
    info.val_s = vtr_now_seconds() - t0;
    info.loss = t->loss_steps ? t->loss_sum / (double)t->loss_steps : 0.0;
    info.negatives = t->loss_steps ? (double)t->negatives_sum / (double)t->loss_steps : 0.0;
    if (t->best_epoch < 0 || info.val.rsum > t->best_rsum) {
        t->best_rsum = info.val.rsum;
        t->best_epoch = e;
        info.best = true;
        if ((st = save_best(t, e, info.val.rsum, err)))
            return st;
    }
    double lr_first = vtr_lr_at(&o->lr, e, 0, iters), lr_last = vtr_lr_at(&o->lr, e, iters - 1,
                                                                          iters);
    if ((st = append_metrics(t, &info, t->loss_steps, lr_first, lr_last, neg, err)))
        return st;
    t->loss_sum = 0.0;
    t->negatives_sum = 0;
    t->loss_steps = 0;
    if ((st = save_last(t, e + 1, 0, err)))
        return st;
    if (su->on_epoch)
        su->on_epoch(su->ctx, &info);
    return VTR_OK;
}

vtr_status vtr_train_run(const vtr_trainer_setup *su, vtr_train_result *result, vtr_error *err)
{
    const vtr_train_options *o = su->opt;
    const vtr_split *tr = su->train;
    trainer t;
    int64_t epoch = 0, iteration = 0;
    vtr_status st;
    memset(result, 0, sizeof *result);
    if ((st = trainer_init(&t, su, err)))
        goto end;
    vtr_train_start_info start = {.resumed = su->resume,
                                  .init = !su->resume && o->init[0] ? o->init : NULL,
                                  .word_vectors = -1,
                                  .vocab_size = vtr_vocab_size(su->vocab),
                                  .device = t.device_name};
    if (su->resume) {
        st = resume(&t, &epoch, &iteration, err);
        result->resumed_from_end = epoch >= o->epochs;
    } else {
        vtr_run_model_init_params(&t.m, (uint64_t)o->seed);
        st = start_params(&t, &start.word_vectors, err);
    }
    if (st == VTR_OK)
        st = state_to_device(&t, err);
    /* a checkpoint one rank cannot read (no shared file system): every rank learns it */
    if ((st = vtr_dist_agree(t.dist, st, err)))
        goto end;
    start.epoch = (int)epoch;
    start.iteration = iteration;
    if (su->on_start)
        su->on_start(su->ctx, &start);
    if ((st = truncate_metrics(&t, epoch, err)))
        goto end;

    int64_t iters = vtr_train_iterations_per_epoch(tr->n_caps, o->batch_size, o->drop_last,
                                                   t.dist->size);
    vtr_augment aug = {.seed = (uint64_t)o->seed,
                       .frame_drop = o->frame_drop,
                       .caption_hit = o->caption_hit,
                       .vocab_size = vtr_vocab_size(su->vocab),
                       .mask_id = vtr_vocab_special_ids(su->vocab).mask};
    /* a resumed run that has reached max_steps already stays where it is */
    bool stopped = su->max_steps > 0 && t.step >= su->max_steps && epoch < o->epochs;
    for (; epoch < o->epochs && !stopped; epoch++, iteration = 0) {
        int e = (int)epoch;
        vtr_hinge_negatives neg = e < o->warmup_epochs ? VTR_HINGE_ALL_NEGATIVES : o->negatives;
        vtr_epoch_order(t.order, tr->n_caps, (uint64_t)o->seed, epoch);
        aug.epoch = epoch;
        double t0 = vtr_now_seconds();
        if (iteration < iters)
            request_batch(&t, iteration, o->size_augment ? &aug : NULL);
        for (; iteration < iters; iteration++) {
            float loss = 0.0f;
            vtr_param_set *params = vtr_run_model_params(&t.m);
            int negatives = 0;
            vtr_batcher *batch = NULL;
            st = vtr_run_model_zero_grad(&t.m, err);
            if (st == VTR_OK)
                st = vtr_batch_ahead_take(&t.train_b, &batch, err);
            if (st == VTR_OK && iteration + 1 < iters) /* built while this step runs */
                request_batch(&t, iteration + 1, o->size_augment ? &aug : NULL);
            /* data parallel: every rank learns a failure of any before the step's
             * collectives; one among them is this rank's alone (lib/dist.h) */
            if ((st = vtr_dist_agree(t.dist, st, err)))
                goto end;
            vtr_precision before = vtr_matmul_use(o->precision);
            st = gpu_products(&t, o->precision, err); /* the step's in train.precision */
            if (st == VTR_OK)
                st = vtr_run_model_step(&t.m, batch, neg, (uint64_t)o->seed, t.step, t.dist, &loss,
                                        &negatives, err);
            vtr_matmul_use(before);
            if (st == VTR_OK) /* the rest in float32 */
                st = gpu_products(&t, VTR_PRECISION_F32, err);
            if (st == VTR_OK) /* the summed gradients */
                st = vtr_dist_sum_on(t.dist, t.dev, t.dev_grad, params->n_trainable, err);
            if (st)
                goto end;
            /* every rank has the same loss (of the gathered batch) and gradient norm (of
             * the same summed gradients), so every rank stops at the same check */
            if (!isfinite(loss)) {
                st = vtr_dist_fail_alike(t.dist, vtr_fail(err, VTR_ERR_INVALID,
                                                          "loss is %g at epoch %d, step %lld",
                                                          (double)loss, e, (long long)iteration));
                goto end;
            }
            double lr = vtr_lr_at(&o->lr, epoch, iteration, iters);
            float norm;
            /* clipping (train.grad_clip) as the optimizer reads the gradients; a step with a
             * non-finite norm ends the run, and its parameters are never saved */
            if ((st = vtr_dev_clip_and_step(
                     t.dev, &t.optim, params, t.dev_data, t.dev_grad, t.moments, t.scratch, lr,
                     o->grad_clip > 0.0 ? o->grad_clip : INFINITY, &norm, err)))
                goto end;
            if (!isfinite(norm)) {
                st = vtr_dist_fail_alike(t.dist, vtr_fail(err, VTR_ERR_INVALID,
                                                          "gradient norm is %g at epoch %d, "
                                                          "step %lld",
                                                          (double)norm, e, (long long)iteration));
                goto end;
            }
            t.step++;
            t.loss_sum += (double)loss;
            t.negatives_sum += negatives;
            t.loss_steps++;
            if (su->on_step) {
                vtr_train_step_info info = {.epoch = e,
                                            .epochs = o->epochs,
                                            .iteration = iteration,
                                            .iterations = iters,
                                            .step = t.step,
                                            .loss = loss,
                                            .lr = lr,
                                            .negatives = negatives};
                su->on_step(su->ctx, &info);
            }
            bool stop = su->stop && *su->stop;
            if ((st = vtr_dist_any(t.dist, &stop, err)))
                goto end;
            if ((su->max_steps > 0 && t.step >= su->max_steps) || stop) {
                stopped = true;
                iteration++;
                if ((st = save_last(&t, epoch, iteration, err)))
                    goto end;
                break;
            }
            if (o->checkpoint_every > 0 && t.step % o->checkpoint_every == 0 &&
                iteration + 1 < iters && (st = save_last(&t, epoch, iteration + 1, err)))
                goto end;
        }
        if (stopped)
            break;
        if ((st = finish_epoch(&t, e, iters, vtr_now_seconds() - t0, neg, err)))
            goto end;
    }
    result->finished = !stopped;
    result->epoch = (int)epoch;
    result->iteration = stopped ? iteration : 0;
end:
    result->steps = t.step;
    result->best_rsum = t.best_rsum;
    result->best_epoch = t.best_epoch;
    trainer_free(&t);
    return st;
}
