#include "adpool.h"

#include <string.h>

#include "aggregate/set_pooling.h"

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
    return vtr_adpool_workspace_layout_of(B, T, D).total;
}

size_t vtr_adpool_scratch_size(int B, int T, int D)
{
    return vtr_adpool_scratch_layout_of(B, T, D).total;
}

void vtr_adpool_forward(float *out, float *theta, float *omega, void *workspace, const float *inp,
                        const int *lengths, const float *params, int B, int T, int D)
{
    vtr_adpool_workspace_layout l = vtr_adpool_workspace_layout_of(B, T, D);
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
        vtr_set_sort_desc(sort_index + off, inp + off, len, D, len);
        vtr_adpool_columns_forward(emb + (size_t)b * D, delta + off, sorted + off, sort_index + off,
                                   inp + off, len, T, D, 0, D);
    }

    // token level: attention pooling of the sorted rows with the scorer w_tok, no bias
    vtr_attention_pool_forward(tok, theta, sorted, w_tok, NULL, lengths, B, T, D);

    // balance: a softmax over the two pooled vectors' scores
    for (int b = 0; b < B; b++) {
        const float *t = tok + (size_t)b * D, *e = emb + (size_t)b * D;
        float *w = omega + 2 * (size_t)b;
        vtr_adpool_balance_forward(w, t, e, w_bal, D);
        vtr_adpool_mix_columns(out + (size_t)b * D, w[0], t, w[1], e, 0, D);
    }
}

void vtr_adpool_backward(float *dinp, float *dparams, void *scratch, const float *dout,
                         const float *inp, const float *theta, const float *omega,
                         const int *lengths, const float *params, const void *workspace, int B,
                         int T, int D)
{
    vtr_adpool_workspace_layout l = vtr_adpool_workspace_layout_of(B, T, D);
    vtr_adpool_scratch_layout sl = vtr_adpool_scratch_layout_of(B, T, D);
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
        const float *dy = dout + (size_t)b * D, *w = omega + 2 * (size_t)b;
        float *dl = dlogit + 2 * (size_t)b;
        vtr_adpool_balance_backward(dl, dy, tok + (size_t)b * D, emb + (size_t)b * D, w, D);
        vtr_adpool_mix_columns(dtok + (size_t)b * D, w[0], dy, dl[0], w_bal, 0, D);
        vtr_adpool_mix_columns(demb + (size_t)b * D, w[1], dy, dl[1], w_bal, 0, D);
    }
    // w_bal's gradient, summed in item order
    vtr_adpool_balance_dweight_columns(dw_bal, dlogit, tok, emb, B, D, 0, D);

    // token level: attention pooling's backward into the sorted rows and w_tok
    if (dinp)
        memset(dsorted, 0, sizeof(float) * (size_t)B * T * D);
    vtr_attention_pool_backward(dinp ? dsorted : NULL, dw_tok, NULL, dtok, sorted, theta, w_tok,
                                lengths, B, T, D);
    if (!dinp)
        return;

        // the sorted rows' gradients back through the sort, then the embedding level
#pragma omp parallel for schedule(static) if ((long)B * T * D > 32768)
    for (int b = 0; b < B; b++) {
        size_t off = (size_t)b * T * D;
        vtr_adpool_dinp_columns(dinp + off, dsorted + off, sort_index + off, inp + off, delta + off,
                                emb + (size_t)b * D, demb + (size_t)b * D, lengths[b], D, 0, D);
    }
}
