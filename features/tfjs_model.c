/* TensorFlow.js layers models read and converted to safetensors (features/tfjs_model.h). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "tfjs_model.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "features/keras_net.h"
#include "lib/file.h"
#include "lib/tensor.h"

/* The largest model read: 2^31 weights (8 GiB of float32). */
#define MAX_FLOATS ((int64_t)1 << 31)

void vtr_tfjs_model_free(vtr_tfjs_model *m)
{
    json_decref(m->model_config);
    vtr_safetensors_close(&m->weights);
    free(m->data);
    memset(m, 0, sizeof *m);
}

/* How a weight is stored: bytes per value, and the dequantisation. */
typedef struct stored {
    enum { STORED_F32, STORED_F16, STORED_U8, STORED_U16 } kind;
    size_t size;
    double min, scale;
} stored;

static vtr_status weight_storage(const json_t *w, const char *name, stored *s, vtr_error *err)
{
    const char *dtype = json_string_value(json_object_get(w, "dtype"));
    if (!dtype || strcmp(dtype, "float32"))
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "weight '%s' is %s, not float32", name,
                        dtype ? dtype : "of no dtype");
    const json_t *q = json_object_get(w, "quantization");
    *s = (stored){STORED_F32, 4, 0, 1};
    if (!q)
        return VTR_OK;
    const char *qd = json_string_value(json_object_get(q, "dtype"));
    if (qd && !strcmp(qd, "float16")) {
        *s = (stored){STORED_F16, 2, 0, 1};
        return VTR_OK;
    }
    if (!qd || (strcmp(qd, "uint8") && strcmp(qd, "uint16")))
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "weight '%s': quantization %s (vtr reads "
                        "uint8, uint16 and float16)", name, qd ? qd : "of no dtype");
    const json_t *min = json_object_get(q, "min"), *scale = json_object_get(q, "scale");
    if (!json_is_number(min) || !json_is_number(scale))
        return vtr_fail(err, VTR_ERR_FORMAT, "weight '%s': %s quantization without min and "
                        "scale", name, qd);
    *s = (stored){qd[4] == '8' ? STORED_U8 : STORED_U16, qd[4] == '8' ? 1 : 2,
                  json_number_value(min), json_number_value(scale)};
    return VTR_OK;
}

static void dequantize(const stored *s, const unsigned char *src, size_t n, float *dst)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        switch (s->kind) {
        case STORED_F32: memcpy(&dst[i], src + 4 * i, 4); break;
        case STORED_F16: memcpy(&h, src + 2 * i, 2); dst[i] = vtr_half_to_float(h); break;
        case STORED_U8: dst[i] = (float)(src[i] * s->scale + s->min); break;
        case STORED_U16:
            memcpy(&h, src + 2 * i, 2);
            dst[i] = (float)(h * s->scale + s->min);
            break;
        }
    }
}

/* The files of a group, concatenated (paths beside the model.json, plain names only). */
static vtr_status read_group(const char *dir, const json_t *paths, int g, unsigned char **buf,
                             size_t *len, vtr_error *err)
{
    *buf = NULL;
    *len = 0;
    if (!json_is_array(paths) || !json_array_size(paths))
        return vtr_fail(err, VTR_ERR_FORMAT, "weight group %d: no paths", g);
    size_t i;
    const json_t *p;
    json_array_foreach(paths, i, p) {
        const char *name = json_string_value(p);
        char shown[64];
        if (!name || !*name || strchr(name, '/') || !strcmp(name, "..") || !strcmp(name, "."))
            return vtr_fail(err, VTR_ERR_FORMAT, "weight group %d: path '%s' is not a file name "
                            "beside model.json", g,
                            name ? vtr_printable(name, strlen(name), shown, sizeof shown) : "?");
        char *path = vtr_path_join(dir, name);
        if (!path)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        vtr_mapped_file f;
        vtr_status st = vtr_map_file(path, &f, err);
        free(path);
        if (st != VTR_OK)
            return st;
        unsigned char *grown = realloc(*buf, *len + f.size + 1);
        if (!grown) {
            vtr_unmap_file(&f);
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for weight group %d", g);
        }
        *buf = grown;
        if (f.size)
            memcpy(*buf + *len, f.data, f.size);
        *len += f.size;
        vtr_unmap_file(&f);
    }
    return VTR_OK;
}

/* Checks a weight's name and shape; adds its element count to *floats. */
static vtr_status weight_shape(const json_t *w, vtr_tensor *t, int64_t *floats, vtr_error *err)
{
    const char *name = json_string_value(json_object_get(w, "name"));
    const json_t *shape = json_object_get(w, "shape");
    if (!name || !*name)
        return vtr_fail(err, VTR_ERR_FORMAT, "a weight without a name");
    if (!json_is_array(shape) || json_array_size(shape) > VTR_MAX_DIMS)
        return vtr_fail(err, VTR_ERR_FORMAT, "weight '%s': shape is not a list of at most %d "
                        "dimensions", name, VTR_MAX_DIMS);
    *t = (vtr_tensor){.dtype = VTR_F32, .ndim = (int)json_array_size(shape)};
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) {
        const json_t *j = json_array_get(shape, (size_t)d);
        if (!json_is_integer(j) || json_integer_value(j) < 0 || json_integer_value(j) > MAX_FLOATS)
            return vtr_fail(err, VTR_ERR_FORMAT, "weight '%s': dimension %d is not a count",
                            name, d);
        t->shape[d] = json_integer_value(j);
        n *= t->shape[d];
        if (n > MAX_FLOATS)
            break;
    }
    if (n > MAX_FLOATS || *floats + n > MAX_FLOATS)
        return vtr_fail(err, VTR_ERR_FORMAT, "weight '%s': more than 2^31 values in the model",
                        name);
    *floats += n;
    return VTR_OK;
}

static vtr_status read_weights(vtr_tfjs_model *m, const char *dir, const json_t *manifest,
                               vtr_error *err)
{
    vtr_status st;
    if (!json_is_array(manifest))
        return vtr_fail(err, VTR_ERR_FORMAT, "no weightsManifest list");
    /* the tensors' shapes and the space for their values */
    size_t count = 0, g, i;
    int64_t floats = 0;
    const json_t *group, *w;
    json_array_foreach(manifest, g, group) {
        const json_t *weights = json_object_get(group, "weights");
        if (!json_is_array(weights))
            return vtr_fail(err, VTR_ERR_FORMAT, "weight group %zu: no weights list", g);
        count += json_array_size(weights);
    }
    vtr_safetensors *st_out = &m->weights;
    if (!(st_out->entries = calloc(count ? count : 1, sizeof *st_out->entries)))
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    json_array_foreach(manifest, g, group) {
        json_array_foreach(json_object_get(group, "weights"), i, w) {
            vtr_safetensors_entry *e = &st_out->entries[st_out->count];
            if ((st = weight_shape(w, &e->tensor, &floats, err)) != VTR_OK)
                return st;
            if (!(e->name = strdup(json_string_value(json_object_get(w, "name")))))
                return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
            st_out->count++;
        }
    }
    if (!(m->data = malloc((size_t)(floats ? floats : 1) * sizeof *m->data)))
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %lld weights", (long long)floats);
    /* each group's bytes, weight after weight */
    size_t at = 0, e = 0;
    json_array_foreach(manifest, g, group) {
        unsigned char *buf;
        size_t len, used = 0;
        if ((st = read_group(dir, json_object_get(group, "paths"), (int)g, &buf, &len, err)))
            return st;
        json_array_foreach(json_object_get(group, "weights"), i, w) {
            vtr_tensor *t = &st_out->entries[e++].tensor;
            size_t n = (size_t)vtr_tensor_numel(t);
            stored s = {STORED_F32, 4, 0, 1};
            if ((st = weight_storage(w, json_string_value(json_object_get(w, "name")), &s,
                                     err)) != VTR_OK) {
                free(buf);
                return st;
            }
            if (used + n * s.size <= len)
                dequantize(&s, buf + used, n, m->data + at);
            used += n * s.size;
            t->data = m->data + at;
            at += n;
        }
        free(buf);
        if (used != len)
            return vtr_fail(err, VTR_ERR_FORMAT, "weight group %zu: its files hold %zu bytes, "
                            "its weights need %zu", g, len, used);
    }
    return vtr_safetensors_index(st_out, err);
}

vtr_status vtr_tfjs_model_read(const char *path, vtr_tfjs_model *m, vtr_error *err)
{
    memset(m, 0, sizeof *m);
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (jerr.line < 1)
            return vtr_fail(err, VTR_ERR_IO, "%s: %s", path, jerr.text);
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: line %d: %s", path, jerr.line, jerr.text);
    }
    vtr_status st = VTR_OK;
    const json_t *topology = json_object_get(root, "modelTopology");
    const json_t *config = json_object_get(topology, "model_config");
    if (!config && json_object_get(topology, "class_name"))
        config = topology; /* tf.keras writes the model's config itself */
    if (!json_is_object(config)) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s: no modelTopology with a model_config (not a "
                      "TF.js layers model; a graph model cannot be read)", path);
    } else {
        m->model_config = json_incref((json_t *)config);
        char *dir = strdup(path);
        if (!dir) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        } else {
            char *slash = strrchr(dir, '/');
            if (slash)
                slash[1] = '\0';
            else
                strcpy(dir, ".");
            st = read_weights(m, dir, json_object_get(root, "weightsManifest"), err);
            free(dir);
        }
        if (st != VTR_OK)
            vtr_error_context(err, "%s", path);
    }
    json_decref(root);
    if (st != VTR_OK)
        vtr_tfjs_model_free(m);
    return st;
}

static vtr_status set_string(json_t *meta, const char *key, const char *value, vtr_error *err)
{
    if (json_object_set_new(meta, key, json_string(value)))
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    return VTR_OK;
}

static void rgb_string(const float v[3], char *buf, size_t size)
{
    snprintf(buf, size, "%.9g,%.9g,%.9g", v[0], v[1], v[2]);
}

vtr_status vtr_tfjs_model_save(const vtr_tfjs_model *m, const char *source,
                               const float mean[3], const float std[3], const char *path,
                               vtr_error *err)
{
    const char *arch = vtr_keras_arch_detect(m->model_config);
    vtr_conv_net net;
    vtr_status st = vtr_keras_net_build(m->model_config, &m->weights, source,
                                        arch ? arch : "keras", &net, err);
    if (st != VTR_OK)
        return st;
    vtr_conv_net_free(&net);

    size_t n = m->weights.count;
    const char **names = malloc((n ? n : 1) * sizeof *names);
    vtr_tensor *tensors = malloc((n ? n : 1) * sizeof *tensors);
    json_t *meta = json_object();
    char *graph = json_dumps(m->model_config, JSON_COMPACT | JSON_SORT_KEYS);
    char buf[128];
    int h, w;
    if (!names || !tensors || !meta || !graph) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    for (size_t i = 0; i < n; i++) {
        names[i] = m->weights.entries[i].name;
        tensors[i] = m->weights.entries[i].tensor;
    }
    vtr_keras_input_size(m->model_config, &h, &w);
    snprintf(buf, sizeof buf, "%d", h);
    if ((st = set_string(meta, "format", "keras", err)) ||
        (st = set_string(meta, "keras_model", graph, err)) ||
        (arch && (st = set_string(meta, "arch", arch, err))) ||
        (st = set_string(meta, "source", source, err)) ||
        (st = set_string(meta, "pretrained", "true", err)) ||
        (h > 0 && h == w && (st = set_string(meta, "input_size", buf, err))))
        goto end;
    rgb_string(mean, buf, sizeof buf);
    if ((st = set_string(meta, "mean", buf, err)))
        goto end;
    rgb_string(std, buf, sizeof buf);
    if ((st = set_string(meta, "std", buf, err)))
        goto end;
    st = vtr_safetensors_save(path, n, names, tensors, meta, err);
end:
    free(names);
    free(tensors);
    json_decref(meta);
    free(graph);
    return st;
}
