/* Frames -> feature sets: what vtr-features does per item, as a library.
 *
 * Items (a key, metadata and frames uint8 (N, H, W, 3) from a frame record) go in one after
 * the other; their frames are preprocessed (features/preprocess.h) into batches of
 * `batch` frames that span items, so that the backbone always runs full batches except
 * the last; each item comes out, in the order added, once all its frames are through:
 * float32 (N, D) pooled features, or (N * G, D) grid features (G = gh * gw cells per
 * frame, frame after frame, cells row-major). An item's features do not depend on the
 * batch it shared (the backbone treats frames independently), up to float32 rounding of
 * the engine's batch-size-dependent algorithms.
 *
 * Memory: one batch of preprocessed frames and the features of the items not yet out (at
 * most a batch's worth of frames beyond the item being added).
 */
#ifndef VTR_EXTRACTOR_H
#define VTR_EXTRACTOR_H

#include <jansson.h>
#include <stdbool.h>

#include "features/backbone.h"
#include "features/preprocess.h"
#include "lib/error.h"
#include "lib/tensor.h"

typedef struct vtr_extractor_options {
    int batch;                  /* frames per backbone call, >= 1 */
    bool grid;                  /* grid features instead of pooled ones */
    vtr_preprocess_options pre; /* vtr_preprocess_defaults: torchvision's eval transform */
} vtr_extractor_options;

/* batch 32, pooled, torchvision's transform */
void vtr_extractor_defaults(vtr_extractor_options *opt);

/* One finished item, valid during the emit call only. */
typedef struct vtr_extractor_item {
    const char *key;
    json_t *meta;          /* the metadata given to vtr_extractor_add (a copy; may be changed) */
    int64_t frames;        /* N */
    int grid_h, grid_w;    /* cells per frame (1 x 1 for pooled features) */
    vtr_tensor features;   /* float32 (N, D) or (N * grid_h * grid_w, D) */
} vtr_extractor_item;

/* Receives the items. A status other than VTR_OK stops the extractor: vtr_extractor_add
 * or _finish returns it (and err) to their caller. */
typedef vtr_status (*vtr_extractor_emit_fn)(void *ctx, const vtr_extractor_item *item,
                                            vtr_error *err);

typedef struct vtr_extractor vtr_extractor;

/* An extractor over backbone b (borrowed; it must outlive the extractor). VTR_ERR_INVALID
 * for bad options, VTR_ERR_NOMEM. *out is NULL on failure. */
vtr_status vtr_extractor_new(vtr_backbone *b, const vtr_extractor_options *opt,
                             vtr_extractor_emit_fn emit, void *ctx, vtr_extractor **out,
                             vtr_error *err);

void vtr_extractor_free(vtr_extractor *x);

/* Whether frames can be an item: uint8, 4-D (N, H, W, 3), H and W >= 1 (N may be 0), at
 * most 2^31 frames, and a preprocessed size the backbone takes. VTR_ERR_INVALID saying
 * what the array is instead ("float32 (2, 64, 64, 3), not uint8 frames (N, H, W, 3)"). */
vtr_status vtr_extractor_check_frames(const vtr_extractor *x, const vtr_tensor *frames,
                                      vtr_error *err);

/* Queues an item. key and meta are copied (meta may be NULL: {}); frames is read during
 * the call only. Frames that fail vtr_extractor_check_frames give its VTR_ERR_INVALID
 * and queue nothing; callers that must tell such an item error from a failure of the
 * backbone or of emit (which leave the extractor unusable) call the check first.
 * May run batches and emit this and earlier items. */
vtr_status vtr_extractor_add(vtr_extractor *x, const char *key, const json_t *meta,
                             const vtr_tensor *frames, vtr_error *err);

/* Runs the last, partial batch and emits every item still queued. */
vtr_status vtr_extractor_finish(vtr_extractor *x, vtr_error *err);

#endif
