/* Parameter sets, Adam / AdamW, gradient clipping and lr schedules, with parity against
 * PyTorch (tests/fixtures/optim/, written by tests/fixtures/make_optim_fixtures.py).
 * Run with VTR_TEST_VERBOSE=1 to print the parity errors. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lib/config.h"
#include "lib/lr_schedule.h"
#include "lib/npy.h"
#include "lib/optim.h"
#include "lib/params.h"
#include "lib/rng.h"

#define FIXTURES "tests/fixtures/optim"

/* The parameters of make_optim_fixtures.py (SHAPES, LRS, MAX_NORM). */
static const int64_t shape_a[] = {4, 3}, shape_b[] = {3}, shape_c[] = {2, 2, 3};
#define N_PARAMS 27
static const double fixture_lrs[3] = {1e-3, 5e-4, 2e-2};
#define FIXTURE_MAX_NORM 2.0

/* Parity thresholds. Values: max|vtr - torch| / max|torch| over the tensor. */
#define PARITY_VALUE_TOL 1e-6
/* Updates: max|vtr - torch| over the largest |update| torch made in that step, so that
 * an error is measured against what the step changed, not against the values. Float32
 * values near 1 are 6e-8 apart, which is ~1e-4 of an update of 5e-4. */
#define PARITY_UPDATE_TOL 1e-3

static void *load_fixture(const char *name, vtr_dtype dtype, size_t n)
{
    char path[256];
    vtr_error err;
    vtr_npy_file f;
    snprintf(path, sizeof path, FIXTURES "/%s.npy", name);
    if (vtr_npy_load(path, &f, &err) != VTR_OK)
        test_fail(__FILE__, __LINE__, "fixture: %s (run from the top of the tree)", err.msg);
    size_t size = vtr_dtype_size(dtype);
    if (f.tensor.dtype != dtype || (size_t)vtr_tensor_numel(&f.tensor) != n) {
        vtr_npy_close(&f);
        test_fail(__FILE__, __LINE__, "fixture %s: expected %zu %s values", name, n,
                  vtr_dtype_name(dtype));
    }
    void *out = malloc(n * size + 1);
    CHECK(out);
    memcpy(out, f.tensor.data, n * size);
    vtr_npy_close(&f);
    return out;
}

/* max|got - ref| / max|ref|; prints with VTR_TEST_VERBOSE. */
static double rel_error(const char *what, const float *got, const float *ref, size_t n)
{
    double diff = 0.0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (d > diff)
            diff = d;
        if (fabs(ref[i]) > scale)
            scale = fabs(ref[i]);
    }
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    %-28s relative error %.2e\n", what, diff / scale);
    return diff / scale;
}

static void build_fixture_set(vtr_param_set *ps, bool with_buffer)
{
    vtr_error err;
    vtr_param_set_init(ps);
    CHECK_OK(vtr_param_set_add(ps, "a.weight", VTR_F32, true, 2, shape_a, &err));
    if (with_buffer) /* between trainables: the layout still puts trainables first */
        CHECK_OK(vtr_param_set_add(ps, "bn.running_mean", VTR_F32, false, 1, shape_b, &err));
    CHECK_OK(vtr_param_set_add(ps, "a.bias", VTR_F32, true, 1, shape_b, &err));
    CHECK_OK(vtr_param_set_add(ps, "c.weight", VTR_F32, true, 3, shape_c, &err));
    CHECK_OK(vtr_param_set_finalize(ps, &err));
    CHECK_EQ_INT(ps->n_trainable, N_PARAMS);
}

static void fill_uniform(float *x, size_t n, vtr_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 2.0f * vtr_rng_uniform(rng) - 1.0f;
}

/* ---- parameter sets ---- */

TEST(params_layout_trainables_first)
{
    vtr_error err;
    vtr_param_set ps;
    vtr_param_set_init(&ps);
    int64_t w[] = {3, 2}, v[] = {3};
    CHECK_OK(vtr_param_set_add(&ps, "fc.weight", VTR_F32, true, 2, w, &err));
    CHECK_OK(vtr_param_set_add(&ps, "bn.running_mean", VTR_F32, false, 1, v, &err));
    CHECK_OK(vtr_param_set_add(&ps, "bn.num_batches_tracked", VTR_I64, false, 0, NULL, &err));
    CHECK_OK(vtr_param_set_add(&ps, "fc.bias", VTR_F32, true, 1, v, &err));
    CHECK(vtr_param_data(&ps, "fc.weight") == NULL); /* not finalized */
    CHECK_OK(vtr_param_set_finalize(&ps, &err));
    CHECK_EQ_INT(ps.count, 4);
    CHECK_EQ_INT(ps.n_trainable, 9);
    CHECK_EQ_INT(ps.n_data, 12);
    CHECK_EQ_INT(ps.n_idata, 1);
    CHECK(vtr_param_data(&ps, "fc.weight") == ps.data);
    CHECK(vtr_param_data(&ps, "fc.bias") == ps.data + 6);
    CHECK(vtr_param_grad(&ps, "fc.bias") == ps.grad + 6);
    CHECK(vtr_param_data(&ps, "bn.running_mean") == ps.data + 9);
    CHECK(vtr_param_grad(&ps, "bn.running_mean") == NULL);
    CHECK(vtr_param_idata(&ps, "bn.num_batches_tracked") == ps.idata);
    CHECK(vtr_param_data(&ps, "bn.num_batches_tracked") == NULL);
    CHECK(vtr_param_data(&ps, "nope") == NULL);
    CHECK_EQ_INT(ps.entries[2].numel, 1);
    for (size_t i = 0; i < ps.n_data; i++)
        CHECK(ps.data[i] == 0.0f);
    vtr_tensor t = vtr_param_set_tensor(&ps, 0);
    CHECK(t.dtype == VTR_F32 && t.ndim == 2 && t.shape[0] == 3 && t.shape[1] == 2 &&
          t.data == ps.data);
    t = vtr_param_set_tensor(&ps, 2);
    CHECK(t.dtype == VTR_I64 && t.ndim == 0 && t.data == ps.idata);

    const vtr_param_entry *e;
    CHECK_OK(vtr_param_set_expect(&ps, "fc.weight", VTR_F32, 2, w, &e, &err));
    CHECK(e == &ps.entries[0]);
    int64_t wrong[] = {2, 3};
    CHECK_FAILS(vtr_param_set_expect(&ps, "fc.weight", VTR_F32, 2, wrong, &e, &err),
                VTR_ERR_INVALID, "'fc.weight' has shape (3, 2), expected (2, 3)");
    CHECK_FAILS(vtr_param_set_expect(&ps, "fc.w", VTR_F32, 2, w, &e, &err), VTR_ERR_NOT_FOUND,
                "no parameter 'fc.w'");
    CHECK_FAILS(vtr_param_set_expect(&ps, "bn.num_batches_tracked", VTR_F32, 0, NULL, &e, &err),
                VTR_ERR_INVALID, "is int64, expected float32");

    for (size_t i = 0; i < ps.n_trainable; i++)
        ps.grad[i] = 1.0f;
    vtr_param_set_zero_grad(&ps);
    for (size_t i = 0; i < ps.n_trainable; i++)
        CHECK(ps.grad[i] == 0.0f);
    vtr_param_set_free(&ps);
    CHECK(ps.count == 0 && ps.data == NULL);
    vtr_param_set_free(&ps); /* twice is fine */
}

TEST(params_contiguous_blocks)
{
    /* trainables added one after another form one block, as the GRU's flat buffer wants */
    vtr_error err;
    vtr_param_set ps;
    vtr_param_set_init(&ps);
    int64_t ih[] = {6, 4}, hh[] = {6, 2}, b[] = {6}, v[] = {2};
    CHECK_OK(vtr_param_set_add(&ps, "bn.running_var", VTR_F32, false, 1, v, &err));
    CHECK_OK(vtr_param_set_add(&ps, "gru.weight_ih_l0", VTR_F32, true, 2, ih, &err));
    CHECK_OK(vtr_param_set_add(&ps, "gru.weight_hh_l0", VTR_F32, true, 2, hh, &err));
    CHECK_OK(vtr_param_set_add(&ps, "gru.bias_ih_l0", VTR_F32, true, 1, b, &err));
    CHECK_OK(vtr_param_set_add(&ps, "gru.bias_hh_l0", VTR_F32, true, 1, b, &err));
    CHECK_OK(vtr_param_set_finalize(&ps, &err));
    float *base = vtr_param_data(&ps, "gru.weight_ih_l0");
    CHECK(vtr_param_data(&ps, "gru.weight_hh_l0") == base + 24);
    CHECK(vtr_param_data(&ps, "gru.bias_ih_l0") == base + 36);
    CHECK(vtr_param_data(&ps, "gru.bias_hh_l0") == base + 42);
    CHECK(vtr_param_data(&ps, "bn.running_var") == ps.data + 48);
    vtr_param_set_free(&ps);
}

TEST(params_add_errors)
{
    vtr_error err;
    vtr_param_set ps;
    vtr_param_set_init(&ps);
    int64_t s[] = {2, 3}, neg[] = {2, -1};
    CHECK_OK(vtr_param_set_add(&ps, "w", VTR_F32, true, 2, s, &err));
    CHECK_FAILS(vtr_param_set_add(&ps, "w", VTR_F32, true, 2, s, &err), VTR_ERR_INVALID,
                "parameter 'w' added twice");
    CHECK_FAILS(vtr_param_set_add(&ps, "", VTR_F32, true, 2, s, &err), VTR_ERR_INVALID,
                "empty parameter name");
    CHECK_FAILS(vtr_param_set_add(&ps, "n", VTR_I64, true, 0, NULL, &err), VTR_ERR_INVALID,
                "int64 entry cannot be trainable");
    CHECK_FAILS(vtr_param_set_add(&ps, "h", VTR_F16, false, 2, s, &err), VTR_ERR_INVALID,
                "dtype float16");
    CHECK_FAILS(vtr_param_set_add(&ps, "x", VTR_F32, true, 2, neg, &err), VTR_ERR_INVALID,
                "parameter 'x'");
    CHECK_FAILS(vtr_param_set_add(&ps, "x", VTR_F32, true, VTR_MAX_DIMS + 1, s, &err),
                VTR_ERR_INVALID, "dimensions");
    char long_name[VTR_PARAM_NAME_MAX + 2];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    CHECK_FAILS(vtr_param_set_add(&ps, long_name, VTR_F32, true, 2, s, &err), VTR_ERR_INVALID,
                "longer than");
    CHECK_EQ_INT(ps.count, 1);
    CHECK_OK(vtr_param_set_finalize(&ps, &err));
    CHECK_FAILS(vtr_param_set_add(&ps, "late", VTR_F32, true, 2, s, &err), VTR_ERR_INVALID,
                "already finalized");
    CHECK_FAILS(vtr_param_set_finalize(&ps, &err), VTR_ERR_INVALID, "already finalized");
    vtr_param_set_free(&ps);

    /* an empty set is valid: nothing to train */
    vtr_param_set_init(&ps);
    CHECK_OK(vtr_param_set_finalize(&ps, &err));
    CHECK(ps.data == NULL && ps.n_trainable == 0);
    CHECK(vtr_grad_norm(&ps) == 0.0f);
    vtr_param_set_free(&ps);
}

/* ---- optimizers: parity with torch ---- */

/* Runs the three fixture steps of `tag` ("adamw" or "adam") and compares every result. */
static void optimizer_parity(const char *tag, vtr_optim_kind kind, double weight_decay)
{
    vtr_error err;
    char name[64];
    vtr_param_set ps;
    build_fixture_set(&ps, true);
    float *buffer = vtr_param_data(&ps, "bn.running_mean");
    const float buffer_values[3] = {0.5f, -1.0f, 2.0f};
    memcpy(buffer, buffer_values, sizeof buffer_values);

    float *p0 = load_fixture("params0", VTR_F32, N_PARAMS);
    snprintf(name, sizeof name, "%s_grads", tag);
    float *grads = load_fixture(name, VTR_F32, 3 * N_PARAMS);
    snprintf(name, sizeof name, "%s_clipped", tag);
    float *clipped = load_fixture(name, VTR_F32, 3 * N_PARAMS);
    snprintf(name, sizeof name, "%s_norms", tag);
    float *norms = load_fixture(name, VTR_F32, 3);
    snprintf(name, sizeof name, "%s_params", tag);
    float *after = load_fixture(name, VTR_F32, 3 * N_PARAMS);
    snprintf(name, sizeof name, "%s_exp_avg", tag);
    float *m_ref = load_fixture(name, VTR_F32, N_PARAMS);
    snprintf(name, sizeof name, "%s_exp_avg_sq", tag);
    float *v_ref = load_fixture(name, VTR_F32, N_PARAMS);
    memcpy(ps.data, p0, sizeof(float) * N_PARAMS);

    vtr_optimizer opt;
    vtr_optim_hparams hp = vtr_optim_defaults(kind);
    hp.weight_decay = weight_decay;
    CHECK_OK(vtr_optimizer_init(&opt, &ps, &hp, &err));
    float before[N_PARAMS];
    for (int k = 0; k < 3; k++) {
        memcpy(before, ps.data, sizeof before);
        memcpy(ps.grad, grads + k * N_PARAMS, sizeof(float) * N_PARAMS);
        float norm = vtr_clip_grad_norm(&ps, FIXTURE_MAX_NORM);
        double norm_err = fabs((double)norm - norms[k]) / norms[k];
        snprintf(name, sizeof name, "%s step %d norm", tag, k + 1);
        if (getenv("VTR_TEST_VERBOSE"))
            printf("    %-28s relative error %.2e\n", name, norm_err);
        CHECK_MSG(norm_err < PARITY_VALUE_TOL, "%s: %.9g, torch %.9g", name, norm, norms[k]);
        snprintf(name, sizeof name, "%s step %d clipped", tag, k + 1);
        CHECK_MSG(rel_error(name, ps.grad, clipped + k * N_PARAMS, N_PARAMS) < PARITY_VALUE_TOL,
                  "%s", name);
        vtr_optimizer_step(&opt, &ps, fixture_lrs[k]);
        CHECK_EQ_INT(opt.step, k + 1);
        const float *ref = after + k * N_PARAMS;
        snprintf(name, sizeof name, "%s step %d params", tag, k + 1);
        CHECK_MSG(rel_error(name, ps.data, ref, N_PARAMS) < PARITY_VALUE_TOL, "%s", name);
        double diff = 0.0, update = 0.0;
        for (int i = 0; i < N_PARAMS; i++) {
            diff = fmax(diff, fabs((double)ps.data[i] - ref[i]));
            update = fmax(update, fabs((double)ref[i] - before[i]));
        }
        if (getenv("VTR_TEST_VERBOSE"))
            printf("    %-28s error / update  %.2e\n", name, diff / update);
        CHECK_MSG(diff / update < PARITY_UPDATE_TOL, "%s: error %.3g of the update", name,
                  diff / update);
    }
    snprintf(name, sizeof name, "%s exp_avg", tag);
    CHECK_MSG(rel_error(name, opt.exp_avg, m_ref, N_PARAMS) < PARITY_VALUE_TOL, "%s", name);
    snprintf(name, sizeof name, "%s exp_avg_sq", tag);
    CHECK_MSG(rel_error(name, opt.exp_avg_sq, v_ref, N_PARAMS) < PARITY_VALUE_TOL, "%s", name);
    CHECK(memcmp(buffer, buffer_values, sizeof buffer_values) == 0); /* buffers untouched */

    vtr_optimizer_free(&opt);
    vtr_param_set_free(&ps);
    free(p0), free(grads), free(clipped), free(norms), free(after), free(m_ref), free(v_ref);
}

TEST(parity_adamw_clipped_three_steps)
{
    optimizer_parity("adamw", VTR_OPTIM_ADAMW, 0.01);
}

TEST(parity_adam_l2_clipped_three_steps)
{
    optimizer_parity("adam", VTR_OPTIM_ADAM, 0.1);
}

/* ---- optimizers: behaviour ---- */

TEST(optim_hparams_and_kinds)
{
    vtr_error err;
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    CHECK(hp.beta1 == 0.9 && hp.beta2 == 0.999 && hp.eps == 1e-8 && hp.weight_decay == 0.01);
    CHECK(vtr_optim_defaults(VTR_OPTIM_ADAM).weight_decay == 0.0);
    vtr_optim_kind kind;
    CHECK_OK(vtr_optim_kind_parse("adam", &kind, &err));
    CHECK(kind == VTR_OPTIM_ADAM);
    CHECK_OK(vtr_optim_kind_parse(vtr_optim_kind_name(VTR_OPTIM_ADAMW), &kind, &err));
    CHECK(kind == VTR_OPTIM_ADAMW);
    CHECK_FAILS(vtr_optim_kind_parse("sgd", &kind, &err), VTR_ERR_INVALID,
                "unknown optimizer 'sgd'");

    vtr_param_set ps;
    build_fixture_set(&ps, false);
    vtr_optimizer opt;
    hp.beta2 = 1.0;
    CHECK_FAILS(vtr_optimizer_init(&opt, &ps, &hp, &err), VTR_ERR_INVALID, "betas");
    hp = vtr_optim_defaults(VTR_OPTIM_ADAM);
    hp.eps = -1.0;
    CHECK_FAILS(vtr_optimizer_init(&opt, &ps, &hp, &err), VTR_ERR_INVALID, "eps");
    hp = vtr_optim_defaults(VTR_OPTIM_ADAM);
    hp.weight_decay = NAN;
    CHECK_FAILS(vtr_optimizer_init(&opt, &ps, &hp, &err), VTR_ERR_INVALID, "weight decay");
    CHECK(opt.exp_avg == NULL);
    vtr_optimizer_free(&opt);
    vtr_param_set_free(&ps);

    vtr_param_set_init(&ps);
    hp = vtr_optim_defaults(VTR_OPTIM_ADAM);
    CHECK_FAILS(vtr_optimizer_init(&opt, &ps, &hp, &err), VTR_ERR_INVALID, "not finalized");
}

TEST(optim_first_step_is_lr_times_sign)
{
    /* Adam's first step moves every parameter by lr * g / (|g| + eps') ~ lr * sign(g), a
     * closed form independent of torch */
    vtr_error err;
    vtr_param_set ps;
    build_fixture_set(&ps, false);
    for (int i = 0; i < N_PARAMS; i++) {
        ps.data[i] = 1.0f;
        ps.grad[i] = (i % 2 ? 1.0f : -1.0f) * (float)(i + 1) * 0.01f;
    }
    vtr_optimizer opt;
    vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
    CHECK_OK(vtr_optimizer_init(&opt, &ps, &hp, &err));
    vtr_optimizer_step(&opt, &ps, 0.01);
    for (int i = 0; i < N_PARAMS; i++) {
        double expect = 1.0 * (1.0 - 0.01 * 0.01) - 0.01 * (i % 2 ? 1.0 : -1.0);
        CHECK_MSG(fabs(ps.data[i] - expect) < 1e-6, "element %d: %.9g, expected %.9g", i,
                  ps.data[i], expect);
    }
    /* a set of another size is refused without effect */
    vtr_param_set other;
    vtr_param_set_init(&other);
    CHECK_OK(vtr_param_set_add(&other, "w", VTR_F32, true, 1, shape_b, &err));
    CHECK_OK(vtr_param_set_finalize(&other, &err));
    vtr_optimizer_step(&opt, &other, 0.01);
    CHECK_EQ_INT(opt.step, 1);
    CHECK(other.data[0] == 0.0f);
    vtr_param_set_free(&other);
    vtr_optimizer_free(&opt);
    vtr_param_set_free(&ps);
}

/* 1 and 4 threads, and clipping then the step (replica 0) or clipping fused into the step
 * (replica 1, as vtr-train does): the same bytes. */
TEST(optim_step_same_bytes_any_thread_count_clipping_fused_or_not)
{
    enum { N = 300000 };
    vtr_error err;
    vtr_param_set ps[2];
    vtr_optimizer opt[2];
    int64_t shape[] = {N};
    int threads[2] = {1, 4};
    float norms[2] = {0.0f, -1.0f};
    int saved = omp_get_max_threads();
    for (int r = 0; r < 2; r++) {
        vtr_param_set_init(&ps[r]);
        CHECK_OK(vtr_param_set_add(&ps[r], "w", VTR_F32, true, 1, shape, &err));
        CHECK_OK(vtr_param_set_finalize(&ps[r], &err));
        vtr_optim_hparams hp = vtr_optim_defaults(VTR_OPTIM_ADAMW);
        CHECK_OK(vtr_optimizer_init(&opt[r], &ps[r], &hp, &err));
        vtr_rng rng;
        vtr_rng_init(&rng, 5, 0);
        fill_uniform(ps[r].data, N, &rng);
        omp_set_num_threads(threads[r]);
        for (int k = 0; k < 3; k++) {
            fill_uniform(ps[r].grad, N, &rng);
            if (r == 0) {
                norms[r] = vtr_clip_grad_norm(&ps[r], 1.0);
                vtr_optimizer_step(&opt[r], &ps[r], 1e-3);
            } else {
                norms[r] = vtr_grad_norm(&ps[r]);
                CHECK(vtr_clip_coef(norms[r], 1.0) < 0.01f); /* clipping does happen */
                vtr_optimizer_step_scaled(&opt[r], &ps[r], 1e-3, vtr_clip_coef(norms[r], 1.0));
            }
        }
    }
    omp_set_num_threads(saved);
    CHECK(norms[0] == norms[1]);
    CHECK(memcmp(ps[0].data, ps[1].data, sizeof(float) * N) == 0);
    CHECK(memcmp(opt[0].exp_avg_sq, opt[1].exp_avg_sq, sizeof(float) * N) == 0);
    for (int r = 0; r < 2; r++) {
        vtr_optimizer_free(&opt[r]);
        vtr_param_set_free(&ps[r]);
    }
}

/* ---- clipping ---- */

TEST(clip_grad_norm_scales_only_above_max)
{
    vtr_error err;
    vtr_param_set ps;
    build_fixture_set(&ps, true);
    vtr_rng rng;
    vtr_rng_init(&rng, 11, 0);
    fill_uniform(ps.grad, N_PARAMS, &rng);
    double sum = 0.0;
    for (int i = 0; i < N_PARAMS; i++)
        sum += (double)ps.grad[i] * ps.grad[i];
    float expect = (float)sqrt(sum);
    CHECK(vtr_grad_norm(&ps) == expect);

    /* below the threshold: the same bytes */
    float copy[N_PARAMS];
    memcpy(copy, ps.grad, sizeof copy);
    CHECK(vtr_clip_grad_norm(&ps, (double)expect * 1.5) == expect);
    CHECK(memcmp(copy, ps.grad, sizeof copy) == 0);

    /* above: scaled to max_norm (up to the 1e-6 torch adds) */
    CHECK(vtr_clip_grad_norm(&ps, 0.5) == expect);
    float coef = (1.0f / (expect + 1e-6f)) * 0.5f;
    for (int i = 0; i < N_PARAMS; i++)
        CHECK(ps.grad[i] == copy[i] * coef);
    CHECK(fabs(vtr_grad_norm(&ps) - 0.5) < 1e-6);

    /* non-finite: reported, gradients left alone */
    ps.grad[3] = NAN;
    memcpy(copy, ps.grad, sizeof copy);
    CHECK(isnan(vtr_clip_grad_norm(&ps, 0.5)));
    CHECK(memcmp(copy, ps.grad, sizeof copy) == 0);
    ps.grad[3] = INFINITY;
    CHECK(isinf(vtr_clip_grad_norm(&ps, 0.5)));
    (void)err;
    vtr_param_set_free(&ps);
}

TEST(clip_grad_norm_large_set_matches_plain_sum)
{
    /* more than one chunk: the chunked double sum equals a plain double sum to rounding */
    enum { N = 3000001 };
    vtr_error err;
    vtr_param_set ps;
    vtr_param_set_init(&ps);
    int64_t a[] = {N / 2}, b[] = {N - N / 2};
    CHECK_OK(vtr_param_set_add(&ps, "a", VTR_F32, true, 1, a, &err));
    CHECK_OK(vtr_param_set_add(&ps, "b", VTR_F32, true, 1, b, &err));
    CHECK_OK(vtr_param_set_finalize(&ps, &err));
    vtr_rng rng;
    vtr_rng_init(&rng, 12, 0);
    fill_uniform(ps.grad, N, &rng);
    double sum = 0.0;
    for (size_t i = 0; i < N; i++)
        sum += (double)ps.grad[i] * ps.grad[i];
    CHECK(fabs(vtr_grad_norm(&ps) - sqrt(sum)) <= 1e-7 * sqrt(sum));
    vtr_param_set_free(&ps);
}

/* ---- lr schedules ---- */

typedef struct sched_case {
    const char *name;
    vtr_lr_decay decay;
    double base_lr, gamma;
    int64_t step_size;
    int64_t milestones[4];
    size_t milestone_count;
    int64_t cosine_epochs;
    bool per_iteration;
    double lr_min;
    int64_t epochs, ipe, warmup;
    double warmup_start;
} sched_case;

/* CASES of make_optim_fixtures.py */
static const sched_case sched_cases[] = {
    {"vse_image_text", VTR_LR_MULTISTEP, 5e-4, 0.1, 0, {15}, 1, 0, false, 0.0, 25, 1, 0, 0.0},
    {"vse_video_text", VTR_LR_MULTISTEP, 1e-4, 0.1, 0, {25}, 1, 0, false, 0.0, 35, 1, 0, 0.0},
    {"multistep", VTR_LR_MULTISTEP, 1e-3, 0.5, 0, {2, 5, 6}, 3, 0, false, 0.0, 8, 3, 0, 0.0},
    {"step", VTR_LR_STEP, 2e-3, 0.3, 4, {0}, 0, 0, false, 0.0, 13, 2, 0, 0.0},
    {"cosine_epoch", VTR_LR_COSINE, 1e-3, 0.0, 0, {0}, 0, 10, false, 1e-5, 10, 3, 0, 0.0},
    {"cosine_iteration", VTR_LR_COSINE, 1e-3, 0.0, 0, {0}, 0, 6, true, 0.0, 6, 7, 0, 0.0},
    {"warmup_multistep", VTR_LR_MULTISTEP, 1e-3, 0.1, 0, {2}, 1, 0, false, 0.0, 5, 4, 10, 0.25},
    {"warmup_cosine", VTR_LR_COSINE, 5e-4, 0.0, 0, {0}, 0, 4, true, 0.0, 4, 5, 7, 0.1},
    {"warmup_constant", VTR_LR_CONSTANT, 1e-4, 0.0, 0, {0}, 0, 0, false, 0.0, 3, 4, 5, 0.0},
};

TEST(parity_lr_schedules_torch)
{
    vtr_error err;
    for (size_t c = 0; c < sizeof sched_cases / sizeof sched_cases[0]; c++) {
        const sched_case *sc = &sched_cases[c];
        vtr_lr_schedule s = vtr_lr_schedule_constant(sc->base_lr);
        s.decay = sc->decay;
        s.gamma = sc->gamma;
        s.step_size = sc->step_size;
        memcpy(s.milestones, sc->milestones, sizeof sc->milestones);
        s.milestone_count = sc->milestone_count;
        s.cosine_epochs = sc->cosine_epochs;
        s.cosine_per_iteration = sc->per_iteration;
        s.lr_min = sc->lr_min;
        s.warmup_iterations = sc->warmup;
        s.warmup_start = sc->warmup_start;
        CHECK_OK(vtr_lr_schedule_check(&s, &err));
        char name[64];
        snprintf(name, sizeof name, "sched_%s", sc->name);
        size_t n = (size_t)(sc->epochs * sc->ipe);
        int64_t *bits = load_fixture(name, VTR_I64, n);
        double worst = 0.0;
        for (int64_t e = 0; e < sc->epochs; e++)
            for (int64_t i = 0; i < sc->ipe; i++) {
                double ref;
                memcpy(&ref, &bits[e * sc->ipe + i], sizeof ref);
                double got = vtr_lr_at(&s, e, i, sc->ipe);
                /* torch's start factor 0 is 1e-300 (it refuses 0): absolute floor 1e-290 */
                double rel = fabs(got - ref) / fmax(fabs(ref), 1e-290);
                if (fabs(got - ref) < 1e-290)
                    rel = 0.0;
                if (rel > worst)
                    worst = rel;
                if (rel > 1e-12) {
                    free(bits);
                    test_fail(__FILE__, __LINE__, "%s epoch %lld iteration %lld: lr %.17g, "
                              "torch %.17g", sc->name, (long long)e, (long long)i, got, ref);
                }
            }
        if (getenv("VTR_TEST_VERBOSE"))
            printf("    schedule %-20s relative error %.2e\n", sc->name, worst);
        free(bits);
    }
}

TEST(lr_schedule_closed_forms)
{
    vtr_lr_schedule s = vtr_lr_schedule_constant(1e-4);
    s.decay = VTR_LR_MULTISTEP;
    s.gamma = 0.1;
    s.milestones[0] = 25;
    s.milestone_count = 1;
    CHECK(vtr_lr_at(&s, 24, 99, 100) == 1e-4);
    CHECK(fabs(vtr_lr_at(&s, 25, 0, 100) - 1e-5) < 1e-20);
    CHECK(fabs(vtr_lr_at(&s, 34, 99, 100) - 1e-5) < 1e-20);

    s = vtr_lr_schedule_constant(1.0);
    s.decay = VTR_LR_COSINE;
    s.cosine_epochs = 4;
    s.lr_min = 0.1;
    CHECK(vtr_lr_at(&s, 0, 0, 10) == 1.0);
    CHECK(fabs(vtr_lr_at(&s, 2, 5, 10) - 0.55) < 1e-15); /* halfway, per epoch */
    CHECK(vtr_lr_at(&s, 4, 0, 10) == 0.1);
    CHECK(vtr_lr_at(&s, 9, 0, 10) == 0.1); /* stays at the floor after T */

    s = vtr_lr_schedule_constant(2.0);
    s.warmup_iterations = 4;
    s.warmup_start = 0.0;
    CHECK(vtr_lr_at(&s, 0, 0, 3) == 0.0);
    CHECK(vtr_lr_at(&s, 0, 2, 3) == 1.0);
    CHECK(vtr_lr_at(&s, 1, 1, 3) == 2.0); /* global iteration 4 */
}

TEST(lr_schedule_check_errors)
{
    vtr_error err;
    vtr_lr_schedule s = vtr_lr_schedule_constant(0.0);
    CHECK_FAILS(vtr_lr_schedule_check(&s, &err), VTR_ERR_INVALID, "base lr 0 is not > 0");
    s = vtr_lr_schedule_constant(1e-3);
    s.decay = VTR_LR_MULTISTEP;
    s.gamma = 0.1;
    s.milestones[0] = 5;
    s.milestones[1] = 5;
    s.milestone_count = 2;
    CHECK_FAILS(vtr_lr_schedule_check(&s, &err), VTR_ERR_INVALID, "milestone 2 (5)");
    s.decay = VTR_LR_STEP;
    s.step_size = 0;
    CHECK_FAILS(vtr_lr_schedule_check(&s, &err), VTR_ERR_INVALID, "step size 0");
    s = vtr_lr_schedule_constant(1e-3);
    s.decay = VTR_LR_COSINE;
    s.lr_min = 1.0;
    CHECK_FAILS(vtr_lr_schedule_check(&s, &err), VTR_ERR_INVALID, "lr_min 1 is not in");
    s = vtr_lr_schedule_constant(1e-3);
    s.warmup_iterations = 3;
    s.warmup_start = 1.5;
    CHECK_FAILS(vtr_lr_schedule_check(&s, &err), VTR_ERR_INVALID, "warm-up start");
    vtr_lr_decay d;
    CHECK_OK(vtr_lr_decay_parse("cosine", &d, &err));
    CHECK(d == VTR_LR_COSINE);
    CHECK_STR(vtr_lr_decay_name(VTR_LR_STEP), "step");
    CHECK_FAILS(vtr_lr_decay_parse("linear", &d, &err), VTR_ERR_INVALID,
                "unknown lr schedule 'linear'");
}

static const vtr_config_field sched_schema[] = {
    VTR_LR_SCHEDULE_FIELDS("train", "5e-4"),
    {"train.epochs", VTR_CONFIG_INT, "25", NULL},
};

TEST(lr_schedule_from_config)
{
    vtr_error err;
    vtr_config *cfg;
    vtr_lr_schedule s;
    CHECK_OK(vtr_config_new(sched_schema, sizeof sched_schema / sizeof sched_schema[0], &cfg,
                            &err));
    /* the defaults are VSE∞ image-text */
    CHECK_OK(vtr_lr_schedule_from_config(cfg, "train", &s, &err));
    CHECK(s.decay == VTR_LR_MULTISTEP && s.base_lr == 5e-4 && s.gamma == 0.1 &&
          s.milestone_count == 1 && s.milestones[0] == 15 && s.warmup_iterations == 0);

    static const char video[] = "train:\n  lr: 1e-4\n  lr_decay_epochs: [25]\n"
                                "  lr_warmup_iterations: 100\n  lr_warmup_start: 0.1\n";
    CHECK_OK(vtr_config_load_string(cfg, "video.yaml", video, strlen(video), &err));
    CHECK_OK(vtr_lr_schedule_from_config(cfg, "train", &s, &err));
    CHECK(s.base_lr == 1e-4 && s.milestones[0] == 25 && s.warmup_iterations == 100 &&
          s.warmup_start == 0.1);

    static const char cosine[] = "train:\n  lr_schedule: cosine\n  lr_cosine_epochs: 30\n"
                                 "  lr_min: 1e-6\n  lr_cosine_per_iteration: true\n";
    CHECK_OK(vtr_config_load_string(cfg, "cos.yaml", cosine, strlen(cosine), &err));
    CHECK_OK(vtr_lr_schedule_from_config(cfg, "train", &s, &err));
    CHECK(s.decay == VTR_LR_COSINE && s.cosine_epochs == 30 && s.lr_min == 1e-6 &&
          s.cosine_per_iteration);

    CHECK_OK(vtr_config_set(cfg, "train.lr_schedule=poly", &err));
    CHECK_FAILS(vtr_lr_schedule_from_config(cfg, "train", &s, &err), VTR_ERR_INVALID,
                "--set: key 'train.lr_schedule': unknown schedule 'poly'");
    CHECK_OK(vtr_config_set(cfg, "train.lr_schedule=multistep", &err));
    static const char bad[] = "train:\n  lr_decay_epochs: [20, 10]\n";
    CHECK_OK(vtr_config_load_string(cfg, "bad.yaml", bad, strlen(bad), &err));
    CHECK_FAILS(vtr_lr_schedule_from_config(cfg, "train", &s, &err), VTR_ERR_INVALID,
                "bad.yaml:2: key 'train.lr_decay_epochs': epochs must be >= 0 and increasing");
    CHECK_OK(vtr_config_set(cfg, "train.lr_decay_epochs=[15]", &err));
    CHECK_OK(vtr_config_set(cfg, "train.lr_warmup_start=2", &err));
    CHECK_FAILS(vtr_lr_schedule_from_config(cfg, "train", &s, &err), VTR_ERR_INVALID,
                "key 'train.lr_warmup_start': must be in [0, 1]");
    CHECK_FAILS(vtr_lr_schedule_from_config(cfg, "optim", &s, &err), VTR_ERR_NOT_FOUND,
                "optim.lr");
    vtr_config_free(cfg);
}
