/* Exact top-k (index/topk.h) against a brute-force float64 reference: exact data with
 * many ties (both paths, several thread counts, parts and block sizes, tombstones,
 * k > rows), random data (equal up to float32 rounding), float32 matrices, NaN scores,
 * and the refusals. */
#define _GNU_SOURCE /* M_PI */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "index/topk.h"
#include "lib/tensor.h"

/* the batched path's kernels that filter in bfloat16, each tested where the CPU has it */
static const vtr_topk_kernel filters[] = {VTR_TOPK_BF16_FILTER, VTR_TOPK_AMX_FILTER};

static uint64_t rng_state;

static uint32_t next_u32(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33);
}

static double next_gaussian(void)
{
    double u = (next_u32() + 1.0) / 4294967297.0, v = next_u32() / 4294967296.0;
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* A test matrix: n rows of dim columns as float16 (and the same values as float32), cut
 * into parts at the given row counts, with a skip bitmap. */
typedef struct test_matrix {
    int64_t n, dim;
    uint16_t *h;
    float *f;
    uint64_t *skip;
    vtr_topk_part parts_h[8], parts_f[8];
    int n_parts;
} test_matrix;

static void matrix_init(test_matrix *t, int64_t n, int64_t dim, bool coarse, double skip_frac,
                        const int64_t *cuts, int n_cuts)
{
    t->n = n;
    t->dim = dim;
    t->h = malloc((size_t)(n * dim) * sizeof *t->h);
    t->f = malloc((size_t)(n * dim) * sizeof *t->f);
    t->skip = calloc((size_t)(n / 64 + 1), sizeof *t->skip);
    CHECK(t->h && t->f && t->skip);
    for (int64_t i = 0; i < n * dim; i++) {
        /* coarse: multiples of 1/4 in [-1, 1], so that every score is exact in float32 and
         * equal scores are common */
        float x = coarse ? (float)((int)(next_u32() % 9) - 4) / 4 : (float)next_gaussian();
        t->h[i] = vtr_float_to_half(x);
        t->f[i] = vtr_half_to_float(t->h[i]);
    }
    for (int64_t r = 0; r < n; r++)
        if (next_u32() / 4294967296.0 < skip_frac)
            t->skip[r / 64] |= UINT64_C(1) << (r % 64);
    int64_t start = 0;
    t->n_parts = 0;
    for (int c = 0; c <= n_cuts; c++) {
        int64_t end = c < n_cuts ? cuts[c] : n;
        t->parts_h[t->n_parts] = (vtr_topk_part){t->h + start * dim, end - start};
        t->parts_f[t->n_parts] = (vtr_topk_part){t->f + start * dim, end - start};
        t->n_parts++;
        start = end;
    }
}

static void matrix_free(test_matrix *t)
{
    free(t->h);
    free(t->f);
    free(t->skip);
}

static vtr_topk_matrix view(const test_matrix *t, vtr_dtype dtype, bool with_skip)
{
    return (vtr_topk_matrix){.dtype = dtype, .dim = t->dim, .n_parts = t->n_parts,
                             .parts = dtype == VTR_F16 ? t->parts_h : t->parts_f,
                             .skip = with_skip ? t->skip : NULL};
}

typedef struct ref_hit {
    double score;
    int64_t row;
} ref_hit;

static int cmp_ref(const void *a, const void *b)
{
    const ref_hit *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

/* The float64 reference ranking of query q: every unskipped row, sorted; returns count. */
static int64_t reference(const test_matrix *t, const float *q, bool with_skip, ref_hit *out)
{
    int64_t n = 0;
    for (int64_t r = 0; r < t->n; r++) {
        if (with_skip && (t->skip[r / 64] >> (r % 64) & 1))
            continue;
        double s = 0;
        for (int64_t d = 0; d < t->dim; d++)
            s += (double)t->f[r * t->dim + d] * q[d];
        out[n++] = (ref_hit){s, r};
    }
    qsort(out, (size_t)n, sizeof *out, cmp_ref);
    return n;
}

/* Runs the search and compares with the reference: exactly (rows and scores) when exact,
 * else each result's reference score must equal the reference's score at that rank up to
 * tol (so rows whose scores differ by less than rounding may swap). */
static void check_search(const test_matrix *t, vtr_dtype dtype, bool with_skip,
                         const float *queries, int64_t nq, int64_t k,
                         const vtr_topk_options *opt, bool exact, double tol)
{
    vtr_error err;
    vtr_topk_matrix m = view(t, dtype, with_skip);
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 2, .shape = {nq, t->dim}, .data = (void *)queries};
    int64_t *rows = malloc((size_t)(nq * k) * sizeof *rows);
    float *scores = malloc((size_t)(nq * k) * sizeof *scores);
    ref_hit *ref = malloc((size_t)t->n * sizeof *ref);
    double *ref_of_row = malloc((size_t)t->n * sizeof *ref_of_row);
    CHECK(rows && scores && ref && ref_of_row);
    int64_t found = -1;
    CHECK_OK(vtr_topk_search(&m, &qt, k, opt, rows, scores, &found, &err));
    for (int64_t q = 0; q < nq; q++) {
        int64_t n = reference(t, queries + q * t->dim, with_skip, ref);
        CHECK_EQ_INT(found, n < k ? n : k);
        for (int64_t i = 0; i < n; i++)
            ref_of_row[ref[i].row] = ref[i].score;
        for (int64_t i = 0; i < k; i++) {
            int64_t got = rows[q * k + i];
            float s = scores[q * k + i];
            if (i >= n) {
                CHECK_MSG(got == -1 && s == -INFINITY, "query %lld rank %lld: %lld %g past the end",
                          (long long)q, (long long)i, (long long)got, s);
                continue;
            }
            if (exact) {
                CHECK_MSG(got == ref[i].row && s == ref[i].score,
                          "query %lld rank %lld: row %lld score %.9g, expected row %lld score %.9g",
                          (long long)q, (long long)i, (long long)got, s, (long long)ref[i].row,
                          ref[i].score);
            } else {
                CHECK_MSG(got >= 0 && got < t->n, "row %lld", (long long)got);
                CHECK(!with_skip || !(t->skip[got / 64] >> (got % 64) & 1));
                CHECK_MSG(fabs(ref_of_row[got] - ref[i].score) <= tol &&
                              fabs(s - ref_of_row[got]) <= tol,
                          "query %lld rank %lld: row %lld (score %.9g, reference %.9g), "
                          "reference rank has %.9g", (long long)q, (long long)i,
                          (long long)got, s, ref_of_row[got], ref[i].score);
                if (i > 0)
                    CHECK(scores[q * k + i - 1] >= s);
            }
        }
    }
    free(rows);
    free(scores);
    free(ref);
    free(ref_of_row);
}

static float *coarse_queries(int64_t nq, int64_t dim)
{
    float *q = malloc((size_t)(nq * dim) * sizeof *q);
    CHECK(q);
    for (int64_t i = 0; i < nq * dim; i++)
        q[i] = (float)((int)(next_u32() % 7) - 3);
    return q;
}

TEST(exact_ties_both_paths)
{
    rng_state = 1;
    /* 37 columns: 16-column steps, an 8-column remainder and 5 single columns; parts of
     * uneven length with an empty one */
    const int64_t cuts[] = {700, 700, 1500, 2900};
    test_matrix t;
    matrix_init(&t, 3000, 37, true, 0.1, cuts, 4);
    const int64_t nqs[] = {1, 2, 3, 5, 8, 40}; /* 40: the batched path by default */
    const int64_t ks[] = {1, 7, 100, 3005};
    const int threads[] = {1, 2, 3};
    for (size_t a = 0; a < sizeof nqs / sizeof *nqs; a++) {
        float *q = coarse_queries(nqs[a], t.dim);
        for (size_t b = 0; b < sizeof ks / sizeof *ks; b++)
            for (size_t c = 0; c < sizeof threads / sizeof *threads; c++) {
                vtr_topk_options opt = {.threads = threads[c], .block_rows = 512};
                check_search(&t, VTR_F16, true, q, nqs[a], ks[b], &opt, true, 0);
                check_search(&t, VTR_F32, c == 1, q, nqs[a], ks[b], &opt, true, 0);
            }
        /* each batched kernel forced for few queries, and the fused path for many */
        vtr_topk_options sgemm = {.batch_min_queries = 1, .kernel = VTR_TOPK_SGEMM,
                                  .block_rows = 333};
        check_search(&t, VTR_F16, true, q, nqs[a], 50, &sgemm, true, 0);
        check_search(&t, VTR_F32, true, q, nqs[a], 3005, &sgemm, true, 0);
        for (size_t f = 0; f < sizeof filters / sizeof *filters; f++) {
            if (!vtr_topk_have_kernel(filters[f]))
                continue;
            vtr_topk_options bf16 = {.batch_min_queries = 1, .kernel = filters[f],
                                     .threads = 3};
            check_search(&t, VTR_F16, true, q, nqs[a], 50, &bf16, true, 0);
            check_search(&t, VTR_F32, false, q, nqs[a], 3005, &bf16, true, 0);
        }
        vtr_topk_options fused = {.batch_min_queries = 1000};
        check_search(&t, VTR_F16, true, q, nqs[a], 50, &fused, true, 0);
        free(q);
    }
    matrix_free(&t);
}

TEST(random_data_matches_float64)
{
    rng_state = 2;
    const int64_t cuts[] = {1000, 4096};
    test_matrix t;
    matrix_init(&t, 5000, 64, false, 0.05, cuts, 2);
    int64_t nq = 12;
    float *q = malloc((size_t)(nq * t.dim) * sizeof *q);
    CHECK(q);
    for (int64_t i = 0; i < nq * t.dim; i++)
        q[i] = (float)next_gaussian();
    /* scores of about 8 (64 terms of N(0,1) products); float32 rounding is about 1e-5 */
    vtr_topk_options fused = {.batch_min_queries = 1000};
    vtr_topk_options sgemm = {.batch_min_queries = 1, .kernel = VTR_TOPK_SGEMM};
    check_search(&t, VTR_F16, true, q, nq, 20, &fused, false, 1e-4);
    check_search(&t, VTR_F16, true, q, nq, 20, &sgemm, false, 1e-4);
    check_search(&t, VTR_F32, false, q, 1, 5000, NULL, false, 1e-4);
    for (size_t f = 0; f < sizeof filters / sizeof *filters; f++) {
        if (!vtr_topk_have_kernel(filters[f]))
            continue;
        vtr_topk_options bf16 = {.batch_min_queries = 1, .kernel = filters[f]};
        check_search(&t, VTR_F16, true, q, nq, 20, &bf16, false, 1e-4);
        check_search(&t, VTR_F32, true, q, nq, 300, &bf16, false, 1e-4);
    }
    free(q);
    matrix_free(&t);
}

/* A bfloat16 filter keeps exactly the fused path's results and scores (the same kernel
 * scores the rows it keeps), on unit vectors like an index's, whatever the threads. */
static void check_filter_equals_fused_path(vtr_topk_kernel filter)
{
    rng_state = 7;
    const int64_t cuts[] = {3001, 3001, 7777};
    test_matrix t;
    matrix_init(&t, 20000, 96, false, 0.02, cuts, 3);
    for (int64_t r = 0; r < t.n; r++) { /* unit rows, as stored in an index */
        double ss = 0;
        for (int64_t d = 0; d < t.dim; d++)
            ss += (double)t.f[r * t.dim + d] * t.f[r * t.dim + d];
        for (int64_t d = 0; d < t.dim; d++) {
            t.h[r * t.dim + d] = vtr_float_to_half((float)(t.f[r * t.dim + d] / sqrt(ss)));
            t.f[r * t.dim + d] = vtr_half_to_float(t.h[r * t.dim + d]);
        }
    }
    int64_t nq = 30, k = 25;
    float *q = malloc((size_t)(nq * t.dim) * sizeof *q);
    int64_t *r1 = malloc((size_t)(nq * k) * sizeof *r1), *r2 = malloc((size_t)(nq * k) * sizeof *r2);
    float *s1 = malloc((size_t)(nq * k) * sizeof *s1), *s2 = malloc((size_t)(nq * k) * sizeof *s2);
    CHECK(q && r1 && r2 && s1 && s2);
    for (int64_t i = 0; i < nq * t.dim; i++) /* queries near rows: close competitors */
        q[i] = t.f[(i / t.dim) * 50 * t.dim + i % t.dim] + 0.05f * (float)next_gaussian();
    vtr_topk_matrix m = view(&t, VTR_F16, true);
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 2, .shape = {nq, t.dim}, .data = q};
    vtr_error err;
    vtr_topk_options fused = {.batch_min_queries = 1000};
    CHECK_OK(vtr_topk_search(&m, &qt, k, &fused, r1, s1, NULL, &err));
    for (int threads = 1; threads <= 3; threads++) {
        vtr_topk_options bf16 = {.kernel = filter, .batch_min_queries = 1,
                                 .threads = threads};
        CHECK_OK(vtr_topk_search(&m, &qt, k, &bf16, r2, s2, NULL, &err));
        CHECK(memcmp(r1, r2, (size_t)(nq * k) * sizeof *r1) == 0);
        CHECK(memcmp(s1, s2, (size_t)(nq * k) * sizeof *s1) == 0);
    }
    /* near-ties everywhere: rows u + small noise, queries near u; the scores cluster
     * within less than the bfloat16 error, so the filter keeps the true top k only
     * thanks to its error bound */
    float u[96];
    for (int d = 0; d < 96; d++)
        u[d] = (float)next_gaussian();
    for (int64_t r = 0; r < t.n; r++) {
        double ss = 0;
        float x[96];
        for (int d = 0; d < 96; d++) {
            x[d] = u[d] + 0.02f * (float)next_gaussian();
            ss += (double)x[d] * x[d];
        }
        for (int d = 0; d < 96; d++) {
            t.h[r * 96 + d] = vtr_float_to_half((float)(x[d] / sqrt(ss)));
            t.f[r * 96 + d] = vtr_half_to_float(t.h[r * 96 + d]);
        }
    }
    for (int64_t i = 0; i < nq * t.dim; i++)
        q[i] = u[i % t.dim] + 0.02f * (float)next_gaussian();
    CHECK_OK(vtr_topk_search(&m, &qt, k, &fused, r1, s1, NULL, &err));
    vtr_topk_options bf16 = {.kernel = filter, .batch_min_queries = 1};
    CHECK_OK(vtr_topk_search(&m, &qt, k, &bf16, r2, s2, NULL, &err));
    CHECK(memcmp(r1, r2, (size_t)(nq * k) * sizeof *r1) == 0);
    CHECK(memcmp(s1, s2, (size_t)(nq * k) * sizeof *s1) == 0);
    check_search(&t, VTR_F16, true, q, nq, k, &bf16, false, 1e-5);
    free(r1);
    free(r2);
    free(s1);
    free(s2);
    free(q);
    matrix_free(&t);
}

TEST(bf16_filter_equals_fused_path)
{
    if (!vtr_topk_have_kernel(VTR_TOPK_BF16_FILTER))
        test_skip("this CPU has no AVX512-BF16");
    check_filter_equals_fused_path(VTR_TOPK_BF16_FILTER);
}

TEST(amx_filter_equals_fused_path)
{
    if (!vtr_topk_have_kernel(VTR_TOPK_AMX_FILTER))
        test_skip("this CPU has no AMX-BF16 (or the kernel does not let the process use it)");
    check_filter_equals_fused_path(VTR_TOPK_AMX_FILTER);
}

/* The same query alone and among many gives the same results on the fused path (its
 * per-row arithmetic does not depend on the group), and thread counts change nothing. */
TEST(fused_path_deterministic)
{
    rng_state = 3;
    const int64_t cuts[] = {2500};
    test_matrix t;
    matrix_init(&t, 6000, 100, false, 0, cuts, 1);
    float *q = malloc(5 * 100 * sizeof *q);
    CHECK(q);
    for (int i = 0; i < 500; i++)
        q[i] = (float)next_gaussian();
    vtr_topk_matrix m = view(&t, VTR_F16, false);
    int64_t rows1[30], rows5[5 * 30];
    float s1[30], s5[5 * 30];
    vtr_error err;
    for (int threads = 1; threads <= 4; threads++) {
        vtr_topk_options opt = {.threads = threads};
        for (int i = 0; i < 5; i++) {
            vtr_tensor one = {.dtype = VTR_F32, .ndim = 1, .shape = {100}, .data = q + i * 100};
            vtr_tensor all = {.dtype = VTR_F32, .ndim = 2, .shape = {5, 100}, .data = q};
            CHECK_OK(vtr_topk_search(&m, &one, 30, &opt, rows1, s1, NULL, &err));
            CHECK_OK(vtr_topk_search(&m, &all, 30, &opt, rows5, s5, NULL, &err));
            CHECK(memcmp(rows1, rows5 + i * 30, sizeof rows1) == 0);
            CHECK(memcmp(s1, s5 + i * 30, sizeof s1) == 0);
        }
    }
    free(q);
    matrix_free(&t);
}

TEST(nan_ranks_last)
{
    rng_state = 4;
    test_matrix t;
    matrix_init(&t, 40, 8, true, 0, NULL, 0);
    t.h[5 * 8 + 3] = 0x7e00; /* row 5 holds a NaN: its score is NaN */
    t.h[9 * 8 + 0] = 0x7e00;
    vtr_topk_matrix m = view(&t, VTR_F16, false);
    float q[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 1, .shape = {8}, .data = q};
    int64_t rows[45];
    float scores[45];
    int64_t found;
    vtr_error err;
    for (int batch = 0; batch < 2; batch++) {
        vtr_topk_options opt = {.batch_min_queries = batch ? 1 : 0};
        CHECK_OK(vtr_topk_search(&m, &qt, 45, &opt, rows, scores, &found, &err));
        CHECK_EQ_INT(found, 40);
        CHECK_EQ_INT(rows[38], 5);
        CHECK_EQ_INT(rows[39], 9);
        CHECK(isnan(scores[38]) && isnan(scores[39]));
        CHECK(rows[40] == -1 && scores[44] == -INFINITY);
        for (int i = 1; i < 38; i++)
            CHECK(scores[i - 1] > scores[i] || (scores[i - 1] == scores[i] && rows[i - 1] < rows[i]));
        /* k smaller than the number of numbers: no NaN */
        CHECK_OK(vtr_topk_search(&m, &qt, 3, &opt, rows, scores, &found, &err));
        CHECK(!isnan(scores[0]) && !isnan(scores[2]) && rows[0] != 5 && rows[2] != 9);
    }
    /* a NaN query: every score NaN, rows in order */
    q[0] = NAN;
    CHECK_OK(vtr_topk_search(&m, &qt, 4, NULL, rows, scores, &found, &err));
    for (int i = 0; i < 4; i++)
        CHECK(rows[i] == i && isnan(scores[i]));
    matrix_free(&t);
}

/* vtr_topk_select, the merge of the GPU's candidate lists: the order, ties, NaN last,
 * rows -1 ignored, fewer candidates than k. */
TEST(select_merges_candidates_in_order)
{
    float s[] = {0.5f, NAN, 2.0f, 0.5f, -INFINITY, 2.0f, 9.0f, 1.0f};
    int64_t r[] = {7, 3, 4, 2, 8, 1, -1, 5};
    int64_t rows[10], count;
    float scores[10];
    vtr_error err;
    CHECK_OK(vtr_topk_select(s, r, 8, 10, rows, scores, &count, &err));
    CHECK_EQ_INT(count, 7);
    int64_t want[] = {1, 4, 5, 2, 7, 8, 3};
    for (int i = 0; i < 7; i++)
        CHECK_MSG(rows[i] == want[i], "rank %d: row %lld, want %lld", i, (long long)rows[i],
                  (long long)want[i]);
    CHECK(scores[0] == 2.0f && scores[3] == 0.5f && isnan(scores[6]));
    CHECK(rows[7] == -1 && scores[9] == -INFINITY);
    CHECK_OK(vtr_topk_select(s, r, 8, 2, rows, scores, &count, &err));
    CHECK(count == 2 && rows[0] == 1 && rows[1] == 4);
}

/* The GPU's top-k (topk.cu) against the CPU's on n rows of dim (rng seed), both dtypes, for
 * each k of ks. With coarse values every score is exact in float32, so sums in another order
 * give the same scores: the same rows and scores bit for bit, ties and skipped rows included.
 * Gaussian values: scores to float32 rounding. */
static void check_cuda_search(int64_t n, int64_t dim, bool coarse, uint64_t seed, const int64_t *ks,
                              int nk)
{
    static const int64_t cuts[] = {300, 301, 1000};
    enum { Q = 3 };
    vtr_error err;
    rng_state = seed;
    test_matrix t;
    matrix_init(&t, n, dim, coarse, 0.1, cuts, 3);
    float *q = malloc((size_t)(Q * dim) * sizeof *q);
    int64_t *rows_c = malloc(Q * VTR_TOPK_CUDA_MAX_K * sizeof *rows_c);
    int64_t *rows_g = malloc(Q * VTR_TOPK_CUDA_MAX_K * sizeof *rows_g);
    float *scores_c = malloc(Q * VTR_TOPK_CUDA_MAX_K * sizeof *scores_c);
    float *scores_g = malloc(Q * VTR_TOPK_CUDA_MAX_K * sizeof *scores_g);
    CHECK(q && rows_c && rows_g && scores_c && scores_g);
    for (int64_t i = 0; i < Q * dim; i++)
        q[i] = coarse ? (float)((int)(next_u32() % 9) - 4) / 4 : (float)next_gaussian();
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 2, .shape = {Q, dim}, .data = q};
    for (int f16 = 0; f16 < 2; f16++) {
        vtr_topk_matrix m = view(&t, f16 ? VTR_F16 : VTR_F32, true);
        vtr_topk_cuda *c;
        CHECK_OK(vtr_topk_cuda_new(&m, &c, &err));
        for (int ki = 0; ki < nk; ki++) {
            int64_t k = ks[ki], found_c, found_g;
            CHECK_OK(vtr_topk_search(&m, &qt, k, NULL, rows_c, scores_c, &found_c, &err));
            CHECK_OK(vtr_topk_cuda_search(c, &qt, k, rows_g, scores_g, &found_g, &err));
            CHECK_EQ_INT(found_g, found_c);
            for (int64_t i = 0; i < Q * k; i++) {
                CHECK_MSG(rows_g[i] == rows_c[i] || !coarse,
                          "%lld rows of %lld, %s, k %lld, result %lld: row %lld, cpu %lld",
                          (long long)n, (long long)dim, f16 ? "float16" : "float32", (long long)k,
                          (long long)i, (long long)rows_g[i], (long long)rows_c[i]);
                CHECK_MSG(coarse ? scores_g[i] == scores_c[i]
                                 : fabsf(scores_g[i] - scores_c[i]) <=
                                       1e-5f * (1 + fabsf(scores_c[i])),
                          "%lld rows of %lld, k %lld, result %lld: score %.9g, cpu %.9g",
                          (long long)n, (long long)dim, (long long)k, (long long)i,
                          (double)scores_g[i], (double)scores_c[i]);
            }
        }
        CHECK_FAILS(
            vtr_topk_cuda_search(c, &qt, VTR_TOPK_CUDA_MAX_K + 1, rows_g, scores_g, NULL, &err),
            VTR_ERR_UNSUPPORTED, "search on the CPU (--device cpu)");
        vtr_topk_cuda_free(c);
    }
    free(q);
    free(rows_c);
    free(rows_g);
    free(scores_c);
    free(scores_g);
    matrix_free(&t);
}

/* Each load path, its lanes' sums and k from 1 to above the live rows: dims 1000 and 64,
 * 16-byte loads of both dtypes (1000: every lane of the warp has several); 100 and 12,
 * float32's only (100: float16's single loads on every lane); 7, neither. */
TEST(cuda_topk_matches_cpu)
{
    test_need_cuda();
    static const int64_t dims[] = {1000, 100, 64, 12, 7}, ks[] = {1, 10, 256};
    for (int coarse = 1; coarse >= 0; coarse--)
        for (int di = 0; di < 5; di++)
            check_cuda_search(5000, dims[di], coarse, 11 + (uint64_t)di, ks, 3);
}

/* More rows than the GPU has warps (8,448 on an H200 and on the emulation: about 12 rows each),
 * so that each warp keeps the best k of several rows, the worst giving way, and its lanes
 * write out their shares of them. */
TEST(cuda_topk_many_rows_per_warp)
{
    test_need_cuda();
    static const int64_t ks[] = {2, 256};
    check_cuda_search(100000, 8, true, 17, ks, 2);
}

TEST(nothing_to_find)
{
    rng_state = 5;
    test_matrix t;
    matrix_init(&t, 70, 4, true, 0, NULL, 0);
    for (int w = 0; w < 2; w++)
        t.skip[w] = ~UINT64_C(0);
    vtr_topk_matrix m = view(&t, VTR_F16, true);
    CHECK_EQ_INT(vtr_topk_matrix_live_rows(&m), 0);
    float q[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 2, .shape = {2, 4}, .data = q};
    int64_t rows[6];
    float scores[6];
    int64_t found = 7;
    vtr_error err;
    CHECK_OK(vtr_topk_search(&m, &qt, 3, NULL, rows, scores, &found, &err));
    CHECK_EQ_INT(found, 0);
    for (int i = 0; i < 6; i++)
        CHECK(rows[i] == -1 && scores[i] == -INFINITY);
    /* no parts at all, and no queries */
    vtr_topk_matrix empty = {.dtype = VTR_F16, .dim = 4};
    CHECK_OK(vtr_topk_search(&empty, &qt, 3, NULL, rows, scores, &found, &err));
    CHECK_EQ_INT(found, 0);
    vtr_tensor none = {.dtype = VTR_F32, .ndim = 2, .shape = {0, 4}, .data = NULL};
    m.skip = NULL;
    CHECK_OK(vtr_topk_search(&m, &none, 3, NULL, NULL, NULL, &found, &err));
    CHECK_EQ_INT(found, 3);
    matrix_free(&t);
}

TEST(refusals)
{
    rng_state = 6;
    test_matrix t;
    matrix_init(&t, 10, 4, true, 0, NULL, 0);
    vtr_topk_matrix m = view(&t, VTR_F16, false);
    float q[5] = {1, 2, 3, 4, 5};
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 1, .shape = {4}, .data = q};
    int64_t rows[10];
    float scores[10];
    vtr_error err;
    CHECK_FAILS(vtr_topk_search(&m, &qt, 0, NULL, rows, scores, NULL, &err), VTR_ERR_INVALID,
                "k = 0");
    vtr_tensor wide = {.dtype = VTR_F32, .ndim = 2, .shape = {1, 5}, .data = q};
    CHECK_FAILS(vtr_topk_search(&m, &wide, 1, NULL, rows, scores, NULL, &err), VTR_ERR_INVALID,
                "queries have 5 columns; the matrix has 4");
    vtr_tensor half = {.dtype = VTR_F16, .ndim = 1, .shape = {4}, .data = q};
    CHECK_FAILS(vtr_topk_search(&m, &half, 1, NULL, rows, scores, NULL, &err), VTR_ERR_INVALID,
                "float32");
    CHECK_FAILS(vtr_topk_search(&m, &qt, 1, NULL, NULL, scores, NULL, &err), VTR_ERR_INVALID,
                "output");
    vtr_topk_matrix bad = m;
    bad.dtype = VTR_U8;
    CHECK_FAILS(vtr_topk_search(&bad, &qt, 1, NULL, rows, scores, NULL, &err), VTR_ERR_INVALID,
                "uint8");
    vtr_topk_part hole = {NULL, 3};
    bad = (vtr_topk_matrix){.dtype = VTR_F16, .dim = 4, .n_parts = 1, .parts = &hole};
    CHECK_FAILS(vtr_topk_search(&bad, &qt, 1, NULL, rows, scores, NULL, &err), VTR_ERR_INVALID,
                "part 0");
    vtr_topk_options opt = {.kernel = (vtr_topk_kernel)7};
    CHECK_FAILS(vtr_topk_search(&m, &qt, 1, &opt, rows, scores, NULL, &err), VTR_ERR_INVALID,
                "unknown kernel 7");
    /* a kernel this CPU lacks is refused, and AUTO picks the best one it has */
    for (size_t f = 0; f < sizeof filters / sizeof *filters; f++)
        if (!vtr_topk_have_kernel(filters[f])) {
            opt.kernel = filters[f];
            CHECK_FAILS(vtr_topk_search(&m, &qt, 1, &opt, rows, scores, NULL, &err),
                        VTR_ERR_UNSUPPORTED, "needs a CPU with");
        }
    vtr_topk_kernel best = vtr_topk_batch_kernel(VTR_TOPK_AUTO);
    CHECK(best == (vtr_topk_have_kernel(VTR_TOPK_AMX_FILTER)    ? VTR_TOPK_AMX_FILTER
                   : vtr_topk_have_kernel(VTR_TOPK_BF16_FILTER) ? VTR_TOPK_BF16_FILTER
                                                                : VTR_TOPK_SGEMM));
    CHECK(strcmp(vtr_topk_kernel_name(VTR_TOPK_AMX_FILTER), "amx-filter") == 0);
    matrix_free(&t);
}
