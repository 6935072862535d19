#include "set_similarity.h"

#include <math.h>

#include "lib/norm.h"
#include "lib/similarity.h"

/* ---- smooth-Chamfer (the scratch: vtr_chamfer_layout_of) ---- */

size_t vtr_smooth_chamfer_scratch_size(int Na, int Nb, int Ka, int Kb)
{
    return vtr_chamfer_layout_of(Na, Nb, Ka, Kb).total;
}

void vtr_smooth_chamfer_forward(float *S, long ldS, void *scratch, const float *a, const float *b,
                                int Na, int Nb, int Ka, int Kb, int D, float alpha)
{
    float *C = (float *)((char *)scratch + vtr_chamfer_layout_of(Na, Nb, Ka, Kb).C);
    for (int i0 = 0; i0 < Na; i0 += VTR_SET_BLOCK)
        for (int j0 = 0; j0 < Nb; j0 += VTR_SET_BLOCK) {
            int na = vtr_set_min_int(Na - i0, VTR_SET_BLOCK);
            int nb = vtr_set_min_int(Nb - j0, VTR_SET_BLOCK);
            long ldc = (long)nb * Kb;
            vtr_cosine_similarity_forward(C, a + (size_t)i0 * Ka * D, b + (size_t)j0 * Kb * D,
                                          na * Ka, nb * Kb, D);
#pragma omp parallel for collapse(2) schedule(static) if ((long)na * Ka * ldc > 65536)
            for (int i = 0; i < na; i++)
                for (int j = 0; j < nb; j++)
                    S[(i0 + i) * ldS + j0 + j] = vtr_smooth_chamfer_pair_forward(
                        C + (size_t)i * Ka * ldc + (size_t)j * Kb, ldc, Ka, Kb, alpha);
        }
}

void vtr_smooth_chamfer_backward(float *da, float *db, void *scratch, const float *dS, long ldS,
                                 const float *a, const float *b, int Na, int Nb, int Ka, int Kb,
                                 int D, float alpha)
{
    if (!da && !db)
        return;
    vtr_chamfer_layout l = vtr_chamfer_layout_of(Na, Nb, Ka, Kb);
    float *C = (float *)((char *)scratch + l.C);
    float *col_max = (float *)((char *)scratch + l.col_max);
    float *col_inv = (float *)((char *)scratch + l.col_inv);
    for (int i0 = 0; i0 < Na; i0 += VTR_SET_BLOCK)
        for (int j0 = 0; j0 < Nb; j0 += VTR_SET_BLOCK) {
            int na = vtr_set_min_int(Na - i0, VTR_SET_BLOCK);
            int nb = vtr_set_min_int(Nb - j0, VTR_SET_BLOCK);
            long ldc = (long)nb * Kb;
            const float *a_block = a + (size_t)i0 * Ka * D, *b_block = b + (size_t)j0 * Kb * D;
            vtr_cosine_similarity_forward(C, a_block, b_block, na * Ka, nb * Kb, D);
#pragma omp parallel for collapse(2) schedule(static) if ((long)na * Ka * ldc > 65536)
            for (int i = 0; i < na; i++)
                for (int j = 0; j < nb; j++) {
                    size_t pair = ((size_t)i * nb + j) * Kb;
                    vtr_smooth_chamfer_pair_backward(C + (size_t)i * Ka * ldc + (size_t)j * Kb,
                                                     col_max + pair, col_inv + pair, ldc,
                                                     dS[(i0 + i) * ldS + j0 + j], Ka, Kb, alpha);
                }
            vtr_cosine_similarity_backward(da ? da + (size_t)i0 * Ka * D : NULL,
                                           db ? db + (size_t)j0 * Kb * D : NULL, C, a_block,
                                           b_block, na * Ka, nb * Kb, D);
        }
}

/* ---- diversity ---- */

float vtr_set_diversity_forward(const float *r, int N, int K, int D)
{
    if (K < 2)
        return 0.0f;
    double total = 0.0;
    for (int n = 0; n < N; n++)
        total += vtr_set_diversity_item_sum(r + (size_t)n * K * D, K, D);
    return (float)(total / N / (K * (K - 1) / 2.0));
}

void vtr_set_diversity_backward(float *dr, float dloss, const float *r, int N, int K, int D)
{
    if (K < 2)
        return;
    double scale = dloss / (N * (K * (K - 1) / 2.0));
#pragma omp parallel for schedule(static) if ((long)N * K * K * D > 65536)
    for (int n = 0; n < N; n++)
        vtr_set_diversity_item_backward(dr + (size_t)n * K * D, r + (size_t)n * K * D, scale, K, D);
}

/* ---- MMD (the scratch: vtr_mmd_layout_of) ---- */

size_t vtr_set_mmd_scratch_size(long nx, long ny)
{
    return vtr_mmd_layout_of(nx, ny).total;
}

/* sq (n) = the squared norms of the rows of x (n,D) */
static void squared_norms(double *sq, const float *x, long n, int D)
{
#pragma omp parallel for schedule(static) if (n * D > 65536)
    for (long i = 0; i < n; i++)
        sq[i] = vtr_row_sum_squares(x + i * D, D);
}

/* The Gram matrix of the term's pairs (exactly symmetric when same) and the rows' squared
 * norms. */
static void mmd_term_prepare(const vtr_mmd_term *t, vtr_mmd_scratch s)
{
    vtr_cosine_similarity_forward(s.G, t->u, t->v, (int)t->n, (int)t->m, t->D);
    squared_norms(s.sq_u, t->u, t->n, t->D);
    squared_norms(s.sq_v, t->v, t->m, t->D);
    if (!t->same)
        return;
#pragma omp parallel for schedule(static) if (t->n * t->m > 65536)
    for (long i = 0; i < t->n; i++)
        for (long j = 0; j < i; j++)
            s.G[i * t->m + j] = s.G[j * t->m + i];
}

/* sum over the term's pairs of exp(-gamma |u_i - v_j|), rows in order */
static double mmd_term_sum(const vtr_mmd_term *t, vtr_mmd_scratch s)
{
    mmd_term_prepare(t, s);
#pragma omp parallel for schedule(static) if (t->n * t->m > 16384)
    for (long i = 0; i < t->n; i++)
        s.sums[i] = vtr_mmd_row_sum(t, s, i);
    double total = 0.0;
    for (long i = 0; i < t->n; i++)
        total += s.sums[i];
    return total;
}

/* du (n,D) += and dv (m,D) += (either may be NULL; dv NULL when same) the gradient of coef
 * times the term's sum (vtr_mmd_column_backward). When same, V is symmetric and both roles
 * of u give du, so coef comes doubled. */
static void mmd_term_backward(float *du, float *dv, const vtr_mmd_term *t, vtr_mmd_scratch s,
                              double coef)
{
    mmd_term_prepare(t, s);
    long n = t->n, m = t->m;
    int D = t->D;
    double *row_sums = s.sums, *col_sums = s.sums + n;
    if (dv) { /* by columns, before the rows' pass turns G into V */
#pragma omp parallel for schedule(static) if (n * m > 16384)
        for (long j = 0; j < m; j++)
            col_sums[j] = vtr_mmd_column_backward(dv + j * D, t, s, j, coef);
    }
#pragma omp parallel for schedule(static) if (n * m > 16384)
    for (long i = 0; i < n; i++)
        row_sums[i] = vtr_mmd_row_backward(du ? du + i * D : NULL, t, s, i, coef);
    vtr_cosine_similarity_backward(du, dv, s.G, t->u, t->v, (int)n, (int)m, D);
    if (du) {
#pragma omp parallel for schedule(static) if (n * D > 65536)
        for (long i = 0; i < n; i++)
            for (int d = 0; d < D; d++)
                du[i * D + d] -= (float)row_sums[i] * t->u[i * D + d];
    }
    if (dv) {
#pragma omp parallel for schedule(static) if (m * D > 65536)
        for (long j = 0; j < m; j++)
            for (int d = 0; d < D; d++)
                dv[j * D + d] -= (float)col_sums[j] * t->v[j * D + d];
    }
}

float vtr_set_mmd_forward(void *scratch, const float *X, const float *Y, long nx, long ny, int D,
                          float gamma)
{
    vtr_mmd_scratch s = vtr_mmd_scratch_of(scratch, nx, ny);
    vtr_mmd_term xx = {X, X, nx, nx, D, 1, gamma}, xy = {X, Y, nx, ny, D, 0, gamma},
                 yy = {Y, Y, ny, ny, D, 1, gamma};
    double kxx = mmd_term_sum(&xx, s) / ((double)nx * nx);
    double kxy = mmd_term_sum(&xy, s) / ((double)nx * ny);
    double kyy = mmd_term_sum(&yy, s) / ((double)ny * ny);
    return (float)(kxx - 2.0 * kxy + kyy);
}

void vtr_set_mmd_backward(float *dx, float *dy, float dloss, void *scratch, const float *X,
                          const float *Y, long nx, long ny, int D, float gamma)
{
    vtr_mmd_scratch s = vtr_mmd_scratch_of(scratch, nx, ny);
    vtr_mmd_term xx = {X, X, nx, nx, D, 1, gamma}, xy = {X, Y, nx, ny, D, 0, gamma},
                 yy = {Y, Y, ny, ny, D, 1, gamma};
    if (dx)
        mmd_term_backward(dx, NULL, &xx, s, 2.0 * dloss / ((double)nx * nx));
    if (dx || dy)
        mmd_term_backward(dx, dy, &xy, s, -2.0 * dloss / ((double)nx * ny));
    if (dy)
        mmd_term_backward(dy, NULL, &yy, s, 2.0 * dloss / ((double)ny * ny));
}
