/* bench/train_step, --model hgr: one HGR training step of vtr (match/hgr_model.h), timed;
 * the PyTorch side is bench/train_step/torch_hgr_step.py, the driver bench/train_step/run.sh.
 *
 *   train_step_hgr prepare DIR                         writes the data set and the initial
 *                                                      weights for torch_hgr_step.py to DIR
 *   train_step_hgr run [--warmup W] [--steps N] [--dropout-off]
 *                                                      times vtr, prints one JSON line
 *
 * The model is HGR as released for MSR-VTT (vtr_hgr_config_default, attention pooling):
 * frame features 2048 -> three levels of 1024, Embedding 10,000 x 300, BiGRU 300 -> 1024
 * (directions averaged), 16 roles, 4 verbs, 6 nouns, one attention-GCN layer, dropouts
 * 0.2 / 0.2 / 0.5 (all 0 with --dropout-off), margin 0.2, Adam (lr 1e-4), no clipping.
 *
 * Data (fixed seed): 128 items, each 20 random frame features (3 in 4 videos keep all 20,
 * the others 8..19; item 0 and item 64 keep 20, so every batch pads to T = 20) and one
 * caption of 8..30 words (ids 4 .. V-1, padded with 1 as the reference's EOS) with its
 * role graph: 1..4 one-word verb spans (role 1) and 1..6 noun spans of one or two words
 * (roles 2..15), edges root -> verb and verb <-> noun (each noun one verb's argument); one
 * caption in 16 has no verb (the reference's fallback: nouns alone, no edge). Step s
 * trains on items 64 (s mod 2) .. +63 (batch 64): both sides see the same batches. A timed
 * step is: zero the gradients, forward (dropout from (seed, step)), loss, backward, Adam.
 *
 * run also times cblas_sgemm on 2048^3 (the best of 5) as the machine's sgemm peak, counts
 * the step's matrix-product FLOPs (vtr_hgr_train_step_flops) and reads its peak resident
 * memory (getrusage).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/train_step/step_timing.h"
#include "lib/checkpoint.h"
#include "lib/npy.h"
#include "lib/optim.h"
#include "lib/rng.h"
#include "match/hgr_model.h"

enum {
    ITEMS = 128,
    BATCH = 64,
    FRAMES = VTR_HGR_MAX_FRAMES, /* 20 */
    FEAT = 2048,
    MIN_WORDS = 8,
    MAX_WORDS = VTR_HGR_MAX_WORDS, /* 30 */
    VOCAB = 10000,
    NV = VTR_HGR_NUM_VERBS,
    NN = VTR_HGR_NUM_NOUNS,
    NODES = 1 + NV + NN,
};
#define SEED 20240601u
#define LR 1e-4

typedef struct bench_data {
    float *frames; /* (ITEMS, FRAMES, FEAT) */
    int frame_len[ITEMS];
    int ids[ITEMS][MAX_WORDS]; /* padded with 1 */
    int cap_len[ITEMS];
    int verb_masks[ITEMS][NV][MAX_WORDS], noun_masks[ITEMS][NN][MAX_WORDS];
    int roles[ITEMS][NV + NN];
    float rel[ITEMS][NODES][NODES]; /* rel[target][source] */
} bench_data;

static void make_data(bench_data *d)
{
    vtr_rng rng;
    vtr_rng_init(&rng, SEED, 1);
    random_frames(d->frames, (size_t)ITEMS * FRAMES * FEAT, &rng);
    for (int b = 0; b < ITEMS; b++) {
        int full = b % BATCH == 0 || vtr_rng_below(&rng, 4) != 0;
        d->frame_len[b] = full ? FRAMES : 8 + (int)vtr_rng_below(&rng, FRAMES - 8);
        int len = MIN_WORDS + (int)vtr_rng_below(&rng, MAX_WORDS - MIN_WORDS + 1);
        d->cap_len[b] = len;
        for (int t = 0; t < MAX_WORDS; t++)
            d->ids[b][t] = t < len ? 4 + (int)vtr_rng_below(&rng, VOCAB - 4) : 1;
        int nv = vtr_rng_below(&rng, 16) == 0 ? 0 : 1 + (int)vtr_rng_below(&rng, NV);
        int nn = 1 + (int)vtr_rng_below(&rng, NN);
        for (int v = 0; v < nv; v++) {
            d->verb_masks[b][v][vtr_rng_below(&rng, (uint32_t)len)] = 1;
            d->roles[b][v] = 1;
            d->rel[b][1 + v][0] = 1.0f; /* root -> verb */
        }
        for (int k = 0; k < nn; k++) {
            int start = (int)vtr_rng_below(&rng, (uint32_t)len - 1), two = vtr_rng_below(&rng, 2);
            d->noun_masks[b][k][start] = 1;
            d->noun_masks[b][k][start + 1] = two;
            d->roles[b][NV + k] = 2 + (int)vtr_rng_below(&rng, VTR_HGR_NUM_ROLES - 2);
            if (nv > 0) {
                int v = (int)vtr_rng_below(&rng, (uint32_t)nv);
                d->rel[b][1 + NV + k][1 + v] = d->rel[b][1 + v][1 + NV + k] = 1.0f;
            }
        }
    }
}

/* ---- prepare: the data set and weights for torch_hgr_step.py ---- */

static vtr_status prepare(const char *dir, bench_data *d, vtr_error *err)
{
    vtr_status st;
    vtr_hgr_model m;
    vtr_hgr_config cfg = vtr_hgr_config_default(VOCAB, VTR_HGR_POOL_ATTENTION);
    char path[4096];
    int64_t s1[1] = {ITEMS}, f3[3] = {ITEMS, FRAMES, FEAT}, w2[2] = {ITEMS, MAX_WORDS};
    int64_t v3[3] = {ITEMS, NV, MAX_WORDS}, n3[3] = {ITEMS, NN, MAX_WORDS};
    int64_t r2[2] = {ITEMS, NV + NN}, e3[3] = {ITEMS, NODES, NODES};
    if ((st = save_npy(dir, "frames", VTR_F32, d->frames, 3, f3, err)) ||
        (st = save_npy(dir, "frame_len", VTR_I32, d->frame_len, 1, s1, err)) ||
        (st = save_npy(dir, "ids", VTR_I32, d->ids, 2, w2, err)) ||
        (st = save_npy(dir, "cap_len", VTR_I32, d->cap_len, 1, s1, err)) ||
        (st = save_npy(dir, "verb_masks", VTR_I32, d->verb_masks, 3, v3, err)) ||
        (st = save_npy(dir, "noun_masks", VTR_I32, d->noun_masks, 3, n3, err)) ||
        (st = save_npy(dir, "node_roles", VTR_I32, d->roles, 2, r2, err)) ||
        (st = save_npy(dir, "rel_edges", VTR_F32, d->rel, 3, e3, err)))
        return st;
    if ((st = vtr_hgr_model_init(&m, &cfg, BATCH, FRAMES, MAX_WORDS, err)))
        return st;
    vtr_hgr_init_params(&m, SEED);
    snprintf(path, sizeof path, "%s/init.safetensors", dir);
    st = vtr_checkpoint_save(path, &m.params, NULL, NULL, err);
    vtr_hgr_model_free(&m);
    return st;
}

/* ---- run ---- */

/* The batch of step s: items 64 (s mod 2) .. +63, frames padded to T (zeros), ids to L. */
typedef struct step_batch {
    float *frames; /* (BATCH, FRAMES, FEAT) */
    int ids[BATCH * MAX_WORDS];
    uint8_t verb_masks[BATCH * NV * MAX_WORDS], noun_masks[BATCH * NN * MAX_WORDS];
    vtr_hgr_batch batch;
} step_batch;

static void make_batch(step_batch *sb, const bench_data *d, int s)
{
    int first = (s % 2) * BATCH, T = 0, L = 0;
    for (int i = 0; i < BATCH; i++) {
        T = d->frame_len[first + i] > T ? d->frame_len[first + i] : T;
        L = d->cap_len[first + i] > L ? d->cap_len[first + i] : L;
    }
    for (int i = 0; i < BATCH; i++) {
        int b = first + i;
        float *dst = sb->frames + (size_t)i * T * FEAT;
        memcpy(dst, d->frames + (size_t)b * FRAMES * FEAT,
               sizeof(float) * (size_t)d->frame_len[b] * FEAT);
        memset(dst + (size_t)d->frame_len[b] * FEAT, 0,
               sizeof(float) * (size_t)(T - d->frame_len[b]) * FEAT);
        for (int t = 0; t < L; t++) {
            sb->ids[i * L + t] = d->ids[b][t];
            for (int v = 0; v < NV; v++)
                sb->verb_masks[(i * NV + v) * L + t] = (uint8_t)d->verb_masks[b][v][t];
            for (int k = 0; k < NN; k++)
                sb->noun_masks[(i * NN + k) * L + t] = (uint8_t)d->noun_masks[b][k][t];
        }
    }
    sb->batch = (vtr_hgr_batch){.B = BATCH,
                                .T = T,
                                .frames = sb->frames,
                                .frame_lengths = d->frame_len + first,
                                .captions = {.B = BATCH,
                                             .L = L,
                                             .ids = sb->ids,
                                             .lengths = d->cap_len + first,
                                             .verb_masks = sb->verb_masks,
                                             .noun_masks = sb->noun_masks,
                                             .node_roles = &d->roles[first][0],
                                             .rel_edges = &d->rel[first][0][0]}};
}

static vtr_status run(int warmup, int nsteps, int dropout, const bench_data *d, vtr_error *err)
{
    vtr_status st;
    vtr_hgr_model m;
    vtr_optimizer opt;
    vtr_hgr_config cfg = vtr_hgr_config_default(VOCAB, VTR_HGR_POOL_ATTENTION);
    if (!dropout)
        cfg.video_dropout = cfg.text_dropout = cfg.gcn_dropout = 0.0f;
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAM);
    step_batch *sb = calloc(1, sizeof *sb);
    float *frames = malloc(sizeof(float) * BATCH * FRAMES * FEAT);
    double *times = malloc(sizeof(double) * (size_t)(warmup + nsteps));
    float *losses = malloc(sizeof(float) * (size_t)(warmup + nsteps));
    memset(&m, 0, sizeof m);
    memset(&opt, 0, sizeof opt);
    if (!frames || !sb || !times || !losses) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    sb->frames = frames;
    double peak = sgemm_peak(2048);
    if ((st = vtr_hgr_model_init(&m, &cfg, BATCH, FRAMES, MAX_WORDS, err)))
        goto end;
    vtr_hgr_init_params(&m, SEED);
    if ((st = vtr_optimizer_init(&opt, &m.params, &hp, err)))
        goto end;

    double flops = 0.0, timed = 0.0;
    for (int s = 0; s < warmup + nsteps; s++) {
        make_batch(sb, d, s);
        double t0 = now();
        vtr_param_set_zero_grad(&m.params);
        if ((st = vtr_hgr_train_step(&m, &sb->batch, VTR_HINGE_HARDEST_NEGATIVE, SEED, (uint64_t)s,
                                     &losses[s], err)))
            goto end;
        vtr_optimizer_step(&opt, &m.params, LR);
        times[s] = now() - t0;
        if (s >= warmup) {
            flops += vtr_hgr_train_step_flops(&m, &sb->batch);
            timed += times[s];
        }
    }
    print_run(dropout ? "\"model\": \"hgr\", \"dropout\": true, "
                      : "\"model\": \"hgr\", \"dropout\": false, ",
              warmup, nsteps, times, losses, flops, timed, peak);
end:
    vtr_optimizer_free(&opt);
    vtr_hgr_model_free(&m);
    free(frames), free(sb), free(times), free(losses);
    return st;
}

int main(int argc, char **argv)
{
    int warmup = 2, nsteps = 10, dropout = 1;
    const char *dir;
    if (parse_args(argc, argv,
                   "usage: train_step_hgr prepare DIR\n"
                   "       train_step_hgr run [--warmup W] [--steps N] [--dropout-off]\n",
                   &dir, &warmup, &nsteps, &dropout, NULL, NULL))
        return 2;
    vtr_error err;
    vtr_status st;
    bench_data *d = calloc(1, sizeof *d);
    float *frames = malloc(sizeof(float) * ITEMS * FRAMES * FEAT);
    if (!d || !frames) {
        fprintf(stderr, "train_step_hgr: out of memory\n");
        free(d), free(frames);
        return 1;
    }
    d->frames = frames;
    make_data(d);
    st = dir ? prepare(dir, d, &err) : run(warmup, nsteps, dropout, d, &err);
    free(frames), free(d);
    if (st) {
        fprintf(stderr, "train_step_hgr: %s\n", err.msg);
        return 1;
    }
    return 0;
}
