/* Folded convolution nets and their CPU engine on oneDNN's 2.x C API (features/conv.h). */
#include "conv.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>
#include <dnnl_debug.h>
#if DNNL_VERSION_MAJOR != 2
#error "features/conv.c is written for oneDNN 2.x (Debian 12's libdnnl-dev 2.6)"
#endif

#include "lib/matmul.h"

void vtr_conv_net_free(vtr_conv_net *net)
{
    if (!net)
        return;
    for (size_t i = 0; i < net->n_layers && net->layers; i++) {
        free(net->layers[i].weight);
        free(net->layers[i].bias);
    }
    free(net->layers);
    free(net->ops);
    memset(net, 0, sizeof *net);
}

/* Grows *array (of n elements of size bytes) when it is full: its capacity is 64, then
 * the power of two at or above n, so it follows from n alone. */
static bool grow(void **array, size_t n, size_t size)
{
    if (n != 0 && (n < 64 || (n & (n - 1)) != 0))
        return true;
    void *p = realloc(*array, (n ? 2 * n : 64) * size);
    if (p)
        *array = p;
    return p != NULL;
}

vtr_status vtr_conv_net_add_layer(vtr_conv_net *net, vtr_conv_layer layer, vtr_error *err)
{
    if (!grow((void **)&net->layers, net->n_layers, sizeof *net->layers)) {
        free(layer.weight);
        free(layer.bias);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    net->layers[net->n_layers++] = layer;
    return VTR_OK;
}

vtr_status vtr_conv_net_add_op(vtr_conv_net *net, vtr_conv_op op, vtr_error *err)
{
    if (!grow((void **)&net->ops, net->n_ops, sizeof *net->ops))
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    net->ops[net->n_ops++] = op;
    return VTR_OK;
}

typedef struct map_shape {
    int c, h, w; /* c == 0: never written */
} map_shape;

/* output length of a window k, stride s over n cells padded with p0 before and p1 after;
 * 0 when it does not fit */
static int window_out(int n, int k, int s, int p0, int p1)
{
    long span = (long)n + p0 + p1 - k;
    return span < 0 ? 0 : (int)(span / s + 1);
}

/* The shape a conv gives for input `in`; VTR_ERR_INVALID naming op i when the layer does
 * not fit it. */
static vtr_status conv_shape(const vtr_conv_net *net, size_t i, map_shape in, map_shape *out,
                             vtr_error *err)
{
    const vtr_conv_op *op = &net->ops[i];
    if (op->layer < 0 || (size_t)op->layer >= net->n_layers)
        return vtr_fail(err, VTR_ERR_INVALID, "conv net op %zu: no layer %d", i, op->layer);
    const vtr_conv_layer *L = &net->layers[op->layer];
    if (L->in_channels != in.c)
        return vtr_fail(err, VTR_ERR_INVALID, "conv net op %zu: layer %d takes %d channels, "
                        "gets %d", i, op->layer, L->in_channels, in.c);
    if (L->groups < 1 || L->out_channels < 1 || L->in_channels % L->groups ||
        L->out_channels % L->groups)
        return vtr_fail(err, VTR_ERR_INVALID, "conv net op %zu: layer %d has %d groups for %d "
                        "-> %d channels", i, op->layer, L->groups, L->in_channels,
                        L->out_channels);
    if (L->kernel_h < 1 || L->kernel_w < 1 || L->stride < 1 || L->pad_top < 0 ||
        L->pad_left < 0 || L->pad_bottom < 0 || L->pad_right < 0 || !L->weight || !L->bias)
        return vtr_fail(err, VTR_ERR_INVALID, "conv net op %zu: layer %d has a %dx%d kernel, "
                        "stride %d, padding (%d, %d, %d, %d)%s", i, op->layer, L->kernel_h,
                        L->kernel_w, L->stride, L->pad_top, L->pad_left, L->pad_bottom,
                        L->pad_right, L->weight && L->bias ? "" : ", no weights");
    if (op->act != VTR_CONV_ACT_NONE && op->act != VTR_CONV_ACT_RELU &&
        op->act != VTR_CONV_ACT_RELU6)
        return vtr_fail(err, VTR_ERR_INVALID, "conv net op %zu: unknown activation %d", i,
                        (int)op->act);
    *out = (map_shape){L->out_channels,
                       window_out(in.h, L->kernel_h, L->stride, L->pad_top, L->pad_bottom),
                       window_out(in.w, L->kernel_w, L->stride, L->pad_left, L->pad_right)};
    return VTR_OK;
}

/* The shape a pool gives for input `in`, or VTR_ERR_INVALID naming op i. */
static vtr_status pool_shape(const vtr_conv_op *op, size_t i, map_shape in, map_shape *out,
                             vtr_error *err)
{
    if (op->kernel < 1 || op->stride < 1 || op->pad_begin < 0 || op->pad_end < 0 ||
        op->pad_begin >= op->kernel || op->pad_end >= op->kernel)
        return vtr_fail(err, VTR_ERR_INVALID, "conv net op %zu: bad pooling window (kernel %d, "
                        "stride %d, padding %d, %d)", i, op->kernel, op->stride, op->pad_begin,
                        op->pad_end);
    *out = (map_shape){in.c, window_out(in.h, op->kernel, op->stride, op->pad_begin, op->pad_end),
                       window_out(in.w, op->kernel, op->stride, op->pad_begin, op->pad_end)};
    return VTR_OK;
}

/* The shape a concat gives from the slots' shapes, or VTR_ERR_INVALID naming op i. */
static vtr_status concat_shape(const vtr_conv_net *net, size_t i, const map_shape *shapes,
                               map_shape *out, vtr_error *err)
{
    const vtr_conv_op *op = &net->ops[i];
    if (op->n_srcs < 2 || op->n_srcs > VTR_CONV_MAX_CONCAT)
        return vtr_fail(err, VTR_ERR_INVALID, "conv net op %zu: concat of %d slots (2 .. %d)", i,
                        op->n_srcs, VTR_CONV_MAX_CONCAT);
    *out = (map_shape){0, 0, 0};
    for (int k = 0; k < op->n_srcs; k++) {
        int s = op->srcs[k];
        if (s < 0 || s >= net->slots || s == op->dst)
            return vtr_fail(err, VTR_ERR_INVALID, "conv net op %zu: concat source %d is slot %d "
                            "(dst %d)", i, k, s, op->dst);
        map_shape in = shapes[s];
        if (!in.c)
            return vtr_fail(err, VTR_ERR_INVALID, "conv net op %zu: slot %d read before written",
                            i, s);
        if (k && (in.h != out->h || in.w != out->w))
            return vtr_fail(err, VTR_ERR_INVALID, "conv net op %zu: concat of %dx%d and %dx%d "
                            "maps", i, out->h, out->w, in.h, in.w);
        *out = (map_shape){out->c + in.c, in.h, in.w};
    }
    return VTR_OK;
}

/* The shape op i writes, given the slots' shapes (net->slots entries); VTR_ERR_INVALID
 * naming the op when the op is malformed or does not fit them. */
static vtr_status op_shape(const vtr_conv_net *net, size_t i, const map_shape *shapes,
                           map_shape *out, vtr_error *err)
{
    vtr_status st;
    const vtr_conv_op *op = &net->ops[i];
    bool concat = op->kind == VTR_CONV_OP_CONCAT;
    if ((!concat && (op->src < 0 || op->src >= net->slots || op->src == op->dst)) ||
        op->dst < 1 || op->dst >= net->slots)
        return vtr_fail(err, VTR_ERR_INVALID, "conv net op %zu: slots %d -> %d out of range",
                        i, concat ? -1 : op->src, op->dst);
    map_shape in = concat ? (map_shape){0, 0, 0} : shapes[op->src];
    if (!concat && !in.c)
        return vtr_fail(err, VTR_ERR_INVALID, "conv net op %zu: slot %d read before written",
                        i, op->src);
    switch (op->kind) {
    case VTR_CONV_OP_CONV:
        st = conv_shape(net, i, in, out, err);
        if (st == VTR_OK && op->accumulate && memcmp(&shapes[op->dst], out, sizeof *out) != 0)
            st = vtr_fail(err, VTR_ERR_INVALID, "conv net op %zu: accumulates into slot %d of "
                          "another shape", i, op->dst);
        return st;
    case VTR_CONV_OP_MAXPOOL:
    case VTR_CONV_OP_AVGPOOL:
        return pool_shape(op, i, in, out, err);
    case VTR_CONV_OP_CONCAT:
        return concat_shape(net, i, shapes, out, err);
    }
    return vtr_fail(err, VTR_ERR_INVALID, "conv net op %zu: unknown kind %d", i, (int)op->kind);
}

/* Simulates the program on an h x w input, filling shapes (net->slots entries). */
static vtr_status simulate(const vtr_conv_net *net, int h, int w, map_shape *shapes,
                           vtr_error *err)
{
    vtr_status st;
    if (net->in_channels < 1 || net->slots < 2 || net->out_slot < 1 ||
        net->out_slot >= net->slots || !net->n_ops || !net->ops)
        return vtr_fail(err, VTR_ERR_INVALID, "conv net: malformed (channels %d, slots %d, "
                        "output slot %d, %zu ops)", net->in_channels, net->slots,
                        net->out_slot, net->n_ops);
    if (h < 1 || w < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "conv net: input of %dx%d pixels", h, w);
    for (int s = 0; s < net->slots; s++)
        shapes[s] = (map_shape){0, 0, 0};
    shapes[0] = (map_shape){net->in_channels, h, w};
    for (size_t i = 0; i < net->n_ops; i++) {
        map_shape out;
        if ((st = op_shape(net, i, shapes, &out, err)) != VTR_OK)
            return st;
        if (out.h < 1 || out.w < 1)
            return vtr_fail(err, VTR_ERR_INVALID, "conv net op %zu: an input of %dx%d pixels is "
                            "too small", i, h, w);
        shapes[net->ops[i].dst] = out;
    }
    if (shapes[net->out_slot].c != net->out_channels)
        return vtr_fail(err, VTR_ERR_INVALID, "conv net: output slot %d holds %d channels, "
                        "not %d", net->out_slot, shapes[net->out_slot].c, net->out_channels);
    return VTR_OK;
}

vtr_status vtr_conv_net_check(const vtr_conv_net *net, int h, int w, vtr_error *err)
{
    if (net->slots < 1 || net->slots > 1024)
        return vtr_fail(err, VTR_ERR_INVALID, "conv net: %d slots", net->slots);
    map_shape *shapes = malloc((size_t)net->slots * sizeof *shapes);
    if (!shapes)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_status st = simulate(net, h, w, shapes, err);
    free(shapes);
    return st;
}

void vtr_conv_net_output_size(const vtr_conv_net *net, int h, int w, int *oh, int *ow)
{
    *oh = *ow = 0;
    if (net->slots < 1 || net->slots > 1024)
        return;
    map_shape *shapes = malloc((size_t)net->slots * sizeof *shapes);
    if (shapes && simulate(net, h, w, shapes, NULL) == VTR_OK) {
        *oh = shapes[net->out_slot].h;
        *ow = shapes[net->out_slot].w;
    }
    free(shapes);
}

vtr_status vtr_conv_fold_bn(float *weight, float *bias, int out_channels, size_t per_oc,
                            const float *gamma, const float *beta, const float *mean,
                            const float *var, float eps, vtr_error *err)
{
    for (int o = 0; o < out_channels; o++) {
        double v = (double)var[o] + eps;
        if (!(v > 0))
            return vtr_fail(err, VTR_ERR_INVALID, "batch norm channel %d: variance + eps = %g "
                            "is not positive", o, v);
        double s = gamma[o] / sqrt(v);
        float *wo = weight + (size_t)o * per_oc;
        for (size_t j = 0; j < per_oc; j++)
            wo[j] = (float)(wo[j] * s);
        bias[o] = (float)(beta[o] + ((double)bias[o] - mean[o]) * s);
    }
    return VTR_OK;
}

/* ---- CPU engine --------------------------------------------------------------------- */


/* Where a primitive argument lives: a slot's buffer (>= 1), one of the engine's own
 * buffers, or a memory object made elsewhere (weights, bias, the caller's input/output). */
enum {
    BUF_REORDER = -1,  /* a conv's source in the layout it wants */
    BUF_REORDER2 = -2, /* a slot on its way to another layout */
    BUF_SCRATCH = -3,  /* the primitives' shared scratchpad */
    BUF_EXT = -4,      /* `ext` below */
};

#define MAX_ARGS (VTR_CONV_MAX_CONCAT + 2) /* a concat's sources, dst, scratchpad */

typedef struct step_arg {
    int arg;                /* DNNL_ARG_* */
    int buf;                /* slot or BUF_* */
    dnnl_memory_desc_t md;
    dnnl_memory_t ext;      /* BUF_EXT: not owned by the step */
} step_arg;

typedef struct step {
    dnnl_primitive_t prim;
    int nargs;
    step_arg refs[MAX_ARGS];
    dnnl_exec_arg_t args[MAX_ARGS]; /* filled once buffers exist */
} step;

/* an op's weights in the layout its primitive wants, kept across plans */
typedef struct op_params {
    bool have;
    dnnl_memory_desc_t md;
    dnnl_memory_t weights; /* owns its buffer */
    dnnl_memory_t bias;    /* over net->layers[].bias */
} op_params;

struct vtr_conv_cpu {
    const vtr_conv_net *net;
    dnnl_data_type_t dt; /* of activations and weights: f32, or bf16 (vtr_conv_cpu_set_bf16) */
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_attr_t scratch_attr; /* a user scratchpad, no post-ops: all but convs */
    op_params *params; /* per op */
    /* the plan for one input shape */
    bool planned;
    int n, h, w;
    step *steps;
    size_t n_steps, cap_steps;
    void **buffers; /* per slot (0 unused), then REORDER, REORDER2, SCRATCH */
    size_t *sizes;
    dnnl_memory_t in_mem, out_mem;
};

static vtr_status dnnl_fail(vtr_error *err, dnnl_status_t s, const char *what)
{
    return vtr_fail(err, VTR_ERR_DEVICE, "oneDNN %s: %s", what, dnnl_status2str(s));
}

#define DNNL_TRY(call, what)                                                                 \
    do {                                                                                     \
        dnnl_status_t dnnl_try_s_ = (call);                                                  \
        if (dnnl_try_s_ != dnnl_success) {                                                   \
            st = dnnl_fail(err, dnnl_try_s_, what);                                          \
            goto end;                                                                        \
        }                                                                                    \
    } while (0)

/* index into c->buffers / c->sizes of a slot or BUF_* */
static size_t buf_index(const vtr_conv_cpu *c, int buf)
{
    return buf >= 0 ? (size_t)buf : (size_t)(c->net->slots - 1 - buf);
}

static void plan_free(vtr_conv_cpu *c)
{
    for (size_t i = 0; i < c->n_steps; i++) {
        step *s = &c->steps[i];
        for (int a = 0; a < s->nargs; a++)
            if (s->refs[a].buf != BUF_EXT && s->args[a].memory)
                dnnl_memory_destroy(s->args[a].memory);
        if (s->prim)
            dnnl_primitive_destroy(s->prim);
    }
    free(c->steps);
    c->steps = NULL;
    c->n_steps = c->cap_steps = 0;
    size_t nbuf = (size_t)c->net->slots + 3;
    for (size_t i = 0; c->buffers && i < nbuf; i++)
        free(c->buffers[i]);
    free(c->buffers);
    free(c->sizes);
    c->buffers = NULL;
    c->sizes = NULL;
    if (c->in_mem)
        dnnl_memory_destroy(c->in_mem);
    if (c->out_mem)
        dnnl_memory_destroy(c->out_mem);
    c->in_mem = c->out_mem = NULL;
    c->planned = false;
}

void vtr_conv_cpu_free(vtr_conv_cpu *c)
{
    if (!c)
        return;
    plan_free(c);
    for (size_t i = 0; c->params && i < c->net->n_ops; i++) {
        if (c->params[i].weights)
            dnnl_memory_destroy(c->params[i].weights);
        if (c->params[i].bias)
            dnnl_memory_destroy(c->params[i].bias);
    }
    free(c->params);
    if (c->scratch_attr)
        dnnl_primitive_attr_destroy(c->scratch_attr);
    if (c->stream)
        dnnl_stream_destroy(c->stream);
    if (c->engine)
        dnnl_engine_destroy(c->engine);
    free(c);
}

static vtr_status user_scratchpad_attr(dnnl_primitive_attr_t *attr, vtr_error *err)
{
    vtr_status st = VTR_OK;
    DNNL_TRY(dnnl_primitive_attr_create(attr), "attributes");
    DNNL_TRY(dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user),
             "scratchpad mode");
end:
    return st;
}

const char *vtr_conv_cpu_report(void)
{
    static char line[128];
    const dnnl_version_t *v = dnnl_version();
    const char *isa = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa()); /* "cpu_isa_avx2" */
    if (strncmp(isa, "cpu_isa_", 8) == 0)
        isa += 8;
    snprintf(line, sizeof line, "convolutions: oneDNN %d.%d.%d, ISA %s", v->major, v->minor,
             v->patch, isa);
    return line;
}

vtr_status vtr_conv_cpu_new(const vtr_conv_net *net, vtr_conv_cpu **out, vtr_error *err)
{
    vtr_status st = VTR_OK;
    *out = NULL;
    vtr_conv_cpu *c = calloc(1, sizeof *c);
    if (!c || !(c->params = calloc(net->n_ops ? net->n_ops : 1, sizeof *c->params))) {
        free(c);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    c->net = net;
    c->dt = dnnl_f32;
    DNNL_TRY(dnnl_engine_create(&c->engine, dnnl_cpu, 0), "engine");
    DNNL_TRY(dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags), "stream");
    if ((st = user_scratchpad_attr(&c->scratch_attr, err)) != VTR_OK)
        goto end;
    *out = c;
    c = NULL;
end:
    vtr_conv_cpu_free(c);
    return st;
}

vtr_status vtr_conv_cpu_set_bf16(vtr_conv_cpu *c, bool bf16, vtr_error *err)
{
    if (bf16 && !vtr_matmul_have_bf16())
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "bfloat16 convolutions need a CPU with AVX512-BF16 or AMX (oneDNN runs "
                        "this one with %s, where it would emulate them, slower than float32)",
                        dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa()));
    dnnl_data_type_t dt = bf16 ? dnnl_bf16 : dnnl_f32;
    if (dt == c->dt)
        return VTR_OK;
    plan_free(c); /* the next run plans again; prepare_params then finds the kept weights
                   * in the other type's layout and reorders them anew */
    c->dt = dt;
    return VTR_OK;
}

/* Appends a step for prim (taken over, also on failure) with nargs arguments. */
static vtr_status add_step(vtr_conv_cpu *c, dnnl_primitive_t prim, int nargs,
                           const step_arg *refs, vtr_error *err)
{
    if (c->n_steps == c->cap_steps) {
        size_t cap = c->cap_steps ? 2 * c->cap_steps : 64;
        step *s = realloc(c->steps, cap * sizeof *s);
        if (!s) {
            dnnl_primitive_destroy(prim);
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        }
        c->steps = s;
        c->cap_steps = cap;
    }
    step *s = &c->steps[c->n_steps++];
    memset(s, 0, sizeof *s);
    s->prim = prim;
    s->nargs = nargs;
    memcpy(s->refs, refs, (size_t)nargs * sizeof *refs);
    for (int a = 0; a < nargs; a++) {
        int b = refs[a].buf;
        if (b != BUF_EXT) {
            size_t bytes = dnnl_memory_desc_get_size(&refs[a].md);
            size_t i = buf_index(c, b);
            if (bytes > c->sizes[i])
                c->sizes[i] = bytes;
        }
    }
    return VTR_OK;
}

/* Creates the primitive of pd (destroyed here) and adds it as a step. */
static vtr_status add_pd_step(vtr_conv_cpu *c, dnnl_primitive_desc_t pd, int nargs,
                              step_arg *refs, vtr_error *err)
{
    vtr_status st = VTR_OK;
    dnnl_primitive_t prim = NULL;
    const dnnl_memory_desc_t *scratch = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (scratch && dnnl_memory_desc_get_size(scratch) > 0)
        refs[nargs++] = (step_arg){DNNL_ARG_SCRATCHPAD, BUF_SCRATCH, *scratch, NULL};
    DNNL_TRY(dnnl_primitive_create(&prim, pd), "primitive");
    st = add_step(c, prim, nargs, refs, err);
end:
    dnnl_primitive_desc_destroy(pd);
    return st;
}

/* A reorder step from (from_buf, from_md) to (to_buf, to_md); the ext memories are those
 * of a BUF_EXT side (NULL otherwise). */
static vtr_status add_reorder(vtr_conv_cpu *c, int from_buf, const dnnl_memory_desc_t *from_md,
                              dnnl_memory_t from_ext, int to_buf,
                              const dnnl_memory_desc_t *to_md, dnnl_memory_t to_ext,
                              vtr_error *err)
{
    vtr_status st = VTR_OK;
    dnnl_primitive_desc_t pd = NULL;
    DNNL_TRY(dnnl_reorder_primitive_desc_create(&pd, from_md, c->engine, to_md, c->engine,
                                                c->scratch_attr),
             "reorder");
    step_arg refs[MAX_ARGS] = {
        {DNNL_ARG_FROM, from_buf, *from_md, from_ext},
        {DNNL_ARG_TO, to_buf, *to_md, to_ext},
    };
    st = add_pd_step(c, pd, 2, refs, err);
end:
    return st;
}

/* One-off reorder executed now (weights into a primitive's layout). */
static vtr_status reorder_now(vtr_conv_cpu *c, dnnl_memory_t from, dnnl_memory_t to,
                              vtr_error *err)
{
    vtr_status st = VTR_OK;
    const dnnl_memory_desc_t *from_md, *to_md;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    DNNL_TRY(dnnl_memory_get_memory_desc(from, &from_md), "memory");
    DNNL_TRY(dnnl_memory_get_memory_desc(to, &to_md), "memory");
    DNNL_TRY(dnnl_reorder_primitive_desc_create(&pd, from_md, c->engine, to_md, c->engine, NULL),
             "weights reorder");
    DNNL_TRY(dnnl_primitive_create(&prim, pd), "weights reorder");
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    DNNL_TRY(dnnl_primitive_execute(prim, c->stream, 2, args), "weights reorder");
    DNNL_TRY(dnnl_stream_wait(c->stream), "weights reorder");
end:
    if (prim)
        dnnl_primitive_destroy(prim);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return st;
}

/* The dims of a layer's weights: (OC, C, KH, KW), or (G, OC / G, C / G, KH, KW) when
 * grouped (the same floats: PyTorch's (OC, C / G, KH, KW) splits OC by group); returns
 * their number. */
static int weight_dims(const vtr_conv_layer *L, dnnl_dims_t d)
{
    int g = L->groups;
    if (g == 1) {
        d[0] = L->out_channels, d[1] = L->in_channels, d[2] = L->kernel_h, d[3] = L->kernel_w;
        return 4;
    }
    d[0] = g, d[1] = L->out_channels / g, d[2] = L->in_channels / g, d[3] = L->kernel_h;
    d[4] = L->kernel_w;
    return 5;
}

/* Makes sure op i's weights are held in layout md (reordering them from the net when the
 * kept layout differs) and its bias memory exists. */
static vtr_status prepare_params(vtr_conv_cpu *c, size_t i, const dnnl_memory_desc_t *md,
                                 vtr_error *err)
{
    vtr_status st = VTR_OK;
    op_params *p = &c->params[i];
    const vtr_conv_layer *L = &c->net->layers[c->net->ops[i].layer];
    dnnl_memory_t plain = NULL;
    if (!p->bias) {
        dnnl_memory_desc_t bmd;
        dnnl_dims_t bd = {L->out_channels};
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x), "bias");
        DNNL_TRY(dnnl_memory_create(&p->bias, &bmd, c->engine, L->bias), "bias");
    }
    if (p->have && dnnl_memory_desc_equal(&p->md, md))
        return VTR_OK;
    if (p->weights)
        dnnl_memory_destroy(p->weights);
    p->weights = NULL;
    p->have = false;
    dnnl_memory_desc_t pmd;
    dnnl_dims_t wd;
    int nd = weight_dims(L, wd);
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&pmd, nd, wd, dnnl_f32, nd == 4 ? dnnl_oihw : dnnl_goihw),
             "weights");
    DNNL_TRY(dnnl_memory_create(&plain, &pmd, c->engine, L->weight), "weights");
    DNNL_TRY(dnnl_memory_create(&p->weights, md, c->engine, DNNL_MEMORY_ALLOCATE), "weights");
    if ((st = reorder_now(c, plain, p->weights, err)) != VTR_OK)
        goto end;
    p->md = *md;
    p->have = true;
end:
    if (plain)
        dnnl_memory_destroy(plain);
    return st;
}

/* conv primitive descriptor for op i, oneDNN choosing the layouts */
static vtr_status conv_pd(vtr_conv_cpu *c, size_t i, map_shape in, map_shape out,
                          dnnl_primitive_desc_t *pd, vtr_error *err)
{
    vtr_status st = VTR_OK;
    const vtr_conv_op *op = &c->net->ops[i];
    const vtr_conv_layer *L = &c->net->layers[op->layer];
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_memory_desc_t src, wei, bias, dst;
    dnnl_dims_t sd = {c->n, in.c, in.h, in.w}, wd, bd = {out.c}, dd = {c->n, out.c, out.h, out.w};
    dnnl_dims_t strides = {L->stride, L->stride};
    dnnl_dims_t pad_l = {L->pad_top, L->pad_left}, pad_r = {L->pad_bottom, L->pad_right};
    int wnd = weight_dims(L, wd);
    *pd = NULL;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&src, 4, sd, c->dt, dnnl_format_tag_any), "conv");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&wei, wnd, wd, c->dt, dnnl_format_tag_any), "conv");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&bias, 1, bd, dnnl_f32, dnnl_x), "conv");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst, 4, dd, c->dt, dnnl_format_tag_any), "conv");
    dnnl_convolution_desc_t cd;
    DNNL_TRY(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                dnnl_convolution_direct, &src, &wei, &bias,
                                                &dst, strides, pad_l, pad_r),
             "convolution");
    if ((st = user_scratchpad_attr(&attr, err)) != VTR_OK)
        goto end;
    DNNL_TRY(dnnl_post_ops_create(&po), "post-ops");
    if (op->accumulate)
        DNNL_TRY(dnnl_post_ops_append_sum(po, 1.0f), "post-ops");
    if (op->act == VTR_CONV_ACT_RELU)
        DNNL_TRY(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f),
                 "post-ops");
    else if (op->act == VTR_CONV_ACT_RELU6) /* clip to [alpha, beta] */
        DNNL_TRY(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, 0.0f, 6.0f),
                 "post-ops");
    DNNL_TRY(dnnl_primitive_attr_set_post_ops(attr, po), "post-ops");
    DNNL_TRY(dnnl_primitive_desc_create(pd, &cd, attr, c->engine, NULL), "convolution");
end:
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return st;
}

/* The argument `arg` that reads slot s held in layout md: slot 0 is the caller's input. */
static step_arg slot_arg(const vtr_conv_cpu *c, int arg, int s, const dnnl_memory_desc_t *md)
{
    return (step_arg){arg, s ? s : BUF_EXT, *md, s ? NULL : c->in_mem};
}

/* Adds the step of pd (taken over) with the nargs arguments in refs and then its output,
 * slot dst, which holds `out` from then on in the layout pd writes. */
static vtr_status add_output_step(vtr_conv_cpu *c, dnnl_primitive_desc_t pd, int nargs,
                                  step_arg *refs, int dst, map_shape out, map_shape *shapes,
                                  dnnl_memory_desc_t *mds, vtr_error *err)
{
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    refs[nargs] = (step_arg){DNNL_ARG_DST, dst, *dst_md, NULL};
    mds[dst] = *dst_md;
    shapes[dst] = out;
    return add_pd_step(c, pd, nargs + 1, refs, err);
}

/* Op i, which writes `out`, as steps: plan_conv, plan_pool, plan_concat. shapes and mds
 * are the slots' shapes and layouts before it, updated. */
static vtr_status plan_conv(vtr_conv_cpu *c, size_t i, map_shape out, map_shape *shapes,
                            dnnl_memory_desc_t *mds, vtr_error *err)
{
    vtr_status st = VTR_OK;
    const vtr_conv_op *op = &c->net->ops[i];
    dnnl_primitive_desc_t pd = NULL;
    if ((st = conv_pd(c, i, shapes[op->src], out, &pd, err)) != VTR_OK)
        return st;
    if (op->accumulate) {
        /* the sum post-op reads dst in place, in the layout the kernel writes: a shortcut
         * held in another layout moves to it first (never in the ResNets, whose layouts
         * agree) */
        const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
        if (!dnnl_memory_desc_equal(want, &mds[op->dst])) {
            if ((st = add_reorder(c, op->dst, &mds[op->dst], NULL, BUF_REORDER2, want, NULL,
                                  err)) != VTR_OK ||
                (st = add_reorder(c, BUF_REORDER2, want, NULL, op->dst, want, NULL, err)) !=
                    VTR_OK)
                goto end;
            mds[op->dst] = *want;
        }
    }
    const dnnl_memory_desc_t *src_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *wei_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *bias_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1);
    if ((st = prepare_params(c, i, wei_md, err)) != VTR_OK)
        goto end;
    step_arg refs[MAX_ARGS];
    refs[0] = slot_arg(c, DNNL_ARG_SRC, op->src, src_md);
    if (!dnnl_memory_desc_equal(src_md, &mds[op->src])) {
        step_arg from = slot_arg(c, DNNL_ARG_FROM, op->src, &mds[op->src]);
        st = add_reorder(c, from.buf, &from.md, from.ext, BUF_REORDER, src_md, NULL, err);
        if (st != VTR_OK)
            goto end;
        refs[0] = (step_arg){DNNL_ARG_SRC, BUF_REORDER, *src_md, NULL};
    }
    refs[1] = (step_arg){DNNL_ARG_WEIGHTS, BUF_EXT, *wei_md, c->params[i].weights};
    refs[2] = (step_arg){DNNL_ARG_BIAS, BUF_EXT, *bias_md, c->params[i].bias};
    st = add_output_step(c, pd, 3, refs, op->dst, out, shapes, mds, err);
    pd = NULL;
end:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return st;
}

/* A max or average pool, reading its source in the layout it is held in. */
static vtr_status plan_pool(vtr_conv_cpu *c, size_t i, map_shape out, map_shape *shapes,
                            dnnl_memory_desc_t *mds, vtr_error *err)
{
    vtr_status st = VTR_OK;
    const vtr_conv_op *op = &c->net->ops[i];
    bool max = op->kind == VTR_CONV_OP_MAXPOOL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t dst;
    dnnl_dims_t dd = {c->n, out.c, out.h, out.w};
    dnnl_dims_t strides = {op->stride, op->stride}, kernel = {op->kernel, op->kernel};
    dnnl_dims_t dil = {0, 0}, pad_l = {op->pad_begin, op->pad_begin};
    dnnl_dims_t pad_r = {op->pad_end, op->pad_end};
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst, 4, dd, c->dt, dnnl_format_tag_any), "pool");
    dnnl_pooling_v2_desc_t pdesc;
    DNNL_TRY(dnnl_pooling_v2_forward_desc_init(&pdesc, dnnl_forward_inference,
                                               max ? dnnl_pooling_max
                                                   : dnnl_pooling_avg_exclude_padding,
                                               &mds[op->src], &dst, strides, kernel, dil, pad_l,
                                               pad_r),
             "pooling");
    DNNL_TRY(dnnl_primitive_desc_create(&pd, &pdesc, c->scratch_attr, c->engine, NULL),
             "pooling");
    step_arg refs[MAX_ARGS] = {slot_arg(c, DNNL_ARG_SRC, op->src, &mds[op->src])};
    st = add_output_step(c, pd, 1, refs, op->dst, out, shapes, mds, err);
end:
    return st;
}

/* A concat along the channels of sources held in whatever layouts, into the layout
 * oneDNN picks for them. */
static vtr_status plan_concat(vtr_conv_cpu *c, size_t i, map_shape out, map_shape *shapes,
                              dnnl_memory_desc_t *mds, vtr_error *err)
{
    vtr_status st = VTR_OK;
    const vtr_conv_op *op = &c->net->ops[i];
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t srcs[VTR_CONV_MAX_CONCAT];
    step_arg refs[MAX_ARGS];
    for (int k = 0; k < op->n_srcs; k++) {
        srcs[k] = mds[op->srcs[k]];
        refs[k] = slot_arg(c, DNNL_ARG_MULTIPLE_SRC + k, op->srcs[k], &srcs[k]);
    }
    DNNL_TRY(dnnl_concat_primitive_desc_create(&pd, NULL, op->n_srcs, 1, srcs, c->scratch_attr,
                                               c->engine),
             "concat");
    st = add_output_step(c, pd, op->n_srcs, refs, op->dst, out, shapes, mds, err);
end:
    return st;
}

/* Builds the primitives and buffers for input (n, C, h, w). */
static vtr_status plan(vtr_conv_cpu *c, int n, int h, int w, vtr_error *err)
{
    vtr_status st = VTR_OK;
    const vtr_conv_net *net = c->net;
    size_t nbuf = (size_t)net->slots + 3;
    map_shape *shapes = malloc((size_t)net->slots * sizeof *shapes);
    dnnl_memory_desc_t *mds = calloc((size_t)net->slots, sizeof *mds);
    c->buffers = calloc(nbuf, sizeof *c->buffers);
    c->sizes = calloc(nbuf, sizeof *c->sizes);
    if (!shapes || !mds || !c->buffers || !c->sizes) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    if ((st = simulate(net, h, w, shapes, err)) != VTR_OK)
        goto end;
    c->n = n;
    c->h = h;
    c->w = w;
    for (int s = 0; s < net->slots; s++)
        shapes[s] = (map_shape){0, 0, 0};
    shapes[0] = (map_shape){net->in_channels, h, w};
    dnnl_dims_t id = {n, net->in_channels, h, w};
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&mds[0], 4, id, dnnl_f32, dnnl_nchw), "input");
    DNNL_TRY(dnnl_memory_create(&c->in_mem, &mds[0], c->engine, DNNL_MEMORY_NONE), "input");
    for (size_t i = 0; i < net->n_ops; i++) {
        map_shape out;
        if ((st = op_shape(net, i, shapes, &out, err)) != VTR_OK)
            goto end;
        switch (net->ops[i].kind) {
        case VTR_CONV_OP_CONV:
            st = plan_conv(c, i, out, shapes, mds, err);
            break;
        case VTR_CONV_OP_CONCAT:
            st = plan_concat(c, i, out, shapes, mds, err);
            break;
        default:
            st = plan_pool(c, i, out, shapes, mds, err);
        }
        if (st != VTR_OK)
            goto end;
    }
    /* the output map, NHWC */
    map_shape o = shapes[net->out_slot];
    dnnl_memory_desc_t omd;
    dnnl_dims_t od = {n, o.c, o.h, o.w};
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&omd, 4, od, dnnl_f32, dnnl_nhwc), "output");
    DNNL_TRY(dnnl_memory_create(&c->out_mem, &omd, c->engine, DNNL_MEMORY_NONE), "output");
    st = add_reorder(c, net->out_slot, &mds[net->out_slot], NULL, BUF_EXT, &omd, c->out_mem, err);
    if (st != VTR_OK)
        goto end;

    /* buffers, then the steps' memory objects over them */
    for (size_t b = 1; b < nbuf; b++) {
        if (!c->sizes[b])
            continue;
        size_t bytes = (c->sizes[b] + 63) & ~(size_t)63;
        if (!(c->buffers[b] = aligned_alloc(64, bytes))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %zu bytes of activations",
                          bytes);
            goto end;
        }
    }
    for (size_t i = 0; i < c->n_steps; i++) {
        step *s = &c->steps[i];
        for (int a = 0; a < s->nargs; a++) {
            step_arg *r = &s->refs[a];
            s->args[a].arg = r->arg;
            if (r->buf == BUF_EXT)
                s->args[a].memory = r->ext;
            else
                DNNL_TRY(dnnl_memory_create(&s->args[a].memory, &r->md, c->engine,
                                            c->buffers[buf_index(c, r->buf)]),
                         "memory");
        }
    }
    c->planned = true;
end:
    free(shapes);
    free(mds);
    if (st != VTR_OK)
        plan_free(c);
    return st;
}

vtr_status vtr_conv_cpu_run(vtr_conv_cpu *c, const float *in, int n, int h, int w, float *out,
                            vtr_error *err)
{
    vtr_status st = VTR_OK;
    if (n == 0)
        return VTR_OK;
    if (n < 0)
        return vtr_fail(err, VTR_ERR_INVALID, "conv net: batch of %d", n);
    if (!c->planned || c->n != n || c->h != h || c->w != w) {
        plan_free(c);
        if ((st = plan(c, n, h, w, err)) != VTR_OK)
            return st;
    }
    DNNL_TRY(dnnl_memory_set_data_handle(c->in_mem, (void *)(uintptr_t)in), "input");
    DNNL_TRY(dnnl_memory_set_data_handle(c->out_mem, out), "output");
    for (size_t i = 0; i < c->n_steps; i++)
        DNNL_TRY(dnnl_primitive_execute(c->steps[i].prim, c->stream, c->steps[i].nargs,
                                        c->steps[i].args),
                 "execute");
    DNNL_TRY(dnnl_stream_wait(c->stream), "execute");
end:
    return st;
}
