/* safetensors reader and writer; the format and the checks are in safetensors.h. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "safetensors.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ST_SIZE_FIELD 8
#define ST_MAX_MESSAGE_NAME 80 /* bytes of a tensor name shown in a message */

static const struct {
    vtr_dtype dtype;
    const char *name;
} st_types[] = {
    {VTR_F32, "F32"}, {VTR_F16, "F16"}, {VTR_BF16, "BF16"},
    {VTR_U8, "U8"},   {VTR_I32, "I32"}, {VTR_I64, "I64"},
};
#define ST_TYPE_COUNT (sizeof st_types / sizeof st_types[0])

static const char *st_dtype_name(vtr_dtype dtype)
{
    for (size_t i = 0; i < ST_TYPE_COUNT; i++)
        if (st_types[i].dtype == dtype)
            return st_types[i].name;
    return NULL;
}

/* ---- reader ---- */

/* A tensor's byte range in the buffer, for the overlap check. */
typedef struct st_span {
    uint64_t begin, end;
    const char *name;
} st_span;

static int compare_spans(const void *a, const void *b)
{
    const st_span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int compare_entries(const void *a, const void *b)
{
    return strcmp(((const vtr_safetensors_entry *)a)->name,
                  ((const vtr_safetensors_entry *)b)->name);
}

static vtr_status check_metadata(const json_t *meta, vtr_status status, vtr_error *err)
{
    if (!json_is_object(meta))
        return vtr_fail(err, status, "__metadata__ is not an object");
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)meta, key, value)
    {
        if (!json_is_string(value)) {
            char shown[ST_MAX_MESSAGE_NAME];
            return vtr_fail(err, status, "__metadata__ value of '%s' is not a string",
                            vtr_printable(key, strlen(key), shown, sizeof shown));
        }
    }
    return VTR_OK;
}

/* Reads a list of non-negative integers of at most max items into v. */
static bool int_list(const json_t *list, size_t min, size_t max, int64_t *v, size_t *n,
                     bool allow_negative)
{
    if (!json_is_array(list) || json_array_size(list) < min || json_array_size(list) > max)
        return false;
    *n = json_array_size(list);
    for (size_t i = 0; i < *n; i++) {
        const json_t *item = json_array_get(list, i);
        if (!json_is_integer(item) || (!allow_negative && json_integer_value(item) < 0))
            return false;
        v[i] = json_integer_value(item);
    }
    return true;
}

/* Fills entry and span from one tensor's JSON description. `name` is shown in messages. */
static vtr_status parse_entry(const char *name, const json_t *desc, const unsigned char *data,
                              size_t data_len, vtr_safetensors_entry *entry, st_span *span,
                              vtr_error *err)
{
    if (!json_is_object(desc))
        return vtr_fail(err, VTR_ERR_FORMAT, "tensor '%s': not an object", name);
    const json_t *dtype = json_object_get(desc, "dtype");
    const json_t *shape = json_object_get(desc, "shape");
    const json_t *offsets = json_object_get(desc, "data_offsets");
    if (!json_is_string(dtype))
        return vtr_fail(err, VTR_ERR_FORMAT, "tensor '%s': dtype missing or not a string", name);
    if (!json_is_array(shape))
        return vtr_fail(err, VTR_ERR_FORMAT, "tensor '%s': shape missing or not a list", name);
    if (json_array_size(shape) > VTR_MAX_DIMS)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "tensor '%s': %zu dimensions (vtr handles at most %d)", name,
                        json_array_size(shape), VTR_MAX_DIMS);
    vtr_tensor *t = &entry->tensor;
    size_t n;
    if (!int_list(shape, 0, VTR_MAX_DIMS, t->shape, &n, true))
        return vtr_fail(err, VTR_ERR_FORMAT, "tensor '%s': shape is not a list of integers", name);
    t->ndim = (int)n;
    int64_t range[2];
    if (!int_list(offsets, 2, 2, range, &n, false))
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "tensor '%s': data_offsets missing or not two non-negative integers", name);
    if (range[0] > range[1])
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "tensor '%s': data_offsets [%lld, %lld] end before they begin", name,
                        (long long)range[0], (long long)range[1]);
    if ((uint64_t)range[1] > data_len)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "tensor '%s': data_offsets [%lld, %lld] run past the end of the "
                        "%zu-byte buffer",
                        name, (long long)range[0], (long long)range[1], data_len);

    const char *dtype_name = json_string_value(dtype);
    size_t i = 0;
    while (i < ST_TYPE_COUNT && strcmp(st_types[i].name, dtype_name) != 0)
        i++;
    if (i == ST_TYPE_COUNT) {
        char shown[ST_MAX_MESSAGE_NAME];
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "tensor '%s': dtype %s is not supported (vtr reads F32, F16, BF16, "
                        "U8, I32, I64)",
                        name, vtr_printable(dtype_name, strlen(dtype_name), shown, sizeof shown));
    }
    t->dtype = st_types[i].dtype;
    size_t nbytes;
    if (vtr_shape_nbytes(t->dtype, t->ndim, t->shape, SIZE_MAX, &nbytes, err) != VTR_OK) {
        vtr_error_context(err, "tensor '%s'", name);
        return VTR_ERR_FORMAT;
    }
    if ((uint64_t)(range[1] - range[0]) != nbytes) {
        char shape_text[200];
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "tensor '%s': data_offsets [%lld, %lld] hold %lld bytes, but %s %s "
                        "needs %zu",
                        name, (long long)range[0], (long long)range[1],
                        (long long)(range[1] - range[0]), st_types[i].name,
                        vtr_shape_str(t->ndim, t->shape, shape_text, sizeof shape_text), nbytes);
    }
    t->data = (void *)(uintptr_t)(data + range[0]);
    span->begin = (uint64_t)range[0];
    span->end = (uint64_t)range[1];
    return VTR_OK;
}

vtr_status vtr_safetensors_parse(const void *buf, size_t len, vtr_safetensors *out, vtr_error *err)
{
    const unsigned char *b = buf;
    json_t *root = NULL;
    st_span *spans = NULL;
    vtr_status st = VTR_OK;
    memset(out, 0, sizeof *out);

    if (len == 0)
        return vtr_fail(err, VTR_ERR_FORMAT, "empty file, not a safetensors file");
    if (len < ST_SIZE_FIELD)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "truncated safetensors file: %zu bytes, the header size needs 8", len);
    uint64_t header_len = 0;
    for (int i = ST_SIZE_FIELD - 1; i >= 0; i--)
        header_len = (header_len << 8) | b[i];
    if (header_len > VTR_SAFETENSORS_MAX_HEADER)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "safetensors header size %llu exceeds the limit of %u bytes",
                        (unsigned long long)header_len, VTR_SAFETENSORS_MAX_HEADER);
    if (header_len > len - ST_SIZE_FIELD)
        return vtr_fail(err, VTR_ERR_FORMAT,
                        "truncated safetensors header: it claims %llu bytes, %zu are present",
                        (unsigned long long)header_len, len - ST_SIZE_FIELD);
    const unsigned char *data = b + ST_SIZE_FIELD + header_len;
    size_t data_len = len - ST_SIZE_FIELD - (size_t)header_len;

    /* jansson checks the syntax, UTF-8, nesting depth and duplicate keys */
    json_error_t jerr;
    root = json_loadb((const char *)b + ST_SIZE_FIELD, (size_t)header_len, JSON_REJECT_DUPLICATES,
                      &jerr);
    if (!root) {
        char shown[ST_MAX_MESSAGE_NAME * 2];
        st = vtr_fail(err, VTR_ERR_FORMAT, "safetensors header: %s (at byte %d of the JSON)",
                      vtr_printable(jerr.text, strlen(jerr.text), shown, sizeof shown),
                      jerr.position);
        goto end;
    }
    if (!json_is_object(root)) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "safetensors header is not a JSON object");
        goto end;
    }
    json_t *meta = json_object_get(root, "__metadata__");
    if (meta && (st = check_metadata(meta, VTR_ERR_FORMAT, err)) != VTR_OK)
        goto end;

    size_t count = json_object_size(root) - (meta != NULL);
    out->entries = calloc(count ? count : 1, sizeof *out->entries);
    spans = calloc(count ? count : 1, sizeof *spans);
    if (!out->entries || !spans) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %zu tensors", count);
        goto end;
    }
    const char *key;
    json_t *desc;
    json_object_foreach(root, key, desc)
    {
        if (strcmp(key, "__metadata__") == 0)
            continue;
        char name[ST_MAX_MESSAGE_NAME];
        vtr_printable(key, strlen(key), name, sizeof name);
        if (key[0] == '\0') {
            st = vtr_fail(err, VTR_ERR_FORMAT, "safetensors header: a tensor has an empty name");
            goto end;
        }
        vtr_safetensors_entry *entry = &out->entries[out->count];
        if ((st = parse_entry(name, desc, data, data_len, entry, &spans[out->count], err)) !=
            VTR_OK)
            goto end;
        if (!(entry->name = strdup(key))) {
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory for tensor '%s'", name);
            goto end;
        }
        spans[out->count].name = entry->name;
        out->count++;
    }

    /* Sorted by start, non-empty ranges must each begin at or after the previous end;
     * empty tensors hold no bytes and may sit anywhere. */
    qsort(spans, out->count, sizeof *spans, compare_spans);
    const st_span *prev = NULL;
    for (size_t i = 0; i < out->count; i++) {
        if (spans[i].begin == spans[i].end)
            continue;
        if (prev && spans[i].begin < prev->end) {
            char a[ST_MAX_MESSAGE_NAME], c[ST_MAX_MESSAGE_NAME];
            st = vtr_fail(err, VTR_ERR_FORMAT,
                          "tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap",
                          vtr_printable(prev->name, strlen(prev->name), a, sizeof a),
                          (unsigned long long)prev->begin, (unsigned long long)prev->end,
                          vtr_printable(spans[i].name, strlen(spans[i].name), c, sizeof c),
                          (unsigned long long)spans[i].begin, (unsigned long long)spans[i].end);
            goto end;
        }
        prev = &spans[i];
    }
    if ((st = vtr_safetensors_index(out, err)) != VTR_OK)
        goto end;
    if (meta)
        out->metadata = json_incref(meta);
end:
    free(spans);
    json_decref(root);
    if (st != VTR_OK)
        vtr_safetensors_close(out);
    return st;
}

vtr_status vtr_safetensors_open(const char *path, vtr_safetensors *out, vtr_error *err)
{
    return vtr_safetensors_open_with(path, vtr_safetensors_parse, out, err);
}

vtr_status vtr_safetensors_open_with(const char *path, vtr_safetensors_parser parse,
                                     vtr_safetensors *out, vtr_error *err)
{
    memset(out, 0, sizeof *out);
    vtr_mapped_file map;
    vtr_status st = vtr_map_file(path, &map, err);
    if (st != VTR_OK)
        return st; /* the message already names the path */
    st = parse(map.data, map.size, out, err);
    if (st != VTR_OK) {
        vtr_error_context(err, "%s", path);
        vtr_unmap_file(&map);
        return st;
    }
    out->map = map;
    return VTR_OK;
}

const vtr_tensor *vtr_safetensors_find(const vtr_safetensors *st, const char *name)
{
    if (!st->count)
        return NULL;
    vtr_safetensors_entry key = {.name = (char *)(uintptr_t)name};
    const vtr_safetensors_entry *found =
        bsearch(&key, st->entries, st->count, sizeof *st->entries, compare_entries);
    return found ? &found->tensor : NULL;
}

vtr_status vtr_safetensors_index(vtr_safetensors *st, vtr_error *err)
{
    qsort(st->entries, st->count, sizeof *st->entries, compare_entries);
    for (size_t i = 1; i < st->count; i++) {
        const char *name = st->entries[i].name;
        if (strcmp(st->entries[i - 1].name, name) == 0) {
            char shown[ST_MAX_MESSAGE_NAME];
            return vtr_fail(err, VTR_ERR_FORMAT, "two tensors named '%s'",
                            vtr_printable(name, strlen(name), shown, sizeof shown));
        }
    }
    return VTR_OK;
}

const char *vtr_safetensors_meta(const vtr_safetensors *st, const char *key)
{
    return st->metadata ? json_string_value(json_object_get(st->metadata, key)) : NULL;
}

void vtr_safetensors_close(vtr_safetensors *st)
{
    if (st->entries)
        for (size_t i = 0; i < st->count; i++)
            free(st->entries[i].name);
    free(st->entries);
    json_decref(st->metadata);
    vtr_unmap_file(&st->map);
    memset(st, 0, sizeof *st);
}

/* ---- writer ---- */

/* Builds the header object, and sets order[] to the tensors' order in the buffer and
 * sizes[] to their byte sizes. */
static vtr_status build_header(size_t count, const char *const *names, const vtr_tensor *tensors,
                               const json_t *metadata, const char *what, size_t *order,
                               size_t *sizes, json_t **out, vtr_error *err)
{
    vtr_status st = VTR_OK;
    json_t *root = json_object(), *entry = NULL;
    if (!root)
        goto nomem;
    if (metadata) {
        if ((st = check_metadata(metadata, VTR_ERR_INVALID, err)) != VTR_OK) {
            vtr_error_context(err, "%s", what);
            goto end;
        }
        if (json_object_set_new(root, "__metadata__", json_deep_copy(metadata)) != 0)
            goto nomem;
    }
    for (size_t i = 0; i < count; i++) {
        const vtr_tensor *t = &tensors[i];
        char name[ST_MAX_MESSAGE_NAME];
        if (!names[i] || !names[i][0] || strcmp(names[i], "__metadata__") == 0) {
            st = vtr_fail(err, VTR_ERR_INVALID, "%s: tensor %zu: invalid name '%s'", what, i,
                          names[i] ? vtr_printable(names[i], strlen(names[i]), name, sizeof name)
                                   : "(null)");
            goto end;
        }
        vtr_printable(names[i], strlen(names[i]), name, sizeof name);
        if (json_object_get(root, names[i])) {
            st = vtr_fail(err, VTR_ERR_INVALID, "%s: two tensors named '%s'", what, name);
            goto end;
        }
        const char *dtype = (unsigned)t->dtype < VTR_DTYPE_COUNT ? st_dtype_name(t->dtype) : NULL;
        if (!dtype) {
            st = vtr_fail(err, VTR_ERR_INVALID, "%s: tensor '%s': invalid dtype %d", what, name,
                          (int)t->dtype);
            goto end;
        }
        vtr_error shape_err;
        if (vtr_shape_nbytes(t->dtype, t->ndim, t->shape, SIZE_MAX, &sizes[i], &shape_err) !=
            VTR_OK) {
            st = vtr_fail(err, VTR_ERR_INVALID, "%s: tensor '%s': %s", what, name, shape_err.msg);
            goto end;
        }
        if (sizes[i] > 0 && !t->data) {
            st = vtr_fail(err, VTR_ERR_INVALID, "%s: tensor '%s' has no data", what, name);
            goto end;
        }
        json_t *shape = json_array();
        entry = json_pack("{s:s, s:o*}", "dtype", dtype, "shape", shape);
        if (!shape || !entry)
            goto nomem;
        for (int d = 0; d < t->ndim; d++)
            if (json_array_append_new(shape, json_integer(t->shape[d])) != 0)
                goto nomem;
        /* json_object_set_new checks that the key is valid UTF-8 */
        if (json_object_set_new(root, names[i], entry) != 0) {
            entry = NULL;
            st = vtr_fail(err, VTR_ERR_INVALID, "%s: tensor name '%s' is not valid UTF-8", what,
                          name);
            goto end;
        }
        entry = NULL;
    }

    /* Largest elements first: every offset is then a multiple of the element size. */
    size_t placed = 0;
    for (size_t size = 8; size >= 1; size /= 2)
        for (size_t i = 0; i < count; i++)
            if (vtr_dtype_size(tensors[i].dtype) == size)
                order[placed++] = i;
    uint64_t offset = 0;
    for (size_t k = 0; k < count; k++) {
        size_t i = order[k];
        json_t *offsets = json_pack("[I,I]", (json_int_t)offset, (json_int_t)(offset + sizes[i]));
        if (!offsets ||
            json_object_set_new(json_object_get(root, names[i]), "data_offsets", offsets) != 0)
            goto nomem;
        offset += sizes[i];
    }
    *out = root;
    return VTR_OK;
nomem:
    st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory for the safetensors header", what);
end:
    json_decref(entry);
    json_decref(root);
    return st;
}

vtr_status vtr_safetensors_write_stream(FILE *fp, size_t count, const char *const *names,
                                        const vtr_tensor *tensors, const json_t *metadata,
                                        const char *what, vtr_error *err)
{
    json_t *root = NULL;
    char *text = NULL;
    size_t *order = calloc(count ? count : 1, sizeof *order);
    size_t *sizes = calloc(count ? count : 1, sizeof *sizes);
    vtr_status st = VTR_OK;
    if (!order || !sizes) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", what);
        goto end;
    }
    if ((st = build_header(count, names, tensors, metadata, what, order, sizes, &root, err)) !=
        VTR_OK)
        goto end;
    if (!(text = json_dumps(root, JSON_COMPACT))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory for the safetensors header", what);
        goto end;
    }
    size_t text_len = strlen(text);
    size_t header_len = (text_len + 7) / 8 * 8;
    if (header_len > VTR_SAFETENSORS_MAX_HEADER) {
        st = vtr_fail(err, VTR_ERR_INVALID,
                      "%s: safetensors header of %zu bytes exceeds the limit of %u", what,
                      header_len, VTR_SAFETENSORS_MAX_HEADER);
        goto end;
    }
    unsigned char size_field[ST_SIZE_FIELD];
    for (int i = 0; i < ST_SIZE_FIELD; i++)
        size_field[i] = (unsigned char)((uint64_t)header_len >> (8 * i));
    static const char spaces[] = "       "; /* 7: the most padding needed */
    if ((st = vtr_write_all(fp, size_field, sizeof size_field, what, err)) != VTR_OK ||
        (st = vtr_write_all(fp, text, text_len, what, err)) != VTR_OK ||
        (st = vtr_write_all(fp, spaces, header_len - text_len, what, err)) != VTR_OK)
        goto end;
    for (size_t k = 0; k < count; k++)
        if ((st = vtr_write_all(fp, tensors[order[k]].data, sizes[order[k]], what, err)) != VTR_OK)
            goto end;
end:
    free(text);
    json_decref(root);
    free(order);
    free(sizes);
    return st;
}

vtr_status vtr_safetensors_save(const char *path, size_t count, const char *const *names,
                                const vtr_tensor *tensors, const json_t *metadata, vtr_error *err)
{
    vtr_atomic_file file;
    vtr_status st = vtr_atomic_open(&file, path, err);
    if (st != VTR_OK)
        return st;
    st = vtr_safetensors_write_stream(file.fp, count, names, tensors, metadata, path, err);
    if (st == VTR_OK)
        st = vtr_atomic_commit(&file, err);
    else
        vtr_atomic_abort(&file);
    return st;
}
