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

// global, verb, noun (n) the levels' scores (e.g. n = Bv*Bc), out (n)
void vtr_hgr_fused_score_forward(float *out, const float *global, const float *verb,
                                 const float *noun, size_t n);

// dglobal, dverb, dnoun (n), each or NULL, += dout / 3; dout (n)
void vtr_hgr_fused_score_backward(float *dglobal, float *dverb, float *dnoun, const float *dout,
                                  size_t n);

#ifdef __cplusplus
}
#endif

#endif
