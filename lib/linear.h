/* Fully connected layer and bias (conventions: lib/nn.h).
 *
 * out = inp · weightᵀ + bias with PyTorch's weight layout (OC, C), through CBLAS.
 */
#ifndef VTR_LINEAR_H
#define VTR_LINEAR_H

#include "hostdevice.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dbias[c0 .. c0+nc) += the column sums of dout (N,C) over those columns, each summed over
 * the rows in order in double; nc <= VTR_COLUMN_BLOCK. */
static VTR_HD void vtr_bias_backward_columns(float *dbias, const float *dout, int N, int C, int c0,
                                             int nc)
{
    double acc[VTR_COLUMN_BLOCK] = {0};
    for (int n = 0; n < N; n++) {
        const float *row = dout + (size_t)n * C + c0;
        for (int c = 0; c < nc; c++)
            acc[c] += row[c];
    }
    for (int c = 0; c < nc; c++)
        dbias[c0 + c] += (float)acc[c];
}

// inp (N,C), weight (OC,C) [PyTorch layout], bias (OC) or NULL, out (N,OC)
void vtr_linear_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                        int C, int OC);

// dinp (N,C) or NULL, dweight (OC,C), dbias (OC) or NULL when bias is NULL, dout (N,OC),
// inp (N,C), weight (OC,C). All three gradients accumulate.
void vtr_linear_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC);

// out (N,C) += bias (C) on every row
void vtr_bias_forward(float *out, const float *bias, int N, int C);

// dbias (C) += column sums of dout (N,C), each column summed over rows in order (in double)
void vtr_bias_backward(float *dbias, const float *dout, int N, int C);

#ifdef __cplusplus
}
#endif

#endif
