#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lib/blas_threads.h"
#include "lib/npy.h"

double gradcheck(const char *name, gradcheck_loss_fn loss, void *ctx, float *x,
                 const float *analytic, size_t n, size_t max_checks)
{
    size_t checks = n < max_checks ? n : max_checks;
    double worst = 0.0;
    size_t worst_i = 0;
    double worst_a = 0.0, worst_num = 0.0;
    for (size_t c = 0; c < checks; c++) {
        size_t i = checks == n ? c : c * n / checks;
        float saved = x[i];
        x[i] = (float)(saved + GRADCHECK_EPS);
        double plus = loss(ctx);
        double h_plus = (double)x[i] - saved; /* the step actually taken in float */
        x[i] = (float)(saved - GRADCHECK_EPS);
        double minus = loss(ctx);
        double h_minus = saved - (double)x[i];
        x[i] = saved;
        double numeric = (plus - minus) / (h_plus + h_minus);
        double a = analytic[i];
        double err = fabs(a - numeric) / (fabs(a) + fabs(numeric) + GRADCHECK_FLOOR);
        if (err > worst) {
            worst = err;
            worst_i = i;
            worst_a = a;
            worst_num = numeric;
        }
    }
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    gradcheck %-24s %6zu checked, max error %.2e\n", name, checks, worst);
    if (worst > GRADCHECK_TOL)
        test_fail(__FILE__, __LINE__,
                  "gradcheck %s: element %zu analytic %.6g numeric %.6g "
                  "(error %.3g)",
                  name, worst_i, worst_a, worst_num, worst);
    return worst;
}

/* The loss of gradcheck_scaled: values = scale * theta, then the op's loss. */
typedef struct scaled_loss_ctx {
    gradcheck_loss_fn loss;
    void *ctx;
    float *values;
    const float *theta;
    size_t n;
    float scale;
} scaled_loss_ctx;

static double scaled_loss(void *p)
{
    scaled_loss_ctx *s = p;
    for (size_t i = 0; i < s->n; i++)
        s->values[i] = s->scale * s->theta[i];
    return s->loss(s->ctx);
}

double gradcheck_scaled(const char *name, gradcheck_loss_fn loss, void *ctx, float *values,
                        const float *analytic, size_t n, size_t max_checks, float scale)
{
    float *theta = nn_alloc_floats(n), *scaled = nn_alloc_floats(n);
    for (size_t i = 0; i < n; i++) {
        theta[i] = values[i] / scale;
        scaled[i] = scale * analytic[i];
    }
    scaled_loss_ctx s = {loss, ctx, values, theta, n, scale};
    double worst = gradcheck(name, scaled_loss, &s, theta, scaled, n, max_checks);
    for (size_t i = 0; i < n; i++)
        values[i] = scale * theta[i];
    free(theta), free(scaled);
    return worst;
}

double gradcheck_dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

void nn_fill_uniform(float *x, size_t n, float lo, float hi, vtr_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * vtr_rng_uniform(rng);
}

void nn_fill_separated(float *x, int B, int T, int D, vtr_rng *rng)
{
    int64_t perm[64];
    for (int b = 0; b < B; b++)
        for (int d = 0; d < D; d++) {
            vtr_rng_permutation(rng, perm, T);
            for (int t = 0; t < T; t++)
                x[((size_t)b * T + t) * D + d] =
                    0.25f * (float)perm[t] - 0.5f + 0.1f * (vtr_rng_uniform(rng) - 0.5f);
        }
}

double nn_max_abs(const float *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)x[i]));
    return m;
}

float *nn_alloc_floats(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p)
        test_fail(__FILE__, __LINE__, "out of memory (%zu floats)", n);
    return p;
}

const char *nn_fixture_path(const char *name)
{
    static char path[1024];
    const char *dir = getenv("VTR_NN_FIXTURES") ? getenv("VTR_NN_FIXTURES") : "tests/fixtures/nn";
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static void *nn_fixture_load(const char *name, size_t n, vtr_dtype dtype)
{
    char path[1040];
    snprintf(path, sizeof path, "%s.npy", nn_fixture_path(name));
    vtr_error err;
    vtr_npy_file f = {0};
    if (vtr_npy_load(path, &f, &err) != VTR_OK)
        test_fail(__FILE__, __LINE__,
                  "fixture: %s (run from the top of the tree, or set "
                  "VTR_NN_FIXTURES)",
                  err.msg);
    if (f.tensor.dtype != dtype || (size_t)vtr_tensor_numel(&f.tensor) != n) {
        char shape[128];
        vtr_shape_str(f.tensor.ndim, f.tensor.shape, shape, sizeof shape);
        const char *found = vtr_dtype_name(f.tensor.dtype);
        vtr_npy_close(&f);
        test_fail(__FILE__, __LINE__, "fixture %s: %s %s, expected %s with %zu elements", path,
                  found, shape, vtr_dtype_name(dtype), n);
    }
    void *copy = malloc(n ? n * 4 : 1);
    if (!copy)
        test_fail(__FILE__, __LINE__, "out of memory");
    memcpy(copy, f.tensor.data, n * 4);
    vtr_npy_close(&f);
    return copy;
}

float *nn_fixture_floats(const char *name, size_t n)
{
    return nn_fixture_load(name, n, VTR_F32);
}

int *nn_fixture_ints(const char *name, size_t n)
{
    return nn_fixture_load(name, n, VTR_I32);
}

double nn_parity_compare(const char *name, const float *got, const float *ref, size_t n,
                         double scale, double tol)
{
    double diff = 0.0, max_ref = 1e-6;
    size_t worst_i = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (d > diff) {
            diff = d;
            worst_i = i;
        }
        if (fabs(ref[i]) > max_ref)
            max_ref = fabs(ref[i]);
    }
    double rel = diff / (scale > 0.0 ? fmax(scale, 1e-6) : max_ref);
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    parity %-32s relative error %.2e\n", name, rel);
    if (rel > tol)
        test_fail(__FILE__, __LINE__,
                  "parity %s: element %zu is %.8g, PyTorch %.8g "
                  "(relative error %.3g)",
                  name, worst_i, got[worst_i], ref[worst_i], rel);
    return rel;
}

double nn_parity_check_at(const char *name, const float *got, size_t n, double tol)
{
    float *ref = nn_fixture_floats(name, n);
    double rel = nn_parity_compare(name, got, ref, n, 0.0, tol);
    free(ref);
    return rel;
}

double nn_parity_check(const char *name, const float *got, size_t n)
{
    return nn_parity_check_at(name, got, n, PARITY_TOL);
}

void nn_check_across_threads(const char *name, const float *got, const float *ref, size_t n)
{
    if (!vtr_blas_threads_follow_openmp()) {
        for (size_t i = 0; i < n; i++)
            if (memcmp(&got[i], &ref[i], sizeof(float)) != 0)
                test_fail(__FILE__, __LINE__,
                          "%s: element %zu is %.9g at another thread count, %.9g before", name,
                          i, got[i], ref[i]);
        return;
    }
    double diff = 0.0, max_ref = 1e-6;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)got[i] - ref[i]));
        max_ref = fmax(max_ref, fabs(ref[i]));
    }
    if (diff > 1e-5 * max_ref)
        test_fail(__FILE__, __LINE__,
                  "%s: %.3g of max|x| from the result at another thread count (BLAS on "
                  "OpenMP's threads)",
                  name, diff / max_ref);
}
