/* Joining the parts of a sharded run (lib/shard.h, docs/sharding.md) into the one output
 * a single process would have written: what vtr-merge does.
 *
 * The parts are all feature stores (vtr-features --store, vtr-import; lib/feature_store.h)
 * or all embedding indexes (vtr-aggregate --index, vtr-index; index/embedding_index.h).
 * An index of vtr-index carries its catalog (catalog.sqlite, dataset "archive"): when the
 * parts do, the catalogs are joined too, every item row copied.
 *
 * Order. Parts named as vtr_shard_output names them (OUT.shard-I-of-N) are taken in shard
 * order, and all N shards must be there, each once; parts named otherwise are taken in
 * the order given (a mix of the two is refused). The output holds the parts' items one
 * part after the other, each part's in its own order: for contiguous shares (lib/shard.h)
 * that is the order of a single run, so the output equals a single run's: the same keys
 * in the same order, the same feature rows or embedding bytes (and norms) bit for bit.
 *
 * The parts must fit together: stores of the same dim, dtype, extractor and source
 * (provenance: model, weights, settings); indexes of the same dimension and model text;
 * catalogs of the same archive root. No key may be in two parts.
 *
 * The output is built beside out (a store as lib/feature_store.h builds one, an index in
 * OUT.tmp.PID/) and appears whole at the end or not at all; an existing out is refused.
 */
#ifndef VTR_SHARD_MERGE_H
#define VTR_SHARD_MERGE_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/error.h"

typedef enum vtr_merge_kind {
    VTR_MERGE_STORES,  /* feature stores */
    VTR_MERGE_INDEXES, /* embedding indexes (with their catalogs when they have them) */
} vtr_merge_kind;

typedef struct vtr_merge_stats {
    vtr_merge_kind kind;
    int parts;
    int64_t items; /* items in the output */
    int64_t rows;  /* feature rows (stores) or embedding rows (indexes) */
    bool catalog;  /* the parts' catalogs were joined */
} vtr_merge_stats;

/* Joins the n >= 1 parts into out (see above). VTR_ERR_INVALID naming the part and the
 * cause for parts that do not fit together: a part that is neither a store nor an index,
 * or of the other kind than the first; a missing shard ("missing shard 1 of 2
 * (OUT.shard-1-of-2)"), one given twice, shards of different counts, a part without the
 * shard name among parts with it; another dim, dtype, extractor, source, model or
 * archive; a key in two parts; out exists. A part that cannot be read: its reader's
 * errors, with the part named. stats (may be NULL) is filled on success. */
vtr_status vtr_shard_merge(const char *out, const char *const *parts, int n,
                           vtr_merge_stats *stats, vtr_error *err);

#endif
