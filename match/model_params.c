/* Parameter-set building for the matching models; the contracts are in model_params.h. */
#include "model_params.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/gru.h"

/* LAPACK's Householder QR and the forming of its Q (Fortran calling convention; OpenBLAS,
 * which configure requires, exports them). */
void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau, double *work,
             const int *lwork, int *info);
void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda, const double *tau,
             double *work, const int *lwork, int *info);

/* The QR's workspace per column: LAPACK's blocked code wants n * block size, and 64
 * covers the block sizes it picks. */
#define QR_WORK_PER_COLUMN 64

vtr_status vtr_model_param_add(vtr_param_set *ps, const char *prefix, const char *name,
                               vtr_dtype dtype, bool trainable, int ndim, int64_t d0, int64_t d1,
                               vtr_error *err)
{
    char full[VTR_PARAM_NAME_MAX + 1];
    int64_t shape[2] = {d0, d1};
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return vtr_param_set_add(ps, full, dtype, trainable, ndim, shape, err);
}

vtr_status vtr_model_param_add_gru(vtr_param_set *ps, const char *prefix, int D, int H,
                                   vtr_error *err)
{
    vtr_status st = VTR_OK;
    for (int dir = 0; dir < 2 && !st; dir++) {
        st = vtr_model_param_add(ps, prefix, vtr_gru_param_name(dir, VTR_GRU_WEIGHT_IH), VTR_F32,
                                 true, 2, 3 * (int64_t)H, D, err);
        if (!st)
            st = vtr_model_param_add(ps, prefix, vtr_gru_param_name(dir, VTR_GRU_WEIGHT_HH),
                                     VTR_F32, true, 2, 3 * (int64_t)H, H, err);
        if (!st)
            st = vtr_model_param_add(ps, prefix, vtr_gru_param_name(dir, VTR_GRU_BIAS_IH), VTR_F32,
                                     true, 1, 3 * (int64_t)H, 0, err);
        if (!st)
            st = vtr_model_param_add(ps, prefix, vtr_gru_param_name(dir, VTR_GRU_BIAS_HH), VTR_F32,
                                     true, 1, 3 * (int64_t)H, 0, err);
    }
    return st;
}

vtr_status vtr_model_param_add_gpo(vtr_param_set *ps, const char *prefix, int d_pe, int hidden,
                                   vtr_error *err)
{
    char sub[64];
    vtr_status st;
    /* the GRU's tensors then the scorer: aggregate/gpo.h's flat layout */
    snprintf(sub, sizeof sub, "%sgpool.gru.", prefix);
    if ((st = vtr_model_param_add_gru(ps, sub, d_pe, hidden, err)))
        return st;
    snprintf(sub, sizeof sub, "%sgpool.", prefix);
    return vtr_model_param_add(ps, sub, "linear.weight", VTR_F32, true, 2, 1, hidden, err);
}

void vtr_model_fill_uniform(float *x, size_t n, float bound, vtr_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (2.0f * vtr_rng_uniform(rng) - 1.0f) * bound;
}

void vtr_model_fill_default(const vtr_param_set *ps, size_t i, vtr_rng *rng)
{
    const vtr_param_entry *e = &ps->entries[i];
    float *x = ps->data + e->offset;
    double fan_in;
    if (strstr(e->name, ".gru.") || strstr(e->name, ".rnn."))
        fan_in = (double)e->shape[0] / 3.0;
    else if (e->ndim == 2)
        fan_in = (double)e->shape[1];
    else
        fan_in = (double)ps->entries[i - 1].shape[1];
    vtr_model_fill_uniform(x, e->numel, (float)(1.0 / sqrt(fan_in)), rng);
}

size_t vtr_model_orthogonal_scratch_size(int rows, int cols)
{
    size_t m = (size_t)(rows > cols ? rows : cols), n = (size_t)(rows > cols ? cols : rows);
    return m * n + 2 * n /* tau, signs */ + n * QR_WORK_PER_COLUMN;
}

void vtr_model_fill_orthogonal(float *x, int rows, int cols, vtr_rng *rng, double *scratch)
{
    /* a (m,n), m >= n, column-major: x when rows >= cols, else xᵀ (PyTorch transposes a
     * wide tensor before its QR and Q after) */
    int tall = rows >= cols, m = tall ? rows : cols, n = tall ? cols : rows;
    int lwork = n * QR_WORK_PER_COLUMN, info;
    double *a = scratch, *tau = a + (size_t)m * n, *sign = tau + n, *work = sign + n;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            a[tall ? (size_t)r + (size_t)c * m : (size_t)c + (size_t)r * m] = vtr_rng_normal(rng);
    /* info reports illegal arguments only, which these are not */
    dgeqrf_(&m, &n, a, &m, tau, work, &lwork, &info);
    for (int j = 0; j < n; j++) /* R's diagonal's signs (a zero has probability 0) */
        sign[j] = a[(size_t)j + (size_t)j * m] < 0.0 ? -1.0 : 1.0;
    dorgqr_(&m, &n, &n, a, &m, tau, work, &lwork, &info);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            x[(size_t)r * cols + c] = (float)(tall ? a[(size_t)r + (size_t)c * m] * sign[c]
                                                   : a[(size_t)c + (size_t)r * m] * sign[r]);
}
