/* GRU and GPO: gradient checks end to end, padding semantics, determinism, and GPO's size
 * augmentation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/gpo.h"
#include "check.h"
#include "gradcheck.h"
#include "lib/gru.h"

/* ------------------------------------------------------------------------------------- */

typedef struct gru_case {
    int B, T, D, H, dirs;
    vtr_gru_merge merge;
    const int *lengths;
    float *x, *params, *out, *g;
    void *ws;
} gru_case;

static int gru_out_width(const gru_case *c)
{
    return c->dirs == 2 && c->merge == VTR_GRU_CONCAT ? 2 * c->H : c->H;
}

static double gru_loss(void *ctx)
{
    gru_case *c = ctx;
    vtr_gru_forward(c->out, c->ws, c->x, c->lengths, c->params, c->B, c->T, c->D, c->H, c->dirs,
                    c->merge);
    return gradcheck_dot(c->out, c->g, (size_t)c->B * c->T * gru_out_width(c));
}

static void gru_gradcheck(int dirs, vtr_gru_merge merge, const char *name)
{
    static const int lengths[3] = {5, 2, 3};
    gru_case c = {.B = 3, .T = 5, .D = 4, .H = 3, .dirs = dirs, .merge = merge, .lengths = lengths};
    size_t np = vtr_gru_param_count(c.D, c.H, dirs);
    size_t nx = (size_t)c.B * c.T * c.D, no = (size_t)c.B * c.T * gru_out_width(&c);
    vtr_rng rng;
    vtr_rng_init(&rng, 20 + dirs, merge);
    c.x = nn_alloc_floats(nx);
    c.params = nn_alloc_floats(np);
    c.out = nn_alloc_floats(no);
    c.g = nn_alloc_floats(no);
    c.ws = malloc(vtr_gru_workspace_size(c.B, c.T, c.D, c.H, dirs));
    void *scratch = malloc(vtr_gru_scratch_size(c.B, c.T, c.D, c.H, dirs));
    float *dx = nn_alloc_floats(nx), *dparams = nn_alloc_floats(np);
    nn_fill_uniform(c.x, nx, -1, 1, &rng);
    nn_fill_uniform(c.params, np, -0.8f, 0.8f, &rng);
    nn_fill_uniform(c.g, no, -1, 1, &rng);
    gru_loss(&c);
    for (int b = 0; b < c.B; b++) /* zero at padded positions */
        for (size_t i = (size_t)lengths[b] * gru_out_width(&c); i < (size_t)c.T * gru_out_width(&c);
             i++)
            CHECK(c.out[(size_t)b * c.T * gru_out_width(&c) + i] == 0.0f);
    vtr_gru_backward(dx, dparams, scratch, c.g, c.x, lengths, c.params, c.ws, c.B, c.T, c.D, c.H,
                     dirs, merge);
    char what[64];
    snprintf(what, sizeof what, "%s.dinp", name);
    gradcheck(what, gru_loss, &c, c.x, dx, nx, 1000);
    snprintf(what, sizeof what, "%s.dparams", name);
    gradcheck(what, gru_loss, &c, c.params, dparams, np, 1000);
    free(c.x), free(c.params), free(c.out), free(c.g), free(c.ws), free(scratch), free(dx);
    free(dparams);
}

TEST(gru_gradcheck_bidirectional_average)
{
    gru_gradcheck(2, VTR_GRU_AVERAGE, "gru.average");
}

TEST(gru_gradcheck_bidirectional_concat)
{
    gru_gradcheck(2, VTR_GRU_CONCAT, "gru.concat");
}

TEST(gru_gradcheck_unidirectional)
{
    gru_gradcheck(1, VTR_GRU_AVERAGE, "gru.forward_only");
}

/* Each item of a ragged batch gives what it gives alone (B 1, T = its length): the reverse
 * direction starts at the item's own last step, padding is never read. */
TEST(gru_batch_items_match_single_runs)
{
    enum { B = 3, T = 6, D = 4, H = 5 };
    const int lengths[B] = {2, 6, 4};
    vtr_rng rng;
    vtr_rng_init(&rng, 30, 0);
    size_t np = vtr_gru_param_count(D, H, 2);
    float *x = nn_alloc_floats(B * T * D), *params = nn_alloc_floats(np);
    float *out = nn_alloc_floats(B * T * 2 * H), *one = nn_alloc_floats(T * 2 * H);
    nn_fill_uniform(x, B * T * D, -1, 1, &rng);
    nn_fill_uniform(params, np, -0.5f, 0.5f, &rng);
    void *ws = malloc(vtr_gru_workspace_size(B, T, D, H, 2));
    vtr_gru_forward(out, ws, x, lengths, params, B, T, D, H, 2, VTR_GRU_CONCAT);
    for (int b = 0; b < B; b++) {
        vtr_gru_forward(one, ws, x + (size_t)b * T * D, &lengths[b], params, 1, lengths[b], D, H, 2,
                        VTR_GRU_CONCAT);
        for (int i = 0; i < lengths[b] * 2 * H; i++)
            CHECK_MSG(fabsf(one[i] - out[(size_t)b * T * 2 * H + i]) < 1e-6f, "item %d element %d",
                      b, i);
    }
    free(x), free(params), free(out), free(one), free(ws);
}

TEST(gru_parameter_layout_and_names)
{
    int D = 4, H = 3;
    CHECK_EQ_INT(vtr_gru_param_count(D, H, 2), 2 * (9 * 4 + 9 * 3 + 18));
    CHECK_EQ_INT(vtr_gru_param_offset(D, H, 0, VTR_GRU_WEIGHT_HH), 36);
    CHECK_EQ_INT(vtr_gru_param_offset(D, H, 0, VTR_GRU_BIAS_HH), 36 + 27 + 9);
    CHECK_EQ_INT(vtr_gru_param_offset(D, H, 1, VTR_GRU_WEIGHT_IH), 81);
    CHECK_STR(vtr_gru_param_name(1, VTR_GRU_BIAS_IH), "bias_ih_l0_reverse");
    CHECK_STR(vtr_gru_param_name(0, VTR_GRU_WEIGHT_HH), "weight_hh_l0");
}

/* ------------------------------------------------------------------------------------- */

typedef struct gpo_case {
    int B, T, D, d_pe, hidden;
    const int *lengths;
    float *x, *params, *out, *weights, *g;
    void *ws;
} gpo_case;

static double gpo_loss(void *ctx)
{
    gpo_case *c = ctx;
    vtr_gpo_forward(c->out, c->weights, c->ws, c->x, c->lengths, c->params, c->B, c->T, c->D,
                    c->d_pe, c->hidden);
    return gradcheck_dot(c->out, c->g, (size_t)c->B * c->D);
}

static void gpo_gradcheck(int d_pe, int hidden, int D, size_t max_checks)
{
    static const int lengths[3] = {5, 2, 3};
    gpo_case c = {.B = 3, .T = 5, .D = D, .d_pe = d_pe, .hidden = hidden, .lengths = lengths};
    size_t np = vtr_gpo_param_count(d_pe, hidden), nx = (size_t)c.B * c.T * D;
    vtr_rng rng;
    vtr_rng_init(&rng, 40, (uint64_t)d_pe);
    c.x = nn_alloc_floats(nx);
    c.params = nn_alloc_floats(np);
    c.out = nn_alloc_floats((size_t)c.B * D);
    c.weights = nn_alloc_floats((size_t)c.B * c.T);
    c.g = nn_alloc_floats((size_t)c.B * D);
    c.ws = malloc(vtr_gpo_workspace_size(c.B, c.T, D, d_pe, hidden));
    void *scratch = malloc(vtr_gpo_scratch_size(c.B, c.T, D, d_pe, hidden));
    float *dx = nn_alloc_floats(nx), *dparams = nn_alloc_floats(np);
    nn_fill_separated(c.x, c.B, c.T, D, &rng);
    /* weights large enough that the scores (/0.1) spread the coefficients */
    nn_fill_uniform(c.params, np, -0.5f, 0.5f, &rng);
    nn_fill_uniform(c.g, (size_t)c.B * D, -1, 1, &rng);
    gpo_loss(&c);
    vtr_gpo_backward(dx, dparams, scratch, c.g, c.x, c.weights, lengths, c.params, c.ws, c.B, c.T,
                     D, d_pe, hidden);
    char what[64];
    snprintf(what, sizeof what, "gpo(%d,%d).dinp", d_pe, hidden);
    gradcheck(what, gpo_loss, &c, c.x, dx, nx, max_checks);
    snprintf(what, sizeof what, "gpo(%d,%d).dparams", d_pe, hidden);
    gradcheck(what, gpo_loss, &c, c.params, dparams, np, max_checks);
    size_t lin = vtr_gpo_linear_offset(d_pe, hidden);
    snprintf(what, sizeof what, "gpo(%d,%d).dlinear", d_pe, hidden);
    gradcheck(what, gpo_loss, &c, c.params + lin, dparams + lin, (size_t)hidden, max_checks);
    for (int b = 0; b < c.B; b++)
        for (int t = lengths[b]; t < c.T; t++)
            for (int d = 0; d < D; d++)
                CHECK(dx[((size_t)b * c.T + t) * D + d] == 0.0f);
    free(c.x), free(c.params), free(c.out), free(c.weights), free(c.g), free(c.ws);
    free(scratch), free(dx), free(dparams);
}

TEST(gpo_gradcheck_small)
{
    gpo_gradcheck(4, 4, 6, 100000);
}

TEST(gpo_gradcheck_reference_sizes)
{
    gpo_gradcheck(VTR_GPO_D_PE, VTR_GPO_HIDDEN, 8, 1500);
}

/* Weights sum to one over the real elements and are zero at padded ones; extra padding
 * (a larger T) changes nothing; a set of one element pools to that element. */
TEST(gpo_padding_and_single_elements)
{
    enum { B = 3, D = 5, T1 = 4, T2 = 7 };
    const int lengths[B] = {4, 1, 3};
    vtr_rng rng;
    vtr_rng_init(&rng, 50, 0);
    size_t np = vtr_gpo_param_count(8, 6);
    float *params = nn_alloc_floats(np), *x1 = nn_alloc_floats(B * T1 * D);
    float *x2 = nn_alloc_floats(B * T2 * D), *out1 = nn_alloc_floats(B * D),
          *out2 = nn_alloc_floats(B * D);
    float w1[B * T1], w2[B * T2];
    nn_fill_uniform(params, np, -0.5f, 0.5f, &rng);
    nn_fill_uniform(x1, B * T1 * D, -1, 1, &rng);
    nn_fill_uniform(x2, B * T2 * D, 50, 60, &rng); /* garbage in the padding */
    for (int b = 0; b < B; b++)
        memcpy(x2 + (size_t)b * T2 * D, x1 + (size_t)b * T1 * D, sizeof(float) * T1 * D);
    void *ws = malloc(vtr_gpo_workspace_size(B, T2, D, 8, 6));
    vtr_gpo_forward(out1, w1, ws, x1, lengths, params, B, T1, D, 8, 6);
    vtr_gpo_forward(out2, w2, ws, x2, lengths, params, B, T2, D, 8, 6);
    for (int i = 0; i < B * D; i++)
        CHECK_MSG(fabsf(out1[i] - out2[i]) < 1e-6f, "element %d: %g vs %g", i, out1[i], out2[i]);
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (int t = 0; t < T2; t++) {
            s += w2[b * T2 + t];
            if (t >= lengths[b])
                CHECK(w2[b * T2 + t] == 0.0f);
        }
        CHECK(fabs(s - 1.0) < 1e-6);
    }
    for (int d = 0; d < D; d++)
        CHECK(out1[D + d] == x1[T1 * D + d]);
    free(params), free(x1), free(x2), free(out1), free(out2), free(ws);
}

TEST(gpo_positional_encoding_values)
{
    float pe[3 * 32];
    vtr_gpo_positional_encoding(pe, 3, 32);
    CHECK(pe[0] == 0.0f && pe[1] == 1.0f);         /* position 0: sin 0, cos 0 */
    CHECK(fabsf(pe[32 + 0] - sinf(1.0f)) < 1e-7f); /* position 1, j = 0 */
    CHECK(fabsf(pe[64 + 3] - cosf(2.0f * expf(-2.0f * logf(10000.0f) / 32))) < 1e-6f);
}

/* The same seed and thread count give identical bytes twice: GPO forward and backward at
 * sizes where the OpenMP loops and BLAS run threaded. */
TEST(gpo_forward_backward_deterministic)
{
    enum { B = 64, T = 20, D = 256 };
    int lengths[B];
    vtr_rng rng;
    vtr_rng_init(&rng, 60, 0);
    for (int b = 0; b < B; b++)
        lengths[b] = 1 + (int)vtr_rng_below(&rng, T);
    size_t np = vtr_gpo_param_count(VTR_GPO_D_PE, VTR_GPO_HIDDEN);
    size_t nx = (size_t)B * T * D;
    float *x = nn_alloc_floats(nx), *params = nn_alloc_floats(np), *g = nn_alloc_floats(B * D);
    nn_fill_uniform(x, nx, -1, 1, &rng);
    nn_fill_uniform(params, np, -0.3f, 0.3f, &rng);
    nn_fill_uniform(g, B * D, -1, 1, &rng);
    void *ws = malloc(vtr_gpo_workspace_size(B, T, D, VTR_GPO_D_PE, VTR_GPO_HIDDEN));
    void *scratch = malloc(vtr_gpo_scratch_size(B, T, D, VTR_GPO_D_PE, VTR_GPO_HIDDEN));
    float *res[2][4];
    for (int run = 0; run < 2; run++) {
        float *out = res[run][0] = nn_alloc_floats(B * D);
        float *w = res[run][1] = nn_alloc_floats(B * T);
        float *dx = res[run][2] = nn_alloc_floats(nx);
        float *dp = res[run][3] = nn_alloc_floats(np);
        vtr_gpo_forward(out, w, ws, x, lengths, params, B, T, D, VTR_GPO_D_PE, VTR_GPO_HIDDEN);
        vtr_gpo_backward(dx, dp, scratch, g, x, w, lengths, params, ws, B, T, D, VTR_GPO_D_PE,
                         VTR_GPO_HIDDEN);
    }
    CHECK(memcmp(res[0][0], res[1][0], sizeof(float) * B * D) == 0);
    CHECK(memcmp(res[0][1], res[1][1], sizeof(float) * B * T) == 0);
    CHECK(memcmp(res[0][2], res[1][2], sizeof(float) * nx) == 0);
    CHECK(memcmp(res[0][3], res[1][3], sizeof(float) * np) == 0);
    for (int run = 0; run < 2; run++)
        for (int k = 0; k < 4; k++)
            free(res[run][k]);
    free(x), free(params), free(g), free(ws), free(scratch);
}

/* ------------------------------------------------------------------------------------- */

TEST(gpo_augment_set_drops_about_p_never_all)
{
    int keep[1000];
    int n = vtr_gpo_augment_set(keep, 1000, 0.2f, 7, 1);
    CHECK(n > 760 && n < 840);
    for (int i = 1; i < n; i++)
        CHECK(keep[i] > keep[i - 1]);
    int j = 0; /* exactly the elements whose draw is >= p */
    for (int i = 0; i < 1000; i++)
        if (vtr_philox_uniform_at(7, 1, (uint64_t)i) >= 0.2f)
            CHECK(keep[j++] == i);
    CHECK_EQ_INT(j, n);
    int again[1000];
    CHECK_EQ_INT(vtr_gpo_augment_set(again, 1000, 0.2f, 7, 1), n);
    CHECK(memcmp(keep, again, sizeof(int) * (size_t)n) == 0);
    /* p = 1 would drop everything: the set stays whole */
    CHECK_EQ_INT(vtr_gpo_augment_set(keep, 3, 1.0f, 7, 1), 3);
    CHECK(keep[0] == 0 && keep[1] == 1 && keep[2] == 2);
}

TEST(gpo_augment_caption_mask_random_delete_proportions)
{
    enum { n = 20000, V = 1000, MASK = 1000 };
    int *ids = malloc(sizeof(int) * n), *out = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++)
        ids[i] = 5 + i % 7;
    int len = vtr_gpo_augment_caption(out, ids, n, V + 1, MASK, 0.2f, 11, 2);
    int masked = 0, replaced = 0, kept = 0;
    for (int i = 0, o = 0; i < n; i++) { /* replay the draws */
        float u = vtr_philox_uniform_at(11, 2, 2 * (uint64_t)i);
        if (u >= 0.2f) {
            CHECK(out[o++] == ids[i]);
            kept++;
        } else if (u / 0.2f < 0.5f) {
            CHECK(out[o++] == MASK);
            masked++;
        } else if (u / 0.2f < 0.6f) {
            CHECK(out[o] >= 0 && out[o] <= V);
            o++;
            replaced++;
        }
    }
    CHECK_EQ_INT(len, kept + masked + replaced);
    CHECK(fabs(masked / (double)n - 0.10) < 0.01);
    CHECK(fabs(replaced / (double)n - 0.02) < 0.005);
    CHECK(fabs((n - len) / (double)n - 0.08) < 0.01);
    /* a caption every token of which would be deleted stays as it was */
    int two[2] = {1, 2}, res[2];
    uint64_t stream = 0;
    for (;; stream++) {
        float u0 = vtr_philox_uniform_at(3, stream, 0), u1 = vtr_philox_uniform_at(3, stream, 2);
        if (u0 < 0.2f && u0 / 0.2f >= 0.6f && u1 < 0.2f && u1 / 0.2f >= 0.6f)
            break;
    }
    CHECK_EQ_INT(vtr_gpo_augment_caption(res, two, 2, 10, 9, 0.2f, 3, stream), 2);
    CHECK(res[0] == 1 && res[1] == 2);
    free(ids), free(out);
}
