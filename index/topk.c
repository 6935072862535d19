/* Exact top-k: the fused (bandwidth-bound) and batched (bfloat16 filters, sgemm) paths of
 * topk.h. */
#define _GNU_SOURCE /* syscall */
#include "topk.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/device.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif
#define TOPK_X86 1
#define TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
#endif

#define DEFAULT_BATCH_MIN 32      /* the measured crossovers of the paths (topk.h) */
#define DEFAULT_BATCH_MIN_BF16 12
#define DEFAULT_BATCH_MIN_AMX 14
#define DEFAULT_BLOCK_ROWS 8192
#define QUERY_CHUNK 1024       /* queries per sgemm in the batched path */
#define FUSED_QUERIES 4        /* queries per pass of the fused path */
#define PREFETCH_ROWS 4        /* rows ahead that the AVX-512 fused kernel prefetches */
#define FUSED_BLOCK 256        /* rows scored per selection round of the fused path */
#define ROWS_PER_THREAD 1024   /* fewer rows per thread than this: fewer threads */

/* ---- order and heaps ---- */

typedef struct hit {
    float score;
    int64_t row;
} hit;

static inline bool ranks_before(float sa, int64_t ra, float sb, int64_t rb)
{
    return vtr_topk_ranks_before(sa, ra, sb, rb);
}

static int cmp_hits(const void *a, const void *b)
{
    const hit *x = a, *y = b;
    if (ranks_before(x->score, x->row, y->score, y->row))
        return -1;
    return ranks_before(y->score, y->row, x->score, x->row) ? 1 : 0;
}

/* A bounded heap whose root is the worst of the (at most cap) best hits seen. */
typedef struct heap {
    hit *e;
    int64_t n, cap;
} heap;

static inline bool worse(const hit *a, const hit *b)
{
    return ranks_before(b->score, b->row, a->score, a->row);
}

static void sift_up(hit *e, int64_t i)
{
    hit x = e[i];
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!worse(&x, &e[p]))
            break;
        e[i] = e[p];
        i = p;
    }
    e[i] = x;
}

static void sift_down(hit *e, int64_t n, int64_t i)
{
    hit x = e[i];
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && worse(&e[c + 1], &e[c]))
            c++;
        if (!worse(&e[c], &x))
            break;
        e[i] = e[c];
        i = c;
    }
    e[i] = x;
}

static inline void heap_offer(heap *h, float score, int64_t row)
{
    if (h->n < h->cap) {
        h->e[h->n] = (hit){score, row};
        sift_up(h->e, h->n++);
    } else if (ranks_before(score, row, h->e[0].score, h->e[0].row)) {
        h->e[0] = (hit){score, row};
        sift_down(h->e, h->n, 0);
    }
}

/* Offers the scores s[0 .. n) of rows row0 .. row0 + n - 1 to h. Once h is full, a score
 * below the root's (or NaN) cannot enter, which a cheap comparison rules out for nearly
 * every row; the full order decides the rest. */
static void heap_offer_block(heap *h, const float *s, int64_t n, int64_t row0,
                             const uint64_t *skip)
{
    int64_t j = 0;
    for (; j < n && h->n < h->cap; j++)
        if (!vtr_topk_skipped(skip, row0 + j))
            heap_offer(h, s[j], row0 + j);
    if (j == n || h->cap == 0)
        return;
    if (isnan(h->e[0].score)) { /* every number ranks before the root: no shortcut */
        for (; j < n; j++)
            if (!vtr_topk_skipped(skip, row0 + j))
                heap_offer(h, s[j], row0 + j);
        return;
    }
    float thr = h->e[0].score; /* a number from here on: NaN never enters a full heap */
    for (; j + 8 <= n; j += 8) {
        int any = 0;
        for (int t = 0; t < 8; t++)
            any |= s[j + t] >= thr;
        if (!any)
            continue;
        for (int t = 0; t < 8; t++)
            if (s[j + t] >= thr && !vtr_topk_skipped(skip, row0 + j + t)) {
                heap_offer(h, s[j + t], row0 + j + t);
                thr = h->e[0].score;
            }
    }
    for (; j < n; j++)
        if (s[j] >= thr && !vtr_topk_skipped(skip, row0 + j)) {
            heap_offer(h, s[j], row0 + j);
            thr = h->e[0].score;
        }
}

/* Writes a query's k results: the union of its heaps heaps[t * stride], t < n_threads,
 * sorted in the total order, the first cap of them, then -1 / -inf. The union of the
 * threads' top lists holds the top list, so the result does not depend on the number of
 * threads. merged: room for n_threads * cap hits (unused when n_threads is 1). */
static void emit_merged(heap *heaps, int n_threads, size_t stride, int64_t cap, int64_t k,
                        hit *merged, int64_t *rows, float *scores)
{
    int64_t n = 0;
    if (n_threads == 1) {
        merged = heaps[0].e;
        n = heaps[0].n;
    } else {
        for (int t = 0; t < n_threads; t++) {
            const heap *h = &heaps[(size_t)t * stride];
            memcpy(merged + n, h->e, (size_t)h->n * sizeof *merged);
            n += h->n;
        }
    }
    qsort(merged, (size_t)n, sizeof *merged, cmp_hits);
    if (n > cap)
        n = cap;
    for (int64_t i = 0; i < k; i++) {
        rows[i] = i < n ? merged[i].row : -1;
        scores[i] = i < n ? merged[i].score : -INFINITY;
    }
}

vtr_status vtr_topk_select(const float *scores, const int64_t *rows, int64_t n, int64_t k,
                           int64_t *out_rows, float *out_scores, int64_t *count,
                           vtr_error *err)
{
    heap h = {.e = malloc((size_t)(k > 0 ? k : 1) * sizeof *h.e), .cap = k > 0 ? k : 0};
    if (!h.e)
        return vtr_fail(err, VTR_ERR_NOMEM, "top-k: out of memory for %lld results",
                        (long long)k);
    for (int64_t i = 0; i < n; i++)
        if (rows[i] >= 0)
            heap_offer(&h, scores[i], rows[i]);
    *count = h.n;
    emit_merged(&h, 1, 1, h.n, k, NULL, out_rows, out_scores);
    free(h.e);
    return VTR_OK;
}

/* ---- the matrix ---- */

int64_t vtr_topk_matrix_live_rows(const vtr_topk_matrix *m)
{
    int64_t n = 0;
    for (int64_t p = 0; p < m->n_parts; p++)
        n += m->parts[p].rows;
    if (!m->skip)
        return n;
    int64_t skipped = 0;
    for (int64_t w = 0; w < n / 64; w++)
        skipped += __builtin_popcountll(m->skip[w]);
    if (n % 64)
        skipped += __builtin_popcountll(m->skip[n / 64] & ((UINT64_C(1) << (n % 64)) - 1));
    return n - skipped;
}

/* The parts with their first global rows; first[n_parts] is N. */
typedef struct row_map {
    const vtr_topk_matrix *m;
    int64_t *first; /* (n_parts + 1) */
    size_t elem;    /* bytes per element */
} row_map;

/* The part holding global row r (0 <= r < N): the last p with first[p] <= r and rows > 0. */
static int64_t part_of(const row_map *map, int64_t r)
{
    int64_t lo = 0, hi = map->m->n_parts - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (map->first[mid] <= r)
            lo = mid;
        else
            hi = mid - 1;
    }
    while (map->m->parts[lo].rows == 0 || map->first[lo + 1] <= r) /* empty parts */
        lo++;
    return lo;
}

/* Pointer to global row r and the number of rows from r to the end of its part. */
static const void *row_ptr(const row_map *map, int64_t r, int64_t *run)
{
    int64_t p = part_of(map, r);
    const vtr_topk_part *part = &map->m->parts[p];
    int64_t local = r - map->first[p];
    *run = part->rows - local;
    return (const char *)part->data + (size_t)local * (size_t)map->m->dim * map->elem;
}

/* ---- kernels ---- */

#ifdef TOPK_X86
static bool cpu_has_avx2_fma_f16c(void)
{
    static int cached = -1;
    int c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (c < 0) {
        unsigned a, b, cx, d;
        bool f16c = __get_cpuid(1, &a, &b, &cx, &d) && (cx & (1u << 29));
        c = f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        __atomic_store_n(&cached, c, __ATOMIC_RELAXED);
    }
    return c;
}

static bool cpu_has_avx512(void)
{
    return cpu_has_avx2_fma_f16c() && __builtin_cpu_supports("avx512f");
}

TARGET_AVX512 static inline __m512 load16(const void *p, bool half)
{
    return half ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p))
                : _mm512_loadu_ps((const float *)p);
}
#endif

/* Widens n float16 values to float32. */
#ifdef TOPK_X86
TARGET_AVX2 static void widen_f16_avx2(const uint16_t *src, float *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++)
        dst[i] = vtr_half_to_float(src[i]);
}
#endif

static void widen_f16(const uint16_t *src, float *dst, int64_t n)
{
#ifdef TOPK_X86
    if (cpu_has_avx2_fma_f16c()) {
        widen_f16_avx2(src, dst, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        dst[i] = vtr_half_to_float(src[i]);
}

#ifdef TOPK_X86
TARGET_AVX2 static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

TARGET_AVX2 static inline __m256 load8(const void *p, bool half)
{
    return half ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p))
                : _mm256_loadu_ps((const float *)p);
}

TARGET_AVX2 static inline float elem(const void *p, int64_t d, bool half)
{
    return half ? vtr_half_to_float(((const uint16_t *)p)[d]) : ((const float *)p)[d];
}

/* out[i * ldo + r] = row r . query i for rows r < n and queries i < nq (1 .. 4), rows of
 * float16 (half) or float32. Every (row, query) is added in the same order whatever nq:
 * two 8-lane accumulators over 16-column steps, an 8-column remainder into the first,
 * their sum reduced (hsum8), then the last dim % 8 columns one by one. Rows are read
 * strictly in order, one at a time: interleaving two rows for more FMA chains in flight
 * is faster in cache but defeats the hardware prefetcher (a third of the bandwidth from
 * memory on the benchmark machine). */
TARGET_AVX2 static inline __attribute__((always_inline)) void
dots_avx2(const void *rows, int64_t n, int64_t dim, const float *q, int64_t ldq, int nq,
          float *out, int64_t ldo, bool half)
{
    size_t esz = half ? 2 : 4, rbytes = (size_t)dim * esz;
    int64_t d16 = dim / 16 * 16, d8 = dim / 8 * 8;
    for (int64_t r = 0; r < n; r++) {
        const char *x = (const char *)rows + (size_t)r * rbytes;
        __m256 acc[FUSED_QUERIES][2];
        /* nq is a constant here (see the callers): the loops over it unroll and acc
         * lives in registers */
#pragma GCC unroll 4
        for (int i = 0; i < nq; i++)
            acc[i][0] = acc[i][1] = _mm256_setzero_ps();
        for (int64_t d = 0; d < d16; d += 16) {
            __m256 x0 = load8(x + d * esz, half), x1 = load8(x + (d + 8) * esz, half);
#pragma GCC unroll 4
            for (int i = 0; i < nq; i++) {
                acc[i][0] = _mm256_fmadd_ps(x0, _mm256_loadu_ps(q + i * ldq + d), acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(x1, _mm256_loadu_ps(q + i * ldq + d + 8), acc[i][1]);
            }
        }
        if (d8 > d16) {
            __m256 x0 = load8(x + d16 * esz, half);
#pragma GCC unroll 4
            for (int i = 0; i < nq; i++)
                acc[i][0] = _mm256_fmadd_ps(x0, _mm256_loadu_ps(q + i * ldq + d16), acc[i][0]);
        }
#pragma GCC unroll 4
        for (int i = 0; i < nq; i++) {
            float s = hsum8(_mm256_add_ps(acc[i][0], acc[i][1]));
            for (int64_t d = d8; d < dim; d++)
                s += elem(x, d, half) * q[i * ldq + d];
            out[i * ldo + r] = s;
        }
    }
}

TARGET_AVX2 static void dots_f16_avx2(const void *rows, int64_t n, int64_t dim, const float *q,
                                      int64_t ldq, int nq, float *out, int64_t ldo)
{
    switch (nq) {
    case 1: dots_avx2(rows, n, dim, q, ldq, 1, out, ldo, true); break;
    case 2: dots_avx2(rows, n, dim, q, ldq, 2, out, ldo, true); break;
    case 3: dots_avx2(rows, n, dim, q, ldq, 3, out, ldo, true); break;
    default: dots_avx2(rows, n, dim, q, ldq, 4, out, ldo, true); break;
    }
}

TARGET_AVX2 static void dots_f32_avx2(const void *rows, int64_t n, int64_t dim, const float *q,
                                      int64_t ldq, int nq, float *out, int64_t ldo)
{
    switch (nq) {
    case 1: dots_avx2(rows, n, dim, q, ldq, 1, out, ldo, false); break;
    case 2: dots_avx2(rows, n, dim, q, ldq, 2, out, ldo, false); break;
    case 3: dots_avx2(rows, n, dim, q, ldq, 3, out, ldo, false); break;
    default: dots_avx2(rows, n, dim, q, ldq, 4, out, ldo, false); break;
    }
}

/* As dots_avx2, with AVX-512: four 16-lane accumulators over 64-column steps (a longer
 * chain of independent FMAs, so that one query's pass is bound by memory, not by the FMA
 * latency), the 16-column steps of the remainder into accumulators 0, 1, 2 in turn, the
 * sum (a0 + a1) + (a2 + a3) reduced, then the last dim % 16 columns one by one. Each step
 * also prefetches the same columns PREFETCH_ROWS rows ahead: the hardware prefetcher of
 * the benchmark VM alone left a query at 1.28x the bandwidth floor, 1.02x with this
 * (bench/RESULTS.md). A prefetch past the last row is harmless: prefetches never fault. */
TARGET_AVX512 static inline __attribute__((always_inline)) void
dots_avx512(const void *rows, int64_t n, int64_t dim, const float *q, int64_t ldq, int nq,
            float *out, int64_t ldo, bool half)
{
    size_t esz = half ? 2 : 4, rbytes = (size_t)dim * esz;
    int64_t d64 = dim / 64 * 64, d16 = dim / 16 * 16;
    for (int64_t r = 0; r < n; r++) {
        const char *x = (const char *)rows + (size_t)r * rbytes;
        __m512 acc[FUSED_QUERIES][4];
#pragma GCC unroll 4
        for (int i = 0; i < nq; i++)
            acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = _mm512_setzero_ps();
        for (int64_t d = 0; d < d64; d += 64) {
            __m512 x0 = load16(x + d * esz, half), x1 = load16(x + (d + 16) * esz, half);
            __m512 x2 = load16(x + (d + 32) * esz, half), x3 = load16(x + (d + 48) * esz, half);
            _mm_prefetch(x + PREFETCH_ROWS * rbytes + d * esz, _MM_HINT_T0);
            _mm_prefetch(x + PREFETCH_ROWS * rbytes + d * esz + 64, _MM_HINT_T0);
            if (!half) {
                _mm_prefetch(x + PREFETCH_ROWS * rbytes + d * esz + 128, _MM_HINT_T0);
                _mm_prefetch(x + PREFETCH_ROWS * rbytes + d * esz + 192, _MM_HINT_T0);
            }
#pragma GCC unroll 4
            for (int i = 0; i < nq; i++) {
                const float *qi = q + i * ldq + d;
                acc[i][0] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(qi), acc[i][0]);
                acc[i][1] = _mm512_fmadd_ps(x1, _mm512_loadu_ps(qi + 16), acc[i][1]);
                acc[i][2] = _mm512_fmadd_ps(x2, _mm512_loadu_ps(qi + 32), acc[i][2]);
                acc[i][3] = _mm512_fmadd_ps(x3, _mm512_loadu_ps(qi + 48), acc[i][3]);
            }
        }
        for (int64_t d = d64; d < d16; d += 16) {
            __m512 x0 = load16(x + d * esz, half);
            int a = (int)((d - d64) / 16);
#pragma GCC unroll 4
            for (int i = 0; i < nq; i++)
                acc[i][a] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(q + i * ldq + d), acc[i][a]);
        }
#pragma GCC unroll 4
        for (int i = 0; i < nq; i++) {
            float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]),
                                                         _mm512_add_ps(acc[i][2], acc[i][3])));
            for (int64_t d = d16; d < dim; d++)
                s += elem(x, d, half) * q[i * ldq + d];
            out[i * ldo + r] = s;
        }
    }
}

TARGET_AVX512 static void dots_f16_avx512(const void *rows, int64_t n, int64_t dim,
                                          const float *q, int64_t ldq, int nq, float *out,
                                          int64_t ldo)
{
    switch (nq) {
    case 1: dots_avx512(rows, n, dim, q, ldq, 1, out, ldo, true); break;
    case 2: dots_avx512(rows, n, dim, q, ldq, 2, out, ldo, true); break;
    case 3: dots_avx512(rows, n, dim, q, ldq, 3, out, ldo, true); break;
    default: dots_avx512(rows, n, dim, q, ldq, 4, out, ldo, true); break;
    }
}

TARGET_AVX512 static void dots_f32_avx512(const void *rows, int64_t n, int64_t dim,
                                          const float *q, int64_t ldq, int nq, float *out,
                                          int64_t ldo)
{
    switch (nq) {
    case 1: dots_avx512(rows, n, dim, q, ldq, 1, out, ldo, false); break;
    case 2: dots_avx512(rows, n, dim, q, ldq, 2, out, ldo, false); break;
    case 3: dots_avx512(rows, n, dim, q, ldq, 3, out, ldo, false); break;
    default: dots_avx512(rows, n, dim, q, ldq, 4, out, ldo, false); break;
    }
}
#endif

/* The portable kernel: each row widened into tmp (dim floats), then plain dot products. */
static void dots_portable(const void *rows, int64_t n, int64_t dim, const float *q, int64_t ldq,
                          int nq, float *out, int64_t ldo, bool half, float *tmp)
{
    for (int64_t r = 0; r < n; r++) {
        const float *x;
        if (half) {
            widen_f16((const uint16_t *)rows + (size_t)r * (size_t)dim, tmp, dim);
            x = tmp;
        } else {
            x = (const float *)rows + (size_t)r * (size_t)dim;
        }
        for (int i = 0; i < nq; i++) {
            float s = 0;
            for (int64_t d = 0; d < dim; d++)
                s += x[d] * q[i * ldq + d];
            out[i * ldo + r] = s;
        }
    }
}

static void dots(const void *rows, int64_t n, int64_t dim, const float *q, int64_t ldq, int nq,
                 float *out, int64_t ldo, bool half, float *tmp)
{
#ifdef TOPK_X86
    if (cpu_has_avx512()) {
        if (half)
            dots_f16_avx512(rows, n, dim, q, ldq, nq, out, ldo);
        else
            dots_f32_avx512(rows, n, dim, q, ldq, nq, out, ldo);
        return;
    }
    if (cpu_has_avx2_fma_f16c()) {
        if (half)
            dots_f16_avx2(rows, n, dim, q, ldq, nq, out, ldo);
        else
            dots_f32_avx2(rows, n, dim, q, ldq, nq, out, ldo);
        return;
    }
#endif
    dots_portable(rows, n, dim, q, ldq, nq, out, ldo, half, tmp);
}

/* ---- the fused path ---- */

static int max_threads(int requested)
{
#ifdef _OPENMP
    return requested > 0 ? requested : omp_get_max_threads();
#else
    (void)requested;
    return 1;
#endif
}

static vtr_status search_fused(const row_map *map, int64_t n_rows, const float *queries,
                               int64_t n_queries, int64_t k, int64_t cap, int threads,
                               int64_t *rows_out, float *scores_out, vtr_error *err)
{
    const vtr_topk_matrix *m = map->m;
    int64_t dim = m->dim;
    bool half = m->dtype == VTR_F16;
    int n_threads = max_threads(threads);
    if (n_threads > n_rows / ROWS_PER_THREAD)
        n_threads = n_rows / ROWS_PER_THREAD > 0 ? (int)(n_rows / ROWS_PER_THREAD) : 1;
    size_t n_heaps = (size_t)n_threads * FUSED_QUERIES;
    size_t cap_alloc = cap > 0 ? (size_t)cap : 1;
    hit *hits = malloc(n_heaps * cap_alloc * sizeof *hits);
    heap *heaps = calloc(n_heaps, sizeof *heaps);
    float *buf = malloc((size_t)n_threads * ((size_t)FUSED_QUERIES * FUSED_BLOCK + (size_t)dim) *
                        sizeof *buf);
    hit *merged = malloc(n_heaps / FUSED_QUERIES * cap_alloc * sizeof *merged);
    vtr_status st = VTR_OK;
    if (!hits || !heaps || !buf || !merged) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "top-k: out of memory for %d threads x %d heaps of %lld",
                      n_threads, FUSED_QUERIES, (long long)cap);
        goto end;
    }

    for (int64_t q0 = 0; q0 < n_queries; q0 += FUSED_QUERIES) {
        int nq = n_queries - q0 < FUSED_QUERIES ? (int)(n_queries - q0) : FUSED_QUERIES;
        const float *q = queries + (size_t)q0 * (size_t)dim;
        for (size_t h = 0; h < n_heaps; h++)
            heaps[h] = (heap){hits + h * cap_alloc, 0, cap};
#ifdef _OPENMP
#pragma omp parallel num_threads(n_threads)
#endif
        {
#ifdef _OPENMP
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
            int t = 0, nt = 1;
#endif
            float *sbuf = buf + (size_t)t * ((size_t)FUSED_QUERIES * FUSED_BLOCK + (size_t)dim);
            float *tmp = sbuf + (size_t)FUSED_QUERIES * FUSED_BLOCK;
            heap *mine = heaps + (size_t)t * FUSED_QUERIES;
            int64_t r = n_rows * t / nt, end = n_rows * (t + 1) / nt;
            while (r < end) {
                int64_t run;
                const void *x = row_ptr(map, r, &run);
                int64_t n = end - r < run ? end - r : run;
                if (n > FUSED_BLOCK)
                    n = FUSED_BLOCK;
                dots(x, n, dim, q, dim, nq, sbuf, FUSED_BLOCK, half, tmp);
                for (int i = 0; i < nq; i++)
                    heap_offer_block(&mine[i], sbuf + (size_t)i * FUSED_BLOCK, n, r, m->skip);
                r += n;
            }
        }
        for (int i = 0; i < nq; i++)
            emit_merged(&heaps[i], n_threads, FUSED_QUERIES, cap, k, merged,
                        rows_out + (size_t)(q0 + i) * (size_t)k,
                        scores_out + (size_t)(q0 + i) * (size_t)k);
    }
end:
    free(hits);
    free(heaps);
    free(buf);
    free(merged);
    return st;
}

/* ---- the batched path ---- */

/* Makes block rows [r0, r0 + n) available as float32, (n, dim): a pointer into the
 * matrix when they are float32 in one part, else widened or copied into buf. On the
 * calling thread: it costs a fraction of the product, and an OpenMP team here would first
 * wait for the BLAS threads (which spin a while after each product) to yield the cores,
 * which measured slower and far more variable. */
static const float *block_f32(const row_map *map, int64_t r0, int64_t n, float *buf)
{
    const vtr_topk_matrix *m = map->m;
    int64_t dim = m->dim;
    int64_t run;
    const void *first = row_ptr(map, r0, &run);
    if (m->dtype == VTR_F32 && run >= n)
        return first;
    for (int64_t r = r0; r < r0 + n;) {
        int64_t len;
        const void *x = row_ptr(map, r, &len);
        if (len > r0 + n - r)
            len = r0 + n - r;
        float *dst = buf + (size_t)(r - r0) * (size_t)dim;
        if (m->dtype == VTR_F16)
            widen_f16(x, dst, len * dim);
        else
            memcpy(dst, x, (size_t)(len * dim) * sizeof *dst);
        r += len;
    }
    return buf;
}

static vtr_status search_batched(const row_map *map, int64_t n_rows, const float *queries,
                                 int64_t n_queries, int64_t k, int64_t cap,
                                 const vtr_topk_options *opt, int64_t *rows_out,
                                 float *scores_out, vtr_error *err)
{
    const vtr_topk_matrix *m = map->m;
    int64_t dim = m->dim;
    int n_threads = max_threads(opt->threads);
    (void)n_threads; /* used by the OpenMP pragmas only */
    int64_t block = opt->block_rows > 0 ? opt->block_rows : DEFAULT_BLOCK_ROWS;
    if (block > n_rows)
        block = n_rows;
    if (block > INT_MAX / 2)
        block = INT_MAX / 2;
    int64_t chunk = n_queries < QUERY_CHUNK ? n_queries : QUERY_CHUNK;
    size_t cap_alloc = cap > 0 ? (size_t)cap : 1;
    hit *hits = malloc((size_t)n_queries * cap_alloc * sizeof *hits);
    heap *heaps = malloc((size_t)n_queries * sizeof *heaps);
    float *buf = malloc((size_t)block * (size_t)dim * sizeof *buf);
    float *S = malloc((size_t)chunk * (size_t)block * sizeof *S);
    vtr_status st = VTR_OK;
    if (!hits || !heaps || !buf || !S) {
        st = vtr_fail(err, VTR_ERR_NOMEM,
                      "top-k: out of memory for %lld heaps of %lld and a block of %lld rows",
                      (long long)n_queries, (long long)cap, (long long)block);
        goto end;
    }
    for (int64_t i = 0; i < n_queries; i++)
        heaps[i] = (heap){hits + (size_t)i * cap_alloc, 0, cap};

    for (int64_t r0 = 0; r0 < n_rows; r0 += block) {
        int64_t n = n_rows - r0 < block ? n_rows - r0 : block;
        const float *x = block_f32(map, r0, n, buf);
        for (int64_t q0 = 0; q0 < n_queries; q0 += chunk) {
            int64_t nq = n_queries - q0 < chunk ? n_queries - q0 : chunk;
            // S (nq, n) = queries[q0 ..] (nq, dim) · x (n, dim)ᵀ
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)n, (int)dim, 1.0f,
                        queries + (size_t)q0 * (size_t)dim, (int)dim, x, (int)dim, 0.0f, S,
                        (int)n);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(n_threads)
#endif
            for (int64_t i = 0; i < nq; i++)
                heap_offer_block(&heaps[q0 + i], S + (size_t)i * (size_t)n, n, r0, m->skip);
        }
    }
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(n_threads)
#endif
    for (int64_t i = 0; i < n_queries; i++)
        emit_merged(&heaps[i], 1, 0, cap, k, NULL, rows_out + (size_t)i * (size_t)k,
                    scores_out + (size_t)i * (size_t)k);
end:
    free(hits);
    free(heaps);
    free(buf);
    free(S);
    return st;
}

/* ---- the batched path with a bfloat16 filter (AVX512-BF16) ----
 *
 * Approximate scores s' come from rows and queries rounded to bfloat16 and multiplied with
 * VDPBF16PS (products exact in float32, accumulated in float32; twice the multiply rate
 * of float32 FMAs). Every row whose s' could belong to the top k is scored again exactly
 * (the fused path's kernel) and offered to the heap; so the result is exact, with the
 * fused path's scores. A row is rescored unless s' + B < T, with T the current k-th best
 * exact score of the thread's heap for that query (it only rises, so no row of the final
 * top k is dropped) and B a bound on |s' - s| where s is the exact float32 score:
 *   rounding to bfloat16 changes each factor by at most 2^-8 relatively, so each product
 *   by at most (2^-7 + 2^-16)|q_d x_d|; the two float32 sums (s' and s) each err by at
 *   most gamma_D sum_d |q_d x_d|, gamma_D = D u / (1 - D u), u = 2^-24; and
 *   sum_d |q_d x_d| <= ||q|| ||x||. Flushing of values below 2^-126 (the instruction
 *   flushes denormals) adds at most sqrt(D) 2^-126 ||x|| (query elements) and D 2^-126
 *   (products). So B = ||x|| (C ||q|| + sqrt(D) 2^-125) + D 2^-125, with
 *   C = 1.01 (2^-7 + 2^-16 + 2 gamma_D) (the 1% covers the second-order terms and the
 *   float32 rounding of the comparison) and the norms rounded up by 0.1% + gamma_D.
 * Non-finite values make B or s' infinite or NaN, and the comparison (not-less-than,
 * true for NaN) then rescores the row. For unit vectors B is about 0.008: on random data
 * a query rescores a few hundred of a million rows.
 *
 * Threads take contiguous ranges of rows, like the fused path; a thread packs 8 tiles of
 * 32 rows at a time into bfloat16 pairs, column pair by column pair (the operand layout
 * of VDPBF16PS, one 32-bit lane = two adjacent columns of one row, which is also
 * TDPBF16PS's for its second operand), then takes the queries group by group, each group
 * meeting the 8 tiles while it stays in cache: 12 queries in 24 accumulators with
 * VDPBF16PS, or 32 queries in four 16 x 16 tiles of scores with AMX; and filters.
 * Per-thread heaps are merged as in the fused path. */

#define BF16_ROWS 32    /* rows per tile: two 16-lane accumulators per query */
#define BF16_QUERIES 12 /* queries per tile pass: 24 accumulators of the 32 registers */
#define AMX_QUERIES 32  /* queries per tile pass with AMX: two tiles of 16 */
#define BF16_BLOCK 8    /* tiles packed at a time, each query group meets them in turn */

#ifdef TOPK_X86
#define TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c")))

static bool cpu_has_avx512_bf16(void)
{
    static int cached = -1;
    int c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (c < 0) {
        unsigned a = 0, b, cx, d;
        bool bf16 = __get_cpuid_count(7, 1, &a, &b, &cx, &d) && (a & (1u << 5));
        c = bf16 && cpu_has_avx2_fma_f16c() && __builtin_cpu_supports("avx512f") &&
            __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
        __atomic_store_n(&cached, c, __ATOMIC_RELAXED);
    }
    return c;
}

#define TARGET_AMX __attribute__((target("amx-tile,amx-bf16,avx512f")))

/* Whether this CPU has AMX-BF16 and the kernel lets this process use its tiles (Linux
 * asks each process to request them: arch_prctl ARCH_REQ_XCOMP_PERM), besides the bfloat16
 * filter's own instructions, which pack the rows. */
static bool cpu_has_amx_bf16(void)
{
    static int cached = -1;
    int c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (c < 0) {
        unsigned a, b, cx, d = 0;
        bool amx = __get_cpuid_count(7, 0, &a, &b, &cx, &d) && (d & (1u << 22)) &&
                   (d & (1u << 24)) && cpu_has_avx512_bf16();
#ifdef __linux__
        /* ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA (asm/prctl.h; not in every libc) */
        amx = amx && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#else
        amx = false;
#endif
        c = amx;
        __atomic_store_n(&cached, c, __ATOMIC_RELAXED);
    }
    return c;
}

/* Converts n (a multiple of 32) floats to bfloat16 (round to nearest even). */
TARGET_BF16 static void to_bf16(const float *src, uint16_t *dst, int64_t n)
{
    for (int64_t d = 0; d < n; d += 32) {
        __m512bh b = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + d + 16), _mm512_loadu_ps(src + d));
        _mm512_storeu_si512((void *)(dst + d), (__m512i)b);
    }
}

/* Rounds a row of dim float16 (half) or float32 values to bfloat16 in dst, zero up to
 * dpad (a multiple of 32), in one pass; returns the row's sum of squares in float32. */
TARGET_BF16 static float row_to_bf16(const void *x, int64_t dim, bool half, int64_t dpad,
                                     uint16_t *dst)
{
    __m512 acc = _mm512_setzero_ps();
    size_t esz = half ? 2 : 4;
    const char *ahead = (const char *)x + PREFETCH_ROWS * (size_t)dim * esz;
    for (int64_t d = 0; d < dpad; d += 32) {
        for (size_t b = 0; b < 32 * esz; b += 64) /* see dots_avx512 */
            _mm_prefetch(ahead + (size_t)d * esz + b, _MM_HINT_T0);
        __m512 v[2];
        for (int h = 0; h < 2; h++) {
            int64_t c = d + 16 * h, left = dim - c;
            __mmask16 mask = left >= 16 ? 0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
            v[h] = half ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, (const uint16_t *)x + c))
                        : _mm512_maskz_loadu_ps(mask, (const float *)x + c);
            acc = _mm512_fmadd_ps(v[h], v[h], acc);
        }
        _mm512_storeu_si512((void *)(dst + d), (__m512i)_mm512_cvtne2ps_pbh(v[1], v[0]));
    }
    return _mm512_reduce_add_ps(acc);
}

/* Transposes the 16 x 16 matrix of 32-bit elements whose rows are a[0 .. 15]. */
TARGET_BF16 static void transpose16(__m512i a[16])
{
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) { /* t: pairs of rows interleaved per 32 bits */
        t[i] = _mm512_unpacklo_epi32(a[i], a[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(a[i], a[i + 1]);
    }
    /* u[4g + c], 128-bit lane L: elements 4L + c of rows 4g .. 4g + 3 */
    for (int g = 0; g < 4; g++) {
        u[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
        u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
    }
    /* row 4L + c of the result: lane L of u[c], u[4 + c], u[8 + c], u[12 + c] */
    for (int c = 0; c < 4; c++) {
        __m512i w0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
        __m512i w1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
        __m512i w2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
        __m512i w3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
        a[c] = _mm512_shuffle_i32x4(w0, w2, 0x88);
        a[4 + c] = _mm512_shuffle_i32x4(w0, w2, 0xDD);
        a[8 + c] = _mm512_shuffle_i32x4(w1, w3, 0x88);
        a[12 + c] = _mm512_shuffle_i32x4(w1, w3, 0xDD);
    }
}

/* Packs global rows r0 .. r0 + n - 1 (n <= 32; the rest of the tile zero) as
 * packed[p * 32 + r] = the bfloat16 pair of columns 2p, 2p + 1 of row r, for p below
 * pairs rounded up to 16 (the columns past D are zero). norm[r] receives ||row r|| times
 * up (> 1 + the float32 error of the norm: an upper bound), +inf when not finite; ptr[r]
 * the row. bf: room for 32 rows of dpad bfloat16 (dpad: a multiple of 32 >= 2 * pairs). */
TARGET_BF16 static void pack_tile(const row_map *map, int64_t r0, int n, int64_t pairs,
                                  int64_t dpad, float up, uint32_t *packed, float *norm,
                                  const void **ptr, uint16_t *bf)
{
    const vtr_topk_matrix *m = map->m;
    int64_t dim = m->dim;
    for (int r = 0; r < BF16_ROWS; r++) {
        uint16_t *row = bf + (size_t)r * (size_t)dpad;
        if (r >= n) {
            ptr[r] = NULL;
            norm[r] = 0;
            memset(row, 0, (size_t)dpad * sizeof *row);
            continue;
        }
        int64_t run;
        ptr[r] = row_ptr(map, r0 + r, &run);
        float ss = row_to_bf16(ptr[r], dim, m->dtype == VTR_F16, dpad, row);
        norm[r] = isfinite(ss) ? sqrtf(ss) * up : INFINITY;
    }
    /* 16 x 16 blocks of (row, pair) -> (pair, row) */
    int64_t words = dpad / 2; /* 32-bit pairs per row in bf, a multiple of 16 */
    for (int rb = 0; rb < BF16_ROWS; rb += 16)
        for (int64_t pb = 0; pb < pairs; pb += 16) {
            __m512i a[16];
            for (int i = 0; i < 16; i++)
                a[i] = _mm512_loadu_si512((const void *)((const uint32_t *)bf +
                                                         (size_t)(rb + i) * (size_t)words + pb));
            transpose16(a);
            for (int j = 0; j < 16; j++)
                _mm512_store_si512((void *)(packed + (size_t)(pb + j) * BF16_ROWS + rb), a[j]);
        }
}

/* out[j * 32 + r] = s'(row r, query j) for the 32 packed rows and queries j < 12, whose
 * bfloat16 pairs are q[j * ldq + p], p < pairs. */
TARGET_BF16 static void tile_scores_bf16(const uint32_t *packed, int64_t pairs, const uint32_t *q,
                                         int64_t ldq, float *out)
{
    __m512 acc[BF16_QUERIES][2];
#pragma GCC unroll 12
    for (int j = 0; j < BF16_QUERIES; j++)
        acc[j][0] = acc[j][1] = _mm512_setzero_ps();
    for (int64_t p = 0; p < pairs; p++) {
        __m512bh x0 = (__m512bh)_mm512_load_si512((const void *)(packed + p * BF16_ROWS));
        __m512bh x1 = (__m512bh)_mm512_load_si512((const void *)(packed + p * BF16_ROWS + 16));
#pragma GCC unroll 12
        for (int j = 0; j < BF16_QUERIES; j++) {
            __m512bh b = (__m512bh)_mm512_set1_epi32((int)q[j * ldq + p]);
            acc[j][0] = _mm512_dpbf16_ps(acc[j][0], x0, b);
            acc[j][1] = _mm512_dpbf16_ps(acc[j][1], x1, b);
        }
    }
#pragma GCC unroll 12
    for (int j = 0; j < BF16_QUERIES; j++) {
        _mm512_storeu_ps(out + j * BF16_ROWS, acc[j][0]);
        _mm512_storeu_ps(out + j * BF16_ROWS + 16, acc[j][1]);
    }
}

/* The same with AMX: out[j * 32 + r] for queries j < 32, whose bfloat16 pairs are
 * q[(p / 16) * 512 + j * 16 + p % 16] (16 pairs of each query in turn, so that a tile's
 * 16 rows are 1 KiB in a row rather than lines a query apart, which collide in the L1
 * cache). Tiles 4 and 5 hold 16 queries each (a tile row per query), tiles 6 and 7 16 rows
 * each (a tile row per pair: the packed layout, which is TDPBF16PS's for its second
 * operand), and tiles 0 to 3 the four 16 x 16 blocks of scores. ppad: pairs rounded up to
 * 16 (zero past D); the tile configuration is amx_begin's. TDPBF16PS has VDPBF16PS's
 * arithmetic (exact products, float32 sums, denormals flushed), so the bound holds. */
TARGET_AMX static void tile_scores_amx(const uint32_t *packed, int64_t ppad, const uint32_t *q,
                                       float *out)
{
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t p = 0; p < ppad; p += 16) {
        _tile_loadd(4, q + p * AMX_QUERIES, 64);
        _tile_loadd(5, q + p * AMX_QUERIES + 16 * 16, 64);
        _tile_loadd(6, packed + p * BF16_ROWS, BF16_ROWS * 4);
        _tile_loadd(7, packed + p * BF16_ROWS + 16, BF16_ROWS * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, out, BF16_ROWS * 4);
    _tile_stored(1, out + 16, BF16_ROWS * 4);
    _tile_stored(2, out + 16 * BF16_ROWS, BF16_ROWS * 4);
    _tile_stored(3, out + 16 * BF16_ROWS + 16, BF16_ROWS * 4);
}

/* Loads the tile configuration of tile_scores_amx on this thread: palette 1, eight tiles
 * of 16 rows of 64 bytes. */
TARGET_AMX static void amx_begin(void)
{
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg = {.palette = 1};
    for (int i = 0; i < 8; i++) {
        cfg.colsb[i] = 64;
        cfg.rows[i] = 16;
    }
    /* GCC 12's intrinsic tells the compiler that it reads 8 bytes of cfg: without the
     * barrier the rest of the stores can be dropped */
    __asm__ volatile("" : : "r"(&cfg) : "memory");
    _tile_loadconfig(&cfg);
}

TARGET_AMX static void amx_end(void)
{
    _tile_release();
}

/* The rows of the tile (global rows r0 ..) that query q must rescore: bit r set when
 * !(s'[r] + norm[r] * bq + babs < t), for the 32 rows. */
TARGET_BF16 static uint32_t tile_candidates(const float *s, const float *norm, float bq,
                                            float babs, float t)
{
    __m512 vq = _mm512_set1_ps(bq), va = _mm512_set1_ps(babs), vt = _mm512_set1_ps(t);
    __m512 lim0 = _mm512_add_ps(_mm512_fmadd_ps(_mm512_loadu_ps(norm), vq, _mm512_loadu_ps(s)), va);
    __m512 lim1 = _mm512_add_ps(
        _mm512_fmadd_ps(_mm512_loadu_ps(norm + 16), vq, _mm512_loadu_ps(s + 16)), va);
    return (uint32_t)_mm512_cmp_ps_mask(lim0, vt, _CMP_NLT_UQ) |
           (uint32_t)_mm512_cmp_ps_mask(lim1, vt, _CMP_NLT_UQ) << 16;
}

static vtr_status search_bf16(const row_map *map, int64_t n_rows, const float *queries,
                              int64_t n_queries, int64_t k, int64_t cap, bool amx, int threads,
                              int64_t *rows_out, float *scores_out, vtr_error *err)
{
    const vtr_topk_matrix *m = map->m;
    int64_t dim = m->dim, pairs = (dim + 1) / 2, dpad = (pairs * 2 + 31) / 32 * 32;
    int64_t ppad = dpad / 2; /* pairs rounded up to 16 */
    bool half = m->dtype == VTR_F16;
    int group = amx ? AMX_QUERIES : BF16_QUERIES;
    int n_threads = max_threads(threads);
    if (n_threads > n_rows / ROWS_PER_THREAD)
        n_threads = n_rows / ROWS_PER_THREAD > 0 ? (int)(n_rows / ROWS_PER_THREAD) : 1;
    int64_t n_groups = (n_queries + group - 1) / group;
    size_t cap_alloc = cap > 0 ? (size_t)cap : 1;
    /* per thread: the block's packed tiles, scores, norms and row pointers, a row as
     * floats, a tile's rows as bfloat16 */
    size_t packed_bytes = (size_t)ppad * BF16_ROWS * 4, block_rows = BF16_BLOCK * BF16_ROWS;
    size_t scratch_bytes = BF16_BLOCK * packed_bytes + AMX_QUERIES * BF16_ROWS * sizeof(float) +
                           block_rows * (sizeof(float) + sizeof(void *)) +
                           (size_t)dpad * sizeof(float) +
                           (size_t)BF16_ROWS * (size_t)dpad * sizeof(uint16_t) + 64;
    scratch_bytes = (scratch_bytes + 63) / 64 * 64;
    char *scratch = aligned_alloc(64, (size_t)n_threads * scratch_bytes);
    uint32_t *qbf = malloc((size_t)n_groups * (size_t)group * (size_t)ppad * sizeof *qbf);
    float *bq = malloc((size_t)n_groups * (size_t)group * sizeof *bq);
    hit *hits = malloc((size_t)n_threads * (size_t)n_queries * cap_alloc * sizeof *hits);
    heap *heaps = malloc((size_t)n_threads * (size_t)n_queries * sizeof *heaps);
    hit *merged = malloc((size_t)n_threads * cap_alloc * sizeof *merged);
    float *qtmp = malloc((size_t)dpad * sizeof *qtmp);
    uint32_t *qrow = malloc((size_t)ppad * sizeof *qrow);
    vtr_status st = VTR_OK;
    if (!scratch || !qbf || !bq || !hits || !heaps || !merged || !qtmp || !qrow) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "top-k: out of memory for %d threads x %lld heaps "
                      "of %lld", n_threads, (long long)n_queries, (long long)cap);
        goto end;
    }
    /* queries: bfloat16 pairs, ppad per query (padding queries zero), and their part of
     * the bound */
    double gamma = (double)dim * 0x1p-24 / (1 - (double)dim * 0x1p-24);
    double c = 1.01 * (0x1p-7 + 0x1p-16 + 2 * gamma);
    float babs = (float)((double)dim * 0x1p-125);
    float up = (float)(1.001 + gamma); /* a float32 sum of squares errs by <= gamma */
    for (int64_t i = 0; i < n_groups * group; i++) {
        memset(qtmp, 0, (size_t)dpad * sizeof *qtmp);
        double ss = 0;
        if (i < n_queries) {
            const float *q = queries + (size_t)i * (size_t)dim;
            memcpy(qtmp, q, (size_t)dim * sizeof *qtmp);
            for (int64_t d = 0; d < dim; d++)
                ss += (double)q[d] * q[d];
        }
        if (amx) { /* tile_scores_amx's layout: 16 pairs of each of the group's queries */
            uint32_t *g = qbf + (size_t)(i / group) * (size_t)group * (size_t)ppad;
            to_bf16(qtmp, (uint16_t *)qrow, dpad);
            for (int64_t p = 0; p < ppad; p++)
                g[(p / 16) * 16 * group + (i % group) * 16 + p % 16] = qrow[p];
        } else {
            to_bf16(qtmp, (uint16_t *)(qbf + (size_t)i * (size_t)ppad), dpad);
        }
        double b = c * sqrt(ss) * 1.001 + sqrt((double)dim) * 0x1p-125;
        bq[i] = isfinite(b) ? (float)b : INFINITY;
    }
    for (size_t h = 0; h < (size_t)n_threads * (size_t)n_queries; h++)
        heaps[h] = (heap){hits + h * cap_alloc, 0, cap};

#ifdef _OPENMP
#pragma omp parallel num_threads(n_threads)
#endif
    {
#ifdef _OPENMP
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
        int t = 0, nt = 1;
#endif
        char *mine = scratch + (size_t)t * scratch_bytes;
        uint32_t *packed = (uint32_t *)mine;
        float *s = (float *)(mine + BF16_BLOCK * packed_bytes);
        float *norm = s + AMX_QUERIES * BF16_ROWS;
        const void **ptr = (const void **)(norm + block_rows);
        float *tmp = (float *)(ptr + block_rows);
        uint16_t *bf = (uint16_t *)(tmp + dpad);
        heap *hp = heaps + (size_t)t * (size_t)n_queries;
        if (amx)
            amx_begin();
        int64_t end = n_rows * (t + 1) / nt;
        for (int64_t b0 = n_rows * t / nt; b0 < end; b0 += (int64_t)block_rows) {
            int n_tiles = 0;
            for (int64_t r0 = b0; r0 < end && r0 < b0 + (int64_t)block_rows; r0 += BF16_ROWS) {
                int n = end - r0 < BF16_ROWS ? (int)(end - r0) : BF16_ROWS;
                size_t o = (size_t)n_tiles * BF16_ROWS;
                pack_tile(map, r0, n, pairs, dpad, up,
                          packed + (size_t)n_tiles * packed_bytes / 4, norm + o, ptr + o, bf);
                n_tiles++;
            }
            /* a group of queries stays in cache while it meets the block's tiles */
            for (int64_t g = 0; g < n_groups; g++) {
                const uint32_t *qg = qbf + (size_t)g * (size_t)group * (size_t)ppad;
                for (int i = 0; i < n_tiles; i++) {
                    const uint32_t *tile = packed + (size_t)i * packed_bytes / 4;
                    int64_t r0 = b0 + (int64_t)i * BF16_ROWS;
                    int n = end - r0 < BF16_ROWS ? (int)(end - r0) : BF16_ROWS;
                    if (amx)
                        tile_scores_amx(tile, ppad, qg, s);
                    else
                        tile_scores_bf16(tile, pairs, qg, ppad, s);
                    for (int j = 0; j < group; j++) {
                        int64_t qi = g * group + j;
                        if (qi >= n_queries)
                            break;
                        heap *h = &hp[qi];
                        float thr = h->n < h->cap ? -INFINITY : h->e[0].score;
                        uint32_t cand = tile_candidates(s + j * BF16_ROWS, norm + i * BF16_ROWS,
                                                        bq[qi], babs, thr);
                        if (n < BF16_ROWS)
                            cand &= (UINT32_C(1) << n) - 1;
                        while (cand) {
                            int r = __builtin_ctz(cand);
                            cand &= cand - 1;
                            if (vtr_topk_skipped(m->skip, r0 + r))
                                continue;
                            float exact;
                            dots(ptr[i * BF16_ROWS + r], 1, dim,
                                 queries + (size_t)qi * (size_t)dim, dim, 1, &exact, 1, half, tmp);
                            heap_offer(h, exact, r0 + r);
                        }
                    }
                }
            }
        }
        if (amx)
            amx_end();
    }
    for (int64_t i = 0; i < n_queries; i++)
        emit_merged(&heaps[i], n_threads, (size_t)n_queries, cap, k, merged,
                    rows_out + (size_t)i * (size_t)k, scores_out + (size_t)i * (size_t)k);
end:
    free(scratch);
    free(qbf);
    free(bq);
    free(hits);
    free(heaps);
    free(merged);
    free(qtmp);
    free(qrow);
    return st;
}
#endif

/* ---- entry point ---- */

bool vtr_topk_have_kernel(vtr_topk_kernel kernel)
{
    switch (kernel) {
    case VTR_TOPK_AUTO:
    case VTR_TOPK_SGEMM:
        return true;
#ifdef TOPK_X86
    case VTR_TOPK_BF16_FILTER:
        return cpu_has_avx512_bf16();
    case VTR_TOPK_AMX_FILTER:
        return cpu_has_amx_bf16();
#endif
    default:
        return false;
    }
}

vtr_topk_kernel vtr_topk_batch_kernel(vtr_topk_kernel requested)
{
    if (requested != VTR_TOPK_AUTO)
        return requested;
    return vtr_topk_have_kernel(VTR_TOPK_AMX_FILTER)    ? VTR_TOPK_AMX_FILTER
           : vtr_topk_have_kernel(VTR_TOPK_BF16_FILTER) ? VTR_TOPK_BF16_FILTER
                                                        : VTR_TOPK_SGEMM;
}

const char *vtr_topk_kernel_name(vtr_topk_kernel kernel)
{
    switch (kernel) {
    case VTR_TOPK_AUTO: return "auto";
    case VTR_TOPK_SGEMM: return "sgemm";
    case VTR_TOPK_BF16_FILTER: return "bf16-filter";
    case VTR_TOPK_AMX_FILTER: return "amx-filter";
    }
    return "unknown";
}

static int default_batch_min(vtr_topk_kernel kernel)
{
    return kernel == VTR_TOPK_AMX_FILTER    ? DEFAULT_BATCH_MIN_AMX
           : kernel == VTR_TOPK_BF16_FILTER ? DEFAULT_BATCH_MIN_BF16
                                            : DEFAULT_BATCH_MIN;
}

const char *vtr_topk_report(void)
{
    static char line[160];
    vtr_topk_kernel kernel = vtr_topk_batch_kernel(VTR_TOPK_AUTO);
    const char *isa = "portable C";
#ifdef TOPK_X86
    isa = cpu_has_avx512() ? "AVX-512" : cpu_has_avx2_fma_f16c() ? "AVX2" : isa;
#endif
    snprintf(line, sizeof line, "top-k: %d+ queries at once: %s (%s); fewer: a pass over the rows "
             "per %d queries (%s)",
             default_batch_min(kernel), vtr_topk_kernel_name(kernel),
             kernel == VTR_TOPK_AMX_FILTER    ? "AMX-BF16"
             : kernel == VTR_TOPK_BF16_FILTER ? "AVX512-BF16"
                                              : "BLAS",
             FUSED_QUERIES, isa);
    return line;
}

vtr_status vtr_topk_matrix_check(const vtr_topk_matrix *m, vtr_error *err)
{
    if (!m)
        return vtr_fail(err, VTR_ERR_INVALID, "top-k: no matrix");
    if (m->dtype != VTR_F16 && m->dtype != VTR_F32)
        return vtr_fail(err, VTR_ERR_INVALID, "top-k: matrix of %s (float16 or float32 only)",
                        vtr_dtype_name(m->dtype));
    if (m->dim < 1 || m->dim > INT_MAX)
        return vtr_fail(err, VTR_ERR_INVALID, "top-k: matrix dim %lld", (long long)m->dim);
    if (m->n_parts < 0 || (m->n_parts > 0 && !m->parts))
        return vtr_fail(err, VTR_ERR_INVALID, "top-k: matrix without parts");
    for (int64_t p = 0; p < m->n_parts; p++)
        if (m->parts[p].rows < 0 || (m->parts[p].rows > 0 && !m->parts[p].data))
            return vtr_fail(err, VTR_ERR_INVALID, "top-k: matrix part %lld: %lld rows at %p",
                            (long long)p, (long long)m->parts[p].rows, m->parts[p].data);
    return VTR_OK;
}

vtr_status vtr_topk_queries_check(const vtr_tensor *queries, int64_t dim, const int64_t *rows,
                                  const float *scores, int64_t *n_queries, vtr_error *err)
{
    if (!queries)
        return vtr_fail(err, VTR_ERR_INVALID, "top-k: no queries");
    if (queries->dtype != VTR_F32 || queries->ndim < 1 || queries->ndim > 2)
        return vtr_fail(err, VTR_ERR_INVALID, "top-k: queries must be float32, (D,) or (Q, D); "
                        "got %s with %d dimensions", vtr_dtype_name(queries->dtype),
                        queries->ndim);
    int64_t q_dim = queries->shape[queries->ndim - 1];
    *n_queries = queries->ndim == 2 ? queries->shape[0] : 1;
    if (q_dim != dim)
        return vtr_fail(err, VTR_ERR_INVALID, "top-k: queries have %lld columns; the matrix has %lld",
                        (long long)q_dim, (long long)dim);
    if (*n_queries < 0)
        return vtr_fail(err, VTR_ERR_INVALID, "top-k: %lld queries", (long long)*n_queries);
    if (*n_queries > 0 && (!queries->data || !rows || !scores))
        return vtr_fail(err, VTR_ERR_INVALID, "top-k: NULL %s",
                        !queries->data ? "query data" : "output array");
    return VTR_OK;
}

vtr_status vtr_topk_search(const vtr_topk_matrix *m, const vtr_tensor *queries, int64_t k,
                           const vtr_topk_options *opt, int64_t *rows, float *scores,
                           int64_t *found, vtr_error *err)
{
    static const vtr_topk_options defaults = {0};
    if (!opt)
        opt = &defaults;
    vtr_status st = vtr_topk_matrix_check(m, err);
    if (st)
        return st;
    if (k < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "top-k: k = %lld (must be >= 1)", (long long)k);
    if ((unsigned)opt->kernel > VTR_TOPK_AMX_FILTER)
        return vtr_fail(err, VTR_ERR_INVALID, "top-k: unknown kernel %d", (int)opt->kernel);
    if (!vtr_topk_have_kernel(opt->kernel))
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "top-k: the %s kernel needs a CPU with %s",
                        vtr_topk_kernel_name(opt->kernel),
                        opt->kernel == VTR_TOPK_AMX_FILTER
                            ? "AMX-BF16 (and a kernel that lets the process use it)"
                            : "AVX512-BF16");
    int64_t n_queries;
    if ((st = vtr_topk_queries_check(queries, m->dim, rows, scores, &n_queries, err)))
        return st;

    int64_t live = vtr_topk_matrix_live_rows(m);
    int64_t cap = k < live ? k : live;
    if (found)
        *found = cap;
    if (n_queries == 0)
        return VTR_OK;
    if (live == 0) {
        for (int64_t i = 0; i < n_queries * k; i++) {
            rows[i] = -1;
            scores[i] = -INFINITY;
        }
        return VTR_OK;
    }

    row_map map = {.m = m, .elem = vtr_dtype_size(m->dtype)};
    map.first = malloc((size_t)(m->n_parts + 1) * sizeof *map.first);
    if (!map.first)
        return vtr_fail(err, VTR_ERR_NOMEM, "top-k: out of memory");
    map.first[0] = 0;
    for (int64_t p = 0; p < m->n_parts; p++)
        map.first[p + 1] = map.first[p] + m->parts[p].rows;
    int64_t n_rows = map.first[m->n_parts];

    vtr_topk_kernel kernel = vtr_topk_batch_kernel(opt->kernel);
    int batch_min = opt->batch_min_queries > 0 ? opt->batch_min_queries : default_batch_min(kernel);
#ifdef TOPK_X86
    if (n_queries >= batch_min && kernel != VTR_TOPK_SGEMM)
        st = search_bf16(&map, n_rows, queries->data, n_queries, k, cap,
                         kernel == VTR_TOPK_AMX_FILTER, opt->threads, rows, scores, err);
    else
#endif
    if (n_queries >= batch_min)
        st = search_batched(&map, n_rows, queries->data, n_queries, k, cap, opt, rows, scores,
                            err);
    else
        st = search_fused(&map, n_rows, queries->data, n_queries, k, cap, opt->threads, rows,
                          scores, err);
    free(map.first);
    return st;
}
