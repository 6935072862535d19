#include "adpool.h"

#include <math.h>
#include <string.h>

#include "aggregate/set_pooling.h"

/* Byte offsets of the workspace's regions. */
typedef struct workspace_layout {
    size_t sort_index; /* int (B,T,D): element at rank k of each dimension, 0 past len */
    size_t sorted;     /* float (B,T,D): u, the sorted rows; zero past len */
    size_t delta;      /* float (B,T,D): embedding-level weights; zero past len */
    size_t tok;        /* float (B,D) */
    size_t emb;        /* float (B,D) */
    size_t total;
} workspace_layout;

static workspace_layout workspace_layout_of(int B, int T, int D)
{
    size_t btd = (size_t)B * T * D, bd = (size_t)B * D;
    workspace_layout l;
    l.sort_index = 0;
    l.sorted = vtr_workspace_align(sizeof(int) * btd);
    l.delta = l.sorted + vtr_workspace_align(sizeof(float) * btd);
    l.tok = l.delta + vtr_workspace_align(sizeof(float) * btd);
    l.emb = l.tok + vtr_workspace_align(sizeof(float) * bd);
    l.total = l.emb + vtr_workspace_align(sizeof(float) * bd);
    return l;
}

/* Byte offsets of the scratch's regions. */
typedef struct scratch_layout {
    size_t dsorted; /* float (B,T,D) */
    size_t dtok;    /* float (B,D) */
    size_t demb;    /* float (B,D) */
    size_t dlogit;  /* float (B,2): gradients of tok · w_bal and emb · w_bal */
    size_t total;
} scratch_layout;

static scratch_layout scratch_layout_of(int B, int T, int D)
{
    size_t btd = (size_t)B * T * D, bd = (size_t)B * D;
    scratch_layout l;
    l.dsorted = 0;
    l.dtok = vtr_workspace_align(sizeof(float) * btd);
    l.demb = l.dtok + vtr_workspace_align(sizeof(float) * bd);
    l.dlogit = l.demb + vtr_workspace_align(sizeof(float) * bd);
    l.total = l.dlogit + vtr_workspace_align(sizeof(float) * 2 * (size_t)B);
    return l;
}

size_t vtr_adpool_param_count(int D)
{
    return 2 * (size_t)D;
}

size_t vtr_adpool_balance_offset(int D)
{
    return (size_t)D;
}

size_t vtr_adpool_workspace_size(int B, int T, int D)
{
    return workspace_layout_of(B, T, D).total;
}

size_t vtr_adpool_scratch_size(int B, int T, int D)
{
    return scratch_layout_of(B, T, D).total;
}

/* Embedding level of one set x (len, D): delta (len, D) = per-dimension softmax over the
 * set, emb (D) = sum_i delta_i x_i, both summed in float in the order of i. */
static void soft_max_pool_set(float *emb, float *delta, const float *x, int len, int D)
{
    for (int d = 0; d < D; d++) {
        float mx = -INFINITY, sum = 0.0f, y = 0.0f;
        for (int i = 0; i < len; i++)
            mx = x[(size_t)i * D + d] > mx ? x[(size_t)i * D + d] : mx;
        for (int i = 0; i < len; i++) {
            float e = expf(x[(size_t)i * D + d] - mx);
            delta[(size_t)i * D + d] = e;
            sum += e;
        }
        float inv = 1.0f / sum;
        for (int i = 0; i < len; i++) {
            float w = delta[(size_t)i * D + d] * inv;
            delta[(size_t)i * D + d] = w;
            y += w * x[(size_t)i * D + d];
        }
        emb[d] = y;
    }
}

void vtr_adpool_forward(float *out, float *theta, float *omega, void *workspace, const float *inp,
                        const int *lengths, const float *params, int B, int T, int D)
{
    workspace_layout l = workspace_layout_of(B, T, D);
    char *ws = workspace;
    int *sort_index = (int *)(ws + l.sort_index);
    float *sorted = (float *)(ws + l.sorted), *delta = (float *)(ws + l.delta);
    float *tok = (float *)(ws + l.tok), *emb = (float *)(ws + l.emb);
    const float *w_tok = params, *w_bal = params + vtr_adpool_balance_offset(D);

    // sort every dimension (u), and the embedding level, per item
#pragma omp parallel for schedule(static) if ((long)B * T * D > 32768)
    for (int b = 0; b < B; b++) {
        int len = lengths[b];
        size_t off = (size_t)b * T * D;
        const float *x = inp + off;
        int *idx = sort_index + off;
        float *u = sorted + off, *dl = delta + off;
        vtr_set_sort_desc(idx, x, len, D, len);
        for (int k = 0; k < len; k++)
            for (int d = 0; d < D; d++)
                u[(size_t)k * D + d] = x[(size_t)idx[(size_t)k * D + d] * D + d];
        size_t pad = (size_t)(T - len) * D;
        memset(idx + (size_t)len * D, 0, sizeof(int) * pad);
        memset(u + (size_t)len * D, 0, sizeof(float) * pad);
        memset(dl + (size_t)len * D, 0, sizeof(float) * pad);
        soft_max_pool_set(emb + (size_t)b * D, dl, x, len, D);
    }

    // token level: attention pooling of the sorted rows with the scorer w_tok, no bias
    vtr_attention_pool_forward(tok, theta, sorted, w_tok, NULL, lengths, B, T, D);

    // balance: a softmax over the two pooled vectors' scores
    for (int b = 0; b < B; b++) {
        const float *t = tok + (size_t)b * D, *e = emb + (size_t)b * D;
        float logit[2] = {vtr_dot(t, w_bal, D), vtr_dot(e, w_bal, D)};
        float *w = omega + 2 * (size_t)b, *y = out + (size_t)b * D;
        vtr_masked_softmax_row_forward(w, logit, 2, 2, 1.0f);
        for (int d = 0; d < D; d++)
            y[d] = w[0] * t[d] + w[1] * e[d];
    }
}

void vtr_adpool_backward(float *dinp, float *dparams, void *scratch, const float *dout,
                         const float *inp, const float *theta, const float *omega,
                         const int *lengths, const float *params, const void *workspace, int B,
                         int T, int D)
{
    workspace_layout l = workspace_layout_of(B, T, D);
    scratch_layout sl = scratch_layout_of(B, T, D);
    const char *ws = workspace;
    char *sc = scratch;
    const int *sort_index = (const int *)(ws + l.sort_index);
    const float *sorted = (const float *)(ws + l.sorted), *delta = (const float *)(ws + l.delta);
    const float *tok = (const float *)(ws + l.tok), *emb = (const float *)(ws + l.emb);
    float *dsorted = (float *)(sc + sl.dsorted), *dtok = (float *)(sc + sl.dtok);
    float *demb = (float *)(sc + sl.demb), *dlogit = (float *)(sc + sl.dlogit);
    const float *w_tok = params, *w_bal = params + vtr_adpool_balance_offset(D);
    float *dw_tok = dparams, *dw_bal = dparams + vtr_adpool_balance_offset(D);

    // balance: d omega_j = dout · pooled_j -> the logits' gradients -> both pooled vectors
    for (int b = 0; b < B; b++) {
        const float *t = tok + (size_t)b * D, *e = emb + (size_t)b * D, *dy = dout + (size_t)b * D;
        const float *w = omega + 2 * (size_t)b;
        float domega[2] = {vtr_dot(dy, t, D), vtr_dot(dy, e, D)};
        float *dl = dlogit + 2 * (size_t)b;
        dl[0] = dl[1] = 0.0f;
        vtr_masked_softmax_row_backward(dl, domega, w, 2, 1.0f);
        float *dt = dtok + (size_t)b * D, *de = demb + (size_t)b * D;
        for (int d = 0; d < D; d++) {
            dt[d] = w[0] * dy[d] + dl[0] * w_bal[d];
            de[d] = w[1] * dy[d] + dl[1] * w_bal[d];
        }
    }
    // w_bal's gradient, summed in item order
    for (int b = 0; b < B; b++) {
        const float *t = tok + (size_t)b * D, *e = emb + (size_t)b * D;
        const float *dl = dlogit + 2 * (size_t)b;
        for (int d = 0; d < D; d++)
            dw_bal[d] += dl[0] * t[d] + dl[1] * e[d];
    }

    // token level: attention pooling's backward into the sorted rows and w_tok
    memset(dsorted, 0, sizeof(float) * (size_t)B * T * D);
    vtr_attention_pool_backward(dinp ? dsorted : NULL, dw_tok, NULL, dtok, sorted, theta, w_tok,
                                lengths, B, T, D);
    if (!dinp)
        return;

        // the sorted rows' gradients back through the sort; the embedding level:
        // d emb_d / d x_id = delta_id (1 + x_id - emb_d)
#pragma omp parallel for schedule(static) if ((long)B * T * D > 32768)
    for (int b = 0; b < B; b++) {
        int len = lengths[b];
        size_t off = (size_t)b * T * D;
        const float *x = inp + off, *du = dsorted + off, *dl = delta + off;
        const float *e = emb + (size_t)b * D, *de = demb + (size_t)b * D;
        const int *idx = sort_index + off;
        float *dx = dinp + off;
        for (int k = 0; k < len; k++)
            for (int d = 0; d < D; d++)
                dx[(size_t)idx[(size_t)k * D + d] * D + d] += du[(size_t)k * D + d];
        for (int i = 0; i < len; i++)
            for (int d = 0; d < D; d++) {
                size_t j = (size_t)i * D + d;
                dx[j] += de[d] * dl[j] * (1.0f + x[j] - e[d]);
            }
    }
}
