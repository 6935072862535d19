/* The CUDA nn ops (lib/nn_cuda.h) against the CPU reference: for every op, random inputs,
 * forward and backward on both backends, every gradient accumulated onto the same random
 * starting values (so the += rule is checked too), then each tensor compared as
 * max|gpu - cpu| / max(max|cpu|, 1e-6). Ops with matrix products or long sums agree to
 * 1e-4; elementwise ops to 1e-6 (fused multiply-adds and the device's libm round
 * differently); dropout masks, sort orders, argmax and sums in the same order exactly.
 * Skipped where no GPU is present, or without CUDA. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lib/device.h"
#include "lib/rng.h"

#include "aggregate/adpool.h"
#include "aggregate/gpo.h"
#include "aggregate/set_pooling.h"
#include "aggregate/set_prediction.h"
#include "aggregate/span_pool.h"
#include "lib/activation.h"
#include "lib/embedding.h"
#include "lib/graph_attention.h"
#include "lib/gru.h"
#include "lib/linear.h"
#include "lib/nn_cuda.h"
#include "lib/norm.h"
#include "lib/pack.h"
#include "lib/optim.h"
#include "lib/params.h"
#include "lib/similarity.h"
#include "lib/softmax.h"
#include "lib/sync_batchnorm.h"
#include "match/adopt_loss.h"
#include "match/hgr_score.h"
#include "match/hinge_loss.h"
#include "match/phrase_attention.h"
#include "match/set_similarity.h"

#define TOL_PRODUCT 1e-4     /* matrix products, reductions in another order */
#define TOL_ELEMENTWISE 1e-6 /* the same math, up to a rounding */
#define TOL_EXACT 0.0        /* the same operations in the same order */

/* Every buffer a test takes, freed by release_all at its end (and at the start of the
 * next test, after a failed one). */
#define MAX_BUFFERS 256
static void *device_buffers[MAX_BUFFERS], *host_buffers[MAX_BUFFERS];
static int n_device, n_host;

static void release_all(void)
{
    for (int i = 0; i < n_device; i++)
        vtr_cuda_free(device_buffers[i]);
    for (int i = 0; i < n_host; i++)
        free(host_buffers[i]);
    n_device = n_host = 0;
}

static void start_on_gpu(void)
{
    release_all();
    test_need_cuda();
}

static void *host_alloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    CHECK_MSG(p && n_host < MAX_BUFFERS, "out of host buffers");
    host_buffers[n_host++] = p;
    return p;
}

static void *device_alloc(size_t bytes)
{
    vtr_error err;
    void *p = NULL;
    CHECK_MSG(n_device < MAX_BUFFERS, "out of device buffers");
    CHECK_OK(vtr_cuda_malloc(&p, bytes ? bytes : 1, &err));
    device_buffers[n_device++] = p;
    return p;
}

static float *random_floats(size_t n, float lo, float hi, vtr_rng *rng)
{
    float *x = host_alloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * vtr_rng_uniform(rng);
    return x;
}

/* a host copy of host floats (the CPU's gradient buffers start as copies) */
static float *copy_floats(const float *x, size_t n)
{
    float *y = host_alloc(sizeof(float) * n);
    memcpy(y, x, sizeof(float) * n);
    return y;
}

static void *to_device(const void *host, size_t bytes)
{
    vtr_error err;
    void *p = device_alloc(bytes);
    CHECK_OK(vtr_cuda_to_device(p, host, bytes, &err));
    return p;
}

static float *device_floats(const float *host, size_t n)
{
    return to_device(host, sizeof(float) * n);
}

static int *device_ints(const int *host, size_t n)
{
    return to_device(host, sizeof(int) * n);
}

static void *to_host(const void *dev, size_t bytes)
{
    vtr_error err;
    void *p = host_alloc(bytes);
    CHECK_OK(vtr_cuda_to_host(p, dev, bytes, &err));
    return p;
}

/* Fails unless the device tensor dev (n) matches the CPU's ref (n) within tol. */
static void expect_close(const char *name, const float *dev, const float *ref, size_t n, double tol)
{
    const float *got = to_host(dev, sizeof(float) * n);
    double max_ref = 0.0, max_diff = 0.0;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (fabs(ref[i]) > max_ref)
            max_ref = fabs(ref[i]);
        if (d > max_diff || d != d) {
            max_diff = d;
            worst = i;
        }
    }
    double rel = max_diff / (max_ref > 1e-6 ? max_ref : 1e-6);
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    %-28s %7zu values, relative error %.2e\n", name, n, rel);
    CHECK_MSG(rel <= tol, "%s: relative error %.3g > %.1g (element %zu: cuda %.9g, cpu %.9g)", name,
              rel, tol, worst, n ? got[worst] : 0.0f, n ? ref[worst] : 0.0f);
}

static void expect_same_ints(const char *name, const int *dev, const int *ref, size_t n)
{
    const int *got = to_host(dev, sizeof(int) * n);
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(got[i] == ref[i], "%s: element %zu: cuda %d, cpu %d", name, i, got[i], ref[i]);
}

/* ------------------------------------------------------------------------------------- */

TEST(cuda_nn_linear_and_bias)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 11, 0);
    int N = 33, C = 70, OC = 45;
    float *x = random_floats((size_t)N * C, -1, 1, &rng);
    float *w = random_floats((size_t)OC * C, -1, 1, &rng);
    float *b = random_floats(OC, -1, 1, &rng);
    float *g = random_floats((size_t)N * OC, -1, 1, &rng);
    float *dx0 = random_floats((size_t)N * C, -1, 1, &rng);
    float *dw0 = random_floats((size_t)OC * C, -1, 1, &rng);
    float *db0 = random_floats(OC, -1, 1, &rng);
    float *d_x = device_floats(x, (size_t)N * C), *d_w = device_floats(w, (size_t)OC * C);
    float *d_b = device_floats(b, OC), *d_g = device_floats(g, (size_t)N * OC);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        float *out = host_alloc(sizeof(float) * N * OC);
        float *dx = copy_floats(dx0, (size_t)N * C), *dw = copy_floats(dw0, (size_t)OC * C);
        float *db = copy_floats(db0, OC);
        vtr_linear_forward(out, x, w, with_bias ? b : NULL, N, C, OC);
        vtr_linear_backward(dx, dw, with_bias ? db : NULL, g, x, w, N, C, OC);

        float *d_out = device_alloc(sizeof(float) * N * OC);
        float *d_dx = device_floats(dx0, (size_t)N * C), *d_dw = device_floats(dw0, (size_t)OC * C);
        float *d_db = device_floats(db0, OC);
        CHECK_OK(vtr_cuda_linear_forward(d_out, d_x, d_w, with_bias ? d_b : NULL, N, C, OC, &err));
        CHECK_OK(vtr_cuda_linear_backward(d_dx, d_dw, with_bias ? d_db : NULL, d_g, d_x, d_w, N, C,
                                          OC, &err));
        expect_close("linear.out", d_out, out, (size_t)N * OC, TOL_PRODUCT);
        expect_close("linear.dinp", d_dx, dx, (size_t)N * C, TOL_PRODUCT);
        expect_close("linear.dweight", d_dw, dw, (size_t)OC * C, TOL_PRODUCT);
        expect_close("linear.dbias", d_db, db, OC, TOL_PRODUCT);
    }

    // bias alone: the column sums run in the same order in double on both
    float *y = copy_floats(g, (size_t)N * OC), *db = copy_floats(db0, OC);
    float *d_y = device_floats(g, (size_t)N * OC), *d_db = device_floats(db0, OC);
    vtr_bias_forward(y, b, N, OC);
    vtr_bias_backward(db, g, N, OC);
    CHECK_OK(vtr_cuda_bias_forward(d_y, d_b, N, OC, &err));
    CHECK_OK(vtr_cuda_bias_backward(d_db, d_g, N, OC, &err));
    expect_close("bias.out", d_y, y, (size_t)N * OC, TOL_EXACT);
    expect_close("bias.dbias", d_db, db, OC, TOL_EXACT);
    release_all();
}

typedef void (*unary_forward_fn)(float *out, const float *inp, size_t n);
typedef void (*unary_backward_fn)(float *dinp, const float *dout, const float *saved, size_t n);
typedef vtr_status (*cuda_unary_forward_fn)(float *out, const float *inp, size_t n, vtr_error *err);
typedef vtr_status (*cuda_unary_backward_fn)(float *dinp, const float *dout, const float *saved,
                                             size_t n, vtr_error *err);

TEST(cuda_nn_activations)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 12, 0);
    size_t n = 10007;
    struct {
        const char *name;
        unary_forward_fn forward;
        unary_backward_fn backward;
        cuda_unary_forward_fn cuda_forward;
        cuda_unary_backward_fn cuda_backward;
        int backward_reads_output;
    } ops[] = {
        {"relu", vtr_relu_forward, vtr_relu_backward, vtr_cuda_relu_forward, vtr_cuda_relu_backward,
         0},
        {"gelu", vtr_gelu_forward, vtr_gelu_backward, vtr_cuda_gelu_forward, vtr_cuda_gelu_backward,
         0},
        {"tanh", vtr_tanh_forward, vtr_tanh_backward, vtr_cuda_tanh_forward, vtr_cuda_tanh_backward,
         1},
        {"sigmoid", vtr_sigmoid_forward, vtr_sigmoid_backward, vtr_cuda_sigmoid_forward,
         vtr_cuda_sigmoid_backward, 1},
    };
    float *x = random_floats(n, -4, 4, &rng), *g = random_floats(n, -1, 1, &rng);
    float *dx0 = random_floats(n, -1, 1, &rng);
    float *d_x = device_floats(x, n), *d_g = device_floats(g, n);
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        char name[64];
        float *out = host_alloc(sizeof(float) * n), *dx = copy_floats(dx0, n);
        ops[k].forward(out, x, n);
        ops[k].backward(dx, g, ops[k].backward_reads_output ? out : x, n);
        float *d_out = device_alloc(sizeof(float) * n), *d_dx = device_floats(dx0, n);
        CHECK_OK(ops[k].cuda_forward(d_out, d_x, n, &err));
        CHECK_OK(
            ops[k].cuda_backward(d_dx, d_g, ops[k].backward_reads_output ? d_out : d_x, n, &err));
        snprintf(name, sizeof name, "%s.out", ops[k].name);
        expect_close(name, d_out, out, n, TOL_ELEMENTWISE);
        snprintf(name, sizeof name, "%s.dinp", ops[k].name);
        expect_close(name, d_dx, dx, n, TOL_ELEMENTWISE);

        // in place
        float *d_inplace = device_floats(x, n);
        CHECK_OK(ops[k].cuda_forward(d_inplace, d_inplace, n, &err));
        snprintf(name, sizeof name, "%s.out in place", ops[k].name);
        expect_close(name, d_inplace, out, n, TOL_ELEMENTWISE);
    }
    release_all();
}

TEST(cuda_nn_dropout_masks_match_cpu_bit_for_bit)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 13, 0);
    size_t n = 10007; /* not a multiple of 4: the last Philox block is partial */
    float ps[] = {0.0f, 0.1f, 0.5f, 1.0f};
    float *x = random_floats(n, -1, 1, &rng), *g = random_floats(n, -1, 1, &rng);
    float *dx0 = random_floats(n, -1, 1, &rng);
    float *d_x = device_floats(x, n), *d_g = device_floats(g, n);
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        float *out = host_alloc(sizeof(float) * n), *dx = copy_floats(dx0, n);
        vtr_dropout_forward(out, x, n, ps[k], 42, 1000 + k, 0);
        vtr_dropout_backward(dx, g, n, ps[k], 42, 1000 + k, 0);
        float *d_out = device_alloc(sizeof(float) * n), *d_dx = device_floats(dx0, n);
        CHECK_OK(vtr_cuda_dropout_forward(d_out, d_x, n, ps[k], 42, 1000 + k, 0, &err));
        CHECK_OK(vtr_cuda_dropout_backward(d_dx, d_g, n, ps[k], 42, 1000 + k, 0, &err));
        expect_close("dropout.out", d_out, out, n, TOL_EXACT);
        expect_close("dropout.dinp", d_dx, dx, n, TOL_ELEMENTWISE);
        // the mask itself: zero exactly where the CPU's is
        const float *got = to_host(d_out, sizeof(float) * n);
        for (size_t i = 0; i < n; i++)
            CHECK_MSG((got[i] == 0.0f) == (out[i] == 0.0f), "p %g: mask differs at %zu", ps[k], i);
    }
    release_all();
}

TEST(cuda_nn_embedding)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 14, 0);
    int V = 50, D = 70, N = 200;
    int *ids = host_alloc(sizeof(int) * N);
    for (int i = 0; i < N; i++)
        ids[i] = (int)vtr_rng_below(&rng, 20); /* many repeats */
    float *table = random_floats((size_t)V * D, -1, 1, &rng);
    float *g = random_floats((size_t)N * D, -1, 1, &rng);
    float *dt0 = random_floats((size_t)V * D, -1, 1, &rng);
    float *out = host_alloc(sizeof(float) * N * D), *dt = copy_floats(dt0, (size_t)V * D);
    vtr_embedding_forward(out, ids, table, N, D);
    vtr_embedding_backward(dt, g, ids, N, D);
    int *d_ids = device_ints(ids, N);
    float *d_table = device_floats(table, (size_t)V * D), *d_g = device_floats(g, (size_t)N * D);
    float *d_out = device_alloc(sizeof(float) * N * D), *d_dt = device_floats(dt0, (size_t)V * D);
    CHECK_OK(vtr_cuda_embedding_forward(d_out, d_ids, d_table, N, D, &err));
    CHECK_OK(vtr_cuda_embedding_backward(d_dt, d_g, d_ids, N, D, &err));
    expect_close("embedding.out", d_out, out, (size_t)N * D, TOL_EXACT);
    expect_close("embedding.dtable", d_dt, dt, (size_t)V * D, TOL_EXACT);
    /* the same ids as 8 padded captions of 25 (lengths 0 .. 25; padding never read) */
    enum { B = 8, L = 25 };
    int lengths[B] = {25, 0, 3, 25, 17, 1, 9, 24};
    for (int b = 0; b < B; b++)
        for (int t = lengths[b]; t < L; t++)
            ids[b * L + t] = -1;
    float *dtp = copy_floats(dt0, (size_t)V * D);
    vtr_embedding_forward_padded(out, ids, table, lengths, B, L, D);
    vtr_embedding_backward_padded(dtp, g, ids, lengths, B, L, D);
    int *d_idsp = device_ints(ids, N), *d_len = device_ints(lengths, B);
    float *d_dtp = device_floats(dt0, (size_t)V * D);
    CHECK_OK(vtr_cuda_embedding_forward_padded(d_out, d_idsp, d_table, d_len, B, L, D, &err));
    CHECK_OK(vtr_cuda_embedding_backward_padded(d_dtp, d_g, d_idsp, d_len, B, L, D, &err));
    expect_close("embedding.padded.out", d_out, out, (size_t)N * D, TOL_EXACT);
    expect_close("embedding.padded.dtable", d_dtp, dtp, (size_t)V * D, TOL_EXACT);
    release_all();
}

/* lib/pack.h: a batch's real rows packed and unpacked again, 70 items with lengths 0..T */
TEST(cuda_nn_pack_rows)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 19, 0);
    enum { B = 70, T = 13, D = 33 };
    int *lengths = host_alloc(sizeof(int) * B);
    for (int b = 0; b < B; b++)
        lengths[b] = (int)vtr_rng_below(&rng, T + 1);
    size_t n = vtr_pack_count(lengths, B);
    float *padded = random_floats((size_t)B * T * D, -1, 1, &rng);
    float *packed = host_alloc(sizeof(float) * (n + 1) * D);
    float *back = host_alloc(sizeof(float) * B * T * D);
    vtr_pack_rows(packed, padded, lengths, B, T, D);
    vtr_unpack_rows(back, packed, lengths, B, T, D);
    int *d_len = device_ints(lengths, B);
    float *d_padded = device_floats(padded, (size_t)B * T * D);
    float *d_packed = device_alloc(sizeof(float) * (n + 1) * D);
    float *d_back = device_floats(padded, (size_t)B * T * D); /* padding to be overwritten */
    CHECK_OK(vtr_cuda_pack_rows(d_packed, d_padded, d_len, B, T, D, &err));
    CHECK_OK(vtr_cuda_unpack_rows(d_back, d_packed, d_len, B, T, D, &err));
    expect_close("pack.packed", d_packed, packed, n * D, TOL_EXACT);
    expect_close("pack.unpacked", d_back, back, (size_t)B * T * D, TOL_EXACT);
    release_all();
}

TEST(cuda_nn_batchnorm)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 15, 0);
    int N = 37, C = 150; /* C spans several of the CPU's column blocks */
    size_t nc = (size_t)N * C;
    float *x = random_floats(nc, -2, 3, &rng), *w = random_floats(C, 0.5f, 1.5f, &rng);
    float *b = random_floats(C, -1, 1, &rng), *g = random_floats(nc, -1, 1, &rng);
    float *rm0 = random_floats(C, -1, 1, &rng), *rv0 = random_floats(C, 0.5f, 2, &rng);
    float *dx0 = random_floats(nc, -1, 1, &rng), *dw0 = random_floats(C, -1, 1, &rng);
    float *db0 = random_floats(C, -1, 1, &rng);

    float *out = host_alloc(sizeof(float) * nc), *mean = host_alloc(sizeof(float) * C);
    float *rstd = host_alloc(sizeof(float) * C), *eval = host_alloc(sizeof(float) * nc);
    float *rm = copy_floats(rm0, C), *rv = copy_floats(rv0, C);
    float *dx = copy_floats(dx0, nc), *dw = copy_floats(dw0, C), *db = copy_floats(db0, C);
    vtr_batchnorm_forward(out, mean, rstd, rm, rv, x, w, b, N, C, VTR_BATCHNORM_MOMENTUM,
                          VTR_BATCHNORM_EPS);
    vtr_batchnorm_backward(dx, dw, db, g, x, w, mean, rstd, N, C);
    vtr_batchnorm_forward_eval(eval, x, w, b, rm, rv, N, C, VTR_BATCHNORM_EPS);

    float *d_x = device_floats(x, nc), *d_w = device_floats(w, C), *d_b = device_floats(b, C);
    float *d_g = device_floats(g, nc), *d_rm = device_floats(rm0, C), *d_rv = device_floats(rv0, C);
    float *d_out = device_alloc(sizeof(float) * nc), *d_mean = device_alloc(sizeof(float) * C);
    float *d_rstd = device_alloc(sizeof(float) * C), *d_eval = device_alloc(sizeof(float) * nc);
    float *d_dx = device_floats(dx0, nc), *d_dw = device_floats(dw0, C);
    float *d_db = device_floats(db0, C);
    CHECK_OK(vtr_cuda_batchnorm_forward(d_out, d_mean, d_rstd, d_rm, d_rv, d_x, d_w, d_b, N, C,
                                        VTR_BATCHNORM_MOMENTUM, VTR_BATCHNORM_EPS, &err));
    CHECK_OK(
        vtr_cuda_batchnorm_backward(d_dx, d_dw, d_db, d_g, d_x, d_w, d_mean, d_rstd, N, C, &err));
    CHECK_OK(vtr_cuda_batchnorm_forward_eval(d_eval, d_x, d_w, d_b, d_rm, d_rv, N, C,
                                             VTR_BATCHNORM_EPS, &err));
    expect_close("batchnorm.out", d_out, out, nc, TOL_PRODUCT);
    expect_close("batchnorm.mean", d_mean, mean, C, TOL_PRODUCT);
    expect_close("batchnorm.rstd", d_rstd, rstd, C, TOL_PRODUCT);
    expect_close("batchnorm.running_mean", d_rm, rm, C, TOL_PRODUCT);
    expect_close("batchnorm.running_var", d_rv, rv, C, TOL_PRODUCT);
    expect_close("batchnorm.dinp", d_dx, dx, nc, TOL_PRODUCT);
    expect_close("batchnorm.dweight", d_dw, dw, C, TOL_PRODUCT);
    expect_close("batchnorm.dbias", d_db, db, C, TOL_PRODUCT);
    expect_close("batchnorm.eval", d_eval, eval, nc, TOL_PRODUCT);

    // without running statistics and without an input gradient
    dw = copy_floats(dw0, C), db = copy_floats(db0, C);
    vtr_batchnorm_forward(out, mean, rstd, NULL, NULL, x, w, b, N, C, VTR_BATCHNORM_MOMENTUM,
                          VTR_BATCHNORM_EPS);
    vtr_batchnorm_backward(NULL, dw, db, g, x, w, mean, rstd, N, C);
    d_dw = device_floats(dw0, C), d_db = device_floats(db0, C);
    CHECK_OK(vtr_cuda_batchnorm_forward(d_out, d_mean, d_rstd, NULL, NULL, d_x, d_w, d_b, N, C,
                                        VTR_BATCHNORM_MOMENTUM, VTR_BATCHNORM_EPS, &err));
    CHECK_OK(
        vtr_cuda_batchnorm_backward(NULL, d_dw, d_db, d_g, d_x, d_w, d_mean, d_rstd, N, C, &err));
    expect_close("batchnorm.out (no running)", d_out, out, nc, TOL_PRODUCT);
    expect_close("batchnorm.dweight (no dinp)", d_dw, dw, C, TOL_PRODUCT);
    expect_close("batchnorm.dbias (no dinp)", d_db, db, C, TOL_PRODUCT);
    release_all();
}

/* lib/sync_batchnorm.h on the GPU, one process: the CPU's statistics (the same sums, up to
 * the GPU's contractions, and the same host arithmetic), output and gradients, for the
 * rows of a global batch of 2 N (the statistics divide by N_global). */
TEST(cuda_nn_sync_batchnorm)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 16, 0);
    int N = 29, C = 140;
    int64_t Ng = 2 * N;
    size_t nc = (size_t)N * C;
    vtr_dist one = {.size = 1};
    float *x = random_floats(nc, -2, 3, &rng), *w = random_floats(C, 0.5f, 1.5f, &rng);
    float *b = random_floats(C, -1, 1, &rng), *g = random_floats(nc, -1, 1, &rng);
    float *rm = random_floats(C, -1, 1, &rng), *rv = random_floats(C, 0.5f, 2, &rng);
    float *dx = random_floats(nc, -1, 1, &rng), *dw = random_floats(C, -1, 1, &rng);
    float *db = random_floats(C, -1, 1, &rng);
    float *d_x = device_floats(x, nc), *d_w = device_floats(w, C), *d_b = device_floats(b, C);
    float *d_g = device_floats(g, nc), *d_rm = device_floats(rm, C), *d_rv = device_floats(rv, C);
    float *d_dx = device_floats(dx, nc), *d_dw = device_floats(dw, C);
    float *d_db = device_floats(db, C), *d_out = device_alloc(sizeof(float) * nc);
    float *d_mean = device_alloc(sizeof(float) * C), *d_rstd = device_alloc(sizeof(float) * C);
    double *d_scratch = device_alloc(sizeof(double) * 2 * C);

    float *out = host_alloc(sizeof(float) * nc), *mean = host_alloc(sizeof(float) * C);
    float *rstd = host_alloc(sizeof(float) * C);
    double *scratch = host_alloc(sizeof(double) * 2 * C);
    CHECK_OK(vtr_sync_batchnorm_forward(&one, VTR_DEVICE_CPU, out, mean, rstd, rm, rv, x, w, b, N,
                                        C, Ng, VTR_BATCHNORM_MOMENTUM, VTR_BATCHNORM_EPS, scratch,
                                        &err));
    CHECK_OK(vtr_sync_batchnorm_backward(&one, VTR_DEVICE_CPU, dx, dw, db, g, x, w, mean, rstd, N,
                                         C, Ng, scratch, &err));
    CHECK_OK(vtr_sync_batchnorm_forward(&one, VTR_DEVICE_CUDA, d_out, d_mean, d_rstd, d_rm, d_rv,
                                        d_x, d_w, d_b, N, C, Ng, VTR_BATCHNORM_MOMENTUM,
                                        VTR_BATCHNORM_EPS, d_scratch, &err));
    CHECK_OK(vtr_sync_batchnorm_backward(&one, VTR_DEVICE_CUDA, d_dx, d_dw, d_db, d_g, d_x, d_w,
                                         d_mean, d_rstd, N, C, Ng, d_scratch, &err));
    expect_close("sync_batchnorm.mean", d_mean, mean, C, TOL_ELEMENTWISE);
    expect_close("sync_batchnorm.rstd", d_rstd, rstd, C, TOL_ELEMENTWISE);
    expect_close("sync_batchnorm.running_mean", d_rm, rm, C, TOL_ELEMENTWISE);
    expect_close("sync_batchnorm.running_var", d_rv, rv, C, TOL_ELEMENTWISE);
    expect_close("sync_batchnorm.out", d_out, out, nc, TOL_ELEMENTWISE);
    expect_close("sync_batchnorm.dweight", d_dw, dw, C, TOL_ELEMENTWISE);
    expect_close("sync_batchnorm.dbias", d_db, db, C, TOL_ELEMENTWISE);
    expect_close("sync_batchnorm.dinp", d_dx, dx, nc, TOL_ELEMENTWISE);
    release_all();
}

TEST(cuda_nn_layernorm_and_l2norm)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 16, 0);
    int N = 37, C = 150;
    size_t nc = (size_t)N * C;
    float *x = random_floats(nc, -2, 3, &rng), *w = random_floats(C, 0.5f, 1.5f, &rng);
    float *b = random_floats(C, -1, 1, &rng), *g = random_floats(nc, -1, 1, &rng);
    float *dx0 = random_floats(nc, -1, 1, &rng), *dw0 = random_floats(C, -1, 1, &rng);
    float *db0 = random_floats(C, -1, 1, &rng);
    float *d_x = device_floats(x, nc), *d_w = device_floats(w, C), *d_b = device_floats(b, C);
    float *d_g = device_floats(g, nc);

    float *out = host_alloc(sizeof(float) * nc), *mean = host_alloc(sizeof(float) * N);
    float *rstd = host_alloc(sizeof(float) * N);
    float *dx = copy_floats(dx0, nc), *dw = copy_floats(dw0, C), *db = copy_floats(db0, C);
    vtr_layernorm_forward(out, mean, rstd, x, w, b, N, C, VTR_LAYERNORM_EPS);
    vtr_layernorm_backward(dx, dw, db, g, x, w, mean, rstd, N, C);
    float *d_out = device_alloc(sizeof(float) * nc), *d_mean = device_alloc(sizeof(float) * N);
    float *d_rstd = device_alloc(sizeof(float) * N);
    float *d_dx = device_floats(dx0, nc), *d_dw = device_floats(dw0, C);
    float *d_db = device_floats(db0, C);
    CHECK_OK(vtr_cuda_layernorm_forward(d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C,
                                        VTR_LAYERNORM_EPS, &err));
    CHECK_OK(
        vtr_cuda_layernorm_backward(d_dx, d_dw, d_db, d_g, d_x, d_w, d_mean, d_rstd, N, C, &err));
    expect_close("layernorm.out", d_out, out, nc, TOL_PRODUCT);
    expect_close("layernorm.mean", d_mean, mean, N, TOL_PRODUCT);
    expect_close("layernorm.rstd", d_rstd, rstd, N, TOL_PRODUCT);
    expect_close("layernorm.dinp", d_dx, dx, nc, TOL_PRODUCT);
    expect_close("layernorm.dweight", d_dw, dw, C, TOL_PRODUCT);
    expect_close("layernorm.dbias", d_db, db, C, TOL_PRODUCT);

    // l2norm, with an all-zero row (norm 0: the second term of the gradient is dropped)
    memset(x + 5 * (size_t)C, 0, sizeof(float) * C);
    d_x = device_floats(x, nc);
    float *norm = host_alloc(sizeof(float) * N);
    dx = copy_floats(dx0, nc);
    vtr_l2norm_forward(out, norm, x, N, C);
    vtr_l2norm_backward(dx, g, x, norm, N, C);
    float *d_norm = device_alloc(sizeof(float) * N);
    d_dx = device_floats(dx0, nc);
    CHECK_OK(vtr_cuda_l2norm_forward(d_out, d_norm, d_x, N, C, &err));
    CHECK_OK(vtr_cuda_l2norm_backward(d_dx, d_g, d_x, d_norm, N, C, &err));
    expect_close("l2norm.out", d_out, out, nc, TOL_PRODUCT);
    expect_close("l2norm.norm", d_norm, norm, N, TOL_PRODUCT);
    expect_close("l2norm.dinp", d_dx, dx, nc, TOL_PRODUCT);
    release_all();
}

TEST(cuda_nn_masked_softmax)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 17, 0);
    int B = 9, T = 13;
    size_t bt = (size_t)B * T;
    int lengths[9] = {13, 1, 5, 13, 7, 2, 9, 13, 4};
    float *x = random_floats(bt, -3, 3, &rng), *g = random_floats(bt, -1, 1, &rng);
    float *dx0 = random_floats(bt, -1, 1, &rng);
    int *d_len = device_ints(lengths, B);
    float *d_g = device_floats(g, bt);
    for (int masked = 0; masked < 2; masked++) {
        float temperature = masked ? 0.1f : 1.0f;
        float *out = host_alloc(sizeof(float) * bt), *dx = copy_floats(dx0, bt);
        vtr_masked_softmax_forward(out, x, masked ? lengths : NULL, B, T, temperature);
        vtr_masked_softmax_backward(dx, g, out, masked ? lengths : NULL, B, T, temperature);
        float *d_out = device_floats(x, bt), *d_dx = device_floats(dx0, bt);
        // in place, as GPO calls it
        CHECK_OK(vtr_cuda_masked_softmax_forward(d_out, d_out, masked ? d_len : NULL, B, T,
                                                 temperature, &err));
        CHECK_OK(vtr_cuda_masked_softmax_backward(d_dx, d_g, d_out, masked ? d_len : NULL, B, T,
                                                  temperature, &err));
        expect_close("softmax.out", d_out, out, bt, TOL_PRODUCT);
        expect_close("softmax.dinp", d_dx, dx, bt, TOL_PRODUCT);
    }
    release_all();
}

TEST(cuda_nn_cosine_similarity)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 18, 0);
    int NA = 17, NB = 23, D = 40;
    float *a = random_floats((size_t)NA * D, -1, 1, &rng);
    float *b = random_floats((size_t)NB * D, -1, 1, &rng);
    float *gs = random_floats((size_t)NA * NB, -1, 1, &rng);
    float *da0 = random_floats((size_t)NA * D, -1, 1, &rng);
    float *db0 = random_floats((size_t)NB * D, -1, 1, &rng);
    float *S = host_alloc(sizeof(float) * NA * NB);
    float *da = copy_floats(da0, (size_t)NA * D), *db = copy_floats(db0, (size_t)NB * D);
    vtr_cosine_similarity_forward(S, a, b, NA, NB, D);
    vtr_cosine_similarity_backward(da, db, gs, a, b, NA, NB, D);
    float *d_a = device_floats(a, (size_t)NA * D), *d_b = device_floats(b, (size_t)NB * D);
    float *d_gs = device_floats(gs, (size_t)NA * NB), *d_S = device_alloc(sizeof(float) * NA * NB);
    float *d_da = device_floats(da0, (size_t)NA * D), *d_db = device_floats(db0, (size_t)NB * D);
    CHECK_OK(vtr_cuda_cosine_similarity_forward(d_S, d_a, d_b, NA, NB, D, &err));
    CHECK_OK(vtr_cuda_cosine_similarity_backward(d_da, d_db, d_gs, d_a, d_b, NA, NB, D, &err));
    expect_close("similarity.S", d_S, S, (size_t)NA * NB, TOL_PRODUCT);
    expect_close("similarity.da", d_da, da, (size_t)NA * D, TOL_PRODUCT);
    expect_close("similarity.db", d_db, db, (size_t)NB * D, TOL_PRODUCT);
    release_all();
}

/* The GRU on the GPU against the CPU, with vtr's own kernels or cuDNN's RNN (cudnn): one
 * direction, two averaged, two concatenated, over ragged lengths; the input and parameter
 * gradients added to what the buffers held. */
static void check_gru(bool cudnn)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 19, 0);
    int B = 7, T = 9, D = 11, H = 13;
    int lengths[7] = {9, 1, 4, 9, 6, 2, 7};
    size_t bt = (size_t)B * T;
    struct {
        int dirs;
        vtr_gru_merge merge;
    } cases[] = {{1, VTR_GRU_AVERAGE}, {2, VTR_GRU_AVERAGE}, {2, VTR_GRU_CONCAT}};
    float *x = random_floats(bt * D, -1, 1, &rng);
    float *dx0 = random_floats(bt * D, -1, 1, &rng);
    int *d_len = device_ints(lengths, B);
    float *d_x = device_floats(x, bt * D);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int dirs = cases[c].dirs;
        int OH = dirs == 2 && cases[c].merge == VTR_GRU_CONCAT ? 2 * H : H;
        size_t np = vtr_gru_param_count(D, H, dirs);
        size_t wsize = vtr_gru_workspace_size(B, T, D, H, dirs);
        size_t ssize = vtr_gru_scratch_size(B, T, D, H, dirs);
        float *params = random_floats(np, -0.4f, 0.4f, &rng);
        float *g = random_floats(bt * OH, -1, 1, &rng); /* padded positions: ignored */
        float *dp0 = random_floats(np, -1, 1, &rng);
        float *out = host_alloc(sizeof(float) * bt * OH);
        float *dx = copy_floats(dx0, bt * D), *dp = copy_floats(dp0, np);
        void *ws = host_alloc(wsize), *sc = host_alloc(ssize);
        vtr_gru_forward(out, ws, x, lengths, params, B, T, D, H, dirs, cases[c].merge);
        vtr_gru_backward(dx, dp, sc, g, x, lengths, params, ws, B, T, D, H, dirs, cases[c].merge);

        float *d_params = device_floats(params, np), *d_g = device_floats(g, bt * OH);
        float *d_out = device_alloc(sizeof(float) * bt * OH);
        float *d_dx = device_floats(dx0, bt * D), *d_dp = device_floats(dp0, np);
        void *d_ws = device_alloc(wsize), *d_sc = device_alloc(ssize);
        if (cudnn) {
            vtr_cudnn_gru *engine = NULL;
            CHECK_OK(vtr_cudnn_gru_new(D, H, dirs, &engine, &err));
            CHECK_OK(vtr_cudnn_gru_forward(engine, d_out, d_x, lengths, d_len, d_params, B, T,
                                           cases[c].merge, &err));
            CHECK_OK(vtr_cudnn_gru_backward(engine, d_dx, d_dp, d_g, d_x, d_len, B, T,
                                            cases[c].merge, &err));
            vtr_cudnn_gru_free(engine);
        } else {
            CHECK_OK(vtr_cuda_gru_forward(d_out, d_ws, d_x, d_len, d_params, B, T, D, H, dirs,
                                          cases[c].merge, &err));
            CHECK_OK(vtr_cuda_gru_backward(d_dx, d_dp, d_sc, d_g, d_x, d_len, d_params, d_ws, B, T,
                                           D, H, dirs, cases[c].merge, &err));
        }
        expect_close("gru.out", d_out, out, bt * OH, TOL_PRODUCT);
        expect_close("gru.dinp", d_dx, dx, bt * D, TOL_PRODUCT);
        expect_close("gru.dparams", d_dp, dp, np, TOL_PRODUCT);
    }
    release_all();
}

TEST(cuda_nn_gru_one_and_two_directions_ragged)
{
    check_gru(false);
}

TEST(cuda_nn_cudnn_gru_one_and_two_directions_ragged)
{
    check_gru(true);
}

/* cuDNN's GRU refuses a length outside 1 .. T, and a backward of another shape than its
 * forward's, each in one line. */
TEST(cuda_nn_cudnn_gru_refuses_bad_shapes)
{
    start_on_gpu();
    vtr_error err;
    int B = 2, T = 3, D = 4, H = 5, lengths[2] = {3, 0};
    vtr_cudnn_gru *engine = NULL;
    CHECK_FAILS(vtr_cudnn_gru_new(D, H, 3, &engine, &err), VTR_ERR_INVALID, "3 directions");
    CHECK(engine == NULL);
    CHECK_OK(vtr_cudnn_gru_new(D, H, 2, &engine, &err));
    float *d_x = device_alloc(sizeof(float) * B * T * D);
    float *d_out = device_alloc(sizeof(float) * B * T * H);
    float *d_params = device_alloc(sizeof(float) * vtr_gru_param_count(D, H, 2));
    int *d_len = device_ints(lengths, B);
    CHECK_FAILS(vtr_cudnn_gru_forward(engine, d_out, d_x, lengths, d_len, d_params, B, T,
                                      VTR_GRU_AVERAGE, &err),
                VTR_ERR_INVALID, "item 1 has length 0 of 3");
    CHECK_FAILS(vtr_cudnn_gru_backward(engine, d_x, d_params, d_out, d_x, d_len, B, T,
                                       VTR_GRU_AVERAGE, &err),
                VTR_ERR_INVALID, "backward of (2, 3) after a forward of (0, 0)");
    vtr_cudnn_gru_free(engine);
    release_all();
}

TEST(cuda_nn_set_pooling)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 20, 0);
    int B = 9, T = 13, D = 70, K = 3;
    int lengths[9] = {13, 1, 5, 13, 7, 2, 9, 13, 3};
    size_t btd = (size_t)B * T * D, bd = (size_t)B * D;
    float *x = random_floats(btd, -1, 1, &rng), *g = random_floats(bd, -1, 1, &rng);
    float *dx0 = random_floats(btd, -1, 1, &rng);
    int *d_len = device_ints(lengths, B);
    float *d_x = device_floats(x, btd), *d_g = device_floats(g, bd);

    float *out = host_alloc(sizeof(float) * bd), *dx = copy_floats(dx0, btd);
    float *d_out = device_alloc(sizeof(float) * bd), *d_dx = device_floats(dx0, btd);
    vtr_mean_pool_forward(out, x, lengths, B, T, D);
    vtr_mean_pool_backward(dx, g, lengths, B, T, D);
    CHECK_OK(vtr_cuda_mean_pool_forward(d_out, d_x, d_len, B, T, D, &err));
    CHECK_OK(vtr_cuda_mean_pool_backward(d_dx, d_g, d_len, B, T, D, &err));
    expect_close("mean_pool.out", d_out, out, bd, TOL_EXACT);
    expect_close("mean_pool.dinp", d_dx, dx, btd, TOL_ELEMENTWISE);

    int *argmax = host_alloc(sizeof(int) * bd), *d_argmax = device_alloc(sizeof(int) * bd);
    dx = copy_floats(dx0, btd), d_dx = device_floats(dx0, btd);
    vtr_max_pool_forward(out, argmax, x, lengths, B, T, D);
    vtr_max_pool_backward(dx, g, argmax, B, T, D);
    CHECK_OK(vtr_cuda_max_pool_forward(d_out, d_argmax, d_x, d_len, B, T, D, &err));
    CHECK_OK(vtr_cuda_max_pool_backward(d_dx, d_g, d_argmax, B, T, D, &err));
    expect_close("max_pool.out", d_out, out, bd, TOL_EXACT);
    expect_same_ints("max_pool.argmax", d_argmax, argmax, bd);
    expect_close("max_pool.dinp", d_dx, dx, btd, TOL_EXACT);

    size_t bkd = (size_t)B * K * D;
    int *index = host_alloc(sizeof(int) * bkd), *d_index = device_alloc(sizeof(int) * bkd);
    dx = copy_floats(dx0, btd), d_dx = device_floats(dx0, btd);
    vtr_kmax_pool_forward(out, index, x, lengths, B, T, D, K);
    vtr_kmax_pool_backward(dx, g, index, lengths, B, T, D, K);
    CHECK_OK(vtr_cuda_kmax_pool_forward(d_out, d_index, d_x, d_len, B, T, D, K, &err));
    CHECK_OK(vtr_cuda_kmax_pool_backward(d_dx, d_g, d_index, d_len, B, T, D, K, &err));
    expect_close("kmax_pool.out", d_out, out, bd, TOL_EXACT);
    expect_same_ints("kmax_pool.index", d_index, index, bkd);
    expect_close("kmax_pool.dinp", d_dx, dx, btd, TOL_EXACT);

    float *sw = random_floats(D, -0.5f, 0.5f, &rng), *sb = random_floats(1, -1, 1, &rng);
    float *dsw0 = random_floats(D, -1, 1, &rng), *dsb0 = random_floats(1, -1, 1, &rng);
    float *d_sw = device_floats(sw, D), *d_sb = device_floats(sb, 1);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        float *weights = host_alloc(sizeof(float) * B * T);
        float *dsw = copy_floats(dsw0, D), *dsb = copy_floats(dsb0, 1);
        dx = copy_floats(dx0, btd);
        vtr_attention_pool_forward(out, weights, x, sw, with_bias ? sb : NULL, lengths, B, T, D);
        vtr_attention_pool_backward(dx, dsw, with_bias ? dsb : NULL, g, x, weights, sw, lengths, B,
                                    T, D);
        float *d_weights = device_alloc(sizeof(float) * B * T);
        float *d_dsw = device_floats(dsw0, D), *d_dsb = device_floats(dsb0, 1);
        d_dx = device_floats(dx0, btd);
        CHECK_OK(vtr_cuda_attention_pool_forward(d_out, d_weights, d_x, d_sw,
                                                 with_bias ? d_sb : NULL, d_len, B, T, D, &err));
        CHECK_OK(vtr_cuda_attention_pool_backward(d_dx, d_dsw, with_bias ? d_dsb : NULL, d_g, d_x,
                                                  d_weights, d_sw, d_len, B, T, D, &err));
        expect_close("attention_pool.out", d_out, out, bd, TOL_PRODUCT);
        expect_close("attention_pool.weights", d_weights, weights, (size_t)B * T, TOL_PRODUCT);
        expect_close("attention_pool.dinp", d_dx, dx, btd, TOL_PRODUCT);
        expect_close("attention_pool.dscore_weight", d_dsw, dsw, D, TOL_PRODUCT);
        expect_close("attention_pool.dscore_bias", d_dsb, dsb, 1, TOL_PRODUCT);
    }
    release_all();
}

TEST(cuda_nn_gpo)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 21, 0);
    int B = 6, T = 10, D = 40, d_pe = VTR_GPO_D_PE, hidden = VTR_GPO_HIDDEN;
    int lengths[6] = {10, 1, 4, 10, 7, 2};
    size_t btd = (size_t)B * T * D, bd = (size_t)B * D, bt = (size_t)B * T;
    size_t np = vtr_gpo_param_count(d_pe, hidden);
    size_t wsize = vtr_gpo_workspace_size(B, T, D, d_pe, hidden);
    size_t ssize = vtr_gpo_scratch_size(B, T, D, d_pe, hidden);
    float *x = random_floats(btd, -1, 1, &rng), *g = random_floats(bd, -1, 1, &rng);
    float *params = random_floats(np, -0.3f, 0.3f, &rng);
    float *dx0 = random_floats(btd, -1, 1, &rng), *dp0 = random_floats(np, -1, 1, &rng);
    float *out = host_alloc(sizeof(float) * bd), *weights = host_alloc(sizeof(float) * bt);
    float *dx = copy_floats(dx0, btd), *dp = copy_floats(dp0, np);
    void *ws = host_alloc(wsize), *sc = host_alloc(ssize);
    vtr_gpo_forward(out, weights, ws, x, lengths, params, B, T, D, d_pe, hidden);
    vtr_gpo_backward(dx, dp, sc, g, x, weights, lengths, params, ws, B, T, D, d_pe, hidden);

    int *d_len = device_ints(lengths, B);
    float *d_x = device_floats(x, btd), *d_g = device_floats(g, bd);
    float *d_params = device_floats(params, np);
    float *d_out = device_alloc(sizeof(float) * bd), *d_weights = device_alloc(sizeof(float) * bt);
    float *d_dx = device_floats(dx0, btd), *d_dp = device_floats(dp0, np);
    void *d_ws = device_alloc(wsize), *d_sc = device_alloc(ssize);
    CHECK_OK(vtr_cuda_gpo_forward(d_out, d_weights, d_ws, d_x, d_len, d_params, B, T, D, d_pe,
                                  hidden, &err));
    CHECK_OK(vtr_cuda_gpo_backward(d_dx, d_dp, d_sc, d_g, d_x, d_weights, d_len, d_params, d_ws, B,
                                   T, D, d_pe, hidden, &err));
    expect_close("gpo.out", d_out, out, bd, TOL_PRODUCT);
    expect_close("gpo.weights", d_weights, weights, bt, TOL_PRODUCT);
    expect_close("gpo.dinp", d_dx, dx, btd, TOL_PRODUCT);
    expect_close("gpo.dparams", d_dp, dp, np, TOL_PRODUCT);
    release_all();
}

/* ADPOOL: ragged lengths from 1 to T (T = 70 sorts by comparison on the CPU, by ranks on
 * the GPU: the same order), ties in every column, with and without an input gradient, every
 * gradient accumulated onto random values. */
TEST(cuda_nn_adpool)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 24, 0);
    enum { B = 7, T = 70, D = 45 };
    int lengths[B] = {70, 1, 5, 70, 33, 2, 64};
    size_t btd = (size_t)B * T * D, bd = (size_t)B * D, bt = (size_t)B * T;
    size_t np = vtr_adpool_param_count(D);
    size_t wsize = vtr_adpool_workspace_size(B, T, D), ssize = vtr_adpool_scratch_size(B, T, D);
    float *x = random_floats(btd, -2, 2, &rng), *g = random_floats(bd, -1, 1, &rng);
    for (size_t i = 0; i < btd; i += 7)
        x[i] = 0.5f; /* ties: the lower index first on both */
    float *params = random_floats(np, -0.5f, 0.5f, &rng);
    float *dx0 = random_floats(btd, -1, 1, &rng), *dp0 = random_floats(np, -1, 1, &rng);
    float *out = host_alloc(sizeof(float) * bd), *theta = host_alloc(sizeof(float) * bt);
    float *omega = host_alloc(sizeof(float) * 2 * B);
    void *ws = host_alloc(wsize), *sc = host_alloc(ssize);
    vtr_adpool_forward(out, theta, omega, ws, x, lengths, params, B, T, D);

    int *d_len = device_ints(lengths, B);
    float *d_x = device_floats(x, btd), *d_g = device_floats(g, bd);
    float *d_params = device_floats(params, np);
    float *d_out = device_alloc(sizeof(float) * bd), *d_theta = device_alloc(sizeof(float) * bt);
    float *d_omega = device_alloc(sizeof(float) * 2 * B);
    void *d_ws = device_alloc(wsize), *d_sc = device_alloc(ssize);
    CHECK_OK(vtr_cuda_adpool_forward(d_out, d_theta, d_omega, d_ws, d_x, d_len, d_params, B, T, D,
                                     &err));
    expect_close("adpool.out", d_out, out, bd, TOL_PRODUCT);
    expect_close("adpool.theta", d_theta, theta, bt, TOL_PRODUCT);
    expect_close("adpool.omega", d_omega, omega, 2 * (size_t)B, TOL_PRODUCT);
    /* the sort orders, zero past each length */
    size_t idx = vtr_adpool_workspace_layout_of(B, T, D).sort_index;
    expect_same_ints("adpool.sort_index", (const int *)((char *)d_ws + idx),
                     (const int *)((char *)ws + idx), btd);

    for (int with_dinp = 0; with_dinp < 2; with_dinp++) {
        float *dx = copy_floats(dx0, btd), *dp = copy_floats(dp0, np);
        float *d_dx = device_floats(dx0, btd), *d_dp = device_floats(dp0, np);
        vtr_adpool_backward(with_dinp ? dx : NULL, dp, sc, g, x, theta, omega, lengths, params, ws,
                            B, T, D);
        CHECK_OK(vtr_cuda_adpool_backward(with_dinp ? d_dx : NULL, d_dp, d_sc, d_g, d_x, d_theta,
                                          d_omega, d_len, d_params, d_ws, B, T, D, &err));
        if (with_dinp)
            expect_close("adpool.dinp", d_dx, dx, btd, TOL_PRODUCT);
        expect_close("adpool.dparams", d_dp, dp, np, TOL_PRODUCT);
    }
    release_all();
}

/* The set prediction module, one case: ragged lengths (1 .. N), dropout p from (7, 300) at
 * item `first`, with or without the input, global and diversity gradients; every output
 * and gradient accumulated onto random values. */
static void set_prediction_case(vtr_set_prediction_config c, int B, int N, const int *lengths,
                                float p, int64_t first, int full)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 25, (uint64_t)B * N);
    size_t np = vtr_set_prediction_param_count(&c);
    size_t wsize = vtr_set_prediction_workspace_size(&c, B, N);
    size_t ssize = vtr_set_prediction_scratch_size(&c, B, N);
    size_t bkd = (size_t)B * c.K * c.D, bnc = (size_t)B * N * c.C, bd = (size_t)B * c.D;
    float *params = random_floats(np, -0.3f, 0.3f, &rng);
    float *inp = random_floats(bnc, -1.5f, 1.5f, &rng), *glob = random_floats(bd, -1, 1, &rng);
    float *dset = random_floats(bkd, -0.5f, 0.5f, &rng);
    float *dslots = random_floats(bkd, -0.5f, 0.5f, &rng);
    float *dinp = random_floats(bnc, -0.1f, 0.1f, &rng),
          *dglob = random_floats(bd, -0.1f, 0.1f, &rng);
    float *dp = random_floats(np, -0.1f, 0.1f, &rng);
    float *set = host_alloc(sizeof(float) * bkd), *slots_n = host_alloc(sizeof(float) * bkd);
    void *ws = host_alloc(wsize), *sc = host_alloc(ssize);

    int *d_len = device_ints(lengths, B);
    float *d_params = device_floats(params, np), *d_inp = device_floats(inp, bnc);
    float *d_glob = device_floats(glob, bd), *d_dset = device_floats(dset, bkd);
    float *d_dslots = device_floats(dslots, bkd), *d_dinp = device_floats(dinp, bnc);
    float *d_dglob = device_floats(dglob, bd), *d_dp = device_floats(dp, np);
    float *d_set = device_alloc(sizeof(float) * bkd),
          *d_slots_n = device_alloc(sizeof(float) * bkd);
    void *d_ws = device_alloc(wsize), *d_sc = device_alloc(ssize);

    vtr_set_prediction_forward(set, slots_n, ws, inp, lengths, glob, params, &c, B, N, p, 7, 300,
                               first);
    CHECK_OK(vtr_cuda_set_prediction_forward(d_set, d_slots_n, d_ws, d_inp, d_len, d_glob, d_params,
                                             &c, B, N, p, 7, 300, first, &err));
    expect_close("set_prediction.set", d_set, set, bkd, TOL_PRODUCT);
    expect_close("set_prediction.slots_n", d_slots_n, slots_n, bkd, TOL_PRODUCT);
    for (int t = 1; t <= c.T; t++)
        expect_close("set_prediction.E_t", vtr_set_prediction_slots_at(d_ws, &c, B, N, t),
                     vtr_set_prediction_slots_at(ws, &c, B, N, t), bkd, TOL_PRODUCT);

    vtr_set_prediction_backward(full ? dinp : NULL, full ? dglob : NULL, dp, sc, dset,
                                full ? dslots : NULL, ws, inp, lengths, glob, params, &c, B, N, p,
                                7, 300, first);
    CHECK_OK(vtr_cuda_set_prediction_backward(
        full ? d_dinp : NULL, full ? d_dglob : NULL, d_dp, d_sc, d_dset, full ? d_dslots : NULL,
        d_ws, d_inp, d_len, d_glob, d_params, &c, B, N, p, 7, 300, first, &err));
    expect_close("set_prediction.dinp", d_dinp, dinp, bnc, TOL_PRODUCT);
    expect_close("set_prediction.dglob", d_dglob, dglob, bd, TOL_PRODUCT);
    for (int i = 0; i < VTR_SET_PREDICTION_TENSORS; i++) {
        int shape[2];
        size_t off;
        const char *name = vtr_set_prediction_param_name(&c, i, shape, &off);
        size_t n = (size_t)shape[0] * (size_t)(shape[1] ? shape[1] : 1);
        if (strcmp(name, "norm_q.bias") != 0) /* rounding noise only (the header) */
            expect_close(name, d_dp + off, dp + off, n, TOL_PRODUCT);
    }
    release_all();
}

TEST(cuda_nn_set_prediction)
{
    vtr_set_prediction_config small = {.C = 16, .D = 12, .K = 4, .T = 3, .Dh = 20, .H = 48};
    int lengths[5] = {7, 1, 3, 7, 2};
    set_prediction_case(small, 5, 7, lengths, 0.0f, 0, 1);
    set_prediction_case(small, 5, 7, lengths, 0.2f, 3, 1);
    set_prediction_case(small, 5, 7, lengths, 0.1f, 0, 0);
    /* one slot, one iteration, one input per item */
    vtr_set_prediction_config one = {.C = 6, .D = 10, .K = 1, .T = 1, .Dh = 4, .H = 7};
    int ones[2] = {1, 1};
    set_prediction_case(one, 2, 1, ones, 0.2f, 0, 1);
    /* region-like: N 36, more items than a block of threads per row */
    vtr_set_prediction_config wide = {.C = 64, .D = 96, .K = 4, .T = 4, .Dh = 128, .H = 384};
    int many[40];
    for (int b = 0; b < 40; b++)
        many[b] = 1 + (b * 13) % 36;
    set_prediction_case(wide, 40, 36, many, 0.1f, 80, 1);
}

/* l2-normalized random rows (n,D) */
static float *random_unit_rows(size_t n, int D, vtr_rng *rng)
{
    float *x = random_floats(n * D, -1, 1, rng);
    for (size_t i = 0; i < n; i++)
        vtr_l2norm_row_forward(x + i * D, x + i * D, D);
    return x;
}

/* Smooth-Chamfer over more sets than a block (VTR_SET_BLOCK) on each side, S with a row
 * stride past its width; with and without either gradient. */
TEST(cuda_nn_smooth_chamfer)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 26, 0);
    enum { Na = 300, Nb = 270, Ka = 2, Kb = 3, D = 16, ldS = 280 };
    float *a = random_unit_rows((size_t)Na * Ka, D, &rng),
          *b = random_unit_rows((size_t)Nb * Kb, D, &rng);
    size_t ns = (size_t)Na * ldS, na = (size_t)Na * Ka * D, nb = (size_t)Nb * Kb * D;
    float *S = random_floats(ns, -1, 1, &rng), *dS = random_floats(ns, -1, 1, &rng);
    float *da0 = random_floats(na, -0.1f, 0.1f, &rng), *db0 = random_floats(nb, -0.1f, 0.1f, &rng);
    size_t ssize = vtr_smooth_chamfer_scratch_size(Na, Nb, Ka, Kb);
    void *sc = host_alloc(ssize), *d_sc = device_alloc(ssize);
    float *d_a = device_floats(a, na), *d_b = device_floats(b, nb), *d_S = device_floats(S, ns);
    float *d_dS = device_floats(dS, ns);
    vtr_smooth_chamfer_forward(S, ldS, sc, a, b, Na, Nb, Ka, Kb, D, VTR_SET_ALPHA);
    CHECK_OK(vtr_cuda_smooth_chamfer_forward(d_S, ldS, d_sc, d_a, d_b, Na, Nb, Ka, Kb, D,
                                             VTR_SET_ALPHA, &err));
    expect_close("smooth_chamfer.S", d_S, S, ns, TOL_PRODUCT);
    for (int which = 1; which <= 3; which++) {
        float *da = copy_floats(da0, na), *db = copy_floats(db0, nb);
        float *d_da = device_floats(da0, na), *d_db = device_floats(db0, nb);
        vtr_smooth_chamfer_backward(which & 1 ? da : NULL, which & 2 ? db : NULL, sc, dS, ldS, a, b,
                                    Na, Nb, Ka, Kb, D, VTR_SET_ALPHA);
        CHECK_OK(vtr_cuda_smooth_chamfer_backward(which & 1 ? d_da : NULL, which & 2 ? d_db : NULL,
                                                  d_sc, d_dS, ldS, d_a, d_b, Na, Nb, Ka, Kb, D,
                                                  VTR_SET_ALPHA, &err));
        expect_close("smooth_chamfer.da", d_da, da, na, TOL_PRODUCT);
        expect_close("smooth_chamfer.db", d_db, db, nb, TOL_PRODUCT);
    }
    release_all();
}

/* The diversity term (two equal slots in item 0, K = 1 gives 0) and MMD (equal rows, a near
 * pair, X and Y of different sizes, with and without either gradient). */
TEST(cuda_nn_set_regularisers)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 27, 0);
    float *d_loss = device_alloc(sizeof(float));
    int shapes[3][3] = {{50, 4, 64}, {300, 3, 17}, {3, 1, 5}};
    for (int k = 0; k < 3; k++) {
        int N = shapes[k][0], K = shapes[k][1], D = shapes[k][2];
        size_t n = (size_t)N * K * D;
        float *r = random_unit_rows((size_t)N * K, D, &rng);
        if (K > 1)
            memcpy(r + D, r, sizeof(float) * D);
        float *dr = random_floats(n, -0.1f, 0.1f, &rng), *d_r = device_floats(r, n);
        float *d_dr = device_floats(dr, n);
        float loss = vtr_set_diversity_forward(r, N, K, D);
        CHECK_OK(vtr_cuda_set_diversity_forward(d_loss, d_r, N, K, D, &err));
        expect_close("set_diversity.loss", d_loss, &loss, 1, TOL_PRODUCT);
        vtr_set_diversity_backward(dr, 0.7f, r, N, K, D);
        CHECK_OK(vtr_cuda_set_diversity_backward(d_dr, 0.7f, d_r, N, K, D, &err));
        expect_close("set_diversity.dr", d_dr, dr, n, TOL_PRODUCT);
    }
    long sizes[2][2] = {{64, 64}, {37, 120}};
    for (int k = 0; k < 2; k++) {
        long nx = sizes[k][0], ny = sizes[k][1];
        int D = 24;
        float *X = random_unit_rows((size_t)nx, D, &rng),
              *Y = random_unit_rows((size_t)ny, D, &rng);
        memcpy(X + 2 * D, X, sizeof(float) * D); /* equal rows: distance 0 */
        memcpy(Y + D, X, sizeof(float) * D);
        Y[D] += 1e-4f; /* a near pair */
        size_t ssize = vtr_set_mmd_scratch_size(nx, ny), nxd = (size_t)nx * D, nyd = (size_t)ny * D;
        void *sc = host_alloc(ssize), *d_sc = device_alloc(ssize);
        float *d_X = device_floats(X, nxd), *d_Y = device_floats(Y, nyd);
        float loss = vtr_set_mmd_forward(sc, X, Y, nx, ny, D, VTR_SET_MMD_GAMMA);
        CHECK_OK(
            vtr_cuda_set_mmd_forward(d_loss, d_sc, d_X, d_Y, nx, ny, D, VTR_SET_MMD_GAMMA, &err));
        expect_close("set_mmd.loss", d_loss, &loss, 1, TOL_PRODUCT);
        for (int which = 1; which <= 3; which++) {
            float *dx = random_floats(nxd, -0.1f, 0.1f, &rng),
                  *dy = random_floats(nyd, -0.1f, 0.1f, &rng);
            float *d_dx = device_floats(dx, nxd), *d_dy = device_floats(dy, nyd);
            vtr_set_mmd_backward(which & 1 ? dx : NULL, which & 2 ? dy : NULL, 0.3f, sc, X, Y, nx,
                                 ny, D, VTR_SET_MMD_GAMMA);
            CHECK_OK(vtr_cuda_set_mmd_backward(which & 1 ? d_dx : NULL, which & 2 ? d_dy : NULL,
                                               0.3f, d_sc, d_X, d_Y, nx, ny, D, VTR_SET_MMD_GAMMA,
                                               &err));
            expect_close("set_mmd.dx", d_dx, dx, nxd, TOL_PRODUCT);
            expect_close("set_mmd.dy", d_dy, dy, nyd, TOL_PRODUCT);
        }
    }
    release_all();
}

/* HGR's role span pooling: empty spans (the fill), a caption whose masks are all zero, spans
 * of one word, ties, phrases sharing words, with and without an input gradient. One
 * multiply forward and sums in the CPU's order: the forward and argmax exactly. */
TEST(cuda_nn_role_span_pool)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 25, 0);
    enum { B = 5, N = 6, L = 9, D = 37, R = 16 };
    size_t nin = (size_t)B * L * D, nout = (size_t)B * N * D, nr = (size_t)R * D;
    float *x = random_floats(nin, -2, 2, &rng), *role = random_floats(nr, -1, 1, &rng);
    for (size_t i = 0; i < nin; i += 5)
        x[i] = 0.25f; /* ties: the lowest word on both */
    float *g = random_floats(nout, -1, 1, &rng);
    float *dx0 = random_floats(nin, -1, 1, &rng), *dr0 = random_floats(nr, -1, 1, &rng);
    uint8_t *masks = host_alloc((size_t)B * N * L);
    int *roles = host_alloc(sizeof(int) * B * N);
    for (int i = 0; i < B * N * L; i++)
        masks[i] = vtr_rng_uniform(&rng) < 0.3f;
    memset(masks + (size_t)N * L, 0, (size_t)N * L); /* item 1: no span at all */
    masks[2 * N * L + 3] = 1;                        /* item 2, phrase 0: one word */
    memset(masks + (size_t)2 * N * L + 4 * L, 0, L); /* item 2, phrase 4: empty */
    for (int i = 0; i < B * N; i++)
        roles[i] = (int)(vtr_rng_uniform(&rng) * R) % R;
    float *out = host_alloc(sizeof(float) * nout);
    int *argmax = host_alloc(sizeof(int) * nout);
    void *sc = host_alloc(vtr_role_span_pool_scratch_size(B, N, D));
    vtr_role_span_pool_forward(out, argmax, x, masks, roles, role, B, N, L, D);

    float *d_x = device_floats(x, nin), *d_role = device_floats(role, nr),
          *d_g = device_floats(g, nout);
    uint8_t *d_masks = to_device(masks, (size_t)B * N * L);
    int *d_roles = device_ints(roles, (size_t)B * N);
    float *d_out = device_alloc(sizeof(float) * nout);
    int *d_argmax = device_alloc(sizeof(int) * nout);
    void *d_sc = device_alloc(vtr_role_span_pool_scratch_size(B, N, D));
    CHECK_OK(vtr_cuda_role_span_pool_forward(d_out, d_argmax, d_x, d_masks, d_roles, d_role, B, N,
                                             L, D, &err));
    expect_close("span_pool.out", d_out, out, nout, TOL_EXACT);
    expect_same_ints("span_pool.argmax", d_argmax, argmax, nout);
    for (int with_dinp = 0; with_dinp < 2; with_dinp++) {
        float *dx = copy_floats(dx0, nin), *dr = copy_floats(dr0, nr);
        float *d_dx = device_floats(dx0, nin), *d_dr = device_floats(dr0, nr);
        vtr_role_span_pool_backward(with_dinp ? dx : NULL, dr, sc, g, x, argmax, roles, role, B, N,
                                    L, D);
        CHECK_OK(vtr_cuda_role_span_pool_backward(with_dinp ? d_dx : NULL, d_dr, d_sc, d_g, d_x,
                                                  d_argmax, d_roles, d_role, B, N, L, D, &err));
        if (with_dinp)
            expect_close("span_pool.dinp", d_dx, dx, nin, TOL_ELEMENTWISE);
        expect_close("span_pool.drole_table", d_dr, dr, nr, TOL_ELEMENTWISE);
    }
    release_all();
}

/* HGR's attention GCN layer at F = D/2: a graph without edges, nodes without edges in and
 * out, edge weights other than 1, training-mode dropout (the CPU's mask), with and without
 * an input gradient, every gradient accumulated onto random values. */
TEST(cuda_nn_attn_gcn)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 26, 0);
    enum { B = 5, N = 11, D = 48, F = D / 2 };
    size_t nd = (size_t)B * N * D, nn = (size_t)B * N * N, np = vtr_attn_gcn_param_count(D, F);
    size_t wsize = vtr_attn_gcn_workspace_size(B, N, D, F);
    size_t ssize = vtr_attn_gcn_scratch_size(B, N, D, F);
    float *x = random_floats(nd, -1, 1, &rng), *g = random_floats(nd, -1, 1, &rng);
    float *params = random_floats(np, -0.3f, 0.3f, &rng), *rel = host_alloc(sizeof(float) * nn);
    for (size_t i = 0; i < nn; i++)
        rel[i] = vtr_rng_uniform(&rng) < 0.2f ? 0.5f + vtr_rng_uniform(&rng) : 0.0f;
    memset(rel + (size_t)2 * N * N, 0, sizeof(float) * N * N); /* item 2: no edge */
    float *dx0 = random_floats(nd, -1, 1, &rng), *dp0 = random_floats(np, -1, 1, &rng);
    float *d_x = device_floats(x, nd), *d_g = device_floats(g, nd);
    float *d_params = device_floats(params, np), *d_rel = device_floats(rel, nn);
    float *d_out = device_alloc(sizeof(float) * nd);
    void *ws = host_alloc(wsize), *sc = host_alloc(ssize);
    void *d_ws = device_alloc(wsize), *d_sc = device_alloc(ssize);
    for (int train = 0; train < 2; train++) {
        float p = train ? 0.5f : 0.0f;
        float *out = host_alloc(sizeof(float) * nd);
        vtr_attn_gcn_forward(out, ws, x, rel, params, B, N, D, F, p, 31, 7, 4);
        CHECK_OK(vtr_cuda_attn_gcn_forward(d_out, d_ws, d_x, d_rel, d_params, B, N, D, F, p, 31, 7,
                                           4, &err));
        expect_close("attn_gcn.out", d_out, out, nd, TOL_PRODUCT);
        size_t attn = vtr_attn_gcn_workspace_layout_of(B, N, D, F).attn;
        expect_close("attn_gcn.attention", (const float *)((char *)d_ws + attn),
                     (const float *)((char *)ws + attn), nn, TOL_PRODUCT);
        float *dx = copy_floats(dx0, nd), *dp = copy_floats(dp0, np);
        float *d_dx = device_floats(dx0, nd), *d_dp = device_floats(dp0, np);
        vtr_attn_gcn_backward(train ? dx : NULL, dp, sc, g, x, params, ws, B, N, D, F, p, 31, 7, 4);
        CHECK_OK(vtr_cuda_attn_gcn_backward(train ? d_dx : NULL, d_dp, d_sc, d_g, d_x, d_params,
                                            d_ws, B, N, D, F, p, 31, 7, 4, &err));
        if (train)
            expect_close("attn_gcn.dx", d_dx, dx, nd, TOL_PRODUCT);
        expect_close("attn_gcn.dparams", d_dp, dp, np, TOL_PRODUCT);
    }
    release_all();
}

/* HGR's verb/noun-level score: videos of 1 to T frames, a caption without phrases, captions
 * with all P, phrase slots past the count holding the span pooling's fill (finite, and read
 * by the products), both gradients, one of them, accumulated onto random values. */
TEST(cuda_nn_phrase_attention)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 27, 0);
    enum { Bv = 6, Bc = 5, T = 7, P = 4, D = 40 };
    int vid_lengths[Bv] = {7, 1, 4, 7, 2, 5}, n_phrases[Bc] = {2, 0, 4, 1, 3};
    size_t nv = (size_t)Bv * T * D, nc = (size_t)Bc * P * D, ns = (size_t)Bv * Bc;
    size_t wsize = vtr_phrase_attention_workspace_size(Bv, Bc, T, P, D);
    size_t ssize = vtr_phrase_attention_scratch_size(Bv, Bc, T, P, D);
    float *vid = random_floats(nv, -1, 1, &rng), *ph = random_floats(nc, -1, 1, &rng);
    for (int c = 0; c < Bc; c++)
        for (int p = n_phrases[c]; p < P; p++)
            for (int d = 0; d < D; d += 2)
                ph[((size_t)c * P + p) * D + d] = VTR_SPAN_POOL_FILL * 0.5f;
    float *g = random_floats(ns, -1, 1, &rng);
    float *dv0 = random_floats(nv, -1, 1, &rng), *dp0 = random_floats(nc, -1, 1, &rng);
    float *scores = host_alloc(sizeof(float) * ns);
    void *ws = host_alloc(wsize), *sc = host_alloc(ssize);
    vtr_phrase_attention_score_forward(scores, ws, vid, vid_lengths, ph, n_phrases, Bv, Bc, T, P, D,
                                       VTR_PHRASE_ATTENTION_SIGMA);

    int *d_vl = device_ints(vid_lengths, Bv), *d_n = device_ints(n_phrases, Bc);
    float *d_vid = device_floats(vid, nv), *d_ph = device_floats(ph, nc),
          *d_g = device_floats(g, ns);
    float *d_scores = device_alloc(sizeof(float) * ns);
    void *d_ws = device_alloc(wsize), *d_sc = device_alloc(ssize);
    CHECK_OK(vtr_cuda_phrase_attention_score_forward(d_scores, d_ws, d_vid, d_vl, d_ph, d_n, Bv, Bc,
                                                     T, P, D, VTR_PHRASE_ATTENTION_SIGMA, &err));
    expect_close("phrase_attention.scores", d_scores, scores, ns, TOL_PRODUCT);
    for (int which = 1; which < 4; which++) {
        float *dv = copy_floats(dv0, nv), *dp = copy_floats(dp0, nc);
        float *d_dv = device_floats(dv0, nv), *d_dp = device_floats(dp0, nc);
        vtr_phrase_attention_score_backward(which & 1 ? dv : NULL, which & 2 ? dp : NULL, sc, g,
                                            vid, vid_lengths, ph, n_phrases, ws, Bv, Bc, T, P, D,
                                            VTR_PHRASE_ATTENTION_SIGMA);
        CHECK_OK(vtr_cuda_phrase_attention_score_backward(
            which & 1 ? d_dv : NULL, which & 2 ? d_dp : NULL, d_sc, d_g, d_vid, d_vl, d_ph, d_n,
            d_ws, Bv, Bc, T, P, D, VTR_PHRASE_ATTENTION_SIGMA, &err));
        expect_close("phrase_attention.dvid", d_dv, dv, nv, TOL_PRODUCT);
        expect_close("phrase_attention.dphrases", d_dp, dp, nc, TOL_PRODUCT);
    }
    release_all();
}

/* HGR's fused score: the same bytes both ways, a level's gradient left out. */
TEST(cuda_nn_hgr_fused_score)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 28, 0);
    size_t n = 1000;
    float *lv[3], *d_lv[3], *dl[3], *d_dl[3];
    for (int k = 0; k < 3; k++) {
        lv[k] = random_floats(n, -1, 1, &rng);
        d_lv[k] = device_floats(lv[k], n);
        dl[k] = random_floats(n, -1, 1, &rng);
        d_dl[k] = device_floats(dl[k], n);
    }
    float *out = host_alloc(sizeof(float) * n), *d_out = device_alloc(sizeof(float) * n);
    vtr_hgr_fused_score_forward(out, lv[0], lv[1], lv[2], n);
    CHECK_OK(vtr_cuda_hgr_fused_score_forward(d_out, d_lv[0], d_lv[1], d_lv[2], n, &err));
    expect_close("hgr_fused_score.out", d_out, out, n, TOL_EXACT);
    float *d_dout = device_floats(out, n);
    vtr_hgr_fused_score_backward(dl[0], NULL, dl[2], out, n);
    CHECK_OK(vtr_cuda_hgr_fused_score_backward(d_dl[0], NULL, d_dl[2], d_dout, n, &err));
    expect_close("hgr_fused_score.dglobal", d_dl[0], dl[0], n, TOL_EXACT);
    expect_close("hgr_fused_score.dverb", d_dl[1], dl[1], n, TOL_EXACT);
    expect_close("hgr_fused_score.dnoun", d_dl[2], dl[2], n, TOL_EXACT);
    release_all();
}

TEST(cuda_nn_hinge_loss_both_modes_both_reductions)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 22, 0);
    int B = 16;
    float *S = random_floats((size_t)B * B, -1, 1, &rng);
    float *dS0 = random_floats((size_t)B * B, -1, 1, &rng);
    float *d_S = device_floats(S, (size_t)B * B), *d_loss = device_alloc(sizeof(float));
    for (int mode = 0; mode < 2; mode++) {
        for (int red = 0; red < 2; red++) {
            vtr_hinge_negatives neg = mode ? VTR_HINGE_HARDEST_NEGATIVE : VTR_HINGE_ALL_NEGATIVES;
            vtr_reduction reduction = red ? VTR_REDUCE_MEAN : VTR_REDUCE_SUM;
            float loss = vtr_hinge_loss_forward(S, B, VTR_HINGE_MARGIN, neg, reduction);
            float *dS = copy_floats(dS0, (size_t)B * B);
            vtr_hinge_loss_backward(dS, 1.5f, S, B, VTR_HINGE_MARGIN, neg, reduction);
            float *d_dS = device_floats(dS0, (size_t)B * B);
            CHECK_OK(vtr_cuda_hinge_loss_forward(d_loss, d_S, B, VTR_HINGE_MARGIN, neg, reduction,
                                                 &err));
            CHECK_OK(vtr_cuda_hinge_loss_backward(d_dS, 1.5f, d_S, B, VTR_HINGE_MARGIN, neg,
                                                  reduction, &err));
            CHECK(loss > 0.0f);
            expect_close("hinge.loss", d_loss, &loss, 1, TOL_PRODUCT);
            expect_close("hinge.dS", d_dS, dS, (size_t)B * B, TOL_ELEMENTWISE);
        }
    }
    release_all();
}

/* ADOPT: K from equation 6 (S drawn so that B cos(...) is no near-integer) and fixed, both
 * reductions, the positive in the denominator or not; K stays on the GPU. */
TEST(cuda_nn_adopt_loss)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 23, 0);
    int B = 40;
    float *S = NULL;
    for (int tries = 0; tries < 100; tries++) {
        S = random_floats((size_t)B * B, -0.5f, 0.9f, &rng);
        double align, uniform;
        vtr_adopt_negatives(S, B, &align, &uniform);
        double k = B * cos((align + uniform) * 0.78539816339744830962);
        if (fabs(k - round(k)) > 1e-3 && k > 1 && k < B - 1)
            break;
    }
    float *dS0 = random_floats((size_t)B * B, -1, 1, &rng);
    float *d_S = device_floats(S, (size_t)B * B), *d_loss = device_alloc(sizeof(float));
    int *d_K = device_alloc(sizeof(int));
    for (int fixed = 0; fixed <= 7; fixed += 7) {
        int K = fixed ? fixed : vtr_adopt_negatives(S, B, NULL, NULL), K_gpu = -1;
        CHECK_OK(vtr_cuda_adopt_negatives(d_K, d_S, B, fixed, &err));
        CHECK_OK(vtr_cuda_to_host(&K_gpu, d_K, sizeof K_gpu, &err));
        CHECK_EQ_INT(K_gpu, K);
        CHECK(K > 1 && K < B - 1);
        for (int variant = 0; variant < 4; variant++) {
            bool pid = variant & 1;
            vtr_reduction reduction = variant & 2 ? VTR_REDUCE_MEAN : VTR_REDUCE_SUM;
            float loss = vtr_adopt_loss_forward(S, B, K, VTR_ADOPT_TEMPERATURE, pid, reduction);
            float *dS = copy_floats(dS0, (size_t)B * B);
            vtr_adopt_loss_backward(dS, 1.5f, S, B, K, VTR_ADOPT_TEMPERATURE, pid, reduction);
            float *d_dS = device_floats(dS0, (size_t)B * B);
            CHECK_OK(vtr_cuda_adopt_loss_forward(d_loss, d_S, B, d_K, VTR_ADOPT_TEMPERATURE, pid,
                                                 reduction, &err));
            CHECK_OK(vtr_cuda_adopt_loss_backward(d_dS, 1.5f, d_S, B, d_K, VTR_ADOPT_TEMPERATURE,
                                                  pid, reduction, &err));
            expect_close("adopt.loss", d_loss, &loss, 1, TOL_PRODUCT);
            expect_close("adopt.dS", d_dS, dS, (size_t)B * B, TOL_PRODUCT);
        }
    }
    release_all();
}

TEST(cuda_nn_optimizer_step_with_clipping)
{
    start_on_gpu();
    vtr_error err;
    vtr_rng rng;
    vtr_rng_init(&rng, 23, 0);
    /* three trainable entries, the last at another learning rate, then a buffer */
    vtr_param_set ps;
    vtr_param_set_init(&ps);
    int64_t s1[] = {300, 70}, s2[] = {5}, s3[] = {40, 3}, s4[] = {9};
    CHECK_OK(vtr_param_set_add(&ps, "a", VTR_F32, true, 2, s1, &err));
    CHECK_OK(vtr_param_set_add(&ps, "b", VTR_F32, true, 1, s2, &err));
    CHECK_OK(vtr_param_set_add(&ps, "c.spm", VTR_F32, true, 2, s3, &err));
    CHECK_OK(vtr_param_set_add(&ps, "running", VTR_F32, false, 1, s4, &err));
    CHECK_OK(vtr_param_set_finalize(&ps, &err));
    vtr_param_set_scale_lr(&ps, "c.", 0.1f);
    size_t n = ps.n_trainable, nd = ps.n_data;
    for (size_t i = 0; i < nd; i++)
        ps.data[i] = vtr_rng_normal(&rng);
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    vtr_optimizer opt, dopt;
    CHECK_OK(vtr_optimizer_init(&opt, &ps, &hp, &err));
    CHECK_OK(vtr_optimizer_init(&dopt, &ps, &hp, &err));
    float *d_data = device_floats(ps.data, nd), *d_grad = device_alloc(sizeof(float) * n);
    float *d_m = device_alloc(sizeof(float) * n), *d_v = device_alloc(sizeof(float) * n);
    float *d_clip = device_alloc(sizeof(float) * 2);
    double *d_partials = device_alloc(sizeof(double) * VTR_CUDA_NORM_PARTIALS);
    CHECK_OK(vtr_cuda_zero(d_m, sizeof(float) * n, &err));
    CHECK_OK(vtr_cuda_zero(d_v, sizeof(float) * n, &err));
    /* steps with gradients above and below the clipping norm */
    for (int step = 0; step < 4; step++) {
        float scale = step % 2 ? 0.001f : 1.0f;
        for (size_t i = 0; i < n; i++)
            ps.grad[i] = scale * vtr_rng_normal(&rng);
        CHECK_OK(vtr_cuda_to_device(d_grad, ps.grad, sizeof(float) * n, &err));
        float norm = vtr_grad_norm(&ps), coef = vtr_clip_coef(norm, 2.0);
        vtr_optimizer_step_scaled(&opt, &ps, 1e-2, coef);
        CHECK_OK(vtr_cuda_clip_coef(d_clip, d_partials, d_grad, n, 2.0, &err));
        CHECK_OK(vtr_cuda_optimizer_step(&dopt, &ps, d_data, d_grad, d_m, d_v, 1e-2, d_clip + 1,
                                         &err));
        float clip[2] = {norm, coef};
        expect_close("optimizer.norm_and_coef", d_clip, clip, 2, TOL_PRODUCT);
        expect_close("optimizer.data", d_data, ps.data, nd, TOL_ELEMENTWISE);
        expect_close("optimizer.exp_avg", d_m, opt.exp_avg, n, TOL_PRODUCT);
        expect_close("optimizer.exp_avg_sq", d_v, opt.exp_avg_sq, n, TOL_PRODUCT);
    }
    CHECK(dopt.step == opt.step);
    vtr_optimizer_free(&opt);
    vtr_optimizer_free(&dopt);
    vtr_param_set_free(&ps);
    release_all();
}
