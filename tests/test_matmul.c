/* lib/matmul.h: float32 products are cblas_sgemm's; bfloat16 products are those of the
 * operands rounded to bfloat16, summed in float32, in every transposition, with alpha and
 * beta, held or not. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lib/matmul.h"
#include "lib/rng.h"
#include "lib/tensor.h"

typedef struct case_ {
    int M, N, K;
    CBLAS_TRANSPOSE ta, tb;
    float alpha, beta;
} case_;

static const case_ cases[] = {
    {1, 1, 1, CblasNoTrans, CblasNoTrans, 1.0f, 0.0f},
    {7, 17, 33, CblasNoTrans, CblasTrans, 1.0f, 0.0f},
    {33, 40, 16, CblasTrans, CblasNoTrans, 1.0f, 1.0f},
    {130, 257, 70, CblasNoTrans, CblasNoTrans, 0.5f, 0.25f},
    {64, 96, 300, CblasTrans, CblasTrans, -2.0f, 1.0f},
    {128, 3072, 64, CblasNoTrans, CblasTrans, 1.0f, 0.0f},
};

static float *random_matrix(vtr_rng *r, size_t n)
{
    float *x = malloc(n * sizeof *x);
    CHECK(x);
    for (size_t i = 0; i < n; i++)
        x[i] = vtr_rng_uniform(r) * 2.0f - 1.0f;
    return x;
}

/* op(X)[i][k] of X stored with row stride ld */
static float at(const float *x, int ld, bool trans, int i, int k)
{
    return trans ? x[(size_t)k * ld + i] : x[(size_t)i * ld + k];
}

static float round_bf16(float x)
{
    return vtr_bf16_to_float(vtr_float_to_bf16(x));
}

TEST(matmul_precision_names)
{
    vtr_precision p;
    CHECK(vtr_precision_parse("bfloat16", &p) && p == VTR_PRECISION_BF16);
    CHECK(vtr_precision_parse("float32", &p) && p == VTR_PRECISION_F32);
    CHECK(!vtr_precision_parse("bf16", &p));
    CHECK_STR(vtr_precision_name(VTR_PRECISION_BF16), "bfloat16");
    CHECK(strstr(vtr_matmul_report(), "bfloat16 products: oneDNN 2."));
}

TEST(matmul_float32_is_cblas_sgemm)
{
    vtr_rng r;
    vtr_rng_init(&r, 1, 0);
    CHECK(vtr_matmul_precision() == VTR_PRECISION_F32);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const case_ *k = &cases[c];
        int lda = k->ta == CblasTrans ? k->M : k->K, ldb = k->tb == CblasTrans ? k->K : k->N;
        float *a = random_matrix(&r, (size_t)k->M * k->K),
              *b = random_matrix(&r, (size_t)k->K * k->N);
        float *c1 = random_matrix(&r, (size_t)k->M * k->N);
        float *c2 = malloc(sizeof(float) * k->M * k->N);
        CHECK(c2);
        memcpy(c2, c1, sizeof(float) * k->M * k->N);
        vtr_matmul(k->ta, k->tb, k->M, k->N, k->K, k->alpha, a, lda, b, ldb, k->beta, c1, k->N);
        cblas_sgemm(CblasRowMajor, k->ta, k->tb, k->M, k->N, k->K, k->alpha, a, lda, b, ldb,
                    k->beta, c2, k->N);
        CHECK(memcmp(c1, c2, sizeof(float) * k->M * k->N) == 0);
        free(a), free(b), free(c1), free(c2);
    }
}

/* tf32 is a GPU's precision: the CPU refuses it in one line and computes float32. */
TEST(matmul_tf32_is_a_gpus)
{
    vtr_error err;
    vtr_precision p;
    CHECK(vtr_precision_parse("tf32", &p) && p == VTR_PRECISION_TF32);
    CHECK_STR(vtr_precision_name(p), "tf32");
    CHECK_FAILS(vtr_matmul_check(VTR_PRECISION_TF32, &err), VTR_ERR_UNSUPPORTED,
                "tf32 products are a GPU's (train.device cuda)");
    vtr_precision before = vtr_matmul_use(VTR_PRECISION_TF32);
    CHECK(vtr_matmul_precision() == VTR_PRECISION_F32);
    vtr_matmul_use(before);
}

TEST(matmul_bfloat16_multiplies_the_rounded_operands)
{
    vtr_error err;
    vtr_error_clear(&err);
    if (!vtr_matmul_have_bf16()) {
        CHECK_FAILS(vtr_matmul_check(VTR_PRECISION_BF16, &err), VTR_ERR_UNSUPPORTED,
                    "AVX512-BF16 or AMX");
        vtr_matmul_use(VTR_PRECISION_BF16);
        CHECK(vtr_matmul_precision() == VTR_PRECISION_F32);
        test_skip("this CPU has neither AVX512-BF16 nor AMX");
    }
    CHECK_OK(vtr_matmul_check(VTR_PRECISION_BF16, &err));
    vtr_rng r;
    vtr_rng_init(&r, 2, 0);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const case_ *k = &cases[c];
        bool ta = k->ta == CblasTrans, tb = k->tb == CblasTrans;
        int lda = ta ? k->M : k->K, ldb = tb ? k->K : k->N;
        size_t mn = (size_t)k->M * k->N;
        float *a = random_matrix(&r, (size_t)k->M * k->K),
              *b = random_matrix(&r, (size_t)k->K * k->N);
        float *c0 = random_matrix(&r, mn), *c1 = malloc(sizeof(float) * mn);
        float *c2 = malloc(sizeof(float) * mn);
        CHECK(c1 && c2);
        memcpy(c1, c0, sizeof(float) * mn);
        memcpy(c2, c0, sizeof(float) * mn);
        CHECK(vtr_matmul_use(VTR_PRECISION_BF16) == VTR_PRECISION_F32);
        vtr_matmul(k->ta, k->tb, k->M, k->N, k->K, k->alpha, a, lda, b, ldb, k->beta, c1, k->N);
        vtr_matmul_operand held = vtr_matmul_hold(b, tb ? k->N : k->K, tb ? k->K : k->N, ldb);
        CHECK(held.bf16 != NULL);
        vtr_matmul_held(k->ta, k->tb, k->M, k->N, k->K, k->alpha, a, lda, &held, k->beta, c2, k->N);
        CHECK(vtr_matmul_use(VTR_PRECISION_F32) == VTR_PRECISION_BF16);
        CHECK(memcmp(c1, c2, sizeof(float) * mn) == 0);
        /* against double sums of the rounded operands: float32 summation's error only;
         * against the unrounded ones: bfloat16's, far larger */
        double worst_rounded = 0, worst_exact = 0;
        for (int i = 0; i < k->M; i++)
            for (int j = 0; j < k->N; j++) {
                double rounded = 0, exact = 0, mag = 0;
                for (int p = 0; p < k->K; p++) {
                    float x = at(a, lda, ta, i, p), y = at(b, ldb, !tb, j, p);
                    rounded += (double)round_bf16(x) * round_bf16(y);
                    exact += (double)x * y;
                    mag += fabs((double)x * y);
                }
                double base = (double)k->beta * c0[(size_t)i * k->N + j];
                double got = c1[(size_t)i * k->N + j];
                double scale = fabs(k->alpha) * mag + fabs(base) + 1e-30;
                double e1 = fabs(got - (k->alpha * rounded + base)) / scale;
                double e2 = fabs(got - (k->alpha * exact + base)) / scale;
                worst_rounded = e1 > worst_rounded ? e1 : worst_rounded;
                worst_exact = e2 > worst_exact ? e2 : worst_exact;
            }
        CHECK_MSG(worst_rounded < 4e-7 * (k->K + 2), "case %zu: %g from the rounded product", c,
                  worst_rounded);
        if (k->K >= 16)
            CHECK_MSG(worst_exact > 1e-4, "case %zu: %g from the float32 product: not rounded?", c,
                      worst_exact);
        free(a), free(b), free(c0), free(c1), free(c2);
    }
    CHECK(vtr_matmul_fallbacks() == 0);
}
