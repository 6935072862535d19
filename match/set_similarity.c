#include "set_similarity.h"

#include <math.h>

#include "lib/norm.h"
#include "lib/similarity.h"

static size_t floats(size_t n)
{
    return vtr_workspace_align(sizeof(float) * n);
}

static size_t doubles(size_t n)
{
    return vtr_workspace_align(sizeof(double) * n);
}

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

/* ---- smooth-Chamfer ---------------------------------------------------------------------
 *
 * Scratch (floats), for a block of na <= VTR_SET_BLOCK sets of a and nb <= VTR_SET_BLOCK of b:
 *   C        (na*Ka, nb*Kb)  the block's cosines, row (i, x), column (j, y); backward turns
 *                            each pair's Ka x Kb sub-block into dC = dS[i,j] dS/dc in place
 *   col_max  (na, nb, Kb)    backward: max_x c(x,y) of each pair's column y
 *   col_inv  (na, nb, Kb)    backward: 1 / sum_x exp(alpha (c(x,y) - col_max))
 */
typedef struct {
    size_t C, col_max, col_inv, total;
} chamfer_layout;

static chamfer_layout chamfer_layout_of(int Na, int Nb, int Ka, int Kb)
{
    size_t na = (size_t)min_int(Na, VTR_SET_BLOCK), nb = (size_t)min_int(Nb, VTR_SET_BLOCK);
    chamfer_layout l;
    l.C = 0;
    l.col_max = l.C + floats(na * Ka * nb * Kb);
    l.col_inv = l.col_max + floats(na * nb * Kb);
    l.total = l.col_inv + floats(na * nb * Kb);
    return l;
}

size_t vtr_smooth_chamfer_scratch_size(int Na, int Nb, int Ka, int Kb)
{
    return chamfer_layout_of(Na, Nb, Ka, Kb).total;
}

/* max of the n values x[0], x[stride], ... */
static float strided_max(const float *x, long stride, int n)
{
    float m = x[0];
    for (int k = 1; k < n; k++)
        m = x[k * stride] > m ? x[k * stride] : m;
    return m;
}

/* sum_k exp(alpha (x[k*stride] - m)) */
static float strided_exp_sum(const float *x, long stride, int n, float m, float alpha)
{
    float sum = 0.0f;
    for (int k = 0; k < n; k++)
        sum += expf(alpha * (x[k * stride] - m));
    return sum;
}

/* 1/alpha log sum_k exp(alpha x[k*stride]), about the maximum */
static float strided_log_sum_exp(const float *x, long stride, int n, float alpha)
{
    float m = strided_max(x, stride, n);
    return m + logf(strided_exp_sum(x, stride, n, m, alpha)) / alpha;
}

/* S of one pair from its cosines c (Ka, Kb) with row stride ldc */
static float chamfer_pair_forward(const float *c, long ldc, int Ka, int Kb, float alpha)
{
    float rows = 0.0f, cols = 0.0f;
    for (int x = 0; x < Ka; x++)
        rows += strided_log_sum_exp(c + x * ldc, 1, Kb, alpha);
    for (int y = 0; y < Kb; y++)
        cols += strided_log_sum_exp(c + y, ldc, Ka, alpha);
    return rows / (2.0f * Ka) + cols / (2.0f * Kb);
}

/* Turns one pair's cosines c (Ka, Kb), row stride ldc, into dS * dS/dc (eq. 8), in place.
 * col_max (Kb) and col_inv (Kb) keep the column softmaxes' statistics while c is
 * overwritten. */
static void chamfer_pair_backward(float *c, float *col_max, float *col_inv, long ldc, float dS,
                                  int Ka, int Kb, float alpha)
{
    for (int y = 0; y < Kb; y++) {
        col_max[y] = strided_max(c + y, ldc, Ka);
        col_inv[y] = 1.0f / strided_exp_sum(c + y, ldc, Ka, col_max[y], alpha);
    }
    float row_scale = dS / (2.0f * Ka), col_scale = dS / (2.0f * Kb);
    for (int x = 0; x < Ka; x++) {
        float *row = c + x * ldc;
        float m = strided_max(row, 1, Kb);
        float row_inv = 1.0f / strided_exp_sum(row, 1, Kb, m, alpha);
        for (int y = 0; y < Kb; y++)
            row[y] = row_scale * (expf(alpha * (row[y] - m)) * row_inv) +
                     col_scale * (expf(alpha * (row[y] - col_max[y])) * col_inv[y]);
    }
}

void vtr_smooth_chamfer_forward(float *S, long ldS, void *scratch, const float *a, const float *b,
                                int Na, int Nb, int Ka, int Kb, int D, float alpha)
{
    float *C = (float *)((char *)scratch + chamfer_layout_of(Na, Nb, Ka, Kb).C);
    for (int i0 = 0; i0 < Na; i0 += VTR_SET_BLOCK)
        for (int j0 = 0; j0 < Nb; j0 += VTR_SET_BLOCK) {
            int na = min_int(Na - i0, VTR_SET_BLOCK), nb = min_int(Nb - j0, VTR_SET_BLOCK);
            long ldc = (long)nb * Kb;
            vtr_cosine_similarity_forward(C, a + (size_t)i0 * Ka * D, b + (size_t)j0 * Kb * D,
                                          na * Ka, nb * Kb, D);
#pragma omp parallel for collapse(2) schedule(static) if ((long)na * Ka * ldc > 65536)
            for (int i = 0; i < na; i++)
                for (int j = 0; j < nb; j++)
                    S[(i0 + i) * ldS + j0 + j] = chamfer_pair_forward(
                        C + (size_t)i * Ka * ldc + (size_t)j * Kb, ldc, Ka, Kb, alpha);
        }
}

void vtr_smooth_chamfer_backward(float *da, float *db, void *scratch, const float *dS, long ldS,
                                 const float *a, const float *b, int Na, int Nb, int Ka, int Kb,
                                 int D, float alpha)
{
    if (!da && !db)
        return;
    chamfer_layout l = chamfer_layout_of(Na, Nb, Ka, Kb);
    float *C = (float *)((char *)scratch + l.C);
    float *col_max = (float *)((char *)scratch + l.col_max);
    float *col_inv = (float *)((char *)scratch + l.col_inv);
    for (int i0 = 0; i0 < Na; i0 += VTR_SET_BLOCK)
        for (int j0 = 0; j0 < Nb; j0 += VTR_SET_BLOCK) {
            int na = min_int(Na - i0, VTR_SET_BLOCK), nb = min_int(Nb - j0, VTR_SET_BLOCK);
            long ldc = (long)nb * Kb;
            const float *a_block = a + (size_t)i0 * Ka * D, *b_block = b + (size_t)j0 * Kb * D;
            vtr_cosine_similarity_forward(C, a_block, b_block, na * Ka, nb * Kb, D);
#pragma omp parallel for collapse(2) schedule(static) if ((long)na * Ka * ldc > 65536)
            for (int i = 0; i < na; i++)
                for (int j = 0; j < nb; j++) {
                    size_t pair = ((size_t)i * nb + j) * Kb;
                    chamfer_pair_backward(C + (size_t)i * Ka * ldc + (size_t)j * Kb, col_max + pair,
                                          col_inv + pair, ldc, dS[(i0 + i) * ldS + j0 + j], Ka, Kb,
                                          alpha);
                }
            vtr_cosine_similarity_backward(da ? da + (size_t)i0 * Ka * D : NULL,
                                           db ? db + (size_t)j0 * Kb * D : NULL, C, a_block,
                                           b_block, na * Ka, nb * Kb, D);
        }
}

/* ---- diversity --------------------------------------------------------------------------- */

/* |u - v|^2 of two rows (D): the differences in float (exact where u and v are near, which
 * is where this is called for MMD), their squares summed in 16 float lanes, then the
 * lanes in order in double: a fixed order that vectorizes without reassociation, with a
 * relative error of about 1e-7 sqrt(D / 16) at any distance (no cancellation). MMD's near
 * pairs spend most of its time in here. */
static double squared_distance(const float *u, const float *v, int D)
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

float vtr_set_diversity_forward(const float *r, int N, int K, int D)
{
    if (K < 2)
        return 0.0f;
    double total = 0.0;
    for (int n = 0; n < N; n++) {
        const float *item = r + (size_t)n * K * D;
        for (int i = 0; i < K; i++)
            for (int j = i + 1; j < K; j++)
                total +=
                    exp(-2.0 * squared_distance(item + (size_t)i * D, item + (size_t)j * D, D));
    }
    return (float)(total / N / (K * (K - 1) / 2.0));
}

void vtr_set_diversity_backward(float *dr, float dloss, const float *r, int N, int K, int D)
{
    if (K < 2)
        return;
    /* d/dr_i exp(-2 |r_i - r_j|^2) = -4 exp(-2 |r_i - r_j|^2) (r_i - r_j), and minus that
     * for r_j */
    double scale = dloss / (N * (K * (K - 1) / 2.0));
#pragma omp parallel for schedule(static) if ((long)N * K * K * D > 65536)
    for (int n = 0; n < N; n++) {
        const float *item = r + (size_t)n * K * D;
        float *ditem = dr + (size_t)n * K * D;
        for (int i = 0; i < K; i++)
            for (int j = i + 1; j < K; j++) {
                const float *ri = item + (size_t)i * D, *rj = item + (size_t)j * D;
                float g = (float)(-4.0 * scale * exp(-2.0 * squared_distance(ri, rj, D)));
                float *di = ditem + (size_t)i * D, *dj = ditem + (size_t)j * D;
                for (int d = 0; d < D; d++) {
                    float diff = ri[d] - rj[d];
                    di[d] += g * diff;
                    dj[d] -= g * diff;
                }
            }
    }
}

/* ---- MMD ----------------------------------------------------------------------------------
 *
 * Each of the three kernel sums runs over one (n, m) matrix of pairs (u_i, v_j): X with X,
 * X with Y, Y with Y. Scratch, for n, m <= max(nx, ny) = M:
 *   G     (n, m) floats in an (M, M) region: the Gram matrix <u_i, v_j>, then (backward)
 *         the pairs' weights V
 *   sq_u  (n), sq_v (m) doubles: the rows' squared norms
 *   sums  (n + m) doubles: row sums (of the kernel, or of V), then V's column sums
 */
typedef struct {
    size_t G, sq_u, sq_v, sums, total;
} mmd_layout;

typedef struct {
    float *G;
    double *sq_u, *sq_v, *sums;
} mmd_scratch;

static mmd_layout mmd_layout_of(long nx, long ny)
{
    size_t M = (size_t)(nx > ny ? nx : ny);
    mmd_layout l;
    l.G = 0;
    l.sq_u = l.G + floats(M * M);
    l.sq_v = l.sq_u + doubles(M);
    l.sums = l.sq_v + doubles(M);
    l.total = l.sums + doubles(2 * M);
    return l;
}

static mmd_scratch mmd_scratch_of(void *scratch, long nx, long ny)
{
    mmd_layout l = mmd_layout_of(nx, ny);
    char *base = scratch;
    return (mmd_scratch){(float *)(base + l.G), (double *)(base + l.sq_u),
                         (double *)(base + l.sq_v), (double *)(base + l.sums)};
}

size_t vtr_set_mmd_scratch_size(long nx, long ny)
{
    return mmd_layout_of(nx, ny).total;
}

/* Gram-form distances cancel where |u - v|^2 is small beside |u|^2 + |v|^2 (the float
 * <u, v> carries an error of ~1e-7 sqrt(D) |u| |v|): below this fraction of |u|^2 + |v|^2 a
 * pair is "near": its squared distance is summed from the rows' differences, so equal rows
 * are at distance exactly 0 and pass no gradient, and backward adds its gradient
 * V_ij (v_j - u_i) from the differences too (V_ij ~ 1/d is large there, and the sgemm form
 * V_ij v_j - V_ij u_i would cancel). */
#define MMD_NEAR_FRACTION 0.0625

/* One kernel sum's pairs: u (n,D) against v (m,D); `same` when v is u (the pairs (i, j) and
 * (j, i) then get the same distance and the diagonal is at distance 0). */
typedef struct {
    const float *u, *v;
    long n, m;
    int D, same;
    float gamma;
} mmd_term;

/* sq (n) = the squared norms of the rows of x (n,D) */
static void squared_norms(double *sq, const float *x, long n, int D)
{
#pragma omp parallel for schedule(static) if (n * D > 65536)
    for (long i = 0; i < n; i++)
        sq[i] = vtr_row_sum_squares(x + i * D, D);
}

/* The Gram matrix of the term's pairs (exactly symmetric when same) and the rows' squared
 * norms. */
static void mmd_term_prepare(const mmd_term *t, mmd_scratch s)
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

/* |u_i - v_j| from the Gram entry g = <u_i, v_j>; *near: whether the pair is near */
static double mmd_distance(int *near, const mmd_term *t, mmd_scratch s, long i, long j, float g)
{
    *near = 0;
    if (t->same && i == j)
        return 0.0;
    double norms = s.sq_u[i] + s.sq_v[j], d2 = norms - 2.0 * g;
    if (d2 < MMD_NEAR_FRACTION * norms) {
        *near = 1;
        d2 = squared_distance(t->u + i * t->D, t->v + j * t->D, t->D);
    }
    return d2 > 0.0 ? sqrt(d2) : 0.0;
}

/* The pair's weight V_ij = coef gamma exp(-gamma d) / d, 0 at d = 0 (see mmd_term_backward) */
static float mmd_weight(int *near, const mmd_term *t, mmd_scratch s, long i, long j, float g,
                        double coef)
{
    double d = mmd_distance(near, t, s, i, j, g);
    return d > 0.0 ? (float)(coef * t->gamma * exp(-t->gamma * d) / d) : 0.0f;
}

/* dx (D) += w (y - x) */
static void add_weighted_difference(float *dx, const float *x, const float *y, float w, int D)
{
    for (int d = 0; d < D; d++)
        dx[d] += w * (y[d] - x[d]);
}

/* sum over the term's pairs of exp(-gamma |u_i - v_j|), rows in order */
static double mmd_term_sum(const mmd_term *t, mmd_scratch s)
{
    mmd_term_prepare(t, s);
#pragma omp parallel for schedule(static) if (t->n * t->m > 16384)
    for (long i = 0; i < t->n; i++) {
        double sum = 0.0;
        for (long j = 0; j < t->m; j++) {
            int near;
            sum += exp(-t->gamma * mmd_distance(&near, t, s, i, j, s.G[i * t->m + j]));
        }
        s.sums[i] = sum;
    }
    double total = 0.0;
    for (long i = 0; i < t->n; i++)
        total += s.sums[i];
    return total;
}

/* du (n,D) += and dv (m,D) += (either may be NULL; dv NULL when same) the gradient of coef
 * times the term's sum. With V_ij = coef gamma exp(-gamma d_ij) / d_ij (0 where d_ij = 0):
 *     du_i = sum_j V_ij v_j - (sum_j V_ij) u_i,   dv_j = sum_i V_ij u_i - (sum_i V_ij) v_j,
 * one sgemm each over the pairs that are not near; the near pairs add V_ij (v_j - u_i) and
 * V_ij (u_i - v_j) from the differences. When same, V is symmetric and both roles of u give
 * du, so coef comes doubled. */
static void mmd_term_backward(float *du, float *dv, const mmd_term *t, mmd_scratch s, double coef)
{
    mmd_term_prepare(t, s);
    long n = t->n, m = t->m;
    int D = t->D;
    double *row_sums = s.sums, *col_sums = s.sums + n;
    if (dv) { /* by columns, before the rows' pass turns G into V */
#pragma omp parallel for schedule(static) if (n * m > 16384)
        for (long j = 0; j < m; j++) {
            double sum = 0.0;
            for (long i = 0; i < n; i++) {
                int near;
                float w = mmd_weight(&near, t, s, i, j, s.G[i * m + j], coef);
                if (near)
                    add_weighted_difference(dv + j * D, t->v + j * D, t->u + i * D, w, D);
                else
                    sum += w;
            }
            col_sums[j] = sum;
        }
    }
#pragma omp parallel for schedule(static) if (n * m > 16384)
    for (long i = 0; i < n; i++) {
        float *V = s.G + i * m;
        double sum = 0.0;
        for (long j = 0; j < m; j++) {
            int near;
            float w = mmd_weight(&near, t, s, i, j, V[j], coef);
            if (near && du)
                add_weighted_difference(du + i * D, t->u + i * D, t->v + j * D, w, D);
            V[j] = near ? 0.0f : w;
            sum += V[j];
        }
        row_sums[i] = sum;
    }
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
    mmd_scratch s = mmd_scratch_of(scratch, nx, ny);
    mmd_term xx = {X, X, nx, nx, D, 1, gamma}, xy = {X, Y, nx, ny, D, 0, gamma},
             yy = {Y, Y, ny, ny, D, 1, gamma};
    double kxx = mmd_term_sum(&xx, s) / ((double)nx * nx);
    double kxy = mmd_term_sum(&xy, s) / ((double)nx * ny);
    double kyy = mmd_term_sum(&yy, s) / ((double)ny * ny);
    return (float)(kxx - 2.0 * kxy + kyy);
}

void vtr_set_mmd_backward(float *dx, float *dy, float dloss, void *scratch, const float *X,
                          const float *Y, long nx, long ny, int D, float gamma)
{
    mmd_scratch s = mmd_scratch_of(scratch, nx, ny);
    mmd_term xx = {X, X, nx, nx, D, 1, gamma}, xy = {X, Y, nx, ny, D, 0, gamma},
             yy = {Y, Y, ny, ny, D, 1, gamma};
    if (dx)
        mmd_term_backward(dx, NULL, &xx, s, 2.0 * dloss / ((double)nx * nx));
    if (dx || dy)
        mmd_term_backward(dx, dy, &xy, s, -2.0 * dloss / ((double)nx * ny));
    if (dy)
        mmd_term_backward(dy, NULL, &yy, s, 2.0 * dloss / ((double)ny * ny));
}
