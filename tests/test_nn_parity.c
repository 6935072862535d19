/* Parity with PyTorch: outputs and gradients against tests/fixtures/nn/, written by
 * tests/fixtures/make_nn_fixtures.py. Each tensor must agree to relative error < 1e-4,
 * max|vtr - torch| / max(max|torch|, 1e-6) over the tensor (nn_parity_check). Run with
 * VTR_TEST_VERBOSE=1 to print every error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/gpo.h"
#include "check.h"
#include "gradcheck.h"
#include "lib/activation.h"
#include "lib/embedding.h"
#include "lib/gru.h"
#include "lib/linear.h"
#include "lib/norm.h"
#include "lib/similarity.h"
#include "match/hinge_loss.h"

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
/* One VSE∞ training step on small dims, both encoders written out of the ops as a model
 * would be (REFERENCE.md "VSE∞ model"):
 *   visual: fc(x) + Linear(BN(...)) MLP over all B*T rows, GPO, l2norm
 *   text:   Embedding, BiGRU averaged, GPO, l2norm
 *   S = img_emb · cap_embᵀ, hinge loss (all negatives, sum). */

enum { VB = 3, VT = 5, VF = 8, VE = 6, VM = VE / 2, VV = 11, VW = 5 };
enum { IMG_PE = 8, IMG_HID = 6, TXT_PE = 12, TXT_HID = 5 };

typedef struct param {
    const char *name;
    size_t n;
    float *value, *grad;
} param;

TEST(parity_vse_infinity_training_step)
{
    const int rows = VB * VT;
    size_t img_gpo_n = vtr_gpo_param_count(IMG_PE, IMG_HID);
    size_t txt_gpo_n = vtr_gpo_param_count(TXT_PE, TXT_HID);
    size_t rnn_n = vtr_gru_param_count(VW, VE, 2);
    param ps[] = {
        {"img_fc.weight", VE * VF, 0, 0},
        {"img_fc.bias", VE, 0, 0},
        {"img_mlp_0.weight", VM * VF, 0, 0},
        {"img_mlp_0.bias", VM, 0, 0},
        {"img_bn_0.weight", VM, 0, 0},
        {"img_bn_0.bias", VM, 0, 0},
        {"img_mlp_1.weight", VE * VM, 0, 0},
        {"img_mlp_1.bias", VE, 0, 0},
        {"img_gpool", img_gpo_n, 0, 0},
        {"txt_embed.weight", VV * VW, 0, 0},
        {"txt_rnn", rnn_n, 0, 0},
        {"txt_gpool", txt_gpo_n, 0, 0},
    };
    enum { FC_W, FC_B, M0_W, M0_B, BN_W, BN_B, M1_W, M1_B, IMG_GPO, EMBED, RNN, TXT_GPO, NP };
    char name[96];
    for (int i = 0; i < NP; i++) {
        snprintf(name, sizeof name, "vse_%s", ps[i].name);
        ps[i].value = nn_fixture_floats(name, ps[i].n);
        ps[i].grad = nn_alloc_floats(ps[i].n);
    }
    float *img = nn_fixture_floats("vse_img", rows * VF);
    int *img_len = nn_fixture_ints("vse_img_lengths", VB);
    int *ids = nn_fixture_ints("vse_ids", rows);
    int *cap_len = nn_fixture_ints("vse_cap_lengths", VB);
    float running_mean[VM] = {0}, running_var[VM] = {1, 1, 1};

    /* activations and their gradients */
    float *fc = nn_alloc_floats(rows * VE), *a0 = nn_alloc_floats(rows * VM);
    float *a1 = nn_alloc_floats(rows * VM), *a2 = nn_alloc_floats(rows * VM);
    float *feat = nn_alloc_floats(rows * VE), *emb = nn_alloc_floats(rows * VW);
    float *cap = nn_alloc_floats(rows * VE);
    float bn_mean[VM], bn_rstd[VM], img_w[VB * VT], cap_w[VB * VT];
    float img_pool[VB * VE], cap_pool[VB * VE], img_emb[VB * VE], cap_emb[VB * VE];
    float img_norm[VB], cap_norm[VB], S[VB * VB];
    void *img_ws = malloc(vtr_gpo_workspace_size(VB, VT, VE, IMG_PE, IMG_HID));
    void *txt_ws = malloc(vtr_gpo_workspace_size(VB, VT, VE, TXT_PE, TXT_HID));
    void *rnn_ws = malloc(vtr_gru_workspace_size(VB, VT, VW, VE, 2));
    size_t scratch_size = vtr_gpo_scratch_size(VB, VT, VE, IMG_PE, IMG_HID);
    if (vtr_gpo_scratch_size(VB, VT, VE, TXT_PE, TXT_HID) > scratch_size)
        scratch_size = vtr_gpo_scratch_size(VB, VT, VE, TXT_PE, TXT_HID);
    if (vtr_gru_scratch_size(VB, VT, VW, VE, 2) > scratch_size)
        scratch_size = vtr_gru_scratch_size(VB, VT, VW, VE, 2);
    void *scratch = malloc(scratch_size); /* one scratch shared by every backward */

    // forward, visual
    vtr_linear_forward(fc, img, ps[FC_W].value, ps[FC_B].value, rows, VF, VE);
    vtr_linear_forward(a0, img, ps[M0_W].value, ps[M0_B].value, rows, VF, VM);
    vtr_batchnorm_forward(a1, bn_mean, bn_rstd, running_mean, running_var, a0, ps[BN_W].value,
                          ps[BN_B].value, rows, VM, VTR_BATCHNORM_MOMENTUM, VTR_BATCHNORM_EPS);
    vtr_relu_forward(a2, a1, (size_t)rows * VM);
    vtr_linear_forward(feat, a2, ps[M1_W].value, ps[M1_B].value, rows, VM, VE);
    for (int i = 0; i < rows * VE; i++)
        feat[i] += fc[i];
    vtr_gpo_forward(img_pool, img_w, img_ws, feat, img_len, ps[IMG_GPO].value, VB, VT, VE, IMG_PE,
                    IMG_HID);
    vtr_l2norm_forward(img_emb, img_norm, img_pool, VB, VE);
    // forward, text
    vtr_embedding_forward(emb, ids, ps[EMBED].value, rows, VW);
    vtr_gru_forward(cap, rnn_ws, emb, cap_len, ps[RNN].value, VB, VT, VW, VE, 2, VTR_GRU_AVERAGE);
    vtr_gpo_forward(cap_pool, cap_w, txt_ws, cap, cap_len, ps[TXT_GPO].value, VB, VT, VE, TXT_PE,
                    TXT_HID);
    vtr_l2norm_forward(cap_emb, cap_norm, cap_pool, VB, VE);
    // similarity and loss
    vtr_cosine_similarity_forward(S, img_emb, cap_emb, VB, VB, VE);
    float loss =
        vtr_hinge_loss_forward(S, VB, VTR_HINGE_MARGIN, VTR_HINGE_ALL_NEGATIVES, VTR_REDUCE_SUM);

    // backward (every gradient buffer starts at zero and accumulates)
    float dS[VB * VB] = {0}, dimg_emb[VB * VE] = {0}, dcap_emb[VB * VE] = {0};
    float dimg_pool[VB * VE] = {0}, dcap_pool[VB * VE] = {0};
    float *dfeat = nn_alloc_floats(rows * VE), *da2 = nn_alloc_floats(rows * VM);
    float *da1 = nn_alloc_floats(rows * VM), *dcap = nn_alloc_floats(rows * VE);
    float *demb = nn_alloc_floats(rows * VW);
    vtr_hinge_loss_backward(dS, 1.0f, S, VB, VTR_HINGE_MARGIN, VTR_HINGE_ALL_NEGATIVES,
                            VTR_REDUCE_SUM);
    vtr_cosine_similarity_backward(dimg_emb, dcap_emb, dS, img_emb, cap_emb, VB, VB, VE);
    vtr_l2norm_backward(dimg_pool, dimg_emb, img_pool, img_norm, VB, VE);
    vtr_gpo_backward(dfeat, ps[IMG_GPO].grad, scratch, dimg_pool, feat, img_w, img_len,
                     ps[IMG_GPO].value, img_ws, VB, VT, VE, IMG_PE, IMG_HID);
    vtr_linear_backward(NULL, ps[FC_W].grad, ps[FC_B].grad, dfeat, img, ps[FC_W].value, rows, VF,
                        VE);
    vtr_linear_backward(da2, ps[M1_W].grad, ps[M1_B].grad, dfeat, a2, ps[M1_W].value, rows, VM, VE);
    vtr_relu_backward(da1, da2, a1, (size_t)rows * VM);
    float *da0 = da2; /* reuse: da2 is spent */
    memset(da0, 0, sizeof(float) * rows * VM);
    vtr_batchnorm_backward(da0, ps[BN_W].grad, ps[BN_B].grad, da1, a0, ps[BN_W].value, bn_mean,
                           bn_rstd, rows, VM);
    vtr_linear_backward(NULL, ps[M0_W].grad, ps[M0_B].grad, da0, img, ps[M0_W].value, rows, VF, VM);
    vtr_l2norm_backward(dcap_pool, dcap_emb, cap_pool, cap_norm, VB, VE);
    vtr_gpo_backward(dcap, ps[TXT_GPO].grad, scratch, dcap_pool, cap, cap_w, cap_len,
                     ps[TXT_GPO].value, txt_ws, VB, VT, VE, TXT_PE, TXT_HID);
    vtr_gru_backward(demb, ps[RNN].grad, scratch, dcap, emb, cap_len, ps[RNN].value, rnn_ws, VB, VT,
                     VW, VE, 2, VTR_GRU_AVERAGE);
    vtr_embedding_backward(ps[EMBED].grad, demb, ids, rows, VW);

    nn_parity_check("vse_img_emb", img_emb, VB * VE);
    nn_parity_check("vse_cap_emb", cap_emb, VB * VE);
    nn_parity_check("vse_S", S, VB * VB);
    nn_parity_check("vse_loss", &loss, 1);
    nn_parity_check("vse_img_bn_0_running_mean", running_mean, VM);
    nn_parity_check("vse_img_bn_0_running_var", running_var, VM);
    for (int i = 0; i < NP; i++) {
        snprintf(name, sizeof name, "vse_%s_grad", ps[i].name);
        if (i == M0_B) {
            /* a bias in front of BatchNorm has zero gradient: both sides hold float
             * rounding noise only, which a relative error cannot compare */
            float *ref = nn_fixture_floats(name, ps[i].n);
            for (size_t k = 0; k < ps[i].n; k++)
                CHECK(fabsf(ps[i].grad[k]) < 1e-6f && fabsf(ref[k]) < 1e-6f);
            free(ref);
            continue;
        }
        nn_parity_check(name, ps[i].grad, ps[i].n);
    }

    for (int i = 0; i < NP; i++)
        free(ps[i].value), free(ps[i].grad);
    free(img), free(img_len), free(ids), free(cap_len), free(fc), free(a0), free(a1), free(a2);
    free(feat), free(emb), free(cap), free(img_ws), free(txt_ws), free(rnn_ws), free(scratch);
    free(dfeat), free(da2), free(da1), free(dcap), free(demb);
}
