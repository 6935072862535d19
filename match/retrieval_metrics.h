/* Retrieval metrics of video-text (and image-text) matching: R@1/5/10, median and mean
 * rank, RSUM, mAP and nDCG in both directions, for the protocols of REFERENCE.md
 * ("Datasets and evaluation"): any number of captions per item, COCO 5-fold 1K and 5K,
 * HGR's de-duplicated captions, and ensembles (averaged similarity matrices).
 *
 * Data. n_items visual items (videos, images) and n_caps captions; cap_item[j] is the
 * item caption j describes. The score of item i and caption j is S[i][j] (for l2-normalized
 * embeddings, the cosine = the dot product). S is never held whole: a block function
 * (below) fills tiles of it on demand, and every metric is derived by counting.
 *
 * Queries, relevance and rank. Visual -> text (v2t): each item is a query over all
 * captions, relevant = its own captions. Text -> visual (t2v): each caption is a query
 * over all items, relevant = its own item. In de-duplicated mode the candidates and t2v
 * queries are distinct texts instead of captions (see vtr_retrieval_options.cap_text).
 *
 * Ties. A query's candidates are ranked by score, highest first, and candidates with equal
 * scores in increasing index order (item index, caption index, or text id): the order of a
 * stable sort of -S (numpy: argsort(-s, kind="stable")). So the zero-based position of
 * candidate c is #{k : s_k > s_c} + #{k < c : s_k == s_c}; a constant score matrix does
 * not put every query at rank 0. A NaN score of a non-relevant pair ranks after every
 * number (as numpy's sort puts it); a NaN score of a relevant pair is an error.
 *
 * Per query, with p_1 < p_2 < ... < p_m the zero-based positions of its m relevant
 * candidates:
 *   rank  = p_1 (the first correct candidate; v2t: the best rank among the item's captions)
 *   AP    = (1/m) sum_k k / (p_k + 1)  (t2v, one relevant item: 1 / (rank + 1))
 *   nDCG  = DCG / IDCG with binary relevance and the log2 discount of Järvelin and
 *           Kekäläinen: DCG = sum_{k : p_k < K} 1 / log2(p_k + 2),
 *           IDCG = sum_{p = 0}^{min(m, K) - 1} 1 / log2(p + 2), K = ndcg_cutoff, or the
 *           whole ranking when 0. The reproducibility study (paper 004, section 6) asks for
 *           nDCG and mAP (its refs [17], [35]) beside R@K, since a relevant but not exactly
 *           matching candidate is useful to a user; it gives no formulas, so these are the
 *           textbook forms. With binary relevance and one correct item (t2v),
 *           nDCG = 1 / log2(rank + 2).
 * Per direction, over its n queries:
 *   R@K        = 100 * #{rank < K} / n, K = 1, 5, 10
 *   medr       = floor(median(rank)) + 1 (VSE reference; median of an even count = mean
 *                of the two middle ranks), or median(rank) + 1 with median_no_floor (HGR)
 *   meanr      = mean(rank) + 1
 *   mAP, nDCG  = 100 * the mean over queries (percent, like the recalls)
 *   RSUM       = R@1 + R@5 + R@10 of both directions.
 *
 * Folds (COCO 1K). With fold_items = F, fold f holds items [f F, (f+1) F) and the captions
 * of those items (wherever they sit in the caption order); each fold is evaluated on its
 * own (candidates = the fold's items or captions only) and every metric, medr and meanr
 * included, is the mean over the folds (the VSE reference's 5-fold protocol). 5K = no folds.
 *
 * Cost. One product per tile of S plus integer counting: O(n_items n_caps D) flops and
 * O(n_items n_caps (1 + captions per item)) comparisons. Relevant scores are read first
 * (phase 1: the tiles holding relevant pairs, kept in a cache of cache_bytes), then every
 * row of tiles is computed and counted (phase 2; a candidate's position = the number of
 * candidates before it, so no sort). With captions grouped by item (the usual layout) the
 * tiles of phase 1 lie along the diagonal and are computed once; an arbitrary caption
 * order may compute up to twice the product. Memory: one row of tiles (tile_items x
 * n_caps floats: 61 MiB at MSR-VTT size), the cache (96 MiB there), O(n_caps) for
 * the rest. The block function is called from the calling thread only, one tile at a time
 * (so it may use a multithreaded BLAS and needs no locking); counting runs in OpenMP
 * threads, one parallel region per row of tiles. MSR-VTT test size (2,990 x 59,800,
 * D 1024) takes about 1.3 times one float32 product of that size (2.7 s against numpy's
 * 2.1 s on 2 cores; bench/RESULTS.md).
 *
 * Determinism. Positions are integer counts and sums run in a fixed order: the results
 * are the same bytes whatever the thread count and cache size, as long as the block
 * function gives the same bytes for the same arguments; and whatever the tile sizes when
 * the value of (i, j) does not depend on the tile (a precomputed matrix, exact products).
 */
#ifndef VTR_RETRIEVAL_METRICS_H
#define VTR_RETRIEVAL_METRICS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/device.h"
#include "lib/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills S (n_items x n_caps, row-major, leading dimension n_caps) with
 * S[a][b] = score(item item0 + a, caption caps[b]). caps are distinct caption indices, in
 * no promised order (usually ascending and contiguous). The same arguments must give the
 * same bytes every time (the evaluation may ask for a tile twice). Returns VTR_OK, or an
 * error with err filled; the evaluation then stops and passes it on with context. */
typedef vtr_status (*vtr_similarity_block_fn)(void *ctx, int item0, int n_items, const int *caps,
                                              int n_caps, float *S, vtr_error *err);

/* A precomputed similarity matrix (e.g. the sims .npy the VSE∞ reference saves). */
typedef struct vtr_similarity_matrix {
    const float *S; /* (n_items, ld) row-major */
    int64_t ld;     /* >= n_caps */
} vtr_similarity_matrix;

/* vtr_similarity_block_fn over a vtr_similarity_matrix (ctx): copies the tile. */
vtr_status vtr_similarity_matrix_block(void *ctx, int item0, int n_items, const int *caps,
                                       int n_caps, float *S, vtr_error *err);

/* One model's embeddings, l2-normalized rows (cosine = dot product); or, for set
 * embeddings (set_size K > 1), K unit rows per item and caption, scored by smooth-Chamfer
 * similarity with scale set_alpha (match/set_similarity.h). */
typedef struct vtr_embedding_model {
    const float *items;    /* (n_items, dim) row-major; sets: (n_items, K, dim) */
    const float *captions; /* (n_caps, dim) row-major; sets: (n_caps, K, dim) */
    int dim;
    int set_size;          /* 0 or 1: one vector; K > 1: sets of K */
    float set_alpha;       /* sets: smooth-Chamfer's alpha (16) */
} vtr_embedding_model;

/* An ensemble: S = (1/n_models) sum_m S_m, S_m = items_m · captions_mᵀ (or a set model's
 * smooth-Chamfer scores). A single model is an ensemble of one (S = S_m exactly, no
 * division). */
typedef struct vtr_similarity_ensemble {
    const vtr_embedding_model *models;
    int n_models;
} vtr_similarity_ensemble;

/* vtr_similarity_block_fn over a vtr_similarity_ensemble (ctx): one cblas_sgemm per model
 * (alpha 1; beta 0 for the first model and 1 after, so the models are summed in order in
 * float32; a set model's scores are added in the same order), then every element divided
 * by (float)n_models when n_models > 1. Captions that are not one contiguous ascending run
 * are gathered into a temporary buffer first (VTR_ERR_NOMEM when it, or a set model's
 * scratch, cannot be allocated). */
vtr_status vtr_similarity_ensemble_block(void *ctx, int item0, int n_items, const int *caps,
                                         int n_caps, float *S, vtr_error *err);

/* The same ensemble's scores on the GPU (the current one, lib/device.h vtr_cuda_init):
 * vtr_similarity_cuda_new copies every model's embeddings there once (n_items and n_caps
 * rows, or sets of K); vtr_similarity_cuda_block (a vtr_similarity_block_fn over the
 * vtr_similarity_cuda, ctx) computes each tile there as the CPU does (one cuBLAS sgemm
 * per single-vector model, beta 0 then 1; a set model's smooth-Chamfer scores,
 * vtr_cuda_smooth_chamfer_forward, written by the first model and added after; then the
 * division by n_models), gathers captions that are not one contiguous run there, and
 * copies the tile into S, which is host memory. Scores equal the CPU's to float32
 * rounding (sums in another order), and the same arguments give the same bytes on the
 * same GPU. _new fails with VTR_ERR_DEVICE without a GPU or when its memory runs out (the
 * message says how much). In libvtr-cuda.so (lib/cuda_loader.h). */
typedef struct vtr_similarity_cuda vtr_similarity_cuda;
vtr_status vtr_similarity_cuda_new(const vtr_similarity_ensemble *e, int n_items, int n_caps,
                                   vtr_similarity_cuda **out, vtr_error *err);
vtr_status vtr_similarity_cuda_block(void *ctx, int item0, int n_items, const int *caps, int n_caps,
                                     float *S, vtr_error *err);
void vtr_similarity_cuda_free(vtr_similarity_cuda *g);

/* The relevant entries of n queries, each query's in ranking order: query q's are
 * [off[q], off[q + 1]), each a candidate's index (a caption column for an item query, an
 * item row for a caption query, both counted from the evaluation's first) and its score;
 * pos (off[n] of them) is added the number of candidates ranked before each entry. */
typedef struct vtr_rank_lists {
    const int64_t *off; /* (n + 1) */
    const int *idx;     /* (off[n]) */
    const float *score; /* (off[n]) */
    int64_t *pos;       /* (off[n]) */
    int n;
} vtr_rank_lists;

/* The counting of vtr_retrieval_evaluate on the GPU (its phase 2), for
 * vtr_retrieval_evaluate_embeddings: items item0 .. item0 + rows->n - 1 (the queries of
 * rows) against the captions caps[0 .. cols->n) (the queries of cols), tile_items x
 * tile_caps at a time, each tile vtr_similarity_cuda_block's bytes, left on the GPU and
 * counted there by the rule of "Ties" above (a NaN candidate before no entry); the lists
 * are copied there once and their positions back at the end. Fails with VTR_ERR_DEVICE
 * (a launch, or memory). */
vtr_status vtr_similarity_cuda_count(vtr_similarity_cuda *g, int item0, const int *caps,
                                     int tile_items, int tile_caps, const vtr_rank_lists *rows,
                                     const vtr_rank_lists *cols, vtr_error *err);

/* Evaluation options. A zeroed struct (or NULL) gives the defaults: the whole set, one
 * query per caption, nDCG over the whole ranking, VSE's median rank, default tiling. */
typedef struct vtr_retrieval_options {
    /* Items per fold: 0 = one evaluation of the whole set (COCO 5K, MSR-VTT, VATEX,
     * Flickr30K); COCO 1K = 1000. n_items must be a multiple. */
    int fold_items;
    /* HGR's de-duplicated captions: NULL, or (n_caps) text ids in [0, n_texts), equal ids
     * for identical caption texts. Each text that has captions becomes one t2v query and
     * one v2t candidate, represented by its lowest-numbered caption (whose column of S is
     * used; identical texts embed identically); it counts as correct for every item that
     * has it, and its t2v rank is the best over those items. Ties among texts are broken
     * by text id. Ids without captions are ignored. */
    const int *cap_text;
    int n_texts;
    int ndcg_cutoff;     /* K of nDCG@K; 0 = the whole ranking */
    int median_no_floor; /* nonzero: medr = median + 1 (HGR) instead of floor(median) + 1 */
    /* Tiling: 0 = defaults (256 items x 4096 captions, 256 MiB of cache). Smaller tiles
     * bound memory; the results do not change. cache_bytes = 1 disables the cache (the
     * relevant tiles are then computed twice). */
    int tile_items;
    int tile_caps;
    size_t cache_bytes;
    /* Where vtr_retrieval_evaluate_embeddings computes the products and counts the
     * positions: VTR_DEVICE_CPU (the zero value), or VTR_DEVICE_CUDA, the current GPU
     * (vtr_similarity_cuda, vtr_similarity_cuda_count; no cache there: a tile costs less to
     * compute again than to keep). vtr_retrieval_evaluate leaves it to its block function
     * and counts on the CPU. */
    vtr_device device;
} vtr_retrieval_options;

typedef struct vtr_retrieval_direction {
    double r1, r5, r10; /* percent */
    double median_rank; /* one-based */
    double mean_rank;   /* one-based */
    double map;         /* percent */
    double ndcg;        /* percent */
    int64_t n_queries;  /* summed over folds */
} vtr_retrieval_direction;

typedef struct vtr_retrieval_metrics {
    vtr_retrieval_direction v2t; /* visual -> text: item queries */
    vtr_retrieval_direction t2v; /* text -> visual: caption (or text) queries */
    double rsum;                 /* v2t.r1 + r5 + r10 + t2v.r1 + r5 + r10 */
    int n_folds;                 /* 1 without folds */
} vtr_retrieval_metrics;

/* Optional per-query results, for reports and tests; any pointer may be NULL. Ranks are
 * zero-based positions of the first correct candidate; AP and nDCG in [0, 1] (not
 * percent). With folds, each query's values within its own fold. In de-duplicated mode
 * the t2v arrays are still indexed by caption: each caption gets its text's values. */
typedef struct vtr_retrieval_per_query {
    int64_t *v2t_rank; /* (n_items) */
    double *v2t_ap;    /* (n_items) */
    double *v2t_ndcg;  /* (n_items) */
    int64_t *t2v_rank; /* (n_caps) */
    double *t2v_ap;    /* (n_caps) */
    double *t2v_ndcg;  /* (n_caps) */
} vtr_retrieval_per_query;

/* Evaluates the similarity that fn(ctx, ...) computes, n_items x n_caps, with caption j
 * describing item cap_item[j]. opt and per_query may be NULL. On success fills *out (and
 * per_query's arrays). Fails, with *out untouched and nothing allocated left behind, with
 *   VTR_ERR_INVALID  n_items or n_caps < 1, a NULL pointer, caption j's item (or text id)
 *                    out of range ("caption 7: item 12 out of range [0, 10)"), an item
 *                    without captions ("item 3 has no captions": every item must have
 *                    one, the recalls would be meaningless otherwise), a fold size that
 *                    does not divide n_items, a negative option, a NaN relevant score
 *                    ("similarity of item 3 and caption 7 is NaN");
 *   VTR_ERR_NOMEM    an allocation failed;
 *   fn's status      passed on, its message prefixed with the tile it was asked for. */
vtr_status vtr_retrieval_evaluate(vtr_similarity_block_fn fn, void *ctx, int n_items, int n_caps,
                                  const int *cap_item, const vtr_retrieval_options *opt,
                                  vtr_retrieval_metrics *out, vtr_retrieval_per_query *per_query,
                                  vtr_error *err);

/* vtr_retrieval_evaluate over the ensemble of n_models models (1 for a single model):
 * each model's items (n_items, dim) and captions (n_caps, dim), its products and counting
 * on opt's device (vtr_similarity_ensemble_block, or vtr_similarity_cuda_block and
 * vtr_similarity_cuda_count). Also fails with
 * VTR_ERR_INVALID for n_models < 1, a dim < 1 or a NULL embedding pointer, and on the GPU
 * with vtr_similarity_cuda_new's errors. */
vtr_status vtr_retrieval_evaluate_embeddings(const vtr_embedding_model *models, int n_models,
                                             int n_items, int n_caps, const int *cap_item,
                                             const vtr_retrieval_options *opt,
                                             vtr_retrieval_metrics *out,
                                             vtr_retrieval_per_query *per_query, vtr_error *err);

/* Writes one direction's metrics as a JSON object {"r1", "r5", "r10", "medr", "meanr",
 * "map", "ndcg"} (new reference), and the whole result as {"v2t", "t2v", "rsum"}. */
json_t *vtr_retrieval_direction_json(const vtr_retrieval_direction *d);
json_t *vtr_retrieval_metrics_json(const vtr_retrieval_metrics *m);

#ifdef __cplusplus
}
#endif

#endif
