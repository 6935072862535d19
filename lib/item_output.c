/* A program's item output (item_output.h). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "lib/item_output.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <string.h>

#include "lib/file.h"
#include "lib/keyed_files.h"
#include "lib/npy_item.h"
#include "lib/record.h"
#include "lib/record_output.h"
#include "lib/string_table.h"

typedef enum destination { DEST_RECORDS, DEST_DIR, DEST_STORE, DEST_SINK } destination;

struct vtr_item_output {
    destination dest;
    vtr_record_output records;       /* DEST_RECORDS */
    const char *dir;                 /* DEST_DIR */
    vtr_feature_store_writer *store; /* DEST_STORE; NULL once finished */
    vtr_item_sink sink;              /* DEST_SINK; add NULL once closed */
    bool half;
    bool broken;
    vtr_string_table *keys; /* the keys written, numbered in order */
    char **sources;         /* (sources_cap) each written key's source (owned), or NULL */
    size_t sources_cap;
    uint16_t *half_buf; /* (half_cap) float16 values of the item being written */
    size_t half_cap;
};

vtr_status vtr_item_output_open(const vtr_item_output_options *opt, vtr_item_output **out,
                                vtr_error *err)
{
    *out = NULL;
    vtr_item_output *o = calloc(1, sizeof *o);
    if (!o) {
        if (opt->sink)
            opt->sink->close(opt->sink->ctx);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    o->half = opt->half;
    vtr_status st;
    if (!(o->keys = vtr_string_table_new())) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        if (opt->sink)
            opt->sink->close(opt->sink->ctx);
    } else if (opt->sink) {
        o->dest = DEST_SINK;
        o->sink = *opt->sink;
        st = VTR_OK;
    } else if (opt->dir) {
        o->dest = DEST_DIR;
        o->dir = opt->dir;
        st = vtr_make_dirs(opt->dir, err);
    } else if (opt->store) {
        o->dest = DEST_STORE;
        vtr_feature_store_options so = *opt->store_options;
        so.dtype = opt->half ? VTR_F16 : VTR_F32;
        st = vtr_feature_store_writer_open(opt->store, &so, &o->store, err);
    } else {
        o->dest = DEST_RECORDS;
        st = vtr_record_output_open(&o->records, opt->path, opt->alternatives, err);
    }
    if (st != VTR_OK) {
        vtr_item_output_close(o);
        return st;
    }
    *out = o;
    return VTR_OK;
}

/* t as it is written: as given, or its float32 values converted to float16 into o's
 * buffer. */
static vtr_status written_array(vtr_item_output *o, const vtr_tensor *t, vtr_tensor *out,
                                vtr_error *err)
{
    *out = *t;
    if (!o->half || t->dtype != VTR_F32 || o->dest == DEST_STORE)
        return VTR_OK;
    size_t n = (size_t)vtr_tensor_numel(t);
    if (n > o->half_cap) {
        free(o->half_buf);
        o->half_cap = 0;
        if (!(o->half_buf = malloc(n * sizeof *o->half_buf)))
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        o->half_cap = n;
    }
    const float *f = t->data;
    for (size_t i = 0; i < n; i++)
        o->half_buf[i] = vtr_float_to_half(f[i]);
    out->dtype = VTR_F16;
    out->data = o->half_buf;
    return VTR_OK;
}

vtr_status vtr_item_output_check(const vtr_item_output *o, const char *key, const char *source,
                                 vtr_error *err)
{
    int64_t k = vtr_string_table_find(o->keys, key, strlen(key));
    if (k >= 0 && o->sources[k] && source)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: %s and %s have the same key; the second is "
                        "not written", key, o->sources[k], source);
    if (k >= 0)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: an item of this key was written before; "
                        "this one is not", key);
    switch (o->dest) {
    case DEST_DIR: return vtr_key_check_file_name(key, "--out-dir", err);
    case DEST_RECORDS: {
        vtr_status st = vtr_record_key_check(key, err);
        if (st != VTR_OK)
            vtr_error_context(err, "%s", o->records.name);
        return st;
    }
    default: return VTR_OK; /* the store and the sink check at add */
    }
}

/* Remembers that key was written, with the source its metadata names. */
static vtr_status remember(vtr_item_output *o, const char *key, const json_t *meta,
                           vtr_error *err)
{
    size_t n = (size_t)vtr_string_table_count(o->keys);
    if (n == o->sources_cap) {
        size_t cap = n ? 2 * n : 256;
        char **grown = realloc(o->sources, cap * sizeof *grown);
        if (!grown)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        o->sources = grown;
        o->sources_cap = cap;
    }
    const char *source = json_string_value(json_object_get(meta, "source"));
    if (source && !(o->sources[n] = strdup(source)))
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    if (!source)
        o->sources[n] = NULL;
    vtr_status st = vtr_string_table_insert(o->keys, key, strlen(key), NULL, NULL, err);
    if (st != VTR_OK)
        free(o->sources[n]);
    return st;
}

vtr_status vtr_item_output_write(vtr_item_output *o, const char *key, const vtr_tensor *t,
                                 const json_t *meta, vtr_error *err)
{
    if (o->broken)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: the output failed before", key);
    vtr_status st = vtr_item_output_check(
        o, key, json_string_value(json_object_get(meta, "source")), err);
    if (st != VTR_OK)
        return st; /* refused; the output goes on */
    vtr_tensor w;
    st = written_array(o, t, &w, err);
    if (st != VTR_OK) {
        o->broken = true;
        return st;
    }
    switch (o->dest) {
    case DEST_RECORDS:
        st = vtr_record_write(o->records.fp, key, meta, &w, o->records.name, err);
        if (st == VTR_OK && o->records.fp == stdout && fflush(stdout) != 0) /* a pipe */
            st = vtr_fail_errno(err, "stdout");
        o->broken = st != VTR_OK && st != VTR_ERR_INVALID; /* refused before a byte */
        break;
    case DEST_DIR: st = vtr_npy_item_save(o->dir, key, &w, meta, err); break;
    case DEST_STORE:
        st = vtr_feature_store_writer_add(o->store, key, &w, err);
        o->broken = st != VTR_OK && st != VTR_ERR_INVALID;
        break;
    case DEST_SINK:
        st = o->sink.add(o->sink.ctx, key, &w, meta, err);
        o->broken = st != VTR_OK && st != VTR_ERR_INVALID;
        break;
    }
    if (st == VTR_OK && (st = remember(o, key, meta, err)) != VTR_OK)
        o->broken = true;
    return st;
}

bool vtr_item_output_broken(const vtr_item_output *o)
{
    return o->broken;
}

vtr_status vtr_item_output_commit(vtr_item_output *o, vtr_error *err)
{
    o->broken = true; /* only close remains */
    switch (o->dest) {
    case DEST_RECORDS: return vtr_record_output_commit(&o->records, err);
    case DEST_DIR: return VTR_OK;
    case DEST_STORE: {
        vtr_feature_store_writer *w = o->store;
        o->store = NULL;
        return vtr_feature_store_writer_finish(w, err); /* frees w */
    }
    case DEST_SINK: return o->sink.commit(o->sink.ctx, err);
    }
    return VTR_OK;
}

void vtr_item_output_close(vtr_item_output *o)
{
    if (!o)
        return;
    vtr_record_output_abort(&o->records);
    vtr_feature_store_writer_abort(o->store);
    if (o->dest == DEST_SINK)
        o->sink.close(o->sink.ctx);
    for (int64_t i = 0; o->keys && i < vtr_string_table_count(o->keys); i++)
        free(o->sources[i]);
    free(o->sources);
    vtr_string_table_free(o->keys);
    free(o->half_buf);
    free(o);
}
