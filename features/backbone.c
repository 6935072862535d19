/* CNN backbones: torchvision's ResNets from their state_dicts, Keras CNNs from their
 * graphs (features/backbone.h). */
#include "backbone.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "features/backbone_weights.h"
#include "features/conv.h"
#include "features/keras_net.h"
#include "lib/args.h"
#include "lib/device.h"
#include "lib/matmul.h"
#include "lib/tensor_file.h"

#define BN_EPS 1e-5f

/* torchvision's resnet constructors: block type and blocks per layer; the Keras CNNs:
 * their feature dimension (0: the graph's) */
static const struct arch_info {
    const char *name;
    bool bottleneck;
    int blocks[4];
    bool keras;
    int dim;
} archs[VTR_BACKBONE_ARCH_COUNT] = {
    [VTR_RESNET18] = {"resnet18", false, {2, 2, 2, 2}},
    [VTR_RESNET34] = {"resnet34", false, {3, 4, 6, 3}},
    [VTR_RESNET50] = {"resnet50", true, {3, 4, 6, 3}},
    [VTR_RESNET101] = {"resnet101", true, {3, 4, 23, 3}},
    [VTR_RESNET152] = {"resnet152", true, {3, 8, 36, 3}},
    [VTR_MOBILENET_V2] = {"mobilenet_v2", .keras = true, .dim = 1280},
    [VTR_INCEPTION_V3] = {"inception_v3", .keras = true, .dim = 2048},
    [VTR_KERAS_CNN] = {"keras", .keras = true},
};

const char *vtr_backbone_arch_name(vtr_backbone_arch arch)
{
    return (unsigned)arch < VTR_BACKBONE_ARCH_COUNT ? archs[arch].name : "unknown";
}

vtr_status vtr_backbone_arch_parse(const char *name, vtr_backbone_arch *arch, vtr_error *err)
{
    for (int a = 0; a < VTR_BACKBONE_ARCH_COUNT; a++) {
        if (!strcmp(name, archs[a].name)) {
            *arch = (vtr_backbone_arch)a;
            return VTR_OK;
        }
    }
    char shown[64];
    return vtr_fail(err, VTR_ERR_INVALID, "unknown architecture '%s' (resnet18, resnet34, "
                    "resnet50, resnet101, resnet152, mobilenet_v2, inception_v3 or keras)",
                    vtr_printable(name, strlen(name), shown, sizeof shown));
}

vtr_status vtr_backbone_arch_infer(const vtr_safetensors *st, const char *what,
                                   vtr_backbone_arch *arch, vtr_error *err)
{
    const char *recorded = vtr_safetensors_meta(st, "arch");
    if (recorded) {
        if (vtr_backbone_arch_parse(recorded, arch, NULL) == VTR_OK)
            return VTR_OK;
        char shown[64];
        return vtr_fail(err, VTR_ERR_FORMAT, "weights %s: metadata \"arch\" '%s' is no "
                        "architecture vtr knows", what,
                        vtr_printable(recorded, strlen(recorded), shown, sizeof shown));
    }
    const char *format = vtr_safetensors_meta(st, "format");
    if (format && !strcmp(format, "keras")) {
        *arch = VTR_KERAS_CNN;
        return VTR_OK;
    }
    int blocks[4];
    for (int li = 0; li < 4; li++) {
        char name[64];
        for (blocks[li] = 0;; blocks[li]++) {
            snprintf(name, sizeof name, "layer%d.%d.conv1.weight", li + 1, blocks[li]);
            if (!vtr_safetensors_find(st, name))
                break;
        }
    }
    bool bottleneck = vtr_safetensors_find(st, "layer1.0.conv3.weight") != NULL;
    const vtr_tensor *first = vtr_safetensors_find(st, "layer1.0.conv1.weight");
    int k = bottleneck ? 1 : 3;
    bool stem = first && first->ndim == 4 && first->shape[0] == 64 && first->shape[1] == 64 &&
                first->shape[2] == k && first->shape[3] == k;
    for (int a = 0; stem && a < VTR_BACKBONE_ARCH_COUNT; a++) {
        if (archs[a].bottleneck == bottleneck && !memcmp(archs[a].blocks, blocks, sizeof blocks)) {
            *arch = (vtr_backbone_arch)a;
            return VTR_OK;
        }
    }
    return vtr_fail(err, VTR_ERR_FORMAT, "weights %s are of no architecture vtr knows: %d, %d, "
                    "%d, %d %s blocks in layer1-4%s (resnet18, 34, 50, 101 or 152 expected)",
                    what, blocks[0], blocks[1], blocks[2], blocks[3],
                    bottleneck ? "bottleneck" : "basic",
                    first && !stem ? ", layer1.0.conv1.weight of another shape" : "");
}

int vtr_backbone_arch_dim(vtr_backbone_arch arch)
{
    if ((unsigned)arch >= VTR_BACKBONE_ARCH_COUNT)
        return 0;
    if (archs[arch].keras)
        return archs[arch].dim;
    return archs[arch].bottleneck ? 2048 : 512;
}

static void put_spec(vtr_backbone_conv_spec *out, int cap, int *n, const char *prefix,
                     const char *conv, const char *bn, int out_c, int in_c, int k)
{
    if (*n < cap) {
        vtr_backbone_conv_spec *c = &out[*n];
        snprintf(c->conv, sizeof c->conv, "%s%s", prefix, conv);
        snprintf(c->bn, sizeof c->bn, "%s%s", prefix, bn);
        c->out_c = out_c;
        c->in_c = in_c;
        c->k = k;
    }
    (*n)++;
}

int vtr_backbone_conv_specs(vtr_backbone_arch arch, vtr_backbone_conv_spec *out, int cap)
{
    if ((unsigned)arch >= VTR_BACKBONE_ARCH_COUNT || archs[arch].keras)
        return 0;
    const struct arch_info *a = &archs[arch];
    int n = 0, in_c = 64;
    put_spec(out, cap, &n, "", "conv1", "bn1", 64, 3, 7);
    for (int li = 0; li < 4; li++) {
        int planes = 64 << li;
        for (int bi = 0; bi < a->blocks[li]; bi++) {
            char p[24];
            snprintf(p, sizeof p, "layer%d.%d.", li + 1, bi);
            int stride = li > 0 && bi == 0 ? 2 : 1;
            int out_c = a->bottleneck ? planes * 4 : planes;
            if (a->bottleneck) {
                put_spec(out, cap, &n, p, "conv1", "bn1", planes, in_c, 1);
                put_spec(out, cap, &n, p, "conv2", "bn2", planes, planes, 3);
                put_spec(out, cap, &n, p, "conv3", "bn3", out_c, planes, 1);
            } else {
                put_spec(out, cap, &n, p, "conv1", "bn1", planes, in_c, 3);
                put_spec(out, cap, &n, p, "conv2", "bn2", planes, planes, 3);
            }
            if (stride != 1 || in_c != out_c)
                put_spec(out, cap, &n, p, "downsample.0", "downsample.1", out_c, in_c, 1);
            in_c = out_c;
        }
    }
    return n;
}

struct vtr_backbone {
    vtr_backbone_arch arch;
    vtr_device device;
    vtr_preprocess_options pre; /* what the weights expect */
    vtr_conv_net net;
    vtr_conv_cpu *cpu;
    vtr_conv_cuda *cuda;
    bool bf16;    /* vtr_backbone_set_bf16 */
    float *map;   /* (n, gh, gw, D) for pooled output */
    size_t map_cap; /* floats */
};

/* ---- building the net from the tensors -------------------------------------------- */

#define MAX_SLOTS 8

typedef struct builder {
    vtr_backbone_weights w;
    vtr_conv_net *net;
    bool busy[MAX_SLOTS];
} builder;

static int alloc_slot(builder *b)
{
    for (int s = 1; s < MAX_SLOTS; s++) {
        if (!b->busy[s]) {
            b->busy[s] = true;
            if (s >= b->net->slots)
                b->net->slots = s + 1;
            return s;
        }
    }
    return -1; /* not reached: a block holds at most four slots */
}

/* Reads `conv`.weight (out_c, in_c, k, k) and batch norm `bn`.*, folds them into a new
 * layer and appends the op src -> dst. */
static vtr_status add_conv(builder *b, const char *conv, const char *bn, int in_c, int out_c,
                           int k, int stride, int src, int dst, bool relu, bool accumulate,
                           vtr_error *err)
{
    vtr_status st = VTR_OK;
    vtr_conv_net *net = b->net;
    char name[128];
    float *weight = NULL, *bias = NULL, *bnp[4] = {NULL, NULL, NULL, NULL};
    static const char *const bn_names[4] = {"weight", "bias", "running_mean", "running_var"};
    int64_t wshape[4] = {out_c, in_c, k, k}, cshape[1] = {out_c};
    snprintf(name, sizeof name, "%s.weight", conv);
    if ((st = vtr_backbone_weights_read(&b->w, name, 4, wshape, &weight, err)) != VTR_OK)
        goto end;
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", bn, bn_names[i]);
        if ((st = vtr_backbone_weights_read(&b->w, name, 1, cshape, &bnp[i], err)) != VTR_OK)
            goto end;
    }
    if (!(bias = calloc((size_t)out_c, sizeof *bias))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    st = vtr_conv_fold_bn(weight, bias, out_c, (size_t)in_c * k * k, bnp[0], bnp[1], bnp[2],
                          bnp[3], BN_EPS, err);
    if (st != VTR_OK) {
        vtr_error_context(err, "weights %s: %s", b->w.what, bn);
        goto end;
    }
    vtr_conv_layer layer = {
        .in_channels = in_c, .out_channels = out_c, .groups = 1, .kernel_h = k, .kernel_w = k,
        .stride = stride, .pad_top = k / 2, .pad_left = k / 2, .pad_bottom = k / 2,
        .pad_right = k / 2, .weight = weight, .bias = bias};
    weight = bias = NULL;
    if ((st = vtr_conv_net_add_layer(net, layer, err)) != VTR_OK)
        goto end;
    st = vtr_conv_net_add_op(net, (vtr_conv_op){.kind = VTR_CONV_OP_CONV, .src = src,
                                                .dst = dst, .layer = (int)net->n_layers - 1,
                                                .act = relu ? VTR_CONV_ACT_RELU
                                                            : VTR_CONV_ACT_NONE,
                                                .accumulate = accumulate},
                             err);
end:
    free(weight);
    free(bias);
    for (int i = 0; i < 4; i++)
        free(bnp[i]);
    return st;
}

/* One block of layer `li` (1-based), index `bi`, reading slot *cur; leaves its output's
 * slot in *cur. */
static vtr_status add_block(builder *b, bool bottleneck, int li, int bi, int in_c, int planes,
                            int stride, int *cur, vtr_error *err)
{
    vtr_status st;
    char p[64], conv[96], bn[96];
    snprintf(p, sizeof p, "layer%d.%d", li, bi);
    int out_c = bottleneck ? planes * 4 : planes;
    bool downsample = stride != 1 || in_c != out_c;
    int x = *cur, t1 = alloc_slot(b), t2 = -1, last_in = t1;
    snprintf(conv, sizeof conv, "%s.conv1", p);
    snprintf(bn, sizeof bn, "%s.bn1", p);
    if (bottleneck) {
        /* conv1 1x1, conv2 3x3 with the stride (v1.5), conv3 1x1 */
        if ((st = add_conv(b, conv, bn, in_c, planes, 1, 1, x, t1, true, false, err)))
            return st;
        t2 = alloc_slot(b);
        snprintf(conv, sizeof conv, "%s.conv2", p);
        snprintf(bn, sizeof bn, "%s.bn2", p);
        if ((st = add_conv(b, conv, bn, planes, planes, 3, stride, t1, t2, true, false, err)))
            return st;
        last_in = t2;
    } else if ((st = add_conv(b, conv, bn, in_c, planes, 3, stride, x, t1, true, false, err))) {
        return st;
    }
    int y = x;
    if (downsample) {
        y = alloc_slot(b);
        snprintf(conv, sizeof conv, "%s.downsample.0", p);
        snprintf(bn, sizeof bn, "%s.downsample.1", p);
        if ((st = add_conv(b, conv, bn, in_c, out_c, 1, stride, x, y, false, false, err)))
            return st;
    }
    snprintf(conv, sizeof conv, "%s.conv%d", p, bottleneck ? 3 : 2);
    snprintf(bn, sizeof bn, "%s.bn%d", p, bottleneck ? 3 : 2);
    int k = bottleneck ? 1 : 3;
    if ((st = add_conv(b, conv, bn, planes, out_c, k, 1, last_in, y, true, true, err)))
        return st;
    b->busy[t1] = false;
    if (t2 >= 0)
        b->busy[t2] = false;
    if (y != x)
        b->busy[x] = false;
    *cur = y;
    return VTR_OK;
}

static bool resnet_ignored(void *ctx, const char *name)
{
    (void)ctx;
    static const char nbt[] = ".num_batches_tracked";
    size_t len = strlen(name);
    return !strncmp(name, "fc.", 3) ||
           (len >= sizeof nbt - 1 && !strcmp(name + len - (sizeof nbt - 1), nbt));
}

static vtr_status build_net(builder *b, vtr_backbone_arch arch, vtr_error *err)
{
    vtr_status st;
    const struct arch_info *a = &archs[arch];
    vtr_conv_net *net = b->net;
    net->in_channels = 3;
    int c1 = alloc_slot(b), pool = alloc_slot(b);
    if ((st = add_conv(b, "conv1", "bn1", 3, 64, 7, 2, 0, c1, true, false, err)) ||
        (st = vtr_conv_net_add_op(b->net,
                                  (vtr_conv_op){.kind = VTR_CONV_OP_MAXPOOL, .src = c1,
                                                .dst = pool, .kernel = 3, .stride = 2,
                                                .pad_begin = 1, .pad_end = 1},
                                  err)))
        return st;
    b->busy[c1] = false;
    int cur = pool, in_c = 64;
    for (int li = 0; li < 4; li++) {
        int planes = 64 << li;
        for (int bi = 0; bi < a->blocks[li]; bi++) {
            int stride = li > 0 && bi == 0 ? 2 : 1;
            if ((st = add_block(b, a->bottleneck, li + 1, bi, in_c, planes, stride, &cur, err)))
                return st;
            in_c = a->bottleneck ? planes * 4 : planes;
        }
    }
    net->out_slot = cur;
    net->out_channels = in_c;
    /* everything else must be the classifier or a counter */
    if ((st = vtr_backbone_weights_check_all_used(&b->w, resnet_ignored, NULL, err)) != VTR_OK)
        return st;
    return vtr_conv_net_check(net, 224, 224, err);
}

static vtr_status build_resnet(const vtr_safetensors *st, const char *what,
                               vtr_backbone_arch arch, vtr_conv_net *net, vtr_error *err)
{
    builder bld = {.net = net};
    vtr_status s = vtr_backbone_weights_open(&bld.w, st, what, archs[arch].name, err);
    if (s == VTR_OK)
        s = build_net(&bld, arch, err);
    vtr_backbone_weights_close(&bld.w);
    return s;
}

/* A Keras CNN: the graph and the preprocessing that vtr-backbone-init --tfjs recorded
 * (features/tfjs_model.h); TF.js's pixel / 255 where none is. */
static vtr_status build_keras(const vtr_safetensors *st, const char *what,
                              vtr_backbone_arch arch, vtr_backbone *b, vtr_error *err)
{
    const char *graph = vtr_safetensors_meta(st, "keras_model");
    if (!graph)
        return vtr_fail(err, VTR_ERR_FORMAT, "weights %s: no Keras graph in their metadata "
                        "(convert a TF.js model with vtr-backbone-init --tfjs)", what);
    json_error_t jerr;
    json_t *config = json_loads(graph, 0, &jerr);
    if (!config)
        return vtr_fail(err, VTR_ERR_FORMAT, "weights %s: metadata \"keras_model\": %s", what,
                        jerr.text);
    vtr_status s = vtr_keras_net_build(config, st, what, archs[arch].name, &b->net, err);
    json_decref(config);
    if (s != VTR_OK)
        return s;
    b->pre = (vtr_preprocess_options){.resize = 256, .crop = 224, .std = {1, 1, 1}};
    const char *size = vtr_safetensors_meta(st, "input_size");
    const char *mean = vtr_safetensors_meta(st, "mean"), *std = vtr_safetensors_meta(st, "std");
    long long v;
    if (size) {
        if (vtr_parse_int(size, 1, 65536, &v) != 0)
            return vtr_fail(err, VTR_ERR_FORMAT, "weights %s: metadata \"input_size\" is not a "
                            "size", what);
        b->pre.resize = b->pre.crop = (int)v;
    }
    if ((mean && vtr_parse_floats(mean, 3, b->pre.mean) != 0) ||
        (std && vtr_parse_floats(std, 3, b->pre.std) != 0))
        return vtr_fail(err, VTR_ERR_FORMAT, "weights %s: metadata \"mean\" or \"std\" is not "
                        "R,G,B", what);
    return vtr_preprocess_check(&b->pre, err);
}

vtr_status vtr_backbone_from_safetensors(const vtr_safetensors *st, const char *what,
                                         vtr_backbone_arch arch, vtr_device device,
                                         vtr_backbone **out, vtr_error *err)
{
    vtr_status s = VTR_OK;
    *out = NULL;
    vtr_backbone_arch theirs;
    vtr_error infer_err;
    if (arch == VTR_BACKBONE_ARCH_INFER) {
        if ((s = vtr_backbone_arch_infer(st, what, &arch, err)) != VTR_OK)
            return s;
    } else if ((unsigned)arch >= VTR_BACKBONE_ARCH_COUNT) {
        return vtr_fail(err, VTR_ERR_INVALID, "unknown architecture %d", (int)arch);
    } else if (vtr_backbone_arch_infer(st, what, &theirs, &infer_err) == VTR_OK && theirs != arch) {
        return vtr_fail(err, VTR_ERR_INVALID, "%s are %s weights, not %s: use -a %s", what,
                        archs[theirs].name, archs[arch].name, archs[theirs].name);
    }
    vtr_backbone *b = calloc(1, sizeof *b);
    if (!b)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    b->arch = arch;
    b->device = device;
    vtr_preprocess_defaults(&b->pre);
    s = archs[arch].keras ? build_keras(st, what, arch, b, err)
                          : build_resnet(st, what, arch, &b->net, err);
    if (s != VTR_OK)
        goto end;
    if (device == VTR_DEVICE_CPU) {
        s = vtr_conv_cpu_new(&b->net, &b->cpu, err);
    } else {
        s = vtr_conv_cuda_new(&b->net, &b->cuda, err);
    }
    if (s != VTR_OK)
        goto end;
    *out = b;
    b = NULL;
end:
    vtr_backbone_free(b);
    return s;
}

vtr_status vtr_backbone_load(const char *path, vtr_backbone_arch arch,
                             vtr_device device, vtr_backbone **out, vtr_error *err)
{
    vtr_safetensors st;
    *out = NULL;
    vtr_status s = vtr_tensor_file_open(path, &st, err);
    if (s != VTR_OK) {
        vtr_error_context(err, "weights");
        return s;
    }
    s = vtr_backbone_from_safetensors(&st, path, arch, device, out, err);
    vtr_safetensors_close(&st);
    return s;
}

void vtr_backbone_free(vtr_backbone *b)
{
    if (!b)
        return;
    vtr_conv_cpu_free(b->cpu);
    vtr_conv_cuda_free(b->cuda);
    vtr_conv_net_free(&b->net);
    free(b->map);
    free(b);
}

void vtr_backbone_preprocess(const vtr_backbone *b, vtr_preprocess_options *opt)
{
    *opt = b->pre;
}

vtr_status vtr_backbone_bf16_check(vtr_device device, vtr_error *err)
{
    if (device == VTR_DEVICE_CPU && !vtr_matmul_have_bf16())
        return vtr_fail(
            err, VTR_ERR_UNSUPPORTED,
            "bfloat16 features need a CPU with AVX512-BF16 or AMX; this one has neither");
    return VTR_OK;
}

vtr_status vtr_backbone_set_bf16(vtr_backbone *b, bool bf16, vtr_error *err)
{
    vtr_status st = bf16 ? vtr_backbone_bf16_check(b->device, err) : VTR_OK;
    if (st != VTR_OK)
        return st;
    st = b->device == VTR_DEVICE_CPU ? vtr_conv_cpu_set_bf16(b->cpu, bf16, err)
                                     : vtr_conv_cuda_set_bf16(b->cuda, bf16, err);
    if (st == VTR_OK)
        b->bf16 = bf16;
    return st;
}

bool vtr_backbone_bf16(const vtr_backbone *b)
{
    return b->bf16;
}

vtr_backbone_arch vtr_backbone_get_arch(const vtr_backbone *b)
{
    return b->arch;
}

int vtr_backbone_dim(const vtr_backbone *b)
{
    return b->net.out_channels;
}

const vtr_conv_net *vtr_backbone_net(const vtr_backbone *b)
{
    return &b->net;
}

void vtr_backbone_grid_size(const vtr_backbone *b, int h, int w, int *gh, int *gw)
{
    vtr_conv_net_output_size(&b->net, h, w, gh, gw);
}

vtr_status vtr_backbone_forward(vtr_backbone *b, const float *images, int n, int h, int w,
                                bool grid, float *out, vtr_error *err)
{
    vtr_status st;
    if (n < 0)
        return vtr_fail(err, VTR_ERR_INVALID, "backbone: batch of %d images", n);
    if (n == 0)
        return VTR_OK;
    if ((st = vtr_conv_net_check(&b->net, h, w, err)) != VTR_OK)
        return st;
    int gh, gw;
    vtr_conv_net_output_size(&b->net, h, w, &gh, &gw);
    size_t cells = (size_t)gh * gw, D = (size_t)b->net.out_channels;
    float *map = out;
    if (!grid) {
        size_t need = (size_t)n * cells * D;
        if (need > b->map_cap) {
            free(b->map);
            b->map_cap = 0;
            if (!(b->map = malloc(need * sizeof *b->map)))
                return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for the feature maps");
            b->map_cap = need;
        }
        map = b->map;
    }
    if (b->device == VTR_DEVICE_CPU) {
        st = vtr_conv_cpu_run(b->cpu, images, n, h, w, map, err);
    } else {
        st = vtr_conv_cuda_run(b->cuda, images, n, h, w, map, err);
    }
    if (st != VTR_OK || grid)
        return st;
    /* global average pool: out[i] = mean over the cells of map[i] */
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        const float *m = map + (size_t)i * cells * D;
        float *o = out + (size_t)i * D;
        for (size_t c = 0; c < D; c++)
            o[c] = 0.0f;
        for (size_t g = 0; g < cells; g++)
            for (size_t c = 0; c < D; c++)
                o[c] += m[g * D + c];
        for (size_t c = 0; c < D; c++)
            o[c] /= (float)cells;
    }
    return VTR_OK;
}
