/* Keras functional CNNs as folded conv nets (features/keras_net.h). */
#include "keras_net.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "features/backbone_weights.h"

/* What a layer's output is while the graph is translated. */
typedef struct value {
    int slot;      /* the slot holding it; -1: a ZeroPadding2D, not materialised */
    int channels;
    int pad[4];    /* ZeroPadding2D: top, left, bottom, right of value `of` */
    int of;
    int op;        /* the conv op that wrote it and can still take a fusion; -1: none */
    bool bn_ok;    /* that op can still fold a batch norm (no activation, no addition) */
    int readers;   /* layers that read it and are not translated yet */
    bool done;     /* translated */
} value;

typedef struct build {
    const json_t *layers;
    size_t n;
    value *v;                   /* per layer */
    vtr_conv_net *net;
    bool *busy;                 /* per slot */
    int cap_slots;
    vtr_backbone_weights w;
    int in_h, in_w;
    size_t head;                /* index of the head's first layer; n: none */
} build;

static const char *layer_name(const json_t *layer)
{
    const char *s = json_string_value(json_object_get(layer, "name"));
    return s ? s : "?";
}

static const char *layer_class(const json_t *layer)
{
    const char *s = json_string_value(json_object_get(layer, "class_name"));
    return s ? s : "?";
}

static const json_t *model_layers(const json_t *model_config)
{
    return json_object_get(json_object_get(model_config, "config"), "layers");
}

static bool has_layer(const json_t *layers, const char *name)
{
    size_t i;
    const json_t *l;
    json_array_foreach(layers, i, l) {
        if (!strcmp(layer_name(l), name))
            return true;
    }
    return false;
}

const char *vtr_keras_arch_detect(const json_t *model_config)
{
    const json_t *layers = model_layers(model_config);
    if (has_layer(layers, "Conv1") && has_layer(layers, "expanded_conv_project") &&
        has_layer(layers, "block_16_project"))
        return "mobilenet_v2";
    if (has_layer(layers, "mixed0") && has_layer(layers, "mixed10"))
        return "inception_v3";
    return NULL;
}

/* batch_input_shape (Keras 2) or batch_shape (Keras 3) of an InputLayer */
static const json_t *input_shape(const json_t *layer)
{
    const json_t *cfg = json_object_get(layer, "config");
    const json_t *s = json_object_get(cfg, "batch_input_shape");
    return s ? s : json_object_get(cfg, "batch_shape");
}

void vtr_keras_input_size(const json_t *model_config, int *h, int *w)
{
    *h = *w = 0;
    size_t i;
    const json_t *l;
    json_array_foreach(model_layers(model_config), i, l) {
        if (!strcmp(layer_class(l), "InputLayer")) {
            const json_t *s = input_shape(l);
            if (json_array_size(s) == 4 && json_is_integer(json_array_get(s, 1)) &&
                json_is_integer(json_array_get(s, 2))) {
                *h = (int)json_integer_value(json_array_get(s, 1));
                *w = (int)json_integer_value(json_array_get(s, 2));
            }
            return;
        }
    }
}

/* ---- reading layer configs --------------------------------------------------------- */

static vtr_status bad_layer(vtr_error *err, const json_t *layer, const char *fmt, const char *arg)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    return vtr_fail(err, VTR_ERR_FORMAT, "layer '%s' (%s): %s", layer_name(layer),
                    layer_class(layer), msg);
}

/* An integer-valued number (TF.js may write 6 as 6.0). */
static bool int_value(const json_t *j, int *out)
{
    double d;
    if (json_is_integer(j))
        d = (double)json_integer_value(j);
    else if (json_is_real(j))
        d = json_real_value(j);
    else
        return false;
    if (d != (double)(int)d || d < -1e6 || d > 1e6)
        return false;
    *out = (int)d;
    return true;
}

/* config[key]: an integer or a pair of them, as [a, b] */
static bool int_pair(const json_t *cfg, const char *key, int out[2])
{
    const json_t *j = json_object_get(cfg, key);
    if (int_value(j, &out[0])) {
        out[1] = out[0];
        return true;
    }
    return json_array_size(j) == 2 && int_value(json_array_get(j, 0), &out[0]) &&
           int_value(json_array_get(j, 1), &out[1]);
}

static const char *str_value(const json_t *cfg, const char *key, const char *dflt)
{
    const json_t *j = json_object_get(cfg, key);
    return json_is_string(j) ? json_string_value(j) : dflt;
}

static bool channels_last(const json_t *cfg)
{
    return !strcmp(str_value(cfg, "data_format", "channels_last"), "channels_last");
}

static bool channel_axis(const json_t *cfg)
{
    int axis = -1;
    const json_t *j = json_object_get(cfg, "axis");
    if (json_is_array(j) && json_array_size(j) == 1)
        j = json_array_get(j, 0);
    return !j || (int_value(j, &axis) && (axis == -1 || axis == 3));
}

/* The layer's inputs as indices into the layers (the single node's inbound tensors). */
static vtr_status layer_inputs(const build *b, const json_t *layer, int *in, int cap, int *n,
                               vtr_error *err)
{
    const json_t *nodes = json_object_get(layer, "inbound_nodes");
    const json_t *node = json_array_get(nodes, 0);
    if (json_array_size(nodes) != 1 || !json_is_array(node) || !json_array_size(node))
        return bad_layer(err, layer, "%s", "not one node of inputs (a shared layer, or a "
                         "Keras 3 file: vtr reads Keras 2's inbound_nodes)");
    if (json_array_size(node) > (size_t)cap)
        return bad_layer(err, layer, "%s", "too many inputs");
    *n = 0;
    size_t i;
    const json_t *t;
    json_array_foreach(node, i, t) {
        const char *name = json_string_value(json_array_get(t, 0));
        int node_index = -1, tensor_index = -1;
        if (!name || !int_value(json_array_get(t, 1), &node_index) ||
            !int_value(json_array_get(t, 2), &tensor_index) || node_index || tensor_index)
            return bad_layer(err, layer, "%s", "an input that is not [NAME, 0, 0, ...]");
        size_t k = 0;
        while (k < b->n && strcmp(layer_name(json_array_get(b->layers, k)), name))
            k++;
        if (k >= b->n || !b->v[k].done)
            return bad_layer(err, layer, "input '%s' is not a layer before it", name);
        in[(*n)++] = (int)k;
    }
    return VTR_OK;
}

/* ---- slots, layers and ops ---------------------------------------------------------- */

static vtr_status alloc_slot(build *b, int *slot, vtr_error *err)
{
    int s = 1;
    while (s < b->cap_slots && b->busy[s])
        s++;
    if (s >= b->cap_slots) {
        int cap = b->cap_slots ? 2 * b->cap_slots : 16;
        bool *busy = realloc(b->busy, (size_t)cap * sizeof *busy);
        if (!busy)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        memset(busy + b->cap_slots, 0, (size_t)(cap - b->cap_slots) * sizeof *busy);
        b->busy = busy;
        b->cap_slots = cap;
    }
    b->busy[s] = true;
    if (s >= b->net->slots)
        b->net->slots = s + 1;
    *slot = s;
    return VTR_OK;
}

/* One reader of value k is done; a value nobody reads any more gives its slot back. */
static void consume(build *b, int k)
{
    value *u = &b->v[k];
    if (--u->readers > 0)
        return;
    if (u->slot < 0)
        consume(b, u->of);
    else if (u->slot > 0)
        b->busy[u->slot] = false;
}

/* Layer i's value becomes v; the count of its readers stays. */
static void set_value(build *b, int i, value v)
{
    v.readers = b->v[i].readers;
    b->v[i] = v;
}

/* Value k, which layer i reads alone, becomes layer i's value (a fusion). */
static void take_over(build *b, int k, int i)
{
    set_value(b, i, b->v[k]);
    b->v[k].readers = 0;
}

/* "valid" or "same" padding of a window k with stride s: TF's "same" is (k - 1) / 2
 * before and the rest after for stride 1; for a larger stride it depends on the input
 * size, which a conv net does not fix (a 1x1 window needs none). */
static vtr_status same_padding(const json_t *layer, const json_t *cfg, const int k[2], int s,
                               int pad[4], vtr_error *err)
{
    const char *padding = str_value(cfg, "padding", "valid");
    pad[0] = pad[1] = pad[2] = pad[3] = 0;
    if (!strcmp(padding, "valid"))
        return VTR_OK;
    if (strcmp(padding, "same"))
        return bad_layer(err, layer, "padding '%s' (valid or same expected)", padding);
    if (s != 1 && (k[0] != 1 || k[1] != 1))
        return bad_layer(err, layer, "%s", "padding 'same' with a stride above 1 depends on "
                         "the input size; vtr runs it with stride 1 only");
    pad[0] = (k[0] - 1) / 2;
    pad[1] = (k[1] - 1) / 2;
    pad[2] = k[0] - 1 - pad[0];
    pad[3] = k[1] - 1 - pad[1];
    return VTR_OK;
}

/* ---- the layers ------------------------------------------------------------------- */

static vtr_status conv(build *b, size_t i, const json_t *layer, bool depthwise, vtr_error *err)
{
    const json_t *cfg = json_object_get(layer, "config");
    int in[1], n, k[2], s[2], dil[2] = {1, 1}, mult = 1, pad[4];
    vtr_status st;
    if ((st = layer_inputs(b, layer, in, 1, &n, err)) != VTR_OK)
        return st;
    bool dilated = json_object_get(cfg, "dilation_rate") &&
                   (!int_pair(cfg, "dilation_rate", dil) || dil[0] != 1 || dil[1] != 1);
    if (!int_pair(cfg, "kernel_size", k) || k[0] < 1 || k[1] < 1 ||
        !int_pair(cfg, "strides", s) || s[0] < 1 || s[0] != s[1] || dilated ||
        !channels_last(cfg))
        return bad_layer(err, layer, "%s", "vtr runs kernels of at least 1x1 with equal "
                         "strides, no dilation, channels last");
    if ((st = same_padding(layer, cfg, k, s[0], pad, err)) != VTR_OK)
        return st;
    const value *u = &b->v[in[0]];
    if (u->slot < 0) { /* a ZeroPadding2D */
        for (int j = 0; j < 4; j++)
            pad[j] += u->pad[j];
        u = &b->v[u->of];
    }
    const char *activation = str_value(cfg, "activation", "linear");
    vtr_conv_act act;
    if (!strcmp(activation, "linear"))
        act = VTR_CONV_ACT_NONE;
    else if (!strcmp(activation, "relu"))
        act = VTR_CONV_ACT_RELU;
    else
        return bad_layer(err, layer, "activation '%s' (linear or relu expected)", activation);
    int c = u->channels, oc;
    if (depthwise) {
        if (!int_value(json_object_get(cfg, "depth_multiplier"), &mult) || mult < 1)
            return bad_layer(err, layer, "%s", "no depth_multiplier of at least 1");
        oc = c * mult;
    } else if (!int_value(json_object_get(cfg, "filters"), &oc) || oc < 1) {
        return bad_layer(err, layer, "%s", "no filters count of at least 1");
    }
    bool use_bias = !json_is_false(json_object_get(cfg, "use_bias")); /* Keras: true */

    /* weights: Keras (KH, KW, C, OC) or (KH, KW, C, M) -> (OC, C / groups, KH, KW) */
    char name[160];
    const char *lname = layer_name(layer);
    snprintf(name, sizeof name, "%s/%s", lname, depthwise ? "depthwise_kernel" : "kernel");
    int64_t kshape[4] = {k[0], k[1], c, depthwise ? mult : oc}, bshape[1] = {oc};
    float *kernel = NULL, *weight = NULL, *bias = NULL;
    if ((st = vtr_backbone_weights_read(&b->w, name, 4, kshape, &kernel, err)) != VTR_OK)
        return st;
    size_t per_oc = (size_t)(depthwise ? 1 : c) * k[0] * k[1];
    weight = malloc((size_t)oc * per_oc * sizeof *weight);
    if (!weight) {
        free(kernel);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    int per_c = depthwise ? mult : oc; /* the kernel's last axis */
    for (int y = 0; y < k[0]; y++)
        for (int x = 0; x < k[1]; x++)
            for (int ci = 0; ci < c; ci++)
                for (int o = 0; o < per_c; o++) {
                    float v = kernel[(((size_t)y * k[1] + x) * c + ci) * per_c + o];
                    if (depthwise)
                        weight[(size_t)(ci * mult + o) * per_oc + (size_t)y * k[1] + x] = v;
                    else
                        weight[((size_t)o * c + ci) * k[0] * k[1] + (size_t)y * k[1] + x] = v;
                }
    free(kernel);
    if (use_bias) {
        snprintf(name, sizeof name, "%s/bias", lname);
        st = vtr_backbone_weights_read(&b->w, name, 1, bshape, &bias, err);
    } else if (!(bias = calloc((size_t)oc, sizeof *bias))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    if (st != VTR_OK) {
        free(weight);
        return st;
    }
    vtr_conv_layer L = {.in_channels = c, .out_channels = oc, .groups = depthwise ? c : 1,
                        .kernel_h = k[0], .kernel_w = k[1], .stride = s[0],
                        .pad_top = pad[0], .pad_left = pad[1], .pad_bottom = pad[2],
                        .pad_right = pad[3], .weight = weight, .bias = bias};
    int dst;
    if ((st = vtr_conv_net_add_layer(b->net, L, err)) != VTR_OK ||
        (st = alloc_slot(b, &dst, err)) != VTR_OK)
        return st;
    vtr_conv_op op = {.kind = VTR_CONV_OP_CONV, .src = u->slot, .dst = dst,
                      .layer = (int)b->net->n_layers - 1, .act = act};
    if ((st = vtr_conv_net_add_op(b->net, op, err)) != VTR_OK)
        return st;
    consume(b, in[0]);
    value *o = &b->v[i];
    o->slot = dst;
    o->channels = oc;
    o->op = (int)b->net->n_ops - 1;
    o->bn_ok = act == VTR_CONV_ACT_NONE;
    return VTR_OK;
}

/* The only input of a layer that fuses into the convolution before it (batch norm,
 * activation): its index, or an error saying why it cannot fuse. */
static vtr_status fusable_input(build *b, const json_t *layer, int *k, vtr_error *err)
{
    int n;
    vtr_status st = layer_inputs(b, layer, k, 1, &n, err);
    if (st != VTR_OK)
        return st;
    const value *u = &b->v[*k];
    if (u->op < 0)
        return bad_layer(err, layer, "%s", "vtr fuses it into the convolution before it, and "
                         "its input is not one");
    if (u->readers != 1)
        return bad_layer(err, layer, "%s", "the convolution before it has other readers, so "
                         "it cannot be fused into it");
    return VTR_OK;
}

static vtr_status batch_norm(build *b, size_t i, const json_t *layer, vtr_error *err)
{
    const json_t *cfg = json_object_get(layer, "config");
    int k;
    vtr_status st = fusable_input(b, layer, &k, err);
    if (st != VTR_OK)
        return st;
    value *u = &b->v[k];
    if (!u->bn_ok)
        return bad_layer(err, layer, "%s", "follows an activation or an addition, which vtr "
                         "cannot fold it across");
    if (!channel_axis(cfg))
        return bad_layer(err, layer, "%s", "not over the channel axis (-1)");
    double eps = json_number_value(json_object_get(cfg, "epsilon"));
    if (!(eps > 0))
        return bad_layer(err, layer, "%s", "no positive epsilon");
    vtr_conv_layer *L = &b->net->layers[b->net->ops[u->op].layer];
    int c = L->out_channels;
    static const char *const params[4] = {"gamma", "beta", "moving_mean", "moving_variance"};
    bool present[4] = {!json_is_false(json_object_get(cfg, "scale")),
                       !json_is_false(json_object_get(cfg, "center")), true, true};
    float *p[4] = {NULL, NULL, NULL, NULL};
    int64_t shape[1] = {c};
    for (int j = 0; j < 4 && st == VTR_OK; j++) {
        char name[160];
        snprintf(name, sizeof name, "%s/%s", layer_name(layer), params[j]);
        if (present[j]) {
            st = vtr_backbone_weights_read(&b->w, name, 1, shape, &p[j], err);
        } else if (!(p[j] = malloc((size_t)c * sizeof *p[j]))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        } else {
            for (int o = 0; o < c; o++)
                p[j][o] = j == 0 ? 1.0f : 0.0f;
        }
    }
    if (st == VTR_OK) {
        size_t per_oc = (size_t)(L->in_channels / L->groups) * L->kernel_h * L->kernel_w;
        st = vtr_conv_fold_bn(L->weight, L->bias, c, per_oc, p[0], p[1], p[2], p[3],
                              (float)eps, err);
        if (st != VTR_OK)
            vtr_error_context(err, "weights %s: layer '%s'", b->w.what, layer_name(layer));
    }
    for (int j = 0; j < 4; j++)
        free(p[j]);
    if (st == VTR_OK)
        take_over(b, k, i);
    return st;
}

static vtr_status activation(build *b, size_t i, const json_t *layer, bool relu_layer,
                             vtr_error *err)
{
    const json_t *cfg = json_object_get(layer, "config");
    vtr_conv_act act = VTR_CONV_ACT_RELU;
    if (relu_layer) {
        const json_t *max = json_object_get(cfg, "max_value");
        int mv, zero;
        if (max && !json_is_null(max))
            act = int_value(max, &mv) && mv == 6 ? VTR_CONV_ACT_RELU6 : VTR_CONV_ACT_NONE;
        static const char *const zeros[2] = {"negative_slope", "threshold"};
        for (int j = 0; j < 2; j++) {
            const json_t *z = json_object_get(cfg, zeros[j]);
            if (z && (!int_value(z, &zero) || zero))
                act = VTR_CONV_ACT_NONE;
        }
        if (act == VTR_CONV_ACT_NONE)
            return bad_layer(err, layer, "%s", "vtr runs ReLU with no negative slope and no "
                             "threshold, capped at 6 or not at all");
    } else {
        const char *name = str_value(cfg, "activation", "");
        if (strcmp(name, "relu"))
            return bad_layer(err, layer, "activation '%s' (relu expected)", name);
    }
    int k;
    vtr_status st = fusable_input(b, layer, &k, err);
    if (st != VTR_OK)
        return st;
    vtr_conv_op *op = &b->net->ops[b->v[k].op];
    if (op->act != VTR_CONV_ACT_NONE)
        return bad_layer(err, layer, "%s", "follows another activation");
    op->act = act;
    take_over(b, k, i);
    b->v[i].bn_ok = false;
    return VTR_OK;
}

/* Whether an op after `after` reads slot s. */
static bool read_later(const vtr_conv_net *net, int after, int s)
{
    for (size_t j = (size_t)after + 1; j < net->n_ops; j++) {
        const vtr_conv_op *op = &net->ops[j];
        if (op->kind == VTR_CONV_OP_CONCAT) {
            for (int q = 0; q < op->n_srcs; q++)
                if (op->srcs[q] == s)
                    return true;
        } else if (op->src == s) {
            return true;
        }
    }
    return false;
}

static vtr_status add(build *b, size_t i, const json_t *layer, vtr_error *err)
{
    int in[2], n;
    vtr_status st = layer_inputs(b, layer, in, 2, &n, err);
    if (st != VTR_OK)
        return st;
    if (n != 2)
        return bad_layer(err, layer, "%s", "vtr adds two inputs");
    /* the branch: the later convolution that nothing else reads and that has no
     * activation yet; it accumulates onto the shortcut */
    int br = -1;
    for (int j = 0; j < 2; j++) {
        const value *u = &b->v[in[j]];
        if (u->op >= 0 && u->readers == 1 && b->net->ops[u->op].act == VTR_CONV_ACT_NONE &&
            !b->net->ops[u->op].accumulate && (br < 0 || u->op > b->v[in[br]].op))
            br = j;
    }
    if (br < 0)
        return bad_layer(err, layer, "%s", "neither input is a convolution read by this "
                         "addition alone");
    value *branch = &b->v[in[br]], *shortcut = &b->v[in[1 - br]];
    vtr_conv_op *op = &b->net->ops[branch->op];
    if (shortcut->slot <= 0 || shortcut->readers != 1 || op->src == shortcut->slot ||
        read_later(b->net, branch->op, shortcut->slot))
        return bad_layer(err, layer, "%s", "its other input is the image or read after the "
                         "addition, which vtr cannot add in place");
    if (branch->channels != shortcut->channels)
        return bad_layer(err, layer, "%s", "inputs of different channel counts");
    b->busy[op->dst] = false;
    op->dst = shortcut->slot;
    op->accumulate = true;
    set_value(b, i,
              (value){.slot = shortcut->slot, .channels = shortcut->channels, .op = branch->op});
    branch->readers = shortcut->readers = 0;
    return VTR_OK;
}

static vtr_status pool(build *b, size_t i, const json_t *layer, vtr_conv_op_kind kind,
                       vtr_error *err)
{
    const json_t *cfg = json_object_get(layer, "config");
    int in[1], n, k[2], s[2], pad[4];
    vtr_status st = layer_inputs(b, layer, in, 1, &n, err);
    if (st != VTR_OK)
        return st;
    if (!int_pair(cfg, "pool_size", k) || k[0] < 1 || k[0] != k[1] || !channels_last(cfg))
        return bad_layer(err, layer, "%s", "vtr pools square windows, channels last");
    if (json_is_null(json_object_get(cfg, "strides")) || !json_object_get(cfg, "strides"))
        s[0] = s[1] = k[0]; /* Keras: strides default to the window */
    else if (!int_pair(cfg, "strides", s) || s[0] < 1 || s[0] != s[1])
        return bad_layer(err, layer, "%s", "vtr pools with equal strides");
    if ((st = same_padding(layer, cfg, k, s[0], pad, err)) != VTR_OK)
        return st;
    const value *u = &b->v[in[0]];
    if (u->slot < 0)
        return bad_layer(err, layer, "%s", "reads a ZeroPadding2D, which vtr folds into "
                         "convolutions only");
    int dst;
    if ((st = alloc_slot(b, &dst, err)) != VTR_OK)
        return st;
    vtr_conv_op op = {.kind = kind, .src = u->slot, .dst = dst, .kernel = k[0], .stride = s[0],
                      .pad_begin = pad[0], .pad_end = pad[2]};
    if ((st = vtr_conv_net_add_op(b->net, op, err)) != VTR_OK)
        return st;
    set_value(b, i, (value){.slot = dst, .channels = u->channels, .op = -1});
    consume(b, in[0]);
    return VTR_OK;
}

static vtr_status concat(build *b, size_t i, const json_t *layer, vtr_error *err)
{
    int in[VTR_CONV_MAX_CONCAT], n, dst, channels = 0;
    vtr_status st = layer_inputs(b, layer, in, VTR_CONV_MAX_CONCAT, &n, err);
    if (st != VTR_OK)
        return st;
    if (n < 2 || !channel_axis(json_object_get(layer, "config")))
        return bad_layer(err, layer, "%s", "vtr concatenates 2 or more inputs on the channel "
                         "axis");
    vtr_conv_op op = {.kind = VTR_CONV_OP_CONCAT, .n_srcs = n};
    for (int j = 0; j < n; j++) {
        if (b->v[in[j]].slot < 0)
            return bad_layer(err, layer, "%s", "reads a ZeroPadding2D, which vtr folds into "
                             "convolutions only");
        op.srcs[j] = b->v[in[j]].slot;
        channels += b->v[in[j]].channels;
    }
    if ((st = alloc_slot(b, &dst, err)) != VTR_OK)
        return st;
    op.dst = dst;
    if ((st = vtr_conv_net_add_op(b->net, op, err)) != VTR_OK)
        return st;
    set_value(b, i, (value){.slot = dst, .channels = channels, .op = -1});
    for (int j = 0; j < n; j++)
        consume(b, in[j]);
    return VTR_OK;
}

static vtr_status zero_padding(build *b, size_t i, const json_t *layer, vtr_error *err)
{
    const json_t *cfg = json_object_get(layer, "config"), *p = json_object_get(cfg, "padding");
    int in[1], n, pad[4];
    vtr_status st = layer_inputs(b, layer, in, 1, &n, err);
    if (st != VTR_OK)
        return st;
    /* an integer, (rows, columns), or ((top, bottom), (left, right)) */
    int rows[2], cols[2];
    bool ok = int_pair(cfg, "padding", rows);
    if (ok) {
        cols[0] = cols[1] = rows[1];
        rows[1] = rows[0];
    } else {
        const json_t *r = json_array_get(p, 0), *c = json_array_get(p, 1);
        ok = json_array_size(r) == 2 && json_array_size(c) == 2 &&
             int_value(json_array_get(r, 0), &rows[0]) &&
             int_value(json_array_get(r, 1), &rows[1]) &&
             int_value(json_array_get(c, 0), &cols[0]) && int_value(json_array_get(c, 1), &cols[1]);
    }
    if (!ok || rows[0] < 0 || rows[1] < 0 || cols[0] < 0 || cols[1] < 0 || !channels_last(cfg))
        return bad_layer(err, layer, "%s", "padding is not an integer, a pair or a pair of "
                         "pairs of them");
    pad[0] = rows[0];
    pad[1] = cols[0];
    pad[2] = rows[1];
    pad[3] = cols[1];
    const value *u = &b->v[in[0]];
    if (u->slot < 0)
        return bad_layer(err, layer, "%s", "pads a padding");
    set_value(b, i, (value){.slot = -1, .channels = u->channels, .of = in[0], .op = -1});
    memcpy(b->v[i].pad, pad, sizeof pad);
    return VTR_OK;
}

/* The head starts at layer i, reading value k: the net ends at k's map, without a final
 * average pool that is the global one at the declared input size. */
static vtr_status head(build *b, size_t i, const json_t *layer, vtr_error *err)
{
    int in[1], n;
    vtr_status st = layer_inputs(b, layer, in, 1, &n, err);
    if (st != VTR_OK)
        return st;
    const value *u = &b->v[in[0]];
    if (u->slot <= 0)
        return bad_layer(err, layer, "%s", "reads the image or a padding: no feature map");
    vtr_conv_net *net = b->net;
    int out = u->slot;
    vtr_conv_op *last = &net->ops[net->n_ops - 1];
    if (last->kind == VTR_CONV_OP_AVGPOOL && last->dst == out && !last->pad_begin &&
        !last->pad_end) {
        int oh, ow;
        net->out_slot = last->src;
        net->out_channels = u->channels;
        vtr_conv_net_output_size(net, b->in_h, b->in_w, &oh, &ow);
        if (oh == last->kernel && ow == last->kernel) { /* the global average pool */
            out = last->src;
            net->n_ops--;
        }
    }
    for (size_t j = 0; j < i; j++) {
        if (b->v[j].readers > 0 && (int)j != in[0])
            return bad_layer(err, layer, "layer '%s' is still to be read when the head starts",
                             layer_name(json_array_get(b->layers, j)));
    }
    net->out_slot = out;
    net->out_channels = u->channels;
    b->head = i;
    return VTR_OK;
}

static bool head_weight(void *ctx, const char *name)
{
    const build *b = ctx;
    for (size_t j = b->head; j < b->n; j++) {
        const char *l = layer_name(json_array_get(b->layers, j));
        size_t len = strlen(l);
        if (!strncmp(name, l, len) && name[len] == '/')
            return true;
    }
    return false;
}

static vtr_status translate(build *b, const json_t *model_config, vtr_error *err)
{
    vtr_status st = VTR_OK;
    const char *cls = json_string_value(json_object_get(model_config, "class_name"));
    if (!cls || (strcmp(cls, "Model") && strcmp(cls, "Functional")) || !json_is_array(b->layers))
        return vtr_fail(err, VTR_ERR_FORMAT, "weights %s: not a Keras functional model (class "
                        "'%s'; vtr reads Model and Functional graphs)", b->w.what, cls ? cls : "?");
    /* readers of each layer's output */
    size_t i;
    const json_t *layer;
    json_array_foreach(b->layers, i, layer) {
        const json_t *node = json_array_get(json_object_get(layer, "inbound_nodes"), 0), *t;
        size_t q;
        json_array_foreach(node, q, t) {
            const char *name = json_string_value(json_array_get(t, 0));
            for (size_t k = 0; name && k < i; k++)
                if (!strcmp(layer_name(json_array_get(b->layers, k)), name))
                    b->v[k].readers++;
        }
    }
    b->net->in_channels = 0;
    b->head = b->n;
    json_array_foreach(b->layers, i, layer) {
        const char *c = layer_class(layer);
        b->v[i].op = -1;
        if (!strcmp(c, "InputLayer")) {
            const json_t *shape = input_shape(layer);
            int channels = 0;
            if (b->net->in_channels || json_array_size(shape) != 4 ||
                !int_value(json_array_get(shape, 3), &channels) || channels < 1)
                return bad_layer(err, layer, "%s", "not the one input of shape (N, H, W, C)");
            b->net->in_channels = channels;
            b->v[i].slot = 0;
            b->v[i].channels = channels;
        } else if (!strcmp(c, "Conv2D") || !strcmp(c, "DepthwiseConv2D")) {
            st = conv(b, i, layer, c[0] == 'D', err);
        } else if (!strcmp(c, "BatchNormalization")) {
            st = batch_norm(b, i, layer, err);
        } else if (!strcmp(c, "ReLU") || !strcmp(c, "Activation")) {
            st = activation(b, i, layer, c[0] == 'R', err);
        } else if (!strcmp(c, "Add")) {
            st = add(b, i, layer, err);
        } else if (!strcmp(c, "MaxPooling2D") || !strcmp(c, "AveragePooling2D")) {
            st = pool(b, i, layer, c[0] == 'M' ? VTR_CONV_OP_MAXPOOL : VTR_CONV_OP_AVGPOOL, err);
        } else if (!strcmp(c, "Concatenate")) {
            st = concat(b, i, layer, err);
        } else if (!strcmp(c, "ZeroPadding2D")) {
            st = zero_padding(b, i, layer, err);
        } else if (!strcmp(c, "Flatten") || !strcmp(c, "GlobalAveragePooling2D") ||
                   !strcmp(c, "Dense")) {
            if ((st = head(b, i, layer, err)) == VTR_OK)
                break;
        } else {
            st = bad_layer(err, layer, "%s", "a layer vtr does not run before the head");
        }
        if (st != VTR_OK)
            return st;
        b->v[i].done = true;
    }
    if (st != VTR_OK)
        return st;
    if (b->head == b->n) { /* no head: the model's output */
        const json_t *outs = json_object_get(json_object_get(model_config, "config"),
                                             "output_layers");
        const char *name = json_string_value(json_array_get(json_array_get(outs, 0), 0));
        size_t k = 0;
        while (name && k < b->n && strcmp(layer_name(json_array_get(b->layers, k)), name))
            k++;
        if (!name || json_array_size(outs) != 1 || k == b->n || b->v[k].slot <= 0)
            return vtr_fail(err, VTR_ERR_FORMAT, "weights %s: the graph has no head and not "
                            "one output map", b->w.what);
        b->net->out_slot = b->v[k].slot;
        b->net->out_channels = b->v[k].channels;
    }
    if ((st = vtr_backbone_weights_check_all_used(&b->w, head_weight, b, err)) != VTR_OK)
        return st;
    return vtr_conv_net_check(b->net, b->in_h, b->in_w, err);
}

vtr_status vtr_keras_net_build(const json_t *model_config, const vtr_safetensors *st,
                               const char *what, const char *arch, vtr_conv_net *net,
                               vtr_error *err)
{
    memset(net, 0, sizeof *net);
    build b = {.layers = model_layers(model_config), .net = net};
    b.n = json_array_size(b.layers);
    vtr_keras_input_size(model_config, &b.in_h, &b.in_w);
    if (b.in_h < 1 || b.in_w < 1)
        b.in_h = b.in_w = 224;
    vtr_status s = vtr_backbone_weights_open(&b.w, st, what, arch, err);
    if (s == VTR_OK && !(b.v = calloc(b.n ? b.n : 1, sizeof *b.v)))
        s = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    if (s == VTR_OK)
        s = translate(&b, model_config, err);
    vtr_backbone_weights_close(&b.w);
    free(b.v);
    free(b.busy);
    if (s != VTR_OK)
        vtr_conv_net_free(net);
    return s;
}
