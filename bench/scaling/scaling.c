/* bench/scaling: what data-parallel VSE∞ training costs per step on this machine, under
 * mpirun (or alone as 1 rank); the driver is bench/scaling/run.sh, the table
 * bench/scaling/report.py, the extrapolation docs/scaling.md.
 *
 *   scaling [--config msrvtt|coco] [--small] [--batch B] [--warmup W] [--steps N] [--reps R]
 *
 * Every rank builds the same global batch of every step (random features and captions
 * from a fixed seed) and trains its share of it as vtr-train does (match/trainer.c,
 * match/run_model.c): vtr_vse_batch_share, zero the gradients, vtr_vse_train_step (which
 * gathers the embeddings of every rank and syncs BatchNorm), vtr_dist_agree, vtr_dist_sum
 * of the n_trainable gradient floats, clipping at 2.0 and AdamW. Timed per step and rank:
 * the whole step, its forward and backward (vtr_vse_train_step: the slowest and the
 * fastest rank's, the load imbalance), and its agree + gradient sum (which includes the
 * wait for the slowest rank); each step starts after a barrier. Then, alone, R times after
 * 2 warm-up rounds, each after a barrier: the gradient sum (vtr_dist_sum of n_trainable
 * floats), the embedding gather of both sides (vtr_dist_gather of B x E floats each, every
 * rank its share) and the sum of one float (the collectives' latency). A step's or a
 * round's time is the slowest rank's. Rank 0 prints one JSON line with every timed step's and round's
 * seconds (bench/scaling/report.py takes the medians).
 *
 * Configs (REFERENCE.md; configs/msrvtt-vse-inf.yaml, configs/coco-vse-inf.yaml): msrvtt:
 * batch 128, at most 20 frames of 2048 features, fc 2048 -> 1024 without MLP; coco: batch
 * 128, 36 regions of 2048 features, fc + MLP (512, BatchNorm: SyncBatchNorm over the
 * ranks). Both: BiGRU 300 -> 1024, GPO (32, 32) on both sides, vocabulary 10,000, the
 * max-violation hinge loss; per item the frames kept by GPO's size augmentation (p 0.2),
 * per caption 8..16 tokens (with <start> and <end>), the pairs in random order as
 * vtr_batcher_pairs leaves them (not sorted by length: each rank's share is a random
 * sample of the batch).
 * --small: batch 16, 8 frames of 128 features, E 64, W 32, vocabulary 500, for a quick
 * check of the program. --batch B: another global batch size (2 .. 1024), e.g. one rank's
 * share alone, to see how a rank's time follows its share.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/gpo.h"
#include "bench/timing.h"
#include "lib/dist.h"
#include "lib/optim.h"
#include "lib/rng.h"
#include "match/vse_model.h"

#define SEED 20240601u
#define LR 1e-4
#define CLIP 2.0
#define MIN_WORDS 8 /* caption tokens, <start> and <end> included */
#define MAX_WORDS 16
#define COMM_WARMUP 2

/* The benchmarked sizes. */
typedef struct scaling_sizes {
    const char *name;
    int B, frames, vocab; /* global batch, frames per item before augmentation */
    vtr_vse_config cfg;
} scaling_sizes;

/* The sizes of config "msrvtt" or "coco" (small: the quick ones); -1 for another name. */
static int sizes_of(scaling_sizes *z, const char *config, bool small)
{
    bool coco = strcmp(config, "coco") == 0;
    if (!coco && strcmp(config, "msrvtt") != 0)
        return -1;
    z->name = config;
    z->B = small ? 16 : 128;
    z->vocab = small ? 500 : 10000;
    z->frames = small ? 8 : coco ? 36 : 20;
    z->cfg = vtr_vse_config_infinity(z->vocab);
    if (small) {
        z->cfg.feature_dim = 128;
        z->cfg.embed_size = 64;
        z->cfg.word_dim = 32;
        z->cfg.mlp_hidden = 32;
    }
    if (!coco)
        z->cfg.mlp_hidden = 0; /* frame features: fc alone */
    return 0;
}

/* One global batch: frames (B, T, F) zero-padded, ids (B, L). */
typedef struct global_batch {
    float *frames;
    int *frame_lengths, *ids, *caption_lengths;
    int T, L;
} global_batch;

/* Step s's global batch, the same on every rank. */
static void make_batch(global_batch *g, const scaling_sizes *z, int s)
{
    int B = z->B, F = z->cfg.feature_dim;
    int keep[64];
    vtr_rng rng;
    vtr_rng_init(&rng, SEED, 1 + (uint64_t)s);
    g->T = g->L = 1;
    for (int b = 0; b < B; b++) {
        uint64_t stream = 1000 + ((uint64_t)s * (uint64_t)B + (uint64_t)b);
        g->frame_lengths[b] = vtr_gpo_augment_set(keep, z->frames, VTR_GPO_AUGMENT_P, SEED, stream);
        g->caption_lengths[b] = MIN_WORDS + (int)vtr_rng_below(&rng, MAX_WORDS - MIN_WORDS + 1);
        g->T = g->frame_lengths[b] > g->T ? g->frame_lengths[b] : g->T;
        g->L = g->caption_lengths[b] > g->L ? g->caption_lengths[b] : g->L;
    }
    for (int b = 0; b < B; b++) {
        float *f = g->frames + (size_t)b * g->T * F;
        size_t real = (size_t)g->frame_lengths[b] * F;
        for (size_t i = 0; i < real; i++)
            f[i] = vtr_rng_uniform(&rng);
        memset(f + real, 0, sizeof(float) * ((size_t)g->T * F - real));
        int *w = g->ids + (size_t)b * g->L, n = g->caption_lengths[b];
        w[0] = 1; /* <start> */
        for (int t = 1; t < n - 1; t++)
            w[t] = 4 + (int)vtr_rng_below(&rng, (uint64_t)z->vocab - 5);
        w[n - 1] = 2; /* <end> */
        for (int t = n; t < g->L; t++)
            w[t] = 0;
    }
}

/* Per round r of n, t[r] on every rank -> the slowest rank's, in t, and where fastest is
 * not NULL the fastest rank's, in fastest (all: room for size * n). */
static vtr_status slowest(vtr_dist *d, double *t, int n, double *fastest, double *all,
                          vtr_error *err)
{
    vtr_status st = vtr_dist_gather(d, t, sizeof(double) * (size_t)n, all, err);
    for (int r = 0; r < n && st == VTR_OK; r++) {
        double most = all[r], least = all[r];
        for (int k = 1; k < d->size; k++) {
            double x = all[(size_t)k * n + r];
            most = x > most ? x : most;
            least = x < least ? x : least;
        }
        t[r] = most;
        if (fastest)
            fastest[r] = least;
    }
    return st;
}

/* Every rank arrives before any leaves. */
static vtr_status barrier(vtr_dist *d, vtr_error *err)
{
    bool flag = false;
    return vtr_dist_any(d, &flag, err);
}

/* The timed rounds of the run: steps, and the collectives alone. */
typedef struct timings {
    double *step, *sum_in_step;        /* (steps) */
    double *compute, *compute_fastest; /* (steps): vtr_vse_train_step's */
    double *sum, *gather, *tiny; /* (reps) */
    float loss_first, loss_last;
    double gflop; /* matrix-product GFLOP of one global step (vtr_vse_train_step_flops) */
} timings;

static vtr_status time_steps(vtr_dist *d, vtr_vse_model *m, const scaling_sizes *z, int warmup,
                             int nsteps, timings *tm, vtr_error *err)
{
    vtr_status st;
    vtr_optimizer opt;
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    hp.weight_decay = 0.01;
    global_batch g;
    size_t F = (size_t)z->cfg.feature_dim, B = (size_t)z->B;
    memset(&opt, 0, sizeof opt);
    g.frames = malloc(sizeof(float) * B * (size_t)z->frames * F);
    g.frame_lengths = malloc(sizeof(int) * B * 2);
    g.ids = malloc(sizeof(int) * B * MAX_WORDS);
    if (!g.frames || !g.frame_lengths || !g.ids) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    g.caption_lengths = g.frame_lengths + B;
    if ((st = vtr_optimizer_init(&opt, &m->params, &hp, err)))
        goto end;
    for (int s = 0; s < warmup + nsteps && st == VTR_OK; s++) {
        make_batch(&g, z, s);
        vtr_vse_batch global = {.B = z->B,
                                .T = g.T,
                                .frames = g.frames,
                                .frame_lengths = g.frame_lengths,
                                .L = g.L,
                                .ids = g.ids,
                                .caption_lengths = g.caption_lengths,
                                .seed = SEED,
                                .step = s};
        vtr_vse_batch batch = d->size > 1 ? vtr_vse_batch_share(m, &global, d) : global;
        float loss = 0.0f;
        if ((st = barrier(d, err)))
            break;
        double t0 = now();
        vtr_param_set_zero_grad(&m->params);
        st = vtr_vse_train_step(m, &batch, VTR_HINGE_HARDEST_NEGATIVE, &loss, err);
        double t1 = now();
        if ((st = vtr_dist_agree(d, st, err)) ||
            (st = vtr_dist_sum(d, m->params.grad, m->params.n_trainable, err)))
            break;
        double t2 = now();
        vtr_clip_grad_norm(&m->params, CLIP);
        vtr_optimizer_step(&opt, &m->params, LR);
        double t3 = now();
        if (s == 0)
            tm->gflop = vtr_vse_train_step_flops(m, &global) / 1e9;
        if (s >= warmup) {
            tm->step[s - warmup] = t3 - t0;
            tm->sum_in_step[s - warmup] = t2 - t1;
            tm->compute[s - warmup] = t1 - t0;
            tm->loss_last = loss;
            if (s == warmup)
                tm->loss_first = loss;
        }
    }
end:
    vtr_optimizer_free(&opt);
    free(g.frames), free(g.frame_lengths), free(g.ids);
    return st;
}

/* The collectives of a step alone: the gradient sum, the gather of both sides' embeddings
 * (this rank's rows into the global B x E), one float's sum. */
static vtr_status time_comm(vtr_dist *d, vtr_vse_model *m, const scaling_sizes *z, int reps,
                            timings *tm, vtr_error *err)
{
    vtr_status st = VTR_OK;
    size_t E = (size_t)z->cfg.embed_size;
    int64_t first, count;
    vtr_dist_share(z->B, d->rank, d->size, &first, &count);
    float *emb = calloc((size_t)z->B * E * 2, sizeof(float)), one = 1.0f;
    if (!emb)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    for (int r = 0; r < COMM_WARMUP + reps && st == VTR_OK; r++) {
        int k = r - COMM_WARMUP;
        double t0, t1, t2, t3;
        if ((st = barrier(d, err)))
            break;
        t0 = now();
        if ((st = vtr_dist_sum(d, m->params.grad, m->params.n_trainable, err)) ||
            (st = barrier(d, err)))
            break;
        t1 = now();
        for (int side = 0; side < 2 && st == VTR_OK; side++) {
            float *all = emb + side * (size_t)z->B * E;
            st = vtr_dist_gather(d, all + (size_t)first * E, sizeof(float) * (size_t)count * E,
                                 all, err);
        }
        if (st || (st = barrier(d, err)))
            break;
        t2 = now();
        if ((st = vtr_dist_sum(d, &one, 1, err)))
            break;
        t3 = now();
        if (k >= 0) {
            tm->sum[k] = t1 - t0;
            tm->gather[k] = t2 - t1;
            tm->tiny[k] = t3 - t2;
        }
    }
    free(emb);
    return st;
}

/* , "key": [v_0, ..., v_n-1] (seconds). */
static void print_times(const char *key, const double *v, int n)
{
    printf(", \"%s\": [", key);
    for (int i = 0; i < n; i++)
        printf("%s%.7f", i ? ", " : "", v[i]);
    printf("]");
}

static void print_run(const vtr_dist *d, const vtr_vse_model *m, const scaling_sizes *z,
                      int warmup, int nsteps, int reps, timings *tm)
{
    size_t bytes = sizeof(float) * m->params.n_trainable;
    printf("{\"config\": \"%s\", \"ranks\": %d, \"threads_per_rank\": %d, "
           "\"openblas_threads\": %d, \"openblas_core\": \"%s\", \"B\": %d, \"frames\": %d, "
           "\"F\": %d, \"E\": %d, \"mlp_hidden\": %d, \"vocab\": %d, \"n_trainable\": %zu, "
           "\"param_bytes\": %zu, \"gather_bytes\": %zu, \"warmup\": %d, \"steps\": %d, "
           "\"reps\": %d, \"gflop_per_step\": %.3f, \"loss_first\": %.7g, \"loss_last\": %.7g",
           z->name, d->size, omp_get_max_threads(), openblas_get_num_threads(),
           openblas_get_corename(), z->B, z->frames, z->cfg.feature_dim, z->cfg.embed_size,
           z->cfg.mlp_hidden, z->vocab, m->params.n_trainable, bytes,
           sizeof(float) * 2 * (size_t)z->B * (size_t)z->cfg.embed_size, warmup, nsteps, reps,
           tm->gflop, (double)tm->loss_first, (double)tm->loss_last);
    print_times("step_s", tm->step, nsteps);
    print_times("compute_s", tm->compute, nsteps);
    print_times("compute_fastest_s", tm->compute_fastest, nsteps);
    print_times("sum_in_step_s", tm->sum_in_step, nsteps);
    print_times("sum_s", tm->sum, reps);
    print_times("gather_s", tm->gather, reps);
    print_times("tiny_sum_s", tm->tiny, reps);
    printf("}\n");
}

int main(int argc, char **argv)
{
    const char *usage = "usage: scaling [--config msrvtt|coco] [--small] [--batch B] "
                        "[--warmup W] [--steps N] [--reps R]\n";
    vtr_dist d;
    vtr_error err;
    vtr_status st;
    memset(&d, 0, sizeof d);
    if ((st = vtr_dist_init(&d, &argc, &argv, &err))) {
        fprintf(stderr, "scaling: %s\n", err.msg);
        return 1;
    }
    const char *config = "msrvtt";
    bool small = false;
    int warmup = 2, nsteps = 5, reps = 10, batch = 0, i;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config = argv[++i];
        else if (strcmp(argv[i], "--small") == 0)
            small = true;
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            nsteps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else
            break;
    }
    scaling_sizes z;
    if (i != argc || warmup < 0 || nsteps < 1 || reps < 1 || sizes_of(&z, config, small) != 0 ||
        (batch != 0 && (batch < 2 || batch > 1024))) {
        if (d.rank == 0)
            fputs(usage, stderr);
        vtr_dist_finalize(&d);
        return 2;
    }
    if (batch)
        z.B = batch;
    vtr_vse_model m;
    timings tm;
    memset(&m, 0, sizeof m);
    memset(&tm, 0, sizeof tm);
    int most = nsteps > reps ? nsteps : reps;
    double *buf = malloc(sizeof(double) * (size_t)(4 * nsteps + 3 * reps));
    double *all = malloc(sizeof(double) * (size_t)most * (size_t)d.size);
    st = buf && all ? VTR_OK : vtr_fail(&err, VTR_ERR_NOMEM, "out of memory");
    if (st == VTR_OK) {
        tm.step = buf, tm.sum_in_step = buf + nsteps;
        tm.compute = buf + 2 * nsteps, tm.compute_fastest = buf + 3 * nsteps;
        tm.sum = buf + 4 * nsteps, tm.gather = tm.sum + reps, tm.tiny = tm.gather + reps;
        st = vtr_vse_model_init(&m, &z.cfg, z.B, z.frames, MAX_WORDS, &err);
    }
    if (st == VTR_OK) {
        vtr_vse_init_params(&m, SEED);
        st = time_steps(&d, &m, &z, warmup, nsteps, &tm, &err);
    }
    st = vtr_dist_agree(&d, st, &err);
    if (st == VTR_OK)
        st = time_comm(&d, &m, &z, reps, &tm, &err);
    st = vtr_dist_agree(&d, st, &err);
    if (st == VTR_OK)
        st = slowest(&d, tm.step, nsteps, NULL, all, &err);
    if (st == VTR_OK)
        st = slowest(&d, tm.compute, nsteps, tm.compute_fastest, all, &err);
    if (st == VTR_OK)
        st = slowest(&d, tm.sum_in_step, nsteps, NULL, all, &err);
    if (st == VTR_OK)
        st = slowest(&d, tm.sum, reps, NULL, all, &err);
    if (st == VTR_OK)
        st = slowest(&d, tm.gather, reps, NULL, all, &err);
    if (st == VTR_OK)
        st = slowest(&d, tm.tiny, reps, NULL, all, &err);
    if (st == VTR_OK && d.rank == 0)
        print_run(&d, &m, &z, warmup, nsteps, reps, &tm);
    if (st && d.rank == 0)
        fprintf(stderr, "scaling: %s\n", err.msg);
    vtr_vse_model_free(&m);
    free(buf), free(all);
    vtr_dist_finalize(&d);
    return st ? 1 : 0;
}
