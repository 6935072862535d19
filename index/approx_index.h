/* The approximate index of an embedding index (index/embedding_index.h), for archives
 * too large for an exact pass per query: FAISS (index/ann_faiss.h: HNSW or IVF-PQ) gives
 * each query a few candidate rows, which are then scored exactly from the float16 segments
 * and ranked as the exact search ranks (index/topk.h). Format and rules: docs/index.md,
 * "The approximate index"; how searches use it: docs/search.md.
 *
 * The file. DIR/approx.ann beside the segments, written whole or not at all (a temporary
 * file, fsync, rename, fsync of DIR): a header naming the kind, D, the generation it was
 * built for and that generation's segments (ids and rows), the map from FAISS labels to
 * global rows of those segments (live rows only, in row order), FAISS's serialization,
 * and a checksum of everything before it.
 *
 * Consistency with the embedding index. Segments never change and their ids are never
 * reused, so rows keep their numbers for as long as the segments listed in the file stay
 * the first segments of the index. The file serves a snapshot when one of the two segment
 * lists starts with the other:
 * - the snapshot's starts with the file's (commits since only appended segments and made
 *   tombstones): FAISS's candidates that are tombstones now are dropped, and the rows of
 *   the segments added since the build (the tail) are searched exactly beside them, so
 *   the results are those of an approximate search of the whole snapshot;
 * - the file's starts with the snapshot's (an older snapshot than the file): the labels
 *   of rows past the snapshot's are dropped.
 * Otherwise (a compaction renumbered the rows) the file is stale: vtr_approx_index_check
 * and the search refuse it with the reason. vtr_approx_index_update brings the file to a
 * snapshot's generation: FAISS's add for the tail's live rows, or a rebuild after a
 * compaction or when a quarter of its labels have become tombstones.
 *
 * Writers. Building and updating write DIR/approx.ann; the caller holds the embedding
 * index's writer (vtr_embedding_index_writer_open: its lock), so that one process at a
 * time writes it, and left-over temporary files (approx.ann.tmp.*) are removed.
 *
 * Errors name the index and the file: "index DIR: approx.ann: cut short (...)", "index
 * DIR: approximate index: ..." (building), or, from check and search (whose caller knows
 * DIR), "approx.ann was built for generation 3, and the index has renumbered ...".
 */
#ifndef VTR_APPROX_INDEX_H
#define VTR_APPROX_INDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "index/ann_faiss.h"
#include "index/embedding_index.h"
#include "lib/error.h"
#include "lib/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VTR_APPROX_FILE "approx.ann"
/* Live rows from which a search in mode VTR_APPROX_AUTO uses the approximate index (when
 * there is a usable one): below, one exact pass costs a few milliseconds per query. */
#define VTR_APPROX_MIN_ROWS 100000

typedef struct vtr_approx_index vtr_approx_index;

/* What vtr_approx_index_update did. */
typedef enum vtr_approx_update {
    VTR_APPROX_ABSENT = 0, /* DIR has no approximate index: nothing done */
    VTR_APPROX_CURRENT,    /* it was built for the snapshot's generation already */
    VTR_APPROX_ADDED,      /* the rows of the segments added since were added */
    VTR_APPROX_REBUILT,    /* built again (a compaction, or a quarter of it tombstones) */
} vtr_approx_update;

/* ---- writing (the caller holds the index's writer lock) ---- */

/* Builds an approximate index of kind from the live rows of snapshot ix, replacing
 * DIR/approx.ann (dir: the index's directory). IVF-PQ's lists: vtr_ann_ivf_lists(live
 * rows); its k-means trains on an evenly spaced sample of up to max(64 lists, 65536) live
 * rows. Fails with VTR_ERR_UNSUPPORTED for an index whose items have several vectors
 * (HGR: use its pre-selection), VTR_ERR_INVALID when IVF-PQ gets fewer than 256 live rows
 * or the index has none, and as ann_faiss.h and the file writes fail (VTR_ERR_IO,
 * VTR_ERR_NOMEM); the previous file, if any, is then left as it was. */
vtr_status vtr_approx_index_build(vtr_embedding_index *ix, const char *dir, vtr_ann_kind kind,
                                  vtr_error *err);

/* Brings DIR/approx.ann, when there is one, to snapshot ix's generation as the header
 * says (*what, may be NULL, tells what was done); a file damaged past its first 16 bytes
 * (magic and kind) is built again as that kind. Fails as build does, and with
 * VTR_ERR_FORMAT / VTR_ERR_IO when the present file cannot be read at all (remove it, or
 * build again). */
vtr_status vtr_approx_index_update(vtr_embedding_index *ix, const char *dir,
                                   vtr_approx_update *what, vtr_error *err);

/* Removes DIR/approx.ann; *removed (may be NULL) says whether there was one. */
vtr_status vtr_approx_index_remove(const char *dir, bool *removed, vtr_error *err);

/* ---- reading ---- */

/* Reads DIR/approx.ann into memory (the FAISS index whole, as FAISS searches it) and
 * checks it: VTR_ERR_NOT_FOUND when there is none; VTR_ERR_FORMAT ("... is cut short",
 * "checksum mismatch", a header out of range, FAISS's own refusal) for a damaged file;
 * VTR_ERR_UNSUPPORTED for a file of another format version; VTR_ERR_IO, VTR_ERR_NOMEM.
 * The index stands alone: it may serve any snapshot of its index that check accepts. */
vtr_status vtr_approx_index_open(const char *dir, vtr_approx_index **out, vtr_error *err);

/* Safe on NULL. */
void vtr_approx_index_close(vtr_approx_index *a);

vtr_ann_kind vtr_approx_index_kind(const vtr_approx_index *a);
int64_t vtr_approx_index_generation(const vtr_approx_index *a); /* built for */
int64_t vtr_approx_index_labels(const vtr_approx_index *a);     /* rows FAISS holds */
/* "HNSW" or "IVF-PQ". */
const char *vtr_ann_kind_name(vtr_ann_kind kind);

/* Whether a can serve snapshot ix (the rule at the top): VTR_OK, else VTR_ERR_INVALID
 * saying why ("built for generation 3, and the index was compacted since (generation
 * 7): update it (vtr-approx)"), or when D differs. *tail_rows (may be NULL): the rows of
 * ix that a search will scan exactly (the segments added since the build). */
vtr_status vtr_approx_index_check(const vtr_approx_index *a, const vtr_embedding_index *ix,
                                  int64_t *tail_rows, vtr_error *err);

typedef struct vtr_approx_search_options {
    int64_t candidates; /* rows FAISS proposes per query; 0: max(10 k, 100) */
    int effort;         /* HNSW's efSearch, IVF-PQ's nprobe; 0: ann_faiss.h's defaults */
} vtr_approx_search_options;

/* The top k rows of snapshot ix for each query, by vtr_topk_search's contract (the same
 * arguments, order, ties and NaN rule; tombstones never returned), but over each query's
 * candidates (FAISS's, less the rows that are tombstones in ix or beyond it) and the tail
 * rows, not over every row. Each returned row's score is the exact one: the one-query
 * path's score of vtr_topk_search (bit for bit; index/topk.h). found[q] (found may be NULL;
 * one value per query, unlike vtr_topk_search) is min(k, the query's candidates and live
 * tail rows). opt may be NULL. Fails as vtr_approx_index_check (a snapshot it cannot
 * serve), vtr_topk_search and ann_faiss.h's search do; nothing is written to rows and
 * scores then. */
vtr_status vtr_approx_search(const vtr_approx_index *a, const vtr_embedding_index *ix,
                             const vtr_tensor *queries, int64_t k,
                             const vtr_approx_search_options *opt, int64_t *rows, float *scores,
                             int64_t *found, vtr_error *err);

/* recall@k of n queries' results rows (n, k) against the exact results exact (n, k): the
 * share of each query's real exact rows (not -1) that rows holds, averaged over the
 * queries (1 for a query without any). */
double vtr_recall_at_k(const int64_t *rows, const int64_t *exact, int64_t n, int64_t k);

/* recall@k of a against exact search over snapshot ix, with n of ix's live rows (evenly
 * spaced) as queries: the share of the exact top-k rows the approximate search returns,
 * averaged over the queries. For vtr-approx's report and the benchmark. */
vtr_status vtr_approx_recall(const vtr_approx_index *a, const vtr_embedding_index *ix,
                             int64_t n, int64_t k, const vtr_approx_search_options *opt,
                             double *recall, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
