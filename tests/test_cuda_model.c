/* The VSE model on the GPU (match/vse_model.h, VTR_DEVICE_CUDA) against the same model on
 * the CPU: one training step's loss (mean, GPO or ADPOOL; hinge or ADOPT, with ADOPT's K),
 * similarities and every parameter gradient, the evaluation embeddings, a few hundred
 * steps of training with AdamW and clipping on both devices (match/model_ops.h's clipping
 * and AdamW step), two GPU runs giving the same bytes, a step in tf32 and in bfloat16
 * against float32, and a set-embedding step; and HGR and HGR∞ (match/hgr_model.h): a step,
 * the encoders and a score block against the CPU, two GPU runs giving the same bytes.
 * Skipped where no GPU is present, or without CUDA; the refusals that need no GPU are
 * tested in test_vse_model.c and test_hgr_model.c. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lib/device.h"
#include "lib/rng.h"
#include "match/hgr_model.h"
#include "match/model_ops.h"
#include "match/retrieval_metrics.h"
#include "match/vse_model.h"

#define TOL_STEP 1e-4  /* one step: products and sums in another order (nn_cuda.h) */
#define TOL_TRAIN 2e-2 /* mean loss of the last steps of a run, CPU against GPU */
#define TOL_TF32 2e-2  /* one step in tf32 against float32 (10-bit mantissa operands) */
#define TOL_BF16 8e-2  /* one step in bfloat16 against float32 (7-bit mantissa operands) */

enum { B = 6, T = 5, L = 7, F = 24, E = 16, V = 30, W = 8 };

static vtr_vse_config config(int mlp_hidden, vtr_vse_pooler pool)
{
    vtr_vse_config cfg = vtr_vse_config_infinity(V);
    cfg.feature_dim = F;
    cfg.embed_size = E;
    cfg.mlp_hidden = mlp_hidden;
    cfg.word_dim = W;
    cfg.img_pool.kind = cfg.txt_pool.kind = pool;
    return cfg;
}

/* Ragged pairs drawn from seed: the same caption words follow the same frame features, so
 * a model can learn to match them. */
typedef struct pairs {
    float frames[B * T * F];
    int frame_lengths[B], ids[B * L], caption_lengths[B];
    vtr_vse_batch batch;
} pairs;

static void make_pairs(pairs *p, uint64_t seed)
{
    vtr_rng rng;
    vtr_rng_init(&rng, seed, 5);
    memset(p, 0, sizeof *p);
    for (int b = 0; b < B; b++) {
        int topic = (int)vtr_rng_below(&rng, V - 1);
        p->frame_lengths[b] = 1 + (int)vtr_rng_below(&rng, T);
        p->caption_lengths[b] = 1 + (int)vtr_rng_below(&rng, L);
        for (int t = 0; t < p->frame_lengths[b]; t++)
            for (int d = 0; d < F; d++)
                p->frames[(b * T + t) * F + d] =
                    0.3f * vtr_rng_normal(&rng) + (d % (V - 1) == topic ? 2.0f : 0.0f);
        for (int t = 0; t < p->caption_lengths[b]; t++)
            p->ids[b * L + t] = t % 2 ? 1 + topic : 1 + (int)vtr_rng_below(&rng, V - 1);
    }
    p->batch = (vtr_vse_batch){.B = B,
                               .T = T,
                               .frames = p->frames,
                               .frame_lengths = p->frame_lengths,
                               .L = L,
                               .ids = p->ids,
                               .caption_lengths = p->caption_lengths};
}

/* a model of cfg on the GPU, its parameters from seed 3, gradients zero */
static void gpu_model(vtr_vse_model *gpu, const vtr_vse_config *cfg)
{
    vtr_error err;
    CHECK_OK(vtr_vse_model_init_on(gpu, cfg, VTR_DEVICE_CUDA, B, T, L, &err));
    vtr_vse_init_params(gpu, 3);
    CHECK_OK(vtr_vse_params_to_device(gpu, &err));
    CHECK_OK(vtr_vse_zero_grad(gpu, &err));
}

/* cpu and gpu models of cfg with the same initial parameters */
static void make_models(vtr_vse_model *cpu, vtr_vse_model *gpu, const vtr_vse_config *cfg)
{
    vtr_error err;
    CHECK_OK(vtr_vse_model_init(cpu, cfg, B, T, L, &err));
    vtr_vse_init_params(cpu, 3);
    gpu_model(gpu, cfg);
}

static void expect_close(const char *what, const float *gpu, const float *cpu, size_t n, double tol)
{
    double rel = test_rel_error(gpu, cpu, n);
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    %-34s %7zu values, relative error %.2e\n", what, n, rel);
    CHECK_MSG(rel <= tol, "%s: relative error %.3g > %.1g", what, rel, tol);
}

/* A gradient entry's largest difference from the reference ref, relative to the larger of
 * ref's largest value and 1/100 of the model's largest gradient (scale). The biases that a
 * normalization or a softmax cancels (a linear layer's before BatchNorm, slot attention's
 * query LayerNorm's, an attention score's, a graph attention key's) have gradient zero:
 * rounding noise on each device (1e-10 .. 1e-7), which no two summation orders give alike. */
static double grad_rel_error(const float *a, const float *ref, size_t n, double scale)
{
    double diff = 0.0, own = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - ref[i]);
        diff = isnan(d) ? INFINITY : fmax(diff, d);
        own = fmax(own, fabs(ref[i]));
    }
    return diff / fmax(own, 1e-2 * scale);
}

static void expect_close_grad(const char *what, const float *gpu, const float *cpu, size_t n,
                              double scale, double tol)
{
    double rel = grad_rel_error(gpu, cpu, n, scale);
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    %-34s %7zu values, relative error %.2e\n", what, n, rel);
    CHECK_MSG(rel <= tol, "%s: relative error %.3g > %.1g", what, rel, tol);
}

/* the largest |gradient| of ps */
static double grad_scale(const vtr_param_set *ps)
{
    double scale = 0.0;
    for (size_t i = 0; i < ps->n_trainable; i++)
        scale = fmax(scale, fabs(ps->grad[i]));
    return scale;
}

/* Every entry's gradient (and the values: BatchNorm's running statistics move). */
static void expect_same_params(const vtr_vse_model *cpu, vtr_vse_model *gpu, double tol)
{
    vtr_error err;
    CHECK_OK(vtr_vse_params_to_host(gpu, true, &err));
    const vtr_param_set *a = &gpu->params, *b = &cpu->params;
    for (size_t i = 0; i < b->count; i++) {
        const vtr_param_entry *e = &b->entries[i];
        if (e->dtype != VTR_F32)
            continue;
        char what[128];
        snprintf(what, sizeof what, "value %s", e->name);
        expect_close(what, a->data + e->offset, b->data + e->offset, e->numel, tol);
        if (!e->trainable)
            continue;
        snprintf(what, sizeof what, "gradient %s", e->name);
        expect_close_grad(what, a->grad + e->offset, b->grad + e->offset, e->numel, grad_scale(b),
                          tol);
    }
}

TEST(cuda_vse_step_matches_cpu)
{
    test_need_cuda();
    struct {
        int mlp_hidden;
        vtr_vse_pooler pool;
        vtr_vse_loss loss;
    } cases[] = {{0, VTR_VSE_POOL_GPO, VTR_VSE_LOSS_HINGE},
                 {0, VTR_VSE_POOL_MEAN, VTR_VSE_LOSS_HINGE},
                 {8, VTR_VSE_POOL_GPO, VTR_VSE_LOSS_HINGE},
                 {0, VTR_VSE_POOL_GPO, VTR_VSE_LOSS_ADOPT},
                 {0, VTR_VSE_POOL_ADPOOL, VTR_VSE_LOSS_ADOPT}}; /* VSE+2AD */
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        vtr_vse_config cfg = config(cases[c].mlp_hidden, cases[c].pool);
        cfg.loss = cases[c].loss;
        for (int hardest = 0; hardest < 2; hardest++) {
            vtr_error err;
            vtr_vse_model cpu, gpu;
            make_models(&cpu, &gpu, &cfg);
            pairs p;
            make_pairs(&p, 10 + c);
            vtr_hinge_negatives neg =
                hardest ? VTR_HINGE_HARDEST_NEGATIVE : VTR_HINGE_ALL_NEGATIVES;
            float loss_cpu, loss_gpu;
            CHECK_OK(vtr_vse_train_step(&cpu, &p.batch, neg, &loss_cpu, &err));
            CHECK_OK(vtr_vse_train_step(&gpu, &p.batch, neg, &loss_gpu, &err));
            CHECK(loss_cpu > 0.0f);
            expect_close("loss", &loss_gpu, &loss_cpu, 1, TOL_STEP);
            CHECK_EQ_INT(gpu.negatives, cpu.negatives); /* ADOPT's K too */
            expect_same_params(&cpu, &gpu, TOL_STEP);

            float out_cpu[B * E], out_gpu[B * E];
            CHECK_OK(
                vtr_vse_encode_images(&cpu, out_cpu, p.frames, p.frame_lengths, B, T, false, &err));
            CHECK_OK(
                vtr_vse_encode_images(&gpu, out_gpu, p.frames, p.frame_lengths, B, T, false, &err));
            expect_close("image embeddings", out_gpu, out_cpu, B * E, TOL_STEP);
            CHECK_OK(vtr_vse_encode_captions(&cpu, out_cpu, p.ids, p.caption_lengths, B, L, &err));
            CHECK_OK(vtr_vse_encode_captions(&gpu, out_gpu, p.ids, p.caption_lengths, B, L, &err));
            expect_close("caption embeddings", out_gpu, out_cpu, B * E, TOL_STEP);
            vtr_vse_model_free(&cpu);
            vtr_vse_model_free(&gpu);
        }
    }
}

/* Set embeddings (K 4, dropout on: both devices draw the same masks) on GPO-pooled video
 * and text: one step's loss and its three terms, every gradient, and the sets the encoders
 * give, GPU against CPU. */
TEST(cuda_vse_set_step_matches_cpu)
{
    test_need_cuda();
    vtr_error err;
    vtr_vse_config cfg = config(0, VTR_VSE_POOL_GPO);
    cfg.set = vtr_vse_set_config_default(E);
    cfg.set.Dh = 12;
    enum { K = 4 };
    vtr_vse_model cpu, gpu;
    make_models(&cpu, &gpu, &cfg);
    pairs p;
    make_pairs(&p, 31);
    p.batch.seed = 5, p.batch.step = 3;
    float loss_cpu, loss_gpu;
    CHECK_OK(vtr_vse_train_step(&cpu, &p.batch, VTR_HINGE_HARDEST_NEGATIVE, &loss_cpu, &err));
    CHECK_OK(vtr_vse_train_step(&gpu, &p.batch, VTR_HINGE_HARDEST_NEGATIVE, &loss_gpu, &err));
    CHECK(loss_cpu > 0.0f);
    expect_close("set loss", &loss_gpu, &loss_cpu, 1, TOL_STEP);
    expect_close("hinge, L_div, L_mmd", gpu.set_terms, cpu.set_terms, 3, TOL_STEP);
    expect_same_params(&cpu, &gpu, TOL_STEP);
    static float out_cpu[B * K * E], out_gpu[B * K * E];
    CHECK_OK(vtr_vse_encode_images(&cpu, out_cpu, p.frames, p.frame_lengths, B, T, false, &err));
    CHECK_OK(vtr_vse_encode_images(&gpu, out_gpu, p.frames, p.frame_lengths, B, T, false, &err));
    expect_close("image sets", out_gpu, out_cpu, B * K * E, TOL_STEP);
    CHECK_OK(vtr_vse_encode_captions(&cpu, out_cpu, p.ids, p.caption_lengths, B, L, &err));
    CHECK_OK(vtr_vse_encode_captions(&gpu, out_gpu, p.ids, p.caption_lengths, B, L, &err));
    expect_close("caption sets", out_gpu, out_cpu, B * K * E, TOL_STEP);
    vtr_vse_model_free(&cpu);
    vtr_vse_model_free(&gpu);
}

/* train.precision tf32 and bfloat16: one step's loss and gradients against float32's on
 * the same GPU, within TOL_TF32 and TOL_BF16; the measured differences are printed
 * (VTR_TEST_VERBOSE) as the bounds. */
TEST(cuda_vse_reduced_precision_steps_are_close_to_float32)
{
    test_need_cuda();
    static const struct {
        vtr_precision p;
        double tol;
    } cases[] = {{VTR_PRECISION_TF32, TOL_TF32}, {VTR_PRECISION_BF16, TOL_BF16}};
    vtr_vse_config cfg = config(8, VTR_VSE_POOL_GPO);
    pairs p;
    make_pairs(&p, 77);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const char *name = vtr_precision_name(cases[c].p);
        vtr_vse_model gpu32, low;
        vtr_error err;
        gpu_model(&gpu32, &cfg);
        gpu_model(&low, &cfg);
        float loss32, loss_low;
        CHECK_OK(vtr_vse_train_step(&gpu32, &p.batch, VTR_HINGE_ALL_NEGATIVES, &loss32, &err));
        CHECK_OK(vtr_cuda_set_precision(cases[c].p, &err));
        vtr_status st =
            vtr_vse_train_step(&low, &p.batch, VTR_HINGE_ALL_NEGATIVES, &loss_low, &err);
        CHECK_OK(vtr_cuda_set_precision(VTR_PRECISION_F32, &err));
        CHECK_OK(st);
        double loss_rel = fabs((double)loss_low - loss32) / fabs((double)loss32);
        CHECK_MSG(loss_rel <= cases[c].tol, "%s: loss: relative error %.3g", name, loss_rel);
        CHECK(loss_low != loss32); /* the products did change */
        CHECK_OK(vtr_vse_params_to_host(&gpu32, true, &err));
        CHECK_OK(vtr_vse_params_to_host(&low, true, &err));
        double worst = 0.0;
        for (size_t i = 0; i < gpu32.params.count; i++) {
            const vtr_param_entry *e = &gpu32.params.entries[i];
            if (!e->trainable)
                continue;
            double rel = grad_rel_error(low.params.grad + e->offset, gpu32.params.grad + e->offset,
                                        e->numel, grad_scale(&gpu32.params));
            worst = rel > worst ? rel : worst;
            CHECK_MSG(rel <= cases[c].tol, "%s: gradient %s: relative error %.3g", name, e->name,
                      rel);
        }
        if (getenv("VTR_TEST_VERBOSE"))
            printf("    %s against float32: loss %.2e, worst gradient %.2e (relative)\n", name,
                   loss_rel, worst);
        vtr_vse_model_free(&low);
        vtr_vse_model_free(&gpu32);
    }
}

/* steps of the VSE∞ recipe on fresh pairs per step (step i's from seed data + i; all
 * negatives first, then the hardest), AdamW at lr with clipping at 2 (vtr_dev_clip_and_step);
 * returns the mean loss of the last 20 steps and the first step's loss in *first. ahead: each
 * step's pairs are staged (vtr_vse_stage_batch) before the previous step, as the trainer
 * does. */
static float train_from(vtr_vse_model *m, uint64_t data, int steps, double lr, bool ahead,
                        float *first)
{
    vtr_error err;
    vtr_optimizer opt;
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    CHECK_OK(vtr_optimizer_init(&opt, &m->params, &hp, &err));
    size_t n = m->params.n_trainable;
    void *moments, *scratch;
    CHECK_OK(vtr_dev_alloc(m->device, &moments, sizeof(float) * 2 * n, "moments", false, &err));
    CHECK_OK(vtr_dev_alloc(m->device, &scratch, VTR_DEV_STEP_SCRATCH, "scratch", false, &err));
    double tail = 0.0;
    static pairs p[2]; /* step i's, and step i+1's staged beside it */
    make_pairs(&p[0], data);
    if (ahead)
        CHECK_OK(vtr_vse_stage_batch(m, 0, &p[0].batch, &err));
    for (int i = 0; i < steps; i++) {
        int k = (i + 1) % 2;
        if (i + 1 < steps) {
            make_pairs(&p[k], data + (uint64_t)i + 1);
            if (ahead)
                CHECK_OK(vtr_vse_stage_batch(m, k, &p[k].batch, &err));
        }
        float loss, norm;
        CHECK_OK(vtr_vse_zero_grad(m, &err));
        CHECK_OK(vtr_vse_train_step(
            m, &p[i % 2].batch,
            i < steps / 10 ? VTR_HINGE_ALL_NEGATIVES : VTR_HINGE_HARDEST_NEGATIVE, &loss, &err));
        CHECK(isfinite(loss));
        if (i == 0)
            *first = loss;
        if (i >= steps - 20)
            tail += loss / 20.0;
        CHECK_OK(vtr_dev_clip_and_step(m->device, &opt, &m->params, m->dev_data, m->dev_grad,
                                       moments, scratch, lr, 2.0, &norm, &err));
        CHECK(isfinite(norm));
    }
    vtr_optimizer_free(&opt);
    vtr_dev_free(m->device, moments);
    vtr_dev_free(m->device, scratch);
    return (float)tail;
}

static float train(vtr_vse_model *m, int steps, double lr, bool ahead, float *first)
{
    return train_from(m, 1000, steps, lr, ahead, first);
}

TEST(cuda_vse_training_follows_cpu)
{
    test_need_cuda();
    vtr_vse_config cfg = config(0, VTR_VSE_POOL_GPO);
    vtr_vse_model cpu, gpu;
    make_models(&cpu, &gpu, &cfg);
    float first_cpu, first_gpu;
    float tail_cpu = train(&cpu, 300, 2e-3, false, &first_cpu);
    float tail_gpu = train(&gpu, 300, 2e-3, true, &first_gpu);
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    300 steps: loss %.4f -> %.4f on the CPU, %.4f -> %.4f on the GPU\n", first_cpu,
               tail_cpu, first_gpu, tail_gpu);
    expect_close("first loss", &first_gpu, &first_cpu, 1, TOL_STEP);
    CHECK_MSG(tail_cpu < 0.5f * first_cpu, "the CPU run did not learn: %g -> %g", first_cpu,
              tail_cpu);
    expect_close("mean loss of the last 20 steps", &tail_gpu, &tail_cpu, 1, TOL_TRAIN);
    vtr_vse_model_free(&cpu);
    vtr_vse_model_free(&gpu);
}

/* How often the host has waited for the GPU so far (a synchronize or a blocking copy), where
 * the CUDA backend counts it (the emulation's emu_host_waits), else -1. */
static int64_t host_waits(void)
{
    const char *lib = getenv("VTR_CUDA_LIBRARY");
    void *handle = dlopen(lib && *lib ? lib : "libvtr-cuda.so", RTLD_NOW | RTLD_NOLOAD);
    void *sym = handle ? dlsym(handle, "emu_host_waits") : NULL;
    uint64_t (*count)(void) = NULL;
    memcpy(&count, &sym, sizeof count); /* POSIX: dlsym's functions convert */
    int64_t n = count ? (int64_t)count() : -1;
    if (handle)
        dlclose(handle);
    return n;
}

/* Checks that steps(ctx, n), n training steps of a model, makes the host wait for the GPU
 * `want` times a step: counted over 10 steps and over 20, the 10 more steps' waits (so that
 * what the first steps set up does not count). Skips where the backend does not count. */
static void expect_waits_per_step(const char *what, void (*steps)(void *ctx, int n), void *ctx,
                                  int want)
{
    if (host_waits() < 0)
        test_skip("this CUDA backend does not count the host's waits (the emulation does)");
    int64_t waits[2];
    for (int run = 0; run < 2; run++) {
        int64_t before = host_waits();
        steps(ctx, 10 * (run + 1));
        waits[run] = host_waits() - before;
    }
    double per_step = (double)(waits[1] - waits[0]) / 10;
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    %s: the host waits for the GPU %.1f times a step\n", what, per_step);
    CHECK_MSG(per_step == want, "%s: the host waits for the GPU %.1f times a step, not %d", what,
              per_step, want);
}

/* n steps of train() (batches staged ahead, clipping and AdamW) on a new GPU model of cfg */
static void vse_steps(void *cfg, int n)
{
    vtr_vse_model gpu;
    gpu_model(&gpu, cfg);
    float first;
    train(&gpu, n, 2e-3, true, &first);
    vtr_vse_model_free(&gpu);
}

/* No host synchronisation per op: a training step on the GPU (its batch staged ahead, the
 * step, clipping and AdamW) waits for the GPU three times, however many ops the model runs
 * (VSE∞ with its MLP, VSE+2AD with ADPOOL and ADOPT, set embeddings): before its batch is
 * written into a pinned staging slot (the slot's copy of two steps before has ended), and for
 * the loss and the gradients' norm that it returns. Counted where the backend counts (the
 * emulation). */
TEST(cuda_vse_step_waits_for_the_gpu_three_times)
{
    test_need_cuda();
    vtr_vse_config cfgs[3] = {config(8, VTR_VSE_POOL_GPO), config(0, VTR_VSE_POOL_ADPOOL),
                              config(0, VTR_VSE_POOL_GPO)};
    cfgs[1].loss = VTR_VSE_LOSS_ADOPT;
    cfgs[2].set = vtr_vse_set_config_default(E);
    cfgs[2].set.Dh = 12;
    static const char *const names[] = {"VSE∞ with an MLP", "VSE+2AD", "set embeddings"};
    for (int c = 0; c < 3; c++)
        expect_waits_per_step(names[c], vse_steps, &cfgs[c], 3);
}

enum { HELD_OUT = 16 * B }; /* pairs, ~3 per topic: retrieval does not saturate */

/* m's embeddings v (videos) and t (captions), (HELD_OUT, E) each, of HELD_OUT pairs drawn
 * from seed 90000 */
static void held_out_embeddings(vtr_vse_model *m, float *v, float *t)
{
    vtr_error err;
    for (int c = 0; c < HELD_OUT / B; c++) {
        pairs p;
        make_pairs(&p, 90000 + (uint64_t)c);
        CHECK_OK(vtr_vse_encode_images(m, v + (size_t)c * B * E, p.frames, p.frame_lengths, B, T,
                                       false, &err));
        CHECK_OK(vtr_vse_encode_captions(m, t + (size_t)c * B * E, p.ids, p.caption_lengths, B, L,
                                         &err));
    }
}

/* The retrieval RSUM (R@1 + R@5 + R@10 of video-to-text and text-to-video, in percent) of m
 * on the held-out pairs, by the evaluation's own counting (match/retrieval_metrics.h). */
static double held_out_rsum(vtr_vse_model *m)
{
    static float v[HELD_OUT * E], t[HELD_OUT * E];
    int cap_item[HELD_OUT];
    for (int j = 0; j < HELD_OUT; j++)
        cap_item[j] = j;
    held_out_embeddings(m, v, t);
    vtr_embedding_model model = {.items = v, .captions = t, .dim = E};
    vtr_retrieval_metrics r;
    vtr_error err;
    CHECK_OK(vtr_retrieval_evaluate_embeddings(&model, 1, HELD_OUT, HELD_OUT, cap_item, NULL, &r,
                                               NULL, &err));
    return r.rsum;
}

/* The smallest cosine between two sets of n unit rows of E, row by row. */
static double min_row_cosine(const float *a, const float *b, int n)
{
    double worst = 1.0;
    for (int i = 0; i < n; i++) {
        double dot = 0.0;
        for (int d = 0; d < E; d++)
            dot += (double)a[i * E + d] * b[i * E + d];
        worst = dot < worst ? dot : worst;
    }
    return worst;
}

/* train.precision tf32 and bfloat16: the held-out embeddings of a trained float32 model,
 * computed in each, within a cosine of COSINE_TF32 and COSINE_BF16 of float32's; and after
 * PRECISION_STEPS steps of training in each, the held-out RSUM no lower than float32's over
 * three seeds (initial parameters and pairs) by more than their spread (a higher one is no
 * loss: one run's RSUM is itself a draw from such a spread). The cosines and RSUMs are
 * printed (VTR_TEST_VERBOSE) as the measured bounds. */
#define COSINE_TF32 0.9999
#define COSINE_BF16 0.999
enum { PRECISION_STEPS = 200 };
TEST(cuda_vse_reduced_precision_training_within_seed_spread)
{
    test_need_cuda();
    vtr_vse_config cfg = config(0, VTR_VSE_POOL_GPO);
    vtr_error err;
    static const vtr_precision low[] = {VTR_PRECISION_TF32, VTR_PRECISION_BF16};
    static const double bound[] = {COSINE_TF32, COSINE_BF16};
    double lo = 1e9, hi = -1e9, f32[3], cosine[2];
    for (int seed = 0; seed < 3; seed++) {
        vtr_vse_model m;
        float first;
        CHECK_OK(vtr_vse_model_init_on(&m, &cfg, VTR_DEVICE_CUDA, B, T, L, &err));
        vtr_vse_init_params(&m, 3 + (uint64_t)seed);
        CHECK_OK(vtr_vse_params_to_device(&m, &err));
        CHECK_OK(vtr_vse_zero_grad(&m, &err));
        train_from(&m, 1000 + 1000 * (uint64_t)seed, PRECISION_STEPS, 2e-3, true, &first);
        f32[seed] = held_out_rsum(&m);
        if (seed == 0) { /* the same weights' embeddings in each precision */
            static float v32[HELD_OUT * E], t32[HELD_OUT * E], v[HELD_OUT * E], t[HELD_OUT * E];
            held_out_embeddings(&m, v32, t32);
            for (int c = 0; c < 2; c++) {
                CHECK_OK(vtr_cuda_set_precision(low[c], &err));
                held_out_embeddings(&m, v, t);
                CHECK_OK(vtr_cuda_set_precision(VTR_PRECISION_F32, &err));
                double cv = min_row_cosine(v, v32, HELD_OUT), ct = min_row_cosine(t, t32, HELD_OUT);
                cosine[c] = cv < ct ? cv : ct;
                CHECK_MSG(cosine[c] >= bound[c],
                          "%s: embeddings within a cosine of %.7f of float32's",
                          vtr_precision_name(low[c]), cosine[c]);
            }
        }
        lo = f32[seed] < lo ? f32[seed] : lo;
        hi = f32[seed] > hi ? f32[seed] : hi;
        vtr_vse_model_free(&m);
    }
    CHECK_MSG(lo > 100.0, "float32 did not learn: held-out RSUM %.1f (chance ~ 19)", lo);
    double spread = hi - lo;
    double rsum[2];
    for (int c = 0; c < 2; c++) {
        vtr_vse_model m;
        float first;
        gpu_model(&m, &cfg); /* seed 0's start */
        CHECK_OK(vtr_cuda_set_precision(low[c], &err));
        train_from(&m, 1000, PRECISION_STEPS, 2e-3, true, &first);
        CHECK_OK(vtr_cuda_set_precision(VTR_PRECISION_F32, &err));
        rsum[c] = held_out_rsum(&m);
        CHECK_MSG(rsum[c] >= lo - spread,
                  "%s: held-out RSUM %.1f, float32's %.1f .. %.1f over three seeds",
                  vtr_precision_name(low[c]), rsum[c], lo, hi);
        vtr_vse_model_free(&m);
    }
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    embeddings of float32's weights against float32's: cosine >= %.7f (tf32), "
               "%.7f (bfloat16); held-out RSUM after %d steps: float32 %.1f, %.1f, %.1f "
               "(three seeds), tf32 %.1f, bfloat16 %.1f (seed 0's start)\n",
               cosine[0], cosine[1], PRECISION_STEPS, f32[0], f32[1], f32[2], rsum[0], rsum[1]);
}

/* Two GPU runs give the same bytes, whether their batches were staged ahead or not. */
TEST(cuda_vse_two_runs_give_the_same_bytes)
{
    test_need_cuda();
    vtr_vse_config cfg = config(8, VTR_VSE_POOL_GPO);
    vtr_vse_model a, b;
    vtr_error err;
    gpu_model(&a, &cfg);
    gpu_model(&b, &cfg);
    float first;
    train(&a, 30, 2e-3, false, &first);
    train(&b, 30, 2e-3, true, &first);
    CHECK_OK(vtr_vse_params_to_host(&a, true, &err));
    CHECK_OK(vtr_vse_params_to_host(&b, true, &err));
    CHECK(memcmp(a.params.data, b.params.data, sizeof(float) * a.params.n_data) == 0);
    CHECK(memcmp(a.params.grad, b.params.grad, sizeof(float) * a.params.n_trainable) == 0);
    vtr_vse_model_free(&a);
    vtr_vse_model_free(&b);
}

/* ---- HGR and HGR∞ (match/hgr_model.h) ------------------------------------------------ */

enum { HB = 5, HT = 6, HL = 7, HF = 20, HE = 16, HV = 25, HW = 8 };
enum { HNV = VTR_HGR_NUM_VERBS, HNN = VTR_HGR_NUM_NOUNS, HN = 1 + HNV + HNN };

/* Ragged pairs with role graphs drawn from seed: some captions without verbs or nouns,
 * spans inside the caption, edges from the root to the verbs and from verbs to nouns. */
typedef struct hgr_pairs {
    float frames[HB * HT * HF], rel_edges[HB * HN * HN];
    int frame_lengths[HB], ids[HB * HL], lengths[HB], node_roles[HB * (HNV + HNN)];
    uint8_t verb_masks[HB * HNV * HL], noun_masks[HB * HNN * HL];
    vtr_hgr_batch batch;
} hgr_pairs;

static void make_hgr_pairs(hgr_pairs *p, uint64_t seed)
{
    vtr_rng rng;
    vtr_rng_init(&rng, seed, 9);
    memset(p, 0, sizeof *p);
    for (int b = 0; b < HB; b++) {
        p->frame_lengths[b] = 1 + (int)vtr_rng_below(&rng, HT);
        int len = p->lengths[b] = 1 + (int)vtr_rng_below(&rng, HL);
        for (int t = 0; t < p->frame_lengths[b] * HF; t++)
            p->frames[b * HT * HF + t] = vtr_rng_normal(&rng);
        for (int t = 0; t < len; t++)
            p->ids[b * HL + t] = 1 + (int)vtr_rng_below(&rng, HV - 1);
        int nv = (int)vtr_rng_below(&rng, HNV + 1), nn = (int)vtr_rng_below(&rng, HNN + 1);
        float *rel = p->rel_edges + b * HN * HN;
        for (int q = 0; q < HNV + HNN; q++) {
            bool verb = q < HNV;
            if ((verb && q >= nv) || (!verb && q - HNV >= nn))
                continue;
            int from = (int)vtr_rng_below(&rng, len), to = from + (int)vtr_rng_below(&rng, 3);
            uint8_t *mask = verb ? p->verb_masks + (b * HNV + q) * HL
                                 : p->noun_masks + (b * HNN + q - HNV) * HL;
            for (int t = from; t <= to && t < len; t++)
                mask[t] = 1;
            p->node_roles[b * (HNV + HNN) + q] = (int)vtr_rng_below(&rng, VTR_HGR_NUM_ROLES);
            int node = 1 + q;
            if (verb)
                rel[node] = 1.0f; /* root -> verb */
            else if (nv > 0)
                rel[(1 + (int)vtr_rng_below(&rng, nv)) * HN + node] = 1.0f; /* verb -> noun */
        }
    }
    p->batch = (vtr_hgr_batch){.B = HB,
                               .T = HT,
                               .frames = p->frames,
                               .frame_lengths = p->frame_lengths,
                               .captions = {.B = HB,
                                            .L = HL,
                                            .ids = p->ids,
                                            .lengths = p->lengths,
                                            .verb_masks = p->verb_masks,
                                            .noun_masks = p->noun_masks,
                                            .node_roles = p->node_roles,
                                            .rel_edges = p->rel_edges}};
}

static vtr_hgr_config hgr_config(vtr_hgr_global_pool pool)
{
    vtr_hgr_config cfg = vtr_hgr_config_default(HV, pool);
    cfg.feature_dim = HF;
    cfg.embed_size = HE;
    cfg.word_dim = HW;
    cfg.gpo_pe = 8;
    cfg.gpo_hidden = 6;
    return cfg; /* the released dropouts: both devices draw the same masks */
}

/* cpu and gpu HGR models of cfg with the same initial parameters */
static void make_hgr_models(vtr_hgr_model *cpu, vtr_hgr_model *gpu, const vtr_hgr_config *cfg)
{
    vtr_error err;
    CHECK_OK(vtr_hgr_model_init(cpu, cfg, HB, HT, HL, &err));
    vtr_hgr_init_params(cpu, 3);
    CHECK_OK(vtr_hgr_model_init_on(gpu, cfg, VTR_DEVICE_CUDA, HB, HT, HL, &err));
    vtr_hgr_init_params(gpu, 3);
    CHECK_OK(vtr_hgr_params_to_device(gpu, &err));
    CHECK_OK(vtr_hgr_zero_grad(gpu, &err));
}

static void expect_same_hgr_grads(const vtr_hgr_model *cpu, vtr_hgr_model *gpu, double tol)
{
    vtr_error err;
    CHECK_OK(vtr_hgr_params_to_host(gpu, true, &err));
    const vtr_param_set *a = &gpu->params, *b = &cpu->params;
    for (size_t i = 0; i < b->count; i++) {
        const vtr_param_entry *e = &b->entries[i];
        char what[128];
        snprintf(what, sizeof what, "gradient %s", e->name);
        expect_close_grad(what, a->grad + e->offset, b->grad + e->offset, e->numel, grad_scale(b),
                          tol);
    }
}

/* One HGR and one HGR∞ training step (dropout on, all and hardest negatives): the loss,
 * every gradient, then the encoders' outputs and a score block, GPU against CPU. */
TEST(cuda_hgr_step_matches_cpu)
{
    test_need_cuda();
    vtr_hgr_global_pool pools[] = {VTR_HGR_POOL_ATTENTION, VTR_HGR_POOL_GPO};
    for (int k = 0; k < 2; k++)
        for (int hardest = 0; hardest < 2; hardest++) {
            vtr_error err;
            vtr_hgr_config cfg = hgr_config(pools[k]);
            vtr_hgr_model cpu, gpu;
            make_hgr_models(&cpu, &gpu, &cfg);
            hgr_pairs p;
            make_hgr_pairs(&p, 20 + (uint64_t)k);
            vtr_hinge_negatives neg =
                hardest ? VTR_HINGE_HARDEST_NEGATIVE : VTR_HINGE_ALL_NEGATIVES;
            float loss_cpu, loss_gpu;
            CHECK_OK(vtr_hgr_train_step(&cpu, &p.batch, neg, 5, 7, &loss_cpu, &err));
            CHECK_OK(vtr_hgr_train_step(&gpu, &p.batch, neg, 5, 7, &loss_gpu, &err));
            CHECK(loss_cpu > 0.0f);
            expect_close("hgr loss", &loss_gpu, &loss_cpu, 1, TOL_STEP);
            expect_same_hgr_grads(&cpu, &gpu, TOL_STEP);

            static float g[2][HB * HE], v[2][HB * HT * HE], n[2][HB * HT * HE];
            static float s[2][HB * HE], sv[2][HB * HNV * HE], sn[2][HB * HNN * HE];
            static int nv[2][HB], nn[2][HB];
            vtr_hgr_model *m[2] = {&cpu, &gpu};
            for (int d = 0; d < 2; d++) {
                CHECK_OK(vtr_hgr_encode_videos(m[d], g[d], v[d], n[d], p.frames, p.frame_lengths,
                                               HB, HT, &err));
                CHECK_OK(vtr_hgr_encode_captions(m[d], s[d], sv[d], sn[d], nv[d], nn[d],
                                                 &p.batch.captions, &err));
            }
            expect_close("video global", g[1], g[0], HB * HE, TOL_STEP);
            expect_close("video verb level", v[1], v[0], HB * HT * HE, TOL_STEP);
            expect_close("sentences", s[1], s[0], HB * HE, TOL_STEP);
            expect_close("noun phrases", sn[1], sn[0], HB * HNN * HE, TOL_STEP);
            CHECK(memcmp(nv[1], nv[0], sizeof nv[0]) == 0 &&
                  memcmp(nn[1], nn[0], sizeof nn[0]) == 0);
            float fused[2][HB * HB], levels[2][3 * HB * HB];
            for (int d = 0; d < 2; d++)
                CHECK_OK(vtr_hgr_score_block(m[d], fused[d], levels[d], g[0], v[0], n[0],
                                             p.frame_lengths, HB, HT, s[0], sv[0], sn[0], nv[0],
                                             nn[0], HB, &err));
            expect_close("fused scores", fused[1], fused[0], HB * HB, TOL_STEP);
            expect_close("level scores", levels[1], levels[0], 3 * HB * HB, TOL_STEP);
            vtr_hgr_model_free(&cpu);
            vtr_hgr_model_free(&gpu);
        }
}

/* vtr_hgr_score_all of 15 encoded videos x 15 captions (three batches' worth; blocks of
 * 5) on the GPU, in one chunk and in chunks of one block, against the CPU's; the columns
 * past the captions untouched. */
TEST(cuda_hgr_score_all_matches_cpu)
{
    test_need_cuda();
    enum { N = 3 * HB, LD = N + 1 };
    vtr_error err;
    vtr_hgr_config cfg = hgr_config(VTR_HGR_POOL_GPO);
    vtr_hgr_model cpu, gpu;
    make_hgr_models(&cpu, &gpu, &cfg);
    static float g[N * HE], v[N * HT * HE], n[N * HT * HE];
    static float s[N * HE], sv[N * HNV * HE], sn[N * HNN * HE];
    static int len[N], nv[N], nn[N];
    for (int r = 0; r < 3; r++) {
        hgr_pairs p;
        make_hgr_pairs(&p, 60 + (uint64_t)r);
        size_t i = (size_t)r * HB;
        CHECK_OK(vtr_hgr_encode_videos(&cpu, g + i * HE, v + i * HT * HE, n + i * HT * HE, p.frames,
                                       p.frame_lengths, HB, HT, &err));
        CHECK_OK(vtr_hgr_encode_captions(&cpu, s + i * HE, sv + i * HNV * HE, sn + i * HNN * HE,
                                         nv + i, nn + i, &p.batch.captions, &err));
        memcpy(len + i, p.frame_lengths, sizeof p.frame_lengths);
    }
    vtr_hgr_encoded_videos videos = {g, v, n, len, N, HT};
    vtr_hgr_encoded_captions caps = {s, sv, sn, nv, nn, N};
    static float want[4][N * LD], got[4][N * LD];
    float *const on_cpu[4] = {want[0], want[1], want[2], want[3]};
    float *const on_gpu[4] = {got[0], got[1], got[2], got[3]};
    CHECK_OK(vtr_hgr_score_all(&cpu, &videos, &caps, on_cpu, LD, 0, &err));
    size_t block = sizeof(float) * HB * (HE * (1 + 2 * HT) + 1);
    const size_t chunks[2] = {0, block}; /* one chunk; three of one block each */
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < N * LD; i++)
            got[0][i] = got[1][i] = got[2][i] = got[3][i] = -7.0f;
        CHECK_OK(vtr_hgr_score_all(&gpu, &videos, &caps, on_gpu, LD, chunks[k], &err));
        for (int a = 0; a < N; a++) {
            char what[64];
            snprintf(what, sizeof what, "scores of video %d (chunk %zu)", a, chunks[k]);
            for (int l = 0; l < 4; l++) {
                expect_close(what, got[l] + a * LD, want[l] + a * LD, N, TOL_STEP);
                CHECK(got[l][a * LD + N] == -7.0f);
            }
        }
    }
    vtr_hgr_model_free(&cpu);
    vtr_hgr_model_free(&gpu);
}

/* Two GPU runs of HGR∞ steps (dropout on) give the same bytes. */
TEST(cuda_hgr_two_runs_give_the_same_bytes)
{
    test_need_cuda();
    vtr_error err;
    vtr_hgr_config cfg = hgr_config(VTR_HGR_POOL_GPO);
    vtr_hgr_model a, b, *m[2] = {&a, &b};
    float loss[2][10];
    for (int r = 0; r < 2; r++) {
        CHECK_OK(vtr_hgr_model_init_on(m[r], &cfg, VTR_DEVICE_CUDA, HB, HT, HL, &err));
        vtr_hgr_init_params(m[r], 3);
        CHECK_OK(vtr_hgr_params_to_device(m[r], &err));
        for (int i = 0; i < 10; i++) {
            hgr_pairs p;
            make_hgr_pairs(&p, 100 + (uint64_t)i);
            CHECK_OK(vtr_hgr_zero_grad(m[r], &err));
            CHECK_OK(vtr_hgr_train_step(m[r], &p.batch, VTR_HINGE_HARDEST_NEGATIVE, 5, (uint64_t)i,
                                        &loss[r][i], &err));
        }
        CHECK_OK(vtr_hgr_params_to_host(m[r], true, &err));
    }
    CHECK(memcmp(loss[0], loss[1], sizeof loss[0]) == 0);
    CHECK(memcmp(a.params.grad, b.params.grad, sizeof(float) * a.params.n_trainable) == 0);
    vtr_hgr_model_free(&a);
    vtr_hgr_model_free(&b);
}

/* n HGR training steps (batches uploaded through a staging slot) of the GPU model m */
static void hgr_steps(void *m, int n)
{
    vtr_error err;
    for (int i = 0; i < n; i++) {
        hgr_pairs p;
        make_hgr_pairs(&p, 100 + (uint64_t)i);
        float loss;
        CHECK_OK(vtr_hgr_zero_grad(m, &err));
        CHECK_OK(vtr_hgr_train_step(m, &p.batch, VTR_HINGE_HARDEST_NEGATIVE, 5, (uint64_t)i, &loss,
                                    &err));
    }
}

/* An HGR∞ step on the GPU (its batch uploaded through a staging slot, the step) waits for the
 * GPU twice, however many ops its three levels run: for the slot's earlier copy and for the
 * loss. Counted where the backend counts (the emulation). */
TEST(cuda_hgr_step_waits_for_the_gpu_twice)
{
    test_need_cuda();
    vtr_error err;
    vtr_hgr_config cfg = hgr_config(VTR_HGR_POOL_GPO);
    vtr_hgr_model m;
    CHECK_OK(vtr_hgr_model_init_on(&m, &cfg, VTR_DEVICE_CUDA, HB, HT, HL, &err));
    vtr_hgr_init_params(&m, 3);
    CHECK_OK(vtr_hgr_params_to_device(&m, &err));
    expect_waits_per_step("HGR∞", hgr_steps, &m, 2);
    vtr_hgr_model_free(&m);
}
