/* The GPU check's op timing (tests/gpu/run.sh): the CUDA nn ops that carry a VSE∞
 * training step, forward + backward, at the MSR-VTT config's sizes
 * (configs/msrvtt-vse-inf.yaml: batch 128, 20 frames of 2048 features, a joint embedding
 * of 1024, words of 300 into a BiGRU of 1024 with the directions averaged, GPO with
 * encodings and hidden size 32; captions taken as 20 tokens, every item full length),
 * against cuBLAS's float32 matrix product measured in the same run.
 *
 * Usage: op-timing [REPEATS]   (REPEATS timed calls per op after 3 warm-ups; default 20)
 *
 * The caption BiGRU runs twice: on vtr's own kernels (lib/gru.cu) and on cuDNN's RNN
 * (lib/gru_cudnn.cu), the trial of which is faster.
 *
 * Prints the GPU's name, then one line per op: milliseconds per call (forward + backward)
 * and, for the ops made of matrix products, GFLOP/s and the fraction of the sgemm rate.
 * Timed on the wall clock around the calls, ended by a copy back, which waits for every
 * queued op. Exit 0; 1 with one line on stderr when there is no GPU or a CUDA call fails.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "aggregate/gpo.h"
#include "lib/device.h"
#include "lib/gru.h"
#include "lib/nn_cuda.h"
#include "lib/similarity.h"
#include "match/hinge_loss.h"

enum { B = 128, FRAMES = 20, FEAT = 2048, EMBED = 1024, WORDS = 20, WORD_DIM = 300 };
enum { SGEMM_N = 4096, WARMUPS = 3 };

/* Every device buffer taken, freed at the end of main. */
#define MAX_BUFFERS 64
static void *buffers[MAX_BUFFERS];
static int n_buffers;

/* bytes of device memory, freed at the end; NULL with err set on failure */
static void *device_buffer(size_t bytes, vtr_error *err)
{
    void *p = NULL;
    if (n_buffers == MAX_BUFFERS) {
        vtr_fail(err, VTR_ERR_NOMEM, "more than %d device buffers", MAX_BUFFERS);
        return NULL;
    }
    if (vtr_cuda_malloc(&p, bytes ? bytes : 1, err) != VTR_OK)
        return NULL;
    buffers[n_buffers++] = p;
    return p;
}

/* n floats uniform in [0, 1) (the values do not change the time) */
static float *device_floats(size_t n, vtr_error *err)
{
    float *p = device_buffer(n * sizeof(float), err);
    if (p && vtr_cuda_uniform(p, n, 1, (uint64_t)n_buffers, err) != VTR_OK)
        return NULL;
    return p;
}

/* B lengths of `length` each */
static int *device_lengths(int length, vtr_error *err)
{
    int host[B];
    for (int i = 0; i < B; i++)
        host[i] = length;
    int *p = device_buffer(sizeof host, err);
    if (p && vtr_cuda_to_device(p, host, sizeof host, err) != VTR_OK)
        return NULL;
    return p;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* One op: its buffers and the calls that make one forward + backward. */
typedef struct op {
    const char *name, *shape;
    double flops; /* of one call's matrix products; 0 when not counted */
    vtr_status (*call)(const struct op *op, vtr_error *err);
    float *f[12];
    void *ws, *scratch;
    const int *lengths;
} op;

/* the caption lengths, every item full length */
static int word_lengths[B];

/* cuDNN's GRU engine, made by its op's first call */
static vtr_cudnn_gru *cudnn_gru;

static vtr_status call_sgemm(const op *o, vtr_error *err)
{
    return vtr_cuda_matmul(o->f[0], o->f[1], o->f[2], SGEMM_N, SGEMM_N, SGEMM_N, err);
}

/* the frame branch's Linear 2048 -> 1024 over every frame; the features are not trained,
 * so no input gradient */
static vtr_status call_linear(const op *o, vtr_error *err)
{
    float *out = o->f[0], *inp = o->f[1], *w = o->f[2], *b = o->f[3], *dout = o->f[4];
    float *dw = o->f[5], *db = o->f[6];
    vtr_status st = vtr_cuda_linear_forward(out, inp, w, b, B * FRAMES, FEAT, EMBED, err);
    if (st == VTR_OK)
        st = vtr_cuda_linear_backward(NULL, dw, db, dout, inp, w, B * FRAMES, FEAT, EMBED, err);
    return st;
}

/* the caption BiGRU; the word embeddings are trained, so the input gradient too */
static vtr_status call_bigru(const op *o, vtr_error *err)
{
    float *out = o->f[0], *inp = o->f[1], *params = o->f[2], *dout = o->f[3];
    float *dinp = o->f[4], *dparams = o->f[5];
    vtr_status st = vtr_cuda_gru_forward(out, o->ws, inp, o->lengths, params, B, WORDS, WORD_DIM,
                                         EMBED, 2, VTR_GRU_AVERAGE, err);
    if (st == VTR_OK)
        st = vtr_cuda_gru_backward(dinp, dparams, o->scratch, dout, inp, o->lengths, params, o->ws,
                                   B, WORDS, WORD_DIM, EMBED, 2, VTR_GRU_AVERAGE, err);
    return st;
}

/* the same on cuDNN's RNN */
static vtr_status call_bigru_cudnn(const op *o, vtr_error *err)
{
    float *out = o->f[0], *inp = o->f[1], *params = o->f[2], *dout = o->f[3];
    float *dinp = o->f[4], *dparams = o->f[5];
    if (!cudnn_gru && vtr_cudnn_gru_new(WORD_DIM, EMBED, 2, &cudnn_gru, err) != VTR_OK)
        return err->status;
    vtr_status st = vtr_cudnn_gru_forward(cudnn_gru, out, inp, word_lengths, o->lengths, params, B,
                                          WORDS, VTR_GRU_AVERAGE, err);
    if (st == VTR_OK)
        st = vtr_cudnn_gru_backward(cudnn_gru, dinp, dparams, dout, inp, o->lengths, B, WORDS,
                                    VTR_GRU_AVERAGE, err);
    return st;
}

/* GPO over the frames' embeddings */
static vtr_status call_gpo(const op *o, vtr_error *err)
{
    float *out = o->f[0], *weights = o->f[1], *inp = o->f[2], *params = o->f[3];
    float *dout = o->f[4], *dinp = o->f[5], *dparams = o->f[6];
    vtr_status st = vtr_cuda_gpo_forward(out, weights, o->ws, inp, o->lengths, params, B, FRAMES,
                                         EMBED, VTR_GPO_D_PE, VTR_GPO_HIDDEN, err);
    if (st == VTR_OK)
        st = vtr_cuda_gpo_backward(dinp, dparams, o->scratch, dout, inp, weights, o->lengths,
                                   params, o->ws, B, FRAMES, EMBED, VTR_GPO_D_PE, VTR_GPO_HIDDEN,
                                   err);
    return st;
}

/* the similarity of every video with every caption and the hinge loss on it (hardest
 * negatives, summed), both ways */
static vtr_status call_loss(const op *o, vtr_error *err)
{
    float *S = o->f[0], *v = o->f[1], *t = o->f[2], *loss = o->f[3], *dS = o->f[4];
    float *dv = o->f[5], *dt = o->f[6];
    vtr_status st = vtr_cuda_cosine_similarity_forward(S, v, t, B, B, EMBED, err);
    if (st == VTR_OK)
        st = vtr_cuda_hinge_loss_forward(loss, S, B, VTR_HINGE_MARGIN, VTR_HINGE_HARDEST_NEGATIVE,
                                         VTR_REDUCE_SUM, err);
    if (st == VTR_OK)
        st = vtr_cuda_hinge_loss_backward(dS, 1.0f, S, B, VTR_HINGE_MARGIN,
                                          VTR_HINGE_HARDEST_NEGATIVE, VTR_REDUCE_SUM, err);
    if (st == VTR_OK)
        st = vtr_cuda_cosine_similarity_backward(dv, dt, dS, v, t, B, B, EMBED, err);
    return st;
}

/* o->f[i] = counts[i] floats, for the counts before the first 0 */
static vtr_status take_floats(op *o, const size_t *counts, vtr_error *err)
{
    for (int i = 0; counts[i]; i++)
        if (!(o->f[i] = device_floats(counts[i], err)))
            return err->status;
    return VTR_OK;
}

/* ms per call of o, over `repeats` calls after the warm-ups */
static vtr_status time_op(const op *o, int repeats, double *ms, vtr_error *err)
{
    float last;
    for (int i = 0; i < WARMUPS; i++)
        if (o->call(o, err) != VTR_OK)
            return err->status;
    if (vtr_cuda_to_host(&last, o->f[0], sizeof last, err) != VTR_OK)
        return err->status;
    double t0 = now_s();
    for (int i = 0; i < repeats; i++)
        if (o->call(o, err) != VTR_OK)
            return err->status;
    if (vtr_cuda_to_host(&last, o->f[0], sizeof last, err) != VTR_OK)
        return err->status;
    *ms = (now_s() - t0) * 1e3 / repeats;
    return VTR_OK;
}

int main(int argc, char **argv)
{
    int repeats = argc > 1 ? atoi(argv[1]) : 20;
    if (argc > 2 || repeats < 1) {
        fprintf(stderr, "usage: op-timing [REPEATS]\n");
        return 1;
    }
    vtr_error err;
    vtr_error_clear(&err);
    int status = 1;
    char name[256];
    if (!vtr_cuda_available()) {
        fprintf(stderr, "op-timing: no CUDA GPU visible\n");
        return 1;
    }
    if (vtr_cuda_init(0, name, sizeof name, &err) != VTR_OK)
        goto end;
    printf("GPU: %s\n", name);

    size_t bf = (size_t)B * FRAMES, bw = (size_t)B * WORDS;
    size_t n_gru = vtr_gru_param_count(WORD_DIM, EMBED, 2);
    size_t n_gpo = vtr_gpo_param_count(VTR_GPO_D_PE, VTR_GPO_HIDDEN);
    char s_sgemm[64], s_linear[64], s_bigru[64], s_gpo[64], s_loss[64];
    snprintf(s_sgemm, sizeof s_sgemm, "%dx%dx%d", SGEMM_N, SGEMM_N, SGEMM_N);
    snprintf(s_linear, sizeof s_linear, "(%zu,%d) -> %d", bf, FEAT, EMBED);
    snprintf(s_bigru, sizeof s_bigru, "(%d,%d,%d) -> %d, 2 dirs", B, WORDS, WORD_DIM, EMBED);
    snprintf(s_gpo, sizeof s_gpo, "(%d,%d,%d)", B, FRAMES, EMBED);
    snprintf(s_loss, sizeof s_loss, "(%d,%d) x (%d,%d)", B, EMBED, B, EMBED);
    op ops[] = {
        {.name = "sgemm (cuBLAS, float32)",
         .shape = s_sgemm,
         .flops = 2.0 * SGEMM_N * SGEMM_N * SGEMM_N,
         .call = call_sgemm},
        {.name = "frame linear fwd+bwd",
         .shape = s_linear,
         .flops = 4.0 * bf * FEAT * EMBED,
         .call = call_linear},
        {.name = "caption BiGRU fwd+bwd",
         .shape = s_bigru,
         .flops = vtr_gru_train_flops((double)bw, B, WORD_DIM, EMBED, 2, true),
         .call = call_bigru},
        {.name = "frame GPO fwd+bwd", .shape = s_gpo, .call = call_gpo},
        {.name = "similarity+hinge fwd+bwd",
         .shape = s_loss,
         .flops = 6.0 * B * B * EMBED,
         .call = call_loss},
        /* last: where this cuDNN refuses, the other ops are timed already */
        {.name = "caption BiGRU, cuDNN RNN",
         .shape = s_bigru,
         .flops = vtr_gru_train_flops((double)bw, B, WORD_DIM, EMBED, 2, true),
         .call = call_bigru_cudnn},
    };
    size_t sgemm_n = (size_t)SGEMM_N * SGEMM_N;
    if (take_floats(&ops[0], (size_t[]){sgemm_n, sgemm_n, sgemm_n, 0}, &err) ||
        take_floats(&ops[1],
                    (size_t[]){bf * EMBED, bf * FEAT, (size_t)EMBED * FEAT, EMBED, bf * EMBED,
                               (size_t)EMBED * FEAT, EMBED, 0},
                    &err) ||
        take_floats(
            &ops[2],
            (size_t[]){bw * EMBED, bw * WORD_DIM, n_gru, bw * EMBED, bw * WORD_DIM, n_gru, 0},
            &err) ||
        take_floats(&ops[3],
                    (size_t[]){(size_t)B * EMBED, bf, bf * EMBED, n_gpo, (size_t)B * EMBED,
                               bf * EMBED, n_gpo, 0},
                    &err) ||
        take_floats(&ops[4],
                    (size_t[]){(size_t)B * B, (size_t)B * EMBED, (size_t)B * EMBED, 1,
                               (size_t)B * B, (size_t)B * EMBED, (size_t)B * EMBED, 0},
                    &err) ||
        take_floats(
            &ops[5],
            (size_t[]){bw * EMBED, bw * WORD_DIM, n_gru, bw * EMBED, bw * WORD_DIM, n_gru, 0},
            &err))
        goto end;
    size_t ws_bytes[] = {0, 0, vtr_gru_workspace_size(B, WORDS, WORD_DIM, EMBED, 2),
                         vtr_gpo_workspace_size(B, FRAMES, EMBED, VTR_GPO_D_PE, VTR_GPO_HIDDEN)};
    size_t scratch_bytes[] = {0, 0, vtr_gru_scratch_size(B, WORDS, WORD_DIM, EMBED, 2),
                              vtr_gpo_scratch_size(B, FRAMES, EMBED, VTR_GPO_D_PE,
                                                   VTR_GPO_HIDDEN)};
    for (int i = 2; i <= 3; i++) {
        if (!(ops[i].ws = device_buffer(ws_bytes[i], &err)) ||
            !(ops[i].scratch = device_buffer(scratch_bytes[i], &err)) ||
            !(ops[i].lengths = device_lengths(i == 2 ? WORDS : FRAMES, &err)))
            goto end;
    }
    for (int i = 0; i < B; i++)
        word_lengths[i] = WORDS;
    ops[5].lengths = ops[2].lengths;

    printf("%-26s %-28s %9s %9s %9s\n", "op", "shape", "ms", "GFLOP/s", "of sgemm");
    double sgemm_rate = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        double ms = 0;
        if (time_op(&ops[i], repeats, &ms, &err) != VTR_OK)
            goto end;
        double rate = ops[i].flops / (ms * 1e6);
        if (i == 0)
            sgemm_rate = rate;
        if (ops[i].flops > 0)
            printf("%-26s %-28s %9.3f %9.0f %8.0f%%\n", ops[i].name, ops[i].shape, ms, rate,
                   100 * rate / sgemm_rate);
        else
            printf("%-26s %-28s %9.3f %9s %9s\n", ops[i].name, ops[i].shape, ms, "-", "-");
    }
    status = 0;
end:
    if (status)
        fprintf(stderr, "op-timing: %s\n", err.msg);
    vtr_cudnn_gru_free(cudnn_gru);
    for (int i = 0; i < n_buffers; i++)
        vtr_cuda_free(buffers[i]);
    return status;
}
