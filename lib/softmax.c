#include "softmax.h"

#include <stddef.h>

void vtr_masked_softmax_forward(float *out, const float *inp, const int *lengths, int B, int T,
                                float temperature)
{
#pragma omp parallel for schedule(static) if ((long)B * T > 65536)
    for (int b = 0; b < B; b++)
        vtr_masked_softmax_row_forward(out + (size_t)b * T, inp + (size_t)b * T,
                                       lengths ? lengths[b] : T, T, temperature);
}

void vtr_masked_softmax_backward(float *dinp, const float *dout, const float *out,
                                 const int *lengths, int B, int T, float temperature)
{
#pragma omp parallel for schedule(static) if ((long)B * T > 65536)
    for (int b = 0; b < B; b++)
        vtr_masked_softmax_row_backward(dinp + (size_t)b * T, dout + (size_t)b * T,
                                        out + (size_t)b * T, lengths ? lengths[b] : T, temperature);
}
