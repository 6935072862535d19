#include "linear.h"

#include <string.h>

#include "matmul.h"

void vtr_linear_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                        int C, int OC)
{
    float beta = 0.0f;
    if (bias) {
        for (int n = 0; n < N; n++)
            memcpy(out + (size_t)n * OC, bias, sizeof(float) * (size_t)OC);
        beta = 1.0f;
    }
    vtr_matmul(CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, beta, out, OC);
}

void vtr_linear_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC)
{
    // dinp (N,C) += dout (N,OC) · weight (OC,C)
    if (dinp)
        vtr_matmul(CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C);
    // dweight (OC,C) += doutᵀ (OC,N) · inp (N,C)
    vtr_matmul(CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (dbias)
        vtr_bias_backward(dbias, dout, N, OC);
}

void vtr_bias_forward(float *out, const float *bias, int N, int C)
{
#pragma omp parallel for schedule(static) if ((long)N * C > 65536)
    for (int n = 0; n < N; n++) {
        float *row = out + (size_t)n * C;
        for (int c = 0; c < C; c++)
            row[c] += bias[c];
    }
}

void vtr_bias_backward(float *dbias, const float *dout, int N, int C)
{
    int blocks = (C + VTR_COLUMN_BLOCK - 1) / VTR_COLUMN_BLOCK;
#pragma omp parallel for schedule(static) if ((long)N * C > 65536)
    for (int blk = 0; blk < blocks; blk++) {
        int c0 = blk * VTR_COLUMN_BLOCK;
        int nc = C - c0 < VTR_COLUMN_BLOCK ? C - c0 : VTR_COLUMN_BLOCK;
        vtr_bias_backward_columns(dbias, dout, N, C, c0, nc);
    }
}
