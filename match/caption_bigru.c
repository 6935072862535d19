/* The caption BiGRU; the contract is in caption_bigru.h. */
#include "caption_bigru.h"

#include <stdbool.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "lib/blas_threads.h"
#include "lib/gru.h"

/* Up to this many OpenMP threads the two directions run at the same time, one thread
 * each; with more, one after the other with every thread on each product. Measured on 2
 * cores (bench/train_step): about 0.66 s per VSE∞ video step against 0.71 s one after the
 * other. The crossover above 2 cores is an estimate (serial gate math per direction
 * against wider products), not a measurement. */
#define DIRECTIONS_PARALLEL_MAX_THREADS 4

/* Below this many elements an elementwise loop stays on one thread. */
#define PARALLEL_MIN 65536

/* Whether the two directions run at the same time; if so the BLAS thread count becomes 1
 * and *saved gets the previous one for directions_end. */
static bool directions_begin(int *saved)
{
#ifdef _OPENMP
    int threads = omp_get_max_threads();
    if (threads >= 2 && threads <= DIRECTIONS_PARALLEL_MAX_THREADS &&
        vtr_blas_threads_adjustable()) {
        *saved = vtr_blas_set_threads(1);
        return true;
    }
#endif
    *saved = 0;
    return false;
}

static void directions_end(bool parallel, int saved)
{
    if (parallel)
        vtr_blas_set_threads(saved);
}

// rev (B,L,C): row t of item b = row len_b - 1 - t of x (B,L,C) for t < len_b, zero after
static void reverse_rows(float *rev, const float *x, const int *lengths, int B, int L, int C)
{
    for (int b = 0; b < B; b++) {
        const float *src = x + (size_t)b * L * C;
        float *dst = rev + (size_t)b * L * C;
        int len = lengths[b];
        for (int t = 0; t < len; t++)
            memcpy(dst + (size_t)t * C, src + (size_t)(len - 1 - t) * C, sizeof(float) * C);
        memset(dst + (size_t)len * C, 0, sizeof(float) * (size_t)(L - len) * C);
    }
}

void vtr_caption_bigru_forward(float *out, vtr_caption_bigru *g, const float *inp,
                               const int *lengths, const float *params, int B, int L, int W, int E)
{
    size_t per_dir = vtr_gru_param_count(W, E, 1);
    float *outs[2] = {out, g->out_rev};
    const float *inps[2] = {inp, g->inp_rev};
    reverse_rows(g->inp_rev, inp, lengths, B, L, W);
    int saved;
    bool parallel = directions_begin(&saved);
#pragma omp parallel for num_threads(2) schedule(static, 1) if (parallel)
    for (int d = 0; d < 2; d++)
        vtr_gru_forward(outs[d], g->workspace[d], inps[d], lengths, params + d * per_dir, B, L, W,
                        E, 1, VTR_GRU_AVERAGE);
    directions_end(parallel, saved);
#pragma omp parallel for schedule(static) if ((long)B * L * E > PARALLEL_MIN)
    for (int b = 0; b < B; b++) {
        int len = lengths[b];
        for (int t = 0; t < len; t++) {
            float *y = out + ((size_t)b * L + t) * E;
            const float *r = g->out_rev + ((size_t)b * L + len - 1 - t) * E;
            for (int e = 0; e < E; e++)
                y[e] = (y[e] + r[e]) * 0.5f;
        }
    }
}

void vtr_caption_bigru_backward(float *dinp, float *dparams, vtr_caption_bigru *g, float *dout,
                                const float *inp, const int *lengths, const float *params, int B,
                                int L, int W, int E)
{
    size_t per_dir = vtr_gru_param_count(W, E, 1);
    // each direction's output gradient is half of the average's, the reverse one in its
    // own order (out_rev, no longer needed, holds it)
    long n = (long)B * L * E;
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN)
    for (long i = 0; i < n; i++)
        dout[i] *= 0.5f;
    reverse_rows(g->out_rev, dout, lengths, B, L, E);
    memset(g->dinp_rev, 0, sizeof(float) * (size_t)B * L * W);
    float *dinps[2] = {dinp, g->dinp_rev};
    const float *douts[2] = {dout, g->out_rev}, *inps[2] = {inp, g->inp_rev};
    int saved;
    bool parallel = directions_begin(&saved);
#pragma omp parallel for num_threads(2) schedule(static, 1) if (parallel)
    for (int d = 0; d < 2; d++)
        vtr_gru_backward(dinps[d], dparams + d * per_dir, g->scratch[d], douts[d], inps[d], lengths,
                         params + d * per_dir, g->workspace[d], B, L, W, E, 1, VTR_GRU_AVERAGE);
    directions_end(parallel, saved);
#pragma omp parallel for schedule(static) if ((long)B * L * W > PARALLEL_MIN)
    for (int b = 0; b < B; b++) {
        int len = lengths[b];
        for (int t = 0; t < len; t++) {
            float *dx = dinp + ((size_t)b * L + t) * W;
            const float *dr = g->dinp_rev + ((size_t)b * L + len - 1 - t) * W;
            for (int w = 0; w < W; w++)
                dx[w] += dr[w];
        }
    }
}
