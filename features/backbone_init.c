/* Untrained ResNet weights as torchvision initialises them (features/backbone_init.h). */
#define _POSIX_C_SOURCE 200809L
#include "backbone_init.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/rng.h"
#include "lib/safetensors.h"

#define FC_CLASSES 1000
#define MAX_CONVS 160
/* per conv: weight + 5 batch-norm tensors; then fc.weight, fc.bias */
#define MAX_TENSORS (6 * MAX_CONVS + 2)

static float *filled(int64_t n, float value)
{
    float *p = malloc((size_t)n * sizeof *p);
    if (p)
        for (int64_t i = 0; i < n; i++)
            p[i] = value;
    return p;
}

vtr_status vtr_backbone_init_write(const char *path, vtr_backbone_arch arch, uint64_t seed,
                                   vtr_error *err)
{
    if ((unsigned)arch >= VTR_BACKBONE_ARCH_COUNT)
        return vtr_fail(err, VTR_ERR_INVALID, "unknown architecture %d", (int)arch);
    vtr_backbone_conv_spec convs[MAX_CONVS];
    int n_convs = vtr_backbone_conv_specs(arch, convs, MAX_CONVS);
    vtr_status st = VTR_OK;
    char *names[MAX_TENSORS] = {0};
    vtr_tensor tensors[MAX_TENSORS];
    size_t n = 0;
    json_t *meta = NULL;
    static int64_t zero_count = 0; /* num_batches_tracked: an int64 scalar 0 */
    memset(tensors, 0, sizeof tensors);

#define ADD(NAME_FMT, NAME_ARG, DTYPE, NDIM, S0, S1, S2, S3, DATA)                           \
    do {                                                                                   \
        char name_[128];                                                                   \
        if (snprintf(name_, sizeof name_, NAME_FMT, NAME_ARG) >= (int)sizeof name_)        \
            name_[0] = '\0'; /* cannot happen: names are at most 63 bytes */               \
        names[n] = strdup(name_);                                                          \
        tensors[n] = (vtr_tensor){DTYPE, NDIM, {S0, S1, S2, S3}, DATA};                    \
        if (!names[n] || !tensors[n].data) {                                               \
            n++;                                                                           \
            st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);                  \
            goto end;                                                                      \
        }                                                                                  \
        n++;                                                                               \
    } while (0)

    for (int c = 0; c < n_convs; c++) {
        const vtr_backbone_conv_spec *cs = &convs[c];
        int64_t numel = (int64_t)cs->out_c * cs->in_c * cs->k * cs->k;
        /* kaiming_normal_(mode="fan_out", nonlinearity="relu"): gain sqrt(2) over
         * sqrt(fan_out), fan_out = out_c * k * k */
        float sd = sqrtf(2.0f / (float)(cs->out_c * cs->k * cs->k));
        float *w = malloc((size_t)numel * sizeof *w);
        if (w) {
            vtr_rng rng;
            vtr_rng_init(&rng, seed, (uint64_t)c);
            for (int64_t i = 0; i < numel; i++)
                w[i] = sd * vtr_rng_normal(&rng);
        }
        ADD("%s.weight", cs->conv, VTR_F32, 4, cs->out_c, cs->in_c, cs->k, cs->k, w);
        ADD("%s.weight", cs->bn, VTR_F32, 1, cs->out_c, 0, 0, 0, filled(cs->out_c, 1.0f));
        ADD("%s.bias", cs->bn, VTR_F32, 1, cs->out_c, 0, 0, 0, filled(cs->out_c, 0.0f));
        ADD("%s.running_mean", cs->bn, VTR_F32, 1, cs->out_c, 0, 0, 0,
            filled(cs->out_c, 0.0f));
        ADD("%s.running_var", cs->bn, VTR_F32, 1, cs->out_c, 0, 0, 0,
            filled(cs->out_c, 1.0f));
        ADD("%s.num_batches_tracked", cs->bn, VTR_I64, 0, 0, 0, 0, 0, &zero_count);
    }
    int dim = vtr_backbone_arch_dim(arch);
    float bound = 1.0f / sqrtf((float)dim);
    float *fw = malloc((size_t)FC_CLASSES * dim * sizeof *fw);
    float *fb = malloc(FC_CLASSES * sizeof *fb);
    if (!fw || !fb) {
        free(fw);
        free(fb);
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
        goto end;
    }
    {
        vtr_rng rng;
        vtr_rng_init(&rng, seed, (uint64_t)n_convs);
        for (int64_t i = 0; i < (int64_t)FC_CLASSES * dim; i++)
            fw[i] = bound * (2.0f * vtr_rng_uniform(&rng) - 1.0f);
        for (int i = 0; i < FC_CLASSES; i++)
            fb[i] = bound * (2.0f * vtr_rng_uniform(&rng) - 1.0f);
    }
    ADD("%s", "fc.weight", VTR_F32, 2, FC_CLASSES, dim, 0, 0, fw);
    ADD("%s", "fc.bias", VTR_F32, 1, FC_CLASSES, 0, 0, 0, fb);
#undef ADD

    char seed_text[32];
    snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
    meta = json_pack("{s:s, s:s, s:s, s:s, s:s}", "format", "pt", "arch",
                     vtr_backbone_arch_name(arch), "init",
                     "torchvision default (weights=None): conv kaiming_normal_ fan_out relu, "
                     "batch norm 1/0, fc Linear default; vtr Philox streams",
                     "seed", seed_text, "pretrained", "false");
    if (!meta) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
        goto end;
    }
    st = vtr_safetensors_save(path, n, (const char *const *)names, tensors, meta, err);
end:
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
        if (tensors[i].data != &zero_count)
            free(tensors[i].data);
    }
    json_decref(meta);
    return st;
}
