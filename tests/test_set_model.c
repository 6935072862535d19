/* Set embeddings in the VSE model (match/vse_model.h, model.set_size K > 0; paper 002):
 * finite differences of the whole training loss (encoders, set modules, smooth-Chamfer,
 * hinge, diversity and MMD) with training-mode dropout, the dropout's streams, encoding K
 * unit vectors per input in evaluation mode, evaluation by smooth-Chamfer, the set
 * modules' learning-rate scale, the config's errors, and parity with PyTorch of one whole
 * training step and the AdamW step after it (tests/fixtures/nn/set_model/, written by
 * tests/fixtures/make_set_model_fixtures.py; VTR_TEST_VERBOSE=1 prints the errors). The ops
 * alone are checked against PyTorch in test_set_prediction.c and test_set_similarity.c. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gradcheck.h"
#include "lib/checkpoint.h"
#include "lib/optim.h"
#include "lib/rng.h"
#include "match/encode.h"
#include "match/retrieval_metrics.h"
#include "match/set_similarity.h"
#include "match/vse_model.h"

enum { B = 4, T = 5, F = 6, E = 8, W = 5, V = 20, L = 6, K = 3 };

static vtr_vse_config small_config(float dropout, float alpha)
{
    vtr_vse_config c = vtr_vse_config_infinity(V);
    c.feature_dim = F;
    c.embed_size = E;
    c.mlp_hidden = 0;
    c.word_dim = W;
    c.img_pool.gpo_pe = c.txt_pool.gpo_pe = 4;
    c.img_pool.gpo_hidden = c.txt_pool.gpo_hidden = 4;
    c.reduction = VTR_REDUCE_SUM; /* gradients B times the mean's, above float32 noise */
    c.set = vtr_vse_set_config_default(E);
    c.set.K = K;
    c.set.T = 2;
    c.set.Dh = 6;
    c.set.H = 10;
    c.set.dropout = dropout;
    c.set.alpha = alpha;
    c.set.div_weight = 0.5f; /* large enough that a wrong regulariser gradient shows */
    c.set.mmd_weight = 0.5f;
    return c;
}

/* A random batch: frames (B,T,F) with lengths 5, 3, 1, 4 (padded rows zero), captions of
 * lengths 6, 2, 4, 5. */
typedef struct batch_data {
    float frames[B * T * F];
    int frame_lengths[B], ids[B * L], lengths[B];
    vtr_vse_batch batch;
} batch_data;

static void make_batch(batch_data *d, uint64_t seed)
{
    static const int fl[B] = {5, 3, 1, 4}, cl[B] = {6, 2, 4, 5};
    vtr_rng rng;
    vtr_rng_init(&rng, seed, 0);
    memset(d, 0, sizeof *d);
    for (int b = 0; b < B; b++) {
        d->frame_lengths[b] = fl[b];
        d->lengths[b] = cl[b];
        for (int t = 0; t < fl[b] * F; t++)
            d->frames[b * T * F + t] = vtr_rng_normal(&rng);
        for (int l = 0; l < cl[b]; l++)
            d->ids[b * L + l] = (int)vtr_rng_below(&rng, V);
    }
    d->batch = (vtr_vse_batch){.B = B, .T = T, .frames = d->frames,
                               .frame_lengths = d->frame_lengths, .L = L, .ids = d->ids,
                               .caption_lengths = d->lengths, .seed = 3, .step = 7};
}

static float step_loss(vtr_vse_model *m, const vtr_vse_batch *b, vtr_hinge_negatives neg)
{
    vtr_error err;
    float loss;
    CHECK_OK(vtr_vse_train_step(m, b, neg, &loss, &err));
    return loss;
}

static double numeric_at(vtr_vse_model *m, const vtr_vse_batch *b, float *x, size_t k, float h)
{
    float x0 = x[k];
    x[k] = x0 + h;
    double up = step_loss(m, b, VTR_HINGE_ALL_NEGATIVES);
    x[k] = x0 - h;
    double down = step_loss(m, b, VTR_HINGE_ALL_NEGATIVES);
    x[k] = x0;
    return (up - down) / (2.0 * (double)h);
}

/* The indices of the n largest |g[i]| of g (numel), largest first. */
static void largest(size_t *top, size_t n, const float *g, size_t numel)
{
    for (size_t j = 0; j < n; j++) {
        size_t best = numel;
        for (size_t i = 0; i < numel; i++) {
            bool taken = false;
            for (size_t t = 0; t < j && !taken; t++)
                taken = top[t] == i;
            if (!taken && (best == numel || fabsf(g[i]) > fabsf(g[best])))
                best = i;
        }
        top[j] = best;
    }
}

TEST(set_model_gradients_match_finite_differences_with_dropout)
{
    /* Every parameter tensor, its 6 largest gradient elements, against central differences
     * (steps 1e-2 and 2.5e-3) of the whole loss (all negatives: the hardest negative only adds kinks) with the set
     * modules' dropout at fixed (seed, step). alpha 4 keeps the smooth-Chamfer's curvature
     * within the steps' reach; the ops are checked at alpha 16 on their own. Mean pooling:
     * GPO's sort puts kinks ~1e-3 apart in the loss (its gradients are checked in
     * test_nn_gru_gpo.c), which no step here resolves. Elements whose
     * differences at two steps disagree by more than 10% sit near a kink (GPO's sort, the
     * hinge) and are skipped (counted). The float32 loss (a sum over the batch, about 3)
     * rounds at ~4e-7: ~2e-4 of noise in a difference at the small step, hence the floor
     * in the error |a - n| / (|a| + |n| + FLOOR). */
    const double FLOOR = 6e-3;
    vtr_error err;
    vtr_vse_config cfg = small_config(0.2f, 4.0f);
    cfg.img_pool.kind = cfg.txt_pool.kind = VTR_VSE_POOL_MEAN;
    vtr_vse_model m;
    CHECK_OK(vtr_vse_model_init(&m, &cfg, B, T, L, &err));
    vtr_vse_init_params(&m, 5);
    batch_data d;
    make_batch(&d, 9);
    size_t n = m.params.n_trainable;
    float *analytic = malloc(sizeof(float) * n);
    CHECK(analytic != NULL);
    vtr_param_set_zero_grad(&m.params);
    step_loss(&m, &d.batch, VTR_HINGE_ALL_NEGATIVES);
    memcpy(analytic, m.params.grad, sizeof(float) * n);
    double worst = 0.0;
    int checked = 0, skipped = 0, spm = 0;
    for (size_t i = 0; i < m.params.count; i++) {
        const vtr_param_entry *e = &m.params.entries[i];
        if (!e->trainable)
            continue;
        float *x = m.params.data + e->offset;
        size_t count = e->numel < 6 ? e->numel : 6;
        size_t top[6];
        largest(top, count, analytic + e->offset, e->numel);
        for (size_t j = 0; j < count; j++) {
            size_t k = top[j];
            double coarse = numeric_at(&m, &d.batch, x, k, 1e-2f);
            double fine = numeric_at(&m, &d.batch, x, k, 2.5e-3f);
            if (fabs(coarse - fine) > 0.1 * (fabs(coarse) + fabs(fine)) + 2e-5) {
                skipped++;
                continue;
            }
            double a = analytic[e->offset + k];
            double error = fabs(a - fine) / (fabs(a) + fabs(fine) + FLOOR);
            CHECK_MSG(error <= GRADCHECK_TOL, "gradcheck %s[%zu]: analytic %.6g numeric %.6g",
                      e->name, k, a, fine);
            worst = fmax(worst, error);
            checked++;
            spm += strstr(e->name, ".spm.") != NULL;
        }
    }
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    gradcheck: %d elements (%d in the set modules), worst error %.2e, %d "
               "skipped at kinks\n", checked, spm, worst, skipped);
    CHECK_MSG(skipped * 4 <= checked, "%d of %d elements at kinks", skipped, checked + skipped);
    CHECK(spm >= 2 * 19 * 2); /* most of every set module tensor's elements were checked */
    free(analytic);
    vtr_vse_model_free(&m);
}

TEST(set_model_dropout_draws_from_seed_and_step)
{
    vtr_error err;
    vtr_vse_config cfg = small_config(0.2f, VTR_SET_ALPHA);
    vtr_vse_model a, b;
    CHECK_OK(vtr_vse_model_init(&a, &cfg, B, T, L, &err));
    CHECK_OK(vtr_vse_model_init(&b, &cfg, B, T, L, &err));
    vtr_vse_init_params(&a, 5);
    vtr_vse_init_params(&b, 5);
    batch_data d;
    make_batch(&d, 9);
    vtr_param_set_zero_grad(&a.params);
    vtr_param_set_zero_grad(&b.params);
    float la = step_loss(&a, &d.batch, VTR_HINGE_HARDEST_NEGATIVE);
    float lb = step_loss(&b, &d.batch, VTR_HINGE_HARDEST_NEGATIVE);
    CHECK(memcmp(&la, &lb, sizeof la) == 0);
    CHECK(memcmp(a.params.grad, b.params.grad, sizeof(float) * a.params.n_trainable) == 0);
    d.batch.step = 8;
    float lc = step_loss(&b, &d.batch, VTR_HINGE_HARDEST_NEGATIVE);
    CHECK(la != lc);
    /* the loss is the hinge plus the weighted regularisers the step reports */
    const float *t = b.set_terms;
    CHECK(fabsf(lc - (t[0] + cfg.set.div_weight * t[1] + cfg.set.mmd_weight * t[2])) <=
          1e-6f * fabsf(lc));
    CHECK(t[1] > 0.0f && t[2] > 0.0f);
    vtr_vse_model_free(&a);
    vtr_vse_model_free(&b);
}

TEST(set_model_encodes_k_unit_vectors_and_evaluates_by_smooth_chamfer)
{
    vtr_error err;
    vtr_vse_config cfg = small_config(0.1f, VTR_SET_ALPHA);
    vtr_vse_model m;
    CHECK_OK(vtr_vse_model_init(&m, &cfg, B, T, L, &err));
    vtr_vse_init_params(&m, 6);
    CHECK(vtr_vse_vectors(&cfg) == K);
    batch_data d;
    make_batch(&d, 4);
    float img[B * K * E], cap[B * K * E], img2[B * K * E];
    CHECK_OK(vtr_vse_encode_images(&m, img, d.frames, d.frame_lengths, B, T, false, &err));
    CHECK_OK(vtr_vse_encode_captions(&m, cap, d.ids, d.lengths, B, L, &err));
    for (int r = 0; r < B * K; r++) {
        double s = 0;
        for (int k = 0; k < E; k++)
            s += (double)img[r * E + k] * img[r * E + k];
        CHECK(fabs((double)(s) - (double)(1.0)) <= 1e-5);
        s = 0;
        for (int k = 0; k < E; k++)
            s += (double)cap[r * E + k] * cap[r * E + k];
        CHECK(fabs((double)(s) - (double)(1.0)) <= 1e-5);
    }
    /* evaluation mode has no dropout: a second encode (after a training step) is the same */
    vtr_param_set_zero_grad(&m.params);
    step_loss(&m, &d.batch, VTR_HINGE_HARDEST_NEGATIVE);
    CHECK_OK(vtr_vse_encode_images(&m, img2, d.frames, d.frame_lengths, B, T, false, &err));
    CHECK(memcmp(img, img2, sizeof img) == 0);
    /* an item encoded alone is the same set (no padding or batch effect beyond rounding) */
    float one[K * E];
    CHECK_OK(vtr_vse_encode_images(&m, one, d.frames + 3 * T * F, d.frame_lengths + 3, 1,
                                   d.frame_lengths[3], false, &err));
    for (int k = 0; k < K * E; k++)
        CHECK(fabs((double)(one[k]) - (double)(img[3 * K * E + k])) <= 1e-5);
    /* the evaluation's tiles score the sets by smooth-Chamfer */
    vtr_embedding_model em = vtr_vse_embedding_model(&cfg, img, cap);
    vtr_similarity_ensemble ens = {&em, 1};
    int caps[B] = {0, 1, 2, 3};
    float S[B * B], want[B * B];
    CHECK_OK(vtr_similarity_ensemble_block(&ens, 0, B, caps, B, S, &err));
    void *scratch = malloc(vtr_smooth_chamfer_scratch_size(B, B, K, K));
    vtr_smooth_chamfer_forward(want, B, scratch, img, cap, B, B, K, K, E, VTR_SET_ALPHA);
    CHECK(memcmp(S, want, sizeof S) == 0);
    /* a gathered (non-contiguous) tile gives the same scores */
    int rev[2] = {3, 1};
    float S2[B * 2];
    CHECK_OK(vtr_similarity_ensemble_block(&ens, 0, B, rev, 2, S2, &err));
    for (int i = 0; i < B; i++) { /* the same up to the products' rounding */
        CHECK(fabsf(S2[i * 2] - S[i * B + 3]) <= 1e-6f);
        CHECK(fabsf(S2[i * 2 + 1] - S[i * B + 1]) <= 1e-6f);
    }
    free(scratch);
    vtr_vse_model_free(&m);
}

TEST(optimizer_steps_each_entry_at_its_learning_rate_scale)
{
    /* AdamW over two entries, the second at lr x 0.1: its first step moves each element by
     * 0.1 lr (Adam's first step is lr x sign(g), here with decay 1 - 0.1 lr wd), the first
     * entry's by lr; torch's parameter groups do the same */
    vtr_error err;
    vtr_param_set ps;
    vtr_param_set_init(&ps);
    int64_t shape[1] = {3};
    CHECK_OK(vtr_param_set_add(&ps, "a.w", VTR_F32, true, 1, shape, &err));
    CHECK_OK(vtr_param_set_add(&ps, "b.spm.w", VTR_F32, true, 1, shape, &err));
    vtr_param_set_scale_lr(&ps, "b.spm.", 0.1f);
    CHECK_OK(vtr_param_set_finalize(&ps, &err));
    for (int i = 0; i < 6; i++) {
        ps.data[i] = 1.0f;
        ps.grad[i] = i % 2 ? -2.0f : 3.0f;
    }
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    vtr_optimizer opt;
    CHECK_OK(vtr_optimizer_init(&opt, &ps, &hp, &err));
    double lr = 1e-2;
    vtr_optimizer_step(&opt, &ps, lr);
    for (int i = 0; i < 6; i++) {
        double rate = i < 3 ? lr : 0.1 * lr, sign = i % 2 ? -1.0 : 1.0;
        double want = 1.0 * (1.0 - rate * hp.weight_decay) - rate * sign;
        CHECK(fabs((double)(ps.data[i]) - (double)(want)) <= 1e-6);
    }
    vtr_optimizer_free(&opt);
    vtr_param_set_free(&ps);
}

TEST(set_model_config_errors)
{
    vtr_error err;
    vtr_vse_config c = small_config(0.1f, VTR_SET_ALPHA);
    CHECK_OK(vtr_vse_config_check(&c, &err));
    c.loss = VTR_VSE_LOSS_ADOPT;
    CHECK_FAILS(vtr_vse_config_check(&c, &err), VTR_ERR_INVALID, "train with the hinge loss");
    c = small_config(1.0f, VTR_SET_ALPHA);
    CHECK_FAILS(vtr_vse_config_check(&c, &err), VTR_ERR_INVALID, "set.dropout = 1");
    c = small_config(0.1f, 0.0f);
    CHECK_FAILS(vtr_vse_config_check(&c, &err), VTR_ERR_INVALID, "alpha 0");
    c = small_config(0.1f, VTR_SET_ALPHA);
    c.set.K = -1;
    CHECK_FAILS(vtr_vse_config_check(&c, &err), VTR_ERR_INVALID, "set.K = -1 outside");
    c.set.K = 0; /* one vector: the set keys are not read */
    c.set.T = 0;
    CHECK_OK(vtr_vse_config_check(&c, &err));
    CHECK(vtr_vse_vectors(&c) == 1);
}

/* ---- parity with PyTorch: one training step and one AdamW step --------------------- */

/* tests/fixtures/nn/set_model/, written by tests/fixtures/make_set_model_fixtures.py with
 * these settings (its top comment says why eps is 1e-3) */
#define FIXTURE(name) "set_model/" name
#define SET_MODEL_PARITY_TOL 1e-5 /* issue 17's bar, tighter than PARITY_TOL */
#define PARITY_LR 1e-2
#define PARITY_LR_SCALE 0.1f
#define PARITY_WEIGHT_DECAY 0.1
#define PARITY_EPS 1e-3

/* The tensor called name in a safetensors fixture: F32 with n elements, or the test fails. */
static const float *fixture_tensor(const vtr_safetensors *st, const char *name, size_t n)
{
    const vtr_tensor *t = vtr_safetensors_find(st, name);
    CHECK_MSG(t && t->dtype == VTR_F32 && (size_t)vtr_tensor_numel(t) == n,
              "fixture tensor %s: missing, not F32 or not %zu elements", name, n);
    return t->data;
}

TEST(parity_set_model_one_adamw_step)
{
    /* The whole set model (fc over frames and mean pooling; BiGRU and GPO over words; both
     * set modules, dropout 0; smooth-Chamfer at alpha 16; hinge with the hardest negative,
     * mean over the batch; diversity and MMD at 0.5): vtr_vse_train_step, then one AdamW
     * step with the set modules at lr x 0.1, against PyTorch in float64 on the same float32
     * values: the loss, its three terms, S, every gradient and every parameter after the
     * step. The weights load by their checkpoint names from a PyTorch state_dict. */
    vtr_error err;
    vtr_vse_config cfg = small_config(0.0f, VTR_SET_ALPHA);
    cfg.img_pool.kind = VTR_VSE_POOL_MEAN;
    cfg.reduction = VTR_REDUCE_MEAN;
    cfg.set.lr_scale = PARITY_LR_SCALE;
    vtr_vse_model m;
    CHECK_OK(vtr_vse_model_init(&m, &cfg, B, T, L, &err));
    vtr_checkpoint ck;
    CHECK_OK(vtr_checkpoint_open(nn_fixture_path(FIXTURE("init.safetensors")),
                                 VTR_CHECKPOINT_ALLOW_PLAIN, &ck, &err));
    CHECK_OK(vtr_checkpoint_load_params(&ck, &m.params, 0, &err));
    vtr_checkpoint_close(&ck);

    float *frames = nn_fixture_floats(FIXTURE("frames"), B * T * F);
    int *frame_lengths = nn_fixture_ints(FIXTURE("frame_lengths"), B);
    int *ids = nn_fixture_ints(FIXTURE("ids"), B * L);
    int *caption_lengths = nn_fixture_ints(FIXTURE("caption_lengths"), B);
    vtr_vse_batch batch = {.B = B, .T = T, .frames = frames, .frame_lengths = frame_lengths,
                           .L = L, .ids = ids, .caption_lengths = caption_lengths};
    float loss;
    vtr_param_set_zero_grad(&m.params);
    CHECK_OK(vtr_vse_train_step(&m, &batch, VTR_HINGE_HARDEST_NEGATIVE, &loss, &err));
    double worst = nn_parity_check_at(FIXTURE("loss"), &loss, 1, SET_MODEL_PARITY_TOL);
    worst = fmax(worst, nn_parity_check_at(FIXTURE("terms"), m.set_terms, 3,
                                           SET_MODEL_PARITY_TOL));
    worst = fmax(worst, nn_parity_check_at(FIXTURE("S"), m.sim, B * B, SET_MODEL_PARITY_TOL));

    vtr_optimizer opt;
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    hp.weight_decay = PARITY_WEIGHT_DECAY;
    hp.eps = PARITY_EPS;
    CHECK_OK(vtr_optimizer_init(&opt, &m.params, &hp, &err));
    vtr_optimizer_step(&opt, &m.params, PARITY_LR);

    vtr_safetensors grad, after;
    CHECK_OK(vtr_safetensors_open(nn_fixture_path(FIXTURE("grad.safetensors")), &grad, &err));
    CHECK_OK(vtr_safetensors_open(nn_fixture_path(FIXTURE("after_step.safetensors")), &after,
                                  &err));
    CHECK_EQ_INT(m.params.n_trainable, m.params.n_data); /* no buffers: every entry trains */
    CHECK_EQ_INT(grad.count, m.params.count);           /* no fixture tensor left unchecked */
    CHECK_EQ_INT(after.count, m.params.count);
    double previous_scale = 0.0; /* max |gradient| of the entry before */
    for (size_t i = 0; i < m.params.count; i++) {
        const vtr_param_entry *e = &m.params.entries[i];
        const float *g = fixture_tensor(&grad, e->name, e->numel);
        /* norm_q.bias's gradient is 0 in exact arithmetic (aggregate/set_prediction.h), float32
         * rounding noise here: held at the scale of norm_q.weight's, the entry before */
        double scale = strstr(e->name, ".spm.norm_q.bias") ? previous_scale : 0.0;
        worst = fmax(worst, nn_parity_compare(e->name, m.params.grad + e->offset, g, e->numel,
                                              scale, SET_MODEL_PARITY_TOL));
        previous_scale = nn_max_abs(g, e->numel);
        const float *p = fixture_tensor(&after, e->name, e->numel);
        worst = fmax(worst, nn_parity_compare(e->name, m.params.data + e->offset, p, e->numel,
                                              0.0, SET_MODEL_PARITY_TOL));
    }
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    set model parity: worst relative error %.2e\n", worst);
    vtr_safetensors_close(&grad);
    vtr_safetensors_close(&after);
    vtr_optimizer_free(&opt);
    free(frames), free(frame_lengths), free(ids), free(caption_lengths);
    vtr_vse_model_free(&m);
}
