/* The VSE model on the GPU (match/vse_model.h, VTR_DEVICE_CUDA) against the same model on
 * the CPU: one training step's loss (mean, GPO or ADPOOL; hinge or ADOPT, with ADOPT's K),
 * similarities and every parameter gradient, the evaluation embeddings, a few hundred
 * steps of training with AdamW and clipping on both devices (match/model_ops.h's clipping
 * and AdamW step), two GPU runs giving the same bytes, and a step in tf32 and in bfloat16
 * against float32. Skipped where no GPU is present, or without CUDA; the refusals that need no GPU
 * are tested in test_vse_model.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lib/device.h"
#include "lib/rng.h"
#include "match/model_ops.h"
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
        expect_close(what, a->grad + e->offset, b->grad + e->offset, e->numel, tol);
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
            double rel = test_rel_error(low.params.grad + e->offset, gpu32.params.grad + e->offset,
                                        e->numel);
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

/* steps of the VSE∞ recipe on fresh pairs per step (all negatives first, then the
 * hardest), AdamW at lr with clipping at 2 (vtr_dev_clip_and_step); returns the mean loss
 * of the last 20 steps and the first step's loss in *first. ahead: each step's pairs are
 * staged (vtr_vse_stage_batch) before the previous step, as the trainer does. */
static float train(vtr_vse_model *m, int steps, double lr, bool ahead, float *first)
{
    vtr_error err;
    vtr_optimizer opt;
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    CHECK_OK(vtr_optimizer_init(&opt, &m->params, &hp, &err));
    size_t n = m->params.n_trainable;
    void *moments, *scratch;
    CHECK_OK(vtr_dev_alloc(m->device, &moments, sizeof(float) * 2 * n, "moments", &err));
    CHECK_OK(vtr_dev_alloc(m->device, &scratch, VTR_DEV_STEP_SCRATCH, "scratch", &err));
    double tail = 0.0;
    static pairs p[2]; /* step i's, and step i+1's staged beside it */
    make_pairs(&p[0], 1000);
    if (ahead)
        CHECK_OK(vtr_vse_stage_batch(m, 0, &p[0].batch, &err));
    for (int i = 0; i < steps; i++) {
        int k = (i + 1) % 2;
        if (i + 1 < steps) {
            make_pairs(&p[k], 1000 + (uint64_t)i + 1);
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
