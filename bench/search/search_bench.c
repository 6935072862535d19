/* vtr's side of bench/search (see run.sh).
 *
 *   search_bench build DIR ROWS DIM SEED [CLUSTERS]
 *       Builds an embedding index at DIR through the writer API: ROWS synthetic vectors
 *       (uniform in [-1, 1) per component, then L2-normalized to float16 by the index),
 *       keys "row<i>", committed after every 250,000th row (4 segments for 1M rows).
 *       With CLUSTERS (the approximate index's data, faiss.sh): row i is the centre
 *       i % CLUSTERS (uniform components) plus its own uniform noise of the same scale,
 *       so that each row keeps a cosine of about 0.7 with its centre: data with
 *       neighbourhoods, as embeddings of real videos have, where uniform rows have none.
 *       Prints "build_s T" and "rows_per_s R".
 *   search_bench queries OUT.npy Q DIM SEED CLUSTERS
 *       Q unit queries near the clusters of the data above (a random centre plus noise of
 *       half its scale), float32 (Q, DIM).
 *   search_bench approx DIR QUERIES.npy K KIND N EXACT.npy [EFFORT...]
 *       Builds DIR's approximate index of KIND (hnsw, ivfpq; present: the one DIR has, not
 *       built again) and times it ("approx_build_s", "approx_bytes"); then, per EFFORT (0: the default; HNSW's efSearch, IVF-PQ's
 *       nprobe), the first N queries one at a time ("approx_single_s E T1 ...") and all
 *       queries at once ("approx_batch_s E T"), and their recall@K against the exact rows
 *       EXACT.npy ((Q, K) int64, vtr's exact batch): "approx_recall E R".
 *   search_bench single DIR QUERIES.npy N K OUTDIR
 *       The first N queries, each alone (k = K), each right after one streaming read of
 *       the whole matrix (the bandwidth floor: every byte once, 32-byte loads, OpenMP
 *       threads over contiguous ranges, as the one-query search reads it). Prints the
 *       times as "floor_s T1 ..." and "single_s T1 ..."; writes OUTDIR/vtr_single_rows.npy
 *       (N, K) int64 and vtr_single_scores.npy (N, K) float32.
 *   search_bench batch DIR QUERIES.npy K OUTDIR [KERNEL]
 *       All queries at once, one run, with the default kernel ("batch_s T", "kernel K";
 *       OUTDIR/vtr_batch_rows.npy) or with the named one, sgemm, bf16-filter or amx-filter
 *       ("KERNEL_batch_s T"; OUTDIR/vtr_KERNEL_batch_rows.npy).
 *   search_bench kernels
 *       The batch kernels this CPU has besides the default, one name per line.
 * Both searches first map the pages in with one streaming pass (not timed) and time the
 * vtr_topk_search call only.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "index/approx_index.h"
#include "index/embedding_index.h"
#include "index/topk.h"
#include "lib/npy.h"

#define COMMIT_ROWS 250000
#define BATCH_ROWS 4096

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what, const vtr_error *err)
{
    fprintf(stderr, "search_bench: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
    exit(1);
}

/* ---- build ---- */

/* xorshift64*: a value in [-1, 1) with 24 bits. */
static float uniform(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (float)((int64_t)((*s * 0x2545F4914F6CDD1DULL) >> 40) - (1 << 23)) / (float)(1 << 23);
}

/* Component d of cluster centre c. */
static float centre(int64_t c, int64_t d, uint64_t seed)
{
    uint64_t s = (uint64_t)(c * 1000003 + d) * 0x9E3779B97F4A7C15ULL + seed + 1;
    uniform(&s);
    return uniform(&s);
}

static int build(const char *dir, int64_t rows, int64_t dim, uint64_t seed, int64_t clusters)
{
    vtr_error err;
    vtr_embedding_index_options opt = {.dim = dim, .model = "bench/search synthetic"};
    vtr_embedding_index_writer *w;
    if (vtr_embedding_index_writer_open(dir, &opt, &w, &err) != VTR_OK)
        die("opening the index", &err);
    float *x = malloc((size_t)(BATCH_ROWS * dim) * sizeof *x);
    char (*key_buf)[32] = malloc(BATCH_ROWS * sizeof *key_buf);
    const char **keys = malloc(BATCH_ROWS * sizeof *keys);
    if (!x || !key_buf || !keys)
        die("out of memory", NULL);
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
    double t0 = now();
    for (int64_t r0 = 0; r0 < rows; r0 += BATCH_ROWS) {
        int64_t n = rows - r0 < BATCH_ROWS ? rows - r0 : BATCH_ROWS;
        for (int64_t i = 0; i < n * dim; i++)
            x[i] = uniform(&s);
        for (int64_t i = 0; clusters > 0 && i < n; i++)
            for (int64_t d = 0; d < dim; d++)
                x[i * dim + d] += centre((r0 + i) % clusters, d, seed);
        for (int64_t i = 0; i < n; i++) {
            snprintf(key_buf[i], sizeof key_buf[i], "row%lld", (long long)(r0 + i));
            keys[i] = key_buf[i];
        }
        vtr_tensor t = {.dtype = VTR_F32, .ndim = 2, .shape = {n, dim}, .data = x};
        if (vtr_embedding_index_writer_add_batch(w, n, keys, &t, &err) != VTR_OK)
            die("adding rows", &err);
        if ((r0 + n) / COMMIT_ROWS != r0 / COMMIT_ROWS || r0 + n == rows)
            if (vtr_embedding_index_writer_commit(w, &err) != VTR_OK)
                die("committing", &err);
    }
    double t = now() - t0;
    vtr_embedding_index_writer_close(w);
    printf("build_s %.3f\nrows_per_s %.0f\n", t, (double)rows / t);
    free(x);
    free(key_buf);
    free(keys);
    return 0;
}

/* ---- the bandwidth floor ---- */

#if defined(__x86_64__)
__attribute__((target("avx2"))) static uint64_t xor_read_avx2(const unsigned char *p, size_t n)
{
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(p + i)));
        b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
        c = _mm256_xor_si256(c, _mm256_loadu_si256((const __m256i *)(p + i + 64)));
        d = _mm256_xor_si256(d, _mm256_loadu_si256((const __m256i *)(p + i + 96)));
    }
    a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, a);
    uint64_t h = lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
    for (; i < n; i++)
        h ^= p[i];
    return h;
}
#endif

/* XOR of every 64-bit word of p[0 .. n): reads every byte once. */
static uint64_t xor_read(const unsigned char *p, size_t n)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2"))
        return xor_read_avx2(p, n);
#endif
    uint64_t h = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h ^= w;
    }
    for (; i < n; i++)
        h ^= p[i];
    return h;
}

/* One pass over the matrix's parts, threads over contiguous ranges; returns seconds. */
static double stream_pass(const vtr_topk_matrix *m, uint64_t *sink)
{
    size_t row_bytes = (size_t)m->dim * 2;
    double t0 = now();
    uint64_t h = 0;
    for (int64_t p = 0; p < m->n_parts; p++) {
        const unsigned char *base = m->parts[p].data;
        int64_t rows = m->parts[p].rows;
#ifdef _OPENMP
#pragma omp parallel reduction(^ : h)
#endif
        {
#ifdef _OPENMP
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
            int t = 0, nt = 1;
#endif
            int64_t a = rows * t / nt, b = rows * (t + 1) / nt;
            h ^= xor_read(base + (size_t)a * row_bytes, (size_t)(b - a) * row_bytes);
        }
    }
    double t = now() - t0;
    *sink ^= h;
    return t;
}

/* ---- searches ---- */

static void save(const char *dir, const char *name, vtr_dtype dtype, int64_t rows, int64_t cols,
                 void *data)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    vtr_tensor t = {.dtype = dtype, .ndim = 2, .shape = {rows, cols}, .data = data};
    vtr_error err;
    if (vtr_npy_save(path, &t, 0, &err) != VTR_OK)
        die("saving results", &err);
}

typedef struct session {
    vtr_embedding_index *ix;
    const vtr_topk_matrix *m;
    vtr_npy_file queries;
    int64_t nq, dim;
} session;

/* Opens the index and the queries, and maps the pages in with one streaming pass. */
static void session_open(session *s, const char *dir, const char *queries_path)
{
    vtr_error err;
    if (vtr_embedding_index_open(dir, &s->ix, &err) != VTR_OK)
        die("opening the index", &err);
    if (vtr_npy_load(queries_path, &s->queries, &err) != VTR_OK)
        die("loading queries", &err);
    const vtr_tensor *q = &s->queries.tensor;
    if (q->dtype != VTR_F32 || q->ndim != 2 || q->shape[1] != vtr_embedding_index_dim(s->ix))
        die("queries must be (Q, D) float32 with the index's D", NULL);
    s->nq = q->shape[0];
    s->dim = q->shape[1];
    s->m = vtr_embedding_index_matrix(s->ix);
    uint64_t sink = 0;
    stream_pass(s->m, &sink);
    printf("rows %lld\ndim %lld\nsegments %lld\nthreads %d\nsink %llx\n",
           (long long)vtr_embedding_index_rows(s->ix), (long long)s->dim,
           (long long)vtr_embedding_index_segments(s->ix),
#ifdef _OPENMP
           omp_get_max_threads(),
#else
           1,
#endif
           (unsigned long long)(sink & 0xf));
}

static void session_close(session *s)
{
    vtr_npy_close(&s->queries);
    vtr_embedding_index_close(s->ix);
}

/* The first n queries one at a time, each right after a streaming pass (the floor), so
 * that both see the same machine. */
static int run_single(const char *dir, const char *queries_path, int n, int64_t k,
                      const char *outdir)
{
    session s;
    session_open(&s, dir, queries_path);
    if (n > s.nq)
        n = (int)s.nq;
    int64_t *rows = malloc((size_t)(n * k) * sizeof *rows);
    float *scores = malloc((size_t)(n * k) * sizeof *scores);
    double *floor_s = malloc((size_t)n * sizeof *floor_s);
    double *single_s = malloc((size_t)n * sizeof *single_s);
    if (!rows || !scores || !floor_s || !single_s)
        die("out of memory", NULL);
    uint64_t sink = 0;
    vtr_error err;
    for (int i = 0; i < n; i++) {
        floor_s[i] = stream_pass(s.m, &sink);
        vtr_tensor one = {.dtype = VTR_F32, .ndim = 1, .shape = {s.dim},
                          .data = (float *)s.queries.tensor.data + (size_t)i * (size_t)s.dim};
        double t0 = now();
        if (vtr_topk_search(s.m, &one, k, NULL, rows + i * k, scores + i * k, NULL, &err) !=
            VTR_OK)
            die("searching", &err);
        single_s[i] = now() - t0;
    }
    printf("floor_s");
    for (int i = 0; i < n; i++)
        printf(" %.5f", floor_s[i]);
    printf("\nsingle_s");
    for (int i = 0; i < n; i++)
        printf(" %.5f", single_s[i]);
    printf("\nsink %llx\n", (unsigned long long)(sink & 0xf));
    save(outdir, "vtr_single_rows.npy", VTR_I64, n, k, rows);
    save(outdir, "vtr_single_scores.npy", VTR_F32, n, k, scores);
    free(rows);
    free(scores);
    free(floor_s);
    free(single_s);
    session_close(&s);
    return 0;
}

/* All queries at once, one run, with the default kernel (kernel NULL) or the named one. */
static int run_batch(const char *dir, const char *queries_path, int64_t k, const char *outdir,
                     const char *kernel)
{
    vtr_topk_options opt = {.kernel = VTR_TOPK_AUTO};
    if (kernel) {
        while (opt.kernel <= VTR_TOPK_AMX_FILTER &&
               strcmp(vtr_topk_kernel_name(opt.kernel), kernel) != 0)
            opt.kernel++;
        if (opt.kernel > VTR_TOPK_AMX_FILTER || opt.kernel == VTR_TOPK_AUTO)
            die("no such kernel (sgemm, bf16-filter, amx-filter)", NULL);
    }
    session s;
    session_open(&s, dir, queries_path);
    int64_t *rows = malloc((size_t)(s.nq * k) * sizeof *rows);
    float *scores = malloc((size_t)(s.nq * k) * sizeof *scores);
    if (!rows || !scores)
        die("out of memory", NULL);
    vtr_error err;
    double t0 = now();
    if (vtr_topk_search(s.m, &s.queries.tensor, k, &opt, rows, scores, NULL, &err) != VTR_OK)
        die("searching", &err);
    double t = now() - t0;
    char name[64];
    if (kernel) {
        printf("%s_batch_s %.3f\n", kernel, t);
        snprintf(name, sizeof name, "vtr_%s_batch_rows.npy", kernel);
    } else {
        printf("batch_s %.3f\nkernel %s\n", t, vtr_topk_kernel_name(vtr_topk_batch_kernel(opt.kernel)));
        snprintf(name, sizeof name, "vtr_batch_rows.npy");
    }
    save(outdir, name, VTR_I64, s.nq, k, rows);
    free(rows);
    free(scores);
    session_close(&s);
    return 0;
}

/* Q unit queries near the clusters. */
static int make_queries(const char *path, int64_t q, int64_t dim, uint64_t seed, int64_t clusters)
{
    float *x = malloc((size_t)(q * dim) * sizeof *x);
    if (!x)
        die("out of memory", NULL);
    uint64_t s = seed * 0x2545F4914F6CDD1DULL + 99;
    for (int64_t i = 0; i < q; i++) {
        uniform(&s);
        int64_t c = (int64_t)((s >> 11) % (uint64_t)clusters);
        double n = 0;
        for (int64_t d = 0; d < dim; d++) {
            float v = centre(c, d, seed) + 0.5f * uniform(&s);
            x[i * dim + d] = v;
            n += (double)v * v;
        }
        for (int64_t d = 0; d < dim; d++)
            x[i * dim + d] = (float)(x[i * dim + d] / sqrt(n));
    }
    vtr_tensor t = {.dtype = VTR_F32, .ndim = 2, .shape = {q, dim}, .data = x};
    vtr_error err;
    if (vtr_npy_save(path, &t, 0, &err) != VTR_OK)
        die("saving queries", &err);
    free(x);
    return 0;
}

/* The approximate index: build, then single queries and the batch per effort. */
static int run_approx(const char *dir, const char *queries_path, int64_t k, const char *kind_name, int n_single, const char *exact_path, int n_efforts,
                      char **efforts)
{
    vtr_error err;
    vtr_ann_kind kind = strcmp(kind_name, "ivfpq") == 0 ? VTR_ANN_IVFPQ : VTR_ANN_HNSW;
    session s;
    session_open(&s, dir, queries_path);
    vtr_npy_file exact;
    if (vtr_npy_load(exact_path, &exact, &err) != VTR_OK)
        die("loading the exact rows", &err);
    if (exact.tensor.dtype != VTR_I64 || exact.tensor.ndim != 2 ||
        exact.tensor.shape[0] != s.nq || exact.tensor.shape[1] != k)
        die("the exact rows must be (Q, K) int64", NULL);
    double t0 = now();
    if (strcmp(kind_name, "present") != 0 && vtr_approx_index_build(s.ix, dir, kind, &err) != VTR_OK)
        die("building the approximate index", &err);
    printf("approx_kind %s\napprox_build_s %.3f\n", kind_name, now() - t0);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, VTR_APPROX_FILE);
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0)
        die("the approximate index's size", NULL);
    printf("approx_bytes %ld\n", ftell(f));
    fclose(f);
    vtr_approx_index *a;
    t0 = now();
    if (vtr_approx_index_open(dir, &a, &err) != VTR_OK)
        die("opening the approximate index", &err);
    printf("approx_open_s %.3f\n", now() - t0);
    if (n_single > s.nq)
        n_single = (int)s.nq;
    int64_t *rows = malloc((size_t)(s.nq * k) * sizeof *rows);
    float *scores = malloc((size_t)(s.nq * k) * sizeof *scores);
    if (!rows || !scores)
        die("out of memory", NULL);
    for (int e = 0; e < (n_efforts ? n_efforts : 1); e++) {
        int effort = n_efforts ? atoi(efforts[e]) : 0;
        vtr_approx_search_options opt = {.effort = effort};
        printf("approx_single_s %d", effort);
        for (int i = 0; i < n_single; i++) {
            vtr_tensor one = {.dtype = VTR_F32, .ndim = 1, .shape = {s.dim},
                              .data = (float *)s.queries.tensor.data + (size_t)i * (size_t)s.dim};
            double t1 = now();
            if (vtr_approx_search(a, s.ix, &one, k, &opt, rows + i * k, scores + i * k, NULL,
                                  &err) != VTR_OK)
                die("searching", &err);
            printf(" %.5f", now() - t1);
        }
        printf("\napprox_single_recall %d %.4f\n", effort,
               vtr_recall_at_k(rows, exact.tensor.data, n_single, k));
        double t1 = now();
        if (vtr_approx_search(a, s.ix, &s.queries.tensor, k, &opt, rows, scores, NULL, &err) !=
            VTR_OK)
            die("searching", &err);
        printf("approx_batch_s %d %.3f\n", effort, now() - t1);
        printf("approx_recall %d %.4f\n", effort, vtr_recall_at_k(rows, exact.tensor.data, s.nq, k));
    }
    free(rows);
    free(scores);
    vtr_approx_index_close(a);
    vtr_npy_close(&exact);
    session_close(&s);
    return 0;
}

int main(int argc, char **argv)
{
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "build") == 0)
        return build(argv[2], atoll(argv[3]), atoll(argv[4]), (uint64_t)atoll(argv[5]),
                     argc == 7 ? atoll(argv[6]) : 0);
    if (argc == 7 && strcmp(argv[1], "queries") == 0)
        return make_queries(argv[2], atoll(argv[3]), atoll(argv[4]), (uint64_t)atoll(argv[5]),
                            atoll(argv[6]));
    if (argc >= 8 && strcmp(argv[1], "approx") == 0)
        return run_approx(argv[2], argv[3], atoll(argv[4]), argv[5], atoi(argv[6]), argv[7],
                          argc - 8, argv + 8);
    if (argc == 7 && strcmp(argv[1], "single") == 0)
        return run_single(argv[2], argv[3], atoi(argv[4]), atoll(argv[5]), argv[6]);
    if (argc == 2 && strcmp(argv[1], "kernels") == 0) {
        for (vtr_topk_kernel k = VTR_TOPK_SGEMM; k <= VTR_TOPK_AMX_FILTER; k++)
            if (k != vtr_topk_batch_kernel(VTR_TOPK_AUTO) && vtr_topk_have_kernel(k))
                printf("%s\n", vtr_topk_kernel_name(k));
        return 0;
    }
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "batch") == 0)
        return run_batch(argv[2], argv[3], atoll(argv[4]), argv[5], argc == 7 ? argv[6] : NULL);
    fprintf(stderr, "usage: search_bench build DIR ROWS DIM SEED [CLUSTERS]\n"
                    "       search_bench queries OUT.npy Q DIM SEED CLUSTERS\n"
                    "       search_bench approx DIR QUERIES.npy K KIND N EXACT.npy "
                    "[EFFORT...]\n"
                    "       search_bench single DIR QUERIES.npy N K OUTDIR\n"
                    "       search_bench batch DIR QUERIES.npy K OUTDIR [KERNEL]\n"
                    "       search_bench kernels\n");
    return 2;
}
