/* bench/features: vtr's side. Times vtr_backbone_forward on random normalized images and
 * measures the machine's float32 peak the same run (OpenBLAS sgemm and oneDNN's best
 * ResNet convolution), for bench/features/run.sh.
 *
 *   features_bench WEIGHTS ARCH BATCH RUNS WARMUP [--bf16] [--device cuda]
 *
 * Prints one JSON object: seconds per batch (warm-up runs first), the model's GFLOP per
 * 224x224 image (2 * multiply-adds of every convolution, counted from the folded net),
 * and the peaks. Threads: OpenMP's (OMP_NUM_THREADS) for oneDNN, OpenBLAS's for sgemm.
 * With --bf16 (bench/features/bf16.sh): the convolutions in bfloat16
 * (vtr_backbone_set_bf16), no peaks, and the cosine of each image's bfloat16 features to
 * its float32 ones (one untimed float32 batch first): "cosine_min", "cosine_mean".
 * With --device cuda (tests/gpu/run.sh): the cuDNN engine on GPU 0 (with --bf16 too: in
 * bfloat16, and the cosines); a timed batch includes the copy of the images to the GPU and
 * of the features back, as the program's does; no peaks; "device" names the GPU.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "features/backbone.h"
#include "features/conv.h"
#include "lib/device.h"
#include "lib/rng.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int out_len(int n, int k, int s, int p0, int p1)
{
    return (n + p0 + p1 - k) / s + 1;
}

/* GFLOP of the convolutions for one h x w image */
static double net_gflop(const vtr_conv_net *net, int h, int w)
{
    int *hh = calloc((size_t)net->slots, sizeof *hh), *ww = calloc((size_t)net->slots, sizeof *ww);
    double flop = 0;
    hh[0] = h;
    ww[0] = w;
    for (size_t i = 0; i < net->n_ops; i++) {
        const vtr_conv_op *op = &net->ops[i];
        if (op->kind == VTR_CONV_OP_CONCAT) {
            hh[op->dst] = hh[op->srcs[0]];
            ww[op->dst] = ww[op->srcs[0]];
            continue;
        }
        int ih = hh[op->src], iw = ww[op->src];
        if (op->kind == VTR_CONV_OP_CONV) {
            const vtr_conv_layer *L = &net->layers[op->layer];
            hh[op->dst] = out_len(ih, L->kernel_h, L->stride, L->pad_top, L->pad_bottom);
            ww[op->dst] = out_len(iw, L->kernel_w, L->stride, L->pad_left, L->pad_right);
            flop += 2.0 * L->out_channels * hh[op->dst] * ww[op->dst] * L->in_channels /
                    L->groups * L->kernel_h * L->kernel_w;
        } else {
            hh[op->dst] = out_len(ih, op->kernel, op->stride, op->pad_begin, op->pad_end);
            ww[op->dst] = out_len(iw, op->kernel, op->stride, op->pad_begin, op->pad_end);
        }
    }
    free(hh);
    free(ww);
    return flop / 1e9;
}

static double sgemm_peak(void)
{
    int n = 2048;
    float *a = malloc((size_t)n * n * sizeof *a), *b = malloc((size_t)n * n * sizeof *b);
    float *c = malloc((size_t)n * n * sizeof *c);
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = (float)(i % 7) * 1e-3f;
        b[i] = (float)(i % 5) * 1e-3f;
    }
    double best = 1e30;
    for (int r = 0; r < 4; r++) {
        double t = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
        t = now() - t;
        if (r && t < best)
            best = t;
    }
    free(a), free(b), free(c);
    return 2.0 * n * n * n / best / 1e9;
}

/* oneDNN through vtr's engine on ResNet layers at batch 32; the best GFLOP/s */
static double conv_peak(void)
{
    static const int layers[][4] = {{256, 256, 3, 14}, {64, 64, 3, 56}, {1024, 256, 1, 14}};
    double best_rate = 0;
    vtr_rng rng;
    vtr_rng_init(&rng, 9, 0);
    for (size_t l = 0; l < sizeof layers / sizeof layers[0]; l++) {
        int C = layers[l][0], OC = layers[l][1], K = layers[l][2], H = layers[l][3], N = 32;
        vtr_conv_layer layer = {C, OC, 1, K, K, 1, K / 2, K / 2, K / 2, K / 2,
                                malloc((size_t)OC * C * K * K * sizeof(float)),
                                calloc((size_t)OC, sizeof(float))};
        for (size_t i = 0; i < (size_t)OC * C * K * K; i++)
            layer.weight[i] = 0.01f * vtr_rng_normal(&rng);
        vtr_conv_op op = {.kind = VTR_CONV_OP_CONV, .src = 0, .dst = 1, .layer = 0,
                          .act = VTR_CONV_ACT_RELU};
        vtr_conv_net net = {C, 2, 1, OC, 1, 1, malloc(sizeof layer), malloc(sizeof op)};
        net.layers[0] = layer;
        net.ops[0] = op;
        float *x = malloc((size_t)N * C * H * H * sizeof *x), *y = malloc((size_t)N * OC * H * H * sizeof *y);
        for (size_t i = 0; i < (size_t)N * C * H * H; i++)
            x[i] = vtr_rng_normal(&rng);
        vtr_conv_cpu *cpu = NULL;
        vtr_error err;
        if (vtr_conv_cpu_new(&net, &cpu, &err) == VTR_OK) {
            double best = 1e30;
            for (int r = 0; r < 4; r++) {
                double t = now();
                if (vtr_conv_cpu_run(cpu, x, N, H, H, y, &err) != VTR_OK)
                    break;
                t = now() - t;
                if (r && t < best)
                    best = t;
            }
            double rate = 2.0 * N * OC * H * H * (double)C * K * K / best / 1e9;
            if (rate > best_rate)
                best_rate = rate;
        }
        vtr_conv_cpu_free(cpu);
        vtr_conv_net_free(&net);
        free(x), free(y);
    }
    return best_rate;
}

int main(int argc, char **argv)
{
    bool bf16 = false, cuda = false, usage = argc < 6;
    for (int a = 6; a < argc; a++) {
        if (strcmp(argv[a], "--bf16") == 0)
            bf16 = true;
        else if (strcmp(argv[a], "--device") == 0 && a + 1 < argc && !strcmp(argv[a + 1], "cuda"))
            cuda = true, a++;
        else
            usage = true;
    }
    if (usage) {
        fprintf(stderr,
                "usage: features_bench WEIGHTS ARCH BATCH RUNS WARMUP [--bf16] [--device cuda]\n");
        return 1;
    }
    vtr_error err;
    vtr_backbone_arch arch;
    int batch = atoi(argv[3]), runs = atoi(argv[4]), warmup = atoi(argv[5]);
    if (vtr_backbone_arch_parse(argv[2], &arch, &err) != VTR_OK || batch < 1 || runs < 1 ||
        warmup < 0) {
        fprintf(stderr, "features_bench: bad arguments\n");
        return 1;
    }
    char gpu[256] = "";
    double t_load = now();
    vtr_backbone *b = NULL;
    if ((cuda && vtr_cuda_init(0, gpu, sizeof gpu, &err) != VTR_OK) ||
        vtr_backbone_load(argv[1], arch, cuda ? VTR_DEVICE_CUDA : VTR_DEVICE_CPU, &b, &err) !=
            VTR_OK) {
        fprintf(stderr, "features_bench: %s\n", err.msg);
        return 1;
    }
    t_load = now() - t_load;
    int D = vtr_backbone_dim(b);
    size_t nin = (size_t)batch * 3 * 224 * 224;
    float *x = malloc(nin * sizeof *x), *out = malloc((size_t)batch * D * sizeof *out);
    vtr_rng rng;
    vtr_rng_init(&rng, 1, 0);
    for (size_t i = 0; i < nin; i++)
        x[i] = vtr_rng_normal(&rng);
    float *ref = NULL; /* float32 features of the batch, with --bf16 */
    if (bf16) {
        ref = malloc((size_t)batch * D * sizeof *ref);
        if (vtr_backbone_forward(b, x, batch, 224, 224, false, ref, &err) != VTR_OK ||
            vtr_backbone_set_bf16(b, true, &err) != VTR_OK) {
            fprintf(stderr, "features_bench: %s\n", err.msg);
            return 1;
        }
    }
    int total = warmup + runs;
    double *times = malloc((size_t)total * sizeof *times);
    for (int r = 0; r < total; r++) {
        double t = now();
        if (vtr_backbone_forward(b, x, batch, 224, 224, false, out, &err) != VTR_OK) {
            fprintf(stderr, "features_bench: %s\n", err.msg);
            return 1;
        }
        times[r] = now() - t;
    }
    double gflop = net_gflop(vtr_backbone_net(b), 224, 224);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"side\": \"%s\", \"arch\": \"%s\", \"batch\": %d, \"threads\": %d, "
           "\"warmup\": %d, \"load_s\": %.3f, \"gflop_per_image\": %.4f, \"max_rss_mb\": %.0f, "
           "\"checksum\": %.6g, \"isa\": \"%s\", ",
           cuda   ? (bf16 ? "vtr-cuda-bf16" : "vtr-cuda")
           : bf16 ? "vtr-bf16"
                  : "vtr",
           argv[2], batch, omp_get_max_threads(), warmup, t_load, gflop, ru.ru_maxrss / 1024.0,
           (double)out[0] + out[(size_t)batch * D - 1], cuda ? "cuDNN" : vtr_conv_cpu_report());
    if (bf16) {
        double lo = 2, sum = 0;
        for (int i = 0; i < batch; i++) {
            double dot = 0, na = 0, nb = 0;
            for (int d = 0; d < D; d++) {
                double p = out[(size_t)i * D + d], q = ref[(size_t)i * D + d];
                dot += p * q, na += p * p, nb += q * q;
            }
            double c = dot / sqrt(na * nb);
            lo = c < lo ? c : lo;
            sum += c;
        }
        printf("\"cosine_min\": %.6f, \"cosine_mean\": %.6f, ", lo, sum / batch);
    }
    if (cuda) {
        printf("\"device\": \"%s\", ", gpu);
    } else if (!bf16) {
        printf("\"sgemm_peak_gflops\": %.1f, \"conv_peak_gflops\": %.1f, ", sgemm_peak(),
               conv_peak());
    }
    printf("\"times\": [");
    for (int r = 0; r < total; r++)
        printf("%s%.4f", r ? ", " : "", times[r]);
    printf("]}\n");
    free(times), free(x), free(out), free(ref);
    vtr_backbone_free(b);
    return 0;
}
