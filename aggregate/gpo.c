#include "gpo.h"

#include <string.h>

#include "aggregate/set_pooling.h"
#include "lib/gru.h"
#include "lib/linear.h"
#include "lib/rng.h"
#include "lib/softmax.h"

/* Byte offsets of the workspace's regions. */
typedef struct workspace_layout {
    size_t pe;         /* float (B,T,d_pe): the GRU's input, zero at padded positions */
    size_t gru_out;    /* float (B,T,hidden): directions averaged */
    size_t sort_index; /* int (B,T,D): element at rank k of each dimension, -1 past len */
    size_t gru;        /* the GRU's workspace */
    size_t total;
} workspace_layout;

static workspace_layout workspace_layout_of(int B, int T, int D, int d_pe, int hidden)
{
    size_t bt = (size_t)B * T;
    workspace_layout l;
    l.pe = 0;
    l.gru_out = vtr_workspace_align(sizeof(float) * bt * d_pe);
    l.sort_index = l.gru_out + vtr_workspace_align(sizeof(float) * bt * hidden);
    l.gru = l.sort_index + vtr_workspace_align(sizeof(int) * bt * D);
    l.total = l.gru + vtr_workspace_align(vtr_gru_workspace_size(B, T, d_pe, hidden, 2));
    return l;
}

/* Byte offsets of the scratch's regions. */
typedef struct scratch_layout {
    size_t dgru_out; /* float (B,T,hidden) */
    size_t dweights; /* float (B,T) */
    size_t dscores;  /* float (B,T) */
    size_t gru;      /* the GRU's scratch */
    size_t total;
} scratch_layout;

static scratch_layout scratch_layout_of(int B, int T, int d_pe, int hidden)
{
    size_t bt = (size_t)B * T;
    scratch_layout l;
    l.dgru_out = 0;
    l.dweights = vtr_workspace_align(sizeof(float) * bt * hidden);
    l.dscores = l.dweights + vtr_workspace_align(sizeof(float) * bt);
    l.gru = l.dscores + vtr_workspace_align(sizeof(float) * bt);
    l.total = l.gru + vtr_workspace_align(vtr_gru_scratch_size(B, T, d_pe, hidden, 2));
    return l;
}

size_t vtr_gpo_param_count(int d_pe, int hidden)
{
    return vtr_gru_param_count(d_pe, hidden, 2) + (size_t)hidden;
}

size_t vtr_gpo_linear_offset(int d_pe, int hidden)
{
    return vtr_gru_param_count(d_pe, hidden, 2);
}

size_t vtr_gpo_workspace_size(int B, int T, int D, int d_pe, int hidden)
{
    return workspace_layout_of(B, T, D, d_pe, hidden).total;
}

size_t vtr_gpo_scratch_size(int B, int T, int D, int d_pe, int hidden)
{
    (void)D;
    return scratch_layout_of(B, T, d_pe, hidden).total;
}

void vtr_gpo_positional_encoding(float *pe, int T, int d_pe)
{
    for (int k = 0; k < T; k++)
        for (int i = 0; i < d_pe; i++)
            pe[(size_t)k * d_pe + i] = vtr_gpo_positional_encoding_at(k, i, d_pe);
}

void vtr_gpo_forward(float *out, float *weights, void *workspace, const float *inp,
                     const int *lengths, const float *params, int B, int T, int D, int d_pe,
                     int hidden)
{
    workspace_layout l = workspace_layout_of(B, T, D, d_pe, hidden);
    char *ws = workspace;
    float *pe = (float *)(ws + l.pe), *gru_out = (float *)(ws + l.gru_out);
    int *sort_index = (int *)(ws + l.sort_index);
    size_t bt = (size_t)B * T;

    // 1. positional encodings of the real positions, zero elsewhere
    vtr_gpo_positional_encoding(pe, T, d_pe);
    for (int b = 1; b < B; b++)
        memcpy(pe + (size_t)b * T * d_pe, pe, sizeof(float) * (size_t)T * d_pe);
    for (int b = 0; b < B; b++)
        memset(pe + ((size_t)b * T + lengths[b]) * d_pe, 0,
               sizeof(float) * (size_t)(T - lengths[b]) * d_pe);

    // 2-3. BiGRU (averaged) -> linear -> masked softmax with temperature
    vtr_gru_forward(gru_out, ws + l.gru, pe, lengths, params, B, T, d_pe, hidden, 2,
                    VTR_GRU_AVERAGE);
    vtr_linear_forward(weights, gru_out, params + vtr_gpo_linear_offset(d_pe, hidden), NULL,
                       (int)bt, hidden, 1);
    vtr_masked_softmax_forward(weights, weights, lengths, B, T, VTR_GPO_TEMPERATURE);

    // 4-5. per-dimension descending sort, weighted sum
#pragma omp parallel for schedule(static) if ((long)B * T * D > 32768)
    for (int b = 0; b < B; b++) {
        int len = lengths[b];
        const float *x = inp + (size_t)b * T * D;
        const float *w = weights + (size_t)b * T;
        int *idx = sort_index + (size_t)b * T * D;
        float *y = out + (size_t)b * D;
        vtr_set_sort_desc(idx, x, len, D, len);
        for (int k = len; k < T; k++)
            for (int d = 0; d < D; d++)
                idx[(size_t)k * D + d] = -1;
        vtr_gpo_pool_columns(y, x, w, idx, len, D, 0, D);
    }
}

void vtr_gpo_backward(float *dinp, float *dparams, void *scratch, const float *dout,
                      const float *inp, const float *weights, const int *lengths,
                      const float *params, const void *workspace, int B, int T, int D, int d_pe,
                      int hidden)
{
    workspace_layout l = workspace_layout_of(B, T, D, d_pe, hidden);
    scratch_layout sl = scratch_layout_of(B, T, d_pe, hidden);
    const char *ws = workspace;
    char *sc = scratch;
    const float *pe = (const float *)(ws + l.pe);
    const float *gru_out = (const float *)(ws + l.gru_out);
    const int *sort_index = (const int *)(ws + l.sort_index);
    float *dgru_out = (float *)(sc + sl.dgru_out), *dweights = (float *)(sc + sl.dweights);
    float *dscores = (float *)(sc + sl.dscores);
    size_t bt = (size_t)B * T;

    // weighted sum and sort: dweights[b,k] = sum_d dout[b,d] sorted[b,k,d];
    // dinp[b, index[b,k,d], d] += weights[b,k] dout[b,d]
#pragma omp parallel for schedule(static) if ((long)B * T * D > 32768)
    for (int b = 0; b < B; b++) {
        int len = lengths[b];
        const float *x = inp + (size_t)b * T * D;
        const float *w = weights + (size_t)b * T;
        const float *dy = dout + (size_t)b * D;
        const int *idx = sort_index + (size_t)b * T * D;
        float *dw = dweights + (size_t)b * T;
        for (int k = 0; k < T; k++)
            dw[k] = k < len ? vtr_gpo_dweight_at(x, dy, idx, D, k) : 0.0f;
        if (dinp)
            vtr_gpo_dinp_columns(dinp + (size_t)b * T * D, w, dy, idx, len, D, 0, D);
    }

    // softmax -> linear -> GRU (its input, the encodings, wants no gradient)
    memset(dscores, 0, sizeof(float) * bt);
    vtr_masked_softmax_backward(dscores, dweights, weights, lengths, B, T, VTR_GPO_TEMPERATURE);
    memset(dgru_out, 0, sizeof(float) * bt * hidden);
    size_t lin = vtr_gpo_linear_offset(d_pe, hidden);
    vtr_linear_backward(dgru_out, dparams + lin, NULL, dscores, gru_out, params + lin, (int)bt,
                        hidden, 1);
    vtr_gru_backward(NULL, dparams, sc + sl.gru, dgru_out, pe, lengths, params, ws + l.gru, B, T,
                     d_pe, hidden, 2, VTR_GRU_AVERAGE);
}

int vtr_gpo_augment_set(int *keep, int n, float p, uint64_t seed, uint64_t stream)
{
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (vtr_philox_uniform_at(seed, stream, (uint64_t)i) >= p)
            keep[kept++] = i;
    if (kept == 0) {
        for (int i = 0; i < n; i++)
            keep[i] = i;
        kept = n;
    }
    return kept;
}

int vtr_gpo_augment_caption(int *out, const int *ids, int n, int vocab_size, int mask_id, float p,
                            uint64_t seed, uint64_t stream)
{
    int len = 0;
    for (int i = 0; i < n; i++) {
        float u = vtr_philox_uniform_at(seed, stream, 2 * (uint64_t)i);
        if (u >= p) {
            out[len++] = ids[i];
            continue;
        }
        float v = u / p;
        if (v < 0.5f) {
            out[len++] = mask_id;
        } else if (v < 0.6f) {
            float r = vtr_philox_uniform_at(seed, stream, 2 * (uint64_t)i + 1);
            int id = (int)(r * (float)vocab_size);
            out[len++] = id < vocab_size ? id : vocab_size - 1;
        } /* else deleted */
    }
    if (len == 0) {
        memcpy(out, ids, sizeof(int) * (size_t)n);
        len = n;
    }
    return len;
}
