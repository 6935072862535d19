/* vtr's side of bench/eval: evaluates the embeddings in DIR (items_0.npy, captions_0.npy,
 * cap_item.npy, as tests/interop/retrieval_metrics_ref.py reads them) with
 * vtr_retrieval_evaluate_embeddings, REPEATS times, and prints
 *   seconds T1 T2 ...
 *   metrics v2t(r1 r5 r10 medr meanr map ndcg) t2v(the same) rsum
 * and writes the per-query ranks of the last run to DIR/vtr_{v2t,t2v}_rank.npy.
 *
 *   retrieval_bench DIR [REPEATS]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/npy.h"
#include "match/retrieval_metrics.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Loads DIR/name into malloc'ed memory (so no page fault lands in the timed region). */
static void *load(const char *dir, const char *name, vtr_dtype dtype, int64_t *rows, int64_t *cols)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    vtr_error err;
    vtr_npy_file f;
    if (vtr_npy_load(path, &f, &err) != VTR_OK || f.tensor.dtype != dtype) {
        fprintf(stderr, "retrieval_bench: %s: %s\n", path,
                err.status ? err.msg : "unexpected dtype");
        exit(1);
    }
    size_t n = vtr_tensor_nbytes(&f.tensor);
    void *copy = malloc(n);
    if (!copy) {
        fprintf(stderr, "retrieval_bench: out of memory\n");
        exit(1);
    }
    memcpy(copy, f.tensor.data, n);
    *rows = f.tensor.shape[0];
    *cols = f.tensor.ndim > 1 ? f.tensor.shape[1] : 1;
    vtr_npy_close(&f);
    return copy;
}

static void save_i64(const char *dir, const char *name, int64_t *data, int64_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    vtr_error err;
    vtr_tensor t = {VTR_I64, 1, {n}, data};
    if (vtr_npy_save(path, &t, 0, &err) != VTR_OK) {
        fprintf(stderr, "retrieval_bench: %s\n", err.msg);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: retrieval_bench DIR [REPEATS]\n");
        return 2;
    }
    const char *dir = argv[1];
    int repeats = argc > 2 ? atoi(argv[2]) : 3;
    int64_t n_items, n_caps, dim, dim2, n_idx, one;
    float *items = load(dir, "items_0.npy", VTR_F32, &n_items, &dim);
    float *caps = load(dir, "captions_0.npy", VTR_F32, &n_caps, &dim2);
    int *cap_item = load(dir, "cap_item.npy", VTR_I32, &n_idx, &one);
    if (dim != dim2 || n_idx != n_caps) {
        fprintf(stderr, "retrieval_bench: inconsistent shapes\n");
        return 1;
    }
    int64_t *v2t_rank = malloc((size_t)n_items * sizeof *v2t_rank);
    int64_t *t2v_rank = malloc((size_t)n_caps * sizeof *t2v_rank);
    vtr_retrieval_per_query pq = {v2t_rank, NULL, NULL, t2v_rank, NULL, NULL};
    vtr_embedding_model model = {items, caps, (int)dim};
    vtr_retrieval_metrics m;
    vtr_error err;
    printf("seconds");
    for (int r = 0; r < repeats; r++) {
        double t0 = now();
        if (vtr_retrieval_evaluate_embeddings(&model, 1, (int)n_items, (int)n_caps, cap_item, NULL,
                                              &m, &pq, &err) != VTR_OK) {
            fprintf(stderr, "retrieval_bench: %s\n", err.msg);
            return 1;
        }
        printf(" %.3f", now() - t0);
        fflush(stdout);
    }
    const vtr_retrieval_direction *d[2] = {&m.v2t, &m.t2v};
    printf("\nmetrics");
    for (int k = 0; k < 2; k++)
        printf(" %.17g %.17g %.17g %.17g %.17g %.17g %.17g", d[k]->r1, d[k]->r5, d[k]->r10,
               d[k]->median_rank, d[k]->mean_rank, d[k]->map, d[k]->ndcg);
    printf(" %.17g\n", m.rsum);
    save_i64(dir, "vtr_v2t_rank.npy", v2t_rank, n_items);
    save_i64(dir, "vtr_t2v_rank.npy", t2v_rank, n_caps);
    free(items);
    free(caps);
    free(cap_item);
    free(v2t_rank);
    free(t2v_rank);
    return 0;
}
