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
 *
 * The per-pair, per-item and per-row math is in the VTR_HD functions below, which the CPU
 * loops (match/set_similarity.c) and the CUDA kernels (match/set_similarity.cu) both call;
 * the CUDA side is declared at the end of this header.
 */
#ifndef VTR_SET_SIMILARITY_H
#define VTR_SET_SIMILARITY_H

#include <math.h>
#include <stddef.h>

#include "lib/error.h"
#include "lib/hostdevice.h"
#include "lib/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VTR_SET_ALPHA 16.0f   /* smooth-Chamfer's scale */
#define VTR_SET_MMD_GAMMA 0.5f
#define VTR_SET_BLOCK 256     /* sets per side of one block of cosines */

static VTR_HD int vtr_set_min_int(int a, int b)
{
    return a < b ? a : b;
}

/* ---- smooth-Chamfer ----------------------------------------------------------------------
 *
 * Scratch, for a block of na <= VTR_SET_BLOCK sets of a and nb <= VTR_SET_BLOCK of b, byte
 * offsets:
 *   C        float (na*Ka, nb*Kb)  the block's cosines, row (i, x), column (j, y); backward
 *                                  turns each pair's Ka x Kb sub-block into dC = dS[i,j]
 *                                  dS/dc in place
 *   col_max  float (na, nb, Kb)    backward: max_x c(x,y) of each pair's column y
 *   col_inv  float (na, nb, Kb)    backward: 1 / sum_x exp(alpha (c(x,y) - col_max))
 */
typedef struct vtr_chamfer_layout {
    size_t C, col_max, col_inv, total;
} vtr_chamfer_layout;

static inline vtr_chamfer_layout vtr_chamfer_layout_of(int Na, int Nb, int Ka, int Kb)
{
    size_t na = (size_t)vtr_set_min_int(Na, VTR_SET_BLOCK);
    size_t nb = (size_t)vtr_set_min_int(Nb, VTR_SET_BLOCK);
    vtr_chamfer_layout l;
    l.C = 0;
    l.col_max = l.C + vtr_workspace_align(sizeof(float) * na * Ka * nb * Kb);
    l.col_inv = l.col_max + vtr_workspace_align(sizeof(float) * na * nb * Kb);
    l.total = l.col_inv + vtr_workspace_align(sizeof(float) * na * nb * Kb);
    return l;
}

/* max of the n values x[0], x[stride], ... */
static VTR_HD float vtr_set_strided_max(const float *x, long stride, int n)
{
    float m = x[0];
    for (int k = 1; k < n; k++)
        m = x[k * stride] > m ? x[k * stride] : m;
    return m;
}

/* sum_k exp(alpha (x[k*stride] - m)) */
static VTR_HD float vtr_set_strided_exp_sum(const float *x, long stride, int n, float m,
                                            float alpha)
{
    float sum = 0.0f;
    for (int k = 0; k < n; k++)
        sum += expf(alpha * (x[k * stride] - m));
    return sum;
}

/* 1/alpha log sum_k exp(alpha x[k*stride]), about the maximum */
static VTR_HD float vtr_set_strided_log_sum_exp(const float *x, long stride, int n, float alpha)
{
    float m = vtr_set_strided_max(x, stride, n);
    return m + logf(vtr_set_strided_exp_sum(x, stride, n, m, alpha)) / alpha;
}

/* S of one pair from its cosines c (Ka, Kb) with row stride ldc */
static VTR_HD float vtr_smooth_chamfer_pair_forward(const float *c, long ldc, int Ka, int Kb,
                                                    float alpha)
{
    float rows = 0.0f, cols = 0.0f;
    for (int x = 0; x < Ka; x++)
        rows += vtr_set_strided_log_sum_exp(c + x * ldc, 1, Kb, alpha);
    for (int y = 0; y < Kb; y++)
        cols += vtr_set_strided_log_sum_exp(c + y, ldc, Ka, alpha);
    return rows / (2.0f * Ka) + cols / (2.0f * Kb);
}

/* Turns one pair's cosines c (Ka, Kb), row stride ldc, into dS * dS/dc (eq. 8), in place.
 * col_max (Kb) and col_inv (Kb) keep the column softmaxes' statistics while c is
 * overwritten. */
static VTR_HD void vtr_smooth_chamfer_pair_backward(float *c, float *col_max, float *col_inv,
                                                    long ldc, float dS, int Ka, int Kb, float alpha)
{
    for (int y = 0; y < Kb; y++) {
        col_max[y] = vtr_set_strided_max(c + y, ldc, Ka);
        col_inv[y] = 1.0f / vtr_set_strided_exp_sum(c + y, ldc, Ka, col_max[y], alpha);
    }
    float row_scale = dS / (2.0f * Ka), col_scale = dS / (2.0f * Kb);
    for (int x = 0; x < Ka; x++) {
        float *row = c + x * ldc;
        float m = vtr_set_strided_max(row, 1, Kb);
        float row_inv = 1.0f / vtr_set_strided_exp_sum(row, 1, Kb, m, alpha);
        for (int y = 0; y < Kb; y++)
            row[y] = row_scale * (expf(alpha * (row[y] - m)) * row_inv) +
                     col_scale * (expf(alpha * (row[y] - col_max[y])) * col_inv[y]);
    }
}

/* ---- diversity ---------------------------------------------------------------------------- */

/* |u - v|^2 of two rows (D): the differences in float (exact where u and v are near, which
 * is where this is called for MMD), their squares summed in 16 float lanes, then the
 * lanes in order in double: a fixed order that vectorizes without reassociation, with a
 * relative error of about 1e-7 sqrt(D / 16) at any distance (no cancellation). MMD's near
 * pairs spend most of its time in here. */
static VTR_HD double vtr_set_squared_distance(const float *u, const float *v, int D)
{
    enum { LANES = 16 };
    float lane[LANES] = {0.0f};
    int d = 0;
    for (; d + LANES <= D; d += LANES)
        for (int k = 0; k < LANES; k++) {
            float diff = u[d + k] - v[d + k];
            lane[k] += diff * diff;
        }
    double ss = 0.0;
    for (int k = 0; k < LANES; k++)
        ss += lane[k];
    for (; d < D; d++) {
        double diff = (double)u[d] - v[d];
        ss += diff * diff;
    }
    return ss;
}

/* sum_{i<j} exp(-2 |r_i - r_j|^2) over one item's rows item (K,D), pairs in order */
static VTR_HD double vtr_set_diversity_item_sum(const float *item, int K, int D)
{
    double total = 0.0;
    for (int i = 0; i < K; i++)
        for (int j = i + 1; j < K; j++)
            total +=
                exp(-2.0 * vtr_set_squared_distance(item + (size_t)i * D, item + (size_t)j * D, D));
    return total;
}

/* ditem (K,D) += the gradient of scale times vtr_set_diversity_item_sum: d/dr_i exp(-2
 * |r_i - r_j|^2) = -4 exp(-2 |r_i - r_j|^2) (r_i - r_j), and minus that for r_j */
static VTR_HD void vtr_set_diversity_item_backward(float *ditem, const float *item, double scale,
                                                   int K, int D)
{
    for (int i = 0; i < K; i++)
        for (int j = i + 1; j < K; j++) {
            const float *ri = item + (size_t)i * D, *rj = item + (size_t)j * D;
            float g = (float)(-4.0 * scale * exp(-2.0 * vtr_set_squared_distance(ri, rj, D)));
            float *di = ditem + (size_t)i * D, *dj = ditem + (size_t)j * D;
            for (int d = 0; d < D; d++) {
                float diff = ri[d] - rj[d];
                di[d] += g * diff;
                dj[d] -= g * diff;
            }
        }
}

/* ---- MMD ------------------------------------------------------------------------------------
 *
 * Each of the three kernel sums runs over one (n, m) matrix of pairs (u_i, v_j): X with X,
 * X with Y, Y with Y. Scratch, for n, m <= max(nx, ny) = M, byte offsets:
 *   G     float (n, m) in an (M, M) region: the Gram matrix <u_i, v_j>, then (backward)
 *         the pairs' weights V
 *   sq_u  double (n), sq_v double (m): the rows' squared norms
 *   sums  double (n + m): row sums (of the kernel, or of V), then V's column sums
 *   terms double (3): the three kernel sums (the CUDA forward; the CPU keeps them in
 *         variables)
 */
typedef struct vtr_mmd_layout {
    size_t G, sq_u, sq_v, sums, terms, total;
} vtr_mmd_layout;

static inline vtr_mmd_layout vtr_mmd_layout_of(long nx, long ny)
{
    size_t M = (size_t)(nx > ny ? nx : ny);
    vtr_mmd_layout l;
    l.G = 0;
    l.sq_u = l.G + vtr_workspace_align(sizeof(float) * M * M);
    l.sq_v = l.sq_u + vtr_workspace_align(sizeof(double) * M);
    l.sums = l.sq_v + vtr_workspace_align(sizeof(double) * M);
    l.terms = l.sums + vtr_workspace_align(sizeof(double) * 2 * M);
    l.total = l.terms + vtr_workspace_align(sizeof(double) * 3);
    return l;
}

/* The scratch's regions. */
typedef struct vtr_mmd_scratch {
    float *G;
    double *sq_u, *sq_v, *sums, *terms;
} vtr_mmd_scratch;

static inline vtr_mmd_scratch vtr_mmd_scratch_of(void *scratch, long nx, long ny)
{
    vtr_mmd_layout l = vtr_mmd_layout_of(nx, ny);
    char *base = (char *)scratch;
    vtr_mmd_scratch s = {(float *)(base + l.G), (double *)(base + l.sq_u),
                         (double *)(base + l.sq_v), (double *)(base + l.sums),
                         (double *)(base + l.terms)};
    return s;
}

/* Gram-form distances cancel where |u - v|^2 is small beside |u|^2 + |v|^2 (the float
 * <u, v> carries an error of ~1e-7 sqrt(D) |u| |v|): below this fraction of |u|^2 + |v|^2 a
 * pair is "near": its squared distance is summed from the rows' differences, so equal rows
 * are at distance exactly 0 and pass no gradient, and backward adds its gradient
 * V_ij (v_j - u_i) from the differences too (V_ij ~ 1/d is large there, and the sgemm form
 * V_ij v_j - V_ij u_i would cancel). */
#define VTR_MMD_NEAR_FRACTION 0.0625

/* One kernel sum's pairs: u (n,D) against v (m,D); `same` when v is u (the pairs (i, j) and
 * (j, i) then get the same distance and the diagonal is at distance 0). */
typedef struct vtr_mmd_term {
    const float *u, *v;
    long n, m;
    int D, same;
    float gamma;
} vtr_mmd_term;

/* |u_i - v_j| from the Gram entry g = <u_i, v_j>; *near: whether the pair is near */
static VTR_HD double vtr_mmd_distance(int *near, const vtr_mmd_term *t, vtr_mmd_scratch s, long i,
                                      long j, float g)
{
    *near = 0;
    if (t->same && i == j)
        return 0.0;
    double norms = s.sq_u[i] + s.sq_v[j], d2 = norms - 2.0 * g;
    if (d2 < VTR_MMD_NEAR_FRACTION * norms) {
        *near = 1;
        d2 = vtr_set_squared_distance(t->u + i * t->D, t->v + j * t->D, t->D);
    }
    return d2 > 0.0 ? sqrt(d2) : 0.0;
}

/* The pair's weight V_ij = coef gamma exp(-gamma d) / d, 0 at d = 0 (the backward below) */
static VTR_HD float vtr_mmd_weight(int *near, const vtr_mmd_term *t, vtr_mmd_scratch s, long i,
                                   long j, float g, double coef)
{
    double d = vtr_mmd_distance(near, t, s, i, j, g);
    return d > 0.0 ? (float)(coef * t->gamma * exp(-t->gamma * d) / d) : 0.0f;
}

/* dx (D) += w (y - x) */
static VTR_HD void vtr_mmd_add_weighted_difference(float *dx, const float *x, const float *y,
                                                   float w, int D)
{
    for (int d = 0; d < D; d++)
        dx[d] += w * (y[d] - x[d]);
}

/* sum over j of exp(-gamma |u_i - v_j|), row i of the term's pairs, from the Gram matrix */
static VTR_HD double vtr_mmd_row_sum(const vtr_mmd_term *t, vtr_mmd_scratch s, long i)
{
    double sum = 0.0;
    for (long j = 0; j < t->m; j++) {
        int near;
        sum += exp(-t->gamma * vtr_mmd_distance(&near, t, s, i, j, s.G[i * t->m + j]));
    }
    return sum;
}

/* The gradient of coef times the term's sum, with V_ij = coef gamma exp(-gamma d_ij) / d_ij
 * (0 where d_ij = 0):
 *     du_i = sum_j V_ij v_j - (sum_j V_ij) u_i,   dv_j = sum_i V_ij u_i - (sum_i V_ij) v_j,
 * one sgemm each over the pairs that are not near; the near pairs add V_ij (v_j - u_i) and
 * V_ij (u_i - v_j) from the differences. The column pass of column j (before the rows' pass
 * turns G into V): dv_j (D) += the near pairs' terms; returns the sum of the far pairs' V_ij
 * over i. */
static VTR_HD double vtr_mmd_column_backward(float *dv_j, const vtr_mmd_term *t, vtr_mmd_scratch s,
                                             long j, double coef)
{
    double sum = 0.0;
    for (long i = 0; i < t->n; i++) {
        int near;
        float w = vtr_mmd_weight(&near, t, s, i, j, s.G[i * t->m + j], coef);
        if (near)
            vtr_mmd_add_weighted_difference(dv_j, t->v + j * t->D, t->u + i * t->D, w, t->D);
        else
            sum += w;
    }
    return sum;
}

/* The rows' pass of row i: du_i (D) or NULL += the near pairs' terms; row i of G becomes V
 * (0 at the near pairs); returns the row's sum of V. */
static VTR_HD double vtr_mmd_row_backward(float *du_i, const vtr_mmd_term *t, vtr_mmd_scratch s,
                                          long i, double coef)
{
    float *V = s.G + i * t->m;
    double sum = 0.0;
    for (long j = 0; j < t->m; j++) {
        int near;
        float w = vtr_mmd_weight(&near, t, s, i, j, V[j], coef);
        if (near && du_i)
            vtr_mmd_add_weighted_difference(du_i, t->u + i * t->D, t->v + j * t->D, w, t->D);
        V[j] = near ? 0.0f : w;
        sum += V[j];
    }
    return sum;
}

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

/* The CUDA side (match/set_similarity.cu, through match/cuda_entries.c): the CPU
 * functions' arguments as device buffers (the scratch of the CPU's size and layout), with
 * lib/nn_cuda.h's conventions; the losses that the CPU returns go to *loss, one float on
 * the device. The per-pair, per-item and per-row math is the CPU's; the cosines are cuBLAS
 * products, so results agree to float rounding (the diversity forward sums its items in
 * another fixed order). */
vtr_status vtr_cuda_smooth_chamfer_forward(float *S, long ldS, void *scratch, const float *a,
                                           const float *b, int Na, int Nb, int Ka, int Kb, int D,
                                           float alpha, vtr_error *err);
vtr_status vtr_cuda_smooth_chamfer_backward(float *da, float *db, void *scratch, const float *dS,
                                            long ldS, const float *a, const float *b, int Na,
                                            int Nb, int Ka, int Kb, int D, float alpha,
                                            vtr_error *err);
vtr_status vtr_cuda_set_diversity_forward(float *loss, const float *r, int N, int K, int D,
                                          vtr_error *err);
vtr_status vtr_cuda_set_diversity_backward(float *dr, float dloss, const float *r, int N, int K,
                                           int D, vtr_error *err);
vtr_status vtr_cuda_set_mmd_forward(float *loss, void *scratch, const float *X, const float *Y,
                                    long nx, long ny, int D, float gamma, vtr_error *err);
vtr_status vtr_cuda_set_mmd_backward(float *dx, float *dy, float dloss, void *scratch,
                                     const float *X, const float *Y, long nx, long ny, int D,
                                     float gamma, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
