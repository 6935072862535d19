/* The synthetic experiment of the VSE∞ appendix (B.3, Table 10): a coefficient generator
 * (tools/gpo_generators.h) is trained alone to reproduce a fixed pooling pattern on
 * random feature sets, then its coefficients are compared with the pattern's by RMSE, on
 * the set sizes it was trained on and on unseen smaller and larger ones.
 *
 * Protocol (the appendix gives the patterns, the size ranges and the metric; the rest is
 * ours, docs/gpo-synthetic.md):
 *   - a step draws `batch` sets, each of n elements with n uniform in train_min ..
 *     train_max, every feature N(0,1) in `dim` dimensions, from Philox (seed, stream
 *     2^40 + step): every cell of the table sees the same sets;
 *   - the target of a set is the pattern's pooling of it, sum_k w*_k sorted_k (every
 *     dimension sorted descending on its own); the loss is the mean over sets and
 *     dimensions of (out - target)^2;
 *   - Adam (torch semantics, no weight decay) at lr, x0.1 from step decay_step on;
 *   - RMSE over a size range n0 .. n1 = sqrt(sum_n sum_k (w_k(n) - w*_k(n))^2 / sum_n n):
 *     every coefficient of every size in the range counts once.
 * Deterministic: the same config gives the same bytes for any thread count.
 */
#ifndef VTR_GPO_SYNTHETIC_H
#define VTR_GPO_SYNTHETIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"
#include "tools/gpo_generators.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ground-truth patterns ---------------------------------------------------------------- */

typedef enum vtr_gpo_pattern_type {
    VTR_GPO_PATTERN_AVG,    /* "A": 1/n each */
    VTR_GPO_PATTERN_KMAX,   /* "M-K": 1/min(K,n) on the min(K,n) largest */
    VTR_GPO_PATTERN_TOP,    /* "T-K%": 1/m on the m = ceil(K n / 100) largest */
    VTR_GPO_PATTERN_LINEAR, /* "L": the k-th largest (k = 1 .. n) gets 2(n-k) / (n(n-1)),
                               falling linearly to 0 at k = n (1 when n = 1) */
} vtr_gpo_pattern_type;

typedef struct vtr_gpo_pattern {
    vtr_gpo_pattern_type type;
    int k; /* K of M-K (>= 1), K of T-K% (1 .. 100); unused otherwise */
} vtr_gpo_pattern;

/* Table 10's patterns in its column order: A, M-1, M-10, T-50%, L. */
#define VTR_GPO_TABLE10_PATTERNS 5
vtr_gpo_pattern vtr_gpo_table10_pattern(int i);

/* The pattern's coefficients for a set of n >= 1 elements, largest first, w (n); they sum
 * to 1 (computed in double, rounded once). */
void vtr_gpo_pattern_coefficients(float *w, vtr_gpo_pattern p, int n);

/* "A", "M-10", "T-50%", "L" into buf (size >= 16); returns buf. */
const char *vtr_gpo_pattern_name(vtr_gpo_pattern p, char *buf, size_t size);

/* The inverse: "A", "M-K" (K 1 .. 100000), "T-K%" (K 1 .. 100), "L". Fails with
 * VTR_ERR_INVALID naming the text. */
vtr_status vtr_gpo_pattern_parse(const char *name, vtr_gpo_pattern *out, vtr_error *err);

/* ---- training and evaluation -------------------------------------------------------------- */

typedef struct vtr_gpo_synthetic_config {
    int dim;                  /* feature dimensions of a random set */
    int batch;                /* sets per step */
    int steps;                /* optimizer steps */
    int decay_step;           /* lr x0.1 from this step on (>= steps: never) */
    double lr;                /* Adam's learning rate */
    int train_min, train_max; /* training set sizes (the paper: 20 .. 100) */
    int small_min, small_max; /* unseen smaller sizes (10 .. 19) */
    int large_min, large_max; /* unseen larger sizes (101 .. 120) */
    uint64_t seed;            /* data and initialization */
    int d_pe, hidden;         /* generator sizes (tools/gpo_generators.h) */
    int interp_points;
} vtr_gpo_synthetic_config;

/* The full run (docs/gpo-synthetic.md): dim 32, batch 16, 3000 steps, lr 1e-3 (x0.1 at
 * 2250), the paper's sizes, seed 1, d_pe = hidden = 32, 21 interpolation points. */
vtr_gpo_synthetic_config vtr_gpo_synthetic_defaults(void);

/* The same protocol scaled down for tests (seconds): fewer steps and dimensions, the same
 * size ranges. */
vtr_gpo_synthetic_config vtr_gpo_synthetic_quick(void);

/* Fails with VTR_ERR_INVALID naming the first field out of range (sizes must satisfy
 * 1 <= min <= max <= 4096, counts >= 1, lr > 0). */
vtr_status vtr_gpo_synthetic_check(const vtr_gpo_synthetic_config *cfg, vtr_error *err);

/* The largest set size cfg evaluates or trains on: the capacity a generator needs. */
int vtr_gpo_synthetic_max_size(const vtr_gpo_synthetic_config *cfg);

/* Makes the generator of kind with cfg's sizes and seed, its capacity the batches of
 * cfg (index-bigru: a table row for every size up to vtr_gpo_synthetic_max_size). The
 * caller frees it with vtr_gpo_generator_free. Errors as vtr_gpo_generator_init. */
vtr_status vtr_gpo_synthetic_generator(vtr_gpo_generator *g, const vtr_gpo_synthetic_config *cfg,
                                       vtr_gpo_generator_kind kind, vtr_error *err);

/* Trains g (made by vtr_gpo_synthetic_generator with the same cfg) on pattern p for
 * cfg->steps steps. *final_loss (may be NULL) gets the mean loss of the last tenth of the
 * steps. Fails with VTR_ERR_NOMEM, VTR_ERR_INVALID (a config out of range), or
 * VTR_ERR_INVALID "diverged" when the loss is no longer finite. */
vtr_status vtr_gpo_synthetic_train(vtr_gpo_generator *g, const vtr_gpo_synthetic_config *cfg,
                                   vtr_gpo_pattern p, double *final_loss, vtr_error *err);

/* RMSE of g's coefficients against p's over the sizes n0 .. n1 (see the top of this
 * file), 1 <= n0 <= n1 <= g's capacity. */
vtr_status vtr_gpo_coefficient_rmse(vtr_gpo_generator *g, vtr_gpo_pattern p, int n0, int n1,
                                    double *rmse, vtr_error *err);

typedef struct vtr_gpo_synthetic_result {
    double rmse_seen;    /* train_min .. train_max */
    double rmse_smaller; /* small_min .. small_max */
    double rmse_larger;  /* large_min .. large_max */
    double final_loss;   /* as vtr_gpo_synthetic_train gives it */
    double seconds;      /* wall time of the cell (training and evaluation) */
} vtr_gpo_synthetic_result;

/* One cell: a fresh generator of kind trained on p and evaluated. */
vtr_status vtr_gpo_synthetic_cell(const vtr_gpo_synthetic_config *cfg, vtr_gpo_pattern p,
                                  vtr_gpo_generator_kind kind, vtr_gpo_synthetic_result *res,
                                  vtr_error *err);

/* Called when a cell is done, from the worker thread that ran it, one call at a time. */
typedef void (*vtr_gpo_synthetic_done_fn)(void *ctx, int pattern_index, int generator_index,
                                          const vtr_gpo_synthetic_result *res);

/* The table: every pattern x every generator, cells run on up to `threads` threads (each
 * cell on one; the BiGRU cells start first). The BLAS thread count (lib/blas_threads.h)
 * is 1 while it runs and restored after: call it from one thread only. results (np * ng): [i * ng +
 * j] for patterns[i] and kinds[j]. done (may be NULL) reports each cell. On failure returns the
 * error of the first failing cell in table order, with the cell named; results of the
 * other cells are still filled. */
vtr_status vtr_gpo_synthetic_table(const vtr_gpo_synthetic_config *cfg,
                                   const vtr_gpo_pattern *patterns, int np,
                                   const vtr_gpo_generator_kind *kinds, int ng, int threads,
                                   vtr_gpo_synthetic_result *results,
                                   vtr_gpo_synthetic_done_fn done, void *ctx, vtr_error *err);

/* The paper's Table 10 for a generator and one of its five patterns (the index of
 * vtr_gpo_table10_pattern): seen, unseen smaller and unseen larger RMSE, NAN where our
 * copy of the paper lacks the number (the seen row of sincos-bigru did not survive the
 * text extraction). Returns false for an index out of range. */
bool vtr_gpo_synthetic_paper_rmse(vtr_gpo_generator_kind kind, int pattern_index, double *seen,
                                  double *smaller, double *larger);

#ifdef __cplusplus
}
#endif

#endif
