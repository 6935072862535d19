/* Fuzz target: the feature store reader (lib/feature_store.h) on an arbitrary store
 * directory. The input is a multi-file input (fuzz_util.h) of meta.json, keys.txt,
 * offsets.npy and rows.npy. A failure must come with one line (lib/error.h) starting with
 * "feature store DIR"; a store that opens must keep the reader's promises: offsets from
 * 0 to R, non-decreasing, every item's view inside the matrix (ASan reads each), every
 * key found at its own index. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "lib/feature_store.h"

static volatile unsigned sink; /* keeps the reads of the data */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_scratch();
    fuzz_write_files(data, size, "meta.json");
    char prefix[600];
    snprintf(prefix, sizeof prefix, "feature store %s", dir);
    vtr_error err;
    vtr_feature_store_reader *r = NULL;
    if (vtr_feature_store_reader_open(dir, &r, &err) != VTR_OK) {
        fuzz_check_message(&err, prefix);
        if (r)
            abort();
        return 0;
    }
    int64_t n = vtr_feature_store_reader_items(r), rows = vtr_feature_store_reader_rows(r);
    int64_t dim = vtr_feature_store_reader_dim(r);
    vtr_dtype dtype = vtr_feature_store_reader_dtype(r);
    const int64_t *off = vtr_feature_store_reader_offsets(r);
    vtr_tensor m = vtr_feature_store_reader_matrix(r);
    if (n < 0 || dim < 1 || (dtype != VTR_F32 && dtype != VTR_F16) || off[0] != 0 ||
        off[n] != rows || m.ndim != 2 || m.shape[0] != rows || m.shape[1] != dim ||
        !vtr_feature_store_reader_meta(r))
        abort();
    unsigned sum = 0;
    for (int64_t i = 0; i < n; i++) {
        if (off[i + 1] < off[i])
            abort();
        const char *key = vtr_feature_store_reader_key(r, i);
        if (!key || !*key || vtr_feature_store_reader_find(r, key) != i)
            abort();
        fuzz_check_utf8(key, strlen(key));
        vtr_tensor t;
        if (vtr_feature_store_reader_item(r, i, &t, &err) != VTR_OK)
            abort();
        if (t.ndim != 2 || t.shape[0] != off[i + 1] - off[i] || t.shape[1] != dim)
            abort();
        const unsigned char *p = t.data;
        for (size_t k = 0; k < vtr_tensor_nbytes(&t); k++)
            sum += p[k];
    }
    sink = sum;
    vtr_tensor t;
    if (vtr_feature_store_reader_item(r, n, &t, &err) != VTR_ERR_INVALID)
        abort();
    fuzz_check_message(&err, prefix);
    vtr_feature_store_reader_close(r);
    return 0;
}
