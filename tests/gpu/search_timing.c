/* The GPU check's search timing (tests/gpu/run.sh): one query's exact top 10 over N rows of
 * 1024 float16 (index/topk.h, vtr_topk_cuda_search) against the GPU's memory-bandwidth
 * floor, the time to read the N x 1024 x 2 bytes once at the bandwidth of a large
 * device-to-device copy measured in the same run (a copy reads and writes each byte).
 *
 * Usage: search-timing [ROWS]   (default 10,000,000; 20 GB on the host and on the GPU)
 *
 * The rows are random float16 values in [-1, 1): a block of 65,536 rows drawn once and
 * repeated. Prints the GPU, then the median of 20 timed searches (after 3 warm-ups), each
 * from the query's copy to the GPU to the merged results on the host, and its ratio to
 * the floor. Exit 0; 1 with one line on stderr when there is no GPU or a call fails. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "index/topk.h"
#include "lib/device.h"
#include "lib/rng.h"

enum { DIM = 1024, BLOCK_ROWS = 65536, K = 10, WARMUPS = 3, RUNS = 20 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* GB/s of a device-to-device copy of `bytes` (counting the bytes read and written), the
 * best of 5; 0 with err set on failure */
static double copy_bandwidth(size_t bytes, vtr_error *err)
{
    void *a = NULL, *b = NULL;
    double best = 0.0;
    float one;
    if (vtr_cuda_malloc(&a, bytes, err) == VTR_OK && vtr_cuda_malloc(&b, bytes, err) == VTR_OK &&
        vtr_cuda_zero(a, bytes, err) == VTR_OK)
        for (int i = 0; i < 6; i++) {
            double t = now();
            if (vtr_cuda_copy(b, a, bytes, err) || vtr_cuda_to_host(&one, b, sizeof one, err)) {
                best = 0.0;
                break;
            }
            t = now() - t;
            if (i > 0 && 2.0 * bytes / t / 1e9 > best)
                best = 2.0 * bytes / t / 1e9;
        }
    vtr_cuda_free(a);
    vtr_cuda_free(b);
    return best;
}

int main(int argc, char **argv)
{
    long long n = argc > 1 ? atoll(argv[1]) : 10000000LL;
    vtr_error err;
    char gpu[256];
    if (n < 1 || vtr_cuda_init(0, gpu, sizeof gpu, &err)) {
        fprintf(stderr, "search-timing: %s\n", n < 1 ? "ROWS must be >= 1" : err.msg);
        return 1;
    }
    size_t row = (size_t)DIM, total = (size_t)n * row;
    uint16_t *rows = malloc(total * sizeof *rows);
    float *q = malloc(row * sizeof *q);
    if (!rows || !q) {
        fprintf(stderr, "search-timing: out of memory for %lld rows\n", n);
        return 1;
    }
    vtr_rng rng;
    vtr_rng_init(&rng, 1, 0);
    size_t block = (size_t)(n < BLOCK_ROWS ? n : BLOCK_ROWS) * row;
    for (size_t i = 0; i < block; i++)
        rows[i] = vtr_float_to_half(2.0f * vtr_rng_uniform(&rng) - 1.0f);
#pragma omp parallel for schedule(static)
    for (long long b = 1; b < (n + BLOCK_ROWS - 1) / BLOCK_ROWS; b++) {
        size_t first = (size_t)b * BLOCK_ROWS * row,
               len = total - first < block ? total - first : block;
        memcpy(rows + first, rows, len * sizeof *rows);
    }
    for (size_t d = 0; d < row; d++)
        q[d] = vtr_rng_normal(&rng);
    vtr_topk_part part = {rows, n};
    vtr_topk_matrix m = {.dtype = VTR_F16, .dim = DIM, .n_parts = 1, .parts = &part};
    vtr_topk_cuda *c = NULL;
    double t_up = now();
    if (vtr_topk_cuda_new(&m, &c, &err)) {
        fprintf(stderr, "search-timing: %s\n", err.msg);
        return 1;
    }
    t_up = now() - t_up;
    free(rows);
    double bw = copy_bandwidth((size_t)1 << 32, &err);
    if (bw == 0.0) {
        fprintf(stderr, "search-timing: %s\n", err.msg);
        return 1;
    }
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 1, .shape = {DIM}, .data = q};
    int64_t res[K];
    float scores[K];
    double times[RUNS];
    for (int i = 0; i < WARMUPS + RUNS; i++) {
        double t = now();
        if (vtr_topk_cuda_search(c, &qt, K, res, scores, NULL, &err)) {
            fprintf(stderr, "search-timing: %s\n", err.msg);
            return 1;
        }
        if (i >= WARMUPS)
            times[i - WARMUPS] = now() - t;
    }
    qsort(times, RUNS, sizeof *times, cmp_double);
    double median = 0.5 * (times[RUNS / 2 - 1] + times[RUNS / 2]);
    double floor_s = (double)total * 2.0 / (bw * 1e9);
    printf("GPU: %s\n", gpu);
    printf("rows %lld x %d float16 (%.1f GB), copied to the GPU in %.2f s\n", n, DIM,
           total * 2.0 / 1e9, t_up);
    printf("device copy bandwidth %.0f GB/s: floor %.3f ms per pass\n", bw, 1e3 * floor_s);
    printf("top %d of one query: median %.3f ms (min %.3f, max %.3f) = %.2fx the floor; best "
           "row %lld, score %.6g\n",
           K, 1e3 * median, 1e3 * times[0], 1e3 * times[RUNS - 1], median / floor_s,
           (long long)res[0], (double)scores[0]);
    vtr_topk_cuda_free(c);
    free(q);
    return 0;
}
