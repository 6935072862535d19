/* bench/train_step: one VSE∞ video training step of vtr (match/vse_model.h), timed; with
 * --model set, one set-embedding step on the same encoders. The PyTorch side is
 * bench/train_step/torch_step.py, the driver bench/train_step/run.sh.
 *
 *   train_step prepare DIR [--model vse|set] [--warmup W] [--steps N]
 *                        writes the batches and the initial weights for torch_step.py to DIR
 *   train_step run [--model vse|set] [--warmup W] [--steps N] [--dropout-off]
 *                  [--device cpu|cuda] [--precision float32|bfloat16|tf32]
 *                        times vtr, prints one JSON line
 *
 * vse (the default) is the reference VSE∞ for video (REFERENCE.md): frame features 2048 ->
 * fc 1024 (no MLP), BiGRU 300 -> 1024 with directions averaged, GPO (32, 32) on both sides,
 * l2norm, hinge loss with the hardest negative (margin 0.2, sum), gradient clipping at 2.0,
 * AdamW (lr 1e-4, weight decay 0.01). Vocabulary 10,000 (the last id is <mask>).
 *
 * set is configs/msrvtt-set.yaml's model on the same encoders (match/vse_model.h, set
 * embeddings): a set prediction module per side (K 4, T 4, Dh 2048, H 4096, dropout 0.1; 0
 * with --dropout-off) on the element embeddings and the GPO-pooled global feature,
 * smooth-Chamfer (alpha 16), hinge with the hardest negative averaged over the batch + 0.01
 * L_div + 0.01 L_mmd; clipping at 1.0, AdamW (lr 1e-4, weight decay 1e-4) with the set
 * modules at lr x 0.1. The dropout of step s draws from (SEED, s).
 *
 * Data: 128 items of 20 random frame features and one caption of 8..16 tokens each (fixed
 * seed). Each step's batch applies size augmentation (aggregate/gpo.h: frames dropped with
 * p 0.2; caption tokens masked, replaced or deleted) from its own streams, then sorts the
 * pairs by caption length, longest first, as the reference's collate_fn does, and pads.
 * Batches are built outside the timed region on both sides, and both sides see the same
 * batches (prepare writes exactly what run builds). A timed step is: zero the gradients,
 * forward, loss, backward, clip, AdamW.
 *
 * run also times cblas_sgemm on 2048^3 (the best of 5) as the machine's sgemm peak, counts
 * the step's matrix-product FLOPs (vtr_vse_train_step_flops) and reads its peak resident
 * memory (getrusage).
 *
 * --device cuda (vse only): the model, AdamW and the clipping on the GPU (match/vse_model.h,
 * match/model_ops.h); a timed step ends when the gradient norm is back on the host, after
 * which the GPU has nothing queued. Each batch is staged (vtr_vse_stage_batch) before the
 * previous step, outside the timing, as the trainer's batch thread does: its copy to the
 * GPU runs beside that step's kernels, and the timed step waits for it if it is not done.
 * --precision tf32 or bfloat16 runs every product of the step on tensor cores
 * (vtr_cuda_set_precision). The peak is cuBLAS's sgemm on 4096^3 in the same precision
 * (best of 5), and the JSON line names the GPU.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/gpo.h"
#include "bench/train_step/step_timing.h"
#include "lib/checkpoint.h"
#include "lib/npy.h"
#include "lib/optim.h"
#include "lib/rng.h"
#include "match/model_ops.h"
#include "match/vse_model.h"

enum {
    BATCH = 128,
    FRAMES = 20, /* frames per item before augmentation */
    FEAT = 2048,
    MIN_WORDS = 8, /* caption length with <start> and <end> */
    MAX_WORDS = 16,
    VOCAB = 10000, /* ids 0 <pad>, 1 <start>, 2 <end>, 3 <unk>, ..., VOCAB-1 <mask> */
};
#define SEED 20240601u
#define LR 1e-4

/* The data set and one step's batch. */
typedef struct bench_data {
    float *frames;               /* (BATCH, FRAMES, FEAT) */
    int words[BATCH][MAX_WORDS]; /* captions, lengths below */
    int nwords[BATCH];
} bench_data;

typedef struct step_batch {
    int item[BATCH];         /* slot -> item */
    int keep[BATCH][FRAMES]; /* kept frames of the slot's item, -1 after */
    int frame_len[BATCH];
    int ids[BATCH][MAX_WORDS]; /* augmented caption, 0 after */
    int cap_len[BATCH];
    int T, L; /* padded lengths */
} step_batch;

static void make_data(bench_data *d)
{
    vtr_rng rng;
    vtr_rng_init(&rng, SEED, 1);
    random_frames(d->frames, (size_t)BATCH * FRAMES * FEAT, &rng);
    for (int b = 0; b < BATCH; b++) {
        int len = MIN_WORDS + (int)vtr_rng_below(&rng, MAX_WORDS - MIN_WORDS + 1);
        d->nwords[b] = len;
        d->words[b][0] = 1;
        for (int t = 1; t < len - 1; t++)
            d->words[b][t] = 4 + (int)vtr_rng_below(&rng, VOCAB - 5);
        d->words[b][len - 1] = 2;
    }
}

/* Step s's batch: augmentation from streams (s, item), then the reference's sort. */
static void make_batch(step_batch *sb, const bench_data *d, int s)
{
    step_batch raw;
    memset(&raw, 0, sizeof raw);
    for (int b = 0; b < BATCH; b++) {
        uint64_t stream = 1000 + ((uint64_t)s * BATCH + (uint64_t)b) * 2;
        raw.item[b] = b;
        raw.frame_len[b] =
            vtr_gpo_augment_set(raw.keep[b], FRAMES, VTR_GPO_AUGMENT_P, SEED, stream);
        for (int t = raw.frame_len[b]; t < FRAMES; t++)
            raw.keep[b][t] = -1;
        raw.cap_len[b] = vtr_gpo_augment_caption(raw.ids[b], d->words[b], d->nwords[b], VOCAB,
                                                 VOCAB - 1, VTR_GPO_AUGMENT_P, SEED, stream + 1);
    }
    /* stable sort of the slots by caption length, longest first */
    int order[BATCH];
    for (int i = 0; i < BATCH; i++) {
        int k = i;
        while (k > 0 && raw.cap_len[order[k - 1]] < raw.cap_len[i]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
    memset(sb, 0, sizeof *sb);
    for (int i = 0; i < BATCH; i++) {
        int b = order[i];
        sb->item[i] = raw.item[b];
        memcpy(sb->keep[i], raw.keep[b], sizeof raw.keep[b]);
        sb->frame_len[i] = raw.frame_len[b];
        memcpy(sb->ids[i], raw.ids[b], sizeof(int) * (size_t)raw.cap_len[b]);
        sb->cap_len[i] = raw.cap_len[b];
        sb->T = sb->frame_len[i] > sb->T ? sb->frame_len[i] : sb->T;
        sb->L = sb->cap_len[i] > sb->L ? sb->cap_len[i] : sb->L;
    }
}

/* The padded model inputs of a step: frames (BATCH, T, FEAT) zero-padded, ids (BATCH, L). */
static void pad_batch(float *frames, int *ids, const step_batch *sb, const bench_data *d)
{
    for (int i = 0; i < BATCH; i++) {
        float *dst = frames + (size_t)i * sb->T * FEAT;
        for (int t = 0; t < sb->frame_len[i]; t++)
            memcpy(dst + (size_t)t * FEAT,
                   d->frames + ((size_t)sb->item[i] * FRAMES + (size_t)sb->keep[i][t]) * FEAT,
                   sizeof(float) * FEAT);
        memset(dst + (size_t)sb->frame_len[i] * FEAT, 0,
               sizeof(float) * (size_t)(sb->T - sb->frame_len[i]) * FEAT);
        for (int t = 0; t < sb->L; t++)
            ids[i * sb->L + t] = t < sb->cap_len[i] ? sb->ids[i][t] : 0;
    }
}

/* The benchmarked recipe: the model, its optimizer's weight decay, the clipping norm. */
typedef struct bench_recipe {
    const char *model; /* "vse" or "set" */
    bool dropout;      /* set: the set modules' dropout on (0.1) or off */
    vtr_vse_config cfg;
    double weight_decay, clip;
} bench_recipe;

/* The recipe of model ("vse" or "set"; -1 for another name). */
static int bench_recipe_of(bench_recipe *r, const char *model, bool dropout)
{
    vtr_vse_config cfg = vtr_vse_config_infinity(VOCAB);
    cfg.mlp_hidden = 0; /* frame features: Linear 2048 -> 1024 alone */
    if (strcmp(model, "vse") == 0) {
        *r = (bench_recipe){.model = "vse", .dropout = false, .cfg = cfg, .weight_decay = 0.01,
                            .clip = 2.0};
        return 0;
    }
    if (strcmp(model, "set") != 0)
        return -1;
    cfg.reduction = VTR_REDUCE_MEAN;
    cfg.set = vtr_vse_set_config_default(cfg.embed_size);
    cfg.set.lr_scale = 0.1f;
    if (!dropout)
        cfg.set.dropout = 0.0f;
    *r = (bench_recipe){.model = "set", .dropout = dropout, .cfg = cfg, .weight_decay = 1e-4,
                        .clip = 1.0};
    return 0;
}

/* ---- prepare: the same batches and weights for torch_step.py ---- */

static vtr_status prepare(const char *dir, int nsteps, const bench_recipe *recipe,
                          const bench_data *d, vtr_error *err)
{
    vtr_status st;
    vtr_vse_model m;
    char path[4096];
    size_t per = (size_t)nsteps * BATCH;
    int *item = malloc(sizeof(int) * per), *flen = malloc(sizeof(int) * per);
    int *clen = malloc(sizeof(int) * per), *keep = malloc(sizeof(int) * per * FRAMES);
    int *ids = malloc(sizeof(int) * per * MAX_WORDS);
    step_batch *sb = malloc(sizeof *sb);
    memset(&m, 0, sizeof m);
    if (!item || !flen || !clen || !keep || !ids || !sb) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    for (int s = 0; s < nsteps; s++) {
        make_batch(sb, d, s);
        for (int i = 0; i < BATCH; i++) {
            size_t r = (size_t)s * BATCH + (size_t)i;
            item[r] = sb->item[i];
            flen[r] = sb->frame_len[i];
            clen[r] = sb->cap_len[i];
            memcpy(keep + r * FRAMES, sb->keep[i], sizeof sb->keep[i]);
            memcpy(ids + r * MAX_WORDS, sb->ids[i], sizeof sb->ids[i]);
        }
    }
    int64_t s2[2] = {nsteps, BATCH}, s3[3] = {nsteps, BATCH, FRAMES};
    int64_t w3[3] = {nsteps, BATCH, MAX_WORDS}, f3[3] = {BATCH, FRAMES, FEAT};
    if ((st = save_npy(dir, "frames", VTR_F32, d->frames, 3, f3, err)) ||
        (st = save_npy(dir, "item", VTR_I32, item, 2, s2, err)) ||
        (st = save_npy(dir, "frame_len", VTR_I32, flen, 2, s2, err)) ||
        (st = save_npy(dir, "cap_len", VTR_I32, clen, 2, s2, err)) ||
        (st = save_npy(dir, "keep", VTR_I32, keep, 3, s3, err)) ||
        (st = save_npy(dir, "ids", VTR_I32, ids, 3, w3, err)))
        goto end;
    if ((st = vtr_vse_model_init(&m, &recipe->cfg, BATCH, FRAMES, MAX_WORDS, err)))
        goto end;
    vtr_vse_init_params(&m, SEED);
    snprintf(path, sizeof path, "%s/init.safetensors", dir);
    st = vtr_checkpoint_save(path, &m.params, NULL, NULL, err);
end:
    vtr_vse_model_free(&m);
    free(item), free(flen), free(clen), free(keep), free(ids), free(sb);
    return st;
}

/* ---- run ---- */

/* GFLOP/s of the best of 5 cuBLAS float32 products on n x n x n (after 2 warm-ups); 0 with
 * err set when a CUDA call fails. */
static double cuda_sgemm_peak(int n, vtr_error *err)
{
    size_t bytes = sizeof(float) * (size_t)n * n;
    float *a = NULL, *b = NULL, *c = NULL;
    double best = 1e30;
    if (vtr_cuda_malloc((void **)&a, bytes, err) || vtr_cuda_malloc((void **)&b, bytes, err) ||
        vtr_cuda_malloc((void **)&c, bytes, err) || vtr_cuda_uniform(a, (size_t)n * n, 1, 1, err) ||
        vtr_cuda_uniform(b, (size_t)n * n, 1, 2, err))
        best = -1.0;
    for (int i = 0; i < 7 && best > 0.0; i++) {
        double t0 = now();
        if (vtr_cuda_matmul(a, b, c, n, n, n, err)) /* waits for the product */
            best = -1.0;
        else if (i >= 2 && now() - t0 < best)
            best = now() - t0;
    }
    vtr_cuda_free(a), vtr_cuda_free(b), vtr_cuda_free(c);
    return best > 0.0 ? 2.0 * n * n * (double)n / best / 1e9 : 0.0;
}

/* Step s's batch, built and padded into the buffers s % 2, and staged into the model's
 * slot s % 2 (vtr_vse_stage_batch: its copy to the GPU starts; nothing on the CPU), as
 * the trainer's batch thread does while the previous step runs. */
static vtr_status next_batch(vtr_vse_model *m, vtr_vse_batch *batch, float **frames, int **ids,
                             step_batch *sb, const bench_data *d, int s, vtr_error *err)
{
    int k = s % 2;
    make_batch(&sb[k], d, s);
    pad_batch(frames[k], ids[k], &sb[k], d);
    batch[k] = (vtr_vse_batch){.B = BATCH,
                               .T = sb[k].T,
                               .frames = frames[k],
                               .frame_lengths = sb[k].frame_len,
                               .L = sb[k].L,
                               .ids = ids[k],
                               .caption_lengths = sb[k].cap_len,
                               .seed = SEED,
                               .step = s};
    return vtr_vse_stage_batch(m, k, &batch[k], err);
}

static vtr_status run(int warmup, int nsteps, const bench_recipe *recipe, vtr_device dev,
                      const bench_data *d, vtr_error *err)
{
    vtr_status st;
    vtr_vse_model m;
    vtr_optimizer opt;
    void *moments = NULL, *scratch = NULL;
    char gpu[256] = "";
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    hp.weight_decay = recipe->weight_decay;
    /* two steps' batches: step s's, and step s+1's being copied to the GPU */
    float *frames[2] = {malloc(sizeof(float) * BATCH * FRAMES * FEAT),
                        malloc(sizeof(float) * BATCH * FRAMES * FEAT)};
    int *ids[2] = {malloc(sizeof(int) * BATCH * MAX_WORDS),
                   malloc(sizeof(int) * BATCH * MAX_WORDS)};
    step_batch *sb = malloc(2 * sizeof *sb);
    vtr_vse_batch batch[2];
    double *times = malloc(sizeof(double) * (size_t)(warmup + nsteps));
    float *losses = malloc(sizeof(float) * (size_t)(warmup + nsteps));
    memset(&m, 0, sizeof m);
    memset(&opt, 0, sizeof opt);
    if (!frames[0] || !frames[1] || !ids[0] || !ids[1] || !sb || !times || !losses) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    double peak;
    if (dev == VTR_DEVICE_CUDA) {
        if ((st = vtr_cuda_init(0, gpu, sizeof gpu, err)) ||
            (st = vtr_cuda_set_precision(bench_precision, err)))
            goto end;
        if ((peak = cuda_sgemm_peak(4096, err)) == 0.0) {
            st = err->status;
            goto end;
        }
    } else {
        peak = sgemm_peak(2048);
    }
    if ((st = vtr_vse_model_init_on(&m, &recipe->cfg, dev, BATCH, FRAMES, MAX_WORDS, err)))
        goto end;
    vtr_vse_init_params(&m, SEED);
    size_t n = m.params.n_trainable;
    if ((st = vtr_vse_params_to_device(&m, err)) ||
        (st = vtr_optimizer_init(&opt, &m.params, &hp, err)) ||
        (dev == VTR_DEVICE_CUDA &&
         ((st = vtr_dev_alloc(dev, &moments, sizeof(float) * 2 * n, "AdamW moments", false, err)) ||
          (st = vtr_dev_alloc(dev, &scratch, VTR_DEV_STEP_SCRATCH, "clipping", false, err)))))
        goto end;

    double flops = 0.0, timed = 0.0;
    if ((st = next_batch(&m, batch, frames, ids, sb, d, 0, err)))
        goto end;
    for (int s = 0; s < warmup + nsteps; s++) {
        /* the next step's batch, staged: on the GPU its copy runs beside this step */
        if (s + 1 < warmup + nsteps && (st = next_batch(&m, batch, frames, ids, sb, d, s + 1, err)))
            goto end;
        double t0 = now();
        float norm;
        if ((st = vtr_vse_zero_grad(&m, err)) ||
            (st = vtr_vse_train_step(&m, &batch[s % 2], VTR_HINGE_HARDEST_NEGATIVE, &losses[s],
                                     err)) ||
            (st = vtr_dev_clip_and_step(dev, &opt, &m.params, m.dev_data, m.dev_grad, moments,
                                        scratch, LR, recipe->clip, &norm, err)))
            goto end;
        times[s] = now() - t0;
        if (s >= warmup) {
            flops += vtr_vse_train_step_flops(&m, &batch[s % 2]);
            timed += times[s];
        }
    }
    char fields[512];
    snprintf(fields, sizeof fields, "\"model\": \"%s\", \"dropout\": %s, \"device\": \"%s\", ",
             recipe->model, recipe->dropout ? "true" : "false", dev == VTR_DEVICE_CUDA ? gpu : "cpu");
    print_run(fields, warmup, nsteps, times, losses, flops, timed, peak);
end:
    vtr_optimizer_free(&opt);
    vtr_dev_free(dev, moments);
    vtr_dev_free(dev, scratch);
    vtr_vse_model_free(&m);
    free(frames[0]), free(frames[1]), free(ids[0]), free(ids[1]), free(sb);
    free(times), free(losses);
    return st;
}

int main(int argc, char **argv)
{
    int warmup = 2, nsteps = 10, dropout = 1;
    const char *dir, *model = "vse";
    const char *usage = "usage: train_step prepare DIR [--model vse|set] [--warmup W] [--steps N]\n"
                        "       train_step run [--model vse|set] [--warmup W] [--steps N] [--precision P] "
                        "[--dropout-off] [--device cpu|cuda]\n";
    bench_recipe recipe;
    vtr_device dev = VTR_DEVICE_CPU;
    if (parse_args(argc, argv, usage, &dir, &warmup, &nsteps, &dropout, &model, &dev))
        return 2;
    if (bench_recipe_of(&recipe, model, dropout) != 0) {
        fputs(usage, stderr);
        return 2;
    }
    vtr_error err;
    vtr_status st;
    bench_data *d = malloc(sizeof *d);
    float *frames = malloc(sizeof(float) * BATCH * FRAMES * FEAT);
    if (!d || !frames) {
        fprintf(stderr, "train_step: out of memory\n");
        free(d), free(frames);
        return 1;
    }
    d->frames = frames;
    make_data(d);
    st = dir ? prepare(dir, warmup + nsteps, &recipe, d, &err)
             : run(warmup, nsteps, &recipe, dev, d, &err);
    free(frames), free(d);
    if (st) {
        fprintf(stderr, "train_step: %s\n", err.msg);
        return 1;
    }
    return 0;
}
