/* The CUDA backend against the CPU. Skipped where no GPU is present (or without CUDA). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "lib/device.h"
#include "lib/rng.h"

TEST(cuda_uniform_is_bit_identical_to_cpu)
{
    test_need_cuda();
    vtr_error err;
    size_t n = 100003;
    float *dev = NULL, *host = malloc(n * sizeof *host);
    CHECK_OK(vtr_cuda_malloc((void **)&dev, n * sizeof *dev, &err));
    CHECK_OK(vtr_cuda_uniform(dev, n, 42, 7, &err));
    CHECK_OK(vtr_cuda_to_host(host, dev, n * sizeof *host, &err));
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(host[i] == vtr_philox_uniform_at(42, 7, i), "element %zu", i);
    vtr_cuda_free(dev);
    free(host);
}

TEST(cuda_matmul_matches_cblas)
{
    test_need_cuda();
    vtr_error err;
    int m = 37, n = 53, k = 29;
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n);
    float *c = malloc(sizeof(float) * m * n), *ref = malloc(sizeof(float) * m * n);
    vtr_rng rng;
    vtr_rng_init(&rng, 1, 0);
    for (int i = 0; i < m * k; i++)
        a[i] = vtr_rng_normal(&rng);
    for (int i = 0; i < k * n; i++)
        b[i] = vtr_rng_normal(&rng);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f,
                ref, n);
    float *da, *db, *dc;
    CHECK_OK(vtr_cuda_malloc((void **)&da, sizeof(float) * m * k, &err));
    CHECK_OK(vtr_cuda_malloc((void **)&db, sizeof(float) * k * n, &err));
    CHECK_OK(vtr_cuda_malloc((void **)&dc, sizeof(float) * m * n, &err));
    CHECK_OK(vtr_cuda_to_device(da, a, sizeof(float) * m * k, &err));
    CHECK_OK(vtr_cuda_to_device(db, b, sizeof(float) * k * n, &err));
    CHECK_OK(vtr_cuda_matmul(da, db, dc, m, n, k, &err));
    CHECK_OK(vtr_cuda_to_host(c, dc, sizeof(float) * m * n, &err));
    for (int i = 0; i < m * n; i++)
        CHECK_MSG(fabsf(c[i] - ref[i]) <= 1e-4f * (1 + fabsf(ref[i])), "element %d: %g vs %g",
                  i, c[i], ref[i]);
    vtr_cuda_free(da);
    vtr_cuda_free(db);
    vtr_cuda_free(dc);
    free(a);
    free(b);
    free(c);
    free(ref);
}

/* With a GPU, init names it. Without one, the CUDA backend still loads (lib/cuda_loader.h)
 * and says that no GPU is visible; a build without CUDA says so. Either says what to do. */
TEST(cuda_unavailable_is_a_clear_error_or_works)
{
    vtr_error err;
    char name[256];
    if (vtr_cuda_available()) {
        CHECK_OK(vtr_cuda_init(0, name, sizeof name, &err));
        CHECK(strlen(name) > 0);
    } else {
#ifdef VTR_HAVE_CUDA
        CHECK_FAILS(vtr_cuda_init(0, name, sizeof name, &err), VTR_ERR_DEVICE,
                    "no CUDA GPU is visible");
#else
        CHECK_FAILS(vtr_cuda_init(0, name, sizeof name, &err), VTR_ERR_DEVICE,
                    "built without CUDA");
#endif
        CHECK(strstr(err.msg, "(--device cpu)"));
    }
}
