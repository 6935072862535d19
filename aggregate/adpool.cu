// CUDA side of aggregate/adpool.h: the CPU's steps with the CPU's VTR_HD functions, one thread
// per (item, dimension) for the sort, the embedding level, the mix and the input gradient
// (each thread owns one column of its item: a column's ranks are distinct elements), one per
// item for the balance weights, one per dimension for w_bal's gradient (summed in item
// order); the token level is the CUDA attention pooling. No atomics: the same sums in the
// same order, and the same sort orders, as the CPU.
#include "aggregate/adpool.h"
#include "aggregate/set_pooling.h"
#include "lib/cuda_launch.h"
#include "lib/nn_cuda.h"

// The workspace's regions (vtr_adpool_workspace_layout_of), as device pointers.
struct adpool_workspace {
    int *sort_index;
    float *sorted, *delta, *tok, *emb;
};

static adpool_workspace adpool_workspace_of(const void *workspace, int B, int T, int D)
{
    vtr_adpool_workspace_layout l = vtr_adpool_workspace_layout_of(B, T, D);
    char *ws = (char *)workspace;
    adpool_workspace w = {(int *)(ws + l.sort_index), (float *)(ws + l.sorted),
                          (float *)(ws + l.delta), (float *)(ws + l.tok), (float *)(ws + l.emb)};
    return w;
}

// The scratch's regions (vtr_adpool_scratch_layout_of), as device pointers.
struct adpool_scratch {
    float *dsorted, *dtok, *demb, *dlogit;
};

static adpool_scratch adpool_scratch_of(void *scratch, int B, int T, int D)
{
    vtr_adpool_scratch_layout l = vtr_adpool_scratch_layout_of(B, T, D);
    char *sc = (char *)scratch;
    adpool_scratch s = {(float *)(sc + l.dsorted), (float *)(sc + l.dtok), (float *)(sc + l.demb),
                        (float *)(sc + l.dlogit)};
    return s;
}

// sort_index, sorted, delta (B,T,D), emb (B,D), one (b, d) per thread: sort dimension d of
// item b, then its sorted column and embedding level
__global__ static void adpool_columns_kernel(float *emb, float *delta, float *sorted,
                                             int *sort_index, const float *inp, const int *lengths,
                                             int B, int T, int D)
{
    size_t total = (size_t)B * D;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t b = e / (size_t)D, off = b * T * D;
        int d = (int)(e % (size_t)D), len = lengths[b];
        vtr_set_sort_desc_columns(sort_index + off, inp + off, len, D, len, d, 1);
        vtr_adpool_columns_forward(emb + b * D, delta + off, sorted + off, sort_index + off,
                                   inp + off, len, T, D, d, d + 1);
    }
}

// omega (B,2), one item per thread
__global__ static void adpool_balance_kernel(float *omega, const float *tok, const float *emb,
                                             const float *w_bal, int B, int D)
{
    for (size_t b = vtr_cuda_first(); b < (size_t)B; b += vtr_cuda_stride())
        vtr_adpool_balance_forward(omega + 2 * b, tok + b * D, emb + b * D, w_bal, D);
}

// out (B,D) = omega_1 tok + omega_2 emb, one (b, d) per thread
__global__ static void adpool_mix_kernel(float *out, const float *omega, const float *tok,
                                         const float *emb, int B, int D)
{
    size_t total = (size_t)B * D;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t b = e / (size_t)D;
        int d = (int)(e % (size_t)D);
        const float *w = omega + 2 * b;
        vtr_adpool_mix_columns(out + b * D, w[0], tok + b * D, w[1], emb + b * D, d, d + 1);
    }
}

// dlogit (B,2), one item per thread
__global__ static void adpool_balance_backward_kernel(float *dlogit, const float *dout,
                                                      const float *tok, const float *emb,
                                                      const float *omega, int B, int D)
{
    for (size_t b = vtr_cuda_first(); b < (size_t)B; b += vtr_cuda_stride())
        vtr_adpool_balance_backward(dlogit + 2 * b, dout + b * D, tok + b * D, emb + b * D,
                                    omega + 2 * b, D);
}

// dtok, demb (B,D) from dout and the logits' gradients, one (b, d) per thread
__global__ static void adpool_pooled_grad_kernel(float *dtok, float *demb, const float *dout,
                                                 const float *omega, const float *dlogit,
                                                 const float *w_bal, int B, int D)
{
    size_t total = (size_t)B * D;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t b = e / (size_t)D;
        int d = (int)(e % (size_t)D);
        const float *w = omega + 2 * b, *dl = dlogit + 2 * b, *dy = dout + b * D;
        vtr_adpool_mix_columns(dtok + b * D, w[0], dy, dl[0], w_bal, d, d + 1);
        vtr_adpool_mix_columns(demb + b * D, w[1], dy, dl[1], w_bal, d, d + 1);
    }
}

// dw_bal (D) +=, one dimension per thread, the items in order
__global__ static void adpool_balance_dweight_kernel(float *dw_bal, const float *dlogit,
                                                     const float *tok, const float *emb, int B,
                                                     int D)
{
    for (size_t d = vtr_cuda_first(); d < (size_t)D; d += vtr_cuda_stride())
        vtr_adpool_balance_dweight_columns(dw_bal, dlogit, tok, emb, B, D, (int)d, (int)d + 1);
}

// dinp (B,T,D) +=, one (b, d) per thread: the column's ranks are distinct elements, and
// threads differ in (b, d)
__global__ static void adpool_dinp_kernel(float *dinp, const float *dsorted, const int *sort_index,
                                          const float *inp, const float *delta, const float *emb,
                                          const float *demb, const int *lengths, int B, int T,
                                          int D)
{
    size_t total = (size_t)B * D;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t b = e / (size_t)D, off = b * T * D;
        int d = (int)(e % (size_t)D);
        vtr_adpool_dinp_columns(dinp + off, dsorted + off, sort_index + off, inp + off, delta + off,
                                emb + b * D, demb + b * D, lengths[b], D, d, d + 1);
    }
}

extern "C" vtr_status vtr_cuda_adpool_forward(float *out, float *theta, float *omega,
                                              void *workspace, const float *inp, const int *lengths,
                                              const float *params, int B, int T, int D,
                                              vtr_error *err)
{
    adpool_workspace ws = adpool_workspace_of(workspace, B, T, D);
    const float *w_tok = params, *w_bal = params + vtr_adpool_balance_offset(D);
    size_t bd = (size_t)B * D;

    // sort every dimension (u), and the embedding level
    adpool_columns_kernel<<<vtr_cuda_blocks(bd), VTR_CUDA_THREADS>>>(
        ws.emb, ws.delta, ws.sorted, ws.sort_index, inp, lengths, B, T, D);
    VTR_TRY(vtr_cuda_launched("ADPOOL sort and embedding level", err));
    // token level: attention pooling of the sorted rows with the scorer w_tok, no bias
    VTR_TRY(vtr_cuda_attention_pool_forward(ws.tok, theta, ws.sorted, w_tok, NULL, lengths, B, T, D,
                                            err));
    // balance: a softmax over the two pooled vectors' scores, then the mix
    adpool_balance_kernel<<<vtr_cuda_blocks((size_t)B), VTR_CUDA_THREADS>>>(omega, ws.tok, ws.emb,
                                                                            w_bal, B, D);
    VTR_TRY(vtr_cuda_launched("ADPOOL balance", err));
    adpool_mix_kernel<<<vtr_cuda_blocks(bd), VTR_CUDA_THREADS>>>(out, omega, ws.tok, ws.emb, B, D);
    return vtr_cuda_launched("ADPOOL mix", err);
}

extern "C" vtr_status vtr_cuda_adpool_backward(float *dinp, float *dparams, void *scratch,
                                               const float *dout, const float *inp,
                                               const float *theta, const float *omega,
                                               const int *lengths, const float *params,
                                               const void *workspace, int B, int T, int D,
                                               vtr_error *err)
{
    adpool_workspace ws = adpool_workspace_of(workspace, B, T, D);
    adpool_scratch sc = adpool_scratch_of(scratch, B, T, D);
    const float *w_tok = params, *w_bal = params + vtr_adpool_balance_offset(D);
    float *dw_tok = dparams, *dw_bal = dparams + vtr_adpool_balance_offset(D);
    size_t bd = (size_t)B * D;

    // balance: d omega_j = dout · pooled_j -> the logits' gradients -> both pooled vectors,
    // and w_bal's gradient
    adpool_balance_backward_kernel<<<vtr_cuda_blocks((size_t)B), VTR_CUDA_THREADS>>>(
        sc.dlogit, dout, ws.tok, ws.emb, omega, B, D);
    VTR_TRY(vtr_cuda_launched("ADPOOL balance backward", err));
    adpool_pooled_grad_kernel<<<vtr_cuda_blocks(bd), VTR_CUDA_THREADS>>>(
        sc.dtok, sc.demb, dout, omega, sc.dlogit, w_bal, B, D);
    VTR_TRY(vtr_cuda_launched("ADPOOL pooled gradients", err));
    adpool_balance_dweight_kernel<<<vtr_cuda_blocks((size_t)D), VTR_CUDA_THREADS>>>(
        dw_bal, sc.dlogit, ws.tok, ws.emb, B, D);
    VTR_TRY(vtr_cuda_launched("ADPOOL balance weight gradient", err));

    // token level: attention pooling's backward into the sorted rows and w_tok
    if (dinp)
        VTR_TRY(vtr_cuda_zero(sc.dsorted, sizeof(float) * (size_t)B * T * D, err));
    VTR_TRY(vtr_cuda_attention_pool_backward(dinp ? sc.dsorted : NULL, dw_tok, NULL, sc.dtok,
                                             ws.sorted, theta, w_tok, lengths, B, T, D, err));
    if (!dinp)
        return VTR_OK;

    // the sorted rows' gradients back through the sort, then the embedding level
    adpool_dinp_kernel<<<vtr_cuda_blocks(bd), VTR_CUDA_THREADS>>>(
        dinp, sc.dsorted, ws.sort_index, inp, ws.delta, ws.emb, sc.demb, lengths, B, T, D);
    return vtr_cuda_launched("ADPOOL input gradient", err);
}
