#include "nn.h"

vtr_status vtr_nn_check_lengths(const int *lengths, int B, int T, vtr_error *err)
{
    for (int b = 0; b < B; b++)
        if (lengths[b] < 1 || lengths[b] > T)
            return vtr_fail(err, VTR_ERR_INVALID, "item %d: length %d outside 1..%d", b, lengths[b],
                            T);
    return VTR_OK;
}

vtr_status vtr_nn_check_ids(const int *ids, long n, int V, vtr_error *err)
{
    for (long i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return vtr_fail(err, VTR_ERR_INVALID, "token %ld: id %d outside 0..%d", i, ids[i],
                            V - 1);
    return VTR_OK;
}
