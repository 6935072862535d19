// CUDA side of match/hgr_score.h: one score per thread, the CPU's VTR_HD functions.
#include "lib/cuda_launch.h"
#include "match/hgr_score.h"

// out (n) = the fused scores of global, verb, noun (n)
__global__ static void hgr_fused_score_forward_kernel(float *out, const float *global,
                                                      const float *verb, const float *noun,
                                                      size_t n)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride())
        out[i] = vtr_hgr_fused_score(global[i], verb[i], noun[i]);
}

// dglobal, dverb, dnoun (n), each or NULL, += the levels' gradients from dout (n)
__global__ static void hgr_fused_score_backward_kernel(float *dglobal, float *dverb, float *dnoun,
                                                       const float *dout, size_t n)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride()) {
        float g = vtr_hgr_fused_score_dlevel(dout[i]);
        if (dglobal)
            dglobal[i] += g;
        if (dverb)
            dverb[i] += g;
        if (dnoun)
            dnoun[i] += g;
    }
}

extern "C" vtr_status vtr_cuda_hgr_fused_score_forward(float *out, const float *global,
                                                       const float *verb, const float *noun,
                                                       size_t n, vtr_error *err)
{
    hgr_fused_score_forward_kernel<<<vtr_cuda_blocks(n), VTR_CUDA_THREADS>>>(out, global, verb,
                                                                             noun, n);
    return vtr_cuda_launched("HGR fused score", err);
}

extern "C" vtr_status vtr_cuda_hgr_fused_score_backward(float *dglobal, float *dverb, float *dnoun,
                                                        const float *dout, size_t n, vtr_error *err)
{
    hgr_fused_score_backward_kernel<<<vtr_cuda_blocks(n), VTR_CUDA_THREADS>>>(dglobal, dverb, dnoun,
                                                                              dout, n);
    return vtr_cuda_launched("HGR fused score backward", err);
}
