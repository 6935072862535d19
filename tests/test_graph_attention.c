/* HGR's attention GCN layer (lib/graph_attention.h): the parameter layout, finite-difference
 * gradient checks of the input and of every parameter tensor (dropout off and on, nodes
 * without edges, a graph without any edge; the key bias, whose gradient is exactly 0, by its
 * invariance instead), the accumulation rule, the zero-row rule, dropout's (seed, stream),
 * determinism, and parity with PyTorch (tests/fixtures/nn/gcn/, make_gcn_fixtures.py). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gradcheck.h"
#include "lib/graph_attention.h"
#include "lib/norm.h"

/* HGR's graph: 11 nodes [root, 4 verbs, 6 nouns] */
enum { NODES = 11, VERBS = 4 };

/* rel (NODES,NODES) as the reference's reader builds it: root -> each of the first `verbs`
 * verbs, verb v <-> noun n for each (v, n) of args (0-based), an edge src -> tgt sets
 * rel[tgt][src]; rows with an edge divided by their sum. The root and unused nodes have no
 * edge. */
static void hgr_graph(float *rel, int verbs, const int (*args)[2], int nargs)
{
    memset(rel, 0, sizeof(float) * NODES * NODES);
    for (int v = 0; v < verbs; v++)
        rel[(1 + v) * NODES + 0] = 1.0f;
    for (int a = 0; a < nargs; a++) {
        int verb = 1 + args[a][0], noun = 1 + VERBS + args[a][1];
        rel[noun * NODES + verb] = 1.0f;
        rel[verb * NODES + noun] = 1.0f;
    }
    for (int i = 0; i < NODES; i++) {
        float s = 0.0f;
        for (int j = 0; j < NODES; j++)
            s += rel[i * NODES + j];
        for (int j = 0; s > 0.0f && j < NODES; j++)
            rel[i * NODES + j] /= s;
    }
}

/* B graphs: item 0 with every verb, item 1 with one verb and two nouns, item 2 with no edge,
 * then the three again. */
static void hgr_graphs(float *rel, int B)
{
    static const int full[][2] = {{0, 0}, {0, 1}, {1, 2}, {2, 3}, {2, 1}, {3, 4}};
    static const int sparse[][2] = {{0, 0}, {0, 1}};
    for (int b = 0; b < B; b++) {
        float *r = rel + (size_t)b * NODES * NODES;
        switch (b % 3) {
        case 0: hgr_graph(r, 4, full, 6); break;
        case 1: hgr_graph(r, 1, sparse, 2); break;
        default: hgr_graph(r, 0, NULL, 0); break;
        }
    }
}

/* One layer's buffers and arguments. */
typedef struct gcn_case {
    int B, D, F;
    float p;
    uint64_t seed, stream;
    float *x, *rel, *params, *out, *g, *dx, *dparams;
    void *workspace, *scratch;
} gcn_case;

static void gcn_case_init(gcn_case *c, int B, int D, int F, float p, uint64_t rng_seed)
{
    size_t nx = (size_t)B * NODES * D, np = vtr_attn_gcn_param_count(D, F);
    *c = (gcn_case){.B = B, .D = D, .F = F, .p = p, .seed = 1234, .stream = 7};
    vtr_rng rng;
    vtr_rng_init(&rng, rng_seed, 0);
    c->x = nn_alloc_floats(nx);
    c->rel = nn_alloc_floats((size_t)B * NODES * NODES);
    c->params = nn_alloc_floats(np);
    c->out = nn_alloc_floats(nx);
    c->g = nn_alloc_floats(nx);
    c->dx = nn_alloc_floats(nx);
    c->dparams = nn_alloc_floats(np);
    c->workspace = malloc(vtr_attn_gcn_workspace_size(B, NODES, D, F));
    c->scratch = malloc(vtr_attn_gcn_scratch_size(B, NODES, D, F));
    CHECK(c->workspace && c->scratch);
    nn_fill_uniform(c->x, nx, -1, 1, &rng);
    nn_fill_uniform(c->g, nx, -1, 1, &rng);
    nn_fill_uniform(c->params, np, -0.5f, 0.5f, &rng);
    /* LayerNorm weight around 1 */
    float *lnw = c->params + vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_NORM_WEIGHT);
    for (int d = 0; d < D; d++)
        lnw[d] += 1.0f;
    hgr_graphs(c->rel, B);
}

static void gcn_case_free(gcn_case *c)
{
    free(c->x), free(c->rel), free(c->params), free(c->out), free(c->g), free(c->dx);
    free(c->dparams), free(c->workspace), free(c->scratch);
}

static void gcn_forward(gcn_case *c)
{
    vtr_attn_gcn_forward(c->out, c->workspace, c->x, c->rel, c->params, c->B, NODES, c->D, c->F,
                         c->p, c->seed, c->stream, 0);
}

/* forward, then backward of upstream g into dx and dparams (accumulating) */
static void gcn_forward_backward(gcn_case *c, float *dx)
{
    gcn_forward(c);
    vtr_attn_gcn_backward(dx, c->dparams, c->scratch, c->g, c->x, c->params, c->workspace, c->B,
                          NODES, c->D, c->F, c->p, c->seed, c->stream, 0);
}

static double gcn_loss(void *ctx)
{
    gcn_case *c = ctx;
    gcn_forward(c);
    return gradcheck_dot(c->out, c->g, (size_t)c->B * NODES * c->D);
}

/* ------------------------------------------------------------------------------------- */

TEST(graph_attention_param_layout_is_the_reference_order)
{
    int D = 16, F = 8;
    static const char *const names[] = {"ctx_layer.weight",     "layernorm.weight",
                                        "layernorm.bias",       "edge_attn_query.weight",
                                        "edge_attn_query.bias", "edge_attn_key.weight",
                                        "edge_attn_key.bias"};
    static const int64_t shapes[][2] = {{16, 16}, {16, 0}, {16, 0}, {8, 16},
                                        {8, 0},   {8, 16}, {8, 0}};
    size_t off = 0;
    for (int t = 0; t < VTR_ATTN_GCN_TENSORS; t++) {
        int64_t shape[2];
        int ndim = vtr_attn_gcn_param_shape(D, F, (vtr_attn_gcn_tensor)t, shape);
        CHECK_STR(vtr_attn_gcn_param_name((vtr_attn_gcn_tensor)t), names[t]);
        CHECK_EQ_INT(ndim, shapes[t][1] ? 2 : 1);
        CHECK_EQ_INT(shape[0], shapes[t][0]);
        if (ndim == 2)
            CHECK_EQ_INT(shape[1], shapes[t][1]);
        CHECK_EQ_INT(vtr_attn_gcn_param_offset(D, F, (vtr_attn_gcn_tensor)t), off);
        off += (size_t)shapes[t][0] * (size_t)(ndim == 2 ? shapes[t][1] : 1);
    }
    CHECK_EQ_INT(vtr_attn_gcn_param_count(D, F), off);
    CHECK_EQ_INT(off, 16 * 16 + 2 * 16 + 2 * (8 * 16 + 8));
}

/* The attention parameters act through a softmax and get gradients of ~1e-3, the size of
 * the float32 noise (~4e-4, measured) in a central difference at GRADCHECK_EPS: the noise
 * of the loss over ~100 rounded outputs divided by the 2e-3 step. So every tensor v is
 * checked as v = GC_SCALE * theta, the finite differences taken in theta: a step of
 * GC_SCALE * GRADCHECK_EPS in v, the same noise in the loss, and d/dtheta = GC_SCALE d/dv.
 * (At that step the errors drop ~10x, measured, so the remainder is noise, not a wrong
 * gradient.) */
#define GC_SCALE 10.0f

typedef struct scaled_var {
    gcn_case *c;
    float *values, *theta; /* n each */
    size_t n;
} scaled_var;

static double scaled_loss(void *ctx)
{
    scaled_var *v = ctx;
    for (size_t i = 0; i < v->n; i++)
        v->values[i] = GC_SCALE * v->theta[i];
    return gcn_loss(v->c);
}

/* values (n) = GC_SCALE * theta (n), theta = values / GC_SCALE rounded first */
static void scaled_split(float *values, float *theta, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        theta[i] = values[i] / GC_SCALE;
        values[i] = GC_SCALE * theta[i];
    }
}

/* Checks the gradient of values (n), analytic (n), as described above GC_SCALE. */
static void scaled_gradcheck(const char *name, gcn_case *c, float *values, float *theta,
                             const float *analytic, float *scaled, size_t n)
{
    for (size_t i = 0; i < n; i++)
        scaled[i] = GC_SCALE * analytic[i];
    scaled_var v = {c, values, theta, n};
    gradcheck(name, scaled_loss, &v, theta, scaled, n, 1000);
    for (size_t i = 0; i < n; i++)
        values[i] = GC_SCALE * theta[i];
}

/* The key bias's gradient is 0 in exact arithmetic (lib/graph_attention.h), so a central
 * difference of it sees only noise. Instead: its analytic gradient (in c->dparams) is
 * rounding-sized next to the key weight's, and shifting it by 0.5 leaves the loss as it was
 * to float32 noise, while the same shift of the query bias moves it. */
static void check_key_bias(gcn_case *c)
{
    size_t w = vtr_attn_gcn_param_offset(c->D, c->F, VTR_ATTN_GCN_KEY_WEIGHT);
    size_t b = vtr_attn_gcn_param_offset(c->D, c->F, VTR_ATTN_GCN_KEY_BIAS);
    size_t qb = vtr_attn_gcn_param_offset(c->D, c->F, VTR_ATTN_GCN_QUERY_BIAS);
    double scale = 0.0;
    for (size_t i = w; i < b; i++)
        scale = fmax(scale, fabs(c->dparams[i]));
    for (int f = 0; f < c->F; f++)
        CHECK_MSG(fabs(c->dparams[b + f]) <= 1e-5 * scale,
                  "key bias gradient %g (key weight's up to %g)", c->dparams[b + f], scale);
    double base = gcn_loss(c);
    for (int f = 0; f < c->F; f++)
        c->params[b + f] += 0.5f;
    double shifted = gcn_loss(c);
    for (int f = 0; f < c->F; f++)
        c->params[b + f] -= 0.5f, c->params[qb + f] += 0.5f;
    double query_shifted = gcn_loss(c);
    for (int f = 0; f < c->F; f++)
        c->params[qb + f] -= 0.5f;
    CHECK_MSG(fabs(shifted - base) <= 1e-5, "key bias shift moved the loss by %g", shifted - base);
    CHECK(scale == 0.0 || fabs(query_shifted - base) > 1e-3);
}

/* Checks dx and every parameter tensor of case c against central differences. */
static void gcn_gradcheck(gcn_case *c, const char *tag)
{
    size_t nx = (size_t)c->B * NODES * c->D, np = vtr_attn_gcn_param_count(c->D, c->F);
    float *theta_x = nn_alloc_floats(nx), *theta_p = nn_alloc_floats(np);
    float *scaled = nn_alloc_floats(nx > np ? nx : np);
    scaled_split(c->x, theta_x, nx);
    scaled_split(c->params, theta_p, np);
    memset(c->dx, 0, sizeof(float) * nx);
    memset(c->dparams, 0, sizeof(float) * np);
    gcn_forward_backward(c, c->dx);
    char name[96];
    snprintf(name, sizeof name, "%s.dx", tag);
    scaled_gradcheck(name, c, c->x, theta_x, c->dx, scaled, nx);
    for (int t = 0; t < VTR_ATTN_GCN_KEY_BIAS; t++) { /* the key bias: check_key_bias */
        int64_t shape[2];
        int ndim = vtr_attn_gcn_param_shape(c->D, c->F, (vtr_attn_gcn_tensor)t, shape);
        size_t off = vtr_attn_gcn_param_offset(c->D, c->F, (vtr_attn_gcn_tensor)t);
        snprintf(name, sizeof name, "%s.%s", tag, vtr_attn_gcn_param_name((vtr_attn_gcn_tensor)t));
        scaled_gradcheck(name, c, c->params + off, theta_p + off, c->dparams + off, scaled,
                         (size_t)shape[0] * (size_t)(ndim == 2 ? shape[1] : 1));
    }
    free(theta_x), free(theta_p), free(scaled);
    check_key_bias(c);
}

TEST(graph_attention_gradcheck_without_dropout)
{
    gcn_case c;
    gcn_case_init(&c, 3, 8, 4, 0.0f, 11);
    gcn_gradcheck(&c, "attn_gcn.p0");
    gcn_case_free(&c);
}

TEST(graph_attention_gradcheck_with_dropout)
{
    gcn_case c;
    gcn_case_init(&c, 3, 8, 4, 0.3f, 12);
    gcn_gradcheck(&c, "attn_gcn.p0.3");
    gcn_case_free(&c);
}

/* Every item without an edge: the layer is LayerNorm(x), the attention and context
 * parameters get zero gradient. */
TEST(graph_attention_empty_graph_is_layernorm)
{
    gcn_case c;
    gcn_case_init(&c, 2, 8, 4, 0.5f, 13);
    memset(c.rel, 0, sizeof(float) * 2 * NODES * NODES);
    gcn_forward_backward(&c, c.dx);
    float ln[2 * NODES * 8], mean[2 * NODES], rstd[2 * NODES];
    const float *w = c.params + vtr_attn_gcn_param_offset(8, 4, VTR_ATTN_GCN_NORM_WEIGHT);
    const float *b = c.params + vtr_attn_gcn_param_offset(8, 4, VTR_ATTN_GCN_NORM_BIAS);
    vtr_layernorm_forward(ln, mean, rstd, c.x, w, b, 2 * NODES, 8, VTR_LAYERNORM_EPS);
    CHECK(memcmp(ln, c.out, sizeof ln) == 0);
    size_t first_attn = vtr_attn_gcn_param_offset(8, 4, VTR_ATTN_GCN_QUERY_WEIGHT);
    for (size_t i = 0; i < 8 * 8; i++)
        CHECK(c.dparams[i] == 0.0f); /* ctx_layer.weight */
    for (size_t i = first_attn; i < vtr_attn_gcn_param_count(8, 4); i++)
        CHECK(c.dparams[i] == 0.0f);
    gcn_gradcheck(&c, "attn_gcn.empty");
    gcn_case_free(&c);
}

/* Only rel_edges != 0 counts: the edge weights' values do not change a byte; a node without
 * an edge (the root) comes out as LayerNorm of its input. */
TEST(graph_attention_edges_are_a_mask)
{
    gcn_case c;
    gcn_case_init(&c, 3, 8, 4, 0.0f, 14);
    size_t nx = (size_t)3 * NODES * 8;
    gcn_forward(&c);
    float *first = nn_alloc_floats(nx);
    memcpy(first, c.out, sizeof(float) * nx);
    for (size_t i = 0; i < (size_t)3 * NODES * NODES; i++)
        if (c.rel[i] != 0.0f)
            c.rel[i] = 0.1f + (float)(i % 5);
    gcn_forward(&c);
    CHECK(memcmp(first, c.out, sizeof(float) * nx) == 0);
    float ln[8], mean, rstd;
    const float *w = c.params + vtr_attn_gcn_param_offset(8, 4, VTR_ATTN_GCN_NORM_WEIGHT);
    const float *b = c.params + vtr_attn_gcn_param_offset(8, 4, VTR_ATTN_GCN_NORM_BIAS);
    vtr_layernorm_row_forward(ln, &mean, &rstd, c.x, w, b, 8, VTR_LAYERNORM_EPS);
    CHECK(memcmp(ln, c.out, sizeof ln) == 0); /* the root of item 0 */
    free(first);
    gcn_case_free(&c);
}

TEST(graph_attention_softmax_row_rule)
{
    float s[4] = {1.0f, 5.0f, 2.0f, -3.0f}, edges[4] = {0.5f, 0.0f, 0.5f, 0.0f}, a[4];
    vtr_attn_gcn_softmax_row_forward(a, s, edges, 4);
    float e = expf(-1.0f);
    CHECK(fabsf(a[0] - e / (1 + e)) < 1e-6f && fabsf(a[2] - 1 / (1 + e)) < 1e-6f);
    CHECK(a[1] == 0.0f && a[3] == 0.0f);
    float none[4] = {0};
    vtr_attn_gcn_softmax_row_forward(a, s, none, 4);
    CHECK(a[0] == 0.0f && a[1] == 0.0f && a[2] == 0.0f && a[3] == 0.0f);
}

TEST(graph_attention_backward_accumulates)
{
    gcn_case c;
    gcn_case_init(&c, 3, 8, 4, 0.3f, 15);
    size_t nx = (size_t)3 * NODES * 8, np = vtr_attn_gcn_param_count(8, 4);
    gcn_forward_backward(&c, c.dx);
    float *dx1 = nn_alloc_floats(nx), *dp1 = nn_alloc_floats(np);
    memcpy(dx1, c.dx, sizeof(float) * nx);
    memcpy(dp1, c.dparams, sizeof(float) * np);
    /* from a non-zero start */
    for (size_t i = 0; i < nx; i++)
        c.dx[i] = 1.0f + dx1[i];
    for (size_t i = 0; i < np; i++)
        c.dparams[i] = 2.0f + dp1[i];
    gcn_forward_backward(&c, c.dx);
    for (size_t i = 0; i < nx; i++)
        CHECK_MSG(fabsf(c.dx[i] - (1.0f + 2 * dx1[i])) < 1e-5f, "dx[%zu]", i);
    for (size_t i = 0; i < np; i++)
        CHECK_MSG(fabsf(c.dparams[i] - (2.0f + 2 * dp1[i])) < 1e-5f, "dparams[%zu]", i);
    /* dx NULL: the parameter gradients alone, the same */
    memset(c.dparams, 0, sizeof(float) * np);
    gcn_forward_backward(&c, NULL);
    CHECK(memcmp(c.dparams, dp1, sizeof(float) * np) == 0);
    free(dx1), free(dp1);
    gcn_case_free(&c);
}

/* Dropout acts on the context: p > 0 changes the output, the stream picks the mask, and
 * nodes without an edge (context 0) are untouched by it. */
TEST(graph_attention_dropout_follows_seed_and_stream)
{
    gcn_case c;
    gcn_case_init(&c, 3, 8, 4, 0.0f, 17);
    size_t nx = (size_t)3 * NODES * 8;
    float *base = nn_alloc_floats(nx), *drop = nn_alloc_floats(nx);
    gcn_forward(&c);
    memcpy(base, c.out, sizeof(float) * nx);
    c.p = 0.5f;
    gcn_forward(&c);
    memcpy(drop, c.out, sizeof(float) * nx);
    CHECK(memcmp(base, drop, sizeof(float) * nx) != 0);
    c.stream++;
    gcn_forward(&c);
    CHECK(memcmp(drop, c.out, sizeof(float) * nx) != 0);
    /* item 2 has no edge at all */
    size_t item = (size_t)NODES * 8;
    CHECK(memcmp(base + 2 * item, c.out + 2 * item, sizeof(float) * item) == 0);
    free(base), free(drop);
    gcn_case_free(&c);
}

/* Large enough for the OpenMP loops to fork. */
TEST(graph_attention_is_deterministic)
{
    int B = 400, D = 16, F = 8;
    size_t nx = (size_t)B * NODES * D, np = vtr_attn_gcn_param_count(D, F);
    float *out[2], *dx[2], *dp[2];
    for (int run = 0; run < 2; run++) {
        gcn_case c;
        gcn_case_init(&c, B, D, F, 0.5f, 16);
        gcn_forward_backward(&c, c.dx);
        out[run] = c.out, dx[run] = c.dx, dp[run] = c.dparams;
        c.out = c.dx = c.dparams = NULL;
        gcn_case_free(&c);
    }
    CHECK(memcmp(out[0], out[1], sizeof(float) * nx) == 0);
    CHECK(memcmp(dx[0], dx[1], sizeof(float) * nx) == 0);
    CHECK(memcmp(dp[0], dp[1], sizeof(float) * np) == 0);
    for (int run = 0; run < 2; run++)
        free(out[run]), free(dx[run]), free(dp[run]);
}

/* ------------------------------------------------------------------------------------- */

/* The layer's fixtures: tests/fixtures/nn/gcn/ (nn_fixture_floats reads tests/fixtures/nn/). */
static float *gcn_fixture(const char *tag, const char *what, size_t n)
{
    char name[96];
    snprintf(name, sizeof name, "gcn/%s_%s", tag, what);
    return nn_fixture_floats(name, n);
}

static void gcn_parity(const char *tag, int B, int D, int F)
{
    size_t nx = (size_t)B * NODES * D, np = vtr_attn_gcn_param_count(D, F);
    float *x = gcn_fixture(tag, "x", nx),
          *rel = gcn_fixture(tag, "rel_edges", (size_t)B * NODES * NODES);
    float *params = gcn_fixture(tag, "params", np), *dout = gcn_fixture(tag, "dout", nx);
    float *out = nn_alloc_floats(nx), *dx = nn_alloc_floats(nx), *dparams = nn_alloc_floats(np);
    void *ws = malloc(vtr_attn_gcn_workspace_size(B, NODES, D, F));
    void *scratch = malloc(vtr_attn_gcn_scratch_size(B, NODES, D, F));
    CHECK(ws && scratch);
    vtr_attn_gcn_forward(out, ws, x, rel, params, B, NODES, D, F, 0.0f, 1, 0, 0);
    vtr_attn_gcn_backward(dx, dparams, scratch, dout, x, params, ws, B, NODES, D, F, 0.0f, 1, 0, 0);
    char name[96];
    snprintf(name, sizeof name, "gcn/%s_out", tag);
    nn_parity_check(name, out, nx);
    snprintf(name, sizeof name, "gcn/%s_dx", tag);
    nn_parity_check(name, dx, nx);
    /* each parameter tensor against its slice of the reference's flat gradient, relative to
     * the slice's largest magnitude; but the key bias's gradient is 0 in exact arithmetic
     * (it adds q_i·bk to every score of row i, and a softmax ignores a shift), so both sides
     * are rounding noise (~1e-7): it is measured against the key weight's gradient. */
    float *ref = gcn_fixture(tag, "dparams", np);
    for (int t = 0; t < VTR_ATTN_GCN_TENSORS; t++) {
        size_t off = vtr_attn_gcn_param_offset(D, F, (vtr_attn_gcn_tensor)t);
        size_t end = vtr_attn_gcn_param_offset(D, F, (vtr_attn_gcn_tensor)(t + 1));
        size_t scale_from = t == VTR_ATTN_GCN_KEY_BIAS
                                ? vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_KEY_WEIGHT)
                                : off;
        double scale = 1e-6, diff = 0.0;
        for (size_t i = scale_from; i < end; i++)
            scale = fmax(scale, fabs(ref[i]));
        for (size_t i = off; i < end; i++)
            diff = fmax(diff, fabs((double)dparams[i] - ref[i]));
        if (getenv("VTR_TEST_VERBOSE"))
            printf("    parity %s d%-24s relative error %.2e\n", tag,
                   vtr_attn_gcn_param_name((vtr_attn_gcn_tensor)t), diff / scale);
        CHECK_MSG(diff / scale <= PARITY_TOL, "%s d%s: relative error %.3g", tag,
                  vtr_attn_gcn_param_name((vtr_attn_gcn_tensor)t), diff / scale);
    }
    free(x), free(rel), free(params), free(dout), free(out), free(dx), free(dparams);
    free(ref), free(ws), free(scratch);
}

TEST(graph_attention_parity_with_pytorch)
{
    gcn_parity("small", 3, 16, 8);
    gcn_parity("wide", 1, 64, 32);
}
