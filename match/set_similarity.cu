// CUDA side of match/set_similarity.h: the CPU's steps with the CPU's VTR_HD functions. The
// cosines and the sgemm halves of the gradients are the CUDA cosine-similarity op (cuBLAS);
// smooth-Chamfer one pair of sets per thread; the diversity term one item per thread (its
// forward one block, the threads' sums added in thread order); MMD one row (or column) of
// pairs per thread, each term's row sums added in row order by one thread. No atomics:
// every thread owns what it writes, and the sums run in a fixed order.
#include "lib/cuda_launch.h"
#include "lib/nn_cuda.h"
#include "lib/norm.h"
#include "match/set_similarity.h"

/* ---- smooth-Chamfer ---- */

// S (na,nb) of one block (row stride ldS) from its cosines C (na*Ka, nb*Kb), one pair per
// thread
__global__ static void chamfer_forward_kernel(float *S, long ldS, const float *C, int na, int nb,
                                              int Ka, int Kb, float alpha)
{
    size_t total = (size_t)na * nb;
    long ldc = (long)nb * Kb;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t i = e / (size_t)nb, j = e % (size_t)nb;
        S[i * ldS + j] =
            vtr_smooth_chamfer_pair_forward(C + i * Ka * ldc + j * Kb, ldc, Ka, Kb, alpha);
    }
}

// C (na*Ka, nb*Kb) -> dC in place, one pair per thread; dS (na,nb) with row stride ldS
__global__ static void chamfer_backward_kernel(float *C, float *col_max, float *col_inv,
                                               const float *dS, long ldS, int na, int nb, int Ka,
                                               int Kb, float alpha)
{
    size_t total = (size_t)na * nb;
    long ldc = (long)nb * Kb;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t i = e / (size_t)nb, j = e % (size_t)nb, pair = e * Kb;
        vtr_smooth_chamfer_pair_backward(C + i * Ka * ldc + j * Kb, col_max + pair, col_inv + pair,
                                         ldc, dS[i * ldS + j], Ka, Kb, alpha);
    }
}

extern "C" vtr_status vtr_cuda_smooth_chamfer_forward(float *S, long ldS, void *scratch,
                                                      const float *a, const float *b, int Na,
                                                      int Nb, int Ka, int Kb, int D, float alpha,
                                                      vtr_error *err)
{
    float *C = (float *)((char *)scratch + vtr_chamfer_layout_of(Na, Nb, Ka, Kb).C);
    for (int i0 = 0; i0 < Na; i0 += VTR_SET_BLOCK)
        for (int j0 = 0; j0 < Nb; j0 += VTR_SET_BLOCK) {
            int na = vtr_set_min_int(Na - i0, VTR_SET_BLOCK);
            int nb = vtr_set_min_int(Nb - j0, VTR_SET_BLOCK);
            VTR_TRY(vtr_cuda_cosine_similarity_forward(
                C, a + (size_t)i0 * Ka * D, b + (size_t)j0 * Kb * D, na * Ka, nb * Kb, D, err));
            chamfer_forward_kernel<<<vtr_cuda_blocks((size_t)na * nb), VTR_CUDA_THREADS>>>(
                S + i0 * ldS + j0, ldS, C, na, nb, Ka, Kb, alpha);
            VTR_TRY(vtr_cuda_launched("smooth-Chamfer forward", err));
        }
    return VTR_OK;
}

extern "C" vtr_status vtr_cuda_smooth_chamfer_backward(float *da, float *db, void *scratch,
                                                       const float *dS, long ldS, const float *a,
                                                       const float *b, int Na, int Nb, int Ka,
                                                       int Kb, int D, float alpha, vtr_error *err)
{
    if (!da && !db)
        return VTR_OK;
    vtr_chamfer_layout l = vtr_chamfer_layout_of(Na, Nb, Ka, Kb);
    float *C = (float *)((char *)scratch + l.C);
    float *col_max = (float *)((char *)scratch + l.col_max);
    float *col_inv = (float *)((char *)scratch + l.col_inv);
    for (int i0 = 0; i0 < Na; i0 += VTR_SET_BLOCK)
        for (int j0 = 0; j0 < Nb; j0 += VTR_SET_BLOCK) {
            int na = vtr_set_min_int(Na - i0, VTR_SET_BLOCK);
            int nb = vtr_set_min_int(Nb - j0, VTR_SET_BLOCK);
            const float *a_block = a + (size_t)i0 * Ka * D, *b_block = b + (size_t)j0 * Kb * D;
            VTR_TRY(
                vtr_cuda_cosine_similarity_forward(C, a_block, b_block, na * Ka, nb * Kb, D, err));
            chamfer_backward_kernel<<<vtr_cuda_blocks((size_t)na * nb), VTR_CUDA_THREADS>>>(
                C, col_max, col_inv, dS + i0 * ldS + j0, ldS, na, nb, Ka, Kb, alpha);
            VTR_TRY(vtr_cuda_launched("smooth-Chamfer backward", err));
            VTR_TRY(vtr_cuda_cosine_similarity_backward(
                da ? da + (size_t)i0 * Ka * D : NULL, db ? db + (size_t)j0 * Kb * D : NULL, C,
                a_block, b_block, na * Ka, nb * Kb, D, err));
        }
    return VTR_OK;
}

/* ---- diversity ---- */

// loss (1) = L_div of r (N,K,D): one block, thread i summing items i, i + blockDim, ...
__global__ static void diversity_forward_kernel(float *loss, const float *r, int N, int K, int D)
{
    __shared__ double partial[VTR_CUDA_THREADS];
    double sum = 0.0;
    for (int n = (int)threadIdx.x; K >= 2 && n < N; n += (int)blockDim.x)
        sum += vtr_set_diversity_item_sum(r + (size_t)n * K * D, K, D);
    double total = vtr_cuda_block_sum_ordered(partial, sum);
    if (threadIdx.x == 0)
        *loss = K < 2 ? 0.0f : (float)(total / N / (K * (K - 1) / 2.0));
}

// dr (N,K,D) +=, one item per thread
__global__ static void diversity_backward_kernel(float *dr, const float *r, double scale, int N,
                                                 int K, int D)
{
    for (size_t n = vtr_cuda_first(); n < (size_t)N; n += vtr_cuda_stride())
        vtr_set_diversity_item_backward(dr + n * K * D, r + n * K * D, scale, K, D);
}

extern "C" vtr_status vtr_cuda_set_diversity_forward(float *loss, const float *r, int N, int K,
                                                     int D, vtr_error *err)
{
    diversity_forward_kernel<<<1, VTR_CUDA_THREADS>>>(loss, r, N, K, D);
    return vtr_cuda_launched("set diversity forward", err);
}

extern "C" vtr_status vtr_cuda_set_diversity_backward(float *dr, float dloss, const float *r, int N,
                                                      int K, int D, vtr_error *err)
{
    if (K < 2)
        return VTR_OK;
    double scale = dloss / (N * (K * (K - 1) / 2.0));
    diversity_backward_kernel<<<vtr_cuda_blocks((size_t)N), VTR_CUDA_THREADS>>>(dr, r, scale, N, K,
                                                                                D);
    return vtr_cuda_launched("set diversity backward", err);
}

/* ---- MMD ---- */

// sq (n) = the squared norms of the rows of x (n,D)
__global__ static void squared_norms_kernel(double *sq, const float *x, long n, int D)
{
    for (size_t i = vtr_cuda_first(); i < (size_t)n; i += vtr_cuda_stride())
        sq[i] = vtr_row_sum_squares(x + i * D, D);
}

// G (n,n): the lower triangle from the upper one, one (i, j) per thread
__global__ static void symmetrize_kernel(float *G, long n)
{
    size_t total = (size_t)n * n;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t i = e / (size_t)n, j = e % (size_t)n;
        if (j < i)
            G[i * n + j] = G[j * n + i];
    }
}

// The term's Gram matrix (exactly symmetric when same) and the rows' squared norms.
static vtr_status mmd_term_prepare(const vtr_mmd_term *t, vtr_mmd_scratch s, vtr_error *err)
{
    VTR_TRY(vtr_cuda_cosine_similarity_forward(s.G, t->u, t->v, (int)t->n, (int)t->m, t->D, err));
    squared_norms_kernel<<<vtr_cuda_blocks((size_t)t->n), VTR_CUDA_THREADS>>>(s.sq_u, t->u, t->n,
                                                                              t->D);
    VTR_TRY(vtr_cuda_launched("MMD squared norms", err));
    squared_norms_kernel<<<vtr_cuda_blocks((size_t)t->m), VTR_CUDA_THREADS>>>(s.sq_v, t->v, t->m,
                                                                              t->D);
    VTR_TRY(vtr_cuda_launched("MMD squared norms", err));
    if (!t->same)
        return VTR_OK;
    symmetrize_kernel<<<vtr_cuda_blocks((size_t)t->n * t->n), VTR_CUDA_THREADS>>>(s.G, t->n);
    return vtr_cuda_launched("MMD symmetric Gram matrix", err);
}

// s.sums (n): the term's row sums, one row per thread
__global__ static void mmd_row_sums_kernel(vtr_mmd_term t, vtr_mmd_scratch s)
{
    for (size_t i = vtr_cuda_first(); i < (size_t)t.n; i += vtr_cuda_stride())
        s.sums[i] = vtr_mmd_row_sum(&t, s, (long)i);
}

// *term = the row sums added in row order (one thread)
__global__ static void mmd_total_kernel(double *term, const double *sums, long n)
{
    double total = 0.0;
    for (long i = 0; i < n; i++)
        total += sums[i];
    *term = total;
}

// loss (1) from the three kernel sums
__global__ static void mmd_loss_kernel(float *loss, const double *terms, long nx, long ny)
{
    double kxx = terms[0] / ((double)nx * nx);
    double kxy = terms[1] / ((double)nx * ny);
    double kyy = terms[2] / ((double)ny * ny);
    *loss = (float)(kxx - 2.0 * kxy + kyy);
}

// col_sums (m), dv (m,D) += the near pairs' terms, one column per thread
__global__ static void mmd_columns_backward_kernel(float *dv, double *col_sums, vtr_mmd_term t,
                                                   vtr_mmd_scratch s, double coef)
{
    for (size_t j = vtr_cuda_first(); j < (size_t)t.m; j += vtr_cuda_stride())
        col_sums[j] = vtr_mmd_column_backward(dv + j * t.D, &t, s, (long)j, coef);
}

// row_sums (n), G -> V, du (n,D) or NULL += the near pairs' terms, one row per thread
__global__ static void mmd_rows_backward_kernel(float *du, double *row_sums, vtr_mmd_term t,
                                                vtr_mmd_scratch s, double coef)
{
    for (size_t i = vtr_cuda_first(); i < (size_t)t.n; i += vtr_cuda_stride())
        row_sums[i] = vtr_mmd_row_backward(du ? du + i * t.D : NULL, &t, s, (long)i, coef);
}

// dx (n,D) -= sums[i] x_i, one element per thread
__global__ static void mmd_remove_rows_kernel(float *dx, const double *sums, const float *x, long n,
                                              int D)
{
    size_t total = (size_t)n * D;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride())
        dx[e] -= (float)sums[e / (size_t)D] * x[e];
}

static vtr_status mmd_term_sum(double *term, const vtr_mmd_term *t, vtr_mmd_scratch s,
                               vtr_error *err)
{
    VTR_TRY(mmd_term_prepare(t, s, err));
    mmd_row_sums_kernel<<<vtr_cuda_blocks((size_t)t->n), VTR_CUDA_THREADS>>>(*t, s);
    VTR_TRY(vtr_cuda_launched("MMD row sums", err));
    mmd_total_kernel<<<1, 1>>>(term, s.sums, t->n);
    return vtr_cuda_launched("MMD term sum", err);
}

// the CPU's mmd_term_backward (match/set_similarity.c)
static vtr_status mmd_term_backward(float *du, float *dv, const vtr_mmd_term *t, vtr_mmd_scratch s,
                                    double coef, vtr_error *err)
{
    VTR_TRY(mmd_term_prepare(t, s, err));
    long n = t->n, m = t->m;
    double *row_sums = s.sums, *col_sums = s.sums + n;
    if (dv) {
        mmd_columns_backward_kernel<<<vtr_cuda_blocks((size_t)m), VTR_CUDA_THREADS>>>(dv, col_sums,
                                                                                      *t, s, coef);
        VTR_TRY(vtr_cuda_launched("MMD column pass", err));
    }
    mmd_rows_backward_kernel<<<vtr_cuda_blocks((size_t)n), VTR_CUDA_THREADS>>>(du, row_sums, *t, s,
                                                                               coef);
    VTR_TRY(vtr_cuda_launched("MMD row pass", err));
    VTR_TRY(
        vtr_cuda_cosine_similarity_backward(du, dv, s.G, t->u, t->v, (int)n, (int)m, t->D, err));
    if (du) {
        mmd_remove_rows_kernel<<<vtr_cuda_blocks((size_t)n * t->D), VTR_CUDA_THREADS>>>(
            du, row_sums, t->u, n, t->D);
        VTR_TRY(vtr_cuda_launched("MMD row gradient", err));
    }
    if (dv) {
        mmd_remove_rows_kernel<<<vtr_cuda_blocks((size_t)m * t->D), VTR_CUDA_THREADS>>>(
            dv, col_sums, t->v, m, t->D);
        VTR_TRY(vtr_cuda_launched("MMD column gradient", err));
    }
    return VTR_OK;
}

extern "C" vtr_status vtr_cuda_set_mmd_forward(float *loss, void *scratch, const float *X,
                                               const float *Y, long nx, long ny, int D, float gamma,
                                               vtr_error *err)
{
    vtr_mmd_scratch s = vtr_mmd_scratch_of(scratch, nx, ny);
    vtr_mmd_term xx = {X, X, nx, nx, D, 1, gamma}, xy = {X, Y, nx, ny, D, 0, gamma},
                 yy = {Y, Y, ny, ny, D, 1, gamma};
    VTR_TRY(mmd_term_sum(s.terms, &xx, s, err));
    VTR_TRY(mmd_term_sum(s.terms + 1, &xy, s, err));
    VTR_TRY(mmd_term_sum(s.terms + 2, &yy, s, err));
    mmd_loss_kernel<<<1, 1>>>(loss, s.terms, nx, ny);
    return vtr_cuda_launched("MMD loss", err);
}

extern "C" vtr_status vtr_cuda_set_mmd_backward(float *dx, float *dy, float dloss, void *scratch,
                                                const float *X, const float *Y, long nx, long ny,
                                                int D, float gamma, vtr_error *err)
{
    vtr_mmd_scratch s = vtr_mmd_scratch_of(scratch, nx, ny);
    vtr_mmd_term xx = {X, X, nx, nx, D, 1, gamma}, xy = {X, Y, nx, ny, D, 0, gamma},
                 yy = {Y, Y, ny, ny, D, 1, gamma};
    if (dx)
        VTR_TRY(mmd_term_backward(dx, NULL, &xx, s, 2.0 * dloss / ((double)nx * nx), err));
    if (dx || dy)
        VTR_TRY(mmd_term_backward(dx, dy, &xy, s, -2.0 * dloss / ((double)nx * ny), err));
    if (dy)
        VTR_TRY(mmd_term_backward(dy, NULL, &yy, s, 2.0 * dloss / ((double)ny * ny), err));
    return VTR_OK;
}
