#include "hgr_score.h"

void vtr_hgr_fused_score_forward(float *out, const float *global, const float *verb,
                                 const float *noun, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = vtr_hgr_fused_score(global[i], verb[i], noun[i]);
}

void vtr_hgr_fused_score_backward(float *dglobal, float *dverb, float *dnoun, const float *dout,
                                  size_t n)
{
    float *grads[3] = {dglobal, dverb, dnoun};
    for (int level = 0; level < 3; level++)
        if (grads[level])
            for (size_t i = 0; i < n; i++)
                grads[level][i] += vtr_hgr_fused_score_dlevel(dout[i]);
}
