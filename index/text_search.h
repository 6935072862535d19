/* Text queries against an embedding index (index/embedding_index.h): the work of
 * vtr-search. Queries are embedded by the model that made the index (index/embedder.h),
 * as one batch, and ranked by exact top-k over the index's matrix (index/topk.h), or,
 * for a large index with an approximate index beside it, by FAISS's candidates re-ranked
 * exactly (index/approx_index.h); results
 * get their keys from the index and, where a catalog knows the item, its path and
 * duration. vtr_text_searcher opens what a search needs.
 *
 * The model an index records (vtr_embedding_index_model) is a JSON object with at least
 * "model_id" (the checkpoint's SHA-256, vtr_embedder_model_id) and, usually, "checkpoint"
 * (its path), as vtr-index and vtr-aggregate --index write it; a bare 64-digit hex text is
 * read as the model id alone.
 */
#ifndef VTR_TEXT_SEARCH_H
#define VTR_TEXT_SEARCH_H

#include <stdint.h>

#include "index/approx_index.h"
#include "index/embedder.h"
#include "index/embedding_index.h"
#include "index/topk.h"
#include "lib/catalog.h"
#include "lib/device.h"
#include "lib/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The model an index was made with. */
typedef struct vtr_index_model_ref {
    char *model_id;   /* hex SHA-256 of the checkpoint */
    char *checkpoint; /* its path as recorded, or NULL */
} vtr_index_model_ref;

/* Reads an index's model text as above. VTR_ERR_FORMAT ("the index records no model id")
 * for anything else. On failure *out is zeroed. */
vtr_status vtr_index_model_ref_parse(const char *text, vtr_index_model_ref *out,
                                     vtr_error *err);
void vtr_index_model_ref_free(vtr_index_model_ref *r);

/* Text for an index's model, {"format": format, "model_id": ..., "checkpoint": ...}
 * (malloc'ed; NULL when out of memory), for writers of indexes. */
char *vtr_index_model_text(const char *format, const char *model_id, const char *checkpoint);

/* Whether e made ix's embeddings: the same dimension and model id. VTR_ERR_INVALID
 * otherwise ("the index was made with model 1a2b... (checkpoint P); this model is
 * 3c4d..."), or VTR_ERR_FORMAT when the index records no model id. */
vtr_status vtr_text_search_check(const vtr_embedder *e, const vtr_embedding_index *ix,
                                 vtr_error *err);

/* Whether searches go through the approximate index (INDEX/approx.ann). */
typedef enum vtr_approx_mode {
    /* when the index has one that serves its snapshot (vtr_approx_index_check), the
     * model gives one vector per item, and the index has at least approx_min_rows live
     * rows; otherwise exact, with approx_note saying why when a file is there but cannot
     * serve (stale, damaged) */
    VTR_APPROX_AUTO = 0,
    VTR_APPROX_NEVER,  /* exact search */
    VTR_APPROX_ALWAYS, /* the approximate index, or vtr_text_searcher_open fails */
} vtr_approx_mode;

/* What a search needs open: an index, the model that made it, the approximate index when
 * it is to be used and, where one is at hand, the catalog that knows its items. */
typedef struct vtr_text_searcher {
    vtr_embedding_index *ix;
    vtr_embedder *e;
    vtr_approx_index *approx; /* NULL: exact search */
    /* Why an approximate index that is there is not used ("" when none is, or it is):
     * for the program to say (vtr-search warns). */
    char approx_note[VTR_ERROR_MSG_MAX + 32];
    vtr_approx_mode approx_mode;  /* as opened (options' approx), for reopen_approx */
    int64_t approx_min_rows;      /* the options' threshold, VTR_APPROX_MIN_ROWS for 0 */
    vtr_catalog *cat;   /* NULL: results carry keys only */
    int64_t dataset_id; /* the items' dataset in cat */
    vtr_topk_cuda *gpu; /* the index's rows on the GPU (options' device cuda), or NULL */
} vtr_text_searcher;

typedef struct vtr_text_searcher_options {
    const char *index;   /* the index directory */
    const char *model;   /* the checkpoint; NULL: the one the index records */
    const char *vocab;   /* NULL: vtr_embedder_open's default */
    int threads;         /* the embedder's; 0: the defaults */
    const char *catalog; /* NULL: vtr-index's, INDEX/catalog.sqlite, when it is there */
    const char *dataset; /* NULL: "archive" (vtr-index's); a default catalog without it is
                          * not used */
    vtr_approx_mode approx;
    int64_t approx_min_rows; /* VTR_APPROX_AUTO's threshold; 0: VTR_APPROX_MIN_ROWS */
    /* VTR_DEVICE_CUDA, GPU device_index: a VSE model's index rows are copied there once,
     * and the search is exact there (vtr_topk_cuda_search; no approximate index); an HGR
     * model runs there (the queries' encoders, the score blocks), its items ranked on the
     * CPU */
    vtr_device device;
    int device_index;
} vtr_text_searcher_options;

/* Opens the index, its model, its approximate index (per o->approx) and the catalog into
 * *s (which holds nothing on failure; close it with vtr_text_searcher_close). Fails as
 * vtr_embedding_index_open, vtr_embedder_open, vtr_text_search_check, the catalog's open
 * and dataset lookup do and, with VTR_APPROX_ALWAYS, as vtr_approx_index_open and
 * vtr_approx_index_check do (VTR_ERR_NOT_FOUND: none; VTR_ERR_INVALID: a stale one, or a
 * model of several vectors per item; a damaged file); with VTR_APPROX_AUTO a damaged or
 * stale file is not used and approx_note says why. Errors carry the context
 * "index DIR: name the model with --model" (no model recorded), "index DIR: its model (name
 * it with --model if it moved)" (the recorded one cannot be opened), "index DIR" or
 * "catalog PATH"; VTR_ERR_NOMEM. */
vtr_status vtr_text_searcher_open(const vtr_text_searcher_options *o, vtr_text_searcher *s,
                                  vtr_error *err);

/* For a long-lived searcher whose s->ix was replaced by a newer snapshot of the index at
 * dir (vtr-serve): closes s->approx and opens dir's approximate index again as the searcher
 * was opened to (its approx mode and threshold), since the file may have been updated or
 * may no longer fit the rows; approx_note is set anew. Fails only as
 * vtr_text_searcher_open does with VTR_APPROX_ALWAYS (s->approx is then NULL). */
vtr_status vtr_text_searcher_reopen_approx(vtr_text_searcher *s, const char *dir,
                                           vtr_error *err);

/* Closes what s holds; safe on a closed or zeroed value. */
void vtr_text_searcher_close(vtr_text_searcher *s);

typedef struct vtr_search_result {
    int64_t row;       /* the index row (an item of several vectors: its first); -1 past
                          the found results */
    float score;       /* the model's score: the inner product of the unit query and the
                          float16 row (VSE), the fused score (HGR) */
    float levels[3];   /* HGR: the global, verb and noun levels; NaN for a VSE model */
    char *key;         /* the item's key (malloc'ed) */
    char *path;        /* from the catalog, or NULL */
    double duration_s; /* from the catalog, or -1 */
} vtr_search_result;

/* Embeds the n queries as one batch and finds the k (>= 1) best items of ix for each
 * (approx: NULL, or an approximate index that serves ix, vtr_text_searcher's):
 * results (n x k, query after query) in rank order, found[q] (may be NULL) how many are
 * real (the rest: row -1, key NULL). graphs: NULL, or each query's role graph (JSON text,
 * or NULL for none; HGR models only, embedder.h); phrases (may be NULL): n x 2, each
 * query's verb and noun phrase counts (0 and 0: only HGR's global level can match it).
 * A VSE model's queries are ranked by exact top-k over the index's matrix (index/topk.h;
 * on the GPU with gpu, vtr_topk_cuda_search over its copy of the matrix, for k up to
 * VTR_TOPK_CUDA_MAX_K; a larger k on the CPU), or with approx
 * by vtr_approx_search (exact scores of approximate candidates; found[q] per query).
 * A model of several vectors per item (HGR) scores items exactly with its own score
 * (vtr_embedder_score over the rows times their norms, 256 items at a time; an index of
 * format version 1 has no norms and is refused): every live item when preselect is 0 (or
 * at least the item count), else each query's preselect best items by the global level
 * alone (the top-k search over the items' global rows), so that a large index costs a
 * top-k pass plus preselect items per query; the results are then exact among those.
 * Ties rank the lower row first. cat (may be NULL) is a catalog in which items of dataset
 * dataset_id are looked up by key for their path and duration (an item it does not know
 * keeps NULL / -1). Does not check the model (vtr_text_search_check). Fails as the
 * embedder, the search and the index's key lookup do; *results are then freed. */
vtr_status vtr_text_search(vtr_embedder *e, vtr_embedding_index *ix,
                           const vtr_approx_index *approx, vtr_topk_cuda *gpu, vtr_catalog *cat,
                           int64_t dataset_id,
                           int64_t n, const char *const *queries,
                           const char *const *graphs, int64_t k, int64_t preselect,
                           vtr_search_result *results, int64_t *found, int *phrases,
                           vtr_error *err);

/* Frees the strings of n results. */
void vtr_search_results_free(vtr_search_result *results, int64_t n);

/* Fills results[0 .. n-1] for the given rows and scores: each result's key from ix and,
 * when cat (may be NULL) knows the item in dataset dataset_id, its path and duration
 * (else NULL / -1). levels are left as they are. */
vtr_status vtr_search_results_fill(vtr_embedding_index *ix, vtr_catalog *cat,
                                   int64_t dataset_id, int64_t n, const int64_t *rows,
                                   const float *scores, vtr_search_result *results,
                                   vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
