/* Set embeddings' similarity and regularisers (paper 002, sections 3.3 and 3.4; REFERENCE.md
 * "Other seeds"). Conventions: lib/nn.h.
 *
 * Sets are blocks of unit rows: a (Na,Ka,D) holds Na sets of Ka elements, b (Nb,Kb,D).
 *
 * Smooth-Chamfer similarity (eq. 6), with c(x,y) = <x,y> (the rows are unit):
 *     S[i,j] = 1/(2 alpha Ka) sum_x log sum_y exp(alpha c(x,y))
 *            + 1/(2 alpha Kb) sum_y log sum_x exp(alpha c(x,y)),   x in a[i], y in b[j]
 * (each log-sum-exp taken about its maximum). Its gradient (eq. 8):
 *     dS/dc(x,y) = 1/(2 Ka) softmax_y(alpha c(x,.))[y] + 1/(2 Kb) softmax_x(alpha c(.,y))[x]
 * The pairwise cosines of a block of sets are one sgemm, (na Ka, D) x (D, nb Kb); the op
 * never holds more than VTR_SET_BLOCK x VTR_SET_BLOCK sets' cosines at a time, so it scores
 * a test set of any size (evaluation) in the scratch below; backward recomputes them.
 *
 * Diversity regulariser (the official code's uniformity term with --unif_residual, the form
 * the released models train with; the paper writes sum_{x,x'} exp(-2 |x - x'|^2) over the
 * raw slots E_T, whose norms are unbounded): over the unit rows r (N,K,D) of each item's
 * slots (aggregate/set_prediction.h's slots_n),
 *     L_div = 1/N sum_items [ sum_{i<j} exp(-2 |r_i - r_j|^2) ] / (K (K-1) / 2)
 * (0 when K = 1).
 *
 * MMD regulariser between the visual and text elements (the official code's mmd_rbf_loss
 * with gamma 0.5; its kernel takes the distance, not its square): X = a as (Na Ka, D) rows,
 * Y = b as (Nb Kb, D) rows, k(x,y) = exp(-gamma |x - y|),
 *     L_mmd = mean k(X,X) - 2 mean k(X,Y) + mean k(Y,Y)   (means over all pairs, the
 *                                                           diagonal included)
 * A pair at distance 0 passes no gradient (torch.cdist's convention).
 */
#ifndef VTR_SET_SIMILARITY_H
#define VTR_SET_SIMILARITY_H

#include <stddef.h>

#include "lib/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VTR_SET_ALPHA 16.0f   /* smooth-Chamfer's scale */
#define VTR_SET_MMD_GAMMA 0.5f
#define VTR_SET_BLOCK 256     /* sets per side of one block of cosines */

/* Bytes of the scratch that forward and backward take for these sizes (at most one block of
 * cosines and its softmax weights). */
size_t vtr_smooth_chamfer_scratch_size(int Na, int Nb, int Ka, int Kb);

/* S (Na,Nb), row stride ldS (>= Nb): S[i,j] for set i of a and set j of b. */
void vtr_smooth_chamfer_forward(float *S, long ldS, void *scratch, const float *a,
                                const float *b, int Na, int Nb, int Ka, int Kb, int D,
                                float alpha);

/* da (Na,Ka,D) or NULL, db (Nb,Kb,D) or NULL, accumulated, from dS (Na,Nb) with row stride
 * ldS. */
void vtr_smooth_chamfer_backward(float *da, float *db, void *scratch, const float *dS, long ldS,
                                 const float *a, const float *b, int Na, int Nb, int Ka, int Kb,
                                 int D, float alpha);

/* L_div of r (N,K,D); dr (N,K,D) += dloss * dL_div/dr. */
float vtr_set_diversity_forward(const float *r, int N, int K, int D);
void vtr_set_diversity_backward(float *dr, float dloss, const float *r, int N, int K, int D);

/* Bytes of the scratch the MMD functions take. */
size_t vtr_set_mmd_scratch_size(long nx, long ny);

/* L_mmd of X (nx,D) and Y (ny,D); dx (nx,D) and dy (ny,D) += dloss * its gradients (either
 * may be NULL). */
float vtr_set_mmd_forward(void *scratch, const float *X, const float *Y, long nx, long ny, int D,
                          float gamma);
void vtr_set_mmd_backward(float *dx, float *dy, float dloss, void *scratch, const float *X,
                          const float *Y, long nx, long ny, int D, float gamma);

#ifdef __cplusplus
}
#endif

#endif
