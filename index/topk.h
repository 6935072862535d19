/* Exact top-k by inner product: queries (Q, D) float32 against a row matrix (N, D) of
 * float16 or float32 embeddings, the search of vtr-search (DESIGN.md: "exact blocked top-k
 * over float16/float32 embeddings up to ~1e7 rows on one machine").
 *
 * The matrix. A vtr_topk_matrix is a read-only view of N rows held in one or more parts
 * (the segments of an embedding index, index/embedding_index.h; or one plain array):
 * global row r is row r - first(p) of the part p that holds it, parts in order. A skip
 * bitmap (tombstones) takes rows out of the search. The view owns nothing.
 *
 * Score and order. score(q, r) = sum_d query[q][d] * row[r][d], accumulated in float32
 * (float16 rows are widened exactly first). A query's results are the k rows with the
 * highest scores, highest first; equal scores in increasing row order (the order of a
 * stable sort of -score); a NaN score ranks after every number. Skipped rows never appear.
 * When fewer than k rows are searchable, the tail of each result row is row -1 and score
 * -INFINITY, and *found says how many are real.
 *
 * Paths, chosen by the number of queries Q:
 * - Q < batch_min_queries: a fused pass per 4 queries, bound by memory bandwidth. Threads
 *   take contiguous ranges of rows; each widens and multiplies its rows in registers
 *   (AVX-512, or F16C + AVX2 + FMA, when the CPU has them, checked at run time, else
 *   portable C; the AVX-512 kernel prefetches a few rows ahead), keeps a bounded heap per
 *   query, and the per-thread heaps are merged in the total order above.
 * - Q >= batch_min_queries, on a CPU with AMX-BF16 or AVX512-BF16 (the default there): a
 *   bfloat16 filter. Threads take contiguous ranges of rows, pack 256 rows at a time into
 *   bfloat16 and score them against the queries, 32 at a time with AMX tiles (TDPBF16PS)
 *   or 12 at a time with VDPBF16PS (twice the multiply rate of float32 FMAs; AMX's is
 *   eight times that); a row is scored again exactly, with the fused path's arithmetic,
 *   unless its approximate score plus a proven bound on the approximation error stays
 *   below the query's current k-th best exact score (the bound and its derivation are in
 *   topk.c). The results are exact, with the same scores as the fused path; on random
 *   unit vectors about 1 row in 2,000 is scored again. Non-finite values are always
 *   rescored.
 * - Q >= batch_min_queries otherwise: blocks of block_rows rows are widened to float32
 *   into one buffer (on the calling thread) and multiplied with up to 1024 queries at a
 *   time by cblas_sgemm (so the BLAS uses its own threads); each query's block of scores
 *   is then filtered against its heap's current k-th score (OpenMP over queries: each
 *   heap belongs to one thread, so no merge). Bound by the sgemm.
 * The default batch_min_queries (14 with AMX, 12 with the AVX512-BF16 filter, 32 with
 * sgemm) is where the paths cost the same on the benchmark machine (bench/search: 2
 * cores; one fused pass over 1M x 1024 rows ~ 0.1 s; the AMX filter ~ 0.36 s for up to
 * 32 queries, most of it packing, 1.9 to 3 s for 1000; the AVX512-BF16 filter ~ 0.25 s
 * per 12 queries; sgemm ~ 0.6 s plus 11 ms per query).
 *
 * Determinism. The results are a function of the scores, and a row's score does not depend
 * on the thread count or on where the parts begin. The fused path and the bfloat16 filters
 * give the same scores (the same kernel scores the kept rows). The kernel depends on the
 * CPU: the AVX-512, AVX2 and portable kernels add in different orders, so scores may
 * differ in the last bits of float32 between machines. The sgemm path adds in
 * another order, so its scores may differ in the last bits of float32 (and so swap rows
 * whose scores are that close); they are the same from run to run for the same BLAS and
 * thread count.
 *
 * Memory. Heaps of min(k, N) entries (16 bytes each) per query, per thread on the fused
 * path and the bfloat16 filters; a filter adds about 600 D bytes per thread (its block of
 * 256 rows in bfloat16, and a tile's rows) and 2 D bytes per query; the sgemm path
 * block_rows x D floats and 1024 x block_rows floats (64 MiB at the defaults and
 * D = 1024).
 */
#ifndef VTR_TOPK_H
#define VTR_TOPK_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/error.h"
#include "lib/hostdevice.h"
#include "lib/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One contiguous run of rows: (rows, dim) row-major, of the matrix's dtype. */
typedef struct vtr_topk_part {
    const void *data; /* may be NULL only when rows is 0 */
    int64_t rows;
} vtr_topk_part;

typedef struct vtr_topk_matrix {
    vtr_dtype dtype;             /* VTR_F16 or VTR_F32 */
    int64_t dim;                 /* D >= 1 */
    int64_t n_parts;
    const vtr_topk_part *parts;  /* (n_parts); global rows in part order */
    /* NULL, or a bitmap over the N global rows: row r is skipped when bit r % 64 of word
     * r / 64 is set (ceil(N / 64) words; bits past N are ignored). */
    const uint64_t *skip;
} vtr_topk_matrix;

/* Whether (sa, ra) ranks before (sb, rb) in the order above: higher score first, then
 * lower row; NaN after every number. Shared with the GPU's kernel (topk.cu). */
static VTR_HD bool vtr_topk_ranks_before(float sa, int64_t ra, float sb, int64_t rb)
{
    if (sa > sb)
        return true;
    if (sa < sb)
        return false;
    if (sa == sb)
        return ra < rb;
    bool na = isnan(sa), nb = isnan(sb);
    if (na != nb)
        return nb;
    return ra < rb;
}

/* Row r of a skip bitmap: whether it is set, set it, clear it. */
static VTR_HD bool vtr_topk_skipped(const uint64_t *skip, int64_t r)
{
    return skip && (skip[r >> 6] >> (r & 63) & 1);
}

static inline void vtr_topk_skip_row(uint64_t *skip, int64_t r)
{
    skip[r >> 6] |= UINT64_C(1) << (r & 63);
}

static inline void vtr_topk_keep_row(uint64_t *skip, int64_t r)
{
    skip[r >> 6] &= ~(UINT64_C(1) << (r & 63));
}

/* The kernel of the batched path. */
typedef enum vtr_topk_kernel {
    VTR_TOPK_AUTO = 0,    /* the first of AMX filter, bfloat16 filter, sgemm the CPU has */
    VTR_TOPK_SGEMM,       /* float32 blocks through cblas_sgemm */
    VTR_TOPK_BF16_FILTER, /* VTR_ERR_UNSUPPORTED where the CPU lacks AVX512-BF16 */
    VTR_TOPK_AMX_FILTER,  /* VTR_ERR_UNSUPPORTED where the CPU lacks AMX-BF16 */
} vtr_topk_kernel;

/* Tuning; a zeroed struct (or NULL) gives the defaults. */
typedef struct vtr_topk_options {
    /* Q at or above which the batched path runs; 0: 14 with the AMX filter, 12 with the
     * AVX512-BF16 one, 32 with sgemm */
    int batch_min_queries;
    vtr_topk_kernel kernel;
    int64_t block_rows; /* rows per block of the sgemm kernel; 0: 8192 */
    int threads;        /* OpenMP threads; 0: OpenMP's default */
} vtr_topk_options;

/* Whether this CPU runs the kernel: the bfloat16 filter needs AVX512-BF16 (with
 * AVX512F/BW/VL, AVX2, FMA and F16C), the AMX filter AMX-BF16 as well (and, on Linux, the
 * kernel's leave to use the tiles, which the first call asks for). */
bool vtr_topk_have_kernel(vtr_topk_kernel kernel);

/* The kernel a batch runs for the requested one: AUTO resolved for this CPU. */
vtr_topk_kernel vtr_topk_batch_kernel(vtr_topk_kernel requested);

/* "auto", "sgemm", "bf16-filter", "amx-filter". */
const char *vtr_topk_kernel_name(vtr_topk_kernel kernel);

/* One line for --version: the paths this CPU takes with the default options, e.g.
 * "top-k: 14+ queries at once: amx-filter (AMX-BF16); fewer: a pass over the rows per 4
 * queries (AVX-512)". A static string. */
const char *vtr_topk_report(void);

/* Rows of m (skipped rows excluded), i.e. the most results a query can have. */
int64_t vtr_topk_matrix_live_rows(const vtr_topk_matrix *m);

/* Finds the top k rows of m for each query. queries is float32, (D,) for one query or
 * (Q, D); rows and scores are caller arrays of Q x k (row-major, query after query),
 * filled as described at the top; *found (may be NULL) receives min(k, live rows).
 * Q = 0 is allowed and fills nothing. Fails, with nothing written to rows or scores,
 * with
 *   VTR_ERR_INVALID      k < 1; a NULL pointer where data is needed; a matrix dtype
 *                        other than float16/float32, dim < 1, a negative part length;
 *                        queries not float32 or not 1-D/2-D ("queries have 512 columns;
 *                        the matrix has 1024"); an unknown kernel;
 *   VTR_ERR_UNSUPPORTED  kernel VTR_TOPK_BF16_FILTER on a CPU without it;
 *   VTR_ERR_NOMEM        the heaps or buffers could not be allocated.
 * The matrix and the queries are only read, so concurrent calls may share them. */
vtr_status vtr_topk_search(const vtr_topk_matrix *m, const vtr_tensor *queries, int64_t k,
                           const vtr_topk_options *opt, int64_t *rows, float *scores,
                           int64_t *found, vtr_error *err);

/* vtr_topk_search's checks of its matrix and of its queries (VTR_ERR_INVALID, as listed
 * there), shared with the GPU's: the queries must have dim columns; *n_queries gets Q. */
vtr_status vtr_topk_matrix_check(const vtr_topk_matrix *m, vtr_error *err);
vtr_status vtr_topk_queries_check(const vtr_tensor *queries, int64_t dim, const int64_t *rows,
                                  const float *scores, int64_t *n_queries, vtr_error *err);

/* The first k of n candidates (scores[i], rows[i]; entries of row -1 are not candidates)
 * in the order above, into out_rows and out_scores (k each), row -1 and -INFINITY after
 * the last; *count gets how many are real. VTR_ERR_NOMEM. */
vtr_status vtr_topk_select(const float *scores, const int64_t *rows, int64_t n, int64_t k,
                           int64_t *out_rows, float *out_scores, int64_t *count,
                           vtr_error *err);

/* ---- the GPU (index/topk.cu via index/cuda_entries.c; without CUDA they fail, VTR_ERR_DEVICE)
 *
 * vtr_topk_cuda_new copies a matrix's rows (its parts, one after the other) and its skip
 * bitmap to the calling thread's current GPU (vtr_cuda_init) once (search and free make
 * that GPU current on the thread that calls them); vtr_topk_cuda_search then finds the
 * top k rows for each query as vtr_topk_search does, with the same order, ties, NaN and
 * skipped rows, k at most VTR_TOPK_CUDA_MAX_K (VTR_ERR_UNSUPPORTED above). Scores are
 * float32 sums of the widened rows times the query, added in another order than the
 * CPU's kernels (a warp's lanes, then a tree), so they may differ from the CPU's in the
 * last bits (and so swap rows whose scores are that close). A pass per query: each warp
 * scores its rows (16-byte loads where dim allows) and keeps its own top k; the host
 * merges the warps' lists (vtr_topk_select). The results do not depend on the GPU's
 * size. Later changes to the matrix are not seen: make a new one. A vtr_topk_cuda holds
 * one query's buffers: one search at a time per object. On failure *found is not set,
 * and rows and scores hold at most the results of the queries before the failing one. */
#define VTR_TOPK_CUDA_MAX_K 256
typedef struct vtr_topk_cuda vtr_topk_cuda;
vtr_status vtr_topk_cuda_new(const vtr_topk_matrix *m, vtr_topk_cuda **out, vtr_error *err);
void vtr_topk_cuda_free(vtr_topk_cuda *c);
vtr_status vtr_topk_cuda_search(vtr_topk_cuda *c, const vtr_tensor *queries, int64_t k,
                                int64_t *rows, float *scores, int64_t *found, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
