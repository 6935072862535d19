/* Role span pooling: HGR's verb and noun phrase nodes (conventions: lib/nn.h).
 *
 * Each of the N phrases of an item is the max over its word span of the item's word states,
 * per dimension, multiplied elementwise by the embedding of the phrase's semantic role
 * (RoleGraphEncoder.pool_phrases with pool_type 'max', then * role_embedding(node_roles)):
 *
 *     pooled[b,n,d] = max over t < L of (masks[b,n,t] ? inp[b,t,d] : VTR_SPAN_POOL_FILL)
 *     out[b,n,d]    = pooled[b,n,d] * role_table[roles[b,n], d]
 *
 * This is exactly the reference's masked_fill(mask == 0, -1e10) followed by max over the
 * words, and it keeps its consequences:
 *   - a phrase whose span is empty pools to VTR_SPAN_POOL_FILL (-1e10) in every dimension,
 *     not 0, so its output is -1e10 * role; it gives inp no gradient, and its role row
 *     receives -1e10 * dout (what autograd gives). A model masks such nodes downstream.
 *   - a dimension whose span values all lie below -1e10 pools to the fill as well, from a
 *     word outside the span, and gives no gradient to inp.
 *   - the op reads exactly the mask bits it is given, over all L positions: it knows no
 *     caption lengths, and a bit set at a padded word position pools that word (the reader
 *     sets bits only where a span points, so a span past the caption's end does that).
 * Ties: among equal values (fill included) the lowest word position wins, as PyTorch's max
 * over a dimension returns the first maximal index on the CPU; the gradient goes to that
 * one word. NaN inputs give an unspecified result.
 *
 * Masks are uint8 (B,N,L), nonzero = the word is in the span: the layout of the reader's
 * numpy bool masks. Roles (B,N) are int32 rows of role_table (R,D) (R = 16 in HGR); they are
 * not checked here: validate them from data once with vtr_nn_check_ids (lib/nn.h).
 */
#ifndef VTR_SPAN_POOL_H
#define VTR_SPAN_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "lib/hostdevice.h"
#include "lib/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The value the reference fills words outside a span with before the max (-1e10, rounded
 * to float32 as masked_fill does on a float tensor). */
#define VTR_SPAN_POOL_FILL (-1e10f)

/* The word whose value is the max of dimension d over the span mask (L) of one phrase of
 * one item x (L,D), every word outside the span counting as VTR_SPAN_POOL_FILL; the first
 * among equals. Returns -1 when that word is outside the span (an empty span, or span
 * values all below the fill): the pooled value is then the fill and carries no gradient. */
static VTR_HD int vtr_span_max_at(const float *x, const uint8_t *mask, int L, int D, int d)
{
    int best = 0;
    float best_v = mask[0] ? x[d] : VTR_SPAN_POOL_FILL;
    for (int t = 1; t < L; t++) {
        float v = mask[t] ? x[(size_t)t * D + d] : VTR_SPAN_POOL_FILL;
        if (v > best_v) {
            best = t;
            best_v = v;
        }
    }
    return mask[best] ? best : -1;
}

/* The pooled value (before the role multiply) of dimension d of a phrase of item x (L,D)
 * whose max came from word argmax (vtr_span_max_at). */
static VTR_HD float vtr_span_pooled_value(const float *x, int argmax, int D, int d)
{
    return argmax >= 0 ? x[(size_t)argmax * D + d] : VTR_SPAN_POOL_FILL;
}

/* Dimension d of one phrase: y[d] (its output) and am[d] (the word of its max, -1: the fill)
 * from item x (L,D), the phrase's span mask (L) and its role row (D). */
static VTR_HD void vtr_role_span_pool_forward_at(float *y, int *am, const float *x,
                                                 const uint8_t *mask, const float *role, int L,
                                                 int D, int d)
{
    am[d] = vtr_span_max_at(x, mask, L, D, d);
    y[d] = vtr_span_pooled_value(x, am[d], D, d) * role[d];
}

/* d out / d role of dimension d of one phrase: dy[d] times the pooled value; x (L,D) its item,
 * am (D) its argmax row, dy (D) its output gradient. */
static VTR_HD float vtr_role_span_pool_drole_at(const float *dy, const float *x, const int *am,
                                                int D, int d)
{
    return dy[d] * vtr_span_pooled_value(x, am[d], D, d);
}

/* Input gradient of dimension d of one item: dx (L,D) += dout[n,d] * role_table[roles[n],d]
 * at the word argmax[n,d] of each of its N phrases (none where argmax is -1), in the order
 * of n. dout (N,D), argmax (N,D), roles (N) of that item. The CPU runs it per item and
 * dimension, so phrases sharing a word add into it in a fixed order. */
static VTR_HD void vtr_role_span_pool_dinp_at(float *dx, const float *dout, const int *argmax,
                                              const int *roles, const float *role_table, int N,
                                              int D, int d)
{
    for (int n = 0; n < N; n++) {
        int t = argmax[(size_t)n * D + d];
        if (t >= 0)
            dx[(size_t)t * D + d] += dout[(size_t)n * D + d] * role_table[(size_t)roles[n] * D + d];
    }
}

/* Bytes of the scratch vtr_role_span_pool_backward needs: (B,N,D) floats. */
size_t vtr_role_span_pool_scratch_size(int B, int N, int D);

// inp (B,L,D) word states, masks (B,N,L) uint8 spans, roles (B,N) in [0,R),
// role_table (R,D); out (B,N,D) = (max over each span, VTR_SPAN_POOL_FILL outside it) *
// role_table[roles]; saves argmax (B,N,D), the word each max came from (-1: the fill).
void vtr_role_span_pool_forward(float *out, int *argmax, const float *inp, const uint8_t *masks,
                                const int *roles, const float *role_table, int B, int N, int L,
                                int D);
// dinp (B,L,D) or NULL, drole_table (R,D), scratch (vtr_role_span_pool_scratch_size bytes),
// dout (B,N,D), inp (B,L,D), argmax (B,N,D) as saved, roles (B,N), role_table (R,D).
// Both gradients accumulate: dinp over the phrases of an item in the order of n, the rows of
// drole_table over all (b, n) in row order whatever the thread count.
void vtr_role_span_pool_backward(float *dinp, float *drole_table, void *scratch, const float *dout,
                                 const float *inp, const int *argmax, const int *roles,
                                 const float *role_table, int B, int N, int L, int D);

/* The CUDA side (aggregate/span_pool.cu, through aggregate/cuda_entries.c): the CPU
 * functions' arguments as device buffers (masks and roles included; the scratch of the CPU's
 * size and layout), with lib/nn_cuda.h's conventions. One thread per (phrase, dimension)
 * forward, per (item, dimension) for dinp and per dimension for drole_table: the same
 * argmax, and the same sums in the same order, as the CPU (the same bytes, but for the
 * device's fused multiply-adds where none is written). */
vtr_status vtr_cuda_role_span_pool_forward(float *out, int *argmax, const float *inp,
                                           const uint8_t *masks, const int *roles,
                                           const float *role_table, int B, int N, int L, int D,
                                           vtr_error *err);
vtr_status vtr_cuda_role_span_pool_backward(float *dinp, float *drole_table, void *scratch,
                                            const float *dout, const float *inp, const int *argmax,
                                            const int *roles, const float *role_table, int B, int N,
                                            int L, int D, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
