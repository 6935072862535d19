/* The HGR / HGR∞ model (match/hgr_model.h): parity with PyTorch (encoders, the three
 * level scores, the fused score, the loss, every gradient, one Adam step;
 * tests/fixtures/make_hgr_fixtures.py), finite-difference gradients of the whole loss with
 * training-mode dropout, determinism, the frame sampling, argument errors, and learning on
 * a tiny synthetic task. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gradcheck.h"
#include "lib/device.h"
#include "lib/optim.h"
#include "match/hgr_model.h"
#include "match/model_params.h"

enum { PB = 4, PT = 5, PF = 24, PE = 16, PW = 8, PV = 40, PL = 9, NV = 4, NN = 6, NODES = 11 };

static vtr_hgr_config small_config(vtr_hgr_global_pool pool, float dropout)
{
    vtr_hgr_config cfg = vtr_hgr_config_default(PV, pool);
    cfg.feature_dim = PF;
    cfg.embed_size = PE;
    cfg.word_dim = PW;
    cfg.gpo_pe = 8;
    cfg.gpo_hidden = 6;
    cfg.video_dropout = cfg.text_dropout = dropout;
    cfg.gcn_dropout = dropout > 0.0f ? 0.5f : 0.0f;
    return cfg;
}

/* The fixture batch (make_hgr_fixtures.py inputs()). */
typedef struct fixture_batch {
    float *frames, *rel_edges;
    int *frame_lengths, *ids, *lengths, *node_roles;
    uint8_t verb_masks[PB * NV * PL], noun_masks[PB * NN * PL];
    vtr_hgr_batch batch;
} fixture_batch;

static void load_masks(uint8_t *dst, const char *name, size_t n)
{
    int *m = nn_fixture_ints(name, n);
    for (size_t i = 0; i < n; i++)
        dst[i] = (uint8_t)(m[i] != 0);
    free(m);
}

static void load_batch(fixture_batch *f)
{
    f->frames = nn_fixture_floats("hgr/frames", PB * PT * PF);
    f->frame_lengths = nn_fixture_ints("hgr/frame_lengths", PB);
    f->ids = nn_fixture_ints("hgr/ids", PB * PL);
    f->lengths = nn_fixture_ints("hgr/lengths", PB);
    f->node_roles = nn_fixture_ints("hgr/node_roles", PB * (NV + NN));
    f->rel_edges = nn_fixture_floats("hgr/rel_edges", PB * NODES * NODES);
    load_masks(f->verb_masks, "hgr/verb_masks", PB * NV * PL);
    load_masks(f->noun_masks, "hgr/noun_masks", PB * NN * PL);
    f->batch = (vtr_hgr_batch){
        .B = PB,
        .T = PT,
        .frames = f->frames,
        .frame_lengths = f->frame_lengths,
        .captions = {.B = PB,
                     .L = PL,
                     .ids = f->ids,
                     .lengths = f->lengths,
                     .verb_masks = f->verb_masks,
                     .noun_masks = f->noun_masks,
                     .node_roles = f->node_roles,
                     .rel_edges = f->rel_edges},
    };
}

static void free_batch(fixture_batch *f)
{
    free(f->frames), free(f->rel_edges), free(f->frame_lengths), free(f->ids), free(f->lengths);
    free(f->node_roles);
}

/* The parameter names in set order: the reference's, for both variants. */
static void check_names(const vtr_param_set *ps, bool gpo)
{
    static const char *const pool_attn[] = {"ft_attn.weight", "ft_attn.bias"};
    static const char *const pool_gpo[] = {"gpool.gru.weight_ih_l0",
                                           "gpool.gru.weight_hh_l0",
                                           "gpool.gru.bias_ih_l0",
                                           "gpool.gru.bias_hh_l0",
                                           "gpool.gru.weight_ih_l0_reverse",
                                           "gpool.gru.weight_hh_l0_reverse",
                                           "gpool.gru.bias_ih_l0_reverse",
                                           "gpool.gru.bias_hh_l0_reverse",
                                           "gpool.linear.weight"};
    const char *const *pool = gpo ? pool_gpo : pool_attn;
    int np = gpo ? 9 : 2;
    char expect[64][96];
    int n = 0;
    for (int k = 0; k < 3; k++) {
        snprintf(expect[n++], 96, "video_encoder.level_embeds.%d.weight", k);
        snprintf(expect[n++], 96, "video_encoder.level_embeds.%d.bias", k);
    }
    for (int i = 0; i < np; i++)
        snprintf(expect[n++], 96, "video_encoder.%s", pool[i]);
    snprintf(expect[n++], 96, "text_encoder.embedding.we.weight");
    static const char *const rnn[] = {
        "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
        "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse"};
    for (int i = 0; i < 8; i++)
        snprintf(expect[n++], 96, "text_encoder.rnn.%s", rnn[i]);
    for (int i = 0; i < np; i++)
        snprintf(expect[n++], 96, "text_encoder.%s", pool[i]);
    snprintf(expect[n++], 96, "text_encoder.role_embedding.weight");
    static const char *const gcn[] = {"ctx_layer.weight",     "layernorm.weight",
                                      "layernorm.bias",       "edge_attn_query.weight",
                                      "edge_attn_query.bias", "edge_attn_key.weight",
                                      "edge_attn_key.bias"};
    for (int i = 0; i < 7; i++)
        snprintf(expect[n++], 96, "text_encoder.gcn.layers.0.%s", gcn[i]);
    CHECK_EQ_INT(ps->count, n);
    for (int i = 0; i < n; i++)
        CHECK_STR(ps->entries[i].name, expect[i]);
}

/* The tensors whose gradient is 0 in exact arithmetic: a bias added to every score of a
 * softmax (the attention poolers' ft_attn.bias; the GCN's key bias, lib/graph_attention.h).
 * Both sides give rounding noise there, which Adam turns into steps of up to lr. */
static bool shift_invariant(const char *name)
{
    size_t n = strlen(name);
    return (n >= 12 && strcmp(name + n - 12, "ft_attn.bias") == 0) ||
           strstr(name, "edge_attn_key.bias") != NULL;
}

/* Adam (eps 1e-8) steps an element by about lr * g / (|g| + eps) at its first step: where
 * |g| is within ADAM_NOISE_GRAD (10 eps) of zero, the float32 rounding of the gradient
 * moves the step by lr * eps * dg / (|g| + eps)^2. HGR∞'s text_encoder.rnn.weight_ih_l0
 * has one such element, (0, 6): its gradient, -3.954e-8 in float64, is a sum of 25 terms
 * whose magnitudes add up to 8.5e-4 (a 21,555-fold cancellation); PyTorch's float32 gives
 * -3.950e-8, vtr's -3.982e-8 (the gradient of the BiGRU's output, rounded to float32
 * alike on both sides, 3.8e-8 and 4.4e-8 from float64 at most, carries most of that), and
 * the two Adam steps differ by 1.3e-5 (4.9e-5 of the tensor's scale). Such elements are
 * held to the noise bound; Adam itself is checked on the reference's own gradients. */
#define ADAM_NOISE_GRAD 1e-7

/* Relative error (nn_parity_check's measure) of each parameter tensor of got against the
 * same slice of the flat fixture; fails above tol; returns the largest. Noise elements are
 * checked against `noise` instead, |got - ref| <= noise: every element of the
 * shift-invariant tensors and, when ref_grad is given, each element whose ref_grad is
 * under ADAM_NOISE_GRAD in magnitude. */
static double parity_per_tensor(const vtr_param_set *ps, const float *got, const char *fixture,
                                const char *what, double tol, double noise, const float *ref_grad)
{
    float *ref = nn_fixture_floats(fixture, ps->n_trainable);
    double worst = 0.0;
    for (size_t i = 0; i < ps->count; i++) {
        const vtr_param_entry *e = &ps->entries[i];
        bool all_noise = shift_invariant(e->name);
        double diff = 0.0, noise_diff = 0.0, scale = 1e-6;
        for (size_t k = 0; k < e->numel; k++) {
            size_t j = e->offset + k;
            double d = fabs((double)got[j] - ref[j]);
            scale = fmax(scale, fabs((double)ref[j]));
            if (all_noise || (ref_grad && fabs((double)ref_grad[j]) < ADAM_NOISE_GRAD))
                noise_diff = fmax(noise_diff, d);
            else
                diff = fmax(diff, d);
        }
        if (getenv("VTR_TEST_VERBOSE"))
            printf("    parity %-8s %-44s relative error %.2e, noise elements %.2e\n", what,
                   e->name, diff / scale, noise_diff);
        CHECK_MSG(noise_diff <= noise, "%s of %s: differs by %g (noise bound %g)", what, e->name,
                  noise_diff, noise);
        double rel = diff / scale;
        CHECK_MSG(rel <= tol, "parity %s of %s: relative error %.3g", what, e->name, rel);
        worst = fmax(worst, rel);
    }
    free(ref);
    return worst;
}

static void parity(vtr_hgr_global_pool pool, const char *prefix)
{
    vtr_error err;
    vtr_hgr_config cfg = small_config(pool, 0.0f);
    vtr_hgr_model m;
    CHECK_OK(vtr_hgr_model_init(&m, &cfg, PB, PT, PL, &err));
    check_names(&m.params, pool == VTR_HGR_POOL_GPO);
    char name[96];
    snprintf(name, sizeof name, "hgr/%sparams", prefix);
    float *params = nn_fixture_floats(name, m.params.n_trainable);
    memcpy(m.params.data, params, sizeof(float) * m.params.n_trainable);
    free(params);

    fixture_batch f;
    load_batch(&f);
    float loss;
    vtr_param_set_zero_grad(&m.params);
    CHECK_OK(vtr_hgr_train_step(&m, &f.batch, VTR_HINGE_HARDEST_NEGATIVE, 1, 0, &loss, &err));
#define PARITY(fixture, buffer, n)                                                                 \
    do {                                                                                           \
        snprintf(name, sizeof name, "hgr/%s%s", prefix, fixture);                                  \
        nn_parity_check(name, buffer, n);                                                          \
    } while (0)
    PARITY("vid_global", m.vid_glob, PB * PE);
    PARITY("vid_verb", m.vid_level[1], PB * PT * PE);
    PARITY("vid_noun", m.vid_level[2], PB * PT * PE);
    PARITY("sent", m.sent, PB * PE);
    PARITY("verbs", m.verbs, PB * NV * PE);
    PARITY("nouns", m.nouns, PB * NN * PE);
    PARITY("s_global", m.s_global, PB * PB);
    PARITY("s_verb", m.s_verb, PB * PB);
    PARITY("s_noun", m.s_noun, PB * PB);
    PARITY("s_fused", m.s_fused, PB * PB);
    PARITY("loss", &loss, 1);
    snprintf(name, sizeof name, "hgr/%sgrads", prefix);
    parity_per_tensor(&m.params, m.params.grad, name, "grad", PARITY_TOL, 1e-6, NULL);

    /* inference: the encoders and the block scorer give the step's numbers */
    float global[PB * PE], verb[PB * PT * PE], noun[PB * PT * PE];
    float sent[PB * PE], verbs[PB * NV * PE], nouns[PB * NN * PE], fused[PB * PB],
        levels[3 * PB * PB];
    int n_verbs[PB], n_nouns[PB];
    CHECK_OK(
        vtr_hgr_encode_videos(&m, global, verb, noun, f.frames, f.frame_lengths, PB, PT, &err));
    CHECK_OK(
        vtr_hgr_encode_captions(&m, sent, verbs, nouns, n_verbs, n_nouns, &f.batch.captions, &err));
    static const int expect_verbs[PB] = {2, 1, 0, 4}, expect_nouns[PB] = {4, 2, 3, 6};
    for (int b = 0; b < PB; b++) {
        CHECK_EQ_INT(n_verbs[b], expect_verbs[b]);
        CHECK_EQ_INT(n_nouns[b], expect_nouns[b]);
    }
    PARITY("vid_verb", verb, PB * PT * PE);
    PARITY("nouns", nouns, PB * NN * PE);
    CHECK_OK(vtr_hgr_score_block(&m, fused, levels, global, verb, noun, f.frame_lengths, PB, PT,
                                 sent, verbs, nouns, n_verbs, n_nouns, PB, &err));
    PARITY("s_fused", fused, PB * PB);
    PARITY("s_verb", levels + PB * PB, PB * PB);
    /* a block of 3 videos x 2 captions: the same pairs' scores */
    float part[3 * 2];
    CHECK_OK(vtr_hgr_score_block(&m, part, NULL, global + PE, verb + PT * PE, noun + PT * PE,
                                 f.frame_lengths + 1, 3, PT, sent + 2 * PE, verbs + 2 * NV * PE,
                                 nouns + 2 * NN * PE, n_verbs + 2, n_nouns + 2, 2, &err));
    for (int v = 0; v < 3; v++)
        for (int c = 0; c < 2; c++)
            CHECK(fabsf(part[v * 2 + c] - fused[(v + 1) * PB + c + 2]) <= 1e-6f);
#undef PARITY

    /* one Adam step (lr 1e-2) from these gradients: 1e-5 of each tensor's scale (measured:
     * 5.2e-7 at most), the elements of near-zero gradient within 2 lr */
    vtr_optimizer opt;
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAM);
    snprintf(name, sizeof name, "hgr/%sgrads", prefix);
    float *ref_grad = nn_fixture_floats(name, m.params.n_trainable);
    size_t nbytes = sizeof(float) * m.params.n_trainable;
    float *before = malloc(nbytes);
    CHECK(before != NULL);
    memcpy(before, m.params.data, nbytes);
    CHECK_OK(vtr_optimizer_init(&opt, &m.params, &hp, &err));
    vtr_optimizer_step(&opt, &m.params, 1e-2);
    snprintf(name, sizeof name, "hgr/%sparams_adam", prefix);
    parity_per_tensor(&m.params, m.params.data, name, "adam", 1e-5, 2e-2, ref_grad); /* 2 lr */
    vtr_optimizer_free(&opt);
    /* the same step from the reference's gradients: Adam alone, to 1e-6 and within 1e-7
     * where the gradient is noise (measured: the same bytes as torch.optim.Adam's) */
    memcpy(m.params.data, before, nbytes);
    memcpy(m.params.grad, ref_grad, nbytes);
    CHECK_OK(vtr_optimizer_init(&opt, &m.params, &hp, &err));
    vtr_optimizer_step(&opt, &m.params, 1e-2);
    parity_per_tensor(&m.params, m.params.data, name, "adam-ref", 1e-6, 1e-7, NULL);
    vtr_optimizer_free(&opt);
    free(before), free(ref_grad);
    free_batch(&f);
    vtr_hgr_model_free(&m);
}

TEST(parity_hgr_attention_pooling)
{
    parity(VTR_HGR_POOL_ATTENTION, "hgr_");
}

TEST(parity_hgr_infinity_gpo)
{
    parity(VTR_HGR_POOL_GPO, "hgrinf_");
}

/* ---- gradients of the whole loss ---- */

static float step_loss(vtr_hgr_model *m, const vtr_hgr_batch *batch)
{
    vtr_error err;
    float loss;
    CHECK_OK(vtr_hgr_train_step(m, batch, VTR_HINGE_HARDEST_NEGATIVE, 3, 7, &loss, &err));
    return loss;
}

/* Central difference of the loss in element x[k] with step h. */
static double numeric_at(vtr_hgr_model *m, const vtr_hgr_batch *batch, float *x, size_t k, float h)
{
    float x0 = x[k];
    x[k] = x0 + h;
    double up = step_loss(m, batch);
    x[k] = x0 - h;
    double down = step_loss(m, batch);
    x[k] = x0;
    return (up - down) / (2.0 * (double)h);
}

/* Every parameter tensor, 8 of its elements spread over it, against central differences of
 * the whole loss, with the training mode's dropout at fixed (seed, step): the backward must
 * redraw the forward's masks. The loss is piecewise smooth (the hardest negative, the
 * hinge, the span max, the phrase attention's clamp at 0, GPO's sort): an element whose
 * differences at two steps (1e-2, 2.5e-3) disagree by more than 10% sits near a kink and is
 * skipped (counted). The float32 loss rounds by ~3e-8, ~6e-6 of noise at the small step,
 * hence the floor of 1e-3 in the error |a - n| / (|a| + |n| + 1e-3). Returns the largest
 * error; *skipped gets the kinks. */
static double gradcheck_model(vtr_hgr_global_pool pool, float dropout, int *skipped, int *checked)
{
    vtr_error err;
    vtr_hgr_config cfg = small_config(pool, dropout);
    vtr_hgr_model m;
    CHECK_OK(vtr_hgr_model_init(&m, &cfg, PB, PT, PL, &err));
    char name[96];
    snprintf(name, sizeof name, "hgr/%sparams", pool == VTR_HGR_POOL_GPO ? "hgrinf_" : "hgr_");
    float *params = nn_fixture_floats(name, m.params.n_trainable);
    memcpy(m.params.data, params, sizeof(float) * m.params.n_trainable);
    free(params);
    fixture_batch f;
    load_batch(&f);
    size_t n = m.params.n_trainable;
    float *analytic = nn_alloc_floats(n);
    vtr_param_set_zero_grad(&m.params);
    step_loss(&m, &f.batch);
    memcpy(analytic, m.params.grad, sizeof(float) * n);
    double worst = 0.0;
    *skipped = *checked = 0;
    for (size_t i = 0; i < m.params.count; i++) {
        const vtr_param_entry *e = &m.params.entries[i];
        float *x = m.params.data + e->offset;
        size_t count = e->numel < 8 ? e->numel : 8;
        for (size_t j = 0; j < count; j++) {
            size_t k = j * e->numel / count;
            double coarse = numeric_at(&m, &f.batch, x, k, 1e-2f);
            double fine = numeric_at(&m, &f.batch, x, k, 2.5e-3f);
            if (fabs(coarse - fine) > 0.1 * (fabs(coarse) + fabs(fine)) + 2e-5) {
                (*skipped)++;
                continue;
            }
            double a = analytic[e->offset + k];
            double error = fabs(a - fine) / (fabs(a) + fabs(fine) + 1e-3);
            CHECK_MSG(error <= GRADCHECK_TOL, "gradcheck %s[%zu]: analytic %.6g numeric %.6g",
                      e->name, k, a, fine);
            worst = fmax(worst, error);
            (*checked)++;
        }
    }
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    gradcheck %s dropout %.1f: %d elements, worst error %.2e, %d skipped at "
               "kinks\n",
               pool == VTR_HGR_POOL_GPO ? "hgr-inf" : "hgr", (double)dropout, *checked, worst,
               *skipped);
    free(analytic);
    free_batch(&f);
    vtr_hgr_model_free(&m);
    return worst;
}

TEST(hgr_gradients_match_finite_differences_with_dropout)
{
    int skipped, checked;
    gradcheck_model(VTR_HGR_POOL_ATTENTION, 0.2f, &skipped, &checked);
    CHECK_MSG(skipped * 4 <= checked, "%d of %d elements at kinks", skipped, checked + skipped);
}

TEST(hgr_infinity_gradients_match_finite_differences_with_dropout)
{
    int skipped, checked;
    gradcheck_model(VTR_HGR_POOL_GPO, 0.2f, &skipped, &checked);
    CHECK_MSG(skipped * 4 <= checked, "%d of %d elements at kinks", skipped, checked + skipped);
}

TEST(hgr_dropout_draws_from_seed_and_step)
{
    /* training-mode dropout: the same (seed, step) gives identical bytes, another step
     * another loss; the encoders use none (two encodes agree with a dropout-free model) */
    vtr_error err;
    vtr_hgr_config cfg = small_config(VTR_HGR_POOL_ATTENTION, 0.2f);
    vtr_hgr_model a, b;
    CHECK_OK(vtr_hgr_model_init(&a, &cfg, PB, PT, PL, &err));
    CHECK_OK(vtr_hgr_model_init(&b, &cfg, PB, PT, PL, &err));
    vtr_hgr_init_params(&a, 5);
    vtr_hgr_init_params(&b, 5);
    fixture_batch f;
    load_batch(&f);
    float la, lb, lc;
    CHECK_OK(vtr_hgr_train_step(&a, &f.batch, VTR_HINGE_HARDEST_NEGATIVE, 9, 2, &la, &err));
    CHECK_OK(vtr_hgr_train_step(&b, &f.batch, VTR_HINGE_HARDEST_NEGATIVE, 9, 2, &lb, &err));
    CHECK(memcmp(&la, &lb, sizeof la) == 0);
    CHECK(memcmp(a.params.grad, b.params.grad, sizeof(float) * a.params.n_trainable) == 0);
    CHECK_OK(vtr_hgr_train_step(&b, &f.batch, VTR_HINGE_HARDEST_NEGATIVE, 9, 3, &lc, &err));
    CHECK(la != lc);
    vtr_hgr_config off = small_config(VTR_HGR_POOL_ATTENTION, 0.0f);
    vtr_hgr_model c;
    CHECK_OK(vtr_hgr_model_init(&c, &off, PB, PT, PL, &err));
    vtr_hgr_init_params(&c, 5);
    float g1[PB * PE], g2[PB * PE], v[PB * PT * PE], n[PB * PT * PE];
    CHECK_OK(vtr_hgr_encode_videos(&a, g1, v, n, f.frames, f.frame_lengths, PB, PT, &err));
    CHECK_OK(vtr_hgr_encode_videos(&c, g2, v, n, f.frames, f.frame_lengths, PB, PT, &err));
    CHECK(memcmp(g1, g2, sizeof g1) == 0);
    free_batch(&f);
    vtr_hgr_model_free(&a);
    vtr_hgr_model_free(&b);
    vtr_hgr_model_free(&c);
}

TEST(hgr_all_negatives_take_the_hinge_over_every_negative)
{
    /* the same forward; the loss and the fused score's gradient are the hinge's over all
     * negatives (match/hinge_loss.h), the rest of the backward is the one checked above */
    vtr_error err;
    vtr_hgr_config cfg = small_config(VTR_HGR_POOL_GPO, 0.2f);
    vtr_hgr_model m;
    CHECK_OK(vtr_hgr_model_init(&m, &cfg, PB, PT, PL, &err));
    vtr_hgr_init_params(&m, 5);
    fixture_batch f;
    load_batch(&f);
    float hardest, all, fused[PB * PB], want[PB * PB] = {0};
    CHECK_OK(vtr_hgr_train_step(&m, &f.batch, VTR_HINGE_HARDEST_NEGATIVE, 9, 2, &hardest, &err));
    memcpy(fused, m.s_fused, sizeof fused);
    vtr_param_set_zero_grad(&m.params);
    CHECK_OK(vtr_hgr_train_step(&m, &f.batch, VTR_HINGE_ALL_NEGATIVES, 9, 2, &all, &err));
    CHECK(memcmp(fused, m.s_fused, sizeof fused) == 0);
    CHECK(all ==
          vtr_hinge_loss_forward(fused, PB, cfg.margin, VTR_HINGE_ALL_NEGATIVES, VTR_REDUCE_MEAN));
    CHECK(all > hardest);
    vtr_hinge_loss_backward(want, 1.0f, fused, PB, cfg.margin, VTR_HINGE_ALL_NEGATIVES,
                            VTR_REDUCE_MEAN);
    CHECK(memcmp(want, m.ds_fused, sizeof want) == 0);
    CHECK(vtr_grad_norm(&m.params) > 0.0f);
    CHECK_FAILS(vtr_hgr_train_step(&m, &f.batch, (vtr_hinge_negatives)5, 9, 2, &all, &err),
                VTR_ERR_INVALID, "negatives = 5");
    free_batch(&f);
    vtr_hgr_model_free(&m);
}

/* ---- initialization ---- */

/* The largest |(x xᵀ - I)_ij| over the rows of x (rows, cols) when wide, or |(xᵀ x - I)_ij|
 * over its columns when tall, in double. */
static double orthonormality_error(const float *x, int rows, int cols)
{
    int tall = rows >= cols, n = tall ? cols : rows, k = tall ? rows : cols;
    double worst = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) {
            double dot = 0.0;
            for (int t = 0; t < k; t++)
                dot += tall ? (double)x[(size_t)t * cols + i] * x[(size_t)t * cols + j]
                            : (double)x[(size_t)i * cols + t] * x[(size_t)j * cols + t];
            worst = fmax(worst, fabs(dot - (i == j ? 1.0 : 0.0)));
        }
    return worst;
}

TEST(model_fill_orthogonal_gives_orthonormal_rows_or_columns)
{
    /* nn.init.orthogonal_'s shapes: tall (HGR's (3E, W) at the released sizes), square,
     * wide; the same stream gives the same bytes */
    static const int shapes[][2] = {{3072, 300}, {7, 7}, {5, 12}};
    for (int s = 0; s < 3; s++) {
        int rows = shapes[s][0], cols = shapes[s][1];
        size_t n = (size_t)rows * cols;
        float *x = nn_alloc_floats(n), *y = nn_alloc_floats(n);
        double *scratch = malloc(sizeof(double) * vtr_model_orthogonal_scratch_size(rows, cols));
        CHECK(scratch != NULL);
        vtr_rng rng;
        vtr_rng_init(&rng, 21, 4);
        vtr_model_fill_orthogonal(x, rows, cols, &rng, scratch);
        double e = orthonormality_error(x, rows, cols);
        CHECK_MSG(e <= 1e-6, "(%d, %d): orthonormality error %g", rows, cols, e);
        vtr_rng_init(&rng, 21, 4);
        vtr_model_fill_orthogonal(y, rows, cols, &rng, scratch);
        CHECK(memcmp(x, y, sizeof(float) * n) == 0);
        free(x), free(y), free(scratch);
    }
}

TEST(hgr_init_follows_the_reference)
{
    /* the text BiGRU's weights orthogonal ((3E, in): orthonormal columns), its biases 0;
     * GPO's GRU (HGR∞) keeps PyTorch's default uniform(±1/sqrt(hidden)); another seed
     * another orthogonal matrix (the same seed's same bytes: hgr_training_is_deterministic) */
    vtr_error err;
    for (int g = 0; g < 2; g++) {
        vtr_hgr_config cfg = small_config(g ? VTR_HGR_POOL_GPO : VTR_HGR_POOL_ATTENTION, 0.0f);
        vtr_hgr_model m;
        CHECK_OK(vtr_hgr_model_init(&m, &cfg, PB, PT, PL, &err));
        vtr_hgr_init_params(&m, 31);
        int weights = 0, biases = 0;
        for (size_t i = 0; i < m.params.count; i++) {
            const vtr_param_entry *e = &m.params.entries[i];
            const float *x = m.params.data + e->offset;
            if (strncmp(e->name, "text_encoder.rnn.weight_", 24) == 0) {
                CHECK_EQ_INT((int)e->shape[0], 3 * PE);
                double err_o = orthonormality_error(x, (int)e->shape[0], (int)e->shape[1]);
                CHECK_MSG(err_o <= 1e-6, "%s: orthonormality error %g", e->name, err_o);
                weights++;
            } else if (strncmp(e->name, "text_encoder.rnn.bias_", 22) == 0) {
                for (size_t k = 0; k < e->numel; k++)
                    CHECK(x[k] == 0.0f);
                biases++;
            } else if (strstr(e->name, "gpool.gru.")) {
                float bound = 1.0f / sqrtf((float)cfg.gpo_hidden);
                for (size_t k = 0; k < e->numel; k++)
                    CHECK(fabsf(x[k]) <= bound);
                if (e->ndim == 2)
                    CHECK(orthonormality_error(x, (int)e->shape[0], (int)e->shape[1]) > 1e-2);
            }
        }
        CHECK_EQ_INT(weights, 4);
        CHECK_EQ_INT(biases, 4);
        const float *w = vtr_param_data(&m.params, "text_encoder.rnn.weight_hh_l0");
        float before[3 * PE * PE];
        memcpy(before, w, sizeof before);
        vtr_hgr_init_params(&m, 32);
        CHECK(memcmp(before, w, sizeof before) != 0);
        vtr_hgr_model_free(&m);
    }
}

/* ---- determinism, sampling, errors ---- */

static void adam_steps(vtr_hgr_model *m, const vtr_hgr_batch *batch, int steps, double lr,
                       float *first, float *last)
{
    vtr_error err;
    vtr_optimizer opt;
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAM);
    CHECK_OK(vtr_optimizer_init(&opt, &m->params, &hp, &err));
    for (int i = 0; i < steps; i++) {
        float loss;
        vtr_param_set_zero_grad(&m->params);
        CHECK_OK(
            vtr_hgr_train_step(m, batch, VTR_HINGE_HARDEST_NEGATIVE, 42, (uint64_t)i, &loss, &err));
        CHECK(isfinite(loss));
        if (i == 0 && first)
            *first = loss;
        if (last)
            *last = loss;
        vtr_optimizer_step(&opt, &m->params, lr);
    }
    vtr_optimizer_free(&opt);
}

TEST(hgr_training_is_deterministic)
{
    vtr_error err;
    for (int g = 0; g < 2; g++) {
        vtr_hgr_config cfg = small_config(g ? VTR_HGR_POOL_GPO : VTR_HGR_POOL_ATTENTION, 0.2f);
        vtr_hgr_model a, b;
        CHECK_OK(vtr_hgr_model_init(&a, &cfg, PB, PT, PL, &err));
        CHECK_OK(vtr_hgr_model_init(&b, &cfg, PB, PT, PL, &err));
        vtr_hgr_init_params(&a, 77);
        vtr_hgr_init_params(&b, 77);
        CHECK(memcmp(a.params.data, b.params.data, sizeof(float) * a.params.n_data) == 0);
        fixture_batch f;
        load_batch(&f);
        adam_steps(&a, &f.batch, 3, 1e-2, NULL, NULL);
        adam_steps(&b, &f.batch, 3, 1e-2, NULL, NULL);
        CHECK(memcmp(a.params.data, b.params.data, sizeof(float) * a.params.n_data) == 0);
        CHECK(memcmp(a.params.grad, b.params.grad, sizeof(float) * a.params.n_trainable) == 0);
        vtr_hgr_init_params(&b, 78);
        CHECK(memcmp(a.params.data, b.params.data, sizeof(float) * a.params.n_data) != 0);
        free_batch(&f);
        vtr_hgr_model_free(&a);
        vtr_hgr_model_free(&b);
    }
}

TEST(hgr_batches_smaller_than_the_arena_give_the_same_step)
{
    /* the arena is sized for max sizes; a smaller batch uses the call's sizes throughout */
    vtr_error err;
    vtr_hgr_config cfg = small_config(VTR_HGR_POOL_GPO, 0.2f);
    vtr_hgr_model a, b;
    CHECK_OK(vtr_hgr_model_init(&a, &cfg, PB, PT, PL, &err));
    CHECK_OK(vtr_hgr_model_init(&b, &cfg, PB + 3, PT + 4, PL + 6, &err));
    vtr_hgr_init_params(&a, 12);
    vtr_hgr_init_params(&b, 12);
    fixture_batch f;
    load_batch(&f);
    float la, lb;
    CHECK_OK(vtr_hgr_train_step(&a, &f.batch, VTR_HINGE_HARDEST_NEGATIVE, 4, 1, &la, &err));
    CHECK_OK(vtr_hgr_train_step(&b, &f.batch, VTR_HINGE_HARDEST_NEGATIVE, 4, 1, &lb, &err));
    CHECK(fabsf(la - lb) <= 1e-6f * fabsf(la));
    float scale = 0.0f, diff = 0.0f;
    for (size_t i = 0; i < a.params.n_trainable; i++) {
        scale = fmaxf(scale, fabsf(a.params.grad[i]));
        diff = fmaxf(diff, fabsf(a.params.grad[i] - b.params.grad[i]));
    }
    CHECK_MSG(diff <= 1e-5f * scale, "gradients differ by %g (largest %g)", diff, scale);
    free_batch(&f);
    vtr_hgr_model_free(&a);
    vtr_hgr_model_free(&b);
}

TEST(hgr_train_step_flops_count_the_products)
{
    /* HGR (attention pooling), F 6, E 4 (GCN F 2), W 3, 4 verbs, 6 nouns (11 nodes); 2 pairs,
     * frame lengths (3, 2) of T 3, caption lengths (4, 1) of L 4. Caption 0: verbs at words
     * 0 and 1, nouns at 1, 2, 3, edges root -> each verb, verb 0 <-> nouns 0 and 1, verb 1
     * <-> noun 2 (rel[target][source]); caption 1: two nouns at word 0, no verb, no edge. */
    vtr_error err;
    vtr_hgr_config cfg = vtr_hgr_config_default(10, VTR_HGR_POOL_ATTENTION);
    cfg.feature_dim = 6;
    cfg.embed_size = 4;
    cfg.word_dim = 3;
    vtr_hgr_model m;
    CHECK_OK(vtr_hgr_model_init(&m, &cfg, 2, 3, 4, &err));
    int fl[2] = {3, 2}, cl[2] = {4, 1};
    uint8_t verb_masks[2 * NV * 4] = {0}, noun_masks[2 * NN * 4] = {0};
    float rel[2 * NODES * NODES] = {0};
    verb_masks[0 * 4 + 0] = verb_masks[1 * 4 + 1] = 1;
    noun_masks[0 * 4 + 1] = noun_masks[1 * 4 + 2] = noun_masks[2 * 4 + 3] = 1;
    noun_masks[(NN + 0) * 4 + 0] = noun_masks[(NN + 1) * 4 + 0] = 1;
    static const int edges[][2] = {{1, 0}, {2, 0}, {1, 5}, {5, 1}, {1, 6}, {6, 1}, {2, 7}, {7, 2}};
    for (int e = 0; e < 8; e++)
        rel[edges[e][0] * NODES + edges[e][1]] = 1.0f;
    vtr_hgr_batch b = {.B = 2, .T = 3, .frame_lengths = fl};
    b.captions.B = 2;
    b.captions.L = 4;
    b.captions.lengths = cl;
    b.captions.verb_masks = verb_masks;
    b.captions.noun_masks = noun_masks;
    b.captions.rel_edges = rel;
    double levels = 3 * (2 * 5 * 6 * 4) * 2; /* 5 real frames: forward, dW; no dx */
    /* BiGRU per direction, gates 12: W_ih over 5 words (forward, dW, dx), W_hh over the 3
     * steps after the first (forward, dh, dW_hh) */
    double rnn = 2 * (2 * 5 * 3 * 12 * 3 + 2 * 3 * 4 * 12 * 3);
    double gcn = 3 * (2 * 5 * 4 * 2)   /* query over the 5 attending nodes, 3 products */
                 + 3 * (2 * 6 * 4 * 2) /* key over the 6 attended nodes */
                 + 3 * (2 * 5 * 4 * 4) /* context over the attending nodes */
                 + 2 * 3 * (2 * 11 * 11 * 2 + 2 * 11 * 11 * 4); /* q kᵀ, a x; gradients */
    double cosine = 3 * 2 * 2 * 2 * 4;
    double phrases = 3 * 2 * 2 * 6 * 4   /* verbs: 2 valid x (2*3) x 4 */
                     + 3 * 2 * 5 * 6 * 4 /* nouns: 5 valid x (2*3) x 4 */
                     + 2 * (2 * 13 * 4); /* per video len^2 x 4, both levels */
    double want = levels + rnn + gcn + cosine + phrases;
    CHECK(want == 16360.0);
    double got = vtr_hgr_train_step_flops(&m, &b);
    CHECK_MSG(fabs(got - want) <= 1e-9 * want, "flops %.0f, expected %.0f", got, want);
    vtr_hgr_model_free(&m);
}

TEST(hgr_sample_frames_follows_numpy)
{
    /* np.round(np.linspace(0, n - 1, 20)).astype(int) */
    static const int n45[20] = {0,  2,  5,  7,  9,  12, 14, 16, 19, 21,
                                23, 25, 28, 30, 32, 35, 37, 39, 42, 44};
    static const int n21[20] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,
                                11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    int idx[20];
    CHECK_EQ_INT(vtr_hgr_sample_frames(idx, 45, 20), 20);
    for (int i = 0; i < 20; i++)
        CHECK_EQ_INT(idx[i], n45[i]);
    CHECK_EQ_INT(vtr_hgr_sample_frames(idx, 21, 20), 20);
    for (int i = 0; i < 20; i++)
        CHECK_EQ_INT(idx[i], n21[i]);
    CHECK_EQ_INT(vtr_hgr_sample_frames(idx, 7, 20), 7);
    for (int i = 0; i < 7; i++)
        CHECK_EQ_INT(idx[i], i);
    CHECK_EQ_INT(vtr_hgr_sample_frames(idx, 20, 20), 20);
    CHECK_EQ_INT(idx[19], 19);
}

TEST(hgr_config_and_argument_errors)
{
    vtr_error err;
    vtr_hgr_config cfg = small_config(VTR_HGR_POOL_ATTENTION, 0.0f);
    vtr_hgr_model m;
    cfg.embed_size = 15;
    CHECK_FAILS(vtr_hgr_model_init(&m, &cfg, PB, PT, PL, &err), VTR_ERR_INVALID, "odd");
    cfg = small_config(VTR_HGR_POOL_ATTENTION, 0.0f);
    cfg.gcn_dropout = 1.0f;
    CHECK_FAILS(vtr_hgr_model_init(&m, &cfg, PB, PT, PL, &err), VTR_ERR_INVALID, "gcn_dropout");
    cfg = small_config(VTR_HGR_POOL_ATTENTION, 0.0f);
    CHECK_OK(vtr_hgr_model_init(&m, &cfg, PB, PT, PL, &err));
    fixture_batch f;
    load_batch(&f);
    float loss;
    vtr_hgr_batch bad = f.batch;
    bad.T = PT + 1;
    CHECK_FAILS(vtr_hgr_train_step(&m, &bad, VTR_HINGE_HARDEST_NEGATIVE, 0, 0, &loss, &err),
                VTR_ERR_INVALID, "frames");
    bad = f.batch;
    bad.captions.B = 3;
    CHECK_FAILS(vtr_hgr_train_step(&m, &bad, VTR_HINGE_HARDEST_NEGATIVE, 0, 0, &loss, &err),
                VTR_ERR_INVALID, "captions");
    f.node_roles[3] = 16;
    CHECK_FAILS(vtr_hgr_train_step(&m, &f.batch, VTR_HINGE_HARDEST_NEGATIVE, 0, 0, &loss, &err),
                VTR_ERR_INVALID, "roles");
    f.node_roles[3] = 1;
    f.ids[2] = PV;
    CHECK_FAILS(vtr_hgr_train_step(&m, &f.batch, VTR_HINGE_HARDEST_NEGATIVE, 0, 0, &loss, &err),
                VTR_ERR_INVALID, "caption 0");
    free_batch(&f);
    vtr_hgr_model_free(&m);
}

/* vtr_hgr_score_all over 7 videos x 8 captions in blocks of 3: vtr_hgr_score_block's bytes
 * on every block, at their places in rows of ld > 8; an out that is NULL and the columns
 * past the captions untouched; bad lengths, phrase counts and sizes named. */
TEST(hgr_score_all_is_the_blocks_scores)
{
    enum { AV = 7, AC = 8, AB = 3, LD = AC + 2 };
    vtr_error err;
    vtr_hgr_config cfg = small_config(VTR_HGR_POOL_ATTENTION, 0.0f);
    vtr_hgr_model m;
    CHECK_OK(vtr_hgr_model_init(&m, &cfg, AB, PT, PL, &err));
    vtr_hgr_init_params(&m, 5);
    static float global[AV * PE], verb[AV * PT * PE], noun[AV * PT * PE];
    static float sent[AC * PE], verbs[AC * NV * PE], nouns[AC * NN * PE];
    int lengths[AV], nv[AC], nn[AC];
    vtr_rng rng;
    vtr_rng_init(&rng, 77, 0);
    for (int i = 0; i < AV; i++) {
        lengths[i] = 1 + (int)vtr_rng_below(&rng, PT);
        for (int k = 0; k < PE; k++)
            global[i * PE + k] = vtr_rng_normal(&rng);
        for (int k = 0; k < lengths[i] * PE; k++) { /* 0 past the length, as encoded */
            verb[i * PT * PE + k] = vtr_rng_normal(&rng);
            noun[i * PT * PE + k] = vtr_rng_normal(&rng);
        }
    }
    for (int j = 0; j < AC; j++) {
        nv[j] = (int)vtr_rng_below(&rng, NV + 1);
        nn[j] = (int)vtr_rng_below(&rng, NN + 1);
    }
    for (size_t k = 0; k < sizeof sent / sizeof *sent; k++)
        sent[k] = vtr_rng_normal(&rng);
    for (size_t k = 0; k < sizeof verbs / sizeof *verbs; k++)
        verbs[k] = vtr_rng_normal(&rng);
    for (size_t k = 0; k < sizeof nouns / sizeof *nouns; k++)
        nouns[k] = vtr_rng_normal(&rng);
    vtr_hgr_encoded_videos v = {global, verb, noun, lengths, AV, PT};
    vtr_hgr_encoded_captions c = {sent, verbs, nouns, nv, nn, AC};
    static float all[4][AV * LD];
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < AV * LD; i++)
            all[k][i] = -7.0f;
    float *const out[4] = {all[0], NULL, all[2], all[3]}; /* no global level */
    CHECK_OK(vtr_hgr_score_all(&m, &v, &c, out, LD, 0, &err));
    for (int v0 = 0; v0 < AV; v0 += AB)
        for (int c0 = 0; c0 < AC; c0 += AB) {
            int bv = AV - v0 < AB ? AV - v0 : AB, bc = AC - c0 < AB ? AC - c0 : AB;
            float fused[AB * AB], levels[3 * AB * AB];
            CHECK_OK(vtr_hgr_score_block(&m, fused, levels, global + v0 * PE, verb + v0 * PT * PE,
                                         noun + v0 * PT * PE, lengths + v0, bv, PT, sent + c0 * PE,
                                         verbs + c0 * NV * PE, nouns + c0 * NN * PE, nv + c0,
                                         nn + c0, bc, &err));
            for (int a = 0; a < bv; a++)
                for (int b = 0; b < bc; b++) {
                    size_t at = (size_t)(v0 + a) * LD + (size_t)(c0 + b), in = (size_t)a * bc + b;
                    CHECK(memcmp(&all[0][at], &fused[in], sizeof(float)) == 0);
                    CHECK(memcmp(&all[2][at], &levels[bv * bc + in], sizeof(float)) == 0);
                    CHECK(memcmp(&all[3][at], &levels[2 * bv * bc + in], sizeof(float)) == 0);
                }
        }
    for (int i = 0; i < AV * LD; i++) {
        CHECK(all[1][i] == -7.0f);
        if (i % LD >= AC)
            CHECK(all[0][i] == -7.0f && all[2][i] == -7.0f && all[3][i] == -7.0f);
    }
    CHECK_FAILS(vtr_hgr_score_all(&m, &v, &c, out, AC - 1, 0, &err), VTR_ERR_INVALID,
                "in rows of 7");
    nn[5] = NN + 1;
    CHECK_FAILS(vtr_hgr_score_all(&m, &v, &c, out, LD, 0, &err), VTR_ERR_INVALID, "caption 5");
    nn[5] = 0;
    lengths[4] = 0;
    CHECK_FAILS(vtr_hgr_score_all(&m, &v, &c, out, LD, 0, &err), VTR_ERR_INVALID, "item 4");
    vtr_hgr_model_free(&m);
}

/* On the GPU (tests/test_cuda_model.c runs it there): a missing GPU is one line saying what
 * to do; on the CPU the device calls change nothing or zero the gradients. */
TEST(hgr_model_on_cuda_without_a_gpu_says_what_to_do)
{
    vtr_error err;
    vtr_hgr_config cfg = small_config(VTR_HGR_POOL_GPO, 0.0f);
    vtr_hgr_model m;
    if (!vtr_cuda_available()) {
        CHECK_FAILS(vtr_hgr_model_init_on(&m, &cfg, VTR_DEVICE_CUDA, PB, PT, PL, &err),
                    VTR_ERR_DEVICE, "run on the CPU (--device cpu)");
        CHECK(m.arena == NULL && m.params.count == 0);
    }
    CHECK_OK(vtr_hgr_model_init_on(&m, &cfg, VTR_DEVICE_CPU, PB, PT, PL, &err));
    CHECK(m.device == VTR_DEVICE_CPU && m.dev_data == NULL && m.stage == NULL);
    vtr_hgr_init_params(&m, 4);
    float first = m.params.data[0];
    CHECK_OK(vtr_hgr_params_to_device(&m, &err));
    m.params.grad[3] = 1.0f;
    CHECK_OK(vtr_hgr_params_to_host(&m, true, &err));
    CHECK(m.params.data[0] == first && m.params.grad[3] == 1.0f);
    CHECK_OK(vtr_hgr_zero_grad(&m, &err));
    CHECK(m.params.grad[3] == 0.0f);
    vtr_hgr_model_free(&m);
}

/* ---- learning on a tiny synthetic task ---- */

enum { SN = 16, ST = 6, SF = 32, SL = 5, SV = 24 };

/* Video i shows action i % 4 on object i / 4: each frame is the action's and the object's
 * feature vectors plus noise. Caption i is "the <object> <verb> <filler> <filler>" with the
 * verb's and the object's spans marked and the edges root -> verb <-> object. */
typedef struct synth {
    float frames[SN * ST * SF], rel[SN * NODES * NODES];
    int flen[SN], ids[SN * SL], clen[SN], roles[SN * (NV + NN)];
    uint8_t vmask[SN * NV * SL], nmask[SN * NN * SL];
    vtr_hgr_batch batch;
} synth;

static void make_synth(synth *s)
{
    vtr_rng rng;
    vtr_rng_init(&rng, 2024, 0);
    float action[4][SF], object[4][SF];
    for (int k = 0; k < 4; k++)
        for (int d = 0; d < SF; d++) {
            action[k][d] = vtr_rng_normal(&rng);
            object[k][d] = vtr_rng_normal(&rng);
        }
    memset(s, 0, sizeof *s);
    for (int i = 0; i < SN; i++) {
        int a = i % 4, o = i / 4;
        s->flen[i] = 3 + i % 4;
        for (int t = 0; t < s->flen[i]; t++)
            for (int d = 0; d < SF; d++)
                s->frames[(i * ST + t) * SF + d] =
                    action[a][d] + object[o][d] + 0.5f * vtr_rng_normal(&rng);
        int *w = s->ids + i * SL;
        w[0] = 3, w[1] = 8 + o, w[2] = 4 + a, w[3] = 12 + (int)vtr_rng_below(&rng, 12);
        w[4] = 12 + (int)vtr_rng_below(&rng, 12);
        s->clen[i] = 4 + i % 2;
        s->vmask[(i * NV) * SL + 2] = 1;
        s->nmask[(i * NN) * SL + 1] = 1;
        s->roles[i * (NV + NN)] = 1;
        s->roles[i * (NV + NN) + NV] = 2;
        float *r = s->rel + i * NODES * NODES;
        r[1 * NODES + 0] = 1.0f;        /* root -> verb */
        r[1 * NODES + 1 + NV] = 1.0f;   /* object -> verb */
        r[(1 + NV) * NODES + 1] = 1.0f; /* verb -> object */
    }
    s->batch = (vtr_hgr_batch){.B = SN,
                               .T = ST,
                               .frames = s->frames,
                               .frame_lengths = s->flen,
                               .captions = {.B = SN,
                                            .L = SL,
                                            .ids = s->ids,
                                            .lengths = s->clen,
                                            .verb_masks = s->vmask,
                                            .noun_masks = s->nmask,
                                            .node_roles = s->roles,
                                            .rel_edges = s->rel}};
}

/* R@1 (percent) of video -> caption retrieval on the fused score, through the encoders
 * and the block scorer */
static double recall_at_1(vtr_hgr_model *m, const synth *s)
{
    vtr_error err;
    enum { E = 16 };
    float global[SN * E], verb[SN * ST * E], noun[SN * ST * E];
    float sent[SN * E], verbs[SN * NV * E], nouns[SN * NN * E], fused[SN * SN];
    int nv[SN], nn[SN];
    CHECK_OK(vtr_hgr_encode_videos(m, global, verb, noun, s->frames, s->flen, SN, ST, &err));
    CHECK_OK(vtr_hgr_encode_captions(m, sent, verbs, nouns, nv, nn, &s->batch.captions, &err));
    CHECK_OK(vtr_hgr_score_block(m, fused, NULL, global, verb, noun, s->flen, SN, ST, sent, verbs,
                                 nouns, nv, nn, SN, &err));
    int hits = 0;
    for (int v = 0; v < SN; v++) {
        int best = 0;
        for (int c = 1; c < SN; c++)
            if (fused[v * SN + c] > fused[v * SN + best])
                best = c;
        hits += best == v;
    }
    return 100.0 * hits / SN;
}

static void learn(vtr_hgr_global_pool pool)
{
    vtr_error err;
    vtr_hgr_config cfg = vtr_hgr_config_default(SV, pool);
    cfg.feature_dim = SF;
    cfg.embed_size = 16;
    cfg.word_dim = 8;
    cfg.gpo_pe = 8;
    cfg.gpo_hidden = 8;
    synth *s = malloc(sizeof *s);
    CHECK(s);
    make_synth(s);
    vtr_hgr_model m;
    CHECK_OK(vtr_hgr_model_init(&m, &cfg, SN, ST, SL, &err));
    vtr_hgr_init_params(&m, 3);
    double r0 = recall_at_1(&m, s);
    float first = 0, last = 0;
    adam_steps(&m, &s->batch, 150, 3e-3, &first, &last);
    double r1 = recall_at_1(&m, s);
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    learn %s: loss %.4f -> %.4f, R@1 %.1f%% -> %.1f%% (chance %.1f%%)\n",
               pool == VTR_HGR_POOL_GPO ? "hgr-inf" : "hgr", (double)first, (double)last, r0, r1,
               100.0 / SN);
    CHECK_MSG(last < 0.5f * first, "loss %g -> %g", (double)first, (double)last);
    CHECK_MSG(r1 >= 50.0, "R@1 %.1f%% after training", r1);
    vtr_hgr_model_free(&m);
    free(s);
}

TEST(hgr_learns_a_synthetic_task)
{
    learn(VTR_HGR_POOL_ATTENTION);
}

TEST(hgr_infinity_learns_a_synthetic_task)
{
    learn(VTR_HGR_POOL_GPO);
}
