/* Items in, embeddings out: the batching behind vtr-aggregate. Items (a key, metadata and
 * a feature set, or a key, metadata and a text) are checked one by one, gathered into
 * batches and embedded by a index/embedder.h model; each embedding is handed to an emit
 * callback in the order the items came. Bad items are refused when they are added, so
 * one bad item never fails a batch.
 */
#ifndef VTR_AGGREGATOR_H
#define VTR_AGGREGATOR_H

#include <jansson.h>
#include <stdint.h>

#include "index/embedder.h"
#include "lib/error.h"
#include "lib/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Told each item's embedding (E floats, L2-normalized), with the key and metadata it was
 * added with (borrowed: valid during the call). A non-OK return stops the aggregator
 * (the output is broken) and is returned by the call that flushed. */
typedef vtr_status (*vtr_aggregator_emit_fn)(void *ctx, const char *key, json_t *meta,
                                             const float *embedding, vtr_error *err);

typedef struct vtr_aggregator vtr_aggregator;

/* An aggregator over embedder e (borrowed; it must outlive the aggregator). Batches hold
 * at most 256 items and 65536 set rows (a longer set is a batch of its own). VTR_ERR_NOMEM
 * only; *out is NULL on failure. */
vtr_status vtr_aggregator_new(vtr_embedder *e, vtr_aggregator_emit_fn emit, void *ctx,
                              vtr_aggregator **out, vtr_error *err);

/* Adds a feature set: rows (n, F) or (F,), float32 or float16, copied (as float32). meta
 * (may be NULL: {}) is kept with a new reference. A set the model does not take is
 * refused with VTR_ERR_INVALID (vtr_embedder_check_set), nothing added: an item error.
 * May flush a full batch, with its errors (embedding or emit: the aggregator is then
 * broken and every later call fails). */
vtr_status vtr_aggregator_add_set(vtr_aggregator *a, const char *key, json_t *meta,
                                  const vtr_tensor *rows, vtr_error *err);

/* Adds a text (a caption or query), copied. Invalid UTF-8 is refused with VTR_ERR_FORMAT
 * (nothing added). May flush, as above. */
vtr_status vtr_aggregator_add_text(vtr_aggregator *a, const char *key, json_t *meta,
                                   const char *text, vtr_error *err);

/* Embeds and emits everything added so far. */
vtr_status vtr_aggregator_flush(vtr_aggregator *a, vtr_error *err);

/* Frees a, dropping what was not flushed. Safe on NULL. */
void vtr_aggregator_free(vtr_aggregator *a);

#ifdef __cplusplus
}
#endif

#endif
