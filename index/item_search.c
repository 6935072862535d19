/* Searching with a visual vector (item_search.h). */
#include "item_search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

vtr_status vtr_item_search_vector(vtr_embedding_index *ix, const char *key, float *q,
                                  vtr_error *err)
{
    int64_t first;
    vtr_status st = vtr_embedding_index_find(ix, key, &first, NULL, err);
    if (st == VTR_ERR_NOT_FOUND)
        return vtr_fail(err, st, "no item %s in the index", key);
    return st != VTR_OK ? st : vtr_embedding_index_row(ix, first, q, err);
}

/* Sets the bit of every row that is not an item's first (the skip bitmap of the top-k
 * matrix) in skip, which starts as the snapshot's tombstones. */
static vtr_status skip_later_rows(vtr_embedding_index *ix, uint64_t *skip, vtr_error *err)
{
    vtr_embedding_index_items it;
    vtr_status st = vtr_embedding_index_items_read(ix, &it, err);
    for (int64_t i = 0; st == VTR_OK && i < it.n; i++)
        for (int64_t r = it.first[i] + 1; r < it.first[i] + it.count[i]; r++)
            vtr_topk_skip_row(skip, r);
    return st;
}

vtr_status vtr_item_search(vtr_embedding_index *ix, vtr_catalog *cat, int64_t dataset_id,
                           const float *q, int64_t k, const char *exclude,
                           vtr_search_result *results, int64_t *found, vtr_error *err)
{
    *found = 0;
    for (int64_t j = 0; j < k; j++)
        results[j] = (vtr_search_result){.row = -1, .duration_s = -1,
                                         .levels = {NAN, NAN, NAN}};
    if (k < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "k = %lld is not >= 1", (long long)k);
    int64_t D = vtr_embedding_index_dim(ix), N = vtr_embedding_index_rows(ix);
    double norm = 0;
    for (int64_t d = 0; d < D; d++)
        norm += (double)q[d] * q[d];
    if (!(norm > 0) || !isfinite(norm))
        return vtr_fail(err, VTR_ERR_INVALID, "the query vector is zero or not finite");
    const vtr_topk_matrix *m = vtr_embedding_index_matrix(ix);
    size_t words = (size_t)(N / 64 + 1);
    uint64_t *skip = calloc(words, sizeof *skip);
    float *unit = malloc((size_t)D * sizeof *unit);
    float *scores = malloc((size_t)k * sizeof *scores);
    int64_t *rows = malloc((size_t)k * sizeof *rows), exclude_row = -1, live = 0;
    vtr_status st = VTR_OK;
    if (!skip || !unit || !scores || !rows) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    for (int64_t d = 0; d < D; d++)
        unit[d] = (float)(q[d] / sqrt(norm));
    if (m->skip)
        memcpy(skip, m->skip, words * sizeof *skip);
    st = skip_later_rows(ix, skip, err);
    vtr_error miss;
    if (st == VTR_OK && exclude &&
        vtr_embedding_index_find(ix, exclude, &exclude_row, NULL, &miss) == VTR_OK)
        vtr_topk_skip_row(skip, exclude_row);
    vtr_topk_matrix firsts = *m;
    firsts.skip = skip;
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 2, .shape = {1, D}, .data = unit};
    if (st == VTR_OK)
        st = vtr_topk_search(&firsts, &qt, k, NULL, rows, scores, &live, err);
    if (st == VTR_OK &&
        (st = vtr_search_results_fill(ix, cat, dataset_id, live, rows, scores, results,
                                      err)) == VTR_OK)
        *found = live;
    if (st != VTR_OK)
        vtr_search_results_free(results, k);
end:
    free(skip);
    free(unit);
    free(scores);
    free(rows);
    return st;
}
