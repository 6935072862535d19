/* Searching an index with a visual vector rather than text: "more like this" (an indexed
 * item's vector) and query by an image or a video (its embedding by the index's backbone
 * and the model's visual side, index/media_embedder.h). Items are ranked by the inner
 * product of the unit query and their first vector (the only one of a VSE model's items;
 * an HGR model's global vector: its frame-level vectors only score against text), exactly
 * over the whole snapshot, ties ranking the lower row first. */
#ifndef VTR_ITEM_SEARCH_H
#define VTR_ITEM_SEARCH_H

#include <stdint.h>

#include "index/embedding_index.h"
#include "index/text_search.h"
#include "lib/catalog.h"
#include "lib/error.h"

/* The k (>= 1) items of ix whose first vector is closest to q (D values; its norm does
 * not matter; zero or not finite: VTR_ERR_INVALID), leaving out the item exclude (NULL:
 * none; an item the snapshot lacks excludes nothing): results[0 .. *found-1] in rank
 * order, each with its row, score, key, and path and duration from cat (NULL: keys only)
 * as vtr_text_search fills them; levels NaN; the rest (row -1). Fails as the top-k
 * search and the key lookups do; *results are then freed. */
vtr_status vtr_item_search(vtr_embedding_index *ix, vtr_catalog *cat, int64_t dataset_id,
                           const float *q, int64_t k, const char *exclude,
                           vtr_search_result *results, int64_t *found, vtr_error *err);

/* The query vector of an indexed item: its first row, into q (D values).
 * VTR_ERR_NOT_FOUND "no item K in the index" when the snapshot has no such live item. */
vtr_status vtr_item_search_vector(vtr_embedding_index *ix, const char *key, float *q,
                                  vtr_error *err);

#endif
