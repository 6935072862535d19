#include "gpo_generators.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/gpo.h"
#include "aggregate/set_pooling.h"
#include "lib/activation.h"
#include "lib/gru.h"
#include "lib/linear.h"
#include "lib/rng.h"
#include "lib/softmax.h"

/* ---- sorted weighted pooling -------------------------------------------------------------- */

void vtr_sorted_pool_forward(float *out, int *sort_index, const float *inp, const float *weights,
                             const int *lengths, int B, int T, int D)
{
#pragma omp parallel for schedule(static) if ((long)B * T * D > 32768)
    for (int b = 0; b < B; b++) {
        int len = lengths[b];
        const float *x = inp + (size_t)b * T * D;
        int *idx = sort_index + (size_t)b * T * D;
        vtr_set_sort_desc(idx, x, len, D, len);
        for (size_t i = (size_t)len * D; i < (size_t)T * D; i++)
            idx[i] = -1;
        vtr_gpo_pool_columns(out + (size_t)b * D, x, weights + (size_t)b * T, idx, len, D, 0, D);
    }
}

void vtr_sorted_pool_backward(float *dinp, float *dweights, const float *dout, const float *inp,
                              const float *weights, const int *sort_index, const int *lengths,
                              int B, int T, int D)
{
#pragma omp parallel for schedule(static) if ((long)B * T * D > 32768)
    for (int b = 0; b < B; b++) {
        int len = lengths[b];
        const float *x = inp + (size_t)b * T * D;
        const float *dy = dout + (size_t)b * D;
        const int *idx = sort_index + (size_t)b * T * D;
        for (int k = 0; k < len; k++)
            dweights[(size_t)b * T + k] += vtr_gpo_dweight_at(x, dy, idx, D, k);
        if (dinp)
            vtr_gpo_dinp_columns(dinp + (size_t)b * T * D, weights + (size_t)b * T, dy, idx, len, D,
                                 0, D);
    }
}

/* ---- interpolated scores ------------------------------------------------------------------ */

/* Where rank k of a set of n falls on a vector of P points: left point *i, weight *f of
 * the right one. */
static void interp_position(int k, int n, int P, int *i, float *f)
{
    float x = n > 1 ? (float)k * (float)(P - 1) / (float)(n - 1) : 0.0f;
    int left = (int)x;
    if (left > P - 2)
        left = P - 2;
    *i = left;
    *f = x - (float)left;
}

void vtr_interp_scores_forward(float *scores, const float *v, const int *lengths, int B, int T,
                               int P)
{
    for (int b = 0; b < B; b++) {
        float *s = scores + (size_t)b * T;
        for (int k = 0; k < lengths[b]; k++) {
            int i;
            float f;
            interp_position(k, lengths[b], P, &i, &f);
            s[k] = (1.0f - f) * v[i] + f * v[i + 1];
        }
        for (int k = lengths[b]; k < T; k++)
            s[k] = 0.0f;
    }
}

void vtr_interp_scores_backward(float *dv, const float *dscores, const int *lengths, int B, int T,
                                int P)
{
    for (int b = 0; b < B; b++) {
        const float *ds = dscores + (size_t)b * T;
        for (int k = 0; k < lengths[b]; k++) {
            int i;
            float f;
            interp_position(k, lengths[b], P, &i, &f);
            dv[i] += (1.0f - f) * ds[k];
            dv[i + 1] += f * ds[k];
        }
    }
}

/* ---- sin/cos + MLP scores ----------------------------------------------------------------- */

size_t vtr_pe_mlp_param_count(int d_pe, int hidden)
{
    return (size_t)hidden * d_pe + 2 * (size_t)hidden;
}

typedef struct pe_mlp_layout {
    size_t pe, hid, s, total; /* float (T,d_pe), (T,hidden) after ReLU, (T) */
} pe_mlp_layout;

static pe_mlp_layout pe_mlp_layout_of(int T, int d_pe, int hidden)
{
    pe_mlp_layout l;
    l.pe = 0;
    l.hid = vtr_workspace_align(sizeof(float) * (size_t)T * d_pe);
    l.s = l.hid + vtr_workspace_align(sizeof(float) * (size_t)T * hidden);
    l.total = l.s + vtr_workspace_align(sizeof(float) * (size_t)T);
    return l;
}

size_t vtr_pe_mlp_workspace_size(int T, int d_pe, int hidden)
{
    return pe_mlp_layout_of(T, d_pe, hidden).total;
}

size_t vtr_pe_mlp_scratch_size(int T, int hidden)
{
    /* ds (T), dhid (T,hidden), dpre (T,hidden) */
    return vtr_workspace_align(sizeof(float) * (size_t)T) +
           2 * vtr_workspace_align(sizeof(float) * (size_t)T * hidden);
}

void vtr_pe_mlp_scores_forward(float *scores, void *workspace, const int *lengths,
                               const float *params, int B, int T, int d_pe, int hidden)
{
    pe_mlp_layout l = pe_mlp_layout_of(T, d_pe, hidden);
    char *ws = workspace;
    float *pe = (float *)(ws + l.pe), *hid = (float *)(ws + l.hid), *s = (float *)(ws + l.s);
    const float *w1 = params, *b1 = params + (size_t)hidden * d_pe, *w2 = b1 + hidden;

    vtr_gpo_positional_encoding(pe, T, d_pe);
    vtr_linear_forward(hid, pe, w1, b1, T, d_pe, hidden);
    vtr_relu_forward(hid, hid, (size_t)T * hidden);
    vtr_linear_forward(s, hid, w2, NULL, T, hidden, 1);
    for (int b = 0; b < B; b++)
        for (int k = 0; k < T; k++)
            scores[(size_t)b * T + k] = k < lengths[b] ? s[k] : 0.0f;
}

void vtr_pe_mlp_scores_backward(float *dparams, void *scratch, const float *dscores,
                                const int *lengths, const float *params, const void *workspace,
                                int B, int T, int d_pe, int hidden)
{
    pe_mlp_layout l = pe_mlp_layout_of(T, d_pe, hidden);
    const char *ws = workspace;
    const float *pe = (const float *)(ws + l.pe), *hid = (const float *)(ws + l.hid);
    const float *w1 = params, *w2 = params + (size_t)hidden * d_pe + hidden;
    float *dw1 = dparams, *db1 = dparams + (size_t)hidden * d_pe, *dw2 = db1 + hidden;
    float *ds = scratch;
    float *dhid = (float *)((char *)scratch + vtr_workspace_align(sizeof(float) * (size_t)T));
    float *dpre = (float *)((char *)dhid + vtr_workspace_align(sizeof(float) * (size_t)T * hidden));

    /* every item shares the per-rank scores: sum their gradients, in the order of b */
    memset(ds, 0, sizeof(float) * (size_t)T);
    for (int b = 0; b < B; b++)
        for (int k = 0; k < lengths[b]; k++)
            ds[k] += dscores[(size_t)b * T + k];
    memset(dhid, 0, sizeof(float) * (size_t)T * hidden);
    vtr_linear_backward(dhid, dw2, NULL, ds, hid, w2, T, hidden, 1);
    memset(dpre, 0, sizeof(float) * (size_t)T * hidden);
    vtr_relu_backward(dpre, dhid, hid, (size_t)T * hidden);
    vtr_linear_backward(NULL, dw1, db1, dpre, pe, w1, T, d_pe, hidden);
}

/* ---- index + BiGRU scores ----------------------------------------------------------------- */

size_t vtr_index_bigru_gru_offset(int max_len, int d_pe)
{
    return (size_t)max_len * d_pe;
}

size_t vtr_index_bigru_linear_offset(int max_len, int d_pe, int hidden)
{
    return vtr_index_bigru_gru_offset(max_len, d_pe) + vtr_gru_param_count(d_pe, hidden, 2);
}

size_t vtr_index_bigru_param_count(int max_len, int d_pe, int hidden)
{
    return vtr_index_bigru_linear_offset(max_len, d_pe, hidden) + (size_t)hidden;
}

typedef struct index_bigru_layout {
    size_t x, gru_out, gru, total; /* float (B,T,d_pe), float (B,T,hidden), the GRU's */
} index_bigru_layout;

static index_bigru_layout index_bigru_layout_of(int B, int T, int d_pe, int hidden)
{
    size_t bt = (size_t)B * T;
    index_bigru_layout l;
    l.x = 0;
    l.gru_out = vtr_workspace_align(sizeof(float) * bt * d_pe);
    l.gru = l.gru_out + vtr_workspace_align(sizeof(float) * bt * hidden);
    l.total = l.gru + vtr_workspace_align(vtr_gru_workspace_size(B, T, d_pe, hidden, 2));
    return l;
}

size_t vtr_index_bigru_workspace_size(int B, int T, int d_pe, int hidden)
{
    return index_bigru_layout_of(B, T, d_pe, hidden).total;
}

/* scratch: dgru_out (B,T,hidden), dx (B,T,d_pe), the GRU's scratch */
size_t vtr_index_bigru_scratch_size(int B, int T, int d_pe, int hidden)
{
    size_t bt = (size_t)B * T;
    return vtr_workspace_align(sizeof(float) * bt * hidden) +
           vtr_workspace_align(sizeof(float) * bt * d_pe) +
           vtr_workspace_align(vtr_gru_scratch_size(B, T, d_pe, hidden, 2));
}

void vtr_index_bigru_scores_forward(float *scores, void *workspace, const int *lengths,
                                    const float *params, int B, int T, int max_len, int d_pe,
                                    int hidden)
{
    index_bigru_layout l = index_bigru_layout_of(B, T, d_pe, hidden);
    char *ws = workspace;
    float *x = (float *)(ws + l.x), *gru_out = (float *)(ws + l.gru_out);
    const float *gru = params + vtr_index_bigru_gru_offset(max_len, d_pe);
    const float *lin = params + vtr_index_bigru_linear_offset(max_len, d_pe, hidden);

    for (int b = 0; b < B; b++) {
        float *xb = x + (size_t)b * T * d_pe;
        size_t real = (size_t)lengths[b] * d_pe;
        memcpy(xb, params, sizeof(float) * real); /* rows 0 .. len-1 of the table */
        memset(xb + real, 0, sizeof(float) * ((size_t)T * d_pe - real));
    }
    vtr_gru_forward(gru_out, ws + l.gru, x, lengths, gru, B, T, d_pe, hidden, 2, VTR_GRU_AVERAGE);
    /* padded rows of gru_out are zero and the layer has no bias: padded scores are 0 */
    vtr_linear_forward(scores, gru_out, lin, NULL, B * T, hidden, 1);
}

void vtr_index_bigru_scores_backward(float *dparams, void *scratch, const float *dscores,
                                     const int *lengths, const float *params, const void *workspace,
                                     int B, int T, int max_len, int d_pe, int hidden)
{
    index_bigru_layout l = index_bigru_layout_of(B, T, d_pe, hidden);
    const char *ws = workspace;
    const float *x = (const float *)(ws + l.x), *gru_out = (const float *)(ws + l.gru_out);
    size_t bt = (size_t)B * T, go = vtr_index_bigru_gru_offset(max_len, d_pe);
    size_t lo = vtr_index_bigru_linear_offset(max_len, d_pe, hidden);
    float *dgru_out = scratch;
    float *dx = (float *)((char *)scratch + vtr_workspace_align(sizeof(float) * bt * hidden));
    char *gru_scratch = (char *)dx + vtr_workspace_align(sizeof(float) * bt * d_pe);

    /* padded rows: gru_out is zero there (no weight gradient) and the GRU ignores them */
    memset(dgru_out, 0, sizeof(float) * bt * hidden);
    vtr_linear_backward(dgru_out, dparams + lo, NULL, dscores, gru_out, params + lo, (int)bt,
                        hidden, 1);
    memset(dx, 0, sizeof(float) * bt * d_pe);
    vtr_gru_backward(dx, dparams + go, gru_scratch, dgru_out, x, lengths, params + go, ws + l.gru,
                     B, T, d_pe, hidden, 2, VTR_GRU_AVERAGE);
    for (int b = 0; b < B; b++) /* table row k gathers the gradients of every item's rank k */
        for (size_t i = 0; i < (size_t)lengths[b] * d_pe; i++)
            dparams[i] += dx[(size_t)b * T * d_pe + i];
}

/* ---- generators --------------------------------------------------------------------------- */

static const char *const generator_names[VTR_GPO_GEN_COUNT] = {
    [VTR_GPO_GEN_SINCOS_BIGRU] = "sincos-bigru",
    [VTR_GPO_GEN_INTERP] = "interp",
    [VTR_GPO_GEN_SINCOS_MLP] = "sincos-mlp",
    [VTR_GPO_GEN_INDEX_BIGRU] = "index-bigru",
};

const char *vtr_gpo_generator_name(vtr_gpo_generator_kind kind)
{
    return (unsigned)kind < VTR_GPO_GEN_COUNT ? generator_names[kind] : "?";
}

vtr_status vtr_gpo_generator_parse(const char *name, vtr_gpo_generator_kind *out, vtr_error *err)
{
    for (int k = 0; k < VTR_GPO_GEN_COUNT; k++)
        if (strcmp(name, generator_names[k]) == 0) {
            *out = (vtr_gpo_generator_kind)k;
            return VTR_OK;
        }
    char shown[64];
    return vtr_fail(err, VTR_ERR_INVALID,
                    "unknown generator '%s' (expected sincos-bigru, interp, sincos-mlp or "
                    "index-bigru)",
                    vtr_printable(name, strlen(name), shown, sizeof shown));
}

vtr_gpo_generator_config vtr_gpo_generator_defaults(vtr_gpo_generator_kind kind)
{
    vtr_gpo_generator_config c = {
        .kind = kind,
        .d_pe = VTR_GPO_D_PE,
        .hidden = VTR_GPO_HIDDEN,
        .interp_points = 21,
        .max_len = 128,
    };
    return c;
}

void vtr_gpo_generator_free(vtr_gpo_generator *g)
{
    vtr_param_set_free(&g->params);
    free(g->weights), free(g->scores), free(g->sort_index), free(g->dweights);
    free(g->dscores), free(g->workspace), free(g->scratch), free(g->lengths), free(g->probe);
    memset(g, 0, sizeof *g);
}

/* Adds a trainable entry "prefix.name" of the given shape. */
static vtr_status add_tensor(vtr_param_set *ps, const char *prefix, const char *name, int ndim,
                             int64_t d0, int64_t d1, vtr_error *err)
{
    char full[VTR_PARAM_NAME_MAX];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    int64_t shape[2] = {d0, d1};
    return vtr_param_set_add(ps, full, VTR_F32, true, ndim, shape, err);
}

/* The GRU's eight tensors, "prefix" + PyTorch's names, in the flat layout's order. */
static vtr_status add_gru(vtr_param_set *ps, const char *prefix, int D, int H, vtr_error *err)
{
    for (int dir = 0; dir < 2; dir++) {
        static const vtr_gru_tensor tensors[4] = {VTR_GRU_WEIGHT_IH, VTR_GRU_WEIGHT_HH,
                                                  VTR_GRU_BIAS_IH, VTR_GRU_BIAS_HH};
        for (int t = 0; t < 4; t++) {
            const char *name = vtr_gru_param_name(dir, tensors[t]);
            bool weight = tensors[t] == VTR_GRU_WEIGHT_IH || tensors[t] == VTR_GRU_WEIGHT_HH;
            int columns = tensors[t] == VTR_GRU_WEIGHT_IH ? D : H; /* (3H, D), (3H, H), (3H) */
            vtr_status st = add_tensor(ps, prefix, name, weight ? 2 : 1, 3 * H, columns, err);
            if (st != VTR_OK)
                return st;
        }
    }
    return VTR_OK;
}

static void fill_uniform(float *x, size_t n, float bound, vtr_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (2.0f * vtr_rng_uniform(rng) - 1.0f) * bound;
}

static void fill_normal(float *x, size_t n, vtr_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = vtr_rng_normal(rng);
}

/* Entries and initial values of each kind's parameters; the flat layout the ops expect. */
static vtr_status build_params(vtr_gpo_generator *g, uint64_t seed, vtr_error *err)
{
    const vtr_gpo_generator_config *c = &g->cfg;
    vtr_param_set *ps = &g->params;
    int P = c->interp_points, E = c->d_pe, H = c->hidden;
    vtr_status st = VTR_OK;
    switch (c->kind) {
    case VTR_GPO_GEN_SINCOS_BIGRU:
        if ((st = add_gru(ps, "gpool.gru.", E, H, err)) == VTR_OK)
            st = add_tensor(ps, "gpool.", "linear.weight", 2, 1, H, err);
        break;
    case VTR_GPO_GEN_INTERP: st = add_tensor(ps, "gpool.", "interp.weight", 1, P, 0, err); break;
    case VTR_GPO_GEN_SINCOS_MLP:
        if ((st = add_tensor(ps, "gpool.", "mlp.0.weight", 2, H, E, err)) == VTR_OK &&
            (st = add_tensor(ps, "gpool.", "mlp.0.bias", 1, H, 0, err)) == VTR_OK)
            st = add_tensor(ps, "gpool.", "mlp.2.weight", 2, 1, H, err);
        break;
    case VTR_GPO_GEN_INDEX_BIGRU:
        if ((st = add_tensor(ps, "gpool.", "index_embed.weight", 2, c->max_len, E, err)) ==
                VTR_OK &&
            (st = add_gru(ps, "gpool.gru.", E, H, err)) == VTR_OK)
            st = add_tensor(ps, "gpool.", "linear.weight", 2, 1, H, err);
        break;
    }
    if (st != VTR_OK || (st = vtr_param_set_finalize(ps, err)) != VTR_OK)
        return st;

    vtr_rng rng;
    vtr_rng_init(&rng, seed, 1000 + (uint64_t)c->kind);
    float *p = ps->data;
    float gru_bound = 1.0f / sqrtf((float)H), lin_bound = 1.0f / sqrtf((float)H);
    switch (c->kind) {
    case VTR_GPO_GEN_SINCOS_BIGRU:
        fill_uniform(p, vtr_gru_param_count(E, H, 2), gru_bound, &rng);
        fill_uniform(p + vtr_gpo_linear_offset(E, H), (size_t)H, lin_bound, &rng);
        break;
    case VTR_GPO_GEN_INTERP: /* scores of the size the other generators start with */
        fill_uniform(p, (size_t)P, 0.1f, &rng);
        break;
    case VTR_GPO_GEN_SINCOS_MLP:
        fill_uniform(p, (size_t)H * E + H, 1.0f / sqrtf((float)E), &rng);
        fill_uniform(p + (size_t)H * E + H, (size_t)H, lin_bound, &rng);
        break;
    case VTR_GPO_GEN_INDEX_BIGRU:
        fill_normal(p, (size_t)c->max_len * E, &rng);
        fill_uniform(p + vtr_index_bigru_gru_offset(c->max_len, E), vtr_gru_param_count(E, H, 2),
                     gru_bound, &rng);
        fill_uniform(p + vtr_index_bigru_linear_offset(c->max_len, E, H), (size_t)H, lin_bound,
                     &rng);
        break;
    }
    return VTR_OK;
}

static size_t generator_workspace_size(const vtr_gpo_generator_config *c, int B, int T, int D)
{
    switch (c->kind) {
    case VTR_GPO_GEN_SINCOS_BIGRU: return vtr_gpo_workspace_size(B, T, D, c->d_pe, c->hidden);
    case VTR_GPO_GEN_SINCOS_MLP: return vtr_pe_mlp_workspace_size(T, c->d_pe, c->hidden);
    case VTR_GPO_GEN_INDEX_BIGRU: return vtr_index_bigru_workspace_size(B, T, c->d_pe, c->hidden);
    default: return 1;
    }
}

static size_t generator_scratch_size(const vtr_gpo_generator_config *c, int B, int T, int D)
{
    switch (c->kind) {
    case VTR_GPO_GEN_SINCOS_BIGRU: return vtr_gpo_scratch_size(B, T, D, c->d_pe, c->hidden);
    case VTR_GPO_GEN_SINCOS_MLP: return vtr_pe_mlp_scratch_size(T, c->hidden);
    case VTR_GPO_GEN_INDEX_BIGRU: return vtr_index_bigru_scratch_size(B, T, c->d_pe, c->hidden);
    default: return 1;
    }
}

vtr_status vtr_gpo_generator_init(vtr_gpo_generator *g, const vtr_gpo_generator_config *cfg,
                                  int max_B, int max_T, int max_D, uint64_t seed, vtr_error *err)
{
    memset(g, 0, sizeof *g);
    if ((unsigned)cfg->kind >= VTR_GPO_GEN_COUNT)
        return vtr_fail(err, VTR_ERR_INVALID, "unknown generator kind %d", (int)cfg->kind);
    if (max_B < 1 || max_T < 1 || max_D < 1 || max_B > 1 << 16 || max_T > 1 << 16 ||
        max_D > 1 << 16)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "%s: capacity %d sets x %d elements x %d dims "
                        "out of range",
                        vtr_gpo_generator_name(cfg->kind), max_B, max_T, max_D);
    if (cfg->d_pe < 2 || cfg->d_pe > 4096 || cfg->hidden < 1 || cfg->hidden > 4096)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "%s: d_pe %d and hidden %d must be 2..4096 and "
                        "1..4096",
                        vtr_gpo_generator_name(cfg->kind), cfg->d_pe, cfg->hidden);
    if (cfg->kind == VTR_GPO_GEN_INTERP && (cfg->interp_points < 2 || cfg->interp_points > 1 << 16))
        return vtr_fail(err, VTR_ERR_INVALID, "interp: %d points (need 2..65536)",
                        cfg->interp_points);
    if (cfg->kind == VTR_GPO_GEN_INDEX_BIGRU && (cfg->max_len < max_T || cfg->max_len > 1 << 16))
        return vtr_fail(err, VTR_ERR_INVALID,
                        "index-bigru: index table of %d rows cannot "
                        "score sets of %d",
                        cfg->max_len, max_T);
    g->cfg = *cfg;
    g->max_B = max_B, g->max_T = max_T, g->max_D = max_D;
    vtr_status st = build_params(g, seed, err);
    if (st != VTR_OK) {
        vtr_error_context(err, "%s", vtr_gpo_generator_name(cfg->kind));
        vtr_gpo_generator_free(g);
        return st;
    }
    size_t bt = (size_t)max_B * max_T;
    g->weights = calloc(bt, sizeof(float));
    g->scores = calloc(bt, sizeof(float));
    g->dweights = calloc(bt, sizeof(float));
    g->dscores = calloc(bt, sizeof(float));
    g->sort_index = calloc(bt * max_D, sizeof(int));
    g->workspace = malloc(generator_workspace_size(cfg, max_B, max_T, max_D));
    g->scratch = malloc(generator_scratch_size(cfg, max_B, max_T, max_D));
    g->lengths = calloc((size_t)max_B, sizeof(int));
    g->probe = calloc((size_t)max_T, sizeof(float));
    if (!g->weights || !g->scores || !g->dweights || !g->dscores || !g->sort_index ||
        !g->workspace || !g->scratch || !g->lengths || !g->probe) {
        vtr_gpo_generator_free(g);
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory for its buffers",
                        vtr_gpo_generator_name(cfg->kind));
    }
    return VTR_OK;
}

vtr_status vtr_gpo_generator_forward(vtr_gpo_generator *g, float *out, const float *inp,
                                     const int *lengths, int B, int T, int D, vtr_error *err)
{
    const vtr_gpo_generator_config *c = &g->cfg;
    if (B < 1 || T < 1 || D < 1 || B > g->max_B || T > g->max_T || D > g->max_D)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "%s: batch %d x %d x %d exceeds the capacity "
                        "%d x %d x %d",
                        vtr_gpo_generator_name(c->kind), B, T, D, g->max_B, g->max_T, g->max_D);
    vtr_status st = vtr_nn_check_lengths(lengths, B, T, err);
    if (st != VTR_OK)
        return st;
    g->B = B, g->T = T, g->D = D;
    memcpy(g->lengths, lengths, sizeof(int) * (size_t)B);
    const float *p = g->params.data;
    switch (c->kind) {
    case VTR_GPO_GEN_SINCOS_BIGRU:
        vtr_gpo_forward(out, g->weights, g->workspace, inp, lengths, p, B, T, D, c->d_pe,
                        c->hidden);
        return VTR_OK;
    case VTR_GPO_GEN_INTERP:
        vtr_interp_scores_forward(g->scores, p, lengths, B, T, c->interp_points);
        break;
    case VTR_GPO_GEN_SINCOS_MLP:
        vtr_pe_mlp_scores_forward(g->scores, g->workspace, lengths, p, B, T, c->d_pe, c->hidden);
        break;
    case VTR_GPO_GEN_INDEX_BIGRU:
        vtr_index_bigru_scores_forward(g->scores, g->workspace, lengths, p, B, T, c->max_len,
                                       c->d_pe, c->hidden);
        break;
    }
    vtr_masked_softmax_forward(g->weights, g->scores, lengths, B, T, VTR_GPO_TEMPERATURE);
    vtr_sorted_pool_forward(out, g->sort_index, inp, g->weights, lengths, B, T, D);
    return VTR_OK;
}

void vtr_gpo_generator_backward(vtr_gpo_generator *g, const float *dout, const float *inp)
{
    const vtr_gpo_generator_config *c = &g->cfg;
    int B = g->B, T = g->T, D = g->D;
    const int *lengths = g->lengths;
    const float *p = g->params.data;
    float *dp = g->params.grad;
    size_t bt = (size_t)B * T;
    if (c->kind == VTR_GPO_GEN_SINCOS_BIGRU) {
        vtr_gpo_backward(NULL, dp, g->scratch, dout, inp, g->weights, lengths, p, g->workspace, B,
                         T, D, c->d_pe, c->hidden);
        return;
    }
    memset(g->dweights, 0, sizeof(float) * bt);
    vtr_sorted_pool_backward(NULL, g->dweights, dout, inp, g->weights, g->sort_index, lengths, B, T,
                             D);
    memset(g->dscores, 0, sizeof(float) * bt);
    vtr_masked_softmax_backward(g->dscores, g->dweights, g->weights, lengths, B, T,
                                VTR_GPO_TEMPERATURE);
    switch (c->kind) {
    case VTR_GPO_GEN_INTERP:
        vtr_interp_scores_backward(dp, g->dscores, lengths, B, T, c->interp_points);
        break;
    case VTR_GPO_GEN_SINCOS_MLP:
        vtr_pe_mlp_scores_backward(dp, g->scratch, g->dscores, lengths, p, g->workspace, B, T,
                                   c->d_pe, c->hidden);
        break;
    case VTR_GPO_GEN_INDEX_BIGRU:
        vtr_index_bigru_scores_backward(dp, g->scratch, g->dscores, lengths, p, g->workspace, B, T,
                                        c->max_len, c->d_pe, c->hidden);
        break;
    default: break;
    }
}

vtr_status vtr_gpo_generator_coefficients(vtr_gpo_generator *g, int n, float *w, vtr_error *err)
{
    if (n < 1 || n > g->max_T)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: no coefficients for a set of %d (1 .. %d)",
                        vtr_gpo_generator_name(g->cfg.kind), n, g->max_T);
    float out;
    vtr_status st = vtr_gpo_generator_forward(g, &out, g->probe, &n, 1, n, 1, err);
    if (st != VTR_OK)
        return st;
    memcpy(w, g->weights, sizeof(float) * (size_t)n);
    return VTR_OK;
}
