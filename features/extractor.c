/* Batching frames across items for the backbone (features/extractor.h). */
#define _POSIX_C_SOURCE 200809L
#include "extractor.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct pending {
    char *key;
    json_t *meta;
    int64_t frames, done;
    int grid_h, grid_w;
    float *features; /* (frames, cells, D) */
} pending;

struct vtr_extractor {
    vtr_backbone *backbone;
    vtr_extractor_options opt;
    vtr_extractor_emit_fn emit;
    void *ctx;
    int dim;
    /* items queued: queue[0 .. n_queue), the first with sequence number first_seq */
    pending *queue;
    size_t n_queue, cap_queue;
    int64_t first_seq;
    /* the batch being filled: `count` frames of oh x ow, frame i from item owner_seq[i],
     * frame owner_frame[i] of it */
    int count, oh, ow;
    size_t input_cap, output_cap; /* floats */
    float *input;                 /* (batch, 3, oh, ow) */
    float *output;                /* (batch, cells, D) */
    int64_t *owner_seq, *owner_frame;
    bool broken;
};

void vtr_extractor_defaults(vtr_extractor_options *opt)
{
    opt->batch = 32;
    opt->grid = false;
    vtr_preprocess_defaults(&opt->pre);
}

static void pending_free(pending *p)
{
    free(p->key);
    json_decref(p->meta);
    free(p->features);
}

void vtr_extractor_free(vtr_extractor *x)
{
    if (!x)
        return;
    for (size_t i = 0; i < x->n_queue; i++)
        pending_free(&x->queue[i]);
    free(x->queue);
    free(x->input);
    free(x->output);
    free(x->owner_seq);
    free(x->owner_frame);
    free(x);
}

vtr_status vtr_extractor_new(vtr_backbone *b, const vtr_extractor_options *opt,
                             vtr_extractor_emit_fn emit, void *ctx, vtr_extractor **out,
                             vtr_error *err)
{
    *out = NULL;
    if (opt->batch < 1 || opt->batch > 65536)
        return vtr_fail(err, VTR_ERR_INVALID, "batch %d is not in 1..65536", opt->batch);
    vtr_status st = vtr_preprocess_check(&opt->pre, err);
    if (st != VTR_OK)
        return st;
    vtr_extractor *x = calloc(1, sizeof *x);
    if (!x)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    x->backbone = b;
    x->opt = *opt;
    x->emit = emit;
    x->ctx = ctx;
    x->dim = vtr_backbone_dim(b);
    x->owner_seq = malloc((size_t)opt->batch * sizeof *x->owner_seq);
    x->owner_frame = malloc((size_t)opt->batch * sizeof *x->owner_frame);
    if (!x->owner_seq || !x->owner_frame) {
        vtr_extractor_free(x);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    *out = x;
    return VTR_OK;
}

vtr_status vtr_extractor_check_frames(const vtr_extractor *x, const vtr_tensor *frames,
                                      vtr_error *err)
{
    char shape[96];
    if (frames->dtype != VTR_U8 || frames->ndim != 4 || frames->shape[3] != 3 ||
        frames->shape[1] < 1 || frames->shape[2] < 1 || frames->shape[1] > INT_MAX ||
        frames->shape[2] > INT_MAX)
        return vtr_fail(err, VTR_ERR_INVALID, "%s %s, not uint8 RGB frames (N, H, W, 3)",
                        vtr_dtype_name(frames->dtype),
                        vtr_shape_str(frames->ndim, frames->shape, shape, sizeof shape));
    if (frames->shape[0] > INT_MAX)
        return vtr_fail(err, VTR_ERR_INVALID, "%lld frames are too many",
                        (long long)frames->shape[0]);
    int h = (int)frames->shape[1], w = (int)frames->shape[2], oh, ow, gh, gw;
    vtr_preprocess_size(&x->opt.pre, h, w, &oh, &ow);
    if (oh < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "frames of %dx%d cannot be resized to a shorter "
                        "side of %d", w, h, x->opt.pre.resize);
    vtr_backbone_grid_size(x->backbone, oh, ow, &gh, &gw);
    if (gh < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "frames of %dx%d (%dx%d after preprocessing) "
                        "are too small for the backbone", w, h, ow, oh);
    return VTR_OK;
}

static size_t cells_of(const vtr_extractor *x, const pending *p)
{
    return x->opt.grid ? (size_t)p->grid_h * p->grid_w : 1;
}

/* Emits the finished items at the head of the queue. */
static vtr_status emit_ready(vtr_extractor *x, vtr_error *err)
{
    size_t done = 0;
    vtr_status st = VTR_OK;
    while (done < x->n_queue && x->queue[done].done == x->queue[done].frames) {
        pending *p = &x->queue[done];
        vtr_extractor_item item = {
            .key = p->key,
            .meta = p->meta,
            .frames = p->frames,
            .grid_h = x->opt.grid ? p->grid_h : 1,
            .grid_w = x->opt.grid ? p->grid_w : 1,
            .features = {.dtype = VTR_F32, .ndim = 2,
                         .shape = {p->frames * (int64_t)cells_of(x, p), x->dim},
                         .data = p->features},
        };
        st = x->emit(x->ctx, &item, err);
        pending_free(p);
        done++;
        if (st != VTR_OK) {
            x->broken = true;
            break;
        }
    }
    if (done) {
        memmove(x->queue, x->queue + done, (x->n_queue - done) * sizeof *x->queue);
        x->n_queue -= done;
        x->first_seq += (int64_t)done;
    }
    return st;
}

/* Runs the batch and hands each frame's features to its item. */
static vtr_status run_batch(vtr_extractor *x, vtr_error *err)
{
    if (!x->count)
        return VTR_OK;
    int gh, gw;
    vtr_backbone_grid_size(x->backbone, x->oh, x->ow, &gh, &gw);
    size_t per_frame = (x->opt.grid ? (size_t)gh * gw : 1) * (size_t)x->dim;
    size_t need = (size_t)x->opt.batch * per_frame;
    if (need > x->output_cap) {
        free(x->output);
        x->output_cap = 0;
        if (!(x->output = malloc(need * sizeof *x->output)))
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for features");
        x->output_cap = need;
    }
    vtr_status st = vtr_backbone_forward(x->backbone, x->input, x->count, x->oh, x->ow,
                                         x->opt.grid, x->output, err);
    if (st != VTR_OK) {
        x->broken = true;
        return st;
    }
    for (int i = 0; i < x->count; i++) {
        pending *p = &x->queue[x->owner_seq[i] - x->first_seq];
        memcpy(p->features + (size_t)x->owner_frame[i] * per_frame,
               x->output + (size_t)i * per_frame, per_frame * sizeof *x->output);
        p->done++;
    }
    x->count = 0;
    return emit_ready(x, err);
}

vtr_status vtr_extractor_add(vtr_extractor *x, const char *key, const json_t *meta,
                             const vtr_tensor *frames, vtr_error *err)
{
    vtr_status st;
    if (x->broken)
        return vtr_fail(err, VTR_ERR_INVALID, "extractor: used after a failure");
    if ((st = vtr_extractor_check_frames(x, frames, err)) != VTR_OK)
        return st;
    int n = (int)frames->shape[0], h = (int)frames->shape[1], w = (int)frames->shape[2];
    int oh, ow;
    vtr_preprocess_size(&x->opt.pre, h, w, &oh, &ow);

    /* queue the item */
    if (x->n_queue == x->cap_queue) {
        size_t cap = x->cap_queue ? 2 * x->cap_queue : 16;
        pending *q = realloc(x->queue, cap * sizeof *q);
        if (!q)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        x->queue = q;
        x->cap_queue = cap;
    }
    pending p = {.frames = n};
    vtr_backbone_grid_size(x->backbone, oh, ow, &p.grid_h, &p.grid_w);
    size_t per_frame = cells_of(x, &p) * (size_t)x->dim;
    p.key = strdup(key);
    p.meta = meta ? json_deep_copy(meta) : json_object();
    size_t nf = (size_t)n * per_frame;
    p.features = malloc((nf ? nf : 1) * sizeof(float));
    if (!p.key || !p.meta || !p.features) {
        pending_free(&p);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for item '%s'", key);
    }
    int64_t seq = x->first_seq + (int64_t)x->n_queue;
    x->queue[x->n_queue++] = p;

    /* its frames into batches */
    size_t in_frame = (size_t)3 * oh * ow, frame_bytes = (size_t)h * w * 3;
    const uint8_t *data = frames->data;
    int f = 0;
    while (f < n) {
        if (x->count && (x->oh != oh || x->ow != ow) && (st = run_batch(x, err)) != VTR_OK)
            return st;
        if (!x->count) {
            size_t need = (size_t)x->opt.batch * in_frame;
            if (need > x->input_cap) {
                free(x->input);
                x->input_cap = 0;
                if (!(x->input = malloc(need * sizeof *x->input))) {
                    x->broken = true;
                    return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for a batch");
                }
                x->input_cap = need;
            }
            x->oh = oh;
            x->ow = ow;
        }
        int take = n - f < x->opt.batch - x->count ? n - f : x->opt.batch - x->count;
        int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : failed)
        for (int j = 0; j < take; j++) {
            vtr_error e;
            if (vtr_preprocess_frame(data + (size_t)(f + j) * frame_bytes, h, w, &x->opt.pre,
                                     x->input + (size_t)(x->count + j) * in_frame, &e) != VTR_OK)
                failed++;
        }
        if (failed) { /* only allocation can fail once the frames checked */
            x->broken = true;
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory preprocessing '%s'", key);
        }
        for (int j = 0; j < take; j++) {
            x->owner_seq[x->count + j] = seq;
            x->owner_frame[x->count + j] = f + j;
        }
        x->count += take;
        f += take;
        if (x->count == x->opt.batch && (st = run_batch(x, err)) != VTR_OK)
            return st;
    }
    return emit_ready(x, err); /* an item without frames, or one that just completed */
}

vtr_status vtr_extractor_finish(vtr_extractor *x, vtr_error *err)
{
    if (x->broken)
        return vtr_fail(err, VTR_ERR_INVALID, "extractor: used after a failure");
    vtr_status st = run_batch(x, err);
    if (st == VTR_OK)
        st = emit_ready(x, err);
    return st;
}
