/* lib/pack.h on the CPU: one copy per item. */
#include "pack.h"

#include <stddef.h>
#include <string.h>

size_t vtr_pack_count(const int *lengths, int B)
{
    size_t n = 0;
    for (int b = 0; b < B; b++)
        n += (size_t)lengths[b];
    return n;
}

size_t vtr_pack_rows(float *packed, const float *padded, const int *lengths, int B, int T, int D)
{
    size_t n = 0;
    for (int b = 0; b < B; b++) {
        memcpy(packed + n * D, padded + (size_t)b * T * D, sizeof(float) * lengths[b] * D);
        n += (size_t)lengths[b];
    }
    return n;
}

void vtr_unpack_rows(float *padded, const float *packed, const int *lengths, int B, int T, int D)
{
    size_t n = 0;
    for (int b = 0; b < B; b++) {
        float *dst = padded + (size_t)b * T * D;
        memcpy(dst, packed + n * D, sizeof(float) * lengths[b] * D);
        memset(dst + (size_t)lengths[b] * D, 0, sizeof(float) * (T - lengths[b]) * D);
        n += (size_t)lengths[b];
    }
}
