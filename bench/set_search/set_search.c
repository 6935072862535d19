/* bench/set_search: what set embeddings cost at search time against one vector per item
 * (see run.sh). Synthetic unit vectors, N items of D = 1024: one vector per item, or a set
 * of K = 4 (paper 002). The single-vector search is vtr-search's exact top-k
 * (index/topk.h, float32 matrix, k 10); the set search is what vtr-search runs for a set
 * model: smooth-Chamfer of every query set against every item set (match/set_similarity.h,
 * alpha 16), then the k best per query. Both take the vectors as float32 in memory, so
 * the comparison is of the scoring alone (vtr-search also reads the index's float16 rows:
 * for sets it decodes them first).
 *
 *   set_search N QUERIES SEED
 * prints "one_vector_s T" and "sets_s T" for one query (the median of 5 runs each) and
 * for QUERIES queries in one call ("..._batch_s T").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "index/topk.h"
#include "lib/rng.h"
#include "match/set_similarity.h"

enum { D = 1024, K = 4, TOP = 10, RUNS = 5 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* rows (n, D) of unit vectors from stream `stream` of seed */
static float *unit_rows(int64_t n, uint64_t seed, uint64_t stream)
{
    float *x = malloc(sizeof(float) * (size_t)n * D);
    if (!x) {
        fprintf(stderr, "set_search: out of memory for %lld rows\n", (long long)n);
        exit(1);
    }
    vtr_rng rng;
    vtr_rng_init(&rng, seed, stream);
    for (int64_t r = 0; r < n; r++) {
        double s = 0;
        float *v = x + r * D;
        for (int d = 0; d < D; d++) {
            v[d] = vtr_rng_normal(&rng);
            s += (double)v[d] * v[d];
        }
        for (int d = 0; d < D; d++)
            v[d] = (float)(v[d] / sqrt(s));
    }
    return x;
}

static double one_vector(const float *items, int64_t n, const float *q, int64_t nq)
{
    vtr_topk_part part = {items, n};
    vtr_topk_matrix m = {.dtype = VTR_F32, .dim = D, .n_parts = 1, .parts = &part};
    vtr_tensor qt = {.dtype = VTR_F32, .ndim = 2, .shape = {nq, D}, .data = (void *)q};
    int64_t *rows = malloc(sizeof *rows * (size_t)(nq * TOP));
    float *scores = malloc(sizeof *scores * (size_t)(nq * TOP));
    vtr_error err;
    double t = now();
    if (vtr_topk_search(&m, &qt, TOP, NULL, rows, scores, NULL, &err) != VTR_OK) {
        fprintf(stderr, "set_search: %s\n", err.msg);
        exit(1);
    }
    t = now() - t;
    free(rows);
    free(scores);
    return t;
}

/* smooth-Chamfer of nq query sets against n item sets, then each query's TOP best */
static double sets(const float *items, int64_t n, const float *q, int64_t nq, void *scratch,
                   float *S)
{
    double t = now();
    vtr_smooth_chamfer_forward(S, (long)n, scratch, q, items, (int)nq, (int)n, K, K, D,
                               VTR_SET_ALPHA);
    volatile float keep = 0;
    for (int64_t a = 0; a < nq; a++) {
        float best[TOP];
        for (int j = 0; j < TOP; j++)
            best[j] = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            float s = S[a * n + i];
            if (s <= best[TOP - 1])
                continue;
            int j = TOP - 1;
            for (; j > 0 && best[j - 1] < s; j--)
                best[j] = best[j - 1];
            best[j] = s;
        }
        keep += best[0];
    }
    return now() - t;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: set_search N QUERIES SEED\n");
        return 2;
    }
    int64_t n = atoll(argv[1]), nq = atoll(argv[2]);
    uint64_t seed = (uint64_t)atoll(argv[3]);
    float *single = unit_rows(n, seed, 0), *set_rows = unit_rows(n * K, seed, 1);
    float *q1 = unit_rows(nq, seed, 2), *qs = unit_rows(nq * K, seed, 3);
    void *scratch = malloc(vtr_smooth_chamfer_scratch_size((int)nq, (int)n, K, K));
    float *S = malloc(sizeof(float) * (size_t)(nq * n));
    if (!scratch || !S)
        return 1;
    double t1[RUNS], ts[RUNS];
    for (int r = 0; r < RUNS; r++) {
        t1[r] = one_vector(single, n, q1 + (r % nq) * D, 1);
        ts[r] = sets(set_rows, n, qs + (r % nq) * K * D, 1, scratch, S);
    }
    qsort(t1, RUNS, sizeof *t1, by_value);
    qsort(ts, RUNS, sizeof *ts, by_value);
    printf("items %lld dim %d set_size %d queries %lld\n", (long long)n, D, K, (long long)nq);
    printf("one_vector_s %.6f\nsets_s %.6f\n", t1[RUNS / 2], ts[RUNS / 2]);
    printf("one_vector_batch_s %.6f\n", one_vector(single, n, q1, nq));
    printf("sets_batch_s %.6f\n", sets(set_rows, n, qs, nq, scratch, S));
    free(single), free(set_rows), free(q1), free(qs), free(scratch), free(S);
    return 0;
}
