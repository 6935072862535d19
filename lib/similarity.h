/* Cosine similarity matrix of l2-normalized embeddings (conventions: lib/nn.h).
 *
 * The inputs are already l2-normalized (vtr_l2norm_forward), so the cosine is the dot
 * product: S = A · Bᵀ, through CBLAS.
 */
#ifndef VTR_SIMILARITY_H
#define VTR_SIMILARITY_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

// a (NA,D), b (NB,D), both l2-normalized rows; S (NA,NB) = a · bᵀ
void vtr_cosine_similarity_forward(float *S, const float *a, const float *b, int NA, int NB, int D);

// da (NA,D) or NULL += dS · b, db (NB,D) or NULL += dSᵀ · a; dS (NA,NB)
void vtr_cosine_similarity_backward(float *da, float *db, const float *dS, const float *a,
                                    const float *b, int NA, int NB, int D);

#ifdef __cplusplus
}
#endif

#endif
