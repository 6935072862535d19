/* Parity with PyTorch: outputs and gradients against tests/fixtures/nn/, written by
 * tests/fixtures/make_nn_fixtures.py. Each tensor must agree to relative error < 1e-4,
 * max|vtr - torch| / max(max|torch|, 1e-6) over the tensor (nn_parity_check). Run with
 * VTR_TEST_VERBOSE=1 to print every error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/adpool.h"
#include "aggregate/gpo.h"
#include "check.h"
#include "gradcheck.h"
#include "lib/activation.h"
#include "lib/gru.h"
#include "lib/norm.h"
#include "lib/params.h"
#include "match/adopt_loss.h"
#include "match/hinge_loss.h"
#include "match/vse_model.h"

static void gru_parity(const char *tag, vtr_gru_merge merge)
{
    enum { B = 3, T = 5, D = 4, H = 3 };
    int OH = merge == VTR_GRU_CONCAT ? 2 * H : H;
    size_t np = vtr_gru_param_count(D, H, 2), no = (size_t)B * T * OH;
    float *x = nn_fixture_floats("gru_x", B * T * D);
    int *lengths = nn_fixture_ints("gru_lengths", B);
    float *params = nn_fixture_floats("gru_params", np);
    char name[64];
    snprintf(name, sizeof name, "gru_%s_dout", tag);
    float *dout = nn_fixture_floats(name, no);
    float *out = nn_alloc_floats(no), *dx = nn_alloc_floats(B * T * D), *dp = nn_alloc_floats(np);
    void *ws = malloc(vtr_gru_workspace_size(B, T, D, H, 2));
    void *scratch = malloc(vtr_gru_scratch_size(B, T, D, H, 2));
    vtr_gru_forward(out, ws, x, lengths, params, B, T, D, H, 2, merge);
    vtr_gru_backward(dx, dp, scratch, dout, x, lengths, params, ws, B, T, D, H, 2, merge);
    snprintf(name, sizeof name, "gru_%s_out", tag);
    nn_parity_check(name, out, no);
    snprintf(name, sizeof name, "gru_%s_dx", tag);
    nn_parity_check(name, dx, B * T * D);
    snprintf(name, sizeof name, "gru_%s_dparams", tag);
    nn_parity_check(name, dp, np);
    free(x), free(lengths), free(params), free(dout), free(out), free(dx), free(dp), free(ws);
    free(scratch);
}

TEST(parity_gru_bidirectional_average)
{
    gru_parity("avg", VTR_GRU_AVERAGE);
}

TEST(parity_gru_bidirectional_concat)
{
    gru_parity("cat", VTR_GRU_CONCAT);
}

TEST(parity_gpo_reference_sizes)
{
    enum { B = 3, T = 5, D = 8, P = VTR_GPO_D_PE, H = VTR_GPO_HIDDEN };
    size_t np = vtr_gpo_param_count(P, H);
    float *x = nn_fixture_floats("gpo_x", B * T * D);
    int *lengths = nn_fixture_ints("gpo_lengths", B);
    float *params = nn_fixture_floats("gpo_params", np);
    float *dout = nn_fixture_floats("gpo_dout", B * D);
    float *out = nn_alloc_floats(B * D), *w = nn_alloc_floats(B * T),
          *dx = nn_alloc_floats(B * T * D);
    float *dp = nn_alloc_floats(np);
    void *ws = malloc(vtr_gpo_workspace_size(B, T, D, P, H));
    void *scratch = malloc(vtr_gpo_scratch_size(B, T, D, P, H));
    vtr_gpo_forward(out, w, ws, x, lengths, params, B, T, D, P, H);
    vtr_gpo_backward(dx, dp, scratch, dout, x, w, lengths, params, ws, B, T, D, P, H);
    nn_parity_check("gpo_out", out, B * D);
    nn_parity_check("gpo_weights", w, B * T);
    nn_parity_check("gpo_dx", dx, B * T * D);
    nn_parity_check("gpo_dparams", dp, np);
    free(x), free(lengths), free(params), free(dout), free(out), free(w), free(dx), free(dp);
    free(ws), free(scratch);
}

TEST(parity_adpool)
{
    enum { B = 3, T = 5, D = 6 };
    size_t np = vtr_adpool_param_count(D);
    float *x = nn_fixture_floats("adpool_x", B * T * D);
    int *lengths = nn_fixture_ints("adpool_lengths", B);
    float *params = nn_fixture_floats("adpool_params", np);
    float *dout = nn_fixture_floats("adpool_dout", B * D);
    float *out = nn_alloc_floats(B * D), *theta = nn_alloc_floats(B * T);
    float *omega = nn_alloc_floats(B * 2), *dx = nn_alloc_floats(B * T * D);
    float *dp = nn_alloc_floats(np);
    void *ws = malloc(vtr_adpool_workspace_size(B, T, D));
    void *scratch = malloc(vtr_adpool_scratch_size(B, T, D));
    vtr_adpool_forward(out, theta, omega, ws, x, lengths, params, B, T, D);
    vtr_adpool_backward(dx, dp, scratch, dout, x, theta, omega, lengths, params, ws, B, T, D);
    nn_parity_check("adpool_out", out, B * D);
    nn_parity_check("adpool_theta", theta, B * T);
    nn_parity_check("adpool_omega", omega, B * 2);
    nn_parity_check("adpool_dx", dx, B * T * D);
    nn_parity_check("adpool_dparams", dp, np);
    free(x), free(lengths), free(params), free(dout), free(out), free(theta), free(omega);
    free(dx), free(dp), free(ws), free(scratch);
}

TEST(parity_adopt_equation_6_and_fixed_k)
{
    enum { B = 8 };
    float *S = nn_fixture_floats("adopt_S", B * B);
    int *K = nn_fixture_ints("adopt_K", 1);
    CHECK_EQ_INT(vtr_adopt_negatives(S, B, NULL, NULL), K[0]);
    CHECK(K[0] > 1 && K[0] < B - 1); /* the fixture exercises a K between the bounds */
    static const struct {
        const char *tag;
        int k; /* 0: equation 6 */
        bool pos;
        vtr_reduction red;
    } cases[] = {
        {"eq6_pos_mean", 0, true, VTR_REDUCE_MEAN},
        {"k1_neg_sum", 1, false, VTR_REDUCE_SUM},
        {"all_pos_sum", B - 1, true, VTR_REDUCE_SUM},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int k = cases[i].k ? cases[i].k : K[0];
        char name[64];
        float dS[B * B] = {0};
        float loss = vtr_adopt_loss_forward(S, B, k, VTR_ADOPT_TEMPERATURE, cases[i].pos,
                                            cases[i].red);
        vtr_adopt_loss_backward(dS, 1.0f, S, B, k, VTR_ADOPT_TEMPERATURE, cases[i].pos,
                                cases[i].red);
        snprintf(name, sizeof name, "adopt_%s_loss", cases[i].tag);
        nn_parity_check(name, &loss, 1);
        snprintf(name, sizeof name, "adopt_%s_dS", cases[i].tag);
        nn_parity_check(name, dS, B * B);
    }
    free(S), free(K);
}

TEST(parity_batchnorm_training_step)
{
    enum { N = 15, C = 6 };
    float *x = nn_fixture_floats("bn_x", N * C), *w = nn_fixture_floats("bn_weight", C);
    float *b = nn_fixture_floats("bn_bias", C), *dout = nn_fixture_floats("bn_dout", N * C);
    float *rm = nn_fixture_floats("bn_running_mean0", C);
    float *rv = nn_fixture_floats("bn_running_var0", C);
    float out[N * C], mean[C], rstd[C], dx[N * C] = {0}, dw[C] = {0}, db[C] = {0};
    vtr_batchnorm_forward(out, mean, rstd, rm, rv, x, w, b, N, C, VTR_BATCHNORM_MOMENTUM,
                          VTR_BATCHNORM_EPS);
    vtr_batchnorm_backward(dx, dw, db, dout, x, w, mean, rstd, N, C);
    nn_parity_check("bn_out", out, N * C);
    nn_parity_check("bn_running_mean", rm, C);
    nn_parity_check("bn_running_var", rv, C);
    nn_parity_check("bn_dx", dx, N * C);
    nn_parity_check("bn_dweight", dw, C);
    nn_parity_check("bn_dbias", db, C);
    free(x), free(w), free(b), free(dout), free(rm), free(rv);
}

TEST(parity_gelu_layernorm_l2norm)
{
    float *x = nn_fixture_floats("gelu_x", 40), *dout = nn_fixture_floats("gelu_dout", 40);
    float out[40], dx[40] = {0};
    vtr_gelu_forward(out, x, 40);
    vtr_gelu_backward(dx, dout, x, 40);
    nn_parity_check("gelu_out", out, 40);
    nn_parity_check("gelu_dx", dx, 40);
    free(x), free(dout);

    enum { N = 4, C = 7 };
    x = nn_fixture_floats("layernorm_x", N * C);
    dout = nn_fixture_floats("layernorm_dout", N * C);
    float *w = nn_fixture_floats("layernorm_weight", C),
          *b = nn_fixture_floats("layernorm_bias", C);
    float lo[N * C], mean[N], rstd[N], ldx[N * C] = {0}, dw[C] = {0}, db[C] = {0};
    vtr_layernorm_forward(lo, mean, rstd, x, w, b, N, C, VTR_LAYERNORM_EPS);
    vtr_layernorm_backward(ldx, dw, db, dout, x, w, mean, rstd, N, C);
    nn_parity_check("layernorm_out", lo, N * C);
    nn_parity_check("layernorm_dx", ldx, N * C);
    nn_parity_check("layernorm_dweight", dw, C);
    nn_parity_check("layernorm_dbias", db, C);
    free(x), free(dout), free(w), free(b);

    x = nn_fixture_floats("l2norm_x", 15);
    dout = nn_fixture_floats("l2norm_dout", 15);
    float no[15], norm[3], ndx[15] = {0};
    vtr_l2norm_forward(no, norm, x, 3, 5);
    vtr_l2norm_backward(ndx, dout, x, norm, 3, 5);
    nn_parity_check("l2norm_out", no, 15);
    nn_parity_check("l2norm_dx", ndx, 15);
    free(x), free(dout);
}

TEST(parity_hinge_loss_both_modes_both_reductions)
{
    enum { B = 4 };
    static const struct {
        const char *tag;
        vtr_hinge_negatives neg;
        vtr_reduction red;
    } cases[] = {
        {"sum_all", VTR_HINGE_ALL_NEGATIVES, VTR_REDUCE_SUM},
        {"mean_all", VTR_HINGE_ALL_NEGATIVES, VTR_REDUCE_MEAN},
        {"sum_hardest", VTR_HINGE_HARDEST_NEGATIVE, VTR_REDUCE_SUM},
        {"mean_hardest", VTR_HINGE_HARDEST_NEGATIVE, VTR_REDUCE_MEAN},
    };
    float *S = nn_fixture_floats("hinge_S", B * B);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char name[64];
        float loss = vtr_hinge_loss_forward(S, B, VTR_HINGE_MARGIN, cases[k].neg, cases[k].red);
        float dS[B * B] = {0};
        vtr_hinge_loss_backward(dS, 1.0f, S, B, VTR_HINGE_MARGIN, cases[k].neg, cases[k].red);
        snprintf(name, sizeof name, "hinge_%s_loss", cases[k].tag);
        nn_parity_check(name, &loss, 1);
        snprintf(name, sizeof name, "hinge_%s_dS", cases[k].tag);
        nn_parity_check(name, dS, B * B);
    }
    free(S);
}

/* ------------------------------------------------------------------------------------- */
/* One VSE∞ training step on small dims through match/vse_model.h, with the fixture's
 * weights loaded by name (REFERENCE.md "VSE∞ model"):
 *   visual: fc(x) + Linear(BN(...)) MLP over all B*T rows, GPO, l2norm
 *   text:   Embedding, BiGRU averaged, GPO, l2norm
 *   S = img_emb · cap_embᵀ, hinge loss (all negatives, sum). */

enum { VB = 3, VT = 5, VF = 8, VE = 6, VM = VE / 2, VV = 11, VW = 5 };
enum { IMG_PE = 8, IMG_HID = 6, TXT_PE = 12, TXT_HID = 5 };

/* A fixture tensor and the model entry it fills: a flat fixture (GPO, the GRU) fills the
 * block of consecutive entries that starts at `entry`. */
typedef struct vse_fixture_param {
    const char *fixture;
    const char *entry;
    size_t n;
} vse_fixture_param;

TEST(parity_vse_infinity_training_step)
{
    vtr_error err;
    vtr_vse_config cfg = vtr_vse_config_infinity(VV);
    cfg.feature_dim = VF;
    cfg.embed_size = VE;
    cfg.mlp_hidden = VM;
    cfg.word_dim = VW;
    cfg.img_pool.gpo_pe = IMG_PE;
    cfg.img_pool.gpo_hidden = IMG_HID;
    cfg.txt_pool.gpo_pe = TXT_PE;
    cfg.txt_pool.gpo_hidden = TXT_HID;
    vtr_vse_model m;
    CHECK_OK(vtr_vse_model_init(&m, &cfg, VB, VT, VT, &err));
    vtr_vse_init_params(&m, 7); /* BatchNorm running statistics 0 and 1, as in torch */

    const vse_fixture_param ps[] = {
        {"img_fc.weight", "img_enc.fc.weight", VE * VF},
        {"img_fc.bias", "img_enc.fc.bias", VE},
        {"img_mlp_0.weight", "img_enc.mlp.layers.0.weight", VM * VF},
        {"img_mlp_0.bias", "img_enc.mlp.layers.0.bias", VM},
        {"img_bn_0.weight", "img_enc.mlp.bns.0.weight", VM},
        {"img_bn_0.bias", "img_enc.mlp.bns.0.bias", VM},
        {"img_mlp_1.weight", "img_enc.mlp.layers.1.weight", VE * VM},
        {"img_mlp_1.bias", "img_enc.mlp.layers.1.bias", VE},
        {"img_gpool", "img_enc.gpool.gru.weight_ih_l0", vtr_gpo_param_count(IMG_PE, IMG_HID)},
        {"txt_embed.weight", "txt_enc.embed.weight", VV * VW},
        {"txt_rnn", "txt_enc.rnn.weight_ih_l0", vtr_gru_param_count(VW, VE, 2)},
        {"txt_gpool", "txt_enc.gpool.gru.weight_ih_l0", vtr_gpo_param_count(TXT_PE, TXT_HID)},
    };
    enum { M0_B = 3, NP = sizeof ps / sizeof ps[0] };
    char name[96];
    size_t loaded = 0;
    for (int i = 0; i < NP; i++) {
        snprintf(name, sizeof name, "vse_%s", ps[i].fixture);
        float *value = nn_fixture_floats(name, ps[i].n);
        float *dst = vtr_param_data(&m.params, ps[i].entry);
        CHECK_MSG(dst, "no entry %s", ps[i].entry);
        memcpy(dst, value, sizeof(float) * ps[i].n);
        free(value);
        loaded += ps[i].n;
    }
    CHECK_EQ_INT(loaded, m.params.n_trainable); /* the fixture sets every parameter */

    float *img = nn_fixture_floats("vse_img", VB * VT * VF);
    int *img_len = nn_fixture_ints("vse_img_lengths", VB);
    int *ids = nn_fixture_ints("vse_ids", VB * VT);
    int *cap_len = nn_fixture_ints("vse_cap_lengths", VB);
    vtr_vse_batch batch = {.B = VB,
                           .T = VT,
                           .frames = img,
                           .frame_lengths = img_len,
                           .L = VT,
                           .ids = ids,
                           .caption_lengths = cap_len};
    float loss;
    CHECK_OK(vtr_vse_train_step(&m, &batch, VTR_HINGE_ALL_NEGATIVES, &loss, &err));

    nn_parity_check("vse_img_emb", m.img_emb, VB * VE);
    nn_parity_check("vse_cap_emb", m.cap_emb, VB * VE);
    nn_parity_check("vse_S", m.sim, VB * VB);
    nn_parity_check("vse_loss", &loss, 1);
    nn_parity_check("vse_img_bn_0_running_mean",
                    vtr_param_data(&m.params, "img_enc.mlp.bns.0.running_mean"), VM);
    nn_parity_check("vse_img_bn_0_running_var",
                    vtr_param_data(&m.params, "img_enc.mlp.bns.0.running_var"), VM);
    CHECK_EQ_INT(*vtr_param_idata(&m.params, "img_enc.mlp.bns.0.num_batches_tracked"), 1);
    for (int i = 0; i < NP; i++) {
        const float *grad = vtr_param_grad(&m.params, ps[i].entry);
        snprintf(name, sizeof name, "vse_%s_grad", ps[i].fixture);
        if (i == M0_B) {
            /* a bias in front of BatchNorm has zero gradient: both sides hold float
             * rounding noise only, which a relative error cannot compare */
            float *ref = nn_fixture_floats(name, ps[i].n);
            for (size_t k = 0; k < ps[i].n; k++)
                CHECK(fabsf(grad[k]) < 1e-6f && fabsf(ref[k]) < 1e-6f);
            free(ref);
            continue;
        }
        nn_parity_check(name, grad, ps[i].n);
    }

    free(img), free(img_len), free(ids), free(cap_len);
    vtr_vse_model_free(&m);
}
