/* Masked softmax with temperature over the set axis of a padded batch (conventions:
 * lib/nn.h). out[b,t] = exp(x[b,t]/temp) / sum_{k < len_b} exp(x[b,k]/temp) for
 * t < lengths[b], and 0 at padded positions. This equals PyTorch's
 * softmax(x.masked_fill(pad, -10000) / temp) for every temp <= 1 and |x| << 10000: the
 * padded terms underflow to exactly 0 in float32.
 */
#ifndef VTR_SOFTMAX_H
#define VTR_SOFTMAX_H

#include <math.h>

#include "hostdevice.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One row: x (T), out (T), len real entries; out may equal x. */
static VTR_HD void vtr_masked_softmax_row_forward(float *out, const float *x, int len, int T,
                                                  float temperature)
{
    float mx = -INFINITY;
    for (int t = 0; t < len; t++) {
        out[t] = x[t] / temperature;
        mx = out[t] > mx ? out[t] : mx;
    }
    float sum = 0.0f;
    for (int t = 0; t < len; t++) {
        out[t] = expf(out[t] - mx);
        sum += out[t];
    }
    float inv = 1.0f / sum;
    for (int t = 0; t < len; t++)
        out[t] *= inv;
    for (int t = len; t < T; t++)
        out[t] = 0.0f;
}

/* One row: dinp (T) += gradient through the softmax, zero at padded positions. */
static VTR_HD void vtr_masked_softmax_row_backward(float *dinp, const float *dout, const float *out,
                                                   int len, float temperature)
{
    float dot = 0.0f;
    for (int t = 0; t < len; t++)
        dot += out[t] * dout[t];
    for (int t = 0; t < len; t++)
        dinp[t] += out[t] * (dout[t] - dot) / temperature;
}

// inp (B,T), lengths (B) or NULL for all T, out (B,T); out may equal inp
void vtr_masked_softmax_forward(float *out, const float *inp, const int *lengths, int B, int T,
                                float temperature);

// dinp (B,T), dout (B,T), out (B,T) the forward's output, lengths (B) or NULL
void vtr_masked_softmax_backward(float *dinp, const float *dout, const float *out,
                                 const int *lengths, int B, int T, float temperature);

#ifdef __cplusplus
}
#endif

#endif
