/* Padded sequences and their packed rows (torch's pack_padded_sequence, in the batch's own
 * order). A padded batch (B,T,D) holds in item b its lengths[b] real rows, then padding;
 * its packed rows (N,D), N the sum of the lengths, are the real rows one after the other,
 * item after item. Ops that work row by row (a Linear layer) run on the packed rows only.
 * Lengths are 0..T (unchecked: vtr_nn_check_lengths). */
#ifndef VTR_PACK_H
#define VTR_PACK_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>

// N: the packed rows of a batch with these lengths
size_t vtr_pack_count(const int *lengths, int B);

// packed (N,D) = the real rows of padded (B,T,D); returns N
size_t vtr_pack_rows(float *packed, const float *padded, const int *lengths, int B, int T, int D);

// padded (B,T,D) = packed (N,D)'s rows in their items, zero past each length
void vtr_unpack_rows(float *padded, const float *packed, const int *lengths, int B, int T, int D);

#ifdef __cplusplus
}
#endif

#endif
