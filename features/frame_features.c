/* vtr-features' CNN mode (frame_features.h). */
#define _POSIX_C_SOURCE 200809L
#include "features/frame_features.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/record.h"
#include "lib/version.h"

struct vtr_frame_features {
    vtr_extractor *x;
    json_t *extractor; /* the provenance, added to every item's metadata */
    /* during vtr_frame_features_run */
    vtr_item_output *out;
    const vtr_item_report *report;
    const vtr_shard *shard;
    int64_t position; /* of the next record, over all streams */
};

/* a float option as the decimal it was given as (7 significant digits), for metadata */
static double decimal(float f)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.7g", (double)f);
    return strtod(buf, NULL);
}

/* The extractor's emit: writes one item. Returns non-OK only when the output is broken. */
static vtr_status write_item(void *ctx, const vtr_extractor_item *item, vtr_error *err)
{
    vtr_frame_features *f = ctx;
    json_t *ex = json_deep_copy(f->extractor);
    if (!ex || json_object_set_new(item->meta, "extractor", ex) != 0)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    if (json_is_true(json_object_get(ex, "grid")))
        json_object_set_new(ex, "grid_size", json_pack("[i,i]", item->grid_h, item->grid_w));
    vtr_error e;
    vtr_status st = vtr_item_output_write(f->out, item->key, &item->features, item->meta, &e);
    if (st != VTR_OK && vtr_item_output_broken(f->out)) {
        *err = e;
        return st;
    }
    f->report->item(f->report->ctx, item->key, st == VTR_OK ? NULL : &e);
    return VTR_OK;
}

vtr_status vtr_frame_features_new(vtr_backbone *b, vtr_backbone_arch arch, const char *weights,
                                  const char *sha256, const vtr_extractor_options *xo, bool half,
                                  vtr_frame_features **out, vtr_error *err)
{
    *out = NULL;
    vtr_frame_features *f = calloc(1, sizeof *f);
    if (!f)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    const vtr_preprocess_options *p = &xo->pre;
    f->extractor = json_pack(
        "{s:s, s:s, s:s, s:b, s:s, s:s, s:i, s:{s:i, s:i, s:[f,f,f], s:[f,f,f]}, s:s+}",
        "arch", vtr_backbone_arch_name(arch), "weights", weights, "sha256", sha256, "grid",
        xo->grid, "dtype", half ? "float16" : "float32", "compute",
        vtr_backbone_bf16(b) ? "bfloat16" : "float32", "dim", vtr_backbone_dim(b), "preprocess",
        "resize", p->resize, "crop", p->crop, "mean", decimal(p->mean[0]), decimal(p->mean[1]),
        decimal(p->mean[2]), "std", decimal(p->std[0]), decimal(p->std[1]), decimal(p->std[2]),
        "version", "vtr-features ", vtr_version);
    vtr_status st = f->extractor ? vtr_extractor_new(b, xo, write_item, f, &f->x, err)
                                 : vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    if (st != VTR_OK) {
        vtr_frame_features_free(f);
        return st;
    }
    *out = f;
    return VTR_OK;
}

void vtr_frame_features_free(vtr_frame_features *f)
{
    if (!f)
        return;
    vtr_extractor_free(f->x);
    json_decref(f->extractor);
    free(f);
}

const json_t *vtr_frame_features_provenance(const vtr_frame_features *f)
{
    return f->extractor;
}

/* Feeds one record stream to the extractor. Non-OK (reported) when the run must stop;
 * stream and item errors are reported and the stream ends or goes on. */
static vtr_status add_stream(vtr_frame_features *f, FILE *in, const char *name)
{
    const vtr_item_report *rep = f->report;
    vtr_error err;
    vtr_record_reader *reader = vtr_record_reader_new(in, name);
    if (!reader) {
        vtr_status st = vtr_fail(&err, VTR_ERR_NOMEM, "out of memory");
        rep->error(rep->ctx, NULL, &err);
        return st;
    }
    vtr_status st = VTR_OK;
    for (;;) {
        vtr_record rec;
        bool got;
        vtr_error_clear(&err);
        if (vtr_record_read(reader, &rec, &got, &err) != VTR_OK) {
            rep->error(rep->ctx, NULL, &err);
            break;
        }
        if (!got)
            break;
        if (!vtr_shard_takes(f->shard, f->position++))
            continue;
        if (vtr_extractor_check_frames(f->x, &rec.array, &err) != VTR_OK) {
            rep->error(rep->ctx, rec.key, &err);
            continue;
        }
        if ((st = vtr_extractor_add(f->x, rec.key, rec.meta, &rec.array, &err)) != VTR_OK) {
            rep->error(rep->ctx, rec.key, &err);
            break;
        }
    }
    vtr_record_reader_free(reader);
    return st;
}

vtr_status vtr_frame_features_run(vtr_frame_features *f, char *const *inputs, int n,
                                  const vtr_shard *shard, vtr_item_output *out,
                                  const vtr_item_report *report)
{
    f->out = out;
    f->report = report;
    f->shard = shard;
    f->position = 0;
    vtr_status st = VTR_OK;
    if (n == 0)
        st = add_stream(f, stdin, "stdin");
    for (int i = 0; i < n && st == VTR_OK; i++) {
        if (!strcmp(inputs[i], "-")) {
            st = add_stream(f, stdin, "stdin");
            continue;
        }
        FILE *in = fopen(inputs[i], "rb");
        if (!in) {
            vtr_error err;
            vtr_fail_errno(&err, "%s", inputs[i]);
            report->error(report->ctx, NULL, &err);
            continue;
        }
        st = add_stream(f, in, inputs[i]);
        fclose(in);
    }
    vtr_error err;
    if (st == VTR_OK && (st = vtr_extractor_finish(f->x, &err)) != VTR_OK)
        report->error(report->ctx, NULL, &err);
    return st;
}
