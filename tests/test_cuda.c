/* The CUDA backend against the CPU. Skipped where no GPU is present (or without CUDA). */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lib/device.h"
#include "lib/rng.h"
#include "lib/upload_stage.h"

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

/* lib/upload_stage.h: rounds of fill, copy, take, read on the default stream (a device copy
 * queued behind a long kernel, so that it runs late), release, alternating between two
 * slots; each round's reader must see its own round's values: the take waits for the copy,
 * the next copy into the slot for the release, the next fill for the copy. Then the
 * refusals of a slot outside the stage and of an upload larger than a slot. */
TEST(cuda_upload_stage_orders_copies_and_kernels)
{
    test_need_cuda();
    vtr_error err;
    enum { ROUNDS = 8 };
    size_t n = (size_t)1 << 22, busy_n = (size_t)1 << 26;
    vtr_cuda_stage *s;
    float *out[ROUNDS], *busy;
    CHECK_OK(vtr_cuda_init(0, NULL, 0, &err));
    CHECK_OK(vtr_cuda_stage_new(&s, 2, n * sizeof(float), &err));
    CHECK_OK(vtr_cuda_malloc((void **)&busy, busy_n * sizeof(float), &err));
    CHECK_OK(vtr_cuda_zero(busy, busy_n * sizeof(float), &err));
    for (int r = 0; r < ROUNDS; r++) {
        int k = r % 2;
        float *h, *d;
        CHECK_OK(vtr_cuda_malloc((void **)&out[r], n * sizeof(float), &err));
        CHECK_OK(vtr_cuda_stage_host(s, k, (void **)&h, &err));
        for (size_t i = 0; i < n; i++)
            h[i] = (float)(r * 4096 + (int)(i % 4096));
        CHECK_OK(vtr_cuda_stage_upload(s, k, n * sizeof(float), &err));
        for (int i = 0; i < 4; i++) /* keeps the GPU busy without waiting for it */
            CHECK_OK(vtr_cuda_add(busy, busy + busy_n / 2, busy_n / 2, &err));
        CHECK_OK(vtr_cuda_stage_take(s, k, (void **)&d, &err));
        CHECK_OK(vtr_cuda_copy(out[r], d, n * sizeof(float), &err));
        CHECK_OK(vtr_cuda_stage_release(s, k, VTR_OK, &err));
    }
    float *back = malloc(n * sizeof(float));
    for (int r = 0; r < ROUNDS; r++) {
        CHECK_OK(vtr_cuda_to_host(back, out[r], n * sizeof(float), &err));
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (back[i] != (float)(r * 4096 + (int)(i % 4096)))
                bad = i;
        CHECK_MSG(bad == n, "round %d: element %zu is %g", r, bad, bad < n ? back[bad] : 0.0);
        vtr_cuda_free(out[r]);
    }
    void *p;
    CHECK_FAILS(vtr_cuda_stage_host(s, 2, &p, &err), VTR_ERR_INVALID, "slot 2 outside 0..1");
    CHECK_FAILS(vtr_cuda_stage_upload(s, 0, n * sizeof(float) + 1, &err), VTR_ERR_INVALID,
                "into a slot of");
    vtr_cuda_stage_free(s);
    vtr_cuda_free(busy);
    free(back);
}

/* With a GPU, init names it and check accepts it; a GPU past the last is refused, naming
 * those there are. Without one, the CUDA backend still loads (lib/cuda_loader.h) and says
 * that no GPU is visible; a build without CUDA says so. Either says what to do. */
TEST(cuda_unavailable_is_a_clear_error_or_works)
{
    vtr_error err;
    char name[256];
    if (vtr_cuda_available()) {
        int count = vtr_cuda_device_count();
        CHECK_OK(vtr_cuda_check(count - 1, &err));
        CHECK_FAILS(vtr_cuda_check(count, &err), VTR_ERR_DEVICE, "does not exist");
        CHECK_FAILS(vtr_cuda_init(count, name, sizeof name, &err), VTR_ERR_DEVICE,
                    "does not exist");
        CHECK_OK(vtr_cuda_init(0, name, sizeof name, &err));
        CHECK(strlen(name) > 0);
    } else {
#ifdef VTR_HAVE_CUDA
        const char *why = "no CUDA GPU is visible";
#else
        const char *why = "built without CUDA";
#endif
        CHECK_FAILS(vtr_cuda_check(0, &err), VTR_ERR_DEVICE, why);
        CHECK(strstr(err.msg, "(--device cpu)"));
        CHECK_FAILS(vtr_cuda_init(0, name, sizeof name, &err), VTR_ERR_DEVICE, why);
        CHECK(strstr(err.msg, "(--device cpu)"));
    }
}

/* lib/dist_nccl.cu with the NCCL that VTR_NCCL_LIBRARY (or libnccl.so.2) names, alone (a
 * communicator of one rank, as one GPU allows): it loads and names its version; the sum of
 * one rank is its array, and the gather its rows, both through the GPU's own copies.
 * Skipped where NCCL does not load. */
TEST(cuda_nccl_alone)
{
    test_need_cuda();
    vtr_error err;
    char name[64], id[VTR_NCCL_ID_BYTES];
    if (vtr_cuda_nccl_load(name, sizeof name, &err) != VTR_OK) {
        char why[sizeof err.msg + 8];
        snprintf(why, sizeof why, "NCCL: %s", err.msg);
        test_skip(why);
    }
    CHECK_MSG(strncmp(name, "NCCL 2.", 7) == 0, "name '%s'", name);
    vtr_nccl *c = NULL;
    CHECK_OK(vtr_cuda_nccl_id(id, &err));
    CHECK_OK(vtr_cuda_nccl_init(&c, id, 0, 1, &err));
    enum { N = 1000, ROWS = 7, ROW = 12 };
    float host[N], back[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)i * 0.25f - 3.0f;
    float *dev = NULL;
    CHECK_OK(vtr_cuda_malloc((void **)&dev, sizeof host, &err));
    CHECK_OK(vtr_cuda_to_device(dev, host, sizeof host, &err));
    CHECK_OK(vtr_cuda_nccl_sum(c, dev, N, &err));
    CHECK_OK(vtr_cuda_nccl_gather_rows(c, dev, ROW, ROWS, &err));
    CHECK_OK(vtr_cuda_to_host(back, dev, sizeof back, &err));
    CHECK(memcmp(host, back, sizeof host) == 0);
    vtr_cuda_free(dev);
    vtr_cuda_nccl_free(c);
}
