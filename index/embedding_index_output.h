/* An embedding index (index/embedding_index.h) as the destination of a program's items
 * (lib/item_output.h): vtr-aggregate --index DIR. Each item is one embedding (1, E) or
 * (E,) of the model that made it; an item already in the index is replaced. Staged items
 * are committed every VTR_EMBEDDING_INDEX_OUTPUT_COMMIT rows and at the output's commit,
 * so that a long run does not stage everything in one generation. */
#ifndef VTR_EMBEDDING_INDEX_OUTPUT_H
#define VTR_EMBEDDING_INDEX_OUTPUT_H

#include "index/embedder.h"
#include "lib/error.h"
#include "lib/item_output.h"

/* The model text a new index records (index/text_search.h), read by vtr-search. */
#define VTR_EMBEDDING_INDEX_OUTPUT_FORMAT "vtr-aggregate-index"
/* Rows staged between commits. */
#define VTR_EMBEDDING_INDEX_OUTPUT_COMMIT 4096

/* Opens the index at dir for the embeddings of e (borrowed; it must outlive the sink),
 * loaded from checkpoint: an index that does not exist yet is created and records this
 * model (the checkpoint's absolute path); an existing one must have been made with it
 * (vtr_text_search_check; its recorded text is kept), else VTR_ERR_INVALID "index DIR:
 * WHY: use a new --index DIR". The errors of vtr_embedding_index_open and _writer_open;
 * VTR_ERR_NOMEM. On success *sink is ready for vtr_item_output_options.sink (the item
 * output then owns it: a refused item (wrong shape) is VTR_ERR_INVALID from add); on
 * failure *sink is zeroed and nothing is held. */
vtr_status vtr_embedding_index_output_open(const char *dir, const vtr_embedder *e,
                                           const char *checkpoint, vtr_item_sink *sink,
                                           vtr_error *err);

#endif
