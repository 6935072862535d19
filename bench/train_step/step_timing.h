/* bench/train_step: what the vtr sides of the step benchmarks (train_step.c,
 * train_step_hgr.c) share: the command line, random frame features, .npy output for the
 * PyTorch side, the machine's sgemm peak and the JSON line of a run (the clock and the
 * median: bench/timing.h). Included by one program each (static functions). */
#ifndef VTR_BENCH_STEP_TIMING_H
#define VTR_BENCH_STEP_TIMING_H

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench/timing.h"
#include "lib/device.h"
#include "lib/matmul.h"
#include "lib/npy.h"
#include "lib/rng.h"

/* n frame features uniform in [0, 1) (non-negative, like pooled CNN features) from rng. */
static void random_frames(float *frames, size_t n, vtr_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        frames[i] = vtr_rng_uniform(rng);
}

/* DIR/NAME.npy from data (dtype, shape of ndim dims). */
static vtr_status save_npy(const char *dir, const char *name, vtr_dtype dtype, void *data, int ndim,
                           const int64_t *shape, vtr_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    vtr_tensor t = {.dtype = dtype, .ndim = ndim, .data = data};
    memcpy(t.shape, shape, sizeof(int64_t) * (size_t)ndim);
    return vtr_npy_save(path, &t, 1, err);
}

/* The products' precision of the run (--precision): set on the CPU by parse_args
 * (lib/matmul.h), on a GPU by the program after vtr_cuda_init (vtr_cuda_set_precision). */
static vtr_precision bench_precision = VTR_PRECISION_F32;

/* `prepare DIR [options]` (*dir = DIR) or `run [options]` (*dir = NULL); options --warmup W,
 * --steps N, --precision float32|bfloat16|tf32 (the products' precision, bench_precision;
 * tf32 on a GPU only) and, where dropout is not NULL, --dropout-off (*dropout = 0), where
 * model is not NULL, --model NAME (*model = NAME; the program checks it), where device is
 * not NULL, --device cpu|cuda. Returns 0, or 2 after printing usage or why the precision
 * cannot be had to stderr. */
static int parse_args(int argc, char **argv, const char *usage, const char **dir, int *warmup,
                      int *nsteps, int *dropout, const char **model, vtr_device *device)
{
    const char *mode = argc > 1 ? argv[1] : "";
    vtr_precision precision = VTR_PRECISION_F32;
    int i = 2;
    bool gpu = false;
    *dir = NULL;
    if (strcmp(mode, "prepare") == 0 && argc > 2)
        *dir = argv[i++];
    else if (strcmp(mode, "run") != 0)
        i = argc + 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
            *warmup = atoi(argv[++i]);
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            *nsteps = atoi(argv[++i]);
        else if (dropout && strcmp(argv[i], "--dropout-off") == 0)
            *dropout = 0;
        else if (model && strcmp(argv[i], "--model") == 0 && i + 1 < argc)
            *model = argv[++i];
        else if (device && strcmp(argv[i], "--device") == 0 && i + 1 < argc &&
                 (strcmp(argv[i + 1], "cpu") == 0 || strcmp(argv[i + 1], "cuda") == 0))
            gpu = (*device = strcmp(argv[++i], "cpu") == 0 ? VTR_DEVICE_CPU : VTR_DEVICE_CUDA) ==
                  VTR_DEVICE_CUDA;
        else if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc &&
                 vtr_precision_parse(argv[i + 1], &precision))
            i++;
        else
            break;
    }
    vtr_error err;
    if (!gpu && vtr_matmul_check(precision, &err) != VTR_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    if (!gpu)
        vtr_matmul_use(precision);
    bench_precision = precision;
    if (i != argc || *warmup < 0 || *nsteps < 1 || *nsteps > 4096) {
        fputs(usage, stderr);
        return 2;
    }
    return 0;
}

/* GFLOP/s of the best of 5 cblas_sgemm calls on n x n x n (after 2 warm-up calls). */
static double sgemm_peak(int n)
{
    size_t nn = (size_t)n * n;
    float *a = malloc(sizeof(float) * nn * 3);
    if (!a)
        return 0.0;
    float *b = a + nn, *c = b + nn;
    for (size_t i = 0; i < nn; i++)
        a[i] = b[i] = (float)(i % 7) * 0.1f;
    double best = 1e30;
    for (int r = 0; r < 7; r++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c,
                    n);
        double t = now() - t0;
        if (r >= 2 && t < best)
            best = t;
    }
    free(a);
    return 2.0 * n * n * (double)n / best / 1e9;
}

/* Prints the run's JSON line: fields (more "key": value, pairs, each followed by ", ", or
 * ""), the step times and losses of warmup + nsteps steps (nsteps 1 .. 4096), the timed
 * steps' matrix-product FLOPs and seconds in all, the sgemm peak and the peak RSS. */
static void print_run(const char *fields, int warmup, int nsteps, const double *times,
                      const float *losses, double flops, double timed, double peak)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double sorted[4096];
    int n = nsteps < 4096 ? nsteps : 4096;
    memcpy(sorted, times + warmup, sizeof(double) * (size_t)n);
    double median = median_sorted(sorted, n);
    printf("{\"side\": \"vtr\", %s\"warmup\": %d, \"steps\": %d, \"median_s\": %.6f, "
           "\"min_s\": %.6f, \"max_s\": %.6f, \"mean_s\": %.6f, \"gflop_per_step\": %.4f, "
           "\"effective_gflops\": %.2f, \"sgemm_peak_gflops\": %.2f, \"max_rss_mb\": %.1f, "
           "\"precision\": \"%s\", \"bf16_kernel\": \"%s\", \"times\": [",
           fields, warmup, nsteps, median, sorted[0], sorted[n - 1], timed / nsteps,
           flops / nsteps / 1e9, flops / timed / 1e9, peak, (double)ru.ru_maxrss / 1024.0,
           vtr_precision_name(bench_precision), vtr_matmul_report());
    for (int s = 0; s < warmup + nsteps; s++)
        printf("%s%.6f", s ? ", " : "", times[s]);
    printf("], \"losses\": [");
    for (int s = 0; s < warmup + nsteps; s++)
        printf("%s%.7g", s ? ", " : "", (double)losses[s]);
    printf("]}\n");
}

#endif
