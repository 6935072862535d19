/* Retrieval metrics (match/retrieval_metrics.h): hand-computed cases, ties, varying
 * captions per item, COCO 1K folds and 5K, HGR de-duplication, ensembles and random data
 * against the numpy reference (tests/interop/retrieval_metrics_ref.py), determinism over
 * tiles, cache and threads, and invalid input. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "lib/npy.h"
#include "lib/rng.h"
#include "match/retrieval_metrics.h"

#define PYTHON "/usr/bin/python3"
#define REF_SCRIPT "tests/interop/retrieval_metrics_ref.py"

#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double check_a_ = (a), check_b_ = (b);                                                     \
        if (!(fabs(check_a_ - check_b_) <= (tol)))                                                 \
            test_fail(__FILE__, __LINE__, "%s == %s: %.12g != %.12g", #a, #b, check_a_, check_b_); \
    } while (0)

/* ---- the hand-computed case: 3 items x 6 captions, two captions per item ----
 *
 *            c0    c1    c2    c3    c4    c5       cap_item = 0 0 1 1 2 2
 *   item 0  0.9   0.1   0.8   0.3   0.2   0.4
 *   item 1  0.5   0.6   0.7   0.45  0.95  0.1
 *   item 2  0.3   0.2   0.1   0.4   0.5   0.6
 */
static const float hand_S[3 * 6] = {
    0.9f, 0.1f, 0.8f, 0.3f,  0.2f,  0.4f, /* */
    0.5f, 0.6f, 0.7f, 0.45f, 0.95f, 0.1f, /* */
    0.3f, 0.2f, 0.1f, 0.4f,  0.5f,  0.6f,
};
static const int hand_cap_item[6] = {0, 0, 1, 1, 2, 2};

TEST(hand_computed_3x6)
{
    vtr_error err;
    vtr_similarity_matrix sm = {hand_S, 6};
    vtr_retrieval_metrics m;
    int64_t v2t_rank[3], t2v_rank[6];
    double v2t_ap[3], t2v_ap[6], v2t_ndcg[3], t2v_ndcg[6];
    vtr_retrieval_per_query pq = {v2t_rank, v2t_ap, v2t_ndcg, t2v_rank, t2v_ap, t2v_ndcg};
    CHECK_OK(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 3, 6, hand_cap_item, NULL, &m,
                                    &pq, &err));
    /* v2t, item 0: order c0 .9, c2 .8, c5 .4, c3 .3, c4 .2, c1 .1; its c0, c1 at 0 and 5:
     *   rank 0, AP = (1/1 + 2/6) / 2 = 0.666667,
     *   nDCG = (1/log2 2 + 1/log2 7) / (1/log2 2 + 1/log2 3) = 1.356207 / 1.630930
     *        = 0.831555
     * item 1: order c4 .95, c2 .7, c1 .6, c0 .5, c3 .45, c5 .1; its c2, c3 at 1 and 4:
     *   rank 1, AP = (1/2 + 2/5) / 2 = 0.45,
     *   nDCG = (1/log2 3 + 1/log2 6) / 1.630930 = 1.017783 / 1.630930 = 0.624051
     * item 2: order c5 .6, c4 .5, ...; its c4, c5 at 0 and 1: rank 0, AP 1, nDCG 1.
     * ranks 0 1 0: R@1 = 2/3 = 66.667, R@5 = R@10 = 100, median 0 -> medr 1,
     *   meanr = 1/3 + 1 = 1.333333, mAP = (0.666667 + 0.45 + 1) / 3 = 70.5556 %,
     *   nDCG = (0.831555 + 0.624051 + 1) / 3 = 81.8535 % (81.853505 unrounded) */
    CHECK_EQ_INT(v2t_rank[0], 0);
    CHECK_EQ_INT(v2t_rank[1], 1);
    CHECK_EQ_INT(v2t_rank[2], 0);
    CHECK_NEAR(v2t_ap[0], 0.666667, 1e-6);
    CHECK_NEAR(v2t_ap[1], 0.45, 1e-12);
    CHECK_NEAR(v2t_ap[2], 1.0, 1e-12);
    CHECK_NEAR(v2t_ndcg[0], 0.831555, 1e-6);
    CHECK_NEAR(v2t_ndcg[1], 0.624051, 1e-6);
    CHECK_NEAR(v2t_ndcg[2], 1.0, 1e-12);
    CHECK_NEAR(m.v2t.r1, 66.666667, 1e-6);
    CHECK_NEAR(m.v2t.r5, 100.0, 1e-12);
    CHECK_NEAR(m.v2t.r10, 100.0, 1e-12);
    CHECK_NEAR(m.v2t.median_rank, 1.0, 1e-12);
    CHECK_NEAR(m.v2t.mean_rank, 1.333333, 1e-6);
    CHECK_NEAR(m.v2t.map, 70.555556, 1e-6);
    CHECK_NEAR(m.v2t.ndcg, 81.853505, 1e-6);
    CHECK_EQ_INT(m.v2t.n_queries, 3);
    /* t2v, one relevant item per caption:
     *   c0 (.9 .5 .3) item 0 -> 0;  c1 (.1 .6 .2) item 0 -> 2;  c2 (.8 .7 .1) item 1 -> 1;
     *   c3 (.3 .45 .4) item 1 -> 0; c4 (.2 .95 .5) item 2 -> 1; c5 (.4 .1 .6) item 2 -> 0.
     * AP = 1/(rank+1): 1 1/3 1/2 1 1/2 1; nDCG = 1/log2(rank+2): 1 .5 .630930 1 .630930 1.
     * R@1 = 3/6 = 50, R@5 = R@10 = 100; sorted ranks 0 0 0 1 1 2, median 0.5 -> floor 0,
     * medr 1 (HGR: 1.5); meanr = 4/6 + 1 = 1.666667; mAP = 4.333333/6 = 72.2222 %;
     * nDCG = (1 + .5 + .630930 + 1 + .630930 + 1)/6 = 4.761860/6 = 79.3643 %.
     * RSUM = 66.666667 + 100 + 100 + 50 + 100 + 100. */
    static const int64_t want_t2v[6] = {0, 2, 1, 0, 1, 0};
    for (int j = 0; j < 6; j++) {
        CHECK_EQ_INT(t2v_rank[j], want_t2v[j]);
        CHECK_NEAR(t2v_ap[j], 1.0 / (double)(want_t2v[j] + 1), 1e-12);
    }
    CHECK_NEAR(t2v_ndcg[1], 0.5, 1e-12);
    CHECK_NEAR(t2v_ndcg[2], 0.630930, 1e-6);
    CHECK_NEAR(m.t2v.r1, 50.0, 1e-12);
    CHECK_NEAR(m.t2v.r5, 100.0, 1e-12);
    CHECK_NEAR(m.t2v.r10, 100.0, 1e-12);
    CHECK_NEAR(m.t2v.median_rank, 1.0, 1e-12);
    CHECK_NEAR(m.t2v.mean_rank, 1.666667, 1e-6);
    CHECK_NEAR(m.t2v.map, 72.222222, 1e-6);
    CHECK_NEAR(m.t2v.ndcg, 79.364325, 1e-6);
    CHECK_EQ_INT(m.t2v.n_queries, 6);
    CHECK_NEAR(m.rsum, 516.666667, 1e-6);
    CHECK_EQ_INT(m.n_folds, 1);

    /* HGR's median: 0.5 + 1 = 1.5 for t2v, 0 + 1 for v2t. nDCG@2: v2t item 0 has only c0
     * in the top 2: 1 / 1.630930 = 0.613147; item 1 only c2 at 1: 0.630930 / 1.630930 =
     * 0.386853; item 2: 1; mean = 2/3 exactly (0.613147 + 0.386853 = 1). t2v: ranks
     * 0 2 1 0 1 0 -> 1 0 .630930 1 .630930 1 (IDCG 1) = 4.261860 / 6 = 71.0310 %. */
    vtr_retrieval_options opt = {0};
    opt.median_no_floor = 1;
    opt.ndcg_cutoff = 2;
    CHECK_OK(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 3, 6, hand_cap_item, &opt, &m,
                                    NULL, &err));
    CHECK_NEAR(m.t2v.median_rank, 1.5, 1e-12);
    CHECK_NEAR(m.v2t.median_rank, 1.0, 1e-12);
    CHECK_NEAR(m.v2t.ndcg, 66.666667, 1e-6);
    CHECK_NEAR(m.t2v.ndcg, 71.030992, 1e-6);
    CHECK_NEAR(m.v2t.map, 70.555556, 1e-6); /* mAP has no cutoff */
}

/* Ties are broken by index (a stable sort of -S). 2 items x 4 captions:
 *            c0   c1   c2   c3       cap_item = 0 1 0 1
 *   item 0  .5   .5   .5   .3
 *   item 1  .5   .5   .7   .3
 * v2t item 0: order c0 c1 c2 (all .5, by index), c3; its c0, c2 at 0 and 2: rank 0,
 *   AP = (1 + 2/3) / 2 = 0.833333.
 * v2t item 1: order c2 .7, c0 .5, c1 .5, c3 .3; its c1, c3 at 2 and 3: rank 2,
 *   AP = (1/3 + 2/4) / 2 = 0.416667.
 * t2v: c0 (.5 .5) item 0 -> 0 (tie, lower index first); c1 (.5 .5) item 1 -> 1 (the
 *   optimistic rule would say 0); c2 (.5 .7) item 0 -> 1; c3 (.3 .3) item 1 -> 1. */
TEST(ties_broken_by_index)
{
    static const float S[2 * 4] = {0.5f, 0.5f, 0.5f, 0.3f, 0.5f, 0.5f, 0.7f, 0.3f};
    static const int cap_item[4] = {0, 1, 0, 1};
    vtr_error err;
    vtr_similarity_matrix sm = {S, 4};
    vtr_retrieval_metrics m;
    int64_t v2t_rank[2], t2v_rank[4];
    double v2t_ap[2];
    vtr_retrieval_per_query pq = {v2t_rank, v2t_ap, NULL, t2v_rank, NULL, NULL};
    CHECK_OK(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 2, 4, cap_item, NULL, &m, &pq,
                                    &err));
    CHECK_EQ_INT(v2t_rank[0], 0);
    CHECK_EQ_INT(v2t_rank[1], 2);
    CHECK_NEAR(v2t_ap[0], 0.833333, 1e-6);
    CHECK_NEAR(v2t_ap[1], 0.416667, 1e-6);
    CHECK_EQ_INT(t2v_rank[0], 0);
    CHECK_EQ_INT(t2v_rank[1], 1);
    CHECK_EQ_INT(t2v_rank[2], 1);
    CHECK_EQ_INT(t2v_rank[3], 1);
    CHECK_NEAR(m.t2v.r1, 25.0, 1e-12);

    /* A constant matrix ranks by index: item i's first caption at position (its index). */
    static const float C[2 * 4] = {1, 1, 1, 1, 1, 1, 1, 1};
    sm.S = C;
    CHECK_OK(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 2, 4, cap_item, NULL, &m, &pq,
                                    &err));
    CHECK_EQ_INT(v2t_rank[0], 0);
    CHECK_EQ_INT(v2t_rank[1], 1);
    CHECK_EQ_INT(t2v_rank[1], 1);
    CHECK_NEAR(m.t2v.r1, 50.0, 1e-12);
}

/* HGR's de-duplicated captions, on the scores of the 3x6 case. Captions 0..5 have text
 * ids 0 1 1 2 0 3 (caption 4 repeats caption 0's text, caption 2 caption 1's). Texts and
 * their representative captions: t0 c0, t1 c1, t2 c3, t3 c5; relevance t0 {0, 2},
 * t1 {0, 1}, t2 {1}, t3 {2}. Text columns:
 *            t0   t1   t2   t3
 *   item 0  .9   .1   .3   .4
 *   item 1  .5   .6   .45  .1
 *   item 2  .3   .2   .4   .6
 * v2t item 0 {t0 t1}: order t0 t3 t2 t1 -> 0, 3: AP = (1 + 2/4)/2 = .75
 *     item 1 {t1 t2}: order t1 t0 t2 t3 -> 0, 2: AP = (1 + 2/3)/2 = .833333
 *     item 2 {t0 t3}: order t3 t2 t0 t1 -> 0, 2: AP = .833333; mAP = 80.5556 %
 * t2v t0 {0, 2}: (.9 .5 .3) -> 0, 2: AP .833333; t1 {0, 1}: (.1 .6 .2) -> i1 0, i0 2:
 *     AP .833333; t2 {1}: (.3 .45 .4) -> 0; t3 {2}: (.4 .1 .6) -> 0.
 *     All ranks 0: R@1 100; mAP = (.833333 * 2 + 2) / 4 = 91.6667 %; 4 queries. */
TEST(hgr_dedup_hand_computed)
{
    static const int cap_text[6] = {0, 1, 1, 2, 0, 3};
    vtr_error err;
    vtr_similarity_matrix sm = {hand_S, 6};
    vtr_retrieval_options opt = {0};
    opt.cap_text = cap_text;
    opt.n_texts = 4;
    vtr_retrieval_metrics m;
    int64_t t2v_rank[6];
    double t2v_ap[6], v2t_ap[3];
    vtr_retrieval_per_query pq = {NULL, v2t_ap, NULL, t2v_rank, t2v_ap, NULL};
    CHECK_OK(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 3, 6, hand_cap_item, &opt, &m,
                                    &pq, &err));
    CHECK_NEAR(v2t_ap[0], 0.75, 1e-12);
    CHECK_NEAR(v2t_ap[1], 0.833333, 1e-6);
    CHECK_NEAR(v2t_ap[2], 0.833333, 1e-6);
    CHECK_NEAR(m.v2t.map, 80.555556, 1e-6);
    CHECK_NEAR(m.v2t.r1, 100.0, 1e-12);
    CHECK_NEAR(m.t2v.r1, 100.0, 1e-12);
    CHECK_NEAR(m.t2v.map, 91.666667, 1e-6);
    CHECK_EQ_INT(m.t2v.n_queries, 4);
    CHECK_EQ_INT(m.v2t.n_queries, 3);
    for (int j = 0; j < 6; j++)
        CHECK_EQ_INT(t2v_rank[j], 0);
    CHECK_NEAR(t2v_ap[4], t2v_ap[0], 0); /* same text, same values */
    CHECK_NEAR(t2v_ap[2], 0.833333, 1e-6);
}

/* ---- random cases against the numpy reference ---- */

typedef struct dataset {
    int n_items, n_caps, n_models;
    int dims[3];
    float *items[3], *caps[3];
    int *cap_item;
    int *cap_text; /* or NULL */
    int n_texts;
    float *S; /* a precomputed matrix instead of models, or NULL */
} dataset;

static void dataset_free(dataset *d)
{
    for (int m = 0; m < 3; m++) {
        free(d->items[m]);
        free(d->caps[m]);
    }
    free(d->cap_item);
    free(d->cap_text);
    free(d->S);
    memset(d, 0, sizeof *d);
}

/* Small integers scaled by 1/4: every dot product and partial sum is exact in float32,
 * so any summation order (vtr's tiles, numpy's matmul) gives the same bytes, and
 * equal scores (ties) are common. */
static void fill_exact(float *x, size_t n, int levels, vtr_rng *rng)
{
    for (size_t k = 0; k < n; k++)
        x[k] = (float)((int)vtr_rng_below(rng, (uint32_t)(2 * levels + 1)) - levels) * 0.25f;
}

/* Gaussian rows, l2-normalized. */
static void fill_normalized(float *x, int rows, int dim, vtr_rng *rng)
{
    for (int r = 0; r < rows; r++) {
        float *v = x + (size_t)r * (size_t)dim;
        double ss = 0.0;
        for (int k = 0; k < dim; k++) {
            v[k] = vtr_rng_normal(rng);
            ss += (double)v[k] * v[k];
        }
        float inv = (float)(1.0 / sqrt(ss));
        for (int k = 0; k < dim; k++)
            v[k] *= inv;
    }
}

/* per_item captions each (or 1 + a random count below -per_item when negative),
 * assigned to items in a shuffled order when shuffle, else grouped by item. */
static void make_captions(dataset *d, int per_item, int shuffle, vtr_rng *rng)
{
    int *count = malloc((size_t)d->n_items * sizeof *count);
    int total = 0;
    for (int i = 0; i < d->n_items; i++) {
        count[i] = per_item > 0 ? per_item : 1 + (int)vtr_rng_below(rng, (uint32_t)-per_item);
        total += count[i];
    }
    d->n_caps = total;
    d->cap_item = malloc((size_t)total * sizeof *d->cap_item);
    for (int i = 0, j = 0; i < d->n_items; i++)
        for (int k = 0; k < count[i]; k++)
            d->cap_item[j++] = i;
    if (shuffle) {
        int64_t *perm = malloc((size_t)total * sizeof *perm);
        int *copy = malloc((size_t)total * sizeof *copy);
        vtr_rng_permutation(rng, perm, total);
        memcpy(copy, d->cap_item, (size_t)total * sizeof *copy);
        for (int j = 0; j < total; j++)
            d->cap_item[j] = copy[perm[j]];
        free(perm);
        free(copy);
    }
    free(count);
}

static void make_models(dataset *d, int n_models, const int *dims, int exact_levels, vtr_rng *rng)
{
    d->n_models = n_models;
    for (int m = 0; m < n_models; m++) {
        d->dims[m] = dims[m];
        d->items[m] = malloc((size_t)d->n_items * (size_t)dims[m] * sizeof(float));
        d->caps[m] = malloc((size_t)d->n_caps * (size_t)dims[m] * sizeof(float));
        if (exact_levels > 0) {
            fill_exact(d->items[m], (size_t)d->n_items * (size_t)dims[m], exact_levels, rng);
            fill_exact(d->caps[m], (size_t)d->n_caps * (size_t)dims[m], exact_levels, rng);
        } else {
            fill_normalized(d->items[m], d->n_items, dims[m], rng);
            fill_normalized(d->caps[m], d->n_caps, dims[m], rng);
        }
    }
}

static void save_f32(const char *name, float *data, int64_t rows, int64_t cols)
{
    vtr_error err;
    vtr_tensor t = {VTR_F32, 2, {rows, cols}, data};
    CHECK_OK(vtr_npy_save(test_path(name), &t, 0, &err));
}

static void save_i32(const char *name, int *data, int64_t n)
{
    vtr_error err;
    vtr_tensor t = {VTR_I32, 1, {n}, data};
    CHECK_OK(vtr_npy_save(test_path(name), &t, 0, &err));
}

static void need_numpy(void)
{
    if (access(REF_SCRIPT, R_OK) != 0)
        test_skip("run from the top of the source tree to find " REF_SCRIPT);
    if (test_run(PYTHON " -c 'import numpy' >/dev/null 2>&1") != 0)
        test_skip(PYTHON " with numpy is not available");
}

/* Writes d's inputs, runs the reference with its options, and returns its outputs. */
static void run_reference(const dataset *d, const vtr_retrieval_options *o, const char *method)
{
    test_run("rm -f '%s'/*.npy", test_tmpdir());
    save_i32("cap_item.npy", d->cap_item, d->n_caps);
    if (d->cap_text)
        save_i32("cap_text.npy", d->cap_text, d->n_caps);
    if (d->S)
        save_f32("S.npy", d->S, d->n_items, d->n_caps);
    for (int m = 0; m < d->n_models && !d->S; m++) {
        char name[64];
        snprintf(name, sizeof name, "items_%d.npy", m);
        save_f32(name, d->items[m], d->n_items, d->dims[m]);
        snprintf(name, sizeof name, "captions_%d.npy", m);
        save_f32(name, d->caps[m], d->n_caps, d->dims[m]);
    }
    char flags[256];
    snprintf(flags, sizeof flags, "--fold-items %d --ndcg-cutoff %d --method %s%s%s", o->fold_items,
             o->ndcg_cutoff, method, o->cap_text ? " --dedup" : "",
             o->median_no_floor ? " --median-no-floor" : "");
    CHECK_EQ_INT(test_run(PYTHON " " REF_SCRIPT " '%s' %s", test_tmpdir(), flags), 0);
}

/* The reference's output `name`: n int64 values (ranks, or float64 bit patterns). */
static const int64_t *load_ref(vtr_npy_file *f, const char *name, int64_t n)
{
    vtr_error err;
    char file[64];
    snprintf(file, sizeof file, "ref_%s.npy", name);
    CHECK_OK(vtr_npy_load(test_path(file), f, &err));
    CHECK_EQ_INT(f->tensor.dtype, VTR_I64);
    CHECK_EQ_INT(vtr_tensor_numel(&f->tensor), n);
    return f->tensor.data;
}

static double bits_to_double(int64_t bits)
{
    double x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

typedef struct outputs {
    vtr_retrieval_metrics m;
    int64_t *v2t_rank, *t2v_rank;
    double *v2t_ap, *t2v_ap, *v2t_ndcg, *t2v_ndcg;
} outputs;

static void outputs_alloc(outputs *o, const dataset *d)
{
    memset(o, 0, sizeof *o);
    o->v2t_rank = malloc((size_t)d->n_items * sizeof(int64_t));
    o->v2t_ap = malloc((size_t)d->n_items * sizeof(double));
    o->v2t_ndcg = malloc((size_t)d->n_items * sizeof(double));
    o->t2v_rank = malloc((size_t)d->n_caps * sizeof(int64_t));
    o->t2v_ap = malloc((size_t)d->n_caps * sizeof(double));
    o->t2v_ndcg = malloc((size_t)d->n_caps * sizeof(double));
}

static void outputs_free(outputs *o)
{
    free(o->v2t_rank);
    free(o->v2t_ap);
    free(o->v2t_ndcg);
    free(o->t2v_rank);
    free(o->t2v_ap);
    free(o->t2v_ndcg);
}

static void evaluate(const dataset *d, const vtr_retrieval_options *o, outputs *out)
{
    vtr_error err;
    vtr_retrieval_per_query pq = {out->v2t_rank, out->v2t_ap, out->v2t_ndcg,
                                  out->t2v_rank, out->t2v_ap, out->t2v_ndcg};
    if (d->S) {
        vtr_similarity_matrix sm = {d->S, d->n_caps};
        CHECK_OK(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, d->n_items, d->n_caps,
                                        d->cap_item, o, &out->m, &pq, &err));
    } else {
        vtr_embedding_model models[3];
        for (int m = 0; m < d->n_models; m++)
            models[m] = (vtr_embedding_model){.items = d->items[m], .captions = d->caps[m], .dim = d->dims[m]};
        CHECK_OK(vtr_retrieval_evaluate_embeddings(models, d->n_models, d->n_items, d->n_caps,
                                                   d->cap_item, o, &out->m, &pq, &err));
    }
}

/* Runs vtr and the reference on d and checks that every metric agrees to 1e-9, every
 * rank exactly and every per-query AP and nDCG to 1e-12. */
static void check_against_reference(const dataset *d, const vtr_retrieval_options *o,
                                    const char *method)
{
    outputs out;
    outputs_alloc(&out, d);
    evaluate(d, o, &out);
    run_reference(d, o, method);

    vtr_npy_file f;
    const int64_t *bits = load_ref(&f, "metrics", 16);
    double ref[16];
    for (int k = 0; k < 16; k++)
        ref[k] = bits_to_double(bits[k]);
    vtr_npy_close(&f);
    const vtr_retrieval_direction *dir[2] = {&out.m.v2t, &out.m.t2v};
    for (int k = 0; k < 2; k++) {
        const double *r = ref + 7 * k;
        CHECK_NEAR(dir[k]->r1, r[0], 1e-9);
        CHECK_NEAR(dir[k]->r5, r[1], 1e-9);
        CHECK_NEAR(dir[k]->r10, r[2], 1e-9);
        CHECK_NEAR(dir[k]->median_rank, r[3], 1e-9);
        CHECK_NEAR(dir[k]->mean_rank, r[4], 1e-9);
        CHECK_NEAR(dir[k]->map, r[5], 1e-9);
        CHECK_NEAR(dir[k]->ndcg, r[6], 1e-9);
    }
    CHECK_NEAR(out.m.rsum, ref[14], 1e-9);
    CHECK_EQ_INT(out.m.n_folds, (int)ref[15]);

    static const char *names[2] = {"v2t", "t2v"};
    for (int k = 0; k < 2; k++) {
        int64_t n = k == 0 ? d->n_items : d->n_caps;
        char name[32];
        snprintf(name, sizeof name, "%s_rank", names[k]);
        const int64_t *rank = load_ref(&f, name, n);
        const int64_t *mine = k == 0 ? out.v2t_rank : out.t2v_rank;
        for (int64_t q = 0; q < n; q++)
            CHECK_MSG(mine[q] == rank[q], "%s query %lld: rank %lld, numpy %lld", names[k],
                      (long long)q, (long long)mine[q], (long long)rank[q]);
        vtr_npy_close(&f);
        for (int v = 0; v < 2; v++) {
            snprintf(name, sizeof name, "%s_%s", names[k], v ? "ndcg" : "ap");
            const int64_t *want = load_ref(&f, name, n);
            const double *got =
                k == 0 ? (v ? out.v2t_ndcg : out.v2t_ap) : (v ? out.t2v_ndcg : out.t2v_ap);
            for (int64_t q = 0; q < n; q++)
                CHECK_MSG(fabs(got[q] - bits_to_double(want[q])) <= 1e-12,
                          "%s query %lld: %.15g, numpy %.15g", name, (long long)q, got[q],
                          bits_to_double(want[q]));
            vtr_npy_close(&f);
        }
    }
    outputs_free(&out);
}

TEST(varying_captions_vs_numpy)
{
    need_numpy();
    vtr_rng rng;
    vtr_rng_init(&rng, 11, 0);
    dataset d = {0};
    d.n_items = 37;
    make_captions(&d, -9, 1, &rng); /* 1 .. 9 captions per item, shuffled */
    int dims[1] = {6};
    make_models(&d, 1, dims, 2, &rng); /* coarse values: many ties */
    vtr_retrieval_options o = {0};
    o.tile_items = 8; /* several tiles each way, partial edge tiles */
    o.tile_caps = 16;
    check_against_reference(&d, &o, "sort");
    o.cache_bytes = 1; /* relevant tiles computed twice */
    o.ndcg_cutoff = 10;
    o.median_no_floor = 1;
    check_against_reference(&d, &o, "sort");
    dataset_free(&d);
}

/* Float embeddings: numpy ranks the very matrix vtr reads, so ranks agree exactly. */
TEST(random_float_vs_numpy)
{
    need_numpy();
    vtr_rng rng;
    vtr_rng_init(&rng, 12, 0);
    dataset d = {0};
    d.n_items = 300;
    make_captions(&d, 5, 0, &rng);
    int dims[1] = {64};
    make_models(&d, 1, dims, 0, &rng);
    vtr_error err;
    d.S = malloc((size_t)d.n_items * (size_t)d.n_caps * sizeof *d.S);
    int *all = malloc((size_t)d.n_caps * sizeof *all);
    for (int j = 0; j < d.n_caps; j++)
        all[j] = j;
    vtr_embedding_model model = {.items = d.items[0], .captions = d.caps[0], .dim = 64};
    vtr_similarity_ensemble one = {&model, 1};
    CHECK_OK(vtr_similarity_ensemble_block(&one, 0, d.n_items, all, d.n_caps, d.S, &err));
    free(all);
    vtr_retrieval_options o = {0};
    o.tile_items = 64;
    o.tile_caps = 512;
    check_against_reference(&d, &o, "sort");
    dataset_free(&d);
}

/* 5,000 items x 25,000 captions (COCO's test shape), D 8: COCO 1K (five folds) and 5K. */
TEST(coco_1k_folds_and_5k_vs_numpy)
{
    need_numpy();
    vtr_rng rng;
    vtr_rng_init(&rng, 13, 0);
    dataset d = {0};
    d.n_items = 5000;
    make_captions(&d, 5, 0, &rng);
    int dims[1] = {8};
    make_models(&d, 1, dims, 3, &rng);
    vtr_retrieval_options o = {0};
    o.fold_items = 1000;
    check_against_reference(&d, &o, "sort");
    o.fold_items = 0;
    check_against_reference(&d, &o, "count");

    /* the folds' mean is not the 5K value, and each fold ranks among its own 1000 */
    outputs folds, whole;
    outputs_alloc(&folds, &d);
    outputs_alloc(&whole, &d);
    o.fold_items = 1000;
    evaluate(&d, &o, &folds);
    o.fold_items = 0;
    evaluate(&d, &o, &whole);
    CHECK_EQ_INT(folds.m.n_folds, 5);
    CHECK_EQ_INT(folds.m.v2t.n_queries, 5000);
    CHECK_EQ_INT(folds.m.t2v.n_queries, 25000);
    CHECK(folds.m.rsum > whole.m.rsum);
    for (int j = 0; j < d.n_caps; j++)
        CHECK(folds.t2v_rank[j] < 1000 && folds.t2v_rank[j] <= whole.t2v_rank[j]);
    outputs_free(&folds);
    outputs_free(&whole);
    dataset_free(&d);
}

/* 60 items with 1 to 6 captions in shuffled order and de-duplicated texts: a fifth of the
 * captions repeat an earlier caption's text (of any item, sometimes their own), text ids
 * not in caption order; one model of dim 5, exact scores (ties). */
static void make_dedup(dataset *d)
{
    vtr_rng rng;
    vtr_rng_init(&rng, 14, 0);
    *d = (dataset){.n_items = 60};
    make_captions(d, -6, 1, &rng);
    d->cap_text = malloc((size_t)d->n_caps * sizeof *d->cap_text);
    int n_texts = 0;
    for (int j = 0; j < d->n_caps; j++)
        d->cap_text[j] = j > 0 && vtr_rng_below(&rng, 5) == 0
                             ? d->cap_text[vtr_rng_below(&rng, (uint32_t)j)]
                             : n_texts++;
    for (int j = 0; j < d->n_caps; j++)
        d->cap_text[j] = n_texts - 1 - d->cap_text[j];
    d->n_texts = n_texts;
    int dims[1] = {5};
    make_models(d, 1, dims, 2, &rng);
    /* identical texts embed identically: copy the representative's row */
    for (int j = 0; j < d->n_caps; j++)
        for (int k = 0; k < j; k++)
            if (d->cap_text[k] == d->cap_text[j]) {
                memcpy(d->caps[0] + (size_t)j * 5, d->caps[0] + (size_t)k * 5, 5 * sizeof(float));
                break;
            }
}

TEST(hgr_dedup_vs_numpy)
{
    need_numpy();
    dataset d;
    make_dedup(&d);
    vtr_retrieval_options o = {0};
    o.cap_text = d.cap_text;
    o.n_texts = d.n_texts;
    o.tile_items = 16;
    o.tile_caps = 32;
    check_against_reference(&d, &o, "sort");
    o.fold_items = 20; /* de-duplication within folds */
    o.cache_bytes = 1;
    check_against_reference(&d, &o, "sort");

    outputs out;
    outputs_alloc(&out, &d);
    o.fold_items = 0;
    evaluate(&d, &o, &out);
    CHECK_EQ_INT(out.m.t2v.n_queries, d.n_texts);
    outputs_free(&out);
    dataset_free(&d);
}

TEST(ensemble_vs_numpy)
{
    need_numpy();
    vtr_rng rng;
    vtr_rng_init(&rng, 15, 0);
    dataset d = {0};
    d.n_items = 50;
    make_captions(&d, 4, 0, &rng);
    int dims[3] = {5, 7, 3};
    make_models(&d, 3, dims, 2, &rng);
    vtr_retrieval_options o = {0};
    o.tile_items = 16;
    o.tile_caps = 64;
    check_against_reference(&d, &o, "sort");

    /* an ensemble differs from its members; an ensemble of one is the model */
    vtr_error err;
    vtr_embedding_model models[3];
    for (int m = 0; m < 3; m++)
        models[m] = (vtr_embedding_model){.items = d.items[m], .captions = d.caps[m], .dim = d.dims[m]};
    vtr_retrieval_metrics all, first, single;
    CHECK_OK(vtr_retrieval_evaluate_embeddings(models, 3, d.n_items, d.n_caps, d.cap_item, &o, &all,
                                               NULL, &err));
    CHECK_OK(vtr_retrieval_evaluate_embeddings(models, 1, d.n_items, d.n_caps, d.cap_item, &o,
                                               &first, NULL, &err));
    vtr_similarity_ensemble one = {models, 1};
    CHECK_OK(vtr_retrieval_evaluate(vtr_similarity_ensemble_block, &one, d.n_items, d.n_caps,
                                    d.cap_item, &o, &single, NULL, &err));
    CHECK(memcmp(&first, &single, sizeof first) == 0);
    CHECK(all.v2t.map != first.v2t.map);
    dataset_free(&d);
}

/* Same bytes for any tiling, cache size and thread count. */
TEST(deterministic_over_tiles_cache_threads)
{
    vtr_rng rng;
    vtr_rng_init(&rng, 16, 0);
    dataset d = {0};
    d.n_items = 97;
    make_captions(&d, -7, 1, &rng);
    int dims[1] = {9};
    make_models(&d, 1, dims, 2, &rng);
    outputs ref;
    outputs_alloc(&ref, &d);
    evaluate(&d, NULL, &ref);
    static const struct {
        int tile_items, tile_caps, threads;
        size_t cache;
    } runs[] = {{1, 1, 2, 0}, {7, 13, 1, 0}, {7, 13, 2, 1}, {97, 5, 2, 4096}, {32, 256, 3, 1}};
    int saved = omp_get_max_threads();
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        vtr_retrieval_options o = {0};
        o.tile_items = runs[r].tile_items;
        o.tile_caps = runs[r].tile_caps;
        o.cache_bytes = runs[r].cache;
        omp_set_num_threads(runs[r].threads);
        outputs out;
        outputs_alloc(&out, &d);
        evaluate(&d, &o, &out);
        omp_set_num_threads(saved);
        CHECK_MSG(memcmp(&out.m, &ref.m, sizeof out.m) == 0, "run %zu: metrics differ", r);
        CHECK(memcmp(out.v2t_rank, ref.v2t_rank, (size_t)d.n_items * sizeof(int64_t)) == 0);
        CHECK(memcmp(out.t2v_rank, ref.t2v_rank, (size_t)d.n_caps * sizeof(int64_t)) == 0);
        CHECK(memcmp(out.t2v_ap, ref.t2v_ap, (size_t)d.n_caps * sizeof(double)) == 0);
        CHECK(memcmp(out.v2t_ndcg, ref.v2t_ndcg, (size_t)d.n_items * sizeof(double)) == 0);
        outputs_free(&out);
    }
    outputs_free(&ref);
    dataset_free(&d);
}

/* On the GPU (vtr_similarity_cuda): with exact values every product is exact in any order,
 * so the tiles, and every metric and per-query value, are the CPU's bytes; shuffled
 * captions make the relevant tiles gather captions that are no contiguous run. */
TEST(cuda_scoring_gives_the_cpu_bytes)
{
    test_need_cuda();
    vtr_rng rng;
    vtr_rng_init(&rng, 17, 0);
    dataset d = {0};
    d.n_items = 61;
    make_captions(&d, -6, 1, &rng);
    int dims[3] = {9, 4, 33};
    make_models(&d, 3, dims, 2, &rng);
    static const int tiles[][2] = {{0, 0}, {7, 13}, {61, 5}, {1, 1000}};
    for (int n_models = 1; n_models <= 3; n_models += 2)
        for (size_t r = 0; r < sizeof tiles / sizeof tiles[0]; r++) {
            dataset one = d;
            one.n_models = n_models;
            vtr_retrieval_options o = {.tile_items = tiles[r][0], .tile_caps = tiles[r][1]};
            outputs cpu, gpu;
            outputs_alloc(&cpu, &d);
            outputs_alloc(&gpu, &d);
            evaluate(&one, &o, &cpu);
            o.device = VTR_DEVICE_CUDA;
            evaluate(&one, &o, &gpu);
            CHECK_MSG(memcmp(&gpu.m, &cpu.m, sizeof gpu.m) == 0, "%d models, tiling %zu", n_models,
                      r);
            CHECK(memcmp(gpu.v2t_rank, cpu.v2t_rank, (size_t)d.n_items * sizeof(int64_t)) == 0);
            CHECK(memcmp(gpu.t2v_rank, cpu.t2v_rank, (size_t)d.n_caps * sizeof(int64_t)) == 0);
            CHECK(memcmp(gpu.v2t_ap, cpu.v2t_ap, (size_t)d.n_items * sizeof(double)) == 0);
            outputs_free(&cpu);
            outputs_free(&gpu);
        }
    /* de-duplicated texts (several relevant items per text query), in folds and whole */
    dataset dd;
    make_dedup(&dd);
    for (int folds = 0; folds < 2; folds++) {
        vtr_retrieval_options o = {.cap_text = dd.cap_text,
                                   .n_texts = dd.n_texts,
                                   .fold_items = folds ? 20 : 0,
                                   .tile_items = 16,
                                   .tile_caps = 32};
        outputs cpu, gpu;
        outputs_alloc(&cpu, &dd);
        outputs_alloc(&gpu, &dd);
        evaluate(&dd, &o, &cpu);
        o.device = VTR_DEVICE_CUDA;
        evaluate(&dd, &o, &gpu);
        CHECK_MSG(memcmp(&gpu.m, &cpu.m, sizeof gpu.m) == 0, "de-duplicated, folds %d", folds);
        CHECK(memcmp(gpu.t2v_rank, cpu.t2v_rank, (size_t)dd.n_caps * sizeof(int64_t)) == 0);
        CHECK(memcmp(gpu.t2v_ap, cpu.t2v_ap, (size_t)dd.n_caps * sizeof(double)) == 0);
        outputs_free(&cpu);
        outputs_free(&gpu);
    }
    dataset_free(&dd);

    /* one tile asked for directly, captions in no order */
    vtr_error err;
    vtr_embedding_model models[3];
    for (int m = 0; m < 3; m++)
        models[m] =
            (vtr_embedding_model){.items = d.items[m], .captions = d.caps[m], .dim = d.dims[m]};
    vtr_similarity_ensemble e = {models, 3};
    vtr_similarity_cuda *g = NULL;
    CHECK_OK(vtr_similarity_cuda_new(&e, d.n_items, d.n_caps, &g, &err));
    int caps[5] = {d.n_caps - 1, 2, 0, 7, 3};
    float S_cpu[4 * 5], S_gpu[4 * 5];
    CHECK_OK(vtr_similarity_ensemble_block(&e, 57, 4, caps, 5, S_cpu, &err));
    CHECK_OK(vtr_similarity_cuda_block(g, 57, 4, caps, 5, S_gpu, &err));
    CHECK(memcmp(S_gpu, S_cpu, sizeof S_cpu) == 0);
    vtr_similarity_cuda_free(g);
    dataset_free(&d);
}

/* Set embeddings scored on the GPU (smooth-Chamfer tiles there), alone and in an ensemble
 * with a single-vector model: the tiles are the CPU's to float32 rounding, and the GPU's
 * evaluation (one tile) counts exactly the scores of that tile, copied back. */
TEST(cuda_scoring_scores_sets_like_the_cpu)
{
    test_need_cuda();
    enum { K = 3, D = 8 };
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 23, 0);
    dataset d = {0};
    d.n_items = 37;
    make_captions(&d, -4, 1, &rng);
    int dims[1] = {6};
    make_models(&d, 1, dims, 0, &rng);
    size_t n = (size_t)d.n_items * (size_t)d.n_caps;
    float *set_items = malloc((size_t)d.n_items * K * D * sizeof(float));
    float *set_caps = malloc((size_t)d.n_caps * K * D * sizeof(float));
    float *S_cpu = malloc(n * sizeof(float)), *S_gpu = malloc(n * sizeof(float));
    int *caps = malloc((size_t)d.n_caps * sizeof(int));
    CHECK(set_items && set_caps && S_cpu && S_gpu && caps);
    fill_normalized(set_items, d.n_items * K, D, &rng);
    fill_normalized(set_caps, d.n_caps * K, D, &rng);
    for (int j = 0; j < d.n_caps; j++)
        caps[j] = j;
    vtr_embedding_model models[2] = {
        {.items = set_items, .captions = set_caps, .dim = D, .set_size = K, .set_alpha = 16.0f},
        {.items = d.items[0], .captions = d.caps[0], .dim = dims[0]}};
    for (int n_models = 1; n_models <= 2; n_models++) {
        vtr_similarity_ensemble e = {models, n_models};
        vtr_similarity_cuda *g = NULL;
        CHECK_OK(vtr_similarity_cuda_new(&e, d.n_items, d.n_caps, &g, &err));
        CHECK_OK(vtr_similarity_ensemble_block(&e, 0, d.n_items, caps, d.n_caps, S_cpu, &err));
        CHECK_OK(vtr_similarity_cuda_block(g, 0, d.n_items, caps, d.n_caps, S_gpu, &err));
        vtr_similarity_cuda_free(g);
        for (size_t k = 0; k < n; k++)
            CHECK_MSG(fabsf(S_gpu[k] - S_cpu[k]) <= 1e-5f * (1.0f + fabsf(S_cpu[k])),
                      "%d models, score %zu: %g on the GPU, %g on the CPU", n_models, k,
                      (double)S_gpu[k], (double)S_cpu[k]);
        vtr_retrieval_options o = {.tile_items = d.n_items, .tile_caps = d.n_caps};
        vtr_retrieval_metrics counted, on_gpu;
        vtr_similarity_matrix sm = {S_gpu, d.n_caps};
        CHECK_OK(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, d.n_items, d.n_caps,
                                        d.cap_item, &o, &counted, NULL, &err));
        o.device = VTR_DEVICE_CUDA;
        CHECK_OK(vtr_retrieval_evaluate_embeddings(models, n_models, d.n_items, d.n_caps,
                                                   d.cap_item, &o, &on_gpu, NULL, &err));
        CHECK(memcmp(&on_gpu, &counted, sizeof on_gpu) == 0);
    }
    free(set_items);
    free(set_caps);
    free(S_cpu);
    free(S_gpu);
    free(caps);
    dataset_free(&d);
}

TEST(nan_scores)
{
    vtr_error err;
    float S[3 * 6];
    memcpy(S, hand_S, sizeof S);
    S[0 * 6 + 2] = NAN; /* item 0, caption 2 (item 1's): was .8, second for item 0 */
    vtr_similarity_matrix sm = {S, 6};
    vtr_retrieval_metrics m;
    int64_t v2t_rank[3], t2v_rank[6];
    vtr_retrieval_per_query pq = {v2t_rank, NULL, NULL, t2v_rank, NULL, NULL};
    CHECK_OK(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 3, 6, hand_cap_item, NULL, &m,
                                    &pq, &err));
    CHECK_EQ_INT(t2v_rank[2], 0); /* caption 2: item 0's NaN no longer beats item 1's .7 */
    CHECK_EQ_INT(v2t_rank[0], 0);
    S[1 * 6 + 2] = NAN; /* a relevant pair */
    CHECK_FAILS(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 3, 6, hand_cap_item, NULL,
                                       &m, NULL, &err),
                VTR_ERR_INVALID, "similarity of item 1 and caption 2 is NaN");
}

static vtr_status failing_block(void *ctx, int item0, int n_items, const int *caps, int n_caps,
                                float *S, vtr_error *err)
{
    return vtr_fail(err, VTR_ERR_IO, "model server gone");
}

TEST(invalid_input)
{
    vtr_error err;
    vtr_similarity_matrix sm = {hand_S, 6};
    vtr_retrieval_metrics m, untouched;
    memset(&m, 0x5a, sizeof m);
    untouched = m;
    vtr_retrieval_options o = {0};

    int bad_item[6] = {0, 0, 1, 3, 2, 2};
    CHECK_FAILS(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 3, 6, bad_item, NULL, &m,
                                       NULL, &err),
                VTR_ERR_INVALID, "caption 3: item 3 out of range [0, 3)");
    bad_item[3] = -1;
    CHECK_FAILS(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 3, 6, bad_item, NULL, &m,
                                       NULL, &err),
                VTR_ERR_INVALID, "caption 3: item -1 out of range");
    int no_captions[6] = {0, 0, 2, 2, 2, 2}; /* item 1 has none */
    CHECK_FAILS(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 3, 6, no_captions, NULL,
                                       &m, NULL, &err),
                VTR_ERR_INVALID, "item 1 has no captions");
    o.fold_items = 2;
    CHECK_FAILS(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 3, 6, hand_cap_item, &o,
                                       &m, NULL, &err),
                VTR_ERR_INVALID, "3 items do not split into folds of 2");
    o.fold_items = 0;
    o.ndcg_cutoff = -1;
    CHECK_FAILS(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 3, 6, hand_cap_item, &o,
                                       &m, NULL, &err),
                VTR_ERR_INVALID, "negative option");
    o.ndcg_cutoff = 0;
    int cap_text[6] = {0, 1, 2, 3, 4, 5};
    o.cap_text = cap_text;
    o.n_texts = 5;
    CHECK_FAILS(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 3, 6, hand_cap_item, &o,
                                       &m, NULL, &err),
                VTR_ERR_INVALID, "caption 5: text id 5 out of range [0, 5)");
    o.n_texts = 0;
    CHECK_FAILS(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 3, 6, hand_cap_item, &o,
                                       &m, NULL, &err),
                VTR_ERR_INVALID, "n_texts");
    CHECK_FAILS(vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 0, 6, hand_cap_item, NULL,
                                       &m, NULL, &err),
                VTR_ERR_INVALID, "need at least one");
    CHECK_FAILS(
        vtr_retrieval_evaluate(vtr_similarity_matrix_block, &sm, 3, 6, NULL, NULL, &m, NULL, &err),
        VTR_ERR_INVALID, "caption -> item");
    CHECK_FAILS(vtr_retrieval_evaluate(NULL, &sm, 3, 6, hand_cap_item, NULL, &m, NULL, &err),
                VTR_ERR_INVALID, "no similarity function");
    CHECK_FAILS(
        vtr_retrieval_evaluate(failing_block, NULL, 3, 6, hand_cap_item, NULL, &m, NULL, &err),
        VTR_ERR_IO, "similarity of items 0..2 x 6 captions: model server gone");
    o = (vtr_retrieval_options){0};
    o.fold_items = 1;
    CHECK_FAILS(
        vtr_retrieval_evaluate(failing_block, NULL, 3, 6, hand_cap_item, &o, &m, NULL, &err),
        VTR_ERR_IO, "fold 0: similarity of items 0..0 x 2 captions");
    vtr_embedding_model model = {.dim = 4};
    CHECK_FAILS(
        vtr_retrieval_evaluate_embeddings(&model, 1, 3, 6, hand_cap_item, NULL, &m, NULL, &err),
        VTR_ERR_INVALID, "model 0");
    CHECK_FAILS(
        vtr_retrieval_evaluate_embeddings(&model, 0, 3, 6, hand_cap_item, NULL, &m, NULL, &err),
        VTR_ERR_INVALID, "no models");
    CHECK(memcmp(&m, &untouched, sizeof m) == 0);
}
