/* Fuzz target: the embedding index reader (index/embedding_index.h) on an arbitrary index
 * directory. The input is a multi-file input (fuzz_util.h): the manifest (the bytes
 * before the first "%%file " line become index.sqlite) and segments (%%file
 * seg-000001.npy ...). What opens is read as vtr-search reads it: the items, every row's
 * key and values, a lookup of each key, and a top-k search. A failure must come with one
 * line (lib/error.h) starting with "index DIR"; what opens must keep the reader's promises:
 * live rows <= rows, items inside the matrix, keys found at the rows they came from. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "index/embedding_index.h"
#include "index/topk.h"

#define MAX_ROWS 64 /* rows read one by one */

static char prefix[600];

static void check(vtr_status st, const vtr_error *err)
{
    if (st != VTR_OK)
        fuzz_check_message(err, prefix);
}

static void read_items(vtr_embedding_index *ix)
{
    vtr_error err;
    vtr_embedding_index_items items;
    vtr_status st = vtr_embedding_index_items_read(ix, &items, &err);
    check(st, &err);
    if (st != VTR_OK)
        return;
    int64_t rows = vtr_embedding_index_rows(ix), seen = 0;
    for (int64_t i = 0; i < items.n; i++) {
        if (items.count[i] < 1 || items.first[i] < 0 || items.first[i] + items.count[i] > rows)
            abort();
        seen += items.count[i];
    }
    if (seen > rows)
        abort();
}

static void read_rows(vtr_embedding_index *ix)
{
    vtr_error err;
    int64_t rows = vtr_embedding_index_rows(ix), dim = vtr_embedding_index_dim(ix);
    if (rows == 0) /* else the segments hold rows x dim values: dim is bounded */
        return;
    float *v = malloc((size_t)dim * sizeof *v);
    if (!v)
        abort();
    for (int64_t r = 0; r < rows && r < MAX_ROWS; r++) {
        check(vtr_embedding_index_row(ix, r, v, &err), &err);
        char *key = NULL;
        int64_t vector = -1;
        bool live = false;
        vtr_status st = vtr_embedding_index_key(ix, r, &key, &vector, &live, &err);
        check(st, &err);
        if (st == VTR_OK && live) {
            int64_t first = -1, n = 0;
            st = vtr_embedding_index_find(ix, key, &first, &n, &err);
            check(st, &err);
            if (st == VTR_OK && (first < 0 || n < 1 || first + n > rows))
                abort();
        }
        free(key);
    }
    free(v);
}

static void search(vtr_embedding_index *ix)
{
    const vtr_topk_matrix *m = vtr_embedding_index_matrix(ix);
    int64_t dim = vtr_embedding_index_dim(ix);
    if (dim < 1 || dim > 4096)
        return;
    float *q = malloc((size_t)dim * sizeof *q);
    if (!q)
        abort();
    for (int64_t d = 0; d < dim; d++)
        q[d] = (float)(d % 3) - 1.0f;
    enum { K = 5 };
    int64_t rows[K], found = -1;
    float scores[K];
    vtr_tensor query = {.dtype = VTR_F32, .ndim = 1, .shape = {dim}, .data = q};
    vtr_topk_options opt = {.threads = 1};
    vtr_error err;
    vtr_status st = vtr_topk_search(m, &query, K, &opt, rows, scores, &found, &err);
    if (st != VTR_OK) {
        fuzz_check_message(&err, NULL);
    } else {
        int64_t live = vtr_embedding_index_live_rows(ix);
        if (found != (live < K ? live : K))
            abort();
        for (int64_t i = 0; i < found; i++)
            if (rows[i] < 0 || rows[i] >= vtr_embedding_index_rows(ix))
                abort();
    }
    free(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_scratch();
    fuzz_write_files(data, size, "index.sqlite");
    snprintf(prefix, sizeof prefix, "index %s", dir);
    vtr_error err;
    vtr_embedding_index *ix = NULL;
    vtr_status st = vtr_embedding_index_open(dir, &ix, &err);
    check(st, &err);
    if (st != VTR_OK)
        return 0;
    int64_t rows = vtr_embedding_index_rows(ix), live = vtr_embedding_index_live_rows(ix);
    if (live < 0 || live > rows || !vtr_embedding_index_model(ix))
        abort();
    read_items(ix);
    read_rows(ix);
    search(ix);
    vtr_embedding_index_close(ix);
    return 0;
}
