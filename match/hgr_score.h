/* HGR's fused matching score (conventions: lib/nn.h): the mean of the three levels'
 * scores, global (event), verb (action) and noun (entity) (REFERENCE.md, "HGR"; the
 * reference's (sent_scores + verb_scores + noun_scores) / 3). The verb and noun scores come
 * from match/phrase_attention.h, the global one from a cosine similarity.
 */
#ifndef VTR_HGR_SCORE_H
#define VTR_HGR_SCORE_H

#include <stddef.h>

#include "lib/hostdevice.h"
#include "lib/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* one fused score, summed in the reference's order */
static VTR_HD float vtr_hgr_fused_score(float global, float verb, float noun)
{
    return (global + verb + noun) / 3.0f;
}

/* the gradient of each level's score from the fused one's */
static VTR_HD float vtr_hgr_fused_score_dlevel(float dout)
{
    return dout / 3.0f;
}

// global, verb, noun (n) the levels' scores (e.g. n = Bv*Bc), out (n)
void vtr_hgr_fused_score_forward(float *out, const float *global, const float *verb,
                                 const float *noun, size_t n);

// dglobal, dverb, dnoun (n), each or NULL, += dout / 3; dout (n)
void vtr_hgr_fused_score_backward(float *dglobal, float *dverb, float *dnoun, const float *dout,
                                  size_t n);

/* The CUDA side (match/hgr_score.cu, through match/cuda_entries.c): the CPU functions'
 * arguments as device buffers, with lib/nn_cuda.h's conventions; the same bytes as the CPU. */
vtr_status vtr_cuda_hgr_fused_score_forward(float *out, const float *global, const float *verb,
                                            const float *noun, size_t n, vtr_error *err);
vtr_status vtr_cuda_hgr_fused_score_backward(float *dglobal, float *dverb, float *dnoun,
                                             const float *dout, size_t n, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
